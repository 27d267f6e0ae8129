// c_api.cpp: forwards the C-compatible entry points to the core.
#include "c_api.h"
#include "allocation.hpp"
#include "range_list.hpp"

using hilo::IdRange;
using hilo::RangeList;

static_assert(static_cast<int>(hilo::InsertStatus::kInserted) == HILO_INSERTED &&
                  static_cast<int>(hilo::InsertStatus::kOverlap) == HILO_INSERT_OVERLAP &&
                  static_cast<int>(hilo::InsertStatus::kFull) == HILO_INSERT_FULL &&
                  static_cast<int>(hilo::InsertStatus::kInvalid) == HILO_INSERT_INVALID,
              "status codes agree");

extern "C" {

uint64_t hilo_range_length(HiloRange r) noexcept
{
    return hilo::Length(r);
}

HiloInsertStatus hilo_list_insert(HiloRange *data, uint32_t *count, uint32_t capacity, HiloRange r,
                                  HiloRange *conflict) noexcept
{
    return static_cast<HiloInsertStatus>(RangeList(data, count, capacity).Insert(r, conflict));
}

uint64_t hilo_list_take_lowest(HiloRange *data, uint32_t *count, uint64_t n, HiloRange *out,
                               uint32_t out_capacity, uint32_t *out_count) noexcept
{
    return RangeList(data, count, *count).TakeLowest(n, out, out_capacity, out_count);
}

bool hilo_list_remove(HiloRange *data, uint32_t *count, uint32_t capacity, HiloRange r) noexcept
{
    return RangeList(data, count, capacity).Remove(r);
}

bool hilo_list_find_overlap(const HiloRange *data, uint32_t count, HiloRange r,
                            HiloRange *overlap) noexcept
{
    return RangeList(const_cast<HiloRange *>(data), &count, count).FindOverlap(r, overlap);
}

uint64_t hilo_list_count_ids(const HiloRange *data, uint32_t count) noexcept
{
    return RangeList(const_cast<HiloRange *>(data), &count, count).CountIds();
}

bool hilo_ranges_sort_check_disjoint(HiloRange *ranges, size_t n, HiloRange *a,
                                     HiloRange *b) noexcept
{
    return hilo::SortAndCheckDisjoint(ranges, n, a, b);
}

size_t hilo_ranges_normalize(HiloRange *ranges, size_t n) noexcept
{
    return hilo::Normalize(ranges, n);
}

bool hilo_ranges_find_uncovered(const HiloRange *covering, size_t n, HiloRange query,
                                HiloRange *gap) noexcept
{
    return hilo::FindUncovered(covering, n, query, gap);
}

HiloRange hilo_take_prefix(HiloRange available, uint64_t want) noexcept
{
    return hilo::TakePrefix(available, want);
}

uint64_t hilo_ids_above(int64_t high_water_mark, int64_t max_value) noexcept
{
    return hilo::IdsAbove(high_water_mark, max_value);
}

bool hilo_claim_above(int64_t high_water_mark, int64_t max_value, uint64_t size,
                      HiloRange *window) noexcept
{
    return hilo::ClaimAbove(high_water_mark, max_value, size, window);
}

}  // extern "C"
