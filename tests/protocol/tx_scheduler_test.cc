// Protocol tests of the tx scheduler (PROTOCOL.md §5.1, §5.3, §5.5): the Nic's own requests as a
// raw peer sees them — segments, flags, the window, batches — and the timers: retransmission
// timeout, tail-loss probe, failure after the retries. What the peer's answers do is the
// completer's (completer_test.cc); resets are the rx demux's (rx_demux_test.cc).
#include "own_requests.h"

namespace srcnic {
namespace test {
namespace {

using TxScheduler = OwnRequests;
using TxSchedulerSlowRto = OwnRequestsSlowRto;

TEST_F(TxScheduler, tx_packet__first_request_opens_then_rto_retransmits_then_ack_completes)
{
    Counters before(*nic_);
    const uint64_t t0 = now_ns();
    post_send(1, 100, 5);
    // expect SEND psn 1: SYN|FIRST|LAST, and ACK_REQ as the last PSN assigned; dst_conn 0,
    // the peer's incarnation, the Nic's id
    Packet first;
    ASSERT_TRUE(await_op(Opcode::kSEND, &first));
    EXPECT_EQ(kFlagSyn | kFlagFirst | kFlagLast | kFlagAckReq, first.h.flags) << to_string(first.h);
    EXPECT_EQ(0u, first.h.dst_conn);
    EXPECT_NE(0u, first.h.src_conn);
    EXPECT_EQ(1u, first.h.psn);
    EXPECT_EQ(1u, first.h.ack_psn);
    EXPECT_EQ(kPeerNic, first.h.dst_nic);
    EXPECT_EQ(nic_->addr().incarnation, first.h.src_nic);
    EXPECT_EQ(kPeerQpn, first.h.dst_qpn);
    EXPECT_EQ(qp_->qpn(), first.h.src_qpn);
    EXPECT_EQ(100u, first.h.msg_len);
    EXPECT_EQ(0u, first.h.addr);
    EXPECT_EQ(5u, first.h.imm);
    EXPECT_EQ(sends_[0], first.payload);
    peer_->nic_conn(first.h.src_conn);
    // do not acknowledge / expect the same packet again after the RTO, with ACK_REQ
    Packet again;
    ASSERT_TRUE(await_op(Opcode::kSEND, &again));
    const uint64_t elapsed_ns = now_ns() - t0;
    EXPECT_GE(elapsed_ns, kRtoUs * kNsPerUs) << "retransmitted before the RTO";
    EXPECT_EQ(kFlagSyn | kFlagFirst | kFlagLast | kFlagAckReq, again.h.flags);
    EXPECT_EQ(1u, again.h.psn);
    EXPECT_EQ(0u, again.h.dst_conn);
    EXPECT_EQ(first.payload, again.payload);
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_RETRANSMITS));
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_TIMEOUTS));
    // receive ACK ack_psn 2, stream position 1, src_conn = ours / expect the SEND completed OK
    ack_nic(2, 1);
    srcnic_cqe_t cqe;
    ASSERT_TRUE(await_cqe(qp_, &cqe));
    EXPECT_EQ(SRCNIC_OK, cqe.status);
    EXPECT_EQ(1u, cqe.wr_id);
    EXPECT_EQ(SRCNIC_OP_SEND, cqe.opcode);
    EXPECT_EQ(100u, cqe.byte_len);
    // post another SEND / expect psn 2 naming our connection, without SYN
    post_send(2, 10);
    Packet next;
    ASSERT_TRUE(await_psn(2, &next));
    EXPECT_EQ(kSend, next.h.opcode);
    EXPECT_EQ(kPeerConn, next.h.dst_conn);
    EXPECT_EQ(first.h.src_conn, next.h.src_conn);
    EXPECT_EQ(kFlagFirst | kFlagLast | kFlagAckReq, next.h.flags);
}

