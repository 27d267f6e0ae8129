/*
 * alloc/alloc.h: the node's allocator, as sql/, commands/ and cluster/ call
 * it: pools and backend buffers, a caller's requests, commit-time actions,
 * the allocator's lifecycle, the window source (window_source.h), sequences
 * created in the caller's own transaction, and looking a sequence up. What
 * only the allocator's own files share is in alloc/internal.h.
 */
#ifndef HILO_PG_ALLOC_ALLOC_H
#define HILO_PG_ALLOC_ALLOC_H

#include "shared.h"
#include "window_source.h"
#include "../entry.h"
#include "../../core/keys_c_api.h"

extern "C" {
#include "access/xact.h"
}

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

/* True for the events after which a transaction callback's state for this
 * transaction is dead: it committed, aborted or was prepared. */
static inline bool hilo_xact_is_over(XactEvent event)
{
    return event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT ||
           event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT ||
           event == XACT_EVENT_PREPARE;
}

/* SQL: the highest ID catalog row `s` of hilo.sequences handed out or holds
 * on the node that runs it (high-water mark, windows, free ranges), or
 * start_value - 1. hilo._held_up_to runs it here, hilo._cluster_held_up_to
 * on every other node. */
#define HILO_HELD_UP_TO_SQL                                                                \
    "greatest(s.high_water_mark, s.start_value - 1,"                                       \
    " (SELECT max(w.window_end_value) - 1 FROM hilo.windows w WHERE w.seq_id = s.seq_id)," \
    " (SELECT max(f.last_id) FROM hilo.free_ranges f WHERE f.seq_id = s.seq_id))"

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
/* The epoch of every pool's generation (HiloShared.generation_epoch): a
 * pool whose generation is read after it, and found unchanged, stays of
 * that generation while the epoch stands. */
static inline uint64 hilo_pool_generation_epoch(void)
{
    return pg_atomic_read_u64(&hilo_shared->generation_epoch);
}
/* The pool of (dboid, creation, seq_id), or -1; and, unless
 * `generation` is NULL, its generation when it was found. A slot can be
 * another sequence's as soon as this returns: use the pool only with that
 * generation (every call below checks it under the pool's lock), or check
 * the pool's identity under its lock. */
extern int hilo_pool_lookup(Oid dboid, uint64 creation, int32 seq_id, uint64 *generation);
/* Invalidates, and frees, every pool of `dboid` that belongs to another
 * catalog creation than `creation`: their IDs are a gap. */
extern void hilo_pool_forget_other_creations(Oid dboid, uint64 creation);
extern HiloPool *hilo_pool_at(int index);
/* A push notes the span of free list it wrote, for the allocator's merge
 * pass (alloc/merge_spans.cpp). */
extern void hilo_merge_note_span(int32 seq_id, int64 lo, int64 hi);
/* The same for many ranges of a push, ascending and disjoint. */
extern void hilo_merge_note_spans(int32 seq_id, const HiloRange *ranges, uint32 nranges);

/* Fills this backend's buffer `buffer_index` with up to `want` IDs (at
 * most the sequence's block_size, at least one) above `above`; `now` is
 * the pool's last use. On EMPTY, *need_fresh tells whether the pool has
 * IDs, just none above `above`. */
extern HiloPoolResult hilo_pool_fill_buffer(int pool_index, uint64 generation, int buffer_index,
                                            int64 above, uint64 want, TimestampTz now,
                                            bool *need_fresh);
/* Brings in the lines of the pool a take reads and writes (its generation,
 * its lock and what follows it, its first ranges), so that they come
 * together rather than one after the other. Reads nothing. */
extern void hilo_pool_prefetch_take(int pool_index);
/* The lowest ID above `above`, straight out of the pool, without a buffer;
 * `now` is the pool's last use. EMPTY and STALE as for
 * hilo_pool_fill_buffer, or EMPTY with *inside_range, changing nothing,
 * when that ID is not the first of its range (taking it would split the
 * range: the caller fills a buffer instead). */
