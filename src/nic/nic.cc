// The Nic's life cycle, object management (QPs, memory regions, destinations), the progress
// loop that runs the stages in order (with rx_poll, which takes datagrams from the link for the
// rx demux), and event-fd arming.
#include "nic/nic.h"
#include "nic/nic_over.h"

#include "core/clock.h"
#include "core/nic_config.h"
#include "core/log.h"
#include "wire/auth.h"

#include <algorithm>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <new>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

namespace srcnic {

Nic::Nic(const srcnic_config_t &config, std::unique_ptr<Link> link)
    : config_(config), link_(std::move(link)), pd_(config.pd)
{
    config_.pd = nullptr;
}

srcnic_status_t Nic::create(const srcnic_config_t &config, std::unique_ptr<Link> link,
                            std::unique_ptr<Nic> *nic_p)
{
    return create_over<Link>(config, std::move(link), nic_p);
}

srcnic_status_t Nic::init()
{
    if (pd_ == nullptr) {
        srcnic_pd_t *pd;
        const srcnic_status_t status = srcnic_pd_create(&pd);
        if (status != SRCNIC_OK) {
            return status;
        }
        own_pd_.reset(pd);
        pd_ = pd;
    }
    own_.mrs = pd_->mrs->view();
    own_.job_key = config_.job_key;

    const LinkAddr &la = link_->local_addr();
    self_addr_ = la;
    addr_.family = la.family;
    addr_.port = la.port;
    addr_.scope_id = la.scope_id;
    std::memcpy(addr_.ip, la.ip, sizeof(addr_.ip));
    // Straight from the operating system: the incarnation and the secret are what a peer must
    // present (PROTOCOL.md §7), and no output of an engine generator may predict them.
    addr_.incarnation = os_random_nonzero();
    addr_.secret = os_random_nonzero();
    key_ = nic_key(addr_.secret, addr_.incarnation);
    os_random(&gen_key_, sizeof(gen_key_));
    // A closed DC stream is remembered until no initiator can resend into it: unacknowledged
    // data older than peer_timeout fails its stream, and no retransmission waits longer than
    // rto_max (PROTOCOL.md §8.4).
    closed_linger_ns_ = static_cast<uint64_t>(config_.peer_timeout_ms) * 1000000 +
                        static_cast<uint64_t>(config_.rto_max_us) * 1000;
    closed_fifo_.resize(static_cast<size_t>(std::max(1u, config_.dc_targets)) * kDcClosedPerTarget);
    if (config_.dc_targets != 0) {
        // Sized for as many refusals within a linger as the closed table has entries, at 8
        // bits each (2 % false positives there; more beyond, never a miss).
        size_t bits = 1024;
        while (bits < closed_fifo_.size() * 8 && bits < (size_t{1} << 24)) {
            bits *= 2;
        }
        SipKey refused_key;
        os_random(&refused_key, sizeof(refused_key));
        refused_ = RefusedSet(bits, closed_linger_ns_, refused_key);
    }

    // Automatic: the link's datagram size (65000 bytes on loopback). The packet buffers are
    // reserved, not touched: a page becomes resident only when a datagram is written to it,
    // and buffers are reused last-freed-first, so small-message traffic keeps few pages.
    mtu_ = link_->mtu();
    if (config_.mtu != 0) {
        if (config_.mtu > link_->mtu()) {
            SRCNIC_LOG_ERROR("mtu=%u is larger than the link allows (%u): lower it or use 0",
                             config_.mtu, link_->mtu());
            return SRCNIC_ERR_INVALID_PARAM;
        }
        mtu_ = config_.mtu;
    }
    if (mtu_ < kMinMtu) {
        SRCNIC_LOG_ERROR("link mtu %u is below the minimum of %u bytes", mtu_, kMinMtu);
        return SRCNIC_ERR_INVALID_PARAM;
    }
    // A message may span at most half the PSN space that serial arithmetic can order, and the
    // CQE reports its length in 32 bits (counted in the smallest packets any connection uses).
    max_msg_ = std::min<size_t>(static_cast<size_t>(mtu_ - sizeof(PacketHeader)) * (1u << 20),
                                1ull << 31);
    // A peer the link reaches over a path that carries more (the UDP link: another process at
    // the same address) sends larger datagrams: every buffer holds the largest.
    rx_buf_size_ = std::max(mtu_, link_->max_datagram());

    qps_.reserve(64);
    conns_.emplace_back(nullptr);   // slot 0 is never used: connection id 0 means "not known yet"
    peer_nics_.emplace_back();      // nor is entry 0: a slot never opened names it
    active_.reserve(64);

    msgs_.resize(config_.max_inflight);
    for (TxMsg &m : msgs_) {
        m.next = free_msgs_;
        free_msgs_ = &m;
    }
    msgs_free_ = config_.max_inflight;

    // Packet buffers: received datagrams until handled, and out-of-order packets until their
    // turn. Too few for a window of reordering, and a loss costs the packets held after it
    // (rx_poll gives them back to keep reception going): automatic (0) is twice the widest
    // window, so one connection can reorder a whole window while the others keep receiving.
    const uint32_t widest = window_for(mtu_ - static_cast<uint32_t>(sizeof(PacketHeader)));
    const uint32_t full = full_window_for(mtu_ - static_cast<uint32_t>(sizeof(PacketHeader)));
    if (full < widest) {
        SRCNIC_LOG_INFO("the link's receive queue holds %u datagrams of %u bytes, fewer than the "
                        "window (%u): at most %u full packets in flight per connection (a larger "
                        "sock_buf, net.core.rmem_max or CAP_NET_ADMIN lifts this)",
                        link_->rx_queue_capacity(mtu_), mtu_, widest, full);
    }
    if (config_.rx_buffers == 0) {
        config_.rx_buffers = std::max(kAutoRxBuffersMin, 2 * widest);
    } else if (config_.rx_buffers < widest + kRxBurst) {
        SRCNIC_LOG_WARN("rx_buffers=%u cannot hold a window of reordering (%u packets) and a receive "
                        "burst: a loss may cost retransmissions of packets held after it; use 0 "
                        "(automatic) or at least %u", config_.rx_buffers, widest, widest + kRxBurst);
    }
    // Default-initialized: not zeroed, so the pages are not touched here.
    buffers_.reset(new (std::nothrow) uint8_t[static_cast<size_t>(config_.rx_buffers) * rx_buf_size_]);
    if (buffers_ == nullptr) {
        SRCNIC_LOG_ERROR("out of memory for %u packet buffers of %u bytes: lower rx_buffers or mtu",
                         config_.rx_buffers, rx_buf_size_);
        return SRCNIC_ERR_NO_MEMORY;
    }
    free_bufs_.reserve(config_.rx_buffers);
    for (int32_t b = static_cast<int32_t>(config_.rx_buffers) - 1; b >= 0; --b) {
        free_bufs_.push_back(b);
    }

    SRCNIC_LOG_DEBUG("nic %s incarnation %llx mtu %u window %u", link_->local_addr().to_string().c_str(),
                     static_cast<unsigned long long>(addr_.incarnation), mtu_,
                     window_for(mtu_ - static_cast<uint32_t>(sizeof(PacketHeader))));
    return SRCNIC_OK;
}

Nic::~Nic()
{
    if (log_enabled(LogLevel::kInfo)) {
        std::string line;
        for (int k = 0; k < SRCNIC_CNT_LAST; ++k) {
            if (counters_[k] != 0) {
                line += " ";
                line += srcnic_counter_name(static_cast<srcnic_counter_t>(k));
                line += "=" + std::to_string(counters_[k]);
            }
        }
        SRCNIC_LOG_INFO("nic %s counters:%s", link_->local_addr().to_string().c_str(),
                        line.c_str());
    }
    for (QpSlot &q : qps_) {
        delete q.ctx;
        delete q.host;
        std::free(q.block);
    }
    // The active halves: those connections hold, and the pool's.
    for (const ConnPtr &c : conns_) {
        if (c != nullptr) {   // (slot 0 is empty)
            delete c->act;
        }
    }
    while (ConnActive *a = act_free_) {
        act_free_ = a->next_free;
        delete a;
    }
    if (epoll_fd_ >= 0) {
        close(epoll_fd_);
    }
    if (timer_fd_ >= 0) {
        close(timer_fd_);
    }
    if (kick_fd_ >= 0) {
        close(kick_fd_);
    }
}

srcnic_status_t Nic::events_open() const
{
    if (epoll_fd_ >= 0) {
        return SRCNIC_OK;
    }
    const srcnic_status_t status = link_->open_event_fd();
    if (status != SRCNIC_OK) {
        return status;   // logged by the link
    }
    // Each created in turn; the first failure stops (its errno for the log and the status).
    int fds[3] = {-1, -1, -1};   // epoll set, timerfd, eventfd
    const char *what = nullptr;
    int err = 0;
    for (int i = 0; i < 3 && what == nullptr; ++i) {
        fds[i] = i == 0   ? epoll_create1(EPOLL_CLOEXEC)
                 : i == 1 ? timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)
                          : eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (fds[i] < 0) {
            err = errno;
            what = i == 0 ? "epoll_create1" : i == 1 ? "timerfd_create" : "eventfd";
        }
    }
    struct epoll_event ev = {};
    ev.events = EPOLLIN;
    if (what == nullptr &&
        (epoll_ctl(fds[0], EPOLL_CTL_ADD, fds[1], &ev) != 0 ||
         epoll_ctl(fds[0], EPOLL_CTL_ADD, fds[2], &ev) != 0 ||
         (link_->event_fd() >= 0 && epoll_ctl(fds[0], EPOLL_CTL_ADD, link_->event_fd(), &ev) != 0))) {
        err = errno;
        what = "epoll_ctl";
    }
    if (what != nullptr) {
        errno = err;
        SRCNIC_LOG_ERROR("nic %s: %s failed: %m", link_->local_addr().to_string().c_str(), what);
        for (int fd : fds) {
            if (fd >= 0) {
                close(fd);
            }
        }
        return err == EMFILE || err == ENFILE ? SRCNIC_ERR_NO_RESOURCE : SRCNIC_ERR_IO_ERROR;
    }
    epoll_fd_ = fds[0];
    timer_fd_ = fds[1];
    kick_fd_ = fds[2];
    return SRCNIC_OK;
}

