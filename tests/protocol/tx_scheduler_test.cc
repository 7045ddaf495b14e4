// Protocol tests of the Nic's own requests as the tx scheduler sends them (PROTOCOL.md §5.1,
// §5.4-5.6): what a raw peer sees of them, and what its acknowledgements, NAKs and resets do.
#include "raw_peer.h"

namespace srcnic {
namespace test {
namespace {

constexpr uint8_t kSend = static_cast<uint8_t>(Opcode::kSEND);

// The PSNs of the SENDs among packets, in order.
std::vector<uint32_t> send_psns(const std::vector<Packet> &packets)
{
    std::vector<uint32_t> psns;
    for (const Packet &q : packets) {
        if (q.h.opcode == kSend) {
            psns.push_back(q.h.psn);
        }
    }
    return psns;
}

class TxScheduler : public ProtocolTest {
protected:
    void SetUp() override
    {
        ProtocolTest::SetUp();
        dest_ = dest_to_peer();
    }

    // How long a step looks at what the Nic sends (a bounded look: it shows what does not go).
    static constexpr uint64_t kLookUs = 3000;

    // Posts a SEND of len pattern bytes from qp_ to the raw peer.
    void post_send(uint64_t wr_id, uint32_t len, uint32_t imm = 0)
    {
        sends_.push_back(pattern(len, static_cast<uint32_t>(wr_id)));
        srcnic_wqe_t w = {};
        w.wr_id = wr_id;
        w.opcode = SRCNIC_OP_SEND;
        w.imm = imm;
        w.dest = dest_;
        w.num_sge = 1;
        w.u.sge[0].addr = reinterpret_cast<uint64_t>(sends_.back().data());
        w.u.sge[0].length = len;
        ASSERT_EQ(SRCNIC_OK, qp_->post_send(w));
    }

    // Posts a SEND of 20 packets (window 16) / expects psn 1..16 out, then nothing; learns the
    // Nic's connection id.
    void fill_window()
    {
        post_send(1, 20 * kSegPayload);
        std::vector<Packet> out = run_for(kLookUs);
        ASSERT_EQ(kWindow, out.size());
        for (uint32_t i = 0; i < kWindow; ++i) {
            EXPECT_EQ(1 + i, out[i].h.psn);
            EXPECT_EQ(i * kSegPayload, out[i].h.addr);
        }
        peer_->nic_conn(out[0].h.src_conn);
    }

    // Receive / expect: an ACK of everything before ack_psn reporting the PSNs of sack (bit i:
    // PSN ack_psn + 1 + i), at stream position 1 (the raw peer sends no requests).
    void sack_nic(uint32_t ack_psn, uint64_t sack)
    {
        PacketHeader h = peer_->header(Opcode::kACK, 1, 0);
        h.ack_psn = ack_psn;
        h.sack = sack;
        peer_->send(h);
    }

    // Receive / expect: an ACK of everything before ack_psn, then the SENDs wr_ids first..last
    // completed in order.
    void ack_and_complete(uint32_t ack_psn, uint64_t first, uint64_t last)
    {
        ack_nic(ack_psn, 1);
        for (uint64_t wr_id = first; wr_id <= last; ++wr_id) {
            srcnic_cqe_t cqe;
            ASSERT_TRUE(await_cqe(qp_, &cqe));
            EXPECT_EQ(wr_id, cqe.wr_id);
            EXPECT_EQ(SRCNIC_OK, cqe.status);
        }
    }

    srcnic_dest_t dest_{};
    std::vector<std::vector<uint8_t>> sends_;   // payloads of posted SENDs
};

// The same with a retransmission timeout of its own (rto_us = rto_max_us = kRtoUs_).
template <uint32_t kRtoUs_>
class TxSchedulerWithRto : public TxScheduler {
protected:
    srcnic_config_t config() override
    {
        srcnic_config_t c = protocol_config();
        c.rto_us = c.rto_max_us = kRtoUs_;
        return c;
    }
};

// A retransmission timeout long enough that no timer fires while a test looks at one exchange.
constexpr uint32_t kSlowRtoUs = 500000;

class TxSchedulerSlowRto : public TxSchedulerWithRto<kSlowRtoUs> {
protected:

