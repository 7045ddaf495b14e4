// The DC fallback against the number of active peers over real UDP sockets, one engine per
// process (perf/README.md, "DC"): the in-memory dc_bench's question asked of processes. A hub
// process and P peer processes, each an embedded engine on 127.0.0.1, for three budgets of the
// hub's (as dc_bench):
//   conn      every peer gets a connection (the budget is P);
//   dc        one connection, every other peer over DC (32 DCIs in turn; no promotion);
//   budget64  64 connections, the rest over DC (promotion by traffic as by default).
// Peers keep the defaults (64 DC target contexts each) and answer over whatever the budgets give.
//
// Each (P, mode) runs twice, the modes in order and then in reverse order, each run with fresh
// peers; the two runs' latencies and rates are averaged (streams: the sum of both runs). A peer echoes every 8-byte SEND it receives back to the hub
// and sleeps on its event fd when it has nothing to do, so that more processes than CPUs fit.
// Figures per (P, mode):
//   latency   8-byte SEND to peer k and its echo, k cycling over all P peers (every round trip
//             goes to another peer, the case DC serves worst): one-way = half the round trip,
//             median and p99. Includes waking the peer's process.
//   rate      echoes per second with 64 messages outstanding, peers in turn.
//   gone/busy the hub's DC_GONE and DC_BUSY NAKs as a target (sums of both runs): peers'
//             streams whose context it evicted meanwhile, or had no context for.
// Every echo is checked (its value, its sender's QP); a stall beyond the watchdog is an error.
// Exits 0 whether or not the aims are met, 1 on an error, 2 on bad usage.
#include "send8.h"

#include <srcnic/srcnic.h>

#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr uint64_t kStop = ~0ull;          // the value that ends a peer
constexpr double kWatchdogS = 20.0;        // no echo for this long: an error
constexpr unsigned kRecvs = 64;            // receive buffers a peer keeps posted
constexpr unsigned kWindow = 64;           // rate: messages outstanding

uint64_t now_ns()
{
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch()).count());
}

[[noreturn]] void die(const char *what, srcnic_status_t s = SRCNIC_OK)
{
    std::fprintf(stderr, "dc_udp_bench[%d]: %s%s%s\n", static_cast<int>(getpid()), what,
                 s != SRCNIC_OK ? ": " : "", s != SRCNIC_OK ? srcnic_status_string(s) : "");
    std::exit(1);
}

// Engine log lines name their process and time (many processes share one stderr).
void log_line(srcnic_log_level_t, const char *file, int line, const char *msg, void *)
{
    std::fprintf(stderr, "[%d %.6f %s:%d] %s\n", static_cast<int>(getpid()),
                 static_cast<double>(now_ns()) / 1e9, file, line, msg);
}

struct Endpoint {           // what a process tells the other side through a pipe
    srcnic_nic_addr_t addr;
    uint32_t qpn;
};

bool write_all(int fd, const void *p, size_t n)
{
    return write(fd, p, n) == static_cast<ssize_t>(n);
}

bool read_all(int fd, void *p, size_t n)
{
    size_t got = 0;
    while (got < n) {
        const ssize_t r = read(fd, static_cast<char *>(p) + got, n - got);
        if (r <= 0) {
            return false;
        }
        got += static_cast<size_t>(r);
    }
    return true;
}

srcnic_config_t engine_config()
{
    srcnic_config_t c;
    srcnic_config_init(&c);
    std::snprintf(c.bind_addr, sizeof(c.bind_addr), "127.0.0.1");
    // Small engines, so that hundreds of processes fit: 2 KiB datagrams, few buffers.
    c.mtu = 2048;
    c.rx_buffers = 512;
    c.max_inflight = 512;
    c.sock_buf = 1u << 20;
    c.peer_sockets = 0;
    return c;
}

