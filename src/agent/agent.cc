// The node agent's engines, attachments and event loop (agent.h).
#include "agent/agent.h"

#include "agent/control.h"
#include "core/clock.h"
#include "core/log.h"
#include "link/link.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sched.h>
#include <unistd.h>

namespace srcnic {
namespace agent {

namespace {

// What an epoll event is about: the kind in the top byte, a slot and a client id below.
enum EventKind : uint64_t { kEvListen = 1, kEvStop, kEvEngine, kEvSocket, kEvPidfd, kEvDoorbell };

uint64_t event_data(EventKind kind, uint32_t slot, uint32_t id)
{
    return (static_cast<uint64_t>(kind) << 56) | (static_cast<uint64_t>(slot & 0xffffff) << 32) | id;
}

bool epoll_add(int epfd, int fd, uint64_t data)
{
    struct epoll_event ev = {};
    ev.events = EPOLLIN;
    ev.data.u64 = data;
    return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0;
}

int pidfd_open(pid_t pid)
{
    return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
}

int ptrace_scope()
{
    FILE *f = std::fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
    if (f == nullptr) {
        return -1;
    }
    int scope = -1;
    if (std::fscanf(f, "%d", &scope) != 1) {
        scope = -1;
    }
    std::fclose(f);
    return scope;
}

// Whether process pid is in the agent's own PID namespace (so that the PIDs the agent hands out
// name the same processes there).
bool same_pid_namespace(pid_t pid)
{
    struct stat mine, theirs;
    const std::string path = "/proc/" + std::to_string(pid) + "/ns/pid";
    return stat("/proc/self/ns/pid", &mine) == 0 && stat(path.c_str(), &theirs) == 0 &&
           mine.st_dev == theirs.st_dev && mine.st_ino == theirs.st_ino;
}

// A descriptor the process handed over is a memfd sealed against resizing, of at least `bytes`.
bool sealed_memfd(int fd, size_t bytes, std::string *why)
{
    const int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW)) {
        *why = "shared memory must be a memfd sealed against resizing";
        return false;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < bytes) {
        *why = "shared memory is smaller than announced";
        return false;
    }
    return true;
}

} // namespace

struct Agent::Engine {
    std::unique_ptr<Nic> nic;
    std::string address;   // as given
    LinkAddr link_addr;    // parsed, port 0 (to match attach requests)
    unsigned clients = 0;  // processes attached to it
    uint64_t published_epoch = 0;   // nic->remote_epoch() as its processes last saw it
};

struct Agent::Client {
    uint32_t id = 0;               // never reused while the agent lives
    uint32_t slot = 0;             // in clients_
    int sock = -1;
    pid_t pid = 0;
    uid_t uid = 0;
    int pidfd = -1;
    bool attached = false;
    Engine *engine = nullptr;
    Owner owner;
    uint8_t *segment = nullptr;    // the shared segment, mapped here
    size_t segment_bytes = 0;
    SharedHeader *hdr = nullptr;
    void *mr_map = nullptr;        // the registration table, mapped read-only
    size_t mr_bytes = 0;
    int doorbell_fd = -1;
    std::vector<QpContext *> qps;
    uint64_t attached_ns = 0;
    srcnic_status_t refusal = SRCNIC_OK;   // refused on connection: the answer to its first message
    std::string refusal_why;
};

