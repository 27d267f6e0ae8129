/*
 * sql/nextval_cache.cpp: hilo_nextval's backend-local cache. Every sequence
 * this backend used (found by name in sql/name_index.cpp); the
 * shared-memory buffers it holds, handed to the sequences by a clock; and
 * lookups, one at a time or (once a session has made many) all of the
 * catalog at once. An entry is valid while the catalog and usage epochs it
 * was read under stand (sql/catalog_epochs.cpp).
 */
#include "name_index.h"
#include "nextval_cache.h"
#include "../alloc/dispatch.h"

extern "C" {
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/memutils.h"
}

CachedSequence *hilo_nextval_last_hit = NULL;
char hilo_nextval_last_head[LAST_HIT_HEAD];

NextvalStamp hilo_nextval_stamp_seen = {1, 0, 0, 0, InvalidOid};

/* Something the stamp is computed from moved: a new stamp. */
uint64 hilo_nextval_stamp_moved(void)
{
    NextvalStamp *s = &hilo_nextval_stamp_seen;
    s->generations = hilo_pool_generation_epoch();
    s->catalog = hilo_catalog_epoch();
    s->usage = hilo_usage_epoch();
    s->user = GetUserId();
    return ++s->value;
}

/* Which entry holds each of this backend's buffers (NULL: free), the
 * buffers never handed out yet start at next_unused, and the clock hand
 * that picks which to take back when all are held. */
static CachedSequence **buffer_owner = NULL;
static int next_unused = 0;
static int clock_hand = 0;
static int *free_buffers = NULL;
static int nfree_buffers = 0;

/* Checks (42501) that the current user may use the cached sequence, and
 * remembers that it may. */
void hilo_nextval_check_usage(CachedSequence *c)
{
    Oid user = GetUserId();
    hilo_epochs_watch_catalog();
    uint64 epoch = hilo_usage_epoch();
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    hilo_check_usage(&c->seq, user);
    hilo_catalog_end(&access);
    c->usage_user = user;
    c->usage_epoch = epoch;
}

static void create_cache(void)
{
    int n = hilo_shared->buffers_per_backend;
    CachedSequence **owners =
        (CachedSequence **)MemoryContextAllocZero(TopMemoryContext, sizeof(CachedSequence *) * n);
    free_buffers = (int *)MemoryContextAlloc(TopMemoryContext, sizeof(int) * n);
    buffer_owner = owners;
}

/*
 * The entries, in chunks of ENTRY_CHUNK from TopMemoryContext, each on a
 * boundary of PG_CACHE_LINE_SIZE (nextval_cache.h); never freed or moved:
 * an entry is only made invalid.
 */
#define ENTRY_CHUNK 32
static CachedSequence *entry_chunk = NULL;
static int entry_chunk_used = ENTRY_CHUNK;

static_assert(offsetof(CachedSequence, block) == 64, "a call's fields fill the entry's first line");
static_assert(sizeof(CachedSequence) % PG_CACHE_LINE_SIZE == 0, "entries stay aligned");

/* A zeroed entry (may raise). */
static CachedSequence *allocate_entry(void)
{
    if (entry_chunk_used == ENTRY_CHUNK) {
        char *raw = (char *)MemoryContextAllocZero(
            TopMemoryContext, sizeof(CachedSequence) * ENTRY_CHUNK + PG_CACHE_LINE_SIZE);
        entry_chunk = (CachedSequence *)TYPEALIGN(PG_CACHE_LINE_SIZE, raw);
        entry_chunk_used = 0;
    }
    return &entry_chunk[entry_chunk_used++];
}

/* The entry for `name` (len checked), made invalid if there was none
 * (*found false). May raise, before anything changed. */
static CachedSequence *entry_for(const char *name, int len, bool *found)
{
    if (buffer_owner == NULL)
        create_cache();
    uint32 hash = hilo_name_hash(name, len);
    NameSlot *found_slot = hilo_name_index_find(name, len, hash);
    *found = found_slot != NULL;
    if (found_slot != NULL)
        return found_slot->entry;
    hilo_name_index_reserve();
    CachedSequence *c = allocate_entry();
    memcpy(c->name, name, len);
    c->name[len] = '\0';
    c->name_len = (uint16)len;
    c->valid = false;
    c->stamp = 0;
    c->buffer = -1;
    c->buf = NULL;
    c->pool_index = -1;
    c->seq.seq_id = 0;
    hilo_name_index_add(c, hash);
    return c;
}

