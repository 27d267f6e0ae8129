/*
 * sql_sequences.cpp: hilo_create and hilo_drop.
 *
 * Both run in the caller's transaction, like CREATE/DROP SEQUENCE: a
 * rolled-back create leaves nothing, a rolled-back drop loses nothing.
 */
#include "hilo.h"

extern "C" {
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
}

static void check_positive(const char *what, int64 value)
{
    if (value < 1)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("%s must be at least 1, not " INT64_FORMAT, what, value)));
}

HILO_SQL_FUNCTION(hilo_create)
{
    static const char *const arg_names[] = {"seq",         "start_value",      "max_value",
                                            "window_size", "min_open_windows", "block_size"};
    hilo_require_preload("hilo_create()");
    hilo_require_args(fcinfo, "hilo_create()", arg_names, 6);
    hilo_require_writable("hilo_create()");

    char name[HILO_MAX_NAME_BYTES + 1];
    hilo_check_name(PG_GETARG_TEXT_PP(0), name);
    int64 start_value = PG_GETARG_INT64(1);
    int64 max_value = PG_GETARG_INT64(2);
    int64 window_size = PG_GETARG_INT64(3);
    int32 min_open_windows = PG_GETARG_INT32(4);
    int32 block_size = PG_GETARG_INT32(5);

    if (start_value < HILO_MIN_ID || max_value > HILO_MAX_ID || start_value > max_value)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("invalid ID range [" INT64_FORMAT "," INT64_FORMAT
                               "] for hilo sequence \"%s\"",
                               start_value, max_value, name),
                        errdetail("start_value must be at least 1, max_value at most " INT64_FORMAT
                                  ", and start_value at most max_value.",
                                  HILO_MAX_ID)));
    check_positive("window_size", window_size);
    check_positive("min_open_windows", min_open_windows);
    check_positive("block_size", block_size);

    static const char *sql =
        "INSERT INTO hilo.sequences (name, start_value, max_value, window_size,"
        "                            min_open_windows, block_size, owner, high_water_mark)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7::oid::regrole, $2 - 1)"
        " ON CONFLICT (name) DO NOTHING RETURNING seq_id";
    Oid types[7] = {TEXTOID, INT8OID, INT8OID, INT8OID, INT4OID, INT4OID, OIDOID};
    Datum values[7] = {CStringGetTextDatum(name),       Int64GetDatum(start_value),
                       Int64GetDatum(max_value),        Int64GetDatum(window_size),
                       Int32GetDatum(min_open_windows), Int32GetDatum(block_size),
                       ObjectIdGetDatum(GetUserId())};

    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    hilo_spi_exec(sql, 7, types, values, NULL, false, 0);
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
    PG_RETURN_VOID();
}
