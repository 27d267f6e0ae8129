/*
 * alloc/sequence_row.cpp: the allocator's lock of a sequence row, through
 * the primary key of hilo.sequences and the table access method, without a
 * statement: every reservation locks its sequence's row first, and the
 * SELECT ... FOR NO KEY UPDATE it replaces paid executor start-up for it
 * (a sixth of the allocator's time for a lone large take). Same row, same
 * lock, same snapshot as that statement: a new one, which sees this
 * transaction's writes; an update committed since is followed to the row's
 * newest version, as READ COMMITTED does.
 */
#include "internal.h"

extern "C" {
#include "access/genam.h"
#include "access/skey.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "executor/tuptable.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
}

static const char *const column_names[] = {"seq_id",      "start_value",      "max_value",
                                           "window_size", "min_open_windows", "high_water_mark",
                                           "name",        "node_bits"};
#define NCOLUMNS (sizeof(column_names) / sizeof(column_names[0]))

static Datum column_value(TupleTableSlot *slot, AttrNumber column)
{
    bool isnull;
    Datum d = slot_getattr(slot, column, &isnull);
    if (isnull)
        elog(ERROR, "hilo: NULL in hilo.sequences");
    return d;
}

/* The row version of `seq_id` that `snapshot` sees, if any. */
static bool find_row(Relation rel, Oid index, AttrNumber seq_column, int32 seq_id,
                     Snapshot snapshot, ItemPointer tid)
{
    ScanKeyData key;
    ScanKeyInit(&key, seq_column, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(seq_id));
    /* Through the index (systable_beginscan would scan the table under
     * ignore_system_indexes). */
    Relation index_rel = index_open(index, AccessShareLock);
    SysScanDesc scan = systable_beginscan_ordered(rel, index_rel, snapshot, 1, &key);
    HeapTuple tuple = systable_getnext_ordered(scan, ForwardScanDirection);
    bool found = HeapTupleIsValid(tuple);
    if (found)
        *tid = tuple->t_self;
    systable_endscan_ordered(scan);
    index_close(index_rel, AccessShareLock);
    return found;
}

/* What hilo_sequence_row_lock looks up by name, kept while the names
 * epoch stays (hilo_catalog_names_epoch): every reservation locks a row. */
static struct {
    uint64 epoch;
    Oid relid;
    Oid index;
    AttrNumber columns[NCOLUMNS];
} names;

static void look_up_names(Oid relid)
{
    uint64 epoch = hilo_catalog_names_epoch();
    if (names.epoch == epoch && names.relid == relid)
        return;
    names.index = get_relname_relid("sequences_pkey", get_rel_namespace(relid));
    if (!OidIsValid(names.index))
        elog(ERROR, "hilo: the catalog has no index hilo.sequences_pkey");
    for (size_t i = 0; i < NCOLUMNS; i++) {
        names.columns[i] = get_attnum(relid, column_names[i]);
        /* A catalog not yet updated to 0.5.0 has no node_bits: 0 there. */
        if (names.columns[i] == InvalidAttrNumber && i + 1 < NCOLUMNS)
            elog(ERROR, "hilo: hilo.sequences has no column %s", column_names[i]);
    }
    names.relid = relid;
    names.epoch = epoch;
}

bool hilo_sequence_row_lock(int32 seq_id, bool skip_locked, HiloSequenceRow *row)
{
    Oid relid = hilo_catalog_relid();
    look_up_names(relid);
    Oid index = names.index;
    AttrNumber columns[NCOLUMNS];
    memcpy(columns, names.columns, sizeof(columns));

    /* As a statement would: the writes of this transaction so far, and
     * a new snapshot (READ COMMITTED). */
    CommandCounterIncrement();
    Snapshot snapshot = RegisterSnapshot(GetTransactionSnapshot());
    Relation rel = table_open(relid, RowShareLock); /* as SELECT ... FOR UPDATE */
    ItemPointerData tid;
    bool locked = find_row(rel, index, columns[0], seq_id, snapshot, &tid);
    TupleTableSlot *slot = table_slot_create(rel, NULL);
    if (locked) {
        TM_FailureData tmfd;
        TM_Result result = table_tuple_lock(
            rel, &tid, snapshot, slot, GetCurrentCommandId(true), LockTupleNoKeyExclusive,
            skip_locked ? LockWaitSkip : LockWaitError, TUPLE_LOCK_FLAG_FIND_LAST_VERSION, &tmfd);
        switch (result) {
            case TM_Ok:
                break;
            case TM_WouldBlock: /* SKIP LOCKED */
            case TM_Deleted:    /* dropped since the snapshot */
            case TM_SelfModified:
                locked = false;
                break;
            default:
                elog(ERROR, "hilo: unexpected result %d locking the row of hilo sequence %d",
                     (int)result, seq_id);
        }
    }
    /* The newest version, followed from the one the snapshot saw: the
     * statement's WHERE clause held for it too (seq_id never changes). */
    if (locked && DatumGetInt32(column_value(slot, columns[0])) != seq_id)
        elog(ERROR, "hilo: the row locked for hilo sequence %d is another's", seq_id);
    if (locked) {
        row->start_value = DatumGetInt64(column_value(slot, columns[1]));
        row->max_value = DatumGetInt64(column_value(slot, columns[2]));
        row->window_size = DatumGetInt64(column_value(slot, columns[3]));
        row->min_open_windows = DatumGetInt32(column_value(slot, columns[4]));
        row->high_water_mark = DatumGetInt64(column_value(slot, columns[5]));
        row->name = TextDatumGetCString(column_value(slot, columns[6]));
        row->node_bits =
            columns[7] == InvalidAttrNumber ? 0 : DatumGetInt32(column_value(slot, columns[7]));
        row->tid = slot->tts_tid;
    }
    ExecDropSingleTupleTableSlot(slot);
    table_close(rel, NoLock);
    UnregisterSnapshot(snapshot);
    return locked;
}
