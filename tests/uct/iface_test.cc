// The src interface and endpoint basics through the public UCT API: advertised capabilities,
// the memory domain, reachability, endpoint creation (sends nothing, fails only when used),
// ep_check, fence and the size of an endpoint.
#include "uct/src_internal.h"
#include "uct/uct_src_fixture.h"

#include <ucs/config/global_opts.h>
#include <ucs/debug/log_def.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <sstream>

namespace uct_src_test {
namespace {

std::string flag_names(uint64_t flags)
{
    static const std::pair<uint64_t, const char *> kNames[] = {
        {UCT_IFACE_FLAG_AM_SHORT, "AM_SHORT"},
        {UCT_IFACE_FLAG_AM_BCOPY, "AM_BCOPY"},
        {UCT_IFACE_FLAG_AM_ZCOPY, "AM_ZCOPY"},
        {UCT_IFACE_FLAG_PENDING, "PENDING"},
        {UCT_IFACE_FLAG_PUT_SHORT, "PUT_SHORT"},
        {UCT_IFACE_FLAG_PUT_BCOPY, "PUT_BCOPY"},
        {UCT_IFACE_FLAG_PUT_ZCOPY, "PUT_ZCOPY"},
        {UCT_IFACE_FLAG_GET_SHORT, "GET_SHORT"},
        {UCT_IFACE_FLAG_GET_BCOPY, "GET_BCOPY"},
        {UCT_IFACE_FLAG_GET_ZCOPY, "GET_ZCOPY"},
        {UCT_IFACE_FLAG_ATOMIC_CPU, "ATOMIC_CPU"},
        {UCT_IFACE_FLAG_ATOMIC_DEVICE, "ATOMIC_DEVICE"},
        {UCT_IFACE_FLAG_ERRHANDLE_SHORT_BUF, "ERRHANDLE_SHORT_BUF"},
        {UCT_IFACE_FLAG_ERRHANDLE_BCOPY_BUF, "ERRHANDLE_BCOPY_BUF"},
        {UCT_IFACE_FLAG_ERRHANDLE_ZCOPY_BUF, "ERRHANDLE_ZCOPY_BUF"},
        {UCT_IFACE_FLAG_ERRHANDLE_AM_ID, "ERRHANDLE_AM_ID"},
        {UCT_IFACE_FLAG_ERRHANDLE_REMOTE_MEM, "ERRHANDLE_REMOTE_MEM"},
        {UCT_IFACE_FLAG_ERRHANDLE_BCOPY_LEN, "ERRHANDLE_BCOPY_LEN"},
        {UCT_IFACE_FLAG_ERRHANDLE_PEER_FAILURE, "ERRHANDLE_PEER_FAILURE"},
        {UCT_IFACE_FLAG_EP_CHECK, "EP_CHECK"},
        {UCT_IFACE_FLAG_CONNECT_TO_IFACE, "CONNECT_TO_IFACE"},
        {UCT_IFACE_FLAG_CONNECT_TO_EP, "CONNECT_TO_EP"},
        {UCT_IFACE_FLAG_CONNECT_TO_SOCKADDR, "CONNECT_TO_SOCKADDR"},
        {UCT_IFACE_FLAG_AM_DUP, "AM_DUP"},
        {UCT_IFACE_FLAG_CB_SYNC, "CB_SYNC"},
        {UCT_IFACE_FLAG_CB_ASYNC, "CB_ASYNC"},
        {UCT_IFACE_FLAG_EP_KEEPALIVE, "EP_KEEPALIVE"},
        {UCT_IFACE_FLAG_TAG_EAGER_SHORT, "TAG_EAGER_SHORT"},
        {UCT_IFACE_FLAG_TAG_EAGER_BCOPY, "TAG_EAGER_BCOPY"},
        {UCT_IFACE_FLAG_TAG_EAGER_ZCOPY, "TAG_EAGER_ZCOPY"},
        {UCT_IFACE_FLAG_TAG_RNDV_ZCOPY, "TAG_RNDV_ZCOPY"},
    };
    std::ostringstream os;
    for (const auto &n : kNames) {
        if (flags & n.first) {
            os << n.second << " ";
            flags &= ~n.first;
        }
    }
    if (flags != 0) {
        os << "0x" << std::hex << flags;
    }
    return os.str();
}

// (On lo: no UCT_IFACE_FLAG_INTER_NODE, which a network device's interface has where UCX defines
// it; tests/cluster/netns_mpi.sh needs it under Open MPI 5.)
TEST_F(UctSrc, iface_query__caps_flags_advertised_exactly)
{
    const uint64_t expected = UCT_IFACE_FLAG_CONNECT_TO_IFACE |
                              UCT_IFACE_FLAG_AM_SHORT | UCT_IFACE_FLAG_AM_BCOPY |
                              UCT_IFACE_FLAG_AM_ZCOPY |
                              UCT_IFACE_FLAG_PUT_SHORT | UCT_IFACE_FLAG_PUT_BCOPY |
                              UCT_IFACE_FLAG_PUT_ZCOPY |
                              UCT_IFACE_FLAG_GET_BCOPY | UCT_IFACE_FLAG_GET_ZCOPY |
                              UCT_IFACE_FLAG_PENDING | UCT_IFACE_FLAG_CB_SYNC |
                              UCT_IFACE_FLAG_ERRHANDLE_PEER_FAILURE | UCT_IFACE_FLAG_EP_CHECK;
    const uint64_t got = a_.attr.cap.flags;
    EXPECT_EQ(expected, got) << "missing: " << flag_names(expected & ~got)
                             << "; unexpected: " << flag_names(got & ~expected);
}

TEST_F(UctSrc, iface_query__event_flags_and_unlimited_eps)
{
    EXPECT_EQ(UCT_IFACE_FLAG_EVENT_SEND_COMP | UCT_IFACE_FLAG_EVENT_RECV |
                  UCT_IFACE_FLAG_EVENT_FD,
              a_.attr.cap.event_flags);
    EXPECT_EQ(static_cast<size_t>(-1), a_.attr.max_num_eps) << "max_num_eps must be unlimited";
    EXPECT_GT(a_.attr.device_addr_len, 0u);
    EXPECT_GT(a_.attr.iface_addr_len, 0u);
    EXPECT_EQ(0u, a_.attr.ep_addr_len) << "CONNECT_TO_IFACE only: no ep address";
}

// Without DC an embedded engine's budget is a wall: UCP must not take it for a transport that
// scales to any job (ucp_is_scalable_transport compares max_num_eps with the job's size).
class UctSrcNoDc : public UctSrc {
protected:
    std::vector<ConfigKv> config_for(int side) const override
    {
        return {{"NUM_DCI", "0"}, {"MAX_CONNECTIONS", "8"}};
    }
};

TEST_F(UctSrcNoDc, iface_query__without_dc_max_num_eps_is_the_budget)
{
    // (The node agent's engine is configured by srcd, with its own budget per node.)
    EXPECT_EQ(agent_mode() ? static_cast<size_t>(-1) : 8u, a_.attr.max_num_eps);
}

// A message with UCP's header (up to 40 bytes for a synchronous send's first fragment) must fit
// one fragment at the sizes MPI codes and OSU use most: with 8 KiB fragments an 8 KiB message
// went as two (MPI latency at 8 KiB 17.2 us against 10.8, perf/results/seg-compare/NOTES.md);
// every fragment is a message of the engine, a datagram and a completion, so a 1 MiB UCP stream
// went as 64 with 16 KiB fragments (perf/results/2026-11-27-streams/NOTES.md); and with exactly
// 32 KiB a 32 KiB message went as a full fragment and a 40-byte one, whose lone short datagram
// ended the offload group at every message across an interface (osu_bw 32 KiB 2.0-2.3 GB/s
// against 3.0-3.8 with the 64 bytes more, perf/results/2026-12-03-seg-runt/NOTES.md).
TEST_F(UctSrc, iface_query__default_fragment_holds_a_32k_message_and_its_header)
{
    EXPECT_GE(a_.attr.cap.am.max_bcopy, 32768u + 64u);
    EXPECT_GE(a_.attr.cap.am.max_zcopy, 32768u + 64u);
}

TEST_F(UctSrc, iface_query__sizes_consistent)
{
    const uct_iface_attr_t &attr = a_.attr;
    EXPECT_GE(attr.cap.am.max_short, sizeof(uint64_t)) << "am_short carries an 8-byte header";
    EXPECT_GE(attr.cap.am.max_bcopy, 64u) << "UCP needs at least UCP_MIN_BCOPY";
    EXPECT_GE(attr.cap.am.max_zcopy, attr.cap.am.max_hdr);
    EXPECT_GE(attr.cap.am.max_iov, 1u);
    EXPECT_GE(attr.cap.put.max_zcopy, 8u << 20) << "rendezvous needs large RMA";
    EXPECT_GE(attr.cap.get.max_zcopy, 8u << 20);
    EXPECT_GE(attr.cap.put.max_iov, 1u);
    EXPECT_GE(attr.cap.get.max_iov, 1u);
    EXPECT_GT(attr.bandwidth.dedicated + attr.bandwidth.shared, 0.0);
    EXPECT_GT(attr.latency.c, 0.0);
    // Both ifaces on one device advertise the same.
    EXPECT_EQ(0, std::memcmp(&a_.attr.cap, &b_.attr.cap, sizeof(a_.attr.cap)));
}

TEST_F(UctSrc, md_query__registration_rkeys_and_invalidation)
{
    uct_md_attr_t attr;
    ASSERT_EQ(UCS_OK, uct_md_query(md_a_, &attr));
    EXPECT_TRUE(attr.cap.flags & UCT_MD_FLAG_REG);
    EXPECT_TRUE(attr.cap.flags & UCT_MD_FLAG_NEED_RKEY);
    EXPECT_TRUE(uct_src_test_md_invalidates_rma(md_a_))
        << "RMA_BW lanes with peer error handling need RMA invalidation";
    EXPECT_TRUE(attr.cap.reg_mem_types & UCS_BIT(UCS_MEMORY_TYPE_HOST));
    EXPECT_GT(attr.rkey_packed_size, 0u);
}

// Registrations of one range share a record: an invalidating deregistration completes when
// the last registration of that range is gone, and other ranges (also one starting at the
// same address) do not hold it back. Many ranges at once exercise the table's growth.
TEST_F(UctSrc, mem_dereg__invalidate_completes_with_the_last_registration_of_the_range)
{
    std::vector<uint8_t> buf(64 * 1024);
    auto reg = [&](size_t offset, size_t length) {
        uct_mem_h memh = UCT_MEM_HANDLE_NULL;
        EXPECT_EQ(UCS_OK, uct_md_mem_reg(md_a_, buf.data() + offset, length,
                                        UCT_MD_MEM_ACCESS_ALL, &memh));
        return memh;
    };
    auto dereg = [&](uct_mem_h memh, Completion *comp) {
        if (comp != nullptr) {
            uint64_t rkey;
            EXPECT_EQ(UCS_OK, uct_src_test_mkey_pack_invalidate(md_a_, memh, &rkey));
            EXPECT_EQ(UCS_OK, uct_src_test_mem_dereg_invalidate(md_a_, memh, &comp->uct));
        } else {
            EXPECT_EQ(UCS_OK, uct_md_mem_dereg(md_a_, memh));
        }
    };

    // 1000 other ranges around the one under test
    std::vector<uct_mem_h> others;
    for (size_t i = 0; i < 1000; ++i) {
        others.push_back(reg(i * 8, 16 + i % 7));
    }
    uct_mem_h first = reg(4096, 8192);
    uct_mem_h second = reg(4096, 8192);
    uct_mem_h longer = reg(4096, 8193);   // same start, another range
    Completion &comp = completion();
    dereg(first, &comp);
    EXPECT_EQ(0, comp.fired) << "completed while the range is still registered";
    dereg(longer, nullptr);
    EXPECT_EQ(0, comp.fired) << "another range released this one";
    dereg(second, nullptr);
    EXPECT_EQ(1, comp.fired);
    EXPECT_EQ(UCS_OK, comp.status);
    for (uct_mem_h memh : others) {
        dereg(memh, nullptr);
    }
}

// UCX 1.18's contract for invalidating deregistration (what its test_md.dereg_bad_arg checks):
// refused, with the registration left as it was, when the rkey was not packed for it
// (INVALID_PARAM) or the registration is for remote atomics alone (UNSUPPORTED: the md does not
// claim UCT_MD_FLAG_INVALIDATE_AMO). A registration for everything, as UCP makes, is
// invalidated once its key was packed for it. UCX 1.13 has no such contract: there the
// deregistration goes through unpacked.
TEST_F(UctSrc, mem_dereg__invalidate_needs_the_rkey_packed_for_it)
{
    std::vector<uint8_t> buf(4096);
    uint64_t rkey;
    auto reg = [&](uint64_t access) {
        uct_mem_h memh = UCT_MEM_HANDLE_NULL;
        EXPECT_EQ(UCS_OK, uct_md_mem_reg(md_a_, buf.data(), buf.size(), access, &memh));
        return memh;
    };

    if (!uct_src_test_dereg_invalidate_checks()) {
        uct_mem_h memh = reg(UCT_MD_MEM_ACCESS_REMOTE_PUT | UCT_MD_MEM_ACCESS_REMOTE_GET);
        Completion &comp = completion();
        EXPECT_EQ(UCS_OK, uct_src_test_mem_dereg_invalidate(md_a_, memh, &comp.uct));
        EXPECT_EQ(1, comp.fired);
        return;
    }

    uct_mem_h rma = reg(UCT_MD_MEM_ACCESS_REMOTE_PUT | UCT_MD_MEM_ACCESS_REMOTE_GET);
    ASSERT_EQ(UCS_OK, uct_md_mkey_pack(md_a_, rma, &rkey));   // without the flag
    Completion &refused = completion();
    // (ASSERT: had it gone through, the memh would be freed and the rest would use it.)
    ASSERT_EQ(UCS_ERR_INVALID_PARAM, uct_src_test_mem_dereg_invalidate(md_a_, rma, &refused.uct));
    EXPECT_EQ(0, refused.fired);
    // Still registered: packed for invalidation now, it is deregistered and invalidated.
    ASSERT_EQ(UCS_OK, uct_src_test_mkey_pack_invalidate(md_a_, rma, &rkey));
    Completion &done = completion();
    EXPECT_EQ(UCS_OK, uct_src_test_mem_dereg_invalidate(md_a_, rma, &done.uct));
    EXPECT_EQ(1, done.fired);
    EXPECT_EQ(UCS_OK, done.status);
    EXPECT_EQ(0, refused.fired);

    uct_mem_h amo = reg(UCT_MD_MEM_ACCESS_REMOTE_ATOMIC);
    ASSERT_EQ(UCS_OK, uct_src_test_mkey_pack_invalidate(md_a_, amo, &rkey));
    Completion &unsupported = completion();
    ASSERT_EQ(UCS_ERR_UNSUPPORTED,
              uct_src_test_mem_dereg_invalidate(md_a_, amo, &unsupported.uct));
    EXPECT_EQ(0, unsupported.fired);
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(md_a_, amo));