// A peer: echoes to the hub until it receives kStop (or the hub goes away).
[[noreturn]] void peer_main(int to_hub, int from_hub)
{
    alarm(900);   // whatever happens, a peer does not outlive the run
    srcnic_config_t c = engine_config();
    srcnic_nic_t *nic;
    srcnic_status_t s = srcnic_nic_create(&c, &nic);
    if (s != SRCNIC_OK) {
        die("peer nic_create", s);
    }
    srcnic_qp_config_t qc;
    srcnic_qp_config_init(&qc);
    srcnic_qp_t *qp;
    if ((s = srcnic_qp_create(nic, &qc, &qp)) != SRCNIC_OK) {
        die("peer qp_create", s);
    }
    Endpoint me = {};
    srcnic_nic_query_addr(nic, &me.addr);
    me.qpn = srcnic_qp_num(qp);
    Endpoint hub;
    if (!write_all(to_hub, &me, sizeof(me)) || !read_all(from_hub, &hub, sizeof(hub))) {
        std::_Exit(0);   // the hub gave up before the run
    }
    srcnic_dest_t dest;
    if ((s = srcnic_dest_create(nic, &hub.addr, hub.qpn, &dest)) != SRCNIC_OK) {
        die("peer dest_create", s);
    }
    std::vector<uint64_t> bufs(kRecvs);
    for (unsigned i = 0; i < kRecvs; ++i) {
        srcnic_recv_wqe_t r = {i, reinterpret_cast<uint64_t>(&bufs[i]), 8, 0};
        if ((s = srcnic_post_recv(qp, &r)) != SRCNIC_OK) {
            die("peer post_recv", s);
        }
    }
    const int efd = srcnic_nic_event_fd(nic);
    unsigned idle = 0;
    for (;;) {
        srcnic_nic_progress(nic);
        srcnic_cqe_t cq[16];
        const unsigned n = srcnic_poll_cq(qp, cq, 16);
        for (unsigned i = 0; i < n; ++i) {
            if (cq[i].status != SRCNIC_OK) {
                die("peer completion", static_cast<srcnic_status_t>(cq[i].status));
            }
            if (cq[i].opcode != SRCNIC_OP_RECV) {
                continue;   // an echo went
            }
            const uint64_t v = bufs[cq[i].wr_id];
            if (v == kStop) {
                // Let the last echoes' acknowledgements go, then leave.
                const uint64_t end = now_ns() + 100000000ull;
                while (srcnic_qp_outstanding(qp) != 0 && now_ns() < end) {
                    srcnic_nic_progress(nic);
                    srcnic_poll_cq(qp, cq, 16);
                }
                std::_Exit(0);
            }
            // The hub keeps at most kWindow messages out, so the send ring (256) has room.
            srcnic_wqe_t w = send8(dest, v, v);
            if ((s = srcnic_post_send(qp, &w)) != SRCNIC_OK) {
                die("peer post_send", s);
            }
            srcnic_recv_wqe_t r = {cq[i].wr_id, reinterpret_cast<uint64_t>(&bufs[cq[i].wr_id]), 8, 0};
            srcnic_post_recv(qp, &r);
        }
        srcnic_nic_transmit(nic);
        idle = n != 0 ? 0 : idle + 1;
        if (idle >= 64 && efd >= 0 && srcnic_nic_arm(nic) == SRCNIC_OK) {
            struct pollfd p[2] = {{efd, POLLIN, 0}, {from_hub, POLLIN, 0}};
            if (poll(p, 2, 1000) > 0 && (p[1].revents & (POLLHUP | POLLIN)) != 0) {
                std::_Exit(0);   // the hub closed its end: it is gone
            }
            idle = 0;
        }
    }
}

struct Result {
    double lat_med_us = 0, lat_p99_us = 0, rate = 0;
    uint64_t dc_fallbacks = 0, dc_streams = 0;
    uint64_t dc_gone = 0, dc_busy = 0;   // the hub's, as a target: DC_GONE and DC_BUSY sent
    unsigned conns = 0;
};

