// Completer: everything that comes back for this NIC's own requests. Answers (READ responses
// placed into the READ's scatter list, error answers recorded on the request); acknowledgements
// (window release, RTT samples, the failure timers' progress, SACK and fast retransmit, the
// end of a timeout's recovery); RNR NAKs (back-off); and completion of requests in order. Its
// feedback to the requester and the tx scheduler is connection state (acked, resend range,
// timers) plus activation of the connection, never a call into their logic.
#include "nic/nic.h"

#include <algorithm>
#include <cstring>

namespace srcnic {

namespace {

// The status an error answer reports: one a responder refuses a request with (PROTOCOL.md §3);
// anything else (success, an unknown value: a broken or forged peer) completes the request as
// an I/O error, never as a success without its data.
int16_t answer_status(uint32_t imm)
{
    switch (static_cast<int32_t>(imm)) {
    case SRCNIC_ERR_UNREACHABLE:
    case SRCNIC_ERR_MESSAGE_TRUNCATED:
    case SRCNIC_ERR_REMOTE_ACCESS:
        return static_cast<int16_t>(static_cast<int32_t>(imm));
    default:
        return SRCNIC_ERR_IO_ERROR;
    }
}

// Bytes [offset, offset + len) of READ m's destination, as memory the NIC may write directly,
// when they lie in one piece of its scatter list; nullptr when they span pieces (or lie past
// them), or must be copied into another process.
uint8_t *read_piece(const TxMsg &m, uint32_t offset, uint32_t len)
{
    for (unsigned i = 0; i < m.wqe.num_sge; ++i) {
        const srcnic_sge_t &sge = m.wqe.u.sge[i];
        if (offset < sge.length) {
            return len <= sge.length - offset ? m.qp->owner()->space.direct(sge.addr + offset, len)
                                              : nullptr;
        }
        offset -= sge.length;
    }
    return nullptr;
}

// Whether READ m's answer is still to be placed: not cancelled, its QP still there.
bool read_wanted(const TxMsg &m)
{
    return !m.cancelled && m.qp != nullptr;
}

// Whether READ_RESP segment h answers READ m where its bytes are due next.
bool read_resp_fits(const TxMsg &m, const PacketHeader &h)
{
    return m.opcode == static_cast<uint8_t>(Opcode::kREAD_REQ) && h.msg_len == m.length &&
           h.addr == m.read_placed && h.payload_len <= m.length - m.read_placed;
}

} // namespace

TxMsg *Nic::find_request(const Connection *c, uint32_t req_psn) const
{
    // (Placing checks run before the packet engages its connection: an idle one has none.)
    for (TxMsg *m = c->act != nullptr ? c->act->head : nullptr; m != nullptr; m = m->next) {
        if (m->kind == TxMsg::Kind::kRequest && m->psn_first == req_psn) {
            return m;
        }
        if (psn_before(req_psn, m->psn_first)) {
            break;
        }
    }
    return nullptr;
}

uint8_t *Nic::read_target(const Connection *c, const PacketHeader &h) const
{
    // complete_answer's checks, where the READ_RESP segment would be placed.
    const TxMsg *m = find_request(c, h.req_psn);
    if (m == nullptr || !read_resp_fits(*m, h) || !read_wanted(*m)) {
        return nullptr;
    }
    return read_piece(*m, static_cast<uint32_t>(m->offset + h.addr), h.payload_len);
}

void Nic::complete_answer(Connection *c, const PacketHeader &h, const uint8_t *payload,
                          const uint8_t *placed)
{
    TxMsg *m = find_request(c, h.req_psn);
    if (m == nullptr) {
        count(SRCNIC_CNT_DROP_BAD_RESPONSE);
        return;
    }
    if (h.opcode == static_cast<uint8_t>(Opcode::kERR_RESP)) {
        if (!m->cancelled) {
            m->status = answer_status(h.imm);
            m->answered = true;
        }
        complete_in_order(c);
        return;
    }
    // READ_RESP: bytes [addr, addr + payload_len) of the read.
    if (!read_resp_fits(*m, h)) {
        count(SRCNIC_CNT_DROP_BAD_RESPONSE);
        return;
    }
    if (read_wanted(*m) && placed != nullptr && h.payload_len != 0 &&
        placed == read_piece(*m, static_cast<uint32_t>(m->offset + h.addr), h.payload_len)) {
        count(SRCNIC_CNT_PLACED_WHILE_CHECKED);   // copied as its CRC was checked
    } else if (read_wanted(*m)) {
        AddrSpace &space = m->qp->owner()->space;
        uint32_t offset = static_cast<uint32_t>(m->offset + h.addr);   // (in its WQE's scatter list)
        uint32_t left = h.payload_len;
        const uint8_t *src = payload;
        for (unsigned i = 0; i < m->wqe.num_sge && left > 0; ++i) {
            const srcnic_sge_t &sge = m->wqe.u.sge[i];
            if (offset >= sge.length) {
                offset -= sge.length;
                continue;
            }
            const uint32_t take = std::min(left, sge.length - offset);
            // (A failure fails the READ: write_behind sets its status.)
            write_behind(space, sge.addr + offset, src, take, m);
            src += take;
            left -= take;
            offset = 0;
        }
    }
    m->read_placed += h.payload_len;
    if (h.flags & kFlagLast) {
        m->answered = true;
        complete_in_order(c);
    }
}

void Nic::complete_control(Connection *c, const PacketHeader &h)
{
    switch (static_cast<Opcode>(h.opcode)) {
    case Opcode::kACK:
        note_sack(c, h);
        if (!psn_before(c->expected_psn, h.psn)) {
            apply_ack(c, h.ack_psn);
        } else if (!c->act->has_deferred_ack || !psn_before(h.ack_psn, c->act->deferred_ack)) {
            // Reverse packets sent before this ack are still missing: apply it after them.
            c->act->has_deferred_ack = true;
            c->act->deferred_pos = h.psn;
            c->act->deferred_ack = h.ack_psn;
        }
        break;
    case Opcode::kNAK: {
        const bool in_flight = psn_before(h.psn, c->act->send_psn) && !psn_before(h.psn, c->act->acked_psn);
        const bool dci = c->kind == ConnKind::kDci;
        if (h.imm == static_cast<uint32_t>(NakReason::kUseDc) && c->kind == ConnKind::kConn &&
            c->peer_conn == 0 && c->act->acked_psn == 1 && c->expected_psn == 1) {
            // The peer's connection budget is spent and it executed none of our packets.
            fall_back_to_dc(c);
        } else if (h.imm == static_cast<uint32_t>(NakReason::kDcGone) && dci && in_flight) {
            // Our target context was evicted: the stream goes on with SYN packets from its
            // oldest unacknowledged PSN, which resume it from the target's closed table (§8.4).
            if (c->peer_conn != 0) {
                // Its peer ran none of the packets since, nor an acknowledgement they carried
                // (§8.7): our contexts of streams from it acknowledge again, once.
                xack_again(peer_of(c));
                c->peer_conn = 0;
                start_resend(c, c->act->acked_psn, c->act->send_psn);
                activate(c);
            }
        } else if ((h.imm == static_cast<uint32_t>(NakReason::kRnr) ||
                    (h.imm == static_cast<uint32_t>(NakReason::kDcBusy) && dci)) && in_flight) {
            const bool busy = h.imm == static_cast<uint32_t>(NakReason::kDcBusy);
            count(busy ? SRCNIC_CNT_DC_BUSY_RECEIVED : SRCNIC_CNT_RNR_RECEIVED);
            const uint64_t now = this->now();
            if (busy && now - c->act->progress_ns > static_cast<uint64_t>(config_.peer_timeout_ms) * kNsPerMs) {
                // Refused a target context for as long as a silent peer is given: fail as
                // one, rather than wait without bound behind other initiators (§8.3).
                conn_fail(c, SRCNIC_ERR_ENDPOINT_TIMEOUT);
                break;
            }
            c->act->rnr_until_ns = now + static_cast<uint64_t>(c->act->rnr_delay_us) * kNsPerUs;
            c->act->rnr_delay_us = std::min(c->act->rnr_delay_us * 2, std::max(config_.rnr_delay_us, 10000u));
            start_resend(c, h.psn, c->act->send_psn);
            if (!busy) {
                c->act->progress_ns = now;   // the peer is alive, its application not ready
            }
            c->act->retries = 0;
            c->act->rto_deadline_ns = 0;
            activate(c);
        } else {
            count(SRCNIC_CNT_DROP_BAD_RESPONSE);
        }
        break;
    }
    case Opcode::kCLOSE:
        close_received(c, h);
        break;
    case Opcode::kDC_CLOSE:
        // The initiator handed its DCI over: everything before psn was executed here and is
        // acknowledged there (§8.5).
        if (c->kind == ConnKind::kDct && c->expected_psn == h.psn && (h.flags & kFlagDcInit) != 0) {
            dct_closed(c, h);
        }
        break;
    default:
        break;
    }
}

SRCNIC_HOT void Nic::apply_ack(Connection *c, uint32_t ack_psn)
{
    if (!psn_before(c->act->acked_psn, ack_psn)) {
        return;
    }
    if (psn_before(c->act->send_psn, ack_psn)) {
        count(SRCNIC_CNT_DROP_BAD_RESPONSE);   // acknowledges what was never sent
        return;
    }
    const uint64_t now = this->now();
    c->act->acked_psn = ack_psn;
    if (psn_before(c->act->resend_psn, ack_psn)) {
        c->act->resend_psn = ack_psn;
    }

    c->act->retries = 0;
    c->act->rto_us = std::min(std::max(config_.rto_us, c->srtt_us + 4 * c->rttvar_us), config_.rto_max_us);
    c->act->rnr_delay_us = config_.rnr_delay_us;
    c->act->progress_ns = now;
    c->act->rto_deadline_ns = c->unacked() ? now + static_cast<uint64_t>(c->act->rto_us) * kNsPerUs : 0;
    for (TxMsg *m = c->act->head; m != nullptr && !psn_before(ack_psn, m->psn_end()); m = m->next) {
        if (!m->acked && m->short_tail(c->seg_payload)) {
            --c->act->short_inflight;
        }
        m->acked = true;
    }
    complete_in_order(c);
    // The window moved: data waiting for it goes now.
    if (psn_before(c->act->send_psn, c->next_psn)) {
        activate_now(c);
    } else {
        activate(c);
    }
}

SRCNIC_HOT void Nic::note_sack(Connection *c, const PacketHeader &h)
{
    // What the peer has received is known from the newest ack it sent, whether or not that
    // ack may complete anything yet (§5.4 orders completions, not retransmissions): packets
    // it holds are never retransmitted, so a probe always carries something it lacks.
    if (psn_before(h.ack_psn, c->act->sack_base) || psn_before(c->act->send_psn, h.ack_psn)) {
        return;   // older than what we know, or acknowledges what was never sent
    }
    const uint32_t advanced = h.ack_psn - c->act->sack_base;
    c->act->sack_base = h.ack_psn;
    c->act->peer_sack = h.sack;
    const bool probing = c->act->recovery == Recovery::kProbe;   // this ack may answer it
    // The round trip of the timed packet ends when the peer first reports it, cumulatively or
    // selectively: an ack held back by an earlier hole (or by §5.4) would add the repair time.
    uint64_t now = 0;   // read once, when needed
    if (c->act->rtt_timing && c->act->peer_holds(c->act->rtt_psn)) {
        now = this->now();
        rtt_sample(c, now);
    }
    if (advanced != 0) {
        // The peer is alive and receiving: that is progress for the failure timers, even if
        // the ack cannot complete anything yet.
        if (now == 0) {
            now = this->now();
        }
        c->act->retries = 0;
        c->act->progress_ns = now;
        if (c->unacked()) {
            c->act->rto_deadline_ns = now + static_cast<uint64_t>(c->act->rto_us) * kNsPerUs;
        }
        if (c->act->in_timeout_recovery()) {
            if (!psn_before(h.ack_psn, c->act->recover_psn)) {
                set_recovery(c, Recovery::kNone);
            } else if (psn_before(c->act->recover_resent, h.ack_psn) && h.sack == 0) {
                // The peer acknowledged a packet the recovery never resent and holds nothing
                // out of order: the first transmissions arrived. Resending what follows would
                // duplicate packets waiting in its socket; a lost tail is left to the probe and
                // the timer. The timeout was spurious (a peer slow to answer, a thread off its
                // CPU for a few ms) unless the peer had reported a hole before it, which the
                // timeout then repaired. An ack that shows holes keeps the recovery going:
                // under heavy loss, resending ahead of them repairs the flight fastest.
                if (c->act->recovery == Recovery::kTimeout) {
                    count(SRCNIC_CNT_SPURIOUS_TIMEOUTS);
                }
                set_recovery(c, Recovery::kNone);
            } else {
                // Partial ack of the packets resent so far: what follows was probably lost too.
                const uint32_t end = h.ack_psn + std::min(2 * advanced, c->act->window);
                start_resend(c, h.ack_psn, end);
                c->act->recover_resent = end;
            }
        }
        // The probe timer restarts here, where every ack is seen first (apply_ack may come
        // later, §5.4): none if this ack covers everything sent.
        if (c->act->recovery == Recovery::kProbe) {
            set_recovery(c, Recovery::kNone);
        }
        if (psn_before(h.ack_psn, c->act->send_psn)) {
            arm_probe(c, now);
        } else {
            c->act->probe_deadline_ns = 0;
        }
    }
    // A gap at the receiver with later packets already there: retransmit the holes up to the
    // highest PSN it holds now rather than at the timeout. Two later packets tell a gap from
    // reordering; after a tail-loss probe, two round trips of silence already have, and one
    // suffices (the probe's answer is used once). Holes already resent are resent again at
    // most once per quarter timeout (their copies may still be on the way); holes beyond them
    // are new losses and go at once.
    if (h.sack != 0 && psn_before(h.ack_psn, c->act->send_psn) &&
        (probing || __builtin_popcountll(h.sack) >= 2)) {
        if (now == 0) {
            now = this->now();
        }
        const uint32_t highest = h.ack_psn + 1 + (63 - __builtin_clzll(h.sack));
        uint32_t from = h.ack_psn;
        if (!probing && now - c->act->fast_rtx_ns < static_cast<uint64_t>(c->act->rto_us) * kNsPerUs / 4 &&
            psn_before(from, c->act->fast_rtx_end)) {
            from = c->act->fast_rtx_end;
        }
        if (psn_before(from, highest)) {
            if (from == h.ack_psn) {
                c->act->fast_rtx_ns = now;
            }
            c->act->fast_rtx_end = highest;
            if (c->act->recovery == Recovery::kProbe) {
                set_recovery(c, Recovery::kNone);
            }
            start_resend(c, from, highest);
            count(SRCNIC_CNT_FAST_RETRANSMITS);
        }
    }
}

void Nic::rtt_sample(Connection *c, uint64_t now)
{
    // RFC 6298: srtt, rttvar; rto = srtt + 4 rttvar, no lower than the configured rto_us, is
    // set by apply_ack.
    c->act->rtt_timing = false;
    const uint32_t sample = static_cast<uint32_t>(std::min<uint64_t>((now - c->act->rtt_start_ns) / kNsPerUs, 1u << 30));
    if (c->srtt_us == 0) {
        c->srtt_us = std::max(sample, 1u);
        c->rttvar_us = sample / 2;
    } else {
        const uint32_t err = sample > c->srtt_us ? sample - c->srtt_us : c->srtt_us - sample;
        c->rttvar_us = (3 * c->rttvar_us + err) / 4;
        c->srtt_us = (7 * c->srtt_us + sample) / 8;
    }
}

SRCNIC_HOT void Nic::complete_in_order(Connection *c)
{
    flush_writes();   // a READ's answer lands before its completion says so
    while (c->act->head != nullptr) {
        TxMsg *m = c->act->head;
        if (!m->acked) {
            break;
        }
        if (m->kind == TxMsg::Kind::kRequest) {
            const bool is_read = m->opcode == static_cast<uint8_t>(Opcode::kREAD_REQ);
            if (is_read && !m->answered && !m->cancelled) {
                break;
            }
            if (!m->cancelled && m->qp != nullptr) {
                complete_request(c, m);
            }
        }
        c->act->head = m->next;
        if (c->act->head == nullptr) {
            c->act->tail = nullptr;
        }
        msg_free(m);
    }
}

void Nic::complete_request(Connection *c, TxMsg *m)
{
    if (!m->more) {
        m->qp->complete(make_cqe(m->wqe.wr_id, m->status, m->wqe.opcode,
                                 static_cast<uint32_t>(m->offset + m->length)));
        return;
    }
    if (m->status == SRCNIC_OK) {
        return;
    }
    // A chunk failed: its WQE completes with that, from its next chunk (on the same connection,
    // after it) or, not handed out yet, from the cursor.
    for (TxMsg *n = m->next; n != nullptr; n = n->next) {
        if (n->kind == TxMsg::Kind::kRequest && n->qp == m->qp && n->wqe.wr_id == m->wqe.wr_id &&
            n->offset == m->offset + m->length) {
            if (n->status == SRCNIC_OK) {
                n->status = m->status;
            }
            return;
        }
    }
    ChunkCursor &k = m->qp->cursor();
    if (k.active && k.status == SRCNIC_OK && k.wqe.wr_id == m->wqe.wr_id &&
        k.next == m->offset + m->length) {
        k.status = m->status;   // (its cursor still: not a later WQE's of the same QP)
    }
    (void)c;
}

} // namespace srcnic
