/*
 * alloc/free_list_push.cpp: the catalog side of hilo_push and
 * hilo_push_ranges (sql/push.cpp): the checks that every pushed ID was
 * handed out and is not free already, and the rows of hilo.free_ranges a
 * push writes, in the caller's transaction.
 *
 * Pushes of one sequence are serialized by a per-sequence lock held to the
 * end of the pushing transaction, and check against the latest committed
 * state (not the caller's snapshot): so two transactions can never both
 * free the same ID, and IDs taken earlier in the same statement or in a
 * REPEATABLE READ transaction are seen as handed out.
 */
#include "dispatch.h"
#include "internal.h"

extern "C" {
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
}

/*
 * Where a push's checks read the catalog: the pushed ranges in groups, a
 * range joining the group before it when fewer than HILO_PUSH_READ_GAP IDs
 * lie between them. A check reads the rows starting inside each group plus
 * the one starting last before it (the only other row that can reach into
 * it); the free list's check also the row starting right after it. Rows
 * between groups far apart are not read: two IDs pushed at the two ends of
 * a long free list read a few rows, not the list.
 */
#define HILO_PUSH_READ_GAP 1024

/* The groups of `ranges` (above), built once per push for both checks:
 * three int8 arrays, their first and last IDs and where each group's row
 * before may start. */
static void group_ranges(const HiloRange *ranges, uint32 nranges, Datum groups[3])
{
    Datum *los = (Datum *)palloc(sizeof(Datum) * nranges);
    Datum *his = (Datum *)palloc(sizeof(Datum) * nranges);
    Datum *froms = (Datum *)palloc(sizeof(Datum) * nranges);
    int ngroups = 0;
    for (uint32 i = 0; i < nranges; i++) {
        if (ngroups > 0 &&
            (uint64)ranges[i].first - (uint64)DatumGetInt64(his[ngroups - 1]) <= HILO_PUSH_READ_GAP)
            his[ngroups - 1] = Int64GetDatum(ranges[i].last);
        else {
            /* The row before a group is looked for above the group before
             * it: a row starting lower that reaches into this group starts
             * in that group, or is that group's row before. So no lookup
             * walks back over rows (or dead index entries) below another. */
            froms[ngroups] = ngroups == 0 ? Int64GetDatum(PG_INT64_MIN)
                                          : Int64GetDatum(DatumGetInt64(his[ngroups - 1]) + 1);
            los[ngroups] = Int64GetDatum(ranges[i].first);
            his[ngroups++] = Int64GetDatum(ranges[i].last);
        }
    }
    groups[0] = PointerGetDatum(construct_array(los, ngroups, INT8OID, 8, true, 'd'));
    groups[1] = PointerGetDatum(construct_array(his, ngroups, INT8OID, 8, true, 'd'));
    groups[2] = PointerGetDatum(construct_array(froms, ngroups, INT8OID, 8, true, 'd'));
    pfree(los);
    pfree(his);
    pfree(froms);
}

/* Reads the catalog rows (first, last) `sql` finds near the groups into a
 * sorted array; `sql` takes the sequence and the groups' three arrays. */
static HiloRange *rows_near(const char *sql, int32 seq_id, const Datum groups[3], uint32 *count)
{
    Oid types[4] = {INT4OID, INT8ARRAYOID, INT8ARRAYOID, INT8ARRAYOID};
    Datum values[4] = {Int32GetDatum(seq_id), groups[0], groups[1], groups[2]};
    hilo_spi_exec_snapshot(sql, 4, types, values, NULL, GetLatestSnapshot(), true, 0);

    uint64 rows = SPI_processed;
    HiloRange *out = (HiloRange *)palloc(sizeof(HiloRange) * Max(rows, 1));
    uint32 n = 0;
    for (uint64 i = 0; i < rows; i++) {
        HiloRange r = {hilo_spi_int64(i, 1), hilo_spi_int64(i, 2)};
        if (r.first <= r.last)
            out[n++] = r;
    }
    *count = n;
    return out;
}

