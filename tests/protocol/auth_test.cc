// Protocol tests of connection authentication (PROTOCOL.md §7): crafted packets that lack the
// proof of the Nic's secret, carry a wrong or replayed one, or name a connection they are not
// bound to are dropped and counted under their reason, open nothing, deliver nothing and draw no
// answer (no RST that would tell a prober the Nic's incarnation); a sender that proved itself, or
// the peer of the connection a packet names, is still answered.
#include "raw_peer.h"

#include "core/random.h"

#include <cstdio>
#include <random>
#include <set>

namespace srcnic {
namespace test {
namespace {

class Auth : public ProtocolTest {
protected:
    void SetUp() override
    {
        ProtocolTest::SetUp();
        post_buffer(1, 4096);
    }

    // A SYN SEND of psn 1 from peer to qpn, dst_conn 0, no proof yet.
    PacketHeader syn_send(const RawPeer &peer, uint32_t qpn, uint32_t payload_len = 0) const
    {
        PacketHeader h = peer.header(Opcode::kSEND, 1, kFlagSyn | kFlagFirst | kFlagLast);
        h.dst_conn = 0;
        h.dst_qpn = qpn;
        h.src_qpn = kPeerQpn;
        h.msg_len = payload_len;
        return h;
    }

    // A second raw peer at another address of the fabric (incarnation and connection id as
    // given: by default the same as peer_'s, so that only the address tells them apart).
    std::unique_ptr<RawPeer> other_peer(uint64_t incarnation = kPeerNic, uint32_t conn = kPeerConn)
    {
        return std::unique_ptr<RawPeer>(new RawPeer(*fabric_, nic_->addr(), kJobKey, incarnation, conn));
    }

    // from sends bytes; expect exactly `counter` up by one among the drop counters, nothing
    // opened, failed or delivered, and nothing sent to from or to peer_.
    void expect_silent_drop(RawPeer &from, const std::vector<uint8_t> &bytes, srcnic_counter_t counter,
                            const char *what)
    {
        SCOPED_TRACE(what);
        Counters before(*nic_);
        from.send_bytes(bytes);
        const std::vector<Packet> out = progress_until_received(1);
        EXPECT_EQ(1u, before.delta(counter)) << srcnic_counter_name(counter);
        EXPECT_EQ("", before.other_drops(counter));
        EXPECT_EQ(0u, before.delta(SRCNIC_CNT_CONN_OPENED));
        EXPECT_EQ(0u, before.delta(SRCNIC_CNT_CONN_FAILED));
        EXPECT_EQ(0u, before.delta(SRCNIC_CNT_NO_SUCH_QP));
        EXPECT_EQ(0u, before.delta(SRCNIC_CNT_TX_PACKETS)) << "the Nic answered";
        EXPECT_TRUE(out.empty());
        if (&from != peer_.get()) {
            EXPECT_TRUE(from.receive().empty());
        }
        srcnic_cqe_t cqe;
        EXPECT_EQ(0u, qp_->poll_cq(&cqe, 1)) << "a dropped packet was delivered";
    }

    // Progresses the Nic until counter c reaches value (true) or the watchdog (5 s) expires.
    bool progress_until_counter(srcnic_counter_t c, uint64_t value)
    {
        const uint64_t deadline = now_ns() + 5 * kNsPerSec;
        while (nic_->counter(c) < value) {
            if (now_ns() > deadline) {
                return false;
            }
            nic_->progress();
        }
        return true;
    }

    // peer_ opens a connection with a proved SYN SEND of psn 1 and learns the Nic's id.
    void open_from_peer()
    {
        ASSERT_NO_FATAL_FAILURE(open_connection());
        ASSERT_EQ(1u, nic_->num_connections());
    }

    // A SEND of psn from `from` naming the Nic's connection `conn` (no SYN, no proof).
    PacketHeader send_on(const RawPeer &from, uint32_t conn, uint32_t psn) const
    {
        PacketHeader h = from.header(Opcode::kSEND, psn, kFlagFirst | kFlagLast);
        h.dst_conn = conn;
        h.dst_qpn = qp_->qpn();
        return h;
    }

