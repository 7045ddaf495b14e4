// The process's side of the node agent (attach.h) and its C API (srcnic_nic_attach).
#include "agent/attach.h"

#include "agent/control.h"
#include "core/clock.h"
#include "core/log.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

namespace srcnic {
namespace agent {

namespace {

// Lets the agent read and write this process's memory where Yama restricts it to ancestors
// (ptrace_scope 1): any process may then attach, as UCX's cma transport and Open MPI also
// allow; a narrower PR_SET_PTRACER(agent) would replace their setting and break theirs.
void allow_cross_memory_attach()
{
    FILE *f = std::fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
    if (f == nullptr) {
        return;   // no Yama: same-user access is allowed
    }
    int scope = 0;
    const bool ok = std::fscanf(f, "%d", &scope) == 1;
    std::fclose(f);
    if (ok && scope == 1 && prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0) != 0) {
        SRCNIC_LOG_DEBUG("prctl(PR_SET_PTRACER_ANY) failed: %m");
    }
}

} // namespace

srcnic_status_t AttachedNic::attach(const srcnic_attach_config_t &config,
                                    std::unique_ptr<AttachedNic> *nic_p, std::string *why)
{
    const std::string socket_name = config.socket[0] != '\0' ? config.socket : kDefaultSocket;
    std::unique_ptr<AttachedNic> nic(new AttachedNic());
    nic->sock_ = socket_connect(socket_name);
    if (nic->sock_ < 0) {
        *why = "no agent answers on " + socket_name + " (" + std::strerror(errno) + ")";
        return errno == ENOENT || errno == ECONNREFUSED || errno == ENAMETOOLONG
                   ? SRCNIC_ERR_NO_DEVICE
                   : SRCNIC_ERR_IO_ERROR;
    }

    // The registration table the agent checks remote accesses against.
    nic->pd_ = config.pd;
    if (nic->pd_ == nullptr) {
        srcnic_pd_t *pd;
        const srcnic_status_t status = srcnic_pd_create(&pd);
        if (status != SRCNIC_OK) {
            *why = "cannot create a protection domain";
            return status;
        }
        nic->own_pd_.reset(pd);
        nic->pd_ = pd;
    }
    if (nic->pd_->mrs->fd() < 0) {
        *why = "this process cannot share its registration table (memfd_create failed)";
        return SRCNIC_ERR_UNSUPPORTED;
    }

    // The shared segment: the header page and the arena, sealed against resizing.
    const size_t arena = config.arena != 0 ? config.arena : (64u << 20);
    nic->segment_bytes_ = kHeaderBytes + ((arena + 4095) & ~size_t(4095));
    if (nic->segment_bytes_ > kHeaderBytes + kMaxArenaBytes) {
        *why = "arena of " + std::to_string(arena) + " bytes is larger than an agent maps (4 GiB)";
        return SRCNIC_ERR_INVALID_PARAM;
    }
    const int seg_fd = memfd_create("srcnic-agent-segment", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (seg_fd < 0 || ftruncate(seg_fd, static_cast<off_t>(nic->segment_bytes_)) != 0 ||
        fcntl(seg_fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        *why = std::string("cannot create the shared segment: ") + std::strerror(errno);
        if (seg_fd >= 0) {
            close(seg_fd);
        }
        return SRCNIC_ERR_NO_MEMORY;
    }
    nic->segment_ = mmap(nullptr, nic->segment_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, seg_fd, 0);
    if (nic->segment_ == MAP_FAILED) {
        nic->segment_ = nullptr;
        *why = std::string("cannot map the shared segment: ") + std::strerror(errno);
        close(seg_fd);
        return SRCNIC_ERR_NO_MEMORY;
    }
    nic->hdr_ = new (nic->segment_) SharedHeader();
    nic->arena_next_ = kHeaderBytes;

    allow_cross_memory_attach();
    // The agent proves that it can reach this process's memory by reading this word.
    static thread_local uint64_t probe;
    probe = now_ns() ^ (static_cast<uint64_t>(getpid()) << 32) ^ reinterpret_cast<uintptr_t>(nic.get());

    AttachRequest req = {};
    req.hdr.type = static_cast<uint32_t>(MsgType::kAttach);
    req.hdr.length = sizeof(req);
    req.version = kProtoVersion;
    req.job_key = config.job_key;
    std::snprintf(req.bind_addr, sizeof(req.bind_addr), "%s",
                  config.bind_addr[0] != '\0' ? config.bind_addr : "127.0.0.1");
    req.segment_base = reinterpret_cast<uint64_t>(nic->segment_);
    req.segment_bytes = nic->segment_bytes_;
    req.mr_slots = nic->pd_->mrs->capacity();
    req.pid = static_cast<uint32_t>(getpid());
    nic->hdr_->direct_reads.store(config.direct_reads ? 1 : 0, std::memory_order_relaxed);
    req.probe_addr = reinterpret_cast<uint64_t>(&probe);
    req.probe_value = probe;
    const int fds[2] = {seg_fd, nic->pd_->mrs->fd()};
    const bool sent = send_msg(nic->sock_, &req, sizeof(req), fds, 2);
    close(seg_fd);
    if (!sent) {
        *why = std::string("the agent on ") + socket_name + " closed the connection: " + std::strerror(errno);
        return SRCNIC_ERR_IO_ERROR;
    }
    AttachReply reply = {};
    int rfds[kMaxFds];
    unsigned nfds = 0;
    const ssize_t n = recv_msg(nic->sock_, &reply, sizeof(reply), rfds, &nfds);
    if (n != static_cast<ssize_t>(sizeof(reply)) ||
        reply.hdr.type != static_cast<uint32_t>(MsgType::kAttachReply)) {
        close_fds(rfds, nfds);
        *why = "the agent on " + socket_name + " did not answer the attach request" +
               (n < 0 ? std::string(": ") + std::strerror(errno) : std::string(" (closed)"));
        return SRCNIC_ERR_IO_ERROR;
    }
    if (reply.hdr.status != SRCNIC_OK) {
        close_fds(rfds, nfds);
        reply.error[sizeof(reply.error) - 1] = '\0';
        *why = reply.error;
        return static_cast<srcnic_status_t>(reply.hdr.status);
    }
    if (nfds != 1) {
        close_fds(rfds, nfds);
        *why = "the agent's answer lacks its doorbell eventfd";
        return SRCNIC_ERR_IO_ERROR;
    }
    nic->doorbell_fd_ = rfds[0];
    nic->addr_ = reply.addr;
    nic->max_msg_ = reply.max_msg;
    nic->agent_pid_ = static_cast<pid_t>(reply.agent_pid);

    SRCNIC_LOG_DEBUG("attached to the agent on %s (pid %d) as client %u, engine incarnation %llx",
                     socket_name.c_str(), static_cast<int>(nic->agent_pid_), reply.client_id,
                     static_cast<unsigned long long>(nic->addr_.incarnation));
    *nic_p = std::move(nic);
    return SRCNIC_OK;
}

AttachedNic::~AttachedNic()
{
    for (Qp *qp : qps_) {
        delete qp;   // the agent drops its end when the socket closes
    }
    for (int fd : {sock_, doorbell_fd_}) {
        if (fd >= 0) {
            close(fd);
        }
    }
    if (segment_ != nullptr) {
        munmap(segment_, segment_bytes_);
    }
}

bool AttachedNic::call(const void *req, size_t len, MsgType reply_type, void *reply,
                       size_t reply_len) const
{
    std::lock_guard<std::mutex> guard(lock_);
    if (dead_) {
        return false;
    }
    if (send_msg(sock_, req, len)) {
        bool woken = false;
        for (;;) {
            int fds[kMaxFds];
            unsigned nfds = 0;
            const ssize_t n = recv_msg(sock_, reply, reply_len, fds, &nfds);
            close_fds(fds, nfds);
            const uint32_t type = static_cast<const MsgHeader *>(reply)->type;
            if (n == static_cast<ssize_t>(sizeof(MsgHeader)) &&
                type == static_cast<uint32_t>(MsgType::kWake)) {
                woken = true;   // sent before the reply, which follows
                continue;
            }
            if (n != static_cast<ssize_t>(reply_len) || type != static_cast<uint32_t>(reply_type)) {
                break;
            }
            if (woken) {
                // Someone may sleep on the socket for the wake-up read here: ask for it again.
                MsgHeader again = {};
                again.type = static_cast<uint32_t>(MsgType::kWakeMe);
                again.length = sizeof(again);
                if (!send_msg(sock_, &again, sizeof(again))) {
                    break;
                }
            }
            return true;
        }
    }
    die();
    return false;
}

bool AttachedNic::drain_wakes() const
{
    for (;;) {
        MsgHeader m;
        int fds[kMaxFds];
        unsigned nfds = 0;
        const ssize_t n = recv_msg(sock_, &m, sizeof(m), fds, &nfds, MSG_DONTWAIT);
        close_fds(fds, nfds);
        if (n < 0) {
            return errno == EAGAIN || errno == EWOULDBLOCK;
        }
        if (n != static_cast<ssize_t>(sizeof(m)) || m.type != static_cast<uint32_t>(MsgType::kWake)) {
            return false;   // closed (0), or a message the agent never sends unasked
        }
    }
}

void AttachedNic::die() const
{
    if (dead_) {
        return;
    }
    dead_ = true;
    SRCNIC_LOG_ERROR("the node agent (pid %d) is gone: outstanding operations fail",
                     static_cast<int>(agent_pid_));
    for (Qp *qp : qps_) {
        qp->fail_all(SRCNIC_ERR_CONNECTION_RESET);
    }
}

bool AttachedNic::check_alive()
{
    if (dead_) {
        return false;
    }
    // The agent's end closing is a hang-up. A wake-up waiting is left there: the socket is the
    // event fd, so reading it here (from UCX's background progress, say) would lose a wake-up
    // that an armed waiter sleeps on; arm() reads it.
    struct pollfd p = {sock_, POLLIN | POLLRDHUP, 0};
    if (poll(&p, 1, 0) != 0 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR)) != 0) {
        std::lock_guard<std::mutex> guard(lock_);
        die();
        return false;
    }
    return !dead_;
}

void AttachedNic::doorbell()
{
    // Pairs with the agent's fence between setting agent_sleeping and its last look at the
    // rings: either it sees the work, or this sees it asleep.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (hdr_->agent_sleeping.load(std::memory_order_relaxed) != 0) {
        const uint64_t one = 1;
        if (write(doorbell_fd_, &one, sizeof(one)) < 0 && errno != EAGAIN) {
            SRCNIC_LOG_RATELIMITED(LogLevel::kError, "agent doorbell: %m");
        }
    }
}

