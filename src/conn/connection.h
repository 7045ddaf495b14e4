// Reliability state between this NIC and one remote NIC, shared by every QP on both
// (PROTOCOL.md §5). A Connection holds what every connection keeps (identity, the next PSN each
// way, the round-trip estimate); its ConnActive, taken from the NIC's pool only while the
// connection has work, holds the messages in flight, the acknowledgement owed, the reorder
// buffer and the message being received. Nothing here is per QP.
// A message gets its PSN range when the requester takes it (or the responder creates it), so
// an acknowledgement that covers a PSN also orders everything assigned before it.
#ifndef SRCNIC_CONN_CONNECTION_H
#define SRCNIC_CONN_CONNECTION_H

#include "link/link.h"
#include "wire/header.h"

#include <srcnic/srcnic.h>

#include <cstdint>
#include <memory>

namespace srcnic {

class QpContext;
struct Owner;

// PSNs are compared circularly (32-bit serial arithmetic).
inline bool psn_before(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) < 0; }

// How the transmit half is recovering lost packets (PROTOCOL.md §5.5), one state at a time:
//   kNone         no loss suspected (fast retransmits from SACKs need no state);
//   kProbe        a tail-loss probe went out and no ack has advanced since (an ack that
//                 advances answers it: one later packet reported then shows a hole);
//   kTimeout      the RTO fired: the oldest unreported packet was resent, and each partial ack
//                 resends twice what it acknowledged, until recover_psn is acknowledged or an
//                 ack shows the first transmissions arrived (the timeout was spurious);
//   kTimeoutHole  the same, after the peer had reported a hole (a timeout that ends the same
//                 way repaired a real loss: not spurious).
// A timeout supersedes an unanswered probe; no probe goes during a timeout's recovery.
enum class Recovery : uint8_t { kNone, kProbe, kTimeout, kTimeoutHole };

inline const char *to_string(Recovery r)
{
    switch (r) {
    case Recovery::kNone: return "none";
    case Recovery::kProbe: return "probe";
    case Recovery::kTimeout: return "timeout";
    case Recovery::kTimeoutHole: return "timeout-hole";
    }
    return "?";
}

// A message on a connection's transmit FIFO: a request taken from a QP, or an answer created
// by the responder. Preallocated in the NIC's pool (srcnic_config_t.max_inflight).
struct TxMsg {
    enum class Kind : uint8_t { kRequest, kReadResponse, kErrorResponse };

    Kind kind = Kind::kRequest;
    uint64_t serial = 0;       // drawn when allocated: names this use of the descriptor
    uint8_t opcode = 0;        // wire Opcode of its packets
    bool acked = false;        // every PSN acknowledged
    bool answered = false;     // READ: every response byte placed (or an error came back)
    bool cancelled = false;    // not to be completed or placed; remaining packets go as NOPs
    bool lazy_ack = false;     // requests: posted with SRCNIC_WQE_FLAG_LAZY_ACK (its last packet
                               // does not ask for a prompt acknowledgement)
    int16_t status = 0;        // srcnic_status_t to complete with
    uint32_t psn_first = 0;    // first PSN
    uint32_t npkts = 0;        // PSNs it occupies (>= 1)
    uint32_t seg = 0;          // payload bytes of each of its packets but the last (see cut())
    uint32_t length = 0;       // payload bytes of the whole message
    uint64_t offset = 0;       // requests: where its bytes start in its WQE's (a chunk of a
                               // large WRITE or READ; 0 otherwise)
    bool more = false;         // requests: a chunk after which more of its WQE follows (it does
                               // not complete the WQE)
    uint32_t read_placed = 0;  // READ: response bytes placed so far
    uint32_t req_psn = 0;      // answers: first PSN of the request answered
    uint32_t peer_qpn = 0;     // dst_qpn on the wire
    uint32_t job_key = 0;      // job_key on the wire: the posting QP owner's (requests), the
                               // request's (answers)
    uint32_t local_qpn = 0;    // src_qpn on the wire (requests: the posting QP)
    QpContext *qp = nullptr;   // requests: the QP that completes it; nullptr once cancelled
    Owner *owner = nullptr;    // READ_RESP: whose memory it reads (nullptr once that stopped)
    uint64_t src_addr = 0;     // READ_RESP: first byte of the local source
    uint64_t src_rkey = 0;     // READ_RESP: the key the READ named, checked again before each
                               // packet reads the source (a region invalidated meanwhile is
                               // read no more)
    srcnic_wqe_t wqe;          // requests: the WQE as posted (sge list, inline data, wr_id)
    TxMsg *next = nullptr;     // FIFO / free list link

