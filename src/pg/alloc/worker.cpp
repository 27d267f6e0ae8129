/*
 * alloc/worker.cpp: the allocator, one background worker per database.
 *
 * It does three kinds of work, in batches:
 *   - takes that backends leave in their shared-memory slots;
 *   - pool refills that backends ask for and wait on (their pool ran dry);
 *   - pool refills of its own, for every pool below its low-water mark, so
 *     that backends almost never wait (Leaf's double buffer).
 * All jobs waiting at one wake-up run in one transaction, each in its own
 * subtransaction, so that one failure (exhaustion, a dropped sequence)
 * fails only its own job. The transaction commits with synchronous_commit
 * = on: the WAL is flushed before any reply is published or any pool
 * refilled, so a crash after a caller saw IDs can never hand them out
 * again. One commit serves the whole batch.
 *
 * Between batches, every hilo.naptime, it tops up each sequence's open
 * windows and merges adjacent free ranges. On a clean shutdown it writes
 * what the pools (and the buffers of exiting backends) still hold back to
 * the free list, so a restart wastes nothing.
 *
 * Over 500 lines, for a reason: every step of a batch (collecting jobs,
 * running them, publishing, giving back what abandoned callers left) and
 * of the idle rounds (write-back, releasing idle pools, exiting when idle)
 * works on this worker's own state (the batch, the retained results, the
 * pending returns, the release pass), kept here as file statics. A split
 * would first gather that state into one structure that the parts pass
 * around; until then it stays one file.
 */
#include "alloc.h"

extern "C" {
#include "access/xact.h"
#include "access/xlog.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "replication/syncrep.h"
#include "replication/walsender.h"
#include "replication/walsender_private.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
}

/* Pools one release transaction gives back at most (each holds a lock). */
#define HILO_RELEASE_PER_TRANSACTION 1000

/* How long a clean shutdown waits for backends to give back their buffers. */
#define HILO_SHUTDOWN_WAIT_MS 5000

/* This worker's entry in hilo_shared->workers. */
static int my_entry_index = -1;
static uint64 my_incarnation = 0;
/* When a caller's request was last answered (or the worker started). */
static TimestampTz last_request_at = 0;

/* Results kept until their caller has copied every chunk. */
typedef struct RetainedResult {
    uint64 request_id;
    uint64 incarnation;
    int32 seq_id;
    HiloRange *ranges; /* in worker_context */
    uint32 count;
    uint32 published; /* ranges handed to the slot so far */
    uint32 consumed;  /* ranges the caller has certainly copied */
} RetainedResult;

static RetainedResult *retained = NULL; /* one per request slot */
static MemoryContext worker_context = NULL;

/*
 * Reserved IDs whose caller gave up, waiting to go back on the free list.
 * The list outlives transactions, so the list itself and every entry live
 * in worker_context, never in a transaction's or SPI's memory. An entry is
 * removed only once the transaction that put its IDs back has committed:
 * a rollback leaves it for the next try.
 */
typedef struct PendingReturn {
    uint64 incarnation; /* of the catalog they were reserved in */
    int32 seq_id;
    HiloRange *ranges;
    uint32 count;
    bool done; /* put back (or given up) by the current transaction */
} PendingReturn;
static List *pending_returns = NIL;

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
    uint64 incarnation; /* JOB_TAKE: of the caller's catalog; JOB_POOL: in pool */
    char seq_name[HILO_MAX_NAME_BYTES + 1];
    int leader;           /* a job for the same pool earlier in the batch, or -1 */
    bool served_together; /* JOB_TAKE: served by run_takes_together */
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
    HiloRange *ranges; /* in worker_context */
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

/*
 * Scratch space sized for every slot and pool, allocated once, so that
 * nothing is allocated (and nothing can raise an error) while the shared
 * lock is held.
 */
/* Takes that share one reservation at most (run_takes_together). */
#define HILO_MAX_BATCH_SHARE 64
static BatchJob *batch = NULL;
static int batch_len = 0;
static int batch_capacity = 0;
static int *slots_to_wake = NULL;
static int *slots_abandoned = NULL;
static HiloPoolJob *pool_jobs = NULL;

/*
 * The catalog incarnation read at the start of the current transaction
 * (which then holds a lock on the catalog until it ends, so that no DROP
 * EXTENSION can commit in between). Every reservation is made for, and
 * published into, a pool of this incarnation only; work left from another
 * is dropped (a gap). With no catalog at all the allocator exits.
 */
static uint64 current_incarnation = 0;
static bool catalog_missing = false;

/* Reads the current incarnation; inside a transaction with SPI connected.
 * Pools of other incarnations of this database are freed. */
static bool read_current_incarnation(void)
{
    uint64 before = current_incarnation;
    if (!hilo_catalog_incarnation(&current_incarnation)) {
        catalog_missing = true;
        return false;
    }
    if (current_incarnation != before)
        hilo_free_scan_reset(); /* seq_ids of another catalog */
    hilo_pool_forget_other_incarnations(MyDatabaseId, current_incarnation);
    return true;
}

/* Pools the current release pass took out of shared memory. */
typedef struct ReleasePass {
    TimestampTz idle_before;
    bool all;
    int *indexes; /* worker_context, num_pools entries each */
    uint64 *generations;
    int32 *seq_ids;
    int ncandidates;
    int *released;
    int nreleased;
    int skipped; /* a pusher held the sequence: next time */
    bool wrote;
} ReleasePass;

static ReleasePass release_pass;

static void worker_exit_callback(int code, Datum arg)
{
    if (hilo_shared == NULL || my_entry_index < 0)
        return;
    LWLockReleaseAll(); /* an error may have struck while we held it */
    /* A FATAL error in the middle of a release: its IDs are a gap, but
     * the slots must not stay "releasing" forever. */
    for (int i = 0; i < release_pass.nreleased; i++)
        hilo_pool_release_finish(release_pass.released[i]);
    release_pass.nreleased = 0;
    LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
    HiloWorkerEntry *e = &hilo_shared->workers[my_entry_index];
    if (e->incarnation == my_incarnation) {
        e->state = HILO_WORKER_NONE;
        /* Nobody else will clear the slots abandoned on us; what we held
         * for them goes with us (skipped, never handed out twice). */
        for (int slot = 0; slot < hilo_shared->num_requests; slot++) {
            HiloRequest *req = &hilo_shared->requests[slot];
            if (req->dboid == MyDatabaseId && req->worker_incarnation == my_incarnation &&
                req->state == HILO_REQ_ABANDONED)
                req->state = HILO_REQ_IDLE;
        }
    }
    LWLockRelease(hilo_shared->lock);
}

/*
 * SIGTERM (pg_terminate_backend, a fast or smart shutdown): the worker
 * finishes its batch and exits cleanly (ShutdownRequestPending). Only a
 * commit waiting for synchronous standbys could hold it up forever, and
 * SyncRepWaitForLSN ends its wait on ProcDiePending, as it does for a
 * backend being terminated; so while the worker commits, SIGTERM sets that
 * too. The commit then returns unconfirmed, and the batch's callers get an
 * error instead of IDs (confirmed_by_sync_standbys).
 */