unsigned AttachedNic::progress()
{
    if (dead_) {
        return 0;
    }
    const uint64_t now = now_ns();
    if (now >= next_check_ns_) {
        next_check_ns_ = now + kAliveCheckNs;
        if (!check_alive()) {
            return 1;   // completions were written
        }
    }
    bool idle = true;
    for (Qp *qp : qps_) {
        if (!qp->sq_empty()) {
            doorbell();
        }
        idle &= qp->cq_empty();
    }
    // Nothing to poll: where the node's processes busy-poll every CPU (the agent says so), the
    // agent otherwise waits for a scheduler slice (milliseconds) before it can deliver what
    // they wait for, whether it is awake or just woken by a doorbell.
    if (idle && hdr_->yield_when_idle.load(std::memory_order_relaxed) != 0) {
        sched_yield();
    }
    return 0;
}

unsigned AttachedNic::transmit()
{
    if (!dead_) {
        doorbell();
    }
    return 0;
}

srcnic_status_t AttachedNic::arm()
{
    if (!check_alive()) {
        return SRCNIC_ERR_BUSY;   // completions to poll
    }
    {
        // The wake-ups of earlier arms, read before this one: a completion after it is on the
        // rings, and wakes the socket again.
        std::lock_guard<std::mutex> guard(lock_);
        if (!drain_wakes()) {
            die();
            return SRCNIC_ERR_BUSY;   // completions to poll
        }
    }
    hdr_->client_armed.store(1, std::memory_order_relaxed);
    // Pairs with the agent's fence between writing a completion and looking at client_armed.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    for (Qp *qp : qps_) {
        if (!qp->cq_empty()) {
            return SRCNIC_ERR_BUSY;
        }
        if (!qp->sq_empty()) {
            doorbell();
        }
    }
    return SRCNIC_OK;
}

