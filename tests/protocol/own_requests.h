// A protocol-tier fixture for the NIC's own requests (tx scheduler and completer tests): one QP
// sends to the raw peer, which answers with hand-built acknowledgements, NAKs and resets.
#ifndef SRCNIC_TESTS_PROTOCOL_OWN_REQUESTS_H
#define SRCNIC_TESTS_PROTOCOL_OWN_REQUESTS_H

#include "raw_peer.h"

namespace srcnic {
namespace test {
namespace {

constexpr uint8_t kSend = static_cast<uint8_t>(Opcode::kSEND);

// The PSNs of the SENDs among packets, in order.
std::vector<uint32_t> send_psns(const std::vector<Packet> &packets)
{
    std::vector<uint32_t> psns;
    for (const Packet &q : packets) {
        if (q.h.opcode == kSend) {
            psns.push_back(q.h.psn);
        }
    }
    return psns;
}

class OwnRequests : public ProtocolTest {
protected:
    void SetUp() override
    {
        ProtocolTest::SetUp();
        dest_ = dest_to_peer();
    }

    // How long a step looks at what the Nic sends (a bounded look: it shows what does not go).
    static constexpr uint64_t kLookUs = 3000;

    // Posts a SEND of len pattern bytes from qp_ to the raw peer.
    void post_send(uint64_t wr_id, uint32_t len, uint32_t imm = 0, uint8_t flags = 0)
    {
        sends_.push_back(pattern(len, static_cast<uint32_t>(wr_id)));
        srcnic_wqe_t w = {};
        w.wr_id = wr_id;
        w.opcode = SRCNIC_OP_SEND;
        w.flags = flags;
        w.imm = imm;
        w.dest = dest_;
        w.num_sge = 1;
        w.u.sge[0].addr = reinterpret_cast<uint64_t>(sends_.back().data());
        w.u.sge[0].length = len;
        ASSERT_EQ(SRCNIC_OK, qp_->post_send(w));
    }

    // Posts a SEND of 20 packets (window 16) / expects psn 1..16 out, then nothing; learns the
    // Nic's connection id.
    void fill_window()
    {
        post_send(1, 20 * kSegPayload);
        std::vector<Packet> out = run_for(kLookUs);
        ASSERT_EQ(kWindow, out.size());
        for (uint32_t i = 0; i < kWindow; ++i) {
            EXPECT_EQ(1 + i, out[i].h.psn);
            EXPECT_EQ(i * kSegPayload, out[i].h.addr);
        }
        peer_->nic_conn(out[0].h.src_conn);
    }

    // Receive / expect: an ACK of everything before ack_psn reporting the PSNs of sack (bit i:
    // PSN ack_psn + 1 + i), at stream position 1 (the raw peer sends no requests).
    void sack_nic(uint32_t ack_psn, uint64_t sack)
    {
        PacketHeader h = peer_->header(Opcode::kACK, 1, 0);
        h.ack_psn = ack_psn;
        h.sack = sack;
        peer_->send(h);
    }

    // Receive / expect: an ACK of everything before ack_psn, then the SENDs wr_ids first..last
    // completed in order.
    void ack_and_complete(uint32_t ack_psn, uint64_t first, uint64_t last)
    {
        ack_nic(ack_psn, 1);
        for (uint64_t wr_id = first; wr_id <= last; ++wr_id) {
            srcnic_cqe_t cqe;
            ASSERT_TRUE(await_cqe(qp_, &cqe));
            EXPECT_EQ(wr_id, cqe.wr_id);
            EXPECT_EQ(SRCNIC_OK, cqe.status);
        }
    }

    srcnic_dest_t dest_{};
    std::vector<std::vector<uint8_t>> sends_;   // payloads of posted SENDs
};

// The same with a retransmission timeout of its own (rto_us = rto_max_us = kRtoUs_).
template <uint32_t kRtoUs_>
class OwnRequestsWithRto : public OwnRequests {
protected:
    srcnic_config_t config() override
    {
        srcnic_config_t c = protocol_config();
        c.rto_us = c.rto_max_us = kRtoUs_;
        return c;
    }
};

// A retransmission timeout long enough that no timer fires while a test looks at one exchange.
constexpr uint32_t kSlowRtoUs = 500000;

class OwnRequestsSlowRto : public OwnRequestsWithRto<kSlowRtoUs> {
protected:

    // Posts a SEND of 10 bytes and acknowledges it as soon as it is out: the Nic gets a short
    // round-trip sample (and learns nothing else). Returns its PSN.
    uint32_t exchange_one(uint64_t wr_id)
    {
        post_send(wr_id, 10);
        Packet p;
        EXPECT_TRUE(await_op(Opcode::kSEND, &p));
        peer_->nic_conn(p.h.src_conn);
        ack_nic(p.h.psn + 1, 1);
        srcnic_cqe_t cqe;
        EXPECT_TRUE(await_cqe(qp_, &cqe));
        EXPECT_EQ(SRCNIC_OK, cqe.status);
        return p.h.psn;
    }

    uint32_t srtt_us()
    {
        uint32_t srtt = 0, rto = 0;
        EXPECT_TRUE(nic_->dest_timing(dest_, &srtt, &rto));
        return srtt;
    }

    // Posts n SENDs of 10 bytes (wr_ids 1..n, PSNs 1..n on a new connection), awaits the last
    // one's first transmission and learns the Nic's connection id from it.
    void post_sends(uint64_t n)
    {
        for (uint64_t i = 1; i <= n; ++i) {
            post_send(i, 10);
        }
        Packet p;
        ASSERT_TRUE(await_psn(static_cast<uint32_t>(n), &p));
        peer_->nic_conn(p.h.src_conn);
    }

    // Awaits the Nic's next SEND packet and returns its PSN (0 if none came).
    uint32_t next_send_psn()
    {
        Packet p;
        EXPECT_TRUE(await_op(Opcode::kSEND, &p));
        return p.h.psn;
    }

};

// Timeouts and their recovery, with an RTO long enough that a test thread off its CPU for a few
// ms between two steps does not see a second timeout (the steps run for a quarter of it).
constexpr uint32_t kRecoveryRtoUs = 40000;

class OwnRequestsRecovery : public OwnRequestsWithRto<kRecoveryRtoUs> {
protected:
    // PSNs 1..16 out (17..20 wait for the window), then, if sack is not 0, an ACK of nothing
    // reporting sack; the RTO resends PSN 1 alone; an ACK of 1..8 follows, without sack.
    // Expect 17..20 let into the window and nothing resent, spurious timeouts counted.
    void timeout_then_ack_past_the_resent_packet(uint64_t sack, uint64_t spurious)
    {
        fill_window();
        Counters before(*nic_);
        if (sack != 0) {
            sack_nic(1, sack);
        }
        // do not acknowledge / expect PSN 1 alone again after the RTO, with ACK_REQ
        Packet again;
        std::vector<Packet> skipped;
        ASSERT_TRUE(await_op(Opcode::kSEND, &again, &skipped));
        EXPECT_EQ(1u, again.h.psn);
        EXPECT_NE(0, again.h.flags & kFlagAckReq);
        EXPECT_TRUE(skipped.empty());
        EXPECT_EQ(1u, before.delta(SRCNIC_CNT_TIMEOUTS));
        // receive ACK ack_psn 9: the first transmissions of 2..8 arrived / expect 17..20, let
        // into the window, and nothing resent for a quarter of an RTO
        ack_nic(9, 1);
        EXPECT_EQ((std::vector<uint32_t>{17, 18, 19, 20}), send_psns(run_for(kRecoveryRtoUs / 4)));
        EXPECT_EQ(1u, before.delta(SRCNIC_CNT_RETRANSMITS));
        EXPECT_EQ(spurious, before.delta(SRCNIC_CNT_SPURIOUS_TIMEOUTS));
        // receive ACK of everything / expect the SEND completed
        ack_and_complete(21, 1, 1);
    }
};

} // namespace
} // namespace test
} // namespace srcnic

#endif