static volatile sig_atomic_t in_commit = false;

static void worker_sigterm(SIGNAL_ARGS)
{
    int save_errno = errno;
    ShutdownRequestPending = true;
    if (in_commit) {
        InterruptPending = true;
        ProcDiePending = true;
    }
    SetLatch(MyLatch);
    errno = save_errno;
}

/* Commits, ending a wait for synchronous standbys on a shutdown request. */
static void commit_unless_shutting_down(void)
{
    in_commit = true;
    if (ShutdownRequestPending) {
        InterruptPending = true;
        ProcDiePending = true;
    }
    CommitTransactionCommand();
    in_commit = false;
    /* The wait it was meant to end is over; the main loop exits cleanly. */
    ProcDiePending = false;
}

static bool stop_requested(void)
{
    LWLockAcquire(hilo_shared->lock, LW_SHARED);
    bool stop = hilo_shared->workers[my_entry_index].stop_requested;
    LWLockRelease(hilo_shared->lock);
    return stop;
}

static void forget_retained(int slot)
{
    if (retained[slot].ranges != NULL)
        pfree(retained[slot].ranges);
    memset(&retained[slot], 0, sizeof(RetainedResult));
}

static void queue_return(uint64 incarnation, int32 seq_id, const HiloRange *ranges, uint32 count)
{
    if (count == 0)
        return;
    MemoryContext old = MemoryContextSwitchTo(worker_context);
    PendingReturn *pr = (PendingReturn *)palloc(sizeof(PendingReturn));
    pr->incarnation = incarnation;
    pr->seq_id = seq_id;
    pr->count = count;
    pr->done = false;
    pr->ranges = (HiloRange *)palloc(sizeof(HiloRange) * count);
    memcpy(pr->ranges, ranges, sizeof(HiloRange) * count);
    pending_returns = lappend(pending_returns, pr);
    MemoryContextSwitchTo(old);
}

/*
 * After the transaction that ran return_abandoned_ids: if it committed,
 * the entries it put back leave the list; if not, they stay for the next
 * try. The list is rebuilt in worker_context.
 */
static void settle_pending_returns(bool committed)
{
    MemoryContext old = MemoryContextSwitchTo(worker_context);
    List *keep = NIL;
    ListCell *lc;
    foreach (lc, pending_returns) {
        PendingReturn *pr = (PendingReturn *)lfirst(lc);
        if (committed && pr->done) {
            pfree(pr->ranges);
            pfree(pr);
            continue;
        }
        pr->done = false;
        keep = lappend(keep, pr);
    }
    list_free(pending_returns);
    pending_returns = keep;
    MemoryContextSwitchTo(old);
}

/* Copies the next chunk of a retained result into its slot. Lock held. */
static void publish_chunk_locked(HiloRequest *req, RetainedResult *r)
{
    uint32 n = Min((uint32)HILO_REPLY_RANGES, r->count - r->published);
    memcpy(req->ranges, r->ranges + r->published, sizeof(HiloRange) * n);
    req->nranges = n;
    req->total_ranges = r->count;
    r->published += n;
    req->last_chunk = r->published == r->count;
    req->sqlerrcode = 0;
    req->state = HILO_REQ_READY;
}

static void copy_message(char *dst, const char *src)
{
    strlcpy(dst, src ? src : "", HILO_MESSAGE_BYTES);
}

/* Fills a slot's reply with an error or an empty success. Lock held. */
static void reply_locked(HiloRequest *req, int sqlerrcode, const char *message, const char *detail,
                         const char *hint)
{
    req->sqlerrcode = sqlerrcode;
    copy_message(req->message, message);
    copy_message(req->detail, detail);
    copy_message(req->hint, hint);
    req->nranges = 0;
    req->total_ranges = 0;
    req->last_chunk = true;
    req->state = HILO_REQ_READY;
}

static BatchJob *new_job(JobKind kind, int slot)
{
    BatchJob *job = &batch[batch_len++];
    memset(job, 0, sizeof(*job));
    job->kind = kind;
    job->slot = slot;
    job->leader = -1;
    return job;
}

/* A job already in the batch for this pool, or -1. */
static int job_for_pool(int pool_index)
{
    for (int i = 0; i < batch_len; i++)
        if (batch[i].kind == JOB_POOL && batch[i].leader < 0 &&
            batch[i].pool.pool_index == pool_index)
            return i;
    return -1;
}

/*
 * Looks at every slot of this database once: takes new requests into the
 * batch, serves next-chunk requests, notes abandoned results and drops
 * results whose callers are done. Then adds the pools that want a refill.
 */
static void collect_jobs(void)
{
    int nwake = 0, nabandoned = 0;

    batch_len = 0;
    LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
    for (int slot = 0; slot < hilo_shared->num_requests; slot++) {
        HiloRequest *req = &hilo_shared->requests[slot];
        RetainedResult *r = &retained[slot];

        if (req->dboid != MyDatabaseId)
            continue;
        if (r->ranges != NULL && (req->request_id != r->request_id || req->state == HILO_REQ_IDLE))
            forget_retained(slot); /* the caller has everything */

        switch (req->state) {
            case HILO_REQ_SUBMITTED:
                if (req->kind == HILO_REQUEST_NEXT_CHUNK) {
                    if (r->ranges != NULL && r->request_id == req->request_id) {
                        r->consumed = r->published;
                        publish_chunk_locked(req, r);
                    } else {
                        /* The allocator that had the rest has gone (this
                         * is a new one): like a caller that sees it go. */
                        char message[HILO_MESSAGE_BYTES];
                        snprintf(message, sizeof(message),
                                 "the hilo allocator exited before sending all of a reservation "
                                 "for sequence \"%s\"",
                                 req->seq_name);
                        reply_locked(req, ERRCODE_OPERATOR_INTERVENTION, message,
                                     "No IDs were handed out; whatever it had reserved is "
                                     "skipped, never handed out twice.",
                                     "Retry the call.");
                    }
                    slots_to_wake[nwake++] = slot;
                } else {
                    BatchJob *job =
                        new_job(req->kind == HILO_REQUEST_TAKE ? JOB_TAKE : JOB_POOL, slot);
                    job->request_id = req->request_id;
                    job->seq_id = req->seq_id;
                    job->incarnation = req->incarnation;
                    strlcpy(job->seq_name, req->seq_name, sizeof(job->seq_name));
                    job->n = req->n;
                    job->partial = req->partial;
                    /* For JOB_POOL, filled in below, outside the lock. */
                    job->pool.pool_index = req->pool_index;
                    job->pool.fresh_only = req->fresh_only;
                    req->state = HILO_REQ_RUNNING;
                }
                break;
            case HILO_REQ_ABANDONED:
                if (r->ranges != NULL && r->request_id == req->request_id) {
                    /* A pending next-chunk means the last chunk was copied. */
                    if (req->kind == HILO_REQUEST_NEXT_CHUNK)
                        r->consumed = r->published;
                    slots_abandoned[nabandoned++] = slot;
                }
                req->state = HILO_REQ_IDLE;
                break;
            default:
                break;
        }
    }
    LWLockRelease(hilo_shared->lock);

    for (int i = 0; i < nabandoned; i++) {
        RetainedResult *r = &retained[slots_abandoned[i]];
        queue_return(r->incarnation, r->seq_id, r->ranges + r->consumed, r->count - r->consumed);
        forget_retained(slots_abandoned[i]);
    }
    for (int i = 0; i < nwake; i++)
        SetLatch(&GetPGProcByNumber(slots_to_wake[i])->procLatch);

    /* Callers' refill requests: one job per pool, the others follow it. */
    int requests = batch_len;
    for (int i = 0; i < requests; i++) {
        BatchJob *job = &batch[i];
        if (job->kind != JOB_POOL)
            continue;
        int leader = job_for_pool(job->pool.pool_index);
        if (leader >= 0 && leader < i) {
            job->leader = leader;
            continue;
        }
        int32 wanted_seq = job->seq_id;
        if (!hilo_pool_job_for_request(job->pool.pool_index, (uint64)job->n, job->pool.fresh_only,
                                       &job->pool) ||
            job->pool.seq_id != wanted_seq || job->pool.incarnation != job->incarnation)
            job->pool.pool_index = -1; /* stale (or released and reused): the caller looks again */
    }
    /* The allocator's own refills, for pools below their low-water mark. */
    int njobs = hilo_pool_collect_jobs(MyDatabaseId, pool_jobs, hilo_shared->num_pools);
    for (int i = 0; i < njobs && batch_len < batch_capacity; i++) {
        if (job_for_pool(pool_jobs[i].pool_index) >= 0)
            continue;
        BatchJob *job = new_job(JOB_POOL, -1);
        job->pool = pool_jobs[i];
        job->seq_id = pool_jobs[i].seq_id;
        job->incarnation = pool_jobs[i].incarnation;
    }
}

