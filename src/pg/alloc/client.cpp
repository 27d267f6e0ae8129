/*
 * alloc/client.cpp: the caller's side of a reservation.
 *
 * A take must be durable before its IDs reach the caller, and must survive
 * the caller's rollback, so the caller never reserves anything itself: it
 * writes a request into its slot in shared memory, wakes its database's
 * allocator worker (starting one if needed), and sleeps on its latch until
 * the worker has committed the reservation and written the reply.
 *
 * If the caller gives up while waiting (cancel, timeout, termination), it
 * marks the request abandoned; the worker then puts whatever it reserved
 * for it back on the free list, since none of it reached anybody.
 */
#include "../hilo.h"

extern "C" {
#include "access/xact.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_class.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_namespace.h"
#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/utility.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
}

static bool exit_callback_registered = false;
static void backend_exit_callback(int code, Datum arg);

/* Registers the exit callback that gives back requests and buffers. */
void hilo_register_backend_exit(void)
{
    if (!exit_callback_registered) {
        before_shmem_exit(backend_exit_callback, 0);
        exit_callback_registered = true;
    }
}
static bool xact_callback_registered = false;
static bool wake_allocator_at_commit = false;
static bool free_ranges_changed_at_commit = false;

/* Sequences whose pools must learn, at commit, of a push or of a drop or
 * settings change (which makes their buffers and pool stale). */
#define HILO_MAX_NOTED 64
static int32 pushed_at_commit[HILO_MAX_NOTED];
static uint64 pushed_incarnation_at_commit[HILO_MAX_NOTED];
static int npushed_at_commit = 0;
static int32 invalidated_at_commit[HILO_MAX_NOTED];
static int ninvalidated_at_commit = 0;
static bool invalidate_all_at_commit = false; /* more than fit in the list */

/* True if the allocator of `dboid` with this incarnation still runs (or
 * starts). Caller holds hilo_shared->lock. */
static bool worker_alive_locked(Oid dboid, uint64 incarnation)
{
    for (int i = 0; i < hilo_shared->max_databases; i++) {
        HiloWorkerEntry *e = &hilo_shared->workers[i];
        if (e->state != HILO_WORKER_NONE && e->dboid == dboid && e->incarnation == incarnation)
            return true;
    }
    return false;
}

/* Gives up this backend's outstanding request, if any. Never raises. */
static void abandon_my_request(void)
{
    if (hilo_shared == NULL || MyProc == NULL)
        return;
    HiloRequest *req = &hilo_shared->requests[MyProc->pgprocno];
    bool wake = false;

    LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
    switch (req->state) {
        case HILO_REQ_SUBMITTED:
            /* A pending next-chunk request means the worker holds the rest. */
            if (req->kind == HILO_REQUEST_NEXT_CHUNK) {
                req->state = HILO_REQ_ABANDONED;
                wake = true;
            } else {
                req->state = HILO_REQ_IDLE;
            }
            break;
        case HILO_REQ_RUNNING:
        case HILO_REQ_READY:
            req->state = HILO_REQ_ABANDONED;
            wake = true;
            break;
        default:
            break;
    }
    /* An allocator that has gone will never clear the slot: what it had
     * reserved for it went with it (skipped, never handed out twice). */
    if (req->state == HILO_REQ_ABANDONED &&
        !worker_alive_locked(req->dboid, req->worker_incarnation)) {
        req->state = HILO_REQ_IDLE;
        wake = false;
    }
    LWLockRelease(hilo_shared->lock);
    if (wake)
        hilo_allocator_wake();
}

static void backend_exit_callback(int code, Datum arg)
{
    HILO_FORGET_UNWOUND_FRAMES();
    LWLockReleaseAll(); /* a FATAL error may have struck while we held it */
    abandon_my_request();
    hilo_buffers_release_all(); /* unused IDs go back to their pools */
}

