// Unit tests for src/link/udp_link.cc and udp_link_data.cc, over 127.0.0.1 and ::1 only.
//
// The send and receive error paths are made deterministic by an armed mock: this file defines
// sendmmsg, recvmmsg, sendmsg, recvmsg, sendto, send, recvfrom and recv (the link uses the
// single-message calls for single messages), which take precedence over libc's in this test
// program. Unarmed (or
// for any other socket) they forward to the real functions; armed for one socket, they let a
// given number of datagrams through and then fail a given number of calls with a given errno.
#include "link/udp_link.h"

#include "core/clock.h"
#include "core/log.h"
#include "core/random.h"
#include "netns_child.h"

#include <gtest/gtest.h>

#include <dlfcn.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace {

// One armed failure: after `pass` datagrams on socket `fd`, fail `fails` calls with `err`.
struct MockPlan {
    int fd = -1;          // the socket the plan applies to; -1 = unarmed
    uint32_t pass = 0;    // datagrams still let through before failing, datagrams
    uint32_t fails = 0;   // calls still to fail
    int err = 0;          // errno of a failed call
    uint32_t failed = 0;  // calls failed so far
};

MockPlan g_send_plan;
MockPlan g_recv_plan;

// Send and receive system calls (of any kind) on the sockets of g_counted (set by a test;
// MockGuard clears it).
std::vector<int> g_counted;
uint64_t g_send_calls = 0;
uint64_t g_recv_calls = 0;

// Applies a plan to a call of vlen datagrams: true = fail it now; otherwise *vlen_p may be
// cut so that no more than `pass` datagrams get through before the failure.
bool mock_should_fail(MockPlan *plan, int fd, unsigned int *vlen_p)
{
    if (std::find(g_counted.begin(), g_counted.end(), fd) != g_counted.end()) {
        ++(plan == &g_send_plan ? g_send_calls : g_recv_calls);
    }
    if (plan->fd != fd || plan->fails == 0) {
        return false;
    }
    if (plan->pass == 0) {
        --plan->fails;
        ++plan->failed;
        errno = plan->err;
        return true;
    }
    *vlen_p = std::min(*vlen_p, plan->pass);
    return false;
}

void mock_passed(MockPlan *plan, int fd, int result)
{
    if (plan->fd == fd && plan->fails > 0 && result > 0) {
        plan->pass -= std::min(plan->pass, static_cast<uint32_t>(result));
    }
}

} // namespace

extern "C" int sendmmsg(int fd, struct mmsghdr *msgs, unsigned int vlen, int flags)
{
    using Fn = int (*)(int, struct mmsghdr *, unsigned int, int);
    static const Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "sendmmsg"));
    if (mock_should_fail(&g_send_plan, fd, &vlen)) {
        return -1;
    }
    const int result = real(fd, msgs, vlen, flags);
    mock_passed(&g_send_plan, fd, result);
    return result;
}

extern "C" int recvmmsg(int fd, struct mmsghdr *msgs, unsigned int vlen, int flags,
                        struct timespec *timeout)
{
    using Fn = int (*)(int, struct mmsghdr *, unsigned int, int, struct timespec *);
    static const Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "recvmmsg"));
    if (mock_should_fail(&g_recv_plan, fd, &vlen)) {
        return -1;
    }
    const int result = real(fd, msgs, vlen, flags, timeout);
    mock_passed(&g_recv_plan, fd, result);
    return result;
}

// The single-datagram calls: the plan applies as to a batch of one, otherwise the real call.
template <typename Fn, typename... Args>
ssize_t mock_one(MockPlan *plan, Fn real, int fd, Args... args)
{
    unsigned int vlen = 1;
    if (mock_should_fail(plan, fd, &vlen)) {
        return -1;
    }
    const ssize_t result = real(fd, args...);
    mock_passed(plan, fd, result >= 0 ? 1 : -1);
    return result;
}

// The real function of that name (looked up once per mock).
#define SRC_REAL(_fn, _type) \
    static const _type real = reinterpret_cast<_type>(dlsym(RTLD_NEXT, _fn))

extern "C" ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
    using Fn = ssize_t (*)(int, const struct msghdr *, int);
    SRC_REAL("sendmsg", Fn);
    return mock_one(&g_send_plan, real, fd, msg, flags);
}

extern "C" ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
    using Fn = ssize_t (*)(int, struct msghdr *, int);
    SRC_REAL("recvmsg", Fn);
    return mock_one(&g_recv_plan, real, fd, msg, flags);
}

extern "C" ssize_t sendto(int fd, const void *buf, size_t len, int flags,
                          const struct sockaddr *to, socklen_t to_len)
{
    using Fn = ssize_t (*)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
    SRC_REAL("sendto", Fn);
    return mock_one(&g_send_plan, real, fd, buf, len, flags, to, to_len);
}

extern "C" ssize_t send(int fd, const void *buf, size_t len, int flags)
{
    using Fn = ssize_t (*)(int, const void *, size_t, int);
    SRC_REAL("send", Fn);
    return mock_one(&g_send_plan, real, fd, buf, len, flags);
}

extern "C" ssize_t recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *from,
                            socklen_t *from_len)
{
    using Fn = ssize_t (*)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
    SRC_REAL("recvfrom", Fn);
    return mock_one(&g_recv_plan, real, fd, buf, len, flags, from, from_len);
}

extern "C" ssize_t recv(int fd, void *buf, size_t len, int flags)
{
    using Fn = ssize_t (*)(int, void *, size_t, int);
    SRC_REAL("recv", Fn);
    return mock_one(&g_recv_plan, real, fd, buf, len, flags);
}

// Run just before the next connect() (then cleared): a test's way into the window between a
// peer socket's bind and its connect.
std::function<void()> g_before_connect;

extern "C" int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
    using Fn = int (*)(int, const struct sockaddr *, socklen_t);
    SRC_REAL("connect", Fn);
    if (g_before_connect) {
        const std::function<void()> hook = std::move(g_before_connect);
        g_before_connect = nullptr;
        hook();
    }
    return real(fd, addr, len);
}

namespace srcnic {
namespace {

// Longest any test waits for datagrams, ns.
constexpr uint64_t kWatchdogNs = 5 * kNsPerSec;
// Longest single poll() in a receive loop, ms.
constexpr int kPollSliceMs = 50;

// Disarms the mocks when a test ends, whatever its outcome.
struct MockGuard {
    ~MockGuard()
    {
        g_send_plan = MockPlan();
        g_recv_plan = MockPlan();
        g_counted.clear();
    }
};

// Counts the system calls on link's sockets (under a MockGuard).
void count_calls(Link &link);

UdpLinkConfig config_for(const char *ip, uint32_t mtu = 0)
{
    UdpLinkConfig cfg;
    EXPECT_EQ(SRCNIC_OK, LinkAddr::from_ip(ip, 0, &cfg.bind_addr));
    cfg.mtu = mtu;
    return cfg;
}

std::unique_ptr<Link> open_link(const UdpLinkConfig &cfg)
{
    std::unique_ptr<Link> link;
    EXPECT_EQ(SRCNIC_OK, UdpLink::open(cfg, &link)) << cfg.bind_addr.to_string();
    return link;
}

UdpLink &as_udp(Link &link)
{
    return static_cast<UdpLink &>(link);
}

// The bound socket of a UDP link (what the mocks are armed for).
int sock_of(Link &link)
{
    return static_cast<UdpLink &>(link).socket_fd();
}

// Whether an IPv6 socket can be bound to ::1 here.
bool ipv6_loopback_available()
{
    std::unique_ptr<Link> link;
    UdpLinkConfig cfg;
    LinkAddr::from_ip("::1", 0, &cfg.bind_addr);
    cfg.sock_buf_size = 0;
    return UdpLink::open(cfg, &link) == SRCNIC_OK;
}

struct Received {
    std::vector<uint8_t> data; // the datagram
    LinkAddr src;              // its sender
};

// Waits on the event fd, at most kPollSliceMs at a time, for it to become readable; false if
// the watchdog deadline passes first.
bool wait_readable(int fd, uint64_t deadline_ns)
{
    while (now_ns() < deadline_ns) {
        struct pollfd pfd = {fd, POLLIN, 0};
        if (poll(&pfd, 1, kPollSliceMs) > 0 && (pfd.revents & POLLIN) != 0) {
            return true;
        }
    }
    return false;
}

bool readable_now(int fd)
{
    struct pollfd pfd = {fd, POLLIN, 0};
    return poll(&pfd, 1, 0) > 0 && (pfd.revents & POLLIN) != 0;
}

// Receives until `want` datagrams arrived or the watchdog expires, through slots of
// `capacity` bytes, `per_call` at a time.
std::vector<Received> receive(Link &link, size_t want, uint32_t capacity, uint32_t per_call = 16)
{
    std::vector<Received> out;
    std::vector<std::vector<uint8_t>> bufs(per_call, std::vector<uint8_t>(capacity));
    std::vector<RxDatagram> slots(per_call);
    const uint64_t deadline = now_ns() + kWatchdogNs;
    link.rx_notify(true);   // this helper sleeps on the event fd
    while (out.size() < want && (link.rx_pending() || wait_readable(link.event_fd(), deadline))) {
        for (uint32_t i = 0; i < per_call; ++i) {
            slots[i] = RxDatagram{bufs[i].data(), capacity, 0, LinkAddr()};
        }
        const uint32_t got = link.rx_burst(slots.data(), per_call);
        for (uint32_t i = 0; i < got; ++i) {
            out.push_back({std::vector<uint8_t>(slots[i].buf, slots[i].buf + slots[i].len),
                           slots[i].src});
        }
    }
    return out;
}

// Payloads of the given lengths, each starting with its index, the rest seeded random bytes.
std::vector<std::vector<uint8_t>> make_payloads(const std::vector<uint32_t> &lens, uint64_t seed)
{
    Random rng(seed);
    std::vector<std::vector<uint8_t>> out;
    for (size_t i = 0; i < lens.size(); ++i) {
        std::vector<uint8_t> p(lens[i]);
        for (auto &b : p) {
            b = static_cast<uint8_t>(rng.next());
        }
        if (p.size() >= 4) {
            const uint32_t index = static_cast<uint32_t>(i);
            std::memcpy(p.data(), &index, sizeof(index));
        }
        out.push_back(std::move(p));
    }
    return out;
}

// Receives payloads[first, first + count) at `link`, in order and nothing else (watchdog-bounded).
void expect_datagrams(Link &link, const std::vector<std::vector<uint8_t>> &payloads, size_t first,
                      size_t count)
{
    const auto got = receive(link, count, link.mtu());
    ASSERT_EQ(count, got.size());
    for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(payloads[first + i], got[i].data) << "datagram " << first + i;
    }
}

// Sends every payload to dst in one tx_burst (one iovec each); returns what tx_burst returned.
uint32_t send_all(Link &link, const std::vector<std::vector<uint8_t>> &payloads,
                  const LinkAddr &dst, size_t first = 0)
{
    std::vector<struct iovec> iov(payloads.size());
    std::vector<TxDatagram> dgrams(payloads.size());
    for (size_t i = 0; i < payloads.size(); ++i) {
        iov[i] = {const_cast<uint8_t *>(payloads[i].data()), payloads[i].size()};
        dgrams[i] = TxDatagram{&iov[i], 1, dst};
    }
    return link.tx_burst(dgrams.data() + first, static_cast<uint32_t>(payloads.size() - first));
}

void round_trip(const char *ip, uint64_t seed)
{
    std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
    UdpLinkConfig cfg = config_for(ip);
    cfg.batch_size = 8;
    std::unique_ptr<Link> a = open_link(cfg);
    std::unique_ptr<Link> b = open_link(cfg);
    ASSERT_TRUE(a && b);

    Random rng(seed);
    std::vector<uint32_t> lens;
    for (int i = 0; i < 100; ++i) {
        lens.push_back(4 + static_cast<uint32_t>(rng.below(3000)));
    }
    lens[50] = a->mtu();
    const auto payloads = make_payloads(lens, seed);
    ASSERT_EQ(100u, send_all(*a, payloads, b->local_addr()));

    const auto got = receive(*b, payloads.size(), b->mtu(), 7);
    ASSERT_EQ(payloads.size(), got.size());
    uint64_t bytes = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(payloads[i], got[i].data) << "datagram " << i;
        EXPECT_TRUE(got[i].src == a->local_addr()) << got[i].src.to_string();
        bytes += payloads[i].size();
    }
    EXPECT_EQ(100u, a->stats().tx_datagrams);
    EXPECT_EQ(bytes, a->stats().tx_bytes);
    EXPECT_EQ(0u, a->stats().tx_errors);
    EXPECT_EQ(100u, b->stats().rx_datagrams);
    EXPECT_EQ(bytes, b->stats().rx_bytes);
    EXPECT_EQ(0u, b->stats().rx_oversize);
    EXPECT_EQ(0u, b->stats().rx_dropped);
}

TEST(UdpLink, open__ipv4_loopback_ephemeral_port_and_automatic_mtu)
{
    std::unique_ptr<Link> link = open_link(config_for("127.0.0.1"));
    ASSERT_TRUE(link);
    EXPECT_EQ(AF_INET, link->local_addr().family);
    EXPECT_NE(0, link->local_addr().port);
    LinkAddr expect;
    ASSERT_EQ(SRCNIC_OK, LinkAddr::from_ip("127.0.0.1", link->local_addr().port, &expect));
    EXPECT_TRUE(expect == link->local_addr());
    EXPECT_EQ(kUdpLoopbackMtu, link->mtu());
    EXPECT_GE(link->event_fd(), 0);
    EXPECT_EQ(kUdpDefaultBatchSize, static_cast<UdpLink &>(*link).batch_size());
}