/* Turns the error being handled into the outcome of `job`, in worker_context. */
static void record_error(BatchJob *job)
{
    MemoryContext old = MemoryContextSwitchTo(worker_context);
    ErrorData *edata = CopyErrorData();
    FlushErrorState();
    job->sqlerrcode = edata->sqlerrcode;
    if (edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE) {
        job->message = psprintf(
            "hilo sequence \"%s\" is locked by a concurrent hilo_drop or "
            "settings change",
            job->seq_name);
        job->detail = pstrdup("");
        job->hint = pstrdup("Retry once that transaction has ended.");
    } else {
        job->message = pstrdup(edata->message ? edata->message : "unknown error");
        job->detail = pstrdup(edata->detail ? edata->detail : "");
        job->hint = pstrdup(edata->hint ? edata->hint : "");
    }
    FreeErrorData(edata);
    MemoryContextSwitchTo(old);
}

static void keep_ranges(BatchJob *job, const HiloRange *ranges, uint32 count)
{
    job->ranges =
        (HiloRange *)MemoryContextAlloc(worker_context, sizeof(HiloRange) * Max(count, 1));
    if (count > 0) /* `ranges` may be NULL then */
        memcpy(job->ranges, ranges, sizeof(HiloRange) * count);
    job->count = count;
}

/*
 * A take: pushed-back IDs first (rule 3), then open windows and fresh
 * claims. The pool, which nextval and small takes live on, is drawn on only
 * when the catalog has no more to give (the end of the sequence), so that
 * a large take does not leave them waiting for a refill.
 */
static void run_take(BatchJob *job)
{
    uint64 n = (uint64)job->n;
    /* A take that fails unless whole claims beyond its windows only what
     * lets it succeed: a claim through the quorum register outlives the
     * rollback of a failed take (rule 5). */
    uint64 pool_ids = 0;
    int pool_index = hilo_pool_lookup(MyDatabaseId, job->incarnation, job->seq_id);
    if (pool_index >= 0)
        pool_ids = hilo_pool_ids_above(
            pool_index, pg_atomic_read_u64(&hilo_pool_at(pool_index)->generation), 0);
    /* Free ranges, then windows, then a claim: one reservation, one lock
     * of the sequence row. */
    HiloReserveOptions options = {true, true, 0, true, !job->partial, pool_ids};
    HiloReservation fresh;
    hilo_reserve(job->seq_id, job->seq_name, n, &options, &fresh);

    uint64 borrowed = 0;
    if (fresh.ids < n) {
        /* Only at the end of a sequence: room for all a pool can hold. */
        job->borrowed = (HiloRange *)MemoryContextAlloc(worker_context,
                                                        sizeof(HiloRange) * HILO_POOL_MAX_RANGES);
        borrowed = hilo_pool_borrow(MyDatabaseId, job->incarnation, job->seq_id, n - fresh.ids,
                                    job->borrowed, HILO_POOL_MAX_RANGES, &job->nborrowed,
                                    &job->borrow_pool, &job->borrow_generation);
    }
    job->borrowed_ids = borrowed;
    uint64 got = borrowed + fresh.ids;
    if (got < n && (!job->partial || got == 0))
        hilo_raise_short(job->seq_name, got + fresh.left_unclaimed, n, fresh.max_value);

    uint32 total = job->nborrowed + fresh.count;
    HiloRange *all = (HiloRange *)palloc(sizeof(HiloRange) * (total + 1));
    /* A part with no ranges may have no array at all (memcpy from NULL is
     * undefined even for zero bytes). */
    if (job->nborrowed > 0)
        memcpy(all, job->borrowed, sizeof(HiloRange) * job->nborrowed);
    if (fresh.count > 0)
        memcpy(all + job->nborrowed, fresh.ranges, sizeof(HiloRange) * fresh.count);
    keep_ranges(job, all, (uint32)hilo_ranges_normalize(all, total));
    job->ids = got;
}

/* A pool refill, registered as in flight so pushes see it until published. */
static void run_pool_refill(BatchJob *job)
{
    HiloPoolJob *pj = &job->pool;
    HiloReserveOptions options;
    options.use_free_list = !pj->fresh_only;
    options.use_windows = !pj->free_list_only;
    options.max_ranges = pj->max_ranges;
    /* A single node claims beyond its windows at once; in a cluster that
     * waits for a majority, so a refill takes what the open windows hold
     * (the agent keeps them stocked) and claims only if they are empty. */
    options.claim_beyond_windows = !hilo_window_source_active();
    options.whole_claim = false;
    options.pool_ids = 0;

    HiloReservation res;
    hilo_reserve(pj->seq_id, job->seq_name[0] ? job->seq_name : "?", pj->amount, &options, &res);
    if (res.count > 0 &&
        !hilo_pool_add_inflight(pj->pool_index, pj->generation, res.ranges, res.count)) {
        /* Released, taken for another sequence or invalidated since the job
         * was made: roll the reservation back; the caller, told "done",
         * finds its pool stale and looks again. */
        job->stale = true;
        ereport(ERROR,
                (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                 errmsg("the pool of hilo sequence \"%s\" changed during its refill",
                        job->seq_name[0] ? job->seq_name : "?"),
                 errdetail("The sequence was dropped or changed meanwhile, or other refills of "
                           "it were still being published. Nothing was handed out."),
                 errhint("Retry the call.")));
    }
    keep_ranges(job, res.ranges, res.count);
    job->ids = res.ids;
    job->inflight = res.count > 0;
    job->free_list_drained = res.free_list_drained;
    /* Windows could not give what was asked: the sequence is at its end. */
    job->exhausted = options.use_windows && res.ids < pj->amount;
}

