/*
 * alloc/pool_state.cpp: what others read of a pool and tell it: the IDs it
 * holds (above a value, and the counts of hilo.status), putting ranges in,
 * whether a push names IDs it or a buffer still holds, pushes and takes it
 * must know of, and invalidation (a drop, a catalog of another creation).
 * Locking as in alloc/pool.cpp.
 */
#include "internal.h"
#include "pool.h"

uint64 hilo_pool_ids_above(int pool_index, uint64 generation, int64 above)
{
    HiloPool *pool = hilo_pool_at(pool_index);
    uint64 ids = 0;
    LWLockAcquire(&pool->lock, LW_SHARED);
    if (pg_atomic_read_u64(&pool->generation) == generation) {
        const HiloRange *list = hilo_pool_list(pool);
        for (uint32 i = hilo_pool_list_first_above(pool, above); i < pool->nranges; i++) {
            HiloRange r = list[i];
            if (r.last > above)
                ids += hilo_range_length({Max(r.first, above + 1), r.last});
        }
    }
    LWLockRelease(&pool->lock);
    return ids;
}

bool hilo_pool_is_current(int pool_index, uint64 generation)
{
    return pg_atomic_read_u64(&hilo_pool_at(pool_index)->generation) == generation;
}

void hilo_pool_report_issued(Oid dboid)
{
    if (hilo_shared == NULL)
        return;
    for (int i = 0; i < hilo_shared->num_pools; i++) {
        HiloPool *pool = hilo_pool_at(i);
        /* Read without the lock: a count that appears after this read
         * belongs to a call that ended after the reader began. */
        if (*(volatile int64 *)&pool->issued_unreported == 0)
            continue;
        LWLockAcquire(&pool->lock, LW_EXCLUSIVE);
        if (pool->in_use && pool->dboid == dboid)
            hilo_pool_report_issued_locked(pool);
        LWLockRelease(&pool->lock);
    }
}

/* Asks the allocator for a refill when the pool runs low. Lock held. Only
 * pools that serve nextval or small takes are kept filled. */
void hilo_pool_note_low_water(HiloPool *pool)
{
    if (pool->serving && pool->ids < hilo_pool_low_water_ids(pool) && !pool->exhausted) {
        pool->refill_wanted = true;
        hilo_pool_mark_wants((int)(pool - hilo_shared->pools));
    }
}

/* a + b (the counters of hilo.status), or the largest uint64 where that would wrap. */
uint64 hilo_pool_add_saturating(uint64 a, uint64 b)
{
    return a > PG_UINT64_MAX - b ? PG_UINT64_MAX : a + b;
}

/*
 * Puts ranges into a pool of the right generation; lock held. `returned`:
 * they had left the pool (a buffer's leftovers), so they no longer count as
 * issued. A range that does not fit is left as a gap.
 */
void hilo_pool_put_locked(HiloPool *pool, const HiloRange *ranges, uint32 nranges, bool returned)
{
    for (uint32 i = 0; i < nranges; i++) {
        HiloRange conflict;
        HiloInsertStatus st = hilo_pool_list_insert(pool, ranges[i], &conflict);
        if (st == HILO_INSERTED) {
            pool->ids += hilo_range_length(ranges[i]);
            if (returned) {
                pool->issued -= Min(pool->issued, hilo_range_length(ranges[i]));
                hilo_pool_note_issued_locked(
                    pool, -(int64)Min(hilo_range_length(ranges[i]), (uint64)PG_INT64_MAX / 2));
            }
        } else {
            /* Full (or, were it ever to happen, an overlap): never hand the
             * IDs out from here. A gap is safe; a repeat is not. */
            elog(DEBUG1,
                 "hilo: pool of sequence %d full; " INT64_FORMAT "..." INT64_FORMAT
                 " left as a gap",
                 pool->seq_id, ranges[i].first, ranges[i].last);
        }
    }
}

/* The IDs buffer `b` of slot `s` still holds of pool `index` at
 * `generation`; false if none. The pool's lock held. */
static bool buffer_left(int s, int b, int index, uint64 generation, HiloRange *left)
{
    HiloBuffer *buf = &hilo_shared->slots[s].buffers[b];
    if (!buf->in_use || buf->pool_index != index || buf->generation != generation)
        return false;
    int64 next = (int64)pg_atomic_read_u64(&buf->next);
    if (next >= buf->end)
        return false;
    *left = {next, buf->end - 1};
    return true;
}

/* Keeps the lower of two hits. */
static void note_hit(bool *found, HiloRange *best, HiloRange hit)
{
    if (!*found || hit.first < best->first)
        *best = hit;
    *found = true;
}

bool hilo_pool_find_unissued(Oid dboid, uint64 creation, int32 seq_id, const HiloRange *ranges,
                             uint32 nranges, HiloRange *hit)
{
    int index = hilo_pool_lookup(dboid, creation, seq_id, NULL);
    if (index < 0 || nranges == 0)
        return false;
    HiloPool *pool = hilo_pool_at(index);
    bool found = false;

    /*
     * One pass over the pool, its reservation in flight and the backends'
     * buffers for the whole push, each looked up in the sorted pushed
     * ranges (or they in the pool's list): O(ranges log ranges +
     * buffers), where a check per pushed range cost ranges * buffers, and
     * a push of 100,000 ranges grew with max_connections.
     */
    LWLockAcquire(&pool->lock, LW_SHARED);
    uint64 generation = pg_atomic_read_u64(&pool->generation);
    if (pool_is(pool, dboid, creation, seq_id)) {
        HiloRange h;
        for (uint32 i = 0; i < nranges; i++) {
            if (hilo_list_find_overlap(hilo_pool_list(pool), pool->nranges, ranges[i], &h)) {
                note_hit(&found, hit, h); /* the lowest: pushed ranges ascend */
                break;
            }
        }
        for (uint32 i = 0; i < pool->ninflight; i++)
            if (hilo_list_find_overlap(ranges, nranges, pool->inflight[i], &h))
                note_hit(&found, hit, h);
        for (int s = 0; s < hilo_shared->num_requests; s++) {
            for (int b = 0; b < hilo_slot_nused(s); b++) {
                HiloRange left;
                if (buffer_left(s, b, index, generation, &left) &&
                    hilo_list_find_overlap(ranges, nranges, left, &h))
                    note_hit(&found, hit, h);
            }
        }
    }
    LWLockRelease(&pool->lock);
    return found;
}

