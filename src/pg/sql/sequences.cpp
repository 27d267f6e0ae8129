/*
 * sql/sequences.cpp: hilo_create, hilo_drop, hilo_grant_usage and
 * hilo_revoke_usage (hilo_alter: sql/settings.cpp).
 *
 * All run in the caller's transaction, like CREATE/DROP SEQUENCE: a
 * rolled-back create leaves nothing, a rolled-back drop loses nothing.
 */
#include "../alloc/alloc.h"
#include "../commands/commands.h"
#include "sql.h"

extern "C" {
#include "catalog/pg_attrdef.h"
#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "commands/typecmds.h"
#include "executor/spi.h"
#include "nodes/value.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/inval.h"
}

void hilo_check_positive(const char *what, int64 value)
{
    if (value < 1)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("%s must be at least 1, not " INT64_FORMAT, what, value)));
}

/* min_open_windows: 1 to HILO_MAX_OPEN_WINDOWS (each open window costs the
 * allocator a row to write whenever one is used up). */
void hilo_check_open_windows(int64 value)
{
    hilo_check_positive("min_open_windows", value);
    if (value > HILO_MAX_OPEN_WINDOWS)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("min_open_windows must be at most %d, not " INT64_FORMAT,
                               HILO_MAX_OPEN_WINDOWS, value),
                        errhint("Larger windows (window_size) give more IDs without more rows.")));
}

static const char *const ordering_names[] = {"none", "node", "cluster", "quorum"};

/* hilo_create's ordering => (monotonic => true is 'node'), checked against
 * the other arguments: 22023. */
static uint8 check_ordering(const char *name, const char *ordering, bool monotonic, int32 node_bits)
{
    int order = -1;
    for (int i = 0; i < (int)lengthof(ordering_names); i++)
        if (strcmp(ordering, ordering_names[i]) == 0)
            order = i;
    if (order < 0)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("invalid ordering \"%s\" for hilo sequence \"%s\"", ordering, name),
                        errhint("Use 'none', 'node', 'cluster' or 'quorum'.")));
    if (monotonic && order != HILO_ORDERING_NONE && order != HILO_ORDERING_NODE)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("hilo sequence \"%s\" cannot be monotonic with ordering '%s'", name,
                               ordering),
                        errdetail("monotonic => true is ordering => 'node'."),
                        errhint("Give only ordering => '%s'.", ordering)));
    if (monotonic)
        order = HILO_ORDERING_NODE;
    if (node_bits > 0 && order != HILO_ORDERING_NONE)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("hilo sequence \"%s\" cannot have both node_bits and ordering '%s'",
                               name, ordering_names[order]),
                        errdetail("Each node hands out IDs of its own slice: they do not increase "
                                  "across nodes.")));
    return (uint8)order;
}

/* Whether this node can keep the ordering's promise: 'node' only outside a
 * cluster, 'cluster' and 'quorum' only in one. Catalog access held. */
static void check_ordering_here(const char *name, uint8 order)
{
    bool in_cluster = hilo_window_source_active();
    if (order == HILO_ORDERING_NODE && in_cluster)
        ereport(ERROR,
                (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                 errmsg("hilo sequence \"%s\" cannot be ordered per node on a node of a hilo "
                        "cluster",
                        name),
                 errdetail("Its IDs would rise on each node, not across the nodes."),
                 errhint("For IDs that rise across the whole cluster, use ordering => 'cluster' "
                         "(a leased serving node) or 'quorum' (no clock).")));
    if ((order == HILO_ORDERING_QUORUM || order == HILO_ORDERING_CLUSTER) && !in_cluster)
        ereport(ERROR,
                (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                 errmsg("hilo sequence \"%s\" cannot have ordering '%s': this node is in no "
                        "hilo cluster",
                        name, ordering_names[order]),
                 errhint("On a single node, ordering => 'node' (monotonic) gives IDs that rise "
                         "across all sessions.")));
}

