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
// the clock). steady(): whether its rate is constant and the kernel keeps time by it (see
// tsc_is_steady), so that a clock read can be carried forward by the ticks since.
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
    static bool steady();
};

// True if the time-stamp counter is invariant (constant rate in every power state, CPUID
// 0x80000007 EDX bit 8) and the kernel's clock source is "tsc": the kernel then keeps
// CLOCK_MONOTONIC by it and has checked that the CPUs' counters agree. Checked once.
bool tsc_is_steady();

inline bool TscTicks::steady()
{
    return tsc_is_steady();
}

struct MonotonicClock {
    static uint64_t read() { return now_ns(); }
};

// The time for protocol timers and RTT samples, which need microseconds, without a clock read
// per use. A clock read (clock_gettime through the vDSO, which orders its counter read after
// the work before it) took 59 ticks in a loop here; the counter read and the arithmetic that
// carry a read forward, 25 (perf/results/2026-11-23-engine/NOTES.md, "the twelfth pass").
//
// With a steady counter (Ticks::steady()) the clock is read once per kAnchorTicks and carried
// forward in between: now() = the last read + ticks since then at the rate the clock and the
// counter showed over the longest span seen (fixed point, 32 fraction bits). The rate is
// learned from the reads themselves, so until two reads kCalibrationTicks apart have been made
// (about 2 ms after the first call) every call behaves as below. Carried forward over at most
// kAnchorTicks (under 5 ms at 1 GHz), a rate in error by the clock's adjustment limit (500 ppm)
// is off by under 3 µs, and the next read starts afresh from the clock. A counter that went
// backwards (another CPU) shows as very old and forces a read. No value returned is ever
// below an earlier one.
//
// Otherwise (no steady counter): a clock read is reused while the tick counter says it is
// under kFreshTicks old (under 1 µs on any CPU of at least 1 GHz) and it has served fewer than
// kMaxReuses calls. A stream of calls (a progress call, then the doorbell of the reply it
// delivered) reads the clock once.
//
// In both cases a counter that stalls (a broken virtual counter) still lets the time advance:
// at most kMaxReuses (kMaxCarries when carrying forward) calls go by without a clock read.
// Ticks: TscTicks, or a test's own; Clock: MonotonicClock, or a test's own.
template <typename Ticks, typename Clock = MonotonicClock> class BasicFreshClock {
public:
    static constexpr uint64_t kFreshTicks = 1024;
    static constexpr uint32_t kMaxReuses = 64;
    static constexpr uint64_t kCalibrationTicks = uint64_t(1) << 22;
    static constexpr uint64_t kAnchorTicks = uint64_t(1) << 22;
    static constexpr uint32_t kMaxCarries = 4096;
    // Rates above this many nanoseconds a tick (counters under 62.5 MHz) are not carried:
    // the product with kAnchorTicks must stay in 64 bits.
    static constexpr uint64_t kMaxRate = uint64_t(16) << 32;

    BasicFreshClock() : steady_(Ticks::kAvailable && Ticks::steady()) {}

    uint64_t now()
    {
        if constexpr (Ticks::kAvailable) {
            const uint64_t ticks = Ticks::read();
            const uint64_t since = ticks - ticks_;
            if (rate_ != 0) {
                if (since < kAnchorTicks && reuses_ < kMaxCarries) {
                    ++reuses_;
                    return advance(ns_ + ((since * rate_) >> 32));
                }
            } else if (ns_ != 0 && since < kFreshTicks && reuses_ < kMaxReuses) {
                ++reuses_;
                return advance(ns_);
            }
            ticks_ = ticks;
            reuses_ = 0;
            ns_ = Clock::read();
            if (steady_) {
                // The counter on both sides of the read: the read is pinned to their middle,
                // unless they are far apart (the thread was preempted in between), when it
                // neither anchors nor calibrates: the next call reads again.
                const uint64_t after = Ticks::read();
                if (after - ticks < kFreshTicks) {
                    ticks_ = ticks + (after - ticks) / 2;
                    calibrate(ticks_, ns_);
                } else {
                    reuses_ = kMaxCarries;
                }
            }
            return advance(ns_);
        }
        return Clock::read();
    }

    // The rate now() carries reads forward at (ns per tick, 32 fraction bits); 0 = none.
    uint64_t rate() const { return rate_; }

private:
    // t, or the last value returned if that was later: a carried read that ran ahead of the
    // clock holds the time still until the clock catches up (the next read starts afresh from
    // the clock, so no error accumulates).
    uint64_t advance(uint64_t t)
    {
        if (t < last_) {
            t = last_;
        }
        last_ = t;
        return t;
    }

    void calibrate(uint64_t ticks, uint64_t read)
    {
        if (cal_ns_ == 0) {
            cal_ticks_ = ticks;
            cal_ns_ = read;
            return;
        }
        const uint64_t span = ticks - cal_ticks_;
        if (span < kCalibrationTicks || span > (uint64_t(1) << 62) || read <= cal_ns_) {
            // Too short to tell the rate, or the counter went backwards: no new rate yet.
            return;
        }
        const double rate = static_cast<double>(read - cal_ns_) / static_cast<double>(span) *
                            4294967296.0;
        rate_ = rate < static_cast<double>(kMaxRate) ? static_cast<uint64_t>(rate) : 0;
    }

    const bool steady_;
    uint64_t ns_ = 0;        // the last clock read, 0 = none yet
    uint64_t ticks_ = 0;     // the counter at that read
    uint64_t last_ = 0;      // the last value returned
    uint64_t rate_ = 0;      // ns per tick << 32, once calibrated; 0 = reuse reads only
    uint64_t cal_ticks_ = 0; // the counter and the clock at the first read: the rate's span
    uint64_t cal_ns_ = 0;
    uint32_t reuses_ = 0;    // calls served since the last clock read
};

using FreshClock = BasicFreshClock<TscTicks>;

} // namespace srcnic

#endif