    // Posts a SEND of 10 bytes and acknowledges it as soon as it is out: the Nic gets a short
    // round-trip sample (and learns nothing else). Returns its PSN.
    uint32_t exchange_one(uint64_t wr_id)
    {
        post_send(wr_id, 10);
        Packet p;
        EXPECT_TRUE(await_op(Opcode::kSEND, &p));
        peer_->nic_conn(p.h.src_conn);
        ack_nic(p.h.psn + 1, 1);
        srcnic_cqe_t cqe;
        EXPECT_TRUE(await_cqe(qp_, &cqe));
        EXPECT_EQ(SRCNIC_OK, cqe.status);
        return p.h.psn;
    }

    uint32_t srtt_us()
    {
        uint32_t srtt = 0, rto = 0;
        EXPECT_TRUE(nic_->dest_timing(dest_, &srtt, &rto));
        return srtt;
    }

    // Posts n SENDs of 10 bytes (wr_ids 1..n, PSNs 1..n on a new connection), awaits the last
    // one's first transmission and learns the Nic's connection id from it.
    void post_sends(uint64_t n)
    {
        for (uint64_t i = 1; i <= n; ++i) {
            post_send(i, 10);
        }
        Packet p;
        ASSERT_TRUE(await_psn(static_cast<uint32_t>(n), &p));
        peer_->nic_conn(p.h.src_conn);
    }

