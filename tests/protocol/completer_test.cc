// Protocol tests of the completer (PROTOCOL.md §3.4, §3.5, §5.3-5.5): answers from a raw peer to
// the Nic's own requests — READ responses placed, error answers completing requests, answers or
// acknowledgements that match nothing — and what its acknowledgements and NAKs do: the window
// released, RTT samples, SACK and fast retransmit, the steps and end of a timeout's recovery,
// RNR back-off.
#include "own_requests.h"

namespace srcnic {
namespace test {
namespace {

class Completer : public ProtocolTest {
protected:
    srcnic_config_t config() override
    {
        srcnic_config_t c = protocol_config();
        c.rto_us = c.rto_max_us = 500000;   // no retransmission while a test looks
        return c;
    }

    void SetUp() override
    {
        ProtocolTest::SetUp();
        dest_ = dest_to_peer();
    }

    // Posts a request of qp_ to the raw peer and returns its first packet (psn).
    Packet post(const srcnic_wqe_t &w, uint32_t psn)
    {
        EXPECT_EQ(SRCNIC_OK, qp_->post_send(w));
        Packet p;
        EXPECT_TRUE(await_psn(psn, &p));
        peer_->nic_conn(p.h.src_conn);
        return p;
    }

    // An answer of the raw peer (READ_RESP or ERR_RESP) to the request starting at req_psn.
    PacketHeader answer(Opcode op, uint32_t psn, uint32_t req_psn, uint16_t flags)
    {
        PacketHeader h = peer_->header(op, psn, flags);
        h.req_psn = req_psn;
        h.src_qpn = kPeerQpn;
        h.dst_qpn = qp_->qpn();
        return h;
    }

