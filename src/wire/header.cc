// Opcode table lookup, header checks on receive, sealing on send, and trace formatting.
#include "wire/header.h"

#include "wire/crc32c.h"

#include <cstdio>
#include <cstring>
#include <sys/uio.h>

namespace srcnic {

namespace {

struct OpcodeTable {
    OpcodeInfo entries[256];

    OpcodeTable() : entries()
    {
#define SRCNIC_OPCODE(_name, _value, _seq, _payload, _stage) \
    entries[_value] = OpcodeInfo{#_name, _seq != 0, _payload != 0, RxStage::k##_stage};
#include "wire/opcodes.def"
#undef SRCNIC_OPCODE
    }
};

const OpcodeTable kOpcodeTable;

} // namespace

const OpcodeInfo &opcode_info(uint8_t value)
{
    return kOpcodeTable.entries[value];
}

HeaderError check_header(const uint8_t *datagram, uint32_t len, int64_t job_key)
{
    PacketHeader hdr;
    return check_header(datagram, len, job_key, &hdr);
}

HeaderError check_layout(const uint8_t *datagram, uint32_t len, PacketHeader *hdr_p)
{
    PacketHeader &hdr = *hdr_p;
    if (len < sizeof(hdr)) {
        return HeaderError::kTruncated;
    }
    std::memcpy(&hdr, datagram, sizeof(hdr));
    if (hdr.version != kWireVersion) {
        return HeaderError::kBadVersion;
    }
    if (len < sizeof(hdr) + hdr.payload_len + hdr.pad) {
        return HeaderError::kTruncated;
    }
    if (len != sizeof(hdr) + hdr.payload_len + hdr.pad) {
        return HeaderError::kBadLength;
    }
    return HeaderError::kOk;
}

HeaderError check_fields(const PacketHeader &hdr, int64_t job_key)
{
    if (job_key != kAnyJobKey && hdr.job_key != job_key) {
        return HeaderError::kWrongJobKey;
    }
    const OpcodeInfo &info = opcode_info(hdr.opcode);
    if (info.name == nullptr) {
        return HeaderError::kUnknownOpcode;
    }
    if ((hdr.flags & ~kFlagsKnown) != 0 || hdr.reserved != 0) {
        return HeaderError::kBadFlags;
    }
    // A DC stream's packet has a stream number and one direction (PROTOCOL.md §8); any other
    // has neither.
    const uint16_t dc = hdr.flags & kFlagsDc;
    if ((dc == 0) != (hdr.stream == 0) || dc == kFlagsDc) {
        return HeaderError::kBadFlags;
    }
    // A packet that names the receiver's connection neither opens one (SYN) nor proves
    // anything (auth): PROTOCOL.md §2.2, §7. Its auth field is free for another stream's
    // acknowledgement (XACK, §8.7), which names a DCI (never 0); a SYN's holds its proof.
    if (hdr.dst_conn != 0 && ((hdr.flags & kFlagSyn) != 0 ||
                              (hdr.auth != 0 && (hdr.flags & kFlagXack) == 0))) {
        return HeaderError::kBadFlags;
    }
    if ((hdr.flags & kFlagXack) != 0 && (hdr.dst_conn == 0 || xack_conn(hdr.auth) == 0)) {
        return HeaderError::kBadFlags;
    }
    // Only a target context asks its DCI to close (§8.3); only a DCI takes requests back (§8.8).
    if ((hdr.flags & kFlagDcRelease) != 0 && (hdr.flags & kFlagDcTarget) == 0) {
        return HeaderError::kBadFlags;
    }
    if ((hdr.flags & kFlagDcReverse) != 0 && (hdr.flags & kFlagDcInit) == 0) {
        return HeaderError::kBadFlags;
    }
    if ((!info.has_payload && hdr.payload_len != 0) || (hdr.pad != 0 && hdr.payload_len == 0)) {
        return HeaderError::kBadLength;
    }
    return HeaderError::kOk;
}

uint32_t header_crc(PacketHeader hdr)
{
    hdr.crc = 0;
    return crc32c(0, &hdr, sizeof(hdr));
}

HeaderError check_header(const uint8_t *datagram, uint32_t len, int64_t job_key,
                         PacketHeader *hdr_p)
{
    uint8_t *placed;
    return check_header_placing(datagram, len, job_key, hdr_p,
                                [](const PacketHeader &) -> uint8_t * { return nullptr; }, &placed);
}

void seal_header(PacketHeader *hdr, const struct iovec *payload, size_t iovcnt)
{
    hdr->crc = 0;
    uint32_t crc = crc32c(0, hdr, sizeof(*hdr));
    for (size_t i = 0; i < iovcnt; ++i) {
        crc = crc32c(crc, payload[i].iov_base, payload[i].iov_len);
    }
    hdr->crc = crc;
}

void seal_packet(PacketHeader *hdr, size_t len)
{
    hdr->crc = 0;
    hdr->crc = crc32c(0, hdr, len);
}

std::string to_string(const PacketHeader &hdr)
{
    const OpcodeInfo &info = opcode_info(hdr.opcode);
    char flags[80] = "";
    static const struct {
        uint16_t bit;
        const char *name;
    } kNames[] = {{kFlagSyn, "SYN"}, {kFlagFirst, "FIRST"}, {kFlagLast, "LAST"},
                  {kFlagAckReq, "ACKREQ"}, {kFlagDcInit, "DC_INIT"}, {kFlagDcTarget, "DC_TARGET"},
                  {kFlagXack, "XACK"}, {kFlagDcRelease, "DC_RELEASE"},
                  {kFlagDcReverse, "DC_REVERSE"}};
    for (const auto &f : kNames) {
        if (hdr.flags & f.bit) {
            std::strncat(flags, flags[0] ? "|" : "", sizeof(flags) - std::strlen(flags) - 1);
            std::strncat(flags, f.name, sizeof(flags) - std::strlen(flags) - 1);
        }
    }
    char buf[352];
    std::snprintf(buf, sizeof(buf),
                  "%s psn=%u ack=%u sack=0x%llx conn=%u->%u nic=%llx->%llx qp=%u->%u "
                  "len=%u/%u imm=%u addr=0x%llx rkey=0x%llx req=%u auth=0x%llx flags=%s",
                  info.name ? info.name : "UNKNOWN", hdr.psn, hdr.ack_psn,
                  static_cast<unsigned long long>(hdr.sack), hdr.src_conn, hdr.dst_conn,
                  static_cast<unsigned long long>(hdr.src_nic),
                  static_cast<unsigned long long>(hdr.dst_nic), hdr.src_qpn, hdr.dst_qpn,
                  hdr.payload_len, hdr.msg_len, hdr.imm, static_cast<unsigned long long>(hdr.addr),
                  static_cast<unsigned long long>(hdr.rkey), hdr.req_psn,
                  static_cast<unsigned long long>(hdr.auth), flags[0] ? flags : "-");
    return buf;
}

const char *to_string(HeaderError err)
{
    switch (err) {
    case HeaderError::kOk: return "ok";
    case HeaderError::kTruncated: return "truncated";
    case HeaderError::kBadVersion: return "bad version";
    case HeaderError::kBadChecksum: return "bad checksum";
    case HeaderError::kWrongJobKey: return "wrong job key";
    case HeaderError::kUnknownOpcode: return "unknown opcode";
    case HeaderError::kBadFlags: return "bad flags or reserved bits";
    case HeaderError::kBadLength: return "bad length";
    }
    return "?";
}

} // namespace srcnic
