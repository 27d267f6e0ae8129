/*
 * order/order.cpp: the orderings across the cluster as one subsystem: the
 * way of their calls (sql/ calls here directly: the allocator has no part
 * in them but counting what they handed out), and the window source the
 * allocator asks on member nodes.
 */
#include "order.h"

#include "../cluster/agent/agent.h"
#include "lease/lease.h"
#include "quorum/quorum.h"

/* Sequences ordered across the cluster: 'cluster' from the lease holder,
 * 'quorum' through a register claim per batch of calls. */
void hilo_order_take(const HiloSequence *seq, uint64 n, HiloRange *out)
{
    if (seq->ordering == HILO_ORDERING_CLUSTER)
        hilo_lease_take(seq, n, out);
    else
        hilo_quorum_take(seq, n, out);
    hilo_issued_count_ordered(MyDatabaseId, seq->creation, seq->seq_id, n);
}

static const HiloWindowSource cluster_window_source = {
    hilo_cluster_active,         hilo_cluster_claims_window, hilo_cluster_claims_whole_window,
    hilo_restore_retire_windows, hilo_cluster_local_node_id, hilo_cluster_slice_agreed,
};

void hilo_order_init(void)
{
    hilo_quorum_shmem_init();
    /* Ordering 'quorum': the claim server (after the GUCs). */
    hilo_quorum_server_init();
    /* Ordering 'cluster': the slots and the lease worker (after the GUCs). */
    hilo_lease_init();
    /* On member nodes, windows come from the quorum register. */
    hilo_set_window_source(&cluster_window_source);
}
