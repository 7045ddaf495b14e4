// Unit tests for src/core/clock.h.
#include "core/clock.h"

#include <gtest/gtest.h>

#include <deque>

namespace srcnic {
namespace {

// A reused read is under kFreshTicks old: at the 1 GHz the bound assumes, about 1 µs; the
// tests allow 2 µs so that no counter rate a real CPU has makes them fail.
constexpr uint64_t kStaleBoundNs = 2000;
// A read carried forward (a steady counter) may run ahead of the clock by the error of the
// rate over kAnchorTicks: under 3 µs (clock.h).
constexpr uint64_t kAheadBoundNs = 3000;

TEST(core_clock, fresh_clock__never_ahead_of_the_clock_nor_far_behind_it)
{
    FreshClock clock;
    uint64_t last = 0;
    for (int i = 0; i < 200000; i++) {
        const uint64_t before = now_ns();
        const uint64_t t = clock.now();
        const uint64_t after = now_ns();
        ASSERT_LE(t, after + kAheadBoundNs) << "call " << i;
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
    static bool steady() { return true; }
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

// A counter and a clock the test moves by hand. The counter returns the scripted values
// first, then `value`; the clock counts its reads.
struct FakeTicks {
    static constexpr bool kAvailable = true;
    static inline uint64_t value = 0;
    static inline std::deque<uint64_t> script;
    static inline bool is_steady = true;
    static uint64_t read()
    {
        if (!script.empty()) {
            const uint64_t v = script.front();
            script.pop_front();
            return v;
        }
        return value;
    }
    static bool steady() { return is_steady; }
};

struct FakeClock {
    static inline uint64_t value = 0;
    static inline unsigned reads = 0;
    static uint64_t read()
    {
        ++reads;
        return value;
    }
};

using TestClock = BasicFreshClock<FakeTicks, FakeClock>;

class core_clock_fake : public ::testing::Test {
protected:
    void SetUp() override
    {
        FakeTicks::value = 1000;
        FakeTicks::script.clear();
        FakeTicks::is_steady = true;
        FakeClock::value = 5 * kNsPerSec;
        FakeClock::reads = 0;
    }

    // Moves counter and clock together: two ticks a nanosecond.
    static void pass(uint64_t ticks)
    {
        FakeTicks::value += ticks;
        FakeClock::value += ticks / 2;
    }

    // Two reads kCalibrationTicks apart: the clock then carries reads forward.
    static void calibrate(TestClock &clock)
    {
        EXPECT_EQ(clock.now(), FakeClock::value);
        pass(TestClock::kCalibrationTicks);
        EXPECT_EQ(clock.now(), FakeClock::value);
        ASSERT_EQ(clock.rate(), uint64_t(1) << 31);   // half a nanosecond a tick
    }
};

TEST_F(core_clock_fake, steady_counter__carries_a_read_forward_without_reading_the_clock)
{
    TestClock clock;
    calibrate(clock);
    const unsigned reads = FakeClock::reads;
    for (int i = 0; i < 100; i++) {
        pass(2 * 777);
        ASSERT_EQ(clock.now(), FakeClock::value) << "call " << i;
    }
    EXPECT_EQ(FakeClock::reads, reads);
}

TEST_F(core_clock_fake, steady_counter__reads_the_clock_again_once_kAnchorTicks_passed)
{
    TestClock clock;
    calibrate(clock);
    const unsigned reads = FakeClock::reads;
    pass(TestClock::kAnchorTicks - 2);
    clock.now();
    EXPECT_EQ(FakeClock::reads, reads);
    pass(2);
    FakeClock::value += 123;   // the clock moved at another rate: the read shows it
    EXPECT_EQ(clock.now(), FakeClock::value);
    EXPECT_EQ(FakeClock::reads, reads + 1);
}

TEST_F(core_clock_fake, carried_reads_ahead_of_the_clock__never_go_back_nor_drift)
{
    TestClock clock;
    calibrate(clock);
    // The counter runs ahead: carried values exceed the clock by up to 1000 ns.
    FakeTicks::value += TestClock::kAnchorTicks - 1;
    FakeClock::value += (TestClock::kAnchorTicks - 1) / 2 - 1000;
    const uint64_t ahead = clock.now();
    EXPECT_EQ(ahead, FakeClock::value + 1000);
    // The next read finds the clock behind what was returned: the time holds still...
    pass(2);
    EXPECT_EQ(clock.now(), ahead);
    pass(2 * 500);
    EXPECT_EQ(clock.now(), ahead);
    // ...until the clock passes it, and from there follows the clock: the 1000 ns of the
    // last span are not carried on (the rate, learned again over the longer span, is a
    // little slower: within a nanosecond here).
    pass(2 * 600);
    const uint64_t t = clock.now();
    EXPECT_GT(t, ahead);
    EXPECT_NEAR(static_cast<double>(t), static_cast<double>(FakeClock::value), 1.0);
}

TEST_F(core_clock_fake, counter_that_went_backwards__reads_the_clock)
{
    TestClock clock;
    calibrate(clock);
    const uint64_t before = clock.now();
    const unsigned reads = FakeClock::reads;
    FakeTicks::value -= 10;   // another CPU's counter, a little behind
    FakeClock::value += 5;
    EXPECT_EQ(clock.now(), FakeClock::value);
    EXPECT_GE(FakeClock::value, before);
    EXPECT_EQ(FakeClock::reads, reads + 1);
}

TEST_F(core_clock_fake, stalled_counter__still_reads_the_clock_after_kMaxCarries_calls)
{
    TestClock clock;
    calibrate(clock);
    const unsigned reads = FakeClock::reads;
    FakeClock::value += 50 * kNsPerUs;   // the counter stops; time goes on
    uint64_t t = 0;
    for (uint32_t i = 0; i <= TestClock::kMaxCarries; i++) {
        t = clock.now();
    }
    EXPECT_EQ(t, FakeClock::value);
    EXPECT_EQ(FakeClock::reads, reads + 1);
}

TEST_F(core_clock_fake, unsteady_counter__never_carries_a_read_forward)
{
    FakeTicks::is_steady = false;
    TestClock clock;
    EXPECT_EQ(clock.now(), FakeClock::value);
    pass(TestClock::kCalibrationTicks * 4);
    EXPECT_EQ(clock.now(), FakeClock::value);
    EXPECT_EQ(clock.rate(), 0u);
    // Reuse only: a read under kFreshTicks old, then a new read.
    const unsigned reads = FakeClock::reads;
    pass(TestClock::kFreshTicks - 2);
    EXPECT_EQ(clock.now(), FakeClock::value - (TestClock::kFreshTicks - 2) / 2);
    pass(2);
    EXPECT_EQ(clock.now(), FakeClock::value);
    EXPECT_EQ(FakeClock::reads, reads + 1);
}

TEST_F(core_clock_fake, read_interrupted_between_its_counter_reads__neither_anchors_nor_calibrates)
{
    TestClock clock;
    EXPECT_EQ(clock.now(), FakeClock::value);
    pass(TestClock::kCalibrationTicks);
    // The thread is preempted between the read and the counter after it.
    FakeTicks::script = {FakeTicks::value, FakeTicks::value + 10 * TestClock::kFreshTicks};
    EXPECT_EQ(clock.now(), FakeClock::value);
    EXPECT_EQ(clock.rate(), 0u);
    // The next call reads again (a clean pair), and that one calibrates.
    const unsigned reads = FakeClock::reads;
    EXPECT_EQ(clock.now(), FakeClock::value);
    EXPECT_EQ(FakeClock::reads, reads + 1);
    EXPECT_EQ(clock.rate(), uint64_t(1) << 31);
}

} // namespace
} // namespace srcnic
