/*
 * cluster/cluster.cpp: the multi-node side of hilo as one subsystem, from
 * _PG_init. The orderings across nodes (src/pg/order) start after it.
 */
#include "cluster.h"

#include "agent/agent.h"

void hilo_cluster_define_gucs(void)
{
    hilo_define_cluster_gucs();
}

void hilo_cluster_init(void)
{
    hilo_define_cluster_gucs();
    hilo_agent_init();
    /* Before the startup process runs recovery (and renames backup_label). */
    hilo_restore_check_at_start();
}
