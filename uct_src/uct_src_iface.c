/**
 * The "src" interface: owns an embedded srcnic engine and one QP on it, posts receive buffers
 * with UCP's headroom, turns completions into active-message callbacks and send completions,
 * dispatches pending requests, and keeps the engine moving from a background timer so that
 * peers get their acknowledgements while the application computes.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "uct_src.h"

#include <ucs/arch/cpu.h>
#include <ucs/async/async.h>
#include <ucs/debug/log.h>
#include <ucs/sys/string.h>
#include <ucs/sys/sys.h>
#include <ucs/time/time.h>

#include <arpa/inet.h>
#include <pthread.h>
#include <stdlib.h>
#include <ifaddrs.h>
#include <string.h>


#define UCT_SRC_RX_BATCH 32


static const char *uct_src_mode_names[] = {
    [UCT_SRC_MODE_AUTO]     = "auto",
    [UCT_SRC_MODE_EMBEDDED] = "embedded",
    [UCT_SRC_MODE_AGENT]    = "agent",
    [UCT_SRC_MODE_LAST]     = NULL
};

static const char *uct_src_dc_policy_names[] = {
    [UCT_SRC_DC_POLICY_DCS]       = "dcs",
    [UCT_SRC_DC_POLICY_DCS_QUOTA] = "dcs_quota",
    [UCT_SRC_DC_POLICY_LAST]      = NULL
};

static ucs_config_field_t uct_src_iface_config_table[] = {
    {"", "", NULL,
     ucs_offsetof(uct_src_iface_config_t, super), UCS_CONFIG_TYPE_TABLE(uct_iface_config_table)},

    {"MODE", "auto",
     "Where the engine runs:\n"
     " auto     - on the node agent (srcd) if one answers on AGENT_SOCKET, else in this process\n"
     " embedded - in this process: connections per pair of processes\n"
     " agent    - on the node agent, shared by every process of the node: connections per pair\n"
     "            of nodes; fails if no agent answers\n"
     "With the agent, the engine settings below (MTU to FAULT_SEED) are the agent's own.",
     ucs_offsetof(uct_src_iface_config_t, mode), UCS_CONFIG_TYPE_ENUM(uct_src_mode_names)},

    {"AGENT_SOCKET", "@srcd",
     "The node agent's socket: @NAME for an abstract socket (one per network namespace) or a\n"
     "path; what srcd --socket was given.",
     ucs_offsetof(uct_src_iface_config_t, agent_socket), UCS_CONFIG_TYPE_STRING},

    {"AGENT_ARENA", "64m",
     "Memory each interface shares with the node agent for its send and receive buffers, which\n"
     "the agent then reads and writes without a cross-memory copy; resident only as used.",
     ucs_offsetof(uct_src_iface_config_t, agent_arena), UCS_CONFIG_TYPE_MEMUNITS},

    {"AGENT_DIRECT_READ", "y",
     "With the node agent, a get (READ) from another process attached to the same agent is\n"
     "copied by this process itself, with one cross-memory copy, after the agent checked the\n"
     "remote key and bounds; where the kernel refuses that copy (Yama ptrace_scope, another\n"
     "user), the agent copies instead, logged once. n: the agent always copies (two copies).",
     ucs_offsetof(uct_src_iface_config_t, agent_direct_read), UCS_CONFIG_TYPE_BOOL},

    {"SEG_SIZE", "32832",
     "Largest bcopy message and size of each receive buffer; an active message larger than\n"
     "this is fragmented by UCP. The default, 32 KiB and 64 bytes, holds a 32 KiB message with\n"
     "UCP's header in one fragment; every fragment costs a message of the engine, a datagram\n"
     "and a completion, which large UCP streams (eager only in UCP 1.13) pay per fragment.",
     ucs_offsetof(uct_src_iface_config_t, seg_size), UCS_CONFIG_TYPE_MEMUNITS},

    {"TX_QUEUE_LEN", "256",
     "Sends in flight per interface; further sends return NO_RESOURCE and go to the pending\n"
     "queue (power of 2).",
     ucs_offsetof(uct_src_iface_config_t, tx_queue_len), UCS_CONFIG_TYPE_UINT},

    {"RX_QUEUE_LEN", "256",
     "Receive buffers kept posted per interface (power of 2). A message arriving with none\n"
     "posted is refused with a receiver-not-ready NAK and retried by the sender.",
     ucs_offsetof(uct_src_iface_config_t, rx_queue_len), UCS_CONFIG_TYPE_UINT},

    {"RX_MAX_BUFS", "-1",
     "Receive buffers per interface, posted ones and those UCP keeps (unexpected messages);\n"
     "-1 is unlimited. A cap bounds memory, but once UCP keeps all but the posted ones the\n"
     "peers' sends wait, and an application that must receive another message first to\n"
     "consume the kept ones then waits forever: cap only with that in mind. At least\n"
     "RX_QUEUE_LEN.",
     ucs_offsetof(uct_src_iface_config_t, rx_max_bufs), UCS_CONFIG_TYPE_INT},

    {"MTU", "0",
     "Largest datagram the engine sends, bytes; 0 chooses the interface's (65000 on loopback,\n"
     "and to other processes at the interface's own address: the kernel reaches them over\n"
     "loopback). A value set here applies to every peer.",
     ucs_offsetof(uct_src_iface_config_t, mtu), UCS_CONFIG_TYPE_MEMUNITS},

    {"WINDOW", "0",
     "Packets in flight per connection between two engines (2..1024); 0 sizes it by the\n"
     "path: 128, or enough for 768 KiB of payload where the datagrams are small (575 on a\n"
     "1500-byte interface), of which at most 128 messages shorter than a packet, and full\n"
     "packets no more than the granted socket receive buffer holds (see SOCK_BUF).",
     ucs_offsetof(uct_src_iface_config_t, window), UCS_CONFIG_TYPE_UINT},

    {"RTO", "5ms",
     "Initial and minimum retransmission timeout; it adapts to the measured round trip.",
     ucs_offsetof(uct_src_iface_config_t, rto), UCS_CONFIG_TYPE_TIME},

    {"RTO_MAX", "200ms",
     "Ceiling of the retransmission timeout's exponential backoff.",
     ucs_offsetof(uct_src_iface_config_t, rto_max), UCS_CONFIG_TYPE_TIME},

    {"RETRY_COUNT", "64",
     "Retransmission timeouts without progress after which the peer is declared dead and its\n"
     "endpoints fail with ENDPOINT_TIMEOUT.",
     ucs_offsetof(uct_src_iface_config_t, retry_count), UCS_CONFIG_TYPE_UINT},

    {"PEER_TIMEOUT", "30s",
     "Data unacknowledged for this long declares the peer dead (ENDPOINT_TIMEOUT).",
     ucs_offsetof(uct_src_iface_config_t, peer_timeout), UCS_CONFIG_TYPE_TIME},

    {"RNR_DELAY", "100us",
     "First back-off after the peer had no receive buffer; doubles up to 10 ms.",
     ucs_offsetof(uct_src_iface_config_t, rnr_delay), UCS_CONFIG_TYPE_TIME},

    {"MAX_CONNECTIONS", "4096",
     "Connections (remote engines) one engine keeps at most: the budget. With DC (NUM_DCI and\n"
     "DC_TARGETS not 0) every further remote engine is served over DC streams instead.",
     ucs_offsetof(uct_src_iface_config_t, max_connections), UCS_CONFIG_TYPE_UINT},

    {"NUM_DCI", "32",
     "DC initiators: engines beyond the connection budget share this many streams, each\n"
     "attached to one of them while it has work (0: no DC, such engines are refused).",
     ucs_offsetof(uct_src_iface_config_t, num_dci), UCS_CONFIG_TYPE_UINT},

    {"DC_TARGETS", "64",
     "Short-lived target contexts this engine keeps at most for DC streams from others\n"
     "(least recently used evicted when quiet; for 10 ms after refusing a stream for want of\n"
     "one, the engine asks the other initiators to close theirs once quiet; 0: refuse DC\n"
     "streams).",
     ucs_offsetof(uct_src_iface_config_t, dc_targets), UCS_CONFIG_TYPE_UINT},

    {"DC_POLICY", "dcs_quota",
     "How a DCI is shared: dcs keeps it while its destination has work; dcs_quota hands it\n"
     "over after DC_QUOTA requests when another destination waits for a DCI.",
     ucs_offsetof(uct_src_iface_config_t, dc_policy), UCS_CONFIG_TYPE_ENUM(uct_src_dc_policy_names)},

    {"DC_PROMOTE", "256",
     "A DC destination that sends this many requests within 10 ms gets a connection (an idle\n"
     "one is closed by agreement when the budget is spent); 0: never.",
     ucs_offsetof(uct_src_iface_config_t, dc_promote), UCS_CONFIG_TYPE_UINT},

    {"DC_QUOTA", "32",
     "Requests a DCI takes for one destination while others wait (DC_POLICY=dcs_quota).",
     ucs_offsetof(uct_src_iface_config_t, dc_quota), UCS_CONFIG_TYPE_UINT},

    {"MAX_INFLIGHT", "4096",
     "Messages in flight per engine, requests and answers together.",
     ucs_offsetof(uct_src_iface_config_t, max_inflight), UCS_CONFIG_TYPE_UINT},

    {"RX_BUFFERS", "0",
     "Packet buffers per engine for reception and reordering, one datagram each (64..2^20);\n"
     "0 sizes them by the widest window: twice it, at least 256 (1150 on a 1500-byte\n"
     "interface). Their memory is reserved, and becomes resident only as datagrams are\n"
     "written to it.",
     ucs_offsetof(uct_src_iface_config_t, rx_buffers), UCS_CONFIG_TYPE_UINT},

    {"SOCK_BUF", "8m",
     "UDP socket send and receive buffer size (raised beyond the system limits\n"
     "net.core.wmem_max and rmem_max when running with CAP_NET_ADMIN). The automatic window\n"
     "keeps no more full packets in flight than the granted receive buffer holds.",
     ucs_offsetof(uct_src_iface_config_t, sock_buf), UCS_CONFIG_TYPE_MEMUNITS},

    {"PEER_SOCKETS", "4",
     "Connected UDP sockets for the busiest peers (0..64): a peer that has been sent 64\n"
     "datagrams in a row gets a socket of its own, which saves the kernel a route lookup per\n"
     "datagram and lowers latency; peers sent to in turn (collectives) keep the one socket,\n"
     "which receives from all of them in one call. 0 sends and receives everything on the one\n"
     "bound socket.",
     ucs_offsetof(uct_src_iface_config_t, peer_sockets), UCS_CONFIG_TYPE_UINT},

    {"JOB_KEY", "0",
     "Key carried by every packet; packets with another key are dropped. Processes of one job\n"
     "must agree on it. Not needed to keep jobs apart: a connection's first packets must prove\n"
     "the secret in the receiving engine's address, which only the processes given that address\n"
     "by UCX's address exchange hold; set one to also drop a job's packets from processes that\n"
     "hold the address but belong elsewhere.",
     ucs_offsetof(uct_src_iface_config_t, job_key), UCS_CONFIG_TYPE_UINT},

    {"TX_COALESCE", "5us",
     "Sends posted within this time of each other form a burst. Once the application has\n"
     "followed its bursts with a progress call within this time (two in a row at first), a\n"
     "send posted this soon after an earlier send of its burst was transmitted waits to\n"
     "leave with the rest of the burst on the next progress call, so that a burst reaches\n"
     "the kernel together; the first send after a progress call always leaves at once.\n"
     "Bursts left waiting longer (the application computed before it progressed or posted\n"
     "again) stop that: two in a row, or one soon after it started. Sends posted during\n"
     "progress leave before it returns. 0 transmits every send as it is posted.",
     ucs_offsetof(uct_src_iface_config_t, tx_coalesce), UCS_CONFIG_TYPE_TIME},

    {"ASYNC_INTERVAL", "50ms",
     "Period of background progress (acknowledgements, retransmissions) while the\n"
     "application does not call progress. Each period wakes a thread in every process: at\n"
     "10ms, ranks that busy-poll on oversubscribed cores were kept off the CPU for hundreds\n"
     "of milliseconds.",
     ucs_offsetof(uct_src_iface_config_t, async_interval), UCS_CONFIG_TYPE_TIME},

    {"FAULT_DROP", "0",
     "Testing only: probability of dropping each received datagram.",
     ucs_offsetof(uct_src_iface_config_t, fault_drop), UCS_CONFIG_TYPE_DOUBLE},

    {"FAULT_CORRUPT", "0",
     "Testing only: probability of corrupting each received datagram.",
     ucs_offsetof(uct_src_iface_config_t, fault_corrupt), UCS_CONFIG_TYPE_DOUBLE},

    {"FAULT_SEED", "1",
     "Testing only: seed of the fault injection.",
     ucs_offsetof(uct_src_iface_config_t, fault_seed), UCS_CONFIG_TYPE_ULONG},

    {NULL}
};


static uct_iface_ops_t uct_src_iface_ops;
static uct_iface_internal_ops_t uct_src_iface_internal_ops;


static ucs_status_t uct_src_iface_query(uct_iface_h tl_iface, uct_iface_attr_t *attr)
{
    uct_src_iface_t *iface = ucs_derived_of(tl_iface, uct_src_iface_t);
    size_t max_zcopy       = srcnic_nic_max_msg(iface->nic);

    uct_base_iface_query(&iface->super, attr);
    attr->max_num_eps     = ucs_min(attr->max_num_eps, iface->max_num_eps);

    attr->iface_addr_len  = sizeof(uct_src_iface_addr_t);
    attr->device_addr_len = sizeof(uct_src_device_addr_t);
    attr->ep_addr_len     = 0;
    attr->max_conn_priv   = 0;
    attr->cap.flags       = UCT_IFACE_FLAG_CONNECT_TO_IFACE |
                            UCT_IFACE_FLAG_AM_SHORT |
                            UCT_IFACE_FLAG_AM_BCOPY |
                            UCT_IFACE_FLAG_AM_ZCOPY |
                            UCT_IFACE_FLAG_PUT_SHORT |
                            UCT_IFACE_FLAG_PUT_BCOPY |
                            UCT_IFACE_FLAG_PUT_ZCOPY |
                            UCT_IFACE_FLAG_GET_BCOPY |
                            UCT_IFACE_FLAG_GET_ZCOPY |
                            UCT_IFACE_FLAG_PENDING |
                            UCT_IFACE_FLAG_CB_SYNC |
                            UCT_IFACE_FLAG_ERRHANDLE_PEER_FAILURE |
                            UCT_IFACE_FLAG_EP_CHECK;
    if (!iface->is_loopback) {
        /* a network device's interface reaches other hosts; loopback only this one */
        attr->cap.flags |= UCT_SRC_IFACE_FLAG_INTER_NODE;
    }
    attr->cap.event_flags = UCT_IFACE_FLAG_EVENT_SEND_COMP |
                            UCT_IFACE_FLAG_EVENT_RECV |
                            UCT_IFACE_FLAG_EVENT_FD;

    attr->cap.am.max_short       = iface->max_short;
    attr->cap.am.max_bcopy       = iface->seg_size;
    attr->cap.am.min_zcopy       = 0;
    attr->cap.am.max_zcopy       = iface->seg_size;
    attr->cap.am.opt_zcopy_align = 1;
    attr->cap.am.align_mtu       = 1;
    attr->cap.am.max_hdr         = SRCNIC_WQE_INLINE_MAX;
    attr->cap.am.max_iov         = UCT_SRC_MAX_IOV;

    attr->cap.put.max_short       = iface->max_short;
    attr->cap.put.max_bcopy       = iface->seg_size;
    attr->cap.put.min_zcopy       = 0;
    attr->cap.put.max_zcopy       = max_zcopy;
    attr->cap.put.opt_zcopy_align = 1;
    attr->cap.put.align_mtu       = 1;
    attr->cap.put.max_iov         = SRCNIC_WQE_MAX_SGE;

    attr->cap.get.max_short       = 0;
    attr->cap.get.max_bcopy       = iface->seg_size;
    attr->cap.get.min_zcopy       = 0;
    attr->cap.get.max_zcopy       = max_zcopy;
    attr->cap.get.opt_zcopy_align = 1;
    attr->cap.get.align_mtu       = 1;
    attr->cap.get.max_iov         = SRCNIC_WQE_MAX_SGE;

    /* Measured (perf/README.md, 2 cores, the full comparisons of 2026-11-22): ucx_perftest
     * am_lat median 5-5.5 us one-way on loopback, 7.4-7.7 us across a veth path; put_bw
     * zcopy of 1 MiB 5.7 GB/s on loopback, 1.5 GB/s across 1500-byte veth (datagrams of
     * 1472 bytes); about 1 us of engine CPU per message (1.1 M messages/s). UCP chooses its
     * protocols and thresholds from these and from uct_src_iface_estimate_perf, which adds an
     * eager fragment's copies: the automatic rendezvous threshold is about 60 KiB on loopback
     * and 55 KiB across an interface (tests/uct/ucp_thresholds.sh; README.md on
     * UCX_RNDV_THRESH). */
    attr->latency             = ucs_linear_func_make(iface->is_loopback ? 5.5e-6 : 7.5e-6, 0);
    attr->bandwidth.dedicated = 0;
    attr->bandwidth.shared    = (iface->is_loopback ? 5000.0 : 1500.0) * UCS_MBYTE;
    attr->overhead            = 1e-6;
    attr->priority            = 0;
    return UCS_OK;
}

