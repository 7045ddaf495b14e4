// N nodes x P processes in one process over the in-memory link, every message verified exactly
// once, and the per-node state the engines account for beside the SRC paper's table
// (perf/README.md, "Scale"). Modes:
//   embedded  one engine per process (N*P engines): every process pair that talks has its own
//             connection, the RC-like baseline;
//   agent     one engine per node, the node's P processes each a QP on it: connections per
//             node pair;
//   agent-dc  as agent with a connection budget (--budget, default 64): the other peers over DC
//             (DCIs, DC target contexts).
//
// Traffic. Each process sends `rounds` messages to each of its destinations, round-robin over
// them, at most sq_size outstanding; destinations are either every other process ("all") or,
// where that is too many, a node-covering sample ("nodes"): process p of node n sends to node
// n+1+p+P*j (mod N) for j = 0, 1, ... (at most --dests-per-proc of them), so the P processes of a
// node cover every other node once, each to a process of that node drawn from the seed. Every
// message carries its (sender, destination) pair's index and a sequence number, and its bytes are
// a pattern of both: the receiver checks the pair is its own, the sequence is the next expected
// (a smaller one is a duplicate, a larger one a loss or reordering), the length and the bytes;
// at the end every pair must have delivered exactly `rounds` messages and every send completed
// OK once. Loss (--loss PCT) drops datagrams on every engine's way out (faulty link, seeded by
// --seed and the engine's index; the seed is printed).
//
// State. Per node, summed over its engines, from their own accounting (Nic::state_bytes): what a
// hardware NIC would hold in its contexts and tables, apart from the host memory a hardware NIC
// also keeps its rings and buffers in (reported in another column). Printed beside the paper's
// figures for the same N and P, from the constants its table implies (paper_constants()).
//
// A stall (no completion for --watchdog seconds) fails the run. Exits 0 when every message was
// delivered exactly once, 1 on an error, 2 on bad usage.
#include "core/nic_config.h"
#include "link/faulty_link.h"
#include "link/loopback_link.h"
#include "nic/nic.h"

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

constexpr double kMiB = 1024.0 * 1024.0;

// --- the paper's table (SRC: A Scalable Reliable Connection for RDMA), per node, P = 20 ---
//
// Its figures are MB of 2^20 bytes: read so, RC's three figures give one constant, 750.0 bytes
// per QP, at every N (read as 10^6 bytes they give 715.2-715.3), so that is how they are read
// here. RC holds P*P*(N-1) QPs per node, XRC P*(N-1) (RC/XRC = P = 20 at every N), DCT a
// constant, and SRC a part per remote node and a part per process (its QPs), fitted by least
// squares to its three figures.
struct PaperRow {
    unsigned n;
    double rc, xrc, dct, src;   // MiB per node
};
constexpr unsigned kPaperP = 20;
constexpr PaperRow kPaper[] = {
    {32, 8.869, 0.443, 0.014, 0.019},
    {128, 36.335, 1.817, 0.014, 0.053},
    {512, 146.198, 7.310, 0.014, 0.190},
};

struct PaperConstants {
    double rc_qp = 0;          // bytes per RC (and XRC) QP
    double src_remote = 0;     // SRC: bytes per remote node
    double src_proc = 0;       // SRC: bytes per process on the node (its QP)
    double dct = 0;            // DCT: bytes per node, whatever N
};

PaperConstants paper_constants()
{
    PaperConstants k;
    double rc = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    const double m = sizeof(kPaper) / sizeof(kPaper[0]);
    for (const PaperRow &r : kPaper) {
        rc += r.rc * kMiB / (kPaperP * kPaperP * (r.n - 1.0));
        const double x = r.n - 1.0, y = r.src * kMiB;
        sx += x;
        sy += y;
        sxx += x * x;
        sxy += x * y;
    }
    k.rc_qp = rc / m;
    k.src_remote = (m * sxy - sx * sy) / (m * sxx - sx * sx);
    k.src_proc = (sy - k.src_remote * sx) / m / kPaperP;
    k.dct = kPaper[0].dct * kMiB;
    return k;
}

struct PaperFigures {
    double rc, xrc, dct, src;   // bytes per node
    bool from_table;            // N and P are a row of the table (its figures, not the formula)
};

PaperFigures paper_for(const PaperConstants &k, unsigned n, unsigned p)
{
    for (const PaperRow &r : kPaper) {
        if (r.n == n && p == kPaperP) {
            return {r.rc * kMiB, r.xrc * kMiB, r.dct * kMiB, r.src * kMiB, true};
        }
    }
    const double remote = n - 1.0;
    return {k.rc_qp * p * p * remote, k.rc_qp * p * remote, k.dct,
            k.src_remote * remote + k.src_proc * p, false};
}

// --- options ---

enum class Mode { kEmbedded, kAgent, kAgentDc };
const char *mode_name(Mode m)
{
    return m == Mode::kEmbedded ? "embedded" : m == Mode::kAgent ? "agent" : "agent-dc";
}

struct Options {
    std::vector<unsigned> nodes = {32};
    unsigned procs = 20;
    std::vector<Mode> modes = {Mode::kAgent};
    unsigned rounds = 2;
    uint32_t msg = 64;             // bytes per message (at least the 16-byte stamp)
    double loss = 0;               // percent of datagrams dropped on every engine's way out
    uint64_t seed = 0;             // 0: from the clock (printed)
    uint32_t budget = 64;          // agent-dc: connections per engine
    uint32_t num_dci = 32;         // agent-dc
    uint32_t dc_targets = 64;      // agent-dc
    std::string dests = "auto";    // all | nodes | auto (all up to kAutoAllMax processes)
    unsigned dests_per_proc = 0;   // nodes: at most this many destinations per process (0: all)
    uint32_t sq = 8, rq = 16;      // ring entries per QP
    uint32_t window = 128;         // packets in flight per connection (0: the engine's automatic)
    uint32_t mtu = 1024;           // in-memory link datagram, bytes
    uint32_t depth = 256;          // in-memory link receive queue, datagrams
    uint32_t rto_us = 5000;        // initial retransmission timeout, µs (the engine's default;
                                   // DC streams wait on it here: see perf/README.md, "Scale")
    double watchdog_s = 60;        // no completion for this long fails the run
    std::string json;              // write the runs as JSON here
};

constexpr unsigned kAutoAllMax = 2048;   // "auto": all-to-all up to this many processes
// A progress line on stderr this often, ns (SCALE_SIM_REPORT_MS in the environment sets it).
uint64_t g_report_ns = 10ull * 1000000000ull;

