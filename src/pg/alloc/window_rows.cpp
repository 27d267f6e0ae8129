/*
 * alloc/window_rows.cpp: the allocator writes its hilo.windows rows through
 * the table access method, with index maintenance, instead of INSERT and
 * UPDATE statements. Each statement paid executor start-up, and the
 * executor rebuilt the table's CHECK constraint from its text
 * (stringToNode, ExecPrepareExpr) for every statement that wrote it: most
 * of what a reservation cost the allocator beyond its commit. The
 * constraint (window_bounds) stays, for every other writer; it is checked
 * here in C. The indexes, the partial windows_open among them, are
 * maintained as the executor does (ExecInsertIndexTuples with an executor
 * state of our own, which evaluates their predicates).
 *
 * The allocator writes a sequence's windows only while it holds the
 * sequence's row lock (alloc/reserve.cpp), as hilo_raise and hilo_drop
 * take it before they change them. Should a row version read in its
 * transaction have been changed since all the same, simple_heap_update
 * raises, and the reservation fails and rolls back: nothing is handed out.
 */
#include "window_rows.h"

extern "C" {
#include "access/genam.h"
#include "access/heapam.h"
#include "access/relscan.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/skey.h"
#include "access/stratnum.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "nodes/execnodes.h"
#include "storage/bufmgr.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
}

struct HiloWindowRows {
    Relation rel;
    EState *estate;
    ResultRelInfo *rri;
    TupleTableSlot *slot;
    Oid open_index; /* windows_open */
    Oid key_index;  /* windows_pkey */
    /* Column numbers of seq_id, window_start_value, window_end_value and
     * next_hi_value, in that order. */
    AttrNumber columns[4];
};

static const char *const column_names[4] = {"seq_id", "window_start_value", "window_end_value",
                                            "next_hi_value"};

/* What hilo_window_rows_open looks up by name, kept while the names
 * epoch stays (hilo_catalog_names_epoch): the allocator opens the table
 * once per reservation. */
static struct {
    uint64 epoch;
    Oid relid;
    Oid open_index;
    Oid key_index;
    AttrNumber columns[4];
} names;

static void look_up_names(void)
{
    uint64 epoch = hilo_catalog_names_epoch();
    if (names.epoch == epoch)
        return;
    Oid nsp = get_namespace_oid("hilo", false);
    Oid relid = get_relname_relid("windows", nsp);
    if (!OidIsValid(relid))
        elog(ERROR, "hilo: the catalog has no table hilo.windows");
    names.open_index = get_relname_relid("windows_open", nsp);
    if (!OidIsValid(names.open_index))
        elog(ERROR, "hilo: the catalog has no index hilo.windows_open");
    names.key_index = get_relname_relid("windows_pkey", nsp);
    if (!OidIsValid(names.key_index))
        elog(ERROR, "hilo: the catalog has no index hilo.windows_pkey");
    for (int i = 0; i < 4; i++) {
        names.columns[i] = get_attnum(relid, column_names[i]);
        if (names.columns[i] == InvalidAttrNumber)
            elog(ERROR, "hilo: hilo.windows has no column %s", column_names[i]);
    }
    names.relid = relid;
    names.epoch = epoch;
}

HiloWindowRows *hilo_window_rows_open(void)
{
    look_up_names();
    HiloWindowRows *rows = (HiloWindowRows *)palloc0(sizeof(HiloWindowRows));
    rows->rel = table_open(names.relid, RowExclusiveLock);
    /* The lock took in invalidations: names looked up before it may be
     * stale (the catalog dropped and made again meanwhile). */
    if (names.epoch != hilo_catalog_names_epoch()) {
        table_close(rows->rel, RowExclusiveLock);
        look_up_names();
        rows->rel = table_open(names.relid, RowExclusiveLock);
    }
    rows->open_index = names.open_index;
    rows->key_index = names.key_index;
    memcpy(rows->columns, names.columns, sizeof(rows->columns));
    rows->estate = CreateExecutorState();
    rows->rri = makeNode(ResultRelInfo);
    InitResultRelInfo(rows->rri, rows->rel, 0, NULL, 0);
    ExecOpenIndices(rows->rri, false);
    rows->slot = MakeSingleTupleTableSlot(RelationGetDescr(rows->rel), &TTSOpsHeapTuple);
    return rows;
}

/* The window_bounds constraint of hilo.windows. */
static void check_bounds(int32 seq_id, int64 start, int64 end, int64 next)
{
    if (start < end && start <= next && next <= end)
        return;
    ereport(ERROR, (errcode(ERRCODE_CHECK_VIOLATION),
                    errmsg("new row for relation \"windows\" violates check constraint "
                           "\"window_bounds\""),
                    errdetail("hilo window of sequence %d: start " INT64_FORMAT
                              ", end " INT64_FORMAT ", next " INT64_FORMAT ".",
                              seq_id, start, end, next)));
}

