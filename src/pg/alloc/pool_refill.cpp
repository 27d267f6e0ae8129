/*
 * alloc/pool_refill.cpp: the pools as the allocator sees them: which pools
 * need a refill (jobs), reservations in flight between commit and
 * publication, borrowing from a pool for a take, draining a database's
 * pools at shutdown, rates, and giving idle pools back (which a caller asks
 * for with hilo_allocator_request_release, alloc/pool.cpp). Locking as in
 * alloc/pool.cpp.
 */
#include "internal.h"
#include "pool.h"

extern "C" {
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/timestamp.h"
}

/* ---- the allocator's side ---- */

/* Slots a refill leaves free beyond one per buffer out of the pool: for
 * buffers filled after it. */
#define HILO_POOL_RETURN_MARGIN 8

/* Buffers holding unissued IDs of the pool; its lock held. */
static uint32 buffers_out_of(int index, HiloPool *pool)
{
    uint64 generation = pg_atomic_read_u64(&pool->generation);
    uint32 n = 0;
    for (int s = 0; s < hilo_shared->num_requests; s++) {
        for (int b = 0; b < hilo_slot_nused(s); b++) {
            HiloBuffer *buf = &hilo_shared->slots[s].buffers[b];
            if (buf->in_use && buf->pool_index == index && buf->generation == generation &&
                (int64)pg_atomic_read_u64(&buf->next) < buf->end)
                n++;
        }
    }
    return n;
}

static void fill_job(HiloPool *pool, int index, HiloPoolJob *job)
{
    job->pool_index = index;
    job->generation = pg_atomic_read_u64(&pool->generation);
    job->creation = pool->creation;
    job->seq_id = pool->seq_id;
    job->monotonic = pool->monotonic;
    job->fresh_only = pool->monotonic;
    job->free_list_only = pool->free_list_pending && !pool->monotonic;
    job->amount = pool->target > pool->ids ? pool->target - pool->ids : 0;
    /* A pool fed from a fragmented free list borrows a large store first,
     * so that this refill moves thousands of free ranges in at once. */
    if ((pool->fragmented || pool->free_list_pending) && !pool->monotonic)
        (void)hilo_pool_store_claim(pool);
    /* A refill brings at most as many ranges as fit in flight and in the
     * pool, less room for the buffers out of it to come back: a range given
     * back to a full pool is a gap, and a refill that fills the pool to the
     * last slot made every buffer return of a fragmented pool one. */
    uint32 used =
        pool->nranges + pool->ninflight + buffers_out_of(index, pool) + HILO_POOL_RETURN_MARGIN;
    job->max_ranges = used < pool->capacity ? pool->capacity - used : 0;
    job->max_ranges = Min(job->max_ranges, pool->inflight_capacity - pool->ninflight);
    if (job->free_list_only)
        job->amount = UINT64_MAX / 4; /* all of it that fits */
}

/* What this allocator's last scan of pool_wants saw. */
static struct {
    Oid dboid;
    uint64 marks; /* pool_wants_marks read before it */
    bool left;    /* a flag stayed set (not done, or another database's) */
} last_scan = {InvalidOid, 0, true};

