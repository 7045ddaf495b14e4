// Engine micro-benchmark: the srcnic engine over UDP on 127.0.0.1 and the kernel's own UDP floor,
// measured side by side in one run and reported as ratios.
//
// Tests (see perf/README.md for what each figure means):
//   latency    ping-pong of one message, one-way latency = half the round trip (median, p99);
//              srcnic: SEND both ways; floor: one datagram both ways (send/recv, connected).
//   rate       8-byte messages streamed one way, counted at the receiver per second;
//              srcnic: inline SENDs, posted in batches with a window of outstanding sends;
//              floor: 8-byte datagrams with sendmmsg/recvmmsg and a credit window.
//   bandwidth  N-byte messages streamed one way, bytes/s; srcnic: SEND into N-byte receive
//              buffers (counted at the receiver) and RDMA WRITE (counted at the writer's
//              completions); floor: each message cut into datagrams of the engine's datagram
//              size, sendmmsg/recvmmsg and a credit window (counted at the receiver). Both
//              sides move messages between as many N-byte buffers as the engine keeps
//              outstanding (bw_depth), so both touch the same memory. A second floor, the
//              CRC floor, adds a CRC-32C trailer to every datagram, computed by the sender
//              and checked by the receiver as the engine checks every packet (rows "/crc",
//              informative: what the engine costs beyond its integrity check).
//
// Flow control of the floor. The receiver returns its cumulative datagram count every window/4
// datagrams and the sender keeps at most `window` datagrams unacknowledged: the window and
// acknowledgement rate the engine uses (srcnic_config_t.window), so the floor pays the kernel
// cost of comparable reverse traffic and is never overrun (no datagram is lost on loopback).
//
// Threads. Both endpoints of a test run in this process, one thread each (pinned to CPUs 0 and 1
// unless --no-pin), each busy-polling only its own NIC or socket. NICs, QPs and sockets are
// created by the main thread before the threads start and destroyed after they are joined.
//
// Watchdog. Every loop is bounded: a test that exceeds its time budget is reported as a timeout
// and stopped. A failed completion, an unexpected length or a payload mismatch is an error.
// The program exits 0 whether or not the aims are met, 1 on an error or timeout, 2 on bad usage.
#include <srcnic/srcnic.h>

#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <numeric>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "wire/crc32c.h"

namespace {

constexpr uint64_t kNsPerSec = 1000000000ull;
constexpr uint32_t kKiB = 1024;
constexpr uint32_t kMiB = 1024 * 1024;
// Bytes at the start of every payload that carry its sequence number.
constexpr uint32_t kSeqBytes = 8;
// Payload pattern tags of the two directions.
constexpr uint8_t kTagA = 0x5a;
constexpr uint8_t kTagB = 0xa5;
// Datagrams per sendmmsg/recvmmsg call of the floor, as the engine's UDP link batches.
constexpr uint32_t kUdpBatch = 32;
// SENDs posted back to back before the next progress call (rate test).
constexpr uint32_t kPostBatch = 32;
// Ping-pong: send buffers rotated (a gather SEND's buffer is reused only once it completed)
// and receive buffers kept posted.
constexpr uint32_t kPingSlots = 4;
constexpr uint32_t kPingRecvs = 16;
// Seed of the engine's fault injection under --loss (printed in the header).
constexpr uint64_t kLossSeed = 42;
// Bandwidth: bytes of messages kept outstanding, and bounds on the number of messages.
constexpr uint64_t kBwOutstandingBytes = 16ull * kMiB;
constexpr uint32_t kBwMinDepth = 4;
constexpr uint32_t kBwMaxDepth = 256;
// Floor: a sender without credit for this long assumes the credit datagram was lost.
constexpr uint64_t kCreditStallNs = 20 * 1000 * 1000;
// Receiver of a stream: after the sender stopped, give up waiting for missing data after this.
constexpr uint64_t kQuietNs = 200 * 1000 * 1000;
// Default datagram size of the floor's bandwidth stream: the largest datagram the engine's UDP
// link allows on loopback (kUdpLoopbackMtu), which is also what the engine sends there unless
// told otherwise (srcnic_config_t.mtu, --mtu).
constexpr uint32_t kFloorDatagram = 65000;
// Largest UDP payload over IPv4, bytes.
constexpr uint32_t kMaxDatagram = 65507;
// The CRC floor's trailer: CRC-32C of the datagram's payload.
constexpr uint32_t kCrcBytes = 4;
// An endpoint thread that got less of a CPU than this was preempted by other load.
constexpr double kFairCpuShare = 0.9;
// Extra time a throughput test may take beyond warm-up + measurement before the watchdog fires.
constexpr double kThroughputSlackSec = 15.0;

uint64_t now_ns()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * kNsPerSec + static_cast<uint64_t>(ts.tv_nsec);
}

uint32_t round_up_pow2(uint32_t v)
{
    uint32_t p = 1;
    while (p < v) {
        p <<= 1;
    }
    return p;
}

std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    return buf;
}

// "8 B", "1 KiB", "64 KiB", "1 MiB", "1500 B".
std::string size_name(uint32_t size)
{
    if (size >= kMiB && size % kMiB == 0) {
        return format("%u MiB", size / kMiB);
    }
    if (size >= kKiB && size % kKiB == 0) {
        return format("%u KiB", size / kKiB);
    }
    return format("%u B", size);
}

// --- options ---------------------------------------------------------------------------------

struct Options {
    uint32_t iters = 20000;            // ping-pong round trips measured, per size and side
    uint32_t blocks = 8;               // ping-pong: blocks the round trips are split into
    uint32_t warmup = 2000;            // ping-pong round trips before measuring
    double seconds = 2.0;              // measurement of a throughput test, s, over all its blocks
    uint32_t stream_blocks = 4;        // throughput: blocks the measurement is split into
    double warmup_seconds = 0.25;      // throughput: ignored time after a block's first arrival, s
    double timeout = 30.0;             // watchdog of a ping-pong test, s
    std::vector<uint32_t> lat_sizes{8, kKiB};
    std::vector<uint32_t> bw_sizes{64 * kKiB, kMiB, 4 * kMiB};
    uint32_t rate_size = 8;            // message size of the rate test, bytes
    uint32_t rate_depth = 512;         // rate: SENDs posted and not yet completed, at most
    uint32_t window = 0;               // engine window (and floor credit window); 0 = default
    uint32_t mtu = 0;                  // engine datagram size (srcnic_config_t.mtu); 0 = default
    uint32_t datagram = kFloorDatagram; // floor bandwidth stream: datagram size, bytes
    uint32_t sock_buf = 0;             // socket buffers of both sides, bytes; 0 = the engine's default
    uint32_t repeat = 1;               // runs of every test (latency: of its blocks)
    uint32_t retries = 2;              // extra runs of a test whose kept figure was preempted
    double loss = 0;                   // engine only: fraction of received datagrams dropped
    bool pin = true;                   // pin the two threads to CPUs 0 and 1
    bool crc_floor = true;             // bandwidth: also run the floor that computes CRC-32C
    bool run_lat = true, run_rate = true, run_bw = true;
    bool run_engine = true, run_udp = true;
    std::string csv_path, json_path;
};

void usage(FILE *out)
{
    std::fprintf(out,
                 "usage: srcnic_bench [options]\n"
                 "  --iters N          ping-pong round trips measured per size (default 20000)\n"
                 "  --blocks N         split them into N blocks, engine and floor taking turns\n"
                 "                     block by block; figures pool every block (default 8)\n"
                 "  --warmup N         ping-pong round trips before each block (default 2000)\n"
                 "  --seconds S        measurement of each rate/bandwidth test, all blocks (default 2)\n"
                 "  --stream-blocks N  split it into N blocks, engine and floor taking turns\n"
                 "                     block by block, each after its own warm-up of 0.25 s;\n"
                 "                     figures pool every block (default 4)\n"
                 "  --sizes LIST       ping-pong message sizes, e.g. 8,1K (default 8,1K)\n"
                 "  --bw-sizes LIST    bandwidth message sizes (default 64K,1M,4M)\n"
                 "  --rate-depth N     rate test: outstanding SENDs (default 512)\n"
                 "  --window N         engine window and floor credit window, packets\n"
                 "                     (default: the engine's default)\n"
                 "  --mtu N            engine datagram size, bytes (srcnic_config_t.mtu;\n"
                 "                     default 0: the engine's automatic choice)\n"
                 "  --datagram N       floor bandwidth stream: datagram size (default 65000)\n"
                 "  --sock-buf N       socket send and receive buffers of both sides, bytes\n"
                 "                     (srcnic_config_t.sock_buf; default: the engine's)\n"
                 "  --tests LIST       any of lat,rate,bw (default all)\n"
                 "  --repeat N         run every test's blocks N times; the figures pool them\n"
                 "                     all (default 1)\n"
                 "  --retries N        run again up to N blocks of a test (per message size) in\n"
                 "                     which a thread was preempted by other load (default 2)\n"
                 "  --side S           engine, udp or both (default both)\n"
                 "  --loss P           drop a fraction P (0..0.5) of the datagrams each NIC\n"
                 "                     receives (seeded fault injection), to measure recovery;\n"
                 "                     engine only (a plain UDP floor does not recover), and the\n"
                 "                     latency tests add a mean row\n"
                 "  --timeout S        watchdog of one ping-pong test (default 30)\n"
                 "  --no-pin           do not pin the two threads to CPUs 0 and 1\n"
                 "  --no-crc-floor     bandwidth: leave out the second floor, whose datagrams\n"
                 "                     carry a CRC-32C the receiver checks (informative rows)\n"
                 "  --csv FILE         also write the results as CSV\n"
                 "  --json FILE        also write the results and the setup as JSON\n");
}

bool parse_size(const std::string &text, uint32_t *size_p)
{
    char *end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
    if (errno != 0 || end == text.c_str()) {
        return false;
    }
    unsigned long long mult = 1;
    const std::string suffix(end);
    if (suffix == "K" || suffix == "k" || suffix == "KiB") {
        mult = kKiB;
    } else if (suffix == "M" || suffix == "m" || suffix == "MiB") {
        mult = kMiB;
    } else if (!suffix.empty() && suffix != "B") {
        return false;
    }
    const unsigned long long bytes = v * mult;
    if (bytes == 0 || bytes > 256ull * kMiB) {
        return false;
    }
    *size_p = static_cast<uint32_t>(bytes);
    return true;
}

bool parse_list(const std::string &text, std::vector<std::string> *items)
{
    items->clear();
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ',')) {
        if (item.empty()) {
            return false;
        }
        items->push_back(item);
    }
    return !items->empty();
}

bool parse_sizes(const std::string &text, std::vector<uint32_t> *sizes)
{
    std::vector<std::string> items;
    if (!parse_list(text, &items)) {
        return false;
    }
    sizes->clear();
    for (const std::string &item : items) {
        uint32_t size;
        if (!parse_size(item, &size)) {
            return false;
        }
        sizes->push_back(size);
    }
    return true;
}