TEST(UdpLink, open__ipv6_loopback)
{
    if (!ipv6_loopback_available()) {
        GTEST_SKIP() << "no IPv6 loopback here";
    }
    std::unique_ptr<Link> link = open_link(config_for("::1"));
    ASSERT_TRUE(link);
    EXPECT_EQ(AF_INET6, link->local_addr().family);
    EXPECT_NE(0, link->local_addr().port);
    EXPECT_EQ(kUdpLoopbackMtu, link->mtu());
}

TEST(UdpLink, open__wildcard_mtu_fits_every_interface)
{
    std::unique_ptr<Link> link = open_link(config_for("0.0.0.0"));
    ASSERT_TRUE(link);
    std::printf("wildcard automatic mtu: %u\n", link->mtu());
    EXPECT_GT(link->mtu(), 0u);
    EXPECT_LE(link->mtu(), kUdpLoopbackMtu);
}

TEST(UdpLink, open__configured_mtu_up_to_the_limit)
{
    std::unique_ptr<Link> link = open_link(config_for("127.0.0.1", 1200));
    ASSERT_TRUE(link);
    EXPECT_EQ(1200u, link->mtu());
    link = open_link(config_for("127.0.0.1", kUdpMaxMtuIpv4));
    ASSERT_TRUE(link);
    EXPECT_EQ(kUdpMaxMtuIpv4, link->mtu());

    std::unique_ptr<Link> none;
    EXPECT_EQ(SRCNIC_ERR_INVALID_PARAM,
              UdpLink::open(config_for("127.0.0.1", kUdpMaxMtuIpv4 + 1), &none));
    EXPECT_FALSE(none);

    if (ipv6_loopback_available()) {
        link = open_link(config_for("::1", kUdpMaxMtuIpv6));
        ASSERT_TRUE(link);
        EXPECT_EQ(kUdpMaxMtuIpv6, link->mtu());
        EXPECT_EQ(SRCNIC_ERR_INVALID_PARAM,
                  UdpLink::open(config_for("::1", kUdpMaxMtuIpv6 + 1), &none));
        EXPECT_FALSE(none);
    }
}

// In a namespace of the test's own with a 1500-byte veth interface: other processes at the
// link's own address are reached over loopback, so they get loopback-sized datagrams; every
// other peer gets the interface's size. A configured mtu applies to every peer.
TEST(UdpLink, path_mtu__peers_at_the_bound_address_get_the_loopback_size)
{
    if (!test::netns_available()) {
        GTEST_SKIP() << "needs root for a network namespace";
    }
    const std::string failed = srcnic::test::run_in_netns(srcnic::test::kNetnsVeth1500, [] {
        std::ostringstream err;
        UdpLinkConfig cfg;
        LinkAddr local_peer, remote_peer;
        if (LinkAddr::from_ip("198.51.100.1", 0, &cfg.bind_addr) != SRCNIC_OK ||
            LinkAddr::from_ip("198.51.100.1", 9, &local_peer) != SRCNIC_OK ||
            LinkAddr::from_ip("198.51.100.2", 9, &remote_peer) != SRCNIC_OK) {
            return std::string("cannot parse the test addresses");
        }
        std::unique_ptr<Link> a, b, fixed;
        if (UdpLink::open(cfg, &a) != SRCNIC_OK || UdpLink::open(cfg, &b) != SRCNIC_OK) {
            return std::string("cannot open links on 198.51.100.1");
        }
        const uint32_t iface = 1500 - 28;
        if (a->mtu() != iface || a->path_mtu(remote_peer) != iface ||
            a->path_mtu(local_peer) != kUdpLoopbackMtu || a->max_datagram() != kUdpLoopbackMtu) {
            err << "automatic: mtu " << a->mtu() << ", to a remote peer " << a->path_mtu(remote_peer)
                << ", to a local one " << a->path_mtu(local_peer) << ", max_datagram "
                << a->max_datagram() << "; want " << iface << ", " << iface << ", "
                << kUdpLoopbackMtu << ", " << kUdpLoopbackMtu;
            return err.str();
        }
        // A datagram of the local size reaches the other link whole ...
        std::vector<uint8_t> big(kUdpLoopbackMtu), got(kUdpLoopbackMtu);
        for (size_t i = 0; i < big.size(); ++i) {
            big[i] = static_cast<uint8_t>(i * 13 + 5);
        }
        struct iovec iov = {big.data(), big.size()};
        TxDatagram d{&iov, 1, b->local_addr()};
        if (a->tx_burst(&d, 1) != 1 || a->stats().tx_errors != 0) {
            return std::string("a loopback-sized datagram to a local peer was not sent");
        }
        RxDatagram slot{got.data(), static_cast<uint32_t>(got.size()), 0, LinkAddr()};
        const uint64_t deadline = now_ns() + 10 * kNsPerSec;
        while (b->rx_burst(&slot, 1) == 0 && now_ns() < deadline) {
        }
        if (slot.len != big.size() || got != big || !(slot.src == a->local_addr())) {
            err << "the local peer received " << slot.len << " bytes from "
                << slot.src.to_string() << ", want " << big.size() << " intact";
            return err.str();
        }
        // ... and is invalid for a peer across the interface: counted, never sent.
        d.dst = remote_peer;
        if (a->tx_burst(&d, 1) != 1 || a->stats().tx_errors != 1 ||
            a->stats().tx_datagrams != 1) {
            err << "an oversize datagram to a remote peer: tx_errors " << a->stats().tx_errors
                << ", tx_datagrams " << a->stats().tx_datagrams << "; want 1 and 1";
            return err.str();
        }
        // Busy local peers get peer sockets, which receive aggregates like the bound socket.
        std::vector<uint8_t> small(100, 1);
        struct iovec small_iov = {small.data(), small.size()};
        for (int i = 0; i < 2 * static_cast<int>(kUdpPeerSocketAfter); ++i) {
            Link &from = i % 2 == 0 ? *a : *b, &to = i % 2 == 0 ? *b : *a;
            TxDatagram s{&small_iov, 1, to.local_addr()};
            RxDatagram in{got.data(), static_cast<uint32_t>(got.size()), 0, LinkAddr()};
            from.tx_burst(&s, 1);
            const uint64_t until = now_ns() + 10 * kNsPerSec;
            while (to.rx_burst(&in, 1) == 0 && now_ns() < until) {
            }
        }
        UdpLink &ua = static_cast<UdpLink &>(*a), &ub = static_cast<UdpLink &>(*b);
        auto gro_on = [](int fd) {
            int on = -1;
            socklen_t len = sizeof(on);
            return ::getsockopt(fd, SOL_UDP, UDP_GRO, &on, &len) == 0 ? on : -1;
        };
        if (!ua.gro() || ua.peer_sockets() != 1 || ub.peer_sockets() != 1 ||
            gro_on(ua.socket_fd()) != 1 || gro_on(ua.peer_socket_fd(0)) != 1 ||
            gro_on(ub.peer_socket_fd(0)) != 1) {
            err << "peer sockets " << ua.peer_sockets() << " and " << ub.peer_sockets()
                << " (want 1 each); UDP_GRO on the bound socket " << gro_on(ua.socket_fd())
                << " (want 1), on the local peers' sockets " << gro_on(ua.peer_socket_fd(0))
                << " and " << gro_on(ub.peer_socket_fd(0)) << " (want 1)";
            return err.str();
        }
        d.dst = b->local_addr();
        slot = RxDatagram{got.data(), static_cast<uint32_t>(got.size()), 0, LinkAddr()};
        const uint64_t peer_before = ub.rx_peer_datagrams();
        const uint64_t until = now_ns() + 10 * kNsPerSec;
        a->tx_burst(&d, 1);
        while (b->rx_burst(&slot, 1) == 0 && now_ns() < until) {
        }
        if (slot.len != big.size() || got != big || ub.rx_peer_datagrams() != peer_before + 1) {
            err << "on the peer socket: " << slot.len << " bytes, "
                << ub.rx_peer_datagrams() - peer_before << " datagrams; want " << big.size()
                << " intact, 1";
            return err.str();
        }
        cfg.mtu = 1400;
        if (UdpLink::open(cfg, &fixed) != SRCNIC_OK || fixed->mtu() != 1400 ||
            fixed->path_mtu(local_peer) != 1400 || fixed->max_datagram() != 1400) {
            return std::string("a configured mtu of 1400 must apply to every peer");
        }
        return std::string();
    });
    EXPECT_EQ("", failed);
}

TEST(UdpLink, open__invalid_config)
{
    std::unique_ptr<Link> link;
    UdpLinkConfig cfg;
    EXPECT_EQ(SRCNIC_ERR_INVALID_PARAM, UdpLink::open(cfg, &link)) << "unset address";
    cfg = config_for("127.0.0.1");
    cfg.batch_size = 0;
    EXPECT_EQ(SRCNIC_ERR_INVALID_PARAM, UdpLink::open(cfg, &link));
    cfg.batch_size = kUdpMaxBatchSize + 1;
    EXPECT_EQ(SRCNIC_ERR_INVALID_PARAM, UdpLink::open(cfg, &link));
    cfg = config_for("127.0.0.1");
    cfg.sock_buf_size = 0x80000000u;
    EXPECT_EQ(SRCNIC_ERR_INVALID_PARAM, UdpLink::open(cfg, &link));
    EXPECT_EQ(SRCNIC_ERR_INVALID_PARAM, UdpLink::open(config_for("127.0.0.1"), nullptr));
    EXPECT_FALSE(link);
}

TEST(UdpLink, open__address_in_use_is_busy)
{
    std::unique_ptr<Link> first = open_link(config_for("127.0.0.1"));
    ASSERT_TRUE(first);
    UdpLinkConfig cfg = config_for("127.0.0.1");
    cfg.bind_addr = first->local_addr();
    std::unique_ptr<Link> second;
    EXPECT_EQ(SRCNIC_ERR_BUSY, UdpLink::open(cfg, &second));
    EXPECT_FALSE(second);
}

TEST(UdpLink, open__address_not_local_is_invalid_addr)
{
    std::ifstream sysctl("/proc/sys/net/ipv4/ip_nonlocal_bind");
    int nonlocal = 0;
    if (sysctl >> nonlocal && nonlocal != 0) {
        GTEST_SKIP() << "net.ipv4.ip_nonlocal_bind is set";
    }
    // 198.51.100.0/24 is reserved for documentation (RFC 5737): never a local address. Binding
    // sends nothing.
    std::unique_ptr<Link> link;
    EXPECT_EQ(SRCNIC_ERR_INVALID_ADDR, UdpLink::open(config_for("198.51.100.7"), &link));
    EXPECT_FALSE(link);
}

TEST(UdpLink, open__socket_buffers_as_granted)
{
    UdpLinkConfig cfg = config_for("127.0.0.1");
    cfg.sock_buf_size = 64 * 1024;
    std::unique_ptr<Link> link = open_link(cfg);
    ASSERT_TRUE(link);
    const UdpLink &udp = static_cast<const UdpLink &>(*link);
    // Linux reports twice the request; at least the request itself on any kernel.
    EXPECT_GE(udp.sndbuf(), 64u * 1024);
    EXPECT_GE(udp.rcvbuf(), 64u * 1024);

    uint32_t rmem_max = 0;
    std::ifstream("/proc/sys/net/core/rmem_max") >> rmem_max;
    link = open_link(config_for("127.0.0.1"));
    ASSERT_TRUE(link);
    const UdpLink &big = static_cast<const UdpLink &>(*link);
    std::printf("default request %u: sndbuf %u rcvbuf %u (rmem_max %u)\n",
                kUdpDefaultSockBufSize, big.sndbuf(), big.rcvbuf(), rmem_max);
    EXPECT_GE(big.rcvbuf(), std::min(kUdpDefaultSockBufSize, rmem_max));
}

TEST(UdpLink, rx_queue_capacity__that_many_datagrams_fit_the_socket_and_twice_as_many_do_not)
{
    // The buffer an unprivileged process gets where net.core.rmem_max is Linux's default, and
    // datagrams one at a time from a plain socket (no segmentation offload, whose aggregates
    // the kernel may charge less).
    UdpLinkConfig small = config_for("127.0.0.1");
    small.sock_buf_size = 212992;
    std::unique_ptr<Link> b = open_link(small);
    ASSERT_TRUE(b);
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    struct sockaddr_in to = {};
    to.sin_family = AF_INET;
    to.sin_port = htons(b->local_addr().port);
    std::memcpy(&to.sin_addr, b->local_addr().ip, 4);
    std::vector<uint8_t> payload(65000, 0x5a);
    uint64_t dropped = 0;
    // Sends count datagrams of size bytes while b does not read (loopback queues them at once),
    // then drains b; returns how many the kernel dropped.
    auto queue_then_drain = [&](uint32_t count, uint32_t size) {
        for (uint32_t i = 0; i < count; ++i) {
            EXPECT_EQ(static_cast<ssize_t>(size),
                      ::sendto(fd, payload.data(), size, 0, reinterpret_cast<struct sockaddr *>(&to),
                               sizeof(to)));
        }
        const uint64_t lost = b->stats().rx_dropped - dropped;
        dropped += lost;
        EXPECT_EQ(count - lost, receive(*b, count - lost, b->max_datagram(), 64).size());
        return lost;
    };
    // The datagrams of a 1500-byte interface, of a 9000-byte one, and of loopback.
    for (uint32_t size : {1472u, 8972u, 65000u}) {
        const uint32_t fits = b->rx_queue_capacity(size);
        std::printf("rcvbuf %u: %u datagrams of %u bytes fit\n", as_udp(*b).rcvbuf(), fits, size);
        ASSERT_GT(fits, 0u) << size;
        EXPECT_EQ(0u, queue_then_drain(fits, size)) << fits << " datagrams of " << size << " bytes";
        EXPECT_LT(0u, queue_then_drain(2 * fits + 2, size))
            << "the estimate is too low for " << size << "-byte datagrams";
    }
    ::close(fd);
}

