/*
 * merge_spans.cpp: which part of the free list the allocator's merge pass
 * reads.
 *
 * Adjacent free ranges are merged by the allocator after pushes commit
 * (docs/design.md, "Why the free list is rows"). The pass used to read all
 * of hilo.free_ranges, every sequence, each time anything was pushed: with
 * 100,000 fragments, a push of one ID cost a read of 100,000 rows. Now a
 * push notes the spans of IDs it freed that a free row touches (a span per
 * such range, joined only where they touch, or across the smallest gaps
 * when there are many: alloc/free_list_push.cpp), the notes travel to the
 * allocator with the "free ranges changed" flag at commit, and the pass
 * merges only rows in those
 * spans, plus the row just below each and the row just above (the only
 * other rows a pushed range can touch). The allocator's own returns note
 * their spans the same way. Too many sequences at once, a failed pass, or
 * an allocator start fall back to a pass over everything.
 *
 * Whatever it has to do, a pass (one transaction) reads a bounded number
 * of rows and leaves the rest for the next: the allocator serves every
 * role's requests of the database in between, so one role's pushes cannot
 * hold up another's takes for longer than a pass (test/t/058).
 *
 * A span is only where to look: merging is never needed for correctness
 * (takes and refills read ranges whatever their shape), so a span missed
 * costs a merge, never an ID.
 */
#include "worker.h"

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

/* A span queued in the allocator, with where its next part starts from
 * (below). */
typedef struct PendingSpan {
    HiloMergeSpan span;
    bool below_known;
    int64 below;
} PendingSpan;

static HiloMergeSpan &span_of(HiloMergeSpan &span)
{
    return span;
}

static HiloMergeSpan &span_of(PendingSpan &pending)
{
    return pending.span;
}

/*
 * Adds a span to a list (of spans, or of pending spans); returns where it
 * went (-1: overflow). A span widens another of its sequence only where
 * they touch: two pushes at the two ends of a long free list are two short
 * spans, not one over the whole list. A full list widens the nearest span
 * of the same sequence; with none, it overflows (the pass then reads
 * everything, a bounded part at a time).
 */
template <typename Span>
static int add_span(Span *spans, uint32 *count, uint32 capacity, bool *overflow, HiloMergeSpan span)
{
    int nearest = -1;
    uint64 nearest_gap = 0;
    for (uint32 i = 0; i < *count; i++) {
        HiloMergeSpan &s = span_of(spans[i]);
        if (s.seq_id != span.seq_id)
            continue;
        if (spans_touch(&s, &span)) {
            s.lo = Min(s.lo, span.lo);
            s.hi = Max(s.hi, span.hi);
            return (int)i;
        }
        uint64 gap = span_gap(&s, &span);
        if (nearest < 0 || gap < nearest_gap) {
            nearest = (int)i;
            nearest_gap = gap;
        }
    }
    if (*count < capacity) {
        span_of(spans[*count]) = span;
        return (int)(*count)++;
    }
    if (nearest >= 0) {
        HiloMergeSpan &s = span_of(spans[nearest]);
        s.lo = Min(s.lo, span.lo);
        s.hi = Max(s.hi, span.hi);
        return nearest;
    }
    *overflow = true;
    return -1;
}

void hilo_merge_note_span(int32 seq_id, int64 lo, int64 hi)
{
    uint32 count = (uint32)nnoted;
    add_span(noted, &count, HILO_MERGE_SPANS, &noted_overflow, {seq_id, lo, hi});
    nnoted = (int)count;
}

/* Spans of `ranges` (ascending, disjoint) when ranges fewer than `join`
 * IDs apart share one; returns how many, written to `out` unless NULL. */
static uint32 join_ranges(int32 seq_id, const HiloRange *ranges, uint32 nranges, uint64 join,
                          HiloMergeSpan *out)
{
    uint32 n = 0;
    HiloMergeSpan span = {seq_id, ranges[0].first, ranges[0].last};
    for (uint32 i = 1; i < nranges; i++) {
        if ((uint64)ranges[i].first - (uint64)span.hi <= join) {
            span.hi = ranges[i].last;
            continue;
        }
        if (out != NULL)
            out[n] = span;
        n++;
        span = {seq_id, ranges[i].first, ranges[i].last};
    }
    if (out != NULL)
        out[n] = span;
    return n + 1;
}

/*
 * A push of many ranges notes a few spans, not one per range: noting
 * 100,000 single-ID ranges one at a time looked through every noted span
 * for each (a tenth of the push). The ranges are joined across the
 * smallest gaps that leave at most HILO_MERGE_SPANS spans (the gap limit
 * doubling from IDs that touch), which is what widening the nearest span
 * did once the list was full, and a push of few ranges notes each alone,
 * as before.
 */
