// libFuzzer target for the receive path: feeds each input to one Nic as datagrams from raw
// peers on a loopback fabric, half of them rebuilt into packets that pass the CRC and job-key
// checks, so that rx demux, the responder and the completer are reached with hostile headers.
//
// Input: records, each ctl (1 byte), len (2 bytes, little-endian), body (len bytes, cut short
// at the end of the input). ctl bit 0 clear: the body is sent as it is. Bit 0 set: the body is
// a header (zero-padded to 104 bytes) and payload that is fixed up and sealed:
//   bits 1-2  which of the four raw peers sends it
//   bit 3     dst_conn = the Nic's connection id as that peer learned it
//   bit 4     rkey/addr/msg_len aimed at a registered region (else as given)
//   bit 5     dst_qpn = the Nic's QP; a SEND becomes a whole single-packet message, a READ_RESP
//             a segment of the Nic's READ
//   bit 6     psn/ack_psn/req_psn follow the live sequence numbers (else as given)
//   bit 7     leave dst_nic as given (else the Nic's incarnation)
// and the header's auth field as given chooses the proof (PROTOCOL.md §7): with dst_conn 0,
// auth % 4 of 0 or 1 makes it the valid proof of the Nic's secret (computed last, over the
// sealed header), 2 keeps it as given, 3 sends none; with a dst_conn, auth % 8 == 7 keeps it
// (and SYN) as given, anything else clears both, as a real peer sends them.
// Every input starts with new incarnations of the raw peers, so whatever connections earlier
// inputs left are failed and reopened: the Nic's state stays bounded and inputs independent.
// The Nic's own SYN packets to peer 0 must carry a valid proof of that peer's secret.
#include "core/log.h"
#include "link/loopback_link.h"
#include "nic/nic.h"
#include "wire/auth.h"
#include "wire/header.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

using namespace srcnic;

namespace {

constexpr uint32_t kMtu = 1024;           // datagram bytes of the fabric
constexpr uint32_t kJobKey = 0x5eed;
constexpr unsigned kPeers = 4;            // raw peers (distinct addresses)
constexpr uint32_t kPeerQpn = 9;          // QP number the Nic's requests are sent to
constexpr unsigned kRecvBufs = 8;         // receive buffers kept posted
constexpr uint32_t kRegionLen = 4096;     // bytes of each registered region
constexpr unsigned kMaxRecords = 64;      // datagrams per input
constexpr unsigned kProgressAfter = 4;    // progress calls after the last datagram
constexpr uint32_t kReadLen = 2000;       // bytes of the Nic's READ from peer 0 (3 segments)
constexpr uint32_t kSegPayload = kMtu - sizeof(PacketHeader);

const Opcode kOpcodes[] = {Opcode::kSEND,    Opcode::kWRITE,    Opcode::kREAD_REQ,
                           Opcode::kREAD_RESP, Opcode::kERR_RESP, Opcode::kNOP,
                           Opcode::kACK,     Opcode::kNAK,      Opcode::kRST,
                           Opcode::kDC_CLOSE, Opcode::kCLOSE};

void discard_log(LogLevel, const char *, int, const char *, void *) {}

// What a raw peer has learned from the Nic's packets during the current input.
struct PeerState {
    std::unique_ptr<Link> link;
    uint64_t incarnation = 0;
    uint64_t secret = 0;         // the secret its address publishes (the Nic proves it); the
                                 // same for every incarnation, so that a connection an earlier
                                 // input left can still be checked
    uint32_t conn_id = 0;        // its own connection id (src_conn)
    uint32_t nic_conn = 0;       // the Nic's id (src_conn of the Nic's packets)
    uint32_t next_psn = 1;       // next PSN it sends
    uint32_t nic_next = 1;       // after the highest sequenced PSN received from the Nic
    uint32_t nic_req_psn[4] = {}; // first PSNs of the Nic's latest requests (ring)
    unsigned nic_reqs = 0;        // requests seen
};

struct World {
    std::shared_ptr<LoopbackFabric> fabric;
    std::unique_ptr<Nic> nic;
    Qp *qp = nullptr;
    PeerState peers[kPeers];
    uint64_t generation = 0;
    srcnic_mr_t *mr_rw = nullptr;
    srcnic_mr_t *mr_ro = nullptr;
    std::vector<uint8_t> region_rw = std::vector<uint8_t>(kRegionLen);
    std::vector<uint8_t> region_ro = std::vector<uint8_t>(kRegionLen);
    std::vector<uint8_t> recv_bufs[kRecvBufs];
    std::vector<uint8_t> send_buf = std::vector<uint8_t>(3000, 0x5a);
    std::vector<uint8_t> read_buf = std::vector<uint8_t>(kReadLen);
    uint8_t rx[kMtu];

