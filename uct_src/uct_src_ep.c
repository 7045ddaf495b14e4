/**
 * The "src" endpoint: (remote engine, remote QP) plus the engine's connection slot. Every send
 * becomes one WQE on the iface's QP. Completions mostly arrive in posting order per endpoint,
 * but not always (a get from another process of the same node agent completes as soon as this
 * process copied it), so a flush waits for the oldest send still outstanding to be one posted
 * after it. Peer failure reported by the engine (timeout, reset, the
 * remote QP gone) fails the endpoint and is reported to UCP once, from the main thread.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "uct_src.h"

#include <uct/base/uct_iov.inl>
#include <ucs/async/async.h>
#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>

#include <string.h>


struct uct_src_flush_req {
    uct_src_flush_req_t *next;
    uint32_t            target;    /* done when no send posted before this one is left */
    uct_completion_t    *comp;
};

static unsigned uct_src_ep_report_error(void *arg);

#define UCT_SRC_EP_IFACE(_ep) ucs_derived_of((_ep)->super.super.iface, uct_src_iface_t)

/* Common checks of every send, under the async lock: a failed ep reports its failure, queued
 * pending requests are not overtaken, and send resources are bounded. */
#define UCT_SRC_EP_CHECK_SEND_LOCKED(_iface, _ep, _status, _label) \
    do { \
        if (ucs_unlikely((_ep)->flags & UCT_SRC_EP_FLAG_FAILED)) { \
            _status = (ucs_status_t)(_ep)->fail_status; \
            goto _label; \
        } \
        if (ucs_unlikely(((_iface)->pending_ep != (_ep)) && \
                         !ucs_arbiter_group_is_empty(&(_ep)->arb_group))) { \
            _status = UCS_ERR_NO_RESOURCE; \
            goto _label; \
        } \
        if (ucs_unlikely(!uct_src_iface_has_tx_resources(_iface))) { \
            _status = UCS_ERR_NO_RESOURCE; \
            goto _label; \
        } \
    } while (0)


/* The common start of every send, under the async lock: the checks above, then a send
 * descriptor (NO_RESOURCE when all are in flight) carrying the user's completion. */
#define UCT_SRC_EP_GET_DESC_LOCKED(_iface, _mp, _ep, _comp, _desc, _status, _label) \
    do { \
        UCT_SRC_EP_CHECK_SEND_LOCKED(_iface, _ep, _status, _label); \
        _desc = uct_src_ep_desc_get(_mp, _ep, _comp); \
        if (ucs_unlikely(_desc == NULL)) { \
            _status = UCS_ERR_NO_RESOURCE; \
            goto _label; \
        } \
    } while (0)


static UCS_CLASS_INIT_FUNC(uct_src_ep_t, const uct_ep_params_t *params)
{
    uct_src_iface_t *iface = ucs_derived_of(params->iface, uct_src_iface_t);
    const uct_src_device_addr_t *dev_addr;
    const uct_src_iface_addr_t *iface_addr;
    srcnic_nic_addr_t remote;
    srcnic_status_t status;

    UCT_EP_PARAMS_CHECK_DEV_IFACE_ADDRS(params);
    UCS_CLASS_CALL_SUPER_INIT(uct_base_ep_t, &iface->super);

    dev_addr   = (const uct_src_device_addr_t*)params->dev_addr;
    iface_addr = (const uct_src_iface_addr_t*)params->iface_addr;
    memset(&remote, 0, sizeof(remote));
    remote.family      = AF_INET;
    remote.port        = iface_addr->port;
    remote.incarnation = iface_addr->incarnation;
    remote.secret      = iface_addr->secret;
    memcpy(remote.ip, dev_addr->ip, sizeof(dev_addr->ip));
    memcpy(self->remote_ip, dev_addr->ip, sizeof(self->remote_ip));
    self->remote_port        = iface_addr->port;
    self->remote_incarnation = iface_addr->incarnation;

    UCS_ASYNC_BLOCK(iface->super.worker->async);
    status = srcnic_dest_create(iface->nic, &remote, iface_addr->qpn, &self->dest);
    UCS_ASYNC_UNBLOCK(iface->super.worker->async);
    if (status != SRCNIC_OK) {
        ucs_error("src: cannot create an endpoint: %s (UCX_SRC_MAX_CONNECTIONS?)",
                  srcnic_status_string(status));
        return (ucs_status_t)status;
    }
    self->tx_posted    = 0;
    self->tx_completed = 0;
    self->flags        = 0;
    self->fail_status  = UCS_OK;
    self->err_cb_id    = UCS_CALLBACKQ_ID_NULL;
    self->flush_reqs   = NULL;
    ucs_list_head_init(&self->outstanding);
    self->tag          = ++iface->next_ep_tag ? iface->next_ep_tag : ++iface->next_ep_tag;
    ucs_arbiter_group_init(&self->arb_group);
    ucs_debug("src: ep %p to %s qpn %u", self, iface->if_name, iface_addr->qpn);
    return UCS_OK;
}

