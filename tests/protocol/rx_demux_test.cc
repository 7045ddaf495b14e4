// Protocol tests of rx demux (PROTOCOL.md §4, §5.1-5.6): crafted datagrams into one Nic — the
// receive checks, connection lookup, PSN ordering, acknowledgements and resets it answers with.
#include "own_requests.h"

namespace srcnic {
namespace test {
namespace {

class RxDemux : public ProtocolTest {
protected:
    // A valid SYN SEND of psn 1 to qp_ carrying `payload` (sent with peer_->send(), which adds
    // its proof): the packet each drop test breaks.
    PacketHeader syn_send(uint32_t payload_len)
    {
        PacketHeader h = peer_->header(Opcode::kSEND, 1, kFlagSyn | kFlagFirst | kFlagLast);
        h.dst_conn = 0;
        h.dst_qpn = qp_->qpn();
        h.src_qpn = kPeerQpn;
        h.msg_len = payload_len;
        return h;
    }

    // Sends `bytes`, progresses the Nic and checks that exactly `counter` went up by one, that
    // no other drop counter moved, that nothing was delivered or opened, and returns what the
    // Nic emitted.
    std::vector<Packet> expect_dropped(const std::vector<uint8_t> &bytes, srcnic_counter_t counter)
    {
        Counters before(*nic_);
        peer_->send_bytes(bytes);
        std::vector<Packet> out = run_for(2000);
        EXPECT_EQ(1u, before.delta(counter)) << srcnic_counter_name(counter);
        EXPECT_EQ("", before.other_drops(counter));
        EXPECT_EQ(1u, before.delta(SRCNIC_CNT_RX_PACKETS));
        EXPECT_EQ(0u, before.delta(SRCNIC_CNT_CONN_OPENED));
        srcnic_cqe_t cqe;
        EXPECT_EQ(0u, qp_->poll_cq(&cqe, 1)) << "a dropped packet was delivered";
        return out;
    }

    // Receive SEND psn 2 with ACK_REQ into the buffer posted last / expect it delivered by
    // progress calls that emit nothing: its acknowledgement waits for the next call.
    void deliver_ack_req_send()
    {
        PacketHeader h = peer_->header(Opcode::kSEND, 2, kFlagFirst | kFlagLast | kFlagAckReq);
        h.dst_qpn = qp_->qpn();
        peer_->send(h);
        const uint64_t deadline = now_ns() + 5 * kNsPerSec;
        srcnic_cqe_t cqe = {};
        while (qp_->poll_cq(&cqe, 1) == 0 && now_ns() < deadline) {
            nic_->progress();
            ASSERT_EQ(0u, peer_->receive().size()) << "acknowledged before the next call";
        }
        ASSERT_EQ(SRCNIC_OP_RECV, cqe.opcode);
    }

    // The raw peer sends an empty one-packet SEND of psn to qp_ (no ACK_REQ).
    void send_one_packet(uint32_t psn)
    {
        PacketHeader h = peer_->header(Opcode::kSEND, psn, kFlagFirst | kFlagLast);
        h.dst_qpn = qp_->qpn();
        peer_->send(h);
    }

    void SetUp() override
    {
        ProtocolTest::SetUp();
        buf1_ = post_buffer(1, 4096);
    }

