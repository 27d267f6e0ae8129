/*
 * cluster/agent/agent.h: the agent, which keeps every node of a cluster
 * supplied (agent.cpp the pass, agent_worker.cpp the background worker,
 * agent_status.cpp its last outcome in shared memory and the views), and
 * where the allocator meets the cluster (window_claim.cpp). What the
 * files of the room share is agent_shared.h. Above cluster/membership,
 * cluster/carry, cluster/register, cluster/net and cluster/node.
 */
#ifndef HILO_PG_CLUSTER_AGENT_H
#define HILO_PG_CLUSTER_AGENT_H

#include "../node/node.h"

/* ---- The agent ---- */

/* Installs the agent's shared memory and registers its background worker. */
extern void hilo_agent_init(void);
/* Registers a static worker for hilo.agent_database (agent, lease worker,
 * claim server). */
extern void hilo_register_cluster_worker(const char *function_name, const char *type,
                                         int restart_seconds);
/* The start of such a worker's main: signals, the connection to
 * hilo.agent_database, its own settings (agent_worker.cpp). */
extern void hilo_cluster_worker_connect(const char *appname, pqsigfunc on_sigterm);

extern "C" PGDLLEXPORT void hilo_agent_main(Datum main_arg);
/* Wakes this database's agent worker, if one runs. */
extern void hilo_agent_wake(void);

/* Per node, what the last agent run in this database saw (for hilo.nodes). */
extern bool hilo_agent_node_status(int32 node_id, bool *reachable, char *error, size_t error_size);

/* ---- Allocator integration (window_claim.cpp; src/pg/order/order.cpp
 * installs these as the allocator's window source, hilo.h) ---- */

/* True if this node is a member of a hilo cluster. */
extern bool hilo_cluster_active(void);
/* This node's id in its cluster, -1 in none; refuses on a node its
 * configuration does not list. Needs SPI. */
extern int32 hilo_cluster_local_node_id(void);

/* Whether this node may claim in its slice of node_bits sequence `seq_id`:
 * true on a node in no cluster, or once a majority of the nodes held the
 * name with the same node_bits. Else, for a top-up, false; with `raise`
 * (a take) it carries its copy, reads every node's node_bits, and agrees or
 * raises an error (55000: other node_bits on some nodes; 08006: too few
 * answered). Needs SPI. */
extern bool hilo_cluster_slice_agreed(int32 seq_id, const char *seq_name, int32 node_bits,
                                      bool raise);

/*
 * Called by the allocator before it claims a window above the local
 * high-water mark. Returns false on a node in no cluster (claim locally, as
 * always). Otherwise windows come from the quorum register only: for a take
 * (`for_take`) it claims `size` IDs through the register, waiting for a
 * majority, and sets *claimed and *window (exhaustion leaves *claimed false;
 * no majority raises an error); for a top-up it claims nothing, wakes the
 * agent, and leaves *claimed false.
 */
extern bool hilo_cluster_claims_window(const char *seq_name, int64 start_value, int64 max_value,
                                       uint64 size, bool for_take, bool *claimed,
                                       HiloRange *window);
/* The same for a take that needs all `size` IDs or none: when fewer are
 * left, nothing is claimed and *left (if not NULL) says how many are. */
extern bool hilo_cluster_claims_whole_window(const char *seq_name, int64 start_value,
                                             int64 max_value, uint64 size, bool *claimed,
                                             HiloRange *window, uint64 *left);
/* The same for a sequence ordered across the cluster ('quorum'): its errors
 * say so (it has no open windows). `guess` (if not NULL): where the register
 * stands at least, the end of this node's last claim of the sequence; the
 * claim then sets above it without reading first (HiloClaimSpec). */
extern bool hilo_cluster_claims_ordered_window(const char *seq_name, int64 start_value,
                                               int64 max_value, uint64 size, const int64 *guess,
                                               bool *claimed, HiloRange *window, uint64 *left);

#endif /* HILO_PG_CLUSTER_AGENT_H */