int hilo_pool_collect_jobs(Oid dboid, HiloPoolJob *jobs, int max_jobs)
{
    int n = 0;
    /* No flag set since the last scan, which left none: nothing to do
     * (the scan ran twice a batch). A flag set after this read moves the
     * count too, and is seen at the next pass. */
    uint64 marks = pg_atomic_read_u64(&hilo_shared->pool_wants_marks);
    pg_memory_barrier();
    if (!last_scan.left && last_scan.marks == marks && last_scan.dboid == dboid)
        return 0;
    bool left = false;
    int i;
    for (i = 0; i < hilo_shared->num_pools && n < max_jobs; i++) {
        HiloPool *pool = &hilo_shared->pools[i];
        /* This runs before every batch: locking each of hilo.max_sequences
         * pools cost the allocator about 0.4 ms a batch with the default
         * 12,000, and even reading a flag in each pool a third of its time.
         * pool_wants is set under the pool's lock with the flags below; a
         * mark set after this read is seen at the next pass (the allocator
         * is woken or passes periodically). */
        if (!hilo_shared->pool_wants[i]) {
            /* Eight flags at a time where none is set (the array is
             * cache-line aligned): byte by byte through a volatile
             * pointer, the scan was 3% of the allocator's time. */
            if (i % 8 == 0) {
                int next = i;
                while (next + 8 <= hilo_shared->num_pools &&
                       *(const volatile uint64 *)(hilo_shared->pool_wants + next) == 0)
                    next += 8;
                if (next > i)
                    i = next - 1; /* the loop's i++ reads the flag at next */
            }
            continue;
        }
        const volatile HiloPool *hint = pool;
        if (hint->dboid != dboid) {
            left = true;
            continue; /* another database's allocator clears it */
        }
        LWLockAcquire(&pool->lock, LW_EXCLUSIVE);
        if (pool->in_use && pool->dboid == dboid && pool->ninflight == 0 &&
            (pool->refill_wanted || pool->free_list_pending)) {
            fill_job(pool, i, &jobs[n]);
            if (jobs[n].max_ranges > 0 && jobs[n].amount > 0)
                n++;
            pool->refill_wanted = false;
        }
        /* Marked again (under this lock) by whatever sets a flag next. */
        if (!pool->in_use || !(pool->refill_wanted || pool->free_list_pending))
            hilo_shared->pool_wants[i] = 0;
        else
            left = true;
        LWLockRelease(&pool->lock);
    }
    last_scan.dboid = dboid;
    last_scan.marks = marks;
    last_scan.left = left || i < hilo_shared->num_pools; /* stopped early: the rest unseen */
    return n;
}

bool hilo_pool_job_for_request(int pool_index, uint64 min_ids, bool fresh_only, HiloPoolJob *job)
{
    HiloPool *pool = hilo_pool_at(pool_index);
    bool ok;
    LWLockAcquire(&pool->lock, LW_EXCLUSIVE);
    ok = pool->in_use && pool->dboid == MyDatabaseId;
    if (ok) {
        /* A caller had to wait: aim higher next time (up to 64 low waters). */
        pool->target = Min(Max(pool->target * 2, 2 * hilo_pool_low_water_ids(pool)),
                           64 * hilo_pool_low_water_ids(pool));
        /* A caller waits for more IDs than the inline array could bring
         * one per range: if the free list is fragmented, the take would
         * otherwise go to the allocator and pass over the lower IDs this
         * refill brought (recycling lowest first). The store goes back as
         * soon as the pool holds few ranges. */
        if (!pool->monotonic && !fresh_only && min_ids > HILO_POOL_INFLIGHT)
            (void)hilo_pool_store_claim(pool);
        fill_job(pool, pool_index, job);
        job->fresh_only |= fresh_only;
        if (job->fresh_only && job->free_list_only) {
            /* Not a drain of the free list after all: its "all that fits"
             * amount would claim 2^62 fresh IDs. Ask for what the pool lacks. */
            job->free_list_only = false;
            job->amount = pool->target > pool->ids ? pool->target - pool->ids : 0;
        }
        job->amount = Max(job->amount, Max(min_ids, (uint64)1));
        if (job->max_ranges == 0)
            job->max_ranges = 1;
    }
    LWLockRelease(&pool->lock);
    return ok;
}

uint64 hilo_pool_borrow(Oid dboid, uint64 creation, int32 seq_id, uint64 n, HiloRange *out,
                        uint32 out_capacity, uint32 *nout, int *pool_index, uint64 *generation)
{
    *nout = 0;
    *pool_index = hilo_pool_lookup(dboid, creation, seq_id, NULL);
    if (*pool_index < 0)
        return 0;
    HiloPool *pool = hilo_pool_at(*pool_index);
    uint64 taken = 0;
    LWLockAcquire(&pool->lock, LW_EXCLUSIVE);
    *generation = pg_atomic_read_u64(&pool->generation);
    if (pool_is(pool, dboid, creation, seq_id)) {
        taken = hilo_pool_list_take_lowest(pool, n, out, out_capacity, nout);
        hilo_pool_store_give_back_if_small(pool);
        pool->ids -= taken;
        pool->issued = hilo_pool_add_saturating(pool->issued, taken);
        hilo_issued_count(dboid, creation, seq_id, taken);
    }
    LWLockRelease(&pool->lock);
    return taken;
}

