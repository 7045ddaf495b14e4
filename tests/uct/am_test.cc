// Active messages over src: short (with its length limit and the iov variant), bcopy and zcopy
// at every size class up to the advertised maxima with their content checked, descriptors kept
// by the handler (UCT_CB_PARAM_FLAG_DESC) and released later, and many messages in order.
#include "uct/src_internal.h"
#include "uct/uct_src_fixture.h"

#include <algorithm>
#include <cstring>

namespace uct_src_test {
namespace {

// 0..64 one by one, then every power of two and its neighbours, then max itself.
std::vector<size_t> sizes_up_to(size_t max)
{
    std::vector<size_t> sizes;
    for (size_t s = 0; s <= std::min<size_t>(64, max); ++s) {
        sizes.push_back(s);
    }
    for (size_t p = 128; p <= max; p *= 2) {
        for (size_t s : {p - 1, p, p + 1}) {
            if (s <= max) {
                sizes.push_back(s);
            }
        }
    }
    sizes.push_back(max - 1);
    sizes.push_back(max);
    std::sort(sizes.begin(), sizes.end());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    return sizes;
}

std::vector<uint8_t> header_bytes(uint64_t hdr)
{
    std::vector<uint8_t> v(sizeof(hdr));
    std::memcpy(v.data(), &hdr, sizeof(hdr));
    return v;
}

TEST_F(UctSrc, am_short__delivered_with_header)
{
    const size_t max_payload = a_.attr.cap.am.max_short - sizeof(uint64_t);
    std::vector<uint8_t> payload(max_payload);
    size_t sent = 0;
    for (size_t len = 0; len <= max_payload; ++len) {
        fill_pattern(payload.data(), len, static_cast<uint32_t>(len));
        ASSERT_EQ(UCS_OK, am_short(ep_ab_, 0x1122334455660000ull + len, payload.data(),
                                   static_cast<unsigned>(len)))
            << "length " << len;
        ++sent;
    }
    ASSERT_TRUE(wait_for([&] { return b_.rx.size() == sent; })) << b_.rx.size() << "/" << sent;
    for (size_t len = 0; len <= max_payload; ++len) {
        const AmRecord &r = b_.rx[len];
        std::vector<uint8_t> expected = header_bytes(0x1122334455660000ull + len);
        fill_pattern(payload.data(), len, static_cast<uint32_t>(len));
        expected.insert(expected.end(), payload.begin(), payload.begin() + len);
        EXPECT_EQ(expected, r.data) << "length " << len;
        EXPECT_TRUE(r.flags & UCT_CB_PARAM_FLAG_DESC);
    }
}

TEST_F(UctSrc, am_short__max_short_enforced_exactly)
{
    const size_t max_payload = a_.attr.cap.am.max_short - sizeof(uint64_t);
    std::vector<uint8_t> payload(max_payload + 1, 0xab);
    ASSERT_EQ(UCS_OK, am_short(ep_ab_, 1, payload.data(), static_cast<unsigned>(max_payload)));
    {
        LogCapture::ExpectErrors expect;
        EXPECT_EQ(UCS_ERR_INVALID_PARAM,
                  uct_ep_am_short(ep_ab_, kAmId, 2, payload.data(),
                                  static_cast<unsigned>(max_payload + 1)));
    }
    ASSERT_TRUE(wait_for([&] { return b_.rx.size() == 1; }));
    progress_for(0.05);
    ASSERT_EQ(1u, b_.rx.size()) << "the refused message was delivered";
    EXPECT_EQ(a_.attr.cap.am.max_short, b_.rx[0].data.size());
}

TEST_F(UctSrc, am_short_iov__gathers_every_entry)
{
    const size_t max_short = a_.attr.cap.am.max_short;
    std::vector<uint8_t> src(max_short + 1);
    fill_pattern(src.data(), src.size(), 3);
    size_t sent = 0;
    std::vector<std::vector<uint8_t>> expected;
    // From 9 bytes: exactly 8 (header only) is in am_short__null_payload_of_zero_length_accepted.
    for (size_t total = sizeof(uint64_t) + 1; total <= max_short; total += 7) {
        for (size_t pieces = 1; pieces <= 4; ++pieces) {
            std::vector<uct_iov_t> iov(pieces);
            size_t off = 0;
            for (size_t i = 0; i < pieces; ++i) {
                const size_t len = (i + 1 == pieces) ? total - off : total / pieces;
                iov[i].buffer = src.data() + off;
                iov[i].length = len;
                iov[i].memh = UCT_MEM_HANDLE_NULL;
                iov[i].stride = 0;
                iov[i].count = 1;
                off += len;
            }
            ucs_status_t status;
            ASSERT_TRUE(wait_for([&] {
                status = uct_ep_am_short_iov(ep_ab_, kAmId, iov.data(), iov.size());
                return status != UCS_ERR_NO_RESOURCE;
            }));
            ASSERT_EQ(UCS_OK, status) << "total " << total << " pieces " << pieces;
            expected.emplace_back(src.begin(), src.begin() + total);
            ++sent;
        }
    }
    // Exactly max_short is accepted; one byte more is refused.
    uct_iov_t whole{src.data(), max_short, UCT_MEM_HANDLE_NULL, 0, 1};
    ASSERT_TRUE(wait_for([&] {
        return uct_ep_am_short_iov(ep_ab_, kAmId, &whole, 1) != UCS_ERR_NO_RESOURCE;
    }));
    expected.emplace_back(src.begin(), src.begin() + max_short);
    ++sent;
    whole.length = max_short + 1;
    {
        LogCapture::ExpectErrors expect;
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_ep_am_short_iov(ep_ab_, kAmId, &whole, 1));
    }
    ASSERT_TRUE(wait_for([&] { return b_.rx.size() >= sent; }));
    progress_for(0.05);
    ASSERT_EQ(sent, b_.rx.size());
    for (size_t i = 0; i < sent; ++i) {
        EXPECT_EQ(expected[i], b_.rx[i].data) << "message " << i;
    }
}

// A short or zero-copy send takes a descriptor without a bcopy buffer: taking one of those made
// a job's first message fault in 64 of them (1 MB with 16 KiB fragments) on its way out.
TEST_F(UctSrc, am_short_and_zcopy__take_no_bcopy_buffer)
{
    ASSERT_FALSE(uct_src_test_bcopy_pool_grown(a_.iface)) << "premise: no send yet";
    const uint64_t payload = 0x5eed;
    ASSERT_EQ(UCS_OK, am_short(ep_ab_, 1, &payload, sizeof(payload)));
    std::vector<uint8_t> data(4096, 0x42);
    Region region;
    ASSERT_NO_FATAL_FAILURE(mem_reg(md_a_, data.data(), data.size(), &region));
    uct_iov_t iov{data.data(), data.size(), region.memh, 0, 1};
    Completion &comp = completion();
    const uint64_t header = 7;
    const ucs_status_t status = uct_ep_am_zcopy(ep_ab_, kAmId, &header, sizeof(header), &iov, 1,
                                                0, &comp.uct);
    ASSERT_TRUE(status == UCS_OK || status == UCS_INPROGRESS) << ucs_status_string(status);
    ASSERT_TRUE(wait_for([&] {
        return b_.rx.size() == 2 && (status == UCS_OK || comp.fired != 0);
    }));
    flush_ep(ep_ab_);
    EXPECT_FALSE(uct_src_test_bcopy_pool_grown(a_.iface))
        << "a short or zero-copy send took a descriptor with a bcopy buffer";
    ASSERT_EQ(static_cast<ssize_t>(sizeof(payload)), am_bcopy(ep_ab_, &payload, sizeof(payload)));
    flush_ep(ep_ab_);
    EXPECT_TRUE(uct_src_test_bcopy_pool_grown(a_.iface)) << "the check sees no bcopy send";
    ASSERT_NO_FATAL_FAILURE(mem_dereg(&region));
}

TEST_F(UctSrc, am_bcopy__delivered_at_every_size_class)
{
    const size_t max = a_.attr.cap.am.max_bcopy;
    const std::vector<size_t> sizes = sizes_up_to(max);
    std::vector<uint8_t> payload(max);
    for (size_t len : sizes) {
        fill_pattern(payload.data(), len, static_cast<uint32_t>(len) + 100);
        ssize_t ret = am_bcopy(ep_ab_, payload.data(), len);
        ASSERT_EQ(static_cast<ssize_t>(len), ret) << "length " << len;
    }
    ASSERT_TRUE(wait_for([&] { return b_.rx.size() == sizes.size(); }));
    for (size_t i = 0; i < sizes.size(); ++i) {
        fill_pattern(payload.data(), sizes[i], static_cast<uint32_t>(sizes[i]) + 100);
        ASSERT_EQ(sizes[i], b_.rx[i].data.size());
        EXPECT_TRUE(std::equal(b_.rx[i].data.begin(), b_.rx[i].data.end(), payload.begin()))
            << "length " << sizes[i];
    }
}

TEST_F(UctSrc, am_zcopy__header_and_iov_delivered_at_every_size_class)
{
    const uct_iface_attr_t &attr = a_.attr;
    const size_t max = attr.cap.am.max_zcopy;
    const size_t max_hdr = attr.cap.am.max_hdr;
    const uint32_t seed = test_seed();
    std::mt19937 rng(seed);
    std::vector<uint8_t> src(max);
    fill_pattern(src.data(), src.size(), seed);
    Region region;
    ASSERT_NO_FATAL_FAILURE(mem_reg(md_a_, src.data(), src.size(), &region));

    std::vector<std::vector<uint8_t>> expected;
    Completion &comp = completion(0);
    int posted = 0;
    for (size_t total : sizes_up_to(max)) {
        const size_t hdr_len = std::min<size_t>(rng() % (max_hdr + 1), total);
        const size_t payload_len = total - hdr_len;
        const size_t pieces = 1 + rng() % attr.cap.am.max_iov;
        std::vector<uct_iov_t> iov;
        size_t off = hdr_len;
        for (size_t i = 0; i < pieces; ++i) {
            const size_t len = (i + 1 == pieces) ? payload_len - (off - hdr_len)
                                                 : payload_len / pieces;
            iov.push_back(uct_iov_t{src.data() + off, len, region.memh, 0, 1});
            off += len;
        }
        comp.uct.count++;
        ucs_status_t status;
        ASSERT_TRUE(wait_for([&] {
            status = uct_ep_am_zcopy(ep_ab_, kAmId, src.data(), static_cast<unsigned>(hdr_len),
                                     iov.data(), iov.size(), 0, &comp.uct);
            return status != UCS_ERR_NO_RESOURCE;
        }));
        ASSERT_TRUE(status == UCS_INPROGRESS || status == UCS_OK)
            << ucs_status_string(status) << " total " << total;
        if (status == UCS_OK) {
            comp.uct.count--;
        } else {
            ++posted;
        }
        expected.emplace_back(src.begin(), src.begin() + total);
    }
    // The header is copied at once; the payload stays the caller's until completion.
    ASSERT_TRUE(wait_for([&] {
        return b_.rx.size() == expected.size() && comp.uct.count == 0;
    })) << b_.rx.size() << "/" << expected.size() << " delivered, " << comp.uct.count
        << " completions missing";
    EXPECT_EQ(UCS_OK, comp.uct.status);
    for (size_t i = 0; i < expected.size(); ++i) {
        EXPECT_EQ(expected[i], b_.rx[i].data) << "message " << i;
    }
    // More than max_zcopy (header included) is refused.
    uct_iov_t too_big{src.data(), max, region.memh, 0, 1};
    {
        LogCapture::ExpectErrors expect;
        EXPECT_EQ(UCS_ERR_INVALID_PARAM,
                  uct_ep_am_zcopy(ep_ab_, kAmId, src.data(), 1, &too_big, 1, 0, nullptr));
    }
    mem_dereg(&region);
}

// A handler that keeps every message whose first byte is odd and releases the rest.
struct Keeper {
    std::vector<std::pair<void *, std::vector<uint8_t>>> kept;  // data pointer, copy at arrival
    size_t seen = 0;
    unsigned flags_seen = ~0u;

