// Protocol tests of the responder (PROTOCOL.md §3, §5.4, §5.5, §6): requests from a raw peer
// into one Nic — SEND placement, receiver-not-ready, refusals with their error answers, RDMA
// WRITE and READ with the remote access check.
#include "raw_peer.h"

#include <deque>

#include <sys/mman.h>

namespace srcnic {
namespace test {
namespace {

constexpr uint8_t kErrResp = static_cast<uint8_t>(Opcode::kERR_RESP);
constexpr uint8_t kReadResp = static_cast<uint8_t>(Opcode::kREAD_RESP);

class Responder : public ProtocolTest {
protected:
    void SetUp() override
    {
        ProtocolTest::SetUp();
        open_connection();   // psn 1 consumed: the next request of the raw peer is psn 2
    }

    void TearDown() override
    {
        for (srcnic_mr_t *mr : mrs_) {
            nic_->mr_dereg(mr);
        }
    }

    // A request header of the raw peer on the open connection.
    PacketHeader request(Opcode op, uint32_t psn, uint16_t flags = kFlagFirst | kFlagLast)
    {
        PacketHeader h = peer_->header(op, psn, flags);
        h.src_qpn = kPeerQpn;
        h.dst_qpn = qp_->qpn();
        return h;
    }

    // Registers a 4096-byte region filled with a pattern; returns it (and its bytes in *bytes).
    srcnic_mr_t *region(unsigned access, std::vector<uint8_t> **bytes)
    {
        regions_.emplace_back(pattern(4096, static_cast<uint32_t>(regions_.size() + 11)));
        srcnic_mr_t *mr = nullptr;
        EXPECT_EQ(SRCNIC_OK, nic_->mr_reg(regions_.back().data(), 4096, access, &mr));
        mrs_.push_back(mr);
        *bytes = &regions_.back();
        return mr;
    }

    // Registers a readable region and sends READ_REQ psn for its first len bytes.
    void read_from_new_region(uint32_t psn, uint32_t len)
    {
        std::vector<uint8_t> *mem;
        srcnic_mr_t *mr = region(SRCNIC_ACCESS_REMOTE_READ, &mem);
        PacketHeader h = request(Opcode::kREAD_REQ, psn);
        h.addr = reinterpret_cast<uint64_t>(mem->data());
        h.rkey = mr->rkey;
        h.msg_len = len;
        peer_->send(h);
    }

    // Awaits the ERR_RESP answering req_psn; checks every packet before it (and it) leaves
    // req_psn unacknowledged (§5.4).
    void await_error(uint32_t req_psn, srcnic_status_t status, Packet *err)
    {
        std::vector<Packet> before;
        ASSERT_TRUE(await([req_psn](const Packet &p) {
            return p.h.opcode == kErrResp && p.h.req_psn == req_psn;
        }, err, &before));
        EXPECT_EQ(status, static_cast<srcnic_status_t>(static_cast<int32_t>(err->h.imm)))
            << to_string(err->h);
        EXPECT_EQ(kPeerQpn, err->h.dst_qpn);
        EXPECT_EQ(kPeerConn, err->h.dst_conn);
        EXPECT_EQ(peer_->nic_conn(), err->h.src_conn);
        EXPECT_EQ(kFlagFirst | kFlagLast, err->h.flags & ~kFlagAckReq);
        EXPECT_EQ(0u, err->h.payload_len);
        before.push_back(*err);
        for (const Packet &p : before) {
            EXPECT_FALSE(psn_before(req_psn, p.h.ack_psn))
                << "acknowledges the refused request before its error answer: " << to_string(p.h);
        }
    }

