// Tx scheduler: turns each active connection's FIFO into packets within its window
// (retransmissions first, then new PSNs), attaches the piggybacked acknowledgement, runs the
// retransmission and failure timers, and batches datagrams to the link.
#include "nic/nic.h"

#include "core/clock.h"
#include "core/log.h"
#include "wire/auth.h"

#include <algorithm>
#include <cstring>

namespace srcnic {

namespace {

// What a message's last segment is padded with (PROTOCOL.md §2.3).
const uint8_t kZeroPad[kWirePadMax] = {};

// Maps [offset, offset + len) of a WQE's gather list onto iovecs; returns how many were used.
uint32_t gather(const srcnic_wqe_t &wqe, uint32_t offset, uint32_t len, struct iovec *iov)
{
    if (wqe.flags & SRCNIC_WQE_FLAG_INLINE) {
        iov[0].iov_base = const_cast<uint8_t *>(wqe.u.inline_data) + offset;
        iov[0].iov_len = len;
        return len ? 1 : 0;
    }
    uint32_t n = 0;
    for (unsigned i = 0; i < wqe.num_sge && len > 0; ++i) {
        const srcnic_sge_t &sge = wqe.u.sge[i];
        if (offset >= sge.length) {
            offset -= sge.length;
            continue;
        }
        const uint32_t take = std::min(len, sge.length - offset);
        iov[n].iov_base = reinterpret_cast<void *>(sge.addr + offset);
        iov[n].iov_len = take;
        ++n;
        len -= take;
        offset = 0;
    }
    return n;
}

} // namespace

SRCNIC_HOT PacketHeader *Nic::tx_slot(const LinkAddr &dst, uint32_t job_key, struct iovec **iov_p)
{
    if (tx_count_ == kTxBatch || tx_batch_bytes_ >= kTxBatchBytes) {
        tx_flush();   // empties the batch, whatever the link took
    }
    stage_last_ = kStageBlocks;
    PacketHeader *h = &tx_pkts_[tx_count_].h;
    // Built whole, which the compiler stores as vector words; a memset of the 104 bytes becomes
    // `rep stosq` under generic tuning, tens of cycles to start, on every packet.
    const PacketHeader init{kWireVersion, 0, 0, job_key, addr_.incarnation};
    *h = init;
    tx_dgrams_[tx_count_].dst = dst;
    tx_iov_[tx_count_][0].iov_base = h;
    tx_iov_[tx_count_][0].iov_len = sizeof(*h);
    *iov_p = &tx_iov_[tx_count_][1];
    return h;
}

SRCNIC_HOT void Nic::tx_commit(uint32_t iovcnt, Connection *c)
{
    TxPacket &pkt = tx_pkts_[tx_count_];
    struct iovec *iov = tx_iov_[tx_count_];
    if (__builtin_expect(pkt.h.dst_conn == 0, 0) && c != nullptr) {
        // A SYN packet: the proof of the peer's secret, over the header as sent (PROTOCOL.md
        // §7.1), made again on every transmission (the acknowledgement fields change).
        pkt.h.auth = syn_proof(nic_key(peer_of(c).secret, peer_of(c).nic), pkt.h, link_->local_addr());
    }
    size_t payload = 0;
    for (uint32_t i = 1; i <= iovcnt; ++i) {
        payload += iov[i].iov_len;
    }
    // To this NIC itself, while a packet buffer is free: delivered unsealed (self_deliver).
    const bool self = tx_dgrams_[tx_count_].dst == self_addr_ && !free_bufs_.empty();
    if (payload <= kTxCopyMax) {
        uint8_t *to = pkt.payload;
        for (uint32_t i = 1; i <= iovcnt; ++i) {
            std::memcpy(to, iov[i].iov_base, iov[i].iov_len);
            to += iov[i].iov_len;
        }
        iov[0].iov_len = sizeof(PacketHeader) + payload;   // iov[0] starts at pkt.h
        if (!self) {
            seal_packet(&pkt.h, iov[0].iov_len);
        }
        iovcnt = 0;
    } else if (!self) {
        seal_header(&pkt.h, &iov[1], iovcnt);
    }
    PacketHeader *h = &pkt.h;
    if (log_enabled(LogLevel::kTrace)) {
        SRCNIC_LOG_TRACE("tx %s", to_string(*h).c_str());
    }
    if (self && self_deliver(iov, iovcnt + 1)) {
        // Copied: the staging block it came from (a block holds one message's bytes, which all
        // go to this NIC itself) is no longer pointed into.
        if (stage_last_ < kStageBlocks) {
            stage_[stage_last_].batch = 0;
        }
        const uint64_t bytes = sizeof(PacketHeader) + payload;
        count(SRCNIC_CNT_TX_PACKETS);
        count(SRCNIC_CNT_TX_BYTES, bytes);
        if (c != nullptr) {
            ConnStats &st = stats_of(c);
            ++st.tx_packets;
            st.tx_bytes += bytes;
        }
        return;   // the batch slot is free again
    }
    tx_batch_bytes_ += payload;
    tx_dgrams_[tx_count_].iov = iov;
    tx_dgrams_[tx_count_].iovcnt = iovcnt + 1;
    tx_conn_[tx_count_] = c;
    ++tx_count_;
}

bool Nic::self_deliver(const struct iovec *iov, uint32_t iovcnt)
{
    const int32_t b = buf_alloc();
    if (b < 0) {
        return false;   // through the link, like any other datagram
    }
    uint8_t *to = buf_data(b);
    uint32_t len = 0;
    for (uint32_t i = 0; i < iovcnt; ++i) {
        std::memcpy(to + len, iov[i].iov_base, iov[i].iov_len);
        len += static_cast<uint32_t>(iov[i].iov_len);
    }
    self_rx_.push_back(SelfDatagram{b, len});
    return true;
}

SRCNIC_HOT void Nic::fill_ack(Connection *c, PacketHeader *h)
{
    h->ack_psn = c->expected_psn;
    if (__builtin_expect(c->kind == ConnKind::kDct, 0) && dc_crowded()) {
        h->flags |= kFlagDcRelease;   // others wait for a context here (§8.3)
    } else if (__builtin_expect(c->kind == ConnKind::kDci, 0) && dc_reverse_room()) {
        h->flags |= kFlagDcReverse;   // it runs requests sent back along the stream (§8.8)
    }
    if (c->act == nullptr) {
        // Idle (or a released slot answering for its last occupant): nothing held, nothing
        // owed.
        h->sack = 0;
        return;
    }
    // A request refused with an error answer is acknowledged only once the answer has been
    // transmitted (PROTOCOL.md §5.4): the ack then cannot overtake it.
    if (c->act->err_answers_unsent != 0) {
        for (const TxMsg *m = c->act->head; m != nullptr; m = m->next) {
            if (m->kind == TxMsg::Kind::kErrorResponse && !psn_before(m->psn_first, c->act->send_psn) &&
                psn_before(m->req_psn, h->ack_psn)) {
                h->ack_psn = m->req_psn;
                break;
            }
        }
    }
    h->sack = c->act->reorder_count ? rx_sack(c) : 0;
    if (h->opcode == static_cast<uint8_t>(Opcode::kNAK)) {
        // A NAK's acknowledgement is not applied by its receiver (it carries no stream
        // position, §5.4): what was owed stays owed and goes out with the next packet or ACK,
        // so that requests delivered before a message refused as not ready complete while
        // the sender keeps resending that message.
        return;
    }
    c->act->ack_pending = c->act->ack_now = c->act->ack_next = false;
    c->act->unacked_rx = 0;
    c->act->unacked_rx_bytes = 0;
}

SRCNIC_HOT const TxMsg *Nic::tx_packet(Connection *c, uint32_t psn, bool retransmit)
{
    TxMsg *m = c->act->head;
    while (m != nullptr && !psn_before(psn, m->psn_end())) {
        m = m->next;
    }
    if (m == nullptr || psn_before(psn, m->psn_first)) {
        return nullptr;   // acknowledged and completed meanwhile
    }
    struct iovec *iov;
    const PeerNic &peer = peer_of(c);
    PacketHeader *h = tx_slot(peer.addr, m->job_key, &iov);
    const uint32_t seg = psn - m->psn_first;
    const uint32_t offset = seg * m->seg;
    const uint32_t plen = m->length > offset ? std::min<uint32_t>(m->seg, m->length - offset) : 0;
    if (!retransmit && seg + 1 == m->npkts && m->short_tail(c->seg_payload)) {
        ++c->act->short_inflight;   // (apply_ack counts it out)
    }
    h->opcode = m->cancelled ? static_cast<uint8_t>(Opcode::kNOP) : m->opcode;
    // ACK_REQ on retransmissions, and on the last PSN assigned so far: the connection goes
    // idle after it, so no later packet would make the peer acknowledge it (and the requests
    // it ends complete on that acknowledgement). Not for a request posted LAZY_ACK: nothing
    // waits for it soon, and the peer's acknowledgement delay bounds it (a reply the peer
    // sends meanwhile carries it, instead of an ACK of its own; PROTOCOL.md 5.3). A DC stream
    // asks always: its DCI is handed over only once everything on it is acknowledged.
    const bool ack_req = retransmit ||
                         (psn + 1 == c->next_psn && !(m->lazy_ack && c->kind == ConnKind::kConn));
    if (!retransmit) {
        // (arm_probe's allowance for its acknowledgement: a LAZY_ACK tail's waits the peer's
        // delay; a packet inside a stream is acknowledged by count, or probed for as before.)
        c->act->tail_unasked = !ack_req && psn + 1 == c->next_psn;
    }
    h->flags = static_cast<uint16_t>((seg == 0 ? kFlagFirst : 0) | (seg + 1 == m->npkts ? kFlagLast : 0) |
                                     (c->peer_conn == 0 ? kFlagSyn : 0) | (ack_req ? kFlagAckReq : 0) |
                                     dc_flag_of(c->kind));
    h->stream = stream_of(c);
    h->dst_nic = peer.nic;
    h->src_conn = c->id;
    h->dst_conn = c->peer_conn;
    h->psn = psn;
    fill_ack(c, h);
    if (__builtin_expect(!xack_cands_.empty(), 0) && h->dst_conn != 0 && !retransmit) {
        xack_attach(c, h, peer.addr);   // (a retransmission is more likely lost again)
    }
    h->src_qpn = m->local_qpn;
    h->dst_qpn = m->peer_qpn;
    h->msg_len = m->length;
    uint32_t iovcnt = 0;
    if (!m->cancelled) {
        switch (static_cast<Opcode>(m->opcode)) {
        case Opcode::kSEND:
            h->imm = m->wqe.imm;
            h->addr = offset;
            iovcnt = gather(m->wqe, offset, plen, iov);
            break;
        case Opcode::kWRITE:   // (a chunk's bytes start at m->offset of its WQE's)
            h->addr = m->wqe.remote_addr + m->offset + offset;
            h->rkey = m->wqe.rkey;
            iovcnt = gather(m->wqe, static_cast<uint32_t>(m->offset + offset), plen, iov);
            break;
        case Opcode::kREAD_REQ:
            h->addr = m->wqe.remote_addr + m->offset;
            h->rkey = m->wqe.rkey;
            break;
        case Opcode::kREAD_RESP:
            h->addr = offset;
            h->req_psn = m->req_psn;
            if (plen != 0 && m->owner != nullptr &&
                !m->owner->mrs.check(m->src_rkey, m->src_addr + offset, plen,
                                     SRCNIC_ACCESS_REMOTE_READ)) {
                // Its region was deregistered (invalidated) since the READ was accepted: the
                // source may be freed memory now, and is not read again.
                count(SRCNIC_CNT_ACCESS_ERRORS);
                m->owner = nullptr;
            }
            if (plen != 0 && m->owner != nullptr) {
                iov[0].iov_base = reinterpret_cast<void *>(m->src_addr + offset);
                iov[0].iov_len = plen;
                iovcnt = 1;
                if (!m->owner->space.local() &&
                    m->owner->space.direct(m->src_addr + offset, plen) == nullptr) {
                    const uint8_t *p = stage(*m, m->owner->space, offset, plen, m->length);
                    iov[0].iov_base = const_cast<uint8_t *>(p);
                    if (p == nullptr) {
                        m->owner = nullptr;   // its memory is gone: answer the rest with an error
                    }
                } else if (!m->owner->space.local()) {
                    iov[0].iov_base = m->owner->space.direct(m->src_addr + offset, plen);
                }
            }
            if (m->owner == nullptr) {
                // The rest of the answer cannot be read (its owner detached, its memory is gone
                // or its region invalidated): each remaining PSN goes as an error answer to
                // the READ (§3.5).
                h->opcode = static_cast<uint8_t>(Opcode::kERR_RESP);
                h->imm = static_cast<uint32_t>(static_cast<int32_t>(SRCNIC_ERR_REMOTE_ACCESS));
                h->addr = 0;
                iovcnt = 0;
            }
            break;
        case Opcode::kERR_RESP:
            h->imm = static_cast<uint32_t>(static_cast<int32_t>(m->status));
            h->req_psn = m->req_psn;
            break;
        default:
            break;
        }
        // (Inline payloads travel in the WQE, which the NIC holds: nothing to fetch.)
        if (iovcnt != 0 && m->qp != nullptr && !m->qp->owner()->space.local() &&
            !(m->wqe.flags & SRCNIC_WQE_FLAG_INLINE) &&
            !gather_from(*m, m->qp->owner()->space, m->offset + offset, plen, iov, &iovcnt)) {
            // The request names memory its host does not have: it fails there, and what is
            // left of it goes as NOPs (§3.6).
            m->status = SRCNIC_ERR_INVALID_ADDR;
            complete_request(c, m);
            m->cancelled = true;
            m->qp = nullptr;
            h->opcode = static_cast<uint8_t>(Opcode::kNOP);
            iovcnt = 0;
        }
        h->payload_len = static_cast<uint16_t>(iovcnt ? plen : 0);
        // The last segment of a message cut into equal ones (TxMsg::cut) is shorter by less
        // than their count, or by at most kWirePadMax where the message took the size of the
        // run before it (TxMsg::join_run). Padded to their size, it no longer ends the link's
        // run of equal datagrams at every message: back-to-back messages of one size go out as
        // one UDP GSO send and come in as one GRO receive (PROTOCOL.md §2.3). An 8 KiB stream
        // at a 1,500-byte MTU sent at a third of the rate of a 4 KiB one whose length divided.
        const uint32_t pad = m->seg - plen;
        if (iovcnt != 0 && seg != 0 && seg + 1 == m->npkts && pad != 0 && pad <= kWirePadMax &&
            iovcnt + 1 < kLinkMaxIov) {
            iov[iovcnt].iov_base = const_cast<uint8_t *>(kZeroPad);
            iov[iovcnt].iov_len = pad;
            ++iovcnt;
            h->pad = static_cast<uint8_t>(pad);
        }
    }
    if (h->opcode == static_cast<uint8_t>(Opcode::kNOP) ||
        h->opcode == static_cast<uint8_t>(Opcode::kERR_RESP)) {
        h->msg_len = 0;
    }
    tx_commit(iovcnt, c);
    if (retransmit) {
        count(SRCNIC_CNT_RETRANSMITS);
        ++stats_of(c).retransmits;
        if (c->act->rtt_timing && psn == c->act->rtt_psn) {
            c->act->rtt_timing = false;   // Karn: an ack of it may answer either transmission
        }
    }
    return m;
}

void Nic::tx_control(Connection *c, Opcode op, uint32_t psn, uint32_t imm)
{
    struct iovec *iov;
    const PeerNic &peer = peer_of(c);
    PacketHeader *h = tx_slot(peer.addr, several_owners_ ? c->peer_job_key : config_.job_key, &iov);
    h->opcode = static_cast<uint8_t>(op);
    h->flags = dc_flag_of(c->kind);
    h->stream = stream_of(c);
    h->dst_nic = peer.nic;
    h->src_conn = c->id;
    h->dst_conn = c->peer_conn;
    h->psn = psn;
    h->imm = imm;
    fill_ack(c, h);
    tx_commit(0, c);
    if (op == Opcode::kACK) {
        count(SRCNIC_CNT_ACKS_SENT);
    }
}

void Nic::tx_reset(const LinkAddr &to, uint64_t to_nic, uint32_t to_conn, uint32_t job_key)
{
    // Only to a sender that proved our secret or is the peer of the connection it names
    // (rx_demux.cc), which already knows our incarnation: an RST tells nobody else anything.
    struct iovec *iov;
    PacketHeader *h = tx_slot(to, several_owners_ ? job_key : config_.job_key, &iov);
    h->opcode = static_cast<uint8_t>(Opcode::kRST);
    h->dst_nic = to_nic;
    h->dst_conn = to_conn;
    tx_commit(0, nullptr);
}

void Nic::tx_nak_unbound(const LinkAddr &to, const PacketHeader &h, NakReason reason)
{
    // To a sender that proved our secret (a SYN) or names a stream this NIC held (DC_GONE):
    // it names the sender's connection or DCI and the PSN it answers, and no id of ours.
    struct iovec *iov;
    PacketHeader *out = tx_slot(to, several_owners_ ? h.job_key : config_.job_key, &iov);
    out->opcode = static_cast<uint8_t>(Opcode::kNAK);
    out->dst_nic = h.src_nic;
    out->dst_conn = h.src_conn;
    out->psn = h.psn;
    out->imm = static_cast<uint32_t>(reason);
    if (h.flags & kFlagDcInit) {
        out->flags = kFlagDcTarget;
        out->stream = h.stream;
    }
    tx_commit(0, nullptr);
}

void Nic::check_timers(Connection *c, uint64_t now, bool after_rx)
{
    if (c->act->rnr_until_ns != 0 && now >= c->act->rnr_until_ns) {
        c->act->rnr_until_ns = 0;
    }
    if (!c->unacked()) {
        c->act->rto_deadline_ns = 0;
        c->act->probe_deadline_ns = 0;
        return;
    }
    // An expired timer fires only after the link has been read: the acknowledgement that
    // makes it moot may be waiting there. A sender busy transmitting (a bandwidth stream: a
    // window of 60 KB datagrams between two receives) otherwise timed out with the ack in its
    // socket and resent up to a window the peer already held. progress() runs the timers
    // again right after its receive; transmit() alone (the doorbell) leaves them to it.
    const bool probe_due = c->act->probe_deadline_ns != 0 && now >= c->act->probe_deadline_ns;
    const bool rto_due = c->act->rto_deadline_ns != 0 && now >= c->act->rto_deadline_ns;
    if (!probe_due && !rto_due) {
        return;
    }
    if (!after_rx) {
        timers_due_ = true;
        return;
    }
    if (probe_due) {
        c->act->probe_deadline_ns = 0;
        if (c->act->rnr_until_ns == 0 && !c->act->in_timeout_recovery() && !rto_due) {
            send_probe(c);
            return;
        }
    }
    if (!rto_due) {
        return;
    }
    count(SRCNIC_CNT_TIMEOUTS);
    ++c->act->retries;
    SRCNIC_LOG_DEBUG("connection %u timeout %u in recovery %s: acked %u send %u next %u rto %u "
                     "us srtt %u us deferred %d/%u/%u expected %u", c->id, c->act->retries,
                     to_string(c->act->recovery), c->act->acked_psn, c->act->send_psn, c->next_psn, c->act->rto_us,
                     c->srtt_us, c->act->has_deferred_ack, c->act->deferred_pos, c->act->deferred_ack,
                     c->expected_psn);
    if (c->act->retries > config_.retry_count ||
        now - c->act->progress_ns > static_cast<uint64_t>(config_.peer_timeout_ms) * kNsPerMs) {
        conn_fail(c, SRCNIC_ERR_ENDPOINT_TIMEOUT);
        return;
    }
    c->act->rto_us = std::min(c->act->rto_us * 2, config_.rto_max_us);
    c->act->rtt_timing = false;   // Karn: no sample from a retransmitted packet
    c->act->rto_deadline_ns = now + static_cast<uint64_t>(c->act->rto_us) * kNsPerUs;
    // Probe with the oldest unacknowledged packet only (PROTOCOL.md §5.5): if the peer was
    // merely slow its ack ends the recovery; if packets were lost, each partial ack resends
    // twice as many as it acknowledged (skipping those the peer reported).
    set_recovery(c, c->act->peer_sack != 0 ? Recovery::kTimeoutHole : Recovery::kTimeout);
    c->act->recover_psn = c->act->send_psn;
    const uint32_t oldest = c->act->oldest_unreported();
    c->act->recover_resent = oldest + 1;
    if (psn_before(oldest, c->act->send_psn)) {
        start_resend(c, oldest, oldest + 1);
    } else {
        // The peer holds everything; only its acknowledgement could not be applied yet.
        // A duplicate of the newest packet makes it send a fresh one (§5.3).
        tx_packet(c, c->act->send_psn - 1, true);
    }
}

void Nic::arm_probe(Connection *c, uint64_t now)
{
    // Two round trips and the time the receiver may take to acknowledge the newest packet (§5.3:
    // its next progress call if the packet asked, else its acknowledgement delay) after the
    // newest transmission or acknowledgement, once a round trip has been measured; one probe
    // until an ack advances, none during a timeout's recovery (which probes on its own).
    if (c->srtt_us == 0 || c->act->recovery != Recovery::kNone || !c->unacked()) {
        c->act->probe_deadline_ns = 0;
        return;
    }
    c->act->probe_deadline_ns = now + 2 * static_cast<uint64_t>(c->srtt_us) * kNsPerUs +
                                (c->act->tail_unasked ? kAckDelayNs : kAskedAckSlackNs);
}

void Nic::send_probe(Connection *c)
{
    // The newest packet, with ACK_REQ: if it was lost it is recovered now, not at the
    // timeout; if it arrived, the duplicate draws an ack whose sack shows the holes before it
    // (note_sack then resends them). If the peer reported the newest, the loss is earlier:
    // the oldest packet it lacks goes instead; if it reported everything (its ack is held back
    // by §5.4), the newest again draws a fresh ack.
    const uint32_t newest = c->act->send_psn - 1;
    const uint32_t oldest = c->act->oldest_unreported();
    const uint32_t psn = c->act->peer_holds(newest) && psn_before(oldest, newest) ? oldest : newest;
    tx_packet(c, psn, true);
    set_recovery(c, Recovery::kProbe);
    count(SRCNIC_CNT_TAIL_PROBES);
}

void Nic::start_resend(Connection *c, uint32_t from, uint32_t end)
{
    if (psn_before(from, c->act->acked_psn)) {
        from = c->act->acked_psn;
    }
    if (psn_before(c->act->send_psn, end)) {
        end = c->act->send_psn;
    }
    if (!psn_before(from, end)) {
        return;
    }
    if (psn_before(c->act->resend_psn, c->act->send_psn)) {
        // A run is in progress: widen it.
        if (psn_before(from, c->act->resend_psn)) {
            c->act->resend_psn = from;
        }
        if (psn_before(c->act->resend_end, end)) {
            c->act->resend_end = end;
        }
    } else {
        c->act->resend_psn = from;
        c->act->resend_end = end;
    }
    activate_now(c);
}

SRCNIC_HOT unsigned Nic::tx_schedule(uint64_t now, bool after_rx)
{
    unsigned sent = 0;
    for (size_t i = 0; i < active_.size();) {
        Connection *c = active_[i];
        if (c->state == ConnState::kOpen && c->act != nullptr) {
            check_timers(c, now, after_rx);
        }
        // (A slot released and opened again while listed has no active half until it has work.)
        if (c->state != ConnState::kOpen || c->act == nullptr) {
            c->in_active = false;
            active_[i] = active_.back();
            active_.pop_back();
            continue;
        }
        if (c->kind == ConnKind::kConn) {
            c->used = now;   // it had work or a timer (an idle one leaves the list)
        }
        if (c->act->rnr_until_ns == 0) {
            while (!tx_blocked_ && psn_before(c->act->resend_psn, c->act->send_psn)) {
                if (!psn_before(c->act->resend_psn, c->act->resend_end)) {
                    c->act->resend_psn = c->act->send_psn;   // the run is over
                    break;
                }
                const uint32_t psn = c->act->resend_psn++;
                if (c->act->peer_holds(psn)) {
                    continue;
                }
                tx_packet(c, psn, true);
                ++sent;
            }
            bool new_data = false;
            while (!tx_blocked_ && psn_before(c->act->send_psn, c->next_psn) && c->act->window_open() &&
                   !psn_before(c->act->send_psn, c->act->resend_psn)) {
                if (!c->unacked()) {
                    c->act->progress_ns = now;   // the failure clock starts with the oldest unacked
                }
                const TxMsg *m = tx_packet(c, c->act->send_psn, false);
                if (!c->act->rtt_timing) {
                    c->act->rtt_timing = true;
                    c->act->rtt_psn = c->act->send_psn;
                    c->act->rtt_start_ns = now;
                }
                if (c->act->resend_psn == c->act->send_psn) {
                    ++c->act->resend_psn;
                }
                if (c->act->err_answers_unsent != 0 && m != nullptr &&
                    m->kind == TxMsg::Kind::kErrorResponse) {
                    // Its ack was held back to the refused request; now that the answer is
                    // out, acknowledge the request too (PROTOCOL.md 5.3, 5.4).
                    --c->act->err_answers_unsent;
                    c->act->ack_pending = c->act->ack_now = true;
                }
                ++c->act->send_psn;
                ++sent;
                new_data = true;
            }
            if (c->unacked() && c->act->rto_deadline_ns == 0) {
                c->act->rto_deadline_ns = now + static_cast<uint64_t>(c->act->rto_us) * kNsPerUs;
            }
            if (new_data) {
                arm_probe(c, now);
            }
        }
        // An acknowledgement asked for by ACK_REQ waits for the next call's first pass: the
        // application may post a reply before it, which then carries it.
        if (c->act->ack_pending && !tx_blocked_ &&
            (c->act->ack_now || (c->act->ack_next && !after_rx) || c->act->ack_due() ||
             now - c->act->ack_since_ns >= kAckDelayNs)) {
            if (c->dc_slot && dc_of(c)->xack_listed && !c->act->ack_now && !c->act->ack_due()) {
                // A DC target's, asked for by ACK_REQ: a packet of this pass to its initiator's
                // NIC may carry it (PROTOCOL.md §8.7); xack_flush sends what none did.
                xack_later_.push_back(c->id & 0xffff);
            } else if (__builtin_expect(c->kind == ConnKind::kDci && dc_of(c)->rev_run, 0) &&
                       dci_close_early(c)) {
                // DC_CLOSE carried the acknowledgement (PROTOCOL.md §8.8); closing, the DCI
                // keeps no active half.
                c->in_active = false;
                active_[i] = active_.back();
                active_.pop_back();
                continue;
            } else {
                tx_control(c, Opcode::kACK, ack_position(c), 0);
            }
        }
        // A connection holding out-of-order packets stays listed even when idle, so that
        // rx_poll can reclaim those buffers when reception runs short of them.
        const bool busy = c->unacked() || psn_before(c->act->send_psn, c->next_psn) || c->act->ack_pending ||
                          c->act->head != nullptr || c->act->rnr_until_ns != 0 || c->act->reorder_count != 0;
        if (!busy) {
            c->in_active = false;
            active_[i] = active_.back();
            active_.pop_back();
            disengage(c);
            continue;
        }
        ++i;
    }
    if (!xack_cands_.empty()) {
        xack_flush();
    }
    if (!rev_cands_.empty()) {
        rev_find(nullptr);   // (drops the contexts whose acknowledgement went)
    }
    return sent;
}

bool Nic::tx_idle_until(uint64_t *deadline_p) const
{
    uint64_t deadline = 0;
    for (const Connection *c : active_) {
        if (c->state != ConnState::kOpen || c->act == nullptr) {
            continue;
        }
        const bool can_send = psn_before(c->act->send_psn, c->next_psn) && c->act->window_open();
        const bool resend = psn_before(c->act->resend_psn, c->act->send_psn);
        if ((can_send || resend) && c->act->rnr_until_ns == 0) {
            return false;
        }
        uint64_t next = c->act->rto_deadline_ns;
        if (c->act->probe_deadline_ns != 0 && (next == 0 || c->act->probe_deadline_ns < next)) {
            next = c->act->probe_deadline_ns;
        }
        if (c->act->rnr_until_ns != 0 && (next == 0 || c->act->rnr_until_ns < next)) {
            next = c->act->rnr_until_ns;
        }
        if (c->act->ack_pending && (c->act->ack_now || c->act->ack_next)) {
            return false;
        }
        if (c->act->ack_pending) {
            const uint64_t ack_at = c->act->ack_since_ns + kAckDelayNs;
            if (next == 0 || ack_at < next) {
                next = ack_at;
            }
        }
        if (next != 0 && (deadline == 0 || next < deadline)) {
            deadline = next;
        }
    }
    *deadline_p = deadline;
    return true;
}

} // namespace srcnic
