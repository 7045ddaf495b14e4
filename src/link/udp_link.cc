// The UDP backend: socket setup (bind, buffers, MTU) and batched send and receive.
#include "link/udp_link.h"

#include "core/log.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/udp.h>
#include <linux/sock_diag.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <new>
#include <string>

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

// Control buffer per received datagram: room for one UDP_GRO message, bytes.
constexpr size_t kRxControlSize = CMSG_SPACE(sizeof(int));
// Control buffer per send message: room for one UDP_SEGMENT message, bytes.
constexpr size_t kTxControlSize = CMSG_SPACE(sizeof(uint16_t));
// Gather-list entries per send batch: batch_size datagrams of at most kLinkMaxIov entries.
constexpr uint32_t kTxIovPerDatagram = kLinkMaxIov;
// IPv4 + UDP header bytes.
constexpr uint32_t kIpv4UdpHeaders = 20 + 8;
// IPv6 + UDP header bytes.
constexpr uint32_t kIpv6UdpHeaders = 40 + 8;

const char *family_name(int family)
{
    return family == AF_INET ? "IPv4" : family == AF_INET6 ? "IPv6" : "unknown family";
}

bool is_wildcard(const LinkAddr &addr)
{
    const size_t len = addr.family == AF_INET ? 4 : 16;
    for (size_t i = 0; i < len; ++i) {
        if (addr.ip[i] != 0) {
            return false;
        }
    }
    return true;
}

bool is_loopback(const LinkAddr &addr)
{
    if (addr.family == AF_INET) {
        return addr.ip[0] == 127;
    }
    static const uint8_t kIpv6Loopback[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    return std::memcmp(addr.ip, kIpv6Loopback, sizeof(kIpv6Loopback)) == 0;
}

// Compares the IP of addr with a sockaddr of the same family (IPv6 scope ignored).
bool same_ip(const LinkAddr &addr, const struct sockaddr *sa)
{
    if (sa == nullptr || sa->sa_family != addr.family) {
        return false;
    }
    if (addr.family == AF_INET) {
        const auto *in = reinterpret_cast<const struct sockaddr_in *>(sa);
        return std::memcmp(&in->sin_addr, addr.ip, 4) == 0;
    }
    const auto *in6 = reinterpret_cast<const struct sockaddr_in6 *>(sa);
    return std::memcmp(&in6->sin6_addr, addr.ip, 16) == 0;
}

srcnic_status_t status_from_errno(int err)
{
    switch (err) {
    case EADDRINUSE:
        return SRCNIC_ERR_BUSY;
    case EADDRNOTAVAIL:
        return SRCNIC_ERR_INVALID_ADDR;
    case EAFNOSUPPORT:
        return SRCNIC_ERR_UNSUPPORTED;
    case ENOMEM:
    case ENOBUFS:
        return SRCNIC_ERR_NO_MEMORY;
    case EMFILE:
    case ENFILE:
        return SRCNIC_ERR_NO_RESOURCE;
    default:
        return SRCNIC_ERR_IO_ERROR;
    }
}

} // namespace

srcnic_status_t UdpLink::open(const UdpLinkConfig &cfg, std::unique_ptr<Link> *link_p)
{
    if (link_p == nullptr) {
        SRCNIC_LOG_ERROR("udp link: no output pointer");
        return SRCNIC_ERR_INVALID_PARAM;
    }
    if (cfg.bind_addr.family != AF_INET && cfg.bind_addr.family != AF_INET6) {
        SRCNIC_LOG_ERROR("udp link: bind address %s is neither IPv4 nor IPv6",
                         cfg.bind_addr.to_string().c_str());
        return SRCNIC_ERR_INVALID_PARAM;
    }
    if (cfg.batch_size == 0 || cfg.batch_size > kUdpMaxBatchSize) {
        SRCNIC_LOG_ERROR("udp link: batch size %u is outside 1..%u", cfg.batch_size,
                         kUdpMaxBatchSize);
        return SRCNIC_ERR_INVALID_PARAM;
    }
    if (cfg.peer_sockets > kUdpMaxPeerSockets) {
        SRCNIC_LOG_ERROR("udp link: %u peer sockets is more than the limit of %u", cfg.peer_sockets,
                         kUdpMaxPeerSockets);
        return SRCNIC_ERR_INVALID_PARAM;
    }
    if (cfg.sock_buf_size > static_cast<uint32_t>(INT_MAX)) {
        SRCNIC_LOG_ERROR("udp link: socket buffer size %u is larger than %d", cfg.sock_buf_size,
                         INT_MAX);
        return SRCNIC_ERR_INVALID_PARAM;
    }

    std::unique_ptr<UdpLink> link(new (std::nothrow) UdpLink());
    if (link == nullptr) {
        SRCNIC_LOG_ERROR("udp link: out of memory");
        return SRCNIC_ERR_NO_MEMORY;
    }
    const srcnic_status_t status = link->init(cfg);
    if (status != SRCNIC_OK) {
        return status;
    }
    *link_p = std::move(link);
    return SRCNIC_OK;
}

