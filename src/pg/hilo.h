/*
 * hilo.h: declarations shared by the PostgreSQL side of hilo (src/pg/).
 *
 * Everything in src/pg/ is in the PostgreSQL regime: palloc, ereport, PODs.
 * No object with a non-trivial destructor may be alive across a call that
 * can ereport. The pure C++ core is reached only through core/c_api.h.
 */
#ifndef HILO_PG_HILO_H
#define HILO_PG_HILO_H

/* C++ headers before postgres.h, whose macros (printf, ...) they must not see. */
#include <exception>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

/* PostgreSQL 15 headers declare C functions without extern "C" guards. */
extern "C" {
#include "postgres.h"

#include "datatype/timestamp.h"
#include "fmgr.h"
#include "port/atomics.h"
#include "storage/lwlock.h"
#include "utils/snapshot.h"
}

#include "../core/c_api.h"

/* Longest sequence name, in bytes. */
#define HILO_MAX_NAME_BYTES 255

/* Ranges a reply carries at once; longer results come in several chunks. */
#define HILO_REPLY_RANGES 256

/* Room for an error message crossing from the allocator to a caller. */
#define HILO_MESSAGE_BYTES 512

/* Sequences one backend can hold a buffer of at once is hilo.session_buffers
 * (hilo_session_buffers; the least recently used is given back to its pool
 * when a further one is needed). */

/* Ranges a pool holds; pools are refilled lowest first, so few are used. */
#define HILO_POOL_RANGES 128

/* Most windows a sequence keeps open (min_open_windows): what one sequence
 * may make the allocator write per refill and per naptime is bounded by it. */
#define HILO_MAX_OPEN_WINDOWS 100

/* Reservations of one pool that can be between commit and publication. */
#define HILO_POOL_INFLIGHT 32

/*
 * A pool fed from a fragmented free list (thousands of small pushed-back
 * ranges) borrows one of a few large stores, so that one refill, one
 * commit, moves thousands of free ranges into it (issue 12); it gives the
 * store back once it holds few ranges again. HILO_POOL_MAX_RANGES is the
 * most ranges any pool can hold.
 */
#define HILO_POOL_STORES 8
#define HILO_STORE_RANGES 8192
#define HILO_POOL_MAX_RANGES HILO_STORE_RANGES

/* ---- module.cpp: GUCs and preload state ---- */

extern bool hilo_preloaded;
extern int hilo_naptime_ms;
extern int hilo_max_databases;
extern int hilo_max_sequences;
extern int hilo_session_buffers;
extern int hilo_pool_low_water;
extern int hilo_pool_idle_timeout_ms;
extern int hilo_allocator_idle_timeout_ms;

/* Entries of the allocator table (shmem.cpp): one per allocator that can
 * run at once. Each allocator takes a background worker slot, so
 * max_worker_processes bounds them; hilo.max_databases, if set, bounds them
 * further. */
extern int hilo_worker_table_size(void);

#include "entry.h"

/* ---- A sequence as a caller sees it (catalog.cpp) ---- */

typedef struct HiloSequence {
    int32 seq_id;
    uint64 incarnation; /* of the catalog it was read from (hilo_catalog_incarnation) */
    char name[HILO_MAX_NAME_BYTES + 1];
    int64 start_value;
    int64 max_value;
    int64 window_size;
    int32 min_open_windows;
    int32 block_size;
    Oid owner;
    int64 high_water_mark;
    bool monotonic;
    bool created_here; /* by hilo_create in the caller's own open transaction */
} HiloSequence;

/* ---- catalog.cpp: catalog access as the extension owner ---- */

/*
 * Brackets catalog queries made on behalf of a caller. Between begin and end
 * the current user is the owner of the hilo catalog, search_path is
 * "pg_catalog, pg_temp" and SPI is connected. An error inside unwinds all of
 * it with the transaction; end() is only for the normal path.
 */
typedef struct HiloCatalogAccess {
    Oid saved_user;
    int saved_sec_context;
    int guc_nest_level;
} HiloCatalogAccess;

