/**
 * The "src" UCT transport: UCX active messages, RMA and error handling over the srcnic
 * engine (include/srcnic/). Types shared by the component/MD (uct_src_md.c), the interface
 * (uct_src_iface.c) and the endpoint (uct_src_ep.c).
 *
 * Addressing (CONNECT_TO_IFACE): the device address carries the interface's IPv4 address (and,
 * for loopback, the host and network-namespace identity, so that loopback is reachable only
 * from the same namespace); the interface address carries the engine's UDP port, the QP number,
 * the NIC incarnation and the NIC secret, which a connection's first packets must prove
 * (src/wire/PROTOCOL.md §7): only a process given the address through UCX's address exchange
 * gets in. An endpoint is (remote NIC, remote QP) plus the engine's cached connection slot:
 * creating one sends nothing.
 */
#ifndef UCT_SRC_H
#define UCT_SRC_H

#include "compat.h"

#include <srcnic/srcnic.h>

#include <uct/base/uct_iface.h>
#include <ucs/sys/math.h>
#include <ucs/time/time.h>
#include <uct/base/uct_md.h>
#include <ucs/datastruct/arbiter.h>
#include <ucs/datastruct/khash.h>
#include <ucs/datastruct/mpool.h>

#include <net/if.h>
#include <pthread.h>
#include <netinet/in.h>

#define UCT_SRC_NAME            "src"
#define UCT_SRC_CONFIG_PREFIX   "SRC_"
#define UCT_SRC_AM_ID_KEEPALIVE 0xffu      /* immediate of an ep_check probe: dropped on arrival */
#define UCT_SRC_MAX_IOV         (SRCNIC_WQE_MAX_SGE - 1)   /* one gather entry holds the header */
#define UCT_SRC_TX_HOLD_SCORE   2      /* bursts are held from this score (uct_src_iface.c) */
#define UCT_SRC_TX_LATE_COST    8      /* ... which a late burst lowers by this much */
#define UCT_SRC_TX_SCORE_MAX    16     /* ... and which stays within +-this */


typedef struct uct_src_md_config {
    uct_md_config_t super;
} uct_src_md_config_t;


typedef struct uct_src_region uct_src_region_t;

/* A registered range: registrations of the same range share one region record. */
typedef struct uct_src_region_key {
    uintptr_t address;
    size_t    length;
} uct_src_region_key_t;

static UCS_F_ALWAYS_INLINE khint32_t uct_src_region_key_hash(uct_src_region_key_t key)
{
    uint64_t v = (uint64_t)key.address ^ ((uint64_t)key.length * 0x9e3779b97f4a7c15ull);

    return kh_int64_hash_func(v);
}

#define uct_src_region_key_equal(_a, _b)     (((_a).address == (_b).address) && ((_a).length == (_b).length))

KHASH_TYPE(uct_src_regions, uct_src_region_key_t, uct_src_region_t*)

typedef struct uct_src_md {
    uct_md_t          super;
    srcnic_pd_t       *pd;          /* regions every src iface of this process serves */
    pthread_mutex_t   lock;
    khash_t(uct_src_regions) regions; /* registered ranges (address, length) */
    pthread_mutex_t   ifaces_lock;  /* guards ifaces; taken before any iface's async lock */
    ucs_list_link_t   ifaces;       /* the open ifaces of this md: their engines serve pd */
} uct_src_md_t;

typedef struct uct_src_mem {
    srcnic_mr_t       *mr;
    uct_src_region_t  *region;
    uint64_t          access;       /* UCT_MD_MEM_ACCESS_* it was registered with */
    int               packed_invalidate; /* its rkey was packed for invalidation (atomic) */
} uct_src_mem_t;


enum {
    UCT_SRC_DEV_ADDR_FLAG_LOOPBACK = UCS_BIT(0)
};

typedef struct uct_src_device_addr {
    uint8_t                   flags;     /* UCT_SRC_DEV_ADDR_FLAG_* */
    uint8_t                   family;    /* AF_INET */
    uint8_t                   ip[4];     /* network byte order */
    uct_iface_local_addr_ns_t local;     /* host and net namespace (loopback only) */
} UCS_S_PACKED uct_src_device_addr_t;