srcnic_status_t Agent::create(const AgentConfig &config, std::unique_ptr<Agent> *agent_p)
{
    std::unique_ptr<Agent> a(new Agent());
    a->config_ = config;
    if (config.addresses.empty()) {
        SRCNIC_LOG_ERROR("no address to serve: give --address IP or --interface NAME");
        return SRCNIC_ERR_INVALID_PARAM;
    }
    for (const std::string &address : config.addresses) {
        auto e = std::unique_ptr<Engine>(new Engine());
        e->address = address;
        if (LinkAddr::from_ip(address.c_str(), 0, &e->link_addr) != SRCNIC_OK) {
            SRCNIC_LOG_ERROR("'%s' is not a numeric IPv4 or IPv6 address", address.c_str());
            return SRCNIC_ERR_INVALID_PARAM;
        }
        srcnic_config_t nc = config.nic;
        std::snprintf(nc.bind_addr, sizeof(nc.bind_addr), "%s", address.c_str());
        nc.pd = nullptr;
        const srcnic_status_t status = Nic::create_udp(nc, &e->nic);
        if (status != SRCNIC_OK) {
            SRCNIC_LOG_ERROR("cannot start an engine on %s: %s", address.c_str(),
                             srcnic_status_string(status));
            return status;
        }
        e->nic->serve_several_owners();
        a->engines_.push_back(std::move(e));
    }
    a->epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    a->stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (a->epoll_fd_ < 0 || a->stop_fd_ < 0) {
        SRCNIC_LOG_ERROR("epoll_create1/eventfd: %m");
        return SRCNIC_ERR_IO_ERROR;
    }
    a->listen_fd_ = config.listen_fd >= 0 ? config.listen_fd : socket_listen(config.socket, 256);
    if (config.listen_fd >= 0) {
        int type = 0;
        socklen_t len = sizeof(type);
        if (getsockopt(a->listen_fd_, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_SEQPACKET) {
            SRCNIC_LOG_ERROR("the socket passed in (fd %d) is not a SOCK_SEQPACKET socket: in a systemd "
                             "socket unit use ListenSequentialPacket=", a->listen_fd_);
            return SRCNIC_ERR_INVALID_PARAM;
        }
        fcntl(a->listen_fd_, F_SETFL, fcntl(a->listen_fd_, F_GETFL) | O_NONBLOCK);
        fcntl(a->listen_fd_, F_SETFD, FD_CLOEXEC);
    }
    if (a->listen_fd_ < 0) {
        SRCNIC_LOG_ERROR("cannot listen on %s: %m%s", config.socket.c_str(),
                         errno == EADDRINUSE ? " (another agent serves it)" : "");
        return errno == EADDRINUSE ? SRCNIC_ERR_BUSY : SRCNIC_ERR_IO_ERROR;
    }
    bool ok = epoll_add(a->epoll_fd_, a->listen_fd_, event_data(kEvListen, 0, 0)) &&
              epoll_add(a->epoll_fd_, a->stop_fd_, event_data(kEvStop, 0, 0));
    for (size_t i = 0; ok && i < a->engines_.size(); ++i) {
        ok = epoll_add(a->epoll_fd_, a->engines_[i]->nic->event_fd(),
                       event_data(kEvEngine, static_cast<uint32_t>(i), 0));
    }
    if (!ok) {
        SRCNIC_LOG_ERROR("epoll_ctl: %m");
        return SRCNIC_ERR_IO_ERROR;
    }
    a->started_ns_ = now_ns();
    a->cpus_ = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
    for (const auto &e : a->engines_) {
        const srcnic_nic_addr_t &na = e->nic->addr();
        SRCNIC_LOG_INFO("engine on %s port %u (incarnation %" PRIx64 ")", e->address.c_str(),
                        na.port, na.incarnation);
    }
    SRCNIC_LOG_INFO("listening on %s", config.socket.c_str());
    *agent_p = std::move(a);
    return SRCNIC_OK;
}

Agent::~Agent()
{
    for (auto &c : clients_) {
        if (c) {
            drop_client(c.get(), "the agent stops");
        }
    }
    engines_.clear();
    for (int fd : {listen_fd_, epoll_fd_, stop_fd_}) {
        if (fd >= 0) {
            close(fd);
        }
    }
    if (config_.listen_fd < 0 && !config_.socket.empty() && config_.socket[0] != '@') {
        unlink(config_.socket.c_str());   // (an activated socket is its manager's)
    }
}

void Agent::stop()
{
    stopping_ = true;
    const uint64_t one = 1;
    ssize_t r = write(stop_fd_, &one, sizeof(one));
    (void)r;
}

size_t Agent::num_clients() const
{
    return attached_;
}

int Agent::run()
{
    const uint64_t spin_ns = static_cast<uint64_t>(config_.spin_us) * 1000;
    uint64_t last_work = now_ns();
    unsigned passes = 0;
    unsigned rounds = 0;
    while (!stopping_) {
        unsigned work = 0;
        // An engine no process is attached to has nothing to deliver: its packets (strays, the
        // last acknowledgements of connections its processes left) and timers wait at most 64
        // passes, and its empty receive calls do not cost every pass a system call.
        const bool every = (++rounds & 63) == 0;
        for (auto &e : engines_) {
            if (e->clients == 0 && !every) {
                continue;
            }
            work += e->nic->progress();
            notify_clients(*e);
        }
        const uint64_t now = now_ns();
        if (work != 0) {
            last_work = now;
        }
        check_crowded(now);
        // Control, arrivals of processes and their deaths: every 64 passes while busy, on
        // every pass while idle.
        if (work == 0 || ++passes % 64 == 0) {
            poll_events(0);
            check_faults();
            begin_pass();
        }
        // Work comes in bursts: the agent polls spin_us after its last work before it sleeps.
        // Where processes busy-poll every CPU it gives its CPU away between polls (they yield
        // theirs when idle too): waking a sleeper costs a cross-CPU wake-up and a wait for a
        // slice, a yield only a switch on the same CPU (8 B across two namespace nodes on 2
        // CPUs: 21 us one way, against 38 sleeping at once and 175 polling without yields).
        if (work == 0) {
            if (now - last_work >= spin_ns) {
                if (sleep_until_work()) {
                    ++sleeps_;
                }
                last_work = now_ns();
            } else if (crowded()) {
                sched_yield();
            }
        }
    }
    return 0;
}

bool Agent::crowded() const
{
    return crowded_;
}

void Agent::check_crowded(uint64_t now)
{
    if (now < next_crowd_check_ns_) {
        return;
    }
    next_crowd_check_ns_ = now + kCrowdCheckNs;
    // Tasks that want a CPU now, system-wide (the fourth field of /proc/loadavg, "running/
    // total"; the agent itself among them): more than the CPUs means processes of this node,
    // or of others sharing its CPUs, busy-poll all of them. Attached processes alone count too,
    // where /proc cannot be read.
    long running = static_cast<long>(attached_) + 1;
    if (FILE *f = std::fopen("/proc/loadavg", "r")) {
        long r = 0, total = 0;
        if (std::fscanf(f, "%*f %*f %*f %ld/%ld", &r, &total) == 2) {
            running = std::max(running, r);
        }
        std::fclose(f);
    }
    const bool crowded = config_.crowded >= 0 ? config_.crowded != 0 : running > cpus_;
    if (crowded != crowded_) {
        crowded_ = crowded;
        crowded_changed();
    }
}

void Agent::crowded_changed()
{
    const uint32_t yield = crowded() ? 1 : 0;
    for (auto &c : clients_) {
        if (c && c->attached) {
            c->hdr->yield_when_idle.store(yield, std::memory_order_relaxed);
        }
    }
}

void Agent::begin_pass()
{
    bool changed = false;
    for (auto &e : engines_) {
        changed |= e->nic->remote_epoch() != e->published_epoch;
        e->published_epoch = e->nic->remote_epoch();
    }
    for (auto &c : clients_) {
        if (c && c->attached) {
            c->owner.space.begin_pass();
            if (changed) {
                c->hdr->remote_epoch.store(c->engine->published_epoch, std::memory_order_release);
            }
        }
    }
}

bool Agent::sleep_until_work()
{
    for (auto &c : clients_) {
        if (c && c->attached) {
            c->hdr->agent_sleeping.store(1, std::memory_order_relaxed);
        }
    }
    // Pairs with the process's fence between posting and looking at agent_sleeping: either it
    // rings, or the rings' last look below sees its work.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    bool busy = false;
    for (auto &e : engines_) {
        busy |= e->nic->arm() != SRCNIC_OK;
    }
    if (!busy) {
        poll_events(-1);
    }
    for (auto &c : clients_) {
        if (c && c->attached) {
            c->hdr->agent_sleeping.store(0, std::memory_order_relaxed);
        }
    }
    return !busy;
}

Agent::Client *Agent::client_by_event(uint64_t data) const
{
    const uint32_t slot = static_cast<uint32_t>(data >> 32) & 0xffffff;
    const uint32_t id = static_cast<uint32_t>(data);
    if (slot >= clients_.size() || !clients_[slot] || clients_[slot]->id != id) {
        return nullptr;   // dropped earlier in this batch
    }
    return clients_[slot].get();
}

void Agent::poll_events(int timeout_ms)
{
    struct epoll_event events[64];
    int n;
    do {
        n = epoll_wait(epoll_fd_, events, 64, timeout_ms);
    } while (n < 0 && errno == EINTR && !stopping_);
    for (int i = 0; i < n; ++i) {
        const uint64_t data = events[i].data.u64;
        switch (static_cast<EventKind>(data >> 56)) {
        case kEvListen:
            accept_clients();
            break;
        case kEvStop:
            stopping_ = true;
            break;
        case kEvEngine:
            break;   // the next pass progresses it
        case kEvSocket:
            if (Client *c = client_by_event(data)) {
                handle_message(c);
            }
            break;
        case kEvPidfd:
            if (Client *c = client_by_event(data)) {
                drop_client(c, "the process exited");
            }
            break;
        case kEvDoorbell:
            if (Client *c = client_by_event(data)) {
                uint64_t v;
                ssize_t r = read(c->doorbell_fd, &v, sizeof(v));
                (void)r;
            }
            break;
        }
    }
}

void Agent::accept_clients()
{
    for (;;) {
        const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                SRCNIC_LOG_RATELIMITED(LogLevel::kWarn, "accept: %m");
            }
            return;
        }
        struct ucred cred = {};
        socklen_t len = sizeof(cred);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
            close(fd);
            continue;
        }
        // Who may attach: the agent's own user, root, users it was told to allow.
        const bool allowed = config_.allow_any_user || cred.uid == geteuid() || cred.uid == 0 ||
                             std::find(config_.allow_uids.begin(), config_.allow_uids.end(),
                                       cred.uid) != config_.allow_uids.end();
        size_t slot = 0;
        while (slot < clients_.size() && clients_[slot]) {
            ++slot;
        }
        auto c = std::unique_ptr<Client>(new Client());
        c->id = next_client_id_++;
        c->slot = static_cast<uint32_t>(slot);
        c->sock = fd;
        c->pid = cred.pid;
        c->uid = cred.uid;
        c->owner.user = c.get();
        if (!allowed) {
            c->refusal = SRCNIC_ERR_REJECTED;
            c->refusal_why = "user " + std::to_string(cred.uid) + " may not use this agent (it runs as user " +
                             std::to_string(geteuid()) + "; start it with --allow-user, or run your own)";
        } else if (num_clients() >= config_.max_clients) {
            c->refusal = SRCNIC_ERR_NO_RESOURCE;
            c->refusal_why = "the agent serves " + std::to_string(config_.max_clients) +
                             " processes already (srcd --max-clients)";
        }
        if (!epoll_add(epoll_fd_, fd, event_data(kEvSocket, c->slot, c->id))) {
            close(fd);
            continue;
        }
        if (slot == clients_.size()) {
            clients_.emplace_back();
        }
        clients_[slot] = std::move(c);
    }
}

