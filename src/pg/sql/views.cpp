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

/* The start of both views. Returns the catalog incarnation they show:
 * pools of an older one (a gap, freed at the next lookup) are not shown. */
static uint64 begin_view(FunctionCallInfo fcinfo, const char *function_name)
{
    hilo_entry(fcinfo, function_name, NULL, 0, HILO_READS);
    uint64 incarnation = hilo_catalog_incarnation_now();
    InitMaterializedSRF(fcinfo, 0);
    return incarnation;
}

/*
 * Whether the caller may see the rows of sequence `seq_id`, as in the views
 * (hilo._may_use): members of pg_monitor and superusers (`see_all`) every
 * sequence, other roles the ones they may use. The functions are public,
 * for the views; called directly they must show no more than the views do.
 */
static bool may_see(int32 seq_id, bool see_all, Oid user)
{
    if (see_all)
        return true;
    static const char *sql = "SELECT owner::oid FROM hilo.sequences WHERE seq_id = $1";
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    hilo_spi_exec1(sql, INT4OID, Int32GetDatum(seq_id), true, 1);
    bool may = false;
    if (SPI_processed == 1) {
        bool isnull;
        HiloSequence seq;
        memset(&seq, 0, sizeof(seq));
        seq.seq_id = seq_id;
        seq.owner = DatumGetObjectId(hilo_spi_value(0, 1, &isnull));
        may = !isnull && hilo_user_may_use(&seq, user);
    }
    hilo_catalog_end(&access);
    return may;
}

static bool caller_sees_all(void)
{
    return has_privs_of_role(GetUserId(), ROLE_PG_MONITOR);
}

/* Every backend buffer of this database: (pid, seq_id, next_id, end_id). */
HILO_SQL_FUNCTION(hilo_buffer_slots)
{
    uint64 incarnation = begin_view(fcinfo, "hilo.buffer_slots()");
    bool see_all = caller_sees_all();
    Oid user = GetUserId();

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
                           pool->incarnation == incarnation;
            int32 seq_id = buf->seq_id;
            int64 next = (int64)pg_atomic_read_u64(&buf->next);
            int64 end = buf->end;
            LWLockRelease(&pool->lock);
            if (!current || next >= end || !may_see(seq_id, see_all, user))
                continue;
            Datum values[4] = {Int32GetDatum(proc->pid), Int32GetDatum(seq_id), Int64GetDatum(next),
                               Int64GetDatum(end)};
            bool nulls[4] = {false, false, false, false};
            hilo_put_row(fcinfo, values, nulls);
        }
    }
    return (Datum)0;
}

/* Every pool of this database: (seq_id, pool_ids, buffered_ids, issued, rate). */
HILO_SQL_FUNCTION(hilo_pool_stats)
{
    uint64 incarnation = begin_view(fcinfo, "hilo.pool_stats()");
    bool see_all = caller_sees_all();
    Oid user = GetUserId();

    for (int i = 0; i < hilo_shared->num_pools; i++) {
        HiloPool *pool = hilo_pool_at(i);
        LWLockAcquire(&pool->lock, LW_SHARED);
        bool mine = pool->in_use && pool->dboid == MyDatabaseId && pool->incarnation == incarnation;
        int32 seq_id = pool->seq_id;
        LWLockRelease(&pool->lock);
        if (!mine || !may_see(seq_id, see_all, user))
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
