/*
 * hilo.h: declarations shared by the PostgreSQL side of hilo (src/pg/): its
 * limits, GUCs, catalog access, shared memory, ranges, and the preamble and
 * guards of every entry point. Each folder has its own header on top of it:
 * alloc/alloc.h, commands/commands.h, cluster/cluster.h.
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

/* ---- gucs.cpp: GUCs and preload state ---- */

extern bool hilo_preloaded;
extern int hilo_naptime_ms;
extern int hilo_max_databases;
extern int hilo_max_sequences;
extern int hilo_session_buffers;
extern int hilo_pool_low_water;
extern int hilo_pool_idle_timeout_ms;
/* Test hook: hilo_uuid reads the clock shifted by this many ms (superuser). */
extern int hilo_uuid_clock_shift_ms;
/* Test hook: hilo_nextval and hilo_take pause this many ms between finding
 * or claiming their pool slot and using it (superuser; alloc/pool.cpp). */
extern int hilo_pool_attach_delay_ms;
/* Test hook: an allocator pauses this many ms between reading the free
 * ranges a take uses up and deleting them (postgresql.conf; alloc/reserve.cpp). */
extern int hilo_free_list_take_delay_ms;
extern int hilo_allocator_idle_timeout_ms;
/* Defines them (from _PG_init). */
extern void hilo_define_gucs(void);

/* Entries of the allocator table (shmem.cpp): one per allocator that can
 * run at once. Each allocator takes a background worker slot, so
 * max_worker_processes bounds them; hilo.max_databases, if set, bounds them
 * further. */
extern int hilo_worker_table_size(void);

#include "entry.h"

/* ---- A sequence as a caller sees it (catalog.cpp) ---- */

/* hilo_create's ordering => (docs/multi-node.md, "Orderings"). */
typedef enum HiloOrdering {
    HILO_ORDERING_NONE = 0,
    HILO_ORDERING_NODE,    /* monotonic: one shared counter on this node */
    HILO_ORDERING_CLUSTER, /* a leased serving node (cluster/lease_*.cpp) */
    HILO_ORDERING_QUORUM,  /* a majority claim per batch of calls (cluster/quorum_order.cpp) */
} HiloOrdering;

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
    uint8 ordering;    /* HiloOrdering */
    int32 node_bits;   /* > 0: this node hands out only its slice (alloc/window_source.cpp) */
    bool created_here; /* by hilo_create in the caller's own open transaction */
} HiloSequence;

/* hilo.sequences.ordering as text (NULL: a catalog without the column). */
extern uint8 hilo_parse_ordering(const char *text, bool monotonic);
/* hilo.sequences.node_bits as text (NULL: a catalog without the column: 0). */
extern int32 hilo_parse_node_bits(const char *text);

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
/* hilo.sequences has a column of this name (catalogs of older versions lack some). */
extern bool hilo_catalog_has_column(const char *name);
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
/* The same, in its own catalog access (0 if the catalog is missing). */
extern uint64 hilo_catalog_incarnation_now(void);
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
 * Takes AccessShareLock on hilo.sequences, the first of hilo's tables that
 * DROP EXTENSION locks (it locks them in the order they were made), before
 * any other: a drop then waits for the caller, or the caller for the drop,
 * and they never deadlock (hilo.cluster read before hilo.local_node did).
 * hilo_catalog_begin() and hilo_catalog_incarnation() take it; workers that
 * use SPI directly call this first. False if the catalog is missing.
 */
extern bool hilo_catalog_lock_first(void);

/* The search_path every statement hilo runs through SPI sees (catalog.cpp). */
#define HILO_PINNED_SEARCH_PATH "pg_catalog, pg_temp"

/* Runs a cached, parameterized catalog statement through SPI, search_path
 * pinned (for that statement if the caller has not pinned it). */
extern int hilo_spi_exec(const char *sql, int nargs, const Oid *argtypes, Datum *values,
                         const char *nulls, bool read_only, long max_rows);
/* The same for a statement with one parameter. */
extern int hilo_spi_exec1(const char *sql, Oid argtype, Datum value, bool read_only, long max_rows);
/* The same with a given snapshot: to see the latest committed state, or
 * (not read_only: a change, which also sees this transaction's own) to
 * change only what an earlier statement saw. */
