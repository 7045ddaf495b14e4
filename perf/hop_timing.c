/*
 * hop_timing: where a ping-pong's round trip goes, measured from outside the program.
 *
 * An LD_PRELOAD library for perf/hop-breakdown.sh. It wraps send, sendto, sendmsg, sendmmsg,
 * recv, recvfrom, recvmsg and recvmmsg (the engine uses all but sendto's and recv's twins
 * depending on the batch), and logs, per thread, the time-stamp counter before and after every send and every receive
 * that returned a datagram. At exit it takes the two threads with the most events (the
 * ping-pong's initiator, whose first event is a send, and its responder) and walks the round
 * trips: initiator send -> the responder's first receive that ended after the send began ->
 * the responder's next send -> the initiator's first receive that ended after that -> the
 * initiator's next send. Per round trip:
 *
 *   transit    send entered -> the datagram returned by the other thread's receive: the
 *              kernel's send (on loopback the whole delivery runs in it), and how long the
 *              receiver took to notice (its poll loop)
 *   responder  receive returned -> the reply's send entered: all user-space work there
 *   initiator  receive returned -> the next request's send entered (including the program's
 *              own timing and bookkeeping)
 *   send, recv the two system calls alone
 *
 * It prints the medians (skipping the first tenth as warm-up) in nanoseconds to stderr, one
 * line starting "hop_timing:". The logs hold 4 Mi events per thread; later events are not
 * logged. Linux, x86-64 (rdtsc with an invariant counter), glibc.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <x86intrin.h>

#define HT_MAX_EVENTS (1L << 22)
#define HT_MAX_THREADS 64

enum { HT_SEND, HT_RECV };

typedef struct {
    uint64_t enter, leave;
    int kind;
} ht_event_t;

/* One per thread, each on cache lines of its own (128 bytes: the adjacent-line prefetcher
 * pairs lines): every stamp writes n, and threads sharing a line would make each other's
 * stamps wait for it, inside the very intervals measured. */
typedef struct {
    ht_event_t *ev;
    long n;
} __attribute__((aligned(128))) ht_log_t;

static ht_log_t g_logs[HT_MAX_THREADS];
static int g_nlogs;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread ht_log_t *t_log;
static double g_ns_per_tick;

static ht_log_t *ht_log(void)
{
    if (t_log == NULL) {
        pthread_mutex_lock(&g_lock);
        if (g_nlogs < HT_MAX_THREADS) {
            ht_log_t *log = &g_logs[g_nlogs];
            log->ev = malloc(sizeof(ht_event_t) * HT_MAX_EVENTS);
            if (log->ev != NULL) {
                t_log = log;
                ++g_nlogs;
            }
        }
        pthread_mutex_unlock(&g_lock);
    }
    return t_log;
}

static void ht_record(int kind, uint64_t enter, uint64_t leave)
{
    ht_log_t *log = ht_log();
    if (log != NULL && log->n < HT_MAX_EVENTS) {
        log->ev[log->n].enter = enter;
        log->ev[log->n].leave = leave;
        log->ev[log->n].kind = kind;
        ++log->n;
    }
}

typedef ssize_t (*ht_send_fn)(int, const void *, size_t, int);
typedef ssize_t (*ht_sendto_fn)(int, const void *, size_t, int, const struct sockaddr *,
                                socklen_t);
typedef ssize_t (*ht_recv_fn)(int, void *, size_t, int);
typedef ssize_t (*ht_recvfrom_fn)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
typedef ssize_t (*ht_sendmsg_fn)(int, const struct msghdr *, int);
typedef ssize_t (*ht_recvmsg_fn)(int, struct msghdr *, int);
typedef int (*ht_sendmmsg_fn)(int, struct mmsghdr *, unsigned int, int);
typedef int (*ht_recvmmsg_fn)(int, struct mmsghdr *, unsigned int, int, struct timespec *);

#define HT_REAL(name, type) \
    static type real; \
    if (real == NULL) { \
        real = (type)dlsym(RTLD_NEXT, name); \
    }

ssize_t send(int fd, const void *buf, size_t len, int flags)
{
    HT_REAL("send", ht_send_fn);
    const uint64_t enter = __rdtsc();
    const ssize_t ret = real(fd, buf, len, flags);
    ht_record(HT_SEND, enter, __rdtsc());
    return ret;
}

ssize_t sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *to,
               socklen_t to_len)
{
    HT_REAL("sendto", ht_sendto_fn);
    const uint64_t enter = __rdtsc();
    const ssize_t ret = real(fd, buf, len, flags, to, to_len);
    ht_record(HT_SEND, enter, __rdtsc());
    return ret;
}

ssize_t recv(int fd, void *buf, size_t len, int flags)
{
    HT_REAL("recv", ht_recv_fn);
    const uint64_t enter = __rdtsc();
    const ssize_t ret = real(fd, buf, len, flags);
    if (ret >= 0) {
        ht_record(HT_RECV, enter, __rdtsc());
    }
    return ret;
}