static void run_job_in_subtransaction(BatchJob *job)
{
    MemoryContext outer_context = CurrentMemoryContext;
    ResourceOwner outer_owner = CurrentResourceOwner;

    if (!catalog_missing && job->incarnation != current_incarnation && job->kind == JOB_POOL) {
        /* A pool of a catalog that is gone (freed by now): the caller finds
         * it stale and looks its sequence up again. */
        job->pool.pool_index = -1;
        return;
    }
    if (catalog_missing || job->incarnation != current_incarnation) {
        /* Asked of a catalog that is gone: reserving in the current one
         * would hand out IDs that sequence's own pools may hold too. */
        MemoryContext old = MemoryContextSwitchTo(worker_context);
        job->sqlerrcode = catalog_missing ? ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
                                          : ERRCODE_T_R_SERIALIZATION_FAILURE;
        job->message = psprintf(catalog_missing ? "the hilo catalog of sequence \"%s\" was dropped"
                                                : "the hilo catalog of sequence \"%s\" was "
                                                  "dropped and created again",
                                job->seq_name);
        job->detail = pstrdup("No IDs were handed out.");
        job->hint = pstrdup(catalog_missing ? "Run CREATE EXTENSION hilo." : "Retry the call.");
        MemoryContextSwitchTo(old);
        return;
    }

    BeginInternalSubTransaction(NULL);
    MemoryContextSwitchTo(outer_context);
    PG_TRY();
    {
        if (job->kind == JOB_TAKE)
            run_take(job);
        else
            run_pool_refill(job);
        ReleaseCurrentSubTransaction();
        MemoryContextSwitchTo(outer_context);
        CurrentResourceOwner = outer_owner;
    }
    PG_CATCH();
    {
        HILO_FORGET_UNWOUND_FRAMES();
        MemoryContextSwitchTo(outer_context);
        hilo_free_scan_reset(); /* rows it consumed are back */
        record_error(job);
        if (job->stale)
            job->sqlerrcode = 0; /* not an error for the caller */
        RollbackAndReleaseCurrentSubTransaction();
        MemoryContextSwitchTo(outer_context);
        CurrentResourceOwner = outer_owner;
        job->count = 0;
        job->ids = 0;
        if (job->inflight) {
            hilo_pool_settle_inflight(job->pool.pool_index, job->pool.generation, NULL, 0, false,
                                      false, false);
            job->inflight = false;
        }
    }
    PG_END_TRY();
}

/* Asks the next maintenance round to merge adjacent free ranges: where
 * this process noted spans (its own returns), or with `all` everywhere. */
static void mark_free_ranges_changed_again(bool all)
{
    LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
    hilo_shared->workers[my_entry_index].free_ranges_changed = true;
    hilo_shared->workers[my_entry_index].merge_all |= all;
    LWLockRelease(hilo_shared->lock);
}

/*
 * Gives back IDs whose callers abandoned them. Inside a transaction; the
 * list is only read here (settle_pending_returns changes it after the
 * transaction has ended). Each return runs in a subtransaction of its own,
 * so that one that fails does not undo the batch; it is logged and given
 * up (its IDs are skipped, never handed out twice).
 */
static void return_abandoned_ids(void)
{
    ListCell *lc;
    foreach (lc, pending_returns) {
        PendingReturn *pr = (PendingReturn *)lfirst(lc);
        if (catalog_missing || pr->incarnation != current_incarnation) {
            /* Reserved in a catalog that is gone: a gap. */
            pr->done = true;
            continue;
        }
        MemoryContext outer_context = CurrentMemoryContext;
        ResourceOwner outer_owner = CurrentResourceOwner;

        BeginInternalSubTransaction(NULL);
        MemoryContextSwitchTo(outer_context);
        PG_TRY();
        {
            /* A pusher of the same sequence holds this lock until it
             * commits; rather than wait on a user's transaction, try again
             * later. */
            if (hilo_try_lock_sequence_for_push(pr->seq_id)) {
                hilo_unreserve(pr->seq_id, pr->ranges, pr->count);
                pr->done = true;
            }
            ReleaseCurrentSubTransaction();
            MemoryContextSwitchTo(outer_context);
            CurrentResourceOwner = outer_owner;
        }
        PG_CATCH();
        {
            HILO_FORGET_UNWOUND_FRAMES();
            MemoryContextSwitchTo(outer_context);
            EmitErrorReport();
            FlushErrorState();
            RollbackAndReleaseCurrentSubTransaction();
            MemoryContextSwitchTo(outer_context);
            CurrentResourceOwner = outer_owner;
            elog(LOG,
                 "hilo: could not put back %u abandoned ranges of sequence %d; they are skipped",
                 pr->count, pr->seq_id);
            pr->done = true;
        }
        PG_END_TRY();
        if (pr->done)
            mark_free_ranges_changed_again(false);
    }
}

/* Runs `body` in a transaction of its own; on error, logs it and rolls back. */
static bool run_in_transaction(void (*body)(void *), void *arg, const char *what)
{
    volatile bool ok = true;
    MemoryContext old = CurrentMemoryContext;

    SetCurrentStatementStartTimestamp();
    StartTransactionCommand();
    PG_TRY();
    {
        if (SPI_connect() != SPI_OK_CONNECT)
            elog(ERROR, "hilo: SPI_connect failed");
        PushActiveSnapshot(GetTransactionSnapshot());
        pgstat_report_activity(STATE_RUNNING, what);
        body(arg);
        SPI_finish();
        PopActiveSnapshot();
        commit_unless_shutting_down();
    }
    PG_CATCH();
    {
        HILO_FORGET_UNWOUND_FRAMES();
        in_commit = false;
        hilo_free_scan_reset(); /* rows it consumed are back */
        MemoryContextSwitchTo(old);
        EmitErrorReport();
        FlushErrorState();
        AbortCurrentTransaction();
        ok = false;
    }
    PG_END_TRY();
    MemoryContextSwitchTo(old);
    pgstat_report_activity(STATE_IDLE, NULL);
    return ok;
}

/* A take that may share one reservation with others of its sequence: it
 * must be served whole, from the current catalog, on a node that claims
 * its own windows (a claim through the quorum register outlives a rollback,
 * so there each take keeps its own). */
static bool may_share_reservation(const BatchJob *job)
{
    return job->kind == JOB_TAKE && !job->partial && !job->share_tried && !catalog_missing &&
           job->incarnation == current_incarnation && !hilo_window_source_active();
}

/* One reservation of `total` IDs, cut into the members' shares in batch
 * order; raises if the catalog cannot give all of it. */