    std::deque<std::vector<uint8_t>> regions_;    // registered memory (references stay valid)
    std::vector<srcnic_mr_t *> mrs_;
};

// --- SEND ---

TEST_F(Responder, respond_send__multi_packet_message_lands_in_one_buffer)
{
    uint8_t *buf = post_buffer(7, 4096);
    const std::vector<uint8_t> data = pattern(2000, 7);
    // receive SEND psn 2, 3, 4: segments at 0, 920, 1840 of a 2000-byte message
    for (uint32_t seg = 0; seg < 3; ++seg) {
        const uint32_t off = seg * kSegPayload;
        const uint32_t len = std::min<uint32_t>(kSegPayload, 2000 - off);
        PacketHeader h = request(Opcode::kSEND, 2 + seg,
                                 static_cast<uint16_t>((seg == 0 ? kFlagFirst : 0) | (seg == 2 ? kFlagLast : 0)));
        h.msg_len = 2000;
        h.addr = off;
        h.imm = 0xabcd;
        peer_->send(h, std::vector<uint8_t>(data.begin() + off, data.begin() + off + len));
    }
    // expect one RECV of 2000 bytes with the immediate, and an ACK of 5
    srcnic_cqe_t cqe;
    ASSERT_TRUE(await_cqe(qp_, &cqe));
    EXPECT_EQ(SRCNIC_OK, cqe.status);
    EXPECT_EQ(7u, cqe.wr_id);
    EXPECT_EQ(2000u, cqe.byte_len);
    EXPECT_EQ(0xabcdu, cqe.imm);
    EXPECT_EQ(0, std::memcmp(buf, data.data(), data.size()));
    Packet ack;
    ASSERT_TRUE(await([](const Packet &p) { return p.h.ack_psn == 5; }, &ack));
}

TEST_F(Responder, respond_send__no_buffer_is_nak_rnr_then_delivered_on_resend)
{
    Counters before(*nic_);
    // receive SEND psn 2 to a QP with no receive buffer
    // expect NAK imm RNR psn 2, acknowledging only up to psn 2 (not the refused one)
    PacketHeader h = request(Opcode::kSEND, 2);
    h.msg_len = 16;
    h.imm = 5;
    const std::vector<uint8_t> data = pattern(16, 9);
    peer_->send(h, data);
    Packet nak;
    ASSERT_TRUE(await_op(Opcode::kNAK, &nak));
    EXPECT_EQ(static_cast<uint32_t>(NakReason::kRnr), nak.h.imm);
    EXPECT_EQ(2u, nak.h.psn);
    EXPECT_EQ(2u, nak.h.ack_psn);
    EXPECT_EQ(kPeerConn, nak.h.dst_conn);
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_RNR_SENT));
    srcnic_cqe_t cqe;
    EXPECT_EQ(0u, qp_->poll_cq(&cqe, 1));
    // receive SEND psn 3 (sent behind the refused one) / expect it not delivered before psn 2
    PacketHeader h3 = request(Opcode::kSEND, 3);
    h3.imm = 6;
    peer_->send(h3);
    run_for(1000);
    EXPECT_EQ(0u, qp_->poll_cq(&cqe, 1));
    // post a buffer; receive SEND psn 2 again, then psn 3 / expect both delivered in order
    uint8_t *buf = post_buffer(8, 64);
    post_buffer(9, 64);
    peer_->send(h, data);
    peer_->send(h3);
    ASSERT_TRUE(await_cqe(qp_, &cqe));
    EXPECT_EQ(SRCNIC_OK, cqe.status);
    EXPECT_EQ(8u, cqe.wr_id);
    EXPECT_EQ(5u, cqe.imm);
    EXPECT_EQ(16u, cqe.byte_len);
    EXPECT_EQ(0, std::memcmp(buf, data.data(), data.size()));
    ASSERT_TRUE(await_cqe(qp_, &cqe));
    EXPECT_EQ(9u, cqe.wr_id);
    EXPECT_EQ(6u, cqe.imm);
    Packet ack;
    ASSERT_TRUE(await([](const Packet &p) { return p.h.ack_psn == 4; }, &ack));
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_RNR_SENT));
}

TEST_F(Responder, respond_send__no_such_qp_is_answered_unreachable)
{
    post_buffer(1, 64);
    Counters before(*nic_);
    // receive SEND psn 2 to QP 77, which does not exist
    // expect ERR_RESP UNREACHABLE req_psn 2 from QP 77 to the requesting QP; nothing before it,
    // nor it, acknowledges psn 2; NO_SUCH_QP counted; nothing delivered
    PacketHeader h = request(Opcode::kSEND, 2);
    h.dst_qpn = 77;
    h.msg_len = 8;
    peer_->send(h, pattern(8, 1));
    Packet err;
    await_error(2, SRCNIC_ERR_UNREACHABLE, &err);
    EXPECT_EQ(77u, err.h.src_qpn);
    EXPECT_EQ(1u, err.h.psn) << "the Nic's first sequenced packet";
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_NO_SUCH_QP));
    srcnic_cqe_t cqe;
    EXPECT_EQ(0u, qp_->poll_cq(&cqe, 1));
    EXPECT_EQ("", before.other_drops(SRCNIC_CNT_LAST));
}

TEST_F(Responder, respond_send__refused_request_is_acked_after_its_error_answer)
{
    Counters before(*nic_);
    // receive SEND psn 2 to QP 77, which does not exist / expect ERR_RESP (Nic psn 1)
    PacketHeader h = request(Opcode::kSEND, 2);
    h.dst_qpn = 77;
    peer_->send(h);
    Packet err;
    await_error(2, SRCNIC_ERR_UNREACHABLE, &err);
    // receive ACK of the ERR_RESP (ack_psn 2, stream position 3)
    // expect, the error answer being out, an acknowledgement of psn 2 (ack_psn 3) within the
    // ack delay: not only after the requester retransmits it or the Nic retransmits ERR_RESP
    ack_nic(2, 3);
    Packet ack;
    std::vector<Packet> skipped;
    const double watchdog = 20.0 * kRtoUs / 1e6;
    EXPECT_TRUE(await([](const Packet &p) { return p.h.ack_psn == 3; }, &ack, &skipped, watchdog))
        << "psn 2 never acknowledged after its ERR_RESP went out (waited " << watchdog << " s)";
    for (const Packet &p : skipped) {
        EXPECT_FALSE(p.h.opcode == kErrResp) << "ERR_RESP retransmitted although acked";
    }
    EXPECT_EQ(0u, before.delta(SRCNIC_CNT_RETRANSMITS));
}