    uint8_t *buf1_ = nullptr;   // the receive buffer posted first (wr_id 1)
};

// --- §4 receive checks, in their order ---

TEST_F(RxDemux, rx_datagram__shorter_than_header_is_truncated)
{
    // receive the first 95 bytes of a valid SEND / expect DROP_TRUNCATED, no answer
    std::vector<uint8_t> d = RawPeer::datagram(syn_send(0), {});
    d.resize(sizeof(PacketHeader) - 1);
    EXPECT_TRUE(expect_dropped(d, SRCNIC_CNT_DROP_TRUNCATED).empty());
    // receive an empty datagram / expect DROP_TRUNCATED
    EXPECT_TRUE(expect_dropped({}, SRCNIC_CNT_DROP_TRUNCATED).empty());
}

TEST_F(RxDemux, rx_datagram__payload_shorter_than_payload_len_is_truncated)
{
    // receive a SEND whose header claims 100 payload bytes, 50 present / expect DROP_TRUNCATED
    std::vector<uint8_t> d = RawPeer::datagram(syn_send(100), pattern(100, 1));
    d.resize(sizeof(PacketHeader) + 50);
    EXPECT_TRUE(expect_dropped(d, SRCNIC_CNT_DROP_TRUNCATED).empty());
}

TEST_F(RxDemux, rx_datagram__trailing_bytes_are_bad_length)
{
    // receive a sealed SEND of 10 bytes followed by 3 bytes more / expect DROP_BAD_LENGTH
    std::vector<uint8_t> d = RawPeer::datagram(syn_send(10), pattern(10, 1));
    d.insert(d.end(), {1, 2, 3});
    EXPECT_TRUE(expect_dropped(d, SRCNIC_CNT_DROP_BAD_LENGTH).empty());
}

TEST_F(RxDemux, rx_datagram__unknown_version_is_dropped)
{
    // receive a sealed SEND with the next version / expect DROP_BAD_VERSION
    PacketHeader h = syn_send(0);
    h.version = kWireVersion + 1;
    EXPECT_TRUE(expect_dropped(RawPeer::datagram(h, {}), SRCNIC_CNT_DROP_BAD_VERSION).empty());
    // receive version 0 / expect DROP_BAD_VERSION
    h.version = 0;
    EXPECT_TRUE(expect_dropped(RawPeer::datagram(h, {}), SRCNIC_CNT_DROP_BAD_VERSION).empty());
}

TEST_F(RxDemux, rx_datagram__payload_bit_flip_fails_checksum)
{
    // receive a SEND sealed, then one payload bit flipped / expect DROP_BAD_CHECKSUM
    std::vector<uint8_t> d = RawPeer::datagram(syn_send(64), pattern(64, 2));
    d[sizeof(PacketHeader) + 17] ^= 0x10;
    EXPECT_TRUE(expect_dropped(d, SRCNIC_CNT_DROP_BAD_CHECKSUM).empty());
    // receive a SEND sealed, then one header bit flipped (psn) / expect DROP_BAD_CHECKSUM
    d = RawPeer::datagram(syn_send(64), pattern(64, 2));
    d[offsetof(PacketHeader, psn)] ^= 0x04;
    EXPECT_TRUE(expect_dropped(d, SRCNIC_CNT_DROP_BAD_CHECKSUM).empty());
}

TEST_F(RxDemux, rx_datagram__wrong_job_key_is_dropped)
{
    // receive a sealed SEND with another job key / expect DROP_WRONG_JOB_KEY
    PacketHeader h = syn_send(8);
    h.job_key = kJobKey + 1;
    EXPECT_TRUE(expect_dropped(RawPeer::datagram(h, pattern(8, 3)), SRCNIC_CNT_DROP_WRONG_JOB_KEY).empty());
}

TEST_F(RxDemux, rx_datagram__unknown_opcode_is_dropped)
{
    // receive sealed packets of opcodes 0, 7, 15, 21 and 255 / expect DROP_UNKNOWN_OPCODE each
    for (uint8_t op : {0, 7, 15, 21, 255}) {
        PacketHeader h = syn_send(0);
        h.opcode = op;
        EXPECT_TRUE(expect_dropped(RawPeer::datagram(h, {}), SRCNIC_CNT_DROP_UNKNOWN_OPCODE).empty())
            << "opcode " << unsigned(op);
    }
}

TEST_F(RxDemux, rx_datagram__unknown_flag_or_reserved_field_is_dropped)
{
    // receive a sealed SEND with flag bit 4 / expect DROP_BAD_FLAGS
    PacketHeader h = syn_send(0);
    h.flags |= 1u << 4;
    EXPECT_TRUE(expect_dropped(RawPeer::datagram(h, {}), SRCNIC_CNT_DROP_BAD_FLAGS).empty());
    // receive flag bit 15 / expect DROP_BAD_FLAGS
    h = syn_send(0);
    h.flags |= 1u << 15;
    EXPECT_TRUE(expect_dropped(RawPeer::datagram(h, {}), SRCNIC_CNT_DROP_BAD_FLAGS).empty());
    // receive reserved = 1 / expect DROP_BAD_FLAGS
    h = syn_send(0);
    h.reserved = 1;
    EXPECT_TRUE(expect_dropped(RawPeer::datagram(h, {}), SRCNIC_CNT_DROP_BAD_FLAGS).empty());
    // receive stream = 0x80000000 / expect DROP_BAD_FLAGS
    h = syn_send(0);
    h.stream = 0x80000000u;
    EXPECT_TRUE(expect_dropped(RawPeer::datagram(h, {}), SRCNIC_CNT_DROP_BAD_FLAGS).empty());
}

TEST_F(RxDemux, rx_datagram__payload_on_type_without_payload_is_bad_length)
{
    // receive a sealed READ_REQ with 4 payload bytes / expect DROP_BAD_LENGTH
    PacketHeader h = peer_->header(Opcode::kREAD_REQ, 1, kFlagSyn | kFlagFirst | kFlagLast);
    h.msg_len = 4;
    EXPECT_TRUE(expect_dropped(RawPeer::datagram(h, pattern(4, 4)), SRCNIC_CNT_DROP_BAD_LENGTH).empty());
    // receive a sealed ACK with 1 payload byte / expect DROP_BAD_LENGTH
    h = peer_->header(Opcode::kACK, 1, 0);
    EXPECT_TRUE(expect_dropped(RawPeer::datagram(h, {9}), SRCNIC_CNT_DROP_BAD_LENGTH).empty());
}

TEST_F(RxDemux, rx_datagram__other_incarnation_is_dropped_unanswered)
{
    // receive a SYN SEND with a valid proof, addressed to another incarnation of the Nic
    // expect DROP_WRONG_NIC and silence: an RST would tell the sender the Nic's incarnation
    PacketHeader h = syn_send(0);
    h.dst_nic = nic_->addr().incarnation + 1;
    h.auth = peer_->proof(h);
    EXPECT_TRUE(expect_dropped(RawPeer::datagram(h, {}), SRCNIC_CNT_DROP_WRONG_NIC).empty());
    EXPECT_EQ(0u, nic_->num_connections());
}

TEST_F(RxDemux, rx_datagram__rst_to_other_incarnation_is_not_answered)
{
    // receive an RST addressed to another incarnation / expect DROP_WRONG_NIC and silence
    PacketHeader h = peer_->header(Opcode::kRST, 1, 0);
    h.dst_nic = nic_->addr().incarnation ^ 1;
    h.dst_conn = 0x00010001;
    EXPECT_TRUE(expect_dropped(RawPeer::datagram(h, {}), SRCNIC_CNT_DROP_WRONG_NIC).empty());
}

TEST_F(RxDemux, rx_datagram__non_syn_without_connection_is_dropped_unanswered)
{
    // receive a SEND without SYN, dst_conn 0, from a peer the Nic does not know
    // expect DROP_NO_CONN and silence (the sender proved nothing)
    PacketHeader h = syn_send(0);
    h.flags &= static_cast<uint16_t>(~kFlagSyn);
    EXPECT_TRUE(expect_dropped(RawPeer::datagram(h, {}), SRCNIC_CNT_DROP_NO_CONN).empty());
    // receive a SYN ACK (control packets never open a connection) / expect DROP_NO_CONN, silence
    h = peer_->header(Opcode::kACK, 1, kFlagSyn);
    h.auth = peer_->proof(h);
    EXPECT_TRUE(expect_dropped(RawPeer::datagram(h, {}), SRCNIC_CNT_DROP_NO_CONN).empty());
}

TEST_F(RxDemux, rx_datagram__wrong_generation_is_reset)
{
    open_connection();
    // receive a SEND naming the Nic's slot with another generation / expect DROP_WRONG_GEN, RST
    PacketHeader h = peer_->header(Opcode::kSEND, 2, kFlagFirst | kFlagLast);
    h.dst_conn = peer_->nic_conn() + (1u << 16);
    h.dst_qpn = qp_->qpn();
    std::vector<Packet> out = expect_dropped(RawPeer::datagram(h, {}), SRCNIC_CNT_DROP_WRONG_GEN);
    ASSERT_EQ(1u, out.size());
    EXPECT_EQ(static_cast<uint8_t>(Opcode::kRST), out[0].h.opcode);
    EXPECT_EQ(kPeerConn, out[0].h.dst_conn);
    EXPECT_EQ(1u, nic_->num_connections()) << "the good connection must survive";
}

TEST_F(RxDemux, rx_datagram__stale_source_connection_is_dropped)
{
    open_connection();
    // receive a SEND with the right dst_conn from an older connection id of the peer, no SYN
    // expect DROP_WRONG_GEN, no answer, the connection intact
    PacketHeader h = peer_->header(Opcode::kSEND, 2, kFlagFirst | kFlagLast);
    h.src_conn = kPeerConn - (1u << 16);
    h.dst_qpn = qp_->qpn();
    EXPECT_TRUE(expect_dropped(RawPeer::datagram(h, {}), SRCNIC_CNT_DROP_WRONG_GEN).empty());
    EXPECT_EQ(1u, nic_->num_connections());
}

// --- §5.1 opening and §5.3 acknowledgements ---

TEST_F(RxDemux, rx_datagram__syn_send_opens_connection_and_is_acked)
{
    uint8_t *buf = buf1_;
    Counters before(*nic_);
    // receive SEND psn 1 SYN|FIRST|LAST dst_conn 0, 300 bytes, imm 77
    const std::vector<uint8_t> data = pattern(300, 5);
    PacketHeader h = syn_send(300);
    h.imm = 77;
    peer_->send(h, data);
    // expect an acknowledgement (ACK or piggybacked): ack_psn 2, src_conn = the Nic's new id,
    // dst_conn = ours, stream position 1 (the Nic has sent nothing sequenced)
    Packet ack;
    ASSERT_TRUE(await([](const Packet &p) { return p.h.ack_psn == 2; }, &ack));
    EXPECT_EQ(static_cast<uint8_t>(Opcode::kACK), ack.h.opcode) << to_string(ack.h);
    EXPECT_NE(0u, ack.h.src_conn);
    EXPECT_EQ(kPeerConn, ack.h.dst_conn);
    EXPECT_EQ(kPeerNic, ack.h.dst_nic);
    EXPECT_EQ(nic_->addr().incarnation, ack.h.src_nic);
    EXPECT_EQ(1u, ack.h.psn);
    EXPECT_EQ(0u, ack.h.sack);
    EXPECT_EQ(0u, ack.h.flags & kFlagSyn);
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_CONN_OPENED));
    EXPECT_EQ(1u, nic_->num_connections());
    // expect the message in the posted buffer of the target QP
    srcnic_cqe_t cqe;
    ASSERT_TRUE(await_cqe(qp_, &cqe));
    EXPECT_EQ(SRCNIC_OK, cqe.status);
    EXPECT_EQ(SRCNIC_OP_RECV, cqe.opcode);
    EXPECT_EQ(1u, cqe.wr_id);
    EXPECT_EQ(300u, cqe.byte_len);
    EXPECT_EQ(77u, cqe.imm);
    EXPECT_EQ(kPeerQpn, cqe.src_qpn);
    EXPECT_EQ(ack.h.src_conn, cqe.src_peer);
    EXPECT_EQ(0, std::memcmp(buf, data.data(), data.size()));
    EXPECT_EQ("", before.other_drops(SRCNIC_CNT_LAST));
}

TEST_F(RxDemux, rx_sequenced__duplicate_is_acked_not_delivered)
{
    open_connection();   // psn 1 delivered; one receive buffer still posted
    Counters before(*nic_);
    // receive SEND psn 1 again (the same SYN packet) / expect DUPLICATES and an ACK of 2
    PacketHeader h = syn_send(0);
    peer_->send(h);
    Packet ack;
    ASSERT_TRUE(await_op(Opcode::kACK, &ack));
    EXPECT_EQ(2u, ack.h.ack_psn);
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_DUPLICATES));
    // receive SEND psn 1 without SYN, dst_conn set / expect DUPLICATES and an ACK of 2
    h = peer_->header(Opcode::kSEND, 1, kFlagFirst | kFlagLast);
    h.dst_qpn = qp_->qpn();
    peer_->send(h);
    ASSERT_TRUE(await_op(Opcode::kACK, &ack));
    EXPECT_EQ(2u, ack.h.ack_psn);
    EXPECT_EQ(2u, before.delta(SRCNIC_CNT_DUPLICATES));
    // expect no second delivery
    run_for(1000);
    srcnic_cqe_t cqe;
    EXPECT_EQ(0u, qp_->poll_cq(&cqe, 1));
    EXPECT_EQ("", before.other_drops(SRCNIC_CNT_LAST));
}

