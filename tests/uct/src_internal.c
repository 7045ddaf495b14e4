/* White-box helpers for the UCT tests (src_internal.h): built like the module, against UCX's
 * internal headers and uct_src.h. */
#include "src_internal.h"

#include "uct_src/uct_src.h"

#include <uct/api/v2/uct_v2.h>
#include <ucs/async/async.h>

#include <string.h>


/* The value of an expression of the iface `_iface` (uct_src_iface_t *) read under its async
 * lock, against the background thread. */
#define UCT_SRC_TEST_READ_LOCKED(_tl_iface, _iface, _expr) \
    ({ \
        uct_src_iface_t *_iface = ucs_derived_of(_tl_iface, uct_src_iface_t); \
        __typeof__(_expr) _value; \
        UCS_ASYNC_BLOCK(_iface->super.worker->async); \
        _value = (_expr); \
        UCS_ASYNC_UNBLOCK(_iface->super.worker->async); \
        _value; \
    })


size_t uct_src_test_ep_size(void)
{
    return sizeof(uct_src_ep_t);
}

uint64_t uct_src_test_counter(uct_iface_h tl_iface, const char *name)
{
    uct_src_iface_t *iface = ucs_derived_of(tl_iface, uct_src_iface_t);
    uint64_t value         = UINT64_MAX;
    int c;

    for (c = 0; c < SRCNIC_CNT_LAST; ++c) {
        if (!strcmp(srcnic_counter_name((srcnic_counter_t)c), name)) {
            UCS_ASYNC_BLOCK(iface->super.worker->async);
            value = srcnic_nic_counter(iface->nic, (srcnic_counter_t)c);
            UCS_ASYNC_UNBLOCK(iface->super.worker->async);
            break;
        }
    }
    return value;
}

void uct_src_test_stop_async_progress(uct_iface_h tl_iface)
{
    uct_src_iface_t *iface = ucs_derived_of(tl_iface, uct_src_iface_t);

    if (iface->async_timer_id >= 0) {
        ucs_async_remove_handler(iface->async_timer_id, 1);
        iface->async_timer_id = -1;
    }
}

unsigned long uct_src_test_async_runs(uct_iface_h tl_iface)
{
    return UCT_SRC_TEST_READ_LOCKED(tl_iface, iface, iface->async_runs);
}

int uct_src_test_tx_hold(uct_iface_h tl_iface)
{
    return UCT_SRC_TEST_READ_LOCKED(tl_iface, iface, iface->tx_hold);
}

unsigned uct_src_test_rx_posted(uct_iface_h tl_iface)
{
    return UCT_SRC_TEST_READ_LOCKED(tl_iface, iface, iface->rx_posted);
}

int uct_src_test_bcopy_pool_grown(uct_iface_h tl_iface)
{
    return UCT_SRC_TEST_READ_LOCKED(tl_iface, iface, iface->tx_mp.data->chunks != NULL);
}

int uct_src_test_attached(uct_iface_h tl_iface)
{
    return ucs_derived_of(tl_iface, uct_src_iface_t)->attached;
}

unsigned long uct_src_test_am_dropped(uct_iface_h tl_iface)
{
    return UCT_SRC_TEST_READ_LOCKED(tl_iface, iface, iface->rx_am_dropped);
}

ucs_status_t uct_src_test_ep_invalidate(uct_ep_h ep)
{
    return uct_ep_invalidate(ep, 0);
}

uint32_t uct_src_test_ep_posted(uct_ep_h tl_ep)
{
    uct_src_ep_t *ep       = ucs_derived_of(tl_ep, uct_src_ep_t);
    uct_src_iface_t *iface = ucs_derived_of(ep->super.super.iface, uct_src_iface_t);
    uint32_t num;

    UCS_ASYNC_BLOCK(iface->super.worker->async);
    num = ep->tx_posted;
    UCS_ASYNC_UNBLOCK(iface->super.worker->async);
    return num;
}

