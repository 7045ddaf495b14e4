// The UDP backend's data path: batched send (segmentation offload, connected peer sockets) and
// receive (batches, receive-offload aggregates lent in place). The control path (socket setup,
// MTU, peer sockets) is in udp_link.cc; the common cases of tx_burst and rx_burst are inline in
// udp_link.h.
#include "link/udp_link.h"

#include "core/log.h"

#include <netinet/udp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

namespace srcnic {

namespace {

// The level of a failed send or receive: an error that ICMP reported for a peer that is gone
// or out of reach is part of a peer's failure, which the Nic detects and reports to its
// consumer (debug); any other hard error is unexpected (warn).
LogLevel link_error_level(int err)
{
    switch (err) {
    case ECONNREFUSED:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case EHOSTDOWN:
        return LogLevel::kDebug;
    default:
        return LogLevel::kWarn;
    }
}

} // namespace

const char *UdpLink::tx_invalid_reason(const TxDatagram &dgram, uint32_t *len_p) const
{
    if (dgram.iovcnt > kLinkMaxIov) {
        return "too many iov entries";
    }
    if (dgram.iovcnt > 0 && dgram.iov == nullptr) {
        return "no iov array";
    }
    size_t len = 0;
    for (uint32_t i = 0; i < dgram.iovcnt; ++i) {
        len += dgram.iov[i].iov_len;
    }
    if (len > mtu_ && (len > local_mtu_ || !is_local(dgram.dst))) {
        return "longer than the mtu";
    }
    if (dgram.dst.family != family_) {
        return family_ == AF_INET ? "destination is not IPv4" : "destination is not IPv6";
    }
    if (len_p != nullptr) {
        *len_p = static_cast<uint32_t>(len);
    }
    return nullptr;
}

uint32_t UdpLink::sock_for(const LinkAddr &dst)
{
    if (peer_sockets_max_ == 0) {
        return 0;
    }
    if (tx_last_ == nullptr || dst != tx_last_dst_) {
        if (tx_last_ != nullptr && tx_last_->sock == 0) {
            tx_last_->sent = 0;   // its run ended: the link talks to several peers
        }
        tx_last_ = &dests_[dst];
        tx_last_dst_ = dst;
    }
    Dest &d = *tx_last_;
    if (d.sock == 0 && d.sent < kUdpPeerSocketAfter && ++d.sent == kUdpPeerSocketAfter &&
        socks_.size() - 1 < peer_sockets_max_) {
        d.sock = open_peer_socket(dst);
    }
    return d.sock;
}

bool UdpLink::add_tx(const TxDatagram *dgrams, uint32_t index, uint32_t len)
{
    const TxDatagram &dgram = dgrams[index];
    if (tx_iov_used_ + dgram.iovcnt > batch_size_ * kTxIovPerDatagram) {
        return false;
    }
    uint32_t &msgs = tx_msg_count_;
    // A batch goes out on one socket: the bound one once it holds datagrams for two sockets
    // (see "Sending" in udp_link.h).
    const uint32_t sock = sock_for(dgram.dst);
    if (msgs == 0) {
        tx_sock_ = sock;
    } else if (sock != tx_sock_) {
        tx_sock_ = 0;
    }
    TxGroup *last = msgs != 0 ? &tx_groups_[msgs - 1] : nullptr;
    const bool join = gso_ && last != nullptr && last->count < kUdpGsoMaxSegments &&
                      last->last == last->seg && len <= last->seg && len != 0 &&
                      last->bytes + len <= kUdpGsoMaxBytes && dgrams[last->first].dst == dgram.dst;
    if (join) {
        ++last->count;
        last->last = len;
        last->bytes += len;
    } else {
        if (msgs == batch_size_) {
            return false;
        }
        tx_groups_[msgs] = TxGroup{index, 1, len, len, len};
        tx_msgs_[msgs].msg_hdr.msg_iov = &tx_iov_[tx_iov_used_];
        tx_msgs_[msgs].msg_hdr.msg_iovlen = 0;
        ++msgs;
    }
    struct msghdr &hdr = tx_msgs_[msgs - 1].msg_hdr;
    for (uint32_t i = 0; i < dgram.iovcnt; ++i) {
        tx_iov_[tx_iov_used_++] = dgram.iov[i];
    }
    hdr.msg_iovlen += dgram.iovcnt;
    return true;
}

void UdpLink::seal_tx(const TxDatagram *dgrams, uint32_t msg)
{
    const TxGroup &group = tx_groups_[msg];
    const TxDatagram &dgram = dgrams[group.first];
    SockAddr &name = tx_names_[msg];
    struct msghdr &hdr = tx_msgs_[msg].msg_hdr;
    if (tx_sock_ == 0) {
        hdr.msg_namelen = to_sockaddr(dgram.dst, &name);
        hdr.msg_name = &name;
    } else {
        hdr.msg_namelen = 0;   // a peer socket is connected
        hdr.msg_name = nullptr;
    }
    hdr.msg_flags = 0;
    if (group.count > 1) {
        hdr.msg_control = &tx_control_[kTxControlSize * msg];
        hdr.msg_controllen = kTxControlSize;
        struct cmsghdr *cmsg = CMSG_FIRSTHDR(&hdr);
        cmsg->cmsg_level = SOL_UDP;
        cmsg->cmsg_type = UDP_SEGMENT;
        cmsg->cmsg_len = CMSG_LEN(sizeof(uint16_t));
        const uint16_t seg = static_cast<uint16_t>(group.seg);
        std::memcpy(CMSG_DATA(cmsg), &seg, sizeof(seg));
    } else {
        hdr.msg_control = nullptr;
        hdr.msg_controllen = 0;
    }
}

const void *UdpLink::contiguous(const struct iovec *iov, size_t iovcnt)
{
    if (iovcnt == 1) {
        return iov[0].iov_base;
    }
    size_t off = 0;
    for (size_t i = 0; i < iovcnt; ++i) {
        std::memcpy(&tx_copy_[off], iov[i].iov_base, iov[i].iov_len);
        off += iov[i].iov_len;
    }
    return tx_copy_.get();
}

ssize_t UdpLink::send_contiguous(int fd, const void *data, size_t len,
                                 const struct sockaddr *name, socklen_t name_len)
{
    return name != nullptr ? ::sendto(fd, data, len, MSG_DONTWAIT, name, name_len)
                           : ::send(fd, data, len, MSG_DONTWAIT);
}

int UdpLink::send_one(int fd, uint32_t msg)
{
    // One message: a small datagram goes contiguous with sendto (cheaper than sendmsg, which
    // copies and checks a message header and a gather list), the rest with sendmsg (cheaper
    // than a sendmmsg of one).
    const struct msghdr &hdr = tx_msgs_[msg].msg_hdr;
    const TxGroup &group = tx_groups_[msg];
    if (group.count == 1 && group.bytes <= kUdpCopySendMax) {
        const ssize_t len = send_contiguous(fd, contiguous(hdr.msg_iov, hdr.msg_iovlen),
                                            group.bytes,
                                            static_cast<const struct sockaddr *>(hdr.msg_name),
                                            hdr.msg_namelen);
        return len >= 0 ? 1 : -1;
    }
    return ::sendmsg(fd, &hdr, MSG_DONTWAIT) >= 0 ? 1 : -1;
}

uint32_t UdpLink::send_batch(const TxDatagram *dgrams, uint32_t msgs, bool *regroup)
{
    uint32_t done = 0;       // messages
    uint32_t datagrams = 0;  // datagrams in them
    *regroup = false;
    const int fd = socks_[tx_sock_].fd;
    while (done < msgs) {
        const int sent = msgs - done == 1 ? send_one(fd, done)
                                          : ::sendmmsg(fd, &tx_msgs_[done], msgs - done, MSG_DONTWAIT);
        if (sent > 0) {
            for (uint32_t i = done; i < done + static_cast<uint32_t>(sent); ++i) {
                stats_.tx_datagrams += tx_groups_[i].count;
                stats_.tx_bytes += tx_groups_[i].bytes;
                datagrams += tx_groups_[i].count;
            }
            tx_messages_ += static_cast<uint32_t>(sent);
            done += static_cast<uint32_t>(sent);
            continue;
        }
        if (sent == 0 || errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
            break;
        }
        const TxGroup &group = tx_groups_[done];
        if (group.count > 1 && (errno == EINVAL || errno == EIO || errno == ENOPROTOOPT ||
                                errno == EOPNOTSUPP || errno == EMSGSIZE)) {
            // The kernel refuses the offload on this route: send one by one from here on.
            SRCNIC_LOG_WARN("udp link %s: segmentation offload refused (%m) for %u datagrams of "
                            "%u bytes to %s; sending datagrams one by one",
                            local_addr_.to_string().c_str(), group.count, group.seg,
                            dgrams[group.first].dst.to_string().c_str());
            gso_ = false;
            *regroup = true;
            break;
        }
        // A hard error on message `done`: drop its datagrams like a loss and go on.
        stats_.tx_errors += group.count;
        datagrams += group.count;
        SRCNIC_LOG_RATELIMITED(link_error_level(errno),
                               "udp link %s: sending to %s failed, %u datagram(s) dropped: %m",
                               local_addr_.to_string().c_str(),
                               dgrams[group.first].dst.to_string().c_str(), group.count);
        ++done;
    }
    return datagrams;
}

int UdpLink::tx_single(const TxDatagram &dgram)
{
    uint32_t len = 0;
    if (tx_invalid_reason(dgram, &len) != nullptr || len > kUdpCopySendMax) {
        return -1;
    }
    const uint32_t sock = sock_for(dgram.dst);
    SockAddr name;
    // The bound socket needs the destination; a peer socket is connected.
    const socklen_t name_len = sock == 0 ? to_sockaddr(dgram.dst, &name) : 0;
    const ssize_t sent = send_contiguous(socks_[sock].fd, contiguous(dgram.iov, dgram.iovcnt),
                                         len, sock == 0 ? &name.sa : nullptr, name_len);
    if (sent >= 0) {
        tx_sent(len);
        return 1;
    }
    return static_cast<int>(tx_failed(dgram));
}

uint32_t UdpLink::tx_failed(const TxDatagram &dgram)
{
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
        return 0;
    }
    // A hard error: the datagram is dropped like a loss, as in send_batch.
    ++stats_.tx_errors;
    SRCNIC_LOG_RATELIMITED(link_error_level(errno),
                           "udp link %s: sending to %s failed, 1 datagram(s) dropped: %m",
                           local_addr_.to_string().c_str(), dgram.dst.to_string().c_str());
    return 1;
}

