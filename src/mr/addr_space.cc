// Copies into and out of a QP owner's memory: memcpy for the engine's own process, cross-memory
// attach for an attached client (see addr_space.h).
#include "mr/addr_space.h"

#include "core/log.h"

#include <cerrno>
#include <cstring>
#include <poll.h>
#include <sys/uio.h>

namespace srcnic {

bool AddrSpace::add_window(uint64_t remote_base, uint64_t length, uint8_t *mapped)
{
    if (num_windows_ == kMaxWindows || length == 0 || remote_base + length < remote_base) {
        return false;
    }
    windows_[num_windows_++] = Window{remote_base, length, mapped};
    return true;
}

bool AddrSpace::alive()
{
    if (local_) {
        return true;
    }
    if (dead_) {
        return false;
    }
    if (!checked_) {
        checked_ = true;
        struct pollfd p = {pidfd_, POLLIN, 0};
        if (poll(&p, 1, 0) != 0) {
            dead_ = true;   // exited (or the pidfd broke: treat the owner as gone)
        }
    }
    return !dead_;
}

bool AddrSpace::read(void *dst, uint64_t addr, size_t len)
{
    if (len == 0) {
        return true;
    }
    if (const uint8_t *p = direct(addr, len)) {
        // (memmove: a process's WRITE or SEND to itself may name overlapping buffers; each copy is
        // safe, though a WRITE placed in several copies may read bytes an earlier one wrote.)
        std::memmove(dst, p, len);
        return true;
    }
    if (!alive()) {
        ++faults_;
        return false;
    }
    struct iovec local = {dst, len};
    struct iovec remote = {reinterpret_cast<void *>(addr), len};
    ++copies_;
    const ssize_t n = process_vm_readv(pid_, &local, 1, &remote, 1, 0);
    if (n != static_cast<ssize_t>(len)) {
        ++faults_;
        SRCNIC_LOG_RATELIMITED(LogLevel::kDebug, "process %d: reading %zu bytes at 0x%llx: %s",
                               static_cast<int>(pid_), len, static_cast<unsigned long long>(addr),
                               n < 0 ? std::strerror(errno) : "short copy");
        return false;
    }
    return true;
}

bool AddrSpace::write(uint64_t addr, const void *src, size_t len)
{
    if (len == 0) {
        return true;
    }
    if (uint8_t *p = direct(addr, len)) {
        std::memmove(p, src, len);
        return true;
    }
    if (!alive()) {
        ++faults_;
        return false;
    }
    struct iovec local = {const_cast<void *>(src), len};
    struct iovec remote = {reinterpret_cast<void *>(addr), len};
    ++copies_;
    const ssize_t n = process_vm_writev(pid_, &local, 1, &remote, 1, 0);
    if (n != static_cast<ssize_t>(len)) {
        ++faults_;
        SRCNIC_LOG_RATELIMITED(LogLevel::kDebug, "process %d: writing %zu bytes at 0x%llx: %s",
                               static_cast<int>(pid_), len, static_cast<unsigned long long>(addr),
                               n < 0 ? std::strerror(errno) : "short copy");
        return false;
    }
    return true;
}

} // namespace srcnic
