// SipHash-2-4: the state of four 64-bit words initialised from the key, one word of input mixed
// in per two rounds, the length in the last word, four rounds to finish.
#include "core/siphash.h"

#include <cstring>

namespace srcnic {

namespace {

inline uint64_t rotl(uint64_t x, int b)
{
    return (x << b) | (x >> (64 - b));
}

struct SipState {
    uint64_t v0, v1, v2, v3;

    explicit SipState(const SipKey &key)
        : v0(key.k0 ^ 0x736f6d6570736575ull), v1(key.k1 ^ 0x646f72616e646f6dull),
          v2(key.k0 ^ 0x6c7967656e657261ull), v3(key.k1 ^ 0x7465646279746573ull)
    {
    }

    void round()
    {
        v0 += v1;
        v1 = rotl(v1, 13);
        v1 ^= v0;
        v0 = rotl(v0, 32);
        v2 += v3;
        v3 = rotl(v3, 16);
        v3 ^= v2;
        v0 += v3;
        v3 = rotl(v3, 21);
        v3 ^= v0;
        v2 += v1;
        v1 = rotl(v1, 17);
        v1 ^= v2;
        v2 = rotl(v2, 32);
    }

    // Two compression rounds over one message word.
    void compress(uint64_t m)
    {
        v3 ^= m;
        round();
        round();
        v0 ^= m;
    }

    uint64_t finish()
    {
        v2 ^= 0xff;
        round();
        round();
        round();
        round();
        return v0 ^ v1 ^ v2 ^ v3;
    }
};

// The little-endian word at p (the engine runs on little-endian hosts only, header.h).
inline uint64_t load_le64(const uint8_t *p)
{
    uint64_t w;
    std::memcpy(&w, p, sizeof(w));
    return w;
}

} // namespace

uint64_t siphash24(const SipKey &key, const void *data, size_t len)
{
    SipState s(key);
    const uint8_t *p = static_cast<const uint8_t *>(data);
    const size_t words = len / 8;
    for (size_t i = 0; i < words; ++i) {
        s.compress(load_le64(p + 8 * i));
    }
    // The last word: the remaining 0-7 bytes, the length's low byte in the top byte.
    uint64_t last = static_cast<uint64_t>(len & 0xff) << 56;
    const uint8_t *tail = p + 8 * words;
    for (size_t i = 0; i < (len & 7); ++i) {
        last |= static_cast<uint64_t>(tail[i]) << (8 * i);
    }
    s.compress(last);
    return s.finish();
}

uint64_t siphash24_word(const SipKey &key, uint64_t word)
{
    SipState s(key);
    s.compress(word);
    s.compress(static_cast<uint64_t>(8) << 56);
    return s.finish();
}

} // namespace srcnic