class Hub {
public:
    Hub(unsigned peers, uint32_t budget, uint32_t promote) : npeers_(peers)
    {
        srcnic_config_t c = engine_config();
        c.max_connections = budget;
        c.dc_promote = promote;
        c.rx_buffers = 4096;
        c.max_inflight = 4096;
        c.sock_buf = 8u << 20;
        srcnic_status_t s;
        if ((s = srcnic_nic_create(&c, &nic_)) != SRCNIC_OK) {
            die("hub nic_create", s);
        }
        srcnic_qp_config_t qc;
        srcnic_qp_config_init(&qc);
        qc.sq_size = 1024;
        qc.rq_size = 1024;
        if ((s = srcnic_qp_create(nic_, &qc, &qp_)) != SRCNIC_OK) {
            die("hub qp_create", s);
        }
        bufs_.resize(512);
        for (unsigned i = 0; i < bufs_.size(); ++i) {
            repost(i);
        }
    }
    ~Hub()
    {
        for (size_t i = 0; i < pids_.size(); ++i) {
            close(to_peer_[i]);   // a peer still waiting sees the hub gone
        }
        for (pid_t p : pids_) {
            const uint64_t end = now_ns() + 2000000000ull;
            int st;
            while (waitpid(p, &st, WNOHANG) == 0 && now_ns() < end) {
                usleep(1000);
            }
            kill(p, SIGKILL);
            waitpid(p, &st, 0);
        }
        srcnic_qp_destroy(qp_);
        srcnic_nic_destroy(nic_);
    }

    void start_peers()
    {
        Endpoint me = {};
        srcnic_nic_query_addr(nic_, &me.addr);
        me.qpn = srcnic_qp_num(qp_);
        for (unsigned k = 0; k < npeers_; ++k) {
            int up[2], down[2];
            if (pipe(up) != 0 || pipe(down) != 0) {
                die("pipe (raise the descriptor limit for this many peers)");
            }
            std::fflush(stdout);   // (a peer's exit would write what is buffered again)
            const pid_t pid = fork();
            if (pid < 0) {
                die("fork");
            }
            if (pid == 0) {
                close(up[0]);
                close(down[1]);
                for (int fd : to_peer_) {
                    close(fd);
                }
                peer_main(up[1], down[0]);
            }
            close(up[1]);
            close(down[0]);
            pids_.push_back(pid);
            to_peer_.push_back(down[1]);
            Endpoint p;
            if (!read_all(up[0], &p, sizeof(p))) {
                die("a peer did not start");
            }
            close(up[0]);
            srcnic_dest_t d;
            srcnic_status_t s;
            if ((s = srcnic_dest_create(nic_, &p.addr, p.qpn, &d)) != SRCNIC_OK) {
                die("hub dest_create", s);
            }
            dests_.push_back(d);
            qpns_.push_back(p.qpn);
            if (!write_all(down[1], &me, sizeof(me))) {
                die("a peer went away");
            }
        }
    }

    // Sends v to peer k (waits for room in the send ring).
    void send(unsigned k, uint64_t v)
    {
        srcnic_wqe_t w = send8(dests_[k], v, v);
        srcnic_status_t s;
        while ((s = srcnic_post_send(qp_, &w)) == SRCNIC_ERR_NO_RESOURCE) {
            poll_once();
        }
        if (s != SRCNIC_OK) {
            die("hub post_send", s);
        }
        srcnic_nic_transmit(nic_);
    }
    // One progress call; echoes that came back are counted in got_ (and checked).
    void poll_once()
    {
        srcnic_nic_progress(nic_);
        srcnic_cqe_t cq[64];
        const unsigned n = srcnic_poll_cq(qp_, cq, 64);
        for (unsigned i = 0; i < n; ++i) {
            if (cq[i].status != SRCNIC_OK) {
                die("hub completion", static_cast<srcnic_status_t>(cq[i].status));
            }
            if (cq[i].opcode != SRCNIC_OP_RECV) {
                continue;
            }
            const uint64_t v = bufs_[cq[i].wr_id];
            const unsigned k = static_cast<unsigned>(v % npeers_);
            if (cq[i].byte_len != 8 || cq[i].src_qpn != qpns_[k]) {
                die("an echo came from the wrong peer or with the wrong length");
            }
            ++got_;
            last_ = v;
            repost(static_cast<unsigned>(cq[i].wr_id));
        }
    }
    // Waits until `target` echoes were counted.
    void wait_for(uint64_t target)
    {
        const uint64_t end = now_ns() + static_cast<uint64_t>(kWatchdogS * 1e9);
        while (got_ < target) {
            poll_once();
            if (now_ns() > end) {
                die("no echo within the watchdog");
            }
        }
    }

