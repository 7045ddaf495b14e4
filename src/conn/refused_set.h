// The connections a NIC refused with USE_DC (PROTOCOL.md §8.1), remembered so that a late
// duplicate of a refused SYN does not open the connection once the budget has room: its
// requests went over DC meanwhile, and a connection would run them a second time.
//
// Membership is all that is asked, and the answer may err on one side only: a refused
// connection must always be recognised for as long as a duplicate of its packets can arrive
// (the linger: no sender resends after peer_timeout + rto_max), while a connection wrongly taken
// for a refused one is merely told USE_DC too, and served over DC (promoted later by traffic).
// So the set is two Bloom filters of a fixed size, taken in turn: additions go into the current
// one, a lookup asks both, and once the current one is a linger old it becomes the previous one
// and the previous one is cleared. An entry is held at least one linger and at most two; the
// memory is the same whatever the number of peers (a table of exact entries grew by 40 bytes a
// refusal), and none until the first refusal. Beyond the number of entries the filters are sized for, false positives grow, never
// false negatives. Keyed with a secret of the NIC's, so that nobody can choose connections that
// collide.
#ifndef SRCNIC_CONN_REFUSED_SET_H
#define SRCNIC_CONN_REFUSED_SET_H

#include "core/siphash.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace srcnic {

class RefusedSet {
public:
    // Filters of `bits` bits each (a power of two, at least 64), holding entries at least
    // linger_ns; key: the hash key.
    RefusedSet(size_t bits, uint64_t linger_ns, const SipKey &key);
    RefusedSet() = default;

    // Remembers the entry whose bytes are data[0..len) as of now (ns, monotonic).
    void add(const void *data, size_t len, uint64_t now);
    // Whether the entry may have been added within the last linger: true for every entry
    // added within it; false for all but a small fraction of the others.
    bool maybe_contains(const void *data, size_t len, uint64_t now);
    // The filters' memory (none until the first refusal).
    size_t bytes() const { return (cur_.size() + prev_.size()) * sizeof(uint64_t); }

    static constexpr unsigned kHashes = 5;   // optimal for about 8 bits per entry: 2 % false

private:
    void rotate(uint64_t now);

    std::vector<uint64_t> cur_, prev_;   // bit arrays, allocated by the first add
    size_t words_ = 0;                   // their size
    size_t mask_ = 0;                    // bits - 1
    uint64_t linger_ns_ = 0;
    uint64_t cur_since_ = 0;             // when cur_ began taking additions
    bool started_ = false;
    SipKey key_{0, 0};
};

} // namespace srcnic

#endif
