// CRC-32C: the SSE4.2 instruction path, the slice-by-8 software path and the choice between them.
#include "wire/crc32c.h"

#include <sys/uio.h>

#include <array>
#include <atomic>
#include <cstring>
#include <vector>

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
// The same while copying the len bytes at p to dst (crc32c_copy).
using Crc32cCopyRawFn = uint32_t (*)(uint32_t reg, uint8_t *dst, const uint8_t *p, size_t len);

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

// v x^n mod P, P = x^32 + 0x1EDC6F41 (normal bit order: bit d is the coefficient of x^d), for
// v already reduced.
constexpr uint32_t times_xpow_mod(uint32_t v, unsigned n)
{
    uint64_t r = v;
    for (unsigned i = 0; i < n; i++) {
        r <<= 1;
        if (r & (1ull << 32)) {
            r ^= 0x11EDC6F41ull;
        }
    }
    return static_cast<uint32_t>(r);
}

// x^n mod P.
constexpr uint32_t xpow_mod(unsigned n)
{
    return times_xpow_mod(1, n);
}

constexpr uint32_t reflect32(uint32_t v)
{
    uint32_t r = 0;
    for (int i = 0; i < 32; i++) {
        r |= ((v >> i) & 1u) << (31 - i);
    }
    return r;
}

// Buffers from kSmall3Min bytes (a packet header and more) below kSmall3Max: three chains of
// b = len / 24 * 8 bytes each, joined without tables. Appending n zero bytes
// multiplies the register by x^(8n) modulo P. pclmulqdq of two reflected 32-bit values is
// x times their product, and the crc32 instruction over a 64-bit word W gives W x^32 mod P, so
// crc32(0, clmul(reg, k)) = reg k x^33: with k = x^(8n - 33) mod P, reflected, it is the
// register after n zero bytes. One chain of 13 crc32 steps (104 bytes, a small packet) becomes
// three of 4 and a join of two multiplications side by side.
// The fixed blocks of crc32c_hw_raw leave up to 767 bytes to one chain; these do not (at 1128
// bytes, a 1 KiB message's datagram, 50 ns instead of 84 on AMD Zen 3). From 4 KiB on both
// take as long; the table of constants grows with kSmall3Max (1.4 KB here).
constexpr size_t kSmall3Min = 96;
constexpr size_t kSmall3Max = 4096;
constexpr size_t kSmall3MaxShift = 2 * ((kSmall3Max - 1) / 24 * 8);   // bytes, largest 2 b

