/*
 * sql/nextval_cache.h: the backend-local cache of sequences and buffers
 * (sql/nextval_cache.cpp) as sql/nextval.cpp (the call: fast and slow
 * path) uses it, and no one else.
 */
#ifndef HILO_PG_SQL_NEXTVAL_CACHE_H
#define HILO_PG_SQL_NEXTVAL_CACHE_H

#include "sql.h"

extern "C" {
#include "miscadmin.h"
#include "utils/timestamp.h"
}

/*
 * The stamp of this backend's cache: it moves whenever something an
 * entry's checks rely on may have changed: the catalog or usage epoch
 * (sql/catalog_epochs.cpp), the current user, or any pool's generation
 * (hilo_pool_generation_epoch). An entry checked in full (its catalog
 * epoch, its usage check, its pool's generation, read after the stamp) is
 * *published* under the stamp read before the checks, and while the stamp
 * stands its buffer serves without them: one read of a shared line that
 * nearly never changes, where every call read its pool's generation (with
 * 10,000 sequences in turn, a cache miss per call). Anything that changes
 * an entry unpublishes it (stamp 0, never current).
 */
typedef struct NextvalStamp {
    uint64 value;
    /* What it was last computed from. */
    uint64 generations;
    uint64 catalog;
    uint64 usage;
    Oid user;
} NextvalStamp;
extern NextvalStamp hilo_nextval_stamp_seen;
extern uint64 hilo_nextval_stamp_moved(void);
static inline uint64 hilo_nextval_stamp(void)
{
    const NextvalStamp *s = &hilo_nextval_stamp_seen;
    if (likely(hilo_pool_generation_epoch() == s->generations &&
               hilo_catalog_epoch() == s->catalog && hilo_usage_epoch() == s->usage &&
               GetUserId() == s->user))
        return s->value;
    return hilo_nextval_stamp_moved();
}

/*
 * What this backend knows of a sequence it used, laid out for the calls
 * that go round many sequences, where each call finds its entry cold: the
 * first line holds every field a call reads that finds IDs in its buffer,
 * the second what a refill and an eviction read and a short name, and the
 * entry starts on a boundary of PG_CACHE_LINE_SIZE, so both lines come in
 * together (nextval_cache.cpp allocates them). The catalog row is last.
 * A call by another name than the last one's reads the copy of the first
 * line's fields its slot of the name index holds (name_index.h).
 */
typedef struct CachedSequence {
    /* The call's line; generation: of the pool, when looked up. */
    alignas(PG_CACHE_LINE_SIZE) uint64 generation;
    uint64 stamp;     /* published under this stamp, or 0 */
    HiloBuffer *buf;  /* this backend's buffer `buffer`, or NULL */
    int64 last_value; /* the last ID this backend's nextval returned, or 0 */
    /* The usage check passed for this user while the usage epoch had this value. */
    uint64 usage_epoch;
    uint64 catalog_epoch; /* the catalog epoch when looked up */
    Oid usage_user;
    int32 pool_index;
    uint16 name_len;
    bool valid;
    bool monotonic;  /* seq.ordering == HILO_ORDERING_NODE, for the fast path */
    bool ordered;    /* ordered across the cluster: no pool, no buffer */
    bool referenced; /* used since the clock hand last passed */
    bool evicted;    /* see block_used */

    /* The refill's line. */
    alignas(64) uint64 block; /* IDs the next refill asks for */
    TimestampTz filled_at;    /* when the buffer was last refilled */
    /* Its buffer was taken back for another sequence since the last refill
     * (`evicted`), when `block_used` IDs of its last block had been used. */
    uint64 block_used;
    int32 buffer;                       /* index of its buffer, or -1 */
    int32 block_size;                   /* seq.block_size */
    uint32 slot;                        /* its slot in the name index */
    char name[HILO_MAX_NAME_BYTES + 1]; /* NUL-terminated */

    HiloSequence seq;
} CachedSequence;

static inline bool usage_checked(const CachedSequence *c)
{
    return c->usage_epoch == hilo_usage_epoch() && c->usage_user == GetUserId();
}

/* Whether two names of `len` bytes are the same: short ones in a loop kept
 * inline (memcmp of a length not known here is a call, and a session that
 * goes round many sequences compares two names of a length per call). */
static inline bool names_equal(const char *a, const char *b, int len)
{
    if (len > 16)
        return memcmp(a, b, len) == 0;
    for (int i = 0; i < len; i++)
        if (a[i] != b[i])
            return false;
    return true;
}

