// The UDP backend: one bound non-blocking datagram socket per link, plus connected ones for its
// busiest peers (see "Peer sockets"), batched with sendmmsg/recvmmsg.
//
// Address. The socket is bound to UdpLinkConfig::bind_addr (IPv4 or IPv6, a specific local
// address or the wildcard; port 0 picks an ephemeral port) and local_addr() reports the bound
// address with the actual port. An IPv6 socket is IPV6_V6ONLY, so an IPv6 link never sees
// IPv4-mapped peers and every LinkAddr it returns has the family it was opened with; a
// datagram addressed to the other family counts as invalid (tx_errors).
//
// MTU. mtu() is the largest UDP payload, in bytes. With UdpLinkConfig::mtu = 0 it is chosen so
// that a datagram is never fragmented by IP:
//   - a specific non-loopback address: the MTU of the interface that holds it minus the IP
//     and UDP headers (28 bytes for IPv4, 48 for IPv6);
//   - a loopback address (127.0.0.0/8, ::1, or any address on a loopback interface):
//     kUdpLoopbackMtu = 65000 (or the loopback interface MTU minus headers, if that is
//     smaller). The usual loopback MTU (65536) would allow 65507/65487, but one value for
//     both families keeps tests alike, and the margin of about 500 bytes leaves room for IP
//     options or extension headers without crossing the 64 KiB IP length limit;
//   - the wildcard address: the smallest MTU, minus headers, of the interfaces that are up,
//     not loopback and have an address of the family (the route to a peer is not known when
//     binding, so take the one that fits everywhere); kUdpLoopbackMtu if there is none.
// A configured mtu is accepted up to the protocol limit (kUdpMaxMtuIpv4, kUdpMaxMtuIpv6),
// further capped for a specific address by its interface's MTU minus headers (for the
// wildcard the route is unknown, so only the protocol limit applies); a larger one is
// INVALID_PARAM, with a message that gives the limit.
// Local peers. Other processes of the same host that bind the same non-loopback address (the
// ranks of a node on one interface) are reached over the loopback interface, whatever the
// interface's MTU: with the automatic mtu, path_mtu() gives a peer at the bound address (any
// port) the loopback size as above, and every receive slot must hold that much
// (max_datagram()). Four MPI ranks on one node exchanging 1 MiB messages over a 1500-byte
// interface took half the time with it (perf/results/bed-compare/NOTES.md). A configured
// mtu applies to every peer.
//
// Buffers. Both socket buffers are set to UdpLinkConfig::sock_buf_size with SO_SNDBUFFORCE /
// SO_RCVBUFFORCE (which ignore net.core.[wr]mem_max but need CAP_NET_ADMIN) and, when that is
// not permitted, with SO_SNDBUF / SO_RCVBUF (capped by the sysctls). sndbuf() and rcvbuf()
// report what the kernel granted, as getsockopt reads it (Linux doubles the request to cover
// its bookkeeping), so a deployment can see a cap it hit.
//
// Sending. tx_burst builds mmsghdrs that point at the caller's iovecs (no copy; only a lone
// small datagram is copied, see "System calls") and sends up to batch_size of them per
// sendmmsg call, all on one socket: a peer socket while every datagram of the batch goes to
// its peer, the bound socket once the batch holds datagrams for two sockets (see "Peer
// sockets"). With segmentation offload (UDP_SEGMENT, Linux 4.18
// and later; UdpLinkConfig::gso, on by default) consecutive datagrams to the same destination
// whose sizes are equal (the last may be shorter) go as one mmsghdr, up to kUdpGsoMaxSegments
// datagrams and kUdpGsoMaxBytes: the kernel cuts it into the same datagrams on the wire (or at
// the receiving socket), so the stack is traversed once per group instead of once per
// datagram. A kernel that refuses a group (EINVAL, EIO, ENOPROTOOPT: no checksum offload on
// the route, a path MTU below the segment) turns the offload off for the link, logged once,
// and the datagrams are sent one by one. A datagram that is invalid (longer than
// mtu(), more than kLinkMaxIov entries, wrong family) or fails with a hard error (any errno
// but EAGAIN/EWOULDBLOCK/EINTR, e.g. EMSGSIZE, ENOBUFS, ENETUNREACH, or ECONNREFUSED from an
// earlier ICMP error) is counted in tx_errors, logged (rate-limited; at debug level for the
// ICMP errors of a peer that is gone or out of reach, which are part of a peer's failure that
// the Nic reports to its consumer, at warn otherwise) and counts as accepted: the reliability
// layer recovers it like a loss. Receive errors are counted in rx_errors and logged alike. EAGAIN/EWOULDBLOCK/EINTR ends the burst and
// tx_burst returns the number accepted before it. Note that on Linux a UDP send over loopback
// never blocks: a peer that does not read makes the kernel drop datagrams at the receiver
// (visible there as rx_dropped), not block the sender.
//
// Receive offload. With UdpLinkConfig::gro (on by default) the sockets accept aggregates
// (UDP_GRO): the kernel hands several
// consecutive datagrams of one sender and size to one receive call, as it received them from
// a sender that used segmentation offload, instead of cutting them up and queueing each. The
// link receives aggregates into kUdpGroBuffers staging buffers of 64 KiB and copies each
// datagram into a caller slot, or, for a slot that may borrow (RxDatagram::borrow), lends it
// where it is: a call that has lent stages no more aggregates, so what it lent stays intact
// until the next rx_burst. Datagrams that find no free slot stay staged for the next rx_burst
// (rx_pending() is true meanwhile: the socket's fd does not announce them). The kernel counts
// an aggregate it drops for want of receive buffer as one drop (LinkStats::rx_dropped). The
// staging buffers (512 KiB) are touched when the link opens: the page faults of the kernel's
// first copies into them were 64 of the 80 a side in a pair's first 256 KiB MPI round trip, some
// 150 µs of it (perf/results/2026-12-02-lat-warmup/NOTES.md).
// Aggregates from every socket share the staging buffers, a ring in arrival order: while
// those of active sockets keep every slot filled, a quiet socket's turn (see "Polling several
// sockets") stages its own behind them as soon as a buffer is free. Loopback-sized
// datagrams take the same way: their payload is lent in place as well, and a run of small
// messages to a local peer arrives as one aggregate where it would otherwise be cut up and
// queued datagram by datagram (osu_bw up to 2 KiB on loopback ran at twice the rate with it,
// perf/results/2026-11-28-loopback-gro/NOTES.md).
//
// System calls. A single datagram of at most kUdpCopySendMax bytes is copied into one buffer
// and goes with sendto (send on a peer socket), cheaper than sendmsg with a gather list; when
// tx_burst is given just that datagram it skips the batch's message headers too. Other
// single messages go with sendmsg, more with sendmmsg. Without receive aggregation, a receive
// asks for one datagram (recvfrom; recv on a peer socket) while the previous receive on that
// socket found at most one (idle polls, ping-pongs: an empty recvfrom costs less than an empty
// recvmsg or recvmmsg), and for a batch with recvmmsg after two receives in a row found
// datagrams or a batch found several. With it, a receive asks for as many aggregates as there
// are free staging buffers (recvmmsg; recvmsg for one).
//
// Peer sockets. A datagram to an unconnected UDP socket costs the kernel a route lookup per
// send, and the receiver needs the sender's address from every receive call; a connected socket
// caches the route and is told the address once. So a destination that has been sent
// kUdpPeerSocketAfter datagrams in a row gets a socket of its own (up to
// UdpLinkConfig::peer_sockets of them): a busy peer that has the link to itself (a ping-pong, a
// stream). Destinations sent to in turn (collectives: an alltoall's burst goes to every peer)
// get none: each peer socket is a further receive call for every receiving pass, where the bound
// socket alone takes every peer's datagrams in one recvmmsg, and with ranks sharing CPUs that
// cost more than the route lookups saved (perf/results/2026-11-28-peer-runs). A socket is
// bound to the link's address and port with SO_REUSEPORT and connected to the peer. The
// peer still sees the same source address and port, and the kernel delivers that peer's
// datagrams to the connected socket (it prefers a connected socket to the bound one), so the link
// receives from all its sockets. A burst to several destinations still leaves in one sendmmsg,
// on the bound socket, which can address them all: the route lookups the peer sockets would
// have saved cost less than a system call per further socket (an alltoall's burst goes to
// every peer). Between its bind and its connect a new socket is an unconnected member of the
// port's SO_REUSEPORT group, and the kernel queues on it datagrams from any peer (8 of 20 sent
// in that window, in a test here); so until a receive finds it empty, the link reads the
// source of each datagram it receives there, as on the bound socket, instead of taking it for
// the connected peer's (such a datagram was dropped as DROP_WRONG_PEER by the Nic and
// retransmitted: in 8 of 40 4-rank alltoall runs before, none of 12 since). The bound socket is bound without SO_REUSEPORT, which the link
// sets only after the bind: a port that is in use still fails the bind (BUSY), and an ephemeral
// port is never one that another socket holds. A socket that failed to open is logged once and
// its destination stays on the bound socket. A connected socket reports ICMP errors (a peer that
// is gone: ECONNREFUSED) as send and receive errors; they are counted in tx_errors and rx_errors
// like any hard error and the reliability layer treats the datagram as lost.
//
// Polling several sockets. Every rx_burst polls the sockets that returned a datagram in the
// last kUdpActiveCalls calls ("active"; starting with a different one each call, so that none
// waits behind one that fills every slot), and one of the others in turn: if the active ones
// had nothing, on every call while none is active and every kUdpIdlePollEvery-th call
// otherwise; and, before the active ones, every kUdpBusyPollEvery-th call whatever they hold.
// An idle link therefore costs one receive call per rx_burst, a busy peer is polled on every
// call, and a datagram on a quiet socket waits at most about sockets x kUdpBusyPollEvery
// calls, even behind a stream that fills every slot. A peer socket counts as active from its
// opening, since its peer's datagrams come to it from then on: as a quiet one it left the first
// of them waiting for its turn, and in a 256 KiB MPI ping-pong the two round trips around the
// switch took 90-240 µs more than two others (27-45 µs with it active). While exactly one
// socket is active (one busy peer: a ping-pong) and no quiet one is due, rx_burst polls it
// directly, skipping the loop: the link remembers the socket that returned the latest
// datagram and when any other last did, which tells that no other socket is active.
// The sockets due in a call are not received from one by one when there are
// kUdpReadyCheckFrom or more: one poll(2) over them (with no timeout it registers no
// wake-up, unlike the epoll set below) tells which hold a datagram or an error, and only
// those are received from. Here an empty receive costs 200 ns, a poll(2) of 4 sockets 360 ns:
// ranks waiting on three peers made three empty receives per call, the calls in which nothing
// had arrived being most of them.
// Counting calls measures time only while they come back to back. A call that comes
// kUdpSweepTicks or more after the previous one (the caller was off the CPU, yielded it, or
// worked elsewhere) polls every socket ("sweep"): whatever arrived meanwhile has waited that
// long already, on any socket. Ranks that share CPUs are the case: Open MPI, oversubscribed,
// yields the CPU after each progress call that found nothing, and a rank's next call can come
// a time slice of another rank later. Waiting 16 such calls for a quiet socket's turn kept
// datagrams in its queue for milliseconds (in a 4-rank osu_alltoall on 2 CPUs, a fifth to a
// half of those a quiet poll found had waited over 1 ms; acknowledgements among them, so
// that their senders' tail-loss probes fired: thousands per rank instead of tens), and the
// alltoall took 1.6 times as long as with the bound socket alone, 4-6 times with a third
// process busy on one of the CPUs (perf/results/2026-11-27-a2a/NOTES.md). The gap is read
// from the CPU's time-stamp counter (a few nanoseconds; the clock where there is none) on every
// call (see "Sharing a CPU"). A sweep does not take the place of a quiet socket's turn: it
// polls the sockets only for the slots that staged aggregates leave, which may be none (a
// quiet socket got nothing in 256 calls behind a stream when sweeps skipped its turns).
//
// Sharing a CPU. A receive that finds nothing is a system call of about 0.5 µs here, and a
// process that shares its CPU with another spends its turn on them: Open MPI's blocking calls
// make 100 progress calls before they yield, and while this process has the CPU the other,
// whose datagram it waits for, cannot send it. Two ranks of a ping-pong on one CPU took 2.3
// times tcp's round trip (whose empty check, an epoll_wait, costs 0.2 µs), four ranks on two
// CPUs 1.5-1.8 times its all-to-all (perf/results/2026-12-02-osu-2nodes-coll/NOTES.md). So
// a call that comes within kUdpSharedCalls polling calls of a gap (this process was off its
// CPU: it shares it), after kUdpIdleSkipAfter or more calls in a row found nothing, polls the
// sockets only every kUdpIdleSkipEvery-th time and otherwise returns at once (counted in
// rx_polls_skipped). A datagram that arrives meanwhile waits at most kUdpIdleSkipEvery - 1 of
// these calls, each a few tens of nanoseconds. A process with a CPU of its own makes no gaps
// and polls on every call, as before.
//
// Datagrams to itself. A datagram to the link's own address (a connection of an engine to
// itself: every message between two processes attached to one node agent) does not go through
// the kernel: tx_burst copies it into a ring of kUdpSelfQueue buffers and rx_burst returns it
// from there before it polls the sockets (lending it where the slot may borrow), in order, with
// the link's address as source. Two system calls and one copy less per datagram and per
// acknowledgement. A full ring makes tx_burst stop there (it would block): the caller sends
// the rest after its next rx_burst, as when a socket's buffer is full. The buffers are
// allocated at the first such datagram, each as large as the largest it has held. While a socket
// is active, on every kUdpIdlePollEvery-th call and on a sweep, the ring takes at most half the
// slots and the sockets are polled for the rest: a stream between two processes of one agent
// can keep the ring full, and it would otherwise take every slot of every call and starve the
// network.
//
// Event fd. event_fd() is an epoll set that holds the sockets only between rx_notify(true) and
// rx_notify(false): a socket in an epoll set costs the sender a wake-up callback per datagram
// (0.3 µs per hop of a ping-pong here), which a link that is being polled does not need.
//
// Receiving. rx_burst points one mmsghdr at each caller slot and receives up to batch_size
// per recvmmsg call with MSG_TRUNC, so the kernel reports a datagram's real length: one
// longer than its slot is dropped and counted in rx_oversize (the datagrams behind it are
// moved up one slot; this copy happens only on that rare path). A hard receive error (a
// pending socket error such as ECONNREFUSED) is counted in rx_errors and receiving goes on,
// so an error can never wedge the receive loop. rx_dropped is the sum of the sockets' drop
// counters (SO_MEMINFO: datagrams lost to a full receive buffer or a bad checksum), read when
// stats() is called, so receiving pays nothing for it.
//
// Threads. A UdpLink is used by one thread at a time (its owner); it takes no locks.
#ifndef SRCNIC_LINK_UDP_LINK_H
#define SRCNIC_LINK_UDP_LINK_H