    srcnic_dest_t dest_{};
};

TEST_F(Completer, complete_answer__read_resp_is_placed_and_completes_read)
{
    std::vector<uint8_t> local(2000, 0);
    const std::vector<uint8_t> remote = pattern(2000, 21);
    srcnic_wqe_t w = make_rdma(SRCNIC_OP_READ, dest_, 1, local.data(), 2000, 0x7000, 0xabc00005);
    // post READ of 2000 bytes / expect READ_REQ psn 1, SYN|FIRST|LAST, no payload
    Packet req = post(w, 1);
    EXPECT_EQ(static_cast<uint8_t>(Opcode::kREAD_REQ), req.h.opcode);
    EXPECT_EQ(kFlagSyn | kFlagFirst | kFlagLast | kFlagAckReq, req.h.flags);
    EXPECT_EQ(2000u, req.h.msg_len);
    EXPECT_EQ(0x7000u, req.h.addr);
    EXPECT_EQ(0xabc00005u, req.h.rkey);
    EXPECT_EQ(0u, req.h.payload_len);
    // receive READ_RESP psn 1, 2 (acknowledging the READ_REQ) / expect no completion yet
    srcnic_cqe_t cqe;
    for (uint32_t seg = 0; seg < 3; ++seg) {
        const uint32_t off = seg * kSegPayload;
        const uint32_t len = std::min<uint32_t>(kSegPayload, 2000 - off);
        PacketHeader h = answer(Opcode::kREAD_RESP, 1 + seg, 1,
                                static_cast<uint16_t>((seg == 0 ? kFlagFirst : 0) | (seg == 2 ? kFlagLast : 0)));
        h.msg_len = 2000;
        h.addr = off;
        h.ack_psn = 2;
        peer_->send(h, std::vector<uint8_t>(remote.begin() + off, remote.begin() + off + len));
        if (seg == 1) {
            run_for(1000);
            EXPECT_EQ(0u, qp_->poll_cq(&cqe, 1)) << "READ completed before its last response";
        }
    }
    // receive READ_RESP psn 3 (LAST) / expect the READ completed OK with the bytes placed
    ASSERT_TRUE(await_cqe(qp_, &cqe));
    EXPECT_EQ(SRCNIC_OK, cqe.status);
    EXPECT_EQ(SRCNIC_OP_READ, cqe.opcode);
    EXPECT_EQ(1u, cqe.wr_id);
    EXPECT_EQ(2000u, cqe.byte_len);
    EXPECT_EQ(remote, local);
    // expect the responses acknowledged
    Packet ack;
    ASSERT_TRUE(await([](const Packet &p) { return p.h.ack_psn == 4; }, &ack));
}

TEST_F(Completer, complete_answer__read_resp_at_wrong_offset_is_dropped)
{
    std::vector<uint8_t> local(100, 0);
    Counters before(*nic_);
    post(make_rdma(SRCNIC_OP_READ, dest_, 1, local.data(), 100, 0x7000, 0xabc00005), 1);
    // receive READ_RESP psn 1 claiming offset 10 / expect DROP_BAD_RESPONSE, nothing placed
    PacketHeader h = answer(Opcode::kREAD_RESP, 1, 1, kFlagFirst | kFlagLast);
    h.msg_len = 100;
    h.addr = 10;
    h.ack_psn = 2;
    peer_->send(h, std::vector<uint8_t>(90, 0xee));
    run_for(1000);
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_DROP_BAD_RESPONSE));
    srcnic_cqe_t cqe;
    EXPECT_EQ(0u, qp_->poll_cq(&cqe, 1));
    EXPECT_EQ(std::vector<uint8_t>(100, 0), local);
    // receive READ_RESP psn 2 with more bytes than the READ asked / expect DROP_BAD_RESPONSE
    h.psn = 2;
    h.addr = 0;
    peer_->send(h, std::vector<uint8_t>(101, 0xee));
    run_for(1000);
    EXPECT_EQ(2u, before.delta(SRCNIC_CNT_DROP_BAD_RESPONSE));
    EXPECT_EQ(std::vector<uint8_t>(100, 0), local);
}

TEST_F(Completer, complete_answer__err_resp_completes_request_with_its_status)
{
    std::vector<uint8_t> data = pattern(10, 1);
    post(make_send(dest_, 1, data.data(), 10), 1);
    // receive ERR_RESP psn 1, req_psn 1, UNREACHABLE (not acknowledging the SEND yet)
    // expect no completion: the request waits for its acknowledgement (§5.4)
    PacketHeader h = answer(Opcode::kERR_RESP, 1, 1, kFlagFirst | kFlagLast);
    h.imm = static_cast<uint32_t>(SRCNIC_ERR_UNREACHABLE);
    peer_->send(h);
    // expect the ERR_RESP acknowledged (ack_psn 2)
    Packet ack;
    ASSERT_TRUE(await([](const Packet &p) { return p.h.ack_psn == 2; }, &ack));
    run_for(1000);
    srcnic_cqe_t cqe;
    EXPECT_EQ(0u, qp_->poll_cq(&cqe, 1));
    // receive ACK of the SEND at stream position 2 / expect the SEND completed UNREACHABLE
    ack_nic(2, 2);
    ASSERT_TRUE(await_cqe(qp_, &cqe));
    EXPECT_EQ(1u, cqe.wr_id);
    EXPECT_EQ(SRCNIC_ERR_UNREACHABLE, cqe.status);
}

TEST_F(Completer, complete_answer__err_resp_with_success_or_unknown_status_is_an_io_error)
{
    // receive ERR_RESP for a SEND with status OK, then for another with an unknown status
    // (a broken or forged peer) / expect both completed IO_ERROR, never OK
    std::vector<uint8_t> data = pattern(10, 1);
    post(make_send(dest_, 1, data.data(), 10), 1);
    post(make_send(dest_, 2, data.data(), 10), 2);
    const uint32_t statuses[] = {static_cast<uint32_t>(SRCNIC_OK), 3072u};
    for (uint32_t i = 0; i < 2; ++i) {
        PacketHeader h = answer(Opcode::kERR_RESP, 1 + i, 1 + i, kFlagFirst | kFlagLast);
        h.imm = statuses[i];
        peer_->send(h);
    }
    ack_nic(3, 3);
    for (uint64_t wr_id = 1; wr_id <= 2; ++wr_id) {
        srcnic_cqe_t cqe;
        ASSERT_TRUE(await_cqe(qp_, &cqe));
        EXPECT_EQ(wr_id, cqe.wr_id);
        EXPECT_EQ(SRCNIC_ERR_IO_ERROR, cqe.status);
    }
}

TEST_F(Completer, complete_answer__answer_to_no_request_is_dropped)
{
    std::vector<uint8_t> data = pattern(10, 1);
    Counters before(*nic_);
    post(make_send(dest_, 1, data.data(), 10), 1);
    // receive ERR_RESP psn 1 for req_psn 7, never sent / expect DROP_BAD_RESPONSE; the
    // SEND later completes OK
    PacketHeader h = answer(Opcode::kERR_RESP, 1, 7, kFlagFirst | kFlagLast);
    h.imm = static_cast<uint32_t>(SRCNIC_ERR_UNREACHABLE);
    peer_->send(h);
    // receive READ_RESP psn 2 for the SEND's psn (not a READ) / expect DROP_BAD_RESPONSE
    h = answer(Opcode::kREAD_RESP, 2, 1, kFlagFirst | kFlagLast);
    h.msg_len = 10;
    peer_->send(h, std::vector<uint8_t>(10, 0xee));
    run_for(1000);
    EXPECT_EQ(2u, before.delta(SRCNIC_CNT_DROP_BAD_RESPONSE));
    ack_nic(2, 3);
    srcnic_cqe_t cqe;
    ASSERT_TRUE(await_cqe(qp_, &cqe));
    EXPECT_EQ(SRCNIC_OK, cqe.status);
    EXPECT_EQ(std::vector<uint8_t>(pattern(10, 1)), data);
}

TEST_F(Completer, apply_ack__ack_of_unsent_psn_is_dropped)
{
    std::vector<uint8_t> data = pattern(10, 1);
    Counters before(*nic_);
    post(make_send(dest_, 1, data.data(), 10), 1);
    // receive ACK ack_psn 5 (only psn 1 was sent) / expect DROP_BAD_RESPONSE, no completion
    ack_nic(5, 1);
    run_for(1000);
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_DROP_BAD_RESPONSE));
    srcnic_cqe_t cqe;
    EXPECT_EQ(0u, qp_->poll_cq(&cqe, 1));
    // receive ACK ack_psn 2 / expect the SEND completed
    ack_nic(2, 1);
    ASSERT_TRUE(await_cqe(qp_, &cqe));
    EXPECT_EQ(SRCNIC_OK, cqe.status);
}