uint32_t UdpLink::tx_burst_rest(const TxDatagram *dgrams, uint32_t n)
{
    // Runs to other addresses go out; runs to this link's own go to the ring, in order.
    uint32_t done = 0;
    while (done < n) {
        uint32_t m = 0;
        while (done + m < n && dgrams[done + m].dst != local_addr_) {
            ++m;
        }
        if (m != 0) {
            const uint32_t sent = tx_burst_out(dgrams + done, m);
            done += sent;
            if (sent < m) {
                break;
            }
            continue;
        }
        const uint32_t taken = tx_self(dgrams + done, n - done);
        done += taken;
        if (taken == 0) {
            break;
        }
    }
    return done;
}

uint32_t UdpLink::tx_self(const TxDatagram *dgrams, uint32_t n)
{
    if (!self_) {
        self_.reset(new SelfDatagram[kUdpSelfQueue]);
    }
    uint32_t taken = 0;
    for (; taken < n && dgrams[taken].dst == local_addr_; ++taken) {
        const TxDatagram &d = dgrams[taken];
        uint32_t len = 0;
        if (tx_invalid_reason(d, &len) != nullptr) {
            ++stats_.tx_errors;
            SRCNIC_LOG_RATELIMITED(LogLevel::kWarn,
                                   "udp link %s: dropping an invalid datagram to itself: %s",
                                   local_addr_.to_string().c_str(), tx_invalid_reason(d, nullptr));
            continue;
        }
        // Slots lent or copied out by the current rx_burst call stay as they are until the next.
        if (self_count_ + self_lent_ >= kUdpSelfQueue) {
            break;
        }
        SelfDatagram &s = self_[(self_head_ + self_count_) % kUdpSelfQueue];
        if (s.capacity < len) {
            s.buf.reset(new uint8_t[len]);
            s.capacity = len;
        }
        uint32_t off = 0;
        for (uint32_t i = 0; i < d.iovcnt; ++i) {
            std::memcpy(s.buf.get() + off, d.iov[i].iov_base, d.iov[i].iov_len);
            off += static_cast<uint32_t>(d.iov[i].iov_len);
        }
        s.len = len;
        ++self_count_;
        ++self_datagrams_;
        tx_sent(len);
    }
    return taken;
}

