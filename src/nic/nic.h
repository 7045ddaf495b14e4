// The software SRC NIC: owns the link, the QPs, the memory-region table, the peer table of
// connections and the packet buffers, and runs the pipeline of doc/ARCHITECTURE.md ("A
// message's way"):
//
//   TX: QP send rings --requester--> connection FIFOs --tx scheduler--> link.tx_burst
//   RX: link.rx_burst --rx demux--> responder (requests) / completer (answers, acks)
//
// Each stage is a file of its own (requester.cc, tx_scheduler.cc, rx_demux.cc with rx_poll.h,
// responder.cc, completer.cc); stages hand work to each other only through connection state
// and the connection's place on the active list, never by calling into each other's logic.
#ifndef SRCNIC_NIC_NIC_H
#define SRCNIC_NIC_NIC_H

#include "conn/connection.h"
#include "conn/refused_set.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/nic_config.h"
#include "core/secure_random.h"
#include "link/link.h"
#include "mr/mr_table.h"
#include "qp/qp.h"
#include "wire/header.h"

#include <srcnic/srcnic.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

// Marks a function on the data path: a packet's way from the link to a completion and from a
// post to the link, the functions every message runs. GCC places such functions together (in
// .text.hot) and optimizes them for speed. Between a receive and its reply the engine runs
// about 15 KB of code, and the more code runs just before a system call, the slower the
// kernel's own path. Marking these made the ping-pong's round trip 20-65 ns shorter, the
// kernel's send 15-20 of it (perf/results/2026-11-23-engine/NOTES.md, "the twelfth pass").
#define SRCNIC_HOT __attribute__((hot))

namespace srcnic {
class Qp;
class MrTable;
} // namespace srcnic

// What every kind of NIC handle does: the engine itself (srcnic::Nic, embedded) or a NIC that a
// node agent runs for this process (an attachment, agent/attach.h). The C API calls these.
struct srcnic_nic {
    virtual ~srcnic_nic() = default;
    virtual const srcnic_nic_addr_t &addr() const = 0;
    virtual size_t max_msg() const = 0;
    virtual unsigned progress() = 0;
    virtual unsigned transmit() = 0;
    virtual int event_fd() const = 0;
    virtual srcnic_status_t arm() = 0;
    virtual srcnic_status_t qp_create(const srcnic_qp_config_t &config, srcnic::Qp **qp_p) = 0;
    virtual void qp_destroy(srcnic::Qp *qp) = 0;
    virtual unsigned qp_cancel(srcnic::Qp *qp, srcnic_dest_t dest, uint32_t tag) = 0;
    virtual srcnic_status_t dest_create(const srcnic_nic_addr_t &remote, uint32_t qpn,
                                        srcnic_dest_t *dest_p) = 0;
    virtual srcnic_status_t dest_status(srcnic_dest_t dest) const = 0;
    virtual uint64_t counter(srcnic_counter_t c) const = 0;
    virtual unsigned num_connections() const = 0;
    virtual size_t conn_state_bytes() const = 0;
    // The protection domain whose regions this NIC's peers may access.
    virtual srcnic_pd *pd() const = 0;
    // Memory the NIC reads and writes without a copy (srcnic_nic_mem_alloc).
    virtual void *mem_alloc(size_t size) = 0;
    virtual void mem_free(void *ptr, size_t size) = 0;
    // An attachment to the node agent (else this process's own engine).
    virtual bool attached() const = 0;
    // Returns once nothing the NIC accepted before the call still has to touch this process's
    // memory unchecked (srcnic_nic_fence_memory).
    virtual srcnic_status_t fence_memory() = 0;
    // Attachment: the kernel refused this process (errno err) the copy of a READ the agent left
    // to it (kCqeDirectRead, posted on QP qpn): the agent copies it, and every later READ
    // (agent/proto.h, kReadCopy). Returns the READ's status.
    virtual srcnic_status_t read_copy(uint32_t qpn, const srcnic_wqe_t &wqe, int err)
    {
        (void)qpn, (void)wqe, (void)err;
        return SRCNIC_ERR_UNSUPPORTED;
    }
    // Attachment: this process is done with one such READ (copied, or failed), so the agent
    // may take its QPs' later requests (SharedHeader::direct_copied).
    virtual void read_copied() {}
};

struct srcnic_pd {
    std::unique_ptr<srcnic::MrTable> mrs;
};

struct srcnic_mr {
    srcnic_pd *pd;
    uint32_t slot;
    uint64_t rkey;
};

