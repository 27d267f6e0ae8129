/*
 * sql/take.cpp: hilo_take and hilo_take_ranges.
 *
 * The caller checks its arguments and finds the sequence in its own
 * snapshot; the reservation itself is made and committed by the allocator
 * worker (alloc/client.cpp), so the caller's rollback cannot undo it.
 */
#include "sql.h"

extern "C" {
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/snapmgr.h"
#include "utils/tuplestore.h"
}

int64 hilo_catalog_ids_left(const HiloSequence *seq, int64 above, bool include_free)
{
    /*
     * $2: above, $3: include_free, $4: enough. Callers only compare the
     * answer with 0 or with a take of at most block_size IDs, so it needs
     * to be exact only up to block_size ($4): the free list is read only
     * when open windows and the room up to max_value hold fewer, and then
     * only its lowest block_size rows above $2 (each holds at least one
     * ID). Summing all of it cost a fragmented sequence a scan of every
     * free row (and of the dead index entries of rows consumed before)
     * each time a pool ran dry.
     */
    static const char *sql =
        "SELECT least(CASE WHEN b.base >= $4 OR NOT $3 THEN b.base"
        "             ELSE b.base"
        "                  + coalesce((SELECT sum(f.last_id - f.first_id + 1)"
        "                                FROM (SELECT first_id, last_id FROM hilo.free_ranges"
        "                                       WHERE seq_id = $1 AND first_id > $2"
        "                                       ORDER BY first_id LIMIT $4) f), 0)"
        "                  + coalesce((SELECT greatest(f.last_id - $2, 0)"
        "                                FROM hilo.free_ranges f"
        "                               WHERE f.seq_id = $1 AND f.first_id <= $2"
        "                               ORDER BY f.first_id DESC LIMIT 1), 0)"
        "             END, 9223372036854775807)::bigint"
        "  FROM (SELECT coalesce((SELECT sum(w.window_end_value"
        "                                    - greatest(w.next_hi_value, $2 + 1))"
        "                           FROM hilo.windows w"
        "                          WHERE w.seq_id = $1 AND w.next_hi_value < w.window_end_value"
        "                            AND w.window_end_value > $2 + 1), 0)"
        "               + greatest($5 - greatest(s.high_water_mark, $2, $6), 0) AS base"
        "          FROM hilo.sequences s WHERE s.seq_id = $1) b";
    Oid types[6] = {INT4OID, INT8OID, BOOLOID, INT8OID, INT8OID, INT8OID};
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    /* $5, $6: what this node may hand out (its slice, with node_bits). */
    int64 floor, top;
    (void)hilo_sequence_bounds(seq->name, seq->node_bits, seq->max_value, true, &floor, &top);
    Datum values[6] = {Int32GetDatum(seq->seq_id), Int64GetDatum(Max(above, (int64)0)),
                       BoolGetDatum(include_free), Int64GetDatum(Max(seq->block_size, 1)),
                       Int64GetDatum(top),         Int64GetDatum(floor)};
    hilo_catalog_prefer_indexes();
    /* The latest committed state: what the allocator reserved meanwhile. */
    hilo_spi_exec_snapshot(sql, 6, types, values, NULL, GetLatestSnapshot(), true, 1);
    /* No row: the sequence was dropped (and maybe made again) meanwhile. */
    int64 left = SPI_processed > 0 ? hilo_spi_int64(0, 1) : -1;
    hilo_catalog_end(&access);
    return left;
}

static void raise_short(const HiloSequence *seq, uint64 got, uint64 wanted) pg_attribute_noreturn();
static void raise_short(const HiloSequence *seq, uint64 got, uint64 wanted)
{
    int64 floor, top;
    hilo_sequence_bounds_of(seq, &floor, &top);
    hilo_raise_short(seq->name, got, wanted, seq->max_value, top);
}

/* IDs a pool holds plus those the catalog has left, saturating; false if
 * the sequence is gone from the catalog (dropped meanwhile). */
static bool ids_available(const HiloSequence *seq, int pool_index, uint64 generation,
                          bool include_free, uint64 *available)
{
    uint64 pooled = hilo_pool_ids_above(pool_index, generation, 0);
    int64 left = hilo_catalog_ids_left(seq, 0, include_free);
    if (left < 0)
        return false;
    *available = pooled > UINT64_MAX - (uint64)left ? UINT64_MAX : pooled + (uint64)left;
    return true;
}

/*
 * A take from a monotonic sequence: always from the pool, whose IDs every
 * caller takes lowest first under its lock, so each take lies above all
 * IDs handed out before it, by nextval or take, in any backend. NULL when
 * the pool is stale (its slot given to another sequence, or the sequence
 * dropped or changed) or the sequence is gone: the caller looks again.
 */
