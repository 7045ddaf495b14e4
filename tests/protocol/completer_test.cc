// Protocol tests of the completer (PROTOCOL.md §3.4, §3.5, §5.4): answers from a raw peer to the
// Nic's own requests — READ responses placed, error answers completing requests, and answers
// or acknowledgements that match nothing.
#include "raw_peer.h"

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

} // namespace
} // namespace test
} // namespace srcnic
