// Unit tests of the key layouts: hilo_uuid's bits, its per-session order
// when the clock stands still or steps back, and node_bits slices.
#include "keys.hpp"
#include "keys_c_api.h"

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <set>

namespace hilo
{
namespace
{

using Bytes = std::array<uint8_t, 16>;

Bytes Encode(UuidFields f)
{
    Bytes b{};
    EncodeUuid(f, b.data());
    return b;
}

TEST(UuidLayout, FieldsSitWhereTheRfcPutsThem)
{
    // ms 0x0123456789AB, counter 0x5A5, id with bit 62 set and low bits 0x...
    int64_t id = (int64_t{1} << 62) | 0x0123456789ABCDEFLL;
    Bytes b = Encode({0x0123456789ABLL, 0x5A5, id});
    // unix_ts_ms: the first 6 bytes
    EXPECT_EQ(b[0], 0x01);
    EXPECT_EQ(b[5], 0xAB);
    // version 7 in the high nibble of byte 6
    EXPECT_EQ(b[6] >> 4, 7);
    // rand_a = counter << 1 | id bit 62 = 0xB4B
    EXPECT_EQ(((b[6] & 0xF) << 8) | b[7], (0x5A5 << 1) | 1);
    // variant 10 in the top two bits of byte 8
    EXPECT_EQ(b[8] >> 6, 2);
    // rand_b = the low 62 bits of the id
    uint64_t rand_b = b[8] & 0x3F;
    for (int i = 9; i < 16; i++)
        rand_b = (rand_b << 8) | b[i];
    EXPECT_EQ(rand_b, static_cast<uint64_t>(id) & ((uint64_t{1} << 62) - 1));
}

TEST(UuidLayout, DecodeGivesBackTimeAndId)
{
    for (int64_t id :
         {kMinId, int64_t{2}, int64_t{1} << 61, (int64_t{1} << 62) - 1, int64_t{1} << 62, kMaxId}) {
        for (int64_t ms : {int64_t{0}, int64_t{1764037741000}, kUuidMaxMs}) {
            Bytes b = Encode({ms, 17, id});
            UuidFields f{0, 0, 0};
            ASSERT_TRUE(DecodeUuid(b.data(), &f));
            EXPECT_EQ(f.ms, ms);
            EXPECT_EQ(f.id, id);
            EXPECT_EQ(f.counter, 17u);
        }
    }
}

TEST(UuidLayout, DecodeRefusesOtherVersionsAndVariants)
{
    Bytes b = Encode({1000, 0, 5});
    UuidFields f{-1, 0, -1};
    Bytes v4 = b;
    v4[6] = (v4[6] & 0x0F) | 0x40;
    EXPECT_FALSE(DecodeUuid(v4.data(), &f));
    Bytes ncs = b;
    ncs[8] &= 0x3F;  // variant 00
    EXPECT_FALSE(DecodeUuid(ncs.data(), &f));
    Bytes ms = b;
    ms[8] |= 0xC0;  // variant 11
    EXPECT_FALSE(DecodeUuid(ms.data(), &f));
    EXPECT_EQ(f.ms, -1);
    EXPECT_EQ(f.id, -1);
}

TEST(UuidLayout, DifferentIdsNeverCollideWhateverTheTime)
{
    // Two calls with the same time and counter but different IDs differ, and
    // so do UUIDs whose IDs differ only in bit 62 or bit 0.
    std::set<Bytes> seen;
    for (int64_t id : {int64_t{1}, int64_t{2}, int64_t{1} | (int64_t{1} << 62), kMaxId})
        EXPECT_TRUE(seen.insert(Encode({42, 0, id})).second);
}

TEST(UuidClock, IncreasesWithTheClock)
{
    UuidClock c;
    Bytes prev = Encode(NextUuid(&c, 1000, 50));
    Bytes next = Encode(NextUuid(&c, 1001, 10));  // lower ID, later ms
    EXPECT_LT(prev, next);
    EXPECT_EQ(c.counter, 0u);
}

TEST(UuidClock, ClockSteppingBackKeepsThePreviousMillisecond)
{
    UuidClock c;
    UuidFields a = NextUuid(&c, 5000, 100);
    UuidFields b = NextUuid(&c, 4000, 101);  // a second back
    EXPECT_EQ(b.ms, 5000);
    EXPECT_EQ(b.counter, a.counter);  // the ID grew: no need to count
    EXPECT_LT(Encode(a), Encode(b));
    UuidFields d = NextUuid(&c, -86400000, 7);  // before 1970, lower ID
    EXPECT_EQ(d.ms, 5000);
    EXPECT_EQ(d.counter, a.counter + 1);
    EXPECT_LT(Encode(b), Encode(d));
}

TEST(UuidClock, CounterOverflowMovesToTheNextMillisecond)
{
    UuidClock c;
    Bytes prev = Encode(NextUuid(&c, 7000, 1000000));
    // Every call gets a lower ID than the one before, in the same ms.
    for (int64_t i = 1; i <= kUuidMaxCounter + 5; i++) {
        UuidFields f = NextUuid(&c, 7000, 1000000 - i);
        Bytes b = Encode(f);
        ASSERT_LT(prev, b) << "call " << i;
        prev = b;
        if (i <= static_cast<int64_t>(kUuidMaxCounter)) {
            EXPECT_EQ(f.ms, 7000);
            EXPECT_EQ(f.counter, static_cast<uint32_t>(i));
        } else if (i == kUuidMaxCounter + 1) {
            EXPECT_EQ(f.ms, 7001);
            EXPECT_EQ(f.counter, 0u);
        }
    }
}

TEST(UuidClock, SaturatesAtTheLastMillisecond)
{
    UuidClock c;
    UuidFields a = NextUuid(&c, INT64_MAX, 3);
    EXPECT_EQ(a.ms, kUuidMaxMs);
    UuidFields b = NextUuid(&c, INT64_MAX, 2);
    EXPECT_EQ(b.ms, kUuidMaxMs);
    EXPECT_EQ(b.counter, 1u);
}

TEST(UuidCApi, AgreesWithTheCore)
{
    HiloUuidClock clock{};
    uint8_t out[16];
    hilo_uuid_next(&clock, 123456, kMaxId, out);
    int64_t ms = 0, id = 0;
    ASSERT_TRUE(hilo_uuid_decode(out, &ms, &id));
    EXPECT_EQ(ms, 123456);
    EXPECT_EQ(id, kMaxId);
    hilo_uuid_next(&clock, 100, 1, out);
    ASSERT_TRUE(hilo_uuid_decode(out, &ms, &id));
    EXPECT_EQ(ms, 123456);
    EXPECT_EQ(clock.counter, 1u);
}

TEST(NodeSlices, SliceBoundsAndOwner)
{
    IdRange s{0, 0};
    ASSERT_TRUE(NodeSlice(0, 0, &s));
    EXPECT_EQ(s, (IdRange{kMinId, kMaxId}));
    EXPECT_FALSE(NodeSlice(0, 1, &s));

    ASSERT_TRUE(NodeSlice(2, 0, &s));
    EXPECT_EQ(s, (IdRange{1, (int64_t{1} << 61) - 1}));
    ASSERT_TRUE(NodeSlice(2, 1, &s));
    EXPECT_EQ(s, (IdRange{int64_t{1} << 61, (int64_t{1} << 62) - 1}));
    ASSERT_TRUE(NodeSlice(2, 3, &s));
    EXPECT_EQ(s, (IdRange{int64_t{3} << 61, kMaxId}));
    EXPECT_FALSE(NodeSlice(2, 4, &s));
    EXPECT_FALSE(NodeSlice(2, -1, &s));
    EXPECT_FALSE(NodeSlice(17, 0, &s));
    EXPECT_FALSE(NodeSlice(-1, 0, &s));

    ASSERT_TRUE(NodeSlice(16, 65535, &s));
    EXPECT_EQ(s.first, int64_t{65535} << 47);
    EXPECT_EQ(s.last, kMaxId);
    EXPECT_FALSE(NodeSlice(16, 65536, &s));
}

TEST(NodeSlices, NodeOfInvertsTheSlice)
{
    for (int bits : {0, 1, 3, 8, 16}) {
        for (int64_t node : {int64_t{0}, int64_t{1}, (int64_t{1} << bits) - 1}) {
            IdRange s{0, 0};
            if (!NodeSlice(bits, node, &s))
                continue;
            EXPECT_EQ(NodeOf(bits, s.first), node) << bits << " " << node;
            EXPECT_EQ(NodeOf(bits, s.last), node) << bits << " " << node;
            EXPECT_EQ(hilo_node_of_id(bits, s.last), node);
            if (s.first > kMinId) {
                EXPECT_EQ(NodeOf(bits, s.first - 1), node - 1);
            }
        }
    }
}

}  // namespace
}  // namespace hilo
