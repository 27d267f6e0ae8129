/*
 * alloc/reserve.cpp: what a reservation changes in the catalog. Runs only in
 * the allocator worker, inside its transaction, with SPI connected.
 *
 * A take draws, in this order:
 *   1. free ranges (pushed-back IDs), lowest first (recycled before fresh);
 *   2. open windows, lowest first;
 *   3. if still short, one range claimed straight above the high-water mark
 *      and recorded as a used-up window, so a huge n costs one row, not
 *      n / window_size.
 * Windows are topped up to min_open_windows before step 2 and after step 3.
 *
 * A reservation never fails for want of IDs: it returns what there is, and
 * the allocator decides whether a shortfall is an error (hilo_raise_short).
 *
 * Every step reads rows in order and stops when n is reached, so a take
 * costs O(number of ranges returned), whatever n is.
 */
#include "internal.h"
#include "window_rows.h"

extern "C" {
#include "access/heapam.h"
#include "access/tableam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/indexing.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
}

/* Rows read per round trip while collecting free ranges or windows. */
#define HILO_ROWS_PER_FETCH 1000

typedef struct SequenceState {
    int32 seq_id;
    const char *name;
    int64 start_value;
    int64 max_value;
    int64 window_size;
    int32 min_open_windows;
    int64 high_water_mark;
    bool high_water_mark_changed;
    int32 node_bits;     /* > 0: this node claims windows in its own slice */
    ItemPointerData tid; /* of the row version locked */
    /* Windows claimed above the high-water mark, not yet written
     * (write_claimed_windows): start, end (exclusive), next_hi_value. */
    int64 *claimed;
    uint32 nclaimed;
    uint32 claimed_capacity;
    HiloWindowRows *window_rows; /* open once a window row is written */
    int folds;                   /* folds_windows: -1 not asked yet */
} SequenceState;

/* A growing, palloc'd array of ranges. */
typedef struct RangeBuffer {
    HiloRange *items;
    uint32 count;
    uint32 capacity;
} RangeBuffer;

static void range_buffer_append(RangeBuffer *buf, HiloRange r)
{
    if (buf->count == buf->capacity) {
        buf->capacity = buf->capacity ? buf->capacity * 2 : 16;
        buf->items = buf->items
                         ? (HiloRange *)repalloc_huge(buf->items, sizeof(HiloRange) * buf->capacity)
                         : (HiloRange *)palloc(sizeof(HiloRange) * buf->capacity);
    }
    buf->items[buf->count++] = r;
}

/*
 * Locks a sequence row and reads its settings, without waiting (NOWAIT, or
 * with `skip_locked` SKIP LOCKED): the allocator must never queue behind a
 * caller's open transaction. Through the table access method
 * (alloc/sequence_row.cpp).
 */
static bool lock_sequence(bool skip_locked, int32 seq_id, SequenceState *seq)
{
    HiloSequenceRow row;
    if (!hilo_sequence_row_lock(seq_id, skip_locked, &row))
        return false;
    seq->seq_id = seq_id;
    seq->start_value = row.start_value;
    seq->max_value = row.max_value;
    seq->window_size = row.window_size;
    seq->min_open_windows = row.min_open_windows;
    seq->high_water_mark = row.high_water_mark;
    seq->high_water_mark_changed = false;
    /*
     * The name from the row itself, never from whoever asked: in a cluster
     * it is the key of the sequence's quorum register, and a wrong key
     * would claim windows from another register's values.
     */
    seq->name = row.name;
    seq->node_bits = row.node_bits;
    ItemPointerCopy(&row.tid, &seq->tid);
    seq->claimed = NULL;
    seq->nclaimed = seq->claimed_capacity = 0;
    seq->window_rows = NULL;
    seq->folds = -1;
    return true;
}

static HiloWindowRows *window_rows(SequenceState *seq)
{
    if (seq->window_rows == NULL)
        seq->window_rows = hilo_window_rows_open();
    return seq->window_rows;
}