    // peer_ sends SEND psn on its connection / expect it delivered (the connection works).
    void expect_peer_delivers(uint32_t psn)
    {
        post_buffer(100 + psn, 64);
        PacketHeader h = send_on(*peer_, peer_->nic_conn(), psn);
        h.imm = psn;
        peer_->send(h);
        srcnic_cqe_t cqe;
        ASSERT_TRUE(await_cqe(qp_, &cqe)) << "the real peer's psn " << psn << " was not delivered";
        EXPECT_EQ(SRCNIC_OK, cqe.status);
        EXPECT_EQ(psn, cqe.imm);
    }
};

// --- §7.1 the proof ---

TEST_F(Auth, rx_datagram__syn_without_proof_is_dropped_unanswered)
{
    // receive a SYN SEND, SYN WRITE and SYN READ_REQ with auth 0 / expect DROP_BAD_PROOF each,
    // no connection, no delivery, no answer
    expect_silent_drop(*peer_, RawPeer::datagram(syn_send(*peer_, qp_->qpn()), {}),
                       SRCNIC_CNT_DROP_BAD_PROOF, "SEND");
    PacketHeader w = peer_->header(Opcode::kWRITE, 1, kFlagSyn | kFlagFirst | kFlagLast);
    w.msg_len = 8;
    w.rkey = 0x100001;
    expect_silent_drop(*peer_, RawPeer::datagram(w, pattern(8, 1)), SRCNIC_CNT_DROP_BAD_PROOF,
                       "WRITE");
    PacketHeader r = peer_->header(Opcode::kREAD_REQ, 1, kFlagSyn | kFlagFirst | kFlagLast);
    r.msg_len = 8;
    expect_silent_drop(*peer_, RawPeer::datagram(r, {}), SRCNIC_CNT_DROP_BAD_PROOF, "READ_REQ");
    EXPECT_EQ(0u, nic_->num_connections());
}

TEST_F(Auth, rx_datagram__syn_with_wrong_proof_is_dropped_unanswered)
{
    const PacketHeader base = syn_send(*peer_, qp_->qpn(), 16);
    const std::vector<uint8_t> payload = pattern(16, 3);
    PacketHeader good = base;
    good.payload_len = 16;
    const uint64_t proof = peer_->proof(good);
    // receive the SYN with its proof's lowest bit flipped / expect DROP_BAD_PROOF, silence
    PacketHeader h = base;
    h.auth = proof ^ 1;
    expect_silent_drop(*peer_, RawPeer::datagram(h, payload), SRCNIC_CNT_DROP_BAD_PROOF, "bit flip");
    // receive it with a proof under another secret (an old address of the Nic) / expect the same
    h = good;
    h.auth = syn_proof(nic_key(nic_->addr().secret ^ 0x10, nic_->addr().incarnation), h,
                       peer_->local_addr());
    expect_silent_drop(*peer_, RawPeer::datagram(h, payload), SRCNIC_CNT_DROP_BAD_PROOF,
                       "another secret");
    // receive it with the proof of the same header to another QP, immediate, PSN or length
    // (the proof covers the header) / expect the same
    for (int field = 0; field < 4; ++field) {
        h = good;
        h.auth = proof;
        switch (field) {
        case 0: h.dst_qpn += 1; break;
        case 1: h.imm = 99; break;
        case 2: h.psn = 2; break;
        default: h.msg_len = 17; break;
        }
        expect_silent_drop(*peer_, RawPeer::datagram(h, payload), SRCNIC_CNT_DROP_BAD_PROOF,
                           "field changed after proving");
    }
    // receive, from another address, the very datagram peer_ would send (a captured SYN
    // replayed elsewhere: the proof covers the source address) / expect the same
    std::unique_ptr<RawPeer> replayer = other_peer();
    h = good;
    h.auth = proof;
    expect_silent_drop(*replayer, RawPeer::datagram(h, payload), SRCNIC_CNT_DROP_BAD_PROOF,
                       "replayed from another address");
    // and the same datagram from peer_ itself opens the connection: the proof was right there
    peer_->send_bytes(RawPeer::datagram(h, payload));
    srcnic_cqe_t cqe;
    ASSERT_TRUE(await_cqe(qp_, &cqe));
    EXPECT_EQ(16u, cqe.byte_len);
    EXPECT_EQ(1u, nic_->num_connections());
}

TEST_F(Auth, rx_datagram__dst_conn_zero_without_syn_reaches_no_connection)
{
    open_from_peer();
    // receive SEND psn 2 from the connected peer's address without SYN and with dst_conn 0
    // expect DROP_NO_CONN: the address alone finds a connection only for a proved SYN
    PacketHeader h = send_on(*peer_, 0, 2);
    expect_silent_drop(*peer_, RawPeer::datagram(h, {}), SRCNIC_CNT_DROP_NO_CONN, "no SYN");
    // receive a SYN ACK with a valid proof (a control packet opens nothing) / expect the same
    h = peer_->header(Opcode::kACK, 1, kFlagSyn);
    h.dst_conn = 0;
    h.auth = peer_->proof(h);
    expect_silent_drop(*peer_, RawPeer::datagram(h, {}), SRCNIC_CNT_DROP_NO_CONN, "SYN ACK");
    expect_peer_delivers(2);
}

TEST_F(Auth, rx_datagram__syn_naming_a_connection_or_auth_on_a_named_one_is_bad_flags)
{
    open_from_peer();
    // receive SEND psn 2 with SYN and dst_conn = the Nic's id / expect DROP_BAD_FLAGS
    PacketHeader h = send_on(*peer_, peer_->nic_conn(), 2);
    h.flags |= kFlagSyn;
    expect_silent_drop(*peer_, RawPeer::datagram(h, {}), SRCNIC_CNT_DROP_BAD_FLAGS, "SYN with id");
    // receive SEND psn 2 naming the connection with auth set / expect DROP_BAD_FLAGS
    h = send_on(*peer_, peer_->nic_conn(), 2);
    h.auth = 0x1234;
    expect_silent_drop(*peer_, RawPeer::datagram(h, {}), SRCNIC_CNT_DROP_BAD_FLAGS, "auth with id");
    expect_peer_delivers(2);
}

// --- §7.2 packets bound to their connection ---

TEST_F(Auth, rx_datagram__packet_naming_a_connection_from_another_address_is_dropped)
{
    open_from_peer();
    // receive, from another address, SEND psn 2 naming peer_'s connection with peer_'s
    // incarnation and connection id (everything an observer of the wire knows)
    // expect DROP_WRONG_PEER, nothing delivered, nothing answered, the connection intact
    std::unique_ptr<RawPeer> forger = other_peer();
    forger->nic_conn(peer_->nic_conn());
    PacketHeader h = send_on(*forger, peer_->nic_conn(), 2);
    expect_silent_drop(*forger, RawPeer::datagram(h, pattern(8, 2)), SRCNIC_CNT_DROP_WRONG_PEER,
                       "another address");
    // the same for an RST and an ACK naming it / expect DROP_WRONG_PEER, the connection intact
    h = forger->header(Opcode::kRST, 0, 0);
    h.src_conn = 0;
    expect_silent_drop(*forger, RawPeer::datagram(h, {}), SRCNIC_CNT_DROP_WRONG_PEER, "RST");
    h = forger->header(Opcode::kACK, 1, 0);
    expect_silent_drop(*forger, RawPeer::datagram(h, {}), SRCNIC_CNT_DROP_WRONG_PEER, "ACK");
    EXPECT_EQ(1u, nic_->num_connections());
    expect_peer_delivers(2);
}

TEST_F(Auth, rx_datagram__packet_naming_a_connection_with_another_incarnation_is_dropped)
{
    open_from_peer();
    // receive, from peer_'s address, SEND psn 2 and an RST naming the connection with another
    // incarnation / expect DROP_WRONG_PEER each, and the connection kept (not failed as if the
    // peer had restarted: a restarted peer does not know the connection's id)
    PacketHeader h = send_on(*peer_, peer_->nic_conn(), 2);
    h.src_nic = kPeerNic + 5;
    expect_silent_drop(*peer_, RawPeer::datagram(h, {}), SRCNIC_CNT_DROP_WRONG_PEER, "SEND");
    h = peer_->header(Opcode::kRST, 0, 0);
    h.src_conn = 0;
    h.src_nic = kPeerNic + 5;
    expect_silent_drop(*peer_, RawPeer::datagram(h, {}), SRCNIC_CNT_DROP_WRONG_PEER, "RST");
    expect_peer_delivers(2);
}

TEST_F(Auth, rx_datagram__guessed_connection_ids_are_dropped_unanswered)
{
    open_from_peer();
    std::unique_ptr<RawPeer> guesser = other_peer(kPeerNic + 9, kPeerConn + 9);
    // receive, from another peer, SENDs naming slots 1..8 with 64 generations each, the real
    // id among them / expect each dropped (DROP_WRONG_GEN, or DROP_WRONG_PEER for the real id)
    // and nothing answered: the guesser cannot even tell a live slot from a free one
    Counters before(*nic_);
    uint32_t sent = 0;
    for (uint32_t slot = 1; slot <= 8; ++slot) {
        for (uint32_t g = 0; g < 64; ++g) {
            const uint32_t gen = (peer_->nic_conn() >> 16) + g;
            guesser->send_bytes(RawPeer::datagram(send_on(*guesser, slot | (gen & 0xffff) << 16, 2), {}));
            ++sent;
        }
        EXPECT_TRUE(progress_until_received(64).empty());
    }
    EXPECT_EQ(sent, before.delta(SRCNIC_CNT_DROP_WRONG_GEN) + before.delta(SRCNIC_CNT_DROP_WRONG_PEER));
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_DROP_WRONG_PEER));
    EXPECT_EQ(0u, before.delta(SRCNIC_CNT_TX_PACKETS));
    EXPECT_TRUE(guesser->receive().empty());
    expect_peer_delivers(2);
}

// --- §7.3 who is answered ---

TEST_F(Auth, rx_datagram__no_answer_tells_a_prober_the_incarnation)
{
    // A prober knows the Nic's address and port only. receive from it SYN SENDs, SENDs naming
    // guessed connections, READ_REQs, ACKs, NAKs and RSTs, addressed to incarnations 0, 1,
    // incarnation ^ 1 and a random one / expect every one dropped as DROP_WRONG_NIC and
    // nothing sent back: an RST would carry the Nic's incarnation in its src_nic.
    std::unique_ptr<RawPeer> prober = other_peer(0x1111, 0x00010001);
    const uint64_t incarnation = nic_->addr().incarnation;
    const uint64_t guesses[] = {0, 1, incarnation ^ 1, 0x0123456789abcdefull};
    const Opcode ops[] = {Opcode::kSEND, Opcode::kREAD_REQ, Opcode::kACK, Opcode::kNAK, Opcode::kRST};
    Counters before(*nic_);
    uint32_t sent = 0;
    for (uint64_t guess : guesses) {
        for (Opcode op : ops) {
            for (uint32_t conn : {0u, 0x00010001u}) {
                const bool seq = opcode_info(static_cast<uint8_t>(op)).sequenced;
                PacketHeader h = prober->header(op, 1, conn == 0 && seq ? kFlagSyn | kFlagFirst | kFlagLast
                                                                    : (seq ? kFlagFirst | kFlagLast : 0));
                h.dst_nic = guess;
                h.dst_conn = conn;
                h.dst_qpn = qp_->qpn();
                h.imm = op == Opcode::kNAK ? static_cast<uint32_t>(NakReason::kRnr) : 0;
                if (conn == 0) {
                    h.auth = 0x5eed;   // anything: the incarnation check comes first
                }
                prober->send_bytes(RawPeer::datagram(h, {}));
                ++sent;
            }
        }
    }
    EXPECT_TRUE(progress_until_received(sent).empty());
    EXPECT_EQ(sent, before.delta(SRCNIC_CNT_DROP_WRONG_NIC));
    EXPECT_EQ("", before.other_drops(SRCNIC_CNT_DROP_WRONG_NIC));
    EXPECT_EQ(0u, before.delta(SRCNIC_CNT_TX_PACKETS));
    const std::vector<Packet> back = prober->receive();
    EXPECT_TRUE(back.empty()) << back.size() << " answers, the first " << to_string(back[0].h);
}

TEST_F(Auth, rx_datagram__proved_syn_beyond_the_budget_is_told_use_dc_unproved_is_not)
{
    // fill the Nic's 8 connection slots with proved SYNs from 8 peers
    const uint64_t acks = nic_->counter(SRCNIC_CNT_ACKS_SENT);
    std::vector<std::unique_ptr<RawPeer>> peers;
    for (uint32_t i = 0; i < 8; ++i) {
        post_buffer(10 + i, 64);
        peers.push_back(other_peer(kPeerNic + 100 + i, kPeerConn + 100 + i));
        peers.back()->send(syn_send(*peers.back(), qp_->qpn()));
    }
    for (uint32_t i = 0; i < 8; ++i) {
        srcnic_cqe_t cqe;
        ASSERT_TRUE(await_cqe(qp_, &cqe));
    }
    ASSERT_EQ(8u, nic_->num_connections());
    // and let it acknowledge them (after its ack delay), so that it has nothing left to send
    ASSERT_TRUE(progress_until_counter(SRCNIC_CNT_ACKS_SENT, acks + 8));
    std::unique_ptr<RawPeer> late = other_peer(kPeerNic + 200, kPeerConn + 200);
    // receive a SYN from a ninth peer without proof / expect DROP_BAD_PROOF, no answer, nothing
    // refused
    expect_silent_drop(*late, RawPeer::datagram(syn_send(*late, qp_->qpn()), {}),
                       SRCNIC_CNT_DROP_BAD_PROOF, "unproved");
    // receive it with its proof / expect CONN_REFUSED and a NAK USE_DC to it (it proved it
    // knows us), naming its connection and PSN and no id of ours, and nothing delivered
    Counters before(*nic_);
    late->send(syn_send(*late, qp_->qpn()));
    progress_until_received(1);
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_CONN_REFUSED));
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_USE_DC_SENT));
    std::vector<Packet> back = late->receive();
    ASSERT_EQ(1u, back.size());
    EXPECT_EQ(static_cast<uint8_t>(Opcode::kNAK), back[0].h.opcode);
    EXPECT_EQ(static_cast<uint32_t>(NakReason::kUseDc), back[0].h.imm);
    EXPECT_EQ(kPeerNic + 200, back[0].h.dst_nic);
    EXPECT_EQ(kPeerConn + 200, back[0].h.dst_conn);
    EXPECT_EQ(0u, back[0].h.src_conn);
    EXPECT_EQ(1u, back[0].h.psn);
    EXPECT_EQ(0u, back[0].h.stream);
    // receive the same SYN again / expect USE_DC again, from the closed table: no connection
    // is tried for it (a duplicate must never open one and run what went over DC)
    late->send(syn_send(*late, qp_->qpn()));
    progress_until_received(1);
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_CONN_REFUSED));
    EXPECT_EQ(2u, before.delta(SRCNIC_CNT_USE_DC_SENT));
    back = late->receive();
    ASSERT_EQ(1u, back.size());
    EXPECT_EQ(static_cast<uint32_t>(NakReason::kUseDc), back[0].h.imm);
    EXPECT_EQ(8u, nic_->num_connections());
}