static ucs_status_t uct_src_iface_get_device_address(uct_iface_h tl_iface,
                                                     uct_device_addr_t *addr)
{
    uct_src_iface_t *iface          = ucs_derived_of(tl_iface, uct_src_iface_t);
    uct_src_device_addr_t *dev_addr = (uct_src_device_addr_t*)addr;

    memset(dev_addr, 0, sizeof(*dev_addr));
    dev_addr->family = AF_INET;
    memcpy(dev_addr->ip, &iface->ip, sizeof(dev_addr->ip));
    if (iface->is_loopback) {
        dev_addr->flags |= UCT_SRC_DEV_ADDR_FLAG_LOOPBACK;
        uct_iface_get_local_address(&dev_addr->local, UCS_SYS_NS_TYPE_NET);
    }
    return UCS_OK;
}

static ucs_status_t uct_src_iface_get_address(uct_iface_h tl_iface, uct_iface_addr_t *addr)
{
    uct_src_iface_t *iface            = ucs_derived_of(tl_iface, uct_src_iface_t);
    uct_src_iface_addr_t *iface_addr  = (uct_src_iface_addr_t*)addr;
    srcnic_nic_addr_t nic_addr;

    srcnic_nic_query_addr(iface->nic, &nic_addr);
    iface_addr->port        = nic_addr.port;
    iface_addr->qpn         = srcnic_qp_num(iface->qp);
    iface_addr->incarnation = nic_addr.incarnation;
    iface_addr->secret      = nic_addr.secret;
    return UCS_OK;
}

