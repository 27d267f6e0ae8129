/*
 * alloc/lookup.cpp: a sequence as a caller sees it: looked up by name in
 * the caller's snapshot, with the checks of ownership and usage, and the
 * lock that serializes pushes. A sequence created in the caller's own
 * transaction is the allocator's business (alloc/local_sequences.cpp), and
 * so is whether the node is in a cluster (the window source), which is why
 * this lives in alloc/ and not beside the catalog queries (catalog.cpp).
 */
#include "internal.h"

extern "C" {
#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
}

/* hilo.sequences.ordering as text (NULL in a catalog without the column). */
uint8 hilo_parse_ordering(const char *text, bool monotonic)
{
    if (text == NULL)
        return monotonic ? HILO_ORDERING_NODE : HILO_ORDERING_NONE;
    if (strcmp(text, "quorum") == 0)
        return HILO_ORDERING_QUORUM;
    if (strcmp(text, "cluster") == 0)
        return HILO_ORDERING_CLUSTER;
    if (strcmp(text, "node") == 0)
        return HILO_ORDERING_NODE;
    return HILO_ORDERING_NONE;
}

int32 hilo_parse_node_bits(const char *text)
{
    return text != NULL ? pg_strtoint32(text) : 0;
}

/* `latest`: read as committed now (a new snapshot under READ COMMITTED),
 * not in the caller's statement's snapshot. False if there is no such
 * sequence and `missing_ok`, else 42704. */
static bool lookup(const char *name, bool for_allocation, bool latest, bool missing_ok,
                   HiloSequence *seq)
{
    /* 0.5.0 on: the catalog's creation comes with the row. */
    static const char *sql_0_5 =
        "SELECT seq_id, start_value, max_value, window_size, min_open_windows, block_size,"
        "       owner::oid::bigint, high_water_mark, xmin, monotonic,"
        "       (SELECT value FROM hilo.incarnation), (SELECT count(*) FROM hilo.incarnation),"
        "       ordering, node_bits"
        "  FROM hilo.sequences s WHERE name = $1";
    /* Inside the upgrade script's transaction, hilo.incarnation may exist
     * before the columns ordering and node_bits do: read through
     * to_jsonb(s.*), which says NULL for a column that is missing (and
     * costs a conversion of the row, so only there). */
    static const char *sql_0_5_partial =
        "SELECT seq_id, start_value, max_value, window_size, min_open_windows, block_size,"
        "       owner::oid::bigint, high_water_mark, xmin, monotonic,"
        "       (SELECT value FROM hilo.incarnation), (SELECT count(*) FROM hilo.incarnation),"
        "       (pg_catalog.to_jsonb(s.*) OPERATOR(pg_catalog.->>) 'ordering'),"
        "       (pg_catalog.to_jsonb(s.*) OPERATOR(pg_catalog.->>) 'node_bits')"
        "  FROM hilo.sequences s WHERE name = $1";
    static const char *sql =
        "SELECT seq_id, start_value, max_value, window_size, min_open_windows, block_size,"
        "       owner::oid::bigint, high_water_mark, xmin, monotonic"
        "  FROM hilo.sequences WHERE name = $1";
    static const char *sql_0_1 =
        "SELECT seq_id, start_value, max_value, window_size, min_open_windows, block_size,"
        "       owner::oid::bigint, high_water_mark, xmin, false"
        "  FROM hilo.sequences WHERE name = $1";
    bool has_creation = hilo_catalog_has_table("incarnation");
    hilo_spi_exec1(has_creation ? (hilo_catalog_has_ordering_columns() ? sql_0_5 : sql_0_5_partial)
                   : hilo_catalog_has_monotonic() ? sql
                                                  : sql_0_1,
                   TEXTOID, CStringGetTextDatum(name), !latest, 1);
    if (SPI_processed == 0 && missing_ok)
        return false;
    if (SPI_processed == 0)
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                        errmsg("hilo sequence \"%s\" does not exist", name),
                        errhint("Create it with hilo_create('%s').", name)));

    memset(seq, 0, sizeof(*seq));
    seq->seq_id = hilo_spi_int32(0, 1);
    strlcpy(seq->name, name, sizeof(seq->name));
    seq->start_value = hilo_spi_int64(0, 2);
    seq->max_value = hilo_spi_int64(0, 3);
    seq->window_size = hilo_spi_int64(0, 4);
    seq->min_open_windows = hilo_spi_int32(0, 5);
    seq->block_size = hilo_spi_int32(0, 6);
    seq->owner = (Oid)hilo_spi_int64(0, 7);
    seq->high_water_mark = hilo_spi_int64(0, 8);

    bool isnull;
    bool monotonic = DatumGetBool(hilo_spi_value(0, 10, &isnull));
    seq->ordering = monotonic ? HILO_ORDERING_NODE : HILO_ORDERING_NONE;
    if (has_creation) {
        if (hilo_spi_int64(0, 12) != 1)
            hilo_raise_catalog_recreated();
        seq->creation = (uint64)hilo_spi_int64(0, 11);
        seq->ordering = hilo_parse_ordering(
            SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 13), monotonic);
        seq->node_bits =
            hilo_parse_node_bits(SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 14));
    } else {
        seq->creation = hilo_catalog_creation_before_0_5(hilo_catalog_relid());
    }
    TransactionId xmin = DatumGetTransactionId(hilo_spi_value(0, 9, &isnull));
    if (!TransactionIdIsCurrentTransactionId(xmin))
        return true;
    if (hilo_local_created_here(seq->seq_id)) {
        if (!hilo_window_source_active()) {
            /* IDs are reserved in this transaction (alloc/local_sequences.cpp).
             * A push, alter or drop sees them in the catalog; a take or
             * nextval does not need to (and writing the row at every call
             * would leave a version of it per call). */
            seq->created_here = true;
            if (!for_allocation)
                hilo_local_record(seq);
            return true;
        }
        if (for_allocation)
            ereport(ERROR,
                    (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                     errmsg("hilo sequence \"%s\" was created in the current transaction", name),
                     errdetail("This node is in a hilo cluster, whose windows come from the "
                               "quorum register: IDs of a sequence can be reserved only once it "
                               "is committed."),
                     errhint("Commit the transaction that created the sequence first.")));
        return true;
    }
    if (for_allocation)
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("hilo sequence \"%s\" was changed in the current transaction", name),
                        errdetail("IDs are reserved by the allocator in its own transactions, "
                                  "which cannot use the sequence until the change is committed."),
                        errhint("Commit the transaction that changed the sequence first.")));
    return true;
}

