/*
 * sql/nextval.cpp: hilo_nextval, for DEFAULT hilo_nextval('orders').
 *
 * The common call touches no lock and no catalog: the backend finds the
 * sequence in its local cache (the last one used, else a hash table of
 * every sequence it used), checks with one atomic read that no pool's
 * generation moved and with a few comparisons that its catalog and usage
 * checks still hold since the entry passed them (its stamp,
 * sql/nextval_cache.h), and hands out the next ID of its buffer.
 * Only when the buffer is empty does it go to the pool (one LWLock), and
 * only when the pool is empty does it wait for the allocator.
 *
 * Buffers are hilo.session_buffers per backend (shared memory); a cached
 * sequence holds one while it has one, and the least recently used (an
 * empty one first) is given back when a further sequence needs one. The
 * cache and the buffers are sql/nextval_cache.cpp (its index by name
 * sql/name_index.cpp); this file is the call.
 *
 * Block sizes adapt to the rate (docs/design.md, "Dense keys"): a refill
 * asks for as many IDs as this session used in about HILO_BLOCK_TARGET_US,
 * from 1 up to the sequence's block_size, so that sessions inserting
 * slowly draw neighbouring IDs from one stream and a B-tree over them
 * fills its pages as one over bigserial does, while a bulk loop still
 * takes block_size IDs per refill.
 */
#include "name_index.h"
#include "nextval_cache.h"
#include "../alloc/dispatch.h"
#include "../order/order.h"

extern "C" {
#include "access/xact.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "utils/builtins.h"
}

/* How many refills in a row may come back with nothing for this session
 * (other sessions took it all) before the call gives up; far above what
 * contention makes (a refill is a round trip to the allocator). */
#define HILO_NEXTVAL_MAX_EMPTY_REFILLS 4096

/* A refill aims at the IDs this session uses in this long. */
#define HILO_BLOCK_TARGET_US 1000

static void raise_exhausted_for_backend(const CachedSequence *c) pg_attribute_noreturn();
static void raise_exhausted_for_backend(const CachedSequence *c)
{
    ereport(ERROR,
            (errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
             errmsg("hilo sequence \"%s\" is exhausted", c->seq.name),
             errdetail("No ID above " INT64_FORMAT ", the last this session received, is left.",
                       c->last_value)));
}

/*
 * Looks the sequence of `c` up again after the latest committed catalog
 * showed it gone: the one made again under the name, or 42704 if this
 * transaction's snapshot still shows the dropped one.
 */
static CachedSequence *nextval_look_again(CachedSequence *c, const char *name, int len)
{
    int32 seq_id = c->seq.seq_id;
    uint64 creation = c->seq.creation;
    c = hilo_nextval_load(name, len);
    if (c->seq.seq_id == seq_id && c->seq.creation == creation &&
        hilo_catalog_ids_left(&c->seq, 0, false) < 0)
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                        errmsg("hilo sequence \"%s\" does not exist", c->seq.name),
                        errdetail("It was dropped while the call ran.")));
    return c;
}

/*
 * IDs the next refill asks for, at most the sequence's block_size. A session
 * alone on the sequence (no other backend holds a buffer of its pool) is
 * one stream of keys, dense anyway: its blocks double from
 * HILO_BLOCK_ALONE_FIRST. With others, about what this session used in
 * HILO_BLOCK_TARGET_US, going by how long its last block lasted (at least
 * one, at most doubling per refill), so that slow sessions take their IDs
 * next to each other. A sequence whose buffer was taken back for another
 * (the session uses more sequences in turn than it has buffers) asks for
 * no more than it used of its last block: what is left at a buffer's
 * eviction goes back to the pool, two changes of its ranges for nothing.
 */