extern void hilo_catalog_begin(HiloCatalogAccess *access);
extern void hilo_catalog_end(HiloCatalogAccess *access);
/*
 * Inside an access: plans made until its end use indexes, never a
 * sequential scan and sort. hilo.free_ranges churns like a queue (rows
 * inserted by the thousand, consumed lowest first), so its statistics are
 * often those of a much smaller table, and a plan of "scan everything, sort,
 * take the first rows" then reads the whole free list on every call
 * (issue 12). The allocator runs with the same setting for its whole life.
 */
extern void hilo_catalog_prefer_indexes(void);

/* Validates a sequence name argument (22023) and copies it out. */
extern void hilo_check_name(text *name_text, char *name_out);
extern void hilo_check_name_length(int len);
/* True once the catalog is at 0.2.0 (has hilo.sequences.monotonic). */
extern bool hilo_catalog_has_monotonic(void);
/* True if schema hilo has a relation of that name (0.1.0 lacks some). */
extern bool hilo_catalog_has_table(const char *name);
/*
 * The catalog's incarnation: hilo.incarnation's value (random, made by each
 * CREATE EXTENSION, never dumped), or before 0.5.0 the OID of
 * hilo.sequences. Shared memory is keyed by it, so that nothing outlives
 * the catalog it came from (docs/design.md, "Catalog incarnations").
 * Needs hilo_catalog_begin() or SPI connected. Returns false if the catalog
 * is missing; raises 40001 if the caller's snapshot cannot see its row (the
 * catalog was re-created after the snapshot was taken).
 */
extern bool hilo_catalog_incarnation(uint64 *incarnation);
/* The relation hilo.sequences; raises 55000 if the catalog is missing. */
extern Oid hilo_catalog_relid(void);
/* The incarnation of a catalog from before 0.5.0 (no hilo.incarnation). */
extern uint64 hilo_catalog_incarnation_before_0_5(Oid relid);
/* 40001: the catalog was created again after the caller's snapshot. */
extern void hilo_raise_catalog_recreated(void) pg_attribute_noreturn();
/* A value of the last SPI result. */
extern Datum hilo_spi_value(uint64 row, int column, bool *isnull);
/* The relation hilo.sequences, or InvalidOid if the catalog is missing. */
extern Oid hilo_catalog_relid_if_present(void);

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

/* Runs a cached, parameterized catalog statement through SPI. */
extern int hilo_spi_exec(const char *sql, int nargs, const Oid *argtypes, Datum *values,
                         const char *nulls, bool read_only, long max_rows);
/* The same with a given snapshot (used to see the latest committed state). */
extern int hilo_spi_exec_snapshot(const char *sql, int nargs, const Oid *argtypes, Datum *values,
                                  const char *nulls, Snapshot snapshot, long max_rows);

/* Typed access to SPI_tuptable, column numbers from 1. */
extern int64 hilo_spi_int64(uint64 row, int column);
extern int32 hilo_spi_int32(uint64 row, int column);
extern bool hilo_spi_isnull(uint64 row, int column);

/* ---- shmem.cpp: the allocator's shared state ---- */

typedef enum HiloWorkerState {
    HILO_WORKER_NONE = 0,
    HILO_WORKER_STARTING,
    HILO_WORKER_RUNNING,
    HILO_WORKER_EXITING, /* idle: giving its pools back, then gone; a caller waits */
} HiloWorkerState;

/* IDs of one sequence some pushes (or returns) freed: where the merge pass
 * looks (alloc/merge_spans.cpp). */
#define HILO_MERGE_SPANS 16
typedef struct HiloMergeSpan {
    int32 seq_id;
    int64 lo;
    int64 hi;
} HiloMergeSpan;

