// Harness of the agent tier: a real srcd started for a test on a socket of its own (abstract, so
// nothing is left on disk), processes forked to attach to it as clients, a pipe to talk to each,
// and bounded waits everywhere (a watchdog on every wait, never a bare sleep).
#ifndef SRCNIC_TESTS_AGENT_AGENT_HARNESS_H
#define SRCNIC_TESTS_AGENT_AGENT_HARNESS_H

#include "agent/control.h"
#include "agent/proto.h"
#include "core/clock.h"

#include <srcnic/srcnic.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <functional>
#include <poll.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#ifndef SRCD_PATH
#error "SRCD_PATH: the srcd binary under test"
#endif

namespace srcnic {
namespace test {

inline double seconds_since(uint64_t start_ns)
{
    return static_cast<double>(now_ns() - start_ns) / 1e9;
}

// Waits for pid to exit, up to seconds; its wait status, or -1 if it did not exit in time.
inline int wait_pid(pid_t pid, double seconds)
{
    const uint64_t start = now_ns();
    for (;;) {
        int status;
        const pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) {
            return status;
        }
        if (r < 0 || seconds_since(start) > seconds) {
            return -1;
        }
        usleep(2000);
    }
}

// A pipe pair between a test and one forked process: fixed-size messages, bounded reads.
class Channel {
public:
    Channel() = default;
    Channel(int rd, int wr) : rd_(rd), wr_(wr) {}

    template <typename T> bool send(const T &v) const
    {
        return write(wr_, &v, sizeof(v)) == static_cast<ssize_t>(sizeof(v));
    }
    // False after seconds without the message (or on EOF).
    template <typename T> bool recv(T *v, double seconds = 30.0) const
    {
        size_t got = 0;
        const uint64_t start = now_ns();
        while (got < sizeof(T)) {
            struct pollfd p = {rd_, POLLIN, 0};
            const double left = seconds - seconds_since(start);
            if (left <= 0 || poll(&p, 1, static_cast<int>(left * 1000) + 1) <= 0) {
                return false;
            }
            const ssize_t n = read(rd_, reinterpret_cast<char *>(v) + got, sizeof(T) - got);
            if (n <= 0) {
                return false;
            }
            got += static_cast<size_t>(n);
        }
        return true;
    }
    int rd() const { return rd_; }
    int wr() const { return wr_; }

private:
    int rd_ = -1;
    int wr_ = -1;
};

// A forked process running fn; fn's result ("" = passed, else what failed) comes back through a
// pipe of its own. The process exits after fn; it never returns into gtest.
class Child {
public:
    explicit Child(const std::function<std::string(const Channel &)> &fn)
    {
        int to_child[2], from_child[2], result[2];
        if (pipe2(to_child, O_CLOEXEC) != 0 || pipe2(from_child, O_CLOEXEC) != 0 ||
            pipe2(result, O_CLOEXEC) != 0) {
            ADD_FAILURE() << "pipe: " << std::strerror(errno);
            return;
        }
        pid_ = fork();
        if (pid_ == 0) {
            close(to_child[1]);
            close(from_child[0]);
            close(result[0]);
            std::string r = fn(Channel(to_child[0], from_child[1]));
            if (r.empty()) {
                r = "ok";
            }
            ssize_t w = write(result[1], r.data(), r.size());
            (void)w;
            _exit(0);
        }
        close(to_child[0]);
        close(from_child[1]);
        close(result[1]);
        chan_ = Channel(from_child[0], to_child[1]);
        result_fd_ = result[0];
    }
    ~Child()
    {
        if (pid_ > 0 && !reaped_) {
            ::kill(pid_, SIGKILL);
            wait_pid(pid_, 10);
        }
        for (int fd : {chan_.rd(), chan_.wr(), result_fd_}) {
            if (fd >= 0) {
                close(fd);
            }
        }
    }
    Child(const Child &) = delete;
    Child &operator=(const Child &) = delete;

    pid_t pid() const { return pid_; }
    const Channel &chan() const { return chan_; }
    void kill(int sig) { ::kill(pid_, sig); }
    // fn's result, or why there is none (killed, timed out).
    std::string join(double seconds = 60.0)
    {
        const int status = wait_pid(pid_, seconds);
        if (status == -1) {
            ::kill(pid_, SIGKILL);
            wait_pid(pid_, 10);
            reaped_ = true;
            return "child did not finish within " + std::to_string(seconds) + " s";
        }
        reaped_ = true;
        std::string r;
        char buf[512];
        ssize_t n;
        while ((n = read(result_fd_, buf, sizeof(buf))) > 0) {
            r.append(buf, static_cast<size_t>(n));
        }
        if (r.empty()) {
            return WIFSIGNALED(status) ? "child killed by signal " + std::to_string(WTERMSIG(status))
                                       : "child exited without a result";
        }
        return r == "ok" ? "" : r;
    }

private:
    pid_t pid_ = -1;
    bool reaped_ = false;
    Channel chan_;
    int result_fd_ = -1;
};

// A srcd for one test, on a socket of its own.
class AgentProcess {
public:
    explicit AgentProcess(std::vector<std::string> args = {})
        : args_(std::move(args))
    {
        static unsigned counter = 0;
        socket_ = "@srcd-test-" + std::to_string(getpid()) + "-" + std::to_string(++counter);
    }
    ~AgentProcess() { stop(); }

    const std::string &socket() const { return socket_; }
    pid_t pid() const { return pid_; }

