// The attacker of tests/cluster/netns_attack.sh: a host that knows a victim engine's IP and port
// but not its address (no secret). `capture` records the srcnic datagrams an interface carries
// (what an observer on the path would keep, for replays and the identifiers they show);
// `attack` sends the victims packets under a wrong job key, forged first packets, packets to
// every QPN 0..4096, WRITEs and
// READs with guessed rkeys, the captured packets again, and a SYN flood, from its own address,
// every loop bounded in count and time, and counts each datagram that comes back: there must be
// none. It prints, per victim, how many packets of each kind it sent, which the victims'
// counters must account for.
//
//   srcnic_forge capture IFACE SECONDS MAX_PACKETS FILE
//   srcnic_forge attack SEED SECONDS FILE IP:PORT [IP:PORT ...]
#include "core/random.h"
#include "wire/header.h"

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

using namespace srcnic;

namespace {

using Clock = std::chrono::steady_clock;

// now + seconds, as a time point of the clock.
Clock::time_point after(double seconds)
{
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// Packets a second the attack sends at most: the victims count what they read, and a flood
// faster than their ranks read (an engine of MPI's one-sided worker is progressed only by its
// background timer, every 50 ms, between RMA calls) would be dropped by the kernel, uncounted.
constexpr double kMaxRate = 10000;
constexpr uint32_t kMaxQpn = 4096;        // the QPN sweep covers 0..kMaxQpn
constexpr uint32_t kGuesses = 256;        // packets with guessed incarnations, per victim
constexpr uint32_t kWrongJob = 256;      // packets under a wrong job key, per victim
constexpr uint32_t kRkeyGuesses = 1024;   // WRITEs and READs with guessed rkeys, per victim
constexpr uint32_t kMaxReplays = 4000;    // captured packets sent again, per victim
constexpr uint32_t kFlood = 20000;        // SYN flood, per victim

// One datagram seen on the wire, to the victim at ip:port.
struct Captured {
    uint32_t ip;                 // destination IPv4 address, network order
    uint16_t port;               // destination UDP port, host order
    std::vector<uint8_t> bytes;  // the UDP payload: a srcnic packet
};

// What the attack sent one victim, by the check that must drop it.
struct Sent {
    uint64_t wrong_job = 0;      // a job key not the job's: DROP_WRONG_JOB_KEY
    uint64_t wrong_nic = 0;      // guessed incarnation: DROP_WRONG_NIC
    uint64_t bad_proof = 0;      // dst_conn 0, SYN, no valid proof: DROP_BAD_PROOF
    uint64_t no_conn = 0;        // dst_conn 0 without SYN: DROP_NO_CONN
    uint64_t wrong_gen = 0;      // a guessed connection id: DROP_WRONG_GEN
    uint64_t wrong_peer = 0;     // a live connection's id from our address: DROP_WRONG_PEER
    uint64_t replayed = 0;       // captured packets sent again (counted in the two above too)
};

struct Target {
    uint32_t ip;                 // network order
    uint16_t port;               // host order
    std::string text;            // "IP:PORT"
    uint64_t incarnation = 0;    // learned from captured packets to it (0: none seen)
    std::vector<uint32_t> ids;   // its connection ids seen in captured packets
    std::vector<uint64_t> rkeys; // rkeys seen in captured WRITEs and READs to it
    std::vector<const Captured *> replays;
    Sent sent;
};

bool write_all(std::ofstream &out, const void *p, size_t n)
{
    out.write(static_cast<const char *>(p), static_cast<std::streamsize>(n));
    return static_cast<bool>(out);
}

// Records the srcnic datagrams IFACE carries, both ways, for SECONDS or MAX packets.
int capture(const char *iface, double seconds, uint32_t max, const char *file)
{
    // ETH_P_ALL: a bridge port hands its frames to the bridge before any handler of one
    // protocol sees them, and only taps of every protocol see a device's outgoing frames.
    const int fd = ::socket(AF_PACKET, SOCK_DGRAM, htons(ETH_P_ALL));
    if (fd < 0) {
        std::perror("forge: socket(AF_PACKET)");
        return 1;
    }
    struct sockaddr_ll ll = {};
    ll.sll_family = AF_PACKET;
    ll.sll_protocol = htons(ETH_P_ALL);
    ll.sll_ifindex = static_cast<int>(if_nametoindex(iface));
    if (ll.sll_ifindex == 0 || ::bind(fd, reinterpret_cast<sockaddr *>(&ll), sizeof(ll)) != 0) {
        std::fprintf(stderr, "forge: cannot capture on %s: %s\n", iface, std::strerror(errno));
        return 1;
    }
    std::ofstream out(file, std::ios::binary);
    const auto end = after(seconds);
    uint32_t kept = 0;
    uint8_t buf[70000];
    while (kept < max && Clock::now() < end) {
        struct pollfd p = {fd, POLLIN, 0};
        if (::poll(&p, 1, 50) <= 0) {
            continue;
        }
        struct sockaddr_ll from = {};
        socklen_t flen = sizeof(from);
        const ssize_t n = ::recvfrom(fd, buf, sizeof(buf), 0, reinterpret_cast<sockaddr *>(&from), &flen);
        if (n < static_cast<ssize_t>(sizeof(struct iphdr)) || from.sll_protocol != htons(ETH_P_IP)) {
            continue;
        }
        const struct iphdr *ip = reinterpret_cast<const struct iphdr *>(buf);
        const size_t ihl = ip->ihl * 4u;
        if (ip->protocol != IPPROTO_UDP || n < static_cast<ssize_t>(ihl + sizeof(struct udphdr))) {
            continue;
        }
        const struct udphdr *udp = reinterpret_cast<const struct udphdr *>(buf + ihl);
        const uint8_t *payload = buf + ihl + sizeof(*udp);
        size_t len = static_cast<size_t>(n) - ihl - sizeof(*udp);
        const uint32_t dst = ip->daddr;
        const uint16_t port = ntohs(udp->dest);
        // A segmentation-offload send is seen whole, its datagrams back to back: each is a
        // header, payload_len bytes and pad bytes, as it will arrive.
        while (len >= sizeof(PacketHeader) && payload[0] == kWireVersion && kept < max) {
            PacketHeader h;
            std::memcpy(&h, payload, sizeof(h));
            const uint32_t dlen = static_cast<uint32_t>(sizeof(h) + h.payload_len + h.pad);
            if (dlen > len) {
                break;
            }
            if (!write_all(out, &dst, 4) || !write_all(out, &port, 2) || !write_all(out, &dlen, 4) ||
                !write_all(out, payload, dlen)) {
                std::fprintf(stderr, "forge: cannot write %s\n", file);
                return 1;
            }
            ++kept;
            payload += dlen;
            len -= dlen;
        }
    }
    std::printf("forge: captured %u srcnic datagrams on %s\n", kept, iface);
    ::close(fd);
    return 0;
}

std::vector<Captured> read_capture(const char *file)
{
    std::vector<Captured> v;
    std::ifstream in(file, std::ios::binary);
    for (;;) {
        Captured c;
        uint32_t len;
        if (!in.read(reinterpret_cast<char *>(&c.ip), 4) || !in.read(reinterpret_cast<char *>(&c.port), 2) ||
            !in.read(reinterpret_cast<char *>(&len), 4) || len > 70000) {
            break;
        }
        c.bytes.resize(len);
        if (!in.read(reinterpret_cast<char *>(c.bytes.data()), len)) {
            break;
        }
        v.push_back(std::move(c));
    }
    return v;
}

class Attacker {
public:
    Attacker(uint64_t seed, double seconds) : rng_(seed), end_(after(seconds))
    {
        fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    }
    ~Attacker() { ::close(fd_); }

    bool ok() const { return fd_ >= 0; }
    bool in_time() const { return Clock::now() < end_; }
    uint64_t answers() const { return answers_; }
    uint64_t send_errors() const { return send_errors_; }

    // A header from us to t: guessed or learned incarnation, our made-up identity.
    PacketHeader header(const Target &t, Opcode op, uint16_t flags)
    {
        PacketHeader h;
        std::memset(&h, 0, sizeof(h));
        h.version = kWireVersion;
        h.opcode = static_cast<uint8_t>(op);
        h.flags = flags;
        h.src_nic = 0xa77ac4e500000000ull | (rng_.next() & 0xffffffff);
        h.job_key = job_key_;
        h.dst_nic = t.incarnation;
        h.src_conn = 1 | static_cast<uint32_t>(rng_.next() & 0xffff0000u);
        h.psn = 1;
        h.ack_psn = 1;
        return h;
    }

    // Seals h (with `len` payload bytes of a pattern) and sends it to t, paced, reading answers.
    void send(const Target &t, PacketHeader h, uint32_t len = 0)
    {
        uint8_t buf[sizeof(PacketHeader) + 256];
        len = len > 256 ? 256 : len;
        for (uint32_t i = 0; i < len; ++i) {
            buf[sizeof(PacketHeader) + i] = static_cast<uint8_t>(i * 7 + h.psn);
        }
        h.payload_len = static_cast<uint16_t>(len);
        h.pad = 0;   // (a header learned from a capture may have had some)
        struct iovec iov = {buf + sizeof(PacketHeader), len};
        seal_header(&h, &iov, 1);
        std::memcpy(buf, &h, sizeof(h));
        send_bytes(t, buf, sizeof(h) + len);
    }

    void send_bytes(const Target &t, const uint8_t *bytes, size_t len)
    {
        pace();
        struct sockaddr_in to = {};
        to.sin_family = AF_INET;
        to.sin_addr.s_addr = t.ip;
        to.sin_port = htons(t.port);
        while (::sendto(fd_, bytes, len, 0, reinterpret_cast<sockaddr *>(&to), sizeof(to)) < 0) {
            if (errno != EAGAIN && errno != ENOBUFS) {
                ++send_errors_;
                return;
            }
            drain(1);
        }
        ++sent_;
    }

    // Reads whatever came back, waiting up to ms for the first datagram.
    void drain(int ms)
    {
        struct pollfd p = {fd_, POLLIN, 0};
        while (::poll(&p, 1, ms) > 0) {
            uint8_t buf[70000];
            struct sockaddr_in from = {};
            socklen_t flen = sizeof(from);
            const ssize_t n = ::recvfrom(fd_, buf, sizeof(buf), 0, reinterpret_cast<sockaddr *>(&from), &flen);
            if (n < 0) {
                break;
            }
            ++answers_;
            if (answers_ <= 5) {
                char ip[INET_ADDRSTRLEN];
                inet_ntop(AF_INET, &from.sin_addr, ip, sizeof(ip));
                PacketHeader h = {};
                std::memcpy(&h, buf, std::min<size_t>(static_cast<size_t>(n), sizeof(h)));
                std::printf("forge: ANSWER from %s:%u, %zd bytes: %s\n", ip, ntohs(from.sin_port), n,
                            static_cast<size_t>(n) >= sizeof(h) ? to_string(h).c_str() : "(short)");
            }
            ms = 0;
        }
    }

    Random &rng() { return rng_; }
    // The job key is plain text in every header: an observer learns it, so the forged packets
    // carry it and meet the checks behind it.
    void set_job_key(uint32_t k) { job_key_ = k; }
    uint32_t job_key() const { return job_key_; }

private:
    // At most kMaxRate packets a second: sleeps (bounded) when ahead of that.
    void pace()
    {
        if (sent_ == 0) {
            start_ = Clock::now();
        }
        if (sent_ % 64 == 0) {
            drain(0);
            const auto due = start_ + std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(sent_ / kMaxRate));
            const auto now = Clock::now();
            if (due > now) {
                const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(due - now).count();
                struct timespec ts = {static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
                ::nanosleep(&ts, nullptr);
            }
        }
    }

    int fd_ = -1;
    Random rng_;
    uint32_t job_key_ = 0;
    Clock::time_point end_;
    Clock::time_point start_;
    uint64_t sent_ = 0;
    uint64_t answers_ = 0;
    uint64_t send_errors_ = 0;
};

const Opcode kAnyOp[] = {Opcode::kSEND, Opcode::kWRITE, Opcode::kREAD_REQ, Opcode::kACK,
                         Opcode::kNAK,  Opcode::kRST};

int attack(uint64_t seed, double seconds, const char *file, std::vector<Target> &targets)
{
    std::printf("forge: seed %llu\n", static_cast<unsigned long long>(seed));
    Attacker a(seed, seconds);
    if (!a.ok()) {
        std::perror("forge: socket");
        return 2;
    }
    // What an observer of the wire learnt: each victim's incarnation, connection ids and rkeys.
    const std::vector<Captured> cap = read_capture(file);
    for (Target &t : targets) {
        std::set<uint32_t> ids;
        std::set<uint64_t> rkeys;
        for (const Captured &c : cap) {
            if (c.ip != t.ip || c.port != t.port) {
                continue;
            }
            PacketHeader h;
            std::memcpy(&h, c.bytes.data(), sizeof(h));
            t.incarnation = h.dst_nic;
            a.set_job_key(h.job_key);   // one job: every engine of it has the same key
            if (h.dst_conn != 0) {
                ids.insert(h.dst_conn);
            }
            if ((h.opcode == static_cast<uint8_t>(Opcode::kWRITE) ||
                 h.opcode == static_cast<uint8_t>(Opcode::kREAD_REQ)) && h.rkey != 0) {
                rkeys.insert(h.rkey);
            }
            if (t.replays.size() < kMaxReplays) {
                t.replays.push_back(&c);
            }
        }
        t.ids.assign(ids.begin(), ids.end());
        t.rkeys.assign(rkeys.begin(), rkeys.end());
        std::printf("forge: %s: captured %zu packets to it, incarnation %s, %zu connection ids, "
                    "%zu rkeys\n", t.text.c_str(), t.replays.size(), t.incarnation ? "seen" : "unseen",
                    t.ids.size(), t.rkeys.size());
    }
    Random &rng = a.rng();
    for (Target &t : targets) {
        Sent &s = t.sent;
        // 0. A key not the job's, on packets otherwise as in 1: dropped on the key alone.
        for (uint32_t i = 0; i < kWrongJob && a.in_time(); ++i) {
            PacketHeader h = a.header(t, kAnyOp[i % 6], kFlagFirst | kFlagLast);
            h.job_key = a.job_key() ^ static_cast<uint32_t>(1 + rng.below(0xfffffffeu));
            h.dst_conn = static_cast<uint32_t>(rng.next());
            a.send(t, h, 0);
            ++s.wrong_job;
        }
        // 1. Knowing only IP and port: guessed incarnations, every packet type, no answer may
        // come (an RST here would carry the victim's incarnation).
        const uint64_t known = t.incarnation;
        for (uint32_t i = 0; i < kGuesses && a.in_time(); ++i) {
            t.incarnation = i < 4 ? i : rng.next();
            if (t.incarnation == known) {
                t.incarnation ^= 1;
            }
            const Opcode op = kAnyOp[i % 6];
            const bool seq = opcode_info(static_cast<uint8_t>(op)).sequenced;
            PacketHeader h = a.header(t, op, seq ? kFlagFirst | kFlagLast : 0);
            if (i % 2 == 0 && seq) {
                h.flags |= kFlagSyn;
                h.auth = rng.next() | 1;
            } else {
                h.dst_conn = static_cast<uint32_t>(1 + i % 8) | static_cast<uint32_t>(rng.next() & 0xffff) << 16;
            }
            h.dst_qpn = i % 5;
            h.msg_len = op == Opcode::kSEND || op == Opcode::kWRITE ? 64 : 0;
            a.send(t, h, h.msg_len);
            ++s.wrong_nic;
        }
        t.incarnation = known;
        if (known == 0) {
            continue;   // nothing captured: the rest needs the incarnation
        }
        // 2. Every QPN 0..4096, with the incarnation an observer saw: a SYN SEND with a made-up
        // proof and one with none, a SEND without SYN, one naming a guessed connection id and
        // one naming a live one (from our address).
        for (uint32_t qpn = 0; qpn <= kMaxQpn && a.in_time(); ++qpn) {
            PacketHeader h = a.header(t, Opcode::kSEND, kFlagSyn | kFlagFirst | kFlagLast);
            h.dst_qpn = qpn;
            h.msg_len = 32;
            h.auth = rng.next() | 1;
            a.send(t, h, 32);
            h.auth = 0;
            a.send(t, h, 32);
            s.bad_proof += 2;
            h.flags = kFlagFirst | kFlagLast;
            a.send(t, h, 32);
            ++s.no_conn;
            h.dst_conn = static_cast<uint32_t>(1 + rng.below(16)) | static_cast<uint32_t>(rng.next() & 0xffff) << 16;
            bool live = false;
            for (uint32_t id : t.ids) {
                live |= id == h.dst_conn;
            }
            if (!live) {
                a.send(t, h, 32);
                ++s.wrong_gen;
            }
            if (!t.ids.empty()) {
                h.dst_conn = t.ids[qpn % t.ids.size()];
                h.psn = static_cast<uint32_t>(rng.next());
                a.send(t, h, 32);
                ++s.wrong_peer;
            }
        }
        // 3. WRITEs and READs with guessed rkeys (random ones, and neighbours of those seen),
        // as opening packets and on live connections.
        for (uint32_t i = 0; i < kRkeyGuesses && a.in_time(); ++i) {
            const bool write = i % 2 == 0;
            PacketHeader h = a.header(t, write ? Opcode::kWRITE : Opcode::kREAD_REQ, kFlagFirst | kFlagLast);
            h.rkey = !t.rkeys.empty() && i % 4 < 2 ? t.rkeys[i % t.rkeys.size()] + (i >> 2) + 1
                                                   : rng.next();
            h.addr = 0x7f0000000000ull + (rng.next() & 0xffffff);
            h.msg_len = write ? 64 : 4096;
            if (t.ids.empty() || i % 3 == 0) {
                h.flags |= kFlagSyn;
                h.auth = rng.next() | 1;
                ++s.bad_proof;
            } else {
                h.dst_conn = t.ids[i % t.ids.size()];
                ++s.wrong_peer;
            }
            a.send(t, h, write ? 64 : 0);
        }
        // 4. Captured packets, byte for byte, from our address.
        for (const Captured *c : t.replays) {
            if (!a.in_time()) {
                break;
            }
            PacketHeader h;
            std::memcpy(&h, c->bytes.data(), sizeof(h));
            a.send_bytes(t, c->bytes.data(), c->bytes.size());
            ++s.replayed;
            ++(h.dst_conn == 0 ? s.bad_proof : s.wrong_peer);
        }
        // 5. A SYN flood: opening packets with made-up proofs, every field random.
        for (uint32_t i = 0; i < kFlood && a.in_time(); ++i) {
            PacketHeader h = a.header(t, Opcode::kSEND, kFlagSyn | kFlagFirst | kFlagLast);
            h.psn = static_cast<uint32_t>(rng.next());
            h.dst_qpn = static_cast<uint32_t>(rng.below(kMaxQpn + 1));
            h.imm = static_cast<uint32_t>(rng.next());
            h.auth = rng.next() | 1;
            a.send(t, h, 0);
            ++s.bad_proof;
        }
    }
    a.drain(300);   // the last answers, if any (bounded)
    for (const Target &t : targets) {
        const Sent &s = t.sent;
        std::printf("forge: sent %s wrong_job=%llu wrong_nic=%llu bad_proof=%llu no_conn=%llu wrong_gen=%llu "
                    "wrong_peer=%llu replayed=%llu\n", t.text.c_str(),
                    static_cast<unsigned long long>(s.wrong_job), static_cast<unsigned long long>(s.wrong_nic),
                    static_cast<unsigned long long>(s.bad_proof),
                    static_cast<unsigned long long>(s.no_conn), static_cast<unsigned long long>(s.wrong_gen),
                    static_cast<unsigned long long>(s.wrong_peer), static_cast<unsigned long long>(s.replayed));
    }
    std::printf("forge: answers=%llu send_errors=%llu%s\n", static_cast<unsigned long long>(a.answers()),
                static_cast<unsigned long long>(a.send_errors()), a.in_time() ? "" : " (time bound reached)");
    return a.answers() == 0 ? 0 : 1;
}

bool parse_target(const char *text, Target *t)
{
    const char *colon = std::strrchr(text, ':');
    if (colon == nullptr) {
        return false;
    }
    const std::string ip(text, colon);
    struct in_addr a;
    if (inet_pton(AF_INET, ip.c_str(), &a) != 1) {
        return false;
    }
    t->ip = a.s_addr;
    t->port = static_cast<uint16_t>(std::atoi(colon + 1));
    t->text = text;
    return t->port != 0;
}

} // namespace

int main(int argc, char **argv)
{
    if (argc == 6 && std::strcmp(argv[1], "capture") == 0) {
        return capture(argv[2], std::atof(argv[3]), static_cast<uint32_t>(std::atoi(argv[4])), argv[5]);
    }
    if (argc >= 6 && std::strcmp(argv[1], "attack") == 0) {
        std::vector<Target> targets;
        for (int i = 5; i < argc; ++i) {
            Target t;
            if (!parse_target(argv[i], &t)) {
                std::fprintf(stderr, "forge: bad target '%s' (IPv4:PORT)\n", argv[i]);
                return 2;
            }
            targets.push_back(t);
        }
        return attack(std::strtoull(argv[2], nullptr, 0), std::atof(argv[3]), argv[4], targets);
    }
    std::fprintf(stderr, "usage: srcnic_forge capture IFACE SECONDS MAX_PACKETS FILE\n"
                         "       srcnic_forge attack SEED SECONDS FILE IP:PORT [IP:PORT ...]\n");
    return 2;
}
