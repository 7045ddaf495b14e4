// Unit tests for src/wire/crc32c.cc.
#include "wire/crc32c.h"

#include "core/clock.h"
#include "core/random.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

namespace srcnic {
namespace {

// The seed of this run's random buffers: --gtest_random_seed=N when given, else from the clock.
uint64_t test_seed()
{
    const int flag = testing::GTEST_FLAG(random_seed);
    const uint64_t seed = (flag != 0) ? static_cast<uint64_t>(flag) : now_ns() % 99999 + 1;
    std::printf("crc32c test seed: %llu (replay with --gtest_random_seed=%llu)\n",
                static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
    return seed;
}

std::vector<uint8_t> random_bytes(Random &random, size_t len)
{
    std::vector<uint8_t> bytes(len);
    for (auto &byte : bytes) {
        byte = static_cast<uint8_t>(random.next());
    }
    return bytes;
}

// Every path of crc32c() this CPU runs but the software one, the reference the others are
// checked against.
std::vector<Crc32cPath> faster_paths()
{
    std::vector<Crc32cPath> paths = crc32c_paths();
    paths.erase(paths.begin());
    return paths;
}

// Bit-at-a-time CRC-32C, independent of the tables under test.
uint32_t crc32c_bitwise(uint32_t crc, const uint8_t *p, size_t len)
{
    crc = ~crc;
    for (size_t i = 0; i < len; i++) {
        crc ^= p[i];
        for (int bit = 0; bit < 8; bit++) {
            crc = (crc >> 1) ^ ((crc & 1) ? 0x82F63B78u : 0);
        }
    }
    return ~crc;
}

struct KnownVector {
    const char *name;
    std::vector<uint8_t> data;
    uint32_t crc;
};

// RFC 3720 B.4 plus the customary check value.
std::vector<KnownVector> known_vectors()
{
    std::vector<KnownVector> vectors;
    vectors.push_back({"32 bytes of 0x00", std::vector<uint8_t>(32, 0x00), 0x8A9136AA});
    vectors.push_back({"32 bytes of 0xff", std::vector<uint8_t>(32, 0xff), 0x62A8AB43});
    std::vector<uint8_t> incrementing(32), decrementing(32);
    for (int i = 0; i < 32; i++) {
        incrementing[i] = static_cast<uint8_t>(i);
        decrementing[i] = static_cast<uint8_t>(31 - i);
    }
    vectors.push_back({"0x00..0x1f", incrementing, 0x46DD794E});
    vectors.push_back({"0x1f..0x00", decrementing, 0x113FDB5C});
    const char *check = "123456789";
    vectors.push_back({"\"123456789\"", std::vector<uint8_t>(check, check + 9), 0xE3069283});
    return vectors;
}

TEST(wire_crc32c, crc32c__check_value)
{
    EXPECT_EQ(0xE3069283u, crc32c(0, "123456789", 9));
}

TEST(wire_crc32c, crc32c__rfc3720_vectors)
{
    for (const auto &vector : known_vectors()) {
        EXPECT_EQ(vector.crc, crc32c(0, vector.data.data(), vector.data.size())) << vector.name;
    }
}

TEST(wire_crc32c, crc32c__empty_buffer_keeps_crc)
{
    EXPECT_EQ(0u, crc32c(0, nullptr, 0));
    EXPECT_EQ(0xE3069283u, crc32c(0xE3069283u, nullptr, 0));
}

TEST(wire_crc32c, crc32c__incremental_equals_one_shot)
{
    Random random(test_seed());
    const std::vector<uint8_t> buf = random_bytes(random, 1000);
    const uint32_t one_shot = crc32c(0, buf.data(), buf.size());
    EXPECT_EQ(crc32c_bitwise(0, buf.data(), buf.size()), one_shot);

    for (size_t split = 0; split <= buf.size(); split++) {
        const uint32_t head = crc32c(0, buf.data(), split);
        EXPECT_EQ(one_shot, crc32c(head, buf.data() + split, buf.size() - split))
            << "split at " << split;
    }

    for (int round = 0; round < 100; round++) {
        uint32_t crc = 0;
        size_t offset = 0;
        while (offset < buf.size()) {
            const size_t piece = std::min<size_t>(random.below(40), buf.size() - offset);
            crc = crc32c(crc, buf.data() + offset, piece);
            offset += piece;
        }
        EXPECT_EQ(one_shot, crc) << "round " << round;
    }
}

TEST(wire_crc32c, crc32c_iov__no_pieces_is_zero)
{
    EXPECT_EQ(0u, crc32c_iov(nullptr, 0));
    struct iovec empty[2] = {{nullptr, 0}, {nullptr, 0}};
    EXPECT_EQ(0u, crc32c_iov(empty, 2));
}

TEST(wire_crc32c, crc32c_iov__known_vectors_in_pieces)
{
    for (auto vector : known_vectors()) {
        struct iovec iov[3] = {{vector.data.data(), 1},
                               {nullptr, 0},
                               {vector.data.data() + 1, vector.data.size() - 1}};
        EXPECT_EQ(vector.crc, crc32c_iov(iov, 3)) << vector.name;
    }
}

TEST(wire_crc32c, crc32c_iov__split_at_every_position)
{
    Random random(test_seed());
    std::vector<uint8_t> buf = random_bytes(random, 300);
    const uint32_t one_shot = crc32c(0, buf.data(), buf.size());

    for (size_t split = 0; split <= buf.size(); split++) {
        struct iovec iov[2] = {{buf.data(), split}, {buf.data() + split, buf.size() - split}};
        EXPECT_EQ(one_shot, crc32c_iov(iov, 2)) << "split at " << split;
    }

    for (size_t first = 0; first <= buf.size(); first += 7) {
        for (size_t second = first; second <= buf.size(); second += 5) {
            struct iovec iov[3] = {{buf.data(), first},
                                   {buf.data() + first, second - first},
                                   {buf.data() + second, buf.size() - second}};
            EXPECT_EQ(one_shot, crc32c_iov(iov, 3)) << "splits at " << first << ", " << second;
        }
    }
}

TEST(wire_crc32c, crc32c_iov__many_random_pieces)
{
    Random random(test_seed());
    std::vector<uint8_t> buf = random_bytes(random, 4096);
    const uint32_t one_shot = crc32c(0, buf.data(), buf.size());

    for (int round = 0; round < 50; round++) {
        std::vector<struct iovec> iov;
        size_t offset = 0;
        while (offset < buf.size()) {
            const size_t piece = std::min<size_t>(random.below(100), buf.size() - offset);
            iov.push_back({buf.data() + offset, piece});
            offset += piece;
        }
        EXPECT_EQ(one_shot, crc32c_iov(iov.data(), iov.size())) << "round " << round;
    }
}

TEST(wire_crc32c, crc32c_hw_available__follows_cpu)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    EXPECT_EQ(static_cast<bool>(__builtin_cpu_supports("sse4.2")), crc32c_hw_available());
#else
    EXPECT_FALSE(crc32c_hw_available());
#endif
    std::printf("crc32c uses the %s path\n", crc32c_path_name());
}

// The software path always runs; crc32c() uses the fastest path there is (the last), so each
// faster path this CPU has is both listed and checked below.
TEST(wire_crc32c, crc32c_paths__software_first__crc32c_uses_the_last)
{
    const std::vector<Crc32cPath> paths = crc32c_paths();
    ASSERT_FALSE(paths.empty());
    EXPECT_STREQ("software", paths.front().name);
    EXPECT_STREQ(paths.back().name, crc32c_path_name());
    EXPECT_EQ(crc32c_hw_available(), paths.size() > 1);
#if defined(__x86_64__)
    __builtin_cpu_init();
    const bool vpclmul = __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("pclmul") &&
                         __builtin_cpu_supports("vpclmulqdq");
    bool listed256 = false, listed512 = false;
    for (const Crc32cPath &path : paths) {
        listed256 = listed256 || std::strstr(path.name, "256-bit") != nullptr;
        listed512 = listed512 || std::strstr(path.name, "512-bit") != nullptr;
    }
    EXPECT_EQ(vpclmul && __builtin_cpu_supports("avx2"), listed256);
    EXPECT_EQ(vpclmul && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl"),
              listed512);
#endif
    for (const Crc32cPath &path : paths) {
        std::printf("crc32c path: %s\n", path.name);
        EXPECT_EQ(0xE3069283u, path.fn(0, "123456789", 9)) << path.name;
    }
}

TEST(wire_crc32c, crc32c_sw__rfc3720_vectors)
{
    for (const auto &vector : known_vectors()) {
        EXPECT_EQ(vector.crc, crc32c_sw(0, vector.data.data(), vector.data.size()))
            << vector.name;
    }
}

TEST(wire_crc32c, crc32c_sw__equals_bitwise_reference)
{
    Random random(test_seed());
    const std::vector<uint8_t> buf = random_bytes(random, 600);
    for (size_t len = 0; len <= 512; len++) {
        const size_t start = random.below(buf.size() - len + 1);
        const uint32_t seed_crc = static_cast<uint32_t>(random.next());
        EXPECT_EQ(crc32c_bitwise(seed_crc, buf.data() + start, len),
                  crc32c_sw(seed_crc, buf.data() + start, len))
            << "len " << len << " start " << start;
    }
}

TEST(wire_crc32c, crc32c_sw__equals_crc32c_on_every_small_length_and_alignment)
{
    Random random(test_seed());
    const std::vector<uint8_t> buf = random_bytes(random, 128);
    for (size_t start = 0; start < 16; start++) {
        for (size_t len = 0; len <= 96; len++) {
            EXPECT_EQ(crc32c_sw(0, buf.data() + start, len), crc32c(0, buf.data() + start, len))
                << "len " << len << " start " << start;
        }
    }
}

TEST(wire_crc32c, crc32c_sw__equals_crc32c_on_random_lengths)
{
    Random random(test_seed());
    const std::vector<uint8_t> buf = random_bytes(random, 4096 + 16);
    for (int round = 0; round < 2000; round++) {
        const size_t len = random.below(4097);
        const size_t start = random.below(16);
        const uint32_t seed_crc = static_cast<uint32_t>(random.next());
        EXPECT_EQ(crc32c_sw(seed_crc, buf.data() + start, len),
                  crc32c(seed_crc, buf.data() + start, len))
            << "len " << len << " start " << start;
    }
}

// The hardware path cuts long buffers into three interleaved blocks (4 KiB and 256 B per
// stream) and joins them: check every length around those block boundaries and the largest
// datagrams against the portable path.
TEST(wire_crc32c, crc32c__equals_sw_around_interleave_boundaries)
{
    Random random(test_seed());
    const std::vector<uint8_t> buf = random_bytes(random, 3 * 65536 + 16);
    std::vector<size_t> lengths;
    for (size_t block : {size_t(256), size_t(4096)}) {
        for (size_t rounds = 1; rounds <= 3; rounds++) {
            for (size_t delta = 0; delta <= 16; delta++) {
                lengths.push_back(3 * block * rounds + delta);
                lengths.push_back(3 * block * rounds - delta);
            }
        }
    }
    for (size_t len : {size_t(65000 - 96), size_t(65000), size_t(3 * 65536)}) {
        lengths.push_back(len);
    }
    for (int round = 0; round < 200; round++) {
        lengths.push_back(random.below(3 * 65536 + 1));
    }
    // Folding joins 16-byte chunks, 32- or 64-byte blocks and 128- or 256-byte rounds, from
    // 256 bytes on: lengths around those.
    for (size_t base : {size_t(256), size_t(384), size_t(512), size_t(640), size_t(768),
                        size_t(1024), size_t(1280), size_t(4096)}) {
        for (size_t delta = 0; delta <= 80; delta++) {
            lengths.push_back(base + delta);
        }
    }
    const std::vector<Crc32cPath> paths = faster_paths();
    for (size_t len : lengths) {
        const size_t start = random.below(16);
        const uint32_t seed_crc = static_cast<uint32_t>(random.next());
        const uint32_t expected = crc32c_sw(seed_crc, buf.data() + start, len);
        EXPECT_EQ(expected, crc32c(seed_crc, buf.data() + start, len))
            << "len " << len << " start " << start;
        for (const Crc32cPath &path : paths) {
            EXPECT_EQ(expected, path.fn(seed_crc, buf.data() + start, len))
                << path.name << ", len " << len << " start " << start;
        }
    }
}

// Buffers from 96 bytes (a packet header) to 4 KiB run as three chains joined by carry-less
// multiplication, and from 256 bytes on the CPUs that have it fold with VPCLMULQDQ: every
// length through those ranges, at several alignments and register values, on every path,
// against the portable one.
TEST(wire_crc32c, crc32c__equals_sw_on_every_short_length)
{
    Random random(test_seed());
    const std::vector<uint8_t> buf = random_bytes(random, 4096 + 16);
    const std::vector<Crc32cPath> paths = faster_paths();
    for (size_t len = 0; len <= 4096; len++) {
        for (size_t start : {size_t(0), size_t(3), size_t(8)}) {
            const uint32_t seed_crc = static_cast<uint32_t>(random.next());
            const uint32_t expected = crc32c_sw(seed_crc, buf.data() + start, len);
            ASSERT_EQ(expected, crc32c(seed_crc, buf.data() + start, len))
                << "len " << len << " start " << start;
            for (const Crc32cPath &path : paths) {
                ASSERT_EQ(expected, path.fn(seed_crc, buf.data() + start, len))
                    << path.name << ", len " << len << " start " << start;
            }
        }
    }
}

// Data that ends where the mapping ends (an inaccessible page follows): the folding loop reads
// ahead only with prefetches, which never fault, so every length up to the guard page works.
TEST(wire_crc32c, crc32c__data_ending_at_an_unmapped_page)
{
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t data_len = 16 * page;
    void *map = mmap(nullptr, data_len + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
    ASSERT_NE(MAP_FAILED, map);
    uint8_t *data = static_cast<uint8_t *>(map);
    ASSERT_EQ(0, mprotect(data + data_len, page, PROT_NONE));
    Random random(test_seed());
    for (size_t i = 0; i < data_len; i++) {
        data[i] = static_cast<uint8_t>(random.next());
    }
    for (size_t len : {size_t(256), size_t(700), size_t(1024), size_t(1280), size_t(4096),
                       size_t(8191), data_len}) {
        const uint8_t *p = data + data_len - len;
        EXPECT_EQ(crc32c_sw(0, p, len), crc32c(0, p, len)) << "len " << len;
        for (const Crc32cPath &path : faster_paths()) {
            EXPECT_EQ(crc32c_sw(0, p, len), path.fn(0, p, len)) << path.name << ", len " << len;
        }
    }
    munmap(map, data_len + page);
}

// crc32c_copy on every path: the CRC crc32c_sw gives and the bytes copied, none written
// outside [dst, dst + len), for every length through the folding paths' rounds and tails,
// large ones, and sources and destinations at every alignment within a line.
TEST(wire_crc32c, crc32c_copy__crc_and_copy_on_every_path)
{
    Random random(test_seed());
    const size_t kMax = 3 * 65536;
    const std::vector<uint8_t> src = random_bytes(random, kMax + 64);
    std::vector<size_t> lengths;
    for (size_t len = 0; len <= 1100; len++) {
        lengths.push_back(len);
    }
    for (size_t base : {size_t(4096), size_t(16384), size_t(65000), size_t(65536)}) {
        for (size_t delta = 0; delta <= 300; delta += 7) {
            lengths.push_back(base + delta);
        }
    }
    for (int i = 0; i < 20; i++) {
        lengths.push_back(random.below(kMax + 1));
    }
    constexpr size_t kGuard = 64;
    constexpr uint8_t kFill = 0xa5;
    std::vector<uint8_t> dst(kMax + 64 + 2 * kGuard);
    std::vector<Crc32cPath> paths = crc32c_paths();
    paths.push_back({"crc32c_copy", crc32c, crc32c_copy});   // what the engine calls
    for (size_t len : lengths) {
        const size_t from = random.below(64);
        const size_t to = kGuard + random.below(64);
        const uint32_t seed_crc = static_cast<uint32_t>(random.next());
        const uint32_t expected = crc32c_sw(seed_crc, src.data() + from, len);
        for (const Crc32cPath &path : paths) {
            std::fill(dst.begin(), dst.end(), kFill);
            ASSERT_EQ(expected, path.copy(seed_crc, dst.data() + to, src.data() + from, len))
                << path.name << ", len " << len << " from " << from << " to " << to;
            ASSERT_EQ(0, std::memcmp(dst.data() + to, src.data() + from, len))
                << path.name << ", len " << len << ": the copy differs";
            const bool guards_kept =
                std::all_of(dst.begin(), dst.begin() + to, [](uint8_t b) { return b == kFill; }) &&
                std::all_of(dst.begin() + to + len, dst.end(), [](uint8_t b) { return b == kFill; });
            ASSERT_TRUE(guards_kept) << path.name << ", len " << len << ": wrote outside the copy";
        }
    }
}

} // namespace
} // namespace srcnic