uint64_t AttachedNic::arena_alloc(size_t size, size_t align)
{
    std::lock_guard<std::mutex> guard(lock_);
    size = (size + align - 1) & ~(align - 1);
    auto it = arena_free_.lower_bound(size);
    for (; it != arena_free_.end() && it->first == size; ++it) {
        if ((it->second & (align - 1)) == 0) {
            const uint64_t off = it->second;
            arena_free_.erase(it);
            return off;
        }
    }
    const uint64_t off = (arena_next_ + align - 1) & ~static_cast<uint64_t>(align - 1);
    if (off + size > segment_bytes_) {
        return 0;
    }
    arena_next_ = off + size;
    return off;
}

void AttachedNic::arena_free(uint64_t off, size_t size)
{
    std::lock_guard<std::mutex> guard(lock_);
    arena_free_.emplace((size + 63) & ~size_t(63), off);
}

void *AttachedNic::mem_alloc(size_t size)
{
    const uint64_t off = arena_alloc(size, 64);
    return off != 0 ? static_cast<uint8_t *>(segment_) + off : nullptr;
}

void AttachedNic::mem_free(void *ptr, size_t size)
{
    if (ptr != nullptr && in_arena(ptr)) {
        arena_free(static_cast<uint64_t>(static_cast<uint8_t *>(ptr) - static_cast<uint8_t *>(segment_)), size);
    }
}