typedef struct uct_src_iface_addr {
    uint16_t port;                       /* engine UDP port, host byte order */
    uint32_t qpn;                        /* the iface's QP on that engine */
    uint64_t incarnation;                /* engine incarnation: a restart changes it */
    uint64_t secret;                     /* engine secret: proves a connection's first packets;
                                            published nowhere but in this address */
} UCS_S_PACKED uct_src_iface_addr_t;


/* Where the engine runs (MODE). */
typedef enum uct_src_mode {
    UCT_SRC_MODE_AUTO,        /* the node agent if one answers, else in this process */
    UCT_SRC_MODE_EMBEDDED,    /* in this process */
    UCT_SRC_MODE_AGENT,       /* the node agent (srcd), or fail */
    UCT_SRC_MODE_LAST
} uct_src_mode_t;

/* How a DCI is shared (DC_POLICY), after UCX's dc_mlx5 policies of the same names. */
typedef enum uct_src_dc_policy {
    UCT_SRC_DC_POLICY_DCS,        /* a DCI stays with its destination while it has work */
    UCT_SRC_DC_POLICY_DCS_QUOTA,  /* ... at most DC_QUOTA requests while others wait */
    UCT_SRC_DC_POLICY_LAST
} uct_src_dc_policy_t;

typedef struct uct_src_iface_config {
    uct_iface_config_t super;
    int                mode;             /* MODE: uct_src_mode_t */
    char               *agent_socket;    /* AGENT_SOCKET: the agent's socket */
    size_t             agent_arena;      /* AGENT_ARENA: memory shared with the agent, bytes */
    int                agent_direct_read; /* AGENT_DIRECT_READ: copy gets from the agent's
                                            other processes here */
    size_t             seg_size;         /* SEG_SIZE: bcopy/receive buffer, bytes */
    unsigned           tx_queue_len;     /* TX_QUEUE_LEN: sends in flight per iface */
    unsigned           rx_queue_len;     /* RX_QUEUE_LEN: receive buffers posted */
    int                rx_max_bufs;      /* RX_MAX_BUFS: receive buffers in all, -1 = unlimited */
    size_t             mtu;              /* MTU: datagram size, bytes; 0 = automatic */
    unsigned           window;           /* WINDOW: packets in flight per connection */
    double             rto;              /* RTO: initial retransmission timeout, s */
    double             rto_max;          /* RTO_MAX: backoff ceiling, s */
    unsigned           retry_count;      /* RETRY_COUNT: timeouts before a peer is dead */
    double             peer_timeout;     /* PEER_TIMEOUT: s of silence before a peer is dead */
    double             rnr_delay;        /* RNR_DELAY: first receiver-not-ready back-off, s */
    unsigned           max_connections;  /* MAX_CONNECTIONS: the engine's connection budget */
    unsigned           num_dci;          /* NUM_DCI: DC initiators */
    unsigned           dc_targets;       /* DC_TARGETS: DC target contexts */
    int                dc_policy;        /* DC_POLICY: uct_src_dc_policy_t */
    unsigned           dc_quota;         /* DC_QUOTA: requests per DCI while others wait */
    unsigned           dc_promote;       /* DC_PROMOTE: requests in 10 ms that earn a connection */
    unsigned           max_inflight;     /* MAX_INFLIGHT: engine message descriptors */
    unsigned           rx_buffers;       /* RX_BUFFERS: engine packet buffers */
    size_t             sock_buf;         /* SOCK_BUF: socket buffer, bytes */
    unsigned           peer_sockets;     /* PEER_SOCKETS: connected sockets for busy peers */
    unsigned           job_key;          /* JOB_KEY: peers must use the same key */
    double             async_interval;   /* ASYNC_INTERVAL: background progress period, s */
    double             tx_coalesce;      /* TX_COALESCE: sends this soon after a doorbell wait, s */
    double             fault_drop;       /* FAULT_DROP: test only, receive loss probability */
    double             fault_corrupt;    /* FAULT_CORRUPT: test only, corruption probability */
    unsigned long      fault_seed;       /* FAULT_SEED: test only */
} uct_src_iface_config_t;


