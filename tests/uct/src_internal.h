/* White-box access to the src transport for the UCT tests, for what the public UCT API does not
 * show: the endpoint's size, the engine's counters, and UCX 1.13 calls whose declarations are
 * not installed (uct_v2.h). Implemented in the only test file built with UCX's internal headers
 * and uct_src.h; everything else in tests/uct uses uct/api/uct.h alone. */
#ifndef UCT_SRC_TESTS_SRC_INTERNAL_H
#define UCT_SRC_TESTS_SRC_INTERNAL_H

#ifdef HAVE_CONFIG_H
#  include "config.h"   /* UCT_SRC_HAVE_EP_IS_CONNECTED */
#endif

#include <uct/api/uct.h>

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* sizeof(uct_src_ep_t), bytes: what every endpoint costs. */
size_t uct_src_test_ep_size(void);

/* The engine counter of a src iface named as in SRCNIC_FOREACH_COUNTER (e.g. "TX_PACKETS");
 * UINT64_MAX for an unknown name. Read under the iface's async lock. */
uint64_t uct_src_test_counter(uct_iface_h iface, const char *name);

/* Stops the iface's background progress timer for good (if it has one): its engine then runs
 * only when the test progresses the iface, so it acknowledges nothing meanwhile. The timer's
 * first tick comes right after the iface opens, so a long UCX_SRC_ASYNC_INTERVAL alone does
 * not make an iface quiet. */
void uct_src_test_stop_async_progress(uct_iface_h iface);

/* Background progress timer ticks that ran the iface's engine so far (ticks that follow a
 * progress call of the application leave it alone). */
unsigned long uct_src_test_async_runs(uct_iface_h iface);

/* Whether the iface now holds a send posted right after a transmission for the next one (it
 * has seen bursts followed by progress promptly). */
int uct_src_test_tx_hold(uct_iface_h iface);

/* Receive buffers the iface has posted to its engine now. */
unsigned uct_src_test_rx_posted(uct_iface_h iface);

/* Whether the iface's pool of bcopy send descriptors (each with a buffer of UCX_SRC_SEG_SIZE)
 * has grown its first chunk: only bcopy sends should make it. */
int uct_src_test_bcopy_pool_grown(uct_iface_h iface);

/* Nonzero if the iface's engine is the node agent's (UCX_SRC_MODE=agent, or auto with an agent). */
int uct_src_test_attached(uct_iface_h iface);
/* Received messages the iface dropped because no handler was registered for their AM id. */
unsigned long uct_src_test_am_dropped(uct_iface_h iface);
/* Sends the ep has posted to its engine (wraps): its operations and its probes. */
uint32_t uct_src_test_ep_posted(uct_ep_h ep);
/* uct_ep_invalidate (UCX's internal API, as UCP's keepalive calls it). */
ucs_status_t uct_src_test_ep_invalidate(uct_ep_h ep);

/* Connections the iface's engine holds open. */
unsigned uct_src_test_num_connections(uct_iface_h iface);

/* Whether the md advertises invalidation of remote reads and writes, under the flag the UCX in
 * use reads (UCT_MD_FLAG_INVALIDATE, or UCT_MD_FLAG_INVALIDATE_RMA of uct_md_query_v2). */
int uct_src_test_md_invalidates_rma(uct_md_h md);

/* uct_md_mem_dereg_v2() with UCT_MD_MEM_DEREG_FLAG_INVALIDATE and a completion. */
ucs_status_t uct_src_test_mem_dereg_invalidate(uct_md_h md, uct_mem_h memh,
                                               uct_completion_t *comp);

/* uct_md_mkey_pack_v2() with the flag that prepares the key for an invalidating deregistration
 * (UCT_MD_MKEY_PACK_FLAG_INVALIDATE_RMA; UCX 1.13: UCT_MD_MKEY_PACK_FLAG_INVALIDATE), as UCP
 * packs rkeys for endpoints with peer error handling. */
ucs_status_t uct_src_test_mkey_pack_invalidate(uct_md_h md, uct_mem_h memh, void *buffer);

/* Whether the md refuses an invalidating deregistration whose rkey was not packed with that
 * flag, or whose registration is for remote atomics alone (UCX 1.18's contract; not 1.13's). */
int uct_src_test_dereg_invalidate_checks(void);

/* A src device and interface address (copies, altered in place) with one field changed:
 * "ip" (the device's IPv4 address, to another loopback address), "port" (the engine's UDP
 * port), "qpn" (the interface's QP) or "incarnation" (the engine's). Returns 0, or -1 for an
 * unknown field or a buffer shorter than a src address. */
int uct_src_test_alter_address(void *dev_addr, size_t dev_addr_len, void *iface_addr,
                               size_t iface_addr_len, const char *field);

#if UCT_SRC_HAVE_EP_IS_CONNECTED
/* uct_ep_is_connected() (UCX >= 1.14, declared in uct_v2.h, which Debian does not install)
 * with the fields given: a null address is left out of the field mask. */
int uct_src_test_ep_is_connected(uct_ep_h ep, const uct_device_addr_t *dev_addr,
                                 const uct_iface_addr_t *iface_addr,
                                 const uct_ep_addr_t *ep_addr);
#endif

#ifdef __cplusplus
}
#endif

#endif