// --- the bed ---

struct Engine {
    std::unique_ptr<Nic> nic;
    FaultyLink *faulty = nullptr;             // its link's faults (--loss), owned by nic
    uint32_t first_proc = 0, num_procs = 0;   // its processes: [first, first + num)
};

struct Proc {
    uint32_t engine = 0;
    Qp *qp = nullptr;
    uint64_t posted = 0;           // sends posted (position in its round-robin)
    uint64_t total = 0;            // sends it makes: destinations x rounds
    uint64_t completed = 0;        // send completions
    uint32_t outstanding = 0;      // sends posted and not completed
};

struct Errors {
    uint64_t status = 0;           // a completion with an error status
    uint64_t duplicate = 0;        // a sequence number already delivered
    uint64_t gap = 0;              // a sequence number beyond the next expected (loss or reorder)
    uint64_t corrupt = 0;          // wrong pair, receiver, length or bytes
    uint64_t lost = 0;             // at the end: messages a pair never delivered
    uint64_t total() const { return status + duplicate + gap + corrupt + lost; }
};

struct Run {
    Mode mode;
    unsigned n, p;
    size_t engines = 0, procs = 0;
    std::string dest_kind;         // "all" or "nodes"
    uint64_t pairs = 0, messages = 0;
    double setup_s = 0, traffic_s = 0;
    double rate = 0;               // messages per second, all engines
    Errors err;
    // Per node, mean over nodes (bytes), and the largest node's NIC state.
    double conns = 0;              // open connections per node
    double connections = 0, dcis = 0, dc_targets = 0, active = 0, closed = 0, qps = 0, remotes = 0;
    double peer_nics = 0;          // the remote NICs the connections name (PeerNic entries)
    double nic_max = 0;
    double nic_settled = 0;        // NIC state per node once every engine progressed past the
                                   // DC quiet time after the traffic (settle())
    double closed_settled = 0;     //   of which closed-table and refused entries
    double per_conn = 0;           // state_bytes().connections / num_connections, all engines
    uint64_t conns_total = 0, conn_bytes_total = 0;   // their sums over all engines
    double rings = 0, app_bufs = 0, pkt_bufs = 0, msg_descs = 0, link_queue = 0, engine_obj = 0;
    double rss_node = 0;           // the process's resident memory after the traffic / N
    uint64_t rss = 0, hwm = 0;     // bytes
    uint64_t retransmits = 0, rnr = 0, fabric_full = 0, dropped = 0;
    uint64_t dc_fallbacks = 0, dc_streams = 0, dc_busy = 0, promoted = 0;
    double nic() const { return connections + peer_nics + dcis + dc_targets + active + closed + qps; }
    // The NIC state per node if every process talked to every other: measured where the run
    // did, where every node pair talked (agent), and in agent-dc (bounded by the budget, the DCI
    // pool and the DC target contexts, whatever the peers), else the measured bytes per
    // connection times the connections all-to-all needs (embedded: P * (N*P - 1), one per other
    // process on each of the node's engines; agent: N - 1, plus the engine's connection to
    // itself and its mirror) with the rest as measured.
    bool a2a_measured() const
    {
        return dest_kind == "all" || mode == Mode::kAgentDc || (mode == Mode::kAgent && covered);
    }
    double a2a() const
    {
        if (a2a_measured()) {
            return nic();
        }
        const double c = mode == Mode::kEmbedded ? static_cast<double>(p) * (static_cast<double>(n) * p - 1)
                                                 : n - 1.0 + 2;
        // (Each of those connections names a remote NIC of its own: one PeerNic entry each.)
        return nic() - connections - peer_nics + (per_conn + sizeof(PeerNic)) * c;
    }
    bool covered = false;          // every node sent to every other node
    double host() const { return rings + app_bufs + pkt_bufs + msg_descs + link_queue + engine_obj; }
};

uint64_t proc_status_kb(const char *field)
{
    FILE *f = std::fopen("/proc/self/status", "r");
    if (f == nullptr) {
        return 0;
    }
    char line[256];
    uint64_t kb = 0;
    const size_t len = std::strlen(field);
    while (std::fgets(line, sizeof(line), f) != nullptr) {
        if (std::strncmp(line, field, len) == 0) {
            kb = std::strtoull(line + len, nullptr, 10);
        }
    }
    std::fclose(f);
    return kb;
}

uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

// The 16 bytes every message starts with; the rest is pattern_byte().
struct Stamp {
    uint32_t pair;                 // index of (sender, destination)
    uint32_t seq;                  // its number within the pair, from 0
    uint32_t src;                  // sending process
    uint32_t check;                // of the three above
};
static_assert(sizeof(Stamp) == 16, "the stamp is 16 bytes");

uint32_t stamp_check(uint32_t pair, uint32_t seq, uint32_t src)
{
    return static_cast<uint32_t>(mix((static_cast<uint64_t>(pair) << 32) ^ seq ^ (static_cast<uint64_t>(src) << 7)));
}

uint8_t pattern_byte(uint32_t pair, uint32_t seq, size_t i)
{
    return static_cast<uint8_t>(pair * 31u + seq * 7u + i);
}

class Sim {
public:
    Sim(const Options &o, Mode mode, unsigned n) : o_(o), mode_(mode), n_(n), p_(o.procs) {}
    ~Sim()
    {
        engines_.clear();   // the engines (and their QPs) before the domain they use
        if (pd_ != nullptr) {
            srcnic_pd_destroy(pd_);
        }
    }
    Sim(const Sim &) = delete;
    Sim &operator=(const Sim &) = delete;

    bool run(Run *out);

private:
    bool build();
    void choose_destinations();
    void service(uint32_t s);
    void on_recv(uint32_t r, const srcnic_cqe_t &c);
    void report_stall() const;
    void account(Run *out) const;
    // Progresses every engine for a few DC quiet times after the traffic, as engines between
    // bursts would be, and reads the NIC state again (quiet DCIs close their streams, which
    // takes them out of their targets' closed tables, PROTOCOL.md §8.5).
    void settle(Run *out);