#include "core/clock.h"
#include "link/link.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

namespace srcnic {

// Largest UDP payload over IPv4: 65535 - 20 (IPv4 header) - 8 (UDP header), bytes.
constexpr uint32_t kUdpMaxMtuIpv4 = 65507;
// Largest UDP payload over IPv6 keeping the whole packet within 65535 bytes:
// 65535 - 40 (IPv6 header) - 8 (UDP header), bytes.
constexpr uint32_t kUdpMaxMtuIpv6 = 65487;
// Automatic MTU on loopback addresses and the fallback for the wildcard address, bytes.
constexpr uint32_t kUdpLoopbackMtu = 65000;
// Default socket send and receive buffer request, bytes.
constexpr uint32_t kUdpDefaultSockBufSize = 8u << 20;
// Default number of datagrams per sendmmsg/recvmmsg call.
constexpr uint32_t kUdpDefaultBatchSize = 32;
// Largest batch: the kernel's limit on datagrams per sendmmsg/recvmmsg call (UIO_MAXIOV).
constexpr uint32_t kUdpMaxBatchSize = 1024;
// Most datagrams in one segmentation-offload group (the kernel's UDP_MAX_SEGMENTS is 64 on
// older kernels).
constexpr uint32_t kUdpGsoMaxSegments = 64;
// Most bytes in one segmentation-offload group: the payload limit of one IPv6 UDP packet,
// which the kernel applies to the unsegmented group.
constexpr uint32_t kUdpGsoMaxBytes = kUdpMaxMtuIpv6;
// Default number of peer sockets (connected sockets for the busiest destinations; see above).
constexpr uint32_t kUdpDefaultPeerSockets = 4;
// Most peer sockets a link may be configured with.
constexpr uint32_t kUdpMaxPeerSockets = 64;
// Datagrams sent to a destination before it gets a peer socket.
constexpr uint32_t kUdpPeerSocketAfter = 64;
// Single datagrams up to this size are copied into one buffer and sent with sendto, bytes.
constexpr uint32_t kUdpCopySendMax = 2048;
// rx_burst calls after its last datagram during which a socket is polled on every call.
constexpr uint32_t kUdpActiveCalls = 256;
// While some socket is active but found nothing, a quiet one is polled every this many
// rx_burst calls (every 4th made a ping-pong's receiver notice its datagram 125 ns after the
// send, every 16th 48 ns: the poll of the quiet socket is a system call of its own) ...
constexpr uint32_t kUdpIdlePollEvery = 16;
// ... and every this many calls whatever the active ones found.
constexpr uint32_t kUdpBusyPollEvery = 32;
// A call this many time-stamp counter ticks (nanoseconds where there is no counter) after the
// previous one polls every socket (see "Polling several sockets"): 10 µs at 3.2 GHz, 32 µs at
// 1 GHz; back-to-back calls on this machine come under 1 µs apart, one that yielded the CPU to
// another process 2 µs or more.
constexpr uint64_t kUdpSweepTicks = 32768;
// With this many sockets or more to poll in one rx_burst, a poll(2) over them first tells
// which hold anything (see "Polling several sockets").
constexpr uint32_t kUdpReadyCheckFrom = 2;
// Sharing a CPU (see "Sharing a CPU"): after a gap, once this many polling rx_burst calls in a
// row found nothing ...
constexpr uint32_t kUdpIdleSkipAfter = 16;
// ... only every this many calls polls the sockets ...
constexpr uint32_t kUdpIdleSkipEvery = 4;
// ... for this many polling calls after the gap.
constexpr uint64_t kUdpSharedCalls = 1024;
// Receive calls in one rx_burst that may fail with a hard error before it gives up.
constexpr uint32_t kUdpMaxRxErrorsPerBurst = 8;
// Staging buffers for received aggregates, and their size in bytes (an aggregate is one UDP
// payload: at most 65535 bytes).
constexpr uint32_t kUdpGroBuffers = 8;
constexpr uint32_t kUdpGroBufferSize = 65536;
// Datagrams to the link's own address held between tx_burst and rx_burst (see "Datagrams to
// itself").
constexpr uint32_t kUdpSelfQueue = 32;

struct UdpLinkConfig {
    LinkAddr bind_addr;      // local IPv4 or IPv6 address to bind, or the wildcard (0.0.0.0,
                             // ::); port 0 = an ephemeral port
    uint32_t mtu = 0;        // largest datagram payload, bytes; 0 = automatic (see above)
    uint32_t sock_buf_size = kUdpDefaultSockBufSize; // requested SO_SNDBUF and SO_RCVBUF,
                                                     // bytes (at most INT_MAX); 0 = keep the
                                                     // kernel's defaults
    uint32_t batch_size = kUdpDefaultBatchSize; // datagrams per sendmmsg/recvmmsg call,
                                                // 1..kUdpMaxBatchSize
    bool gso = true;         // group equal-sized datagrams with UDP_SEGMENT where the kernel
                             // supports it
    bool gro = true;         // accept receive aggregates (UDP_GRO) where the kernel supports
                             // it
    uint32_t peer_sockets = kUdpDefaultPeerSockets; // connected sockets for busy destinations,
                                                    // 0..kUdpMaxPeerSockets; 0 = none
};

class UdpLink final : public Link {
public:
    // Opens and binds the socket. Errors are logged; bind failures map to BUSY (address in
    // use), INVALID_ADDR (address not local) or IO_ERROR; a bad config to INVALID_PARAM.
    // *link_p is set only on success.
    static srcnic_status_t open(const UdpLinkConfig &cfg, std::unique_ptr<Link> *link_p);

