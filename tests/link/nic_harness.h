// Test harness for engine tests: Nics over an in-memory loopback fabric or over UDP on 127.0.0.1,
// each behind a faulty link, a bounded progress loop (watchdog, never a bare sleep), and helpers
// to post work and collect completions.
#ifndef SRCNIC_TESTS_LINK_NIC_HARNESS_H
#define SRCNIC_TESTS_LINK_NIC_HARNESS_H

#include "core/clock.h"
#include "core/random.h"
#include "link/faulty_link.h"
#include "link/loopback_link.h"
#include "link/udp_link.h"
#include "nic/nic.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <vector>

namespace srcnic {
namespace test {

// Progresses every Nic until done() or the watchdog expires; returns done().
inline bool progress_until(const std::vector<Nic *> &nics, const std::function<bool()> &done,
                           double seconds = 60.0)
{
    const uint64_t deadline = now_ns() + static_cast<uint64_t>(seconds * 1e9);
    while (!done()) {
        if (now_ns() > deadline) {
            return false;
        }
        for (Nic *nic : nics) {
            nic->progress();
        }
    }
    return true;
}

inline srcnic_config_t test_config()
{
    srcnic_config_t config;
    srcnic_config_init(&config);
    config.rto_us = 2000;
    config.rto_max_us = 50000;
    config.peer_timeout_ms = 30000;
    config.retry_count = 50;
    return config;
}

// Nics, each behind a FaultyLink (faults off until set_config), over links a subclass opens.
class FaultyNics {
public:
    virtual ~FaultyNics() = default;

    Nic *nic(size_t i) { return nics_[i].get(); }
    FaultyLink *faulty(size_t i) { return faulty_[i]; }
    std::vector<Nic *> all()
    {
        std::vector<Nic *> v;
        for (auto &n : nics_) {
            if (n) {
                v.push_back(n.get());
            }
        }
        return v;
    }
    // Destroys Nic i (its link and port go away with it).
    void kill(size_t i)
    {
        nics_[i].reset();
        faulty_[i] = nullptr;
    }

protected:
    Nic *add_over(std::unique_ptr<Link> link, const srcnic_config_t &config, uint64_t seed)
    {
        FaultyLinkConfig fc;
        fc.seed = seed;
        std::unique_ptr<FaultyLink> faulty;
        EXPECT_EQ(SRCNIC_OK, FaultyLink::open(std::move(link), fc, &faulty));
        faulty_.push_back(faulty.get());
        std::unique_ptr<Nic> nic;
        EXPECT_EQ(SRCNIC_OK, Nic::create(config, std::move(faulty), &nic));
        nics_.push_back(std::move(nic));
        return nics_.back().get();
    }

private:
    std::vector<std::unique_ptr<Nic>> nics_;
    std::vector<FaultyLink *> faulty_;
};

// A pair (or more) of Nics joined by one loopback fabric, each behind a FaultyLink.
class LoopbackNics : public FaultyNics {
public:
    explicit LoopbackNics(size_t n, const srcnic_config_t &config = test_config(),
                          uint32_t mtu = 8192, uint64_t seed = 1)
    {
        EXPECT_EQ(SRCNIC_OK, LoopbackFabric::create(mtu, 4096, &fabric_));
        for (size_t i = 0; i < n; ++i) {
            add(config, seed + i);
        }
    }

    Nic *add(const srcnic_config_t &config, uint64_t seed, uint16_t port = 0)
    {
        std::unique_ptr<Link> link;
        EXPECT_EQ(SRCNIC_OK, fabric_->open_link(port, &link));
        return add_over(std::move(link), config, seed);
    }

    std::shared_ptr<LoopbackFabric> fabric() { return fabric_; }

private:
    std::shared_ptr<LoopbackFabric> fabric_;
};

// Nics over real UDP sockets on 127.0.0.1 (ephemeral ports), each behind a FaultyLink.
class UdpNics : public FaultyNics {
public:
    explicit UdpNics(size_t n, const srcnic_config_t &config = test_config(), uint64_t seed = 1)
    {
        UdpLinkConfig udp;
        EXPECT_EQ(SRCNIC_OK, LinkAddr::from_ip("127.0.0.1", 0, &udp.bind_addr));
        udp.sock_buf_size = config.sock_buf;
        udp.peer_sockets = config.peer_sockets;
        for (size_t i = 0; i < n; ++i) {
            std::unique_ptr<Link> link;
            EXPECT_EQ(SRCNIC_OK, UdpLink::open(udp, &link));
            add_over(std::move(link), config, seed + i);
        }
    }
};

inline srcnic_wqe_t make_send(srcnic_dest_t dest, uint64_t wr_id, const void *buf, uint32_t len,
                              uint32_t imm = 0)
{
    srcnic_wqe_t w = {};
    w.wr_id = wr_id;
    w.opcode = SRCNIC_OP_SEND;
    w.imm = imm;
    w.dest = dest;
    if (len <= SRCNIC_WQE_INLINE_MAX && len % 3 == 0) {
        // Exercise both forms: inline for some small messages, gather for the rest.
        w.flags = SRCNIC_WQE_FLAG_INLINE;
        w.inline_len = len;
        if (len != 0) {
            std::memcpy(w.u.inline_data, buf, len);
        }
    } else {
        w.num_sge = 1;
        w.u.sge[0].addr = reinterpret_cast<uint64_t>(buf);
        w.u.sge[0].length = len;
    }
    return w;
}

inline srcnic_wqe_t make_rdma(srcnic_opcode_t op, srcnic_dest_t dest, uint64_t wr_id, void *local,
                              uint32_t len, uint64_t remote_addr, uint64_t rkey)
{
    srcnic_wqe_t w = {};
    w.wr_id = wr_id;
    w.opcode = op;
    w.dest = dest;
    w.num_sge = 1;
    w.u.sge[0].addr = reinterpret_cast<uint64_t>(local);
    w.u.sge[0].length = len;
    w.remote_addr = remote_addr;
    w.rkey = rkey;
    return w;
}

inline srcnic_recv_wqe_t make_recv(uint64_t wr_id, void *buf, uint32_t len)
{
    srcnic_recv_wqe_t r = {};
    r.wr_id = wr_id;
    r.addr = reinterpret_cast<uint64_t>(buf);
    r.length = len;
    return r;
}

// Polls one completion, progressing all Nics until it comes (watchdog: seconds).
inline bool poll_one(const std::vector<Nic *> &nics, Qp *qp, srcnic_cqe_t *cqe, double seconds = 30.0)
{
    return progress_until(nics, [&] { return qp->poll_cq(cqe, 1) == 1; }, seconds);
}

} // namespace test
} // namespace srcnic

#endif