UdpLink::~UdpLink()
{
    for (const Sock &sock : socks_) {
        if (sock.fd != fd_) {
            ::close(sock.fd);
        }
    }
    if (fd_ >= 0) {
        ::close(fd_);
    }
    if (epoll_fd_ >= 0) {
        ::close(epoll_fd_);
    }
}

void UdpLink::rx_notify(bool on)
{
    if (on == notify_) {
        return;
    }
    notify_ = on;
    for (const Sock &sock : socks_) {
        struct epoll_event ev = {};
        ev.events = EPOLLIN;
        // Adding a socket that holds datagrams makes the set readable at once. A failure
        // (out of memory) leaves a waiter to the Nic's timers: logged, not fatal.
        if (::epoll_ctl(epoll_fd_, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, sock.fd, &ev) != 0) {
            SRCNIC_LOG_RATELIMITED(LogLevel::kError, "udp link %s: epoll_ctl(%s) failed: %m",
                                   local_addr_.to_string().c_str(), on ? "ADD" : "DEL");
        }
    }
}

socklen_t UdpLink::to_sockaddr(const LinkAddr &addr, SockAddr *sa) const
{
    std::memset(sa, 0, sizeof(*sa));
    if (family_ == AF_INET) {
        sa->in.sin_family = AF_INET;
        sa->in.sin_port = htons(addr.port);
        std::memcpy(&sa->in.sin_addr, addr.ip, 4);
        return sizeof(sa->in);
    }
    sa->in6.sin6_family = AF_INET6;
    sa->in6.sin6_port = htons(addr.port);
    std::memcpy(&sa->in6.sin6_addr, addr.ip, 16);
    sa->in6.sin6_scope_id = addr.scope_id;
    return sizeof(sa->in6);
}

