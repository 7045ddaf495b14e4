// Monotonic time for timers and pacing, in nanoseconds.
#ifndef SRCNIC_CORE_CLOCK_H
#define SRCNIC_CORE_CLOCK_H

#include <cstdint>
#include <ctime>

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

} // namespace srcnic

#endif