void hilo_lookup_sequence(const char *name, bool for_allocation, HiloSequence *seq)
{
    (void)lookup(name, for_allocation, false, false, seq);
}

void hilo_check_owner(const HiloSequence *seq, Oid user, const char *action)
{
    if (!superuser_arg(user) && !has_privs_of_role(user, seq->owner))
        ereport(ERROR,
                (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                 errmsg("must be owner of hilo sequence \"%s\" to %s it", seq->name, action)));
}

/* The relation hilo.usage_grants (0.3.0 on), or InvalidOid. */
Oid hilo_usage_grants_relid(void)
{
    Oid nsp = get_namespace_oid("hilo", true);
    return OidIsValid(nsp) ? get_relname_relid("usage_grants", nsp) : InvalidOid;
}

/* `latest`: the grants as committed now, not in the statement's snapshot. */
static bool may_use(const HiloSequence *seq, Oid user, bool latest)
{
    if (superuser_arg(user) || has_privs_of_role(user, seq->owner))
        return true;
    /* Before 0.3.0 every sequence was open to everyone. */
    if (!OidIsValid(hilo_usage_grants_relid()))
        return true;
    static const char *sql = "SELECT grantee::oid FROM hilo.usage_grants WHERE seq_id = $1";
    hilo_spi_exec1(sql, INT4OID, Int32GetDatum(seq->seq_id), !latest, 0);
    for (uint64 i = 0; i < SPI_processed; i++) {
        bool isnull;
        Oid grantee = DatumGetObjectId(hilo_spi_value(i, 1, &isnull));
        if (grantee == InvalidOid || has_privs_of_role(user, grantee))
            return true;
    }
    return false;
}

bool hilo_user_may_use(const HiloSequence *seq, Oid user)
{
    return may_use(seq, user, false);
}

