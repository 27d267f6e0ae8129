/*
 * sql/push.cpp: hilo_push and hilo_push_ranges: their arguments. The
 * checks and the rows of hilo.free_ranges a push writes are
 * alloc/free_list_push.cpp's.
 *
 * A push is transactional: it inserts free ranges in the
 * caller's transaction, so a rollback recycles nothing. It is checked
 * (rule 4) and refused, changing nothing, when an ID was never handed out
 * or is already free.
 */
#include "../alloc/dispatch.h"

extern "C" {
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
}

static void start_push(FunctionCallInfo fcinfo, const char *function_name,
                       const char *const *arg_names, int nargs, char *name)
{
    hilo_entry(fcinfo, function_name, arg_names, nargs, HILO_WRITES);
    hilo_check_name(PG_GETARG_TEXT_PP(0), name);
}

HILO_SQL_FUNCTION(hilo_push)
{
    static const char *const arg_names[] = {"seq", "ranges"};
    char name[HILO_MAX_NAME_BYTES + 1];
    start_push(fcinfo, "hilo_push()", arg_names, 2, name);

    /* A multirange is already sorted and merged: PostgreSQL merged any
     * overlap in the input before we see it. */
    uint32 nranges;
    HiloRange *ranges = hilo_multirange_to_ranges(PG_GETARG_DATUM(1), name, &nranges);
    PG_RETURN_INT64(hilo_free_list_push(name, ranges, nranges));
}

/* Reads a bigint[] argument without NULLs into a palloc'd array. */
static int64 *bigint_array_arg(FunctionCallInfo fcinfo, int argno, const char *arg_name, int *count)
{
    ArrayType *array = PG_GETARG_ARRAYTYPE_P(argno);
    /* '{{5,6},{7,8}}' would be read as four IDs: refuse the shape instead. */
    if (ARR_NDIM(array) > 1)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("%s must be a one-dimensional array, not %d-dimensional", arg_name,
                               ARR_NDIM(array))));
    Datum *elems;
    bool *nulls;
    deconstruct_array(array, INT8OID, 8, true, 'd', &elems, &nulls, count);
    int64 *out = (int64 *)palloc(sizeof(int64) * Max(*count, 1));
    for (int i = 0; i < *count; i++) {
        if (nulls[i])
            ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
                            errmsg("%s must not contain NULLs", arg_name)));
        out[i] = DatumGetInt64(elems[i]);
    }
    return out;
}

HILO_SQL_FUNCTION(hilo_push_ranges)
{
    static const char *const arg_names[] = {"seq", "first_ids", "last_ids"};
    char name[HILO_MAX_NAME_BYTES + 1];
    start_push(fcinfo, "hilo_push_ranges()", arg_names, 3, name);

    int nfirst, nlast;
    int64 *firsts = bigint_array_arg(fcinfo, 1, "first_ids", &nfirst);
    int64 *lasts = bigint_array_arg(fcinfo, 2, "last_ids", &nlast);
    if (nfirst != nlast)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("first_ids has %d elements but last_ids has %d", nfirst, nlast)));

    HiloRange *ranges = (HiloRange *)palloc(sizeof(HiloRange) * Max(nfirst, 1));
    for (int i = 0; i < nfirst; i++) {
        if (firsts[i] > lasts[i])
            ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                            errmsg("cannot push IDs [" INT64_FORMAT "," INT64_FORMAT
                                   "] to hilo sequence \"%s\": first_id is above last_id",
                                   firsts[i], lasts[i], name)));
        ranges[i].first = firsts[i];
        ranges[i].last = lasts[i];
    }
    HiloRange a, b;
    if (!hilo_ranges_sort_check_disjoint(ranges, nfirst, &a, &b))
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("cannot push overlapping ranges %s and %s to hilo sequence \"%s\"",
                               hilo_format_range(a), hilo_format_range(b), name),
                        errdetail("Nothing was pushed.")));
    uint32 nranges = (uint32)hilo_ranges_normalize(ranges, nfirst);
    PG_RETURN_INT64(hilo_free_list_push(name, ranges, nranges));
}
