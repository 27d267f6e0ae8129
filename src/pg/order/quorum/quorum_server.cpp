/*
 * order/quorum/quorum_server.cpp: the claim server of ordering 'quorum' (an
 * "ID server"), one background worker in hilo.agent_database.
 *
 * Without it, the caller that finds a sequence's gate free leads the next
 * claim itself (order/quorum/quorum_order.cpp): every backend that ever leads
 * opens its own libpq connections to every node, and at 32 clients that
 * setup, and the acceptor backends it starts on the other nodes, cost more
 * than the claims. With it, callers in its database only queue at the gate
 * and wake it; it runs every claim, over the connections its process keeps
 * (cluster/net/peer_cache.cpp), one gate after the other, with the same code a
 * leading caller runs (gathering the batch, the guess, answering the
 * tickets in order). Callers of other databases, or while no server runs,
 * lead as before; a caller that sees the server go away leads.
 *
 * A claim that fails answers its batch with the error (as a leading caller
 * would; the callers see it, the log only at DEBUG1); the server goes on. A server that exits
 * answers the batch it was claiming for as failed (quorum_order.cpp's exit callback).
 */
#include "quorum_shared.h"

#include "../../cluster/agent/agent.h"

extern "C" {
#include "access/xact.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
}

/* How often an idle server looks at the gates anyway (a lost wake-up). */
#define QUORUM_SERVER_IDLE_MS 1000

static void server_exit(int code, Datum arg)
{
    hilo_quorum_server_attach(NULL);
}

/* One claim for gate `gate`, in a transaction of its own; false if it failed. */
static bool claim_in_transaction(int gate, const HiloSequence *seq, MemoryContext context)
{
    volatile bool ok = true;
    SetCurrentStatementStartTimestamp();
    StartTransactionCommand();
    PushActiveSnapshot(GetTransactionSnapshot());
    PG_TRY();
    {
        hilo_quorum_server_claim(gate, seq);
    }
    PG_CATCH();
    {
        HILO_FORGET_UNWOUND_FRAMES();
        /* The batch has its answer (the error) already. */
        MemoryContextSwitchTo(context);
        ErrorData *edata = CopyErrorData();
        FlushErrorState();
        ereport(DEBUG1,
                (errmsg("hilo claim server: sequence \"%s\": %s", seq->name, edata->message)));
        FreeErrorData(edata);
        ok = false;
    }
    PG_END_TRY();
    if (ok) {
        PopActiveSnapshot();
        CommitTransactionCommand();
    } else {
        AbortCurrentTransaction();
    }
    MemoryContextSwitchTo(context); /* the end of a transaction left TopMemoryContext */
    return ok;
}

static void quorum_server_main(Datum main_arg)
{
    hilo_cluster_worker_connect("hilo claim server", SignalHandlerForShutdownRequest);
    before_shmem_exit(server_exit, 0);
    hilo_quorum_server_attach(MyLatch);

    MemoryContext loop_context =
        AllocSetContextCreate(TopMemoryContext, "hilo claim server", ALLOCSET_DEFAULT_SIZES);
    while (!ShutdownRequestPending) {
        if (ConfigReloadPending) {
            ConfigReloadPending = false;
            ProcessConfigFile(PGC_SIGHUP);
        }
        ResetLatch(MyLatch);
        MemoryContextSwitchTo(loop_context);
        /* Every gate with calls waiting, once; then look again. */
        bool served = false;
        HiloSequence seq;
        for (int gate = 0; (gate = hilo_quorum_server_next_gate(gate, &seq)) >= 0; gate++) {
            pgstat_report_activity(STATE_RUNNING, "hilo claim server: claiming");
            (void)claim_in_transaction(gate, &seq, loop_context);
            served = true;
            CHECK_FOR_INTERRUPTS();
        }
        MemoryContextSwitchTo(TopMemoryContext);
        MemoryContextReset(loop_context);
        if (served)
            continue;
        pgstat_report_activity(STATE_IDLE, NULL);
        bool stats_pending = hilo_worker_report_stats(false) > 0;
        int rc = WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
                           QUORUM_SERVER_IDLE_MS, PG_WAIT_EXTENSION);
        if (stats_pending && (rc & WL_TIMEOUT))
            (void)hilo_worker_report_stats(true);
        CHECK_FOR_INTERRUPTS();
    }
}

/* A C++ exception reaching the entry point becomes a FATAL error. */
HILO_WORKER_MAIN(hilo_quorum_server_main, quorum_server_main, "hilo claim server")

void hilo_quorum_server_init(void)
{
    hilo_register_cluster_worker("hilo_quorum_server_main", "hilo claim server", 1);
}
