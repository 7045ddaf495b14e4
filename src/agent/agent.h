// srcd, the node agent: one engine (Nic) per node address, shared by every process on the node
// that attaches to it, so that reliable connections exist per pair of nodes and not per pair of
// processes (SRC's point: state per node O(P + N), not O(P·P·N)).
//
// Processes attach over a Unix socket (proto.h). The agent checks who they are (peer
// credentials: only allowed users; a pidfd names the process for as long as it lives), maps the
// segment they share and their registration table, proves that it can reach their memory by
// cross-memory attach, and then serves their QPs: it takes their work requests from the rings in
// the segment, moves payloads between the wire and their memory, writes their completions and
// serves remote READs and WRITEs to their registered memory whether or not they run. One thread
// does everything: it polls while there is work (and a bounded time after: spin_us), then sleeps
// on the engines' event fds, the processes' doorbells and the control sockets.
//
// A process that misbehaves fails alone: a malformed request or ring entry fails that request;
// ring counters out of range, or a request the agent cannot parse, detach the process. A process
// that dies (its pidfd readable, its socket closed) is detached: its QPs end (their requests on
// the wire as NOPs, READ answers from its memory as error answers, requests to them refused), its
// mappings and descriptors are released.
#ifndef SRCNIC_AGENT_AGENT_H
#define SRCNIC_AGENT_AGENT_H

#include "agent/proto.h"
#include "nic/nic.h"

#include <memory>
#include <string>
#include <sys/types.h>
#include <vector>

namespace srcnic {
namespace agent {

struct AgentConfig {
    std::vector<std::string> addresses;  // an engine for each (numeric IP); required
    std::string socket = kDefaultSocket; // where processes attach
    int listen_fd = -1;                  // a listening socket to use instead (socket
                                         // activation: systemd passes it); socket names it
    uint32_t spin_us = 50;               // polling after the last work before sleeping, µs,
                                         // while the node has a CPU to spare (crowded())
    bool allow_any_user = false;         // accept processes of every user (else: the agent's
                                         // own user, root, and allow_uids)
    std::vector<uid_t> allow_uids;
    uint32_t max_clients = 4096;         // attached processes at once
    int crowded = -1;                    // the node's CPUs are all taken by busy-polling
                                         // processes: 1 always, 0 never, -1 measured
    srcnic_config_t nic;                 // engine settings (bind_addr: per engine, from addresses)
};

class Agent {
public:
    // Opens the engines and the socket; errors are logged and returned.
    static srcnic_status_t create(const AgentConfig &config, std::unique_ptr<Agent> *agent_p);
    ~Agent();

    // Serves until stop(); returns 0.
    int run();
    // Asks run() to return (async-signal-safe). Attached processes see their socket close and
    // their outstanding operations fail.
    void stop();

    // The agent's state as JSON: engines, attached processes, QPs, connections, counters.
    std::string status_json() const;
    size_t num_clients() const;

private:
    struct Engine;
    struct Client;

    Agent() = default;
    void poll_events(int timeout_ms);
    bool sleep_until_work();
    void accept_clients();
    void handle_message(Client *c);
    void handle_attach(Client *c, const AttachRequest &req, const int *fds, unsigned nfds);
    void refuse_attach(Client *c, srcnic_status_t status, const std::string &why);
    void reply(Client *c, const void *msg, size_t len, const int *fds = nullptr, unsigned nfds = 0);
    void notify_clients(Engine &e);
    // A kWake message to the process: its event fd, the control socket, polls readable.
    void send_wake(Client *c);
    void check_faults();
    void drop_client(Client *c, const char *why);
    Client *client_by_event(uint64_t data) const;
    void begin_pass();
    // More tasks want a CPU than there are (busy-polling processes on every CPU): the agent
    // does not poll after its work, and asks its processes to yield when they find nothing to
    // poll (SharedHeader::yield_when_idle). Looked at every kCrowdCheckNs.
    static constexpr uint64_t kCrowdCheckNs = 10 * 1000 * 1000;
    bool crowded() const;
    void check_crowded(uint64_t now);
    void crowded_changed();

    AgentConfig config_;
    std::vector<std::unique_ptr<Engine>> engines_;
    std::vector<std::unique_ptr<Client>> clients_;   // by slot; nullptr = free
    uint32_t next_client_id_ = 1;
    int listen_fd_ = -1;
    int epoll_fd_ = -1;
    int stop_fd_ = -1;
    volatile bool stopping_ = false;
    uint64_t started_ns_ = 0;
    uint64_t sleeps_ = 0;        // times the agent slept (status)
    uint64_t attaches_ = 0;      // attachments accepted (status)
    uint64_t attached_ = 0;      // processes attached now
    long cpus_ = 1;              // online CPUs
    bool crowded_ = false;       // crowded()
    uint64_t next_crowd_check_ns_ = 0;
    uint64_t refusals_ = 0;      // attachments refused (status)
    uint64_t faults_ = 0;        // processes detached for breaking the rings' rules (status)
    uint64_t dest_requests_ = 0; // kDestCreate requests answered, refused ones too (status)
};

} // namespace agent
} // namespace srcnic

#endif