bool parse_uint(const char *text, uint32_t min, uint32_t max, uint32_t *value_p)
{
    char *end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < min || v > max) {
        return false;
    }
    *value_p = static_cast<uint32_t>(v);
    return true;
}

bool parse_seconds(const char *text, double *value_p)
{
    char *end = nullptr;
    const double v = std::strtod(text, &end);
    if (end == text || *end != '\0' || !(v > 0 && v <= 3600)) {
        return false;
    }
    *value_p = v;
    return true;
}

// Returns 0 when the options are usable, else the exit status (2: bad usage, 0: --help).
int parse_options(int argc, char **argv, Options *o)
{
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--help" || arg == "-h") {
            usage(stdout);
            return -1;
        }
        if (arg == "--no-pin") {
            o->pin = false;
            continue;
        }
        if (arg == "--no-crc-floor") {
            o->crc_floor = false;
            continue;
        }
        if (i + 1 >= argc) {
            std::fprintf(stderr, "srcnic_bench: %s needs a value (or is unknown)\n", arg.c_str());
            return 2;
        }
        const char *value = argv[++i];
        bool ok = true;
        if (arg == "--iters") {
            ok = parse_uint(value, 1, 100000000, &o->iters);
        } else if (arg == "--blocks") {
            ok = parse_uint(value, 1, 1000, &o->blocks);
        } else if (arg == "--warmup") {
            ok = parse_uint(value, 0, 100000000, &o->warmup);
        } else if (arg == "--seconds") {
            ok = parse_seconds(value, &o->seconds);
        } else if (arg == "--stream-blocks") {
            ok = parse_uint(value, 1, 100, &o->stream_blocks);
        } else if (arg == "--timeout") {
            ok = parse_seconds(value, &o->timeout);
        } else if (arg == "--sizes") {
            ok = parse_sizes(value, &o->lat_sizes);
        } else if (arg == "--bw-sizes") {
            ok = parse_sizes(value, &o->bw_sizes);
        } else if (arg == "--rate-depth") {
            ok = parse_uint(value, 1, 32768, &o->rate_depth);
        } else if (arg == "--repeat") {
            ok = parse_uint(value, 1, 100, &o->repeat);
        } else if (arg == "--retries") {
            ok = parse_uint(value, 0, 100, &o->retries);
        } else if (arg == "--mtu") {
            ok = parse_uint(value, 0, kMaxDatagram, &o->mtu);
        } else if (arg == "--sock-buf") {
            ok = parse_uint(value, 4096, 1u << 30, &o->sock_buf);
        } else if (arg == "--datagram") {
            ok = parse_uint(value, kSeqBytes + kCrcBytes, kMaxDatagram, &o->datagram);
        } else if (arg == "--window") {
            ok = parse_uint(value, 2, 1024, &o->window);
        } else if (arg == "--tests") {
            std::vector<std::string> items;
            ok = parse_list(value, &items);
            o->run_lat = o->run_rate = o->run_bw = false;
            for (const std::string &t : items) {
                if (t == "lat") {
                    o->run_lat = true;
                } else if (t == "rate") {
                    o->run_rate = true;
                } else if (t == "bw") {
                    o->run_bw = true;
                } else {
                    ok = false;
                }
            }
        } else if (arg == "--side") {
            const std::string s = value;
            ok = s == "engine" || s == "udp" || s == "both";
            o->run_engine = s != "udp";
            o->run_udp = s != "engine";
        } else if (arg == "--loss") {
            char *end = nullptr;
            o->loss = std::strtod(value, &end);
            ok = end != value && *end == '\0' && o->loss >= 0 && o->loss <= 0.5;
        } else if (arg == "--csv") {
            o->csv_path = value;
        } else if (arg == "--json") {
            o->json_path = value;
        } else {
            std::fprintf(stderr, "srcnic_bench: unknown option %s\n", arg.c_str());
            usage(stderr);
            return 2;
        }
        if (!ok) {
            std::fprintf(stderr, "srcnic_bench: bad value for %s: '%s'\n", arg.c_str(), value);
            return 2;
        }
    }
    if (o->blocks > o->iters) {
        std::fprintf(stderr, "srcnic_bench: --blocks %u exceeds --iters %u: a block needs a round trip\n",
                     o->blocks, o->iters);
        return 2;
    }
    if (o->loss > 0) {
        o->run_udp = false;
    }
    return 0;
}

// --- payloads --------------------------------------------------------------------------------
//
// Every message starts with its sequence number (its first min(len, 8) bytes); the bytes after
// it follow a fixed pattern of the direction's tag, so one reference buffer checks any message.

void put_seq(uint8_t *buf, uint32_t len, uint64_t seq)
{
    std::memcpy(buf, &seq, std::min(len, kSeqBytes));
}

bool seq_is(const uint8_t *buf, uint32_t len, uint64_t seq)
{
    return std::memcmp(buf, &seq, std::min(len, kSeqBytes)) == 0;
}

uint64_t get_seq(const uint8_t *buf)
{
    uint64_t seq;
    std::memcpy(&seq, buf, sizeof(seq));
    return seq;
}

void fill_pattern(uint8_t *buf, size_t len, uint8_t tag)
{
    for (size_t i = 0; i < len; ++i) {
        buf[i] = static_cast<uint8_t>(i * 131 + tag);
    }
}

// A message of len bytes whose bytes after the sequence number match the reference.
bool body_matches(const uint8_t *buf, uint32_t len, const uint8_t *ref)
{
    return len <= kSeqBytes || std::memcmp(buf + kSeqBytes, ref + kSeqBytes, len - kSeqBytes) == 0;
}

// A buffer of fresh pages, touched before the clock starts.
class Buffer {
public:
    explicit Buffer(size_t len, uint8_t tag = 0) : data_(new uint8_t[len ? len : 1]), len_(len)
    {
        fill_pattern(data_.get(), len, tag);
    }
    uint8_t *data() { return data_.get(); }
    const uint8_t *data() const { return data_.get(); }
    size_t size() const { return len_; }

private:
    std::unique_ptr<uint8_t[]> data_;
    size_t len_;
};

// --- the test context: watchdog, first error, hand-off flags --------------------------------

class TestCtx {
public:
    TestCtx(std::string name, double budget_s)
        : name_(std::move(name)), budget_s_(budget_s),
          deadline_ns_(now_ns() + static_cast<uint64_t>(budget_s * 1e9))
    {
    }

    // False once the test failed or ran out of time (the clock is read every 32nd call).
    bool alive()
    {
        if (abort_.load(std::memory_order_relaxed)) {
            return false;
        }
        thread_local unsigned calls = 0;
        if ((++calls & 31) == 0 && now_ns() > deadline_ns_) {
            std::lock_guard<std::mutex> lock(mutex_);
            if (error_.empty()) {
                timed_out_ = true;
                error_ = format("timeout: %s exceeded its budget of %g s", name_.c_str(), budget_s_);
            }
            abort_.store(true);
            return false;
        }
        return true;
    }

    // Records the first error and stops both threads.
    void fail(const char *fmt, ...) __attribute__((format(printf, 2, 3)))
    {
        char buf[512];
        va_list ap;
        va_start(ap, fmt);
        std::vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        std::lock_guard<std::mutex> lock(mutex_);
        if (error_.empty()) {
            error_ = name_ + ": " + buf;
        }
        abort_.store(true);
    }

    bool ok() const { return !abort_.load(); }
    bool timed_out() const { return timed_out_; }
    const std::string &error() const { return error_; }
    const std::string &name() const { return name_; }

    std::atomic<bool> stop{false};           // the measurement is over: senders stop
    std::atomic<int> finished{0};            // endpoints whose own work is complete
    std::atomic<uint64_t> sent_total{0};     // messages (datagrams) the sender sent in all
    std::atomic<bool> sent_published{false}; // sent_total is final
    double cpu_share[2] = {1, 1};            // CPU time / wall time of each endpoint thread

private:
    std::string name_;
    double budget_s_;
    uint64_t deadline_ns_;
    std::atomic<bool> abort_{false};
    std::mutex mutex_;
    std::string error_;
    bool timed_out_ = false;
};

void pin_to_cpu(unsigned cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

uint64_t thread_cpu_ns()
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * kNsPerSec + static_cast<uint64_t>(ts.tv_nsec);
}

// Runs the two endpoints of a test, each on its own thread, and records the share of a CPU
// each thread got: a busy-polling thread that got much less than 100% was preempted by other
// load on the machine, and its figures are not the engine's or the kernel's.
template <typename FnA, typename FnB> void run_pair(const Options &o, TestCtx &ctx, FnA &&fa, FnB &&fb)
{
    const bool pin = o.pin && std::thread::hardware_concurrency() >= 2;
    auto endpoint = [&](unsigned index, auto &&fn) {
        if (pin) {
            pin_to_cpu(index);
        }
        const uint64_t wall0 = now_ns(), cpu0 = thread_cpu_ns();
        fn();
        const uint64_t wall = now_ns() - wall0;
        ctx.cpu_share[index] = wall ? static_cast<double>(thread_cpu_ns() - cpu0) / static_cast<double>(wall) : 1;
    };
    std::thread tb([&] { endpoint(1, fb); });
    std::thread ta([&] { endpoint(0, fa); });
    ta.join();
    tb.join();
}

// Counts units (messages or bytes) over an interval that starts warmup_s after the first
// arrival and lasts at least seconds; both ends are arrival instants.
class Meter {
public:
    Meter(double warmup_s, double seconds)
        : warmup_ns_(static_cast<uint64_t>(warmup_s * 1e9)), interval_ns_(static_cast<uint64_t>(seconds * 1e9))
    {
    }

    // Call right after arrivals brought the running total to `units`. True once complete.
    bool update(uint64_t units)
    {
        if (state_ == State::kDone) {
            return true;
        }
        const uint64_t now = now_ns();
        switch (state_) {
        case State::kIdle:
            t_first_ = now;
            state_ = State::kWarmup;
            break;
        case State::kWarmup:
            if (now - t_first_ >= warmup_ns_) {
                t0_ = now;
                u0_ = units;
                state_ = State::kMeasuring;
            }
            break;
        case State::kMeasuring:
            if (now - t0_ >= interval_ns_) {
                t1_ = now;
                u1_ = units;
                state_ = State::kDone;
            }
            break;
        case State::kDone:
            break;
        }
        return state_ == State::kDone;
    }

    bool done() const { return state_ == State::kDone; }
    // The units counted over the measured interval and its length (both 0 until done).
    uint64_t units() const { return done() ? u1_ - u0_ : 0; }
    uint64_t interval_ns() const { return done() ? t1_ - t0_ : 0; }

private:
    enum class State { kIdle, kWarmup, kMeasuring, kDone };
    State state_ = State::kIdle;
    uint64_t warmup_ns_, interval_ns_;
    uint64_t t_first_ = 0, t0_ = 0, u0_ = 0, t1_ = 0, u1_ = 0;
};

