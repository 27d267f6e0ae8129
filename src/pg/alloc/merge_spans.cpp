/*
 * merge_spans.cpp: which part of the free list the allocator's merge pass
 * reads (issue 12).
 *
 * Adjacent free ranges are merged by the allocator after pushes commit
 * (docs/design.md, "Why the free list is rows"). The pass used to read all
 * of hilo.free_ranges, every sequence, each time anything was pushed: with
 * 100,000 fragments, a push of one ID cost a read of 100,000 rows. Now a
 * push notes the span of IDs it freed (its lowest and highest), the note
 * travels to the allocator with the "free ranges changed" flag at commit,
 * and the pass merges only rows in those spans, plus the row just below
 * each (the only other row a pushed range can touch). The allocator's own
 * returns note their spans the same way. Too many spans at once, a failed
 * pass, or an allocator start fall back to a pass over everything.
 *
 * A span is only where to look: merging is never needed for correctness
 * (takes and refills read ranges whatever their shape), so a span missed
 * costs a merge, never an ID.
 */
#include "alloc.h"

extern "C" {
#include "catalog/pg_type.h"
#include "executor/spi.h"
}

/* Spans noted by this process and not yet published (a pusher: until its
 * commit; the allocator: its own returns, until its next merge pass). */
static HiloMergeSpan noted[HILO_MERGE_SPANS];
static int nnoted = 0;
static bool noted_overflow = false;

/* Adds a span to a list, widening a span of the same sequence. */
static void add_span(HiloMergeSpan *spans, uint32 *count, bool *overflow, HiloMergeSpan span)
{
    for (uint32 i = 0; i < *count; i++) {
        if (spans[i].seq_id == span.seq_id) {
            spans[i].lo = Min(spans[i].lo, span.lo);
            spans[i].hi = Max(spans[i].hi, span.hi);
            return;
        }
    }
    if (*count < HILO_MERGE_SPANS)
        spans[(*count)++] = span;
    else
        *overflow = true;
}

void hilo_merge_note_span(int32 seq_id, int64 lo, int64 hi)
{
    uint32 count = (uint32)nnoted;
    add_span(noted, &count, &noted_overflow, {seq_id, lo, hi});
    nnoted = (int)count;
}

void hilo_merge_forget_spans(void)
{
    nnoted = 0;
    noted_overflow = false;
}

void hilo_merge_publish_spans_locked(HiloWorkerEntry *e)
{
    for (int i = 0; i < nnoted; i++)
        add_span(e->merge_spans, &e->nmerge_spans, &e->merge_all, noted[i]);
    e->merge_all |= noted_overflow;
    hilo_merge_forget_spans();
}

/* Merges runs of adjacent free ranges into single rows (rule 3): all of
 * the free list, or the rows of seq_id starting in [lo, hi + 1] and the row
 * just below lo. */
static void merge_rows(bool all, const HiloMergeSpan *span)
{
    static const char *all_sql =
        "WITH marked AS ("
        "  SELECT seq_id, first_id, last_id,"
        "         lag(last_id) OVER w AS prev_last FROM hilo.free_ranges"
        "  WINDOW w AS (PARTITION BY seq_id ORDER BY first_id)"
        "), runs AS ("
        "  SELECT seq_id, first_id, last_id,"
        "         sum(CASE WHEN first_id = prev_last + 1 THEN 0 ELSE 1 END)"
        "           OVER (PARTITION BY seq_id ORDER BY first_id) AS run"
        "    FROM marked"
        "), merged AS ("
        "  SELECT seq_id, min(first_id) AS first_id, max(last_id) AS last_id"
        "    FROM runs GROUP BY seq_id, run HAVING count(*) > 1"
        "), gone AS ("
        "  DELETE FROM hilo.free_ranges f USING merged m"
        "   WHERE f.seq_id = m.seq_id AND f.first_id > m.first_id AND f.first_id <= m.last_id"
        "  RETURNING 1"
        ")"
        " UPDATE hilo.free_ranges f SET last_id = m.last_id FROM merged m"
        "  WHERE f.seq_id = m.seq_id AND f.first_id = m.first_id";
    static const char *span_sql =
        "WITH marked AS ("
        "  SELECT first_id, last_id, lag(last_id) OVER (ORDER BY first_id) AS prev_last"
        "    FROM hilo.free_ranges"
        "   WHERE seq_id = $1"
        "     AND first_id >= coalesce((SELECT max(first_id) FROM hilo.free_ranges"
        "                                WHERE seq_id = $1 AND first_id < $2), $2)"
        "     AND first_id <= $3"
        "), runs AS ("
        "  SELECT first_id, last_id,"
        "         sum(CASE WHEN first_id = prev_last + 1 THEN 0 ELSE 1 END)"
        "           OVER (ORDER BY first_id) AS run"
        "    FROM marked"
        "), merged AS ("
        "  SELECT min(first_id) AS first_id, max(last_id) AS last_id"
        "    FROM runs GROUP BY run HAVING count(*) > 1"
        "), gone AS ("
        "  DELETE FROM hilo.free_ranges f USING merged m"
        "   WHERE f.seq_id = $1 AND f.first_id > m.first_id AND f.first_id <= m.last_id"
        "  RETURNING 1"
        ")"
        " UPDATE hilo.free_ranges f SET last_id = m.last_id FROM merged m"
        "  WHERE f.seq_id = $1 AND f.first_id = m.first_id";
    if (all) {
        hilo_spi_exec(all_sql, 0, NULL, NULL, NULL, false, 0);
        return;
    }
    Oid types[3] = {INT4OID, INT8OID, INT8OID};
    /* hi + 1: a row starting right above the span touches it. */
    int64 above = span->hi < PG_INT64_MAX ? span->hi + 1 : span->hi;
    Datum values[3] = {Int32GetDatum(span->seq_id), Int64GetDatum(span->lo), Int64GetDatum(above)};
    hilo_spi_exec(span_sql, 3, types, values, NULL, false, 0);
}

void hilo_merge_free_ranges(bool all, const HiloMergeSpan *spans, uint32 nspans)
{
    /* The allocator's own returns since the last pass. */
    HiloMergeSpan mine[HILO_MERGE_SPANS * 2];
    uint32 n = 0;
    for (uint32 i = 0; i < nspans; i++)
        add_span(mine, &n, &all, spans[i]);
    for (int i = 0; i < nnoted; i++)
        add_span(mine, &n, &all, noted[i]);
    all |= noted_overflow;
    if (all) {
        merge_rows(true, NULL);
        return;
    }
    for (uint32 i = 0; i < n; i++)
        merge_rows(false, &mine[i]);
}

void hilo_merge_spans_merged(void)
{
    hilo_merge_forget_spans();
}
