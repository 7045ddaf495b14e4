// DC streams on crafted packets (PROTOCOL.md §8): the target side (contexts opened, bounded,
// evicted, resumed without running anything twice, closed, refused when stale), the initiator
// side (USE_DC moves a connection's requests to a stream in order; DC_GONE makes it resend as
// SYN), and closing a connection by agreement (demotion). Each test: "receive X / expect Y".
#include "raw_peer.h"

#include "core/nic_config.h"

namespace srcnic {
namespace test {
namespace {

class Dc : public ProtocolTest {
protected:
    static constexpr uint32_t kTargets = 2;
    // A context is evicted after this long quiet: long enough that the tests' back-to-back
    // packets meet contexts not yet evictable even on a loaded machine.
    static constexpr uint32_t kEvictUs = 20000;

    srcnic_config_t config() override
    {
        srcnic_config_t c = protocol_config();
        c.dc_targets = kTargets;
        c.dc_evict_us = kEvictUs;
        return c;
    }

    void SetUp() override
    {
        ProtocolTest::SetUp();
        for (uint64_t b = 0; b < 8; ++b) {
            post_buffer(100 + b, 64);
        }
    }

    // Another raw peer at its own address of the fabric, number i (1, 2, ...): its incarnation
    // and connection id are the main raw peer's plus i.
    std::unique_ptr<RawPeer> peer_no(uint32_t i)
    {
        return std::unique_ptr<RawPeer>(new RawPeer(*fabric_, nic_->addr(), kJobKey, kPeerNic + i, kPeerConn + i));
    }

    // A DC_INIT SEND of stream `stream`, PSN psn, from `from`, naming the Nic's context `ctx`
    // (0: a SYN, which RawPeer::send proves), with `flags` besides.
    PacketHeader dc_send(const RawPeer &from, uint32_t stream, uint32_t psn, uint32_t ctx = 0,
                         uint16_t flags = 0) const
    {
        return stream_send(from, static_cast<uint16_t>(kFlagDcInit | (ctx == 0 ? kFlagSyn : 0) | flags),
                           stream, psn, ctx);
    }

    // A 4-byte SEND of a stream from `from` to qp_, asking for its acknowledgement, with flags
    // (its direction among them), naming the Nic's connection, DCI or context dst_conn.
    PacketHeader stream_send(const RawPeer &from, uint16_t flags, uint32_t stream, uint32_t psn,
                             uint32_t dst_conn) const
    {
        PacketHeader h = from.header(Opcode::kSEND, psn,
                                     static_cast<uint16_t>(kFlagFirst | kFlagLast | kFlagAckReq | flags));
        h.dst_conn = dst_conn;
        h.stream = stream;
        h.dst_qpn = qp_->qpn();
        h.src_qpn = kPeerQpn;
        h.msg_len = 4;
        return h;
    }

    // Sends DC_CLOSE of stream `stream` at PSN psn to the Nic's context ctx and lets it take it.
    void dc_close(uint32_t ctx, uint32_t stream, uint32_t psn)
    {
        PacketHeader close = peer_->header(Opcode::kDC_CLOSE, psn, kFlagDcInit);
        close.dst_conn = ctx;
        close.stream = stream;
        peer_->send(close);
        progress_until_received(1);
    }

    // Sends a CLOSE ask for the raw peer's connection at its next PSN psn.
    void close_ask(uint32_t psn)
    {
        PacketHeader ask = peer_->header(Opcode::kCLOSE, psn, 0);
        ask.imm = static_cast<uint32_t>(CloseKind::kAsk);
        peer_->send(ask);
    }

    // The raw peer answers the Nic's packet p with a NAK of reason that names no connection of
    // its own (src_conn 0): at p's PSN, as a DC target (p's stream) when p is a DC stream's.
    void nak_unbound(const PacketHeader &p, NakReason reason)
    {
        const bool dc = (p.flags & kFlagDcInit) != 0;
        PacketHeader nak = peer_->header(Opcode::kNAK, p.psn, dc ? kFlagDcTarget : 0);
        nak.stream = dc ? p.stream : 0;
        nak.src_conn = 0;
        nak.dst_conn = p.src_conn;
        nak.imm = static_cast<uint32_t>(reason);
        peer_->send(nak);
    }

    // Sends a CLOSE ask at psn and returns the Nic's answer (skipped: the packets before it).
    Packet close_answer(uint32_t psn, std::vector<Packet> *skipped = nullptr)
    {
        close_ask(psn);
        Packet answer;
        EXPECT_TRUE(await_op(Opcode::kCLOSE, &answer, skipped)) << "no CLOSE answer";
        return answer;
    }

    // Sends a 4-byte DC SEND and returns what the Nic emitted in that progress call.
    std::vector<Packet> deliver(RawPeer &from, const PacketHeader &h)
    {
        from.send(h, {1, 2, 3, 4});
        progress_until_received(1);
        return from.receive();
    }

    // The Nic's answer among packets: the one that carries its ack (ACK or a piggyback).
    static const Packet *answer(const std::vector<Packet> &packets, Opcode op)
    {
        for (const Packet &p : packets) {
            if (p.h.opcode == static_cast<uint8_t>(op)) {
                return &p;
            }
        }
        return nullptr;
    }

    // Receives completions on qp_ for `us` µs; returns how many RECVs completed.
    unsigned recvs_for(uint64_t us)
    {
        unsigned n = 0;
        const uint64_t deadline = now_ns() + us * kNsPerUs;
        srcnic_cqe_t cqe;
        do {
            nic_->progress();
            while (qp_->poll_cq(&cqe, 1) == 1) {
                n += cqe.opcode == SRCNIC_OP_RECV && cqe.status == SRCNIC_OK;
            }
        } while (now_ns() < deadline);
        return n;
    }

    // Opens stream `stream` from `from` with its PSN 1 (delivered) and returns the context id
    // the Nic's acknowledgement names.
    uint32_t open_stream(RawPeer &from, uint32_t stream, uint16_t flags = 0)
    {
        Counters before(*nic_);
        from.send(dc_send(from, stream, 1, 0, flags), {1, 2, 3, 4});
        Packet ack;
        EXPECT_TRUE(await_from(from, Opcode::kACK, &ack));
        EXPECT_EQ(1u, before.delta(SRCNIC_CNT_DC_TARGETS_OPENED) + before.delta(SRCNIC_CNT_DC_RESUMED));
        EXPECT_EQ(kFlagDcTarget, ack.h.flags & kFlagsDc);
        EXPECT_EQ(stream, ack.h.stream);
        EXPECT_EQ(2u, ack.h.ack_psn);
        EXPECT_EQ(from.conn_id(), ack.h.dst_conn);
        EXPECT_NE(0u, ack.h.src_conn);
        return ack.h.src_conn;
    }

    // Progresses the Nic until `from` receives a packet of op (watchdog 5 s).
    bool await_from(RawPeer &from, Opcode op, Packet *out)
    {
        const uint64_t deadline = now_ns() + 5 * kNsPerSec;
        while (now_ns() < deadline) {
            nic_->progress();
            for (Packet &p : from.receive()) {
                if (p.h.opcode == static_cast<uint8_t>(op)) {
                    *out = std::move(p);
                    return true;
                }
            }
        }
        return false;
    }

    // A stream of the raw peer's to the Nic whose DCI knows the Nic's context (PSN 1 a SYN,
    // PSN 2 naming the context), the acknowledgement of PSN 2 still owed for the next transmit
    // pass; returns the context's id. flags: besides, on the DCI's packets (kFlagDcReverse).
    uint32_t stream_owing_an_ack(uint32_t stream, uint16_t flags = 0)
    {
        const uint32_t ctx = open_stream(*peer_, stream, flags);
        std::vector<Packet> back = deliver(*peer_, dc_send(*peer_, stream, 2, ctx, flags));
        EXPECT_EQ(nullptr, answer(back, Opcode::kACK)) << "acknowledged in the pass that received it";
        return ctx;
    }