    uct_mem_h all = reg(UCT_MD_MEM_ACCESS_ALL);
    ASSERT_EQ(UCS_OK, uct_src_test_mkey_pack_invalidate(md_a_, all, &rkey));
    Completion &all_done = completion();
    EXPECT_EQ(UCS_OK, uct_src_test_mem_dereg_invalidate(md_a_, all, &all_done.uct));
    EXPECT_EQ(1, all_done.fired);
    EXPECT_EQ(0, unsupported.fired);
}

TEST_F(UctSrc, iface_is_reachable__loopback_peer)
{
    EXPECT_TRUE(uct_iface_is_reachable(a_.iface, b_.dev(), b_.addr()));
    EXPECT_TRUE(uct_iface_is_reachable(b_.iface, a_.dev(), a_.addr()));
    EXPECT_TRUE(uct_iface_is_reachable(a_.iface, a_.dev(), a_.addr())) << "ep to self";
}

TEST_F(UctSrc, ep_create__sends_nothing)
{
    // Let the fixture's endpoints settle: creating them must not have sent anything either.
    progress_for(0.05);
    const uint64_t tx_before = uct_src_test_counter(a_.iface, "TX_PACKETS");
    const uint64_t rx_before = uct_src_test_counter(b_.iface, "RX_PACKETS");
    ASSERT_NE(UINT64_MAX, tx_before) << "no TX_PACKETS counter";
    // An ep may reserve its peer's slot in the engine, one per remote engine, never one per ep.
    const unsigned conns_a = uct_src_test_num_connections(a_.iface);
    const unsigned conns_b = uct_src_test_num_connections(b_.iface);
    // An embedded engine is this test's own. The node agent's is shared with every test before
    // this one (in whatever order the build registered them: GCC 14's build runs the active
    // message tests first): its counters and connections are theirs too, so only the changes
    // below count there.
    if (!agent_mode()) {
        EXPECT_EQ(0u, tx_before) << "the fixture's ep_create sent packets";
        EXPECT_LE(conns_a, 1u);
    }

    std::vector<uct_ep_h> eps;
    for (int i = 0; i < 100; ++i) {
        eps.push_back(create_ep(&a_, b_));
        ASSERT_NE(nullptr, eps.back());
        extra_eps_.push_back(eps.back());
    }
    progress_for(0.1);
    EXPECT_EQ(tx_before, uct_src_test_counter(a_.iface, "TX_PACKETS"));
    EXPECT_EQ(rx_before, uct_src_test_counter(b_.iface, "RX_PACKETS"));
    EXPECT_EQ(conns_a, uct_src_test_num_connections(a_.iface)) << "100 eps to one peer";
    EXPECT_EQ(conns_b, uct_src_test_num_connections(b_.iface));
    EXPECT_TRUE(b_.rx.empty());

    // The first send on any of them opens one connection, shared by all. (With the node agent,
    // a and b share its engine, which places a message between them without packets, as a NIC
    // loops it back, and opens no connection for it.)
    const uint64_t hdr = 42;
    const uint64_t local_before = uct_src_test_counter(a_.iface, "LOCAL_SENDS");
    ASSERT_EQ(UCS_OK, am_short(eps[17], hdr, kNoPayload, 0));
    ASSERT_EQ(UCS_OK, am_short(eps[93], hdr + 1, kNoPayload, 0));
    ASSERT_TRUE(wait_for([&] { return b_.rx.size() == 2; }));
    if (agent_mode()) {
        EXPECT_LE(local_before + 2, uct_src_test_counter(a_.iface, "LOCAL_SENDS"));
        EXPECT_EQ(conns_a, uct_src_test_num_connections(a_.iface));
    } else {
        EXPECT_GT(uct_src_test_counter(a_.iface, "TX_PACKETS"), tx_before);
        EXPECT_EQ(1u, uct_src_test_num_connections(a_.iface));
    }
}

// --- the engine's messages in UCX's log ---

namespace {

std::vector<std::pair<ucs_log_level_t, std::string>> g_engine_messages;

ucs_log_func_rc_t engine_message_handler(const char *file, unsigned line, const char *function,
                                         ucs_log_level_t level,
                                         const ucs_log_component_config_t *comp_conf,
                                         const char *message, va_list ap)
{
    if (std::strcmp(function, "srcnic") == 0) {
        char text[512];
        va_list copy;
        va_copy(copy, ap);
        std::vsnprintf(text, sizeof(text), message, copy);
        va_end(copy);
        g_engine_messages.emplace_back(level, std::string(file) + ": " + text);
    }
    return UCS_LOG_FUNC_RC_CONTINUE;
}

} // namespace

TEST_F(UctSrc, log__engine_messages_reach_ucx_log_at_ucx_log_level)
{
    UCT_SRC_SKIP_WITH_AGENT("the engine runs in srcd, which logs on its own (srcd --log-level)");
    ASSERT_EQ(nullptr, std::getenv("SRCNIC_LOG_LEVEL"))
        << "SRCNIC_LOG_LEVEL gives the engine its own log on stderr: unset it for this test";
    // An iface whose socket buffer holds fewer datagrams than the window: the engine says so at
    // info level, once for the iface.
    const std::vector<ConfigKv> small = {{"SOCK_BUF", "212992"}};
    auto open_and_close = [&](ucs_log_level_t level) {
        const ucs_log_level_t saved = ucs_global_opts.log_component.log_level;
        ucs_global_opts.log_component.log_level = level;
        g_engine_messages.clear();
        ucs_log_push_handler(engine_message_handler);
        Side side;
        side.name = "small";
        open_side(&side, md_b_, small);
        close_side(&side);
        ucs_log_pop_handler();
        ucs_global_opts.log_component.log_level = saved;
    };
    open_and_close(UCS_LOG_LEVEL_INFO);
    bool found = false;
    for (const auto &m : g_engine_messages) {
        std::printf("engine: %s %s\n", ucs_log_level_names[m.first], m.second.c_str());
        found |= m.first == UCS_LOG_LEVEL_INFO && m.second.find("receive queue holds") != std::string::npos;
    }
    EXPECT_TRUE(found) << "the engine's info message did not reach UCX's log at UCX_LOG_LEVEL=info";
    // At warn (UCX's default) the engine does not even format it.
    open_and_close(UCS_LOG_LEVEL_WARN);
    EXPECT_TRUE(g_engine_messages.empty()) << g_engine_messages.front().second;
}

// Peer a declares a silent peer dead after 1 s.
class UctSrcShortTimeout : public UctSrc {
protected:
    std::vector<ConfigKv> config_for(int side) const override
    {
        return {{"PEER_TIMEOUT", "1s"}};
    }
};

TEST_F(UctSrcShortTimeout, ep_create__to_absent_peer_fails_only_when_used)
{
    uct_ep_h ep = create_ep_to_closed_iface(&a_);
    ASSERT_NE(nullptr, ep) << "creating an ep must not contact the peer";
    // The failure goes to the error handler, not to UCX's log as a warning (the fixture fails
    // on one, as UCX's own UCT tests do): no ExpectErrors here.
    progress_for(1.5);
    EXPECT_EQ(0u, a_.num_errors()) << "an unused ep to an absent peer must not fail";

    const uint64_t hdr = 7;
    ASSERT_EQ(UCS_OK, uct_ep_am_short(ep, kAmId, hdr, kNoPayload, 0));
    const double start = now_sec();
    ASSERT_TRUE(wait_for([&] { return a_.num_errors() > 0; }, 15.0))
        << "no error reported for a send to an absent peer";
    const double elapsed = now_sec() - start;
    EXPECT_LT(elapsed, 5.0) << "PEER_TIMEOUT is 1 s";
    {
        std::lock_guard<std::mutex> guard(a_.errors_lock);
        ASSERT_EQ(1u, a_.errors.size());
        EXPECT_EQ(ep, a_.errors[0].ep);
        EXPECT_TRUE(a_.errors[0].status == UCS_ERR_ENDPOINT_TIMEOUT ||
                    a_.errors[0].status == UCS_ERR_CONNECTION_RESET)
            << ucs_status_string(a_.errors[0].status);
        a_.errors.clear();
    }
    // The failed ep stays valid: sends fail, flush(CANCEL) and destroy work.
    ucs_status_t status = uct_ep_am_short(ep, kAmId, hdr, kNoPayload, 0);
    EXPECT_TRUE(UCS_STATUS_IS_ERR(status) && status != UCS_ERR_NO_RESOURCE)
        << ucs_status_string(status);
    Completion &comp = completion();
    status = uct_ep_flush(ep, UCT_FLUSH_FLAG_CANCEL, &comp.uct);
    if (status == UCS_INPROGRESS) {
        ASSERT_TRUE(wait_for([&] { return comp.fired > 0; }));
    } else {
        EXPECT_EQ(UCS_OK, status);
    }
    destroy_ep(ep);
    // The other eps of a are unaffected.
    ASSERT_EQ(UCS_OK, am_short(ep_ab_, hdr, kNoPayload, 0));
    ASSERT_TRUE(wait_for([&] { return b_.rx.size() == 1; }));
    EXPECT_EQ(0u, a_.num_errors());
}

TEST_F(UctSrcShortTimeout, ep_check__absent_peer_reported)
{
    uct_ep_h ep = create_ep_to_closed_iface(&a_);
    ASSERT_NE(nullptr, ep);
    // The failure goes to the error handler, not to UCX's log as a warning (the fixture fails
    // on one, as UCX's own UCT tests do): no ExpectErrors here.
    ASSERT_EQ(UCS_OK, uct_ep_check(ep, 0, nullptr));
    ASSERT_TRUE(wait_for([&] { return a_.num_errors() > 0; }, 15.0))
        << "ep_check did not detect the absent peer";
    std::lock_guard<std::mutex> guard(a_.errors_lock);
    EXPECT_EQ(ep, a_.errors[0].ep);
    a_.errors.clear();
}

TEST_F(UctSrc, ep_check__live_peer_ok_nothing_fails)
{
    for (int i = 0; i < 10; ++i) {
        ucs_status_t status;
        ASSERT_TRUE(wait_for([&] {
            status = uct_ep_check(ep_ab_, 0, nullptr);
            return status != UCS_ERR_NO_RESOURCE;
        }));
        ASSERT_EQ(UCS_OK, status);
    }
    flush_ep(ep_ab_);
    progress_for(0.2);
    EXPECT_EQ(0u, a_.num_errors());
    EXPECT_EQ(0u, b_.num_errors());
    EXPECT_TRUE(b_.rx.empty()) << "a probe must not be delivered as an active message";
    // The ep still works.
    const uint64_t hdr = 99;
    ASSERT_EQ(UCS_OK, am_short(ep_ab_, hdr, kNoPayload, 0));
    ASSERT_TRUE(wait_for([&] { return b_.rx.size() == 1; }));
}

TEST_F(UctSrc, ep_fence__returns_ok)
{
    EXPECT_EQ(UCS_OK, uct_ep_fence(ep_ab_, 0));
    EXPECT_EQ(UCS_OK, uct_iface_fence(a_.iface, 0));
    // Fenced between sends: order is kept.
    for (uint64_t i = 0; i < 20; ++i) {
        ASSERT_EQ(UCS_OK, am_short(ep_ab_, i, kNoPayload, 0));
        ASSERT_EQ(UCS_OK, uct_ep_fence(ep_ab_, 0));
    }
    ASSERT_TRUE(wait_for([&] { return b_.rx.size() == 20; }));
    for (uint64_t i = 0; i < 20; ++i) {
        uint64_t got;
        std::memcpy(&got, b_.rx[i].data.data(), sizeof(got));
        EXPECT_EQ(i, got);
    }
}

// A growing endpoint is a scalability regression: every process holds one per peer and lane.
// 104: 88 until the endpoint kept the remote engine's address, port and incarnation, with which
// it answers UCX's ep_is_connected (UCX 1.16 and later) exactly.
TEST(UctSrcSize, ep_size__endpoint_stays_small)
{
    const size_t size = uct_src_test_ep_size();
    ::testing::Test::RecordProperty("sizeof_uct_src_ep_t", std::to_string(size));
    EXPECT_LE(size, 104u) << "sizeof(uct_src_ep_t) grew to " << size << " bytes";
}

}  // namespace
}  // namespace uct_src_test