/* The next ID of `buf`, if it holds IDs of pool generation `generation`. */
static inline bool buffer_next(HiloBuffer *buf, uint64 generation, int64 *id)
{
    if (buf == NULL || !buf->in_use || buf->generation != generation)
        return false;
    int64 next = (int64)pg_atomic_read_u64(&buf->next);
    if (next >= buf->end)
        return false;
    pg_atomic_write_u64(&buf->next, (uint64)next + 1);
    *id = next;
    return true;
}

/* The next ID of the entry's buffer, if the buffer holds IDs of the pool
 * generation the entry knows; the caller has checked that generation is
 * still the pool's. */
static inline bool take_from_buffer(CachedSequence *c, int64 *id)
{
    if (!buffer_next(c->buf, c->generation, id))
        return false;
    c->last_value = *id;
    c->referenced = true;
    return true;
}

/* The slow path's checks passed under `stamp` (read before them) and the
 * entry's buffer served: later calls may skip them while it stands. */
extern void hilo_nextval_publish(CachedSequence *c, uint64 stamp);

/* A call by another name than the last hit's: the next ID of that
 * sequence's buffer if it has one and its entry is published under
 * `stamp` or passes the checks of the slow path (then it is published);
 * false if not, or the name is not cached. *checked: the entry, if it
 * passed those checks (or was published) and only its buffer (if any) had
 * no ID, else NULL; without a buffer, its pool's generation is left
 * to the take from the pool, which checks it under the pool's lock. */
extern bool hilo_nextval_take_other(const char *name, int len, uint64 stamp, int64 *id,
                                    CachedSequence **checked);

/* The entry the last call used (the fast path's first guess), or NULL, and
 * the first bytes of its name: a call compares its name with these, where
 * the entry's copy lies on a line that a call by another name did not
 * read. Set with hilo_nextval_set_last_hit only. */
#define LAST_HIT_HEAD 16
extern CachedSequence *hilo_nextval_last_hit;
extern char hilo_nextval_last_head[LAST_HIT_HEAD];

static inline void hilo_nextval_set_last_hit(CachedSequence *c, const char *name, int len)
{
    hilo_nextval_last_hit = c;
    for (int i = 0; i < Min(len, LAST_HIT_HEAD); i++)
        hilo_nextval_last_head[i] = name[i];
}

/* Whether `name` is the last hit's, a valid entry (which is not NULL). */
static inline bool last_hit_matches(const char *name, int len)
{
    const CachedSequence *c = hilo_nextval_last_hit;
    int head = Min(len, LAST_HIT_HEAD);
    return c->name_len == len && c->valid && names_equal(hilo_nextval_last_head, name, head) &&
           (len == head || names_equal(c->name + head, name + head, len - head));
}

/*
 * A session that has looked up this many sequences one by one since the
 * catalog last changed reads all of them at once (alloc/lookup_all.cpp),
 * if the catalog is not too large: the lookups counted since, and the
 * catalog epoch of the last preload.
 */
#define HILO_PRELOAD_AFTER 32
extern int hilo_nextval_lookups;
extern uint64 hilo_nextval_preloaded_epoch;

/* The valid entry for `name`, or NULL. */
extern CachedSequence *hilo_nextval_find(const char *name, int len);
/* Looks the sequence up in the catalog and attaches to its pool. */
extern CachedSequence *hilo_nextval_load(const char *name, int len);
/* Reads every sequence of the catalog into the cache. */
extern void hilo_nextval_preload(void);
/* Checks (42501) that the current user may use it, and remembers that it may. */
extern void hilo_nextval_check_usage(CachedSequence *c);
/* Attaches a cached sequence to its pool (creating the pool). */
extern void hilo_nextval_attach_pool(CachedSequence *c);
/* Whether every buffer of this backend is held by a sequence. */
extern bool hilo_nextval_buffers_all_held(void);
/* Gives `c` a buffer of this backend's, taking one back if all are held. */
extern void hilo_nextval_attach_buffer(CachedSequence *c);
/* A pool a call creates is freed again if the call fails before anything
 * entered it (a failed call leaves no trace): at the start of the call,
 * and on its error. */
extern void hilo_nextval_call_begins(void);
extern void hilo_nextval_undo_created_pool(void);

#endif /* HILO_PG_SQL_NEXTVAL_CACHE_H */
