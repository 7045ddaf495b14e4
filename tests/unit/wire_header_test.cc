// Unit tests for src/wire/header.cc: the layout against PROTOCOL.md's field table (written down
// once, checked here), the field checks, and check_header_placing, the receive check that places
// a payload in the same pass as its checksum.
#include "wire/header.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace srcnic {
namespace {

constexpr uint32_t kJobKey = 0x5eed;

// A sealed SEND datagram with len payload bytes (byte i is i * 7 + 3) and pad zero pad bytes.
std::vector<uint8_t> send_datagram(uint32_t len, uint8_t pad = 0)
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
    h.pad = pad;
    std::vector<uint8_t> payload(len + pad);
    for (uint32_t i = 0; i < len; ++i) {
        payload[i] = static_cast<uint8_t>(i * 7 + 3);
    }
    struct iovec iov = {payload.data(), payload.size()};
    seal_header(&h, &iov, 1);
    std::vector<uint8_t> d(sizeof(h) + len + pad);
    std::memcpy(d.data(), &h, sizeof(h));
    if (len + pad != 0) {
        std::memcpy(d.data() + sizeof(h), payload.data(), len + pad);
    }
    return d;
}

// --- the layout, as PROTOCOL.md §2.1 writes it down ---

// PROTOCOL.md of the source tree (the build passes its directory; $top_srcdir overrides).
std::string protocol_md_path()
{
    const char *env = std::getenv("top_srcdir");
    return std::string(env != nullptr ? env : SRCNIC_TOP_SRCDIR) + "/src/wire/PROTOCOL.md";
}

struct FieldRow {
    size_t offset;   // bytes from the start of the header
    size_t bytes;    // size of the field
};

// Every field of PacketHeader: name, offset and size as the compiler lays them out.
#define WIRE_FIELD(_f) {#_f, FieldRow{offsetof(PacketHeader, _f), sizeof(PacketHeader::_f)}}
const std::map<std::string, FieldRow> kStructFields = {
    WIRE_FIELD(version),  WIRE_FIELD(opcode),      WIRE_FIELD(flags),    WIRE_FIELD(job_key),
    WIRE_FIELD(src_nic),  WIRE_FIELD(dst_nic),     WIRE_FIELD(src_conn), WIRE_FIELD(dst_conn),
    WIRE_FIELD(psn),      WIRE_FIELD(ack_psn),     WIRE_FIELD(sack),     WIRE_FIELD(src_qpn),
    WIRE_FIELD(dst_qpn),  WIRE_FIELD(msg_len),     WIRE_FIELD(imm),      WIRE_FIELD(addr),
    WIRE_FIELD(rkey),     WIRE_FIELD(req_psn),     WIRE_FIELD(payload_len), WIRE_FIELD(pad),
    WIRE_FIELD(reserved), WIRE_FIELD(crc),         WIRE_FIELD(stream), WIRE_FIELD(auth),
};
#undef WIRE_FIELD

// The cells of a Markdown table row "| a | b | c |", trimmed.
std::vector<std::string> cells(const std::string &line)
{
    std::vector<std::string> out;
    std::stringstream ss(line);
    std::string cell;
    std::getline(ss, cell, '|');   // before the first bar
    while (std::getline(ss, cell, '|')) {
        const size_t b = cell.find_first_not_of(' ');
        const size_t e = cell.find_last_not_of(' ');
        out.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
    }
    if (!out.empty() && out.back().empty()) {
        out.pop_back();   // after the last bar
    }
    return out;
}