    const Options &o_;
    const Mode mode_;
    const unsigned n_, p_;
    std::shared_ptr<LoopbackFabric> fabric_;
    srcnic_pd_t *pd_ = nullptr;
    std::vector<Engine> engines_;
    std::vector<Proc> procs_;
    // Pairs: those of process s are [pair_off_[s], pair_off_[s + 1]).
    std::vector<uint64_t> pair_off_;
    std::vector<uint32_t> pair_dst_;        // receiving process
    std::vector<srcnic_dest_t> pair_dest_;  // its handle on the sender's engine
    std::vector<uint32_t> sent_;            // next sequence number to send
    std::vector<uint32_t> next_;            // next sequence number expected
    std::vector<uint8_t> rbufs_;            // rq x msg bytes per process
    std::vector<uint8_t> sbufs_;            // sq x msg bytes per process (messages not inline)
    std::vector<uint16_t> sfree_;           // free send slots: sq per process
    std::vector<uint16_t> sfree_n_;         // how many of them are free
    bool inline_ = true;
    std::string dest_kind_;
    bool covered_ = false;                  // see Run::covered
    uint64_t expected_ = 0, received_ = 0, completed_ = 0;
    Errors err_;
};

bool Sim::build()
{
    const size_t num_procs = static_cast<size_t>(n_) * p_;
    const size_t num_engines = mode_ == Mode::kEmbedded ? num_procs : n_;
    if (num_engines > 65535) {
        std::fprintf(stderr, "scale_sim: %zu engines: the in-memory fabric has 65,535 ports\n",
                     num_engines);
        return false;
    }
    if (LoopbackFabric::create(o_.mtu, o_.depth, &fabric_) != SRCNIC_OK ||
        srcnic_pd_create(&pd_) != SRCNIC_OK) {
        std::fprintf(stderr, "scale_sim: fabric or protection domain\n");
        return false;
    }
    const uint32_t per_engine = mode_ == Mode::kEmbedded ? 1 : p_;
    srcnic_config_t c;
    srcnic_config_init(&c);
    c.pd = pd_;   // one domain for all (nothing is registered): one descriptor, not one each
    c.window = o_.window;
    c.rto_us = o_.rto_us;
    c.rto_max_us = std::max<uint32_t>(2000000, o_.rto_us);
    c.retry_count = 1000;
    c.peer_timeout_ms = static_cast<uint32_t>(std::min(3600000.0, o_.watchdog_s * 1000 * 4));
    c.max_inflight = std::max<uint32_t>(64, 2 * per_engine * o_.sq);
    c.rx_buffers = window_for(c, o_.mtu - static_cast<uint32_t>(sizeof(PacketHeader))) + 64;
    if (mode_ == Mode::kAgentDc) {
        c.max_connections = o_.budget;
        c.num_dci = o_.num_dci;
        c.dc_targets = o_.dc_targets;
    } else {
        c.max_connections = static_cast<uint32_t>(std::min<size_t>(kMaxConnections, num_engines));
        c.num_dci = 0;
        c.dc_targets = 0;
    }
    srcnic_qp_config_t qc;
    qc.sq_size = o_.sq;
    qc.rq_size = o_.rq;
    inline_ = o_.msg <= SRCNIC_WQE_INLINE_MAX;

    engines_.resize(num_engines);
    procs_.resize(num_procs);
    rbufs_.assign(num_procs * o_.rq * o_.msg, 0);
    if (!inline_) {
        sbufs_.assign(num_procs * o_.sq * o_.msg, 0);
        sfree_.resize(num_procs * o_.sq);
        sfree_n_.assign(num_procs, static_cast<uint16_t>(o_.sq));
        for (size_t i = 0; i < sfree_.size(); ++i) {
            sfree_[i] = static_cast<uint16_t>(i % o_.sq);
        }
    }
    for (size_t e = 0; e < num_engines; ++e) {
        std::unique_ptr<Link> link;
        if (fabric_->open_link(&link) != SRCNIC_OK) {
            return false;
        }
        if (o_.loss > 0) {
            FaultyLinkConfig fc;
            fc.tx.drop = o_.loss / 100.0;
            fc.seed = mix(o_.seed ^ (0x5ca1e000ULL + e));
            fc.max_held = 64;   // a transmit batch (32) passes whole
            std::unique_ptr<FaultyLink> faulty;
            if (FaultyLink::open(std::move(link), fc, &faulty) != SRCNIC_OK) {
                return false;
            }
            engines_[e].faulty = faulty.get();
            link = std::move(faulty);
        }
        Engine &eng = engines_[e];
        if (Nic::create(c, std::move(link), &eng.nic) != SRCNIC_OK) {
            std::fprintf(stderr, "scale_sim: engine %zu\n", e);
            return false;
        }
        eng.first_proc = static_cast<uint32_t>(e * per_engine);
        eng.num_procs = per_engine;
        for (uint32_t i = 0; i < per_engine; ++i) {
            const uint32_t s = eng.first_proc + i;
            Proc &pr = procs_[s];
            pr.engine = static_cast<uint32_t>(e);
            if (eng.nic->qp_create(qc, &pr.qp) != SRCNIC_OK) {
                std::fprintf(stderr, "scale_sim: QP of process %u\n", s);
                return false;
            }
            for (uint32_t k = 0; k < o_.rq; ++k) {
                srcnic_recv_wqe_t r = {};
                r.wr_id = k;
                r.addr = reinterpret_cast<uint64_t>(&rbufs_[(static_cast<size_t>(s) * o_.rq + k) * o_.msg]);
                r.length = o_.msg;
                if (pr.qp->post_recv(r) != SRCNIC_OK) {
                    return false;
                }
            }
        }
    }
    choose_destinations();
    for (uint32_t s = 0; s < num_procs; ++s) {
        Nic *nic = engines_[procs_[s].engine].nic.get();
        for (uint64_t k = pair_off_[s]; k < pair_off_[s + 1]; ++k) {
            const Proc &d = procs_[pair_dst_[k]];
            const srcnic_status_t st = nic->dest_create(engines_[d.engine].nic->addr(), d.qp->qpn(), &pair_dest_[k]);
            if (st != SRCNIC_OK) {
                std::fprintf(stderr, "scale_sim: dest_create from process %u: %s\n", s, srcnic_status_string(st));
                return false;
            }
        }
        procs_[s].total = (pair_off_[s + 1] - pair_off_[s]) * o_.rounds;
        expected_ += procs_[s].total;
    }
    return true;
}

