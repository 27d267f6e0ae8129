// RangeList: a set of IDs kept as sorted, disjoint, merged ranges in storage
// the caller owns (a shared-memory array, a palloc'd buffer, a std::vector).
//
// Nothing here allocates or throws, so the same code serves shared memory,
// where a fixed capacity is all there is, and ordinary C++ containers.
#pragma once

#include "no_postgres.hpp"
#include "id_range.hpp"

#include <cstddef>
#include <cstdint>

namespace hilo
{

enum class InsertStatus {
    kInserted,  // the range is now part of the set (merged with neighbours)
    kOverlap,   // some of its IDs were already in the set; nothing changed
    kFull,      // it needs one more slot than the capacity allows; nothing changed
    kInvalid,   // empty or outside [kMinId, kMaxId]; nothing changed
};

class RangeList
{
  public:
    // `data[0..*count)` must already hold a sorted, disjoint, merged list.
    RangeList(IdRange *data, uint32_t *count, uint32_t capacity) noexcept
        : data_(data), count_(count), capacity_(capacity)
    {
    }

    uint32_t size() const noexcept { return *count_; }
    uint32_t capacity() const noexcept { return capacity_; }
    const IdRange *begin() const noexcept { return data_; }
    const IdRange *end() const noexcept { return data_ + *count_; }
    const IdRange &operator[](uint32_t i) const noexcept { return data_[i]; }

    // Total number of IDs in the set.
    uint64_t CountIds() const noexcept;

    // Adds `r`, merging it with adjacent ranges. On kOverlap, `*conflict`
    // (if given) receives the lowest run of IDs that were already present.
    InsertStatus Insert(IdRange r, IdRange *conflict = nullptr) noexcept;

    // Removes the lowest `n` IDs (or all, if fewer) and appends them, as
    // merged ranges in ascending order, to `out` (room for `out_capacity`).
    // Never needs more output slots than size(). Returns how many IDs moved.
    uint64_t TakeLowest(uint64_t n, IdRange *out, uint32_t out_capacity,
                        uint32_t *out_count) noexcept;

    // Removes every ID of `r` that is in the set. Returns false, changing
    // nothing, if that would split a range and no slot is free.
    bool Remove(IdRange r) noexcept;

    // True when some ID of `r` is in the set; `*overlap` gets the lowest run.
    bool FindOverlap(IdRange r, IdRange *overlap = nullptr) const noexcept;

    // True when every ID of `r` is in the set.
    bool Contains(IdRange r) const noexcept;

  private:
    // Index of the first range whose last ID is >= id.
    uint32_t LowerBoundByLast(int64_t id) const noexcept;
    void EraseAt(uint32_t index, uint32_t how_many) noexcept;
    void OpenGapAt(uint32_t index) noexcept;

    IdRange *data_;
    uint32_t *count_;
    uint32_t capacity_;
};

// Algorithms on plain arrays of ranges that need not be merged.

// Sorts `ranges` by first ID. If two of them share an ID, returns false and
// names the lowest such pair in `*a` and `*b`; otherwise returns true.
bool SortAndCheckDisjoint(IdRange *ranges, size_t n, IdRange *a, IdRange *b) noexcept;

// Sorts and merges overlapping or adjacent ranges in place; returns the new count.
size_t Normalize(IdRange *ranges, size_t n) noexcept;

// `covering` is sorted by first ID and disjoint (adjacent ranges allowed).
// Returns false if every ID of `query` is covered; otherwise true, with the
// lowest uncovered run of `query` in `*gap`.
bool FindUncovered(const IdRange *covering, size_t n, IdRange query, IdRange *gap) noexcept;

}  // namespace hilo