TEST_F(Responder, respond_send__longer_than_buffer_is_answered_truncated)
{
    uint8_t *small = post_buffer(4, 64);
    Counters before(*nic_);
    // receive SEND psn 2 of 100 bytes, buffer of 64 / expect ERR_RESP MESSAGE_TRUNCATED,
    // RECV_TRUNCATED, the buffer neither written nor consumed
    PacketHeader h = request(Opcode::kSEND, 2);
    h.msg_len = 100;
    peer_->send(h, pattern(100, 3));
    Packet err;
    await_error(2, SRCNIC_ERR_MESSAGE_TRUNCATED, &err);
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_RECV_TRUNCATED));
    EXPECT_EQ(std::vector<uint8_t>(64, 0), std::vector<uint8_t>(small, small + 64));
    srcnic_cqe_t cqe;
    EXPECT_EQ(0u, qp_->poll_cq(&cqe, 1));
    // receive SEND psn 3 of 64 bytes / expect it delivered into that buffer
    h.psn = 3;
    h.msg_len = 64;
    const std::vector<uint8_t> data = pattern(64, 4);
    peer_->send(h, data);
    ASSERT_TRUE(await_cqe(qp_, &cqe));
    EXPECT_EQ(4u, cqe.wr_id);
    EXPECT_EQ(SRCNIC_OK, cqe.status);
    EXPECT_EQ(0, std::memcmp(small, data.data(), 64));
}

TEST_F(Responder, respond_send__inconsistent_segment_returns_buffer_with_error)
{
    post_buffer(5, 4096);
    post_buffer(6, 4096);
    Counters before(*nic_);
    // receive SEND psn 2 FIRST (segment 0 of 2000 bytes), then psn 3 claiming offset 100
    // expect the buffer returned with IO_ERROR, DROP_BAD_RESPONSE, and the message's last
    // segment (psn 4) consumed silently
    const std::vector<uint8_t> data = pattern(2000, 5);
    PacketHeader h = request(Opcode::kSEND, 2, kFlagFirst);
    h.msg_len = 2000;
    peer_->send(h, std::vector<uint8_t>(data.begin(), data.begin() + kSegPayload));
    h = request(Opcode::kSEND, 3, 0);
    h.msg_len = 2000;
    h.addr = 100;
    peer_->send(h, std::vector<uint8_t>(data.begin(), data.begin() + kSegPayload));
    h = request(Opcode::kSEND, 4, kFlagLast);
    h.msg_len = 2000;
    h.addr = 2 * kSegPayload;
    peer_->send(h, std::vector<uint8_t>(data.begin() + 2 * kSegPayload, data.end()));
    srcnic_cqe_t cqe;
    ASSERT_TRUE(await_cqe(qp_, &cqe));
    EXPECT_EQ(5u, cqe.wr_id);
    EXPECT_EQ(SRCNIC_ERR_IO_ERROR, cqe.status);
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_DROP_BAD_RESPONSE));
    Packet ack;
    ASSERT_TRUE(await([](const Packet &p) { return p.h.ack_psn == 5; }, &ack));
    run_for(500);
    EXPECT_EQ(0u, qp_->poll_cq(&cqe, 1)) << "the rest of the refused message was delivered";
}

TEST_F(Responder, respond__nop_abandons_message_and_returns_buffer_canceled)
{
    post_buffer(5, 4096);
    post_buffer(6, 4096);
    // receive SEND psn 2 FIRST (segment 0 of 2000 bytes), then NOP psn 3 (sender cancelled)
    // expect the buffer returned with CANCELED
    PacketHeader h = request(Opcode::kSEND, 2, kFlagFirst);
    h.msg_len = 2000;
    peer_->send(h, pattern(kSegPayload, 6));
    peer_->send(request(Opcode::kNOP, 3, 0));
    srcnic_cqe_t cqe;
    ASSERT_TRUE(await_cqe(qp_, &cqe));
    EXPECT_EQ(5u, cqe.wr_id);
    EXPECT_EQ(SRCNIC_ERR_CANCELED, cqe.status);
    EXPECT_EQ(SRCNIC_OP_RECV, cqe.opcode);
    // receive NOP psn 4 (a cancelled message's last PSN), SEND psn 5 / expect psn 5 in buffer 6
    peer_->send(request(Opcode::kNOP, 4, kFlagLast));
    h = request(Opcode::kSEND, 5);
    h.imm = 55;
    peer_->send(h);
    ASSERT_TRUE(await_cqe(qp_, &cqe));
    EXPECT_EQ(6u, cqe.wr_id);
    EXPECT_EQ(SRCNIC_OK, cqe.status);
    EXPECT_EQ(55u, cqe.imm);
}

