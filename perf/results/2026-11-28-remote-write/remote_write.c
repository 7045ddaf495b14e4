/*
 * Writing into another process: process_vm_writev against pwrite on an open /proc/<pid>/mem.
 * A child holds a 64 MiB area (written, so its pages are its own); the parent writes 1 GiB into
 * it in chunks of 64 KiB and of 1 MiB, the two ways in turn, three rounds, and prints GB/s for
 * each. Then it kills the child and writes once more through the descriptor, which must write
 * nothing (the descriptor holds the mm it was opened on; see NOTES.md):
 *
 *   cc -O2 -o remote_write perf/results/2026-11-28-remote-write/remote_write.c && ./remote_write
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define AREA (64u << 20)
#define TOTAL (1ull << 30)

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* One chunk into the child at area + off, by process_vm_writev or through fd; bytes written. */
static ssize_t write_chunk(int use_mem, int fd, pid_t pid, char *src, char *area, size_t off,
                           size_t chunk)
{
    if (use_mem) {
        return pwrite(fd, src + off, chunk, (off_t)(uintptr_t)(area + off));
    }
    struct iovec local = {src + off, chunk};
    struct iovec remote = {area + off, chunk};
    return process_vm_writev(pid, &local, 1, &remote, 1, 0);
}

int main(void)
{
    static const size_t chunks[] = {64u << 10, 1u << 20};
    static const char *const names[] = {"process_vm_writev", "/proc/pid/mem"};
    char *area = malloc(AREA);
    char *src = malloc(AREA);
    int ready[2];
    if (area == NULL || src == NULL || pipe(ready) != 0) {
        perror("setup");
        return 1;
    }
    memset(src, 3, AREA);
    const pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0) {
        memset(area, 2, AREA);
        if (write(ready[1], "r", 1) != 1) {
            return 1;
        }
        for (;;) {
            pause();
        }
    }
    char c;
    if (read(ready[0], &c, 1) != 1) {
        perror("read");
        return 1;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mem", (int)pid);
    const int fd = open(path, O_RDWR);
    if (fd < 0) {
        perror(path);
        return 1;
    }
    for (int round = 0; round < 3; ++round) {
        for (int s = 0; s < 2; ++s) {
            for (int use_mem = 0; use_mem < 2; ++use_mem) {
                const double t0 = now_s();
                size_t total = 0;
                while (total < TOTAL) {
                    for (size_t off = 0; off < AREA && total < TOTAL; off += chunks[s]) {
                        if (write_chunk(use_mem, fd, pid, src, area, off, chunks[s]) !=
                            (ssize_t)chunks[s]) {
                            perror(names[use_mem]);
                            return 1;
                        }
                        total += chunks[s];
                    }
                }
                printf("round %d chunk %7zu %-18s %6.2f GB/s\n", round, chunks[s], names[use_mem],
                       total / (now_s() - t0) / 1e9);
            }
        }
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    const ssize_t n = pwrite(fd, src, 4096, (off_t)(uintptr_t)area);
    printf("after the child's exit: pwrite through the open descriptor returned %zd%s%s\n", n,
           n < 0 ? ": " : "", n < 0 ? strerror(errno) : "");
    return n > 0 ? 1 : 0;
}
