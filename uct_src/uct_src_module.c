/* The "src" UCT module: loaded into a stock UCX (see srcrun). It is built against UCX's
 * internal headers so that the transport can derive from uct_base_iface_t; it registers no
 * component until the transport is implemented, so nothing here is selectable by UCP yet. */
#include <srcnic/srcnic.h>

#include <uct/base/uct_iface.h>
#include <uct/base/uct_md.h>
#include <ucs/debug/log.h>

/* srcnic_status_t is passed to UCX unchanged: prove the values agree at compile time. */
#define UCT_SRC_CHECK_STATUS(_name, _value, _desc) \
    UCS_STATIC_ASSERT((int)SRCNIC_##_name == (int)UCS_##_name);

static void UCS_F_CTOR uct_src_module_init(void)
{
    SRCNIC_FOREACH_STATUS(UCT_SRC_CHECK_STATUS)
    ucs_debug("src module loaded (srcnic %s), no transport registered yet", srcnic_version());
}