// --- results ---------------------------------------------------------------------------------

// One side's figure for one test.
struct Figure {
    bool ran = false;
    bool ok = false;
    bool timed_out = false;
    double value = NAN;     // in the row's unit
    double cpu_share = 1;   // the smaller CPU share of the two endpoint threads (see run_pair)
    std::string note;       // counters worth knowing (retransmissions, drops, stalls)
    std::string error;
};

enum class Better { kLower, kHigher };

struct Row {
    std::string test;       // "latency 8 B median"
    std::string unit;       // "us", "Mmsg/s", "GB/s"
    Better better;
    double aim;             // bound on srcnic/udp; NAN = informative only
    Figure engine, udp;
    const char *floor = "udp";   // which floor `udp` is: "udp", or "udp+crc" (the CRC floor)

    double ratio() const
    {
        return engine.ok && udp.ok && udp.value > 0 ? engine.value / udp.value : NAN;
    }
    std::string aim_text() const
    {
        if (std::isnan(aim)) {
            return "-";
        }
        return format("%s %.2f", better == Better::kLower ? "<=" : ">=", aim);
    }
    std::string verdict() const
    {
        if ((engine.ran && !engine.ok) || (udp.ran && !udp.ok)) {
            return (engine.timed_out || udp.timed_out) ? "timeout" : "error";
        }
        const double r = ratio();
        if (std::isnan(r) || std::isnan(aim)) {
            return "-";
        }
        const bool met = better == Better::kLower ? r <= aim : r >= aim;
        return met ? "met" : "missed";
    }
};

// How a test (or every block of one) went: whether it ran clean and the smallest CPU share
// each endpoint thread got.
struct RunStatus {
    bool ok = true;
    bool timed_out = false;
    double cpu_share[2] = {1, 1};
    std::string error;

    explicit RunStatus(const TestCtx &ctx)
        : ok(ctx.ok()), timed_out(ctx.timed_out()), cpu_share{ctx.cpu_share[0], ctx.cpu_share[1]},
          error(ctx.error())
    {
    }
    RunStatus() = default;

    void merge(const RunStatus &other)
    {
        ok = ok && other.ok;
        timed_out = timed_out || other.timed_out;
        cpu_share[0] = std::min(cpu_share[0], other.cpu_share[0]);
        cpu_share[1] = std::min(cpu_share[1], other.cpu_share[1]);
        if (error.empty()) {
            error = other.error;
        }
    }
    bool preempted() const { return ok && std::min(cpu_share[0], cpu_share[1]) < kFairCpuShare; }
};

Figure figure_from(const RunStatus &st, double value, const std::string &note)
{
    Figure f;
    f.ran = true;
    f.ok = st.ok;
    f.timed_out = st.timed_out;
    f.value = f.ok ? value : NAN;
    f.cpu_share = std::min(st.cpu_share[0], st.cpu_share[1]);
    f.note = format("cpu=%.0f%%/%.0f%%", st.cpu_share[0] * 100, st.cpu_share[1] * 100) +
             (note.empty() ? "" : " " + note);
    f.error = st.error;
    return f;
}

// Half round trips of a ping-pong, ns.
struct LatencyFigures {
    Figure median, p99, mean;
};

// Engine counters summed over both NICs (and over blocks), by srcnic_counter_t.
using Counters = std::array<uint64_t, SRCNIC_CNT_LAST>;

// The counters worth knowing of a run, as "name=value" words.
std::string counters_text(const Counters &v)
{
    static const srcnic_counter_t kShown[] = {
        SRCNIC_CNT_TX_PACKETS, SRCNIC_CNT_ACKS_SENT, SRCNIC_CNT_RETRANSMITS,
        SRCNIC_CNT_TIMEOUTS, SRCNIC_CNT_SPURIOUS_TIMEOUTS, SRCNIC_CNT_RNR_SENT, SRCNIC_CNT_DUPLICATES,
        SRCNIC_CNT_OUT_OF_ORDER, SRCNIC_CNT_DROP_NO_BUFFER, SRCNIC_CNT_DROP_BAD_CHECKSUM,
        SRCNIC_CNT_DROP_OUT_OF_WINDOW};
    std::string s;
    for (srcnic_counter_t c : kShown) {
        const bool always = c == SRCNIC_CNT_TX_PACKETS || c == SRCNIC_CNT_ACKS_SENT ||
                            c == SRCNIC_CNT_RETRANSMITS;
        if (v[c] != 0 || always) {
            std::string name = srcnic_counter_name(c);
            std::transform(name.begin(), name.end(), name.begin(), ::tolower);
            s += (s.empty() ? "" : " ") + name + "=" + std::to_string(v[c]);
        }
    }
    if (v[SRCNIC_CNT_TX_PACKETS] != 0) {
        s += " avg_datagram=" + std::to_string(v[SRCNIC_CNT_TX_BYTES] / v[SRCNIC_CNT_TX_PACKETS]);
    }
    return s;
}

// One block of one side of a ping-pong: the round trips it measured (ns) and how it went.
struct LatencyRun {
    RunStatus status;
    std::vector<uint64_t> rtt;
    Counters counters{};     // engine side only
};

// What every block of one side of a test adds up to: how they went, the engine's counters and
// each block's own figure, kept to compare blocks that ran side by side.
struct BlockPool {
    bool engine = false;      // show the engine's counters
    uint32_t blocks = 0;
    RunStatus status;
    Counters counters{};
    std::vector<double> block_figures;

    void add_block(const RunStatus &st, const Counters &c, double figure)
    {
        if (blocks == 0) {
            status = st;
        } else {
            status.merge(st);
        }
        ++blocks;
        for (size_t i = 0; i < counters.size(); ++i) {
            counters[i] += c[i];
        }
        block_figures.push_back(figure);
    }
    std::string note() const
    {
        return format("blocks=%u", blocks) + (engine ? " " + counters_text(counters) : "");
    }
};

// Every block of one side of a ping-pong, pooled: the figures are those of all their round trips
// together; a block's own figure is its median (one-way, µs).
struct LatencyPool : BlockPool {
    std::vector<uint64_t> rtt;

    void add(LatencyRun &&run)
    {
        add_block(run.status, run.counters, median_us(run.rtt));
        rtt.insert(rtt.end(), run.rtt.begin(), run.rtt.end());
    }

    LatencyFigures figures() const
    {
        std::vector<uint64_t> sorted = rtt;
        double median = NAN, p99 = NAN, mean = NAN;
        if (!sorted.empty()) {
            const size_t n = sorted.size();
            std::sort(sorted.begin(), sorted.end());
            median = static_cast<double>(sorted[n / 2]) / 2e3;
            p99 = static_cast<double>(sorted[std::min(n - 1, n * 99 / 100)]) / 2e3;
            mean = std::accumulate(sorted.begin(), sorted.end(), 0.0) / static_cast<double>(n) / 2e3;
        }
        const std::string note = this->note();
        return LatencyFigures{figure_from(status, median, note), figure_from(status, p99, note),
                              figure_from(status, mean, note)};
    }

    // Median half round trip of a block, µs (NAN if it measured none).
    static double median_us(std::vector<uint64_t> rtt)
    {
        if (rtt.empty()) {
            return NAN;
        }
        std::nth_element(rtt.begin(), rtt.begin() + rtt.size() / 2, rtt.end());
        return static_cast<double>(rtt[rtt.size() / 2]) / 2e3;
    }
};

// One block of one side of a throughput test: the units (messages or bytes) that arrived over
// its measured interval, and how it went.
struct StreamRun {
    RunStatus status;
    uint64_t units = 0;
    uint64_t ns = 0;
    Counters counters{};     // engine side only
    uint64_t lost = 0;       // floor side only: datagrams missing at its receiver
    uint64_t stalls = 0;     // floor side only: credits its sender assumed lost
    std::string setup;       // "depth=16": the same in every block
};

// Every block of one side of a throughput test, pooled: the figure is all their units over all
// their measured time; a block's own figure is its rate.
struct StreamPool : BlockPool {
    uint64_t units = 0, ns = 0, lost = 0, stalls = 0;
    std::string setup;

    void add(StreamRun &&run)
    {
        add_block(run.status, run.counters, rate(run.units, run.ns));
        units += run.units;
        ns += run.ns;
        lost += run.lost;
        stalls += run.stalls;
        setup = run.setup;
    }

    // In units per second over `scale`; a side that did not run has no figure.
    Figure figure(double scale) const
    {
        if (blocks == 0) {
            return Figure{};
        }
        std::string n = setup.empty() ? note() : setup + " " + note();
        if (!engine) {
            n += format(" lost=%" PRIu64 " stalls=%" PRIu64, lost, stalls);
        }
        return figure_from(status, rate(units, ns) / scale, n);
    }

    static double rate(uint64_t units, uint64_t ns)
    {
        return ns > 0 ? static_cast<double>(units) * 1e9 / static_cast<double>(ns) : NAN;
    }
};

// Socket buffers of both sides: --sock-buf, or the engine's default (srcnic_config_t.sock_buf).
uint32_t engine_sock_buf(const Options &o)
{
    srcnic_config_t config;
    srcnic_config_init(&config);
    return o.sock_buf != 0 ? o.sock_buf : config.sock_buf;
}

// The measured time of one block of a throughput test, s.
double block_seconds(const Options &o)
{
    return o.seconds / o.stream_blocks;
}

// The watchdog of one block of a throughput test, s.
double block_timeout(const Options &o)
{
    return o.warmup_seconds + block_seconds(o) + kThroughputSlackSec;
}

// --- the engine side -------------------------------------------------------------------------

struct EngineEnd {
    srcnic_nic_t *nic = nullptr;
    srcnic_qp_t *qp = nullptr;
    srcnic_dest_t peer{};   // the other end's QP
};

// Two NICs on 127.0.0.1, one QP each, each with a destination naming the other's QP.
class EnginePair {
public:
    EnginePair() = default;
    EnginePair(const EnginePair &) = delete;
    EnginePair &operator=(const EnginePair &) = delete;
    ~EnginePair()
    {
        for (EngineEnd *e : {&a, &b}) {
            if (e->qp != nullptr) {
                srcnic_qp_destroy(e->qp);
            }
            if (e->nic != nullptr) {
                srcnic_nic_destroy(e->nic);
            }
        }
    }