/* A send in flight: what its completion must do. Followed by seg_size buffer bytes. */
typedef struct uct_src_send_desc {
    ucs_list_link_t       list;          /* in ep->outstanding while in flight */
    struct uct_src_ep     *ep;           /* NULL: an iface-level probe */
    uct_completion_t      *comp;         /* user completion, or NULL */
    uct_unpack_callback_t unpack_cb;     /* get_bcopy: where the read bytes go */
    void                  *unpack_arg;
    uint32_t              length;        /* get_bcopy: bytes read */
    uint32_t              sn;            /* ep->tx_posted when posted (flush) */
} uct_src_send_desc_t;


typedef struct uct_src_iface {
    uct_base_iface_t      super;
    srcnic_nic_t          *nic;          /* the engine: in this process, or the node agent's */
    int                   attached;      /* nic is an attachment to the node agent */
    size_t                max_num_eps;   /* peers it can serve: its budget if embedded without
                                            DC (the budget is a wall), else unlimited */
    srcnic_qp_t           *qp;           /* this iface's channel to it */
    char                  if_name[IFNAMSIZ];
    struct in_addr        ip;            /* bound address */
    int                   is_loopback;
    size_t                seg_size;
    size_t                max_short;     /* inline limit, header included */
    unsigned              rx_headroom;   /* UCP's headroom before each received payload */
    uct_recv_desc_t       release_desc;  /* how UCP returns a kept receive buffer */
    ucs_mpool_t           rx_mp;         /* receive buffers */
    ucs_mpool_t           tx_mp;         /* send descriptors with their bcopy buffers */
    ucs_mpool_t           tx_small_mp;   /* send descriptors of the other sends (see ep.c) */
    unsigned              tx_max;        /* sends allowed in flight */
    unsigned              tx_outstanding;/* sends posted and not completed */
    unsigned              rx_max;        /* receive buffers to keep posted */
    unsigned              rx_posted;     /* receive buffers posted */
    ucs_arbiter_t         arbiter;       /* pending requests, one group per ep */
    struct uct_src_ep     *pending_ep;   /* ep whose pending request is being dispatched */
    uint32_t              next_ep_tag;   /* labels endpoints' WQEs for per-ep cancellation */
    ucs_list_link_t       linger_eps;    /* destroyed eps waiting for their sends to complete */
    int                   async_timer_id;/* background progress timer, or -1 */
    unsigned              progress_calls;/* the application's progress calls (wraps) */
    unsigned              async_seen;    /* progress_calls at the background timer's last tick */
    unsigned long         async_runs;    /* background ticks that ran the engine (tests) */
    ucs_time_t            tx_coalesce;   /* TX_COALESCE */
    ucs_time_t            tx_doorbell;   /* when the last doorbell's transmission ended */
    ucs_time_t            tx_last_post;  /* when the last send's post returned */
    int                   tx_hold;       /* sends soon after a post's doorbell wait for the
                                            burst: bursts have been followed by progress
                                            promptly (see tx_post_rang) */
    int                   tx_held;       /* a send posted since the last transmission waits */
    int                   tx_post_rang;  /* the last doorbell was a post's own, and no progress
                                            call has returned since: only a send close behind
                                            such a doorbell continues its burst and may wait */
    int                   tx_burst;      /* sends posted close together since progress last
                                            looked: the next call times the burst's end */
    int                   tx_score;      /* bursts followed by progress promptly, less those
                                            left waiting (uct_src_iface_tx_burst_ended) */
    uct_am_callback_t     am_stub_cb;    /* UCX's handler of an AM id nobody registered (what
                                            every id holds when the iface opens) */
    unsigned long         rx_am_dropped; /* messages dropped: their AM id has no handler */
    ucs_list_link_t       md_elem;       /* in its md's ifaces */
} uct_src_iface_t;