/* The valid entry for `name` other than hilo_nextval_last_hit, or NULL. */
static CachedSequence *find_other(const char *name, int len)
{
    if (len > HILO_MAX_NAME_BYTES)
        return NULL;
    NameSlot *s = hilo_name_index_find(name, len, hilo_name_hash(name, len));
    return s != NULL && s->entry->valid ? s->entry : NULL;
}

/* The valid entry for `name`, or NULL. */
CachedSequence *hilo_nextval_find(const char *name, int len)
{
    if (hilo_nextval_last_hit != NULL && last_hit_matches(name, len))
        return hilo_nextval_last_hit;
    return find_other(name, len);
}

/* Gives the entry's buffer (if any) back to its pool. */
static void drop_buffer(CachedSequence *c)
{
    if (c->buffer < 0)
        return;
    int b = c->buffer;
    hilo_nextval_unpublish(c);
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
    hilo_nextval_unpublish(c);
    c->valid = false;
    if (hilo_nextval_last_hit == c)
        hilo_nextval_last_hit = NULL;
}

static inline bool buffer_empty(HiloBuffer *buf)
{
    return !buf->in_use || (int64)pg_atomic_read_u64(&buf->next) >= buf->end;
}

/* The entry loses its buffer to another sequence: the session uses more
 * sequences than it has buffers, and its next block is no larger than what
 * it used of this one (sql/nextval.cpp, next_block). Without that, a
 * session alone on each of many sequences, taking turns, doubled its block
 * at every refill and gave nearly all of it back to the pool when the
 * buffer was taken back: two changes of the pool's ranges per call. */
static void note_eviction(CachedSequence *c)
{
    HiloBuffer *buf = c->buf;
    uint64 left = 0;
    if (buf != NULL && buf->in_use && buf->generation == c->generation) {
        int64 next = (int64)pg_atomic_read_u64(&buf->next);
        if (next < buf->end)
            left = (uint64)(buf->end - next);
    }
    c->block_used = c->block > left ? c->block - left : 1;
    c->evicted = true;
}

bool hilo_nextval_buffers_all_held(void)
{
    return nfree_buffers == 0 && next_unused >= hilo_shared->buffers_per_backend;
}

/* Gives `c` a buffer: a free one, or (all held) one taken back from the
 * entry the clock finds least recently used, an empty one first. */
void hilo_nextval_attach_buffer(CachedSequence *c)
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
            note_eviction(buffer_owner[b]);
            drop_buffer(buffer_owner[b]);
            nfree_buffers--; /* b, just pushed */
        }
    }
    hilo_nextval_unpublish(c);
    buffer_owner[b] = c;
    c->buffer = b;
    c->buf = hilo_my_buffer(b);
}

/* A pool the current call gave its sequence: freed again if the call fails
 * before anything entered it (a failed call leaves no trace). */
static int pool_created_index = -1;
static uint64 pool_created_generation = 0;

/* Attaches a cached sequence to its pool (creating the pool). */
void hilo_nextval_attach_pool(CachedSequence *c)
{
    hilo_register_backend_exit();
    uint64 generation;
    bool created;
    int pool_index = hilo_pool_attach_created(&c->seq, &generation, &created);
    if (created) {
        pool_created_index = pool_index;
        pool_created_generation = generation;
    }
    hilo_nextval_unpublish(c);
    c->pool_index = pool_index;
    c->generation = generation;
    hilo_name_index_note_pool(c);
}

/* Looks the sequence up in the catalog and attaches to its pool. */
CachedSequence *hilo_nextval_load(const char *name, int len)
{
    char cname[HILO_MAX_NAME_BYTES + 1];
    memcpy(cname, name, len);
    cname[len] = '\0';

    /* Epochs first: an invalidation that arrives during the lookup makes
     * the entry stale at once rather than being missed. */
    hilo_epochs_watch_catalog();
    Oid user = GetUserId();
    uint64 epoch = hilo_usage_epoch();
    uint64 catalog = hilo_catalog_epoch();
    HiloSequence seq;
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    hilo_lookup_sequence(cname, true, &seq);
    if (seq.created_here)
        elog(ERROR, "hilo: sequence \"%s\" of this transaction reached the shared path", cname);
    hilo_check_usage(&seq, user);
    hilo_catalog_end(&access);

    bool found;
    /* Allocated (may raise) before anything below changes. */
    CachedSequence *c = entry_for(name, len, &found);
    if (found) {
        /* Known but stale (dropped and re-created, or changed): its buffer's
         * IDs belong to the old pool and are never served again. */
        drop_buffer(c);
    }
    /* Also an entry made invalid while its sequence stayed the same (a
     * failed call that created a pool, a create of the name rolled back):
     * the session's IDs go on rising above the last it returned. */
    bool same_sequence = found && c->seq.seq_id == seq.seq_id && c->seq.creation == seq.creation;
    hilo_nextval_unpublish(c);
    c->pool_index = -1;
    hilo_name_index_note_pool(c);
    c->valid = true;
    c->monotonic = seq.ordering == HILO_ORDERING_NODE;
    c->ordered = hilo_route(&seq, 1) == HILO_ROUTE_ORDERED;
    c->seq = seq;
    c->block_size = seq.block_size;
    c->usage_user = user;
    c->usage_epoch = epoch;
    c->catalog_epoch = catalog;
    if (!same_sequence)
        c->last_value = 0;
    c->referenced = true;
    c->block = 1;
    c->filled_at = 0;
    c->evicted = false;
    hilo_nextval_attach_pool(c);
    return c;
}