    static ucs_status_t handler(void *arg, void *data, size_t length, unsigned flags)
    {
        auto *self = static_cast<Keeper *>(arg);
        ++self->seen;
        self->flags_seen &= flags;
        const auto *p = static_cast<const uint8_t *>(data);
        if (length > 0 && (p[0] & 1) && (flags & UCT_CB_PARAM_FLAG_DESC)) {
            self->kept.emplace_back(data, std::vector<uint8_t>(p, p + length));
            return UCS_INPROGRESS;
        }
        return UCS_OK;
    }
};

TEST_F(UctSrc, am_handler__inprogress_keeps_descriptor_until_released)
{
    Keeper keeper;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(b_.iface, kAmId, Keeper::handler, &keeper, 0));
    const size_t len = 1000;
    std::vector<uint8_t> payload(len);
    // More messages than receive buffers are posted, a third of them kept: buffers must be
    // replenished while others are held.
    const int kMessages = 900;
    for (int i = 0; i < kMessages; ++i) {
        fill_pattern(payload.data(), len, i);
        payload[0] = static_cast<uint8_t>(i % 3 == 0 ? 1 : 2);
        ASSERT_EQ(static_cast<ssize_t>(len), am_bcopy(ep_ab_, payload.data(), len)) << i;
        if (keeper.kept.size() > 100) {
            // Release the older half, as UCP would once it has matched them.
            for (size_t k = 0; k < 50; ++k) {
                auto &e = keeper.kept[k];
                ASSERT_EQ(0, std::memcmp(e.first, e.second.data(), e.second.size()))
                    << "a kept descriptor was overwritten";
                uct_iface_release_desc(static_cast<char *>(e.first) - kRxHeadroom);
            }
            keeper.kept.erase(keeper.kept.begin(), keeper.kept.begin() + 50);
        }
    }
    ASSERT_TRUE(wait_for([&] { return keeper.seen == static_cast<size_t>(kMessages); }))
        << keeper.seen << "/" << kMessages;
    EXPECT_TRUE(keeper.flags_seen & UCT_CB_PARAM_FLAG_DESC)
        << "the transport must offer its buffer to the handler";
    for (auto &e : keeper.kept) {
        EXPECT_EQ(0, std::memcmp(e.first, e.second.data(), e.second.size()))
            << "a kept descriptor was overwritten";
        uct_iface_release_desc(static_cast<char *>(e.first) - kRxHeadroom);
    }
    keeper.kept.clear();
    // Still receives after everything was returned.
    ASSERT_EQ(UCS_OK, am_short(ep_ab_, 2, kNoPayload, 0));
    ASSERT_TRUE(wait_for([&] { return keeper.seen == static_cast<size_t>(kMessages) + 1; }));
}

