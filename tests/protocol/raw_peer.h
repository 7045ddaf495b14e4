// Protocol-tier harness: one Nic on a loopback fabric and a "raw peer", a plain Link on the same
// fabric through which a test sends hand-built packets and reads back what the Nic emits.
#ifndef SRCNIC_TESTS_PROTOCOL_RAW_PEER_H
#define SRCNIC_TESTS_PROTOCOL_RAW_PEER_H

#include "core/clock.h"
#include "link/loopback_link.h"
#include "link/nic_harness.h"
#include "nic/nic.h"
#include "wire/auth.h"
#include "wire/header.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace srcnic {
namespace test {

// One datagram the Nic emitted, parsed.
struct Packet {
    PacketHeader h;                // its header
    std::vector<uint8_t> payload;  // the payload_len bytes after it
};

// A peer that is not a Nic: it sends whatever header a test builds and keeps no protocol state
// except the identity it presents (incarnation, connection id, a secret of its own) and the
// Nic's identity as it would know it from the Nic's address (incarnation and secret).
class RawPeer {
public:
    RawPeer(LoopbackFabric &fabric, const srcnic_nic_addr_t &nic, uint32_t job_key,
            uint64_t incarnation, uint32_t conn_id)
        : nic_incarnation_(nic.incarnation), nic_key_(nic_key(nic.secret, nic.incarnation)),
          job_key_(job_key), incarnation_(incarnation), secret_(secret_of(incarnation)),
          conn_id_(conn_id)
    {
        EXPECT_EQ(SRCNIC_OK, fabric.open_link(&link_));
        nic_addr_.family = nic.family;
        nic_addr_.port = nic.port;
        nic_addr_.scope_id = nic.scope_id;
        std::memcpy(nic_addr_.ip, nic.ip, sizeof(nic_addr_.ip));
    }

    // A header from this peer to the Nic: version, job key, both incarnations, src_conn; the
    // connection id of the Nic's side (dst_conn) is 0 until the test sets nic_conn(); ack_psn 1
    // (nothing received from the Nic). The caller sets the rest.
    PacketHeader header(Opcode op, uint32_t psn, uint16_t flags) const
    {
        PacketHeader h;
        std::memset(&h, 0, sizeof(h));
        h.version = kWireVersion;
        h.opcode = static_cast<uint8_t>(op);
        h.flags = flags;
        h.job_key = job_key_;
        h.src_nic = incarnation_;
        h.dst_nic = nic_incarnation_;
        h.src_conn = conn_id_;
        h.dst_conn = nic_conn_;
        h.psn = psn;
        h.ack_psn = 1;
        return h;
    }

    // Header + payload as a datagram: payload_len set, CRC sealed.
    static std::vector<uint8_t> datagram(PacketHeader h, const std::vector<uint8_t> &payload)
    {
        h.payload_len = static_cast<uint16_t>(payload.size());
        struct iovec iov = {const_cast<uint8_t *>(payload.data()), payload.size()};
        seal_header(&h, &iov, 1);
        std::vector<uint8_t> d(sizeof(h) + payload.size());
        std::memcpy(d.data(), &h, sizeof(h));
        if (!payload.empty()) {
            std::memcpy(d.data() + sizeof(h), payload.data(), payload.size());
        }
        return d;
    }

    // The proof of the Nic's secret that header h (payload_len as it will be sent) needs
    // when it comes from this peer (PROTOCOL.md §7.1).
    uint64_t proof(const PacketHeader &h) const { return syn_proof(nic_key_, h, local_addr()); }

    // Sends header + payload with payload_len and CRC filled in; a header with dst_conn 0 and
    // auth 0 gets the proof the Nic expects (send_bytes(datagram(...)) sends it without, a
    // header with auth set keeps it).
    void send(PacketHeader h, const std::vector<uint8_t> &payload = {})
    {
        if (h.dst_conn == 0 && h.auth == 0) {
            h.payload_len = static_cast<uint16_t>(payload.size());
            h.auth = proof(h);
        }
        send_bytes(datagram(h, payload));
    }