/* A burst of sends (posted within TX_COALESCE of each other) has ended: the application
 * progressed, posted again after a gap, or the background timer found sends waiting. A burst
 * followed by progress within TX_COALESCE of its last send is prompt; one that waited longer
 * (the application computed or checked a buffer first, or lost its CPU, or posted its next
 * send before any progress) is late. The iface holds bursts for one transmission while prompt
 * ones prevail: each prompt burst adds one to a score, each late one takes
 * UCT_SRC_TX_LATE_COST, and the iface holds while the score is UCT_SRC_TX_HOLD_SCORE or more. So
 * it starts holding after two prompt bursts, two late ones in a row stop it however long it
 * held, and an application that leaves its bursts to wait as a rule is not held back again;
 * one late burst among many prompt ones (a preemption) changes nothing. */
static UCS_F_ALWAYS_INLINE void
uct_src_iface_tx_burst_ended(uct_src_iface_t *iface, ucs_time_t now)
{
    iface->tx_burst = 0;
    if ((now - iface->tx_last_post) < iface->tx_coalesce) {
        iface->tx_score = ucs_min(iface->tx_score + 1, UCT_SRC_TX_SCORE_MAX);
    } else {
        iface->tx_score = ucs_max(iface->tx_score - UCT_SRC_TX_LATE_COST, -UCT_SRC_TX_SCORE_MAX);
    }
    iface->tx_hold = iface->tx_score >= UCT_SRC_TX_HOLD_SCORE;
}

/* The doorbell: what the QP holds goes to the engine's transmission now. Returns the time
 * the transmission ended, from which the coalescing window runs: on loopback the system call
 * delivers, for several us (a 16 KiB datagram of data not in cache), and a window timed from
 * its start let the next fragment of a message escape it. */
static UCS_F_ALWAYS_INLINE ucs_time_t uct_src_iface_ring_doorbell(uct_src_iface_t *iface)
{
    srcnic_nic_transmit(iface->nic);
    iface->tx_doorbell  = ucs_get_time();
    iface->tx_held      = 0;
    iface->tx_post_rang = 0;
    return iface->tx_doorbell;
}


enum {
    UCT_SRC_EP_FLAG_FAILED       = UCS_BIT(0),  /* the peer is gone: ops return fail_status */
    UCT_SRC_EP_FLAG_ERR_REPORTED = UCS_BIT(1),  /* uct_iface_handle_ep_err scheduled or done */
    UCT_SRC_EP_FLAG_INVALIDATED  = UCS_BIT(3),  /* uct_ep_invalidate: sends are cancelled */
    UCT_SRC_EP_FLAG_DESTROYED    = UCS_BIT(2),  /* freed once its sends have completed */
    UCT_SRC_EP_FLAG_LAZY_TAIL    = UCS_BIT(4)   /* the last send posted did not ask for a prompt
                                                 * acknowledgement (an active message) */
};

typedef struct uct_src_flush_req uct_src_flush_req_t;

typedef struct uct_src_ep {
    uct_base_ep_t         super;
    srcnic_dest_t         dest;          /* remote NIC's connection slot and remote QP */
    uint32_t              tx_posted;     /* sends posted (wraps) */
    uint32_t              tx_completed;  /* sends completed */
    uint8_t               flags;         /* UCT_SRC_EP_FLAG_* */
    int8_t                fail_status;   /* ucs_status_t once FAILED */
    int16_t               err_cb_id;     /* deferred error report, or -1 (UCS_CALLBACKQ_ID_NULL) */
    uint32_t              tag;           /* WQE tag of this ep's sends (nonzero) */
    uint8_t               remote_ip[4];  /* the remote engine's address (network order), */
    uint16_t              remote_port;   /* port (host order) */
    uint64_t              remote_incarnation; /* and incarnation: what the ep connects to */
    ucs_arbiter_group_t   arb_group;     /* pending requests */
    ucs_list_link_t       outstanding;   /* sends posted and not completed, oldest first */
    union {
        uct_src_flush_req_t *flush_reqs; /* live: waiting flushes, oldest first */
        ucs_list_link_t     linger_elem; /* destroyed: on the iface's linger_eps */
    };
} uct_src_ep_t;