    // The Nic's DCI to the raw peer with a SEND of 4 bytes in flight: the raw peer refused the
    // Nic's connection (USE_DC); returns the DCI's first packet (PSN 1, a SYN).
    Packet dci_with_a_send(uint64_t wr_id)
    {
        const srcnic_dest_t dest = dest_to_peer();
        static const uint32_t v = 0x5a5a5a5a;
        EXPECT_EQ(SRCNIC_OK, qp_->post_send(make_send(dest, wr_id, &v, 4)));
        Packet p;
        EXPECT_TRUE(await_psn(1, &p));
        nak_unbound(p.h, NakReason::kUseDc);
        EXPECT_TRUE(await([](const Packet &q) { return (q.h.flags & kFlagDcInit) != 0 && q.h.psn == 1; }, &p));
        return p;
    }

    // Whether packets hold the Nic's ACK of stream `stream` acknowledging the PSNs before ack_psn.
    static bool has_ack(const std::vector<Packet> &packets, uint32_t stream, uint32_t ack_psn)
    {
        for (const Packet &p : packets) {
            if (p.h.opcode == static_cast<uint8_t>(Opcode::kACK) && p.h.stream == stream &&
                p.h.ack_psn == ack_psn) {
                return true;
            }
        }
        return false;
    }

    // The raw peer as the target context of the Nic's DC stream that sent p: an ACK naming
    // itself (src_conn kTargetCtx) at stream position 1, acknowledging the PSNs before ack_psn,
    // with DC_TARGET and `flags`.
    static constexpr uint32_t kTargetCtx = 0x00420001;
    void ack_as_target(const Packet &p, uint32_t ack_psn, uint16_t flags = 0)
    {
        PacketHeader ack = peer_->header(Opcode::kACK, 1, static_cast<uint16_t>(kFlagDcTarget | flags));
        ack.stream = p.h.stream;
        ack.dst_conn = p.h.src_conn;
        ack.src_conn = kTargetCtx;
        ack.ack_psn = ack_psn;
        peer_->send(ack);
    }

    // Whether qp_ completes a request (not a receive) within `us` µs; *cqe: its completion.
    bool request_completes_within(uint64_t us, srcnic_cqe_t *cqe)
    {
        const uint64_t deadline = now_ns() + us * kNsPerUs;
        do {
            nic_->progress();
            peer_->receive();
            while (qp_->poll_cq(cqe, 1) == 1) {
                if (cqe->opcode != SRCNIC_OP_RECV) {
                    return true;
                }
            }
        } while (now_ns() < deadline);
        return false;
    }

    // The Nic's destination to the raw peer over DC, with its DCI attached and quiet: the raw
    // peer refused the Nic's connection (USE_DC) and acknowledged the SEND that then went on a
    // DCI (its first packet: *first).
    srcnic_dest_t dc_dest_quiet(Packet *first)
    {
        *first = dci_with_a_send(80);
        ack_as_target(*first, 2);
        srcnic_cqe_t cqe;
        EXPECT_TRUE(await_cqe(qp_, &cqe));
        EXPECT_EQ(80u, cqe.wr_id);
        return dest_to_peer();
    }

    // A packet of the raw peer's DCI on its stream `stream` to the Nic's context ctx: op at
    // psn, acknowledging the context's PSNs before ack_psn.
    PacketHeader from_dci(Opcode op, uint32_t stream, uint32_t ctx, uint32_t psn, uint32_t ack_psn) const
    {
        PacketHeader h = peer_->header(op, psn, kFlagDcInit);
        h.stream = stream;
        h.dst_conn = ctx;
        h.ack_psn = ack_psn;
        return h;
    }

    // A SEND of 4 bytes that the raw peer, as the target context of the Nic's DCI stream that
    // sent p, sends back along it at psn, acknowledging the DCI's PSNs before ack_psn.
    PacketHeader back_along(const Packet &p, uint32_t psn, uint32_t ack_psn) const
    {
        PacketHeader h = stream_send(*peer_, kFlagDcTarget, p.h.stream, psn, p.h.src_conn);
        h.src_conn = kTargetCtx;
        h.ack_psn = ack_psn;
        return h;
    }

    // A SEND of the 4 bytes at v (wr_id) that the Nic sent back along the raw peer's new stream
    // `stream`: the Nic's destination is over DC (dc_dest_quiet), and the stream's context,
    // opened by the raw peer's DCI (which offers, DC_REVERSE) with a SEND that the Nic ran, owes
    // the acknowledgement for the next transmit pass. Returns the context's id; *back: the SEND
    // (DC_TARGET) as the raw peer received it, *skipped: what came before. qp: the posting QP
    // (qp_ if nullptr).
    uint32_t send_back(uint32_t stream, uint64_t wr_id, const uint32_t *v, Packet *back,
                       std::vector<Packet> *skipped = nullptr, Qp *qp = nullptr)
    {
        Packet first;
        const srcnic_dest_t dest = dc_dest_quiet(&first);
        const std::vector<Packet> out = deliver(*peer_, dc_send(*peer_, stream, 1, 0, kFlagDcReverse));
        EXPECT_EQ(nullptr, answer(out, Opcode::kACK)) << "acknowledged in the pass that received it";
        EXPECT_EQ(SRCNIC_OK, (qp != nullptr ? qp : qp_)->post_send(make_send(dest, wr_id, v, 4)));
        EXPECT_TRUE(await([](const Packet &q) { return q.h.opcode == static_cast<uint8_t>(Opcode::kSEND); }, back, skipped));
        EXPECT_EQ(kFlagDcTarget, back->h.flags & kFlagsDc) << to_string(back->h);
        return back->h.src_conn;
    }

    // The Nic's DCI to the raw peer (its first packet, returned), which offers to run requests
    // sent back (DC_REVERSE), with a SEND of wr_id in flight; the raw peer, as its target,
    // sends a SEND back along the stream that acknowledges it: expect the SEND complete and the
    // one sent back run (a RECV).
    Packet dci_ran_one_sent_back(uint64_t wr_id)
    {
        const Packet first = dci_with_a_send(wr_id);
        EXPECT_NE(0, first.h.flags & kFlagDcReverse) << to_string(first.h);
        peer_->send(back_along(first, 1, 2), {9, 8, 7, 6});
        unsigned recvs = 0;
        EXPECT_EQ(std::vector<uint64_t>{wr_id}, requests_completed_within(300, &recvs));
        EXPECT_EQ(1u, recvs);
        return first;
    }

    // Posts a SEND (wr_id) to dest, over DC, and expects it on the Nic's own DCI, not back
    // along the raw peer's stream `stream`.
    void expect_on_own_dci(srcnic_dest_t dest, uint64_t wr_id, uint32_t stream)
    {
        static const uint32_t v = 6;
        ASSERT_EQ(SRCNIC_OK, qp_->post_send(make_send(dest, wr_id, &v, 4)));
        Packet p;
        ASSERT_TRUE(await([](const Packet &q) { return q.h.opcode == static_cast<uint8_t>(Opcode::kSEND); }, &p));
        EXPECT_EQ(kFlagDcInit, p.h.flags & kFlagsDc) << to_string(p.h);
        EXPECT_NE(stream, p.h.stream);
        EXPECT_EQ(0u, nic_->counter(SRCNIC_CNT_DC_REVERSE_SENT));
    }