// A request posted LAZY_ACK (nothing waits for it soon) does not ask for a prompt
// acknowledgement even as the last PSN assigned; its retransmission does, and so does the next
// request posted without the flag (PROTOCOL.md §5.3).
TEST_F(TxScheduler, tx_packet__lazy_ack_request_asks_no_prompt_ack_its_retransmission_does)
{
    post_send(1, 10, 0, SRCNIC_WQE_FLAG_LAZY_ACK);
    Packet first;
    ASSERT_TRUE(await_op(Opcode::kSEND, &first));
    EXPECT_EQ(kFlagSyn | kFlagFirst | kFlagLast, first.h.flags) << to_string(first.h);
    peer_->nic_conn(first.h.src_conn);
    // do not acknowledge / expect it again after the RTO, now with ACK_REQ
    Packet again;
    ASSERT_TRUE(await_op(Opcode::kSEND, &again));
    EXPECT_EQ(1u, again.h.psn);
    EXPECT_EQ(kFlagSyn | kFlagFirst | kFlagLast | kFlagAckReq, again.h.flags);
    ack_nic(2, 1);
    srcnic_cqe_t cqe;
    ASSERT_TRUE(await_cqe(qp_, &cqe));
    EXPECT_EQ(SRCNIC_OK, cqe.status);
    // a lazy one, then a plain one: only the plain one asks
    post_send(2, 10, 0, SRCNIC_WQE_FLAG_LAZY_ACK);
    Packet lazy;
    ASSERT_TRUE(await_psn(2, &lazy));
    EXPECT_EQ(kFlagFirst | kFlagLast, lazy.h.flags);
    post_send(3, 10);
    Packet plain;
    ASSERT_TRUE(await_psn(3, &plain));
    EXPECT_EQ(kFlagFirst | kFlagLast | kFlagAckReq, plain.h.flags);
}

// An expired timer waits for what the link holds: a sender busy transmitting reads its socket
// only between passes, and the acknowledgement that makes the timeout moot may be waiting there
// (a bandwidth stream timed out with it and resent a window the peer held).
TEST_F(TxScheduler, check_timers__expired_rto_yields_to_the_ack_waiting_in_the_link)
{
    post_send(1, 10);
    Packet first;
    ASSERT_TRUE(await_op(Opcode::kSEND, &first));
    const uint64_t sent_ns = now_ns();
    peer_->nic_conn(first.h.src_conn);
    Counters before(*nic_);
    // receive ACK ack_psn 2, left in the Nic's link: the Nic does not progress until well past
    // the RTO (a deadline, not a sleep: only the time that passes matters)
    ack_nic(2, 1);
    while (now_ns() < sent_ns + 3 * kRtoUs * kNsPerUs) {
    }
    // post SEND 2, so that the call's first pass schedules the connection with its timer due /
    // expect SEND psn 2 and no timeout: the ack in the link is read before the timer fires
    post_send(2, 10);
    nic_->progress();
    const std::vector<Packet> out = peer_->receive();
    EXPECT_EQ(0u, before.delta(SRCNIC_CNT_TIMEOUTS));
    EXPECT_EQ(0u, before.delta(SRCNIC_CNT_RETRANSMITS));
    ASSERT_EQ(1u, out.size());
    EXPECT_EQ(kSend, out[0].h.opcode);
    EXPECT_EQ(2u, out[0].h.psn);
    srcnic_cqe_t cqe;
    ASSERT_EQ(1u, qp_->poll_cq(&cqe, 1)) << "the ack completed SEND 1 in the same call";
    EXPECT_EQ(1u, cqe.wr_id);
    EXPECT_EQ(SRCNIC_OK, cqe.status);
    // do not acknowledge psn 2 / expect its timeout as before: after the RTO, with ACK_REQ
    Packet again;
    ASSERT_TRUE(await([](const Packet &p) { return p.h.psn == 2 && (p.h.flags & kFlagAckReq); },
                      &again));
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_TIMEOUTS));
}

