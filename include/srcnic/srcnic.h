/* The srcnic engine's public C API: a software SRC NIC that the UCT transport drives.
 *
 * Objects: a NIC (one UDP endpoint, a peer table of connections to remote NICs, a memory
 * region table), QPs (host-to-NIC channels bound to no peer: a send ring of WQEs, a receive
 * ring of buffers and a completion ring), memory regions with rkeys, and destinations
 * (remote NIC + QP number, naming a connection slot; creating one sends nothing).
 *
 * Threading: a NIC and everything created from it are used by one thread at a time; the
 * caller serialises (the UCT glue holds the worker's async lock). Progress happens only in
 * srcnic_nic_progress(). */
#ifndef SRCNIC_SRCNIC_H
#define SRCNIC_SRCNIC_H

#include <srcnic/status.h>
#include <srcnic/wqe.h>

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct srcnic_pd srcnic_pd_t;
typedef struct srcnic_nic srcnic_nic_t;
typedef struct srcnic_qp srcnic_qp_t;
typedef struct srcnic_mr srcnic_mr_t;

/* A NIC's network identity and credentials (40 bytes, plain data: the UCT glue packs it into
 * addresses). Whoever holds a NIC's address can open a connection to it: hand it only to the
 * processes that may talk to the NIC (UCX's address exchange does), never to the network. */
typedef struct srcnic_nic_addr {
    uint8_t  family;        /* AF_INET or AF_INET6 */
    uint8_t  reserved;
    uint16_t port;          /* UDP port, host byte order */
    uint32_t scope_id;      /* IPv6 scope id, else 0 */
    uint8_t  ip[16];        /* network byte order; IPv4 in the first 4 bytes */
    uint64_t incarnation;   /* random, chosen when the NIC is created; detects restarts */
    uint64_t secret;        /* random, chosen when the NIC is created, published only here: a
                               connection's first packets must prove knowledge of it
                               (PROTOCOL.md §7); never 0 */
} srcnic_nic_addr_t;

/* NIC configuration; srcnic_config_init() fills the defaults documented per field. */
typedef struct srcnic_config {
    char     bind_addr[64];    /* numeric IPv4/IPv6 address to bind, not the wildcard (peers
                                  check the address a connection's first packets come from);
                                  default "127.0.0.1" */
    uint16_t port;             /* UDP port; 0 (default) = any free port */
    uint32_t mtu;              /* largest datagram, bytes; 0 (default) = the link's, per peer */
    uint32_t window;           /* packets in flight per connection, 2..1024; 0 (default) =
                                  automatic: 128, or enough for 768 KiB of payload where the
                                  path's datagrams are small (575 at 1500 bytes), of which
                                  at most 128 messages shorter than a packet, and full
                                  packets no more than the receive socket holds (sock_buf
                                  as granted; at least 4) */
    uint32_t rto_us;           /* initial retransmission timeout, µs (default 5000) */
    uint32_t rto_max_us;       /* backoff ceiling, µs (default 200000) */
    uint32_t retry_count;      /* timeouts without progress before a connection fails (default 16) */
    uint32_t peer_timeout_ms;  /* unacknowledged data older than this fails the connection (default 10000) */
    uint32_t rnr_delay_us;     /* first back-off after a receiver-not-ready NAK, µs (default 100) */
    uint32_t max_connections;  /* connections to other NICs, the budget (default 4096); with DC
                                  (num_dci, dc_targets) every further peer goes over DC */
    uint32_t max_inflight;     /* in-flight message descriptors per NIC (default 4096) */
    uint32_t rx_buffers;       /* packet buffers for receive and reordering, 64..2^20; 0
                                  (default) = automatic: twice the widest window, at least
                                  256 (1150 at 1500 bytes) */
    uint32_t sock_buf;         /* socket send/receive buffer, bytes (default 8 MiB) */
    uint32_t peer_sockets;     /* connected UDP sockets for the busiest peers, 0..64 (default 4;
                                  0 = every datagram on the one bound socket) */
    uint32_t job_key;          /* packets with another key are dropped (default 0; the
                                  secret in each NIC's address already keeps out whoever was
                                  not given it) */
    srcnic_pd_t *pd;           /* protection domain whose memory regions peers may access;
                                  NULL (default): a domain of the NIC's own */
    /* Fault injection for tests (default off): probabilities in [0,1] on receive and send. */
    double   fault_drop;
    double   fault_duplicate;
    double   fault_reorder;
    double   fault_corrupt;
    uint64_t fault_seed;       /* seed of the fault generator (default 1) */
    /* DC fallback (PROTOCOL.md §8): a peer beyond max_connections, here or at the peer, is
     * served over a DC stream: one of num_dci initiator contexts attaches to it while it has
     * work, and the peer keeps at most dc_targets short-lived target contexts. */
    uint32_t num_dci;          /* DC initiators, 0..4096 (default 32; 0: no DC fallback, a
                                  peer beyond the budget is refused) */
    uint32_t dc_targets;       /* DC target contexts, 0..4096 (default 64; 0: DC streams from
                                  peers are refused, and peers beyond the budget with them) */
    uint32_t dc_quota;         /* requests a DCI takes for its target while another target waits
                                  for a DCI, before it drains and is handed over (default 32;
                                  0: it keeps its target while it has work) */
    uint32_t dc_promote;       /* a DC peer sent this many requests within 10 ms is moved to a
                                  connection (an idle one is closed by agreement to make room);
                                  default 256; 0: never */
    uint32_t max_active;       /* connections holding in-flight state at once (an active half
                                  each: messages in flight, reorder slots). A request for an
                                  idle connection beyond it stays in its send queue until one
                                  goes idle (back-pressure: the queue fills and posts return
                                  NO_RESOURCE); received packets and their answers always get
                                  one, so that peers' traffic drains. 0 (default): no bound */
    uint32_t dc_evict_us;      /* a DC target context with no packet for this long may be
                                  evicted for another stream when all are taken (default 1000;
                                  1..10000000): shorter lets more streams in (a stream evicted
                                  early costs a DC_GONE and a resume), longer answers them
                                  DC_BUSY meanwhile (PROTOCOL.md §8.3). 100 cut dc_bench's p99
                                  from 100-250 us to 4-18 but starved some of 1,024 initiators
                                  under 10 % loss: not the default */
} srcnic_config_t;

