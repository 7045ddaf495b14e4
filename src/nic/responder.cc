// Responder: executes requests in PSN order. SEND lands in the destination QP's next posted
// receive buffer (or is refused with a receiver-not-ready NAK, never dropped silently); WRITE
// is placed at the rkey-checked address; READ queues a response on the same connection. A
// refused request gets an error answer and its remaining segments are consumed untouched.
#include "nic/nic.h"

#include "core/log.h"

#include <cstring>

namespace srcnic {

srcnic_status_t Nic::send_first(const PacketHeader &h, QpContext **qp_p,
                                srcnic_recv_wqe_t *rwqe) const
{
    QpContext *qp = request_qp(h);
    *qp_p = qp;
    if (qp == nullptr) {
        return SRCNIC_ERR_UNREACHABLE;
    }
    if (!qp->can_take() || !qp->rq().peek(rwqe)) {
        return SRCNIC_ERR_NO_RESOURCE;
    }
    return h.msg_len > rwqe->length ? SRCNIC_ERR_MESSAGE_TRUNCATED : SRCNIC_OK;
}

SRCNIC_HOT bool Nic::respond(Connection *c, const PacketHeader &h, const uint8_t *payload,
                             const uint8_t *placed)
{
    ConnActive::Inbound &in = c->act->inbound;
    if (h.opcode == static_cast<uint8_t>(Opcode::kNOP)) {
        // The sender cancelled the message this PSN belonged to (§3.6).
        if (in.active) {
            abort_inbound(c, SRCNIC_ERR_CANCELED);
        }
        return true;
    }
    if (h.flags & kFlagFirst) {
        if (in.active) {
            abort_inbound(c, SRCNIC_ERR_CANCELED);   // a message never finished: the sender is broken
        }
    } else if (!continues(in, h)) {
        count(SRCNIC_CNT_DROP_BAD_RESPONSE);          // a middle segment without its first
        return true;
    } else if (in.discard) {
        if (in.refusal != 0) {
            // Its QP went away mid-message: the sender learns it from an error answer.
            const srcnic_status_t why = static_cast<srcnic_status_t>(in.refusal);
            in.refusal = 0;
            return refuse_rest(c, h, why);
        }
        if (h.flags & kFlagLast) {
            in = ConnActive::Inbound();
        }
        return true;
    }
    switch (static_cast<Opcode>(h.opcode)) {
    case Opcode::kSEND: return respond_send(c, h, payload, placed);
    case Opcode::kWRITE: return respond_write(c, h, payload);
    case Opcode::kREAD_REQ: return respond_read(c, h);
    default: return true;
    }
}

SRCNIC_HOT bool Nic::respond_send(Connection *c, const PacketHeader &h, const uint8_t *payload,
                                  const uint8_t *placed)
{
    ConnActive::Inbound &in = c->act->inbound;
    if (h.flags & kFlagFirst) {
        QpContext *qp;
        srcnic_recv_wqe_t rwqe;
        const srcnic_status_t verdict = send_first(h, &qp, &rwqe);
        if (verdict == SRCNIC_ERR_NO_RESOURCE) {
            // No buffer posted, or no room for its completion until the host polls.
            count(SRCNIC_CNT_RNR_SENT);
            tx_control(c, Opcode::kNAK, h.psn, static_cast<uint32_t>(NakReason::kRnr));
            return false;
        }
        if (verdict != SRCNIC_OK) {
            return refuse_message(c, h, verdict, verdict == SRCNIC_ERR_UNREACHABLE
                                                     ? SRCNIC_CNT_NO_SUCH_QP
                                                     : SRCNIC_CNT_RECV_TRUNCATED);
        }
        in = ConnActive::Inbound();
        in.active = true;
        in.opcode = h.opcode;
        in.first_psn = h.psn;
        in.qp = qp;
        in.rwqe = rwqe;
        qp->rq().pop();
        qp->took();
        in.src_qpn = h.src_qpn;
        in.imm = h.imm;
        in.length = h.msg_len;
    }
    if (!segment_fits(in.offset, in.length, h)) {
        count(SRCNIC_CNT_DROP_BAD_RESPONSE);   // inconsistent segment: refuse the message
        abort_inbound(c, SRCNIC_ERR_IO_ERROR);
        in.active = in.discard = !(h.flags & kFlagLast);
        in.opcode = h.opcode;
        return true;
    }
    if (in.qp != nullptr && h.payload_len != 0) {
        AddrSpace &space = in.qp->owner()->space;
        const uint64_t addr = in.rwqe.addr + in.offset;
        uint8_t *to = space.direct(addr, h.payload_len);
        if (to != nullptr && to == placed) {
            count(SRCNIC_CNT_PLACED_WHILE_CHECKED);   // copied as its CRC was checked
        } else if (to != nullptr) {
            std::memcpy(to, payload, h.payload_len);
        } else if (!space.write(addr, payload, h.payload_len)) {
            // The posted buffer is not the host's memory (or the host is gone): the receive
            // fails there with INVALID_ADDR, the sender's with IO_ERROR, and the rest of the
            // message is consumed untouched.
            QpContext *qp = in.qp;
            const uint64_t wr_id = in.rwqe.wr_id;
            const uint32_t src_qpn = in.src_qpn;
            if (!refuse_rest(c, h, SRCNIC_ERR_IO_ERROR)) {
                return false;
            }
            qp->complete(make_cqe(wr_id, SRCNIC_ERR_INVALID_ADDR, SRCNIC_OP_RECV, 0, 0, src_qpn, c->id));
            return true;
        }
    }
    in.offset += h.payload_len;
    if (h.flags & kFlagLast) {
        if (in.qp != nullptr) {
            in.qp->complete(make_cqe(in.rwqe.wr_id, SRCNIC_OK, SRCNIC_OP_RECV, in.offset, in.imm,
                                     in.src_qpn, c->id));
        }
        in = ConnActive::Inbound();
    }
    return true;
}

uint8_t *Nic::send_target(const Connection *c, const PacketHeader &h)
{
    // respond's and respond_send's checks, where the segment would be placed (before the
    // packet engages its connection: an idle one receives nothing).
    static const ConnActive::Inbound kIdle;
    const ConnActive::Inbound &in = c->act != nullptr ? c->act->inbound : kIdle;
    if (h.flags & kFlagFirst) {
        QpContext *qp;
        srcnic_recv_wqe_t rwqe;
        if (in.active || send_first(h, &qp, &rwqe) != SRCNIC_OK || !segment_fits(0, h.msg_len, h)) {
            return nullptr;
        }
        return qp->owner()->space.direct(rwqe.addr, h.payload_len);
    }
    if (!continues(in, h) || in.discard || in.qp == nullptr || !segment_fits(in.offset, in.length, h)) {
        return nullptr;
    }
    return in.qp->owner()->space.direct(in.rwqe.addr + in.offset, h.payload_len);
}

bool Nic::respond_write(Connection *c, const PacketHeader &h, const uint8_t *payload)
{
    ConnActive::Inbound &in = c->act->inbound;
    // An access names the QP of the process whose memory it targets (§6): its registrations
    // are the only ones the key is looked up in.
    QpContext *qp = request_qp(h);
    if (h.flags & kFlagFirst) {
        if (qp == nullptr) {
            return refuse_message(c, h, SRCNIC_ERR_UNREACHABLE, SRCNIC_CNT_NO_SUCH_QP);
        }
        // The whole message must fit the region before any of it is placed (§6).
        if (!qp->owner()->mrs.check(h.rkey, h.addr, h.msg_len, SRCNIC_ACCESS_REMOTE_WRITE)) {
            return refuse_message(c, h, SRCNIC_ERR_REMOTE_ACCESS, SRCNIC_CNT_ACCESS_ERRORS);
        }
        in = ConnActive::Inbound();
        in.active = !(h.flags & kFlagLast);
        in.opcode = h.opcode;
        in.first_psn = h.psn;
        in.length = h.msg_len;
    }
    // Every segment is checked on its own too: a forged middle segment touches nothing, and
    // the message is refused from there on (its target went away, or it never was).
    if (qp == nullptr) {
        count(SRCNIC_CNT_NO_SUCH_QP);
        return refuse_rest(c, h, SRCNIC_ERR_UNREACHABLE);
    }
    if (!qp->owner()->mrs.check(h.rkey, h.addr, h.payload_len, SRCNIC_ACCESS_REMOTE_WRITE) ||
        !qp->owner()->space.alive()) {
        count(SRCNIC_CNT_ACCESS_ERRORS);
        return refuse_rest(c, h, SRCNIC_ERR_REMOTE_ACCESS);
    }
    // (Into memory the NIC cannot write directly the segment joins the write-behind: a
    // failure there, the owner's memory gone, is counted, and the sender is not told.)
    write_behind(qp->owner()->space, h.addr, payload, h.payload_len, nullptr);
    if (h.flags & kFlagLast) {
        in = ConnActive::Inbound();
    }
    return true;
}

bool Nic::respond_read(Connection *c, const PacketHeader &h)
{
    QpContext *qp = request_qp(h);
    // (A READ longer than any message this NIC sends is refused like one out of bounds: its
    // requester cuts its own at kChunkBytes.)
    if (qp == nullptr || h.msg_len > max_msg_ ||
        !qp->owner()->mrs.check(h.rkey, h.addr, h.msg_len, SRCNIC_ACCESS_REMOTE_READ)) {
        const srcnic_status_t status = qp == nullptr ? SRCNIC_ERR_UNREACHABLE : SRCNIC_ERR_REMOTE_ACCESS;
        if (!answer_error(c, h, status)) {
            return false;
        }
        count(qp == nullptr ? SRCNIC_CNT_NO_SUCH_QP : SRCNIC_CNT_ACCESS_ERRORS);
        return true;
    }
    TxMsg *m = msg_alloc();
    if (m == nullptr) {
        count(SRCNIC_CNT_RNR_SENT);
        tx_control(c, Opcode::kNAK, h.psn, static_cast<uint32_t>(NakReason::kRnr));
        return false;
    }
    m->kind = TxMsg::Kind::kReadResponse;
    m->opcode = static_cast<uint8_t>(Opcode::kREAD_RESP);
    m->length = h.msg_len;
    m->cut(c->seg_payload);
    m->owner = qp->owner();
    m->job_key = h.job_key;
    m->src_addr = h.addr;
    m->src_rkey = h.rkey;
    m->req_psn = h.psn;
    m->local_qpn = h.dst_qpn;
    m->peer_qpn = h.src_qpn;
    m->acked = false;
    msg_append(c, m);
    return true;
}

bool Nic::refuse_message(Connection *c, const PacketHeader &h, srcnic_status_t status,
                         srcnic_counter_t counter)
{
    if (!answer_error(c, h, status)) {
        return false;
    }
    count(counter);
    if (!(h.flags & kFlagLast)) {
        // Its remaining segments are consumed without touching anything.
        ConnActive::Inbound &in = c->act->inbound;
        in = ConnActive::Inbound();
        in.active = in.discard = true;
        in.opcode = h.opcode;
    }
    return true;
}

bool Nic::answer_error(Connection *c, const PacketHeader &h, srcnic_status_t status)
{
    TxMsg *m = msg_alloc();
    if (m == nullptr) {
        count(SRCNIC_CNT_RNR_SENT);
        tx_control(c, Opcode::kNAK, h.psn, static_cast<uint32_t>(NakReason::kRnr));
        return false;
    }
    m->kind = TxMsg::Kind::kErrorResponse;
    m->opcode = static_cast<uint8_t>(Opcode::kERR_RESP);
    m->job_key = h.job_key;
    m->status = static_cast<int16_t>(status);
    m->length = 0;
    m->cut(c->seg_payload);
    m->req_psn = h.psn;
    m->local_qpn = h.dst_qpn;
    m->peer_qpn = h.src_qpn;
    ++c->act->err_answers_unsent;
    msg_append(c, m);
    SRCNIC_LOG_RATELIMITED(LogLevel::kDebug, "refused %s psn %u from %s: %s",
                           opcode_info(h.opcode).name, h.psn, peer_of(c).addr.to_string().c_str(),
                           srcnic_status_string(status));
    return true;
}

bool Nic::refuse_rest(Connection *c, const PacketHeader &h, srcnic_status_t status)
{
    ConnActive::Inbound &in = c->act->inbound;
    PacketHeader first = h;
    first.psn = (h.flags & kFlagFirst) ? h.psn : in.first_psn;
    if (!answer_error(c, first, status)) {
        return false;
    }
    in = ConnActive::Inbound();
    if (!(h.flags & kFlagLast)) {
        in.active = in.discard = true;
        in.opcode = h.opcode;
        in.first_psn = first.psn;
    }
    return true;
}

void Nic::abort_inbound(Connection *c, srcnic_status_t status)
{
    ConnActive::Inbound &in = c->act->inbound;
    if (in.active && in.opcode == static_cast<uint8_t>(Opcode::kSEND) && in.qp != nullptr) {
        // The buffer goes back to the host with the reason; nothing is delivered.
        in.qp->complete(make_cqe(in.rwqe.wr_id, static_cast<int16_t>(status), SRCNIC_OP_RECV, 0, 0,
                                 in.src_qpn, c->id));
    }
    in = ConnActive::Inbound();
}

} // namespace srcnic