    uint32_t psn_end() const { return psn_first + npkts; }
    // Cuts its length bytes into as few packets of at most seg_payload bytes as hold them, all
    // of one size but the last, which is at most npkts - 1 bytes shorter (none where npkts
    // divides the length). Equal packets rather than full ones and a remainder: the link sends
    // a run of equal datagrams as one (UDP GSO) and the peer receives it as one (GRO), and a
    // short remainder would end that run at every message (a 2 KiB message at a 1,500-byte MTU
    // went as a full datagram and a runt, which halved the rate the link sent at).
    void cut(uint32_t seg_payload)
    {
        const uint64_t len = length;   // (64-bit: a length near 4 GiB does not wrap)
        npkts = len <= seg_payload ? 1 : static_cast<uint32_t>((len + seg_payload - 1) / seg_payload);
        seg = npkts == 1 ? length : static_cast<uint32_t>((len + npkts - 1) / npkts);
    }
    // Cut instead at run_seg, the segment size of the message of several packets before it on
    // its connection (ConnActive::run_seg), where that is larger than its own, takes no more
    // packets, and leaves a last packet short by no more than a pad holds: the message joins
    // the offload group of the one before rather than ending it. Back-to-back messages of
    // sizes that differ a little cut to different sizes: a UCP stream's 64 KiB goes as a
    // 32 KiB fragment and a slightly shorter one, and each ended its group (twice the groups).
    void join_run(uint32_t run_seg, uint32_t seg_payload)
    {
        const uint64_t len = length;
        if (npkts > 1 && run_seg > seg && run_seg <= seg_payload &&
            static_cast<uint64_t>(npkts) * run_seg - len <= kWirePadMax &&
            static_cast<uint64_t>(npkts - 1) * run_seg < len) {
            seg = run_seg;
        }
    }
    // Its last packet is not full (a message shorter than one packet, or a request without
    // payload): what the short window counts.
    bool short_tail(uint32_t seg_payload) const
    {
        return static_cast<uint64_t>(length) < static_cast<uint64_t>(npkts) * seg_payload;
    }
};

// No generation: failed_gen before any connection of the slot failed (generations are 16-bit).
constexpr uint32_t kNoGen = 0x10000;

enum class ConnState : uint8_t {
    kFree,      // slot unused
    kOpen,      // usable (packets may or may not have been exchanged yet)
};

// What a slot of the peer table holds (PROTOCOL.md §8): a connection to another NIC, shared by
// every QP; a DC initiator (DCI), the requester side of one DC stream to whichever target it is
// attached to; or a DC target context, the responder side of one DC stream, short-lived and
// bounded in number. All three run the same reliability code.
enum class ConnKind : uint8_t { kConn, kDci, kDct };

// The DC flag of the packets a slot of kind k sends (PROTOCOL.md §2.2), 0 for a connection.
inline uint16_t dc_flag_of(ConnKind k)
{
    return k == ConnKind::kDci ? kFlagDcInit : k == ConnKind::kDct ? kFlagDcTarget : 0;
}

inline const char *to_string(ConnKind k)
{
    switch (k) {
    case ConnKind::kConn: return "connection";
    case ConnKind::kDci: return "DCI";
    case ConnKind::kDct: return "DC target";
    }
    return "?";
}