/* One allocator worker per database. */
typedef struct HiloWorkerEntry {
    Oid dboid;
    HiloWorkerState state;
    pid_t pid;
    int procno;               /* the worker's pgprocno, to set its latch */
    uint64 incarnation;       /* changes every time the entry is (re)claimed */
    bool stop_requested;      /* set when a database-level command needs it gone */
    bool free_ranges_changed; /* a push committed since the last merge */
    /* Where: spans of pushes committed since (alloc/merge_spans.cpp), or all. */
    bool merge_all;
    uint32 nmerge_spans;
    HiloMergeSpan merge_spans[HILO_MERGE_SPANS];
    /* Another database needs this allocator's worker slot: exit if idle
     * (no request in progress, no session holding IDs of its pools). */
    bool exit_requested;
    bool exit_refused;       /* the answer to exit_requested: busy */
    bool release_requested;  /* a caller needs pool slots: release marked pools */
    TimestampTz last_active; /* when it last served a request */
} HiloWorkerEntry;

typedef enum HiloRequestState {
    HILO_REQ_IDLE = 0,
    HILO_REQ_SUBMITTED, /* written by the caller, not yet seen by the worker */
    HILO_REQ_RUNNING,   /* the worker is reserving */
    HILO_REQ_READY,     /* a reply (or one chunk of it) is in the slot */
    HILO_REQ_ABANDONED, /* the caller gave up; the worker frees what it reserved */
} HiloRequestState;

typedef enum HiloRequestKind {
    HILO_REQUEST_TAKE = 1,
    HILO_REQUEST_NEXT_CHUNK,
    HILO_REQUEST_REFILL, /* fill a pool, reply once published; n = IDs wanted at least */
} HiloRequestKind;

/*
 * A backend's mailbox to its database's allocator, indexed by pgprocno.
 * State changes happen under HiloShared->lock.
 */
typedef struct HiloRequest {
    HiloRequestState state;
    HiloRequestKind kind;
    uint64 request_id; /* grows per slot; ties worker-side leftovers to a request */
    Oid dboid;
    /* The allocator (its incarnation) that owns what the slot is waiting
     * for. Once it has gone, nobody will ever move the slot on. */
    uint64 worker_incarnation;
    int32 seq_id;
    uint64 incarnation; /* of the catalog the caller looked the sequence up in */
    char seq_name[HILO_MAX_NAME_BYTES + 1]; /* for error messages */
    int64 n;
    bool partial;
    int pool_index;  /* REFILL: the pool to fill */
    bool fresh_only; /* REFILL: IDs above everything reserved so far (no free list) */

    /* The reply. */
    int sqlerrcode; /* 0 on success */
    char message[HILO_MESSAGE_BYTES];
    char detail[HILO_MESSAGE_BYTES];
    char hint[HILO_MESSAGE_BYTES];
    uint64 total_ranges; /* ranges in the whole result */
    uint32 nranges;      /* ranges in this chunk */
    bool last_chunk;
    HiloRange ranges[HILO_REPLY_RANGES];
} HiloRequest;

/*
 * A per-node pool of IDs of one sequence: reserved and committed by the
 * allocator, not yet handed to anyone. Backends refill their buffers from
 * it and small takes are served from it; the allocator tops it up.
 * Everything but `generation` is read and written under `lock`.
 */