/* Tells this database's allocator to merge free ranges at its next round. */
static void mark_free_ranges_changed(void)
{
    LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
    HiloWorkerEntry *e = hilo_find_worker_locked(MyDatabaseId);
    if (e != NULL)
        e->free_ranges_changed = true;
    LWLockRelease(hilo_shared->lock);
}

/* Makes the noted pools stale. Only ever makes a gap, so it is as safe
 * for a transaction that then fails to commit as for one that commits. */
static void invalidate_noted_pools(void)
{
    for (int i = 0; i < ninvalidated_at_commit; i++)
        hilo_pool_invalidate(MyDatabaseId, invalidated_at_commit[i]);
    if (invalidate_all_at_commit)
        hilo_pool_invalidate(MyDatabaseId, -1);
}

static void forget_noted(void)
{
    wake_allocator_at_commit = free_ranges_changed_at_commit = false;
    npushed_at_commit = ninvalidated_at_commit = 0;
    invalidate_all_at_commit = false;
}

/*
 * Drops and settings changes make pools stale before the transaction can
 * be seen to commit (PRE_COMMIT, PRE_PREPARE), so that no session serves a
 * buffer of the old sequence once the drop is visible, and again at COMMIT
 * for a pool attached in between. A prepared transaction commits in
 * whichever session runs COMMIT PREPARED, where no callback of this one
 * runs: its invalidation is the one made at PRE_PREPARE (while it stays
 * prepared, its row lock keeps the allocator from refilling the sequence),
 * and the relcache invalidation of hilo.sequences that hilo_drop and
 * hilo_alter register, which PostgreSQL carries through PREPARE and sends
 * at COMMIT PREPARED: it makes every session look its cached sequences up
 * again. Pushes need nothing at commit for correctness; a prepared push is
 * seen by the next refill, which takes the free list first.
 */
static void xact_callback(XactEvent event, void *arg)
{
    HILO_FORGET_UNWOUND_FRAMES();
    switch (event) {
        case XACT_EVENT_PRE_COMMIT:
        case XACT_EVENT_PARALLEL_PRE_COMMIT:
        case XACT_EVENT_PRE_PREPARE:
            invalidate_noted_pools();
            break;
        case XACT_EVENT_COMMIT:
        case XACT_EVENT_PARALLEL_COMMIT:
            invalidate_noted_pools();
            for (int i = 0; i < npushed_at_commit; i++)
                hilo_pool_note_push(MyDatabaseId, pushed_incarnation_at_commit[i],
                                    pushed_at_commit[i]);
            if (free_ranges_changed_at_commit)
                mark_free_ranges_changed();
            if (wake_allocator_at_commit)
                hilo_allocator_wake();
            forget_noted();
            break;
        case XACT_EVENT_PREPARE:
            /* Committed (or not) elsewhere; this session is done with it. */
            forget_noted();
            break;
        case XACT_EVENT_ABORT:
        case XACT_EVENT_PARALLEL_ABORT:
            forget_noted();
            break;
        default:
            break;
    }
}

static void register_xact_callback(void)
{
    if (!xact_callback_registered) {
        RegisterXactCallback(xact_callback, NULL);
        xact_callback_registered = true;
    }
}

void hilo_note_push_at_commit(uint64 incarnation, int32 seq_id)
{
    register_xact_callback();
    for (int i = 0; i < npushed_at_commit; i++)
        if (pushed_at_commit[i] == seq_id && pushed_incarnation_at_commit[i] == incarnation)
            return;
    /* Past the list's end the pool just learns of it at its next refill. */
    if (npushed_at_commit < HILO_MAX_NOTED) {
        pushed_incarnation_at_commit[npushed_at_commit] = incarnation;
        pushed_at_commit[npushed_at_commit++] = seq_id;
    }
}

void hilo_invalidate_at_commit(int32 seq_id)
{
    register_xact_callback();
    for (int i = 0; i < ninvalidated_at_commit; i++)
        if (invalidated_at_commit[i] == seq_id)
            return;
    if (ninvalidated_at_commit < HILO_MAX_NOTED)
        invalidated_at_commit[ninvalidated_at_commit++] = seq_id;
    else
        invalidate_all_at_commit = true;
}

