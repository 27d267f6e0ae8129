/*
 * cluster/agent/agent_status.cpp: the agent's last outcome per database, in
 * hilo's shared memory, and the view hilo.agent_status (hilo.nodes is in
 * cluster/agent/nodes_view.cpp).
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

/* ---- Shared memory: the last outcome per database ---- */

typedef struct AgentEntry {
    Oid dboid;  /* InvalidOid: free */
    int procno; /* the agent worker's, or -1 */
    TimestampTz last_run_at;
    bool by_worker;
    bool ok;
    bool has_majority;
    int nodes_total;
    int nodes_reachable;
    int64 windows_claimed;   /* over all runs */
    int64 sequences_carried; /* over all runs */
    int64 runs;
    char message[HILO_STATUS_BYTES];
    int nnodes;
    AgentNodeStatus nodes[HILO_MAX_NODES];
    /* Whether each node answered the last pass that reached it (or found
     * it gone): the log says when that changes, once per change. */
    int nknown;
    int32 known_ids[HILO_MAX_NODES];
    bool known_answering[HILO_MAX_NODES];
} AgentEntry;

typedef struct AgentShared {
    LWLock *lock;
    int nentries;
    AgentEntry entries[FLEXIBLE_ARRAY_MEMBER];
} AgentShared;

static AgentShared *agent_shared = NULL;

static Size agent_shared_size(void)
{
    return add_size(offsetof(AgentShared, entries),
                    mul_size(sizeof(AgentEntry), (Size)hilo_worker_table_size()));
}

/* The agent's table, a part of hilo's shared memory (shmem.cpp). */
static void agent_shmem_init(void)
{
    agent_shared->lock = &(GetNamedLWLockTranche("hilo agent"))->lock;
    agent_shared->nentries = hilo_worker_table_size();
    for (int i = 0; i < agent_shared->nentries; i++)
        agent_shared->entries[i].procno = -1;
}

static const HiloShmemPart agent_shmem_part = {
    "hilo agent", 0, agent_shared_size, 1, (void **)&agent_shared, agent_shmem_init};

/* This database's entry, claimed if `create`; NULL if none. Lock held. */
static AgentEntry *entry_locked(bool create)
{
    AgentEntry *free_entry = NULL;
    for (int i = 0; i < agent_shared->nentries; i++) {
        AgentEntry *e = &agent_shared->entries[i];
        if (e->dboid == MyDatabaseId)
            return e;
        if (e->dboid == InvalidOid && free_entry == NULL)
            free_entry = e;
    }
    if (!create || free_entry == NULL)
        return NULL;
    memset(free_entry, 0, sizeof(*free_entry));
    free_entry->dboid = MyDatabaseId;
    free_entry->procno = -1;
    return free_entry;
}

/* The same steps as hilo_allocator_wake, on the agent's own table and lock
 * (cluster/ is above alloc/, and the two tables share no type). */
void hilo_agent_wake(void)
{
    if (agent_shared == NULL)
        return;
    int procno = -1;
    LWLockAcquire(agent_shared->lock, LW_SHARED);
    AgentEntry *e = entry_locked(false);
    if (e != NULL)
        procno = e->procno;
    LWLockRelease(agent_shared->lock);
    hilo_wake_process(procno);
}

bool hilo_agent_node_status(int32 node_id, bool *reachable, char *error, size_t error_size)
{
    bool found = false;
    if (agent_shared == NULL)
        return false;
    LWLockAcquire(agent_shared->lock, LW_SHARED);
    AgentEntry *e = entry_locked(false);
    for (int i = 0; e != NULL && i < e->nnodes; i++)
        if (e->nodes[i].node_id == node_id) {
            *reachable = e->nodes[i].reachable;
            strlcpy(error, e->nodes[i].error, error_size);
            found = true;
        }
    LWLockRelease(agent_shared->lock);
    return found;
}

/* A node's change the log tells: stopped answering (with why), or answers again. */
typedef struct NodeChange {
    bool answering;
    int32 node_id;
    char name[HILO_NODE_NAME_BYTES];
    char error[HILO_NODE_ERROR_BYTES];
} NodeChange;

/*
 * The nodes of a pass whose answering changed since the last pass that
 * looked at them; updates what the entry knows. A node the entry does not
 * know yet counts as answering before: one that never answers since the
 * server started is said once. A pass that looked at no node (an error
 * before it did) changes nothing. Lock held.
 */