    // Awaits the Nic's next SEND packet and returns its PSN (0 if none came).
    uint32_t next_send_psn()
    {
        Packet p;
        EXPECT_TRUE(await_op(Opcode::kSEND, &p));
        return p.h.psn;
    }

};

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

// Timeouts and their recovery, with an RTO long enough that a test thread off its CPU for a few
// ms between two steps does not see a second timeout (the steps run for a quarter of it).
constexpr uint32_t kRecoveryRtoUs = 40000;

class TxSchedulerRecovery : public TxSchedulerWithRto<kRecoveryRtoUs> {
protected:
    // PSNs 1..16 out (17..20 wait for the window), then, if sack is not 0, an ACK of nothing
    // reporting sack; the RTO resends PSN 1 alone; an ACK of 1..8 follows, without sack.
    // Expect 17..20 let into the window and nothing resent, spurious timeouts counted.
    void timeout_then_ack_past_the_resent_packet(uint64_t sack, uint64_t spurious)
    {
        fill_window();
        Counters before(*nic_);
        if (sack != 0) {
            sack_nic(1, sack);
        }
        // do not acknowledge / expect PSN 1 alone again after the RTO, with ACK_REQ
        Packet again;
        std::vector<Packet> skipped;
        ASSERT_TRUE(await_op(Opcode::kSEND, &again, &skipped));
        EXPECT_EQ(1u, again.h.psn);
        EXPECT_NE(0, again.h.flags & kFlagAckReq);
        EXPECT_TRUE(skipped.empty());
        EXPECT_EQ(1u, before.delta(SRCNIC_CNT_TIMEOUTS));
        // receive ACK ack_psn 9: the first transmissions of 2..8 arrived / expect 17..20, let
        // into the window, and nothing resent for a quarter of an RTO
        ack_nic(9, 1);
        EXPECT_EQ((std::vector<uint32_t>{17, 18, 19, 20}), send_psns(run_for(kRecoveryRtoUs / 4)));
        EXPECT_EQ(1u, before.delta(SRCNIC_CNT_RETRANSMITS));
        EXPECT_EQ(spurious, before.delta(SRCNIC_CNT_SPURIOUS_TIMEOUTS));
        // receive ACK of everything / expect the SEND completed
        ack_and_complete(21, 1, 1);
    }
};

// A timeout that met a peer slow to answer, not a lost flight (its thread off the CPU for a few
// ms, the window waiting in its socket): the ack that follows covers packets the recovery never
// resent, and that ends the recovery. It costs one packet, not a window of duplicates.
TEST_F(TxSchedulerRecovery, timeout__ack_of_packets_never_resent_ends_the_recovery)
{
    timeout_then_ack_past_the_resent_packet(0, 1);
}

// A timeout after the peer reported a hole (PSN 1 missing, 3 held: one later packet, too few for
// a fast retransmit) repairs a real loss: the ack that follows the resent packet covers what the
// peer held and ends the recovery as above, but the timeout is not counted as spurious.
TEST_F(TxSchedulerRecovery, timeout__that_repaired_a_reported_hole_is_not_spurious)
{
    timeout_then_ack_past_the_resent_packet(1u << 1, 0);
}

// A flight that was lost: each ack covers only packets the recovery resent, and each resends
// twice as many as it acknowledged, the way a slow start grows.
TEST_F(TxSchedulerRecovery, timeout__acks_of_resent_packets_resend_twice_as_many)
{
    fill_window();
    Counters before(*nic_);
    // do not acknowledge / expect PSN 1 alone again after the RTO
    Packet again;
    ASSERT_TRUE(await_op(Opcode::kSEND, &again));
    EXPECT_EQ(1u, again.h.psn);
    // receive ACK 2, then 4, then 8 (each covering what was resent) / expect 2-3, then 4-7,
    // then 8-15 resent, well before another RTO, each run followed by the new PSNs (up to 20)
    // the ack let into the window
    const struct {
        uint32_t ack_psn;
        std::vector<uint32_t> sent;
    } steps[] = {{2, {2, 3, 17}},
                 {4, {4, 5, 6, 7, 18, 19}},
                 {8, {8, 9, 10, 11, 12, 13, 14, 15, 20}}};
    for (const auto &step : steps) {
        ack_nic(step.ack_psn, 1);
        EXPECT_EQ(step.sent, send_psns(run_for(kRecoveryRtoUs / 4)))
            << "after ack " << step.ack_psn;
    }
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_TIMEOUTS));
    EXPECT_EQ(0u, before.delta(SRCNIC_CNT_SPURIOUS_TIMEOUTS));
    ack_and_complete(21, 1, 1);
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
        std::vector<uint8_t> got;
        for (;;) {
            Packet p;
            ASSERT_TRUE(await_psn(psn, &p)) << "message " << m << " psn " << psn;
            ++psn;
            EXPECT_EQ(kSend, p.h.opcode);
            EXPECT_LE(p.h.payload_len, kSegPayload);
            got.insert(got.end(), p.payload.begin(), p.payload.end());
            if (p.h.flags & kFlagLast) {
                break;
            }
        }
        EXPECT_EQ(sent[m], got) << "message " << m << " of " << sent[m].size() << " bytes";
    }
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
    post_send(1, 10);
    // never answer / expect 2 retransmissions, then the SEND completed with ENDPOINT_TIMEOUT
    srcnic_cqe_t cqe;
    ASSERT_TRUE(await_cqe(qp_, &cqe));
    EXPECT_EQ(SRCNIC_ERR_ENDPOINT_TIMEOUT, cqe.status);
    EXPECT_EQ(3u, before.delta(SRCNIC_CNT_TIMEOUTS));
    EXPECT_EQ(2u, before.delta(SRCNIC_CNT_RETRANSMITS));
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_CONN_FAILED));
    EXPECT_EQ(SRCNIC_ERR_ENDPOINT_TIMEOUT, nic_->dest_status(dest_));
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

TEST_F(TxSchedulerSlowRto, apply_ack__data_let_into_the_window_goes_in_the_same_call)
{
    // post a SEND of 20 packets (window 16) / psn 1..16 go out
    ASSERT_NO_FATAL_FAILURE(fill_window());
    // receive ACK of psn 1..4 / expect psn 17..20 from the call that received it
    ack_nic(5, 1);
    const std::vector<Packet> out = progress_until_received(1);
    ASSERT_EQ(4u, out.size());
    EXPECT_EQ(17u, out[0].h.psn);
    EXPECT_EQ(20u, out[3].h.psn);
}