void hilo_allocator_wake_at_commit(bool free_ranges_changed)
{
    register_xact_callback();
    wake_allocator_at_commit = true;

    free_ranges_changed_at_commit |= free_ranges_changed;
}

void hilo_allocator_wake(void)
{
    if (hilo_shared == NULL)
        return;
    int procno = -1;
    LWLockAcquire(hilo_shared->lock, LW_SHARED);
    HiloWorkerEntry *e = hilo_find_worker_locked(MyDatabaseId);
    if (e != NULL && e->state == HILO_WORKER_RUNNING)
        procno = e->procno;
    LWLockRelease(hilo_shared->lock);
    if (procno >= 0)
        SetLatch(&GetPGProcByNumber(procno)->procLatch);
}

/* How long a caller waits for an idle allocator it asked to exit. */
#define HILO_EVICT_WAIT_MS 10000
/* How long a caller retries registering its worker after one exited (the
 * postmaster frees the exited worker's slot a moment later). */
#define HILO_REGISTER_RETRY_MS 5000

/* Whether a request of `dboid` is in progress or a result waits to be
 * collected. Lock held. */
static bool database_has_requests_locked(Oid dboid)
{
    for (int s = 0; s < hilo_shared->num_requests; s++) {
        HiloRequest *req = &hilo_shared->requests[s];
        if (req->dboid == dboid && req->state != HILO_REQ_IDLE)
            return true;
    }
    return false;
}

static void sleep_a_moment(void)
{
    (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 10,
                    PG_WAIT_EXTENSION);
    ResetLatch(MyLatch);
    CHECK_FOR_INTERRUPTS();
}

/*
 * Asks the least recently active idle allocator of another database to
 * exit (it gives its pools back to its free list first) and waits until it
 * has. Idle: no request in progress and no session holding IDs of its
 * pools; the allocator checks again itself and may refuse. Returns false
 * if no allocator is idle. `refused` collects databases that refused.
 */
static bool evict_idle_allocator(Oid *refused, int *nrefused)
{
    for (;;) {
        int victim = -1;
        TimestampTz victim_active = 0;
        Oid *candidates = (Oid *)palloc(sizeof(Oid) * hilo_shared->max_databases);
        int ncandidates = 0;

        /* Databases whose sessions hold IDs are not idle (read without the lock). */
        LWLockAcquire(hilo_shared->lock, LW_SHARED);
        for (int i = 0; i < hilo_shared->max_databases; i++) {
            HiloWorkerEntry *e = &hilo_shared->workers[i];
            if (e->state == HILO_WORKER_RUNNING && e->dboid != MyDatabaseId)
                candidates[ncandidates++] = e->dboid;
        }
        LWLockRelease(hilo_shared->lock);
        for (int c = 0; c < ncandidates; c++) {
            bool skip = hilo_pool_database_pinned(candidates[c]);
            for (int r = 0; r < *nrefused && !skip; r++)
                skip = refused[r] == candidates[c];
            if (skip)
                candidates[c] = InvalidOid;
        }

        LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
        for (int i = 0; i < hilo_shared->max_databases; i++) {
            HiloWorkerEntry *e = &hilo_shared->workers[i];
            if (e->state != HILO_WORKER_RUNNING || e->dboid == MyDatabaseId || e->exit_requested)
                continue;
            bool candidate = false;
            for (int c = 0; c < ncandidates && !candidate; c++)
                candidate = candidates[c] == e->dboid;
            if (!candidate || database_has_requests_locked(e->dboid))
                continue;
            if (victim < 0 || e->last_active < victim_active) {
                victim = i;
                victim_active = e->last_active;
            }
        }
        int procno = -1;
        uint64 incarnation = 0;
        Oid victim_db = InvalidOid;
        if (victim >= 0) {
            HiloWorkerEntry *e = &hilo_shared->workers[victim];
            e->exit_requested = true;
            e->exit_refused = false;
            procno = e->procno;
            incarnation = e->incarnation;
            victim_db = e->dboid;
        }
        LWLockRelease(hilo_shared->lock);
        pfree(candidates);
        if (victim < 0)
            return false;

        elog(DEBUG1, "hilo: asking the idle allocator of database %u to exit", victim_db);
        SetLatch(&GetPGProcByNumber(procno)->procLatch);
        for (int waited = 0;; waited += 10) {
            LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
            HiloWorkerEntry *e = &hilo_shared->workers[victim];
            bool gone = e->state == HILO_WORKER_NONE || e->incarnation != incarnation;
            bool said_no = !gone && e->exit_refused;
            if (!gone && !said_no && waited >= HILO_EVICT_WAIT_MS) {
                e->exit_requested = false; /* too busy to answer: count it as a no */
                said_no = true;
            }
            LWLockRelease(hilo_shared->lock);
            if (gone)
                return true;
            if (said_no) {
                refused[(*nrefused)++] = victim_db;
                break;
            }
            sleep_a_moment();
        }
    }
}

