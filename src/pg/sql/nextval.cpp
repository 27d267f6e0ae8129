/*
 * sql/nextval.cpp: hilo_nextval, for DEFAULT hilo_nextval('orders').
 *
 * The common call touches no lock and no catalog: the backend finds the
 * sequence in its local cache (the last one used, else a hash table of
 * every sequence it used), checks with one atomic read that its pool has
 * not been invalidated and with two comparisons that its usage check still
 * holds, and hands out the next ID of its buffer.
 * Only when the buffer is empty does it go to the pool (one LWLock), and
 * only when the pool is empty does it wait for the allocator.
 *
 * Buffers are hilo.session_buffers per backend (shared memory); a cached
 * sequence holds one while it has one, and the least recently used (an
 * empty one first) is given back when a further sequence needs one.
 *
 * Block sizes adapt to the rate (docs/design.md, "Dense keys"): a refill
 * asks for as many IDs as this session used in about HILO_BLOCK_TARGET_US,
 * from 1 up to the sequence's block_size, so that sessions inserting
 * slowly draw neighbouring IDs from one stream and a B-tree over them
 * fills its pages as one over bigserial does, while a bulk loop still
 * takes block_size IDs per refill.
 */
#include "../alloc/alloc.h"

extern "C" {
#include "access/xact.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
}

/* A refill aims at the IDs this session uses in this long. */
#define HILO_BLOCK_TARGET_US 1000

/*
 * What this backend knows of a sequence it used: an entry of the hash
 * table `cache`, keyed by name (the key comes first, as dynahash wants).
 * The fields the fast path reads follow it.
 */
typedef struct CachedSequence {
    char name[HILO_MAX_NAME_BYTES + 1]; /* the hash key, NUL-terminated */
    bool valid;
    bool monotonic; /* seq.monotonic */
    int name_len;
    uint64 generation; /* of the pool, when looked up */
    /* The usage check passed for this user while usage_epoch had this value. */
    Oid usage_user;
    uint64 usage_epoch;
    uint64 catalog_epoch;              /* catalog_epoch when looked up */
    HiloBuffer *buf;                   /* this backend's buffer `buffer`, or NULL */
    pg_atomic_uint64 *pool_generation; /* the pool's current generation */
    int64 last_value;                  /* the last ID this backend's nextval returned, or 0 */
    bool referenced;                   /* used since the clock hand last passed */
    int buffer;                        /* index of its buffer, or -1 */
    uint64 block;                      /* IDs the next refill asks for */
    TimestampTz filled_at;             /* when the buffer was last refilled */
    HiloSequence seq;
    int pool_index;
} CachedSequence;

/* Every sequence this backend used (in TopMemoryContext). */
static HTAB *cache = NULL;
static CachedSequence *last_hit = NULL;

/* Which entry holds each of this backend's buffers (NULL: free), the
 * buffers never handed out yet start at next_unused, and the clock hand
 * that picks which to take back when all are held. */
static CachedSequence **buffer_owner = NULL;
static int next_unused = 0;
static int clock_hand = 0;
static int *free_buffers = NULL;
static int nfree_buffers = 0;

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