#define HILO_BLOCK_ALONE_FIRST 16
static uint64 next_block(CachedSequence *c, TimestampTz now)
{
    uint64 max = (uint64)Max(c->block_size, 1);
    bool mine = c->buf != NULL && c->buf->in_use && c->buf->pool_index == c->pool_index &&
                c->buf->generation == c->generation;
    if (c->evicted) {
        /* More sequences in turn than buffers: no more than it used. */
        c->block = Max(c->block_used, (uint64)1);
        c->evicted = false;
    } else if (hilo_pool_sessions(c->pool_index) - (mine ? 1 : 0) <= 0) {
        c->block = Max(2 * c->block, (uint64)HILO_BLOCK_ALONE_FIRST);
    } else if (c->filled_at != 0) {
        int64 lasted = Max(now - c->filled_at, (int64)1);
        double want = (double)c->block * HILO_BLOCK_TARGET_US / (double)lasted;
        uint64 block = want >= (double)(2 * c->block) ? 2 * c->block : (uint64)want;
        c->block = Max(block, (uint64)1);
    }
    c->block = Min(c->block, max);
    c->filled_at = now;
    return c->block;
}

/* A sequence without a buffer, used less often than a block is meant to
 * last while every buffer is held: its ID comes straight from the pool
 * (nextval_slow_body says why). */
static inline bool lone_take_wanted(const CachedSequence *c, TimestampTz now)
{
    return c->buf == NULL && hilo_nextval_buffers_all_held() &&
           (c->filled_at == 0 || now - c->filled_at >= HILO_BLOCK_TARGET_US);
}

/*
 * The slow path's take straight from the pool, for an entry found by name
 * that passed the slow path's checks: a session going round more sequences
 * than it has buffers makes it in most calls, and it neither creates
 * anything nor raises, so it needs neither the slow path's PG_TRY nor its
 * second lookup of the name. False, having changed nothing the slow path
 * does not do again, if it does not apply or the pool has no ID for it.
 */
static bool nextval_lone_take(CachedSequence *c, const char *name, int len, int64 *id)
{
    if (c->buf != NULL || !hilo_nextval_buffers_all_held())
        return false;
    TimestampTz now = GetCurrentTimestamp();
    if (!lone_take_wanted(c, now))
        return false;
    bool need_fresh, inside_range;
    if (hilo_pool_next_above(c->pool_index, c->generation, c->last_value, now, id, &need_fresh,
                             &inside_range) != HILO_POOL_OK)
        return false;
    c->filled_at = now;
    c->last_value = *id;
    c->referenced = true;
    hilo_nextval_set_last_hit(c, name, len);
    return true;
}