TEST_F(RxDemux, rx_sequenced__old_psn_is_a_duplicate)
{
    open_connection();
    Counters before(*nic_);
    // receive SEND psn 2 - 1000 (long before expected, across the wrap) / expect DUPLICATES, ACK 2
    PacketHeader h = peer_->header(Opcode::kSEND, 2u - 1000u, kFlagFirst | kFlagLast);
    h.dst_qpn = qp_->qpn();
    peer_->send(h);
    Packet ack;
    ASSERT_TRUE(await_op(Opcode::kACK, &ack));
    EXPECT_EQ(2u, ack.h.ack_psn);
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_DUPLICATES));
    run_for(500);
    srcnic_cqe_t cqe;
    EXPECT_EQ(0u, qp_->poll_cq(&cqe, 1));
}

TEST_F(RxDemux, rx_sequenced__gap_is_sacked_then_delivered_in_order)
{
    open_connection();
    post_buffer(3, 4096);
    post_buffer(4, 4096);
    Counters before(*nic_);
    // receive SEND psn 4 (expected 2) / expect OUT_OF_ORDER, an ACK of 2 with sack bit 1 (psn 4)
    PacketHeader h4 = peer_->header(Opcode::kSEND, 4, kFlagFirst | kFlagLast);
    h4.dst_qpn = qp_->qpn();
    h4.msg_len = 10;
    h4.imm = 4;
    peer_->send(h4, pattern(10, 4));
    Packet ack;
    ASSERT_TRUE(await_op(Opcode::kACK, &ack));
    EXPECT_EQ(2u, ack.h.ack_psn);
    EXPECT_EQ(0x2u, ack.h.sack);
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_OUT_OF_ORDER));
    srcnic_cqe_t cqe;
    EXPECT_EQ(0u, qp_->poll_cq(&cqe, 1)) << "psn 4 delivered before psn 2";
    // receive SEND psn 3 / expect OUT_OF_ORDER, ACK of 2 with sack bits 0 and 1
    PacketHeader h3 = h4;
    h3.psn = 3;
    h3.imm = 3;
    peer_->send(h3, pattern(10, 3));
    ASSERT_TRUE(await_op(Opcode::kACK, &ack));
    EXPECT_EQ(2u, ack.h.ack_psn);
    EXPECT_EQ(0x3u, ack.h.sack);
    // receive SEND psn 2 (the gap) / expect psn 2, 3, 4 delivered in order, ACK of 5, no sack
    PacketHeader h2 = h4;
    h2.psn = 2;
    h2.imm = 2;
    peer_->send(h2, pattern(10, 2));
    for (uint32_t imm = 2; imm <= 4; ++imm) {
        ASSERT_TRUE(await_cqe(qp_, &cqe)) << "psn " << imm;
        EXPECT_EQ(SRCNIC_OK, cqe.status);
        EXPECT_EQ(imm, cqe.imm);
        EXPECT_EQ(10u, cqe.byte_len);
    }
    ASSERT_TRUE(await([](const Packet &p) { return p.h.ack_psn == 5; }, &ack));
    EXPECT_EQ(0u, ack.h.sack);
    EXPECT_EQ(2u, before.delta(SRCNIC_CNT_OUT_OF_ORDER));
    EXPECT_EQ(0u, before.delta(SRCNIC_CNT_DUPLICATES));
}

