/*
 * cluster/agent/agent_shared.h: what the agent's files share (agent.cpp the
 * pass, agent_status.cpp its last outcome in shared memory and the views,
 * agent_worker.cpp the background worker and hilo_agent_run(),
 * window_map.cpp the window map).
 */
#ifndef HILO_PG_CLUSTER_AGENT_SHARED_H
#define HILO_PG_CLUSTER_AGENT_SHARED_H

#include "../carry/carry.h"
#include "../membership/membership.h"
#include "agent.h"

/* Copies every usable node's windows into every usable node's window map
 * (cluster/agent/window_map.cpp), for hilo_node_of. */
extern void hilo_agent_map_windows(PassState *st, PassResult *res);

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

#endif /* HILO_PG_CLUSTER_AGENT_SHARED_H */
