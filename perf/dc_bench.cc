// The DC fallback against the number of active peers (perf/README.md, "DC"): one hub engine and
// P peer engines in this process over the in-memory link, for three budgets of the hub's:
//   conn      every peer gets a connection (the budget is P);
//   dc        one connection, every other peer over DC (32 DCIs shared in turn; no promotion);
//   budget64  64 connections, the rest over DC (promotion by traffic as by default).
// Peers keep the defaults (64 DC target contexts each).
//
// Each (mode, P) runs twice, the modes in order and then in reverse order, after a warm-up bed
// of P peers that is not reported, and the two runs' latencies and rates are averaged. Figures
// per (mode, P):
//   latency   8-byte SEND ping-pong from the hub to peer k, k cycling over all P peers (so every
//             round trip goes to another peer, the case DC serves worst); one-way = half the
//             round trip, median and p99. Only the two engines of a round trip are progressed.
//             pkts/rt: the hub's packets (sent and received) per round trip.
//   rate      8-byte SENDs from the hub to peers in turn, 64 outstanding, counted at the hub's
//             completions per second. The hub and the peers of the last 64 messages are
//             progressed (the others have nothing to do).
//   state     the hub's per-peer state from its own accounting (Nic::state_bytes): NIC contexts
//             (connections, DCIs, DC target contexts, their active halves held or pooled,
//             closed-table entries) and, apart, the
//             address handles (one per remote engine a destination names). Read twice: right
//             after the traffic (`nic_state_B`), when the peers last progressed long ago and
//             their quiet streams are not closed yet, and settled (`settled_B`): once every
//             engine has progressed after the DC quiet time, as engines that progress on their
//             own would have (a quiet DCI releases its stream with DC_CLOSE, which takes the
//             stream out of the target's closed table, PROTOCOL.md §8.5).
// Every message is checked (length, completion status); a stall beyond the watchdog is an error.
// --modes runs only the modes named (dc/conn is nan without conn). --settle: after each round
// trip of the latency test (outside its time) the hub, that peer and the hub progress once more,
// as engines that progress on their own do between two round trips of one peer: the peer then
// sees the hub's acknowledgement of its reply, and whatever that asks (PROTOCOL.md §8.3), before
// its next turn rather than at it.
// DC_BENCH_BREAKDOWN=1 (environment) prints to stderr, per (mode, P), the latency test's
// counters per round trip, the hub's and the peers' summed (acknowledgements, streams, target
// contexts, closes, requests sent back along a stream, PROTOCOL.md §8.8), and the state bytes
// by kind.
// Exits 0 whether or not the aims are met, 1 on an error, 2 on bad usage.
#include "core/nic_config.h"
#include "link/loopback_link.h"
#include "nic/nic.h"
#include "send8.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace srcnic;

namespace {

uint64_t now_ns_()
{
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch()).count());
}

[[noreturn]] void die(const char *what)
{
    std::fprintf(stderr, "dc_bench: %s\n", what);
    std::exit(1);
}

struct Bed {
    std::shared_ptr<LoopbackFabric> fabric;
    std::unique_ptr<Nic> hub;
    Qp *hub_qp = nullptr;
    std::vector<std::unique_ptr<Nic>> peers;
    std::vector<Qp *> peer_qps;
    std::vector<srcnic_dest_t> to_peer;   // hub -> peer k
    std::vector<srcnic_dest_t> to_hub;    // peer k -> hub
    uint64_t note = 0;                    // the 8 bytes every message carries (inline)
};

std::vector<uint64_t> g_rbufs;
bool g_settle = false;   // --settle

void post_recvs(Qp *qp, unsigned n)
{
    for (unsigned i = 0; i < n; ++i) {
        srcnic_recv_wqe_t r = {};
        r.wr_id = i;
        r.addr = reinterpret_cast<uint64_t>(&g_rbufs[i % g_rbufs.size()]);
        r.length = 8;
        if (qp->post_recv(r) != SRCNIC_OK) {
            die("post_recv");
        }
    }
}

