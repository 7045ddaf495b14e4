// Engine tests over the loopback fabric without faults: every operation once, at sizes from
// 0 B to several MiB, content verified byte for byte; refusals (RNR, no such QP, truncation,
// remote access) and what they leave untouched.
#include "nic_harness.h"
#include "open_fds.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <dirent.h>
#include <poll.h>
#include <sys/resource.h>
#include <unistd.h>

namespace srcnic {
namespace test {
namespace {

std::vector<uint8_t> pattern(size_t len, uint32_t seed)
{
    std::vector<uint8_t> v(len);
    for (size_t i = 0; i < len; ++i) {
        v[i] = static_cast<uint8_t>((i * 131 + seed * 7 + (i >> 8)) & 0xff);
    }
    return v;
}

class NicBasic : public ::testing::Test {
protected:
    void SetUp() override
    {
        srcnic_qp_config_t qc;
        srcnic_qp_config_init(&qc);
        ASSERT_EQ(SRCNIC_OK, nics_.nic(0)->qp_create(qc, &qa_));
        ASSERT_EQ(SRCNIC_OK, nics_.nic(1)->qp_create(qc, &qb_));
        ASSERT_EQ(SRCNIC_OK, nics_.nic(0)->dest_create(nics_.nic(1)->addr(), qb_->qpn(), &to_b_));
        ASSERT_EQ(SRCNIC_OK, nics_.nic(1)->dest_create(nics_.nic(0)->addr(), qa_->qpn(), &to_a_));
    }

    LoopbackNics nics_{2};
    Qp *qa_ = nullptr;
    Qp *qb_ = nullptr;
    srcnic_dest_t to_b_{};
    srcnic_dest_t to_a_{};