// --- WRITE ---

TEST_F(Responder, respond_write__forged_rkey_is_rejected)
{
    std::vector<uint8_t> *mem;
    srcnic_mr_t *mr = region(SRCNIC_ACCESS_REMOTE_WRITE, &mem);
    const std::vector<uint8_t> expect = *mem;
    const uint64_t base = reinterpret_cast<uint64_t>(mem->data());
    Counters before(*nic_);
    // receive WRITE psn 2 of 50 bytes at base + 100 with the rkey's random part changed
    // expect ERR_RESP REJECTED req_psn 2, ACCESS_ERRORS, memory unchanged
    PacketHeader h = request(Opcode::kWRITE, 2);
    h.addr = base + 100;
    h.rkey = mr->rkey ^ (1ull << 40);
    h.msg_len = 50;
    peer_->send(h, std::vector<uint8_t>(50, 0xee));
    Packet err;
    await_error(2, SRCNIC_ERR_REJECTED, &err);
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_ACCESS_ERRORS));
    // receive WRITE psn 3 with the key of another slot / expect the same
    h.psn = 3;
    h.rkey = mr->rkey + 1;
    peer_->send(h, std::vector<uint8_t>(50, 0xee));
    await_error(3, SRCNIC_ERR_REJECTED, &err);
    // receive WRITE psn 4 with rkey 0 / expect the same
    h.psn = 4;
    h.rkey = 0;
    peer_->send(h, std::vector<uint8_t>(50, 0xee));
    await_error(4, SRCNIC_ERR_REJECTED, &err);
    EXPECT_EQ(3u, before.delta(SRCNIC_CNT_ACCESS_ERRORS));
    EXPECT_EQ(expect, *mem);
}

TEST_F(Responder, respond_write__out_of_bounds_is_rejected)
{
    std::vector<uint8_t> *mem;
    srcnic_mr_t *mr = region(SRCNIC_ACCESS_REMOTE_WRITE, &mem);
    const std::vector<uint8_t> expect = *mem;
    const uint64_t base = reinterpret_cast<uint64_t>(mem->data());
    Counters before(*nic_);
    struct {
        uint64_t addr;
        uint32_t len;
    } ranges[] = {
        {base + 4096 - 10, 50},   // runs past the end
        {base - 8, 16},           // starts before the region
        {base + 4096, 1},         // starts at the end
        {base + 8, 0xfffffff0u},  // a length far beyond the region
    };
    uint32_t psn = 2;
    for (const auto &r : ranges) {
        // receive WRITE of (addr, len) with a valid rkey, 8 payload bytes
        // expect ERR_RESP REJECTED, ACCESS_ERRORS, memory unchanged
        PacketHeader h = request(Opcode::kWRITE, psn);
        h.addr = r.addr;
        h.rkey = mr->rkey;
        h.msg_len = r.len;
        peer_->send(h, std::vector<uint8_t>(8, 0xee));
        Packet err;
        await_error(psn, SRCNIC_ERR_REJECTED, &err);
        ++psn;
    }
    EXPECT_EQ(4u, before.delta(SRCNIC_CNT_ACCESS_ERRORS));
    EXPECT_EQ(expect, *mem);
}

TEST_F(Responder, respond_write__without_write_access_is_rejected)
{
    std::vector<uint8_t> *mem;
    srcnic_mr_t *mr = region(SRCNIC_ACCESS_REMOTE_READ, &mem);
    const std::vector<uint8_t> expect = *mem;
    // receive WRITE psn 2 into a read-only region / expect ERR_RESP REJECTED, memory unchanged
    PacketHeader h = request(Opcode::kWRITE, 2);
    h.addr = reinterpret_cast<uint64_t>(mem->data());
    h.rkey = mr->rkey;
    h.msg_len = 8;
    peer_->send(h, std::vector<uint8_t>(8, 0xee));
    Packet err;
    await_error(2, SRCNIC_ERR_REJECTED, &err);
    EXPECT_EQ(expect, *mem);
}

