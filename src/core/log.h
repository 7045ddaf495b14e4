// The engine's logging: a process-wide level, printf-style macros that cost one load when the
// level is off, a replaceable sink and per-call-site rate limiting.
//
// Level. Starts from the environment variable SRCNIC_LOG_LEVEL (error, warn, info, debug or
// trace, any case; default warn; an invalid value is reported once and ignored), read on the
// first check. set_log_level() changes it at any time; an atomic holds it.
//
// Macros. SRCNIC_LOG_ERROR/_WARN/_INFO/_DEBUG/_TRACE(fmt, ...) take a printf format checked by
// the compiler (including %m for errno). When the level is off, neither the format nor the
// arguments are evaluated. A message is formatted into a stack buffer of kLogMessageMax bytes
// (no allocation); a longer one is cut and ends in "...". Logging preserves errno.
//
// Rate limiting. SRCNIC_LOG_RATELIMITED(level, fmt, ...) lets through at most
// kLogRateLimitBurst messages per second from each place it is written; the next message let
// through ends in " (N suppressed)". Use it for anything a peer can trigger at packet rate,
// such as a dropped bad packet.
//
// Sink. By default a message is written to stderr in one write() as
// "[srcnic LEVEL file:line] message\n", file being the base name. set_log_sink() redirects all
// messages (the UCT glue passes them to ucs_log). Set it during initialization, before other
// threads log: loggers read the sink and its argument without locking.
#ifndef SRCNIC_CORE_LOG_H
#define SRCNIC_CORE_LOG_H

#include "core/clock.h"

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace srcnic {

// Message severity; a level enables itself and every level above it in this list.
enum class LogLevel : int { kError, kWarn, kInfo, kDebug, kTrace };

constexpr LogLevel kDefaultLogLevel = LogLevel::kWarn;
constexpr const char *kLogLevelEnv = "SRCNIC_LOG_LEVEL";
// Size of the formatted message buffer, bytes, including the terminating NUL.
constexpr size_t kLogMessageMax = 512;
// Messages let through per call site of SRCNIC_LOG_RATELIMITED per window.
constexpr uint32_t kLogRateLimitBurst = 10;
// Length of a rate-limiting window, ns.
constexpr uint64_t kLogRateLimitIntervalNs = kNsPerSec;

// Receives every message that passes the level check. file is __FILE__ of the call site as
// given; msg is NUL-terminated, without a trailing newline, valid only during the call.
using LogSink = void (*)(LogLevel level, const char *file, int line, const char *msg,
                         void *arg);

namespace log_detail {

constexpr int kLevelUnset = -1;
// The current level as an int, kLevelUnset until the first check reads the environment.
extern std::atomic<int> g_level;
// Sets g_level from the environment unless already set; returns the current level.
int level_init();

} // namespace log_detail

// "ERROR", "WARN", "INFO", "DEBUG", "TRACE"; "UNKNOWN" for a value outside the enum.
const char *log_level_name(LogLevel level);

// Parses a level name, any case; sets *level_p and returns true only on success.
bool parse_log_level(const char *str, LogLevel *level_p);

LogLevel log_level();
void set_log_level(LogLevel level);

// True when messages of this level are printed: one relaxed load after the first call.
inline bool log_enabled(LogLevel level)
{
    int current = log_detail::g_level.load(std::memory_order_relaxed);
    if (__builtin_expect(current == log_detail::kLevelUnset, 0)) {
        current = log_detail::level_init();
    }
    return static_cast<int>(level) <= current;
}

// Sends messages to sink(level, file, line, msg, arg); nullptr restores the stderr sink.
void set_log_sink(LogSink sink, void *arg);

// Formats and dispatches one message if its level is on. Use the macros below.
void log_message(LogLevel level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

// As log_message(), appending " (N suppressed)" when suppressed is not 0; the suffix is kept
// when the message itself is truncated.
void log_message_suppressed(LogLevel level, const char *file, int line, uint32_t suppressed,
                            const char *fmt, ...) __attribute__((format(printf, 5, 6)));

// Lets through at most burst events per window of interval_ns and counts the others. A window
// opens at the first event at least interval_ns after the previous window opened. Safe to call
// from several threads (a race at a window edge may let an event more or fewer through; no
// suppressed event goes uncounted). Constant-initialized, so a function-local static needs no
// guard.
class RateLimiter {
public:
    constexpr explicit RateLimiter(uint32_t burst = kLogRateLimitBurst,
                                   uint64_t interval_ns = kLogRateLimitIntervalNs)
        : burst_(burst), interval_ns_(interval_ns)
    {
    }

    // True if the event at now_ns may pass; then *suppressed_p is the number of events refused
    // since the previous one that passed. Returns false, leaving *suppressed_p alone, otherwise.
    bool allow(uint64_t now_ns, uint32_t *suppressed_p);

private:
    const uint32_t burst_;                       // events let through per window
    const uint64_t interval_ns_;                 // window length, ns
    std::atomic<uint64_t> window_start_ns_{0};   // when the current window opened, ns
    std::atomic<uint32_t> window_count_{0};      // events let through in the current window
    std::atomic<uint32_t> suppressed_{0};        // events refused since the last one let through
};

} // namespace srcnic

#define SRCNIC_LOG(_level, _fmt, ...)                                                  \
    do {                                                                               \
        if (::srcnic::log_enabled(_level)) {                                           \
            ::srcnic::log_message((_level), __FILE__, __LINE__, _fmt, ##__VA_ARGS__); \
        }                                                                              \
    } while (0)

#define SRCNIC_LOG_ERROR(_fmt, ...) SRCNIC_LOG(::srcnic::LogLevel::kError, _fmt, ##__VA_ARGS__)
#define SRCNIC_LOG_WARN(_fmt, ...)  SRCNIC_LOG(::srcnic::LogLevel::kWarn, _fmt, ##__VA_ARGS__)
#define SRCNIC_LOG_INFO(_fmt, ...)  SRCNIC_LOG(::srcnic::LogLevel::kInfo, _fmt, ##__VA_ARGS__)
#define SRCNIC_LOG_DEBUG(_fmt, ...) SRCNIC_LOG(::srcnic::LogLevel::kDebug, _fmt, ##__VA_ARGS__)
#define SRCNIC_LOG_TRACE(_fmt, ...) SRCNIC_LOG(::srcnic::LogLevel::kTrace, _fmt, ##__VA_ARGS__)

#define SRCNIC_LOG_RATELIMITED(_level, _fmt, ...)                                             \
    do {                                                                                      \
        if (::srcnic::log_enabled(_level)) {                                                  \
            static ::srcnic::RateLimiter srcnic_log_limiter_;                                 \
            uint32_t srcnic_log_suppressed_;                                                  \
            if (srcnic_log_limiter_.allow(::srcnic::now_ns(), &srcnic_log_suppressed_)) {     \
                ::srcnic::log_message_suppressed((_level), __FILE__, __LINE__,                \
                                                 srcnic_log_suppressed_, _fmt, ##__VA_ARGS__); \
            }                                                                                 \
        }                                                                                     \
    } while (0)

#endif
