// The C API of include/srcnic/srcnic.h: thin wrappers over the Nic and Qp classes.
#include "nic/nic.h"

#include "core/clock.h"
#include "core/nic_config.h"
#include "core/log.h"

#include <cstring>

namespace srcnic {

} // namespace srcnic

using srcnic::Nic;
using srcnic::Qp;

extern "C" {

uint32_t srcnic_config_window(const srcnic_config_t *config, uint32_t datagram)
{
    constexpr uint32_t header = sizeof(srcnic::PacketHeader);
    return srcnic::window_for(*config, datagram > header ? datagram - header : 1);
}

srcnic_status_t srcnic_config_check(const srcnic_config_t *config)
{
    return srcnic::validate_config(*config);
}

srcnic_status_t srcnic_nic_create(const srcnic_config_t *config, srcnic_nic_t **nic_p)
{
    std::unique_ptr<Nic> nic;
    srcnic_status_t status = Nic::create_udp(*config, &nic);
    if (status == SRCNIC_OK) {
        *nic_p = nic.release();
    }
    return status;
}

void srcnic_nic_destroy(srcnic_nic_t *nic)
{
    delete nic;
}

void srcnic_nic_query_addr(const srcnic_nic_t *nic, srcnic_nic_addr_t *addr_p)
{
    *addr_p = nic->addr();
}

size_t srcnic_nic_max_msg(const srcnic_nic_t *nic)
{
    return nic->max_msg();
}

SRCNIC_HOT unsigned srcnic_nic_progress(srcnic_nic_t *nic)
{
    return nic->progress();
}

SRCNIC_HOT unsigned srcnic_nic_transmit(srcnic_nic_t *nic)
{
    return nic->transmit();
}

int srcnic_nic_event_fd(const srcnic_nic_t *nic)
{
    return nic->event_fd();
}

srcnic_status_t srcnic_nic_arm(srcnic_nic_t *nic)
{
    return nic->arm();
}

srcnic_status_t srcnic_nic_fence_memory(srcnic_nic_t *nic)
{
    return nic->fence_memory();
}

uint64_t srcnic_nic_counter(const srcnic_nic_t *nic, srcnic_counter_t counter)
{
    return counter < SRCNIC_CNT_LAST ? nic->counter(counter) : 0;
}

const char *srcnic_counter_name(srcnic_counter_t counter)
{
    static const char *const kNames[] = {
#define SRCNIC_COUNTER_NAME(_name, _desc) #_name,
        SRCNIC_FOREACH_COUNTER(SRCNIC_COUNTER_NAME)
#undef SRCNIC_COUNTER_NAME
    };
    return counter < SRCNIC_CNT_LAST ? kNames[counter] : "UNKNOWN";
}

size_t srcnic_conn_state_bytes(const srcnic_nic_t *nic)
{
    return nic->conn_state_bytes();
}

unsigned srcnic_nic_num_connections(const srcnic_nic_t *nic)
{
    return nic->num_connections();
}

srcnic_status_t srcnic_qp_create(srcnic_nic_t *nic, const srcnic_qp_config_t *config,
                                 srcnic_qp_t **qp_p)
{
    Qp *qp;
    srcnic_status_t status = nic->qp_create(*config, &qp);
    if (status == SRCNIC_OK) {
        *qp_p = qp;
    }
    return status;
}

void srcnic_qp_destroy(srcnic_qp_t *qp)
{
    Qp *q = static_cast<Qp *>(qp);
    q->nic()->qp_destroy(q);
}

uint32_t srcnic_qp_num(const srcnic_qp_t *qp)
{
    return static_cast<const Qp *>(qp)->qpn();
}

SRCNIC_HOT srcnic_status_t srcnic_post_send(srcnic_qp_t *qp, const srcnic_wqe_t *wqe)
{
    return static_cast<Qp *>(qp)->post_send(*wqe);
}

SRCNIC_HOT srcnic_status_t srcnic_post_recv(srcnic_qp_t *qp, const srcnic_recv_wqe_t *wqe)
{
    return static_cast<Qp *>(qp)->post_recv(*wqe);
}

SRCNIC_HOT unsigned srcnic_poll_cq(srcnic_qp_t *qp, srcnic_cqe_t *cqes, unsigned max)
{
    return static_cast<Qp *>(qp)->poll_cq(cqes, max);
}

unsigned srcnic_qp_outstanding(const srcnic_qp_t *qp)
{
    return static_cast<const Qp *>(qp)->outstanding();
}

srcnic_status_t srcnic_pd_create(srcnic_pd_t **pd_p)
{
    std::unique_ptr<srcnic_pd> pd(new srcnic_pd());
    const srcnic_status_t status = srcnic::MrTable::create(srcnic::kMrDefaultSlots, &pd->mrs);
    if (status != SRCNIC_OK) {
        return status;
    }
    *pd_p = pd.release();
    return SRCNIC_OK;
}

void srcnic_pd_destroy(srcnic_pd_t *pd)
{
    delete pd;
}

srcnic_status_t srcnic_pd_mr_reg(srcnic_pd_t *pd, void *addr, size_t length, unsigned access,
                                 srcnic_mr_t **mr_p)
{
    uint32_t slot;
    srcnic_status_t status = pd->mrs->reg(reinterpret_cast<uint64_t>(addr), length, access, &slot);
    if (status != SRCNIC_OK) {
        return status;
    }
    *mr_p = new srcnic_mr_t{pd, slot, pd->mrs->rkey_of(slot)};
    return SRCNIC_OK;
}

srcnic_status_t srcnic_mr_reg(srcnic_nic_t *nic, void *addr, size_t length, unsigned access,
                              srcnic_mr_t **mr_p)
{
    return srcnic_pd_mr_reg(nic->pd(), addr, length, access, mr_p);
}

uint64_t srcnic_mr_rkey(const srcnic_mr_t *mr)
{
    return mr->rkey;
}

void srcnic_mr_dereg(srcnic_mr_t *mr)
{
    mr->pd->mrs->dereg(mr->slot);
    delete mr;
}

unsigned srcnic_qp_cancel(srcnic_qp_t *qp, srcnic_dest_t dest, uint32_t tag)
{
    Qp *q = static_cast<Qp *>(qp);
    return q->nic()->qp_cancel(q, dest, tag);
}

srcnic_status_t srcnic_dest_create(srcnic_nic_t *nic, const srcnic_nic_addr_t *remote,
                                   uint32_t remote_qpn, srcnic_dest_t *dest_p)
{
    return nic->dest_create(*remote, remote_qpn, dest_p);
}

srcnic_status_t srcnic_dest_status(const srcnic_nic_t *nic, srcnic_dest_t dest)
{
    return nic->dest_status(dest);
}

} // extern "C"
