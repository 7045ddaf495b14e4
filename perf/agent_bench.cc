// agent_bench: what the node agent costs a node beyond the traffic it carries. Measures, against
// a running srcd: how long a process takes to attach (srcnic_nic_attach to a usable NIC: the
// socket, the shared segment, the agent's checks and mappings; median and percentiles), that
// attaching sends nothing on the wire, and how much CPU the agent uses while processes are
// attached and idle (its user + system time from /proc over an interval).
//
// usage: agent_bench --socket NAME --pid PID [--attaches N] [--idle-clients K] [--idle-s S]
#include <srcnic/srcnic.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <getopt.h>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

double now_s()
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// The agent's user + system CPU time, s (fields 14 and 15 of /proc/PID/stat).
double cpu_s(int pid)
{
    FILE *f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
    if (f == nullptr) {
        return -1;
    }
    char buf[1024];
    const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
    std::fclose(f);
    buf[n] = '\0';
    const char *p = std::strrchr(buf, ')');
    unsigned long utime = 0, stime = 0;
    if (p == nullptr || std::sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime,
                                    &stime) != 2) {
        return -1;
    }
    return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

} // namespace

int main(int argc, char **argv)
{
    std::string socket = "@srcd";
    int pid = 0, attaches = 200, idle_clients = 8;
    double idle_s = 5;
    static const struct option opts[] = {{"socket", required_argument, nullptr, 's'},
                                         {"pid", required_argument, nullptr, 'p'},
                                         {"attaches", required_argument, nullptr, 'n'},
                                         {"idle-clients", required_argument, nullptr, 'k'},
                                         {"idle-s", required_argument, nullptr, 't'},
                                         {nullptr, 0, nullptr, 0}};
    int opt;
    while ((opt = getopt_long(argc, argv, "s:p:n:k:t:", opts, nullptr)) != -1) {
        switch (opt) {
        case 's': socket = optarg; break;
        case 'p': pid = std::atoi(optarg); break;
        case 'n': attaches = std::atoi(optarg); break;
        case 'k': idle_clients = std::atoi(optarg); break;
        case 't': idle_s = std::atof(optarg); break;
        default:
            std::fprintf(stderr, "usage: agent_bench --socket NAME --pid PID [--attaches N] "
                                 "[--idle-clients K] [--idle-s S]\n");
            return 2;
        }
    }
    srcnic_attach_config_t config;
    srcnic_attach_config_init(&config);
    std::snprintf(config.socket, sizeof(config.socket), "%s", socket.c_str());

    // Attach time, and the wire: a probe attachment reads the engine's packet counters before
    // and after.
    srcnic_nic_t *probe;
    char why[256] = "";
    if (srcnic_nic_attach(&config, &probe, why, sizeof(why)) != SRCNIC_OK) {
        std::fprintf(stderr, "agent_bench: cannot attach on %s: %s\n", socket.c_str(), why);
        return 1;
    }
    const uint64_t tx_before = srcnic_nic_counter(probe, SRCNIC_CNT_TX_PACKETS);
    const unsigned conns_before = srcnic_nic_num_connections(probe);
    std::vector<double> us;
    for (int i = 0; i < attaches; ++i) {
        srcnic_nic_t *nic;
        const double t0 = now_s();
        if (srcnic_nic_attach(&config, &nic, why, sizeof(why)) != SRCNIC_OK) {
            std::fprintf(stderr, "agent_bench: attach %d failed: %s\n", i, why);
            return 1;
        }
        us.push_back((now_s() - t0) * 1e6);
        srcnic_nic_destroy(nic);
    }
    const uint64_t tx_after = srcnic_nic_counter(probe, SRCNIC_CNT_TX_PACKETS);
    const unsigned conns_after = srcnic_nic_num_connections(probe);
    std::sort(us.begin(), us.end());
    auto pct = [&](double p) { return us[static_cast<size_t>(p * static_cast<double>(us.size() - 1))]; };

    // Idle CPU with idle_clients attached (each with a QP and receive buffers posted).
    std::vector<srcnic_nic_t *> idle;
    for (int i = 0; i < idle_clients; ++i) {
        srcnic_nic_t *nic;
        if (srcnic_nic_attach(&config, &nic, why, sizeof(why)) != SRCNIC_OK) {
            std::fprintf(stderr, "agent_bench: idle client %d: %s\n", i, why);
            return 1;
        }
        idle.push_back(nic);
    }
    double cpu_pct = -1;
    if (pid > 0) {
        usleep(200000);   // the agent's last spin after the attachments ends
        const double c0 = cpu_s(pid), t0 = now_s();
        usleep(static_cast<useconds_t>(idle_s * 1e6));
        const double c1 = cpu_s(pid), t1 = now_s();
        cpu_pct = (c0 < 0 || c1 < 0) ? -1 : 100.0 * (c1 - c0) / (t1 - t0);
    }
    for (srcnic_nic_t *nic : idle) {
        srcnic_nic_destroy(nic);
    }
    srcnic_nic_destroy(probe);

    std::printf("attach: %d attaches, median %.1f us, p90 %.1f us, p99 %.1f us, max %.1f us\n",
                attaches, pct(0.5), pct(0.9), pct(0.99), us.back());
    std::printf("attach: packets the engine sent meanwhile %llu, connections %u -> %u\n",
                static_cast<unsigned long long>(tx_after - tx_before), conns_before, conns_after);
    if (cpu_pct >= 0) {
        std::printf("idle: agent CPU %.3f %% of a core over %.1f s with %d idle processes attached\n",
                    cpu_pct, idle_s, idle_clients);
    }
    return 0;
}
