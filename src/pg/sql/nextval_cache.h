/*
 * sql/nextval_cache.h: the backend-local cache of sequences and buffers
 * (sql/nextval_cache.cpp) as sql/nextval.cpp (the call: fast and slow
 * path) uses it, and no one else.
 */
#ifndef HILO_PG_SQL_NEXTVAL_CACHE_H
#define HILO_PG_SQL_NEXTVAL_CACHE_H

#include "cached_sequence.h"

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
