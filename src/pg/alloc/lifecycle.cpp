/*
 * alloc/lifecycle.cpp: starting a database's allocator when a caller needs
 * it (registering a dynamic background worker, asking an idle allocator of
 * another database to make room), waking it, and stopping it before a
 * database-level command.
 */
#include "internal.h"

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

/* How long a caller waits for an idle allocator it asked to exit. */
#define HILO_EVICT_WAIT_MS 10000
/* How long a caller retries registering its worker after one exited (the
 * postmaster frees the exited worker's slot a moment later). */
#define HILO_REGISTER_RETRY_MS 5000

/* Wakes this database's allocator, if it runs. */
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
    hilo_wake_process(procno);
}

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
        uint64 serial = 0;
        Oid victim_db = InvalidOid;
        if (victim >= 0) {
            HiloWorkerEntry *e = &hilo_shared->workers[victim];
            e->exit_requested = true;
            e->exit_refused = false;
            procno = e->procno;
            serial = e->serial;
            victim_db = e->dboid;
        }
        LWLockRelease(hilo_shared->lock);
        pfree(candidates);
        if (victim < 0)
            return false;

        elog(DEBUG1, "hilo: asking the idle allocator of database %u to exit", victim_db);
        hilo_wake_process(procno);
        for (int waited = 0;; waited += 10) {
            LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
            HiloWorkerEntry *e = &hilo_shared->workers[victim];
            bool gone = e->state == HILO_WORKER_NONE || e->serial != serial;
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
 * Returns its entry index and serial, so a waiter can tell when the
 * worker it counted on has gone. When hilo.max_databases is reached or no
 * background worker slot is free, the allocator of the least recently
 * active idle database exits to make room; if none is idle, 53400.
 */
int hilo_allocator_ensure_worker(uint64 *serial)
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
            *serial = e->serial;
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
        uint64 my_serial = 0;
        if (!exiting && index >= 0) {
            e = &hilo_shared->workers[index];
            my_serial = ++hilo_shared->last_worker_serial;
            e->dboid = MyDatabaseId;
            e->state = HILO_WORKER_STARTING;
            e->pid = 0;
            e->procno = -1;
            e->serial = my_serial;
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

        char database[16];
        snprintf(database, sizeof(database), "%u", MyDatabaseId);
        BackgroundWorker worker;
        hilo_worker_init(&worker, "hilo_allocator_main", "hilo allocator", database,
                         BGW_NEVER_RESTART);
        worker.bgw_main_arg = ObjectIdGetDatum(MyDatabaseId);
        memcpy(worker.bgw_extra, &index, sizeof(index));
        memcpy(worker.bgw_extra + sizeof(index), &my_serial, sizeof(my_serial));
        worker.bgw_notify_pid = MyProcPid;

        BackgroundWorkerHandle *handle;
        if (!RegisterDynamicBackgroundWorker(&worker, &handle)) {
            LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
            if (e->serial == my_serial)
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
            if (e->serial == my_serial)
                e->state = HILO_WORKER_NONE;
            LWLockRelease(hilo_shared->lock);
            ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                            errmsg("the hilo allocator for this database did not start"),
                            errhint("See the server log.")));
        }
        pfree(refused);
        *serial = my_serial;
        return index;
    }
}

void hilo_allocator_wake_entry(int index)
{
    int procno = -1;
    LWLockAcquire(hilo_shared->lock, LW_SHARED);
    HiloWorkerEntry *e = &hilo_shared->workers[index];
    if (e->state == HILO_WORKER_RUNNING)
        procno = e->procno;
    LWLockRelease(hilo_shared->lock);
    hilo_wake_process(procno);
}

void hilo_allocator_stop_for_database(Oid dboid)
{
    if (hilo_shared == NULL || !OidIsValid(dboid))
        return;

    int procno = -1;
    uint64 serial = 0;
    LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
    HiloWorkerEntry *e = hilo_find_worker_locked(dboid);
    if (e != NULL) {
        e->stop_requested = true;
        procno = e->state == HILO_WORKER_RUNNING ? e->procno : -1;
        serial = e->serial;
    }
    LWLockRelease(hilo_shared->lock);
    if (e == NULL)
        return;
    hilo_wake_process(procno);

    /* Wait up to 10 s, like DROP DATABASE waits for other sessions to go. */
    for (int i = 0; i < 1000; i++) {
        LWLockAcquire(hilo_shared->lock, LW_SHARED);
        bool gone = e->state == HILO_WORKER_NONE || e->serial != serial;
        LWLockRelease(hilo_shared->lock);
        if (gone)
            return;
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 10,
                        PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
        CHECK_FOR_INTERRUPTS();
    }
}
