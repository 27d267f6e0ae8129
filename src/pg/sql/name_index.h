/*
 * sql/name_index.h: the index of hilo_nextval's backend-local cache by
 * name (sql/name_index.cpp), as sql/nextval_cache.cpp (which adds the
 * entries) and sql/nextval.cpp (a call by name) use it.
 */
#ifndef HILO_PG_SQL_NAME_INDEX_H
#define HILO_PG_SQL_NAME_INDEX_H

#include "cached_sequence.h"

extern "C" {
#include "common/hashfn.h"
}

/*
 * Every entry by the hash of its name: open addressing, at most half full,
 * never shrinking. A slot is a cache line that holds, besides the entry,
 * the start of its name and a copy of what a call reads of a published
 * entry (its buffer, the generation that buffer must hold, the stamp), so
 * that a call by another name than the last one's finds its IDs with that
 * line and its buffer's: with 10,000 sequences used in turn each call found
 * a slot, its entry and its pool's generation cold. A call whose entry is
 * not published (one without a buffer takes its ID from the pool) finds
 * the entry's pool in the slot and brings the pool's lines in together
 * with the entry's.
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
    /* The entry's pool_index (a hint for prefetching, -1: none): a call
     * that takes from the pool brings the pool's lines in with the
     * entry's. The name's hash is not kept: the name is compared. */
    alignas(64) int32 pool_hint;
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

extern NameSlot *hilo_name_index;
extern uint32 hilo_name_index_size; /* a power of two, or 0 */
/* The slot the last call by name used (sql/nextval.cpp), or NO_SLOT;
 * NO_SLOT again whenever the index grows. */
extern uint32 hilo_name_index_last_slot;

static inline uint32 hilo_name_hash(const char *name, int len)
{
    return hash_bytes((const unsigned char *)name, len);
}

/* The slot of the entry for `name` (valid or not), or NULL. */
static inline NameSlot *hilo_name_index_find(const char *name, int len, uint32 hash)
{
    if (hilo_name_index == NULL)
        return NULL;
    uint32 mask = hilo_name_index_size - 1;
    int head = Min(len, SLOT_NAME_BYTES);
    for (uint32 i = hash & mask;; i = (i + 1) & mask) {
        NameSlot *s = &hilo_name_index[i];
        if (s->entry == NULL)
            return NULL;
        if (s->name_len == len && names_equal(s->name_head, name, head) &&
            (len == head || names_equal(s->entry->name + head, name + head, len - head)))
            return s;
    }
}

/* Room for one more entry (may raise; changes nothing then). */
extern void hilo_name_index_reserve(void);
/* Adds entry `c` (its name set) under `hash`, after hilo_name_index_reserve. */
extern void hilo_name_index_add(CachedSequence *c, uint32 hash);

/* The entry's pool_index changed. */
static inline void hilo_name_index_note_pool(const CachedSequence *c)
{
    hilo_name_index[c->slot].pool_hint = c->pool_index;
}

/* The slow path's checks passed under `stamp` (read before them) and the
 * entry's buffer served: later calls may skip them while it stands. */
static inline void hilo_nextval_publish(CachedSequence *c, uint64 stamp)
{
    Assert(c->valid && !c->monotonic && !c->ordered && c->pool_index >= 0 && c->buf != NULL);
    NameSlot *s = &hilo_name_index[c->slot];
    s->buf = c->buf;
    s->generation = c->generation;
    s->stamp = stamp;
    c->stamp = stamp;
}

/* The entry may no longer serve without the slow path's checks. */
static inline void hilo_nextval_unpublish(CachedSequence *c)
{
    c->stamp = 0;
    hilo_name_index[c->slot].stamp = 0;
}

#endif /* HILO_PG_SQL_NAME_INDEX_H */
