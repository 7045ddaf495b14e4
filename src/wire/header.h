// The one packet header of the srcnic wire protocol (PROTOCOL.md §2), the opcode table that
// generates the packet types, and the checks every received header must pass.
#ifndef SRCNIC_WIRE_HEADER_H
#define SRCNIC_WIRE_HEADER_H

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <sys/uio.h>

#include "wire/crc32c.h"

namespace srcnic {

// 2: the header grew the auth field (PROTOCOL.md §7); 3: DC streams (the stream field, the DC
// flags and NAK reasons, PROTOCOL.md §8); 4: a packet may carry the acknowledgement of another
// DC stream in its auth field (kFlagXack, PROTOCOL.md §8.7); 5: pad bytes after the payload
// (the pad field, PROTOCOL.md §2.3); 6: a DC target context may ask its DCI to close the
// stream once quiet (kFlagDcRelease, PROTOCOL.md §8.3); 7: a DC target context may send
// requests back along its stream, and confirms the DC_CLOSE that ends such a stream (PROTOCOL.md
// §8.8). Other versions are dropped as
// DROP_BAD_VERSION.
constexpr uint8_t kWireVersion = 7;

// Most pad bytes a packet may carry after its payload (PROTOCOL.md §2.3): the pad field's range.
constexpr uint32_t kWirePadMax = 255;

enum class Opcode : uint8_t {
#define SRCNIC_OPCODE(_name, _value, _seq, _payload, _stage) k##_name = _value,
#include "wire/opcodes.def"
#undef SRCNIC_OPCODE
};

enum class RxStage : uint8_t { kResponder, kCompleter, kControl };

struct OpcodeInfo {
    const char *name;     // "SEND", ... ; nullptr for an unknown value
    bool sequenced;       // consumes a PSN
    bool has_payload;     // may carry payload
    RxStage stage;        // receive stage that handles it
};

// Table lookup by wire value; info.name == nullptr for values not in opcodes.def.
const OpcodeInfo &opcode_info(uint8_t value);

// Header flags (PROTOCOL.md §2.2).
enum : uint16_t {
    kFlagSyn = 1u << 0,     // sender does not know the receiver's connection id yet
    kFlagFirst = 1u << 1,   // first segment of a message
    kFlagLast = 1u << 2,    // last segment of a message
    kFlagAckReq = 1u << 3,  // receiver should acknowledge without delay
    kFlagDcInit = 1u << 4,  // a DC stream's packet from its initiator (DCI) to its target
    kFlagDcTarget = 1u << 5,   // a DC stream's packet from its target context to its initiator
    kFlagsDc = kFlagDcInit | kFlagDcTarget,
    kFlagXack = 1u << 6,    // auth carries an acknowledgement for one of the receiver's DCIs
                            // attached to the sender (xack_conn, xack_psn; PROTOCOL.md §8.7)
    kFlagDcRelease = 1u << 7,  // a DC target context to its DCI: new streams wait for a context
                               // here, close this one as soon as it is quiet (PROTOCOL.md §8.3)
    kFlagDcReverse = 1u << 8,  // a DCI to its target context: requests may come back along the
                               // stream, this DCI runs them (PROTOCOL.md §8.8)
    kFlagsKnown = kFlagSyn | kFlagFirst | kFlagLast | kFlagAckReq | kFlagsDc | kFlagXack |
                  kFlagDcRelease | kFlagDcReverse
};

// The header, little-endian on the wire, 104 bytes, no implicit padding (PROTOCOL.md §2.1 has
// the same table; tests/unit/wire_header_test.cc checks both against this struct):
//
//  0       8       16      24      32      40      48      56      63
// +-------+-------+---------------+-------------------------------+
// |version|opcode |     flags     |            job_key            |  0
// +-------+-------+---------------+-------------------------------+
// |                    src_nic (sender incarnation)               |  8
// +---------------------------------------------------------------+
// |                    dst_nic (receiver incarnation)             | 16
// +-------------------------------+-------------------------------+
// |           src_conn            |           dst_conn            | 24
// +-------------------------------+-------------------------------+
// |              psn              |            ack_psn            | 32
// +-------------------------------+-------------------------------+
// |                     sack (bitmap after ack_psn)               | 40
// +-------------------------------+-------------------------------+
// |            src_qpn            |            dst_qpn            | 48
// +-------------------------------+-------------------------------+
// |            msg_len            |              imm              | 56
// +-------------------------------+-------------------------------+
// |                              addr                             | 64
// +---------------------------------------------------------------+
// |                              rkey                             | 72
// +-------------------------------+---------------+---------------+
// |            req_psn            |  payload_len  |  pad  | rsvd  | 80
// +-------------------------------+---------------+-------+-------+
// |              crc              |            stream             | 88
// +-------------------------------+-------------------------------+
// |   auth (dst_conn 0: proof of the receiver's secret; XACK: ack)  | 96
// +---------------------------------------------------------------+
struct PacketHeader {
    uint8_t version;        // kWireVersion
    uint8_t opcode;         // Opcode
    uint16_t flags;         // kFlag*
    uint32_t job_key;       // must equal the receiver's job key (like an IB partition key)
    uint64_t src_nic;       // sender NIC incarnation id
    uint64_t dst_nic;       // receiver NIC incarnation id, as the sender knows it
    uint32_t src_conn;      // sender's connection id for this NIC pair
    uint32_t dst_conn;      // receiver's connection id, 0 while unknown (then kFlagSyn is set)
    uint32_t psn;           // sequenced: this packet's PSN; control: sender's next PSN
    uint32_t ack_psn;       // every PSN before this one from the receiver has been received
    uint64_t sack;          // bit i: PSN ack_psn + 1 + i has been received
    uint32_t src_qpn;       // requesting QP (SEND, WRITE, READ_REQ); answered QP (responses)
    uint32_t dst_qpn;       // target QP (SEND); requesting QP (responses)
    uint32_t msg_len;       // bytes in the whole message this segment belongs to
    uint32_t imm;           // SEND: immediate; ERR_RESP: status; NAK: reason (NakReason)
    uint64_t addr;          // WRITE, READ_REQ: remote address of this segment; READ_RESP: offset
    uint64_t rkey;          // WRITE, READ_REQ: remote key
    uint32_t req_psn;       // READ_RESP, ERR_RESP: first PSN of the request answered
    uint16_t payload_len;   // payload bytes after the header
    uint8_t pad;            // pad bytes after the payload (PROTOCOL.md §2.3)
    uint8_t reserved;       // zero
    uint32_t crc;           // CRC32C of header (crc = 0), payload and pad
    uint32_t stream;        // a DC stream's number (with one DC flag, never 0); otherwise zero
    uint64_t auth;          // dst_conn 0: SipHash-2-4 proof that the sender knows the receiver's
                            // secret (wire/auth.h, PROTOCOL.md §7); kFlagXack: a DC stream's
                            // acknowledgement (make_xack); otherwise zero
} __attribute__((packed));

// The auth field of a packet with kFlagXack (PROTOCOL.md §8.7): the id of one of the
// receiver's DCIs (never 0), and every PSN of its stream before xack_psn arrived here.
constexpr uint64_t make_xack(uint32_t dci, uint32_t psn)
{
    return static_cast<uint64_t>(dci) | static_cast<uint64_t>(psn) << 32;
}
constexpr uint32_t xack_conn(uint64_t auth) { return static_cast<uint32_t>(auth); }
constexpr uint32_t xack_psn(uint64_t auth) { return static_cast<uint32_t>(auth >> 32); }

static_assert(sizeof(PacketHeader) == 104, "the wire header is 104 bytes (PROTOCOL.md §2)");
// Every field where PROTOCOL.md §2.1 puts it (the unit test reads that table).
static_assert(offsetof(PacketHeader, version) == 0, "PROTOCOL.md §2.1");
static_assert(offsetof(PacketHeader, opcode) == 1, "PROTOCOL.md §2.1");
static_assert(offsetof(PacketHeader, flags) == 2, "PROTOCOL.md §2.1");
static_assert(offsetof(PacketHeader, job_key) == 4, "PROTOCOL.md §2.1");
static_assert(offsetof(PacketHeader, src_nic) == 8, "PROTOCOL.md §2.1");
static_assert(offsetof(PacketHeader, dst_nic) == 16, "PROTOCOL.md §2.1");
static_assert(offsetof(PacketHeader, src_conn) == 24, "PROTOCOL.md §2.1");
static_assert(offsetof(PacketHeader, dst_conn) == 28, "PROTOCOL.md §2.1");
static_assert(offsetof(PacketHeader, psn) == 32, "PROTOCOL.md §2.1");
static_assert(offsetof(PacketHeader, ack_psn) == 36, "PROTOCOL.md §2.1");
static_assert(offsetof(PacketHeader, sack) == 40, "PROTOCOL.md §2.1");
static_assert(offsetof(PacketHeader, src_qpn) == 48, "PROTOCOL.md §2.1");
static_assert(offsetof(PacketHeader, dst_qpn) == 52, "PROTOCOL.md §2.1");
static_assert(offsetof(PacketHeader, msg_len) == 56, "PROTOCOL.md §2.1");
static_assert(offsetof(PacketHeader, imm) == 60, "PROTOCOL.md §2.1");
static_assert(offsetof(PacketHeader, addr) == 64, "PROTOCOL.md §2.1");
static_assert(offsetof(PacketHeader, rkey) == 72, "PROTOCOL.md §2.1");
static_assert(offsetof(PacketHeader, req_psn) == 80, "PROTOCOL.md §2.1");
static_assert(offsetof(PacketHeader, payload_len) == 84, "PROTOCOL.md §2.1");
static_assert(offsetof(PacketHeader, pad) == 86, "PROTOCOL.md §2.1");
static_assert(offsetof(PacketHeader, reserved) == 87, "PROTOCOL.md §2.1");
static_assert(offsetof(PacketHeader, crc) == 88, "PROTOCOL.md §2.1");
static_assert(offsetof(PacketHeader, stream) == 92, "PROTOCOL.md §2.1");
static_assert(offsetof(PacketHeader, auth) == 96, "PROTOCOL.md §2.1");
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the wire is little-endian; a big-endian port must byte-swap PacketHeader");

// NAK reasons (imm of a NAK).
enum class NakReason : uint32_t {
    kRnr = 1,      // receiver not ready: no receive buffer (or no responder resources) for psn
    kUseDc = 2,    // the receiver's connection budget is spent: send to it over DC (§8.1)
    kDcBusy = 3,   // every DC target context is busy: resend psn later, as after kRnr (§8.3)
    kDcGone = 4,   // the DC target context named was evicted: resend from the oldest
                   // unacknowledged PSN with kFlagSyn (§8.4)
};

// What a CLOSE says (imm of a CLOSE): a connection is demoted only if both sides agree that
// nothing is in flight on it (PROTOCOL.md §8.6).
enum class CloseKind : uint32_t {
    kAsk = 0,      // may we close this connection? (psn: our next PSN, ack_psn: what we hold)
    kAgreed = 1,   // closed here: close it too
    kRefused = 2,  // something is in flight here: keep it
};

// The job key a receiver that serves several jobs passes to the checks below: any key passes
// the header stage, and each request is checked against its destination QP's (PROTOCOL.md §4).
constexpr int64_t kAnyJobKey = -1;

// Why a received datagram was dropped before reaching a connection (PROTOCOL.md §4).
enum class HeaderError : uint8_t {
    kOk,
    kTruncated,      // shorter than the header, or than header + payload_len + pad
    kBadVersion,
    kBadChecksum,
    kWrongJobKey,
    kUnknownOpcode,
    kBadFlags,       // unknown flag bits, reserved fields not zero, SYN with a dst_conn, or
                     // auth on a packet with a dst_conn
    kBadLength,      // payload on a type without payload, pad without payload, or trailing
                     // bytes
};

// Checks a received datagram's header (§4 steps 1-4): everything that needs no connection
// state. On kOk the payload is datagram[sizeof(PacketHeader) .. + payload_len).
HeaderError check_header(const uint8_t *datagram, uint32_t len, int64_t job_key);
// The same, handing the header out: *hdr is set (crc included) when the result is kOk.
HeaderError check_header(const uint8_t *datagram, uint32_t len, int64_t job_key,
                         PacketHeader *hdr);

// check_header in parts, for a receiver that checks a payload's CRC as it places it
// (rx_demux.cc): check_layout makes the checks check_header makes before the checksum
// (truncated, version, length; *hdr is set once the header is there), check_fields those it
// makes after (job key, opcode, flags, payload allowed), and header_crc starts the checksum:
// the CRC of the header with crc = 0, to extend over the payload. check_header is
// check_layout, then the checksum, then check_fields.
HeaderError check_layout(const uint8_t *datagram, uint32_t len, PacketHeader *hdr);
HeaderError check_fields(const PacketHeader &hdr, int64_t job_key);
uint32_t header_crc(PacketHeader hdr);

// check_header that also places the payload, in the same pass as its checksum (crc32c_copy), at
// where(hdr) once check_layout and check_fields passed (where returns nullptr: nowhere). The
// result is check_header's. *placed is where the payload went when the result is kOk, else
// nullptr; a payload whose checksum failed may have been written there. A datagram that never
// left this NIC's memory (a packet it sent itself, unsealed) has no checksum to check: sealed
// false skips it.
template <typename Where>
HeaderError check_header_placing(const uint8_t *datagram, uint32_t len, int64_t job_key,
                                 PacketHeader *hdr, Where &&where, uint8_t **placed,
                                 bool sealed = true)
{
    *placed = nullptr;
    const HeaderError err = check_layout(datagram, len, hdr);
    if (err != HeaderError::kOk) {
        return err;
    }
    const HeaderError fields = check_fields(*hdr, job_key);
    uint8_t *to = fields == HeaderError::kOk ? where(*hdr) : nullptr;
    const uint8_t *payload = datagram + sizeof(PacketHeader);
    if (!sealed) {
        if (to != nullptr && hdr->payload_len != 0) {
            std::memcpy(to, payload, hdr->payload_len);
        }
        *placed = to;
        return fields;
    }
    uint32_t crc = to != nullptr ? crc32c_copy(header_crc(*hdr), to, payload, hdr->payload_len)
                                 : crc32c(header_crc(*hdr), payload, hdr->payload_len);
    if (hdr->pad != 0) {
        crc = crc32c(crc, payload + hdr->payload_len, hdr->pad);
    }
    if (crc != hdr->crc) {
        return HeaderError::kBadChecksum;
    }
    *placed = to;
    return fields;
}

// Computes and stores the checksum of a packet given as header + payload pieces.
void seal_header(PacketHeader *hdr, const struct iovec *payload, size_t iovcnt);
// The same for a packet whose payload follows its header in memory: len bytes in all.
void seal_packet(PacketHeader *hdr, size_t len);

// One line for traces: "SEND psn=5 ack=3 conn=2->7 qp=1->4 len=100/4096 flags=FIRST|SYN".
std::string to_string(const PacketHeader &hdr);

const char *to_string(HeaderError err);

} // namespace srcnic

#endif
