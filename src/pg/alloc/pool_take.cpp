/*
 * alloc/pool_take.cpp: taking IDs from a pool, under its lock: refilling a
 * backend's buffer (hilo_nextval), the next ID of a monotonic sequence, a
 * small take; and giving IDs back to the pool (a take that failed late, a
 * buffer released or left by an exiting backend). Locking as in
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

/* Removes `r`, part of a range of the pool, keeping the list merged.
 * Lock held. Returns false (changing nothing) if no slot is left for a split. */
static bool remove_from_pool(HiloPool *pool, HiloRange r)
{
    if (!hilo_pool_list_remove(pool, r))
        return false;
    pool->ids -= hilo_range_length(r);
    pool->issued = hilo_pool_add_saturating(pool->issued, hilo_range_length(r));
    hilo_pool_note_issued_locked(pool, (int64)Min(hilo_range_length(r), (uint64)PG_INT64_MAX / 2));
    return true;
}

/* Takes up to `want` IDs (at most block_size, at least one) above `above`
 * out of the pool into *block. Lock held. False if it has none above. */
static bool take_block_locked(HiloPool *pool, int64 above, uint64 want, HiloRange *block)
{
    for (uint32 i = hilo_pool_list_first_above(pool, above); i < pool->nranges; i++) {
        HiloRange r = hilo_pool_list(pool)[i];
        int64 first = Max(r.first, above + 1);
        uint64 size = Max(Min(want, (uint64)Max(pool->block_size, 1)), (uint64)1);
        *block = hilo_take_prefix({first, r.last}, size);
        if (!remove_from_pool(pool, *block)) {
            /* No room to split the range: take all of it above `above`. */
            block->last = r.last;
            if (!remove_from_pool(pool, *block))
                return false;
        }
        return true;
    }
    return false;
}

/* After a take from the pool (`taken`: it got IDs), lock held: small
 * stores go back; only a call that got its IDs marks the pool as serving
 * and asks for a refill (one that fails must leave no trace; a caller
 * that found it empty asks for a refill itself, if it can succeed). */
static void after_take_locked(HiloPool *pool, bool taken, bool *need_fresh)
{
    hilo_pool_store_give_back_if_small(pool);
    if (!taken) {
        *need_fresh = pool->ids > 0; /* IDs there, but all below `above` */
    } else {
        pool->serving = true;
        hilo_pool_note_low_water(pool);
    }
}

/* Locks the pool; true if it is still of `generation` (the lock is held
 * either way). */
static bool lock_if_current(HiloPool *pool, uint64 generation)
{
    LWLockAcquire(&pool->lock, LW_EXCLUSIVE);
    return pg_atomic_read_u64(&pool->generation) == generation;
}

/* The same, and a pool still current is marked in use now, even if the
 * call finds it empty. */
static bool lock_if_current_mark_used(HiloPool *pool, uint64 generation, TimestampTz now)
{
    bool current = lock_if_current(pool, generation);
    if (current)
        pool->last_used = now;
    return current;
}

HiloPoolResult hilo_pool_fill_buffer(int pool_index, uint64 generation, int buffer_index,
                                     int64 above, uint64 want, TimestampTz now, bool *need_fresh)
{
    HiloPool *pool = hilo_pool_at(pool_index);
    HiloBuffer *buf = hilo_my_buffer(buffer_index);
    HiloPoolResult result = HILO_POOL_EMPTY;

    *need_fresh = false;
    if (!lock_if_current_mark_used(pool, generation, now)) {
        LWLockRelease(&pool->lock);
        return HILO_POOL_STALE;
    }
    bool attached = buf->in_use && buf->pool_index == pool_index && buf->generation == generation;
    /* Within a backend, IDs strictly increase: only IDs above `above`. */
    HiloRange block;
    if (take_block_locked(pool, above, want, &block)) {
        buf->dboid = pool->dboid;
        buf->seq_id = pool->seq_id;
        buf->pool_index = pool_index;
        buf->generation = generation;
        buf->end = block.last + 1;
        pg_atomic_write_u64(&buf->next, (uint64)block.first);
        buf->in_use = true;
        if (!attached)
            hilo_pool_attached_add(pool, 1);
        result = HILO_POOL_OK;
    }
    after_take_locked(pool, result == HILO_POOL_OK, need_fresh);
    LWLockRelease(&pool->lock);
    return result;
}

void hilo_pool_prefetch_take(int pool_index)
{
    HiloPool *pool = hilo_pool_at(pool_index);
    __builtin_prefetch(&pool->generation);
    __builtin_prefetch(&pool->lock, 1);
    __builtin_prefetch((char *)&pool->lock + 64, 1);
    __builtin_prefetch(&pool->inline_ranges[0], 1);
}

