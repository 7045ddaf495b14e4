/* Status codes of the srcnic engine API: each maps one-to-one onto the ucs_status_t of the
 * same name and value, so the UCT glue passes them through unchanged. */
#ifndef SRCNIC_STATUS_H
#define SRCNIC_STATUS_H

/* Marks the functions of the public API: the engine is built with hidden visibility, so that
 * its internal calls bind within the library (direct, and open to inlining), and only these are
 * exported. They stay preemptible: a preload library can wrap them (perf/src_probe.c). */
#if defined(__GNUC__)
#define SRCNIC_API __attribute__((visibility("default")))
#else
#define SRCNIC_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* name, value (identical to UCS_<name>), description */
#define SRCNIC_FOREACH_STATUS(_) \
    _(OK,                   0,   "success") \
    _(INPROGRESS,           1,   "operation in progress") \
    _(ERR_NO_MESSAGE,      -1,   "no pending message") \
    _(ERR_NO_RESOURCE,     -2,   "no resources are available to initiate the operation") \
    _(ERR_IO_ERROR,        -3,   "input/output error") \
    _(ERR_NO_MEMORY,       -4,   "out of memory") \
    _(ERR_INVALID_PARAM,   -5,   "invalid parameter") \
    _(ERR_UNREACHABLE,     -6,   "destination is unreachable") \
    _(ERR_INVALID_ADDR,    -7,   "address not valid") \
    _(ERR_MESSAGE_TRUNCATED, -9, "message truncated") \
    _(ERR_BUFFER_TOO_SMALL, -11, "user-provided buffer too small") \
    _(ERR_NO_ELEM,        -12,   "no such element") \
    _(ERR_NO_DEVICE,      -14,   "no such device") \
    _(ERR_BUSY,           -15,   "device is busy") \
    _(ERR_CANCELED,       -16,   "request canceled") \
    _(ERR_ALREADY_EXISTS, -18,   "element already exists") \
    _(ERR_OUT_OF_RANGE,   -19,   "index out of range") \
    _(ERR_TIMED_OUT,      -20,   "operation timed out") \
    _(ERR_UNSUPPORTED,    -22,   "operation is not supported") \
    _(ERR_REJECTED,       -23,   "operation rejected by remote peer") \
    _(ERR_NOT_CONNECTED,  -24,   "endpoint is not connected") \
    _(ERR_CONNECTION_RESET, -25, "connection reset by remote peer") \
    _(ERR_ENDPOINT_TIMEOUT, -80, "endpoint timeout")

typedef enum srcnic_status {
#define SRCNIC_STATUS_ENUM(_name, _value, _desc) SRCNIC_##_name = (_value),
    SRCNIC_FOREACH_STATUS(SRCNIC_STATUS_ENUM)
#undef SRCNIC_STATUS_ENUM
    /* A remote access was refused by the target's memory-region check (bad rkey, out of
     * bounds, or no permission); nothing was read or written. */
    SRCNIC_ERR_REMOTE_ACCESS = SRCNIC_ERR_REJECTED
} srcnic_status_t;

/* A static, human-readable description of a status ("unknown status" for other values). */
SRCNIC_API const char *srcnic_status_string(srcnic_status_t status);

#ifdef __cplusplus
}
#endif

#endif