namespace srcnic {

// Removes id from ids if it is there (order not kept: the last entry takes its place).
inline void erase_id(std::vector<uint32_t> &ids, uint32_t id)
{
    auto it = std::find(ids.begin(), ids.end(), id);
    if (it != ids.end()) {
        *it = ids.back();
        ids.pop_back();
    }
}

struct LinkAddrHash {
    size_t operator()(const LinkAddr &a) const { return a.hash(); }
};

// A pure acknowledgement of deliveries that did not ask for one (no ACK_REQ) waits at most this
// long for reverse traffic to ride on (PROTOCOL.md §5.3). Senders ask where they need prompt
// acknowledgements, so this bounds the tail of a request posted LAZY_ACK (and the delay inside a
// stream, which acknowledges by count first). Long enough for a peer that is off its CPU for a
// scheduler slice to send a reply that carries it: 100 µs expired so in a 4-rank all-to-all on
// 2 CPUs, one ACK of its own per rank and iteration (perf/results/2026-11-27-lazy-ack).
constexpr uint64_t kAckDelayNs = 400 * 1000;
// What a tail-loss probe allows beyond two round trips when the newest packet asked for its
// acknowledgement (ACK_REQ: the receiver sends it at its next progress call); one that did not
// ask allows kAckDelayNs (§5.5).
constexpr uint64_t kAskedAckSlackNs = 100 * 1000;
// transmit() calls with nothing activated between two checks of the connections' timers (RTO,
// delayed ack, RNR back-off): they are late by at most this many polls.
constexpr uint32_t kTxTimerCalls = 8;
// Largest READ, or piece of one, the agent copies for a process in one request (copy_read): its
// other processes wait meanwhile, some 25-50 µs.
constexpr uint64_t kReadCopyMax = 256 * 1024;
// Bytes of a local WRITE (Nic::local_write) placed per call: two cross-memory copies of this
// size take some 40 µs, and the agent's other processes wait meanwhile.
constexpr uint64_t kLocalWriteChunk = 128 * 1024;
static_assert(kLocalWriteChunk <= kReadCopyMax, "a piece fits the copy buffer");
// What a local SEND or WRITE counts for against a QP's share of local work in a pass (about
// kLocalWriteChunk bytes), however short: a ring of empty ones is bounded too.
constexpr uint64_t kLocalOpBytes = 1024;
// Messages of the connection to itself that self_clear looks through: with more in flight a
// request goes as packets instead of being placed locally.
constexpr uint32_t kSelfClearScan = 64;

// Reads bytes [off, off + len) of a request's data (its WQE's gather list, not inline) from
// space into dst; false if space does not have them.
bool read_request(const srcnic_wqe_t &wqe, AddrSpace &space, uint64_t off, uint32_t len, uint8_t *dst);
// Message descriptors the requester leaves for the responder's answers.
constexpr unsigned kAnswerReserve = 16;
// A WRITE or READ longer than this goes as chunks of about this many bytes (whole packets of its
// connection), each a message of its own
// on the wire, and the next chunk is handed to the connection only once no more than half a
// chunk of what it holds is still to transmit. Messages of other QPs posted meanwhile go between
// two chunks: one process's large transfer does not hold the connection it shares with others
// for its whole length (the data already in flight still goes first). Requests of the same QP
// keep their order.
constexpr uint64_t kChunkBytes = 256 * 1024;
// While another QP's requests share the connection (one joined its FIFO within the stream's
// last kMixedChunks chunks), the chunks are smaller: a message of that QP then waits behind at
// most about one and a half of them not yet transmitted, besides what is in flight
// (perf/hol_engine_bench: 8-byte latency beside a WRITE stream on one connection). A stream
// alone keeps kChunkBytes: smaller chunks cost it bandwidth (one chunk is taken per pass).
// Counted in chunks, not time, so that it is the same on a loaded machine.
constexpr uint64_t kMixedChunkBytes = 32 * 1024;
constexpr uint16_t kMixedChunks = 64;
// Smaller still while the other QP's requests are short (SENDs and WRITEs of one packet,
// whose latency a stream beside them must not hold up; not READs, whose answers may be bulk):
// an 8-byte ping then waits behind half as much, at most 2.8x its unloaded median at the 99th
// percentile in 15 runs (median 2.0x), against up to 6.1x (2.8x) at kMixedChunkBytes, the
// stream beside it at two thirds of that rate (perf/results/2026-12-03-hol-chunks/). Longer
// requests of another QP leave it kMixedChunkBytes: a smaller chunk would cost both streams
// rate for nothing.
constexpr uint64_t kMixedShortChunkBytes = 16 * 1024;
// A transmit batch goes to the link once its payloads add up to this many bytes, even if it
// has room for more datagrams: the kernel then copies each payload while the bytes that
// sealing it just read are still in the CPU's L2 cache. A full batch of 64-KB datagrams (2 MiB)
// outgrew it, and the copy read them again from L3 (streams 3-7% faster;
// perf/results/2026-11-22-engine/NOTES.md).
constexpr uint64_t kTxBatchBytes = 256 * 1024;
// An in-order SEND or READ_RESP segment with at least this many payload bytes is copied into
// place as its CRC is checked, in one pass over the bytes (rx_datagram, place_target), rather
// than checked and then copied. Below it the two passes cost no more: the bytes stay in L1.
constexpr uint32_t kCheckWhilePlacingMin = 4096;

// The protocol engine. It sees its link only through Link (link/link.h); its data path (the
// two calls per progress() that move datagrams: rx_burst in rx_poll, tx_burst in tx_flush) is
// compiled for the link's type by NicOver<L> (nic_over.h), so that over a final backend (the UDP
// link) they are direct calls with the link's common cases inlined, and over any other link
// (tests: loopback, faulty) virtual calls. A backend picks its instantiation where it creates the
// NIC (nic_udp.cc); protocol code never names one.
// Cache-line aligned like Connection and QpContext (see connection.h).
class alignas(64) Nic : public srcnic_nic {
public:
    // Creates a NIC over a given link (tests: loopback or faulty links), calling it through
    // Link's virtual functions. The config is validated; a bad value is INVALID_PARAM with a
    // message naming it.
    static srcnic_status_t create(const srcnic_config_t &config, std::unique_ptr<Link> link,
                                  std::unique_ptr<Nic> *nic_p);
    // The same with the data path compiled for link type L, which link must have (nic_over.h).
    template <class L>
    static srcnic_status_t create_over(const srcnic_config_t &config, std::unique_ptr<Link> link,
                                       std::unique_ptr<Nic> *nic_p);
    // Creates a NIC over UDP (and the faulty link when fault injection is configured;
    // nic_udp.cc).
    static srcnic_status_t create_udp(const srcnic_config_t &config, std::unique_ptr<Nic> *nic_p);
    ~Nic() override;

    const srcnic_nic_addr_t &addr() const final { return addr_; }
    size_t max_msg() const final { return max_msg_; }
    // progress(): NicOver<L> (nic_over.h), the data path compiled for the link's type.
    // The first half of progress(): send rings -> connections -> link; no receive.
    unsigned transmit() final;
    // The event fd: created, with the timer and wake-up descriptors it watches and the link's
    // event fd, at the first event_fd() or arm() (events_open()); -1 if that failed (logged).
    int event_fd() const final { return events_open() == SRCNIC_OK ? epoll_fd_ : -1; }
    srcnic_status_t arm() final;

    // A QP of this process (its rings in this process's memory, served for the NIC's own
    // owner: this process's memory and the configured protection domain).
    srcnic_status_t qp_create(const srcnic_qp_config_t &config, Qp **qp_p) final;
    void qp_destroy(Qp *qp) final;
    unsigned qp_cancel(Qp *qp, srcnic_dest_t dest, uint32_t tag) final;

    // A QP whose host end is elsewhere (the agent's clients): rings at block, laid out by
    // layout and initialised by the host, served for owner (which outlives it).
    srcnic_status_t qp_attach(Owner *owner, const QpRingLayout &layout, void *block,
                              QpContext **ctx_p);
    // Ends such a QP: its requests still on the wire finish as NOPs, a message being received
    // into it is refused, and its number is never reused by the next QP in its slot.
    void qp_detach(QpContext *ctx);
    unsigned qp_cancel(QpContext *ctx, srcnic_dest_t dest, uint32_t tag);
    // A READ (wqe, as posted on ctx, or a piece of one of at most kReadCopyMax bytes) the agent
    // left to its process to copy and the kernel did not let it: checked again as any READ,
    // then copied here from the target's memory into the requester's, through a bounce buffer
    // (agent: kReadCopy). Returns its status.
    srcnic_status_t copy_read(QpContext *ctx, const srcnic_wqe_t &wqe);
    // Serve QPs of several owners, each with its job key (the agent): the header stage accepts
    // any key, and a request reaches only a QP whose owner's key it carries (PROTOCOL.md §4).
    // Set before the NIC carries traffic.
    void serve_several_owners() { several_owners_ = true; }
    // The owner is going away: every READ answer still reading its memory stops (the rest of
    // each goes as an error answer), so that nothing is read from it again.
    void owner_release(Owner *owner);

    srcnic_status_t dest_create(const srcnic_nic_addr_t &remote, uint32_t qpn,
                                srcnic_dest_t *dest_p) final;
    srcnic_status_t dest_status(srcnic_dest_t dest) const final;
    // Changes whenever a remote's connection or stream fails or its entry starts afresh: while
    // it has not, dest_create() to the same remote (address, incarnation and secret) gives the
    // same peer whatever the QP, so an attached process may reuse what it was told
    // (agent/proto.h, SharedHeader::remote_epoch).
    uint64_t remote_epoch() const { return remote_epoch_; }
    // The connection of dest: its smoothed round-trip time and current retransmission timeout,
    // µs (tests; false if the connection is not open).
    bool dest_timing(srcnic_dest_t dest, uint32_t *srtt_us, uint32_t *rto_us) const;

    // A completion was written for owner's QP. This process's own: wake a waiter that armed
    // the event fd (arm() found nothing pending, so the completion may come from background
    // progress it does not see). Another owner's: listed for take_notified().
    void notify_completion(Owner *owner)
    {
        if (owner == &own_) {
            if (armed_) {
                kick();
            }
        } else if (!owner->notify_pending) {
            owner->notify_pending = true;
            notified_.push_back(owner);
        }
    }
    // Writes what the write-behind holds (staging.cc): before a completion is written, when a
    // receive burst ends, before an owner or QP goes.
    void flush_writes()
    {
        if (wb_.len != 0) {
            write_behind_flush();
        }
    }
    // The owners (other than this process) that got completions since the last call.
    std::vector<Owner *> &notified() { return notified_; }