    bool open(const Options &o, uint32_t sq_size, uint32_t rq_size, std::string *err)
    {
        srcnic_config_t config;
        srcnic_config_init(&config);
        std::snprintf(config.bind_addr, sizeof(config.bind_addr), "127.0.0.1");
        if (o.window != 0) {
            config.window = o.window;
        }
        config.mtu = o.mtu;
        config.sock_buf = engine_sock_buf(o);
        config.fault_drop = o.loss;
        config.fault_seed = kLossSeed;
        srcnic_qp_config_t qc;
        srcnic_qp_config_init(&qc);
        qc.sq_size = std::max(qc.sq_size, round_up_pow2(sq_size));
        qc.rq_size = std::max(qc.rq_size, round_up_pow2(rq_size));
        srcnic_status_t st;
        for (EngineEnd *e : {&a, &b}) {
            if ((st = srcnic_nic_create(&config, &e->nic)) != SRCNIC_OK ||
                (st = srcnic_qp_create(e->nic, &qc, &e->qp)) != SRCNIC_OK) {
                *err = format("creating a NIC or QP failed: %s", srcnic_status_string(st));
                return false;
            }
        }
        srcnic_nic_addr_t aa, ba;
        srcnic_nic_query_addr(a.nic, &aa);
        srcnic_nic_query_addr(b.nic, &ba);
        if ((st = srcnic_dest_create(a.nic, &ba, srcnic_qp_num(b.qp), &a.peer)) != SRCNIC_OK ||
            (st = srcnic_dest_create(b.nic, &aa, srcnic_qp_num(a.qp), &b.peer)) != SRCNIC_OK) {
            *err = format("srcnic_dest_create failed: %s", srcnic_status_string(st));
            return false;
        }
        return true;
    }

    // Both NICs' counters, summed.
    Counters counter_values() const
    {
        Counters v{};
        for (int c = 0; c < SRCNIC_CNT_LAST; ++c) {
            const auto id = static_cast<srcnic_counter_t>(c);
            v[c] = (a.nic ? srcnic_nic_counter(a.nic, id) : 0) +
                   (b.nic ? srcnic_nic_counter(b.nic, id) : 0);
        }
        return v;
    }

    EngineEnd a, b;
};

// Copies up to SRCNIC_WQE_INLINE_MAX bytes in 8-byte words and a tail: GCC inlines a memcpy it
// knows to be that short as `rep movsq`, slow to start for the few bytes of a small message.
void copy_inline(uint8_t *to, const uint8_t *from, uint32_t len)
{
    uint32_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t word;
        std::memcpy(&word, from + i, sizeof(word));
        std::memcpy(to + i, &word, sizeof(word));
    }
    for (; i < len; ++i) {
        to[i] = from[i];
    }
}

srcnic_wqe_t make_wqe(srcnic_opcode_t op, srcnic_dest_t dest, const uint8_t *buf, uint32_t len)
{
    // Field by field, as the UCT transport builds its WQEs: a memset of the 176 bytes would be
    // `rep stos` under generic tuning, tens of cycles to start on every post. The engine reads
    // the gather list and inline data only as far as num_sge and inline_len say.
    srcnic_wqe_t w;
    w.wr_id = 0;
    w.opcode = static_cast<uint8_t>(op);
    w.flags = 0;
    w.num_sge = 0;
    w.reserved0 = 0;
    w.imm = 0;
    w.dest = dest;
    w.remote_addr = 0;
    w.rkey = 0;
    w.inline_len = 0;
    w.tag = 0;
    if (op == SRCNIC_OP_SEND && len <= SRCNIC_WQE_INLINE_MAX) {
        w.flags = SRCNIC_WQE_FLAG_INLINE;
        w.inline_len = len;
        copy_inline(w.u.inline_data, buf, len);
    } else {
        w.num_sge = 1;
        w.u.sge[0].addr = reinterpret_cast<uint64_t>(buf);
        w.u.sge[0].length = len;
    }
    return w;
}

bool post_recv(TestCtx &ctx, EngineEnd &e, uint64_t wr_id, uint8_t *buf, uint32_t len)
{
    srcnic_recv_wqe_t r;
    std::memset(&r, 0, sizeof(r));
    r.wr_id = wr_id;
    r.addr = reinterpret_cast<uint64_t>(buf);
    r.length = len;
    const srcnic_status_t st = srcnic_post_recv(e.qp, &r);
    if (st != SRCNIC_OK) {
        ctx.fail("srcnic_post_recv failed: %s", srcnic_status_string(st));
        return false;
    }
    return true;
}

bool post_send(TestCtx &ctx, EngineEnd &e, const srcnic_wqe_t &w)
{
    const srcnic_status_t st = srcnic_post_send(e.qp, &w);
    if (st != SRCNIC_OK) {
        ctx.fail("srcnic_post_send failed: %s", srcnic_status_string(st));
        return false;
    }
    return true;
}

// One progress call and one sweep of the completion queue; a failed completion fails the
// test. Returns the completions handled.
template <typename OnCqe> unsigned engine_poll(TestCtx &ctx, EngineEnd &e, OnCqe &&on_cqe, bool progress = true)
{
    if (progress) {
        srcnic_nic_progress(e.nic);
    }
    srcnic_cqe_t cqes[64];
    const unsigned n = srcnic_poll_cq(e.qp, cqes, 64);
    for (unsigned i = 0; i < n; ++i) {
        if (cqes[i].status != SRCNIC_OK) {
            ctx.fail("completion of %s wr_id %" PRIu64 " failed: %s",
                     cqes[i].opcode == SRCNIC_OP_RECV ? "RECV" : "request", cqes[i].wr_id,
                     srcnic_status_string(static_cast<srcnic_status_t>(cqes[i].status)));
            return i;
        }
        on_cqe(cqes[i]);
    }
    return n;
}

// Keeps progressing until this end's requests have completed and the other end got there
// too, so that no NIC is destroyed while its peer still waits for an acknowledgement; then
// takes the completions left on the queue.
template <typename OnCqe>
void engine_finish(TestCtx &ctx, EngineEnd &e, const uint64_t &outstanding, OnCqe &&on_cqe)
{
    bool mine = false;
    while (ctx.alive()) {
        engine_poll(ctx, e, on_cqe);
        if (!mine && outstanding == 0) {
            mine = true;
            ctx.finished.fetch_add(1);
        }
        if (mine && ctx.finished.load() == 2) {
            break;
        }
    }
    while (ctx.ok() && engine_poll(ctx, e, on_cqe, false) != 0) {
    }
}

// One block of the engine's ping-pong: o.warmup round trips, then `iters` measured.
LatencyRun engine_latency(const Options &o, uint32_t size, uint32_t iters)
{
    TestCtx ctx("srcnic latency " + size_name(size), o.timeout);
    EnginePair pair;
    std::string err;
    if (!pair.open(o, kPingSlots * 2, kPingRecvs, &err)) {
        ctx.fail("%s", err.c_str());
        return LatencyRun{RunStatus(ctx), {}, {}};
    }
    const uint64_t total = static_cast<uint64_t>(o.warmup) + iters;
    std::vector<uint64_t> rtt;
    rtt.reserve(iters);

    // One end of the ping-pong: the initiator sends first and times the round trip.
    auto end = [&](EngineEnd &e, bool initiator) {
        const uint8_t my_tag = initiator ? kTagA : kTagB;
        const Buffer ref(size, initiator ? kTagB : kTagA);
        std::vector<Buffer> sbuf, rbuf;
        for (uint32_t i = 0; i < kPingSlots; ++i) {
            sbuf.emplace_back(size, my_tag);
        }
        for (uint32_t i = 0; i < kPingRecvs; ++i) {
            rbuf.emplace_back(size);
            if (!post_recv(ctx, e, i, rbuf[i].data(), size)) {
                return;
            }
        }
        uint64_t outstanding = 0;
        int64_t arrived = -1;   // receive buffer of the message that arrived, -1: none
        uint32_t arrived_len = 0;
        auto on_cqe = [&](const srcnic_cqe_t &c) {
            if (c.opcode == SRCNIC_OP_RECV) {
                arrived = static_cast<int64_t>(c.wr_id);
                arrived_len = c.byte_len;
            } else {
                --outstanding;
            }
        };
        // Waits for the next message and checks it; returns its receive buffer, or -1.
        auto receive = [&](uint64_t seq) -> int64_t {
            while (arrived < 0 && ctx.alive()) {
                engine_poll(ctx, e, on_cqe);
            }
            const int64_t slot = arrived;
            arrived = -1;
            if (slot < 0) {
                return -1;
            }
            if (arrived_len != size || !seq_is(rbuf[slot].data(), size, seq)) {
                ctx.fail("message %" PRIu64 ": %u bytes, sequence %" PRIu64 " (expected %u bytes, %" PRIu64 ")",
                         seq, arrived_len, size >= kSeqBytes ? get_seq(rbuf[slot].data()) : 0, size, seq);
                return -1;
            }
            return slot;
        };
        auto send = [&](uint64_t seq) {
            // A gather SEND reads its buffer until it completes: reuse a slot only then.
            while (outstanding >= kPingSlots && ctx.alive()) {
                engine_poll(ctx, e, on_cqe);
            }
            uint8_t *buf = sbuf[seq % kPingSlots].data();
            put_seq(buf, size, seq);
            srcnic_wqe_t w = make_wqe(SRCNIC_OP_SEND, e.peer, buf, size);
            w.wr_id = seq;
            if (post_send(ctx, e, w)) {
                ++outstanding;
                // The doorbell, as the UCT transport rings it after a post: the message
                // leaves now, not after the bookkeeping that follows.
                srcnic_nic_transmit(e.nic);
            }
        };
        // Checks the whole body of some messages, off the timed path, and reposts the buffer.
        auto release = [&](int64_t slot, uint64_t seq) {
            if ((seq < 16 || seq % 1024 == 0) && !body_matches(rbuf[slot].data(), size, ref.data())) {
                ctx.fail("message %" PRIu64 ": payload differs from what was sent", seq);
                return;
            }
            post_recv(ctx, e, static_cast<uint64_t>(slot), rbuf[slot].data(), size);
        };
        for (uint64_t i = 0; i < total && ctx.ok(); ++i) {
            if (initiator) {
                const uint64_t t0 = now_ns();
                send(i);
                const int64_t slot = receive(i);
                const uint64_t t1 = now_ns();
                if (slot < 0) {
                    break;
                }
                if (i >= o.warmup) {
                    rtt.push_back(t1 - t0);
                }
                release(slot, i);
            } else {
                const int64_t slot = receive(i);
                if (slot < 0) {
                    break;
                }
                send(i);
                release(slot, i);
            }
        }
        engine_finish(ctx, e, outstanding, on_cqe);
    };
    run_pair(o, ctx, [&] { end(pair.a, true); }, [&] { end(pair.b, false); });
    return LatencyRun{RunStatus(ctx), std::move(rtt), pair.counter_values()};
}