/* Why an address is not reachable, for UCX's diagnostics (when it asks). */
static int uct_src_unreachable(const uct_src_reach_query_t *q, const char *why)
{
    if (q->info != NULL) {
        ucs_strncpy_zero(q->info, why, q->info_len);
    }
    return 0;
}

static int uct_src_iface_reachable(const uct_iface_h tl_iface, const uct_src_reach_query_t *q)
{
    uct_src_iface_t *iface              = ucs_derived_of(tl_iface, uct_src_iface_t);
    const uct_src_device_addr_t *remote = (const uct_src_device_addr_t*)q->dev_addr;
    uct_src_device_addr_t own;
    uct_iface_local_addr_ns_t local;

    if ((remote == NULL) || (!q->device_scope && (q->iface_addr == NULL))) {
        return uct_src_unreachable(q, "no src device or interface address");
    }
    if (((q->dev_addr_len != 0) && (q->dev_addr_len < sizeof(*remote))) ||
        ((q->iface_addr_len != 0) && (q->iface_addr_len < sizeof(uct_src_iface_addr_t)))) {
        return uct_src_unreachable(q, "address shorter than a src address");
    }
    if (remote->family != AF_INET) {
        return uct_src_unreachable(q, "not an IPv4 src address");
    }
    if (!!(remote->flags & UCT_SRC_DEV_ADDR_FLAG_LOOPBACK) != !!iface->is_loopback) {
        /* loopback only talks to loopback, and never across hosts */
        return uct_src_unreachable(q, iface->is_loopback ? "loopback to a network address" :
                                                          "network address to loopback");
    }
    if (iface->is_loopback) {
        local = remote->local;
        if (!uct_src_local_is_reachable(&local)) {
            return uct_src_unreachable(q, "loopback of another host or network namespace");
        }
    }
    if (q->device_scope) {
        /* This very device: the same address (and, on loopback, host and namespace). */
        uct_src_iface_get_device_address(tl_iface, (uct_device_addr_t*)&own);
        if (memcmp(&own, remote, sizeof(own))) {
            return uct_src_unreachable(q, "another src device");
        }
    }
    return 1; /* routing decides; an unreachable peer surfaces as ENDPOINT_TIMEOUT */
}

UCT_SRC_IFACE_IS_REACHABLE_FUNCS(uct_src_iface_reachable)
UCT_SRC_EP_IS_CONNECTED_FUNC(uct_src_ep_connected_to)

/* Receive element: [uct_recv_desc_t* | UCP headroom | payload (seg_size)]; UCP's desc is the
 * headroom's start, and uct_recv_desc() reads the pointer just before it. */
static UCS_F_ALWAYS_INLINE void *uct_src_rx_payload(uct_src_iface_t *iface, void *elem)
{
    return UCS_PTR_BYTE_OFFSET(elem, sizeof(uct_recv_desc_t*) + iface->rx_headroom);
}

static void uct_src_iface_release_desc(uct_recv_desc_t *self, void *desc)
{
    ucs_mpool_put_inline(UCS_PTR_BYTE_OFFSET(desc, -(ptrdiff_t)sizeof(uct_recv_desc_t*)));
}

static void uct_src_iface_post_recvs(uct_src_iface_t *iface)
{
    srcnic_recv_wqe_t wqe;
    srcnic_status_t status;
    void *elem;

    while (iface->rx_posted < iface->rx_max) {
        elem = ucs_mpool_get_inline(&iface->rx_mp);
        if (elem == NULL) {
            break; /* all kept by UCP: refill when it releases some */
        }
        *(uct_recv_desc_t**)elem = &iface->release_desc;
        wqe.wr_id    = (uintptr_t)elem;
        wqe.addr     = (uintptr_t)uct_src_rx_payload(iface, elem);
        wqe.length   = iface->seg_size;
        wqe.reserved = 0;
        status       = srcnic_post_recv(iface->qp, &wqe);
        if (status != SRCNIC_OK) {
            ucs_mpool_put_inline(elem);
            break;
        }
        ++iface->rx_posted;
    }
}