static void check_usage(const HiloSequence *seq, Oid user, bool latest)
{
    if (may_use(seq, user, latest))
        return;
    const char *role = GetUserNameFromId(user, true);
    ereport(ERROR,
            (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
             errmsg("permission denied for hilo sequence \"%s\"", seq->name),
             errdetail("Role \"%s\" has no usage right on it.", role ? role : "?"),
             errhint("Its owner can grant it with hilo_grant_usage('%s', role).", seq->name)));
}

void hilo_check_usage(const HiloSequence *seq, Oid user)
{
    check_usage(seq, user, false);
}

void hilo_lock_sequence_for_push(int32 seq_id)
{
    LockDatabaseObject(hilo_catalog_relid(), (Oid)seq_id, 0, ExclusiveLock);
}

bool hilo_try_lock_sequence_for_push(int32 seq_id)
{
    return ConditionalLockDatabaseObject(hilo_catalog_relid(), (Oid)seq_id, 0, ExclusiveLock);
}

/*
 * The sequence a name means once its push lock is held. The lock can wait
 * for a transaction that drops the sequence it was taken for, and makes the
 * name again: what was looked up before the wait is then gone, and a drop,
 * settings change or push of it would act on nothing (and a drop on the
 * new sequence's rows kept by name). As PostgreSQL's DROP and ALTER look a
 * name up again once they hold the lock (RangeVarGetRelidExtended), this
 * reads the row again as committed now: a sequence made again is locked in
 * turn and checked (with HILO_LOCK_NOT_REMADE: 40001 instead), one dropped
 * is 42704 (HILO_LOCK_MISSING_OK: false). Under REPEATABLE READ and
 * SERIALIZABLE the row read again is the snapshot's: a sequence dropped
 * since is 40001, as a concurrently deleted row is. Checks the caller's
 * right to every row it locks, once it waited with the grants as committed
 * now (under REPEATABLE READ, as of its snapshot): ownership to
 * `owner_action` it, or (NULL) usage.
 */
bool hilo_lock_named_sequence(const char *name, Oid caller, const char *owner_action, int flags,
                              HiloSequence *seq)
{
    bool missing_ok = (flags & HILO_LOCK_MISSING_OK) != 0;
    auto check = [&](bool latest) {
        if (owner_action != NULL)
            hilo_check_owner(seq, caller, owner_action);
        else
            check_usage(seq, caller, latest);
    };
    if (!lookup(name, false, false, missing_ok, seq))
        return false;
    for (bool waited = false;; waited = true) {
        check(waited); /* a sequence made again: its grants as committed */
        int32 locked = seq->seq_id;
        hilo_lock_sequence_for_push(locked);
        if (!lookup(name, false, true, missing_ok, seq))
            return false;
        if (seq->seq_id == locked)
            break;
        if (flags & HILO_LOCK_NOT_REMADE)
            ereport(ERROR, (errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
                            errmsg("hilo sequence \"%s\" was dropped and made again by a "
                                   "concurrent transaction",
                                   name),
                            errhint("Run the command again.")));
    }
    if (IsolationUsesXactSnapshot()) {
        static const char *sql = "SELECT 1 FROM hilo.sequences WHERE seq_id = $1";
        Oid type = INT4OID;
        Datum value = Int32GetDatum(seq->seq_id);
        hilo_spi_exec_snapshot(sql, 1, &type, &value, NULL, GetLatestSnapshot(), true, 1);
        if (SPI_processed == 0)
            ereport(ERROR, (errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
                            errmsg("could not serialize access due to a concurrent drop of hilo "
                                   "sequence \"%s\"",
                                   name)));
    }
    check(true); /* its owner or grants can have changed meanwhile */
    return true;
}

bool hilo_begin_owned_sequence(const char *name, const char *action, int flags,
                               HiloCatalogAccess *access, HiloSequence *seq)
{
    Oid caller = GetUserId(); /* before hilo_catalog_begin() changes the user */
    hilo_catalog_begin(access);
    if (hilo_lock_named_sequence(name, caller, action, flags, seq))
        return true;
    hilo_catalog_end(access);
    return false;
}

void hilo_lookup_usable_sequence(const char *name, bool for_allocation, HiloSequence *seq)
{
    Oid caller = GetUserId();
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    hilo_lookup_sequence(name, for_allocation, seq);
    hilo_check_usage(seq, caller);
    hilo_catalog_end(&access);
}
