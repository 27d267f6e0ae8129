/*
 * alloc/dispatch.cpp: the way a call of a looked-up sequence goes
 * (dispatch.h): hilo_take's whole call below its lookup, hilo_nextval's
 * choice of route, and what both ask the catalog before a refill.
 */
#include "dispatch.h"
#include "internal.h"

extern "C" {
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/snapmgr.h"
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

HiloRange *hilo_dispatch_take(const HiloSequence *seq, int64 n, bool partial, int *pool_at,
                              uint64 *generation_at, uint32 *nranges)
{
    switch (hilo_route(seq, (uint64)n)) {
        case HILO_ROUTE_ORDERED:
            /* sql/ hands those to order/ (hilo_order_take). */
            elog(ERROR, "hilo sequence \"%s\": an ordered take reached the allocator", seq->name);
            pg_unreachable();
        case HILO_ROUTE_CREATED_HERE:
            return hilo_local_take(seq, n, partial, nranges);
        case HILO_ROUTE_ALLOCATOR:
            /* A large take needs no pool slot. */
            return hilo_allocator_take(seq, n, partial, nranges);
        case HILO_ROUTE_POOL:
            break;
    }
    /* Small takes and monotonic sequences are served from the pool. A
     * failed call leaves no trace, so a pool it created is freed again if
     * nothing entered it. */
    uint64 generation;
    bool created;
    int pool_index = hilo_pool_attach_created(seq, &generation, &created);
    *pool_at = pool_index;
    *generation_at = generation;
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
            *pool_at = -1;
        }
        PG_RE_THROW();
    }
    PG_END_TRY();
    if (result == NULL && created) {
        /* Looked up again: a pool it made and never used goes. */
        hilo_pool_release_if_unused(pool_index, generation);
        *pool_at = -1;
    }
    return result;
}

/* hilo_nextval of a sequence created in the caller's own transaction
 * (alloc/local_sequences.cpp); false if `name` is not one. Looked up by
 * name before any cache: such a sequence is never cached, and its IDs
 * come from this backend whatever its ordering (a take of one goes the
 * ordered way when it has one: hilo_route). */
bool hilo_local_nextval(const char *name, int len, int64 *id)
{
    char cname[HILO_MAX_NAME_BYTES + 1];
    memcpy(cname, name, len);
    cname[len] = '\0';

    HiloSequence seq;
    hilo_lookup_usable_sequence(cname, true, &seq);
    if (!seq.created_here)
        return false;
    uint32 nranges;
    HiloRange *r = hilo_local_take(&seq, 1, false, &nranges);
    *id = r->first;
    pfree(r);
    return true;
}