TEST_F(TxSchedulerSlowRto, rx_control__rnr_nak_resends_refused_psn_after_delay)
{
    Counters before(*nic_);
    post_send(1, 10);
    post_send(2, 10);
    Packet p1, p2;
    ASSERT_TRUE(await_psn(1, &p1));
    ASSERT_TRUE(await_psn(2, &p2));
    peer_->nic_conn(p1.h.src_conn);
    // receive NAK RNR psn 2 (psn 1 was accepted)
    // expect RNR_RECEIVED, psn 2 sent again (not psn 1), no timeout counted
    const uint64_t t0 = now_ns();
    PacketHeader nak = peer_->header(Opcode::kNAK, 1, 0);
    nak.psn = 2;
    nak.ack_psn = 2;
    nak.imm = static_cast<uint32_t>(NakReason::kRnr);
    peer_->send(nak);
    Packet again;
    std::vector<Packet> skipped;
    ASSERT_TRUE(await([](const Packet &p) { return p.h.opcode == kSend; }, &again, &skipped));
    EXPECT_EQ(2u, again.h.psn);
    EXPECT_GE(now_ns() - t0, 100 * kNsPerUs) << "resent before the RNR delay";
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_RNR_RECEIVED));
    EXPECT_EQ(0u, before.delta(SRCNIC_CNT_TIMEOUTS));
    // receive a NAK for psn 7, never sent / expect DROP_BAD_RESPONSE, nothing resent
    nak.psn = 7;
    peer_->send(nak);
    run_for(1000);
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_DROP_BAD_RESPONSE));
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_RNR_RECEIVED));
    // receive ACK of psn 1 and 2 / expect both SENDs completed, in order
    ack_nic(3, 1);
    srcnic_cqe_t cqe;
    for (uint64_t wr_id = 1; wr_id <= 2; ++wr_id) {
        ASSERT_TRUE(await_cqe(qp_, &cqe));
        EXPECT_EQ(wr_id, cqe.wr_id);
        EXPECT_EQ(SRCNIC_OK, cqe.status);
    }
}

TEST_F(TxSchedulerSlowRto, note_sack__gap_with_two_later_packets_is_retransmitted_early)
{
    Counters before(*nic_);
    post_sends(5);
    // receive ACK ack_psn 1, sack psn 2 and 3 / expect FAST_RETRANSMITS and psn 1 resent (not 2
    // or 3) long before the RTO
    sack_nic(1, 0x3);
    const std::vector<uint32_t> resent = send_psns(run_for(3000));
    ASSERT_FALSE(resent.empty());
    EXPECT_EQ(1u, resent[0]);
    EXPECT_EQ(resent.end(), std::find(resent.begin(), resent.end(), 2u));
    EXPECT_EQ(resent.end(), std::find(resent.begin(), resent.end(), 3u));
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_FAST_RETRANSMITS));
    EXPECT_EQ(0u, before.delta(SRCNIC_CNT_TIMEOUTS));
}

TEST_F(TxSchedulerSlowRto, note_sack__new_hole_resent_at_once_old_one_not_again_within_quarter_rto)
{
    Counters before(*nic_);
    post_sends(8);
    // receive ACK ack_psn 1, sack psn 2 and 3 / expect psn 1 resent
    sack_nic(1, 0x3);
    EXPECT_EQ(1u, next_send_psn());
    // receive ACK ack_psn 1, sack psn 2, 3, 5, 6 / expect psn 4 resent at once, psn 1 not again
    // (resent a moment ago, within the quarter timeout)
    sack_nic(1, 0x1b);
    EXPECT_EQ(std::vector<uint32_t>{4}, send_psns(run_for(3000)));
    EXPECT_EQ(2u, before.delta(SRCNIC_CNT_FAST_RETRANSMITS));
    EXPECT_EQ(0u, before.delta(SRCNIC_CNT_TIMEOUTS));
    ack_and_complete(9, 1, 8);
}