TEST_F(UctSrc, am_short__many_in_order_both_ways)
{
    const uint64_t kMessages = 20000;
    uint64_t next_ab = 0, next_ba = 0;
    ASSERT_TRUE(wait_for([&] {
        while (next_ab < kMessages &&
               uct_ep_am_short(ep_ab_, kAmId, next_ab, &next_ab, sizeof(next_ab)) == UCS_OK) {
            ++next_ab;
        }
        while (next_ba < kMessages &&
               uct_ep_am_short(ep_ba_, kAmId, next_ba, &next_ba, sizeof(next_ba)) == UCS_OK) {
            ++next_ba;
        }
        return b_.rx.size() == kMessages && a_.rx.size() == kMessages;
    }, 60.0)) << "b got " << b_.rx.size() << ", a got " << a_.rx.size();
    for (const std::vector<AmRecord> *rx : {&a_.rx, &b_.rx}) {
        for (uint64_t i = 0; i < kMessages; ++i) {
            uint64_t hdr;
            ASSERT_EQ(2 * sizeof(uint64_t), (*rx)[i].data.size());
            std::memcpy(&hdr, (*rx)[i].data.data(), sizeof(hdr));
            ASSERT_EQ(i, hdr) << "out of order";
        }
    }
}

TEST_F(UctSrc, am_mixed__short_bcopy_zcopy_in_order_one_ep)
{
    const uint32_t seed = test_seed();
    std::mt19937 rng(seed);
    const size_t max_bcopy = a_.attr.cap.am.max_bcopy;
    std::vector<uint8_t> buf(max_bcopy);
    Completion &comp = completion(0);
    const uint32_t kMessages = 3000;
    for (uint32_t i = 0; i < kMessages; ++i) {
        std::memcpy(buf.data(), &i, sizeof(i));
        ucs_status_t status;
        const unsigned kind = rng() % 3;
        const size_t len = sizeof(i) + rng() % (max_bcopy / 2);
        ASSERT_TRUE(wait_for([&] {
            if (kind == 0) {
                status = uct_ep_am_short(ep_ab_, kAmId, i, kNoPayload, 0);
            } else if (kind == 1) {
                struct P {
                    const uint8_t *b;
                    size_t l;
                } p{buf.data(), len};
                ssize_t r = uct_ep_am_bcopy(ep_ab_, kAmId, [](void *dest, void *arg) -> size_t {
                    auto *pp = static_cast<P *>(arg);
                    std::memcpy(dest, pp->b, pp->l);
                    return pp->l;
                }, &p, 0);
                status = (r >= 0) ? UCS_OK : static_cast<ucs_status_t>(r);
            } else {
                uct_iov_t iov{buf.data(), sizeof(i), UCT_MEM_HANDLE_NULL, 0, 1};
                ++comp.uct.count;
                status = uct_ep_am_zcopy(ep_ab_, kAmId, nullptr, 0, &iov, 1, 0, &comp.uct);
                if (status != UCS_INPROGRESS) {
                    --comp.uct.count;
                }
            }
            return status != UCS_ERR_NO_RESOURCE;
        }));
        ASSERT_FALSE(UCS_STATUS_IS_ERR(status)) << ucs_status_string(status);
        if (kind == 2) {
            // The zcopy payload must stay untouched until completion: wait for it.
            ASSERT_TRUE(wait_for([&] { return comp.uct.count == 0; }));
        }
    }
    ASSERT_TRUE(wait_for([&] { return b_.rx.size() == kMessages; }));
    for (uint32_t i = 0; i < kMessages; ++i) {
        uint32_t got;
        ASSERT_GE(b_.rx[i].data.size(), sizeof(got));
        std::memcpy(&got, b_.rx[i].data.data(), sizeof(got));
        ASSERT_EQ(i, got) << "out of order";
    }
}

