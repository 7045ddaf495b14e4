// A small seeded pseudo-random generator (xoshiro256**, seeded by splitmix64): deterministic
// for tests and fault injection, never for anything that needs secrecy.
#ifndef SRCNIC_CORE_RANDOM_H
#define SRCNIC_CORE_RANDOM_H

#include <cstdint>

namespace srcnic {

class Random {
public:
    explicit Random(uint64_t seed = 1) { reseed(seed); }

    void reseed(uint64_t seed)
    {
        for (auto &s : s_) {
            seed += 0x9e3779b97f4a7c15ULL;
            uint64_t z = seed;
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
            z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
            s = z ^ (z >> 31);
        }
    }

    uint64_t next()
    {
        const uint64_t result = rotl(s_[1] * 5, 7) * 9;
        const uint64_t t = s_[1] << 17;
        s_[2] ^= s_[0];
        s_[3] ^= s_[1];
        s_[1] ^= s_[2];
        s_[0] ^= s_[3];
        s_[2] ^= t;
        s_[3] = rotl(s_[3], 45);
        return result;
    }

    // Uniform in [0, bound); bound > 0.
    uint64_t below(uint64_t bound) { return next() % bound; }

    // True with probability p (0 <= p <= 1).
    bool chance(double p) { return p > 0 && (p >= 1 || (next() >> 11) * 0x1.0p-53 < p); }

private:
    static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
    uint64_t s_[4];
};

} // namespace srcnic

#endif