void Nic::kick()
{
    armed_ = false;
    const uint64_t one = 1;
    if (write(kick_fd_, &one, sizeof(one)) < 0 && errno != EAGAIN) {
        SRCNIC_LOG_RATELIMITED(LogLevel::kError, "eventfd write failed: %m");
    }
}

SRCNIC_HOT unsigned Nic::transmit()
{
    tx_blocked_ = false;
    unsigned n = requester_take();
    // Connections only get something to send through activate() (new work, an arrival, a link
    // that would block); otherwise only their timers can, which are checked every
    // kTxTimerCalls-th call: an idle poll then reads no clock.
    if (!active_.empty() && (tx_due_ || ++tx_idle_calls_ >= kTxTimerCalls)) {
        tx_due_ = false;
        tx_idle_calls_ = 0;
        n += tx_schedule(now(), false);
        tx_flush();
    }
    return n;
}

srcnic_status_t Nic::arm()
{
    const srcnic_status_t status = events_open();
    if (status != SRCNIC_OK) {
        return status;
    }
    uint64_t drained;
    while (read(kick_fd_, &drained, sizeof(drained)) > 0) {
    }
    armed_ = false;
    if (!rx_notify_) {
        link_->rx_notify(true);   // before the checks: what arrives from here on wakes the fd
        rx_notify_ = true;
    }
    if (link_->rx_pending() || !self_rx_.empty()) {
        return SRCNIC_ERR_BUSY;
    }
    // Work for the NIC: requests it can take. For this process's own QPs also completions
    // not yet polled (the caller's work); another owner polls its own (the agent wakes it).
    for (const QpSlot &q : qps_) {
        if (q.ctx == nullptr) {
            continue;
        }
        if ((!q.ctx->sq().empty() && q.ctx->can_take() && !q.ctx->head_held()) ||
            (q.ctx->cursor().active && q.ctx->cursor().local) ||   // a local WRITE's next piece
            (q.ctx->owner() == &own_ && !q.ctx->cq_empty())) {
            return SRCNIC_ERR_BUSY;
        }
    }
    uint64_t deadline = 0;
    if (!tx_idle_until(&deadline)) {
        return SRCNIC_ERR_BUSY;
    }
    struct itimerspec its = {};
    if (deadline != 0) {
        its.it_value.tv_sec = static_cast<time_t>(deadline / kNsPerSec);
        its.it_value.tv_nsec = static_cast<long>(deadline % kNsPerSec);
    }
    if (timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &its, nullptr) != 0) {
        SRCNIC_LOG_ERROR("timerfd_settime failed: %m");
        return SRCNIC_ERR_IO_ERROR;
    }
    if (deadline != 0 && deadline <= now_ns()) {
        return SRCNIC_ERR_BUSY;
    }
    armed_ = true;
    return SRCNIC_OK;
}