    // The completions of requests (not receives) qp_ gives within `us` µs, by wr_id; *recvs (if
    // given) counts the receives that completed meanwhile.
    std::vector<uint64_t> requests_completed_within(uint64_t us, unsigned *recvs = nullptr)
    {
        std::vector<uint64_t> ids;
        const uint64_t deadline = now_ns() + us * kNsPerUs;
        srcnic_cqe_t cqe;
        do {
            nic_->progress();
            while (qp_->poll_cq(&cqe, 1) == 1) {
                if (cqe.opcode != SRCNIC_OP_RECV) {
                    EXPECT_EQ(SRCNIC_OK, cqe.status) << cqe.wr_id;
                    ids.push_back(cqe.wr_id);
                } else if (recvs != nullptr) {
                    *recvs += cqe.status == SRCNIC_OK;
                }
            }
        } while (now_ns() < deadline);
        return ids;
    }
};

// With one DCI: every DCI is attached as soon as it is.
class DcOneDci : public Dc {
protected:
    srcnic_config_t config() override
    {
        srcnic_config_t c = Dc::config();
        c.num_dci = 1;
        return c;
    }
};

TEST_F(Dc, dc_syn_psn_1__opens_a_target_context_answers_carry_the_stream)
{
    // receive a DC_INIT SYN SEND psn 1 of stream 7 / expect it delivered, an ACK with DC_TARGET
    // and stream 7 naming the sender's DCI, and no connection
    open_stream(*peer_, 7);
    EXPECT_EQ(1u, recvs_for(100));
    EXPECT_EQ(0u, nic_->num_connections());
}

TEST_F(Dc, dc_syn_later_psn_of_an_unknown_stream__dropped_stale_never_run)
{
    // receive a DC_INIT SYN SEND psn 2 of a stream the Nic never saw / expect DROP_DC_STALE,
    // nothing delivered, no answer
    Counters before(*nic_);
    EXPECT_TRUE(deliver(*peer_, dc_send(*peer_, 8, 2)).empty());
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_DROP_DC_STALE));
    EXPECT_EQ(0u, recvs_for(100));
}

TEST_F(Dc, dc_flags__without_a_stream_or_both_or_a_target_syn_are_bad_flags)
{
    // receive DC_INIT with stream 0, then with both DC flags / expect DROP_BAD_FLAGS each, no
    // answer
    Counters before(*nic_);
    PacketHeader h = dc_send(*peer_, 1, 1);
    h.stream = 0;
    EXPECT_TRUE(deliver(*peer_, h).empty());
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_DROP_BAD_FLAGS));
    h = dc_send(*peer_, 1, 1);
    h.flags |= kFlagDcTarget;
    EXPECT_TRUE(deliver(*peer_, h).empty());
    EXPECT_EQ(2u, before.delta(SRCNIC_CNT_DROP_BAD_FLAGS));
    // receive a proved DC_TARGET SYN (a target always knows its initiator) / expect
    // DROP_BAD_FLAGS
    h = dc_send(*peer_, 1, 1);
    h.flags = static_cast<uint16_t>((h.flags & ~kFlagDcInit) | kFlagDcTarget);
    EXPECT_TRUE(deliver(*peer_, h).empty());
    EXPECT_EQ(3u, before.delta(SRCNIC_CNT_DROP_BAD_FLAGS));
    EXPECT_EQ(0u, recvs_for(100));
}

TEST_F(Dc, contexts_at_bound__busy_until_one_is_quiet_then_the_lru_is_evicted)
{
    std::unique_ptr<RawPeer> a = peer_no(1), b = peer_no(2), c = peer_no(3);
    open_stream(*a, 1);
    open_stream(*b, 1);
    // receive stream 1 of a third peer at once / expect DC_BUSY to it (src_conn 0, its PSN and
    // stream), nothing delivered, no third context
    Counters before(*nic_);
    std::vector<Packet> back = deliver(*c, dc_send(*c, 1, 1));
    const Packet *nak = answer(back, Opcode::kNAK);
    ASSERT_NE(nullptr, nak);
    EXPECT_EQ(static_cast<uint32_t>(NakReason::kDcBusy), nak->h.imm);
    EXPECT_EQ(0u, nak->h.src_conn);
    EXPECT_EQ(c->conn_id(), nak->h.dst_conn);
    EXPECT_EQ(1u, nak->h.psn);
    EXPECT_EQ(1u, nak->h.stream);
    EXPECT_EQ(kFlagDcTarget, nak->h.flags & kFlagsDc);
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_DC_BUSY_SENT));
    EXPECT_EQ(2u, recvs_for(100));   // a's and b's only
    // after both contexts were quiet for longer than the minimum, receive it again / expect the
    // least recently used (a's) evicted and c's stream opened
    run_for(kEvictUs + 500);
    open_stream(*c, 1);
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_DC_EVICTIONS));
    EXPECT_EQ(kTargets, nic_->counter(SRCNIC_CNT_DC_TARGETS_MAX));
    EXPECT_EQ(1u, recvs_for(100));
}

TEST_F(Dc, evicted_stream__named_packets_get_gone_and_resume_runs_nothing_twice)
{
    std::unique_ptr<RawPeer> a = peer_no(1), b = peer_no(2), c = peer_no(3);
    const uint32_t ctx = open_stream(*a, 5);
    open_stream(*b, 1);
    run_for(kEvictUs + 500);
    open_stream(*c, 1);   // evicts a's
    EXPECT_EQ(3u, recvs_for(100));
    // receive a's psn 2 naming its evicted context / expect DC_GONE (nothing run)
    Counters before(*nic_);
    std::vector<Packet> back = deliver(*a, dc_send(*a, 5, 2, ctx));
    const Packet *gone = answer(back, Opcode::kNAK);
    ASSERT_NE(nullptr, gone);
    EXPECT_EQ(static_cast<uint32_t>(NakReason::kDcGone), gone->h.imm);
    EXPECT_EQ(a->conn_id(), gone->h.dst_conn);
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_DC_GONE_SENT));
    EXPECT_EQ(0u, recvs_for(100));
    // receive a's psn 2 naming the context without an initiator id (src_conn 0; found by
    // rx_fuzz) / expect no answer (it could name nobody) and nothing run
    PacketHeader anonymous = dc_send(*a, 5, 2, ctx);
    anonymous.src_conn = 0;
    back = deliver(*a, anonymous);
    EXPECT_TRUE(back.empty()) << "answered a packet with no initiator id";
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_DROP_NO_CONN));
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_DC_GONE_SENT));
    EXPECT_EQ(0u, recvs_for(100));
    // receive a's psn 1 again, as SYN (its ack was "lost") / expect the stream resumed from the
    // closed table, psn 1 acknowledged again and not run
    run_for(kEvictUs + 500);
    a->send(dc_send(*a, 5, 1), {1, 2, 3, 4});
    Packet ack;
    ASSERT_TRUE(await_from(*a, Opcode::kACK, &ack));
    EXPECT_EQ(2u, ack.h.ack_psn);
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_DC_RESUMED));
    EXPECT_EQ(0u, recvs_for(100));
    // receive a's psn 2 as SYN / expect it run, once
    a->send(dc_send(*a, 5, 2), {1, 2, 3, 4});
    ASSERT_TRUE(await_from(*a, Opcode::kACK, &ack));
    EXPECT_EQ(3u, ack.h.ack_psn);
    EXPECT_EQ(1u, recvs_for(100));
    EXPECT_LE(nic_->counter(SRCNIC_CNT_DC_TARGETS_MAX), kTargets);
}

TEST_F(Dc, dc_close__ends_the_context_and_the_stream_is_forgotten)
{
    const uint32_t ctx = open_stream(*peer_, 3);
    EXPECT_EQ(1u, recvs_for(100));
    // receive DC_CLOSE psn 2 (its next PSN) naming the context / expect DC_CLOSED, the context
    // gone without a closed entry: a later psn 2 of the stream is stale
    Counters before(*nic_);
    dc_close(ctx, 3, 2);
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_DC_CLOSED));
    EXPECT_TRUE(deliver(*peer_, dc_send(*peer_, 3, 2)).empty());
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_DROP_DC_STALE));
    EXPECT_EQ(0u, recvs_for(100));
}