typedef struct HiloPool {
    /* A value never used before, new each time the pool is (re)assigned or
     * invalidated; buffers and backend caches remember it. Read by every
     * hilo_nextval call, so it shares no cache line with the lock and the
     * counters that refills write. */
    pg_atomic_uint64 generation;
    /* Which sequence; changes only under pools_lock held exclusively too.
     * A pool slot is free (!in_use, !releasing), in use, or releasing: its
     * IDs are being written back to the free list by its allocator, and
     * the slot is reused only once that has committed. */
    bool in_use;
    bool releasing;
    Oid dboid;
    uint64 incarnation; /* of the catalog (a re-created catalog reuses seq_ids) */
    int32 seq_id;
    bool monotonic;
    int32 block_size;

    alignas(PG_CACHE_LINE_SIZE) LWLock lock;
    /* The pool's IDs, sorted and merged, are ranges[head .. head + nranges)
     * of `capacity` slots: the inline arrays below, or a borrowed store's
     * (`store` >= 0). Taking the lowest ranges only moves `head`. */
    HiloRange *ranges;
    uint32 head;
    uint32 nranges;
    uint32 capacity;
    uint64 ids;          /* IDs in ranges */
    HiloRange *inflight; /* committed or committing, not yet in ranges */
    uint32 ninflight;
    uint32 inflight_capacity;
    int store;       /* index of the borrowed store, or -1 */
    bool fragmented; /* the last refill was limited by room, not by IDs */
    HiloRange inline_ranges[HILO_POOL_RANGES];
    HiloRange inline_inflight[HILO_POOL_INFLIGHT];

    bool serving;           /* nextval or small takes use it: keep it filled */
    int32 attached;         /* backend buffers filled from this generation */
    uint64 target;          /* IDs a refill aims for; grows when callers wait */
    bool refill_wanted;     /* below low water: the allocator should refill */
    bool free_list_pending; /* pushes committed: move the free list in first */
    bool exhausted;         /* the last refill found nothing left */
    TimestampTz last_used;  /* last served a buffer, a take or a refill */
    /* A caller needs a pool slot: the allocator gives this one's IDs back
     * to the free list and frees it (unless it is used again first). */
    bool release_requested;
    TimestampTz release_requested_at;

    /* For hilo.status. */
    uint64 issued; /* IDs handed out of the pool since start (net of returns) */
    double rate;   /* IDs per second, recent */
    uint64 rate_issued;
    TimestampTz rate_time;
} HiloPool;

/* A large store of ranges a pool borrows (HILO_POOL_STORES of them). */
typedef struct HiloPoolStore {
    pg_atomic_uint32 owner; /* 1 + the index of the pool using it, or 0 */
    HiloRange ranges[HILO_STORE_RANGES];
    HiloRange inflight[HILO_STORE_RANGES];
} HiloPoolStore;

/*
 * One backend's buffer of IDs of one sequence: it hands out next, next + 1,
 * ..., end - 1. Only the owning backend advances `next`; identity and `end`
 * change only under the pool's lock, so a push check holding that lock sees
 * a consistent buffer (and a `next` that can only have grown).
 */
typedef struct HiloBuffer {
    /* 40 bytes, so that hilo.session_buffers of them per connection slot
     * stay small; only the owner writes its buffers (and the owner's lines
     * touch another backend's at most at the ends of its slot). */
    int64 end; /* exclusive */
    pg_atomic_uint64 next;
    uint64 generation; /* the pool's generation when filled */
    Oid dboid;
    int32 seq_id;
    int pool_index;
    bool in_use;
} HiloBuffer;

typedef struct HiloBackendSlot {
    pid_t pid;
    /* Buffers [0, nused) may have been used by this slot's backends; the
     * rest never were. Only grows (set by the owner before it fills buffer
     * nused - 1 under the pool's lock), so scans of every buffer read only
     * these. */
    int nused;
    HiloBuffer *buffers; /* buffers_per_backend of them */
} HiloBackendSlot;

typedef struct HiloShared {
    LWLock *lock;       /* protects worker entries and request states */
    LWLock *pools_lock; /* protects which sequence each pool belongs to */
    int max_databases;
    int num_requests;
    int num_pools;
    int buffers_per_backend; /* hilo.session_buffers */
    int pool_tranche_id;
    uint64 last_incarnation;          /* source of HiloWorkerEntry.incarnation */
    pg_atomic_uint64 last_generation; /* source of HiloPool.generation */
    pg_atomic_uint64 free_list_epoch; /* grows when a push commits (alloc/free_list_scan.cpp) */
    HiloWorkerEntry *workers;         /* max_databases entries */
    HiloRequest *requests;            /* num_requests entries */
    HiloBackendSlot *slots;           /* num_requests entries, by pgprocno */
    HiloPool *pools;                  /* num_pools entries */
} HiloShared;

extern HiloShared *hilo_shared;
/* (dboid, incarnation, seq_id) -> pool index, under pools_lock (shmem.cpp). */
extern struct HTAB *hilo_pool_hash;
typedef struct HiloPoolKey {
    Oid dboid;
    int32 seq_id;
    uint64 incarnation;
} HiloPoolKey;
typedef struct HiloPoolHashEntry {
    HiloPoolKey key;
    int index;
} HiloPoolHashEntry;