    // A second QP of a's engine, and a's destination for it: requests to it go to a's own
    // engine.
    void own_qp(Qp **qp, srcnic_dest_t *self)
    {
        srcnic_qp_config_t qc;
        srcnic_qp_config_init(&qc);
        ASSERT_EQ(SRCNIC_OK, nics_.nic(0)->qp_create(qc, qp));
        ASSERT_EQ(SRCNIC_OK, nics_.nic(0)->dest_create(nics_.nic(0)->addr(), (*qp)->qpn(), self));
    }
};

TEST_F(NicBasic, dest_create__sends_nothing)
{
    EXPECT_EQ(0u, nics_.nic(0)->counter(SRCNIC_CNT_TX_PACKETS));
    nics_.nic(0)->progress();
    nics_.nic(1)->progress();
    EXPECT_EQ(0u, nics_.nic(0)->counter(SRCNIC_CNT_TX_PACKETS));
    EXPECT_EQ(1u, nics_.nic(0)->num_connections());
}

TEST_F(NicBasic, send__sizes_from_zero_to_4mib)
{
    const size_t sizes[] = {0, 1, 3, 127, 128, 129, 8000, 8096, 8097, 65536, 1 << 20, 4 << 20};
    std::vector<uint8_t> rbuf(4 << 20);
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
        auto data = pattern(sizes[i], static_cast<uint32_t>(i));
        ASSERT_EQ(SRCNIC_OK, qb_->post_recv(make_recv(100 + i, rbuf.data(), static_cast<uint32_t>(rbuf.size()))));
        ASSERT_EQ(SRCNIC_OK, qa_->post_send(make_send(to_b_, i, data.data(), static_cast<uint32_t>(sizes[i]), 77 + static_cast<uint32_t>(i))));
        srcnic_cqe_t rc, sc;
        ASSERT_TRUE(poll_one(nics_.all(), qb_, &rc)) << "size " << sizes[i];
        EXPECT_EQ(SRCNIC_OK, rc.status);
        EXPECT_EQ(SRCNIC_OP_RECV, rc.opcode);
        EXPECT_EQ(100 + i, rc.wr_id);
        EXPECT_EQ(sizes[i], rc.byte_len);
        EXPECT_EQ(77 + i, rc.imm);
        EXPECT_EQ(qa_->qpn(), rc.src_qpn);
        EXPECT_TRUE(std::equal(data.begin(), data.end(), rbuf.begin())) << "size " << sizes[i];
        ASSERT_TRUE(poll_one(nics_.all(), qa_, &sc));
        EXPECT_EQ(SRCNIC_OK, sc.status);
        EXPECT_EQ(i, sc.wr_id);
        EXPECT_EQ(SRCNIC_OP_SEND, sc.opcode);
    }
}

// SENDs of nearby sizes posted back to back: some take the segment size of the one before them
// and a padded last segment (TxMsg::join_run), some their own cut; each arrives whole, in order.
TEST_F(NicBasic, send__back_to_back_nearby_sizes_arrive_whole_in_order)
{
    const uint32_t sizes[] = {20000, 19990, 19900, 19800, 19700, 19000, 20000, 13000, 12990, 12700};
    constexpr size_t kN = sizeof(sizes) / sizeof(sizes[0]);
    std::vector<std::vector<uint8_t>> data;
    std::vector<std::vector<uint8_t>> rbufs(kN, std::vector<uint8_t>(20000));
    for (size_t i = 0; i < kN; ++i) {
        data.push_back(pattern(sizes[i], static_cast<uint32_t>(i + 1)));
        ASSERT_EQ(SRCNIC_OK, qb_->post_recv(make_recv(100 + i, rbufs[i].data(), 20000)));
    }
    for (size_t i = 0; i < kN; ++i) {
        ASSERT_EQ(SRCNIC_OK, qa_->post_send(make_send(to_b_, i, data[i].data(), sizes[i])));
    }
    for (size_t i = 0; i < kN; ++i) {
        srcnic_cqe_t rc;
        ASSERT_TRUE(poll_one(nics_.all(), qb_, &rc)) << "message " << i;
        EXPECT_EQ(SRCNIC_OK, rc.status);
        EXPECT_EQ(100 + i, rc.wr_id);
        EXPECT_EQ(sizes[i], rc.byte_len);
        EXPECT_TRUE(std::equal(data[i].begin(), data[i].end(), rbufs[i].begin()))
            << "message " << i;
    }
    for (size_t i = 0; i < kN; ++i) {
        srcnic_cqe_t sc;
        ASSERT_TRUE(poll_one(nics_.all(), qa_, &sc)) << "message " << i;
        EXPECT_EQ(SRCNIC_OK, sc.status);
        EXPECT_EQ(i, sc.wr_id);
    }
    EXPECT_EQ(0u, nics_.nic(1)->counter(SRCNIC_CNT_DROP_BAD_LENGTH));
}

TEST_F(NicBasic, send__to_self)
{
    srcnic_dest_t self;
    ASSERT_EQ(SRCNIC_OK, nics_.nic(0)->dest_create(nics_.nic(0)->addr(), qa_->qpn(), &self));
    auto data = pattern(20000, 5);
    std::vector<uint8_t> rbuf(20000);
    ASSERT_EQ(SRCNIC_OK, qa_->post_recv(make_recv(9, rbuf.data(), 20000)));
    ASSERT_EQ(SRCNIC_OK, qa_->post_send(make_send(self, 1, data.data(), 20000)));
    srcnic_cqe_t cqes[2];
    unsigned got = 0;
    ASSERT_TRUE(progress_until(nics_.all(), [&] { got += qa_->poll_cq(cqes + got, 2 - got); return got == 2; }));
    EXPECT_EQ(SRCNIC_OK, cqes[0].status);
    EXPECT_EQ(SRCNIC_OK, cqes[1].status);
    EXPECT_EQ(data, rbuf);
}

// A WRITE to a QP of its own engine, nothing of its QP outstanding, is placed by the engine at
// once without packets (as a NIC loops it back), checked as the responder checks one; behind a
// SEND still outstanding it goes as packets, after the SEND. Sizes up to 4 MiB (32 pieces).
TEST_F(NicBasic, write__to_its_own_engine_placed_without_packets)
{
    Qp *qa2;
    srcnic_dest_t self;
    ASSERT_NO_FATAL_FAILURE(own_qp(&qa2, &self));
    std::vector<uint8_t> region(4 << 20, 0);
    srcnic_mr_t *mr;
    ASSERT_EQ(SRCNIC_OK, nics_.nic(0)->mr_reg(region.data(), region.size(),
                                               SRCNIC_ACCESS_REMOTE_READ | SRCNIC_ACCESS_REMOTE_WRITE, &mr));
    const uint64_t raddr = reinterpret_cast<uint64_t>(region.data());
    Nic *nic = nics_.nic(0);
    const size_t sizes[] = {0, 1, 100, kLocalWriteChunk - 1, kLocalWriteChunk + 1, 4 << 20};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
        auto data = pattern(sizes[i], 20 + static_cast<uint32_t>(i));
        const uint64_t packets = nic->counter(SRCNIC_CNT_TX_PACKETS);
        const uint64_t local = nic->counter(SRCNIC_CNT_LOCAL_WRITES);
        ASSERT_EQ(SRCNIC_OK, qa_->post_send(make_rdma(SRCNIC_OP_WRITE, self, i, data.data(),
                                                      static_cast<uint32_t>(sizes[i]), raddr, mr->rkey)));
        srcnic_cqe_t c;
        ASSERT_TRUE(poll_one(nics_.all(), qa_, &c));
        ASSERT_EQ(SRCNIC_OK, c.status) << "size " << sizes[i];
        EXPECT_EQ(SRCNIC_OP_WRITE, c.opcode);
        EXPECT_EQ(sizes[i], c.byte_len);
        EXPECT_TRUE(std::equal(data.begin(), data.end(), region.begin())) << "size " << sizes[i];
        EXPECT_EQ(packets, nic->counter(SRCNIC_CNT_TX_PACKETS)) << "size " << sizes[i];
        EXPECT_EQ(local + 1, nic->counter(SRCNIC_CNT_LOCAL_WRITES)) << "size " << sizes[i];
    }
    // Cancelled after its first piece: completes once, and the engine has nothing left to do.
    {
        auto big = pattern(4 << 20, 40);
        srcnic_wqe_t w = make_rdma(SRCNIC_OP_WRITE, self, 70, big.data(), 4 << 20, raddr, mr->rkey);
        w.tag = 5;
        ASSERT_EQ(SRCNIC_OK, qa_->post_send(w));
        nic->progress();
        ASSERT_TRUE(std::equal(big.begin(), big.begin() + kLocalWriteChunk, region.begin()));
        ASSERT_FALSE(std::equal(big.begin(), big.end(), region.begin())) << "placed whole at once";
        const std::vector<uint8_t> placed(region);
        EXPECT_EQ(1u, nic->qp_cancel(qa_, self, 5));
        EXPECT_TRUE(placed == region) << "the cancel placed another piece";
        srcnic_cqe_t c;
        ASSERT_EQ(1u, qa_->poll_cq(&c, 1));
        EXPECT_EQ(SRCNIC_ERR_CANCELED, c.status);
        for (int i = 0; i < 10; ++i) {
            nic->progress();
        }
        EXPECT_EQ(0u, qa_->poll_cq(&c, 1));
        EXPECT_EQ(SRCNIC_OK, nic->arm()) << "work left after the cancel";
    }
    // Refused with nothing written: a wrong key, a range past the region's end (the whole
    // message is checked first), a QP that does not exist.
    const std::vector<uint8_t> before(region);
    auto data = pattern(8192, 9);
    srcnic_dest_t nowhere = self;
    nowhere.qpn += 1000;
    const struct {
        srcnic_dest_t dest;
        uint64_t addr, rkey;
        srcnic_status_t status;
    } refused[] = {{self, raddr, mr->rkey ^ 0x100, SRCNIC_ERR_REMOTE_ACCESS},
                   {self, raddr + region.size() - 4096, mr->rkey, SRCNIC_ERR_REMOTE_ACCESS},
                   {nowhere, raddr, mr->rkey, SRCNIC_ERR_UNREACHABLE}};
    for (const auto &r : refused) {
        ASSERT_EQ(SRCNIC_OK, qa_->post_send(make_rdma(SRCNIC_OP_WRITE, r.dest, 50, data.data(), 8192,
                                                      r.addr, r.rkey)));
        srcnic_cqe_t c;
        ASSERT_TRUE(poll_one(nics_.all(), qa_, &c));
        EXPECT_EQ(r.status, c.status);
    }
    EXPECT_TRUE(before == region) << "a refused WRITE wrote";
    // Behind a SEND of its QP still outstanding (no receive posted yet: RNR), the WRITE goes as
    // packets and is placed after the SEND.
    std::vector<uint8_t> rbuf(16);
    uint8_t msg[16] = {7};
    const uint64_t local = nic->counter(SRCNIC_CNT_LOCAL_WRITES);
    ASSERT_EQ(SRCNIC_OK, qa_->post_send(make_send(self, 60, msg, sizeof(msg))));
    ASSERT_EQ(SRCNIC_OK, qa_->post_send(make_rdma(SRCNIC_OP_WRITE, self, 61, data.data(), 8192, raddr,
                                                  mr->rkey)));
    ASSERT_TRUE(progress_until(nics_.all(), [&] { return nic->counter(SRCNIC_CNT_RNR_RECEIVED) >= 1; }));
    EXPECT_TRUE(before == region) << "the WRITE passed the SEND before it";
    ASSERT_EQ(SRCNIC_OK, qa2->post_recv(make_recv(62, rbuf.data(), 16)));
    srcnic_cqe_t cq[2];
    unsigned got = 0;
    ASSERT_TRUE(progress_until(nics_.all(), [&] { got += qa_->poll_cq(cq + got, 2 - got); return got == 2; }));
    EXPECT_EQ(60u, cq[0].wr_id);
    EXPECT_EQ(61u, cq[1].wr_id);
    EXPECT_EQ(SRCNIC_OK, cq[1].status);
    EXPECT_TRUE(std::equal(data.begin(), data.end(), region.begin()));
    EXPECT_EQ(local, nic->counter(SRCNIC_CNT_LOCAL_WRITES));
    nic->mr_dereg(mr);
}

// A SEND to a QP of its own engine, nothing of its QP outstanding and a receive posted, is
// placed by the engine at once without packets, both completions as the responder writes them;
// with no receive posted, or longer than a piece, it goes as packets; refusals as the
// responder's (a buffer too short stays posted, no such QP).
TEST_F(NicBasic, send__to_its_own_engine_placed_without_packets)
{
    Qp *qa2;
    srcnic_dest_t self;
    ASSERT_NO_FATAL_FAILURE(own_qp(&qa2, &self));
    Nic *nic = nics_.nic(0);
    std::vector<uint8_t> rbuf(kLocalWriteChunk + 100);
    const size_t sizes[] = {0, 1, 128, 129, 8192, kLocalWriteChunk, kLocalWriteChunk + 1};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
        const bool local = sizes[i] <= kLocalWriteChunk;
        auto data = pattern(sizes[i], 30 + static_cast<uint32_t>(i));
        std::fill(rbuf.begin(), rbuf.end(), 0xee);
        const uint64_t packets = nic->counter(SRCNIC_CNT_TX_PACKETS);
        const uint64_t sends = nic->counter(SRCNIC_CNT_LOCAL_SENDS);
        ASSERT_EQ(SRCNIC_OK, qa2->post_recv(make_recv(100 + i, rbuf.data(), static_cast<uint32_t>(rbuf.size()))));
        ASSERT_EQ(SRCNIC_OK, qa_->post_send(make_send(self, i, data.data(), static_cast<uint32_t>(sizes[i]),
                                                      500 + static_cast<uint32_t>(i))));
        srcnic_cqe_t rc, sc;
        ASSERT_TRUE(poll_one(nics_.all(), qa2, &rc)) << "size " << sizes[i];
        EXPECT_EQ(SRCNIC_OK, rc.status);
        EXPECT_EQ(SRCNIC_OP_RECV, rc.opcode);
        EXPECT_EQ(100 + i, rc.wr_id);
        EXPECT_EQ(sizes[i], rc.byte_len);
        EXPECT_EQ(500 + i, rc.imm);
        EXPECT_EQ(qa_->qpn(), rc.src_qpn);
        EXPECT_TRUE(std::equal(data.begin(), data.end(), rbuf.begin())) << "size " << sizes[i];
        EXPECT_EQ(0xee, rbuf[sizes[i]]) << "size " << sizes[i];
        ASSERT_TRUE(poll_one(nics_.all(), qa_, &sc));
        EXPECT_EQ(SRCNIC_OK, sc.status);
        EXPECT_EQ(i, sc.wr_id);
        EXPECT_EQ(SRCNIC_OP_SEND, sc.opcode);
        EXPECT_EQ(sizes[i], sc.byte_len);
        if (local) {
            EXPECT_EQ(packets, nic->counter(SRCNIC_CNT_TX_PACKETS)) << "size " << sizes[i];
        } else {
            EXPECT_LT(packets, nic->counter(SRCNIC_CNT_TX_PACKETS)) << "size " << sizes[i];
        }
        EXPECT_EQ(local ? sends + 1 : sends, nic->counter(SRCNIC_CNT_LOCAL_SENDS)) << "size " << sizes[i];
    }
    // No receive posted: as packets, which wait (RNR) and deliver once one is.
    auto data = pattern(3000, 9);
    const uint64_t sends = nic->counter(SRCNIC_CNT_LOCAL_SENDS);
    ASSERT_EQ(SRCNIC_OK, qa_->post_send(make_send(self, 20, data.data(), 3000)));
    ASSERT_TRUE(progress_until(nics_.all(), [&] { return nic->counter(SRCNIC_CNT_RNR_RECEIVED) >= 1; }));
    ASSERT_EQ(SRCNIC_OK, qa2->post_recv(make_recv(21, rbuf.data(), 3000)));
    srcnic_cqe_t rc, sc;
    ASSERT_TRUE(poll_one(nics_.all(), qa2, &rc));
    EXPECT_EQ(SRCNIC_OK, rc.status);
    EXPECT_TRUE(std::equal(data.begin(), data.end(), rbuf.begin()));
    ASSERT_TRUE(poll_one(nics_.all(), qa_, &sc));
    EXPECT_EQ(SRCNIC_OK, sc.status);
    EXPECT_EQ(sends, nic->counter(SRCNIC_CNT_LOCAL_SENDS));
    // A buffer too short: the SEND fails, the buffer stays posted and takes the next one.
    ASSERT_EQ(SRCNIC_OK, qa2->post_recv(make_recv(22, rbuf.data(), 2999)));
    ASSERT_EQ(SRCNIC_OK, qa_->post_send(make_send(self, 23, data.data(), 3000)));
    ASSERT_TRUE(poll_one(nics_.all(), qa_, &sc));
    EXPECT_EQ(SRCNIC_ERR_MESSAGE_TRUNCATED, sc.status);
    EXPECT_EQ(0u, qa2->poll_cq(&rc, 1));
    ASSERT_EQ(SRCNIC_OK, qa_->post_send(make_send(self, 24, data.data(), 2999)));
    ASSERT_TRUE(poll_one(nics_.all(), qa2, &rc));
    EXPECT_EQ(22u, rc.wr_id);
    EXPECT_EQ(2999u, rc.byte_len);
    ASSERT_TRUE(poll_one(nics_.all(), qa_, &sc));
    EXPECT_EQ(SRCNIC_OK, sc.status);
    // No such QP.
    srcnic_dest_t nowhere = self;
    nowhere.qpn += 1000;
    ASSERT_EQ(SRCNIC_OK, qa_->post_send(make_send(nowhere, 25, data.data(), 100)));
    ASSERT_TRUE(poll_one(nics_.all(), qa_, &sc));
    EXPECT_EQ(SRCNIC_ERR_UNREACHABLE, sc.status);
    EXPECT_EQ(sends + 3, nic->counter(SRCNIC_CNT_LOCAL_SENDS));
}