TEST_F(Dc, dc_close__right_behind_a_request_whose_ack_is_still_owed_ends_the_context)
{
    const uint32_t ctx = open_stream(*peer_, 3);
    EXPECT_EQ(1u, recvs_for(100));
    // receive SEND psn 2 without ACK_REQ (its ack deferred) and DC_CLOSE psn 3 in one burst /
    // expect the context gone at once (the initiator holds everything acknowledged), without a
    // closed entry: a later psn 3 of the stream is stale, not resumed
    Counters before(*nic_);
    PacketHeader send = dc_send(*peer_, 3, 2, ctx);
    send.flags = static_cast<uint16_t>(send.flags & ~kFlagAckReq);
    peer_->send(send, {1, 2, 3, 4});
    PacketHeader close = peer_->header(Opcode::kDC_CLOSE, 3, kFlagDcInit);
    close.dst_conn = ctx;
    close.stream = 3;
    peer_->send(close);
    progress_until_received(2);
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_DC_CLOSED));
    EXPECT_EQ(1u, recvs_for(100));
    EXPECT_TRUE(deliver(*peer_, dc_send(*peer_, 3, 3)).empty());
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_DROP_DC_STALE));
    EXPECT_EQ(0u, before.delta(SRCNIC_CNT_DC_RESUMED));
}

TEST_F(Dc, dc_close__at_another_psn_leaves_the_context)
{
    const uint32_t ctx = open_stream(*peer_, 3);
    // receive DC_CLOSE psn 5 (the Nic executed up to 2 only) / expect the context kept
    Counters before(*nic_);
    dc_close(ctx, 3, 5);
    EXPECT_EQ(0u, before.delta(SRCNIC_CNT_DC_CLOSED));
    // receive psn 2 naming the context / expect it run there
    deliver(*peer_, dc_send(*peer_, 3, 2, ctx));
    EXPECT_EQ(2u, recvs_for(100));
}

TEST_F(Dc, use_dc__the_connection_requests_go_again_over_a_stream_in_order)
{
    // the Nic posts two SENDs to the raw peer, which answers the first SYN with USE_DC / expect
    // both sent again, in order, as a DC stream from PSN 1 with DC_INIT and a stream number,
    // and completed once the raw peer acknowledges them as a DC target
    const srcnic_dest_t dest = dest_to_peer();
    uint32_t payload[2] = {0x11111111, 0x22222222};
    for (int i = 0; i < 2; ++i) {
        ASSERT_EQ(SRCNIC_OK, qp_->post_send(make_send(dest, 50 + i, &payload[i], 4)));
    }
    Packet first;
    ASSERT_TRUE(await_psn(1, &first));
    ASSERT_EQ(0u, first.h.flags & kFlagsDc);
    nak_unbound(first.h, NakReason::kUseDc);
    std::vector<Packet> dc;
    ASSERT_TRUE(await([&dc](const Packet &p) {
        if ((p.h.flags & kFlagDcInit) != 0 && opcode_info(p.h.opcode).sequenced) {
            dc.push_back(p);
        }
        return dc.size() == 2;
    }, &first));
    EXPECT_EQ(1u, nic_->counter(SRCNIC_CNT_DC_FALLBACKS));
    EXPECT_EQ(0u, nic_->num_connections());
    for (uint32_t i = 0; i < 2; ++i) {
        EXPECT_EQ(i + 1, dc[i].h.psn);
        EXPECT_NE(0u, dc[i].h.stream);
        EXPECT_EQ(dc[0].h.stream, dc[i].h.stream);
        EXPECT_EQ(0u, dc[i].h.dst_conn);   // SYN, proved
        ASSERT_EQ(4u, dc[i].payload.size());
        uint32_t v;
        std::memcpy(&v, dc[i].payload.data(), 4);
        EXPECT_EQ(payload[i], v);
    }
    PacketHeader ack = peer_->header(Opcode::kACK, 1, kFlagDcTarget);
    ack.stream = dc[0].h.stream;
    ack.dst_conn = dc[0].h.src_conn;
    ack.ack_psn = 3;
    peer_->send(ack);
    for (int i = 0; i < 2; ++i) {
        srcnic_cqe_t cqe;
        ASSERT_TRUE(await_cqe(qp_, &cqe));
        EXPECT_EQ(SRCNIC_OK, cqe.status);
        EXPECT_EQ(50u + i, cqe.wr_id);
    }
}

TEST_F(Dc, dc_gone__the_initiator_resends_from_its_oldest_unacked_psn_as_syn)
{
    // a DC stream whose target (the raw peer) learned its id, then answers DC_GONE / expect the
    // unacknowledged PSN sent again with dst_conn 0 and a proof
    const srcnic_dest_t dest = dest_to_peer();
    const uint32_t v = 7;
    ASSERT_EQ(SRCNIC_OK, qp_->post_send(make_send(dest, 60, &v, 4)));
    Packet p;
    ASSERT_TRUE(await_psn(1, &p));
    nak_unbound(p.h, NakReason::kUseDc);
    ASSERT_TRUE(await([](const Packet &q) { return (q.h.flags & kFlagDcInit) != 0 && q.h.psn == 1; }, &p));
    // the target acknowledges nothing yet but names itself (ACK at stream position 1, ack 1)
    ack_as_target(p, 1);
    run_for(100);
    // then DC_GONE for psn 1
    nak_unbound(p.h, NakReason::kDcGone);
    Packet again;
    ASSERT_TRUE(await([](const Packet &q) {
        return (q.h.flags & kFlagDcInit) != 0 && q.h.psn == 1 && q.h.dst_conn == 0 &&
               (q.h.flags & kFlagSyn) != 0;
    }, &again));
    EXPECT_EQ(p.h.stream, again.h.stream);
}

// A DC stream asks for prompt acknowledgements even of requests posted LAZY_ACK: its DCI is
// handed to another target only once everything on it is acknowledged.
TEST_F(Dc, use_dc__a_lazy_ack_request_on_a_stream_still_asks_for_its_ack)
{
    const srcnic_dest_t dest = dest_to_peer();
    const uint32_t v = 9;
    srcnic_wqe_t w = make_send(dest, 61, &v, 4);
    w.flags |= SRCNIC_WQE_FLAG_LAZY_ACK;
    ASSERT_EQ(SRCNIC_OK, qp_->post_send(w));
    Packet p;
    ASSERT_TRUE(await_psn(1, &p));
    EXPECT_EQ(0, p.h.flags & kFlagAckReq) << "a connection's lazy request asks for no prompt ack";
    nak_unbound(p.h, NakReason::kUseDc);
    ASSERT_TRUE(await([](const Packet &q) { return (q.h.flags & kFlagDcInit) != 0 && q.h.psn == 1; }, &p));
    EXPECT_NE(0, p.h.flags & kFlagAckReq) << to_string(p.h);
}

// A DCI whose target answers DC_BUSY for longer than the peer timeout.
class DcBusyTimeout : public Dc {
protected:
    static constexpr uint32_t kPeerTimeoutMs = 300;

    srcnic_config_t config() override
    {
        srcnic_config_t c = Dc::config();
        c.peer_timeout_ms = kPeerTimeoutMs;
        return c;
    }
};