void Sim::choose_destinations()
{
    const size_t num_procs = procs_.size();
    const bool all = o_.dests == "all" || (o_.dests == "auto" && num_procs <= kAutoAllMax);
    dest_kind_ = all ? "all" : "nodes";
    pair_off_.assign(num_procs + 1, 0);
    pair_dst_.clear();
    for (uint32_t s = 0; s < num_procs; ++s) {
        pair_off_[s] = pair_dst_.size();
        if (all) {
            for (uint32_t d = 0; d < num_procs; ++d) {
                if (d != s) {
                    pair_dst_.push_back(d);
                }
            }
            continue;
        }
        const unsigned node = s / p_, p = s % p_;
        for (unsigned j = 0; p + static_cast<uint64_t>(p_) * j < n_ - 1; ++j) {
            if (o_.dests_per_proc != 0 && j >= o_.dests_per_proc) {
                break;
            }
            const unsigned m = static_cast<unsigned>((node + 1 + p + static_cast<uint64_t>(p_) * j) % n_);
            const unsigned q = static_cast<unsigned>(mix(o_.seed ^ (static_cast<uint64_t>(node) << 32 | m)) % p_);
            pair_dst_.push_back(m * p_ + q);
        }
    }
    pair_off_[num_procs] = pair_dst_.size();
    covered_ = all || o_.dests_per_proc == 0 || static_cast<uint64_t>(o_.dests_per_proc) * p_ >= n_ - 1;
    pair_dest_.resize(pair_dst_.size());
    sent_.assign(pair_dst_.size(), 0);
    next_.assign(pair_dst_.size(), 0);
}

void Sim::on_recv(uint32_t r, const srcnic_cqe_t &c)
{
    const uint8_t *buf = &rbufs_[(static_cast<size_t>(r) * o_.rq + c.wr_id) * o_.msg];
    Stamp st;
    std::memcpy(&st, buf, sizeof(st));
    bool ok = c.byte_len == o_.msg && st.check == stamp_check(st.pair, st.seq, st.src) &&
              st.src < procs_.size() && st.pair >= pair_off_[st.src] && st.pair < pair_off_[st.src + 1] &&
              pair_dst_[st.pair] == r && c.src_qpn == procs_[st.src].qp->qpn();
    for (size_t i = sizeof(Stamp); ok && i < o_.msg; ++i) {
        ok = buf[i] == pattern_byte(st.pair, st.seq, i);
    }
    if (!ok) {
        if (err_.corrupt++ < 5) {
            std::fprintf(stderr, "scale_sim: process %u: a corrupt or misdirected message (%u bytes, pair %u seq %u)\n",
                         r, c.byte_len, st.pair, st.seq);
        }
    } else if (st.seq == next_[st.pair]) {
        ++next_[st.pair];
    } else if (st.seq < next_[st.pair]) {
        if (err_.duplicate++ < 5) {
            std::fprintf(stderr, "scale_sim: pair %u (%u -> %u): seq %u again (expected %u)\n",
                         st.pair, st.src, r, st.seq, next_[st.pair]);
        }
    } else {
        if (err_.gap++ < 5) {
            std::fprintf(stderr, "scale_sim: pair %u (%u -> %u): seq %u before %u (lost or reordered)\n",
                         st.pair, st.src, r, st.seq, next_[st.pair]);
        }
        next_[st.pair] = st.seq + 1;
    }
    srcnic_recv_wqe_t w = {};
    w.wr_id = c.wr_id;
    w.addr = reinterpret_cast<uint64_t>(buf);
    w.length = o_.msg;
    if (procs_[r].qp->post_recv(w) != SRCNIC_OK) {
        ++err_.status;
    }
}

void Sim::service(uint32_t s)
{
    Proc &pr = procs_[s];
    srcnic_cqe_t cqes[16];
    unsigned got;
    while ((got = pr.qp->poll_cq(cqes, 16)) != 0) {
        for (unsigned i = 0; i < got; ++i) {
            const srcnic_cqe_t &c = cqes[i];
            if (c.status != SRCNIC_OK && err_.status++ < 5) {
                std::fprintf(stderr, "scale_sim: process %u: a %s completion: %s\n", s,
                             c.opcode == SRCNIC_OP_RECV ? "receive" : "send",
                             srcnic_status_string(static_cast<srcnic_status_t>(c.status)));
            }
            if (c.opcode == SRCNIC_OP_RECV) {
                ++received_;
                if (c.status == SRCNIC_OK) {
                    on_recv(s, c);
                }
            } else {
                ++pr.completed;
                ++completed_;
                --pr.outstanding;
                if (!inline_) {
                    sfree_[static_cast<size_t>(s) * o_.sq + sfree_n_[s]++] = static_cast<uint16_t>(c.wr_id);
                }
            }
        }
    }
    const uint64_t ndest = pair_off_[s + 1] - pair_off_[s];
    while (pr.posted < pr.total && pr.outstanding < o_.sq) {
        const uint64_t k = pair_off_[s] + pr.posted % ndest;
        const uint32_t seq = sent_[k];
        srcnic_wqe_t w = {};
        w.opcode = SRCNIC_OP_SEND;
        w.dest = pair_dest_[k];
        uint8_t *p;
        if (inline_) {
            w.flags = SRCNIC_WQE_FLAG_INLINE;
            w.inline_len = o_.msg;
            p = w.u.inline_data;
        } else {
            const uint16_t slot = sfree_[static_cast<size_t>(s) * o_.sq + --sfree_n_[s]];
            w.wr_id = slot;
            p = &sbufs_[(static_cast<size_t>(s) * o_.sq + slot) * o_.msg];
            w.num_sge = 1;
            w.u.sge[0].addr = reinterpret_cast<uint64_t>(p);
            w.u.sge[0].length = o_.msg;
        }
        const Stamp st = {static_cast<uint32_t>(k), seq, s, stamp_check(static_cast<uint32_t>(k), seq, s)};
        std::memcpy(p, &st, sizeof(st));
        for (size_t i = sizeof(Stamp); i < o_.msg; ++i) {
            p[i] = pattern_byte(static_cast<uint32_t>(k), seq, i);
        }
        if (pr.qp->post_send(w) != SRCNIC_OK) {
            if (!inline_) {
                ++sfree_n_[s];
            }
            break;
        }
        ++sent_[k];
        ++pr.posted;
        ++pr.outstanding;
    }
}

void Sim::report_stall() const
{
    uint64_t pending_pairs = 0, first = UINT64_MAX;
    for (uint64_t k = 0; k < next_.size(); ++k) {
        if (next_[k] < o_.rounds) {
            ++pending_pairs;
            first = std::min(first, k);
        }
    }
    std::fprintf(stderr, "scale_sim: stalled: %" PRIu64 " of %" PRIu64 " received, %" PRIu64
                 " of %" PRIu64 " sends completed, %" PRIu64 " pairs incomplete",
                 received_, expected_, completed_, expected_, pending_pairs);
    if (first != UINT64_MAX) {
        const uint32_t src = static_cast<uint32_t>(
            std::upper_bound(pair_off_.begin(), pair_off_.end(), first) - pair_off_.begin() - 1);
        std::fprintf(stderr, " (first: %u -> %u, %u of %u delivered, %u sent)", src,
                     pair_dst_[first], next_[first], o_.rounds, sent_[first]);
    }
    std::fprintf(stderr, "\n");
}

