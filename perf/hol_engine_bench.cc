// Head-of-line blocking inside the engine: does one QP's bulk transfer hold up another QP's
// small messages on the connection they share? (issue #26, item 9: with the node agent every
// process of a node shares one connection per remote node.)
//
// Two NICs on 127.0.0.1, each driven by one thread pinned to a CPU of its own (CPUs 0 and 1
// unless --no-pin): what a node agent with a CPU to itself does, without the agent's copies
// into client memory and without other processes competing for the CPU (perf/hol_bench.sh
// measures the whole agent across namespace nodes, where six busy processes share two CPUs).
// Each NIC has two QPs; every request between the NICs goes on their one connection:
//   ping  8-byte inline SENDs, A -> B echoed B -> A; one round trip at a time, each timed;
//   bulk  WRITEs of --bulk-size bytes A -> B, --depth of them outstanding, posted again as
//         they complete, on the same thread as the pings (as the agent serves every QP).
// Phases: pings alone, then pings while the bulk stream runs (after --warmup-ms of it). Prints
// the one-way latency (half the round trip: median and 99th percentile) alone and loaded, the
// ratios loaded / alone, the bulk stream's MB/s while loaded and alone (one second of it
// between the two phases), and the counters that show loss.
//
// Exit status: 0 when every phase ran (whatever the figures), 1 on an error or a watchdog
// timeout (--seconds per phase), 2 on bad usage.
#include <srcnic/srcnic.h>

#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "send8.h"

namespace {

struct Options {
    uint32_t rounds = 10000;          // timed round trips per phase
    uint64_t bulk_size = 1ull << 20;  // bytes per WRITE
    uint32_t depth = 4;               // WRITEs outstanding
    uint32_t warmup_ms = 200;         // bulk stream before the loaded pings start
    uint32_t mtu = 0;                 // 0: the engine's default
    uint32_t window = 0;              // 0: the engine's (automatic)
    uint32_t seconds = 60;            // watchdog per phase
    bool pin = true;
};

uint64_t now_ns()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void usage(FILE *f)
{
    std::fprintf(f,
        "usage: hol_engine_bench [--rounds N] [--bulk-size BYTES] [--depth D] [--warmup-ms MS]\n"
        "                        [--mtu N] [--window N] [--seconds S] [--no-pin]\n"
        "  --rounds N        timed 8-byte round trips per phase (default 10000)\n"
        "  --bulk-size B     bytes per bulk WRITE (default 1048576)\n"
        "  --depth D         bulk WRITEs kept outstanding (default 4)\n"
        "  --warmup-ms MS    bulk stream before the loaded phase's pings (default 200)\n"
        "  --mtu N           the engines' datagram size (default: theirs)\n"
        "  --window N        packets in flight per connection (default: the engine's)\n"
        "  --seconds S       watchdog of each phase (default 60)\n"
        "  --no-pin          leave the two threads to the scheduler\n");
}

bool parse(int argc, char **argv, Options *o)
{
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--no-pin") {
            o->pin = false;
            continue;
        }
        if (a == "-h" || a == "--help") {
            usage(stdout);
            std::exit(0);
        }
        if (i + 1 >= argc) {
            std::fprintf(stderr, "hol_engine_bench: %s needs a value (--help)\n", a.c_str());
            return false;
        }
        char *end = nullptr;
        const unsigned long long v = std::strtoull(argv[++i], &end, 0);
        if (end == argv[i] || *end != '\0' || v == 0) {
            std::fprintf(stderr, "hol_engine_bench: %s takes a positive number, not '%s'\n",
                         a.c_str(), argv[i]);
            return false;
        }
        if (a == "--rounds") {
            o->rounds = static_cast<uint32_t>(v);
        } else if (a == "--bulk-size") {
            o->bulk_size = v;
        } else if (a == "--depth") {
            o->depth = static_cast<uint32_t>(v);
        } else if (a == "--warmup-ms") {
            o->warmup_ms = static_cast<uint32_t>(v);
        } else if (a == "--mtu") {
            o->mtu = static_cast<uint32_t>(v);
        } else if (a == "--window") {
            o->window = static_cast<uint32_t>(v);
        } else if (a == "--seconds") {
            o->seconds = static_cast<uint32_t>(v);
        } else {
            std::fprintf(stderr, "hol_engine_bench: unknown option '%s' (--help)\n", a.c_str());
            return false;
        }
    }
    return true;
}

