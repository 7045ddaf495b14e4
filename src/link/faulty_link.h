// The faulty link: a decorator over any Link that drops, duplicates, reorders, corrupts and
// delays datagrams, separately on the way out and on the way in — the one place in the
// engine where faults are injected.
//
// Faults. Each direction has a FaultConfig. Every datagram that passes (a tx_burst datagram
// on its way to the inner link, or a datagram the inner link received on its way to the
// caller) is copied into a buffer the faulty link owns (the caller's tx buffers are never
// modified) and its fate is drawn in this order from the direction's generator:
//   1. drop:      with probability drop, discard it; nothing more is drawn;
//   2. duplicate: with probability duplicate, deliver a second identical copy right behind it;
//   3. corrupt:   with probability corrupt, flip one bit chosen uniformly (a further draw;
//                 an empty datagram has no bit to flip and is not counted);
//   4. reorder:   with probability reorder, hold it back until the next datagram of the same
//                 direction has been released in the same call, or else release it first
//                 thing in the next call (so reordering swaps neighbours within a burst; for
//                 reordering across calls, use jitter);
//   5. delay:     hold it until now_ns() passes its release time, delay_us plus, when
//                 jitter_us > 0, a uniform draw from [0, jitter_us] µs. Datagrams are released
//                 in order of arrival except where jitter lets a later one fall due first.
// A probability of 0 or 1 draws nothing, so a fault that is off does not change the others'
// outcomes. tx decisions use Random(seed), rx decisions Random(seed ^ kFaultRxSeedXor): the
// same seed and the same traffic give the same faults, whatever the interleaving of tx_burst
// and rx_burst calls.
//
// Release. Held datagrams are released only from inside calls: tx_burst and rx_burst both
// send the due tx datagrams to the inner link (before and after taking new ones, for tx_burst);
// rx_burst also delivers due rx datagrams to the caller. The inner link's event fd, which
// event_fd() returns, knows nothing of datagrams held here: while held() > 0 the caller must
// keep calling rx_burst (or tx_burst) although the fd is quiet. With no faults configured
// every datagram is released within the call that took it, so held() stays 0 — except when
// the inner link would block: tx datagrams it refuses stay held, in order, and go first in
// later calls.
//
// Capacity. Each direction holds at most max_held copies, each in a preallocated buffer of
// the inner link's MTU. tx_burst stops accepting (returns fewer than n, as a link that would
// block) while the tx side cannot take another datagram (and its duplicate, while
// duplication is on); rx_burst takes no more from the inner link than the rx side can hold.
// Nothing is allocated per datagram.
//
// Counters. stats() counts what crosses this link's upper side: datagrams accepted from the
// caller (tx_datagrams, or tx_errors for invalid ones) and delivered to the caller
// (rx_datagrams, or rx_oversize for those longer than the caller's slot). The medium's own
// counters are inner().stats(); fault_stats() counts each injected fault.
//
// Threads. One thread uses the link at a time, as with any Link, but set_config, fault_stats
// and held may be called from any thread (a mutex guards them and the data path), so a test
// can heal a link while a Nic's thread drives it.
#ifndef SRCNIC_LINK_FAULTY_LINK_H
#define SRCNIC_LINK_FAULTY_LINK_H

#include "link/link.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