TEST_F(Auth, rx_datagram__peer_of_a_released_connection_is_reset_no_one_else)
{
    open_from_peer();
    const uint32_t old = peer_->nic_conn();
    // receive an RST from peer_ naming the connection / expect it failed and released
    PacketHeader rst = peer_->header(Opcode::kRST, 0, 0);
    rst.src_conn = 0;
    peer_->send(rst);
    progress_until_received(1);
    ASSERT_EQ(0u, nic_->num_connections());
    // receive, from another address with peer_'s identity, SEND psn 2 naming the released
    // connection / expect DROP_WRONG_GEN and silence
    std::unique_ptr<RawPeer> forger = other_peer();
    expect_silent_drop(*forger, RawPeer::datagram(send_on(*forger, old, 2), {}),
                       SRCNIC_CNT_DROP_WRONG_GEN, "another address");
    // receive it from peer_ with another connection id of its own / expect the same
    PacketHeader h = send_on(*peer_, old, 2);
    h.src_conn = kPeerConn + 1;
    expect_silent_drop(*peer_, RawPeer::datagram(h, {}), SRCNIC_CNT_DROP_WRONG_GEN, "other id");
    // receive it from peer_ as it was / expect DROP_WRONG_GEN and an RST naming peer_'s
    // connection: the connection's own peer is told it is gone
    Counters before(*nic_);
    peer_->send(send_on(*peer_, old, 2));
    const std::vector<Packet> out = progress_until_received(1);
    EXPECT_EQ(1u, before.delta(SRCNIC_CNT_DROP_WRONG_GEN));
    ASSERT_EQ(1u, out.size());
    EXPECT_EQ(static_cast<uint8_t>(Opcode::kRST), out[0].h.opcode);
    EXPECT_EQ(kPeerConn, out[0].h.dst_conn);
    EXPECT_EQ(kPeerNic, out[0].h.dst_nic);
}

