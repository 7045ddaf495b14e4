// The node agent's attach protocol: the control messages a process and srcd exchange over the
// agent's Unix socket (SOCK_SEQPACKET: one message per record, file descriptors alongside with
// SCM_RIGHTS), and the layout of the memory they share. Only control travels on the socket:
// attach, QPs, destinations, cancellation, statistics. Work requests, completions and the
// payloads in shared buffers travel through shared memory; registrations through the process's
// registration table (mr/mr_table.h), which the agent maps read-only.
//
// The shared segment is created and sealed by the process (F_SEAL_SHRINK | F_SEAL_GROW, checked
// by the agent before it maps it, so that the process cannot make the agent fault by shrinking
// it): a header page of flags, then an arena the process manages. Its QPs' rings are placed in
// the arena, and so are the buffers it wants the agent to read and write directly (without a
// cross-memory copy): the UCT interface's send and receive buffers. The agent trusts nothing in
// it: every counter and entry it reads there is checked (qp/ring.h), every address translated
// within the arena or copied by cross-memory attach, which the kernel checks.
#ifndef SRCNIC_AGENT_PROTO_H
#define SRCNIC_AGENT_PROTO_H

#include <srcnic/srcnic.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace srcnic {
namespace agent {

constexpr uint32_t kProtoVersion = 7;   // 5: a WQE may be posted SRCNIC_WQE_FLAG_CANCELED;
                                        // 6: StatsReply holds one counter more;
                                        // 7: three counters more
// The default socket: abstract (a name in the network namespace, not a file), so every node of
// a test bed of network namespaces has its own, and permissions are the agent's credential check.
constexpr const char *kDefaultSocket = "@srcd";
constexpr size_t kHeaderBytes = 4096;         // the shared segment's header page
constexpr size_t kMaxArenaBytes = 4ull << 30; // largest arena an agent maps for one process
constexpr uint32_t kMaxQpsPerClient = 64;     // QPs one attached process may hold
constexpr uint32_t kMaxFds = 4;               // descriptors one message may carry
constexpr size_t kErrorText = 256;            // bytes of a refusal's explanation

// The shared segment's first page.
struct SharedHeader {
    // 1 while the agent sleeps (in epoll): a process that posts work then writes its doorbell
    // eventfd. The agent sets it, then checks every ring once more, before it sleeps.
    alignas(64) std::atomic<uint32_t> agent_sleeping{0};
    // 1 while the process waits for completions (its event fd, the control socket, armed): the
    // agent clears it and sends a kWake message after it writes a completion.
    alignas(64) std::atomic<uint32_t> client_armed{0};
    // 1 while more tasks want a CPU than the node has (processes busy-poll every CPU): a
    // process whose progress finds nothing to poll then yields its CPU, which the agent may need.
    alignas(64) std::atomic<uint32_t> yield_when_idle{0};
    // The engine's remote epoch (Nic::remote_epoch()), published by the agent between passes:
    // while it reads what it read when a destination was created, another destination to the
    // same remote NIC gets the same peer, which the process then makes without asking (the
    // agent would answer the same). An MPI job's processes create one destination per process
    // of the job, most of them to a few remote agents.
    alignas(64) std::atomic<uint64_t> remote_epoch{0};
    // 1 while the process makes its READs of other attached processes itself: the agent then
    // checks such a READ (the target QP, its job key, the rkey and bounds) and completes it
    // with kCqeDirectRead, and the process copies with one process_vm_readv from the target,
    // the way UCX's cma transport reads between processes. Set by the process at attach (if it
    // shares the agent's PID numbering: AttachRequest::pid), cleared by it when the kernel
    // refuses it such a copy; it then asks the agent for that one (kReadCopy).
    alignas(64) std::atomic<uint32_t> direct_reads{0};
    // Direct READs the process has finished with (copied, or failed): written by the process
    // after each. While it is behind the number the agent handed out, the agent takes no other
    // request of the process's QPs than READs, so that no later WRITE or SEND is placed before
    // a READ posted ahead of it has read (RC order).
    alignas(64) std::atomic<uint32_t> direct_copied{0};
};
static_assert(sizeof(SharedHeader) <= kHeaderBytes, "the header fits its page");

enum class MsgType : uint32_t {
    kAttach = 1,        // process -> agent: AttachRequest, fds [segment, registration table]
    kAttachReply,       // AttachReply, fds [doorbell eventfd]
    kQpCreate,          // QpCreateRequest
    kQpCreateReply,     // QpCreateReply
    kQpDestroy,         // QpDestroyRequest
    kQpDestroyReply,    // MsgHeader only
    kDestCreate,        // DestCreateRequest
    kDestCreateReply,   // DestCreateReply
    kDestStatus,        // DestStatusRequest
    kDestStatusReply,   // MsgHeader (status)
    kQpCancel,          // QpCancelRequest
    kQpCancelReply,     // QpCancelReply
    kStats,             // MsgHeader only
    kStatsReply,        // StatsReply
    kStatus,            // MsgHeader only (srcctl)
    kStatusReply,       // MsgHeader + JSON text (NUL-terminated)
    // agent -> process, unasked: a completion was written while the process was armed. At most
    // two are outstanding (the process re-arms only after it read the socket), so they never
    // fill the socket.
    kWake,              // MsgHeader only
    // process -> agent, no reply but a kWake: a control call read a wake-up while it waited for
    // its reply, so the socket, the process's event fd, must be made readable again.
    kWakeMe,            // MsgHeader only
    // process -> agent: a READ the agent completed as direct (kCqeDirectRead) and the kernel
    // did not let the process copy: the agent copies it, checked as any READ.
    kReadCopy,          // ReadCopyRequest
    kReadCopyReply,     // MsgHeader (status)
};

struct MsgHeader {
    uint32_t type;      // MsgType
    uint32_t length;    // bytes of the whole message, header included
    int32_t status;     // replies: srcnic_status_t
    uint32_t reserved;
};

struct AttachRequest {
    MsgHeader hdr;
    uint32_t version;        // kProtoVersion
    uint32_t job_key;        // requests to this process's QPs must carry it
    char bind_addr[64];      // which engine: the agent's address on the interface wanted
    uint64_t segment_base;   // where the process mapped the segment (fds[0])
    uint64_t segment_bytes;  // its size: kHeaderBytes + arena
    uint32_t mr_slots;       // slots of the registration table (fds[1])
    uint32_t pid;            // getpid() in the process: the same as the agent sees it when both
                             // share one PID namespace's numbering (direct READs need it)
    uint64_t probe_addr;     // an 8-byte word in the process's memory that holds probe_value:
    uint64_t probe_value;    // the agent reads it by cross-memory attach before accepting
};

struct AttachReply {
    MsgHeader hdr;
    srcnic_nic_addr_t addr;  // the engine's address
    uint64_t max_msg;        // largest message, bytes
    uint32_t client_id;      // the agent's number for this attachment (logs, status)
    uint32_t agent_pid;
    char error[kErrorText];  // why the attachment was refused (status != OK)
};

struct QpCreateRequest {
    MsgHeader hdr;
    uint32_t sq_size;        // send ring entries (power of 2)
    uint32_t rq_size;        // receive ring entries (power of 2)
    uint64_t ring_offset;    // where the rings are, from the segment's start (page-aligned)
};

struct QpCreateReply {
    MsgHeader hdr;
    uint32_t qpn;
    uint32_t reserved;
};

struct QpDestroyRequest {
    MsgHeader hdr;
    uint32_t qpn;
    uint32_t reserved;
};

struct DestCreateRequest {
    MsgHeader hdr;
    srcnic_nic_addr_t remote;
    uint32_t remote_qpn;
    uint32_t reserved;
};

struct DestCreateReply {
    MsgHeader hdr;
    srcnic_dest_t dest;
};

struct DestStatusRequest {
    MsgHeader hdr;
    srcnic_dest_t dest;
};

struct QpCancelRequest {
    MsgHeader hdr;
    uint32_t qpn;
    uint32_t tag;
    srcnic_dest_t dest;
};

struct QpCancelReply {
    MsgHeader hdr;
    uint32_t cancelled;
    uint32_t reserved;
};

struct ReadCopyRequest {
    MsgHeader hdr;
    uint32_t qpn;            // the process's QP that posted the READ
    uint32_t reserved;
    srcnic_wqe_t wqe;        // the READ as posted (wr_id unused)
};

struct StatsReply {
    MsgHeader hdr;
    uint64_t counters[SRCNIC_CNT_LAST];
    uint32_t num_connections;
    uint32_t reserved;
    uint64_t conn_state_bytes;
};

// The largest message either side sends (a status reply's JSON may be longer: it is read with
// a buffer of its own).
constexpr size_t kMaxMsg = sizeof(StatsReply) > sizeof(AttachReply) ? sizeof(StatsReply) + 64
                                                                      : sizeof(AttachReply) + 64;
static_assert(sizeof(ReadCopyRequest) <= kMaxMsg, "every request fits kMaxMsg");

} // namespace agent
} // namespace srcnic

#endif