// UCP keeps unexpected messages' descriptors for as long as the application has not posted a
// matching receive; an MPI rank flooded by unexpected messages holds all of them. By default
// the iface takes more buffers rather than refuse the next message (an application that must
// receive it before it can consume the kept ones would wait forever).
TEST_F(UctSrc, am_handler__kept_descriptors_never_starve_the_receiver_by_default)
{
    Keeper keeper;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(b_.iface, kAmId, Keeper::handler, &keeper, 0));
    const uint8_t keep = 1;   // odd first byte: the handler keeps it
    constexpr size_t kSent = 4096;   // 16 times the posted buffers
    size_t sent = 0;
    ASSERT_TRUE(wait_for([&] {
        if (sent < kSent && uct_ep_am_short(ep_ab_, kAmId, keep, kNoPayload, 0) == UCS_OK) {
            ++sent;
        }
        return keeper.seen == kSent;
    }, 30.0)) << keeper.seen << "/" << kSent;
    EXPECT_EQ(kSent, keeper.kept.size());
    EXPECT_GT(uct_src_test_rx_posted(b_.iface), 0u);
    for (auto &e : keeper.kept) {
        uct_iface_release_desc(static_cast<char *>(e.first) - kRxHeadroom);
    }
    keeper.kept.clear();
}