// --- READ responses checked while placed ---

// READ_RESP segments of kCheckWhilePlacingMin bytes and more: the receive path copies such a
// segment into the READ's destination as it checks the CRC (place_target, read_target), and
// complete_answer then finds it there.
class CompleterPlacing : public Completer {
protected:
    static constexpr uint32_t kBigSeg = kPlacingSeg;

    void SetUp() override
    {
        set_up(kPlacingMtu, 1024, nullptr);
        dest_ = dest_to_peer();
    }

    // Posts READ w (psn 1), then has the raw peer send an ACK that acknowledges nothing: the
    // Nic learns the peer's connection id from it, as from any first packet, which it checks
    // before it copies (only the next packet of a connection whose ids both sides know is
    // placed as checked).
    void post_read(const srcnic_wqe_t &w)
    {
        post(w, 1);
        PacketHeader h = peer_->header(Opcode::kACK, 1, 0);
        h.ack_psn = 1;
        peer_->send(h);
        progress_until_received(1);
    }

    // READ_RESP segment `seg` (psn 1 + seg) answering READ psn 1 of remote.size() bytes.
    std::vector<uint8_t> segment(const std::vector<uint8_t> &remote, uint32_t seg)
    {
        PacketHeader h = answer(Opcode::kREAD_RESP, 1, 1, 0);
        h.ack_psn = 2;
        return placing_segment(h, remote, seg);
    }
};

