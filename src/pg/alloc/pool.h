/*
 * alloc/pool.h: what alloc/pool.cpp (finding and claiming pools),
 * alloc/pool_room.cpp (making room in a full table),
 * alloc/pool_state.cpp (what others read of a pool and tell it),
 * alloc/pool_take.cpp (taking from them) and alloc/pool_refill.cpp (the
 * allocator's side) share, and no one else.
 */
#ifndef HILO_PG_ALLOC_POOL_H
#define HILO_PG_ALLOC_POOL_H

#include "internal.h"

/* Pool identity: a database, a catalog creation of it, a sequence. */
static inline bool pool_is(const HiloPool *p, Oid dboid, uint64 creation, int32 seq_id)
{
    return p->in_use && p->dboid == dboid && p->creation == creation && p->seq_id == seq_id;
}

extern uint64 hilo_pool_low_water_ids(const HiloPool *pool);
extern uint64 hilo_pool_add_saturating(uint64 a, uint64 b);
extern void hilo_pool_put_locked(HiloPool *pool, const HiloRange *ranges, uint32 nranges,
                                 bool returned);
extern void hilo_pool_note_low_water(HiloPool *pool);
/* The count of buffers attached to a pool's generation (HiloPool.attached):
 * zero for the generation just written (lock held); one more or one fewer
 * (lock held, generation current); one fewer if `generation` is still the
 * one counted, without the lock (false if it is not). */
extern void hilo_pool_attached_reset(HiloPool *pool);
extern void hilo_pool_attached_add(HiloPool *pool, int delta);
extern bool hilo_pool_attached_leave(HiloPool *pool, uint64 generation);
/* `ids` IDs left the pool (negative: came back) for the node's count of
 * issued IDs, told in batches; and telling it now. Lock held. */
extern void hilo_pool_note_issued_locked(HiloPool *pool, int64 ids);
extern void hilo_pool_report_issued_locked(HiloPool *pool);
extern void hilo_pool_mark_pinned(bool *pinned);
/* A new generation for the pool (lock held), and the epoch moved after it. */
extern void hilo_pool_renew_generation(HiloPool *pool);
/* Removes a pool in use from the index by sequence; pools_lock held
 * exclusively (pool.cpp). */
extern void hilo_pool_unindex_locked(const HiloPool *p);
/* Notes that slot `index` is free now (!in_use, !releasing); pools_lock
 * held exclusively (pool.cpp). */
extern void hilo_pool_slot_freed_locked(int index);
/* Makes a pool stale and frees its slot; both locks held (pool.cpp). */
extern void hilo_pool_invalidate_locked(HiloPool *pool);

/* Pools a caller marks for release at once when the table is full: one
 * commit of their allocator frees slots for the next few cold sequences. */
#define HILO_POOL_RELEASE_BATCH 16
/* The table is full: a slot to take at once, or -1; marks a batch of pools
 * to give back, noting in `wake` (room for HILO_POOL_RELEASE_BATCH * 2)
 * the databases whose allocators to wake. pools_lock held exclusively
 * (pool_room.cpp). */
extern int hilo_pool_take_full_slot_locked(const bool *pinned, const Oid *running, int nrunning,
                                           TimestampTz now, bool steal);
extern void hilo_pool_mark_release_batch_locked(const bool *pinned, TimestampTz now, Oid *wake,
                                                int *nwake);

#endif /* HILO_PG_ALLOC_POOL_H */
