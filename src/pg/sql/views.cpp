/*
 * sql/views.cpp: what shared memory holds, as rows, for the views
 * hilo.buffers and hilo.status (defined in SQL on top of these).
 */
#include "../alloc/alloc.h"

extern "C" {
#include "catalog/pg_authid.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "storage/proc.h"
#include "utils/tuplestore.h"
}

/*
 * Whether the caller may see the rows of a sequence, as in the views
 * (hilo._may_use): members of pg_monitor and superusers every sequence,
 * other roles the ones they may use. The functions are public, for the
 * views; called directly they must show no more than the views do. For a
 * role that does not see all, one catalog access spans the scan, and the
 * last answer is kept (a sequence's buffers come one after another).
 */
typedef struct ViewFilter {
    bool see_all;
    Oid user;
    int32 last_seq_id;
    bool last_may;
    HiloCatalogAccess access;
} ViewFilter;

static void filter_begin(ViewFilter *f)
{
    f->user = GetUserId();
    f->see_all = has_privs_of_role(f->user, ROLE_PG_MONITOR);
    f->last_seq_id = -1;
    f->last_may = false;
    if (!f->see_all)
        hilo_catalog_begin(&f->access);
}

static bool filter_may_see(ViewFilter *f, int32 seq_id)
{
    if (f->see_all)
        return true;
    if (seq_id == f->last_seq_id)
        return f->last_may;
    static const char *sql = "SELECT owner::oid FROM hilo.sequences WHERE seq_id = $1";
    hilo_spi_exec1(sql, INT4OID, Int32GetDatum(seq_id), true, 1);
    bool may = false;
    if (SPI_processed == 1) {
        bool isnull;
        HiloSequence seq;
        memset(&seq, 0, sizeof(seq));
        seq.seq_id = seq_id;
        seq.owner = DatumGetObjectId(hilo_spi_value(0, 1, &isnull));
        may = !isnull && hilo_user_may_use(&seq, f->user);
    }
    f->last_seq_id = seq_id;
    f->last_may = may;
    return may;
}

static void filter_end(ViewFilter *f)
{
    if (!f->see_all)
        hilo_catalog_end(&f->access);
}

/* The start of both views: the checks, the result set, and the filter
 * (filter_end when done). Returns the catalog creation they show: pools
 * of an older one (a gap, freed at the next lookup) are not shown. */
static uint64 begin_view(FunctionCallInfo fcinfo, const char *function_name, ViewFilter *filter)
{
    hilo_entry(fcinfo, function_name, NULL, 0, HILO_READS);
    uint64 creation = hilo_catalog_creation_now();
    InitMaterializedSRF(fcinfo, 0);
    filter_begin(filter);
    return creation;
}

/* Every backend buffer of this database: (pid, seq_id, next_id, end_id). */
HILO_SQL_FUNCTION(hilo_buffer_slots)
{
    ViewFilter filter;
    uint64 creation = begin_view(fcinfo, "hilo.buffer_slots()", &filter);

    for (int s = 0; s < hilo_shared->num_requests; s++) {
        PGPROC *proc = GetPGProcByNumber(s);
        int nused =
            Min(*(volatile int *)&hilo_shared->slots[s].nused, hilo_shared->buffers_per_backend);
        for (int b = 0; b < nused; b++) {
            HiloBuffer *buf = &hilo_shared->slots[s].buffers[b];
            /* Read without a lock: a buffer being filled for the first time
             * may show in_use before its pool_index (-1 until then), as the
             * other scans of every buffer allow for. */
            int pi = buf->pool_index;
            if (!buf->in_use || buf->dboid != MyDatabaseId || pi < 0 ||
                pi >= hilo_shared->num_pools)
                continue;
            HiloPool *pool = hilo_pool_at(pi);
            /* Read under the pool lock, so identity and end belong together. */
            LWLockAcquire(&pool->lock, LW_SHARED);
            bool current = buf->in_use && buf->dboid == MyDatabaseId &&
                           buf->generation == pg_atomic_read_u64(&pool->generation) &&
                           pool->creation == creation;
            int32 seq_id = buf->seq_id;
            int64 next = (int64)pg_atomic_read_u64(&buf->next);
            int64 end = buf->end;
            LWLockRelease(&pool->lock);
            if (!current || next >= end || !filter_may_see(&filter, seq_id))
                continue;
            Datum values[4] = {Int32GetDatum(proc->pid), Int32GetDatum(seq_id), Int64GetDatum(next),
                               Int64GetDatum(end)};
            bool nulls[4] = {false, false, false, false};
            hilo_put_row(fcinfo, values, nulls);
        }
    }
    filter_end(&filter);
    return (Datum)0;
}