TEST_F(RxDemux, rx_sequenced__beyond_window_is_dropped)
{
    open_connection();
    Counters before(*nic_);
    // receive SEND psn 2 + window (expected 2) / expect DROP_OUT_OF_WINDOW, nothing delivered
    PacketHeader h = peer_->header(Opcode::kSEND, 2 + kWindow, kFlagFirst | kFlagLast);
    h.dst_qpn = qp_->qpn();
    peer_->send(h);
    run_for(2000);
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_DROP_OUT_OF_WINDOW));
    EXPECT_EQ(0u, before.delta(SRCNIC_CNT_OUT_OF_ORDER));
    EXPECT_EQ("", before.other_drops(SRCNIC_CNT_DROP_OUT_OF_WINDOW));
    // receive SEND psn 2 / expect it delivered alone, ACK of 3 (nothing of psn 2 + window kept)
    h.psn = 2;
    peer_->send(h);
    srcnic_cqe_t cqe;
    ASSERT_TRUE(await_cqe(qp_, &cqe));
    Packet ack;
    ASSERT_TRUE(await([](const Packet &p) { return p.h.ack_psn == 3; }, &ack));
    EXPECT_EQ(0u, ack.h.sack);
    run_for(500);
    EXPECT_EQ(0u, qp_->poll_cq(&cqe, 1));
}