static UCS_CLASS_CLEANUP_FUNC(uct_src_ep_t)
{
    ucs_arbiter_group_cleanup(&self->arb_group);
}

UCS_CLASS_DEFINE(uct_src_ep_t, uct_base_ep_t);

static void uct_src_ep_free(uct_src_ep_t *ep)
{
    UCS_CLASS_DELETE(uct_src_ep_t, ep);
}
UCS_CLASS_DEFINE_NEW_FUNC(uct_src_ep_t, uct_ep_t, const uct_ep_params_t *);

/* Destroy: the ep stops existing for the user at once; sends still in flight are cancelled
 * and the memory is freed when the last of them has completed. */
void UCS_CLASS_DELETE_FUNC_NAME(uct_src_ep_t)(uct_ep_t *tl_ep)
{
    uct_src_ep_t *ep       = ucs_derived_of(tl_ep, uct_src_ep_t);
    uct_src_iface_t *iface = UCT_SRC_EP_IFACE(ep);
    uct_src_flush_req_t *req;
    uct_src_send_desc_t *desc;
    uct_completion_t *comp;

    UCS_ASYNC_BLOCK(iface->super.worker->async);
    ucs_assertv(ucs_arbiter_group_is_empty(&ep->arb_group),
                "src: ep %p destroyed with pending requests", ep);
    if (ep->err_cb_id != UCS_CALLBACKQ_ID_NULL) {
        uct_src_oneshot_remove(&iface->super.worker->super.progress_q, ep,
                               uct_src_ep_report_error, &ep->err_cb_id);
    }
    /* Every outstanding operation completes, CANCELED, before destroy returns. */
    if (ep->tx_completed != ep->tx_posted) {
        srcnic_qp_cancel(iface->qp, ep->dest, ep->tag);
    }
    ucs_list_for_each(desc, &ep->outstanding, list) {
        comp            = desc->comp;
        desc->comp      = NULL;
        desc->unpack_cb = NULL;
        if (comp != NULL) {
            uct_invoke_completion(comp, UCS_ERR_CANCELED);
        }
    }
    while ((req = ep->flush_reqs) != NULL) {
        ep->flush_reqs = req->next;
        uct_invoke_completion(req->comp, UCS_ERR_CANCELED);
        ucs_free(req);
    }
    ep->flags |= UCT_SRC_EP_FLAG_DESTROYED;
    if (ep->tx_completed == ep->tx_posted) {
        uct_src_ep_free(ep);
    } else {
        ucs_list_add_tail(&iface->linger_eps, &ep->linger_elem);
    }
    UCS_ASYNC_UNBLOCK(iface->super.worker->async);
}

int uct_src_ep_connected_to(uct_ep_h tl_ep, const uct_device_addr_t *dev_addr,
                            const uct_iface_addr_t *iface_addr)
{
    uct_src_ep_t *ep                        = ucs_derived_of(tl_ep, uct_src_ep_t);
    const uct_src_device_addr_t *remote_dev = (const uct_src_device_addr_t*)dev_addr;
    const uct_src_iface_addr_t *remote      = (const uct_src_iface_addr_t*)iface_addr;

    /* The engine at (address, port) in this incarnation, and its QP: what the ep was made for. */
    return (remote_dev->family == AF_INET) &&
           !memcmp(ep->remote_ip, remote_dev->ip, sizeof(ep->remote_ip)) &&
           (ep->remote_port == remote->port) && (ep->dest.qpn == remote->qpn) &&
           (ep->remote_incarnation == remote->incarnation);
}

void uct_src_ep_free_lingering(uct_src_ep_t *ep)
{
    ucs_list_del(&ep->linger_elem);
    uct_src_ep_free(ep);
}

static unsigned uct_src_ep_report_error(void *arg)
{
    uct_src_ep_t *ep       = arg;
    uct_src_iface_t *iface = UCT_SRC_EP_IFACE(ep);
    ucs_status_t status;

    ep->err_cb_id = UCS_CALLBACKQ_ID_NULL;
    ep->flags    |= UCT_SRC_EP_FLAG_FAILED;
    status = uct_iface_handle_ep_err(&iface->super.super, &ep->super.super,
                                     (ucs_status_t)ep->fail_status);
    if (status != UCS_OK) {
        ucs_fatal("src: peer failure on ep %p (%s) and no error handler", ep,
                  ucs_status_string((ucs_status_t)ep->fail_status));
    }
    return 1;
}