// With UCX_SRC_RX_MAX_BUFS, the receiver runs out once UCP keeps them all; once they are
// released, the iface must post receive buffers again, even if it has nothing else to do.
class UctSrcCappedRx : public UctSrc {
protected:
    std::vector<ConfigKv> config_for(int side) const override
    {
        return {{"RX_MAX_BUFS", "512"}};
    }
};

TEST_F(UctSrcCappedRx, am_handler__released_descriptors_replenish_receive_buffers)
{
    Keeper keeper;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(b_.iface, kAmId, Keeper::handler, &keeper, 0));
    const uint8_t keep = 1;   // odd first byte: the handler keeps it
    size_t sent = 0;
    double last_change = now_sec();
    size_t last_seen = 0;
    // Send until b stops receiving (all its buffers are held) with some messages not delivered.
    ASSERT_TRUE(wait_for([&] {
        if (sent < 4096 &&
            uct_ep_am_short(ep_ab_, kAmId, keep, kNoPayload, 0) == UCS_OK) {
            ++sent;
        }
        if (keeper.seen != last_seen) {
            last_seen = keeper.seen;
            last_change = now_sec();
        }
        return (sent == 4096 && keeper.seen == sent) ||
               (sent > keeper.seen && now_sec() - last_change > 0.5);
    }, 30.0));
    ASSERT_LT(keeper.seen, sent) << "the receiver never ran out of buffers";
    ASSERT_EQ(0u, uct_src_test_rx_posted(b_.iface)) << "premise: every buffer is held";
    for (auto &e : keeper.kept) {
        uct_iface_release_desc(static_cast<char *>(e.first) - kRxHeadroom);
    }
    keeper.kept.clear();
    // The handler keeps nothing from now on; b does nothing but progress.
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(b_.iface, kAmId, record_am, &b_, 0));
    const size_t seen_before = keeper.seen;
    const bool delivered = wait_for([&] { return b_.rx.size() == sent - seen_before; }, 10.0);
    ASSERT_TRUE(delivered) << b_.rx.size() << "/" << sent - seen_before;
}

