// Peer death and restart: outstanding work to a dead peer fails with ENDPOINT_TIMEOUT within
// the configured bound and nothing hangs; a restarted peer (new incarnation on the same address)
// is served cleanly once its new address is known, and the old connection then fails with
// CONNECTION_RESET.
#include "nic_harness.h"

namespace srcnic {
namespace test {
namespace {

TEST(NicPeer, death__outstanding_fail_with_timeout_in_bound)
{
    srcnic_config_t config = test_config();
    config.rto_us = 5000;
    config.rto_max_us = 50000;
    config.retry_count = 1000;
    config.peer_timeout_ms = 500;
    LoopbackNics nics(2, config);
    srcnic_qp_config_t qc;
    srcnic_qp_config_init(&qc);
    Qp *qa, *qb;
    ASSERT_EQ(SRCNIC_OK, nics.nic(0)->qp_create(qc, &qa));
    ASSERT_EQ(SRCNIC_OK, nics.nic(1)->qp_create(qc, &qb));
    srcnic_dest_t to_b;
    ASSERT_EQ(SRCNIC_OK, nics.nic(0)->dest_create(nics.nic(1)->addr(), qb->qpn(), &to_b));
    std::vector<uint8_t> data(50000, 1);
    nics.kill(1);
    const uint64_t start = now_ns();
    const unsigned kOps = 40;
    for (unsigned i = 0; i < kOps; ++i) {
        srcnic_opcode_t op = i % 3 == 0 ? SRCNIC_OP_SEND : (i % 3 == 1 ? SRCNIC_OP_WRITE : SRCNIC_OP_READ);
        ASSERT_EQ(SRCNIC_OK, qa->post_send(make_rdma(op, to_b, i, data.data(), 1000 + i, 0x1000, 1)));
    }
    unsigned failed = 0;
    ASSERT_TRUE(progress_until(nics.all(), [&] {
        srcnic_cqe_t c;
        while (qa->poll_cq(&c, 1) == 1) {
            EXPECT_EQ(SRCNIC_ERR_ENDPOINT_TIMEOUT, c.status);
            EXPECT_EQ(failed, c.wr_id);
            ++failed;
        }
        return failed == kOps;
    }, 10.0));
    const double elapsed_ms = (now_ns() - start) / 1e6;
    // Bound: peer_timeout_ms plus one backed-off retransmission interval.
    EXPECT_LT(elapsed_ms, config.peer_timeout_ms + config.rto_max_us / 1000.0 + 100);
    EXPECT_EQ(SRCNIC_ERR_ENDPOINT_TIMEOUT, nics.nic(0)->dest_status(to_b));
    EXPECT_EQ(1u, nics.nic(0)->counter(SRCNIC_CNT_CONN_FAILED));
    // Later posts to the dead destination fail at once instead of hanging.
    ASSERT_EQ(SRCNIC_OK, qa->post_send(make_send(to_b, 99, data.data(), 10)));
    srcnic_cqe_t c;
    ASSERT_TRUE(poll_one(nics.all(), qa, &c, 5.0));
    EXPECT_EQ(99u, c.wr_id);
    EXPECT_EQ(SRCNIC_ERR_ENDPOINT_TIMEOUT, c.status);
}

TEST(NicPeer, restart__new_incarnation_served_old_connection_reset)
{
    srcnic_config_t config = test_config();
    LoopbackNics nics(2, config);
    srcnic_qp_config_t qc;
    srcnic_qp_config_init(&qc);
    Qp *qa, *qb;
    ASSERT_EQ(SRCNIC_OK, nics.nic(0)->qp_create(qc, &qa));
    ASSERT_EQ(SRCNIC_OK, nics.nic(1)->qp_create(qc, &qb));
    srcnic_dest_t to_b;
    ASSERT_EQ(SRCNIC_OK, nics.nic(0)->dest_create(nics.nic(1)->addr(), qb->qpn(), &to_b));
    std::vector<uint8_t> data(3000, 7), rbuf(3000);
    ASSERT_EQ(SRCNIC_OK, qb->post_recv(make_recv(1, rbuf.data(), 3000)));
    ASSERT_EQ(SRCNIC_OK, qa->post_send(make_send(to_b, 1, data.data(), 3000)));
    srcnic_cqe_t c;
    ASSERT_TRUE(poll_one(nics.all(), qa, &c));
    ASSERT_EQ(SRCNIC_OK, c.status);

    // B restarts on the same port: a new incarnation.
    const uint16_t port = nics.nic(1)->addr().port;
    const uint64_t old_incarnation = nics.nic(1)->addr().incarnation;
    nics.kill(1);
    Nic *b2 = nics.add(config, 42, port);
    ASSERT_NE(old_incarnation, b2->addr().incarnation);
    Qp *qb2;
    ASSERT_EQ(SRCNIC_OK, b2->qp_create(qc, &qb2));

    // A still talks to the old incarnation: B2 drops its packets unanswered (an answer would
    // tell whoever sent them B2's incarnation, PROTOCOL.md §7.3), and nothing is delivered.
    ASSERT_EQ(SRCNIC_OK, qa->post_send(make_send(to_b, 2, data.data(), 3000)));
    ASSERT_TRUE(progress_until(nics.all(), [&] {
        return b2->counter(SRCNIC_CNT_DROP_WRONG_NIC) >= 1;
    }, 10.0));
    EXPECT_EQ(0u, b2->counter(SRCNIC_CNT_TX_PACKETS));
    EXPECT_EQ(0u, qb2->poll_cq(&c, 1));
    EXPECT_EQ(0u, qa->poll_cq(&c, 1));

    // A learns B2's address (as UCX would hand it over): the old connection, to the same
    // address with another incarnation, fails at once, and the request on it with it.
    srcnic_dest_t to_b2;
    ASSERT_EQ(SRCNIC_OK, nics.nic(0)->dest_create(b2->addr(), qb2->qpn(), &to_b2));
    ASSERT_TRUE(poll_one(nics.all(), qa, &c, 10.0));
    EXPECT_EQ(2u, c.wr_id);
    EXPECT_EQ(SRCNIC_ERR_CONNECTION_RESET, c.status);
    EXPECT_EQ(SRCNIC_ERR_CONNECTION_RESET, nics.nic(0)->dest_status(to_b));

    // The new incarnation is served on a fresh connection.
    std::vector<uint8_t> rbuf2(3000);
    ASSERT_EQ(SRCNIC_OK, qb2->post_recv(make_recv(5, rbuf2.data(), 3000)));
    ASSERT_EQ(SRCNIC_OK, qa->post_send(make_send(to_b2, 3, data.data(), 3000)));
    ASSERT_TRUE(poll_one(nics.all(), qb2, &c));
    EXPECT_EQ(SRCNIC_OK, c.status);
    EXPECT_EQ(data, rbuf2);
    ASSERT_TRUE(poll_one(nics.all(), qa, &c));
    EXPECT_EQ(3u, c.wr_id);
    EXPECT_EQ(SRCNIC_OK, c.status);

    // One remote NIC named: the old incarnation's entry, kept by the failed connection's slot
    // (a late packet of the old peer is still answered), went when the new connection took
    // the slot.
    const Nic::StateBytes st = nics.nic(0)->state_bytes();
    EXPECT_EQ(sizeof(Connection), st.connections);
    EXPECT_EQ(sizeof(PeerNic), st.peer_nics);
}

TEST(NicPeer, passive_side__first_timeout_is_not_a_failure)
{
    // B learns of A only from A's READ request, and the first thing B transmits is the answer.
    // Answers that go unacknowledged for a while are retransmitted, not a dead peer.
    srcnic_config_t config = test_config();
    config.rto_us = 2000;
    config.retry_count = 1000;
    config.peer_timeout_ms = 5000;
    LoopbackNics nics(2, config);
    srcnic_qp_config_t qc;
    srcnic_qp_config_init(&qc);
    Qp *qa, *qb;
    ASSERT_EQ(SRCNIC_OK, nics.nic(0)->qp_create(qc, &qa));
    ASSERT_EQ(SRCNIC_OK, nics.nic(1)->qp_create(qc, &qb));
    srcnic_dest_t to_b;
    ASSERT_EQ(SRCNIC_OK, nics.nic(0)->dest_create(nics.nic(1)->addr(), qb->qpn(), &to_b));
    std::vector<uint8_t> region(100000, 9), local(100000);
    srcnic_mr_t *mr;
    ASSERT_EQ(SRCNIC_OK, nics.nic(1)->mr_reg(region.data(), region.size(), SRCNIC_ACCESS_REMOTE_READ, &mr));
    FaultConfig all;
    all.drop = 1.0;
    ASSERT_EQ(SRCNIC_OK, nics.faulty(0)->set_config(FaultConfig(), all));   // A hears nothing
    ASSERT_EQ(SRCNIC_OK, qa->post_send(make_rdma(SRCNIC_OP_READ, to_b, 1, local.data(), 100000,
                                                 reinterpret_cast<uint64_t>(region.data()), mr->rkey)));
    ASSERT_TRUE(progress_until(nics.all(), [&] { return nics.nic(1)->counter(SRCNIC_CNT_TIMEOUTS) >= 3; }, 10.0));
    EXPECT_EQ(0u, nics.nic(1)->counter(SRCNIC_CNT_CONN_FAILED));
    ASSERT_EQ(SRCNIC_OK, nics.faulty(0)->set_config(FaultConfig(), FaultConfig()));
    srcnic_cqe_t c;
    ASSERT_TRUE(poll_one(nics.all(), qa, &c));
    EXPECT_EQ(SRCNIC_OK, c.status);
    EXPECT_EQ(region, local);
    nics.nic(1)->mr_dereg(mr);
}

} // namespace
} // namespace test
} // namespace srcnic
