/*
 * cluster/cluster.h: the entry points of the multi-node side of hilo.
 *
 * Several nodes (PostgreSQL servers with hilo) share the ID space of every
 * sequence. Its rooms, each with its own header, from the ground up:
 * node/ (this node: settings, identity, installed configuration, restore),
 * net/ (libpq to the other nodes), register/ (the quorum register),
 * carry/ (copying sequences and settings between nodes), membership/
 * (configuration changes), agent/ (the agent, and the allocator's claims).
 * The orderings across nodes sit above them, in src/pg/order.
 * docs/multi-node.md tells the whole story.
 */
#ifndef HILO_PG_CLUSTER_H
#define HILO_PG_CLUSTER_H

#include "../alloc/alloc.h"

/* From _PG_init: the GUCs, the agent, the restore check (cluster.cpp). */
extern void hilo_cluster_init(void);
/* From _PG_init in binary upgrade mode: the GUCs alone. */
extern void hilo_cluster_define_gucs(void);

/* ---- hilo_raise on a node of a cluster (raise.cpp) ---- */

/* Has every node of the cluster apply a raise of `seq` to `above` (its
 * register and lease cells and its catalog) as the caller's transaction
 * commits, each for good; nothing on a node in no cluster. 22023 for a
 * node_bits mark that leaves a member's slice empty; 08006, changing
 * nothing, if a node does not answer a first round (now, and again at
 * commit), and 08006 at commit naming the nodes that failed to apply it
 * (the others skip the IDs: a gap; the transaction aborts). */
extern void hilo_cluster_raise(const HiloSequence *seq, int64 above);

#endif /* HILO_PG_CLUSTER_H */
