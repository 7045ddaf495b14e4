/*
 * pingpong_floor: the kernel's floor for a ping-pong over UDP and over TCP, with both ends
 * busy-polling non-blocking sockets (as src's engine and UCX tcp both do while MPI waits). It is
 * what src (UDP underneath) and UCX tcp (TCP) could each reach at best on a path, so their ratio
 * bounds the latency ratio src / UCX tcp that any engine work can give there.
 *
 *   cc -O2 -o pingpong_floor perf/pingpong_floor.c
 *   pingpong_floor server PROTO PORT [SIZE]            (SIZE 8 bytes)
 *   pingpong_floor client PROTO HOST PORT [SIZE] [ITERS] [WARMUP]
 *
 * PROTO: tcp; udp (one datagram each way: above the path's MTU the kernel fragments it); or
 * udp-gso, the way src crosses an interface: a message cut into 1,472-byte datagrams sent in one
 * segmentation-offload call (UDP_SEGMENT) and received with receive aggregation on (UDP_GRO).
 *
 * The client prints "PROTO SIZE median_us p99_us": half of each round trip, over ITERS (20,000)
 * round trips after WARMUP (2,000). Each blocking point is bounded: a side that sees nothing
 * for 10 s exits with an error, so a lost UDP datagram ends the run instead of hanging it.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

/* Busy-polls a non-blocking socket until SIZE bytes have come (one datagram for plain UDP). */
static void recv_all(int fd, char *buf, size_t size, int is_stream)
{
    size_t got = 0;
    double start = 0;
    long spins = 0;
    while (got < size) {
        ssize_t n = recv(fd, buf + got, size - got, MSG_DONTWAIT);
        if (n > 0) {
            got += is_stream ? (size_t)n : size;
            continue;
        }
        if (n == 0)
            fprintf(stderr, "pingpong_floor: peer closed\n"), exit(1);
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            die("recv");
        if ((++spins & 0xffff) == 0) {
            if (start == 0)
                start = now_us();
            else if (now_us() - start > 10e6)
                fprintf(stderr, "pingpong_floor: nothing for 10 s (a lost datagram?)\n"), exit(1);
        }
    }
}

static void send_all(int fd, const char *buf, size_t size)
{
    size_t sent = 0;
    while (sent < size) {
        ssize_t n = send(fd, buf + sent, size - sent, 0);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            die("send");
        }
        sent += (size_t)n;
    }
}

/* udp-gso: cut what this socket sends into 1,472-byte datagrams and take what it receives
 * aggregated, as src's link does across an interface. */
static void set_gso(int fd)
{
    int seg = 1472, one = 1;
    if (setsockopt(fd, SOL_UDP, UDP_SEGMENT, &seg, sizeof(seg)) ||
        setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof(one)))
        die("setsockopt(UDP_SEGMENT/UDP_GRO)");
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc < 4 || (strcmp(argv[1], "server") && strcmp(argv[1], "client")) ||
        (strcmp(argv[2], "udp") && strcmp(argv[2], "tcp") && strcmp(argv[2], "udp-gso"))) {
        fprintf(stderr, "usage: %s server udp|udp-gso|tcp PORT [SIZE]\n"
                        "       %s client udp|udp-gso|tcp HOST PORT [SIZE] [ITERS] [WARMUP]\n",
                argv[0], argv[0]);
        return 2;
    }
    int is_server = !strcmp(argv[1], "server"), is_tcp = !strcmp(argv[2], "tcp");
    int is_gso = !strcmp(argv[2], "udp-gso"), is_stream = is_tcp || is_gso;
    int a = is_server ? 3 : 4;
    int port = atoi(argv[a]);
    size_t size = argc > a + 1 ? strtoul(argv[a + 1], NULL, 0) : 8;
    long iters = argc > a + 2 ? atol(argv[a + 2]) : 20000;
    long warm = argc > a + 3 ? atol(argv[a + 3]) : 2000;
    if (size == 0 || size > 65000 || iters <= 0 || warm < 0) {
        fprintf(stderr, "pingpong_floor: SIZE 1..65000, ITERS > 0, "
                        "WARMUP >= 0\n");
        return 2;
    }
    char *buf = calloc(1, size);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    int one = 1, fd;

    if (is_server) {
        sa.sin_addr.s_addr = htonl(INADDR_ANY);
        int ls = socket(AF_INET, is_tcp ? SOCK_STREAM : SOCK_DGRAM, 0);
        if (ls < 0)
            die("socket");
        setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (is_gso)
            set_gso(ls);
        if (bind(ls, (struct sockaddr *)&sa, sizeof(sa)))
            die("bind");
        if (is_tcp) {
            if (listen(ls, 1))
                die("listen");
            fd = accept(ls, NULL, NULL);
            if (fd < 0)
                die("accept");
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        } else {
            /* The client's first datagram names it; the server connects back to it. */
            struct sockaddr_in from;
            socklen_t len = sizeof(from);
            ssize_t n = recvfrom(ls, buf, size, 0, (struct sockaddr *)&from, &len);
            if (n < 0)
                die("recvfrom");
            if (connect(ls, (struct sockaddr *)&from, len))
                die("connect");
            if (is_gso && (size_t)n < size)
                recv_all(ls, buf + n, size - n, 1);
            send_all(ls, buf, size);
            fd = ls;
        }
        for (;;) {
            recv_all(fd, buf, size, is_stream);
            if (buf[0] == 'q')
                return 0;
            send_all(fd, buf, size);
        }
    }

    if (inet_pton(AF_INET, argv[3], &sa.sin_addr) != 1)
        fprintf(stderr, "pingpong_floor: HOST must be an IPv4 address\n"), exit(2);
    fd = socket(AF_INET, is_tcp ? SOCK_STREAM : SOCK_DGRAM, 0);
    if (fd < 0)
        die("socket");
    if (is_gso)
        set_gso(fd);
    /* The server may still be starting: retry the connection (or the UDP hello) for 10 s. */
    double deadline = now_us() + 10e6;
    for (;;) {
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
            if (is_tcp)
                break;
            send_all(fd, buf, size);
            double t = now_us();
            ssize_t n = -1;
            size_t got = 0;
            while (now_us() - t < 100e3 && got < size)
                if ((n = recv(fd, buf + got, size - got, MSG_DONTWAIT)) > 0)
                    got += is_stream ? (size_t)n : size;
            if (got == size)
                break;
        } else if (is_tcp) {
            close(fd);
            fd = socket(AF_INET, SOCK_STREAM, 0);
        }
        if (now_us() > deadline)
            fprintf(stderr, "pingpong_floor: no server at %s:%d\n", argv[3], port), exit(1);
        usleep(10000);
    }
    if (is_tcp)
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));

    double *half = malloc(sizeof(double) * iters);
    for (long i = 0; i < warm + iters; i++) {
        double t = now_us();
        send_all(fd, buf, size);
        recv_all(fd, buf, size, is_stream);
        if (i >= warm)
            half[i - warm] = (now_us() - t) / 2;
    }
    buf[0] = 'q';
    send_all(fd, buf, size);
    qsort(half, iters, sizeof(double), cmp_double);
    printf("%s %zu %.2f %.2f\n", argv[2], size, half[iters / 2], half[iters * 99 / 100]);
    return 0;
}
