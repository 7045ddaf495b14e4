// The refused-connection set: two Bloom filters in turn (refused_set.h).
#include "conn/refused_set.h"

#include <algorithm>
#include <cassert>

namespace srcnic {

RefusedSet::RefusedSet(size_t bits, uint64_t linger_ns, const SipKey &key)
    : words_(std::max<size_t>(bits, 64) / 64), mask_(words_ * 64 - 1), linger_ns_(linger_ns), key_(key)
{
    assert((bits & (bits - 1)) == 0);
}

void RefusedSet::rotate(uint64_t now)
{
    if (!started_) {
        started_ = true;
        cur_since_ = now;
        return;
    }
    if (now - cur_since_ < linger_ns_) {
        return;
    }
    // The current filter is a linger old: it becomes the previous one (what it holds was
    // added at most a linger ago, kept another linger). If it is two lingers old, nothing
    // either holds can still be wanted.
    if (now - cur_since_ < 2 * linger_ns_) {
        prev_.swap(cur_);
    } else {
        std::fill(prev_.begin(), prev_.end(), 0);
    }
    std::fill(cur_.begin(), cur_.end(), 0);
    cur_since_ = now;
}

void RefusedSet::add(const void *data, size_t len, uint64_t now)
{
    if (words_ == 0) {
        return;
    }
    if (cur_.empty()) {
        cur_.assign(words_, 0);
        prev_.assign(words_, 0);
    }
    rotate(now);
    const uint64_t h = siphash24(key_, data, len);
    // Double hashing: bit i = h1 + i h2 (h2 odd, so that the bits differ on any power of two).
    const uint64_t h1 = h & 0xffffffffu, h2 = (h >> 32) | 1;
    for (unsigned i = 0; i < kHashes; ++i) {
        const size_t bit = static_cast<size_t>((h1 + i * h2) & mask_);
        cur_[bit / 64] |= 1ull << (bit % 64);
    }
}

bool RefusedSet::maybe_contains(const void *data, size_t len, uint64_t now)
{
    if (cur_.empty()) {
        return false;
    }
    rotate(now);
    const uint64_t h = siphash24(key_, data, len);
    const uint64_t h1 = h & 0xffffffffu, h2 = (h >> 32) | 1;
    bool in_cur = true, in_prev = true;
    for (unsigned i = 0; i < kHashes; ++i) {
        const size_t bit = static_cast<size_t>((h1 + i * h2) & mask_);
        in_cur = in_cur && (cur_[bit / 64] >> (bit % 64) & 1) != 0;
        in_prev = in_prev && (prev_[bit / 64] >> (bit % 64) & 1) != 0;
    }
    return in_cur || in_prev;
}

} // namespace srcnic
