// The crossing from the core's C++ into C (c_api_boundary.hpp): nothing
// thrown gets through, whatever its type, and what a C caller is handed
// (a message, a NULL handle, queued items) is whole and bounded.
#include "c_api_boundary.hpp"

#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace
{

using hilo::boundary::CopyText;
using hilo::boundary::CreateOrExplain;
using hilo::boundary::Guarded;
using hilo::boundary::TakeFront;

TEST(CApiBoundary, CopyTextCutsShortAndTerminates)
{
    char buffer[4] = {'x', 'x', 'x', 'x'};
    CopyText("abcdef", buffer, sizeof buffer);
    EXPECT_STREQ(buffer, "abc");
    CopyText("", buffer, sizeof buffer);
    EXPECT_STREQ(buffer, "");
    CopyText("abc", nullptr, 10);  // no buffer: nothing written, no crash
    char one[1] = {'x'};
    CopyText("abc", one, 0);  // no room at all: untouched
    EXPECT_EQ(one[0], 'x');
    CopyText("abc", one, 1);
    EXPECT_EQ(one[0], '\0');
}

TEST(CApiBoundary, GuardedStopsEveryKindOfException)
{
    std::string error;
    EXPECT_TRUE(Guarded(&error, "fallback", [] {}));
    EXPECT_EQ(error, "");

    EXPECT_FALSE(Guarded(&error, "fallback", [] { throw std::runtime_error("the reason"); }));
    EXPECT_EQ(error, "the reason");

    // Not a std::exception: before this header, the quorum claim's guard
    // caught only std::exception, so this reached a noexcept function and
    // ended the process.
    error.clear();
    EXPECT_FALSE(Guarded(&error, "fallback", [] { throw 42; }));
    EXPECT_EQ(error, "fallback");

    error.clear();
    EXPECT_FALSE(Guarded(&error, "fallback", [] { throw std::runtime_error(""); }));
    EXPECT_EQ(error, "fallback");
}

struct Handle {
    std::vector<int> items;
};

TEST(CApiBoundary, CreateOrExplainReturnsNullAndSaysWhy)
{
    char error[32] = "unchanged";
    Handle *h = CreateOrExplain(error, sizeof error, [] {
        auto made = std::make_unique<Handle>();
        made->items.push_back(1);
        return made.release();
    });
    ASSERT_NE(h, nullptr);
    EXPECT_STREQ(error, "unchanged");
    delete h;

    h = CreateOrExplain(error, sizeof error, []() -> Handle * {
        throw std::invalid_argument("a message longer than the buffer it goes into");
    });
    EXPECT_EQ(h, nullptr);
    EXPECT_STREQ(error, "a message longer than the buffe");

    h = CreateOrExplain(error, sizeof error, []() -> Handle * { throw 7; });
    EXPECT_EQ(h, nullptr);
    EXPECT_STREQ(error, "unknown error");
}

TEST(CApiBoundary, TakeFrontHandsOutAtMostCapacityInOrder)
{
    std::deque<int> queue{1, 2, 3, 4, 5};
    long out[3] = {0, 0, 0};
    auto twice = [](int v) { return 2L * v; };
    EXPECT_EQ(TakeFront(&queue, out, 3, twice), 3u);
    EXPECT_EQ(out[0], 2);
    EXPECT_EQ(out[1], 4);
    EXPECT_EQ(out[2], 6);
    EXPECT_EQ(queue.size(), 2u);
    EXPECT_EQ(TakeFront(&queue, out, 3, twice), 2u);
    EXPECT_EQ(out[1], 10);
    EXPECT_TRUE(queue.empty());
    EXPECT_EQ(TakeFront(&queue, out, 3, twice), 0u);

    std::deque<int> *none = nullptr;  // the caller's handle was NULL
    EXPECT_EQ(TakeFront(none, out, 3, twice), 0u);
    queue.push_back(9);
    EXPECT_EQ(TakeFront(&queue, static_cast<long *>(nullptr), 3, twice), 0u);
    EXPECT_EQ(queue.size(), 1u);  // nothing taken when there is nowhere to put it
}

}  // namespace
