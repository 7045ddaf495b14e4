// The rx demux stage's entry: takes datagrams from the link, an L (and those this NIC sent
// itself), and hands each to rx_datagram (rx_demux.cc). It is the receive half of progress()
// and defined in this header, included by nic_over.h only, so that it is always inlined into
// NicOver<L>::progress: a receive system call leaves the CPU's return predictions wrong, so
// each frame between the call and the code that handles its datagram costs a mispredicted
// return, about 8 ns (perf/results/2026-11-22-engine/NOTES.md).
#ifndef SRCNIC_NIC_RX_POLL_H
#define SRCNIC_NIC_RX_POLL_H

#include "nic/nic.h"

#include <algorithm>

namespace srcnic {

template <class L>
__attribute__((always_inline)) inline unsigned Nic::rx_poll()
{
    unsigned self = 0;
    if (!self_rx_.empty()) {
        // What this NIC sent itself, oldest first; what handling them sends itself waits for
        // the next call.
        self_rx_work_.swap(self_rx_);
        for (const SelfDatagram &d : self_rx_work_) {
            count(SRCNIC_CNT_RX_PACKETS);
            count(SRCNIC_CNT_RX_BYTES, d.len);
            rx_datagram(d.buf, buf_data(d.buf), d.len, self_addr_, false);
        }
        self = static_cast<unsigned>(self_rx_work_.size());
        self_rx_work_.clear();
        flush_writes();
    }
    if (rx_posted_ + free_bufs_.size() < kRxBurst) {
        reclaim_reorder_buffers();
    }
    while (rx_posted_ < kRxBurst && !free_bufs_.empty()) {
        const int32_t b = buf_alloc();
        rx_bufs_[rx_posted_] = b;
        rx_slots_[rx_posted_].buf = buf_data(b);
        rx_slots_[rx_posted_].capacity = rx_buf_size_;
        rx_slots_[rx_posted_].borrow = true;   // the stack reads it where the link has it
        ++rx_posted_;
    }
    const uint32_t got =
        rx_posted_ != 0 ? static_cast<L &>(*link_).rx_burst(rx_slots_, rx_posted_) : 0;
    if (got == 0) {
        return self;
    }
    // The link filled slots [0, got): their buffers go up the stack (each is freed by whoever
    // finishes with it); empty slots from the end take their places (empty slots are all
    // alike, so their order does not matter and a single datagram moves one slot).
    for (uint32_t i = 0; i < got; ++i) {
        count(SRCNIC_CNT_RX_PACKETS);
        count(SRCNIC_CNT_RX_BYTES, rx_slots_[i].len);
        rx_datagram(rx_bufs_[i], rx_slots_[i].data, rx_slots_[i].len, rx_slots_[i].src);
    }
    const uint32_t moved = std::min(got, rx_posted_ - got);
    for (uint32_t i = 0; i < moved; ++i) {
        rx_slots_[i] = rx_slots_[rx_posted_ - 1 - i];
        rx_bufs_[i] = rx_bufs_[rx_posted_ - 1 - i];
    }
    rx_posted_ -= got;
    flush_writes();   // before the acknowledgements of what the burst placed go out
    return got + self;
}

} // namespace srcnic

#endif
