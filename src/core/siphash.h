// SipHash-2-4 (Aumasson and Bernstein, 2012): a keyed 64-bit pseudorandom function, the MAC a
// connection's first packets carry (PROTOCOL.md §7) and the core of the engine's unpredictable
// number generator (core/secure_random.h). Written from the published algorithm.
#ifndef SRCNIC_CORE_SIPHASH_H
#define SRCNIC_CORE_SIPHASH_H

#include <cstddef>
#include <cstdint>

namespace srcnic {

// A 128-bit SipHash key as two little-endian 64-bit words (the reference's key bytes 0-7 are
// k0, bytes 8-15 k1).
struct SipKey {
    uint64_t k0;   // key bytes 0-7, little-endian
    uint64_t k1;   // key bytes 8-15, little-endian
};

// SipHash-2-4 of len bytes at data under key: two compression rounds per 8-byte word, four
// finalization rounds.
uint64_t siphash24(const SipKey &key, const void *data, size_t len);

// SipHash-2-4 of one 64-bit word (its 8 little-endian bytes): the counter-mode generator's step
// and the generation permutation's round function, without a byte loop.
uint64_t siphash24_word(const SipKey &key, uint64_t word);

} // namespace srcnic

#endif