StreamRun engine_rate(const Options &o)
{
    const uint32_t size = o.rate_size;
    TestCtx ctx("srcnic rate " + size_name(size), block_timeout(o));
    EnginePair pair;
    std::string err;
    const uint32_t rq = 4096;
    if (!pair.open(o, o.rate_depth, rq, &err)) {
        ctx.fail("%s", err.c_str());
        return StreamRun{RunStatus(ctx)};
    }
    Meter meter(o.warmup_seconds, block_seconds(o));

    auto sender = [&](EngineEnd &e) {
        Buffer msg(size, kTagA);
        srcnic_wqe_t w = make_wqe(SRCNIC_OP_SEND, e.peer, msg.data(), size);
        const bool inl = (w.flags & SRCNIC_WQE_FLAG_INLINE) != 0;
        std::vector<Buffer> slots;   // gather SENDs: one buffer per outstanding message
        for (uint32_t i = 0; !inl && i < o.rate_depth; ++i) {
            slots.emplace_back(size, kTagA);
        }
        uint64_t posted = 0, outstanding = 0;
        auto on_cqe = [&](const srcnic_cqe_t &c) {
            if (c.opcode != SRCNIC_OP_SEND || c.byte_len != size) {
                ctx.fail("unexpected completion: opcode %u, %u bytes", c.opcode, c.byte_len);
            }
            --outstanding;
        };
        while (ctx.alive() && !ctx.stop.load(std::memory_order_relaxed)) {
            for (uint32_t k = 0; k < kPostBatch && outstanding < o.rate_depth; ++k) {
                w.wr_id = posted;
                if (inl) {
                    put_seq(w.u.inline_data, size, posted);
                } else {
                    uint8_t *buf = slots[posted % o.rate_depth].data();
                    put_seq(buf, size, posted);
                    w.u.sge[0].addr = reinterpret_cast<uint64_t>(buf);
                }
                const srcnic_status_t st = srcnic_post_send(e.qp, &w);
                if (st == SRCNIC_ERR_NO_RESOURCE) {
                    break;
                }
                if (st != SRCNIC_OK) {
                    ctx.fail("srcnic_post_send failed: %s", srcnic_status_string(st));
                    break;
                }
                ++posted;
                ++outstanding;
            }
            engine_poll(ctx, e, on_cqe);
        }
        ctx.sent_total.store(posted);
        ctx.sent_published.store(true);
        engine_finish(ctx, e, outstanding, on_cqe);
    };

    auto receiver = [&](EngineEnd &e) {
        const Buffer ref(size, kTagA);
        const uint32_t slot_len = std::max<uint32_t>(size, 64);
        Buffer bufs(static_cast<size_t>(slot_len) * rq);
        for (uint32_t i = 0; i < rq; ++i) {
            if (!post_recv(ctx, e, i, bufs.data() + static_cast<size_t>(i) * slot_len, size)) {
                return;
            }
        }
        uint64_t received = 0;
        const uint64_t no_sends = 0;
        auto on_cqe = [&](const srcnic_cqe_t &c) {
            uint8_t *buf = bufs.data() + c.wr_id * slot_len;
            if (c.opcode != SRCNIC_OP_RECV || c.byte_len != size || !seq_is(buf, size, received) ||
                ((received < 16 || received % 4096 == 0) && !body_matches(buf, size, ref.data()))) {
                ctx.fail("message %" PRIu64 " arrived wrong (%u bytes, or payload differs)", received,
                         c.byte_len);
                return;
            }
            ++received;
            post_recv(ctx, e, c.wr_id, buf, size);
        };
        while (ctx.alive() && !meter.done()) {
            if (engine_poll(ctx, e, on_cqe) != 0 && meter.update(received)) {
                ctx.stop.store(true);
            }
        }
        engine_finish(ctx, e, no_sends, on_cqe);
        if (ctx.ok() && received != ctx.sent_total.load()) {
            ctx.fail("%" PRIu64 " messages sent and completed, %" PRIu64 " received",
                     ctx.sent_total.load(), received);
        }
    };
    run_pair(o, ctx, [&] { sender(pair.a); }, [&] { receiver(pair.b); });
    return StreamRun{RunStatus(ctx), meter.units(), meter.interval_ns(), pair.counter_values()};
}

uint32_t bw_depth(uint32_t size)
{
    return static_cast<uint32_t>(
        std::min<uint64_t>(kBwMaxDepth, std::max<uint64_t>(kBwMinDepth, kBwOutstandingBytes / size)));
}

// SEND into size-byte receive buffers, or RDMA WRITE into a registered region of the
// receiver's, depth messages outstanding.
StreamRun engine_bandwidth(const Options &o, uint32_t size, bool write)
{
    TestCtx ctx(std::string("srcnic ") + (write ? "WRITE " : "SEND ") + size_name(size), block_timeout(o));
    const uint32_t depth = bw_depth(size);
    const uint32_t nrecv = write ? 1 : 2 * depth;
    EnginePair pair;
    std::string err;
    if (!pair.open(o, depth, nrecv, &err)) {
        ctx.fail("%s", err.c_str());
        return StreamRun{RunStatus(ctx)};
    }
    if (size > srcnic_nic_max_msg(pair.a.nic)) {
        ctx.fail("%u bytes is more than the engine's largest message (%zu)", size,
                 srcnic_nic_max_msg(pair.a.nic));
        return StreamRun{RunStatus(ctx)};
    }
    std::vector<Buffer> src;
    for (uint32_t i = 0; i < depth; ++i) {
        src.emplace_back(size, kTagA);
    }
    // The receiver's memory: the WRITE target region, or the SEND receive buffers.
    Buffer dst(static_cast<size_t>(size) * (write ? depth : nrecv));
    std::memset(dst.data(), 0, dst.size());
    srcnic_mr_t *mr = nullptr;
    if (write) {
        const srcnic_status_t st = srcnic_mr_reg(pair.b.nic, dst.data(), dst.size(),
                                                 SRCNIC_ACCESS_REMOTE_WRITE, &mr);
        if (st != SRCNIC_OK) {
            ctx.fail("srcnic_mr_reg failed: %s", srcnic_status_string(st));
            return StreamRun{RunStatus(ctx)};
        }
    }
    Meter meter(o.warmup_seconds, block_seconds(o));

    auto sender = [&](EngineEnd &e) {
        uint64_t posted = 0, completed = 0, outstanding = 0;
        auto on_cqe = [&](const srcnic_cqe_t &c) {
            if (c.byte_len != size || c.wr_id != completed) {
                ctx.fail("completion %" PRIu64 ": wr_id %" PRIu64 ", %u bytes", completed, c.wr_id, c.byte_len);
            }
            ++completed;
            --outstanding;
        };
        while (ctx.alive() && !ctx.stop.load(std::memory_order_relaxed)) {
            while (outstanding < depth) {
                const uint32_t slot = static_cast<uint32_t>(posted % depth);
                put_seq(src[slot].data(), size, posted);
                srcnic_wqe_t w = make_wqe(write ? SRCNIC_OP_WRITE : SRCNIC_OP_SEND, e.peer, src[slot].data(), size);
                w.wr_id = posted;
                w.imm = static_cast<uint32_t>(posted);
                if (write) {
                    w.remote_addr = reinterpret_cast<uint64_t>(dst.data()) + static_cast<uint64_t>(slot) * size;
                    w.rkey = srcnic_mr_rkey(mr);
                }
                if (!post_send(ctx, e, w)) {
                    break;
                }
                ++posted;
                ++outstanding;
            }
            if (engine_poll(ctx, e, on_cqe) != 0 && write && meter.update(completed * size)) {
                ctx.stop.store(true);
            }
        }
        ctx.sent_total.store(posted);
        engine_finish(ctx, e, outstanding, on_cqe);
    };

    auto receiver = [&](EngineEnd &e) {
        const Buffer ref(size, kTagA);
        for (uint32_t i = 0; !write && i < nrecv; ++i) {
            if (!post_recv(ctx, e, i, dst.data() + static_cast<size_t>(i) * size, size)) {
                return;
            }
        }
        uint64_t received = 0;
        const uint64_t no_sends = 0;
        auto on_cqe = [&](const srcnic_cqe_t &c) {
            uint8_t *buf = dst.data() + c.wr_id * size;
            if (c.opcode != SRCNIC_OP_RECV || c.byte_len != size || !seq_is(buf, size, received) ||
                c.imm != static_cast<uint32_t>(received) ||
                ((received < 4 || received % 32 == 0) && !body_matches(buf, size, ref.data()))) {
                ctx.fail("message %" PRIu64 " arrived wrong (%u bytes, imm %u, or payload differs)",
                         received, c.byte_len, c.imm);
                return;
            }
            ++received;
            post_recv(ctx, e, c.wr_id, buf, size);
        };
        while (ctx.alive() && !ctx.stop.load(std::memory_order_relaxed)) {
            if (engine_poll(ctx, e, on_cqe) != 0 && !write && meter.update(received * size)) {
                ctx.stop.store(true);
            }
        }
        engine_finish(ctx, e, no_sends, on_cqe);
        if (ctx.ok() && !write && received != ctx.sent_total.load()) {
            ctx.fail("%" PRIu64 " messages sent and completed, %" PRIu64 " received",
                     ctx.sent_total.load(), received);
        }
    };
    run_pair(o, ctx, [&] { sender(pair.a); }, [&] { receiver(pair.b); });
    // Each region slot holds the last message written through it, which is still in its source.
    if (write && ctx.ok()) {
        for (uint32_t k = 0; k < depth && k < ctx.sent_total.load(); ++k) {
            if (std::memcmp(dst.data() + static_cast<size_t>(k) * size, src[k].data(), size) != 0) {
                ctx.fail("region slot %u differs from the last message written to it", k);
                break;
            }
        }
    }
    if (mr != nullptr) {
        srcnic_mr_dereg(mr);
    }
    StreamRun run{RunStatus(ctx), meter.units(), meter.interval_ns(), pair.counter_values()};
    run.setup = format("depth=%u", depth);
    return run;
}

// --- the kernel floor: plain UDP sockets ----------------------------------------------------

class Fd {
public:
    Fd() = default;
    ~Fd()
    {
        if (fd_ >= 0) {
            close(fd_);
        }
    }
    Fd(const Fd &) = delete;
    Fd &operator=(const Fd &) = delete;
    int get() const { return fd_; }
    void reset(int fd) { fd_ = fd; }

private:
    int fd_ = -1;
};

// The engine's window on the loopback path (its automatic one unless --window): the floor's
// credit window, so that both pay the same acknowledgement rate.
uint32_t engine_window(const Options &o)
{
    srcnic_config_t config;
    srcnic_config_init(&config);
    config.window = o.window;
    return srcnic_config_window(&config, o.mtu != 0 ? o.mtu : kFloorDatagram);
}

