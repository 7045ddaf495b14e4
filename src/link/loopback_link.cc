// The loopback backend: the fabric's address table and each link's preallocated receive queue.
#include "link/loopback_link.h"

#include "core/log.h"

#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <new>

namespace srcnic {

namespace {

// Ports a fabric can hand out (1..65535), plus the unused port 0.
constexpr uint32_t kPortCount = 65536;

} // namespace

// One link of a fabric: its address and its receive queue, a ring of queue_depth fixed-size
// buffers that senders fill under mutex_ and rx_burst empties.
class LoopbackLink final : public Link {
public:
    explicit LoopbackLink(std::shared_ptr<LoopbackFabric> fabric) : fabric_(std::move(fabric)) {}

    ~LoopbackLink() override
    {
        if (port_ != 0) {
            fabric_->remove(port_);
        }
        if (event_fd_ >= 0) {
            ::close(event_fd_);
        }
    }

    LoopbackLink(const LoopbackLink &) = delete;
    LoopbackLink &operator=(const LoopbackLink &) = delete;

    // Allocates the receive queue (the eventfd comes with the first event_fd()).
    srcnic_status_t init()
    {
        const uint32_t depth = fabric_->queue_depth();
        bufs_.reset(new (std::nothrow) uint8_t[static_cast<size_t>(depth) * fabric_->mtu()]);
        lens_.reset(new (std::nothrow) uint32_t[depth]);
        srcs_.reset(new (std::nothrow) LinkAddr[depth]);
        if (bufs_ == nullptr || lens_ == nullptr || srcs_ == nullptr) {
            SRCNIC_LOG_ERROR("loopback link: out of memory for a queue of %u x %u bytes", depth,
                             fabric_->mtu());
            return SRCNIC_ERR_NO_MEMORY;
        }
        return SRCNIC_OK;
    }

    // Takes the address of port (called once, under the fabric's exclusive lock).
    void set_port(uint16_t port)
    {
        port_ = port;
        local_addr_ = LoopbackFabric::addr_of(port);
    }

    uint32_t tx_burst(const TxDatagram *dgrams, uint32_t n) override
    {
        return fabric_->deliver(this, dgrams, n);
    }

    uint32_t rx_burst(RxDatagram *slots, uint32_t n) override
    {
        const uint32_t depth = fabric_->queue_depth();
        const size_t mtu = fabric_->mtu();
        uint32_t filled = 0;
        std::lock_guard<std::mutex> lock(mutex_);
        while (filled < n && count_ > 0) {
            const uint32_t len = lens_[head_];
            RxDatagram &slot = slots[filled];
            if (len > slot.capacity) {
                ++stats_.rx_oversize;
                SRCNIC_LOG_RATELIMITED(LogLevel::kWarn,
                                       "loopback link %s: dropping a %u-byte datagram: longer than "
                                       "the receive slot (%u bytes)",
                                       local_addr_.to_string().c_str(), len, slot.capacity);
            } else {
                if (len > 0) {
                    std::memcpy(slot.buf, &bufs_[head_ * mtu], len);
                }
                slot.len = len;
                slot.data = slot.buf;
                slot.src = srcs_[head_];
                ++stats_.rx_datagrams;
                stats_.rx_bytes += len;
                ++filled;
            }
            head_ = head_ + 1 == depth ? 0 : head_ + 1;
            --count_;
        }
        if (count_ == 0) {
            // An emptied queue starts again at its first slot: a link that is seldom more than
            // a few datagrams deep keeps to a few warm slots instead of walking its whole
            // queue (queue_depth x mtu bytes, mapped on first touch) one page fault at a time.
            head_ = 0;
            clear_event();
        }
        stats_.rx_dropped = dropped_;
        return filled;
    }

    const LinkAddr &local_addr() const override { return local_addr_; }
    uint32_t mtu() const override { return fabric_->mtu(); }
    int event_fd() const override { return open_fd() == SRCNIC_OK ? event_fd_ : -1; }
    srcnic_status_t open_event_fd() override { return open_fd(); }

    const LinkStats &stats() const override
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stats_.rx_dropped = dropped_;
        return stats_;
    }

private:
    friend class LoopbackFabric;

    // Copies a datagram of len bytes into the queue; false if the queue is full. Called by a
    // sender holding mutex_.
    bool enqueue(const LinkAddr &src, const TxDatagram &dgram, uint32_t len)
    {
        const uint32_t depth = fabric_->queue_depth();
        if (count_ == depth) {
            ++dropped_;
            return false;
        }
        uint32_t tail = head_ + count_;
        if (tail >= depth) {
            tail -= depth;
        }
        uint8_t *dst = &bufs_[static_cast<size_t>(tail) * fabric_->mtu()];
        for (uint32_t i = 0; i < dgram.iovcnt; ++i) {
            if (dgram.iov[i].iov_len > 0) {
                std::memcpy(dst, dgram.iov[i].iov_base, dgram.iov[i].iov_len);
                dst += dgram.iov[i].iov_len;
            }
        }
        lens_[tail] = len;
        srcs_[tail] = src;
        if (count_++ == 0) {
            signal_event();
        }
        return true;
    }