void Agent::reply(Client *c, const void *msg, size_t len, const int *fds, unsigned nfds)
{
    if (!send_msg(c->sock, msg, len, fds, nfds)) {
        SRCNIC_LOG_DEBUG("client %u: reply failed: %m", c->id);
    }
}

void Agent::refuse_attach(Client *c, srcnic_status_t status, const std::string &why)
{
    ++refusals_;
    SRCNIC_LOG_INFO("refused process %d: %s", static_cast<int>(c->pid), why.c_str());
    AttachReply r = {};
    r.hdr.type = static_cast<uint32_t>(MsgType::kAttachReply);
    r.hdr.length = sizeof(r);
    r.hdr.status = status;
    std::snprintf(r.error, sizeof(r.error), "%s", why.c_str());
    reply(c, &r, sizeof(r));
}

void Agent::handle_attach(Client *c, const AttachRequest &req, const int *fds, unsigned nfds)
{
    std::string why;
    if (req.version != kProtoVersion) {
        refuse_attach(c, SRCNIC_ERR_UNSUPPORTED,
                      "attach protocol version " + std::to_string(req.version) + ", the agent speaks " +
                          std::to_string(kProtoVersion) + ": use matching srcd and libraries");
        return;
    }
    if (nfds != 2) {
        refuse_attach(c, SRCNIC_ERR_INVALID_PARAM, "an attach request carries two descriptors");
        return;
    }
    // Which engine.
    char bind[sizeof(req.bind_addr) + 1] = {};
    std::memcpy(bind, req.bind_addr, sizeof(req.bind_addr));
    LinkAddr want;
    Engine *engine = nullptr;
    if (LinkAddr::from_ip(bind, 0, &want) == SRCNIC_OK) {
        for (auto &e : engines_) {
            if (e->link_addr == want) {
                engine = e.get();
            }
        }
    }
    if (engine == nullptr) {
        std::string served;
        for (auto &e : engines_) {
            served += (served.empty() ? "" : ", ") + e->address;
        }
        refuse_attach(c, SRCNIC_ERR_NO_DEVICE,
                      std::string("the agent serves no engine on ") + bind + " (it serves " + served + ")");
        return;
    }
    // The segment and the registration table.
    const uint64_t seg_bytes = req.segment_bytes;
    if (seg_bytes <= kHeaderBytes || seg_bytes > kHeaderBytes + kMaxArenaBytes || seg_bytes % 4096 != 0 ||
        req.segment_base % 4096 != 0 || req.segment_base + seg_bytes < req.segment_base ||
        req.mr_slots == 0 || req.mr_slots > (1u << kMrSlotBits)) {
        refuse_attach(c, SRCNIC_ERR_INVALID_PARAM, "malformed attach request (segment or table size)");
        return;
    }
    const size_t mr_bytes = (static_cast<size_t>(req.mr_slots) * sizeof(MrSlot) + 4095) & ~size_t(4095);
    if (!sealed_memfd(fds[0], seg_bytes, &why) || !sealed_memfd(fds[1], mr_bytes, &why)) {
        refuse_attach(c, SRCNIC_ERR_INVALID_PARAM, why);
        return;
    }
    c->pidfd = pidfd_open(c->pid);
    if (c->pid <= 0 || c->pidfd < 0) {
        refuse_attach(c, SRCNIC_ERR_UNSUPPORTED,
                      "the agent cannot see process " + std::to_string(c->pid) +
                          " (another PID namespace?): run an agent in its namespace, or UCX_SRC_MODE=embedded");
        return;
    }
    // Proof that the agent reaches the process's memory (and that pid is that process: the
    // word holds what it said).
    uint64_t probe = 0;
    struct iovec local = {&probe, sizeof(probe)};
    struct iovec remote = {reinterpret_cast<void *>(req.probe_addr), sizeof(probe)};
    const ssize_t got = process_vm_readv(c->pid, &local, 1, &remote, 1, 0);
    if (got != static_cast<ssize_t>(sizeof(probe)) || probe != req.probe_value) {
        const int err = errno;
        const int scope = ptrace_scope();
        std::string reason;
        if (got < 0 && (err == EPERM || err == EACCES)) {
            reason = "cross-memory attach to process " + std::to_string(c->pid) + " is not permitted" +
                     (scope >= 0 ? " (kernel.yama.ptrace_scope=" + std::to_string(scope) + ")" : "") +
                     ": run srcd as root or with CAP_SYS_PTRACE" +
                     (scope >= 2 ? "" : ", as the process's user") + ", or set UCX_SRC_MODE=embedded";
        } else if (got < 0) {
            reason = std::string("cross-memory attach to process ") + std::to_string(c->pid) +
                     " failed: " + std::strerror(err) + "; set UCX_SRC_MODE=embedded";
        } else {
            reason = "process " + std::to_string(c->pid) +
                     " is not the one that connected (another PID namespace?); set UCX_SRC_MODE=embedded";
        }
        refuse_attach(c, SRCNIC_ERR_UNSUPPORTED, reason);
        return;
    }
    void *seg = mmap(nullptr, seg_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
    void *mrs = mmap(nullptr, mr_bytes, PROT_READ, MAP_SHARED, fds[1], 0);
    if (seg == MAP_FAILED || mrs == MAP_FAILED) {
        if (seg != MAP_FAILED) {
            munmap(seg, seg_bytes);
        }
        if (mrs != MAP_FAILED) {
            munmap(mrs, mr_bytes);
        }
        refuse_attach(c, SRCNIC_ERR_NO_MEMORY, std::string("cannot map shared memory: ") + std::strerror(errno));
        return;
    }
    c->segment = static_cast<uint8_t *>(seg);
    c->segment_bytes = seg_bytes;
    c->hdr = reinterpret_cast<SharedHeader *>(c->segment);
    c->mr_map = mrs;
    c->mr_bytes = mr_bytes;
    c->doorbell_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (c->doorbell_fd < 0 ||
        !epoll_add(epoll_fd_, c->pidfd, event_data(kEvPidfd, c->slot, c->id)) ||
        !epoll_add(epoll_fd_, c->doorbell_fd, event_data(kEvDoorbell, c->slot, c->id))) {
        refuse_attach(c, SRCNIC_ERR_IO_ERROR, std::string("eventfd/epoll: ") + std::strerror(errno));
        return;
    }
    c->owner.space = AddrSpace(c->pid, c->pidfd);
    c->owner.space.add_window(req.segment_base + kHeaderBytes, seg_bytes - kHeaderBytes,
                              c->segment + kHeaderBytes);
    c->owner.mrs = MrView(static_cast<const MrSlot *>(mrs), req.mr_slots);
    c->owner.job_key = req.job_key;
    c->owner.trusted = false;
    // Direct READs name the target by its PID: only between processes that number PIDs as the
    // agent does (one PID namespace; a process in another reports another getpid()).
    if (req.pid == static_cast<uint32_t>(c->pid) && same_pid_namespace(c->pid)) {
        c->owner.direct_reads = &c->hdr->direct_reads;
        c->owner.direct_copied = &c->hdr->direct_copied;
    }
    c->engine = engine;
    ++engine->clients;
    c->attached = true;
    c->attached_ns = now_ns();
    ++attaches_;
    ++attached_;
    c->hdr->yield_when_idle.store(crowded_ ? 1 : 0, std::memory_order_relaxed);
    c->hdr->remote_epoch.store(engine->published_epoch, std::memory_order_release);

    AttachReply r = {};
    r.hdr.type = static_cast<uint32_t>(MsgType::kAttachReply);
    r.hdr.length = sizeof(r);
    r.hdr.status = SRCNIC_OK;
    r.addr = engine->nic->addr();
    r.max_msg = engine->nic->max_msg();
    r.client_id = c->id;
    r.agent_pid = static_cast<uint32_t>(getpid());
    reply(c, &r, sizeof(r), &c->doorbell_fd, 1);
    SRCNIC_LOG_INFO("client %u: process %d (user %u) attached to %s", c->id, static_cast<int>(c->pid),
                    static_cast<unsigned>(c->uid), engine->address.c_str());
}

void Agent::handle_message(Client *c)
{
    alignas(8) uint8_t buf[kMaxMsg];
    int fds[kMaxFds];
    unsigned nfds = 0;
    const ssize_t n = recv_msg(c->sock, buf, sizeof(buf), fds, &nfds, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return;
    }
    if (n <= 0) {
        drop_client(c, n == 0 ? "the process closed its connection" : "its connection failed");
        return;
    }
    MsgHeader hdr;
    if (static_cast<size_t>(n) < sizeof(hdr)) {
        close_fds(fds, nfds);
        drop_client(c, "it sent a malformed message");
        return;
    }
    std::memcpy(&hdr, buf, sizeof(hdr));
    if (c->refusal != SRCNIC_OK) {
        // Refused when it connected: whatever it asks is answered with why, then it goes.
        close_fds(fds, nfds);
        if (hdr.type == static_cast<uint32_t>(MsgType::kStatus)) {
            MsgHeader r = {static_cast<uint32_t>(MsgType::kStatusReply), sizeof(MsgHeader), c->refusal, 1};
            reply(c, &r, sizeof(r));
        } else {
            refuse_attach(c, c->refusal, c->refusal_why);
        }
        drop_client(c, "refused");
        return;
    }
    const MsgType type = static_cast<MsgType>(hdr.type);
    // Every message but an attach (and a status request) needs an attachment, and its size.
    auto expect = [&](size_t size) {
        if (static_cast<size_t>(n) != size || hdr.length != size) {
            close_fds(fds, nfds);
            drop_client(c, "it sent a malformed message");
            return false;
        }
        if (type != MsgType::kAttach && type != MsgType::kStatus && !c->attached) {
            close_fds(fds, nfds);
            drop_client(c, "it sent a request before attaching");
            return false;
        }
        if (type != MsgType::kAttach) {
            close_fds(fds, nfds);
        }
        return true;
    };
    // The request of type T, if the message is one (else the client is dropped).
    auto take = [&](auto *req) {
        if (!expect(sizeof(*req))) {
            return false;
        }
        std::memcpy(req, buf, sizeof(*req));
        return true;
    };
    switch (type) {
    case MsgType::kAttach: {
        AttachRequest req;
        if (!take(&req)) {
            return;
        }
        if (c->attached) {
            close_fds(fds, nfds);
            drop_client(c, "it attached twice");
            return;
        }
        handle_attach(c, req, fds, nfds);
        close_fds(fds, nfds);
        if (!c->attached) {
            drop_client(c, "its attachment was refused");
        }
        return;
    }
    case MsgType::kQpCreate: {
        QpCreateRequest req;
        if (!take(&req)) {
            return;
        }
        QpCreateReply r = {};
        r.hdr.type = static_cast<uint32_t>(MsgType::kQpCreateReply);
        r.hdr.length = sizeof(r);
        QpRingLayout layout;
        if (qp_layout(req.sq_size, req.rq_size, false, &layout) != SRCNIC_OK || req.ring_offset % 4096 != 0 ||
            req.ring_offset < kHeaderBytes || req.ring_offset > c->segment_bytes ||
            layout.bytes > c->segment_bytes - req.ring_offset) {
            r.hdr.status = SRCNIC_ERR_INVALID_PARAM;
        } else if (c->qps.size() >= kMaxQpsPerClient) {
            r.hdr.status = SRCNIC_ERR_NO_RESOURCE;
        } else {
            QpContext *ctx;
            r.hdr.status = c->engine->nic->qp_attach(&c->owner, layout, c->segment + req.ring_offset, &ctx);
            if (r.hdr.status == SRCNIC_OK) {
                c->qps.push_back(ctx);
                r.qpn = ctx->qpn();
            }
        }
        reply(c, &r, sizeof(r));
        return;
    }
    case MsgType::kQpDestroy: {
        QpDestroyRequest req;
        if (!take(&req)) {
            return;
        }
        MsgHeader r = {static_cast<uint32_t>(MsgType::kQpDestroyReply), sizeof(MsgHeader), SRCNIC_ERR_NO_ELEM, 0};
        for (auto it = c->qps.begin(); it != c->qps.end(); ++it) {
            if ((*it)->qpn() == req.qpn) {
                c->engine->nic->qp_detach(*it);
                c->qps.erase(it);
                r.status = SRCNIC_OK;
                break;
            }
        }
        reply(c, &r, sizeof(r));
        return;
    }
    case MsgType::kDestCreate: {
        DestCreateRequest req;
        if (!take(&req)) {
            return;
        }
        DestCreateReply r = {};
        r.hdr.type = static_cast<uint32_t>(MsgType::kDestCreateReply);
        r.hdr.length = sizeof(r);
        r.hdr.status = c->engine->nic->dest_create(req.remote, req.remote_qpn, &r.dest);
        ++dest_requests_;
        reply(c, &r, sizeof(r));
        return;
    }
    case MsgType::kDestStatus: {
        DestStatusRequest req;
        if (!take(&req)) {
            return;
        }
        MsgHeader r = {static_cast<uint32_t>(MsgType::kDestStatusReply), sizeof(MsgHeader),
                       c->engine->nic->dest_status(req.dest), 0};
        reply(c, &r, sizeof(r));
        return;
    }
    case MsgType::kQpCancel: {
        QpCancelRequest req;
        if (!take(&req)) {
            return;
        }
        QpCancelReply r = {};
        r.hdr.type = static_cast<uint32_t>(MsgType::kQpCancelReply);
        r.hdr.length = sizeof(r);
        r.hdr.status = SRCNIC_ERR_NO_ELEM;
        for (QpContext *ctx : c->qps) {
            if (ctx->qpn() == req.qpn) {
                r.cancelled = c->engine->nic->qp_cancel(ctx, req.dest, req.tag);
                r.hdr.status = SRCNIC_OK;
            }
        }
        notify_clients(*c->engine);   // the cancelled requests' completions
        reply(c, &r, sizeof(r));
        return;
    }
    case MsgType::kReadCopy: {
        ReadCopyRequest req;
        if (!take(&req)) {
            return;
        }
        MsgHeader r = {static_cast<uint32_t>(MsgType::kReadCopyReply), sizeof(MsgHeader), SRCNIC_ERR_NO_ELEM, 0};
        for (QpContext *ctx : c->qps) {
            if (ctx->qpn() == req.qpn) {
                r.status = c->engine->nic->copy_read(ctx, req.wqe);
            }
        }
        reply(c, &r, sizeof(r));
        return;
    }
    case MsgType::kWakeMe: {
        if (!expect(sizeof(MsgHeader))) {
            return;
        }
        send_wake(c);
        return;
    }
    case MsgType::kStats: {
        if (!expect(sizeof(MsgHeader))) {
            return;
        }
        StatsReply r = {};
        r.hdr.type = static_cast<uint32_t>(MsgType::kStatsReply);
        r.hdr.length = sizeof(r);
        const Nic &nic = *c->engine->nic;
        for (int k = 0; k < SRCNIC_CNT_LAST; ++k) {
            r.counters[k] = nic.counter(static_cast<srcnic_counter_t>(k));
        }
        r.num_connections = nic.num_connections();
        r.conn_state_bytes = nic.conn_state_bytes();
        reply(c, &r, sizeof(r));
        return;
    }
    case MsgType::kStatus: {
        if (!expect(sizeof(MsgHeader))) {
            return;
        }
        // In pieces of at most kStatusChunk bytes; the last has reserved = 1.
        const std::string json = status_json();
        constexpr size_t kStatusChunk = 16384;
        std::vector<uint8_t> msg(sizeof(MsgHeader) + kStatusChunk);
        size_t off = 0;
        do {
            const size_t take = std::min(kStatusChunk, json.size() - off);
            MsgHeader r = {static_cast<uint32_t>(MsgType::kStatusReply),
                           static_cast<uint32_t>(sizeof(MsgHeader) + take), SRCNIC_OK,
                           off + take == json.size() ? 1u : 0u};
            std::memcpy(msg.data(), &r, sizeof(r));
            std::memcpy(msg.data() + sizeof(r), json.data() + off, take);
            reply(c, msg.data(), sizeof(r) + take);
            off += take;
        } while (off < json.size());
        return;
    }
    default:
        close_fds(fds, nfds);
        drop_client(c, "it sent an unknown request");
        return;
    }
}

void Agent::notify_clients(Engine &e)
{
    std::vector<Owner *> &owners = e.nic->notified();
    if (owners.empty()) {
        return;
    }
    // Pairs with the process's fence between setting client_armed and its last look at the
    // completion ring: either it sees the completion, or this sees it armed.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    for (Owner *o : owners) {
        o->notify_pending = false;
        Client *c = static_cast<Client *>(o->user);
        if (c->hdr->client_armed.exchange(0, std::memory_order_relaxed) != 0) {
            send_wake(c);
        }
    }
    owners.clear();
}