TEST_F(Responder, respond_write__forged_middle_segment_touches_nothing)
{
    std::vector<uint8_t> *mem;
    srcnic_mr_t *mr = region(SRCNIC_ACCESS_REMOTE_WRITE, &mem);
    std::vector<uint8_t> other(4096, 0x11);
    const uint64_t base = reinterpret_cast<uint64_t>(mem->data());
    Counters before(*nic_);
    // receive WRITE psn 2 FIRST (segment 0 of 2000 bytes at base), then psn 3 whose address
    // points outside the region / expect ACCESS_ERRORS and the outside memory untouched
    PacketHeader h = request(Opcode::kWRITE, 2, kFlagFirst);
    h.addr = base;
    h.rkey = mr->rkey;
    h.msg_len = 2000;
    peer_->send(h, std::vector<uint8_t>(kSegPayload, 0xee));
    h = request(Opcode::kWRITE, 3, kFlagLast);
    h.addr = reinterpret_cast<uint64_t>(other.data());
    h.rkey = mr->rkey;
    h.msg_len = 2000;
    peer_->send(h, std::vector<uint8_t>(kSegPayload, 0xee));
    Packet ack;
    ASSERT_TRUE(await([](const Packet &p) { return p.h.ack_psn == 4; }, &ack));
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_ACCESS_ERRORS));
    EXPECT_EQ(std::vector<uint8_t>(4096, 0x11), other);
}

TEST_F(Responder, respond_write__valid_write_lands)
{
    std::vector<uint8_t> *mem;
    srcnic_mr_t *mr = region(SRCNIC_ACCESS_REMOTE_WRITE, &mem);
    std::vector<uint8_t> expect = *mem;
    const uint64_t base = reinterpret_cast<uint64_t>(mem->data());
    const std::vector<uint8_t> data = pattern(2000, 99);
    // receive WRITE psn 2, 3, 4: 2000 bytes at base + 1000 in three segments
    for (uint32_t seg = 0; seg < 3; ++seg) {
        const uint32_t off = seg * kSegPayload;
        const uint32_t len = std::min<uint32_t>(kSegPayload, 2000 - off);
        PacketHeader h = request(Opcode::kWRITE, 2 + seg,
                                 static_cast<uint16_t>((seg == 0 ? kFlagFirst : 0) | (seg == 2 ? kFlagLast : 0)));
        h.addr = base + 1000 + off;
        h.rkey = mr->rkey;
        h.msg_len = 2000;
        peer_->send(h, std::vector<uint8_t>(data.begin() + off, data.begin() + off + len));
    }
    // expect an ACK of 5 and exactly those bytes changed
    Packet ack;
    ASSERT_TRUE(await([](const Packet &p) { return p.h.ack_psn == 5; }, &ack));
    std::copy(data.begin(), data.end(), expect.begin() + 1000);
    EXPECT_EQ(expect, *mem);
    srcnic_cqe_t cqe;
    EXPECT_EQ(0u, qp_->poll_cq(&cqe, 1)) << "a WRITE completes nothing at the target";
}

// --- READ ---

TEST_F(Responder, respond_read__answers_with_read_resp_packets)
{
    std::vector<uint8_t> *mem;
    srcnic_mr_t *mr = region(SRCNIC_ACCESS_REMOTE_READ, &mem);
    const uint64_t base = reinterpret_cast<uint64_t>(mem->data());
    // receive READ_REQ psn 2 for 2000 bytes at base + 100
    PacketHeader h = request(Opcode::kREAD_REQ, 2);
    h.addr = base + 100;
    h.rkey = mr->rkey;
    h.msg_len = 2000;
    peer_->send(h);
    // expect READ_RESP psn 1, 2, 3 (the Nic's PSNs), req_psn 2, three equal segments at 0, 667,
    // 1334 (the last one byte shorter) with the region's bytes, FIRST on the first, LAST on
    // the last
    std::vector<uint8_t> got;
    std::vector<uint32_t> sizes;
    std::vector<PacketHeader> segs;
    for (uint32_t seg = 0; seg < 3; ++seg) {
        Packet r;
        ASSERT_TRUE(await([seg](const Packet &p) { return p.h.opcode == kReadResp && p.h.psn == 1 + seg; }, &r))
            << "segment " << seg;
        EXPECT_EQ(2u, r.h.req_psn);
        EXPECT_EQ(2000u, r.h.msg_len);
        EXPECT_EQ(seg * 667u, r.h.addr);
        EXPECT_EQ(kPeerQpn, r.h.dst_qpn);
        EXPECT_EQ(qp_->qpn(), r.h.src_qpn);
        EXPECT_EQ(kPeerConn, r.h.dst_conn);
        EXPECT_EQ(seg == 0, (r.h.flags & kFlagFirst) != 0);
        EXPECT_EQ(seg == 2, (r.h.flags & kFlagLast) != 0);
        EXPECT_EQ(0u, r.h.flags & kFlagSyn);
        EXPECT_FALSE(psn_before(3, r.h.ack_psn)) << to_string(r.h);
        got.insert(got.end(), r.payload.begin(), r.payload.end());
        sizes.push_back(r.h.payload_len);
        segs.push_back(r.h);
    }
    expect_cut_evenly(2000, segs);
    EXPECT_EQ(666u, sizes[2]);
    EXPECT_EQ(std::vector<uint8_t>(mem->begin() + 100, mem->begin() + 2100), got);
}

