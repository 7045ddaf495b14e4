// Requester: takes WQEs from the QPs' send rings, gives each the connection cached in its
// destination (no lookup: the id indexes the peer table) and a PSN range, and appends it to
// that connection's FIFO (in chunks for large WRITEs and READs). The completer completes them.
#include "nic/nic.h"

#include "core/clock.h"

#include <algorithm>

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
    m->serial = ++msg_serial_;
    m->acked = m->answered = m->cancelled = m->lazy_ack = false;
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
    engage(c);   // (before next_psn moves: an idle connection's PSNs all start from it)
    if (m->npkts > 1) {
        m->join_run(c->act->run_seg, c->seg_payload);
        c->act->run_seg = static_cast<uint16_t>(m->seg);
    }
    m->psn_first = c->next_psn;
    c->next_psn += m->npkts;
    m->next = nullptr;
    if (c->act->tail != nullptr) {
        c->act->tail->next = m;
    } else {
        c->act->head = m;
    }
    c->act->tail = m;
    activate_now(c);   // answers the responder creates go out in the receive's progress call
}

SRCNIC_HOT unsigned Nic::requester_take()
{
    unsigned taken = 0;
    dc_wait_prev_ = dc_wait_;
    dc_wait_ = false;
    if (__builtin_expect(!dcis_.empty() || !closing_.empty() || !dc_closing_.empty(), 0)) {
        const uint64_t t = now();
        dci_sweep(t);
        close_sweep(t);
        if (!dc_closing_.empty()) {
            dc_close_sweep(t);
        }
    }
    if (__builtin_expect(!backlogged_.empty(), 0)) {
        // Requests of connections that fell back to DC go first, each behind its Remote's DCI.
        for (size_t i = 0; i < backlogged_.size();) {
            Remote &r = remotes_[backlogged_[i]];
            srcnic_status_t status;
            if (r.backlog_head != nullptr) {
                const srcnic_dest_t dest{remote_id(r), 0};
                route(dest, &status, false);
            }
            if (r.backlog_head == nullptr) {
                backlogged_[i] = backlogged_.back();
                backlogged_.pop_back();
            } else {
                ++i;
            }
        }
    }
    for (QpSlot &slot : qps_) {
        QpContext *qp = slot.ctx;
        if (qp == nullptr) {
            continue;
        }
        if (qp->cursor().active) {
            if (qp->cursor().local) {
                local_write(qp);
                ++taken;   // (work: nothing else keeps the NIC polling for its next piece)
            } else {
                take_chunk(qp);
            }
            continue;   // its later work waits for the last chunk
        }
        auto &sq = qp->sq();
        const bool trusted = qp->owner()->trusted;
        uint64_t local_bytes = 0;   // of SENDs and WRITEs placed locally in this pass
        while (!sq.empty() && msgs_free_ > kAnswerReserve && qp->can_take()) {
            TxMsg *m = msg_alloc();
            if (!sq.peek(&m->wqe)) {   // (a corrupt ring: see below)
                msg_free(m);
                break;
            }
            if (__builtin_expect(m->wqe.opcode != SRCNIC_OP_READ && qp->owner()->copies_pending(), 0)) {
                msg_free(m);   // behind a READ its process has yet to copy (direct_read)
                break;
            }
            // Posted cancelled, or cancelled while it waited in the ring: completes now,
            // wherever it was going.
            const bool cancelled = (m->wqe.flags & SRCNIC_WQE_FLAG_CANCELED) ||
                                   (!qp->cancels().empty() && cancelled_in_ring(qp, m->wqe, sq.position()));
            // Where it goes; a request waiting for a DCI stays in the ring, and the QP's later
            // requests behind it (their order is kept).
            srcnic_status_t status = SRCNIC_OK;
            Connection *c = cancelled ? nullptr : route(m->wqe.dest, &status);
            if (c == nullptr && status == SRCNIC_ERR_NO_RESOURCE) {
                msg_free(m);
                break;
            }
            if (c != nullptr && !may_engage_request(c)) {
                // max_active connections are busy: it waits, and the QP's later requests.
                count(SRCNIC_CNT_ACTIVE_WAITS);
                msg_free(m);
                break;
            }
            const uint32_t position = sq.position();
            sq.pop();
            qp->took();
            qp->took_request();
            ++taken;
            const srcnic_wqe_t &wqe = m->wqe;
            if (wqe.opcode == SRCNIC_OP_WRITE) {
                qp->took_write();   // (its completion, of whatever kind, ends it)
            }
            // A host in another process may have written anything: the copy is checked (an
            // opcode it completes with must be one of the send ring's).
            if (!trusted && srcnic::validate_wqe(wqe, max_msg_) != SRCNIC_OK) {
                const uint8_t op = wqe.opcode >= SRCNIC_OP_SEND && wqe.opcode <= SRCNIC_OP_READ
                                       ? wqe.opcode
                                       : static_cast<uint8_t>(SRCNIC_OP_SEND);
                qp->complete(make_cqe(wqe.wr_id, SRCNIC_ERR_INVALID_PARAM, op, 0));
                msg_free(m);
                continue;
            }
            if (cancelled) {
                cancelling_.hits += qp == cancelling_.qp && cancelling_.which.covers(wqe) &&
                                    static_cast<int32_t>(position - cancelling_.which.until) < 0;
                qp->complete(make_cqe(wqe.wr_id, SRCNIC_ERR_CANCELED, wqe.opcode, 0));
                msg_free(m);
                continue;
            }
            if (c == nullptr) {
                qp->complete(make_cqe(wqe.wr_id,
                                      static_cast<int16_t>(status == SRCNIC_OK
                                                               ? SRCNIC_ERR_CONNECTION_RESET
                                                               : status),
                                      wqe.opcode, 0));
                msg_free(m);
                continue;
            }
            const uint64_t length = wqe_length(wqe);
            if (__builtin_expect(wqe.opcode == SRCNIC_OP_READ, 0) && to_self(c) && direct_read(qp, wqe, length)) {
                msg_free(m);
                continue;
            }
            // To a QP of this NIC, nothing of its own QP before it: carried out here, at most
            // about kLocalWriteChunk bytes of the QP's requests a pass (the agent's other
            // processes wait meanwhile).
            const bool local = (wqe.opcode == SRCNIC_OP_WRITE ||
                                (wqe.opcode == SRCNIC_OP_SEND && length <= kLocalWriteChunk)) &&
                               qp->requests_outstanding() == 1 && to_self(c) && self_clear(c, qp);
            if (local && wqe.opcode == SRCNIC_OP_SEND && local_send(qp, c, wqe, length)) {
                msg_free(m);
                if ((local_bytes += std::max(length, kLocalOpBytes)) >= kLocalWriteChunk) {
                    break;
                }
                continue;
            }
            if (local && wqe.opcode == SRCNIC_OP_WRITE) {
                // In pieces: the QP's later work waits for the last, as behind chunks.
                qp->cursor().start(wqe, length, true);
                msg_free(m);
                local_write(qp);
                if (qp->cursor().active ||
                    (local_bytes += std::max(length, kLocalOpBytes)) >= kLocalWriteChunk) {
                    break;
                }
                continue;
            }
            if ((wqe.opcode == SRCNIC_OP_WRITE || wqe.opcode == SRCNIC_OP_READ) &&
                length > kChunkBytes) {
                // In chunks: the QP's later work waits until the last one is handed out.
                qp->cursor().start(wqe, length, false);
                msg_free(m);
                take_chunk(qp);
                break;
            }
            m->kind = TxMsg::Kind::kRequest;
            m->qp = qp;
            m->local_qpn = qp->qpn();
            m->peer_qpn = wqe.dest.qpn;
            m->job_key = qp->owner()->job_key;
            m->offset = 0;
            m->more = false;
            m->lazy_ack = (wqe.flags & SRCNIC_WQE_FLAG_LAZY_ACK) != 0;
            m->length = static_cast<uint32_t>(length);
            switch (wqe.opcode) {
            case SRCNIC_OP_SEND: m->opcode = static_cast<uint8_t>(Opcode::kSEND); break;
            case SRCNIC_OP_WRITE: m->opcode = static_cast<uint8_t>(Opcode::kWRITE); break;
            default: m->opcode = static_cast<uint8_t>(Opcode::kREAD_REQ); break;
            }
            // (A division only for a message of several packets.)
            if (wqe.opcode == SRCNIC_OP_READ) {
                m->npkts = 1;   // (its request carries no payload)
                m->seg = 0;
            } else {
                m->cut(c->seg_payload);
            }
            msg_append(c, m);
            if (__builtin_expect(c->act->chunk_qpn != 0, 0) && c->act->chunk_qpn != qp->qpn()) {
                c->act->mixed_chunks = kMixedChunks;   // shared with another QP's stream
                if (m->npkts == 1 && wqe.opcode != SRCNIC_OP_READ) {
                    // ... by its small messages (a READ request is one packet too, but its
                    // answer is a transfer as large as the stream's)
                    c->act->short_chunks = kMixedChunks;
                }
            }
        }
        if (sq.corrupt()) {
            qp->fault();
        }
    }
    return taken;
}

