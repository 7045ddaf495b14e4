// The backend seam: how a Nic moves datagrams, and nothing else. Protocol code sees only this
// header; a backend (udp_link, loopback_link) or decorator (faulty_link) implements it and
// contains no protocol logic.
#ifndef SRCNIC_LINK_LINK_H
#define SRCNIC_LINK_LINK_H

#include <srcnic/status.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <sys/uio.h>

namespace srcnic {

// A link-level address: an IPv4 or IPv6 address and a UDP port. The loopback link uses the
// same form (its addresses are never put on a wire). Plain data, comparable, hashable.
struct LinkAddr {
    // AF_INET and AF_INET6 as stored in family (static_asserted in link_addr.cc), so that this
    // header need not pull in the socket headers.
    static constexpr uint8_t kFamilyInet = 2;
    static constexpr uint8_t kFamilyInet6 = 10;

    uint8_t family = 0;   // AF_INET or AF_INET6; 0 = unset
    uint8_t pad_ = 0;
    uint16_t port = 0;    // UDP port, host byte order
    uint32_t scope_id = 0; // IPv6 scope (interface index) for link-local addresses, else 0
    uint8_t ip[16] = {};  // IPv4 in the first 4 bytes (network order), or IPv6 (network order)

    // Inline: every received packet is checked against its connection's address.
    bool operator==(const LinkAddr &o) const
    {
        if (family != o.family || port != o.port || scope_id != o.scope_id) {
            return false;
        }
        // Constant sizes: the compiler compares in registers instead of calling memcmp (this
        // runs for every datagram sent and received).
        if (family == kFamilyInet) {
            return std::memcmp(ip, o.ip, 4) == 0;
        }
        return family != kFamilyInet6 || std::memcmp(ip, o.ip, 16) == 0;
    }
    bool operator!=(const LinkAddr &o) const { return !(*this == o); }
    size_t hash() const;
    // "1.2.3.4:5000" or "[fe80::1%2]:5000"; "unset" for family 0.
    std::string to_string() const;
    // Parses "HOST:PORT" (numeric IPv4, or "[IPv6]:PORT" where the IPv6 address may end in
    // "%scope", an interface index or name); port may be 0. INVALID_PARAM on error, without
    // logging (the caller knows where the text came from); *addr_p is set only on success.
    static srcnic_status_t parse(const char *text, LinkAddr *addr_p);
    // Builds an address from numeric host text ("127.0.0.1", "::1", "fe80::1%2") and a port.
    static srcnic_status_t from_ip(const char *ip_text, uint16_t port, LinkAddr *addr_p);
};

// One datagram to send: a gather list (header + payload) and its destination. The link copies
// or transmits the bytes before tx_burst returns; it keeps no reference to them.
struct TxDatagram {
    const struct iovec *iov;   // gather list; iovcnt entries
    uint32_t iovcnt;           // at most kLinkMaxIov
    LinkAddr dst;              // destination
};

// One receive slot: the caller provides buf/capacity, the link fills len, src and data.
struct RxDatagram {
    uint8_t *buf;              // caller-owned buffer
    uint32_t capacity;         // bytes available at buf
    uint32_t len;              // out: datagram length (a longer datagram is dropped, not truncated)
    LinkAddr src;              // out: sender's address
    bool borrow = false;       // in: the link may lend the datagram where it already is in its
                               // own memory instead of copying it to buf
    const uint8_t *data = nullptr; // out: the datagram: buf, or (borrow) the link's memory,
                                   // valid until the caller's next rx_burst call
};

constexpr uint32_t kLinkMaxIov = 8;

// Counters every link keeps (all monotonic). A datagram accepted by tx_burst is counted in
// exactly one of tx_datagrams and tx_errors.
struct LinkStats {
    uint64_t tx_datagrams = 0;     // datagrams handed to the medium
    uint64_t tx_bytes = 0;         // bytes of those datagrams
    uint64_t tx_errors = 0;        // datagrams dropped on a hard send error or as invalid
                                   // (longer than mtu(), too many iov, unusable destination)
    uint64_t rx_datagrams = 0;     // datagrams returned by rx_burst
    uint64_t rx_bytes = 0;         // bytes of those datagrams
    uint64_t rx_oversize = 0;      // datagrams dropped: longer than the receive slot
    uint64_t rx_errors = 0;        // receive calls that failed with a hard error (e.g. an ICMP
                                   // error reported on the socket); the link keeps receiving
    uint64_t rx_dropped = 0;       // datagrams for this link that the medium dropped before
                                   // rx_burst saw them (receive queue full), as far as the
                                   // backend can tell
    uint64_t rx_polls_skipped = 0; // rx_burst calls that polled nothing: the process shares its
                                   // CPU and the link has been idle (UdpLink: "Sharing a CPU")
};

class Link {
public:
    virtual ~Link() = default;

