// Unit tests for src/link/loopback_link.cc.
#include "link/loopback_link.h"
#include "open_fds.h"

#include "core/clock.h"
#include "core/random.h"

#include <gtest/gtest.h>

#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace srcnic {
namespace {

using test::open_fds;

// Longest any test waits, ns.
constexpr uint64_t kWatchdogNs = 10 * kNsPerSec;

std::shared_ptr<LoopbackFabric> make_fabric(uint32_t mtu, uint32_t depth)
{
    std::shared_ptr<LoopbackFabric> fabric;
    EXPECT_EQ(SRCNIC_OK, LoopbackFabric::create(mtu, depth, &fabric));
    return fabric;
}

std::unique_ptr<Link> make_link(LoopbackFabric &fabric, uint16_t port = 0)
{
    std::unique_ptr<Link> link;
    EXPECT_EQ(SRCNIC_OK, fabric.open_link(port, &link));
    return link;
}

bool readable_now(int fd)
{
    struct pollfd pfd = {fd, POLLIN, 0};
    return poll(&pfd, 1, 0) > 0 && (pfd.revents & POLLIN) != 0;
}

// Sends one datagram holding `text`; returns tx_burst's result.
uint32_t send_text(Link &from, const LinkAddr &to, const std::string &text)
{
    struct iovec iov = {const_cast<char *>(text.data()), text.size()};
    const TxDatagram dgram = {&iov, 1, to};
    return from.tx_burst(&dgram, 1);
}

// Takes up to n datagrams (slots of `capacity` bytes) in one rx_burst, as strings.
std::vector<std::string> take(Link &link, uint32_t n, uint32_t capacity = 256,
                              std::vector<LinkAddr> *srcs = nullptr)
{
    std::vector<std::vector<uint8_t>> bufs(n, std::vector<uint8_t>(capacity));
    std::vector<RxDatagram> slots(n);
    for (uint32_t i = 0; i < n; ++i) {
        slots[i] = RxDatagram{bufs[i].data(), capacity, 0, LinkAddr()};
    }
    const uint32_t got = link.rx_burst(slots.data(), n);
    std::vector<std::string> out;
    for (uint32_t i = 0; i < got; ++i) {
        out.emplace_back(reinterpret_cast<char *>(slots[i].buf), slots[i].len);
        if (srcs != nullptr) {
            srcs->push_back(slots[i].src);
        }
    }
    return out;
}

TEST(LoopbackFabric, create__invalid_parameters)
{
    std::shared_ptr<LoopbackFabric> fabric;
    EXPECT_EQ(SRCNIC_ERR_INVALID_PARAM, LoopbackFabric::create(0, 8, &fabric));
    EXPECT_EQ(SRCNIC_ERR_INVALID_PARAM, LoopbackFabric::create(kLoopbackMaxMtu + 1, 8, &fabric));
    EXPECT_EQ(SRCNIC_ERR_INVALID_PARAM, LoopbackFabric::create(1000, 0, &fabric));
    EXPECT_EQ(SRCNIC_ERR_INVALID_PARAM,
              LoopbackFabric::create(1000, kLoopbackMaxQueueDepth + 1, &fabric));
    EXPECT_EQ(SRCNIC_ERR_INVALID_PARAM, LoopbackFabric::create(1000, 8, nullptr));
    EXPECT_FALSE(fabric);
}

TEST(LoopbackFabric, open_link__ports_from_one_and_chosen_ports)
{
    auto fabric = make_fabric(1000, 8);
    ASSERT_TRUE(fabric);
    auto a = make_link(*fabric);
    auto b = make_link(*fabric);
    ASSERT_TRUE(a && b);
    EXPECT_TRUE(a->local_addr() == LoopbackFabric::addr_of(1));
    EXPECT_TRUE(b->local_addr() == LoopbackFabric::addr_of(2));
    EXPECT_EQ("127.0.0.1:1", a->local_addr().to_string());
    EXPECT_EQ(1000u, a->mtu());
    EXPECT_GE(a->event_fd(), 0);

    auto c = make_link(*fabric, 4791);
    ASSERT_TRUE(c);
    EXPECT_EQ(4791, c->local_addr().port);
    std::unique_ptr<Link> dup;
    EXPECT_EQ(SRCNIC_ERR_ALREADY_EXISTS, fabric->open_link(4791, &dup));
    EXPECT_FALSE(dup);
    EXPECT_EQ(SRCNIC_ERR_INVALID_PARAM, fabric->open_link(nullptr));
    EXPECT_EQ(3u, fabric->link_count());
}

TEST(LoopbackFabric, open_link__closing_removes_the_address)
{
    auto fabric = make_fabric(1000, 8);
    auto a = make_link(*fabric);
    auto b = make_link(*fabric);
    ASSERT_TRUE(a && b);
    const LinkAddr b_addr = b->local_addr();
    b.reset();
    EXPECT_EQ(1u, fabric->link_count());
    EXPECT_EQ(1u, send_text(*a, b_addr, "to nobody"));
    EXPECT_EQ(1u, fabric->stats().dropped_unknown_dst);
    EXPECT_EQ(1u, a->stats().tx_errors);
    // The port is free again, and the new link does not see the old datagram.
    b = make_link(*fabric, b_addr.port);
    ASSERT_TRUE(b);
    EXPECT_TRUE(take(*b, 4).empty());
}

TEST(LoopbackFabric, open_link__fabric_outlives_its_creator_reference)
{
    auto fabric = make_fabric(100, 4);
    auto a = make_link(*fabric);
    auto b = make_link(*fabric);
    fabric.reset();
    EXPECT_EQ(1u, send_text(*a, b->local_addr(), "still here"));
    EXPECT_EQ(std::vector<std::string>{"still here"}, take(*b, 4));
}

TEST(LoopbackLink, tx_burst__batch_and_gather_round_trip)
{
    auto fabric = make_fabric(1500, 64);
    auto a = make_link(*fabric);
    auto b = make_link(*fabric);
    ASSERT_TRUE(a && b);

    std::vector<std::string> texts;
    std::vector<struct iovec> iov;
    for (int i = 0; i < 40; ++i) {
        texts.push_back("datagram " + std::to_string(i) + std::string(i * 30, 'x'));
    }
    iov.reserve(texts.size() * 2);
    std::vector<TxDatagram> dgrams;
    for (auto &text : texts) {
        // Two pieces each: the first 5 bytes and the rest.
        iov.push_back({&text[0], 5});
        iov.push_back({&text[5], text.size() - 5});
        dgrams.push_back(TxDatagram{&iov[iov.size() - 2], 2, b->local_addr()});
    }
    EXPECT_EQ(40u, a->tx_burst(dgrams.data(), 40));

    std::vector<LinkAddr> srcs;
    const auto got = take(*b, 64, 1500, &srcs);
    ASSERT_EQ(texts, got);
    for (const auto &src : srcs) {
        EXPECT_TRUE(src == a->local_addr());
    }
    uint64_t bytes = 0;
    for (const auto &text : texts) {
        bytes += text.size();
    }
    EXPECT_EQ(40u, a->stats().tx_datagrams);
    EXPECT_EQ(bytes, a->stats().tx_bytes);
    EXPECT_EQ(40u, b->stats().rx_datagrams);
    EXPECT_EQ(bytes, b->stats().rx_bytes);
    EXPECT_EQ(40u, fabric->stats().delivered);
}

TEST(LoopbackLink, tx_burst__to_itself_and_empty_datagram)
{
    auto fabric = make_fabric(100, 4);
    auto a = make_link(*fabric);
    const TxDatagram empty = {nullptr, 0, a->local_addr()};
    EXPECT_EQ(1u, a->tx_burst(&empty, 1));
    EXPECT_EQ(1u, send_text(*a, a->local_addr(), "self"));
    EXPECT_EQ((std::vector<std::string>{"", "self"}), take(*a, 4));
}

TEST(LoopbackLink, tx_burst__unknown_destination_dropped_and_counted)
{
    auto fabric = make_fabric(100, 4);
    auto a = make_link(*fabric);
    auto b = make_link(*fabric);
    LinkAddr other_ip = b->local_addr();
    other_ip.ip[3] = 2; // 127.0.0.2
    LinkAddr v6;
    ASSERT_EQ(SRCNIC_OK, LinkAddr::from_ip("::1", b->local_addr().port, &v6));
    EXPECT_EQ(1u, send_text(*a, LoopbackFabric::addr_of(999), "x"));
    EXPECT_EQ(1u, send_text(*a, other_ip, "x"));
    EXPECT_EQ(1u, send_text(*a, v6, "x"));
    EXPECT_EQ(1u, send_text(*a, LoopbackFabric::addr_of(0), "x"));
    EXPECT_EQ(1u, send_text(*a, b->local_addr(), "arrives"));
    EXPECT_EQ(4u, fabric->stats().dropped_unknown_dst);
    EXPECT_EQ(4u, a->stats().tx_errors);
    EXPECT_EQ(1u, a->stats().tx_datagrams);
    EXPECT_EQ(std::vector<std::string>{"arrives"}, take(*b, 4));
}

TEST(LoopbackLink, tx_burst__invalid_datagrams_counted)
{
    auto fabric = make_fabric(10, 4);
    auto a = make_link(*fabric);
    auto b = make_link(*fabric);
    EXPECT_EQ(1u, send_text(*a, b->local_addr(), std::string(11, 'x')));
    char byte = 'y';
    struct iovec many[kLinkMaxIov + 1];
    for (auto &iov : many) {
        iov = {&byte, 1};
    }
    const TxDatagram dgram = {many, kLinkMaxIov + 1, b->local_addr()};
    EXPECT_EQ(1u, a->tx_burst(&dgram, 1));
    EXPECT_EQ(1u, send_text(*a, b->local_addr(), std::string(10, 'z')));
    EXPECT_EQ(2u, a->stats().tx_errors);
    EXPECT_EQ(std::vector<std::string>{std::string(10, 'z')}, take(*b, 4));
}

TEST(LoopbackLink, rx_burst__queue_overflow_dropped_and_counted)
{
    auto fabric = make_fabric(100, 4);
    auto a = make_link(*fabric);
    auto b = make_link(*fabric);
    for (int i = 0; i < 10; ++i) {
        EXPECT_EQ(1u, send_text(*a, b->local_addr(), std::to_string(i)));
    }
    EXPECT_EQ(10u, a->stats().tx_datagrams);
    EXPECT_EQ(6u, b->stats().rx_dropped);
    EXPECT_EQ(6u, fabric->stats().dropped_queue_full);
    EXPECT_EQ(4u, fabric->stats().delivered);
    EXPECT_EQ((std::vector<std::string>{"0", "1", "2", "3"}), take(*b, 10));
    // Room again, and the ring wraps correctly.
    for (int i = 10; i < 16; ++i) {
        EXPECT_EQ(1u, send_text(*a, b->local_addr(), std::to_string(i)));
        EXPECT_EQ(std::vector<std::string>{std::to_string(i)}, take(*b, 10));
    }
    EXPECT_EQ(6u, b->stats().rx_dropped);
}

TEST(LoopbackLink, rx_burst__oversize_dropped_and_counted)
{
    auto fabric = make_fabric(100, 8);
    auto a = make_link(*fabric);
    auto b = make_link(*fabric);
    send_text(*a, b->local_addr(), "short");
    send_text(*a, b->local_addr(), std::string(50, 'L'));
    send_text(*a, b->local_addr(), "tiny");
    EXPECT_EQ((std::vector<std::string>{"short", "tiny"}), take(*b, 8, 10));
    EXPECT_EQ(1u, b->stats().rx_oversize);
    EXPECT_EQ(2u, b->stats().rx_datagrams);
}

TEST(LoopbackLink, event_fd__level_semantics)
{
    auto fabric = make_fabric(100, 8);
    auto a = make_link(*fabric);
    auto b = make_link(*fabric);
    EXPECT_FALSE(readable_now(b->event_fd()));
    send_text(*a, b->local_addr(), "1");
    EXPECT_TRUE(readable_now(b->event_fd()));
    // Stays signalled however often it is polled, while something is queued.
    EXPECT_TRUE(readable_now(b->event_fd()));
    send_text(*a, b->local_addr(), "2");
    EXPECT_EQ(1u, take(*b, 1).size());
    EXPECT_TRUE(readable_now(b->event_fd()));
    EXPECT_EQ(1u, take(*b, 1).size());
    EXPECT_FALSE(readable_now(b->event_fd()));
    // An empty rx_burst leaves it clear; a new datagram sets it again.
    EXPECT_EQ(0u, take(*b, 1).size());
    EXPECT_FALSE(readable_now(b->event_fd()));
    send_text(*a, b->local_addr(), "3");
    EXPECT_TRUE(readable_now(b->event_fd()));
    EXPECT_FALSE(readable_now(a->event_fd()));
}

TEST(LoopbackLink, event_fd__created_when_first_asked_and_signalled_for_what_is_queued)
{
    auto fabric = make_fabric(100, 8);
    const size_t before = open_fds();
    auto a = make_link(*fabric);
    auto b = make_link(*fabric);
    send_text(*a, b->local_addr(), "1");
    EXPECT_EQ(before, open_fds()) << "a link nobody waits on holds no descriptor";
    // Asked for while a datagram is queued: readable at once, and level-triggered from then on.
    EXPECT_EQ(SRCNIC_OK, b->open_event_fd());
    EXPECT_EQ(before + 1, open_fds());
    EXPECT_TRUE(readable_now(b->event_fd()));
    EXPECT_EQ(before + 1, open_fds()) << "created once";
    EXPECT_EQ(1u, take(*b, 1).size());
    EXPECT_FALSE(readable_now(b->event_fd()));
    send_text(*a, b->local_addr(), "2");
    EXPECT_TRUE(readable_now(b->event_fd()));
    EXPECT_EQ(before + 1, open_fds());
}

TEST(LoopbackLink, tx_burst__many_links_in_a_ring)
{
    constexpr uint32_t kLinks = 2000;
    auto fabric = make_fabric(64, 4);
    std::vector<std::unique_ptr<Link>> links;
    for (uint32_t i = 0; i < kLinks; ++i) {
        links.push_back(make_link(*fabric));
        ASSERT_TRUE(links.back());
    }
    EXPECT_EQ(kLinks, fabric->link_count());
    for (uint32_t i = 0; i < kLinks; ++i) {
        ASSERT_EQ(1u, send_text(*links[i], links[(i + 1) % kLinks]->local_addr(),
                                "from " + std::to_string(i)));
    }
    for (uint32_t i = 0; i < kLinks; ++i) {
        EXPECT_EQ(std::vector<std::string>{"from " + std::to_string((i + kLinks - 1) % kLinks)},
                  take(*links[i], 4));
    }
    EXPECT_EQ(kLinks, fabric->stats().delivered);
    links.clear();
    EXPECT_EQ(0u, fabric->link_count());
}

// What one side of the two-thread test has received.
struct StreamResult {
    std::atomic<uint32_t> received{0}; // datagrams received (read by the peer's thread)
    int64_t last_seen = -1;            // last sequence number received
    bool in_order = true;              // sequence numbers strictly increasing
    bool timed_out = false;            // the watchdog fired
};

// Takes up to 8 numbered datagrams from link into *result; returns how many.
uint32_t take_numbered(Link *link, StreamResult *result)
{
    uint8_t bufs[8][64];
    RxDatagram slots[8];
    for (int i = 0; i < 8; ++i) {
        slots[i] = RxDatagram{bufs[i], sizeof(bufs[i]), 0, LinkAddr()};
    }
    const uint32_t got = link->rx_burst(slots, 8);
    for (uint32_t i = 0; i < got; ++i) {
        uint32_t value = 0;
        result->in_order = result->in_order && slots[i].len == sizeof(value);
        std::memcpy(&value, slots[i].buf, sizeof(value));
        result->in_order = result->in_order && static_cast<int64_t>(value) > result->last_seen;
        result->last_seen = value;
    }
    result->received += got;
    return got;
}

// Two threads, each with its own link, stream numbered datagrams to each other while a third
// opens, uses and closes links. Each sender keeps at most a queue's worth in flight (it
// watches how many its peer has received), so nothing may be dropped: every datagram arrives
// once and in order.
TEST(LoopbackLink, tx_burst__two_threads_stream_both_ways)
{
    constexpr uint32_t kCount = 20000;
    constexpr uint32_t kDepth = 32;
    auto fabric = make_fabric(64, kDepth);
    auto a = make_link(*fabric);
    auto b = make_link(*fabric);
    ASSERT_TRUE(a && b);

    auto run = [](Link *self, LinkAddr peer, StreamResult *mine, const StreamResult *theirs) {
        const uint64_t deadline = now_ns() + kWatchdogNs;
        uint32_t next_send = 0;
        uint32_t seq[8];
        struct iovec iov[8];
        TxDatagram dgrams[8];
        while (next_send < kCount || mine->received < kCount) {
            if (now_ns() > deadline) {
                mine->timed_out = true;
                return;
            }
            const uint32_t window = theirs->received.load() + kDepth;
            uint32_t n = 0;
            for (; n < 8 && next_send < kCount && next_send < window; ++n, ++next_send) {
                seq[n] = next_send;
                iov[n] = {&seq[n], sizeof(seq[n])};
                dgrams[n] = TxDatagram{&iov[n], 1, peer};
            }
            if (self->tx_burst(dgrams, n) != n) {
                mine->in_order = false;
            }
            // Give the CPU away when stuck waiting for the peer (tests may share few CPUs).
            if (take_numbered(self, mine) == 0 && n == 0) {
                std::this_thread::yield();
            }
        }
    };
    std::atomic<bool> stop(false);
    std::atomic<uint32_t> churned(0);
    auto churn = [&fabric, &stop, &churned]() {
        for (int i = 0; i < 20000 && !stop.load(); ++i) {
            std::unique_ptr<Link> link;
            if (fabric->open_link(&link) != SRCNIC_OK ||
                send_text(*link, link->local_addr(), "churn") != 1 ||
                take(*link, 4) != std::vector<std::string>{"churn"}) {
                return;
            }
            ++churned;
            std::this_thread::yield();
        }
    };

    StreamResult ra, rb;
    std::thread tc(churn);
    // The streams start once the churn is under way (on a fast machine they may otherwise end
    // before the churn thread first runs: CI saw 0 links churned), within the watchdog.
    const uint64_t churn_deadline = now_ns() + kWatchdogNs;
    while (churned.load() == 0 && now_ns() < churn_deadline) {
        std::this_thread::yield();
    }
    std::thread ta(run, a.get(), b->local_addr(), &ra, &rb);
    std::thread tb(run, b.get(), a->local_addr(), &rb, &ra);
    ta.join();
    tb.join();
    stop = true;
    tc.join();

    std::printf("a received %u, b received %u, %u links opened and closed meanwhile\n",
                ra.received.load(), rb.received.load(), churned.load());
    EXPECT_FALSE(ra.timed_out);
    EXPECT_FALSE(rb.timed_out);
    EXPECT_TRUE(ra.in_order);
    EXPECT_TRUE(rb.in_order);
    EXPECT_EQ(kCount, ra.received.load());
    EXPECT_EQ(kCount, rb.received.load());
    EXPECT_EQ(0u, a->stats().rx_dropped);
    EXPECT_EQ(0u, b->stats().rx_dropped);
    EXPECT_EQ(kCount, a->stats().tx_datagrams);
    EXPECT_EQ(kCount, b->stats().tx_datagrams);
    EXPECT_GT(churned.load(), 0u);
    EXPECT_EQ(2u, fabric->link_count());
}

} // namespace
} // namespace srcnic
