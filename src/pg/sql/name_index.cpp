/*
 * sql/name_index.cpp: the index of hilo_nextval's backend-local cache by
 * name (its layout: sql/name_index.h), and the call by another name than
 * the last one's, which finds its IDs through it.
 */
#include "name_index.h"

extern "C" {
#include "utils/memutils.h"
}

NameSlot *hilo_name_index = NULL;
uint32 hilo_name_index_size = 0;
static char *name_index_raw = NULL;
static uint32 name_index_count = 0;
static uint32 prev_slot = NO_SLOT; /* the slot the last call by name used */
/* Calls by name in a row that came in the order the slots noted: only then
 * are lines brought in (a session using its sequences in random order
 * would bring in lines it does not use, pushing out others). */
static int order_kept = 0;
#define ORDER_KEPT_TO_PREFETCH 4

static void name_index_put(NameSlot *slots, uint32 size, const NameSlot *from, uint32 hash)
{
    for (uint32 i = hash & (size - 1);; i = (i + 1) & (size - 1)) {
        if (slots[i].entry == NULL) {
            slots[i] = *from;
            slots[i].next_slot = NO_SLOT; /* its index changed */
            slots[i].next_buf = NULL;
            from->entry->slot = i;
            return;
        }
    }
}

void hilo_name_index_reserve(void)
{
    if (hilo_name_index != NULL && (name_index_count + 1) * 2 <= hilo_name_index_size)
        return;
    uint32 size = hilo_name_index_size == 0 ? 128 : hilo_name_index_size * 2;
    char *raw =
        (char *)MemoryContextAllocZero(TopMemoryContext, sizeof(NameSlot) * (Size)size + 64);
    NameSlot *slots = (NameSlot *)TYPEALIGN(64, raw);
    for (uint32 i = 0; i < hilo_name_index_size; i++)
        if (hilo_name_index[i].entry != NULL)
            name_index_put(
                slots, size, &hilo_name_index[i],
                hilo_name_hash(hilo_name_index[i].entry->name, hilo_name_index[i].entry->name_len));
    if (name_index_raw != NULL)
        pfree(name_index_raw);
    prev_slot = NO_SLOT;
    name_index_raw = raw;
    hilo_name_index = slots;
    hilo_name_index_size = size;
}

void hilo_name_index_add(CachedSequence *c, uint32 hash)
{
    NameSlot slot;
    memset(&slot, 0, sizeof(slot));
    slot.pool_hint = c->pool_index;
    slot.name_len = c->name_len;
    slot.entry = c;
    memcpy(slot.name_head, c->name, Min((int)c->name_len, SLOT_NAME_BYTES));
    name_index_put(hilo_name_index, hilo_name_index_size, &slot, hash);
    name_index_count++;
}

void hilo_nextval_publish(CachedSequence *c, uint64 stamp)
{
    Assert(c->valid && !c->monotonic && !c->ordered && c->pool_index >= 0 && c->buf != NULL);
    NameSlot *s = &hilo_name_index[c->slot];
    s->buf = c->buf;
    s->generation = c->generation;
    s->stamp = stamp;
    c->stamp = stamp;
}

/* A call by name found its IDs with slot `s`: notes it as the one after the
 * last, and brings in the slot and buffer that came after it last time. */
static inline void note_order(NameSlot *s)
{
    uint32 i = (uint32)(s - hilo_name_index);
    if (prev_slot != NO_SLOT) {
        NameSlot *p = &hilo_name_index[prev_slot];
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
        __builtin_prefetch(&hilo_name_index[s->next_slot]);
        if (s->next_buf != NULL) {
            /* A buffer may straddle two lines. */
            __builtin_prefetch(s->next_buf);
            __builtin_prefetch((char *)s->next_buf + sizeof(HiloBuffer) - 1);
        }
    }
}

bool hilo_nextval_take_other(const char *name, int len, uint64 stamp, int64 *id,
                             CachedSequence **checked)
{
    *checked = NULL;
    if (len > HILO_MAX_NAME_BYTES)
        return false;
    NameSlot *s = hilo_name_index_find(name, len, hilo_name_hash(name, len));
    if (s == NULL)
        return false;
    CachedSequence *c = s->entry;
    if (s->stamp != stamp && s->pool_hint >= 0) {
        /* Not published: the entry's lines come now, and (if its ID comes
         * from the pool, nextval.cpp's lone take) the pool's with them,
         * rather than one miss after the other. */
        __builtin_prefetch((const char *)c + 64, 1);
        hilo_pool_prefetch_take(s->pool_hint);
    }
    if (likely(s->stamp == stamp)) {
        int64 next;
        if (!buffer_next(s->buf, s->generation, &next)) {
            *checked = c;
            return false;
        }
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
    if (c->buf == NULL) {
        /* Its ID comes from the pool (nextval.cpp, the lone take), which
         * checks the pool's generation under its lock: no wait for the
         * generation's line here. */
        *checked = c;
        return false;
    }
    pg_read_barrier(); /* the pool's generation read after the stamp's epoch */
    if (!hilo_pool_is_current(c->pool_index, c->generation))
        return false;
    if (!take_from_buffer(c, id)) {
        *checked = c;
        return false;
    }
    hilo_nextval_publish(c, stamp);
    hilo_nextval_set_last_hit(c, name, len);
    note_order(s);
    return true;
}