/* The index entries of the row version `tuple` (written at tuple->t_self). */
static void insert_index_entries(HiloWindowRows *rows, HeapTuple tuple, bool summarizing)
{
    ExecStoreHeapTuple(tuple, rows->slot, false);
    rows->slot->tts_tableOid = RelationGetRelid(rows->rel);
    List *unused = hilo_insert_index_tuples(rows->rri, rows->slot, rows->estate, summarizing);
    list_free(unused);
    ExecClearTuple(rows->slot);
    ResetPerTupleExprContext(rows->estate);
}

void hilo_window_rows_insert(HiloWindowRows *rows, int32 seq_id, int64 start, int64 end, int64 next)
{
    check_bounds(seq_id, start, end, next);
    TupleDesc desc = RelationGetDescr(rows->rel);
    Datum *values = (Datum *)palloc0(sizeof(Datum) * desc->natts);
    bool *nulls = (bool *)palloc(sizeof(bool) * desc->natts);
    memset(nulls, true, sizeof(bool) * desc->natts);
    Datum given[4] = {Int32GetDatum(seq_id), Int64GetDatum(start), Int64GetDatum(end),
                      Int64GetDatum(next)};
    for (int i = 0; i < 4; i++) {
        values[rows->columns[i] - 1] = given[i];
        nulls[rows->columns[i] - 1] = false;
    }
    HeapTuple tuple = heap_form_tuple(desc, values, nulls);
    simple_heap_insert(rows->rel, tuple);
    insert_index_entries(rows, tuple, false);
    heap_freetuple(tuple);
    pfree(values);
    pfree(nulls);
}

static int64 int64_column(HeapTuple tuple, TupleDesc desc, AttrNumber column)
{
    bool isnull;
    Datum d = heap_getattr(tuple, column, desc, &isnull);
    if (isnull)
        elog(ERROR, "hilo: NULL in hilo.windows");
    return DatumGetInt64(d);
}

/*
 * Reads the row version at `tid` into `old`, its buffer pinned in
 * `buffer`; raises if it is gone or is not the window of `seq_id` and
 * `start`.
 */
static void fetch_row(HiloWindowRows *rows, ItemPointer tid, int32 seq_id, int64 start,
                      HeapTuple old, Buffer *buffer)
{
    TupleDesc desc = RelationGetDescr(rows->rel);
    old->t_self = *tid;
    if (!heap_fetch(rows->rel, SnapshotAny, old, buffer, false))
        elog(ERROR, "hilo: the window of sequence %d at " INT64_FORMAT " is gone", seq_id, start);
    bool isnull;
    int32 row_seq = DatumGetInt32(heap_getattr(old, rows->columns[0], desc, &isnull));
    int64 row_start = int64_column(old, desc, rows->columns[1]);
    if (row_seq != seq_id || row_start != start) {
        ReleaseBuffer(*buffer);
        elog(ERROR,
             "hilo: the row read as the window of sequence %d at " INT64_FORMAT " is another's",
             seq_id, start);
    }
}

/*
 * Writes a new version of the window of `seq_id` and `start` whose row
 * version is at `tid`: its end `end` (-1: as it is) and next_hi_value
 * `next`. Raises if that row version is not the window's.
 */
static void update_row(HiloWindowRows *rows, ItemPointer tid, int32 seq_id, int64 start, int64 end,
                       int64 next, ItemPointer new_tid = NULL)
{
    TupleDesc desc = RelationGetDescr(rows->rel);
    HeapTupleData old;
    Buffer buffer;
    fetch_row(rows, tid, seq_id, start, &old, &buffer);
    int64 row_end = int64_column(&old, desc, rows->columns[2]);
    if (end < 0)
        end = row_end;
    check_bounds(seq_id, start, end, next);
    int columns[2] = {rows->columns[3], rows->columns[2]};
    Datum values[2] = {Int64GetDatum(next), Int64GetDatum(end)};
    bool value_nulls[2] = {false, false};
    HeapTuple updated =
        heap_modify_tuple_by_cols(&old, desc, end != row_end ? 2 : 1, columns, values, value_nulls);
    ReleaseBuffer(buffer);
    bool indexes, summarizing;
    hilo_simple_heap_update(rows->rel, tid, updated, &indexes, &summarizing);
    if (indexes)
        insert_index_entries(rows, updated, summarizing);
    if (new_tid != NULL)
        *new_tid = updated->t_self;
    heap_freetuple(updated);
}

void hilo_window_rows_set_next(HiloWindowRows *rows, ItemPointer tid, int32 seq_id, int64 start,
                               int64 next)
{
    update_row(rows, tid, seq_id, start, -1, next);
}