// A message whose AM id the receiver never registered (a broken or hostile peer) is dropped and
// counted, not handed to UCX's stub handler, which only warns with a backtrace and leaves the
// consumer to whatever follows; so is one whose handler was removed. The registered id is
// delivered.
TEST_F(UctSrc, am__unregistered_id_is_dropped_and_counted)
{
    const unsigned long before = uct_src_test_am_dropped(b_.iface);
    const uint64_t payload = 0xbad;
    unsigned long sent = 0;
    for (unsigned id = 0; id < UCT_AM_ID_MAX; ++id) {
        if (id == kAmId) {
            continue;
        }
        ASSERT_EQ(UCS_OK, am_short(ep_ab_, id, &payload, sizeof(payload), static_cast<uint8_t>(id)));
        ASSERT_EQ(static_cast<ssize_t>(sizeof(payload)),
                  am_bcopy(ep_ab_, &payload, sizeof(payload), static_cast<uint8_t>(id)));
        sent += 2;
    }
    ASSERT_NO_FATAL_FAILURE(flush_ep(ep_ab_));
    ASSERT_TRUE(wait_for([&] { return uct_src_test_am_dropped(b_.iface) - before == sent; }))
        << uct_src_test_am_dropped(b_.iface) - before << "/" << sent << " dropped";
    EXPECT_TRUE(b_.rx.empty()) << "an unregistered id reached the recording handler";
    // remove kAmId's handler / expect its messages dropped too; registered again, delivered
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(b_.iface, kAmId, nullptr, nullptr, 0));
    ASSERT_EQ(UCS_OK, am_short(ep_ab_, 1, &payload, sizeof(payload)));
    ASSERT_TRUE(wait_for([&] { return uct_src_test_am_dropped(b_.iface) - before == sent + 1; }));
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(b_.iface, kAmId, record_am, &b_, 0));
    ASSERT_EQ(UCS_OK, am_short(ep_ab_, 2, &payload, sizeof(payload)));
    ASSERT_TRUE(wait_for([&] { return b_.rx.size() == 1; }));
    progress_for(0.05);
    EXPECT_EQ(1u, b_.rx.size());
    EXPECT_EQ(sent + 1, uct_src_test_am_dropped(b_.iface) - before);
}

// UCP passes a null payload with zero length. Run in a separate process, because under UBSan
// the memcpy(dst, NULL, 0) it can provoke aborts the program.
TEST_F(UctSrc, am_short__null_payload_of_zero_length_accepted)
{
    if (isolated()) {
        std::vector<uint8_t> target(64, 0x11);
        Region region;
        ASSERT_NO_FATAL_FAILURE(mem_reg(md_b_, target.data(), target.size(), &region));
        EXPECT_EQ(UCS_OK, am_short(ep_ab_, 1, nullptr, 0));
        // uct_base_ep_am_short_iov() itself passes NULL for an iov of exactly the header.
        uint64_t hdr = 2;
        uct_iov_t iov{&hdr, sizeof(hdr), UCT_MEM_HANDLE_NULL, 0, 1};
        ucs_status_t status;
        ASSERT_TRUE(wait_for([&] {
            status = uct_ep_am_short_iov(ep_ab_, kAmId, &iov, 1);
            return status != UCS_ERR_NO_RESOURCE;
        }));
        EXPECT_EQ(UCS_OK, status);
        ASSERT_TRUE(wait_for([&] {
            status = uct_ep_put_short(ep_ab_, nullptr, 0, (uint64_t)(uintptr_t)target.data(),
                                      region.rkey.rkey);
            return status != UCS_ERR_NO_RESOURCE;
        }));
        EXPECT_EQ(UCS_OK, status);
        ASSERT_NO_FATAL_FAILURE(flush_ep(ep_ab_));
        ASSERT_TRUE(wait_for([&] { return b_.rx.size() == 2; }));
        EXPECT_EQ(sizeof(uint64_t), b_.rx[0].data.size());
        EXPECT_EQ(sizeof(uint64_t), b_.rx[1].data.size());
        mem_dereg(&region);
        return;
    }
    std::string output;
    if (!run_isolated(&output)) {
        if (output.find("runtime error: null pointer passed") != std::string::npos) {
            UCT_SRC_KNOWN_BUG(
                "uct_ep_am_short()/uct_ep_put_short() with payload NULL and length 0 (as UCP "
                "sends, and as UCX's own uct_base_ep_am_short_iov() does for an 8-byte iov) "
                "call memcpy(dst, NULL, 0), undefined behaviour that aborts the sanitizer "
                "build: uct_src_ep.c uct_src_ep_am_short() and uct_src_ep_put_short(). Copy "
                "only when length != 0. UBSan said:\n"
                << output.substr(output.rfind('\n', output.find("runtime error")) + 1, 200));
        }
        FAIL() << "the isolated run failed:\n" << output;
    }
}

}  // namespace

// --- the doorbell: a send leaves without the sender's progress ---

// Side a does no background progress; whatever a sends leaves only through the doorbell in
// the send call, or when the test progresses a.
class UctSrcQuietSender : public UctSrc {
protected:
    bool quiet(int side) const override { return side == 0; }
};

