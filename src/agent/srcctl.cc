// srcctl: asks a node agent for its state (attached processes, QPs, connections, counters) and
// prints it as JSON or as a summary; with --wait it first waits for the agent to answer.
#include "agent/control.h"
#include "agent/proto.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <getopt.h>
#include <string>
#include <unistd.h>
#include <vector>

using namespace srcnic::agent;

namespace {

void usage(FILE *out)
{
    std::fprintf(out,
        "usage: srcctl [--socket NAME] [--json] [--wait SECONDS]\n"
        "Prints the state of the srcnic node agent (srcd) on this node: its engines, their\n"
        "connections (one per remote node in use), the attached processes and their QPs.\n"
        "  -s, --socket NAME   the agent's socket (default @srcd, or UCX_SRC_AGENT_SOCKET)\n"
        "  -j, --json          the whole state as one JSON object\n"
        "  -w, --wait S        wait up to S seconds for an agent to answer\n"
        "Exit status: 0, or 1 if no agent answers.\n");
}

// A few fields of the JSON for the summary, without a parser: the number after "key":.
long long number_after(const std::string &j, size_t from, const char *key)
{
    const std::string k = std::string("\"") + key + "\":";
    const size_t at = j.find(k, from);
    return at == std::string::npos ? -1 : std::atoll(j.c_str() + at + k.size());
}

} // namespace

int main(int argc, char **argv)
{
    const char *env = std::getenv("UCX_SRC_AGENT_SOCKET");
    std::string socket_name = env != nullptr && *env != '\0' ? env : kDefaultSocket;
    bool json = false;
    double wait_s = 0;
    static const struct option opts[] = {{"socket", required_argument, nullptr, 's'},
                                         {"json", no_argument, nullptr, 'j'},
                                         {"wait", required_argument, nullptr, 'w'},
                                         {"help", no_argument, nullptr, 'h'},
                                         {nullptr, 0, nullptr, 0}};
    int opt;
    while ((opt = getopt_long(argc, argv, "s:jw:h", opts, nullptr)) != -1) {
        switch (opt) {
        case 's': socket_name = optarg; break;
        case 'j': json = true; break;
        case 'w': wait_s = std::atof(optarg); break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    int fd;
    for (;;) {
        fd = socket_connect(socket_name);
        if (fd >= 0) {
            break;
        }
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9 >= wait_s) {
            std::fprintf(stderr, "srcctl: no agent answers on %s: %s\n", socket_name.c_str(),
                         std::strerror(errno));
            return 1;
        }
        usleep(20000);
    }
    MsgHeader req = {static_cast<uint32_t>(MsgType::kStatus), sizeof(MsgHeader), 0, 0};
    if (!send_msg(fd, &req, sizeof(req))) {
        std::fprintf(stderr, "srcctl: %s: %s\n", socket_name.c_str(), std::strerror(errno));
        return 1;
    }
    std::string text;
    std::vector<uint8_t> buf(sizeof(MsgHeader) + 65536);
    for (;;) {
        const ssize_t n = recv_msg(fd, buf.data(), buf.size(), nullptr, nullptr);
        MsgHeader hdr;
        if (n < static_cast<ssize_t>(sizeof(hdr))) {
            std::fprintf(stderr, "srcctl: the agent on %s did not answer\n", socket_name.c_str());
            return 1;
        }
        std::memcpy(&hdr, buf.data(), sizeof(hdr));
        if (hdr.type != static_cast<uint32_t>(MsgType::kStatusReply) || hdr.status != 0) {
            std::fprintf(stderr, "srcctl: the agent on %s refused: status %d (another user's agent?)\n",
                         socket_name.c_str(), hdr.status);
            return 1;
        }
        text.append(reinterpret_cast<const char *>(buf.data()) + sizeof(hdr), n - sizeof(hdr));
        if (hdr.reserved != 0) {
            break;
        }
    }
    close(fd);
    if (json) {
        std::printf("%s\n", text.c_str());
        return 0;
    }
    // The summary: the agent, then per engine its connections.
    std::printf("agent pid %lld on %s: %lld processes attached (%lld attaches, %lld refused)\n",
                number_after(text, 0, "pid"), socket_name.c_str(), number_after(text, 0, "clients"),
                number_after(text, 0, "attaches"), number_after(text, 0, "refusals"));
    size_t at = text.find("\"engines\":[");
    while ((at = text.find("{\"address\":\"", at)) != std::string::npos) {
        const size_t a0 = at + 12;
        const std::string address = text.substr(a0, text.find('"', a0) - a0);
        std::printf("engine %s port %lld: %lld connections, %lld bytes of connection state each\n",
                    address.c_str(), number_after(text, at, "port"), number_after(text, at, "connections"),
                    number_after(text, at, "conn_state_bytes"));
        const size_t peers = text.find("\"peers\":[", at);
        const size_t end = text.find("]}", peers);
        for (size_t p = text.find("{\"id\":", peers); p != std::string::npos && p < end;
             p = text.find("{\"id\":", p + 1)) {
            const size_t q0 = text.find("\"peer\":\"", p) + 8;
            const size_t k0 = text.find("\"kind\":\"", p) + 8;   // connection, DCI, DC target
            std::printf("  %s %lld to %s: %lld packets out, %lld in, %lld retransmitted, srtt %lld us\n",
                        text.substr(k0, text.find('"', k0) - k0).c_str(),
                        number_after(text, p, "id"), text.substr(q0, text.find('"', q0) - q0).c_str(),
                        number_after(text, p, "tx_packets"), number_after(text, p, "rx_packets"),
                        number_after(text, p, "retransmits"), number_after(text, p, "srtt_us"));
        }
        at = end;
    }
    return 0;
}
