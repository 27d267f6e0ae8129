/*
 * cluster/node/node_keys.cpp: hilo_node_id() and hilo_node_of(seq, id), which
 * node of a hilo cluster issued an ID (docs/multi-node.md, "Node slices").
 *
 * hilo_node_of answers on any node, from what that node holds: the ID's
 * top bits for a sequence with node_bits; otherwise this node's own
 * windows, then the window map the agent copies to every node
 * (cluster/agent/window_map.cpp). A node in no cluster is node 0 there, as in
 * node_bits slices. Windows are read as of the latest commit: the
 * allocator may have claimed the one an ID came from after the caller's
 * snapshot was taken.
 */
#include "node.h"

extern "C" {
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/snapmgr.h"
}

/* This node's id, or -1 outside a cluster or when its configuration does
 * not list it. Needs catalog access. */
static int32 own_node_id(void)
{
    if (!hilo_catalog_has_table("cluster"))
        return -1;
    HiloConfig *cfg = (HiloConfig *)palloc(sizeof(HiloConfig));
    hilo_load_config(cfg);
    return cfg->epoch == 0 || cfg->self < 0 ? -1 : cfg->nodes[cfg->self].id;
}

HILO_SQL_FUNCTION(hilo_node_id)
{
    hilo_entry(fcinfo, "hilo_node_id()", NULL, 0, HILO_READS);
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    int32 id = own_node_id();
    hilo_catalog_end(&access);
    if (id < 0)
        PG_RETURN_NULL();
    PG_RETURN_INT32(id);
}

HILO_SQL_FUNCTION(hilo_node_of)
{
    static const char *const arg_names[] = {"seq", "id"};
    hilo_entry(fcinfo, "hilo_node_of()", arg_names, 2, HILO_READS);
    char name[HILO_MAX_NAME_BYTES + 1];
    hilo_check_name(PG_GETARG_TEXT_PP(0), name);
    int64 id = PG_GETARG_INT64(1);

    HiloSequence seq;
    hilo_lookup_usable_sequence(name, false, &seq); /* 42704, 42501 */

    static const char *bits_sql = "SELECT node_bits FROM hilo.sequences WHERE seq_id = $1";
    static const char *own_sql =
        "SELECT 1 FROM hilo.windows WHERE seq_id = $1 AND window_start_value <= $2"
        "   AND $2 < window_end_value";
    static const char *map_sql =
        "SELECT node_id FROM hilo.window_map WHERE name = $1 AND first_id <= $2"
        "   AND $2 <= last_id ORDER BY first_id DESC LIMIT 1";
    bool found = false;
    int32 node = 0;
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    if (id >= HILO_MIN_ID && id <= HILO_MAX_ID) {
        Oid types[2] = {INT4OID, INT8OID};
        Datum values[2] = {Int32GetDatum(seq.seq_id), Int64GetDatum(id)};
        hilo_spi_exec(bits_sql, 1, types, values, NULL, true, 1);
        int32 node_bits = SPI_processed > 0 ? hilo_spi_int32(0, 1) : 0;
        if (node_bits > 0) {
            node = (int32)hilo_node_of_id(node_bits, id);
            found = true;
        } else {
            hilo_spi_exec_snapshot(own_sql, 2, types, values, NULL, GetLatestSnapshot(), true, 1);
            if (SPI_processed > 0) {
                node = Max(own_node_id(), 0);
                found = true;
            } else if (hilo_catalog_has_table("window_map")) {
                Oid map_types[2] = {TEXTOID, INT8OID};
                Datum map_values[2] = {CStringGetTextDatum(name), Int64GetDatum(id)};
                hilo_spi_exec_snapshot(map_sql, 2, map_types, map_values, NULL, GetLatestSnapshot(),
                                       true, 1);
                if (SPI_processed > 0) {
                    node = hilo_spi_int32(0, 1);
                    found = true;
                }
            }
        }
    }
    hilo_catalog_end(&access);
    if (!found)
        PG_RETURN_NULL();
    PG_RETURN_INT32(node);
}