uint32_t Nic::qp_slot_alloc()
{
    if (!free_qp_slots_.empty()) {
        const uint32_t slot = free_qp_slots_.back();
        free_qp_slots_.pop_back();
        return slot;
    }
    if (qps_.size() >= 0xffff) {
        return UINT32_MAX;
    }
    qps_.emplace_back();
    return static_cast<uint32_t>(qps_.size() - 1);
}

void Nic::qp_slot_free(uint32_t slot)
{
    QpSlot &q = qps_[slot];
    q.ctx = nullptr;
    q.host = nullptr;
    q.block = nullptr;
    q.gen = static_cast<uint16_t>(q.gen + 1);
    free_qp_slots_.push_back(slot);
}

srcnic_status_t Nic::qp_create(const srcnic_qp_config_t &config, Qp **qp_p)
{
    QpRingLayout layout;
    const srcnic_status_t status = qp_layout(config.sq_size, config.rq_size, true, &layout);
    if (status != SRCNIC_OK) {
        return status;
    }
    void *block = std::aligned_alloc(4096, layout.bytes);
    if (block == nullptr) {
        return SRCNIC_ERR_NO_MEMORY;
    }
    std::memset(block, 0, layout.bytes);
    const uint32_t slot = qp_slot_alloc();
    if (slot == UINT32_MAX) {
        std::free(block);
        SRCNIC_LOG_ERROR("too many QPs on one NIC (65535)");
        return SRCNIC_ERR_NO_RESOURCE;
    }
    QpSlot &q = qps_[slot];
    const uint32_t qpn = (slot + 1) | (static_cast<uint32_t>(q.gen) << 16);
    q.block = block;
    q.host = new Qp(this, qpn, layout, block, max_msg_);   // initialises the rings first
    q.ctx = new QpContext(this, qpn, &own_, layout, block);
    *qp_p = q.host;
    return SRCNIC_OK;
}