void uct_src_ep_set_failed(uct_src_ep_t *ep, ucs_status_t status)
{
    uct_src_iface_t *iface = UCT_SRC_EP_IFACE(ep);

    if (ep->flags & (UCT_SRC_EP_FLAG_ERR_REPORTED | UCT_SRC_EP_FLAG_DESTROYED)) {
        return;
    }
    ep->flags |= UCT_SRC_EP_FLAG_ERR_REPORTED;
    if (!(ep->flags & UCT_SRC_EP_FLAG_INVALIDATED)) {
        ep->flags |= UCT_SRC_EP_FLAG_FAILED;
    }
    ep->fail_status = status;
    ucs_debug("src: ep %p failed: %s", ep, ucs_status_string(status));
    uct_src_oneshot_add(&iface->super.worker->super.progress_q, ep, uct_src_ep_report_error,
                        &ep->err_cb_id);
}

static int uct_src_status_is_peer_failure(ucs_status_t status)
{
    return (status == UCS_ERR_ENDPOINT_TIMEOUT) || (status == UCS_ERR_CONNECTION_RESET);
}

/* Whether every send posted before the one numbered target (ep->tx_posted then) completed:
 * the outstanding list is in posting order, and its oldest entry decides. */
static UCS_F_ALWAYS_INLINE int uct_src_ep_flushed_to(uct_src_ep_t *ep, uint32_t target)
{
    uct_src_send_desc_t *oldest;

    if (ucs_list_is_empty(&ep->outstanding)) {
        return 1;
    }
    oldest = ucs_list_head(&ep->outstanding, uct_src_send_desc_t, list);
    return (int32_t)(oldest->sn - target) >= 0;
}

void uct_src_ep_send_completed(uct_src_iface_t *iface, uct_src_send_desc_t *desc,
                               ucs_status_t status)
{
    uct_src_ep_t *ep = desc->ep;
    uct_src_flush_req_t *req;

    if (ucs_unlikely(status == UCS_ERR_UNREACHABLE)) {
        /* The peer's engine answered, but the QP behind the endpoint is gone (a process on a
         * node agent that exited): to UCX, as to UCX's own transports, the peer reset its
         * endpoint. */
        status = UCS_ERR_CONNECTION_RESET;
    }

    --iface->tx_outstanding;
    if (ep == NULL) {
        ucs_mpool_put_inline(desc);
        return;
    }
    ++ep->tx_completed;
    ucs_list_del(&desc->list);
    if (ucs_unlikely(ep->flags & UCT_SRC_EP_FLAG_DESTROYED)) {
        ucs_mpool_put_inline(desc);
        if (ep->tx_completed == ep->tx_posted) {
            ucs_list_del(&ep->linger_elem);
            uct_src_ep_free(ep);
        }
        return;
    }
    if (ucs_unlikely(status != UCS_OK) &&
        (uct_src_status_is_peer_failure(status) ||
         ((desc->comp == NULL) && (status != UCS_ERR_CANCELED)))) {
        /* A lost peer fails the ep; so does an error no completion could carry (a refused
         * put_short/bcopy), as a remote access error moves an RC QP to the error state. */
        uct_src_ep_set_failed(ep, status);
    }
    if ((desc->unpack_cb != NULL) && (status == UCS_OK)) {
        desc->unpack_cb(desc->unpack_arg, desc + 1, desc->length);
    }
    if (desc->comp != NULL) {
        uct_invoke_completion(desc->comp, status);
    }
    ucs_mpool_put_inline(desc);
    while (((req = ep->flush_reqs) != NULL) && uct_src_ep_flushed_to(ep, req->target)) {
        ep->flush_reqs = req->next;
        uct_invoke_completion(req->comp, (ep->flags & UCT_SRC_EP_FLAG_FAILED) ?
                                         (ucs_status_t)ep->fail_status : UCS_OK);
        ucs_free(req);
    }
}

static UCS_F_ALWAYS_INLINE uct_src_send_desc_t *
uct_src_ep_desc_get(ucs_mpool_t *mp, uct_src_ep_t *ep, uct_completion_t *comp)
{
    uct_src_send_desc_t *desc = ucs_mpool_get_inline(mp);

    if (ucs_likely(desc != NULL)) {
        desc->ep        = ep;
        desc->comp      = comp;
        desc->unpack_cb = NULL;
    }
    return desc;
}