TEST(wire_header, layout__protocol_md_table_matches_the_struct)
{
    std::ifstream in(protocol_md_path());
    ASSERT_TRUE(in) << "cannot read " << protocol_md_path();
    std::string line;
    bool title_checked = false;
    // The title names the wire version.
    while (std::getline(in, line)) {
        if (line.rfind("# ", 0) == 0) {
            EXPECT_NE(std::string::npos, line.find("version " + std::to_string(kWireVersion)))
                << "PROTOCOL.md's title does not name version " << unsigned(kWireVersion) << ": " << line;
            title_checked = true;
            break;
        }
    }
    EXPECT_TRUE(title_checked);
    while (std::getline(in, line) && line.rfind("### 2.1", 0) != 0) {
    }
    ASSERT_FALSE(in.eof()) << "no section 2.1 in PROTOCOL.md";
    // The table: a header row (offset | field | bytes | meaning), a rule, then one row a field.
    std::vector<std::pair<std::string, FieldRow>> rows;
    bool in_table = false;
    while (std::getline(in, line)) {
        if (line.rfind("|", 0) != 0) {
            if (in_table) {
                break;
            }
            continue;
        }
        const std::vector<std::string> c = cells(line);
        if (!in_table) {
            ASSERT_GE(c.size(), 3u) << line;
            ASSERT_EQ("offset", c[0]) << line;
            ASSERT_EQ("field", c[1]) << line;
            ASSERT_EQ("bytes", c[2]) << line;
            in_table = true;
            std::getline(in, line);   // the rule
            continue;
        }
        ASSERT_GE(c.size(), 3u) << line;
        char *end;
        const size_t offset = std::strtoul(c[0].c_str(), &end, 10);
        ASSERT_EQ('\0', *end) << "offset of: " << line;
        const size_t bytes = std::strtoul(c[2].c_str(), &end, 10);
        ASSERT_EQ('\0', *end) << "size of: " << line;
        rows.push_back({c[1], FieldRow{offset, bytes}});
    }
    ASSERT_EQ(kStructFields.size(), rows.size()) << "PROTOCOL.md §2.1 and PacketHeader list "
                                                    "different numbers of fields";
    size_t next = 0;
    for (const auto &row : rows) {
        const auto it = kStructFields.find(row.first);
        ASSERT_NE(kStructFields.end(), it) << "PROTOCOL.md §2.1 names a field PacketHeader lacks: "
                                           << row.first;
        EXPECT_EQ(it->second.offset, row.second.offset) << row.first << ": offset";
        EXPECT_EQ(it->second.bytes, row.second.bytes) << row.first << ": size";
        EXPECT_EQ(next, row.second.offset) << row.first << ": the rows leave a gap or overlap";
        next = row.second.offset + row.second.bytes;
    }
    EXPECT_EQ(sizeof(PacketHeader), next) << "the table does not end where the header does";
}

// --- the field checks ---

// A SEND header of the test's job, every other field zero.
PacketHeader send_header()
{
    PacketHeader h;
    std::memset(&h, 0, sizeof(h));
    h.version = kWireVersion;
    h.opcode = static_cast<uint8_t>(Opcode::kSEND);
    h.job_key = kJobKey;
    return h;
}

TEST(wire_header, check_fields__syn_or_auth_on_a_packet_naming_a_connection_is_bad_flags)
{
    PacketHeader h = send_header();
    // dst_conn 0: SYN and a proof are what opens a connection
    h.flags = kFlagSyn;
    h.auth = 0x1234;
    EXPECT_EQ(HeaderError::kOk, check_fields(h, kJobKey));
    // naming a connection: neither may be set
    h.dst_conn = 0x00010001;
    EXPECT_EQ(HeaderError::kBadFlags, check_fields(h, kJobKey));
    h.flags = 0;
    EXPECT_EQ(HeaderError::kBadFlags, check_fields(h, kJobKey));
    h.auth = 0;
    EXPECT_EQ(HeaderError::kOk, check_fields(h, kJobKey));
    h.flags = kFlagSyn;
    EXPECT_EQ(HeaderError::kBadFlags, check_fields(h, kJobKey));
}

