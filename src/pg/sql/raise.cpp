/*
 * sql/raise.cpp: hilo_raise, and the two parts of hilo_adopt and
 * hilo_unadopt (src/hilo.sql) that read the catalog: hilo._held_up_to and
 * hilo._single_node_only. What a raise does: commands/sequence_raise.cpp.
 */
#include "../commands/commands.h"

extern "C" {
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
}

/*
 * hilo_raise(seq, above): once this transaction commits, no session hands
 * out an ID at or below `above`; only upwards; the owner only. In the
 * caller's transaction: a rollback changes nothing.
 */
HILO_SQL_FUNCTION(hilo_raise)
{
    static const char *const arg_names[] = {"seq", "above"};
    hilo_entry(fcinfo, "hilo_raise()", arg_names, 2, HILO_WRITES);
    char name[HILO_MAX_NAME_BYTES + 1];
    hilo_check_name(PG_GETARG_TEXT_PP(0), name);
    hilo_raise_sequence(name, PG_GETARG_INT64(1));
    PG_RETURN_VOID();
}

/*
 * hilo._held_up_to(seq): the highest ID the sequence handed out or holds
 * on this node (its high-water mark, windows, free ranges, and the IDs of
 * a sequence created in this transaction), or start_value - 1: a native
 * sequence that takes over starts above it (hilo_unadopt). Usage right
 * needed (42501).
 */
HILO_SQL_FUNCTION(hilo_held_up_to)
{
    static const char *const arg_names[] = {"seq"};
    hilo_entry(fcinfo, "hilo._held_up_to()", arg_names, 1, HILO_READS);
    char name[HILO_MAX_NAME_BYTES + 1];
    hilo_check_name(PG_GETARG_TEXT_PP(0), name);
    HiloSequence seq;
    /* Not for allocation: one created in this transaction records its IDs
     * in the catalog first. */
    hilo_lookup_usable_sequence(name, false, &seq);
    static const char *sql =
        "SELECT greatest(s.high_water_mark, s.start_value - 1,"
        "         (SELECT max(w.window_end_value) - 1 FROM hilo.windows w"
        "           WHERE w.seq_id = s.seq_id),"
        "         (SELECT max(f.last_id) FROM hilo.free_ranges f WHERE f.seq_id = s.seq_id))"
        "  FROM hilo.sequences s WHERE s.seq_id = $1";
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    hilo_spi_exec1(sql, INT4OID, Int32GetDatum(seq.seq_id), true, 1);
    int64 held = SPI_processed > 0 ? hilo_spi_int64(0, 1) : seq.start_value - 1;
    hilo_catalog_end(&access);
    PG_RETURN_INT64(Max(held, seq.high_water_mark));
}

/*
 * hilo._single_node_only(function_name): 0A000 on a node of a hilo
 * cluster. hilo_adopt and hilo_unadopt would have to read the column's
 * maximum on every node and carry the switch to all of them: not done yet,
 * so they refuse there before changing anything.
 */
HILO_SQL_FUNCTION(hilo_single_node_only)
{
    static const char *const arg_names[] = {"function_name"};
    hilo_entry(fcinfo, "hilo._single_node_only()", arg_names, 1, HILO_READS);
    const char *function_name = text_to_cstring(PG_GETARG_TEXT_PP(0));
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    bool in_cluster = hilo_window_source_active();
    hilo_catalog_end(&access);
    if (in_cluster)
        ereport(ERROR,
                (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                 errmsg("%s is not supported on a node of a hilo cluster", function_name),
                 errdetail("The table is per node and the sequence cluster-wide: the column's "
                           "maximum would have to be read on every node."),
                 errhint("Move the column to hilo before the node joins the cluster, or use "
                         "hilo_create() with start_value above the highest ID on every node.")));
    PG_RETURN_VOID();
}
