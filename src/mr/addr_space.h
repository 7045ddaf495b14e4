// How the engine reaches the memory of a QP's owner: the memory of its own process (embedded
// mode), or that of a process attached to the node agent. There, memory the client shares with
// the agent (its windows: the buffer pools it allocates in shared memory) is read and written
// directly, and anything else by cross-memory attach (process_vm_readv/writev) into the
// client's address space, the way a NIC reaches host memory by DMA.
//
// A client is named by a pidfd as well as a PID: once the agent has learned that the client is
// gone (its pidfd polls readable; alive() checks it at most once per agent pass, see
// begin_pass()), no copy is made, so that none can land in a process that reused the PID.
// Every address a client or a peer supplies is checked by the kernel (a copy to or from a range
// the process does not map fails, EFAULT) or against the window it falls in: nothing is ever
// dereferenced outside a window.
#ifndef SRCNIC_MR_ADDR_SPACE_H
#define SRCNIC_MR_ADDR_SPACE_H

#include <cstddef>
#include <cstdint>
#include <sys/types.h>

namespace srcnic {

class AddrSpace {
public:
    // The calling process's own memory.
    AddrSpace() = default;
    // Another process's memory: pid as the agent sees it and a pidfd for it (owned by the
    // caller, which closes it after the AddrSpace is gone).
    AddrSpace(pid_t pid, int pidfd) : local_(false), pid_(pid), pidfd_(pidfd) {}

    // Memory the process shares with this one: [remote_base, + length) in its address space
    // is mapped at `mapped` here. At most kMaxWindows; false if full.
    static constexpr unsigned kMaxWindows = 4;
    bool add_window(uint64_t remote_base, uint64_t length, uint8_t *mapped);

    bool local() const { return local_; }
    pid_t pid() const { return pid_; }

    // [addr, addr + len) as memory this process may touch directly, or nullptr when it must be
    // copied (read()/write()). Inline: every payload the engine places or sends asks.
    uint8_t *direct(uint64_t addr, uint64_t len) const
    {
        if (local_) {
            return reinterpret_cast<uint8_t *>(addr);
        }
        for (unsigned i = 0; i < num_windows_; ++i) {
            const Window &w = windows_[i];
            const uint64_t off = addr - w.base;
            if (addr >= w.base && off <= w.length && len <= w.length - off) {
                return w.mapped + off;
            }
        }
        return nullptr;
    }

    // Copies len bytes at addr (in the owner's space) to dst; false if the range is not
    // readable there or the owner is gone (dst may then hold part of it: the caller discards
    // it).
    bool read(void *dst, uint64_t addr, size_t len);
    // Copies len bytes from src to addr in the owner's space; false as for read (a failed copy
    // may have written a prefix of the range, which lies in the owner's own memory).
    bool write(uint64_t addr, const void *src, size_t len);

    // Whether the owner lives; for another process, polls its pidfd at most once per pass.
    bool alive();
    // Starts a new agent pass: the next alive() polls again.
    void begin_pass() { checked_ = false; }
    // The owner is known to be gone (its pidfd was seen readable, or it detached).
    void mark_dead() { dead_ = true; }

    uint64_t copies() const { return copies_; }   // cross-memory copies made
    uint64_t faults() const { return faults_; }   // copies refused (bad address, owner gone)

private:
    struct Window {
        uint64_t base = 0;       // first byte in the owner's address space
        uint64_t length = 0;     // bytes
        uint8_t *mapped = nullptr; // the same bytes here
    };

    bool local_ = true;
    pid_t pid_ = 0;
    int pidfd_ = -1;
    bool dead_ = false;
    bool checked_ = false;     // alive() polled the pidfd in this pass
    unsigned num_windows_ = 0;
    Window windows_[kMaxWindows];
    uint64_t copies_ = 0;
    uint64_t faults_ = 0;
};

} // namespace srcnic

#endif