bool Nic::self_clear(const Connection *c, const QpContext *qp) const
{
    if (c->act == nullptr) {
        return true;
    }
    uint32_t seen = 0;
    for (const TxMsg *m = c->act->head; m != nullptr; m = m->next) {
        if ((m->kind == TxMsg::Kind::kRequest && m->local_qpn == qp->qpn()) || ++seen > kSelfClearScan) {
            return false;   // (a longer queue: the request goes as packets, behind it)
        }
    }
    return true;
}

bool Nic::direct_read(QpContext *qp, const srcnic_wqe_t &wqe, uint64_t length)
{
    const Owner *req = qp->owner();
    if (req->direct_reads == nullptr || req->direct_reads->load(std::memory_order_relaxed) == 0 ||
        qp->writes_outstanding() != 0) {
        return false;   // (RC order: a READ sees what the QP's earlier WRITEs placed)
    }
    QpContext *target = qp_for(wqe.dest.qpn, req->job_key);
    if (target == nullptr || target->owner()->direct_reads == nullptr) {
        return false;
    }
    Owner *o = target->owner();
    if (!o->space.alive() || !o->mrs.check(wqe.rkey, wqe.remote_addr, length, SRCNIC_ACCESS_REMOTE_READ)) {
        return false;
    }
    count(SRCNIC_CNT_DIRECT_READS);
    ++qp->owner()->direct_handed;
    qp->complete(make_cqe(wqe.wr_id, kCqeDirectRead, SRCNIC_OP_READ, static_cast<uint32_t>(length),
                          static_cast<uint32_t>(o->space.pid())));
    return true;
}