    ~UdpLink() override;
    UdpLink(const UdpLink &) = delete;
    UdpLink &operator=(const UdpLink &) = delete;

    // The common cases of both are defined here, inline: a caller that holds a UdpLink (the
    // Nic does; the class is final) then has no frame of the link's between its own code and
    // the system call. After a receive that returned a datagram, each such frame costs a
    // mispredicted return (about 8 ns here); before a send, a call and its checks.
    uint32_t tx_burst(const TxDatagram *dgrams, uint32_t n) override
    {
        // A lone datagram in one piece to the destination sent to last, which has a peer
        // socket (a ping-pong's message, an ack): straight out with send.
        if (n == 1 && dgrams[0].iovcnt == 1 && dgrams[0].iov != nullptr &&
            dgrams[0].iov[0].iov_len <= mtu_ && tx_last_ != nullptr && tx_last_->sock != 0 &&
            dgrams[0].dst == tx_last_dst_) {
            const size_t len = dgrams[0].iov[0].iov_len;
            if (::send(socks_[tx_last_->sock].fd, dgrams[0].iov[0].iov_base, len,
                       MSG_DONTWAIT) < 0) {
                return tx_failed(dgrams[0]);
            }
            tx_sent(len);
            return 1;
        }
        return tx_burst_rest(dgrams, n);
    }
    __attribute__((always_inline)) uint32_t rx_burst(RxDatagram *slots, uint32_t n) override
    {
        self_lent_ = 0;   // what the previous call lent is the caller's no longer
        const uint64_t ticks = rx_ticks();
        const bool gap = ticks - rx_last_ticks_ >= kUdpSweepTicks;
        rx_last_ticks_ = ticks;
        if (gap) {
            rx_gap_call_ = rx_calls_ + 1;
            rx_empty_run_ = 0;
        } else if (idle_skip()) {
            return 0;   // (see "Sharing a CPU")
        }
        ++rx_calls_;
        // After a gap every socket is due (see "Polling several sockets").
        rx_sweep_ = gap && socks_.size() > 1;
        const uint32_t got = rx_poll(slots, n);
        rx_empty_run_ = got == 0 ? rx_empty_run_ + 1 : 0;
        return got;
    }
    const LinkAddr &local_addr() const override { return local_addr_; }
    uint32_t mtu() const override { return mtu_; }
    // Peers at the bound address get loopback-sized datagrams (see "MTU" above).
    uint32_t path_mtu(const LinkAddr &peer) const override;
    uint32_t max_datagram() const override { return local_mtu_; }
    // rcvbuf() over the kernel's charge for one datagram of `size` bytes, estimated from above.
    uint32_t rx_queue_capacity(uint32_t size) const override;
    // An epoll descriptor over the link's sockets while rx_notify is on, readable while one of
    // them holds a datagram (or a pending error); over none while it is off.
    int event_fd() const override { return epoll_fd_; }
    void rx_notify(bool on) override;
    bool rx_pending() const override { return gro_count_ != 0 || self_count_ != 0; }
    // rx_dropped is read from the kernel's drop counters of the sockets on each call.
    const LinkStats &stats() const override;