// Datagrams to the link's own address (udp_link.h, "Datagrams to itself") never reach the
// kernel: they come back from rx_burst in order, whole, from the link's address, interleaved in
// a burst with datagrams to another link that still go out; the ring holds kUdpSelfQueue, then
// tx_burst stops there, and what a call lent stays intact while tx_burst fills the ring again.
TEST(UdpLink, self__datagrams_to_its_own_address_skip_the_kernel_in_order)
{
    std::unique_ptr<Link> a = open_link(config_for("127.0.0.1"));
    std::unique_ptr<Link> b = open_link(config_for("127.0.0.1"));
    ASSERT_TRUE(a && b);
    const uint32_t kSelf = kUdpSelfQueue + 8;
    std::vector<uint32_t> lens;
    for (uint32_t i = 0; i < 2 * kSelf; ++i) {
        lens.push_back(i % 5 == 0 ? a->path_mtu(a->local_addr()) - i : 16 + 97 * i);
    }
    const auto payloads = make_payloads(lens, 31);
    std::vector<struct iovec> iov(payloads.size());
    std::vector<TxDatagram> dgrams(payloads.size());
    std::vector<std::vector<uint8_t>> to_self, to_b;
    for (size_t i = 0; i < payloads.size(); ++i) {
        iov[i] = {const_cast<uint8_t *>(payloads[i].data()), payloads[i].size()};
        const bool self = i % 2 == 0;
        dgrams[i] = TxDatagram{&iov[i], 1, self ? a->local_addr() : b->local_addr()};
        (self ? to_self : to_b).push_back(payloads[i]);
    }
    // Up to the first datagram to itself that finds the ring full.
    const uint32_t first = a->tx_burst(dgrams.data(), static_cast<uint32_t>(dgrams.size()));
    ASSERT_EQ(2 * kUdpSelfQueue, first);
    EXPECT_EQ(kUdpSelfQueue, as_udp(*a).self_datagrams());
    EXPECT_TRUE(a->rx_pending()) << "held datagrams are pending: the engine must not sleep";
    uint8_t probe;
    EXPECT_LT(::recv(sock_of(*a), &probe, 1, MSG_DONTWAIT), 0) << "one reached the socket";

    std::vector<std::vector<uint8_t>> got;
    std::vector<std::vector<uint8_t>> bufs(8, std::vector<uint8_t>(a->max_datagram()));
    std::vector<RxDatagram> slots(8);
    size_t sent = first;
    const uint64_t deadline = now_ns() + kWatchdogNs;
    while (got.size() < to_self.size() && now_ns() < deadline) {
        for (size_t i = 0; i < slots.size(); ++i) {
            slots[i] = RxDatagram{bufs[i].data(), static_cast<uint32_t>(bufs[i].size()), 0, LinkAddr()};
            slots[i].borrow = i % 2 == 1;
        }
        const uint32_t n = a->rx_burst(slots.data(), static_cast<uint32_t>(slots.size()));
        std::vector<std::vector<uint8_t>> copies;
        for (uint32_t i = 0; i < n; ++i) {
            EXPECT_EQ(a->local_addr(), slots[i].src);
            EXPECT_EQ(slots[i].borrow, slots[i].data != slots[i].buf);
            copies.emplace_back(slots[i].data, slots[i].data + slots[i].len);
        }
        // More datagrams to itself while what this call lent is still the caller's.
        if (sent < dgrams.size()) {
            sent += a->tx_burst(dgrams.data() + sent, static_cast<uint32_t>(dgrams.size() - sent));
        }
        for (uint32_t i = 0; i < n; ++i) {
            EXPECT_TRUE(std::equal(copies[i].begin(), copies[i].end(), slots[i].data))
                << "a lent datagram changed before the next rx_burst";
        }
        got.insert(got.end(), copies.begin(), copies.end());
    }
    EXPECT_EQ(dgrams.size(), sent);
    ASSERT_EQ(to_self.size(), got.size());
    for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(to_self[i], got[i]) << "datagram " << i << " to itself";
    }
    EXPECT_FALSE(a->rx_pending());
    EXPECT_EQ(kSelf, as_udp(*a).self_datagrams());
    EXPECT_EQ(dgrams.size(), a->stats().tx_datagrams);
    EXPECT_EQ(kSelf, a->stats().rx_datagrams);
    const auto other = receive(*b, to_b.size(), b->max_datagram());
    ASSERT_EQ(to_b.size(), other.size());
    for (size_t i = 0; i < other.size(); ++i) {
        EXPECT_EQ(to_b[i], other[i].data) << "datagram " << i << " to the other link";
    }

    // One longer than a slot that may not borrow: dropped and counted.
    struct iovec big = {const_cast<uint8_t *>(payloads[0].data()), payloads[0].size()};
    const TxDatagram d = {&big, 1, a->local_addr()};
    ASSERT_EQ(1u, a->tx_burst(&d, 1));
    RxDatagram small{bufs[0].data(), 100, 0, LinkAddr()};
    EXPECT_EQ(0u, a->rx_burst(&small, 1));
    EXPECT_EQ(1u, a->stats().rx_oversize);
    EXPECT_FALSE(a->rx_pending());
}

// Keeps a's ring of datagrams to itself full before every call and counts what b's socket
// gets through: a quiet b's one datagram within two quiet turns, and an active b at least one
// slot in two of each call.
TEST(UdpLink, self__a_full_ring_starves_no_socket)
{
    std::unique_ptr<Link> a = open_link(config_for("127.0.0.1"));
    std::unique_ptr<Link> b = open_link(config_for("127.0.0.1"));
    ASSERT_TRUE(a && b);
    const auto to_self = make_payloads(std::vector<uint32_t>(kUdpSelfQueue, 24), 41);
    const auto from_b = make_payloads(std::vector<uint32_t>(4, 16), 42);
    constexpr uint32_t kSlots = 8;
    static_assert(kSlots < kUdpSelfQueue, "the ring alone can fill every slot");
    std::vector<std::vector<uint8_t>> bufs(kSlots, std::vector<uint8_t>(a->mtu()));
    std::vector<RxDatagram> slots(kSlots);
    uint64_t self_sent = 0, self_got = 0, b_got = 0;
    std::deque<uint32_t> expect_self;   // indexes (first 4 bytes) of those held, in order
    uint32_t first_b_call = 0;
    uint32_t b_got_active = 0, active_calls = 0;
    ASSERT_EQ(1u, send_all(*b, from_b, a->local_addr(), from_b.size() - 1));   // one, quiet
    for (uint32_t call = 1; call <= 8 * kUdpIdlePollEvery; ++call) {
        // Refill the ring (tx_burst stops at the first datagram that finds it full).
        const uint32_t taken = send_all(*a, to_self, a->local_addr());
        for (uint32_t i = 0; i < taken; ++i) {
            expect_self.push_back(i);
        }
        self_sent += taken;
        if (first_b_call != 0) {
            ASSERT_EQ(from_b.size(), send_all(*b, from_b, a->local_addr()));   // b is active
        }
        for (uint32_t i = 0; i < kSlots; ++i) {
            slots[i] = RxDatagram{bufs[i].data(), a->mtu(), 0, LinkAddr()};
        }
        const uint32_t got = a->rx_burst(slots.data(), kSlots);
        uint32_t got_b = 0;
        for (uint32_t i = 0; i < got; ++i) {
            if (slots[i].src == a->local_addr()) {
                uint32_t index;
                std::memcpy(&index, slots[i].data, sizeof(index));
                ASSERT_FALSE(expect_self.empty());
                EXPECT_EQ(expect_self.front(), index) << "datagrams to itself out of order";
                expect_self.pop_front();
                ++self_got;
            } else {
                EXPECT_EQ(b->local_addr(), slots[i].src);
                ++got_b;
            }
        }
        b_got += got_b;
        if (first_b_call == 0 && got_b != 0) {
            first_b_call = call;
        } else if (first_b_call != 0) {
            b_got_active += got_b;
            ++active_calls;
        }
    }
    std::printf("b's first datagram at call %u; active b got %u slots in %u calls; %" PRIu64
                " datagrams to itself\n", first_b_call, b_got_active, active_calls, self_got);
    ASSERT_NE(0u, first_b_call) << "b's socket never polled while the ring stayed full";
    EXPECT_LE(first_b_call, 2 * kUdpIdlePollEvery);
    EXPECT_GE(b_got_active, active_calls * (kSlots / 2) / 2)
        << "an active socket got less than a quarter of the slots";
    EXPECT_GE(self_got, active_calls * (kSlots / 2)) << "the ring got less than half the slots";
    EXPECT_EQ(self_sent, self_got + as_udp(*a).self_pending());
}

TEST(UdpLink, tx_burst__batch_round_trip_ipv4)
{
    round_trip("127.0.0.1", 1);
}

TEST(UdpLink, tx_burst__batch_round_trip_ipv6)
{
    if (!ipv6_loopback_available()) {
        GTEST_SKIP() << "no IPv6 loopback here";
    }
    round_trip("::1", 2);
}

// Gather lists (three pieces; every iov entry allowed, every other one empty; none at all)
// arrive as one datagram each, sent in one tx_burst or one by one (a datagram sent alone, a
// ping-pong's message or an ack, takes the single-send path); the counters follow.
void gather_lists_arrive_whole(bool one_by_one)
{
    std::unique_ptr<Link> a = open_link(config_for("127.0.0.1"));
    std::unique_ptr<Link> b = open_link(config_for("127.0.0.1"));
    ASSERT_TRUE(a && b);
    const std::string header = "HDR:", payload(1000, 'p'), trailer = ":END";
    struct iovec three[] = {{const_cast<char *>(header.data()), header.size()},
                            {const_cast<char *>(payload.data()), payload.size()},
                            {const_cast<char *>(trailer.data()), trailer.size()}};
    char pieces[kLinkMaxIov];
    struct iovec most[kLinkMaxIov];
    for (uint32_t i = 0; i < kLinkMaxIov; ++i) {
        pieces[i] = static_cast<char>('a' + i);
        // Every other entry is empty, which must not matter.
        most[i] = {&pieces[i], i % 2 == 0 ? 1u : 0u};
    }
    const TxDatagram dgrams[] = {{three, 3, b->local_addr()},
                                 {most, kLinkMaxIov, b->local_addr()},
                                 {nullptr, 0, b->local_addr()}};
    if (one_by_one) {
        for (const TxDatagram &d : dgrams) {
            ASSERT_EQ(1u, a->tx_burst(&d, 1));
        }
    } else {
        ASSERT_EQ(3u, a->tx_burst(dgrams, 3));
    }
    EXPECT_EQ(3u, a->stats().tx_datagrams);
    EXPECT_EQ(header.size() + payload.size() + trailer.size() + (kLinkMaxIov + 1) / 2,
              a->stats().tx_bytes);

    const auto got = receive(*b, 3, b->mtu());
    ASSERT_EQ(3u, got.size());
    EXPECT_EQ(header + payload + trailer, std::string(got[0].data.begin(), got[0].data.end()));
    EXPECT_EQ(std::string("acegikmoqsuwy").substr(0, (kLinkMaxIov + 1) / 2),
              std::string(got[1].data.begin(), got[1].data.end()));
    EXPECT_TRUE(got[2].data.empty());
}

TEST(UdpLink, tx_burst__gather_list_arrives_as_one_datagram)
{
    gather_lists_arrive_whole(false);
}

TEST(UdpLink, tx_burst__lone_gather_lists_arrive_whole)
{
    gather_lists_arrive_whole(true);
}

// The single-send path answers like a batch of one: a full socket takes nothing (the caller
// retries), a hard error drops the datagram, counted, and reports it taken.
TEST(UdpLink, tx_burst__lone_datagram_would_block_then_hard_error)
{
    MockGuard guard;
    std::unique_ptr<Link> a = open_link(config_for("127.0.0.1"));
    std::unique_ptr<Link> b = open_link(config_for("127.0.0.1"));
    ASSERT_TRUE(a && b);
    const auto payloads = make_payloads({64, 64}, 11);
    struct iovec iov[2];
    TxDatagram d[2];
    for (int i = 0; i < 2; ++i) {
        iov[i] = {const_cast<uint8_t *>(payloads[i].data()), payloads[i].size()};
        d[i] = {&iov[i], 1, b->local_addr()};
    }

    g_send_plan = MockPlan{sock_of(*a), 0, 1, EAGAIN, 0};
    EXPECT_EQ(0u, a->tx_burst(&d[0], 1));
    EXPECT_EQ(1u, g_send_plan.failed);
    EXPECT_EQ(0u, a->stats().tx_datagrams);
    EXPECT_EQ(0u, a->stats().tx_errors);

    g_send_plan = MockPlan{sock_of(*a), 0, 1, ECONNREFUSED, 0};
    EXPECT_EQ(1u, a->tx_burst(&d[1], 1));   // dropped: taken, like a loss
    EXPECT_EQ(1u, g_send_plan.failed);
    EXPECT_EQ(1u, a->stats().tx_errors);
    EXPECT_EQ(0u, a->stats().tx_datagrams);

    EXPECT_EQ(1u, a->tx_burst(&d[0], 1));   // the retry of the one that would have blocked
    EXPECT_EQ(1u, a->stats().tx_datagrams);
    const auto got = receive(*b, 1, b->mtu());
    ASSERT_EQ(1u, got.size());
    EXPECT_EQ(payloads[0], got[0].data);
    EXPECT_FALSE(readable_now(sock_of(*b)));   // the dropped one never left
}