uint32_t UdpLink::rx_self(RxDatagram *slots, uint32_t n)
{
    // Datagrams to itself come first, but leave half the slots to the sockets while one of them
    // is active, on a quiet socket's turn and on a sweep: a ring kept full would otherwise take
    // every slot of every call (see "Datagrams to itself" in udp_link.h).
    const uint32_t take = n > 1 && (active(rx_hot_) || rx_calls_ % kUdpIdlePollEvery == 0 || rx_sweep_)
                              ? n - n / 2
                              : n;
    uint32_t filled = 0;
    while (filled < take && self_count_ != 0) {
        SelfDatagram &s = self_[self_head_];
        self_head_ = (self_head_ + 1) % kUdpSelfQueue;
        --self_count_;
        ++self_lent_;
        RxDatagram &out = slots[filled];
        if (out.borrow) {
            out.data = s.buf.get();
        } else if (s.len <= out.capacity) {
            std::memcpy(out.buf, s.buf.get(), s.len);
            out.data = out.buf;
        } else {
            ++stats_.rx_oversize;
            SRCNIC_LOG_RATELIMITED(LogLevel::kWarn,
                                   "udp link %s: dropping a %u-byte datagram to itself: longer than "
                                   "the receive slot (%u bytes)", local_addr_.to_string().c_str(),
                                   s.len, out.capacity);
            continue;
        }
        out.len = s.len;
        out.src = local_addr_;
        ++stats_.rx_datagrams;
        stats_.rx_bytes += s.len;
        ++filled;
    }
    return filled < n ? filled + rx_burst_rest(slots + filled, n - filled) : filled;
}

