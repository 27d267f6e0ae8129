/*
 * cluster/agent/nodes_view.cpp: the rows of hilo.nodes, every node of the
 * installed configuration with what this node's proposers and its agent
 * last saw of it.
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

HILO_SQL_FUNCTION(hilo_nodes)
{
    hilo_entry(fcinfo, "hilo.nodes", NULL, 0, HILO_READS);
    InitMaterializedSRF(fcinfo, 0);
    HiloConfig *cfg = (HiloConfig *)palloc(sizeof(HiloConfig));
    HiloWatermarkSet *wm = (HiloWatermarkSet *)palloc0(sizeof(HiloWatermarkSet));
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    hilo_load_config(cfg);
    if (cfg->epoch > 0)
        hilo_watermarks_load(wm, cfg);
    /* The conninfo strings are in SPI's memory, which hilo_catalog_end frees. */
    for (int i = 0; i < cfg->nnodes; i++) {
        size_t len = strlen(cfg->nodes[i].conninfo) + 1;
        char *copy = (char *)SPI_palloc(len);
        memcpy(copy, cfg->nodes[i].conninfo, len);
        cfg->nodes[i].conninfo = copy;
    }
    hilo_catalog_end(&access);

    for (int i = 0; i < cfg->nnodes; i++) {
        const HiloNode *node = &cfg->nodes[i];
        Datum values[10];
        bool nulls[10] = {false};
        values[0] = Int32GetDatum(node->id);
        values[1] = CStringGetTextDatum(node->name);
        values[2] = CStringGetTextDatum(node->conninfo);
        values[3] = Int64GetDatum(node->incarnation);
        values[4] = BoolGetDatum(i == cfg->self);
        values[5] = BoolGetDatum(hilo_watermarks_fenced(wm, node));
        nulls[6] = true;
        for (int k = 0; k < wm->count; k++)
            if (wm->entries[k].node == (uint32)node->id) {
                values[6] = Int64GetDatum((int64)wm->entries[k].highest_write_count);
                nulls[6] = false;
            }
        bool reachable;
        char error[HILO_NODE_ERROR_BYTES];
        if (hilo_agent_node_status(node->id, &reachable, error, sizeof(error))) {
            values[7] = BoolGetDatum(reachable);
            values[8] = CStringGetTextDatum(error);
            nulls[8] = error[0] == '\0';
        } else {
            nulls[7] = nulls[8] = true;
        }
        values[9] = Int64GetDatum(cfg->epoch);
        hilo_put_row(fcinfo, values, nulls);
    }
    return (Datum)0;
}
