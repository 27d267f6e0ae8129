/*
 * commands/sequence_drop.cpp: dropping a hilo sequence, for hilo_drop and
 * hilo._drop_carried (sql/sequences.cpp) and for DROP OWNED
 * (commands/role_commands.cpp): its rows, the column and domain defaults
 * that depend on it (as DROP SEQUENCE ... CASCADE), and the marks by which
 * a sequence made again under its name starts above all it handed out.
 */
#include "commands.h"

extern "C" {
#include "access/htup_details.h"
#include "catalog/pg_attrdef.h"
#include "catalog/pg_type.h"
#include "commands/typecmds.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "nodes/value.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
}

/* In a cluster the agent tells a name's sequences apart by created_at: a
 * drop it carries drops the copies created at or before the dropped one.
 * created_at is the creating transaction's start, which may lie before the
 * dropped copy's (a transaction that began before another node created it,
 * or a clock behind that node's): the new sequence would look dropped, and
 * the next pass would drop it everywhere. So it is created just after every
 * dropped copy of its name this node knows of (read as committed now, with
 * this transaction's own drop; after the INSERT, so a drop it waited for
 * counts too). */
void hilo_created_after_dropped(const char *name, int32 seq_id)
{
    if (!hilo_catalog_has_table("dropped_sequences"))
        return;
    static const char *sql =
        "SELECT max(created_at) + interval '1 microsecond' FROM hilo.dropped_sequences"
        " WHERE name = $1";
    Oid type = TEXTOID;
    Datum value = CStringGetTextDatum(name);
    hilo_spi_exec_snapshot(sql, 1, &type, &value, NULL, GetLatestSnapshot(), true, 1);
    if (SPI_processed == 0 || hilo_spi_isnull(0, 1))
        return;
    bool isnull;
    Datum after = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
    static const char *lift_sql =
        "UPDATE hilo.sequences SET created_at = $2 WHERE seq_id = $1 AND created_at < $2";
    hilo_spi_exec2(lift_sql, INT4OID, Int32GetDatum(seq_id), TIMESTAMPTZOID, after, false, 0);
}

/* Where a sequence created under `name` without start_value starts: 1, or
 * just above the high-water mark of a dropped sequence of that name. Read
 * as committed now, with this transaction's own changes (a drop earlier in
 * the same statement, or committed after a REPEATABLE READ snapshot, is
 * seen: the caller's snapshot would miss it and start at 1 again). */
int64 hilo_start_above_dropped(const char *name, int32 node_bits)
{
    if (!hilo_catalog_has_table("dropped_names"))
        return HILO_MIN_ID;
    static const char *sql =
        "SELECT high_water_mark, node_bits FROM hilo.dropped_names WHERE name = $1";
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    Oid type = TEXTOID;
    Datum value = CStringGetTextDatum(name);
    hilo_spi_exec_snapshot(sql, 1, &type, &value, NULL, GetLatestSnapshot(), true, 1);
    int64 mark = SPI_processed > 0 ? hilo_spi_int64(0, 1) : 0;
    int32 dropped_bits = SPI_processed > 0 ? hilo_spi_int32(0, 2) : node_bits;
    /* In a cluster each node lifts only its own high-water mark above its
     * own mark: with other node_bits its new slice would hold IDs the
     * dropped sequence handed out on other nodes, which no mark here
     * records. (Alone, the one mark covers every ID it handed out.) */
    if (dropped_bits != node_bits && dropped_bits > 0 && node_bits > 0 &&
        hilo_window_source_active())
        ereport(ERROR,
                (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                 errmsg("hilo sequence \"%s\" cannot be created with node_bits %d: a dropped "
                        "sequence of the name had node_bits %d",
                        name, node_bits, dropped_bits),
                 errdetail("Every node's slice moves with node_bits; the new slices would hold "
                           "IDs the dropped sequence handed out on other nodes."),
                 errhint("Create it with node_bits => %d, or under another name.", dropped_bits)));
    hilo_catalog_end(&access);
    return mark >= HILO_MIN_ID ? Min(mark, HILO_MAX_ID) + 1 : HILO_MIN_ID;
}

/* Refuses the drop of `name` while column defaults call hilo with it, as
 * DROP SEQUENCE does; with cascade, drops those defaults, as DROP SEQUENCE
 * ... CASCADE does (commands/sequence_dependents.cpp). */
static void drop_dependent_defaults(const char *name, bool cascade)
{
    List *relids, *attnums, *domains, *descriptions;
    hilo_find_dependent_defaults(name, &relids, &attnums, &domains, &descriptions);
    if (descriptions == NIL)
        return;
    StringInfoData detail;
    initStringInfo(&detail);
    ListCell *lc;
    foreach (lc, descriptions) {
        if (detail.len > 0)
            appendStringInfoChar(&detail, '\n');
        appendStringInfo(&detail,
                         cascade ? "drop cascades to %s" : "%s depends on hilo sequence %s",
                         (const char *)lfirst(lc), quote_identifier(name));
    }
    if (!cascade)
        ereport(
            ERROR,
            (errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
             errmsg("cannot drop hilo sequence \"%s\" because other objects depend on it", name),
             errdetail_internal("%s", detail.data),
             errhint("Use hilo_drop('%s', cascade => true) to drop the dependent objects too.",
                     name)));
    if (list_length(descriptions) == 1)
        ereport(NOTICE, (errmsg_internal("%s", detail.data)));
    else
        ereport(NOTICE, (errmsg("drop cascades to %d other objects", list_length(descriptions)),
                         errdetail_internal("%s", detail.data)));
    ListCell *rc, *ac;
    forboth(rc, relids, ac, attnums)
        RemoveAttrDefault(lfirst_oid(rc), (AttrNumber)lfirst_int(ac), DROP_RESTRICT, false, false);
    /* A domain's default goes as ALTER DOMAIN ... DROP DEFAULT would drop it
     * (which needs the domain's owner; DROP SEQUENCE ... CASCADE would drop
     * the domain and every column of it instead). */
    foreach (lc, domains) {
        HeapTuple tuple = SearchSysCache1(TYPEOID, ObjectIdGetDatum(lfirst_oid(lc)));
        if (!HeapTupleIsValid(tuple))
            continue;
        Form_pg_type form = (Form_pg_type)GETSTRUCT(tuple);
        List *names = list_make2(makeString(get_namespace_name(form->typnamespace)),
                                 makeString(pstrdup(NameStr(form->typname))));
        ReleaseSysCache(tuple);
        (void)AlterDomainDefault(names, NULL);
    }
}

