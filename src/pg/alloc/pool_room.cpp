/*
 * alloc/pool_room.cpp: making room in a full pool table (alloc/pool.cpp's
 * claim_slot_locked): a slot that can be taken at once, or a batch of pools
 * marked for their allocators to give back.
 */
#include "internal.h"
#include "pool.h"

extern "C" {
#include "utils/timestamp.h"
}

/* A pool used more recently than this is not taken without its allocator. */
#define HILO_POOL_QUIET_MS 1000

/* Whether the allocator of `dboid` runs (per the snapshot `running`). */
static bool allocator_runs(const Oid *running, int nrunning, Oid dboid)
{
    for (int i = 0; i < nrunning; i++)
        if (running[i] == dboid)
            return true;
    return false;
}

/*
 * The table is full: a pool in use whose slot can be taken now, looking at
 * every one, least recently used first. An idle, quiet pool that no buffer
 * holds and that has nothing to give back (see claim_slot_locked); else,
 * with `steal`, the least recently used idle pool, those no buffer holds
 * first. -1 if none. pools_lock held exclusively.
 */
int hilo_pool_take_full_slot_locked(const bool *pinned, const Oid *running, int nrunning,
                                    TimestampTz now, bool steal)
{
    int cheap = -1, stealable = -1;
    TimestampTz cheap_used = 0, steal_used = 0;
    for (int i = 0; i < hilo_shared->num_pools; i++) {
        HiloPool *p = &hilo_shared->pools[i];
        if (!p->in_use)
            continue;
        LWLockAcquire(&p->lock, LW_SHARED);
        bool idle = p->ninflight == 0;
        bool nothing_to_give =
            p->nranges == 0 || p->monotonic || !allocator_runs(running, nrunning, p->dboid);
        TimestampTz used = p->last_used;
        LWLockRelease(&p->lock);
        if (!idle)
            continue;
        /* Not one just attached and waiting for its first refill. */
        bool quiet = used < now - (TimestampTz)HILO_POOL_QUIET_MS * 1000;
        if (!pinned[i] && nothing_to_give && quiet && (cheap < 0 || used < cheap_used)) {
            cheap = i;
            cheap_used = used;
        }
        /* Prefer pools no buffer holds: taking those wastes nothing more. */
        if (stealable < 0 || (pinned[stealable] && !pinned[i]) ||
            (pinned[stealable] == pinned[i] && used < steal_used)) {
            stealable = i;
            steal_used = used;
        }
    }
    if (cheap >= 0)
        return cheap;
    return steal ? stealable : -1;
}

/* Adds `dboid` to the databases whose allocators are to be woken. */
static void note_wake(Oid *wake, int *nwake, Oid dboid)
{
    for (int w = 0; w < *nwake; w++)
        if (wake[w] == dboid)
            return;
    wake[(*nwake)++] = dboid;
}

/*
 * No slot can be taken now: marks a batch of pools for their allocators to
 * give back, and notes in `wake` the databases whose allocators are to be
 * woken. pools_lock held exclusively.
 */
void hilo_pool_mark_release_batch_locked(const bool *pinned, TimestampTz now, Oid *wake, int *nwake)
{
    /* Ask allocators to give back a batch of the least recently used pools
     * (a small share of a small table). */
    int batch = Max(1, Min(HILO_POOL_RELEASE_BATCH, hilo_shared->num_pools / 32));
    /* Marks still pending (a pool used again since its mark is not) count
     * against the batch: waiting callers share it. */
    int pending = 0;
    for (int i = 0; i < hilo_shared->num_pools; i++) {
        HiloPool *p = &hilo_shared->pools[i];
        if (p->in_use && p->release_requested && p->last_used <= p->release_requested_at)
            pending++;
        /* A mark being carried out: its slot is free once the write-back
         * commits. (Counted, a caller that comes back meanwhile no longer
         * marks another pool, which TAP 005 caught now and then: a second
         * pool given back where one was needed.) */
        else if (p->releasing)
            pending++;
    }
    for (int k = pending; k < batch; k++) {
        /* The least recently used pool no buffer holds; if buffers hold
         * every one (each session keeps up to hilo.session_buffers), the
         * least recently used of all: its allocator releases it anyway,
         * and what buffers hold of it becomes a gap. */
        int victim = -1;
        TimestampTz victim_used = 0;
        for (int i = 0; i < hilo_shared->num_pools; i++) {
            HiloPool *p = &hilo_shared->pools[i];
            if (!p->in_use || (p->release_requested && p->last_used <= p->release_requested_at))
                continue;
            TimestampTz used = p->last_used; /* a hint; rechecked under the lock */
            if (victim < 0 || (pinned[victim] && !pinned[i]) ||
                (pinned[victim] == pinned[i] && used < victim_used)) {
                victim = i;
                victim_used = used;
            }
        }
        if (victim < 0)
            break;
        HiloPool *p = &hilo_shared->pools[victim];
        LWLockAcquire(&p->lock, LW_EXCLUSIVE);
        p->release_requested = true;
        p->release_requested_at = now;
        Oid dboid = p->dboid;
        LWLockRelease(&p->lock);
        note_wake(wake, nwake, dboid);
    }
    /* Marked earlier by others and still waiting: wake their allocators too. */
    for (int i = 0; i < hilo_shared->num_pools && *nwake < HILO_POOL_RELEASE_BATCH * 2; i++) {
        HiloPool *p = &hilo_shared->pools[i];
        if (!p->in_use || !p->release_requested)
            continue;
        note_wake(wake, nwake, p->dboid);
    }
}