// --- the whole QP space ---

TEST_F(Auth, rx_datagram__forged_packets_to_qpns_0_to_4096_reach_nothing)
{
    // QPs 1..4 exist with receive buffers, as in a UCP process; peer_ holds a live connection.
    std::vector<Qp *> qps = {qp_};
    srcnic_qp_config_t qc;
    srcnic_qp_config_init(&qc);
    for (int i = 0; i < 3; ++i) {
        Qp *q;
        ASSERT_EQ(SRCNIC_OK, nic_->qp_create(qc, &q));
        qps.push_back(q);
    }
    for (Qp *q : qps) {
        for (uint64_t i = 0; i < 4; ++i) {
            buffers_.emplace_back(256, 0);
            srcnic_recv_wqe_t r = {};
            r.wr_id = 5000 + i;
            r.addr = reinterpret_cast<uint64_t>(buffers_.back().data());
            r.length = 256;
            ASSERT_EQ(SRCNIC_OK, q->post_recv(r));
        }
    }
    open_from_peer();
    const uint32_t live = peer_->nic_conn();
    const uint32_t seed = std::random_device{}();
    std::printf("[ SEED     ] %u\n", seed);
    Random rng(seed);
    // A forger that knows the Nic's incarnation and peer_'s identity and connection (as an
    // observer of the wire would) but not the Nic's secret, at another address. For every QPN
    // 0..4096 it sends: a SYN SEND with a random proof, one with none, a SEND with dst_conn 0
    // and no SYN, a SEND naming a random connection id, and a SEND naming peer_'s live one.
    std::unique_ptr<RawPeer> forger = other_peer();
    Counters before(*nic_);
    uint32_t sent = 0;
    for (uint32_t qpn = 0; qpn <= 4096; ++qpn) {
        PacketHeader h = syn_send(*forger, qpn, 8);
        h.imm = qpn;
        h.auth = rng.next() | 1;
        forger->send_bytes(RawPeer::datagram(h, pattern(8, qpn)));
        h.auth = 0;
        forger->send_bytes(RawPeer::datagram(h, pattern(8, qpn)));
        h.flags &= static_cast<uint16_t>(~kFlagSyn);
        forger->send_bytes(RawPeer::datagram(h, pattern(8, qpn)));
        h.dst_conn = static_cast<uint32_t>(1 + rng.below(8)) | static_cast<uint32_t>(rng.next() & 0xffff) << 16;
        if (h.dst_conn == live) {
            h.dst_conn ^= 1u << 16;
        }
        forger->send_bytes(RawPeer::datagram(h, pattern(8, qpn)));
        h.dst_conn = live;
        forger->send_bytes(RawPeer::datagram(h, pattern(8, qpn)));
        sent += 5;
        if (qpn % 64 == 63 || qpn == 4096) {
            ASSERT_TRUE(progress_until_received(sent - static_cast<uint32_t>(
                                                    before.delta(SRCNIC_CNT_RX_PACKETS))).empty());
        }
    }
    EXPECT_EQ(2u * 4097, before.delta(SRCNIC_CNT_DROP_BAD_PROOF));
    EXPECT_EQ(4097u, before.delta(SRCNIC_CNT_DROP_NO_CONN));
    EXPECT_EQ(4097u, before.delta(SRCNIC_CNT_DROP_WRONG_GEN));
    EXPECT_EQ(4097u, before.delta(SRCNIC_CNT_DROP_WRONG_PEER));
    EXPECT_EQ(0u, before.delta(SRCNIC_CNT_NO_SUCH_QP));
    EXPECT_EQ(0u, before.delta(SRCNIC_CNT_CONN_OPENED));
    EXPECT_EQ(0u, before.delta(SRCNIC_CNT_CONN_FAILED));
    EXPECT_EQ(0u, before.delta(SRCNIC_CNT_RNR_SENT));
    EXPECT_EQ(0u, before.delta(SRCNIC_CNT_TX_PACKETS));
    EXPECT_TRUE(forger->receive().empty());
    for (Qp *q : qps) {
        srcnic_cqe_t cqe;
        EXPECT_EQ(0u, q->poll_cq(&cqe, 1)) << "QP " << q->qpn() << " got a forged message";
    }
    EXPECT_EQ(1u, nic_->num_connections());
    expect_peer_delivers(2);
}

