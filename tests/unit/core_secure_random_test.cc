// Unit tests for src/core/secure_random.cc: the operating system's bytes arrive, and generators
// of their own keys give sequences that neither repeat nor match each other.
#include "core/secure_random.h"

#include <gtest/gtest.h>

#include <set>

namespace srcnic {
namespace {

TEST(core_secure_random, os_random__fills_every_byte)
{
    // Each of 64 bytes is non-zero in at least one of 32 draws (a byte left unwritten stays 0
    // every time; a random one is 0 in all 32 with probability 2^-256).
    uint8_t any[64] = {};
    for (int draw = 0; draw < 32; ++draw) {
        uint8_t buf[64] = {};
        os_random(buf, sizeof(buf));
        for (size_t i = 0; i < sizeof(buf); ++i) {
            any[i] |= buf[i];
        }
    }
    for (size_t i = 0; i < sizeof(any); ++i) {
        EXPECT_NE(0, any[i]) << "byte " << i;
    }
    EXPECT_NE(0u, os_random_nonzero());
}

TEST(core_secure_random, secure_random__no_repeats_and_two_generators_differ)
{
    SecureRandom a, b;
    std::set<uint64_t> seen;
    for (int i = 0; i < 100000; ++i) {
        seen.insert(a.next());
    }
    EXPECT_EQ(100000u, seen.size()) << "an output repeated";
    size_t common = 0;
    for (int i = 0; i < 100000; ++i) {
        common += seen.count(b.next());
    }
    EXPECT_EQ(0u, common) << "two generators share outputs: their keys are not their own";
    EXPECT_NE(0u, a.next_nonzero());
}

} // namespace
} // namespace srcnic
