/*
 * alloc/pool.cpp: per-node pools of reserved IDs and per-backend buffers, both in
 * shared memory: finding a sequence's pool, claiming a slot for it,
 * attaching to it. Making room when the table is full is
 * alloc/pool_room.cpp; what others read of a pool and tell it,
 * alloc/pool_state.cpp; taking from it, pool_take.cpp; refilling it,
 * pool_refill.cpp.
 *
 * Every ID in a pool or a buffer was reserved and committed by the
 * allocator; from the catalog's point of view it is handed out. So losing
 * shared memory (a crash) only leaves gaps, and nothing here ever writes the
 * catalog: IDs given back by an exiting backend go to the pool, and the
 * allocator writes pools back to the free list on a clean shutdown.
 *
 * Locking: a pool's LWLock covers its ranges, its in-flight reservations
 * and the identity and end of every buffer filled from it. A buffer's
 * `next` is advanced by its owner alone without the lock (the nextval fast
 * path); readers see a value that can only have grown since, which errs on
 * the safe side for push checks.
 */
#include "internal.h"
#include "pool.h"

extern "C" {
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"
}

static_assert(offsetof(HiloPool, inline_ranges) - offsetof(HiloPool, lock) <= PG_CACHE_LINE_SIZE,
              "a refill finds what it touches but the ranges in the lock's cache lines");

HiloPool *hilo_pool_at(int index)
{
    return &hilo_shared->pools[index];
}

HiloBackendSlot *hilo_my_slot(void)
{
    return &hilo_shared->slots[MyProcNumber];
}

HiloBuffer *hilo_my_buffer(int b)
{
    HiloBackendSlot *slot = hilo_my_slot();
    /* Before the buffer is filled (under its pool's lock, which orders this
     * store before any scan that holds that lock). */
    if (slot->nused <= b)
        slot->nused = b + 1;
    return &slot->buffers[b];
}

int hilo_pool_sessions(int pool_index)
{
    /* A hint, read without the lock: it only sizes blocks. */
    return (int)(uint32)pg_atomic_read_u64(&hilo_pool_at(pool_index)->attached);
}

static inline uint64 attached_tag(uint64 generation)
{
    return (generation & PG_UINT32_MAX) << 32;
}

void hilo_pool_attached_reset(HiloPool *pool)
{
    pg_atomic_write_u64(&pool->attached, attached_tag(pg_atomic_read_u64(&pool->generation)));
}

void hilo_pool_attached_add(HiloPool *pool, int delta)
{
    (void)pg_atomic_fetch_add_u64(&pool->attached, (int64)delta);
}

bool hilo_pool_attached_leave(HiloPool *pool, uint64 generation)
{
    uint64 tag = attached_tag(generation);
    uint64 v = pg_atomic_read_u64(&pool->attached);
    while ((v & ~(uint64)PG_UINT32_MAX) == tag && (uint32)v > 0) {
        if (pg_atomic_compare_exchange_u64(&pool->attached, &v, v - 1))
            return true;
    }
    return false;
}

static inline HiloPoolKey pool_key(Oid dboid, uint64 creation, int32 seq_id)
{
    HiloPoolKey key;
    key.dboid = dboid;
    key.seq_id = seq_id;
    key.creation = creation;
    return key;
}

/* Removes a pool in use from the index; pools_lock held exclusively. */
void hilo_pool_unindex_locked(const HiloPool *p)
{
    if (!p->in_use)
        return;
    HiloPoolKey key = pool_key(p->dboid, p->creation, p->seq_id);
    (void)hash_search(hilo_pool_hash, &key, HASH_REMOVE, NULL);
}

/* Indexes a pool just assigned; pools_lock held exclusively. The table has
 * room for every slot, so the entry is always made. */
static void index_locked(const HiloPool *p, int index)
{
    HiloPoolKey key = pool_key(p->dboid, p->creation, p->seq_id);
    bool found;
    HiloPoolHashEntry *e =
        (HiloPoolHashEntry *)hash_search(hilo_pool_hash, &key, HASH_ENTER_NULL, &found);
    if (e != NULL)
        e->index = index;
}