SRCNIC_API void srcnic_config_init(srcnic_config_t *config);
/* SRCNIC_OK if srcnic_nic_create() would accept every value of `config` (the checks made
 * before anything opens); otherwise logs the first value out of range and returns
 * SRCNIC_ERR_INVALID_PARAM. */
SRCNIC_API srcnic_status_t srcnic_config_check(const srcnic_config_t *config);
/* Packets in flight per connection that a NIC with this configuration allows on a path whose
 * datagrams hold up to `datagram` bytes, header included: config->window, or the automatic
 * window for that size (128 on loopback, 575 at 1500 bytes). */
SRCNIC_API uint32_t srcnic_config_window(const srcnic_config_t *config, uint32_t datagram);

/* The engine's version, "MAJOR.MINOR.PATCH". */
SRCNIC_API const char *srcnic_version(void);

/* --- logging --------------------------------------------------------------------------- */

/* Message severities; a level enables itself and those before it. */
typedef enum srcnic_log_level {
    SRCNIC_LOG_LEVEL_ERROR,
    SRCNIC_LOG_LEVEL_WARN,
    SRCNIC_LOG_LEVEL_INFO,
    SRCNIC_LOG_LEVEL_DEBUG,
    SRCNIC_LOG_LEVEL_TRACE
} srcnic_log_level_t;

/* Receives every engine message its level lets through: file and line of the engine source,
 * msg NUL-terminated without a newline and valid only during the call. */
typedef void (*srcnic_log_handler_t)(srcnic_log_level_t level, const char *file, int line,
                                     const char *msg, void *arg);

/* Sends the engine's messages to handler(..., arg) instead of stderr (NULL: stderr again).
 * Process-wide; set it before other threads create NICs. */
SRCNIC_API void srcnic_log_set_handler(srcnic_log_handler_t handler, void *arg);
/* The process-wide level (initially the environment variable SRCNIC_LOG_LEVEL: error, warn,
 * info, debug or trace; warn when unset). */
SRCNIC_API void srcnic_log_set_level(srcnic_log_level_t level);
SRCNIC_API srcnic_log_level_t srcnic_log_get_level(void);

/* --- NIC ------------------------------------------------------------------------------- */