extern HiloPoolResult hilo_pool_next_above(int pool_index, uint64 generation, int64 above,
                                           TimestampTz now, int64 *id, bool *need_fresh,
                                           bool *inside_range);
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
extern bool hilo_pool_find_unissued(Oid dboid, uint64 creation, int32 seq_id,
                                    const HiloRange *ranges, uint32 nranges, HiloRange *hit);
/* At commit of a drop or settings change: buffers and pool become stale,
 * and the pool's slot is free. seq_id -1: every pool of the database. */
extern void hilo_pool_invalidate(Oid dboid, int32 seq_id);
/* At commit of a push: the allocator moves the free list in first. */
extern void hilo_pool_note_push(Oid dboid, uint64 creation, int32 seq_id);
/* Counts IDs a take served by the allocator handed out, for hilo.status
 * (hilo_issued_count, and the pool's own count if it has one). */
extern void hilo_pool_count_issued(Oid dboid, uint64 creation, int32 seq_id, uint64 ids);
/* Counts IDs of (dboid, seq_id) in the pool and in buffers, for hilo.status. */

extern void hilo_pool_counts(int pool_index, uint64 *pool_ids, uint64 *buffered_ids, uint64 *issued,
                             double *rate);

/* ---- alloc/client.cpp: the caller's side of a reservation ---- */

/* Reserves n IDs (or as many as remain, if partial); returns palloc'd ranges. */
extern HiloRange *hilo_allocator_take(const HiloSequence *seq, int64 n, bool partial,
                                      uint32 *nranges);
/* The same, for `seq` as this backend looked it up before: NULL, with
 * nothing reserved, if its row or its catalog is gone by now (dropped,
 * maybe made again): the caller looks the name up again. */
extern HiloRange *hilo_allocator_take_remembered(const HiloSequence *seq, int64 n, bool partial,
                                                 uint32 *nranges);
/* Asks the allocator to refill a pool with at least min_ids and waits until
 * it has. Returns false if the sequence has nothing left to add; raises any
 * other error. */
extern bool hilo_allocator_refill(const HiloSequence *seq, int pool_index, uint64 min_ids,
                                  bool fresh_only);
/* At commit: tell the pool of a push (its free list comes first now). */
extern void hilo_note_push_at_commit(uint64 creation, int32 seq_id);
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
 * worker, or making room for one); sets *serial, the worker's (alloc/lifecycle.cpp). */
extern int hilo_allocator_ensure_worker(uint64 *serial);
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

/* The 2200H error of a take that got `got` of `wanted` IDs; `top` as
 * hilo_sequence_bounds gives it. */
extern void hilo_raise_short(const char *seq_name, uint64 got, uint64 wanted, int64 max_value,
                             int64 top) pg_attribute_noreturn();

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
extern void hilo_issued_count(Oid dboid, uint64 creation, int32 seq_id, uint64 ids);
/* Tells the node's count of issued IDs what the pools of `dboid` collected
 * (alloc/pool_state.cpp): before it is read. */
extern void hilo_pool_report_issued(Oid dboid);
/* The same for an ordered call, which also updates the rate (once a second
 * at most): no allocator need run for them. */
extern void hilo_issued_count_ordered(Oid dboid, uint64 creation, int32 seq_id, uint64 ids);
extern void hilo_issued_returned(Oid dboid, uint64 creation, int32 seq_id, uint64 ids);
typedef struct HiloIssued {
    int32 seq_id;
    uint64 issued;
    double rate;
    bool runway_warned;
} HiloIssued;
/* Updates the rates of a database's sequences (the allocator's maintenance). */
extern void hilo_issued_update_rates(Oid dboid);
/* The counted sequences of a database's catalog (at most `max`). */
extern int hilo_issued_read(Oid dboid, uint64 creation, HiloIssued *out, int max);
/* Marks whether the runway warning was logged for the sequence's current
 * crossing; returns whether that changed (false too if not counted). */
extern bool hilo_issued_set_warned(Oid dboid, uint64 creation, int32 seq_id, bool warned);

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
