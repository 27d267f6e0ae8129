/*
 * cluster/watermarks.cpp: what proposers remember about nodes (fencing):
 * per node incarnation, the highest write count seen and whether it is
 * fenced, from hilo.peer_watermarks and from replies. The agent, the window
 * claims and hilo.nodes read them.
 */
#include "cluster.h"

extern "C" {
#include "executor/spi.h"
}

/*
 * Keeps only what concerns the incarnations `cfg` lists: a count seen from
 * another incarnation of a node says nothing about the current one.
 */
void hilo_watermarks_merge(HiloWatermarkSet *set, const HiloWatermark *w, const HiloConfig *cfg)
{
    int member = hilo_config_index_of(cfg, (int32)w->node);
    if (member < 0 || (uint64)cfg->nodes[member].incarnation != w->incarnation)
        return;
    for (int i = 0; i < set->count; i++) {
        HiloWatermark *e = &set->entries[i];
        if (e->node != w->node)
            continue;
        if (e->incarnation != w->incarnation) {
            *e = *w;
            return;
        }
        e->highest_write_count = Max(e->highest_write_count, w->highest_write_count);
        e->fenced = e->fenced || w->fenced;
        return;
    }
    if (set->count < HILO_MAX_NODES)
        set->entries[set->count++] = *w;
}

bool hilo_watermarks_fenced(const HiloWatermarkSet *set, const HiloNode *node)
{
    for (int i = 0; i < set->count; i++)
        if (set->entries[i].node == (uint32)node->id &&
            set->entries[i].incarnation == (uint64)node->incarnation)
            return set->entries[i].fenced;
    return false;
}

void hilo_watermarks_load(HiloWatermarkSet *set, const HiloConfig *cfg)
{
    static const char *sql =
        "SELECT node_id, incarnation, highest_write_count, fenced FROM hilo.peer_watermarks";
    set->count = 0;
    hilo_spi_exec(sql, 0, NULL, NULL, NULL, true, 0);
    for (uint64 i = 0; i < SPI_processed && i < HILO_MAX_NODES; i++) {
        bool isnull;
        HiloWatermark w;
        w.node = (uint32)hilo_spi_int32(i, 1);
        w.incarnation = (uint64)hilo_spi_int64(i, 2);
        w.highest_write_count = (uint64)hilo_spi_int64(i, 3);
        w.fenced =
            DatumGetBool(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 4, &isnull));
        hilo_watermarks_merge(set, &w, cfg);
    }
}