srcnic_status_t Nic::local_copy(const srcnic_wqe_t &wqe, AddrSpace &from, uint64_t off,
                                uint32_t len, AddrSpace &to, uint64_t addr)
{
    if (len == 0) {
        return SRCNIC_OK;
    }
    if (wqe.flags & SRCNIC_WQE_FLAG_INLINE) {
        return to.write(addr, wqe.u.inline_data + off, len) ? SRCNIC_OK : SRCNIC_ERR_REMOTE_ACCESS;
    }
    if (uint8_t *dst = to.direct(addr, len)) {
        // Into memory the NIC reaches (the target's shared arena): one copy.
        return read_request(wqe, from, off, len, dst) ? SRCNIC_OK : SRCNIC_ERR_INVALID_ADDR;
    }
    // Out of one piece of the gather list the NIC reaches, or through the copy buffer.
    const uint8_t *src = nullptr;
    uint64_t at = off;   // into the gather entry that holds byte off
    for (unsigned i = 0; i < wqe.num_sge; ++i) {
        if (at < wqe.u.sge[i].length) {
            if (wqe.u.sge[i].length - at >= len) {
                src = from.direct(wqe.u.sge[i].addr + at, len);
            }
            break;
        }
        at -= wqe.u.sge[i].length;
    }
    if (src == nullptr) {
        if (copy_bounce_.size() < kReadCopyMax) {
            copy_bounce_.resize(kReadCopyMax);
        }
        if (!read_request(wqe, from, off, len, copy_bounce_.data())) {
            return SRCNIC_ERR_INVALID_ADDR;   // the requester's own buffer
        }
        src = copy_bounce_.data();
    }
    return to.write(addr, src, len) ? SRCNIC_OK : SRCNIC_ERR_REMOTE_ACCESS;
}

