// The Nic's data path compiled for one link type (see the Nic class comment in nic.h): NicOver<L>
// is the Nic whose progress() and tx_flush call an L's rx_burst and tx_burst. For a final L
// (the UDP link) those are direct calls with their common cases inlined: no frame of the link's
// between the system call and the code that handles its datagrams, where each frame costs a
// mispredicted return (perf/results/2026-11-22-engine/NOTES.md). For L = Link they are virtual
// calls. Included by the files that create NICs (nic.cc for Link, nic_udp.cc for UdpLink, a
// later backend's for its own), never by protocol code.
#ifndef SRCNIC_NIC_NIC_OVER_H
#define SRCNIC_NIC_NIC_OVER_H

#include "core/nic_config.h"
#include "nic/nic.h"
#include "nic/rx_poll.h"

#include <memory>
#include <utility>

namespace srcnic {

// The tx scheduler's end of the data path: hands the transmit batch to the link.
template <class L>
SRCNIC_HOT void Nic::tx_flush_over()
{
    uint32_t sent = 0;
    while (sent < tx_count_) {
        const uint32_t n =
            static_cast<L &>(*link_).tx_burst(tx_dgrams_ + sent, tx_count_ - sent);
        if (n == 0) {
            break;
        }
        sent += n;
    }
    for (uint32_t i = 0; i < sent; ++i) {
        const uint64_t bytes = sizeof(PacketHeader) + tx_pkts_[i].h.payload_len;
        count(SRCNIC_CNT_TX_PACKETS);
        count(SRCNIC_CNT_TX_BYTES, bytes);
        if (Connection *c = tx_conn_[i]) {
            ConnStats &st = stats_of(c);
            ++st.tx_packets;
            st.tx_bytes += bytes;
        }
    }
    // The link would block: forget what it did not take. Sequenced packets are marked for
    // retransmission (their payload stays with the message), acks are owed again, those they
    // carried for DC target contexts (XACK) included.
    tx_blocked_ = sent < tx_count_;
    for (uint32_t i = sent; i < tx_count_; ++i) {
        Connection *c = tx_conn_[i];
        const PacketHeader &h = tx_pkts_[i].h;
        if (c == nullptr || c->state != ConnState::kOpen) {
            continue;
        }
        if (h.flags & kFlagXack) {
            xack_not_sent(h);   // the acknowledgement it carried is owed again (§8.7)
        }
        if (opcode_info(h.opcode).sequenced) {
            start_resend(c, h.psn, h.psn + 1);
        } else if (h.opcode == static_cast<uint8_t>(Opcode::kACK)) {
            owe_ack_now(c);
        }
        activate(c);
    }
    tx_count_ = 0;
    tx_batch_bytes_ = 0;
    ++tx_batch_id_;   // staging blocks it pointed into are free again
}

template <class L>
__attribute__((always_inline)) inline unsigned Nic::progress_over()
{
    // A waiter that was woken (or never slept) no longer needs the link to announce arrivals;
    // the caller polls (see Link::rx_notify).
    if (rx_notify_ && !armed_) {
        link_->rx_notify(false);
        rx_notify_ = false;
    }
    // New work goes out before the poll for what came in: a reply posted after the last call
    // leaves without waiting behind a receive system call. What the receive produced that must
    // go at once (acks asked for now, answers, retransmissions, data an ack let into the window:
    // activate_now) goes out in the same call, as do control packets it queued; the rest (an
    // ack that may ride on a reply the application is about to post) waits for the next call's
    // transmit(), which schedules every activated connection. The pass costs a receive that
    // needs none of it (a request or reply of a ping-pong) 20 ns at each end
    // (perf/results/2026-11-22-engine/NOTES.md).
    unsigned n = Nic::transmit();
    tx_urgent_ = false;   // what came before is transmit()'s: activate_now also set tx_due_
    const unsigned got = rx_poll<L>();
    n += got;
    // Timers that expired in transmit() run now that what the link held has been applied.
    if ((got != 0 && (tx_urgent_ || tx_count_ != 0)) || timers_due_) {
        timers_due_ = false;
        n += tx_schedule(now(), true);
        tx_flush();
    }
    return n;
}

template <class L>
class NicOver final : public Nic {
public:
    NicOver(const srcnic_config_t &config, std::unique_ptr<Link> link)
        : Nic(config, std::move(link))
    {
        flush_over<L>();
    }
    SRCNIC_HOT unsigned progress() override { return progress_over<L>(); }
};

template <class L>
srcnic_status_t Nic::create_over(const srcnic_config_t &config, std::unique_ptr<Link> link,
                                 std::unique_ptr<Nic> *nic_p)
{
    srcnic_status_t status = validate_config(config);
    if (status != SRCNIC_OK) {
        return status;
    }
    std::unique_ptr<Nic> nic(new NicOver<L>(config, std::move(link)));
    status = nic->init();
    if (status != SRCNIC_OK) {
        return status;
    }
    *nic_p = std::move(nic);
    return SRCNIC_OK;
}

} // namespace srcnic

#endif