TEST_F(DcBusyTimeout, dc_busy_for_longer_than_the_peer_timeout__the_request_fails_endpoint_timeout)
{
    // a SEND that goes over DC (the raw peer answered its connection's SYN USE_DC), whose
    // stream the raw peer answers DC_BUSY every time / expect it kept waiting (resent after the
    // back-off, not failed) until the peer timeout, then completed ENDPOINT_TIMEOUT: a target
    // that never admits the stream must not hang the request
    const srcnic_dest_t dest = dest_to_peer();
    const uint32_t v = 5;
    const uint64_t t0 = now_ns();
    ASSERT_EQ(SRCNIC_OK, qp_->post_send(make_send(dest, 80, &v, 4)));
    Packet p;
    ASSERT_TRUE(await_psn(1, &p));
    nak_unbound(p.h, NakReason::kUseDc);
    Counters before(*nic_);
    srcnic_cqe_t cqe = {};
    bool done = false;
    const uint64_t deadline = now_ns() + 10 * kNsPerSec;
    while (!done && now_ns() < deadline) {
        nic_->progress();
        for (const Packet &q : peer_->receive()) {
            if ((q.h.flags & kFlagDcInit) == 0 || q.h.psn != 1) {
                continue;
            }
            nak_unbound(q.h, NakReason::kDcBusy);
        }
        done = qp_->poll_cq(&cqe, 1) == 1;
    }
    ASSERT_TRUE(done) << "watchdog: the request waited behind DC_BUSY without bound";
    EXPECT_EQ(80u, cqe.wr_id);
    EXPECT_EQ(SRCNIC_ERR_ENDPOINT_TIMEOUT, static_cast<srcnic_status_t>(cqe.status));
    EXPECT_GE(now_ns() - t0, kPeerTimeoutMs * kNsPerMs);
    EXPECT_GE(before.delta(SRCNIC_CNT_DC_BUSY_RECEIVED), 2u);
}

TEST_F(Dc, close_ask__a_quiet_connection_is_agreed_closed_and_agreed_again)
{
    open_connection();
    ASSERT_EQ(1u, nic_->num_connections());
    // receive CLOSE ask at the peer's next PSN (2), acknowledging all the Nic sent (its next is
    // 1) / expect CLOSE agreed, the connection closed without failing (CONN_DEMOTED)
    Counters before(*nic_);
    EXPECT_EQ(static_cast<uint32_t>(CloseKind::kAgreed), close_answer(2).h.imm);
    EXPECT_EQ(0u, nic_->num_connections());
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_CONN_DEMOTED));
    EXPECT_EQ(0u, before.delta(SRCNIC_CNT_CONN_FAILED));
    // receive the ask again (the answer was lost) / expect agreed again, not RST
    std::vector<Packet> skipped;
    EXPECT_EQ(static_cast<uint32_t>(CloseKind::kAgreed), close_answer(2, &skipped).h.imm);
    EXPECT_EQ(0u, count_op(skipped, Opcode::kRST));
    // The released slot answered for its last occupant without taking an active half.
    EXPECT_EQ(0u, nic_->active_halves());
}

TEST_F(Dc, close_ask__with_a_packet_not_received_here_is_refused)
{
    open_connection();
    // receive CLOSE ask claiming the peer's next PSN is 3 (the Nic holds up to 1) / expect CLOSE
    // refused, the connection kept
    EXPECT_EQ(static_cast<uint32_t>(CloseKind::kRefused), close_answer(3).h.imm);
    EXPECT_EQ(1u, nic_->num_connections());
    EXPECT_EQ(0u, nic_->counter(SRCNIC_CNT_CONN_DEMOTED));
}

TEST_F(Dc, closed_by_agreement__the_peer_opens_again_first__our_requests_join_its_connection)
{
    // The Nic has a destination on the peer; the peer closes the connection by agreement and
    // opens a new one before the Nic sends again. Two NICs keep one connection between them:
    // a second (its SYN naming another connection of ours) would fail the first at the peer.
    const srcnic_dest_t dest = dest_to_peer();
    open_connection();
    Counters before(*nic_);
    ASSERT_EQ(static_cast<uint32_t>(CloseKind::kAgreed), close_answer(2).h.imm);
    ASSERT_EQ(0u, nic_->num_connections());
    // receive a SYN SEND of the peer's new connection / expect it opened and acknowledged
    peer_->conn_id(peer_->conn_id() + 1);
    peer_->nic_conn(0);
    open_connection();
    const uint32_t opened = peer_->nic_conn();
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_CONN_OPENED));
    // post a SEND on the destination / expect it on that connection: no SYN, the peer's new id
    const uint32_t v = 9;
    ASSERT_EQ(SRCNIC_OK, qp_->post_send(make_send(dest, 70, &v, 4)));
    Packet p;
    ASSERT_TRUE(await_psn(1, &p));
    EXPECT_EQ(0u, p.h.flags & kFlagSyn);
    EXPECT_EQ(peer_->conn_id(), p.h.dst_conn);
    EXPECT_EQ(opened, p.h.src_conn);
    EXPECT_EQ(1u, nic_->num_connections());
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_CONN_OPENED));
    EXPECT_EQ(0u, before.delta(SRCNIC_CNT_CONN_FAILED));
}

// --- acknowledgements on other packets (XACK, PROTOCOL.md §8.7) ---

TEST_F(Dc, xack__a_target_s_ack_rides_on_the_next_request_to_its_initiator_nic)
{
    // the raw peer has a connection to the Nic and a DC stream whose PSN 2 (naming the context,
    // asking for its ack) was just delivered; the Nic then sends the raw peer a SEND on the
    // connection / expect the SEND to carry the stream's acknowledgement (XACK: the raw peer's
    // DCI id, PSN 3) and no ACK of the context's own, in that pass or later
    open_connection();
    // (the raw peer's DCI has an id of its own, not its connection's)
    constexpr uint32_t kDci = 0x00090005;
    peer_->conn_id(kDci);
    stream_owing_an_ack(11);
    peer_->conn_id(kPeerConn);
    Counters before(*nic_);
    const uint32_t v = 1;
    ASSERT_EQ(SRCNIC_OK, qp_->post_send(make_send(dest_to_peer(), 70, &v, 4)));
    std::vector<Packet> out = run_for(2000);
    const Packet *send = answer(out, Opcode::kSEND);
    ASSERT_NE(nullptr, send);
    EXPECT_EQ(kPeerConn, send->h.dst_conn) << "on the connection";
    ASSERT_NE(0, send->h.flags & kFlagXack) << to_string(send->h);
    EXPECT_EQ(kDci, xack_conn(send->h.auth));
    EXPECT_EQ(3u, xack_psn(send->h.auth));
    for (const Packet &p : out) {
        EXPECT_FALSE(p.h.opcode == static_cast<uint8_t>(Opcode::kACK) && p.h.stream == 11)
            << "the context acknowledged on its own too: " << to_string(p.h);
    }
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_DC_XACKS_SENT));
}

TEST_F(Dc, xack__not_while_the_dci_does_not_know_the_context)
{
    // a stream whose only packet so far is its SYN (its DCI has not learned the context's id,
    // so it could not close the stream) / expect the context's own ACK in the pass of the
    // Nic's SEND, and the SEND without XACK
    open_connection();
    peer_->send(dc_send(*peer_, 12, 1), {1, 2, 3, 4});
    progress_until_received(1);
    const uint32_t v = 1;
    ASSERT_EQ(SRCNIC_OK, qp_->post_send(make_send(dest_to_peer(), 71, &v, 4)));
    std::vector<Packet> out = run_for(2000);
    const Packet *send = answer(out, Opcode::kSEND);
    ASSERT_NE(nullptr, send);
    EXPECT_EQ(0, send->h.flags & kFlagXack);
    EXPECT_EQ(0u, send->h.auth);
    EXPECT_TRUE(has_ack(out, 12, 2)) << "the context's ACK";
    EXPECT_EQ(0u, nic_->counter(SRCNIC_CNT_DC_XACKS_SENT));
}

