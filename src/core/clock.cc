// The time-stamp counter check behind FreshClock (clock.h).
#include "core/clock.h"

#include <cstdio>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace srcnic {

namespace {

bool check_tsc_steady()
{
#if defined(__x86_64__)
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    // Invariant TSC: CPUID leaf 0x80000007, EDX bit 8 (Intel SDM vol. 3 §17.17.1; AMD APM
    // vol. 3, "Advanced Power Management Information").
    if (!__get_cpuid(0x80000007, &eax, &ebx, &ecx, &edx) || (edx & (1u << 8)) == 0) {
        return false;
    }
    // The kernel keeps time by the counter only if it found it usable on every CPU.
    FILE *f = std::fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
    if (f == nullptr) {
        return false;
    }
    char name[32] = {};
    const bool read = std::fgets(name, sizeof(name), f) != nullptr;
    std::fclose(f);
    return read && std::strcmp(name, "tsc\n") == 0;
#else
    return false;
#endif
}

} // namespace

bool tsc_is_steady()
{
    static const bool steady = check_tsc_steady();
    return steady;
}

} // namespace srcnic
