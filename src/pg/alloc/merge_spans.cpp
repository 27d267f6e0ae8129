/*
 * merge_spans.cpp: which part of the free list the allocator's merge pass
 * reads (issue 12).
 *
 * Adjacent free ranges are merged by the allocator after pushes commit
 * (docs/design.md, "Why the free list is rows"). The pass used to read all
 * of hilo.free_ranges, every sequence, each time anything was pushed: with
 * 100,000 fragments, a push of one ID cost a read of 100,000 rows. Now a
 * push notes the spans of IDs it freed (a span per pushed range, joined
 * only where they touch), the notes travel to the allocator with the "free
 * ranges changed" flag at commit, and the pass merges only rows in those
 * spans, plus the row just below each and the row just above (the only
 * other rows a pushed range can touch). The allocator's own returns note
 * their spans the same way. Too many sequences at once, a failed pass, or
 * an allocator start fall back to a pass over everything.
 *
 * Whatever it has to do, a pass (one transaction) reads a bounded number
 * of rows and leaves the rest for the next: the allocator serves every
 * role's requests of the database in between, so one role's pushes cannot
 * hold up another's takes for longer than a pass (test/t/096).
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

/* Whether two spans of one sequence overlap or touch (no ID between them). */
static bool spans_touch(const HiloMergeSpan *a, const HiloMergeSpan *b)
{
    const HiloMergeSpan *low = a->lo <= b->lo ? a : b, *high = a->lo <= b->lo ? b : a;
    return high->lo <= low->hi || (uint64)high->lo - (uint64)low->hi == 1;
}

/* IDs between two spans of one sequence, saturated: how much widening one
 * to take in the other makes the pass read. */
static uint64 span_gap(const HiloMergeSpan *a, const HiloMergeSpan *b)
{
    const HiloMergeSpan *low = a->lo <= b->lo ? a : b, *high = a->lo <= b->lo ? b : a;
    return high->lo <= low->hi ? 0 : (uint64)high->lo - (uint64)low->hi;
}

/*
 * Adds a span to a list. A span widens another of its sequence only where
 * they touch: two pushes at the two ends of a long free list are two short
 * spans, not one over the whole list. A full list widens the nearest span
 * of the same sequence; with none, it overflows (the pass then reads
 * everything, a bounded part at a time).
 */
static void add_span(HiloMergeSpan *spans, uint32 *count, uint32 capacity, bool *overflow,
                     HiloMergeSpan span)
{
    int nearest = -1;
    uint64 nearest_gap = 0;
    for (uint32 i = 0; i < *count; i++) {
        if (spans[i].seq_id != span.seq_id)
            continue;
        if (spans_touch(&spans[i], &span)) {
            spans[i].lo = Min(spans[i].lo, span.lo);
            spans[i].hi = Max(spans[i].hi, span.hi);
            return;
        }
        uint64 gap = span_gap(&spans[i], &span);
        if (nearest < 0 || gap < nearest_gap) {
            nearest = (int)i;
            nearest_gap = gap;
        }
    }
    if (*count < capacity)
        spans[(*count)++] = span;
    else if (nearest >= 0) {
        spans[nearest].lo = Min(spans[nearest].lo, span.lo);
        spans[nearest].hi = Max(spans[nearest].hi, span.hi);
    } else
        *overflow = true;
}

void hilo_merge_note_span(int32 seq_id, int64 lo, int64 hi)
{
    uint32 count = (uint32)nnoted;
    add_span(noted, &count, HILO_MERGE_SPANS, &noted_overflow, {seq_id, lo, hi});
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
        add_span(e->merge_spans, &e->nmerge_spans, HILO_MERGE_SPANS, &e->merge_all, noted[i]);
    e->merge_all |= noted_overflow;
    hilo_merge_forget_spans();
}

/*
 * The allocator's merge work still to do. A pass (one transaction) reads at
 * most HILO_MERGE_PASS_ROWS rows of hilo.free_ranges; what it did not reach
 * waits here for the next pass, and the allocator serves requests in
 * between, so no push, however wide or scattered, holds up another
 * sequence's takes for longer than one pass.
 */
#define HILO_MERGE_PASS_ROWS 4096
#define HILO_MERGE_STATEMENT_ROWS 16
static HiloMergeSpan pending[HILO_MERGE_SPANS * 2];
static uint32 npending = 0;
static bool all_pending = false; /* a pass over everything, from the cursor */
static bool all_again = false;   /* asked for while one ran: once more after it */
static int32 all_seq = PG_INT32_MIN;
static int64 all_from = PG_INT64_MIN;

/*
 * One statement merges runs of adjacent free ranges into single rows (rule
 * 3): at most `limit` rows from where a span (or the cursor over
 * everything) has got to, plus the row just below (the only other row a
 * range there can touch). It answers how many rows it read and the last
 * one, where the next statement goes on. With seq_id fixed, the DELETE
 * and UPDATE find the rows of each merged run by the primary key.
 */