void Sim::account(Run *out) const
{
    uint64_t conns = 0, conn_bytes = 0;
    double nic_max = 0;
    QpRingLayout layout;
    qp_layout(o_.sq, o_.rq, false, &layout);
    const uint32_t per_engine = static_cast<uint32_t>(procs_.size() / engines_.size());
    srcnic_config_t c;
    srcnic_config_init(&c);
    c.window = o_.window;
    const uint32_t rx_buffers = window_for(c, o_.mtu - static_cast<uint32_t>(sizeof(PacketHeader))) + 64;
    std::vector<double> node_nic(n_, 0);
    for (size_t e = 0; e < engines_.size(); ++e) {
        const Nic &nic = *engines_[e].nic;
        const Nic::StateBytes b = nic.state_bytes();
        out->connections += b.connections;
        out->peer_nics += b.peer_nics;
        out->dcis += b.dcis;
        out->dc_targets += b.dc_targets;
        out->closed += b.closed;
        out->qps += b.qps;
        out->active += b.active;
        out->remotes += b.remotes;
        node_nic[engines_[e].first_proc / p_] +=
            static_cast<double>(b.connections + b.peer_nics + b.dcis + b.dc_targets + b.active + b.closed + b.qps);
        conns += nic.num_connections();
        conn_bytes += b.connections;
        out->retransmits += nic.counter(SRCNIC_CNT_RETRANSMITS);
        out->rnr += nic.counter(SRCNIC_CNT_RNR_RECEIVED);
        out->dc_fallbacks += nic.counter(SRCNIC_CNT_DC_FALLBACKS);
        out->dc_streams += nic.counter(SRCNIC_CNT_DC_STREAMS);
        out->dc_busy += nic.counter(SRCNIC_CNT_DC_BUSY_RECEIVED);
        out->promoted += nic.counter(SRCNIC_CNT_DC_PROMOTED);
        // Host memory, as configured: QP rings, the processes' receive buffers, the engine's
        // packet buffers (reserved) and message descriptors, the in-memory link's receive
        // queue (a socket buffer's part), the engine object (its transmit batch).
        out->rings += static_cast<double>(layout.bytes) * per_engine;
        out->app_bufs += static_cast<double>(o_.rq) * o_.msg * per_engine;
        out->pkt_bufs += static_cast<double>(rx_buffers) * o_.mtu;
        out->msg_descs += static_cast<double>(std::max<uint32_t>(64, 2 * per_engine * o_.sq)) * sizeof(TxMsg);
        out->link_queue += static_cast<double>(o_.depth) * o_.mtu;
        out->engine_obj += sizeof(Nic);
    }
    for (double v : node_nic) {
        nic_max = std::max(nic_max, v);
    }
    for (double *v : {&out->connections, &out->peer_nics, &out->dcis, &out->dc_targets, &out->active, &out->closed, &out->qps,
                      &out->remotes, &out->rings, &out->app_bufs, &out->pkt_bufs, &out->msg_descs,
                      &out->link_queue, &out->engine_obj}) {
        *v /= n_;
    }
    out->conns = static_cast<double>(conns) / n_;
    out->nic_max = nic_max;
    out->per_conn = conns != 0 ? static_cast<double>(conn_bytes) / conns : 0;
    out->conns_total = conns;
    out->conn_bytes_total = conn_bytes;
    const LoopbackFabricStats fs = fabric_->stats();
    out->fabric_full = fs.dropped_queue_full;
}

void Sim::settle(Run *out)
{
    // At least the quiet time, and enough passes for each engine to look at each of its DCIs
    // (one a progress call) and to take what the others sent.
    const uint64_t end = now_ns_() + 3 * kDcMinQuietNs;
    for (unsigned pass = 0; pass < 2 * 32 + 2 || now_ns_() < end; ++pass) {
        for (Engine &e : engines_) {
            e.nic->progress();
        }
    }
    double nic = 0, closed = 0;
    for (const Engine &e : engines_) {
        const Nic::StateBytes b = e.nic->state_bytes();
        nic += static_cast<double>(b.connections + b.peer_nics + b.dcis + b.dc_targets + b.active + b.closed + b.qps);
        closed += static_cast<double>(b.closed);
    }
    out->nic_settled = nic / n_;
    out->closed_settled = closed / n_;
}

bool Sim::run(Run *out)
{
    out->mode = mode_;
    out->n = n_;
    out->p = p_;
    const uint64_t t0 = now_ns_();
    if (!build()) {
        return false;
    }
    out->engines = engines_.size();
    out->procs = procs_.size();
    out->dest_kind = dest_kind_;
    out->covered = covered_;
    out->pairs = pair_dst_.size();
    out->messages = expected_;
    const uint64_t t1 = now_ns_();
    out->setup_s = (t1 - t0) / 1e9;
    std::fprintf(stderr, "scale_sim: %s N=%u P=%u: %zu engines, %zu processes, %" PRIu64
                 " pairs (%s), %" PRIu64 " messages; set up in %.1f s\n",
                 mode_name(mode_), n_, p_, engines_.size(), procs_.size(), out->pairs,
                 dest_kind_.c_str(), expected_, out->setup_s);
    uint64_t watch = now_ns_(), last_report = watch;
    uint64_t seen = 0;
    const uint64_t watchdog_ns = static_cast<uint64_t>(o_.watchdog_s * 1e9);
    while (received_ < expected_ || completed_ < expected_) {
        for (Engine &e : engines_) {
            // A burst of receives is at most 32 datagrams: a busy engine gets a few calls.
            for (int k = 0; k < 8 && e.nic->progress() >= 32; ++k) {
            }
            for (uint32_t i = 0; i < e.num_procs; ++i) {
                service(e.first_proc + i);
            }
        }
        const uint64_t now = now_ns_();
        if (received_ + completed_ != seen) {
            seen = received_ + completed_;
            watch = now;
        } else if (now - watch > watchdog_ns) {
            report_stall();
            out->err = err_;
            return false;
        }
        if (now - last_report > g_report_ns) {
            last_report = now;
            std::fprintf(stderr, "scale_sim: %.0f s: %" PRIu64 " of %" PRIu64 " delivered\n",
                         (now - t1) / 1e9, received_, expected_);
        }
    }
    const uint64_t t2 = now_ns_();
    out->traffic_s = (t2 - t1) / 1e9;
    out->rate = expected_ / out->traffic_s;
    for (uint64_t k = 0; k < next_.size(); ++k) {
        if (next_[k] != o_.rounds) {
            err_.lost += next_[k] < o_.rounds ? o_.rounds - next_[k] : 0;
        }
    }
    out->err = err_;
    account(out);
    settle(out);
    out->rss = proc_status_kb("VmRSS:") * 1024;
    out->hwm = proc_status_kb("VmHWM:") * 1024;
    out->rss_node = static_cast<double>(out->rss) / n_;
    for (const Engine &e : engines_) {
        if (e.faulty != nullptr) {
            out->dropped += e.faulty->fault_stats().tx.dropped;
        }
    }
    return err_.total() == 0;
}

