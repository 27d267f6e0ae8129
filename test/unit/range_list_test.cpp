// Unit tests of the core range algebra: insert with overlap detection and
// merging, take-lowest-n, remove, coverage, at both ends of the ID domain.
#include "range_list.hpp"
#include "range_set.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace hilo
{
namespace
{

std::vector<IdRange> R(std::initializer_list<IdRange> list)
{
    return list;
}

TEST(RangeSetInsert, MergesAdjacentRangesOnBothSides)
{
    RangeSet s;
    EXPECT_EQ(s.Insert({10, 19}), InsertStatus::kInserted);
    EXPECT_EQ(s.Insert({30, 39}), InsertStatus::kInserted);
    EXPECT_EQ(s.ranges(), R({{10, 19}, {30, 39}}));
    EXPECT_EQ(s.Insert({20, 29}), InsertStatus::kInserted);  // bridges the gap
    EXPECT_EQ(s.ranges(), R({{10, 39}}));
    EXPECT_EQ(s.Insert({40, 40}), InsertStatus::kInserted);  // touches the right end
    EXPECT_EQ(s.Insert({9, 9}), InsertStatus::kInserted);    // touches the left end
    EXPECT_EQ(s.ranges(), R({{9, 40}}));
    EXPECT_EQ(s.CountIds(), 32u);
}

TEST(RangeSetInsert, KeepsSeparateRangesSorted)
{
    RangeSet s;
    s.Insert({50, 60});
    s.Insert({1, 2});
    s.Insert({20, 30});
    EXPECT_EQ(s.ranges(), R({{1, 2}, {20, 30}, {50, 60}}));
}

TEST(RangeSetInsert, RefusesOverlapAndNamesTheLowestConflict)
{
    const struct {
        std::vector<IdRange> held;
        IdRange insert;
        IdRange conflict;
    } cases[] = {
        {R({{10, 19}, {30, 39}}), {15, 35}, {15, 19}},
        {R({{10, 19}, {30, 39}}), {25, 30}, {30, 30}},
        {R({{10, 19}, {30, 39}}), {19, 19}, {19, 19}},
        {R({{1, 4}, {6, 8}}), {5, 6}, {6, 6}},  // the left neighbour only touches
    };
    for (const auto &c : cases) {
        SCOPED_TRACE(testing::Message()
                     << "inserting [" << c.insert.first << ", " << c.insert.last << "]");
        RangeSet s;
        for (const IdRange &r : c.held)
            s.Insert(r);
        IdRange conflict{};
        EXPECT_EQ(s.Insert(c.insert, &conflict), InsertStatus::kOverlap);
        EXPECT_EQ(conflict, c.conflict);
        EXPECT_EQ(s.ranges(), c.held);  // nothing changed
    }
}

TEST(RangeSetInsert, RefusesInvalidRanges)
{
    RangeSet s;
    EXPECT_EQ(s.Insert({0, 5}), InsertStatus::kInvalid);
    EXPECT_EQ(s.Insert({5, 4}), InsertStatus::kInvalid);
    EXPECT_EQ(s.Insert({kMaxId, kMaxId + 1}), InsertStatus::kInvalid);
    EXPECT_EQ(s.Insert({-5, -1}), InsertStatus::kInvalid);
    EXPECT_TRUE(s.empty());
}

TEST(RangeListInsert, ReportsFullOnlyWhenANewSlotIsNeeded)
{
    IdRange storage[2];
    uint32_t count = 0;
    RangeList list(storage, &count, 2);
    EXPECT_EQ(list.Insert({1, 1}), InsertStatus::kInserted);
    EXPECT_EQ(list.Insert({3, 3}), InsertStatus::kInserted);
    EXPECT_EQ(list.Insert({5, 5}), InsertStatus::kFull);
    EXPECT_EQ(list.size(), 2u);
    // Merging needs no new slot, so it still works when full.
    EXPECT_EQ(list.Insert({2, 2}), InsertStatus::kInserted);
    EXPECT_EQ(list.size(), 1u);
    EXPECT_EQ(list[0], (IdRange{1, 3}));
    EXPECT_EQ(list.Insert({4, 4}), InsertStatus::kInserted);
    EXPECT_EQ(list[0], (IdRange{1, 4}));
}

TEST(RangeSetTakeLowest, TakesExactlyNLowestFirst)
{
    RangeSet s;
    s.Insert({100, 199});
    s.Insert({5, 9});
    s.Insert({50, 59});
    EXPECT_EQ(s.TakeLowest(3), R({{5, 7}}));
    EXPECT_EQ(s.TakeLowest(10), R({{8, 9}, {50, 57}}));
    EXPECT_EQ(s.ranges(), R({{58, 59}, {100, 199}}));
    EXPECT_EQ(s.TakeLowest(102), R({{58, 59}, {100, 199}}));
    EXPECT_TRUE(s.empty());
}

TEST(RangeSetTakeLowest, ReturnsWhatThereIsWhenAskedForMore)
{
    RangeSet s;
    s.Insert({1, 3});
    EXPECT_EQ(s.TakeLowest(1000), R({{1, 3}}));
    EXPECT_TRUE(s.TakeLowest(1).empty());
}

TEST(RangeListTakeLowest, StopsWhenTheOutputIsFull)
{
    IdRange storage[3] = {{1, 1}, {3, 3}, {5, 5}};
    uint32_t count = 3;
    RangeList list(storage, &count, 3);
    IdRange out[2];
    uint32_t out_count = 0;
    EXPECT_EQ(list.TakeLowest(3, out, 2, &out_count), 2u);
    EXPECT_EQ(out_count, 2u);
    EXPECT_EQ(list.size(), 1u);
    EXPECT_EQ(list[0], (IdRange{5, 5}));
}

TEST(RangeSetBounds, WorksAtOneAndAtTheTopOfTheDomain)
{
    RangeSet s;
    EXPECT_EQ(s.Insert({kMinId, kMinId}), InsertStatus::kInserted);
    EXPECT_EQ(s.Insert({kMaxId, kMaxId}), InsertStatus::kInserted);
    EXPECT_EQ(s.Insert({kMaxId - 10, kMaxId - 1}), InsertStatus::kInserted);
    EXPECT_EQ(s.ranges(), R({{kMinId, kMinId}, {kMaxId - 10, kMaxId}}));
    EXPECT_EQ(s.CountIds(), 12u);
    EXPECT_EQ(s.TakeLowest(2), R({{kMinId, kMinId}, {kMaxId - 10, kMaxId - 10}}));
    s.Remove({kMaxId, kMaxId});
    EXPECT_EQ(s.ranges(), R({{kMaxId - 9, kMaxId - 1}}));
}

TEST(RangeSetBounds, TheWholeDomainIsOneRangeAndCountsRight)
{
    RangeSet s;
    EXPECT_EQ(s.Insert({kMinId, kMaxId}), InsertStatus::kInserted);
    EXPECT_EQ(s.CountIds(), static_cast<uint64_t>(kMaxId));
    EXPECT_EQ(s.TakeLowest(static_cast<uint64_t>(kMaxId) - 1), R({{kMinId, kMaxId - 1}}));
    EXPECT_EQ(s.ranges(), R({{kMaxId, kMaxId}}));
}

TEST(RangeSetRemove, TrimsSplitsAndDeletes)
{
    RangeSet s;
    s.Insert({1, 10});
    s.Insert({20, 30});
    s.Insert({40, 50});
    s.Remove({5, 6});  // split
    EXPECT_EQ(s.ranges(), R({{1, 4}, {7, 10}, {20, 30}, {40, 50}}));
    s.Remove({9, 45});  // trims both ends, deletes one in the middle
    EXPECT_EQ(s.ranges(), R({{1, 4}, {7, 8}, {46, 50}}));
    s.Remove({100, 200});  // nothing there
    s.Remove({1, 4});      // exactly one range
    EXPECT_EQ(s.ranges(), R({{7, 8}, {46, 50}}));
}

TEST(RangeListRemove, RefusesASplitWithoutRoom)
{
    IdRange storage[1] = {{1, 10}};
    uint32_t count = 1;
    RangeList list(storage, &count, 1);
    EXPECT_FALSE(list.Remove({4, 5}));
    EXPECT_EQ(list[0], (IdRange{1, 10}));
    EXPECT_TRUE(list.Remove({1, 5}));  // a trim needs no room
    EXPECT_EQ(list[0], (IdRange{6, 10}));
}

TEST(RangeSetQueries, OverlapAndContains)
{
    RangeSet s;
    s.Insert({10, 20});
    s.Insert({30, 40});
    IdRange hit{};
    EXPECT_TRUE(s.FindOverlap({1, 10}, &hit));
    EXPECT_EQ(hit, (IdRange{10, 10}));
    EXPECT_FALSE(s.FindOverlap({21, 29}));
    EXPECT_TRUE(s.Contains({12, 18}));
    EXPECT_FALSE(s.Contains({18, 31}));  // spans a gap
    EXPECT_FALSE(s.Contains({41, 41}));
}

TEST(SortAndCheckDisjoint, FindsOverlapsInAnyOrder)
{
    std::vector<IdRange> ok = {{30, 40}, {1, 5}, {6, 6}};
    IdRange a{}, b{};
    EXPECT_TRUE(SortAndCheckDisjoint(ok.data(), ok.size(), &a, &b));
    EXPECT_EQ(ok, R({{1, 5}, {6, 6}, {30, 40}}));

    std::vector<IdRange> bad = {{20, 25}, {1, 100}, {50, 60}};
    EXPECT_FALSE(SortAndCheckDisjoint(bad.data(), bad.size(), &a, &b));
    EXPECT_EQ(a, (IdRange{1, 100}));
    EXPECT_EQ(b, (IdRange{20, 25}));

    // An overlap hidden behind a wide range is still found.
    std::vector<IdRange> hidden = {{1, 100}, {2, 3}, {90, 95}};
    EXPECT_FALSE(SortAndCheckDisjoint(hidden.data(), hidden.size(), &a, &b));
}

TEST(Normalize, SortsAndMergesOverlappingAndAdjacent)
{
    std::vector<IdRange> v = {{10, 12}, {1, 3}, {4, 5}, {11, 20}, {30, 30}};
    v.resize(Normalize(v.data(), v.size()));
    EXPECT_EQ(v, R({{1, 5}, {10, 20}, {30, 30}}));
}

TEST(FindUncovered, NamesTheLowestGap)
{
    std::vector<IdRange> cover = {{1, 10}, {11, 20}, {31, 40}};
    IdRange gap{};
    EXPECT_FALSE(FindUncovered(cover.data(), cover.size(), {5, 20}, &gap));
    EXPECT_TRUE(FindUncovered(cover.data(), cover.size(), {5, 35}, &gap));
    EXPECT_EQ(gap, (IdRange{21, 30}));
    EXPECT_TRUE(FindUncovered(cover.data(), cover.size(), {38, 45}, &gap));
    EXPECT_EQ(gap, (IdRange{41, 45}));
    EXPECT_TRUE(FindUncovered(cover.data(), 0, {1, 1}, &gap));
    EXPECT_EQ(gap, (IdRange{1, 1}));
    EXPECT_TRUE(FindUncovered(cover.data(), cover.size(), {25, 26}, &gap));
    EXPECT_EQ(gap, (IdRange{25, 26}));
}

}  // namespace
}  // namespace hilo