// A segment's payload (here at most kSegPayload, under the Nic's kTxCopyMax) is copied behind
// its header and checksummed in one pass; the longer payloads of links with larger datagrams
// go as gather lists (covered end to end by the link tests). Every packet passes the receive
// checks (RawPeer::receive), and the segments of each message carry exactly its bytes: sizes
// around the segment boundary, several gather pieces, inline data.
TEST_F(TxSchedulerSlowRto, tx_commit__segments_carry_exactly_the_message_bytes)
{
    std::vector<std::vector<uint8_t>> sent;
    uint64_t wr_id = 1;
    for (uint32_t len : {0u, 1u, 8u, kSegPayload - 1, kSegPayload, kSegPayload + 1, 3000u}) {
        post_send(wr_id++, len);
        sent.push_back(sends_.back());
    }
    {
        // three pieces, 500 + 400 + 300 bytes
        sends_.push_back(pattern(1200, static_cast<uint32_t>(wr_id)));
        srcnic_wqe_t w = {};
        w.wr_id = wr_id++;
        w.opcode = SRCNIC_OP_SEND;
        w.dest = dest_;
        w.num_sge = 3;
        uint64_t at = reinterpret_cast<uint64_t>(sends_.back().data());
        const uint32_t lens[3] = {500, 400, 300};
        for (int i = 0; i < 3; ++i) {
            w.u.sge[i].addr = at;
            w.u.sge[i].length = lens[i];
            at += lens[i];
        }
        ASSERT_EQ(SRCNIC_OK, qp_->post_send(w));
        sent.push_back(sends_.back());
    }
    {
        std::vector<uint8_t> bytes = pattern(SRCNIC_WQE_INLINE_MAX, static_cast<uint32_t>(wr_id));
        srcnic_wqe_t w = {};
        w.wr_id = wr_id++;
        w.opcode = SRCNIC_OP_SEND;
        w.dest = dest_;
        w.flags = SRCNIC_WQE_FLAG_INLINE;
        w.inline_len = SRCNIC_WQE_INLINE_MAX;
        std::memcpy(w.u.inline_data, bytes.data(), bytes.size());
        ASSERT_EQ(SRCNIC_OK, qp_->post_send(w));
        sent.push_back(bytes);
    }
    uint32_t psn = 1;
    for (size_t m = 0; m < sent.size(); ++m) {
        std::vector<Packet> packets;
        ASSERT_TRUE(await_message(&psn, &packets)) << "message " << m << " psn " << psn;
        std::vector<uint8_t> got;
        std::vector<PacketHeader> segs;
        for (const Packet &p : packets) {
            EXPECT_EQ(kSend, p.h.opcode);
            EXPECT_LE(p.h.payload_len, kSegPayload);
            got.insert(got.end(), p.payload.begin(), p.payload.end());
            segs.push_back(p.h);
        }
        EXPECT_EQ(sent[m], got) << "message " << m << " of " << sent[m].size() << " bytes";
        expect_cut_evenly(sent[m].size(), segs);
    }
}

