/*
 * pool_store.cpp: the range list of a pool, and the large stores a pool
 * borrows when it is fed from a fragmented free list.
 *
 * A pool keeps its IDs as sorted, merged ranges in ranges[head .. head +
 * nranges). Normally that is the pool's own inline array of
 * HILO_POOL_RANGES slots. A refill of a pool whose free list is fragmented
 * (a refill that came back limited by room rather than by IDs, or pushes
 * pending) first borrows one of HILO_POOL_STORES stores of
 * HILO_STORE_RANGES slots, so that one refill, one commit, moves thousands
 * of free ranges in instead of 32. The pool gives the store back once it
 * holds few ranges again, and whenever it is emptied (invalidated,
 * released, reassigned). Stores are claimed with a compare-and-swap, so no
 * lock beyond the pool's own is needed, and nothing here allocates or
 * raises: every function runs with the pool's LWLock held.
 *
 * Handing out the lowest ranges only advances `head`: serving thousands of
 * single-ID ranges one by one never moves the rest of the array.
 */
#include "internal.h"

/* A pool holding at most this many ranges gives its store back. */
#define HILO_STORE_GIVE_BACK (HILO_POOL_RANGES / 2)

/* HILO_POOL_STORES stores, a part of hilo's shared memory (shmem.cpp). */
static HiloPoolStore *stores = NULL;

/* Laid out after the pools, which are set up by then. */
static void stores_init(void)
{
    for (int i = 0; i < HILO_POOL_STORES; i++)
        pg_atomic_init_u32(&stores[i].owner, 0);
    for (int i = 0; i < hilo_shared->num_pools; i++)
        hilo_pool_use_inline(&hilo_shared->pools[i]);
}

static const HiloShmemPart stores_part = {
    "hilo pool stores", sizeof(HiloPoolStore) * HILO_POOL_STORES, NULL, 0, (void **)&stores,
    stores_init};

void hilo_pool_stores_shmem_init(void)
{
    hilo_shmem_add_part(&stores_part);
}

static int pool_index_of(const HiloPool *pool)
{
    return (int)(pool - hilo_shared->pools);
}

void hilo_pool_use_inline(HiloPool *pool)
{
    pool->ranges = pool->inline_ranges;
    pool->capacity = HILO_POOL_RANGES;
    pool->inflight = pool->inline_inflight;
    pool->inflight_capacity = HILO_POOL_INFLIGHT;
    pool->head = 0;
    pool->nranges = 0;
    pool->ninflight = 0;
    pool->store = -1;
    pool->fragmented = false;
}

void hilo_pool_list_clear(HiloPool *pool)
{
    if (pool->store >= 0)
        pg_atomic_write_u32(&stores[pool->store].owner, 0);
    hilo_pool_use_inline(pool);
}

bool hilo_pool_store_claim(HiloPool *pool)
{
    if (pool->store >= 0)
        return true;
    uint32 me = (uint32)pool_index_of(pool) + 1;
    for (int s = 0; s < HILO_POOL_STORES; s++) {
        HiloPoolStore *store = &stores[s];
        uint32 expected = 0;
        if (pg_atomic_read_u32(&store->owner) != 0 ||
            !pg_atomic_compare_exchange_u32(&store->owner, &expected, me))
            continue;
        memcpy(store->ranges, hilo_pool_list(pool), sizeof(HiloRange) * pool->nranges);
        memcpy(store->inflight, pool->inflight, sizeof(HiloRange) * pool->ninflight);
        pool->ranges = store->ranges;
        pool->head = 0;
        pool->capacity = HILO_STORE_RANGES;
        pool->inflight = store->inflight;
        pool->inflight_capacity = HILO_STORE_RANGES;
        pool->store = s;
        return true;
    }
    return false;
}

void hilo_pool_store_give_back_if_small(HiloPool *pool)
{
    if (pool->store < 0 || pool->ninflight > 0 || pool->nranges > HILO_STORE_GIVE_BACK)
        return;
    memmove(pool->inline_ranges, hilo_pool_list(pool), sizeof(HiloRange) * pool->nranges);
    uint32 n = pool->nranges;
    bool fragmented = pool->fragmented;
    pg_atomic_write_u32(&stores[pool->store].owner, 0);
    hilo_pool_use_inline(pool);
    pool->nranges = n;
    pool->fragmented = fragmented;
}

/* Moves the list to the start of its array, making room at the end. */
static void compact(HiloPool *pool)
{
    if (pool->head == 0)
        return;
    memmove(pool->ranges, hilo_pool_list(pool), sizeof(HiloRange) * pool->nranges);
    pool->head = 0;
}

uint32 hilo_pool_list_first_above(const HiloPool *pool, int64 above)
{
    const HiloRange *list = pool->ranges + pool->head;
    uint32 lo = 0, hi = pool->nranges; /* first index whose last > above */
    while (lo < hi) {
        uint32 mid = lo + (hi - lo) / 2;
        if (list[mid].last <= above)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

uint64 hilo_pool_list_take_lowest(HiloPool *pool, uint64 n, HiloRange *out, uint32 out_capacity,
                                  uint32 *out_count)
{
    uint64 taken = 0;
    *out_count = 0;
    while (taken < n && pool->nranges > 0 && *out_count < out_capacity) {
        HiloRange *r = &pool->ranges[pool->head];
        HiloRange got = hilo_take_prefix(*r, n - taken);
        out[(*out_count)++] = got;
        taken += hilo_range_length(got);
        if (got.last == r->last) {
            pool->head++;
            pool->nranges--;
        } else {
            r->first = got.last + 1;
        }
    }
    if (pool->nranges == 0)
        pool->head = 0;
    return taken;
}

bool hilo_pool_list_remove(HiloPool *pool, HiloRange r)
{
    if (pool->nranges > 0) {
        HiloRange *low = &pool->ranges[pool->head];
        if (low->first == r.first && r.last <= low->last) {
            /* The lowest IDs: the common case, no array move. */
            if (r.last == low->last) {
                pool->head++;
                if (--pool->nranges == 0)
                    pool->head = 0;
            } else {
                low->first = r.last + 1;
            }
            return true;
        }
    }
    if (hilo_list_remove(hilo_pool_list(pool), &pool->nranges, pool->capacity - pool->head, r))
        return true;
    compact(pool);
    return hilo_list_remove(hilo_pool_list(pool), &pool->nranges, pool->capacity, r);
}

HiloInsertStatus hilo_pool_list_insert(HiloPool *pool, HiloRange r, HiloRange *conflict)
{
    HiloInsertStatus st = hilo_list_insert(hilo_pool_list(pool), &pool->nranges,
                                           pool->capacity - pool->head, r, conflict);
    if (st != HILO_INSERT_FULL)
        return st;
    /* Room at the start of the array, else a store: a range given back to
     * a full pool would otherwise be a gap. */
    if (pool->head == 0 && !hilo_pool_store_claim(pool))
        return HILO_INSERT_FULL;
    compact(pool);
    return hilo_list_insert(hilo_pool_list(pool), &pool->nranges, pool->capacity, r, conflict);
}