static void reserve_and_share(const int *members, int nmembers, uint64 total)
{
    BatchJob *lead = &batch[members[0]];
    HiloReserveOptions options = {true, true, 0, true, true, 0};
    HiloReservation res;
    hilo_reserve(lead->seq_id, lead->seq_name, total, &options, &res);
    if (res.ids != total)
        elog(ERROR, "hilo: short of IDs for takes together"); /* each alone, below */
    /* Cut the sorted ranges into the takes' shares, in batch order. */
    uint32 r = 0;
    HiloRange rest = res.ranges[0];
    HiloRange *share = (HiloRange *)palloc(sizeof(HiloRange) * (res.count + 1));
    for (int m = 0; m < nmembers; m++) {
        BatchJob *job = &batch[members[m]];
        uint64 want = (uint64)job->n;
        uint32 count = 0;
        while (want > 0) {
            HiloRange got = hilo_take_prefix(rest, want);
            share[count++] = got;
            want -= hilo_range_length(got);
            if (got.last == rest.last) {
                if (++r < res.count)
                    rest = res.ranges[r];
            } else {
                rest.first = got.last + 1;
            }
        }
        keep_ranges(job, share, count);
        job->ids = (uint64)job->n;
    }
}

static void try_shared_reservation(const int *members, int nmembers, uint64 total);

/*
 * Takes of one sequence in the same batch, each to be served whole: one
 * reservation for all of them, split in batch order (the first gets the
 * lowest IDs), so that k callers cost one lock of the sequence row and one
 * pass over its free list and windows instead of k. Only if it gives every
 * one all its IDs; otherwise its subtransaction rolls back, nothing of it
 * remains, and each take runs alone as before (its own error, IDs borrowed
 * from the pool at the end of the sequence).
 */
static void run_takes_together(int first)
{
    BatchJob *lead = &batch[first];
    int members[HILO_MAX_BATCH_SHARE];
    int nmembers = 0;
    uint64 total = 0;
    for (int i = first; i < batch_len && nmembers < HILO_MAX_BATCH_SHARE; i++) {
        BatchJob *job = &batch[i];
        if (may_share_reservation(job) && job->seq_id == lead->seq_id &&
            job->incarnation == lead->incarnation && (uint64)job->n <= PG_INT64_MAX - total) {
            members[nmembers++] = i;
            total += (uint64)job->n;
        }
    }
    if (nmembers < 2)
        return;
    for (int m = 0; m < nmembers; m++)
        batch[members[m]].share_tried = true;
    try_shared_reservation(members, nmembers, total);
}

/* reserve_and_share in a subtransaction; on any error nothing of it
 * remains and the members are left to run alone. */
static void try_shared_reservation(const int *members, int nmembers, uint64 total)
{
    MemoryContext outer_context = CurrentMemoryContext;
    ResourceOwner outer_owner = CurrentResourceOwner;
    BeginInternalSubTransaction(NULL);
    MemoryContextSwitchTo(outer_context);
    PG_TRY();
    {
        reserve_and_share(members, nmembers, total);
        ReleaseCurrentSubTransaction();
        MemoryContextSwitchTo(outer_context);
        CurrentResourceOwner = outer_owner;
        for (int m = 0; m < nmembers; m++)
            batch[members[m]].served_together = true;
    }
    PG_CATCH();
    {
        HILO_FORGET_UNWOUND_FRAMES();
        MemoryContextSwitchTo(outer_context);
        FlushErrorState();
        RollbackAndReleaseCurrentSubTransaction();
        MemoryContextSwitchTo(outer_context);
        CurrentResourceOwner = outer_owner;
        for (int m = 0; m < nmembers; m++) {
            BatchJob *job = &batch[members[m]];
            if (job->ranges) {
                pfree(job->ranges);
                job->ranges = NULL;
            }
            job->count = 0;
            job->ids = 0;
        }
    }
    PG_END_TRY();
}

static void serve_batch_body(void *arg)
{
    (void)read_current_incarnation();
    return_abandoned_ids();
    for (int i = 0; i < batch_len; i++) {
        BatchJob *job = &batch[i];
        if (job->leader >= 0 || (job->kind == JOB_POOL && job->pool.pool_index < 0))
            continue;
        if (may_share_reservation(job))
            run_takes_together(i);
        if (!job->served_together)
            run_job_in_subtransaction(job);
    }
}

/*
 * Whether the synchronous standbys confirmed the commit that ended at
 * `commit_end`, or none were asked to. The commit returns even when its wait
 * for them was cut short: by a query cancel (pg_cancel_backend on the
 * allocator), or by the death of the postmaster. PostgreSQL then only warns
 * that the transaction "might not have been replicated". IDs from such a
 * commit must not be handed out: a standby promoted next would not know
 * they were reserved and would hand them out again. The allocator commits
 * with synchronous_commit = on, so the position that counts is the standbys'
 * flush. This mirrors the test SyncRepWaitForLSN makes before it waits.
 */
static bool confirmed_by_sync_standbys(XLogRecPtr commit_end)
{
    if (!SyncRepRequested())
        return true;
    bool named = SyncRepStandbyNames != NULL && SyncRepStandbyNames[0] != '\0';
    LWLockAcquire(SyncRepLock, LW_SHARED);
    XLogRecPtr confirmed = WalSndCtl->lsn[SYNC_REP_WAIT_FLUSH];
#ifdef SYNC_STANDBY_DEFINED /* PostgreSQL 15.13 and later */
    bits8 status = WalSndCtl->sync_standbys_status;
    bool waits = (status & SYNC_STANDBY_INIT) ? (status & SYNC_STANDBY_DEFINED) != 0 : named;
#else
    bool waits = named && WalSndCtl->sync_standbys_defined;
#endif
    LWLockRelease(SyncRepLock);
    return !waits || commit_end <= confirmed;
}