/* One hilo.windows row as read. */
typedef struct WindowRow {
    int32 seq_id;
    int64 start;
    int64 end; /* exclusive */
    int64 next;
    ItemPointerData tid;
} WindowRow;

/*
 * The row of `seq_id` right below `start` (the highest window_start_value
 * under it), through the primary key, backwards, under a new snapshot that
 * sees this transaction's writes.
 */
static bool read_row_below(HiloWindowRows *rows, int32 seq_id, int64 start, WindowRow *out)
{
    TupleDesc desc = RelationGetDescr(rows->rel);
    ScanKeyData keys[2];
    ScanKeyInit(&keys[0], rows->columns[0], BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(seq_id));
    ScanKeyInit(&keys[1], rows->columns[1], BTLessStrategyNumber, F_INT8LT, Int64GetDatum(start));
    CommandCounterIncrement(); /* this transaction's writes so far */
    Snapshot snapshot = RegisterSnapshot(GetLatestSnapshot());
    Relation index = index_open(rows->key_index, AccessShareLock);
    SysScanDesc scan = systable_beginscan_ordered(rows->rel, index, snapshot, 2, keys);
    HeapTuple tuple = systable_getnext_ordered(scan, BackwardScanDirection);
    bool found = HeapTupleIsValid(tuple);
    if (found) {
        bool isnull;
        out->seq_id = DatumGetInt32(heap_getattr(tuple, rows->columns[0], desc, &isnull));
        out->start = int64_column(tuple, desc, rows->columns[1]);
        out->end = int64_column(tuple, desc, rows->columns[2]);
        out->next = int64_column(tuple, desc, rows->columns[3]);
        out->tid = tuple->t_self;
        found = out->seq_id == seq_id && out->start < start;
    }
    systable_endscan_ordered(scan);
    index_close(index, AccessShareLock);
    UnregisterSnapshot(snapshot);
    return found;
}

/* Deletes the window of `seq_id` and `start` whose row version is at `tid`. */
static void delete_row(HiloWindowRows *rows, ItemPointer tid, int32 seq_id, int64 start)
{
    HeapTupleData old;
    Buffer buffer;
    fetch_row(rows, tid, seq_id, start, &old, &buffer);
    ReleaseBuffer(buffer);
    simple_heap_delete(rows->rel, tid); /* raises if updated since */
}

/* Rows one used-up window folds at most: each fold deletes a row, so
 * folding keeps up with the rows written, and rows written used up
 * before (an older catalog) are folded a few per window. */
#define HILO_FOLD_LIMIT 8

/*
 * Where the row a sequence's windows were last folded into was written, so
 * that the next window used up above it finds it without an index scan.
 * Only a hint: a row version found there is used only if it is visible to
 * a new snapshot (the row's newest version, not rolled back), is the
 * sequence's, is used up and ends where the window starts, which makes it
 * the row right below the window, and only if its page is still within the
 * table. In this process's memory (the allocator of one database), a few
 * sequences at a time.
 */
#define HILO_FOLD_HINTS 16
typedef struct FoldHint {
    Oid relid; /* of hilo.windows; 0: empty */
    int32 seq_id;
    int64 start;
    ItemPointerData tid;
} FoldHint;
static FoldHint fold_hints[HILO_FOLD_HINTS];

static FoldHint *fold_hint(int32 seq_id)
{
    return &fold_hints[(uint32)seq_id % HILO_FOLD_HINTS];
}

/* The row the hint of `seq_id` names, if it is the used-up row right below
 * `start` (above). */
static bool read_hinted_row(HiloWindowRows *rows, int32 seq_id, int64 start, WindowRow *out)
{
    FoldHint *hint = fold_hint(seq_id);
    if (hint->relid != RelationGetRelid(rows->rel) || hint->seq_id != seq_id)
        return false;
    /* Past the table's end since (VACUUM truncated it, or VACUUM FULL or
     * CLUSTER rewrote it): not read, as a TID scan skips such a TID; the
     * index finds the row. */
    if (ItemPointerGetBlockNumber(&hint->tid) >= RelationGetNumberOfBlocks(rows->rel)) {
        hint->relid = InvalidOid;
        return false;
    }
    TupleDesc desc = RelationGetDescr(rows->rel);
    CommandCounterIncrement(); /* this transaction's writes so far */
    Snapshot snapshot = RegisterSnapshot(GetLatestSnapshot());
    HeapTupleData tuple;
    Buffer buffer;
    tuple.t_self = hint->tid;
    bool found = heap_fetch(rows->rel, snapshot, &tuple, &buffer, false);
    if (found) {
        bool isnull;
        out->seq_id = DatumGetInt32(heap_getattr(&tuple, rows->columns[0], desc, &isnull));
        out->start = int64_column(&tuple, desc, rows->columns[1]);
        out->end = int64_column(&tuple, desc, rows->columns[2]);
        out->next = int64_column(&tuple, desc, rows->columns[3]);
        out->tid = tuple.t_self;
        ReleaseBuffer(buffer);
        found = out->seq_id == seq_id && out->start == hint->start && out->next == out->end &&
                out->end == start;
    }
    UnregisterSnapshot(snapshot);
    return found;
}