    // Sends up to n datagrams in order. Returns how many were accepted (0..n); the rest were
    // not sent because the medium would block (the caller retries them later). A datagram
    // that fails with a hard error is counted in tx_errors and counts as accepted: the
    // reliability layer recovers it like a loss.
    virtual uint32_t tx_burst(const TxDatagram *dgrams, uint32_t n) = 0;

    // Receives up to n datagrams without blocking; returns how many slots were filled.
    virtual uint32_t rx_burst(RxDatagram *slots, uint32_t n) = 0;

    // The address peers send to (for UDP: the bound address with the actual port).
    virtual const LinkAddr &local_addr() const = 0;

    // Largest datagram, in bytes, that tx_burst accepts for every peer.
    virtual uint32_t mtu() const = 0;

    // Largest datagram, in bytes, that tx_burst accepts for peer: mtu(), or more where the
    // path to peer carries more (the UDP link: a peer at the link's own address is reached
    // over loopback, whatever the interface's MTU).
    virtual uint32_t path_mtu(const LinkAddr &peer) const
    {
        (void)peer;
        return mtu();
    }

    // Largest datagram, in bytes, that rx_burst can return: at least mtu(), and at least what
    // path_mtu() allows a peer of the same kind (a receive slot of this size holds whatever
    // such a peer sends).
    virtual uint32_t max_datagram() const { return mtu(); }

    // How many datagrams of `size` bytes the medium queues for this link before it drops more
    // (the UDP link: what its socket receive buffer holds), or UINT32_MAX where nothing but
    // the caller's reading bounds the queue. A peer like this one queues as many: a sender
    // that keeps more in flight to it only overflows that queue.
    virtual uint32_t rx_queue_capacity(uint32_t size) const
    {
        (void)size;
        return UINT32_MAX;
    }

    // A file descriptor that polls readable (level-triggered) while rx_burst would return
    // datagrams, or -1 if the link has none (then the caller must poll). A link may announce
    // datagrams on it only between rx_notify(true) and rx_notify(false). A link may create it
    // only when first asked for (the loopback link does: thousands of simulated NICs in one
    // process would otherwise hold thousands of descriptors nobody waits on); -1 then also
    // when that failed, which open_event_fd() tells apart.
    virtual int event_fd() const = 0;

    // Creates event_fd() if the link makes it on demand: OK once it exists or if the link has
    // none; NO_RESOURCE (out of descriptors) or IO_ERROR, logged, if it could not be created.
    virtual srcnic_status_t open_event_fd() { return SRCNIC_OK; }

    // Whether event_fd() must announce datagrams: on while a waiter may sleep on it, off while
    // the owner polls. Announcing can cost the medium work per datagram (the UDP link's
    // sockets wake an epoll set on every arrival), so a link may skip it while off. Turning it
    // on announces datagrams already queued. Default: always announced.
    virtual void rx_notify(bool on) { (void)on; }

    // True while the link holds received datagrams that event_fd() does not announce (already
    // taken from the medium, not yet returned by rx_burst): the caller must not sleep on the
    // fd but call rx_burst again.
    virtual bool rx_pending() const { return false; }

    virtual const LinkStats &stats() const = 0;
};

} // namespace srcnic

#endif
