/*
 * sql/nextval.cpp: hilo_nextval, for DEFAULT hilo_nextval('orders').
 *
 * The common call touches no lock and no catalog: the backend finds the
 * sequence in a small local cache, checks with one atomic read that its
 * pool has not been invalidated and with two comparisons that its usage
 * check still holds, and hands out the next ID of its buffer.
 * Only when the buffer is empty does it go to the pool (one LWLock), and
 * only when the pool is empty does it wait for the allocator.
 */
#include "../alloc/alloc.h"

extern "C" {
#include "access/xact.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/syscache.h"
}

/*
 * What this backend knows of a sequence it used; entry i uses buffer i.
 * The fields the fast path reads come first, so that a call with a short
 * name touches one cache line of this entry, one of its buffer and one of
 * its pool: under many clients a backend runs with a cold cache, and every
 * line costs a miss.
 */
typedef struct alignas(PG_CACHE_LINE_SIZE) CachedSequence {
    bool valid;
    bool monotonic; /* seq.monotonic */
    int name_len;
    uint64 generation; /* of the pool, when looked up */
    /* The usage check passed for this user while usage_epoch had this value. */
    Oid usage_user;
    uint64 usage_epoch;
    uint64 catalog_epoch;              /* catalog_epoch when looked up */
    HiloBuffer *buf;                   /* this backend's buffer i */
    pg_atomic_uint64 *pool_generation; /* the pool's current generation */
    int64 last_value;                  /* the last ID this backend's nextval returned, or 0 */
    char name[HILO_MAX_NAME_BYTES + 1];
    HiloSequence seq;
    int pool_index;
    uint64 last_used; /* for choosing which entry to give up */
} CachedSequence;

static CachedSequence cache[HILO_BUFFERS_PER_BACKEND];
static int last_hit = 0;
static uint64 use_counter = 0;

/*
 * Grows whenever a cached usage decision may have gone stale: a grant or
 * revoke committed (it sends a relcache invalidation of hilo.usage_grants),
 * or a role or role membership changed. PostgreSQL delivers these at the
 * start of the next transaction or command, so a revoke takes effect in a
 * session's next statement, as a REVOKE on a table does.
 */
static uint64 usage_epoch = 1;
static Oid usage_grants_relid = InvalidOid;
static bool usage_callbacks_registered = false;

/*
 * Grows when hilo.sequences may have changed under a cached entry: a
 * hilo_drop or hilo_alter committed (each sends a relcache invalidation of
 * hilo.sequences, also at COMMIT PREPARED of a prepared one), or the
 * catalog was dropped. Cached entries are then looked up again. It also
 * moves usage_epoch, so that the fast path falls through to the slow one.
 */
static uint64 catalog_epoch = 1;
static Oid sequences_relid = InvalidOid;

static void usage_relcache_callback(Datum arg, Oid relid)
{
    if (relid == InvalidOid || relid == usage_grants_relid)
        usage_epoch++;
    if (relid == InvalidOid || relid == sequences_relid) {
        catalog_epoch++;
        usage_epoch++;
    }
}

static void usage_syscache_callback(Datum arg, int cacheid, uint32 hashvalue)
{
    usage_epoch++;
}

static void register_usage_callbacks(void)
{
    if (usage_callbacks_registered)
        return;
    CacheRegisterRelcacheCallback(usage_relcache_callback, (Datum)0);
    CacheRegisterSyscacheCallback(AUTHOID, usage_syscache_callback, (Datum)0);
    CacheRegisterSyscacheCallback(AUTHMEMROLEMEM, usage_syscache_callback, (Datum)0);
    usage_callbacks_registered = true;
}

/* Checks (42501) that the current user may use the cached sequence, and
 * remembers that it may. */
static void check_usage(CachedSequence *c)
{
    Oid user = GetUserId();
    uint64 epoch = usage_epoch;
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    usage_grants_relid = hilo_usage_grants_relid();
    hilo_check_usage(&c->seq, user);
    hilo_catalog_end(&access);
    c->usage_user = user;
    c->usage_epoch = epoch;
}