// --- output ---

// One line per figure: name, bytes per node, and what it counts. A new field of StateBytes is one
// line here.
struct Column {
    const char *name;
    double Run::*field;
    const char *what;
};
const Column kNicColumns[] = {
    {"connections", &Run::connections, "open connections: their contexts"},
    {"dcis", &Run::dcis, "attached DC initiators: the same"},
    {"dc_targets", &Run::dc_targets, "DC target contexts: the same"},
    {"peer_nics", &Run::peer_nics, "remote NICs the connections name, an entry each (DC contexts: their own)"},
    {"active", &Run::active, "active halves (in-flight and reorder state), held or pooled"},
    {"closed", &Run::closed, "closed-table and refused-connection entries"},
    {"qps", &Run::qps, "QP contexts (not their rings)"},
};
const Column kApartColumns[] = {
    {"addr_handles", &Run::remotes, "remote NICs destinations name (host memory on a NIC)"},
};
const Column kHostColumns[] = {
    {"rings", &Run::rings, "QP WQE/CQE rings"},
    {"app_bufs", &Run::app_bufs, "receive buffers the processes posted"},
    {"pkt_bufs", &Run::pkt_bufs, "engine packet buffers (reserved, resident as used)"},
    {"msg_descs", &Run::msg_descs, "engine message descriptors"},
    {"link_queue", &Run::link_queue, "in-memory link receive queue (a socket buffer)"},
    {"engine_obj", &Run::engine_obj, "engine object (its transmit batch)"},
};

double mb(double bytes)
{
    return bytes / kMiB;
}

void print_run(const Run &r, const Options &o, const PaperConstants &k)
{
    const PaperFigures pf = paper_for(k, r.n, r.p);
    std::printf("\n== %s: N=%u nodes x P=%u processes: %zu engines, %zu QPs (%zu per engine)\n",
                mode_name(r.mode), r.n, r.p, r.engines, r.procs, r.procs / r.engines);
    if (r.dest_kind == "all") {
        std::printf("destinations: all-to-all, every process to every other (%zu each)\n", r.procs - 1);
    } else {
        std::printf("destinations: sampled, node-covering: each node's processes together send to "
                    "%s other node%s once each, to a process drawn from the seed (%" PRIu64
                    " pairs, not %zu)\n",
                    o.dests_per_proc == 0 ? "every" : "a sample of the",
                    o.dests_per_proc == 0 ? "" : "s", r.pairs, r.procs * (r.procs - 1));
    }
    std::printf("traffic: %u rounds x %" PRIu64 " pairs = %" PRIu64 " messages of %u B, loss %.2f %% "
                "(seed %" PRIu64 "); set up %.2f s, traffic %.2f s, %.0f msg/s (%.0f per engine)\n",
                o.rounds, r.pairs, r.messages, o.msg, o.loss, o.seed, r.setup_s, r.traffic_s,
                r.rate, r.rate / r.engines);
    std::printf("delivery: %s (%" PRIu64 " lost, %" PRIu64 " duplicated, %" PRIu64
                " out of order, %" PRIu64 " corrupt, %" PRIu64 " failed completions); datagrams "
                "dropped: %" PRIu64 " by the loss, %" PRIu64 " at full link queues; %" PRIu64
                " retransmits, %" PRIu64 " RNR\n",
                r.err.total() == 0 ? "every message exactly once" : "ERRORS", r.err.lost,
                r.err.duplicate, r.err.gap, r.err.corrupt, r.err.status, r.dropped, r.fabric_full,
                r.retransmits, r.rnr);
    if (r.mode == Mode::kAgentDc) {
        std::printf("dc: %" PRIu64 " fallbacks, %" PRIu64 " streams, %" PRIu64 " busy, %" PRIu64
                    " promoted\n", r.dc_fallbacks, r.dc_streams, r.dc_busy, r.promoted);
    }
    std::printf("per node (mean of %u; bytes):  open connections %.1f, %.0f B each\n", r.n, r.conns,
                r.per_conn);
    for (const Column &c : kNicColumns) {
        std::printf("  %-13s %12.0f   %s\n", c.name, r.*c.field, c.what);
    }
    std::printf("  %-13s %12.0f   = %.4f MB (largest node %.4f MB)\n", "NIC state", r.nic(),
                mb(r.nic()), mb(r.nic_max));
    std::printf("  %-13s %12.0f   = %.4f MB, closed %.0f: after %.0f ms more of progress, the DC "
                "streams that ended closed\n", "settled", r.nic_settled, mb(r.nic_settled),
                r.closed_settled, 3 * kDcMinQuietNs / 1e6);
    std::printf("  %-13s %12.0f   = %.4f MB, %s\n", "all-to-all", r.a2a(), mb(r.a2a()),
                !r.a2a_measured() ? "projected: measured bytes per connection x the connections it needs"
                : r.mode == Mode::kAgentDc && !r.covered ? "as measured (bounded by the budget and the DC pools; this sample reached fewer nodes)"
                : "as measured");
    for (const Column &c : kApartColumns) {
        std::printf("  %-13s %12.0f   %s\n", c.name, r.*c.field, c.what);
    }
    std::printf("  host memory (not NIC state):");
    for (const Column &c : kHostColumns) {
        std::printf(" %s %.0f", c.name, r.*c.field);
    }
    std::printf(" = %.3f MB; resident %.1f MB per node (%.0f MB in all, peak %.0f MB)\n",
                mb(r.host()), mb(r.rss_node), mb(r.rss), mb(r.hwm));
    std::printf("paper, per node, N=%u P=%u (%s): RC %.3f MB  XRC %.3f MB  DCT %.3f MB  SRC %.3f MB\n",
                r.n, r.p, pf.from_table ? "its table" : "its constants", mb(pf.rc), mb(pf.xrc),
                mb(pf.dct), mb(pf.src));
}