/* Posts the WQE; on success the send counts as in flight until its completion. */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_src_ep_post(uct_src_iface_t *iface, uct_src_ep_t *ep, uct_src_send_desc_t *desc,
                srcnic_wqe_t *wqe)
{
    srcnic_status_t status;
    ucs_time_t now;

    wqe->wr_id = (uintptr_t)desc;
    wqe->dest  = ep->dest;
    wqe->tag   = ep->tag;
    if (ucs_unlikely(ep->flags & UCT_SRC_EP_FLAG_INVALIDATED)) {
        /* Completes CANCELED when the NIC takes it, in order, and goes nowhere: not even to
         * a QP of the same agent, which a cancel asked after the post could come too late for. */
        wqe->flags |= SRCNIC_WQE_FLAG_CANCELED;
    }
    status     = srcnic_post_send(iface->qp, wqe);
    if (ucs_unlikely(status != SRCNIC_OK)) {
        ucs_mpool_put_inline(desc);
        return (ucs_status_t)status;
    }
    desc->sn = ep->tx_posted++;
    ++iface->tx_outstanding;
    ep->flags = (ep->flags & ~UCT_SRC_EP_FLAG_LAZY_TAIL) |
                ((wqe->flags & SRCNIC_WQE_FLAG_LAZY_ACK) ? UCT_SRC_EP_FLAG_LAZY_TAIL : 0);
    ucs_list_add_tail(&ep->outstanding, &desc->list);
    /* The doorbell: a send leaves now, unless the iface holds bursts (the application has
     * been progressing promptly after them, uct_src_iface_tx_burst_ended) and this one follows
     * closely the transmission of an earlier send of the same burst: then it leaves with the
     * rest of the burst on the next progress call. So a burst reaches the kernel in one call,
     * and an application that posts and turns to something else (a computation, a buffer
     * check) does not hold its last sends back: the iface stops holding once it has seen a
     * burst wait. The first send after a progress call always leaves at once, however soon:
     * it is typically a reply or the last word before a computation (osu_bw -c: the receiver's
     * window acknowledgement, then its check of the buffer), and nothing says more follow. */
    now = ucs_get_time();
    if ((now - iface->tx_last_post) < iface->tx_coalesce) {
        iface->tx_burst = 1;
    } else if (iface->tx_burst) {
        /* The last burst ends in this post, not in progress: the application did something
         * else after it (osu_latency -c checks the buffer before its next send), and what the
         * burst held waited for that. Late: it counts against holding. */
        uct_src_iface_tx_burst_ended(iface, now);
    }
    if (iface->tx_hold && iface->tx_post_rang &&
        ((now - iface->tx_doorbell) < iface->tx_coalesce)) {
        iface->tx_held = 1;
    } else {
        /* A burst's end is timed from the end of the system call too: what counts is how
         * soon the application progresses after its post. */
        now                 = uct_src_iface_ring_doorbell(iface);
        iface->tx_post_rang = 1;
    }
    iface->tx_last_post = now;
    return UCS_OK;
}

static UCS_F_ALWAYS_INLINE void uct_src_wqe_init(srcnic_wqe_t *wqe, srcnic_opcode_t opcode)
{
    wqe->opcode    = opcode;
    wqe->flags     = 0;
    wqe->num_sge   = 0;
    wqe->reserved0 = 0;
    wqe->imm       = 0;
    wqe->tag       = 0;
}

/* Fills the gather list from a UCT iov after `first` entries; returns the total length or -1
 * if it does not fit. */
static ssize_t uct_src_wqe_add_iov(srcnic_wqe_t *wqe, const uct_iov_t *iov, size_t iovcnt)
{
    size_t total = 0, i, len;

    for (i = 0; i < iovcnt; ++i) {
        len = uct_iov_get_length(&iov[i]);
        if (len == 0) {
            continue;
        }
        if (wqe->num_sge == SRCNIC_WQE_MAX_SGE) {
            return -1;
        }
        wqe->u.sge[wqe->num_sge].addr     = (uintptr_t)iov[i].buffer;
        wqe->u.sge[wqe->num_sge].length   = len;
        wqe->u.sge[wqe->num_sge].reserved = 0;
        ++wqe->num_sge;
        total += len;
    }
    return total;
}

ucs_status_t uct_src_ep_am_short(uct_ep_h tl_ep, uint8_t id, uint64_t header,
                                 const void *payload, unsigned length)
{
    uct_src_ep_t *ep       = ucs_derived_of(tl_ep, uct_src_ep_t);
    uct_src_iface_t *iface = UCT_SRC_EP_IFACE(ep);
    uct_src_send_desc_t *desc;
    srcnic_wqe_t wqe;
    ucs_status_t status;

    UCT_CHECK_AM_ID(id);
    UCT_CHECK_LENGTH(sizeof(header) + length, 0, iface->max_short, "am_short");
    UCS_ASYNC_BLOCK(iface->super.worker->async);
    UCT_SRC_EP_GET_DESC_LOCKED(iface, &iface->tx_small_mp, ep, NULL, desc, status, out);
    uct_src_wqe_init(&wqe, SRCNIC_OP_SEND);
    wqe.imm        = id;
    wqe.flags      = SRCNIC_WQE_FLAG_INLINE | SRCNIC_WQE_FLAG_LAZY_ACK; /* nobody waits on it */
    wqe.inline_len = sizeof(header) + length;
    memcpy(wqe.u.inline_data, &header, sizeof(header));
    if (length != 0) {
        memcpy(wqe.u.inline_data + sizeof(header), payload, length);
    }
    uct_iface_trace_am(&iface->super, UCT_AM_TRACE_TYPE_SEND, id, wqe.u.inline_data,
                       wqe.inline_len, "TX: AM_SHORT");
    status = uct_src_ep_post(iface, ep, desc, &wqe);
out:
    UCS_ASYNC_UNBLOCK(iface->super.worker->async);
    return status;
}