static void refuse_push(const HiloSequence *seq, HiloRange bad, const char *why)
{
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("cannot push IDs %s to hilo sequence \"%s\": %s", hilo_format_range(bad),
                           seq->name, why),
                    errdetail("Nothing was pushed.")));
}

/* Refuses the push if `find` finds a bad part of one of `ranges` among the
 * catalog rows `sql` reads near them (rows_near); returns those rows
 * (palloc'd, *nrows of them). */
template <typename Find>
static HiloRange *refuse_where(const HiloSequence *seq, const char *sql, const Datum groups[3],
                               const HiloRange *ranges, uint32 nranges, Find find, const char *why,
                               uint32 *nrows)
{
    HiloRange *rows = rows_near(sql, seq->seq_id, groups, nrows);
    for (uint32 i = 0; i < nranges; i++) {
        HiloRange bad;
        if (find(rows, *nrows, ranges[i], &bad))
            refuse_push(seq, bad, why);
    }
    return rows;
}

/* The first of the sorted `rows` that starts at or above `id`. */
static uint32 first_starting_from(const HiloRange *rows, uint32 nrows, int64 id)
{
    uint32 lo = 0, hi = nrows;
    while (lo < hi) {
        uint32 mid = lo + (hi - lo) / 2;
        if (rows[mid].first < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/*
 * The pushed ranges (into `out`, returning how many) that a free row
 * already there touches: one ending right below a range or starting right
 * above it. Only they can be merged: the pushed ranges are merged among
 * themselves already (a multirange, or normalized), and overlap no row.
 * `rows` are the free rows near them, sorted and disjoint: every row that
 * starts inside a group of the push or right after it, and the one before
 * it. A row the allocator gives back after these were read notes its own
 * span; should a merge be missed all the same, it costs a row, never an ID.
 */
static uint32 touching_rows(const HiloRange *rows, uint32 nrows, const HiloRange *ranges,
                            uint32 nranges, HiloRange *out)
{
    uint32 n = 0;
    for (uint32 i = 0; i < nranges; i++) {
        HiloRange r = ranges[i];
        uint32 at = first_starting_from(rows, nrows, r.first);
        bool below = at > 0 && r.first > PG_INT64_MIN && rows[at - 1].last == r.first - 1;
        bool above = r.last < PG_INT64_MAX && at < nrows && rows[at].first == r.last + 1;
        if (below || above)
            out[n++] = r;
    }
    return n;
}

/* Pushes are refused for sequences whose IDs must rise (22023). */
static void refuse_ordered(const HiloSequence *seq, const char *name)
{
    if (seq->ordering == HILO_ORDERING_CLUSTER || seq->ordering == HILO_ORDERING_QUORUM)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("cannot push IDs to hilo sequence \"%s\": it is ordered across the "
                               "cluster",
                               name),
                        errdetail("Pushed-back IDs would be handed out below IDs handed out before "
                                  "them."),
                        errhint("Create the sequence with ordering => 'none' to recycle IDs.")));
    if (seq->ordering == HILO_ORDERING_NODE)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("cannot push IDs to hilo sequence \"%s\": it is monotonic", name),
                        errdetail("Pushed-back IDs would be handed out below IDs handed out "
                                  "before them."),
                        errhint("Create the sequence without monotonic => true to recycle "
                                "IDs.")));
}

/*
 * Checks and records a push of sorted, disjoint, merged `ranges`.
 * Returns how many IDs it recycles.
 */