TEST_F(Responder, respond_read__answer_goes_in_the_call_that_received_the_request)
{
    // receive READ_REQ psn 2 of 64 bytes / expect its READ_RESP from that very call
    read_from_new_region(2, 64);
    const std::vector<Packet> out = progress_until_received(1);
    ASSERT_EQ(1u, count_op(out, Opcode::kREAD_RESP));
}

TEST_F(Responder, respond_read__zero_bytes_is_one_empty_read_resp)
{
    // receive READ_REQ psn 2 of 0 bytes / expect one READ_RESP FIRST|LAST, no payload
    read_from_new_region(2, 0);
    Packet r;
    ASSERT_TRUE(await_op(Opcode::kREAD_RESP, &r));
    EXPECT_EQ(2u, r.h.req_psn);
    EXPECT_EQ(0u, r.h.payload_len);
    EXPECT_EQ(kFlagFirst | kFlagLast, r.h.flags & (kFlagFirst | kFlagLast));
}

// Invalidation with a READ answer in flight (srcnic_nic_fence_memory): the answer went out and
// its acknowledgement is lost; the region is deregistered meanwhile (its memory may be freed
// next). The retransmission must not read the region again: it goes as an error answer to the
// READ, never as READ_RESP with whatever the memory holds by then.
TEST_F(Responder, respond_read__region_invalidated_before_a_retransmission_is_not_read_again)
{
    std::vector<uint8_t> *mem;
    srcnic_mr_t *mr = region(SRCNIC_ACCESS_REMOTE_READ, &mem);
    PacketHeader h = request(Opcode::kREAD_REQ, 2);
    h.addr = reinterpret_cast<uint64_t>(mem->data());
    h.rkey = mr->rkey;
    h.msg_len = 3000;
    peer_->send(h);
    // expect READ_RESP psn 1..4 with the region's bytes; acknowledge none of them
    Packet r;
    ASSERT_TRUE(await([](const Packet &p) { return p.h.opcode == kReadResp && (p.h.flags & kFlagLast); }, &r));
    peer_->receive();   // anything else already out (a retransmission after the RTO)
    // deregister the region, fence, and overwrite its memory (as a reuse would)
    Counters before(*nic_);
    nic_->mr_dereg(mr);
    mrs_.erase(std::find(mrs_.begin(), mrs_.end(), mr));
    ASSERT_EQ(SRCNIC_OK, srcnic_nic_fence_memory(nic_.get()));
    std::fill(mem->begin(), mem->end(), 0xee);
    // expect the retransmission of PSN 1 after the RTO: an error answer to READ psn 2
    std::vector<Packet> between;
    ASSERT_TRUE(await([](const Packet &p) { return p.h.psn == 1; }, &r, &between));
    between.push_back(r);
    for (const Packet &p : between) {
        EXPECT_NE(kReadResp, p.h.opcode) << "the invalidated region was read again: " << to_string(p.h);
    }
    EXPECT_EQ(kErrResp, r.h.opcode) << to_string(r.h);
    EXPECT_EQ(2u, r.h.req_psn);
    EXPECT_EQ(SRCNIC_ERR_REMOTE_ACCESS, static_cast<srcnic_status_t>(static_cast<int32_t>(r.h.imm)));
    EXPECT_EQ(0u, r.h.payload_len);
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_ACCESS_ERRORS));
}

TEST_F(Responder, respond_read__forged_rkey_or_no_read_access_is_rejected)
{
    std::vector<uint8_t> *mem;
    srcnic_mr_t *mr = region(SRCNIC_ACCESS_REMOTE_READ, &mem);
    std::vector<uint8_t> *wmem;
    srcnic_mr_t *wmr = region(SRCNIC_ACCESS_REMOTE_WRITE, &wmem);
    Counters before(*nic_);
    // receive READ_REQ psn 2 with a forged rkey / expect ERR_RESP REJECTED, no READ_RESP
    PacketHeader h = request(Opcode::kREAD_REQ, 2);
    h.addr = reinterpret_cast<uint64_t>(mem->data());
    h.rkey = mr->rkey ^ (1ull << 33);
    h.msg_len = 100;
    peer_->send(h);
    Packet err;
    await_error(2, SRCNIC_ERR_REJECTED, &err);
    // receive READ_REQ psn 3 of a write-only region / expect ERR_RESP REJECTED
    h.psn = 3;
    h.addr = reinterpret_cast<uint64_t>(wmem->data());
    h.rkey = wmr->rkey;
    peer_->send(h);
    await_error(3, SRCNIC_ERR_REJECTED, &err);
    // receive READ_REQ psn 4 running past the region / expect ERR_RESP REJECTED
    h.psn = 4;
    h.addr = reinterpret_cast<uint64_t>(mem->data()) + 4000;
    h.rkey = mr->rkey;
    peer_->send(h);
    await_error(4, SRCNIC_ERR_REJECTED, &err);
    EXPECT_EQ(3u, before.delta(SRCNIC_CNT_ACCESS_ERRORS));
    for (const Packet &p : run_for(1000)) {
        EXPECT_NE(kReadResp, p.h.opcode) << to_string(p.h);
    }
}