    uint64_t counter(srcnic_counter_t c) const final { return counters_[c]; }
    unsigned num_connections() const final { return num_conns_; }
    size_t conn_state_bytes() const final;
    // What this NIC holds per peer, bytes, as a hardware NIC would hold it in its contexts and
    // tables (not its packet buffers, rings or message descriptors, which a hardware NIC keeps
    // in host memory): see perf/README.md ("DC").
    struct StateBytes {
        size_t connections = 0;    // open connections (Connection each)
        size_t dcis = 0;           // attached DCIs: the same
        size_t dc_targets = 0;     // DC target contexts: the same
        size_t active = 0;         // active halves, held or kept in the pool: each with its
                                   // reorder slots
        size_t closed = 0;         // closed-table and refused-connection entries
        size_t remotes = 0;        // destinations' remote NICs (Remote each)
        size_t peer_nics = 0;      // the remote NICs the peer table's slots name (PeerNic
                                   // each: the address handles)
        size_t stats = 0;          // per-connection traffic statistics (software only: a NIC
                                   // need not keep them; not in total())
        size_t qps = 0;            // QP contexts (QpContext each; not their rings)
        size_t total() const { return connections + dcis + dc_targets + active + closed + remotes + peer_nics + qps; }
    };
    StateBytes state_bytes() const;
    // Connections (of every kind) holding an active half now; the pool keeps up to kActiveKeep
    // more for the next to get work.
    unsigned active_halves() const { return act_held_; }
    static constexpr unsigned kActiveKeep = 16;
    // The open connections as a JSON array: peer, its incarnation, window, round trip, and
    // what went each way (the agent's status report).
    std::string peers_json() const;
    srcnic_pd *pd() const final { return pd_; }
    void *mem_alloc(size_t size) final { return std::aligned_alloc(64, (size + 63) & ~size_t(63)); }
    void mem_free(void *ptr, size_t) final { std::free(ptr); }
    bool attached() const final { return false; }
    // This process's engine: the caller serializes calls on the NIC, so none is between a key
    // check and the access it allows; what waits in the write-behind lands now.
    srcnic_status_t fence_memory() final
    {
        flush_writes();
        return SRCNIC_OK;
    }
    // Registration in pd() and the WQE check of this NIC's posts (tests).
    srcnic_status_t mr_reg(void *addr, size_t length, unsigned access, srcnic_mr_t **mr_p)
    {
        return srcnic_pd_mr_reg(pd_, addr, length, access, mr_p);
    }
    void mr_dereg(srcnic_mr_t *mr) { srcnic_mr_dereg(mr); }
    srcnic_status_t validate_wqe(const srcnic_wqe_t &wqe) const { return srcnic::validate_wqe(wqe, max_msg_); }
    Link &link() { return *link_; }
    // Packets in flight for a connection whose packets carry seg_payload bytes: the configured
    // window, or the automatic one (kAutoWindowBytes).
    uint32_t window_for(uint32_t seg_payload) const;
    // Full packets in flight for such a connection: its window, or with the automatic window
    // no more than the link's receive queue holds (kMinFullWindow at least).
    uint32_t full_window_for(uint32_t seg_payload) const;

protected:
    Nic(const srcnic_config_t &config, std::unique_ptr<Link> link);
    // progress() over link type L (NicOver<L>::progress).
    template <class L> unsigned progress_over();
    // The transmit batch goes to the link as an L (NicOver<L>'s constructor).
    template <class L> void flush_over() { tx_flush_ = &Nic::tx_flush_over<L>; }

private:
    srcnic_status_t init();
    void count(srcnic_counter_t c, uint64_t n = 1) { counters_[c] += n; }

    // --- peer table (conn/peer_table.cc) ---
    Connection *conn_by_id(uint32_t id);
    // mapped: found by its peer's address (dest_create, packets without our id); a connection
    // that receives what this NIC sends itself is not (it is found through its mirror).
    // kind: a connection (within max_connections; counts CONN_REFUSED when at it), a DCI or a
    // DC target context (within num_dci and dc_targets); nullptr when at the bound.
    Connection *conn_open(const LinkAddr &addr, uint64_t peer_nic, bool mapped = true,
                          ConnKind kind = ConnKind::kConn);
    // The connection that receives what this NIC's own connection `sender` sends it, or nullptr.
    Connection *self_receiver(uint32_t sender);
    // The remote NIC c names (its address, incarnation and secret).
    PeerNic &peer_of(Connection *c) { return c->dc_slot ? dc_of(c)->peer_nic : peer_nics_[c->peer]; }
    // c goes to this NIC itself (Connection::self is set only once it received).
    bool to_self(const Connection *c) const
    {
        const PeerNic &p = peer_of(c);
        return p.addr == self_addr_ && p.nic == addr_.incarnation;
    }
    const PeerNic &peer_of(const Connection *c) const
    {
        return c->dc_slot ? dc_of(c)->peer_nic : peer_nics_[c->peer];
    }
    // The entry of the remote NIC (addr, nic), found or added, with one more reference; and a
    // reference given back (an entry no slot names is freed; entry 0 is never).
    uint32_t peer_nic_ref(const LinkAddr &addr, uint64_t nic);
    void peer_nic_unref(uint32_t index);
    // The n-th generation of connection slot `slot`: a permutation of the 16-bit values keyed by
    // gen_key_ (four Feistel rounds of SipHash), so that consecutive generations of a slot
    // are distinct for 65536 opens and none predicts another.
    uint16_t gen_for(uint32_t slot, uint16_t n) const;
    void conn_fail(Connection *c, srcnic_status_t status);
    void conn_release(Connection *c);
    // c's active half (ConnActive), taken from the pool, or allocated, if it has none: called
    // before anything reads or writes c->act (a packet for c, a request or an answer to go on
    // it, a control packet to send).
    ConnActive *engage(Connection *c)
    {
        return c->act != nullptr ? c->act : engage_slow(c);
    }
    ConnActive *engage_slow(Connection *c);
    // A request may go on c now: it holds its active half, or one may be taken (max_active).
    bool may_engage_request(const Connection *c) const
    {
        return c->act != nullptr || config_.max_active == 0 || act_held_ < config_.max_active;
    }
    // Gives c's active half back to the pool when c is idle: nothing in flight either way,
    // nothing owed, no timer, not closing (called as c leaves the active list).
    void disengage(Connection *c);
    void act_put(Connection *c);   // gives c's half back (kept or freed)
    // a's reorder slots, allocated (all -1) if it has none yet.
    int32_t *reorder_slots(ConnActive *a);
    ConnStats &stats_of(const Connection *c) { return conn_stats_[c->id & 0xffff]; }
    // The timeout c would start with now (its current one while active).
    uint32_t rto_of(const Connection *c) const;
    void activate(Connection *c);
    // Something must go out in this progress call, not only at the next one (see progress()).
    void activate_now(Connection *c)
    {
        tx_urgent_ = true;
        activate(c);
    }
    // c owes its peer an acknowledgement in the next transmit pass (an ACK_REQ, a gap, a
    // duplicate): its age counts from the first time it was owed. The caller activates c.
    ConnActive *owe_ack_now(Connection *c)
    {
        ConnActive *a = engage(c);
        if (!a->ack_pending) {
            a->ack_since_ns = now();
        }
        a->ack_pending = a->ack_now = true;
        return a;
    }

