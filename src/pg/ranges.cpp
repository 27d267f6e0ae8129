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
#include "access/tupmacs.h"
#include "utils/memutils.h"
#include "utils/typcache.h"
}

static TypeCacheEntry *int8range_typcache(void)
{
    TypeCacheEntry *multi = lookup_type_cache(INT8MULTIRANGEOID, TYPECACHE_MULTIRANGE_INFO);
    if (multi->rngtype == NULL)
        elog(ERROR, "hilo: type %u is not a multirange", INT8MULTIRANGEOID);
    return multi->rngtype;
}

/*
 * PostgreSQL's on-disk layout of a multirange (multirangetypes.c, the same
 * since multiranges came in 14): the header, then for every range but the
 * first an item (every MULTIRANGE_ITEM_OFFSET_STRIDE-th one the offset of
 * its bounds, marked with the high bit, the others the length of the
 * previous range's bounds), then a flags byte per range, then, aligned for
 * the element type, each range's bounds as range_serialize writes them.
 * It is a stored format, so it does not change within a major version.
 */
#define HILO_MULTIRANGE_ITEM_OFF_BIT 0x80000000
#define HILO_MULTIRANGE_ITEM_OFFSET_STRIDE 4

/*
 * Builds the int8multirange of sorted, disjoint, non-adjacent ranges
 * directly. make_multirange wants a RangeType per range, each its own
 * allocation of about 48 bytes, plus its canonical copy: a take of 500,000
 * ranges peaked at 120 MB in the backend, about 25 MB of which is the
 * result itself.
 */
Datum hilo_ranges_to_multirange(const HiloRange *ranges, uint32 nranges)
{
    /* Canonical, as make_multirange would make it: sorted, merged. */
    for (uint32 i = 1; i < nranges; i++) {
        if (ranges[i].first <= ranges[i - 1].last + 1) {
            HiloRange *copy = (HiloRange *)palloc(sizeof(HiloRange) * nranges);
            memcpy(copy, ranges, sizeof(HiloRange) * nranges);
            nranges = (uint32)hilo_ranges_normalize(copy, nranges);
            ranges = copy;
            break;
        }
    }
    /* Only the empty multirange needs the type cache (a lookup per call). */
    if (nranges == 0)
        return MultirangeTypePGetDatum(
            make_empty_multirange(INT8MULTIRANGEOID, int8range_typcache()));
    /* int8 is passed by value, 8 bytes, aligned as double: a bounded
     * [first, last + 1) range stores its two bounds in 16 bytes. */
    const Size bounds_size = 2 * sizeof(int64);
    Size header = att_align_nominal(
        sizeof(MultirangeType) + (nranges - 1) * sizeof(uint32) + nranges * sizeof(uint8),
        TYPALIGN_DOUBLE);
    Size size = add_size(header, mul_size(nranges, bounds_size));
    if (!AllocSizeIsValid(size))
        ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
                        errmsg("a multirange of %u ranges is too large", nranges),
                        errhint("Use hilo_take_ranges for takes of this many ranges.")));
    MultirangeType *mr = (MultirangeType *)palloc0(size);
    SET_VARSIZE(mr, size);
    mr->multirangetypid = INT8MULTIRANGEOID;
    mr->rangeCount = nranges;
    uint32 *items = (uint32 *)((char *)mr + sizeof(MultirangeType));
    uint8 *flags = (uint8 *)(items + (nranges - 1));
    char *bounds = (char *)mr + header;
    for (uint32 i = 0; i < nranges; i++) {
        if (i > 0)
            items[i - 1] = (i % HILO_MULTIRANGE_ITEM_OFFSET_STRIDE) != 0
                               ? (uint32)bounds_size
                               : (uint32)(i * bounds_size) | HILO_MULTIRANGE_ITEM_OFF_BIT;
        flags[i] = RANGE_LB_INC; /* [first, last + 1): both bounds finite */
        int64 lower = ranges[i].first, upper = ranges[i].last + 1;
        memcpy(bounds + i * bounds_size, &lower, sizeof(int64));
        memcpy(bounds + i * bounds_size + sizeof(int64), &upper, sizeof(int64));
    }
    return MultirangeTypePGetDatum(mr);
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
