// Unit tests for src/wire/header.cc: check_header_placing, the receive check that places a
// payload in the same pass as its checksum.
#include "wire/header.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace srcnic {
namespace {

constexpr uint32_t kJobKey = 0x5eed;

// A sealed SEND datagram with len payload bytes (byte i is i * 7 + 3).
std::vector<uint8_t> send_datagram(uint32_t len)
{
    PacketHeader h;
    std::memset(&h, 0, sizeof(h));
    h.version = kWireVersion;
    h.opcode = static_cast<uint8_t>(Opcode::kSEND);
    h.flags = kFlagFirst | kFlagLast;
    h.job_key = kJobKey;
    h.psn = 5;
    h.msg_len = len;
    h.payload_len = static_cast<uint16_t>(len);
    std::vector<uint8_t> payload(len);
    for (uint32_t i = 0; i < len; ++i) {
        payload[i] = static_cast<uint8_t>(i * 7 + 3);
    }
    struct iovec iov = {payload.data(), payload.size()};
    seal_header(&h, &iov, 1);
    std::vector<uint8_t> d(sizeof(h) + len);
    std::memcpy(d.data(), &h, sizeof(h));
    if (len != 0) {
        std::memcpy(d.data() + sizeof(h), payload.data(), len);
    }
    return d;
}

// Runs check_header_placing with a destination of len + 2 bytes (0xee) offered for every header
// that reaches `where`; counts those calls.
struct Placing {
    std::vector<uint8_t> target;
    unsigned calls = 0;
    uint8_t *placed = reinterpret_cast<uint8_t *>(1);   // must be set by the call
    PacketHeader h;

    HeaderError run(const std::vector<uint8_t> &d, uint32_t job_key = kJobKey)
    {
        target.assign(d.size(), 0xee);
        return check_header_placing(d.data(), static_cast<uint32_t>(d.size()), job_key, &h,
                                    [this](const PacketHeader &) {
                                        ++calls;
                                        return target.data() + 1;
                                    },
                                    &placed);
    }
    bool untouched() const
    {
        for (uint8_t b : target) {
            if (b != 0xee) {
                return false;
            }
        }
        return true;
    }
};

TEST(wire_header, check_header_placing__good_packet_is_placed_once_checked)
{
    for (uint32_t len : {0u, 1u, 255u, 256u, 4096u, 65000u}) {
        const std::vector<uint8_t> d = send_datagram(len);
        Placing p;
        ASSERT_EQ(HeaderError::kOk, p.run(d)) << len;
        EXPECT_EQ(1u, p.calls);
        EXPECT_EQ(p.target.data() + 1, p.placed);
        EXPECT_EQ(0, std::memcmp(p.target.data() + 1, d.data() + sizeof(PacketHeader), len)) << len;
        EXPECT_EQ(0xee, p.target[0]);
        EXPECT_EQ(0xee, p.target[len + 1]) << "wrote past the payload";
        EXPECT_EQ(len, p.h.payload_len);
        EXPECT_EQ(HeaderError::kOk, check_header(d.data(), static_cast<uint32_t>(d.size()), kJobKey));
    }
}

TEST(wire_header, check_header_placing__bad_checksum_places_nothing_it_reports)
{
    for (size_t at : {size_t(12), size_t(40), sizeof(PacketHeader), sizeof(PacketHeader) + 4000}) {
        std::vector<uint8_t> d = send_datagram(5000);
        d[at] ^= 0x10;   // a bit of the header (src_nic, psn) or of the payload
        Placing p;
        EXPECT_EQ(HeaderError::kBadChecksum, p.run(d)) << "flipped byte " << at;
        EXPECT_EQ(nullptr, p.placed) << "flipped byte " << at;
        EXPECT_EQ(HeaderError::kBadChecksum,
                  check_header(d.data(), static_cast<uint32_t>(d.size()), kJobKey));
    }
}

// A datagram that fails a check other than the checksum is never offered to `where`: nothing of
// a forged or broken packet is written anywhere, and the error is check_header's.
TEST(wire_header, check_header_placing__failed_check_offers_nothing)
{
    const std::vector<uint8_t> good = send_datagram(5000);
    struct Case {
        const char *name;
        std::vector<uint8_t> d;
        uint32_t job_key;
        HeaderError err;
    };
    std::vector<Case> cases;
    cases.push_back({"wrong job key", good, kJobKey + 1, HeaderError::kWrongJobKey});
    cases.push_back({"truncated", std::vector<uint8_t>(good.begin(), good.end() - 1), kJobKey,
                     HeaderError::kTruncated});
    std::vector<uint8_t> longer = good;
    longer.push_back(0);
    cases.push_back({"trailing byte", longer, kJobKey, HeaderError::kBadLength});
    std::vector<uint8_t> version = good;
    version[0] = kWireVersion + 1;
    cases.push_back({"version", version, kJobKey, HeaderError::kBadVersion});
    for (const Case &c : cases) {
        Placing p;
        EXPECT_EQ(c.err, p.run(c.d, c.job_key)) << c.name;
        EXPECT_EQ(c.err, check_header(c.d.data(), static_cast<uint32_t>(c.d.size()), c.job_key))
            << c.name;
        EXPECT_EQ(0u, p.calls) << c.name;
        EXPECT_EQ(nullptr, p.placed) << c.name;
        EXPECT_TRUE(p.untouched()) << c.name;
    }
}

// `where` may decline (nullptr): the payload is checked in place and goes nowhere.
TEST(wire_header, check_header_placing__declined_place_checks_in_place)
{
    std::vector<uint8_t> d = send_datagram(5000);
    uint8_t *placed = reinterpret_cast<uint8_t *>(1);
    PacketHeader h;
    EXPECT_EQ(HeaderError::kOk,
              check_header_placing(d.data(), static_cast<uint32_t>(d.size()), kJobKey, &h,
                                   [](const PacketHeader &) -> uint8_t * { return nullptr; }, &placed));
    EXPECT_EQ(nullptr, placed);
    d.back() ^= 1;
    EXPECT_EQ(HeaderError::kBadChecksum,
              check_header_placing(d.data(), static_cast<uint32_t>(d.size()), kJobKey, &h,
                                   [](const PacketHeader &) -> uint8_t * { return nullptr; }, &placed));
}

} // namespace
} // namespace srcnic