#define HILO_PRELOAD_MAX 100000
int hilo_nextval_lookups = 0;
uint64 hilo_nextval_preloaded_epoch = 0;

void hilo_nextval_preload(void)
{
    hilo_nextval_preloaded_epoch = hilo_catalog_epoch();
    hilo_nextval_lookups = 0;
    hilo_epochs_watch_catalog();
    Oid user = GetUserId();
    uint64 epoch = hilo_usage_epoch();
    uint64 catalog = hilo_catalog_epoch();
    HiloSequence *seqs;
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    int n = hilo_lookup_all_sequences(HILO_PRELOAD_MAX, &seqs);
    hilo_catalog_end(&access);
    if (n <= 0)
        return;
    for (int i = 0; i < n; i++) {
        const HiloSequence *seq = &seqs[i];
        bool found;
        CachedSequence *c = entry_for(seq->name, (int)strlen(seq->name), &found);
        if (found && c->valid) {
            /* Known and still the same sequence: it keeps its pool and
             * buffer (the pool's generation tells whether its settings
             * changed) and takes the row as read now (its owner may have
             * changed: the usage check is made again). Another sequence
             * under the name is looked up again on its next use. */
            if (c->seq.seq_id == seq->seq_id && c->seq.creation == seq->creation &&
                c->catalog_epoch != catalog) {
                hilo_nextval_unpublish(c);
                c->seq = *seq;
                c->block_size = seq->block_size;
                c->monotonic = seq->ordering == HILO_ORDERING_NODE;
                c->ordered = hilo_route(seq, 1) == HILO_ROUTE_ORDERED;
                c->usage_epoch = 0;
                c->catalog_epoch = catalog;
            }
            continue;
        }
        /* An invalid entry of the same sequence keeps its last ID (as in
         * hilo_nextval_load). */
        if (!found || c->seq.seq_id != seq->seq_id || c->seq.creation != seq->creation)
            c->last_value = 0;
        hilo_nextval_unpublish(c);
        c->valid = true;
        c->monotonic = seq->ordering == HILO_ORDERING_NODE;
        c->ordered = hilo_route(seq, 1) == HILO_ROUTE_ORDERED;
        c->seq = *seq;
        c->block_size = seq->block_size;
        c->pool_index = -1; /* attached at first use */
        hilo_name_index_note_pool(c);
        c->generation = 0;
        /* Owners and superusers need no query; others are checked at first use. */
        c->usage_user = user;
        c->usage_epoch =
            superuser_arg(user) || has_privs_of_role(user, seq->owner) ? epoch : (uint64)0;
        c->catalog_epoch = catalog;
        c->referenced = false;
        c->block = 1;
        c->filled_at = 0;
        c->evicted = false;
    }
    pfree(seqs);
}

void hilo_nextval_forget(const char *name)
{
    CachedSequence *c = hilo_nextval_find(name, (int)strlen(name));
    if (c != NULL)
        invalidate_entry(c);
}

void hilo_nextval_call_begins(void)
{
    pool_created_index = -1;
}

void hilo_nextval_undo_created_pool(void)
{
    if (pool_created_index >= 0) {
        for (uint32 i = 0; i < hilo_name_index_size; i++) {
            CachedSequence *c = hilo_name_index[i].entry;
            if (c != NULL && c->valid && c->pool_index == pool_created_index)
                invalidate_entry(c);
        }
        hilo_pool_release_if_unused(pool_created_index, pool_created_generation);
        pool_created_index = -1;
    }
}