    // --- destinations and DC (conn/dc.cc, PROTOCOL.md §8) ---
    // A remote NIC this NIC holds destinations for: srcnic_dest_t.peer names it ((index + 1)
    // | gen << 16), and it says where the destination's requests go: its connection, or (DC)
    // whichever DCI is attached to it. The address a DC packet needs lives here, as a DC
    // address handle lives in a hardware NIC's WQE.
    struct Remote {
        LinkAddr addr;
        uint64_t nic = 0;          // its incarnation
        uint64_t secret = 0;       // its secret (proves our SYN packets)
        uint32_t conn = 0;         // connection mode: the connection's id
        uint32_t dci = 0;          // DC mode: the id of the DCI attached to it, 0 = none
        uint16_t gen = 0;          // bumped when its destinations fail for good
        bool dc = false;           // served over DC
        int16_t fail_status = 0;   // DC mode: its stream failed (a status), 0 = none
        uint32_t failed_gen = kNoGen;   // the last generation that failed ...
        int16_t failed_status = 0;      // ... and why
        TxMsg *backlog_head = nullptr;  // requests a refused connection had taken (USE_DC),
        TxMsg *backlog_tail = nullptr;  // waiting for a DCI, in order
        uint32_t dc_recent = 0;         // DC mode: requests since dc_window_ns ...
        uint64_t dc_window_ns = 0;      // ... (promotion: dc_promote in kPromoteWindowNs)
        uint64_t no_promote_until = 0;  // not promoted before (the peer refused, no room)
        uint32_t rev = 0;          // DC mode: the id of the target context (of a stream from
                                   // this remote NIC) that carries its requests back (§8.8)
                                   // while they are unacknowledged, 0 = none
    };
    // The Remote dest names, or nullptr (no such index, or an older generation).
    Remote *remote_of(srcnic_dest_t dest)
    {
        const uint32_t idx = (dest.peer & 0xffff) - 1;
        if (idx >= remotes_.size() || remotes_[idx].gen != (dest.peer >> 16)) {
            return nullptr;
        }
        return &remotes_[idx];
    }
    uint32_t remote_id(const Remote &r) const
    {
        return static_cast<uint32_t>(&r - remotes_.data() + 1) | static_cast<uint32_t>(r.gen) << 16;
    }
    // Why the requests of a Remote whose connection or stream is gone fail, or OK.
    srcnic_status_t remote_status(const Remote &r) const;
    // The connection or DCI a request to dest goes on. nullptr: *status says why it fails, or
    // is NO_RESOURCE when it must wait (no DCI free, or its DCI is at its quota while another
    // target waits): the request then stays where it is. Moves a Remote's backlog onto its DCI
    // first. request: a WQE the requester takes (counted against the quota); false for the
    // next chunk of one already taken.
    Connection *route(srcnic_dest_t dest, srcnic_status_t *status, bool request = true);
    // The connection or DCI dest's requests are on now, without attaching one (or nullptr).
    Connection *current(srcnic_dest_t dest);
    // Of the DCIs or DC target contexts ids names, the least recently used that is quiet and
    // has not been used for min_idle_ns before now; nullptr if none.
    Connection *lru_quiet(const std::vector<uint32_t> &ids, uint64_t now, uint64_t min_idle_ns);
    // Attaches a DCI to r (a free one, or the least recently used quiet one): a new stream.
    Connection *dci_attach(Remote &r);
    // The DCI goes back to the pool; its stream is over (every request acknowledged): the
    // target is told with DC_CLOSE.
    void dci_release(Connection *c);
    // Releases a DCI quiet for kDcMinQuietNs (one looked at per call: the requester's).
    void dci_sweep(uint64_t now);
    // Moves what r's backlog holds onto DCI c, in order.
    void backlog_to(Remote &r, Connection *c);
    // Requests back along a stream (PROTOCOL.md §8.8). r's requests may go on target context
    // t: t serves a stream from r's NIC and owes its DCI an acknowledgement for the next
    // transmit pass, so that the DCI cannot close before a packet of t's reaches it.
    bool rev_can_take(const Connection *t) const;
    // A target context of a stream from r's NIC that may take r's requests (nullptr if none),
    // among those listed when ACK_REQ arrived on their DCI's offer; drops the listed ones
    // that may not (all of them for r == nullptr: the transmit pass's end).
    Connection *rev_find(const Remote *r);
    // t holds requests it sent back that are not acknowledged yet.
    static bool rev_unacked(const Connection *t);
    // DCI c, quiet but for the acknowledgement it owes, that ran requests its target sent back:
    // closes the stream now with DC_CLOSE (carrying that acknowledgement) while the DCIs do not
    // cover the targets, rather than send an ACK and be handed over later. True if it did.
    bool dci_close_early(Connection *c);
    // DCI c's stream is over and its target sent requests back: DC_CLOSE, kept (closing, no
    // Remote) until the target confirms, resent meanwhile (dc_close_sweep), so that a target
    // whose acknowledgement was lost hears how its stream ended instead of resending into a
    // DCI serving another stream.
    void dci_close(Connection *c);
    // Resends the DC_CLOSE of closing DCIs once per retransmission timeout; after retry_count
    // of them the DCI goes (its target is gone: nothing of its stream is outstanding here).
    // Looks at them only once one is due (dc_close_due_ns_).
    void dc_close_sweep(uint64_t now);
    // A closing DCI received h: a confirmation releases it; a request or answer of the stream
    // is not executed but answered with DC_CLOSE again.
    void dci_closing_rx(Connection *c, const PacketHeader &h);
    // Target context c received its DCI's DC_CLOSE at its expected PSN (§8.5): the close's
    // acknowledgement applies, nothing owed stays owed, and c goes once quiet; if it sent
    // requests back (§8.8), what the close does not acknowledge goes back first
    // (rev_hand_back) and the close is confirmed.
    void dct_closed(Connection *c, const PacketHeader &h);
    // Target context c's requests sent back that its DCI did not run go to their Remote's
    // backlog, unexecuted, in order, ahead of anything later (to a DCI of its own); the rest
    // of its transmit FIFO is dropped (every answer was acknowledged: its DCI was quiet).
    void rev_hand_back(Connection *c);
    // r's DC traffic stayed high: moves it to a connection if the budget has room (its DCI
    // drained first: nothing reorders), or asks an idle connection to close to make room.
    // Returns false when r's request must wait (its DCI is draining).
    bool promote(Remote &r, uint64_t now);
    // Gives r (served by no connection: new, closed by agreement, or over DC) a connection:
    // the one its peer opened to us meanwhile if there is one (a peer whose SYN arrived
    // first; perhaps closing: then r's requests wait), else a new one, so that two NICs never
    // hold two connections to each other. nullptr when the budget is spent.
    Connection *conn_for(Remote &r);
    // Asks the peer of the least recently active idle connection to CLOSE it (§8.6); false if
    // none is idle.
    bool demote_one(uint64_t now);
    // The connection goes without failing: its Remote (if any) opens another on its next request.
    void conn_close(Connection *c);
    // A CLOSE from c's peer (h.imm: CloseKind).
    void close_received(Connection *c, const PacketHeader &h);
    // Resends the CLOSE asks not answered (one try per rto; the retry budget ends the connection).
    void close_sweep(uint64_t now);
    // The peer answered our connection's first packets with USE_DC: its requests move, in
    // order, to a DC stream to the same peer, and its destinations follow them (§8.1).
    void fall_back_to_dc(Connection *c);
    // The DC target context for DC_INIT SYN packet h from src (live, resumed from the closed
    // table, or new); nullptr when the packet is dropped (counted) or answered with DC_BUSY.
    Connection *dct_for(const PacketHeader &h, const LinkAddr &src);
    // Evicts the least recently used quiet DC target context, remembering its stream in the
    // closed table; false if none is quiet or the closed table has no room.
    bool dct_evict();
    // A DC_INIT packet named a target context that is gone: DC_GONE if its stream is in the
    // closed table (the sender then resends with SYN), else dropped as DROP_DC_STALE.
    void dc_gone(const PacketHeader &h, const LinkAddr &src);
    // Refuses DC_INIT SYN packet h from src for want of a target context: DC_BUSY, and the
    // contexts ask their DCIs to close their streams once quiet for a while (§8.3).
    void dc_busy(const PacketHeader &h, const LinkAddr &src);
    // Whether this NIC's target contexts ask their DCIs to close (dc_busy lately).
    bool dc_crowded();
    // A DCI whose target asked it to close (kFlagDcRelease) goes back to the pool once quiet.
    // Called for every received packet's connection: the test is inline, the release is not.
    void dci_release_if_asked(Connection *c)
    {
        if (__builtin_expect(c->kind == ConnKind::kDci && dc_of(c)->release_asked, 0)) {
            dci_release_asked(c);
        }
    }
    void dci_release_asked(Connection *c);
    // The stream position an ACK of c's carries (§5.4): the next PSN it sent, or, for a target
    // context that sent requests back, the next it assigned, so that its DCI, which must not
    // close before every such request has reached it (§8.8), waits for them.
    static uint32_t ack_position(const Connection *c)
    {
        return c->dc_slot && dc_of(c)->rev_sent ? c->next_psn : c->act->send_psn;
    }
    // DCI c may be handed over or released now: quiet, and if it ran requests sent back
    // (§8.8), room to keep it until its close is confirmed.
    bool dci_may_go(const Connection *c) const
    {
        return c->quiet() && !c->closing &&
               (!dc_of(c)->rev_run || dc_closing_.size() < dc_closing_max());
    }
    // Most DCIs closing at once (§8.8); from half of it on, no DCI offers to run requests sent
    // back (kFlagDcReverse), so that those that already did always find room.
    size_t dc_closing_max() const { return static_cast<size_t>(kDcClosingPerDci) * config_.num_dci; }
    bool dc_reverse_room() const { return 2 * dc_closing_.size() < dc_closing_max(); }
    // A NAK that belongs to no connection here (src_conn 0): DC_BUSY, DC_GONE, USE_DC.
    void tx_nak_unbound(const LinkAddr &to, const PacketHeader &h, NakReason reason);
    // The closed table (§8.4): streams whose target context went, with where they stopped, kept
    // at least closed_linger_ns_ (and, keyed alike, the refused connections of refused_add).
    struct ClosedKey {
        LinkAddr addr;
        uint64_t nic = 0;
        uint32_t id = 0;   // stream number, or the refused connection's id
        bool conn = false; // a refused connection
        bool operator==(const ClosedKey &o) const
        {
            return addr == o.addr && nic == o.nic && id == o.id && conn == o.conn;
        }
    };
    struct ClosedKeyHash {
        size_t operator()(const ClosedKey &k) const
        {
            return k.addr.hash() ^ (k.nic * 0x9e3779b97f4a7c15ull) ^ (static_cast<size_t>(k.id) << 1 | k.conn);
        }
    };
    struct Closed {
        uint32_t rx_psn;   // the stream's next PSN to execute
        uint32_t tx_psn;   // the target context's next PSN to send
        uint64_t seq;      // which closing (closed_seq_) the entry is
    };
    struct ClosedRef {     // the closed table's FIFO, oldest first
        ClosedKey key;
        uint64_t seq;
        uint64_t since_ns;
    };
    // Room for one more entry (retiring entries older than the linger); false if none.
    bool closed_room(uint64_t now);
    // Adds an entry (the oldest goes if the table is full: call closed_room first).
    void closed_add(const ClosedKey &k, Closed v, uint64_t now);
    // Connections refused with USE_DC, remembered at least closed_linger_ns_ so that a
    // duplicate of their packets does not open one once a slot is free (§8.1); was_refused
    // may also say yes, rarely, for one never refused (it is then refused too).
    void refused_add(const ClosedKey &k);
    bool was_refused(const ClosedKey &k);