void print_formula(const PaperConstants &k)
{
    std::printf("paper's per-node state (MB = 2^20 B; constants from its table, see perf/README.md):\n"
                "  RC  = P*P*(N-1) x %.1f B   XRC = P*(N-1) x %.1f B   DCT = %.0f B\n"
                "  SRC = (N-1) x %.1f B + P x %.1f B\n",
                k.rc_qp, k.rc_qp, k.dct, k.src_remote, k.src_proc);
}

void print_summary(const std::vector<Run> &runs, const PaperConstants &k)
{
    std::printf("\n%-9s %6s %4s %7s %8s %7s %10s %11s %10s %9s %9s %9s %9s %9s %9s %9s %9s %7s\n", "mode",
                "N", "P", "engines", "conns/nd", "B/conn", "nic_MB/nd", "a2a_MB/nd", "addr_MB/nd",
                "host_MB/nd", "msg/s", "msg/s/eng", "paper_RC", "XRC", "DCT", "SRC", "traffic_s",
                "errors");
    for (const Run &r : runs) {
        const PaperFigures pf = paper_for(k, r.n, r.p);
        std::printf("%-9s %6u %4u %7zu %8.1f %7.0f %10.4f %10.4f%c %10.4f %9.3f %9.0f %9.0f %9.3f %9.3f %9.3f "
                    "%9.3f %9.1f %7" PRIu64 "\n",
                    mode_name(r.mode), r.n, r.p, r.engines, r.conns, r.per_conn, mb(r.nic()),
                    mb(r.a2a()), r.a2a_measured() ? ' ' : '*',
                    mb(r.remotes), mb(r.host()), r.rate, r.rate / r.engines, mb(pf.rc), mb(pf.xrc),
                    mb(pf.dct), mb(pf.src), r.traffic_s, r.err.total());
    }
    std::printf("(a2a: * projected from the measured bytes per connection, see above; paper columns in MB of 2^20 B)\n");
}

bool write_json(const std::string &path, const std::vector<Run> &runs, const Options &o,
                const PaperConstants &k)
{
    FILE *f = std::fopen(path.c_str(), "w");
    if (f == nullptr) {
        std::fprintf(stderr, "scale_sim: cannot write %s\n", path.c_str());
        return false;
    }
    std::fprintf(f, "{\n  \"seed\": %" PRIu64 ", \"rounds\": %u, \"msg_bytes\": %u, \"loss_pct\": %.3f,"
                 " \"window\": %u, \"mtu\": %u, \"sq\": %u, \"rq\": %u, \"budget\": %u,\n",
                 o.seed, o.rounds, o.msg, o.loss, o.window, o.mtu, o.sq, o.rq, o.budget);
    std::fprintf(f, "  \"paper_constants\": {\"rc_qp_bytes\": %.1f, \"src_remote_bytes\": %.1f, "
                 "\"src_proc_bytes\": %.1f, \"dct_bytes\": %.0f},\n  \"runs\": [",
                 k.rc_qp, k.src_remote, k.src_proc, k.dct);
    for (size_t i = 0; i < runs.size(); ++i) {
        const Run &r = runs[i];
        const PaperFigures pf = paper_for(k, r.n, r.p);
        std::fprintf(f, "%s\n    {\"mode\": \"%s\", \"nodes\": %u, \"procs\": %u, \"engines\": %zu, "
                     "\"qps\": %zu, \"destinations\": \"%s\", \"pairs\": %" PRIu64 ", \"messages\": %" PRIu64 ",\n"
                     "     \"setup_s\": %.3f, \"traffic_s\": %.3f, \"msg_per_s\": %.0f, \"msg_per_s_per_engine\": %.1f,\n"
                     "     \"errors\": {\"lost\": %" PRIu64 ", \"duplicate\": %" PRIu64 ", \"out_of_order\": %" PRIu64
                     ", \"corrupt\": %" PRIu64 ", \"status\": %" PRIu64 "},\n"
                     "     \"loss_drops\": %" PRIu64 ", \"retransmits\": %" PRIu64 ", \"rnr\": %" PRIu64 ", \"link_queue_drops\": %" PRIu64
                     ", \"dc_fallbacks\": %" PRIu64 ", \"dc_streams\": %" PRIu64 ",\n"
                     "     \"num_connections\": %" PRIu64 ", \"connection_bytes\": %" PRIu64 ",\n"
                     "     \"per_node\": {\"conns\": %.4f, \"bytes_per_conn\": %.4f",
                     i == 0 ? "" : ",", mode_name(r.mode), r.n, r.p, r.engines, r.procs, r.dest_kind.c_str(),
                     r.pairs, r.messages, r.setup_s, r.traffic_s, r.rate, r.rate / r.engines,
                     r.err.lost, r.err.duplicate, r.err.gap, r.err.corrupt, r.err.status,
                     r.dropped, r.retransmits, r.rnr, r.fabric_full, r.dc_fallbacks, r.dc_streams,
                     r.conns_total, r.conn_bytes_total, r.conns, r.per_conn);
        for (const Column &c : kNicColumns) {
            std::fprintf(f, ", \"%s\": %.1f", c.name, r.*c.field);
        }
        std::fprintf(f, ", \"nic\": %.1f, \"nic_largest_node\": %.1f, \"nic_all_to_all\": %.1f, "
                     "\"all_to_all_measured\": %s, \"nic_settled\": %.1f, \"closed_settled\": %.1f",
                     r.nic(), r.nic_max, r.a2a(), r.a2a_measured() ? "true" : "false", r.nic_settled,
                     r.closed_settled);
        for (const Column &c : kApartColumns) {
            std::fprintf(f, ", \"%s\": %.1f", c.name, r.*c.field);
        }
        for (const Column &c : kHostColumns) {
            std::fprintf(f, ", \"%s\": %.1f", c.name, r.*c.field);
        }
        std::fprintf(f, ", \"host\": %.1f, \"rss\": %.1f},\n     \"rss_bytes\": %" PRIu64 ", \"peak_rss_bytes\": %" PRIu64
                     ",\n     \"paper_per_node\": {\"rc\": %.1f, \"xrc\": %.1f, \"dct\": %.1f, \"src\": %.1f, \"from_table\": %s}}",
                     r.host(), r.rss_node, r.rss, r.hwm, pf.rc, pf.xrc, pf.dct, pf.src, pf.from_table ? "true" : "false");
    }
    std::fprintf(f, "\n  ]\n}\n");
    std::fclose(f);
    return true;
}

