/*
 * allocator_worker.cpp: the allocator, one background worker per database.
 *
 * It serves the requests backends leave in their shared-memory slots. All
 * takes waiting at one wake-up are reserved in one transaction, each in its
 * own subtransaction so that one failure (exhaustion, a dropped sequence)
 * fails only its own request, and committed with synchronous_commit = on:
 * the WAL is flushed before any reply is published, so a crash after a
 * caller saw its IDs can never hand them out again. One commit serves the
 * whole batch, which is what keeps many concurrent takes cheap.
 *
 * Between requests, every hilo.naptime, it tops up each sequence's open
 * windows and merges adjacent free ranges.
 */
#include "hilo.h"

extern "C" {
#include "access/xact.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
}

/* This worker's entry in hilo_shared->workers. */
static int my_entry_index = -1;
static uint64 my_incarnation = 0;

/* Results kept until their caller has copied every chunk. */
typedef struct RetainedResult {
    uint64 request_id;
    int32 seq_id;
    HiloRange *ranges; /* in worker_context */
    uint32 count;
    uint32 published; /* ranges handed to the slot so far */
    uint32 consumed;  /* ranges the caller has certainly copied */
} RetainedResult;

static RetainedResult *retained = NULL; /* one per request slot */
static MemoryContext worker_context = NULL;

/* Reserved IDs whose caller gave up, waiting to go back on the free list. */
typedef struct PendingReturn {
    int32 seq_id;
    HiloRange *ranges;
    uint32 count;
} PendingReturn;
static List *pending_returns = NIL;

/* One take of the current batch. */
typedef struct BatchTake {
    int slot;
    uint64 request_id;
    int32 seq_id;
    char seq_name[HILO_MAX_NAME_BYTES + 1];
    int64 n;
    bool partial;
    /* outcome */
    bool abandoned; /* the caller left before the reply */
    HiloRange *ranges;
    uint32 count;
    int sqlerrcode;
    char *message;
    char *detail;
    char *hint;
} BatchTake;

static void worker_exit_callback(int code, Datum arg)
{
    if (hilo_shared == NULL || my_entry_index < 0)
        return;
    LWLockReleaseAll(); /* an error may have struck while we held it */
    LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
    HiloWorkerEntry *e = &hilo_shared->workers[my_entry_index];
    if (e->incarnation == my_incarnation)
        e->state = HILO_WORKER_NONE;
    LWLockRelease(hilo_shared->lock);
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

static void queue_return(int32 seq_id, const HiloRange *ranges, uint32 count)
{
    if (count == 0)
        return;
    MemoryContext old = MemoryContextSwitchTo(worker_context);
    PendingReturn *pr = (PendingReturn *)palloc(sizeof(PendingReturn));
    pr->seq_id = seq_id;
    pr->count = count;
    pr->ranges = (HiloRange *)palloc(sizeof(HiloRange) * count);
    memcpy(pr->ranges, ranges, sizeof(HiloRange) * count);
    pending_returns = lappend(pending_returns, pr);
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

/*
 * Scratch space sized for every slot, allocated once, so that nothing is
 * allocated (and nothing can raise an error) while the shared lock is held.
 */
static BatchTake *batch = NULL;
static int batch_len = 0;
static int *slots_to_wake = NULL;
static int *slots_abandoned = NULL;

/*
 * Looks at every slot of this database once: takes new requests into the
 * batch, serves next-chunk requests, notes abandoned results and drops
 * results whose callers are done.
 */
static void collect_requests(void)
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
                        req->sqlerrcode = ERRCODE_INTERNAL_ERROR;
                        copy_message(req->message, "hilo allocator lost the rest of a reply");
                        req->detail[0] = req->hint[0] = '\0';
                        req->last_chunk = true;
                        req->state = HILO_REQ_READY;
                    }
                    slots_to_wake[nwake++] = slot;
                } else {
                    BatchTake *t = &batch[batch_len++];
                    memset(t, 0, sizeof(*t));
                    t->slot = slot;
                    t->request_id = req->request_id;
                    t->seq_id = req->seq_id;
                    strlcpy(t->seq_name, req->seq_name, sizeof(t->seq_name));
                    t->n = req->n;
                    t->partial = req->partial;
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
        queue_return(r->seq_id, r->ranges + r->consumed, r->count - r->consumed);
        forget_retained(slots_abandoned[i]);
    }
    for (int i = 0; i < nwake; i++)
        SetLatch(&GetPGProcByNumber(slots_to_wake[i])->procLatch);
}

/* Turns the error being handled into the reply of `t`, in worker_context. */
static void record_error(BatchTake *t)
{
    MemoryContext old = MemoryContextSwitchTo(worker_context);
    ErrorData *edata = CopyErrorData();
    FlushErrorState();
    t->sqlerrcode = edata->sqlerrcode;
    if (edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE) {
        t->message = psprintf(
            "hilo sequence \"%s\" is locked by a concurrent hilo_drop or "
            "settings change",
            t->seq_name);
        t->detail = pstrdup("");
        t->hint = pstrdup("Retry once that transaction has ended.");
    } else {
        t->message = pstrdup(edata->message ? edata->message : "unknown error");
        t->detail = pstrdup(edata->detail ? edata->detail : "");
        t->hint = pstrdup(edata->hint ? edata->hint : "");
    }
    FreeErrorData(edata);
    MemoryContextSwitchTo(old);
}