// Two non-blocking UDP sockets on 127.0.0.1 connected to each other, with the socket buffers
// the engine's UDP link asks for (forced past the sysctl cap where permitted, as it does).
bool udp_pair(const Options &o, Fd *a, Fd *b, std::string *err)
{
    struct sockaddr_in sa[2];
    for (int i = 0; i < 2; ++i) {
        Fd *fd = i == 0 ? a : b;
        fd->reset(::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
        if (fd->get() < 0) {
            *err = format("socket: %s", std::strerror(errno));
            return false;
        }
        const int size = static_cast<int>(engine_sock_buf(o));
        for (int opt : {SO_SNDBUFFORCE, SO_RCVBUFFORCE}) {
            if (::setsockopt(fd->get(), SOL_SOCKET, opt, &size, sizeof(size)) != 0) {
                ::setsockopt(fd->get(), SOL_SOCKET, opt == SO_SNDBUFFORCE ? SO_SNDBUF : SO_RCVBUF,
                             &size, sizeof(size));
            }
        }
        std::memset(&sa[i], 0, sizeof(sa[i]));
        sa[i].sin_family = AF_INET;
        sa[i].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof(sa[i]);
        if (::bind(fd->get(), reinterpret_cast<struct sockaddr *>(&sa[i]), sizeof(sa[i])) != 0 ||
            ::getsockname(fd->get(), reinterpret_cast<struct sockaddr *>(&sa[i]), &len) != 0) {
            *err = format("bind/getsockname: %s", std::strerror(errno));
            return false;
        }
    }
    if (::connect(a->get(), reinterpret_cast<struct sockaddr *>(&sa[1]), sizeof(sa[1])) != 0 ||
        ::connect(b->get(), reinterpret_cast<struct sockaddr *>(&sa[0]), sizeof(sa[0])) != 0) {
        *err = format("connect: %s", std::strerror(errno));
        return false;
    }
    return true;
}

bool would_block(int err)
{
    return err == EAGAIN || err == EWOULDBLOCK || err == EINTR;
}

// Sends one datagram, retrying while the socket would block.
bool udp_send(TestCtx &ctx, int fd, const uint8_t *buf, uint32_t len)
{
    while (ctx.alive()) {
        const ssize_t n = ::send(fd, buf, len, MSG_DONTWAIT);
        if (n == static_cast<ssize_t>(len)) {
            return true;
        }
        if (n >= 0 || !would_block(errno)) {
            ctx.fail("send of %u bytes: %s", len, n >= 0 ? "short" : std::strerror(errno));
            return false;
        }
    }
    return false;
}

// One block of the floor's ping-pong: o.warmup round trips, then `iters` measured.
LatencyRun udp_latency(const Options &o, uint32_t size, uint32_t iters)
{
    TestCtx ctx("udp latency " + size_name(size), o.timeout);
    Fd fa, fb;
    std::string err;
    if (!udp_pair(o, &fa, &fb, &err)) {
        ctx.fail("%s", err.c_str());
        return LatencyRun{RunStatus(ctx), {}, {}};
    }
    const uint64_t total = static_cast<uint64_t>(o.warmup) + iters;
    std::vector<uint64_t> rtt;
    rtt.reserve(iters);

    auto end = [&](int fd, bool initiator) {
        const Buffer ref(size, initiator ? kTagB : kTagA);
        Buffer sbuf(size, initiator ? kTagA : kTagB);
        Buffer rbuf(size + 1);
        auto receive = [&](uint64_t seq) {
            while (ctx.alive()) {
                const ssize_t n = ::recv(fd, rbuf.data(), size + 1, MSG_DONTWAIT);
                if (n < 0 && would_block(errno)) {
                    continue;
                }
                if (n != static_cast<ssize_t>(size) || !seq_is(rbuf.data(), size, seq)) {
                    ctx.fail("datagram %" PRIu64 ": %zd bytes (%s), expected %u and that sequence",
                             seq, n, n < 0 ? std::strerror(errno) : "or a wrong sequence", size);
                    return false;
                }
                return true;
            }
            return false;
        };
        auto check = [&](uint64_t seq) {
            if ((seq < 16 || seq % 1024 == 0) && !body_matches(rbuf.data(), size, ref.data())) {
                ctx.fail("datagram %" PRIu64 ": payload differs from what was sent", seq);
            }
        };
        for (uint64_t i = 0; i < total && ctx.ok(); ++i) {
            put_seq(sbuf.data(), size, i);
            if (initiator) {
                const uint64_t t0 = now_ns();
                if (!udp_send(ctx, fd, sbuf.data(), size) || !receive(i)) {
                    break;
                }
                const uint64_t t1 = now_ns();
                if (i >= o.warmup) {
                    rtt.push_back(t1 - t0);
                }
            } else if (!receive(i) || !udp_send(ctx, fd, sbuf.data(), size)) {
                break;
            }
            check(i);
        }
    };
    run_pair(o, ctx, [&] { end(fa.get(), true); }, [&] { end(fb.get(), false); });
    return LatencyRun{RunStatus(ctx), std::move(rtt), {}};
}

// Where datagram d of a stream lies: message buffer, offset and length.
struct StreamSlot {
    uint32_t buf, off, len;
};

StreamSlot stream_slot(uint64_t d, uint32_t msg_size, uint32_t dgram_size, uint32_t nbufs)
{
    const uint32_t per_msg = (msg_size + dgram_size - 1) / dgram_size;
    const uint64_t msg = d / per_msg;
    const uint32_t off = static_cast<uint32_t>(d % per_msg) * dgram_size;
    return {static_cast<uint32_t>(msg % nbufs), off, std::min(dgram_size, msg_size - off)};
}

// One block of a one-way stream of datagrams with credit flow control: messages of msg_size
// bytes, sent from and received into nbufs message buffers in turn (the memory an application's
// messages would occupy), cut into datagrams of at most dgram_size, window datagrams
// unacknowledged at most; the receiver counts units (datagrams or bytes). With crc, every
// datagram ends in a kCrcBytes trailer, the CRC-32C of its payload (the engine's function), which
// the receiver checks, as the engine checks each packet's: the floor then pays the integrity
// check the engine must make, and the difference left is the engine's own.
StreamRun udp_stream(const Options &o, const std::string &name, uint32_t msg_size, uint32_t dgram_size,
                     uint32_t nbufs, bool count_bytes, bool crc = false)
{
    TestCtx ctx(name, block_timeout(o));
    const uint32_t window = engine_window(o);
    StreamRun res;
    res.setup = (count_bytes ? format("datagram=%u ", dgram_size) : std::string()) +
                format("window=%u", window) + (crc ? " crc32c" : "");
    const uint32_t trailer = crc ? kCrcBytes : 0;
    const uint32_t chunk = dgram_size - trailer;   // payload bytes of a datagram, at most
    Fd fa, fb;
    std::string err;
    if (!udp_pair(o, &fa, &fb, &err)) {
        ctx.fail("%s", err.c_str());
        res.status = RunStatus(ctx);
        return res;
    }
    const uint32_t credit_every = std::max<uint32_t>(1, window / 4);
    Meter meter(o.warmup_seconds, block_seconds(o));

    auto sender = [&](int fd) {
        std::vector<Buffer> bufs;
        for (uint32_t i = 0; i < nbufs; ++i) {
            bufs.emplace_back(msg_size, kTagA);
        }
        struct mmsghdr msgs[kUdpBatch];
        struct iovec iov[kUdpBatch][2];
        uint32_t crcs[kUdpBatch];
        std::memset(msgs, 0, sizeof(msgs));
        for (uint32_t i = 0; i < kUdpBatch; ++i) {
            msgs[i].msg_hdr.msg_iov = iov[i];
            msgs[i].msg_hdr.msg_iovlen = crc ? 2 : 1;
            iov[i][1] = {&crcs[i], kCrcBytes};
        }
        uint64_t sent = 0, credit = 0, credit_ns = now_ns();
        while (ctx.alive() && !ctx.stop.load(std::memory_order_relaxed)) {
            uint64_t c;
            ssize_t n;
            while ((n = ::recv(fd, &c, sizeof(c), MSG_DONTWAIT)) == static_cast<ssize_t>(sizeof(c))) {
                if (c > credit) {
                    credit = c;
                    credit_ns = now_ns();
                }
            }
            if (n < 0 && !would_block(errno)) {
                ctx.fail("recv of a credit: %s", std::strerror(errno));
                break;
            }
            const uint64_t room = window - (sent - credit);
            if (room == 0) {
                if (now_ns() - credit_ns > kCreditStallNs) {
                    credit = sent;   // the credit datagram was lost: start over
                    credit_ns = now_ns();
                    ++res.stalls;
                }
                continue;
            }
            const uint32_t k = static_cast<uint32_t>(std::min<uint64_t>(room, kUdpBatch));
            for (uint32_t i = 0; i < k; ++i) {
                const StreamSlot s = stream_slot(sent + i, msg_size, chunk, nbufs);
                uint8_t *payload = bufs[s.buf].data() + s.off;
                iov[i][0] = {payload, s.len};
                put_seq(payload, s.len, sent + i);
                if (crc) {
                    crcs[i] = srcnic::crc32c(0, payload, s.len);
                }
            }
            const int m = ::sendmmsg(fd, msgs, k, MSG_DONTWAIT);
            if (m < 0 && !would_block(errno)) {
                ctx.fail("sendmmsg: %s", std::strerror(errno));
                break;
            }
            sent += m > 0 ? static_cast<uint64_t>(m) : 0;
        }
        ctx.sent_total.store(sent);
        ctx.sent_published.store(true);
    };

    auto receiver = [&](int fd) {
        const Buffer ref(msg_size, kTagA);
        std::vector<Buffer> bufs;
        for (uint32_t i = 0; i < nbufs; ++i) {
            bufs.emplace_back(msg_size);
        }
        struct mmsghdr msgs[kUdpBatch];
        struct iovec iov[kUdpBatch][2];
        uint32_t crcs[kUdpBatch];
        StreamSlot slot[kUdpBatch];
        std::memset(msgs, 0, sizeof(msgs));
        for (uint32_t i = 0; i < kUdpBatch; ++i) {
            msgs[i].msg_hdr.msg_iov = iov[i];
            msgs[i].msg_hdr.msg_iovlen = crc ? 2 : 1;
            iov[i][1] = {&crcs[i], kCrcBytes};
        }
        uint64_t expected = 0, datagrams = 0, bytes = 0, last_credit = 0;
        uint64_t last_arrival = now_ns();
        bool placed = false;   // the slots are set for `expected` (an empty poll keeps them)
        while (ctx.alive()) {
            // Datagrams are received where the next ones in sequence belong.
            for (uint32_t i = 0; !placed && i < kUdpBatch; ++i) {
                slot[i] = stream_slot(expected + i, msg_size, chunk, nbufs);
                iov[i][0] = {bufs[slot[i].buf].data() + slot[i].off, slot[i].len};
                msgs[i].msg_hdr.msg_flags = 0;
            }
            placed = true;
            const int m = ::recvmmsg(fd, msgs, kUdpBatch, MSG_DONTWAIT, nullptr);
            if (m < 0 && !would_block(errno)) {
                ctx.fail("recvmmsg: %s", std::strerror(errno));
                break;
            }
            if (m <= 0) {
                // After the sender stopped: done once everything arrived or it went quiet.
                if (ctx.sent_published.load() &&
                    (expected >= ctx.sent_total.load() || now_ns() - last_arrival > kQuietNs)) {
                    break;
                }
                continue;
            }
            last_arrival = now_ns();
            placed = false;
            const uint64_t first = expected;
            for (int i = 0; i < m; ++i) {
                // Payload bytes: what arrived less the CRC trailer.
                const uint32_t len = msgs[i].msg_len - std::min(msgs[i].msg_len, trailer);
                const uint8_t *buf = bufs[slot[i].buf].data() + slot[i].off;
                uint64_t seq = 0;
                std::memcpy(&seq, buf, std::min(len, kSeqBytes));
                // A datagram after a loss lands where the lost one belonged: its length and
                // body are checked only when it is the one expected there. Elsewhere the slot
                // may be shorter than it (a message's last datagram) and cut it; its sequence
                // number, in its first bytes, is still whole.
                const bool in_place = seq == first + static_cast<uint64_t>(i);
                const bool cut = (msgs[i].msg_hdr.msg_flags & MSG_TRUNC) != 0;
                if (len < std::min(kSeqBytes, slot[i].len) || seq < expected ||
                    (in_place && (cut || len != slot[i].len)) ||
                    (in_place && (datagrams < 16 || datagrams % 4096 == 0) &&
                     !body_matches(buf, len, ref.data() + slot[i].off))) {
                    ctx.fail("datagram %" PRIu64 " arrived wrong (%u bytes, sequence %" PRIu64 ")",
                             expected, len, seq);
                    return;
                }
                if (crc && in_place && srcnic::crc32c(0, buf, len) != crcs[i]) {
                    ctx.fail("datagram %" PRIu64 ": its CRC-32C does not match its payload", seq);
                    return;
                }
                res.lost += seq - expected;
                expected = seq + 1;
                ++datagrams;
                bytes += len;
            }
            if (expected - last_credit >= credit_every) {
                last_credit = expected;
                if (::send(fd, &expected, sizeof(expected), MSG_DONTWAIT) < 0 && !would_block(errno)) {
                    ctx.fail("send of a credit: %s", std::strerror(errno));
                    break;
                }
            }
            if (!meter.done() && meter.update(count_bytes ? bytes : datagrams)) {
                ctx.stop.store(true);
            }
        }
    };
    run_pair(o, ctx, [&] { sender(fa.get()); }, [&] { receiver(fb.get()); });
    res.status = RunStatus(ctx);
    res.units = meter.units();
    res.ns = meter.interval_ns();
    return res;
}

StreamRun udp_rate(const Options &o)
{
    return udp_stream(o, "udp rate " + size_name(o.rate_size), o.rate_size, o.rate_size, kUdpBatch, false);
}

StreamRun udp_bandwidth(const Options &o, uint32_t size, uint32_t dgram, bool crc)
{
    return udp_stream(o, std::string(crc ? "udp+crc" : "udp") + " bandwidth " + size_name(size), size,
                      dgram, bw_depth(size), true, crc);
}

// --- output ----------------------------------------------------------------------------------

std::string cpu_model()
{
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.compare(0, 10, "model name") == 0) {
            const size_t colon = line.find(':');
            return colon == std::string::npos ? line : line.substr(colon + 2);
        }
    }
    return "unknown";
}