srcnic_status_t UdpLink::init(const UdpLinkConfig &cfg)
{
    const std::string bind_text = cfg.bind_addr.to_string();
    family_ = cfg.bind_addr.family;
    batch_size_ = cfg.batch_size;

    fd_ = ::socket(family_, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd_ < 0) {
        const int err = errno;
        SRCNIC_LOG_ERROR("udp link: socket(%s) for %s failed: %m", family_name(family_),
                         bind_text.c_str());
        return status_from_errno(err);
    }

    const int one = 1;
    sock_buf_size_ = cfg.sock_buf_size;
    // The offloads are not chosen yet (gso_, gro_ false): IPv6-only and the buffers.
    if (const char *failed = set_options(fd_)) {
        SRCNIC_LOG_ERROR("udp link: %s for %s failed: %m", failed, bind_text.c_str());
        return SRCNIC_ERR_IO_ERROR;
    }
    int value = 0;
    socklen_t value_len = sizeof(value);
    if (::getsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &value, &value_len) != 0) {
        SRCNIC_LOG_ERROR("udp link: getsockopt(SO_SNDBUF) failed: %m");
        return SRCNIC_ERR_IO_ERROR;
    }
    sndbuf_ = static_cast<uint32_t>(value);
    value_len = sizeof(value);
    if (::getsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &value, &value_len) != 0) {
        SRCNIC_LOG_ERROR("udp link: getsockopt(SO_RCVBUF) failed: %m");
        return SRCNIC_ERR_IO_ERROR;
    }
    rcvbuf_ = static_cast<uint32_t>(value);

    SockAddr bind_sa;
    const socklen_t bind_len = to_sockaddr(cfg.bind_addr, &bind_sa);
    if (::bind(fd_, &bind_sa.sa, bind_len) != 0) {
        const int err = errno;
        const char *why = err == EADDRINUSE      ? " (address already in use)"
                          : err == EADDRNOTAVAIL ? " (address is not local)"
                                                 : "";
        SRCNIC_LOG_ERROR("udp link: bind(%s) failed%s: %m", bind_text.c_str(), why);
        return status_from_errno(err);
    }

    SockAddr local;
    socklen_t local_len = sizeof(local);
    if (::getsockname(fd_, &local.sa, &local_len) != 0) {
        SRCNIC_LOG_ERROR("udp link: getsockname after binding %s failed: %m", bind_text.c_str());
        return SRCNIC_ERR_IO_ERROR;
    }
    local_addr_ = cfg.bind_addr;
    local_addr_.port = ntohs(family_ == AF_INET ? local.in.sin_port : local.in6.sin6_port);

    srcnic_status_t status = choose_mtu(cfg.mtu);
    if (status != SRCNIC_OK) {
        return status;
    }
    socks_.reserve(1 + cfg.peer_sockets);
    socks_.push_back(Sock());
    socks_[0].fd = fd_;
    tx_copy_.reset(new (std::nothrow) uint8_t[kUdpCopySendMax]);
    if (tx_copy_ == nullptr) {
        SRCNIC_LOG_ERROR("udp link: out of memory");
        return SRCNIC_ERR_NO_MEMORY;
    }
    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd_ < 0) {
        SRCNIC_LOG_ERROR("udp link: epoll for %s failed: %m", local_addr_.to_string().c_str());
        return SRCNIC_ERR_IO_ERROR;
    }
    if (cfg.peer_sockets != 0) {
        // SO_REUSEPORT only now that the port is ours: the bind above failed if it was taken,
        // and peer sockets may join it (see "Peer sockets" in udp_link.h).
        if (::setsockopt(fd_, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) == 0) {
            peer_sockets_max_ = cfg.peer_sockets;
        } else {
            SRCNIC_LOG_WARN("udp link: setsockopt(SO_REUSEPORT) for %s failed, no peer sockets: %m",
                            local_addr_.to_string().c_str());
        }
    }

    tx_msgs_.reset(new (std::nothrow) struct mmsghdr[batch_size_]);
    tx_names_.reset(new (std::nothrow) SockAddr[batch_size_]);
    tx_groups_.reset(new (std::nothrow) TxGroup[batch_size_]);
    tx_iov_.reset(new (std::nothrow) struct iovec[batch_size_ * kTxIovPerDatagram]);
    tx_control_.reset(new (std::nothrow) uint8_t[kTxControlSize * batch_size_]);
    rx_msgs_.reset(new (std::nothrow) struct mmsghdr[batch_size_]);
    rx_names_.reset(new (std::nothrow) SockAddr[batch_size_]);
    rx_iov_.reset(new (std::nothrow) struct iovec[batch_size_]);
    rx_control_.reset(new (std::nothrow) uint8_t[kRxControlSize * batch_size_]);
    if (tx_msgs_ == nullptr || tx_names_ == nullptr || tx_groups_ == nullptr ||
        tx_iov_ == nullptr || tx_control_ == nullptr || rx_msgs_ == nullptr ||
        rx_names_ == nullptr || rx_iov_ == nullptr || rx_control_ == nullptr) {
        SRCNIC_LOG_ERROR("udp link: out of memory for a batch of %u datagrams", batch_size_);
        return SRCNIC_ERR_NO_MEMORY;
    }
    std::memset(tx_msgs_.get(), 0, sizeof(struct mmsghdr) * batch_size_);
    std::memset(rx_msgs_.get(), 0, sizeof(struct mmsghdr) * batch_size_);
    for (uint32_t i = 0; i < batch_size_; ++i) {
        struct msghdr &hdr = rx_msgs_[i].msg_hdr;
        hdr.msg_name = &rx_names_[i];
        hdr.msg_namelen = sizeof(SockAddr);
        hdr.msg_iov = &rx_iov_[i];
        hdr.msg_iovlen = 1;
        hdr.msg_control = &rx_control_[kRxControlSize * i];
        hdr.msg_controllen = kRxControlSize;
    }
    std::memset(tx_control_.get(), 0, kTxControlSize * batch_size_);
    // Segmentation offload where the kernel knows the option (a size of 0 leaves datagrams
    // alone; each group sets its own size).
    const int no_segment = 0;
    gso_ = cfg.gso && batch_size_ > 1 &&
           ::setsockopt(fd_, SOL_UDP, UDP_SEGMENT, &no_segment, sizeof(no_segment)) == 0;
    // Receive aggregation where datagrams are small enough for an aggregate to hold several.
    if (cfg.gro && mtu_ <= kUdpGroMaxMtu) {
        gro_mem_.reset(new (std::nothrow) uint8_t[kUdpGroBuffers * kUdpGroBufferSize]);
        const int one_flag = 1;
        gro_ = gro_mem_ != nullptr &&
               ::setsockopt(fd_, SOL_UDP, UDP_GRO, &one_flag, sizeof(one_flag)) == 0;
        if (!gro_) {
            gro_mem_.reset();
        }
    }
    return SRCNIC_OK;
}