// A message of several packets takes the segment size of the one before it on the connection
// where that is larger than its own cut, takes no more packets and leaves a last packet short
// by no more than a pad holds (TxMsg::join_run): the datagrams of back-to-back messages of
// nearby sizes then stay one size, one offload group on the UDP link. Otherwise it is cut on
// its own, and its size is the next one's run.
TEST_F(TxSchedulerSlowRto, tx_packet__message_takes_the_run_size_before_it_where_a_pad_covers_it)
{
    constexpr uint32_t P = kSegPayload;
    struct Case {
        uint32_t len;
        std::vector<uint32_t> payloads;   // payload_len of each segment
        std::vector<uint32_t> pads;
    };
    const std::vector<Case> cases = {
        {3 * P, {P, P, P}, {0, 0, 0}},                             // its own cut: the run is P
        {3 * P - 100, {P, P, P - 100}, {0, 0, 100}},               // own cut 887: joins P's run
        {3 * P - 300, {P - 100, P - 100, P - 100}, {0, 0, 0}},     // 300 > a pad: own cut
        {2 * (P - 100) - 10, {P - 100, P - 110}, {0, 10}},         // joins the run of P - 100
        {100, {100}, {0}},                                          // one packet: never padded
        {2 * P, {P, P}, {0, 0}},                                    // own cut larger: kept
    };
    static_assert(3 * kSegPayload - 300 > 2 * kSegPayload, "the third case takes three packets");
    uint64_t wr_id = 1;
    for (const Case &c : cases) {
        post_send(wr_id++, c.len);
    }
    uint32_t psn = 1;
    for (size_t m = 0; m < cases.size(); ++m) {
        std::vector<Packet> packets;
        ASSERT_TRUE(await_message(&psn, &packets)) << "message " << m << " psn " << psn;
        std::vector<uint8_t> got;
        std::vector<uint32_t> payloads;
        std::vector<uint32_t> pads;
        for (const Packet &p : packets) {
            got.insert(got.end(), p.payload.begin(), p.payload.end());
            payloads.push_back(p.h.payload_len);
            pads.push_back(p.h.pad);
        }
        EXPECT_EQ(sends_[m], got) << "message " << m << " of " << cases[m].len << " bytes";
        EXPECT_EQ(cases[m].payloads, payloads)
            << "message " << m << " of " << cases[m].len << " bytes";
        EXPECT_EQ(cases[m].pads, pads) << "message " << m << " of " << cases[m].len << " bytes";
    }
}

// A WRITE is cut like a SEND (TxMsg::cut), each segment naming where its bytes go.
TEST_F(TxSchedulerSlowRto, tx_packet__write_goes_in_equal_segments_each_at_its_remote_address)
{
    // post a WRITE of 2000 bytes to 0x10000 / expect three segments of 667, 667, 666 bytes at
    // 0x10000, +667, +1334 carrying its bytes
    const std::vector<uint8_t> bytes = pattern(2000, 7);
    srcnic_wqe_t w = {};
    w.wr_id = 1;
    w.opcode = SRCNIC_OP_WRITE;
    w.dest = dest_;
    w.remote_addr = 0x10000;
    w.rkey = 0x1234;
    w.num_sge = 1;
    w.u.sge[0].addr = reinterpret_cast<uint64_t>(bytes.data());
    w.u.sge[0].length = 2000;
    ASSERT_EQ(SRCNIC_OK, qp_->post_send(w));
    std::vector<uint8_t> got;
    std::vector<uint32_t> sizes;
    std::vector<PacketHeader> segs;
    for (uint32_t psn = 1; psn <= 3; ++psn) {
        Packet p;
        ASSERT_TRUE(await_psn(psn, &p)) << "psn " << psn;
        EXPECT_EQ(static_cast<uint8_t>(Opcode::kWRITE), p.h.opcode);
        EXPECT_EQ(0x10000u + got.size(), p.h.addr);
        EXPECT_EQ(psn == 3, (p.h.flags & kFlagLast) != 0);
        got.insert(got.end(), p.payload.begin(), p.payload.end());
        sizes.push_back(p.h.payload_len);
        segs.push_back(p.h);
    }
    EXPECT_EQ(bytes, got);
    expect_cut_evenly(2000, segs);
    EXPECT_EQ((std::vector<uint32_t>{667, 667, 666}), sizes);
}

TEST_F(TxSchedulerSlowRto, tx_packet__ack_req_only_on_the_last_psn_assigned)
{
    // post two SENDs before the Nic runs / expect psn 1 without ACK_REQ (psn 2 follows it and
    // draws the acknowledgement), psn 2 with it
    post_send(1, 10);
    post_send(2, 10);
    Packet first;
    Packet second;
    ASSERT_TRUE(await_psn(1, &first));
    ASSERT_TRUE(await_psn(2, &second));
    EXPECT_EQ(kFlagSyn | kFlagFirst | kFlagLast, first.h.flags) << to_string(first.h);
    EXPECT_EQ(kFlagSyn | kFlagFirst | kFlagLast | kFlagAckReq, second.h.flags)
        << to_string(second.h);
}

