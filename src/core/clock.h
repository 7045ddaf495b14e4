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

// A clock read reused while it is fresh: now() returns the time of the last real read if the
// CPU's time-stamp counter says that read is under kFreshTicks old (under 1 µs on any CPU of
// at least 1 GHz; reading the counter costs about a third of a clock_gettime), and reads the
// clock otherwise. For protocol timers and RTT samples, which need microseconds: a stream of
// calls (a progress call, then the doorbell of the reply it delivered) reads the clock once.
// A counter that went backwards (another CPU) shows as very old: the clock is read. Without
// a time-stamp counter every call reads the clock.
class FreshClock {
public:
    static constexpr uint64_t kFreshTicks = 1024;

    uint64_t now()
    {
#if defined(__x86_64__)
        const uint64_t tsc = __rdtsc();
        if (ns_ != 0 && tsc - tsc_ < kFreshTicks) {
            return ns_;
        }
        tsc_ = tsc;
#endif
        ns_ = now_ns();
        return ns_;
    }

private:
    uint64_t ns_ = 0;    // the last read, 0 = none yet
    uint64_t tsc_ = 0;   // the counter at that read
};

} // namespace srcnic

#endif
