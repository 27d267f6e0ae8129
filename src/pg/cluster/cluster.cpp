/*
 * cluster/cluster.cpp: the multi-node side of hilo as one subsystem, from
 * _PG_init. Everything else of cluster/ is reached from here or from SQL.
 */
#include "cluster.h"

void hilo_cluster_init(void)
{
    hilo_cluster_define_gucs();
    hilo_agent_init();
    hilo_quorum_shmem_init();
    /* Ordering 'quorum': the claim server (after the GUCs). */
    hilo_quorum_server_init();
    /* Ordering 'cluster': the slots and the lease worker (after the GUCs). */
    hilo_lease_init();
    /* On member nodes, windows come from the quorum register. */
    hilo_cluster_install_window_source();
    /* Before the startup process runs recovery (and renames backup_label). */
    hilo_restore_check_at_start();
}
