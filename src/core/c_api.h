/*
 * c_api.h: the one face of the pure C++ core that PostgreSQL-side code sees.
 *
 * Plain data and functions that never throw and never allocate, so they are
 * safe to call between ereport()s. Everything here forwards to the core
 * (range_list.hpp, allocation.hpp), where the logic and its tests live.
 */
#ifndef HILO_CORE_C_API_H
#define HILO_CORE_C_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define HILO_NOEXCEPT noexcept
extern "C" {
#else
#define HILO_NOEXCEPT
#endif

/* An inclusive range of IDs; the core calls it hilo::IdRange. */
typedef struct HiloRange {
    int64_t first;
    int64_t last;
} HiloRange;

#define HILO_MIN_ID INT64_C(1)
#define HILO_MAX_ID (INT64_MAX - 1)

typedef enum HiloInsertStatus {
    HILO_INSERTED = 0,
    HILO_INSERT_OVERLAP,
    HILO_INSERT_FULL,
    HILO_INSERT_INVALID,
} HiloInsertStatus;

uint64_t hilo_range_length(HiloRange r) HILO_NOEXCEPT;

/* Sets of IDs kept as sorted, merged ranges in caller-owned arrays. */
HiloInsertStatus hilo_list_insert(HiloRange *data, uint32_t *count, uint32_t capacity, HiloRange r,
                                  HiloRange *conflict) HILO_NOEXCEPT;
uint64_t hilo_list_take_lowest(HiloRange *data, uint32_t *count, uint64_t n, HiloRange *out,
                               uint32_t out_capacity, uint32_t *out_count) HILO_NOEXCEPT;
bool hilo_list_remove(HiloRange *data, uint32_t *count, uint32_t capacity,
                      HiloRange r) HILO_NOEXCEPT;
bool hilo_list_find_overlap(const HiloRange *data, uint32_t count, HiloRange r,
                            HiloRange *overlap) HILO_NOEXCEPT;
uint64_t hilo_list_count_ids(const HiloRange *data, uint32_t count) HILO_NOEXCEPT;

/* Plain arrays of ranges. */
bool hilo_ranges_sort_check_disjoint(HiloRange *ranges, size_t n, HiloRange *a,
                                     HiloRange *b) HILO_NOEXCEPT;
size_t hilo_ranges_normalize(HiloRange *ranges, size_t n) HILO_NOEXCEPT;
bool hilo_ranges_find_uncovered(const HiloRange *covering, size_t n, HiloRange query,
                                HiloRange *gap) HILO_NOEXCEPT;

/* Allocation arithmetic. */
HiloRange hilo_take_prefix(HiloRange available, uint64_t want) HILO_NOEXCEPT;
uint64_t hilo_ids_above(int64_t high_water_mark, int64_t max_value) HILO_NOEXCEPT;
bool hilo_claim_above(int64_t high_water_mark, int64_t max_value, uint64_t size,
                      HiloRange *window) HILO_NOEXCEPT;

#ifdef __cplusplus
}
#endif

#endif /* HILO_CORE_C_API_H */