/* Everything but the fast path: (re)loading, refilling, waiting. */
static int64 nextval_slow_body(const char *name, int len)
{
    hilo_check_name_length(len);
    if (unlikely(hilo_local_any())) {
        /* A sequence this transaction created is served here, never cached. */
        int64 id;
        if (hilo_local_nextval(name, len, &id))
            return id;
    }
    CachedSequence *c = hilo_nextval_find(name, len);
    if (c == NULL && ++hilo_nextval_lookups >= HILO_PRELOAD_AFTER &&
        hilo_nextval_preloaded_epoch != hilo_catalog_epoch()) {
        hilo_nextval_preload();
        c = hilo_nextval_find(name, len);
    }
    /* Refills that came back with the pool they filled still current and
     * still empty for this session; a pool released or taken meanwhile
     * (the table full) is no sign of exhaustion. */
    int empty_refills = 0;
    int refilled_pool = -1;
    uint64 refilled_generation = 0;
    for (;;) {
        CHECK_FOR_INTERRUPTS();
        /* Read before the checks below: an entry that passes them is
         * published under it (nextval_cache.h). */
        uint64 stamp = hilo_nextval_stamp();
        pg_read_barrier();
        if (c == NULL)
            c = hilo_nextval_load(name, len);
        if (c->ordered) {
            /* Ordered across the cluster: no pool, no buffer, so no pool
             * generation tells of a drop or alter; the catalog epoch does
             * (a sequence dropped and made again under the name, with
             * another start_value, max_value or ordering, is looked up
             * again rather than served under the old settings). */
            if (c->catalog_epoch != hilo_catalog_epoch()) {
                c = hilo_nextval_load(name, len);
                continue;
            }
            if (!usage_checked(c))
                hilo_nextval_check_usage(c);
            HiloRange r;
            hilo_order_take(&c->seq, 1, &r);
            return r.first;
        }
        if (c->pool_index < 0) {
            /* Read by hilo_nextval_preload: the usage check first, as a lookup does. */
            if (!usage_checked(c))
                hilo_nextval_check_usage(c);
            hilo_nextval_attach_pool(c);
        }
        if (!hilo_pool_is_current(c->pool_index, c->generation) ||
            c->catalog_epoch != hilo_catalog_epoch()) {
            /* After a catalog change every entry is looked up again: once
             * many are, all of them at once. */
            if (c->catalog_epoch != hilo_catalog_epoch() &&
                hilo_nextval_preloaded_epoch != hilo_catalog_epoch() &&
                ++hilo_nextval_lookups >= HILO_PRELOAD_AFTER) {
                hilo_nextval_preload();
                c = hilo_nextval_find(name, len);
                continue;
            }
            c = hilo_nextval_load(name, len);
            continue;
        }
        if (!usage_checked(c))
            hilo_nextval_check_usage(c);
        c->referenced = true;
        hilo_nextval_set_last_hit(c, name, len);

        HiloPoolResult result;
        bool need_fresh = false;
        if (c->monotonic) {
            int64 id;
            result = hilo_pool_next_monotonic(c->pool_index, c->generation, &id);
            if (result == HILO_POOL_OK) {
                c->last_value = id;
                return id;
            }
        } else {
            int64 id;
            if (take_from_buffer(c, &id)) {
                hilo_nextval_publish(c, stamp);
                return id;
            }
            TimestampTz now = GetCurrentTimestamp();
            /* Used less often than a block is meant to last, it would
             * refill one ID at a time anyway: with every buffer held,
             * that ID comes straight from the pool rather than with a
             * buffer taken back from another sequence (with more
             * sequences in turn than buffers, every call took one
             * back, and the sequences holding buffers never kept IDs
             * in them). */
            bool direct = lone_take_wanted(c, now);
            bool inside_range = false;
            if (direct) {
                result = hilo_pool_next_above(c->pool_index, c->generation, c->last_value, now, &id,
                                              &need_fresh, &inside_range);
                if (result == HILO_POOL_OK) {
                    c->filled_at = now;
                    c->last_value = id;
                    return id;
                }
            }
            if (!direct || inside_range) {
                if (c->buffer < 0)
                    hilo_nextval_attach_buffer(c);
                uint64 block = c->block;
                TimestampTz filled_at = c->filled_at;
                bool evicted = c->evicted;
                uint64 want = next_block(c, now);
                result = hilo_pool_fill_buffer(c->pool_index, c->generation, c->buffer,
                                               c->last_value, want, now, &need_fresh);
                if (result != HILO_POOL_OK) {
                    /* Sized again when it is filled. */
                    c->block = block;
                    c->filled_at = filled_at;
                    c->evicted = evicted;
                }
                if (result == HILO_POOL_OK) {
                    if (take_from_buffer(c, &id)) {
                        hilo_nextval_publish(c, stamp);
                        return id;
                    }
                    continue;
                }
            }
        }
        if (result == HILO_POOL_STALE) {
            c = hilo_nextval_load(name, len);
            continue;
        }
        /* A refill is committed before this call can use it: none for a
         * call bound to fail (nothing left above this session's last ID),
         * which must change nothing. This check, not a count of empty
         * refills, says "exhausted": sessions that share a pool may take
         * every ID of many refills in a row before this one gets a turn
         * (four sessions on a free list of single-ID ranges, test/t/057). */
        int64 above = c->seq.ordering == HILO_ORDERING_NODE ? 0 : c->last_value;
        if (hilo_pool_ids_above(c->pool_index, c->generation, above) == 0) {
            int64 left =
                hilo_catalog_ids_left(&c->seq, above, c->seq.ordering != HILO_ORDERING_NODE);
            if (left < 0 || !hilo_pool_is_current(c->pool_index, c->generation)) {
                /* Dropped (maybe made again) or its slot reused meanwhile:
                 * not exhausted, look it up again. */
                c = nextval_look_again(c, name, len);
                continue;
            }
            if (left == 0)
                raise_exhausted_for_backend(c);
        }
        if (refilled_pool == c->pool_index && refilled_generation == c->generation &&
            ++empty_refills >= HILO_NEXTVAL_MAX_EMPTY_REFILLS)
            ereport(ERROR,
                    (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                     errmsg("hilo sequence \"%s\": no refill of its pool reached this session",
                            c->seq.name),
                     errdetail("%d refills in a row were taken by other sessions or held only "
                               "IDs below " INT64_FORMAT ", the last this session received; IDs "
                               "are left.",
                               empty_refills, c->last_value),
                     errhint("Retry the call.")));
        /* The pool is empty (or holds only IDs below ours): wait for a refill. */
        refilled_pool = c->pool_index;
        refilled_generation = c->generation;
        hilo_allocator_refill(&c->seq, c->pool_index, (uint64)c->seq.block_size, need_fresh);
    }
}