TEST(UdpLink, tx_burst__invalid_datagrams_counted_and_accepted)
{
    std::unique_ptr<Link> a = open_link(config_for("127.0.0.1", 1000));
    std::unique_ptr<Link> b = open_link(config_for("127.0.0.1", 1000));
    ASSERT_TRUE(a && b);
    std::vector<uint8_t> ok(10, 1), big(1001, 2);
    struct iovec ok_iov = {ok.data(), ok.size()};
    struct iovec big_iov = {big.data(), big.size()};
    struct iovec many[kLinkMaxIov + 1];
    for (auto &iov : many) {
        iov = {ok.data(), 1};
    }
    LinkAddr v6;
    ASSERT_EQ(SRCNIC_OK, LinkAddr::from_ip("::1", b->local_addr().port, &v6));
    const TxDatagram dgrams[] = {{&ok_iov, 1, b->local_addr()},
                                 {&big_iov, 1, b->local_addr()},
                                 {&ok_iov, 1, b->local_addr()},
                                 {many, kLinkMaxIov + 1, b->local_addr()},
                                 {&ok_iov, 1, v6},
                                 {&ok_iov, 1, b->local_addr()}};
    EXPECT_EQ(6u, a->tx_burst(dgrams, 6));
    EXPECT_EQ(3u, a->stats().tx_errors);
    EXPECT_EQ(3u, a->stats().tx_datagrams);
    EXPECT_EQ(3u, receive(*b, 3, b->mtu()).size());
}

TEST(UdpLink, rx_burst__oversize_dropped_and_counted)
{
    std::unique_ptr<Link> a = open_link(config_for("127.0.0.1"));
    std::unique_ptr<Link> b = open_link(config_for("127.0.0.1"));
    ASSERT_TRUE(a && b);
    const auto payloads = make_payloads({100, 2000, 101, 3000, 102, 1000}, 3);
    ASSERT_EQ(6u, send_all(*a, payloads, b->local_addr()));

    // All six are queued before the receive, so one recvmmsg sees the mix.
    const uint64_t deadline = now_ns() + kWatchdogNs;
    std::vector<Received> got;
    while (got.size() + b->stats().rx_oversize < 6 && now_ns() < deadline) {
        auto more = receive(*b, 1, 1000, 8);
        got.insert(got.end(), more.begin(), more.end());
    }
    ASSERT_EQ(4u, got.size());
    EXPECT_EQ(payloads[0], got[0].data);
    EXPECT_EQ(payloads[2], got[1].data);
    EXPECT_EQ(payloads[4], got[2].data);
    EXPECT_EQ(payloads[5], got[3].data);
    EXPECT_EQ(2u, b->stats().rx_oversize);
    EXPECT_EQ(4u, b->stats().rx_datagrams);
}

TEST(UdpLink, tx_burst__would_block_returns_the_count_accepted)
{
    MockGuard guard;
    UdpLinkConfig cfg = config_for("127.0.0.1");
    cfg.batch_size = 4;
    cfg.gso = false;   // the mock counts datagrams as messages
    std::unique_ptr<Link> a = open_link(cfg);
    std::unique_ptr<Link> b = open_link(cfg);
    ASSERT_TRUE(a && b);
    const auto payloads = make_payloads(std::vector<uint32_t>(10, 64), 4);

    g_send_plan = MockPlan{sock_of(*a), 5, 1, EAGAIN, 0};
    EXPECT_EQ(5u, send_all(*a, payloads, b->local_addr()));
    EXPECT_EQ(1u, g_send_plan.failed);
    EXPECT_EQ(5u, a->stats().tx_datagrams);
    EXPECT_EQ(0u, a->stats().tx_errors);
    // The caller retries the rest later; the mock has no more failures.
    EXPECT_EQ(5u, send_all(*a, payloads, b->local_addr(), 5));

    expect_datagrams(*b, payloads, 0, 10);
}

TEST(UdpLink, tx_burst__hard_error_counted_as_accepted)
{
    MockGuard guard;
    UdpLinkConfig cfg = config_for("127.0.0.1");
    cfg.gso = false;   // the mock counts datagrams as messages
    std::unique_ptr<Link> a = open_link(cfg);
    std::unique_ptr<Link> b = open_link(config_for("127.0.0.1"));
    ASSERT_TRUE(a && b);
    const auto payloads = make_payloads(std::vector<uint32_t>(10, 64), 5);

    g_send_plan = MockPlan{sock_of(*a), 3, 1, ECONNREFUSED, 0};
    EXPECT_EQ(10u, send_all(*a, payloads, b->local_addr()));
    EXPECT_EQ(1u, g_send_plan.failed);
    EXPECT_EQ(1u, a->stats().tx_errors);
    EXPECT_EQ(9u, a->stats().tx_datagrams);

    const auto got = receive(*b, 9, b->mtu());
    ASSERT_EQ(9u, got.size());
    for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(payloads[i < 3 ? i : i + 1], got[i].data) << "datagram " << i;
    }
}

TEST(UdpLink, rx_burst__hard_errors_do_not_wedge_the_loop)
{
    MockGuard guard;
    std::unique_ptr<Link> a = open_link(config_for("127.0.0.1"));
    std::unique_ptr<Link> b = open_link(config_for("127.0.0.1"));
    ASSERT_TRUE(a && b);
    const auto payloads = make_payloads(std::vector<uint32_t>(5, 64), 6);

    // Two errors: rx_burst counts them and still receives in the same call.
    g_recv_plan = MockPlan{sock_of(*b), 0, 2, ECONNREFUSED, 0};
    ASSERT_EQ(5u, send_all(*a, payloads, b->local_addr()));
    auto got = receive(*b, 5, b->mtu());
    EXPECT_EQ(5u, got.size());
    EXPECT_EQ(2u, b->stats().rx_errors);

    // Errors without end: each rx_burst gives up after a bounded number and returns.
    g_recv_plan = MockPlan{sock_of(*b), 0, 1000000, ECONNREFUSED, 0};
    ASSERT_EQ(5u, send_all(*a, payloads, b->local_addr()));
    uint8_t buf[128];
    RxDatagram slot = {buf, sizeof(buf), 0, LinkAddr()};
    EXPECT_EQ(0u, b->rx_burst(&slot, 1));
    const uint64_t errors_per_call = b->stats().rx_errors - 2;
    std::printf("hard errors tolerated per rx_burst: %llu\n",
                static_cast<unsigned long long>(errors_per_call));
    EXPECT_GE(errors_per_call, 1u);
    EXPECT_LE(errors_per_call, 64u);

    // Once the errors stop, everything queued is still there.
    g_recv_plan = MockPlan();
    got = receive(*b, 5, b->mtu());
    ASSERT_EQ(5u, got.size());
    for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(payloads[i], got[i].data);
    }
}

// Routes the engine's log into a list at a given level for one scope, then restores both.
class LogTap {
public:
    explicit LogTap(LogLevel level) : saved_(log_level())
    {
        set_log_level(level);
        set_log_sink(sink, this);
    }
    ~LogTap()
    {
        set_log_sink(nullptr, nullptr);
        set_log_level(saved_);
    }
    // The level of the first message containing `text` logged since the last call, if any.
    bool take(const char *text, LogLevel *level_p)
    {
        for (const auto &m : messages_) {
            if (m.second.find(text) != std::string::npos) {
                *level_p = m.first;
                messages_.clear();
                return true;
            }
        }
        messages_.clear();
        return false;
    }

private:
    static void sink(LogLevel level, const char *, int, const char *msg, void *arg)
    {
        static_cast<LogTap *>(arg)->messages_.emplace_back(level, msg);
    }
    LogLevel saved_;
    std::vector<std::pair<LogLevel, std::string>> messages_;
};

TEST(UdpLink, receive_error__a_gone_peers_icmp_error_logs_at_debug_others_at_warn)
{
    MockGuard guard;
    LogTap tap(LogLevel::kDebug);
    std::unique_ptr<Link> b = open_link(config_for("127.0.0.1"));
    ASSERT_TRUE(b);
    uint8_t buf[128];
    RxDatagram slot = {buf, sizeof(buf), 0, LinkAddr()};
    // The level the receive error `err` is logged at. The messages are rate-limited per call
    // site (earlier tests may have used up this second's), so errors are made until one is
    // let through.
    auto level_of = [&](int err, LogLevel *level_p) {
        const uint64_t deadline = now_ns() + 3 * kNsPerSec;
        while (now_ns() < deadline) {
            g_recv_plan = MockPlan{sock_of(*b), 0, 1, err, 0};
            EXPECT_EQ(0u, b->rx_burst(&slot, 1));
            if (tap.take("receive failed", level_p)) {
                return true;
            }
        }
        return false;
    };
    LogLevel level;
    // ICMP port unreachable from a peer that is gone: part of its failure, which the Nic
    // reports to its consumer; a warning would be noise (and fails UCX's UCT tests).
    ASSERT_TRUE(level_of(ECONNREFUSED, &level)) << "no message for ECONNREFUSED within 3 s";
    EXPECT_EQ(LogLevel::kDebug, level) << log_level_name(level);
    ASSERT_TRUE(level_of(EHOSTUNREACH, &level)) << "no message for EHOSTUNREACH within 3 s";
    EXPECT_EQ(LogLevel::kDebug, level) << log_level_name(level);
    // Anything else is unexpected and said at warn.
    ASSERT_TRUE(level_of(ENOMEM, &level)) << "no message for ENOMEM within 3 s";
    EXPECT_EQ(LogLevel::kWarn, level) << log_level_name(level);
    EXPECT_LE(3u, b->stats().rx_errors);
}

TEST(UdpLink, tx_burst__peer_not_reading_never_stalls_and_drops_are_counted)
{
    UdpLinkConfig small = config_for("127.0.0.1");
    small.sock_buf_size = 64 * 1024;
    small.gro = false;   // (the kernel counts a dropped receive aggregate as one drop)
    std::unique_ptr<Link> a = open_link(config_for("127.0.0.1"));
    std::unique_ptr<Link> b = open_link(small);
    ASSERT_TRUE(a && b);
    const uint32_t rcvbuf = static_cast<const UdpLink &>(*b).rcvbuf();
    const auto payloads = make_payloads(std::vector<uint32_t>(64, 1000), 7);

    // Fill b's receive buffer several times over, bounded in rounds. Over loopback the kernel
    // drops at the receiver instead of blocking the sender; a sender that would block must
    // report it by returning fewer than it was given.
    uint64_t accepted = 0;
    bool would_block = false;
    for (int round = 0; round < 1000 && accepted * 1000 < 4ull * rcvbuf; ++round) {
        const uint32_t n = send_all(*a, payloads, b->local_addr());
        accepted += n;
        if (n < payloads.size()) {
            would_block = true;
            break;
        }
    }
    std::printf("peer rcvbuf %u: %llu datagrams accepted, %s\n", rcvbuf,
                static_cast<unsigned long long>(accepted),
                would_block ? "then would block" : "never blocked");
    EXPECT_EQ(accepted, a->stats().tx_datagrams);

    // Drain until every accepted datagram is accounted for, received or dropped (the link
    // reads the kernel's drop counter when its stats are read); bounded by the watchdog.
    uint64_t received = 0;
    const uint64_t deadline = now_ns() + kWatchdogNs;
    while (received + b->stats().rx_dropped < accepted && now_ns() < deadline) {
        received += receive(*b, 1, b->mtu(), 64).size();
    }
    std::printf("received %llu, dropped %llu\n", static_cast<unsigned long long>(received),
                static_cast<unsigned long long>(b->stats().rx_dropped));
    EXPECT_LT(received, accepted);
    EXPECT_EQ(accepted, received + b->stats().rx_dropped);
}

TEST(UdpLink, event_fd__readable_only_while_datagrams_are_queued)
{
    // (Without receive aggregation: datagrams staged from an aggregate are announced by
    // rx_pending() instead, UdpLinkGso's tests.)
    UdpLinkConfig no_gro = config_for("127.0.0.1");
    no_gro.gro = false;
    std::unique_ptr<Link> a = open_link(config_for("127.0.0.1"));
    std::unique_ptr<Link> b = open_link(no_gro);
    ASSERT_TRUE(a && b);
    b->rx_notify(true);
    EXPECT_FALSE(readable_now(b->event_fd()));
    const auto payloads = make_payloads({10, 20}, 9);
    ASSERT_EQ(2u, send_all(*a, payloads, b->local_addr()));
    ASSERT_TRUE(wait_readable(b->event_fd(), now_ns() + kWatchdogNs));

    uint8_t buf[64];
    RxDatagram slot = {buf, sizeof(buf), 0, LinkAddr()};
    // The second datagram may still be on its way; wait for the first to be taken.
    const uint64_t deadline = now_ns() + kWatchdogNs;
    uint32_t taken = 0;
    while (taken == 0 && now_ns() < deadline) {
        taken = b->rx_burst(&slot, 1);
    }
    ASSERT_EQ(1u, taken);
    EXPECT_EQ(10u, slot.len);
    ASSERT_TRUE(wait_readable(b->event_fd(), now_ns() + kWatchdogNs));
    EXPECT_EQ(1u, b->rx_burst(&slot, 1));
    EXPECT_EQ(20u, slot.len);
    EXPECT_FALSE(readable_now(b->event_fd()));
    EXPECT_EQ(0u, b->rx_burst(&slot, 1));
}