// The half of a connection's state needed only while it has something to do (PROTOCOL.md §5,
// ARCHITECTURE.md "Connection state"): the transmit half (messages in flight, retransmission,
// timers), the receive half (acknowledgement owed, the reorder array, the message being
// received) and the window sizes derived from the path. A connection takes one from its NIC's
// pool when it gets work (Nic::engage) and gives it back when nothing is in flight either way
// and nothing is owed (Nic::disengage), so that an idle connection costs only its Connection.
//
// Transmit PSNs:   acked_psn <= send_psn <= Connection::next_psn
//   [acked_psn, send_psn)  transmitted, not yet acknowledged (at most `window` of them)
//   [send_psn, next_psn)   assigned to a message, not yet transmitted
//   [resend_psn, resend_end)  a retransmission run (RTO probe and recovery, RNR, SACK gap,
//                          link back-pressure); none while resend_psn == send_psn
// While idle all of them equal next_psn, which is why the Connection keeps only that one.
struct alignas(64) ConnActive {
    // --- path (from Connection::seg_payload when taken) ---
    uint32_t window = 0;           // packets in flight, and reorder slots (config, or by path)
    uint32_t short_window = 0;     // messages in flight whose last packet is not full (config,
                                   // or kAutoWindowMin): a stream of small messages waits for
                                   // acks in batches instead of drawing an ack per packet
    uint32_t short_inflight = 0;   // such messages transmitted and not acknowledged
    uint32_t full_window = 0;      // full packets in flight (those not counted in short_inflight):
                                   // the window, or, automatic, what the link's receive queue
                                   // holds (a peer's holds as many), at least kMinFullWindow
    uint32_t ack_bytes = 0;        // acknowledge a stream after this much payload (a quarter of
                                   // a full window), or after window / 4 packets
    uint8_t close_tries = 0;       // connection closing (§8.6): CLOSE asks sent
    uint64_t close_sent_ns = 0;    //   the last one, when

    // --- sharing between QPs (Nic::take_chunk) ---
    uint32_t chunk_qpn = 0;        // the QP whose large WRITE or READ took the last chunk here
                                   // (QP numbers are never 0: none yet)
    uint16_t mixed_chunks = 0;     // chunks still to take at kMixedChunkBytes: kMixedChunks
                                   // since a request of another QP joined the FIFO
    uint16_t short_chunks = 0;     // chunks still to take at kMixedShortChunkBytes:
                                   // kMixedChunks since such a SEND or WRITE of one packet
                                   // joined
    uint16_t run_seg = 0;          // segment size of the last message of several packets
                                   // appended (TxMsg::join_run); 0: none since it was taken

    // --- transmit half ---
    uint32_t send_psn = 1;         // next PSN never transmitted
    uint32_t acked_psn = 1;        // oldest PSN not acknowledged
    uint32_t resend_psn = 1;       // next PSN to retransmit while < send_psn
    uint32_t resend_end = 1;       // end (exclusive) of the current retransmission run
    Recovery recovery = Recovery::kNone;
    uint32_t recover_psn = 0;      // kTimeout*: send_psn when the timeout fired
    uint32_t recover_resent = 0;   //   PSNs before it were resent during the recovery
    uint64_t peer_sack = 0;        // receiver's newest selective-ack bitmap ...
    uint32_t sack_base = 1;        //   ... of the PSNs after its cumulative ack, this one
    TxMsg *head = nullptr;         // oldest message (PSN order)
    TxMsg *tail = nullptr;
    uint64_t rto_deadline_ns = 0;  // retransmit when reached; 0 = no timer
    uint32_t rto_us = 0;           // current timeout, µs (doubles on expiry)
    bool rtt_timing = false;       // a packet is being timed ...
    uint32_t rtt_psn = 0;          //   ... this one
    uint64_t rtt_start_ns = 0;     //   ... sent then
    uint32_t retries = 0;          // expiries since the last progress
    uint64_t progress_ns = 0;      // last sign of progress: the peer's ack moved, or data went
                                   // out with nothing unacknowledged before it
    uint64_t rnr_until_ns = 0;     // no transmission before this (receiver not ready)
    uint32_t rnr_delay_us = 0;     // current RNR back-off
    uint64_t fast_rtx_ns = 0;      // last fast retransmit from the cumulative ack, to pace them
    uint32_t fast_rtx_end = 0;     // end (exclusive) of the holes fast-retransmitted so far
    uint64_t probe_deadline_ns = 0; // tail-loss probe when reached (PROTOCOL.md 5.5); 0 = none
    bool tail_unasked = false;     // the newest packet sent for the first time is a LAZY_ACK
                                   // request's last, which did not ask for its acknowledgement:
                                   // the tail-loss probe waits the peer's acknowledgement delay
    uint32_t err_answers_unsent = 0; // error answers not yet transmitted (they hold acks back)
    bool has_deferred_ack = false; // an ACK arrived before the reverse packets it follows
    uint32_t deferred_pos = 0;     //   its stream position
    uint32_t deferred_ack = 0;     //   its cumulative ack