void hilo_pool_slot_freed_locked(int index)
{
    /* A slot can be noted twice (claimed by the full scan meanwhile, freed
     * again): pops check, and a full stack drops the note. */
    if (hilo_shared->nfree_slots < hilo_shared->num_pools)
        hilo_shared->free_slots[hilo_shared->nfree_slots++] = index;
}

/* A slot noted free that still is, or -1; pools_lock held exclusively. */
static int pop_free_slot_locked(void)
{
    while (hilo_shared->nfree_slots > 0) {
        int i = hilo_shared->free_slots[--hilo_shared->nfree_slots];
        const HiloPool *p = &hilo_shared->pools[i];
        if (!p->in_use && !p->releasing)
            return i;
    }
    return -1;
}

static uint64 new_generation(void)
{
    return pg_atomic_add_fetch_u64(&hilo_shared->last_generation, 1);
}

/*
 * Gives the pool a generation never used before, then moves the epoch of
 * all generations: in that order (the add is a full barrier), so that a
 * backend which reads the epoch and then finds a pool's generation
 * unchanged knows it unchanged for as long as the epoch stands. The pool's
 * lock held.
 */
void hilo_pool_renew_generation(HiloPool *pool)
{
    pg_atomic_write_u64(&pool->generation, new_generation());
    pg_atomic_fetch_add_u64(&hilo_shared->generation_epoch, 1);
}

/* IDs of a sequence's block size, at least one. */
uint64 hilo_pool_low_water_ids(const HiloPool *pool)
{
    return (uint64)Max(hilo_pool_low_water, 1) * (uint64)Max(pool->block_size, 1);
}

/* Makes a pool stale and frees its slot. Both locks held. */
void hilo_pool_invalidate_locked(HiloPool *pool)
{
    /* Its IDs become a gap: never served again, in any backend. */
    hilo_pool_report_issued_locked(pool);
    hilo_pool_unindex_locked(pool);
    hilo_pool_renew_generation(pool);
    hilo_pool_attached_reset(pool); /* its buffers are stale */
    pool->in_use = false;
    hilo_pool_list_clear(pool);
    pool->ids = 0;
    if (!pool->releasing)
        hilo_pool_slot_freed_locked((int)(pool - hilo_shared->pools));
}

int hilo_pool_lookup(Oid dboid, uint64 creation, int32 seq_id, uint64 *generation)
{
    int found = -1;
    HiloPoolKey key = pool_key(dboid, creation, seq_id);
    LWLockAcquire(hilo_shared->pools_lock, LW_SHARED);
    HiloPoolHashEntry *e = (HiloPoolHashEntry *)hash_search(hilo_pool_hash, &key, HASH_FIND, NULL);
    if (e != NULL && pool_is(&hilo_shared->pools[e->index], dboid, creation, seq_id)) {
        found = e->index;
        /* Read under the lock every change of a slot's owner holds: once it
         * is released the slot may be another sequence's, and its
         * generation then lets a caller serve that sequence's IDs. */
        if (generation != NULL)
            *generation = pg_atomic_read_u64(&hilo_shared->pools[found].generation);
    }
    LWLockRelease(hilo_shared->pools_lock);
    return found;
}

/* How long a caller that needs a pool slot waits for allocators to give
 * marked pools back before it takes one, leaving its IDs a gap. */
#define HILO_POOL_STEAL_AFTER_MS 5000

/*
 * Marks the pools some backend buffer holds IDs of (of the pool's current
 * generation, not yet served): those are in use even when their pool has
 * not been touched for long. Read without locks: a buffer filled after the
 * scan also touched its pool's last_used, which every release rechecks
 * under the pool's lock.
 */
void hilo_pool_mark_pinned(bool *pinned)
{
    memset(pinned, 0, sizeof(bool) * hilo_shared->num_pools);
    for (int s = 0; s < hilo_shared->num_requests; s++) {
        for (int b = 0; b < hilo_slot_nused(s); b++) {
            HiloBuffer *buf = &hilo_shared->slots[s].buffers[b];
            int pi = buf->pool_index;
            if (!buf->in_use || pi < 0 || pi >= hilo_shared->num_pools)
                continue;
            if (buf->generation != pg_atomic_read_u64(&hilo_shared->pools[pi].generation))
                continue;
            if ((int64)pg_atomic_read_u64(&buf->next) < buf->end)
                pinned[pi] = true;
        }
    }
}

