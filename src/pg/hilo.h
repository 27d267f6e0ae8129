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

/* What differs between PostgreSQL majors (the only version tests). */
#include "compat.h"

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
 * commit, moves thousands of free ranges into it; it gives the
 * store back once it holds few ranges again. HILO_POOL_MAX_RANGES is the
 * most ranges any pool can hold.
 *
 * A session that empties its pool waits for the refill, a round trip to
 * the allocator. 100,000 hilo_nextval over as many single-ID ranges took
 * 13 refills with stores of 8,192, against 3 over one range of the same
 * IDs (a refill's target grows 32,000, 64,000, 128,000), and with 32,768
 * take 4. The stores, ranges and ranges in flight, are 8 MB of shared
 * memory.
 */
#define HILO_POOL_STORES 8
#define HILO_STORE_RANGES 32768
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
/* The runway warning's thresholds (alloc/runway.cpp): a share of the
 * sequence's range, a time at its current rate; 0 turns either off. */
extern double hilo_runway_warning_fraction;
extern int hilo_runway_warning_time_s;
/* Defines them (from _PG_init). */
extern void hilo_define_gucs(void);

/* ---- A sequence as a caller sees it (catalog.cpp) ---- */

/* hilo_create's ordering => (docs/multi-node.md, "Orderings"). */
typedef enum HiloOrdering {
    HILO_ORDERING_NONE = 0,
    HILO_ORDERING_NODE,    /* monotonic: one shared counter on this node */
    HILO_ORDERING_CLUSTER, /* a leased serving node (order/lease/) */
    HILO_ORDERING_QUORUM,  /* a majority claim per batch of calls (order/quorum/quorum_order.cpp) */
} HiloOrdering;

typedef struct HiloSequence {
    int32 seq_id;
    uint64 creation; /* of the catalog it was read from (hilo_catalog_creation) */
    char name[HILO_MAX_NAME_BYTES + 1];
    int64 start_value;
    int64 max_value;
    int64 window_size;
    int32 min_open_windows;
    int32 block_size;
    Oid owner;
    int64 high_water_mark;
    uint8 ordering;    /* HiloOrdering; HILO_ORDERING_NODE: monotonic */
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
 * take the first rows" then reads the whole free list on every call.
 * The allocator runs with the same setting for its whole life.
 */
extern void hilo_catalog_prefer_indexes(void);

/* Validates a sequence name argument (22023) and copies it out. */
extern void hilo_check_name(text *name_text, char *name_out);
extern void hilo_check_name_length(int len);
/* A hash table in `context` keyed by sequence name: each entry of
 * `entrysize` bytes starts with the name (HILO_MAX_NAME_BYTES + 1). */
extern struct HTAB *hilo_name_table(const char *label, long size, Size entrysize,
                                    MemoryContext context);
/* True once the catalog is at 0.2.0 (has hilo.sequences.monotonic). */
extern bool hilo_catalog_has_monotonic(void);
/* True once hilo.sequences has the columns ordering and node_bits (0.5.0). */
extern bool hilo_catalog_has_ordering_columns(void);
/* hilo.sequences has a column of this name (catalogs of older versions lack some). */
extern bool hilo_catalog_has_column(const char *name);
/* True if schema hilo has a relation of that name (0.1.0 lacks some). */
extern bool hilo_catalog_has_table(const char *name);
/*
 * The catalog's creation: hilo.incarnation's value (random, made by each
 * CREATE EXTENSION, never dumped), or before 0.5.0 the OID of
 * hilo.sequences. (A node's incarnation, a cluster's word, is another
 * thing: cluster/node/node.h.) Shared memory is keyed by it, so that nothing outlives
 * the catalog it came from (docs/design.md, "Catalog creations").
 * Needs hilo_catalog_begin() or SPI connected. Returns false if the catalog
 * is missing; raises 40001 if the caller's snapshot cannot see its row (the
 * catalog was re-created after the snapshot was taken).
 */
extern bool hilo_catalog_creation(uint64 *creation);
/* The same, in its own catalog access (0 if the catalog is missing). */
extern uint64 hilo_catalog_creation_now(void);
/* The relation hilo.sequences; raises 55000 if the catalog is missing. */
extern Oid hilo_catalog_relid(void);
/* The creation of a catalog from before 0.5.0 (no hilo.incarnation). */
extern uint64 hilo_catalog_creation_before_0_5(Oid relid);
/* 40001: the catalog was created again after the caller's snapshot. */
extern void hilo_raise_catalog_recreated(void) pg_attribute_noreturn();
/* A value of the last SPI result. */
extern Datum hilo_spi_value(uint64 row, int column, bool *isnull);
/* The relation hilo.sequences, or InvalidOid if the catalog is missing. */
extern Oid hilo_catalog_relid_if_present(void);
/*
 * A number that changes whenever this backend's caches of relation, column
 * or schema names are invalidated (syscache callbacks, registered at the
 * first call): OIDs and column numbers looked up by name may be kept while
 * it stays the same, as the syscache would have answered the same. Needs
 * a transaction at the first call.
 */
extern uint64 hilo_catalog_names_epoch(void);
/*
 * Takes AccessShareLock on hilo.sequences, the first of hilo's tables that
 * DROP EXTENSION locks (it locks them in the order they were made), before
 * any other: a drop then waits for the caller, or the caller for the drop,
 * and they never deadlock (hilo.cluster read before hilo.local_node did).
 * hilo_catalog_begin() and hilo_catalog_creation() take it; workers that
 * use SPI directly call this first. False if the catalog is missing.
 */
extern bool hilo_catalog_lock_first(void);

/* The search_path every statement hilo runs through SPI sees (catalog.cpp). */
#define HILO_PINNED_SEARCH_PATH "pg_catalog, pg_temp"

/* Runs a cached, parameterized catalog statement through SPI, search_path
 * pinned (for that statement if the caller has not pinned it). */
extern int hilo_spi_exec(const char *sql, int nargs, const Oid *argtypes, Datum *values,
                         const char *nulls, bool read_only, long max_rows);
/* The same for a statement with one parameter, or two; none NULL. */
extern int hilo_spi_exec1(const char *sql, Oid argtype, Datum value, bool read_only, long max_rows);
extern int hilo_spi_exec2(const char *sql, Oid type1, Datum value1, Oid type2, Datum value2,
                          bool read_only, long max_rows);
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

/* ---- shmem.cpp: hilo's one shared-memory segment ---- */

extern void hilo_shmem_install_hooks(void);

/*
 * A part of hilo's one shared-memory segment, owned by a subsystem (the
 * allocator's state, alloc/shared.cpp; the agent's table,
 * cluster/agent/agent_status.cpp; ...). Added from _PG_init; shmem.cpp requests
 * its space and `lwlocks` LWLocks (a tranche named `name`), and at startup
 * sets `*address` to the part; the process that creates the segment finds
 * the part zeroed and calls `init` (if any) to set it up. Then every
 * process calls `attach` (if any), for what the part keeps outside its own
 * space: a shared hash table of extra_size() bytes, a tranche's name.
 */
typedef struct HiloShmemPart {
    const char *name;
    Size size;             /* bytes; 0: size_of() tells them (set by settings) */
    Size (*size_of)(void); /* only with size 0 */
    int lwlocks;
    void **address;
    void (*init)(void);
    void (*attach)(void);
    Size (*extra_size)(void);
} HiloShmemPart;

extern void hilo_shmem_add_part(const HiloShmemPart *part);
/* Sets the latch of the process with this pgprocno; nothing if it is < 0. */
extern void hilo_wake_process(int procno);
/* Waits `ms` milliseconds on this process's latch, serving interrupts. */
extern void hilo_sleep_ms(long ms);

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
