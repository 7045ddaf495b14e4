// The faulty link: fate decisions, the held copies of each direction and their release.
#include "link/faulty_link.h"

#include "core/clock.h"
#include "core/log.h"
#include "core/random.h"

#include <cstdint>
#include <cstring>
#include <new>

namespace srcnic {

namespace {

// Datagrams moved per inner tx_burst/rx_burst call and per selection of due copies.
constexpr uint32_t kFaultBatch = 64;

bool config_valid(const FaultConfig &cfg, const char *direction)
{
    const struct {
        double value;      // the probability
        const char *name;  // for the message
    } probs[] = {{cfg.drop, "drop"},
                 {cfg.duplicate, "duplicate"},
                 {cfg.reorder, "reorder"},
                 {cfg.corrupt, "corrupt"}};
    for (const auto &p : probs) {
        // Written so that NaN fails too.
        if (!(p.value >= 0 && p.value <= 1)) {
            SRCNIC_LOG_ERROR("faulty link: %s %s probability %g is outside 0..1", direction,
                             p.name, p.value);
            return false;
        }
    }
    if (cfg.delay_us > kFaultMaxDelayUs || cfg.jitter_us > kFaultMaxDelayUs - cfg.delay_us) {
        SRCNIC_LOG_ERROR("faulty link: %s delay %llu us + jitter %llu us exceeds %llu us",
                         direction, static_cast<unsigned long long>(cfg.delay_us),
                         static_cast<unsigned long long>(cfg.jitter_us),
                         static_cast<unsigned long long>(kFaultMaxDelayUs));
        return false;
    }
    return true;
}

} // namespace

// One direction: its faults, its generator and the copies it holds, in arrival order, each in
// a buffer from a fixed pool.
class FaultyLink::Direction {
public:
    // A held copy.
    struct Held {
        uint32_t buf;          // pool buffer index
        uint32_t len;          // datagram length, bytes
        LinkAddr addr;         // destination (tx) or source (rx)
        uint64_t release_ns;   // due once now_ns() reaches this
        uint64_t call;         // the call (FaultyLink::calls_) that took the datagram
        bool after_next;       // reorder: wait for the next datagram released in that call
    };

    srcnic_status_t init(const FaultConfig &cfg, uint64_t seed, uint32_t capacity,
                         uint32_t buf_size)
    {
        cfg_ = cfg;
        rng_.reseed(seed);
        buf_size_ = buf_size;
        bufs_.reset(new (std::nothrow) uint8_t[static_cast<size_t>(capacity) * buf_size]);
        free_.reset(new (std::nothrow) uint32_t[capacity]);
        queue_.reset(new (std::nothrow) Held[capacity]);
        if (bufs_ == nullptr || free_ == nullptr || queue_ == nullptr) {
            return SRCNIC_ERR_NO_MEMORY;
        }
        // Handed out from the top, lowest index first, so that a lightly used pool touches
        // few pages.
        for (uint32_t i = 0; i < capacity; ++i) {
            free_[i] = capacity - 1 - i;
        }
        free_count_ = capacity;
        return SRCNIC_OK;
    }

    void set_config(const FaultConfig &cfg) { cfg_ = cfg; }
    const FaultCounters &counters() const { return counters_; }
    uint32_t held() const { return queue_len_; }
    uint32_t buf_size() const { return buf_size_; }

    // Datagrams that can be taken now: each may need a second buffer for its duplicate.
    uint32_t room() const { return free_count_ / (cfg_.duplicate > 0 ? 2 : 1); }

    // Takes a pool buffer; only after room() said there is one.
    uint32_t alloc() { return free_[--free_count_]; }
    void release(uint32_t buf) { free_[free_count_++] = buf; }
    uint8_t *data(uint32_t buf) { return &bufs_[static_cast<size_t>(buf) * buf_size_]; }
    const Held &at(uint32_t pos) const { return queue_[pos]; }