/* Reserves one take inside its own subtransaction of the batch transaction. */
static void reserve_in_subtransaction(BatchTake *t)
{
    MemoryContext outer_context = CurrentMemoryContext;
    ResourceOwner outer_owner = CurrentResourceOwner;

    BeginInternalSubTransaction(NULL);
    MemoryContextSwitchTo(outer_context);
    PG_TRY();
    {
        uint32 count;
        HiloRange *ranges = hilo_reserve(t->seq_id, t->seq_name, t->n, t->partial, &count);
        MemoryContext old = MemoryContextSwitchTo(worker_context);
        t->ranges = (HiloRange *)palloc(sizeof(HiloRange) * Max(count, 1));
        memcpy(t->ranges, ranges, sizeof(HiloRange) * count);
        t->count = count;
        MemoryContextSwitchTo(old);
        ReleaseCurrentSubTransaction();
        MemoryContextSwitchTo(outer_context);
        CurrentResourceOwner = outer_owner;
    }
    PG_CATCH();
    {
        MemoryContextSwitchTo(outer_context);
        record_error(t);
        RollbackAndReleaseCurrentSubTransaction();
        MemoryContextSwitchTo(outer_context);
        CurrentResourceOwner = outer_owner;
        if (t->ranges != NULL) {
            pfree(t->ranges);
            t->ranges = NULL;
            t->count = 0;
        }
    }
    PG_END_TRY();
}

/* Asks the next maintenance round to merge adjacent free ranges. */
static void mark_free_ranges_changed_again(void)
{
    LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
    hilo_shared->workers[my_entry_index].free_ranges_changed = true;
    LWLockRelease(hilo_shared->lock);
}

/* Gives back IDs whose callers abandoned them. Inside a transaction. */
static void return_abandoned_ids(void)
{
    List *keep = NIL;
    ListCell *lc;
    foreach (lc, pending_returns) {
        PendingReturn *pr = (PendingReturn *)lfirst(lc);
        /* A pusher of the same sequence holds this lock until it commits;
         * rather than wait on a user's transaction, try again later. */
        if (!hilo_try_lock_sequence_for_push(pr->seq_id)) {
            keep = lappend(keep, pr);
            continue;
        }
        hilo_unreserve(pr->seq_id, pr->ranges, pr->count);
        mark_free_ranges_changed_again();
        pfree(pr->ranges);
        pfree(pr);
    }
    list_free(pending_returns);
    pending_returns = keep;
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
        CommitTransactionCommand();
    }
    PG_CATCH();
    {
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

static void serve_batch_body(void *arg)
{
    return_abandoned_ids();
    for (int i = 0; i < batch_len; i++)
        reserve_in_subtransaction(&batch[i]);
}

/* Publishes the batch's replies, now that its transaction committed (or not). */
static void publish_replies(bool committed)
{
    int nwake = 0;

    /* Allocate before taking the lock. */
    for (int i = 0; i < batch_len; i++) {
        BatchTake *t = &batch[i];
        if (!committed) {
            /* Rolled back: these IDs were never reserved; forget them. */
            t->count = 0;
            if (t->sqlerrcode == 0) {
                MemoryContext old = MemoryContextSwitchTo(worker_context);
                t->sqlerrcode = ERRCODE_INTERNAL_ERROR;
                t->message = pstrdup("hilo allocator could not commit the reservation");
                t->hint = pstrdup("See the server log.");
                MemoryContextSwitchTo(old);
            }
        }
    }

    LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
    for (int i = 0; i < batch_len; i++) {
        BatchTake *t = &batch[i];
        HiloRequest *req = &hilo_shared->requests[t->slot];
        bool caller_waits = req->state == HILO_REQ_RUNNING && req->request_id == t->request_id;

        if (!caller_waits) {
            /* Abandoned while we worked: nobody has seen these IDs. */
            if (req->request_id == t->request_id && req->state == HILO_REQ_ABANDONED)
                req->state = HILO_REQ_IDLE;
            t->abandoned = true;
            continue;
        }
        if (t->sqlerrcode != 0) {
            req->sqlerrcode = t->sqlerrcode;
            copy_message(req->message, t->message);
            copy_message(req->detail, t->detail);
            copy_message(req->hint, t->hint);
            req->nranges = 0;
            req->last_chunk = true;
            req->state = HILO_REQ_READY;
        } else {
            RetainedResult *r = &retained[t->slot];
            forget_retained(t->slot);
            r->request_id = t->request_id;
            r->seq_id = t->seq_id;
            r->ranges = t->ranges; /* ownership moves to the retained result */
            r->count = t->count;
            t->ranges = NULL;
            publish_chunk_locked(req, r);
        }
        slots_to_wake[nwake++] = t->slot;
    }
    LWLockRelease(hilo_shared->lock);

    for (int i = 0; i < nwake; i++)
        SetLatch(&GetPGProcByNumber(slots_to_wake[i])->procLatch);
}

static void release_batch(void)
{
    for (int i = 0; i < batch_len; i++) {
        BatchTake *t = &batch[i];
        if (t->abandoned && t->count > 0)
            queue_return(t->seq_id, t->ranges, t->count);
        if (t->ranges)
            pfree(t->ranges);
        if (t->message)
            pfree(t->message);
        if (t->detail)
            pfree(t->detail);
        if (t->hint)
            pfree(t->hint);
    }
    batch_len = 0;
}

/* Serves requests until none are waiting. */
static void serve_requests(void)
{
    for (;;) {
        collect_requests();
        if (batch_len == 0 && pending_returns == NIL)
            return;
        bool committed = run_in_transaction(serve_batch_body, NULL, "hilo: reserving IDs");
        publish_replies(committed);
        bool had_takes = batch_len > 0;
        release_batch();
        if (!had_takes)
            return; /* only returns were pending; don't spin if they must wait */
    }
}

/* Reads and clears the flag pushers set when they commit. */
static bool take_free_ranges_changed(void)
{
    LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
    HiloWorkerEntry *e = &hilo_shared->workers[my_entry_index];
    bool changed = e->free_ranges_changed;
    e->free_ranges_changed = false;
    LWLockRelease(hilo_shared->lock);
    return changed;
}

static void maintain_body(void *arg)
{
    hilo_maintain_all_sequences(*(bool *)arg);
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
    }
    LWLockRelease(hilo_shared->lock);
    if (!mine)
        proc_exit(0); /* superseded before it started */
    before_shmem_exit(worker_exit_callback, 0);
}

