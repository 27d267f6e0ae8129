/*
 * alloc/dispatch.h: what sql/ hands down once it checked a call's
 * arguments: which way a call of a looked-up sequence goes, for
 * hilo_nextval and hilo_take alike (dispatch.cpp), and a push's checks and
 * free-list rows (free_list_push.cpp).
 */
#ifndef HILO_PG_ALLOC_DISPATCH_H
#define HILO_PG_ALLOC_DISPATCH_H

#include "alloc.h"

typedef enum HiloRoute {
    /* Ordering 'quorum' or 'cluster': one range above every ID the
     * cluster handed out before the call (order/order.h's
     * hilo_order_take, which sql/ calls); no pool, no buffer. */
    HILO_ROUTE_ORDERED,
    /* Created in the caller's own open transaction: reserved in this
     * backend (alloc/local_sequences.cpp). */
    HILO_ROUTE_CREATED_HERE,
    /* The node's pool of the sequence, refilled by the allocator; every
     * call of a monotonic sequence (the pool hands out lowest first). */
    HILO_ROUTE_POOL,
    /* A take of more than block_size IDs: the allocator's own
     * transaction, no pool slot. */
    HILO_ROUTE_ALLOCATOR,
} HiloRoute;

/* The way a call of `seq` for `n` IDs goes. */
static inline HiloRoute hilo_route(const HiloSequence *seq, uint64 n)
{
    if (seq->ordering == HILO_ORDERING_QUORUM || seq->ordering == HILO_ORDERING_CLUSTER)
        return HILO_ROUTE_ORDERED;
    if (seq->created_here)
        return HILO_ROUTE_CREATED_HERE;
    if (seq->ordering == HILO_ORDERING_NODE || n <= (uint64)seq->block_size)
        return HILO_ROUTE_POOL;
    return HILO_ROUTE_ALLOCATOR;
}

/*
 * A take of `n` IDs of `seq` as looked up, by its route (not the ordered
 * route: sql/ hands that to order/); with `partial`, fewer when fewer are
 * left. *pool_index and *generation: the pool it attached (-1 when
 * none, or when a pool it made went again). NULL when the sequence must
 * be looked up again (its pool went stale, or it was dropped meanwhile).
 */
extern HiloRange *hilo_dispatch_take(const HiloSequence *seq, int64 n, bool partial,
                                     int *pool_index, uint64 *generation, uint32 *nranges);

/* hilo_nextval of a sequence created here; false if `name` is not one. */
extern bool hilo_local_nextval(const char *name, int len, int64 *id);

/* IDs the catalog still has for `seq` above `above` (open windows, room up
 * to max_value, and with `include_free` the free list), at most 2^63 - 1;
 * -1 if the sequence's row is gone in the latest committed state (dropped
 * meanwhile, maybe made again under the name: not exhausted).
 * A take or nextval asks it before it has the allocator refill a pool for
 * it, so that a call bound to fail reserves nothing. The free list counts
 * only its lowest block_size rows above `above`: exact for the comparisons
 * callers make (with 0, or with n <= block_size). */
extern int64 hilo_catalog_ids_left(const HiloSequence *seq, int64 above, bool include_free);

/* ---- alloc/free_list_push.cpp ---- */

/* Checks and records a push of sorted, disjoint, merged `ranges` of
 * sequence `name`: refused (changing nothing) unless every ID was handed
 * out and none is free already; else hilo.free_ranges gets them in the
 * caller's transaction. Returns how many IDs it recycles. */
extern int64 hilo_free_list_push(const char *name, HiloRange *ranges, uint32 nranges);

#endif /* HILO_PG_ALLOC_DISPATCH_H */