/*
 * Writes the windows claimed since the last call, through the table access
 * method (alloc/window_rows.cpp): no statement, so a reservation that
 * claims a window for a take and tops up the open ones pays no executor
 * start-up and no CHECK constraint rebuilt for it. Called before anything
 * reads hilo.windows again, and before the reservation ends: within its
 * (sub)transaction, as before.
 */
static void write_claimed_windows(SequenceState *seq)
{
    for (uint32 i = 0; i < seq->nclaimed; i++) {
        const int64 *row = seq->claimed + (size_t)i * 3;
        hilo_window_rows_insert(window_rows(seq), seq->seq_id, row[0], row[1], row[2]);
    }
    if (seq->nclaimed > 0)
        CommandCounterIncrement(); /* the reads after it see them */
    seq->nclaimed = 0;
}

/*
 * Step 1: takes from the free list, lowest first, until `want` IDs or
 * `out` holds max_ranges ranges. Returns IDs taken; *drained tells whether
 * the free list is now empty.
 */
static uint64 take_from_free_list(SequenceState *seq, uint64 want, uint32 max_ranges,
                                  RangeBuffer *out, bool *drained)
{
    static const char *shrink_sql =
        "UPDATE hilo.free_ranges SET first_id = $3 WHERE seq_id = $1 AND first_id = $2";
    Oid types3[3] = {INT4OID, INT8OID, INT8OID};
    uint64 taken = 0;
    HiloRange *read = NULL;
    ItemPointerData *tids = NULL;
    /* Never below start_value: hilo_raise deletes the free ranges below
     * its mark, but IDs reserved before it (an abandoned take, an idle
     * pool written back) may be returned after it commits. A row that
     * straddles the mark is skipped whole: a gap. */
    int64 from = Max(hilo_free_scan_from(seq->seq_id), seq->start_value);

    *drained = false;
    while (taken < want && out->count < max_ranges) {
        uint32 room = max_ranges - out->count;
        /* From where the last take left off (free_list_scan.cpp), not over
         * the dead index entries of every row consumed before; through the
         * primary key, without a statement (alloc/free_rows.cpp). */
        if (read == NULL) {
            read = (HiloRange *)palloc(sizeof(HiloRange) * HILO_ROWS_PER_FETCH);
            tids = (ItemPointerData *)palloc(sizeof(ItemPointerData) * HILO_ROWS_PER_FETCH);
        }
        Snapshot fetched = RegisterSnapshot(GetTransactionSnapshot());
        uint64 rows = hilo_free_rows_read(
            seq->seq_id, from, (uint32)Min(HILO_ROWS_PER_FETCH, (int64)room), fetched, read, tids);

        uint64 whole = 0;
        bool split = false;
        HiloRange split_row = {0, 0};
        HiloRange split_taken = {0, 0};
        for (uint64 i = 0; i < rows && taken < want; i++) {
            HiloRange row = read[i];
            HiloRange got = hilo_take_prefix(row, want - taken);
            range_buffer_append(out, got);
            taken += hilo_range_length(got);
            from = got.last + 1; /* every row left starts above it */
            if (got.last == row.last) {
                whole++;
            } else {
                split = true;
                split_row = row;
                split_taken = got;
            }
        }
        if (hilo_free_list_take_delay_ms > 0 && whole > 0) {
            hilo_sleep_ms(hilo_free_list_take_delay_ms); /* for tests: see the GUC */
            SetLatch(MyLatch);                           /* a wake-up it took is not lost */
        }
        /* Rows used up form a prefix; at most the one after them was split.
         * Deleted by the versions read, so exactly the rows read: a push
         * holds the sequence's push lock, not its row, and may commit a row
         * between two of them meanwhile (IDs handed out between two free
         * ranges, pushed back). */
        hilo_free_rows_delete(tids, (uint32)whole);
        UnregisterSnapshot(fetched);
        if (split) {
            Datum upd[3] = {Int32GetDatum(seq->seq_id), Int64GetDatum(split_row.first),
                            Int64GetDatum(split_taken.last + 1)};
            hilo_spi_exec(shrink_sql, 3, types3, upd, NULL, false, 0);
        }
        if (rows < (uint64)Min(HILO_ROWS_PER_FETCH, (int64)room)) {
            *drained = whole == rows; /* every row there was is gone */
            break;
        }
    }
    if (read != NULL) {
        pfree(read);
        pfree(tids);
    }
    if (taken > 0)
        hilo_free_scan_consumed(seq->seq_id, from);
    return taken;
}

