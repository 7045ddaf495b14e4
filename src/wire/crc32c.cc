// CRC-32C: the SSE4.2 instruction path, the slice-by-8 software path and the choice between them.
#include "wire/crc32c.h"

#include <sys/uio.h>

#include <array>
#include <atomic>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#include <nmmintrin.h>
#include <wmmintrin.h>
#endif

namespace srcnic {
namespace {

// The Castagnoli polynomial 0x1EDC6F41, bit-reflected (least significant bit first).
constexpr uint32_t kCrc32cPolyReflected = 0x82F63B78;

// table[0][b] is the CRC register after shifting byte b through it; table[s][b] is the same
// followed by s zero bytes, so eight bytes are folded with eight independent lookups.
using Crc32cTable = std::array<std::array<uint32_t, 256>, 8>;

constexpr Crc32cTable make_crc32c_table()
{
    Crc32cTable table{};
    for (uint32_t byte = 0; byte < 256; byte++) {
        uint32_t reg = byte;
        for (int bit = 0; bit < 8; bit++) {
            reg = (reg >> 1) ^ ((reg & 1) ? kCrc32cPolyReflected : 0);
        }
        table[0][byte] = reg;
    }
    for (size_t slice = 1; slice < table.size(); slice++) {
        for (size_t byte = 0; byte < 256; byte++) {
            const uint32_t prev = table[slice - 1][byte];
            table[slice][byte] = (prev >> 8) ^ table[0][prev & 0xff];
        }
    }
    return table;
}

constexpr Crc32cTable kCrc32cTable = make_crc32c_table();

static_assert(kCrc32cTable[0][128] == kCrc32cPolyReflected && kCrc32cTable[0][1] == 0xF26B8303,
              "CRC-32C table generation");

// The raw functions work on the CRC register itself: no initial or final inversion.
using Crc32cRawFn = uint32_t (*)(uint32_t reg, const uint8_t *p, size_t len);

inline uint32_t load_le32(const uint8_t *p)
{
    return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
           (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

uint32_t crc32c_sw_raw(uint32_t reg, const uint8_t *p, size_t len)
{
    const auto &t = kCrc32cTable;
    while (len >= 8) {
        const uint32_t lo = reg ^ load_le32(p);
        const uint32_t hi = load_le32(p + 4);
        reg = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^
              t[4][lo >> 24] ^ t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^
              t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
        p += 8;
        len -= 8;
    }
    for (; len > 0; len--, p++) {
        reg = (reg >> 8) ^ t[0][(reg ^ *p) & 0xff];
    }
    return reg;
}

// Appending n zero bytes to a message is a linear map on the CRC register. ZeroShift holds that
// map for one n as four 256-entry tables (one per register byte), so that the register of
// A||B can be formed from the registers of A and of B computed independently:
//     raw(reg, A||B) = shift_|B|(raw(reg, A)) ^ raw(0, B).
class ZeroShift {
public:
    explicit ZeroShift(size_t nbytes)
    {
        // The image of each basis vector 1 << bit, by running the register over n zeros.
        uint32_t basis[32];
        for (int bit = 0; bit < 32; bit++) {
            uint32_t reg = 1u << bit;
            for (size_t i = 0; i < nbytes; i++) {
                reg = (reg >> 8) ^ kCrc32cTable[0][reg & 0xff];
            }
            basis[bit] = reg;
        }
        for (int k = 0; k < 4; k++) {
            for (uint32_t b = 0; b < 256; b++) {
                uint32_t image = 0;
                for (int j = 0; j < 8; j++) {
                    if ((b >> j) & 1) {
                        image ^= basis[8 * k + j];
                    }
                }
                table_[k][b] = image;
            }
        }
    }

    uint32_t operator()(uint32_t reg) const
    {
        return table_[0][reg & 0xff] ^ table_[1][(reg >> 8) & 0xff] ^
               table_[2][(reg >> 16) & 0xff] ^ table_[3][reg >> 24];
    }

private:
    uint32_t table_[4][256];
};

#if defined(__x86_64__)
// The crc32 instruction has a latency of three cycles and a throughput of one per cycle, so
// one dependent chain runs at a third of the instruction's speed. Long buffers are cut into
// three equal blocks whose chains run interleaved, then joined with ZeroShift. Two block
// sizes: kLongBlock for the bulk of large packets, kShortBlock for what remains.
constexpr size_t kLongBlock = 4096;   // bytes per stream, per round of 3 * kLongBlock
constexpr size_t kShortBlock = 256;   // bytes per stream, per round of 3 * kShortBlock

// The registers of three consecutive blocks of `block` bytes (a multiple of 8) at p, their
// chains interleaved: reg[0] continues from its value, reg[1] and reg[2] start at 0.
__attribute__((target("sse4.2"))) inline void crc32c_hw_3chains(uint64_t reg[3], const uint8_t *p,
                                                               size_t block)
{
    uint64_t reg0 = reg[0];
    uint64_t reg1 = 0;
    uint64_t reg2 = 0;
    for (size_t i = 0; i < block; i += 8) {
        uint64_t w0, w1, w2;
        std::memcpy(&w0, p + i, sizeof(w0));
        std::memcpy(&w1, p + block + i, sizeof(w1));
        std::memcpy(&w2, p + 2 * block + i, sizeof(w2));
        reg0 = _mm_crc32_u64(reg0, w0);
        reg1 = _mm_crc32_u64(reg1, w1);
        reg2 = _mm_crc32_u64(reg2, w2);
    }
    reg[0] = reg0;
    reg[1] = reg1;
    reg[2] = reg2;
}

template <size_t kBlock>
__attribute__((target("sse4.2"))) inline uint64_t crc32c_hw_3way(uint64_t reg0, const uint8_t *p,
                                                                const ZeroShift &shift)
{
    uint64_t reg[3] = {reg0, 0, 0};
    crc32c_hw_3chains(reg, p, kBlock);
    const uint32_t joined = shift(static_cast<uint32_t>(reg[0])) ^ static_cast<uint32_t>(reg[1]);
    return shift(joined) ^ static_cast<uint32_t>(reg[2]);
}

// Below three short blocks: one chain of crc32 instructions, four words a round. A packet
// header and a small payload take this path alone: no alignment loop (unaligned words cost
// nothing extra here), no block shifts to look up.
__attribute__((target("sse4.2"))) inline uint32_t crc32c_hw_small(uint32_t reg, const uint8_t *p,
                                                                 size_t len)
{
    uint64_t reg64 = reg;
    for (; len >= 32; len -= 32, p += 32) {
        uint64_t w[4];
        std::memcpy(w, p, sizeof(w));
        reg64 = _mm_crc32_u64(reg64, w[0]);
        reg64 = _mm_crc32_u64(reg64, w[1]);
        reg64 = _mm_crc32_u64(reg64, w[2]);
        reg64 = _mm_crc32_u64(reg64, w[3]);
    }
    for (; len >= 8; len -= 8, p += 8) {
        uint64_t word;
        std::memcpy(&word, p, sizeof(word));
        reg64 = _mm_crc32_u64(reg64, word);
    }
    reg = static_cast<uint32_t>(reg64);
    if (len >= 4) {
        uint32_t word;
        std::memcpy(&word, p, sizeof(word));
        reg = _mm_crc32_u32(reg, word);
        p += 4;
        len -= 4;
    }
    for (; len > 0; len--, p++) {
        reg = _mm_crc32_u8(reg, *p);
    }
    return reg;
}

__attribute__((target("sse4.2"))) uint32_t crc32c_hw_raw(uint32_t reg, const uint8_t *p,
                                                         size_t len)
{
    if (len < 3 * kShortBlock) {
        return crc32c_hw_small(reg, p, len);
    }
    static const ZeroShift shift_long(kLongBlock);
    static const ZeroShift shift_short(kShortBlock);

    for (; (reinterpret_cast<uintptr_t>(p) & 7) != 0; len--, p++) {
        reg = _mm_crc32_u8(reg, *p);
    }
    uint64_t reg64 = reg;
    for (; len >= 3 * kLongBlock; len -= 3 * kLongBlock, p += 3 * kLongBlock) {
        reg64 = crc32c_hw_3way<kLongBlock>(reg64, p, shift_long);
    }
    for (; len >= 3 * kShortBlock; len -= 3 * kShortBlock, p += 3 * kShortBlock) {
        reg64 = crc32c_hw_3way<kShortBlock>(reg64, p, shift_short);
    }
    return crc32c_hw_small(static_cast<uint32_t>(reg64), p, len);
}

// x^n mod P, P = x^32 + 0x1EDC6F41 (normal bit order: bit d is the coefficient of x^d).
constexpr uint32_t xpow_mod(unsigned n)
{
    uint64_t r = 1;
    for (unsigned i = 0; i < n; i++) {
        r <<= 1;
        if (r & (1ull << 32)) {
            r ^= 0x11EDC6F41ull;
        }
    }
    return static_cast<uint32_t>(r);
}

constexpr uint32_t reflect32(uint32_t v)
{
    uint32_t r = 0;
    for (int i = 0; i < 32; i++) {
        r |= ((v >> i) & 1u) << (31 - i);
    }
    return r;
}

// Short buffers from kSmall3Min bytes (a packet header and more) up to the three-block path:
// three chains of b = len / 24 * 8 bytes each, joined without tables. Appending n zero bytes
// multiplies the register by x^(8n) modulo P. pclmulqdq of two reflected 32-bit values is
// x times their product, and the crc32 instruction over a 64-bit word W gives W x^32 mod P, so
// crc32(0, clmul(reg, k)) = reg k x^33: with k = x^(8n - 33) mod P, reflected, it is the
// register after n zero bytes. One chain of 13 crc32 steps (104 bytes, a small packet) becomes
// three of 4 and a join of two multiplications side by side.
constexpr size_t kSmall3Min = 96;
constexpr size_t kSmall3MaxShift = 2 * (3 * kShortBlock / 24 * 8);   // bytes, largest 2 b

struct ZeroShiftConstants {
    uint32_t k[kSmall3MaxShift / 8 + 1] = {};   // k[j]: the constant for 8 j zero bytes
    constexpr ZeroShiftConstants()
    {
        for (size_t j = 1; j <= kSmall3MaxShift / 8; j++) {
            k[j] = reflect32(xpow_mod(static_cast<unsigned>(64 * j - 33)));
        }
    }
};
constexpr ZeroShiftConstants kZeroShift;

__attribute__((target("sse4.2,pclmul"))) inline uint32_t shift_zeros(uint32_t reg, uint32_t k)
{
    const __m128i product = _mm_clmulepi64_si128(_mm_cvtsi32_si128(static_cast<int>(reg)),
                                                 _mm_cvtsi32_si128(static_cast<int>(k)), 0x00);
    return static_cast<uint32_t>(
        _mm_crc32_u64(0, static_cast<uint64_t>(_mm_cvtsi128_si64(product))));
}

__attribute__((target("sse4.2,pclmul"))) uint32_t crc32c_hwc_raw(uint32_t reg, const uint8_t *p,
                                                                 size_t len)
{
    if (len < kSmall3Min || len >= 3 * kShortBlock) {
        return crc32c_hw_raw(reg, p, len);
    }
    const size_t b = len / 24 * 8;
    uint64_t r[3] = {reg, 0, 0};
    crc32c_hw_3chains(r, p, b);
    const uint32_t joined = shift_zeros(static_cast<uint32_t>(r[0]), kZeroShift.k[2 * b / 8]) ^
                            shift_zeros(static_cast<uint32_t>(r[1]), kZeroShift.k[b / 8]) ^
                            static_cast<uint32_t>(r[2]);
    return crc32c_hw_small(joined, p + 3 * b, len - 3 * b);
}
#endif

#if defined(__x86_64__)
// Folding with carry-less multiplication. A 16-byte chunk A of the message stands for the
// polynomial a(x) whose highest coefficients are the first bits of the stream (the reflected
// convention of CRC-32C): the low quadword of a little-endian load holds the upper half,
// a = lo(x) x^64 + hi(x). Moving A forward by D bits multiplies it by x^D; modulo P only
// a 32-bit remainder per half is needed:
//     a x^D == lo(x) (x^(D+64) mod P) + hi(x) (x^D mod P)        (mod P)
// and pclmulqdq on reflected operands returns x times the product, so each constant is
// x^(D+63) or x^(D-1) modulo P, reflected, in the upper half of a quadword. The folded value
// then replaces A, XORed into the chunk D bits later: the CRC of the message is unchanged.
// With VPCLMULQDQ sixteen chunks are folded side by side (below), then joined; the last 16
// folded bytes and the tail go through the crc32 instruction, which also does the final
// reduction. (Folding 128 bits at a time with plain PCLMULQDQ measured 11.5 GB/s here, below
// the three crc32 chains, so it is not used on its own.)
struct FoldConstant {
    uint64_t lo;   // multiplies the low quadword (upper half of the chunk's polynomial)
    uint64_t hi;   // multiplies the high quadword
};

FoldConstant fold_constant(unsigned distance_bits)
{
    return {static_cast<uint64_t>(reflect32(xpow_mod(distance_bits + 63))) << 32,
            static_cast<uint64_t>(reflect32(xpow_mod(distance_bits - 1))) << 32};
}

// The constant of every distance the folding uses, computed once.
struct FoldConstants {
    FoldConstant d2048 = fold_constant(2048);   // the main loop: 256 bytes
    FoldConstant by64[7];   // by64[n]: n 64-byte blocks (n = 1..6)
    FoldConstant by16[7];   // by16[n]: n 16-byte chunks (n = 1..6)
    FoldConstants()
    {
        for (unsigned n = 1; n < 7; n++) {
            by64[n] = fold_constant(512 * n);
            by16[n] = fold_constant(128 * n);
        }
    }
};

__attribute__((target("sse4.2,pclmul"))) inline __m128i vec128(const FoldConstant &k)
{
    return _mm_set_epi64x(static_cast<long long>(k.hi), static_cast<long long>(k.lo));
}

__attribute__((target("sse4.2,pclmul"))) inline __m128i fold(__m128i x, __m128i k)
{
    return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

__attribute__((target("sse4.2,pclmul"))) inline __m128i load128(const uint8_t *p)
{
    return _mm_loadu_si128(reinterpret_cast<const __m128i *>(p));
}

// GCC 12's AVX-512 headers build some intrinsics from an uninitialized vector, which
// -Wmaybe-uninitialized reports inside them: not our code, and harmless.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// The shortest buffer folded with VPCLMULQDQ: the loop's first round loads 256 bytes, and from
// there folding beats the interleaved crc32 chains (here 512-1023 bytes take 16-25 ns folded,
// 24-63 ns in chains; below 256 the chains are as fast and need no joining).
constexpr size_t kVclmulMin = 256;

// Bytes ahead of the folding loop that it prefetches. Farther (4 KiB) ran the CRC alone faster
// over a 64 MiB working set, but prefetching that far past the end of a 1 KiB packet cost its
// ping-pong about 90 ns a round trip, and the engine's streams showed no gain (perf/README.md).
constexpr size_t kCrcPrefetchAhead = 1024;

// Sixteen chunks at a time: four 512-bit registers of four chunks each
// (VPCLMULQDQ multiplies the four 128-bit lanes of a register at once), D = 2048 bits.
#define SRCNIC_CRC_AVX512 "sse4.2,pclmul,avx512f,avx512vl,vpclmulqdq"

__attribute__((target(SRCNIC_CRC_AVX512))) inline __m512i fold512(__m512i x, __m512i k)
{
    return _mm512_xor_si512(_mm512_clmulepi64_epi128(x, k, 0x00),
                            _mm512_clmulepi64_epi128(x, k, 0x11));
}

__attribute__((target(SRCNIC_CRC_AVX512))) inline __m512i load512(const uint8_t *p)
{
    return _mm512_loadu_si512(p);
}

__attribute__((target(SRCNIC_CRC_AVX512))) inline __m512i broadcast(const FoldConstant &k)
{
    return _mm512_broadcast_i32x4(vec128(k));
}

__attribute__((target(SRCNIC_CRC_AVX512))) uint32_t crc32c_vclmul_raw(uint32_t reg,
                                                                     const uint8_t *p,
                                                                     size_t len)
{
    if (len < kVclmulMin) {
        return crc32c_hwc_raw(reg, p, len);
    }
    static const FoldConstants k;
    const __m512i k2048 = broadcast(k.d2048);

    __m512i z0 = _mm512_xor_si512(load512(p), _mm512_zextsi128_si512(
                                                  _mm_cvtsi32_si128(static_cast<int>(reg))));
    __m512i z1 = load512(p + 64);
    __m512i z2 = load512(p + 128);
    __m512i z3 = load512(p + 192);
    p += 256;
    len -= 256;
    for (; len >= 256; p += 256, len -= 256) {
        // Prefetch for what comes from memory, not the cache (a sender's large message): the
        // hardware prefetcher alone left this loop at 25 GB/s over 64 MiB here, 34 with it.
        // A prefetch past the end of the data is harmless (it never faults).
        const char *ahead = reinterpret_cast<const char *>(p) + kCrcPrefetchAhead;
        _mm_prefetch(ahead, _MM_HINT_T0);
        _mm_prefetch(ahead + 64, _MM_HINT_T0);
        _mm_prefetch(ahead + 128, _MM_HINT_T0);
        _mm_prefetch(ahead + 192, _MM_HINT_T0);
        z0 = _mm512_xor_si512(fold512(z0, k2048), load512(p));
        z1 = _mm512_xor_si512(fold512(z1, k2048), load512(p + 64));
        z2 = _mm512_xor_si512(fold512(z2, k2048), load512(p + 128));
        z3 = _mm512_xor_si512(fold512(z3, k2048), load512(p + 192));
    }
    // Fewer than 256 bytes remain: nb whole 64-byte blocks, then nc whole 16-byte chunks, then
    // under 16 bytes. The four registers and the remaining blocks (consecutive 64-byte blocks)
    // are each folded straight onto the last block, side by side: a chain of folds, one per
    // block, cost about 6 cycles a step. The last block's four lanes and the remaining chunks
    // (consecutive 16-byte chunks) are then joined the same way.
    const size_t nb = len / 64;
    __m512i z = _mm512_xor_si512(
        _mm512_xor_si512(fold512(z0, broadcast(k.by64[3 + nb])),
                         fold512(z1, broadcast(k.by64[2 + nb]))),
        _mm512_xor_si512(fold512(z2, broadcast(k.by64[1 + nb])),
                         nb != 0 ? fold512(z3, broadcast(k.by64[nb])) : z3));
    for (size_t i = 0; i < nb; i++) {
        const __m512i block = load512(p + 64 * i);
        const size_t after = nb - 1 - i;   // blocks between this one and the last
        z = _mm512_xor_si512(z, after != 0 ? fold512(block, broadcast(k.by64[after])) : block);
    }
    p += 64 * nb;
    len -= 64 * nb;
    const size_t nc = len / 16;
    __m128i x = _mm_xor_si128(
        _mm_xor_si128(fold(_mm512_extracti32x4_epi32(z, 0), vec128(k.by16[3 + nc])),
                      fold(_mm512_extracti32x4_epi32(z, 1), vec128(k.by16[2 + nc]))),
        _mm_xor_si128(fold(_mm512_extracti32x4_epi32(z, 2), vec128(k.by16[1 + nc])),
                      nc != 0 ? fold(_mm512_extracti32x4_epi32(z, 3), vec128(k.by16[nc]))
                              : _mm512_extracti32x4_epi32(z, 3)));
    for (size_t i = 0; i < nc; i++) {
        const __m128i chunk = load128(p + 16 * i);
        const size_t after = nc - 1 - i;
        x = _mm_xor_si128(x, after != 0 ? fold(chunk, vec128(k.by16[after])) : chunk);
    }
    p += 16 * nc;
    len -= 16 * nc;
    uint64_t r = _mm_crc32_u64(0, static_cast<uint64_t>(_mm_cvtsi128_si64(x)));
    r = _mm_crc32_u64(r, static_cast<uint64_t>(_mm_extract_epi64(x, 1)));
    return crc32c_hw_raw(static_cast<uint32_t>(r), p, len);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

Crc32cRawFn crc32c_select()
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("pclmul") &&
        __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("vpclmulqdq")) {
        return crc32c_vclmul_raw;
    }
    if (__builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("pclmul")) {
        return crc32c_hwc_raw;
    }
    if (__builtin_cpu_supports("sse4.2")) {
        return crc32c_hw_raw;
    }
#endif
    return crc32c_sw_raw;
}

// Null until the first call selects; constant-initialized, so usable from any constructor.
std::atomic<Crc32cRawFn> g_crc32c_raw{nullptr};

inline Crc32cRawFn crc32c_raw_fn()
{
    Crc32cRawFn fn = g_crc32c_raw.load(std::memory_order_relaxed);
    if (__builtin_expect(fn == nullptr, 0)) {
        fn = crc32c_select();
        g_crc32c_raw.store(fn, std::memory_order_relaxed);
    }
    return fn;
}

} // namespace

uint32_t crc32c(uint32_t crc, const void *data, size_t len)
{
    return ~crc32c_raw_fn()(~crc, static_cast<const uint8_t *>(data), len);
}

uint32_t crc32c_iov(const struct iovec *iov, size_t iovcnt)
{
    const Crc32cRawFn fn = crc32c_raw_fn();
    uint32_t reg = ~0u;
    for (size_t i = 0; i < iovcnt; i++) {
        reg = fn(reg, static_cast<const uint8_t *>(iov[i].iov_base), iov[i].iov_len);
    }
    return ~reg;
}

bool crc32c_hw_available()
{
    return crc32c_raw_fn() != crc32c_sw_raw;
}

uint32_t crc32c_hw(uint32_t crc, const void *data, size_t len)
{
#if defined(__x86_64__)
    if (crc32c_hw_available()) {
        return ~crc32c_hw_raw(~crc, static_cast<const uint8_t *>(data), len);
    }
#endif
    return crc32c_sw(crc, data, len);
}

uint32_t crc32c_sw(uint32_t crc, const void *data, size_t len)
{
    return ~crc32c_sw_raw(~crc, static_cast<const uint8_t *>(data), len);
}

} // namespace srcnic