/* A bcopy send: packs into the descriptor's buffer and posts one WQE (SEND with the AM id as
 * immediate, or WRITE to remote_addr). Returns the packed length or an error status. */
static ssize_t uct_src_ep_bcopy(uct_src_ep_t *ep, srcnic_opcode_t opcode, uint32_t imm,
                                uct_pack_callback_t pack_cb, void *arg, uint64_t remote_addr,
                                uct_rkey_t rkey, const char *name)
{
    uct_src_iface_t *iface = UCT_SRC_EP_IFACE(ep);
    uct_src_send_desc_t *desc;
    srcnic_wqe_t wqe;
    ucs_status_t status;
    size_t length = 0;

    UCS_ASYNC_BLOCK(iface->super.worker->async);
    UCT_SRC_EP_GET_DESC_LOCKED(iface, &iface->tx_mp, ep, NULL, desc, status, out);
    length = pack_cb(desc + 1, arg);
    if (ucs_unlikely(length > iface->seg_size)) {
        ucs_mpool_put_inline(desc);
        ucs_error("src: %s packed %zu bytes, more than the %zu allowed", name, length,
                  iface->seg_size);
        status = UCS_ERR_INVALID_PARAM;
        goto out;
    }
    uct_src_wqe_init(&wqe, opcode);
    wqe.imm               = imm;
    wqe.num_sge           = 1;
    wqe.u.sge[0].addr     = (uintptr_t)(desc + 1);
    wqe.u.sge[0].length   = length;
    wqe.u.sge[0].reserved = 0;
    wqe.remote_addr       = remote_addr;
    wqe.rkey              = rkey;
    if (opcode == SRCNIC_OP_SEND) {
        /* Nobody waits on it: its descriptor goes back when the acknowledgement comes. */
        wqe.flags = SRCNIC_WQE_FLAG_LAZY_ACK;
        uct_iface_trace_am(&iface->super, UCT_AM_TRACE_TYPE_SEND, imm, desc + 1, length,
                           "TX: AM_BCOPY");
    }
    status = uct_src_ep_post(iface, ep, desc, &wqe);
out:
    UCS_ASYNC_UNBLOCK(iface->super.worker->async);
    return (status == UCS_OK) ? (ssize_t)length : (ssize_t)status;
}

ssize_t uct_src_ep_am_bcopy(uct_ep_h tl_ep, uint8_t id, uct_pack_callback_t pack_cb,
                            void *arg, unsigned flags)
{
    UCT_CHECK_AM_ID(id);
    return uct_src_ep_bcopy(ucs_derived_of(tl_ep, uct_src_ep_t), SRCNIC_OP_SEND, id, pack_cb,
                            arg, 0, 0, "am_bcopy");
}

ucs_status_t uct_src_ep_am_zcopy(uct_ep_h tl_ep, uint8_t id, const void *header,
                                 unsigned header_length, const uct_iov_t *iov, size_t iovcnt,
                                 unsigned flags, uct_completion_t *comp)
{
    uct_src_ep_t *ep       = ucs_derived_of(tl_ep, uct_src_ep_t);
    uct_src_iface_t *iface = UCT_SRC_EP_IFACE(ep);
    uct_src_send_desc_t *desc;
    srcnic_wqe_t wqe;
    ucs_status_t status;
    ssize_t length;

    UCT_CHECK_AM_ID(id);
    UCT_CHECK_IOV_SIZE(iovcnt, (size_t)UCT_SRC_MAX_IOV, "am_zcopy");
    UCT_CHECK_LENGTH(header_length, 0, SRCNIC_WQE_INLINE_MAX, "am_zcopy header");
    UCT_CHECK_LENGTH(header_length + uct_iov_total_length(iov, iovcnt), 0, iface->seg_size,
                     "am_zcopy");
    UCS_ASYNC_BLOCK(iface->super.worker->async);
    UCT_SRC_EP_GET_DESC_LOCKED(iface, &iface->tx_small_mp, ep, comp, desc, status, out);
    uct_src_wqe_init(&wqe, SRCNIC_OP_SEND);
    wqe.imm = id;
    if (header_length != 0) {
        memcpy(desc + 1, header, header_length);
        wqe.u.sge[0].addr     = (uintptr_t)(desc + 1);
        wqe.u.sge[0].length   = header_length;
        wqe.u.sge[0].reserved = 0;
        wqe.num_sge           = 1;
    }
    length = uct_src_wqe_add_iov(&wqe, iov, iovcnt);
    ucs_assert(length >= 0);
    uct_iface_trace_am(&iface->super, UCT_AM_TRACE_TYPE_SEND, id, header, header_length,
                       "TX: AM_ZCOPY");
    status = uct_src_ep_post(iface, ep, desc, &wqe);
    if (status == UCS_OK) {
        status = UCS_INPROGRESS;
    }
out:
    UCS_ASYNC_UNBLOCK(iface->super.worker->async);
    return status;
}