void hilo_drop_locked(const char *name, const HiloSequence &seq, bool cascade,
                      HiloCatalogAccess *access)
{
    /* The sequence row first: the allocator, locking it NOWAIT, then backs
     * off; and a DDL command creating a default for it, which locks the row
     * FOR KEY SHARE, has committed (its default is found below) or waits. */
    static const char *drop_sequence =
        "DELETE FROM hilo.sequences WHERE seq_id = $1 RETURNING high_water_mark";
    static const char *drop_windows = "DELETE FROM hilo.windows WHERE seq_id = $1";
    static const char *drop_free = "DELETE FROM hilo.free_ranges WHERE seq_id = $1";
    /* A name re-created later starts above all that this one handed out. */
    static const char *remember_mark =
        "INSERT INTO hilo.dropped_names AS d (name, high_water_mark, node_bits)"
        " VALUES ($1, $2, $3)"
        " ON CONFLICT (name) DO UPDATE SET high_water_mark ="
        " greatest(d.high_water_mark, excluded.high_water_mark), dropped_at = now(),"
        " node_bits = CASE WHEN excluded.node_bits > 0 THEN excluded.node_bits"
        "                  ELSE d.node_bits END";
    Datum seq_id = Int32GetDatum(seq.seq_id);
    int32 node_bits = 0;
    if (hilo_catalog_has_table("dropped_names")) {
        static const char *bits_sql = "SELECT node_bits FROM hilo.sequences WHERE seq_id = $1";
        hilo_spi_exec1(bits_sql, INT4OID, seq_id, false, 1);
        node_bits = SPI_processed > 0 ? hilo_spi_int32(0, 1) : 0;
    }
    hilo_spi_exec1(drop_sequence, INT4OID, seq_id, false, 0);
    int64 high_water_mark = SPI_processed > 0 ? hilo_spi_int64(0, 1) : seq.high_water_mark;
    /* After the row: a window the allocator claimed while we waited for it
     * has committed and is seen (and deleted) here. */
    hilo_spi_exec1(drop_windows, INT4OID, seq_id, false, 0);
    /* The node_bits of a sequence that claimed windows in a cluster (in
     * this node's slice): a name made again keeps them
     * (hilo_start_above_dropped). Alone, its windows lie in node 0's
     * slice, which no node of a cluster claims in. */
    bool had_windows = SPI_processed > 0;
    if (node_bits == 0 || !had_windows || !hilo_window_source_active())
        node_bits = 0;
    hilo_spi_exec1(drop_free, INT4OID, seq_id, false, 0);
    if (hilo_catalog_has_table("dropped_names") && high_water_mark >= seq.start_value) {
        Oid mark_types[3] = {TEXTOID, INT8OID, INT4OID};
        Datum mark_values[3] = {CStringGetTextDatum(name), Int64GetDatum(high_water_mark),
                                Int32GetDatum(node_bits)};
        hilo_spi_exec(remember_mark, 3, mark_types, mark_values, NULL, false, 0);
    }
    /* The window map names sequences: a sequence created again under this
     * name must not inherit the old windows' nodes (hilo_node_of). */
    if (hilo_catalog_has_table("window_map")) {
        static const char *drop_map = "DELETE FROM hilo.window_map WHERE name = $1";
        hilo_spi_exec1(drop_map, TEXTOID, CStringGetTextDatum(name), false, 0);
    }
    /* Nor what the agent saw of the old one's settings (hilo.status). */
    if (hilo_catalog_has_table("node_settings")) {
        static const char *drop_seen = "DELETE FROM hilo.node_settings WHERE name = $1";
        hilo_spi_exec1(drop_seen, TEXTOID, CStringGetTextDatum(name), false, 0);
    }
    Oid catalog = hilo_catalog_relid_if_present();
    hilo_catalog_end(access);
    drop_dependent_defaults(name, cascade);
    hilo_invalidate_at_commit(seq.seq_id);
    /* Sent at commit, also at COMMIT PREPARED in another session: every
     * session then looks its cached sequences up again. */
    CacheInvalidateRelcacheByRelid(catalog);
}

void hilo_drop_owned_sequence(const char *name, bool cascade)
{
    HiloCatalogAccess access;
    HiloSequence seq;
    if (hilo_begin_owned_sequence(name, "drop", HILO_LOCK_MISSING_OK | HILO_LOCK_NOT_REMADE,
                                  &access, &seq))
        hilo_drop_locked(name, seq, cascade, &access);
}
