// A QP: a host-to-NIC channel bound to no peer, seen from both ends. Its three rings live in one
// block of memory (ring.h): the host posts WQEs to the send ring and buffers to the receive ring
// and polls the completion ring (Qp, behind the srcnic_qp_t handle); the NIC takes work from the
// first two and writes completions to the third (QpContext). In embedded mode both ends are in
// one process; with the node agent the block is shared memory and the NIC's end is the agent's.
//
// The NIC trusts nothing the host wrote unless the host is its own process (Owner::trusted): it
// copies each entry before looking at it, validates the copy, and takes a work request only
// while the completion ring has room for every completion it already owes plus this one, so a
// host that never polls stops only its own QP.
#ifndef SRCNIC_QP_QP_H
#define SRCNIC_QP_QP_H

#include "mr/addr_space.h"
#include "mr/mr_table.h"
#include "qp/ring.h"

#include <srcnic/srcnic.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

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

// The status of the completion of a READ that the agent checked and leaves to the process to
// copy (agent/proto.h, SharedHeader::direct_reads): its imm is the target process's PID. The
// process's end of the QP makes the copy and completes the READ with its outcome, so that
// this status never reaches a caller of srcnic_poll_cq.
constexpr int16_t kCqeDirectRead = 0x4452;

// OK, or INVALID_PARAM for a WQE no NIC executes: an unknown opcode or flag, an inline payload
// on a READ or longer than SRCNIC_WQE_INLINE_MAX, more than SRCNIC_WQE_MAX_SGE entries, or more
// than max_msg bytes.
srcnic_status_t validate_wqe(const srcnic_wqe_t &wqe, size_t max_msg);

// The rings of a QP of sq_size send and rq_size receive entries: OK, or INVALID_PARAM (logged
// when log is true) unless both are powers of 2 up to 65536.
srcnic_status_t qp_layout(uint32_t sq_size, uint32_t rq_size, bool log, QpRingLayout *layout_p);

// Bytes of the message a (valid) WQE describes.
inline uint64_t wqe_length(const srcnic_wqe_t &wqe)
{
    if (wqe.flags & SRCNIC_WQE_FLAG_INLINE) {
        return wqe.inline_len;
    }
    uint64_t length = 0;
    for (unsigned i = 0; i < wqe.num_sge; ++i) {
        length += wqe.u.sge[i].length;
    }
    return length;
}

// The host whose QPs a NIC serves: how to reach its memory, its registrations and its job key.
// The embedded engine has one (its own process); the agent one per attached client.
struct Owner {
    AddrSpace space;            // its memory
    MrView mrs;                 // its registered regions (the rkey check)
    uint32_t job_key = 0;       // agent: requests to its QPs must carry this key
    bool trusted = true;        // its rings are written by this process's own API calls, which
                                // validated every entry: the NIC need not check them again
    bool notify_pending = false; // completions written since the agent last woke it (agent)
    void *user = nullptr;       // the agent's record of the process
    // Agent: the process's flag (SharedHeader::direct_reads) when it shares the agent's PID
    // numbering, else nullptr: READs between two such processes, while the requester's flag
    // is set, are copied by the requester itself. Set together with direct_copied.
    const std::atomic<uint32_t> *direct_reads = nullptr;
    // Of those READs, how many were handed to it and how many it finished with
    // (SharedHeader::direct_copied): while they differ its QPs' other requests wait.
    uint32_t direct_handed = 0;
    const std::atomic<uint32_t> *direct_copied = nullptr;
    bool copies_pending() const
    {
        return direct_copied != nullptr &&
               direct_copied->load(std::memory_order_acquire) != direct_handed;
    }
};

// A large WRITE or READ the requester is cutting into chunks (requester.cc): the WQE, taken
// from the ring, and how far its chunks have been handed to the connection.
struct ChunkCursor {
    bool active = false;
    int16_t status = 0;        // a failure of an earlier chunk, carried to the WQE's completion
    srcnic_wqe_t wqe{};
    uint64_t next = 0;         // offset of the next chunk in the WQE's bytes
    uint64_t length = 0;       // the WQE's bytes
    bool local = false;        // a WRITE to a QP of this NIC, placed by it (Nic::local_write)

    void start(const srcnic_wqe_t &w, uint64_t len, bool is_local)
    {
        active = true;
        local = is_local;
        status = 0;
        wqe = w;
        next = 0;
        length = len;
    }
};

// The NIC's end of a QP.
class alignas(64) QpContext {
public:
    // block: the rings as laid out by layout (already initialised by the host's end).
    QpContext(Nic *nic, uint32_t qpn, Owner *owner, const QpRingLayout &layout, void *block)
        : nic_(nic), qpn_(qpn), owner_(owner),
          sq_(layout.sq_idx(block), layout.at<srcnic_wqe_t>(block, layout.sq_off), layout.sq_size),
          rq_(layout.rq_idx(block), layout.at<srcnic_recv_wqe_t>(block, layout.rq_off), layout.rq_size),
          cq_(layout.cq_idx(block), layout.at<srcnic_cqe_t>(block, layout.cq_off), layout.cq_size)
    {
    }

    uint32_t qpn() const { return qpn_; }
    Owner *owner() const { return owner_; }
    RingReader<srcnic_wqe_t> &sq() { return sq_; }
    RingReader<srcnic_recv_wqe_t> &rq() { return rq_; }
    const RingReader<srcnic_recv_wqe_t> &rq() const { return rq_; }
    bool cq_empty() const { return cq_.used() == 0; }