bool hilo_pool_database_pinned(Oid dboid)
{
    for (int s = 0; s < hilo_shared->num_requests; s++) {
        for (int b = 0; b < hilo_slot_nused(s); b++) {
            HiloBuffer *buf = &hilo_shared->slots[s].buffers[b];
            int pi = buf->pool_index;
            if (!buf->in_use || buf->dboid != dboid || pi < 0 || pi >= hilo_shared->num_pools)
                continue;
            if (buf->generation != pg_atomic_read_u64(&hilo_shared->pools[pi].generation))
                continue;
            if ((int64)pg_atomic_read_u64(&buf->next) < buf->end)
                return true;
        }
    }
    return false;
}

/* Gives a free (or just emptied) slot to `seq`. Both locks held. */
static void assign_pool_locked(HiloPool *p, int index, const HiloSequence *seq, TimestampTz now)
{
    hilo_pool_unindex_locked(p);
    pg_atomic_fetch_add_u64(&hilo_shared->pool_assignments, 1);
    p->in_use = true;
    p->releasing = false;
    p->dboid = MyDatabaseId;
    p->creation = seq->creation;
    p->seq_id = seq->seq_id;
    p->monotonic = seq->ordering == HILO_ORDERING_NODE;
    p->block_size = seq->block_size;
    hilo_pool_list_clear(p);
    p->ids = 0;
    p->serving = false;
    p->target = 2 * hilo_pool_low_water_ids(p);
    p->refill_wanted = false; /* until nextval or a small take finds it low */
    p->free_list_pending = false;
    p->exhausted = false;
    p->last_used = now;
    p->release_requested = false;
    p->release_requested_at = 0;
    p->issued = 0;
    p->issued_unreported = 0; /* told when the slot was given up */
    p->rate = 0;
    p->rate_issued = 0;
    p->rate_time = now;
    /* Buffers and cached entries of whatever used the slot before are stale. */
    hilo_pool_renew_generation(p);
    hilo_pool_attached_reset(p); /* its buffers are stale */
    index_locked(p, index);
}

/*
 * Finds or makes a pool slot for `seq`; pools_lock held exclusively. In
 * order: the pool already there; a free slot; an unused slot that has no
 * IDs to give back (empty, or monotonic, whose leftovers are a gap anyway),
 * or whose database has no allocator to give them back (a gap: safe); the
 * least recently used. Pools with IDs are released by their allocator: this
 * marks a batch of them and returns -1 (the caller wakes the allocators
 * and waits). After waiting `steal` long, the least recently used pool
 * with nothing in flight is taken at once, its IDs left as a gap.
 */