TEST_F(RxDemux, rx_deliver__ack_req_is_acked_by_the_next_progress_call)
{
    open_connection();
    post_buffer(3, 64);
    // receive SEND psn 2 with ACK_REQ / expect no ACK from the call that delivers it (a reply
    // could still carry it), an ACK of 3 from the next call: long before the ack delay
    ASSERT_NO_FATAL_FAILURE(deliver_ack_req_send());
    nic_->progress();
    std::vector<Packet> out = peer_->receive();
    ASSERT_EQ(1u, out.size());
    EXPECT_EQ(static_cast<uint8_t>(Opcode::kACK), out[0].h.opcode);
    EXPECT_EQ(3u, out[0].h.ack_psn);
}

TEST_F(RxDemux, rx_deliver__ack_req_rides_on_a_reply_posted_before_the_next_call)
{
    open_connection();
    post_buffer(3, 64);
    const srcnic_dest_t dest = dest_to_peer();
    // receive SEND psn 2 with ACK_REQ; post a SEND back before progressing again / expect the
    // SEND to carry the acknowledgement and no pure ACK
    ASSERT_NO_FATAL_FAILURE(deliver_ack_req_send());
    srcnic_wqe_t w = {};
    w.wr_id = 7;
    w.opcode = SRCNIC_OP_SEND;
    w.dest = dest;
    w.flags = SRCNIC_WQE_FLAG_INLINE;
    w.inline_len = 8;
    ASSERT_EQ(SRCNIC_OK, qp_->post_send(w));
    nic_->progress();
    std::vector<Packet> out = peer_->receive();
    ASSERT_EQ(1u, out.size());
    EXPECT_EQ(static_cast<uint8_t>(Opcode::kSEND), out[0].h.opcode) << to_string(out[0].h);
    EXPECT_EQ(3u, out[0].h.ack_psn);
}