static void create_cache(void)
{
    HASHCTL info;
    memset(&info, 0, sizeof(info));
    info.keysize = HILO_MAX_NAME_BYTES + 1;
    info.entrysize = sizeof(CachedSequence);
    info.hcxt = TopMemoryContext;
    cache =
        hash_create("hilo_nextval sequences", 64, &info, HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
    int n = hilo_shared->buffers_per_backend;
    buffer_owner =
        (CachedSequence **)MemoryContextAllocZero(TopMemoryContext, sizeof(CachedSequence *) * n);
    free_buffers = (int *)MemoryContextAlloc(TopMemoryContext, sizeof(int) * n);
}

/* The name as a hash key: NUL-terminated, zero-padded. len is checked. */
static inline void make_key(char *key, const char *name, int len)
{
    memset(key, 0, HILO_MAX_NAME_BYTES + 1);
    memcpy(key, name, len);
}

/* The valid entry for `name`, or NULL. */
static CachedSequence *find_cached(const char *name, int len)
{
    if (last_hit != NULL && name_matches(last_hit, name, len))
        return last_hit;
    if (cache == NULL || len > HILO_MAX_NAME_BYTES)
        return NULL;
    char key[HILO_MAX_NAME_BYTES + 1];
    make_key(key, name, len);
    CachedSequence *c = (CachedSequence *)hash_search(cache, key, HASH_FIND, NULL);
    return c != NULL && c->valid ? c : NULL;
}

/* Gives the entry's buffer (if any) back to its pool. */
static void drop_buffer(CachedSequence *c)
{
    if (c->buffer < 0)
        return;
    int b = c->buffer;
    hilo_buffer_release(b);
    buffer_owner[b] = NULL;
    free_buffers[nfree_buffers++] = b;
    c->buffer = -1;
    c->buf = NULL;
}

/* An entry no longer valid: its buffer goes back, and it is looked up again
 * on its next use. */
static void invalidate_entry(CachedSequence *c)
{
    drop_buffer(c);
    c->valid = false;
    if (last_hit == c)
        last_hit = NULL;
}

static inline bool buffer_empty(HiloBuffer *buf)
{
    return !buf->in_use || (int64)pg_atomic_read_u64(&buf->next) >= buf->end;
}

/* Gives `c` a buffer: a free one, or (all held) one taken back from the
 * entry the clock finds least recently used, an empty one first. */
static void attach_buffer(CachedSequence *c)
{
    int n = hilo_shared->buffers_per_backend;
    int b;
    if (nfree_buffers > 0) {
        b = free_buffers[--nfree_buffers];
    } else if (next_unused < n) {
        b = next_unused++;
    } else {
        for (int step = 0;; step++) {
            b = clock_hand;
            clock_hand = (clock_hand + 1) % n;
            CachedSequence *o = buffer_owner[b];
            if (o == NULL || buffer_empty(o->buf) || !o->referenced || step >= n)
                break;
            o->referenced = false;
        }
        if (buffer_owner[b] != NULL) {
            drop_buffer(buffer_owner[b]);
            nfree_buffers--; /* b, just pushed */
        }
    }
    buffer_owner[b] = c;
    c->buffer = b;
    c->buf = hilo_my_buffer(b);
}

/* A pool the current call gave its sequence: freed again if the call fails
 * before anything entered it (a failed call leaves no trace). */
static int pool_created_index = -1;
static uint64 pool_created_generation = 0;

/* Attaches a cached sequence to its pool (creating the pool). */
static void attach_pool(CachedSequence *c)
{
    hilo_register_backend_exit();
    uint64 generation;
    bool created;
    int pool_index = hilo_pool_attach_created(&c->seq, &generation, &created);
    if (created) {
        pool_created_index = pool_index;
        pool_created_generation = generation;
    }
    c->pool_generation = &hilo_pool_at(pool_index)->generation;
    c->pool_index = pool_index;
    c->generation = generation;
}

static void preload_all(void);

/* Looks the sequence up in the catalog and attaches to its pool. */
static CachedSequence *load_entry(const char *name, int len)
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

    if (cache == NULL)
        create_cache();
    char key[HILO_MAX_NAME_BYTES + 1];
    make_key(key, name, len);
    bool found;
    /* Allocates (may raise) before anything below changes. */
    CachedSequence *c = (CachedSequence *)hash_search(cache, key, HASH_ENTER, &found);
    if (!found) {
        c->valid = false;
        c->buffer = -1;
        c->buf = NULL;
        c->seq.seq_id = 0;
    } else {
        /* Known but stale (dropped and re-created, or changed): its buffer's
         * IDs belong to the old pool and are never served again. */
        drop_buffer(c);
    }
    bool same_sequence =
        found && c->valid && c->seq.seq_id == seq.seq_id && c->seq.incarnation == seq.incarnation;
    c->pool_index = -1;
    c->valid = true;
    c->monotonic = seq.monotonic;
    c->name_len = len;
    c->seq = seq;
    c->usage_user = user;
    c->usage_epoch = epoch;
    c->catalog_epoch = catalog;
    if (!same_sequence)
        c->last_value = 0;
    c->referenced = true;
    c->block = 1;
    c->filled_at = 0;
    attach_pool(c);
    return c;
}