    // Creates the eventfd, signalled if the queue holds datagrams already. Only the link's
    // user creates it; senders read event_fd_ under mutex_, as the creation writes it.
    srcnic_status_t open_fd() const
    {
        if (event_fd_ >= 0) {
            return SRCNIC_OK;
        }
        std::lock_guard<std::mutex> lock(mutex_);
        const int fd = ::eventfd(count_ > 0 ? 1 : 0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (fd < 0) {
            SRCNIC_LOG_ERROR("loopback link %s: eventfd failed: %m",
                             local_addr_.to_string().c_str());
            return errno == EMFILE || errno == ENFILE ? SRCNIC_ERR_NO_RESOURCE
                                                      : SRCNIC_ERR_IO_ERROR;
        }
        event_fd_ = fd;
        return SRCNIC_OK;
    }

    // Called under mutex_; nothing to do while nobody asked for the eventfd.
    void signal_event()
    {
        if (event_fd_ < 0) {
            return;
        }
        const uint64_t one = 1;
        if (::write(event_fd_, &one, sizeof(one)) != sizeof(one)) {
            SRCNIC_LOG_RATELIMITED(LogLevel::kError, "loopback link %s: eventfd write failed: %m",
                                   local_addr_.to_string().c_str());
        }
    }

    void clear_event()
    {
        if (event_fd_ < 0) {
            return;
        }
        uint64_t value;
        if (::read(event_fd_, &value, sizeof(value)) != sizeof(value) && errno != EAGAIN) {
            SRCNIC_LOG_RATELIMITED(LogLevel::kError, "loopback link %s: eventfd read failed: %m",
                                   local_addr_.to_string().c_str());
        }
    }

    std::shared_ptr<LoopbackFabric> fabric_; // the fabric; outlives the link
    uint16_t port_ = 0;             // fabric port; 0 until the link has an address
    LinkAddr local_addr_;           // 127.0.0.1:port_
    mutable int event_fd_ = -1;     // eventfd, readable while count_ > 0; -1 until asked for
    mutable LinkStats stats_;       // counters; rx_dropped is copied from dropped_ on reads

    mutable std::mutex mutex_;      // guards the queue, dropped_ and the eventfd's state
    std::unique_ptr<uint8_t[]> bufs_;    // queue_depth buffers of mtu bytes
    std::unique_ptr<uint32_t[]> lens_;   // length of each queued datagram, bytes
    std::unique_ptr<LinkAddr[]> srcs_;   // sender of each queued datagram
    uint32_t head_ = 0;             // index of the oldest queued datagram
    uint32_t count_ = 0;            // datagrams queued
    uint64_t dropped_ = 0;          // datagrams dropped because the queue was full
};

LoopbackFabric::LoopbackFabric(uint32_t mtu, uint32_t queue_depth)
    : mtu_(mtu), queue_depth_(queue_depth)
{
}

LoopbackFabric::~LoopbackFabric() = default;

srcnic_status_t LoopbackFabric::create(uint32_t mtu, uint32_t queue_depth,
                                       std::shared_ptr<LoopbackFabric> *fabric_p)
{
    if (fabric_p == nullptr || mtu == 0 || mtu > kLoopbackMaxMtu || queue_depth == 0 ||
        queue_depth > kLoopbackMaxQueueDepth) {
        SRCNIC_LOG_ERROR("loopback fabric: invalid parameters: mtu %u (1..%u), queue depth %u "
                         "(1..%u)", mtu, kLoopbackMaxMtu, queue_depth, kLoopbackMaxQueueDepth);
        return SRCNIC_ERR_INVALID_PARAM;
    }
    LoopbackFabric *raw = new (std::nothrow) LoopbackFabric(mtu, queue_depth);
    if (raw != nullptr) {
        raw->ports_.reset(new (std::nothrow) LoopbackLink *[kPortCount]());
    }
    if (raw == nullptr || raw->ports_ == nullptr) {
        delete raw;
        SRCNIC_LOG_ERROR("loopback fabric: out of memory");
        return SRCNIC_ERR_NO_MEMORY;
    }
    try {
        *fabric_p = std::shared_ptr<LoopbackFabric>(raw);
    } catch (const std::bad_alloc &) {
        SRCNIC_LOG_ERROR("loopback fabric: out of memory");
        return SRCNIC_ERR_NO_MEMORY;
    }
    return SRCNIC_OK;
}

LinkAddr LoopbackFabric::addr_of(uint16_t port)
{
    LinkAddr addr;
    addr.family = AF_INET;
    addr.port = port;
    addr.ip[0] = 127;
    addr.ip[3] = 1;
    return addr;
}

srcnic_status_t LoopbackFabric::open_link(std::unique_ptr<Link> *link_p)
{
    return open_link(0, link_p);
}

srcnic_status_t LoopbackFabric::open_link(uint16_t port, std::unique_ptr<Link> *link_p)
{
    if (link_p == nullptr) {
        SRCNIC_LOG_ERROR("loopback fabric: no output pointer");
        return SRCNIC_ERR_INVALID_PARAM;
    }
    std::unique_ptr<LoopbackLink> link(new (std::nothrow) LoopbackLink(shared_from_this()));
    if (link == nullptr) {
        SRCNIC_LOG_ERROR("loopback fabric: out of memory for a link");
        return SRCNIC_ERR_NO_MEMORY;
    }
    const srcnic_status_t status = link->init();
    if (status != SRCNIC_OK) {
        return status;
    }

    std::unique_lock<std::shared_mutex> lock(mutex_);
    if (port == 0) {
        for (uint32_t tries = 0; tries < kPortCount - 1 && port == 0; ++tries) {
            if (ports_[next_port_] == nullptr) {
                port = static_cast<uint16_t>(next_port_);
            }
            next_port_ = next_port_ + 1 == kPortCount ? 1 : next_port_ + 1;
        }
        if (port == 0) {
            SRCNIC_LOG_ERROR("loopback fabric: all %u ports are in use", kPortCount - 1);
            return SRCNIC_ERR_NO_RESOURCE;
        }
    } else if (ports_[port] != nullptr) {
        SRCNIC_LOG_ERROR("loopback fabric: port %u is in use", static_cast<unsigned>(port));
        return SRCNIC_ERR_ALREADY_EXISTS;
    }
    ports_[port] = link.get();
    ++link_count_;
    link->set_port(port);
    lock.unlock();

    *link_p = std::move(link);
    return SRCNIC_OK;
}

void LoopbackFabric::remove(uint16_t port)
{
    std::unique_lock<std::shared_mutex> lock(mutex_);
    ports_[port] = nullptr;
    --link_count_;
}

uint32_t LoopbackFabric::link_count() const
{
    std::shared_lock<std::shared_mutex> lock(mutex_);
    return link_count_;
}

LoopbackFabricStats LoopbackFabric::stats() const
{
    LoopbackFabricStats stats;
    stats.delivered = delivered_.load(std::memory_order_relaxed);
    stats.dropped_unknown_dst = dropped_unknown_dst_.load(std::memory_order_relaxed);
    stats.dropped_queue_full = dropped_queue_full_.load(std::memory_order_relaxed);
    return stats;
}

uint32_t LoopbackFabric::deliver(LoopbackLink *from, const TxDatagram *dgrams, uint32_t n)
{
    static const uint8_t kLoopbackIp[4] = {127, 0, 0, 1};
    LinkStats &stats = from->stats_;
    std::shared_lock<std::shared_mutex> table_lock(mutex_);
    // The destination whose queue lock is held, kept across a run of datagrams to it.
    LoopbackLink *held = nullptr;
    std::unique_lock<std::mutex> queue_lock;

    for (uint32_t i = 0; i < n; ++i) {
        const TxDatagram &dgram = dgrams[i];
        size_t len = 0;
        bool valid = dgram.iovcnt <= kLinkMaxIov && (dgram.iovcnt == 0 || dgram.iov != nullptr);
        for (uint32_t j = 0; valid && j < dgram.iovcnt; ++j) {
            len += dgram.iov[j].iov_len;
        }
        if (!valid || len > mtu_) {
            ++stats.tx_errors;
            SRCNIC_LOG_RATELIMITED(LogLevel::kWarn,
                                   "loopback link %s: dropping an invalid datagram to %s (%u iov "
                                   "entries, %zu bytes, mtu %u)",
                                   from->local_addr_.to_string().c_str(),
                                   dgram.dst.to_string().c_str(), dgram.iovcnt, len, mtu_);
            continue;
        }

        LoopbackLink *dst = nullptr;
        if (dgram.dst.family == AF_INET && dgram.dst.port != 0 &&
            std::memcmp(dgram.dst.ip, kLoopbackIp, sizeof(kLoopbackIp)) == 0) {
            dst = ports_[dgram.dst.port];
        }
        if (dst == nullptr) {
            ++stats.tx_errors;
            dropped_unknown_dst_.fetch_add(1, std::memory_order_relaxed);
            SRCNIC_LOG_RATELIMITED(LogLevel::kDebug,
                                   "loopback link %s: dropping a datagram to unknown address %s",
                                   from->local_addr_.to_string().c_str(),
                                   dgram.dst.to_string().c_str());
            continue;
        }

        if (dst != held) {
            if (queue_lock.owns_lock()) {
                queue_lock.unlock();
            }
            queue_lock = std::unique_lock<std::mutex>(dst->mutex_);
            held = dst;
        }
        ++stats.tx_datagrams;
        stats.tx_bytes += len;
        if (dst->enqueue(from->local_addr_, dgram, static_cast<uint32_t>(len))) {
            delivered_.fetch_add(1, std::memory_order_relaxed);
        } else {
            dropped_queue_full_.fetch_add(1, std::memory_order_relaxed);
        }
    }
    return n;
}

} // namespace srcnic