// Cancelled before the engine took them: SENDs and WRITEs to its own QPs complete CANCELED
// and nothing is placed (a request to its own engine is carried out as it is taken, and the
// cancel takes what is still in the ring).
TEST_F(NicBasic, cancel__requests_to_its_own_engine_place_nothing)
{
    Qp *qa2;
    srcnic_dest_t self;
    ASSERT_NO_FATAL_FAILURE(own_qp(&qa2, &self));
    Nic *nic = nics_.nic(0);
    std::vector<uint8_t> region(1 << 20, 0), rbuf(8192, 0);
    srcnic_mr_t *mr;
    ASSERT_EQ(SRCNIC_OK, nic->mr_reg(region.data(), region.size(), SRCNIC_ACCESS_REMOTE_WRITE, &mr));
    const uint64_t raddr = reinterpret_cast<uint64_t>(region.data());
    for (int i = 0; i < 4; ++i) {
        ASSERT_EQ(SRCNIC_OK, qa2->post_recv(make_recv(100 + i, rbuf.data(), static_cast<uint32_t>(rbuf.size()))));
    }
    auto data = pattern(region.size(), 77);
    // SEND, WRITE of one piece, SEND, WRITE of several pieces; one more to keep, tagged apart.
    const uint32_t lens[] = {4000, 8192, 100, 1 << 20};
    for (uint32_t i = 0; i < 4; ++i) {
        srcnic_wqe_t w = i % 2 == 0 ? make_send(self, i, data.data(), lens[i])
                                    : make_rdma(SRCNIC_OP_WRITE, self, i, data.data(), lens[i], raddr, mr->rkey);
        w.tag = 5;
        ASSERT_EQ(SRCNIC_OK, qa_->post_send(w));
    }
    srcnic_wqe_t kept = make_send(self, 9, data.data(), 64);
    kept.tag = 6;
    ASSERT_EQ(SRCNIC_OK, qa_->post_send(kept));
    const uint64_t packets = nic->counter(SRCNIC_CNT_TX_PACKETS);
    EXPECT_EQ(4u, nic->qp_cancel(qa_, self, 5));
    // The cancel took the whole ring: the request tagged apart went too, into the first buffer.
    srcnic_cqe_t c[8];
    ASSERT_EQ(5u, qa_->poll_cq(c, 8));
    for (uint32_t i = 0; i < 4; ++i) {
        EXPECT_EQ(i, c[i].wr_id);
        EXPECT_EQ(SRCNIC_ERR_CANCELED, c[i].status) << "request " << i;
    }
    EXPECT_EQ(9u, c[4].wr_id);
    EXPECT_EQ(SRCNIC_OK, c[4].status);
    ASSERT_EQ(1u, qa2->poll_cq(c, 8)) << "a cancelled SEND was received";
    EXPECT_EQ(100u, c[0].wr_id);
    EXPECT_EQ(64u, c[0].byte_len);
    EXPECT_EQ(0u, nic->counter(SRCNIC_CNT_LOCAL_WRITES));
    EXPECT_EQ(1u, nic->counter(SRCNIC_CNT_LOCAL_SENDS));
    EXPECT_EQ(std::vector<uint8_t>(region.size(), 0), region) << "a cancelled WRITE was placed";
    EXPECT_EQ(packets, nic->counter(SRCNIC_CNT_TX_PACKETS));
    nic->mr_dereg(mr);
    nic->qp_destroy(qa2);
}

// The engine carries out at most about one piece (kLocalWriteChunk) of a QP's requests to
// itself per pass: a ring full of them does not keep it from everything else.
TEST_F(NicBasic, local_requests__about_one_piece_per_pass)
{
    Qp *qa2;
    srcnic_dest_t self;
    ASSERT_NO_FATAL_FAILURE(own_qp(&qa2, &self));
    Nic *nic = nics_.nic(0);
    const uint32_t quarter = kLocalWriteChunk / 4;
    std::vector<uint8_t> region(8 * quarter, 0), rbuf(8 * quarter, 0);
    srcnic_mr_t *mr;
    ASSERT_EQ(SRCNIC_OK, nic->mr_reg(region.data(), region.size(), SRCNIC_ACCESS_REMOTE_WRITE, &mr));
    auto data = pattern(region.size(), 78);
    for (uint32_t i = 0; i < 8; ++i) {
        ASSERT_EQ(SRCNIC_OK, qa_->post_send(make_rdma(SRCNIC_OP_WRITE, self, i, data.data() + i * quarter, quarter,
                                                      reinterpret_cast<uint64_t>(region.data()) + i * quarter,
                                                      mr->rkey)));
        ASSERT_EQ(SRCNIC_OK, qa2->post_recv(make_recv(100 + i, rbuf.data() + i * quarter, quarter)));
    }
    nic->transmit();
    EXPECT_EQ(4u, nic->counter(SRCNIC_CNT_LOCAL_WRITES)) << "WRITEs of a quarter piece in one pass";
    for (uint32_t i = 0; i < 8; ++i) {
        ASSERT_EQ(SRCNIC_OK, qa_->post_send(make_send(self, 10 + i, data.data() + i * quarter, quarter)));
    }
    nic->transmit();
    EXPECT_EQ(8u, nic->counter(SRCNIC_CNT_LOCAL_WRITES));
    nic->transmit();
    EXPECT_EQ(4u, nic->counter(SRCNIC_CNT_LOCAL_SENDS)) << "SENDs of a quarter piece in one pass";
    srcnic_cqe_t c;
    for (uint32_t i = 0; i < 16; ++i) {
        ASSERT_TRUE(poll_one(nics_.all(), qa_, &c));
        EXPECT_EQ(SRCNIC_OK, c.status);
    }
    for (uint32_t i = 0; i < 8; ++i) {
        ASSERT_TRUE(poll_one(nics_.all(), qa2, &c));
        EXPECT_EQ(SRCNIC_OK, c.status);
    }
    EXPECT_EQ(data, region);
    EXPECT_EQ(data, rbuf);
    EXPECT_EQ(8u, nic->counter(SRCNIC_CNT_LOCAL_SENDS));
    nic->mr_dereg(mr);
    nic->qp_destroy(qa2);
}