static inline bool usage_checked(const CachedSequence *c)
{
    return c->usage_epoch == usage_epoch && c->usage_user == GetUserId();
}

static inline bool name_matches(const CachedSequence *c, const char *name, int len)
{
    return c->valid && c->name_len == len && memcmp(c->name, name, len) == 0;
}

static int find_cached(const char *name, int len)
{
    if (name_matches(&cache[last_hit], name, len))
        return last_hit;
    for (int i = 0; i < HILO_BUFFERS_PER_BACKEND; i++)
        if (name_matches(&cache[i], name, len))
            return i;
    return -1;
}

/* The entry to (re)use for a sequence not in the cache: a free one, or the
 * least recently used, whose buffer goes back to its pool. */
static int entry_for_new_sequence(void)
{
    int victim = 0;
    for (int i = 0; i < HILO_BUFFERS_PER_BACKEND; i++) {
        if (!cache[i].valid)
            return i;
        if (cache[i].last_used < cache[victim].last_used)
            victim = i;
    }
    hilo_buffer_release(victim);
    cache[victim].valid = false;
    return victim;
}

/* A pool the current call gave its sequence: freed again if the call fails
 * before anything entered it (a failed call leaves no trace). */
static int pool_created_index = -1;
static uint64 pool_created_generation = 0;

/* Looks the sequence up in the catalog and attaches to its pool. */
static int load_entry(const char *name, int len)
{
    char cname[HILO_MAX_NAME_BYTES + 1];
    memcpy(cname, name, len);
    cname[len] = '\0';

    register_usage_callbacks();
    Oid user = GetUserId();
    uint64 epoch = usage_epoch;
    uint64 catalog = catalog_epoch;
    HiloSequence seq;
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    sequences_relid = hilo_catalog_relid_if_present();
    hilo_lookup_sequence(cname, true, &seq);
    if (seq.created_here)
        elog(ERROR, "hilo: sequence \"%s\" of this transaction reached the shared path", cname);
    usage_grants_relid = hilo_usage_grants_relid();
    hilo_check_usage(&seq, user);
    hilo_catalog_end(&access);

    int index = find_cached(name, len);
    if (index >= 0) {
        /* Known but stale (dropped and re-created, or changed): its buffer's
         * IDs belong to the old pool and are never served again. */
        hilo_buffer_release(index);
    } else {
        index = entry_for_new_sequence();
    }
    hilo_register_backend_exit();

    uint64 generation;
    bool created;
    int pool_index = hilo_pool_attach_created(&seq, &generation, &created);
    if (created) {
        pool_created_index = pool_index;
        pool_created_generation = generation;
    }
    CachedSequence *c = &cache[index];
    bool same_sequence =
        c->valid && c->seq.seq_id == seq.seq_id && c->seq.incarnation == seq.incarnation;
    c->valid = true;
    c->monotonic = seq.monotonic;
    c->buf = &hilo_my_slot()->buffers[index];
    c->pool_generation = &hilo_pool_at(pool_index)->generation;
    c->name_len = len;
    memcpy(c->name, name, len);
    c->name[len] = '\0';
    c->seq = seq;
    c->pool_index = pool_index;
    c->generation = generation;
    c->usage_user = user;
    c->usage_epoch = epoch;
    c->catalog_epoch = catalog;
    if (!same_sequence)
        c->last_value = 0;
    return index;
}

static void raise_exhausted_for_backend(const CachedSequence *c) pg_attribute_noreturn();
static void raise_exhausted_for_backend(const CachedSequence *c)
{
    ereport(ERROR,
            (errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
             errmsg("hilo sequence \"%s\" is exhausted", c->seq.name),
             errdetail("No ID above " INT64_FORMAT ", the last this session received, is left.",
                       c->last_value)));
}

/* The next ID of the entry's buffer, if the buffer holds IDs of the pool
 * generation the entry knows; the caller has checked that generation is
 * still the pool's. */