    // Decides the fate of a datagram of len bytes already copied into pool buffer buf (see
    // faulty_link.h for the order of draws) and queues it, or releases buf if it is dropped.
    void admit(uint32_t buf, uint32_t len, const LinkAddr &addr, uint64_t now, uint64_t call)
    {
        if (rng_.chance(cfg_.drop)) {
            ++counters_.dropped;
            release(buf);
            return;
        }
        const bool duplicate = rng_.chance(cfg_.duplicate);
        if (rng_.chance(cfg_.corrupt) && len > 0) {
            const uint64_t bit = rng_.below(static_cast<uint64_t>(len) * 8);
            data(buf)[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
            ++counters_.corrupted;
        }
        const bool reorder = rng_.chance(cfg_.reorder);
        uint64_t delay_us = cfg_.delay_us;
        if (cfg_.jitter_us > 0) {
            delay_us += rng_.below(cfg_.jitter_us + 1);
        }

        Held &held = queue_[queue_len_++];
        held.buf = buf;
        held.len = len;
        held.addr = addr;
        held.release_ns = now + delay_us * kNsPerUs;
        held.call = call;
        held.after_next = reorder;
        counters_.reordered += reorder ? 1 : 0;
        counters_.delayed += delay_us > 0 ? 1 : 0;
        if (duplicate) {
            Held &copy = queue_[queue_len_++];
            copy = held;
            copy.buf = alloc();
            copy.after_next = false;
            std::memcpy(data(copy.buf), data(buf), len);
            ++counters_.duplicated;
        }
    }

    // Chooses up to max due copies in release order and stores their queue positions in out;
    // returns how many. A reorder copy taken in this call waits for the next copy released
    // with it; one taken in an earlier call goes in its place.
    uint32_t select(uint64_t now, uint64_t call, uint32_t *out, uint32_t max) const
    {
        uint32_t count = 0;
        bool deferring = false;
        uint32_t deferred = 0;
        for (uint32_t pos = 0; pos < queue_len_; ++pos) {
            const Held &held = queue_[pos];
            if (held.release_ns > now) {
                continue;
            }
            if (held.after_next && held.call == call && !deferring) {
                deferring = true;
                deferred = pos;
                continue;
            }
            if (count + (deferring ? 2 : 1) > max) {
                break;
            }
            out[count++] = pos;
            if (deferring) {
                out[count++] = deferred;
                deferring = false;
            }
        }
        return count;
    }

    // Removes the copies at positions[0..count) (distinct, any order) and frees their buffers.
    void remove(const uint32_t *positions, uint32_t count)
    {
        if (count == 0) {
            return;
        }
        for (uint32_t i = 0; i < count; ++i) {
            Held &held = queue_[positions[i]];
            release(held.buf);
            held.len = kRemoved;
        }
        uint32_t kept = 0;
        for (uint32_t pos = 0; pos < queue_len_; ++pos) {
            if (queue_[pos].len != kRemoved) {
                queue_[kept++] = queue_[pos];
            }
        }
        queue_len_ = kept;
    }

private:
    // Marks a removed copy during remove() (no datagram is this long).
    static constexpr uint32_t kRemoved = UINT32_MAX;

    FaultConfig cfg_;                  // this direction's faults
    Random rng_;                       // this direction's generator
    FaultCounters counters_;           // faults injected
    uint32_t buf_size_ = 0;            // bytes per pool buffer (the inner link's max_datagram)
    std::unique_ptr<uint8_t[]> bufs_;  // max_held buffers of buf_size_ bytes
    std::unique_ptr<uint32_t[]> free_; // stack of free buffer indexes (max_held entries)
    uint32_t free_count_ = 0;          // entries on free_
    std::unique_ptr<Held[]> queue_;    // held copies in arrival order (max_held entries;
                                       // each holds a buffer, so it never overflows)
    uint32_t queue_len_ = 0;           // entries in queue_
};

FaultyLink::FaultyLink() = default;

FaultyLink::~FaultyLink() = default;

srcnic_status_t FaultyLink::open(std::unique_ptr<Link> &&inner, const FaultyLinkConfig &cfg,
                                 std::unique_ptr<FaultyLink> *link_p)
{
    if (inner == nullptr || link_p == nullptr) {
        SRCNIC_LOG_ERROR("faulty link: no inner link or no output pointer");
        return SRCNIC_ERR_INVALID_PARAM;
    }
    if (!config_valid(cfg.tx, "tx") || !config_valid(cfg.rx, "rx")) {
        return SRCNIC_ERR_INVALID_PARAM;
    }
    if (cfg.max_held < 2 || cfg.max_held > kFaultMaxHeldLimit) {
        SRCNIC_LOG_ERROR("faulty link: max_held %u is outside 2..%u", cfg.max_held,
                         kFaultMaxHeldLimit);
        return SRCNIC_ERR_INVALID_PARAM;
    }

    std::unique_ptr<FaultyLink> link(new (std::nothrow) FaultyLink());
    if (link != nullptr) {
        link->tx_.reset(new (std::nothrow) Direction());
        link->rx_.reset(new (std::nothrow) Direction());
    }
    if (link == nullptr || link->tx_ == nullptr || link->rx_ == nullptr ||
        link->tx_->init(cfg.tx, cfg.seed, cfg.max_held, inner->max_datagram()) != SRCNIC_OK ||
        link->rx_->init(cfg.rx, cfg.seed ^ kFaultRxSeedXor, cfg.max_held,
                        inner->max_datagram()) != SRCNIC_OK) {
        SRCNIC_LOG_ERROR("faulty link: out of memory for 2 x %u held datagrams of %u bytes",
                         cfg.max_held, inner->max_datagram());
        return SRCNIC_ERR_NO_MEMORY;
    }
    link->inner_ = std::move(inner);
    *link_p = std::move(link);
    return SRCNIC_OK;
}

srcnic_status_t FaultyLink::set_config(const FaultConfig &tx, const FaultConfig &rx)
{
    if (!config_valid(tx, "tx") || !config_valid(rx, "rx")) {
        return SRCNIC_ERR_INVALID_PARAM;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    tx_->set_config(tx);
    rx_->set_config(rx);
    return SRCNIC_OK;
}

FaultStats FaultyLink::fault_stats() const
{
    std::lock_guard<std::mutex> lock(mutex_);
    FaultStats stats;
    stats.tx = tx_->counters();
    stats.rx = rx_->counters();
    return stats;
}

size_t FaultyLink::held() const
{
    std::lock_guard<std::mutex> lock(mutex_);
    return static_cast<size_t>(tx_->held()) + rx_->held();
}

void FaultyLink::flush_tx(uint64_t now, uint64_t call)
{
    uint32_t positions[kFaultBatch];
    struct iovec iov[kFaultBatch];
    TxDatagram out[kFaultBatch];
    for (;;) {
        const uint32_t m = tx_->select(now, call, positions, kFaultBatch);
        if (m == 0) {
            return;
        }
        for (uint32_t i = 0; i < m; ++i) {
            const Direction::Held &held = tx_->at(positions[i]);
            iov[i].iov_base = tx_->data(held.buf);
            iov[i].iov_len = held.len;
            out[i].iov = &iov[i];
            out[i].iovcnt = 1;
            out[i].dst = held.addr;
        }
        const uint32_t sent = inner_->tx_burst(out, m);
        tx_->remove(positions, sent);
        if (sent < m) {
            return;
        }
    }
}

uint32_t FaultyLink::tx_burst(const TxDatagram *dgrams, uint32_t n)
{
    std::lock_guard<std::mutex> lock(mutex_);
    const uint64_t call = ++calls_;
    const uint64_t now = now_ns();
    flush_tx(now, call);

    uint32_t accepted = 0;
    for (; accepted < n; ++accepted) {
        const TxDatagram &dgram = dgrams[accepted];
        bool valid = dgram.iovcnt <= kLinkMaxIov && (dgram.iovcnt == 0 || dgram.iov != nullptr);
        size_t len = 0;
        for (uint32_t i = 0; valid && i < dgram.iovcnt; ++i) {
            len += dgram.iov[i].iov_len;
        }
        if (!valid || len > inner_->path_mtu(dgram.dst)) {
            ++stats_.tx_errors;
            SRCNIC_LOG_RATELIMITED(LogLevel::kWarn,
                                   "faulty link %s: dropping an invalid datagram to %s (%u iov "
                                   "entries, %zu bytes, mtu %u)",
                                   inner_->local_addr().to_string().c_str(),
                                   dgram.dst.to_string().c_str(), dgram.iovcnt, len,
                                   inner_->path_mtu(dgram.dst));
            continue;
        }
        if (tx_->room() == 0) {
            break;
        }
        const uint32_t buf = tx_->alloc();
        uint8_t *data = tx_->data(buf);
        for (uint32_t i = 0; i < dgram.iovcnt; ++i) {
            if (dgram.iov[i].iov_len > 0) {
                std::memcpy(data, dgram.iov[i].iov_base, dgram.iov[i].iov_len);
                data += dgram.iov[i].iov_len;
            }
        }
        tx_->admit(buf, static_cast<uint32_t>(len), dgram.dst, now, call);
        ++stats_.tx_datagrams;
        stats_.tx_bytes += len;
    }

    flush_tx(now, call);
    return accepted;
}

void FaultyLink::pull_rx(uint32_t n, uint64_t now, uint64_t call)
{
    uint32_t bufs[kFaultBatch];
    RxDatagram slots[kFaultBatch];
    while (n > 0) {
        uint32_t m = rx_->room();
        m = m < n ? m : n;
        m = m < kFaultBatch ? m : kFaultBatch;
        if (m == 0) {
            return;
        }
        for (uint32_t i = 0; i < m; ++i) {
            bufs[i] = rx_->alloc();
            slots[i].buf = rx_->data(bufs[i]);
            slots[i].capacity = rx_->buf_size();
            slots[i].len = 0;
        }
        // The slots do not borrow: the inner link copies into the held buffers.
        const uint32_t got = inner_->rx_burst(slots, m);
        for (uint32_t i = 0; i < got; ++i) {
            rx_->admit(bufs[i], slots[i].len, slots[i].src, now, call);
        }
        // Back onto the free stack in reverse order of alloc(), so it is as it was.
        for (uint32_t i = m; i > got; --i) {
            rx_->release(bufs[i - 1]);
        }
        if (got < m) {
            return;
        }
        n -= got;
    }
}

uint32_t FaultyLink::rx_burst(RxDatagram *slots, uint32_t n)
{
    std::lock_guard<std::mutex> lock(mutex_);
    const uint64_t call = ++calls_;
    const uint64_t now = now_ns();
    flush_tx(now, call);
    pull_rx(n, now, call);

    uint32_t positions[kFaultBatch];
    uint32_t filled = 0;
    while (filled < n) {
        const uint32_t want = n - filled < kFaultBatch ? n - filled : kFaultBatch;
        const uint32_t m = rx_->select(now, call, positions, want);
        if (m == 0) {
            break;
        }
        for (uint32_t i = 0; i < m; ++i) {
            const Direction::Held &held = rx_->at(positions[i]);
            RxDatagram &slot = slots[filled];
            if (held.len > slot.capacity) {
                ++stats_.rx_oversize;
                SRCNIC_LOG_RATELIMITED(LogLevel::kWarn,
                                       "faulty link %s: dropping a %u-byte datagram: longer than "
                                       "the receive slot (%u bytes)",
                                       inner_->local_addr().to_string().c_str(), held.len,
                                       slot.capacity);
                continue;
            }
            if (held.len > 0) {
                std::memcpy(slot.buf, rx_->data(held.buf), held.len);
            }
            slot.len = held.len;
            slot.data = slot.buf;
            slot.src = held.addr;
            ++stats_.rx_datagrams;
            stats_.rx_bytes += held.len;
            ++filled;
        }
        rx_->remove(positions, m);
    }
    return filled;
}

} // namespace srcnic
