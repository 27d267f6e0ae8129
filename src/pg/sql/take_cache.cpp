/*
 * sql/take_cache.cpp: the sequences a backend's hilo_take used lately.
 *
 * A take served from the pool costs a few microseconds; looking the
 * sequence up in the catalog (as the catalog owner, search_path pinned,
 * through SPI) and checking the caller's usage right cost several times
 * that. So a backend remembers what it looked up, as hilo_nextval does,
 * for as long as no invalidation says that hilo.sequences, the usage
 * grants or the roles may have changed (sql/catalog_epochs.cpp): a hilo_alter,
 * hilo_drop, grant, revoke or DROP EXTENSION committed by any session is
 * seen at this session's next transaction or command. Only a take the
 * pool serves at once uses the entry (sql/take.cpp); the pool is checked by
 * its generation, so an idle release, a drop or a catalog re-created sends
 * the take back to the catalog, and so does every take that needs the
 * allocator.
 */
#include "sql.h"

extern "C" {
#include "miscadmin.h"
}

#define HILO_TAKE_CACHE_ENTRIES 8

typedef struct CachedTake {
    bool valid;
    int name_len;       /* of target.seq.name */
    Oid usage_user;     /* the usage check passed for this user... */
    uint64 usage_epoch; /* ...while the usage epoch had this value */
    uint64 catalog_epoch;
    uint64 last_used;
    HiloTakeTarget target;
} CachedTake;

static CachedTake cache[HILO_TAKE_CACHE_ENTRIES];
static uint64 use_counter = 0;
/* The entry the last call found: a session taking from one sequence finds
 * it without a scan. A hint only: it is checked like any entry. */
static CachedTake *last_hit = NULL;

static bool holds(const CachedTake *c, const char *name, int len)
{
    return c->valid && c->name_len == len && memcmp(c->target.seq.name, name, len) == 0;
}

HiloTakeTarget *hilo_take_cache_find(const char *name, int len)
{
    CachedTake *c = last_hit;
    if (c == NULL || !holds(c, name, len)) {
        c = NULL;
        for (int i = 0; i < HILO_TAKE_CACHE_ENTRIES && c == NULL; i++)
            if (holds(&cache[i], name, len))
                c = &cache[i];
        if (c == NULL)
            return NULL;
    }
    if (c->catalog_epoch != hilo_catalog_epoch() || c->usage_epoch != hilo_usage_epoch() ||
        c->usage_user != GetUserId())
        return NULL;
    c->last_used = ++use_counter;
    last_hit = c;
    return &c->target;
}

/* The entry for `name`: its own if cached (stale), else a free one or the
 * least recently used. */
static CachedTake *entry_for(const char *name)
{
    CachedTake *victim = &cache[0];
    for (int i = 0; i < HILO_TAKE_CACHE_ENTRIES; i++) {
        CachedTake *c = &cache[i];
        if (c->valid && strcmp(c->target.seq.name, name) == 0)
            return c;
        if (!c->valid || (victim->valid && c->last_used < victim->last_used))
            victim = c;
    }
    return victim;
}

HiloTakeTarget *hilo_take_cache_load(const char *name, HiloSequence *seq)
{
    /* Epochs first: an invalidation that arrives during the lookup makes
     * the entry stale at once rather than being missed. */
    hilo_epochs_watch_catalog();
    uint64 catalog_epoch = hilo_catalog_epoch();
    uint64 usage_epoch = hilo_usage_epoch();
    Oid user = GetUserId();
    hilo_lookup_usable_sequence(name, true, seq);

    CachedTake *c = entry_for(name);
    /* The same sequence of the same catalog keeps the pool it had: a large
     * take, which needs no pool, must not send the next small take back to
     * the catalog. The pool's generation still guards every use. */
    bool same = c->valid && strcmp(c->target.seq.name, name) == 0 &&
                c->target.seq.seq_id == seq->seq_id && c->target.seq.creation == seq->creation;
    int pool_index = same ? c->target.pool_index : -1;
    uint64 generation = same ? c->target.generation : 0;
    c->valid = false;
    /* Created by this open transaction: served by local_sequences.cpp, and
     * never cached (the name may mean something else after a rollback). */
    if (seq->created_here)
        return NULL;
    c->target.seq = *seq;
    c->name_len = (int)strlen(seq->name);
    c->target.pool_index = pool_index;
    c->target.generation = generation;
    c->usage_user = user;
    c->usage_epoch = usage_epoch;
    c->catalog_epoch = catalog_epoch;
    c->last_used = ++use_counter;
    c->valid = true;
    return &c->target;
}