TEST(UdpLink, event_fd__announces_only_while_notify_is_on_and_at_once_for_queued_datagrams)
{
    std::unique_ptr<Link> a = open_link(config_for("127.0.0.1"));
    std::unique_ptr<Link> b = open_link(config_for("127.0.0.1"));
    ASSERT_TRUE(a && b);
    // Make b's socket for a exist too (b sends to a past the threshold), so both kinds of
    // socket are covered.
    const auto many = make_payloads(std::vector<uint32_t>(kUdpPeerSocketAfter, 32), 30);
    ASSERT_EQ(many.size(), send_all(*b, many, a->local_addr()));
    ASSERT_EQ(1u, as_udp(*b).peer_sockets());
    expect_datagrams(*a, many, 0, many.size());
    a->rx_notify(false);

    // Off: queued datagrams (on b's peer socket, from a) do not make the fd readable.
    b->rx_notify(false);
    const auto payloads = make_payloads({10}, 31);
    ASSERT_EQ(1u, send_all(*a, payloads, b->local_addr()));
    EXPECT_FALSE(readable_now(b->event_fd()));
    // On: readable at once, because a datagram is already queued.
    b->rx_notify(true);
    EXPECT_TRUE(readable_now(b->event_fd()));
    b->rx_notify(true);   // idempotent
    expect_datagrams(*b, payloads, 0, 1);
    EXPECT_FALSE(readable_now(b->event_fd()));
    // A datagram for the bound socket (from a third link) wakes it too.
    std::unique_ptr<Link> c = open_link(config_for("127.0.0.1"));
    ASSERT_TRUE(c);
    ASSERT_EQ(1u, send_all(*c, payloads, b->local_addr()));
    EXPECT_TRUE(wait_readable(b->event_fd(), now_ns() + kWatchdogNs));
    b->rx_notify(false);
    EXPECT_FALSE(readable_now(b->event_fd()));
}

// --- segmentation offload (UDP_SEGMENT) ---


// Two links on 127.0.0.1 whose sender groups datagrams with UDP_SEGMENT (skipped where the
// kernel cannot); the mocks are disarmed when the test ends.
class UdpLinkGso : public ::testing::Test {
protected:
    void SetUp() override
    {
        a = open_link(config_for("127.0.0.1"));
        b = open_link(config_for("127.0.0.1"));
        ASSERT_TRUE(a && b);
        if (!as_udp(*a).gso()) {
            GTEST_SKIP() << "the kernel has no UDP_SEGMENT";
        }
    }

    MockGuard guard;
    std::unique_ptr<Link> a;
    std::unique_ptr<Link> b;
};

TEST_F(UdpLinkGso, tx_burst__equal_sizes_go_as_one_offload_group_and_arrive_as_datagrams)
{
    // 20 of 1000 bytes and a shorter last one: one group. Then 300 (a group of its own
    // size), 300, 2000 (longer than its group's segments: a new message), 10.
    std::vector<uint32_t> lens(20, 1000);
    lens.push_back(999);
    for (uint32_t len : {300u, 300u, 2000u, 10u}) {
        lens.push_back(len);
    }
    const auto payloads = make_payloads(lens, 11);
    ASSERT_EQ(lens.size(), send_all(*a, payloads, b->local_addr()));
    EXPECT_EQ(3u, as_udp(*a).tx_messages());   // {1000 x20, 999}, {300, 300}, {2000, 10}
    EXPECT_EQ(lens.size(), a->stats().tx_datagrams);

    expect_datagrams(*b, payloads, 0, payloads.size());
    EXPECT_EQ(lens.size(), b->stats().rx_datagrams);
}

TEST_F(UdpLinkGso, tx_burst__offload_group_ends_at_a_new_destination_and_at_64_segments)
{
    std::unique_ptr<Link> c = open_link(config_for("127.0.0.1"));
    ASSERT_TRUE(c);
    // 100 datagrams of 100 bytes: 0..69 to b, 70..99 to c.
    const auto payloads = make_payloads(std::vector<uint32_t>(100, 100), 12);
    std::vector<struct iovec> iov(payloads.size());
    std::vector<TxDatagram> dgrams(payloads.size());
    for (size_t i = 0; i < payloads.size(); ++i) {
        iov[i] = {const_cast<uint8_t *>(payloads[i].data()), payloads[i].size()};
        dgrams[i] = TxDatagram{&iov[i], 1, i < 70 ? b->local_addr() : c->local_addr()};
    }
    uint32_t sent = 0;
    while (sent < dgrams.size()) {   // the batch of 32 messages may end a call early
        const uint32_t n = a->tx_burst(dgrams.data() + sent, static_cast<uint32_t>(dgrams.size() - sent));
        ASSERT_NE(0u, n);
        sent += n;
    }
    // b: a group of 64 and one of 6; c: one of 30.
    EXPECT_EQ(3u, as_udp(*a).tx_messages());
    expect_datagrams(*b, payloads, 0, 70);
    expect_datagrams(*c, payloads, 70, 30);
}

TEST_F(UdpLinkGso, tx_burst__offload_refused_by_the_kernel_falls_back_to_datagrams)
{
    // The first call (one group of 10) fails with EIO, as on a route without checksum
    // offload / expect the offload off and all 10 delivered one by one, none counted lost.
    const auto payloads = make_payloads(std::vector<uint32_t>(10, 64), 13);
    g_send_plan = MockPlan{sock_of(*a), 0, 1, EIO, 0};
    EXPECT_EQ(10u, send_all(*a, payloads, b->local_addr()));
    EXPECT_EQ(1u, g_send_plan.failed);
    EXPECT_FALSE(as_udp(*a).gso());
    EXPECT_EQ(10u, a->stats().tx_datagrams);
    EXPECT_EQ(0u, a->stats().tx_errors);
    expect_datagrams(*b, payloads, 0, 10);
}

TEST_F(UdpLinkGso, tx_burst__hard_error_on_a_group_drops_the_group)
{
    // Groups {64 x5}, {200 x5}; the first fails with ECONNREFUSED / expect its 5 datagrams
    // counted as errors and accepted, the second group delivered.
    std::vector<uint32_t> lens(5, 64);
    lens.insert(lens.end(), 5, 200);
    const auto payloads = make_payloads(lens, 14);
    g_send_plan = MockPlan{sock_of(*a), 0, 1, ECONNREFUSED, 0};
    EXPECT_EQ(10u, send_all(*a, payloads, b->local_addr()));
    EXPECT_EQ(5u, a->stats().tx_errors);
    EXPECT_EQ(5u, a->stats().tx_datagrams);
    EXPECT_TRUE(as_udp(*a).gso());
    expect_datagrams(*b, payloads, 5, 5);
}

TEST(UdpLink, open__gso_can_be_turned_off)
{
    UdpLinkConfig cfg = config_for("127.0.0.1");
    cfg.gso = false;
    std::unique_ptr<Link> a = open_link(cfg);
    std::unique_ptr<Link> b = open_link(config_for("127.0.0.1"));
    ASSERT_TRUE(a && b);
    EXPECT_FALSE(as_udp(*a).gso());
    const auto payloads = make_payloads(std::vector<uint32_t>(10, 64), 15);
    EXPECT_EQ(10u, send_all(*a, payloads, b->local_addr()));
    EXPECT_EQ(10u, as_udp(*a).tx_messages());
    expect_datagrams(*b, payloads, 0, 10);
}

// --- receive aggregation (UDP_GRO) ---

// Two links with datagrams of at most 1472 bytes (a 1500-byte path): both offloads apply on
// loopback.
class UdpLinkGro : public ::testing::Test {
protected:
    void SetUp() override
    {
        a = open_link(config_for("127.0.0.1", 1472));
        b = open_link(config_for("127.0.0.1", 1472));
        ASSERT_TRUE(a && b);
        if (!as_udp(*a).gso() || !as_udp(*b).gro()) {
            GTEST_SKIP() << "the kernel lacks UDP_SEGMENT or UDP_GRO";
        }
    }

    // Receives at b, through nslots slots a call, until `want` datagrams came (or the
    // watchdog); each call's slots go through prepare before it and check after it. Returns
    // the datagrams in order, read where each slot's data points.
    std::vector<std::vector<uint8_t>> receive_calls(
        size_t want, size_t nslots, const std::function<void(std::vector<RxDatagram> &)> &prepare,
        const std::function<void(const std::vector<RxDatagram> &, uint32_t)> &check)
    {
        std::vector<std::vector<uint8_t>> bufs(nslots, std::vector<uint8_t>(b->mtu()));
        std::vector<RxDatagram> slots(nslots);
        std::vector<std::vector<uint8_t>> got;
        const uint64_t deadline = now_ns() + kWatchdogNs;
        while (got.size() < want && now_ns() < deadline) {
            if (!b->rx_pending() && !wait_readable(b->event_fd(), deadline)) {
                break;
            }
            for (size_t i = 0; i < slots.size(); ++i) {
                slots[i] = RxDatagram{bufs[i].data(), b->mtu(), 0, LinkAddr()};
            }
            prepare(slots);
            const uint32_t n = b->rx_burst(slots.data(), static_cast<uint32_t>(slots.size()));
            check(slots, n);
            for (uint32_t i = 0; i < n; ++i) {
                EXPECT_NE(nullptr, slots[i].data);
                if (slots[i].data != nullptr) {
                    got.emplace_back(slots[i].data, slots[i].data + slots[i].len);
                }
            }
        }
        return got;
    }

    std::unique_ptr<Link> a;
    std::unique_ptr<Link> b;
};

TEST_F(UdpLinkGro, rx_burst__aggregates_are_split_into_datagrams_across_calls)
{
    // 40 of 1400 bytes and a shorter last one, then 3 of 100: two groups; received through
    // 5 slots per call / expect every datagram once, in order, from aggregates, and the link
    // reporting staged datagrams (which its fd does not announce) between calls
    std::vector<uint32_t> lens(40, 1400);
    lens.push_back(77);
    lens.insert(lens.end(), 3, 100);
    const auto payloads = make_payloads(lens, 16);
    b->rx_notify(true);   // the test sleeps on the event fd
    ASSERT_EQ(lens.size(), send_all(*a, payloads, b->local_addr()));

    bool saw_pending = false;
    const auto got = receive_calls(
        lens.size(), 5, [](std::vector<RxDatagram> &) {},
        [&](const std::vector<RxDatagram> &slots, uint32_t n) {
            for (uint32_t i = 0; i < n; ++i) {
                EXPECT_TRUE(slots[i].src == a->local_addr());
            }
            saw_pending = saw_pending || b->rx_pending();
        });
    ASSERT_EQ(payloads.size(), got.size());
    for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(payloads[i], got[i]) << "datagram " << i;
    }
    EXPECT_TRUE(saw_pending);
    EXPECT_GE(as_udp(*b).rx_aggregates(), 1u);
    EXPECT_EQ(lens.size(), b->stats().rx_datagrams);
    EXPECT_FALSE(b->rx_pending());
}

TEST_F(UdpLinkGro, rx_burst__lent_datagrams_stay_intact_until_the_next_call)
{
    // 12 groups of 10 datagrams (sizes 1000, 1001, ...: each size a group of its own), more
    // aggregates than the link stages at once (kUdpGroBuffers).
    static_assert(kUdpGroBuffers < 12, "more aggregates than staging buffers");
    std::vector<uint32_t> lens;
    for (uint32_t g = 0; g < 12; ++g) {
        lens.insert(lens.end(), 10, 1000 + g);
    }
    const auto payloads = make_payloads(lens, 23);
    b->rx_notify(true);
    ASSERT_EQ(lens.size(), send_all(*a, payloads, b->local_addr()));
    ASSERT_TRUE(wait_readable(b->event_fd(), now_ns() + kWatchdogNs));

    // A call with room for all of them: it lends what it staged and stages no more, so what
    // it lent is still there when it returns; the rest comes in later calls.
    size_t lent = 0, calls = 0;
    const auto got = receive_calls(
        lens.size(), lens.size(),
        [&](std::vector<RxDatagram> &slots) {
            for (size_t i = 0; i < slots.size(); ++i) {
                slots[i].borrow = calls % 2 == 0 || i > 0;   // once, a copy for slot 0
            }
            ++calls;
        },
        [&](const std::vector<RxDatagram> &slots, uint32_t n) {
            EXPECT_LE(n, kUdpGroBuffers * 10u);
            for (uint32_t i = 0; i < n; ++i) {
                if (slots[i].borrow) {
                    lent += slots[i].data != slots[i].buf;
                } else {
                    EXPECT_EQ(slots[i].buf, slots[i].data) << "a slot that may not borrow";
                }
            }
        });
    ASSERT_EQ(payloads.size(), got.size());
    for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(payloads[i], got[i]) << "datagram " << i;
    }
    EXPECT_GE(lent, lens.size() / 2);
    EXPECT_GE(as_udp(*b).rx_aggregates(), 1u);
}

TEST_F(UdpLinkGro, rx_burst__aggregated_datagram_longer_than_the_slot_is_dropped_and_counted)
{
    b->rx_notify(true);   // the test sleeps on the event fd
    // 4 of 1000 bytes into 600-byte slots, then one of 500 / expect 4 oversize drops and the
    // 500-byte one delivered
    std::vector<uint32_t> lens(4, 1000);
    lens.push_back(500);
    const auto payloads = make_payloads(lens, 17);
    ASSERT_EQ(lens.size(), send_all(*a, payloads, b->local_addr()));
    const uint64_t deadline = now_ns() + kWatchdogNs;
    std::vector<uint8_t> buf(600);
    std::vector<std::vector<uint8_t>> got;
    while (b->stats().rx_oversize + got.size() < lens.size() && now_ns() < deadline) {
        if (!b->rx_pending() && !wait_readable(b->event_fd(), deadline)) {
            break;
        }
        RxDatagram slot{buf.data(), 600, 0, LinkAddr()};
        if (b->rx_burst(&slot, 1) == 1) {
            got.emplace_back(slot.buf, slot.buf + slot.len);
        }
    }
    EXPECT_EQ(4u, b->stats().rx_oversize);
    ASSERT_EQ(1u, got.size());
    EXPECT_EQ(payloads[4], got[0]);
}