bool hilo_pool_add_inflight(int pool_index, uint64 generation, const HiloRange *ranges,
                            uint32 nranges)
{
    HiloPool *pool = hilo_pool_at(pool_index);
    bool ok;
    LWLockAcquire(&pool->lock, LW_EXCLUSIVE);
    ok = pg_atomic_read_u64(&pool->generation) == generation;
    /* The job was sized for the large store its pool had then; a caller
     * that found the pool nearly empty since may have given it back
     * (hilo_pool_store_give_back_if_small). Borrow one again rather than
     * roll the refill back: the next batch would make the same job, and a
     * session looking at the pool meanwhile would undo it again, batch
     * after batch (test/t/057). If none is free, the job is remade from
     * the room the pool has. */
    if (ok && pool->ninflight + nranges > pool->inflight_capacity)
        (void)hilo_pool_store_claim(pool);
    ok = ok && pool->ninflight + nranges <= pool->inflight_capacity;
    if (ok) {
        memcpy(pool->inflight + pool->ninflight, ranges, sizeof(HiloRange) * nranges);
        pool->ninflight += nranges;
    }
    LWLockRelease(&pool->lock);
    return ok;
}

void hilo_pool_settle_inflight(int pool_index, uint64 generation, const HiloRange *ranges,
                               uint32 nranges, bool committed, bool exhausted,
                               bool free_list_drained)
{
    HiloPool *pool = hilo_pool_at(pool_index);
    LWLockAcquire(&pool->lock, LW_EXCLUSIVE);
    if (pg_atomic_read_u64(&pool->generation) == generation) {
        pool->ninflight = 0;
        if (committed) {
            hilo_pool_put_locked(pool, ranges, nranges, false);
            /* Many ranges and more of them on the free list: it is
             * fragmented, and the next refill borrows a large store. */
            pool->fragmented = !free_list_drained && nranges >= HILO_POOL_INFLIGHT;
            pool->exhausted = exhausted;
            if (free_list_drained)
                pool->free_list_pending = false;
        }
        hilo_pool_note_low_water(pool);
    }
    LWLockRelease(&pool->lock);
}

void hilo_pool_wait_for_buffers(Oid dboid, int wait_ms)
{
    /* Give exiting backends a moment to hand their buffers back; but not
     * while a caller waits for this database's allocator: the backends
     * holding buffers may not be exiting at all (only the allocator was
     * terminated), and the caller is served by the next one. */
    for (int waited = 0; waited < wait_ms; waited += 10) {
        bool any = false;
        LWLockAcquire(hilo_shared->lock, LW_SHARED);
        for (int s = 0; s < hilo_shared->num_requests && !any; s++)
            any = hilo_shared->requests[s].dboid == dboid &&
                  hilo_shared->requests[s].state == HILO_REQ_SUBMITTED;
        LWLockRelease(hilo_shared->lock);
        if (any)
            break;
        for (int s = 0; s < hilo_shared->num_requests && !any; s++) {
            if (s == MyProcNumber)
                continue;
            for (int b = 0; b < hilo_slot_nused(s) && !any; b++) {
                HiloBuffer *buf = &hilo_shared->slots[s].buffers[b];
                any = buf->in_use && buf->dboid == dboid;
            }
        }
        if (!any)
            break;
        pg_usleep(10000L);
    }
}

bool hilo_pool_holds_recyclable(int index, Oid dboid, int32 *seq_id, uint64 *generation)
{
    HiloPool *pool = hilo_pool_at(index);
    LWLockAcquire(&pool->lock, LW_SHARED);
    /* Monotonic sequences never recycle: their leftovers stay a gap. */
    bool holds = pool->in_use && pool->dboid == dboid && !pool->monotonic && pool->nranges > 0;
    *seq_id = pool->seq_id;
    *generation = pg_atomic_read_u64(&pool->generation);
    LWLockRelease(&pool->lock);
    return holds;
}

uint32 hilo_pool_empty(int index, uint64 generation, HiloRange *out, uint64 *creation)
{
    HiloPool *pool = hilo_pool_at(index);
    uint32 nranges = 0;
    LWLockAcquire(&pool->lock, LW_EXCLUSIVE);
    if (pool->in_use && pg_atomic_read_u64(&pool->generation) == generation) {
        nranges = pool->nranges;
        memcpy(out, hilo_pool_list(pool), sizeof(HiloRange) * nranges);
        *creation = pool->creation;
        pool->nranges = 0;
        pool->head = 0;
        pool->ids = 0;
        hilo_pool_store_give_back_if_small(pool);
    }
    LWLockRelease(&pool->lock);
    return nranges;
}

