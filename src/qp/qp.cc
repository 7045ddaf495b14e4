// Both ends of a QP: the host's posting and polling, WQE validation, and the NIC's completions.
#include "qp/qp.h"

#include "nic/nic.h"

#include <new>

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
    if ((wqe.flags & ~SRCNIC_WQE_FLAG_INLINE) != 0 || length > max_msg) {
        return SRCNIC_ERR_INVALID_PARAM;
    }
    return SRCNIC_OK;
}

void QpContext::complete(const srcnic_cqe_t &cqe)
{
    if (owed_ != 0) {
        --owed_;
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

srcnic_status_t Qp::post_send(const srcnic_wqe_t &wqe)
{
    srcnic_status_t status = validate_wqe(wqe, max_msg_);
    if (status != SRCNIC_OK) {
        return status;
    }
    if (sends_outstanding_ >= sq_.size() || !sq_.push(wqe)) {
        return SRCNIC_ERR_NO_RESOURCE;
    }
    ++sends_outstanding_;
    return SRCNIC_OK;
}

srcnic_status_t Qp::post_recv(const srcnic_recv_wqe_t &wqe)
{
    if (recvs_outstanding_ >= rq_.size() || !rq_.push(wqe)) {
        return SRCNIC_ERR_NO_RESOURCE;
    }
    ++recvs_outstanding_;
    return SRCNIC_OK;
}

unsigned Qp::poll_cq(srcnic_cqe_t *cqes, unsigned max)
{
    unsigned n = 0;
    while (n < max && cq_.peek(&cqes[n])) {
        cq_.pop();
        if (cqes[n].opcode == SRCNIC_OP_RECV) {
            --recvs_outstanding_;
        } else {
            --sends_outstanding_;
        }
        ++n;
    }
    return n;
}

} // namespace srcnic
