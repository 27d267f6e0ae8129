/*
 * alloc/worker.cpp: the allocator, one background worker per database.
 *
 * It does three kinds of work, in batches (worker_batch.cpp):
 *   - takes that backends leave in their shared-memory slots;
 *   - pool refills that backends ask for and wait on (their pool ran dry);
 *   - pool refills of its own, for every pool below its low-water mark, so
 *     that backends almost never wait (Leaf's double buffer).
 *
 * Between batches, every hilo.naptime, it tops up each sequence's open
 * windows and merges adjacent free ranges (a bounded part of them per
 * transaction, the rest between the next batches: merge_spans.cpp), gives
 * idle pools back, and exits when idle. On a clean shutdown it writes what the pools (and the
 * buffers of exiting backends) still hold back to the free list, so a
 * restart wastes nothing (worker_returns.cpp). This file: the worker's
 * start, its main loop, the maintenance round and the idle exit.
 */
#include "worker.h"

extern "C" {
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
}

static void worker_exit_callback(int code, Datum arg)
{
    if (hilo_shared == NULL || hilo_worker.entry_index < 0)
        return;
    LWLockReleaseAll(); /* an error may have struck while we held it */
    /* A FATAL error in the middle of a release: its IDs are a gap, but
     * the slots must not stay "releasing" forever. */
    for (int i = 0; i < hilo_worker.release_pass.nreleased; i++)
        hilo_pool_release_finish(hilo_worker.release_pass.released[i]);
    hilo_worker.release_pass.nreleased = 0;
    LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
    HiloWorkerEntry *e = &hilo_shared->workers[hilo_worker.entry_index];
    if (e->serial == hilo_worker.serial) {
        e->state = HILO_WORKER_NONE;
        /* Nobody else will clear the slots abandoned on us; what we held
         * for them goes with us (skipped, never handed out twice). */
        for (int slot = 0; slot < hilo_shared->num_requests; slot++) {
            HiloRequest *req = &hilo_shared->requests[slot];
            if (req->dboid == MyDatabaseId && req->worker_serial == hilo_worker.serial &&
                req->state == HILO_REQ_ABANDONED)
                req->state = HILO_REQ_IDLE;
        }
    }
    LWLockRelease(hilo_shared->lock);
}

static bool stop_requested(void)
{
    LWLockAcquire(hilo_shared->lock, LW_SHARED);
    bool stop = hilo_shared->workers[hilo_worker.entry_index].stop_requested;
    LWLockRelease(hilo_shared->lock);
    return stop;
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
    HiloWorkerEntry *e = &hilo_shared->workers[hilo_worker.entry_index];
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
    if (hilo_worker_read_creation())
        hilo_maintain_all_sequences(work->merge, work->all, work->spans, work->nspans);
}

/* The rest of a merge pass that read all it may (alloc/merge_spans.cpp). */
/* How often, at least, the allocator checks its sequences' runway. */
#define RUNWAY_CHECK_MS 5000

static void runway_body(void *arg)
{
    (void)arg;
    hilo_runway_check();
}

static void merge_body(void *arg)
{
    (void)arg;
    if (hilo_worker_read_creation())
        hilo_merge_free_ranges(false, NULL, 0);
}

/*
 * Runs merge_body in a transaction whose commit does not wait for its WAL
 * to be flushed. Merging is never needed for correctness: a merge lost in
 * a crash leaves adjacent rows, not a wrong one; and a take that later
 * reads what it merged commits synchronously, which flushes the merge's
 * WAL first. The allocator's setting is an override (set_worker_options),
 * which set_config_option never sets for one transaction only, so it is
 * set back here, whatever happened.
 */
static bool run_merge_transaction(void)
{
    SetConfigOption("synchronous_commit", "off", PGC_SUSET, PGC_S_OVERRIDE);
    bool ok = hilo_worker_run_in_transaction(merge_body, NULL, "hilo: merging free ranges");
    SetConfigOption("synchronous_commit", ALLOCATOR_SYNCHRONOUS_COMMIT, PGC_SUSET, PGC_S_OVERRIDE);
    return ok;
}

/* A failed merge pass: what it had queued is forgotten, and the next
 * maintenance round merges everything (a bounded part per pass). */
static void merge_failed(void)
{
    hilo_merge_abandon();
    hilo_worker_merge_again(true);
}

/* Reads and clears the flag callers set when they need pool slots. */
static bool take_release_requested(void)
{
    LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
    HiloWorkerEntry *e = &hilo_shared->workers[hilo_worker.entry_index];
    bool requested = e->release_requested;
    e->release_requested = false;
    LWLockRelease(hilo_shared->lock);
    return requested;
}

