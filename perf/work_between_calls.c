/*
 * What user-space work between a receive and the next send costs a UDP ping-pong beyond the
 * work itself. Two threads (CPUs 0 and 1) ping-pong one 104-byte datagram (the size of the
 * engine's 8-byte SEND) over connected sockets on 127.0.0.1; after each receive, both ends spin
 * W ns of register-only arithmetic (no memory, a few instructions of code) before they send.
 * Blocks of round trips with W = 0, 150 and 300 ns take turns, so that every amount sees the
 * same machine states. Per amount it prints the medians of the round trip, of the time inside
 * send() (on loopback the whole delivery runs in it) and the round trip's excess over the
 * W = 0 round trip plus the 2 W of work:
 *
 *   cc -O2 -pthread -o work_between_calls perf/work_between_calls.c && ./work_between_calls
 *
 * If work only added itself, the excess would be about 0. On the machine of perf/README.md it
 * was mostly 10-80 ns for 300 ns of work at each end, once as much as the work itself.
 * Linux, x86-64 (rdtsc, calibrated against CLOCK_MONOTONIC). Sends only to itself on 127.0.0.1.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <x86intrin.h>

#define DGRAM 104
#define BLOCK 4000      /* round trips per block */
#define CYCLES 10       /* blocks per amount */
#define NAMOUNTS 3

static const unsigned g_work_ns[NAMOUNTS] = {0, 150, 300};
static int g_fd[2];
static double g_ticks_per_ns;
static pthread_barrier_t g_barrier;
static volatile unsigned g_amount;           /* index into g_work_ns of the current block */
static uint64_t *g_rtt[NAMOUNTS], *g_send[NAMOUNTS][2];
static size_t g_n[NAMOUNTS];

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Spins until `ticks` time-stamp-counter ticks have passed, with arithmetic in registers. */
static void work(uint64_t ticks)
{
    if (ticks == 0) {
        return;
    }
    const uint64_t end = __rdtsc() + ticks;
    uint64_t x = 1;
    while (__rdtsc() < end) {
        for (int i = 0; i < 16; ++i) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
        }
    }
    __asm__ volatile("" : : "r"(x));
}

static void pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static void *end(void *arg)
{
    const int me = (int)(intptr_t)arg;
    char buf[DGRAM + 1] = {0};
    pin(me);
    for (unsigned cycle = 0; cycle < CYCLES; ++cycle) {
        for (unsigned a = 0; a < NAMOUNTS; ++a) {
            pthread_barrier_wait(&g_barrier);
            const uint64_t ticks = (uint64_t)(g_work_ns[a] * g_ticks_per_ns);
            for (unsigned i = 0; i < BLOCK; ++i) {
                const uint64_t t0 = __rdtsc();
                if (me == 1) {
                    while (recv(g_fd[1], buf, sizeof(buf), MSG_DONTWAIT) < 0) {
                    }
                    work(ticks);
                }
                const uint64_t s0 = __rdtsc();
                if (send(g_fd[me], buf, DGRAM, MSG_DONTWAIT) != DGRAM) {
                    perror("send");
                    exit(1);
                }
                const uint64_t s1 = __rdtsc();
                if (me == 0) {
                    while (recv(g_fd[0], buf, sizeof(buf), MSG_DONTWAIT) < 0) {
                    }
                    work(ticks);
                }
                const size_t k = g_n[a] + i;
                g_send[a][me][k] = s1 - s0;
                if (me == 0) {
                    g_rtt[a][k] = __rdtsc() - t0;
                }
            }
            pthread_barrier_wait(&g_barrier);
            if (me == 0) {
                g_n[a] += BLOCK;
            }
        }
    }
    return NULL;
}

static int cmp(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double median_ns(uint64_t *v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp);
    return v[n / 2] / g_ticks_per_ns;
}

int main(void)
{
    const uint64_t c0 = __rdtsc(), n0 = mono_ns();
    while (mono_ns() - n0 < 200000000u) {
    }
    g_ticks_per_ns = (double)(__rdtsc() - c0) / (double)(mono_ns() - n0);

    struct sockaddr_in addr[2];
    for (int i = 0; i < 2; ++i) {
        socklen_t len = sizeof(addr[i]);
        memset(&addr[i], 0, sizeof(addr[i]));
        addr[i].sin_family = AF_INET;
        addr[i].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        g_fd[i] = socket(AF_INET, SOCK_DGRAM, 0);
        if (g_fd[i] < 0 || bind(g_fd[i], (struct sockaddr *)&addr[i], sizeof(addr[i])) != 0 ||
            getsockname(g_fd[i], (struct sockaddr *)&addr[i], &len) != 0) {
            perror("socket/bind");
            return 1;
        }
    }
    for (int i = 0; i < 2; ++i) {
        if (connect(g_fd[i], (struct sockaddr *)&addr[1 - i], sizeof(addr[1 - i])) != 0) {
            perror("connect");
            return 1;
        }
    }
    for (int a = 0; a < NAMOUNTS; ++a) {
        g_rtt[a] = calloc(BLOCK * CYCLES, sizeof(uint64_t));
        g_send[a][0] = calloc(BLOCK * CYCLES, sizeof(uint64_t));
        g_send[a][1] = calloc(BLOCK * CYCLES, sizeof(uint64_t));
        if (!g_rtt[a] || !g_send[a][0] || !g_send[a][1]) {
            return 1;
        }
    }
    pthread_barrier_init(&g_barrier, NULL, 2);
    pthread_t t[2];
    for (int i = 0; i < 2; ++i) {
        pthread_create(&t[i], NULL, end, (void *)(intptr_t)i);
    }
    for (int i = 0; i < 2; ++i) {
        pthread_join(t[i], NULL);
    }
    printf("%d-byte UDP ping-pong, %d x %d round trips per amount, medians in ns (%.2f ticks/ns)\n",
           DGRAM, CYCLES, BLOCK, g_ticks_per_ns);
    printf("%8s %11s %11s %11s %8s\n", "work", "round_trip", "send_init", "send_resp", "excess");
    double base = 0;
    for (int a = 0; a < NAMOUNTS; ++a) {
        const size_t n = g_n[a];
        const double rtt = median_ns(g_rtt[a], n);
        const double si = median_ns(g_send[a][0], n), sr = median_ns(g_send[a][1], n);
        if (a == 0) {
            base = rtt;
        }
        printf("%8u %11.0f %11.0f %11.0f %8.0f\n", g_work_ns[a], rtt, si, sr,
               rtt - base - 2.0 * g_work_ns[a]);
    }
    return 0;
}