TEST_F(UctSrcQuietSender, am_short__leaves_without_the_senders_progress)
{
    // a sends one message and never progresses / expect b to receive it
    const uint64_t payload = 0x5eed;
    ASSERT_EQ(UCS_OK, uct_ep_am_short(ep_ab_, kAmId, 7, &payload, sizeof(payload)));
    EXPECT_TRUE(wait_for_side(&b_, [&] { return b_.rx.size() == 1; }, 5.0))
        << "the message waited for the sender's progress";
}

// A coalescing window longer than the machine has been up (11.6 days): every burst the sender
// progresses after counts as prompt, and the first send after the iface opened must still ring
// the doorbell (it follows no earlier transmission), whatever the clock read when the iface
// opened.
class UctSrcQuietSenderCoalescing : public UctSrcQuietSender {
protected:
    std::vector<ConfigKv> config_for(int side) const override
    {
        return {{"TX_COALESCE", "1000000s"}};
    }

    // a sends messages with headers first..last to b, back to back; whether every post took.
    bool post(uint64_t first, uint64_t last)
    {
        const uint64_t payload = 0x5eed;
        for (uint64_t header = first; header <= last; ++header) {
            if (uct_ep_am_short(ep_ab_, kAmId, header, &payload, sizeof(payload)) != UCS_OK) {
                return false;
            }
        }
        return true;
    }

    // A burst of two, followed at once by a's progress; returns whether b got both (bounded).
    bool prompt_burst()
    {
        const size_t before = b_.rx.size();
        if (!post(1, 2)) {
            return false;
        }
        a_.progress();
        return wait_for([&] { return b_.rx.size() == before + 2; });
    }

    // Prompt bursts until a holds bursts; returns whether it does (bounded).
    bool learn_to_hold()
    {
        for (int i = 0; (i < 64) && !uct_src_test_tx_hold(a_.iface); ++i) {
            if (!prompt_burst()) {
                return false;
            }
        }
        return uct_src_test_tx_hold(a_.iface) != 0;
    }
};

TEST_F(UctSrcQuietSenderCoalescing, am_short__two_sends_leave_without_progress_before_bursts_were_seen)
{
    // a sends two messages back to back and never progresses: the iface has not seen the
    // application progress after a burst / expect both at b
    ASSERT_TRUE(post(1, 2));
    EXPECT_TRUE(wait_for_side(&b_, [&] { return b_.rx.size() == 2; }, 5.0))
        << "the second send waited for the sender's progress";
}

TEST_F(UctSrcQuietSenderCoalescing, am_short__burst_waits_for_progress_once_bursts_were_prompt)
{
    UCT_SRC_SKIP_WITH_AGENT("every posted send leaves when the agent sees it: there is no burst waiting for progress");
    // a's bursts are followed by its progress at once until it holds bursts; then a sends
    // three / expect the first at b before a progresses (the first send after a progress call
    // leaves at once), the other two only after
    ASSERT_TRUE(learn_to_hold()) << "prompt bursts did not make the iface hold bursts";
    const size_t before = b_.rx.size();
    ASSERT_TRUE(post(1, 3));
    EXPECT_TRUE(wait_for_side(&b_, [&] { return b_.rx.size() == before + 1; }, 5.0))
        << "the burst's first send waited for the sender's progress";
    progress_for(0.2, &b_);
    EXPECT_EQ(before + 1, b_.rx.size()) << "the burst's tail left before the sender progressed";
    a_.progress();
    EXPECT_TRUE(wait_for([&] { return b_.rx.size() == before + 3; }));
}

// osu_bw -c: the receiver acknowledges a window with one send after its progress, then checks
// the buffer for as long as that takes; the acknowledgement must not wait for that.
TEST_F(UctSrcQuietSenderCoalescing, am_short__a_single_send_after_progress_leaves_while_bursts_are_held)
{
    UCT_SRC_SKIP_WITH_AGENT("every posted send leaves when the agent sees it: there is no burst waiting for progress");
    // a holds bursts (and its last progress call rang the doorbell well within the window);
    // a sends one message and never progresses / expect it at b
    ASSERT_TRUE(learn_to_hold()) << "prompt bursts did not make the iface hold bursts";
    const size_t before = b_.rx.size();
    ASSERT_TRUE(post(1, 1));
    EXPECT_TRUE(wait_for_side(&b_, [&] { return b_.rx.size() == before + 1; }, 5.0))
        << "a lone send after progress waited for the sender's next progress call";
    EXPECT_NE(0, uct_src_test_tx_hold(a_.iface)) << "the iface stopped holding bursts";
}

