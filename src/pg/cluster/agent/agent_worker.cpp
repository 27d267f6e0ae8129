/*
 * cluster/agent/agent_worker.cpp: the agent as a background worker (every
 * hilo.agent_interval in hilo.agent_database) and as hilo_agent_run().
 */
#include "agent_shared.h"

extern "C" {
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/tuplestore.h"
}

/* ---- hilo_agent_run() ---- */

HILO_SQL_FUNCTION(hilo_agent_run)
{
    /* (no argument: the function as a catalog before 0.5.0 declares it) */
    static const char *const arg_names[] = {"raise_failure"};
    int nargs = Min(PG_NARGS(), 1);
    hilo_entry(fcinfo, "hilo_agent_run()", arg_names, nargs, HILO_WRITES);
    bool raise_failure = nargs > 0 && PG_GETARG_BOOL(0);
    PassResult res;
    memset(&res, 0, sizeof(res));
    initStringInfo(&res.message);
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    PG_TRY();
    {
        hilo_agent_pass(&res);
    }
    PG_FINALLY();
    {
        hilo_peers_close_all();
    }
    PG_END_TRY();
    hilo_catalog_end(&access);
    hilo_agent_publish(&res, false);
    if (raise_failure && !(res.ok && res.has_majority))
        ereport(ERROR, (errcode(res.has_majority ? ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
                                                 : ERRCODE_CONNECTION_FAILURE),
                        errmsg("hilo agent pass failed: %s", res.message.data),
                        errhint("hilo.agent_status and hilo.nodes show the cluster as this "
                                "node sees it.")));
    PG_RETURN_TEXT_P(cstring_to_text(res.message.data));
}

/* ---- The worker ---- */

static bool extension_installed(void)
{
    static const char *sql = "SELECT to_regclass('hilo.cluster') IS NOT NULL";
    hilo_spi_exec(sql, 0, NULL, NULL, NULL, true, 1);
    bool isnull;
    return DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

static void worker_pass(MemoryContext pass_context)
{
    PassResult res;
    MemoryContext old = MemoryContextSwitchTo(pass_context);
    memset(&res, 0, sizeof(res));
    initStringInfo(&res.message);

    SetCurrentStatementStartTimestamp();
    StartTransactionCommand();
    if (SPI_connect() != SPI_OK_CONNECT)
        elog(ERROR, "hilo: SPI_connect failed");
    PushActiveSnapshot(GetTransactionSnapshot());
    pgstat_report_activity(STATE_RUNNING, "hilo agent pass");
    bool installed = extension_installed() && hilo_catalog_lock_first();
    if (installed)
        hilo_agent_pass_guarded(&res);
    SPI_finish();
    PopActiveSnapshot();
    CommitTransactionCommand(); /* leaves TopMemoryContext current */
    MemoryContextSwitchTo(pass_context);
    pgstat_report_activity(STATE_IDLE, NULL);
    if (installed)
        hilo_agent_publish(&res, true);
    MemoryContextSwitchTo(old);
    MemoryContextReset(pass_context);
}

static void worker_exit(int code, Datum arg)
{
    LWLockReleaseAll();
    hilo_agent_note_worker(false);
}

static void agent_worker_main(Datum main_arg)
{
    hilo_cluster_worker_connect("hilo agent", die);

    hilo_agent_note_worker(true);
    before_shmem_exit(worker_exit, 0);

    MemoryContext pass_context =
        AllocSetContextCreate(TopMemoryContext, "hilo agent pass", ALLOCSET_DEFAULT_SIZES);
    TimestampTz last_pass = 0;
    for (;;) {
        CHECK_FOR_INTERRUPTS();
        if (ConfigReloadPending) {
            ConfigReloadPending = false;
            ProcessConfigFile(PGC_SIGHUP);
        }
        /* Woken early (a node ran low) still leaves a breather between
         * passes; SIGTERM (die) sets the latch, which ends it at once: it
         * is a tenth of hilo.agent_interval, up to 2.4 hours, and a fast
         * shutdown used to wait it out (TAP 211, with an interval of 1 h). */
        long min_gap = Max(100L, hilo_agent_interval_ms / 10);
        TimestampTz now = GetCurrentTimestamp();
        if (!TimestampDifferenceExceeds(last_pass, now, (int)min_gap)) {
            long left = min_gap - TimestampDifferenceMilliseconds(last_pass, now);
            (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, Max(left, 1L),
                            PG_WAIT_EXTENSION);
            ResetLatch(MyLatch);
            continue;
        }
        last_pass = now;
        worker_pass(pass_context);
        /* Passes can be an hour apart: what this one did is sent now. */
        (void)hilo_worker_report_stats(true);
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
                        hilo_agent_interval_ms, PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
    }
}

/* The agent's entry point: a C++ exception reaching it becomes a FATAL error. */
HILO_WORKER_MAIN(hilo_agent_main, agent_worker_main, "hilo agent")

/*
 * Registers one of the cluster's static workers (the agent, the lease
 * worker, the claim server) for hilo.agent_database, named "<type> for
 * database <db>"; none when the setting is empty.
 */
void hilo_register_cluster_worker(const char *function_name, const char *type, int restart_seconds)
{
    if (hilo_agent_database == NULL || hilo_agent_database[0] == '\0')
        return;
    BackgroundWorker worker;
    hilo_worker_init(&worker, function_name, type, hilo_agent_database, restart_seconds);
    RegisterBackgroundWorker(&worker);
}

/*
 * The start of every such worker's main: SIGHUP reloads the configuration,
 * SIGTERM runs `on_sigterm` (die, or a handler that sets
 * ShutdownRequestPending); connects to hilo.agent_database with the
 * settings a worker's own statements must not inherit from the server's
 * configuration; `appname` is what pg_stat_activity shows.
 */
void hilo_cluster_worker_connect(const char *appname, pqsigfunc on_sigterm)
{
    pqsignal(SIGHUP, SignalHandlerForConfigReload);
    pqsignal(SIGTERM, on_sigterm);
    BackgroundWorkerUnblockSignals();
    BackgroundWorkerInitializeConnection(hilo_agent_database, NULL, 0);
    hilo_worker_session_options();
    pgstat_report_appname(appname);
}

void hilo_agent_init(void)
{
    hilo_agent_shmem_init();
    hilo_set_agent_wake(hilo_agent_wake);
    hilo_register_cluster_worker("hilo_agent_main", "hilo agent", 5);
}