static void raise_no_allocator(bool by_setting, int running) pg_attribute_noreturn();
static void raise_no_allocator(bool by_setting, int running)
{
    if (by_setting)
        ereport(ERROR,
                (errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
                 errmsg("too many databases use hilo at once"),
                 errdetail("hilo.max_databases is %d, and the allocators of all %d are in use "
                           "(a session holds IDs of their pools, or a reservation is in "
                           "progress).",
                           hilo_max_databases, running),
                 errhint("Retry when one is idle, or raise hilo.max_databases and restart the "
                         "server.")));
    ereport(ERROR,
            (errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
             errmsg("could not start the hilo allocator for this database"),
             errdetail("No background worker slot is free: max_worker_processes is %d, and the "
                       "%d hilo allocators running are all in use by their databases (a session "
                       "holds IDs of their pools, or a reservation is in progress).",
                       max_worker_processes, running),
             errhint("Raise max_worker_processes (now %d), or retry when a database is idle.",
                     max_worker_processes)));
}

/*
 * Makes sure this database has an allocator, starting one if there is none.
 * Returns its entry index and incarnation, so a waiter can tell when the
 * worker it counted on has gone. When hilo.max_databases is reached or no
 * background worker slot is free, the allocator of the least recently
 * active idle database exits to make room; if none is idle, 53400.
 */