// --- the Nic's own SYN packets ---

TEST_F(Auth, tx_packet__syn_packets_prove_the_peers_secret_until_it_answers)
{
    const srcnic_dest_t dest = dest_to_peer();
    srcnic_wqe_t w = {};
    w.opcode = SRCNIC_OP_SEND;
    w.dest = dest;
    w.flags = SRCNIC_WQE_FLAG_INLINE;
    w.inline_len = 8;
    // post a SEND / expect psn 1 with SYN, dst_conn 0 and the proof of the raw peer's secret
    // from the Nic's address (RawPeer::receive checks every SYN's proof; checked here too)
    w.wr_id = 1;
    ASSERT_EQ(SRCNIC_OK, qp_->post_send(w));
    Packet p;
    ASSERT_TRUE(await_psn(1, &p));
    EXPECT_NE(0, p.h.flags & kFlagSyn);
    EXPECT_EQ(0u, p.h.dst_conn);
    const SipKey peer_key = nic_key(RawPeer::secret_of(kPeerNic), kPeerNic);
    LinkAddr nic_link = nic_->link().local_addr();
    EXPECT_EQ(syn_proof(peer_key, p.h, nic_link), p.h.auth);
    // its retransmission, which carries ACK_REQ, has a proof of its own header
    Packet again;
    ASSERT_TRUE(await([](const Packet &q) { return q.h.psn == 1 && (q.h.flags & kFlagAckReq); }, &again));
    EXPECT_EQ(syn_proof(peer_key, again.h, nic_link), again.h.auth);
    // receive the peer's ACK (the Nic learns its id) and post another / expect psn 2 with no
    // SYN and no auth
    peer_->nic_conn(p.h.src_conn);
    ack_nic(2, 1);
    srcnic_cqe_t cqe;
    ASSERT_TRUE(await_cqe(qp_, &cqe));
    w.wr_id = 2;
    ASSERT_EQ(SRCNIC_OK, qp_->post_send(w));
    ASSERT_TRUE(await_psn(2, &p));
    EXPECT_EQ(0, p.h.flags & kFlagSyn);
    EXPECT_EQ(kPeerConn, p.h.dst_conn);
    EXPECT_EQ(0u, p.h.auth);
}

