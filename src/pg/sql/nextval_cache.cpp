/*
 * sql/nextval_cache.cpp: hilo_nextval's backend-local cache. Every sequence
 * this backend used, by name, in an index of its own (sql/nextval_cache.h); the
 * shared-memory buffers it holds, handed to the sequences by a clock; and
 * lookups, one at a time or (once a session has made many) all of the
 * catalog at once. An entry is valid while the catalog and usage epochs it
 * was read under stand (sql/catalog_epochs.cpp).
 */
#include "nextval_cache.h"
#include "../alloc/dispatch.h"

extern "C" {
#include "common/hashfn.h"
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

/*
 * Every entry by the hash of its name: open addressing, at most half full,
 * never shrinking. A slot is a cache line that holds, besides the entry,
 * the start of its name and a copy of what a call reads of a published
 * entry (its buffer, the generation that buffer must hold, the stamp), so
 * that a call by another name than the last one's finds its IDs with that
 * line and its buffer's: with 10,000 sequences used in turn each call found
 * a slot, its entry and its pool's generation cold.
 *
 * A slot also remembers which slot the call after its own used last time,
 * and that one's buffer: a session that goes round its sequences in the
 * same order (a transaction inserting into the same tables each time, a
 * loop over them) has them brought in while it returns from this call, and
 * the next call finds both lines at hand.
 */
#define SLOT_NAME_BYTES 14
#define NO_SLOT PG_UINT32_MAX
typedef struct NameSlot {
    alignas(64) uint32 hash;
    uint32 next_slot;      /* the slot the next call used, or NO_SLOT */
    CachedSequence *entry; /* NULL: free */
    /* Of a published entry; stamp 0 while it is not. */
    uint64 stamp;
    HiloBuffer *buf;
    uint64 generation;
    HiloBuffer *next_buf; /* next_slot's buffer then (a hint), or NULL */
    uint16 name_len;
    char name_head[SLOT_NAME_BYTES]; /* the name's first bytes (no NUL) */
} NameSlot;
static_assert(sizeof(NameSlot) == 64, "a slot is one line");
static NameSlot *name_index = NULL;
static char *name_index_raw = NULL;
static uint32 name_index_size = 0; /* a power of two */
static uint32 name_index_count = 0;
static uint32 prev_slot = NO_SLOT; /* the slot the last call by name used */
/* Calls by name in a row that came in the order the slots noted: only then
 * are lines brought in (a session using its sequences in random order
 * would bring in lines it does not use, pushing out others). */
static int order_kept = 0;
#define ORDER_KEPT_TO_PREFETCH 4

static inline uint32 name_hash(const char *name, int len)
{
    return hash_bytes((const unsigned char *)name, len);
}

static void name_index_put(NameSlot *slots, uint32 size, const NameSlot *from)
{
    for (uint32 i = from->hash & (size - 1);; i = (i + 1) & (size - 1)) {
        if (slots[i].entry == NULL) {
            slots[i] = *from;
            slots[i].next_slot = NO_SLOT; /* its index changed */
            slots[i].next_buf = NULL;
            from->entry->slot = i;
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
    char *raw =
        (char *)MemoryContextAllocZero(TopMemoryContext, sizeof(NameSlot) * (Size)size + 64);
    NameSlot *slots = (NameSlot *)TYPEALIGN(64, raw);
    for (uint32 i = 0; i < name_index_size; i++)
        if (name_index[i].entry != NULL)
            name_index_put(slots, size, &name_index[i]);
    if (name_index_raw != NULL)
        pfree(name_index_raw);
    prev_slot = NO_SLOT;
    name_index_raw = raw;
    name_index = slots;
    name_index_size = size;
}

/* The slot of the entry for `name` (valid or not), or NULL. */
static inline NameSlot *name_index_find(const char *name, int len, uint32 hash)
{
    if (name_index == NULL)
        return NULL;
    uint32 mask = name_index_size - 1;
    int head = Min(len, SLOT_NAME_BYTES);
    for (uint32 i = hash & mask;; i = (i + 1) & mask) {
        NameSlot *s = &name_index[i];
        if (s->entry == NULL)
            return NULL;
        if (s->hash == hash && s->name_len == len && names_equal(s->name_head, name, head) &&
            (len == head || names_equal(s->entry->name + head, name + head, len - head)))
            return s;
    }
}

/* The entry may no longer serve without the slow path's checks. */
static inline void unpublish(CachedSequence *c)
{
    c->stamp = 0;
    name_index[c->slot].stamp = 0;
}

void hilo_nextval_publish(CachedSequence *c, uint64 stamp)
{
    Assert(c->valid && !c->monotonic && !c->ordered && c->pool_index >= 0 && c->buf != NULL);
    NameSlot *s = &name_index[c->slot];
    s->buf = c->buf;
    s->generation = c->generation;
    s->stamp = stamp;
    c->stamp = stamp;
}

/* A call by name found its IDs with slot `s`: notes it as the one after the
 * last, and brings in the slot and buffer that came after it last time. */
static inline void note_order(NameSlot *s)
{
    uint32 i = (uint32)(s - name_index);
    if (prev_slot != NO_SLOT) {
        NameSlot *p = &name_index[prev_slot];
        if (p->next_slot == i) {
            order_kept = Min(order_kept + 1, ORDER_KEPT_TO_PREFETCH);
        } else {
            order_kept = 0;
            p->next_slot = i;
        }
        if (p->next_buf != s->buf)
            p->next_buf = s->buf;
    }
    prev_slot = i;
    if (order_kept >= ORDER_KEPT_TO_PREFETCH && s->next_slot != NO_SLOT) {
        __builtin_prefetch(&name_index[s->next_slot]);
        if (s->next_buf != NULL) {
            /* A buffer may straddle two lines. */
            __builtin_prefetch(s->next_buf);
            __builtin_prefetch((char *)s->next_buf + sizeof(HiloBuffer) - 1);
        }
    }
}

bool hilo_nextval_take_other(const char *name, int len, uint64 stamp, int64 *id)
{
    if (len > HILO_MAX_NAME_BYTES)
        return false;
    NameSlot *s = name_index_find(name, len, name_hash(name, len));
    if (s == NULL)
        return false;
    CachedSequence *c = s->entry;
    if (likely(s->stamp == stamp)) {
        int64 next;
        if (!buffer_next(s->buf, s->generation, &next))
            return false;
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
    pg_read_barrier(); /* the pool's generation read after the stamp's epoch */
    if (!hilo_pool_is_current(c->pool_index, c->generation) || !take_from_buffer(c, id))
        return false;
    hilo_nextval_publish(c, stamp);
    hilo_nextval_set_last_hit(c, name, len);
    note_order(s);
    return true;
}

/* The entry for `name` (len checked), made invalid if there was none
 * (*found false). May raise, before anything changed. */
static CachedSequence *entry_for(const char *name, int len, bool *found)
{
    if (buffer_owner == NULL)
        create_cache();
    uint32 hash = name_hash(name, len);
    NameSlot *found_slot = name_index_find(name, len, hash);
    *found = found_slot != NULL;
    if (found_slot != NULL)
        return found_slot->entry;
    name_index_reserve();
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
    NameSlot slot;
    memset(&slot, 0, sizeof(slot));
    slot.hash = hash;
    slot.name_len = (uint16)len;
    slot.entry = c;
    memcpy(slot.name_head, name, Min(len, SLOT_NAME_BYTES));
    name_index_put(name_index, name_index_size, &slot);
    name_index_count++;
    return c;
}

/* The valid entry for `name` other than hilo_nextval_last_hit, or NULL. */
static CachedSequence *find_other(const char *name, int len)
{
    if (len > HILO_MAX_NAME_BYTES)
        return NULL;
    NameSlot *s = name_index_find(name, len, name_hash(name, len));
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
    unpublish(c);
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
    unpublish(c);
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
    unpublish(c);
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
    unpublish(c);
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
    unpublish(c);
    c->pool_index = -1;
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
                unpublish(c);
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
        unpublish(c);
        c->valid = true;
        c->monotonic = seq->ordering == HILO_ORDERING_NODE;
        c->ordered = hilo_route(seq, 1) == HILO_ROUTE_ORDERED;
        c->seq = *seq;
        c->block_size = seq->block_size;
        c->pool_index = -1; /* attached at first use */
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
        for (uint32 i = 0; i < name_index_size; i++) {
            CachedSequence *c = name_index[i].entry;
            if (c != NULL && c->valid && c->pool_index == pool_created_index)
                invalidate_entry(c);
        }
        hilo_pool_release_if_unused(pool_created_index, pool_created_generation);
        pool_created_index = -1;
    }
}
