// A QP: a host-to-NIC channel bound to no peer. The host posts WQEs to the send ring and
// buffers to the receive ring and polls the completion ring; the NIC consumes and produces.
#ifndef SRCNIC_QP_QP_H
#define SRCNIC_QP_QP_H

#include "qp/ring.h"

#include <srcnic/srcnic.h>

#include <cstdint>

struct srcnic_qp {
    virtual ~srcnic_qp() = default;
};

namespace srcnic {

class Nic;

// A completion built whole, every field given: compilers zero a struct first with `rep stos`
// under generic tuning, tens of cycles to start, and this runs for every completion.
inline srcnic_cqe_t make_cqe(uint64_t wr_id, int16_t status, uint8_t opcode, uint32_t byte_len,
                             uint32_t imm = 0, uint32_t src_qpn = 0, uint32_t src_peer = 0)
{
    return srcnic_cqe_t{wr_id, status, opcode, 0, byte_len, imm, src_qpn, src_peer, 0};
}

// Cache-line aligned like Connection and Nic (see connection.h).
class alignas(64) Qp : public srcnic_qp {
public:
    Qp(Nic *nic, uint32_t qpn, uint32_t sq_size, uint32_t rq_size)
        : nic_(nic), qpn_(qpn), sq_(sq_size), rq_(rq_size), cq_(round_up_pow2(sq_size + rq_size))
    {
    }

    Nic *nic() const { return nic_; }
    uint32_t qpn() const { return qpn_; }

    // Host side.
    srcnic_status_t post_send(const srcnic_wqe_t &wqe);
    srcnic_status_t post_recv(const srcnic_recv_wqe_t &wqe);
    unsigned poll_cq(srcnic_cqe_t *cqes, unsigned max);
    unsigned outstanding() const { return sends_outstanding_ + recvs_outstanding_; }

    // NIC side.
    Ring<srcnic_wqe_t> &sq() { return sq_; }
    Ring<srcnic_recv_wqe_t> &rq() { return rq_; }
    const Ring<srcnic_recv_wqe_t> &rq() const { return rq_; }
    bool cq_empty() const { return cq_.empty(); }
    // Never fails: every CQE was reserved when its work request was posted.
    void complete(const srcnic_cqe_t &cqe);

private:
    static uint32_t round_up_pow2(uint32_t v)
    {
        uint32_t p = 1;
        while (p < v) {
            p <<= 1;
        }
        return p;
    }

    Nic *const nic_;
    const uint32_t qpn_;
    Ring<srcnic_wqe_t> sq_;          // posted, not yet taken by the requester
    Ring<srcnic_recv_wqe_t> rq_;     // posted receive buffers
    Ring<srcnic_cqe_t> cq_;          // completions, sq + rq entries: cannot overflow
    uint32_t sends_outstanding_ = 0; // send WQEs posted and not yet polled (<= sq size)
    uint32_t recvs_outstanding_ = 0; // receive WQEs posted and not yet polled (<= rq size)
};

} // namespace srcnic

#endif