const char *UdpLink::set_options(int fd, bool gro) const
{
    const int one = 1;
    const int no_segment = 0;
    if (family_ == AF_INET6 && ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) != 0) {
        return "setsockopt(IPV6_V6ONLY)";
    }
    if (sock_buf_size_ != 0 && set_buffers(fd, sock_buf_size_) != SRCNIC_OK) {
        return "setting the socket buffers";
    }
    if (gso_ && ::setsockopt(fd, SOL_UDP, UDP_SEGMENT, &no_segment, sizeof(no_segment)) != 0) {
        return "setsockopt(UDP_SEGMENT)";
    }
    if (gro && gro_ && ::setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof(one)) != 0) {
        return "setsockopt(UDP_GRO)";
    }
    return nullptr;
}

uint32_t UdpLink::rx_queue_capacity(uint32_t size) const
{
    // A socket's receive buffer is charged each datagram's truesize: a small one's data with
    // the kernel's bookkeeping in a power-of-two allocation, a large one's page fragments (on
    // loopback, 1472 bytes cost 2.3 KB, 8972 bytes 17 KB, 65000 bytes 71 KB; a 1472-byte
    // datagram over a veth the same). Estimated from above: at least as many as this fit.
    uint64_t truesize = size + 8192;
    if (size <= 16384) {
        truesize = 1024;
        while (truesize < size + 576) {
            truesize *= 2;
        }
        truesize += 768;
    }
    return static_cast<uint32_t>(rcvbuf_ / truesize);
}

srcnic_status_t UdpLink::set_buffers(int fd, uint32_t size) const
{
    const int value = static_cast<int>(size);
    const struct {
        int force;          // option that ignores the sysctl cap (needs CAP_NET_ADMIN)
        int plain;          // option capped by net.core.[wr]mem_max
        const char *name;   // for messages
    } options[] = {{SO_SNDBUFFORCE, SO_SNDBUF, "SO_SNDBUF"},
                   {SO_RCVBUFFORCE, SO_RCVBUF, "SO_RCVBUF"}};
    for (const auto &opt : options) {
        if (::setsockopt(fd, SOL_SOCKET, opt.force, &value, sizeof(value)) == 0) {
            continue;
        }
        if (::setsockopt(fd, SOL_SOCKET, opt.plain, &value, sizeof(value)) != 0) {
            SRCNIC_LOG_ERROR("udp link: setsockopt(%s, %u) failed: %m", opt.name, size);
            return SRCNIC_ERR_IO_ERROR;
        }
    }
    return SRCNIC_OK;
}

