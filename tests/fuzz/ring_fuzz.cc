// libFuzzer target for what an attached process can write into the memory it shares with the
// node agent: its QP's rings (send and receive entries, the counters it publishes) and its
// registration table, while a peer engine sends requests to its QP. The NIC under test serves
// the QP as the agent does (several owners, the owner untrusted); the "process" is a forked
// child that only sleeps, so that whatever the NIC writes into it by cross-memory attach lands
// in a process of its own, as in the agent.
//
// Input: records, each an op byte and its operand bytes (cut short at the end of the input):
//   0  send entry (176 bytes) written at the ring's next slot, counter advanced
//   1  receive entry (24 bytes), likewise
//   2  send counter set to a value (4 bytes: anything, corrupt ones included)
//   3  completion counter (consumed) set to a value (4 bytes)
//   4  registration slot (1 byte index, 32 bytes content)
//   5  the peer sends SEND, WRITE or READ to the QP (1 byte kind, 8 bytes rkey, 8 bytes
//      offset or address, 2 bytes length)
//   6  progress both NICs
// Addresses in entries are taken as given, or (half the time) made relative to the shared
// arena, so that both the direct path and cross-memory attach are reached.
#include "core/log.h"
#include "link/loopback_link.h"
#include "nic/nic.h"

#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace srcnic;

namespace {

constexpr uint32_t kMtu = 2048;
constexpr size_t kArena = 1 << 16;        // bytes the "process" shares with the NIC
constexpr uint32_t kSlots = 16;           // its registration table
constexpr unsigned kMaxRecords = 128;
constexpr uint32_t kPeerBufs = 8;

void discard_log(LogLevel, const char *, int, const char *, void *) {}

struct Client {
    pid_t pid = -1;
    int pidfd = -1;

    void start()
    {
        const pid_t parent = getpid();
        pid = fork();
        if (pid == 0) {
            // Goes with the fuzzer, however it ends.
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent) {
                _exit(0);
            }
            for (;;) {
                pause();
            }
        }
        pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    }
    bool alive() const { return pid > 0 && kill(pid, 0) == 0; }
    void stop()
    {
        if (pid > 0) {
            kill(pid, SIGKILL);
            waitpid(pid, nullptr, 0);
            close(pidfd);
        }
        pid = -1;
    }
};

struct World {
    std::shared_ptr<LoopbackFabric> fabric;
    std::unique_ptr<Nic> agent;    // serves the client's QP
    std::unique_ptr<Nic> peer;     // an engine elsewhere, with a QP of its own
    Qp *peer_qp = nullptr;
    uint8_t *arena = nullptr;      // shared with the client: same address in both
    MrSlot *slots = nullptr;       // the client's registration table
    Client client;
    std::vector<uint8_t> peer_mem = std::vector<uint8_t>(kPeerBufs * kMtu * 4);

