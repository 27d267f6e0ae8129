/*
 * sql_take.cpp: hilo_take and hilo_take_ranges.
 *
 * The caller checks its arguments and finds the sequence in its own
 * snapshot; the reservation itself is made and committed by the allocator
 * worker (allocator_client.cpp), so the caller's rollback cannot undo it.
 */
#include "hilo.h"

extern "C" {
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"
}

/* The common part of both functions: checks, then the reservation. */
static HiloRange *take_ids(FunctionCallInfo fcinfo, const char *function_name, uint32 *nranges)
{
    static const char *const arg_names[] = {"seq", "n", "partial"};
    hilo_require_preload(function_name);
    hilo_require_args(fcinfo, function_name, arg_names, 3);

    char name[HILO_MAX_NAME_BYTES + 1];
    hilo_check_name(PG_GETARG_TEXT_PP(0), name);
    int64 n = PG_GETARG_INT64(1);
    bool partial = PG_GETARG_BOOL(2);
    if (n <= 0)
        ereport(ERROR,
                (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                 errmsg("cannot take " INT64_FORMAT " IDs from hilo sequence \"%s\"", n, name),
                 errdetail("n must be at least 1.")));
    hilo_require_writable(function_name);

    HiloCatalogAccess access;
    HiloSequence seq;
    hilo_catalog_begin(&access);
    hilo_lookup_sequence(name, true, &seq);
    hilo_catalog_end(&access);

    return hilo_allocator_take(&seq, n, partial, nranges);
}

HILO_SQL_FUNCTION(hilo_take)
{
    uint32 nranges;
    HiloRange *ranges = take_ids(fcinfo, "hilo_take()", &nranges);
    return hilo_ranges_to_multirange(ranges, nranges);
}

HILO_SQL_FUNCTION(hilo_take_ranges)
{
    /* Set up the result first: once IDs are reserved, nothing may fail. */
    InitMaterializedSRF(fcinfo, 0);
    uint32 nranges;
    HiloRange *ranges = take_ids(fcinfo, "hilo_take_ranges()", &nranges);
    ReturnSetInfo *rsinfo = (ReturnSetInfo *)fcinfo->resultinfo;
    for (uint32 i = 0; i < nranges; i++) {
        Datum values[2] = {Int64GetDatum(ranges[i].first), Int64GetDatum(ranges[i].last)};
        bool nulls[2] = {false, false};
        tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
    }
    return (Datum)0;
}