extern void hilo_shmem_install_hooks(void);

/*
 * A part of hilo's one shared-memory segment that another subsystem owns
 * (the agent's table, cluster/agent.cpp). Added from _PG_init; shmem.cpp
 * requests its space and `lwlocks` LWLocks (a tranche named `name`) with
 * its own, and at startup calls `attach` with the part's address: `create`
 * is true, and the part zeroed, only in the process that creates the
 * segment.
 */
typedef struct HiloShmemPart {
    const char *name;
    Size (*size)(void);
    int lwlocks;
    void (*attach)(void *base, bool create);
} HiloShmemPart;

extern void hilo_shmem_add_part(const HiloShmemPart *part);
extern HiloRequest *hilo_my_request(void);

/* ---- alloc/pool.cpp: pools and backend buffers ---- */

typedef enum HiloPoolResult {
    HILO_POOL_OK = 0,
    HILO_POOL_EMPTY, /* nothing suitable: ask the allocator to refill */
    HILO_POOL_STALE, /* the pool was invalidated: look the sequence up again */
} HiloPoolResult;

/* Finds the pool of (MyDatabaseId, seq), creating it; raises 53400 when every
 * pool is taken. Returns its index and, in *generation, its generation. */
extern int hilo_pool_attach(const HiloSequence *seq, uint64 *generation);
/* The same; *created tells whether this call gave the sequence its pool. */
extern int hilo_pool_attach_created(const HiloSequence *seq, uint64 *generation, bool *created);
/* Frees a pool that nothing ever entered or left (a failed call's, which
 * must leave no trace). Never raises. */
extern void hilo_pool_release_if_unused(int pool_index, uint64 generation);
/* IDs of the pool above `above`. */
extern uint64 hilo_pool_ids_above(int pool_index, uint64 generation, int64 above);
/* IDs the catalog still has for `seq` above `above` (open windows, room up
 * to max_value, and with `include_free` the free list), at most 2^63 - 1.
 * A take or nextval asks it before it has the allocator refill a pool for
 * it, so that a call bound to fail reserves nothing (sql/take.cpp). The
 * free list counts only its lowest block_size rows above `above`: exact for
 * the comparisons callers make (with 0, or with n <= block_size). */
extern int64 hilo_catalog_ids_left(const HiloSequence *seq, int64 above, bool include_free);
/* The pool of (dboid, incarnation, seq_id), or -1. */
extern int hilo_pool_lookup(Oid dboid, uint64 incarnation, int32 seq_id);
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
/* alloc/merge_spans.cpp: what the merge pass reads. A push notes its span; at
 * commit it is published to the allocator's entry (lock held); the pass
 * merges those spans and the allocator's own, or everything. */
extern void hilo_merge_note_span(int32 seq_id, int64 lo, int64 hi);
extern void hilo_merge_forget_spans(void);
extern void hilo_merge_publish_spans_locked(HiloWorkerEntry *e);
extern void hilo_merge_free_ranges(bool all, const HiloMergeSpan *spans, uint32 nspans);
extern void hilo_merge_spans_merged(void);
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
/* Counts IDs a take served by the allocator handed out, for hilo.status. */
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
/* Empties every pool of `dboid` into a palloc'd list of (seq_id, range), for
 * a clean shutdown; also waits (up to wait_ms) for backends to give back
 * their buffers. */
typedef struct HiloSeqRange {
    uint64 incarnation;
    int32 seq_id;
    HiloRange range;
} HiloSeqRange;
extern HiloSeqRange *hilo_pool_drain_database(Oid dboid, int wait_ms, uint32 *count);
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
/* Asks the allocator of `dboid` to release the pools marked for release;
 * false if it has no running allocator. */
extern bool hilo_allocator_request_release(Oid dboid);
/* Asks the allocator of `dboid`, if any, to exit, and waits until it has. */
extern void hilo_allocator_stop_for_database(Oid dboid);
/* At commit or prepare, every pool of this database becomes stale (the
 * catalog is being dropped). */