static int ensure_worker(uint64 *incarnation)
{
    Oid *refused = (Oid *)palloc(sizeof(Oid) * (hilo_shared->max_databases + 1));
    int nrefused = 0;
    TimestampTz retry_register_until = 0;

    for (;;) {
        int index = -1, running = 0;
        bool exiting = false;

        LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
        HiloWorkerEntry *e = hilo_find_worker_locked(MyDatabaseId);
        if (e != NULL && e->state != HILO_WORKER_EXITING) {
            *incarnation = e->incarnation;
            index = (int)(e - hilo_shared->workers);
            LWLockRelease(hilo_shared->lock);
            pfree(refused);
            return index;
        }
        exiting = e != NULL;
        for (int i = 0; i < hilo_shared->max_databases; i++) {
            if (hilo_shared->workers[i].state != HILO_WORKER_NONE)
                running++;
            else if (index < 0)
                index = i;
        }
        uint64 my_incarnation = 0;
        if (!exiting && index >= 0) {
            e = &hilo_shared->workers[index];
            my_incarnation = ++hilo_shared->last_incarnation;
            e->dboid = MyDatabaseId;
            e->state = HILO_WORKER_STARTING;
            e->pid = 0;
            e->procno = -1;
            e->incarnation = my_incarnation;
            e->stop_requested = false;
            e->exit_requested = false;
            e->exit_refused = false;
            e->release_requested = false;
            e->last_active = GetCurrentTimestamp();
        }
        LWLockRelease(hilo_shared->lock);

        if (exiting) {
            /* Our own allocator is giving its pools back; a new one follows. */
            sleep_a_moment();
            continue;
        }
        if (index < 0) {
            /* hilo.max_databases (the table's size) is reached. */
            if (!evict_idle_allocator(refused, &nrefused))
                raise_no_allocator(hilo_max_databases > 0, running);
            continue;
        }

        BackgroundWorker worker;
        memset(&worker, 0, sizeof(worker));
        worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
        worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
        worker.bgw_restart_time = BGW_NEVER_RESTART;
        strlcpy(worker.bgw_library_name, "hilo", BGW_MAXLEN);
        strlcpy(worker.bgw_function_name, "hilo_allocator_main", BGW_MAXLEN);
        snprintf(worker.bgw_name, BGW_MAXLEN, "hilo allocator for database %u", MyDatabaseId);
        strlcpy(worker.bgw_type, "hilo allocator", BGW_MAXLEN);
        worker.bgw_main_arg = ObjectIdGetDatum(MyDatabaseId);
        memcpy(worker.bgw_extra, &index, sizeof(index));
        memcpy(worker.bgw_extra + sizeof(index), &my_incarnation, sizeof(my_incarnation));
        worker.bgw_notify_pid = MyProcPid;

        BackgroundWorkerHandle *handle;
        if (!RegisterDynamicBackgroundWorker(&worker, &handle)) {
            LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
            if (e->incarnation == my_incarnation)
                e->state = HILO_WORKER_NONE;
            LWLockRelease(hilo_shared->lock);
            /* An allocator that just exited frees its slot a moment later. */
            if (retry_register_until != 0 && GetCurrentTimestamp() < retry_register_until) {
                sleep_a_moment();
                continue;
            }
            if (!evict_idle_allocator(refused, &nrefused))
                raise_no_allocator(false, running);
            retry_register_until =
                TimestampTzPlusMilliseconds(GetCurrentTimestamp(), HILO_REGISTER_RETRY_MS);
            continue;
        }
        pid_t pid;
        if (WaitForBackgroundWorkerStartup(handle, &pid) != BGWH_STARTED) {
            LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
            if (e->incarnation == my_incarnation)
                e->state = HILO_WORKER_NONE;
            LWLockRelease(hilo_shared->lock);
            ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                            errmsg("the hilo allocator for this database did not start"),
                            errhint("See the server log.")));
        }
        pfree(refused);
        *incarnation = my_incarnation;
        return index;
    }
}

static void wake_worker_entry(int index)
{
    int procno = -1;
    LWLockAcquire(hilo_shared->lock, LW_SHARED);
    HiloWorkerEntry *e = &hilo_shared->workers[index];
    if (e->state == HILO_WORKER_RUNNING)
        procno = e->procno;
    LWLockRelease(hilo_shared->lock);
    if (procno >= 0)
        SetLatch(&GetPGProcByNumber(procno)->procLatch);
}

/* Waits until the slot holds a reply. Restarts a worker that vanished
 * before it saw the request; fails if it vanished while working on it. */
static void wait_for_reply(HiloRequest *req, int *worker_index, uint64 *incarnation)
{
    for (;;) {
        LWLockAcquire(hilo_shared->lock, LW_SHARED);
        HiloRequestState state = req->state;
        HiloWorkerEntry *e = &hilo_shared->workers[*worker_index];
        bool worker_gone = e->state == HILO_WORKER_NONE || e->incarnation != *incarnation;
        LWLockRelease(hilo_shared->lock);

        if (state == HILO_REQ_READY)
            return;
        if (worker_gone) {
            if (state == HILO_REQ_SUBMITTED && req->kind != HILO_REQUEST_NEXT_CHUNK) {
                *worker_index = ensure_worker(incarnation);
                LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
                req->worker_incarnation = *incarnation;
                LWLockRelease(hilo_shared->lock);
                wake_worker_entry(*worker_index);
                continue;
            }
            LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
            req->state = HILO_REQ_IDLE;
            LWLockRelease(hilo_shared->lock);
            ereport(ERROR, (errcode(ERRCODE_OPERATOR_INTERVENTION),
                            errmsg("the hilo allocator exited before confirming a reservation "
                                   "for sequence \"%s\"",
                                   req->seq_name),
                            errdetail("No IDs were handed out; whatever it had reserved is "
                                      "skipped, never handed out twice."),
                            errhint("Retry the call.")));
        }
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 100,
                        PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
        CHECK_FOR_INTERRUPTS();
    }
}

