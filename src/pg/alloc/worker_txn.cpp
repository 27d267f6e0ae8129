/*
 * alloc/worker_txn.cpp: the allocator's state (worker.h), the transactions
 * it runs its work in, its commit, and the catalog creation each of
 * them reads first.
 */
#include "worker.h"

extern "C" {
#include "access/xact.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/interrupt.h"
#include "storage/latch.h"
#include "utils/snapmgr.h"
}

AllocatorWorker hilo_worker = {-1}; /* entry_index: none yet */

/* Reads the catalog's current creation; inside a transaction with SPI
 * connected. Pools of other creations of this database are freed. */
bool hilo_worker_read_creation(void)
{
    uint64 before = hilo_worker.current_creation;
    if (!hilo_catalog_creation(&hilo_worker.current_creation)) {
        hilo_worker.catalog_missing = true;
        return false;
    }
    if (hilo_worker.current_creation != before)
        hilo_free_scan_reset(); /* seq_ids of another catalog */
    hilo_pool_forget_other_creations(MyDatabaseId, hilo_worker.current_creation);
    return true;
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

void hilo_worker_sigterm(SIGNAL_ARGS)
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

/* Asks the next maintenance round to merge adjacent free ranges: where
 * this process noted spans (its own returns), or with `all` everywhere. */
void hilo_worker_merge_again(bool all)
{
    LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
    hilo_shared->workers[hilo_worker.entry_index].free_ranges_changed = true;
    hilo_shared->workers[hilo_worker.entry_index].merge_all |= all;
    LWLockRelease(hilo_shared->lock);
}

/* Runs `body` in a transaction of its own; on error, logs it and rolls back. */
bool hilo_worker_run_in_transaction(void (*body)(void *), void *arg, const char *what)
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