    // Sends bytes exactly as given (to break the header on purpose).
    void send_bytes(const std::vector<uint8_t> &bytes)
    {
        struct iovec iov = {const_cast<uint8_t *>(bytes.data()), bytes.size()};
        TxDatagram d;
        d.iov = &iov;
        d.iovcnt = 1;
        d.dst = nic_addr_;
        ASSERT_EQ(1u, link_->tx_burst(&d, 1));
        ASSERT_EQ(0u, link_->stats().tx_errors) << "datagram of " << bytes.size() << " bytes refused";
    }

    // Everything the Nic has sent us so far, in order; each must pass the receive checks.
    std::vector<Packet> receive()
    {
        std::vector<Packet> out;
        for (;;) {
            RxDatagram slot;
            slot.buf = buf_;
            slot.capacity = sizeof(buf_);
            if (link_->rx_burst(&slot, 1) == 0) {
                return out;
            }
            EXPECT_EQ(nic_addr_, slot.src);
            const HeaderError err = check_header(buf_, slot.len, job_key_);
            EXPECT_EQ(HeaderError::kOk, err) << "the Nic emitted a bad packet: " << to_string(err);
            if (err != HeaderError::kOk) {
                continue;
            }
            Packet p;
            std::memcpy(&p.h, buf_, sizeof(p.h));
            if (p.h.dst_conn == 0) {
                // Its SYN packets prove our secret, from the Nic's own address.
                EXPECT_EQ(syn_proof(nic_key(secret_, incarnation_), p.h, slot.src), p.h.auth)
                    << "the Nic's SYN has no valid proof: " << to_string(p.h);
            }
            p.payload.assign(buf_ + sizeof(p.h), buf_ + sizeof(p.h) + p.h.payload_len);
            out.push_back(std::move(p));
        }
    }

    // This peer as a srcnic destination address, for Nic::dest_create.
    srcnic_nic_addr_t nic_addr() const
    {
        srcnic_nic_addr_t a = {};
        const LinkAddr &la = link_->local_addr();
        a.family = la.family;
        a.port = la.port;
        a.scope_id = la.scope_id;
        std::memcpy(a.ip, la.ip, sizeof(a.ip));
        a.incarnation = incarnation_;
        a.secret = secret_;
        return a;
    }

    // The secret a raw peer of this incarnation publishes in its address (fixed, for tests).
    static uint64_t secret_of(uint64_t incarnation) { return incarnation * 0x9e3779b97f4a7c15ull | 1; }

    const LinkAddr &local_addr() const { return link_->local_addr(); }
    uint64_t incarnation() const { return incarnation_; }
    uint32_t conn_id() const { return conn_id_; }
    // This peer's own connection id from now on (src_conn of later headers): a new connection.
    void conn_id(uint32_t id) { conn_id_ = id; }
    // The Nic's connection id as this peer knows it (dst_conn of later headers).
    void nic_conn(uint32_t id) { nic_conn_ = id; }
    uint32_t nic_conn() const { return nic_conn_; }

private:
    std::unique_ptr<Link> link_;
    LinkAddr nic_addr_;
    uint64_t nic_incarnation_;
    SipKey nic_key_;          // the Nic's proof key, from its address
    uint32_t job_key_;
    uint64_t incarnation_;
    uint64_t secret_;         // this peer's secret (secret_of(incarnation_))
    uint32_t conn_id_;
    uint32_t nic_conn_ = 0;
    uint8_t buf_[kLoopbackMaxMtu];
};

// A snapshot of every counter of a Nic, to assert on what changed since.
class Counters {
public:
    explicit Counters(const Nic &nic) : nic_(nic)
    {
        for (int c = 0; c < SRCNIC_CNT_LAST; ++c) {
            base_[c] = nic.counter(static_cast<srcnic_counter_t>(c));
        }
    }

    uint64_t delta(srcnic_counter_t c) const { return nic_.counter(c) - base_[c]; }