TEST(UdpLink, open__gro_whatever_the_datagram_size_unless_configured_off)
{
    std::unique_ptr<Link> big = open_link(config_for("127.0.0.1"));   // 65000 bytes
    UdpLinkConfig off = config_for("127.0.0.1", 1472);
    off.gro = false;
    std::unique_ptr<Link> no = open_link(off);
    ASSERT_TRUE(big && no);
    const int probe = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    const bool kernel_gro = probe >= 0 && ::setsockopt(probe, SOL_UDP, UDP_GRO, &one, sizeof(one)) == 0;
    if (probe >= 0) {
        ::close(probe);
    }
    if (!kernel_gro) {
        GTEST_SKIP() << "the kernel has no UDP_GRO";
    }
    EXPECT_TRUE(as_udp(*big).gro());
    EXPECT_FALSE(as_udp(*no).gro());
}

// --- peer sockets ----------------------------------------------------------------------------

// Receives exactly payloads (in order) at `link` from `src`; returns how many arrived.
size_t expect_from(Link &link, const std::vector<std::vector<uint8_t>> &payloads,
                   const LinkAddr &src)
{
    const auto got = receive(link, payloads.size(), link.mtu());
    EXPECT_EQ(payloads.size(), got.size());
    for (size_t i = 0; i < got.size() && i < payloads.size(); ++i) {
        EXPECT_EQ(payloads[i], got[i].data) << "datagram " << i;
        EXPECT_TRUE(got[i].src == src) << got[i].src.to_string() << " for " << src.to_string();
    }
    return got.size();
}

TEST(UdpLink, peer_sockets__a_busy_destination_gets_a_connected_socket_with_the_same_source)
{
    std::unique_ptr<Link> a = open_link(config_for("127.0.0.1"));
    std::unique_ptr<Link> b = open_link(config_for("127.0.0.1"));
    ASSERT_TRUE(a && b);
    EXPECT_EQ(0u, as_udp(*a).peer_sockets());

    // One short of the threshold: still the bound socket.
    const auto first = make_payloads(std::vector<uint32_t>(kUdpPeerSocketAfter - 1, 100), 21);
    ASSERT_EQ(first.size(), send_all(*a, first, b->local_addr()));
    EXPECT_EQ(0u, as_udp(*a).peer_sockets());
    expect_from(*b, first, a->local_addr());

    // The next datagram opens a's socket for b; b still sees a's address and port.
    const auto more = make_payloads(std::vector<uint32_t>(100, 200), 22);
    ASSERT_EQ(more.size(), send_all(*a, more, b->local_addr()));
    EXPECT_EQ(1u, as_udp(*a).peer_sockets());
    expect_from(*b, more, a->local_addr());
    EXPECT_EQ(0u, as_udp(*b).rx_peer_datagrams());   // b has no peer socket yet

    // Back from b: everything b sends reaches a's socket for b, before and after b opens its own.
    const auto back = make_payloads(std::vector<uint32_t>(kUdpPeerSocketAfter + 50, 300), 23);
    ASSERT_EQ(back.size(), send_all(*b, back, a->local_addr()));
    EXPECT_EQ(1u, as_udp(*b).peer_sockets());
    expect_from(*a, back, b->local_addr());
    EXPECT_EQ(back.size(), as_udp(*a).rx_peer_datagrams());

    // And a's traffic now lands on b's socket for a.
    ASSERT_EQ(more.size(), send_all(*a, more, b->local_addr()));
    expect_from(*b, more, a->local_addr());
    EXPECT_EQ(more.size(), as_udp(*b).rx_peer_datagrams());
    EXPECT_EQ(0u, a->stats().tx_errors + b->stats().tx_errors);
    EXPECT_EQ(0u, a->stats().rx_dropped + b->stats().rx_dropped);
}

TEST(UdpLink, peer_sockets__other_peers_still_reach_the_bound_socket)
{
    std::unique_ptr<Link> a = open_link(config_for("127.0.0.1"));
    std::unique_ptr<Link> b = open_link(config_for("127.0.0.1"));
    std::unique_ptr<Link> c = open_link(config_for("127.0.0.1"));
    ASSERT_TRUE(a && b && c);
    const auto to_b = make_payloads(std::vector<uint32_t>(kUdpPeerSocketAfter, 64), 24);
    ASSERT_EQ(to_b.size(), send_all(*a, to_b, b->local_addr()));
    ASSERT_EQ(1u, as_udp(*a).peer_sockets());
    expect_from(*b, to_b, a->local_addr());
    ASSERT_EQ(to_b.size(), send_all(*b, to_b, a->local_addr()));
    expect_from(*a, to_b, b->local_addr());
    const uint64_t on_peer_socket = as_udp(*a).rx_peer_datagrams();

    // c's datagrams go to a's bound socket, with c's address, while a is busy with b.
    const auto from_c = make_payloads(std::vector<uint32_t>(10, 500), 25);
    ASSERT_EQ(from_c.size(), send_all(*c, from_c, a->local_addr()));
    expect_from(*a, from_c, c->local_addr());
    EXPECT_EQ(on_peer_socket, as_udp(*a).rx_peer_datagrams());
    // Interleaved: both keep arriving, each in order, each with its own source.
    for (int round = 0; round < 5; ++round) {
        ASSERT_EQ(from_c.size(), send_all(*c, from_c, a->local_addr()));
        ASSERT_EQ(to_b.size(), send_all(*b, to_b, a->local_addr()));
        const auto got = receive(*a, from_c.size() + to_b.size(), a->mtu());
        ASSERT_EQ(from_c.size() + to_b.size(), got.size());
        size_t next_b = 0, next_c = 0;
        for (const Received &r : got) {
            if (r.src == b->local_addr()) {
                EXPECT_EQ(to_b[next_b++], r.data);
            } else {
                EXPECT_TRUE(r.src == c->local_addr()) << r.src.to_string();
                EXPECT_EQ(from_c[next_c++], r.data);
            }
        }
    }
}

TEST(UdpLink, peer_sockets__destinations_sent_to_in_turn_get_none)
{
    // a sends to b and c in turn (an alltoall's pattern), many times the threshold each / expect
    // no peer socket (its receives stay one call on the bound socket); then a run of the
    // threshold to b / expect b's socket
    std::unique_ptr<Link> a = open_link(config_for("127.0.0.1"));
    std::unique_ptr<Link> b = open_link(config_for("127.0.0.1"));
    std::unique_ptr<Link> c = open_link(config_for("127.0.0.1"));
    ASSERT_TRUE(a && b && c);
    const auto one = make_payloads(std::vector<uint32_t>(1, 64), 29);
    for (uint32_t i = 0; i < 2 * kUdpPeerSocketAfter; ++i) {
        ASSERT_EQ(1u, send_all(*a, one, b->local_addr()));
        ASSERT_EQ(1u, send_all(*a, one, c->local_addr()));
        ASSERT_EQ(1u, expect_from(*b, one, a->local_addr()));
        ASSERT_EQ(1u, expect_from(*c, one, a->local_addr()));
    }
    EXPECT_EQ(0u, as_udp(*a).peer_sockets());
    const auto run = make_payloads(std::vector<uint32_t>(kUdpPeerSocketAfter, 64), 30);
    ASSERT_EQ(run.size(), send_all(*a, run, b->local_addr()));
    EXPECT_EQ(1u, as_udp(*a).peer_sockets());
    expect_from(*b, run, a->local_addr());
}

TEST(UdpLink, peer_sockets__limited_by_the_config_and_off_at_zero)
{
    UdpLinkConfig one = config_for("127.0.0.1");
    one.peer_sockets = 1;
    UdpLinkConfig none = config_for("127.0.0.1");
    none.peer_sockets = 0;
    std::unique_ptr<Link> a = open_link(one);
    std::unique_ptr<Link> z = open_link(none);
    std::unique_ptr<Link> b = open_link(config_for("127.0.0.1"));
    std::unique_ptr<Link> c = open_link(config_for("127.0.0.1"));
    ASSERT_TRUE(a && z && b && c);
    const auto payloads = make_payloads(std::vector<uint32_t>(2 * kUdpPeerSocketAfter, 64), 26);
    for (Link *from : {a.get(), z.get()}) {
        for (Link *to : {b.get(), c.get()}) {
            ASSERT_EQ(payloads.size(), send_all(*from, payloads, to->local_addr()));
            expect_from(*to, payloads, from->local_addr());
        }
    }
    EXPECT_EQ(1u, as_udp(*a).peer_sockets());
    EXPECT_EQ(0u, as_udp(*z).peer_sockets());

    UdpLinkConfig too_many = config_for("127.0.0.1");
    too_many.peer_sockets = kUdpMaxPeerSockets + 1;
    std::unique_ptr<Link> bad;
    EXPECT_EQ(SRCNIC_ERR_INVALID_PARAM, UdpLink::open(too_many, &bad));
}

TEST(UdpLink, peer_sockets__port_stays_exclusive)
{
    // SO_REUSEPORT is set only after the bind, so another link still cannot take the port,
    // before or after a peer socket joined it.
    std::unique_ptr<Link> a = open_link(config_for("127.0.0.1"));
    std::unique_ptr<Link> b = open_link(config_for("127.0.0.1"));
    ASSERT_TRUE(a && b);
    UdpLinkConfig same = config_for("127.0.0.1");
    same.bind_addr = a->local_addr();
    std::unique_ptr<Link> second;
    EXPECT_EQ(SRCNIC_ERR_BUSY, UdpLink::open(same, &second));
    const auto payloads = make_payloads(std::vector<uint32_t>(kUdpPeerSocketAfter, 64), 27);
    ASSERT_EQ(payloads.size(), send_all(*a, payloads, b->local_addr()));
    ASSERT_EQ(1u, as_udp(*a).peer_sockets());
    EXPECT_EQ(SRCNIC_ERR_BUSY, UdpLink::open(same, &second));
    EXPECT_FALSE(second);
}

TEST(UdpLink, peer_sockets__a_peer_that_is_gone_is_counted_and_never_wedges)
{
    std::unique_ptr<Link> a = open_link(config_for("127.0.0.1"));
    std::unique_ptr<Link> b = open_link(config_for("127.0.0.1"));
    ASSERT_TRUE(a && b);
    const LinkAddr gone = b->local_addr();
    const auto payloads = make_payloads(std::vector<uint32_t>(kUdpPeerSocketAfter, 64), 28);
    ASSERT_EQ(payloads.size(), send_all(*a, payloads, gone));
    ASSERT_EQ(1u, as_udp(*a).peer_sockets());
    b.reset();
    // The kernel answers with ICMP port unreachable; the connected socket reports it as an
    // error on a later call. Every datagram still counts as accepted, receiving goes on.
    const auto one = make_payloads({64}, 29);
    for (int i = 0; i < 20; ++i) {
        ASSERT_EQ(1u, send_all(*a, one, gone));
        std::vector<uint8_t> buf(a->mtu());
        RxDatagram slot{buf.data(), a->mtu(), 0, LinkAddr()};
        EXPECT_EQ(0u, a->rx_burst(&slot, 1));
    }
    const LinkStats &s = a->stats();
    std::printf("tx_errors %llu rx_errors %llu\n", static_cast<unsigned long long>(s.tx_errors),
                static_cast<unsigned long long>(s.rx_errors));
    EXPECT_EQ(kUdpPeerSocketAfter + 20, s.tx_datagrams + s.tx_errors);
    EXPECT_GE(s.tx_errors + s.rx_errors, 1u);
}

// a receives a stream from b on its socket for b, always more than its slots hold; one datagram
// from c waits on the bound socket and must come within a bounded number of calls; and a second
// stream, from d on a socket of its own, must not wait behind b's. With gaps, each call that is
// a quiet socket's turn (every kUdpBusyPollEvery-th) comes after a gap, as on a loaded machine.
void expect_no_socket_starves(bool gaps)
{
    std::unique_ptr<Link> a = open_link(config_for("127.0.0.1"));
    std::unique_ptr<Link> b = open_link(config_for("127.0.0.1"));
    std::unique_ptr<Link> c = open_link(config_for("127.0.0.1"));
    std::unique_ptr<Link> d = open_link(config_for("127.0.0.1"));
    ASSERT_TRUE(a && b && c && d);
    const auto warm = make_payloads(std::vector<uint32_t>(kUdpPeerSocketAfter, 16), 32);
    for (Link *peer : {b.get(), d.get()}) {
        ASSERT_EQ(warm.size(), send_all(*a, warm, peer->local_addr()));
        expect_from(*peer, warm, a->local_addr());
    }
    ASSERT_EQ(2u, as_udp(*a).peer_sockets());
    const auto chunk = make_payloads(std::vector<uint32_t>(8, 16), 33);
    const auto marker = make_payloads({5}, 34);
    constexpr uint32_t kSlots = 4;
    std::vector<std::vector<uint8_t>> bufs(kSlots, std::vector<uint8_t>(a->mtu()));
    std::vector<RxDatagram> slots(kSlots);
    bool marker_seen = false;
    uint32_t from_d = 0;
    uint32_t calls = 0;
    ASSERT_EQ(1u, send_all(*c, marker, a->local_addr()));
    for (; calls < 8 * kUdpBusyPollEvery && (!marker_seen || from_d == 0); ++calls) {
        ASSERT_EQ(chunk.size(), send_all(*b, chunk, a->local_addr()));   // b's queue grows
        if (calls == 0) {
            ASSERT_EQ(chunk.size(), send_all(*d, chunk, a->local_addr()));
        }
        for (uint32_t i = 0; i < kSlots; ++i) {
            slots[i] = RxDatagram{bufs[i].data(), a->mtu(), 0, LinkAddr()};
        }
        if (gaps && (as_udp(*a).rx_calls() + 1) % kUdpBusyPollEvery == 0) {
            for (const uint64_t until = now_ns() + 200 * 1000; now_ns() < until;) {
            }
        }
        const uint32_t got = a->rx_burst(slots.data(), kSlots);
        for (uint32_t i = 0; i < got; ++i) {
            marker_seen = marker_seen || slots[i].src == c->local_addr();
            from_d += slots[i].src == d->local_addr() ? 1 : 0;
        }
    }
    std::printf("after %u calls: marker %s, %u from d\n", calls, marker_seen ? "seen" : "not seen",
                from_d);
    EXPECT_TRUE(marker_seen);
    EXPECT_GT(from_d, 0u);
    EXPECT_LE(calls, 3 * kUdpBusyPollEvery);
}

