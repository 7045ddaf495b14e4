// CRC-32C throughput of every path this CPU runs (src/wire/crc32c.h), side by side: which path
// crc32c() picked here and what the others would give. Sizes are those of the engine's packets
// (a header, a 1 KiB message's datagram) and of its large datagrams. The data stays in cache,
// but in the last two columns: there each call takes the next 65000 bytes of a 16 MiB buffer
// ("16M", what the engine benchmark's streams keep in flight) or of a 64 MiB one ("cold"), as a
// sender's CRC over a large message reads memory the CPU has not touched lately.
// A second table times what a receiver does with a large segment: check the CRC of 64,936 bytes
// in the cache and copy them into memory it has not touched lately, as crc32c() then memcpy
// and as crc32c_copy() (one pass), on every path.
//
//   perf/crc32c_bench [ROUNDS]      best of ROUNDS timings per path and size (default 5)
#include "wire/crc32c.h"

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char **argv)
{
    const int rounds = argc > 1 ? std::atoi(argv[1]) : 5;
    if (rounds < 1) {
        std::fprintf(stderr, "usage: crc32c_bench [ROUNDS >= 1]\n");
        return 2;
    }
    const std::vector<srcnic::Crc32cPath> paths = srcnic::crc32c_paths();
    const size_t sizes[] = {104, 256, 512, 1128, 4096, 16384, 65000, 65000, 65000};
    const size_t nsizes = sizeof(sizes) / sizeof(sizes[0]);
    const size_t kColdBytes = size_t(64) << 20;
    // Bytes each column's calls walk through, 0 = in the cache (8 alignments).
    const size_t spans[] = {0, 0, 0, 0, 0, 0, 0, size_t(16) << 20, kColdBytes};
    static_assert(sizeof(spans) == sizeof(sizes), "a span per column");
    std::vector<uint8_t> buf(kColdBytes);
    uint32_t x = 12345;   // fixed data: the figures do not depend on it
    for (uint8_t &b : buf) {
        x = x * 1103515245u + 12345u;
        b = static_cast<uint8_t>(x >> 24);
    }
    std::printf("crc32c() uses: %s\n%-34s", srcnic::crc32c_path_name(), "path \\ bytes");
    for (size_t s = 0; s < nsizes; s++) {
        std::printf(" %10zu%s", sizes[s],
                    spans[s] == 0 ? "     " : spans[s] == kColdBytes ? " cold" : "  16M");
    }
    std::printf("\n");
    // Paths take turns within each round, so a machine that changes speed during the run
    // slows them alike.
    uint32_t sink = 0;
    std::vector<std::vector<double>> best_ns(paths.size(), std::vector<double>(nsizes));
    for (size_t s = 0; s < nsizes; s++) {
        const size_t size = sizes[s];
        const size_t calls = (32u << 20) / size + 1;   // 32 MiB a timing
        for (int r = 0; r < rounds; r++) {
            for (size_t p = 0; p < paths.size(); p++) {
                const auto t0 = std::chrono::steady_clock::now();
                size_t at = 0;
                for (size_t i = 0; i < calls; i++) {
                    if (spans[s] != 0) {
                        at = (at + size + 64 <= spans[s]) ? at + size : 0;
                    } else {
                        at = (i & 7) * 64;   // 8 alignments
                    }
                    sink += paths[p].fn(sink, buf.data() + at, size);
                }
                const auto t1 = std::chrono::steady_clock::now();
                const double ns = std::chrono::duration<double, std::nano>(t1 - t0).count() / calls;
                best_ns[p][s] = (r == 0 || ns < best_ns[p][s]) ? ns : best_ns[p][s];
            }
        }
    }
    for (size_t p = 0; p < paths.size(); p++) {
        std::printf("%-34s", paths[p].name);
        for (size_t s = 0; s < nsizes; s++) {
            std::printf(" %6.0f ns %4.1fG", best_ns[p][s], sizes[s] / best_ns[p][s]);
        }
        std::printf("\n");
    }
    std::printf("(ns per call and GB/s, best of %d; checksum %08x)\n", rounds, sink);

    // The receiver's check and placement of a segment: from a source in the cache into the next
    // part of a 64 MiB destination.
    const size_t seg = 64936;
    const std::vector<uint8_t> src(buf.begin(), buf.begin() + seg);
    std::vector<uint8_t> dst(kColdBytes);
    const size_t calls = (256u << 20) / seg;
    std::printf("\n%-34s %17s %17s\n", "path: check and place 64936 B", "crc32c+memcpy",
                "crc32c_copy");
    std::vector<std::array<double, 2>> place_ns(paths.size());
    for (int r = 0; r < rounds; r++) {
        for (size_t p = 0; p < paths.size(); p++) {
            for (int fused = 0; fused < 2; fused++) {
                size_t at = 0;
                const auto t0 = std::chrono::steady_clock::now();
                for (size_t i = 0; i < calls; i++) {
                    at = (at + 2 * seg <= kColdBytes) ? at + seg : 0;
                    if (fused) {
                        sink += paths[p].copy(sink, dst.data() + at, src.data(), seg);
                    } else {
                        sink += paths[p].fn(sink, src.data(), seg);
                        std::memcpy(dst.data() + at, src.data(), seg);
                    }
                }
                const auto t1 = std::chrono::steady_clock::now();
                const double ns = std::chrono::duration<double, std::nano>(t1 - t0).count() / calls;
                place_ns[p][fused] = (r == 0 || ns < place_ns[p][fused]) ? ns : place_ns[p][fused];
            }
        }
    }
    for (size_t p = 0; p < paths.size(); p++) {
        std::printf("%-34s %9.0f ns %4.1fG %9.0f ns %4.1fG\n", paths[p].name, place_ns[p][0],
                    seg / place_ns[p][0], place_ns[p][1], seg / place_ns[p][1]);
    }
    std::printf("(best of %d; checksum %08x)\n", rounds, sink);
    return 0;
}