void Agent::send_wake(Client *c)
{
    // Never blocks: the socket is non-blocking, and a full one already holds a wake-up.
    MsgHeader wake = {};
    wake.type = static_cast<uint32_t>(MsgType::kWake);
    wake.length = sizeof(wake);
    ssize_t r = send(c->sock, &wake, sizeof(wake), MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)r;
}

void Agent::check_faults()
{
    for (auto &c : clients_) {
        if (!c || !c->attached) {
            continue;
        }
        for (QpContext *ctx : c->qps) {
            if (ctx->faulted()) {
                ++faults_;
                drop_client(c.get(), "it broke the rules of its rings (counters out of range)");
                break;
            }
        }
    }
}

void Agent::drop_client(Client *c, const char *why)
{
    if (c->attached) {
        SRCNIC_LOG_INFO("client %u (process %d) detached: %s", c->id, static_cast<int>(c->pid), why);
        Nic &nic = *c->engine->nic;
        // Nothing reads or writes the process's memory after this.
        for (QpContext *ctx : c->qps) {
            nic.qp_detach(ctx);
        }
        c->qps.clear();
        nic.owner_release(&c->owner);
        --c->engine->clients;
        c->owner.space.mark_dead();
        --attached_;
    } else {
        SRCNIC_LOG_DEBUG("connection %u (process %d) closed: %s", c->id, static_cast<int>(c->pid), why);
    }
    for (int fd : {c->sock, c->pidfd, c->doorbell_fd}) {
        if (fd >= 0) {
            epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
        }
    }
    for (int fd : {c->sock, c->pidfd, c->doorbell_fd}) {
        if (fd >= 0) {
            close(fd);
        }
    }
    if (c->segment != nullptr) {
        munmap(c->segment, c->segment_bytes);
    }
    if (c->mr_map != nullptr) {
        munmap(c->mr_map, c->mr_bytes);
    }
    clients_[c->slot].reset();
}