    // Names and deltas of the drop counters (DROP_*) that moved, except `expected`: "" if none.
    std::string other_drops(srcnic_counter_t expected) const
    {
        std::string s;
        for (int c = SRCNIC_CNT_DROP_TRUNCATED; c <= SRCNIC_CNT_DROP_BAD_RESPONSE; ++c) {
            const auto cnt = static_cast<srcnic_counter_t>(c);
            if (cnt != expected && delta(cnt) != 0) {
                s += std::string(srcnic_counter_name(cnt)) + "+" + std::to_string(delta(cnt)) + " ";
            }
        }
        return s;
    }

private:
    const Nic &nic_;
    uint64_t base_[SRCNIC_CNT_LAST];
};

// The fixture of the protocol tier: a Nic with one QP, and a raw peer.
class ProtocolTest : public ::testing::Test {
protected:
    static constexpr uint32_t kMtu = 1024;              // datagram bytes; 920 payload per packet
    static constexpr uint32_t kSegPayload = kMtu - sizeof(PacketHeader);
    // Datagrams of fixtures that test placing while checking: large enough for segments of
    // kCheckWhilePlacingMin bytes and more, which the receive path copies into place as it
    // checks their CRC.
    static constexpr uint32_t kPlacingMtu = 3 * kCheckWhilePlacingMin;
    static constexpr uint32_t kPlacingSeg = kPlacingMtu - sizeof(PacketHeader);
    static constexpr uint32_t kJobKey = 0x5eed;
    static constexpr uint32_t kWindow = 16;             // PSNs
    static constexpr uint32_t kRtoUs = 4000;            // fixed: rto_max_us = rto_us
    static constexpr uint64_t kPeerNic = 0xfeed0000beef0001ull;  // raw peer's incarnation
    static constexpr uint32_t kPeerConn = 0x00030007;   // raw peer's connection id
    static constexpr uint32_t kPeerQpn = 9;             // raw peer's QP number

    // The segments of a message of len bytes (their payload sizes in PSN order) are as few as
    // hold it at kSegPayload each, and of one size but the last, which is shorter by less than
    // their count (TxMsg::cut: runs of equal datagrams go out and come in as one).
    // The segments of a message of len bytes, as TxMsg::cut makes them: as few as hold it, of
    // one size but the last, shorter by less than their count and padded to their size
    // (PROTOCOL.md §2.3), so that every datagram of the message is the same length.
    static void expect_cut_evenly(size_t len, const std::vector<PacketHeader> &segs)
    {
        const size_t n = len <= kSegPayload ? 1 : (len + kSegPayload - 1) / kSegPayload;
        ASSERT_EQ(n, segs.size()) << len << " bytes";
        const uint32_t size = segs[0].payload_len;
        for (size_t i = 0; i + 1 < n; ++i) {
            EXPECT_EQ(size, segs[i].payload_len) << len << " bytes, segment " << i;
            EXPECT_EQ(0u, segs[i].pad) << len << " bytes, segment " << i;
        }
        EXPECT_LE(segs[n - 1].payload_len, size) << len << " bytes";
        EXPECT_LT(size - segs[n - 1].payload_len, n) << len << " bytes";
        EXPECT_EQ(size, segs[n - 1].payload_len + segs[n - 1].pad) << len << " bytes: last not padded";
    }

    static srcnic_config_t protocol_config()
    {
        srcnic_config_t config;
        srcnic_config_init(&config);
        config.window = kWindow;
        config.rto_us = kRtoUs;
        config.rto_max_us = kRtoUs;
        config.retry_count = 1000;
        config.peer_timeout_ms = 60000;
        config.rnr_delay_us = 100;
        config.max_connections = 8;
        config.max_inflight = 64;
        config.rx_buffers = 256;
        config.job_key = kJobKey;
        return config;
    }

    // The Nic's configuration; a test fixture may override it.
    virtual srcnic_config_t config() { return protocol_config(); }

    void SetUp() override { set_up(kMtu, 1024, nullptr); }

    // The Nic and the raw peer on a fabric of mtu-byte datagrams, queue_depth a link; the Nic's
    // link passes through wrap if given (a test's decorator).
    void set_up(uint32_t mtu, uint32_t queue_depth,
                const std::function<std::unique_ptr<Link>(std::unique_ptr<Link>)> &wrap)
    {
        ASSERT_EQ(SRCNIC_OK, LoopbackFabric::create(mtu, queue_depth, &fabric_));
        std::unique_ptr<Link> link;
        ASSERT_EQ(SRCNIC_OK, fabric_->open_link(&link));
        if (wrap) {
            link = wrap(std::move(link));
        }
        ASSERT_EQ(SRCNIC_OK, Nic::create(config(), std::move(link), &nic_));
        peer_.reset(new RawPeer(*fabric_, nic_->addr(), kJobKey, kPeerNic, kPeerConn));
        srcnic_qp_config_t qc;
        srcnic_qp_config_init(&qc);
        ASSERT_EQ(SRCNIC_OK, nic_->qp_create(qc, &qp_));
    }