void hilo_pool_invalidate(Oid dboid, int32 seq_id)
{
    LWLockAcquire(hilo_shared->pools_lock, LW_EXCLUSIVE);
    for (int i = 0; i < hilo_shared->num_pools; i++) {
        HiloPool *pool = &hilo_shared->pools[i];
        if (!pool->in_use || pool->dboid != dboid || (seq_id >= 0 && pool->seq_id != seq_id))
            continue;
        LWLockAcquire(&pool->lock, LW_EXCLUSIVE);
        hilo_pool_invalidate_locked(pool);
        LWLockRelease(&pool->lock);
    }
    LWLockRelease(hilo_shared->pools_lock);
}

void hilo_pool_forget_other_creations(Oid dboid, uint64 creation)
{
    /* Runs before every batch of the allocator: the scan of every pool is
     * needed only when the catalog changed or a pool was assigned since
     * (one assigned by a backend that had not seen the new catalog yet). */
    static Oid checked_db = InvalidOid;
    static uint64 checked_creation = 0;
    static uint64 checked_assignments = 0;
    uint64 assignments = pg_atomic_read_u64(&hilo_shared->pool_assignments);
    if (checked_db == dboid && checked_creation == creation && checked_assignments == assignments)
        return;
    checked_db = dboid;
    checked_creation = creation;
    checked_assignments = assignments;
    bool any = false;
    LWLockAcquire(hilo_shared->pools_lock, LW_SHARED);
    for (int i = 0; i < hilo_shared->num_pools && !any; i++) {
        HiloPool *p = &hilo_shared->pools[i];
        any = p->in_use && p->dboid == dboid && p->creation != creation;
    }
    LWLockRelease(hilo_shared->pools_lock);
    if (!any)
        return;
    LWLockAcquire(hilo_shared->pools_lock, LW_EXCLUSIVE);
    for (int i = 0; i < hilo_shared->num_pools; i++) {
        HiloPool *p = &hilo_shared->pools[i];
        if (p->in_use && p->dboid == dboid && p->creation != creation) {
            LWLockAcquire(&p->lock, LW_EXCLUSIVE);
            hilo_pool_invalidate_locked(p);
            LWLockRelease(&p->lock);
        }
    }
    LWLockRelease(hilo_shared->pools_lock);
}

void hilo_pool_note_push(Oid dboid, uint64 creation, int32 seq_id)
{
    hilo_free_list_note_insert();
    int index = hilo_pool_lookup(dboid, creation, seq_id, NULL);
    if (index < 0)
        return;
    HiloPool *pool = hilo_pool_at(index);
    LWLockAcquire(&pool->lock, LW_EXCLUSIVE);
    /* A pool that serves nextval must hand pushed IDs out first: the
     * allocator moves them in. Other pools leave them on the free list. */
    if (pool_is(pool, dboid, creation, seq_id) && pool->serving) {
        pool->free_list_pending = true;
        pool->exhausted = false;
        hilo_pool_mark_wants(index);
    }
    LWLockRelease(&pool->lock);
}

/*
 * Counts a take the allocator served. issued_since_start counts it all
 * (saturating). The rate estimate counts at most a minute's worth at the
 * current rate (at least 1000 blocks): a steady stream of large takes still
 * raises the rate (it can double with each), but one huge take does not
 * turn it, and "lasts", into nonsense for minutes after.
 */
void hilo_pool_count_issued(Oid dboid, uint64 creation, int32 seq_id, uint64 ids)
{
    hilo_issued_count(dboid, creation, seq_id, ids);
    int index = hilo_pool_lookup(dboid, creation, seq_id, NULL);
    if (index < 0)
        return;
    HiloPool *pool = hilo_pool_at(index);
    LWLockAcquire(&pool->lock, LW_EXCLUSIVE);
    if (pool_is(pool, dboid, creation, seq_id)) {
        double cap = Max(pool->rate * 60.0, (double)Max(pool->block_size, 1) * 1000.0);
        uint64 counted = (double)ids <= cap ? ids : (uint64)cap;
        pool->issued = hilo_pool_add_saturating(pool->issued, ids);
        pool->rate_issued = hilo_pool_add_saturating(pool->rate_issued, ids - counted);
    }
    LWLockRelease(&pool->lock);
}

void hilo_pool_counts(int pool_index, uint64 *pool_ids, uint64 *buffered_ids, uint64 *issued,
                      double *rate)
{
    HiloPool *pool = hilo_pool_at(pool_index);
    LWLockAcquire(&pool->lock, LW_SHARED);
    uint64 generation = pg_atomic_read_u64(&pool->generation);
    *pool_ids = pool->ids;
    *issued = pool->issued;
    *rate = pool->rate;
    *buffered_ids = 0;
    for (int s = 0; s < hilo_shared->num_requests; s++) {
        for (int b = 0; b < hilo_slot_nused(s); b++) {
            HiloRange left;
            if (buffer_left(s, b, pool_index, generation, &left))
                *buffered_ids += hilo_range_length(left);
        }
    }
    LWLockRelease(&pool->lock);
}