/* Uses up the windows `w` (n), each starting where the one before ends:
 * one row covers them, written once. */
static void use_up_run(HiloWindowRows *rows, int32 seq_id, const HiloOpenWindow *w, uint32 n,
                       bool fold)
{
    ItemPointerData target = w[0].tid;
    int64 target_start = w[0].start;
    int64 end = w[n - 1].end;
    int folded = 0;
    WindowRow below;
    /* A row that ends where the target starts is the one right below it
     * (windows never overlap); used up, the two cover one span. The row
     * last folded into, then the index; the rows below one found by the
     * hint were folded when it was. */
    if (fold && read_hinted_row(rows, seq_id, target_start, &below)) {
        delete_row(rows, &target, seq_id, target_start);
        target = below.tid;
        target_start = below.start;
        folded++;
    } else {
        while (fold && folded < HILO_FOLD_LIMIT &&
               read_row_below(rows, seq_id, target_start, &below) && below.next == below.end &&
               below.end == target_start) {
            delete_row(rows, &target, seq_id, target_start);
            target = below.tid;
            target_start = below.start;
            folded++;
        }
    }
    /* The others of the run join the same row: one write for all of them,
     * not one each (a batch of takes uses up a window per take). */
    for (uint32 i = 1; i < n; i++) {
        ItemPointerData tid = w[i].tid;
        delete_row(rows, &tid, seq_id, w[i].start);
    }
    ItemPointerData written;
    update_row(rows, &target, seq_id, target_start, folded > 0 || n > 1 ? end : -1, end, &written);
    if (fold) {
        FoldHint *hint = fold_hint(seq_id);
        hint->relid = RelationGetRelid(rows->rel);
        hint->seq_id = seq_id;
        hint->start = target_start;
        hint->tid = written;
    }
}

void hilo_window_rows_use_up(HiloWindowRows *rows, int32 seq_id, const HiloOpenWindow *windows,
                             uint32 n, bool fold)
{
    for (uint32 i = 0; i < n;) {
        uint32 j = i + 1;
        while (fold && j < n && windows[j].start == windows[j - 1].end)
            j++;
        use_up_run(rows, seq_id, windows + i, j - i, fold);
        i = j;
    }
}

/*
 * The read of open windows, through windows_open, as the allocator's SELECT
 * did (its plan was an index scan of windows_open too, since the
 * allocator runs with enable_seqscan off): no executor start-up. An entry
 * of windows_open was made for a row version that was open when written,
 * and a version never changes once written; the check below is for form.
 */
uint32 hilo_window_rows_read_open(HiloWindowRows *rows, int32 seq_id, uint32 limit,
                                  HiloOpenWindow *out)
{
    TupleDesc desc = RelationGetDescr(rows->rel);
    ScanKeyData key;
    ScanKeyInit(&key, rows->columns[0], BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(seq_id));
    CommandCounterIncrement(); /* this transaction's writes so far */
    Snapshot snapshot = RegisterSnapshot(GetLatestSnapshot());
    /* Always through the index, in its order (systable_beginscan would
     * scan the table, unordered, under ignore_system_indexes). */
    Relation index = index_open(rows->open_index, AccessShareLock);
    SysScanDesc scan = systable_beginscan_ordered(rows->rel, index, snapshot, 1, &key);
    uint32 n = 0;
    HeapTuple tuple;
    while (n < limit &&
           HeapTupleIsValid(tuple = systable_getnext_ordered(scan, ForwardScanDirection))) {
        HiloOpenWindow *w = &out[n];
        w->start = int64_column(tuple, desc, rows->columns[1]);
        w->end = int64_column(tuple, desc, rows->columns[2]);
        w->next = int64_column(tuple, desc, rows->columns[3]);
        w->tid = tuple->t_self;
        if (w->next < w->end)
            n++;
    }
    systable_endscan_ordered(scan);
    index_close(index, AccessShareLock);
    UnregisterSnapshot(snapshot);
    return n;
}

void hilo_window_rows_close(HiloWindowRows *rows)
{
    if (rows == NULL)
        return;
    ExecDropSingleTupleTableSlot(rows->slot);
    ExecCloseIndices(rows->rri);
    FreeExecutorState(rows->estate);
    table_close(rows->rel, NoLock);
    pfree(rows->rri);
    pfree(rows);
    CommandCounterIncrement(); /* the statements after it see the rows */
}