/*
 * A session that has looked up this many sequences one by one since the
 * catalog last changed reads all of them at once (alloc/lookup_all.cpp), if
 * the catalog has at most HILO_PRELOAD_MAX.
 */
#define HILO_PRELOAD_AFTER 32
#define HILO_PRELOAD_MAX 100000
static int lookups_since_preload = 0;
static uint64 preloaded_epoch = 0;

static void preload_all(void)
{
    preloaded_epoch = catalog_epoch;
    lookups_since_preload = 0;
    register_usage_callbacks();
    Oid user = GetUserId();
    uint64 epoch = usage_epoch;
    uint64 catalog = catalog_epoch;
    HiloSequence *seqs;
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    sequences_relid = hilo_catalog_relid_if_present();
    usage_grants_relid = hilo_usage_grants_relid();
    int n = hilo_lookup_all_sequences(HILO_PRELOAD_MAX, &seqs);
    hilo_catalog_end(&access);
    if (n <= 0)
        return;
    if (cache == NULL)
        create_cache();
    for (int i = 0; i < n; i++) {
        const HiloSequence *seq = &seqs[i];
        char key[HILO_MAX_NAME_BYTES + 1];
        int len = (int)strlen(seq->name);
        make_key(key, seq->name, len);
        bool found;
        CachedSequence *c = (CachedSequence *)hash_search(cache, key, HASH_ENTER, &found);
        if (found && c->valid) {
            /* Known and still the same sequence: it keeps its pool and
             * buffer (the pool's generation tells whether its settings
             * changed) and takes the row as read now (its owner may have
             * changed: the usage check is made again). Another sequence
             * under the name is looked up again on its next use. */
            if (c->seq.seq_id == seq->seq_id && c->seq.incarnation == seq->incarnation &&
                c->catalog_epoch != catalog) {
                c->seq = *seq;
                c->monotonic = seq->monotonic;
                c->usage_epoch = 0;
                c->catalog_epoch = catalog;
            }
            continue;
        }
        if (!found) {
            c->buffer = -1;
            c->buf = NULL;
        }
        c->valid = true;
        c->monotonic = seq->monotonic;
        c->name_len = len;
        c->seq = *seq;
        c->pool_index = -1; /* attached at first use */
        c->generation = 0;
        c->pool_generation = NULL;
        /* Owners and superusers need no query; others are checked at first use. */
        c->usage_user = user;
        c->usage_epoch =
            superuser_arg(user) || has_privs_of_role(user, seq->owner) ? epoch : (uint64)0;
        c->catalog_epoch = catalog;
        c->last_value = 0;
        c->referenced = false;
        c->block = 1;
        c->filled_at = 0;
    }
    pfree(seqs);
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
    if (buf == NULL || !buf->in_use || buf->generation != c->generation)
        return false;
    int64 next = (int64)pg_atomic_read_u64(&buf->next);
    if (next >= buf->end)
        return false;
    pg_atomic_write_u64(&buf->next, (uint64)next + 1);
    c->last_value = next;
    c->referenced = true;
    *id = next;
    return true;
}

void hilo_nextval_forget(const char *name)
{
    CachedSequence *c = find_cached(name, (int)strlen(name));
    if (c != NULL)
        invalidate_entry(c);
}

/*
 * IDs the next refill asks for, at most the sequence's block_size. A session
 * alone on the sequence (no other backend holds a buffer of its pool) is
 * one stream of keys, dense anyway: its blocks double from
 * HILO_BLOCK_ALONE_FIRST. With others, about what this session used in
 * HILO_BLOCK_TARGET_US, going by how long its last block lasted (at least
 * one, at most doubling per refill), so that slow sessions take their IDs
 * next to each other.
 */