TEST(UdpLink, peer_sockets__a_stream_that_fills_every_slot_starves_no_socket)
{
    expect_no_socket_starves(false);
}

TEST(UdpLink, peer_sockets__a_stream_that_fills_every_slot_starves_no_socket_after_gaps)
{
    // A call after a gap polls every socket (a sweep), but only for the slots that the
    // aggregates staged from b leave, and they leave none: the quiet sockets' turns must
    // come all the same.
    expect_no_socket_starves(true);
}

// Receives with slots of the link's mtu; returns the sources of what one rx_burst call returned.
void count_calls(Link &link)
{
    UdpLink &udp = as_udp(link);
    g_counted.assign(1, udp.socket_fd());
    for (uint32_t i = 0; i < udp.peer_sockets(); ++i) {
        g_counted.push_back(udp.peer_socket_fd(i));
    }
    g_send_calls = 0;
    g_recv_calls = 0;
}

std::vector<LinkAddr> burst_sources(Link &link, uint32_t nslots)
{
    std::vector<std::vector<uint8_t>> bufs(nslots, std::vector<uint8_t>(link.mtu()));
    std::vector<RxDatagram> slots(nslots);
    for (uint32_t i = 0; i < nslots; ++i) {
        slots[i] = RxDatagram{bufs[i].data(), link.mtu(), 0, LinkAddr()};
    }
    const uint32_t got = link.rx_burst(slots.data(), nslots);
    std::vector<LinkAddr> out;
    for (uint32_t i = 0; i < got; ++i) {
        out.push_back(slots[i].src);
    }
    return out;
}

// a sends peer enough datagrams for a socket of its own (peer takes them all).
void give_peer_socket(Link &a, Link &peer, uint64_t seed)
{
    const auto warm = make_payloads(std::vector<uint32_t>(kUdpPeerSocketAfter, 16), seed);
    ASSERT_EQ(warm.size(), send_all(a, warm, peer.local_addr()));
    expect_from(peer, warm, a.local_addr());
}

// A call after a gap polls every socket (a sweep), a full ring of datagrams to itself too: the
// ring takes half the slots, and a datagram that waited on a quiet socket through the gap comes
// in that call (it is no quiet socket's turn by count).
TEST(UdpLink, self__a_full_ring_leaves_a_sweep_its_sockets)
{
    std::unique_ptr<Link> a = open_link(config_for("127.0.0.1"));
    std::unique_ptr<Link> b = open_link(config_for("127.0.0.1"));
    ASSERT_TRUE(a && b);
    ASSERT_NO_FATAL_FAILURE(give_peer_socket(*a, *b, 43));   // (a sweep needs two sockets)
    const auto to_self = make_payloads(std::vector<uint32_t>(kUdpSelfQueue, 24), 44);
    const auto from_b = make_payloads({16}, 45);
    ASSERT_EQ(kUdpSelfQueue, send_all(*a, to_self, a->local_addr()));
    ASSERT_EQ(1u, send_all(*b, from_b, a->local_addr()));
    constexpr uint32_t kSlots = 8;
    std::vector<std::vector<uint8_t>> bufs(kSlots, std::vector<uint8_t>(a->mtu()));
    std::vector<RxDatagram> slots(kSlots);
    for (uint32_t i = 0; i < kSlots; ++i) {
        slots[i] = RxDatagram{bufs[i].data(), a->mtu(), 0, LinkAddr()};
    }
    // b's datagram is in one of a's socket queues (loopback may hand it to the kernel's
    // softirq thread: wait for it, bounded).
    UdpLink &udp = as_udp(*a);
    struct pollfd pfd[2] = {{udp.socket_fd(), POLLIN, 0}, {udp.peer_socket_fd(0), POLLIN, 0}};
    ASSERT_LT(0, ::poll(pfd, 2, 10000)) << "b's datagram never reached a's sockets";
    // A call (the first one is always a sweep), then one that is no quiet socket's turn by
    // count, after a gap longer than kUdpSweepTicks at any clock rate.
    do {
        ASSERT_EQ(0u, a->rx_burst(slots.data(), 0));
    } while ((udp.rx_calls() + 1) % kUdpIdlePollEvery == 0);
    for (const uint64_t until = now_ns() + 200 * 1000; now_ns() < until;) {
    }
    const uint32_t got = a->rx_burst(slots.data(), kSlots);
    uint32_t from_self = 0, from_peer = 0;
    for (uint32_t i = 0; i < got; ++i) {
        from_self += slots[i].src == a->local_addr() ? 1 : 0;
        from_peer += slots[i].src == b->local_addr() ? 1 : 0;
    }
    EXPECT_EQ(1u, from_peer) << "the sweep after a gap did not poll the sockets";
    EXPECT_EQ(kSlots - kSlots / 2, from_self);
}

// A process sharing its CPU (a call after a gap) whose link found nothing in kUdpIdleSkipAfter
// calls in a row polls its sockets only every kUdpIdleSkipEvery-th call, and still finds a
// datagram within that many calls. (A gap of the machine's own between calls starts the count
// again: the attempt is repeated until one shows a skipped poll.)
TEST(UdpLink, idle__sharing_a_cpu_polls_every_few_calls_and_misses_nothing)
{
    // The datagram is in a's socket before the gap, and the mock makes the first
    // kUdpIdleSkipAfter receives after it find nothing: so no system call of the test's own
    // (a send, a poll) sits between the gap, the empty polls and the calls that must skip,
    // and only a preemption there (a second gap) can spoil an attempt.
    MockGuard guard;
    std::unique_ptr<Link> a = open_link(config_for("127.0.0.1"));
    std::unique_ptr<Link> b = open_link(config_for("127.0.0.1"));
    ASSERT_TRUE(a && b);
    std::vector<uint8_t> buf(a->mtu());
    RxDatagram slot{buf.data(), a->mtu(), 0, LinkAddr()};
    UdpLink &udp = as_udp(*a);
    bool skipped_with_data = false;
    for (int attempt = 0; attempt < 8 && !skipped_with_data; ++attempt) {
        const auto one = make_payloads({16}, 60 + attempt);
        ASSERT_EQ(1u, send_all(*b, one, a->local_addr()));
        struct pollfd pfd = {udp.socket_fd(), POLLIN, 0};
        ASSERT_EQ(1, ::poll(&pfd, 1, 10000)) << "b's datagram never reached a's socket";
        g_recv_plan = MockPlan();
        g_recv_plan.fd = udp.socket_fd();
        g_recv_plan.fails = kUdpIdleSkipAfter;
        g_recv_plan.err = EAGAIN;
        for (const uint64_t until = now_ns() + 200 * 1000; now_ns() < until;) {
        }
        for (uint32_t i = 0; i < kUdpIdleSkipAfter; ++i) {
            ASSERT_EQ(0u, a->rx_burst(&slot, 1));
        }
        ASSERT_EQ(kUdpIdleSkipAfter, g_recv_plan.failed) << "a call skipped before "
                                                         << kUdpIdleSkipAfter << " empty ones";
        const uint64_t before = a->stats().rx_polls_skipped;
        uint32_t calls = 0, got = 0;
        while (got == 0 && calls < 1000) {
            got = a->rx_burst(&slot, 1);
            ++calls;
        }
        ASSERT_EQ(1u, got);
        EXPECT_EQ(one[0], std::vector<uint8_t>(buf.data(), buf.data() + slot.len));
        EXPECT_LE(calls, kUdpIdleSkipEvery) << "attempt " << attempt;
        skipped_with_data = a->stats().rx_polls_skipped > before;
    }
    EXPECT_TRUE(skipped_with_data) << "no call skipped its poll after a gap and " << kUdpIdleSkipAfter
                                   << " empty ones";
}

// a gets a peer socket for each of b and d, and each of them has returned a datagram.
void two_active_peer_sockets(Link &a, Link &b, Link &d)
{
    for (Link *peer : {&b, &d}) {
        ASSERT_NO_FATAL_FAILURE(give_peer_socket(a, *peer, 35));
    }
    ASSERT_EQ(2u, as_udp(a).peer_sockets());
    const auto one = make_payloads({16}, 36);
    for (Link *peer : {&b, &d}) {
        ASSERT_EQ(1u, send_all(*peer, one, a.local_addr()));
        expect_from(a, one, peer->local_addr());
    }
}

// Calls rx_burst with one slot of `capacity` bytes until it returns a datagram or drops one
// as oversize (watchdog-bounded); the datagram's bytes, empty for an oversize one.
std::vector<uint8_t> one_datagram(Link &link, uint32_t capacity)
{
    std::vector<uint8_t> buf(capacity);
    const uint64_t oversize = link.stats().rx_oversize;
    const uint64_t deadline = now_ns() + kWatchdogNs;
    while (now_ns() < deadline) {
        RxDatagram slot{buf.data(), capacity, 0, LinkAddr()};
        if (link.rx_burst(&slot, 1) == 1) {
            return std::vector<uint8_t>(buf.begin(), buf.begin() + slot.len);
        }
        if (link.stats().rx_oversize != oversize) {
            return {};
        }
    }
    ADD_FAILURE() << "no datagram within the watchdog";
    return {};
}

TEST(UdpLink, peer_sockets__a_ping_pongs_single_calls_handle_errors_and_oversize)
{
    // A ping-pong's datagrams go by tx_burst's and rx_burst's inline cases (one datagram, a
    // busy peer socket): a hard error, a datagram longer than the slot and a send that would
    // block are handled there as on the other paths.
    MockGuard guard;
    std::unique_ptr<Link> a = open_link(config_for("127.0.0.1"));
    std::unique_ptr<Link> b = open_link(config_for("127.0.0.1"));
    ASSERT_TRUE(a && b);
    ASSERT_NO_FATAL_FAILURE(give_peer_socket(*a, *b, 40));
    ASSERT_NO_FATAL_FAILURE(give_peer_socket(*b, *a, 41));
    ASSERT_EQ(1u, as_udp(*a).peer_sockets());
    ASSERT_EQ(1u, as_udp(*b).peer_sockets());
    // As in a ping-pong, b finds its socket empty before each datagram (so that it asks for
    // one at a time), and its socket for a becomes the only active one: the bound socket's
    // last datagram is more than kUdpActiveCalls calls back.
    auto poll_empty = [&] {
        uint8_t buf[100];
        RxDatagram slot{buf, sizeof(buf), 0, LinkAddr()};
        EXPECT_EQ(0u, b->rx_burst(&slot, 1));
    };
    const auto warm = make_payloads({16}, 51);
    for (uint32_t i = 0; i <= kUdpActiveCalls / 2; ++i) {
        poll_empty();
        ASSERT_EQ(1u, send_all(*a, warm, b->local_addr()));
        ASSERT_EQ(warm[0], one_datagram(*b, 100));
    }
    const auto big = make_payloads({200}, 42);

    // Hard receive errors (a pending ICMP error) are counted; the datagram behind them still
    // arrives. Three rounds of each case: a call that also polls the quiet socket takes the
    // general path, at most one in three.
    for (uint64_t round = 0; round < 3; ++round) {
        const auto one = make_payloads({16}, 43 + round);
        const uint64_t errors = b->stats().rx_errors;
        poll_empty();
        g_recv_plan = MockPlan{as_udp(*b).peer_socket_fd(0), 0, 2, ECONNREFUSED, 0};
        ASSERT_EQ(1u, send_all(*a, one, b->local_addr()));
        EXPECT_EQ(one[0], one_datagram(*b, 100)) << "round " << round;
        EXPECT_EQ(errors + 2, b->stats().rx_errors) << "round " << round;
    }
    // Longer than the slot: dropped and counted; the next one arrives.
    g_recv_plan = MockPlan();
    for (uint64_t round = 0; round < 3; ++round) {
        const auto one = make_payloads({16}, 46 + round);
        const uint64_t oversize = b->stats().rx_oversize;
        poll_empty();
        ASSERT_EQ(1u, send_all(*a, big, b->local_addr()));
        EXPECT_TRUE(one_datagram(*b, 100).empty()) << "round " << round;
        EXPECT_EQ(oversize + 1, b->stats().rx_oversize) << "round " << round;
        poll_empty();
        ASSERT_EQ(1u, send_all(*a, one, b->local_addr()));
        EXPECT_EQ(one[0], one_datagram(*b, 100)) << "round " << round;
    }
    // A send that would block is not accepted; a hard error is (counted, the datagram lost).
    const auto lost = make_payloads({16}, 49);
    const auto kept = make_payloads({24}, 50);
    const uint64_t sent = a->stats().tx_datagrams;
    g_send_plan = MockPlan{as_udp(*a).peer_socket_fd(0), 0, 1, EAGAIN, 0};
    EXPECT_EQ(0u, send_all(*a, lost, b->local_addr()));
    g_send_plan = MockPlan{as_udp(*a).peer_socket_fd(0), 0, 1, ECONNREFUSED, 0};
    EXPECT_EQ(1u, send_all(*a, lost, b->local_addr()));
    EXPECT_EQ(1u, g_send_plan.failed);
    EXPECT_EQ(1u, a->stats().tx_errors);
    EXPECT_EQ(sent, a->stats().tx_datagrams);
    poll_empty();
    ASSERT_EQ(1u, send_all(*a, kept, b->local_addr()));
    EXPECT_EQ(sent + 1, a->stats().tx_datagrams);
    EXPECT_EQ(kept[0], one_datagram(*b, 100));
    poll_empty();   // nothing else arrived
}