srcnic_status_t Nic::qp_attach(Owner *owner, const QpRingLayout &layout, void *block,
                               QpContext **ctx_p)
{
    const uint32_t slot = qp_slot_alloc();
    if (slot == UINT32_MAX) {
        SRCNIC_LOG_ERROR("too many QPs on one NIC (65535)");
        return SRCNIC_ERR_NO_RESOURCE;
    }
    QpSlot &q = qps_[slot];
    const uint32_t qpn = (slot + 1) | (static_cast<uint32_t>(q.gen) << 16);
    q.ctx = new QpContext(this, qpn, owner, layout, block);
    *ctx_p = q.ctx;
    return SRCNIC_OK;
}

void Nic::qp_detach(QpContext *ctx)
{
    flush_writes();
    for (size_t slot = 1; slot < conns_.size(); ++slot) {
        Connection &c = *conns_[slot];
        if (c.state != ConnState::kOpen || c.act == nullptr) {
            continue;   // (an idle connection holds nothing of anyone's)
        }
        for (TxMsg *m = c.act->head; m != nullptr; m = m->next) {
            if (m->qp == ctx) {
                m->cancelled = true;
                m->qp = nullptr;
            }
        }
        if (c.act->inbound.active && c.act->inbound.qp == ctx) {
            c.act->inbound.qp = nullptr;
            c.act->inbound.discard = true;
            c.act->inbound.refusal = SRCNIC_ERR_UNREACHABLE;   // answered at its next segment
        }
    }
    // And its requests that wait in a destination's backlog for a DCI (a connection refused
    // with USE_DC, or requests a DC stream's close handed back): they go as NOPs.
    for (const uint32_t i : backlogged_) {
        for (TxMsg *m = remotes_[i].backlog_head; m != nullptr; m = m->next) {
            if (m->qp == ctx) {
                m->cancelled = true;
                m->qp = nullptr;
            }
        }
    }
    const uint32_t slot = (ctx->qpn() & 0xffff) - 1;
    delete ctx;
    qp_slot_free(slot);
}

void Nic::qp_destroy(Qp *qp)
{
    const uint32_t slot = (qp->qpn() & 0xffff) - 1;
    void *block = qps_[slot].block;
    qp_detach(qps_[slot].ctx);
    delete qp;
    std::free(block);
}