// A READ longer than any message the NIC sends is refused before anything is read or cut:
// 0xfffffff0 bytes cut into packets wrapped in 32 bits (no packet at all, then a division by
// zero that killed the process), from a region large enough to pass the rkey check.
TEST_F(Responder, respond_read__longer_than_the_largest_message_is_rejected)
{
    const size_t span = (4ull << 30) + 4096;   // address space only: never touched
    void *base = ::mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    ASSERT_NE(MAP_FAILED, base);
    srcnic_mr_t *mr = nullptr;
    ASSERT_EQ(SRCNIC_OK, nic_->mr_reg(base, span, SRCNIC_ACCESS_REMOTE_READ, &mr));
    Counters before(*nic_);
    // receive READ_REQ psn 2 of 0xfffffff0 bytes inside the region / expect ERR_RESP REJECTED
    PacketHeader h = request(Opcode::kREAD_REQ, 2);
    h.addr = reinterpret_cast<uint64_t>(base);
    h.rkey = mr->rkey;
    h.msg_len = 0xfffffff0u;
    peer_->send(h);
    Packet err;
    await_error(2, SRCNIC_ERR_REJECTED, &err);
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_ACCESS_ERRORS));
    for (const Packet &p : run_for(1000)) {
        EXPECT_NE(kReadResp, p.h.opcode) << to_string(p.h);
    }
    nic_->mr_dereg(mr);
    ::munmap(base, span);
}

// --- SEND segments checked while placed ---

// Segments of kCheckWhilePlacingMin bytes and more: the receive path copies such a SEND
// segment into its buffer as it checks the CRC (rx_datagram, place_target, send_target), and
// respond_send then finds it there.
class ResponderPlacing : public Responder {
protected:
    static constexpr uint32_t kBigSeg = kPlacingSeg;

    void SetUp() override
    {
        set_up(kPlacingMtu, 1024, nullptr);
        open_connection();
    }

    // SEND segment `seg` (psn 2 + seg) of a message of data.size() bytes.
    std::vector<uint8_t> segment(const std::vector<uint8_t> &data, uint32_t seg,
                                 uint32_t job_key = kJobKey)
    {
        PacketHeader h = request(Opcode::kSEND, 2);
        h.job_key = job_key;
        return placing_segment(h, data, seg);
    }

    static bool all_zero(const uint8_t *p, size_t len)
    {
        return std::all_of(p, p + len, [](uint8_t b) { return b == 0; });
    }
};

TEST_F(ResponderPlacing, check_while_placing__large_segments_land_whole)
{
    static_assert(30000 - 2 * kBigSeg >= kCheckWhilePlacingMin, "every segment is placed as checked");
    uint8_t *buf = post_buffer(7, 32768);
    const std::vector<uint8_t> data = pattern(30000, 3);
    Counters before(*nic_);
    // receive SEND psn 2, 3, 4 of 30000 bytes: every segment placed as its CRC is checked
    for (uint32_t seg = 0; seg < 3; ++seg) {
        peer_->send_bytes(segment(data, seg));
    }
    srcnic_cqe_t cqe;
    ASSERT_TRUE(await_cqe(qp_, &cqe));
    EXPECT_EQ(SRCNIC_OK, cqe.status);
    EXPECT_EQ(7u, cqe.wr_id);
    EXPECT_EQ(30000u, cqe.byte_len);
    EXPECT_EQ(0, std::memcmp(buf, data.data(), data.size()));
    EXPECT_TRUE(all_zero(buf + data.size(), 32768 - data.size())) << "wrote past the message";
    EXPECT_EQ(3u, before.delta(SRCNIC_CNT_PLACED_WHILE_CHECKED));
    EXPECT_EQ("", before.other_drops(SRCNIC_CNT_LAST));
}