    // Stops the agent (SIGSTOP) and returns once it is stopped, so that work posted meanwhile
    // is found by one pass when resume() lets it go on; false if it did not stop within 10 s.
    bool pause() const
    {
        ::kill(pid_, SIGSTOP);
        const uint64_t start = now_ns();
        const std::string stat = "/proc/" + std::to_string(pid_) + "/stat";
        while (seconds_since(start) < 10.0) {
            char buf[512] = "";
            FILE *f = std::fopen(stat.c_str(), "r");
            const size_t n = f != nullptr ? std::fread(buf, 1, sizeof(buf) - 1, f) : 0;
            if (f != nullptr) {
                std::fclose(f);
            }
            const char *paren = std::strrchr(buf, ')');   // "pid (comm) STATE ..."
            if (n != 0 && paren != nullptr && paren[1] == ' ' && paren[2] == 'T') {
                return true;
            }
            usleep(100);
        }
        return false;
    }
    void resume() const { ::kill(pid_, SIGCONT); }

    // Starts srcd in the foreground and waits until it answers; before_exec runs in the child
    // just before it execs srcd (a seccomp filter, a change of user).
    bool start(const std::function<void()> &before_exec = nullptr, double seconds = 20.0)
    {
        std::vector<std::string> argv = {SRCD_PATH, "--foreground", "-a", "127.0.0.1", "-s", socket_};
        argv.insert(argv.end(), args_.begin(), args_.end());
        pid_ = fork();
        if (pid_ == 0) {
            if (before_exec) {
                before_exec();
            }
            std::vector<char *> a;
            for (std::string &s : argv) {
                a.push_back(&s[0]);
            }
            a.push_back(nullptr);
            execv(SRCD_PATH, a.data());
            _exit(127);
        }
        const uint64_t start = now_ns();
        while (seconds_since(start) < seconds) {
            const int fd = agent::socket_connect(socket_);
            if (fd >= 0) {
                close(fd);
                return true;
            }
            int status;
            if (waitpid(pid_, &status, WNOHANG) == pid_) {
                pid_ = -1;
                return false;
            }
            usleep(5000);
        }
        return false;
    }

    // SIGTERM (or sig), then wait; true if it exited within seconds.
    bool stop(int sig = SIGTERM, double seconds = 20.0)
    {
        if (pid_ <= 0) {
            return true;
        }
        ::kill(pid_, sig);
        const int status = wait_pid(pid_, seconds);
        if (status == -1) {
            ::kill(pid_, SIGKILL);
            wait_pid(pid_, 10);
        }
        pid_ = -1;
        status_ = status;
        return status != -1;
    }
    // The wait status of the agent stop() ended (-1: it had to be killed).
    int exit_status() const { return status_; }

    // Open descriptors and resident memory of the agent (leak checks).
    size_t fd_count() const
    {
        size_t n = 0;
        DIR *d = opendir(("/proc/" + std::to_string(pid_) + "/fd").c_str());
        if (d == nullptr) {
            return 0;
        }
        while (readdir(d) != nullptr) {
            ++n;
        }
        closedir(d);
        return n - 2;
    }
    size_t rss_kb() const
    {
        FILE *f = std::fopen(("/proc/" + std::to_string(pid_) + "/status").c_str(), "r");
        size_t kb = 0;
        char line[256];
        while (f != nullptr && std::fgets(line, sizeof(line), f) != nullptr) {
            if (std::sscanf(line, "VmRSS: %zu", &kb) == 1) {
                break;
            }
        }
        if (f != nullptr) {
            std::fclose(f);
        }
        return kb;
    }

    // The agent's status JSON (what srcctl --json prints); "" if it does not answer.
    std::string status() const
    {
        const int fd = agent::socket_connect(socket_);
        if (fd < 0) {
            return "";
        }
        agent::MsgHeader req = {static_cast<uint32_t>(agent::MsgType::kStatus), sizeof(agent::MsgHeader), 0, 0};
        std::string text;
        std::vector<uint8_t> buf(sizeof(agent::MsgHeader) + 65536);
        if (agent::send_msg(fd, &req, sizeof(req))) {
            for (;;) {
                const ssize_t n = agent::recv_msg(fd, buf.data(), buf.size(), nullptr, nullptr);
                agent::MsgHeader h;
                if (n < static_cast<ssize_t>(sizeof(h))) {
                    break;
                }
                std::memcpy(&h, buf.data(), sizeof(h));
                text.append(reinterpret_cast<char *>(buf.data()) + sizeof(h), n - sizeof(h));
                if (h.reserved != 0) {
                    break;
                }
            }
        }
        close(fd);
        return text;
    }

    // srcnic_attach_config_t for this agent's engine.
    srcnic_attach_config_t attach_config(uint32_t job_key = 0) const
    {
        srcnic_attach_config_t c;
        srcnic_attach_config_init(&c);
        std::snprintf(c.socket, sizeof(c.socket), "%s", socket_.c_str());
        c.job_key = job_key;
        c.arena = 64u << 20;
        return c;
    }

private:
    std::vector<std::string> args_;
    std::string socket_;
    pid_t pid_ = -1;
    int status_ = -1;
};

// The number after "key": in a JSON text, from position from; -1 if absent.
inline long long json_number(const std::string &j, const std::string &key, size_t from = 0)
{
    const std::string k = "\"" + key + "\":";
    const size_t at = j.find(k, from);
    return at == std::string::npos ? -1 : std::atoll(j.c_str() + at + k.size());
}

} // namespace test
} // namespace srcnic

#endif
