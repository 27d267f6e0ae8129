/*
 * alloc/free_rows.cpp: hilo.free_ranges through the table access method,
 * without a statement.
 *
 * The allocator's read of a free list: every reservation looks at its
 * sequence's free list first, empty or not, and a SELECT paid executor
 * start-up for it. Same rows, same order, same snapshot as the SELECT it
 * replaces (whose plan was that index scan: the allocator runs with
 * enable_seqscan off).
 *
 * The rows a reservation used up are deleted by the row versions it read
 * (simple_heap_delete), not by a DELETE statement that found them again
 * through the index, a statement per 1,000 rows: a quarter of what a
 * refill from a fragmented free list cost the allocator. Only the
 * allocator deletes free rows, holding the sequence's row (as hilo_raise
 * and hilo_drop do before they delete them), and pushes only insert: a
 * version read is still the row's, else the delete raises and the
 * reservation rolls back.
 *
 * A push's rows: an INSERT ... SELECT FROM unnest() wrote a push of
 * 100,000 single-ID ranges one heap tuple (and one WAL record) at a time,
 * through the executor, with the CHECK constraint evaluated per row. Here
 * the heap tuples go in pages at a time (heap_multi_insert, as COPY and
 * PostgreSQL's catalog code write many rows), each with its index entry as
 * the executor makes it; the constraint (free_bounds) stays, for every
 * other writer, and is checked here in C. No trigger is skipped that would
 * act: the only one hilo puts on the table (replicated_row) passes every
 * row but a subscription worker's.
 */
#include "internal.h"

extern "C" {
#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/skey.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "nodes/execnodes.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
}

static AttrNumber column_of(Oid relid, const char *name)
{
    AttrNumber column = get_attnum(relid, name);
    if (column == InvalidAttrNumber)
        elog(ERROR, "hilo: hilo.free_ranges has no column %s", name);
    return column;
}

uint32 hilo_free_rows_read(int32 seq_id, int64 from, uint32 limit, Snapshot snapshot,
                           HiloRange *out, ItemPointerData *tids)
{
    Oid nsp = get_namespace_oid("hilo", false);
    Oid relid = get_relname_relid("free_ranges", nsp);
    Oid index = get_relname_relid("free_ranges_pkey", nsp);
    if (!OidIsValid(relid) || !OidIsValid(index))
        elog(ERROR, "hilo: the catalog has no table hilo.free_ranges or no index on it");
    AttrNumber seq_column = column_of(relid, "seq_id");
    AttrNumber first_column = column_of(relid, "first_id");
    AttrNumber last_column = column_of(relid, "last_id");
    Relation rel = table_open(relid, AccessShareLock);
    TupleDesc desc = RelationGetDescr(rel);
    ScanKeyData keys[2]; /* in the index's column order */
    ScanKeyInit(&keys[0], seq_column, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(seq_id));
    ScanKeyInit(&keys[1], first_column, BTGreaterEqualStrategyNumber, F_INT8GE,
                Int64GetDatum(from));
    /* Always through the index, in its order: the reservation relies on
     * it (rows used up form a prefix); systable_beginscan would scan the
     * table, unordered, under ignore_system_indexes. */
    Relation index_rel = index_open(index, AccessShareLock);
    SysScanDesc scan = systable_beginscan_ordered(rel, index_rel, snapshot, 2, keys);
    uint32 n = 0;
    HeapTuple tuple;
    while (n < limit &&
           HeapTupleIsValid(tuple = systable_getnext_ordered(scan, ForwardScanDirection))) {
        bool first_null, last_null;
        Datum first = heap_getattr(tuple, first_column, desc, &first_null);
        Datum last = heap_getattr(tuple, last_column, desc, &last_null);
        if (first_null || last_null)
            elog(ERROR, "hilo: NULL in hilo.free_ranges");
        out[n].first = DatumGetInt64(first);
        out[n].last = DatumGetInt64(last);
        if (tids != NULL)
            tids[n] = tuple->t_self;
        n++;
    }
    systable_endscan_ordered(scan);
    index_close(index_rel, AccessShareLock);
    table_close(rel, NoLock);
    return n;
}

void hilo_free_rows_delete(const ItemPointerData *tids, uint32 n)
{
    if (n == 0)
        return;
    Oid relid = get_relname_relid("free_ranges", get_namespace_oid("hilo", false));
    if (!OidIsValid(relid))
        elog(ERROR, "hilo: the catalog has no table hilo.free_ranges");
    Relation rel = table_open(relid, RowExclusiveLock);
    for (uint32 i = 0; i < n; i++) {
        ItemPointerData tid = tids[i];
        simple_heap_delete(rel, &tid);
    }
    table_close(rel, NoLock);
    CommandCounterIncrement(); /* the reads after it see them gone */
}