/*
 * Whether windows used up are folded into the used-up row below them
 * (alloc/window_rows.cpp). Not on a cluster member, nor for a sequence with
 * node_bits: there windows come from the quorum register or a slice, and a
 * window installed again after a lost answer is recognised by its start
 * and end.
 */
static bool folds_windows(SequenceState *seq)
{
    /* Asked once per reservation: the window source reads the cluster's
     * configuration each time. */
    if (seq->folds < 0)
        seq->folds = seq->node_bits == 0 && !hilo_window_source_active();
    return seq->folds > 0;
}

/* Step 2: takes from open windows, lowest first. Returns IDs taken.
 * `open_seen`: how many windows were open before, if the first read saw
 * them all (else -1). */
static uint64 take_from_open_windows(SequenceState *seq, uint64 want, uint32 max_ranges,
                                     RangeBuffer *out, int64 *emptied, int64 *open_seen = NULL)
{
    /* The row versions read are the ones written below (the sequence row
     * is locked: no one else writes its windows meanwhile). */
    uint64 taken = 0;

    write_claimed_windows(seq);

    HiloOpenWindow *read = NULL;
    while (taken < want && out->count < max_ranges) {
        if (read == NULL)
            read = (HiloOpenWindow *)palloc(sizeof(HiloOpenWindow) * HILO_ROWS_PER_FETCH);
        uint64 rows =
            hilo_window_rows_read_open(window_rows(seq), seq->seq_id, HILO_ROWS_PER_FETCH, read);
        if (open_seen != NULL) {
            *open_seen = rows < HILO_ROWS_PER_FETCH ? (int64)rows : -1;
            open_seen = NULL; /* the first read only */
        }
        if (rows == 0)
            break;

        int64 *starts = (int64 *)palloc(sizeof(int64) * rows);
        HiloRange *avail = (HiloRange *)palloc(sizeof(HiloRange) * rows);
        ItemPointerData *tids = (ItemPointerData *)palloc(sizeof(ItemPointerData) * rows);
        for (uint64 i = 0; i < rows; i++) {
            starts[i] = read[i].start;
            avail[i].first = read[i].next;
            avail[i].last = read[i].end - 1; /* the end is exclusive */
            tids[i] = read[i].tid;
        }
        /* Every window taken is used up but perhaps the last: starts[0] to
         * starts[used_up - 1], and starts[used_up] advanced if partly. */
        uint32 used_up = 0;
        bool partly = false;
        int64 partly_next = 0;
        for (uint64 i = 0; i < rows && taken < want && out->count < max_ranges; i++) {
            HiloRange got = hilo_take_prefix(avail[i], want - taken);
            range_buffer_append(out, got);
            taken += hilo_range_length(got);
            if (got.last == avail[i].last) {
                (*emptied)++;
                used_up++;
            } else {
                partly = true;
                partly_next = got.last + 1;
                break; /* the take is complete */
            }
        }
        /* Through the table access method, as write_claimed_windows;
         * each window used up joins the used-up row right below it. */
        if (used_up > 0)
            hilo_window_rows_use_up(window_rows(seq), seq->seq_id, read, used_up,
                                    folds_windows(seq));
        if (partly)
            hilo_window_rows_set_next(window_rows(seq), &tids[used_up], seq->seq_id,
                                      starts[used_up], partly_next);
        if (used_up > 0 || partly)
            CommandCounterIncrement();
        pfree(starts);
        pfree(avail);
        pfree(tids);
        if (rows < HILO_ROWS_PER_FETCH)
            break;
    }
    if (read != NULL)
        pfree(read);
    return taken;
}