// --- what a receive sends in the progress call that received it ---
// (The pass that sends it runs only when the receive made something urgent; these fail if
// a case waits for the next call.)

TEST_F(RxDemux, rx_sequenced__duplicate_is_acked_in_the_call_that_received_it)
{
    open_connection();
    // receive SEND psn 1 again / expect an ACK of 2 from that very call
    send_one_packet(1);
    const std::vector<Packet> out = progress_until_received(1);
    ASSERT_EQ(1u, count_op(out, Opcode::kACK));
    EXPECT_EQ(2u, out.back().h.ack_psn);
}

TEST_F(RxDemux, rx_sequenced__gap_is_reported_in_the_call_that_received_it)
{
    open_connection();
    post_buffer(2, 64);
    // receive SEND psn 3 (psn 2 missing) / expect an ACK of 2 with psn 3 selectively acked
    send_one_packet(3);
    const std::vector<Packet> out = progress_until_received(1);
    ASSERT_EQ(1u, count_op(out, Opcode::kACK));
    EXPECT_EQ(2u, out.back().h.ack_psn);
    EXPECT_EQ(1u, out.back().h.sack);
}

TEST_F(RxDemux, rx_deliver__a_quarter_window_is_acked_in_the_call_that_completes_it)
{
    open_connection();
    // receive SENDs psn 2 .. 1 + window/4 without ACK_REQ / expect an ACK of the last from the
    // call that delivered it (a stream's sender must not wait for it)
    constexpr uint32_t kQuarter = kWindow / 4;
    for (uint32_t i = 0; i < kQuarter; ++i) {
        post_buffer(2 + i, 64);
    }
    for (uint32_t i = 0; i < kQuarter; ++i) {
        send_one_packet(2 + i);
    }
    const std::vector<Packet> out = progress_until_received(kQuarter);
    ASSERT_EQ(1u, count_op(out, Opcode::kACK));
    EXPECT_EQ(2 + kQuarter, out.back().h.ack_psn);
}

// --- §5.6 restarts and resets ---

