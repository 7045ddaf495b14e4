// Two Nics over real UDP sockets on 127.0.0.1 and ::1, created through the public C API:
// messages of mixed sizes both ways, RDMA WRITE/READ, and recovery from injected receive loss.
#include "netns_child.h"
#include "nic_harness.h"

#include "core/nic_config.h"

#include <srcnic/srcnic.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>

namespace srcnic {
namespace test {
namespace {

// Two Nics, a QP on each and a destination each way.
struct UdpPair {
    srcnic_nic_t *a = nullptr, *b = nullptr;
    srcnic_qp_t *qa = nullptr, *qb = nullptr;
    srcnic_dest_t to_b{}, to_a{};
    bool ok = false;   // all of it was created

    // Both Nics from config (b's faults seeded with the next seed). No gtest assertions: this
    // also runs in the child of run_in_netns.
    explicit UdpPair(srcnic_config_t config)
    {
        if (srcnic_nic_create(&config, &a) != SRCNIC_OK) {
            return;
        }
        ++config.fault_seed;
        srcnic_qp_config_t qc;
        srcnic_qp_config_init(&qc);
        srcnic_nic_addr_t aa, ba;
        if (srcnic_nic_create(&config, &b) != SRCNIC_OK || srcnic_qp_create(a, &qc, &qa) != SRCNIC_OK ||
            srcnic_qp_create(b, &qc, &qb) != SRCNIC_OK) {
            return;
        }
        srcnic_nic_query_addr(a, &aa);
        srcnic_nic_query_addr(b, &ba);
        ok = srcnic_dest_create(a, &ba, srcnic_qp_num(qb), &to_b) == SRCNIC_OK &&
             srcnic_dest_create(b, &aa, srcnic_qp_num(qa), &to_a) == SRCNIC_OK;
    }
    UdpPair(const char *ip, double drop) : UdpPair(config_for(ip, drop))
    {
        EXPECT_TRUE(ok) << "cannot create two Nics on " << ip;
    }
    ~UdpPair()
    {
        if (qa != nullptr) {
            srcnic_qp_destroy(qa);
        }
        if (qb != nullptr) {
            srcnic_qp_destroy(qb);
        }
        if (a != nullptr) {
            srcnic_nic_destroy(a);
        }
        if (b != nullptr) {
            srcnic_nic_destroy(b);
        }
    }
    static srcnic_config_t config_for(const char *ip, double drop)
    {
        srcnic_config_t config;
        srcnic_config_init(&config);
        std::snprintf(config.bind_addr, sizeof(config.bind_addr), "%s", ip);
        config.rto_us = 2000;
        config.fault_drop = drop;
        config.fault_seed = 7;
        return config;
    }
    bool poll(srcnic_qp_t *qp, srcnic_cqe_t *c)
    {
        const uint64_t deadline = now_ns() + 30 * kNsPerSec;
        while (srcnic_poll_cq(qp, c, 1) == 0) {
            if (now_ns() > deadline) {
                return false;
            }
            srcnic_nic_progress(a);
            srcnic_nic_progress(b);
        }
        return true;
    }
};

class NicUdp : public ::testing::TestWithParam<std::pair<const char *, double>> {};

TEST_P(NicUdp, messages_and_rdma__verified)
{
    UdpPair p(GetParam().first, GetParam().second);
    Random rng(0xabc);
    std::printf("seed 0xabc, %s, drop %.2f\n", GetParam().first, GetParam().second);
    std::vector<uint8_t> rbuf(1 << 20);
    for (int i = 0; i < 200; ++i) {
        const size_t len = i % 50 == 49 ? (1u << 20) : rng.below(20000);
        std::vector<uint8_t> msg(len);
        for (auto &x : msg) {
            x = static_cast<uint8_t>(rng.next());
        }
        const bool from_a = i % 2 == 0;
        srcnic_qp_t *src = from_a ? p.qa : p.qb, *dst = from_a ? p.qb : p.qa;
        const srcnic_recv_wqe_t r = make_recv(i, rbuf.data(), 1 << 20);
        ASSERT_EQ(SRCNIC_OK, srcnic_post_recv(dst, &r));
        srcnic_wqe_t w = make_send(from_a ? p.to_b : p.to_a, i, msg.data(), static_cast<uint32_t>(len));
        ASSERT_EQ(SRCNIC_OK, srcnic_post_send(src, &w));
        srcnic_cqe_t c;
        ASSERT_TRUE(p.poll(dst, &c)) << "message " << i;
        ASSERT_EQ(SRCNIC_OK, c.status);
        ASSERT_EQ(len, c.byte_len);
        ASSERT_TRUE(std::equal(msg.begin(), msg.end(), rbuf.begin())) << "message " << i;
        ASSERT_TRUE(p.poll(src, &c));
        ASSERT_EQ(SRCNIC_OK, c.status);
    }
    std::vector<uint8_t> region(2 << 20), local(2 << 20), back(2 << 20);
    for (size_t i = 0; i < local.size(); ++i) {
        local[i] = static_cast<uint8_t>(i * 7);
    }
    srcnic_mr_t *mr;
    ASSERT_EQ(SRCNIC_OK, srcnic_mr_reg(p.b, region.data(), region.size(),
                                       SRCNIC_ACCESS_REMOTE_READ | SRCNIC_ACCESS_REMOTE_WRITE, &mr));
    srcnic_wqe_t w = make_rdma(SRCNIC_OP_WRITE, p.to_b, 1, local.data(), 2 << 20,
                               reinterpret_cast<uint64_t>(region.data()), srcnic_mr_rkey(mr));
    ASSERT_EQ(SRCNIC_OK, srcnic_post_send(p.qa, &w));
    w = make_rdma(SRCNIC_OP_READ, p.to_b, 2, back.data(), 2 << 20,
                  reinterpret_cast<uint64_t>(region.data()), srcnic_mr_rkey(mr));
    ASSERT_EQ(SRCNIC_OK, srcnic_post_send(p.qa, &w));
    srcnic_cqe_t c;
    ASSERT_TRUE(p.poll(p.qa, &c));
    EXPECT_EQ(1u, c.wr_id);
    EXPECT_EQ(SRCNIC_OK, c.status);
    ASSERT_TRUE(p.poll(p.qa, &c));
    EXPECT_EQ(2u, c.wr_id);
    EXPECT_EQ(SRCNIC_OK, c.status);
    EXPECT_EQ(local, region);
    EXPECT_EQ(local, back);
    srcnic_mr_dereg(mr);
    if (GetParam().second > 0) {
        EXPECT_GT(srcnic_nic_counter(p.a, SRCNIC_CNT_RETRANSMITS) +
                      srcnic_nic_counter(p.b, SRCNIC_CNT_RETRANSMITS), 0u);
    }
}

INSTANTIATE_TEST_SUITE_P(udp, NicUdp,
                         ::testing::Values(std::make_pair("127.0.0.1", 0.0),
                                           std::make_pair("::1", 0.0),
                                           std::make_pair("127.0.0.1", 0.05)),
                         [](const ::testing::TestParamInfo<std::pair<const char *, double>> &info) {
                             return std::string(info.param.first[0] == ':' ? "ipv6" : "ipv4") +
                                    (info.param.second > 0 ? "_loss" : "");
                         });

// Moves a 1 MiB SEND, WRITE and READ between two Nics at 198.51.100.1 (mtu: their configured
// mtu) and checks the data; returns "" or what failed, and the sender's average datagram.
std::string local_transfer(uint32_t mtu, double *avg_datagram)
{
    srcnic_config_t config;
    srcnic_config_init(&config);
    std::snprintf(config.bind_addr, sizeof(config.bind_addr), "198.51.100.1");
    config.mtu = mtu;
    UdpPair p(config);
    if (!p.ok) {
        return "cannot create the Nics at 198.51.100.1";
    }
    srcnic_nic_t *a = p.a, *b = p.b;
    srcnic_qp_t *qa = p.qa, *qb = p.qb;
    const srcnic_dest_t to_b = p.to_b;
    const uint32_t len = 1 << 20;
    std::vector<uint8_t> msg(len), rbuf(len), region(len), back(len);
    for (uint32_t i = 0; i < len; ++i) {
        msg[i] = static_cast<uint8_t>(i * 31 + 7);
    }
    srcnic_mr_t *mr = nullptr;
    if (srcnic_mr_reg(b, region.data(), len, SRCNIC_ACCESS_REMOTE_READ | SRCNIC_ACCESS_REMOTE_WRITE,
                      &mr) != SRCNIC_OK) {
        return "cannot register the region";
    }
    const srcnic_recv_wqe_t r = make_recv(1, rbuf.data(), len);
    srcnic_wqe_t w[3] = {make_send(to_b, 1, msg.data(), len),
                         make_rdma(SRCNIC_OP_WRITE, to_b, 2, msg.data(), len,
                                   reinterpret_cast<uint64_t>(region.data()), srcnic_mr_rkey(mr)),
                         make_rdma(SRCNIC_OP_READ, to_b, 3, back.data(), len,
                                   reinterpret_cast<uint64_t>(region.data()), srcnic_mr_rkey(mr))};
    std::string failed;
    if (srcnic_post_recv(qb, &r) != SRCNIC_OK) {
        failed = "cannot post the receive";
    }
    for (const srcnic_wqe_t &wqe : w) {
        if (failed.empty() && srcnic_post_send(qa, &wqe) != SRCNIC_OK) {
            failed = "cannot post a request";
        }
    }
    unsigned done_a = 0, done_b = 0;
    const uint64_t deadline = now_ns() + 30 * kNsPerSec;
    while (failed.empty() && (done_a < 3 || done_b < 1)) {
        if (now_ns() > deadline) {
            failed = "timed out";
            break;
        }
        srcnic_nic_progress(a);
        srcnic_nic_progress(b);
        srcnic_cqe_t c;
        for (srcnic_qp_t *qp : {qa, qb}) {
            while (srcnic_poll_cq(qp, &c, 1) == 1) {
                if (c.status != SRCNIC_OK) {
                    failed = "a completion with status " + std::to_string(c.status);
                }
                ++(qp == qa ? done_a : done_b);
            }
        }
    }
    if (failed.empty() && (rbuf != msg || region != msg || back != msg)) {
        failed = "the data arrived changed";
    }
    *avg_datagram = static_cast<double>(srcnic_nic_counter(a, SRCNIC_CNT_TX_BYTES) +
                                        srcnic_nic_counter(b, SRCNIC_CNT_TX_BYTES)) /
                    static_cast<double>(srcnic_nic_counter(a, SRCNIC_CNT_TX_PACKETS) +
                                        srcnic_nic_counter(b, SRCNIC_CNT_TX_PACKETS));
    srcnic_mr_dereg(mr);
    return failed;
}

// Two Nics at the same address of a 1500-byte interface (two ranks of a node) reach each other
// over loopback: with the automatic mtu their packets are loopback-sized, not cut to the
// interface's MTU; a configured mtu holds for them too.
TEST(NicUdpLocal, peers_at_the_same_interface_address__loopback_sized_packets)
{
    if (!netns_available()) {
        GTEST_SKIP() << "needs root for a network namespace";
    }
    const std::string failed = run_in_netns(kNetnsVeth1500, [] {
        std::ostringstream err;
        double automatic = 0, fixed = 0;
        std::string f = local_transfer(0, &automatic);
        if (!f.empty()) {
            return "automatic mtu: " + f;
        }
        f = local_transfer(1400, &fixed);
        if (!f.empty()) {
            return "mtu 1400: " + f;
        }
        if (automatic < 20000 || fixed > 1400) {
            err << "average datagram " << automatic << " bytes with the automatic mtu (want "
                << "loopback-sized, over 20000), " << fixed << " with mtu 1400";
        }
        return err.str();
    });
    EXPECT_EQ("", failed);
}

// Small datagrams on loopback (mtu 1472: receive aggregation on) and socket buffers too small
// for a burst: the kernel drops datagrams, later ones arrive ahead of a hole and wait in the
// reorder buffer. The link lends aggregated datagrams from its staging memory, which it reuses
// on the next call; a packet kept for reordering must be kept intact all the same.
// Posts `rounds` WRITEs of len random bytes (from rng) from a to a region of b, one at a time,
// calling progress() until each completes (30 s watchdog), and checks each landed intact.
// Returns "" or what went wrong.
std::string write_rounds(UdpPair &p, uint32_t len, uint32_t rounds, Random &rng,
                         const std::function<void()> &progress)
{
    std::vector<uint8_t> region(len), local(len);
    srcnic_mr_t *mr;
    if (srcnic_mr_reg(p.b, region.data(), len, SRCNIC_ACCESS_REMOTE_WRITE, &mr) != SRCNIC_OK) {
        return "srcnic_mr_reg failed";
    }
    std::string err;
    for (uint32_t r = 0; r < rounds && err.empty(); ++r) {
        for (auto &x : local) {
            x = static_cast<uint8_t>(rng.next());
        }
        srcnic_wqe_t w = make_rdma(SRCNIC_OP_WRITE, p.to_b, r, local.data(), len,
                                   reinterpret_cast<uint64_t>(region.data()), srcnic_mr_rkey(mr));
        if (srcnic_post_send(p.qa, &w) != SRCNIC_OK) {
            err = "post_send failed in round " + std::to_string(r);
            break;
        }
        srcnic_cqe_t c;
        const uint64_t deadline = now_ns() + 30 * kNsPerSec;
        while (srcnic_poll_cq(p.qa, &c, 1) == 0 && err.empty()) {
            if (now_ns() > deadline) {
                err = "round " + std::to_string(r) + " never completed";
            }
            progress();
        }
        if (err.empty() && c.status != SRCNIC_OK) {
            err = "round " + std::to_string(r) + " completed with " + std::to_string(c.status);
        } else if (err.empty() && local != region) {
            err = "round " + std::to_string(r) + ": the region differs from what was written";
        }
    }
    srcnic_mr_dereg(mr);
    return err;
}

TEST(NicUdpGro, packets_kept_for_reordering__arrive_intact)
{
    srcnic_config_t config;
    srcnic_config_init(&config);
    config.mtu = 1472;
    config.sock_buf = 64 * 1024;
    config.window = 128;      // a flight the socket buffer holds a good part of
    config.rto_us = 200000;   // holes are repaired by fast retransmission, never a timeout
    UdpPair p(config);
    ASSERT_TRUE(p.ok);
    srcnic_nic_t *a = p.a, *b = p.b;
    Random rng(0x5eed);
    std::printf("seed 0x5eed\n");
    // The receiver polls every 4th time: the sender's burst overruns its socket.
    EXPECT_EQ("", write_rounds(p, 256 * 1024, 40, rng, [&] {
        srcnic_nic_progress(a);
        if (rng.below(4) == 0) {
            srcnic_nic_progress(b);
        }
    }));
    std::printf("out of order %" PRIu64 ", duplicates %" PRIu64 ", retransmits %" PRIu64
                ", timeouts %" PRIu64 ", no buffer %" PRIu64 "\n",
                srcnic_nic_counter(b, SRCNIC_CNT_OUT_OF_ORDER),
                srcnic_nic_counter(b, SRCNIC_CNT_DUPLICATES),
                srcnic_nic_counter(a, SRCNIC_CNT_RETRANSMITS),
                srcnic_nic_counter(a, SRCNIC_CNT_TIMEOUTS),
                srcnic_nic_counter(b, SRCNIC_CNT_DROP_NO_BUFFER));
    // Packets kept for reordering were delivered from the buffer: none came again (a kept
    // packet the engine could not use would be received again, as a duplicate, after the
    // sender retransmitted it on a timeout).
    EXPECT_GT(srcnic_nic_counter(b, SRCNIC_CNT_OUT_OF_ORDER), 0u);
    EXPECT_LT(srcnic_nic_counter(b, SRCNIC_CNT_DUPLICATES),
              srcnic_nic_counter(b, SRCNIC_CNT_OUT_OF_ORDER) / 4);
}

// Packets a sender keeps in flight to a receiver that does not answer: the configured window,
// or the automatic one, which follows the datagram size (768 KiB of payload, 128 packets at
// least, 1024 at most) but holds messages shorter than a packet to 128, and full packets to what
// the receive socket holds (sock_buf: 0 = the default). One large WRITE, or (small) 200 WRITEs
// of 8 bytes.
uint64_t flight(uint32_t mtu, uint32_t window, bool small = false, uint32_t sock_buf = 0)
{
    srcnic_config_t config;
    srcnic_config_init(&config);
    config.mtu = mtu;
    config.window = window;
    if (sock_buf != 0) {
        config.sock_buf = sock_buf;
    }
    config.rto_us = 2000000;    // no timeout during the test
    config.rto_max_us = 2000000;
    UdpPair p(config);
    EXPECT_TRUE(p.ok);
    if (!p.ok) {
        return 0;
    }
    const uint32_t len = 24 << 20;   // more than 300 of the largest packets
    std::vector<uint8_t> local(len), region(len);
    srcnic_mr_t *mr = nullptr;
    EXPECT_EQ(SRCNIC_OK, srcnic_mr_reg(p.b, region.data(), region.size(),
                                       SRCNIC_ACCESS_REMOTE_WRITE, &mr));
    for (uint32_t i = 0; i < (small ? 200u : 1u); ++i) {
        srcnic_wqe_t w = make_rdma(SRCNIC_OP_WRITE, p.to_b, i, local.data() + 8 * i,
                                   small ? 8 : len,
                                   reinterpret_cast<uint64_t>(region.data()) + 8 * i,
                                   srcnic_mr_rkey(mr));
        EXPECT_EQ(SRCNIC_OK, srcnic_post_send(p.qa, &w));
    }
    for (int i = 0; i < 100; ++i) {
        srcnic_nic_progress(p.a);   // b never runs: no ack comes back
    }
    const uint64_t sent = srcnic_nic_counter(p.a, SRCNIC_CNT_TX_PACKETS) -
                          srcnic_nic_counter(p.a, SRCNIC_CNT_RETRANSMITS);
    srcnic_mr_dereg(mr);
    if (!small) {
        // What the API says this configuration allows on the path (65000-byte datagrams on
        // loopback unless the mtu is configured), unless the receive socket holds fewer.
        const uint32_t dgram = mtu != 0 ? mtu : 65000;
        uint64_t expected = srcnic_config_window(&config, dgram);
        if (window == 0) {
            const uint32_t fits = to_nic(p.a)->link().rx_queue_capacity(dgram);
            expected = std::min<uint64_t>(expected, std::max(kMinFullWindow, fits));
        }
        EXPECT_EQ(expected, sent);
    }
    return sent;
}

TEST(NicUdpConfig, window__automatic_by_datagram_size_or_as_configured)
{
    // 768 KiB / (1472 - 104) bytes of payload = 574.9: 575 packets.
    EXPECT_EQ(575u, flight(1472, 0));
    EXPECT_EQ(128u, flight(0, 0));      // 65000-byte datagrams: the minimum
    EXPECT_EQ(1024u, flight(600, 0));   // 496 bytes a packet: the maximum
    EXPECT_EQ(128u, flight(1472, 128));
    EXPECT_EQ(300u, flight(0, 300));
    // Small messages: 128 in flight whatever the window, as before it grew (a stream of them
    // then waits for acks in batches, instead of drawing an ack for every packet).
    EXPECT_EQ(128u, flight(1472, 0, true));
    EXPECT_EQ(200u, flight(1472, 256, true));   // a configured window counts them all
}

TEST(NicUdpConfig, window__full_packets_in_flight_fit_the_receive_socket)
{
    // The socket buffers an unprivileged process gets where net.core.rmem_max is Linux's
    // default: 151 datagrams of 1472 bytes, 5 of 65000 (on Linux, which doubles the request).
    const uint32_t small = 212992;
    EXPECT_LT(flight(1472, 0, false, small), 575u);
    EXPECT_LT(flight(0, 0, false, small), 128u);
    // Messages shorter than a packet still fly 128 at a time; a configured window is kept.
    EXPECT_EQ(128u, flight(0, 0, true, small));
    EXPECT_EQ(572u, flight(1472, 572, false, small));
}

// A stream on a 1500-byte path with those buffers: nothing overflows the receiver's socket.
TEST(NicUdpConfig, window__a_stream_into_a_small_socket_buffer_loses_nothing)
{
    srcnic_config_t config;
    srcnic_config_init(&config);
    config.mtu = 1472;
    config.sock_buf = 212992;
    UdpPair p(config);
    ASSERT_TRUE(p.ok);
    Random rng(0x5eed);
    std::printf("seed 0x5eed\n");
    EXPECT_EQ("", write_rounds(p, 4 << 20, 4, rng, [&] {
        srcnic_nic_progress(p.a);
        srcnic_nic_progress(p.b);
    }));
    std::printf("retransmits %" PRIu64 ", timeouts %" PRIu64 "\n",
                srcnic_nic_counter(p.a, SRCNIC_CNT_RETRANSMITS),
                srcnic_nic_counter(p.a, SRCNIC_CNT_TIMEOUTS));
    EXPECT_EQ(0u, to_nic(p.b)->link().stats().rx_dropped) << "datagrams the receive socket dropped";
}

TEST(NicUdpConfig, bad_values__refused_with_clear_error)
{
    srcnic_config_t config;
    srcnic_config_init(&config);
    srcnic_nic_t *nic;
    config.window = 1;
    EXPECT_EQ(SRCNIC_ERR_INVALID_PARAM, srcnic_nic_create(&config, &nic));
    srcnic_config_init(&config);
    std::snprintf(config.bind_addr, sizeof(config.bind_addr), "not-an-ip");
    EXPECT_EQ(SRCNIC_ERR_INVALID_PARAM, srcnic_nic_create(&config, &nic));
    srcnic_config_init(&config);
    config.fault_drop = 1.5;
    EXPECT_EQ(SRCNIC_ERR_INVALID_PARAM, srcnic_nic_create(&config, &nic));
    srcnic_config_init(&config);
    config.mtu = 100;
    EXPECT_EQ(SRCNIC_ERR_INVALID_PARAM, srcnic_nic_create(&config, &nic));
}

} // namespace
} // namespace test
} // namespace srcnic