    // The bound socket (peer sockets are extra; see above).
    int socket_fd() const { return fd_; }
    // Peer socket i's descriptor, 0 <= i < peer_sockets().
    int peer_socket_fd(uint32_t i) const { return socks_[i + 1].fd; }
    // Socket send buffer size the kernel granted, bytes, as getsockopt(SO_SNDBUF) reports it.
    uint32_t sndbuf() const { return sndbuf_; }
    // Socket receive buffer size the kernel granted, bytes, as getsockopt(SO_RCVBUF) reports.
    uint32_t rcvbuf() const { return rcvbuf_; }
    // Datagrams per sendmmsg/recvmmsg call.
    uint32_t batch_size() const { return batch_size_; }
    // Whether datagrams are grouped with UDP_SEGMENT (configured, supported, not refused).
    bool gso() const { return gso_; }
    // Whether the socket accepts receive aggregates (UDP_GRO).
    bool gro() const { return gro_; }
    // rx_burst calls so far.
    uint64_t rx_calls() const { return rx_calls_; }
    // Aggregates of more than one datagram received.
    uint64_t rx_aggregates() const { return rx_aggregates_; }
    // Sending system-call messages, each one datagram or one segmentation-offload group.
    uint64_t tx_messages() const { return tx_messages_; }
    // Datagrams that went to the link's own address without the kernel (see above).
    uint64_t self_datagrams() const { return self_datagrams_; }
    uint32_t self_pending() const { return self_count_; }   // held, not yet returned
    // Peer sockets open (connected to one destination each).
    uint32_t peer_sockets() const { return static_cast<uint32_t>(socks_.size()) - 1; }
    // Datagrams received on peer sockets.
    uint64_t rx_peer_datagrams() const { return rx_peer_datagrams_; }

private:
    // Shared by the control path (which sizes the buffers) and the data path.
    // Control buffer per received datagram: room for one UDP_GRO message, bytes.
    static constexpr size_t kRxControlSize = CMSG_SPACE(sizeof(int));
    // Control buffer per send message: room for one UDP_SEGMENT message, bytes.
    static constexpr size_t kTxControlSize = CMSG_SPACE(sizeof(uint16_t));
    // Gather-list entries per send batch: batch_size datagrams of at most kLinkMaxIov entries.
    static constexpr uint32_t kTxIovPerDatagram = kLinkMaxIov;

