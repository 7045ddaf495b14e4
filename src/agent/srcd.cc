// srcd: the node agent's command line (options, daemonizing, signals); the agent is agent.h.
#include "agent/agent.h"

#include "core/log.h"
#include "core/nic_config.h"

#include <arpa/inet.h>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <getopt.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <pwd.h>
#include <sched.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

using srcnic::agent::Agent;
using srcnic::agent::AgentConfig;

namespace {

Agent *g_agent = nullptr;

void on_signal(int)
{
    if (g_agent != nullptr) {
        g_agent->stop();
    }
}

void usage(FILE *out)
{
    std::fprintf(out,
        "usage: srcd [options]\n"
        "The srcnic node agent: one engine per node address, shared by every process on the node\n"
        "that attaches to it (UCX_SRC_MODE=agent or auto).\n"
        "\n"
        "  -a, --address IP       serve an engine on this address (repeatable)\n"
        "  -i, --interface NAME   serve an engine on this interface's IPv4 address (repeatable);\n"
        "                         without -a/-i: every IPv4 interface that is up\n"
        "  -s, --socket NAME      where processes attach: @NAME (abstract, per network namespace)\n"
        "                         or a path (default @srcd; UCX_SRC_AGENT_SOCKET on the client);\n"
        "                         started by systemd socket activation (LISTEN_FDS), srcd serves\n"
        "                         the socket it is given\n"
        "  -f, --foreground       stay in the foreground (default: detach once serving)\n"
        "  -l, --log-level L      error, warn, info, debug or trace (default warn)\n"
        "      --log-file FILE    append messages to FILE (default: stderr; /dev/null once detached)\n"
        "      --pid-file FILE    write the agent's pid to FILE\n"
        "      --cpu N            run on CPU N\n"
        "      --spin-us N        keep polling N us after the last work before sleeping, while\n"
        "                         fewer tasks want a CPU than there are (default 50)\n"
        "      --allow-user U     also serve processes of user U (name or uid; repeatable); by default\n"
        "                         only the agent's own user and root\n"
        "      --allow-any-user   serve processes of every user\n"
        "      --max-clients N    attached processes at most (default 4096)\n"
        "      --crowded auto|yes|no  whether busy-polling processes take every CPU: then srcd\n"
        "                         does not poll after its work and its processes yield when\n"
        "                         idle (default auto: more runnable tasks than CPUs)\n"
        "      --port N           UDP port of the (first) engine (default: any free port)\n"
        "      --mtu N --window N --sock-buf N --max-connections N --max-inflight N\n"
        "      --num-dci N --dc-targets N --dc-quota N --dc-promote N\n"
        "      --rto-us N --retry-count N --peer-timeout-ms N\n"
        "                         engine settings, as the UCX_SRC_* variables of the same names\n"
        "  -h, --help\n");
}

bool parse_u32(const char *text, uint32_t *v)
{
    char *end;
    errno = 0;
    const unsigned long x = std::strtoul(text, &end, 0);
    if (errno != 0 || *end != '\0' || end == text || x > UINT32_MAX) {
        return false;
    }
    *v = static_cast<uint32_t>(x);
    return true;
}

// The IPv4 address of interface name, or of every interface that is up (name empty).
bool interface_addresses(const std::string &name, std::vector<std::string> *out)
{
    struct ifaddrs *ifaddrs;
    if (getifaddrs(&ifaddrs) != 0) {
        return false;
    }
    bool found = false;
    for (struct ifaddrs *ifa = ifaddrs; ifa != nullptr; ifa = ifa->ifa_next) {
        if (ifa->ifa_addr == nullptr || ifa->ifa_addr->sa_family != AF_INET) {
            continue;
        }
        if (name.empty() ? !((ifa->ifa_flags & IFF_UP) && (ifa->ifa_flags & IFF_RUNNING))
                         : name != ifa->ifa_name) {
            continue;
        }
        char text[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &reinterpret_cast<struct sockaddr_in *>(ifa->ifa_addr)->sin_addr, text,
                  sizeof(text));
        out->push_back(text);
        found = true;
        if (!name.empty()) {
            break;
        }
    }
    freeifaddrs(ifaddrs);
    return found;
}

} // namespace

