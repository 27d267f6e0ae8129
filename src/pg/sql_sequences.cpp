/*
 * sql_sequences.cpp: hilo_create, hilo_drop, hilo_alter, hilo_grant_usage
 * and hilo_revoke_usage.
 *
 * All run in the caller's transaction, like CREATE/DROP SEQUENCE: a
 * rolled-back create leaves nothing, a rolled-back drop loses nothing.
 */
#include "hilo.h"

extern "C" {
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/inval.h"
}

static void check_positive(const char *what, int64 value)
{
    if (value < 1)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("%s must be at least 1, not " INT64_FORMAT, what, value)));
}

/* min_open_windows: 1 to HILO_MAX_OPEN_WINDOWS (each open window costs the
 * allocator a row to write whenever one is used up). */
static void check_open_windows(int64 value)
{
    check_positive("min_open_windows", value);
    if (value > HILO_MAX_OPEN_WINDOWS)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("min_open_windows must be at most %d, not " INT64_FORMAT,
                               HILO_MAX_OPEN_WINDOWS, value),
                        errhint("Larger windows (window_size) give more IDs without more rows.")));
}

HILO_SQL_FUNCTION(hilo_create)
{
    static const char *const arg_names[] = {"seq",         "start_value",      "max_value",
                                            "window_size", "min_open_windows", "block_size",
                                            "monotonic"};
    /* 0.1.0 declared six arguments, 0.2.0 seven. */
    int nargs = PG_NARGS();
    hilo_require_preload("hilo_create()");
    hilo_require_args(fcinfo, "hilo_create()", arg_names, nargs);
    hilo_require_writable("hilo_create()");

    char name[HILO_MAX_NAME_BYTES + 1];
    hilo_check_name(PG_GETARG_TEXT_PP(0), name);
    int64 start_value = PG_GETARG_INT64(1);
    int64 max_value = PG_GETARG_INT64(2);
    int64 window_size = PG_GETARG_INT64(3);
    int32 min_open_windows = PG_GETARG_INT32(4);
    int32 block_size = PG_GETARG_INT32(5);
    bool monotonic = nargs > 6 && PG_GETARG_BOOL(6);

    if (start_value < HILO_MIN_ID || max_value > HILO_MAX_ID || start_value > max_value)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("invalid ID range [" INT64_FORMAT "," INT64_FORMAT
                               "] for hilo sequence \"%s\"",
                               start_value, max_value, name),
                        errdetail("start_value must be at least 1, max_value at most " INT64_FORMAT
                                  ", and start_value at most max_value.",
                                  HILO_MAX_ID)));
    check_positive("window_size", window_size);
    check_open_windows(min_open_windows);
    check_positive("block_size", block_size);

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

    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    if (hilo_catalog_has_monotonic())
        hilo_spi_exec(sql, 8, types, values, NULL, false, 0);
    else
        hilo_spi_exec(sql_0_1, 7, types, values, NULL, false, 0);
    if (SPI_processed == 0)
        ereport(ERROR, (errcode(ERRCODE_DUPLICATE_OBJECT),
                        errmsg("hilo sequence \"%s\" already exists", name)));
    hilo_catalog_end(&access);

    /* The allocator opens its first windows once this commits. */
    hilo_allocator_wake_at_commit(false);
    PG_RETURN_VOID();
}