extern void hilo_invalidate_all_at_commit(void);
/* Column defaults (and generation expressions) and domain defaults that
 * call a hilo function with the constant sequence name `name`
 * (commands/sequence_dependents.cpp): columns as (relid, attnum), domains by OID,
 * and a description of each, columns first. */
extern void hilo_find_dependent_defaults(const char *name, struct List **relids,
                                         struct List **attnums, struct List **domains,
                                         struct List **descriptions);
/* Where a sequence created under `name` without start_value starts. */
extern int64 hilo_start_above_dropped(const char *name);
/* From _PG_init: the hooks on PostgreSQL's commands (commands/). */
extern void hilo_commands_init(void);
/* Installs the utility hook that stops a database's allocator before
 * database-level commands, and the object access hook that sees the
 * catalog dropped (commands/database_commands.cpp). */
extern void hilo_database_install_hooks(void);
/* Installs the utility hook by which DROP ROLE, REASSIGN OWNED and DROP
 * OWNED see hilo sequences (commands/role_commands.cpp). */
extern void hilo_role_install_hooks(void);
/* Locks a role that a catalog row is about to name, and checks that it
 * still exists (as PostgreSQL's shdepLockAndCheckObject). */
extern void hilo_lock_role(Oid role);
/* The database a utility command needs free of its allocator, if the
 * command passes PostgreSQL's own checks; InvalidOid otherwise. */
extern Oid hilo_database_needing_no_allocator(struct Node *parsetree, bool is_top_level);

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
/* The 2200H error of a take that got `got` of `wanted` IDs. */
extern void hilo_raise_short(const char *seq_name, uint64 got, uint64 wanted, int64 max_value)
    pg_attribute_noreturn();
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
} HiloWindowSource;

/* Installs the window source (from _PG_init; NULL: every node claims locally). */
extern void hilo_set_window_source(const HiloWindowSource *source);
/* The installed source's answer; false without a source. */
extern bool hilo_window_source_active(void);
/* The installed source's at_allocator_start, if any. */
extern void hilo_window_source_allocator_start(void);

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
/* hilo_nextval of a sequence created here; false if `name` is not one. */
extern bool hilo_local_nextval(const char *name, int len, int64 *id);

/* ---- sql/catalog_epochs.cpp: when cached catalog reads may be stale ---- */

/* Registers the invalidation callbacks (once) and notes the catalog's
 * relations; call before reading the epochs that guard a lookup. */
extern void hilo_epochs_watch_catalog(void);
/* Grows when hilo.sequences may have changed (or the catalog went). */
extern uint64 hilo_catalog_epoch(void);
/* Grows when a usage decision may have changed: grants, owners, roles. */
extern uint64 hilo_usage_epoch(void);

/* ---- sql/take_cache.cpp: the sequences this backend's takes used ---- */

typedef struct HiloTakeTarget {
    HiloSequence seq;
    int pool_index; /* -1 until a take attached a pool */
    uint64 generation;
} HiloTakeTarget;

/* The cached sequence `name`, if nothing may have changed it or the
 * current user's right to use it since it was looked up; else NULL. */
extern HiloTakeTarget *hilo_take_cache_find(const char *name);
/* Looks `name` up in the caller's snapshot into *seq, checks usage (42501)
 * and caches it; NULL for a sequence created in this transaction. */
extern HiloTakeTarget *hilo_take_cache_load(const char *name, HiloSequence *seq);

/* ---- ranges.cpp: int8multirange and arrays of bounds ---- */

extern Datum hilo_ranges_to_multirange(const HiloRange *ranges, uint32 nranges);
/* Reads a multirange into a palloc'd array; refuses unbounded ranges (22023). */
extern HiloRange *hilo_multirange_to_ranges(Datum multirange, const char *seq_name,
                                            uint32 *nranges);
extern char *hilo_format_range(HiloRange r);

#include "guard.h"

#endif /* HILO_PG_HILO_H */