TEST_F(Dc, xack__received_completes_the_dci_s_request_from_its_target_nic_only)
{
    // the Nic's DCI has a SEND in flight to the raw peer; the raw peer has a stream of its own
    // to the Nic. Receive, on that stream's packets (bound to the raw peer's context at the
    // Nic): an XACK naming the DCI from another NIC's address and incarnation / expect it
    // ignored (DROP_XACK_UNMATCHED) and nothing completed; one acknowledging a PSN never sent /
    // ignored; then the raw peer's / expect the SEND completed OK, DC_XACKS_APPLIED
    const Packet first = dci_with_a_send(72);
    const uint32_t dci = first.h.src_conn;
    std::unique_ptr<RawPeer> other = peer_no(9);
    const uint32_t other_ctx = open_stream(*other, 21);
    Counters before(*nic_);
    PacketHeader forged = dc_send(*other, 21, 2, other_ctx);
    forged.flags |= kFlagXack;
    forged.auth = make_xack(dci, 2);
    deliver(*other, forged);
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_DROP_XACK_UNMATCHED));
    srcnic_cqe_t cqe;
    EXPECT_FALSE(request_completes_within(1000, &cqe)) << "another NIC acknowledged the DCI's stream";

    const uint32_t ctx = open_stream(*peer_, 22);
    // an unbound NAK (src_conn 0: it names no connection of its sender, so it is bound to
    // none) to the raw peer's context, carrying an XACK for the DCI / expect it not applied
    PacketHeader unbound = peer_->header(Opcode::kNAK, 1, kFlagDcInit);
    unbound.stream = 22;
    unbound.src_conn = 0;
    unbound.dst_conn = ctx;
    unbound.imm = static_cast<uint32_t>(NakReason::kDcBusy);
    unbound.flags |= kFlagXack;
    unbound.auth = make_xack(dci, 2);
    peer_->send(unbound);
    progress_until_received(1);
    EXPECT_FALSE(request_completes_within(1000, &cqe)) << "an unbound packet's XACK was applied";
    EXPECT_EQ(0u, before.delta(SRCNIC_CNT_DC_XACKS_APPLIED));
    PacketHeader beyond = dc_send(*peer_, 22, 2, ctx);
    beyond.flags |= kFlagXack;
    beyond.auth = make_xack(dci, 5);
    deliver(*peer_, beyond);
    EXPECT_EQ(2u, before.delta(SRCNIC_CNT_DROP_XACK_UNMATCHED));
    EXPECT_FALSE(request_completes_within(1000, &cqe)) << "acknowledged what was never sent";

    PacketHeader good = dc_send(*peer_, 22, 3, ctx);
    good.flags |= kFlagXack;
    good.auth = make_xack(dci, 2);
    deliver(*peer_, good);
    ASSERT_TRUE(request_completes_within(2000, &cqe));
    EXPECT_EQ(72u, cqe.wr_id);
    EXPECT_EQ(SRCNIC_OK, cqe.status);
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_DC_XACKS_APPLIED));
    EXPECT_EQ(2u, before.delta(SRCNIC_CNT_DROP_XACK_UNMATCHED));
}

TEST_F(Dc, xack__a_refused_carrier_makes_the_context_acknowledge_again)
{
    // the Nic's DCI to the raw peer knows its target context (the raw peer's ACK named it but
    // acknowledged nothing, so the DCI stays busy and attached), and the raw peer's stream to the
    // Nic owes an acknowledgement: the Nic's next SEND goes on the DCI (PSN 2) and carries it
    // (XACK). Receive DC_GONE for that SEND (the raw peer ran nothing of it) / expect the
    // context's acknowledgement again as an ACK of its own
    ack_as_target(dci_with_a_send(73), 1);
    run_for(100);
    stream_owing_an_ack(23);
    const uint32_t v = 2;
    ASSERT_EQ(SRCNIC_OK, qp_->post_send(make_send(dest_to_peer(), 74, &v, 4)));
    Packet carrier;
    ASSERT_TRUE(await([](const Packet &q) {
        return q.h.opcode == static_cast<uint8_t>(Opcode::kSEND) && q.h.psn == 2;
    }, &carrier));
    ASSERT_EQ(kTargetCtx, carrier.h.dst_conn) << "on the DCI, naming its context";
    ASSERT_NE(0, carrier.h.flags & kFlagXack) << to_string(carrier.h);
    nak_unbound(carrier.h, NakReason::kDcGone);
    Packet again;
    ASSERT_TRUE(await([](const Packet &q) {
        return q.h.opcode == static_cast<uint8_t>(Opcode::kACK) && q.h.stream == 23;
    }, &again));
    EXPECT_EQ(3u, again.h.ack_psn);
}

TEST_F(Dc, xack__without_a_carrier_the_ack_goes_at_the_end_of_the_pass)
{
    // a context ready to give its acknowledgement away (its DCI knows it) while the Nic sends
    // its initiator nothing / expect its own ACK in the next pass, and no XACK
    open_connection();
    stream_owing_an_ack(24);
    std::vector<Packet> out = run_for(100);
    EXPECT_TRUE(has_ack(out, 24, 3)) << "the context's ACK";
    EXPECT_EQ(0u, nic_->counter(SRCNIC_CNT_DC_XACKS_SENT));
}

TEST_F(Dc, xack__never_on_a_packet_to_another_nic)
{
    // a context of the raw peer's stream owes an acknowledgement while the Nic sends a SEND to
    // another NIC (over a connection that NIC opened) / expect that SEND without XACK and the
    // context's own ACK to the raw peer
    std::unique_ptr<RawPeer> other = peer_no(7);
    PacketHeader syn = other->header(Opcode::kSEND, 1, kFlagSyn | kFlagFirst | kFlagLast);
    syn.dst_qpn = qp_->qpn();
    syn.src_qpn = kPeerQpn;
    other->send(syn);
    Packet ack;
    ASSERT_TRUE(await_from(*other, Opcode::kACK, &ack));
    stream_owing_an_ack(25);
    srcnic_dest_t to_other = {};
    ASSERT_EQ(SRCNIC_OK, nic_->dest_create(other->nic_addr(), kPeerQpn, &to_other));
    const uint32_t v = 3;
    ASSERT_EQ(SRCNIC_OK, qp_->post_send(make_send(to_other, 75, &v, 4)));
    const std::vector<Packet> own = run_for(2000);
    bool sent = false;
    for (const Packet &p : other->receive()) {
        if (p.h.opcode == static_cast<uint8_t>(Opcode::kSEND)) {
            sent = true;
            EXPECT_EQ(kPeerConn + 7, p.h.dst_conn) << "on the connection";
            EXPECT_EQ(0, p.h.flags & kFlagXack) << to_string(p.h);
        }
    }
    EXPECT_TRUE(sent) << "no SEND to the other NIC";
    EXPECT_TRUE(has_ack(own, 25, 3)) << "the context's ACK";
    EXPECT_EQ(0u, nic_->counter(SRCNIC_CNT_DC_XACKS_SENT));
}

// --- asking initiators to close (DC_RELEASE, PROTOCOL.md §8.3) ---

TEST_F(Dc, dc_release__after_a_refusal_the_contexts_ask_their_dcis_to_close_for_a_while)
{
    // both contexts taken, nobody refused: a's acknowledgement asks nothing. A third peer's
    // stream refused (DC_BUSY) / expect a's next acknowledgement to carry DC_RELEASE. Once no
    // stream was refused for longer than the crowd time / expect it not to any more
    std::unique_ptr<RawPeer> a = peer_no(1), b = peer_no(2), c = peer_no(3);
    const uint32_t ctx = open_stream(*a, 1);
    open_stream(*b, 1);
    a->send(dc_send(*a, 1, 2, ctx), {1, 2, 3, 4});
    Packet ack;
    ASSERT_TRUE(await_from(*a, Opcode::kACK, &ack));
    EXPECT_EQ(3u, ack.h.ack_psn);
    EXPECT_EQ(0, ack.h.flags & kFlagDcRelease) << "asked to close while nobody waited";

    Counters before(*nic_);
    const std::vector<Packet> back = deliver(*c, dc_send(*c, 1, 1));
    const Packet *nak = answer(back, Opcode::kNAK);
    ASSERT_NE(nullptr, nak);
    ASSERT_EQ(static_cast<uint32_t>(NakReason::kDcBusy), nak->h.imm);
    a->send(dc_send(*a, 1, 3, ctx), {1, 2, 3, 4});
    ASSERT_TRUE(await_from(*a, Opcode::kACK, &ack));
    EXPECT_EQ(4u, ack.h.ack_psn);
    EXPECT_EQ(kFlagDcTarget | kFlagDcRelease, ack.h.flags & (kFlagsDc | kFlagDcRelease)) << to_string(ack.h);
    EXPECT_EQ(a->conn_id(), ack.h.dst_conn);

    run_for(kDcCrowdNs / kNsPerUs + 1000);
    a->send(dc_send(*a, 1, 4, ctx), {1, 2, 3, 4});
    ASSERT_TRUE(await_from(*a, Opcode::kACK, &ack));
    EXPECT_EQ(5u, ack.h.ack_psn);
    EXPECT_EQ(0, ack.h.flags & kFlagDcRelease) << "still asking after the crowd time";
    EXPECT_EQ(5u, recvs_for(100));   // a's four and b's one (c's was refused)
}