extern uct_component_t uct_src_component;

ucs_status_t uct_src_query_devices(uct_md_h md, uct_tl_device_resource_t **devices_p,
                                   unsigned *num_devices_p);

/* Endpoint operations (uct_src_ep.c). */
UCS_CLASS_DECLARE_NEW_FUNC(uct_src_ep_t, uct_ep_t, const uct_ep_params_t *);
UCS_CLASS_DECLARE_DELETE_FUNC(uct_src_ep_t, uct_ep_t);
ucs_status_t uct_src_ep_am_short(uct_ep_h tl_ep, uint8_t id, uint64_t header,
                                 const void *payload, unsigned length);
ssize_t uct_src_ep_am_bcopy(uct_ep_h tl_ep, uint8_t id, uct_pack_callback_t pack_cb,
                            void *arg, unsigned flags);
ucs_status_t uct_src_ep_am_zcopy(uct_ep_h tl_ep, uint8_t id, const void *header,
                                 unsigned header_length, const uct_iov_t *iov, size_t iovcnt,
                                 unsigned flags, uct_completion_t *comp);
ucs_status_t uct_src_ep_put_short(uct_ep_h tl_ep, const void *buffer, unsigned length,
                                  uint64_t remote_addr, uct_rkey_t rkey);
ssize_t uct_src_ep_put_bcopy(uct_ep_h tl_ep, uct_pack_callback_t pack_cb, void *arg,
                             uint64_t remote_addr, uct_rkey_t rkey);
ucs_status_t uct_src_ep_put_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov, size_t iovcnt,
                                  uint64_t remote_addr, uct_rkey_t rkey,
                                  uct_completion_t *comp);
ucs_status_t uct_src_ep_get_bcopy(uct_ep_h tl_ep, uct_unpack_callback_t unpack_cb, void *arg,
                                  size_t length, uint64_t remote_addr, uct_rkey_t rkey,
                                  uct_completion_t *comp);
ucs_status_t uct_src_ep_get_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov, size_t iovcnt,
                                  uint64_t remote_addr, uct_rkey_t rkey,
                                  uct_completion_t *comp);
ucs_status_t uct_src_ep_pending_add(uct_ep_h tl_ep, uct_pending_req_t *req, unsigned flags);
void uct_src_ep_pending_purge(uct_ep_h tl_ep, uct_pending_purge_callback_t cb, void *arg);
ucs_status_t uct_src_ep_flush(uct_ep_h tl_ep, unsigned flags, uct_completion_t *comp);
ucs_status_t uct_src_ep_check(uct_ep_h tl_ep, unsigned flags, uct_completion_t *comp);
ucs_status_t uct_src_ep_invalidate(uct_ep_h tl_ep, unsigned flags);

/* Called by the iface for each send completion; frees the descriptor. */
void uct_src_ep_send_completed(uct_src_iface_t *iface, uct_src_send_desc_t *desc,
                               ucs_status_t status);
/* Marks the ep failed and schedules the error report (once). */
void uct_src_ep_set_failed(uct_src_ep_t *ep, ucs_status_t status);
/* Whether the ep was created for the remote interface at these addresses. */
int uct_src_ep_connected_to(uct_ep_h tl_ep, const uct_device_addr_t *dev_addr,
                            const uct_iface_addr_t *iface_addr);
/* Frees a destroyed ep still waiting for completions (iface close). */
void uct_src_ep_free_lingering(uct_src_ep_t *ep);

/* Dispatches pending requests while send resources last. */
void uct_src_iface_dispatch_pending(uct_src_iface_t *iface);

static UCS_F_ALWAYS_INLINE int uct_src_iface_has_tx_resources(uct_src_iface_t *iface)
{
    return iface->tx_outstanding < iface->tx_max;
}

#endif