    World()
    {
        set_log_level(LogLevel::kTrace);   // every to_string() runs on hostile headers
        set_log_sink(discard_log, nullptr);
        if (LoopbackFabric::create(kMtu, 1024, &fabric) != SRCNIC_OK) {
            std::abort();
        }
        std::unique_ptr<Link> link;
        srcnic_config_t config;
        srcnic_config_init(&config);
        config.window = 16;
        config.rto_us = 1000;
        config.rto_max_us = 4000;
        config.retry_count = 4;
        config.rnr_delay_us = 10;
        config.max_connections = 8;
        config.dc_targets = 2;
        config.max_inflight = 32;
        config.rx_buffers = 64;
        config.job_key = kJobKey;
        srcnic_qp_config_t qc;
        srcnic_qp_config_init(&qc);
        qc.sq_size = 16;
        qc.rq_size = 16;
        if (fabric->open_link(&link) != SRCNIC_OK ||
            Nic::create(config, std::move(link), &nic) != SRCNIC_OK ||
            nic->qp_create(qc, &qp) != SRCNIC_OK ||
            nic->mr_reg(region_rw.data(), kRegionLen,
                        SRCNIC_ACCESS_REMOTE_READ | SRCNIC_ACCESS_REMOTE_WRITE, &mr_rw) != SRCNIC_OK ||
            nic->mr_reg(region_ro.data(), kRegionLen, SRCNIC_ACCESS_REMOTE_READ, &mr_ro) != SRCNIC_OK) {
            std::abort();
        }
        for (unsigned k = 0; k < kPeers; ++k) {
            if (fabric->open_link(&peers[k].link) != SRCNIC_OK) {
                std::abort();
            }
            peers[k].conn_id = 0x00010001u + k;
            peers[k].secret = 0x5ec7e70000000001ull + 2 * k;
        }
        for (unsigned i = 0; i < kRecvBufs; ++i) {
            recv_bufs[i].resize(i % 2 ? 64 : 2048);
            post_recv(i);
        }
    }

    void post_recv(unsigned i)
    {
        srcnic_recv_wqe_t r = {};
        r.wr_id = i;
        r.addr = reinterpret_cast<uint64_t>(recv_bufs[i].data());
        r.length = static_cast<uint32_t>(recv_bufs[i].size());
        if (qp->post_recv(r) != SRCNIC_OK) {
            std::abort();   // each buffer is posted once at a time: the ring cannot be full
        }
    }

    srcnic_nic_addr_t peer_addr(unsigned k) const
    {
        srcnic_nic_addr_t a = {};
        const LinkAddr &la = peers[k].link->local_addr();
        a.family = la.family;
        a.port = la.port;
        a.scope_id = la.scope_id;
        std::memcpy(a.ip, la.ip, sizeof(a.ip));
        a.incarnation = peers[k].incarnation;
        a.secret = peers[k].secret;
        return a;
    }

    // New incarnations for every raw peer; the Nic's requests to peer 0 for this input.
    void begin_input()
    {
        ++generation;
        for (unsigned k = 0; k < kPeers; ++k) {
            PeerState &p = peers[k];
            p.incarnation = 0xf0220000000000ull + generation * kPeers + k;
            p.nic_conn = 0;
            p.next_psn = 1;
            p.nic_next = 1;
            std::memset(p.nic_req_psn, 0, sizeof(p.nic_req_psn));
            p.nic_reqs = 0;
        }
        srcnic_dest_t dest;
        if (qp->outstanding() > kRecvBufs + 8 ||
            nic->dest_create(peer_addr(0), kPeerQpn, &dest) != SRCNIC_OK) {
            return;
        }
        srcnic_wqe_t w = {};
        w.wr_id = 100;
        w.opcode = SRCNIC_OP_SEND;
        w.dest = dest;
        w.num_sge = 1;
        w.u.sge[0].addr = reinterpret_cast<uint64_t>(send_buf.data());
        w.u.sge[0].length = static_cast<uint32_t>(send_buf.size());
        qp->post_send(w);
        w.wr_id = 101;
        w.opcode = SRCNIC_OP_READ;
        w.remote_addr = 0x1000;
        w.rkey = 0x77;
        w.u.sge[0].addr = reinterpret_cast<uint64_t>(read_buf.data());
        w.u.sge[0].length = kReadLen;
        qp->post_send(w);
    }