uint32_t UdpLink::tx_burst_out(const TxDatagram *dgrams, uint32_t n)
{
    // A lone small datagram (a ping-pong's message, an ack) goes straight out, without the
    // batch's message headers; anything else (or an invalid one, which the batch path counts
    // and logs) takes the batch path.
    if (n == 1) {
        const int sent = tx_single(dgrams[0]);
        if (sent >= 0) {
            return static_cast<uint32_t>(sent);
        }
    }
    uint32_t done = 0;
    while (done < n) {
        // A batch ends before an invalid datagram, which then starts the next one and is
        // counted only once it is certain to be accepted.
        tx_msg_count_ = 0;
        tx_iov_used_ = 0;
        uint32_t m = 0;
        while (done + m < n) {
            uint32_t len = 0;
            if (tx_invalid_reason(dgrams[done + m], &len) != nullptr ||
                !add_tx(dgrams + done, m, len)) {
                break;
            }
            ++m;
        }
        if (m == 0) {
            ++stats_.tx_errors;
            SRCNIC_LOG_RATELIMITED(LogLevel::kWarn,
                                   "udp link %s: dropping an invalid datagram to %s: %s (%u iov "
                                   "entries, mtu %u)", local_addr_.to_string().c_str(),
                                   dgrams[done].dst.to_string().c_str(),
                                   tx_invalid_reason(dgrams[done], nullptr), dgrams[done].iovcnt,
                                   mtu_);
            ++done;
            continue;
        }
        const uint32_t msgs = tx_msg_count_;
        for (uint32_t i = 0; i < msgs; ++i) {
            seal_tx(dgrams + done, i);
        }
        bool regroup = false;
        const uint32_t sent = send_batch(dgrams + done, msgs, &regroup);
        done += sent;
        if (sent < m && !regroup) {
            break;
        }
    }
    return done;
}

