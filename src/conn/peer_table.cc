// The peer table: connection slots indexed by connection id (slot | generation << 16, the
// generation unpredictable), the address map consulted only when a packet does not carry our id
// yet, and failure handling.
#include "nic/nic.h"

#include "core/clock.h"
#include "core/log.h"
#include "core/nic_config.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

namespace srcnic {

Connection *Nic::conn_by_id(uint32_t id)
{
    const uint32_t slot = id & 0xffff;
    if (slot == 0 || slot >= conns_.size()) {
        return nullptr;
    }
    Connection *c = conns_[slot].get();
    return (c->state == ConnState::kOpen && c->id == id) ? c : nullptr;
}

Connection *Nic::self_receiver(uint32_t sender)
{
    const Connection *x = conn_by_id(sender);
    if (x == nullptr || !x->self) {
        return nullptr;
    }
    auto it = mirror_of_.find(sender);
    return it != mirror_of_.end() ? conn_by_id(it->second) : nullptr;
}

uint32_t Nic::peer_nic_ref(const LinkAddr &addr, uint64_t nic)
{
    const ClosedKey key{addr, nic, 0, false};
    if (auto it = peer_nic_by_key_.find(key); it != peer_nic_by_key_.end()) {
        ++peer_nics_[it->second].refs;
        return it->second;
    }
    uint32_t index;
    if (!free_peer_nics_.empty()) {
        index = free_peer_nics_.back();
        free_peer_nics_.pop_back();
    } else {
        index = static_cast<uint32_t>(peer_nics_.size());
        peer_nics_.emplace_back();
    }
    PeerNic &p = peer_nics_[index];
    p.addr = addr;
    p.nic = nic;
    p.secret = 0;
    p.refs = 1;
    peer_nic_by_key_.emplace(key, index);
    return index;
}

void Nic::peer_nic_unref(uint32_t index)
{
    if (index == 0) {
        return;
    }
    PeerNic &p = peer_nics_[index];
    if (--p.refs == 0) {
        peer_nic_by_key_.erase(ClosedKey{p.addr, p.nic, 0, false});
        p = PeerNic();
        free_peer_nics_.push_back(index);
    }
}

Connection *Nic::conn_open(const LinkAddr &peer_addr, uint64_t peer_nic, bool mapped, ConnKind kind)
{
    const LinkAddr addr = peer_addr;   // (a copy: peer_addr may be the reused slot's own)
    // A connection of this NIC to itself (§5.7) is not a peer's: the budget does not count it.
    const bool self = addr == self_addr_ && peer_nic == addr_.incarnation;
    switch (kind) {
    case ConnKind::kConn:
        if (!self && num_conns_ - self_conns_ >= config_.max_connections) {
            count(SRCNIC_CNT_CONN_REFUSED);
            // Expected with DC: the peer is served over it (info, once in a while).
            SRCNIC_LOG_RATELIMITED(config_.num_dci != 0 ? LogLevel::kDebug : LogLevel::kWarn,
                                   "connection budget spent (%u connections): %s %s", num_conns_,
                                   addr.to_string().c_str(),
                                   config_.num_dci != 0 ? "goes over DC" : "refused");
            return nullptr;
        }
        break;
    case ConnKind::kDci:
        if (dcis_.size() >= config_.num_dci) {
            return nullptr;
        }
        break;
    case ConnKind::kDct:
        if (dcts_.size() >= config_.dc_targets) {
            return nullptr;
        }
        break;
    }
    const bool dc = kind != ConnKind::kConn;
    std::vector<uint32_t> &free = dc ? free_dc_slots_ : free_slots_;
    if (free.empty()) {
        conns_.emplace_back(dc ? new DcConn() : new Connection());
        free.push_back(static_cast<uint32_t>(conns_.size() - 1));
    }
    const uint32_t slot = free.back();
    free.pop_back();
    Connection *c = conns_[slot].get();
    const uint16_t opens = static_cast<uint16_t>(c->opens + 1);
    const uint16_t gen = gen_for(slot, opens);
    const uint32_t failed_gen = c->failed_gen;
    const int16_t fail_status = c->fail_status;
    const bool in_active = c->in_active;   // a released slot may still be listed (tx_schedule
                                           // drops it on its next pass)
    if (c->act != nullptr) {
        act_put(c);   // (conn_release gave it back; never reached)
    }
    // The slot's last occupant names its peer until now (reject_unknown_id).
    if (dc) {
        PeerNic p;
        p.addr = addr;
        p.nic = peer_nic;
        *dc_of(c) = DcConn();
        dc_of(c)->peer_nic = p;
    } else {
        const uint32_t peer = peer_nic_ref(addr, peer_nic);
        peer_nic_unref(c->peer);
        *c = Connection();
        c->peer = peer;
    }
    c->in_active = in_active;
    c->gen = gen;
    c->opens = opens;
    c->failed_gen = failed_gen;
    c->fail_status = fail_status;
    c->id = slot | (static_cast<uint32_t>(gen) << 16);
    c->state = ConnState::kOpen;
    c->kind = kind;
    // The link's datagram size for this peer (larger for a peer at our own address, which the
    // kernel reaches over loopback), unless the configuration fixed one for all; a UDP
    // datagram's payload is always less than 64 KiB.
    c->seg_payload = static_cast<uint16_t>(
        std::min<uint32_t>(UINT16_MAX, (config_.mtu != 0 ? mtu_ : std::max(mtu_, link_->path_mtu(addr))) -
                                           static_cast<uint32_t>(sizeof(PacketHeader))));
    c->used = now();
    if (conn_stats_.size() <= slot) {
        conn_stats_.resize(conns_.size());
    }
    conn_stats_[slot] = ConnStats();
    switch (kind) {
    case ConnKind::kConn:
        if (mapped) {
            conn_by_addr_[addr] = slot;
        }
        ++num_conns_;
        self_conns_ += self;
        count(SRCNIC_CNT_CONN_OPENED);
        break;
    case ConnKind::kDci:
        dcis_.push_back(c->id);
        break;
    case ConnKind::kDct:
        dcts_.push_back(c->id);
        counters_[SRCNIC_CNT_DC_TARGETS_MAX] =
            std::max<uint64_t>(counters_[SRCNIC_CNT_DC_TARGETS_MAX], dcts_.size());
        break;
    }
    SRCNIC_LOG_DEBUG("%s %u opened to %s (nic %llx)", to_string(kind), c->id,
                     addr.to_string().c_str(), static_cast<unsigned long long>(peer_nic));
    return c;
}

void Nic::conn_fail(Connection *c, srcnic_status_t status)
{
    count(SRCNIC_CNT_CONN_FAILED);
    ++remote_epoch_;
    // Info, not a warning: the failure reaches the consumer as the status of every request on
    // the connection and from srcnic_dest_status(), as a verbs QP's error reaches its CQ. UCX's
    // own transports hand a peer failure to the endpoint's error handler without a warning
    // (its UCT test suite fails on one), and UCP decides what to report.
    SRCNIC_LOG_RATELIMITED(LogLevel::kInfo, "connection %u to %s failed: %s", c->id,
                           peer_of(c).addr.to_string().c_str(), srcnic_status_string(status));
    if (ConnActive *a = c->act) {   // (an idle connection has nothing to fail)
        while (a->head != nullptr) {
            TxMsg *m = a->head;
            a->head = m->next;
            if (m->kind == TxMsg::Kind::kRequest && !m->cancelled && m->qp != nullptr) {
                m->status = static_cast<int16_t>(status);
                complete_request(c, m);
            }
            msg_free(m);
        }
        a->tail = nullptr;
        abort_inbound(c, status);
    }
    c->failed_gen = c->gen;
    c->fail_status = static_cast<int16_t>(status);
    if (c->kind == ConnKind::kDci) {
        // Its target is unreachable: the Remote's later requests fail the same way.
        remotes_[dc_of(c)->remote].fail_status = static_cast<int16_t>(status);
    } else if (c->kind == ConnKind::kDct) {
        // Remembered, if there is room, so that its initiator can go on (§8.4).
        const uint64_t now = this->now();
        if (closed_room(now)) {
            const PeerNic &p = peer_of(c);
            closed_add(ClosedKey{p.addr, p.nic, dc_of(c)->stream, false},
                       Closed{c->expected_psn, c->next_psn, 0}, now);
        }
    }
    conn_release(c);
}

void Nic::conn_release(Connection *c)
{
    if (ConnActive *a = c->act) {
        for (uint32_t i = 0; a->reorder_count != 0 && i < a->window; ++i) {
            if (a->reorder[i] >= 0) {
                buf_free(a->reorder[i]);
                a->reorder[i] = -1;
            }
        }
        a->reorder_count = 0;
        act_put(c);
    }
    const uint32_t slot = c->id & 0xffff;
    const PeerNic &p = peer_of(c);
    switch (c->kind) {
    case ConnKind::kConn: {
        auto it = conn_by_addr_.find(p.addr);
        if (it != conn_by_addr_.end() && it->second == slot) {
            conn_by_addr_.erase(it);
        }
        --num_conns_;
        self_conns_ -= p.addr == self_addr_ && p.nic == addr_.incarnation;
        if (c->self) {
            mirror_of_.erase(c->id);
        }
        break;
    }
    case ConnKind::kDci:
        if (remotes_[dc_of(c)->remote].dci == c->id) {
            remotes_[dc_of(c)->remote].dci = 0;
        }
        if (c->closing) {
            erase_id(dc_closing_, c->id);   // (confirmed, given up, or failed: §8.8)
            c->closing = false;
        } else {
            erase_id(dcis_, c->id);
        }
        break;
    case ConnKind::kDct:
        if (dc_of(c)->rev_sent && remotes_[dc_of(c)->remote].rev == c->id) {
            remotes_[dc_of(c)->remote].rev = 0;
        }
        dct_by_stream_.erase(ClosedKey{p.addr, p.nic, dc_of(c)->stream, false});
        erase_id(dcts_, c->id);
        break;
    }
    c->state = ConnState::kFree;
    // The id and the peer's identity stay until the slot is reused: a packet its peer still
    // sends to the connection is then told with RST that it is gone (reject_unknown_id).
    (c->dc_slot ? free_dc_slots_ : free_slots_).push_back(slot);
}

std::string Nic::peers_json() const
{
    std::string j = "[";
    char buf[512];
    for (size_t slot = 1; slot < conns_.size(); ++slot) {
        const Connection &c = *conns_[slot];
        if (c.state != ConnState::kOpen) {
            continue;
        }
        const ConnStats &st = conn_stats_[slot];
        const ConnActive *a = c.act;
        std::snprintf(buf, sizeof(buf),
                      "%s{\"id\":%u,\"kind\":\"%s\",\"stream\":%u,\"peer\":\"%s\",\"incarnation\":\"%" PRIx64
                      "\",\"window\":%u,\"srtt_us\":%u,\"rto_us\":%u,\"unacked\":%u,"
                      "\"quiet\":%s,\"active\":%s,\"reordered\":%u,\"receiving\":%s,"
                      "\"recovery\":\"%s\","
                      "\"tx_packets\":%u,\"tx_bytes\":%" PRIu64 ",\"rx_packets\":%u,"
                      "\"rx_bytes\":%" PRIu64 ",\"retransmits\":%u}",
                      j.size() > 1 ? "," : "", c.id, to_string(c.kind), stream_of(&c),
                      peer_of(&c).addr.to_string().c_str(), peer_of(&c).nic,
                      a != nullptr ? a->window : window_for(c.seg_payload), c.srtt_us, rto_of(&c),
                      a != nullptr ? a->send_psn - a->acked_psn : 0, c.quiet() ? "true" : "false",
                      a != nullptr ? "true" : "false", a != nullptr ? a->reorder_count : 0,
                      a != nullptr && a->inbound.active ? "true" : "false",
                      to_string(a != nullptr ? a->recovery : Recovery::kNone), st.tx_packets,
                      st.tx_bytes, st.rx_packets, st.rx_bytes, st.retransmits);
        j += buf;
    }
    return j + "]";
}

uint16_t Nic::gen_for(uint32_t slot, uint16_t n) const
{
    // Feistel network over two 8-bit halves: a permutation whatever the round function. The
    // top bit keeps these inputs apart from any other use of the key.
    uint32_t left = n >> 8;
    uint32_t right = n & 0xff;
    for (uint64_t round = 0; round < 4; ++round) {
        const uint64_t in = (1ull << 63) | round << 48 | static_cast<uint64_t>(right) << 32 | slot;
        const uint32_t f = static_cast<uint32_t>(siphash24_word(gen_key_, in)) & 0xff;
        const uint32_t next = left ^ f;
        left = right;
        right = next;
    }
    return static_cast<uint16_t>(left << 8 | right);
}

ConnActive *Nic::engage_slow(Connection *c)
{
    ConnActive *a = act_free_;
    if (a != nullptr) {
        act_free_ = a->next_free;
        --act_free_count_;
        *a = ConnActive();
    } else {
        a = new ConnActive();
    }
    a->window = window_for(c->seg_payload);
    a->short_window = config_.window != 0 ? config_.window : kAutoWindowMin;
    a->full_window = full_window_for(c->seg_payload);
    a->ack_bytes = static_cast<uint32_t>(
        std::min<uint64_t>(UINT32_MAX, static_cast<uint64_t>(a->full_window) * c->seg_payload / 4));
    // (The reorder slots come with the first packet out of order: reorder_slots.)
    // Idle, everything sent was acknowledged: every transmit PSN is the next one.
    a->send_psn = a->acked_psn = a->resend_psn = a->resend_end = c->next_psn;
    a->sack_base = c->next_psn;
    a->fast_rtx_end = c->next_psn;
    a->rto_us = rto_of(c);
    a->rnr_delay_us = config_.rnr_delay_us;
    c->act = a;
    ++act_held_;
    return a;
}

uint32_t Nic::rto_of(const Connection *c) const
{
    if (c->act != nullptr) {
        return c->act->rto_us;
    }
    // RFC 6298's estimate (completer's rtt_sample), from a fresh start.
    return c->srtt_us == 0 ? config_.rto_us
                           : std::min(std::max(config_.rto_us, c->srtt_us + 4 * c->rttvar_us),
                                      config_.rto_max_us);
}

void Nic::disengage(Connection *c)
{
    const ConnActive *a = c->act;
    // (A recovery state with nothing unacknowledged has nothing left to recover: a half starts
    // again from none.)
    if (a == nullptr || !a->quiet() || a->unacked() || a->send_psn != c->next_psn ||
        a->rnr_until_ns != 0 || c->closing || a->inbound.discard) {
        return;
    }
    act_put(c);
}

int32_t *Nic::reorder_slots(ConnActive *a)
{
    if (a->reorder_cap < a->window) {
        a->reorder.reset(new int32_t[a->window]);
        std::fill(a->reorder.get(), a->reorder.get() + a->window, -1);
        a->reorder_cap = a->window;
    }
    return a->reorder.get();
}

void Nic::act_put(Connection *c)
{
    ConnActive *a = c->act;
    c->act = nullptr;
    --act_held_;
    // Its reorder slots go: most halves never need any (packets arrive in order), and a
    // kept half is small without them.
    a->reorder.reset();
    a->reorder_cap = 0;
    if (act_free_count_ >= kActiveKeep) {
        delete a;
        return;
    }
    a->next_free = act_free_;
    act_free_ = a;
    ++act_free_count_;
}

void Nic::activate(Connection *c)
{
    engage(c);   // a listed connection has its active half
    tx_due_ = true;
    if (!c->in_active) {
        c->in_active = true;
        active_.push_back(c);
    }
}

} // namespace srcnic
