/*
 * sql/nextval_cache.cpp: hilo_nextval's backend-local cache. Every sequence
 * this backend used, by name, in a hash table (sql/nextval_cache.h); the
 * shared-memory buffers it holds, handed to the sequences by a clock; and
 * lookups, one at a time or (once a session has made many) all of the
 * catalog at once. An entry is valid while the catalog and usage epochs it
 * was read under stand (sql/catalog_epochs.cpp).
 */
#include "nextval_cache.h"

extern "C" {
#include "common/hashfn.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
}

/* Every sequence this backend used (in TopMemoryContext). */
static HTAB *cache = NULL;
CachedSequence *hilo_nextval_last_hit = NULL;

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
    cache = hilo_name_table("hilo_nextval sequences", 64, sizeof(CachedSequence), TopMemoryContext);
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

/*
 * Every entry of `cache` by the hash of its name: open addressing, at most
 * half full, never shrinking (entries are never removed, only made
 * invalid, and dynahash never moves them). hilo_nextval finds a name here
 * without dynahash's padded 64-byte key, and with one slot's cache line
 * before the entry's: with 10,000 sequences a call that misses the last
 * one used spent a third of its time in the lookup, mostly in misses.
 */
typedef struct NameSlot {
    uint32 hash;
    CachedSequence *entry; /* NULL: free */
} NameSlot;
static NameSlot *name_index = NULL;
static uint32 name_index_size = 0; /* a power of two */
static uint32 name_index_count = 0;

static inline uint32 name_hash(const char *name, int len)
{
    return hash_bytes((const unsigned char *)name, len);
}

static void name_index_put(NameSlot *slots, uint32 size, uint32 hash, CachedSequence *c)
{
    for (uint32 i = hash & (size - 1);; i = (i + 1) & (size - 1)) {
        if (slots[i].entry == NULL) {
            slots[i].hash = hash;
            slots[i].entry = c;
            return;
        }
    }
}

/* Room for one more entry (may raise; changes nothing then). */
static void name_index_reserve(void)
{
    if (name_index != NULL && (name_index_count + 1) * 2 <= name_index_size)
        return;
    uint32 size = name_index_size == 0 ? 128 : name_index_size * 2;
    NameSlot *slots =
        (NameSlot *)MemoryContextAllocZero(TopMemoryContext, sizeof(NameSlot) * (Size)size);
    for (uint32 i = 0; i < name_index_size; i++)
        if (name_index[i].entry != NULL)
            name_index_put(slots, size, name_index[i].hash, name_index[i].entry);
    if (name_index != NULL)
        pfree(name_index);
    name_index = slots;
    name_index_size = size;
}

/* A new entry of `cache` (after name_index_reserve). */
static void name_index_add(CachedSequence *c, int len)
{
    name_index_put(name_index, name_index_size, name_hash(c->name, len), c);
    name_index_count++;
}

/* The valid entry for `name`, or NULL. */
CachedSequence *hilo_nextval_find(const char *name, int len)
{
    if (hilo_nextval_last_hit != NULL && name_matches(hilo_nextval_last_hit, name, len))
        return hilo_nextval_last_hit;
    if (name_index == NULL || len > HILO_MAX_NAME_BYTES)
        return NULL;
    uint32 hash = name_hash(name, len);
    uint32 mask = name_index_size - 1;
    for (uint32 i = hash & mask;; i = (i + 1) & mask) {
        const NameSlot *s = &name_index[i];
        if (s->entry == NULL)
            return NULL;
        CachedSequence *c = s->entry;
        if (s->hash == hash && c->name[len] == '\0' && memcmp(c->name, name, len) == 0)
            return c->valid ? c : NULL;
    }
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
    c->pool_generation = &hilo_pool_at(pool_index)->generation;
    c->pool_index = pool_index;
    c->generation = generation;
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

    if (cache == NULL)
        create_cache();
    char key[HILO_MAX_NAME_BYTES + 1];
    make_key(key, name, len);
    bool found;
    /* Allocate (may raise) before anything below changes. */
    name_index_reserve();
    CachedSequence *c = (CachedSequence *)hash_search(cache, key, HASH_ENTER, &found);
    if (!found) {
        name_index_add(c, len);
        c->valid = false;
        c->buffer = -1;
        c->buf = NULL;
        c->seq.seq_id = 0;
    } else {
        /* Known but stale (dropped and re-created, or changed): its buffer's
         * IDs belong to the old pool and are never served again. */
        drop_buffer(c);
    }
    /* Also an entry made invalid while its sequence stayed the same (a
     * failed call that created a pool, a create of the name rolled back):
     * the session's IDs go on rising above the last it returned. */
    bool same_sequence = found && c->seq.seq_id == seq.seq_id && c->seq.creation == seq.creation;
    c->pool_index = -1;
    c->valid = true;
    c->monotonic = seq.ordering == HILO_ORDERING_NODE;
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
    if (cache == NULL)
        create_cache();
    for (int i = 0; i < n; i++) {
        const HiloSequence *seq = &seqs[i];
        char key[HILO_MAX_NAME_BYTES + 1];
        int len = (int)strlen(seq->name);
        make_key(key, seq->name, len);
        bool found;
        name_index_reserve();
        CachedSequence *c = (CachedSequence *)hash_search(cache, key, HASH_ENTER, &found);
        if (!found)
            name_index_add(c, len);
        if (found && c->valid) {
            /* Known and still the same sequence: it keeps its pool and
             * buffer (the pool's generation tells whether its settings
             * changed) and takes the row as read now (its owner may have
             * changed: the usage check is made again). Another sequence
             * under the name is looked up again on its next use. */
            if (c->seq.seq_id == seq->seq_id && c->seq.creation == seq->creation &&
                c->catalog_epoch != catalog) {
                c->seq = *seq;
                c->monotonic = seq->ordering == HILO_ORDERING_NODE;
                c->usage_epoch = 0;
                c->catalog_epoch = catalog;
            }
            continue;
        }
        if (!found) {
            c->buffer = -1;
            c->buf = NULL;
        }
        /* An invalid entry of the same sequence keeps its last ID (as in
         * hilo_nextval_load). */
        if (!found || c->seq.seq_id != seq->seq_id || c->seq.creation != seq->creation)
            c->last_value = 0;
        c->valid = true;
        c->monotonic = seq->ordering == HILO_ORDERING_NODE;
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
}
