// Unit tests for src/core/status.cc.
#include <srcnic/status.h>

#include <ucs/type/status.h>

#include <gtest/gtest.h>

#include <cstring>

TEST(srcnic_status_string, every_status_has_its_own_text)
{
#define CHECK_STATUS(_name, _value, _desc) \
    EXPECT_STREQ(_desc, srcnic_status_string(SRCNIC_##_name));
    SRCNIC_FOREACH_STATUS(CHECK_STATUS)
#undef CHECK_STATUS
}

TEST(srcnic_status_string, unknown_value)
{
    EXPECT_STREQ("unknown status", srcnic_status_string(static_cast<srcnic_status_t>(-99)));
    EXPECT_STREQ("unknown status", srcnic_status_string(static_cast<srcnic_status_t>(7)));
}

TEST(srcnic_status, values_equal_ucs_status)
{
#define CHECK_VALUE(_name, _value, _desc) \
    EXPECT_EQ(static_cast<int>(UCS_##_name), static_cast<int>(SRCNIC_##_name)) << #_name;
    SRCNIC_FOREACH_STATUS(CHECK_VALUE)
#undef CHECK_VALUE
}