bool Nic::local_send(QpContext *qp, Connection *c, const srcnic_wqe_t &wqe, uint64_t length)
{
    const uint32_t len = static_cast<uint32_t>(length);
    QpContext *target = qp_for(wqe.dest.qpn, qp->owner()->job_key);
    srcnic_status_t status = SRCNIC_OK;
    if (target == nullptr) {
        count(SRCNIC_CNT_NO_SUCH_QP);
        status = SRCNIC_ERR_UNREACHABLE;
    } else {
        srcnic_recv_wqe_t rwqe;
        if (!target->can_take() || !target->rq().peek(&rwqe)) {
            return false;   // (receiver not ready: the packets' RNR waits and retries)
        }
        if (len > rwqe.length) {
            count(SRCNIC_CNT_RECV_TRUNCATED);
            status = SRCNIC_ERR_MESSAGE_TRUNCATED;   // the buffer stays posted
        } else {
            status = local_copy(wqe, qp->owner()->space, 0, len, target->owner()->space, rwqe.addr);
            if (status != SRCNIC_ERR_INVALID_ADDR) {
                // Delivered, or its buffer not the target's memory: the receive fails there,
                // the SEND with IO_ERROR (as the responder answers). A source the requester
                // does not have fails the SEND alone, the buffer still posted.
                target->rq().pop();
                target->took();
                const bool ok = status == SRCNIC_OK;
                target->complete(make_cqe(rwqe.wr_id, ok ? SRCNIC_OK : SRCNIC_ERR_INVALID_ADDR,
                                          SRCNIC_OP_RECV, ok ? len : 0, ok ? wqe.imm : 0, qp->qpn(),
                                          c->id));
                status = ok ? SRCNIC_OK : SRCNIC_ERR_IO_ERROR;
            }
        }
    }
    count(SRCNIC_CNT_LOCAL_SENDS);
    qp->complete(make_cqe(wqe.wr_id, static_cast<int16_t>(status), SRCNIC_OP_SEND, len));
    return true;
}

void Nic::local_write(QpContext *qp)
{
    ChunkCursor &k = qp->cursor();
    const srcnic_wqe_t &wqe = k.wqe;
    const uint64_t n = std::min<uint64_t>(kLocalWriteChunk, k.length - k.next);
    const uint64_t addr = wqe.remote_addr + k.next;
    srcnic_status_t status = SRCNIC_OK;
    // An access names the QP of the process whose memory it targets, and the whole message
    // must fit the region before any of it is placed (§6); each piece is checked again.
    QpContext *target = qp_for(wqe.dest.qpn, qp->owner()->job_key);
    Owner *o = target != nullptr ? target->owner() : nullptr;
    if (o == nullptr) {
        count(SRCNIC_CNT_NO_SUCH_QP);
        status = SRCNIC_ERR_UNREACHABLE;
    } else if ((k.next == 0 &&
                !o->mrs.check(wqe.rkey, wqe.remote_addr, k.length, SRCNIC_ACCESS_REMOTE_WRITE)) ||
               !o->mrs.check(wqe.rkey, addr, n, SRCNIC_ACCESS_REMOTE_WRITE) || !o->space.alive()) {
        count(SRCNIC_CNT_ACCESS_ERRORS);
        status = SRCNIC_ERR_REMOTE_ACCESS;
    } else {
        status = local_copy(wqe, qp->owner()->space, k.next, static_cast<uint32_t>(n), o->space, addr);
    }
    k.next += n;
    if (status != SRCNIC_OK || k.next >= k.length) {
        k.active = false;
        k.local = false;
        count(SRCNIC_CNT_LOCAL_WRITES);
        qp->complete(make_cqe(wqe.wr_id, static_cast<int16_t>(status), SRCNIC_OP_WRITE,
                              static_cast<uint32_t>(k.length)));
    }
}

srcnic_status_t Nic::copy_read(QpContext *ctx, const srcnic_wqe_t &wqe)
{
    if (srcnic::validate_wqe(wqe, max_msg_) != SRCNIC_OK || wqe.opcode != SRCNIC_OP_READ ||
        (wqe.flags & SRCNIC_WQE_FLAG_INLINE)) {
        return SRCNIC_ERR_INVALID_PARAM;
    }
    // At most kReadCopyMax a request: the agent's other processes wait while it copies (the
    // process asks for a longer READ in pieces).
    const uint64_t length = wqe_length(wqe);
    if (length > kReadCopyMax) {
        return SRCNIC_ERR_INVALID_PARAM;
    }
    QpContext *target = qp_for(wqe.dest.qpn, ctx->owner()->job_key);
    if (target == nullptr) {
        count(SRCNIC_CNT_NO_SUCH_QP);
        return SRCNIC_ERR_UNREACHABLE;
    }
    Owner *o = target->owner();
    if (!o->mrs.check(wqe.rkey, wqe.remote_addr, length, SRCNIC_ACCESS_REMOTE_READ)) {
        count(SRCNIC_CNT_ACCESS_ERRORS);
        return SRCNIC_ERR_REMOTE_ACCESS;
    }
    count(SRCNIC_CNT_DIRECT_READ_COPIES);
    // Through a bounce buffer: one cross-memory call out of the target, one per scatter entry
    // into the requester.
    if (copy_bounce_.size() < kReadCopyMax) {
        copy_bounce_.resize(kReadCopyMax);
    }
    uint8_t *buf = copy_bounce_.data();
    if (!o->space.read(buf, wqe.remote_addr, length)) {
        return SRCNIC_ERR_REMOTE_ACCESS;   // the target's memory is gone
    }
    uint64_t put = 0;
    for (unsigned i = 0; i < wqe.num_sge; ++i) {
        const srcnic_sge_t &s = wqe.u.sge[i];
        if (s.length != 0 && !ctx->owner()->space.write(s.addr, buf + put, s.length)) {
            return SRCNIC_ERR_INVALID_ADDR;   // the requester's own buffer is not mapped
        }
        put += s.length;
    }
    return SRCNIC_OK;
}

