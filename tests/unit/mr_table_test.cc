// Unit tests for the memory-region table's keys (src/mr/mr_table.cc): an rkey seen on the wire
// predicts no other, of the same engine or of another, by the method that predicts xorshift64*
// keys: recover every generator state consistent with one key and step it.
#include "mr/mr_table.h"

#include <srcnic/srcnic.h>

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace srcnic {
namespace {

constexpr unsigned kSlotBits = 20;                  // an rkey is (random << 20) | slot
constexpr uint64_t kXorshiftMul = 0x2545F4914F6CDD1Dull;

// xorshift64*, one step per registration (the method's control).
uint64_t xorshift_step(uint64_t *state)
{
    uint64_t s = *state;
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    *state = s;
    return s * kXorshiftMul;
}

// kXorshiftMul's inverse modulo 2^64 (Newton's iteration; the multiplier is odd).
uint64_t mul_inverse()
{
    uint64_t inv = kXorshiftMul;
    for (int i = 0; i < 6; ++i) {
        inv *= 2 - kXorshiftMul * inv;
    }
    return inv;
}

// Keys as a table stepping xorshift64* from a seed makes them.
std::vector<uint64_t> xorshift_keys(uint64_t seed, unsigned n)
{
    std::vector<uint64_t> keys;
    uint64_t state = seed | 1;
    for (unsigned slot = 0; slot < n; ++slot) {
        uint64_t random = xorshift_step(&state) >> kSlotBits;
        keys.push_back((random == 0 ? 1 : random) << kSlotBits | slot);
    }
    return keys;
}

// The attack: the key `seen` gives the top 44 bits of one xorshift64* output; each of the 2^20
// outputs that fit it gives a state (output times the multiplier's inverse). True if one of
// those states, stepped up to max_steps times, then yields the random parts of `targets` in
// order, one per step: the keys were predictable from `seen`.
bool xorshift_predicts(uint64_t seen, const std::vector<uint64_t> &targets, unsigned max_steps)
{
    static const uint64_t inv = mul_inverse();
    const uint64_t top = seen >> kSlotBits << kSlotBits;
    for (uint64_t low = 0; low < (1u << kSlotBits); ++low) {
        uint64_t state = (top | low) * inv;
        for (unsigned step = 0; step < max_steps; ++step) {
            if (xorshift_step(&state) >> kSlotBits != targets[0] >> kSlotBits) {
                continue;
            }
            uint64_t follow = state;
            size_t matched = 1;
            while (matched < targets.size() &&
                   xorshift_step(&follow) >> kSlotBits == targets[matched] >> kSlotBits) {
                ++matched;
            }
            if (matched == targets.size()) {
                return true;
            }
        }
    }
    return false;
}

// The method works: against xorshift64* keys, one rkey gives away the next two, and the keys of
// a table whose generator continues another's.
TEST(mr_table, xorshift_inversion__predicts_the_keys_of_before)
{
    for (uint64_t seed : {0x1234567ull, 0x9e3779b97f4a7c15ull, 0xfeedfacecafebeefull}) {
        const std::vector<uint64_t> keys = xorshift_keys(seed, 12);
        EXPECT_TRUE(xorshift_predicts(keys[0], {keys[1], keys[2]}, 1)) << "seed " << seed;
        EXPECT_TRUE(xorshift_predicts(keys[3], {keys[9], keys[10]}, 8)) << "seed " << seed;
    }
}

// Consecutive rkeys of one table: none predicts the two after it.
TEST(mr_table, random_key__consecutive_keys_do_not_predict_each_other)
{
    std::unique_ptr<MrTable> table;
    ASSERT_EQ(SRCNIC_OK, MrTable::create(64, &table));
    std::vector<uint8_t> mem(4096);
    std::vector<uint64_t> keys;
    for (uint32_t i = 0; i < 10; ++i) {
        uint32_t slot;
        ASSERT_EQ(SRCNIC_OK, table->reg(reinterpret_cast<uint64_t>(mem.data()) + i, 8,
                                       SRCNIC_ACCESS_REMOTE_READ, &slot));
        keys.push_back(table->rkey_of(slot));
        EXPECT_NE(0u, keys.back() >> kSlotBits);
    }
    for (size_t i = 0; i + 2 < keys.size(); ++i) {
        EXPECT_FALSE(xorshift_predicts(keys[i], {keys[i + 1], keys[i + 2]}, 1)) << "key " << i;
    }
    // Nor the next ones from the last seen, within 8 steps.
    EXPECT_FALSE(xorshift_predicts(keys[0], {keys[5], keys[6]}, 8));
}

// The keys of two engines (each NIC with a domain of its own, and two protection domains):
// one engine's key predicts nothing of the other's.
TEST(mr_table, random_key__keys_of_two_engines_do_not_predict_each_other)
{
    std::vector<uint8_t> mem(4096);
    srcnic_config_t config;
    srcnic_config_init(&config);
    srcnic_nic_t *nics[2];
    std::vector<uint64_t> keys[2];
    for (int n = 0; n < 2; ++n) {
        ASSERT_EQ(SRCNIC_OK, srcnic_nic_create(&config, &nics[n]));
        for (int i = 0; i < 3; ++i) {
            srcnic_mr_t *mr;
            ASSERT_EQ(SRCNIC_OK, srcnic_mr_reg(nics[n], mem.data(), mem.size(),
                                               SRCNIC_ACCESS_REMOTE_WRITE, &mr));
            keys[n].push_back(srcnic_mr_rkey(mr));
            srcnic_mr_dereg(mr);
        }
    }
    EXPECT_FALSE(xorshift_predicts(keys[0][0], {keys[1][0], keys[1][1]}, 16));
    EXPECT_FALSE(xorshift_predicts(keys[1][0], {keys[0][0], keys[0][1]}, 16));
    srcnic_nic_addr_t addr[2];
    for (int n = 0; n < 2; ++n) {
        srcnic_nic_query_addr(nics[n], &addr[n]);
        EXPECT_NE(0u, addr[n].secret);
        EXPECT_NE(addr[n].secret, addr[n].incarnation);
    }
    EXPECT_NE(addr[0].secret, addr[1].secret);
    EXPECT_NE(addr[0].incarnation, addr[1].incarnation);
    for (srcnic_nic_t *nic : nics) {
        srcnic_nic_destroy(nic);
    }

    srcnic_pd_t *pds[2];
    std::vector<uint64_t> pd_keys[2];
    for (int n = 0; n < 2; ++n) {
        ASSERT_EQ(SRCNIC_OK, srcnic_pd_create(&pds[n]));
        for (int i = 0; i < 3; ++i) {
            srcnic_mr_t *mr;
            ASSERT_EQ(SRCNIC_OK, srcnic_pd_mr_reg(pds[n], mem.data(), mem.size(),
                                                  SRCNIC_ACCESS_REMOTE_READ, &mr));
            pd_keys[n].push_back(srcnic_mr_rkey(mr));
            srcnic_mr_dereg(mr);
        }
    }
    EXPECT_FALSE(xorshift_predicts(pd_keys[0][0], {pd_keys[1][0], pd_keys[1][1]}, 16));
    EXPECT_FALSE(xorshift_predicts(pd_keys[1][0], {pd_keys[0][0], pd_keys[0][1]}, 16));
    for (srcnic_pd_t *pd : pds) {
        srcnic_pd_destroy(pd);
    }
}

} // namespace
} // namespace srcnic