void pin_to(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

struct End {
    srcnic_nic_t *nic = nullptr;
    srcnic_qp_t *ping = nullptr;
    srcnic_qp_t *bulk = nullptr;
    srcnic_dest_t ping_peer{};   // the other end's ping QP
    srcnic_dest_t bulk_peer{};   // the other end's bulk QP
};

constexpr uint32_t kRecvs = 16;   // receive buffers kept posted on each ping QP

bool post_recv(srcnic_qp_t *qp, uint64_t *buf)
{
    srcnic_recv_wqe_t r{};
    r.wr_id = reinterpret_cast<uint64_t>(buf);
    r.addr = reinterpret_cast<uint64_t>(buf);
    r.length = 8;
    return srcnic_post_recv(qp, &r) == SRCNIC_OK;
}

// The bench's shared state: the echo thread's stop flag and the first error.
std::atomic<bool> g_stop{false};
std::atomic<bool> g_failed{false};

void fail(const char *what, int status)
{
    std::fprintf(stderr, "hol_engine_bench: %s: %s\n", what,
                 srcnic_status_string(static_cast<srcnic_status_t>(status)));
    g_failed = true;
    g_stop = true;
}

// B: echoes every ping; the bulk WRITEs land without its CPU's help beyond progress.
void echo_loop(End *b, bool pin)
{
    if (pin) {
        pin_to(1);
    }
    srcnic_cqe_t cqes[32];
    uint64_t echo_id = 0;
    while (!g_stop.load(std::memory_order_relaxed)) {
        srcnic_nic_progress(b->nic);
        const unsigned n = srcnic_poll_cq(b->ping, cqes, 32);
        for (unsigned i = 0; i < n; ++i) {
            if (cqes[i].status != SRCNIC_OK) {
                fail("echo side completion", cqes[i].status);
                return;
            }
            if (cqes[i].opcode != SRCNIC_OP_RECV) {
                continue;
            }
            uint64_t *buf = reinterpret_cast<uint64_t *>(cqes[i].wr_id);
            const srcnic_wqe_t w = send8(b->ping_peer, ++echo_id, *buf);
            srcnic_status_t st;
            while ((st = srcnic_post_send(b->ping, &w)) == SRCNIC_ERR_NO_RESOURCE) {
                srcnic_nic_progress(b->nic);
            }
            if (st != SRCNIC_OK || !post_recv(b->ping, buf)) {
                fail("echo", st);
                return;
            }
        }
    }
}

class Driver {
public:
    Driver(End *a, const Options &o, uint64_t rkey, uint64_t remote)
        : a_(a), o_(o), rkey_(rkey), remote_(remote), src_(o.bulk_size, 0x5a)
    {
    }

    // The bulk stream alone for `ms` milliseconds: its MB/s into *mbs. False on an error or the
    // watchdog.
    bool stream_alone(uint32_t ms, double *mbs)
    {
        const uint64_t t0 = now_ns(), until = t0 + ms * 1000000ull, bytes0 = bulk_done_;
        while (now_ns() < until) {
            if (!pump(true)) {
                return false;
            }
        }
        *mbs = static_cast<double>(bulk_done_ - bytes0) / 1e6 / (static_cast<double>(now_ns() - t0) / 1e9);
        const uint64_t deadline = now_ns() + o_.seconds * 1000000000ull;
        while (outstanding_ > 0) {
            if (!pump(false) || now_ns() > deadline) {
                return false;
            }
        }
        return true;
    }

    // One phase: `rounds` timed round trips (one-way ns into lat), the bulk stream running if
    // `bulk`. False on an error or the watchdog.
    bool phase(bool bulk, std::vector<uint64_t> *lat, double *bulk_mbs)
    {
        const uint64_t deadline = now_ns() + o_.seconds * 1000000000ull;
        if (bulk) {
            const uint64_t until = now_ns() + o_.warmup_ms * 1000000ull;
            while (now_ns() < until) {
                if (!pump(true) || now_ns() > deadline) {
                    return false;
                }
            }
        }
        const uint64_t bytes0 = bulk_done_, t0 = now_ns();
        lat->clear();
        for (uint32_t r = 0; r < o_.rounds; ++r) {
            const uint64_t start = now_ns();
            const srcnic_wqe_t w = send8(a_->ping_peer, r, start);
            srcnic_status_t st;
            while ((st = srcnic_post_send(a_->ping, &w)) == SRCNIC_ERR_NO_RESOURCE) {
                if (!pump(bulk)) {
                    return false;
                }
            }
            if (st != SRCNIC_OK) {
                fail("ping post", st);
                return false;
            }
            echoed_ = false;
            while (!echoed_) {
                if (!pump(bulk) || now_ns() > deadline) {
                    if (!g_failed) {
                        std::fprintf(stderr, "hol_engine_bench: watchdog: a phase ran past %u s\n",
                                     o_.seconds);
                    }
                    return false;
                }
            }
            lat->push_back((now_ns() - start) / 2);
        }
        const double secs = static_cast<double>(now_ns() - t0) / 1e9;
        *bulk_mbs = static_cast<double>(bulk_done_ - bytes0) / 1e6 / secs;
        // Drain the stream so that the next phase starts alone.
        while (bulk && outstanding_ > 0) {
            if (!pump(false) || now_ns() > deadline) {
                return false;
            }
        }
        return true;
    }

private:
    // One pass: progress, the ping QP's completions, the bulk QP's (reposting while `bulk`).
    bool pump(bool bulk)
    {
        if (g_failed) {
            return false;
        }
        while (bulk && outstanding_ < o_.depth) {
            srcnic_wqe_t w{};
            w.wr_id = ++bulk_id_;
            w.opcode = SRCNIC_OP_WRITE;
            w.dest = a_->bulk_peer;
            w.remote_addr = remote_;
            w.rkey = rkey_;
            w.num_sge = 1;
            w.u.sge[0].addr = reinterpret_cast<uint64_t>(src_.data());
            w.u.sge[0].length = static_cast<uint32_t>(o_.bulk_size);
            const srcnic_status_t st = srcnic_post_send(a_->bulk, &w);
            if (st == SRCNIC_ERR_NO_RESOURCE) {
                break;
            }
            if (st != SRCNIC_OK) {
                fail("bulk post", st);
                return false;
            }
            ++outstanding_;
        }
        srcnic_nic_progress(a_->nic);
        srcnic_cqe_t cqes[32];
        unsigned n = srcnic_poll_cq(a_->ping, cqes, 32);
        for (unsigned i = 0; i < n; ++i) {
            if (cqes[i].status != SRCNIC_OK) {
                fail("ping completion", cqes[i].status);
                return false;
            }
            if (cqes[i].opcode == SRCNIC_OP_RECV) {
                echoed_ = true;
                if (!post_recv(a_->ping, reinterpret_cast<uint64_t *>(cqes[i].wr_id))) {
                    fail("ping receive", SRCNIC_ERR_NO_RESOURCE);
                    return false;
                }
            }
        }
        n = srcnic_poll_cq(a_->bulk, cqes, 32);
        for (unsigned i = 0; i < n; ++i) {
            if (cqes[i].status != SRCNIC_OK) {
                fail("bulk completion", cqes[i].status);
                return false;
            }
            --outstanding_;
            bulk_done_ += cqes[i].byte_len;
        }
        return true;
    }

    End *a_;
    const Options &o_;
    uint64_t rkey_, remote_;
    std::vector<uint8_t> src_;
    uint32_t outstanding_ = 0;
    uint64_t bulk_id_ = 0, bulk_done_ = 0;
    bool echoed_ = false;
};

double pct(std::vector<uint64_t> v, double p)
{
    std::sort(v.begin(), v.end());
    const size_t i = std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * static_cast<double>(v.size())));
    return static_cast<double>(v[i]) / 1000.0;
}

} // namespace