TEST_F(CompleterPlacing, check_while_placing__read_resp_segments_land_whole)
{
    std::vector<uint8_t> local(30000 + 16, 0);
    const std::vector<uint8_t> remote = pattern(30000, 22);
    post_read(make_rdma(SRCNIC_OP_READ, dest_, 1, local.data(), 30000, 0x7000, 0xabc00005));
    Counters before(*nic_);
    // receive READ_RESP psn 1, 2, 3 / expect the READ completed with every segment placed as
    // its CRC was checked, nothing written past the READ's 30000 bytes
    for (uint32_t seg = 0; seg < 3; ++seg) {
        peer_->send_bytes(segment(remote, seg));
    }
    srcnic_cqe_t cqe;
    ASSERT_TRUE(await_cqe(qp_, &cqe));
    EXPECT_EQ(SRCNIC_OK, cqe.status);
    EXPECT_EQ(30000u, cqe.byte_len);
    EXPECT_EQ(0, std::memcmp(local.data(), remote.data(), remote.size()));
    EXPECT_EQ(std::vector<uint8_t>(16, 0), std::vector<uint8_t>(local.begin() + 30000, local.end()));
    EXPECT_EQ(3u, before.delta(SRCNIC_CNT_PLACED_WHILE_CHECKED));
    EXPECT_EQ("", before.other_drops(SRCNIC_CNT_LAST));
}

TEST_F(CompleterPlacing, check_while_placing__corrupt_read_resp_is_dropped_and_its_resend_lands)
{
    std::vector<uint8_t> local(2 * kBigSeg, 0);
    const std::vector<uint8_t> remote = pattern(2 * kBigSeg, 23);
    post_read(make_rdma(SRCNIC_OP_READ, dest_, 1, local.data(), 2 * kBigSeg, 0x7000, 0xabc00005));
    Counters before(*nic_);
    // receive READ_RESP psn 1 (good), psn 2 with a payload bit flipped / expect
    // DROP_BAD_CHECKSUM and no completion; its resend completes the READ with the right bytes
    peer_->send_bytes(segment(remote, 0));
    std::vector<uint8_t> bad = segment(remote, 1);
    bad[sizeof(PacketHeader) + 5000] ^= 0x20;
    peer_->send_bytes(bad);
    run_for(20 * 1000);
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_DROP_BAD_CHECKSUM));
    srcnic_cqe_t cqe;
    EXPECT_EQ(0u, qp_->poll_cq(&cqe, 1)) << "completed a READ whose response failed its CRC";
    peer_->send_bytes(segment(remote, 1));
    ASSERT_TRUE(await_cqe(qp_, &cqe));
    EXPECT_EQ(SRCNIC_OK, cqe.status);
    EXPECT_EQ(remote, local);
    EXPECT_EQ(2u, before.delta(SRCNIC_CNT_PLACED_WHILE_CHECKED));
}

// A segment that spans two pieces of the READ's scatter list is copied piece by piece after the
// check, as before; one inside a piece is placed as checked.
TEST_F(CompleterPlacing, check_while_placing__segment_across_scatter_pieces_is_copied)
{
    const uint32_t len = 2 * kBigSeg;
    const uint32_t cut = kBigSeg + 100;   // segment 1 lies across the cut
    std::vector<uint8_t> first(cut, 0), second(len - cut, 0);
    const std::vector<uint8_t> remote = pattern(len, 24);
    srcnic_wqe_t w = make_rdma(SRCNIC_OP_READ, dest_, 1, first.data(), cut, 0x7000, 0xabc00005);
    w.num_sge = 2;
    w.u.sge[1].addr = reinterpret_cast<uint64_t>(second.data());
    w.u.sge[1].length = len - cut;
    post_read(w);
    Counters before(*nic_);
    peer_->send_bytes(segment(remote, 0));
    peer_->send_bytes(segment(remote, 1));
    srcnic_cqe_t cqe;
    ASSERT_TRUE(await_cqe(qp_, &cqe));
    EXPECT_EQ(SRCNIC_OK, cqe.status);
    EXPECT_EQ(0, std::memcmp(first.data(), remote.data(), cut));
    EXPECT_EQ(0, std::memcmp(second.data(), remote.data() + cut, len - cut));
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_PLACED_WHILE_CHECKED));
}