#define HILO_BLOCK_ALONE_FIRST 16
static uint64 next_block(CachedSequence *c, TimestampTz now)
{
    uint64 max = (uint64)Max(c->seq.block_size, 1);
    bool mine = c->buf != NULL && c->buf->in_use && c->buf->pool_index == c->pool_index &&
                c->buf->generation == c->generation;
    if (hilo_pool_sessions(c->pool_index) - (mine ? 1 : 0) <= 0) {
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
    CachedSequence *c = find_cached(name, len);
    if (c == NULL && ++lookups_since_preload >= HILO_PRELOAD_AFTER &&
        preloaded_epoch != catalog_epoch) {
        preload_all();
        c = find_cached(name, len);
    }
    /* Refills that came back with the pool they filled still current and
     * still empty for this session; a pool released or taken meanwhile
     * (the table full) is no sign of exhaustion. */
    int empty_refills = 0;
    int refilled_pool = -1;
    uint64 refilled_generation = 0;
    for (;;) {
        CHECK_FOR_INTERRUPTS();
        if (c == NULL)
            c = load_entry(name, len);
        if (c->seq.ordering == HILO_ORDERING_QUORUM) {
            /* Ordered across the cluster: no pool, no buffer. */
            if (!usage_checked(c))
                check_usage(c);
            HiloRange r;
            hilo_ordered_take(&c->seq, 1, &r);
            return r.first;
        }
        if (c->pool_index < 0) {
            /* Read by preload_all: the usage check first, as a lookup does. */
            if (!usage_checked(c))
                check_usage(c);
            attach_pool(c);
        }
        if (pg_atomic_read_u64(c->pool_generation) != c->generation ||
            c->catalog_epoch != catalog_epoch) {
            /* After a catalog change every entry is looked up again: once
             * many are, all of them at once. */
            if (c->catalog_epoch != catalog_epoch && preloaded_epoch != catalog_epoch &&
                ++lookups_since_preload >= HILO_PRELOAD_AFTER) {
                preload_all();
                c = find_cached(name, len);
                continue;
            }
            c = load_entry(name, len);
            continue;
        }
        if (!usage_checked(c))
            check_usage(c);
        c->referenced = true;
        last_hit = c;

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
            if (c->buffer < 0)
                attach_buffer(c);
            TimestampTz now = GetCurrentTimestamp();
            uint64 block = c->block;
            TimestampTz filled_at = c->filled_at;
            uint64 want = next_block(c, now);
            result = hilo_pool_fill_buffer(c->pool_index, c->generation, c->buffer, c->last_value,
                                           want, now, &need_fresh);
            if (result != HILO_POOL_OK) {
                /* Sized again when it is filled. */
                c->block = block;
                c->filled_at = filled_at;
            }
            if (result == HILO_POOL_OK)
                continue; /* the buffer has IDs now */
        }
        if (result == HILO_POOL_STALE) {
            c = load_entry(name, len);
            continue;
        }
        if (refilled_pool == c->pool_index && refilled_generation == c->generation &&
            ++empty_refills >= 16)
            raise_exhausted_for_backend(c); /* refills keep coming back empty */
        /* A refill is committed before this call can use it: none for a
         * call bound to fail (nothing left above this session's last ID),
         * which must change nothing. */
        int64 above = c->seq.monotonic ? 0 : c->last_value;
        if (hilo_pool_ids_above(c->pool_index, c->generation, above) == 0 &&
            hilo_catalog_ids_left(&c->seq, above, !c->seq.monotonic) == 0)
            raise_exhausted_for_backend(c);
        /* The pool is empty (or holds only IDs below ours): wait for a refill. */
        refilled_pool = c->pool_index;
        refilled_generation = c->generation;
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
        if (pool_created_index >= 0 && cache != NULL) {
            HASH_SEQ_STATUS status;
            hash_seq_init(&status, cache);
            CachedSequence *c;
            while ((c = (CachedSequence *)hash_seq_search(&status)) != NULL) {
                if (c->valid && c->pool_index == pool_created_index)
                    invalidate_entry(c);
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
    CachedSequence *c = last_hit;
    int64 id;
    if (likely(c != NULL && name_matches(c, name, len) && !c->monotonic && usage_checked(c) &&
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