    Result run(unsigned rounds)
    {
        Result r;
        // Warm-up: every peer once (connections opened, streams started), not measured.
        uint64_t seq = 0;
        for (unsigned k = 0; k < npeers_; ++k) {
            send(k, seq * npeers_ + k);
            ++seq;
            wait_for(seq);
        }
        std::vector<double> rtt;
        rtt.reserve(rounds);
        for (unsigned i = 0; i < rounds; ++i) {
            const unsigned k = i % npeers_;
            const uint64_t v = seq * npeers_ + k;
            const uint64_t t0 = now_ns();
            send(k, v);
            ++seq;
            wait_for(seq);
            if (last_ != v) {
                die("the echo carried another value");
            }
            rtt.push_back(static_cast<double>(now_ns() - t0) / 2e3);
        }
        std::sort(rtt.begin(), rtt.end());
        r.lat_med_us = rtt[rtt.size() / 2];
        r.lat_p99_us = rtt[std::min(rtt.size() - 1, rtt.size() * 99 / 100)];
        // Rate: kWindow outstanding, peers in turn.
        const uint64_t msgs = std::max<uint64_t>(rounds * 4ull, 4ull * npeers_);
        const uint64_t base = got_;
        const uint64_t t0 = now_ns();
        for (uint64_t m = 0; m < msgs; ++m) {
            while (seq - got_ >= kWindow) {
                poll_once();
            }
            const unsigned k = static_cast<unsigned>(m % npeers_);
            send(k, seq * npeers_ + k);
            ++seq;
        }
        wait_for(base + msgs);
        r.rate = static_cast<double>(msgs) / (static_cast<double>(now_ns() - t0) / 1e9);
        r.dc_fallbacks = srcnic_nic_counter(nic_, SRCNIC_CNT_DC_FALLBACKS);
        r.dc_streams = srcnic_nic_counter(nic_, SRCNIC_CNT_DC_STREAMS);
        r.dc_gone = srcnic_nic_counter(nic_, SRCNIC_CNT_DC_GONE_SENT);
        r.dc_busy = srcnic_nic_counter(nic_, SRCNIC_CNT_DC_BUSY_SENT);
        r.conns = srcnic_nic_num_connections(nic_);
        for (unsigned k = 0; k < npeers_; ++k) {
            send(k, kStop);
        }
        // Let the stops go out before the destructor waits for the peers.
        const uint64_t end = now_ns() + 2000000000ull;
        while (srcnic_qp_outstanding(qp_) != 0 && now_ns() < end) {
            poll_once();
        }
        return r;
    }

private:
    void repost(unsigned i)
    {
        srcnic_recv_wqe_t r = {i, reinterpret_cast<uint64_t>(&bufs_[i]), 8, 0};
        srcnic_status_t s = srcnic_post_recv(qp_, &r);
        if (s != SRCNIC_OK) {
            die("hub post_recv", s);
        }
    }

    unsigned npeers_;
    srcnic_nic_t *nic_ = nullptr;
    srcnic_qp_t *qp_ = nullptr;
    std::vector<uint64_t> bufs_;
    std::vector<srcnic_dest_t> dests_;
    std::vector<uint32_t> qpns_;
    std::vector<pid_t> pids_;
    std::vector<int> to_peer_;
    uint64_t got_ = 0;
    uint64_t last_ = 0;
};

std::vector<unsigned> parse_list(const char *s)
{
    std::vector<unsigned> out;
    for (const char *p = s; *p != '\0';) {
        char *end;
        const unsigned long v = std::strtoul(p, &end, 10);
        if (end == p || v == 0 || v > 4096) {
            return {};
        }
        out.push_back(static_cast<unsigned>(v));
        p = *end == ',' ? end + 1 : end;
        if (*end != ',' && *end != '\0') {
            return {};
        }
    }
    return out;
}

} // namespace