int main(int argc, char **argv)
{
    AgentConfig config;
    srcnic_config_init(&config.nic);
    config.nic.retry_count = 64;
    config.nic.peer_timeout_ms = 30000;
    bool foreground = false;
    std::string log_file, pid_file;
    int cpu = -1;
    bool any_interface = true;

    enum { kLogFile = 256, kPidFile, kCpu, kSpin, kAllowUser, kAllowAny, kMaxClients, kPort, kMtu,
           kWindow, kSockBuf, kMaxConn, kMaxInflight, kRto, kRetry, kPeerTimeout, kCrowded,
           kNumDci, kDcTargets, kDcQuota, kDcPromote };
    static const struct option opts[] = {
        {"address", required_argument, nullptr, 'a'},
        {"interface", required_argument, nullptr, 'i'},
        {"socket", required_argument, nullptr, 's'},
        {"foreground", no_argument, nullptr, 'f'},
        {"log-level", required_argument, nullptr, 'l'},
        {"log-file", required_argument, nullptr, kLogFile},
        {"pid-file", required_argument, nullptr, kPidFile},
        {"cpu", required_argument, nullptr, kCpu},
        {"spin-us", required_argument, nullptr, kSpin},
        {"allow-user", required_argument, nullptr, kAllowUser},
        {"allow-any-user", no_argument, nullptr, kAllowAny},
        {"max-clients", required_argument, nullptr, kMaxClients},
        {"crowded", required_argument, nullptr, kCrowded},
        {"port", required_argument, nullptr, kPort},
        {"mtu", required_argument, nullptr, kMtu},
        {"window", required_argument, nullptr, kWindow},
        {"sock-buf", required_argument, nullptr, kSockBuf},
        {"max-connections", required_argument, nullptr, kMaxConn},
        {"num-dci", required_argument, nullptr, kNumDci},
        {"dc-targets", required_argument, nullptr, kDcTargets},
        {"dc-quota", required_argument, nullptr, kDcQuota},
        {"dc-promote", required_argument, nullptr, kDcPromote},
        {"max-inflight", required_argument, nullptr, kMaxInflight},
        {"rto-us", required_argument, nullptr, kRto},
        {"retry-count", required_argument, nullptr, kRetry},
        {"peer-timeout-ms", required_argument, nullptr, kPeerTimeout},
        {"help", no_argument, nullptr, 'h'},
        {nullptr, 0, nullptr, 0}};
    int opt;
    while ((opt = getopt_long(argc, argv, "a:i:s:fl:h", opts, nullptr)) != -1) {
        uint32_t v = 0;
        const bool numeric = optarg != nullptr && parse_u32(optarg, &v);
        auto need_number = [&](const char *name) {
            if (!numeric) {
                std::fprintf(stderr, "srcd: --%s needs a number, got '%s'\n", name, optarg);
                std::exit(2);
            }
        };
        switch (opt) {
        case 'a':
            config.addresses.push_back(optarg);
            any_interface = false;
            break;
        case 'i':
            if (!interface_addresses(optarg, &config.addresses)) {
                std::fprintf(stderr, "srcd: interface '%s' has no IPv4 address\n", optarg);
                return 2;
            }
            any_interface = false;
            break;
        case 's': config.socket = optarg; break;
        case 'f': foreground = true; break;
        case 'l': {
            static const char *const levels[] = {"error", "warn", "info", "debug", "trace"};
            int level = -1;
            for (int k = 0; k < 5; ++k) {
                if (std::strcmp(optarg, levels[k]) == 0) {
                    level = k;
                }
            }
            if (level < 0) {
                std::fprintf(stderr, "srcd: --log-level is error, warn, info, debug or trace, not '%s'\n", optarg);
                return 2;
            }
            srcnic_log_set_level(static_cast<srcnic_log_level_t>(level));
            break;
        }
        case kLogFile: log_file = optarg; break;
        case kPidFile: pid_file = optarg; break;
        case kCpu: need_number("cpu"); cpu = static_cast<int>(v); break;
        case kSpin: need_number("spin-us"); config.spin_us = v; break;
        case kAllowUser: {
            if (numeric) {
                config.allow_uids.push_back(static_cast<uid_t>(v));
            } else if (const struct passwd *pw = getpwnam(optarg)) {
                config.allow_uids.push_back(pw->pw_uid);
            } else {
                std::fprintf(stderr, "srcd: no user '%s'\n", optarg);
                return 2;
            }
            break;
        }
        case kAllowAny: config.allow_any_user = true; break;
        case kMaxClients: need_number("max-clients"); config.max_clients = v; break;
        case kCrowded:
            if (std::strcmp(optarg, "auto") == 0) {
                config.crowded = -1;
            } else if (std::strcmp(optarg, "yes") == 0 || std::strcmp(optarg, "no") == 0) {
                config.crowded = optarg[0] == 'y';
            } else {
                std::fprintf(stderr, "srcd: --crowded is auto, yes or no, not '%s'\n", optarg);
                return 2;
            }
            break;
        case kPort: need_number("port"); config.nic.port = static_cast<uint16_t>(v); break;
        case kMtu: need_number("mtu"); config.nic.mtu = v; break;
        case kWindow: need_number("window"); config.nic.window = v; break;
        case kSockBuf: need_number("sock-buf"); config.nic.sock_buf = v; break;
        case kMaxConn: need_number("max-connections"); config.nic.max_connections = v; break;
        case kNumDci: need_number("num-dci"); config.nic.num_dci = v; break;
        case kDcTargets: need_number("dc-targets"); config.nic.dc_targets = v; break;
        case kDcQuota: need_number("dc-quota"); config.nic.dc_quota = v; break;
        case kDcPromote: need_number("dc-promote"); config.nic.dc_promote = v; break;
        case kMaxInflight: need_number("max-inflight"); config.nic.max_inflight = v; break;
        case kRto: need_number("rto-us"); config.nic.rto_us = v; break;
        case kRetry: need_number("retry-count"); config.nic.retry_count = v; break;
        case kPeerTimeout: need_number("peer-timeout-ms"); config.nic.peer_timeout_ms = v; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc) {
        std::fprintf(stderr, "srcd: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (any_interface && !interface_addresses("", &config.addresses)) {
        std::fprintf(stderr, "srcd: no IPv4 interface is up: give --address\n");
        return 2;
    }
    // Socket activation (sd_listen_fds): the listening socket is descriptor 3.
    const char *listen_pid = std::getenv("LISTEN_PID");
    const char *listen_fds = std::getenv("LISTEN_FDS");
    if (listen_pid != nullptr && listen_fds != nullptr &&
        std::strtol(listen_pid, nullptr, 10) == static_cast<long>(getpid())) {
        if (std::strtol(listen_fds, nullptr, 10) != 1) {
            std::fprintf(stderr, "srcd: socket activation passed %s sockets: give srcd one\n", listen_fds);
            return 2;
        }
        config.listen_fd = 3;
        foreground = true;   // the service manager watches srcd itself
        unsetenv("LISTEN_PID");
        unsetenv("LISTEN_FDS");
        unsetenv("LISTEN_FDNAMES");
    }
    if (config.nic.port != 0 && config.addresses.size() > 1) {
        std::fprintf(stderr, "srcd: --port serves one address: give one --address or --interface\n");
        return 2;
    }
    if (srcnic::validate_config(config.nic) != SRCNIC_OK) {
        return 2;   // (validate_config said which value)
    }
    if (!log_file.empty()) {
        const int fd = open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
        if (fd < 0 || dup2(fd, STDERR_FILENO) < 0) {
            std::fprintf(stderr, "srcd: cannot open the log file %s: %s\n", log_file.c_str(), std::strerror(errno));
            return 2;
        }
        close(fd);
    }
    if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        if (sched_setaffinity(0, sizeof(set), &set) != 0) {
            std::fprintf(stderr, "srcd: cannot run on CPU %d: %s\n", cpu, std::strerror(errno));
            return 2;
        }
    }

    // Detached: the parent returns only once the agent serves (or failed), so that a script
    // that starts it can use it at once.
    int ready[2] = {-1, -1};
    if (!foreground) {
        if (pipe2(ready, O_CLOEXEC) != 0) {
            std::perror("srcd: pipe");
            return 1;
        }
        const pid_t child = fork();
        if (child < 0) {
            std::perror("srcd: fork");
            return 1;
        }
        if (child > 0) {
            close(ready[1]);
            char status = 1;
            const ssize_t n = read(ready[0], &status, 1);
            return n == 1 ? status : 1;
        }
        close(ready[0]);
        setsid();
        const int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null >= 0) {
            dup2(null, STDIN_FILENO);
            dup2(null, STDOUT_FILENO);
            if (log_file.empty()) {
                dup2(null, STDERR_FILENO);
            }
            close(null);
        }
    }

    std::unique_ptr<Agent> agent;
    const srcnic_status_t status = Agent::create(config, &agent);
    if (status != SRCNIC_OK) {
        if (ready[1] >= 0) {
            const char fail = 1;
            ssize_t w = write(ready[1], &fail, 1);
            (void)w;
        }
        std::fprintf(stderr, "srcd: not started: %s\n", srcnic_status_string(status));
        return 1;
    }
    if (!pid_file.empty()) {
        FILE *f = std::fopen(pid_file.c_str(), "w");
        if (f == nullptr) {
            std::fprintf(stderr, "srcd: cannot write %s: %s\n", pid_file.c_str(), std::strerror(errno));
            return 1;
        }
        std::fprintf(f, "%d\n", static_cast<int>(getpid()));
        std::fclose(f);
    }
    g_agent = agent.get();
    struct sigaction sa = {};
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    if (ready[1] >= 0) {
        const char ok = 0;
        ssize_t w = write(ready[1], &ok, 1);
        (void)w;
        close(ready[1]);
    }
    const int rc = agent->run();
    g_agent = nullptr;
    agent.reset();   // detaches every process: their sockets close
    if (!pid_file.empty()) {
        unlink(pid_file.c_str());
    }
    return rc;
}
