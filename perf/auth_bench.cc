// What authenticating a packet costs, side by side (PROTOCOL.md §7.2): the SYN proof
// (SipHash-2-4 over the 124 bytes of header and address) that a MAC on every packet would cost
// its sender and again its receiver, against the checks the engine makes on every packet to
// bind it to its connection (id, generation, address, incarnation: compares of what the packet
// carries with what the connection holds), and against the CRC-32C of the header that every
// packet already pays. Best of ROUNDS timings of a million calls each, ns per call.
//
//   perf/auth_bench [ROUNDS]      default 5
#include "wire/auth.h"
#include "wire/crc32c.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

using Clock = std::chrono::steady_clock;

// Best ns per call of fn over `rounds` timings of `calls` calls.
template <typename Fn>
double best_ns(int rounds, uint32_t calls, Fn &&fn)
{
    double best = 1e30;
    for (int r = 0; r < rounds; ++r) {
        const auto t0 = Clock::now();
        for (uint32_t i = 0; i < calls; ++i) {
            fn(i);
        }
        const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / calls;
        best = ns < best ? ns : best;
    }
    return best;
}

} // namespace

int main(int argc, char **argv)
{
    const int rounds = argc > 1 ? std::atoi(argv[1]) : 5;
    if (rounds < 1) {
        std::fprintf(stderr, "usage: auth_bench [ROUNDS >= 1]\n");
        return 2;
    }
    using namespace srcnic;
    constexpr uint32_t kCalls = 1u << 20;
    PacketHeader h;
    std::memset(&h, 0, sizeof(h));
    h.version = kWireVersion;
    h.opcode = static_cast<uint8_t>(Opcode::kSEND);
    h.src_nic = 0x1122334455667788ull;
    h.dst_nic = 0x8877665544332211ull;
    h.src_conn = 0x12340001;
    h.dst_conn = 0x56780002;
    LinkAddr src;
    src.family = LinkAddr::kFamilyInet;
    src.port = 4791;
    src.ip[0] = 127;
    src.ip[3] = 1;
    const SipKey key = nic_key(0x0123456789abcdefull, h.dst_nic);
    // What a connection holds to check a packet against (rx_demux.cc), as volatile loads so
    // that the compiler keeps every compare.
    volatile uint32_t conn_id = h.dst_conn, peer_conn = h.src_conn;
    volatile uint64_t peer_nic = h.src_nic, incarnation = h.dst_nic;
    LinkAddr peer = src;
    uint64_t sink = 0;

    const double proof = best_ns(rounds, kCalls, [&](uint32_t i) {
        h.psn = i;   // a new header each call, as on the wire
        sink += syn_proof(key, h, src);
    });
    const double binding = best_ns(rounds, kCalls, [&](uint32_t i) {
        h.psn = i;
        sink += (h.dst_nic == incarnation && h.dst_conn == conn_id && peer == src &&
                 h.src_nic == peer_nic && h.src_conn == peer_conn) ? 1 : 0;
    });
    const double crc = best_ns(rounds, kCalls, [&](uint32_t i) {
        h.psn = i;
        sink += crc32c(0, &h, sizeof(h));
    });
    std::printf("auth_bench: best of %d rounds of %u calls, ns per call (crc32c uses %s)\n",
                rounds, kCalls, crc32c_path_name());
    std::printf("  SYN proof, SipHash-2-4 over header + address (124 B)   %6.1f\n", proof);
    std::printf("  a MAC on every packet: sender + receiver               %6.1f\n", 2 * proof);
    std::printf("  binding checks of a packet to its connection           %6.1f\n", binding);
    std::printf("  CRC-32C of the header (104 B), for scale               %6.1f\n", crc);
    return sink == 42 ? 1 : 0;   // uses the results
}
