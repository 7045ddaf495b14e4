// Both ends of a QP: the host's posting and polling, WQE validation, and the NIC's completions.
#include "qp/qp.h"

#include "core/log.h"
#include "nic/nic.h"

#include <cerrno>
#include <new>
#include <sys/uio.h>

namespace srcnic {

srcnic_status_t validate_wqe(const srcnic_wqe_t &wqe, size_t max_msg)
{
    uint64_t length = 0;
    if (wqe.opcode != SRCNIC_OP_SEND && wqe.opcode != SRCNIC_OP_WRITE &&
        wqe.opcode != SRCNIC_OP_READ) {
        return SRCNIC_ERR_INVALID_PARAM;
    }
    if (wqe.flags & SRCNIC_WQE_FLAG_INLINE) {
        if (wqe.opcode == SRCNIC_OP_READ || wqe.inline_len > SRCNIC_WQE_INLINE_MAX) {
            return SRCNIC_ERR_INVALID_PARAM;
        }
        length = wqe.inline_len;
    } else {
        if (wqe.num_sge > SRCNIC_WQE_MAX_SGE) {
            return SRCNIC_ERR_INVALID_PARAM;
        }
        for (unsigned i = 0; i < wqe.num_sge; ++i) {
            length += wqe.u.sge[i].length;
        }
    }
    if ((wqe.flags & ~(SRCNIC_WQE_FLAG_INLINE | SRCNIC_WQE_FLAG_LAZY_ACK | SRCNIC_WQE_FLAG_CANCELED)) != 0 ||
        length > max_msg) {
        return SRCNIC_ERR_INVALID_PARAM;
    }
    return SRCNIC_OK;
}

srcnic_status_t qp_layout(uint32_t sq_size, uint32_t rq_size, bool log, QpRingLayout *layout_p)
{
    auto pow2 = [](uint32_t v) { return v != 0 && (v & (v - 1)) == 0 && v <= (1u << 16); };
    if (!pow2(sq_size) || !pow2(rq_size)) {
        if (log) {
            SRCNIC_LOG_ERROR("QP ring sizes must be powers of 2 up to 65536 (sq_size=%u rq_size=%u)",
                             sq_size, rq_size);
        }
        return SRCNIC_ERR_INVALID_PARAM;
    }
    *layout_p = QpRingLayout::make<srcnic_wqe_t, srcnic_recv_wqe_t, srcnic_cqe_t>(sq_size, rq_size);
    return SRCNIC_OK;
}

void QpContext::complete(const srcnic_cqe_t &cqe)
{
    nic_->flush_writes();   // what a completion reports has landed before the host sees it
    if (owed_ != 0) {
        --owed_;
    }
    if (cqe.opcode == SRCNIC_OP_WRITE && writes_ != 0) {
        --writes_;
    }
    if (cqe.opcode != SRCNIC_OP_RECV && requests_ != 0) {
        --requests_;
    }
    if (!cq_.push(cqe)) {
        faulted_ = true;
        return;
    }
    nic_->notify_completion(owner_);
}

namespace {

// The rings' counters, constructed in the block before either end reads them.
void *init_rings(const QpRingLayout &layout, void *block)
{
    new (layout.sq_idx(block)) RingIndices();
    new (layout.rq_idx(block)) RingIndices();
    new (layout.cq_idx(block)) RingIndices();
    return block;
}

} // namespace

Qp::Qp(srcnic_nic *nic, uint32_t qpn, const QpRingLayout &layout, void *block, size_t max_msg)
    : nic_(nic), qpn_(qpn), layout_(layout), block_(init_rings(layout, block)), max_msg_(max_msg),
      sq_(layout.sq_idx(block), layout.at<srcnic_wqe_t>(block, layout.sq_off), layout.sq_size),
      rq_(layout.rq_idx(block), layout.at<srcnic_recv_wqe_t>(block, layout.rq_off), layout.rq_size),
      cq_(layout.cq_idx(block), layout.at<srcnic_cqe_t>(block, layout.cq_off), layout.cq_size)
{
}

void Qp::keep_records()
{
    const uint32_t n = layout_.sq_size + layout_.rq_size;
    records_.reset(new Record[n]());
    reads_.reset(new srcnic_wqe_t[n]);
    free_records_.reserve(n);
    for (uint32_t i = n; i-- > 0;) {
        free_records_.push_back(i);
    }
}

uint32_t Qp::record(uint64_t wr_id, uint8_t opcode)
{
    if (free_records_.empty()) {
        return UINT32_MAX;
    }
    const uint32_t i = free_records_.back();
    free_records_.pop_back();
    records_[i] = Record{wr_id, opcode, true};
    return i;
}

srcnic_status_t Qp::complete_locally(uint64_t wr_id, uint8_t opcode, bool recv)
{
    local_cq_.push_back(make_cqe(wr_id, fail_status_, opcode, 0));
    ++(recv ? recvs_outstanding_ : sends_outstanding_);
    return SRCNIC_OK;
}

void Qp::fail_all(srcnic_status_t status)
{
    if (fail_status_ != 0 || !records_) {
        return;
    }
    fail_status_ = static_cast<int16_t>(status);
    // What the NIC end completed before it went comes first, in its order.
    srcnic_cqe_t cqe;
    while (cq_.peek(&cqe)) {
        cq_.pop();
        if (cqe.wr_id < layout_.sq_size + layout_.rq_size && records_[cqe.wr_id].live) {
            Record &r = records_[cqe.wr_id];
            r.live = false;
            free_records_.push_back(static_cast<uint32_t>(cqe.wr_id));
            cqe.wr_id = r.wr_id;
            if (cqe.status == kCqeDirectRead) {
                cqe.status = fail_status_;   // (not copied: it fails with the rest)
                cqe.imm = 0;
            }
            local_cq_.push_back(cqe);
        }
    }
    const uint32_t n = layout_.sq_size + layout_.rq_size;
    for (uint32_t i = 0; i < n; ++i) {
        Record &r = records_[i];
        if (r.live) {
            r.live = false;
            free_records_.push_back(i);
            local_cq_.push_back(make_cqe(r.wr_id, fail_status_, r.opcode, 0));
        }
    }
}

srcnic_status_t Qp::post_send(const srcnic_wqe_t &wqe)
{
    srcnic_status_t status = validate_wqe(wqe, max_msg_);
    if (status != SRCNIC_OK) {
        return status;
    }
    if (sends_outstanding_ >= sq_.size() || sq_.full()) {
        return SRCNIC_ERR_NO_RESOURCE;
    }
    if (records_) {
        if (fail_status_ != 0) {
            return complete_locally(wqe.wr_id, wqe.opcode, false);
        }
        srcnic_wqe_t w = wqe;
        w.wr_id = record(wqe.wr_id, wqe.opcode);
        if (wqe.opcode == SRCNIC_OP_READ) {
            reads_[w.wr_id] = wqe;
        }
        sq_.push(w);
    } else {
        sq_.push(wqe);
    }
    ++sends_outstanding_;
    return SRCNIC_OK;
}

srcnic_status_t Qp::post_recv(const srcnic_recv_wqe_t &wqe)
{
    if (recvs_outstanding_ >= rq_.size() || rq_.full()) {
        return SRCNIC_ERR_NO_RESOURCE;
    }
    if (records_) {
        if (fail_status_ != 0) {
            return complete_locally(wqe.wr_id, SRCNIC_OP_RECV, true);
        }
        srcnic_recv_wqe_t w = wqe;
        w.wr_id = record(wqe.wr_id, SRCNIC_OP_RECV);
        rq_.push(w);
    } else {
        rq_.push(wqe);
    }
    ++recvs_outstanding_;
    return SRCNIC_OK;
}

int16_t Qp::direct_read(uint32_t record, pid_t pid)
{
    const srcnic_wqe_t &w = reads_[record];
    struct iovec local[SRCNIC_WQE_MAX_SGE];
    const unsigned nsge = w.num_sge <= SRCNIC_WQE_MAX_SGE ? w.num_sge : 0;   // (validated when posted)
    size_t length = 0;
    for (unsigned i = 0; i < nsge; ++i) {
        local[i].iov_base = reinterpret_cast<void *>(w.u.sge[i].addr);
        local[i].iov_len = w.u.sge[i].length;
        length += w.u.sge[i].length;
    }
    if (length == 0) {
        return SRCNIC_OK;
    }
    struct iovec remote = {reinterpret_cast<void *>(w.remote_addr), length};
    const ssize_t n = process_vm_readv(pid, local, nsge, &remote, 1, 0);
    if (n == static_cast<ssize_t>(length)) {
        return SRCNIC_OK;
    }
    const int err = n < 0 ? errno : EFAULT;
    if (err == ESRCH) {
        return SRCNIC_ERR_UNREACHABLE;   // the target is gone, as if its QP were
    }
    if (err == EPERM || err == EACCES) {
        // The kernel does not let this process read that one (Yama, dumpability, credentials):
        // the agent copies this READ, and every later one of this process.
        return static_cast<int16_t>(nic_->read_copy(qpn_, w, err));
    }
    return SRCNIC_ERR_REMOTE_ACCESS;   // a range not mapped there (freed since) or here
}

unsigned Qp::poll_cq(srcnic_cqe_t *cqes, unsigned max)
{
    unsigned n = 0;
    if (records_) {
        while (n < max && !local_cq_.empty()) {
            cqes[n++] = local_cq_.front();
            local_cq_.pop_front();
        }
    }
    while (n < max && cq_.peek(&cqes[n])) {
        cq_.pop();
        if (records_) {
            const uint64_t i = cqes[n].wr_id;
            if (i >= layout_.sq_size + layout_.rq_size || !records_[i].live) {
                continue;   // (the agent never writes one)
            }
            if (__builtin_expect(cqes[n].status == kCqeDirectRead, 0)) {
                const bool read = records_[i].opcode == SRCNIC_OP_READ;   // (else never written)
                if (read) {
                    cqes[n].status = direct_read(static_cast<uint32_t>(i), static_cast<pid_t>(cqes[n].imm));
                    cqes[n].imm = 0;
                }
                nic_->read_copied();   // the agent may take this QP's later requests
                if (!read || !records_[i].live) {
                    continue;   // (not live: the agent went away in read_copy, and fail_all
                }               // completed it with the rest)
            }
            records_[i].live = false;
            free_records_.push_back(static_cast<uint32_t>(i));
            cqes[n].wr_id = records_[i].wr_id;
        }
        ++n;
    }
    // Outstanding counts drop for what was returned.
    for (unsigned i = 0; i < n; ++i) {
        if (cqes[i].opcode == SRCNIC_OP_RECV) {
            --recvs_outstanding_;
        } else {
            --sends_outstanding_;
        }
    }
    return n;
}

} // namespace srcnic