static int claim_slot_locked(const HiloSequence *seq, const bool *pinned, const Oid *running,
                             int nrunning, TimestampTz now, bool steal, Oid *wake, int *nwake,
                             bool *created)
{
    HiloPoolKey key = pool_key(MyDatabaseId, seq->creation, seq->seq_id);
    HiloPoolHashEntry *e = (HiloPoolHashEntry *)hash_search(hilo_pool_hash, &key, HASH_FIND, NULL);
    if (e != NULL &&
        pool_is(&hilo_shared->pools[e->index], MyDatabaseId, seq->creation, seq->seq_id))
        return e->index; /* created meanwhile */
    /* A slot freed since: no scan. */
    int free_index = pop_free_slot_locked();
    if (free_index >= 0) {
        HiloPool *p = &hilo_shared->pools[free_index];
        LWLockAcquire(&p->lock, LW_EXCLUSIVE);
        assign_pool_locked(p, free_index, seq, now);
        LWLockRelease(&p->lock);
        *created = true;
        return free_index;
    }
    bool any_releasing = false;
    for (int i = 0; i < hilo_shared->num_pools; i++) {
        HiloPool *p = &hilo_shared->pools[i];
        if (pool_is(p, MyDatabaseId, seq->creation, seq->seq_id))
            return i; /* created meanwhile */
        if (p->in_use && p->dboid == MyDatabaseId && p->creation != seq->creation) {
            /* Left by a catalog dropped since (the caller's lookup holds a
             * lock that keeps its own catalog current): free it. */
            LWLockAcquire(&p->lock, LW_EXCLUSIVE);
            hilo_pool_invalidate_locked(p);
            LWLockRelease(&p->lock);
        }
        if (!p->in_use && !p->releasing && free_index < 0)
            free_index = i;
        any_releasing |= p->releasing;
    }
    /* A slot is about to be freed: wait for it rather than waste a pool. */
    if (any_releasing)
        steal = false;
    if (free_index < 0 && pinned == NULL)
        return -2; /* full: the caller marks the pinned pools and comes back */
    if (free_index < 0)
        free_index = hilo_pool_take_full_slot_locked(pinned, running, nrunning, now, steal);
    if (free_index >= 0) {
        HiloPool *p = &hilo_shared->pools[free_index];
        LWLockAcquire(&p->lock, LW_EXCLUSIVE);
        if (p->in_use && p->nranges > 0 && !p->monotonic)
            elog(DEBUG1, "hilo: pool of sequence %d taken for another; its IDs are left as a gap",
                 p->seq_id);
        assign_pool_locked(p, free_index, seq, now);
        LWLockRelease(&p->lock);
        *created = true;
        return free_index;
    }

    hilo_pool_mark_release_batch_locked(pinned, now, wake, nwake);
    return -1;
}

/* hilo.pool_attach_delay: a pause, for tests, between finding or claiming
 * a pool slot (its locks released) and using the pool. A call cancelled
 * in it frees the pool it created (a failed call leaves no trace): its
 * caller learns of the pool only when this returns. */
static void attach_delay(int index, uint64 generation, bool created)
{
    if (hilo_pool_attach_delay_ms <= 0)
        return;
    PG_TRY();
    {
        hilo_sleep_ms(hilo_pool_attach_delay_ms);
    }
    PG_CATCH();
    {
        HILO_FORGET_UNWOUND_FRAMES();
        if (created)
            hilo_pool_release_if_unused(index, generation);
        PG_RE_THROW();
    }
    PG_END_TRY();
}

/* claim_slot_locked under pools_lock; the generation of the slot it
 * returns is read before the lock goes (see hilo_pool_lookup). */
static int claim_slot(const HiloSequence *seq, const bool *pinned, const Oid *running, int nrunning,
                      TimestampTz now, bool steal, Oid *wake, int *nwake, bool *created,
                      uint64 *generation)
{
    LWLockAcquire(hilo_shared->pools_lock, LW_EXCLUSIVE);
    int index = claim_slot_locked(seq, pinned, running, nrunning, now, steal, wake, nwake, created);
    if (index >= 0)
        *generation = pg_atomic_read_u64(&hilo_shared->pools[index].generation);
    LWLockRelease(hilo_shared->pools_lock);
    return index;
}

int hilo_pool_attach_created(const HiloSequence *seq, uint64 *generation, bool *created)
{
    *created = false;
    int index = hilo_pool_lookup(MyDatabaseId, seq->creation, seq->seq_id, generation);
    if (index >= 0) {
        attach_delay(index, *generation, false);
        return index;
    }

    /* Allocated before any lock is taken: nothing may raise while one is held. */
    bool *pinned = (bool *)palloc(sizeof(bool) * hilo_shared->num_pools);
    int table = hilo_worker_table_size();
    Oid *running = (Oid *)palloc(sizeof(Oid) * (table + 1));
    Oid wake[HILO_POOL_RELEASE_BATCH * 2];
    TimestampTz waiting_since = 0;
    for (;;) {
        TimestampTz now = GetCurrentTimestamp();
        bool steal = waiting_since != 0 &&
                     now - waiting_since >= (TimestampTz)HILO_POOL_STEAL_AFTER_MS * 1000;
        int nrunning = 0;
        LWLockAcquire(hilo_shared->lock, LW_SHARED);
        for (int i = 0; i < hilo_shared->max_databases; i++) {
            HiloWorkerEntry *e = &hilo_shared->workers[i];
            /* An exiting one gives its pools back itself. */
            if (e->state != HILO_WORKER_NONE)
                running[nrunning++] = e->dboid;
        }
        LWLockRelease(hilo_shared->lock);

        /* Which pools buffers hold is read (a scan of every buffer) only
         * when no slot is free. */
        int nwake = 0;
        index =
            claim_slot(seq, NULL, running, nrunning, now, steal, wake, &nwake, created, generation);
        if (index == -2) {
            hilo_pool_mark_pinned(pinned);
            index = claim_slot(seq, pinned, running, nrunning, now, steal, wake, &nwake, created,
                               generation);
        }
        if (index >= 0)
            break;

        /* Every slot holds IDs to give back: their allocators do, and we wait. */
        if (waiting_since == 0)
            waiting_since = now;
        for (int w = 0; w < nwake; w++)
            (void)hilo_allocator_request_release(wake[w]);
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 10,
                        PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
        CHECK_FOR_INTERRUPTS();
    }
    pfree(pinned);
    pfree(running);
    attach_delay(index, *generation, *created);
    return index;
}