TEST_F(TxSchedulerSlowRto, rx_control__ack_ahead_of_delivered_packets_is_deferred)
{
    post_buffer(7, 64);
    post_send(1, 10);
    Packet p;
    ASSERT_TRUE(await_psn(1, &p));
    peer_->nic_conn(p.h.src_conn);
    // receive ACK ack_psn 2 at stream position 2: our psn 1 is not there yet
    // expect the SEND not completed: the ACK waits for psn 1 (§5.4)
    ack_nic(2, 2);
    run_for(2000);
    srcnic_cqe_t cqe;
    EXPECT_EQ(0u, qp_->poll_cq(&cqe, 1)) << "ACK applied before the packets it follows";
    // receive SEND psn 1 (acknowledging nothing itself) / expect the RECV, then the SEND's
    // completion
    PacketHeader h = peer_->header(Opcode::kSEND, 1, kFlagFirst | kFlagLast);
    h.dst_qpn = qp_->qpn();
    h.src_qpn = kPeerQpn;
    peer_->send(h);
    ASSERT_TRUE(await_cqe(qp_, &cqe));
    EXPECT_EQ(SRCNIC_OP_RECV, cqe.opcode);
    EXPECT_EQ(7u, cqe.wr_id);
    ASSERT_TRUE(await_cqe(qp_, &cqe));
    EXPECT_EQ(SRCNIC_OP_SEND, cqe.opcode);
    EXPECT_EQ(1u, cqe.wr_id);
    EXPECT_EQ(SRCNIC_OK, cqe.status);
}

// --- §5.6 resets ---

// The RST an engine sends for a packet it has no connection for (tx_reset): no src_conn.
PacketHeader engine_rst(const RawPeer &peer, const Packet &answered)
{
    PacketHeader h = peer.header(Opcode::kRST, 0, 0);
    h.src_conn = 0;
    h.dst_conn = answered.h.src_conn;
    h.dst_nic = answered.h.src_nic;
    h.ack_psn = 0;
    return h;
}

TEST_F(TxSchedulerSlowRto, rx_control__rst_fails_connection_and_outstanding_requests)
{
    Counters before(*nic_);
    post_send(1, 10);
    post_send(2, 10);
    Packet p;
    ASSERT_TRUE(await_psn(2, &p));
    // receive RST for the Nic's connection (the peer has none) / expect CONN_FAILED and both
    // SENDs completed with CONNECTION_RESET
    peer_->send(engine_rst(*peer_, p));
    for (uint64_t wr_id = 1; wr_id <= 2; ++wr_id) {
        srcnic_cqe_t cqe;
        ASSERT_TRUE(await_cqe(qp_, &cqe));
        EXPECT_EQ(wr_id, cqe.wr_id);
        EXPECT_EQ(SRCNIC_ERR_CONNECTION_RESET, cqe.status);
    }
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_CONN_FAILED));
    EXPECT_EQ(SRCNIC_ERR_CONNECTION_RESET, nic_->dest_status(dest_));
    EXPECT_EQ(0u, nic_->num_connections());
    for (const Packet &q : run_for(1000)) {
        EXPECT_NE(kSend, q.h.opcode) << "sent on a failed connection: " << to_string(q.h);
    }
}

TEST_F(TxSchedulerSlowRto, rx_control__rst_from_peer_that_dropped_connection_fails_it)
{
    Counters before(*nic_);
    post_send(1, 10);
    Packet p;
    ASSERT_TRUE(await_psn(1, &p));
    peer_->nic_conn(p.h.src_conn);
    // receive ACK of psn 1 (the Nic learns our connection id) / expect the SEND completed
    ack_nic(2, 1);
    srcnic_cqe_t cqe;
    ASSERT_TRUE(await_cqe(qp_, &cqe));
    ASSERT_EQ(SRCNIC_OK, cqe.status);
    post_send(2, 10);
    ASSERT_TRUE(await_psn(2, &p));
    EXPECT_EQ(kPeerConn, p.h.dst_conn);
    // the peer has dropped its side meanwhile; it answers psn 2 as rx demux answers a packet
    // naming a connection it no longer has (WRONG_GEN): RST with dst_conn = the Nic's id
    // expect CONN_FAILED and the SEND completed with CONNECTION_RESET (§5.6: an RST fails the
    // connection it names)
    peer_->send(engine_rst(*peer_, p));
    ASSERT_TRUE(await_cqe(qp_, &cqe, 1.0)) << "RST ignored: DROP_WRONG_GEN went up by "
                                           << before.delta(SRCNIC_CNT_DROP_WRONG_GEN);
    EXPECT_EQ(2u, cqe.wr_id);
    EXPECT_EQ(SRCNIC_ERR_CONNECTION_RESET, cqe.status);
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_CONN_FAILED));
}