static void uct_src_iface_handle_recv(uct_src_iface_t *iface, const srcnic_cqe_t *cqe)
{
    void *elem = (void*)(uintptr_t)cqe->wr_id;
    void *payload;
    ucs_status_t status;

    --iface->rx_posted;
    if ((cqe->status != SRCNIC_OK) || (cqe->imm >= UCT_AM_ID_MAX)) {
        /* A message its sender cancelled, or an ep_check probe: nothing to deliver. */
        ucs_mpool_put_inline(elem);
        return;
    }
    if (ucs_unlikely(iface->super.am[cqe->imm].cb == iface->am_stub_cb)) {
        /* An id nobody registered: UCX's stub would only warn, and no consumer expects it. A
         * peer that sends one is broken or hostile; the message goes no further. */
        ++iface->rx_am_dropped;
        ucs_debug("src: dropped a message of unregistered active message id %u (%u bytes) "
                  "from qpn %u", cqe->imm, cqe->byte_len, cqe->src_qpn);
        ucs_mpool_put_inline(elem);
        return;
    }
    payload = uct_src_rx_payload(iface, elem);
    uct_iface_trace_am(&iface->super, UCT_AM_TRACE_TYPE_RECV, cqe->imm, payload,
                       cqe->byte_len, "RX: AM");
    status = uct_iface_invoke_am(&iface->super, cqe->imm, payload, cqe->byte_len,
                                 UCT_CB_PARAM_FLAG_DESC);
    if (status != UCS_INPROGRESS) {
        ucs_mpool_put_inline(elem);
    } /* else UCP keeps the buffer and returns it through release_desc */
}

static unsigned uct_src_iface_poll(uct_src_iface_t *iface)
{
    srcnic_cqe_t cqes[UCT_SRC_RX_BATCH];
    unsigned n, i, count = 0;

    do {
        n = srcnic_poll_cq(iface->qp, cqes, UCT_SRC_RX_BATCH);
        for (i = 0; i < n; ++i) {
            if (cqes[i].opcode == SRCNIC_OP_RECV) {
                uct_src_iface_handle_recv(iface, &cqes[i]);
            } else {
                uct_src_ep_send_completed(iface,
                                          (uct_src_send_desc_t*)(uintptr_t)cqes[i].wr_id,
                                          (ucs_status_t)cqes[i].status);
            }
        }
        count += n;
    } while (n == UCT_SRC_RX_BATCH);
    /* Also after UCP returned kept buffers: without this the receive ring could stay empty
     * and every sender back off on receiver-not-ready forever. */
    if (iface->rx_posted < iface->rx_max) {
        uct_src_iface_post_recvs(iface);
    }
    return count;
}

static ucs_arbiter_cb_result_t
uct_src_iface_pending_cb(ucs_arbiter_t *arbiter, ucs_arbiter_group_t *group,
                         ucs_arbiter_elem_t *elem, void *arg)
{
    uct_src_iface_t *iface = arg;
    uct_pending_req_t *req = ucs_container_of(elem, uct_pending_req_t, priv);
    ucs_status_t status;

    if (!uct_src_iface_has_tx_resources(iface)) {
        return UCS_ARBITER_CB_RESULT_STOP;
    }
    /* Sends from this request may bypass its own ep's queue, no other ep's. */
    iface->pending_ep = ucs_container_of(group, uct_src_ep_t, arb_group);
    status            = req->func(req);
    iface->pending_ep = NULL;
    if (status == UCS_OK) {
        return UCS_ARBITER_CB_RESULT_REMOVE_ELEM;
    } else if (status == UCS_INPROGRESS) {
        return UCS_ARBITER_CB_RESULT_NEXT_GROUP;
    }
    /* Keep the request first in its group and try again on the next dispatch. */
    return UCS_ARBITER_CB_RESULT_STOP;
}

void uct_src_iface_dispatch_pending(uct_src_iface_t *iface)
{
    if ((iface->pending_ep != NULL) || ucs_arbiter_is_empty(&iface->arbiter) ||
        !uct_src_iface_has_tx_resources(iface)) {
        return;
    }
    ucs_arbiter_dispatch(&iface->arbiter, 1, uct_src_iface_pending_cb, iface);
}

static unsigned uct_src_iface_progress(uct_iface_h tl_iface)
{
    uct_src_iface_t *iface = ucs_derived_of(tl_iface, uct_src_iface_t);
    unsigned count;
    ucs_time_t now;

    UCS_ASYNC_BLOCK(iface->super.worker->async);
    ++iface->progress_calls;
    if (iface->tx_burst) {
        uct_src_iface_tx_burst_ended(iface, ucs_get_time());
    }
    iface->tx_held = 0;   /* the engine's progress transmits what waits */
    count  = srcnic_nic_progress(iface->nic);
    count += uct_src_iface_poll(iface);
    uct_src_iface_dispatch_pending(iface);
    /* What the callbacks and pending requests posted and held leaves before the application
     * gets the CPU back: it may not progress again for a while. */
    if (iface->tx_held) {
        now = ucs_get_time();
        uct_src_iface_ring_doorbell(iface);
        if (iface->tx_burst) {
            uct_src_iface_tx_burst_ended(iface, now);
        }
    }
    iface->tx_post_rang = 0;   /* the application's next send starts a burst of its own */
    UCS_ASYNC_UNBLOCK(iface->super.worker->async);
    return count;
}

/* Background progress: only the engine (acks, retransmissions, placing data into posted
 * buffers); completions stay queued for the application's own progress. The engine holds an
 * acknowledgement that a sender asked for until its next call, for a reply to carry; no reply
 * is coming from here, so the doorbell sends it now.
 *
 * Only while the application does not progress: a tick that follows one of its progress calls
 * only sends what a burst still holds (the application posted and then computed). The engine
 * runs here under the async lock, which the application's progress takes too (spinning, in
 * UCX's thread mode); on oversubscribed cores this thread can be descheduled in the middle of
 * its system calls, and an application polling meanwhile spun on the lock for as long (200 ms
 * seen in an 8-rank MPI job on 2 cores). */
static void uct_src_iface_async_progress(int id, ucs_event_set_types_t events, void *arg)
{
    uct_src_iface_t *iface = arg;
    ucs_time_t now;

    if (iface->tx_held) {
        /* Sends the application posted and left, whether or not it progressed before */
        now = ucs_get_time();
        uct_src_iface_ring_doorbell(iface);
        uct_src_iface_tx_burst_ended(iface, now);
    }
    if (iface->progress_calls != iface->async_seen) {
        iface->async_seen = iface->progress_calls;
        return;
    }
    ++iface->async_runs;
    srcnic_nic_progress(iface->nic);
    srcnic_nic_transmit(iface->nic);
}

static ucs_status_t uct_src_iface_flush(uct_iface_h tl_iface, unsigned flags,
                                        uct_completion_t *comp)
{
    uct_src_iface_t *iface = ucs_derived_of(tl_iface, uct_src_iface_t);
    ucs_status_t status;

    if (comp != NULL) {
        return UCS_ERR_UNSUPPORTED;
    }
    UCS_ASYNC_BLOCK(iface->super.worker->async);
    if (!ucs_arbiter_is_empty(&iface->arbiter)) {
        status = UCS_ERR_NO_RESOURCE;
    } else {
        status = (iface->tx_outstanding == 0) ? UCS_OK : UCS_INPROGRESS;
    }
    UCS_ASYNC_UNBLOCK(iface->super.worker->async);
    return status;
}