/* hilo_create's settings, each checked (22023); `start_given`: start_value
 * was given, not derived from a dropped sequence of the same name. */
static void check_create_settings(const char *name, bool start_given, int64 start_value,
                                  int64 max_value, int64 window_size, int32 min_open_windows,
                                  int32 block_size, int32 node_bits)
{
    if (!start_given && start_value > max_value && max_value <= HILO_MAX_ID)
        ereport(ERROR,
                (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                 errmsg("hilo sequence \"%s\" would start at " INT64_FORMAT
                        ", above its max_value " INT64_FORMAT,
                        name, start_value, max_value),
                 errdetail("A dropped hilo sequence of that name handed out IDs up to " INT64_FORMAT
                           ".",
                           start_value - 1),
                 errhint("Give start_value explicitly to reuse those IDs.")));
    if (start_value < HILO_MIN_ID || max_value > HILO_MAX_ID || start_value > max_value)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("invalid ID range [" INT64_FORMAT "," INT64_FORMAT
                               "] for hilo sequence \"%s\"",
                               start_value, max_value, name),
                        errdetail("start_value must be at least 1, max_value at most " INT64_FORMAT
                                  ", and start_value at most max_value.",
                                  HILO_MAX_ID)));
    hilo_check_positive("window_size", window_size);
    hilo_check_open_windows(min_open_windows);
    hilo_check_positive("block_size", block_size);
    if (node_bits < 0 || node_bits > HILO_MAX_NODE_BITS)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("node_bits must be between 0 and %d, not %d", HILO_MAX_NODE_BITS,
                               node_bits)));
}

static void created_after_dropped(const char *name, int32 seq_id);

