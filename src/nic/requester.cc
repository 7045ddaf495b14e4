// Requester: takes WQEs from the QPs' send rings, gives each the connection cached in its
// destination (no lookup: the id indexes the peer table) and a PSN range, and appends it to
// that connection's FIFO. Completes requests in order per connection.
#include "nic/nic.h"

#include "core/clock.h"

namespace srcnic {

TxMsg *Nic::msg_alloc()
{
    TxMsg *m = free_msgs_;
    if (m == nullptr) {
        return nullptr;
    }
    free_msgs_ = m->next;
    --msgs_free_;
    m->next = nullptr;
    m->acked = m->answered = m->cancelled = false;
    m->status = SRCNIC_OK;
    m->read_placed = 0;
    m->qp = nullptr;
    m->owner = nullptr;
    return m;
}

void Nic::msg_free(TxMsg *m)
{
    m->next = free_msgs_;
    free_msgs_ = m;
    ++msgs_free_;
}

void Nic::msg_append(Connection *c, TxMsg *m)
{
    m->psn_first = c->next_psn;
    c->next_psn += m->npkts;
    m->next = nullptr;
    if (c->tail != nullptr) {
        c->tail->next = m;
    } else {
        c->head = m;
    }
    c->tail = m;
    activate_now(c);   // answers the responder creates go out in the receive's progress call
}

SRCNIC_HOT unsigned Nic::requester_take()
{
    unsigned taken = 0;
    for (QpSlot &slot : qps_) {
        QpContext *qp = slot.ctx;
        if (qp == nullptr) {
            continue;
        }
        auto &sq = qp->sq();
        const bool trusted = qp->owner()->trusted;
        while (!sq.empty() && msgs_free_ > kAnswerReserve && qp->can_take()) {
            TxMsg *m = msg_alloc();
            if (!sq.peek(&m->wqe)) {   // (a corrupt ring: see below)
                msg_free(m);
                break;
            }
            sq.pop();
            qp->took();
            ++taken;
            const srcnic_wqe_t &wqe = m->wqe;
            // A host in another process may have written anything: the copy is checked.
            if (!trusted && srcnic::validate_wqe(wqe, max_msg_) != SRCNIC_OK) {
                qp->complete(make_cqe(wqe.wr_id, SRCNIC_ERR_INVALID_PARAM, wqe.opcode, 0));
                msg_free(m);
                continue;
            }
            Connection *c = conn_by_id(wqe.dest.peer);
            if (c == nullptr) {
                const srcnic_status_t status = dest_status(wqe.dest);
                qp->complete(make_cqe(wqe.wr_id,
                                      static_cast<int16_t>(status == SRCNIC_OK
                                                               ? SRCNIC_ERR_CONNECTION_RESET
                                                               : status),
                                      wqe.opcode, 0));
                msg_free(m);
                continue;
            }
            m->kind = TxMsg::Kind::kRequest;
            m->qp = qp;
            m->local_qpn = qp->qpn();
            m->peer_qpn = wqe.dest.qpn;
            m->job_key = qp->owner()->job_key;
            const uint64_t length = wqe_length(wqe);
            m->length = static_cast<uint32_t>(length);
            switch (wqe.opcode) {
            case SRCNIC_OP_SEND: m->opcode = static_cast<uint8_t>(Opcode::kSEND); break;
            case SRCNIC_OP_WRITE: m->opcode = static_cast<uint8_t>(Opcode::kWRITE); break;
            default: m->opcode = static_cast<uint8_t>(Opcode::kREAD_REQ); break;
            }
            // (A division only for a message of several packets.)
            m->npkts = (wqe.opcode == SRCNIC_OP_READ || length <= c->seg_payload)
                           ? 1
                           : static_cast<uint32_t>((length + c->seg_payload - 1) / c->seg_payload);
            msg_append(c, m);
        }
        if (sq.corrupt()) {
            qp->fault();
        }
    }
    return taken;
}

void Nic::complete_request(TxMsg *m)
{
    m->qp->complete(make_cqe(m->wqe.wr_id, m->status, m->wqe.opcode, m->length));
}

SRCNIC_HOT void Nic::complete_in_order(Connection *c)
{
    while (c->head != nullptr) {
        TxMsg *m = c->head;
        if (!m->acked) {
            break;
        }
        if (m->kind == TxMsg::Kind::kRequest) {
            const bool is_read = m->opcode == static_cast<uint8_t>(Opcode::kREAD_REQ);
            if (is_read && !m->answered && !m->cancelled) {
                break;
            }
            if (!m->cancelled && m->qp != nullptr) {
                complete_request(m);
            }
        }
        c->head = m->next;
        if (c->head == nullptr) {
            c->tail = nullptr;
        }
        msg_free(m);
    }
}

} // namespace srcnic