void hilo_merge_note_spans(int32 seq_id, const HiloRange *ranges, uint32 nranges)
{
    if (nranges == 0)
        return;
    uint64 join = 1; /* touching: no ID between */
    while (join < PG_UINT64_MAX / 2 &&
           join_ranges(seq_id, ranges, nranges, join, NULL) > HILO_MERGE_SPANS)
        join *= 2;
    HiloMergeSpan spans[HILO_MERGE_SPANS];
    if (join_ranges(seq_id, ranges, nranges, join, NULL) > HILO_MERGE_SPANS) {
        /* Never for ascending ranges: the last limit joins them all. */
        for (uint32 i = 0; i < nranges; i++)
            hilo_merge_note_span(seq_id, ranges[i].first, ranges[i].last);
        return;
    }
    uint32 nspans = join_ranges(seq_id, ranges, nranges, join, spans);
    for (uint32 i = 0; i < nspans; i++)
        hilo_merge_note_span(seq_id, spans[i].lo, spans[i].hi);
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
 *
 * A span part way through keeps the first row of the run its last part
 * ended in (`below`): the next part reads that row by its key, not the
 * rows before it, which earlier parts deleted and which stay in the index
 * until vacuumed (a long run merged over many passes would otherwise walk
 * them all again every pass).
 */
#define HILO_MERGE_PASS_ROWS 2048
#define HILO_MERGE_STATEMENT_ROWS 16
static PendingSpan pending[HILO_MERGE_SPANS * 2];
static uint32 npending = 0;
static bool all_pending = false; /* a pass over everything, from the cursor */
static bool all_again = false;   /* asked for while one ran: once more after it */
static PendingSpan all_at;       /* where it is: seq_id, from lo */
static bool merge_ran = false;   /* since hilo_merge_ran() was last asked */

static void all_restart(void)
{
    all_at.span = {PG_INT32_MIN, PG_INT64_MIN, PG_INT64_MAX};
    all_at.below_known = false;
}

/*
 * One statement merges runs of adjacent free ranges into single rows (rule
 * 3): at most `limit` rows from where a span (or the cursor over
 * everything) has got to, plus the row just below (the only other row a
 * range there can touch): the row a former part named ($5), or the row a
 * take made of it since (a take shrinks a free row from its start; looked
 * for upwards, over the IDs the take used, not down over the run's deleted
 * rows), else, with none named, the last row before lo. With seq_id fixed,
 * the DELETE and UPDATE find the rows of each merged run by the primary
 * key, and the DELETE reads no key below lo (rows of the run there were
 * deleted by former parts). It answers how many rows it read from lo on,
 * the last one, and the first row of the last run, where the next part
 * goes on.
 */
static const char *span_sql =
    "WITH below AS ("
    "  SELECT coalesce((SELECT first_id FROM hilo.free_ranges WHERE seq_id = $1 AND first_id = $5),"
    "                  (SELECT min(first_id) FROM hilo.free_ranges"
    "                    WHERE seq_id = $1 AND first_id > $5 AND first_id < $2),"
    "                  (SELECT max(first_id) FROM hilo.free_ranges"
    "                    WHERE seq_id = $1 AND first_id < $2 AND $5 IS NULL)) AS first_id"
    "), marked AS ("
    "  SELECT first_id, last_id, lag(last_id) OVER (ORDER BY first_id) AS prev_last"
    "    FROM ((SELECT first_id, last_id FROM hilo.free_ranges"
    "            WHERE seq_id = $1 AND first_id = (SELECT first_id FROM below))"
    "          UNION ALL"
    "          (SELECT first_id, last_id FROM hilo.free_ranges"
    "            WHERE seq_id = $1 AND first_id BETWEEN $2 AND $3"
    "            ORDER BY first_id LIMIT $4)) r"
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
    "   WHERE f.seq_id = $1 AND f.first_id > m.first_id AND f.first_id >= $2"
    "     AND f.first_id <= m.last_id"
    "  RETURNING 1"
    "), grown AS ("
    "  UPDATE hilo.free_ranges f SET last_id = m.last_id FROM merged m"
    "   WHERE f.seq_id = $1 AND f.first_id = m.first_id"
    "  RETURNING 1"
    ")"
    " SELECT (SELECT count(*) FROM marked WHERE first_id >= $2),"
    "        (SELECT max(first_id) FROM marked),"
    "        (SELECT min(first_id) FROM runs WHERE run = (SELECT max(run) FROM runs))";

/* Merges the next part of `p`, reading at most `limit` rows from its lo;
 * returns whether the span is done, with the rows read. */
static bool merge_span_part(PendingSpan *p, int64 limit, int64 *read)
{
    HiloMergeSpan *span = &p->span;
    Oid types[5] = {INT4OID, INT8OID, INT8OID, INT8OID, INT8OID};
    /* hi + 1: a row starting right above the span touches it. */
    int64 above = span->hi < PG_INT64_MAX ? span->hi + 1 : span->hi;
    Datum values[5] = {Int32GetDatum(span->seq_id), Int64GetDatum(span->lo), Int64GetDatum(above),
                       Int64GetDatum(limit), Int64GetDatum(p->below)};
    char nulls[6] = "    n";
    if (p->below_known)
        nulls[4] = ' ';
    hilo_spi_exec(span_sql, 5, types, values, nulls, false, 1);
    merge_ran = true;
    bool isnull;
    *read = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
    int64 last =
        DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
    if (isnull || *read < limit || last == PG_INT64_MAX)
        return true;
    span->lo = last + 1;
    p->below =
        DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull));
    p->below_known = !isnull;
    return false;
}