// A WRITE cancelled with packets of it still on the way to its own engine: the QP's next WRITE
// is not placed ahead of them (it goes behind them, as packets), so what lands last is its.
TEST_F(NicBasic, write__after_a_cancelled_one_to_its_own_engine_lands_last)
{
    Qp *qa2;
    srcnic_dest_t self;
    ASSERT_NO_FATAL_FAILURE(own_qp(&qa2, &self));
    Nic *nic = nics_.nic(0);
    const uint32_t len = 64 * 1024;
    std::vector<uint8_t> region(len, 0), rbuf(64);
    srcnic_mr_t *mr;
    ASSERT_EQ(SRCNIC_OK, nic->mr_reg(region.data(), region.size(),
                                     SRCNIC_ACCESS_REMOTE_READ | SRCNIC_ACCESS_REMOTE_WRITE, &mr));
    const uint64_t raddr = reinterpret_cast<uint64_t>(region.data());
    auto first = pattern(len, 79), second = pattern(len, 80);
    // A READ goes as packets (this engine's processes do not copy READs themselves), and the
    // WRITE behind it too (its QP has a request outstanding). Sent, not yet received:
    srcnic_wqe_t s = make_rdma(SRCNIC_OP_READ, self, 1, rbuf.data(), 64, raddr, mr->rkey);
    s.tag = 5;
    ASSERT_EQ(SRCNIC_OK, qa_->post_send(s));
    srcnic_wqe_t w = make_rdma(SRCNIC_OP_WRITE, self, 2, first.data(), len, raddr, mr->rkey);
    w.tag = 5;
    ASSERT_EQ(SRCNIC_OK, qa_->post_send(w));
    const uint64_t packets = nic->counter(SRCNIC_CNT_TX_PACKETS);
    for (int i = 0; i < 4; ++i) {
        nic->transmit();
    }
    ASSERT_LT(packets + 1, nic->counter(SRCNIC_CNT_TX_PACKETS)) << "the WRITE went as no packets";
    EXPECT_EQ(2u, nic->qp_cancel(qa_, self, 5));
    srcnic_cqe_t c[2];
    ASSERT_EQ(2u, qa_->poll_cq(c, 2));
    EXPECT_EQ(SRCNIC_ERR_CANCELED, c[0].status);
    EXPECT_EQ(SRCNIC_ERR_CANCELED, c[1].status);
    ASSERT_EQ(SRCNIC_OK, qa_->post_send(make_rdma(SRCNIC_OP_WRITE, self, 3, second.data(), len, raddr, mr->rkey)));
    ASSERT_TRUE(poll_one(nics_.all(), qa_, &c[0]));
    EXPECT_EQ(3u, c[0].wr_id);
    EXPECT_EQ(SRCNIC_OK, c[0].status);
    for (int i = 0; i < 200; ++i) {
        nic->progress();
    }
    EXPECT_TRUE(second == region) << "the cancelled WRITE's packets landed after the next WRITE";
    nic->mr_dereg(mr);
    nic->qp_destroy(qa2);
}

TEST_F(NicBasic, send__receiver_not_ready_then_delivered)
{
    auto data = pattern(30000, 1);
    ASSERT_EQ(SRCNIC_OK, qa_->post_send(make_send(to_b_, 1, data.data(), 30000)));
    // No buffer posted: the receiver NAKs, the sender backs off and retries; nothing is lost.
    ASSERT_TRUE(progress_until(nics_.all(), [&] { return nics_.nic(0)->counter(SRCNIC_CNT_RNR_RECEIVED) >= 3; }));
    EXPECT_GE(nics_.nic(1)->counter(SRCNIC_CNT_RNR_SENT), 3u);
    std::vector<uint8_t> rbuf(30000);
    ASSERT_EQ(SRCNIC_OK, qb_->post_recv(make_recv(5, rbuf.data(), 30000)));
    srcnic_cqe_t rc, sc;
    ASSERT_TRUE(poll_one(nics_.all(), qb_, &rc));
    EXPECT_EQ(SRCNIC_OK, rc.status);
    EXPECT_EQ(data, rbuf);
    ASSERT_TRUE(poll_one(nics_.all(), qa_, &sc));
    EXPECT_EQ(SRCNIC_OK, sc.status);
}

TEST_F(NicBasic, send__no_such_qp_fails_request_only)
{
    srcnic_dest_t bad;
    ASSERT_EQ(SRCNIC_OK, nics_.nic(0)->dest_create(nics_.nic(1)->addr(), 999, &bad));
    auto data = pattern(20000, 2);
    ASSERT_EQ(SRCNIC_OK, qa_->post_send(make_send(bad, 1, data.data(), 20000)));
    srcnic_cqe_t sc;
    ASSERT_TRUE(poll_one(nics_.all(), qa_, &sc));
    EXPECT_EQ(SRCNIC_ERR_UNREACHABLE, sc.status);
    EXPECT_EQ(1u, nics_.nic(1)->counter(SRCNIC_CNT_NO_SUCH_QP));
    // The shared connection is still fine for the next message.
    std::vector<uint8_t> rbuf(100);
    ASSERT_EQ(SRCNIC_OK, qb_->post_recv(make_recv(5, rbuf.data(), 100)));
    ASSERT_EQ(SRCNIC_OK, qa_->post_send(make_send(to_b_, 2, data.data(), 100)));
    ASSERT_TRUE(poll_one(nics_.all(), qa_, &sc));
    EXPECT_EQ(SRCNIC_OK, sc.status);
    EXPECT_EQ(2u, sc.wr_id);
}

TEST_F(NicBasic, send__longer_than_buffer_is_refused)
{
    auto data = pattern(5000, 3);
    std::vector<uint8_t> rbuf(4000, 0xee);
    ASSERT_EQ(SRCNIC_OK, qb_->post_recv(make_recv(5, rbuf.data(), 4000)));
    ASSERT_EQ(SRCNIC_OK, qa_->post_send(make_send(to_b_, 1, data.data(), 5000)));
    srcnic_cqe_t sc, rc;
    ASSERT_TRUE(poll_one(nics_.all(), qa_, &sc));
    EXPECT_EQ(SRCNIC_ERR_MESSAGE_TRUNCATED, sc.status);
    EXPECT_EQ(0u, qb_->poll_cq(&rc, 1));
    EXPECT_EQ(std::vector<uint8_t>(4000, 0xee), rbuf);
}

TEST_F(NicBasic, write_read__content_verified)
{
    const size_t sizes[] = {0, 1, 100, 8096, 8097, 100000, 3 << 20};
    std::vector<uint8_t> region(3 << 20, 0);
    srcnic_mr_t *mr;
    ASSERT_EQ(SRCNIC_OK, nics_.nic(1)->mr_reg(region.data(), region.size(),
                                               SRCNIC_ACCESS_REMOTE_READ | SRCNIC_ACCESS_REMOTE_WRITE, &mr));
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
        auto data = pattern(sizes[i], 10 + static_cast<uint32_t>(i));
        const uint64_t raddr = reinterpret_cast<uint64_t>(region.data());
        ASSERT_EQ(SRCNIC_OK, qa_->post_send(make_rdma(SRCNIC_OP_WRITE, to_b_, i, data.data(),
                                                      static_cast<uint32_t>(sizes[i]), raddr, mr->rkey)));
        srcnic_cqe_t c;
        ASSERT_TRUE(poll_one(nics_.all(), qa_, &c));
        ASSERT_EQ(SRCNIC_OK, c.status);
        EXPECT_TRUE(std::equal(data.begin(), data.end(), region.begin()));
        std::vector<uint8_t> back(sizes[i] + 1, 0x5a);
        ASSERT_EQ(SRCNIC_OK, qa_->post_send(make_rdma(SRCNIC_OP_READ, to_b_, 1000 + i, back.data(),
                                                      static_cast<uint32_t>(sizes[i]), raddr, mr->rkey)));
        ASSERT_TRUE(poll_one(nics_.all(), qa_, &c));
        ASSERT_EQ(SRCNIC_OK, c.status);
        EXPECT_EQ(1000 + i, c.wr_id);
        EXPECT_EQ(SRCNIC_OP_READ, c.opcode);
        EXPECT_TRUE(std::equal(data.begin(), data.end(), back.begin()));
        EXPECT_EQ(0x5a, back[sizes[i]]);
    }
    nics_.nic(1)->mr_dereg(mr);
}