TEST_F(ResponderPlacing, check_while_placing__corrupt_segment_is_dropped_and_its_resend_lands)
{
    uint8_t *buf = post_buffer(7, 32768);
    const std::vector<uint8_t> data = pattern(2 * kBigSeg, 4);
    Counters before(*nic_);
    // receive SEND psn 2 (good), then psn 3 with one payload bit flipped
    // expect DROP_BAD_CHECKSUM, no completion and psn 3 not acknowledged; its resend completes
    // the message with the right bytes
    peer_->send_bytes(segment(data, 0));
    std::vector<uint8_t> bad = segment(data, 1);
    bad[sizeof(PacketHeader) + 1000] ^= 0x04;
    peer_->send_bytes(bad);
    const std::vector<Packet> emitted = run_for(20 * 1000);
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_DROP_BAD_CHECKSUM));
    srcnic_cqe_t cqe;
    EXPECT_EQ(0u, qp_->poll_cq(&cqe, 1)) << "completed a message whose segment failed its CRC";
    for (const Packet &p : emitted) {
        EXPECT_FALSE(psn_before(3u, p.h.ack_psn)) << "acknowledged the corrupt segment: " << to_string(p.h);
    }
    peer_->send_bytes(segment(data, 1));
    ASSERT_TRUE(await_cqe(qp_, &cqe));
    EXPECT_EQ(SRCNIC_OK, cqe.status);
    EXPECT_EQ(data.size(), cqe.byte_len);
    EXPECT_EQ(0, std::memcmp(buf, data.data(), data.size()));
    EXPECT_EQ(2u, before.delta(SRCNIC_CNT_PLACED_WHILE_CHECKED));
    EXPECT_EQ("", before.other_drops(SRCNIC_CNT_DROP_BAD_CHECKSUM));
}

// Security: a large SEND with another job key fails before any placement.
TEST_F(ResponderPlacing, check_while_placing__wrong_job_key_touches_no_buffer)
{
    uint8_t *buf = post_buffer(7, 32768);
    const std::vector<uint8_t> data = pattern(kBigSeg, 5);
    Counters before(*nic_);
    peer_->send_bytes(segment(data, 0, kJobKey ^ 0x100));
    run_for(20 * 1000);
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_DROP_WRONG_JOB_KEY));
    EXPECT_TRUE(all_zero(buf, 32768)) << "a packet of another job wrote into a receive buffer";
    srcnic_cqe_t cqe;
    EXPECT_EQ(0u, qp_->poll_cq(&cqe, 1));
    EXPECT_EQ(0u, before.delta(SRCNIC_CNT_PLACED_WHILE_CHECKED));
}

// A message longer than the posted buffer is refused (RECV_TRUNCATED) before anything of it is
// placed: its first segment, longer than the buffer too, writes nothing.
TEST_F(ResponderPlacing, check_while_placing__message_longer_than_buffer_touches_no_buffer)
{
    uint8_t *buf = post_buffer(7, kCheckWhilePlacingMin);
    const std::vector<uint8_t> data = pattern(kBigSeg, 6);
    Counters before(*nic_);
    peer_->send_bytes(segment(data, 0));
    Packet err;
    await_error(2, SRCNIC_ERR_MESSAGE_TRUNCATED, &err);
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_RECV_TRUNCATED));
    EXPECT_TRUE(all_zero(buf, kCheckWhilePlacingMin)) << "the refused message wrote into the buffer";
    EXPECT_EQ(0u, before.delta(SRCNIC_CNT_PLACED_WHILE_CHECKED));
}

// Only the next packet of a connection is placed as checked: one that arrives early waits in the
// reorder buffer and is copied when its turn comes, into the buffer that is then its own.
TEST_F(ResponderPlacing, check_while_placing__early_message_waits_then_lands)
{
    uint8_t *buf_a = post_buffer(7, 32768);
    uint8_t *buf_b = post_buffer(8, 32768);
    const std::vector<uint8_t> a = pattern(kCheckWhilePlacingMin, 8);
    const std::vector<uint8_t> b = pattern(kBigSeg, 9);
    Counters before(*nic_);
    // receive SEND psn 3 (message B, one segment) before psn 2 (message A, one shorter segment)
    PacketHeader h = request(Opcode::kSEND, 3);
    h.msg_len = static_cast<uint32_t>(b.size());
    peer_->send(h, b);
    progress_until_received(1);
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_OUT_OF_ORDER));
    EXPECT_TRUE(all_zero(buf_a, 32768) && all_zero(buf_b, 32768)) << "an early message was placed";
    h = request(Opcode::kSEND, 2);
    h.msg_len = static_cast<uint32_t>(a.size());
    peer_->send(h, a);
    srcnic_cqe_t cqe[2];
    ASSERT_TRUE(await_cqe(qp_, &cqe[0]));
    ASSERT_TRUE(await_cqe(qp_, &cqe[1]));
    EXPECT_EQ(7u, cqe[0].wr_id);
    EXPECT_EQ(a.size(), cqe[0].byte_len);
    EXPECT_EQ(8u, cqe[1].wr_id);
    EXPECT_EQ(b.size(), cqe[1].byte_len);
    EXPECT_EQ(0, std::memcmp(buf_a, a.data(), a.size()));
    EXPECT_TRUE(all_zero(buf_a + a.size(), 32768 - a.size())) << "B's bytes went into A's buffer";
    EXPECT_EQ(0, std::memcmp(buf_b, b.data(), b.size()));
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_PLACED_WHILE_CHECKED));
}

} // namespace
} // namespace test
} // namespace srcnic
