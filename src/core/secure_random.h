// Unpredictable numbers for what a peer must not guess (secrets, incarnations, rkeys, connection
// generations): the operating system's randomness for rare values, and SipHash-2-4 in counter
// mode under a key drawn from it for frequent ones. An output reveals nothing of the key, so no
// number of outputs predicts the next one (unlike xorshift or xoshiro, whose outputs give away
// their state). core/random.h stays for what must be reproducible (tests, fault injection).
#ifndef SRCNIC_CORE_SECURE_RANDOM_H
#define SRCNIC_CORE_SECURE_RANDOM_H

#include "core/siphash.h"

#include <cstddef>
#include <cstdint>

namespace srcnic {

// Fills buf with len bytes from getrandom() (/dev/urandom where the system call is missing).
// Aborts the process if neither gives bytes: an engine with guessable keys must not run.
void os_random(void *buf, size_t len);
// A fresh 64-bit value from os_random(), never 0 (0 means "none" for every identity).
uint64_t os_random_nonzero();

// Counter-mode SipHash-2-4: output i is siphash24(key, i) under a key from os_random(). Not
// thread-safe; each owner keeps its own (the Nic on its thread, a memory-region table under
// its lock).
class SecureRandom {
public:
    SecureRandom();

    uint64_t next() { return siphash24_word(key_, counter_++); }
    // The next output that is not 0.
    uint64_t next_nonzero();
    // The key, for a keyed function of the owner's own (the generation permutation).
    const SipKey &key() const { return key_; }

private:
    SipKey key_;            // from os_random(); never leaves the owner
    uint64_t counter_ = 0;  // outputs drawn so far
};

} // namespace srcnic

#endif
