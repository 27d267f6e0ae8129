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
 * What this backend knows of a sequence it used, laid out for the calls
 * that go round many sequences, where each call finds its entry cold: the
 * first line holds every field a call reads that finds IDs in its buffer,
 * the second what a refill and an eviction read and a short name, and the
 * entry starts on a boundary of PG_CACHE_LINE_SIZE, so both lines come in
 * together (nextval_cache.cpp allocates them). The catalog row is last.
 */
typedef struct CachedSequence {
    /* The call's line; generation: of the pool, when looked up. */
    alignas(PG_CACHE_LINE_SIZE) uint64 generation;
    pg_atomic_uint64 *pool_generation; /* the pool's current generation */
    HiloBuffer *buf;                   /* this backend's buffer `buffer`, or NULL */
    int64 last_value;                  /* the last ID this backend's nextval returned, or 0 */
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
    char name[HILO_MAX_NAME_BYTES + 1]; /* NUL-terminated */

    HiloSequence seq;
} CachedSequence;

static inline bool usage_checked(const CachedSequence *c)
{
    return c->usage_epoch == hilo_usage_epoch() && c->usage_user == GetUserId();
}

static inline bool name_matches(const CachedSequence *c, const char *name, int len)
{
    return c->valid && c->name_len == len && memcmp(c->name, name, len) == 0;
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

/* The entry the last call used (the fast path's first guess), or NULL. */
extern CachedSequence *hilo_nextval_last_hit;

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
/* The same, but for hilo_nextval_last_hit, which the caller has tried. */
extern CachedSequence *hilo_nextval_find_other(const char *name, int len);
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