srcnic_status_t AttachedNic::qp_create(const srcnic_qp_config_t &config, Qp **qp_p)
{
    QpRingLayout layout;
    const srcnic_status_t status = qp_layout(config.sq_size, config.rq_size, true, &layout);
    if (status != SRCNIC_OK) {
        return status;
    }
    const uint64_t off = arena_alloc(layout.bytes, 4096);
    if (off == 0) {
        SRCNIC_LOG_ERROR("no room for a QP's rings (%zu bytes) in the arena shared with the agent",
                         layout.bytes);
        return SRCNIC_ERR_NO_MEMORY;
    }
    void *block = static_cast<uint8_t *>(segment_) + off;
    std::memset(block, 0, layout.bytes);
    QpCreateRequest req = {};
    req.hdr.type = static_cast<uint32_t>(MsgType::kQpCreate);
    req.hdr.length = sizeof(req);
    req.sq_size = config.sq_size;
    req.rq_size = config.rq_size;
    req.ring_offset = off;
    QpCreateReply reply = {};
    if (!call(&req, sizeof(req), MsgType::kQpCreateReply, &reply, sizeof(reply))) {
        arena_free(off, layout.bytes);
        return SRCNIC_ERR_CONNECTION_RESET;
    }
    if (reply.hdr.status != SRCNIC_OK) {
        arena_free(off, layout.bytes);
        return static_cast<srcnic_status_t>(reply.hdr.status);
    }
    Qp *qp = new Qp(this, reply.qpn, layout, block, max_msg_);
    qp->keep_records();
    qps_.push_back(qp);
    *qp_p = qp;
    return SRCNIC_OK;
}

void AttachedNic::qp_destroy(Qp *qp)
{
    QpDestroyRequest req = {};
    req.hdr.type = static_cast<uint32_t>(MsgType::kQpDestroy);
    req.hdr.length = sizeof(req);
    req.qpn = qp->qpn();
    MsgHeader reply = {};
    call(&req, sizeof(req), MsgType::kQpDestroyReply, &reply, sizeof(reply));
    for (auto it = qps_.begin(); it != qps_.end(); ++it) {
        if (*it == qp) {
            qps_.erase(it);
            break;
        }
    }
    const uint64_t off = static_cast<uint64_t>(static_cast<uint8_t *>(qp->block()) - static_cast<uint8_t *>(segment_));
    const size_t bytes = qp->layout().bytes;
    delete qp;
    arena_free(off, bytes);
}