/*
 * Claims `size` IDs above the high-water mark as a window. If `used_up`,
 * the window is recorded as fully handed out (a direct claim for a take).
 */
static bool claim_window(SequenceState *seq, uint64 size, bool used_up, HiloRange *window,
                         bool whole = false, uint64 *left = NULL)
{
    /* In a hilo cluster, windows come from the quorum register (the window
     * source); a sequence with node_bits claims in this node's own slice. */
    bool claimed = false;
    bool cluster = false;
    if (seq->node_bits > 0) {
        /* A top-up (in the allocator's pass over every sequence) must not
         * fail the others: it claims nothing; a take gets the error. */
        HiloRange slice;
        if (!hilo_node_slice_of(seq->name, seq->node_bits, used_up, &slice) ||
            !hilo_node_slice_agreed(seq->seq_id, seq->name, seq->node_bits, used_up))
            return false;
        int64 floor = Max(seq->high_water_mark, slice.first - 1);
        int64 top = Min(seq->max_value, slice.last);
        if (whole && hilo_ids_above(floor, top) < size) {
            *left = hilo_ids_above(floor, top);
            return false;
        }
        if (!hilo_claim_above(floor, top, size, window))
            return false;
    } else
        cluster = hilo_window_source_claims(seq->name, seq->start_value, seq->max_value, size,
                                            used_up, whole, &claimed, window, left);
    if (seq->node_bits > 0) {
        /* claimed above */
    } else if (cluster) {
        if (!claimed)
            return false;
    } else if (whole && hilo_ids_above(seq->high_water_mark, seq->max_value) < size) {
        *left = hilo_ids_above(seq->high_water_mark, seq->max_value);
        return false;
    } else if (!hilo_claim_above(seq->high_water_mark, seq->max_value, size, window)) {
        return false;
    }
    int64 end = window->last + 1; /* exclusive; at most 2^63 - 1 */
    if (seq->nclaimed == seq->claimed_capacity) {
        seq->claimed_capacity = seq->claimed_capacity ? seq->claimed_capacity * 2 : 4;
        size_t bytes = sizeof(int64) * 3 * seq->claimed_capacity;
        seq->claimed =
            seq->claimed ? (int64 *)repalloc(seq->claimed, bytes) : (int64 *)palloc(bytes);
    }
    int64 *row = seq->claimed + (size_t)seq->nclaimed++ * 3;
    row[0] = window->first;
    row[1] = end;
    row[2] = used_up ? end : window->first;
    /* A window from the cluster or this node's slice is written at once,
     * as it always was; only claims right above the mark wait. */
    if (seq->node_bits > 0 || cluster)
        write_claimed_windows(seq);
    seq->high_water_mark = Max(seq->high_water_mark, window->last);
    seq->high_water_mark_changed = true;
    return true;
}

static int64 count_open_windows(SequenceState *seq)
{
    static const char *sql =
        "SELECT count(*) FROM hilo.windows"
        " WHERE seq_id = $1 AND next_hi_value < window_end_value";
    write_claimed_windows(seq);
    hilo_spi_exec1(sql, INT4OID, Int32GetDatum(seq->seq_id), false, 0);
    return hilo_spi_int64(0, 1);
}

/* Takes from the open windows claimed but not yet written, lowest first
 * (they lie above every window written). Returns IDs taken. */
