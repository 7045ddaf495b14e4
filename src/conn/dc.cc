// Destinations and the DC fallback (PROTOCOL.md §8): where a destination's requests go (its
// connection, or the DCI attached to its remote NIC), the DCI pool and its quota, the DC target
// contexts (bounded, least recently used evicted when quiet) and the closed table that keeps
// exactly-once delivery across an eviction.
#include "nic/nic.h"

#include "core/log.h"
#include "core/nic_config.h"

#include <algorithm>
#include <cstring>

namespace srcnic {

srcnic_status_t Nic::remote_status(const Remote &r) const
{
    if (r.dc) {
        return static_cast<srcnic_status_t>(r.fail_status);
    }
    if (r.conn == 0) {
        return SRCNIC_OK;   // its connection was closed by agreement: the next request reopens
    }
    const uint32_t slot = r.conn & 0xffff;
    const uint32_t gen = r.conn >> 16;
    if (slot == 0 || slot >= conns_.size()) {
        return SRCNIC_ERR_CONNECTION_RESET;
    }
    const Connection &c = *conns_[slot];
    if (c.state == ConnState::kOpen && c.gen == gen && c.kind == ConnKind::kConn) {
        return SRCNIC_OK;
    }
    if (c.failed_gen == gen) {
        return static_cast<srcnic_status_t>(c.fail_status);
    }
    return SRCNIC_ERR_CONNECTION_RESET;
}

SRCNIC_HOT Connection *Nic::route(srcnic_dest_t dest, srcnic_status_t *status, bool request)
{
    Remote *r = remote_of(dest);
    if (r == nullptr) {
        *status = dest_status(dest);
        return nullptr;
    }
    if (!r->dc) {
        Connection *c = conn_by_id(r->conn);
        if (__builtin_expect(c == nullptr && r->conn == 0, 0)) {
            // Closed by agreement (demoted, §8.6): a connection again, or DC beyond the budget.
            c = conn_for(*r);
            if (c == nullptr && config_.num_dci != 0) {
                r->dc = true;   // (promoted again when it stays busy)
                count(SRCNIC_CNT_DC_FALLBACKS);
                return route(dest, status, request);
            }
        }
        if (c == nullptr) {
            *status = remote_status(*r);
            if (*status == SRCNIC_OK) {
                *status = SRCNIC_ERR_CONNECTION_RESET;
            }
        } else if (__builtin_expect(c->closing, 0)) {
            *status = SRCNIC_ERR_NO_RESOURCE;   // waits for the CLOSE's answer
            return nullptr;
        }
        return c;
    }
    if (r->fail_status != SRCNIC_OK) {
        *status = static_cast<srcnic_status_t>(r->fail_status);
        return nullptr;
    }
    if (request && config_.dc_promote != 0) {
        // Promotion: a DC peer that stays busy is worth a connection.
        const uint64_t t = now();
        if (t - r->dc_window_ns > kPromoteWindowNs) {
            r->dc_window_ns = t;
            r->dc_recent = 0;
        }
        if (++r->dc_recent >= config_.dc_promote && t >= r->no_promote_until &&
            r->backlog_head == nullptr) {
            if (!promote(*r, t)) {
                *status = SRCNIC_ERR_NO_RESOURCE;   // its DCI drains first
                return nullptr;
            }
            if (!r->dc) {
                return route(dest, status, request);
            }
        }
    }
    if (__builtin_expect(r->rev != 0, 0)) {
        // Its requests went back along a stream from it (§8.8): later ones follow while that
        // context may take them, and wait until they are acknowledged otherwise (nothing
        // overtakes them on a DCI).
        Connection *t = conn_by_id(r->rev);
        if (t != nullptr && t->kind == ConnKind::kDct && rev_unacked(t)) {
            if (rev_can_take(t)) {
                return t;
            }
            *status = SRCNIC_ERR_NO_RESOURCE;
            return nullptr;
        }
        r->rev = 0;
    }
    Connection *c = r->dci != 0 ? conn_by_id(r->dci) : nullptr;
    if ((c == nullptr || c->quiet()) && r->backlog_head == nullptr && !rev_cands_.empty()) {
        // (Its own DCI, if any, holds nothing unacknowledged: nothing is overtaken.)
        if (Connection *t = rev_find(r)) {
            r->rev = t->id;
            dc_of(t)->remote = static_cast<uint32_t>(r - remotes_.data());
            dc_of(t)->rev_sent = true;
            count(SRCNIC_CNT_DC_REVERSE_SENT, request);
            return t;
        }
    }
    if (c == nullptr) {
        c = dci_attach(*r);
        if (c == nullptr) {
            dc_wait_ = true;
            *status = SRCNIC_ERR_NO_RESOURCE;
            return nullptr;
        }
    } else if (request && config_.dc_quota != 0 && dc_wait_prev_ &&
               dc_of(c)->dc_taken >= config_.dc_quota) {
        // Others wait for a DCI: this one takes no more, drains and is handed over.
        *status = SRCNIC_ERR_NO_RESOURCE;
        return nullptr;
    }
    if (r->backlog_head != nullptr) {
        backlog_to(*r, c);
    }
    dc_of(c)->dc_taken += request;
    c->used = now();
    return c;
}

Connection *Nic::current(srcnic_dest_t dest)
{
    Remote *r = remote_of(dest);
    if (r == nullptr) {
        return nullptr;
    }
    if (r->dc && r->rev != 0) {
        if (Connection *t = conn_by_id(r->rev); t != nullptr && t->kind == ConnKind::kDct) {
            return t;   // (its requests went back along a stream, §8.8)
        }
    }
    return conn_by_id(r->dc ? r->dci : r->conn);
}

bool Nic::promote(Remote &r, uint64_t now)
{
    if (num_conns_ - self_conns_ >= config_.max_connections && conn_by_addr_.count(r.addr) == 0) {
        // No room: an idle connection is asked to close, and this peer takes its place once
        // it has (its next requests try again); with none idle, it tries again later.
        if (closing_.empty() && !demote_one(now)) {
            r.no_promote_until = now + kPromoteWindowNs;
        }
        return true;
    }
    Connection *d = r.dci != 0 ? conn_by_id(r.dci) : nullptr;
    if (d != nullptr && !dci_may_go(d)) {
        return false;   // what is on the stream completes first: nothing overtakes it
    }
    if (d != nullptr) {
        dci_release(d);
    }
    Connection *c = conn_for(r);
    if (c == nullptr) {
        r.no_promote_until = now + kPromoteBackoffNs;
        return true;
    }
    r.dc = false;
    r.dc_recent = 0;
    count(SRCNIC_CNT_DC_PROMOTED);
    SRCNIC_LOG_DEBUG("%s promoted from DC to connection %u", r.addr.to_string().c_str(), c->id);
    return true;
}

Connection *Nic::conn_for(Remote &r)
{
    Connection *c = nullptr;
    if (auto it = conn_by_addr_.find(r.addr); it != conn_by_addr_.end()) {
        // The peer opened one to us meanwhile. Taken even while we ask to CLOSE it: r's
        // requests wait for the answer (route) and open another only once it is closed; a
        // second connection now would reach the peer as a new one and fail the first there.
        c = conns_[it->second].get();
        if (peer_of(c).nic != r.nic) {
            c = nullptr;
        }
    }
    if (c == nullptr) {
        c = conn_open(r.addr, r.nic);
    }
    if (c != nullptr) {
        peer_of(c).secret = r.secret;   // (one the peer opened has none yet)
        r.conn = c->id;
    }
    return c;
}

bool Nic::demote_one(uint64_t now)
{
    if (!closing_.empty()) {
        return false;   // one at a time
    }
    Connection *lru = nullptr;
    for (size_t slot = 1; slot < conns_.size(); ++slot) {
        Connection *c = conns_[slot].get();
        if (c->state != ConnState::kOpen || c->kind != ConnKind::kConn || c->self) {
            continue;
        }
        if (c->quiet() && !c->in_active && c->peer_conn != 0 && now - c->used >= kDemoteIdleNs &&
            (lru == nullptr || c->used < lru->used)) {
            lru = c;
        }
    }
    if (lru == nullptr) {
        return false;
    }
    lru->closing = true;
    engage(lru)->close_tries = 1;   // (kept until the answer: disengage waits for it)
    lru->act->close_sent_ns = now;
    closing_.push_back(lru->id);
    tx_control(lru, Opcode::kCLOSE, lru->next_psn, static_cast<uint32_t>(CloseKind::kAsk));
    SRCNIC_LOG_DEBUG("connection %u to %s idle: asking to close it", lru->id,
                     peer_of(lru).addr.to_string().c_str());
    return true;
}

void Nic::conn_close(Connection *c)
{
    if (auto it = remote_by_addr_.find(peer_of(c).addr); it != remote_by_addr_.end()) {
        Remote &r = remotes_[it->second];
        if (!r.dc && r.conn == c->id) {
            r.conn = 0;   // its next request opens a connection again (or goes over DC)
        }
    }
    auto it = std::find(closing_.begin(), closing_.end(), c->id);
    if (it != closing_.end()) {
        closing_.erase(it);
    }
    c->closing = false;
    conn_release(c);
}

void Nic::close_received(Connection *c, const PacketHeader &h)
{
    if (c->kind != ConnKind::kConn) {
        count(SRCNIC_CNT_DROP_BAD_RESPONSE);
        return;
    }
    switch (static_cast<CloseKind>(h.imm)) {
    case CloseKind::kAsk: {
        // Agreed only if nothing is in flight either way: everything it sent was received here
        // (its next PSN), everything we sent it holds (its ack), and nothing is owed.
        const bool agree = !c->closing && c->quiet() && c->expected_psn == h.psn &&
                           c->next_psn == h.ack_psn && !c->self;
        tx_control(c, Opcode::kCLOSE, c->next_psn,
                   static_cast<uint32_t>(agree ? CloseKind::kAgreed : CloseKind::kRefused));
        if (agree) {
            count(SRCNIC_CNT_CONN_DEMOTED);
            conn_close(c);
        }
        break;
    }
    case CloseKind::kAgreed:
        if (c->closing && c->quiet()) {
            count(SRCNIC_CNT_CONN_DEMOTED);
            conn_close(c);
        }
        break;
    default:   // refused: it stays
        if (c->closing) {
            c->closing = false;
            closing_.erase(std::find(closing_.begin(), closing_.end(), c->id));
            if (!c->in_active) {
                disengage(c);
            }
        }
        break;
    }
}

void Nic::close_sweep(uint64_t now)
{
    for (size_t i = 0; i < closing_.size(); ++i) {
        Connection *c = conn_by_id(closing_[i]);
        if (c == nullptr) {
            closing_.erase(closing_.begin() + static_cast<std::ptrdiff_t>(i));
            return;
        }
        if (now - c->act->close_sent_ns < static_cast<uint64_t>(c->act->rto_us) * kNsPerUs) {
            continue;
        }
        if (c->act->close_tries >= std::min<uint32_t>(config_.retry_count, 255)) {
            conn_fail(c, SRCNIC_ERR_ENDPOINT_TIMEOUT);   // (removed from closing_ next call)
            return;
        }
        ++c->act->close_tries;
        c->act->close_sent_ns = now;
        tx_control(c, Opcode::kCLOSE, c->next_psn, static_cast<uint32_t>(CloseKind::kAsk));
    }
}

Connection *Nic::lru_quiet(const std::vector<uint32_t> &ids, uint64_t now, uint64_t min_idle_ns)
{
    Connection *lru = nullptr;
    for (uint32_t id : ids) {
        Connection *d = conn_by_id(id);
        if (d != nullptr && (d->kind == ConnKind::kDci ? dci_may_go(d) : d->quiet()) &&
            now - std::min(now, d->used) >= min_idle_ns &&
            (lru == nullptr || d->used < lru->used)) {
            lru = d;
        }
    }
    return lru;
}

Connection *Nic::dci_attach(Remote &r)
{
    Connection *c = conn_open(r.addr, r.nic, false, ConnKind::kDci);
    if (c == nullptr) {
        // Every DCI is attached: hand over the least recently used quiet one.
        Connection *lru = lru_quiet(dcis_, 0, 0);
        if (lru == nullptr) {
            return nullptr;
        }
        dc_handed_over_ns_ = now();
        dci_release(lru);
        c = conn_open(r.addr, r.nic, false, ConnKind::kDci);
    }
    peer_of(c).secret = r.secret;
    DcConn *d = dc_of(c);
    d->remote = static_cast<uint32_t>(&r - remotes_.data());
    if (++dc_serial_ == 0) {
        dc_serial_ = 1;
    }
    d->stream = dc_serial_;   // (conn_open left release_asked false, as every DcConn field)
    r.dci = c->id;
    count(SRCNIC_CNT_DC_STREAMS);
    return c;
}

void Nic::dci_release(Connection *c)
{
    SRCNIC_LOG_DEBUG("DCI %u released from %s (stream %u, %u requests)", c->id,
                     peer_of(c).addr.to_string().c_str(), dc_of(c)->stream, dc_of(c)->dc_taken);
    if (dc_of(c)->rev_run && c->peer_conn != 0) {
        dci_close(c);   // its target waits to hear that its requests ran (§8.8)
        return;
    }
    if (c->peer_conn != 0) {
        // The target may forget the stream now (unacknowledged: if lost, its closed entry
        // lingers instead).
        tx_control(c, Opcode::kDC_CLOSE, c->next_psn, 0);
    }
    conn_release(c);
}

void Nic::dci_sweep(uint64_t now)
{
    // One DCI per call: a DCI quiet for kDcMinQuietNs goes back to the pool, and its target's
    // context and closed entry with it.
    if (dcis_.empty()) {
        return;
    }
    dci_sweep_ = (dci_sweep_ + 1) % dcis_.size();
    Connection *c = conn_by_id(dcis_[dci_sweep_]);
    if (c != nullptr && dc_of(c)->release_asked) {
        dci_release_asked(c);
    } else if (c != nullptr && dci_may_go(c) && now - c->used >= kDcMinQuietNs) {
        dci_release(c);
    }
}

void Nic::backlog_to(Remote &r, Connection *c)
{
    while (r.backlog_head != nullptr) {
        TxMsg *m = r.backlog_head;
        r.backlog_head = m->next;
        msg_append(c, m);
    }
    r.backlog_tail = nullptr;
}

void Nic::fall_back_to_dc(Connection *c)
{
    auto it = remote_by_addr_.find(peer_of(c).addr);
    Remote *r = it != remote_by_addr_.end() ? &remotes_[it->second] : nullptr;
    if (r == nullptr || r->dc || r->conn != c->id || config_.num_dci == 0) {
        // Not one of our destinations' connections (the peer's answer to a connection it
        // opened is not ours to follow), or no DC here: refused as before DC.
        conn_fail(c, SRCNIC_ERR_CONNECTION_RESET);
        return;
    }
    count(SRCNIC_CNT_DC_FALLBACKS);
    SRCNIC_LOG_DEBUG("%s has no connection for us: connection %u moves to DC",
                     peer_of(c).addr.to_string().c_str(), c->id);
    // Nothing of it was executed (the peer refused every packet): its requests go again, in
    // order, ahead of anything posted later.
    while (c->act->head != nullptr) {
        TxMsg *m = c->act->head;
        c->act->head = m->next;
        m->next = nullptr;
        if (m->kind != TxMsg::Kind::kRequest) {
            msg_free(m);
            continue;
        }
        if (r->backlog_tail != nullptr) {
            r->backlog_tail->next = m;
        } else {
            r->backlog_head = m;
        }
        r->backlog_tail = m;
    }
    c->act->tail = nullptr;
    c->act->short_inflight = 0;
    conn_release(c);
    r->dc = true;
    r->conn = 0;
    r->no_promote_until = now() + kPromoteBackoffNs;   // the peer has no room for us
    if (r->backlog_head != nullptr) {
        backlogged_.push_back(static_cast<uint32_t>(r - remotes_.data()));
        tx_due_ = true;
    }
}

Connection *Nic::dct_for(const PacketHeader &h, const LinkAddr &src)
{
    const ClosedKey key{src, h.src_nic, h.stream, false};
    if (auto it = dct_by_stream_.find(key); it != dct_by_stream_.end()) {
        Connection *c = conns_[it->second].get();
        if (c->peer_conn == h.src_conn) {
            return c;
        }
        count(SRCNIC_CNT_DROP_WRONG_GEN);   // another DCI claims the stream
        return nullptr;
    }
    auto closed = closed_.find(key);
    const bool resumed = closed != closed_.end();
    const Closed was = resumed ? closed->second : Closed{};
    if (!resumed && h.psn != 1) {
        // A stream starts at PSN 1; a later packet of one this NIC neither holds nor remembers
        // is stale (or its first packet is still on the way): executing it could repeat what an
        // evicted context did, so it is dropped and resent.
        count(SRCNIC_CNT_DROP_DC_STALE);
        return nullptr;
    }
    if (config_.dc_targets == 0) {
        // No DC targets here: refused like a connection beyond the budget without DC.
        count(SRCNIC_CNT_DROP_NO_CONN);
        tx_reset(src, h.src_nic, h.src_conn, h.job_key);
        return nullptr;
    }
    Connection *c = dcts_.size() < config_.dc_targets || dct_evict()
                        ? conn_open(src, h.src_nic, false, ConnKind::kDct)
                        : nullptr;
    if (c == nullptr) {
        dc_busy(h, src);
        return nullptr;
    }
    dc_of(c)->stream = h.stream;
    dc_of(c)->id_known = false;
    c->peer_conn = h.src_conn;
    if (resumed) {
        // It went on after its context was evicted: PSNs before rx_psn were executed (and are
        // acknowledged again, not executed), and our answers go on where they stopped.
        c->expected_psn = was.rx_psn;
        c->next_psn = was.tx_psn;   // (the active half starts from it)
        closed_.erase(key);   // (its FIFO entry is skipped when it comes up)
        count(SRCNIC_CNT_DC_RESUMED);
    } else {
        count(SRCNIC_CNT_DC_TARGETS_OPENED);
    }
    dct_by_stream_[key] = c->id & 0xffff;
    return c;
}

void Nic::dc_busy(const PacketHeader &h, const LinkAddr &src)
{
    count(SRCNIC_CNT_DC_BUSY_SENT);
    tx_nak_unbound(src, h, NakReason::kDcBusy);
    dc_crowded_until_ns_ = now() + kDcCrowdNs;
}

bool Nic::dc_crowded()
{
    if (dc_crowded_until_ns_ != 0 && now() >= dc_crowded_until_ns_) {
        dc_crowded_until_ns_ = 0;
    }
    return dc_crowded_until_ns_ != 0;
}

void Nic::dci_release_asked(Connection *c)
{
    if (c->state == ConnState::kOpen && dci_may_go(c)) {
        count(SRCNIC_CNT_DC_RELEASES_ASKED);
        dci_release(c);
    }
}

bool Nic::dct_evict()
{
    // Only a context quiet for a while (dc_evict_us): one that just answered is likely to hear
    // from its initiator again within a round trip, and evicting it then costs that stream a
    // DC_GONE and a resume (under a crowd of new streams every context thrashed so). Not much
    // longer: meanwhile new streams are answered DC_BUSY and back off for an RNR delay.
    const uint64_t now = this->now();
    Connection *lru = lru_quiet(dcts_, now, static_cast<uint64_t>(config_.dc_evict_us) * kNsPerUs);
    if (lru == nullptr || !closed_room(now)) {
        return false;
    }
    count(SRCNIC_CNT_DC_EVICTIONS);
    const PeerNic &p = peer_of(lru);
    SRCNIC_LOG_DEBUG("DC target %u evicted (stream %u of %s at PSN %u)", lru->id, dc_of(lru)->stream,
                     p.addr.to_string().c_str(), lru->expected_psn);
    closed_add(ClosedKey{p.addr, p.nic, dc_of(lru)->stream, false},
               Closed{lru->expected_psn, lru->next_psn, 0}, now);
    conn_release(lru);
    return true;
}

void Nic::dc_gone(const PacketHeader &h, const LinkAddr &src)
{
    // Answered only for a stream this NIC holds (in the closed table, or resumed meanwhile in
    // another context, by a SYN packet the sender had in flight): nobody else learns anything
    // from it (§7.3).
    const ClosedKey key{src, h.src_nic, h.stream, false};
    if (h.opcode == static_cast<uint8_t>(Opcode::kDC_CLOSE)) {
        // A context that sent requests back and went at the close: the confirmation was lost
        // (the DCI resends its close), and is sent again while the slot names it (§8.8).
        const uint32_t slot = h.dst_conn & 0xffff;
        if (slot != 0 && slot < conns_.size()) {
            Connection &s = *conns_[slot];
            if (s.state != ConnState::kOpen && s.kind == ConnKind::kDct && s.id == h.dst_conn &&
                dc_of(&s)->rev_sent && dc_of(&s)->stream == h.stream && s.peer_conn == h.src_conn &&
                dc_of(&s)->peer_nic.nic == h.src_nic && dc_of(&s)->peer_nic.addr == src &&
                s.expected_psn == h.psn) {
                tx_control(&s, Opcode::kDC_CLOSE, s.next_psn, 0);
                return;
            }
        }
        // Its context was evicted: the closed entry goes, if it is where the stream ended.
        auto it = closed_.find(key);
        if (it != closed_.end() && it->second.rx_psn == h.psn) {
            closed_.erase(it);
            count(SRCNIC_CNT_DC_CLOSED);
        }
        return;
    }
    if (h.src_conn == 0) {
        // A DCI always has an id: a DC_GONE could only name nobody (an answer with no
        // connection of the receiver's, which every receiver drops as an unproved SYN).
        count(SRCNIC_CNT_DROP_NO_CONN);
        return;
    }
    if ((closed_.count(key) == 0 && dct_by_stream_.count(key) == 0) ||
        h.opcode == static_cast<uint8_t>(Opcode::kNAK) || h.opcode == static_cast<uint8_t>(Opcode::kACK)) {
        count(SRCNIC_CNT_DROP_DC_STALE);
        return;
    }
    count(SRCNIC_CNT_DC_GONE_SENT);
    tx_nak_unbound(src, h, NakReason::kDcGone);
}

bool Nic::closed_room(uint64_t now)
{
    const size_t cap = closed_fifo_.size();
    // Entries resumed (or closed again) meanwhile are skipped; the others leave once no
    // initiator can resend into their stream any more.
    while (closed_count_ != 0) {
        const ClosedRef &ref = closed_fifo_[closed_head_];
        auto it = closed_.find(ref.key);
        const bool live = it != closed_.end() && it->second.seq == ref.seq;
        if (live && now - ref.since_ns < closed_linger_ns_) {
            return closed_count_ < cap;
        }
        if (live) {
            closed_.erase(it);
        }
        closed_head_ = (closed_head_ + 1) % cap;
        --closed_count_;
    }
    return true;
}

void Nic::closed_add(const ClosedKey &k, Closed v, uint64_t now)
{
    const size_t cap = closed_fifo_.size();
    if (closed_count_ == cap) {
        const ClosedRef &ref = closed_fifo_[closed_head_];
        auto it = closed_.find(ref.key);
        if (it != closed_.end() && it->second.seq == ref.seq) {
            closed_.erase(it);
        }
        closed_head_ = (closed_head_ + 1) % cap;
        --closed_count_;
    }
    v.seq = ++closed_seq_;
    closed_[k] = v;
    closed_fifo_[(closed_head_ + closed_count_) % cap] = ClosedRef{k, v.seq, now};
    ++closed_count_;
}

Nic::StateBytes Nic::state_bytes() const
{
    StateBytes b;
    for (size_t slot = 1; slot < conns_.size(); ++slot) {
        const Connection &c = *conns_[slot];
        if (c.state != ConnState::kOpen) {
            continue;
        }
        switch (c.kind) {
        case ConnKind::kConn: b.connections += sizeof(Connection); break;
        case ConnKind::kDci: b.dcis += sizeof(DcConn); break;
        case ConnKind::kDct: b.dc_targets += sizeof(DcConn); break;
        }
    }
    // Active halves, held or kept, each with its reorder slots.
    auto half = [](const ConnActive *a) { return sizeof(ConnActive) + a->reorder_cap * sizeof(int32_t); };
    for (size_t slot = 1; slot < conns_.size(); ++slot) {
        const Connection &c = *conns_[slot];
        if (c.state == ConnState::kOpen && c.act != nullptr) {
            b.active += half(c.act);
        }
    }
    for (const ConnActive *a = act_free_; a != nullptr; a = a->next_free) {
        b.active += half(a);
    }
    // An entry: its key and value (a hash table's own overhead not counted; a NIC's table
    // would be a flat array of such entries).
    b.closed = closed_.size() * (sizeof(ClosedKey) + sizeof(Closed)) + refused_.bytes();
    b.remotes = remotes_.size() * sizeof(Remote);
    b.peer_nics = (peer_nics_.size() - 1 - free_peer_nics_.size()) * sizeof(PeerNic);
    b.stats = conn_stats_.size() * sizeof(ConnStats);
    b.qps = (qps_.size() - free_qp_slots_.size()) * sizeof(QpContext);
    return b;
}

namespace {

// A refused connection's key as bytes for the refused set's hash: the address as LinkAddr
// compares it (an IPv4 address's unused bytes left out), the incarnation, the connection id.
struct RefusedBytes {
    uint8_t b[40];
    size_t len = 0;
    RefusedBytes(const LinkAddr &addr, uint64_t nic, uint32_t id)
    {
        put(&addr.family, 1);
        put(&addr.port, 2);
        put(&addr.scope_id, 4);
        put(addr.ip, addr.family == LinkAddr::kFamilyInet ? 4 : 16);
        put(&nic, 8);
        put(&id, 4);
    }
    void put(const void *p, size_t n)
    {
        std::memcpy(b + len, p, n);
        len += n;
    }
};

} // namespace

// Acknowledgements of DC streams on other packets (PROTOCOL.md §8.7). A stream carries
// requests one way: its target context's acknowledgement, asked for by every request (§8.2),
// would otherwise be a packet of its own even when this NIC sends the initiator's NIC a packet
// at once, typically the reply on a stream of its own (4 packets a round trip over DC against a
// connection's 3, perf/results/2026-11-27-dc-link/NOTES.md).
namespace {

// t's acknowledgement may ride on another packet: its DCI knows t's id (else only a packet of
// t's teaches it, and without it the DCI cannot close the stream: t would linger until
// evicted), the acknowledgement is owed for the next transmit pass only (ACK_REQ), covers
// everything that arrived (nothing held out of order: an XACK has no selective part), and t
// has no packet of its own unacknowledged or unsent, so that every reverse packet it sent has
// arrived before the acknowledgement does (§5.4 holds without a stream position).
bool xack_ready(const Connection *t)
{
    return t->state == ConnState::kOpen && t->kind == ConnKind::kDct && t->peer_conn != 0 &&
           dc_of(t)->id_known && t->act != nullptr && t->act->ack_pending && t->act->ack_next &&
           t->act->reorder_count == 0 && t->act->head == nullptr && t->act->send_psn == t->next_psn &&
           !t->act->has_deferred_ack && t->act->err_answers_unsent == 0;
}

} // namespace

void Nic::xack_list(Connection *c)
{
    DcConn *t = dc_of(c);
    if (!t->xack_listed) {
        t->xack_listed = true;
        xack_cands_.push_back(c->id & 0xffff);
    }
}

SRCNIC_HOT void Nic::xack_attach(const Connection *c, PacketHeader *h, const LinkAddr &dst)
{
    for (const uint32_t slot : xack_cands_) {
        Connection *t = conns_[slot].get();
        const PeerNic &p = dc_of(t)->peer_nic;   // (every slot listed is a DC slot)
        if (t == c || p.nic != h->dst_nic || !(p.addr == dst) || !xack_ready(t)) {
            continue;
        }
        h->flags |= kFlagXack;
        h->auth = make_xack(t->peer_conn, t->expected_psn);
        t->act->ack_pending = t->act->ack_now = t->act->ack_next = false;
        t->act->unacked_rx = 0;
        t->act->unacked_rx_bytes = 0;
        count(SRCNIC_CNT_DC_XACKS_SENT);
        return;   // one a packet
    }
}

void Nic::xack_flush()
{
    // What no packet of the pass carried goes as ACKs now (activated again if the link blocks).
    for (const uint32_t slot : xack_later_) {
        Connection *t = conns_[slot].get();
        if (t->state == ConnState::kOpen && t->act != nullptr && t->act->ack_pending) {
            if (tx_blocked_) {
                activate_now(t);
            } else {
                tx_control(t, Opcode::kACK, ack_position(t), 0);
            }
        }
    }
    xack_later_.clear();
    // Contexts whose acknowledgement went (or that went) leave the list.
    size_t keep = 0;
    for (const uint32_t slot : xack_cands_) {
        Connection *t = conns_[slot].get();
        if (xack_ready(t)) {
            xack_cands_[keep++] = slot;
        } else {
            dc_of(t)->xack_listed = false;
        }
    }
    xack_cands_.resize(keep);
}

void Nic::xack_again(const PeerNic &to)
{
    for (const uint32_t id : dcts_) {
        Connection *t = conn_by_id(id);
        if (t == nullptr || (t->act != nullptr && t->act->ack_pending)) {
            continue;
        }
        const PeerNic &p = dc_of(t)->peer_nic;
        if (p.nic == to.nic && p.addr == to.addr) {
            owe_ack_now(t);
            activate_now(t);
        }
    }
}

void Nic::xack_not_sent(const PacketHeader &h)
{
    for (const uint32_t id : dcts_) {
        Connection *t = conn_by_id(id);
        if (t != nullptr && t->peer_conn == xack_conn(h.auth) && dc_of(t)->peer_nic.nic == h.dst_nic) {
            owe_ack_now(t);
            activate(t);
            return;
        }
    }
}

void Nic::rx_xack(Connection *c, const PacketHeader &h)
{
    // The packet is bound to c (PROTOCOL.md §7.2): it comes from c's remote NIC, which may
    // acknowledge only a stream of one of our DCIs attached to itself. A DCI attached again
    // has another id (its generation changed), so an XACK of an earlier stream finds nothing.
    Connection *d = conn_by_id(xack_conn(h.auth));
    const uint32_t ack = xack_psn(h.auth);
    const PeerNic &from = peer_of(c);
    if (d == nullptr || d == c || d->kind != ConnKind::kDci || dc_of(d)->peer_nic.nic != from.nic ||
        !(dc_of(d)->peer_nic.addr == from.addr) ||
        psn_before(d->act != nullptr ? d->act->send_psn : d->next_psn, ack)) {
        // Another NIC's stream, a DCI handed over since, or what was never sent.
        count(SRCNIC_CNT_DROP_XACK_UNMATCHED);
        return;
    }
    // Applied only if it tells something new: an older one (a packet held back) or one for an
    // idle DCI (everything acknowledged) changes nothing.
    if (d->act != nullptr && psn_before(d->act->sack_base, ack)) {
        PacketHeader a{};
        a.ack_psn = ack;
        note_sack(d, a);
        apply_ack(d, ack);
        count(SRCNIC_CNT_DC_XACKS_APPLIED);
    }
}

// Requests back along a stream (PROTOCOL.md §8.8). A stream carries requests one way, so a
// reply to a request that came over DC took a stream of the replier's own: a DCI handed over to
// the requester's NIC, a target context there (or DC_BUSY when they are all taken), and their
// DC_CLOSE, 6 packets a round trip against a connection's 3 once the DCIs no longer cover the
// peers (perf/results/2026-11-27-dc-link/NOTES.md). Instead the target context sends the reply
// back along the stream it came on, and the DCI runs it as a connection's responder would.

bool Nic::rev_can_take(const Connection *t) const
{
    // Its DCI cannot be quiet (nor hand over) before a packet of t's reaches it: t owes it the
    // acknowledgement of a request (ACK_REQ), which goes with the next transmit pass at the
    // latest, on this request's first packet or, should that not go then, as an ACK whose
    // stream position (§5.4) holds the DCI back until this request has arrived. And the stream
    // is new (its DCI has not named t by its id yet): a DCI that keeps its stream across
    // requests covers its target, and our own DCI to that NIC, kept as well, carries a run of
    // requests without waiting for each one's acknowledgement (perf/results/
    // 2026-12-03-dc-reverse/NOTES.md: an all-to-all of 8 ranks over DC was 4-10 % slower
    // when replies went back along such streams).
    return t->state == ConnState::kOpen && dc_of(t)->rev_ok && !dc_of(t)->id_known &&
           t->act != nullptr && t->act->ack_pending && t->act->ack_next &&
           t->act->reorder_count == 0 && !t->act->inbound.active;
}

Connection *Nic::rev_find(const Remote *r)
{
    for (size_t i = 0; i < rev_cands_.size();) {
        Connection *t = conns_[rev_cands_[i]].get();
        if (t->kind != ConnKind::kDct || !rev_can_take(t)) {
            if (t->dc_slot) {
                dc_of(t)->rev_listed = false;   // (listed again by its next ACK_REQ)
            }
            rev_cands_[i] = rev_cands_.back();
            rev_cands_.pop_back();
            continue;
        }
        if (r != nullptr && dc_of(t)->peer_nic.nic == r->nic && dc_of(t)->peer_nic.addr == r->addr) {
            return t;
        }
        ++i;
    }
    return nullptr;
}

bool Nic::rev_unacked(const Connection *t)
{
    if (t->act == nullptr) {
        return false;
    }
    for (const TxMsg *m = t->act->head; m != nullptr; m = m->next) {
        if (m->kind == TxMsg::Kind::kRequest && !m->acked) {
            return true;
        }
    }
    return false;
}

bool Nic::dci_close_early(Connection *c)
{
    // Quiet but for the acknowledgement, while the DCIs do not cover the targets (every one
    // attached or closing, or one handed over to another target within the DCI quiet time): it
    // would be handed over for a next target anyway, and DC_CLOSE now carries the
    // acknowledgement an ACK would have. (While they cover them, it keeps its target: the next
    // request to it needs no new stream.)
    const ConnActive *a = c->act;
    if (c->closing || a->head != nullptr || a->inbound.active || a->reorder_count != 0 ||
        a->has_deferred_ack || a->err_answers_unsent != 0 || c->peer_conn == 0 ||
        (dcis_.size() + dc_closing_.size() < config_.num_dci &&
         now() - dc_handed_over_ns_ >= kDcMinQuietNs) ||
        dc_closing_.size() >= dc_closing_max()) {
        return false;
    }
    dci_close(c);
    return true;
}

void Nic::dci_close(Connection *c)
{
    Remote &r = remotes_[dc_of(c)->remote];
    if (r.dci == c->id) {
        r.dci = 0;   // its next request attaches another DCI: this stream is over
    }
    erase_id(dcis_, c->id);
    c->closing = true;
    dc_closing_.push_back(c->id);
    tx_control(c, Opcode::kDC_CLOSE, c->next_psn, 0);   // (its acknowledgement, owed or not)
    // Quiet now: what it keeps until the confirmation fits in the slot (no active half).
    if (c->act != nullptr) {
        act_put(c);
    }
    c->used = now();
    dc_of(c)->dc_taken = 1;
    dc_close_due_ns_ =
        std::min(dc_close_due_ns_, c->used + static_cast<uint64_t>(rto_of(c)) * kNsPerUs);
}

void Nic::dc_close_sweep(uint64_t now)
{
    // Called for every requester pass: it looks at the closing DCIs only once one is due.
    if (now < dc_close_due_ns_) {
        return;
    }
    uint64_t due = UINT64_MAX;
    for (size_t i = 0; i < dc_closing_.size();) {
        Connection *c = conns_[dc_closing_[i] & 0xffff].get();   // (closing: conn_release drops it)
        const uint64_t rto_ns = static_cast<uint64_t>(rto_of(c)) * kNsPerUs;
        if (now - c->used >= rto_ns) {
            if (dc_of(c)->dc_taken >= config_.retry_count) {
                // No answer: its target is gone (evicted, failed or restarted), and nothing
                // of the stream is outstanding here.
                conn_release(c);   // (index i now holds what was last)
                continue;
            }
            ++dc_of(c)->dc_taken;
            c->used = now;
            tx_control(c, Opcode::kDC_CLOSE, c->next_psn, 0);
        }
        due = std::min(due, c->used + rto_ns);
        ++i;
    }
    dc_close_due_ns_ = due;
}

void Nic::dci_closing_rx(Connection *c, const PacketHeader &h)
{
    if (h.opcode == static_cast<uint8_t>(Opcode::kDC_CLOSE)) {
        count(SRCNIC_CNT_DC_CLOSE_CONFIRMED);
        conn_release(c);
    } else if (opcode_info(h.opcode).sequenced) {
        // A request or answer resent, or sent after the close: nothing runs any more; the
        // target learns what ran from the close.
        tx_control(c, Opcode::kDC_CLOSE, c->next_psn, 0);
    }
}

void Nic::dct_closed(Connection *c, const PacketHeader &h)
{
    apply_ack(c, h.ack_psn);
    // An acknowledgement still owed is not wanted any more: the initiator holds every PSN
    // acknowledged (else it would not close). Left owed, it kept the context from going here,
    // and its eviction later left a closed entry for the whole linger.
    ConnActive *a = c->act;
    a->ack_pending = a->ack_now = a->ack_next = false;
    a->unacked_rx = a->unacked_rx_bytes = 0;
    if (dc_of(c)->rev_sent) {
        rev_hand_back(c);
        // Confirmed, so that the DCI, kept until then, may serve another stream (§8.8).
        tx_control(c, Opcode::kDC_CLOSE, c->next_psn, 0);
    }
    // Its ack covers what we answered: the context goes without leaving a closed entry.
    if (c->quiet()) {
        count(SRCNIC_CNT_DC_CLOSED);
        conn_release(c);
    }
}

void Nic::rev_hand_back(Connection *c)
{
    // The DCI ran nothing of the stream after its close: what it does not acknowledge goes
    // again, in order, ahead of anything posted later, on a DCI of the Remote's own.
    ConnActive *a = c->act;
    Remote *r = &remotes_[dc_of(c)->remote];
    const PeerNic &p = dc_of(c)->peer_nic;
    if (!r->dc || r->nic != p.nic || !(r->addr == p.addr)) {
        r = nullptr;   // (the Remote was given to another incarnation meanwhile)
    }
    TxMsg *back_head = nullptr, *back_tail = nullptr;
    while (a->head != nullptr) {
        TxMsg *m = a->head;
        a->head = m->next;
        m->next = nullptr;
        if (m->kind != TxMsg::Kind::kRequest || m->acked || r == nullptr) {
            // (acknowledged yet not completed: a READ whose answer can no longer come)
            if (m->kind == TxMsg::Kind::kRequest && m->qp != nullptr && !m->cancelled) {
                m->status = SRCNIC_ERR_CONNECTION_RESET;
                complete_request(c, m);
            }
            msg_free(m);
            continue;
        }
        count(SRCNIC_CNT_DC_HANDED_BACK);
        (back_tail != nullptr ? back_tail->next : back_head) = m;
        back_tail = m;
    }
    a->tail = nullptr;
    a->short_inflight = 0;
    a->acked_psn = a->send_psn = a->resend_psn = a->resend_end = c->next_psn;
    a->rto_deadline_ns = a->probe_deadline_ns = 0;
    if (back_head != nullptr) {
        back_tail->next = r->backlog_head;
        if (r->backlog_head == nullptr) {
            r->backlog_tail = back_tail;
        }
        r->backlog_head = back_head;
        backlogged_.push_back(static_cast<uint32_t>(r - remotes_.data()));
        tx_due_ = true;
    }
}

void Nic::refused_add(const ClosedKey &k)
{
    const RefusedBytes key(k.addr, k.nic, k.id);
    refused_.add(key.b, key.len, now());
}

bool Nic::was_refused(const ClosedKey &k)
{
    const RefusedBytes key(k.addr, k.nic, k.id);
    return refused_.maybe_contains(key.b, key.len, now());
}

} // namespace srcnic