uint32_t UdpLink::gro_segment(const struct msghdr &hdr)
{
    for (struct cmsghdr *cmsg = CMSG_FIRSTHDR(&hdr); cmsg != nullptr;
         cmsg = CMSG_NXTHDR(const_cast<struct msghdr *>(&hdr), cmsg)) {
        if (cmsg->cmsg_level == SOL_UDP && cmsg->cmsg_type == UDP_GRO) {
            int size;
            std::memcpy(&size, CMSG_DATA(cmsg), sizeof(size));
            return size > 0 ? static_cast<uint32_t>(size) : 0;
        }
    }
    return 0;
}

void UdpLink::addr_from(const SockAddr &name, LinkAddr *out) const
{
    *out = LinkAddr();
    out->family = family_;
    if (family_ == AF_INET) {
        out->port = ntohs(name.in.sin_port);
        std::memcpy(out->ip, &name.in.sin_addr, 4);
    } else {
        out->port = ntohs(name.in6.sin6_port);
        std::memcpy(out->ip, &name.in6.sin6_addr, 16);
        out->scope_id = name.in6.sin6_scope_id;
    }
}

int UdpLink::receive_error()
{
    // A pending socket error (e.g. ECONNREFUSED from ICMP) is reported once and cleared by
    // this call; the datagrams behind it are still queued.
    ++stats_.rx_errors;
    SRCNIC_LOG_RATELIMITED(link_error_level(errno),
                           "udp link %s: receive failed: %m", local_addr_.to_string().c_str());
    return -1;
}

// receive_batch, rx_from and rx_quiet are always inlined into rx_burst_rest, as rx_one is into
// rx_burst (udp_link.h).
__attribute__((always_inline)) inline int UdpLink::receive_batch(Sock &sock, uint32_t m)
{
    // The kernel writes back the name and control lengths of the headers it fills, only
    // those: reset just the ones written since (an empty poll touches no header). Those
    // beyond m stay written until a later call resets them: a control length left short
    // would cut an aggregate's segment size off, and the aggregate would pass for one
    // datagram.
    const uint32_t used = std::min(rx_written_, m);
    for (uint32_t i = 0; i < used; ++i) {
        rx_msgs_[i].msg_hdr.msg_namelen = sizeof(SockAddr);
        rx_msgs_[i].msg_hdr.msg_controllen = kRxControlSize;
    }
    rx_written_ = rx_written_ > m ? rx_written_ : 0;
    int got;
    if (m == 1) {
        // One header: recvmsg (with aggregates on, an aggregate's segment size comes as a
        // control message). A single receive without them is rx_one's.
        const ssize_t len = ::recvmsg(sock.fd, &rx_msgs_[0].msg_hdr, MSG_DONTWAIT | MSG_TRUNC);
        if (len >= 0) {
            rx_msgs_[0].msg_len = static_cast<unsigned int>(len);
        }
        got = len >= 0 ? 1 : -1;
    } else {
        got = ::recvmmsg(sock.fd, rx_msgs_.get(), m, MSG_DONTWAIT | MSG_TRUNC, nullptr);
    }
    if (got >= 0) {
        rx_written_ = std::max(rx_written_, static_cast<uint32_t>(got));
        note_received(sock, m, got);
        return got;
    }
    return receive_failed(sock);
}

uint32_t UdpLink::rx_oversize(Sock &sock, const RxDatagram &slot, ssize_t len)
{
    note_received(sock, 1, 1);
    ++stats_.rx_oversize;
    SRCNIC_LOG_RATELIMITED(LogLevel::kWarn,
                           "udp link %s: dropping a %zd-byte datagram: longer than the receive "
                           "slot (%u bytes)", local_addr_.to_string().c_str(), len, slot.capacity);
    return 0;
}

