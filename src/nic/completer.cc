// Completer: handles answers to this NIC's requests (READ responses placed into the READ's
// scatter list, error answers recorded on the request) and completes requests in order.
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

// Whether READ_RESP segment h answers READ m where its bytes are due next.
bool read_resp_fits(const TxMsg &m, const PacketHeader &h)
{
    return m.opcode == static_cast<uint8_t>(Opcode::kREAD_REQ) && h.msg_len == m.length &&
           h.addr == m.read_placed && h.payload_len <= m.length - m.read_placed;
}

} // namespace

TxMsg *Nic::find_request(const Connection *c, uint32_t req_psn) const
{
    for (TxMsg *m = c->head; m != nullptr; m = m->next) {
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
    // The checks complete_answer makes before it places a READ_RESP segment, in its order.
    const TxMsg *m = find_request(c, h.req_psn);
    if (m == nullptr || !read_resp_fits(*m, h) || m->cancelled || m->qp == nullptr) {
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
    if (!m->cancelled && m->qp != nullptr && placed != nullptr && h.payload_len != 0 &&
        placed == read_piece(*m, static_cast<uint32_t>(m->offset + h.addr), h.payload_len)) {
        count(SRCNIC_CNT_PLACED_WHILE_CHECKED);   // copied as its CRC was checked
    } else if (!m->cancelled && m->qp != nullptr) {
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

} // namespace srcnic