static ucs_status_t uct_src_iface_event_fd_get(uct_iface_h tl_iface, int *fd_p)
{
    uct_src_iface_t *iface = ucs_derived_of(tl_iface, uct_src_iface_t);
    int fd;

    /* The engine creates its event fd at the first request; a failure is logged there. */
    fd = srcnic_nic_event_fd(iface->nic);
    if (fd < 0) {
        return UCS_ERR_IO_ERROR;
    }
    *fd_p = fd;
    return UCS_OK;
}

static ucs_status_t uct_src_iface_event_arm(uct_iface_h tl_iface, unsigned events)
{
    uct_src_iface_t *iface = ucs_derived_of(tl_iface, uct_src_iface_t);
    ucs_status_t status;

    UCS_ASYNC_BLOCK(iface->super.worker->async);
    /* Busy while completions wait in the queue or the engine has work; otherwise the fd
     * fires on the next datagram, timer or completion (srcnic_nic_arm). */
    status = (ucs_status_t)srcnic_nic_arm(iface->nic);
    UCS_ASYNC_UNBLOCK(iface->super.worker->async);
    return status;
}

static ucs_status_t uct_src_iface_find_ip(const char *if_name, struct in_addr *ip_p,
                                          int *is_loopback_p)
{
    struct ifaddrs *ifaddrs, *ifa;
    ucs_status_t status = UCS_ERR_NO_DEVICE;

    if (getifaddrs(&ifaddrs) != 0) {
        ucs_error("src: getifaddrs() failed: %m");
        return UCS_ERR_IO_ERROR;
    }
    for (ifa = ifaddrs; ifa != NULL; ifa = ifa->ifa_next) {
        if ((ifa->ifa_addr != NULL) && (ifa->ifa_addr->sa_family == AF_INET) &&
            !strcmp(ifa->ifa_name, if_name)) {
            *ip_p          = ((struct sockaddr_in*)ifa->ifa_addr)->sin_addr;
            *is_loopback_p = !!(ifa->ifa_flags & IFF_LOOPBACK);
            status         = UCS_OK;
            break;
        }
    }
    freeifaddrs(ifaddrs);
    if (status != UCS_OK) {
        ucs_error("src: interface '%s' has no IPv4 address", if_name);
    }
    return status;
}

static ucs_mpool_ops_t uct_src_mpool_ops = {
    .chunk_alloc   = ucs_mpool_chunk_malloc,
    .chunk_release = ucs_mpool_chunk_free,
    .obj_init      = NULL,
    .obj_cleanup   = NULL,
    .obj_str       = NULL
};

/* Chunks of an attached iface's pools: in the arena it shares with the node agent, which then
 * reads the send buffers and writes the receive buffers without a cross-memory copy; in
 * ordinary memory once the arena is full (the agent copies those). A chunk starts with this. */
typedef struct {
    size_t size;        /* bytes, this header included */
    int    shared;      /* taken from the arena */
    char   pad[UCS_SYS_CACHE_LINE_SIZE - sizeof(size_t) - sizeof(int)];
} uct_src_chunk_hdr_t;

static ucs_status_t uct_src_arena_chunk_alloc(ucs_mpool_t *mp, size_t *size_p, void **chunk_p)
{
    uct_src_iface_t *iface = *(uct_src_iface_t**)ucs_mpool_priv(mp);
    size_t size            = *size_p + sizeof(uct_src_chunk_hdr_t);
    uct_src_chunk_hdr_t *hdr;
    int shared;

    hdr    = srcnic_nic_mem_alloc(iface->nic, size);
    shared = (hdr != NULL);
    if (!shared) {
        hdr = ucs_malloc(size, ucs_mpool_name(mp));
        if (hdr == NULL) {
            return UCS_ERR_NO_MEMORY;
        }
        ucs_debug("src: the arena shared with the agent is full: pool %s uses private memory "
                  "(UCX_SRC_AGENT_ARENA)", ucs_mpool_name(mp));
    }
    hdr->size   = size;
    hdr->shared = shared;
    *size_p     = size - sizeof(*hdr);
    *chunk_p    = hdr + 1;
    return UCS_OK;
}

static void uct_src_arena_chunk_release(ucs_mpool_t *mp, void *chunk)
{
    uct_src_iface_t *iface   = *(uct_src_iface_t**)ucs_mpool_priv(mp);
    uct_src_chunk_hdr_t *hdr = (uct_src_chunk_hdr_t*)chunk - 1;

    if (hdr->shared) {
        srcnic_nic_mem_free(iface->nic, hdr, hdr->size);
    } else {
        ucs_free(hdr);
    }
}

static ucs_mpool_ops_t uct_src_arena_mpool_ops = {
    .chunk_alloc   = uct_src_arena_chunk_alloc,
    .chunk_release = uct_src_arena_chunk_release,
    .obj_init      = NULL,
    .obj_cleanup   = NULL,
    .obj_str       = NULL
};

static ucs_mpool_ops_t *uct_src_iface_mpool_ops(uct_src_iface_t *iface)
{
    return iface->attached ? &uct_src_arena_mpool_ops : &uct_src_mpool_ops;
}

/* Attaches to the node agent (MODE auto or agent); logs why not. */
static ucs_status_t uct_src_iface_attach(uct_src_iface_t *iface,
                                         const uct_src_iface_config_t *config,
                                         uct_src_md_t *md)
{
    srcnic_attach_config_t attach;
    srcnic_status_t status;
    char why[256];

    srcnic_attach_config_init(&attach);
    ucs_strncpy_zero(attach.socket, config->agent_socket, sizeof(attach.socket));
    inet_ntop(AF_INET, &iface->ip, attach.bind_addr, sizeof(attach.bind_addr));
    attach.job_key = config->job_key;
    attach.arena   = config->agent_arena;
    attach.direct_reads = config->agent_direct_read ? 1 : 0;
    attach.pd      = md->pd;
    status         = srcnic_nic_attach(&attach, &iface->nic, why, sizeof(why));
    if (status == SRCNIC_OK) {
        iface->attached = 1;
        ucs_info("src: %s attached to the node agent on %s", iface->if_name, attach.socket);
        return UCS_OK;
    }
    if (config->mode == UCT_SRC_MODE_AGENT) {
        ucs_error("src: UCX_SRC_MODE=agent, but %s: start the node agent on this node (srcd, or "
                  "srcrun --agent), or set UCX_SRC_MODE=auto or embedded", why);
    } else {
        ucs_info("src: %s: %s runs its engine in this process (UCX_SRC_MODE=auto)", why,
                 iface->if_name);
    }
    return (ucs_status_t)status;
}

/* The engine's messages, in UCX's log at UCX's level. */
static void uct_src_log_handler(srcnic_log_level_t level, const char *file, int line,
                                const char *msg, void *arg)
{
    static const ucs_log_level_t ucs_levels[] = {
        [SRCNIC_LOG_LEVEL_ERROR] = UCS_LOG_LEVEL_ERROR,
        [SRCNIC_LOG_LEVEL_WARN]  = UCS_LOG_LEVEL_WARN,
        [SRCNIC_LOG_LEVEL_INFO]  = UCS_LOG_LEVEL_INFO,
        [SRCNIC_LOG_LEVEL_DEBUG] = UCS_LOG_LEVEL_DEBUG,
        [SRCNIC_LOG_LEVEL_TRACE] = UCS_LOG_LEVEL_TRACE
    };

    ucs_log_dispatch(file, line, "srcnic", ucs_levels[level],
                     &ucs_global_opts.log_component, "%s", msg);
}

