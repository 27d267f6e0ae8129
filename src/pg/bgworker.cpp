/*
 * bgworker.cpp: the fields every hilo background worker shares.
 */
#include "hilo.h"

extern "C" {
#include "postmaster/bgworker.h"
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