HILO_SQL_FUNCTION(hilo_drop)
{
    static const char *const arg_names[] = {"seq"};
    hilo_require_preload("hilo_drop()");
    hilo_require_args(fcinfo, "hilo_drop()", arg_names, 1);
    hilo_require_writable("hilo_drop()");

    char name[HILO_MAX_NAME_BYTES + 1];
    hilo_check_name(PG_GETARG_TEXT_PP(0), name);

    Oid caller = GetUserId();
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    HiloSequence seq;
    hilo_lookup_sequence(name, false, &seq);
    hilo_check_owner(&seq, caller, "drop");
    /* Wait for pushes in flight; they would recycle into a dropped sequence. */
    hilo_lock_sequence_for_push(seq.seq_id);

    /* The sequence row first: the allocator, locking it NOWAIT, then backs off. */
    static const char *drop_sequence = "DELETE FROM hilo.sequences WHERE seq_id = $1";
    static const char *drop_windows = "DELETE FROM hilo.windows WHERE seq_id = $1";
    static const char *drop_free = "DELETE FROM hilo.free_ranges WHERE seq_id = $1";
    Oid types[1] = {INT4OID};
    Datum values[1] = {Int32GetDatum(seq.seq_id)};
    hilo_spi_exec(drop_sequence, 1, types, values, NULL, false, 0);
    hilo_spi_exec(drop_windows, 1, types, values, NULL, false, 0);
    hilo_spi_exec(drop_free, 1, types, values, NULL, false, 0);
    hilo_catalog_end(&access);
    hilo_invalidate_at_commit(seq.seq_id);
    PG_RETURN_VOID();
}

/*
 * hilo_alter: changes settings; a NULL argument leaves a setting as it is.
 * Like a drop, it makes the sequence's buffers and pool stale at commit:
 * their IDs are skipped (a gap), and the next ones follow the new settings.
 */
HILO_SQL_FUNCTION(hilo_alter)
{
    static const char *const arg_names[] = {"seq"};
    hilo_require_preload("hilo_alter()");
    hilo_require_args(fcinfo, "hilo_alter()", arg_names, 1);
    hilo_require_writable("hilo_alter()");

    char name[HILO_MAX_NAME_BYTES + 1];
    hilo_check_name(PG_GETARG_TEXT_PP(0), name);

    Oid caller = GetUserId();
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    HiloSequence seq;
    hilo_lookup_sequence(name, false, &seq);
    hilo_check_owner(&seq, caller, "alter");
    hilo_lock_sequence_for_push(seq.seq_id);

    int64 max_value = PG_ARGISNULL(1) ? seq.max_value : PG_GETARG_INT64(1);
    int64 window_size = PG_ARGISNULL(2) ? seq.window_size : PG_GETARG_INT64(2);
    int32 min_open_windows = PG_ARGISNULL(3) ? seq.min_open_windows : PG_GETARG_INT32(3);
    int32 block_size = PG_ARGISNULL(4) ? seq.block_size : PG_GETARG_INT32(4);

    if (max_value > HILO_MAX_ID || max_value < seq.high_water_mark || max_value < seq.start_value)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("invalid max_value " INT64_FORMAT " for hilo sequence \"%s\"",
                               max_value, name),
                        errdetail("IDs up to " INT64_FORMAT " are already claimed for windows; "
                                  "max_value must be at least that and at most " INT64_FORMAT ".",
                                  Max(seq.high_water_mark, seq.start_value), HILO_MAX_ID)));
    check_positive("window_size", window_size);
    check_open_windows(min_open_windows);
    check_positive("block_size", block_size);

    /* Lock the row the allocator locks NOWAIT: it backs off until we commit. */
    static const char *sql =
        "UPDATE hilo.sequences SET max_value = $2, window_size = $3, min_open_windows = $4,"
        " block_size = $5 WHERE seq_id = $1";
    Oid types[5] = {INT4OID, INT8OID, INT8OID, INT4OID, INT4OID};
    Datum values[5] = {Int32GetDatum(seq.seq_id), Int64GetDatum(max_value),
                       Int64GetDatum(window_size), Int32GetDatum(min_open_windows),
                       Int32GetDatum(block_size)};
    hilo_spi_exec(sql, 5, types, values, NULL, false, 0);
    hilo_catalog_end(&access);
    hilo_invalidate_at_commit(seq.seq_id);
    hilo_allocator_wake_at_commit(false);
    PG_RETURN_VOID();
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
    hilo_require_preload(fn);
    hilo_require_args(fcinfo, fn, arg_names, 2);
    hilo_require_writable(fn);

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
