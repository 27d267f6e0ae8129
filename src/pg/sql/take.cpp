/*
 * sql/take.cpp: hilo_take and hilo_take_ranges.
 *
 * The caller checks its arguments and finds the sequence in its own
 * snapshot; the way the take goes from there (ordered, created here, pool
 * or allocator) is alloc/dispatch.cpp's, which hilo_nextval shares. The
 * reservation itself is made and committed by the allocator worker
 * (alloc/client.cpp), so the caller's rollback cannot undo it.
 */
#include "sql.h"
#include "../alloc/dispatch.h"
#include "../order/order.h"

extern "C" {
#include "access/xact.h"
#include "access/xlog.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"
}

/*
 * The common call, made as hilo_nextval makes its own: a sequence this
 * backend has cached whose pool has the IDs, found without copying the
 * name. Every check of take_checked that could fail is made here too, and
 * anything that fails one goes the whole way, where it raises in its
 * order; a cached entry exists only once a call passed the preload check.
 * *pool_tried: the pool was asked, and had not the IDs.
 */
static HiloRange *take_from_cached_pool(FunctionCallInfo fcinfo, bool *pool_tried, uint32 *nranges)
{
    *pool_tried = false;
    if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2) || XactReadOnly ||
        RecoveryInProgress() || hilo_local_any())
        return NULL;
    int64 n = PG_GETARG_INT64(1);
    if (n <= 0)
        return NULL;
    text *name_text = PG_GETARG_TEXT_PP(0);
    HiloTakeTarget *target =
        hilo_take_cache_find(VARDATA_ANY(name_text), VARSIZE_ANY_EXHDR(name_text));
    if (target == NULL || target->pool_index < 0 ||
        hilo_route(&target->seq, (uint64)n) != HILO_ROUTE_POOL)
        return NULL;
    *pool_tried = true;
    HiloRange *ranges;
    if (hilo_pool_take(target->pool_index, target->generation, (uint64)n, &ranges, nranges) !=
        HILO_POOL_OK)
        return NULL;
    return ranges;
}

/* The checks, then the reservation; `pool_tried`: take_from_cached_pool
 * found the pool short already. */
static HiloRange *take_checked(FunctionCallInfo fcinfo, const char *function_name, bool pool_tried,
                               uint32 *nranges)
{
    static const char *const arg_names[] = {"seq", "n", "partial"};
    hilo_entry(fcinfo, function_name, arg_names, 3, HILO_READS);

    char name[HILO_MAX_NAME_BYTES + 1];
    hilo_check_name(PG_GETARG_TEXT_PP(0), name);
    int64 n = PG_GETARG_INT64(1);
    bool partial = PG_GETARG_BOOL(2);
    if (n <= 0)
        ereport(ERROR,
                (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                 errmsg("cannot take " INT64_FORMAT " IDs from hilo sequence \"%s\"", n, name),
                 errdetail("n must be at least 1.")));
    hilo_require_writable(function_name);

    /* The sequence as this backend last looked it up, unless an
     * invalidation says it or the usage right may have changed; sequences
     * this transaction created are looked up every time. */
    HiloTakeTarget *target = hilo_local_any() ? NULL : hilo_take_cache_find(name, strlen(name));
    if (!pool_tried && target != NULL && target->pool_index >= 0 &&
        hilo_route(&target->seq, (uint64)n) == HILO_ROUTE_POOL) {
        /* The common small take: the pool has the IDs. */
        HiloRange *ranges;
        if (hilo_pool_take(target->pool_index, target->generation, (uint64)n, &ranges, nranges) ==
            HILO_POOL_OK)
            return ranges;
    }
    /*
     * A large take of a sequence looked up before: the allocator locks its
     * row by seq_id and checks the catalog's creation in its own
     * transaction, so the lookup need not be made again for it (it cost
     * the backend a fifth of its time per take). If the row or the catalog
     * is gone by now, the name is looked up again below.
     */
    if (target != NULL && hilo_route(&target->seq, (uint64)n) == HILO_ROUTE_ALLOCATOR) {
        HiloRange *ranges = hilo_allocator_take_remembered(&target->seq, n, partial, nranges);
        if (ranges != NULL)
            return ranges;
    }
    /*
     * Anything else (a refill, a stale pool, a remembered sequence gone)
     * looks the sequence up again, under its lock and in this statement's snapshot: a DROP
     * EXTENSION or hilo_drop that committed after this transaction took in
     * its invalidations is then seen (40001, 42704) rather than mixed with
     * the cached row (a refill reads the latest catalog).
     */
    HiloSequence seq;
    HiloSequence stale;
    memset(&stale, 0, sizeof(stale));
    for (;;) {
        CHECK_FOR_INTERRUPTS();
        target = hilo_take_cache_load(name, &seq);
        if (stale.seq_id != 0 && stale.seq_id == seq.seq_id && stale.creation == seq.creation &&
            hilo_catalog_ids_left(&seq, 0, false) < 0)
            /* Still the dropped one in this transaction's snapshot. */
            ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                            errmsg("hilo sequence \"%s\" does not exist", name),
                            errdetail("It was dropped while the call ran.")));
        if (hilo_route(&seq, (uint64)n) == HILO_ROUTE_ORDERED) {
            /* One range above every ID the cluster handed out before this
             * call; partial changes nothing (a claim is whole or fails). */
            HiloRange *range = (HiloRange *)palloc(sizeof(HiloRange));
            hilo_order_take(&seq, (uint64)n, range);
            *nranges = 1;
            return range;
        }
        /* No cache entry (NULL) for a sequence created in this transaction:
         * its IDs never come from a pool, but the dispatcher is given
         * somewhere to note one all the same. */
        int no_pool = -1;
        uint64 no_generation = 0;
        HiloRange *ranges =
            hilo_dispatch_take(&seq, n, partial, target != NULL ? &target->pool_index : &no_pool,
                               target != NULL ? &target->generation : &no_generation, nranges);
        if (ranges != NULL)
            return ranges;
        /* Its pool went stale (the slot given to another sequence, or the
         * sequence dropped or changed), or the sequence went from the
         * catalog, while the call ran: look it up again, as hilo_nextval
         * does. */
        stale = seq;
    }
}

/* The common part of both functions. */
static HiloRange *take_ids(FunctionCallInfo fcinfo, const char *function_name, uint32 *nranges)
{
    bool pool_tried;
    HiloRange *ranges = take_from_cached_pool(fcinfo, &pool_tried, nranges);
    if (ranges != NULL)
        return ranges;
    return take_checked(fcinfo, function_name, pool_tried, nranges);
}

HILO_SQL_FUNCTION(hilo_take)
{
    uint32 nranges;
    HiloRange *ranges = take_ids(fcinfo, "hilo_take()", &nranges);
    return hilo_ranges_to_multirange(ranges, nranges);
}

HILO_SQL_FUNCTION(hilo_take_ranges)
{
    /* Set up the result first: once IDs are reserved, nothing may fail. */
    InitMaterializedSRF(fcinfo, 0);
    uint32 nranges;
    HiloRange *ranges = take_ids(fcinfo, "hilo_take_ranges()", &nranges);
    for (uint32 i = 0; i < nranges; i++) {
        Datum values[2] = {Int64GetDatum(ranges[i].first), Int64GetDatum(ranges[i].last)};
        bool nulls[2] = {false, false};
        hilo_put_row(fcinfo, values, nulls);
    }
    return (Datum)0;
}