int64 hilo_free_list_push(const char *name, HiloRange *ranges, uint32 nranges)
{
    Oid caller = GetUserId();
    HiloCatalogAccess access;
    HiloSequence seq;
    hilo_catalog_begin(&access);
    hilo_catalog_prefer_indexes();
    (void)hilo_lock_named_sequence(name, caller, NULL, 0, &seq);
    refuse_ordered(&seq, name);

    if (nranges == 0) {
        hilo_catalog_end(&access);
        return 0;
    }

    uint64 total = 0;
    for (uint32 i = 0; i < nranges; i++) {
        if (ranges[i].first < seq.start_value || ranges[i].last > seq.max_value) {
            HiloRange r = ranges[i];
            ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                            errmsg("cannot push IDs %s to hilo sequence \"%s\": outside its range "
                                   "[" INT64_FORMAT "," INT64_FORMAT "]",
                                   hilo_format_range(r), name, seq.start_value, seq.max_value),
                            errdetail("Nothing was pushed.")));
        }
        total += hilo_range_length(ranges[i]);
    }

    Datum groups[3];
    group_ranges(ranges, nranges, groups);

    /* Handed out = below next_hi_value in some window. */
    static const char *windows_sql =
        "SELECT DISTINCT w.first, w.last"
        "  FROM unnest($2::bigint[], $3::bigint[], $4::bigint[]) AS g(lo, hi, from_id),"
        " LATERAL ((SELECT window_start_value AS first, next_hi_value - 1 AS last"
        "             FROM hilo.windows"
        "            WHERE seq_id = $1 AND window_start_value BETWEEN g.lo AND g.hi)"
        "          UNION ALL "
        "          (SELECT window_start_value, next_hi_value - 1 FROM hilo.windows"
        "            WHERE seq_id = $1 AND window_start_value < g.lo"
        "              AND window_start_value >= g.from_id"
        "            ORDER BY window_start_value DESC LIMIT 1)) AS w"
        " ORDER BY 1";
    uint32 nwindows;
    pfree(refuse_where(&seq, windows_sql, groups, ranges, nranges, hilo_ranges_find_uncovered,
                       "they were never handed out", &nwindows));

    /* Rows starting right after a group too, for touching_rows. */
    static const char *free_sql =
        "SELECT DISTINCT f.first_id, f.last_id"
        "  FROM unnest($2::bigint[], $3::bigint[], $4::bigint[]) AS g(lo, hi, from_id),"
        " LATERAL ((SELECT first_id, last_id FROM hilo.free_ranges"
        "            WHERE seq_id = $1 AND first_id BETWEEN g.lo AND g.hi + 1)"
        "          UNION ALL "
        "          (SELECT first_id, last_id FROM hilo.free_ranges"
        "            WHERE seq_id = $1 AND first_id < g.lo AND first_id >= g.from_id"
        "            ORDER BY first_id DESC LIMIT 1)) AS f"
        " ORDER BY 1";
    uint32 nfree;
    HiloRange *free_rows =
        refuse_where(&seq, free_sql, groups, ranges, nranges, hilo_list_find_overlap,
                     "they are already free: pushed back before and not handed out since", &nfree);

    /* Still in this node's pool, on the way into it, or unissued in a
     * backend's buffer: not handed out to anybody yet. */
    HiloRange unissued;
    if (hilo_pool_find_unissued(MyDatabaseId, seq.creation, seq.seq_id, ranges, nranges, &unissued))
        refuse_push(&seq, unissued,
                    "they are not handed out now: they wait in a pool or buffer of this "
                    "node (never handed out yet, or pushed back before and not handed out "
                    "since)");

    hilo_free_rows_insert(seq.seq_id, ranges, nranges);
    /* The merge pass reads only where a pushed range touches a free row:
     * after 100,000 single-ID ranges pushed into a list with none beside
     * them, it read all 100,000 rows for nothing. (Before the catalog
     * access ends: the rows read live in its memory.) */
    HiloRange *touching = (HiloRange *)palloc(sizeof(HiloRange) * nranges);
    hilo_merge_note_spans(seq.seq_id, touching,
                          touching_rows(free_rows, nfree, ranges, nranges, touching));
    hilo_catalog_end(&access);

    hilo_note_push_at_commit(seq.creation, seq.seq_id);
    hilo_allocator_wake_at_commit(true);
    return (int64)total;
}
