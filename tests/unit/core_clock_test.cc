// Unit tests for src/core/clock.h.
#include "core/clock.h"

#include <gtest/gtest.h>

namespace srcnic {
namespace {

// A reused read is under kFreshTicks old: at the 1 GHz the bound assumes, about 1 µs; the
// tests allow 2 µs so that no counter rate a real CPU has makes them fail.
constexpr uint64_t kStaleBoundNs = 2000;

TEST(core_clock, fresh_clock__never_ahead_of_the_clock_nor_far_behind_it)
{
    FreshClock clock;
    uint64_t last = 0;
    for (int i = 0; i < 200000; i++) {
        const uint64_t before = now_ns();
        const uint64_t t = clock.now();
        const uint64_t after = now_ns();
        ASSERT_LE(t, after) << "call " << i;
        ASSERT_GE(t + kStaleBoundNs, before) << "call " << i;
        ASSERT_GE(t, last) << "call " << i << ": went backwards";
        last = t;
    }
}

TEST(core_clock, fresh_clock__follows_the_clock_once_a_read_grew_old)
{
    FreshClock clock;
    const uint64_t first = clock.now();
    // Busy-wait (bounded by the clock itself) until the first read is well out of date.
    const uint64_t until = first + 50 * kNsPerUs;
    while (now_ns() < until) {
    }
    EXPECT_GE(clock.now(), until);
}

// A tick counter that never moves, as a broken virtual counter might.
struct FrozenTicks {
    static constexpr bool kAvailable = true;
    static uint64_t read() { return 42; }
};

TEST(core_clock, fresh_clock__advances_even_if_the_tick_counter_stalls)
{
    BasicFreshClock<FrozenTicks> clock;
    const uint64_t first = clock.now();
    const uint64_t until = first + 50 * kNsPerUs;
    while (now_ns() < until) {
    }
    // Reuses are bounded: within kMaxReuses + 1 calls a real read shows the time that passed.
    uint64_t t = first;
    for (uint32_t i = 0; i <= BasicFreshClock<FrozenTicks>::kMaxReuses && t < until; i++) {
        t = clock.now();
    }
    EXPECT_GE(t, until);
}

} // namespace
} // namespace srcnic
