/* A preload library for the benchmarks: records the srcnic engines the src module creates, so a
 * benchmark can report their connection state (src_probe_state()), and with
 * SRC_PROBE_REPORT=1 prints each engine's IP and port to stderr when it is created and its
 * counters (then its address again, addr=IP:PORT) when it is destroyed.
 *
 * Load it ahead of the module (LD_PRELOAD=libsrc_probe.so:libuct_src.so): the module calls
 * srcnic_nic_create/destroy through its PLT, so these definitions take their place and hand
 * on to the module's own (RTLD_NEXT). Benchmarks find src_probe_state with
 * dlsym(RTLD_DEFAULT), and report "n/a" where it is absent (transports without an engine). */
#define _GNU_SOURCE
#include <srcnic/srcnic.h>

#include <arpa/inet.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define SRC_PROBE_MAX_NICS 64

typedef srcnic_status_t (*nic_create_fn_t)(const srcnic_config_t *, srcnic_nic_t **);
typedef void (*nic_destroy_fn_t)(srcnic_nic_t *);

static srcnic_nic_t *probe_nics[SRC_PROBE_MAX_NICS];  /* engines alive, NULL = free slot */

static void *probe_next(const char *name)
{
    void *fn = dlsym(RTLD_NEXT, name);

    if (fn == NULL) {
        fprintf(stderr, "src_probe: %s not found after the probe: load the src module after "
                        "libsrc_probe.so\n", name);
        abort();
    }
    return fn;
}

/* "src_probe: pid P engine at IP:PORT" in one write (the attacker test finds its victims so). */
static void probe_report_addr(srcnic_nic_t *nic)
{
    srcnic_nic_addr_t addr;
    char ip[INET6_ADDRSTRLEN] = "?", line[128];
    int len;

    srcnic_nic_query_addr(nic, &addr);
    inet_ntop(addr.family, addr.ip, ip, sizeof(ip));
    len = snprintf(line, sizeof(line), "src_probe: pid %d engine at %s:%u\n", (int)getpid(), ip,
                   (unsigned)addr.port);
    if ((len > 0) && (write(STDERR_FILENO, line, (size_t)len) < 0)) {
        return; /* the report is informative only */
    }
}

srcnic_status_t srcnic_nic_create(const srcnic_config_t *config, srcnic_nic_t **nic_p)
{
    static nic_create_fn_t next;
    srcnic_status_t status;
    int i;

    if (next == NULL) {
        next = (nic_create_fn_t)probe_next("srcnic_nic_create");
    }
    status = next(config, nic_p);
    if (status == SRCNIC_OK) {
        const char *report = getenv("SRC_PROBE_REPORT");
        for (i = 0; i < SRC_PROBE_MAX_NICS; ++i) {
            if (probe_nics[i] == NULL) {
                probe_nics[i] = *nic_p;
                break;
            }
        }
        if ((report != NULL) && (report[0] == '1')) {
            probe_report_addr(*nic_p);
        }
    }
    return status;
}

/* Appends to line[*len..size - 2] (a newline still fits after it), truncating. */
static void append(char *line, size_t size, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void append(char *line, size_t size, size_t *len, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (*len >= size - 2) {
        return;
    }
    va_start(ap, fmt);
    n = vsnprintf(line + *len, size - 1 - *len, fmt, ap);
    va_end(ap);
    if (n > 0) {
        *len += ((size_t)n < size - 2 - *len) ? (size_t)n : size - 2 - *len;
    }
}

static void probe_report(srcnic_nic_t *nic)
{
    /* One write per report: the ranks of a job share the launcher's output, and a report
     * written in pieces came out interleaved with another rank's. */
    char line[4096], ip[INET6_ADDRSTRLEN] = "?";
    srcnic_nic_addr_t addr;
    size_t len = 0;
    int c;

    append(line, sizeof(line), &len, "src_probe: pid %d engine connections %u "
           "state_bytes_per_conn %zu", (int)getpid(), srcnic_nic_num_connections(nic),
           srcnic_conn_state_bytes(nic));
    for (c = 0; c < SRCNIC_CNT_LAST; ++c) {
        uint64_t v = srcnic_nic_counter(nic, (srcnic_counter_t)c);
        if (v != 0) {
            append(line, sizeof(line), &len, " %s=%llu",
                   srcnic_counter_name((srcnic_counter_t)c), (unsigned long long)v);
        }
    }
    srcnic_nic_query_addr(nic, &addr);
    inet_ntop(addr.family, addr.ip, ip, sizeof(ip));
    append(line, sizeof(line), &len, " addr=%s:%u", ip, (unsigned)addr.port);
    line[len++] = '\n';
    if (write(STDERR_FILENO, line, len) < 0) {
        return; /* the report is informative only */
    }
}

void srcnic_nic_destroy(srcnic_nic_t *nic)
{
    static nic_destroy_fn_t next;
    const char *report = getenv("SRC_PROBE_REPORT");
    int i;

    if (next == NULL) {
        next = (nic_destroy_fn_t)probe_next("srcnic_nic_destroy");
    }
    for (i = 0; i < SRC_PROBE_MAX_NICS; ++i) {
        if (probe_nics[i] == nic) {
            probe_nics[i] = NULL;
        }
    }
    if ((nic != NULL) && (report != NULL) && (report[0] == '1')) {
        probe_report(nic);
    }
    next(nic);
}

/* Engines alive, their open connections, the engine state those connections hold (bytes),
 * and two health counters summed over the engines. Returns 0. */
int src_probe_state(unsigned *nics_p, unsigned *conns_p, size_t *bytes_p,
                    unsigned long long *retransmits_p, unsigned long long *timeouts_p)
{
    unsigned nics = 0, conns = 0;
    unsigned long long retransmits = 0, timeouts = 0;
    size_t bytes = 0;
    int i;

    for (i = 0; i < SRC_PROBE_MAX_NICS; ++i) {
        srcnic_nic_t *nic = probe_nics[i];
        if (nic == NULL) {
            continue;
        }
        ++nics;
        conns       += srcnic_nic_num_connections(nic);
        bytes       += srcnic_nic_num_connections(nic) * srcnic_conn_state_bytes(nic);
        retransmits += srcnic_nic_counter(nic, SRCNIC_CNT_RETRANSMITS);
        timeouts    += srcnic_nic_counter(nic, SRCNIC_CNT_TIMEOUTS);
    }
    *nics_p        = nics;
    *conns_p       = conns;
    *bytes_p       = bytes;
    *retransmits_p = retransmits;
    *timeouts_p    = timeouts;
    return 0;
}
