// Key layouts: the UUIDs of hilo_uuid and the node slices of node_bits.
//
// hilo_uuid (RFC 9562 version 7 layout, 128 bits, most significant first):
//
//   bits 127..80  unix_ts_ms   48-bit Unix time in milliseconds
//   bits  79..76  ver          0111 (7)
//   bits  75..65  counter      11 bits (the upper 11 of RFC's 12-bit rand_a)
//   bit       64  id bit 62    (the lowest bit of rand_a)
//   bits  63..62  var          10
//   bits  61..0   id bits 61..0 (RFC's rand_b)
//
// So the 74 bits the RFC leaves to randomness carry an 11-bit counter and the
// whole 63-bit hilo ID. Two UUIDs with different IDs differ whatever the
// time and counter fields say: uniqueness comes from the IDs alone (of one
// sequence), never from the clock. The time and counter only make the
// UUIDs of one session strictly increase: the time never goes below the
// session's previous one (a clock that steps back keeps the previous
// millisecond), and within one millisecond the counter grows whenever the ID
// does not (IDs recycled by hilo_push, or a fresh block lower than the last).
// When the counter would pass 2047 the millisecond moves on by one.
//
// Node slices (node_bits = b, 0..16): node n owns the IDs whose top b bits
// below the sign bit equal n: [n * 2^(63-b), (n+1) * 2^(63-b) - 1], cut to
// the ID domain [kMinId, kMaxId]. b = 0 is one slice, the whole domain.
#pragma once

#include "no_postgres.hpp"
#include "id_range.hpp"

#include <cstdint>

namespace hilo
{

constexpr int kUuidCounterBits = 11;
constexpr uint32_t kUuidMaxCounter = (1u << kUuidCounterBits) - 1;
constexpr int64_t kUuidMaxMs = (int64_t{1} << 48) - 1;

// What one session remembers of its last UUID.
struct UuidClock {
    bool started = false;
    int64_t last_ms = 0;
    uint32_t counter = 0;
    int64_t last_id = 0;
};

// The fields of one UUID.
struct UuidFields {
    int64_t ms;
    uint32_t counter;
    int64_t id;
};

// The fields of the next UUID of a session whose clock now reads now_ms,
// for ID `id`; advances `clock`. The result is greater than every earlier
// result of the same clock (until the time field saturates at 2^48 - 1 ms,
// the year 10889).
constexpr UuidFields NextUuid(UuidClock *clock, int64_t now_ms, int64_t id) noexcept
{
    int64_t ms = now_ms < 0 ? 0 : (now_ms > kUuidMaxMs ? kUuidMaxMs : now_ms);
    uint32_t counter = 0;
    if (clock->started && ms <= clock->last_ms) {
        ms = clock->last_ms;
        counter = id > clock->last_id ? clock->counter : clock->counter + 1;
        if (counter > kUuidMaxCounter) {
            if (ms < kUuidMaxMs) {
                ms += 1;
                counter = 0;
            } else {
                counter = kUuidMaxCounter;
            }
        }
    }
    clock->started = true;
    clock->last_ms = ms;
    clock->counter = counter;
    clock->last_id = id;
    return UuidFields{ms, counter, id};
}

// Writes the 16 bytes of the UUID (network order, as PostgreSQL's uuid).
constexpr void EncodeUuid(const UuidFields &f, uint8_t out[16]) noexcept
{
    uint64_t id = static_cast<uint64_t>(f.id);
    uint64_t hi = (static_cast<uint64_t>(f.ms) << 16) | (uint64_t{7} << 12) |
                  (static_cast<uint64_t>(f.counter & kUuidMaxCounter) << 1) | ((id >> 62) & 1);
    uint64_t lo = (uint64_t{2} << 62) | (id & ((uint64_t{1} << 62) - 1));
    for (int i = 0; i < 8; i++) {
        out[i] = static_cast<uint8_t>(hi >> (56 - 8 * i));
        out[8 + i] = static_cast<uint8_t>(lo >> (56 - 8 * i));
    }
}

// Reads the fields back; false if the bytes do not have version 7 and
// variant 10 (then *f is left as it was).
constexpr bool DecodeUuid(const uint8_t in[16], UuidFields *f) noexcept
{
    uint64_t hi = 0, lo = 0;
    for (int i = 0; i < 8; i++) {
        hi = (hi << 8) | in[i];
        lo = (lo << 8) | in[8 + i];
    }
    if (((hi >> 12) & 0xF) != 7 || (lo >> 62) != 2)
        return false;
    f->ms = static_cast<int64_t>(hi >> 16);
    f->counter = static_cast<uint32_t>((hi >> 1) & kUuidMaxCounter);
    f->id = static_cast<int64_t>(((hi & 1) << 62) | (lo & ((uint64_t{1} << 62) - 1)));
    return true;
}

constexpr int kMaxNodeBits = 16;

// The slice of node `node` for `node_bits` bits; false if the node id does
// not fit in node_bits bits (or node_bits is out of 0..16).
constexpr bool NodeSlice(int node_bits, int64_t node, IdRange *slice) noexcept
{
    if (node_bits < 0 || node_bits > kMaxNodeBits || node < 0 || node >= (int64_t{1} << node_bits))
        return false;
    int shift = 63 - node_bits;
    uint64_t first = static_cast<uint64_t>(node) << shift;
    uint64_t last = first + ((uint64_t{1} << shift) - 1);
    int64_t f = static_cast<int64_t>(first);
    int64_t l = static_cast<int64_t>(last);
    *slice = IdRange{f < kMinId ? kMinId : f, l > kMaxId ? kMaxId : l};
    return true;
}

// The node whose slice holds `id` (id in the ID domain, node_bits 0..16).
constexpr int64_t NodeOf(int node_bits, int64_t id) noexcept
{
    return node_bits == 0 ? 0 : static_cast<int64_t>(static_cast<uint64_t>(id) >> (63 - node_bits));
}

}  // namespace hilo