unsigned AttachedNic::qp_cancel(Qp *qp, srcnic_dest_t dest, uint32_t tag)
{
    QpCancelRequest req = {};
    req.hdr.type = static_cast<uint32_t>(MsgType::kQpCancel);
    req.hdr.length = sizeof(req);
    req.qpn = qp->qpn();
    req.tag = tag;
    req.dest = dest;
    QpCancelReply reply = {};
    if (!call(&req, sizeof(req), MsgType::kQpCancelReply, &reply, sizeof(reply))) {
        return 0;   // everything outstanding has failed instead
    }
    return reply.cancelled;
}

AttachedNic::RemoteKey AttachedNic::remote_key(const srcnic_nic_addr_t &a)
{
    std::array<uint8_t, 16> ip;
    std::memcpy(ip.data(), a.ip, ip.size());
    return RemoteKey(a.family, a.port, a.scope_id, ip, a.incarnation, a.secret);
}

srcnic_status_t AttachedNic::dest_create(const srcnic_nic_addr_t &remote, uint32_t qpn,
                                         srcnic_dest_t *dest_p)
{
    const RemoteKey key = remote_key(remote);
    // Read before asking: a failure the agent publishes after this makes the answer stale.
    const uint64_t epoch = hdr_->remote_epoch.load(std::memory_order_acquire);
    if (qpn != 0) {
        std::lock_guard<std::mutex> guard(known_lock_);
        const auto it = known_peers_.find(key);
        if (it != known_peers_.end() && it->second.epoch == epoch) {
            dest_p->peer = it->second.peer;
            dest_p->qpn = qpn;
            return SRCNIC_OK;
        }
    }
    DestCreateRequest req = {};
    req.hdr.type = static_cast<uint32_t>(MsgType::kDestCreate);
    req.hdr.length = sizeof(req);
    req.remote = remote;
    req.remote_qpn = qpn;
    DestCreateReply reply = {};
    if (!call(&req, sizeof(req), MsgType::kDestCreateReply, &reply, sizeof(reply))) {
        return SRCNIC_ERR_CONNECTION_RESET;
    }
    if (reply.hdr.status == SRCNIC_OK) {
        *dest_p = reply.dest;
        std::lock_guard<std::mutex> guard(known_lock_);
        known_peers_[key] = KnownPeer{reply.dest.peer, epoch};
    }
    return static_cast<srcnic_status_t>(reply.hdr.status);
}

srcnic_status_t AttachedNic::dest_status(srcnic_dest_t dest) const
{
    DestStatusRequest req = {};
    req.hdr.type = static_cast<uint32_t>(MsgType::kDestStatus);
    req.hdr.length = sizeof(req);
    req.dest = dest;
    MsgHeader reply = {};
    if (!call(&req, sizeof(req), MsgType::kDestStatusReply, &reply, sizeof(reply))) {
        return SRCNIC_ERR_CONNECTION_RESET;
    }
    return static_cast<srcnic_status_t>(reply.status);
}