int main(int argc, char **argv)
{
    Options o;
    if (!parse(argc, argv, &o)) {
        return 2;
    }
    srcnic_config_t config;
    srcnic_config_init(&config);
    std::snprintf(config.bind_addr, sizeof(config.bind_addr), "127.0.0.1");
    config.window = o.window;
    if (o.mtu != 0) {
        config.mtu = o.mtu;
    }
    srcnic_qp_config_t qc;
    srcnic_qp_config_init(&qc);
    End a, b;
    srcnic_status_t st = SRCNIC_OK;
    for (End *e : {&a, &b}) {
        if ((st = srcnic_nic_create(&config, &e->nic)) != SRCNIC_OK ||
            (st = srcnic_qp_create(e->nic, &qc, &e->ping)) != SRCNIC_OK ||
            (st = srcnic_qp_create(e->nic, &qc, &e->bulk)) != SRCNIC_OK) {
            std::fprintf(stderr, "hol_engine_bench: creating a NIC or QP: %s\n",
                         srcnic_status_string(st));
            return 1;
        }
    }
    srcnic_nic_addr_t aa, ba;
    srcnic_nic_query_addr(a.nic, &aa);
    srcnic_nic_query_addr(b.nic, &ba);
    std::vector<uint8_t> target(o.bulk_size);
    srcnic_mr_t *mr = nullptr;
    if ((st = srcnic_dest_create(a.nic, &ba, srcnic_qp_num(b.ping), &a.ping_peer)) != SRCNIC_OK ||
        (st = srcnic_dest_create(a.nic, &ba, srcnic_qp_num(b.bulk), &a.bulk_peer)) != SRCNIC_OK ||
        (st = srcnic_dest_create(b.nic, &aa, srcnic_qp_num(a.ping), &b.ping_peer)) != SRCNIC_OK ||
        (st = srcnic_mr_reg(b.nic, target.data(), target.size(), SRCNIC_ACCESS_REMOTE_WRITE,
                            &mr)) != SRCNIC_OK) {
        std::fprintf(stderr, "hol_engine_bench: destinations or registration: %s\n",
                     srcnic_status_string(st));
        return 1;
    }
    std::vector<uint64_t> bufs(2 * kRecvs);
    for (uint32_t i = 0; i < kRecvs; ++i) {
        if (!post_recv(a.ping, &bufs[i]) || !post_recv(b.ping, &bufs[kRecvs + i])) {
            std::fprintf(stderr, "hol_engine_bench: posting receives failed\n");
            return 1;
        }
    }
    if (o.pin) {
        pin_to(0);
    }
    std::printf("# hol_engine_bench: %u round trips per phase, bulk WRITEs of %" PRIu64
                " B x %u outstanding, datagram %u B, threads %s\n",
                o.rounds, o.bulk_size, o.depth, o.mtu, o.pin ? "pinned to CPUs 0, 1" : "not pinned");
    std::thread echo(echo_loop, &b, o.pin);
    Driver d(&a, o, srcnic_mr_rkey(mr), reinterpret_cast<uint64_t>(target.data()));
    std::vector<uint64_t> alone, loaded;
    double idle_mbs = 0, mbs = 0, alone_mbs = 0;
    const bool ok = d.phase(false, &alone, &idle_mbs) && d.stream_alone(1000, &alone_mbs) &&
                    d.phase(true, &loaded, &mbs);
    g_stop = true;
    echo.join();
    int rc = 0;
    if (ok) {
        const double a50 = pct(alone, 50), a99 = pct(alone, 99);
        const double l50 = pct(loaded, 50), l99 = pct(loaded, 99);
        std::printf("%-10s %8s %8s %9s %9s %12s %12s %10s %10s\n", "", "alone50", "alone99",
                    "loaded50", "loaded99", "loaded/alone", "p99 ld/alone", "bulk MB/s",
                    "bulk alone");
        std::printf("%-10s %8.2f %8.2f %9.2f %9.2f %12.2f %12.2f %10.0f %10.0f\n", "one-way us",
                    a50, a99, l50, l99, l50 / a50, l99 / a99, mbs, alone_mbs);
    } else {
        rc = 1;
    }
    std::printf("# counters (both NICs):");
    for (srcnic_counter_t c : {SRCNIC_CNT_TX_PACKETS, SRCNIC_CNT_RETRANSMITS, SRCNIC_CNT_TIMEOUTS,
                               SRCNIC_CNT_TAIL_PROBES, SRCNIC_CNT_DROP_OUT_OF_WINDOW,
                               SRCNIC_CNT_DROP_NO_BUFFER, SRCNIC_CNT_ACKS_SENT}) {
        std::printf(" %s=%" PRIu64, srcnic_counter_name(c),
                    srcnic_nic_counter(a.nic, c) + srcnic_nic_counter(b.nic, c));
    }
    std::printf("\n");
    srcnic_mr_dereg(mr);
    for (End *e : {&a, &b}) {
        srcnic_qp_destroy(e->bulk);
        srcnic_qp_destroy(e->ping);
        srcnic_nic_destroy(e->nic);
    }
    return rc;
}