std::string machine()
{
    struct utsname u;
    std::string kernel = uname(&u) == 0 ? std::string(u.sysname) + " " + u.release : "unknown";
    return format("%u CPUs, %s, %s", std::thread::hardware_concurrency(), cpu_model().c_str(),
                  kernel.c_str());
}

// The 1-, 5- and 15-minute load averages, as /proc/loadavg gives them.
std::string loadavg()
{
    std::ifstream in("/proc/loadavg");
    std::string a, b, c;
    in >> a >> b >> c;
    return in ? a + " " + b + " " + c : "unknown";
}

std::string value_text(const Figure &f)
{
    if (!f.ran) {
        return "-";
    }
    if (!f.ok) {
        return f.timed_out ? "timeout" : "error";
    }
    return format(f.value >= 100 ? "%.1f" : f.value >= 1 ? "%.2f" : "%.3f", f.value);
}

void print_table(FILE *out, const std::vector<Row> &rows)
{
    std::fprintf(out, "\n%-30s %-7s %10s %10s %7s %8s  %s\n", "test", "unit", "srcnic", "udp floor",
                 "ratio", "aim", "verdict");
    std::fprintf(out, "%s\n", std::string(86, '-').c_str());
    for (const Row &r : rows) {
        const double ratio = r.ratio();
        std::fprintf(out, "%-30s %-7s %10s %10s %7s %8s  %s\n", r.test.c_str(), r.unit.c_str(),
                     value_text(r.engine).c_str(), value_text(r.udp).c_str(),
                     std::isnan(ratio) ? "-" : format("%.2f", ratio).c_str(), r.aim_text().c_str(),
                     r.verdict().c_str());
    }
    std::fprintf(out, "ratio = srcnic / udp floor on every row: latency aims at <= 1.15 (lower is better),\n"
                      "message rate at >= 1.00 and bandwidth at >= 0.90 (higher is better).\n");
    if (std::any_of(rows.begin(), rows.end(), [](const Row &r) { return r.udp.ran && r.floor != std::string("udp"); })) {
        std::fprintf(out, "rows ending in /crc: the floor column is the same UDP stream with a CRC-32C of each\n"
                          "datagram's payload, computed by the sender and checked by the receiver, as the\n"
                          "engine does for each packet; their ratio is the engine's cost beyond that check.\n");
    }
}

std::string csv_field(const std::string &s)
{
    if (s.find_first_of(",\"\n") == std::string::npos) {
        return s;
    }
    std::string q = "\"";
    for (char c : s) {
        q += c == '"' ? std::string("\"\"") : std::string(1, c);
    }
    return q + "\"";
}

std::string number(double v)
{
    return std::isnan(v) ? "" : format("%.6g", v);
}

bool write_csv(const std::string &path, const std::vector<Row> &rows)
{
    std::ofstream out(path);
    out << "test,unit,srcnic,udp_floor,ratio_srcnic_over_udp,aim,verdict,srcnic_notes,udp_notes\n";
    for (const Row &r : rows) {
        out << csv_field(r.test) << ',' << r.unit << ',' << number(r.engine.value) << ','
            << number(r.udp.value) << ',' << number(r.ratio()) << ',' << csv_field(r.aim_text()) << ','
            << r.verdict() << ',' << csv_field(r.engine.note) << ',' << csv_field(r.udp.note) << '\n';
    }
    return static_cast<bool>(out);
}

std::string json_string(const std::string &s)
{
    std::string q = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') {
            q += '\\';
            q += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            q += format("\\u%04x", c);
        } else {
            q += c;
        }
    }
    return q + "\"";
}

std::string json_number(double v)
{
    return std::isnan(v) ? "null" : format("%.6g", v);
}

std::string json_figure(const Figure &f)
{
    if (!f.ran) {
        return "null";
    }
    return "{\"value\": " + json_number(f.value) + ", \"ok\": " + (f.ok ? "true" : "false") +
           ", \"cpu_share\": " + json_number(f.cpu_share) + ", \"notes\": " + json_string(f.note) + ", \"error\": " + json_string(f.error) + "}";
}

bool write_json(const std::string &path, const Options &o, const std::vector<Row> &rows,
                uint32_t dgram, double elapsed_s, const std::string &load_start,
                const std::string &load_end, const std::vector<std::string> &errors)
{
    std::ofstream out(path);
    char when[32];
    const time_t t = time(nullptr);
    struct tm tm;
    gmtime_r(&t, &tm);
    std::strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    out << "{\n  \"benchmark\": \"srcnic_bench\",\n  \"engine_version\": " << json_string(srcnic_version())
        << ",\n  \"date\": " << json_string(when) << ",\n  \"machine\": " << json_string(machine())
        << ",\n  \"load_average_start\": " << json_string(load_start)
        << ",\n  \"load_average_end\": " << json_string(load_end)
        << ",\n  \"elapsed_s\": " << json_number(elapsed_s) << ",\n  \"config\": {\"iters\": " << o.iters << ", \"blocks\": " << o.blocks
        << ", \"warmup\": " << o.warmup << ", \"seconds\": " << json_number(o.seconds)
        << ", \"stream_blocks\": " << o.stream_blocks
        << ", \"warmup_seconds\": " << json_number(o.warmup_seconds) << ", \"window\": " << engine_window(o)
        << ", \"engine_mtu\": " << o.mtu << ", \"rate_depth\": " << o.rate_depth << ", \"repeat\": " << o.repeat << ", \"retries\": " << o.retries << ", \"loss\": " << o.loss << ", \"datagram\": " << dgram
        << ", \"sock_buf\": " << engine_sock_buf(o) << ", \"pinned\": " << (o.pin ? "true" : "false")
        << "},\n  \"ratio_definition\": \"srcnic / udp floor\",\n  \"results\": [\n";
    for (size_t i = 0; i < rows.size(); ++i) {
        const Row &r = rows[i];
        out << "    {\"test\": " << json_string(r.test) << ", \"unit\": " << json_string(r.unit)
            << ", \"better\": " << json_string(r.better == Better::kLower ? "lower" : "higher")
            << ", \"srcnic\": " << json_figure(r.engine) << ", \"udp\": " << json_figure(r.udp)
            << ", \"ratio\": " << json_number(r.ratio()) << ", \"aim\": " << json_number(r.aim)
            << ", \"verdict\": " << json_string(r.verdict()) << "}" << (i + 1 < rows.size() ? "," : "")
            << "\n";
    }
    out << "  ],\n  \"errors\": [";
    for (size_t i = 0; i < errors.size(); ++i) {
        out << (i ? ", " : "") << json_string(errors[i]);
    }
    out << "]\n}\n";
    return static_cast<bool>(out);
}

// One side of a test run in blocks: where its blocks are pooled, and how block b is measured.
template <typename Pool, typename Run> struct BlockSide {
    Pool *pool;
    std::function<Run(uint32_t)> measure;
};