void hilo_pool_release_if_unused(int pool_index, uint64 generation)
{
    HiloPool *pool = hilo_pool_at(pool_index);
    LWLockAcquire(hilo_shared->pools_lock, LW_EXCLUSIVE);
    LWLockAcquire(&pool->lock, LW_EXCLUSIVE);
    if (pool->in_use && pg_atomic_read_u64(&pool->generation) == generation && pool->nranges == 0 &&
        pool->ninflight == 0 && pool->issued == 0) {
        /* Nothing ever entered or left it, so no buffer refers to it. */
        hilo_pool_report_issued_locked(pool);
        hilo_pool_unindex_locked(pool);
        hilo_pool_renew_generation(pool);
        hilo_pool_attached_reset(pool); /* its buffers are stale */
        pool->in_use = false;
        hilo_pool_list_clear(pool); /* a store its failed refill borrowed goes back */
        hilo_pool_slot_freed_locked(pool_index);
    }
    LWLockRelease(&pool->lock);
    LWLockRelease(hilo_shared->pools_lock);
}

/* Asks the allocator of `dboid` to give back the pools marked for release
 * (it does so at its next round); false if it has no running allocator. */
bool hilo_allocator_request_release(Oid dboid)
{
    int procno = -1;
    LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
    HiloWorkerEntry *e = hilo_find_worker_locked(dboid);
    if (e != NULL && (e->state == HILO_WORKER_RUNNING || e->state == HILO_WORKER_STARTING)) {
        e->release_requested = true;
        procno = e->state == HILO_WORKER_RUNNING ? e->procno : -1;
    }
    bool runs = e != NULL && e->state != HILO_WORKER_EXITING;
    LWLockRelease(hilo_shared->lock);
    hilo_wake_process(procno);
    return runs;
}

/*
 * The node's count of issued IDs (alloc/issued.cpp) takes a global lock
 * and a hash lookup; counted per block, that was a fifth of a call with
 * 10,000 sequences, where every call fills a buffer. A pool collects what
 * its buffers and takes moved instead, and tells the count every
 * HILO_ISSUED_BATCH IDs, when its slot changes hands, and before the count
 * is read (hilo_pool_report_issued).
 */
#define HILO_ISSUED_BATCH 4096

/* Tells the node's count what the pool collected. Lock held. */
void hilo_pool_report_issued_locked(HiloPool *pool)
{
    int64 n = pool->issued_unreported;
    pool->issued_unreported = 0;
    if (n > 0)
        hilo_issued_count(pool->dboid, pool->creation, pool->seq_id, (uint64)n);
    else if (n < 0)
        hilo_issued_returned(pool->dboid, pool->creation, pool->seq_id, (uint64)-n);
}

/* `ids` IDs left the pool (returned ones, negative). Lock held. */
void hilo_pool_note_issued_locked(HiloPool *pool, int64 ids)
{
    pool->issued_unreported += ids;
    if (pool->issued_unreported >= HILO_ISSUED_BATCH ||
        pool->issued_unreported <= -HILO_ISSUED_BATCH)
        hilo_pool_report_issued_locked(pool);
}