ssize_t recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *from,
                 socklen_t *from_len)
{
    HT_REAL("recvfrom", ht_recvfrom_fn);
    const uint64_t enter = __rdtsc();
    const ssize_t ret = real(fd, buf, len, flags, from, from_len);
    if (ret >= 0) {
        ht_record(HT_RECV, enter, __rdtsc());
    }
    return ret;
}

ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
    HT_REAL("sendmsg", ht_sendmsg_fn);
    const uint64_t enter = __rdtsc();
    const ssize_t ret = real(fd, msg, flags);
    ht_record(HT_SEND, enter, __rdtsc());
    return ret;
}

int sendmmsg(int fd, struct mmsghdr *msgs, unsigned int n, int flags)
{
    HT_REAL("sendmmsg", ht_sendmmsg_fn);
    const uint64_t enter = __rdtsc();
    const int ret = real(fd, msgs, n, flags);
    ht_record(HT_SEND, enter, __rdtsc());
    return ret;
}

ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
    HT_REAL("recvmsg", ht_recvmsg_fn);
    const uint64_t enter = __rdtsc();
    const ssize_t ret = real(fd, msg, flags);
    if (ret >= 0) {
        ht_record(HT_RECV, enter, __rdtsc());
    }
    return ret;
}

int recvmmsg(int fd, struct mmsghdr *msgs, unsigned int n, int flags, struct timespec *timeout)
{
    HT_REAL("recvmmsg", ht_recvmmsg_fn);
    const uint64_t enter = __rdtsc();
    const int ret = real(fd, msgs, n, flags, timeout);
    if (ret > 0) {
        ht_record(HT_RECV, enter, __rdtsc());
    }
    return ret;
}

static uint64_t ht_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

__attribute__((constructor)) static void ht_start(void)
{
    /* The counter's rate, against the monotonic clock over 20 ms. */
    const uint64_t ns0 = ht_mono_ns(), t0 = __rdtsc();
    while (ht_mono_ns() - ns0 < 20000000ull) {
    }
    g_ns_per_tick = (double)(ht_mono_ns() - ns0) / (double)(__rdtsc() - t0);
}

static int ht_cmp(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double ht_median_ns(uint64_t *v, long n)
{
    if (n == 0) {
        return 0;
    }
    qsort(v, (size_t)n, sizeof(*v), ht_cmp);
    return (double)v[n / 2] * g_ns_per_tick;
}

/* The first event of log at or after *pos that is of kind and, if after != 0, ended after it. */
static ht_event_t *ht_next(ht_log_t *log, long *pos, int kind, uint64_t after)
{
    while (*pos < log->n &&
           !(log->ev[*pos].kind == kind && (after == 0 || log->ev[*pos].leave > after))) {
        ++*pos;
    }
    return *pos < log->n ? &log->ev[*pos] : NULL;
}

__attribute__((destructor)) static void ht_report(void)
{
    int a = -1, b = -1;
    for (int i = 0; i < g_nlogs; ++i) {
        if (a < 0 || g_logs[i].n > g_logs[a].n) {
            b = a;
            a = i;
        } else if (b < 0 || g_logs[i].n > g_logs[b].n) {
            b = i;
        }
    }
    if (a < 0 || b < 0 || g_logs[a].n == 0 || g_logs[b].n == 0) {
        fprintf(stderr, "hop_timing: no ping-pong seen (%d threads logged)\n", g_nlogs);
        return;
    }
    ht_log_t *ini = &g_logs[a], *rsp = &g_logs[b];
    if (ini->ev[0].kind != HT_SEND) {
        ht_log_t *t = ini;
        ini = rsp;
        rsp = t;
    }
    const long cap = ini->n;
    uint64_t *v[6];
    for (int i = 0; i < 6; ++i) {
        v[i] = malloc(sizeof(uint64_t) * (size_t)cap);
        if (v[i] == NULL) {
            return;
        }
    }
    long k = 0, i = 0, r = 0, trips = 0;
    for (;;) {
        ht_event_t *req = ht_next(ini, &i, HT_SEND, 0);
        ht_event_t *arr = req ? ht_next(rsp, &r, HT_RECV, req->enter) : NULL;
        ht_event_t *rep = arr ? ht_next(rsp, &r, HT_SEND, 0) : NULL;
        long j = i;
        ht_event_t *back = rep ? ht_next(ini, &j, HT_RECV, rep->enter) : NULL;
        long j2 = j;
        ht_event_t *next = back ? ht_next(ini, &j2, HT_SEND, 0) : NULL;
        if (next == NULL) {
            break;
        }
        if (trips++ >= cap / 20) {   /* the first tenth of the round trips is warm-up */
            v[0][k] = (arr->leave - req->enter + back->leave - rep->enter) / 2;
            v[1][k] = rep->enter - arr->leave;
            v[2][k] = next->enter - back->leave;
            v[3][k] = req->leave - req->enter;
            v[4][k] = arr->leave - arr->enter;
            v[5][k] = back->leave - req->enter;
            ++k;
        }
        i = j2;
    }
    fprintf(stderr,
            "hop_timing: %ld round trips, medians in ns: round_trip %.0f transit %.0f "
            "responder %.0f initiator %.0f send %.0f recv %.0f\n",
            k, ht_median_ns(v[5], k), ht_median_ns(v[0], k), ht_median_ns(v[1], k),
            ht_median_ns(v[2], k), ht_median_ns(v[3], k), ht_median_ns(v[4], k));
}