void Nic::owner_release(Owner *owner)
{
    flush_writes();   // nothing bound for its memory waits past this
    for (size_t slot = 1; slot < conns_.size(); ++slot) {
        Connection &c = *conns_[slot];
        if (c.state != ConnState::kOpen || c.act == nullptr) {
            continue;
        }
        for (TxMsg *m = c.act->head; m != nullptr; m = m->next) {
            if (m->kind == TxMsg::Kind::kReadResponse && m->owner == owner) {
                m->owner = nullptr;   // tx_packet answers the rest with an error
            }
        }
    }
    for (auto it = notified_.begin(); it != notified_.end();) {
        it = *it == owner ? notified_.erase(it) : it + 1;
    }
}

unsigned Nic::qp_cancel(Qp *qp, srcnic_dest_t dest, uint32_t tag)
{
    return qp_cancel(qps_[(qp->qpn() & 0xffff) - 1].ctx, dest, tag);
}

unsigned Nic::qp_cancel(QpContext *ctx, srcnic_dest_t dest, uint32_t tag)
{
    // What is still in the send ring completes CANCELED as it is taken (cancelled_in_ring),
    // marked before anything is taken: a request to a QP of this NIC is carried out when it is
    // taken (local_send, local_write), and a cancelled one must not be. Requests posted after
    // this call are not its.
    const QpContext::Cancel which{dest, tag, ctx->sq().position() + ctx->sq().available()};
    if (!ctx->sq().empty()) {
        // One mark per destination and tag (a process that cancels again and again while its
        // ring is stuck, its completion ring full, adds no more): the later reaches further.
        auto &marks = ctx->cancels();
        auto same = std::find_if(marks.begin(), marks.end(), [&](const QpContext::Cancel &k) {
            return k.dest.peer == dest.peer && k.dest.qpn == dest.qpn && k.tag == tag;
        });
        if (same != marks.end()) {
            same->until = which.until;
        } else {
            marks.push_back(which);
        }
    }
    unsigned n = 0;
    // A large request not handed out whole yet (in chunks, or a local WRITE in pieces)
    // completes now, before another piece of it goes.
    ChunkCursor &k = ctx->cursor();
    if (k.active && which.covers(k.wqe)) {
        k.active = false;
        k.local = false;
        ctx->complete(make_cqe(k.wqe.wr_id, SRCNIC_ERR_CANCELED, k.wqe.opcode, 0));
        ++n;
    }
    // Then what was handed out (before the take below: what it hands out is not this call's).
    auto cancel = [&](Connection *c, TxMsg *head) {
        for (TxMsg *m = head; m != nullptr; m = m->next) {
            if (m->qp == ctx && !m->cancelled && m->peer_qpn == dest.qpn &&
                m->kind == TxMsg::Kind::kRequest && (tag == 0 || m->wqe.tag == tag)) {
                const bool completes = !m->more;
                m->status = SRCNIC_ERR_CANCELED;
                complete_request(c, m);
                m->cancelled = true;
                m->qp = nullptr;
                n += completes;
            }
        }
    };
    if (Connection *c = current(dest); c != nullptr && c->act != nullptr) {
        cancel(c, c->act->head);
    }
    if (Remote *r = remote_of(dest)) {
        cancel(nullptr, r->backlog_head);   // (they go as NOPs once a DCI takes them)
    }
    // Then the ring: what the take reaches completes now. What it does not reach (behind
    // another destination's request in chunks, waiting for room in the completion ring, past
    // the pass's share of local work) completes CANCELED when it is taken.
    cancelling_ = Cancelling{ctx, which, 0};
    requester_take();
    n += cancelling_.hits;
    cancelling_.qp = nullptr;
    return n;
}

