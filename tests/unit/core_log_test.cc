// Unit tests for src/core/log.cc.
#include "core/log.h"

#include <srcnic/srcnic.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace srcnic {
namespace {

struct LoggedMessage {
    LogLevel level;
    std::string file;
    int line;
    std::string msg;
};

void capture_sink(LogLevel level, const char *file, int line, const char *msg, void *arg)
{
    static_cast<std::vector<LoggedMessage> *>(arg)->push_back({level, file, line, msg});
}

// Routes messages into messages_ and restores the level and the stderr sink afterwards.
class core_log : public testing::Test {
protected:
    void SetUp() override
    {
        saved_level_ = log_level();
        set_log_sink(capture_sink, &messages_);
    }

    void TearDown() override
    {
        set_log_sink(nullptr, nullptr);
        set_log_level(saved_level_);
    }

    std::vector<LoggedMessage> messages_;
    LogLevel saved_level_ = kDefaultLogLevel;
};

// Sets an environment variable for one scope and puts back what was there.
class ScopedEnv {
public:
    ScopedEnv(const char *name, const char *value) : name_(name)
    {
        const char *old = std::getenv(name);
        had_old_ = (old != nullptr);
        old_ = had_old_ ? old : "";
        setenv(name, value, 1);
    }

    ~ScopedEnv()
    {
        if (had_old_) {
            setenv(name_, old_.c_str(), 1);
        } else {
            unsetenv(name_);
        }
    }

private:
    const char *name_;
    bool had_old_;
    std::string old_;
};

// Runs statement in a freshly executed copy of this test program, where no log call has read
// the environment yet.
class ScopedThreadsafeDeathTests {
public:
    ScopedThreadsafeDeathTests() : saved_(testing::GTEST_FLAG(death_test_style))
    {
        testing::GTEST_FLAG(death_test_style) = "threadsafe";
    }
    ~ScopedThreadsafeDeathTests() { testing::GTEST_FLAG(death_test_style) = saved_; }

private:
    std::string saved_;
};

int count_evaluations(int *counter)
{
    return ++*counter;
}

TEST(core_log_env, log_level_init__reads_environment)
{
    ScopedThreadsafeDeathTests style;
    ScopedEnv env(kLogLevelEnv, "debug");
    EXPECT_EXIT(std::exit((log_level() == LogLevel::kDebug) ? 0 : 1), testing::ExitedWithCode(0),
                "");
}

TEST(core_log_env, log_level_init__defaults_to_warn)
{
    ScopedThreadsafeDeathTests style;
    ScopedEnv env(kLogLevelEnv, "");
    EXPECT_EXIT(std::exit((log_level() == LogLevel::kWarn) ? 0 : 1), testing::ExitedWithCode(0),
                "");
}

TEST(core_log_env, log_level_init__reports_invalid_value)
{
    ScopedThreadsafeDeathTests style;
    ScopedEnv env(kLogLevelEnv, "verbose");
    EXPECT_EXIT(std::exit((log_level() == LogLevel::kWarn) ? 0 : 1), testing::ExitedWithCode(0),
                "\\[srcnic WARN log\\.cc:[0-9]+\\] invalid SRCNIC_LOG_LEVEL=\"verbose\"");
}

TEST_F(core_log, log_level_name__every_level)
{
    EXPECT_STREQ("ERROR", log_level_name(LogLevel::kError));
    EXPECT_STREQ("WARN", log_level_name(LogLevel::kWarn));
    EXPECT_STREQ("INFO", log_level_name(LogLevel::kInfo));
    EXPECT_STREQ("DEBUG", log_level_name(LogLevel::kDebug));
    EXPECT_STREQ("TRACE", log_level_name(LogLevel::kTrace));
    EXPECT_STREQ("UNKNOWN", log_level_name(static_cast<LogLevel>(5)));
    EXPECT_STREQ("UNKNOWN", log_level_name(static_cast<LogLevel>(-1)));
}

TEST_F(core_log, parse_log_level__every_name)
{
    const struct {
        const char *str;
        LogLevel level;
    } cases[] = {{"error", LogLevel::kError}, {"warn", LogLevel::kWarn},
                 {"info", LogLevel::kInfo},   {"debug", LogLevel::kDebug},
                 {"trace", LogLevel::kTrace}, {"TRACE", LogLevel::kTrace},
                 {"Warn", LogLevel::kWarn}};
    for (const auto &c : cases) {
        LogLevel level = LogLevel::kError;
        if (c.level == LogLevel::kError) {
            level = LogLevel::kTrace;
        }
        EXPECT_TRUE(parse_log_level(c.str, &level)) << c.str;
        EXPECT_EQ(c.level, level) << c.str;
    }
}

TEST_F(core_log, parse_log_level__rejects_others_and_leaves_output)
{
    for (const char *str : {"", "warning", "err", "trace ", "4", "fatal"}) {
        LogLevel level = LogLevel::kInfo;
        EXPECT_FALSE(parse_log_level(str, &level)) << '"' << str << '"';
        EXPECT_EQ(LogLevel::kInfo, level) << '"' << str << '"';
    }
    LogLevel level = LogLevel::kInfo;
    EXPECT_FALSE(parse_log_level(nullptr, &level));
    EXPECT_EQ(LogLevel::kInfo, level);
}

TEST_F(core_log, set_log_level__controls_log_enabled)
{
    set_log_level(LogLevel::kInfo);
    EXPECT_EQ(LogLevel::kInfo, log_level());
    EXPECT_TRUE(log_enabled(LogLevel::kError));
    EXPECT_TRUE(log_enabled(LogLevel::kWarn));
    EXPECT_TRUE(log_enabled(LogLevel::kInfo));
    EXPECT_FALSE(log_enabled(LogLevel::kDebug));
    EXPECT_FALSE(log_enabled(LogLevel::kTrace));

    set_log_level(LogLevel::kError);
    EXPECT_TRUE(log_enabled(LogLevel::kError));
    EXPECT_FALSE(log_enabled(LogLevel::kWarn));

    set_log_level(LogLevel::kTrace);
    EXPECT_TRUE(log_enabled(LogLevel::kTrace));
}

TEST_F(core_log, set_log_sink__null_restores_stderr)
{
    set_log_level(LogLevel::kWarn);
    set_log_sink(nullptr, nullptr);
    testing::internal::CaptureStderr();
    const int line = __LINE__ + 1;
    SRCNIC_LOG_WARN("%d packets from %s", 3, "peer");
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ("[srcnic WARN core_log_test.cc:" + std::to_string(line) +
                  "] 3 packets from peer\n",
              err);
    EXPECT_TRUE(messages_.empty());
}

// The C API: a handler of the application's (the UCT module's) gets the messages its level
// lets through, with their levels; NULL gives them back to stderr.
void c_handler(srcnic_log_level_t level, const char *file, int line, const char *msg, void *arg)
{
    static_cast<std::vector<LoggedMessage> *>(arg)->push_back(
        {static_cast<LogLevel>(level), file, line, msg});
}

TEST_F(core_log, srcnic_log_set_handler__gets_messages_at_the_level_set)
{
    std::vector<LoggedMessage> got;
    srcnic_log_set_handler(c_handler, &got);
    srcnic_log_set_level(SRCNIC_LOG_LEVEL_INFO);
    EXPECT_EQ(SRCNIC_LOG_LEVEL_INFO, srcnic_log_get_level());
    const int line = __LINE__;
    SRCNIC_LOG_WARN("w %d", 1);
    SRCNIC_LOG_INFO("i %d", 2);
    SRCNIC_LOG_DEBUG("d %d", 3);   // below the level: not formatted, not handled
    ASSERT_EQ(2u, got.size());
    EXPECT_EQ(LogLevel::kWarn, got[0].level);
    EXPECT_EQ("w 1", got[0].msg);
    EXPECT_EQ(line + 1, got[0].line);
    EXPECT_NE(std::string::npos, got[0].file.find("core_log_test.cc"));
    EXPECT_EQ(LogLevel::kInfo, got[1].level);
    EXPECT_EQ("i 2", got[1].msg);
    srcnic_log_set_level(static_cast<srcnic_log_level_t>(42));   // out of range: ignored
    EXPECT_EQ(SRCNIC_LOG_LEVEL_INFO, srcnic_log_get_level());

    srcnic_log_set_handler(nullptr, nullptr);
    testing::internal::CaptureStderr();
    SRCNIC_LOG_WARN("to stderr");
    EXPECT_NE(std::string::npos, testing::internal::GetCapturedStderr().find("] to stderr"));
    EXPECT_EQ(2u, got.size());
    EXPECT_TRUE(messages_.empty());
}

TEST_F(core_log, log_message__macros_pass_level_file_line)
{
    set_log_level(LogLevel::kTrace);
    const int line = __LINE__;
    SRCNIC_LOG_ERROR("e %d", 1);
    SRCNIC_LOG_WARN("w %s", "2");
    SRCNIC_LOG_INFO("i %u", 3u);
    SRCNIC_LOG_DEBUG("d %c", '4');
    SRCNIC_LOG_TRACE("t");

    ASSERT_EQ(5u, messages_.size());
    const LogLevel levels[] = {LogLevel::kError, LogLevel::kWarn, LogLevel::kInfo,
                               LogLevel::kDebug, LogLevel::kTrace};
    const char *texts[] = {"e 1", "w 2", "i 3", "d 4", "t"};
    for (size_t i = 0; i < messages_.size(); i++) {
        EXPECT_EQ(levels[i], messages_[i].level) << i;
        EXPECT_EQ(texts[i], messages_[i].msg) << i;
        EXPECT_EQ(line + 1 + static_cast<int>(i), messages_[i].line) << i;
        EXPECT_EQ(std::string(__FILE__), messages_[i].file) << i;
    }
}

TEST_F(core_log, log_message__disabled_levels_skip_formatting)
{
    set_log_level(LogLevel::kWarn);
    int evaluations = 0;
    SRCNIC_LOG_INFO("%d", count_evaluations(&evaluations));
    SRCNIC_LOG_DEBUG("%d", count_evaluations(&evaluations));
    SRCNIC_LOG_TRACE("%d", count_evaluations(&evaluations));
    SRCNIC_LOG_RATELIMITED(LogLevel::kDebug, "%d", count_evaluations(&evaluations));
    EXPECT_EQ(0, evaluations);
    EXPECT_TRUE(messages_.empty());

    SRCNIC_LOG_WARN("%d", count_evaluations(&evaluations));
    EXPECT_EQ(1, evaluations);
    ASSERT_EQ(1u, messages_.size());
    EXPECT_EQ("1", messages_[0].msg);
}

TEST_F(core_log, log_message__truncates_long_message)
{
    set_log_level(LogLevel::kWarn);
    const std::string fits(kLogMessageMax - 1, 'a');
    const std::string too_long(2 * kLogMessageMax, 'b');
    SRCNIC_LOG_WARN("%s", fits.c_str());
    SRCNIC_LOG_WARN("%s", too_long.c_str());

    ASSERT_EQ(2u, messages_.size());
    EXPECT_EQ(fits, messages_[0].msg);
    EXPECT_EQ(std::string(kLogMessageMax - 4, 'b') + "...", messages_[1].msg);
}

TEST_F(core_log, log_message__formats_errno_and_preserves_it)
{
    set_log_level(LogLevel::kError);
    errno = ENOENT;
    SRCNIC_LOG_ERROR("open(%s) failed: %m", "/nonexistent");
    EXPECT_EQ(ENOENT, errno);
    ASSERT_EQ(1u, messages_.size());
    EXPECT_EQ(std::string("open(/nonexistent) failed: ") + std::strerror(ENOENT),
              messages_[0].msg);
}

TEST_F(core_log, log_message_suppressed__appends_count)
{
    set_log_level(LogLevel::kWarn);
    log_message_suppressed(LogLevel::kWarn, "f.cc", 7, 0, "drop %d", 1);
    log_message_suppressed(LogLevel::kWarn, "f.cc", 7, 42, "drop %d", 2);
    log_message_suppressed(LogLevel::kInfo, "f.cc", 7, 42, "drop %d", 3);

    ASSERT_EQ(2u, messages_.size());
    EXPECT_EQ("drop 1", messages_[0].msg);
    EXPECT_EQ("drop 2 (42 suppressed)", messages_[1].msg);
    EXPECT_EQ("f.cc", messages_[1].file);
    EXPECT_EQ(7, messages_[1].line);
}

TEST_F(core_log, log_message_suppressed__keeps_count_when_truncating)
{
    set_log_level(LogLevel::kWarn);
    const std::string too_long(2 * kLogMessageMax, 'c');
    log_message_suppressed(LogLevel::kWarn, "f.cc", 1, 4294967295u, "%s", too_long.c_str());

    ASSERT_EQ(1u, messages_.size());
    const std::string suffix = " (4294967295 suppressed)";
    const std::string &msg = messages_[0].msg;
    EXPECT_EQ(kLogMessageMax - 1, msg.size());
    EXPECT_EQ(std::string(kLogMessageMax - 1 - suffix.size() - 3, 'c') + "..." + suffix, msg);
}

TEST_F(core_log, RateLimiter_allow__burst_then_suppress)
{
    RateLimiter limiter(3, 1000);
    uint32_t suppressed = 99;
    for (uint64_t t = 5000; t < 5003; t++) {
        ASSERT_TRUE(limiter.allow(t, &suppressed)) << t;
        EXPECT_EQ(0u, suppressed);
    }
    suppressed = 99;
    for (uint64_t t = 5003; t < 5010; t++) {
        EXPECT_FALSE(limiter.allow(t, &suppressed)) << t;
    }
    EXPECT_EQ(99u, suppressed);
    EXPECT_FALSE(limiter.allow(5999, &suppressed));

    // A new window opens interval_ns after the first one: the first event there reports the
    // eight suppressed ones, the next reports none.
    ASSERT_TRUE(limiter.allow(6000, &suppressed));
    EXPECT_EQ(8u, suppressed);
    ASSERT_TRUE(limiter.allow(6001, &suppressed));
    EXPECT_EQ(0u, suppressed);
    ASSERT_TRUE(limiter.allow(6002, &suppressed));
    EXPECT_FALSE(limiter.allow(6003, &suppressed));
}

TEST_F(core_log, RateLimiter_allow__window_opens_at_next_event)
{
    RateLimiter limiter(1, 1000);
    uint32_t suppressed = 0;
    ASSERT_TRUE(limiter.allow(0, &suppressed));
    EXPECT_FALSE(limiter.allow(999, &suppressed));
    // Quiet for a long time: the window restarts at 10000, so 10999 is still in it.
    ASSERT_TRUE(limiter.allow(10000, &suppressed));
    EXPECT_EQ(1u, suppressed);
    EXPECT_FALSE(limiter.allow(10999, &suppressed));
    ASSERT_TRUE(limiter.allow(11000, &suppressed));
    EXPECT_EQ(1u, suppressed);
}

TEST_F(core_log, RateLimiter_allow__default_is_ten_per_second)
{
    RateLimiter limiter;
    uint32_t suppressed = 0;
    const uint64_t start = 7 * kNsPerSec;
    for (uint32_t i = 0; i < kLogRateLimitBurst; i++) {
        ASSERT_TRUE(limiter.allow(start + i, &suppressed)) << i;
    }
    EXPECT_FALSE(limiter.allow(start + kNsPerSec - 1, &suppressed));
    ASSERT_TRUE(limiter.allow(start + kNsPerSec, &suppressed));
    EXPECT_EQ(1u, suppressed);
    EXPECT_EQ(10u, kLogRateLimitBurst);
}

TEST_F(core_log, SRCNIC_LOG_RATELIMITED__limits_each_call_site)
{
    // The limiters of the two call sites below live as long as the process: only the first run
    // of this test (not a --gtest_repeat) knows they start with a full burst.
    static bool ran_before = false;
    const bool fresh_limiters = !ran_before;
    ran_before = true;

    set_log_level(LogLevel::kDebug);
    const uint64_t start = now_ns();
    for (int i = 0; i < 25; i++) {
        SRCNIC_LOG_RATELIMITED(LogLevel::kDebug, "first %d", i);
        SRCNIC_LOG_RATELIMITED(LogLevel::kDebug, "second %d", i);
    }
    const uint64_t elapsed = now_ns() - start;

    // Each call site lets kLogRateLimitBurst through per window; the loop takes far less than
    // a window, but a stalled machine may have crossed into later ones.
    size_t first = 0, second = 0;
    for (const auto &m : messages_) {
        EXPECT_EQ(LogLevel::kDebug, m.level);
        (m.msg.compare(0, 5, "first") == 0 ? first : second)++;
    }
    const size_t windows = 1 + elapsed / kLogRateLimitIntervalNs;
    EXPECT_LE(first, kLogRateLimitBurst * windows);
    EXPECT_LE(second, kLogRateLimitBurst * windows);
    if (fresh_limiters) {
        EXPECT_GE(first, kLogRateLimitBurst);
        EXPECT_GE(second, kLogRateLimitBurst);
        ASSERT_GE(messages_.size(), 2u);
        EXPECT_EQ("first 0", messages_[0].msg);
        EXPECT_EQ("second 0", messages_[1].msg);
    }
}

} // namespace
} // namespace srcnic
