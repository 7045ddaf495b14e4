// Memory-region table: the slot array (a sealed memfd, shareable with the node agent),
// registration and deregistration. The check is MrView's, inline in mr_table.h.
#include "mr/mr_table.h"

#include "core/log.h"

#include <srcnic/srcnic.h>

#include <fcntl.h>
#include <new>
#include <sys/mman.h>
#include <unistd.h>

namespace srcnic {

srcnic_status_t MrTable::create(uint32_t capacity, std::unique_ptr<MrTable> *table_p)
{
    if (capacity == 0 || capacity > (1u << kMrSlotBits)) {
        return SRCNIC_ERR_INVALID_PARAM;
    }
    std::unique_ptr<MrTable> t(new MrTable());
    t->capacity_ = capacity;
    t->bytes_ = (static_cast<size_t>(capacity) * sizeof(MrSlot) + 4095) & ~size_t(4095);
    // Pages of a memfd become resident only as slots are written.
    int fd = memfd_create("srcnic-mr", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    void *mem = MAP_FAILED;
    if (fd >= 0 && ftruncate(fd, static_cast<off_t>(t->bytes_)) == 0 &&
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0) {
        mem = mmap(nullptr, t->bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    if (mem == MAP_FAILED) {
        if (fd >= 0) {
            close(fd);
            fd = -1;
        }
        mem = mmap(nullptr, t->bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mem == MAP_FAILED) {
            SRCNIC_LOG_ERROR("cannot map a registration table of %zu bytes: %m", t->bytes_);
            return SRCNIC_ERR_NO_MEMORY;
        }
    }
    t->fd_ = fd;
    // Zero-filled pages hold free slots already; each is constructed when first used, so that
    // a table's pages become resident only as it fills (constructing all of them here cost a
    // millisecond per table).
    t->slots_ = static_cast<MrSlot *>(mem);
    *table_p = std::move(t);
    return SRCNIC_OK;
}

MrTable::~MrTable()
{
    if (slots_ != nullptr) {
        munmap(slots_, bytes_);
    }
    if (fd_ >= 0) {
        close(fd_);
    }
}

uint64_t MrTable::random_key()
{
    // Counter-mode SipHash under a key from the operating system: an rkey seen on the wire
    // tells nothing of the next one (an xorshift state, by contrast, is recovered from one
    // output). Never 0, never reused while the NIC lives in practice (44 random bits per slot).
    uint64_t random = keys_.next() >> kMrSlotBits;
    while (random == 0) {
        random = keys_.next() >> kMrSlotBits;
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
    } else if (next_fresh_ < capacity_) {
        slot = next_fresh_++;
        new (&slots_[slot]) MrSlot();
    } else {
        SRCNIC_LOG_RATELIMITED(LogLevel::kError, "registration table full (%u regions)", capacity_);
        return SRCNIC_ERR_NO_RESOURCE;
    }
    const uint64_t random = random_key();
    MrSlot &s = slots_[slot];
    // The key goes last (mr_table.h): a reader that saw the old key rejects what it read.
    s.key.store(0, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    s.base.store(base, std::memory_order_relaxed);
    s.length.store(length, std::memory_order_relaxed);
    s.access.store(access, std::memory_order_relaxed);
    s.key.store((random << kMrSlotBits) | slot, std::memory_order_release);
    ++used_;
    *slot_p = slot;
    return SRCNIC_OK;
}

void MrTable::dereg(uint32_t slot)
{
    std::lock_guard<std::mutex> guard(lock_);
    slots_[slot].key.store(0, std::memory_order_release);
    free_slots_.push_back(slot);
    --used_;
}

uint64_t MrTable::rkey_of(uint32_t slot) const
{
    return slots_[slot].key.load(std::memory_order_relaxed);
}

size_t MrTable::num_regions() const
{
    std::lock_guard<std::mutex> guard(lock_);
    return used_;
}

} // namespace srcnic
