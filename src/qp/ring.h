// The single-producer single-consumer rings of a QP (send, receive and completion queues) and the
// layout of one QP's rings in one block of memory. A ring is fixed-size plain entries plus two
// free-running 32-bit counters; each side keeps its own counter privately and only publishes it,
// so that the block can be shared with another process (the node agent): a side never reads back
// what it published, and what it reads of the other side's counter is checked before use.
#ifndef SRCNIC_QP_RING_H
#define SRCNIC_QP_RING_H

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace srcnic {

// The counters two sides of a ring publish, each on a cache line of its own.
struct RingIndices {
    alignas(64) std::atomic<uint32_t> produced{0};   // entries written (free-running)
    alignas(64) std::atomic<uint32_t> consumed{0};   // entries taken (free-running)
};
static_assert(std::atomic<uint32_t>::is_always_lock_free, "ring counters live in shared memory");

// The producer side of a ring.
template <typename Entry> class RingWriter {
    static_assert(std::is_trivially_copyable<Entry>::value, "ring entries are plain data");

public:
    RingWriter() = default;
    // size: a power of 2; idx and entries stay valid while the writer is used.
    RingWriter(RingIndices *idx, Entry *entries, uint32_t size)
        : idx_(idx), entries_(entries), mask_(size - 1), produced_(idx->produced.load(std::memory_order_relaxed))
    {
    }

    uint32_t size() const { return mask_ + 1; }
    // Entries written and not yet taken by the consumer, as far as its published counter tells;
    // more than size() only if the consumer published nonsense (see corrupt()).
    uint32_t used() const { return produced_ - idx_->consumed.load(std::memory_order_acquire); }
    bool full() const { return used() >= size(); }
    // The consumer published a counter no honest consumer could (ahead of what was written).
    bool corrupt() const { return used() > size(); }

    // Appends e; false if the ring is full (or the consumer's counter is corrupt).
    bool push(const Entry &e)
    {
        if (used() >= size()) {
            return false;
        }
        entries_[produced_ & mask_] = e;
        ++produced_;
        idx_->produced.store(produced_, std::memory_order_release);
        return true;
    }

private:
    RingIndices *idx_ = nullptr;
    Entry *entries_ = nullptr;
    uint32_t mask_ = 0;
    uint32_t produced_ = 0;   // private: the published value is never read back
};

// The consumer side of a ring.
template <typename Entry> class RingReader {
    static_assert(std::is_trivially_copyable<Entry>::value, "ring entries are plain data");

public:
    RingReader() = default;
    RingReader(RingIndices *idx, Entry *entries, uint32_t size)
        : idx_(idx), entries_(entries), mask_(size - 1), consumed_(idx->consumed.load(std::memory_order_relaxed))
    {
    }

    uint32_t size() const { return mask_ + 1; }
    // Entries waiting; more than size() only if the producer published nonsense.
    uint32_t available() const { return idx_->produced.load(std::memory_order_acquire) - consumed_; }
    bool empty() const { return available() == 0; }
    bool corrupt() const { return available() > size(); }

    // Copies the oldest entry into *e (its own copy: a producer in another process may rewrite
    // the slot at any time, so a consumer checks and uses only the copy); false if there is
    // none or the producer's counter is corrupt.
    bool peek(Entry *e) const
    {
        const uint32_t n = available();
        if (n == 0 || n > size()) {
            return false;
        }
        *e = entries_[consumed_ & mask_];
        return true;
    }
    void pop()
    {
        ++consumed_;
        idx_->consumed.store(consumed_, std::memory_order_release);
    }
    // Entries taken so far (the index of the next one, free-running).
    uint32_t position() const { return consumed_; }

private:
    RingIndices *idx_ = nullptr;
    const Entry *entries_ = nullptr;
    uint32_t mask_ = 0;
    uint32_t consumed_ = 0;   // private: the published value is never read back
};

// One QP's three rings in one block: their counters first, then the entries. The completion
// ring holds sq_size + rq_size entries, so every posted work request has a place for its
// completion.
struct QpRingLayout {
    uint32_t sq_size = 0;     // send ring entries (power of 2)
    uint32_t rq_size = 0;     // receive ring entries (power of 2)
    uint32_t cq_size = 0;     // completion ring entries: sq_size + rq_size rounded up to a power of 2
    size_t sq_off = 0;        // byte offsets of the entry arrays in the block
    size_t rq_off = 0;
    size_t cq_off = 0;
    size_t bytes = 0;         // block size, a multiple of 4096

    static uint32_t round_up_pow2(uint32_t v)
    {
        uint32_t p = 1;
        while (p < v) {
            p <<= 1;
        }
        return p;
    }

    template <typename Wqe, typename RecvWqe, typename Cqe>
    static QpRingLayout make(uint32_t sq, uint32_t rq)
    {
        QpRingLayout l;
        l.sq_size = sq;
        l.rq_size = rq;
        l.cq_size = round_up_pow2(sq + rq);
        l.sq_off = 3 * sizeof(RingIndices);
        l.rq_off = l.sq_off + static_cast<size_t>(sq) * sizeof(Wqe);
        l.cq_off = l.rq_off + static_cast<size_t>(rq) * sizeof(RecvWqe);
        l.bytes = (l.cq_off + static_cast<size_t>(l.cq_size) * sizeof(Cqe) + 4095) & ~size_t(4095);
        return l;
    }

    RingIndices *sq_idx(void *block) const { return static_cast<RingIndices *>(block); }
    RingIndices *rq_idx(void *block) const { return static_cast<RingIndices *>(block) + 1; }
    RingIndices *cq_idx(void *block) const { return static_cast<RingIndices *>(block) + 2; }
    template <typename T> T *at(void *block, size_t off) const
    {
        return reinterpret_cast<T *>(static_cast<uint8_t *>(block) + off);
    }
};

} // namespace srcnic

#endif