// An answer to a READ the application cancelled touches nothing of its destination.
TEST_F(CompleterPlacing, check_while_placing__cancelled_read_touches_nothing)
{
    std::vector<uint8_t> local(kBigSeg, 0);
    const std::vector<uint8_t> remote = pattern(kBigSeg, 25);
    post_read(make_rdma(SRCNIC_OP_READ, dest_, 1, local.data(), kBigSeg, 0x7000, 0xabc00005));
    ASSERT_EQ(1u, nic_->qp_cancel(qp_, dest_, 0));
    srcnic_cqe_t cqe;
    ASSERT_TRUE(await_cqe(qp_, &cqe));
    EXPECT_EQ(SRCNIC_ERR_CANCELED, cqe.status);
    Counters before(*nic_);
    peer_->send_bytes(segment(remote, 0));
    progress_until_received(1);
    EXPECT_EQ(std::vector<uint8_t>(kBigSeg, 0), local) << "an answer to a cancelled READ was placed";
    EXPECT_EQ(0u, before.delta(SRCNIC_CNT_PLACED_WHILE_CHECKED));
}

// --- acknowledgements and NAKs of the Nic's own requests (PROTOCOL.md §5.3-5.5) ---

using CompleterAcks = OwnRequestsSlowRto;
using CompleterRecovery = OwnRequestsRecovery;

TEST_F(CompleterAcks, apply_ack__data_let_into_the_window_goes_in_the_same_call)
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

TEST_F(CompleterAcks, complete_control__rnr_nak_resends_refused_psn_after_delay)
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

TEST_F(CompleterAcks, note_sack__gap_with_two_later_packets_is_retransmitted_early)
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

TEST_F(CompleterAcks, note_sack__new_hole_resent_at_once_old_one_not_again_within_quarter_rto)
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

TEST_F(CompleterAcks, complete_control__ack_ahead_of_delivered_packets_is_deferred)
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

TEST_F(CompleterAcks, rtt_sample__when_the_peer_reports_the_packet_not_after_a_hole_is_repaired)
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

TEST_F(CompleterAcks, rtt_sample__none_from_a_packet_that_was_resent)
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

// A timeout that met a peer slow to answer, not a lost flight (its thread off the CPU for a few
// ms, the window waiting in its socket): the ack that follows covers packets the recovery never
// resent, and that ends the recovery. It costs one packet, not a window of duplicates.
TEST_F(CompleterRecovery, note_sack__timeout__ack_of_packets_never_resent_ends_the_recovery)
{
    timeout_then_ack_past_the_resent_packet(0, 1);
}

// A timeout after the peer reported a hole (PSN 1 missing, 3 held: one later packet, too few for
// a fast retransmit) repairs a real loss: the ack that follows the resent packet covers what the
// peer held and ends the recovery as above, but the timeout is not counted as spurious.
TEST_F(CompleterRecovery, note_sack__timeout__that_repaired_a_reported_hole_is_not_spurious)
{
    timeout_then_ack_past_the_resent_packet(1u << 1, 0);
}

// The recovery is one named state, which the agent's status report shows: a timeout after the
// peer reported a hole, then the end of it when everything is acknowledged.
TEST_F(CompleterRecovery, set_recovery__state_named_in_the_status_report)
{
    fill_window();
    EXPECT_NE(std::string::npos, nic_->peers_json().find("\"recovery\":\"none\""));
    sack_nic(1, 1u << 1);   // PSN 3 held, 1 and 2 missing: too few for a fast retransmit
    Packet again;
    ASSERT_TRUE(await_op(Opcode::kSEND, &again));
    EXPECT_EQ(1u, again.h.psn);
    EXPECT_NE(std::string::npos, nic_->peers_json().find("\"recovery\":\"timeout-hole\""))
        << nic_->peers_json();
    ack_nic(17, 1);
    nic_->progress();
    EXPECT_NE(std::string::npos, nic_->peers_json().find("\"recovery\":\"none\""))
        << nic_->peers_json();
    ack_and_complete(21, 1, 1);
}

// A flight that was lost: each ack covers only packets the recovery resent, and each resends
// twice as many as it acknowledged, the way a slow start grows.
TEST_F(CompleterRecovery, note_sack__timeout__acks_of_resent_packets_resend_twice_as_many)
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

} // namespace
} // namespace test
} // namespace srcnic
