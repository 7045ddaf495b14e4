// Rx demux: takes the datagrams rx_poll (nic.cc) received from the link, drops and counts what
// fails the header checks, finds the connection from the id the packet carries (validated
// against the sender's address, incarnation and connection id; the address map is consulted
// only until the sender has learned our id, and only for a packet that proves our secret,
// PROTOCOL.md §7), puts sequenced packets in PSN order, and hands requests to the responder and
// answers to the completer, with the acknowledgement every sequenced packet carries (in PSN
// order: an ACK that overtook the reverse packets before it waits for them). Unsequenced ACKs
// and NAKs go to the completer; an RST ends the connection here. It also reports what this
// side holds (rx_sack) and gives back reorder buffers when reception starves.
#include "nic/nic.h"

#include "core/clock.h"
#include "core/log.h"
#include "wire/auth.h"

#include <algorithm>
#include <cstring>

namespace srcnic {

namespace {

srcnic_counter_t drop_counter(HeaderError err)
{
    switch (err) {
    case HeaderError::kTruncated: return SRCNIC_CNT_DROP_TRUNCATED;
    case HeaderError::kBadVersion: return SRCNIC_CNT_DROP_BAD_VERSION;
    case HeaderError::kBadChecksum: return SRCNIC_CNT_DROP_BAD_CHECKSUM;
    case HeaderError::kWrongJobKey: return SRCNIC_CNT_DROP_WRONG_JOB_KEY;
    case HeaderError::kUnknownOpcode: return SRCNIC_CNT_DROP_UNKNOWN_OPCODE;
    case HeaderError::kBadFlags: return SRCNIC_CNT_DROP_BAD_FLAGS;
    default: return SRCNIC_CNT_DROP_BAD_LENGTH;
    }
}

} // namespace

int32_t Nic::buf_alloc()
{
    if (free_bufs_.empty()) {
        return -1;
    }
    const int32_t b = free_bufs_.back();
    free_bufs_.pop_back();
    return b;
}

void Nic::buf_free(int32_t b)
{
    free_bufs_.push_back(b);
}

SRCNIC_HOT void Nic::rx_datagram(int32_t buf, const uint8_t *data, uint32_t len,
                                 const LinkAddr &src, bool sealed)
{
    PacketHeader h;
    uint8_t *placed;
    const HeaderError err = check_header_placing(
        data, len, several_owners_ ? kAnyJobKey : static_cast<int64_t>(config_.job_key), &h,
        [this, &src](const PacketHeader &hh) { return place_target(hh, src); }, &placed, sealed);
    if (err != HeaderError::kOk) {
        count(drop_counter(err));
        SRCNIC_LOG_RATELIMITED(LogLevel::kDebug, "drop datagram from %s: %s",
                               src.to_string().c_str(), to_string(err));
        buf_free(buf);
        return;
    }
    if (log_enabled(LogLevel::kTrace)) {
        SRCNIC_LOG_TRACE("rx %s from %s", to_string(h).c_str(), src.to_string().c_str());
    }
    const bool is_rst = h.opcode == static_cast<uint8_t>(Opcode::kRST);
    const bool is_syn = (h.flags & kFlagSyn) != 0;
    if (h.dst_nic != addr_.incarnation) {
        // Meant for another incarnation of this NIC, or a guess. Not answered: an answer would
        // tell a prober our incarnation (PROTOCOL.md §7.3); a peer of an earlier incarnation
        // learns of the restart from the new address UCX hands it, or times out.
        count(SRCNIC_CNT_DROP_WRONG_NIC);
        buf_free(buf);
        return;
    }

    // A packet of this NIC to itself (§5.7): what one of its connections sends, another
    // receives, as between two NICs, so that neither direction's queue waits on the other's.
    const bool from_self = h.src_nic == addr_.incarnation && src == link_->local_addr();
    Connection *c = nullptr;
    if (h.dst_conn != 0) {
        // Bound to the connection it names: the id (generation included), the address and the
        // incarnation the connection was opened with (§7.2). Nothing else is looked up.
        c = named_conn(h, src);
        if (c != nullptr && stream_of(c) != h.stream) {
            c = nullptr;   // a packet of another DC stream, or a connection's naming a DC slot
            if ((h.flags & kFlagsDc) == 0) {
                count(SRCNIC_CNT_DROP_WRONG_GEN);
                buf_free(buf);
                return;
            }
        }
        if (c == nullptr) {
            if (h.flags & kFlagDcInit) {
                dc_gone(h, src);   // its target context was evicted (§8.4)
            } else if ((h.flags & kFlagDcTarget) || conn_by_id(h.dst_conn) == nullptr) {
                reject_unknown_id(h, src);
            } else {
                count(SRCNIC_CNT_DROP_WRONG_PEER);
            }
            buf_free(buf);
            return;
        }
    } else {
        // Only a SYN sequenced packet that proves our secret may open a connection, or reach
        // one by its sender's address (§7.1), this NIC's own packets included. Checked before
        // anything is looked up or changed.
        if (!is_syn || !opcode_info(h.opcode).sequenced || h.src_conn == 0) {
            count(SRCNIC_CNT_DROP_NO_CONN);
            buf_free(buf);
            return;
        }
        if (h.auth != syn_proof(key_, h, src)) {
            count(SRCNIC_CNT_DROP_BAD_PROOF);
            SRCNIC_LOG_RATELIMITED(LogLevel::kDebug, "drop SYN from %s: no proof of our secret",
                                   src.to_string().c_str());
            buf_free(buf);
            return;
        }
        if (h.flags & kFlagDcInit) {
            // A DC stream's first packets (or its first after its context was evicted): to its
            // target context, found by the stream, resumed or created (§8.3).
            c = dct_for(h, src);
            if (c == nullptr) {
                buf_free(buf);
                return;
            }
        } else if (h.flags & kFlagDcTarget) {
            count(SRCNIC_CNT_DROP_BAD_FLAGS);   // a target always knows its initiator's id
            buf_free(buf);
            return;
        } else if (from_self) {
            c = self_receiver(h.src_conn);
        } else if (auto it = conn_by_addr_.find(src); it != conn_by_addr_.end()) {
            c = conns_[it->second].get();
            if (peer_of(c).nic != h.src_nic) {
                // The peer restarted (§5.6): nothing of the old connection may mix with the new.
                conn_fail(c, SRCNIC_ERR_CONNECTION_RESET);
                c = nullptr;
            }
        }
    }
    // An RST names our connection by dst_conn and carries no id of its own (§3.9), as does a
    // NAK a NIC sends without a connection for it (DC_BUSY, DC_GONE, USE_DC: §8).
    const bool unbound = is_rst || (h.opcode == static_cast<uint8_t>(Opcode::kNAK) && h.src_conn == 0);
    if (c != nullptr && !unbound && !from_peer_conn(*c, h)) {
        if (is_syn && c->closing) {
            // It agreed to our CLOSE (the answer is lost or still on its way) and opened a new
            // connection since: ours, quiet, closes as agreed.
            count(SRCNIC_CNT_CONN_DEMOTED);
            conn_close(c);
            c = nullptr;
        } else if (is_syn) {
            // The peer dropped its side and opened a new connection (it proved our secret).
            conn_fail(c, SRCNIC_ERR_CONNECTION_RESET);
            c = nullptr;
        } else {
            count(SRCNIC_CNT_DROP_WRONG_GEN);
            buf_free(buf);
            return;
        }
    }
    if (c == nullptr) {
        // A proved SYN: it opens a connection, or is refused (the sender knows us): with
        // USE_DC where this NIC takes DC streams (§8.1), remembered so that no later packet of
        // that connection opens it (a duplicate would run again what went over DC), else RST.
        const ClosedKey key{src, h.src_nic, h.src_conn, true};
        const bool dc = config_.dc_targets != 0 && !from_self;
        const bool refused = dc && was_refused(key);
        if (!refused) {
            c = conn_open(src, h.src_nic, !from_self);
        }
        if (c == nullptr) {
            if (dc) {
                if (!refused) {
                    refused_add(key);
                }
                count(SRCNIC_CNT_USE_DC_SENT);
                tx_nak_unbound(src, h, NakReason::kUseDc);
            } else {
                tx_reset(src, h.src_nic, h.src_conn, h.job_key);
            }
            buf_free(buf);
            return;
        }
        if (from_self) {
            if (Connection *sender = conn_by_id(h.src_conn)) {
                sender->self = true;
                mirror_of_[sender->id] = c->id;
            }
            c->self = true;
        }
    }
    if (__builtin_expect(c->closing, 0) && c->kind == ConnKind::kDci) {
        // Its stream is over: it waits for the close's confirmation (an RST ends the wait;
        // nothing of the stream is outstanding, so nothing fails).
        if (is_rst) {
            conn_release(c);
        } else if (!unbound) {
            dci_closing_rx(c, h);
        }
        buf_free(buf);
        return;
    }
    if (c->peer_conn == 0) {
        c->peer_conn = h.src_conn;
    }
    c->peer_job_key = h.job_key;
    if (c->kind == ConnKind::kDct) {
        c->used = now();
        dc_of(c)->id_known = h.dst_conn != 0;   // its DCI knows our id, or forgot it (§8.7)
        dc_of(c)->rev_ok = (h.flags & kFlagDcReverse) != 0;   // it runs requests back (§8.8)
    }
    if ((h.flags & kFlagXack) && !unbound) {
        rx_xack(c, h);   // an acknowledgement of one of our DC streams to its sender (§8.7)
    }
    if ((h.flags & kFlagDcRelease) && !unbound && c->kind == ConnKind::kDci) {
        dc_of(c)->release_asked = true;   // its target refuses others: close once quiet (§8.3)
    }
    if (c->act == nullptr && h.opcode == static_cast<uint8_t>(Opcode::kACK) && h.ack_psn == c->next_psn) {
        // An idle connection has everything acknowledged: a repeated ACK (its data was resent)
        // has nothing to do, and takes no active half.
        buf_free(buf);
        dci_release_if_asked(c);
        return;
    }
    engage(c);   // everything below works on its active half
    ConnStats &st = stats_of(c);
    ++st.rx_packets;
    st.rx_bytes += len;
    if (opcode_info(h.opcode).sequenced) {
        rx_sequenced(c, buf, data, len, h, placed);
    } else if (is_rst) {
        conn_fail(c, SRCNIC_ERR_CONNECTION_RESET);   // the peer dropped the connection (§5.6)
        buf_free(buf);
        return;
    } else {
        complete_control(c, h);   // ACK, NAK: the completer's
        buf_free(buf);
    }
    // What held an unlisted connection's half (a deferred ack, a message being received) may
    // have ended with this packet.
    if (c->state == ConnState::kOpen && !c->in_active) {
        disengage(c);
    }
    dci_release_if_asked(c);
}

SRCNIC_HOT void Nic::rx_sequenced(Connection *c, int32_t buf, const uint8_t *data, uint32_t len,
                                  const PacketHeader &h, const uint8_t *placed)
{
    note_sack(c, h);
    const uint32_t psn = h.psn;
    if (psn_before(psn, c->expected_psn)) {
        count(SRCNIC_CNT_DUPLICATES);
        owe_ack_now(c);
        activate_now(c);
        buf_free(buf);
        return;
    }
    const uint32_t ahead = psn - c->expected_psn;
    if (ahead >= c->act->window) {
        count(SRCNIC_CNT_DROP_OUT_OF_WINDOW);
        buf_free(buf);
        return;
    }
    if (ahead != 0) {
        const uint32_t slot = psn % c->act->window;
        int32_t *reorder = reorder_slots(c->act);
        if (reorder[slot] >= 0) {
            count(SRCNIC_CNT_DUPLICATES);
            buf_free(buf);
        } else {
            // Kept past this call: into the packet's own buffer if the link lent it.
            if (data != buf_data(buf)) {
                std::memcpy(buf_data(buf), data, len);
            }
            reorder[slot] = buf;
            ++c->act->reorder_count;
            count(SRCNIC_CNT_OUT_OF_ORDER);
        }
        // Report the gap at once: the sender's fast retransmit depends on it.
        owe_ack_now(c);
        activate_now(c);
        return;
    }
    rx_deliver(c, buf, data, h, placed);
    // Drain what the reorder buffer now holds in sequence.
    while (c->state == ConnState::kOpen && c->act->reorder_count != 0) {
        const uint32_t slot = c->expected_psn % c->act->window;
        const int32_t next = c->act->reorder[slot];
        if (next < 0) {
            break;
        }
        PacketHeader nh;
        std::memcpy(&nh, buf_data(next), sizeof(nh));
        if (nh.psn != c->expected_psn) {
            break;
        }
        const uint32_t expected = c->expected_psn;
        c->act->reorder[slot] = -1;
        --c->act->reorder_count;
        rx_deliver(c, next, buf_data(next), nh);
        if (c->expected_psn == expected) {
            break;   // not consumed (receiver not ready): it will be retransmitted
        }
    }
    if (c->state == ConnState::kOpen && c->act->has_deferred_ack &&
        !psn_before(c->expected_psn, c->act->deferred_pos)) {
        c->act->has_deferred_ack = false;
        apply_ack(c, c->act->deferred_ack);
    }
}

SRCNIC_HOT void Nic::rx_deliver(Connection *c, int32_t buf, const uint8_t *data,
                                const PacketHeader &h, const uint8_t *placed)
{
    // This packet follows every reverse packet before it: its acknowledgement may complete
    // requests now (§5.4).
    apply_ack(c, h.ack_psn);
    if (c->state != ConnState::kOpen) {
        buf_free(buf);
        return;
    }
    const uint8_t *payload = data + sizeof(PacketHeader);
    bool consumed = true;
    if (opcode_info(h.opcode).stage == RxStage::kResponder) {
        if (__builtin_expect(c->kind == ConnKind::kDci, 0)) {
            dc_of(c)->rev_run = true;   // its target sent it back along the stream (§8.8)
        }
        consumed = respond(c, h, payload, placed);
    } else {
        complete_answer(c, h, payload, placed);
    }
    buf_free(buf);
    if (!consumed) {
        return;
    }
    ++c->expected_psn;
    ++c->act->unacked_rx;
    c->act->unacked_rx_bytes += h.payload_len;
    if (!c->act->ack_pending) {
        c->act->ack_pending = true;
        c->act->ack_since_ns = now();
    }
    if (h.flags & kFlagAckReq) {
        c->act->ack_next = true;
        if (c->kind == ConnKind::kDct) {
            xack_list(c);   // a packet to its initiator's NIC may carry it (§8.7)
            if (dc_of(c)->rev_ok && !dc_of(c)->rev_listed) {
                dc_of(c)->rev_listed = true;   // a request may go back along it (§8.8)
                rev_cands_.push_back(c->id & 0xffff);
            }
        }
    }
    // A stream's receiver acknowledges every window / 4 packets, or a quarter of a full window's
    // bytes, at once (tx_schedule).
    if (c->act->ack_due()) {
        activate_now(c);
    } else {
        activate(c);
    }
}

uint8_t *Nic::place_target(const PacketHeader &h, const LinkAddr &src)
{
    const bool send = h.opcode == static_cast<uint8_t>(Opcode::kSEND);
    if (h.payload_len < kCheckWhilePlacingMin ||
        (!send && h.opcode != static_cast<uint8_t>(Opcode::kREAD_RESP))) {
        return nullptr;
    }
    // rx_datagram's and rx_sequenced's checks for a packet they deliver at once, then those
    // of the stage that places it.
    if (h.dst_nic != addr_.incarnation || h.dst_conn == 0) {
        return nullptr;
    }
    const Connection *c = named_conn(h, src);
    if (c == nullptr || c->peer_conn == 0 || !from_peer_conn(*c, h) || h.psn != c->expected_psn ||
        c->closing) {
        return nullptr;
    }
    return send ? send_target(c, h) : read_target(c, h);
}

void Nic::reject_unknown_id(const PacketHeader &h, const LinkAddr &src)
{
    count(SRCNIC_CNT_DROP_WRONG_GEN);
    // RST only to the peer of the slot's connection, open (the packet names an older
    // generation) or released (the peer still uses it): whoever else names the slot learns
    // nothing, not even that the id was wrong (PROTOCOL.md §7.3).
    const uint32_t slot = h.dst_conn & 0xffff;
    if (h.opcode == static_cast<uint8_t>(Opcode::kRST) || h.src_conn == 0 || slot == 0 ||
        slot >= conns_.size()) {
        return;
    }
    Connection &s = *conns_[slot];
    const bool peer = peer_of(&s).addr == src && peer_of(&s).nic == h.src_nic;
    const bool released = s.state != ConnState::kOpen && s.id == h.dst_conn &&
                          s.peer_conn == h.src_conn;
    if (!peer) {
        return;
    }
    // The slot's last occupant ended without failing, and its peer did not hear so (a lost
    // answer): it is told again how it ended, as it would have been then.
    if (released && s.failed_gen != s.gen) {
        if (s.kind == ConnKind::kDci && (h.flags & kFlagDcTarget) && dc_of(&s)->stream == h.stream &&
            h.opcode != static_cast<uint8_t>(Opcode::kNAK) &&
            h.opcode != static_cast<uint8_t>(Opcode::kDC_CLOSE)) {
            // A DCI handed over: its stream is over (§8.5). (Not to a confirmation, §8.8,
            // which is never answered.)
            tx_control(&s, Opcode::kDC_CLOSE, s.next_psn, 0);
            return;
        }
        if (s.kind == ConnKind::kConn && h.opcode == static_cast<uint8_t>(Opcode::kCLOSE) &&
            h.imm == static_cast<uint32_t>(CloseKind::kAsk)) {
            // A connection closed by agreement (§8.6).
            tx_control(&s, Opcode::kCLOSE, s.next_psn, static_cast<uint32_t>(CloseKind::kAgreed));
            return;
        }
    }
    // A DC packet is never answered with RST: a stream ends by DC_GONE or DC_CLOSE.
    if ((h.flags & kFlagsDc) == 0 && (s.state == ConnState::kOpen || released)) {
        tx_reset(src, h.src_nic, h.src_conn, h.job_key);
    }
}

uint64_t Nic::rx_sack(const Connection *c) const
{
    uint64_t bits = 0;
    if (c->act->reorder_count == 0) {
        return bits;   // (nothing out of order: perhaps no reorder slots either)
    }
    const uint32_t span = std::min<uint32_t>(64, c->act->window - 1);
    for (uint32_t i = 0; i < span; ++i) {
        const uint32_t psn = c->expected_psn + 1 + i;
        const int32_t b = c->act->reorder[psn % c->act->window];
        if (b >= 0) {
            bits |= 1ull << i;
        }
    }
    return bits;
}

void Nic::reclaim_reorder_buffers()
{
    // Out-of-order packets hold buffers; when they starve reception, the newest of them (the
    // farthest from delivery) are given back until a receive burst fits, so the in-order
    // packets that unblock everything can arrive. Their senders retransmit them: the
    // acknowledgements no longer report them.
    for (Connection *c : active_) {
        if (c->state != ConnState::kOpen || c->act == nullptr) {
            continue;
        }
        for (uint32_t ahead = c->act->window - 1; ahead != 0 && c->act->reorder_count != 0; --ahead) {
            int32_t &slot = c->act->reorder[(c->expected_psn + ahead) % c->act->window];
            if (slot < 0) {
                continue;
            }
            buf_free(slot);
            slot = -1;
            --c->act->reorder_count;
            count(SRCNIC_CNT_DROP_NO_BUFFER);
            if (rx_posted_ + free_bufs_.size() >= kRxBurst) {
                return;
            }
        }
    }
}

} // namespace srcnic
