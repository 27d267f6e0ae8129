/*
 * alloc/alloc.h: the node's allocator, as sql/, commands/ and cluster/ call
 * it: pools and backend buffers, a caller's requests, commit-time actions,
 * the allocator's lifecycle, reservations, the window source, sequences
 * created in the caller's own transaction, and looking a sequence up.
 */
#ifndef HILO_PG_ALLOC_ALLOC_H
#define HILO_PG_ALLOC_ALLOC_H

#include "shared.h"
#include "../entry.h"
#include "../../core/keys_c_api.h"

/* ---- alloc/lookup.cpp: a sequence as a caller sees it ---- */

/*
 * Looks up a sequence by name in the caller's snapshot; raises 42704 if it
 * does not exist. Needs hilo_catalog_begin(). A sequence that hilo_create
 * made in the caller's own open transaction has created_here set, and its
 * catalog record is brought up to date first (alloc/local_sequences.cpp). If
 * `for_allocation`, refuses (55000) one that the caller's transaction
 * changed otherwise, which the allocator cannot use until it commits.
 */
extern void hilo_lookup_sequence(const char *name, bool for_allocation, HiloSequence *seq);
/*
 * Every sequence of the catalog (0.5.0 on), as hilo_lookup_sequence would
 * read each in the caller's snapshot, but for those the current transaction
 * wrote (left out); a palloc'd array in *out. Returns -1 (nothing read) if
 * there are more than `limit` or the catalog is older. Needs
 * hilo_catalog_begin() (alloc/lookup_all.cpp).
 */
extern int hilo_lookup_all_sequences(int limit, HiloSequence **out);

/* hilo_lookup_sequence and hilo_check_usage for the current user, in a
 * catalog access of its own: the start of a take or a nextval. */
extern void hilo_lookup_usable_sequence(const char *name, bool for_allocation, HiloSequence *seq);

/* Raises 42501 unless the current user owns `seq` or is a superuser. */
extern void hilo_check_owner(const HiloSequence *seq, Oid user, const char *action);

/* hilo.usage_grants, or InvalidOid before 0.3.0. */
extern Oid hilo_usage_grants_relid(void);
/* True if `user` may take from, push to and call hilo_nextval on `seq`: a
 * superuser, a member of its owner role, or one it was granted to (or to
 * PUBLIC). Needs hilo_catalog_begin(). */
extern bool hilo_user_may_use(const HiloSequence *seq, Oid user);
/* Raises 42501 unless hilo_user_may_use(). */
extern void hilo_check_usage(const HiloSequence *seq, Oid user);

/* Takes the per-sequence lock that serializes pushes and drops. */
extern void hilo_lock_sequence_for_push(int32 seq_id);
extern bool hilo_try_lock_sequence_for_push(int32 seq_id);
/* Looks `name` up, checks `caller`'s right to it (owner, to `owner_action`
 * it; NULL: usage), takes its push lock, and returns the row as committed
 * once the lock is held: if the sequence was dropped meanwhile, the one made
 * again under the name (locked and checked in turn), or 42704; `flags`
 * (HILO_LOCK_*) change that. Needs hilo_catalog_begin(). */
#define HILO_LOCK_MISSING_OK 0x1 /* no sequence of the name: false, not 42704 */
#define HILO_LOCK_NOT_REMADE 0x2 /* one made again while it waited: 40001 */
extern bool hilo_lock_named_sequence(const char *name, Oid caller, const char *owner_action,
                                     int flags, HiloSequence *seq);
/* The start of a change to `name` by its owner (drop, alter): opens `access`
 * and hilo_lock_named_sequence() with `flags`, so pushes in flight finish
 * first. False (with HILO_LOCK_MISSING_OK) when there is no such sequence:
 * `access` is closed again. */
extern bool hilo_begin_owned_sequence(const char *name, const char *action, int flags,
                                      HiloCatalogAccess *access, HiloSequence *seq);

/* ---- alloc/pool.cpp: pools and backend buffers ---- */

typedef enum HiloPoolResult {
    HILO_POOL_OK = 0,
    HILO_POOL_EMPTY, /* nothing suitable: ask the allocator to refill */
    HILO_POOL_STALE, /* the pool was invalidated: look the sequence up again */
} HiloPoolResult;

/* Finds the pool of (MyDatabaseId, seq), or claims a slot for it (when the
 * table is full, waiting for allocators to give pools back). Returns its
 * index and, in *generation, its generation as read with the slot; *created
 * tells whether this call gave the sequence its pool. */
extern int hilo_pool_attach_created(const HiloSequence *seq, uint64 *generation, bool *created);
/* Frees a pool that nothing ever entered or left (a failed call's, which
 * must leave no trace). Never raises. */