namespace srcnic {

// Mixed into the seed for the rx direction's generator.
constexpr uint64_t kFaultRxSeedXor = 0x9e3779b97f4a7c15ULL;
// Default number of datagram copies held per direction.
constexpr uint32_t kFaultDefaultMaxHeld = 256;
// Largest max_held, copies per direction.
constexpr uint32_t kFaultMaxHeldLimit = 1u << 16;
// Largest delay_us + jitter_us, µs (one hour).
constexpr uint64_t kFaultMaxDelayUs = 3600ULL * 1000 * 1000;

// Faults for one direction; all off by default.
struct FaultConfig {
    double drop = 0;        // probability that a datagram is discarded, 0..1
    double duplicate = 0;   // probability that a datagram is delivered twice, 0..1
    double reorder = 0;     // probability that a datagram is held back behind the next, 0..1
    double corrupt = 0;     // probability that one bit of a datagram is flipped, 0..1
    uint64_t delay_us = 0;  // delay added to every datagram, µs
    uint64_t jitter_us = 0; // further delay, uniform in [0, jitter_us] per datagram, µs
};

struct FaultyLinkConfig {
    FaultConfig tx;         // faults on datagrams the caller sends
    FaultConfig rx;         // faults on datagrams the inner link receives
    uint64_t seed = 1;      // seed of the fault decisions (print it in tests)
    uint32_t max_held = kFaultDefaultMaxHeld; // datagram copies held per direction,
                                              // 2..kFaultMaxHeldLimit
};

// Faults injected in one direction (each monotonic, datagrams).
struct FaultCounters {
    uint64_t dropped = 0;    // discarded
    uint64_t duplicated = 0; // delivered twice (counted once per duplicated datagram)
    uint64_t corrupted = 0;  // had one bit flipped
    uint64_t reordered = 0;  // held back behind the next datagram
    uint64_t delayed = 0;    // held for a delay greater than zero
};

struct FaultStats {
    FaultCounters tx;        // faults on datagrams the caller sent
    FaultCounters rx;        // faults on datagrams the inner link received
};

class FaultyLink final : public Link {
public:
    // Wraps *inner. Takes ownership of it (moves from it) only on success; *link_p is set only
    // on success. INVALID_PARAM for a null inner link or a bad config, NO_MEMORY when the held
    // buffers (2 * max_held * inner->max_datagram() bytes) cannot be allocated.
    static srcnic_status_t open(std::unique_ptr<Link> &&inner, const FaultyLinkConfig &cfg,
                                std::unique_ptr<FaultyLink> *link_p);

    ~FaultyLink() override;
    FaultyLink(const FaultyLink &) = delete;
    FaultyLink &operator=(const FaultyLink &) = delete;

    uint32_t tx_burst(const TxDatagram *dgrams, uint32_t n) override;
    uint32_t rx_burst(RxDatagram *slots, uint32_t n) override;
    // The inner link's address and datagram sizes.
    const LinkAddr &local_addr() const override { return inner_->local_addr(); }
    uint32_t mtu() const override { return inner_->mtu(); }
    uint32_t path_mtu(const LinkAddr &peer) const override { return inner_->path_mtu(peer); }
    uint32_t max_datagram() const override { return inner_->max_datagram(); }
    uint32_t rx_queue_capacity(uint32_t size) const override { return inner_->rx_queue_capacity(size); }
    // The inner link's event fd; see "Release" above for held datagrams.
    int event_fd() const override { return inner_->event_fd(); }
    srcnic_status_t open_event_fd() override { return inner_->open_event_fd(); }
    void rx_notify(bool on) override { inner_->rx_notify(on); }
    bool rx_pending() const override { return held() > 0 || inner_->rx_pending(); }
    const LinkStats &stats() const override { return stats_; }

    // Replaces the fault configuration of both directions, at any time (heal a link with two
    // default FaultConfigs). Datagrams already held keep their release times. INVALID_PARAM,
    // and no change, if either config is out of range.
    srcnic_status_t set_config(const FaultConfig &tx, const FaultConfig &rx);
    // A snapshot of the fault counters.
    FaultStats fault_stats() const;
    // Datagram copies held in both directions; while non-zero, keep calling rx_burst.
    size_t held() const;
    // The decorated link (for its own counters).
    const Link &inner() const { return *inner_; }

private:
    class Direction;

    FaultyLink();
    void flush_tx(uint64_t now, uint64_t call);
    void pull_rx(uint32_t n, uint64_t now, uint64_t call);

    std::unique_ptr<Link> inner_;       // the decorated link
    std::unique_ptr<Direction> tx_;     // tx faults, generator and held copies
    std::unique_ptr<Direction> rx_;     // rx faults, generator and held copies
    uint64_t calls_ = 0;                // tx_burst and rx_burst calls so far
    LinkStats stats_;                   // upper-side counters (see above)
    mutable std::mutex mutex_;          // held by tx_burst, rx_burst, set_config,
                                        // fault_stats and held
};

} // namespace srcnic

#endif
