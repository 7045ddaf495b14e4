// Status names and descriptions for srcnic_status_t.
#include <srcnic/status.h>

extern "C" const char *srcnic_status_string(srcnic_status_t status)
{
    switch (static_cast<int>(status)) {
#define SRCNIC_STATUS_CASE(_name, _value, _desc) \
    case (_value):                               \
        return _desc;
        SRCNIC_FOREACH_STATUS(SRCNIC_STATUS_CASE)
#undef SRCNIC_STATUS_CASE
    default:
        return "unknown status";
    }
}