extern void hilo_pool_release_if_unused(int pool_index, uint64 generation);
/* IDs of the pool above `above`. */
extern uint64 hilo_pool_ids_above(int pool_index, uint64 generation, int64 above);
/* False once the slot is another sequence's, or its sequence was dropped
 * or changed (the generation moved on). */
extern bool hilo_pool_is_current(int pool_index, uint64 generation);
/* The pool of (dboid, incarnation, seq_id), or -1; and, unless
 * `generation` is NULL, its generation when it was found. A slot can be
 * another sequence's as soon as this returns: use the pool only with that
 * generation (every call below checks it under the pool's lock), or check
 * the pool's identity under its lock. */
extern int hilo_pool_lookup(Oid dboid, uint64 incarnation, int32 seq_id, uint64 *generation);
/* Invalidates, and frees, every pool of `dboid` that belongs to another
 * catalog incarnation than `incarnation`: their IDs are a gap. */
extern void hilo_pool_forget_other_incarnations(Oid dboid, uint64 incarnation);
extern HiloPool *hilo_pool_at(int index);
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
extern void hilo_merge_note_span(int32 seq_id, int64 lo, int64 hi);
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

/* Fills this backend's buffer `buffer_index` with up to `want` IDs (at
 * most the sequence's block_size, at least one) above `above`; `now` is
 * the pool's last use. On EMPTY, *need_fresh tells whether the pool has
 * IDs, just none above `above`. */
extern HiloPoolResult hilo_pool_fill_buffer(int pool_index, uint64 generation, int buffer_index,
                                            int64 above, uint64 want, TimestampTz now,
                                            bool *need_fresh);
/* Backend buffers filled from the pool's current generation (a hint). */
extern int hilo_pool_sessions(int pool_index);
/* This backend's buffer b; marks buffers up to b as used (see nused). */
extern HiloBuffer *hilo_my_buffer(int b);
/* The next ID of a monotonic sequence: the pool's lowest. */
extern HiloPoolResult hilo_pool_next_monotonic(int pool_index, uint64 generation, int64 *id);
/* Exactly n lowest IDs (palloc'd), if the pool has them and no pushed IDs
 * wait on the free list; EMPTY otherwise. */
extern HiloPoolResult hilo_pool_take(int pool_index, uint64 generation, uint64 n,
                                     HiloRange **ranges, uint32 *nranges);
/* Gives this backend's buffer back to its pool (eviction, exit). */
extern void hilo_buffer_release(int buffer_index);
/* Gives back every buffer of this backend; registered at first use. */
extern void hilo_buffers_release_all(void);
/* True if some ID of `ranges` (sorted, disjoint) sits unissued in a pool, a
 * reservation being published, or a backend's buffer; *hit names the
 * lowest such run. */
extern bool hilo_pool_find_unissued(Oid dboid, uint64 incarnation, int32 seq_id,
                                    const HiloRange *ranges, uint32 nranges, HiloRange *hit);
/* At commit of a drop or settings change: buffers and pool become stale,
 * and the pool's slot is free. seq_id -1: every pool of the database. */
extern void hilo_pool_invalidate(Oid dboid, int32 seq_id);
/* At commit of a push: the allocator moves the free list in first. */
extern void hilo_pool_note_push(Oid dboid, uint64 incarnation, int32 seq_id);
/* Counts IDs a take served by the allocator handed out, for hilo.status
 * (hilo_issued_count, and the pool's own count if it has one). */
extern void hilo_pool_count_issued(Oid dboid, uint64 incarnation, int32 seq_id, uint64 ids);
/* Counts IDs of (dboid, seq_id) in the pool and in buffers, for hilo.status. */

extern void hilo_pool_counts(int pool_index, uint64 *pool_ids, uint64 *buffered_ids, uint64 *issued,
                             double *rate);