SRCNIC_API srcnic_status_t srcnic_nic_create(const srcnic_config_t *config, srcnic_nic_t **nic_p);
SRCNIC_API void srcnic_nic_destroy(srcnic_nic_t *nic);
SRCNIC_API void srcnic_nic_query_addr(const srcnic_nic_t *nic, srcnic_nic_addr_t *addr_p);
/* Largest message (SEND, WRITE or READ), bytes. */
SRCNIC_API size_t srcnic_nic_max_msg(const srcnic_nic_t *nic);

/* Moves everything forward: receive, respond, complete, transmit, retransmit. Returns the
 * number of packets and completions handled (0 = idle). Never blocks. */
SRCNIC_API unsigned srcnic_nic_progress(srcnic_nic_t *nic);

/* The doorbell: transmits what the send rings hold (within the connections' windows) and the
 * acknowledgements that are due, and receives nothing. Work posted to a send ring otherwise
 * leaves on the next srcnic_nic_progress(); ringing after a post sends it at once, without
 * waiting for the caller's next progress call. Returns the number of WQEs and packets handled.
 * Never blocks. */
SRCNIC_API unsigned srcnic_nic_transmit(srcnic_nic_t *nic);

/* A file descriptor that polls readable when progress has work (a packet arrived or a timer
 * is due), after srcnic_nic_arm() returned OK. An engine creates it (and the descriptors it
 * watches) at the first call of this or srcnic_nic_arm(), so an engine that is only
 * progressed holds none; -1 if that failed (logged; srcnic_nic_arm() returns why). */
SRCNIC_API int srcnic_nic_event_fd(const srcnic_nic_t *nic);
/* Arms the event fd. BUSY if work is already pending (a completion not yet polled, a packet
 * waiting, data to transmit): call progress instead of sleeping. */
SRCNIC_API srcnic_status_t srcnic_nic_arm(srcnic_nic_t *nic);

/* --- the node agent ------------------------------------------------------------------- */

/* Instead of running its own engine, a process may attach to the node agent (srcd), which runs
 * one engine per node address for every process on the node: connections then exist per pair
 * of nodes, not per pair of processes. An attached NIC is used through this same API: its QPs'
 * rings live in memory shared with the agent, which serves them (and remote accesses to this
 * process's registered memory) whether or not the process calls progress. */
typedef struct srcnic_attach_config {
    char        socket[108];   /* the agent's socket: "@name" (abstract) or a path; default "@srcd" */
    char        bind_addr[64]; /* which engine: the agent's address on the wanted interface
                                  (numeric IPv4/IPv6); default "127.0.0.1" */
    uint32_t    job_key;       /* requests to this process's QPs must carry it (default 0) */
    uint32_t    direct_reads;  /* 1 (default): a READ of memory of another process attached to
                                  the same agent is copied by this process itself, one
                                  cross-memory copy, once the agent has checked its key; 0: the
                                  agent moves it (two copies, on the agent's thread) */
    size_t      arena;         /* bytes of memory shared with the agent for buffers it reads and
                                  writes without a cross-memory copy (srcnic_nic_mem_alloc) and
                                  for QP rings; default 64 MiB, resident only as used */
    srcnic_pd_t *pd;           /* protection domain whose regions peers may access; NULL
                                  (default): a domain of the attachment's own */
} srcnic_attach_config_t;

SRCNIC_API void srcnic_attach_config_init(srcnic_attach_config_t *config);

/* Attaches to the agent. NO_DEVICE when no agent answers on the socket; another status when
 * one answered and refused (permissions, cross-memory attach impossible, bad configuration) or
 * failed. On failure, why (if not NULL) receives a one-line explanation, NUL-terminated. */
SRCNIC_API srcnic_status_t srcnic_nic_attach(const srcnic_attach_config_t *config,
                                             srcnic_nic_t **nic_p, char *why, size_t why_len);
/* Nonzero if nic is an attachment to the agent (else an engine of this process). */
SRCNIC_API int srcnic_nic_is_attached(const srcnic_nic_t *nic);

/* Memory the NIC reads and writes directly: for an attachment, from the arena it shares with
 * the agent (buffers placed here cost no cross-memory copy), else ordinary heap memory; NULL
 * when none is left (then use ordinary memory: it works, with a copy more). 64-byte aligned. */
SRCNIC_API void *srcnic_nic_mem_alloc(srcnic_nic_t *nic, size_t size);
SRCNIC_API void srcnic_nic_mem_free(srcnic_nic_t *nic, void *ptr, size_t size);