/*
 * A slot left abandoned (by this backend, or by the process that had this
 * process slot before, in any database) is cleared by the allocator that
 * owns it; wait for that. If that allocator has gone, nobody ever will:
 * what it held for the slot went with it, so the slot is simply idle.
 */
static void wait_until_slot_idle(HiloRequest *req)
{
    for (;;) {
        int procno = -1;
        LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
        if (req->state != HILO_REQ_IDLE &&
            !worker_alive_locked(req->dboid, req->worker_incarnation))
            req->state = HILO_REQ_IDLE;
        HiloRequestState state = req->state;
        if (state != HILO_REQ_IDLE) {
            for (int i = 0; i < hilo_shared->max_databases; i++) {
                HiloWorkerEntry *e = &hilo_shared->workers[i];
                if (e->state == HILO_WORKER_RUNNING && e->dboid == req->dboid &&
                    e->incarnation == req->worker_incarnation)
                    procno = e->procno;
            }
        }
        LWLockRelease(hilo_shared->lock);
        if (state == HILO_REQ_IDLE)
            return;
        if (procno >= 0)
            SetLatch(&GetPGProcByNumber(procno)->procLatch);
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 10,
                        PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
        CHECK_FOR_INTERRUPTS();
    }
}

/* What the worker said, copied out of shared memory before raising it. */
typedef struct HiloReplyError {
    int sqlerrcode;
    char *message;
    char *detail;
    char *hint;
} HiloReplyError;

static void raise_reply_error(const HiloReplyError *err) pg_attribute_noreturn();
static void raise_reply_error(const HiloReplyError *err)
{
    ereport(ERROR, (errcode(err->sqlerrcode), errmsg_internal("%s", err->message),
                    err->detail[0] ? errdetail_internal("%s", err->detail) : 0,
                    err->hint[0] ? errhint("%s", err->hint) : 0));
}

typedef struct HiloReply {
    HiloRange *ranges;
    uint32 count;
    HiloReplyError err;
} HiloReply;

/*
 * Collects the reply to the submitted request, chunk by chunk. Kept out of
 * line so that none of its locals live in the frame that sets the longjmp
 * target in hilo_allocator_take.
 */
static pg_noinline void receive_reply(HiloRequest *req, int worker_index, uint64 incarnation,
                                      HiloReply *reply)
{
    uint32 capacity = HILO_REPLY_RANGES;
    reply->ranges = (HiloRange *)palloc(sizeof(HiloRange) * capacity);
    reply->count = 0;
    reply->err.sqlerrcode = 0;

    for (;;) {
        wait_for_reply(req, &worker_index, &incarnation);
        /* The worker does not touch a READY slot; no lock needed to read it. */
        if (req->sqlerrcode != 0) {
            reply->err.sqlerrcode = req->sqlerrcode;
            reply->err.message = pstrdup(req->message);
            reply->err.detail = pstrdup(req->detail);
            reply->err.hint = pstrdup(req->hint);
            LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
            req->state = HILO_REQ_IDLE;
            LWLockRelease(hilo_shared->lock);
            return;
        }
        if (reply->count + req->nranges > capacity) {
            capacity = Max(capacity * 2, reply->count + req->nranges);
            reply->ranges = (HiloRange *)repalloc_huge(reply->ranges, sizeof(HiloRange) * capacity);
        }
        memcpy(reply->ranges + reply->count, req->ranges, sizeof(HiloRange) * req->nranges);
        reply->count += req->nranges;

        LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
        bool done = req->last_chunk;
        if (done) {
            req->state = HILO_REQ_IDLE;
        } else {
            req->kind = HILO_REQUEST_NEXT_CHUNK;
            req->state = HILO_REQ_SUBMITTED;
        }
        LWLockRelease(hilo_shared->lock);
        if (done)
            return;
        wake_worker_entry(worker_index);
    }
}