/* The allocator's side. */
typedef struct HiloPoolJob {
    int pool_index;
    uint64 generation;
    uint64 incarnation;
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
extern uint64 hilo_pool_borrow(Oid dboid, uint64 incarnation, int32 seq_id, uint64 n,
                               HiloRange *out, uint32 out_capacity, uint32 *nout, int *pool_index,
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
extern uint32 hilo_pool_empty(int index, uint64 generation, HiloRange *out, uint64 *incarnation);
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

/* ---- alloc/client.cpp: the caller's side of a reservation ---- */

/* Reserves n IDs (or as many as remain, if partial); returns palloc'd ranges. */
extern HiloRange *hilo_allocator_take(const HiloSequence *seq, int64 n, bool partial,
                                      uint32 *nranges);
/* Asks the allocator to refill a pool with at least min_ids and waits until
 * it has. Returns false if the sequence has nothing left to add; raises any
 * other error. */
extern bool hilo_allocator_refill(const HiloSequence *seq, int pool_index, uint64 min_ids,
                                  bool fresh_only);
/* At commit: tell the pool of a push (its free list comes first now). */
extern void hilo_note_push_at_commit(uint64 incarnation, int32 seq_id);
/* At commit: a drop or settings change makes buffers and pool stale. */
extern void hilo_invalidate_at_commit(int32 seq_id);
/* Registers (once) the exit callback that abandons requests and gives
 * buffers back to their pools. */
extern void hilo_register_backend_exit(void);
/* Wakes this database's allocator, if it runs (no-op otherwise). */
extern void hilo_allocator_wake(void);
/* Wakes the allocator when the current transaction commits; with
 * `free_ranges_changed`, also asks it to merge adjacent free ranges. */
extern void hilo_allocator_wake_at_commit(bool free_ranges_changed);
/* The allocator entry of this database, started if needed (registering a
 * worker, or making room for one); sets *incarnation (alloc/lifecycle.cpp). */
extern int hilo_allocator_ensure_worker(uint64 *incarnation);
/* Sets the latch of the allocator in entry `index`, if it runs. */
extern void hilo_allocator_wake_entry(int index);
/* Asks the allocator of `dboid` to release the pools marked for release;
 * false if it has no running allocator (alloc/pool.cpp). */
extern bool hilo_allocator_request_release(Oid dboid);
/* Asks the allocator of `dboid`, if any, to exit, and waits until it has. */
extern void hilo_allocator_stop_for_database(Oid dboid);
/* At commit or prepare, every pool of this database becomes stale (the
 * catalog is being dropped). */
extern void hilo_invalidate_all_at_commit(void);

/* ---- alloc/worker.cpp ---- */

extern "C" PGDLLEXPORT void hilo_allocator_main(Datum main_arg);

/* ---- alloc/reserve.cpp: reservations, inside the worker's transaction ---- */

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
/* The 2200H error of a take that got `got` of `wanted` IDs; `top` as
 * hilo_sequence_bounds gives it. */
extern void hilo_raise_short(const char *seq_name, uint64 got, uint64 wanted, int64 max_value,
                             int64 top) pg_attribute_noreturn();
/* Puts reserved but undelivered IDs back on the free list. */
extern void hilo_unreserve(int32 seq_id, const HiloRange *ranges, uint32 nranges);
/* Tops up every sequence's open windows; merges adjacent free ranges if asked. */
extern void hilo_maintain_all_sequences(bool merge_free_ranges, bool merge_all,
                                        const HiloMergeSpan *spans, uint32 nspans);

/*
 * Where windows above the high-water mark come from. A node in no cluster
 * claims them itself, right above its own high-water mark. A member of a
 * hilo cluster must not: there windows come from the quorum register. The
 * allocator knows nothing of clusters: cluster/ installs a window source at
 * _PG_init (cluster/window_claim.cpp) and the allocator asks it, so calls
 * run from cluster/ into alloc/ and never back up. Each function pointer is
 * called in a transaction, SPI connected.
 */
typedef struct HiloWindowSource {
    /* True if this node is in a cluster now (then it must not claim locally). */
    bool (*active)(void);
    /* Before a claim above the high-water mark: false means "claim locally".
     * Otherwise the source claimed (or not: *claimed), as
     * hilo_cluster_claims_window in cluster/cluster.h describes. */
    bool (*claims_window)(const char *seq_name, int64 start_value, int64 max_value, uint64 size,
                          bool for_take, bool *claimed, HiloRange *window);
    bool (*claims_whole_window)(const char *seq_name, int64 start_value, int64 max_value,
                                uint64 size, bool *claimed, HiloRange *window, uint64 *left);
    /* At an allocator's start, before it serves anything. */
    void (*at_allocator_start)(void);
    /* This node's id in its cluster, -1 in none (node_bits slices). */
    int32 (*local_node_id)(void);
    /* `n` IDs of a sequence ordered across the cluster ('cluster', 'quorum'), as one
     * range above every ID any node handed out before this call began. */
    void (*ordered_take)(const HiloSequence *seq, uint64 n, HiloRange *out);
    /* Whether this node may claim in its slice of a node_bits sequence
     * (hilo_cluster_slice_agreed in cluster/cluster.h). */
    bool (*slice_agreed)(int32 seq_id, const char *seq_name, int32 node_bits, bool raise);
} HiloWindowSource;

/* Installs the window source (from _PG_init; NULL: every node claims locally). */
extern void hilo_set_window_source(const HiloWindowSource *source);
/* The IDs this node claims for a sequence with node_bits (alloc/window_source.cpp):
 * false (or with `raise`, 55000) if this node's id does not fit. */
extern bool hilo_node_slice_of(const char *seq_name, int32 node_bits, bool raise, HiloRange *slice);
/* The IDs this node may hand out of a sequence: above *floor, up to *top (its
 * max_value, or the end of this node's slice when node_bits puts that
 * first; *floor 0 without node_bits). For a node id that does not fit:
 * false with nothing left (*top 0), or with `raise` 55000. */
extern bool hilo_sequence_bounds(const char *seq_name, int32 node_bits, int64 max_value, bool raise,
                                 int64 *floor, int64 *top);
/* hilo_sequence_bounds of `seq`, raising, from outside catalog access (it
 * reads this node's id in the catalog only for a sequence with node_bits). */
extern void hilo_sequence_bounds_of(const HiloSequence *seq, int64 *floor, int64 *top);
/* The source's slice_agreed; true without one. */
extern bool hilo_node_slice_agreed(int32 seq_id, const char *seq_name, int32 node_bits, bool raise);
/* The source's ordered_take; 0A000 without one that has it. */
extern void hilo_ordered_take(const HiloSequence *seq, uint64 n, HiloRange *out);
/* The installed source's answer; false without a source. */
extern bool hilo_window_source_active(void);
/* The installed source's at_allocator_start, if any. */
extern void hilo_window_source_allocator_start(void);
/* A claim of `size` IDs through the installed source (`whole`: all of them or
 * none, *left then saying how many are left); false if there is no source
 * or it does not claim here (the allocator then claims locally). */
extern bool hilo_window_source_claims(const char *seq_name, int64 start_value, int64 max_value,
                                      uint64 size, bool used_up, bool whole, bool *claimed,
                                      HiloRange *window, uint64 *left);

/* ---- alloc/local_sequences.cpp: sequences created in the caller's own transaction ---- */

/* hilo_create made `seq_id` in the current (sub)transaction. */
extern void hilo_local_note_created(int32 seq_id);
extern bool hilo_local_created_here(int32 seq_id);
/* True if the current transaction created some sequence. */
extern bool hilo_local_any(void);
/* Writes what was handed out of `seq` to the catalog, if not yet there, and
 * raises seq->high_water_mark to it. SPI connected, as the catalog owner. */
extern void hilo_local_record(HiloSequence *seq);
/* A take of a sequence created here, reserved in this transaction. */
extern HiloRange *hilo_local_take(const HiloSequence *seq, int64 n, bool partial, uint32 *nranges);
/* Drops this backend's cached entry (and buffer) for `name` (sql/nextval.cpp):
 * the name now means a sequence of this transaction. */
extern void hilo_nextval_forget(const char *name);

/* ---- issued.cpp: IDs handed out per sequence since start, for hilo.status ---- */

/* From _PG_init: adds the table to the shared-memory segment. */
extern void hilo_issued_shmem_init(void);
/* Counts IDs of a sequence handed out (any path), and IDs that came back
 * unused (a buffer's leftovers returned to the pool). */
extern void hilo_issued_count(Oid dboid, uint64 incarnation, int32 seq_id, uint64 ids);
/* The same for an ordered call, which also updates the rate (once a second
 * at most): no allocator need run for them. */
extern void hilo_issued_count_ordered(Oid dboid, uint64 incarnation, int32 seq_id, uint64 ids);
extern void hilo_issued_returned(Oid dboid, uint64 incarnation, int32 seq_id, uint64 ids);
typedef struct HiloIssued {
    int32 seq_id;
    uint64 issued;
    double rate;
    bool runway_warned;
} HiloIssued;
/* Updates the rates of a database's sequences (the allocator's maintenance). */
extern void hilo_issued_update_rates(Oid dboid);
/* The counted sequences of a database's catalog (at most `max`). */
extern int hilo_issued_read(Oid dboid, uint64 incarnation, HiloIssued *out, int max);
/* Marks whether the runway warning was logged for the sequence's current
 * crossing; returns whether that changed (false too if not counted). */
extern bool hilo_issued_set_warned(Oid dboid, uint64 incarnation, int32 seq_id, bool warned);

/* ---- raise_rows.cpp: what a raise changes in this node's catalog ---- */

/* The catalog rows of a raise of the locked sequence `seq` above `above`:
 * the high-water mark (with `move_start`, start_value too), the windows'
 * next values and the free list. Refuses nothing (callers check); returns
 * whether a row changed. The caller makes the pool stale at commit. */
extern bool hilo_raise_rows(const HiloSequence &seq, int64 above, bool move_start);
/* The raise itself, unchecked (`above` at or above seq's start_value): the
 * rows, then the pool and buffers stale at commit; ends `access`. */
extern void hilo_raise_apply_locked(const HiloSequence &seq, int64 above,
                                    HiloCatalogAccess *access);

#endif /* HILO_PG_ALLOC_ALLOC_H */