    // --- requester (requester.cc): QP send rings -> connection FIFOs ---
    unsigned requester_take();
    // Whether wqe, taken from qp's ring at position, was cancelled while it waited there.
    bool cancelled_in_ring(QpContext *qp, const srcnic_wqe_t &wqe, uint32_t position);
    // Hands the next chunk of qp's cursor to its connection if the connection is ready for it;
    // completes the WQE when its connection is gone.
    void take_chunk(QpContext *qp);
    // A READ of another process of this agent by a process that copies such READs itself
    // (Owner::direct_reads): checked here as the responder checks a READ (the target QP, its
    // job key, the rkey and bounds), then completed kCqeDirectRead with the target's PID; true
    // if so. Anything else goes the ordinary way, which answers a failed check with its error.
    bool direct_read(QpContext *qp, const srcnic_wqe_t &wqe, uint64_t length);
    // Whether c (the connection to itself) holds no packets of qp's requests: none left of one
    // that completed early (cancelled, or failed) whose packets could still land after a
    // request placed locally now. (Those of requests outstanding are ruled out by the caller.)
    // False too where more than kSelfClearScan messages are in flight on it.
    bool self_clear(const Connection *c, const QpContext *qp) const;
    // A WRITE to a QP of this NIC (a connection to itself: between two processes of one agent),
    // taken while nothing else of its QP is outstanding or on that connection (self_clear),
    // within the QP's share of local work in the pass (about kLocalWriteChunk bytes, each
    // request counting at least kLocalOpBytes): placed by the NIC from the requester's
    // memory into the target's without packets, as a NIC loops such a WRITE back, checked as
    // the responder checks one (the target QP and its job key, the rkey and bounds of the whole
    // message first, then of each piece, and the target alive). qp's cursor holds it; each call
    // places the next kLocalWriteChunk bytes, and the last (or a failure) completes it.
    void local_write(QpContext *qp);
    // A SEND of at most kLocalWriteChunk bytes to a QP of this NIC (c: the connection to itself),
    // under the same conditions as local_write: placed by the NIC into the target QP's next posted
    // receive buffer and completed on both QPs, as the responder would (no such QP, a buffer
    // too short, a buffer not the target's memory). False, nothing done, where the target has
    // no buffer posted or no room for the completion: it goes as packets, which wait for one.
    bool local_send(QpContext *qp, Connection *c, const srcnic_wqe_t &wqe, uint64_t length);
    // Copies bytes [off, off + len) of wqe's payload (inline, or its gather list in from) to
    // addr in to: OK, INVALID_ADDR (from does not have them) or REMOTE_ACCESS (to refused).
    srcnic_status_t local_copy(const srcnic_wqe_t &wqe, AddrSpace &from, uint64_t off, uint32_t len,
                               AddrSpace &to, uint64_t addr);
    TxMsg *msg_alloc();
    void msg_free(TxMsg *m);
    void msg_append(Connection *c, TxMsg *m);

    // --- tx scheduler (tx_scheduler.cc): connection FIFOs -> link ---
    // after_rx: the pass that follows rx_poll within one progress call.
    unsigned tx_schedule(uint64_t now, bool after_rx);
    // Transmits PSN psn of c; returns its message (nullptr: acknowledged meanwhile).
    const TxMsg *tx_packet(Connection *c, uint32_t psn, bool retransmit);

