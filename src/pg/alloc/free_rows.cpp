/*
 * alloc/free_rows.cpp: the allocator's read of a free list, through the
 * primary key of hilo.free_ranges, without a statement: every reservation
 * looks at its sequence's free list first, empty or not, and a SELECT paid
 * executor start-up for it. Same rows, same order, same snapshot as the
 * SELECT it replaces (whose plan was that index scan: the allocator runs
 * with enable_seqscan off).
 */
#include "internal.h"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/skey.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
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
                           HiloRange *out)
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
        n++;
    }
    systable_endscan_ordered(scan);
    index_close(index_rel, AccessShareLock);
    table_close(rel, NoLock);
    return n;
}