static int node_changes_locked(AgentEntry *e, const PassResult *res, NodeChange *changes)
{
    int nchanges = 0;
    if (res->nnodes == 0)
        return 0;
    int32 ids[HILO_MAX_NODES];
    bool answering[HILO_MAX_NODES];
    for (int i = 0; i < res->nnodes; i++) {
        const AgentNodeStatus *n = &res->nodes[i];
        bool before = true;
        for (int k = 0; k < e->nknown; k++)
            if (e->known_ids[k] == n->node_id)
                before = e->known_answering[k];
        ids[i] = n->node_id;
        answering[i] = n->reachable;
        if (before != n->reachable) {
            NodeChange *c = &changes[nchanges++];
            c->answering = n->reachable;
            c->node_id = n->node_id;
            strlcpy(c->name, n->name, sizeof(c->name));
            strlcpy(c->error, n->error[0] != '\0' ? n->error : "no answer", sizeof(c->error));
        }
    }
    e->nknown = res->nnodes;
    memcpy(e->known_ids, ids, sizeof(int32) * res->nnodes);
    memcpy(e->known_answering, answering, sizeof(bool) * res->nnodes);
    return nchanges;
}

/* Publishes a pass's outcome; logs it when it changed (or says there is no
 * majority), and each node that stopped answering or answers again. */
void hilo_agent_publish(PassResult *res, bool by_worker)
{
    if (agent_shared == NULL)
        return;
    bool changed = false;
    NodeChange changes[HILO_MAX_NODES];
    int nchanges = 0;
    LWLockAcquire(agent_shared->lock, LW_EXCLUSIVE);
    AgentEntry *e = entry_locked(true);
    if (e != NULL) {
        nchanges = node_changes_locked(e, res, changes);
        changed = e->ok != res->ok || e->has_majority != res->has_majority;
        e->last_run_at = GetCurrentTimestamp();
        e->by_worker = by_worker;
        e->ok = res->ok;
        e->has_majority = res->has_majority;
        e->nodes_total = res->nodes_total;
        e->nodes_reachable = res->nodes_reachable;
        e->windows_claimed += res->windows_claimed;
        e->sequences_carried += res->sequences_carried;
        e->runs++;
        strlcpy(e->message, res->message.data, sizeof(e->message));
        e->nnodes = res->nnodes;
        memcpy(e->nodes, res->nodes, sizeof(AgentNodeStatus) * res->nnodes);
    }
    LWLockRelease(agent_shared->lock);
    for (int i = 0; i < nchanges; i++) {
        if (changes[i].answering)
            ereport(LOG, (errmsg("hilo agent: node \"%s\" (id %d) answers again", changes[i].name,
                                 changes[i].node_id)));
        else
            ereport(WARNING, (errmsg("hilo agent: node \"%s\" (id %d) stopped answering: %s",
                                     changes[i].name, changes[i].node_id, changes[i].error),
                              errhint("It gets no windows and does not count in quorums until it "
                                      "answers; hilo.nodes shows it.")));
    }
    if (!res->ok || !res->has_majority)
        ereport(changed ? WARNING : DEBUG1, (errmsg("hilo agent: %s", res->message.data)));
    else if (changed || res->windows_claimed > 0 || res->sequences_carried > 0)
        ereport(changed ? LOG : DEBUG1, (errmsg("hilo agent: %s", res->message.data)));
}

/* ---- Views ---- */

HILO_SQL_FUNCTION(hilo_agent_status)
{
    hilo_entry(fcinfo, "hilo.agent_status", NULL, 0, HILO_READS);
    InitMaterializedSRF(fcinfo, 0);
    AgentEntry copy;
    bool found = false;
    LWLockAcquire(agent_shared->lock, LW_SHARED);
    AgentEntry *e = entry_locked(false);
    if (e != NULL && e->runs > 0) {
        memcpy(&copy, e, sizeof(copy));
        found = true;
    }
    LWLockRelease(agent_shared->lock);
    if (!found)
        return (Datum)0;
    Datum values[10] = {TimestampTzGetDatum(copy.last_run_at),
                        CStringGetTextDatum(copy.by_worker ? "worker" : "hilo_agent_run"),
                        BoolGetDatum(copy.ok),
                        BoolGetDatum(copy.has_majority),
                        Int32GetDatum(copy.nodes_total),
                        Int32GetDatum(copy.nodes_reachable),
                        Int64GetDatum(copy.windows_claimed),
                        Int64GetDatum(copy.sequences_carried),
                        Int64GetDatum(copy.runs),
                        CStringGetTextDatum(copy.message)};
    bool nulls[10] = {false};
    hilo_put_row(fcinfo, values, nulls);
    return (Datum)0;
}

void hilo_agent_shmem_init(void)
{
    hilo_shmem_add_part(&agent_shmem_part);
}

void hilo_agent_note_worker(bool running)
{
    if (agent_shared == NULL)
        return;
    LWLockAcquire(agent_shared->lock, LW_EXCLUSIVE);
    AgentEntry *e = entry_locked(running);
    if (running && e != NULL)
        e->procno = MyProcNumber;
    else if (!running && e != NULL && e->procno == MyProcNumber)
        e->procno = -1;
    LWLockRelease(agent_shared->lock);
}
