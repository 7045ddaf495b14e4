// Unit tests for src/wire/auth.cc: the SYN proof is SipHash-2-4 over the input PROTOCOL.md §7.1
// lays out (built here byte by byte, independently of auth.cc), covers every header bit but its
// own and the CRC's, and the sender's family, port and IP, not the scope id.
#include "wire/auth.h"

#include "core/random.h"

#include <gtest/gtest.h>

#include <cstring>

namespace srcnic {
namespace {

// A header with every field set (seeded, so that a failure can be replayed).
PacketHeader some_header(Random &rng)
{
    PacketHeader h;
    uint8_t *b = reinterpret_cast<uint8_t *>(&h);
    for (size_t i = 0; i < sizeof(h); ++i) {
        b[i] = static_cast<uint8_t>(rng.next());
    }
    return h;
}

LinkAddr addr4(uint8_t last, uint16_t port)
{
    LinkAddr a;
    a.family = LinkAddr::kFamilyInet;
    a.port = port;
    a.ip[0] = 198;
    a.ip[1] = 51;
    a.ip[2] = 100;
    a.ip[3] = last;
    return a;
}

TEST(wire_auth, syn_proof__is_siphash_of_the_documented_input)
{
    Random rng(0xa07);
    for (int i = 0; i < 100; ++i) {
        const SipKey key = nic_key(rng.next(), rng.next());
        const PacketHeader h = some_header(rng);
        const LinkAddr src = addr4(static_cast<uint8_t>(i), static_cast<uint16_t>(rng.next()));
        // PROTOCOL.md §7.1: the 104 header bytes with auth (96..103) and crc (88..91) zero, then
        // family, 0, port (little-endian), 16 bytes of IP (IPv4 in the first 4).
        uint8_t in[124] = {};
        std::memcpy(in, &h, 104);
        std::memset(in + 88, 0, 4);
        std::memset(in + 96, 0, 8);
        in[104] = LinkAddr::kFamilyInet;
        in[106] = static_cast<uint8_t>(src.port);
        in[107] = static_cast<uint8_t>(src.port >> 8);
        std::memcpy(in + 108, src.ip, 4);
        uint64_t expected = siphash24(key, in, sizeof(in));
        expected = expected != 0 ? expected : 1;
        ASSERT_EQ(expected, syn_proof(key, h, src)) << "case " << i;
    }
}

TEST(wire_auth, syn_proof__covers_every_header_bit_but_auth_and_crc)
{
    Random rng(0xb17);
    const SipKey key = nic_key(rng.next(), rng.next());
    const PacketHeader h = some_header(rng);
    const LinkAddr src = addr4(7, 4791);
    const uint64_t base = syn_proof(key, h, src);
    for (size_t byte = 0; byte < sizeof(PacketHeader); ++byte) {
        const bool ignored = (byte >= offsetof(PacketHeader, crc) && byte < offsetof(PacketHeader, crc) + 4) ||
                             byte >= offsetof(PacketHeader, auth);
        for (int bit = 0; bit < 8; ++bit) {
            PacketHeader c = h;
            reinterpret_cast<uint8_t *>(&c)[byte] ^= static_cast<uint8_t>(1u << bit);
            if (ignored) {
                EXPECT_EQ(base, syn_proof(key, c, src)) << "byte " << byte << " bit " << bit;
            } else {
                EXPECT_NE(base, syn_proof(key, c, src)) << "byte " << byte << " bit " << bit;
            }
        }
    }
}

TEST(wire_auth, syn_proof__covers_the_senders_address_and_the_key)
{
    Random rng(0xc0de);
    const SipKey key = nic_key(rng.next(), rng.next());
    const PacketHeader h = some_header(rng);
    const LinkAddr src = addr4(7, 4791);
    const uint64_t base = syn_proof(key, h, src);
    EXPECT_NE(base, syn_proof(key, h, addr4(8, 4791))) << "IP";
    EXPECT_NE(base, syn_proof(key, h, addr4(7, 4792))) << "port";
    LinkAddr v6 = src;
    v6.family = LinkAddr::kFamilyInet6;
    EXPECT_NE(base, syn_proof(key, h, v6)) << "family";
    LinkAddr scoped = src;
    scoped.scope_id = 3;   // names an interface of the receiver, not the sender
    EXPECT_EQ(base, syn_proof(key, h, scoped)) << "scope id";
    EXPECT_NE(base, syn_proof(nic_key(key.k0 ^ 1, key.k1), h, src)) << "secret";
    EXPECT_NE(base, syn_proof(nic_key(key.k0, key.k1 ^ 1), h, src)) << "incarnation";
    EXPECT_NE(0u, base);
}

} // namespace
} // namespace srcnic
