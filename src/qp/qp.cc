// QP host-side operations: validation of posted work and completion polling.
#include "qp/qp.h"

#include "nic/nic.h"

namespace srcnic {

srcnic_status_t Qp::post_send(const srcnic_wqe_t &wqe)
{
    srcnic_status_t status = nic_->validate_wqe(wqe);
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

void Qp::complete(const srcnic_cqe_t &cqe)
{
    cq_.push(cqe);
    nic_->notify_completion();
}

unsigned Qp::poll_cq(srcnic_cqe_t *cqes, unsigned max)
{
    unsigned n = 0;
    while (n < max && !cq_.empty()) {
        cqes[n] = cq_.front();
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