HiloPoolResult hilo_pool_next_above(int pool_index, uint64 generation, int64 above, TimestampTz now,
                                    int64 *id, bool *need_fresh, bool *inside_range)
{
    HiloPool *pool = hilo_pool_at(pool_index);
    HiloPoolResult result = HILO_POOL_EMPTY;

    *need_fresh = false;
    *inside_range = false;
    if (!lock_if_current(pool, generation)) {
        LWLockRelease(&pool->lock);
        return HILO_POOL_STALE;
    }
    uint32 i = hilo_pool_list_first_above(pool, above);
    if (i < pool->nranges && hilo_pool_list(pool)[i].first <= above) {
        /* Taking it would split its range: nothing changes. */
        *inside_range = true;
        LWLockRelease(&pool->lock);
        return HILO_POOL_EMPTY;
    }
    /* In use, even if this call finds it empty; marked only after the
     * check above, as a call that returns there changes nothing. */
    pool->last_used = now;
    if (i < pool->nranges) {
        HiloRange one = {hilo_pool_list(pool)[i].first, hilo_pool_list(pool)[i].first};
        if (remove_from_pool(pool, one)) { /* a range's first ID: never splits */
            *id = one.first;
            result = HILO_POOL_OK;
        }
    }
    after_take_locked(pool, result == HILO_POOL_OK, need_fresh);
    LWLockRelease(&pool->lock);
    return result;
}

HiloPoolResult hilo_pool_next_monotonic(int pool_index, uint64 generation, int64 *id)
{
    HiloPool *pool = hilo_pool_at(pool_index);
    HiloPoolResult result = HILO_POOL_EMPTY;
    TimestampTz now = GetCurrentTimestamp();

    if (!lock_if_current_mark_used(pool, generation, now)) {
        result = HILO_POOL_STALE;
    } else if (pool->nranges > 0) {
        /* One counter for the whole node: always the lowest ID left. */
        *id = hilo_pool_list(pool)[0].first;
        (void)remove_from_pool(pool, {*id, *id}); /* never splits */
        result = HILO_POOL_OK;
        pool->serving = true;
        hilo_pool_note_low_water(pool);
    }
    LWLockRelease(&pool->lock);
    return result;
}

HiloPoolResult hilo_pool_take(int pool_index, uint64 generation, uint64 n, HiloRange **ranges,
                              uint32 *nranges)
{
    HiloPool *pool = hilo_pool_at(pool_index);
    /* Allocated before the lock is taken: nothing may raise while it is held. */
    uint32 out_capacity = (uint32)Min(n, (uint64)HILO_POOL_MAX_RANGES);
    HiloRange *out = (HiloRange *)palloc(sizeof(HiloRange) * out_capacity);
    HiloPoolResult result = HILO_POOL_EMPTY;
    TimestampTz now = GetCurrentTimestamp();

    if (!lock_if_current_mark_used(pool, generation, now)) {
        result = HILO_POOL_STALE;
    } else if (pool->ids >= n && !pool->free_list_pending) {
        uint32 count = 0;
        hilo_pool_list_take_lowest(pool, n, out, out_capacity, &count);
        hilo_pool_store_give_back_if_small(pool);
        pool->ids -= n;
        pool->issued = hilo_pool_add_saturating(pool->issued, n);
        /* Told to the node's count in batches, as a buffer's fill is: the
         * count's global lock, once per take, moved its cache line between
         * the cores at every call. */
        hilo_pool_note_issued_locked(pool, (int64)Min(n, (uint64)PG_INT64_MAX / 2));
        *nranges = count;
        result = HILO_POOL_OK;
        pool->serving = true;
        hilo_pool_note_low_water(pool);
    }
    LWLockRelease(&pool->lock);

    if (result != HILO_POOL_OK)
        pfree(out);
    else
        *ranges = out;
    return result;
}

void hilo_pool_put_back(int pool_index, uint64 generation, const HiloRange *ranges, uint32 nranges)
{
    HiloPool *pool = hilo_pool_at(pool_index);
    LWLockAcquire(&pool->lock, LW_EXCLUSIVE);
    if (pg_atomic_read_u64(&pool->generation) == generation)
        hilo_pool_put_locked(pool, ranges, nranges, true);
    LWLockRelease(&pool->lock);
}

void hilo_buffer_release(int buffer_index)
{
    if (buffer_index >= hilo_my_slot()->nused)
        return;
    HiloBuffer *buf = &hilo_my_slot()->buffers[buffer_index];
    if (!buf->in_use)
        return;
    HiloPool *pool = hilo_pool_at(buf->pool_index);
    if ((int64)pg_atomic_read_u64(&buf->next) >= buf->end) {
        /* Used up: nothing goes back to the pool, and a push check finds
         * no ID in it either way, so no lock (with 10,000 sequences a
         * buffer taken back for another is mostly used up, and this was
         * one of the two pool locks of every call). */
        (void)hilo_pool_attached_leave(pool, buf->generation);
        buf->in_use = false;
        return;
    }
    LWLockAcquire(&pool->lock, LW_EXCLUSIVE);
    int64 next = (int64)pg_atomic_read_u64(&buf->next);
    if (pg_atomic_read_u64(&pool->generation) == buf->generation) {
        if (next < buf->end) {
            HiloRange left = {next, buf->end - 1};
            hilo_pool_put_locked(pool, &left, 1, true);
        }
        hilo_pool_attached_add(pool, -1);
    }
    buf->in_use = false;
    LWLockRelease(&pool->lock);
}

void hilo_buffers_release_all(void)
{
    if (hilo_shared == NULL || MyProc == NULL)
        return;
    int nused = hilo_my_slot()->nused;
    for (int i = 0; i < nused; i++)
        hilo_buffer_release(i);
}
