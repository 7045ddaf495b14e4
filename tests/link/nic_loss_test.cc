// Engine tests under faults: many Nics and QPs over faulty links (the in-memory loopback fabric
// and UDP on 127.0.0.1) at 0 %, 1 %, 10 % and 30 % loss plus reordering, duplication and
// corruption, 100,000 messages of 0 B to 1 MiB in each case; every message is delivered exactly
// once and in order per QP pair, content verified. Also: drop until a resend happens, then heal.
#include "nic_harness.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>

namespace srcnic {
namespace test {
namespace {

// Message i from (src nic, src qp) to (dst nic, dst qp): a header with the sequence number and
// a payload derived from it, so the receiver can check order and content on its own.
struct MsgHeader {
    uint32_t seq;
    uint32_t src;       // sender index
    uint32_t len;
    uint32_t check;
};

uint8_t fill_byte(uint32_t seq, uint32_t src, size_t i)
{
    return static_cast<uint8_t>((seq * 2654435761u + src * 40503u + i * 31u) >> 11);
}

struct Flow {
    size_t src_nic, dst_nic;
    Qp *src_qp, *dst_qp;
    srcnic_dest_t dest;
    uint32_t index;      // sender identity in messages
    uint32_t sent = 0;   // messages posted
    uint32_t completed = 0;
    uint32_t received = 0;
    std::deque<std::vector<uint8_t>> in_flight;   // buffers of posted messages, oldest first
};

struct LossCase {
    const char *name;
    double drop, duplicate, reorder, corrupt;
};

// Messages of each case, spread over the flows.
constexpr uint32_t kLossMessages = 100000;

enum class LinkKind { kLoopback, kUdp };

class NicLoss : public ::testing::TestWithParam<std::tuple<LinkKind, LossCase>> {};

size_t message_size(Random &rng)
{
    const uint64_t r = rng.below(1000);
    if (r < 850) {
        return rng.below(300);           // small: 0..299 B
    }
    if (r < 995) {
        return rng.below(20000);         // medium: several packets
    }
    return rng.below(1u << 20) + 1;      // large: up to 1 MiB
}

TEST_P(NicLoss, many_messages__exactly_once_in_order)
{
    const LinkKind kind = std::get<0>(GetParam());
    const LossCase &lc = std::get<1>(GetParam());
    const uint64_t seed = 0x5eed0000 + static_cast<uint64_t>(lc.drop * 1000) +
                          (kind == LinkKind::kUdp ? 0x100 : 0);
    std::printf("seed %" PRIu64 " (%s)\n", seed, lc.name);
    Random rng(seed);
    srcnic_config_t config = test_config();
    // Both links deliver in microseconds: a short timeout keeps the lossy cases brief (a
    // spurious retransmission is only a duplicate, which the receiver drops).
    config.rto_us = 1000;
    config.rto_max_us = 20000;
    config.rx_buffers = 1024;   // 3 Nics x 6 connections of full windows reorder a lot
    constexpr size_t kNics = 3;
    std::unique_ptr<FaultyNics> owner;
    LoopbackNics *loopback = nullptr;   // the fabric's drop counters, for the report
    if (kind == LinkKind::kLoopback) {
        loopback = new LoopbackNics(kNics, config, 8192, seed);
        owner.reset(loopback);
    } else {
        owner.reset(new UdpNics(kNics, config, seed));
    }
    FaultyNics &nics = *owner;
    FaultConfig fc;
    fc.drop = lc.drop;
    fc.duplicate = lc.duplicate;
    fc.reorder = lc.reorder;
    fc.corrupt = lc.corrupt;
    for (size_t i = 0; i < kNics; ++i) {
        ASSERT_EQ(SRCNIC_OK, nics.faulty(i)->set_config(fc, fc));
    }
    // Two QPs per Nic; a flow from every QP to a QP on each other Nic and to the other QP on its
    // own Nic (local traffic takes the same path).
    srcnic_qp_config_t qc;
    srcnic_qp_config_init(&qc);
    qc.sq_size = 64;
    qc.rq_size = 64;
    std::vector<std::vector<Qp *>> qps(kNics);
    for (size_t n = 0; n < kNics; ++n) {
        for (int q = 0; q < 2; ++q) {
            Qp *qp;
            ASSERT_EQ(SRCNIC_OK, nics.nic(n)->qp_create(qc, &qp));
            qps[n].push_back(qp);
        }
    }
    std::vector<Flow> flows;
    for (size_t s = 0; s < kNics; ++s) {
        for (int sq = 0; sq < 2; ++sq) {
            for (size_t d = 0; d < kNics; ++d) {
                Flow f;
                f.src_nic = s;
                f.dst_nic = d;
                f.src_qp = qps[s][sq];
                f.dst_qp = qps[d][d == s ? 1 - sq : sq];
                f.index = static_cast<uint32_t>(flows.size());
                ASSERT_EQ(SRCNIC_OK, nics.nic(s)->dest_create(nics.nic(d)->addr(), f.dst_qp->qpn(), &f.dest));
                flows.push_back(std::move(f));
            }
        }
    }
    // Receive buffers: 1 MiB + header each, reposted after every delivery.
    const uint32_t kRecvSize = (1u << 20) + sizeof(MsgHeader);
    std::map<Qp *, std::vector<std::vector<uint8_t>>> rbufs;
    for (size_t n = 0; n < kNics; ++n) {
        for (Qp *qp : qps[n]) {
            auto &bufs = rbufs[qp];
            bufs.resize(16);
            for (size_t b = 0; b < bufs.size(); ++b) {
                bufs[b].resize(kRecvSize);
                ASSERT_EQ(SRCNIC_OK, qp->post_recv(make_recv(b, bufs[b].data(), kRecvSize)));
            }
        }
    }
    // Expected next sequence number per flow, seen at the receiver.
    std::vector<uint32_t> next_seq(flows.size(), 0);
    const uint32_t per_flow = (kLossMessages + static_cast<uint32_t>(flows.size()) - 1) /
                              static_cast<uint32_t>(flows.size());
    uint64_t delivered = 0, bytes = 0;
    bool failed = false;
    std::string failure;
    auto step = [&]() {
        // Post new messages while the send ring has room (bounded outstanding per flow).
        for (Flow &f : flows) {
            while (f.sent < per_flow && f.sent - f.completed < 8) {
                const size_t len = message_size(rng);
                std::vector<uint8_t> msg(sizeof(MsgHeader) + len);
                MsgHeader h{f.sent, f.index, static_cast<uint32_t>(len), 0};
                for (size_t i = 0; i < len; ++i) {
                    msg[sizeof(h) + i] = fill_byte(h.seq, h.src, i);
                }
                std::memcpy(msg.data(), &h, sizeof(h));
                srcnic_wqe_t w = make_send(f.dest, f.index, msg.data(), static_cast<uint32_t>(msg.size()));
                if (f.src_qp->post_send(w) != SRCNIC_OK) {
                    break;
                }
                f.in_flight.push_back(std::move(msg));
                ++f.sent;
            }
        }
        for (auto &nicp : nics.all()) {
            nicp->progress();
        }
        // Completions.
        for (size_t n = 0; n < kNics; ++n) {
            for (Qp *qp : qps[n]) {
                srcnic_cqe_t cqes[32];
                unsigned got = qp->poll_cq(cqes, 32);
                for (unsigned i = 0; i < got; ++i) {
                    const srcnic_cqe_t &c = cqes[i];
                    if (c.status != SRCNIC_OK) {
                        failed = true;
                        failure = std::string("completion failed: ") +
                                  srcnic_status_string(static_cast<srcnic_status_t>(c.status));
                        return;
                    }
                    if (c.opcode != SRCNIC_OP_RECV) {
                        Flow &f = flows[c.wr_id];
                        f.in_flight.pop_front();
                        ++f.completed;
                        continue;
                    }
                    auto &buf = rbufs[qp][c.wr_id];
                    MsgHeader h;
                    std::memcpy(&h, buf.data(), sizeof(h));
                    if (h.src >= flows.size() || h.seq != next_seq[h.src] ||
                        c.byte_len != sizeof(h) + h.len || flows[h.src].dst_qp != qp) {
                        failed = true;
                        failure = "out of order, duplicated or misdelivered message";
                        return;
                    }
                    for (size_t b = 0; b < h.len; ++b) {
                        if (buf[sizeof(h) + b] != fill_byte(h.seq, h.src, b)) {
                            failed = true;
                            failure = "payload differs";
                            return;
                        }
                    }
                    ++next_seq[h.src];
                    ++flows[h.src].received;
                    ++delivered;
                    bytes += c.byte_len;
                    if (qp->post_recv(make_recv(c.wr_id, buf.data(), kRecvSize)) != SRCNIC_OK) {
                        failed = true;
                        failure = "repost failed";
                        return;
                    }
                }
            }
        }
    };
    const uint64_t total = static_cast<uint64_t>(per_flow) * flows.size();
    const bool done = progress_until({}, [&] {
        step();
        if (failed) {
            return true;
        }
        for (const Flow &f : flows) {
            if (f.completed < per_flow || f.received < per_flow) {
                return false;
            }
        }
        return true;
    }, 600.0);
    ASSERT_FALSE(failed) << failure;
    ASSERT_TRUE(done) << "watchdog: " << delivered << " of " << total << " delivered";
    EXPECT_EQ(total, delivered);
    EXPECT_GE(delivered, kLossMessages);
    uint64_t rtx = 0, dups = 0, bad = 0;
    for (size_t n = 0; n < kNics; ++n) {
        rtx += nics.nic(n)->counter(SRCNIC_CNT_RETRANSMITS);
        dups += nics.nic(n)->counter(SRCNIC_CNT_DUPLICATES);
        bad += nics.nic(n)->counter(SRCNIC_CNT_DROP_BAD_CHECKSUM);
    }
    std::printf("%s: %" PRIu64 " messages, %" PRIu64 " bytes, %" PRIu64 " retransmits, %" PRIu64
                " duplicates, %" PRIu64 " bad checksums\n",
                lc.name, delivered, bytes, rtx, dups, bad);
    if (::testing::Test::HasFailure() || getenv("SRCNIC_TEST_COUNTERS") != nullptr) {
        if (loopback) {
            std::printf("  fabric: dropped_queue_full=%" PRIu64 " dropped_unknown_dst=%" PRIu64 "\n",
                        loopback->fabric()->stats().dropped_queue_full,
                        loopback->fabric()->stats().dropped_unknown_dst);
        }
        for (size_t n = 0; n < kNics; ++n) {
            for (int k = 0; k < SRCNIC_CNT_LAST; ++k) {
                const uint64_t v = nics.nic(n)->counter(static_cast<srcnic_counter_t>(k));
                if (v != 0) {
                    std::printf("  nic%zu %s=%" PRIu64 "\n", n,
                                srcnic_counter_name(static_cast<srcnic_counter_t>(k)), v);
                }
            }
        }
    }
    if (lc.drop > 0) {
        EXPECT_GT(rtx, 0u);
    }
    if (lc.corrupt > 0) {
        EXPECT_GT(bad, 0u);
    }
}

INSTANTIATE_TEST_SUITE_P(
    faults, NicLoss,
    ::testing::Combine(::testing::Values(LinkKind::kLoopback, LinkKind::kUdp),
                       ::testing::Values(LossCase{"loss_0", 0, 0, 0, 0},
                                         LossCase{"loss_1_reorder_dup", 0.01, 0.01, 0.02, 0},
                                         LossCase{"loss_10_corrupt", 0.10, 0.01, 0.05, 0.01},
                                         LossCase{"loss_30", 0.30, 0.02, 0.05, 0.01})),
    [](const ::testing::TestParamInfo<std::tuple<LinkKind, LossCase>> &info) {
        return std::string(std::get<0>(info.param) == LinkKind::kUdp ? "udp_" : "loopback_") +
               std::get<1>(info.param).name;
    });

TEST(NicHeal, drop_everything_until_resent_then_heal)
{
    LoopbackNics nics(2);
    srcnic_qp_config_t qc;
    srcnic_qp_config_init(&qc);
    Qp *qa, *qb;
    ASSERT_EQ(SRCNIC_OK, nics.nic(0)->qp_create(qc, &qa));
    ASSERT_EQ(SRCNIC_OK, nics.nic(1)->qp_create(qc, &qb));
    srcnic_dest_t to_b;
    ASSERT_EQ(SRCNIC_OK, nics.nic(0)->dest_create(nics.nic(1)->addr(), qb->qpn(), &to_b));
    FaultConfig all;
    all.drop = 1.0;
    ASSERT_EQ(SRCNIC_OK, nics.faulty(0)->set_config(all, FaultConfig()));
    std::vector<std::vector<uint8_t>> msgs, rbufs(20, std::vector<uint8_t>(5000));
    for (uint32_t i = 0; i < 20; ++i) {
        msgs.emplace_back(1000 + i * 100, static_cast<uint8_t>(i));
        ASSERT_EQ(SRCNIC_OK, qb->post_recv(make_recv(i, rbufs[i].data(), 5000)));
        ASSERT_EQ(SRCNIC_OK, qa->post_send(make_send(to_b, i, msgs[i].data(), static_cast<uint32_t>(msgs[i].size()))));
    }
    ASSERT_TRUE(progress_until(nics.all(), [&] { return nics.nic(0)->counter(SRCNIC_CNT_RETRANSMITS) >= 10; }));
    EXPECT_EQ(0u, nics.nic(1)->counter(SRCNIC_CNT_RX_PACKETS));
    ASSERT_EQ(SRCNIC_OK, nics.faulty(0)->set_config(FaultConfig(), FaultConfig()));
    for (uint32_t i = 0; i < 20; ++i) {
        srcnic_cqe_t c;
        ASSERT_TRUE(poll_one(nics.all(), qb, &c));
        EXPECT_EQ(i, c.wr_id);
        EXPECT_EQ(msgs[i].size(), c.byte_len);
        EXPECT_EQ(0, std::memcmp(rbufs[i].data(), msgs[i].data(), msgs[i].size()));
    }
    for (uint32_t i = 0; i < 20; ++i) {
        srcnic_cqe_t c;
        ASSERT_TRUE(poll_one(nics.all(), qa, &c));
        EXPECT_EQ(SRCNIC_OK, c.status);
        EXPECT_EQ(i, c.wr_id);
    }
    EXPECT_GE(nics.nic(0)->counter(SRCNIC_CNT_TIMEOUTS), 1u);
}

} // namespace
} // namespace test
} // namespace srcnic