void build(Bed &bed, size_t npeers, uint32_t hub_budget, bool promote)
{
    if (LoopbackFabric::create(2048, 4096, &bed.fabric) != SRCNIC_OK) {
        die("fabric");
    }
    srcnic_config_t hc;
    srcnic_config_init(&hc);
    hc.max_connections = hub_budget;
    hc.rx_buffers = 1024;
    if (!promote) {
        hc.dc_promote = 0;
    }
    srcnic_config_t pc;
    srcnic_config_init(&pc);
    pc.max_inflight = 64;
    pc.rx_buffers = 160;
    std::unique_ptr<Link> link;
    if (bed.fabric->open_link(&link) != SRCNIC_OK || Nic::create(hc, std::move(link), &bed.hub) != SRCNIC_OK) {
        die("hub");
    }
    srcnic_qp_config_t qc;
    srcnic_qp_config_init(&qc);
    qc.sq_size = 128;
    qc.rq_size = 128;
    if (bed.hub->qp_create(qc, &bed.hub_qp) != SRCNIC_OK) {
        die("hub qp");
    }
    post_recvs(bed.hub_qp, qc.rq_size);
    qc.sq_size = 16;
    qc.rq_size = 16;
    for (size_t k = 0; k < npeers; ++k) {
        std::unique_ptr<Nic> nic;
        if (bed.fabric->open_link(&link) != SRCNIC_OK || Nic::create(pc, std::move(link), &nic) != SRCNIC_OK) {
            die("peer");
        }
        Qp *qp;
        if (nic->qp_create(qc, &qp) != SRCNIC_OK) {
            die("peer qp");
        }
        post_recvs(qp, qc.rq_size);
        srcnic_dest_t d;
        if (bed.hub->dest_create(nic->addr(), qp->qpn(), &d) != SRCNIC_OK) {
            die("dest to peer");
        }
        bed.to_peer.push_back(d);
        if (nic->dest_create(bed.hub->addr(), bed.hub_qp->qpn(), &d) != SRCNIC_OK) {
            die("dest to hub");
        }
        bed.to_hub.push_back(d);
        bed.peers.push_back(std::move(nic));
        bed.peer_qps.push_back(qp);
    }
}

// Polls qp until a completion of opcode op comes (reposting a consumed receive), progressing a
// and b; false on the watchdog (10 s).
bool await(Nic *a, Nic *b, Qp *qp, srcnic_opcode_t op)
{
    const uint64_t deadline = now_ns_() + 10ull * 1000000000ull;
    srcnic_cqe_t cqe;
    for (;;) {
        a->progress();
        if (b != nullptr) {
            b->progress();
        }
        while (qp->poll_cq(&cqe, 1) == 1) {
            if (cqe.status != SRCNIC_OK) {
                die(srcnic_status_string(static_cast<srcnic_status_t>(cqe.status)));
            }
            if (cqe.opcode == SRCNIC_OP_RECV) {
                if (cqe.byte_len != 8) {
                    die("received a message of the wrong length");
                }
                post_recvs(qp, 1);
            }
            if (cqe.opcode == op) {
                return true;
            }
        }
        if (now_ns_() > deadline) {
            return false;
        }
    }
}

struct Result {
    double lat_med_us = 0, lat_p99_us = 0, rate = 0;
    double pkts_per_rt = 0;   // the hub's packets, sent and received, per measured round trip
    Nic::StateBytes state, settled;
    uint64_t streams = 0, fallbacks = 0, promoted = 0;
    unsigned conns = 0;
};