TEST_F(Dc, dc_release__the_dci_closes_its_stream_as_soon_as_it_is_quiet)
{
    // the Nic's DCI with two SENDs in flight to the raw peer. The raw peer, as the stream's target,
    // acknowledges the first SEND with DC_RELEASE / expect no DC_CLOSE while the second is
    // unacknowledged. It acknowledges the second (no flag) / expect DC_CLOSE naming the
    // context at the next PSN in that same pass (not after the DCI's 1 ms quiet), counted, and
    // the next SEND on a new stream
    const Packet first = dci_with_a_send(76);
    const uint32_t v = 4;
    ASSERT_EQ(SRCNIC_OK, qp_->post_send(make_send(dest_to_peer(), 77, &v, 4)));
    Packet second;
    ASSERT_TRUE(await([](const Packet &q) { return (q.h.flags & kFlagDcInit) != 0 && q.h.psn == 2; }, &second));
    ASSERT_EQ(first.h.stream, second.h.stream);

    ack_as_target(first, 2, kFlagDcRelease);
    for (const Packet &p : run_for(300)) {
        EXPECT_NE(static_cast<uint8_t>(Opcode::kDC_CLOSE), p.h.opcode) << "closed with a SEND unacknowledged";
    }
    srcnic_cqe_t cqe;
    ASSERT_TRUE(await_cqe(qp_, &cqe));
    EXPECT_EQ(76u, cqe.wr_id);
    EXPECT_EQ(0u, nic_->counter(SRCNIC_CNT_DC_RELEASES_ASKED));

    ack_as_target(first, 3);
    const std::vector<Packet> out = progress_until_received(1);
    const Packet *close = answer(out, Opcode::kDC_CLOSE);
    ASSERT_NE(nullptr, close) << "no DC_CLOSE in the pass that made the DCI quiet";
    EXPECT_EQ(kTargetCtx, close->h.dst_conn);
    EXPECT_EQ(first.h.stream, close->h.stream);
    EXPECT_EQ(3u, close->h.psn);
    EXPECT_EQ(1u, nic_->counter(SRCNIC_CNT_DC_RELEASES_ASKED));
    ASSERT_TRUE(await_cqe(qp_, &cqe));
    EXPECT_EQ(77u, cqe.wr_id);

    ASSERT_EQ(SRCNIC_OK, qp_->post_send(make_send(dest_to_peer(), 78, &v, 4)));
    Packet next;
    ASSERT_TRUE(await([](const Packet &q) { return (q.h.flags & kFlagDcInit) != 0 && opcode_info(q.h.opcode).sequenced; }, &next));
    EXPECT_NE(first.h.stream, next.h.stream);
    EXPECT_EQ(1u, next.h.psn);
    EXPECT_EQ(0u, next.h.dst_conn);
}

TEST_F(Dc, dc_release__an_unbound_packet_s_is_not_taken)
{
    // the Nic's DCI with a SEND in flight; an unbound NAK (src_conn 0) with DC_RELEASE, then the
    // target's ACK without it / expect the DCI not to close at once (not counted)
    const Packet first = dci_with_a_send(79);
    PacketHeader unbound = peer_->header(Opcode::kNAK, 1, kFlagDcTarget | kFlagDcRelease);
    unbound.stream = first.h.stream;
    unbound.src_conn = 0;
    unbound.dst_conn = first.h.src_conn;
    unbound.imm = 99;   // (no reason: nothing else happens)
    peer_->send(unbound);
    progress_until_received(1);
    ack_as_target(first, 2);
    srcnic_cqe_t cqe;
    ASSERT_TRUE(await_cqe(qp_, &cqe));
    EXPECT_EQ(79u, cqe.wr_id);
    run_for(200);
    EXPECT_EQ(0u, nic_->counter(SRCNIC_CNT_DC_RELEASES_ASKED));
}

// --- requests back along a stream (PROTOCOL.md §8.8) ---

TEST_F(Dc, dc_reverse__a_request_goes_back_along_a_new_stream_that_owes_its_dci_an_ack)
{
    // the Nic's destination to the raw peer is over DC (its DCI quiet); the raw peer's DCI, which
    // offers to run requests sent back (DC_REVERSE), opened a stream to the Nic whose context
    // owes it an acknowledgement. Post a SEND to the raw peer / expect it back along that
    // stream: a DC_TARGET SEND of the stream at the context's PSN 1, naming the raw peer's DCI,
    // carrying the acknowledgement (2) and ACK_REQ, counted; no ACK of the stream of its own
    static const uint32_t v = 5;
    std::vector<Packet> skipped;
    Packet back;
    const uint32_t ctx = send_back(31, 81, &v, &back, &skipped);
    EXPECT_EQ(31u, back.h.stream);
    EXPECT_NE(0u, ctx);
    EXPECT_EQ(peer_->conn_id(), back.h.dst_conn);
    EXPECT_EQ(1u, back.h.psn);
    EXPECT_EQ(2u, back.h.ack_psn);
    EXPECT_NE(0, back.h.flags & kFlagAckReq);
    EXPECT_FALSE(has_ack(skipped, 31, 2)) << "an ACK of its own as well";
    EXPECT_EQ(1u, nic_->counter(SRCNIC_CNT_DC_REVERSE_SENT));
    // receive the DCI's acknowledgement of it / expect the SEND complete
    peer_->send(from_dci(Opcode::kACK, 31, ctx, 2, 2));
    EXPECT_EQ(std::vector<uint64_t>{81}, requests_completed_within(500));
}

TEST_F(Dc, dc_reverse__not_without_the_dci_s_offer)
{
    // the same, but the raw peer's DCI does not offer (no DC_REVERSE) / expect the SEND on the
    // Nic's own DCI (DC_INIT, its stream), nothing sent back
    Packet first;
    const srcnic_dest_t dest = dc_dest_quiet(&first);
    deliver(*peer_, dc_send(*peer_, 32, 1));
    expect_on_own_dci(dest, 82, 32);
}

TEST_F(Dc, dc_reverse__not_along_a_stream_its_dci_keeps)
{
    // the raw peer's DCI offers, but its stream to the Nic has named the context (it kept the
    // stream past its first request: the DCIs cover their targets) / expect the SEND on the
    // Nic's own DCI, which carries a run of requests without a wait for each acknowledgement
    Packet first;
    const srcnic_dest_t dest = dc_dest_quiet(&first);
    stream_owing_an_ack(35, kFlagDcReverse);
    expect_on_own_dci(dest, 88, 35);
}