srcnic_status_t AttachedNic::read_copy(uint32_t qpn, const srcnic_wqe_t &wqe, int err)
{
    if (hdr_->direct_reads.exchange(0, std::memory_order_relaxed) != 0) {
        SRCNIC_LOG_INFO("copying a READ from another process of the agent: %s; the agent copies "
                        "this process's READs from now on (two copies instead of one; cross-memory "
                        "attach between the job's processes needs kernel.yama.ptrace_scope 0, or 1 "
                        "with the target allowing it, and one user)",
                        std::strerror(err));
    }
    // In pieces of at most kReadCopyMax, each a round trip: the agent's other processes wait
    // while it copies one.
    ReadCopyRequest req = {};
    req.hdr.type = static_cast<uint32_t>(MsgType::kReadCopy);
    req.hdr.length = sizeof(req);
    req.qpn = qpn;
    const uint64_t length = wqe_length(wqe);
    unsigned sge = 0;
    uint64_t sge_off = 0;
    uint64_t done = 0;
    do {
        const uint64_t n = std::min<uint64_t>(kReadCopyMax, length - done);
        req.wqe = wqe;
        req.wqe.remote_addr = wqe.remote_addr + done;
        req.wqe.num_sge = 0;
        for (uint64_t put = 0; put < n;) {   // the scatter entries' bytes [done, done + n)
            const srcnic_sge_t &s = wqe.u.sge[sge];
            const uint64_t k = std::min<uint64_t>(n - put, s.length - sge_off);
            if (k != 0) {
                req.wqe.u.sge[req.wqe.num_sge++] =
                    srcnic_sge_t{s.addr + sge_off, static_cast<uint32_t>(k), 0};
            }
            put += k;
            sge_off += k;
            if (sge_off == s.length) {
                ++sge;
                sge_off = 0;
            }
        }
        MsgHeader reply = {};
        if (!call(&req, sizeof(req), MsgType::kReadCopyReply, &reply, sizeof(reply))) {
            return SRCNIC_ERR_CONNECTION_RESET;
        }
        if (reply.status != SRCNIC_OK) {
            return static_cast<srcnic_status_t>(reply.status);
        }
        done += n;
    } while (done < length);
    return SRCNIC_OK;
}

void AttachedNic::read_copied()
{
    hdr_->direct_copied.fetch_add(1, std::memory_order_release);
    doorbell();   // (if it sleeps, the agent did not count this QP's later requests as work)
}

bool AttachedNic::stats(StatsReply *reply) const
{
    MsgHeader req = {static_cast<uint32_t>(MsgType::kStats), sizeof(MsgHeader), 0, 0};
    return call(&req, sizeof(req), MsgType::kStatsReply, reply, sizeof(*reply));
}

srcnic_status_t AttachedNic::fence_memory()
{
    StatsReply reply;
    return stats(&reply) ? SRCNIC_OK : SRCNIC_ERR_CONNECTION_RESET;
}

uint64_t AttachedNic::counter(srcnic_counter_t c) const
{
    StatsReply reply = {};
    return stats(&reply) ? reply.counters[c] : 0;
}

unsigned AttachedNic::num_connections() const
{
    StatsReply reply = {};
    return stats(&reply) ? reply.num_connections : 0;
}

size_t AttachedNic::conn_state_bytes() const
{
    StatsReply reply = {};
    return stats(&reply) ? reply.conn_state_bytes : 0;
}

} // namespace agent
} // namespace srcnic

using srcnic::agent::AttachedNic;

extern "C" {

void srcnic_attach_config_init(srcnic_attach_config_t *config)
{
    std::memset(config, 0, sizeof(*config));
    std::snprintf(config->socket, sizeof(config->socket), "%s", srcnic::agent::kDefaultSocket);
    std::snprintf(config->bind_addr, sizeof(config->bind_addr), "127.0.0.1");
    config->arena = 64u << 20;
    config->direct_reads = 1;
}

srcnic_status_t srcnic_nic_attach(const srcnic_attach_config_t *config, srcnic_nic_t **nic_p,
                                  char *why, size_t why_len)
{
    std::unique_ptr<AttachedNic> nic;
    std::string reason;
    const srcnic_status_t status = AttachedNic::attach(*config, &nic, &reason);
    if (status != SRCNIC_OK) {
        if (why != nullptr && why_len != 0) {
            std::snprintf(why, why_len, "%s", reason.c_str());
        }
        return status;
    }
    *nic_p = nic.release();
    return SRCNIC_OK;
}

int srcnic_nic_is_attached(const srcnic_nic_t *nic)
{
    return nic->attached() ? 1 : 0;
}

void *srcnic_nic_mem_alloc(srcnic_nic_t *nic, size_t size)
{
    return nic->mem_alloc(size);
}

void srcnic_nic_mem_free(srcnic_nic_t *nic, void *ptr, size_t size)
{
    nic->mem_free(ptr, size);
}

} // extern "C"