// A large WRITE or READ goes in chunks of kChunkBytes: another QP's message posted after it
// arrives before it completes; one spread over several scatter entries lands where it should;
// the QP's own later request still completes after it.
TEST_F(NicBasic, write_read__large_in_chunks_others_go_between)
{
    srcnic_qp_config_t qc;
    srcnic_qp_config_init(&qc);
    Qp *qa2;
    ASSERT_EQ(SRCNIC_OK, nics_.nic(0)->qp_create(qc, &qa2));
    const uint32_t big = 4 << 20;
    ASSERT_GT(big, 4 * kChunkBytes);
    std::vector<uint8_t> region(big, 0);
    srcnic_mr_t *mr;
    ASSERT_EQ(SRCNIC_OK, nics_.nic(1)->mr_reg(region.data(), region.size(),
                                               SRCNIC_ACCESS_REMOTE_READ | SRCNIC_ACCESS_REMOTE_WRITE, &mr));
    const uint64_t raddr = reinterpret_cast<uint64_t>(region.data());
    auto data = pattern(big, 3);
    uint8_t small = 42, rbuf[8];
    ASSERT_EQ(SRCNIC_OK, qb_->post_recv(make_recv(9, rbuf, sizeof(rbuf))));
    ASSERT_EQ(SRCNIC_OK, qa_->post_send(make_rdma(SRCNIC_OP_WRITE, to_b_, 1, data.data(), big, raddr, mr->rkey)));
    ASSERT_EQ(SRCNIC_OK, qa_->post_send(make_send(to_b_, 2, &small, 1)));   // behind it on its QP
    nics_.nic(0)->transmit();
    ASSERT_EQ(SRCNIC_OK, qa2->post_send(make_send(to_b_, 3, &small, 1)));   // another QP
    // Receive: the other QP's message arrives while the WRITE is still going.
    srcnic_cqe_t rc;
    ASSERT_TRUE(poll_one(nics_.all(), qb_, &rc));
    EXPECT_EQ(9u, rc.wr_id);
    EXPECT_EQ(qa2->qpn(), rc.src_qpn) << "the message of the other QP waited for the whole WRITE";
    srcnic_cqe_t c;
    EXPECT_EQ(0u, qa_->poll_cq(&c, 1)) << "the WRITE completed before the other QP's message arrived";
    // The WRITE completes once, whole, then the QP's SEND behind it.
    ASSERT_TRUE(poll_one(nics_.all(), qa_, &c));
    EXPECT_EQ(1u, c.wr_id);
    EXPECT_EQ(SRCNIC_OK, c.status);
    EXPECT_EQ(big, c.byte_len);
    EXPECT_TRUE(std::equal(data.begin(), data.end(), region.begin()));
    ASSERT_EQ(SRCNIC_OK, qb_->post_recv(make_recv(10, rbuf, sizeof(rbuf))));
    ASSERT_TRUE(poll_one(nics_.all(), qa_, &c));
    EXPECT_EQ(2u, c.wr_id);
    // A READ of it back into three scatter entries whose edges fall inside chunks.
    std::vector<uint8_t> back(big + 1, 0x5a);
    srcnic_wqe_t rd = make_rdma(SRCNIC_OP_READ, to_b_, 4, back.data(), 1000000, raddr, mr->rkey);
    rd.num_sge = 3;
    rd.u.sge[1] = {reinterpret_cast<uint64_t>(back.data()) + 1000000, 333333, 0};
    rd.u.sge[2] = {reinterpret_cast<uint64_t>(back.data()) + 1333333, big - 1333333, 0};
    ASSERT_EQ(SRCNIC_OK, qa_->post_send(rd));
    ASSERT_TRUE(poll_one(nics_.all(), qa_, &c));
    EXPECT_EQ(4u, c.wr_id);
    EXPECT_EQ(SRCNIC_OK, c.status);
    EXPECT_EQ(big, c.byte_len);
    EXPECT_TRUE(std::equal(data.begin(), data.end(), back.begin()));
    EXPECT_EQ(0x5a, back[big]);
    ASSERT_TRUE(poll_one(nics_.all(), qa2, &c));
    EXPECT_EQ(3u, c.wr_id);
    nics_.nic(1)->mr_dereg(mr);
}

// A large WRITE on qa_ while another QP of a's engine sends messages of other_len bytes to b
// (or, with read, READs other_len bytes of b's memory), one at a time, each posted once b has
// taken in all that reached it; the first ones make the connection shared. Returns the most of
// the WRITE that b placed between the posting of one of the later requests and its completion
// (SEND: its arrival). Checks that everything arrived whole.
uint64_t stream_ahead_of_other_qp(LoopbackNics &nics, Qp *qa, Qp *qb, srcnic_dest_t to_b,
                                  uint32_t other_len, bool read = false)
{
    srcnic_qp_config_t qc;
    srcnic_qp_config_init(&qc);
    Qp *qa2;
    EXPECT_EQ(SRCNIC_OK, nics.nic(0)->qp_create(qc, &qa2));
    const uint32_t big = 8 << 20;
    auto data = pattern(big, 5);
    std::vector<uint8_t> region(big);
    for (size_t i = 0; i < big; ++i) {
        region[i] = static_cast<uint8_t>(~data[i]);   // no byte matches before it is placed
    }
    srcnic_mr_t *mr;
    EXPECT_EQ(SRCNIC_OK,
              nics.nic(1)->mr_reg(region.data(), region.size(), SRCNIC_ACCESS_REMOTE_WRITE, &mr));
    // The bytes of the WRITE placed so far (it is placed in order: no loss here).
    std::ptrdiff_t done = 0;
    auto placed = [&] {
        done = std::mismatch(data.begin() + done, data.end(), region.begin() + done).first - data.begin();
        return static_cast<uint64_t>(done);
    };
    std::vector<uint8_t> other = pattern(other_len, 9);
    std::vector<uint8_t> rbuf(other_len);
    srcnic_mr_t *src_mr = nullptr;   // what the READs read
    if (read) {
        EXPECT_EQ(SRCNIC_OK, nics.nic(1)->mr_reg(other.data(), other.size(),
                                                 SRCNIC_ACCESS_REMOTE_READ, &src_mr));
    }
    EXPECT_EQ(SRCNIC_OK, qa->post_send(make_rdma(SRCNIC_OP_WRITE, to_b, 1, data.data(), big,
                                                 reinterpret_cast<uint64_t>(region.data()), mr->rkey)));
    uint64_t most_ahead = 0;
    for (uint64_t i = 0; i < 6; ++i) {
        if (!read) {
            EXPECT_EQ(SRCNIC_OK, qb->post_recv(make_recv(10 + i, rbuf.data(), other_len)));
        }
        EXPECT_TRUE(progress_until(nics.all(), [&] { return placed() > (i + 1) * (big / 16); }));
        nics.nic(1)->progress();
        const uint64_t before = placed();
        srcnic_cqe_t rc;
        if (read) {
            std::fill(rbuf.begin(), rbuf.end(), 0);
            const uint64_t src = reinterpret_cast<uint64_t>(other.data());
            EXPECT_EQ(SRCNIC_OK, qa2->post_send(make_rdma(SRCNIC_OP_READ, to_b, 100 + i,
                                                          rbuf.data(), other_len, src,
                                                          src_mr->rkey)));
            EXPECT_TRUE(poll_one(nics.all(), qa2, &rc));
            EXPECT_EQ(SRCNIC_OK, rc.status);
        } else {
            EXPECT_EQ(SRCNIC_OK, qa2->post_send(make_send(to_b, 100 + i, other.data(), other_len)));
            EXPECT_TRUE(poll_one(nics.all(), qb, &rc));
            EXPECT_EQ(qa2->qpn(), rc.src_qpn);
        }
        EXPECT_TRUE(std::equal(other.begin(), other.end(), rbuf.begin()));
        if (i >= 2) {
            most_ahead = std::max(most_ahead, placed() - before);
        }
    }
    srcnic_cqe_t c;
    EXPECT_TRUE(poll_one(nics.all(), qa, &c));
    EXPECT_EQ(1u, c.wr_id);
    EXPECT_EQ(SRCNIC_OK, c.status);
    EXPECT_TRUE(std::equal(data.begin(), data.end(), region.begin()));
    for (uint64_t i = 0; i < 6 && !read; ++i) {
        EXPECT_TRUE(poll_one(nics.all(), qa2, &c));
        EXPECT_EQ(100 + i, c.wr_id);
    }
    nics.nic(1)->mr_dereg(mr);
    if (src_mr != nullptr) {
        nics.nic(1)->mr_dereg(src_mr);
    }
    return most_ahead;
}

