// Monotonic time for timers and pacing, in nanoseconds.
#ifndef SRCNIC_CORE_CLOCK_H
#define SRCNIC_CORE_CLOCK_H

#include <cstdint>
#include <ctime>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace srcnic {

constexpr uint64_t kNsPerUs = 1000;
constexpr uint64_t kNsPerMs = 1000 * 1000;
constexpr uint64_t kNsPerSec = 1000 * 1000 * 1000;

// CLOCK_MONOTONIC in nanoseconds (about 20 ns per call through the vDSO).
inline uint64_t now_ns()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * kNsPerSec + static_cast<uint64_t>(ts.tv_nsec);
}

// The CPU's time-stamp counter, or 0 where there is none (every FreshClock call then reads
// the clock).
struct TscTicks {
    static constexpr bool kAvailable =
#if defined(__x86_64__)
        true;
#else
        false;
#endif
    static uint64_t read()
    {
#if defined(__x86_64__)
        return __rdtsc();
#else
        return 0;
#endif
    }
};

// A clock read reused while it is fresh: now() returns the time of the last real read if the
// tick counter says that read is under kFreshTicks old (under 1 µs on any CPU of at least
// 1 GHz; reading the time-stamp counter costs about a third of a clock_gettime) and it has
// served fewer than kMaxReuses calls, and reads the clock otherwise. For protocol timers and
// RTT samples, which need microseconds: a stream of calls (a progress call, then the doorbell
// of the reply it delivered) reads the clock once. A counter that went backwards (another
// CPU) shows as very old; one that stalls (a broken virtual counter) still lets the time
// advance every kMaxReuses calls, so no timer can stop. Ticks: TscTicks, or a test's own.
template <typename Ticks> class BasicFreshClock {
public:
    static constexpr uint64_t kFreshTicks = 1024;
    static constexpr uint32_t kMaxReuses = 64;

    uint64_t now()
    {
        if constexpr (Ticks::kAvailable) {
            const uint64_t ticks = Ticks::read();
            if (ns_ != 0 && ticks - ticks_ < kFreshTicks && reuses_ < kMaxReuses) {
                ++reuses_;
                return ns_;
            }
            ticks_ = ticks;
            reuses_ = 0;
        }
        ns_ = now_ns();
        return ns_;
    }

private:
    uint64_t ns_ = 0;      // the last read, 0 = none yet
    uint64_t ticks_ = 0;   // the counter at that read
    uint32_t reuses_ = 0;  // calls it has served since
};

using FreshClock = BasicFreshClock<TscTicks>;

} // namespace srcnic

#endif
