// A process's side of the node agent: a NIC handle (srcnic_nic_t) whose engine runs in srcd.
// The process keeps the host end of its QPs (post, poll) over rings in the segment it shares
// with the agent, rings the agent's doorbell only while the agent sleeps, and goes to the agent
// over the control socket for what changes the engine (QPs, destinations, cancellation).
//
// If the agent dies, the control socket closes: the next progress call (at most every
// kAliveCheckNs), arm or control call notices, and every outstanding work request, and every one
// posted later, completes with CONNECTION_RESET, so that nothing waits for an engine that is gone.
#ifndef SRCNIC_AGENT_ATTACH_H
#define SRCNIC_AGENT_ATTACH_H

#include "agent/proto.h"
#include "nic/nic.h"

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace srcnic {
namespace agent {

// How often progress() looks whether the agent still answers, ns.
constexpr uint64_t kAliveCheckNs = 10 * 1000 * 1000;

class AttachedNic final : public srcnic_nic {
public:
    static srcnic_status_t attach(const srcnic_attach_config_t &config,
                                  std::unique_ptr<AttachedNic> *nic_p, std::string *why);
    ~AttachedNic() override;

    const srcnic_nic_addr_t &addr() const override { return addr_; }
    size_t max_msg() const override { return max_msg_; }
    unsigned progress() override;
    unsigned transmit() override;
    // The control socket: readable on a kWake message, and when the agent is gone.
    int event_fd() const override { return sock_; }
    srcnic_status_t arm() override;
    srcnic_status_t qp_create(const srcnic_qp_config_t &config, Qp **qp_p) override;
    void qp_destroy(Qp *qp) override;
    unsigned qp_cancel(Qp *qp, srcnic_dest_t dest, uint32_t tag) override;
    srcnic_status_t dest_create(const srcnic_nic_addr_t &remote, uint32_t qpn,
                                srcnic_dest_t *dest_p) override;
    srcnic_status_t dest_status(srcnic_dest_t dest) const override;
    uint64_t counter(srcnic_counter_t c) const override;
    unsigned num_connections() const override;
    size_t conn_state_bytes() const override;
    srcnic_pd *pd() const override { return pd_; }
    void *mem_alloc(size_t size) override;
    void mem_free(void *ptr, size_t size) override;
    bool attached() const override { return true; }
    // A round trip to the agent, which answers between two passes of its engine: by then the
    // pass that may have been between a key check and its access ended, with the write-behind.
    srcnic_status_t fence_memory() override;
    srcnic_status_t read_copy(uint32_t qpn, const srcnic_wqe_t &wqe, int err) override;
    void read_copied() override;

    bool dead() const { return dead_; }
    pid_t agent_pid() const { return agent_pid_; }

private:
    AttachedNic() = default;
    // One request and its reply; false (and the agent declared gone) if the socket fails.
    bool call(const void *req, size_t len, MsgType reply_type, void *reply, size_t reply_len) const;
    bool stats(StatsReply *reply) const;
    // Rings the doorbell if the agent sleeps (after work was posted).
    void doorbell();
    // The agent is gone: complete everything outstanding with an error.
    void die() const;
    bool check_alive();
    // Reads the kWake messages waiting on the socket, under lock_; false if the agent closed it
    // (or sent what it never sends unasked).
    bool drain_wakes() const;
    // Arena of the shared segment: offsets from the segment's start; 0 = none left.
    uint64_t arena_alloc(size_t size, size_t align);
    void arena_free(uint64_t off, size_t size);
    bool in_arena(const void *p) const
    {
        const auto *b = static_cast<const uint8_t *>(segment_);
        return p >= b + kHeaderBytes && p < b + segment_bytes_;
    }

    // Three descriptors per attached process: this socket (control, and the agent's wake-ups),
    // the doorbell and the registration table (the memory regions' memfd).
    int sock_ = -1;
    int doorbell_fd_ = -1;    // written to wake the agent
    void *segment_ = nullptr; // header page + arena, shared with the agent
    size_t segment_bytes_ = 0;
    SharedHeader *hdr_ = nullptr;
    srcnic_nic_addr_t addr_{};
    size_t max_msg_ = 0;
    pid_t agent_pid_ = 0;
    srcnic_pd *pd_ = nullptr;
    std::unique_ptr<srcnic_pd> own_pd_;
    std::vector<Qp *> qps_;
    mutable bool dead_ = false;
    uint64_t next_check_ns_ = 0;
    mutable std::mutex lock_;   // the control socket and the arena
    uint64_t arena_next_ = 0;   // first never-used offset
    std::multimap<size_t, uint64_t> arena_free_;   // freed blocks by size

    // The peers the agent named for remote NICs (address, incarnation, secret), with the
    // remote epoch read before asking: while the agent publishes the same epoch, a destination
    // to another QP of that NIC is made here, without a round trip (SharedHeader::remote_epoch).
    struct KnownPeer {
        uint32_t peer;
        uint64_t epoch;
    };
    using RemoteKey = std::tuple<uint8_t, uint16_t, uint32_t, std::array<uint8_t, 16>, uint64_t,
                                 uint64_t>;
    static RemoteKey remote_key(const srcnic_nic_addr_t &a);
    std::map<RemoteKey, KnownPeer> known_peers_;
    std::mutex known_lock_;   // known_peers_ (not lock_, which call() takes)
};

} // namespace agent
} // namespace srcnic

#endif