uint32_t UdpLink::rx_burst_rest(RxDatagram *slots, uint32_t n)
{
    // A single busy socket and no quiet one due in this call, which rx_burst did not take
    // inline (a batch, or aggregates): poll just it, as the loop below would, without the loop.
    static_assert(kUdpBusyPollEvery % kUdpIdlePollEvery == 0, "busy polls fall on idle-poll calls");
    gro_lent_ = false;   // what the previous call lent is the caller's no longer
    if (only_hot_due()) {
        return rx_from(rx_hot_, slots, n);
    }
    const uint32_t count = static_cast<uint32_t>(socks_.size());
    // (A sweep takes the turn too: it polls the sockets only for the slots that the staged
    // aggregates leave, and they may leave none.)
    if (gro_count_ != 0 && count > 1 && rx_calls_ % kUdpBusyPollEvery == 0) {
        gro_quiet_owed_ = true;
    }
    if (gro_quiet_owed_ && gro_count_ < kUdpGroBuffers) {
        // What active sockets staged fills the slots first, for as long as they keep sending:
        // a quiet socket's turn (owed since the last busy-poll call, until a staging buffer
        // is free) stages its aggregates behind, before this call lends any.
        gro_quiet_owed_ = false;
        gro_stage_quiet();
    }
    uint32_t filled = gro_count_ != 0 ? gro_drain(slots, n) : 0;
    if (count == 1) {
        return filled + (filled < n ? rx_from(0, slots + filled, n - filled) : 0);
    }
    // Several sockets (see "Polling several sockets" in udp_link.h). Even while active
    // sockets keep the slots full, a quiet one gets its turn, first.
    if (filled < n && rx_calls_ % kUdpBusyPollEvery == 0) {
        filled += rx_quiet(slots + filled, n - filled);
    }
    // The active ones (after a gap, every one), from a start that rotates, so that none waits
    // behind one that fills the slots.
    // (Indices wrap by comparison, not by a division: this runs on every poll.)
    rx_start_ = rx_start_ + 1 < count ? rx_start_ + 1 : 0;
    uint32_t due = 0;
    for (uint32_t k = 0, i = rx_start_; k < count; ++k, i = i + 1 < count ? i + 1 : 0) {
        if (rx_sweep_ || active(i)) {
            rx_due_[due++] = i;
        }
    }
    const bool any_active = due != 0;
    if (due >= kUdpReadyCheckFrom && filled < n) {
        // One poll(2) tells which of them hold anything (see "Polling several sockets"); the
        // others are left as an empty receive would leave them.
        for (uint32_t k = 0; k < due; ++k) {
            rx_pollfds_[k].fd = socks_[rx_due_[k]].fd;
            rx_pollfds_[k].events = POLLIN;
            rx_pollfds_[k].revents = 0;
        }
        if (::poll(rx_pollfds_.get(), due, 0) >= 0) {
            uint32_t ready = 0;
            for (uint32_t k = 0; k < due; ++k) {
                if (rx_pollfds_[k].revents != 0) {
                    rx_due_[ready++] = rx_due_[k];
                } else {
                    found_empty(socks_[rx_due_[k]]);
                }
            }
            due = ready;
        }
    }
    for (uint32_t k = 0; k < due && filled < n; ++k) {
        filled += rx_from(rx_due_[k], slots + filled, n - filled);
    }
    // Nothing from them: a quiet one, on every call while none is active.
    if (filled == 0 && !rx_sweep_ && (!any_active || rx_calls_ % kUdpIdlePollEvery == 0)) {
        filled += rx_quiet(slots, n);
    }
    return filled;
}

__attribute__((always_inline)) inline uint32_t UdpLink::next_quiet()
{
    const uint32_t count = static_cast<uint32_t>(socks_.size());
    for (uint32_t k = 0, i = rx_turn_ < count ? rx_turn_ : 0; k < count;
         ++k, i = i + 1 < count ? i + 1 : 0) {
        if (!active(i)) {
            rx_turn_ = i + 1;
            return i;
        }
    }
    return count;
}

