/*
 * sql/sequences.cpp: hilo_create, hilo_drop and hilo._drop_carried
 * (hilo_alter: sql/settings.cpp; hilo_grant_usage and hilo_revoke_usage:
 * sql/usage.cpp; what a drop does: commands/sequence_drop.cpp).
 *
 * All run in the caller's transaction, like CREATE/DROP SEQUENCE: a
 * rolled-back create leaves nothing, a rolled-back drop loses nothing.
 */
#include "../alloc/alloc.h"
#include "../commands/commands.h"
#include "sql.h"

extern "C" {
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
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

/* A sequence hilo_create makes: its arguments, checked. */
typedef struct NewSequence {
    char name[HILO_MAX_NAME_BYTES + 1];
    bool start_given; /* start_value was given, not derived from a dropped sequence */
    int64 start_value;
    int64 max_value;
    int64 window_size;
    int32 min_open_windows;
    int32 block_size;
    int32 node_bits;
    uint8 order;         /* HiloOrdering; the column monotonic is order == HILO_ORDERING_NODE */
    int64 dropped_above; /* where a dropped sequence of the name leaves off (HILO_MIN_ID: none) */
    Oid owner;           /* the caller (catalog access runs as the extension's owner) */
} NewSequence;

/* hilo_create's settings, each checked (22023), with start_value `start`. */
static void check_create_settings(const NewSequence *n, int64 start)
{
    if (!n->start_given && start > n->max_value && n->max_value <= HILO_MAX_ID)
        ereport(ERROR,
                (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                 errmsg("hilo sequence \"%s\" would start at " INT64_FORMAT
                        ", above its max_value " INT64_FORMAT,
                        n->name, start, n->max_value),
                 errdetail("A dropped hilo sequence of that name handed out IDs up to " INT64_FORMAT
                           ".",
                           start - 1),
                 errhint("Give start_value explicitly to reuse those IDs.")));
    if (start < HILO_MIN_ID || n->max_value > HILO_MAX_ID || start > n->max_value)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("invalid ID range [" INT64_FORMAT "," INT64_FORMAT
                               "] for hilo sequence \"%s\"",
                               start, n->max_value, n->name),
                        errdetail("start_value must be at least 1, max_value at most " INT64_FORMAT
                                  ", and start_value at most max_value.",
                                  HILO_MAX_ID)));
    hilo_check_positive("window_size", n->window_size);
    hilo_check_open_windows(n->min_open_windows);
    hilo_check_positive("block_size", n->block_size);
    if (n->node_bits < 0 || n->node_bits > HILO_MAX_NODE_BITS)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("node_bits must be between 0 and %d, not %d", HILO_MAX_NODE_BITS,
                               n->node_bits)));
}

/* hilo_create's arguments, checked, into *n (0.1.0 declared six arguments,
 * 0.2.0 seven, 0.5.0 nine). */
static void read_create_arguments(FunctionCallInfo fcinfo, NewSequence *n)
{
    static const char *const arg_names[] = {"seq",         "start_value",      "max_value",
                                            "window_size", "min_open_windows", "block_size",
                                            "monotonic",   "node_bits",        "ordering"};
    int nargs = PG_NARGS();
    hilo_require_preload("hilo_create()");
    /* start_value may be NULL (0.5.0's default): see below. */
    for (int i = 0; i < nargs; i++)
        if (i != 1 && PG_ARGISNULL(i))
            ereport(ERROR,
                    (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
                     errmsg("argument \"%s\" of hilo_create() must not be NULL", arg_names[i])));
    hilo_require_writable("hilo_create()");

    hilo_check_name(PG_GETARG_TEXT_PP(0), n->name);
    n->node_bits = nargs > 7 ? PG_GETARG_INT32(7) : 0;
    n->start_given = !PG_ARGISNULL(1);
    /* Without an explicit start_value, a name that was dropped before
     * starts above everything the dropped sequence handed out, so that keys
     * already stored in tables never collide with the new one by accident.
     * With node_bits, this node's mark lies in its own slice: it lifts this
     * node's high-water mark, with or without start_value, as every other
     * node lifts its own when the agent carries the sequence there
     * (hilo._carry_sequence(), which cannot tell whether start_value was
     * given); not the start_value every node shares (one in this node's
     * slice would leave the nodes whose slices lie below it empty). */
    n->dropped_above = !n->start_given || n->node_bits > 0
                           ? hilo_start_above_dropped(n->name, n->node_bits)
                           : HILO_MIN_ID;
    n->start_value = n->start_given     ? PG_GETARG_INT64(1)
                     : n->node_bits > 0 ? HILO_MIN_ID
                                        : n->dropped_above;
    n->max_value = PG_GETARG_INT64(2);
    n->window_size = PG_GETARG_INT64(3);
    n->min_open_windows = PG_GETARG_INT32(4);
    n->block_size = PG_GETARG_INT32(5);
    bool monotonic = nargs > 6 && PG_GETARG_BOOL(6);
    const char *ordering = nargs > 8 ? text_to_cstring(PG_GETARG_TEXT_PP(8)) : "none";
    n->order = check_ordering(n->name, ordering, monotonic, n->node_bits);
    n->owner = GetUserId();
    check_create_settings(n, n->start_value);
}