    // A socket address of either family.
    union SockAddr {
        struct sockaddr sa;       // generic view, for the syscalls
        struct sockaddr_in in;    // AF_INET
        struct sockaddr_in6 in6;  // AF_INET6
    };

    // A socket the link receives from: [0] the bound socket, then the peer sockets.
    struct Sock {
        int fd = -1;
        LinkAddr peer;              // the connected peer; unset (family 0) for the bound socket
        uint64_t last_rx_call = 0;  // rx_calls_ when it last returned a datagram; 0 = never
        bool single = true;         // the next receive asks for one datagram
        bool found = false;         // the last receive found a datagram
        bool strays = false;        // a new peer socket not yet found empty: it may hold other
                                    // peers' datagrams (see "Peer sockets"), so its receives
                                    // read each datagram's source
        uint32_t drops_seen = 0;    // the kernel's drop counter when stats() last read it
    };
    // What the link knows of a destination it sends to.
    struct Dest {
        uint32_t sent = 0;          // datagrams sent to it in a row, while it had no peer socket
        uint32_t sock = 0;          // index into socks_ (0: the bound socket)
    };
    struct LinkAddrHash {
        size_t operator()(const LinkAddr &a) const { return a.hash(); }
    };

    UdpLink() = default;
    srcnic_status_t init(const UdpLinkConfig &cfg);
    srcnic_status_t set_buffers(int fd, uint32_t size) const;
    // Sets what every socket of the link carries: IPv6-only (an IPv6 link), the buffer size
    // and the offloads in use (gso_, gro_). Returns what failed, or
    // nullptr.
    const char *set_options(int fd) const;
    // The socket datagrams to dst leave by (counting toward a peer socket; opening one).
    uint32_t sock_for(const LinkAddr &dst);
    // Opens a peer socket connected to dst; its index, or 0 if it could not be opened.
    uint32_t open_peer_socket(const LinkAddr &dst);
    // Fills a socket address from a link address; returns its length.
    socklen_t to_sockaddr(const LinkAddr &addr, SockAddr *sa) const;
    // Receives into slots from socket i; how many were filled. (rx_from, rx_quiet and
    // receive_batch are inline, defined and used only in udp_link_data.cc: see there.)
    inline uint32_t rx_from(uint32_t index, RxDatagram *slots, uint32_t n);
    // Receives from the next quiet socket in turn (see "Polling several sockets").
    inline uint32_t rx_quiet(RxDatagram *slots, uint32_t n);
    // Copies staged aggregate datagrams into slots; how many were filled.
    uint32_t gro_drain(RxDatagram *slots, uint32_t n);
    // Whether socket i returned a datagram recently (see "Polling several sockets").
    bool active(uint32_t i) const
    {
        return socks_[i].last_rx_call != 0 && rx_calls_ - socks_[i].last_rx_call <= kUdpActiveCalls;
    }
    // Only rx_hot_ is active: every other socket last returned a datagram at rx_others_last_
    // at the latest.
    // The receive of rx_burst.
    __attribute__((always_inline)) uint32_t rx_poll(RxDatagram *slots, uint32_t n)
    {
        if (__builtin_expect(self_count_ != 0, 0)) {
            return rx_self(slots, n);
        }
        // A single busy socket (one peer, a ping-pong) whose last receive found at most one
        // datagram, no quiet socket due in this call: one datagram, as rx_from takes it.
        if (only_hot_due() && !gro_ && socks_[rx_hot_].single) {
            return rx_one(socks_[rx_hot_], slots[0]);
        }
        return rx_burst_rest(slots, n);
    }
    // This call polls no socket (see "Sharing a CPU"): a gap came within the last
    // kUdpSharedCalls polls, the last kUdpIdleSkipAfter or more found nothing, nothing is
    // staged or held in the ring to itself, and it is not every kUdpIdleSkipEvery-th call.
    bool idle_skip()
    {
        if (rx_empty_run_ < kUdpIdleSkipAfter || rx_calls_ - rx_gap_call_ >= kUdpSharedCalls ||
            gro_count_ != 0 || self_count_ != 0) {
            return false;
        }
        if (++rx_idle_turn_ % kUdpIdleSkipEvery == 0) {
            return false;
        }
        ++stats_.rx_polls_skipped;
        return true;
    }
    bool only_hot_active() const
    {
        return active(rx_hot_) &&
               (rx_others_last_ == 0 || rx_calls_ - rx_others_last_ > kUdpActiveCalls);
    }
    // Only rx_hot_ needs polling in this call: it alone is active, no quiet socket's turn
    // falls on this call (nor a sweep) and no aggregate is staged. (A turn owed while nothing
    // is staged, gro_quiet_owed_, may wait until the next kUdpIdlePollEvery-th call.)
    bool only_hot_due() const
    {
        return gro_count_ == 0 && rx_calls_ % kUdpIdlePollEvery != 0 && !rx_sweep_ &&
               only_hot_active();
    }
    // The time-stamp counter, or the clock in nanoseconds where there is none: for gaps
    // between rx_burst calls.
    static uint64_t rx_ticks()
    {
        return TscTicks::kAvailable ? TscTicks::read() : now_ns();
    }
    // peer is at the bound address (same family, address and scope; any port).
    bool is_local(const LinkAddr &peer) const
    {
        LinkAddr same_port = peer;
        same_port.port = local_addr_.port;
        return same_port == local_addr_;
    }
    // rx_burst and tx_burst beyond their inline cases (rx_burst_rest after rx_calls_ counts
    // the call).
    uint32_t rx_burst_rest(RxDatagram *slots, uint32_t n);
    uint32_t tx_burst_rest(const TxDatagram *dgrams, uint32_t n);
    // tx_burst_rest for datagrams none of which goes to the link's own address.
    uint32_t tx_burst_out(const TxDatagram *dgrams, uint32_t n);
    // Datagrams to the link's own address, from the first: how many the ring took.
    uint32_t tx_self(const TxDatagram *dgrams, uint32_t n);
    // rx_burst while the ring holds datagrams: those first, then the sockets.
    uint32_t rx_self(RxDatagram *slots, uint32_t n);
    // A single receive on sock returned a datagram of len bytes, longer than slot: counted,
    // logged and dropped (0).
    uint32_t rx_oversize(Sock &sock, const RxDatagram &slot, ssize_t len);
    // A receive failed with a hard error (errno): counted, logged; -1.
    int receive_error();
    // A send of dgram failed (errno): 0 if the socket would block, 1 for a hard error (the
    // datagram counted in tx_errors, logged, and dropped like a loss).
    uint32_t tx_failed(const TxDatagram &dgram);
    // Counts a datagram of len bytes that went out in a message of its own.
    void tx_sent(size_t len)
    {
        ++stats_.tx_datagrams;
        stats_.tx_bytes += len;
        ++tx_messages_;
    }
    srcnic_status_t choose_mtu(uint32_t configured);
    // Why dgram cannot be sent (too long, too many iov entries, wrong family), or nullptr.
    // *len_p (if not null) gets the datagram's length when it is valid.
    const char *tx_invalid_reason(const TxDatagram &dgram, uint32_t *len_p) const;
    // One send message: `count` consecutive datagrams from `first`, `seg` bytes each (the
    // last may be shorter), `bytes` in all.
    struct TxGroup {
        uint32_t first;
        uint32_t count;
        uint32_t seg;
        uint32_t last;       // bytes of the last datagram
        uint32_t bytes;
    };
    // Adds dgrams[index] (valid, `len` bytes) to the batch being built: to the last message if
    // it can join its group, else as a new message. False (nothing done) if the batch is full.
    // Indexes are relative to the batch's first datagram, dgrams.
    bool add_tx(const TxDatagram *dgrams, uint32_t index, uint32_t len);
    // Finishes send header `msg` (name, gather list, offload control message).
    void seal_tx(const TxDatagram *dgrams, uint32_t msg);
    // Sends messages [0, msgs); returns how many datagrams were sent or dropped on a hard
    // error before the socket would block (or the offload was turned off: *regroup set).
    uint32_t send_batch(const TxDatagram *dgrams, uint32_t msgs, bool *regroup);
    // Sends a lone datagram of at most kUdpCopySendMax bytes with one send/sendto: 1 when it
    // went out (or was dropped on a hard error), 0 when the socket would block, -1 when it is
    // not such a datagram (invalid, or longer) and takes the batch path.
    int tx_single(const TxDatagram &dgram);
    // The bytes of a datagram of at most kUdpCopySendMax bytes in one piece: its only iov
    // entry, or the entries copied into tx_copy_.
    const void *contiguous(const struct iovec *iov, size_t iovcnt);
    // Sends len contiguous bytes on fd: to name with sendto, or with send where name is null
    // (a connected peer socket). The system call's result.
    static ssize_t send_contiguous(int fd, const void *data, size_t len,
                                   const struct sockaddr *name, socklen_t name_len);
    // Sends message `msg` alone on fd: 1 if sent, -1 on error (errno set).
    int send_one(int fd, uint32_t msg);
    // The segment size of a received aggregate (its UDP_GRO message), or 0.
    static uint32_t gro_segment(const struct msghdr &hdr);
    // Fills received datagram fields of `out` from receive header i's source address (for a
    // peer socket: its peer).
    void take_source(const Sock &sock, uint32_t i, LinkAddr *out) const
    {
        take_source(sock, rx_names_[i], out);
    }
    // The same from a source address `name` (ignored for a peer socket, unless it may hold
    // strays).
    void take_source(const Sock &sock, const SockAddr &name, LinkAddr *out) const
    {
        if (sock.peer.family != 0 && !sock.strays) {
            *out = sock.peer;
            return;
        }
        addr_from(name, out);
    }
    // The link address of a socket address of the link's family.
    void addr_from(const SockAddr &name, LinkAddr *out) const;
    // rx_from with receive aggregation: stage aggregates from socket i, copy datagrams out.
    uint32_t rx_gro_from(uint32_t index, RxDatagram *slots, uint32_t n);
    // Stages the aggregates socket i holds into the staging buffers free now, behind those
    // staged already; how many it received (*queue_empty_p: fewer than there was room for),
    // -1 on a hard error. Not after this rx_burst call lent a staged datagram (a free buffer
    // may be the one lent).
    int gro_stage(uint32_t index, bool *queue_empty_p);
    // The socket whose turn comes next among those not active, from rx_turn_ round; it takes
    // the turn. count (socks_.size()) if every socket is active.
    uint32_t next_quiet();
    // The next quiet socket's turn while aggregates are staged: gro_stage from it.
    void gro_stage_quiet();
    // One receive of up to m datagrams from socket `sock` into headers [0, m) (already pointed
    // at buffers); returns how many were received, 0 if none is queued, -1 on a hard error
    // (counted).
    inline int receive_batch(Sock &sock, uint32_t m);
    // One datagram from `sock` straight into `slot` (a single receive without aggregation: no
    // receive header); 1 if the slot was filled, else 0 (nothing queued, hard errors counted,
    // an oversize datagram dropped and counted).
    // rx_one, receive_failed and note_received are defined here, always inline, for rx_burst
    // (and rx_from): the return predictions after a receive system call are wrong, and each
    // frame between the call and rx_burst's caller costs a mispredicted return.
    __attribute__((always_inline)) uint32_t rx_one(Sock &sock, RxDatagram &slot)
    {
        // After a poll that found at most one datagram (idle, or a ping-pong), one datagram
        // with recvfrom (recv on a peer socket, whose source is known): cheaper than recvmsg,
        // and than recvmmsg, which after a datagram also tries the next. No control message:
        // drops show with the next batch receive.
        for (uint32_t errors = 0; errors < kUdpMaxRxErrorsPerBurst; ++errors) {
            SockAddr name;
            socklen_t name_len = sizeof(name);
            const ssize_t len =
                sock.peer.family != 0 && !sock.strays
                    ? ::recv(sock.fd, slot.buf, slot.capacity, MSG_DONTWAIT | MSG_TRUNC)
                    : ::recvfrom(sock.fd, slot.buf, slot.capacity, MSG_DONTWAIT | MSG_TRUNC,
                                 &name.sa, &name_len);
            if (len < 0) {
                if (receive_failed(sock) == 0) {
                    return 0;
                }
                continue;
            }
            if (static_cast<size_t>(len) > slot.capacity) {
                return rx_oversize(sock, slot, len);
            }
            note_received(sock, 1, 1);
            slot.len = static_cast<uint32_t>(len);
            slot.data = slot.buf;
            take_source(sock, name, &slot.src);
            ++stats_.rx_datagrams;
            stats_.rx_bytes += static_cast<uint64_t>(len);
            return 1;
        }
        return 0;
    }
    // What a receive of up to m datagrams that returned `got` (>= 0) tells about the socket.
    void note_received(Sock &sock, uint32_t m, int got)
    {
        // Two single receives in a row that found a datagram are a stream: batch the next call
        // (a ping-pong finds the queue empty in between); a batch that found at most one goes
        // back to single receives.
        sock.single = m == 1 ? !(got == 1 && sock.found) : got <= 1;
        sock.found = got > 0;
        if (got > 0) {
            sock.last_rx_call = rx_calls_;
            const uint32_t index = static_cast<uint32_t>(&sock - socks_.data());
            if (index != rx_hot_) {
                rx_others_last_ = std::max(rx_others_last_, socks_[rx_hot_].last_rx_call);
                rx_hot_ = index;
            }
            if (sock.peer.family != 0) {
                rx_peer_datagrams_ += static_cast<uint32_t>(got);
            }
        }
    }
    // A receive (or a poll) found nothing queued on sock.
    static void found_empty(Sock &sock)
    {
        sock.single = true;   // the next poll asks for one datagram again
        sock.found = false;
        sock.strays = false;  // whatever came before its connect has been read
    }
    // A receive failed (errno): 0 if nothing was queued, -1 for a hard error (counted, logged).
    __attribute__((always_inline)) int receive_failed(Sock &sock)
    {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
            found_empty(sock);
            return 0;
        }
        return receive_error();
    }

