// Minimal error logging for the link backends (stderr, rate-limited on the data path), kept
// local to src/link until the backends move to the engine's logging module.
#ifndef SRCNIC_LINK_LINK_LOG_H
#define SRCNIC_LINK_LINK_LOG_H

#include "core/clock.h"

#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <unistd.h>

namespace srcnic {

// Size of one formatted log line, bytes, including the newline and the terminating NUL; a
// longer message is cut.
constexpr size_t kLinkLogLineMax = 512;
// Messages one LinkLogLimit lets through per window.
constexpr uint32_t kLinkLogBurst = 10;
// Length of a rate-limiting window, ns.
constexpr uint64_t kLinkLogWindowNs = kNsPerSec;

// Writes "srcnic link: <message>\n" to stderr in one write(). The format is printf's, including
// %m for the errno the caller saw; errno is preserved across the call.
__attribute__((format(printf, 1, 2))) inline void link_log_error(const char *fmt, ...)
{
    const int saved_errno = errno;
    char line[kLinkLogLineMax];
    const int prefix = std::snprintf(line, sizeof(line), "srcnic link: ");
    va_list ap;
    va_start(ap, fmt);
    errno = saved_errno;
    const int body = std::vsnprintf(line + prefix, sizeof(line) - prefix - 1, fmt, ap);
    va_end(ap);
    size_t len = static_cast<size_t>(prefix) + (body > 0 ? static_cast<size_t>(body) : 0);
    if (len > sizeof(line) - 2) {
        len = sizeof(line) - 2;
    }
    line[len++] = '\n';
    const ssize_t written = ::write(STDERR_FILENO, line, len);
    (void)written;
    errno = saved_errno;
}

// Rate limiter for one kind of data-path message: allow() lets kLinkLogBurst messages through
// per window, counts the rest and reports their number when the next window opens.
class LinkLogLimit {
public:
    bool allow()
    {
        const uint64_t now = now_ns();
        if (now - window_start_ns_ >= kLinkLogWindowNs) {
            if (suppressed_ > 0) {
                link_log_error("%llu similar messages suppressed",
                               static_cast<unsigned long long>(suppressed_));
            }
            window_start_ns_ = now;
            in_window_ = 0;
            suppressed_ = 0;
        }
        if (in_window_ < kLinkLogBurst) {
            ++in_window_;
            return true;
        }
        ++suppressed_;
        return false;
    }

private:
    uint64_t window_start_ns_ = 0; // start of the current window, now_ns() time
    uint32_t in_window_ = 0;       // messages let through in the current window
    uint64_t suppressed_ = 0;      // messages held back in the current window
};

} // namespace srcnic

#endif