// Once another QP's requests share the connection with a large WRITE, the WRITE's chunks are
// smaller: a message of the other QP posted mid-stream arrives after at most about one and a
// half of those chunks more of the stream (256 KiB chunks let up to 384 KiB go first). Short
// messages of the other QP (a packet each) make them kMixedShortChunkBytes, longer ones
// kMixedChunkBytes. (The in-memory link's packets are 8 KiB: whole chunks of 16 and 32 KiB.)
TEST_F(NicBasic, write__large_shares_the_connection_in_small_chunks_while_others_send)
{
    const uint64_t ahead = stream_ahead_of_other_qp(nics_, qa_, qb_, to_b_, 1);
    EXPECT_LE(ahead, kMixedShortChunkBytes * 3 / 2)
        << "more of the stream than one and a half short-shared chunks went first";
}

// READ requests are one packet each, but what they ask for may be a transfer as large as the
// stream's: they leave the stream kMixedChunkBytes. (A READ completes a round trip later, so
// about two of the stream's chunks are placed meanwhile, not one.)
TEST_F(NicBasic, write__large_shares_the_connection_in_larger_chunks_with_reads)
{
    const uint64_t ahead = stream_ahead_of_other_qp(nics_, qa_, qb_, to_b_, 64, true);
    EXPECT_LE(ahead, kMixedChunkBytes * 3)
        << "more of the stream than three shared chunks went during a READ's round trip";
    EXPECT_GT(ahead, kMixedShortChunkBytes * 3)
        << "the stream took the short-shared chunks beside READs";
}

TEST_F(NicBasic, write__large_shares_the_connection_in_larger_chunks_with_longer_messages)
{
    const uint64_t ahead = stream_ahead_of_other_qp(nics_, qa_, qb_, to_b_, 20000);
    EXPECT_LE(ahead, kMixedChunkBytes * 3 / 2)
        << "more of the stream than one and a half shared chunks went first";
    EXPECT_GT(ahead, kMixedShortChunkBytes * 3 / 2)
        << "the stream took the short-shared chunks: two large streams would lose rate for nothing";
}

// Cancelling a request that goes in chunks completes it once, whatever of it was handed out.
TEST_F(NicBasic, cancel__chunked_write_completes_once)
{
    const uint32_t big = 4 << 20;
    std::vector<uint8_t> region(big, 0), data(big, 7);
    srcnic_mr_t *mr;
    ASSERT_EQ(SRCNIC_OK, nics_.nic(1)->mr_reg(region.data(), region.size(), SRCNIC_ACCESS_REMOTE_WRITE, &mr));
    srcnic_wqe_t w = make_rdma(SRCNIC_OP_WRITE, to_b_, 1, data.data(), big,
                               reinterpret_cast<uint64_t>(region.data()), mr->rkey);
    w.tag = 5;
    ASSERT_EQ(SRCNIC_OK, qa_->post_send(w));
    for (int i = 0; i < 3; ++i) {
        nics_.nic(0)->progress();
        nics_.nic(1)->progress();
    }
    EXPECT_EQ(1u, nics_.nic(0)->qp_cancel(qa_, to_b_, 5));
    srcnic_cqe_t c;
    ASSERT_EQ(1u, qa_->poll_cq(&c, 1));
    EXPECT_EQ(SRCNIC_ERR_CANCELED, c.status);
    // Nothing more: the chunks on the wire finish as NOPs and complete nothing.
    ASSERT_TRUE(progress_until(nics_.all(), [&] { return nics_.nic(0)->num_connections() == 1 &&
                                                         qa_->outstanding() == 0; }));
    for (int i = 0; i < 200; ++i) {
        nics_.nic(0)->progress();
        nics_.nic(1)->progress();
    }
    EXPECT_EQ(0u, qa_->poll_cq(&c, 1));
    nics_.nic(1)->mr_dereg(mr);
}

// Cancelling a request in chunks leaves the QP's next one alone, a request in chunks waiting
// behind it in the ring: it completes OK with all its bytes (its cursor takes no failure of
// the cancelled one's chunks). A request cancelled while it waits behind that one completes
// CANCELED once, however often it was cancelled.
TEST_F(NicBasic, cancel__chunked_write_leaves_the_next_one_in_the_ring_alone)
{
    const uint32_t big = 4 << 20;
    std::vector<uint8_t> region_a(big, 0), region_b(big, 0);
    auto data_a = pattern(big, 81), data_b = pattern(big, 82);
    srcnic_mr_t *mr_a, *mr_b;
    ASSERT_EQ(SRCNIC_OK, nics_.nic(1)->mr_reg(region_a.data(), big, SRCNIC_ACCESS_REMOTE_WRITE, &mr_a));
    ASSERT_EQ(SRCNIC_OK, nics_.nic(1)->mr_reg(region_b.data(), big, SRCNIC_ACCESS_REMOTE_WRITE, &mr_b));
    srcnic_wqe_t wa = make_rdma(SRCNIC_OP_WRITE, to_b_, 1, data_a.data(), big,
                                reinterpret_cast<uint64_t>(region_a.data()), mr_a->rkey);
    wa.tag = 5;
    srcnic_wqe_t wb = make_rdma(SRCNIC_OP_WRITE, to_b_, 2, data_b.data(), big,
                                reinterpret_cast<uint64_t>(region_b.data()), mr_b->rkey);
    wb.tag = 6;
    ASSERT_EQ(SRCNIC_OK, qa_->post_send(wa));
    ASSERT_EQ(SRCNIC_OK, qa_->post_send(wb));
    for (int i = 0; i < 3; ++i) {
        nics_.nic(0)->progress();   // chunks of the first on the wire, the second in the ring
    }
    EXPECT_EQ(1u, nics_.nic(0)->qp_cancel(qa_, to_b_, 5));
    // One more of the cancelled tag behind the second (in chunks now), cancelled twice: it
    // stays in the ring meanwhile, and completes CANCELED once when it is taken.
    srcnic_wqe_t wc = make_send(to_b_, 3, data_a.data(), 100);
    wc.tag = 5;
    ASSERT_EQ(SRCNIC_OK, qa_->post_send(wc));
    EXPECT_EQ(0u, nics_.nic(0)->qp_cancel(qa_, to_b_, 5));
    EXPECT_EQ(0u, nics_.nic(0)->qp_cancel(qa_, to_b_, 5));
    // (The third, cancelled when taken, may complete before the second's last chunks.)
    std::map<uint64_t, int16_t> status;
    srcnic_cqe_t c;
    for (int i = 0; i < 3; ++i) {
        ASSERT_TRUE(poll_one(nics_.all(), qa_, &c));
        EXPECT_TRUE(status.emplace(c.wr_id, c.status).second) << "wr_id " << c.wr_id << " twice";
    }
    EXPECT_EQ((std::map<uint64_t, int16_t>{{1, SRCNIC_ERR_CANCELED}, {2, SRCNIC_OK}, {3, SRCNIC_ERR_CANCELED}}),
              status);
    EXPECT_TRUE(data_b == region_b);
    for (int i = 0; i < 100; ++i) {
        nics_.nic(0)->progress();
        nics_.nic(1)->progress();
    }
    EXPECT_EQ(0u, qa_->poll_cq(&c, 1)) << "completed twice";
    nics_.nic(1)->mr_dereg(mr_a);
    nics_.nic(1)->mr_dereg(mr_b);
}