/* Merges the next part of the pass over everything: one sequence at a
 * time, in seq_id order, as a span over all its IDs. Returns false when
 * no sequence is left; `read` is what the statement read. */
static bool merge_all_part(int64 limit, int64 *read)
{
    static const char *next_sql =
        "SELECT seq_id FROM hilo.free_ranges WHERE seq_id >= $1 ORDER BY seq_id LIMIT 1";
    *read = 0;
    hilo_spi_exec1(next_sql, INT4OID, Int32GetDatum(all_at.span.seq_id), false, 1);
    merge_ran = true;
    if (SPI_processed == 0)
        return false;
    int32 seq = hilo_spi_int32(0, 1);
    if (seq != all_at.span.seq_id) {
        all_at.span = {seq, PG_INT64_MIN, PG_INT64_MAX};
        all_at.below_known = false;
    }
    if (!merge_span_part(&all_at, limit, read))
        return true; /* more of this sequence next time */
    if (seq == PG_INT32_MAX)
        return false;
    all_at.span = {seq + 1, PG_INT64_MIN, PG_INT64_MAX};
    all_at.below_known = false;
    return true;
}

void hilo_merge_free_ranges(bool all, const HiloMergeSpan *spans, uint32 nspans)
{
    /* Queue what pushes published and the allocator's own returns. A span
     * added to one part way through reads its row below afresh. */
    for (uint32 i = 0; i < nspans + (uint32)nnoted; i++) {
        const HiloMergeSpan &span = i < nspans ? spans[i] : noted[i - nspans];
        int at = add_span(pending, &npending, lengthof(pending), &all, span);
        if (at >= 0)
            pending[at].below_known = false;
    }
    all |= noted_overflow;
    hilo_merge_forget_spans();
    if (all) {
        if (all_pending)
            all_again = true;
        else {
            all_pending = true;
            all_restart();
        }
    }

    /* One pass: spans first (short, and what was just pushed), then the
     * pass over everything, until the pass's rows are read (a statement
     * counts as some rows however few it reads). */
    int64 budget = HILO_MERGE_PASS_ROWS;
    int64 read_total = 0;
    uint32 kept = 0;
    for (uint32 i = 0; i < npending; i++) {
        if (budget >= 1) {
            int64 read;
            bool done = merge_span_part(&pending[i], budget, &read);
            budget -= read + HILO_MERGE_STATEMENT_ROWS;
            read_total += read;
            if (done)
                continue;
        }
        pending[kept++] = pending[i];
    }
    npending = kept;
    while (all_pending && budget >= 1) {
        int64 read;
        bool more = merge_all_part(budget, &read);
        budget -= read + HILO_MERGE_STATEMENT_ROWS;
        read_total += read;
        if (!more) {
            /* Asked for again meanwhile: by the next maintenance round,
             * not at once (pushes to many sequences that keep coming would
             * keep the allocator reading everything without a pause). */
            all_pending = false;
            if (all_again)
                hilo_worker_merge_again(true);
            all_again = false;
            all_restart();
        }
    }
    elog(DEBUG1, "hilo: merge pass read " INT64_FORMAT " rows of hilo.free_ranges; %s", read_total,
         hilo_merge_pending() ? "more to do" : "done");
}

bool hilo_merge_pending(void)
{
    return npending > 0 || all_pending;
}

bool hilo_merge_ran(void)
{
    bool ran = merge_ran;
    merge_ran = false;
    return ran;
}

void hilo_merge_abandon(void)
{
    npending = 0;
    all_pending = all_again = false;
}