static pg_noinline int64 nextval_slow(const char *name, int len)
{
    volatile int64 id = 0;
    hilo_nextval_call_begins();
    PG_TRY();
    {
        id = nextval_slow_body(name, len);
    }
    PG_CATCH();
    {
        HILO_FORGET_UNWOUND_FRAMES();
        hilo_nextval_undo_created_pool();
        PG_RE_THROW();
    }
    PG_END_TRY();
    return id;
}

/* The calls by another name than the last one's, through the name index
 * (sql/name_index.h). Calls by name in a row that came in the order the slots noted: only then
 * are lines brought in (a session using its sequences in random order
 * would bring in lines it does not use, pushing out others). */
static int order_kept = 0;
#define ORDER_KEPT_TO_PREFETCH 4

/* A call by name found its IDs with slot `s`: notes it as the one after the
 * last, and brings in the slot and buffer that came after it last time. */
static inline void note_order(NameSlot *s)
{
    uint32 i = (uint32)(s - hilo_name_index);
    if (hilo_name_index_last_slot != NO_SLOT) {
        NameSlot *p = &hilo_name_index[hilo_name_index_last_slot];
        if (p->next_slot == i) {
            order_kept = Min(order_kept + 1, ORDER_KEPT_TO_PREFETCH);
        } else {
            order_kept = 0;
            p->next_slot = i;
        }
        if (p->next_buf != s->buf)
            p->next_buf = s->buf;
    }
    hilo_name_index_last_slot = i;
    if (order_kept >= ORDER_KEPT_TO_PREFETCH && s->next_slot != NO_SLOT) {
        __builtin_prefetch(&hilo_name_index[s->next_slot]);
        if (s->next_buf != NULL) {
            /* A buffer may straddle two lines. */
            __builtin_prefetch(s->next_buf);
            __builtin_prefetch((char *)s->next_buf + sizeof(HiloBuffer) - 1);
        }
    }
}

/* A call by another name than the last hit's: the next ID of that
 * sequence's buffer if it has one and its entry is published under
 * `stamp` or passes the checks of the slow path (then it is published);
 * false if not, or the name is not cached. *checked: the entry, if it
 * passed those checks (or was published) and only its buffer (if any) had
 * no ID, else NULL; without a buffer, its pool's generation is left
 * to the take from the pool, which checks it under the pool's lock. */