/* After the batch's transaction: settle pools, then answer callers. */
static void publish(bool committed, bool unconfirmed)
{
    int nwake = 0;

    /* Everything that allocates or takes pool locks happens before the
     * shared lock is taken. */
    for (int i = 0; i < batch_len; i++) {
        BatchJob *job = &batch[i];
        if (job->leader >= 0)
            continue;
        bool reserved = committed && job->sqlerrcode == 0;
        /*
         * In flight until now: into the pool if committed, else forgotten.
         * Every pool job settles, even one that found nothing: that is what
         * records "exhausted" or "free list drained", without which the
         * same job would be made again at once, forever.
         */
        if (job->kind == JOB_POOL && job->pool.pool_index >= 0 && (job->inflight || reserved)) {
            hilo_pool_settle_inflight(job->pool.pool_index, job->pool.generation, job->ranges,
                                      job->count, reserved, job->exhausted, job->free_list_drained);
            job->inflight = false;
        }
        if (!committed && job->sqlerrcode == 0) {
            /* Rolled back, or committed here only: nothing can be handed out. */
            MemoryContext old = MemoryContextSwitchTo(worker_context);
            if (unconfirmed) {
                job->sqlerrcode = ERRCODE_OPERATOR_INTERVENTION;
                job->message = psprintf(
                    "the synchronous standby did not confirm the "
                    "reservation for hilo sequence \"%s\"",
                    job->seq_name);
                job->detail = pstrdup(
                    "Its wait for the standby was cut short. No IDs were "
                    "handed out; the reserved ones are skipped.");
                job->hint = pstrdup("Retry the call.");
            } else {
                /* Rolled back as a whole: a retry starts afresh. */
                job->sqlerrcode = ERRCODE_TRANSACTION_ROLLBACK;
                job->message = psprintf(
                    "the hilo allocator could not commit the reservation "
                    "for sequence \"%s\"",
                    job->seq_name);
                job->detail = pstrdup("Its transaction was rolled back; no IDs were handed out.");
                job->hint = pstrdup("Retry the call. The server log has the cause.");
            }
            MemoryContextSwitchTo(old);
            job->count = 0;
        }
        /* Pool IDs a failed take borrowed were reserved long ago: back they go. */
        if (job->kind == JOB_TAKE && job->sqlerrcode != 0 && job->nborrowed > 0)
            hilo_pool_put_back(job->borrow_pool, job->borrow_generation, job->borrowed,
                               job->nborrowed);
        if (job->kind == JOB_TAKE && reserved)
            hilo_pool_count_issued(MyDatabaseId, job->incarnation, job->seq_id,
                                   job->ids - job->borrowed_ids);
        if (job->kind == JOB_POOL && reserved && job->ids == 0 && job->exhausted &&

            job->slot >= 0) {
            MemoryContext old = MemoryContextSwitchTo(worker_context);
            job->sqlerrcode = ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED;
            job->message = psprintf("hilo sequence \"%s\" is exhausted", job->seq_name);
            job->detail = pstrdup("No ID is left to hand out above those already handed out.");
            job->hint = pstrdup("IDs pushed back with hilo_push can be taken again.");
            MemoryContextSwitchTo(old);
        }
    }

    TimestampTz now = GetCurrentTimestamp();
    LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
    for (int i = 0; i < batch_len; i++) {
        BatchJob *job = &batch[i];
        if (job->slot < 0)
            continue;
        hilo_shared->workers[my_entry_index].last_active = now;
        last_request_at = now;
        BatchJob *outcome = job->leader >= 0 ? &batch[job->leader] : job;
        HiloRequest *req = &hilo_shared->requests[job->slot];
        bool caller_waits = req->state == HILO_REQ_RUNNING && req->request_id == job->request_id;

        if (!caller_waits) {
            /* Abandoned while we worked: nobody has seen these IDs. */
            if (req->request_id == job->request_id && req->state == HILO_REQ_ABANDONED)
                req->state = HILO_REQ_IDLE;
            job->abandoned = true;
            continue;
        }
        if (outcome->sqlerrcode != 0) {
            reply_locked(req, outcome->sqlerrcode, outcome->message, outcome->detail,
                         outcome->hint);
        } else if (job->kind == JOB_POOL) {
            reply_locked(req, 0, "", "", ""); /* the pool has been refilled */
        } else {
            RetainedResult *r = &retained[job->slot];
            forget_retained(job->slot);

            r->request_id = job->request_id;
            r->incarnation = job->incarnation;
            r->seq_id = job->seq_id;
            r->ranges = job->ranges; /* ownership moves to the retained result */
            r->count = job->count;
            job->ranges = NULL;
            publish_chunk_locked(req, r);
        }
        slots_to_wake[nwake++] = job->slot;
    }
    LWLockRelease(hilo_shared->lock);

    for (int i = 0; i < nwake; i++)
        SetLatch(&GetPGProcByNumber(slots_to_wake[i])->procLatch);
}

static void release_batch(void)
{
    for (int i = 0; i < batch_len; i++) {
        BatchJob *job = &batch[i];
        if (job->kind == JOB_TAKE && job->abandoned && job->count > 0)
            queue_return(job->incarnation, job->seq_id, job->ranges, job->count);
        if (job->ranges)
            pfree(job->ranges);
        if (job->borrowed)
            pfree(job->borrowed);
        if (job->message)
            pfree(job->message);
        if (job->detail)
            pfree(job->detail);
        if (job->hint)
            pfree(job->hint);
    }
    batch_len = 0;
}

/*
 * Serves jobs until none are waiting. Returns early on a shutdown request,
 * and after a batch that answered no caller and added no ID anywhere, so
 * that a job that cannot progress is retried at the next wake-up instead of
 * in a busy loop.
 */
static void serve_requests(void)
{
    for (;;) {
        collect_jobs();
        if (batch_len == 0 && pending_returns == NIL)
            return;
        XLogRecPtr last_commit = XactLastCommitEnd;
        bool committed = run_in_transaction(serve_batch_body, NULL, "hilo: reserving IDs");
        /* Committed locally is enough for returns: a free range the standby
         * does not know of is skipped there, never handed out twice. */
        settle_pending_returns(committed);
        /* A commit that wrote no record (nothing reserved) needs no standby. */
        bool unconfirmed = committed && XactLastCommitEnd != last_commit &&
                           !confirmed_by_sync_standbys(XactLastCommitEnd);
        if (unconfirmed)
            ereport(LOG, (errmsg("hilo: the synchronous standby did not confirm a reservation; "
                                 "its IDs are skipped")));
        publish(committed && !unconfirmed, unconfirmed);
        bool progress = false;
        for (int i = 0; i < batch_len; i++)
            progress |= batch[i].slot >= 0 || batch[i].ids > 0;
        release_batch();
        if (!progress || ShutdownRequestPending)
            return;
    }
}

/* What the next merge pass reads: taken from the entry with the flag. */
typedef struct MergeWork {
    bool merge;
    bool all;
    uint32 nspans;
    HiloMergeSpan spans[HILO_MERGE_SPANS];
} MergeWork;

/* Reads and clears the flag pushers set when they commit, and their spans. */
static bool take_free_ranges_changed(MergeWork *work)
{
    LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
    HiloWorkerEntry *e = &hilo_shared->workers[my_entry_index];
    bool changed = e->free_ranges_changed;
    work->merge = changed;
    work->all = e->merge_all;
    work->nspans = e->nmerge_spans;
    memcpy(work->spans, e->merge_spans, sizeof(HiloMergeSpan) * e->nmerge_spans);
    e->free_ranges_changed = false;
    e->merge_all = false;
    e->nmerge_spans = 0;
    LWLockRelease(hilo_shared->lock);
    return changed;
}

static void maintain_body(void *arg)
{
    MergeWork *work = (MergeWork *)arg;
    if (read_current_incarnation())
        hilo_maintain_all_sequences(work->merge, work->all, work->spans, work->nspans);
}

/* What a clean shutdown writes back to the free list. */
typedef struct Leftovers {
    HiloSeqRange *items;
    uint32 count;
} Leftovers;

static void write_back_body(void *arg)
{
    Leftovers *left = (Leftovers *)arg;
    if (!read_current_incarnation())
        return;
    return_abandoned_ids(); /* what cannot go back now is skipped */
    for (uint32 i = 0; i < left->count;) {
        /* Group consecutive ranges of one sequence into one insert. */
        uint32 j = i;
        HiloRange *ranges = (HiloRange *)palloc(sizeof(HiloRange) * (left->count - i));
        while (j < left->count && left->items[j].seq_id == left->items[i].seq_id &&
               left->items[j].incarnation == left->items[i].incarnation) {
            ranges[j - i] = left->items[j].range;
            j++;
        }
        /* Pools of a catalog dropped since hold a gap, nothing to give back. */
        if (left->items[i].incarnation == current_incarnation)
            hilo_unreserve(left->items[i].seq_id, ranges, j - i);
        pfree(ranges);
        i = j;
    }
}

