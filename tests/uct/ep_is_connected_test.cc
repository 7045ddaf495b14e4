// uct_ep_is_connected() (UCX >= 1.14; UCP asks it whether an existing endpoint already goes to
// the interface of a worker address): through the public UCT entry point, which dispatches to
// the transport's ep_is_connected op. A src endpoint is connected to exactly the interface it
// was created for: the same IPv4 address, engine port, engine incarnation and QP; never to an
// endpoint address (src connects to interfaces only). Built only against UCX >= 1.14.
#include "uct/src_internal.h"
#include "uct/uct_src_fixture.h"

#if UCT_SRC_HAVE_EP_IS_CONNECTED

#include <vector>

namespace uct_src_test {
namespace {

int is_connected(uct_ep_h ep, const Side &to)
{
    return uct_src_test_ep_is_connected(ep, to.dev(), to.addr(), nullptr);
}

}  // namespace

TEST_F(UctSrc, ep_is_connected__to_the_interface_it_was_created_for)
{
    EXPECT_TRUE(is_connected(ep_ab_, b_));
    EXPECT_TRUE(is_connected(ep_ba_, a_));
    // The other interface of the pair: another engine in embedded mode, another QP of the
    // same engine on the node agent.
    EXPECT_FALSE(is_connected(ep_ab_, a_)) << "a's ep to b claims a's own interface";
    EXPECT_FALSE(is_connected(ep_ba_, b_)) << "b's ep to a claims b's own interface";
}

TEST_F(UctSrc, ep_is_connected__not_to_a_third_interface)
{
    Side c;
    c.name = "c";
    ASSERT_NO_FATAL_FAILURE(open_side(&c, md_b_, {}));
    uct_ep_h ep_ac = create_ep(&a_, c);
    ASSERT_NE(nullptr, ep_ac);
    EXPECT_FALSE(is_connected(ep_ab_, c)) << "a's ep to b claims c";
    EXPECT_TRUE(is_connected(ep_ac, c));
    EXPECT_FALSE(is_connected(ep_ac, b_)) << "a's ep to c claims b";
    uct_ep_destroy(ep_ac);
    close_side(&c);
}

TEST_F(UctSrc, ep_is_connected__not_when_one_field_of_the_address_differs)
{
    // An unaltered copy first, so that a "no" below is the field's doing.
    std::vector<uint8_t> dev = b_.dev_addr, iface = b_.iface_addr;
    ASSERT_TRUE(uct_src_test_ep_is_connected(ep_ab_, (const uct_device_addr_t *)dev.data(),
                                             (const uct_iface_addr_t *)iface.data(), nullptr));
    for (const char *field : {"ip", "port", "qpn", "incarnation"}) {
        dev = b_.dev_addr;
        iface = b_.iface_addr;
        ASSERT_EQ(0, uct_src_test_alter_address(dev.data(), dev.size(), iface.data(),
                                                iface.size(), field)) << field;
        EXPECT_FALSE(uct_src_test_ep_is_connected(ep_ab_, (const uct_device_addr_t *)dev.data(),
                                                  (const uct_iface_addr_t *)iface.data(),
                                                  nullptr))
            << "connected to b's address with another " << field;
    }
}

TEST_F(UctSrc, ep_is_connected__never_to_an_endpoint_address)
{
    // Whatever the bytes, src endpoints are not connected to endpoints (no CONNECT_TO_EP).
    const std::vector<uint8_t> ep_addr(b_.iface_addr);
    EXPECT_FALSE(uct_src_test_ep_is_connected(ep_ab_, b_.dev(), b_.addr(),
                                              (const uct_ep_addr_t *)ep_addr.data()));
}

TEST_F(UctSrc, ep_is_connected__without_the_interface_address_is_an_error_not_a_crash)
{
    LogCapture::ExpectErrors expect;
    EXPECT_FALSE(uct_src_test_ep_is_connected(ep_ab_, b_.dev(), nullptr, nullptr));
    EXPECT_FALSE(uct_src_test_ep_is_connected(ep_ab_, nullptr, b_.addr(), nullptr));
    EXPECT_EQ(2u, expect.count()) << "UCX's check of the field mask logs an error each time";
}

}  // namespace uct_src_test

#endif  // UCT_SRC_HAVE_EP_IS_CONNECTED
