/*
 * sql/name_index.cpp: the index of hilo_nextval's backend-local cache by
 * name (its layout: sql/name_index.h): growing it and adding entries.
 */
#include "name_index.h"

extern "C" {
#include "utils/memutils.h"
}

NameSlot *hilo_name_index = NULL;
uint32 hilo_name_index_size = 0;
uint32 hilo_name_index_last_slot = NO_SLOT;
static char *name_index_raw = NULL;
static uint32 name_index_count = 0;

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
    hilo_name_index_last_slot = NO_SLOT; /* slots moved */
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
