// The engine's version string, from the build's configure.
#include "config.h"

#include <srcnic/srcnic.h>

extern "C" const char *srcnic_version(void)
{
    return PACKAGE_VERSION;
}