srcnic_status_t UdpLink::choose_mtu(uint32_t configured)
{
    const uint32_t headers = family_ == AF_INET ? kIpv4UdpHeaders : kIpv6UdpHeaders;
    const uint32_t proto_max = family_ == AF_INET ? kUdpMaxMtuIpv4 : kUdpMaxMtuIpv6;

    struct ifaddrs *ifas = nullptr;
    if (::getifaddrs(&ifas) != 0) {
        SRCNIC_LOG_ERROR("udp link: getifaddrs failed: %m");
        return SRCNIC_ERR_IO_ERROR;
    }
    auto if_mtu = [this](const char *name, uint32_t *mtu_p) {
        struct ifreq ifr;
        std::memset(&ifr, 0, sizeof(ifr));
        std::strncpy(ifr.ifr_name, name, IFNAMSIZ - 1);
        if (::ioctl(fd_, SIOCGIFMTU, &ifr) != 0 || ifr.ifr_mtu <= 0) {
            SRCNIC_LOG_ERROR("udp link: cannot read the MTU of interface %s: %m", name);
            return false;
        }
        *mtu_p = static_cast<uint32_t>(ifr.ifr_mtu);
        return true;
    };

    // The interface that holds the bound address; for an address in 127.0.0.0/8 that no
    // interface lists (only 127.0.0.1 is), the loopback interface of the family.
    const struct ifaddrs *holder = nullptr;
    if (!is_wildcard(local_addr_)) {
        for (const struct ifaddrs *ifa = ifas; holder == nullptr && ifa != nullptr;
             ifa = ifa->ifa_next) {
            if (same_ip(local_addr_, ifa->ifa_addr)) {
                holder = ifa;
            }
        }
        for (const struct ifaddrs *ifa = ifas;
             holder == nullptr && is_loopback(local_addr_) && ifa != nullptr;
             ifa = ifa->ifa_next) {
            if (ifa->ifa_addr != nullptr && ifa->ifa_addr->sa_family == family_ &&
                (ifa->ifa_flags & IFF_LOOPBACK) != 0) {
                holder = ifa;
            }
        }
    }

    uint32_t automatic = kUdpLoopbackMtu;
    uint32_t local = 0;   // datagram size for peers at the bound address, if larger
    uint32_t limit = proto_max;
    std::string limit_reason = std::string("the ") + family_name(family_) + " UDP limit";
    bool ok = true;
    if (holder != nullptr) {
        uint32_t ifmtu = 0;
        ok = if_mtu(holder->ifa_name, &ifmtu);
        if (ok && ifmtu <= headers) {
            SRCNIC_LOG_ERROR("udp link: interface %s has an MTU of %u bytes, too small for UDP",
                             holder->ifa_name, ifmtu);
            ok = false;
        }
        if (ok && ifmtu - headers < limit) {
            limit = ifmtu - headers;
            limit_reason = std::string("interface ") + holder->ifa_name + " MTU " +
                           std::to_string(ifmtu) + " minus " + std::to_string(headers) +
                           " header bytes";
        }
        const bool loopback = (holder->ifa_flags & IFF_LOOPBACK) != 0;
        automatic = loopback && kUdpLoopbackMtu < limit ? kUdpLoopbackMtu : limit;
        // Peers at the bound address itself are reached over the loopback interface: they
        // get loopback-sized datagrams (local_mtu_), unless a size was configured.
        for (const struct ifaddrs *ifa = ifas; ok && !loopback && configured == 0 &&
                                               local == 0 && ifa != nullptr;
             ifa = ifa->ifa_next) {
            uint32_t lomtu = 0;
            if (ifa->ifa_addr != nullptr && ifa->ifa_addr->sa_family == family_ &&
                (ifa->ifa_flags & (IFF_LOOPBACK | IFF_UP)) == (IFF_LOOPBACK | IFF_UP) &&
                if_mtu(ifa->ifa_name, &lomtu) && lomtu > headers) {
                local = std::min({kUdpLoopbackMtu, lomtu - headers, proto_max});
            }
        }
    } else {
        // The wildcard, or an address no interface holds (non-local binding allowed by
        // sysctl): the smallest MTU of the interfaces a datagram may leave by.
        for (const struct ifaddrs *ifa = ifas; ok && ifa != nullptr; ifa = ifa->ifa_next) {
            if (ifa->ifa_addr == nullptr || ifa->ifa_addr->sa_family != family_ ||
                (ifa->ifa_flags & IFF_UP) == 0 || (ifa->ifa_flags & IFF_LOOPBACK) != 0) {
                continue;
            }
            uint32_t ifmtu = 0;
            ok = if_mtu(ifa->ifa_name, &ifmtu);
            if (ok && ifmtu > headers && ifmtu - headers < automatic) {
                automatic = ifmtu - headers;
            }
        }
    }
    ::freeifaddrs(ifas);
    if (!ok) {
        return SRCNIC_ERR_IO_ERROR;
    }

    if (configured == 0) {
        mtu_ = automatic < limit ? automatic : limit;
        local_mtu_ = std::max(mtu_, local);
        return SRCNIC_OK;
    }
    if (configured > limit) {
        SRCNIC_LOG_ERROR("udp link: mtu %u is too large for %s: at most %u (%s)", configured,
                         local_addr_.to_string().c_str(), limit, limit_reason.c_str());
        return SRCNIC_ERR_INVALID_PARAM;
    }
    mtu_ = configured;
    local_mtu_ = configured;
    return SRCNIC_OK;
}

