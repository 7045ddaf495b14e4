// Registered memory regions and the rkey check every remote access passes (PROTOCOL.md §6): the
// key must name a live region, the whole range must lie inside it, and the region must grant the
// access. A refused access touches no memory.
//
// The table is a fixed array of slots in memory the registering process may share with the node
// agent (a sealed memfd): the process registers (MrTable, one writer at a time under its mutex),
// the engine checks (MrView, lock-free, from any thread or process that maps the slots). A slot
// is read like a seqlock whose sequence is the key itself: a writer clears the key before it
// changes the other fields and publishes the new key last, and a reader accepts what it read only
// if the key was the same before and after, so it never pairs one region's key with another's
// bounds. The agent maps a client's table read-only and trusts nothing in it but what the check
// needs: a client can describe only its own memory, which is the only memory its table can open.
#ifndef SRCNIC_MR_MR_TABLE_H
#define SRCNIC_MR_MR_TABLE_H

#include "core/secure_random.h"

#include <srcnic/status.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace srcnic {

// One registration, 32 bytes.
struct MrSlot {
    std::atomic<uint64_t> key{0};      // rkey: (random << kMrSlotBits) | slot; 0 = free
    std::atomic<uint64_t> base{0};     // first byte (virtual address in the owner's space)
    std::atomic<uint64_t> length{0};   // bytes
    std::atomic<uint32_t> access{0};   // SRCNIC_ACCESS_* flags
    uint32_t reserved = 0;
};
static_assert(sizeof(MrSlot) == 32, "MR slots are shared with the agent: keep their layout");

constexpr unsigned kMrSlotBits = 20;            // slot bits in an rkey
constexpr uint32_t kMrDefaultSlots = 1u << 16;  // registrations a table holds at once

// The check side: lock-free, over slots mapped anywhere (shared, possibly read-only).
class MrView {
public:
    MrView() = default;
    MrView(const MrSlot *slots, uint32_t capacity) : slots_(slots), capacity_(capacity) {}

    // Whether [addr, addr + length) lies in the region named by rkey and the region grants
    // `access`. O(1): the slot is in the key's low bits, and the whole key must match.
    bool check(uint64_t rkey, uint64_t addr, uint64_t length, unsigned access) const
    {
        const uint64_t slot = rkey & ((1u << kMrSlotBits) - 1);
        if (rkey == 0 || slot >= capacity_) {
            return false;
        }
        const MrSlot &s = slots_[slot];
        if (s.key.load(std::memory_order_acquire) != rkey) {
            return false;
        }
        const uint64_t base = s.base.load(std::memory_order_relaxed);
        const uint64_t len = s.length.load(std::memory_order_relaxed);
        const unsigned acc = s.access.load(std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_acquire);
        if (s.key.load(std::memory_order_relaxed) != rkey) {
            return false;   // rewritten while read
        }
        return (acc & access) == access && addr >= base && addr - base <= len &&
               length <= len - (addr - base);
    }

private:
    const MrSlot *slots_ = nullptr;
    uint32_t capacity_ = 0;
};

// The registration side, owned by the process whose memory the regions describe.
class MrTable {
public:
    // A table of `capacity` slots (at most 2^kMrSlotBits) in a sealed memfd when one can be
    // made (shareable: fd()), else in private memory (fd() = -1). Keys come from a generator of
    // the table's own, keyed from the operating system: no key predicts another, of this table
    // or any other (secure_random.h).
    static srcnic_status_t create(uint32_t capacity, std::unique_ptr<MrTable> *table_p);
    ~MrTable();
    MrTable(const MrTable &) = delete;
    MrTable &operator=(const MrTable &) = delete;

    srcnic_status_t reg(uint64_t base, uint64_t length, unsigned access, uint32_t *slot_p);
    void dereg(uint32_t slot);
    uint64_t rkey_of(uint32_t slot) const;
    size_t num_regions() const;

    MrView view() const { return MrView(slots_, capacity_); }
    uint32_t capacity() const { return capacity_; }
    int fd() const { return fd_; }           // memfd of the slots, or -1
    size_t bytes() const { return bytes_; }  // size of the slot array's mapping

private:
    MrTable() = default;
    // The random part of a fresh key: 64 - kMrSlotBits bits, never 0. Under lock_.
    uint64_t random_key();

    mutable std::mutex lock_;       // registrations may come from several threads
    MrSlot *slots_ = nullptr;
    uint32_t capacity_ = 0;
    size_t bytes_ = 0;
    int fd_ = -1;
    std::vector<uint32_t> free_slots_;   // stack; slots [next_fresh_, capacity_) never used
    uint32_t next_fresh_ = 0;
    SecureRandom keys_;             // draws every key's random part (random_key)
    size_t used_ = 0;
};

} // namespace srcnic

#endif
