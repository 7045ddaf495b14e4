// Runs a check inside a network namespace of the test's own: a forked child unshares its network
// namespace, builds interfaces there with `ip` commands, runs the check and reports through a
// pipe. What the child creates is invisible outside it and goes away when it exits, so a test
// can use an interface with a given MTU and addresses (TEST-NET) without touching the host's.
//
// The check runs in the child: gtest assertions there would be lost, so it returns what failed
// as text ("" when it passed). Needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN); the caller skips
// without it.
#ifndef SRCUCX_TESTS_NETNS_CHILD_H
#define SRCUCX_TESTS_NETNS_CHILD_H

#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>

namespace srcnic {
namespace test {

// True where run_in_netns can work: running as root.
inline bool netns_available()
{
    return ::geteuid() == 0;
}

// Runs setup (a shell command line) and then check in a new network namespace; returns "" if
// both succeeded, else what failed. A child that takes longer than timeout_s is killed.
inline std::string run_in_netns(const std::string &setup, const std::function<std::string()> &check,
                                int timeout_s = 60)
{
    int fds[2];
    if (::pipe(fds) != 0) {
        return std::string("pipe: ") + std::strerror(errno);
    }
    const pid_t pid = ::fork();
    if (pid < 0) {
        ::close(fds[0]);
        ::close(fds[1]);
        return std::string("fork: ") + std::strerror(errno);
    }
    if (pid == 0) {
        ::close(fds[0]);
        std::string result;
        if (::unshare(CLONE_NEWNET) != 0) {
            result = std::string("unshare(CLONE_NEWNET): ") + std::strerror(errno);
        } else if (std::system(("set -e; " + setup + " >/dev/null 2>&1").c_str()) != 0) {
            result = "namespace set-up failed: " + setup;
        } else {
            result = check();
        }
        size_t off = 0;
        while (off < result.size()) {
            const ssize_t n = ::write(fds[1], result.data() + off, result.size() - off);
            if (n <= 0) {
                break;
            }
            off += static_cast<size_t>(n);
        }
        ::_exit(0);   // no exit handlers: they belong to the parent's test program
    }
    ::close(fds[1]);
    std::string result;
    char buf[512];
    bool timed_out = false;
    for (;;) {
        struct pollfd p = {fds[0], POLLIN, 0};
        const int ready = ::poll(&p, 1, timeout_s * 1000);
        if (ready == 0) {
            timed_out = true;
            ::kill(pid, SIGKILL);
            break;
        }
        if (ready < 0 && errno == EINTR) {
            continue;
        }
        const ssize_t n = ready > 0 ? ::read(fds[0], buf, sizeof(buf)) : -1;
        if (n <= 0) {
            break;
        }
        result.append(buf, static_cast<size_t>(n));
    }
    ::close(fds[0]);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (timed_out) {
        return "the check in the namespace took longer than " + std::to_string(timeout_s) + " s";
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::ostringstream os;
        os << "the child running the check died (status " << status << ")";
        return result.empty() ? os.str() : result + "; " + os.str();
    }
    return result;
}

// A veth pair in the namespace: v0 with 198.51.100.1/24 (TEST-NET-2) and an MTU of 1500, its
// peer v1 up without an address, and lo up. Nothing leaves the namespace.
constexpr const char *kNetnsVeth1500 =
    "ip link set lo up; ip link add v0 type veth peer name v1; ip link set v0 mtu 1500 up; "
    "ip link set v1 up; ip addr add 198.51.100.1/24 dev v0";

} // namespace test
} // namespace srcnic

#endif