// Runs `total` blocks of a test, its sides taking turns block by block, in the order given and
// then reversed (A B, B A, A B, ...), so that every side samples the same stretches of the
// machine's time: its speed drifts over seconds, more than a block lasts. A block in which a
// thread was preempted by other load is run again, o.retries times at most. Stops after the first
// block that fails.
template <typename Pool, typename Run>
void run_blocks(const Options &o, uint32_t total, std::vector<BlockSide<Pool, Run>> sides)
{
    uint32_t retries = o.retries;
    for (uint32_t b = 0; b < total;) {
        std::vector<Run> runs(sides.size());
        for (size_t i = 0; i < sides.size(); ++i) {
            const size_t s = b % 2 == 0 ? i : sides.size() - 1 - i;
            runs[s] = sides[s].measure(b);
        }
        const bool spoiled =
            std::any_of(runs.begin(), runs.end(), [](const Run &r) { return r.status.preempted(); });
        if (spoiled && retries > 0) {
            --retries;
            continue;
        }
        bool ok = true;
        for (size_t s = 0; s < sides.size(); ++s) {
            ok = ok && runs[s].status.ok;
            sides[s].pool->add(std::move(runs[s]));
        }
        if (!ok) {
            return;
        }
        ++b;
    }
}

// The ping-pong of one message size: o.repeat x o.blocks blocks a side, engine and floor taking
// turns. Each block runs its own warm-up; the measured round trips of a repeat, o.iters, are
// spread over its blocks.
void latency_blocks(const Options &o, uint32_t size, bool floor, LatencyPool *eng, LatencyPool *udp)
{
    eng->engine = true;
    auto iters = [&o](uint32_t b) {
        // Block k of a repeat measures its share of o.iters (the shares add up to o.iters).
        const uint64_t k = b % o.blocks;
        return static_cast<uint32_t>(o.iters * (k + 1) / o.blocks - o.iters * k / o.blocks);
    };
    std::vector<BlockSide<LatencyPool, LatencyRun>> sides;
    if (o.run_engine) {
        sides.push_back({eng, [&](uint32_t b) { return engine_latency(o, size, iters(b)); }});
    }
    if (floor) {
        sides.push_back({udp, [&](uint32_t b) { return udp_latency(o, size, iters(b)); }});
    }
    run_blocks(o, o.repeat * o.blocks, std::move(sides));
}

// "block_ratio=0.98-1.21 median=1.11": the engine's figure over the floor's, block by block.
std::string block_ratios(const BlockPool &eng, const BlockPool &udp)
{
    std::vector<double> r;
    for (size_t i = 0; i < std::min(eng.block_figures.size(), udp.block_figures.size()); ++i) {
        r.push_back(eng.block_figures[i] / udp.block_figures[i]);
    }
    if (r.empty()) {
        return "";
    }
    std::sort(r.begin(), r.end());
    const size_t n = r.size();
    const double median = n % 2 ? r[n / 2] : (r[n / 2 - 1] + r[n / 2]) / 2;
    return format("block_ratio=%.2f-%.2f median=%.2f", r.front(), r.back(), median);
}

bool preempted(const Figure &f)
{
    return f.ran && f.ok && f.cpu_share < kFairCpuShare;
}

// Prints a finished row as it comes, with its notes, so a long run shows progress.
void report(const Row &r)
{
    const std::pair<const char *, const Figure *> sides[] = {{"srcnic", &r.engine}, {r.floor, &r.udp}};
    for (const auto &side : sides) {
        const Figure &f = *side.second;
        if (!f.ran) {
            continue;
        }
        std::fprintf(stderr, "  %-7s %-26s %9s %-6s %s%s\n", side.first, r.test.c_str(),
                     value_text(f).c_str(), r.unit.c_str(), f.note.c_str(),
                     f.error.empty() ? "" : ("  ERROR: " + f.error).c_str());
    }
}

} // namespace

int main(int argc, char **argv)
{
    Options o;
    const int parsed = parse_options(argc, argv, &o);
    if (parsed != 0) {
        return parsed < 0 ? 0 : parsed;
    }
    const uint64_t start = now_ns();
    const std::string load_start = loadavg();
    const uint32_t dgram = o.datagram;
    std::fprintf(stderr, "srcnic_bench: engine %s on %s, load average %s\n", srcnic_version(),
                 machine().c_str(), load_start.c_str());
    std::fprintf(stderr, "  window %u packets, engine mtu %s, floor datagram %u B, socket buffers %u B,\n"
                 "  threads %s; latency: %u blocks a side, %u round trips in all; rate, bandwidth:\n"
                 "  %u blocks a side, %g s measured in all; engine and floor taking turns, pooled\n"
                 "  (up to %u blocks run again if preempted)\n",
                 engine_window(o), o.mtu ? format("%u B", o.mtu).c_str() : "automatic", dgram,
                 engine_sock_buf(o), o.pin ? "pinned to CPUs 0 and 1" : "not pinned", o.repeat * o.blocks,
                 o.repeat * o.iters, o.repeat * o.stream_blocks, o.repeat * o.seconds, o.retries);
    if (o.loss > 0) {
        std::fprintf(stderr, "  each NIC drops %g of the datagrams it receives (fault seed %" PRIu64 "); "
                     "no floor\n", o.loss, kLossSeed);
    }

    std::vector<Row> rows;
    if (o.run_lat) {
        for (uint32_t size : o.lat_sizes) {
            Row med{"latency " + size_name(size) + " median", "us", Better::kLower, 1.15, {}, {}};
            Row p99{"latency " + size_name(size) + " p99", "us", Better::kLower, NAN, {}, {}};
            Row mean{"latency " + size_name(size) + " mean", "us", Better::kLower, NAN, {}, {}};
            // A message longer than a datagram has no one-datagram floor.
            const bool floor = o.run_udp && size <= kMaxDatagram;
            LatencyPool eng_pool, udp_pool;
            latency_blocks(o, size, floor, &eng_pool, &udp_pool);
            if (o.run_engine) {
                const LatencyFigures eng = eng_pool.figures();
                med.engine = eng.median;
                p99.engine = eng.p99;
                mean.engine = eng.mean;
                if (floor) {
                    med.engine.note += " " + block_ratios(eng_pool, udp_pool);
                }
            }
            if (floor) {
                const LatencyFigures udp = udp_pool.figures();
                med.udp = udp.median;
                p99.udp = udp.p99;
                mean.udp = udp.mean;
            }
            report(med);
            rows.push_back(med);
            rows.push_back(p99);
            if (o.loss > 0) {
                rows.push_back(mean);   // under loss the mean shows what recovery costs
            }
        }
    }
    // A throughput row from its two pools, the engine's note with the block-by-block ratios.
    auto stream_row = [](Row r, const StreamPool &eng, const StreamPool &udp, double scale) {
        r.engine = eng.figure(scale);
        r.udp = udp.figure(scale);
        if (r.engine.ran && r.udp.ran) {
            r.engine.note += " " + block_ratios(eng, udp);
        }
        report(r);
        return r;
    };
    using StreamSide = BlockSide<StreamPool, StreamRun>;
    const uint32_t stream_blocks = o.repeat * o.stream_blocks;
    if (o.run_rate) {
        StreamPool eng, udp;
        eng.engine = true;
        std::vector<StreamSide> sides;
        if (o.run_engine) {
            sides.push_back({&eng, [&](uint32_t) { return engine_rate(o); }});
        }
        if (o.run_udp) {
            sides.push_back({&udp, [&](uint32_t) { return udp_rate(o); }});
        }
        run_blocks(o, stream_blocks, std::move(sides));
        rows.push_back(stream_row({"msg rate " + size_name(o.rate_size), "Mmsg/s", Better::kHigher, 1.0, {}, {}},
                                  eng, udp, 1e6));
    }
    if (o.run_bw) {
        for (uint32_t size : o.bw_sizes) {
            // The floor of SEND and WRITE is the same stream, run once a block between them;
            // the CRC floor after the floor.
            StreamPool send, write, floor, crc_floor;
            send.engine = write.engine = true;
            std::vector<StreamSide> sides;
            if (o.run_engine) {
                sides.push_back({&send, [&](uint32_t) { return engine_bandwidth(o, size, false); }});
            }
            if (o.run_udp) {
                sides.push_back({&floor, [&](uint32_t) { return udp_bandwidth(o, size, dgram, false); }});
            }
            if (o.run_udp && o.crc_floor) {
                sides.push_back({&crc_floor, [&](uint32_t) { return udp_bandwidth(o, size, dgram, true); }});
            }
            if (o.run_engine) {
                sides.push_back({&write, [&](uint32_t) { return engine_bandwidth(o, size, true); }});
            }
            run_blocks(o, stream_blocks, std::move(sides));
            const std::pair<const char *, StreamPool *> ops[] = {{"SEND ", &send}, {"WRITE ", &write}};
            for (const auto &op : ops) {
                rows.push_back(stream_row({"bandwidth " + std::string(op.first) + size_name(size), "GB/s",
                                           Better::kHigher, 0.9, {}, {}},
                                          *op.second, floor, 1e9));
            }
            if (o.run_udp && o.crc_floor) {
                // Informative (no aim): the engine against a floor that makes its integrity check.
                for (const auto &op : ops) {
                    rows.push_back(stream_row({"bandwidth " + std::string(op.first) + size_name(size) + " /crc",
                                               "GB/s", Better::kHigher, NAN, {}, {}, "udp+crc"},
                                              *op.second, crc_floor, 1e9));
                }
            }
        }
    }
    const double elapsed = static_cast<double>(now_ns() - start) / 1e9;
    const std::string load_end = loadavg();

    std::vector<std::string> errors;
    unsigned contended = 0;
    for (const Row &r : rows) {
        for (const Figure *f : {&r.engine, &r.udp}) {
            if (f->ran && !f->ok && std::find(errors.begin(), errors.end(), f->error) == errors.end()) {
                errors.push_back(f->error);
            }
            contended += preempted(*f);
        }
    }
    print_table(stdout, rows);
    std::printf("machine: %s; load average %s at start, %s at end; elapsed %.1f s\n", machine().c_str(),
                load_start.c_str(), load_end.c_str(), elapsed);
    std::printf("both endpoint threads of a test busy-poll: on 2 CPUs they take the whole machine.\n");
    if (contended != 0) {
        std::printf("WARNING: in %u figures an endpoint thread got less than %.0f%% of a CPU (see cpu= in\n"
                    "the notes): other load on the machine preempted it, so those figures understate\n"
                    "what the engine or the kernel can do.\n",
                    contended, kFairCpuShare * 100);
    }
    for (const std::string &e : errors) {
        std::printf("ERROR: %s\n", e.c_str());
    }
    bool io_ok = true;
    if (!o.csv_path.empty() && !write_csv(o.csv_path, rows)) {
        std::fprintf(stderr, "srcnic_bench: cannot write %s\n", o.csv_path.c_str());
        io_ok = false;
    }
    if (!o.json_path.empty() &&
        !write_json(o.json_path, o, rows, dgram, elapsed, load_start, load_end, errors)) {
        std::fprintf(stderr, "srcnic_bench: cannot write %s\n", o.json_path.c_str());
        io_ok = false;
    }
    return errors.empty() && io_ok ? 0 : 1;
}