/* Heap tuples one heap_multi_insert call writes (COPY buffers 1,000). */
#define HILO_FREE_ROWS_INSERT_BATCH 1000

/* The free_bounds constraint of hilo.free_ranges. */
static void check_free_bounds(int32 seq_id, HiloRange r)
{
    if (r.first <= r.last)
        return;
    ereport(ERROR,
            (errcode(ERRCODE_CHECK_VIOLATION),
             errmsg("new row for relation \"free_ranges\" violates check constraint "
                    "\"free_bounds\""),
             errdetail("hilo free range of sequence %d: " INT64_FORMAT " to " INT64_FORMAT ".",
                       seq_id, r.first, r.last)));
}

void hilo_free_rows_insert(int32 seq_id, const HiloRange *ranges, uint32 nranges)
{
    if (nranges == 0)
        return;
    Oid nsp = get_namespace_oid("hilo", false);
    Oid relid = get_relname_relid("free_ranges", nsp);
    if (!OidIsValid(relid))
        elog(ERROR, "hilo: the catalog has no table hilo.free_ranges");
    AttrNumber columns[3] = {column_of(relid, "seq_id"), column_of(relid, "first_id"),
                             column_of(relid, "last_id")};
    for (uint32 i = 0; i < nranges; i++)
        check_free_bounds(seq_id, ranges[i]);

    Relation rel = table_open(relid, RowExclusiveLock);
    TupleDesc desc = RelationGetDescr(rel);
    EState *estate = CreateExecutorState();
    ResultRelInfo *rri = makeNode(ResultRelInfo);
    InitResultRelInfo(rri, rel, 0, NULL, 0);
    ExecOpenIndices(rri, false);
    CommandId cid = GetCurrentCommandId(true);

    uint32 batch = Min(nranges, (uint32)HILO_FREE_ROWS_INSERT_BATCH);
    TupleTableSlot **slots = (TupleTableSlot **)palloc(sizeof(TupleTableSlot *) * batch);
    for (uint32 i = 0; i < batch; i++)
        slots[i] = MakeSingleTupleTableSlot(desc, &TTSOpsHeapTuple);
    Datum *values = (Datum *)palloc0(sizeof(Datum) * desc->natts);
    bool *nulls = (bool *)palloc(sizeof(bool) * desc->natts);
    memset(nulls, true, sizeof(bool) * desc->natts);
    for (int c = 0; c < 3; c++)
        nulls[columns[c] - 1] = false;
    values[columns[0] - 1] = Int32GetDatum(seq_id);
    /* What one batch allocates, freed when the next begins. */
    MemoryContext tuples =
        AllocSetContextCreate(CurrentMemoryContext, "hilo push rows", ALLOCSET_DEFAULT_SIZES);

    for (uint32 done = 0; done < nranges; done += batch) {
        uint32 n = Min(batch, nranges - done);
        MemoryContext caller = MemoryContextSwitchTo(tuples);
        for (uint32 i = 0; i < n; i++) {
            values[columns[1] - 1] = Int64GetDatum(ranges[done + i].first);
            values[columns[2] - 1] = Int64GetDatum(ranges[done + i].last);
            ExecStoreHeapTuple(heap_form_tuple(desc, values, nulls), slots[i], true);
        }
        heap_multi_insert(rel, slots, (int)n, cid, 0, NULL);
        for (uint32 i = 0; i < n; i++) {
            /* 23505 if the row is there already: the push's checks refuse
             * that first. */
            list_free(hilo_insert_index_tuples(rri, slots[i], estate, false));
            ResetPerTupleExprContext(estate);
            ExecClearTuple(slots[i]);
        }
        MemoryContextSwitchTo(caller);
        MemoryContextReset(tuples);
        CHECK_FOR_INTERRUPTS();
    }

    MemoryContextDelete(tuples);
    for (uint32 i = 0; i < batch; i++)
        ExecDropSingleTupleTableSlot(slots[i]);
    pfree(slots);
    pfree(values);
    pfree(nulls);
    ExecCloseIndices(rri);
    FreeExecutorState(estate);
    pfree(rri);
    table_close(rel, NoLock);
    CommandCounterIncrement(); /* the statements after it see the rows */
}