    // Progresses the Nic, collecting what it emits, until a packet satisfies pred (true, *out
    // set) or the watchdog expires (false). Packets before it are appended to *skipped if given.
    bool await(const std::function<bool(const Packet &)> &pred, Packet *out,
               std::vector<Packet> *skipped = nullptr, double seconds = 5.0)
    {
        const uint64_t deadline = now_ns() + static_cast<uint64_t>(seconds * 1e9);
        for (;;) {
            while (!pending_.empty()) {
                Packet p = std::move(pending_.front());
                pending_.erase(pending_.begin());
                if (pred(p)) {
                    *out = std::move(p);
                    return true;
                }
                if (skipped != nullptr) {
                    skipped->push_back(std::move(p));
                }
            }
            if (now_ns() > deadline) {
                return false;
            }
            nic_->progress();
            pending_ = peer_->receive();
        }
    }

    // Awaits the next packet of opcode op.
    bool await_op(Opcode op, Packet *out, std::vector<Packet> *skipped = nullptr)
    {
        return await([op](const Packet &p) { return p.h.opcode == static_cast<uint8_t>(op); }, out,
                     skipped);
    }

    // Progresses the Nic for `us` microseconds (at least once) and returns what it emitted.
    std::vector<Packet> run_for(uint64_t us)
    {
        std::vector<Packet> got = std::move(pending_);
        pending_.clear();
        const uint64_t deadline = now_ns() + us * kNsPerUs;
        do {
            nic_->progress();
            for (Packet &p : peer_->receive()) {
                got.push_back(std::move(p));
            }
        } while (now_ns() < deadline);
        return got;
    }

    // Progresses the Nic until the call in which it has taken n more datagrams (watchdog 5 s)
    // and returns what it emitted up to the end of that call, nothing of a later one: what a
    // receive must send at once goes out in the progress call that received it.
    std::vector<Packet> progress_until_received(uint64_t n)
    {
        const uint64_t target = nic_->counter(SRCNIC_CNT_RX_PACKETS) + n;
        std::vector<Packet> got = std::move(pending_);
        pending_.clear();
        const uint64_t deadline = now_ns() + 5 * kNsPerSec;
        while (nic_->counter(SRCNIC_CNT_RX_PACKETS) < target && now_ns() < deadline) {
            nic_->progress();
            for (Packet &p : peer_->receive()) {
                got.push_back(std::move(p));
            }
        }
        EXPECT_GE(nic_->counter(SRCNIC_CNT_RX_PACKETS), target) << "watchdog: not received";
        return got;
    }

    static size_t count_op(const std::vector<Packet> &packets, Opcode op)
    {
        size_t n = 0;
        for (const Packet &p : packets) {
            n += p.h.opcode == static_cast<uint8_t>(op) ? 1 : 0;
        }
        return n;
    }

    // Progresses the Nic until qp has a completion (true, *cqe set) or the watchdog expires.
    bool await_cqe(Qp *qp, srcnic_cqe_t *cqe, double seconds = 5.0)
    {
        const uint64_t deadline = now_ns() + static_cast<uint64_t>(seconds * 1e9);
        while (qp->poll_cq(cqe, 1) == 0) {
            if (now_ns() > deadline) {
                return false;
            }
            nic_->progress();
            for (Packet &p : peer_->receive()) {
                pending_.push_back(std::move(p));
            }
        }
        return true;
    }

    // Posts a receive buffer of len bytes on qp_ and returns it (kept alive by the fixture).
    uint8_t *post_buffer(uint64_t wr_id, uint32_t len)
    {
        buffers_.emplace_back(len, 0);
        srcnic_recv_wqe_t r = {};
        r.wr_id = wr_id;
        r.addr = reinterpret_cast<uint64_t>(buffers_.back().data());
        r.length = len;
        EXPECT_EQ(SRCNIC_OK, qp_->post_recv(r));
        return buffers_.back().data();
    }