/* --- counters -------------------------------------------------------------------------- */

#define SRCNIC_FOREACH_COUNTER(_) \
    _(TX_PACKETS,          "packets transmitted, retransmissions included") \
    _(RX_PACKETS,          "datagrams received") \
    _(TX_BYTES,            "bytes transmitted") \
    _(RX_BYTES,            "bytes received") \
    _(RETRANSMITS,         "packets retransmitted") \
    _(FAST_RETRANSMITS,    "retransmissions triggered by a selective-ack gap") \
    _(TIMEOUTS,            "retransmission timer expiries") \
    _(ACKS_SENT,           "pure acknowledgement packets sent") \
    _(DUPLICATES,          "sequenced packets received again") \
    _(OUT_OF_ORDER,        "sequenced packets buffered for reordering") \
    _(RNR_SENT,            "receiver-not-ready NAKs sent") \
    _(RNR_RECEIVED,        "receiver-not-ready NAKs received") \
    _(CONN_OPENED,         "connections opened") \
    _(CONN_FAILED,         "connections failed (timeout, reset or peer restart)") \
    _(CONN_REFUSED,        "connection attempts refused: peer table full") \
    _(DROP_TRUNCATED,      "drop: datagram shorter than its header claims") \
    _(DROP_BAD_VERSION,    "drop: unknown protocol version") \
    _(DROP_BAD_CHECKSUM,   "drop: CRC32C mismatch") \
    _(DROP_WRONG_JOB_KEY,  "drop: job key differs") \
    _(DROP_UNKNOWN_OPCODE, "drop: opcode not in the table") \
    _(DROP_BAD_FLAGS,      "drop: unknown flags or non-zero reserved fields") \
    _(DROP_BAD_LENGTH,     "drop: payload length inconsistent with the type") \
    _(DROP_WRONG_NIC,      "drop: addressed to another incarnation of this NIC") \
    _(DROP_BAD_PROOF,      "drop: may open a connection (dst_conn 0) without a valid proof of this NIC's secret") \
    _(DROP_NO_CONN,        "drop: no connection matches and the packet cannot open one") \
    _(DROP_WRONG_GEN,      "drop: connection id or generation does not match the sender") \
    _(DROP_WRONG_PEER,     "drop: names a connection of another address or incarnation") \
    _(DROP_OUT_OF_WINDOW,  "drop: PSN beyond the receive window") \
    _(DROP_NO_BUFFER,      "drop: out-of-order packet evicted for lack of packet buffers") \
    _(DROP_BAD_RESPONSE,   "drop: response or ack that matches no outstanding request") \
    _(ACCESS_ERRORS,       "remote accesses refused by the memory-region check") \
    _(RECV_TRUNCATED,      "SENDs refused: larger than the posted receive buffer") \
    _(NO_SUCH_QP,          "requests refused: destination QP does not exist") \
    _(TAIL_PROBES,         "tail-loss probes: a packet resent after two round trips without an ack") \
    _(SPURIOUS_TIMEOUTS,   "timeouts an ack showed needless: the peer held what was never resent") \
    _(PLACED_WHILE_CHECKED, "SEND and READ response segments copied into place as their CRC was checked") \
    _(DC_FALLBACKS,        "remote NICs served over DC: the connection budget here, or the peer's (USE_DC), was spent") \
    _(DC_STREAMS,          "DC streams started: a DCI attached to a target") \
    _(DC_TARGETS_OPENED,   "DC target contexts created for new streams") \
    _(DC_RESUMED,          "DC target contexts recreated from the closed table for a stream that went on") \
    _(DC_EVICTIONS,        "DC target contexts evicted (quiet, least recently used)") \
    _(DC_TARGETS_MAX,      "most DC target contexts held at once (a high-water mark, not a count)") \
    _(DC_BUSY_SENT,        "DC_BUSY NAKs sent: every DC target context busy, or no room to close one") \
    _(DC_BUSY_RECEIVED,    "DC_BUSY NAKs received") \
    _(DC_GONE_SENT,        "DC_GONE NAKs sent: a stream named a target context evicted meanwhile") \
    _(DC_CLOSED,           "DC target contexts (or closed-table entries) ended by their initiator's DC_CLOSE") \
    _(DC_PROMOTED,         "remote NICs moved from DC to a connection: their traffic stayed high") \
    _(CONN_DEMOTED,        "idle connections closed by agreement to make room for a promotion") \
    _(USE_DC_SENT,         "connection attempts answered USE_DC: the connection budget is spent") \
    _(DROP_DC_STALE,       "drop: DC packet of a stream with no target context, none to resume, and not its first PSN") \
    _(ACTIVE_WAITS,        "requests left in their send queue a pass: max_active connections were busy") \
    _(DIRECT_READS,        "READs between two processes of one agent that the requester copied itself") \
    _(DIRECT_READ_COPIES,  "pieces (up to 256 KiB) of them copied by the agent: the kernel refused the requester") \
    _(LOCAL_WRITES,        "WRITEs to a QP of this NIC carried out by it without packets, as a NIC loops them back") \
    _(LOCAL_SENDS,         "SENDs to a QP of this NIC carried out by it without packets (a receive was posted)") \
    _(DC_XACKS_SENT,       "DC target acknowledgements carried by another packet to the stream's initiator NIC (XACK), not an ACK of their own") \
    _(DC_XACKS_APPLIED,    "XACKs received that acknowledged something new on one of this NIC's DC streams") \
    _(DROP_XACK_UNMATCHED, "XACKs ignored: no DCI here holds their stream to the sender, or they acknowledge what was never sent") \
    _(DC_RELEASES_ASKED,   "DC streams this NIC's DCIs closed as soon as quiet because their target asked (it refused others for want of a context)") \
    _(DC_REVERSE_SENT,     "requests this NIC's DC target contexts sent back along their stream to its initiator's NIC") \
    _(DC_HANDED_BACK,      "of them, those the stream's DC_CLOSE left unexecuted, sent again on a DCI") \
    _(DC_CLOSE_CONFIRMED,  "DC streams whose target confirmed the DC_CLOSE of a DCI that ran requests sent back")

