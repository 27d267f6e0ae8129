/*
 * bgworker.cpp: the fields every hilo background worker shares.
 */
#include "hilo.h"

extern "C" {
#include "access/xact.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "utils/guc.h"
}

/*
 * A backend hands what its transactions did to tables (rows inserted,
 * updated, deleted) to the cumulative statistics when it goes idle; a
 * background worker only when it exits, unless it says so. hilo's workers
 * write hilo.sequences, hilo.windows and hilo.free_ranges all day: kept
 * back, their dead rows were invisible to autovacuum for as long as the
 * worker lived (TAP 088). Between transactions; pgstat itself flushes at most
 * about once a second, unless `idle` (the worker waited with nothing to
 * do). Returns what pgstat_report_stat does: > 0 if counts are still
 * pending.
 */
long hilo_worker_report_stats(bool idle)
{
    if (IsTransactionOrTransactionBlock())
        return 0;
    /* pgstat judges "too soon" by the last transaction's end: a worker
     * idle since then would never be due again. After an idle wait it is. */
    return pgstat_report_stat(idle);
}

void hilo_worker_session_options(void)
{
    SetConfigOption("search_path", HILO_PINNED_SEARCH_PATH, PGC_SUSET, PGC_S_OVERRIDE);
    SetConfigOption("statement_timeout", "0", PGC_SUSET, PGC_S_OVERRIDE);
    SetConfigOption("default_transaction_read_only", "off", PGC_SUSET, PGC_S_OVERRIDE);
    /* Their transactions lock the rows they change and read committed
     * ones, whatever the server's default: under a default of serializable
     * the allocator's reservations failed on rw-dependencies with callers'
     * serializable transactions (84 % of pushes at 8 clients, "could not
     * commit the reservation"; TAP 205). */
    SetConfigOption("default_transaction_isolation", "read committed", PGC_SUSET, PGC_S_OVERRIDE);
    /* Their statements read a handful of rows: never worth compiling. */
    SetConfigOption("jit", "off", PGC_SUSET, PGC_S_OVERRIDE);
}

void hilo_worker_init(BackgroundWorker *worker, const char *function_name, const char *type,
                      const char *database, int restart_time)
{
    memset(worker, 0, sizeof(*worker));
    worker->bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
    worker->bgw_start_time = BgWorkerStart_RecoveryFinished;
    worker->bgw_restart_time = restart_time;
    strlcpy(worker->bgw_library_name, "hilo", BGW_MAXLEN);
    strlcpy(worker->bgw_function_name, function_name, BGW_MAXLEN);
    snprintf(worker->bgw_name, BGW_MAXLEN, "%s for database %s", type, database);
    strlcpy(worker->bgw_type, type, BGW_MAXLEN);
}