HILO_SQL_FUNCTION(hilo_create)
{
    static const char *const arg_names[] = {"seq",         "start_value",      "max_value",
                                            "window_size", "min_open_windows", "block_size",
                                            "monotonic",   "node_bits",        "ordering"};
    /* 0.1.0 declared six arguments, 0.2.0 seven, 0.5.0 nine. */
    int nargs = PG_NARGS();
    hilo_require_preload("hilo_create()");
    /* start_value may be NULL (0.5.0's default): see below. */
    for (int i = 0; i < nargs; i++)
        if (i != 1 && PG_ARGISNULL(i))
            ereport(ERROR,
                    (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
                     errmsg("argument \"%s\" of hilo_create() must not be NULL", arg_names[i])));
    hilo_require_writable("hilo_create()");

    char name[HILO_MAX_NAME_BYTES + 1];
    hilo_check_name(PG_GETARG_TEXT_PP(0), name);
    int32 node_bits = nargs > 7 ? PG_GETARG_INT32(7) : 0;
    /* Without an explicit start_value, a name that was dropped before
     * starts above everything the dropped sequence handed out, so that keys
     * already stored in tables never collide with the new one by accident.
     * With node_bits, this node's mark lies in its own slice: it lifts this
     * node's high-water mark, with or without start_value, as every other
     * node lifts its own when the agent carries the sequence there
     * (hilo._carry_sequence(), which cannot tell whether start_value was
     * given); not the start_value every node shares (one in this node's
     * slice would leave the nodes whose slices lie below it empty). */
    int64 dropped_above =
        PG_ARGISNULL(1) || node_bits > 0 ? hilo_start_above_dropped(name, node_bits) : HILO_MIN_ID;
    int64 start_value = !PG_ARGISNULL(1) ? PG_GETARG_INT64(1)
                        : node_bits > 0  ? HILO_MIN_ID
                                         : dropped_above;
    int64 max_value = PG_GETARG_INT64(2);
    int64 window_size = PG_GETARG_INT64(3);
    int32 min_open_windows = PG_GETARG_INT32(4);
    int32 block_size = PG_GETARG_INT32(5);
    bool monotonic = nargs > 6 && PG_GETARG_BOOL(6);
    const char *ordering = nargs > 8 ? text_to_cstring(PG_GETARG_TEXT_PP(8)) : "none";
    uint8 order = check_ordering(name, ordering, monotonic, node_bits);
    monotonic = order == HILO_ORDERING_NODE;

    check_create_settings(name, !PG_ARGISNULL(1), start_value, max_value, window_size,
                          min_open_windows, block_size, node_bits);

    static const char *sql_ordering =
        "INSERT INTO hilo.sequences (name, start_value, max_value, window_size,"
        "                            min_open_windows, block_size, owner, high_water_mark,"
        "                            monotonic, node_bits, ordering)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7::oid::regrole, $9, $8, $10, $11)"
        " ON CONFLICT (name) DO NOTHING RETURNING seq_id";
    static const char *sql =
        "INSERT INTO hilo.sequences (name, start_value, max_value, window_size,"
        "                            min_open_windows, block_size, owner, high_water_mark,"
        "                            monotonic)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7::oid::regrole, $2 - 1, $8)"
        " ON CONFLICT (name) DO NOTHING RETURNING seq_id";
    static const char *sql_0_1 =
        "INSERT INTO hilo.sequences (name, start_value, max_value, window_size,"
        "                            min_open_windows, block_size, owner, high_water_mark)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7::oid::regrole, $2 - 1)"
        " ON CONFLICT (name) DO NOTHING RETURNING seq_id";
    Oid types[8] = {TEXTOID, INT8OID, INT8OID, INT8OID, INT4OID, INT4OID, OIDOID, BOOLOID};
    Datum values[8] = {CStringGetTextDatum(name),       Int64GetDatum(start_value),
                       Int64GetDatum(max_value),        Int64GetDatum(window_size),
                       Int32GetDatum(min_open_windows), Int32GetDatum(block_size),
                       ObjectIdGetDatum(GetUserId()),   BoolGetDatum(monotonic)};

    /* A DROP ROLE of the owner now either committed or waits for us. */
    hilo_lock_role(GetUserId());
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    if (order != HILO_ORDERING_NONE)
        check_ordering_here(name, order);
    /* Catalogs before 0.5.0 have neither node_bits nor ordering (and their
     * hilo_create declares neither argument). */
    if (hilo_catalog_has_column("ordering")) {
        int64 mark = start_value - 1;
        if (node_bits > 0) {
            /* This node's windows start in its slice (which refuses a node
             * id that does not fit); an empty slice leaves it exhausted. */
            HiloRange slice;
            (void)hilo_node_slice_of(name, node_bits, true, &slice);
            mark = Min(Max(Max(start_value - 1, slice.first - 1), dropped_above - 1), max_value);
        }
        Oid ord_types[11] = {TEXTOID, INT8OID, INT8OID, INT8OID, INT4OID, INT4OID,
                             OIDOID,  BOOLOID, INT8OID, INT4OID, TEXTOID};
        Datum ord_values[11] = {values[0],
                                values[1],
                                values[2],
                                values[3],
                                values[4],
                                values[5],
                                values[6],
                                values[7],
                                Int64GetDatum(mark),
                                Int32GetDatum(node_bits),
                                CStringGetTextDatum(ordering_names[order])};
        hilo_spi_exec(sql_ordering, 11, ord_types, ord_values, NULL, false, 0);
    } else if (hilo_catalog_has_monotonic())
        hilo_spi_exec(sql, 8, types, values, NULL, false, 0);
    else
        hilo_spi_exec(sql_0_1, 7, types, values, NULL, false, 0);
    if (SPI_processed == 0)
        ereport(ERROR, (errcode(ERRCODE_DUPLICATE_OBJECT),
                        errmsg("hilo sequence \"%s\" already exists", name)));
    int32 seq_id = hilo_spi_int32(0, 1);
    if (PG_ARGISNULL(1) || node_bits > 0) {
        /* A drop of the name that was in flight when start_value was read
         * committed while the INSERT waited for it (the unique index): its
         * mark is visible now, and the new sequence starts above it (with
         * node_bits: this node's high-water mark rises above it). */
        int64 above = hilo_start_above_dropped(name, node_bits);
        bool lift_start = node_bits == 0 && PG_ARGISNULL(1) && above > start_value;
        if (lift_start)
            check_create_settings(name, false, above, max_value, window_size, min_open_windows,
                                  block_size, node_bits);
        if (lift_start || (node_bits > 0 && above > dropped_above)) {
            static const char *lift_sql =
                "UPDATE hilo.sequences SET start_value = CASE WHEN $3 THEN $2 ELSE start_value END,"
                "       high_water_mark = greatest(high_water_mark, least($2 - 1, max_value))"
                " WHERE seq_id = $1";
            Oid lift_types[3] = {INT4OID, INT8OID, BOOLOID};
            Datum lift_values[3] = {Int32GetDatum(seq_id), Int64GetDatum(above),
                                    BoolGetDatum(lift_start)};
            hilo_spi_exec(lift_sql, 3, lift_types, lift_values, NULL, false, 0);
        }
    }
    created_after_dropped(name, seq_id);
    /* Until this commits, its IDs are reserved in this transaction. */
    hilo_local_note_created(seq_id);
    hilo_catalog_end(&access);
    hilo_nextval_forget(name);

    /* The allocator opens its first windows once this commits. */
    hilo_allocator_wake_at_commit(false);
    PG_RETURN_VOID();
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
static void created_after_dropped(const char *name, int32 seq_id)
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
    Oid types[2] = {INT4OID, TIMESTAMPTZOID};
    Datum values[2] = {Int32GetDatum(seq_id), after};
    hilo_spi_exec(lift_sql, 2, types, values, NULL, false, 0);
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

/* Drops `seq`, which hilo_begin_owned_sequence() found and locked in
 * `access`; ends it. */
static void drop_locked(const char *name, const HiloSequence &seq, bool cascade,
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

HILO_SQL_FUNCTION(hilo_drop)
{
    static const char *const arg_names[] = {"seq", "cascade"};
    /* Before 0.5.0 hilo_drop had no cascade argument. */
    int nargs = Min(PG_NARGS(), 2);
    hilo_entry(fcinfo, "hilo_drop()", arg_names, nargs, HILO_WRITES);

    char name[HILO_MAX_NAME_BYTES + 1];
    hilo_check_name(PG_GETARG_TEXT_PP(0), name);
    bool cascade = nargs > 1 && PG_GETARG_BOOL(1);

    HiloCatalogAccess access;
    HiloSequence seq;
    /* Pushes in flight finish first; they would recycle into a dropped
     * sequence. A catalog before 0.5.0 (no cascade) has the agent's
     * hilo._drop_carried in plpgsql, which checks the copy before this call
     * waits for it: there a sequence made again meanwhile is not dropped. */
    (void)hilo_begin_owned_sequence(name, "drop", nargs > 1 ? 0 : HILO_LOCK_NOT_REMADE, &access,
                                    &seq);
    drop_locked(name, seq, cascade, &access);
    PG_RETURN_VOID();
}

void hilo_drop_owned_sequence(const char *name, bool cascade)
{
    HiloCatalogAccess access;
    HiloSequence seq;
    if (hilo_begin_owned_sequence(name, "drop", HILO_LOCK_MISSING_OK | HILO_LOCK_NOT_REMADE,
                                  &access, &seq))
        drop_locked(name, seq, cascade, &access);
}

/*
 * hilo._drop_carried(name, created_at): the agent carries a drop made on
 * another node (cluster/carry.cpp): drops this node's copy of `name` if it
 * was created at or before `created_at` (the dropped copy's). Returns false,
 * and changes nothing, when there is none, or when the copy here is newer:
 * the name made again, also by a transaction that committed while this call
 * waited for the sequence's lock (the copy is checked once the lock is
 * held, not before it).
 */
HILO_SQL_FUNCTION(hilo_drop_carried)
{
    static const char *const arg_names[] = {"name", "created_at"};
    hilo_entry(fcinfo, "hilo._drop_carried()", arg_names, 2, HILO_WRITES);
    char name[HILO_MAX_NAME_BYTES + 1];
    hilo_check_name(PG_GETARG_TEXT_PP(0), name);
    HiloCatalogAccess access;
    HiloSequence seq;
    if (!hilo_begin_owned_sequence(name, "drop", HILO_LOCK_MISSING_OK, &access, &seq))
        PG_RETURN_BOOL(false);
    static const char *older_sql =
        "SELECT 1 FROM hilo.sequences WHERE seq_id = $1 AND created_at <= $2";
    Oid types[2] = {INT4OID, TIMESTAMPTZOID};
    Datum values[2] = {Int32GetDatum(seq.seq_id), PG_GETARG_DATUM(1)};
    hilo_spi_exec(older_sql, 2, types, values, NULL, false, 1);
    if (SPI_processed == 0) {
        hilo_catalog_end(&access);
        PG_RETURN_BOOL(false);
    }
    drop_locked(name, seq, false, &access);
    PG_RETURN_BOOL(true);
}

/*
 * hilo_grant_usage and hilo_revoke_usage: who besides the owner may take
 * from, push to and call hilo_nextval on a sequence. Transactional, like
 * GRANT: the change shows at commit, in every session (sessions that cached
 * the decision for hilo_nextval learn of it through a relcache invalidation
 * of hilo.usage_grants, sent at commit).
 */
static Datum change_usage(FunctionCallInfo fcinfo, bool grant)
{
    static const char *const arg_names[] = {"seq", "role"};
    const char *fn = grant ? "hilo_grant_usage()" : "hilo_revoke_usage()";
    hilo_entry(fcinfo, fn, arg_names, 2, HILO_WRITES);

    char name[HILO_MAX_NAME_BYTES + 1];
    hilo_check_name(PG_GETARG_TEXT_PP(0), name);
    char *role = text_to_cstring(PG_GETARG_TEXT_PP(1));
    int role_len = (int)strlen(role);
    if (role_len >= NAMEDATALEN) /* could be megabytes: do not echo it whole */
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                        errmsg("role \"%.*s...\" does not exist",
                               pg_mbcliplen(role, role_len, NAMEDATALEN - 1), role),
                        errdetail("Role names have at most %d bytes; this one has %d.",
                                  NAMEDATALEN - 1, role_len)));
    /* PUBLIC is stored as role 0; no role can be called "public". */
    Oid grantee = strcmp(role, "public") == 0 ? InvalidOid : get_role_oid(role, false);
    if (grant)
        hilo_lock_role(grantee);

    Oid caller = GetUserId();
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    Oid relid = hilo_usage_grants_relid();
    if (!OidIsValid(relid))
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("%s needs version 0.3.0 of the hilo extension", fn),
                        errhint("Run ALTER EXTENSION hilo UPDATE.")));
    HiloSequence seq;
    hilo_lookup_sequence(name, false, &seq);
    hilo_check_owner(&seq, caller, grant ? "grant use of" : "revoke use of");

    static const char *grant_sql =
        "INSERT INTO hilo.usage_grants (seq_id, grantee)"
        " VALUES ($1, $2::oid::regrole) ON CONFLICT DO NOTHING";
    static const char *revoke_sql =
        "DELETE FROM hilo.usage_grants WHERE seq_id = $1 AND grantee = $2::oid::regrole";
    Oid types[2] = {INT4OID, OIDOID};
    Datum values[2] = {Int32GetDatum(seq.seq_id), ObjectIdGetDatum(grantee)};
    hilo_spi_exec(grant ? grant_sql : revoke_sql, 2, types, values, NULL, false, 0);
    hilo_catalog_end(&access);
    CacheInvalidateRelcacheByRelid(relid);
    PG_RETURN_VOID();
}

HILO_SQL_FUNCTION(hilo_grant_usage)
{
    return change_usage(fcinfo, true);
}

HILO_SQL_FUNCTION(hilo_revoke_usage)
{
    return change_usage(fcinfo, false);
}
