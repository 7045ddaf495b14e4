// The connection's two halves (connection.h): a connection holds its active half (ConnActive:
// messages in flight, acknowledgement owed, reorder slots, the message being received) only
// while it has work, and keeps only its Connection when idle. These tests drive traffic to many
// peers, with and without faults, and check that every message arrives once and in order, that
// every half goes back when the traffic ends, that an idle connection starts again where it
// stopped (PSNs, round-trip estimate), and that the state accounting says so.
#include "nic_harness.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace srcnic {
namespace test {
namespace {

static_assert(sizeof(Connection) == 64, "what every connection keeps: one cache line");
static_assert(sizeof(DcConn) <= 128, "a DC initiator or target context: two cache lines at most");
static_assert(sizeof(PeerNic) <= 48, "a remote NIC's entry: its address, incarnation and secret");

// A hub and `peers` Nics on one loopback fabric; the hub sends `rounds` numbered 8-byte
// messages to every peer's QP, each peer checks it gets 0, 1, 2... once each.
class ActiveHalves : public ::testing::Test {
protected:
    void build(size_t peers, const FaultConfig &faults, uint64_t seed, uint32_t max_active = 0,
               uint32_t sq_size = 0)
    {
        std::printf("seed %" PRIu64 "\n", seed);
        srcnic_config_t config = test_config();
        config.rto_us = 1000;
        config.rto_max_us = 20000;
        config.max_active = max_active;
        nics_.reset(new LoopbackNics(peers + 1, config, 8192, seed));
        srcnic_qp_config_t qc;
        srcnic_qp_config_init(&qc);
        if (sq_size != 0) {
            qc.sq_size = sq_size;
        }
        qps_.resize(peers + 1);
        for (size_t i = 0; i <= peers; ++i) {
            ASSERT_EQ(SRCNIC_OK, nics_->nic(i)->qp_create(qc, &qps_[i]));
            ASSERT_EQ(SRCNIC_OK, nics_->faulty(i)->set_config(faults, faults));
        }
        bufs_.assign(peers + 1, std::vector<uint64_t>(qc.rq_size));
        next_.assign(peers + 1, 0);
        for (size_t i = 1; i <= peers; ++i) {
            srcnic_dest_t d;
            ASSERT_EQ(SRCNIC_OK, hub()->dest_create(nics_->nic(i)->addr(), qps_[i]->qpn(), &d));
            dests_.push_back(d);
            for (uint32_t k = 0; k < qc.rq_size; ++k) {
                ASSERT_EQ(SRCNIC_OK, qps_[i]->post_recv(make_recv(k, &bufs_[i][k], 8)));
            }
        }
    }

    Nic *hub() { return nics_->nic(0); }

    // Sends `rounds` messages to every peer, at most 8 outstanding per peer, and checks each
    // arrives once, in order.
    void exchange(uint64_t rounds)
    {
        const size_t peers = dests_.size();
        sendbufs_.resize(peers * 8);
        std::vector<uint64_t> sent(peers, 0), completed(peers, 0);
        uint64_t received = 0;
        auto poll_peers = [&]() {
            for (size_t i = 1; i <= peers; ++i) {
                srcnic_cqe_t cqe;
                while (qps_[i]->poll_cq(&cqe, 1) == 1) {
                    ASSERT_EQ(SRCNIC_OK, cqe.status);
                    uint64_t v;
                    std::memcpy(&v, &bufs_[i][cqe.wr_id], 8);
                    ASSERT_EQ(next_[i], v) << "peer " << i << ": out of order or repeated";
                    ++next_[i];
                    ++received;
                    ASSERT_EQ(SRCNIC_OK, qps_[i]->post_recv(make_recv(cqe.wr_id, &bufs_[i][cqe.wr_id], 8)));
                }
            }
        };
        const bool done = progress_until(nics_->all(), [&]() {
            for (size_t p = 0; p < peers; ++p) {
                while (sent[p] < rounds && sent[p] - completed[p] < 8) {
                    uint64_t &v = sendbufs_[p * 8 + sent[p] % 8];   // (8 outstanding at most)
                    v = next_sent_base_[p] + sent[p];
                    const srcnic_status_t st = qps_[0]->post_send(make_send(dests_[p], p, &v, 8));
                    if (st != SRCNIC_OK) {
                        EXPECT_EQ(SRCNIC_ERR_NO_RESOURCE, st);
                        ++refused_posts_;
                        break;
                    }
                    ++sent[p];
                }
            }
            peak_halves_ = std::max(peak_halves_, hub()->active_halves());
            srcnic_cqe_t cqe;
            while (qps_[0]->poll_cq(&cqe, 1) == 1) {
                EXPECT_EQ(SRCNIC_OK, cqe.status);
                ++completed[cqe.wr_id];
            }
            poll_peers();
            uint64_t all = 0;
            for (size_t p = 0; p < peers; ++p) {
                all += completed[p];
            }
            return all == rounds * peers && received == rounds * peers;
        });
        ASSERT_TRUE(done) << "watchdog: " << received << " of " << rounds * peers << " received";
        for (size_t p = 0; p < peers; ++p) {
            next_sent_base_[p] += rounds;
        }
    }

    // Progresses until no connection of any Nic holds an active half.
    bool settle()
    {
        std::vector<Nic *> all = nics_->all();
        return progress_until(all, [&]() {
            for (Nic *n : all) {
                if (n->active_halves() != 0) {
                    return false;
                }
            }
            return true;
        }, 30.0);
    }

