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

/* PostgreSQL 15 headers declare C functions without extern "C" guards. */
extern "C" {
#include "postgres.h"

#include "fmgr.h"
#include "storage/lwlock.h"
#include "utils/snapshot.h"
}

#include "../core/c_api.h"

/* Longest sequence name, in bytes (DESIGN.md section 1). */
#define HILO_MAX_NAME_BYTES 255

/* Ranges a reply carries at once; longer results come in several chunks. */
#define HILO_REPLY_RANGES 256

/* Room for an error message crossing from the allocator to a caller. */
#define HILO_MESSAGE_BYTES 512

/* ---- module.cpp: GUCs and preload state ---- */

extern bool hilo_preloaded;
extern int hilo_naptime_ms;
extern int hilo_max_databases;

/* Raises 55000 unless hilo was loaded by shared_preload_libraries. */
extern void hilo_require_preload(const char *function_name);
/* Raises 22004 if any of the first `nargs` arguments is NULL. */
extern void hilo_require_args(FunctionCallInfo fcinfo, const char *function_name,
                              const char *const *arg_names, int nargs);
/* Raises 25006 in a read-only transaction or during recovery. */
extern void hilo_require_writable(const char *function_name);

/* ---- A sequence as a caller sees it (catalog.cpp) ---- */

typedef struct HiloSequence {
    int32 seq_id;
    char name[HILO_MAX_NAME_BYTES + 1];
    int64 start_value;
    int64 max_value;
    int64 window_size;
    int32 min_open_windows;
    int32 block_size;
    Oid owner;
    int64 high_water_mark;
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

/* Validates a sequence name argument (22004 / 22023) and copies it out. */
extern void hilo_check_name(text *name_text, char *name_out);

/*
 * Looks up a sequence by name in the caller's snapshot; raises 42704 if it
 * does not exist. Needs hilo_catalog_begin(). If `for_allocation`, refuses
 * (55000) a sequence created by the caller's own uncommitted transaction,
 * which the allocator cannot see yet.
 */
extern void hilo_lookup_sequence(const char *name, bool for_allocation, HiloSequence *seq);

/* Raises 42501 unless the current user owns `seq` or is a superuser. */
extern void hilo_check_owner(const HiloSequence *seq, Oid user, const char *action);

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
} HiloWorkerState;

/* One allocator worker per database. */
typedef struct HiloWorkerEntry {
    Oid dboid;
    HiloWorkerState state;
    pid_t pid;
    int procno;               /* the worker's pgprocno, to set its latch */
    uint64 incarnation;       /* changes every time the entry is (re)claimed */
    bool stop_requested;      /* set when a database-level command needs it gone */
    bool free_ranges_changed; /* a push committed since the last merge */
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
    int32 seq_id;
    char seq_name[HILO_MAX_NAME_BYTES + 1]; /* for error messages */
    int64 n;
    bool partial;

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

typedef struct HiloShared {
    LWLock *lock; /* protects worker entries and request states */
    int max_databases;
    int num_requests;
    uint64 last_incarnation;  /* source of HiloWorkerEntry.incarnation */
    HiloWorkerEntry *workers; /* max_databases entries */
    HiloRequest *requests;    /* num_requests entries */
} HiloShared;

extern HiloShared *hilo_shared;

extern void hilo_shmem_install_hooks(void);
extern HiloRequest *hilo_my_request(void);

/* ---- allocator_client.cpp: the caller's side of a reservation ---- */

/* Reserves n IDs (or as many as remain, if partial); returns palloc'd ranges. */
extern HiloRange *hilo_allocator_take(const HiloSequence *seq, int64 n, bool partial,
                                      uint32 *nranges);
/* Wakes this database's allocator, if it runs (no-op otherwise). */
extern void hilo_allocator_wake(void);
/* Wakes the allocator when the current transaction commits; with
 * `free_ranges_changed`, also asks it to merge adjacent free ranges. */
extern void hilo_allocator_wake_at_commit(bool free_ranges_changed);
/* Asks the allocator of `dboid`, if any, to exit, and waits until it has. */
extern void hilo_allocator_stop_for_database(Oid dboid);
/* Installs the utility hook that does that before database-level commands. */
extern void hilo_allocator_install_hooks(void);

/* ---- allocator_worker.cpp ---- */

extern "C" PGDLLEXPORT void hilo_allocator_main(Datum main_arg);

/* ---- allocator_take.cpp: reservations, inside the worker's transaction ---- */

/*
 * Reserves IDs for one take in the current (sub)transaction. Raises the
 * caller-facing error on failure. Returns palloc'd, merged ranges.
 */
extern HiloRange *hilo_reserve(int32 seq_id, const char *seq_name, int64 n, bool partial,
                               uint32 *nranges);
/* Puts reserved but undelivered IDs back on the free list. */
extern void hilo_unreserve(int32 seq_id, const HiloRange *ranges, uint32 nranges);
/* Tops up every sequence's open windows; merges adjacent free ranges if asked. */
extern void hilo_maintain_all_sequences(bool merge_free_ranges);

/* ---- ranges.cpp: int8multirange and arrays of bounds ---- */

extern Datum hilo_ranges_to_multirange(const HiloRange *ranges, uint32 nranges);
/* Reads a multirange into a palloc'd array; refuses unbounded ranges (22023). */
extern HiloRange *hilo_multirange_to_ranges(Datum multirange, const char *seq_name,
                                            uint32 *nranges);
extern char *hilo_format_range(HiloRange r);

/* ---- guard: the C++/PostgreSQL crossing for SQL-callable functions ---- */

/*
 * Declares an SQL-callable function whose body is `name##_body`. The body is
 * PostgreSQL-regime code; should any C++ exception reach this frame, it is
 * caught, its message copied, and the PostgreSQL error raised only after
 * the catch block has ended.
 */
extern void hilo_raise_cpp_exception(const char *function_name, const char *what)
    pg_attribute_noreturn();

#define HILO_SQL_FUNCTION(name)                               \
    static Datum name##_body(PG_FUNCTION_ARGS);               \
    extern "C" {                                              \
    PG_FUNCTION_INFO_V1(name);                                \
    Datum name(PG_FUNCTION_ARGS)                              \
    {                                                         \
        char what[HILO_MESSAGE_BYTES];                        \
        try {                                                 \
            return name##_body(fcinfo);                       \
        } catch (const std::exception &e) {                   \
            strlcpy(what, e.what(), sizeof(what));            \
        } catch (...) {                                       \
            strlcpy(what, "unknown exception", sizeof(what)); \
        }                                                     \
        hilo_raise_cpp_exception(#name, what);                \
    }                                                         \
    }                                                         \
    static Datum name##_body(PG_FUNCTION_ARGS)

#endif /* HILO_PG_HILO_H */