/*
 * Clean shutdown: backends exiting give their buffers back to the pools;
 * once they have (or after a few seconds), the pools go back to the free
 * list, so the next start continues from the lowest unused ID.
 */
static void write_back_pools(void)
{
    Leftovers left;
    left.items = hilo_pool_drain_database(MyDatabaseId, HILO_SHUTDOWN_WAIT_MS, &left.count);
    if ((left.count > 0 || pending_returns != NIL) &&
        !run_in_transaction(write_back_body, &left, "hilo: writing pools back"))
        elog(LOG, "hilo: could not write pooled IDs back to the free list; they are skipped");
    pfree(left.items);
}

/* ---- giving idle pools back, and exiting when idle ---- */

static void release_body(void *arg)
{
    ReleasePass *rp = (ReleasePass *)arg;
    HiloRange *ranges = (HiloRange *)palloc(sizeof(HiloRange) * HILO_POOL_MAX_RANGES);
    if (!read_current_incarnation())
        return; /* the catalog is gone: the allocator frees every pool and exits */
    for (int i = 0; i < rp->ncandidates; i++) {
        /* Held to commit: a concurrent push of the same sequence checks the
         * pool and the free list under this lock, so it sees these IDs in
         * the one or the other (committed), never in neither. */
        if (!hilo_try_lock_sequence_for_push(rp->seq_ids[i])) {
            rp->skipped++;
            continue;
        }
        uint32 nranges;
        int32 seq_id;
        bool monotonic;
        if (!hilo_pool_release_begin(rp->indexes[i], rp->generations[i], rp->idle_before, rp->all,
                                     ranges, &nranges, &seq_id, &monotonic))
            continue; /* used again meanwhile */
        rp->released[rp->nreleased++] = rp->indexes[i];
        /* A monotonic sequence never hands out IDs below those handed out:
         * its leftovers stay a gap, as on a clean shutdown. */
        /* Nor do pools of a catalog dropped since (their IDs are a gap). */
        if (!monotonic && nranges > 0 &&
            hilo_pool_at(rp->indexes[i])->incarnation == current_incarnation) {
            hilo_unreserve(seq_id, ranges, nranges);
            rp->wrote = true;
        }
    }
}

/*
 * Gives the IDs of idle pools back to the free list, in a transaction of
 * its own, and frees their slots once it has committed (if it fails, the
 * IDs are skipped: a gap, never a repeat). Returns false if some pool could
 * not be released now.
 */
static bool release_idle_pools(TimestampTz idle_before, bool all)
{
    ReleasePass *rp = &release_pass;
    /* Each pool takes a lock held to commit: a bounded number per transaction. */
    int per_transaction = Min(hilo_shared->num_pools, HILO_RELEASE_PER_TRANSACTION);
    bool all_done = true;
    for (;;) {
        rp->idle_before = idle_before;
        rp->all = all;
        rp->nreleased = 0;
        rp->skipped = 0;
        rp->wrote = false;
        rp->ncandidates =
            hilo_pool_release_candidates(MyDatabaseId, idle_before, all, rp->indexes,
                                         rp->generations, rp->seq_ids, per_transaction);
        if (rp->ncandidates == 0)
            return all_done;
        bool ok = run_in_transaction(release_body, rp, "hilo: giving idle pools back");
        for (int i = 0; i < rp->nreleased; i++)
            hilo_pool_release_finish(rp->released[i]);
        int released = rp->nreleased;
        rp->nreleased = 0; /* finished: the exit callback has nothing left to free */
        if (!ok && released > 0)
            ereport(LOG, (errmsg("hilo: could not give the IDs of %d idle pools back to the free "
                                 "list; they are skipped",
                                 released)));
        if (rp->wrote && ok)
            mark_free_ranges_changed_again(false);
        if (released > 0)
            elog(DEBUG1, "hilo: released %d idle pools", released);
        all_done &= ok && rp->skipped == 0;
        /* More than one transaction's worth, and this one got somewhere: go on. */
        if (rp->ncandidates < per_transaction || released == 0 || !ok)
            return all_done;
    }
}

/* Reads and clears the flag callers set when they need pool slots. */
static bool take_release_requested(void)
{
    LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
    HiloWorkerEntry *e = &hilo_shared->workers[my_entry_index];
    bool requested = e->release_requested;
    e->release_requested = false;
    LWLockRelease(hilo_shared->lock);
    return requested;
}

static bool exit_requested(void)
{
    LWLockAcquire(hilo_shared->lock, LW_SHARED);
    bool requested = hilo_shared->workers[my_entry_index].exit_requested;
    LWLockRelease(hilo_shared->lock);
    return requested;
}

/*
 * Exits if idle: no request in progress or waiting to be collected, no
 * abandoned IDs to return, and no session holding IDs of this database's
 * pools. Gives every pool back to the free list first. Callers that come
 * meanwhile see the entry exiting and start a new allocator once it is
 * gone. Returns false (and answers a caller's request with a no) if busy.
 */
static bool exit_if_idle(void)
{
    bool idle = pending_returns == NIL && !hilo_pool_database_pinned(MyDatabaseId);
    for (int s = 0; idle && s < hilo_shared->num_requests; s++)
        idle = retained[s].ranges == NULL;

    LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
    HiloWorkerEntry *e = &hilo_shared->workers[my_entry_index];
    for (int s = 0; idle && s < hilo_shared->num_requests; s++) {
        HiloRequest *req = &hilo_shared->requests[s];
        idle = !(req->dboid == MyDatabaseId && req->state != HILO_REQ_IDLE);
    }
    if (idle)
        e->state = HILO_WORKER_EXITING;
    else if (e->exit_requested)
        e->exit_refused = true;
    e->exit_requested = false;
    LWLockRelease(hilo_shared->lock);
    if (!idle)
        return false;

    elog(DEBUG1, "hilo allocator for database %u is idle: exiting", MyDatabaseId);
    if (!release_idle_pools(0, true))
        ereport(LOG, (errmsg("hilo: the idle allocator of database %u exits with pools it could "
                             "not give back now; the next one will",
                             MyDatabaseId)));
    return true;
}

/* No request answered and no pool of this database used for the idle time. */
static bool idle_for_long(TimestampTz now)
{
    TimestampTz since = now - (TimestampTz)hilo_allocator_idle_timeout_ms * 1000;
    if (last_request_at >= since)
        return false;
    for (int i = 0; i < hilo_shared->num_pools; i++) {
        HiloPool *pool = hilo_pool_at(i);
        LWLockAcquire(&pool->lock, LW_SHARED);
        bool recent = pool->in_use && pool->dboid == MyDatabaseId && pool->last_used >= since;
        LWLockRelease(&pool->lock);
        if (recent)
            return false;
    }
    return true;
}