    // --- receive half ---
    bool ack_pending = false;      // something to acknowledge
    bool ack_now = false;          // acknowledge in this progress call, even without data
    bool ack_next = false;         // ACK_REQ arrived: acknowledge no later than the start of
                                   // the next progress call (a reply posted in between
                                   // carries the acknowledgement)
    uint32_t unacked_rx = 0;       // packets delivered since the last acknowledgement sent
    uint32_t unacked_rx_bytes = 0; //   and their payload bytes
    uint64_t ack_since_ns = 0;     // when ack_pending became true
    uint32_t reorder_count = 0;    // buffered out-of-order packets
    uint32_t reorder_cap = 0;      // slots allocated in reorder (0, or >= window)
    std::unique_ptr<int32_t[]> reorder;   // window slots: rx buffer index or -1 (a packet's
                                          // length is in its header); allocated with the
                                          // first packet out of order (Nic::reorder_slots),
                                          // read only while reorder_count != 0
    struct Inbound {
        bool active = false;       // a multi-packet message is being received
        bool discard = false;      // refused: consume its remaining packets silently
        uint8_t opcode = 0;
        QpContext *qp = nullptr;   // SEND: receiving QP
        srcnic_recv_wqe_t rwqe{};  // SEND: the buffer taken from its receive ring
        uint32_t offset = 0;       // SEND: bytes placed
        uint32_t first_psn = 0;    // PSN of its first segment (what an error answer names)
        int16_t refusal = 0;       // a status to refuse it with at its next segment (its QP
                                   // went away mid-message); 0 = none
        uint32_t src_qpn = 0;
        uint32_t imm = 0;
        uint32_t length = 0;
    } inbound;

    ConnActive *next_free = nullptr;   // the pool's free list

    // Nothing in flight either way, nothing owed.
    bool quiet() const
    {
        return head == nullptr && !ack_pending && !inbound.active && reorder_count == 0 &&
               !has_deferred_ack && err_answers_unsent == 0;
    }
    bool in_timeout_recovery() const
    {
        return recovery == Recovery::kTimeout || recovery == Recovery::kTimeoutHole;
    }
    bool unacked() const { return acked_psn != send_psn; }
    // A new packet may go: within the window, the short window and the full window.
    bool window_open() const
    {
        const uint32_t inflight = send_psn - acked_psn;
        return inflight < window && short_inflight < short_window &&
               inflight - short_inflight < full_window;
    }
    // Enough received since the last acknowledgement to send one now.
    bool ack_due() const { return unacked_rx >= window / 4 || unacked_rx_bytes >= ack_bytes; }
    // The oldest PSN the peer has not reported holding (its newest cumulative ack, never before
    // what is acknowledged here).
    uint32_t oldest_unreported() const { return psn_before(acked_psn, sack_base) ? sack_base : acked_psn; }
    // The peer reported holding this PSN (cumulatively or selectively) in its newest ack.
    bool peer_holds(uint32_t psn) const
    {
        if (psn_before(psn, sack_base)) {
            return true;
        }
        const uint32_t off = psn - sack_base - 1;
        return off < 64 && ((peer_sack >> off) & 1) != 0;
    }
};