typedef enum srcnic_counter {
#define SRCNIC_COUNTER_ENUM(_name, _desc) SRCNIC_CNT_##_name,
    SRCNIC_FOREACH_COUNTER(SRCNIC_COUNTER_ENUM)
#undef SRCNIC_COUNTER_ENUM
    SRCNIC_CNT_LAST
} srcnic_counter_t;

SRCNIC_API uint64_t srcnic_nic_counter(const srcnic_nic_t *nic, srcnic_counter_t counter);
SRCNIC_API const char *srcnic_counter_name(srcnic_counter_t counter);
/* Bytes of engine state held for one connection (excluding shared packet buffers): its context
 * and its share of the active halves (the in-flight and reorder state only busy connections
 * hold, pooled), averaged over the open connections; with none open, what one busy connection
 * over the link's datagram size would hold. */
SRCNIC_API size_t srcnic_conn_state_bytes(const srcnic_nic_t *nic);
/* Connections currently open. */
SRCNIC_API unsigned srcnic_nic_num_connections(const srcnic_nic_t *nic);

/* --- QPs ------------------------------------------------------------------------------- */

typedef struct srcnic_qp_config {
    uint32_t sq_size;    /* send ring entries (power of 2; default 256) */
    uint32_t rq_size;    /* receive ring entries (power of 2; default 256) */
} srcnic_qp_config_t;

SRCNIC_API void srcnic_qp_config_init(srcnic_qp_config_t *config);
SRCNIC_API srcnic_status_t srcnic_qp_create(srcnic_nic_t *nic,
                                            const srcnic_qp_config_t *config,
                                            srcnic_qp_t **qp_p);
/* Frees the QP and its rings. Work still outstanding is abandoned, and no completion is written
 * for it (its completion queue goes with the QP): requests already on the wire finish there as
 * NOPs, so the peer never sees a torn message, and a message being received into the QP is
 * refused. Collect completions (or srcnic_qp_cancel) before destroying a QP whose work matters. */
SRCNIC_API void srcnic_qp_destroy(srcnic_qp_t *qp);
SRCNIC_API uint32_t srcnic_qp_num(const srcnic_qp_t *qp);

/* Posts a SEND, WRITE or READ. NO_RESOURCE if the send ring is full; INVALID_PARAM for a
 * malformed WQE (bad opcode, too many SGEs, inline too long, message too long). */