Result run(size_t npeers, uint32_t budget, bool promote, unsigned rounds)
{
    Bed bed;
    build(bed, npeers, budget, promote);
    Result res;
    // One pass over every peer first (connections opened, first streams), then the measured
    // round trips, each to the next peer.
    std::vector<double> rtts;
    uint64_t pk0 = 0;   // the hub's packets (sent and received) before the measured round trips
    const unsigned total = static_cast<unsigned>(std::max<size_t>(rounds, npeers)) + static_cast<unsigned>(npeers);
    for (unsigned r = 0; r < total; ++r) {
        const size_t k = r % npeers;
        const uint64_t t0 = now_ns_();
        if (bed.hub_qp->post_send(send8(bed.to_peer[k], r, bed.note)) != SRCNIC_OK) {
            die("hub post");
        }
        bed.hub->transmit();
        if (!await(bed.peers[k].get(), bed.hub.get(), bed.peer_qps[k], SRCNIC_OP_RECV)) {
            die("ping: watchdog");
        }
        if (bed.peer_qps[k]->post_send(send8(bed.to_hub[k], r, bed.note)) != SRCNIC_OK) {
            die("peer post");
        }
        bed.peers[k]->transmit();
        if (!await(bed.hub.get(), bed.peers[k].get(), bed.hub_qp, SRCNIC_OP_RECV)) {
            die("pong: watchdog");
        }
        if (r >= npeers) {
            rtts.push_back((now_ns_() - t0) / 2000.0);
        }
        if (r + 1 == npeers) {
            pk0 = bed.hub->counter(SRCNIC_CNT_TX_PACKETS) + bed.hub->counter(SRCNIC_CNT_RX_PACKETS);
        }
        if (g_settle) {
            // Outside the round trip's time: the two engines progress once more, as engines
            // that progress on their own do between two round trips of the same peer.
            bed.hub->progress();
            bed.peers[k]->progress();
            bed.hub->progress();
        }
        // Send completions of both (the ack may come after the answer).
        srcnic_cqe_t cqe;
        while (bed.peer_qps[k]->poll_cq(&cqe, 1) == 1) {
            if (cqe.status != SRCNIC_OK) {
                die("peer completion");
            }
        }
    }
    res.pkts_per_rt = static_cast<double>(bed.hub->counter(SRCNIC_CNT_TX_PACKETS) +
                                          bed.hub->counter(SRCNIC_CNT_RX_PACKETS) - pk0) / rtts.size();
    if (std::getenv("DC_BENCH_BREAKDOWN")) {
        // What the latency test's round trips took, per round trip (warm-up pass included).
        const srcnic_counter_t kinds[] = {SRCNIC_CNT_ACKS_SENT, SRCNIC_CNT_RETRANSMITS, SRCNIC_CNT_DC_STREAMS,
                                          SRCNIC_CNT_DC_TARGETS_OPENED, SRCNIC_CNT_DC_BUSY_SENT,
                                          SRCNIC_CNT_DC_CLOSED, SRCNIC_CNT_DC_REVERSE_SENT,
                                          SRCNIC_CNT_DC_HANDED_BACK, SRCNIC_CNT_DC_CLOSE_CONFIRMED,
                                          SRCNIC_CNT_DC_XACKS_APPLIED};
        const double n = static_cast<double>(total);
        std::fprintf(stderr, "%zu peers budget %u, per round trip:", npeers, budget);
        for (srcnic_counter_t k : kinds) {
            uint64_t peers = 0;
            for (const auto &p : bed.peers) {
                peers += p->counter(k);
            }
            std::fprintf(stderr, " %s hub %.2f peers %.2f;", srcnic_counter_name(k), bed.hub->counter(k) / n,
                         peers / n);
        }
        std::fprintf(stderr, "\n");
    }
    std::sort(rtts.begin(), rtts.end());
    res.lat_med_us = rtts[rtts.size() / 2];
    res.lat_p99_us = rtts[std::min(rtts.size() - 1, rtts.size() * 99 / 100)];

    // Rate: round-robin one way, 64 outstanding.
    const unsigned kWindow = 64;
    const unsigned msgs = std::max<unsigned>(20000, static_cast<unsigned>(2 * npeers));
    unsigned posted = 0, done = 0;
    const uint64_t t0 = now_ns_();
    const uint64_t deadline = t0 + 60ull * 1000000000ull;
    while (done < msgs) {
        while (posted < msgs && posted - done < kWindow) {
            if (bed.hub_qp->post_send(send8(bed.to_peer[posted % npeers], posted, bed.note)) != SRCNIC_OK) {
                break;
            }
            ++posted;
        }
        bed.hub->progress();
        const unsigned from = done;
        for (unsigned i = from; i < posted && i < from + kWindow; ++i) {
            Nic *p = bed.peers[i % npeers].get();
            p->progress();
            srcnic_cqe_t cqe;
            Qp *qp = bed.peer_qps[i % npeers];
            while (qp->poll_cq(&cqe, 1) == 1) {
                if (cqe.opcode == SRCNIC_OP_RECV) {
                    post_recvs(qp, 1);
                }
            }
            if (npeers <= i - from + 1) {
                break;   // every peer progressed once
            }
        }
        srcnic_cqe_t cqes[64];
        const unsigned got = bed.hub_qp->poll_cq(cqes, 64);
        for (unsigned i = 0; i < got; ++i) {
            if (cqes[i].status != SRCNIC_OK) {
                die("rate: completion failed");
            }
            done += cqes[i].opcode == SRCNIC_OP_SEND;
        }
        if (now_ns_() > deadline) {
            die("rate: watchdog");
        }
    }
    res.rate = msgs / ((now_ns_() - t0) / 1e9);
    res.state = bed.hub->state_bytes();
    // Settled: past the DC quiet time, every peer progresses (its quiet DCI, one looked at per
    // call, sends DC_CLOSE), then the hub, often enough to take every DC_CLOSE and to look at
    // each of its DCIs.
    const uint64_t quiet_end = now_ns_() + 2 * kDcMinQuietNs;
    while (now_ns_() < quiet_end) {
        bed.hub->progress();
    }
    for (int pass = 0; pass < 2; ++pass) {
        for (auto &p : bed.peers) {
            p->progress();
        }
        for (size_t i = 0; i < 4 * 32 + npeers; ++i) {   // (32 DCIs by default)
            bed.hub->progress();
        }
    }
    res.settled = bed.hub->state_bytes();
    if (std::getenv("DC_BENCH_BREAKDOWN")) {
        for (const Nic::StateBytes *b : {&res.state, &res.settled}) {
        std::fprintf(stderr, "%s %zu peers budget %u: conns %zu dcis %zu dcts %zu active %zu closed %zu\n",
                     b == &res.state ? "after" : "settled",
                     npeers, budget, b->connections, b->dcis, b->dc_targets, b->active, b->closed);
        }
    }
    res.streams = bed.hub->counter(SRCNIC_CNT_DC_STREAMS);
    res.fallbacks = bed.hub->counter(SRCNIC_CNT_DC_FALLBACKS);
    res.promoted = bed.hub->counter(SRCNIC_CNT_DC_PROMOTED);
    res.conns = bed.hub->num_connections();
    return res;
}