// What a connection's traffic has been (the agent's status report): software statistics, kept
// per slot beside the connections and counted apart from the state a NIC must hold.
struct ConnStats {
    uint64_t tx_bytes = 0;         // datagram bytes sent, retransmissions included
    uint64_t rx_bytes = 0;         // datagram bytes received on it
    uint32_t tx_packets = 0;       // datagrams sent (wraps)
    uint32_t rx_packets = 0;       // datagrams received (wraps)
    uint32_t retransmits = 0;      // packets sent again (wraps)
};

// A remote NIC as a slot of the peer table names it: its address, its incarnation and its
// secret. A connection's is an entry of the NIC's table (Nic::peer_nic_ref), kept once per
// remote NIC and shared (a hardware NIC's address handle): a connection holds its entry from
// its open until its slot is reused, so that a packet a released connection's peer still sends
// is answered (Nic::reject_unknown_id). A DC slot, reattached at every stream, holds its own
// (DcConn).
struct PeerNic {
    LinkAddr addr;                 // its link address
    uint64_t nic = 0;              // its incarnation
    uint64_t secret = 0;           // its secret, from its address: proves the SYN packets sent
                                   // to it until a connection learns peer_conn (PROTOCOL.md
                                   // §7.1); 0 while no address of it is known here (it opened
                                   // to us)
    uint32_t refs = 0;             // table entries: the slots naming it; 0 = a free entry
};

// What every connection keeps, busy or idle: identity, the peer's, the next PSN each way, the
// round-trip estimate, and its active half while it has one: one cache line (tests guard its
// size). Cache-line aligned: connections, QPs and NICs are written on every packet, and two of
// them allocated next to each other may belong to NICs driven by different threads; they must
// not share a line. DC initiators and targets are DcConns: a Connection and their stream.
struct alignas(64) Connection {
    Connection() : in_active(false), closing(false), self(false), dc_slot(false) {}

    // --- identity ---
    ConnState state = ConnState::kFree;
    ConnKind kind = ConnKind::kConn;
    uint16_t gen = 0;              // this connection's generation: the slot's opens-th value
                                   // of a keyed permutation (Nic::gen_for), so that a peer
                                   // cannot guess it and no two of 65536 opens repeat it
    uint32_t id = 0;               // slot | gen << 16 (never 0); kept when the connection is
                                   // released, with the peer's identity below, until the slot
                                   // is reused: a packet its peer still sends to it is then
                                   // answered with RST (Nic::reject_unknown_id)
    uint16_t opens = 0;            // connections the slot has held (wraps): gen_for's input
    int16_t fail_status = 0;       // why failed_gen failed
    uint32_t failed_gen = kNoGen;  // generation that failed last, for srcnic_dest_status
    uint32_t peer = 0;             // the remote NIC: its entry in the NIC's PeerNic table (a
                                   // connection; a DC slot's is in its DcConn)
    uint32_t peer_conn = 0;        // remote connection id, 0 until learned
    uint32_t peer_job_key = 0;     // job key of the peer's latest packet (a NIC serving several
                                   // owners stamps its acknowledgements with it)
    // --- sequence and timing, each way ---
    uint32_t next_psn = 1;         // next PSN to assign
    uint32_t expected_psn = 1;     // next PSN to deliver
    uint32_t srtt_us = 0;          // smoothed round-trip time, µs (0 = no sample yet)
    uint32_t rttvar_us = 0;        // round-trip time variation, µs
    uint16_t seg_payload = 0;      // payload bytes per packet on the path to the peer (a UDP
                                   // datagram: less than 64 KiB)
    // --- scheduling and kind ---
    bool in_active : 1;            // on the NIC's list of connections with work or timers
    bool closing : 1;              // connection: we asked the peer to CLOSE it (§8.6); no
                                   // new request goes on it meanwhile. DCI: it sent DC_CLOSE
                                   // and waits for its target to confirm (§8.8), attached to
                                   // no Remote, executing nothing
    bool self : 1;                 // a connection of this NIC to itself, or the one that
                                   // receives what such a one sends (PROTOCOL.md §5.7)
    bool dc_slot : 1;              // the slot is a DcConn (it serves DCIs and DC targets only)
    uint64_t used = 0;             // DCI: when a request last went on it; DC target: when it
                                   // last received; connection: the last transmit pass it was
                                   // on the active list (ns): the least recent goes first
    ConnActive *act = nullptr;     // the active half, or nullptr while idle