TEST_F(RxDemux, rx_datagram__syn_from_new_incarnation_replaces_connection)
{
    open_connection();
    const uint32_t old_conn = peer_->nic_conn();
    Counters before(*nic_);
    // receive a SYN SEND psn 1 from the same address with another incarnation (peer restarted)
    // expect the old connection failed, a new one opened and the message delivered
    PacketHeader h = peer_->header(Opcode::kSEND, 1, kFlagSyn | kFlagFirst | kFlagLast);
    h.src_nic = kPeerNic + 1;
    h.dst_conn = 0;
    h.dst_qpn = qp_->qpn();
    h.imm = 42;
    peer_->send(h);
    srcnic_cqe_t cqe;
    ASSERT_TRUE(await_cqe(qp_, &cqe));
    EXPECT_EQ(42u, cqe.imm);
    Packet ack;
    ASSERT_TRUE(await([](const Packet &p) { return p.h.ack_psn == 2; }, &ack));
    EXPECT_EQ(kPeerNic + 1, ack.h.dst_nic);
    EXPECT_NE(old_conn, ack.h.src_conn);
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_CONN_FAILED));
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_CONN_OPENED));
    EXPECT_EQ(1u, nic_->num_connections());
}

// --- packet buffers (rx_poll) ---

// Single-packet SENDs from the raw peer to qp_, for the packet-buffer tests.
class RxDemuxBuffers : public ProtocolTest {
protected:
    // A SEND as a real peer sends it: SYN (and its proof) until it has learned the Nic's id,
    // which these tests never do.
    void send_one(RawPeer &peer, uint32_t psn, uint16_t flags = 0)
    {
        PacketHeader h = peer.header(Opcode::kSEND, psn,
                                     flags | kFlagFirst | kFlagLast |
                                         (peer.nic_conn() == 0 ? kFlagSyn : 0));
        h.dst_qpn = qp_->qpn();
        h.imm = psn;
        peer.send(h);
    }
    // Receive a SYN SEND psn 1 / expect it delivered.
    void open_connection()
    {
        send_one(*peer_, 1);
        srcnic_cqe_t cqe;
        ASSERT_TRUE(await_cqe(qp_, &cqe));
    }
};

// Few packet buffers, two peers: together their out-of-order packets can hold all of them.
class RxDemuxFewBuffers : public RxDemuxBuffers {
protected:
    static constexpr uint32_t kBuffers = 64;

    srcnic_config_t config() override
    {
        srcnic_config_t c = protocol_config();
        c.window = kBuffers;
        c.rx_buffers = kBuffers;
        return c;
    }
};

TEST_F(RxDemuxFewBuffers, rx_poll__held_out_of_order_packets_do_not_stop_reception)
{
    RawPeer other(*fabric_, nic_->addr(), kJobKey, kPeerNic + 2, kPeerConn + 1);
    for (uint64_t i = 0; i < 4 * kBuffers; ++i) {
        post_buffer(i, 64);
    }
    // receive a SYN SEND psn 1 from each peer / expect both delivered
    for (RawPeer *p : {peer_.get(), &other}) {
        PacketHeader h = p->header(Opcode::kSEND, 1, kFlagSyn | kFlagFirst | kFlagLast);
        h.dst_qpn = qp_->qpn();
        p->send(h);
    }
    srcnic_cqe_t cqe;
    ASSERT_TRUE(await_cqe(qp_, &cqe));
    ASSERT_TRUE(await_cqe(qp_, &cqe));
    // receive psn 3 .. 2 + kBuffers/2 from each peer (psn 2 missing): together they would hold
    // every packet buffer of the Nic / expect each received and buffered (OUT_OF_ORDER)
    Counters before(*nic_);
    for (RawPeer *p : {peer_.get(), &other}) {
        for (uint32_t psn = 3; psn < 3 + kBuffers / 2; ++psn) {
            send_one(*p, psn);
        }
    }
    run_for(5000);
    EXPECT_EQ(kBuffers, before.delta(SRCNIC_CNT_OUT_OF_ORDER));
    EXPECT_EQ(0u, qp_->poll_cq(&cqe, 1));
    // receive SEND psn 2 from the raw peer (fills its gap)
    // expect it received and delivered: buffers held for reordering are given back rather than
    // blocking the packet that unblocks them (DROP_NO_BUFFER; their senders retransmit)
    send_one(*peer_, 2);
    ASSERT_TRUE(await_cqe(qp_, &cqe, 2.0)) << "psn 2 never delivered: reception starved by "
                                           << before.delta(SRCNIC_CNT_OUT_OF_ORDER)
                                           << " packets held for reordering";
    EXPECT_EQ(2u, cqe.imm);
}