    // A staged aggregate: bytes [off, end) of its staging buffer remain (ring entry k's is
    // buffer k), in datagrams of `seg` bytes (the last may be shorter).
    struct GroStaged {
        uint32_t off;
        uint32_t end;
        uint32_t seg;
        bool dropped;   // truncated: counted, delivered to no slot
        LinkAddr src;
    };

    int fd_ = -1;                  // the bound UDP socket, non-blocking (socks_[0].fd)
    int epoll_fd_ = -1;            // epoll set of event_fd(): the sockets while notify_ is on
    bool notify_ = false;          // rx_notify(true) is in force
    uint32_t peer_sockets_max_ = 0; // peer sockets allowed
    uint32_t sock_buf_size_ = 0;   // requested socket buffers (for peer sockets), bytes
    mutable std::vector<Sock> socks_; // the bound socket, then the peer sockets (mutable:
                                      // stats() notes their drop counters)
    std::unordered_map<LinkAddr, Dest, LinkAddrHash> dests_; // destinations sent to (with
                                                             // peer sockets configured)
    LinkAddr tx_last_dst_;         // the destination sock_for() saw last ...
    Dest *tx_last_ = nullptr;      //   ... and its entry (entries never move)
    uint32_t tx_sock_ = 0;         // socket of the send batch being built
    uint64_t rx_calls_ = 0;        // rx_burst calls
    uint32_t rx_turn_ = 0;         // the quiet socket polled next
    uint32_t rx_start_ = 0;        // the socket whose turn comes first in this rx_burst
    uint32_t rx_hot_ = 0;          // the socket that returned the latest datagram
    uint64_t rx_others_last_ = 0;  // the latest last_rx_call of any other socket (0: none)
    uint64_t rx_last_ticks_ = 0;   // rx_ticks() at the previous rx_burst
    bool rx_sweep_ = false;        // this rx_burst polls every socket (a gap before it)
    uint64_t rx_gap_call_ = 0;     // rx_calls_ of the latest call that came after a gap
    uint32_t rx_empty_run_ = 0;    // polling rx_burst calls in a row that found nothing
    uint32_t rx_idle_turn_ = 0;    // calls that idle_skip() weighed (every kUdpIdleSkipEvery-th polls)
    std::unique_ptr<uint32_t[]> rx_due_;         // sockets to poll in this rx_burst (1 +
                                                 // peer_sockets_max_) ...
    std::unique_ptr<struct pollfd[]> rx_pollfds_; //   ... and their poll(2) entries
    uint64_t rx_peer_datagrams_ = 0; // datagrams received on peer sockets
    std::unique_ptr<uint8_t[]> tx_copy_; // kUdpCopySendMax bytes: a small datagram, contiguous
    uint8_t family_ = 0;           // AF_INET or AF_INET6
    LinkAddr local_addr_;          // bound address with the actual port
    uint32_t mtu_ = 0;             // largest datagram payload, bytes
    uint32_t local_mtu_ = 0;       // the same for peers at the bound address (>= mtu_)
    uint32_t batch_size_ = 0;      // datagrams per sendmmsg/recvmmsg call
    uint32_t sndbuf_ = 0;          // granted send buffer, bytes (getsockopt)
    uint32_t rcvbuf_ = 0;          // granted receive buffer, bytes (getsockopt)
    uint32_t rx_written_ = 0;      // receive headers [0, rx_written_) written by the kernel since
                                   // receive_batch last reset them
    bool gso_ = false;             // grouping with UDP_SEGMENT
    bool gro_ = false;             // receiving aggregates (UDP_GRO)
    uint64_t rx_aggregates_ = 0;   // aggregates of more than one datagram received
    std::unique_ptr<uint8_t[]> gro_mem_;        // kUdpGroBuffers x kUdpGroBufferSize
    GroStaged gro_staged_[kUdpGroBuffers];      // staged aggregates, a ring in arrival order
                                                // (entry k in staging buffer k) ...
    uint32_t gro_head_ = 0;                     //   ... the first not yet copied out
    uint32_t gro_count_ = 0;                    //   ... how many remain
    bool gro_lent_ = false;                     // this rx_burst call lent staged datagrams
    bool gro_quiet_owed_ = false;               // a quiet socket's turn came while aggregates
                                                // were staged (gro_stage_quiet)
    struct SelfDatagram {
        std::unique_ptr<uint8_t[]> buf;
        uint32_t capacity = 0;
        uint32_t len = 0;
    };
    std::unique_ptr<SelfDatagram[]> self_;      // kUdpSelfQueue, at the first one (see above)
    uint32_t self_head_ = 0;                    // the oldest held
    uint32_t self_count_ = 0;                   // held
    uint32_t self_lent_ = 0;                    // returned by this rx_burst call, lent or
                                                // copied: not reused before the next one
    uint64_t self_datagrams_ = 0;
    uint64_t tx_messages_ = 0;     // messages sendmmsg accepted
    mutable LinkStats stats_;      // counters (see link.h); stats() updates rx_dropped

    std::unique_ptr<struct mmsghdr[]> tx_msgs_;  // batch_size_ send headers
    std::unique_ptr<SockAddr[]> tx_names_;       // destination of each send header
    std::unique_ptr<TxGroup[]> tx_groups_;       // datagrams of each send header
    std::unique_ptr<struct iovec[]> tx_iov_;     // gather lists of a batch, concatenated
    uint32_t tx_iov_used_ = 0;                   //   entries in use
    uint32_t tx_msg_count_ = 0;                  // send headers of the batch being built
    std::unique_ptr<uint8_t[]> tx_control_;      // per send header: the UDP_SEGMENT message
    std::unique_ptr<struct mmsghdr[]> rx_msgs_;  // batch_size_ receive headers
    std::unique_ptr<SockAddr[]> rx_names_;       // source of each received datagram
    std::unique_ptr<struct iovec[]> rx_iov_;     // one iovec per receive header (caller slot)
    std::unique_ptr<uint8_t[]> rx_control_;      // control buffer per receive header, for
                                                 // the UDP_GRO message
};

} // namespace srcnic

#endif