    // One progress call; reads what the Nic sent to each peer and takes its completions.
    void progress()
    {
        nic->progress();
        for (unsigned k = 0; k < kPeers; ++k) {
            PeerState &p = peers[k];
            for (;;) {
                RxDatagram slot;
                slot.buf = rx;
                slot.capacity = sizeof(rx);
                if (p.link->rx_burst(&slot, 1) == 0) {
                    break;
                }
                if (check_header(rx, slot.len, kJobKey) != HeaderError::kOk) {
                    std::abort();   // the Nic must only emit valid packets
                }
                PacketHeader h;
                std::memcpy(&h, rx, sizeof(h));
                if (h.dst_conn == 0 &&
                    h.auth != syn_proof(nic_key(p.secret, h.dst_nic), h, slot.src)) {
                    std::abort();   // a SYN the peer would refuse: no proof of its secret
                }
                if (h.src_conn != 0) {
                    p.nic_conn = h.src_conn;
                }
                if (opcode_info(h.opcode).sequenced) {
                    if (!psn_before(h.psn, p.nic_next)) {
                        p.nic_next = h.psn + 1;
                    }
                    if ((h.flags & kFlagFirst) &&
                        (h.opcode == static_cast<uint8_t>(Opcode::kSEND) ||
                         h.opcode == static_cast<uint8_t>(Opcode::kREAD_REQ))) {
                        p.nic_req_psn[p.nic_reqs++ % 4] = h.psn;
                    }
                }
            }
        }
        srcnic_cqe_t cqes[16];
        unsigned n;
        while ((n = qp->poll_cq(cqes, 16)) != 0) {
            for (unsigned i = 0; i < n; ++i) {
                if (cqes[i].opcode == SRCNIC_OP_RECV) {
                    if (cqes[i].wr_id >= kRecvBufs) {
                        std::abort();
                    }
                    post_recv(static_cast<unsigned>(cqes[i].wr_id));
                }
            }
        }
    }

    // Rebuilds body into a packet of peer k that passes the header checks.
    std::vector<uint8_t> fix_up(uint8_t ctl, const uint8_t *body, size_t len)
    {
        PeerState &p = peers[(ctl >> 1) & 3];
        PacketHeader h;
        std::memset(&h, 0, sizeof(h));
        std::memcpy(&h, body, std::min(len, sizeof(h)));
        const uint8_t *payload = body + std::min(len, sizeof(h));
        size_t payload_len = len > sizeof(h) ? std::min<size_t>(len - sizeof(h), kMtu - sizeof(h)) : 0;

        const Opcode op = kOpcodes[h.opcode % (sizeof(kOpcodes) / sizeof(kOpcodes[0]))];
        const OpcodeInfo &info = opcode_info(static_cast<uint8_t>(op));
        h.version = kWireVersion;
        h.opcode = static_cast<uint8_t>(op);
        h.flags &= kFlagsKnown;
        h.job_key = kJobKey;
        h.src_nic = p.incarnation;
        if (!(ctl & 0x80)) {
            h.dst_nic = nic->addr().incarnation;
        }
        if (h.src_conn % 4 != 0) {
            h.src_conn = p.conn_id;
        }
        if (ctl & 0x08) {
            h.dst_conn = p.nic_conn;
            if (p.nic_conn == 0) {
                h.flags |= kFlagSyn;
            }
        }
        if (!info.has_payload) {
            payload_len = 0;
        }
        if (ctl & 0x10) {
            const bool rw = (h.addr & 1) == 0;
            const uint64_t base = reinterpret_cast<uint64_t>(rw ? region_rw.data() : region_ro.data());
            h.rkey = (rw ? mr_rw : mr_ro)->rkey ^ (h.rkey % 17 == 0 ? h.rkey >> 8 : 0);
            h.addr = base + (h.addr >> 1) % (kRegionLen + 64) - (h.addr % 5 == 0 ? 32 : 0);
            h.msg_len %= kRegionLen + 2 * kMtu;
        }
        if (ctl & 0x20) {
            h.dst_qpn = qp->qpn();
            if (op == Opcode::kSEND) {
                h.flags |= kFlagFirst | kFlagLast;
                h.msg_len = static_cast<uint32_t>(payload_len);
                h.addr = 0;
            } else if (op == Opcode::kREAD_RESP) {
                // A segment of the Nic's READ: its length, a segment offset, a fitting payload.
                const uint32_t seg = static_cast<uint32_t>(h.addr % 3);
                h.msg_len = kReadLen;
                h.addr = seg * kSegPayload;
                payload_len = std::min<size_t>(payload_len, std::min(kSegPayload, kReadLen - seg * kSegPayload));
                h.flags = static_cast<uint16_t>((h.flags & ~(kFlagFirst | kFlagLast)) |
                                                (seg == 0 ? kFlagFirst : 0) |
                                                (h.addr + payload_len == kReadLen ? kFlagLast : 0));
            }
        }
        if (ctl & 0x40) {
            if (info.sequenced) {
                h.psn = p.next_psn++ - (h.psn % 8 == 7 ? 1 : 0);
            } else if (op == Opcode::kNAK) {
                h.psn = p.nic_next - 1 - h.psn % 2;
            } else {
                h.psn = p.next_psn;
            }
            h.ack_psn = p.nic_next - h.ack_psn % 3;
            h.req_psn = p.nic_req_psn[(p.nic_reqs - 1 - h.req_psn % 4) % 4];
        }
        // Some of the bytes after a payload may be pad (PROTOCOL.md §2.3), never all of them.
        h.pad = payload_len > 1 ? static_cast<uint8_t>(h.pad % std::min<size_t>(payload_len, 8)) : 0;
        payload_len -= h.pad;
        h.payload_len = static_cast<uint16_t>(payload_len);
        h.reserved = 0;
        // DC packets (either flag) name one of a few streams, so that streams open, go on, are
        // evicted and come back (both flags, or neither with a stream, stay malformed).
        h.stream = (h.flags & kFlagsDc) != 0 ? 1 + h.imm % 4 : 0;
        if (h.dst_conn == 0) {
            switch (h.auth % 4) {
            case 0:
            case 1: h.auth = syn_proof(nic_key(nic->addr().secret, nic->addr().incarnation), h,
                                       p.link->local_addr()); break;
            case 2: break;
            default: h.auth = 0; break;
            }
        } else if (h.flags & kFlagXack) {
            // An acknowledgement of one of the Nic's DC streams (§8.7): naming the connection
            // the Nic uses to this peer (not a DCI) or any id, at a PSN near what it sent.
            const uint32_t dci = (h.auth & 1) ? p.nic_conn : static_cast<uint32_t>(h.auth >> 8);
            h.auth = make_xack(dci, p.nic_next - static_cast<uint32_t>(h.auth >> 40) % 3);
            h.flags &= static_cast<uint16_t>(~kFlagSyn);
        } else if (h.auth % 8 != 7) {
            h.auth = 0;
            h.flags &= static_cast<uint16_t>(~kFlagSyn);
        }
        const size_t body_len = payload_len + h.pad;
        struct iovec iov = {const_cast<uint8_t *>(payload), body_len};
        seal_header(&h, &iov, 1);
        std::vector<uint8_t> d(sizeof(h) + body_len);
        std::memcpy(d.data(), &h, sizeof(h));
        if (body_len != 0) {
            std::memcpy(d.data() + sizeof(h), payload, body_len);
        }
        return d;
    }

