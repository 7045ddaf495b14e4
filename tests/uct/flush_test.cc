// Flush over src: OK when idle, INPROGRESS with a completion that fires only once the peer has
// acknowledged, the iface flush, NO_RESOURCE behind pending requests, and UCT_FLUSH_FLAG_CANCEL
// completing outstanding zcopy operations with UCS_ERR_CANCELED at once.
#include "uct/src_internal.h"
#include "uct/uct_src_fixture.h"

#include <cstring>

namespace uct_src_test {
namespace {

TEST_F(UctSrc, ep_flush__idle_returns_ok)
{
    Completion &comp = completion();
    EXPECT_EQ(UCS_OK, uct_ep_flush(ep_ab_, 0, &comp.uct));
    EXPECT_EQ(UCS_OK, uct_ep_flush(ep_ab_, 0, nullptr));
    // Idle again after traffic has been acknowledged.
    ASSERT_EQ(UCS_OK, am_short(ep_ab_, 1, kNoPayload, 0));
    ASSERT_NO_FATAL_FAILURE(flush_ep(ep_ab_));
    EXPECT_EQ(UCS_OK, uct_ep_flush(ep_ab_, 0, &comp.uct));
    progress_for(0.02);
    EXPECT_EQ(0, comp.fired) << "a flush that returned UCS_OK must not call its completion";
}

// Active messages ask for no prompt acknowledgement (SRCNIC_WQE_FLAG_LAZY_ACK): a flush right
// behind one posts a probe that asks for it, once, instead of waiting out the peer's
// acknowledgement delay; behind a put (which asks by itself) it posts none. The peer's iface
// drops the probe.
TEST_F(UctSrc, ep_flush__behind_an_active_message_posts_one_probe)
{
    ASSERT_EQ(UCS_OK, uct_ep_am_short(ep_ab_, kAmId, 1, kNoPayload, 0));
    const uint32_t posted = uct_src_test_ep_posted(ep_ab_);
    Completion &comp = completion();
    ASSERT_EQ(UCS_INPROGRESS, uct_ep_flush(ep_ab_, 0, &comp.uct));
    EXPECT_EQ(posted + 1, uct_src_test_ep_posted(ep_ab_)) << "no probe behind the active message";
    EXPECT_EQ(UCS_INPROGRESS, uct_ep_flush(ep_ab_, 0, nullptr));
    EXPECT_EQ(posted + 1, uct_src_test_ep_posted(ep_ab_)) << "a second probe for the same tail";
    ASSERT_TRUE(wait_for([&] { return comp.fired > 0; })) << "flush never completed";
    EXPECT_EQ(UCS_OK, comp.status);
    ASSERT_TRUE(wait_for([&] { return b_.rx.size() >= 1; }));
    // A put: it asks for its acknowledgement itself.
    std::vector<uint8_t> target(64, 0x11);
    Region region;
    ASSERT_NO_FATAL_FAILURE(mem_reg(md_b_, target.data(), target.size(), &region));
    uint64_t word = 5;
    ASSERT_EQ(UCS_OK, uct_ep_put_short(ep_ab_, &word, sizeof(word),
                                       (uint64_t)(uintptr_t)target.data(), region.rkey.rkey));
    const uint32_t after_put = uct_src_test_ep_posted(ep_ab_);
    Completion &comp2 = completion();
    ASSERT_EQ(UCS_INPROGRESS, uct_ep_flush(ep_ab_, 0, &comp2.uct));
    EXPECT_EQ(after_put, uct_src_test_ep_posted(ep_ab_)) << "a probe behind a put";
    ASSERT_TRUE(wait_for([&] { return comp2.fired > 0; }));
    progress_for(0.02);
    EXPECT_EQ(1u, b_.rx.size()) << "the probe reached the active-message handler";
    EXPECT_EQ(0x11, target[sizeof(word)]);
    EXPECT_EQ(0, std::memcmp(target.data(), &word, sizeof(word)));
    mem_dereg(&region);
}

TEST_F(UctSrcQuietPeer, ep_flush__completes_only_after_peer_acknowledged)
{
    UCT_SRC_SKIP_WITH_AGENT("the peer acknowledges whether or not it progresses");
    ASSERT_EQ(UCS_OK, uct_ep_am_short(ep_ab_, kAmId, 1, kNoPayload, 0));
    std::vector<uint8_t> data(100000, 7);
    uct_iov_t iov{data.data(), 4000, UCT_MEM_HANDLE_NULL, 0, 1};
    Completion &zcomp = completion();
    ASSERT_EQ(UCS_INPROGRESS,
              uct_ep_am_zcopy(ep_ab_, kAmId, nullptr, 0, &iov, 1, 0, &zcomp.uct));
    Completion &comp = completion();
    ASSERT_EQ(UCS_INPROGRESS, uct_ep_flush(ep_ab_, 0, &comp.uct));
    // The peer's engine does not run: nothing can be acknowledged.
    progress_for(0.3, &a_);
    EXPECT_EQ(0, comp.fired) << "flush completed before the peer acknowledged";
    EXPECT_EQ(0, zcomp.fired) << "zcopy completed before the peer acknowledged";
    EXPECT_TRUE(b_.rx.empty());
    // Once the peer runs, both complete.
    ASSERT_TRUE(wait_for([&] { return comp.fired > 0; })) << "flush never completed";
    EXPECT_EQ(1, comp.fired);
    EXPECT_EQ(UCS_OK, comp.status);
    EXPECT_EQ(1, zcomp.fired);
    EXPECT_EQ(UCS_OK, zcomp.status);
    EXPECT_EQ(2u, b_.rx.size()) << "flush completed before both messages were delivered";
    EXPECT_EQ(UCS_OK, uct_ep_flush(ep_ab_, 0, nullptr));
}

TEST_F(UctSrcQuietPeer, ep_flush__several_completions_in_order)
{
    UCT_SRC_SKIP_WITH_AGENT("the peer acknowledges whether or not it progresses");
    std::vector<Completion> &comps = completions(3);
    for (size_t i = 0; i < comps.size(); ++i) {
        ASSERT_EQ(UCS_OK, uct_ep_am_short(ep_ab_, kAmId, i, kNoPayload, 0));
        ASSERT_EQ(UCS_INPROGRESS, uct_ep_flush(ep_ab_, 0, &comps[i].uct));
    }
    progress_for(0.1, &a_);
    for (const Completion &c : comps) {
        EXPECT_EQ(0, c.fired);
    }
    ASSERT_TRUE(wait_for([&] { return comps.back().fired > 0; }));
    for (const Completion &c : comps) {
        EXPECT_EQ(1, c.fired);
        EXPECT_EQ(UCS_OK, c.status);
    }
}

TEST_F(UctSrcQuietPeer, iface_flush__inprogress_until_acknowledged)
{
    UCT_SRC_SKIP_WITH_AGENT("the peer acknowledges whether or not it progresses");
    EXPECT_EQ(UCS_OK, uct_iface_flush(a_.iface, 0, nullptr));
    ASSERT_EQ(UCS_OK, uct_ep_am_short(ep_ab_, kAmId, 1, kNoPayload, 0));
    EXPECT_EQ(UCS_INPROGRESS, uct_iface_flush(a_.iface, 0, nullptr));
    progress_for(0.2, &a_);
    EXPECT_EQ(UCS_INPROGRESS, uct_iface_flush(a_.iface, 0, nullptr));
    ASSERT_TRUE(wait_for([&] { return uct_iface_flush(a_.iface, 0, nullptr) == UCS_OK; }));
    EXPECT_EQ(1u, b_.rx.size());
}

TEST_F(UctSrc, ep_flush__behind_pending_returns_no_resource)
{
    size_t n = 0;
    while (n < 100000 && uct_ep_am_short(ep_ab_, kAmId, n, kNoPayload, 0) == UCS_OK) {
        ++n;
    }
    ASSERT_LT(n, 100000u);
    struct Req {
        uct_pending_req_t uct;
        int calls;
    } req{{[](uct_pending_req_t *r) -> ucs_status_t {
              ++reinterpret_cast<Req *>(r)->calls;
              return UCS_OK;
          }, {}}, 0};
    ASSERT_EQ(UCS_OK, uct_ep_pending_add(ep_ab_, &req.uct, 0));
    Completion &comp = completion();
    EXPECT_EQ(UCS_ERR_NO_RESOURCE, uct_ep_flush(ep_ab_, 0, &comp.uct))
        << "a flush must not complete ahead of queued requests";
    ASSERT_TRUE(wait_for([&] { return req.calls > 0; }));
    ASSERT_NO_FATAL_FAILURE(flush_ep(ep_ab_));
    EXPECT_EQ(0, comp.fired);
}

TEST_F(UctSrcQuietPeer, ep_flush__cancel_completes_outstanding_zcopy_with_canceled)
{
    UCT_SRC_SKIP_WITH_AGENT("the peer acknowledges whether or not it progresses");
    const size_t chunk = 1 << 20, kPuts = 8, kAms = 8;
    std::vector<uint8_t> local(chunk * kPuts, 0x5c), remote(chunk * kPuts, 0);
    Region lreg, rreg;
    ASSERT_NO_FATAL_FAILURE(mem_reg(md_a_, local.data(), local.size(), &lreg));
    ASSERT_NO_FATAL_FAILURE(mem_reg(md_b_, remote.data(), remote.size(), &rreg));

    std::vector<Completion> &comps = completions(kPuts + kAms);
    for (size_t i = 0; i < kPuts; ++i) {
        uct_iov_t iov{local.data() + i * chunk, chunk, lreg.memh, 0, 1};
        const uint64_t raddr = (uint64_t)(uintptr_t)(remote.data() + i * chunk);
        ASSERT_EQ(UCS_INPROGRESS,
                  uct_ep_put_zcopy(ep_ab_, &iov, 1, raddr, rreg.rkey.rkey, &comps[i].uct));
    }
    for (size_t i = 0; i < kAms; ++i) {
        uct_iov_t iov{local.data() + i * 1000, 1000, lreg.memh, 0, 1};
        ASSERT_EQ(UCS_INPROGRESS,
                  uct_ep_am_zcopy(ep_ab_, kAmId, nullptr, 0, &iov, 1, 0, &comps[kPuts + i].uct));
    }
    // Let some of it reach the wire; the peer never answers.
    progress_for(0.05, &a_);
    for (const Completion &c : comps) {
        ASSERT_EQ(0, c.fired) << "completed although the peer never ran";
    }

    Completion &flush_comp = completion();
    const double start = now_sec();
    ucs_status_t status = uct_ep_flush(ep_ab_, UCT_FLUSH_FLAG_CANCEL, &flush_comp.uct);
    EXPECT_LT(now_sec() - start, 0.5) << "flush(CANCEL) must return promptly";
    ASSERT_TRUE(status == UCS_OK || status == UCS_INPROGRESS) << ucs_status_string(status);
    // Cancelled operations complete without the peer: progress only a.
    ASSERT_TRUE(wait_for_side(&a_, [&] {
        for (const Completion &c : comps) {
            if (c.fired == 0) {
                return false;
            }
        }
        return status == UCS_OK || flush_comp.fired > 0;
    }, 5.0)) << "cancelled operations did not complete";
    EXPECT_LT(now_sec() - start, 2.0);
    for (size_t i = 0; i < comps.size(); ++i) {
        EXPECT_EQ(1, comps[i].fired) << "operation " << i;
        EXPECT_EQ(UCS_ERR_CANCELED, comps[i].status) << "operation " << i;
    }
    if (status == UCS_INPROGRESS) {
        EXPECT_EQ(1, flush_comp.fired);
    }
    destroy_ep(ep_ab_);

    // The peer wakes up later: late packets of the cancelled operations are harmless, and a new
    // endpoint works.
    progress_for(0.2);
    b_.rx.clear();
    uct_ep_h ep = create_ep(&a_, b_);
    ASSERT_NE(nullptr, ep);
    extra_eps_.push_back(ep);
    ASSERT_EQ(UCS_OK, am_short(ep, 77, kNoPayload, 0));
    ASSERT_NO_FATAL_FAILURE(flush_ep(ep));
    ASSERT_EQ(1u, b_.rx.size());
    uint64_t hdr;
    std::memcpy(&hdr, b_.rx[0].data.data(), sizeof(hdr));
    EXPECT_EQ(77u, hdr);
    mem_dereg(&lreg);
    mem_dereg(&rreg);
}

TEST_F(UctSrcQuietPeer, ep_destroy__after_cancel_with_peer_silent)
{
    std::vector<uint8_t> data(64 * 1024, 1);
    std::vector<Completion> &comps = completions(4);
    for (Completion &c : comps) {
        uct_iov_t iov{data.data(), data.size() / 8, UCT_MEM_HANDLE_NULL, 0, 1};
        ASSERT_EQ(UCS_INPROGRESS, uct_ep_am_zcopy(ep_ab_, kAmId, nullptr, 0, &iov, 1, 0, &c.uct));
    }
    Completion &flush_comp = completion();
    ucs_status_t status = uct_ep_flush(ep_ab_, UCT_FLUSH_FLAG_CANCEL, &flush_comp.uct);
    if (status == UCS_INPROGRESS) {
        ASSERT_TRUE(wait_for_side(&a_, [&] { return flush_comp.fired > 0; }, 5.0));
    }
    destroy_ep(ep_ab_);
    for (const Completion &c : comps) {
        EXPECT_EQ(1, c.fired);
    }
    EXPECT_EQ(UCS_OK, uct_iface_flush(a_.iface, 0, nullptr));
}

// After uct_ep_invalidate an operation on the ep completes CANCELED and reaches nobody, also
// between two processes of one agent, where a send is carried out as soon as the agent takes
// it from the ring (a cancel asked after the post would come too late).
TEST_F(UctSrc, ep_invalidate__later_operations_complete_cancelled_and_reach_nobody)
{
    ASSERT_EQ(UCS_OK, uct_src_test_ep_invalidate(ep_ab_));
    std::vector<uint8_t> data(2000, 7);
    std::vector<Completion *> comps;
    for (int i = 0; i < 4; ++i) {
        Completion &c = completion();
        uct_iov_t iov{data.data(), data.size(), UCT_MEM_HANDLE_NULL, 0, 1};
        ASSERT_EQ(UCS_INPROGRESS, uct_ep_am_zcopy(ep_ab_, kAmId, nullptr, 0, &iov, 1, 0, &c.uct));
        comps.push_back(&c);
    }
    ASSERT_TRUE(wait_for([&] {
        for (Completion *c : comps) {
            if (c->fired == 0) {
                return false;
            }
        }
        return true;
    }));
    for (Completion *c : comps) {
        EXPECT_EQ(1, c->fired);
        EXPECT_EQ(UCS_ERR_CANCELED, c->status);
    }
    progress_for(0.1);
    EXPECT_TRUE(b_.rx.empty()) << "a send on an invalidated ep was delivered";
    // (Invalidating reports the ep failed, as UCP's keepalive expects.)
    std::lock_guard<std::mutex> lock(a_.errors_lock);
    ASSERT_EQ(1u, a_.errors.size());
    EXPECT_EQ(ep_ab_, a_.errors[0].ep);
    EXPECT_EQ(UCS_ERR_ENDPOINT_TIMEOUT, a_.errors[0].status);
    a_.errors.clear();
}

// Two eps of a to the same iface of b: cancelling (or destroying) one must not touch the
// operations of the other.
class UctSrcTwoEps : public UctSrcQuietPeer {
protected:
    void post_on(uct_ep_h ep, std::vector<Completion> *comps, std::vector<uint8_t> *data)
    {
        for (Completion &c : *comps) {
            uct_iov_t iov{data->data(), 2000, UCT_MEM_HANDLE_NULL, 0, 1};
            ASSERT_EQ(UCS_INPROGRESS, uct_ep_am_zcopy(ep, kAmId, nullptr, 0, &iov, 1, 0, &c.uct));
        }
    }