static const char *span_sql =
    "WITH marked AS ("
    "  SELECT first_id, last_id, lag(last_id) OVER (ORDER BY first_id) AS prev_last"
    "    FROM (SELECT first_id, last_id FROM hilo.free_ranges"
    "           WHERE seq_id = $1"
    "             AND first_id >= coalesce((SELECT max(first_id) FROM hilo.free_ranges"
    "                                        WHERE seq_id = $1 AND first_id < $2), $2)"
    "             AND first_id <= $3"
    "           ORDER BY first_id LIMIT $4) r"
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
    "), grown AS ("
    "  UPDATE hilo.free_ranges f SET last_id = m.last_id FROM merged m"
    "   WHERE f.seq_id = $1 AND f.first_id = m.first_id"
    "  RETURNING 1"
    ")"
    " SELECT count(*) OVER (), first_id FROM marked ORDER BY first_id DESC LIMIT 1";
/* Merges from where `span` has got to, reading at most `limit` rows;
 * returns the rows read and moves span->lo past them (done: read < limit). */
static int64 merge_span_part(HiloMergeSpan *span, int64 limit)
{
    Oid types[4] = {INT4OID, INT8OID, INT8OID, INT8OID};
    /* hi + 1: a row starting right above the span touches it. */
    int64 above = span->hi < PG_INT64_MAX ? span->hi + 1 : span->hi;
    Datum values[4] = {Int32GetDatum(span->seq_id), Int64GetDatum(span->lo), Int64GetDatum(above),
                       Int64GetDatum(limit)};
    hilo_spi_exec(span_sql, 4, types, values, NULL, false, 1);
    if (SPI_processed == 0)
        return 0;
    int64 read = hilo_spi_int64(0, 1);
    int64 last = hilo_spi_int64(0, 2);
    /* The next part starts above the last row read; the row just below
     * that (the last row, or the run it merged into) is read again. */
    if (last < PG_INT64_MAX)
        span->lo = Max(span->lo, last + 1);
    return read;
}

/* Merges the next part of the pass over everything: one sequence at a
 * time, in seq_id order, as a span over all its IDs. Returns false when
 * no sequence is left; `read` is what the statement read. */
static bool merge_all_part(int64 limit, int64 *read)
{
    static const char *next_sql =
        "SELECT seq_id FROM hilo.free_ranges WHERE seq_id >= $1 ORDER BY seq_id LIMIT 1";
    *read = 0;
    hilo_spi_exec1(next_sql, INT4OID, Int32GetDatum(all_seq), false, 1);
    if (SPI_processed == 0)
        return false;
    int32 seq = hilo_spi_int32(0, 1);
    if (seq != all_seq) {
        all_seq = seq;
        all_from = PG_INT64_MIN;
    }
    HiloMergeSpan span = {seq, all_from, PG_INT64_MAX};
    *read = merge_span_part(&span, limit);
    if (*read >= limit)
        all_from = span.lo; /* more of this sequence next time */
    else if (seq == PG_INT32_MAX)
        return false;
    else {
        all_seq = seq + 1;
        all_from = PG_INT64_MIN;
    }
    return true;
}

void hilo_merge_free_ranges(bool all, const HiloMergeSpan *spans, uint32 nspans)
{
    /* Queue what pushes published and the allocator's own returns. */
    for (uint32 i = 0; i < nspans; i++)
        add_span(pending, &npending, lengthof(pending), &all, spans[i]);
    for (int i = 0; i < nnoted; i++)
        add_span(pending, &npending, lengthof(pending), &all, noted[i]);
    all |= noted_overflow;
    hilo_merge_forget_spans();
    if (all) {
        if (all_pending)
            all_again = true;
        else {
            all_pending = true;
            all_seq = PG_INT32_MIN;
            all_from = PG_INT64_MIN;
        }
    }

    /* One pass: spans first (short, and what was just pushed), then the
     * pass over everything, until the pass's rows are read (a statement
     * counts as some rows however few it reads). A statement reads at
     * least two rows, so that each gets past the row it reads again. */
    int64 budget = HILO_MERGE_PASS_ROWS;
    int64 read_total = 0;
    uint32 kept = 0;
    for (uint32 i = 0; i < npending; i++) {
        int64 limit = budget;
        if (limit >= 2) {
            int64 read = merge_span_part(&pending[i], limit);
            budget -= read + HILO_MERGE_STATEMENT_ROWS;
            read_total += read;
            if (read < limit)
                continue; /* the span is done */
        }
        pending[kept++] = pending[i];
    }
    npending = kept;
    while (all_pending && budget >= 2) {
        int64 read;
        bool more = merge_all_part(budget, &read);
        budget -= read + HILO_MERGE_STATEMENT_ROWS;
        read_total += read;
        if (!more) {
            all_pending = all_again;
            all_again = false;
            all_seq = PG_INT32_MIN;
            all_from = PG_INT64_MIN;
            break; /* another, if asked for, from the start in the next pass */
        }
    }
    elog(DEBUG1, "hilo: merge pass read " INT64_FORMAT " rows of hilo.free_ranges; %s", read_total,
         hilo_merge_pending() ? "more to do" : "done");
}

bool hilo_merge_pending(void)
{
    return npending > 0 || all_pending;
}

void hilo_merge_abandon(void)
{
    npending = 0;
    all_pending = all_again = false;
}
