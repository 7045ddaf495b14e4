// The agent's control socket: addresses (an abstract name "@name" or a path), connecting and
// listening, and messages with file descriptors (SOCK_SEQPACKET, SCM_RIGHTS).
#ifndef SRCNIC_AGENT_CONTROL_H
#define SRCNIC_AGENT_CONTROL_H

#include <cstddef>
#include <string>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

namespace srcnic {
namespace agent {

// The socket address for name: "@name" is abstract (scoped by network namespace), anything else
// a filesystem path. False if the name does not fit.
bool socket_address(const std::string &name, struct sockaddr_un *addr, socklen_t *len);

// A connected, close-on-exec SOCK_SEQPACKET socket, or -1 with errno set.
int socket_connect(const std::string &name);
// A listening, close-on-exec, non-blocking SOCK_SEQPACKET socket, or -1 with errno set. A path
// that exists is replaced only if no agent answers on it (a stale socket of a dead agent).
int socket_listen(const std::string &name, int backlog);

// Sends one message with up to kMaxFds descriptors; false on error (errno set).
bool send_msg(int fd, const void *msg, size_t len, const int *fds = nullptr, unsigned nfds = 0);
// Receives one message into buf (up to cap bytes) and its descriptors (close-on-exec) into
// fds[0..*nfds) (at most kMaxFds; any beyond are closed). Returns the message length, 0 when
// the peer closed, -1 on error (errno set; EAGAIN for nothing waiting on a non-blocking
// socket). A truncated message (longer than cap) is -1 with EMSGSIZE, its descriptors closed.
ssize_t recv_msg(int fd, void *buf, size_t cap, int *fds, unsigned *nfds, int flags = 0);

// Closes fds[0..n).
void close_fds(const int *fds, unsigned n);

} // namespace agent
} // namespace srcnic

#endif
