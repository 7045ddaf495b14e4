// Rx demux: takes the datagrams rx_poll (nic.cc) received from the link, drops and counts what
// fails the header checks, finds the connection from the id the packet carries (validated
// against the sender's address, incarnation and connection id; the address map is consulted
// only until the sender has learned our id, and only for a packet that proves our secret,
// PROTOCOL.md §7), puts sequenced packets in PSN order, and hands requests to the responder and
// answers to the completer. Control packets (ACK, NAK, RST) are handled here.
#include "nic/nic.h"

#include "core/clock.h"
#include "core/log.h"
#include "wire/auth.h"

#include <algorithm>
#include <cstring>

namespace srcnic {

namespace {

srcnic_counter_t drop_counter(HeaderError err)
{
    switch (err) {
    case HeaderError::kTruncated: return SRCNIC_CNT_DROP_TRUNCATED;
    case HeaderError::kBadVersion: return SRCNIC_CNT_DROP_BAD_VERSION;
    case HeaderError::kBadChecksum: return SRCNIC_CNT_DROP_BAD_CHECKSUM;
    case HeaderError::kWrongJobKey: return SRCNIC_CNT_DROP_WRONG_JOB_KEY;
    case HeaderError::kUnknownOpcode: return SRCNIC_CNT_DROP_UNKNOWN_OPCODE;
    case HeaderError::kBadFlags: return SRCNIC_CNT_DROP_BAD_FLAGS;
    default: return SRCNIC_CNT_DROP_BAD_LENGTH;
    }
}

} // namespace

int32_t Nic::buf_alloc()
{
    if (free_bufs_.empty()) {
        return -1;
    }
    const int32_t b = free_bufs_.back();
    free_bufs_.pop_back();
    return b;
}

void Nic::buf_free(int32_t b)
{
    free_bufs_.push_back(b);
}

SRCNIC_HOT void Nic::rx_datagram(int32_t buf, const uint8_t *data, uint32_t len,
                                 const LinkAddr &src, bool sealed)
{
    PacketHeader h;
    uint8_t *placed;
    const HeaderError err = check_header_placing(
        data, len, several_owners_ ? kAnyJobKey : static_cast<int64_t>(config_.job_key), &h,
        [this, &src](const PacketHeader &hh) { return place_target(hh, src); }, &placed, sealed);
    if (err != HeaderError::kOk) {
        count(drop_counter(err));
        SRCNIC_LOG_RATELIMITED(LogLevel::kDebug, "drop datagram from %s: %s",
                               src.to_string().c_str(), to_string(err));
        buf_free(buf);
        return;
    }
    if (log_enabled(LogLevel::kTrace)) {
        SRCNIC_LOG_TRACE("rx %s from %s", to_string(h).c_str(), src.to_string().c_str());
    }
    const bool is_rst = h.opcode == static_cast<uint8_t>(Opcode::kRST);
    const bool is_syn = (h.flags & kFlagSyn) != 0;
    if (h.dst_nic != addr_.incarnation) {
        // Meant for another incarnation of this NIC, or a guess. Not answered: an answer would
        // tell a prober our incarnation (PROTOCOL.md §7.3); a peer of an earlier incarnation
        // learns of the restart from the new address UCX hands it, or times out.
        count(SRCNIC_CNT_DROP_WRONG_NIC);
        buf_free(buf);
        return;
    }

    // A packet of this NIC to itself (§5.7): what one of its connections sends, another
    // receives, as between two NICs, so that neither direction's queue waits on the other's.
    const bool from_self = h.src_nic == addr_.incarnation && src == link_->local_addr();
    Connection *c = nullptr;
    if (h.dst_conn != 0) {
        // Bound to the connection it names: the id (generation included), the address and the
        // incarnation the connection was opened with (§7.2). Nothing else is looked up.
        c = conn_by_id(h.dst_conn);
        if (c == nullptr) {
            reject_unknown_id(h, src);
            buf_free(buf);
            return;
        }
        if (c->peer_addr != src || c->peer_nic != h.src_nic) {
            count(SRCNIC_CNT_DROP_WRONG_PEER);
            buf_free(buf);
            return;
        }
    } else {
        // Only a SYN sequenced packet that proves our secret may open a connection, or reach
        // one by its sender's address (§7.1), this NIC's own packets included. Checked before
        // anything is looked up or changed.
        if (!is_syn || !opcode_info(h.opcode).sequenced || h.src_conn == 0) {
            count(SRCNIC_CNT_DROP_NO_CONN);
            buf_free(buf);
            return;
        }
        if (h.auth != syn_proof(key_, h, src)) {
            count(SRCNIC_CNT_DROP_BAD_PROOF);
            SRCNIC_LOG_RATELIMITED(LogLevel::kDebug, "drop SYN from %s: no proof of our secret",
                                   src.to_string().c_str());
            buf_free(buf);
            return;
        }
        if (from_self) {
            c = self_receiver(h.src_conn);
        } else if (auto it = conn_by_addr_.find(src); it != conn_by_addr_.end()) {
            c = conns_[it->second].get();
            if (c->peer_nic != h.src_nic) {
                // The peer restarted (§5.6): nothing of the old connection may mix with the new.
                conn_fail(c, SRCNIC_ERR_CONNECTION_RESET);
                c = nullptr;
            }
        }
    }
    // An RST names our connection by dst_conn and carries no id of its own (§3.9).
    if (c != nullptr && !is_rst &&
        (c->peer_conn != 0 ? c->peer_conn != h.src_conn : h.src_conn == 0)) {
        if (is_syn) {
            // The peer dropped its side and opened a new connection (it proved our secret).
            conn_fail(c, SRCNIC_ERR_CONNECTION_RESET);
            c = nullptr;
        } else {
            count(SRCNIC_CNT_DROP_WRONG_GEN);
            buf_free(buf);
            return;
        }
    }
    if (c == nullptr) {
        // A proved SYN: it opens a connection, or is refused with RST (the sender knows us).
        c = conn_open(src, h.src_nic, !from_self);
        if (c == nullptr) {
            tx_reset(src, h.src_nic, h.src_conn, h.job_key);
            buf_free(buf);
            return;
        }
        if (from_self) {
            if (Connection *sender = conn_by_id(h.src_conn)) {
                sender->mirror = c->id;
            }
            c->mirror = h.src_conn;
        }
    }
    if (c->peer_conn == 0) {
        c->peer_conn = h.src_conn;
    }
    c->peer_job_key = h.job_key;
    ++c->rx_packets;
    c->rx_bytes += len;
    if (opcode_info(h.opcode).sequenced) {
        rx_sequenced(c, buf, data, len, h, placed);
    } else {
        rx_control(c, h);
        buf_free(buf);
    }
}

SRCNIC_HOT void Nic::rx_sequenced(Connection *c, int32_t buf, const uint8_t *data, uint32_t len,
                                  const PacketHeader &h, const uint8_t *placed)
{
    note_sack(c, h);
    const uint32_t psn = h.psn;
    if (psn_before(psn, c->expected_psn)) {
        count(SRCNIC_CNT_DUPLICATES);
        c->ack_pending = c->ack_now = true;
        activate_now(c);
        buf_free(buf);
        return;
    }
    const uint32_t ahead = psn - c->expected_psn;
    if (ahead >= c->window) {
        count(SRCNIC_CNT_DROP_OUT_OF_WINDOW);
        buf_free(buf);
        return;
    }
    if (ahead != 0) {
        const uint32_t slot = psn % c->window;
        if (c->reorder[slot] >= 0) {
            count(SRCNIC_CNT_DUPLICATES);
            buf_free(buf);
        } else {
            // Kept past this call: into the packet's own buffer if the link lent it.
            if (data != buf_data(buf)) {
                std::memcpy(buf_data(buf), data, len);
            }
            c->reorder[slot] = buf;
            ++c->reorder_count;
            count(SRCNIC_CNT_OUT_OF_ORDER);
        }
        // Report the gap at once: the sender's fast retransmit depends on it.
        if (!c->ack_pending) {
            c->ack_since_ns = now();
        }
        c->ack_pending = c->ack_now = true;
        activate_now(c);
        return;
    }
    rx_deliver(c, buf, data, h, placed);
    // Drain what the reorder buffer now holds in sequence.
    while (c->state == ConnState::kOpen && c->reorder_count != 0) {
        const uint32_t slot = c->expected_psn % c->window;
        const int32_t next = c->reorder[slot];
        if (next < 0) {
            break;
        }
        PacketHeader nh;
        std::memcpy(&nh, buf_data(next), sizeof(nh));
        if (nh.psn != c->expected_psn) {
            break;
        }
        const uint32_t expected = c->expected_psn;
        c->reorder[slot] = -1;
        --c->reorder_count;
        rx_deliver(c, next, buf_data(next), nh);
        if (c->expected_psn == expected) {
            break;   // not consumed (receiver not ready): it will be retransmitted
        }
    }
    if (c->state == ConnState::kOpen && c->has_deferred_ack &&
        !psn_before(c->expected_psn, c->deferred_pos)) {
        c->has_deferred_ack = false;
        apply_ack(c, c->deferred_ack);
    }
}

SRCNIC_HOT void Nic::rx_deliver(Connection *c, int32_t buf, const uint8_t *data,
                                const PacketHeader &h, const uint8_t *placed)
{
    // This packet follows every reverse packet before it: its acknowledgement may complete
    // requests now (§5.4).
    apply_ack(c, h.ack_psn);
    if (c->state != ConnState::kOpen) {
        buf_free(buf);
        return;
    }
    const uint8_t *payload = data + sizeof(PacketHeader);
    bool consumed = true;
    if (opcode_info(h.opcode).stage == RxStage::kResponder) {
        consumed = respond(c, h, payload, placed);
    } else {
        complete_answer(c, h, payload, placed);
    }
    buf_free(buf);
    if (!consumed) {
        return;
    }
    ++c->expected_psn;
    ++c->unacked_rx;
    c->unacked_rx_bytes += h.payload_len;
    if (!c->ack_pending) {
        c->ack_pending = true;
        c->ack_since_ns = now();
    }
    if (h.flags & kFlagAckReq) {
        c->ack_next = true;
    }
    // A stream's receiver acknowledges every window / 4 packets, or a quarter of a full window's
    // bytes, at once (tx_schedule).
    if (c->ack_due()) {
        activate_now(c);
    } else {
        activate(c);
    }
}

uint8_t *Nic::place_target(const PacketHeader &h, const LinkAddr &src)
{
    const bool send = h.opcode == static_cast<uint8_t>(Opcode::kSEND);
    if (h.payload_len < kCheckWhilePlacingMin ||
        (!send && h.opcode != static_cast<uint8_t>(Opcode::kREAD_RESP))) {
        return nullptr;
    }
    // The checks rx_datagram and rx_sequenced make before they deliver a packet at once, in
    // their order, where every one passes as things stand.
    if (h.dst_nic != addr_.incarnation || h.dst_conn == 0) {
        return nullptr;
    }
    const Connection *c = conn_by_id(h.dst_conn);
    if (c == nullptr || c->peer_addr != src || c->peer_nic != h.src_nic || c->peer_conn == 0 ||
        c->peer_conn != h.src_conn || h.psn != c->expected_psn) {
        return nullptr;
    }
    return send ? send_target(c, h) : read_target(c, h);
}

void Nic::reject_unknown_id(const PacketHeader &h, const LinkAddr &src)
{
    count(SRCNIC_CNT_DROP_WRONG_GEN);
    // RST only to the peer of the slot's connection, open (the packet names an older
    // generation) or released (the peer still uses it): whoever else names the slot learns
    // nothing, not even that the id was wrong (PROTOCOL.md §7.3).
    const uint32_t slot = h.dst_conn & 0xffff;
    if (h.opcode == static_cast<uint8_t>(Opcode::kRST) || h.src_conn == 0 || slot == 0 ||
        slot >= conns_.size()) {
        return;
    }
    const Connection &s = *conns_[slot];
    const bool peer = s.peer_addr == src && s.peer_nic == h.src_nic;
    const bool released = s.state != ConnState::kOpen && s.id == h.dst_conn &&
                          s.peer_conn == h.src_conn;
    if (peer && (s.state == ConnState::kOpen || released)) {
        tx_reset(src, h.src_nic, h.src_conn, h.job_key);
    }
}

void Nic::rx_control(Connection *c, const PacketHeader &h)
{
    switch (static_cast<Opcode>(h.opcode)) {
    case Opcode::kACK:
        note_sack(c, h);
        if (!psn_before(c->expected_psn, h.psn)) {
            apply_ack(c, h.ack_psn);
        } else if (!c->has_deferred_ack || !psn_before(h.ack_psn, c->deferred_ack)) {
            // Reverse packets sent before this ack are still missing: apply it after them.
            c->has_deferred_ack = true;
            c->deferred_pos = h.psn;
            c->deferred_ack = h.ack_psn;
        }
        break;
    case Opcode::kNAK:
        if (h.imm == static_cast<uint32_t>(NakReason::kRnr) && psn_before(h.psn, c->send_psn) &&
            !psn_before(h.psn, c->acked_psn)) {
            count(SRCNIC_CNT_RNR_RECEIVED);
            const uint64_t now = this->now();
            c->rnr_until_ns = now + static_cast<uint64_t>(c->rnr_delay_us) * kNsPerUs;
            c->rnr_delay_us = std::min(c->rnr_delay_us * 2, std::max(config_.rnr_delay_us, 10000u));
            start_resend(c, h.psn, c->send_psn);
            c->progress_ns = now;   // the peer is alive, only busy
            c->retries = 0;
            c->rto_deadline_ns = 0;
            activate(c);
        } else {
            count(SRCNIC_CNT_DROP_BAD_RESPONSE);
        }
        break;
    case Opcode::kRST:
        conn_fail(c, SRCNIC_ERR_CONNECTION_RESET);
        break;
    default:
        break;
    }
}

SRCNIC_HOT void Nic::apply_ack(Connection *c, uint32_t ack_psn)
{
    if (!psn_before(c->acked_psn, ack_psn)) {
        return;
    }
    if (psn_before(c->send_psn, ack_psn)) {
        count(SRCNIC_CNT_DROP_BAD_RESPONSE);   // acknowledges what was never sent
        return;
    }
    const uint64_t now = this->now();
    c->acked_psn = ack_psn;
    if (psn_before(c->resend_psn, ack_psn)) {
        c->resend_psn = ack_psn;
    }

    c->retries = 0;
    c->rto_us = std::min(std::max(config_.rto_us, c->srtt_us + 4 * c->rttvar_us), config_.rto_max_us);
    c->rnr_delay_us = config_.rnr_delay_us;
    c->progress_ns = now;
    c->rto_deadline_ns = c->unacked() ? now + static_cast<uint64_t>(c->rto_us) * kNsPerUs : 0;
    for (TxMsg *m = c->head; m != nullptr && !psn_before(ack_psn, m->psn_end()); m = m->next) {
        if (!m->acked && m->short_tail(c->seg_payload)) {
            --c->short_inflight;
        }
        m->acked = true;
    }
    complete_in_order(c);
    // The window moved: data waiting for it goes now.
    if (psn_before(c->send_psn, c->next_psn)) {
        activate_now(c);
    } else {
        activate(c);
    }
}

void Nic::rtt_sample(Connection *c, uint64_t now)
{
    // RFC 6298: srtt, rttvar; rto = srtt + 4 rttvar, no lower than the configured rto_us, is
    // set by apply_ack.
    c->rtt_timing = false;
    const uint32_t sample = static_cast<uint32_t>(std::min<uint64_t>((now - c->rtt_start_ns) / kNsPerUs, 1u << 30));
    if (c->srtt_us == 0) {
        c->srtt_us = std::max(sample, 1u);
        c->rttvar_us = sample / 2;
    } else {
        const uint32_t err = sample > c->srtt_us ? sample - c->srtt_us : c->srtt_us - sample;
        c->rttvar_us = (3 * c->rttvar_us + err) / 4;
        c->srtt_us = (7 * c->srtt_us + sample) / 8;
    }
}

SRCNIC_HOT void Nic::note_sack(Connection *c, const PacketHeader &h)
{
    // What the peer has received is known from the newest ack it sent, whether or not that
    // ack may complete anything yet (§5.4 orders completions, not retransmissions): packets
    // it holds are never retransmitted, so a probe always carries something it lacks.
    if (psn_before(h.ack_psn, c->sack_base) || psn_before(c->send_psn, h.ack_psn)) {
        return;   // older than what we know, or acknowledges what was never sent
    }
    const uint32_t advanced = h.ack_psn - c->sack_base;
    c->sack_base = h.ack_psn;
    c->peer_sack = h.sack;
    const bool probing = c->probe_out;   // this ack may answer a tail-loss probe
    // The round trip of the timed packet ends when the peer first reports it, cumulatively or
    // selectively: an ack held back by an earlier hole (or by §5.4) would add the repair time.
    uint64_t now = 0;   // read once, when needed
    if (c->rtt_timing && c->peer_holds(c->rtt_psn)) {
        now = this->now();
        rtt_sample(c, now);
    }
    if (advanced != 0) {
        // The peer is alive and receiving: that is progress for the failure timers, even if
        // the ack cannot complete anything yet.
        if (now == 0) {
            now = this->now();
        }
        c->retries = 0;
        c->progress_ns = now;
        if (c->unacked()) {
            c->rto_deadline_ns = now + static_cast<uint64_t>(c->rto_us) * kNsPerUs;
        }
        if (c->recovering) {
            if (!psn_before(h.ack_psn, c->recover_psn)) {
                c->recovering = false;
            } else if (psn_before(c->recover_resent, h.ack_psn) && h.sack == 0) {
                // The peer acknowledged a packet the recovery never resent and holds nothing
                // out of order: the first transmissions arrived. Resending what follows would
                // duplicate packets waiting in its socket; a lost tail is left to the probe and
                // the timer. The timeout was spurious (a peer slow to answer, a thread off its
                // CPU for a few ms) unless the peer had reported a hole before it, which the
                // timeout then repaired. An ack that shows holes keeps the recovery going:
                // under heavy loss, resending ahead of them repairs the flight fastest.
                c->recovering = false;
                if (!c->recover_hole) {
                    count(SRCNIC_CNT_SPURIOUS_TIMEOUTS);
                }
            } else {
                // Partial ack of the packets resent so far: what follows was probably lost too.
                const uint32_t end = h.ack_psn + std::min(2 * advanced, c->window);
                start_resend(c, h.ack_psn, end);
                c->recover_resent = end;
            }
        }
        // The probe timer restarts here, where every ack is seen first (apply_ack may come
        // later, §5.4): none if this ack covers everything sent.
        c->probe_out = false;
        if (psn_before(h.ack_psn, c->send_psn)) {
            arm_probe(c, now);
        } else {
            c->probe_deadline_ns = 0;
        }
    }
    // A gap at the receiver with later packets already there: retransmit the holes up to the
    // highest PSN it holds now rather than at the timeout. Two later packets tell a gap from
    // reordering; after a tail-loss probe, two round trips of silence already have, and one
    // suffices (the probe's answer is used once). Holes already resent are resent again at
    // most once per quarter timeout (their copies may still be on the way); holes beyond them
    // are new losses and go at once.
    if (h.sack != 0 && psn_before(h.ack_psn, c->send_psn) &&
        (probing || __builtin_popcountll(h.sack) >= 2)) {
        if (now == 0) {
            now = this->now();
        }
        const uint32_t highest = h.ack_psn + 1 + (63 - __builtin_clzll(h.sack));
        uint32_t from = h.ack_psn;
        if (!probing && now - c->fast_rtx_ns < static_cast<uint64_t>(c->rto_us) * kNsPerUs / 4 &&
            psn_before(from, c->fast_rtx_end)) {
            from = c->fast_rtx_end;
        }
        if (psn_before(from, highest)) {
            if (from == h.ack_psn) {
                c->fast_rtx_ns = now;
            }
            c->fast_rtx_end = highest;
            c->probe_out = false;
            start_resend(c, from, highest);
            count(SRCNIC_CNT_FAST_RETRANSMITS);
        }
    }
}

uint64_t Nic::rx_sack(const Connection *c) const
{
    uint64_t bits = 0;
    const uint32_t span = std::min<uint32_t>(64, c->window - 1);
    for (uint32_t i = 0; i < span; ++i) {
        const uint32_t psn = c->expected_psn + 1 + i;
        const int32_t b = c->reorder[psn % c->window];
        if (b >= 0) {
            bits |= 1ull << i;
        }
    }
    return bits;
}

} // namespace srcnic