bool Nic::cancelled_in_ring(QpContext *qp, const srcnic_wqe_t &wqe, uint32_t position)
{
    auto &cancels = qp->cancels();
    bool hit = false;
    for (size_t i = 0; i < cancels.size();) {
        const QpContext::Cancel &k = cancels[i];
        if (static_cast<int32_t>(position - k.until) >= 0) {
            cancels[i] = cancels.back();   // every WQE it covered has been taken
            cancels.pop_back();
            continue;
        }
        hit |= k.covers(wqe);
        ++i;
    }
    return hit;
}

void Nic::take_chunk(QpContext *qp)
{
    ChunkCursor &k = qp->cursor();
    srcnic_status_t status = SRCNIC_OK;
    Connection *c = route(k.wqe.dest, &status, false);
    if (c == nullptr && status == SRCNIC_ERR_NO_RESOURCE) {
        return;   // waits for a DCI
    }
    if (c != nullptr && !may_engage_request(c)) {
        count(SRCNIC_CNT_ACTIVE_WAITS);
        return;   // waits for an active half
    }
    if (c == nullptr) {
        // The connection failed (its earlier chunks completed nothing): the WQE fails with it.
        if (k.status != SRCNIC_OK) {
            status = static_cast<srcnic_status_t>(k.status);
        } else if (status == SRCNIC_OK) {
            status = SRCNIC_ERR_CONNECTION_RESET;
        }
        k.active = false;
        qp->complete(make_cqe(k.wqe.wr_id, static_cast<int16_t>(status), k.wqe.opcode, 0));
        return;
    }
    // Whole packets: a chunk ending in a short one would cost the stream a runt per chunk (and
    // runts count in the short window, not the full one). Smaller while other QPs' requests
    // share the connection, and smaller still while those are short.
    ConnActive *a = engage(c);
    const bool mixed = a->mixed_chunks != 0;
    const bool short_mixed = a->short_chunks != 0;
    const uint64_t chunk_bytes = short_mixed ? kMixedShortChunkBytes
                                 : mixed     ? kMixedChunkBytes
                                             : kChunkBytes;
    const uint32_t chunk_pkts =
        std::max<uint32_t>(1, static_cast<uint32_t>(chunk_bytes / c->seg_payload));
    if (c->next_psn - a->send_psn > chunk_pkts / 2 || msgs_free_ <= kAnswerReserve) {
        return;   // the previous chunk (or others' work) is still mostly to send
    }
    a->chunk_qpn = qp->qpn();
    a->mixed_chunks -= mixed ? 1 : 0;
    a->short_chunks -= short_mixed ? 1 : 0;
    TxMsg *m = msg_alloc();
    const uint64_t chunk = std::min<uint64_t>(static_cast<uint64_t>(chunk_pkts) * c->seg_payload,
                                              k.length - k.next);
    m->wqe = k.wqe;
    m->kind = TxMsg::Kind::kRequest;
    m->qp = qp;
    m->local_qpn = qp->qpn();
    m->peer_qpn = k.wqe.dest.qpn;
    m->job_key = qp->owner()->job_key;
    m->offset = k.next;
    m->lazy_ack = (k.wqe.flags & SRCNIC_WQE_FLAG_LAZY_ACK) != 0;
    m->length = static_cast<uint32_t>(chunk);
    m->more = k.next + chunk < k.length;
    m->status = k.status;   // an earlier chunk's failure travels to the WQE's completion
    k.status = SRCNIC_OK;
    const bool read = k.wqe.opcode == SRCNIC_OP_READ;
    m->opcode = static_cast<uint8_t>(read ? Opcode::kREAD_REQ : Opcode::kWRITE);
    if (read) {
        m->npkts = 1;
        m->seg = 0;
    } else {
        m->cut(c->seg_payload);
    }
    msg_append(c, m);
    k.next += chunk;
    if (!m->more) {
        k.active = false;
    }
}

} // namespace srcnic
