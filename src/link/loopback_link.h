// The loopback backend: an in-memory fabric that carries datagrams between links of one
// process, for tests and for simulating many NICs without sockets.
//
// Fabric. A LoopbackFabric is created with an MTU and a receive queue depth that all of its
// links share, and hands out links with open_link(). Every link has the address
// 127.0.0.1:PORT with a port unique within the fabric (handed out from 1 upwards, or chosen by
// the caller); the address is never put on a wire, so several fabrics, and UDP sockets, may use
// the same ports. Closing (destroying) a link removes its address: later datagrams to it are
// dropped as sent to an unknown address. Links hold a reference to the fabric, so it lives
// until the last of them is closed.
//
// Delivery. tx_burst copies each datagram (its gather list) into a free buffer of the
// destination's receive queue before it returns, so it never blocks and always accepts all n.
// A datagram to an unknown address, longer than the MTU or with more than kLinkMaxIov iov
// entries is dropped and counted in the sender's tx_errors (and, for an unknown address, in
// the fabric's dropped_unknown_dst). A datagram that finds the destination's queue full is
// dropped there, as a UDP socket with a full receive buffer would: the sender counts it in
// tx_datagrams, the destination in rx_dropped, the fabric in dropped_queue_full. rx_burst
// copies datagrams out in the order they were queued; one longer than the caller's slot is
// dropped and counted in rx_oversize.
//
// Memory. Each link preallocates its queue: queue_depth buffers of mtu bytes, plus the
// length and source of each. Nothing is allocated per datagram. Size a fabric for thousands
// of links accordingly (4096-byte MTU and 64 entries: 256 KiB per link; pages that are never
// written are not backed by memory).
//
// Event fd. Each link's event_fd() is an eventfd that polls readable exactly while its queue
// is non-empty (level-triggered): the sender that makes the queue non-empty signals it and
// the rx_burst that empties it clears it, both under the queue's lock. Poll it; never read it.
// It is created at the first event_fd() or open_event_fd() call, readable at once if
// datagrams are already queued: a link nobody waits on holds no descriptor, so one process can
// simulate tens of thousands of NICs within its descriptor limit.
//
// Threads. Links of one fabric may be used from different threads (each link by one thread at
// a time). The fabric's address table is guarded by a reader-writer lock, taken shared once
// per tx_burst and exclusively to open or close a link; each receive queue by its own mutex,
// taken once per run of consecutive datagrams to the same destination and once per rx_burst.
#ifndef SRCNIC_LINK_LOOPBACK_LINK_H
#define SRCNIC_LINK_LOOPBACK_LINK_H

#include "link/link.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <shared_mutex>

namespace srcnic {

// Largest loopback MTU, bytes: the largest IPv4 UDP payload, so that nothing a test does over
// the loopback fabric is impossible over UDP.
constexpr uint32_t kLoopbackMaxMtu = 65507;
// Largest receive queue, datagrams per link.
constexpr uint32_t kLoopbackMaxQueueDepth = 1u << 20;

// A snapshot of a fabric's counters (each monotonic).
struct LoopbackFabricStats {
    uint64_t delivered = 0;            // datagrams placed in a destination's receive queue
    uint64_t dropped_unknown_dst = 0;  // datagrams dropped: no link has the destination address
    uint64_t dropped_queue_full = 0;   // datagrams dropped: the destination's queue was full
};

class LoopbackLink;

class LoopbackFabric : public std::enable_shared_from_this<LoopbackFabric> {
public:
    // Creates a fabric whose links carry datagrams of up to mtu bytes (1..kLoopbackMaxMtu)
    // and queue up to queue_depth of them each (1..kLoopbackMaxQueueDepth). *fabric_p is set
    // only on success.
    static srcnic_status_t create(uint32_t mtu, uint32_t queue_depth,
                                  std::shared_ptr<LoopbackFabric> *fabric_p);

    ~LoopbackFabric();
    LoopbackFabric(const LoopbackFabric &) = delete;
    LoopbackFabric &operator=(const LoopbackFabric &) = delete;

    // Opens a link on the next free port (NO_RESOURCE when all 65535 are in use).
    srcnic_status_t open_link(std::unique_ptr<Link> *link_p);
    // Opens a link on the given port (1..65535; ALREADY_EXISTS if a link has it); port 0 is
    // the same as open_link(link_p).
    srcnic_status_t open_link(uint16_t port, std::unique_ptr<Link> *link_p);

    // The address a link on port has (127.0.0.1:port).
    static LinkAddr addr_of(uint16_t port);

    // MTU of every link, bytes.
    uint32_t mtu() const { return mtu_; }
    // Receive queue capacity of every link, datagrams.
    uint32_t queue_depth() const { return queue_depth_; }
    // Links currently open.
    uint32_t link_count() const;
    // The fabric's counters, read without stopping senders.
    LoopbackFabricStats stats() const;

private:
    friend class LoopbackLink;

    LoopbackFabric(uint32_t mtu, uint32_t queue_depth);
    // Delivers dgrams[0..n) from the link `from` (tx_burst of every link); returns n.
    uint32_t deliver(LoopbackLink *from, const TxDatagram *dgrams, uint32_t n);
    // Removes a closing link's address.
    void remove(uint16_t port);

    const uint32_t mtu_;                  // largest datagram, bytes
    const uint32_t queue_depth_;          // receive queue capacity per link, datagrams
    mutable std::shared_mutex mutex_;     // guards ports_, next_port_, link_count_
    std::unique_ptr<LoopbackLink *[]> ports_; // link by port (65536 entries; 0 never used)
    uint32_t next_port_ = 1;              // where the search for a free port starts
    uint32_t link_count_ = 0;             // links open
    std::atomic<uint64_t> delivered_{0};           // see LoopbackFabricStats
    std::atomic<uint64_t> dropped_unknown_dst_{0}; // see LoopbackFabricStats
    std::atomic<uint64_t> dropped_queue_full_{0};  // see LoopbackFabricStats
};

} // namespace srcnic

#endif
