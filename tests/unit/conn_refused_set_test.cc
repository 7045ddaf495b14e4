// Unit tests for src/conn/refused_set.cc: no refused connection is forgotten within its linger,
// however many there are; few others are taken for refused ones; what is two lingers old is
// gone; the memory is none until the first entry and does not grow with the entries.
#include "conn/refused_set.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace srcnic {
namespace {

constexpr uint64_t kLinger = 1000;       // ns (the set only compares times)
constexpr size_t kBits = 32768;          // the engine's size for 4,096 entries
const SipKey kKey = {0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};   // fixed: deterministic

bool has(RefusedSet &s, uint64_t id, uint64_t now) { return s.maybe_contains(&id, sizeof(id), now); }
void add(RefusedSet &s, uint64_t id, uint64_t now) { s.add(&id, sizeof(id), now); }

TEST(RefusedSet, every_entry_is_held_within_its_linger__far_beyond_the_sizing_too)
{
    RefusedSet s(kBits, kLinger, kKey);
    EXPECT_EQ(0u, s.bytes());   // nothing until the first refusal
    add(s, 1u << 30, 100);
    const size_t bytes = s.bytes();
    EXPECT_EQ(2 * kBits / 8, bytes);
    // 20,000 entries, five times what the filters are sized for, added over most of a linger.
    for (uint64_t i = 0; i < 20000; ++i) {
        add(s, i, 100 + i * (kLinger - 200) / 20000);
    }
    EXPECT_EQ(bytes, s.bytes());
    // Every one is still held a linger after it was added, across a rotation.
    for (uint64_t i = 0; i < 20000; ++i) {
        const uint64_t added = 100 + i * (kLinger - 200) / 20000;
        ASSERT_TRUE(has(s, i, added + kLinger - 1)) << "entry " << i;
    }
}

TEST(RefusedSet, false_positives_stay_near_the_sizing_rate)
{
    RefusedSet s(kBits, kLinger, kKey);
    for (uint64_t i = 0; i < 4096; ++i) {
        add(s, i, 1);
    }
    // Of 100,000 keys never added, about 2 % (5 hashes, 8 bits an entry) are taken for refused.
    unsigned fp = 0;
    for (uint64_t i = 1000000; i < 1100000; ++i) {
        fp += has(s, i, 2);
    }
    EXPECT_LT(fp, 4000u);
    EXPECT_GT(fp, 500u);   // (the filter is used at all: with no hashing every lookup says no)
}

TEST(RefusedSet, an_entry_leaves_after_two_lingers_and_is_kept_through_the_first)
{
    RefusedSet s(kBits, kLinger, kKey);
    add(s, 7, 10);
    EXPECT_TRUE(has(s, 7, 10));
    EXPECT_FALSE(has(s, 8, 10));
    // One linger on: the filter that took it becomes the previous one; still held.
    add(s, 9, 10 + kLinger);
    EXPECT_TRUE(has(s, 7, 10 + kLinger + 1));
    EXPECT_TRUE(has(s, 9, 10 + kLinger + 1));
    // Another linger on: the previous filter is cleared; 9 (added a linger ago) stays.
    EXPECT_FALSE(has(s, 7, 10 + 2 * kLinger));
    EXPECT_TRUE(has(s, 9, 10 + 2 * kLinger));
    // Long quiet: everything is gone at once.
    EXPECT_FALSE(has(s, 9, 10 + 10 * kLinger));
}

TEST(RefusedSet, an_empty_set_holds_nothing)
{
    RefusedSet s;   // a NIC without DC targets refuses with RST, remembering nothing
    add(s, 1, 1);
    EXPECT_FALSE(has(s, 1, 1));
    EXPECT_EQ(0u, s.bytes());
}

} // namespace
} // namespace srcnic