ucs_status_t uct_src_ep_put_short(uct_ep_h tl_ep, const void *buffer, unsigned length,
                                  uint64_t remote_addr, uct_rkey_t rkey)
{
    uct_src_ep_t *ep       = ucs_derived_of(tl_ep, uct_src_ep_t);
    uct_src_iface_t *iface = UCT_SRC_EP_IFACE(ep);
    uct_src_send_desc_t *desc;
    srcnic_wqe_t wqe;
    ucs_status_t status;

    UCT_CHECK_LENGTH(length, 0, iface->max_short, "put_short");
    UCS_ASYNC_BLOCK(iface->super.worker->async);
    UCT_SRC_EP_GET_DESC_LOCKED(iface, &iface->tx_small_mp, ep, NULL, desc, status, out);
    uct_src_wqe_init(&wqe, SRCNIC_OP_WRITE);
    wqe.flags       = SRCNIC_WQE_FLAG_INLINE;
    wqe.inline_len  = length;
    wqe.remote_addr = remote_addr;
    wqe.rkey        = rkey;
    if (length != 0) {
        memcpy(wqe.u.inline_data, buffer, length);
    }
    status = uct_src_ep_post(iface, ep, desc, &wqe);
out:
    UCS_ASYNC_UNBLOCK(iface->super.worker->async);
    return status;
}

ssize_t uct_src_ep_put_bcopy(uct_ep_h tl_ep, uct_pack_callback_t pack_cb, void *arg,
                             uint64_t remote_addr, uct_rkey_t rkey)
{
    return uct_src_ep_bcopy(ucs_derived_of(tl_ep, uct_src_ep_t), SRCNIC_OP_WRITE, 0, pack_cb,
                            arg, remote_addr, rkey, "put_bcopy");
}

static ucs_status_t uct_src_ep_rdma_zcopy(uct_src_ep_t *ep, srcnic_opcode_t opcode,
                                          const uct_iov_t *iov, size_t iovcnt,
                                          uint64_t remote_addr, uct_rkey_t rkey,
                                          uct_completion_t *comp)
{
    uct_src_iface_t *iface = UCT_SRC_EP_IFACE(ep);
    uct_src_send_desc_t *desc;
    srcnic_wqe_t wqe;
    ucs_status_t status;

    UCS_ASYNC_BLOCK(iface->super.worker->async);
    UCT_SRC_EP_GET_DESC_LOCKED(iface, &iface->tx_small_mp, ep, comp, desc, status, out);
    uct_src_wqe_init(&wqe, opcode);
    wqe.remote_addr = remote_addr;
    wqe.rkey        = rkey;
    (void)uct_src_wqe_add_iov(&wqe, iov, iovcnt);
    status = uct_src_ep_post(iface, ep, desc, &wqe);
    if (status == UCS_OK) {
        status = UCS_INPROGRESS;
    }
out:
    UCS_ASYNC_UNBLOCK(iface->super.worker->async);
    return status;
}

ucs_status_t uct_src_ep_put_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov, size_t iovcnt,
                                  uint64_t remote_addr, uct_rkey_t rkey,
                                  uct_completion_t *comp)
{
    uct_src_ep_t *ep       = ucs_derived_of(tl_ep, uct_src_ep_t);
    uct_src_iface_t *iface = UCT_SRC_EP_IFACE(ep);

    UCT_CHECK_IOV_SIZE(iovcnt, (size_t)SRCNIC_WQE_MAX_SGE, "put_zcopy");
    UCT_CHECK_LENGTH(uct_iov_total_length(iov, iovcnt), 0, srcnic_nic_max_msg(iface->nic),
                     "put_zcopy");
    return uct_src_ep_rdma_zcopy(ep, SRCNIC_OP_WRITE, iov, iovcnt, remote_addr, rkey, comp);
}