// --- arguments ---

[[noreturn]] void usage()
{
    std::fprintf(stderr,
                 "usage: scale_sim [--nodes N[,N...]] [--procs P] [--mode embedded|agent|agent-dc[,...]]\n"
                 "                 [--rounds R] [--msg BYTES] [--loss PCT] [--seed S] [--budget B]\n"
                 "                 [--dests all|nodes|auto] [--dests-per-proc K] [--sq N] [--rq N]\n"
                 "                 [--window W] [--mtu BYTES] [--depth N] [--rto-us US] [--dci N]\n"
                 "                 [--dc-targets N] [--watchdog S] [--json FILE]\n");
    std::exit(2);
}

unsigned long num(const char *s)
{
    char *end;
    const unsigned long v = std::strtoul(s, &end, 10);
    if (end == s || *end != '\0') {
        std::fprintf(stderr, "scale_sim: bad number '%s'\n", s);
        usage();
    }
    return v;
}

template <class T, class F> std::vector<T> list(const char *s, F parse)
{
    std::vector<T> v;
    std::string all(s);
    for (size_t at = 0; at <= all.size();) {
        const size_t comma = std::min(all.find(',', at), all.size());
        v.push_back(parse(all.substr(at, comma - at)));
        at = comma + 1;
    }
    return v;
}

Options parse(int argc, char **argv)
{
    Options o;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        if (i + 1 >= argc) {
            usage();
        }
        const char *v = argv[++i];
        if (!std::strcmp(a, "--nodes")) {
            o.nodes = list<unsigned>(v, [](const std::string &s) { return static_cast<unsigned>(num(s.c_str())); });
        } else if (!std::strcmp(a, "--procs")) {
            o.procs = static_cast<unsigned>(num(v));
        } else if (!std::strcmp(a, "--mode")) {
            o.modes = list<Mode>(v, [](const std::string &s) {
                if (s == "embedded") return Mode::kEmbedded;
                if (s == "agent") return Mode::kAgent;
                if (s == "agent-dc") return Mode::kAgentDc;
                std::fprintf(stderr, "scale_sim: unknown mode '%s'\n", s.c_str());
                usage();
            });
        } else if (!std::strcmp(a, "--rounds")) {
            o.rounds = static_cast<unsigned>(num(v));
        } else if (!std::strcmp(a, "--msg")) {
            o.msg = static_cast<uint32_t>(num(v));
        } else if (!std::strcmp(a, "--loss")) {
            o.loss = std::strtod(v, nullptr);
        } else if (!std::strcmp(a, "--seed")) {
            o.seed = std::strtoull(v, nullptr, 10);
        } else if (!std::strcmp(a, "--budget")) {
            o.budget = static_cast<uint32_t>(num(v));
        } else if (!std::strcmp(a, "--dests")) {
            o.dests = v;
        } else if (!std::strcmp(a, "--dests-per-proc")) {
            o.dests_per_proc = static_cast<unsigned>(num(v));
        } else if (!std::strcmp(a, "--sq")) {
            o.sq = static_cast<uint32_t>(num(v));
        } else if (!std::strcmp(a, "--rq")) {
            o.rq = static_cast<uint32_t>(num(v));
        } else if (!std::strcmp(a, "--window")) {
            o.window = static_cast<uint32_t>(num(v));
        } else if (!std::strcmp(a, "--mtu")) {
            o.mtu = static_cast<uint32_t>(num(v));
        } else if (!std::strcmp(a, "--depth")) {
            o.depth = static_cast<uint32_t>(num(v));
        } else if (!std::strcmp(a, "--rto-us")) {
            o.rto_us = static_cast<uint32_t>(num(v));
        } else if (!std::strcmp(a, "--dci")) {
            o.num_dci = static_cast<uint32_t>(num(v));
        } else if (!std::strcmp(a, "--dc-targets")) {
            o.dc_targets = static_cast<uint32_t>(num(v));
        } else if (!std::strcmp(a, "--watchdog")) {
            o.watchdog_s = std::strtod(v, nullptr);
        } else if (!std::strcmp(a, "--json")) {
            o.json = v;
        } else {
            usage();
        }
    }
    if (o.procs == 0 || o.rounds == 0 || o.msg < sizeof(Stamp) || o.loss < 0 || o.loss >= 100 ||
        o.watchdog_s <= 0 || (o.dests != "all" && o.dests != "nodes" && o.dests != "auto") ||
        o.sq > 65535 || std::find(o.nodes.begin(), o.nodes.end(), 0u) != o.nodes.end()) {
        std::fprintf(stderr, "scale_sim: bad options (P and rounds >= 1, msg >= %zu, loss in [0,100), N >= 1)\n",
                     sizeof(Stamp));
        usage();
    }
    if (o.seed == 0) {
        o.seed = now_ns_() % 1000000007ull;
    }
    return o;
}

} // namespace

int main(int argc, char **argv)
{
    const Options o = parse(argc, argv);
    // Engines hold no descriptor until waited on and share one protection domain; the soft
    // limit is raised anyway, for the odd large bed.
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (const char *e = std::getenv("SCALE_SIM_REPORT_MS")) {
        g_report_ns = std::strtoull(e, nullptr, 10) * 1000000ull;
    }
    if (std::getenv("SRCNIC_LOG_LEVEL") == nullptr) {
        srcnic_log_set_level(SRCNIC_LOG_LEVEL_ERROR);
    }
    const PaperConstants k = paper_constants();
    std::printf("scale_sim: seed %" PRIu64 " (replay with --seed %" PRIu64 ")\n", o.seed, o.seed);
    print_formula(k);
    std::vector<Run> runs;
    bool ok = true;
    for (Mode m : o.modes) {
        for (unsigned n : o.nodes) {
            Run r;
            bool good;
            {
                Sim sim(o, m, n);
                good = sim.run(&r);
            }
            if (r.engines == 0) {
                return 1;   // the bed could not be built (said why)
            }
            if (r.traffic_s > 0) {
                print_run(r, o, k);
                runs.push_back(r);
            }
            ok = ok && good;
            std::fflush(stdout);
            if (!good) {
                std::fprintf(stderr, "scale_sim: %s N=%u failed\n", mode_name(m), n);
            }
        }
    }
    print_summary(runs, k);
    if (!o.json.empty() && !write_json(o.json, runs, o, k)) {
        return 1;
    }
    return ok ? 0 : 1;
}