struct ZeroShiftConstants {
    uint32_t k[kSmall3MaxShift / 8 + 1] = {};   // k[j]: the constant for 8 j zero bytes
    constexpr ZeroShiftConstants()
    {
        uint32_t power = xpow_mod(64 - 33);   // x^(64 j - 33) mod P, one j after the other
        for (size_t j = 1; j <= kSmall3MaxShift / 8; j++) {
            k[j] = reflect32(power);
            power = times_xpow_mod(power, 64);
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
    if (len < kSmall3Min || len >= kSmall3Max) {
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

// The constant of every distance the folding uses, computed once: by16[n] moves a chunk n
// 16-byte chunks forward (n = 1..kMaxFoldChunks; by16[0] is unused). The farthest move is the
// 512-bit path's: its first register, over the three after it and three more whole blocks of
// 64 bytes, 6 x 4 chunks.
constexpr unsigned kMaxFoldChunks = 24;

struct FoldConstants {
    FoldConstant by16[kMaxFoldChunks + 1] = {};
    FoldConstants()
    {
        for (unsigned n = 1; n <= kMaxFoldChunks; n++) {
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

// The end of every folding path. lane[0..nlanes) are the folded registers of consecutive 16-byte
// chunks, which the len bytes at p follow (fewer than 16 * nlanes). The lanes and the remaining
// whole chunks are each folded straight onto the last chunk, side by side (a chain of folds, one
// per chunk, cost about 6 cycles a step); the last 16 folded bytes and the tail then go through
// the crc32 instruction, which also does the final reduction.
__attribute__((target("sse4.2,pclmul"), always_inline)) inline uint32_t
fold_finish(const __m128i *lane, size_t nlanes, const uint8_t *p, size_t len,
            const FoldConstants &k)
{
    const size_t nc = len / 16;
    __m128i x = nc != 0 ? fold(lane[nlanes - 1], vec128(k.by16[nc])) : lane[nlanes - 1];
    for (size_t i = 0; i + 1 < nlanes; i++) {
        x = _mm_xor_si128(x, fold(lane[i], vec128(k.by16[nlanes - 1 - i + nc])));
    }
    for (size_t i = 0; i < nc; i++) {
        const __m128i chunk = load128(p + 16 * i);
        const size_t after = nc - 1 - i;   // chunks between this one and the last
        x = _mm_xor_si128(x, after != 0 ? fold(chunk, vec128(k.by16[after])) : chunk);
    }
    p += 16 * nc;
    len -= 16 * nc;
    uint64_t r = _mm_crc32_u64(0, static_cast<uint64_t>(_mm_cvtsi128_si64(x)));
    r = _mm_crc32_u64(r, static_cast<uint64_t>(_mm_extract_epi64(x, 1)));
    return crc32c_hw_raw(static_cast<uint32_t>(r), p, len);
}


// The shortest buffer folded with VPCLMULQDQ: the 512-bit loop's first round loads 256 bytes,
// and from there folding beats the interleaved crc32 chains (on AMD Zen 5, 512-1023 bytes took
// 16-25 ns folded, 24-63 ns in the chains of the time; below 256 the chains are as fast and need
// no joining). The 256-bit folding wins from there too (Zen 3: 256 bytes in 15 ns, 17 in the
// joined chains; 1128 in 47 and 50).
constexpr size_t kVclmulMin = 256;

// Bytes ahead of the folding loop that it prefetches. Farther (4 KiB) ran the CRC alone faster
// over a 64 MiB working set, but prefetching that far past the end of a 1 KiB packet cost its
// ping-pong about 90 ns a round trip, and the engine's streams showed no gain
// (perf/results/2026-11-22-engine/NOTES.md).
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
    return _mm512_set_epi64(static_cast<long long>(k.hi), static_cast<long long>(k.lo),
                            static_cast<long long>(k.hi), static_cast<long long>(k.lo),
                            static_cast<long long>(k.hi), static_cast<long long>(k.lo),
                            static_cast<long long>(k.hi), static_cast<long long>(k.lo));
}

// Loads the 64 bytes at p and, when copying, stores them at dst too.
template <bool kCopy>
__attribute__((target(SRCNIC_CRC_AVX512))) inline __m512i load512_copy(const uint8_t *p, uint8_t *dst)
{
    const __m512i v = load512(p);
    if (kCopy) {
        _mm512_storeu_si512(dst, v);
    }
    return v;
}

// len >= kVclmulMin (short_or_fold). With kCopy, the bytes are also copied to dst as they are
// loaded: one pass over them instead of two, the stores beside the carry-less multiplications.
template <bool kCopy>
__attribute__((target(SRCNIC_CRC_AVX512), noinline)) uint32_t
crc32c_vclmul_fold_t(uint32_t reg, uint8_t *dst, const uint8_t *p, size_t len)
{
    static const FoldConstants k;
    const __m512i k2048 = broadcast(k.by16[16]);

    __m512i z0 = _mm512_xor_si512(load512_copy<kCopy>(p, dst),
                                  _mm512_zextsi128_si512(_mm_cvtsi32_si128(static_cast<int>(reg))));
    __m512i z1 = load512_copy<kCopy>(p + 64, dst + 64);
    __m512i z2 = load512_copy<kCopy>(p + 128, dst + 128);
    __m512i z3 = load512_copy<kCopy>(p + 192, dst + 192);
    p += 256;
    len -= 256;
    dst += kCopy ? 256 : 0;
    for (; len >= 256; p += 256, len -= 256, dst += kCopy ? 256 : 0) {
        // Prefetch for what comes from memory, not the cache (a sender's large message): the
        // hardware prefetcher alone left this loop at 25 GB/s over 64 MiB here, 34 with it.
        // A prefetch past the end of the data is harmless (it never faults).
        const char *ahead = reinterpret_cast<const char *>(p) + kCrcPrefetchAhead;
        _mm_prefetch(ahead, _MM_HINT_T0);
        _mm_prefetch(ahead + 64, _MM_HINT_T0);
        _mm_prefetch(ahead + 128, _MM_HINT_T0);
        _mm_prefetch(ahead + 192, _MM_HINT_T0);
        z0 = _mm512_xor_si512(fold512(z0, k2048), load512_copy<kCopy>(p, dst));
        z1 = _mm512_xor_si512(fold512(z1, k2048), load512_copy<kCopy>(p + 64, dst + 64));
        z2 = _mm512_xor_si512(fold512(z2, k2048), load512_copy<kCopy>(p + 128, dst + 128));
        z3 = _mm512_xor_si512(fold512(z3, k2048), load512_copy<kCopy>(p + 192, dst + 192));
    }
    if (kCopy) {
        std::memcpy(dst, p, len);   // the last bytes, fewer than 256, still in the cache
    }
    // Fewer than 256 bytes remain: nb whole 64-byte blocks, then nc whole 16-byte chunks, then
    // under 16 bytes. The four registers and the remaining blocks (consecutive 64-byte blocks)
    // are each folded straight onto the last block, side by side: a chain of folds, one per
    // block, cost about 6 cycles a step. The last block's four lanes and the remaining chunks
    // (consecutive 16-byte chunks) are then joined the same way.
    const size_t nb = len / 64;
    __m512i z = _mm512_xor_si512(
        _mm512_xor_si512(fold512(z0, broadcast(k.by16[4 * (3 + nb)])),
                         fold512(z1, broadcast(k.by16[4 * (2 + nb)]))),
        _mm512_xor_si512(fold512(z2, broadcast(k.by16[4 * (1 + nb)])),
                         nb != 0 ? fold512(z3, broadcast(k.by16[4 * nb])) : z3));
    for (size_t i = 0; i < nb; i++) {
        const __m512i block = load512(p + 64 * i);
        const size_t after = nb - 1 - i;   // blocks between this one and the last
        z = _mm512_xor_si512(z, after != 0 ? fold512(block, broadcast(k.by16[4 * after]))
                                           : block);
    }
    p += 64 * nb;
    len -= 64 * nb;
    alignas(64) __m128i lanes[4];
    _mm512_store_si512(lanes, z);
    return fold_finish(lanes, 4, p, len, k);
}

uint32_t crc32c_vclmul_fold(uint32_t reg, const uint8_t *p, size_t len)
{
    // (dst is never written without kCopy; p keeps its arithmetic inside a real buffer)
    return crc32c_vclmul_fold_t<false>(reg, const_cast<uint8_t *>(p), p, len);
}

uint32_t crc32c_vclmul_fold_copy(uint32_t reg, uint8_t *dst, const uint8_t *p, size_t len)
{
    return crc32c_vclmul_fold_t<true>(reg, dst, p, len);
}

// The same with 256-bit registers (two chunks each), for CPUs with VPCLMULQDQ but not AVX-512
// (AMD Zen 3): four registers side by side, 128 bytes a round, D = 1024 bits.
#define SRCNIC_CRC_AVX2 "sse4.2,pclmul,avx2,vpclmulqdq"

__attribute__((target(SRCNIC_CRC_AVX2))) inline __m256i fold256(__m256i y, __m256i k)
{
    return _mm256_xor_si256(_mm256_clmulepi64_epi128(y, k, 0x00),
                            _mm256_clmulepi64_epi128(y, k, 0x11));
}

__attribute__((target(SRCNIC_CRC_AVX2))) inline __m256i load256(const uint8_t *p)
{
    return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p));
}

__attribute__((target(SRCNIC_CRC_AVX2))) inline __m256i broadcast256(const FoldConstant &k)
{
    return _mm256_broadcastsi128_si256(vec128(k));
}

constexpr size_t kYmmRound = 128;

template <bool kCopy>
__attribute__((target(SRCNIC_CRC_AVX2))) inline __m256i load256_copy(const uint8_t *p, uint8_t *dst)
{
    const __m256i v = load256(p);
    if (kCopy) {
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(dst), v);
    }
    return v;
}

// len >= kVclmulMin (short_or_fold); kCopy as in crc32c_vclmul_fold_t.
template <bool kCopy>
__attribute__((target(SRCNIC_CRC_AVX2), noinline)) uint32_t
crc32c_vclmul256_fold_t(uint32_t reg, uint8_t *dst, const uint8_t *p, size_t len)
{
    static const FoldConstants k;
    const __m256i kround = broadcast256(k.by16[8]);
    __m256i y0 = _mm256_xor_si256(load256_copy<kCopy>(p, dst),
                                  _mm256_zextsi128_si256(_mm_cvtsi32_si128(static_cast<int>(reg))));
    __m256i y1 = load256_copy<kCopy>(p + 32, dst + 32);
    __m256i y2 = load256_copy<kCopy>(p + 64, dst + 64);
    __m256i y3 = load256_copy<kCopy>(p + 96, dst + 96);
    p += kYmmRound;
    len -= kYmmRound;
    dst += kCopy ? kYmmRound : 0;
    for (; len >= kYmmRound; p += kYmmRound, len -= kYmmRound, dst += kCopy ? kYmmRound : 0) {
        const char *ahead = reinterpret_cast<const char *>(p) + kCrcPrefetchAhead;
        _mm_prefetch(ahead, _MM_HINT_T0);
        _mm_prefetch(ahead + 64, _MM_HINT_T0);
        y0 = _mm256_xor_si256(fold256(y0, kround), load256_copy<kCopy>(p, dst));
        y1 = _mm256_xor_si256(fold256(y1, kround), load256_copy<kCopy>(p + 32, dst + 32));
        y2 = _mm256_xor_si256(fold256(y2, kround), load256_copy<kCopy>(p + 64, dst + 64));
        y3 = _mm256_xor_si256(fold256(y3, kround), load256_copy<kCopy>(p + 96, dst + 96));
    }
    if (kCopy) {
        std::memcpy(dst, p, len);   // the last bytes, fewer than 128
    }
    // Fewer than 128 bytes remain: nb whole 32-byte blocks, then what fold_finish takes.
    const size_t nb = len / 32;
    __m256i z = _mm256_xor_si256(
        _mm256_xor_si256(fold256(y0, broadcast256(k.by16[2 * (3 + nb)])),
                         fold256(y1, broadcast256(k.by16[2 * (2 + nb)]))),
        _mm256_xor_si256(fold256(y2, broadcast256(k.by16[2 * (1 + nb)])),
                         nb != 0 ? fold256(y3, broadcast256(k.by16[2 * nb])) : y3));
    for (size_t i = 0; i < nb; i++) {
        const __m256i block = load256(p + 32 * i);
        const size_t after = nb - 1 - i;   // blocks between this one and the last
        z = _mm256_xor_si256(z, after != 0 ? fold256(block, broadcast256(k.by16[2 * after]))
                                           : block);
    }
    p += 32 * nb;
    len -= 32 * nb;
    const __m128i lanes[2] = {_mm256_castsi256_si128(z), _mm256_extracti128_si256(z, 1)};
    return fold_finish(lanes, 2, p, len, k);
}

uint32_t crc32c_vclmul256_fold(uint32_t reg, const uint8_t *p, size_t len)
{
    return crc32c_vclmul256_fold_t<false>(reg, const_cast<uint8_t *>(p), p, len);
}

uint32_t crc32c_vclmul256_fold_copy(uint32_t reg, uint8_t *dst, const uint8_t *p, size_t len)
{
    return crc32c_vclmul256_fold_t<true>(reg, dst, p, len);
}
#endif

#if defined(__x86_64__)
// A folding path for buffers of kVclmulMin bytes and more, the joined chains below: the folding
// functions set up a large frame (six saved registers, the stack aligned for vectors) that a
// packet header, the commonest CRC, should not pay for.
template <Crc32cRawFn Fold>
uint32_t short_or_fold(uint32_t reg, const uint8_t *p, size_t len)
{
    return len < kVclmulMin ? crc32c_hwc_raw(reg, p, len) : Fold(reg, p, len);
}

// The same for crc32c_copy: below kVclmulMin, the copy then the CRC of the copied bytes, still
// in the cache.
template <Crc32cCopyRawFn FoldCopy>
uint32_t short_or_fold_copy(uint32_t reg, uint8_t *dst, const uint8_t *p, size_t len)
{
    if (len < kVclmulMin) {
        std::memcpy(dst, p, len);
        return crc32c_hwc_raw(reg, p, len);
    }
    return FoldCopy(reg, dst, p, len);
}
#endif

// crc32c_copy on a path that does not fold: the CRC, then the copy.
template <Crc32cRawFn Raw>
uint32_t crc_then_copy(uint32_t reg, uint8_t *dst, const uint8_t *p, size_t len)
{
    reg = Raw(reg, p, len);
    std::memcpy(dst, p, len);
    return reg;
}

// What each path needs of the CPU.
bool runs_anywhere()
{
    return true;
}

#if defined(__x86_64__)
bool has_sse42()
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2");
}

bool has_sse42_pclmul()
{
    return has_sse42() && __builtin_cpu_supports("pclmul");
}

bool has_vpclmul256()
{
    return has_sse42_pclmul() && __builtin_cpu_supports("avx2") &&
           __builtin_cpu_supports("vpclmulqdq");
}

bool has_vpclmul512()
{
    return has_sse42_pclmul() && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("vpclmulqdq");
}
#endif

// The public form of a raw path: the inversions on either side.
template <Crc32cRawFn Raw>
uint32_t crc32c_with(uint32_t crc, const void *data, size_t len)
{
    return ~Raw(~crc, static_cast<const uint8_t *>(data), len);
}

template <Crc32cCopyRawFn Raw>
uint32_t crc32c_copy_with(uint32_t crc, void *dst, const void *src, size_t len)
{
    return ~Raw(~crc, static_cast<uint8_t *>(dst), static_cast<const uint8_t *>(src), len);
}

// Every path, slowest first: crc32c() takes the last one the CPU runs.
struct PathEntry {
    const char *name;
    Crc32cRawFn raw;
    Crc32cFn fn;                // crc32c_with<raw>
    Crc32cCopyRawFn copy_raw;   // the same CRC while copying
    Crc32cCopyFn copy;          // crc32c_copy_with<copy_raw>
    bool (*cpu_runs)();
};

#define SRCNIC_CRC_PATH(name, raw, copy_raw, cpu_runs) \
    {name, raw, crc32c_with<raw>, copy_raw, crc32c_copy_with<copy_raw>, cpu_runs}
const PathEntry kPaths[] = {
    SRCNIC_CRC_PATH("software", crc32c_sw_raw, crc_then_copy<crc32c_sw_raw>, runs_anywhere),
#if defined(__x86_64__)
    SRCNIC_CRC_PATH("crc32 chains", crc32c_hw_raw, crc_then_copy<crc32c_hw_raw>, has_sse42),
    SRCNIC_CRC_PATH("crc32 chains + pclmulqdq joins", crc32c_hwc_raw,
                    crc_then_copy<crc32c_hwc_raw>, has_sse42_pclmul),
    SRCNIC_CRC_PATH("vpclmulqdq 256-bit folding", short_or_fold<crc32c_vclmul256_fold>,
                    short_or_fold_copy<crc32c_vclmul256_fold_copy>, has_vpclmul256),
    SRCNIC_CRC_PATH("vpclmulqdq 512-bit folding", short_or_fold<crc32c_vclmul_fold>,
                    short_or_fold_copy<crc32c_vclmul_fold_copy>, has_vpclmul512),
#endif
};
#undef SRCNIC_CRC_PATH

const PathEntry &crc32c_select()
{
    const PathEntry *best = &kPaths[0];
    for (const PathEntry &path : kPaths) {
        if (path.cpu_runs()) {
            best = &path;
        }
    }
    return *best;
}

// The selected path's function `member`, cached in `cache`: null until the first call selects;
// constant-initialized, so usable from any constructor.
template <typename Fn>
inline Fn selected(std::atomic<Fn> &cache, Fn PathEntry::*member)
{
    Fn fn = cache.load(std::memory_order_relaxed);
    if (__builtin_expect(fn == nullptr, 0)) {
        fn = crc32c_select().*member;
        cache.store(fn, std::memory_order_relaxed);
    }
    return fn;
}

std::atomic<Crc32cRawFn> g_crc32c_raw{nullptr};
std::atomic<Crc32cCopyRawFn> g_crc32c_copy_raw{nullptr};

inline Crc32cRawFn crc32c_raw_fn()
{
    return selected(g_crc32c_raw, &PathEntry::raw);
}

inline Crc32cCopyRawFn crc32c_copy_raw_fn()
{
    return selected(g_crc32c_copy_raw, &PathEntry::copy_raw);
}

} // namespace

uint32_t crc32c(uint32_t crc, const void *data, size_t len)
{
    return ~crc32c_raw_fn()(~crc, static_cast<const uint8_t *>(data), len);
}

uint32_t crc32c_copy(uint32_t crc, void *dst, const void *src, size_t len)
{
    return ~crc32c_copy_raw_fn()(~crc, static_cast<uint8_t *>(dst), static_cast<const uint8_t *>(src), len);
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

std::vector<Crc32cPath> crc32c_paths()
{
    std::vector<Crc32cPath> paths;
    for (const PathEntry &path : kPaths) {
        if (path.cpu_runs()) {
            paths.push_back({path.name, path.fn, path.copy});
        }
    }
    return paths;
}

const char *crc32c_path_name()
{
    return crc32c_select().name;
}

uint32_t crc32c_sw(uint32_t crc, const void *data, size_t len)
{
    return ~crc32c_sw_raw(~crc, static_cast<const uint8_t *>(data), len);
}

} // namespace srcnic