static bool take_other(const char *name, int len, uint64 stamp, int64 *id, CachedSequence **checked)
{
    *checked = NULL;
    if (len > HILO_MAX_NAME_BYTES)
        return false;
    NameSlot *s = hilo_name_index_find(name, len, hilo_name_hash(name, len));
    if (s == NULL)
        return false;
    CachedSequence *c = s->entry;
    if (s->stamp != stamp && s->pool_hint >= 0) {
        /* Not published: the entry's lines come now, and (if its ID comes
         * from the pool, nextval.cpp's lone take) the pool's with them,
         * rather than one miss after the other. */
        __builtin_prefetch((const char *)c + 64, 1);
        hilo_pool_prefetch_take(s->pool_hint);
    }
    if (likely(s->stamp == stamp)) {
        int64 next;
        if (!buffer_next(s->buf, s->generation, &next)) {
            *checked = c;
            return false;
        }
        /* Written, not read: these lines need not come in before the call returns. */
        c->last_value = next;
        c->referenced = true;
        hilo_nextval_set_last_hit(c, name, len);
        *id = next;
        note_order(s);
        return true;
    }
    /* The checks of the slow path, before it takes from a buffer. */
    if (!c->valid || c->monotonic || c->ordered || c->pool_index < 0 ||
        c->catalog_epoch != hilo_catalog_epoch() || !usage_checked(c))
        return false;
    if (c->buf == NULL) {
        /* Its ID comes from the pool (nextval.cpp, the lone take), which
         * checks the pool's generation under its lock: no wait for the
         * generation's line here. */
        *checked = c;
        return false;
    }
    pg_read_barrier(); /* the pool's generation read after the stamp's epoch */
    if (!hilo_pool_is_current(c->pool_index, c->generation))
        return false;
    if (!take_from_buffer(c, id)) {
        *checked = c;
        return false;
    }
    hilo_nextval_publish(c, stamp);
    hilo_nextval_set_last_hit(c, name, len);
    note_order(s);
    return true;
}

HILO_SQL_FUNCTION(hilo_nextval)
{
    if (unlikely(PG_ARGISNULL(0))) {
        static const char *const arg_names[] = {"seq"};
        hilo_entry(fcinfo, "hilo_nextval()", arg_names, 1, HILO_READS);
    }
    if (unlikely(XactReadOnly || RecoveryInProgress())) {
        hilo_entry(fcinfo, "hilo_nextval()", NULL, 0, HILO_WRITES);
    }

    text *name_text = PG_GETARG_TEXT_PP(0);
    const char *name = VARDATA_ANY(name_text);
    int len = VARSIZE_ANY_EXHDR(name_text);

    /* The fast path: a cached sequence whose buffer has IDs left. An entry
     * is valid only after the slow path passed the preload check. */
    CachedSequence *c = hilo_nextval_last_hit;
    int64 id;
    if (likely(c != NULL)) {
        uint64 stamp = hilo_nextval_stamp();
        if (likely(last_hit_matches(name, len))) {
            /* Published (its checks passed while the stamp stood), or the
             * checks of a sequence the last call used. */
            if (likely(c->stamp == stamp)) {
                /* Its buffer, if it has none left, is the slow path's. */
                if (likely(take_from_buffer(c, &id)))
                    PG_RETURN_INT64(id);
            } else {
                pg_read_barrier(); /* the pool's generation read after the stamp's epoch */
                if (!c->monotonic && c->pool_index >= 0 && usage_checked(c) &&
                    hilo_pool_is_current(c->pool_index, c->generation) &&
                    take_from_buffer(c, &id)) {
                    if (c->catalog_epoch == hilo_catalog_epoch())
                        hilo_nextval_publish(c, stamp);
                    PG_RETURN_INT64(id);
                }
            }
        } else if (!hilo_local_any()) {
            /* Another sequence of the cache, by name, whose buffer has IDs
             * left, or (without a buffer) the pool's next ID. A session
             * that goes round many sequences calls here every time. */
            CachedSequence *checked;
            if (take_other(name, len, stamp, &id, &checked) ||
                (checked != NULL && nextval_lone_take(checked, name, len, &id)))
                PG_RETURN_INT64(id);
        }
    }
    hilo_require_preload("hilo_nextval()");
    PG_RETURN_INT64(nextval_slow(name, len));
}