static uint64 take_from_claimed_windows(SequenceState *seq, uint64 want, uint32 max_ranges,
                                        RangeBuffer *out, int64 *emptied)
{
    uint64 taken = 0;
    for (uint32 i = 0; i < seq->nclaimed && taken < want && out->count < max_ranges; i++) {
        int64 *row = seq->claimed + (size_t)i * 3;
        if (row[2] >= row[1])
            continue; /* claimed used up */
        HiloRange avail = {row[2], row[1] - 1};
        HiloRange got = hilo_take_prefix(avail, want - taken);
        range_buffer_append(out, got);
        taken += hilo_range_length(got);
        row[2] = got.last + 1;
        if (got.last == avail.last)
            (*emptied)++;
    }
    return taken;
}

/* Claims windows until min_open_windows (at most HILO_MAX_OPEN_WINDOWS) are
 * open or max_value is reached: one call writes at most that many rows.
 * `open`: the open windows if the caller knows (else -1). Returns how many
 * are open now. */
static int64 top_up_windows(SequenceState *seq, int64 open = -1)
{
    /* Bounded even for a row written before the limit existed. */
    int64 target = Min((int64)seq->min_open_windows, (int64)HILO_MAX_OPEN_WINDOWS);
    if (open < 0)
        open = count_open_windows(seq);
    HiloRange window;
    while (open < target && claim_window(seq, (uint64)seq->window_size, false, &window))
        open++;
    return open;
}

/*
 * Writes the claimed windows and the high-water mark above them. The mark
 * is written to the row version locked, through the table access method
 * with index maintenance (as PostgreSQL writes its own catalogs), not by
 * an UPDATE: the executor would rebuild the seven CHECK constraints of
 * hilo.sequences for the statement (a sixth of the allocator's time), to
 * check a row of which only the mark changed. The one constraint on the
 * mark (high_water_mark_bounds) is checked here instead; the constraints
 * stay, for every other writer. A row updated since it was locked (by
 * this transaction: the lock keeps others off) fails the reservation.
 */
static void save_high_water_mark(SequenceState *seq)
{
    write_claimed_windows(seq);
    hilo_window_rows_close(seq->window_rows);
    seq->window_rows = NULL;
    if (!seq->high_water_mark_changed)
        return;
    if (seq->high_water_mark < seq->start_value - 1 || seq->high_water_mark > seq->max_value)
        ereport(ERROR,
                (errcode(ERRCODE_CHECK_VIOLATION),
                 errmsg("new row for relation \"sequences\" violates check constraint "
                        "\"high_water_mark_bounds\""),
                 errdetail("hilo sequence \"%s\": high-water mark " INT64_FORMAT
                           " outside " INT64_FORMAT " to " INT64_FORMAT ".",
                           seq->name, seq->high_water_mark, seq->start_value - 1, seq->max_value)));
    Relation rel = table_open(hilo_catalog_relid(), RowExclusiveLock);
    int column = get_attnum(RelationGetRelid(rel), "high_water_mark");
    if (column == InvalidAttrNumber)
        elog(ERROR, "hilo: hilo.sequences has no column high_water_mark");
    TupleTableSlot *slot = table_slot_create(rel, NULL);
    if (!table_tuple_fetch_row_version(rel, &seq->tid, SnapshotAny, slot))
        elog(ERROR, "hilo: the locked row of hilo sequence \"%s\" is gone", seq->name);
    bool should_free;
    HeapTuple old = ExecFetchSlotHeapTuple(slot, false, &should_free);
    Datum value = Int64GetDatum(seq->high_water_mark);
    bool isnull = false;
    HeapTuple updated =
        heap_modify_tuple_by_cols(old, RelationGetDescr(rel), 1, &column, &value, &isnull);
    if (should_free)
        heap_freetuple(old);
    ExecDropSingleTupleTableSlot(slot);
    CatalogTupleUpdate(rel, &seq->tid, updated); /* errors if updated since */
    heap_freetuple(updated);
    table_close(rel, RowExclusiveLock);
    CommandCounterIncrement(); /* the statements after it see the new mark */
    seq->high_water_mark_changed = false;
}