ucs_status_t uct_src_ep_get_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov, size_t iovcnt,
                                  uint64_t remote_addr, uct_rkey_t rkey,
                                  uct_completion_t *comp)
{
    uct_src_ep_t *ep       = ucs_derived_of(tl_ep, uct_src_ep_t);
    uct_src_iface_t *iface = UCT_SRC_EP_IFACE(ep);

    UCT_CHECK_IOV_SIZE(iovcnt, (size_t)SRCNIC_WQE_MAX_SGE, "get_zcopy");
    UCT_CHECK_LENGTH(uct_iov_total_length(iov, iovcnt), 0, srcnic_nic_max_msg(iface->nic),
                     "get_zcopy");
    return uct_src_ep_rdma_zcopy(ep, SRCNIC_OP_READ, iov, iovcnt, remote_addr, rkey, comp);
}

ucs_status_t uct_src_ep_get_bcopy(uct_ep_h tl_ep, uct_unpack_callback_t unpack_cb, void *arg,
                                  size_t length, uint64_t remote_addr, uct_rkey_t rkey,
                                  uct_completion_t *comp)
{
    uct_src_ep_t *ep       = ucs_derived_of(tl_ep, uct_src_ep_t);
    uct_src_iface_t *iface = UCT_SRC_EP_IFACE(ep);
    uct_src_send_desc_t *desc;
    srcnic_wqe_t wqe;
    ucs_status_t status;

    UCT_CHECK_LENGTH(length, 0, iface->seg_size, "get_bcopy");
    UCS_ASYNC_BLOCK(iface->super.worker->async);
    UCT_SRC_EP_GET_DESC_LOCKED(iface, &iface->tx_mp, ep, comp, desc, status, out);
    desc->unpack_cb  = unpack_cb;
    desc->unpack_arg = arg;
    desc->length     = length;
    uct_src_wqe_init(&wqe, SRCNIC_OP_READ);
    wqe.num_sge           = 1;
    wqe.u.sge[0].addr     = (uintptr_t)(desc + 1);
    wqe.u.sge[0].length   = length;
    wqe.u.sge[0].reserved = 0;
    wqe.remote_addr       = remote_addr;
    wqe.rkey              = rkey;
    status = uct_src_ep_post(iface, ep, desc, &wqe);
    if (status == UCS_OK) {
        status = UCS_INPROGRESS;
    }
out:
    UCS_ASYNC_UNBLOCK(iface->super.worker->async);
    return status;
}

ucs_status_t uct_src_ep_pending_add(uct_ep_h tl_ep, uct_pending_req_t *req, unsigned flags)
{
    uct_src_ep_t *ep       = ucs_derived_of(tl_ep, uct_src_ep_t);
    uct_src_iface_t *iface = UCT_SRC_EP_IFACE(ep);
    ucs_status_t status    = UCS_OK;

    UCS_ASYNC_BLOCK(iface->super.worker->async);
    if (uct_src_iface_has_tx_resources(iface) && ucs_arbiter_group_is_empty(&ep->arb_group) &&
        !(ep->flags & UCT_SRC_EP_FLAG_FAILED)) {
        status = UCS_ERR_BUSY; /* send now instead */
    } else {
        uct_pending_req_arb_group_push(&ep->arb_group, req);
        ucs_arbiter_group_schedule(&iface->arbiter, &ep->arb_group);
    }
    UCS_ASYNC_UNBLOCK(iface->super.worker->async);
    return status;
}

typedef struct {
    uct_pending_purge_callback_t cb;
    void                         *arg;
} uct_src_purge_args_t;

static ucs_arbiter_cb_result_t
uct_src_ep_purge_cb(ucs_arbiter_t *arbiter, ucs_arbiter_group_t *group,
                    ucs_arbiter_elem_t *elem, void *arg)
{
    uct_src_purge_args_t *args = arg;
    uct_pending_req_t *req     = ucs_container_of(elem, uct_pending_req_t, priv);

    if (args->cb != NULL) {
        args->cb(req, args->arg);
    }
    return UCS_ARBITER_CB_RESULT_REMOVE_ELEM;
}

void uct_src_ep_pending_purge(uct_ep_h tl_ep, uct_pending_purge_callback_t cb, void *arg)
{
    uct_src_ep_t *ep          = ucs_derived_of(tl_ep, uct_src_ep_t);
    uct_src_iface_t *iface    = UCT_SRC_EP_IFACE(ep);
    uct_src_purge_args_t args = {cb, arg};

    UCS_ASYNC_BLOCK(iface->super.worker->async);
    ucs_arbiter_group_purge(&iface->arbiter, &ep->arb_group, uct_src_ep_purge_cb, &args);
    UCS_ASYNC_UNBLOCK(iface->super.worker->async);
}

/* A probe: an empty SEND with an id no handler has, asking for a prompt acknowledgement; the
 * peer engine acknowledges it (and so everything the ep posted before it) or the connection
 * fails; the peer iface drops it. Called with the async lock held. */