std::string Agent::status_json() const
{
    std::string j;
    char buf[512];
    std::snprintf(buf, sizeof(buf),
                  "{\"agent\":{\"pid\":%d,\"uid\":%u,\"socket\":\"%s\",\"uptime_s\":%.3f,"
                  "\"clients\":%zu,\"attaches\":%" PRIu64 ",\"refusals\":%" PRIu64
                  ",\"faults\":%" PRIu64 ",\"sleeps\":%" PRIu64 ",\"dest_requests\":%" PRIu64
                  "},\"engines\":[",
                  static_cast<int>(getpid()), static_cast<unsigned>(geteuid()), config_.socket.c_str(),
                  static_cast<double>(now_ns() - started_ns_) / 1e9, num_clients(), attaches_,
                  refusals_, faults_, sleeps_, dest_requests_);
    j += buf;
    for (size_t i = 0; i < engines_.size(); ++i) {
        const Engine &e = *engines_[i];
        const Nic &nic = *e.nic;
        std::snprintf(buf, sizeof(buf),
                      "%s{\"address\":\"%s\",\"port\":%u,\"incarnation\":\"%" PRIx64
                      "\",\"connections\":%u,\"conn_state_bytes\":%zu,\"counters\":{",
                      i ? "," : "", e.address.c_str(), nic.addr().port, nic.addr().incarnation,
                      nic.num_connections(), nic.conn_state_bytes());
        j += buf;
        bool first = true;
        for (int k = 0; k < SRCNIC_CNT_LAST; ++k) {
            const uint64_t v = nic.counter(static_cast<srcnic_counter_t>(k));
            if (v != 0) {
                std::snprintf(buf, sizeof(buf), "%s\"%s\":%" PRIu64, first ? "" : ",",
                              srcnic_counter_name(static_cast<srcnic_counter_t>(k)), v);
                j += buf;
                first = false;
            }
        }
        j += "},\"peers\":" + nic.peers_json() + "}";
    }
    j += "],\"clients\":[";
    bool first = true;
    for (const auto &c : clients_) {
        if (!c || !c->attached) {
            continue;
        }
        std::snprintf(buf, sizeof(buf),
                      "%s{\"id\":%u,\"pid\":%d,\"uid\":%u,\"engine\":\"%s\",\"job_key\":%u,\"qps\":[",
                      first ? "" : ",", c->id, static_cast<int>(c->pid), static_cast<unsigned>(c->uid),
                      c->engine->address.c_str(), c->owner.job_key);
        j += buf;
        for (size_t q = 0; q < c->qps.size(); ++q) {
            std::snprintf(buf, sizeof(buf), "%s%u", q ? "," : "", c->qps[q]->qpn());
            j += buf;
        }
        std::snprintf(buf, sizeof(buf), "],\"cma_copies\":%" PRIu64 ",\"cma_faults\":%" PRIu64 "}",
                      c->owner.space.copies(), c->owner.space.faults());
        j += buf;
        first = false;
    }
    j += "]}";
    return j;
}

} // namespace agent
} // namespace srcnic