    // --- memory the NIC cannot touch directly (staging.cc) ---
    // Bytes [off, off + len) of m's data, read from space into the staging cache (a block at a
    // time: one cross-memory read feeds many packets); off counts in the WQE's data (requests)
    // or in the answer (READ_RESP), total is where m's data ends. nullptr if space does not
    // have them (a bad address, an owner gone). Valid until the transmit batch is flushed.
    const uint8_t *stage(const TxMsg &m, AddrSpace &space, uint64_t off, uint32_t len, uint64_t total);
    // Points iov[0..n) (pieces of a request's gather list in space) at memory the NIC can read:
    // translated where space shares it, else one staged piece (*n = 1). False as for stage.
    bool gather_from(const TxMsg &m, AddrSpace &space, uint64_t off, uint32_t len, struct iovec *iov,
                     uint32_t *n);
    // Writes len bytes to addr in space: at once where space shares that memory; else
    // collected while they continue the same range (write-behind) and written with one call
    // at the latest when the receive burst ends or a completion is written (flush_writes).
    // read: the READ the bytes answer, failed if the write fails.
    void write_behind(AddrSpace &space, uint64_t addr, const uint8_t *src, uint32_t len, TxMsg *read);
    void write_behind_flush();
    void tx_control(Connection *c, Opcode op, uint32_t psn, uint32_t imm);
    void tx_reset(const LinkAddr &to, uint64_t to_nic, uint32_t to_conn, uint32_t job_key);
    void fill_ack(Connection *c, PacketHeader *h);
    // Acknowledgements of DC streams carried by other packets (PROTOCOL.md §8.7). A DC target
    // context whose acknowledgement waits for the next transmit pass (ACK_REQ) is listed
    // (xack_list); a packet with a dst_conn built for its initiator's NIC before the pass
    // ends takes it (xack_attach) instead of an ACK of its own, which tx_schedule sends after
    // the pass's other packets only if none did (xack_flush). rx_xack applies one received.
    void xack_list(Connection *c);
    void xack_attach(const Connection *c, PacketHeader *h, const LinkAddr &dst);
    void xack_flush();
    void rx_xack(Connection *c, const PacketHeader &h);
    // A packet to `to` was refused unexecuted (DC_GONE): the DC target contexts of streams from
    // it acknowledge again, with ACKs of their own, what a refused packet may have carried.
    void xack_again(const PeerNic &to);
    // The link did not take h, which carried an XACK: its context owes that acknowledgement again.
    void xack_not_sent(const PacketHeader &h);
    // The next packet of the transmit batch (flushed first if full): its header, with the
    // gather list behind it at *iov_p. Never null: a flush always empties the batch.
    PacketHeader *tx_slot(const LinkAddr &dst, uint32_t job_key, struct iovec **iov_p);
    void tx_commit(uint32_t iovcnt, Connection *c);
    // A packet to this NIC itself goes into a packet buffer, received on the next rx_poll as
    // if the link had delivered it (no system call, no kernel stack, no checksum: it never
    // leaves memory); false when no buffer is free (then it is sealed and goes through the link).
    bool self_deliver(const struct iovec *iov, uint32_t iovcnt);
    // Hands the transmit batch to the link: tx_flush_over<L> (tx_flush.h) for the link's type.
    void tx_flush() { (this->*tx_flush_)(); }
    template <class L> void tx_flush_over();
    void (Nic::*tx_flush_)() = nullptr;
    void check_timers(Connection *c, uint64_t now, bool after_rx);
    void arm_probe(Connection *c, uint64_t now);
    void send_probe(Connection *c);
    void start_resend(Connection *c, uint32_t from, uint32_t end);
    void arm_timer();
    // Whether the connections are idle: none has something to send now (data or a resend its
    // window lets go, an acknowledgement owed at once). If so, *deadline: the earliest of
    // their timers (RTO, probe, RNR back-off, delayed ack), 0 for none (arm()).
    bool tx_idle_until(uint64_t *deadline) const;

    // --- rx demux (rx_demux.cc): link -> stages ---
    // Takes datagrams from the link, an L (inline: defined in rx_poll.h, used only in
    // progress_over).
    template <class L> inline unsigned rx_poll();
    // The time, for protocol timers and RTT samples, which need microseconds, not the
    // nanoseconds a fresh read costs per use (see FreshClock).
    uint64_t now() { return clock_.now(); }
    // sealed false: a packet this NIC sent itself (self_deliver), which carries no checksum.
    void rx_datagram(int32_t buf, const uint8_t *data, uint32_t len, const LinkAddr &src,
                     bool sealed = true);
    // h: the packet's header, already copied out of buffer `buf` by the caller.
    // placed: where the payload was already copied as its CRC was checked (place_target), or
    // nullptr; the stage that places payloads copies it only if that is not where it goes.
    void rx_sequenced(Connection *c, int32_t buf, const uint8_t *data, uint32_t len,
                      const PacketHeader &h, const uint8_t *placed);
    void rx_deliver(Connection *c, int32_t buf, const uint8_t *data, const PacketHeader &h,
                    const uint8_t *placed = nullptr);
    // The checks of the rx demux, each written once for rx_datagram and for place_target:
    // The open connection packet h from src names (dst_conn != 0), if h is bound to it: the
    // id (generation included), the address and the incarnation it was opened with (§7.2).
    Connection *named_conn(const PacketHeader &h, const LinkAddr &src)
    {
        Connection *c = conn_by_id(h.dst_conn);
        if (c == nullptr) {
            return nullptr;
        }
        const PeerNic &p = peer_of(c);
        return p.addr == src && p.nic == h.src_nic ? c : nullptr;
    }
    // h comes from c's peer connection (an RST carries none): the id c learned, or (not
    // learned yet) any.
    static bool from_peer_conn(const Connection &c, const PacketHeader &h)
    {
        return c.peer_conn != 0 ? c.peer_conn == h.src_conn : h.src_conn != 0;
    }
    // A packet whose dst_conn names no open connection of its kind (DROP_WRONG_GEN): answered
    // only if its sender is the peer of the slot's open or last occupant (PROTOCOL.md §7.3):
    // with how that occupant ended if it ended without failing (DC_CLOSE for a DCI handed over,
    // CLOSE agreed for a connection closed by agreement), else with RST (never a DC packet).
    void reject_unknown_id(const PacketHeader &h, const LinkAddr &src);
    // Where the payload of packet h from src goes if it is placed as its CRC is checked: a
    // SEND or READ_RESP segment of at least kCheckWhilePlacingMin bytes that is the next packet
    // of the open connection it names, placed at once by the stage that handles it
    // (send_target, read_target); nullptr for anything else. Changes nothing.
    uint8_t *place_target(const PacketHeader &h, const LinkAddr &src);
    uint64_t rx_sack(const Connection *c) const;
    int32_t buf_alloc();
    void reclaim_reorder_buffers();
    void buf_free(int32_t b);
    uint8_t *buf_data(int32_t b) { return &buffers_[static_cast<size_t>(b) * rx_buf_size_]; }

    // --- responder (responder.cc): requests ---
    // Returns false if the packet must not be consumed (receiver not ready).
    bool respond(Connection *c, const PacketHeader &h, const uint8_t *payload,
                 const uint8_t *placed);
    bool respond_send(Connection *c, const PacketHeader &h, const uint8_t *payload,
                      const uint8_t *placed);
    // Where respond_send will place the payload of SEND segment h, the next packet of c, found
    // without changing anything; nullptr if it will not (refused, inconsistent, out of turn).
    uint8_t *send_target(const Connection *c, const PacketHeader &h);
    // The checks of the responder, each written once for respond and for send_target:
    // What the first segment of SEND h meets: OK (*qp_p and *rwqe: the QP and the receive it
    // takes), UNREACHABLE (no such QP for its sender), NO_RESOURCE (receiver not ready: no
    // receive posted or no room for a completion) or MESSAGE_TRUNCATED (the receive is shorter).
    srcnic_status_t send_first(const PacketHeader &h, QpContext **qp_p, srcnic_recv_wqe_t *rwqe) const;
    // A later segment h continues the message being received.
    static bool continues(const ConnActive::Inbound &in, const PacketHeader &h)
    {
        return in.active && in.opcode == h.opcode;
    }
    // Segment h is where a message of `length` bytes, `offset` of them received, goes on.
    static bool segment_fits(uint32_t offset, uint32_t length, const PacketHeader &h)
    {
        return h.addr == offset && h.payload_len <= length - offset && h.msg_len == length;
    }
    bool respond_write(Connection *c, const PacketHeader &h, const uint8_t *payload);
    bool respond_read(Connection *c, const PacketHeader &h);
    bool answer_error(Connection *c, const PacketHeader &h, srcnic_status_t status);
    // Refuses the message starting with h: error answer, counter, discard its other segments.
    // False if no answer could be queued (the packet is then refused as receiver-not-ready).
    bool refuse_message(Connection *c, const PacketHeader &h, srcnic_status_t status,
                        srcnic_counter_t counter);
    // Refuses the message whose segment h is, after some of it was consumed (its target went
    // away, or a segment is refused): error answer naming its first PSN, the rest consumed
    // untouched. False if no answer could be queued (h is then refused as receiver-not-ready).
    bool refuse_rest(Connection *c, const PacketHeader &h, srcnic_status_t status);
    void abort_inbound(Connection *c, srcnic_status_t status);

