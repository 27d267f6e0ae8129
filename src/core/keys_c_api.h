/*
 * keys_c_api.h: the key layouts of src/core/keys.hpp (hilo_uuid's UUIDs,
 * node_bits slices) for PostgreSQL-side code. Plain data, noexcept.
 */
#ifndef HILO_CORE_KEYS_C_API_H
#define HILO_CORE_KEYS_C_API_H

#include "c_api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What one session remembers of its last UUID (hilo::UuidClock). */
typedef struct HiloUuidClock {
    bool started;
    int64_t last_ms;
    uint32_t counter;
    int64_t last_id;
} HiloUuidClock;

#define HILO_MAX_NODE_BITS 16

/* The next UUID of the session whose clock is `clock`, now `now_ms`, for ID
 * `id`, into out[16]; always greater than the clock's previous one. */
void hilo_uuid_next(HiloUuidClock *clock, int64_t now_ms, int64_t id,
                    uint8_t out[16]) HILO_NOEXCEPT;
/* The time (ms since 1970) and ID inside a UUID; false if it is not
 * version 7 with variant 10. */
bool hilo_uuid_decode(const uint8_t in[16], int64_t *ms, int64_t *id) HILO_NOEXCEPT;

/* The IDs of node `node`'s slice for `node_bits`; false if it does not fit. */
bool hilo_node_slice(int node_bits, int64_t node, HiloRange *slice) HILO_NOEXCEPT;
/* The node whose slice holds `id`. */
int64_t hilo_node_of_id(int node_bits, int64_t id) HILO_NOEXCEPT;

#ifdef __cplusplus
}
#endif

#endif /* HILO_CORE_KEYS_C_API_H */