TEST(UdpLink, peer_sockets__every_active_socket_is_polled_on_every_call)
{
    // A link with one busy socket polls just that one (rx_burst's short path); with two busy
    // ones it must still poll both on every call, not only the one that delivered last.
    std::unique_ptr<Link> a = open_link(config_for("127.0.0.1"));
    std::unique_ptr<Link> b = open_link(config_for("127.0.0.1"));
    std::unique_ptr<Link> d = open_link(config_for("127.0.0.1"));
    ASSERT_TRUE(a && b && d);
    two_active_peer_sockets(*a, *b, *d);
    const auto one = make_payloads({16}, 37);
    for (uint32_t call = 0; call < 3 * kUdpBusyPollEvery; ++call) {
        // Alternate who sends first, so that either socket is the one that delivered last.
        Link *first = call % 2 ? b.get() : d.get();
        Link *second = call % 2 ? d.get() : b.get();
        ASSERT_EQ(1u, send_all(*first, one, a->local_addr()));
        ASSERT_EQ(1u, send_all(*second, one, a->local_addr()));
        const std::vector<LinkAddr> got = burst_sources(*a, 4);
        ASSERT_EQ(2u, got.size()) << "call " << call;
        EXPECT_TRUE((got[0] == b->local_addr() && got[1] == d->local_addr()) ||
                    (got[0] == d->local_addr() && got[1] == b->local_addr()))
            << "call " << call;
    }
}

TEST(UdpLink, peer_sockets__a_quiet_socket_is_polled_beside_one_busy_peer)
{
    // A ping-pong keeps one peer socket busy (one datagram per call); a datagram from a third
    // link waits on the bound socket and comes within kUdpIdlePollEvery calls, also when it
    // arrives at any phase of the polling cycle.
    std::unique_ptr<Link> a = open_link(config_for("127.0.0.1"));
    std::unique_ptr<Link> b = open_link(config_for("127.0.0.1"));
    std::unique_ptr<Link> c = open_link(config_for("127.0.0.1"));
    ASSERT_TRUE(a && b && c);
    ASSERT_NO_FATAL_FAILURE(give_peer_socket(*a, *b, 38));
    ASSERT_EQ(1u, as_udp(*a).peer_sockets());
    const auto one = make_payloads({16}, 39);
    ASSERT_EQ(1u, send_all(*b, one, a->local_addr()));
    expect_from(*a, one, b->local_addr());   // a's socket for b is now the busy one
    for (uint32_t phase = 0; phase < kUdpIdlePollEvery; ++phase) {
        for (uint32_t i = 0; i < phase; ++i) {   // the busy peer alone
            ASSERT_EQ(1u, send_all(*b, one, a->local_addr()));
            ASSERT_EQ(1u, burst_sources(*a, 4).size());
        }
        ASSERT_EQ(1u, send_all(*c, one, a->local_addr()));
        // Each round: b's next datagram, then calls until the link has nothing more.
        uint32_t calls = 0;
        bool seen = false;
        while (!seen && calls < 4 * kUdpBusyPollEvery) {
            ASSERT_EQ(1u, send_all(*b, one, a->local_addr()));
            for (bool more = true; more && !seen;) {
                const std::vector<LinkAddr> got = burst_sources(*a, 4);
                ++calls;
                for (const LinkAddr &src : got) {
                    seen = seen || src == c->local_addr();
                }
                more = !got.empty();
            }
        }
        EXPECT_TRUE(seen) << "phase " << phase;
        EXPECT_LE(calls, 2 * kUdpIdlePollEvery) << "phase " << phase;
    }
}

TEST(UdpLink, peer_sockets__a_new_one_is_polled_on_every_call_from_its_opening)
{
    // The peer's datagrams go to a peer socket from the moment it is connected. While another
    // socket is active, a quiet one waits kUdpIdlePollEvery calls for its turn, so a new one
    // counts as active from its opening: the first datagram on it comes at the next call,
    // whatever the phase of the polling cycle (in a 256 KiB MPI ping-pong the two round trips
    // around a switch took 90-240 µs more than two others while it waited for its turn).
    for (uint32_t phase = 0; phase < kUdpIdlePollEvery; ++phase) {
        std::unique_ptr<Link> a = open_link(config_for("127.0.0.1"));
        std::unique_ptr<Link> b = open_link(config_for("127.0.0.1"));
        std::unique_ptr<Link> c = open_link(config_for("127.0.0.1"));
        ASSERT_TRUE(a && b && c);
        const auto one = make_payloads({16}, 60 + phase);
        ASSERT_EQ(1u, send_all(*c, one, a->local_addr()));
        expect_from(*a, one, c->local_addr());   // the bound socket is the active one
        ASSERT_NO_FATAL_FAILURE(give_peer_socket(*a, *b, 80 + phase));
        ASSERT_EQ(1u, as_udp(*a).peer_sockets());
        for (uint32_t i = 0; i < phase; ++i) {
            ASSERT_EQ(0u, burst_sources(*a, 4).size());
        }
        ASSERT_EQ(1u, send_all(*b, one, a->local_addr()));
        const std::vector<LinkAddr> got = burst_sources(*a, 4);
        ASSERT_EQ(1u, got.size()) << "phase " << phase;
        EXPECT_TRUE(got[0] == b->local_addr()) << "phase " << phase;
    }
}

TEST(UdpLink, peer_sockets__after_a_gap_every_socket_is_polled_at_once)
{
    // A caller that was away (off the CPU, or yielding it to other ranks between its progress
    // calls) finds what arrived meanwhile on every socket in its next call, not only on the
    // busy one: the quiet ones would each wait for their turn, kUdpIdlePollEvery calls apart,
    // and each of those calls may come as late again.
    std::unique_ptr<Link> a = open_link(config_for("127.0.0.1"));
    std::unique_ptr<Link> b = open_link(config_for("127.0.0.1"));
    std::unique_ptr<Link> c = open_link(config_for("127.0.0.1"));
    std::unique_ptr<Link> d = open_link(config_for("127.0.0.1"));
    ASSERT_TRUE(a && b && c && d);
    ASSERT_NO_FATAL_FAILURE(give_peer_socket(*a, *b, 52));
    ASSERT_NO_FATAL_FAILURE(give_peer_socket(*a, *d, 53));
    ASSERT_EQ(2u, as_udp(*a).peer_sockets());
    const auto one = make_payloads({16}, 54);
    for (uint32_t round = 0; round < 3; ++round) {
        // b alone is busy: a's sockets for d (which has never sent) and the bound one (c's)
        // are quiet.
        for (uint32_t i = 0; i <= kUdpActiveCalls; ++i) {
            ASSERT_EQ(1u, send_all(*b, one, a->local_addr()));
            expect_from(*a, one, b->local_addr());
        }
        for (Link *peer : {b.get(), c.get(), d.get()}) {
            ASSERT_EQ(1u, send_all(*peer, one, a->local_addr()));
        }
        // Well over kUdpSweepTicks at any counter rate from 33 MHz up.
        const uint64_t until = now_ns() + kNsPerMs;
        while (now_ns() < until) {
        }
        const std::vector<LinkAddr> got = burst_sources(*a, 4);
        ASSERT_EQ(3u, got.size()) << "round " << round;
        for (Link *peer : {b.get(), c.get(), d.get()}) {
            EXPECT_EQ(1, std::count(got.begin(), got.end(), peer->local_addr()))
                << "round " << round;
        }
    }
}

TEST(UdpLink, peer_sockets__a_burst_to_several_peers_is_one_system_call)
{
    // Datagrams to two destinations that have peer sockets, interleaved: one sendmmsg on the
    // bound socket, not one call per run of the same socket; each arrives from a's address.
    MockGuard guard;
    std::unique_ptr<Link> a = open_link(config_for("127.0.0.1"));
    std::unique_ptr<Link> b = open_link(config_for("127.0.0.1"));
    std::unique_ptr<Link> d = open_link(config_for("127.0.0.1"));
    ASSERT_TRUE(a && b && d);
    ASSERT_NO_FATAL_FAILURE(give_peer_socket(*a, *b, 55));
    ASSERT_NO_FATAL_FAILURE(give_peer_socket(*a, *d, 56));
    ASSERT_EQ(2u, as_udp(*a).peer_sockets());
    const auto payloads = make_payloads({16, 24, 32, 40}, 57);
    const LinkAddr to[] = {b->local_addr(), d->local_addr(), b->local_addr(), d->local_addr()};
    std::vector<struct iovec> iov(payloads.size());
    std::vector<TxDatagram> dgrams(payloads.size());
    for (size_t i = 0; i < payloads.size(); ++i) {
        iov[i] = {const_cast<uint8_t *>(payloads[i].data()), payloads[i].size()};
        dgrams[i] = TxDatagram{&iov[i], 1, to[i]};
    }
    count_calls(*a);
    ASSERT_EQ(4u, a->tx_burst(dgrams.data(), 4));
    EXPECT_EQ(1u, g_send_calls);
    expect_from(*b, {payloads[0], payloads[2]}, a->local_addr());
    expect_from(*d, {payloads[1], payloads[3]}, a->local_addr());
    // A burst to one of them alone still leaves by its peer socket.
    count_calls(*a);
    ASSERT_EQ(1u, send_all(*a, {payloads[0]}, b->local_addr()));
    EXPECT_EQ(1u, g_send_calls);
    EXPECT_EQ(0u, as_udp(*a).stats().tx_errors);
    expect_from(*b, {payloads[0]}, a->local_addr());
}

TEST(UdpLink, peer_sockets__empty_active_sockets_cost_one_poll_not_a_receive_each)
{
    // Three active sockets (all the link has) and nothing queued: a call asks poll(2) once
    // instead of receiving from each, and no quiet socket is left to take a turn.
    MockGuard guard;
    std::unique_ptr<Link> a = open_link(config_for("127.0.0.1"));
    std::unique_ptr<Link> b = open_link(config_for("127.0.0.1"));
    std::unique_ptr<Link> c = open_link(config_for("127.0.0.1"));
    std::unique_ptr<Link> d = open_link(config_for("127.0.0.1"));
    ASSERT_TRUE(a && b && c && d);
    two_active_peer_sockets(*a, *b, *d);
    const auto one = make_payloads({16}, 58);
    ASSERT_EQ(1u, send_all(*c, one, a->local_addr()));   // the bound socket is active too
    expect_from(*a, one, c->local_addr());
    count_calls(*a);
    for (uint32_t call = 0; call < 2 * kUdpBusyPollEvery; ++call) {
        EXPECT_EQ(0u, burst_sources(*a, 4).size());
    }
    EXPECT_EQ(0u, g_recv_calls);
    // What arrives on one of them is received with one polling call more. (If the test was
    // off its CPU just before the empty calls, those made the link skip polls as a process
    // sharing its CPU does, "Sharing a CPU" in udp_link.h: then up to kUdpIdleSkipEvery - 1
    // calls return at once first, each counted as skipped.)
    ASSERT_EQ(1u, send_all(*d, one, a->local_addr()));
    count_calls(*a);
    const uint64_t skipped_before = a->stats().rx_polls_skipped;
    std::vector<LinkAddr> got;
    uint32_t calls = 0;
    while (got.empty() && calls < kUdpIdleSkipEvery) {
        got = burst_sources(*a, 4);
        ++calls;
    }
    ASSERT_EQ(1u, got.size());
    EXPECT_TRUE(got[0] == d->local_addr());
    EXPECT_EQ(calls - 1, a->stats().rx_polls_skipped - skipped_before);
    EXPECT_LE(g_recv_calls, 2u);
}

TEST(UdpLink, peer_sockets__datagrams_queued_before_the_connect_keep_their_source)
{
    // Datagrams from other peers that reach a's port while a new peer socket is bound but not
    // yet connected may be queued on it (the kernel spreads them over the port's SO_REUSEPORT
    // group): each must still come out with its own sender's address, not the new socket's
    // peer's.
    std::unique_ptr<Link> a = open_link(config_for("127.0.0.1"));
    std::unique_ptr<Link> b = open_link(config_for("127.0.0.1"));
    ASSERT_TRUE(a && b);
    constexpr uint32_t kOthers = 8;
    std::vector<std::unique_ptr<Link>> others;
    for (uint32_t i = 0; i < kOthers; ++i) {
        others.push_back(open_link(config_for("127.0.0.1")));
        ASSERT_TRUE(others.back());
    }
    // Each sender's datagrams carry its index, three each.
    auto from = [](uint32_t i) { return std::vector<std::vector<uint8_t>>(3, {uint8_t(i), 0x5a}); };
    g_before_connect = [&] {
        for (uint32_t i = 0; i < kOthers; ++i) {
            EXPECT_EQ(3u, send_all(*others[i], from(i), a->local_addr()));
        }
    };
    const auto warm = make_payloads(std::vector<uint32_t>(kUdpPeerSocketAfter, 16), 59);
    ASSERT_EQ(warm.size(), send_all(*a, warm, b->local_addr()));
    ASSERT_FALSE(g_before_connect) << "no peer socket was connected";
    ASSERT_EQ(1u, as_udp(*a).peer_sockets());
    ASSERT_EQ(3u, send_all(*b, from(kOthers), a->local_addr()));   // and the peer's own
    const auto got = receive(*a, 3 * kOthers + 3, a->mtu());
    ASSERT_EQ(3 * kOthers + 3, got.size());
    for (const auto &d : got) {
        ASSERT_EQ(2u, d.data.size());
        const uint32_t i = d.data[0];
        ASSERT_LE(i, kOthers);
        const LinkAddr &sender = i < kOthers ? others[i]->local_addr() : b->local_addr();
        EXPECT_TRUE(d.src == sender) << "datagram of sender " << i << " came as from "
                                     << d.src.to_string();
    }
    expect_from(*b, warm, a->local_addr());
}

} // namespace
} // namespace srcnic