    // Receive / expect: a SYN SEND of psn 1 from the raw peer opens the connection (posting one
    // more receive buffer, which it consumes or leaves posted); learns the Nic's connection id
    // from the acknowledgement.
    void open_connection()
    {
        post_buffer(1000, 4096);
        PacketHeader h = peer_->header(Opcode::kSEND, 1, kFlagSyn | kFlagFirst | kFlagLast);
        h.dst_qpn = qp_->qpn();
        h.src_qpn = kPeerQpn;
        peer_->send(h);
        Packet ack;
        ASSERT_TRUE(await([](const Packet &p) { return p.h.ack_psn == 2; }, &ack));
        ASSERT_NE(0u, ack.h.src_conn);
        peer_->nic_conn(ack.h.src_conn);
        srcnic_cqe_t cqe;
        ASSERT_TRUE(await_cqe(qp_, &cqe));
        ASSERT_EQ(SRCNIC_OK, cqe.status);
        ASSERT_EQ(SRCNIC_OP_RECV, cqe.opcode);
    }

    // Receive / expect: the raw peer acknowledges the Nic's PSNs before ack_psn, having sent
    // every PSN before stream_pos.
    void ack_nic(uint32_t ack_psn, uint32_t stream_pos)
    {
        PacketHeader h = peer_->header(Opcode::kACK, stream_pos, 0);
        h.ack_psn = ack_psn;
        peer_->send(h);
    }

    // A destination on the raw peer (incarnation kPeerNic, QP kPeerQpn) for the Nic's requests.
    srcnic_dest_t dest_to_peer()
    {
        srcnic_dest_t dest = {};
        EXPECT_EQ(SRCNIC_OK, nic_->dest_create(peer_->nic_addr(), kPeerQpn, &dest));
        return dest;
    }

    // Awaits the Nic's first transmission of its sequenced packet psn (retransmissions, which
    // carry ACK_REQ, and other packets are skipped).
    bool await_psn(uint32_t psn, Packet *out)
    {
        return await([psn](const Packet &p) {
            return opcode_info(p.h.opcode).sequenced && p.h.psn == psn;
        }, out);
    }

    // The segments of the message whose first PSN is *psn, up to the one flagged LAST, in PSN
    // order; *psn is then the PSN after it. False if one does not come.
    bool await_message(uint32_t *psn, std::vector<Packet> *segs)
    {
        segs->clear();
        for (;;) {
            Packet p;
            if (!await_psn(*psn, &p)) {
                return false;
            }
            ++*psn;
            segs->push_back(p);
            if (p.h.flags & kFlagLast) {
                return true;
            }
        }
    }

    // Segment `seg` of a message of data.size() bytes cut at kPlacingSeg, as a sealed datagram:
    // h (segment 0's header) with psn + seg, FIRST and LAST where they belong, msg_len and the
    // segment's offset in addr.
    static std::vector<uint8_t> placing_segment(PacketHeader h, const std::vector<uint8_t> &data,
                                                uint32_t seg)
    {
        const uint32_t off = seg * kPlacingSeg;
        const uint32_t len = std::min<uint32_t>(kPlacingSeg, static_cast<uint32_t>(data.size()) - off);
        h.psn += seg;
        h.flags = static_cast<uint16_t>((seg == 0 ? kFlagFirst : 0) |
                                        (off + len == data.size() ? kFlagLast : 0));
        h.msg_len = static_cast<uint32_t>(data.size());
        h.addr = off;
        return RawPeer::datagram(h, std::vector<uint8_t>(data.begin() + off, data.begin() + off + len));
    }

    static std::vector<uint8_t> pattern(size_t len, uint32_t seed)
    {
        std::vector<uint8_t> v(len);
        for (size_t i = 0; i < len; ++i) {
            v[i] = static_cast<uint8_t>((i * 131 + seed * 7 + (i >> 8)) & 0xff);
        }
        return v;
    }

    std::shared_ptr<LoopbackFabric> fabric_;
    std::unique_ptr<Nic> nic_;
    std::unique_ptr<RawPeer> peer_;
    Qp *qp_ = nullptr;
    std::vector<Packet> pending_;                 // received, not yet looked at by await
    std::vector<std::vector<uint8_t>> buffers_;   // receive buffers posted by the test
};

} // namespace test
} // namespace srcnic

#endif
