// The arithmetic of handing out IDs: taking a prefix of an available range,
// claiming the next window above a high-water mark. All saturating, so a
// sequence that reaches max_value stops instead of wrapping.
#pragma once

#include "no_postgres.hpp"
#include "id_range.hpp"

#include <cstdint>

namespace hilo
{

// The lowest min(want, Length(available)) IDs of `available`. want must be > 0.
constexpr IdRange TakePrefix(IdRange available, uint64_t want) noexcept
{
    if (want >= Length(available))
        return available;
    return IdRange{available.first, available.first + static_cast<int64_t>(want - 1)};
}

// How many IDs lie above `high_water_mark` up to `max_value` (0 if none).
constexpr uint64_t IdsAbove(int64_t high_water_mark, int64_t max_value) noexcept
{
    return high_water_mark >= max_value
               ? 0
               : static_cast<uint64_t>(max_value) - static_cast<uint64_t>(high_water_mark);
}

// The window of `size` IDs right above `high_water_mark`, cut at max_value.
// Returns false when nothing is left. high_water_mark >= kMinId - 1.
constexpr bool ClaimAbove(int64_t high_water_mark, int64_t max_value, uint64_t size,
                          IdRange *window) noexcept
{
    uint64_t room = IdsAbove(high_water_mark, max_value);
    if (room == 0 || size == 0)
        return false;
    uint64_t take = size < room ? size : room;
    *window = IdRange{high_water_mark + 1, high_water_mark + static_cast<int64_t>(take)};
    return true;
}

}  // namespace hilo
