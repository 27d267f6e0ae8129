/*
 * cluster/agent.h: what the agent's files share (cluster/agent.cpp the pass,
 * agent_status.cpp its last outcome in shared memory and the views,
 * agent_worker.cpp the background worker and hilo_agent_run()).
 */
#ifndef HILO_PG_CLUSTER_AGENT_H
#define HILO_PG_CLUSTER_AGENT_H

#include "cluster.h"

extern "C" {
#include "lib/stringinfo.h"
}

#define HILO_STATUS_BYTES 1024
#define HILO_NODE_ERROR_BYTES 256

typedef struct AgentNodeStatus {
    int32 node_id;
    bool reachable;
    char error[HILO_NODE_ERROR_BYTES];
} AgentNodeStatus;

typedef struct PassResult {
    bool in_cluster;
    bool ok;
    bool has_majority;
    int nodes_total;
    int nodes_reachable;
    int64 windows_claimed;
    int64 sequences_carried;
    StringInfoData message;
    int nnodes;
    AgentNodeStatus nodes[HILO_MAX_NODES];
} PassResult;

/* Appends "; " and a formatted note to the pass's message. */
extern void hilo_agent_note(PassResult *res, const char *fmt, ...) pg_attribute_printf(2, 3);
/* One pass (the steps in agent.cpp's header comment). Needs SPI. */
extern void hilo_agent_pass(PassResult *res);
/* A pass in a subtransaction: an error becomes the pass's outcome. */
extern void hilo_agent_pass_guarded(PassResult *res);
/* Publishes a pass's outcome (agent_status.cpp); logs it when it changed. */
extern void hilo_agent_publish(PassResult *res, bool by_worker);
/* Records this process as its database's agent worker, or that it exits. */
extern void hilo_agent_note_worker(bool running);
/* Sets up the agent's table in shared memory (agent_status.cpp). */
extern void hilo_agent_shmem_init(void);

#endif /* HILO_PG_CLUSTER_AGENT_H */