    // --- completer (completer.cc): answers to our requests, acknowledgements, completion ---
    // An ACK or NAK (RST is the demux's: it ends the connection).
    void complete_control(Connection *c, const PacketHeader &h);
    // The peer has every packet before ack_psn: requests up to it are acknowledged (window
    // released, timers restarted) and complete in order.
    void apply_ack(Connection *c, uint32_t ack_psn);
    // What the newest ack reports (cumulative and selective): RTT sample, progress for the
    // failure timers, the end or the next step of a timeout's recovery, fast retransmit.
    void note_sack(Connection *c, const PacketHeader &h);
    void rtt_sample(Connection *c, uint64_t now);
    // Moves c's loss recovery to r (traced).
    void set_recovery(Connection *c, Recovery r)
    {
        if (log_enabled(LogLevel::kTrace)) {
            SRCNIC_LOG_TRACE("connection %u recovery %s -> %s (acked %u send %u)", c->id,
                             to_string(c->act->recovery), to_string(r), c->act->acked_psn, c->act->send_psn);
        }
        c->act->recovery = r;
    }
    // Completes c's requests from its head while they are acknowledged (and, READs, answered).
    void complete_in_order(Connection *c);
    // Completes request m's WQE (m is on connection c): with m's status when m is its last (or
    // only) message; an earlier chunk only passes a failure on to the next chunk, or to the
    // cursor if that is not handed out yet.
    void complete_request(Connection *c, TxMsg *m);
    // placed: as for rx_deliver.
    void complete_answer(Connection *c, const PacketHeader &h, const uint8_t *payload,
                         const uint8_t *placed);
    TxMsg *find_request(const Connection *c, uint32_t req_psn) const;
    // Where complete_answer will place READ_RESP segment h, the next packet of c, found without
    // changing anything; nullptr if it will not, or if the segment spans pieces of the READ's
    // scatter list.
    uint8_t *read_target(const Connection *c, const PacketHeader &h) const;

    srcnic_config_t config_;
    std::unique_ptr<Link> link_;
    srcnic_nic_addr_t addr_{};
    uint32_t mtu_ = 0;              // datagram bytes (header included) for every peer
    uint32_t rx_buf_size_ = 0;      // bytes per packet buffer: the largest datagram any peer
                                    // may send (link max_datagram), at least mtu_
    size_t max_msg_ = 0;
    uint64_t counters_[SRCNIC_CNT_LAST] = {};
    SipKey gen_key_{};              // keys the generation permutation (gen_for); from
                                    // os_random(), never leaves the NIC
    SipKey key_{};                  // this NIC's proof key: addr_.secret, addr_.incarnation

    // QPs by slot: a QPN is (slot + 1) | generation << 16, so that a QP created in a freed
    // slot never answers to the number of the one before it.
    struct QpSlot {
        QpContext *ctx = nullptr;   // nullptr = free
        uint16_t gen = 0;           // bumped when the slot is freed
        Qp *host = nullptr;         // qp_create's: the host end, owned here
        void *block = nullptr;      // qp_create's: the rings' memory, owned here
    };
    std::vector<QpSlot> qps_;
    std::vector<uint32_t> free_qp_slots_;
    // The QP numbered qpn, or nullptr.
    QpContext *qp_by_num(uint32_t qpn) const
    {
        const uint32_t slot = (qpn & 0xffff) - 1;
        if (slot >= qps_.size()) {
            return nullptr;
        }
        QpContext *ctx = qps_[slot].ctx;
        return ctx != nullptr && ctx->qpn() == qpn ? ctx : nullptr;
    }
    uint32_t qp_slot_alloc();
    void qp_slot_free(uint32_t slot);

    std::unique_ptr<srcnic_pd> own_pd_;   // when the config names no protection domain
    srcnic_pd *pd_ = nullptr;       // whose regions remote accesses may touch
    Owner own_;                     // this process: the owner of qp_create's QPs
    bool several_owners_ = false;   // serve_several_owners()
    // The QP request h names, if its sender may reach it: nullptr for a number no QP has, or
    // (several owners) a QP whose owner's job key the request does not carry.
    QpContext *request_qp(const PacketHeader &h) const { return qp_for(h.dst_qpn, h.job_key); }
    // QP qpn, if a request carrying job_key may reach it (request_qp; a READ between processes
    // of the agent, direct_read and copy_read).
    QpContext *qp_for(uint32_t qpn, uint32_t job_key) const
    {
        QpContext *qp = qp_by_num(qpn);
        return qp != nullptr && (!several_owners_ || qp->owner()->job_key == job_key) ? qp : nullptr;
    }
    std::vector<Owner *> notified_; // see notify_completion
    std::vector<uint8_t> copy_bounce_; // copy_read's, allocated on its first use
    // The qp_cancel under way: the requests of its QP it covers that requester_take completes
    // CANCELED out of the send ring (hits), for its count.
    struct Cancelling {
        const QpContext *qp = nullptr;
        QpContext::Cancel which{};
        unsigned hits = 0;
    } cancelling_;

    // Grows on demand; slot 0 unused (id 0 means "unknown"). Connections are allocated one by
    // one, so they never move, and a slot is found with one index.
    // A slot keeps its kind of object (Connection, or DcConn for DCIs and DC targets) for good:
    // each has its free list.
    std::vector<ConnPtr> conns_;
    std::vector<uint32_t> free_slots_;
    std::vector<uint32_t> free_dc_slots_;
    // The remote NICs the slots name (PeerNic); entry 0 names none. A deque: entries never move,
    // so a reference to one stays good while others are added.
    std::deque<PeerNic> peer_nics_;
    std::vector<uint32_t> free_peer_nics_;
    std::unordered_map<ClosedKey, uint32_t, ClosedKeyHash> peer_nic_by_key_;   // (addr, nic) -> entry
    // This NIC's connections to itself -> the connection that receives what each sends (§5.7).
    std::unordered_map<uint32_t, uint32_t> mirror_of_;
    std::unordered_map<LinkAddr, uint32_t, LinkAddrHash> conn_by_addr_;
    unsigned num_conns_ = 0;
    unsigned self_conns_ = 0;            // of them, to this NIC itself (outside the budget)
    std::vector<Connection *> active_;   // connections with work, acks or timers
    // The pool of active halves: those not held by a connection, kept for the next one up to
    // kActiveKeep (the rest are freed), and how many connections hold one.
    ConnActive *act_free_ = nullptr;
    unsigned act_free_count_ = 0;
    unsigned act_held_ = 0;
    std::vector<ConnStats> conn_stats_;  // per slot (the agent's status report)