TEST_F(RxDemuxFewBuffers, rx_poll__starved_reception_gives_back_the_newest_held_packets_first)
{
    for (uint64_t i = 0; i < 2 * kBuffers; ++i) {
        post_buffer(i, 64);
    }
    ASSERT_NO_FATAL_FAILURE(open_connection());
    // receive psn 3 .. kBuffers + 1 (psn 2 missing): every buffer but one held for reordering
    Counters before(*nic_);
    const uint32_t held = kBuffers - 1;
    for (uint32_t psn = 3; psn < 3 + held; ++psn) {
        send_one(*peer_, psn);
        run_for(0);
    }
    run_for(5000);
    // receive psn 2 / expect it delivered, then the held packets in PSN order up to the first
    // one given back: only the newest were freed (as each arrival left too few buffers for a
    // receive burst), never the oldest, which unblock delivery soonest
    send_one(*peer_, 2);
    srcnic_cqe_t cqe;
    ASSERT_TRUE(await_cqe(qp_, &cqe, 2.0));
    EXPECT_EQ(2u, cqe.imm);
    uint32_t delivered = 0;
    while (qp_->poll_cq(&cqe, 1) == 1) {
        EXPECT_EQ(3 + delivered, cqe.imm) << "held packets out of order";
        ++delivered;
    }
    const uint64_t freed = before.delta(SRCNIC_CNT_DROP_NO_BUFFER);
    EXPECT_GT(freed, 0u) << "reception was never starved: the test needs fewer buffers";
    EXPECT_EQ(held - freed, delivered) << freed << " held packets given back";
    EXPECT_GE(delivered, held / 2 - 1) << "held packets given back beyond what reception needed";
}

// The automatic window and packet buffers on a fabric of 1500-byte datagrams.
class RxDemuxAutoBuffers : public RxDemuxBuffers {
protected:
    srcnic_config_t config() override
    {
        srcnic_config_t c = protocol_config();
        c.window = 0;
        c.rx_buffers = 0;
        return c;
    }
    void SetUp() override { set_up(1500, 1024, nullptr); }
};

TEST_F(RxDemuxAutoBuffers, rx_poll__a_whole_window_of_reordering_keeps_every_packet)
{
    const srcnic_config_t c = config();
    const uint32_t window = srcnic_config_window(&c, 1500);
    ASSERT_GT(window, 256u) << "the test needs a window wider than 256 packets";
    post_buffer(0, 64);
    ASSERT_NO_FATAL_FAILURE(open_connection());
    // receive psn 3 .. window (psn 2 missing) / expect every one held for reordering, none given
    // back for lack of packet buffers
    Counters before(*nic_);
    for (uint32_t psn = 3; psn <= window; ++psn) {
        send_one(*peer_, psn);
        run_for(0);
    }
    run_for(5000);
    EXPECT_EQ(window - 2, before.delta(SRCNIC_CNT_OUT_OF_ORDER));
    EXPECT_EQ(0u, before.delta(SRCNIC_CNT_DROP_NO_BUFFER));
    EXPECT_EQ(0u, before.delta(SRCNIC_CNT_DROP_OUT_OF_WINDOW));
}

class RxDemuxResets : public OwnRequestsSlowRto {
protected:
    // SEND 1 out and acknowledged (the Nic knows our connection id), then SEND 2 out: *p.
    void second_send_out(Packet *p)
    {
        post_send(1, 10);
        ASSERT_TRUE(await_psn(1, p));
        peer_->nic_conn(p->h.src_conn);
        ack_nic(2, 1);
        srcnic_cqe_t cqe;
        ASSERT_TRUE(await_cqe(qp_, &cqe));
        ASSERT_EQ(SRCNIC_OK, cqe.status);
        post_send(2, 10);
        ASSERT_TRUE(await_psn(2, p));
    }
};

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

TEST_F(RxDemuxResets, rx_control__rst_fails_connection_and_outstanding_requests)
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

TEST_F(RxDemuxResets, rx_control__rst_from_peer_that_dropped_connection_fails_it)
{
    Counters before(*nic_);
    Packet p;
    ASSERT_NO_FATAL_FAILURE(second_send_out(&p));
    EXPECT_EQ(kPeerConn, p.h.dst_conn);
    srcnic_cqe_t cqe;
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

TEST_F(RxDemuxResets, rx_datagram__rst_from_another_incarnation_is_dropped)
{
    Counters before(*nic_);
    Packet p;
    ASSERT_NO_FATAL_FAILURE(second_send_out(&p));
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

} // namespace
} // namespace test
} // namespace srcnic
