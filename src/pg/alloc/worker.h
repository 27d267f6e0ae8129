/*
 * alloc/worker.h: what the allocator's files share, and no one else:
 *   worker.cpp          the background worker: start, main loop, idle exit,
 *                       the maintenance round;
 *   worker_batch.cpp    a batch: collecting jobs from the request slots,
 *                       running them in one transaction, publishing;
 *   worker_jobs.cpp     one job: a take, a pool refill, takes of one
 *                       sequence sharing one reservation;
 *   worker_returns.cpp  IDs going back to the free list: abandoned results,
 *                       a clean shutdown's write-back, idle pools;
 *   worker_txn.cpp      the worker's state, its transactions and commit,
 *                       the catalog creation.
 * Calls run down that list, never up (worker_jobs.cpp and worker_returns.cpp
 * call only worker_txn.cpp).
 */
#ifndef HILO_PG_ALLOC_WORKER_H
#define HILO_PG_ALLOC_WORKER_H

#include "internal.h"

extern "C" {
#include "nodes/pg_list.h"
#include "utils/timestamp.h"
}

/* Results kept until their caller has copied every chunk. */
typedef struct RetainedResult {
    uint64 request_id;
    uint64 creation;
    int32 seq_id;
    HiloRange *ranges; /* in hilo_worker.context */
    uint32 count;
    uint32 published; /* ranges handed to the slot so far */
    uint32 consumed;  /* ranges the caller has certainly copied */
    uint64 flush_lsn; /* the caller flushes the WAL to here first (0: none) */
} RetainedResult;

/* The allocator's synchronous_commit, for its whole life (worker.cpp);
 * batches and merges set it off for their own commit only. */
#define ALLOCATOR_SYNCHRONOUS_COMMIT "on"

/*
 * Reserved IDs whose caller gave up, waiting to go back on the free list.
 * The list outlives transactions, so the list itself and every entry live
 * in hilo_worker.context, never in a transaction's or SPI's memory. An
 * entry is removed only once the transaction that put its IDs back has
 * committed: a rollback leaves it for the next try.
 */
typedef struct PendingReturn {
    uint64 creation; /* of the catalog they were reserved in */
    int32 seq_id;
    HiloRange *ranges;
    uint32 count;
    bool done; /* put back (or given up) by the current transaction */
} PendingReturn;

typedef enum JobKind {
    JOB_TAKE, /* a caller's take: reply with the IDs */
    JOB_POOL, /* a pool refill: publish into the pool, reply "done" if asked */
} JobKind;

/* One job of the current batch. */
typedef struct BatchJob {
    JobKind kind;
    int slot; /* request slot to answer, or -1 for the allocator's own refills */
    uint64 request_id;
    int32 seq_id;
    uint64 creation; /* JOB_TAKE: of the caller's catalog; JOB_POOL: in pool */
    char seq_name[HILO_MAX_NAME_BYTES + 1];
    int leader;           /* a job for the same pool earlier in the batch, or -1 */
    bool served_together; /* JOB_TAKE: served by hilo_worker_run_takes_together */
    bool share_tried;     /* JOB_TAKE: was in a shared reservation, served or not */

    /* JOB_TAKE */
    int64 n;
    bool partial;
    HiloRange *borrowed; /* taken from the pool before reserving the rest */
    uint32 nborrowed;
    uint64 borrowed_ids; /* counted as issued by the pool already */
    int borrow_pool;
    uint64 borrow_generation;

    /* JOB_POOL */
    HiloPoolJob pool;

    /* Outcome. */
    bool abandoned;    /* the caller left before the reply */
    bool stale;        /* the pool was released or reused meanwhile: nothing to do */
    HiloRange *ranges; /* in hilo_worker.context */
    uint32 count;
    uint64 ids;
    bool exhausted;
    bool free_list_drained;
    bool inflight; /* registered with its pool before commit */
    int sqlerrcode;
    char *message;
    char *detail;
    char *hint;
} BatchJob;

