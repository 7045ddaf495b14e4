// Control-socket helpers of the node agent and the processes that attach to it.
#include "agent/control.h"

#include "agent/proto.h"

#include <cerrno>
#include <cstring>
#include <unistd.h>

namespace srcnic {
namespace agent {

bool socket_address(const std::string &name, struct sockaddr_un *addr, socklen_t *len)
{
    std::memset(addr, 0, sizeof(*addr));
    addr->sun_family = AF_UNIX;
    if (name.empty() || name.size() >= sizeof(addr->sun_path)) {
        return false;
    }
    if (name[0] == '@') {
        // Abstract: a leading NUL, and the name's bytes without a terminator.
        std::memcpy(addr->sun_path + 1, name.data() + 1, name.size() - 1);
        *len = static_cast<socklen_t>(offsetof(struct sockaddr_un, sun_path) + name.size());
    } else {
        std::memcpy(addr->sun_path, name.data(), name.size());
        *len = static_cast<socklen_t>(offsetof(struct sockaddr_un, sun_path) + name.size() + 1);
    }
    return true;
}

int socket_connect(const std::string &name)
{
    struct sockaddr_un addr;
    socklen_t len;
    if (!socket_address(name, &addr, &len)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    if (connect(fd, reinterpret_cast<struct sockaddr *>(&addr), len) != 0) {
        const int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    return fd;
}

int socket_listen(const std::string &name, int backlog)
{
    struct sockaddr_un addr;
    socklen_t len;
    if (!socket_address(name, &addr, &len)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        return -1;
    }
    int rc = bind(fd, reinterpret_cast<struct sockaddr *>(&addr), len);
    if (rc != 0 && errno == EADDRINUSE && name[0] != '@') {
        // A path left by an agent that died: take it over if nobody answers there.
        const int probe = socket_connect(name);
        if (probe >= 0) {
            close(probe);
            close(fd);
            errno = EADDRINUSE;
            return -1;
        }
        unlink(name.c_str());
        rc = bind(fd, reinterpret_cast<struct sockaddr *>(&addr), len);
    }
    if (rc != 0) {
        const int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    if (listen(fd, backlog) != 0) {
        const int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    return fd;
}

bool send_msg(int fd, const void *msg, size_t len, const int *fds, unsigned nfds)
{
    struct iovec iov = {const_cast<void *>(msg), len};
    struct msghdr mh = {};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    alignas(struct cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * kMaxFds)];
    if (nfds != 0) {
        if (nfds > kMaxFds) {
            errno = EINVAL;
            return false;
        }
        std::memset(cbuf, 0, sizeof(cbuf));
        mh.msg_control = cbuf;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
        std::memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfds);
    }
    ssize_t n;
    do {
        n = sendmsg(fd, &mh, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n == static_cast<ssize_t>(len);
}

ssize_t recv_msg(int fd, void *buf, size_t cap, int *fds, unsigned *nfds, int flags)
{
    struct iovec iov = {buf, cap};
    struct msghdr mh = {};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    alignas(struct cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * (kMaxFds + 4))];
    mh.msg_control = cbuf;
    mh.msg_controllen = sizeof(cbuf);
    ssize_t n;
    do {
        n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | flags);
    } while (n < 0 && errno == EINTR);
    unsigned got = 0;
    if (n >= 0) {
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm != nullptr; cm = CMSG_NXTHDR(&mh, cm)) {
            if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) {
                continue;
            }
            const unsigned count = static_cast<unsigned>((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            for (unsigned i = 0; i < count; ++i) {
                int f;
                std::memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
                if (got < kMaxFds && fds != nullptr) {
                    fds[got++] = f;
                } else {
                    close(f);
                }
            }
        }
        if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) {
            close_fds(fds, got);
            got = 0;
            errno = EMSGSIZE;
            n = -1;
        }
    }
    if (nfds != nullptr) {
        *nfds = got;
    }
    return n;
}

void close_fds(const int *fds, unsigned n)
{
    for (unsigned i = 0; i < n; ++i) {
        if (fds[i] >= 0) {
            close(fds[i]);
        }
    }
}

} // namespace agent
} // namespace srcnic
