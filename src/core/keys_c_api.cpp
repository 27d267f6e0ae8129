// keys_c_api.cpp: forwards the C entry points of keys_c_api.h to keys.hpp.
#include "keys_c_api.h"
#include "keys.hpp"

static_assert(HILO_MAX_NODE_BITS == hilo::kMaxNodeBits, "one limit on both sides");

extern "C" {

void hilo_uuid_next(HiloUuidClock *clock, int64_t now_ms, int64_t id, uint8_t out[16]) noexcept
{
    hilo::UuidClock c;
    c.started = clock->started;
    c.last_ms = clock->last_ms;
    c.counter = clock->counter;
    c.last_id = clock->last_id;
    hilo::UuidFields f = hilo::NextUuid(&c, now_ms, id);
    clock->started = c.started;
    clock->last_ms = c.last_ms;
    clock->counter = c.counter;
    clock->last_id = c.last_id;
    hilo::EncodeUuid(f, out);
}

bool hilo_uuid_decode(const uint8_t in[16], int64_t *ms, int64_t *id) noexcept
{
    hilo::UuidFields f{0, 0, 0};
    if (!hilo::DecodeUuid(in, &f))
        return false;
    *ms = f.ms;
    *id = f.id;
    return true;
}

bool hilo_node_slice(int node_bits, int64_t node, HiloRange *slice) noexcept
{
    return hilo::NodeSlice(node_bits, node, slice);
}

int64_t hilo_node_of_id(int node_bits, int64_t id) noexcept
{
    return hilo::NodeOf(node_bits, id);
}

}  // extern "C"
