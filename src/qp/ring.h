// A single-producer single-consumer ring of fixed-size, pointer-free entries: the shape of a
// QP's send, receive and completion queues. Indices are free-running 32-bit counters, so the
// ring (with its entries) can later be placed in memory shared with a node agent unchanged.
#ifndef SRCNIC_QP_RING_H
#define SRCNIC_QP_RING_H

#include <atomic>
#include <cstdint>
#include <memory>
#include <type_traits>

namespace srcnic {

template <typename Entry> class Ring {
    static_assert(std::is_trivially_copyable<Entry>::value, "ring entries are plain data");

public:
    // size: a power of 2.
    explicit Ring(uint32_t size) : mask_(size - 1), entries_(new Entry[size]) {}

    uint32_t size() const { return mask_ + 1; }
    uint32_t count() const
    {
        return tail_.load(std::memory_order_acquire) - head_.load(std::memory_order_acquire);
    }
    bool empty() const { return count() == 0; }
    bool full() const { return count() == size(); }

    // Producer side.
    bool push(const Entry &e)
    {
        const uint32_t tail = tail_.load(std::memory_order_relaxed);
        if (tail - head_.load(std::memory_order_acquire) == size()) {
            return false;
        }
        entries_[tail & mask_] = e;
        tail_.store(tail + 1, std::memory_order_release);
        return true;
    }

    // Consumer side: the oldest entry (ring not empty), then pop it.
    const Entry &front() const { return entries_[head_.load(std::memory_order_relaxed) & mask_]; }
    void pop() { head_.store(head_.load(std::memory_order_relaxed) + 1, std::memory_order_release); }

private:
    const uint32_t mask_;
    std::unique_ptr<Entry[]> entries_;
    std::atomic<uint32_t> head_{0};   // next entry to consume
    std::atomic<uint32_t> tail_{0};   // next entry to produce
};

} // namespace srcnic

#endif
