// Registered memory regions and the rkey check every remote access passes (PROTOCOL.md §6):
// the table of a protection domain, shared by every Nic created with it.
// the key must name a live region, the whole range must lie inside it, and the region must
// grant the access. A refused access touches no memory.
#ifndef SRCNIC_MR_MR_TABLE_H
#define SRCNIC_MR_MR_TABLE_H

#include "core/secure_random.h"

#include <srcnic/status.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace srcnic {

struct MemoryRegion {
    uint64_t base = 0;        // first byte (virtual address)
    uint64_t length = 0;      // bytes
    uint64_t rkey = 0;        // (44 unpredictable bits << 20) | slot; 0 = free slot
    unsigned access = 0;      // SRCNIC_ACCESS_* flags
};

class MrTable {
public:
    // Keys come from a generator of the table's own, keyed from the operating system: no key
    // predicts another, of this table or any other (secure_random.h).
    MrTable() = default;

    srcnic_status_t reg(uint64_t base, uint64_t length, unsigned access, uint32_t *slot_p);
    void dereg(uint32_t slot);
    uint64_t rkey_of(uint32_t slot) const;

    // Checks that [addr, addr + length) lies in the region named by rkey and that the region
    // grants `access`. O(1): the slot is
    // in the key's low bits, and the whole key must match.
    bool check(uint64_t rkey, uint64_t addr, uint64_t length, unsigned access) const;

    size_t num_regions() const;

private:
    // The random part of a fresh key: 64 - kSlotBits bits, never 0. Under lock_.
    uint64_t random_key();

    mutable std::mutex lock_;        // registration may come from another thread than progress
    static constexpr unsigned kSlotBits = 20;
    std::vector<MemoryRegion> regions_;
    std::vector<uint32_t> free_slots_;
    SecureRandom keys_;              // draws every key's random part (random_key)
    size_t used_ = 0;
};

} // namespace srcnic

#endif