    // Invariant: the Nic takes every datagram sent to it. Its reorder buffers can hold at most
    // (window - 1) x kPeers of its 64 packet buffers, so a Nic that stops receiving has lost
    // buffers on some path.
    void check_reception()
    {
        uint64_t sent = 0;
        for (const PeerState &p : peers) {
            sent += p.link->stats().tx_datagrams;
        }
        for (unsigned i = 0; i < 10000 && nic->counter(SRCNIC_CNT_RX_PACKETS) < sent; ++i) {
            progress();
        }
        if (nic->counter(SRCNIC_CNT_RX_PACKETS) != sent) {
            std::fprintf(stderr, "rx_fuzz: the Nic received %llu of %llu datagrams: packet buffers lost\n",
                         static_cast<unsigned long long>(nic->counter(SRCNIC_CNT_RX_PACKETS)),
                         static_cast<unsigned long long>(sent));
            std::abort();
        }
    }

    void send(unsigned k, const uint8_t *bytes, size_t len)
    {
        struct iovec iov = {const_cast<uint8_t *>(bytes), len};
        TxDatagram d;
        d.iov = &iov;
        d.iovcnt = 1;
        const LinkAddr &nic_link = nic->link().local_addr();
        d.dst = nic_link;
        peers[k].link->tx_burst(&d, 1);
    }
};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static World *world = new World();   // lives for the whole run
    World &w = *world;
    w.begin_input();
    w.progress();
    size_t pos = 0;
    for (unsigned r = 0; r < kMaxRecords && size - pos >= 3; ++r) {
        const uint8_t ctl = data[pos];
        size_t len = static_cast<size_t>(data[pos + 1]) | static_cast<size_t>(data[pos + 2]) << 8;
        pos += 3;
        len = std::min(len, size - pos);
        const uint8_t *body = data + pos;
        pos += len;
        if (ctl & 1) {
            const std::vector<uint8_t> d = w.fix_up(ctl, body, len);
            w.send((ctl >> 1) & 3, d.data(), d.size());
        } else {
            w.send((ctl >> 1) & 3, body, std::min<size_t>(len, kMtu));
        }
        w.progress();
    }
    for (unsigned i = 0; i < kProgressAfter; ++i) {
        w.progress();
    }
    w.check_reception();
    return 0;
}