int main(int argc, char **argv)
{
    std::vector<unsigned> peers = {1, 16, 64, 256};
    unsigned rounds = 2000;
    std::string only;   // --modes: run only the modes named (a comma-separated list)
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--peers") && i + 1 < argc) {
            peers = parse_list(argv[++i]);
        } else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) {
            rounds = static_cast<unsigned>(std::strtoul(argv[++i], nullptr, 10));
        } else if (!std::strcmp(argv[i], "--modes") && i + 1 < argc) {
            only = std::string(",") + argv[++i] + ",";
        } else {
            std::fprintf(stderr, "usage: dc_udp_bench [--peers 1,16,64,256] [--rounds 2000] "
                                 "[--modes conn,dc,budget64]\n");
            return 2;
        }
    }
    std::string rest = only;   // what remains of --modes once the known names are taken out
    for (const char *m : {"conn", "dc", "budget64"}) {
        const std::string key = std::string(",") + m + ",";
        for (size_t at; (at = rest.find(key)) != std::string::npos;) {
            rest.erase(at, key.size() - 1);
        }
    }
    const bool modes_ok = rest.find_first_not_of(',') == std::string::npos;
    if (peers.empty() || rounds == 0 || !modes_ok) {
        std::fprintf(stderr, "dc_udp_bench: --peers takes numbers 1..4096, --rounds at least 1, "
                             "--modes names of conn, dc, budget64\n");
        return 2;
    }
    struct rlimit nofile;
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0) {
        nofile.rlim_cur = nofile.rlim_max;
        setrlimit(RLIMIT_NOFILE, &nofile);
    }
    signal(SIGPIPE, SIG_IGN);
    srcnic_log_set_handler(log_line, nullptr);
    if (std::getenv("SRCNIC_LOG_LEVEL") == nullptr) {
        srcnic_log_set_level(SRCNIC_LOG_LEVEL_ERROR);
    }
    std::printf("# dc_udp_bench: one engine per process over UDP on 127.0.0.1, %u rounds; "
                "one-way latency of an 8 B echo (median, p99, us), echoes/s with %u outstanding\n",
                rounds, kWindow);
    std::printf("%-6s %-9s %10s %10s %12s %8s %10s %10s %8s %8s\n", "peers", "mode", "lat_med", "lat_p99",
                "rate", "conns", "fallbacks", "streams", "gone", "busy");
    for (unsigned p : peers) {
        struct Mode {
            const char *name;
            uint32_t budget, promote;
            Result sum;
        } modes[] = {{"conn", p, 256, {}}, {"dc", 1, 0, {}}, {"budget64", 64, 256, {}}};
        // Twice, the modes in order and then in reverse order (a machine's drift over the run
        // weighs on every mode alike); the two runs are averaged.
        for (int pass = 0; pass < 2; ++pass) {
            for (int i = 0; i < 3; ++i) {
                Mode &m = modes[pass == 0 ? i : 2 - i];
                if (!only.empty() && only.find(std::string(",") + m.name + ",") == std::string::npos) {
                    continue;
                }
                Hub hub(p, m.budget, m.promote);
                hub.start_peers();
                const Result r = hub.run(rounds);
                m.sum.lat_med_us += r.lat_med_us / 2;
                m.sum.lat_p99_us += r.lat_p99_us / 2;
                m.sum.rate += r.rate / 2;
                m.sum.conns = r.conns;
                m.sum.dc_fallbacks = r.dc_fallbacks;
                m.sum.dc_streams += r.dc_streams;
                m.sum.dc_gone += r.dc_gone;
                m.sum.dc_busy += r.dc_busy;
            }
        }
        for (const Mode &m : modes) {
            if (!only.empty() && only.find(std::string(",") + m.name + ",") == std::string::npos) {
                continue;
            }
            const Result &r = m.sum;
            std::printf("%-6u %-9s %10.2f %10.2f %12.0f %8u %10" PRIu64 " %10" PRIu64 " %8" PRIu64 " %8" PRIu64,
                        p, m.name, r.lat_med_us, r.lat_p99_us, r.rate, r.conns, r.dc_fallbacks, r.dc_streams,
                        r.dc_gone, r.dc_busy);
            if (modes[0].sum.lat_med_us > 0) {   // conn ran
                std::printf("  lat/conn %.2f", r.lat_med_us / modes[0].sum.lat_med_us);
            }
            std::printf("\n");
        }
        std::fflush(stdout);
    }
    return 0;
}
