/* The srcnic engine's public C API: a software SRC NIC that the UCT transport drives. */
#ifndef SRCNIC_SRCNIC_H
#define SRCNIC_SRCNIC_H

#include <srcnic/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The engine's version, "MAJOR.MINOR.PATCH". */
const char *srcnic_version(void);

#ifdef __cplusplus
}
#endif

#endif