    // Destinations' remote NICs (see Remote); never shrinks (a Remote is reused when its
    // address comes back with another incarnation).
    std::vector<Remote> remotes_;
    uint64_t remote_epoch_ = 0;   // remote_epoch()
    std::unordered_map<LinkAddr, uint32_t, LinkAddrHash> remote_by_addr_;   // -> index
    // DC (conn/dc.cc).
    std::vector<uint32_t> dcis_;         // ids of the attached DCIs (at most num_dci)
    std::vector<uint32_t> dcts_;         // ids of the DC target contexts (at most dc_targets)
    std::unordered_map<ClosedKey, uint32_t, ClosedKeyHash> dct_by_stream_;   // -> slot
    std::unordered_map<ClosedKey, Closed, ClosedKeyHash> closed_;
    RefusedSet refused_;   // connections refused with USE_DC (refused_set.h); none without DC
    std::vector<ClosedRef> closed_fifo_;   // ring of kDcClosedPerTarget x dc_targets
    uint64_t closed_seq_ = 0;
    size_t closed_head_ = 0;
    size_t closed_count_ = 0;
    uint64_t closed_linger_ns_ = 0;      // peer_timeout + rto_max: no initiator resends later
    std::vector<uint32_t> backlogged_;   // Remotes with a backlog (indexes)
    std::vector<uint32_t> closing_;      // ids of connections we asked to CLOSE
    std::vector<uint32_t> dc_closing_;   // ids of DCIs waiting for their DC_CLOSE's confirmation
    uint64_t dc_close_due_ns_ = UINT64_MAX;   // dc_close_sweep has nothing to do before
    uint32_t dc_serial_ = 0;             // last stream number drawn
    size_t dci_sweep_ = 0;               // dcis_ index dci_sweep looked at last
    uint64_t dc_handed_over_ns_ = 0;     // a DCI was last handed over to another target then
    uint64_t dc_crowded_until_ns_ = 0;   // DC targets: a stream was refused lately (DC_BUSY), so
                                         // contexts ask their DCIs to close when quiet; 0: none
    bool dc_wait_ = false;               // a request waited for a DCI in this requester pass
    bool dc_wait_prev_ = false;          // ... in the previous one (the quota applies)
    std::vector<uint32_t> xack_cands_;   // slots of DC target contexts listed by xack_list
    std::vector<uint32_t> rev_cands_;    // slots of DC target contexts that may have taken a
                                         // request back when listed (rev_find drops the others)
    std::vector<uint32_t> xack_later_;   // of them, those tx_schedule left to xack_flush

    std::vector<TxMsg> msgs_;       // pool
    TxMsg *free_msgs_ = nullptr;
    unsigned msgs_free_ = 0;

    // Packets this NIC sent itself (self_deliver), in order, waiting for rx_poll.
    struct SelfDatagram {
        int32_t buf;     // packet buffer
        uint32_t len;    // bytes
    };
    std::vector<SelfDatagram> self_rx_;
    std::vector<SelfDatagram> self_rx_work_;   // the ones rx_poll is handling
    LinkAddr self_addr_;            // the link's address: datagrams to it are self_deliver's
    std::unique_ptr<uint8_t[]> buffers_;  // rx_buffers x rx_buf_size_ bytes, touched on first use
    std::vector<int32_t> free_bufs_;      // stack: the most recently freed is reused first
    // Receive slots handed to the link on every poll; a slot keeps its buffer until a
    // datagram lands in it, so an empty poll allocates and frees nothing.
    static constexpr uint32_t kRxBurst = 32;
    RxDatagram rx_slots_[kRxBurst];
    int32_t rx_bufs_[kRxBurst];     // buffer of each slot
    uint32_t rx_posted_ = 0;        // slots [0, rx_posted_) hold a buffer

    FreshClock clock_;
    // Transmit batch (flushed to the link when full, when it holds kTxBatchBytes, and at the
    // end of progress).
    static constexpr uint32_t kTxBatch = 32;
    // Payloads of up to kTxCopyMax bytes are copied behind their header, so that the packet
    // is one contiguous datagram: one CRC pass, and the link sends it as it is (a link copies
    // a small gathered datagram into one buffer anyway). Longer ones go as a gather list from
    // the message's own memory.
    static constexpr uint32_t kTxCopyMax = 1024;
    struct TxPacket {
        PacketHeader h;
        uint8_t payload[kTxCopyMax];
    };
    TxPacket tx_pkts_[kTxBatch];
    uint64_t tx_batch_id_ = 1;      // the batch being built (bumped by each flush)
    uint64_t msg_serial_ = 0;       // last TxMsg::serial drawn

    // The staging cache (stage()): a block holds [off, off + len) of one message's data; blocks
    // the batch's packets point into are not reused before it is flushed, and there is one
    // more block than a batch has packets. Allocated on first use.
    static constexpr uint32_t kStageBlockBytes = 64 * 1024;
    static constexpr unsigned kStageBlocks = kTxBatch + 1;
    struct StageBlock {
        uint64_t serial = 0;        // message whose bytes it holds (TxMsg::serial); 0 = none
        uint64_t off = 0;           // its first byte, in the message's data
        uint32_t len = 0;           // bytes
        uint64_t batch = 0;         // tx_batch_id_ of the last batch pointing into it
        uint64_t used = 0;          // stage_clock_ at its last use (least recent is reused)
        std::unique_ptr<uint8_t[]> data;
    };
    std::unique_ptr<StageBlock[]> stage_;
    uint64_t stage_clock_ = 0;
    unsigned stage_last_ = kStageBlocks;   // block of the latest stage() (kStageBlocks: none)
    // The write-behind (write_behind()): bytes bound for [addr, addr + len) of space.
    struct WriteBehind {
        AddrSpace *space = nullptr;
        uint64_t addr = 0;
        uint32_t len = 0;
        TxMsg *read = nullptr;      // the READ they answer, if any ...
        uint64_t serial = 0;        // ... while it is this use of the descriptor
        std::unique_ptr<uint8_t[]> buf;   // kStageBlockBytes, allocated on first use
    } wb_;
    struct iovec tx_iov_[kTxBatch][kLinkMaxIov];
    TxDatagram tx_dgrams_[kTxBatch];
    Connection *tx_conn_[kTxBatch];   // connection each datagram belongs to (nullptr: none)
    uint32_t tx_count_ = 0;
    uint64_t tx_batch_bytes_ = 0;   // payload bytes of the batch (see kTxBatchBytes)
    bool tx_due_ = false;           // a connection was activated since transmit() last scheduled
    bool tx_urgent_ = false;        // a receive made something to send in the same progress call
    bool timers_due_ = false;       // a timer expired before the receive: progress() runs it after
    uint32_t tx_idle_calls_ = 0;    // transmit() calls that skipped scheduling since it last ran
    bool tx_blocked_ = false;       // the link would block: stop generating packets

    void kick();
    // Creates the descriptors a waiter sleeps on (event_fd(), arm()); OK once they exist,
    // else NO_RESOURCE (out of descriptors) or IO_ERROR, logged, with none of them kept. A NIC
    // that is only progressed holds none: one process can simulate thousands of NICs.
    srcnic_status_t events_open() const;

    // The waiter's descriptors, -1 until events_open() (mutable: event_fd() creates them).
    mutable int epoll_fd_ = -1;     // epoll set of the three below: event_fd()
    mutable int timer_fd_ = -1;     // timerfd: the next connection timer, set by arm()
    mutable int kick_fd_ = -1;      // eventfd: completions written while armed
    bool rx_notify_ = false;        // the link announces arrivals on its event fd (armed)
    bool armed_ = false;            // arm() returned OK and nothing has woken the fd since
};

inline Nic *to_nic(srcnic_nic_t *nic) { return static_cast<Nic *>(nic); }
inline const Nic *to_nic(const srcnic_nic_t *nic) { return static_cast<const Nic *>(nic); }

} // namespace srcnic

#endif