// Few retries and a short RTO: a connection whose peer never answers fails quickly.
class TxSchedulerFewRetries : public TxScheduler {
protected:
    srcnic_config_t config() override
    {
        srcnic_config_t c = protocol_config();
        c.retry_count = 2;
        c.rto_us = c.rto_max_us = 1000;
        return c;
    }
};

TEST_F(TxSchedulerFewRetries, check_timers__retry_count_exhausted_fails_with_endpoint_timeout)
{
    Counters before(*nic_);
    const uint64_t epoch = nic_->remote_epoch();
    post_send(1, 10);
    // never answer / expect 2 retransmissions, then the SEND completed with ENDPOINT_TIMEOUT
    srcnic_cqe_t cqe;
    ASSERT_TRUE(await_cqe(qp_, &cqe));
    EXPECT_EQ(SRCNIC_ERR_ENDPOINT_TIMEOUT, cqe.status);
    EXPECT_EQ(3u, before.delta(SRCNIC_CNT_TIMEOUTS));
    EXPECT_EQ(2u, before.delta(SRCNIC_CNT_RETRANSMITS));
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_CONN_FAILED));
    EXPECT_EQ(SRCNIC_ERR_ENDPOINT_TIMEOUT, nic_->dest_status(dest_));
    // Attached processes stop reusing the peers they were told of (agent/proto.h).
    EXPECT_LT(epoch, nic_->remote_epoch());
    // A new destination to the failed peer starts afresh: another peer, and a new epoch.
    srcnic_dest_t fresh;
    const uint64_t failed = nic_->remote_epoch();
    ASSERT_EQ(SRCNIC_OK, nic_->dest_create(peer_->nic_addr(), dest_.qpn, &fresh));
    EXPECT_NE(dest_.peer, fresh.peer);
    EXPECT_LT(failed, nic_->remote_epoch());
    EXPECT_EQ(SRCNIC_OK, nic_->dest_status(fresh));
}

TEST_F(TxSchedulerSlowRto, tx_schedule__window_limits_packets_in_flight)
{
    // post a SEND of 20 packets (window 16) / expect psn 1..16, then nothing
    ASSERT_NO_FATAL_FAILURE(fill_window());
    // receive ACK of psn 1..8 / expect psn 17..20, the rest of the message
    Counters before(*nic_);
    ack_nic(9, 1);
    std::vector<Packet> out;
    for (Packet &p : run_for(kLookUs)) {
        if (p.h.opcode == kSend) {
            out.push_back(std::move(p));
        }
    }
    // The ack gave a round-trip sample of about kLookUs (the look above), and a tail-loss probe
    // follows two of them after the last transmission: a thread kept off its CPU for a few ms
    // late in this look (a loaded machine, ASan: 1 run in 30) sees it go out too.
    ASSERT_EQ(4u + before.delta(SRCNIC_CNT_TAIL_PROBES), out.size())
        << "PSNs sent: " << ::testing::PrintToString(send_psns(out));
    EXPECT_EQ(17u, out[0].h.psn);
    EXPECT_EQ(20u, out[3].h.psn);
    EXPECT_TRUE(out[3].h.flags & kFlagLast);
    // receive ACK of everything / expect the SEND completed
    ack_nic(21, 1);
    srcnic_cqe_t cqe;
    ASSERT_TRUE(await_cqe(qp_, &cqe));
    EXPECT_EQ(SRCNIC_OK, cqe.status);
}