namespace srcnic {
namespace test {
namespace {

// Sixteen Nics, two QPs each, every QP sending to a QP on every other Nic: one connection per
// Nic pair carries both QPs' traffic, and every message arrives once and in order.
TEST(NicMany, sixteen_nics_all_to_all__one_connection_per_pair)
{
    constexpr size_t kNics = 16;
    constexpr uint32_t kPerFlow = 20;
    const uint64_t seed = 0x16;
    std::printf("seed %" PRIu64 "\n", seed);
    srcnic_config_t config = test_config();
    LoopbackNics nics(kNics, config, 8192, seed);
    FaultConfig fc;
    fc.drop = 0.02;
    fc.reorder = 0.02;
    for (size_t i = 0; i < kNics; ++i) {
        ASSERT_EQ(SRCNIC_OK, nics.faulty(i)->set_config(fc, FaultConfig()));
    }
    srcnic_qp_config_t qc;
    srcnic_qp_config_init(&qc);
    std::vector<Qp *> qps;   // nic n: qps[2n], qps[2n+1]
    for (size_t n = 0; n < kNics; ++n) {
        for (int q = 0; q < 2; ++q) {
            Qp *qp;
            ASSERT_EQ(SRCNIC_OK, nics.nic(n)->qp_create(qc, &qp));
            qps.push_back(qp);
        }
    }
    // Receive buffers: enough for everything addressed to each QP.
    const uint32_t per_qp = static_cast<uint32_t>((kNics - 1) * kPerFlow);
    std::vector<std::vector<uint32_t>> rbufs(qps.size(), std::vector<uint32_t>(per_qp * 4));
    for (size_t q = 0; q < qps.size(); ++q) {
        for (uint32_t i = 0; i < std::min<uint32_t>(per_qp, 256); ++i) {
            ASSERT_EQ(SRCNIC_OK, qps[q]->post_recv(make_recv(i, &rbufs[q][i * 4], 16)));
        }
    }
    // Per (dst qp, src qp) the sequence numbers must come 0, 1, 2, ...
    std::vector<std::vector<uint32_t>> next(qps.size(), std::vector<uint32_t>(qps.size(), 0));
    uint64_t received = 0;
    const uint64_t expected = qps.size() * (kNics - 1) * kPerFlow;
    bool bad = false;
    auto drain = [&] {
        for (Nic *n : nics.all()) {
            n->progress();
        }
        for (size_t q = 0; q < qps.size(); ++q) {
            srcnic_cqe_t cqes[16];
            unsigned got = qps[q]->poll_cq(cqes, 16);
            for (unsigned i = 0; i < got; ++i) {
                if (cqes[i].opcode != SRCNIC_OP_RECV) {
                    bad |= cqes[i].status != SRCNIC_OK;
                    continue;
                }
                const uint32_t *m = &rbufs[q][cqes[i].wr_id * 4];
                bad |= cqes[i].status != SRCNIC_OK || m[0] >= qps.size() || m[1] != next[q][m[0]] ||
                       m[2] != m[0] * 7 + m[1] || m[3] != 0xabcdef || (m[0] / 2) == (q / 2);
                if (!bad) {
                    ++next[q][m[0]];
                }
                ++received;
                bad |= qps[q]->post_recv(make_recv(cqes[i].wr_id, &rbufs[q][cqes[i].wr_id * 4], 16)) != SRCNIC_OK;
            }
        }
    };
    // Message: {src qp index, seq, pattern, marker}; its buffer lives until the test ends.
    std::vector<std::vector<uint32_t>> msgs;
    msgs.reserve(expected);
    const uint64_t deadline = now_ns() + 120 * kNsPerSec;
    for (uint32_t seq = 0; seq < kPerFlow; ++seq) {
        for (size_t s = 0; s < qps.size(); ++s) {
            const size_t sn = s / 2;
            for (size_t dn = 0; dn < kNics; ++dn) {
                if (dn == sn) {
                    continue;
                }
                srcnic_dest_t dest;
                ASSERT_EQ(SRCNIC_OK, nics.nic(sn)->dest_create(nics.nic(dn)->addr(), qps[2 * dn + s % 2]->qpn(), &dest));
                msgs.push_back({static_cast<uint32_t>(s), seq, static_cast<uint32_t>(s * 7 + seq), 0xabcdef});
                srcnic_wqe_t w = make_send(dest, s, msgs.back().data(), 16);
                while (qps[s]->post_send(w) == SRCNIC_ERR_NO_RESOURCE) {
                    ASSERT_LT(now_ns(), deadline) << "watchdog while posting";
                    drain();
                }
            }
        }
    }
    ASSERT_TRUE(progress_until({}, [&] {
        drain();
        return bad || received == expected;
    }, 120.0)) << received << " of " << expected << " received";
    ASSERT_FALSE(bad) << "a message was lost, duplicated, reordered or corrupted";
    for (size_t n = 0; n < kNics; ++n) {
        EXPECT_EQ(kNics - 1, nics.nic(n)->num_connections()) << "nic " << n;
    }
    std::printf("%" PRIu64 " messages, %zu bytes of connection state per Nic pair\n", received,
                nics.nic(0)->conn_state_bytes());
}

} // namespace
} // namespace test
} // namespace srcnic
