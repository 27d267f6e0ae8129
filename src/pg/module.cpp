/*
 * module.cpp: _PG_init, one init call per subsystem.
 */
#include "alloc/alloc.h"
#include "commands/commands.h"
#include "cluster/cluster.h"
#include "order/order.h"

extern "C" {
#include "miscadmin.h"
#include "utils/guc.h"
}

extern "C" {
PG_MODULE_MAGIC;
PGDLLEXPORT void _PG_init(void);
}

extern "C" void _PG_init(void)
{
    /*
     * Loaded without shared_preload_libraries (say by a plain CREATE
     * EXTENSION), hilo has no shared memory; its functions then refuse to
     * run, with a hint, instead of half-working.
     */
    if (!process_shared_preload_libraries_in_progress)
        return;

    hilo_define_gucs();
    /*
     * pg_upgrade starts both servers in binary upgrade mode (-b) to move the
     * schema across: hilo must then neither start workers (its agent,
     * lease worker and claim server hold hilo.agent_database open, and
     * pg_upgrade drops and re-creates every database; and no worker may
     * write while pg_upgrade moves transaction state) nor hook utility
     * commands (pglogical returns early there too). Its functions,
     * called there, say hilo is not preloaded.
     */
    if (IsBinaryUpgrade) {
        hilo_cluster_define_gucs(); /* postgresql.conf's hilo.agent_database and the rest */
        MarkGUCPrefixReserved("hilo");
        return;
    }
    hilo_shmem_install_hooks();
    hilo_alloc_shmem_init();
    hilo_commands_init();
    hilo_cluster_init();
    hilo_order_init();
    MarkGUCPrefixReserved("hilo");
    hilo_preloaded = true;
}