    std::unique_ptr<LoopbackNics> nics_;
    std::vector<Qp *> qps_;
    std::vector<srcnic_dest_t> dests_;
    std::vector<std::vector<uint64_t>> bufs_;
    std::vector<uint64_t> next_;                       // per peer: the next value expected
    std::vector<uint64_t> sendbufs_;                   // per peer: 8 messages' payloads
    unsigned peak_halves_ = 0;                         // the hub's, seen between progress calls
    uint64_t refused_posts_ = 0;                       // posts the hub's full send queue refused
    std::vector<uint64_t> next_sent_base_ = std::vector<uint64_t>(1024, 0);
};

TEST_F(ActiveHalves, idle__every_half_goes_back_and_idle_connections_cost_their_context_only)
{
    constexpr size_t kPeers = 64;
    build(kPeers, FaultConfig(), 11);
    exchange(20);
    ASSERT_TRUE(settle()) << "halves still held: " << hub()->active_halves();
    const Nic::StateBytes b = hub()->state_bytes();
    EXPECT_EQ(kPeers, hub()->num_connections());
    EXPECT_EQ(kPeers * sizeof(Connection), b.connections);
    // One entry per remote NIC, whatever names it.
    EXPECT_EQ(kPeers * sizeof(PeerNic), b.peer_nics);
    // The pool keeps a few for the next connections to get work, never one per connection.
    EXPECT_GT(b.active, 0u);
    EXPECT_LE(b.active, Nic::kActiveKeep * (sizeof(ConnActive) + 4096 * sizeof(int32_t)));
    EXPECT_EQ(b.connections + b.dcis + b.dc_targets + b.active + b.closed + b.remotes + b.peer_nics + b.qps,
              b.total());
    for (size_t i = 1; i <= kPeers; ++i) {
        EXPECT_EQ(1u, nics_->nic(i)->num_connections());
        EXPECT_EQ(0u, nics_->nic(i)->active_halves());
    }
}

TEST_F(ActiveHalves, idle_then_busy__goes_on_where_it_stopped)
{
    build(4, FaultConfig(), 12);
    exchange(50);
    ASSERT_TRUE(settle());
    uint32_t srtt = 0, rto = 0;
    ASSERT_TRUE(hub()->dest_timing(dests_[0], &srtt, &rto));
    EXPECT_GT(srtt, 0u) << "the round-trip estimate is kept while idle";
    const uint64_t dups = nics_->nic(1)->counter(SRCNIC_CNT_DUPLICATES);
    // Again, several times: PSNs go on (a restart from 1 would be dropped as duplicates or
    // delivered twice, which exchange() catches).
    for (int round = 0; round < 5; ++round) {
        exchange(30);
        ASSERT_TRUE(settle());
    }
    EXPECT_EQ(dups, nics_->nic(1)->counter(SRCNIC_CNT_DUPLICATES));
    EXPECT_EQ(0u, hub()->counter(SRCNIC_CNT_CONN_FAILED));
    uint32_t srtt2 = 0;
    ASSERT_TRUE(hub()->dest_timing(dests_[0], &srtt2, &rto));
    EXPECT_GT(srtt2, 0u);
}

TEST_F(ActiveHalves, lossy__exactly_once_and_every_half_back)
{
    FaultConfig faults;
    faults.drop = 0.10;
    faults.duplicate = 0.05;
    faults.reorder = 0.10;
    build(32, faults, 13);
    for (int round = 0; round < 3; ++round) {
        exchange(40);
        if (!settle()) {
            for (Nic *n : nics_->all()) {
                if (n->active_halves() != 0) {
                    ADD_FAILURE() << "round " << round << ": halves held: " << n->peers_json();
                }
            }
            return;
        }
    }
    EXPECT_GT(hub()->counter(SRCNIC_CNT_RETRANSMITS), 0u) << "the faults were not applied";
    EXPECT_EQ(0u, hub()->counter(SRCNIC_CNT_CONN_FAILED));
}

TEST_F(ActiveHalves, max_active__requests_wait_in_their_queue_then_all_arrive_once)
{
    // 16 peers, at most 2 connections of the hub busy at once, a send queue of 16: posts meet
    // NO_RESOURCE (back-pressure) and every message still arrives once, in order, under loss.
    FaultConfig faults;
    faults.drop = 0.05;
    build(16, faults, 14, 2, 16);
    exchange(30);
    EXPECT_LE(peak_halves_, 2u) << "the hub took more active halves than max_active";
    EXPECT_GT(hub()->counter(SRCNIC_CNT_ACTIVE_WAITS), 0u) << "no request ever waited";
    EXPECT_GT(refused_posts_, 0u) << "the send queue never filled";
    EXPECT_EQ(0u, hub()->counter(SRCNIC_CNT_CONN_FAILED));
    ASSERT_TRUE(settle());
}

TEST_F(ActiveHalves, max_active__out_of_range_is_refused_by_name)
{
    srcnic_config_t config;
    srcnic_config_init(&config);
    config.max_active = 1u << 30;
    EXPECT_EQ(SRCNIC_ERR_INVALID_PARAM, srcnic_config_check(&config));
}

} // namespace
} // namespace test
} // namespace srcnic