void hilo_pool_update_rates(Oid dboid)
{
    TimestampTz now = GetCurrentTimestamp();
    for (int i = 0; i < hilo_shared->num_pools; i++) {
        HiloPool *pool = &hilo_shared->pools[i];
        LWLockAcquire(&pool->lock, LW_EXCLUSIVE);
        if (pool->in_use && pool->dboid == dboid) {
            double seconds = (double)(now - pool->rate_time) / 1e6;
            if (seconds >= 1.0) {
                double recent =
                    (double)(pool->issued - Min(pool->issued, pool->rate_issued)) / seconds;
                /* Exponentially weighted: about the last minute counts. */
                double weight = Min(1.0, seconds / 60.0);
                pool->rate = pool->rate == 0 ? recent : pool->rate + weight * (recent - pool->rate);
                pool->rate_issued = pool->issued;
                pool->rate_time = now;
            }
        }
        LWLockRelease(&pool->lock);
    }
}

/* ---- releasing idle pools (the allocator's side) ---- */

/* Whether a pool may be released now; its lock held. */
static bool releasable_locked(const HiloPool *pool, Oid dboid, TimestampTz idle_before, bool all)
{
    if (!pool->in_use || pool->dboid != dboid || pool->ninflight > 0)
        return false;
    if (all)
        return true;
    if (pool->last_used < idle_before)
        return true;
    /* Asked for by a caller that needs a slot, and not used since. */
    return pool->release_requested && pool->last_used <= pool->release_requested_at;
}

int hilo_pool_release_candidates(Oid dboid, TimestampTz idle_before, bool all, int *indexes,
                                 uint64 *generations, int32 *seq_ids, int max)
{
    bool *pinned = (bool *)palloc(sizeof(bool) * hilo_shared->num_pools);
    hilo_pool_mark_pinned(pinned);
    int n = 0;
    for (int i = 0; i < hilo_shared->num_pools && n < max; i++) {
        HiloPool *pool = &hilo_shared->pools[i];
        LWLockAcquire(&pool->lock, LW_SHARED);
        /* A pool buffers hold IDs of is released only when a caller asked
         * for its slot (the table is full) and it was not used since: what
         * the buffers hold becomes a gap. Idle release leaves it. */
        bool requested = pool->release_requested && pool->last_used <= pool->release_requested_at;
        if ((!pinned[i] || all || requested) && releasable_locked(pool, dboid, idle_before, all)) {
            indexes[n] = i;
            generations[n] = pg_atomic_read_u64(&pool->generation);
            seq_ids[n] = pool->seq_id;
            n++;
        }
        LWLockRelease(&pool->lock);
    }
    pfree(pinned);
    return n;
}

bool hilo_pool_release_begin(int index, uint64 generation, TimestampTz idle_before, bool all,
                             HiloRange *ranges, uint32 *nranges, int32 *seq_id, bool *monotonic)
{
    HiloPool *pool = hilo_pool_at(index);
    bool released = false;
    *nranges = 0;
    LWLockAcquire(hilo_shared->pools_lock, LW_EXCLUSIVE);
    LWLockAcquire(&pool->lock, LW_EXCLUSIVE);
    if (pg_atomic_read_u64(&pool->generation) == generation &&
        releasable_locked(pool, MyDatabaseId, idle_before, all)) {
        /* From here no buffer fill, take or put-back reaches these IDs. */
        hilo_pool_report_issued_locked(pool);
        hilo_pool_unindex_locked(pool);
        hilo_pool_renew_generation(pool);
        hilo_pool_attached_reset(pool); /* its buffers are stale */
        *nranges = pool->nranges;
        memcpy(ranges, hilo_pool_list(pool), sizeof(HiloRange) * pool->nranges);
        *seq_id = pool->seq_id;
        *monotonic = pool->monotonic;
        hilo_pool_list_clear(pool); /* nothing in flight: releasable */
        pool->ids = 0;
        pool->in_use = false;
        pool->releasing = true; /* not reused before the write-back commits */
        pool->release_requested = false;
        released = true;
    }
    LWLockRelease(&pool->lock);
    LWLockRelease(hilo_shared->pools_lock);
    return released;
}

void hilo_pool_release_finish(int index)
{
    HiloPool *pool = hilo_pool_at(index);
    LWLockAcquire(hilo_shared->pools_lock, LW_EXCLUSIVE);
    LWLockAcquire(&pool->lock, LW_EXCLUSIVE);
    pool->releasing = false;
    if (!pool->in_use)
        hilo_pool_slot_freed_locked(index);
    LWLockRelease(&pool->lock);
    LWLockRelease(hilo_shared->pools_lock);
}