TEST(wire_header, check_fields__xack_only_on_a_packet_naming_a_connection_and_a_dci)
{
    PacketHeader h = send_header();
    h.dst_conn = 0x00010001;
    h.flags = kFlagXack;
    h.auth = make_xack(0x00020003, 7);
    EXPECT_EQ(HeaderError::kOk, check_fields(h, kJobKey));
    EXPECT_EQ(0x00020003u, xack_conn(h.auth));
    EXPECT_EQ(7u, xack_psn(h.auth));
    // no DCI named
    h.auth = make_xack(0, 7);
    EXPECT_EQ(HeaderError::kBadFlags, check_fields(h, kJobKey));
    // a SYN's auth is its proof: XACK is not for it
    h.auth = make_xack(0x00020003, 7);
    h.dst_conn = 0;
    h.flags = kFlagSyn | kFlagXack;
    EXPECT_EQ(HeaderError::kBadFlags, check_fields(h, kJobKey));
    h.flags = kFlagXack;
    EXPECT_EQ(HeaderError::kBadFlags, check_fields(h, kJobKey));
    // on a connection's packet, SYN is still refused
    h.dst_conn = 0x00010001;
    h.flags = kFlagXack | kFlagSyn;
    EXPECT_EQ(HeaderError::kBadFlags, check_fields(h, kJobKey));
}

// flag passes on a DC stream's packet of direction `from` (kFlagDcInit or kFlagDcTarget) and is
// BAD_FLAGS on the other direction's and on a packet of no stream.
void expect_flag_only_from(uint16_t flag, uint16_t from)
{
    PacketHeader h = send_header();
    h.dst_conn = 0x00010001;
    h.stream = 4;
    h.flags = static_cast<uint16_t>(from | flag);
    EXPECT_EQ(HeaderError::kOk, check_fields(h, kJobKey));
    h.flags = static_cast<uint16_t>((kFlagsDc & ~from) | flag);
    EXPECT_EQ(HeaderError::kBadFlags, check_fields(h, kJobKey));
    h.stream = 0;
    h.flags = flag;
    EXPECT_EQ(HeaderError::kBadFlags, check_fields(h, kJobKey));
}

TEST(wire_header, check_fields__dc_release_only_from_a_dc_target)
{
    // an initiator's packet, or a connection's, asks nothing of the kind
    expect_flag_only_from(kFlagDcRelease, kFlagDcTarget);
}

TEST(wire_header, check_fields__dc_reverse_only_from_a_dci)
{
    // a target context's packet, or a connection's, offers nothing of the kind
    expect_flag_only_from(kFlagDcReverse, kFlagDcInit);
}

TEST(wire_header, check_fields__pad_without_payload_is_bad_length)
{
    PacketHeader h = send_header();
    h.pad = 3;
    EXPECT_EQ(HeaderError::kBadLength, check_fields(h, kJobKey));
    h.payload_len = 1;
    EXPECT_EQ(HeaderError::kOk, check_fields(h, kJobKey));
    // the byte after it stays reserved
    h.reserved = 1;
    EXPECT_EQ(HeaderError::kBadFlags, check_fields(h, kJobKey));
}

// --- check_header_placing ---

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

// Pad (PROTOCOL.md §2.3): counted in the length, covered by the checksum, never placed.
TEST(wire_header, check_header_placing__pad_is_checked_and_not_placed)
{
    for (uint32_t pad : {1u, 5u, kWirePadMax}) {
        const std::vector<uint8_t> d = send_datagram(1367, static_cast<uint8_t>(pad));
        Placing p;
        ASSERT_EQ(HeaderError::kOk, p.run(d)) << pad;
        EXPECT_EQ(p.target.data() + 1, p.placed);
        EXPECT_EQ(0, std::memcmp(p.target.data() + 1, d.data() + sizeof(PacketHeader), 1367));
        EXPECT_EQ(0xee, p.target[1368]) << "placed pad bytes: " << pad;
        EXPECT_EQ(pad, p.h.pad);

        std::vector<uint8_t> flipped = d;
        flipped.back() ^= 0x01;   // a pad byte
        EXPECT_EQ(HeaderError::kBadChecksum, p.run(flipped)) << pad;
        EXPECT_EQ(nullptr, p.placed);

        // the pad counts in the length: one byte short is truncated, one more is trailing
        EXPECT_EQ(HeaderError::kTruncated,
                  check_header(d.data(), static_cast<uint32_t>(d.size() - 1), kJobKey)) << pad;
        std::vector<uint8_t> longer = d;
        longer.push_back(0);
        EXPECT_EQ(HeaderError::kBadLength,
                  check_header(longer.data(), static_cast<uint32_t>(longer.size()), kJobKey)) << pad;
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