TEST_F(NicBasic, remote_access__forged_or_out_of_bounds_refused_memory_unchanged)
{
    std::vector<uint8_t> region(10000, 0x11), guard_before(64, 0x22);
    srcnic_mr_t *ro, *rw;
    ASSERT_EQ(SRCNIC_OK, nics_.nic(1)->mr_reg(region.data() + 1000, 4000, SRCNIC_ACCESS_REMOTE_READ, &ro));
    ASSERT_EQ(SRCNIC_OK, nics_.nic(1)->mr_reg(region.data() + 5000, 4000,
                                               SRCNIC_ACCESS_REMOTE_READ | SRCNIC_ACCESS_REMOTE_WRITE, &rw));
    const uint64_t ro_base = reinterpret_cast<uint64_t>(region.data() + 1000);
    const uint64_t rw_base = reinterpret_cast<uint64_t>(region.data() + 5000);
    auto data = pattern(20000, 4);
    struct Case {
        const char *what;
        srcnic_opcode_t op;
        uint64_t addr;
        uint32_t len;
        uint64_t rkey;
    } cases[] = {
        {"forged key", SRCNIC_OP_WRITE, rw_base, 100, rw->rkey ^ (1ull << 40)},
        {"key of another slot", SRCNIC_OP_WRITE, rw_base, 100, (rw->rkey & ~0xfffffull) | (ro->rkey & 0xfffff)},
        {"zero key", SRCNIC_OP_WRITE, rw_base, 100, 0},
        {"write to read-only", SRCNIC_OP_WRITE, ro_base, 100, ro->rkey},
        {"past the end", SRCNIC_OP_WRITE, rw_base + 3950, 100, rw->rkey},
        {"before the start", SRCNIC_OP_WRITE, rw_base - 1, 10, rw->rkey},
        {"multi-segment past the end", SRCNIC_OP_WRITE, rw_base, 20000, rw->rkey},
        {"read past the end", SRCNIC_OP_READ, ro_base + 10, 4000, ro->rkey},
        {"read forged key", SRCNIC_OP_READ, ro_base, 10, ro->rkey + (1ull << 20)},
        {"wrapping address", SRCNIC_OP_WRITE, ~0ull - 10, 100, rw->rkey},
    };
    const std::vector<uint8_t> before = region;
    uint64_t errors = 0;
    for (const Case &k : cases) {
        std::vector<uint8_t> local(k.len, 0x77);
        void *src = k.op == SRCNIC_OP_WRITE ? static_cast<void *>(data.data()) : local.data();
        ASSERT_EQ(SRCNIC_OK, qa_->post_send(make_rdma(k.op, to_b_, 1, src, k.len, k.addr, k.rkey)));
        srcnic_cqe_t c;
        ASSERT_TRUE(poll_one(nics_.all(), qa_, &c)) << k.what;
        EXPECT_EQ(SRCNIC_ERR_REMOTE_ACCESS, c.status) << k.what;
        EXPECT_EQ(++errors, nics_.nic(1)->counter(SRCNIC_CNT_ACCESS_ERRORS)) << k.what;
        EXPECT_EQ(before, region) << k.what;
        if (k.op == SRCNIC_OP_READ) {
            EXPECT_EQ(std::vector<uint8_t>(k.len, 0x77), local) << k.what;
        }
    }
    // And a deregistered key is dead.
    const uint64_t old_key = rw->rkey;
    nics_.nic(1)->mr_dereg(rw);
    ASSERT_EQ(SRCNIC_OK, qa_->post_send(make_rdma(SRCNIC_OP_WRITE, to_b_, 2, data.data(), 10, rw_base, old_key)));
    srcnic_cqe_t c;
    ASSERT_TRUE(poll_one(nics_.all(), qa_, &c));
    EXPECT_EQ(SRCNIC_ERR_REMOTE_ACCESS, c.status);
    EXPECT_EQ(before, region);
    nics_.nic(1)->mr_dereg(ro);
}

TEST_F(NicBasic, post_send__full_ring_and_bad_wqe)
{
    std::vector<uint8_t> data(10);
    srcnic_wqe_t w = make_send(to_b_, 1, data.data(), 10);
    unsigned posted = 0;
    while (qa_->post_send(w) == SRCNIC_OK) {
        ASSERT_LT(++posted, 100000u);
    }
    EXPECT_EQ(256u, posted);
    EXPECT_EQ(SRCNIC_ERR_NO_RESOURCE, qa_->post_send(w));
    srcnic_wqe_t bad = w;
    bad.opcode = 9;
    EXPECT_EQ(SRCNIC_ERR_INVALID_PARAM, nics_.nic(0)->validate_wqe(bad));
    bad = w;
    bad.num_sge = SRCNIC_WQE_MAX_SGE + 1;
    bad.flags = 0;
    EXPECT_EQ(SRCNIC_ERR_INVALID_PARAM, nics_.nic(0)->validate_wqe(bad));
    bad = w;
    bad.flags = SRCNIC_WQE_FLAG_INLINE;
    bad.inline_len = SRCNIC_WQE_INLINE_MAX + 1;
    EXPECT_EQ(SRCNIC_ERR_INVALID_PARAM, nics_.nic(0)->validate_wqe(bad));
}

TEST_F(NicBasic, connection__shared_by_qps)
{
    srcnic_qp_config_t qc;
    srcnic_qp_config_init(&qc);
    Qp *qa2, *qb2;
    ASSERT_EQ(SRCNIC_OK, nics_.nic(0)->qp_create(qc, &qa2));
    ASSERT_EQ(SRCNIC_OK, nics_.nic(1)->qp_create(qc, &qb2));
    srcnic_dest_t to_b2;
    ASSERT_EQ(SRCNIC_OK, nics_.nic(0)->dest_create(nics_.nic(1)->addr(), qb2->qpn(), &to_b2));
    EXPECT_EQ(to_b_.peer, to_b2.peer);   // same connection, another QP
    std::vector<uint8_t> d1(100, 1), d2(100, 2), r1(100), r2(100);
    ASSERT_EQ(SRCNIC_OK, qb_->post_recv(make_recv(1, r1.data(), 100)));
    ASSERT_EQ(SRCNIC_OK, qb2->post_recv(make_recv(2, r2.data(), 100)));
    ASSERT_EQ(SRCNIC_OK, qa2->post_send(make_send(to_b_, 1, d1.data(), 100)));
    ASSERT_EQ(SRCNIC_OK, qa_->post_send(make_send(to_b2, 2, d2.data(), 100)));
    srcnic_cqe_t c;
    ASSERT_TRUE(poll_one(nics_.all(), qb_, &c));
    EXPECT_EQ(qa2->qpn(), c.src_qpn);
    ASSERT_TRUE(poll_one(nics_.all(), qb2, &c));
    EXPECT_EQ(qa_->qpn(), c.src_qpn);
    EXPECT_EQ(d1, r1);
    EXPECT_EQ(d2, r2);
    EXPECT_EQ(1u, nics_.nic(0)->num_connections());
    EXPECT_EQ(1u, nics_.nic(1)->num_connections());
}

// The QP contexts a NIC holds count in its state (their rings do not), created and destroyed
// QPs alike.
TEST_F(NicBasic, state_bytes__qps_counts_live_qp_contexts)
{
    Nic *a = nics_.nic(0);
    EXPECT_EQ(sizeof(QpContext), a->state_bytes().qps);
    srcnic_qp_config_t qc;
    srcnic_qp_config_init(&qc);
    Qp *q2, *q3;
    ASSERT_EQ(SRCNIC_OK, a->qp_create(qc, &q2));
    ASSERT_EQ(SRCNIC_OK, a->qp_create(qc, &q3));
    EXPECT_EQ(3 * sizeof(QpContext), a->state_bytes().qps);
    a->qp_destroy(q2);
    EXPECT_EQ(2 * sizeof(QpContext), a->state_bytes().qps);
    const Nic::StateBytes b = a->state_bytes();
    EXPECT_EQ(b.connections + b.dcis + b.dc_targets + b.closed + b.remotes + b.peer_nics + b.qps, b.total());
    a->qp_destroy(q3);
}

bool readable(int fd, int timeout_ms)
{
    struct pollfd p = {fd, POLLIN, 0};
    return poll(&p, 1, timeout_ms) == 1;
}

TEST_F(NicBasic, arm__busy_while_pending_then_woken_by_arrival)
{
    Nic *b = nics_.nic(1);
    std::vector<uint8_t> data(100, 3), rbuf(100);
    ASSERT_EQ(SRCNIC_OK, qb_->post_recv(make_recv(1, rbuf.data(), 100)));
    // Idle: arming succeeds and the fd stays quiet.
    ASSERT_TRUE(progress_until(nics_.all(), [&] { return b->arm() == SRCNIC_OK; }));
    EXPECT_FALSE(readable(b->event_fd(), 0));
    // A message arrives while armed: the fd becomes readable without anyone progressing b.
    ASSERT_EQ(SRCNIC_OK, qa_->post_send(make_send(to_b_, 1, data.data(), 100)));
    nics_.nic(0)->progress();
    EXPECT_TRUE(readable(b->event_fd(), 5000));
    b->progress();
    // A completion is queued now: arming must refuse.
    EXPECT_EQ(SRCNIC_ERR_BUSY, b->arm());
    srcnic_cqe_t c;
    ASSERT_EQ(1u, qb_->poll_cq(&c, 1));
    EXPECT_EQ(SRCNIC_OK, c.status);
}

TEST_F(NicBasic, arm__completion_from_background_progress_wakes_fd)
{
    Nic *b = nics_.nic(1);
    std::vector<uint8_t> data(100, 3), rbuf(100);
    ASSERT_EQ(SRCNIC_OK, qb_->post_recv(make_recv(1, rbuf.data(), 100)));
    ASSERT_TRUE(progress_until(nics_.all(), [&] { return b->arm() == SRCNIC_OK; }));
    ASSERT_EQ(SRCNIC_OK, qa_->post_send(make_send(to_b_, 1, data.data(), 100)));
    // The sender transmits; b is progressed "in the background" (the UCT async timer) before
    // the waiter looks: the datagram is consumed, but the completion must still wake it.
    ASSERT_TRUE(progress_until(nics_.all(), [&] { return b->counter(SRCNIC_CNT_RX_PACKETS) > 0; }));
    EXPECT_FALSE(readable(b->link().event_fd(), 0));   // nothing left in the link
    EXPECT_TRUE(readable(b->event_fd(), 5000));        // the completion woke the NIC's fd
}