void UdpLink::gro_stage_quiet()
{
    const uint32_t i = next_quiet();
    if (i < socks_.size()) {
        bool queue_empty;
        gro_stage(i, &queue_empty);   // (a hard error is counted there)
    }
}

__attribute__((always_inline)) inline uint32_t UdpLink::rx_quiet(RxDatagram *slots,
                                                                 uint32_t n)
{
    if (gro_lent_) {
        // This call lent staged datagrams: the quiet socket could stage nothing now, so its
        // turn stays owed (gro_stage_quiet, next call).
        gro_quiet_owed_ = true;
        return 0;
    }
    const uint32_t i = next_quiet();
    return i < socks_.size() ? rx_from(i, slots, n) : 0;
}

__attribute__((always_inline)) inline uint32_t UdpLink::rx_from(uint32_t index, RxDatagram *slots,
                                                                uint32_t n)
{
    if (gro_) {
        return rx_gro_from(index, slots, n);
    }
    Sock &sock = socks_[index];
    if (sock.single) {
        return rx_one(sock, slots[0]);
    }
    uint32_t filled = 0;
    uint32_t errors = 0;
    while (filled < n) {
        // A batch (single receives are rx_one's, above); one datagram when one slot is left.
        const uint32_t m = std::min(n - filled, batch_size_);
        // The pointers into rx_names_, rx_iov_ and rx_control_ never change (set in init);
        // the caller's slots usually do not either (the Nic keeps its slots posted), so most
        // calls only reset what the kernel writes back.
        for (uint32_t i = 0; i < m; ++i) {
            const RxDatagram &slot = slots[filled + i];
            if (rx_iov_[i].iov_base != slot.buf || rx_iov_[i].iov_len != slot.capacity) {
                rx_iov_[i].iov_base = slot.buf;
                rx_iov_[i].iov_len = slot.capacity;
            }
        }
        const int got = receive_batch(sock, m);
        if (got < 0) {
            if (++errors >= kUdpMaxRxErrorsPerBurst) {
                break;
            }
            continue;
        }

        // Keep the datagrams that fit; move later ones over the slots of dropped ones.
        uint32_t kept = 0;
        for (uint32_t i = 0; i < static_cast<uint32_t>(got); ++i) {
            const struct mmsghdr &msg = rx_msgs_[i];
            const RxDatagram &slot = slots[filled + i];
            if (msg.msg_len > slot.capacity || (msg.msg_hdr.msg_flags & MSG_TRUNC) != 0) {
                ++stats_.rx_oversize;
                SRCNIC_LOG_RATELIMITED(LogLevel::kWarn,
                                       "udp link %s: dropping a %u-byte datagram: longer than the "
                                       "receive slot (%u bytes)", local_addr_.to_string().c_str(),
                                       msg.msg_len, slot.capacity);
                continue;
            }
            RxDatagram &out = slots[filled + kept];
            if (kept != i) {
                std::memmove(out.buf, slot.buf, msg.msg_len);
            }
            out.len = msg.msg_len;
            out.data = out.buf;
            take_source(sock, i, &out.src);
            ++stats_.rx_datagrams;
            stats_.rx_bytes += msg.msg_len;
            ++kept;
        }
        filled += kept;
        // A single receive ends the burst: the next poll batches if a stream has started.
        if (static_cast<uint32_t>(got) < m || m == 1) {
            break;
        }
    }
    return filled;
}