TEST_F(TxSchedulerSlowRto, rx_datagram__rst_from_another_incarnation_is_dropped)
{
    Counters before(*nic_);
    post_send(1, 10);
    Packet p;
    ASSERT_TRUE(await_psn(1, &p));
    peer_->nic_conn(p.h.src_conn);
    ack_nic(2, 1);
    srcnic_cqe_t cqe;
    ASSERT_TRUE(await_cqe(qp_, &cqe));
    post_send(2, 10);
    ASSERT_TRUE(await_psn(2, &p));
    // receive an RST naming the Nic's connection from the peer's address with another
    // incarnation: no engine sends that (a restarted one does not answer the old incarnation's
    // packets, PROTOCOL.md §7.3), so it is forged / expect DROP_WRONG_PEER, the connection and
    // the SEND intact: an acknowledgement from the real peer still completes it
    PacketHeader rst = engine_rst(*peer_, p);
    rst.src_nic = kPeerNic + 1;
    peer_->send(rst);
    run_for(1000);
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_DROP_WRONG_PEER));
    EXPECT_EQ(0u, before.delta(SRCNIC_CNT_CONN_FAILED));
    EXPECT_EQ(SRCNIC_OK, nic_->dest_status(dest_));
    ack_and_complete(3, 2, 2);
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

TEST_F(TxSchedulerSlowRto, rtt_sample__when_the_peer_reports_the_packet_not_after_a_hole_is_repaired)
{
    constexpr uint32_t kHoleUs = 100000;
    exchange_one(1);
    // psn 2 (timed) and psn 3 go out together; the peer acknowledges psn 2 at once
    post_send(2, 10);
    post_send(3, 10);
    Packet p;
    ASSERT_TRUE(await_psn(3, &p));
    ack_nic(3, 1);
    srcnic_cqe_t cqe;
    ASSERT_TRUE(await_cqe(qp_, &cqe));
    const uint32_t srtt_before = srtt_us();
    // psn 4 (timed) goes out; the peer reports it at once, psn 3 still missing
    post_send(4, 10);
    ASSERT_TRUE(await_psn(4, &p));
    sack_nic(3, 0x1);
    // 100 ms pass before the hole is repaired and everything acknowledged
    run_for(kHoleUs);
    ack_and_complete(5, 3, 4);
    // expect the sample of the prompt report only: one taken at the cumulative ack would be
    // 100 ms and raise srtt by about 100 / 8 ms (the bound, half that, leaves room for a
    // preempted test thread in the prompt exchanges)
    EXPECT_LT(static_cast<int64_t>(srtt_us()) - static_cast<int64_t>(srtt_before),
              static_cast<int64_t>(kHoleUs / 16))
        << "the repair time went into the round trip";
}

TEST_F(TxSchedulerSlowRto, rtt_sample__none_from_a_packet_that_was_resent)
{
    exchange_one(1);
    const uint32_t srtt = srtt_us();
    Counters before(*nic_);
    post_send(2, 10);
    Packet p;
    ASSERT_TRUE(await_psn(2, &p));
    // no acknowledgement until psn 2 was probed (resent) and 30 ms passed
    ASSERT_TRUE(await_op(Opcode::kSEND, &p));
    ASSERT_EQ(1u, before.delta(SRCNIC_CNT_TAIL_PROBES));
    run_for(30000);
    ack_and_complete(3, 2, 2);
    // expect no sample (Karn): the ack may answer either transmission
    EXPECT_EQ(srtt, srtt_us());
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
class TxBatching : public TxSchedulerWithRto<kSlowRtoUs> {
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
