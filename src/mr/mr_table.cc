// Memory-region table: registration, deregistration and the remote access check.
#include "mr/mr_table.h"

#include <srcnic/srcnic.h>

namespace srcnic {

uint64_t MrTable::random_key()
{
    // Counter-mode SipHash under a key from the operating system: an rkey seen on the wire
    // tells nothing of the next one (an xorshift state, by contrast, is recovered from one
    // output). Never 0, never reused while the NIC lives in practice (44 random bits per slot).
    uint64_t random = keys_.next() >> kSlotBits;
    while (random == 0) {
        random = keys_.next() >> kSlotBits;
    }
    return random;
}

srcnic_status_t MrTable::reg(uint64_t base, uint64_t length, unsigned access, uint32_t *slot_p)
{
    if (length == 0 || base + length < base ||
        (access & ~(SRCNIC_ACCESS_REMOTE_READ | SRCNIC_ACCESS_REMOTE_WRITE)) != 0) {
        return SRCNIC_ERR_INVALID_PARAM;
    }
    std::lock_guard<std::mutex> guard(lock_);
    uint32_t slot;
    if (!free_slots_.empty()) {
        slot = free_slots_.back();
        free_slots_.pop_back();
    } else {
        if (regions_.size() >= (1u << kSlotBits)) {
            return SRCNIC_ERR_NO_RESOURCE;
        }
        slot = static_cast<uint32_t>(regions_.size());
        regions_.emplace_back();
    }
    const uint64_t random = random_key();
    MemoryRegion &mr = regions_[slot];
    mr.base = base;
    mr.length = length;
    mr.access = access;
    mr.rkey = (random << kSlotBits) | slot;
    ++used_;
    *slot_p = slot;
    return SRCNIC_OK;
}

void MrTable::dereg(uint32_t slot)
{
    std::lock_guard<std::mutex> guard(lock_);
    regions_[slot] = MemoryRegion{};
    free_slots_.push_back(slot);
    --used_;
}

bool MrTable::check(uint64_t rkey, uint64_t addr, uint64_t length, unsigned access) const
{
    std::lock_guard<std::mutex> guard(lock_);
    const uint64_t slot = rkey & ((1u << kSlotBits) - 1);
    if (rkey == 0 || slot >= regions_.size()) {
        return false;
    }
    const MemoryRegion &mr = regions_[slot];
    if (mr.rkey != rkey || (mr.access & access) != access) {
        return false;
    }
    if (addr < mr.base || addr - mr.base > mr.length || length > mr.length - (addr - mr.base)) {
        return false;
    }
    return true;
}

uint64_t MrTable::rkey_of(uint32_t slot) const
{
    std::lock_guard<std::mutex> guard(lock_);
    return regions_[slot].rkey;
}

size_t MrTable::num_regions() const
{
    std::lock_guard<std::mutex> guard(lock_);
    return used_;
}

} // namespace srcnic