static void uct_src_log_set_handler(void)
{
    srcnic_log_set_handler(uct_src_log_handler, NULL);
}

/* Unless SRCNIC_LOG_LEVEL gives the engine a level of its own (it then writes to stderr), the
 * engine logs through UCX: UCX_LOG_LEVEL (as it stands when an interface opens) sets what it
 * reports, and UCX's log file and filters apply. */
static void uct_src_log_attach(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    ucs_log_level_t level;

    if (getenv("SRCNIC_LOG_LEVEL") != NULL) {
        return;
    }
    pthread_once(&once, uct_src_log_set_handler);
    level = ucs_global_opts.log_component.log_level;
    srcnic_log_set_level((level >= UCS_LOG_LEVEL_TRACE) ? SRCNIC_LOG_LEVEL_TRACE :
                         (level >= UCS_LOG_LEVEL_DEBUG) ? SRCNIC_LOG_LEVEL_DEBUG :
                         (level >= UCS_LOG_LEVEL_INFO)  ? SRCNIC_LOG_LEVEL_INFO :
                         (level >= UCS_LOG_LEVEL_WARN)  ? SRCNIC_LOG_LEVEL_WARN :
                                                          SRCNIC_LOG_LEVEL_ERROR);
}

static UCS_CLASS_INIT_FUNC(uct_src_iface_t, uct_md_h tl_md, uct_worker_h worker,
                           const uct_iface_params_t *params,
                           const uct_iface_config_t *tl_config)
{
    uct_src_iface_config_t *config = ucs_derived_of(tl_config, uct_src_iface_config_t);
    uct_src_md_t *md               = ucs_derived_of(tl_md, uct_src_md_t);
    const char *dev_name;
    srcnic_config_t nic_config;
    srcnic_qp_config_t qp_config;
    size_t align, align_offset, payload_offset;
    ucs_async_context_t *async;
    ucs_status_t status;

    UCT_CHECK_PARAM(params->field_mask & UCT_IFACE_PARAM_FIELD_OPEN_MODE,
                    "UCT_IFACE_PARAM_FIELD_OPEN_MODE is not defined");
    if (!(params->open_mode & UCT_IFACE_OPEN_MODE_DEVICE)) {
        ucs_error("src: only UCT_IFACE_OPEN_MODE_DEVICE is supported");
        return UCS_ERR_UNSUPPORTED;
    }

    UCS_CLASS_CALL_SUPER_INIT(uct_base_iface_t, &uct_src_iface_ops,
                              &uct_src_iface_internal_ops, tl_md, worker, params,
                              tl_config UCS_STATS_ARG(
                                  (params->field_mask & UCT_IFACE_PARAM_FIELD_STATS_ROOT) ?
                                  params->stats_root : NULL)
                              UCS_STATS_ARG(params->mode.device.dev_name));

    /* The base class has just pointed every AM id at UCX's stub handler: remember it, to tell
     * a registered id from one nobody registered (uct_src_iface_handle_recv). */
    self->am_stub_cb     = self->super.am[0].cb;
    self->rx_am_dropped  = 0;
    self->nic            = NULL;
    self->qp             = NULL;
    self->async_timer_id = -1;
    self->progress_calls = 0;
    self->async_seen     = 0;
    self->async_runs     = 0;
    self->tx_coalesce    = ucs_time_from_sec(config->tx_coalesce);
    /* As if the last doorbell rang one coalescing window ago, so that the first send rings it
     * (modular: now - tx_doorbell is tx_coalesce at once, however little the clock has run
     * since the machine started). */
    self->tx_doorbell    = ucs_get_time() - self->tx_coalesce;
    self->tx_last_post   = self->tx_doorbell;
    self->tx_hold        = 0;
    self->tx_post_rang   = 0;
    self->tx_held        = 0;
    self->tx_burst       = 0;
    self->tx_score       = 0;
    self->tx_outstanding = 0;
    self->rx_posted      = 0;
    self->pending_ep     = NULL;
    self->next_ep_tag    = 0;
    ucs_list_head_init(&self->linger_eps);

    if (!ucs_is_pow2(config->tx_queue_len) || !ucs_is_pow2(config->rx_queue_len) ||
        (config->tx_queue_len > UINT16_MAX + 1) || (config->rx_queue_len > UINT16_MAX + 1)) {
        ucs_error("src: UCX_SRC_TX_QUEUE_LEN=%u and UCX_SRC_RX_QUEUE_LEN=%u must be powers of "
                  "2 up to 65536", config->tx_queue_len, config->rx_queue_len);
        return UCS_ERR_INVALID_PARAM;
    }
    if ((config->rx_max_bufs >= 0) && ((unsigned)config->rx_max_bufs < config->rx_queue_len)) {
        ucs_error("src: UCX_SRC_RX_MAX_BUFS=%d is less than UCX_SRC_RX_QUEUE_LEN=%u: set it to "
                  "-1 (unlimited) or at least %u", config->rx_max_bufs, config->rx_queue_len,
                  config->rx_queue_len);
        return UCS_ERR_INVALID_PARAM;
    }
    if ((config->seg_size < ucs_max(64, SRCNIC_WQE_INLINE_MAX)) ||
        (config->seg_size > UCS_MBYTE * 4)) {
        ucs_error("src: UCX_SRC_SEG_SIZE=%zu must be between %d and 4m", config->seg_size,
                  ucs_max(64, SRCNIC_WQE_INLINE_MAX));
        return UCS_ERR_INVALID_PARAM;
    }
    if ((params->field_mask & UCT_IFACE_PARAM_FIELD_AM_ALIGNMENT) &&
        !ucs_is_pow2(params->am_alignment)) {
        ucs_error("src: AM alignment %zu is not a power of 2", params->am_alignment);
        return UCS_ERR_INVALID_PARAM;
    }

    dev_name = params->mode.device.dev_name;
    ucs_strncpy_zero(self->if_name, dev_name, sizeof(self->if_name));
    status = uct_src_iface_find_ip(self->if_name, &self->ip, &self->is_loopback);
    if (status != UCS_OK) {
        return status;
    }

    uct_src_log_attach();
    srcnic_config_init(&nic_config);
    inet_ntop(AF_INET, &self->ip, nic_config.bind_addr, sizeof(nic_config.bind_addr));
    nic_config.mtu             = config->mtu;
    nic_config.window          = config->window;
    nic_config.rto_us          = (uint32_t)ucs_max(config->rto * 1e6, 1);
    nic_config.rto_max_us      = (uint32_t)ucs_max(config->rto_max * 1e6, 1);
    nic_config.retry_count     = config->retry_count;
    nic_config.peer_timeout_ms = (uint32_t)ucs_max(config->peer_timeout * 1e3, 1);
    nic_config.rnr_delay_us    = (uint32_t)ucs_max(config->rnr_delay * 1e6, 1);
    nic_config.max_connections = config->max_connections;
    nic_config.num_dci         = config->num_dci;
    nic_config.dc_targets      = config->dc_targets;
    nic_config.dc_quota        = (config->dc_policy == UCT_SRC_DC_POLICY_DCS) ? 0 :
                                 config->dc_quota;
    nic_config.dc_promote      = config->dc_promote;
    nic_config.max_inflight    = config->max_inflight;
    nic_config.rx_buffers      = config->rx_buffers;
    nic_config.sock_buf        = (uint32_t)ucs_min(config->sock_buf, UINT32_MAX);
    nic_config.peer_sockets    = config->peer_sockets;
    nic_config.job_key         = config->job_key;
    nic_config.fault_drop      = config->fault_drop;
    nic_config.fault_corrupt   = config->fault_corrupt;
    nic_config.fault_seed      = config->fault_seed;
    nic_config.pd              = md->pd;
    /* Checked in every mode, so a setting that would stop an embedded engine is reported
     * also where the node agent's engine serves this iface. */
    if (srcnic_config_check(&nic_config) != SRCNIC_OK) {
        ucs_error("src: an engine setting for %s is out of range (above): correct the "
                  "UCX_SRC_ variable of that name in capitals", self->if_name);
        return UCS_ERR_INVALID_PARAM;
    }

    self->attached = 0;
    if (config->mode != UCT_SRC_MODE_EMBEDDED) {
        status = uct_src_iface_attach(self, config, md);
        if (status == UCS_OK) {
            goto engine_ready;
        } else if (config->mode == UCT_SRC_MODE_AGENT) {
            return status;
        }
    }

    status = (ucs_status_t)srcnic_nic_create(&nic_config, &self->nic);
    if (status != UCS_OK) {
        ucs_error("src: failed to start the engine on %s (%s): %s; check the UCX_SRC_* "
                  "settings above", self->if_name, nic_config.bind_addr,
                  ucs_status_string(status));
        return status;
    }

engine_ready:
    /* UCP prefers transports whose max_num_eps covers the job (ucp_is_scalable_transport):
     * beyond its budget an embedded engine serves peers over DC, unless DC is off here, and
     * then the budget is all it can serve. The node agent's budget is its own and per node. */
    self->max_num_eps = (!self->attached &&
                         ((config->num_dci == 0) || (config->dc_targets == 0))) ?
                        config->max_connections : SIZE_MAX;
    srcnic_qp_config_init(&qp_config);
    qp_config.sq_size = config->tx_queue_len;
    qp_config.rq_size = config->rx_queue_len;
    status = (ucs_status_t)srcnic_qp_create(self->nic, &qp_config, &self->qp);
    if (status != UCS_OK) {
        goto err_destroy_nic;
    }

    self->seg_size      = config->seg_size;
    self->max_short     = SRCNIC_WQE_INLINE_MAX;
    self->tx_max        = config->tx_queue_len;
    self->rx_max        = config->rx_queue_len;
    self->rx_headroom   = (params->field_mask & UCT_IFACE_PARAM_FIELD_RX_HEADROOM) ?
                          params->rx_headroom : 0;
    self->release_desc.cb = uct_src_iface_release_desc;
    ucs_arbiter_init(&self->arbiter);

    payload_offset = sizeof(uct_recv_desc_t*) + self->rx_headroom;
    status = uct_iface_param_am_alignment(params, self->seg_size, payload_offset,
                                          payload_offset, &align, &align_offset);
    if (status != UCS_OK) {
        goto err_cleanup_arbiter;
    }
    /* Receive buffers: those posted and those UCP keeps, unlimited by default (as UCX's own
     * transports): a cap can leave a receiver unable to take the message that would let it
     * release what UCP keeps. */
    status = uct_src_mpool_init(&self->rx_mp, sizeof(self), payload_offset + self->seg_size, align_offset,
                            align, 64,
                            (config->rx_max_bufs < 0) ? UINT_MAX : (unsigned)config->rx_max_bufs,
                            uct_src_iface_mpool_ops(self), "src_rx_desc");
    if (status != UCS_OK) {
        goto err_cleanup_arbiter;
    }
    *(uct_src_iface_t**)ucs_mpool_priv(&self->rx_mp) = self;
    /* bcopy buffers, seg_size each, in chunks of 8: a job's first bcopy (a rendezvous RTS, an
     * eager message) grows the pool and faults the chunk in on its way out, and a chunk of 64
     * (2 MB with 32 KiB fragments) made the first iteration of a 256 KiB MPI ping-pong take
     * 0.60 ms (half its round trip) instead of 0.48 (perf/results/2026-12-02-lat-warmup). */
    status = uct_src_mpool_init(&self->tx_mp, sizeof(self), sizeof(uct_src_send_desc_t) + self->seg_size,
                            sizeof(uct_src_send_desc_t), UCS_SYS_CACHE_LINE_SIZE, 8,
                            self->tx_max, uct_src_iface_mpool_ops(self), "src_tx_desc");
    if (status != UCS_OK) {
        goto err_cleanup_rx_mp;
    }
    *(uct_src_iface_t**)ucs_mpool_priv(&self->tx_mp) = self;
    /* Short, zero-copy and check sends need no bcopy buffer, only room for an am_zcopy
     * header: taking theirs from tx_mp made a job's first message fault in a chunk of 64
     * buffers (2 MB with 32 KiB fragments) on its way out. Both pools are bounded together
     * by tx_max (uct_src_iface_has_tx_resources). */
    status = uct_src_mpool_init(&self->tx_small_mp, sizeof(self),
                            sizeof(uct_src_send_desc_t) + SRCNIC_WQE_INLINE_MAX,
                            sizeof(uct_src_send_desc_t), UCS_SYS_CACHE_LINE_SIZE, 64,
                            self->tx_max, uct_src_iface_mpool_ops(self), "src_tx_small_desc");
    if (status != UCS_OK) {
        goto err_cleanup_tx_mp;
    }
    *(uct_src_iface_t**)ucs_mpool_priv(&self->tx_small_mp) = self;
    uct_src_iface_post_recvs(self);
    if (self->rx_posted != self->rx_max) {
        ucs_error("src: could not post %u receive buffers", self->rx_max);
        status = UCS_ERR_NO_MEMORY;
        goto err_cleanup_tx_small_mp;
    }

    /* The agent acknowledges and retransmits for an attached iface: no background tick. */
    async = self->super.worker->async;
    if ((async != NULL) && !self->attached) {
        status = ucs_async_add_timer(async->mode, ucs_time_from_sec(config->async_interval),
                                     uct_src_iface_async_progress, self, async,
                                     &self->async_timer_id);
        if (status != UCS_OK) {
            ucs_error("src: failed to add the background progress timer: %s",
                      ucs_status_string(status));
            goto err_cleanup_tx_small_mp;
        }
    }
    pthread_mutex_lock(&md->ifaces_lock);
    ucs_list_add_tail(&md->ifaces, &self->md_elem);
    pthread_mutex_unlock(&md->ifaces_lock);
    ucs_debug("src: iface %p on %s (%s) qpn %u seg_size %zu", self, self->if_name,
              self->attached ? "node agent" : "embedded engine", srcnic_qp_num(self->qp),
              self->seg_size);
    return UCS_OK;

err_cleanup_tx_small_mp:
    ucs_mpool_cleanup(&self->tx_small_mp, 0);
err_cleanup_tx_mp:
    ucs_mpool_cleanup(&self->tx_mp, 0);
err_cleanup_rx_mp:
    ucs_mpool_cleanup(&self->rx_mp, 0);
err_cleanup_arbiter:
    ucs_arbiter_cleanup(&self->arbiter);
    srcnic_qp_destroy(self->qp);
err_destroy_nic:
    srcnic_nic_destroy(self->nic);
    return status;
}