std::vector<size_t> parse_list(const char *s)
{
    std::vector<size_t> v;
    for (const char *p = s; *p != '\0';) {
        char *end;
        v.push_back(std::strtoul(p, &end, 10));
        if (end == p) {
            std::fprintf(stderr, "dc_bench: bad number list '%s'\n", s);
            std::exit(2);
        }
        p = *end == ',' ? end + 1 : end;
    }
    return v;
}

} // namespace

int main(int argc, char **argv)
{
    std::vector<size_t> peers = {1, 16, 64, 256, 1024, 4096};
    unsigned rounds = 2000;
    bool run_mode[3] = {true, true, true};   // --modes: conn, dc, budget64
    const char *modes[3] = {"conn", "dc", "budget64"};
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--peers") == 0 && i + 1 < argc) {
            peers = parse_list(argv[++i]);
        } else if (std::strcmp(argv[i], "--settle") == 0) {
            g_settle = true;
        } else if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
            rounds = static_cast<unsigned>(std::strtoul(argv[++i], nullptr, 10));
        } else if (std::strcmp(argv[i], "--modes") == 0 && i + 1 < argc) {
            const std::string list = argv[++i];
            for (bool &on : run_mode) {
                on = false;
            }
            for (size_t at = 0; at <= list.size();) {
                const size_t end = std::min(list.find(',', at), list.size());
                const std::string name = list.substr(at, end - at);
                const auto known = std::find_if(std::begin(modes), std::end(modes),
                                                [&](const char *m) { return name == m; });
                if (known == std::end(modes)) {
                    std::fprintf(stderr, "dc_bench: unknown mode '%s' in --modes (conn, dc, budget64)\n",
                                 name.c_str());
                    return 2;
                }
                run_mode[known - std::begin(modes)] = true;
                at = end + 1;
            }
        } else {
            std::fprintf(stderr, "usage: dc_bench [--peers 1,16,64,...] [--rounds N] [--modes conn,dc,budget64] [--settle]\n");
            return 2;
        }
    }
    // Each engine holds one descriptor (its registration table's memfd; its event fds and its
    // link's are created only for a waiter, which this benchmark never is): thousands need
    // more than the usual soft limit of 1024.
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        struct rlimit want = {std::max<rlim_t>(rl.rlim_max, 65536), std::max<rlim_t>(rl.rlim_max, 65536)};
        if (setrlimit(RLIMIT_NOFILE, &want) != 0) {
            rl.rlim_cur = rl.rlim_max;
            setrlimit(RLIMIT_NOFILE, &rl);
        }
    }
    g_rbufs.resize(256);
    srcnic_log_set_level(SRCNIC_LOG_LEVEL_ERROR);
    std::printf("%-9s %6s %5s %8s %9s %9s %7s %11s %9s %12s %11s %10s %11s %10s %9s\n", "mode", "peers", "conns",
                "streams", "lat_us", "p99_us", "pkts/rt", "rate_msg/s", "dc/conn", "nic_state_B", "B/peer", "settled_B",
                "addr_hdl_B", "fallbacks", "promoted");
    for (size_t p : peers) {
        // A warm-up bed of this size first, not reported: the first bed of a size ran slower
        // (the process's memory grows to it), whatever its mode.
        run(p, static_cast<uint32_t>(std::max<size_t>(p, 1)), true, rounds);
        // Each mode twice, in order and then in reverse order, averaged: what runs earlier or
        // later in a sequence weighs the same on every mode.
        Result res[3];
        for (int pass = 0; pass < 2; ++pass) {
            for (int j = 0; j < 3; ++j) {
                const int m = pass == 0 ? j : 2 - j;
                if (!run_mode[m]) {
                    continue;
                }
                const uint32_t budget = m == 0 ? static_cast<uint32_t>(std::max<size_t>(p, 1)) : m == 1 ? 1u : 64u;
                // dc: every peer beyond the one connection stays on DC (no promotion);
                // budget64: as configured by default (busy DC peers are promoted when a
                // connection is idle).
                const Result r = run(p, budget, m != 1, rounds);
                if (pass == 0) {
                    res[m] = r;
                } else {
                    res[m].lat_med_us = (res[m].lat_med_us + r.lat_med_us) / 2;
                    res[m].lat_p99_us = (res[m].lat_p99_us + r.lat_p99_us) / 2;
                    res[m].rate = (res[m].rate + r.rate) / 2;
                    res[m].pkts_per_rt = (res[m].pkts_per_rt + r.pkts_per_rt) / 2;
                }
            }
        }
        const Result &conn = res[0];
        for (int m = 0; m < 3; ++m) {
            if (!run_mode[m]) {
                continue;
            }
            const char *mode = modes[m];
            const Result &r = res[m];
            auto nic_of = [](const Nic::StateBytes &b) {
                return b.connections + b.peer_nics + b.dcis + b.dc_targets + b.active + b.closed;
            };
            const size_t nic = nic_of(r.state);
            std::printf("%-9s %6zu %5u %8" PRIu64 " %9.2f %9.2f %7.2f %11.0f %9.2f %12zu %11.1f %10zu %11zu %10" PRIu64
                        " %9" PRIu64 "\n",
                        mode, p, r.conns, r.streams, r.lat_med_us, r.lat_p99_us, r.pkts_per_rt, r.rate,
                        run_mode[0] ? r.lat_med_us / conn.lat_med_us : NAN, nic, static_cast<double>(nic) / p,
                        nic_of(r.settled), r.state.remotes, r.fallbacks, r.promoted);
            std::fflush(stdout);
        }
    }
    return 0;
}
