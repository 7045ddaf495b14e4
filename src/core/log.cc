// Log level, message formatting, the stderr sink and the rate limiter behind core/log.h.
#include "core/log.h"

#include <srcnic/srcnic.h>

#include <strings.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace srcnic {
namespace log_detail {

std::atomic<int> g_level{kLevelUnset};

} // namespace log_detail

namespace {

constexpr const char *kLogLevelNames[] = {"ERROR", "WARN", "INFO", "DEBUG", "TRACE"};
constexpr int kLogLevelCount = sizeof(kLogLevelNames) / sizeof(kLogLevelNames[0]);
static_assert(kLogLevelCount == static_cast<int>(LogLevel::kTrace) + 1,
              "one name per LogLevel");

constexpr char kTruncationMark[] = "...";
constexpr char kFormatFailed[] = "(log message could not be formatted)";
// Room for " (4294967295 suppressed)" and its NUL.
constexpr size_t kSuffixMax = 32;
static_assert(sizeof(kFormatFailed) + kSuffixMax <= kLogMessageMax, "room for the fallback");

// The sink and its argument; a null sink means stderr.
std::atomic<LogSink> g_sink{nullptr};
std::atomic<void *> g_sink_arg{nullptr};

const char *file_basename(const char *file)
{
    const char *slash = std::strrchr(file, '/');
    return (slash != nullptr) ? slash + 1 : file;
}

void write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        const ssize_t written = ::write(fd, buf, len);
        if (written < 0) {
            if (errno == EINTR) {
                continue;
            }
            return;
        }
        buf += written;
        len -= static_cast<size_t>(written);
    }
}

void stderr_sink(LogLevel level, const char *file, int line, const char *msg, void *arg)
{
    char buf[kLogMessageMax + 128];
    int len = std::snprintf(buf, sizeof(buf), "[srcnic %s %s:%d] %s\n", log_level_name(level),
                            file_basename(file), line, msg);
    if (len < 0) {
        return;
    }
    if (static_cast<size_t>(len) >= sizeof(buf)) {
        len = sizeof(buf) - 1;
        buf[len - 1] = '\n';
    }
    write_all(STDERR_FILENO, buf, static_cast<size_t>(len));
}

void dispatch(LogLevel level, const char *file, int line, uint32_t suppressed, const char *fmt,
              va_list ap)
{
    const int saved_errno = errno;

    char suffix[kSuffixMax] = "";
    size_t suffix_len = 0;
    if (suppressed != 0) {
        suffix_len = static_cast<size_t>(
            std::snprintf(suffix, sizeof(suffix), " (%u suppressed)", suppressed));
    }

    char msg[kLogMessageMax];
    const size_t room = sizeof(msg) - suffix_len;
    const int formatted = std::vsnprintf(msg, room, fmt, ap);
    size_t len;
    if (formatted < 0) {
        len = sizeof(kFormatFailed) - 1;
        std::memcpy(msg, kFormatFailed, len);
    } else if (static_cast<size_t>(formatted) >= room) {
        len = room - 1;
        std::memcpy(msg + len - (sizeof(kTruncationMark) - 1), kTruncationMark,
                    sizeof(kTruncationMark) - 1);
    } else {
        len = static_cast<size_t>(formatted);
    }
    std::memcpy(msg + len, suffix, suffix_len + 1);

    const LogSink sink = g_sink.load(std::memory_order_acquire);
    if (sink != nullptr) {
        sink(level, file, line, msg, g_sink_arg.load(std::memory_order_relaxed));
    } else {
        stderr_sink(level, file, line, msg, nullptr);
    }

    errno = saved_errno;
}

} // namespace

namespace log_detail {

int level_init()
{
    const char *value = std::getenv(kLogLevelEnv);
    LogLevel level = kDefaultLogLevel;
    const bool invalid = (value != nullptr) && (value[0] != '\0') &&
                         !parse_log_level(value, &level);
    int expected = kLevelUnset;
    if (g_level.compare_exchange_strong(expected, static_cast<int>(level)) && invalid) {
        SRCNIC_LOG_WARN("invalid %s=\"%s\" (expected error, warn, info, debug or trace), "
                        "using %s", kLogLevelEnv, value, log_level_name(level));
    }
    return g_level.load(std::memory_order_relaxed);
}

} // namespace log_detail

