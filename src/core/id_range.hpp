// IdRange: an inclusive range of IDs, the unit every other core piece works in.
#pragma once

#include "no_postgres.hpp"
#include "c_api.h"

#include <cstdint>
#include <limits>

namespace hilo
{

// IDs live in [kMinId, kMaxId]. The upper end is 2^63 - 2 so that the
// exclusive upper bound of an int8range, kMaxId + 1, still fits in a bigint.
constexpr int64_t kMinId = 1;
constexpr int64_t kMaxId = std::numeric_limits<int64_t>::max() - 1;

// {first, last}: lowest and highest ID, inclusive. The same type as the
// C-side HiloRange, so ranges cross between the regimes without copies.
using IdRange = ::HiloRange;

static_assert(kMinId == HILO_MIN_ID && kMaxId == HILO_MAX_ID, "one ID domain on both sides");

// A range is valid when it is non-empty and inside the ID domain.
constexpr bool IsValid(IdRange r) noexcept
{
    return kMinId <= r.first && r.first <= r.last && r.last <= kMaxId;
}

// Number of IDs in a valid range; at most 2^63 - 2, so it always fits.
constexpr uint64_t Length(IdRange r) noexcept
{
    return static_cast<uint64_t>(r.last) - static_cast<uint64_t>(r.first) + 1;
}

constexpr bool Overlaps(IdRange a, IdRange b) noexcept
{
    return a.first <= b.last && b.first <= a.last;
}

// The common part of two overlapping ranges.
constexpr IdRange Intersection(IdRange a, IdRange b) noexcept
{
    return IdRange{a.first > b.first ? a.first : b.first, a.last < b.last ? a.last : b.last};
}

// True when b starts right after a ends (no gap, no overlap).
constexpr bool Touches(IdRange a, IdRange b) noexcept
{
    return a.last < kMaxId && a.last + 1 == b.first;
}

}  // namespace hilo

inline bool operator==(const HiloRange &a, const HiloRange &b)
{
    return a.first == b.first && a.last == b.last;
}
inline bool operator!=(const HiloRange &a, const HiloRange &b)
{
    return !(a == b);
}