TEST_F(TxSchedulerSlowRto, tail_probe__lost_newest_packet_resent_before_the_timeout_once)
{
    exchange_one(1);
    ASSERT_GT(srtt_us(), 0u);
    Counters before(*nic_);
    const uint64_t t0 = now_ns();
    post_send(2, 10);
    Packet first;
    ASSERT_TRUE(await_psn(2, &first));
    // do not acknowledge / expect psn 2 again with ACK_REQ, as a probe two round trips (and
    // the peer's ack delay) later, not the timeout's retransmission
    Packet probe;
    ASSERT_TRUE(await_op(Opcode::kSEND, &probe));
    EXPECT_LT(now_ns() - t0, kSlowRtoUs * kNsPerUs) << "resent by the timeout, not a probe";
    EXPECT_EQ(2u, probe.h.psn);
    EXPECT_NE(0, probe.h.flags & kFlagAckReq);
    EXPECT_EQ(first.payload, probe.payload);
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_TAIL_PROBES));
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_RETRANSMITS));
    EXPECT_EQ(0u, before.delta(SRCNIC_CNT_TIMEOUTS));
    // still no acknowledgement / expect no second probe: one until an ack advances
    std::vector<Packet> out = run_for(20000);
    EXPECT_EQ(0u, count_op(out, Opcode::kSEND));
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_TAIL_PROBES));
    ack_and_complete(3, 2, 2);
}

// A LAZY_ACK request's last packet asks for no prompt acknowledgement: the peer acknowledges
// it with its next packet back or after its acknowledgement delay (§5.3), so the probe waits
// that delay, not only the next-progress allowance of a packet that asked (§5.5). (A lower
// bound: the probe can only be later, never earlier, on a loaded machine.)
TEST_F(TxSchedulerSlowRto, tail_probe__lazy_tail_waits_the_peers_ack_delay)
{
    exchange_one(1);
    const uint32_t srtt = srtt_us();
    ASSERT_GT(srtt, 0u);
    Counters before(*nic_);
    // (The Nic sends it, and arms the probe, after this: the time it is seen arriving is later,
    // and would not bound the probe's. The Nic's clock, carried by the TSC, and this one may
    // differ by a few microseconds: 50 are allowed, far below the 300 the old allowance was
    // shorter.)
    const uint64_t posted_ns = now_ns();
    post_send(2, 10, 0, SRCNIC_WQE_FLAG_LAZY_ACK);
    Packet first;
    ASSERT_TRUE(await_psn(2, &first));
    EXPECT_EQ(0, first.h.flags & kFlagAckReq);
    // do not acknowledge / expect psn 2 again, with ACK_REQ, as a probe: no sooner than two
    // round trips and the peer's acknowledgement delay after it went
    Packet probe;
    ASSERT_TRUE(await_op(Opcode::kSEND, &probe));
    EXPECT_GE(now_ns() - posted_ns + 50 * kNsPerUs, 2 * static_cast<uint64_t>(srtt) * kNsPerUs + kAckDelayNs);
    EXPECT_EQ(2u, probe.h.psn);
    EXPECT_NE(0, probe.h.flags & kFlagAckReq);
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_TAIL_PROBES));
    EXPECT_EQ(0u, before.delta(SRCNIC_CNT_TIMEOUTS));
    ack_and_complete(3, 2, 2);
}

TEST_F(TxSchedulerSlowRto, tail_probe__newest_held_by_peer_resends_oldest_hole_answer_the_rest)
{
    exchange_one(1);
    Counters before(*nic_);
    for (uint64_t i = 2; i <= 4; ++i) {
        post_send(i, 10);
    }
    Packet p;
    ASSERT_TRUE(await_psn(4, &p));
    // receive ACK ack_psn 2 reporting psn 4 alone: one later packet is no gap yet
    sack_nic(2, 0x2);
    // expect psn 2 as the probe (the peer holds the newest), no fast retransmit, no timeout
    EXPECT_EQ(2u, next_send_psn());
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_TAIL_PROBES));
    EXPECT_EQ(0u, before.delta(SRCNIC_CNT_FAST_RETRANSMITS));
    // receive the answer, ACK ack_psn 3 reporting psn 4 / expect psn 3 resent at once: after a
    // probe one later packet shows the gap
    sack_nic(3, 0x1);
    EXPECT_EQ(3u, next_send_psn());
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_FAST_RETRANSMITS));
    EXPECT_EQ(0u, before.delta(SRCNIC_CNT_TIMEOUTS));
    ack_and_complete(5, 2, 4);
}