/* Writes a request into this backend's slot, wakes the allocator and
 * collects the reply; abandons the request if interrupted. */
static void submit_and_wait(HiloRequestKind kind, const HiloSequence *seq, int64 n, bool partial,
                            int pool_index, bool fresh_only, HiloReply *reply,
                            bool exhaustion_is_an_answer)
{
    hilo_register_backend_exit();

    uint64 incarnation;
    int worker_index = ensure_worker(&incarnation);
    HiloRequest *req = hilo_my_request();
    wait_until_slot_idle(req);

    LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
    req->kind = kind;
    req->request_id++;
    req->dboid = MyDatabaseId;
    req->worker_incarnation = incarnation;
    req->seq_id = seq->seq_id;
    req->incarnation = seq->incarnation;
    strlcpy(req->seq_name, seq->name, sizeof(req->seq_name));
    req->n = n;
    req->partial = partial;
    req->pool_index = pool_index;
    req->fresh_only = fresh_only;
    req->sqlerrcode = 0;
    req->nranges = 0;
    req->state = HILO_REQ_SUBMITTED;
    LWLockRelease(hilo_shared->lock);
    wake_worker_entry(worker_index);

    PG_TRY();
    {
        receive_reply(req, worker_index, incarnation, reply);
    }
    PG_CATCH();
    {
        HILO_FORGET_UNWOUND_FRAMES();
        abandon_my_request();
        PG_RE_THROW();
    }
    PG_END_TRY();

    if (reply->err.sqlerrcode == ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED &&
        exhaustion_is_an_answer)
        return;
    if (reply->err.sqlerrcode != 0)
        raise_reply_error(&reply->err);
}

HiloRange *hilo_allocator_take(const HiloSequence *seq, int64 n, bool partial, uint32 *nranges)
{
    HiloReply reply;
    submit_and_wait(HILO_REQUEST_TAKE, seq, n, partial, -1, false, &reply, false);
    *nranges = reply.count;
    return reply.ranges;
}

bool hilo_allocator_refill(const HiloSequence *seq, int pool_index, uint64 min_ids, bool fresh_only)
{
    HiloReply reply;
    submit_and_wait(HILO_REQUEST_REFILL, seq, (int64)Min(min_ids, (uint64)PG_INT64_MAX), false,
                    pool_index, fresh_only, &reply, true);
    pfree(reply.ranges);
    return reply.err.sqlerrcode == 0;
}

void hilo_allocator_stop_for_database(Oid dboid)
{
    if (hilo_shared == NULL || !OidIsValid(dboid))
        return;

    int procno = -1;
    uint64 incarnation = 0;
    LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
    HiloWorkerEntry *e = hilo_find_worker_locked(dboid);
    if (e != NULL) {
        e->stop_requested = true;
        procno = e->state == HILO_WORKER_RUNNING ? e->procno : -1;
        incarnation = e->incarnation;
    }
    LWLockRelease(hilo_shared->lock);
    if (e == NULL)
        return;
    if (procno >= 0)
        SetLatch(&GetPGProcByNumber(procno)->procLatch);

    /* Wait up to 10 s, like DROP DATABASE waits for other sessions to go. */
    for (int i = 0; i < 1000; i++) {
        LWLockAcquire(hilo_shared->lock, LW_SHARED);
        bool gone = e->state == HILO_WORKER_NONE || e->incarnation != incarnation;
        LWLockRelease(hilo_shared->lock);
        if (gone)
            return;
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 10,
                        PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
        CHECK_FOR_INTERRUPTS();
    }
}

/* The catalog itself is being dropped: every pool of this database
 * becomes stale at commit or prepare (commands/database_commands.cpp). */
void hilo_invalidate_all_at_commit(void)
{
    register_xact_callback();
    invalidate_all_at_commit = true;
}