uint32_t UdpLink::path_mtu(const LinkAddr &peer) const
{
    return local_mtu_ != mtu_ && is_local(peer) ? local_mtu_ : mtu_;
}

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

uint32_t UdpLink::open_peer_socket(const LinkAddr &dst)
{
    // The bound socket's options and offloads, SO_REUSEPORT to share its port, then bind and
    // connect. A local peer's loopback-sized datagrams go straight into the receive slots:
    // no aggregates on its socket, whose staging would cost a copy of each.
    const bool gro = !(is_local(dst) && local_mtu_ > kUdpGroMaxMtu);
    const int fd = ::socket(family_, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    const char *step = fd < 0 ? "socket()" : set_options(fd, gro);
    const int one = 1;
    if (step == nullptr && ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0) {
        step = "setsockopt(SO_REUSEPORT)";
    }
    SockAddr sa;
    if (step == nullptr && ::bind(fd, &sa.sa, to_sockaddr(local_addr_, &sa)) != 0) {
        step = "bind";
    }
    if (step == nullptr && ::connect(fd, &sa.sa, to_sockaddr(dst, &sa)) != 0) {
        step = "connect";
    }
    struct epoll_event ev = {};
    ev.events = EPOLLIN;
    if (step == nullptr && notify_ && ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
        step = "epoll_ctl";
    }
    if (step != nullptr) {
        // Not an error for the traffic: the destination stays on the bound socket.
        SRCNIC_LOG_WARN("udp link %s: no peer socket for %s (%s failed: %m); it stays on the "
                        "bound socket", local_addr_.to_string().c_str(), dst.to_string().c_str(),
                        step);
        if (fd >= 0) {
            ::close(fd);
        }
        return 0;
    }
    socks_.push_back(Sock());
    socks_.back().fd = fd;
    socks_.back().peer = dst;
    socks_.back().gro = gro;
    return static_cast<uint32_t>(socks_.size() - 1);
}

bool UdpLink::add_tx(const TxDatagram *dgrams, uint32_t index, uint32_t len)
{
    const TxDatagram &dgram = dgrams[index];
    if (tx_iov_used_ + dgram.iovcnt > batch_size_ * kTxIovPerDatagram) {
        return false;
    }
    uint32_t &msgs = tx_msg_count_;
    // A batch goes out on one socket.
    const uint32_t sock = sock_for(dgram.dst);
    if (msgs == 0) {
        tx_sock_ = sock;
    } else if (sock != tx_sock_) {
        return false;
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

const LinkStats &UdpLink::stats() const
{
    // The kernel counts what it drops for a socket (a full receive buffer, a bad checksum);
    // read on demand, so receiving pays nothing for it. The counters are 32 bits wide: add
    // what is new, modulo 2^32.
    for (Sock &sock : socks_) {
        uint32_t info[SK_MEMINFO_VARS] = {};
        socklen_t len = sizeof(info);
        if (::getsockopt(sock.fd, SOL_SOCKET, SO_MEMINFO, info, &len) == 0 &&
            len > SK_MEMINFO_DROPS * sizeof(uint32_t)) {
            stats_.rx_dropped += static_cast<uint32_t>(info[SK_MEMINFO_DROPS] - sock.drops_seen);
            sock.drops_seen = info[SK_MEMINFO_DROPS];
        }
    }
    return stats_;
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
    // those: reset just what the previous call used (an empty poll touches no header).
    const uint32_t used = std::min(rx_written_, m);
    for (uint32_t i = 0; i < used; ++i) {
        rx_msgs_[i].msg_hdr.msg_namelen = sizeof(SockAddr);
        rx_msgs_[i].msg_hdr.msg_controllen = kRxControlSize;
    }
    rx_written_ = 0;
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
        rx_written_ = static_cast<uint32_t>(got);
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
    uint32_t filled = gro_count_ != 0 ? gro_drain(slots, n) : 0;
    if (count == 1) {
        return filled + (filled < n ? rx_from(0, slots + filled, n - filled) : 0);
    }
    // Several sockets (see "Polling several sockets" in udp_link.h). Even while active
    // sockets keep the slots full, a quiet one gets its turn, first.
    if (filled < n && rx_calls_ % kUdpBusyPollEvery == 0) {
        filled += rx_quiet(slots + filled, n - filled);
    }
    // The active ones, from a start that rotates, so that none waits behind one that fills
    // the slots.
    // (Indices wrap by comparison, not by a division: this runs on every poll.)
    bool any_active = false;
    rx_start_ = rx_start_ + 1 < count ? rx_start_ + 1 : 0;
    for (uint32_t k = 0, i = rx_start_; k < count && filled < n; ++k, i = i + 1 < count ? i + 1 : 0) {
        if (active(i)) {
            any_active = true;
            filled += rx_from(i, slots + filled, n - filled);
        }
    }
    // Nothing from them: a quiet one, on every call while none is active.
    if (filled == 0 && (!any_active || rx_calls_ % kUdpIdlePollEvery == 0)) {
        filled += rx_quiet(slots, n);
    }
    return filled;
}

__attribute__((always_inline)) inline uint32_t UdpLink::rx_quiet(RxDatagram *slots,
                                                                 uint32_t n)
{
    const uint32_t count = static_cast<uint32_t>(socks_.size());
    for (uint32_t k = 0, i = rx_turn_ < count ? rx_turn_ : 0; k < count;
         ++k, i = i + 1 < count ? i + 1 : 0) {
        if (!active(i)) {
            rx_turn_ = i + 1;
            return rx_from(i, slots, n);
        }
    }
    return 0;
}

__attribute__((always_inline)) inline uint32_t UdpLink::rx_from(uint32_t index, RxDatagram *slots,
                                                                uint32_t n)
{
    if (gro_ && socks_[index].gro) {
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
        if (len > slot.capacity) {
            ++stats_.rx_oversize;
            SRCNIC_LOG_RATELIMITED(LogLevel::kWarn,
                                   "udp link %s: dropping a %u-byte datagram: longer than the "
                                   "receive slot (%u bytes)", local_addr_.to_string().c_str(),
                                   len, slot.capacity);
        } else {
            const uint8_t *at = &gro_mem_[st.buf * kUdpGroBufferSize + st.off];
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
            ++gro_head_;
            --gro_count_;
        }
    }
    return filled;
}

uint32_t UdpLink::rx_gro_from(uint32_t index, RxDatagram *slots, uint32_t n)
{
    Sock &sock = socks_[index];
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
        const uint32_t m = std::min(kUdpGroBuffers, batch_size_);
        for (uint32_t i = 0; i < m; ++i) {
            rx_iov_[i].iov_base = &gro_mem_[i * kUdpGroBufferSize];
            rx_iov_[i].iov_len = kUdpGroBufferSize;
        }
        const int got = receive_batch(sock, m);
        if (got < 0) {
            if (++errors >= kUdpMaxRxErrorsPerBurst) {
                break;
            }
            continue;
        }
        gro_head_ = 0;
        gro_count_ = 0;
        for (uint32_t i = 0; i < static_cast<uint32_t>(got); ++i) {
            const struct mmsghdr &msg = rx_msgs_[i];
            const uint32_t seg = gro_segment(msg.msg_hdr);
            if ((msg.msg_hdr.msg_flags & MSG_TRUNC) != 0) {
                ++stats_.rx_oversize;   // longer than a UDP payload can be: not expected
                continue;
            }
            GroStaged &st = gro_staged_[gro_count_++];
            st.buf = i;
            st.off = 0;
            st.end = msg.msg_len;
            st.seg = seg != 0 ? seg : msg.msg_len;
            take_source(sock, i, &st.src);
            if (st.seg < st.end) {
                ++rx_aggregates_;
            }
        }
        queue_empty = static_cast<uint32_t>(got) < m;
        if (got == 0) {
            break;
        }
    }
    return filled;
}

} // namespace srcnic