static void claim_my_entry(void)
{
    memcpy(&my_entry_index, MyBgworkerEntry->bgw_extra, sizeof(my_entry_index));
    memcpy(&my_incarnation, MyBgworkerEntry->bgw_extra + sizeof(my_entry_index),
           sizeof(my_incarnation));

    LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
    HiloWorkerEntry *e = &hilo_shared->workers[my_entry_index];
    bool mine = e->incarnation == my_incarnation && e->state == HILO_WORKER_STARTING;
    if (mine) {
        e->pid = MyProcPid;
        e->procno = MyProc->pgprocno;
        e->free_ranges_changed = true; /* one merge pass over everything per start */
        e->merge_all = true;
        e->nmerge_spans = 0;
    }
    LWLockRelease(hilo_shared->lock);
    if (!mine)
        proc_exit(0); /* superseded before it started */
    before_shmem_exit(worker_exit_callback, 0);
}

/* What the window source does first (a server started from a backup
 * retires the windows it restored: cluster/restore.cpp). */
static void window_source_start_body(void *arg)
{
    (void)arg;
    hilo_window_source_allocator_start();
}

static void mark_running(void)
{
    LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
    hilo_shared->workers[my_entry_index].state = HILO_WORKER_RUNNING;
    LWLockRelease(hilo_shared->lock);
}

static void allocator_worker_main(Datum main_arg)
{
    Oid dboid = DatumGetObjectId(main_arg);

    pqsignal(SIGHUP, SignalHandlerForConfigReload);
    pqsignal(SIGTERM, worker_sigterm);
    BackgroundWorkerUnblockSignals();

    claim_my_entry();
    BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);

    /* The durability of every take rests on this. */
    SetConfigOption("synchronous_commit", "on", PGC_SUSET, PGC_S_OVERRIDE);
    SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_OVERRIDE);
    /* Never wait long on a caller's lock: fail that request instead. */
    SetConfigOption("lock_timeout", "2s", PGC_SUSET, PGC_S_OVERRIDE);
    /* Index plans only: see hilo_catalog_prefer_indexes. */
    SetConfigOption("enable_seqscan", "off", PGC_SUSET, PGC_S_OVERRIDE);
    SetConfigOption("statement_timeout", "0", PGC_SUSET, PGC_S_OVERRIDE);
    SetConfigOption("default_transaction_read_only", "off", PGC_SUSET, PGC_S_OVERRIDE);
    /* Every statement of the allocator reads a few rows by an index. Its
     * plans are generic and cached for the worker's life, and planned
     * while hilo.windows was small or its statistics stale: a sequential
     * scan chosen then reads every used-up window of every later take, so
     * each take would cost more than the one before (issue 12, section 4). */
    SetConfigOption("enable_seqscan", "off", PGC_SUSET, PGC_S_OVERRIDE);
    /* A statement with no index to use then looks costly: never worth
     * compiling, for statements that read a handful of rows. */
    SetConfigOption("jit", "off", PGC_SUSET, PGC_S_OVERRIDE);
    /* Generic plans at once: with seqscan off their cost can look much
     * higher than a custom plan's, and the plan cache would then plan
     * every execution again. */
    SetConfigOption("plan_cache_mode", "force_generic_plan", PGC_SUSET, PGC_S_OVERRIDE);
    pgstat_report_appname("hilo allocator");

    worker_context =
        AllocSetContextCreate(TopMemoryContext, "hilo allocator", ALLOCSET_DEFAULT_SIZES);
    retained = (RetainedResult *)MemoryContextAllocZero(
        worker_context, sizeof(RetainedResult) * hilo_shared->num_requests);
    batch_capacity = hilo_shared->num_requests + hilo_shared->num_pools;
    batch = (BatchJob *)MemoryContextAllocZero(worker_context, sizeof(BatchJob) * batch_capacity);
    slots_to_wake =
        (int *)MemoryContextAlloc(worker_context, sizeof(int) * hilo_shared->num_requests);
    slots_abandoned =
        (int *)MemoryContextAlloc(worker_context, sizeof(int) * hilo_shared->num_requests);
    pool_jobs = (HiloPoolJob *)MemoryContextAlloc(worker_context,
                                                  sizeof(HiloPoolJob) * hilo_shared->num_pools);
    release_pass.indexes =
        (int *)MemoryContextAlloc(worker_context, sizeof(int) * hilo_shared->num_pools);
    release_pass.released =
        (int *)MemoryContextAlloc(worker_context, sizeof(int) * hilo_shared->num_pools);
    release_pass.generations =
        (uint64 *)MemoryContextAlloc(worker_context, sizeof(uint64) * hilo_shared->num_pools);
    release_pass.seq_ids =
        (int32 *)MemoryContextAlloc(worker_context, sizeof(int32) * hilo_shared->num_pools);
    last_request_at = GetCurrentTimestamp();

    /* Before anything is served: IDs of restored windows may be out already. */
    if (!run_in_transaction(window_source_start_body, NULL, "hilo: retiring restored windows"))
        proc_exit(1);
    mark_running();
    elog(DEBUG1, "hilo allocator started for database %u", dboid);

    TimestampTz next_maintenance = 0;
    for (;;) {
        CHECK_FOR_INTERRUPTS();
        if (ShutdownRequestPending) {
            write_back_pools();
            break;
        }
        if (stop_requested())
            break; /* the database is being dropped, renamed or copied */
        if (catalog_missing) {
            /* DROP EXTENSION hilo: nothing here to serve. The pools are a
             * gap; the slot goes back, and a CREATE EXTENSION and the next
             * call start a new allocator. */
            hilo_pool_invalidate(MyDatabaseId, -1);
            ereport(LOG, (errmsg("hilo allocator for database %u exits: the hilo catalog was "
                                 "dropped",
                                 dboid)));
            break;
        }
        if (ConfigReloadPending) {
            ConfigReloadPending = false;
            ProcessConfigFile(PGC_SIGHUP);
        }

        serve_requests();

        /* Callers that need pool slots marked pools of ours: give them back. */
        if (take_release_requested())
            (void)release_idle_pools(0, false);

        TimestampTz now = GetCurrentTimestamp();
        if (exit_requested() && exit_if_idle())
            break; /* another database needs the worker slot */
        if (now >= next_maintenance) {
            MergeWork work;
            bool merge = take_free_ranges_changed(&work);
            if (!run_in_transaction(maintain_body, &work, "hilo: maintaining windows")) {
                if (merge)
                    mark_free_ranges_changed_again(true);
            } else if (merge) {
                hilo_merge_spans_merged(); /* this process's own spans */
            }
            hilo_pool_update_rates(MyDatabaseId);
            (void)release_idle_pools(now - (TimestampTz)hilo_pool_idle_timeout_ms * 1000, false);
            if (idle_for_long(now) && exit_if_idle())
                break;
            next_maintenance = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), hilo_naptime_ms);
        }

        long timeout = Max(1L, (long)((next_maintenance - GetCurrentTimestamp()) / 1000));
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, timeout,
                        PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
    }
    proc_exit(0);
}

/* The worker's entry point: a C++ exception reaching it becomes a FATAL error. */
HILO_WORKER_MAIN(hilo_allocator_main, allocator_worker_main, "hilo allocator")