unsigned uct_src_test_num_connections(uct_iface_h tl_iface)
{
    return UCT_SRC_TEST_READ_LOCKED(tl_iface, iface, srcnic_nic_num_connections(iface->nic));
}

int uct_src_test_md_invalidates_rma(uct_md_h md)
{
    uct_src_md_attr_t attr;

    if (md->ops->query(md, &attr) != UCS_OK) {
        return 0;
    }
    return !!(UCT_SRC_MD_ATTR_FLAGS(&attr) & UCT_SRC_MD_FLAG_INVALIDATE);
}

ucs_status_t uct_src_test_mem_dereg_invalidate(uct_md_h md, uct_mem_h memh,
                                               uct_completion_t *comp)
{
    uct_md_mem_dereg_params_t params;

    params.field_mask = UCT_MD_MEM_DEREG_FIELD_MEMH | UCT_MD_MEM_DEREG_FIELD_FLAGS |
                        UCT_MD_MEM_DEREG_FIELD_COMPLETION;
    params.memh       = memh;
    params.flags      = UCT_MD_MEM_DEREG_FLAG_INVALIDATE;
    params.comp       = comp;
    return uct_md_mem_dereg_v2(md, &params);
}

ucs_status_t uct_src_test_mkey_pack_invalidate(uct_md_h md, uct_mem_h memh, void *buffer)
{
    uct_md_mkey_pack_params_t params;

    params.field_mask = UCT_MD_MKEY_PACK_FIELD_FLAGS;
    params.flags      = UCT_SRC_MKEY_PACK_FLAG_INVALIDATE;
#if UCT_SRC_HAVE_MKEY_PACK_ADDRESS
    return uct_md_mkey_pack_v2(md, memh, NULL, SIZE_MAX, &params, buffer);
#else
    return uct_md_mkey_pack_v2(md, memh, &params, buffer);
#endif
}

int uct_src_test_dereg_invalidate_checks(void)
{
    return UCT_SRC_DEREG_INVALIDATE_CHECKS;
}

int uct_src_test_alter_address(void *dev_addr, size_t dev_addr_len, void *iface_addr,
                               size_t iface_addr_len, const char *field)
{
    uct_src_device_addr_t *dev  = dev_addr;
    uct_src_iface_addr_t *iface = iface_addr;

    if ((dev_addr_len < sizeof(*dev)) || (iface_addr_len < sizeof(*iface))) {
        return -1;
    }
    if (!strcmp(field, "ip")) {
        dev->ip[3] ^= 1;                 /* 127.0.0.1 <-> 127.0.0.0, 127.0.0.2 <-> 127.0.0.3 */
    } else if (!strcmp(field, "port")) {
        iface->port = (uint16_t)(iface->port + 1);
    } else if (!strcmp(field, "qpn")) {
        iface->qpn += 1;
    } else if (!strcmp(field, "incarnation")) {
        iface->incarnation ^= 1;
    } else {
        return -1;
    }
    return 0;
}

#if UCT_SRC_HAVE_EP_IS_CONNECTED
int uct_src_test_ep_is_connected(uct_ep_h ep, const uct_device_addr_t *dev_addr,
                                 const uct_iface_addr_t *iface_addr,
                                 const uct_ep_addr_t *ep_addr)
{
    uct_ep_is_connected_params_t params = {0};

    if (dev_addr != NULL) {
        params.field_mask |= UCT_EP_IS_CONNECTED_FIELD_DEVICE_ADDR;
        params.device_addr = dev_addr;
    }
    if (iface_addr != NULL) {
        params.field_mask |= UCT_EP_IS_CONNECTED_FIELD_IFACE_ADDR;
        params.iface_addr  = iface_addr;
    }
    if (ep_addr != NULL) {
        params.field_mask |= UCT_EP_IS_CONNECTED_FIELD_EP_ADDR;
        params.ep_addr     = ep_addr;
    }
    return uct_ep_is_connected(ep, &params);
}
#endif