void hilo_reserve(int32 seq_id, const char *seq_name, uint64 want,
                  const HiloReserveOptions *options, HiloReservation *result)
{
    SequenceState seq;
    if (!lock_sequence(false, seq_id, &seq))
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                        errmsg("hilo sequence \"%s\" does not exist", seq_name)));

    uint32 max_ranges = options->max_ranges ? options->max_ranges : UINT32_MAX;
    result->left_unclaimed = 0;
    RangeBuffer out = {NULL, 0, 0};
    uint64 taken = 0;
    result->free_list_drained = !options->use_free_list;
    if (options->use_free_list && want > 0)
        taken = take_from_free_list(&seq, want, max_ranges, &out, &result->free_list_drained);
    if (options->use_windows && taken < want && out.count < max_ranges) {
        /* Open windows first; the first read of them also counts them
         * (when it sees them all: fewer than it reads at once). Below
         * min_open_windows, windows are claimed next, and taken from
         * (as if claimed before: they lie above every open window), so
         * that the first take may come before any window. The count is
         * carried over to the last top-up: the sequence row is locked,
         * so only this reservation changes them meanwhile, and the claim
         * below records a window already used up. */
        int64 open = -1;
        int64 emptied = 0;
        taken += take_from_open_windows(&seq, want - taken, max_ranges, &out, &emptied, &open);
        if (open >= 0 && open < Min((int64)seq.min_open_windows, (int64)HILO_MAX_OPEN_WINDOWS)) {
            open = top_up_windows(&seq, open);
            if (taken < want && out.count < max_ranges) {
                if (seq.nclaimed > 0)
                    taken +=
                        take_from_claimed_windows(&seq, want - taken, max_ranges, &out, &emptied);
                else /* written at once (a cluster, a node slice): read back */
                    taken += take_from_open_windows(&seq, want - taken, max_ranges, &out, &emptied);
            }
        }
        if (taken < want && out.count < max_ranges &&
            (options->claim_beyond_windows || taken == 0)) {
            HiloRange direct;
            uint64 need = want - taken;
            bool claimed;
            if (options->whole_claim) {
                uint64 left = 0;
                claimed = claim_window(&seq, need, true, &direct, true, &left);
                if (!claimed && options->pool_ids > 0 && need > options->pool_ids &&
                    left >= need - options->pool_ids)
                    claimed =
                        claim_window(&seq, need - options->pool_ids, true, &direct, true, &left);
                if (!claimed)
                    result->left_unclaimed = left;
            } else {
                claimed = claim_window(&seq, need, true, &direct);
            }
            if (claimed) {
                range_buffer_append(&out, direct);
                taken += hilo_range_length(direct);
            }
        }
        top_up_windows(&seq, open < 0 ? -1 : open - emptied);
    }
    save_high_water_mark(&seq);

    result->count = (uint32)hilo_ranges_normalize(out.items, out.count);
    result->ranges = out.items;
    result->ids = taken;
    result->max_value = seq.max_value;
    result->node_bits = seq.node_bits;
}

void hilo_raise_short(const char *seq_name, uint64 got, uint64 wanted, int64 max_value, int64 top)
{
    if (got == 0 && top < max_value)
        ereport(ERROR, (errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
                        errmsg("hilo sequence \"%s\" is exhausted on this node", seq_name),
                        errdetail("Every ID of this node's slice (node_bits), up to " INT64_FORMAT
                                  ", has been handed out.",
                                  top),
                        errhint("IDs pushed back with hilo_push can be taken again.")));
    if (got == 0)
        ereport(ERROR,
                (errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
                 errmsg("hilo sequence \"%s\" is exhausted", seq_name),
                 errdetail("Every ID up to its max_value " INT64_FORMAT " has been handed out.",
                           max_value),
                 errhint("IDs pushed back with hilo_push can be taken again.")));
    ereport(ERROR,
            (errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
             errmsg("hilo sequence \"%s\" has only " UINT64_FORMAT " IDs left, " UINT64_FORMAT
                    " requested",
                    seq_name, got, wanted),
             top < max_value ? errdetail("This node's slice (node_bits) ends at " INT64_FORMAT
                                         ", before its max_value " INT64_FORMAT ".",
                                         top, max_value)
                             : errdetail("Its max_value is " INT64_FORMAT ".", max_value),
             errhint("Pass partial => true to take what is left.")));
}