srcnic_status_t Nic::dest_create(const srcnic_nic_addr_t &remote, uint32_t qpn, srcnic_dest_t *dest_p)
{
    LinkAddr la;
    la.family = remote.family;
    la.port = remote.port;
    la.scope_id = remote.scope_id;
    std::memcpy(la.ip, remote.ip, sizeof(la.ip));
    if (la.family != link_->local_addr().family || qpn == 0 || remote.incarnation == 0 ||
        remote.secret == 0) {
        return SRCNIC_ERR_INVALID_ADDR;
    }
    Remote *r = nullptr;
    if (auto it = remote_by_addr_.find(la); it != remote_by_addr_.end()) {
        r = &remotes_[it->second];
        const srcnic_status_t status = remote_status(*r);
        if (r->nic != remote.incarnation || status != SRCNIC_OK) {
            // A new incarnation at the address, or its connection or stream failed: the
            // destinations made so far keep failing (with why), the new ones start afresh.
            if (Connection *old = conn_by_id(r->dc ? r->dci : r->conn)) {
                conn_fail(old, SRCNIC_ERR_CONNECTION_RESET);
            }
            for (TxMsg *m = r->backlog_head, *next; m != nullptr; m = next) {
                next = m->next;   // requests still waiting for a DCI fail with the old peer
                if (m->qp != nullptr && !m->cancelled) {
                    m->status = SRCNIC_ERR_CONNECTION_RESET;
                    complete_request(nullptr, m);
                }
                msg_free(m);
            }
            ++remote_epoch_;
            Remote fresh;
            fresh.gen = static_cast<uint16_t>(r->gen + 1);
            fresh.failed_gen = r->gen;
            fresh.failed_status = static_cast<int16_t>(status != SRCNIC_OK ? status : SRCNIC_ERR_CONNECTION_RESET);
            *r = fresh;
        }
    } else {
        if (remotes_.size() >= kMaxRemotes) {
            return SRCNIC_ERR_NO_RESOURCE;
        }
        remotes_.emplace_back();
        r = &remotes_.back();
        remote_by_addr_[la] = static_cast<uint32_t>(remotes_.size() - 1);
    }
    r->addr = la;
    r->nic = remote.incarnation;
    r->secret = remote.secret;
    if (!r->dc && conn_by_id(r->conn) == nullptr) {
        if (auto it = conn_by_addr_.find(la); it != conn_by_addr_.end() &&
                                              peer_of(conns_[it->second].get()).nic != remote.incarnation) {
            // The address now belongs to a new incarnation: the old peer is gone.
            conn_fail(conns_[it->second].get(), SRCNIC_ERR_CONNECTION_RESET);
        }
        if (conn_for(*r) == nullptr) {
            if (config_.num_dci == 0) {
                return SRCNIC_ERR_NO_RESOURCE;
            }
            r->dc = true;   // the budget is spent: over DC (§8.1)
            count(SRCNIC_CNT_DC_FALLBACKS);
        }
    }
    if (!r->dc) {
        // What proves our SYN packets to the peer (a connection the peer opened has none yet).
        peer_of(conn_by_id(r->conn)).secret = remote.secret;
    }
    dest_p->peer = remote_id(*r);
    dest_p->qpn = qpn;
    return SRCNIC_OK;
}

bool Nic::dest_timing(srcnic_dest_t dest, uint32_t *srtt_us, uint32_t *rto_us) const
{
    const Connection *c = const_cast<Nic *>(this)->current(dest);
    if (dest_status(dest) != SRCNIC_OK || c == nullptr) {
        return false;
    }
    *srtt_us = c->srtt_us;
    *rto_us = rto_of(c);
    return true;
}

srcnic_status_t Nic::dest_status(srcnic_dest_t dest) const
{
    const uint32_t idx = (dest.peer & 0xffff) - 1;
    const uint32_t gen = dest.peer >> 16;
    if (idx >= remotes_.size()) {
        return SRCNIC_ERR_INVALID_PARAM;
    }
    const Remote &r = remotes_[idx];
    if (r.gen != gen) {
        return r.failed_gen == gen ? static_cast<srcnic_status_t>(r.failed_status)
                                   : SRCNIC_ERR_CONNECTION_RESET;
    }
    return remote_status(r);
}

uint32_t Nic::window_for(uint32_t seg_payload) const
{
    return srcnic::window_for(config_, seg_payload);
}

uint32_t Nic::full_window_for(uint32_t seg_payload) const
{
    const uint32_t window = window_for(seg_payload);
    if (config_.window != 0) {
        return window;
    }
    const uint32_t fits = link_->rx_queue_capacity(seg_payload + static_cast<uint32_t>(sizeof(PacketHeader)));
    return std::min(window, std::max(kMinFullWindow, fits));
}

size_t Nic::conn_state_bytes() const
{
    // A connection, the remote NIC it names and its share of the active halves (held or
    // pooled), averaged over the open connections, or what a first connection would take with
    // its active half.
    if (num_conns_ != 0) {
        const StateBytes b = state_bytes();
        return (b.connections + b.peer_nics + b.active) / num_conns_;
    }
    return sizeof(Connection) + sizeof(PeerNic) + sizeof(ConnActive) +
           window_for(mtu_ - static_cast<uint32_t>(sizeof(PacketHeader))) * sizeof(int32_t);
}

} // namespace srcnic