TEST_F(Auth, conn_open__generations_of_a_slot_are_distinct_and_unordered)
{
    // open and reset the connection from peer_ 300 times (the Nic reuses the same slot) and
    // collect the generations of the ids it hands out / expect 300 distinct ones, not a
    // progression: a peer that saw one cannot tell the next
    std::vector<uint32_t> gens;
    std::set<uint32_t> seen;
    uint32_t slot = 0;
    for (uint32_t i = 0; i < 300; ++i) {
        PacketHeader h = syn_send(*peer_, qp_->qpn());
        h.flags &= static_cast<uint16_t>(~kFlagFirst & ~kFlagLast);
        h.opcode = static_cast<uint8_t>(Opcode::kNOP);
        peer_->send(h);
        Packet ack;
        ASSERT_TRUE(await([](const Packet &q) { return q.h.ack_psn == 2; }, &ack));
        const uint32_t id = ack.h.src_conn;
        if (slot == 0) {
            slot = id & 0xffff;
        }
        ASSERT_EQ(slot, id & 0xffff) << "the slot changed";
        gens.push_back(id >> 16);
        seen.insert(id >> 16);
        PacketHeader rst = peer_->header(Opcode::kRST, 0, 0);
        rst.src_conn = 0;
        rst.dst_conn = id;
        peer_->send(rst);
        progress_until_received(1);
        ASSERT_EQ(0u, nic_->num_connections());
        pending_.clear();
    }
    EXPECT_EQ(gens.size(), seen.size());
    uint32_t steady = 0;   // consecutive steps equal to the one before
    for (size_t i = 2; i < gens.size(); ++i) {
        steady += ((gens[i] - gens[i - 1]) & 0xffff) == ((gens[i - 1] - gens[i - 2]) & 0xffff);
    }
    EXPECT_LT(steady, 5u) << "generations follow a progression";
}

} // namespace
} // namespace test
} // namespace srcnic
