/*
 * ranges.cpp: between int8multirange and arrays of inclusive HiloRanges.
 *
 * int8range is discrete, so PostgreSQL keeps it canonical as [lo, hi):
 * lower bound inclusive, upper exclusive. A HiloRange {first, last} is
 * [first, last + 1); last <= 2^63 - 2 keeps last + 1 a valid bigint.
 */
#include "hilo.h"

extern "C" {
#include "catalog/pg_type.h"
#include "utils/multirangetypes.h"
#include "utils/rangetypes.h"
#include "utils/typcache.h"
}

/* make_range gains an error-context argument in PostgreSQL 16. */
#if PG_VERSION_NUM >= 160000
#define HILO_MAKE_RANGE(typcache, lower, upper) make_range(typcache, lower, upper, false, NULL)
#else
#define HILO_MAKE_RANGE(typcache, lower, upper) make_range(typcache, lower, upper, false)
#endif

static TypeCacheEntry *int8range_typcache(void)
{
    TypeCacheEntry *multi = lookup_type_cache(INT8MULTIRANGEOID, TYPECACHE_MULTIRANGE_INFO);
    if (multi->rngtype == NULL)
        elog(ERROR, "hilo: type %u is not a multirange", INT8MULTIRANGEOID);
    return multi->rngtype;
}

Datum hilo_ranges_to_multirange(const HiloRange *ranges, uint32 nranges)
{
    TypeCacheEntry *typcache = int8range_typcache();
    RangeType **items = (RangeType **)palloc(sizeof(RangeType *) * Max(nranges, 1));

    for (uint32 i = 0; i < nranges; i++) {
        RangeBound lower, upper;
        lower.val = Int64GetDatum(ranges[i].first);
        lower.infinite = false;
        lower.inclusive = true;
        lower.lower = true;
        upper.val = Int64GetDatum(ranges[i].last + 1);
        upper.infinite = false;
        upper.inclusive = false;
        upper.lower = false;
        items[i] = HILO_MAKE_RANGE(typcache, &lower, &upper);
    }
    return MultirangeTypePGetDatum(
        make_multirange(INT8MULTIRANGEOID, typcache, (int32)nranges, items));
}

HiloRange *hilo_multirange_to_ranges(Datum multirange, const char *seq_name, uint32 *nranges)
{
    MultirangeType *mr = DatumGetMultirangeTypeP(multirange);
    TypeCacheEntry *typcache = int8range_typcache();
    uint32 count = mr->rangeCount;
    HiloRange *out = (HiloRange *)palloc(sizeof(HiloRange) * Max(count, 1));

    for (uint32 i = 0; i < count; i++) {
        RangeBound lower, upper;
        multirange_get_bounds(typcache, mr, i, &lower, &upper);
        if (lower.infinite || upper.infinite)
            ereport(ERROR,
                    (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                     errmsg("cannot push an unbounded range to hilo sequence \"%s\"", seq_name),
                     errhint("Push only IDs that hilo_take handed out.")));
        /* Canonical int8range: [lower, upper). */
        out[i].first = DatumGetInt64(lower.val) + (lower.inclusive ? 0 : 1);
        out[i].last = DatumGetInt64(upper.val) - (upper.inclusive ? 0 : 1);
    }
    *nranges = count;
    return out;
}

char *hilo_format_range(HiloRange r)
{
    if (r.first == r.last)
        return psprintf("[" INT64_FORMAT "]", r.first);
    return psprintf("[" INT64_FORMAT "," INT64_FORMAT "]", r.first, r.last);
}