// A link that passes everything on to another and records, for each tx_burst call, how many
// datagrams it was given and their payload bytes (headers left out).
class BurstRecorder final : public Link {
public:
    struct Burst {
        uint32_t datagrams;
        uint64_t payload;
    };

    explicit BurstRecorder(std::unique_ptr<Link> inner) : inner_(std::move(inner)) {}

    uint32_t tx_burst(const TxDatagram *dgrams, uint32_t n) override
    {
        Burst b{n, 0};
        for (uint32_t i = 0; i < n; ++i) {
            for (uint32_t k = 0; k < dgrams[i].iovcnt; ++k) {
                b.payload += dgrams[i].iov[k].iov_len;
            }
            b.payload -= sizeof(PacketHeader);
        }
        bursts_.push_back(b);
        return inner_->tx_burst(dgrams, n);
    }
    uint32_t rx_burst(RxDatagram *slots, uint32_t n) override { return inner_->rx_burst(slots, n); }
    const LinkAddr &local_addr() const override { return inner_->local_addr(); }
    uint32_t mtu() const override { return inner_->mtu(); }
    int event_fd() const override { return inner_->event_fd(); }
    void rx_notify(bool on) override { inner_->rx_notify(on); }
    bool rx_pending() const override { return inner_->rx_pending(); }
    const LinkStats &stats() const override { return inner_->stats(); }

    const std::vector<Burst> &bursts() const { return bursts_; }

private:
    std::unique_ptr<Link> inner_;
    std::vector<Burst> bursts_;
};

// The Nic on a fabric of the largest datagrams, its link recording the batches it is given.
class TxBatching : public OwnRequestsWithRto<kSlowRtoUs> {
protected:
    static constexpr uint32_t kBigMtu = 65000;
    static constexpr uint32_t kBigSeg = kBigMtu - sizeof(PacketHeader);

    void SetUp() override
    {
        set_up(kBigMtu, 64, [this](std::unique_ptr<Link> link) {
            recorder_ = new BurstRecorder(std::move(link));
            return std::unique_ptr<Link>(recorder_);
        });
        dest_ = dest_to_peer();
    }

    BurstRecorder *recorder_ = nullptr;   // owned by the Nic
};

TEST_F(TxBatching, tx_slot__batch_goes_to_the_link_once_it_holds_kTxBatchBytes)
{
    // A window of full datagrams, more than kTxBatchBytes in all: each batch stops at the
    // first datagram that takes it to the bound, where a batch could hold 32.
    ASSERT_GT(kWindow * uint64_t{kBigSeg}, 2 * kTxBatchBytes);
    post_send(1, kWindow * kBigSeg);
    ASSERT_EQ(kWindow, count_op(run_for(3000), Opcode::kSEND));
    const uint32_t per_batch = static_cast<uint32_t>((kTxBatchBytes + kBigSeg - 1) / kBigSeg);
    const std::vector<BurstRecorder::Burst> &bursts = recorder_->bursts();
    ASSERT_EQ((kWindow + per_batch - 1) / per_batch, bursts.size());
    for (size_t i = 0; i + 1 < bursts.size(); ++i) {
        EXPECT_EQ(per_batch, bursts[i].datagrams) << "batch " << i;
        EXPECT_EQ(uint64_t{per_batch} * kBigSeg, bursts[i].payload) << "batch " << i;
    }
    EXPECT_EQ(kWindow - (bursts.size() - 1) * per_batch, bursts.back().datagrams);
}

TEST_F(TxBatching, tx_slot__small_datagrams_still_go_in_one_batch)
{
    for (uint64_t i = 1; i <= 8; ++i) {
        post_send(i, 100);
    }
    ASSERT_EQ(8u, count_op(run_for(3000), Opcode::kSEND));
    const std::vector<BurstRecorder::Burst> &bursts = recorder_->bursts();
    ASSERT_EQ(1u, bursts.size());
    EXPECT_EQ(8u, bursts[0].datagrams);
    EXPECT_EQ(800u, bursts[0].payload);
}

} // namespace
} // namespace test
} // namespace srcnic