extern int hilo_spi_exec_snapshot(const char *sql, int nargs, const Oid *argtypes, Datum *values,
                                  const char *nulls, Snapshot snapshot, bool read_only,
                                  long max_rows);

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
#define HILO_MERGE_SPANS 64
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
    uint64 last_incarnation;           /* source of HiloWorkerEntry.incarnation */
    pg_atomic_uint64 last_generation;  /* source of HiloPool.generation */
    pg_atomic_uint64 free_list_epoch;  /* grows when a push commits (alloc/free_list_scan.cpp) */
    pg_atomic_uint64 pool_assignments; /* grows when a slot is given to a sequence */
    HiloWorkerEntry *workers;          /* max_databases entries */
    HiloRequest *requests;             /* num_requests entries */
    HiloBackendSlot *slots;            /* num_requests entries, by pgprocno */
    HiloPool *pools;                   /* num_pools entries */
    /* Slots that became free, most recent last (under pools_lock held
     * exclusively): a hint that spares a claim the scan of every pool, which
     * in a new backend touches all of their shared memory (tens of ms with
     * the default hilo.max_sequences). A popped slot is used only if it is
     * still free; the full scan remains for when the stack is empty. */
    int *free_slots; /* num_pools entries */
    int nfree_slots;
    /* Per slot: set (under the pool's lock) when the pool asks its
     * allocator for a refill or a move of pushed IDs, cleared by the
     * allocator's scan; a byte array, so that the scan before every batch
     * reads 12 KB rather than a cache line of each 2.9 KB pool. */
    volatile uint8 *pool_wants; /* num_pools entries */
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

/* Buffers of slot s that scans of every buffer read. */
static inline int hilo_slot_nused(int s)
{
    int n = *(volatile int *)&hilo_shared->slots[s].nused;
    return Min(n, hilo_shared->buffers_per_backend);
}

/* The entry of `dboid` in the allocator table, or NULL; hilo_shared->lock held. */
extern HiloWorkerEntry *hilo_find_worker_locked(Oid dboid);

extern void hilo_shmem_install_hooks(void);

/*
 * A part of hilo's one shared-memory segment that another subsystem owns
 * (the agent's table, cluster/agent_status.cpp). Added from _PG_init;
 * shmem.cpp requests its space and `lwlocks` LWLocks (a tranche named
 * `name`) with its own, and at startup sets `*address` to the part; the
 * process that creates the segment finds the part zeroed and calls `init`
 * (if any) to set it up.
 */
typedef struct HiloShmemPart {
    const char *name;
    Size size;             /* bytes; 0: size_of() tells them (set by settings) */
    Size (*size_of)(void); /* only with size 0 */
    int lwlocks;
    void **address;
    void (*init)(void);
} HiloShmemPart;

extern void hilo_shmem_add_part(const HiloShmemPart *part);
/* Sets the latch of the process with this pgprocno; nothing if it is < 0. */
extern void hilo_wake_process(int procno);
/* Waits `ms` milliseconds on this process's latch, serving interrupts. */
extern void hilo_sleep_ms(long ms);
extern HiloRequest *hilo_my_request(void);

/* ---- bgworker.cpp ---- */

struct BackgroundWorker;
/* Fills `worker` (zeroed first) for a worker of this library that connects
 * to a database once recovery has finished: entry point `function_name`,
 * bgw_type `type`, bgw_name "<type> for database <database>". */
extern void hilo_worker_init(struct BackgroundWorker *worker, const char *function_name,
                             const char *type, const char *database, int restart_time);
/* The session settings every hilo worker runs with, whatever the server's
 * configuration says (search_path, statement_timeout, read-write, read
 * committed, no JIT); call once connected. */
extern void hilo_worker_session_options(void);
/* Between a worker's transactions: what they did, to the cumulative
 * statistics (autovacuum goes by them). */
extern long hilo_worker_report_stats(bool idle);

/* ---- subtransaction.cpp ---- */

/* Runs `body` in an internal subtransaction of the current transaction. On
 * an error it calls `on_error` (if any) in the caller's memory context while
 * the error is still current (it may CopyErrorData), forgets the error,
 * rolls the subtransaction back and returns false; the caller's memory
 * context and resource owner are restored either way. */
extern bool hilo_run_in_subtransaction(void (*body)(void *), void *arg, void (*on_error)(void *));

/* ---- ranges.cpp: int8multirange and arrays of bounds ---- */

extern Datum hilo_ranges_to_multirange(const HiloRange *ranges, uint32 nranges);
/* Reads a multirange into a palloc'd array; refuses unbounded ranges (22023). */
extern HiloRange *hilo_multirange_to_ranges(Datum multirange, const char *seq_name,
                                            uint32 *nranges);
extern char *hilo_format_range(HiloRange r);

#include "guard.h"

#endif /* HILO_PG_HILO_H */
