/*
 * What a system call costs the code that runs after it, apart from the call itself: the time
 * from the innermost function of a call chain of depth 1 or 12 returning to the chain's caller,
 * with nothing, getppid(), or a UDP send + receive on loopback made just before. On the
 * machine of perf/README.md, 12 returns cost 26 ticks after no call and 260-312 after either
 * system call: the kernel leaves the return predictions wrong, so every return into a frame
 * made before the call mispredicts (about 8 ns each). It is why the engine keeps the frames
 * between its receive call and the code handling the datagram few (udp_link.cc, nic.cc).
 *
 *   cc -O2 -o unwind_after_syscall perf/unwind_after_syscall.c && ./unwind_after_syscall
 *
 * Linux, x86-64 (rdtsc). Sends only to itself on 127.0.0.1.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <x86intrin.h>

#define ROUNDS 50000

enum { CALL_NONE, CALL_GETPPID, CALL_UDP };

static int g_fd_a, g_fd_b, g_call;
static char g_buf[128];
static uint64_t g_after;   /* the counter right after the system call */

__attribute__((noinline)) static long leaf(void)
{
    if (g_call == CALL_UDP) {
        if (send(g_fd_a, g_buf, 104, 0) < 0 || recv(g_fd_b, g_buf, sizeof(g_buf), 0) < 0) {
            perror("send/recv");
            exit(1);
        }
    } else if (g_call == CALL_GETPPID) {
        syscall(SYS_getppid);
    }
    g_after = __rdtsc();
    return 1;
}

/* A chain of frames that cannot be merged: each adds to its callee's result. */
#define LEVEL(name, callee) \
    __attribute__((noinline)) static long name(void) \
    { \
        long r = callee(); \
        __asm__ volatile("" ::: "memory"); \
        return r + 1; \
    }
LEVEL(f1, leaf)
LEVEL(f2, f1)
LEVEL(f3, f2)
LEVEL(f4, f3)
LEVEL(f5, f4)
LEVEL(f6, f5)
LEVEL(f7, f6)
LEVEL(f8, f7)
LEVEL(f9, f8)
LEVEL(f10, f9)
LEVEL(f11, f10)
LEVEL(f12, f11)

static int cmp_u64(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(void)
{
    struct sockaddr_in a = {0}, b = {0};
    socklen_t len = sizeof(a);
    g_fd_a = socket(AF_INET, SOCK_DGRAM, 0);
    g_fd_b = socket(AF_INET, SOCK_DGRAM, 0);
    a.sin_family = b.sin_family = AF_INET;
    a.sin_addr.s_addr = b.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (g_fd_a < 0 || g_fd_b < 0 || bind(g_fd_a, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        bind(g_fd_b, (struct sockaddr *)&b, sizeof(b)) != 0 ||
        getsockname(g_fd_a, (struct sockaddr *)&a, &len) != 0 ||
        (len = sizeof(b), getsockname(g_fd_b, (struct sockaddr *)&b, &len) != 0) ||
        connect(g_fd_a, (struct sockaddr *)&b, sizeof(b)) != 0 ||
        connect(g_fd_b, (struct sockaddr *)&a, sizeof(a)) != 0) {
        perror("socket setup");
        return 1;
    }
    uint64_t *ticks = malloc(sizeof(uint64_t) * ROUNDS);
    if (ticks == NULL) {
        return 1;
    }
    static const char *const names[] = {"no system call", "getppid()", "UDP send+recv"};
    long sum = 0;
    for (g_call = CALL_NONE; g_call <= CALL_UDP; ++g_call) {
        for (int deep = 0; deep < 2; ++deep) {
            for (int i = 0; i < ROUNDS; ++i) {
                sum += deep ? f12() : f1();
                ticks[i] = __rdtsc() - g_after;
            }
            qsort(ticks, ROUNDS, sizeof(*ticks), cmp_u64);
            printf("%-15s depth %2d: returning to the caller takes %4llu ticks (median)\n",
                   names[g_call], deep ? 12 : 1, (unsigned long long)ticks[ROUNDS / 2]);
        }
    }
    return sum == 0;   /* keeps the chain's results alive */
}