// A NIC that is only progressed holds no descriptor of its own but its registration table's
// memfd (mr_table.cc); the first event_fd() or arm() creates the four a waiter needs (epoll
// set, timerfd, eventfd, the link's eventfd), once.
TEST(NicEvents, events_open__no_descriptor_until_event_fd_or_arm)
{
    const size_t start = open_fds();
    LoopbackNics nics(2);
    const size_t before = open_fds();
    EXPECT_LE(before, start + 2) << "at most the registration table's memfd per NIC";
    srcnic_qp_config_t qc;
    srcnic_qp_config_init(&qc);
    Qp *qa, *qb;
    ASSERT_EQ(SRCNIC_OK, nics.nic(0)->qp_create(qc, &qa));
    ASSERT_EQ(SRCNIC_OK, nics.nic(1)->qp_create(qc, &qb));
    srcnic_dest_t to_b;
    ASSERT_EQ(SRCNIC_OK, nics.nic(0)->dest_create(nics.nic(1)->addr(), qb->qpn(), &to_b));
    std::vector<uint8_t> data(100, 5), rbuf(100);
    ASSERT_EQ(SRCNIC_OK, qb->post_recv(make_recv(1, rbuf.data(), 100)));
    ASSERT_EQ(SRCNIC_OK, qa->post_send(make_send(to_b, 1, data.data(), 100)));
    srcnic_cqe_t c;
    ASSERT_TRUE(poll_one(nics.all(), qb, &c));
    EXPECT_EQ(before, open_fds()) << "traffic without a waiter opens no descriptor";
    ASSERT_TRUE(poll_one(nics.all(), qa, &c));
    ASSERT_TRUE(progress_until(nics.all(), [&] { return nics.nic(1)->arm() == SRCNIC_OK; }));
    EXPECT_EQ(before + 4, open_fds());
    EXPECT_GE(nics.nic(1)->event_fd(), 0);
    EXPECT_EQ(before + 4, open_fds()) << "created once";
    EXPECT_GE(nics.nic(0)->event_fd(), 0);
    EXPECT_EQ(before + 8, open_fds());
    // Armed after the fact, the fd still wakes on an arrival.
    ASSERT_EQ(SRCNIC_OK, qb->post_recv(make_recv(2, rbuf.data(), 100)));
    ASSERT_EQ(SRCNIC_OK, qa->post_send(make_send(to_b, 2, data.data(), 100)));
    nics.nic(0)->progress();
    EXPECT_TRUE(readable(nics.nic(1)->event_fd(), 5000));
    ASSERT_TRUE(poll_one(nics.all(), qb, &c));
    EXPECT_EQ(SRCNIC_OK, c.status);
}

// Out of descriptors at the first arm(): NO_RESOURCE (logged), no event fd, and what was
// created before the failure closed again; once descriptors are free, arm() creates them and
// works. The table is filled on purpose: the soft limit is lowered to two above the highest
// descriptor in use (so there are at least two to give back, even in a process that holds
// only 0, 1 and 2) and every free number below it taken, then two given back: the link's
// eventfd takes one, the epoll set the other, and the timerfd fails.
TEST(NicEvents, arm__out_of_descriptors_is_no_resource_then_recovers)
{
    LoopbackNics nics(1);
    Nic *nic = nics.nic(0);
    struct rlimit saved;
    ASSERT_EQ(0, getrlimit(RLIMIT_NOFILE, &saved));
    int highest = 2;
    if (DIR *d = opendir("/proc/self/fd")) {
        while (struct dirent *e = readdir(d)) {
            highest = std::max(highest, std::atoi(e->d_name));
        }
        closedir(d);
    }
    struct rlimit low = saved;
    low.rlim_cur = static_cast<rlim_t>(highest) + 3;
    ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &low));
    std::vector<int> fillers;
    for (int fd; (fd = dup(0)) >= 0;) {
        fillers.push_back(fd);
    }
    const int dup_errno = errno;
    if (fillers.size() < 2) {
        for (int f : fillers) {
            close(f);
        }
        setrlimit(RLIMIT_NOFILE, &saved);
        FAIL() << "only " << fillers.size() << " descriptors to give back under limit "
               << low.rlim_cur << " (highest in use " << highest << ")";
    }
    for (int i = 0; i < 2; ++i) {
        close(fillers.back());
        fillers.pop_back();
    }
    const srcnic_status_t status = nic->arm();
    const int fd = nic->event_fd();
    int freed = 0;   // descriptors the failed attempt left free
    for (int f; (f = dup(0)) >= 0; ++freed) {
        fillers.push_back(f);
    }
    for (int f : fillers) {
        close(f);
    }
    ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &saved));
    EXPECT_EQ(EMFILE, dup_errno);
    EXPECT_EQ(SRCNIC_ERR_NO_RESOURCE, status);
    EXPECT_EQ(-1, fd);
    EXPECT_EQ(1, freed) << "the epoll set made before the failure is closed; the link keeps its eventfd";
    ASSERT_TRUE(progress_until(nics.all(), [&] { return nic->arm() == SRCNIC_OK; }));
    EXPECT_GE(nic->event_fd(), 0);
}

// srcnic_qp_destroy (include/srcnic/srcnic.h): a QP destroyed with a large SEND half on the wire
// abandons it without a completion (its completion queue goes with it), and the rest of the
// message goes as NOPs: the receiver gets its buffer back as CANCELED, never a torn message, and
// the next message to it, from the QP that takes the freed slot, arrives whole. The freed QP's
// number is not the new QP's.
TEST_F(NicBasic, qp_destroy__abandons_work_and_the_peer_sees_no_torn_message)
{
    const uint32_t len = 4 << 20;
    auto data = pattern(len, 9);
    std::vector<uint8_t> rbuf(len, 0);
    ASSERT_EQ(SRCNIC_OK, qb_->post_recv(make_recv(1, rbuf.data(), len)));
    ASSERT_EQ(SRCNIC_OK, qa_->post_send(make_send(to_b_, 1, data.data(), len)));
    // Part of it out: the receiver has begun placing it.
    ASSERT_TRUE(progress_until(nics_.all(), [&] {
        return nics_.nic(1)->counter(SRCNIC_CNT_RX_PACKETS) >= 4;
    }));
    const uint32_t old_qpn = qa_->qpn();
    nics_.nic(0)->qp_destroy(qa_);
    qa_ = nullptr;
    srcnic_cqe_t rc;
    ASSERT_TRUE(poll_one(nics_.all(), qb_, &rc));
    EXPECT_EQ(1u, rc.wr_id);
    EXPECT_EQ(SRCNIC_ERR_CANCELED, rc.status) << "the receiver got a torn message";
    EXPECT_EQ(0u, rc.byte_len);

    srcnic_qp_config_t qc;
    srcnic_qp_config_init(&qc);
    Qp *qa2;
    ASSERT_EQ(SRCNIC_OK, nics_.nic(0)->qp_create(qc, &qa2));
    EXPECT_NE(old_qpn, qa2->qpn());
    auto next = pattern(100000, 10);
    std::vector<uint8_t> rbuf2(next.size(), 0);
    ASSERT_EQ(SRCNIC_OK, qb_->post_recv(make_recv(2, rbuf2.data(), static_cast<uint32_t>(rbuf2.size()))));
    ASSERT_EQ(SRCNIC_OK, qa2->post_send(make_send(to_b_, 2, next.data(), static_cast<uint32_t>(next.size()))));
    ASSERT_TRUE(poll_one(nics_.all(), qb_, &rc));
    EXPECT_EQ(2u, rc.wr_id);
    EXPECT_EQ(SRCNIC_OK, rc.status);
    EXPECT_EQ(next.size(), rc.byte_len);
    EXPECT_EQ(next, rbuf2);
    EXPECT_EQ(qa2->qpn(), rc.src_qpn);
    srcnic_cqe_t sc;
    ASSERT_TRUE(poll_one(nics_.all(), qa2, &sc));
    EXPECT_EQ(2u, sc.wr_id) << "a completion of the destroyed QP's work reached its successor";
    EXPECT_EQ(SRCNIC_OK, sc.status);
    EXPECT_FALSE(progress_until(nics_.all(), [&] { return qa2->poll_cq(&sc, 1) == 1; }, 0.2))
        << "a completion of the destroyed QP's work reached its successor";
    nics_.nic(0)->qp_destroy(qa2);
}

} // namespace
} // namespace test
} // namespace srcnic
