// The UDP backend's control path: opening and binding the socket, its options and buffers, the
// MTU and the receive queue's capacity, the connected peer sockets, the event fd. The data path
// (batched send and receive) is in udp_link_data.cc.
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
    rx_due_.reset(new uint32_t[1 + cfg.peer_sockets]);
    rx_pollfds_.reset(new struct pollfd[1 + cfg.peer_sockets]);
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
    // Receive aggregation where the kernel has it.
    if (cfg.gro) {
        gro_mem_.reset(new (std::nothrow) uint8_t[kUdpGroBuffers * kUdpGroBufferSize]);
        if (gro_mem_ != nullptr) {
            // Faulted in now, not by the kernel's copy of the first aggregates (see "Receive
            // offload" in udp_link.h).
            std::memset(gro_mem_.get(), 0, kUdpGroBuffers * kUdpGroBufferSize);
        }
        const int one_flag = 1;
        gro_ = gro_mem_ != nullptr &&
               ::setsockopt(fd_, SOL_UDP, UDP_GRO, &one_flag, sizeof(one_flag)) == 0;
        if (!gro_) {
            gro_mem_.reset();
        }
    }
    return SRCNIC_OK;
}

const char *UdpLink::set_options(int fd) const
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
    if (gro_ && ::setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof(one)) != 0) {
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

uint32_t UdpLink::open_peer_socket(const LinkAddr &dst)
{
    // The bound socket's options and offloads, SO_REUSEPORT to share its port, then bind and
    // connect.
    const int fd = ::socket(family_, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    const char *step = fd < 0 ? "socket()" : set_options(fd);
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
    socks_.back().strays = true;
    // The peer's datagrams come here from now on: polled on every call from the start (see
    // "Polling several sockets"), not only on a quiet socket's turn.
    socks_.back().last_rx_call = rx_calls_ != 0 ? rx_calls_ : 1;
    rx_others_last_ = socks_.back().last_rx_call;
    return static_cast<uint32_t>(socks_.size() - 1);
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

} // namespace srcnic