const char *log_level_name(LogLevel level)
{
    const int index = static_cast<int>(level);
    return (index >= 0 && index < kLogLevelCount) ? kLogLevelNames[index] : "UNKNOWN";
}

bool parse_log_level(const char *str, LogLevel *level_p)
{
    if (str == nullptr) {
        return false;
    }
    for (int index = 0; index < kLogLevelCount; index++) {
        if (strcasecmp(str, kLogLevelNames[index]) == 0) {
            *level_p = static_cast<LogLevel>(index);
            return true;
        }
    }
    return false;
}

LogLevel log_level()
{
    int current = log_detail::g_level.load(std::memory_order_relaxed);
    if (current == log_detail::kLevelUnset) {
        current = log_detail::level_init();
    }
    return static_cast<LogLevel>(current);
}

void set_log_level(LogLevel level)
{
    log_detail::g_level.store(static_cast<int>(level), std::memory_order_relaxed);
}

void set_log_sink(LogSink sink, void *arg)
{
    g_sink_arg.store(arg, std::memory_order_relaxed);
    g_sink.store(sink, std::memory_order_release);
}

void log_message(LogLevel level, const char *file, int line, const char *fmt, ...)
{
    if (!log_enabled(level)) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    dispatch(level, file, line, 0, fmt, ap);
    va_end(ap);
}

void log_message_suppressed(LogLevel level, const char *file, int line, uint32_t suppressed,
                            const char *fmt, ...)
{
    if (!log_enabled(level)) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    dispatch(level, file, line, suppressed, fmt, ap);
    va_end(ap);
}

bool RateLimiter::allow(uint64_t now_ns, uint32_t *suppressed_p)
{
    uint64_t start = window_start_ns_.load(std::memory_order_relaxed);
    if ((now_ns >= start + interval_ns_) &&
        window_start_ns_.compare_exchange_strong(start, now_ns, std::memory_order_relaxed)) {
        window_count_.store(0, std::memory_order_relaxed);
    }

    uint32_t count = window_count_.load(std::memory_order_relaxed);
    do {
        if (count >= burst_) {
            suppressed_.fetch_add(1, std::memory_order_relaxed);
            return false;
        }
    } while (!window_count_.compare_exchange_weak(count, count + 1, std::memory_order_relaxed));

    *suppressed_p = suppressed_.exchange(0, std::memory_order_relaxed);
    return true;
}

} // namespace srcnic

// The C API (include/srcnic/srcnic.h): its handler behind a sink of this module's own.
namespace {

static_assert(static_cast<int>(SRCNIC_LOG_LEVEL_ERROR) == static_cast<int>(srcnic::LogLevel::kError) &&
                  static_cast<int>(SRCNIC_LOG_LEVEL_TRACE) == static_cast<int>(srcnic::LogLevel::kTrace),
              "the C levels are the LogLevel values");

// The C handler and its argument (read together: set them before other threads log).
std::atomic<srcnic_log_handler_t> g_c_handler{nullptr};
std::atomic<void *> g_c_arg{nullptr};

void c_sink(srcnic::LogLevel level, const char *file, int line, const char *msg, void *)
{
    const srcnic_log_handler_t fn = g_c_handler.load(std::memory_order_acquire);
    if (fn != nullptr) {
        fn(static_cast<srcnic_log_level_t>(level), file, line, msg,
           g_c_arg.load(std::memory_order_relaxed));
    }
}

} // namespace

extern "C" void srcnic_log_set_handler(srcnic_log_handler_t handler, void *arg)
{
    g_c_arg.store(arg, std::memory_order_relaxed);
    g_c_handler.store(handler, std::memory_order_release);
    srcnic::set_log_sink(handler != nullptr ? c_sink : nullptr, nullptr);
}

extern "C" void srcnic_log_set_level(srcnic_log_level_t level)
{
    if (level >= SRCNIC_LOG_LEVEL_ERROR && level <= SRCNIC_LOG_LEVEL_TRACE) {
        srcnic::set_log_level(static_cast<srcnic::LogLevel>(level));
    }
}

extern "C" srcnic_log_level_t srcnic_log_get_level(void)
{
    return static_cast<srcnic_log_level_t>(srcnic::log_level());
}