/* Every pool of this database: (seq_id, pool_ids, buffered_ids, issued, rate). */
HILO_SQL_FUNCTION(hilo_pool_stats)
{
    ViewFilter filter;
    uint64 creation = begin_view(fcinfo, "hilo.pool_stats()", &filter);

    for (int i = 0; i < hilo_shared->num_pools; i++) {
        HiloPool *pool = hilo_pool_at(i);
        LWLockAcquire(&pool->lock, LW_SHARED);
        bool mine = pool->in_use && pool->dboid == MyDatabaseId && pool->creation == creation;
        int32 seq_id = pool->seq_id;
        LWLockRelease(&pool->lock);
        if (!mine || !filter_may_see(&filter, seq_id))
            continue;
        uint64 pool_ids, buffered, issued;
        double rate;
        hilo_pool_counts(i, &pool_ids, &buffered, &issued, &rate);
        Datum values[5] = {
            Int32GetDatum(seq_id), Int64GetDatum((int64)pool_ids), Int64GetDatum((int64)buffered),
            /* saturates: pushed IDs taken again count twice */
            Int64GetDatum((int64)Min(issued, (uint64)PG_INT64_MAX)), Float8GetDatum(rate)};
        bool nulls[5] = {false, false, false, false, false};
        hilo_put_row(fcinfo, values, nulls);
    }
    filter_end(&filter);
    return (Datum)0;
}

/* hilo._may_use(seq_id, owner): may the current user use this sequence?
 * hilo_take's own check, for the views hilo.status and hilo.buffers. */
HILO_SQL_FUNCTION(hilo_may_use)
{
    HiloSequence seq;
    memset(&seq, 0, sizeof(seq));
    seq.seq_id = PG_GETARG_INT32(0);
    seq.owner = PG_GETARG_OID(1);
    Oid user = GetUserId();
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    bool may = hilo_user_may_use(&seq, user);
    hilo_catalog_end(&access);
    PG_RETURN_BOOL(may);
}

/* Every counted sequence of this database: (seq_id, issued, rate), IDs this
 * node handed out since start by any path (alloc/issued.cpp). */
HILO_SQL_FUNCTION(hilo_issued_stats)
{
    ViewFilter filter;
    uint64 creation = begin_view(fcinfo, "hilo.issued_stats()", &filter);
    int max = hilo_max_sequences;
    HiloIssued *rows = (HiloIssued *)palloc(sizeof(HiloIssued) * max);
    hilo_pool_report_issued(MyDatabaseId);
    int n = hilo_issued_read(MyDatabaseId, creation, rows, max);
    for (int i = 0; i < n; i++) {
        if (!filter_may_see(&filter, rows[i].seq_id))
            continue;
        Datum values[3] = {Int32GetDatum(rows[i].seq_id),
                           Int64GetDatum((int64)Min(rows[i].issued, (uint64)PG_INT64_MAX)),
                           Float8GetDatum(rows[i].rate)};
        bool nulls[3] = {false, false, false};
        hilo_put_row(fcinfo, values, nulls);
    }
    filter_end(&filter);
    return (Datum)0;
}
