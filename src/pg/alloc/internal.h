/*
 * alloc/internal.h: what the allocator's own files share, and no one else:
 * a pool's range list and stores, the merge pass and where free lists are
 * read from, the allocator's side of the pools (refills, borrowed IDs,
 * reservations in flight, releases), and reservations (alloc/reserve.cpp).
 */
#ifndef HILO_PG_ALLOC_INTERNAL_H
#define HILO_PG_ALLOC_INTERNAL_H

#include "alloc.h"

/* ---- alloc/pool_store.cpp, merge_spans.cpp, free_list_scan.cpp ---- */

/* A pool's range list (alloc/pool_store.cpp); every function below runs with
 * the pool's lock held, and none allocates or raises. */
static inline HiloRange *hilo_pool_list(const HiloPool *pool)
{
    return pool->ranges + pool->head;
}
/* alloc/merge_spans.cpp: what the merge pass reads. A push notes the spans
 * it freed; at commit they are published to the allocator's entry (lock
 * held); the allocator queues them with its own, or everything, and each
 * pass (one transaction) merges a bounded part of what is queued. */
extern void hilo_merge_forget_spans(void);
extern void hilo_merge_publish_spans_locked(HiloWorkerEntry *e);
extern void hilo_merge_free_ranges(bool all, const HiloMergeSpan *spans, uint32 nspans);
extern bool hilo_merge_pending(void);
extern bool hilo_merge_ran(void); /* a merge statement since last asked */
extern void hilo_merge_abandon(void);
/* alloc/free_list_scan.cpp: where the allocator starts reading a free list. */
extern int64 hilo_free_scan_from(int32 seq_id);
extern void hilo_free_scan_consumed(int32 seq_id, int64 next_from);
extern void hilo_free_scan_reset(void);
/* A push committed: every allocator reads free lists from the start again. */
extern void hilo_free_list_note_insert(void);
/* Points a pool at its inline arrays, empty. */
extern void hilo_pool_use_inline(HiloPool *pool);
/* Adds the stores to hilo's shared memory (from _PG_init); at start-up
 * they also point every pool at its inline arrays. */
extern void hilo_pool_stores_shmem_init(void);
/* Empties the list and gives back the store, if any. */
extern void hilo_pool_list_clear(HiloPool *pool);
/* Borrows a large store if one is free (or the pool has one). */
extern bool hilo_pool_store_claim(HiloPool *pool);
/* Gives the store back once the pool holds few ranges and nothing is in flight. */
extern void hilo_pool_store_give_back_if_small(HiloPool *pool);
/* Index in hilo_pool_list of the first range with IDs above `above`. */
extern uint32 hilo_pool_list_first_above(const HiloPool *pool, int64 above);
/* hilo_list_take_lowest, hilo_list_remove and hilo_list_insert on a pool's
 * list; an insert into a full pool borrows a store if it can. */
extern uint64 hilo_pool_list_take_lowest(HiloPool *pool, uint64 n, HiloRange *out,
                                         uint32 out_capacity, uint32 *out_count);
extern bool hilo_pool_list_remove(HiloPool *pool, HiloRange r);
extern HiloInsertStatus hilo_pool_list_insert(HiloPool *pool, HiloRange r, HiloRange *conflict);
extern HiloBackendSlot *hilo_my_slot(void);

/* ---- alloc/pool_refill.cpp and friends: the allocator's side of the pools ---- */

/* The allocator's side. */
typedef struct HiloPoolJob {
    int pool_index;
    uint64 generation;
    uint64 creation;
    int32 seq_id;
    bool monotonic;
    bool fresh_only;     /* skip the free list: IDs above all reserved so far */
    bool free_list_only; /* move pushed IDs in, nothing else */
    uint64 amount;       /* IDs to reserve */
    uint32 max_ranges;   /* room left in the pool */
} HiloPoolJob;
/* Pools of `dboid` that want a refill (below low water, or pushes pending). */
extern int hilo_pool_collect_jobs(Oid dboid, HiloPoolJob *jobs, int max_jobs);
/* Prepares a job for a caller's explicit request; false if the pool is stale. */
extern bool hilo_pool_job_for_request(int pool_index, uint64 min_ids, bool fresh_only,
                                      HiloPoolJob *job);
/* Removes up to n lowest IDs for a take the allocator serves; returns how many. */
extern uint64 hilo_pool_borrow(Oid dboid, uint64 creation, int32 seq_id, uint64 n, HiloRange *out,
                               uint32 out_capacity, uint32 *nout, int *pool_index,
                               uint64 *generation);
extern void hilo_pool_put_back(int pool_index, uint64 generation, const HiloRange *ranges,
                               uint32 nranges);
/* Before commit: marks a reservation as being published (for push checks). */
extern bool hilo_pool_add_inflight(int pool_index, uint64 generation, const HiloRange *ranges,
                                   uint32 nranges);
/* After commit (or rollback): moves it into the pool (or drops the mark). */
extern void hilo_pool_settle_inflight(int pool_index, uint64 generation, const HiloRange *ranges,
                                      uint32 nranges, bool committed, bool exhausted,
                                      bool free_list_drained);
/*
 * A clean shutdown's write-back, pool by pool: hilo_pool_wait_for_buffers
 * waits (up to wait_ms) for exiting backends to give back their buffers;
 * hilo_pool_holds_recyclable says whether pool `index` is one of `dboid`
 * with IDs to write back (and its sequence and generation);
 * hilo_pool_empty takes its IDs out (HILO_POOL_MAX_RANGES at most) if the
 * generation is still that one, leaving the pool and its buffers as they
 * are. The caller holds the sequence's push lock from before the IDs leave
 * the pool until they are on the free list (committed).
 */