static HiloRange *take_monotonic(const HiloSequence *seq, int pool_index, uint64 generation,
                                 uint64 n, bool partial, uint32 *nranges)
{
    for (int attempt = 0; attempt < 8; attempt++) {
        HiloRange *ranges;
        HiloPoolResult r = hilo_pool_take(pool_index, generation, n, &ranges, nranges);
        if (r == HILO_POOL_OK)
            return ranges;
        if (r == HILO_POOL_STALE)
            return NULL;
        /* A refill is committed before the take: ask for one only if the
         * take can then succeed, so that a take bound to fail reserves
         * nothing (a failed call changes nothing: docs/guarantees.md). */
        uint64 available;
        if (!ids_available(seq, pool_index, generation, false, &available))
            return NULL;
        if (available == 0 || (!partial && available < n))
            raise_short(seq, available, n);
        if (!hilo_allocator_refill(seq, pool_index, n, true))
            break; /* nothing left above */
    }
    /* Short: what this sequence's pool still holds, if partial (0 once its
     * slot is another sequence's: then look again). */
    uint64 left = hilo_pool_ids_above(pool_index, generation, 0);
    if (left == 0 && !hilo_pool_is_current(pool_index, generation))
        return NULL;
    if (partial && left > 0) {
        HiloRange *ranges;
        if (hilo_pool_take(pool_index, generation, left, &ranges, nranges) == HILO_POOL_OK)
            return ranges;
    }
    raise_short(seq, left, n);
}

static pg_noinline HiloRange *take_from_pool_or_allocator(const HiloSequence *seq, int pool_index,
                                                          uint64 generation, int64 n, bool partial,
                                                          uint32 *nranges)
{
    if (seq->ordering == HILO_ORDERING_NODE)
        return take_monotonic(seq, pool_index, generation, (uint64)n, partial, nranges);
    if ((uint64)n <= (uint64)seq->block_size) {
        /* Small takes come from the pool, refilled at most once; if it
         * still falls short, the allocator serves the take (and says
         * exactly how many IDs are left). */
        for (int attempt = 0; attempt < 2; attempt++) {
            HiloRange *ranges;
            HiloPoolResult r = hilo_pool_take(pool_index, generation, (uint64)n, &ranges, nranges);
            if (r == HILO_POOL_OK)
                return ranges;
            if (r == HILO_POOL_STALE || attempt == 1)
                break;
            /* No refill for a take bound to fail: it is committed first
             * (nor for a sequence gone: the allocator says so). */
            uint64 available;
            if (!ids_available(seq, pool_index, generation, true, &available) || available == 0 ||
                (!partial && available < (uint64)n) ||
                !hilo_allocator_refill(seq, pool_index, (uint64)n, false))
                break;
        }
    }
    /* The allocator's own transaction: a take it cannot serve whole rolls
     * back, and pool IDs it borrowed go back. */
    return hilo_allocator_take(seq, n, partial, nranges);
}

/* A take from `seq` as looked up (its cache entry `target`); NULL if it
 * must be looked up again. */
static HiloRange *take_looked_up(HiloTakeTarget *target, const HiloSequence *seq, int64 n,
                                 bool partial, uint32 *nranges)
{
    if (seq->ordering == HILO_ORDERING_QUORUM || seq->ordering == HILO_ORDERING_CLUSTER) {
        /* One range above every ID the cluster handed out before this
         * call; partial changes nothing (a claim is whole or fails). */
        HiloRange *range = (HiloRange *)palloc(sizeof(HiloRange));
        hilo_ordered_take(seq, (uint64)n, range);
        *nranges = 1;
        return range;
    }
    if (seq->created_here)
        return hilo_local_take(seq, n, partial, nranges);

    /* A large take goes straight to the allocator and needs no pool slot. */
    if (seq->ordering != HILO_ORDERING_NODE && (uint64)n > (uint64)seq->block_size)
        return hilo_allocator_take(seq, n, partial, nranges);
    /* Small takes and monotonic sequences are served from the pool. A
     * failed call leaves no trace, so a pool it created is freed again if
     * nothing entered it. */
    uint64 generation;
    bool created;
    int pool_index = hilo_pool_attach_created(seq, &generation, &created);
    target->pool_index = pool_index;
    target->generation = generation;
    HiloRange *volatile result = NULL;
    PG_TRY();
    {
        result = take_from_pool_or_allocator(seq, pool_index, generation, n, partial, nranges);
    }
    PG_CATCH();
    {
        HILO_FORGET_UNWOUND_FRAMES();
        if (created) {
            hilo_pool_release_if_unused(pool_index, generation);
            target->pool_index = -1;
        }
        PG_RE_THROW();
    }
    PG_END_TRY();
    if (result == NULL && created) {
        /* Looked up again: a pool it made and never used goes. */
        hilo_pool_release_if_unused(pool_index, generation);
        target->pool_index = -1;
    }
    return result;
}

/* The common part of both functions: checks, then the reservation. */
static HiloRange *take_ids(FunctionCallInfo fcinfo, const char *function_name, uint32 *nranges)
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
    HiloTakeTarget *target = hilo_local_any() ? NULL : hilo_take_cache_find(name);
    if (target != NULL && target->pool_index >= 0 &&
        (target->seq.ordering == HILO_ORDERING_NODE ||
         (uint64)n <= (uint64)target->seq.block_size)) {
        /* The common small take: the pool has the IDs. */
        HiloRange *ranges;
        if (hilo_pool_take(target->pool_index, target->generation, (uint64)n, &ranges, nranges) ==
            HILO_POOL_OK)
            return ranges;
    }
    /*
     * Anything else (a large take, a refill, a stale pool) looks the sequence
     * up again, under its lock and in this statement's snapshot: a DROP
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
        HiloRange *ranges = take_looked_up(target, &seq, n, partial, nranges);
        if (ranges != NULL)
            return ranges;
        /* Its pool went stale (the slot given to another sequence, or the
         * sequence dropped or changed), or the sequence went from the
         * catalog, while the call ran: look it up again, as hilo_nextval
         * does. */
        stale = seq;
    }
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