    // Whether the NIC may take another work request (send or receive): the completion ring
    // has room for it beyond every completion already owed.
    bool can_take() const { return owed_ + cq_.used() < cq_.size(); }
    // A work request was taken: its completion is owed.
    void took() { ++owed_; }
    // The oldest request waits for its process to copy a READ handed to it (Owner::
    // copies_pending): not work the NIC can do now.
    bool head_held() const
    {
        srcnic_wqe_t w;
        return owner_->copies_pending() && sq_.peek(&w) && w.opcode != SRCNIC_OP_READ;
    }
    // A WRITE was taken (its completion, by opcode, ends it): a READ the requester would copy
    // itself waits until none is outstanding, so that it never reads past an earlier WRITE.
    void took_write() { ++writes_; }
    uint32_t writes_outstanding() const { return writes_; }
    // A request was taken from the send ring (its completion, not a RECV one, ends it).
    void took_request() { ++requests_; }
    uint32_t requests_outstanding() const { return requests_; }
    // Writes the completion of a taken work request. Room was reserved when it was taken; a
    // host that corrupted the ring's counters loses the completion and faults its QP.
    void complete(const srcnic_cqe_t &cqe);
    // The host broke the rings' rules (counters out of range); the agent detaches it.
    bool faulted() const { return faulted_; }
    void fault() { faulted_ = true; }
    // The WQE being cut into chunks, if cursor().active (the QP's later WQEs wait for it).
    ChunkCursor &cursor() { return cursor_; }
    // A cancellation of the QP's work to dest with tag (0: any) that WQEs still in the send
    // ring when it was asked for (before ring position `until`) answer when they are taken.
    struct Cancel {
        srcnic_dest_t dest;
        uint32_t tag;
        uint32_t until;

        bool covers(const srcnic_wqe_t &w) const
        {
            return w.dest.peer == dest.peer && w.dest.qpn == dest.qpn && (tag == 0 || w.tag == tag);
        }
    };
    std::vector<Cancel> &cancels() { return cancels_; }

private:
    Nic *const nic_;
    const uint32_t qpn_;
    Owner *const owner_;
    RingReader<srcnic_wqe_t> sq_;
    RingReader<srcnic_recv_wqe_t> rq_;
    RingWriter<srcnic_cqe_t> cq_;
    uint32_t owed_ = 0;      // work requests taken and not yet completed
    uint32_t writes_ = 0;    // of them, WRITEs
    uint32_t requests_ = 0;  // of them, send-ring requests
    bool faulted_ = false;
    ChunkCursor cursor_;
    std::vector<Cancel> cancels_;
};

// The host's end of a QP: the srcnic_qp_t handle.
class alignas(64) Qp : public srcnic_qp {
public:
    // block: rings laid out by layout, zero-filled; this end initialises their counters.
    Qp(srcnic_nic *nic, uint32_t qpn, const QpRingLayout &layout, void *block, size_t max_msg);

    srcnic_nic *nic() const { return nic_; }
    uint32_t qpn() const { return qpn_; }
    const QpRingLayout &layout() const { return layout_; }
    void *block() const { return block_; }

    srcnic_status_t post_send(const srcnic_wqe_t &wqe);
    srcnic_status_t post_recv(const srcnic_recv_wqe_t &wqe);
    unsigned poll_cq(srcnic_cqe_t *cqes, unsigned max);
    unsigned outstanding() const { return sends_outstanding_ + recvs_outstanding_; }
    bool sq_empty() const { return sq_.used() == 0; }
    bool cq_empty() const { return cq_.empty() && local_cq_.empty(); }

    // For a QP whose NIC end is in another process (the agent): work requests carry the index
    // of a private record of their wr_id instead of the wr_id itself, so that if that process
    // dies, this end knows what was outstanding and completes it itself (fail_all).
    void keep_records();
    // The NIC end is gone: what it already completed is polled first, then every work request
    // still outstanding completes with status, and so does every one posted from now on.
    void fail_all(srcnic_status_t status);

private:
    struct Record {
        uint64_t wr_id;     // the caller's
        uint8_t opcode;     // of its completion
        bool live;
    };
    // A READ completed kCqeDirectRead: copies it from process pid (read_ holds the WQE) and
    // returns its status.
    int16_t direct_read(uint32_t record, pid_t pid);
    // Takes a record for wr_id; its index, or UINT32_MAX if none is free (cannot happen while
    // outstanding work is bounded by the rings).
    uint32_t record(uint64_t wr_id, uint8_t opcode);
    srcnic_status_t complete_locally(uint64_t wr_id, uint8_t opcode, bool recv);

    srcnic_nic *const nic_;
    const uint32_t qpn_;
    const QpRingLayout layout_;
    void *const block_;
    const size_t max_msg_;
    RingWriter<srcnic_wqe_t> sq_;
    RingWriter<srcnic_recv_wqe_t> rq_;
    RingReader<srcnic_cqe_t> cq_;
    uint32_t sends_outstanding_ = 0; // send WQEs posted and not yet polled (<= sq size)
    uint32_t recvs_outstanding_ = 0; // receive WQEs posted and not yet polled (<= rq size)
    std::unique_ptr<Record[]> records_;   // keep_records(): sq + rq of them, else null
    std::unique_ptr<srcnic_wqe_t[]> reads_;   // keep_records(): the READ WQE of each send record
    std::vector<uint32_t> free_records_;
    std::deque<srcnic_cqe_t> local_cq_;   // completions this end wrote (fail_all)
    int16_t fail_status_ = 0;             // fail_all's status, 0 while the NIC end lives
};

} // namespace srcnic

#endif