uint32_t UdpLink::gro_drain(RxDatagram *slots, uint32_t n)
{
    uint32_t filled = 0;
    while (gro_count_ != 0 && filled < n) {
        GroStaged &st = gro_staged_[gro_head_];
        const uint32_t len = std::min(st.seg, st.end - st.off);
        RxDatagram &slot = slots[filled];
        if (st.dropped) {
            st.off = st.end;
        } else if (len > slot.capacity) {
            ++stats_.rx_oversize;
            SRCNIC_LOG_RATELIMITED(LogLevel::kWarn,
                                   "udp link %s: dropping a %u-byte datagram: longer than the "
                                   "receive slot (%u bytes)", local_addr_.to_string().c_str(),
                                   len, slot.capacity);
        } else {
            const uint8_t *at = &gro_mem_[gro_head_ * kUdpGroBufferSize + st.off];
            if (slot.borrow) {
                slot.data = at;   // lent: the staging buffers stay as they are until the next
                gro_lent_ = true; // rx_burst call (rx_gro_from stages no more in this one)
            } else {
                std::memcpy(slot.buf, at, len);
                slot.data = slot.buf;
            }
            slot.len = len;
            slot.src = st.src;
            ++stats_.rx_datagrams;
            stats_.rx_bytes += len;
            ++filled;
        }
        st.off += len;
        if (st.off >= st.end) {
            gro_head_ = gro_head_ + 1 < kUdpGroBuffers ? gro_head_ + 1 : 0;
            --gro_count_;
        }
    }
    return filled;
}

uint32_t UdpLink::rx_gro_from(uint32_t index, RxDatagram *slots, uint32_t n)
{
    uint32_t filled = 0;
    uint32_t errors = 0;
    bool queue_empty = false;
    while (filled < n) {
        // Copy staged datagrams out, in order.
        filled += gro_drain(slots + filled, n - filled);
        if (filled == n || queue_empty || gro_lent_) {
            break;   // (staging again would overwrite what this call has lent)
        }
        // Everything staged is out: stage the next aggregates.
        const int got = gro_stage(index, &queue_empty);
        if (got < 0) {
            if (++errors >= kUdpMaxRxErrorsPerBurst) {
                break;
            }
            continue;
        }
        if (got == 0) {
            break;
        }
    }
    return filled;
}

int UdpLink::gro_stage(uint32_t index, bool *queue_empty_p)
{
    Sock &sock = socks_[index];
    const uint32_t m = std::min(kUdpGroBuffers - gro_count_, batch_size_);
    *queue_empty_p = false;
    if (m == 0) {
        return 0;
    }
    if (gro_count_ == 0) {
        gro_head_ = 0;   // (the first buffers again: a ping-pong keeps to one)
    }
    // The free buffers follow the staged ones round the ring.
    uint32_t at = gro_head_ + gro_count_;
    for (uint32_t i = 0; i < m; ++i, ++at) {
        const uint32_t buf = at < kUdpGroBuffers ? at : at - kUdpGroBuffers;
        rx_iov_[i].iov_base = &gro_mem_[buf * kUdpGroBufferSize];
        rx_iov_[i].iov_len = kUdpGroBufferSize;
    }
    const int got = receive_batch(sock, m);
    if (got < 0) {
        return got;
    }
    *queue_empty_p = static_cast<uint32_t>(got) < m;   // (it had no more)
    for (uint32_t i = 0; i < static_cast<uint32_t>(got); ++i) {
        const struct mmsghdr &msg = rx_msgs_[i];
        const uint32_t seg = gro_segment(msg.msg_hdr);
        const uint32_t pos = gro_head_ + gro_count_;   // (the buffer of rx_iov_[i])
        GroStaged &st = gro_staged_[pos < kUdpGroBuffers ? pos : pos - kUdpGroBuffers];
        st.off = 0;
        st.end = msg.msg_len;
        st.seg = seg != 0 ? seg : msg.msg_len;
        st.dropped = (msg.msg_hdr.msg_flags & MSG_TRUNC) != 0;
        if (st.dropped) {
            ++stats_.rx_oversize;   // longer than a UDP payload can be: not expected (staged
        }                           // all the same: the ring keeps one entry a buffer)
        take_source(sock, i, &st.src);
        ++gro_count_;
        if (st.seg < st.end) {
            ++rx_aggregates_;
            if (sock.peer.family != 0) {
                // (note_received counted the aggregate as one)
                rx_peer_datagrams_ += (st.end + st.seg - 1) / st.seg - 1;
            }
        }
    }
    return got;
}

} // namespace srcnic