static ucs_status_t uct_src_ep_post_probe(uct_src_iface_t *iface, uct_src_ep_t *ep)
{
    uct_src_send_desc_t *desc;
    srcnic_wqe_t wqe;

    if (!uct_src_iface_has_tx_resources(iface)) {
        return UCS_ERR_NO_RESOURCE;
    }
    desc = uct_src_ep_desc_get(&iface->tx_small_mp, ep, NULL);
    if (desc == NULL) {
        return UCS_ERR_NO_RESOURCE;
    }
    uct_src_wqe_init(&wqe, SRCNIC_OP_SEND);
    wqe.imm        = UCT_SRC_AM_ID_KEEPALIVE;
    wqe.flags      = SRCNIC_WQE_FLAG_INLINE;
    wqe.inline_len = 0;
    return uct_src_ep_post(iface, ep, desc, &wqe);
}

ucs_status_t uct_src_ep_flush(uct_ep_h tl_ep, unsigned flags, uct_completion_t *comp)
{
    uct_src_ep_t *ep       = ucs_derived_of(tl_ep, uct_src_ep_t);
    uct_src_iface_t *iface = UCT_SRC_EP_IFACE(ep);
    uct_src_flush_req_t *req, **tail;
    ucs_status_t status;

    UCS_ASYNC_BLOCK(iface->super.worker->async);
    if (flags & UCT_FLUSH_FLAG_CANCEL) {
        /* Outstanding sends complete with CANCELED as the engine drops them. */
        srcnic_qp_cancel(iface->qp, ep->dest, ep->tag);
    } else if ((iface->pending_ep != ep) && !ucs_arbiter_group_is_empty(&ep->arb_group)) {
        status = UCS_ERR_NO_RESOURCE; /* flush after what is queued */
        goto out;
    }
    if (ep->tx_completed == ep->tx_posted) {
        status = UCS_OK;
        goto out;
    }
    /* Completion means acknowledged by the peer: every send completes only once the remote
     * engine has acknowledged (or answered) it. Active messages do not ask for a prompt
     * acknowledgement (SRCNIC_WQE_FLAG_LAZY_ACK): if the last send did not, a probe asks for
     * one now instead of the flush waiting out the peer's acknowledgement delay (without
     * resources for it, the flush waits; a failed ep's sends complete with its error). */
    if ((ep->flags & (UCT_SRC_EP_FLAG_LAZY_TAIL | UCT_SRC_EP_FLAG_FAILED)) ==
            UCT_SRC_EP_FLAG_LAZY_TAIL && !(flags & UCT_FLUSH_FLAG_CANCEL)) {
        (void)uct_src_ep_post_probe(iface, ep);
    }
    if (comp != NULL) {
        req = ucs_malloc(sizeof(*req), "src_flush_req");
        if (req == NULL) {
            status = UCS_ERR_NO_MEMORY;
            goto out;
        }
        req->next   = NULL;
        req->target = ep->tx_posted;
        req->comp   = comp;
        for (tail = &ep->flush_reqs; *tail != NULL; tail = &(*tail)->next) {
        }
        *tail = req;
    }
    status = UCS_INPROGRESS;
out:
    UCS_ASYNC_UNBLOCK(iface->super.worker->async);
    return status;
}

ucs_status_t uct_src_ep_check(uct_ep_h tl_ep, unsigned flags, uct_completion_t *comp)
{
    uct_src_ep_t *ep       = ucs_derived_of(tl_ep, uct_src_ep_t);
    uct_src_iface_t *iface = UCT_SRC_EP_IFACE(ep);
    ucs_status_t status;

    UCT_EP_KEEPALIVE_CHECK_PARAM(flags, comp);
    UCS_ASYNC_BLOCK(iface->super.worker->async);
    status = (ep->flags & UCT_SRC_EP_FLAG_FAILED) ? UCS_OK /* already reported */ :
                                                    uct_src_ep_post_probe(iface, ep);
    UCS_ASYNC_UNBLOCK(iface->super.worker->async);
    return status;
}

ucs_status_t uct_src_ep_invalidate(uct_ep_h tl_ep, unsigned flags)
{
    uct_src_ep_t *ep       = ucs_derived_of(tl_ep, uct_src_ep_t);
    uct_src_iface_t *iface = UCT_SRC_EP_IFACE(ep);

    UCS_ASYNC_BLOCK(iface->super.worker->async);
    srcnic_qp_cancel(iface->qp, ep->dest, ep->tag);
    ep->flags |= UCT_SRC_EP_FLAG_INVALIDATED;
    uct_src_ep_set_failed(ep, UCS_ERR_ENDPOINT_TIMEOUT);
    UCS_ASYNC_UNBLOCK(iface->super.worker->async);
    return UCS_OK;
}