SRCNIC_API srcnic_status_t srcnic_post_send(srcnic_qp_t *qp, const srcnic_wqe_t *wqe);
/* Posts a receive buffer. NO_RESOURCE if the receive ring is full. */
SRCNIC_API srcnic_status_t srcnic_post_recv(srcnic_qp_t *qp, const srcnic_recv_wqe_t *wqe);
/* Cancels the work this QP has outstanding towards dest with the given WQE tag (0: any tag),
 * posted before the call: each request completes with CANCELED. What is still in the send ring
 * is never carried out; what was handed out may have reached the peer in whole or in part (a
 * request partly transmitted is finished on the wire as NOPs, so the peer never sees a torn
 * message). Returns how many completed in the call; requests still in the send ring behind
 * others complete CANCELED when the NIC reaches them. */
SRCNIC_API unsigned srcnic_qp_cancel(srcnic_qp_t *qp, srcnic_dest_t dest, uint32_t tag);
/* Takes up to max completions; returns how many were written to cqes. */
SRCNIC_API unsigned srcnic_poll_cq(srcnic_qp_t *qp, srcnic_cqe_t *cqes, unsigned max);
/* Work requests posted and not yet polled as completions. */
SRCNIC_API unsigned srcnic_qp_outstanding(const srcnic_qp_t *qp);

/* --- protection domains and memory regions --------------------------------------------- */

/* A protection domain holds memory regions; every NIC created with it (srcnic_config_t.pd)
 * accepts remote accesses to them. Registration is thread-safe. Destroy it after its NICs. */
SRCNIC_API srcnic_status_t srcnic_pd_create(srcnic_pd_t **pd_p);
SRCNIC_API void srcnic_pd_destroy(srcnic_pd_t *pd);
SRCNIC_API srcnic_status_t srcnic_pd_mr_reg(srcnic_pd_t *pd, void *addr, size_t length,
                                            unsigned access, srcnic_mr_t **mr_p);

enum {
    SRCNIC_ACCESS_REMOTE_READ  = 1u << 0,
    SRCNIC_ACCESS_REMOTE_WRITE = 1u << 1
};

/* Registers in the NIC's protection domain. */
SRCNIC_API srcnic_status_t srcnic_mr_reg(srcnic_nic_t *nic, void *addr, size_t length,
                                         unsigned access, srcnic_mr_t **mr_p);
/* The key a peer presents to access the region; unguessable, never reused by the NIC. */
SRCNIC_API uint64_t srcnic_mr_rkey(const srcnic_mr_t *mr);
SRCNIC_API void srcnic_mr_dereg(srcnic_mr_t *mr);
/* Invalidation: once a region of this process is deregistered, returns when nic holds no remote
 * access it accepted earlier that could still touch the region's memory. An access is checked
 * against the region's key when accepted and again before each packet of it reads or writes
 * memory (a READ answer resent after a loss included), so a dead key stops it; this call waits
 * out the one that may be between its check and its access, and writes what the NIC collected
 * for the process's memory. After srcnic_mr_dereg() and this call on every NIC that serves the
 * region's protection domain, the memory may be freed. Calls on nic must be serialized with its
 * progress as usual. An attached NIC asks its agent (one round trip): CONNECTION_RESET if the
 * agent is gone, which touches nothing any more either. One exception: a READ by another
 * process of the same agent that copies its READs itself (direct_reads) was checked when the
 * agent took it and is copied when that process polls, possibly after this call; it only reads,
 * into that process's own buffer (direct_reads 0 in the reader closes the exception). */
SRCNIC_API srcnic_status_t srcnic_nic_fence_memory(srcnic_nic_t *nic);

/* --- destinations ---------------------------------------------------------------------- */

/* Names (remote NIC, remote QP). Looks up or reserves the connection slot for the remote NIC
 * and sends nothing. remote is the NIC's address as srcnic_nic_query_addr() gave it, secret
 * included (INVALID_ADDR without one). NO_RESOURCE if the peer table is full. */
SRCNIC_API srcnic_status_t srcnic_dest_create(srcnic_nic_t *nic,
                                              const srcnic_nic_addr_t *remote,
                                              uint32_t remote_qpn, srcnic_dest_t *dest_p);
/* OK while the destination's connection is usable; else why it failed
 * (ENDPOINT_TIMEOUT, CONNECTION_RESET). */
SRCNIC_API srcnic_status_t srcnic_dest_status(const srcnic_nic_t *nic, srcnic_dest_t dest);

#ifdef __cplusplus
}
#endif

#endif