// What a's handler sends back for each message it gets: two messages to b.
struct Replier {
    uct_ep_h ep;
    int runs = 0;
    static ucs_status_t handler(void *arg, void *data, size_t length, unsigned flags)
    {
        Replier *self          = static_cast<Replier*>(arg);
        const uint64_t payload = 0x7e;
        ++self->runs;
        if ((uct_ep_am_short(self->ep, kAmId, 1, &payload, sizeof(payload)) != UCS_OK) ||
            (uct_ep_am_short(self->ep, kAmId, 2, &payload, sizeof(payload)) != UCS_OK)) {
            self->runs = -1000;
        }
        return UCS_OK;
    }
};

TEST_F(UctSrcQuietSenderCoalescing, am_short__sends_posted_in_progress_leave_before_it_returns)
{
    // a holds bursts; its handler answers b's message with two sends, inside a's progress; a
    // progresses until the handler ran, and never again / expect both answers at b
    ASSERT_TRUE(agent_mode() || learn_to_hold()) << "prompt bursts did not make the iface hold bursts";
    Replier replier{ep_ab_};
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(a_.iface, kAmId, Replier::handler, &replier, 0));
    const size_t before    = b_.rx.size();
    const uint64_t payload = 0x5eed;
    ASSERT_EQ(UCS_OK, am_short(ep_ba_, 3, &payload, sizeof(payload)));
    ASSERT_TRUE(wait_for_side(&a_, [&] { return replier.runs != 0; }));
    ASSERT_EQ(1, replier.runs) << "the handler's sends failed";
    EXPECT_TRUE(wait_for_side(&b_, [&] { return b_.rx.size() == before + 2; }, 5.0))
        << "sends posted in progress waited for the next progress call";
}

// A window of one second: a burst the sender leaves for longer than that has waited.
class UctSrcQuietSenderCoalescing1s : public UctSrcQuietSenderCoalescing {
protected:
    std::vector<ConfigKv> config_for(int side) const override
    {
        return {{"TX_COALESCE", "1s"}};
    }

    // a holds bursts after many prompt ones; it sends two and leaves them 1.2 s (a
    // computation, a buffer check), then ends the burst with its progress or, ended_by_send,
    // with a third send and no progress; twice / expect the burst held until it ends and sent
    // then, the holding to survive the first such burst (a preemption among prompt bursts)
    // and to stop at the second: two more sends then reach b without a's progress
    void late_bursts_stop_the_holding(bool ended_by_send)
    {
        ASSERT_TRUE(learn_to_hold()) << "prompt bursts did not make the iface hold bursts";
        for (int i = 0; i < 32; ++i) {
            ASSERT_TRUE(prompt_burst());
        }
        for (int late = 1; late <= 2; ++late) {
            const size_t before = b_.rx.size();
            ASSERT_TRUE(post(1, 2));
            progress_for(1.2, &b_);
            EXPECT_LT(b_.rx.size(), before + 2) << "late burst " << late << " left before it ended";
            if (ended_by_send) {
                ASSERT_TRUE(post(3, 3));
            } else {
                a_.progress();
            }
            EXPECT_EQ(late == 1, uct_src_test_tx_hold(a_.iface) != 0) << "after late burst " << late;
            const size_t expected = before + (ended_by_send ? 3 : 2);
            ASSERT_TRUE(wait_for_side(&b_, [&] { return b_.rx.size() == expected; }, 5.0))
                << "late burst " << late << " waited after it ended";
        }
        const size_t before = b_.rx.size();
        ASSERT_TRUE(post(4, 5));
        EXPECT_TRUE(wait_for_side(&b_, [&] { return b_.rx.size() == before + 2; }, 5.0))
            << "the burst after two left waiting waited for the sender's progress";
    }
};

TEST_F(UctSrcQuietSenderCoalescing1s, am_short__bursts_left_waiting_stop_the_holding)
{
    UCT_SRC_SKIP_WITH_AGENT("every posted send leaves when the agent sees it: there is no burst waiting for progress");
    ASSERT_NO_FATAL_FAILURE(late_bursts_stop_the_holding(false));
}

// osu_latency -c: a reply's tail held while the application checks the buffer, the burst ended
// by its next send rather than by progress.
TEST_F(UctSrcQuietSenderCoalescing1s, am_short__bursts_ended_by_a_later_send_count_as_left_waiting)
{
    UCT_SRC_SKIP_WITH_AGENT("every posted send leaves when the agent sees it: there is no burst waiting for progress");
    ASSERT_NO_FATAL_FAILURE(late_bursts_stop_the_holding(true));
}

}  // namespace uct_src_test