static UCS_CLASS_CLEANUP_FUNC(uct_src_iface_t)
{
    uct_src_md_t *md = ucs_derived_of(self->super.md, uct_src_md_t);
    uct_src_ep_t *ep, *tmp;

    /* First, before anything takes the async lock: an invalidation holds the list's lock
     * while it takes the ifaces' async locks. */
    pthread_mutex_lock(&md->ifaces_lock);
    ucs_list_del(&self->md_elem);
    pthread_mutex_unlock(&md->ifaces_lock);

    if (self->async_timer_id >= 0) {
        ucs_async_remove_handler(self->async_timer_id, 1);
    }
    /* Endpoints destroyed with sends in flight wait for completions that will not come now. */
    ucs_list_for_each_safe(ep, tmp, &self->linger_eps, linger_elem) {
        uct_src_ep_free_lingering(ep);
    }
    uct_base_iface_progress_disable(&self->super.super,
                                    UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    /* Destroying the QP completes nothing we would still read; the pools' chunks may be the
     * engine's (the arena shared with the agent), so the engine goes last. */
    srcnic_qp_destroy(self->qp);
    ucs_mpool_cleanup(&self->tx_small_mp, 0);
    ucs_mpool_cleanup(&self->tx_mp, 0);
    ucs_mpool_cleanup(&self->rx_mp, 0);
    ucs_arbiter_cleanup(&self->arbiter);
    srcnic_nic_destroy(self->nic);
}

UCS_CLASS_DEFINE(uct_src_iface_t, uct_base_iface_t);

static UCS_CLASS_DEFINE_NEW_FUNC(uct_src_iface_t, uct_iface_t, uct_md_h, uct_worker_h,
                                 const uct_iface_params_t*, const uct_iface_config_t*);
static UCS_CLASS_DEFINE_DELETE_FUNC(uct_src_iface_t, uct_iface_t);

static uct_iface_ops_t uct_src_iface_ops = {
    .ep_put_short             = uct_src_ep_put_short,
    .ep_put_bcopy             = uct_src_ep_put_bcopy,
    .ep_put_zcopy             = uct_src_ep_put_zcopy,
    .ep_get_bcopy             = uct_src_ep_get_bcopy,
    .ep_get_zcopy             = uct_src_ep_get_zcopy,
    .ep_am_short              = uct_src_ep_am_short,
    .ep_am_short_iov          = uct_base_ep_am_short_iov,
    .ep_am_bcopy              = uct_src_ep_am_bcopy,
    .ep_am_zcopy              = uct_src_ep_am_zcopy,
    .ep_pending_add           = uct_src_ep_pending_add,
    .ep_pending_purge         = uct_src_ep_pending_purge,
    .ep_flush                 = uct_src_ep_flush,
    .ep_fence                 = uct_base_ep_fence,
    .ep_check                 = uct_src_ep_check,
    .ep_create                = UCS_CLASS_NEW_FUNC_NAME(uct_src_ep_t),
    .ep_destroy               = UCS_CLASS_DELETE_FUNC_NAME(uct_src_ep_t),
    .iface_flush              = uct_src_iface_flush,
    .iface_fence              = uct_base_iface_fence,
    .iface_progress_enable    = uct_base_iface_progress_enable,
    .iface_progress_disable   = uct_base_iface_progress_disable,
    .iface_progress           = uct_src_iface_progress,
    .iface_event_fd_get       = uct_src_iface_event_fd_get,
    .iface_event_arm          = uct_src_iface_event_arm,
    .iface_close              = UCS_CLASS_DELETE_FUNC_NAME(uct_src_iface_t),
    .iface_query              = uct_src_iface_query,
    .iface_get_device_address = uct_src_iface_get_device_address,
    .iface_get_address        = uct_src_iface_get_address,
    .iface_is_reachable       = uct_src_iface_is_reachable
};

/* What an active message of one fragment costs beyond the rendezvous path's data movement, per
 * byte: the receiver copies it from the engine's packet buffer into a posted receive buffer and
 * UCP copies it again into the user's buffer (rendezvous places the data straight into the
 * user's buffer), and bcopy copies it once more at the sender. Measured as MPI bandwidth on
 * loopback (perf/README.md): eager 16 KiB fragments 1.1-1.6 GB/s at 64-128 KiB, rendezvous
 * 1.7-2.8. Taken as one copy at this speed, which keeps the threshold below 64 KiB (about
 * 60 KB with the default 32 KiB fragments): 64 KiB tagged messages sent eagerly ran at 0.4 of
 * rendezvous' bandwidth (perf/results/2026-11-27-streams/NOTES.md). */
#define UCT_SRC_EAGER_COPY_BW (2700.0 * UCS_MBYTE)
/* The same across a network interface, where a fragment also crosses the path as datagrams of
 * the interface's size (23 per 32 KiB fragment on a 1500-byte path), each received and
 * checked on its own before the fragment is copied out; rendezvous places its data as it
 * checks it. Across two namespace nodes (1500-byte veth) 64 KiB messages sent eagerly ran at
 * 0.83 of UCX tcp's osu_bw, by rendezvous at 1.03 (and 0.63 of its latency, eager 0.51): this
 * puts the threshold at about 55 KB instead of 81 (perf/results/2026-11-27-coalesce/NOTES.md). */
#define UCT_SRC_EAGER_COPY_BW_PATH (1800.0 * UCS_MBYTE)

/* UCP (protocols v1) models eager messages as bandwidth plus the operation's send overheads per
 * fragment (max_bcopy bytes), and puts its automatic rendezvous threshold where rendezvous,
 * with its extra round trip, becomes the faster. The base estimate's overhead (1 us) leaves out
 * the fragment's copies; with them, the threshold falls from hundreds of KiB, where eager
 * messages ran at half of rendezvous' speed, to about 60 KiB on loopback. */
static ucs_status_t uct_src_iface_estimate_perf(uct_iface_h tl_iface, uct_perf_attr_t *perf_attr)
{
    uct_src_iface_t *iface = ucs_derived_of(tl_iface, uct_src_iface_t);
    ucs_status_t status;

    status = uct_base_iface_estimate_perf(tl_iface, perf_attr);
    if ((status != UCS_OK) ||
        !(perf_attr->field_mask & UCT_PERF_ATTR_FIELD_OPERATION) ||
        !(perf_attr->field_mask & UCT_PERF_ATTR_FIELD_SEND_PRE_OVERHEAD) ||
        ((perf_attr->operation != UCT_EP_OP_AM_BCOPY) &&
         (perf_attr->operation != UCT_EP_OP_AM_ZCOPY))) {
        return status;
    }

    perf_attr->send_pre_overhead += iface->seg_size / (iface->is_loopback ?
                                                       UCT_SRC_EAGER_COPY_BW :
                                                       UCT_SRC_EAGER_COPY_BW_PATH);
    return UCS_OK;
}

static uct_iface_internal_ops_t uct_src_iface_internal_ops = {
    .iface_estimate_perf = uct_src_iface_estimate_perf,
    .iface_vfs_refresh   = (uct_iface_vfs_refresh_func_t)ucs_empty_function,
    .ep_query            = (uct_ep_query_func_t)ucs_empty_function_return_unsupported,
    .ep_invalidate       = uct_src_ep_invalidate,
    UCT_SRC_IFACE_INTERNAL_OPS_VERSIONED
};

UCT_TL_DEFINE_ENTRY(&uct_src_component, src, uct_src_query_devices, uct_src_iface_t,
                    UCT_SRC_CONFIG_PREFIX, uct_src_iface_config_table, uct_src_iface_config_t);

/* Registration, as UCT_SINGLE_TL_INIT would, unless the UCX this process runs is of another
 * minor version than the one the module was built for (compat.h). */
static int uct_src_registered;

static void UCS_F_CTOR uct_src_init(void)
{
    if (!uct_src_ucx_version_matches()) {
        return;
    }
    uct_component_register(&uct_src_component);
    uct_tl_register(&uct_src_component, &UCT_TL_NAME(src));
    uct_src_registered = 1;
}

static void UCS_F_DTOR uct_src_cleanup(void)
{
    if (!uct_src_registered) {
        return;
    }
    uct_tl_unregister(&UCT_TL_NAME(src));
    uct_component_unregister(&uct_src_component);
}