/* Pools the current release pass took out of shared memory. */
typedef struct ReleasePass {
    TimestampTz idle_before;
    bool all;
    int *indexes; /* hilo_worker.context, num_pools entries each */
    uint64 *generations;
    int32 *seq_ids;
    int ncandidates;
    int *released;
    int nreleased;
    int skipped; /* a pusher held the sequence: next time */
    bool wrote;
} ReleasePass;

/* The state of this process's allocator (worker_txn.cpp defines it). */
typedef struct AllocatorWorker {
    /* This worker's entry in hilo_shared->workers. */
    int entry_index;
    uint64 serial; /* of that entry, when this worker was started for it */
    /* When a caller's request was last answered (or the worker started). */
    TimestampTz last_request_at;
    MemoryContext context;    /* lives as long as the worker */
    RetainedResult *retained; /* one per request slot */
    List *pending_returns;    /* of PendingReturn, in context */

    /*
     * The current batch, and scratch space sized for every slot and pool,
     * allocated once, so that nothing is allocated (and nothing can raise
     * an error) while the shared lock is held.
     */
    BatchJob *batch;
    int batch_len;
    int batch_capacity;
    int *slots_to_wake;
    int *slots_abandoned;
    HiloPoolJob *pool_jobs;

    /*
     * The catalog creation read at the start of the current transaction
     * (which then holds a lock on the catalog until it ends, so that no
     * DROP EXTENSION can commit in between). Every reservation is made
     * for, and published into, a pool of this creation only; work left
     * from another is dropped (a gap). With no catalog at all the
     * allocator exits.
     */
    uint64 current_creation;
    bool catalog_missing;
    /* Whether windows come from a cluster, read once per batch (the
     * cluster's configuration, read for each take of a batch, cost each
     * take as much as a statement): only which takes share a reservation
     * rests on it; every claim reads the configuration again. */
    bool batch_in_cluster;

    ReleasePass release_pass;
} AllocatorWorker;

extern AllocatorWorker hilo_worker;

/* worker_txn.cpp */
/* Reads the catalog's current creation; inside a transaction with SPI
 * connected. Pools of other creations of this database are freed. */
extern bool hilo_worker_read_creation(void);
/* SIGTERM: finish the batch and exit; ends a wait for standbys at commit. */
extern void hilo_worker_sigterm(SIGNAL_ARGS);
/* Asks the next maintenance round to merge free ranges again. */
extern void hilo_worker_merge_again(bool all);
/* Runs `body` in a transaction of its own; on error, logs it and rolls back. */
extern bool hilo_worker_run_in_transaction(void (*body)(void *), void *arg, const char *what);

/* runway.cpp: logs sequences whose IDs left crossed the runway thresholds
 * (hilo.runway_warning_fraction, hilo.runway_warning_time); in a
 * transaction with SPI connected. */
extern void hilo_runway_check(void);

/* worker_jobs.cpp */
/* Makes `job` fail: its outcome becomes this error, the message formatted
 * with the sequence's name (one %s), in hilo_worker.context. */
extern void hilo_worker_fail_job(BatchJob *job, int sqlerrcode, const char *message_format,
                                 const char *detail, const char *hint);
/* Runs one job in a subtransaction; an error becomes its outcome. */
extern void hilo_worker_run_job(BatchJob *job);
extern bool hilo_worker_may_share(const BatchJob *job);
/* Serves the takes of batch[first]'s sequence with one reservation, if it can. */
extern void hilo_worker_run_takes_together(int first);

/* worker_returns.cpp */
extern void hilo_worker_queue_return(uint64 creation, int32 seq_id, const HiloRange *ranges,
                                     uint32 count);
/* After the transaction that ran hilo_worker_return_abandoned. */
extern void hilo_worker_settle_returns(bool committed);
/* Gives back IDs whose callers abandoned them; inside a transaction. */
extern void hilo_worker_return_abandoned(void);
/* Clean shutdown: the pools go back to the free list. */
extern void hilo_worker_write_back_pools(void);
/* Gives idle pools back; false if some could not be released now. */
extern bool hilo_worker_release_idle_pools(TimestampTz idle_before, bool all);

/* worker_batch.cpp */
/* Serves jobs until none are waiting (or none makes progress). */
extern void hilo_worker_serve_requests(void);

#endif /* HILO_PG_ALLOC_WORKER_H */