    static int fired(const std::vector<Completion> &comps, ucs_status_t status)
    {
        int n = 0;
        for (const Completion &c : comps) {
            n += (c.fired > 0 && c.status == status);
        }
        return n;
    }

    void check_other_ep(const std::vector<Completion> &other, const char *what)
    {
        progress_for(0.1, &a_);
        const int cancelled = fired(other, UCS_ERR_CANCELED);
        if (cancelled > 0) {
            UCT_SRC_KNOWN_BUG(
                what << " cancelled " << cancelled << " operation(s) of another ep to the "
                "same peer iface. uct_src_ep.c uct_src_ep_flush()/ep destroy/"
                "uct_src_ep_invalidate() call srcnic_qp_cancel(iface->qp, ep->dest), and every "
                "ep to the same remote iface has the same dest (peer slot, remote QPN), so the "
                "engine cancels them all. Cancel per ep: e.g. carry an ep tag in the WQE and "
                "let srcnic_qp_cancel() match it, or cancel by wr_id owner.");
        }
        ASSERT_TRUE(wait_for([&] { return fired(other, UCS_OK) == (int)other.size(); }))
            << "the other ep's operations did not complete normally";
    }

    std::vector<Completion> orphans_ = std::vector<Completion>(4);  // of a destroyed ep
};

TEST_F(UctSrcTwoEps, ep_flush__cancel_leaves_other_eps_to_same_peer_alone)
{
    UCT_SRC_SKIP_WITH_AGENT("the peer acknowledges whether or not it progresses");
    uct_ep_h ep2 = create_ep(&a_, b_);
    ASSERT_NE(nullptr, ep2);
    extra_eps_.push_back(ep2);
    std::vector<uint8_t> data(4096, 9);
    std::vector<Completion> &mine = completions(4);
    std::vector<Completion> &other = completions(4);
    ASSERT_NO_FATAL_FAILURE(post_on(ep_ab_, &mine, &data));
    ASSERT_NO_FATAL_FAILURE(post_on(ep2, &other, &data));
    Completion &fc = completion();
    const ucs_status_t status = uct_ep_flush(ep_ab_, UCT_FLUSH_FLAG_CANCEL, &fc.uct);
    ASSERT_TRUE(status == UCS_OK || status == UCS_INPROGRESS);
    ASSERT_TRUE(wait_for_side(&a_, [&] { return fired(mine, UCS_ERR_CANCELED) == 4; }, 5.0));
    check_other_ep(other, "flush(CANCEL) of one ep");
}

TEST_F(UctSrcTwoEps, ep_destroy__leaves_other_eps_to_same_peer_alone)
{
    uct_ep_h ep2 = create_ep(&a_, b_);
    ASSERT_NE(nullptr, ep2);
    extra_eps_.push_back(ep2);
    std::vector<uint8_t> data(4096, 9);
    std::vector<Completion> &other = completions(4);
    ASSERT_NO_FATAL_FAILURE(post_on(ep_ab_, &orphans_, &data));
    ASSERT_NO_FATAL_FAILURE(post_on(ep2, &other, &data));
    progress_for(0.02, &a_);
    // Destroyed with its operations in flight (their completions are not called afterwards).
    destroy_ep(ep_ab_);
    check_other_ep(other, "destroying one ep");
}

// An ep destroyed with sends in flight lingers until they complete; closing the iface before
// that must free it. Only a leak checker can see this: run alone, the sanitizer build's
// LeakSanitizer reports at exit (other builds pass trivially).
TEST_F(UctSrcQuietPeer, iface_close__frees_eps_destroyed_with_sends_in_flight)
{
    if (isolated()) {
        for (uint64_t i = 0; i < 4; ++i) {
            ASSERT_EQ(UCS_OK, uct_ep_am_short(ep_ab_, kAmId, i, kNoPayload, 0));
        }
        destroy_ep(ep_ab_);
        close_side(&a_);
        return;
    }
    std::string output;
    if (!run_isolated(&output)) {
        if (output.find("LeakSanitizer: detected memory leaks") != std::string::npos) {
            UCT_SRC_KNOWN_BUG(
                "an ep destroyed while its sends are in flight is freed only when their "
                "completions are polled (uct_src_ep.c ep delete: FLAG_DESTROYED, freed in "
                "uct_src_ep_send_completed()); uct_src_iface.c UCS_CLASS_CLEANUP_FUNC"
                "(uct_src_iface_t) destroys the QP without polling, so every such ep leaks "
                "(sizeof(uct_src_ep_t) bytes each, e.g. eps destroyed at teardown before their "
                "last completions were polled). Poll the CQ (or walk lingering eps) in iface "
                "cleanup before srcnic_qp_destroy().");
        }
        FAIL() << "the isolated run failed:\n" << output;
    }
}

}  // namespace
}  // namespace uct_src_test