    World()
    {
        set_log_sink(discard_log, nullptr);
        srcnic_config_t config;
        srcnic_config_init(&config);
        config.rto_us = 1000;
        config.retry_count = 4;
        if (LoopbackFabric::create(kMtu, 256, &fabric) != SRCNIC_OK) {
            std::abort();
        }
        std::unique_ptr<Link> la, lb;
        fabric->open_link(0, &la);
        fabric->open_link(0, &lb);
        if (Nic::create(config, std::move(la), &agent) != SRCNIC_OK ||
            Nic::create(config, std::move(lb), &peer) != SRCNIC_OK) {
            std::abort();
        }
        agent->serve_several_owners();
        srcnic_qp_config_t qc;
        srcnic_qp_config_init(&qc);
        qc.sq_size = qc.rq_size = 16;
        peer->qp_create(qc, &peer_qp);
        arena = static_cast<uint8_t *>(
            mmap(nullptr, kArena, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
        slots = static_cast<MrSlot *>(
            mmap(nullptr, kSlots * sizeof(MrSlot), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
        client.start();
    }
};

struct Reader {
    const uint8_t *p;
    size_t n;
    bool get(void *out, size_t len)
    {
        std::memset(out, 0, len);
        const size_t take = len < n ? len : n;
        std::memcpy(out, p, take);
        p += take;
        n -= take;
        return take != 0;
    }
    uint8_t byte()
    {
        uint8_t b = 0;
        get(&b, 1);
        return b;
    }
};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static World *w = new World();
    if (!w->client.alive()) {
        w->client.stop();
        w->client.start();
    }
    std::memset(w->arena, 0, kArena);
    std::memset(static_cast<void *>(w->slots), 0, kSlots * sizeof(MrSlot));
    const uint64_t base = reinterpret_cast<uint64_t>(w->arena);

    Owner owner;
    owner.space = AddrSpace(w->client.pid, w->client.pidfd);
    owner.space.add_window(base, kArena, w->arena);
    owner.mrs = MrView(w->slots, kSlots);
    owner.trusted = false;
    const QpRingLayout layout = QpRingLayout::make<srcnic_wqe_t, srcnic_recv_wqe_t, srcnic_cqe_t>(16, 16);
    QpContext *ctx;
    if (w->agent->qp_attach(&owner, layout, w->arena, &ctx) != SRCNIC_OK) {
        std::abort();
    }
    auto *sq = layout.at<srcnic_wqe_t>(w->arena, layout.sq_off);
    auto *rq = layout.at<srcnic_recv_wqe_t>(w->arena, layout.rq_off);
    RingIndices *sq_idx = layout.sq_idx(w->arena);
    RingIndices *rq_idx = layout.rq_idx(w->arena);
    RingIndices *cq_idx = layout.cq_idx(w->arena);

    srcnic_dest_t to_client, to_peer;
    w->peer->dest_create(w->agent->addr(), ctx->qpn(), &to_client);
    srcnic_nic_addr_t peer_addr = w->peer->addr();
    w->agent->dest_create(peer_addr, w->peer_qp->qpn(), &to_peer);
    for (uint32_t i = 0; i < kPeerBufs; ++i) {
        srcnic_recv_wqe_t r = {i, reinterpret_cast<uint64_t>(&w->peer_mem[i * kMtu]), kMtu, 0};
        w->peer_qp->post_recv(r);
    }

    Reader in{data, size};
    uint32_t sq_prod = 0, rq_prod = 0;
    auto relative = [&](uint64_t addr, bool flip) { return flip ? base + (addr % kArena) : addr; };
    for (unsigned rec = 0; rec < kMaxRecords && in.n != 0; ++rec) {
        const uint8_t op = in.byte();
        switch (op % 7) {
        case 0: {
            srcnic_wqe_t wqe;
            in.get(&wqe, sizeof(wqe));
            if (op & 0x80) {
                wqe.dest = to_peer;
            }
            for (auto &g : wqe.u.sge) {
                g.addr = relative(g.addr, op & 0x40);
            }
            sq[sq_prod & 15] = wqe;
            sq_idx->produced.store(++sq_prod, std::memory_order_release);
            break;
        }
        case 1: {
            srcnic_recv_wqe_t r;
            in.get(&r, sizeof(r));
            r.addr = relative(r.addr, op & 0x40);
            rq[rq_prod & 15] = r;
            rq_idx->produced.store(++rq_prod, std::memory_order_release);
            break;
        }
        case 2: {
            uint32_t v;
            in.get(&v, sizeof(v));
            sq_idx->produced.store(v, std::memory_order_release);
            break;
        }
        case 3: {
            uint32_t v;
            in.get(&v, sizeof(v));
            cq_idx->consumed.store(v, std::memory_order_release);
            break;
        }
        case 4: {
            const uint8_t i = in.byte() % kSlots;
            uint64_t raw[4];
            in.get(raw, sizeof(raw));
            w->slots[i].base.store(relative(raw[1], op & 0x40), std::memory_order_relaxed);
            w->slots[i].length.store(raw[2], std::memory_order_relaxed);
            w->slots[i].access.store(static_cast<uint32_t>(raw[3]), std::memory_order_relaxed);
            w->slots[i].key.store(raw[0] & 0x80 ? (raw[0] & ~uint64_t(0xfffff)) | i : raw[0],
                                  std::memory_order_release);
            break;
        }
        case 5: {
            const uint8_t kind = in.byte() % 3;
            uint64_t rkey = 0, addr = 0;
            uint16_t len = 0;
            in.get(&rkey, sizeof(rkey));
            in.get(&addr, sizeof(addr));
            in.get(&len, sizeof(len));
            len %= 3 * kMtu;
            srcnic_wqe_t wqe = {};
            wqe.wr_id = 7;
            wqe.opcode = kind == 0 ? SRCNIC_OP_SEND : kind == 1 ? SRCNIC_OP_WRITE : SRCNIC_OP_READ;
            wqe.dest = to_client;
            wqe.num_sge = 1;
            wqe.u.sge[0].addr = reinterpret_cast<uint64_t>(w->peer_mem.data());
            wqe.u.sge[0].length = len;
            wqe.remote_addr = relative(addr, op & 0x40);
            wqe.rkey = rkey & 0x80 ? (rkey & ~uint64_t(0xfffff)) | (rkey % kSlots) : rkey;
            w->peer_qp->post_send(wqe);
            break;
        }
        default:
            for (int i = 0; i < 4; ++i) {
                w->peer->progress();
                w->agent->progress();
            }
            break;
        }
    }
    for (int i = 0; i < 16; ++i) {
        w->peer->progress();
        w->agent->progress();
    }
    // Whatever the input did, the NIC ends the QP and stays usable; the peer's QP is drained.
    w->agent->qp_detach(ctx);
    w->agent->owner_release(&owner);
    srcnic_cqe_t cqe[16];
    while (w->peer_qp->poll_cq(cqe, 16) != 0) {
    }
    return 0;
}