/* Inserts the catalog row of `n` as the catalog's version has it; its
 * seq_id, or 42710. Catalog access held. */
static int32 insert_sequence_row(const NewSequence *n)
{
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
    Oid types[11] = {TEXTOID, INT8OID, INT8OID, INT8OID, INT4OID, INT4OID,
                     OIDOID,  BOOLOID, INT8OID, INT4OID, TEXTOID};
    Datum values[11] = {
        CStringGetTextDatum(n->name),       Int64GetDatum(n->start_value),
        Int64GetDatum(n->max_value),        Int64GetDatum(n->window_size),
        Int32GetDatum(n->min_open_windows), Int32GetDatum(n->block_size),
        ObjectIdGetDatum(n->owner),         BoolGetDatum(n->order == HILO_ORDERING_NODE)};
    /* Catalogs before 0.5.0 have neither node_bits nor ordering (and their
     * hilo_create declares neither argument). */
    if (hilo_catalog_has_column("ordering")) {
        int64 mark = n->start_value - 1;
        if (n->node_bits > 0) {
            /* This node's windows start in its slice (which refuses a node
             * id that does not fit); an empty slice leaves it exhausted. */
            HiloRange slice;
            (void)hilo_node_slice_of(n->name, n->node_bits, true, &slice);
            mark = Min(Max(Max(n->start_value - 1, slice.first - 1), n->dropped_above - 1),
                       n->max_value);
        }
        values[8] = Int64GetDatum(mark);
        values[9] = Int32GetDatum(n->node_bits);
        values[10] = CStringGetTextDatum(ordering_names[n->order]);
        hilo_spi_exec(sql_ordering, 11, types, values, NULL, false, 0);
    } else if (hilo_catalog_has_monotonic())
        hilo_spi_exec(sql, 8, types, values, NULL, false, 0);
    else
        hilo_spi_exec(sql_0_1, 7, types, values, NULL, false, 0);
    if (SPI_processed == 0)
        ereport(ERROR, (errcode(ERRCODE_DUPLICATE_OBJECT),
                        errmsg("hilo sequence \"%s\" already exists", n->name)));
    return hilo_spi_int32(0, 1);
}

/* A drop of the name that was in flight when start_value was read
 * committed while the INSERT waited for it (the unique index): its mark is
 * visible now, and the new sequence starts above it (with node_bits: this
 * node's high-water mark rises above it). */
static void start_above_late_drop(const NewSequence *n, int32 seq_id)
{
    if (n->start_given && n->node_bits == 0)
        return;
    int64 above = hilo_start_above_dropped(n->name, n->node_bits);
    bool lift_start = n->node_bits == 0 && !n->start_given && above > n->start_value;
    if (lift_start)
        check_create_settings(n, above);
    if (!lift_start && !(n->node_bits > 0 && above > n->dropped_above))
        return;
    static const char *lift_sql =
        "UPDATE hilo.sequences SET start_value = CASE WHEN $3 THEN $2 ELSE start_value END,"
        "       high_water_mark = greatest(high_water_mark, least($2 - 1, max_value))"
        " WHERE seq_id = $1";
    Oid lift_types[3] = {INT4OID, INT8OID, BOOLOID};
    Datum lift_values[3] = {Int32GetDatum(seq_id), Int64GetDatum(above), BoolGetDatum(lift_start)};
    hilo_spi_exec(lift_sql, 3, lift_types, lift_values, NULL, false, 0);
}

HILO_SQL_FUNCTION(hilo_create)
{
    NewSequence n;
    read_create_arguments(fcinfo, &n);

    /* A DROP ROLE of the owner now either committed or waits for us. */
    hilo_lock_role(n.owner);
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    if (n.order != HILO_ORDERING_NONE)
        check_ordering_here(n.name, n.order);
    int32 seq_id = insert_sequence_row(&n);
    start_above_late_drop(&n, seq_id);
    hilo_created_after_dropped(n.name, seq_id);
    /* Until this commits, its IDs are reserved in this transaction. */
    hilo_local_note_created(seq_id);
    hilo_catalog_end(&access);
    hilo_nextval_forget(n.name);

    /* The allocator opens its first windows once this commits. */
    hilo_allocator_wake_at_commit(false);
    PG_RETURN_VOID();
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
    hilo_drop_locked(name, seq, cascade, &access);
    PG_RETURN_VOID();
}

/*
 * hilo._drop_carried(name, created_at): the agent carries a drop made on
 * another node (cluster/carry/carry.cpp): drops this node's copy of `name` if it
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
    hilo_spi_exec2(older_sql, INT4OID, Int32GetDatum(seq.seq_id), TIMESTAMPTZOID,
                   PG_GETARG_DATUM(1), false, 1);
    if (SPI_processed == 0) {
        hilo_catalog_end(&access);
        PG_RETURN_BOOL(false);
    }
    hilo_drop_locked(name, seq, false, &access);
    PG_RETURN_BOOL(true);
}
