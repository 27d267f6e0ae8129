// Unit tests of the allocation arithmetic: prefixes and window claims,
// including saturation at max_value and at the top of the ID domain.
#include "allocation.hpp"

#include <gtest/gtest.h>

namespace hilo
{
namespace
{

TEST(TakePrefix, TakesTheLowestIds)
{
    EXPECT_EQ(TakePrefix({10, 19}, 3), (IdRange{10, 12}));
    EXPECT_EQ(TakePrefix({10, 19}, 10), (IdRange{10, 19}));
    EXPECT_EQ(TakePrefix({10, 19}, 1000000000000ull), (IdRange{10, 19}));
    EXPECT_EQ(TakePrefix({kMinId, kMaxId}, 1), (IdRange{1, 1}));
    EXPECT_EQ(TakePrefix({kMaxId, kMaxId}, 5), (IdRange{kMaxId, kMaxId}));
}

TEST(IdsAbove, CountsRoomUpToMaxValue)
{
    EXPECT_EQ(IdsAbove(0, kMaxId), static_cast<uint64_t>(kMaxId));
    EXPECT_EQ(IdsAbove(kMaxId - 1, kMaxId), 1u);
    EXPECT_EQ(IdsAbove(kMaxId, kMaxId), 0u);
    EXPECT_EQ(IdsAbove(100, 50), 0u);
}

TEST(ClaimAbove, ClaimsTheNextWindow)
{
    IdRange w{};
    ASSERT_TRUE(ClaimAbove(0, kMaxId, 1000000, &w));
    EXPECT_EQ(w, (IdRange{1, 1000000}));
    ASSERT_TRUE(ClaimAbove(1000000, kMaxId, 1000000, &w));
    EXPECT_EQ(w, (IdRange{1000001, 2000000}));
}

TEST(ClaimAbove, IsCutAtMaxValueAndStopsThere)
{
    IdRange w{};
    ASSERT_TRUE(ClaimAbove(95, 100, 10, &w));
    EXPECT_EQ(w, (IdRange{96, 100}));
    EXPECT_FALSE(ClaimAbove(100, 100, 10, &w));
    EXPECT_FALSE(ClaimAbove(5, 100, 0, &w));
}

TEST(ClaimAbove, NeverOverflowsAtTheTopOfTheDomain)
{
    IdRange w{};
    ASSERT_TRUE(ClaimAbove(kMaxId - 3, kMaxId, UINT64_MAX, &w));
    EXPECT_EQ(w, (IdRange{kMaxId - 2, kMaxId}));
    ASSERT_TRUE(ClaimAbove(0, kMaxId, UINT64_MAX, &w));
    EXPECT_EQ(w, (IdRange{kMinId, kMaxId}));
    EXPECT_FALSE(ClaimAbove(kMaxId, kMaxId, 1, &w));
}

}  // namespace
}  // namespace hilo