TEST_F(Dc, dc_reverse__a_close_that_does_not_acknowledge_it_hands_it_back_to_run_once)
{
    // a SEND sent back along the raw peer's stream (PSN 1). Receive the stream's DC_CLOSE at the
    // context's expected PSN acknowledging none of it (its DCI never ran it) / expect the close
    // confirmed (a DC_TARGET DC_CLOSE to the DCI), the SEND handed back, counted, and sent again
    // on the Nic's own DCI, not completed until that stream acknowledges it, then once
    // (its payload unchanged)
    static const uint32_t v = 7;
    Packet back;
    const uint32_t ctx = send_back(33, 83, &v, &back);
    Counters before(*nic_);
    peer_->send(from_dci(Opcode::kDC_CLOSE, 33, ctx, 2, 1));
    std::vector<Packet> skipped;
    Packet again;
    ASSERT_TRUE(await([](const Packet &q) { return q.h.opcode == static_cast<uint8_t>(Opcode::kSEND); }, &again, &skipped));
    const Packet *confirm = answer(skipped, Opcode::kDC_CLOSE);
    ASSERT_NE(nullptr, confirm) << "no confirmation before the SEND went again";
    EXPECT_EQ(kFlagDcTarget, confirm->h.flags & kFlagsDc);
    EXPECT_EQ(peer_->conn_id(), confirm->h.dst_conn);
    EXPECT_EQ(33u, confirm->h.stream);
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_DC_HANDED_BACK));
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_DC_CLOSED));
    ASSERT_EQ(4u, again.payload.size());
    uint32_t w;
    std::memcpy(&w, again.payload.data(), 4);
    EXPECT_EQ(v, w);
    EXPECT_EQ(kFlagDcInit, again.h.flags & kFlagsDc) << to_string(again.h);
    EXPECT_NE(33u, again.h.stream);
    EXPECT_TRUE(requests_completed_within(300).empty()) << "completed before its stream acknowledged it";
    ack_as_target(again, again.h.psn + 1);   // (its DCI's stream, or a new one if it was released)
    EXPECT_EQ(std::vector<uint64_t>{83}, requests_completed_within(500));
}

TEST_F(Dc, dc_reverse__a_handed_back_request_of_a_qp_destroyed_meanwhile_goes_as_a_nop)
{
    // a SEND of a second QP sent back; the stream's close hands it back, and the QP is destroyed
    // before a DCI takes it (the next progress call) / expect it on the Nic's DCI as a NOP
    // (nothing read from or completed into the gone QP: the sanitizer build checks the latter)
    srcnic_qp_config_t qc;
    srcnic_qp_config_init(&qc);
    Qp *other = nullptr;
    ASSERT_EQ(SRCNIC_OK, nic_->qp_create(qc, &other));
    static const uint32_t v = 9;
    Packet back;
    const uint32_t ctx = send_back(36, 89, &v, &back, nullptr, other);
    peer_->send(from_dci(Opcode::kDC_CLOSE, 36, ctx, 2, 1));
    progress_until_received(1);   // (the close taken: handed back, on no DCI yet)
    ASSERT_EQ(1u, nic_->counter(SRCNIC_CNT_DC_HANDED_BACK));
    nic_->qp_destroy(other);
    Packet again;
    ASSERT_TRUE(await([](const Packet &q) {
        return (q.h.flags & kFlagDcInit) != 0 && opcode_info(q.h.opcode).sequenced;
    }, &again));
    EXPECT_EQ(static_cast<uint8_t>(Opcode::kNOP), again.h.opcode) << to_string(again.h);
    ack_as_target(again, again.h.psn + 1);
    EXPECT_TRUE(requests_completed_within(300).empty());
}

TEST_F(Dc, dc_reverse__a_close_that_acknowledges_it_completes_it)
{
    // the same with the DC_CLOSE acknowledging the SEND / expect it complete, the close
    // confirmed, nothing handed back or sent again
    static const uint32_t v = 8;
    Packet back;
    const uint32_t ctx = send_back(34, 84, &v, &back);
    peer_->send(from_dci(Opcode::kDC_CLOSE, 34, ctx, 2, 2));
    EXPECT_EQ(std::vector<uint64_t>{84}, requests_completed_within(500));
    bool confirmed = false;
    for (const Packet &p : peer_->receive()) {
        EXPECT_NE(static_cast<uint8_t>(Opcode::kSEND), p.h.opcode) << "sent again: " << to_string(p.h);
        confirmed |= p.h.opcode == static_cast<uint8_t>(Opcode::kDC_CLOSE) && (p.h.flags & kFlagDcTarget) != 0;
    }
    EXPECT_TRUE(confirmed);
    EXPECT_EQ(0u, nic_->counter(SRCNIC_CNT_DC_HANDED_BACK));
}

TEST_F(Dc, dc_reverse__the_dci_offers_runs_and_acknowledges_a_request_sent_back_once)
{
    // the Nic's DCI with a SEND in flight offers to run requests sent back (DC_REVERSE). Receive
    // a SEND back along its stream that acknowledges that SEND / expect it run (a RECV), the
    // SEND complete, and an ACK of the stream (not every DCI is attached: no close). Receive it
    // again / expect it acknowledged again and not run twice
    const Packet first = dci_ran_one_sent_back(85);
    std::vector<Packet> out = run_for(300);
    EXPECT_TRUE(has_ack(out, first.h.stream, 2)) << "no ACK of the request sent back";
    EXPECT_EQ(nullptr, answer(out, Opcode::kDC_CLOSE));
    peer_->send(back_along(first, 1, 2), {9, 8, 7, 6});
    out = progress_until_received(1);
    EXPECT_TRUE(has_ack(out, first.h.stream, 2));
    EXPECT_EQ(0u, recvs_for(200)) << "run twice";
}

TEST_F(Dc, dc_reverse__a_dci_that_ran_one_closes_until_its_target_confirms)
{
    // the Nic's DCI ran a request sent back. Once it has been quiet for the DCI quiet time /
    // expect DC_CLOSE (its next PSN, acknowledging the request) and again after a
    // retransmission timeout; receive the request again meanwhile / expect DC_CLOSE, not a
    // second run; receive the confirmation / expect it counted and no DC_CLOSE after it
    const Packet first = dci_ran_one_sent_back(86);
    Packet close;
    ASSERT_TRUE(await([](const Packet &q) { return q.h.opcode == static_cast<uint8_t>(Opcode::kDC_CLOSE); }, &close));
    EXPECT_EQ(kTargetCtx, close.h.dst_conn);
    EXPECT_EQ(first.h.stream, close.h.stream);
    EXPECT_EQ(2u, close.h.psn);
    EXPECT_EQ(2u, close.h.ack_psn);
    ASSERT_TRUE(await([](const Packet &q) { return q.h.opcode == static_cast<uint8_t>(Opcode::kDC_CLOSE); }, &close))
        << "the close was not resent";
    peer_->send(back_along(first, 1, 2), {9, 8, 7, 6});
    std::vector<Packet> out = progress_until_received(1);
    EXPECT_NE(nullptr, answer(out, Opcode::kDC_CLOSE)) << "a request of a closed stream not answered with its close";
    EXPECT_EQ(0u, recvs_for(200)) << "run after the close";
    PacketHeader confirm = peer_->header(Opcode::kDC_CLOSE, 2, kFlagDcTarget);
    confirm.stream = first.h.stream;
    confirm.dst_conn = first.h.src_conn;
    confirm.src_conn = kTargetCtx;
    confirm.ack_psn = 2;
    peer_->send(confirm);
    progress_until_received(1);
    EXPECT_EQ(1u, nic_->counter(SRCNIC_CNT_DC_CLOSE_CONFIRMED));
    for (const Packet &p : run_for(3 * kRtoUs)) {
        EXPECT_NE(static_cast<uint8_t>(Opcode::kDC_CLOSE), p.h.opcode) << "closed again after the confirmation";
    }
}

TEST_F(DcOneDci, dc_reverse__with_every_dci_attached_the_close_carries_the_ack)
{
    // one DCI, attached: receive a SEND back along its stream / expect it run and, instead of
    // an ACK, DC_CLOSE acknowledging it at once (not after the quiet time)
    const Packet first = dci_ran_one_sent_back(87);
    const std::vector<Packet> out = run_for(300);
    const Packet *close = answer(out, Opcode::kDC_CLOSE);
    ASSERT_NE(nullptr, close) << "no early close";
    EXPECT_EQ(2u, close->h.ack_psn);
    EXPECT_FALSE(has_ack(out, first.h.stream, 2)) << "an ACK as well";
}

} // namespace
} // namespace test
} // namespace srcnic
