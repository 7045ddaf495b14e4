// Unit tests for src/link/link_addr.cc.
#include "link/link.h"

#include <gtest/gtest.h>

#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <unordered_set>

namespace srcnic {
namespace {

LinkAddr must_parse(const char *text)
{
    LinkAddr addr;
    EXPECT_EQ(SRCNIC_OK, LinkAddr::parse(text, &addr)) << text;
    return addr;
}

TEST(LinkAddr, operator_eq__same_and_different_fields)
{
    const LinkAddr a = must_parse("127.0.0.1:5000");
    EXPECT_TRUE(a == must_parse("127.0.0.1:5000"));
    EXPECT_TRUE(a != must_parse("127.0.0.1:5001"));
    EXPECT_TRUE(a != must_parse("127.0.0.2:5000"));
    EXPECT_TRUE(a != must_parse("[::1]:5000"));
    EXPECT_TRUE(must_parse("[fe80::1%1]:5") != must_parse("[fe80::1%2]:5"));
    // Every byte of an IPv6 address counts, the first and the last.
    EXPECT_TRUE(must_parse("[2001:db8::1]:5") == must_parse("[2001:db8::1]:5"));
    EXPECT_TRUE(must_parse("[2001:db8::1]:5") != must_parse("[2001:db8::2]:5"));
    EXPECT_TRUE(must_parse("[2001:db8::1]:5") != must_parse("[3001:db8::1]:5"));
    EXPECT_TRUE(LinkAddr() == LinkAddr());
}

TEST(LinkAddr, operator_eq__ignores_bytes_past_an_ipv4_address)
{
    LinkAddr a = must_parse("10.1.2.3:7");
    LinkAddr b = a;
    b.ip[10] = 0xff;
    EXPECT_TRUE(a == b);
    EXPECT_EQ(a.hash(), b.hash());
}

TEST(LinkAddr, hash__equal_addresses_equal_hashes_and_spread)
{
    EXPECT_EQ(must_parse("[::1]:9").hash(), must_parse("[::1]:9").hash());
    std::unordered_set<size_t> hashes;
    for (uint32_t port = 1; port <= 1000; ++port) {
        LinkAddr addr;
        ASSERT_EQ(SRCNIC_OK, LinkAddr::from_ip("127.0.0.1", static_cast<uint16_t>(port), &addr));
        hashes.insert(addr.hash());
    }
    EXPECT_EQ(1000u, hashes.size());
}

TEST(LinkAddr, to_string__both_families_scope_and_unset)
{
    EXPECT_EQ("1.2.3.4:5000", must_parse("1.2.3.4:5000").to_string());
    EXPECT_EQ("[::1]:5000", must_parse("[::1]:5000").to_string());
    EXPECT_EQ("[fe80::1%2]:0", must_parse("[fe80::1%2]:0").to_string());
    EXPECT_EQ("[2001:db8::1]:65535", must_parse("[2001:db8:0::1]:65535").to_string());
    EXPECT_EQ("unset", LinkAddr().to_string());
}

TEST(LinkAddr, parse__ipv4)
{
    const LinkAddr addr = must_parse("192.0.2.10:4791");
    EXPECT_EQ(AF_INET, addr.family);
    EXPECT_EQ(4791, addr.port);
    EXPECT_EQ(0u, addr.scope_id);
    EXPECT_EQ(192, addr.ip[0]);
    EXPECT_EQ(0, addr.ip[1]);
    EXPECT_EQ(2, addr.ip[2]);
    EXPECT_EQ(10, addr.ip[3]);
}

TEST(LinkAddr, parse__ipv6_and_scope)
{
    LinkAddr addr = must_parse("[::1]:5000");
    EXPECT_EQ(AF_INET6, addr.family);
    EXPECT_EQ(5000, addr.port);
    EXPECT_EQ(1, addr.ip[15]);
    EXPECT_EQ(0u, addr.scope_id);

    addr = must_parse("[fe80::1%7]:1");
    EXPECT_EQ(7u, addr.scope_id);
    EXPECT_EQ(0xfe, addr.ip[0]);

    // An interface name is a scope too ("lo" exists wherever 127.0.0.1 does).
    const unsigned lo = if_nametoindex("lo");
    if (lo != 0) {
        EXPECT_EQ(lo, must_parse("[fe80::1%lo]:1").scope_id);
    }
}

TEST(LinkAddr, parse__port_zero_and_limits)
{
    EXPECT_EQ(0, must_parse("127.0.0.1:0").port);
    EXPECT_EQ(65535, must_parse("127.0.0.1:65535").port);
    LinkAddr addr;
    EXPECT_EQ(SRCNIC_ERR_INVALID_PARAM, LinkAddr::parse("127.0.0.1:65536", &addr));
    EXPECT_EQ(SRCNIC_ERR_INVALID_PARAM, LinkAddr::parse("127.0.0.1:000001", &addr));
}

TEST(LinkAddr, parse__rejects_bad_text_and_leaves_output_alone)
{
    const char *bad[] = {
        "",               "127.0.0.1",        "127.0.0.1:",      ":5000",
        "127.0.0.1:50x",  "127.0.0.1:-1",     "127.0.0.1: 5",    "256.0.0.1:5",
        "localhost:5000", "::1:5000",         "[::1]5000",       "[::1]:",
        "[::1:5000",      "[127.0.0.1]:5000", "[::1%]:5",        "[::1%nosuchif0]:5",
        "1.2.3.4:5:6",    "[::1]:5000x",      "[fe80::1%99999999999]:1",
    };
    for (const char *text : bad) {
        LinkAddr addr = must_parse("10.0.0.1:1");
        const LinkAddr before = addr;
        EXPECT_EQ(SRCNIC_ERR_INVALID_PARAM, LinkAddr::parse(text, &addr)) << text;
        EXPECT_TRUE(addr == before) << text;
    }
    LinkAddr addr;
    EXPECT_EQ(SRCNIC_ERR_INVALID_PARAM, LinkAddr::parse(nullptr, &addr));
    EXPECT_EQ(SRCNIC_ERR_INVALID_PARAM, LinkAddr::parse("1.2.3.4:5", nullptr));
}

TEST(LinkAddr, parse__round_trips_through_to_string)
{
    const char *texts[] = {"0.0.0.0:0", "127.0.0.1:1", "255.255.255.255:65535", "[::]:0",
                           "[::1]:80", "[fe80::fc:ff:fe00:1%3]:4791"};
    for (const char *text : texts) {
        EXPECT_EQ(text, must_parse(text).to_string());
    }
}

TEST(LinkAddr, from_ip__both_families)
{
    LinkAddr addr;
    ASSERT_EQ(SRCNIC_OK, LinkAddr::from_ip("127.0.0.1", 42, &addr));
    EXPECT_TRUE(addr == must_parse("127.0.0.1:42"));
    ASSERT_EQ(SRCNIC_OK, LinkAddr::from_ip("::1", 43, &addr));
    EXPECT_TRUE(addr == must_parse("[::1]:43"));
    ASSERT_EQ(SRCNIC_OK, LinkAddr::from_ip("fe80::1%4", 44, &addr));
    EXPECT_EQ(4u, addr.scope_id);
}

TEST(LinkAddr, from_ip__rejects_non_numeric_and_bracketed)
{
    LinkAddr addr;
    EXPECT_EQ(SRCNIC_ERR_INVALID_PARAM, LinkAddr::from_ip("localhost", 1, &addr));
    EXPECT_EQ(SRCNIC_ERR_INVALID_PARAM, LinkAddr::from_ip("[::1]", 1, &addr));
    EXPECT_EQ(SRCNIC_ERR_INVALID_PARAM, LinkAddr::from_ip("127.0.0.1:5", 1, &addr));
    EXPECT_EQ(SRCNIC_ERR_INVALID_PARAM, LinkAddr::from_ip("", 1, &addr));
    EXPECT_EQ(SRCNIC_ERR_INVALID_PARAM, LinkAddr::from_ip(nullptr, 1, &addr));
    EXPECT_EQ(AF_UNSPEC, addr.family);
}

} // namespace
} // namespace srcnic