static bool exit_requested(void)
{
    LWLockAcquire(hilo_shared->lock, LW_SHARED);
    bool requested = hilo_shared->workers[hilo_worker.entry_index].exit_requested;
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
    bool idle = hilo_worker.pending_returns == NIL && !hilo_pool_database_pinned(MyDatabaseId);
    for (int s = 0; idle && s < hilo_shared->num_requests; s++)
        idle = hilo_worker.retained[s].ranges == NULL;

    LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
    HiloWorkerEntry *e = &hilo_shared->workers[hilo_worker.entry_index];
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
    if (!hilo_worker_release_idle_pools(0, true))
        ereport(LOG, (errmsg("hilo: the idle allocator of database %u exits with pools it could "
                             "not give back now; the next one will",
                             MyDatabaseId)));
    return true;
}

/* No request answered and no pool of this database used for the idle time. */
static bool idle_for_long(TimestampTz now)
{
    TimestampTz since = now - (TimestampTz)hilo_allocator_idle_timeout_ms * 1000;
    if (hilo_worker.last_request_at >= since)
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
    memcpy(&hilo_worker.entry_index, MyBgworkerEntry->bgw_extra, sizeof(hilo_worker.entry_index));
    memcpy(&hilo_worker.serial, MyBgworkerEntry->bgw_extra + sizeof(hilo_worker.entry_index),
           sizeof(hilo_worker.serial));

    LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
    HiloWorkerEntry *e = &hilo_shared->workers[hilo_worker.entry_index];
    bool mine = e->serial == hilo_worker.serial && e->state == HILO_WORKER_STARTING;
    if (mine) {
        e->pid = MyProcPid;
        e->procno = MyProcNumber;
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
 * retires the windows it restored: cluster/node/restore.cpp). */
static void window_source_start_body(void *arg)
{
    (void)arg;
    hilo_window_source_allocator_start();
}

static void mark_running(void)
{
    LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
    hilo_shared->workers[hilo_worker.entry_index].state = HILO_WORKER_RUNNING;
    LWLockRelease(hilo_shared->lock);
}

/* The allocator's settings, for its whole life. */
static void set_worker_options(void)
{
    /* The durability of every take rests on this. */
    SetConfigOption("synchronous_commit", ALLOCATOR_SYNCHRONOUS_COMMIT, PGC_SUSET, PGC_S_OVERRIDE);
    hilo_worker_session_options();
    /* Never wait long on a caller's lock: fail that request instead. */
    SetConfigOption("lock_timeout", "2s", PGC_SUSET, PGC_S_OVERRIDE);
    /* Every statement of the allocator reads a few rows by an index. Its
     * plans are generic and cached for the worker's life, and planned
     * while hilo.windows was small or its statistics stale: a sequential
     * scan chosen then reads every used-up window of every later take, so
     * each take would cost more than the one before. */
    SetConfigOption("enable_seqscan", "off", PGC_SUSET, PGC_S_OVERRIDE);
    /* (A statement with no index to use then looks costly: jit is off,
     * hilo_worker_session_options.) */
    /* Generic plans at once: with seqscan off their cost can look much
     * higher than a custom plan's, and the plan cache would then plan
     * every execution again. */
    SetConfigOption("plan_cache_mode", "force_generic_plan", PGC_SUSET, PGC_S_OVERRIDE);
}

/* What the allocator keeps for its whole life, sized by the shared tables. */
static void allocate_worker_memory(void)
{
    hilo_worker.context =
        AllocSetContextCreate(TopMemoryContext, "hilo allocator", ALLOCSET_DEFAULT_SIZES);
    hilo_worker.retained = (RetainedResult *)MemoryContextAllocZero(
        hilo_worker.context, sizeof(RetainedResult) * hilo_shared->num_requests);
    hilo_worker.batch_capacity = hilo_shared->num_requests + hilo_shared->num_pools;
    hilo_worker.batch = (BatchJob *)MemoryContextAllocZero(
        hilo_worker.context, sizeof(BatchJob) * hilo_worker.batch_capacity);
    hilo_worker.slots_to_wake =
        (int *)MemoryContextAlloc(hilo_worker.context, sizeof(int) * hilo_shared->num_requests);
    hilo_worker.slots_abandoned =
        (int *)MemoryContextAlloc(hilo_worker.context, sizeof(int) * hilo_shared->num_requests);
    hilo_worker.pool_jobs = (HiloPoolJob *)MemoryContextAlloc(
        hilo_worker.context, sizeof(HiloPoolJob) * hilo_shared->num_pools);
    hilo_worker.release_pass.indexes =
        (int *)MemoryContextAlloc(hilo_worker.context, sizeof(int) * hilo_shared->num_pools);
    hilo_worker.release_pass.released =
        (int *)MemoryContextAlloc(hilo_worker.context, sizeof(int) * hilo_shared->num_pools);
    hilo_worker.release_pass.generations =
        (uint64 *)MemoryContextAlloc(hilo_worker.context, sizeof(uint64) * hilo_shared->num_pools);
    hilo_worker.release_pass.seq_ids =
        (int32 *)MemoryContextAlloc(hilo_worker.context, sizeof(int32) * hilo_shared->num_pools);
}

static void allocator_worker_main(Datum main_arg)
{
    Oid dboid = DatumGetObjectId(main_arg);

    pqsignal(SIGHUP, SignalHandlerForConfigReload);
    pqsignal(SIGTERM, hilo_worker_sigterm);
    BackgroundWorkerUnblockSignals();

    claim_my_entry();
    BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);

    set_worker_options();
    pgstat_report_appname("hilo allocator");

    allocate_worker_memory();
    hilo_worker.last_request_at = GetCurrentTimestamp();

    /* Before anything is served: IDs of restored windows may be out already. */
    if (!hilo_worker_run_in_transaction(window_source_start_body, NULL,
                                        "hilo: retiring restored windows"))
        proc_exit(1);
    mark_running();
    elog(DEBUG1, "hilo allocator started for database %u", dboid);

    TimestampTz next_maintenance = 0;
    TimestampTz next_runway_check = 0;
    TimestampTz next_merge = 0; /* the next part of a merge pass, not before */
    for (;;) {
        CHECK_FOR_INTERRUPTS();
        if (ShutdownRequestPending) {
            hilo_worker_write_back_pools();
            break;
        }
        if (stop_requested())
            break; /* the database is being dropped, renamed or copied */
        if (hilo_worker.catalog_missing) {
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

        hilo_worker_serve_requests();

        /* Callers that need pool slots marked pools of ours: give them back. */
        if (take_release_requested())
            (void)hilo_worker_release_idle_pools(0, false);

        TimestampTz now = GetCurrentTimestamp();
        if (exit_requested() && exit_if_idle())
            break; /* another database needs the worker slot */
        if (now >= next_maintenance) {
            MergeWork work;
            bool merge = take_free_ranges_changed(&work);
            (void)hilo_merge_ran();
            bool ok =
                hilo_worker_run_in_transaction(maintain_body, &work, "hilo: maintaining windows");
            /* Merges it did (of spans then forgotten) were rolled back too. */
            if (!ok && (merge || hilo_merge_ran() || hilo_merge_pending()))
                merge_failed();
            hilo_pool_update_rates(MyDatabaseId);
            hilo_pool_report_issued(MyDatabaseId);
            hilo_issued_update_rates(MyDatabaseId);
            if (now >= next_runway_check) {
                (void)hilo_worker_run_in_transaction(runway_body, NULL,
                                                     "hilo: checking sequences' runway");
                next_runway_check = TimestampTzPlusMilliseconds(
                    GetCurrentTimestamp(), Max(hilo_naptime_ms, RUNWAY_CHECK_MS));
            }
            (void)hilo_worker_release_idle_pools(
                now - (TimestampTz)hilo_pool_idle_timeout_ms * 1000, false);
            if (idle_for_long(now) && exit_if_idle())
                break;
            next_maintenance = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), hilo_naptime_ms);
        } else if (hilo_merge_pending() && now >= next_merge) {
            /* A merge pass that read all it may: the next part, once the
             * requests that came meanwhile are served, and no sooner than
             * it took: merging has at most half of the allocator's time,
             * however much of it pushes ask for. */
            TimestampTz start = GetCurrentTimestamp();
            if (!run_merge_transaction())
                merge_failed();
            TimestampTz end = GetCurrentTimestamp();
            next_merge = end + (end - start);
        }

        (void)hilo_worker_report_stats(false);
        TimestampTz wake =
            hilo_merge_pending() ? Min(next_merge, next_maintenance) : next_maintenance;
        long timeout = Max(0L, (long)((wake - GetCurrentTimestamp() + 999) / 1000));
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, timeout,
                        PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
    }
    proc_exit(0);
}

/* The worker's entry point: a C++ exception reaching it becomes a FATAL error. */
HILO_WORKER_MAIN(hilo_allocator_main, allocator_worker_main, "hilo allocator")