static inline bool take_from_buffer(CachedSequence *c, int64 *id)
{
    HiloBuffer *buf = c->buf;
    if (!buf->in_use || buf->generation != c->generation)
        return false;
    int64 next = (int64)pg_atomic_read_u64(&buf->next);
    if (next >= buf->end)
        return false;
    pg_atomic_write_u64(&buf->next, (uint64)next + 1);
    c->last_value = next;
    *id = next;
    return true;
}

void hilo_nextval_forget(const char *name)
{
    int index = find_cached(name, (int)strlen(name));
    if (index < 0)
        return;
    hilo_buffer_release(index);
    cache[index].valid = false;
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
    int index = find_cached(name, len);
    for (int attempt = 0;; attempt++) {
        CHECK_FOR_INTERRUPTS();
        if (index < 0)
            index = load_entry(name, len);
        CachedSequence *c = &cache[index];
        if (pg_atomic_read_u64(c->pool_generation) != c->generation ||
            c->catalog_epoch != catalog_epoch) {
            index = load_entry(name, len);
            continue;
        }
        if (!usage_checked(c))
            check_usage(c);
        c->last_used = ++use_counter;
        last_hit = index;

        HiloPoolResult result;
        bool need_fresh = false;
        if (c->seq.monotonic) {
            int64 id;
            result = hilo_pool_next_monotonic(c->pool_index, c->generation, &id);
            if (result == HILO_POOL_OK) {
                c->last_value = id;
                return id;
            }
        } else {
            int64 id;
            if (take_from_buffer(c, &id))
                return id;
            result = hilo_pool_fill_buffer(c->pool_index, c->generation, index, c->last_value,
                                           &need_fresh);
            if (result == HILO_POOL_OK)
                continue; /* the buffer has IDs now */
        }
        if (result == HILO_POOL_STALE) {
            index = load_entry(name, len);
            continue;
        }
        if (attempt >= 16)
            raise_exhausted_for_backend(c); /* refills keep coming back empty */
        /* A refill is committed before this call can use it: none for a
         * call bound to fail (nothing left above this session's last ID),
         * which must change nothing. */
        int64 above = c->seq.monotonic ? 0 : c->last_value;
        if (hilo_pool_ids_above(c->pool_index, c->generation, above) == 0 &&
            hilo_catalog_ids_left(&c->seq, above, !c->seq.monotonic) == 0)
            raise_exhausted_for_backend(c);
        /* The pool is empty (or holds only IDs below ours): wait for a refill. */
        hilo_allocator_refill(&c->seq, c->pool_index, (uint64)c->seq.block_size, need_fresh);
    }
}

static pg_noinline int64 nextval_slow(const char *name, int len)
{
    volatile int64 id = 0;
    pool_created_index = -1;
    PG_TRY();
    {
        id = nextval_slow_body(name, len);
    }
    PG_CATCH();
    {
        HILO_FORGET_UNWOUND_FRAMES();
        if (pool_created_index >= 0) {
            for (int i = 0; i < HILO_BUFFERS_PER_BACKEND; i++) {
                if (cache[i].valid && cache[i].pool_index == pool_created_index) {
                    hilo_buffer_release(i);
                    cache[i].valid = false;
                }
            }
            hilo_pool_release_if_unused(pool_created_index, pool_created_generation);
            pool_created_index = -1;
        }
        PG_RE_THROW();
    }
    PG_END_TRY();
    return id;
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
    CachedSequence *c = &cache[last_hit];
    int64 id;
    if (likely(name_matches(c, name, len) && !c->monotonic && usage_checked(c) &&
               pg_atomic_read_u64(c->pool_generation) == c->generation && take_from_buffer(c, &id)))
        PG_RETURN_INT64(id);
    hilo_require_preload("hilo_nextval()");
    PG_RETURN_INT64(nextval_slow(name, len));
}

/* hilo_nextval of a sequence created in the caller's own transaction
 * (alloc/local_sequences.cpp); false if `name` is not one. */
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