    // Nothing in flight either way, nothing owed: a DCI may be handed to another target, a DC
    // target context evicted, a connection's active half given back (PROTOCOL.md §8).
    bool quiet() const { return act == nullptr || act->quiet(); }
    bool unacked() const { return act != nullptr && act->unacked(); }
};

// A DC initiator (DCI) or a DC target context: a Connection, the remote NIC of its current
// stream and the stream (§8). Bounded in number (srcnic_config_t.num_dci, dc_targets), kept in
// slots of their own; its peer inline, since a DC slot names another remote NIC at every stream.
struct DcConn : Connection {
    DcConn()
        : xack_listed(false), id_known(false), release_asked(false), rev_run(false), rev_sent(false),
          rev_ok(false), rev_listed(false)
    {
        dc_slot = true;
    }

    PeerNic peer_nic;              // the remote NIC (refs unused)
    uint32_t stream = 0;           // the stream's number (header field stream)
    uint32_t remote = 0;           // DCI: index of the Remote it is attached to; DC target
                                   // that sent requests back (rev_sent): the Remote they came
                                   // from
    uint32_t dc_taken = 0;         // DCI: requests taken since it attached (dc_quota); closing
                                   // (§8.8): DC_CLOSEs sent (and Connection::used: the last, when)
    bool xack_listed : 1;          // DC target: in Nic::xack_cands_ (its slot is)
    bool id_known : 1;             // DC target: a packet of the stream named it by its id, so
                                   // the DCI can close it (DC_CLOSE needs the id)
    bool release_asked : 1;        // DCI: the target asked it to close the stream once quiet
                                   // (kFlagDcRelease)
    bool rev_run : 1;              // DCI: executed a request its target context sent back along
                                   // the stream (§8.8): it closes with a confirmed DC_CLOSE
    bool rev_sent : 1;             // DC target: sent a request back along the stream (§8.8)
    bool rev_ok : 1;               // DC target: the DCI's latest packet said it runs requests
                                   // sent back (kFlagDcReverse)
    bool rev_listed : 1;           // DC target: in Nic::rev_cands_ (its slot is)
};

// A DCI's or DC target's DC state (c->kind != ConnKind::kConn).
inline DcConn *dc_of(Connection *c) { return static_cast<DcConn *>(c); }
inline const DcConn *dc_of(const Connection *c) { return static_cast<const DcConn *>(c); }
// The stream number c's packets carry: 0 on a connection.
inline uint32_t stream_of(const Connection *c) { return c->dc_slot ? dc_of(c)->stream : 0; }

// Owns a slot's Connection or DcConn (no virtual destructor: a Connection is one cache line).
struct ConnDeleter {
    void operator()(Connection *c) const
    {
        if (c != nullptr && c->dc_slot) {
            delete static_cast<DcConn *>(c);
        } else {
            delete c;
        }
    }
};
using ConnPtr = std::unique_ptr<Connection, ConnDeleter>;

} // namespace srcnic

#endif