extern void hilo_pool_wait_for_buffers(Oid dboid, int wait_ms);
extern bool hilo_pool_holds_recyclable(int index, Oid dboid, int32 *seq_id, uint64 *generation);
extern uint32 hilo_pool_empty(int index, uint64 generation, HiloRange *out, uint64 *creation);
/* Updates the rate estimates of the pools of `dboid`. */
extern void hilo_pool_update_rates(Oid dboid);

/*
 * Releasing pools (the allocator's side). A pool of `dboid` is released
 * when idle: unused since `idle_before` (or asked for by a caller that
 * needs a slot, or every pool if `all`), nothing in flight, and no backend
 * buffer holds IDs of it. Release happens in the allocator's transaction:
 * hilo_pool_release_begin takes the pool's ranges out (its generation
 * changes, so no buffer or cached entry ever serves from it again), the
 * caller writes them to the free list and commits, then
 * hilo_pool_release_finish frees the slot.
 */
extern int hilo_pool_release_candidates(Oid dboid, TimestampTz idle_before, bool all, int *indexes,
                                        uint64 *generations, int32 *seq_ids, int max);
extern bool hilo_pool_release_begin(int index, uint64 generation, TimestampTz idle_before, bool all,
                                    HiloRange *ranges, uint32 *nranges, int32 *seq_id,
                                    bool *monotonic);
extern void hilo_pool_release_finish(int index);
/* True if some backend buffer holds IDs of a current pool of `dboid`. */
extern bool hilo_pool_database_pinned(Oid dboid);

/* ---- alloc/reserve.cpp: reservations, inside the worker's transaction ---- */

/* alloc/free_rows.cpp: up to `limit` free ranges of `seq_id` from `from`
 * on, lowest first, as `snapshot` sees them, into `out` (and, unless NULL,
 * their row versions into `tids`); returns how many. */
extern uint32 hilo_free_rows_read(int32 seq_id, int64 from, uint32 limit, Snapshot snapshot,
                                  HiloRange *out, ItemPointerData *tids);
/* Deletes the rows of hilo.free_ranges whose versions hilo_free_rows_read
 * returned, in this transaction; the statements after it see them gone. */
extern void hilo_free_rows_delete(const ItemPointerData *tids, uint32 n);
/* alloc/free_rows.cpp: writes `ranges` as rows of hilo.free_ranges of
 * `seq_id`, in the current transaction, with their index entries; the
 * statements after it see them. Raises 23514 as the table's free_bounds
 * constraint would, 23505 for a row of that first ID already there. */
extern void hilo_free_rows_insert(int32 seq_id, const HiloRange *ranges, uint32 nranges);

/* alloc/sequence_row.cpp: a sequence's row, locked FOR NO KEY UPDATE. */
typedef struct HiloSequenceRow {
    int64 start_value;
    int64 max_value;
    int64 window_size;
    int32 min_open_windows;
    int64 high_water_mark;
    const char *name;    /* palloc'd */
    int32 node_bits;     /* 0 in a catalog older than 0.5.0 */
    ItemPointerData tid; /* of the row version locked */
} HiloSequenceRow;
/* Locks the row of `seq_id` as SELECT ... FOR NO KEY UPDATE NOWAIT (or SKIP
 * LOCKED) would, under a new snapshot, and reads it into `row`. False if
 * there is no such row (or, with skip_locked, another holds its lock);
 * raises 55P03 if another holds it otherwise. */
extern bool hilo_sequence_row_lock(int32 seq_id, bool skip_locked, HiloSequenceRow *row);

typedef struct HiloReserveOptions {
    bool use_free_list; /* pushed-back IDs first */
    bool use_windows;   /* then open windows and fresh claims */
    uint32 max_ranges;  /* stop at this many ranges (0: no limit) */
    /* When the open windows fall short: claim the rest straight above them
     * (in a cluster, through the quorum register, waiting for a majority).
     * Pool refills do so only if the open windows gave nothing at all. */
    bool claim_beyond_windows;
    /* A take that fails unless served whole: claim the rest beyond the
     * windows only if all of it can be claimed (a claim through the quorum
     * register cannot be rolled back), or all but `pool_ids`, which the
     * take borrows from the pool at the end of a sequence. */
    bool whole_claim;
    uint64 pool_ids;
} HiloReserveOptions;

typedef struct HiloReservation {
    HiloRange *ranges; /* palloc'd, sorted, merged */
    uint32 count;
    uint64 ids;
    int64 max_value;
    int32 node_bits;        /* for the error of a take that falls short (hilo_sequence_bounds) */
    bool free_list_drained; /* no free range is left */
    uint64 left_unclaimed;  /* whole_claim refused: IDs left beyond the windows */
} HiloReservation;

/*
 * Reserves up to `want` IDs in the current (sub)transaction, lowest first.
 * Raises 42704 if the sequence is gone and 55P03 if another transaction
 * holds it; never raises for a shortfall.
 */
extern void hilo_reserve(int32 seq_id, const char *seq_name, uint64 want,
                         const HiloReserveOptions *options, HiloReservation *result);
/* Puts reserved but undelivered IDs back on the free list. */
extern void hilo_unreserve(int32 seq_id, const HiloRange *ranges, uint32 nranges);
/* Tops up every sequence's open windows; merges adjacent free ranges if asked. */
extern void hilo_maintain_all_sequences(bool merge_free_ranges, bool merge_all,
                                        const HiloMergeSpan *spans, uint32 nspans);

#endif /* HILO_PG_ALLOC_INTERNAL_H */