void hilo_unreserve(int32 seq_id, const HiloRange *ranges, uint32 nranges)
{
    /* Skipped if the sequence was dropped meanwhile. */
    static const char *sql =
        "INSERT INTO hilo.free_ranges (seq_id, first_id, last_id)"
        " SELECT $1, f, l FROM unnest($2::bigint[], $3::bigint[]) AS u(f, l)"
        " WHERE EXISTS (SELECT 1 FROM hilo.sequences WHERE seq_id = $1)"
        " ON CONFLICT DO NOTHING"; /* never expected; a gap is safe, a repeat is not */
    Oid types[3] = {INT4OID, INT8ARRAYOID, INT8ARRAYOID};

    hilo_free_scan_reset();              /* rows below where free lists were read from */
    for (uint32 i = 0; i < nranges; i++) /* the merge pass looks at these */
        hilo_merge_note_span(seq_id, ranges[i].first, ranges[i].last);
    Datum *firsts = (Datum *)palloc(sizeof(Datum) * nranges);
    Datum *lasts = (Datum *)palloc(sizeof(Datum) * nranges);
    for (uint32 i = 0; i < nranges; i++) {
        firsts[i] = Int64GetDatum(ranges[i].first);
        lasts[i] = Int64GetDatum(ranges[i].last);
    }
    Datum values[3] = {Int32GetDatum(seq_id),
                       PointerGetDatum(construct_array(firsts, nranges, INT8OID, 8, true, 'd')),
                       PointerGetDatum(construct_array(lasts, nranges, INT8OID, 8, true, 'd'))};
    hilo_spi_exec(sql, 3, types, values, NULL, false, 0);
}

void hilo_maintain_all_sequences(bool merge_free_ranges, bool merge_all, const HiloMergeSpan *spans,
                                 uint32 nspans)
{
    static const char *missing_sql =
        "SELECT s.seq_id FROM hilo.sequences s"
        " WHERE s.high_water_mark < s.max_value"
        "   AND (SELECT count(*) FROM hilo.windows w WHERE w.seq_id = s.seq_id"
        "          AND w.next_hi_value < w.window_end_value)"
        "       < least(s.min_open_windows, " CppAsString2(HILO_MAX_OPEN_WINDOWS) ")";

    /* Before CREATE EXTENSION there is nothing to maintain. */
    static const char *exists_sql = "SELECT to_regclass('hilo.sequences') IS NOT NULL";
    hilo_spi_exec(exists_sql, 0, NULL, NULL, NULL, false, 1);
    bool isnull;
    if (!DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)))
        return;

    /* Prepared pushes committed elsewhere told nobody: read every free
     * list from its start again once per round. */
    hilo_free_scan_reset();
    if (merge_free_ranges || hilo_merge_pending())
        hilo_merge_free_ranges(merge_all, spans, nspans);

    hilo_spi_exec(missing_sql, 0, NULL, NULL, NULL, false, 0);
    uint64 count = SPI_processed;
    int32 *ids = (int32 *)palloc(sizeof(int32) * Max(count, 1));
    for (uint64 i = 0; i < count; i++)
        ids[i] = hilo_spi_int32(i, 1);

    for (uint64 i = 0; i < count; i++) {
        /* Skip a sequence someone is dropping or changing; next time. */
        SequenceState seq;
        if (!lock_sequence(true, ids[i], &seq))
            continue;
        top_up_windows(&seq);
        save_high_water_mark(&seq);
    }
    pfree(ids);
}