static void mark_running(void)
{
    LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
    hilo_shared->workers[my_entry_index].state = HILO_WORKER_RUNNING;
    LWLockRelease(hilo_shared->lock);
}

static void worker_main(Datum main_arg)
{
    Oid dboid = DatumGetObjectId(main_arg);

    pqsignal(SIGHUP, SignalHandlerForConfigReload);
    pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
    BackgroundWorkerUnblockSignals();

    claim_my_entry();
    BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);

    /* The durability of every take rests on this. */
    SetConfigOption("synchronous_commit", "on", PGC_SUSET, PGC_S_OVERRIDE);
    SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_OVERRIDE);
    /* Never wait long on a caller's lock: fail that request instead. */
    SetConfigOption("lock_timeout", "2s", PGC_SUSET, PGC_S_OVERRIDE);
    SetConfigOption("statement_timeout", "0", PGC_SUSET, PGC_S_OVERRIDE);
    SetConfigOption("default_transaction_read_only", "off", PGC_SUSET, PGC_S_OVERRIDE);
    pgstat_report_appname("hilo allocator");

    worker_context =
        AllocSetContextCreate(TopMemoryContext, "hilo allocator", ALLOCSET_DEFAULT_SIZES);
    retained = (RetainedResult *)MemoryContextAllocZero(
        worker_context, sizeof(RetainedResult) * hilo_shared->num_requests);
    batch = (BatchTake *)MemoryContextAllocZero(worker_context,
                                                sizeof(BatchTake) * hilo_shared->num_requests);
    slots_to_wake =
        (int *)MemoryContextAlloc(worker_context, sizeof(int) * hilo_shared->num_requests);
    slots_abandoned =
        (int *)MemoryContextAlloc(worker_context, sizeof(int) * hilo_shared->num_requests);

    mark_running();
    elog(DEBUG1, "hilo allocator started for database %u", dboid);

    TimestampTz next_maintenance = 0;
    for (;;) {
        CHECK_FOR_INTERRUPTS();
        if (ShutdownRequestPending || stop_requested())
            break;
        if (ConfigReloadPending) {
            ConfigReloadPending = false;
            ProcessConfigFile(PGC_SIGHUP);
        }

        serve_requests();

        TimestampTz now = GetCurrentTimestamp();
        if (now >= next_maintenance) {
            bool merge = take_free_ranges_changed();
            if (!run_in_transaction(maintain_body, &merge, "hilo: maintaining windows") && merge)
                mark_free_ranges_changed_again();
            next_maintenance = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), hilo_naptime_ms);
        }

        long timeout = Max(1L, (long)((next_maintenance - GetCurrentTimestamp()) / 1000));
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, timeout,
                        PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
    }
    proc_exit(0);
}

/*
 * The worker's entry point. Its body is PostgreSQL-regime code; a C++
 * exception reaching here is turned into a FATAL error after the catch.
 */
extern "C" PGDLLEXPORT void hilo_allocator_main(Datum main_arg)
{
    char what[HILO_MESSAGE_BYTES];
    try {
        worker_main(main_arg);
        return;
    } catch (const std::exception &e) {
        strlcpy(what, e.what(), sizeof(what));
    } catch (...) {
        strlcpy(what, "unknown exception", sizeof(what));
    }
    ereport(FATAL, (errcode(ERRCODE_INTERNAL_ERROR),
                    errmsg("unexpected C++ exception in hilo allocator: %s", what)));
}
