/* The MPI benchmark of the side-by-side comparisons (perf/compare.sh): point-to-point latency,
 * bandwidth and bidirectional bandwidth, multi-pair message rate, alltoall and allreduce, and
 * the start-up figures (MPI_Init, first alltoall, and the per-process state after it).
 *
 * usage: mpi_bench [--tests LIST] [--sizes LIST] [--scale F] [--json] [--list-fds]
 *   LIST of tests: lat,bw,bibw,msgrate,alltoall,allreduce,overlap,init (default: all but
 *                  overlap and init)
 *   LIST of sizes in bytes (K and M suffixes): default 8,1K,64K,1M
 *   --scale F      multiplies every iteration count (0.25 for quick runs)
 *   --json         one JSON array on rank 0's stdout instead of the table
 *   --list-fds     with init: rank 0 also prints each descriptor it holds and what it is
 *                  ("# fd N: TARGET" lines on stdout, ahead of the results), to tell which
 *                  descriptors the transport adds
 * The init test's rank 0 also prints "# init window (CLOCK_MONOTONIC s): FIRST LAST", the
 * first rank entering MPI_Init and the last leaving it, to cut a host-wide profile to it.
 *
 * Point-to-point tests run between rank 0 and rank N/2 (on different nodes when ranks are
 * mapped by slot on two nodes); the others wait. Run them with 2 ranks: idle ranks poll and take
 * CPU from the measured pair. msgrate runs N/2 pairs (i, i+N/2) at once, each sending windows
 * of 64 non-blocking messages, and reports messages per second summed over pairs.
 *
 * Figures: lat = half the median round trip (us); bw, bibw = MB/s (10^6 bytes per second, the
 * unit of ucx_perftest and OSU) over windows of 64 messages; alltoall and allreduce = mean time
 * per call (us) on the slowest rank, size = bytes per peer (alltoall) or vector bytes
 * (allreduce). init: init_us = MPI_Init on the slowest rank (init_own_us: mean and max over
 * ranks), init_launch_spread_us = from the first rank entering MPI_Init to the last,
 * init_after_last_start_us = from the last rank entering it to the last leaving it (the launch
 * left out; ranks on one host's clock), first_alltoall_us = the first 8-byte MPI_Alltoall right
 * after it, init_cpu_us = the CPU time of each process during its MPI_Init (every thread; mean
 * and max) and init_cpu_total_us its sum over ranks, all_pairs_us = then one message with every
 * other rank (collectives need not connect
 * every pair), then, per process with all pairs connected and averaged (and max) over ranks:
 * resident memory, open file descriptors, sockets, and the engine's connection state where
 * the src probe (libsrc_probe.so) is loaded. */
#define _GNU_SOURCE
#include <mpi.h>

#include <dirent.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BENCH_WINDOW    64
#define BENCH_OVERLAP_US 200.0  /* the overlap test's computation between posting and waiting */
#define BENCH_MAX_SIZES 16
#define BENCH_MAX_OUT   256

typedef struct {
    const char *test;
    size_t      size;     /* bytes */
    double      value;
    const char *unit;
    long        iters;
    int         nranks;
} bench_result_t;

static int rank, nranks;
static double scale = 1.0;
static int list_fds;  /* rank 0 prints its descriptors in the init test */
static bench_result_t results[BENCH_MAX_OUT];
static int num_results;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* CPU time of the whole process (every thread: MPI_Init starts its runtime's threads). */
static double cpu_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void record(const char *test, size_t size, double value, const char *unit, long iters)
{
    if ((rank == 0) && (num_results < BENCH_MAX_OUT)) {
        bench_result_t r = {test, size, value, unit, iters, nranks};
        results[num_results++] = r;
    }
}

/* Iterations for a message size: many for small messages, fewer as they grow. */
static long iters_for(long base, size_t size)
{
    double n = (double)base * scale;
    if (size > 8192) {
        n = n * 8192.0 / (double)size;
    }
    return (n < 4) ? 4 : (long)n;
}

/* Windows of BENCH_WINDOW messages for a bandwidth or rate test: up to 300, about 16 MiB in
 * all at large sizes, at least 3. */
static long windows_for(size_t size)
{
    double n = (16.0 * 1024 * 1024) / ((double)size * BENCH_WINDOW);
    n = ((n > 300) ? 300 : n) * scale;
    return (n < 3) ? 3 : (long)n;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL) {
        fprintf(stderr, "mpi_bench: out of memory (%zu bytes)\n", n);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(p, 0x5a, n);
    return p;
}

static void bench_lat(size_t size)
{
    int peer = (rank == 0) ? nranks / 2 : 0, i;
    long iters = iters_for(2000, size), warm = iters / 10 + 2;
    char *buf = xmalloc(size);
    double *rtt = xmalloc(sizeof(double) * (size_t)iters);

    MPI_Barrier(MPI_COMM_WORLD);
    if ((rank == 0) || (rank == nranks / 2)) {
        for (i = -(int)warm; i < iters; ++i) {
            double t0 = now_us();
            if (rank == 0) {
                MPI_Send(buf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
                MPI_Recv(buf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(buf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
            }
            if (i >= 0) {
                rtt[i] = now_us() - t0;
            }
        }
        qsort(rtt, (size_t)iters, sizeof(double), cmp_double);
        record("lat", size, rtt[iters / 2] / 2.0, "us", iters);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    free(rtt);
    free(buf);
}

/* Spins for `us` microseconds without calling MPI: the application's computation. */
static void compute_for(double us)
{
    double end = now_us() + us;
    while (now_us() < end) {
    }
}

static void bench_overlap(size_t size)
{
    int peer = (rank == 0) ? nranks / 2 : 0, i;
    long iters = iters_for(500, size), warm = iters / 10 + 2;
    char *buf = xmalloc(2 * size);
    double *delay = xmalloc(sizeof(double) * (size_t)iters), t0, t1;
    MPI_Request reqs[2];

    MPI_Barrier(MPI_COMM_WORLD);
    if ((rank == 0) || (rank == nranks / 2)) {
        for (i = -(int)warm; i < iters; ++i) {
            if (rank == 0) {
                t0 = now_us();
                MPI_Isend(buf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &reqs[0]);
                MPI_Isend(buf + size, (int)size, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &reqs[1]);
                compute_for(BENCH_OVERLAP_US);
                MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
                MPI_Recv(&t1, 1, MPI_DOUBLE, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                if (i >= 0) {
                    delay[i] = t1 - t0;
                }
            } else {
                MPI_Recv(buf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Recv(buf + size, (int)size, MPI_BYTE, peer, 2, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
                t1 = now_us();
                MPI_Send(&t1, 1, MPI_DOUBLE, peer, 3, MPI_COMM_WORLD);
            }
        }
        if (rank == 0) {
            qsort(delay, (size_t)iters, sizeof(double), cmp_double);
            record("overlap", size, delay[iters / 2], "us", iters);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    free(delay);
    free(buf);
}

/* Windows of BENCH_WINDOW messages from rank 0 to N/2 (and back for bibw); returns MB/s. */
static void bench_bw(size_t size, int bidir)
{
    int peer = (rank == 0) ? nranks / 2 : 0, w, active = (rank == 0) || (rank == nranks / 2);
    long loops = windows_for(size), warm = 2, l;
    char *sbuf = xmalloc(size * BENCH_WINDOW), *rbuf = xmalloc(size * BENCH_WINDOW), ack = 0;
    MPI_Request req[2 * BENCH_WINDOW];
    double t0 = 0;

    MPI_Barrier(MPI_COMM_WORLD);
    if (active) {
        for (l = -warm; l < loops; ++l) {
            int n = 0;
            if (l == 0) {
                t0 = now_us();
            }
            for (w = 0; w < BENCH_WINDOW; ++w) {
                if ((rank != 0) || bidir) {
                    MPI_Irecv(rbuf + (size_t)w * size, (int)size, MPI_BYTE, peer, 2, MPI_COMM_WORLD,
                              &req[n++]);
                }
            }
            for (w = 0; w < BENCH_WINDOW; ++w) {
                if ((rank == 0) || bidir) {
                    MPI_Isend(sbuf + (size_t)w * size, (int)size, MPI_BYTE, peer, 2, MPI_COMM_WORLD,
                              &req[n++]);
                }
            }
            MPI_Waitall(n, req, MPI_STATUSES_IGNORE);
            if (rank == 0) {
                MPI_Recv(&ack, 1, MPI_BYTE, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Send(&ack, 1, MPI_BYTE, peer, 3, MPI_COMM_WORLD);
            }
        }
        if (rank == 0) {
            double us = now_us() - t0;
            double bytes = (double)size * BENCH_WINDOW * (double)loops * (bidir ? 2 : 1);
            record(bidir ? "bibw" : "bw", size, bytes / us, "MB/s", loops * BENCH_WINDOW);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    free(sbuf);
    free(rbuf);
}

/* N/2 pairs (i, i+N/2) at once, windows of non-blocking sends; messages/s summed over pairs. */
static void bench_msgrate(size_t size)
{
    int half = nranks / 2, w, sender = rank < half, peer = sender ? rank + half : rank - half;
    long loops = windows_for(size), warm = 2, l;
    char *buf = xmalloc(size * BENCH_WINDOW), ack = 0;
    MPI_Request req[BENCH_WINDOW];
    double t0 = 0, rate = 0, total = 0;

    if (half == 0) {
        return;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank < 2 * half) {
        for (l = -warm; l < loops; ++l) {
            if (l == 0) {
                t0 = now_us();
            }
            for (w = 0; w < BENCH_WINDOW; ++w) {
                if (sender) {
                    MPI_Isend(buf + (size_t)w * size, (int)size, MPI_BYTE, peer, 4, MPI_COMM_WORLD,
                              &req[w]);
                } else {
                    MPI_Irecv(buf + (size_t)w * size, (int)size, MPI_BYTE, peer, 4, MPI_COMM_WORLD,
                              &req[w]);
                }
            }
            MPI_Waitall(BENCH_WINDOW, req, MPI_STATUSES_IGNORE);
            if (sender) {
                MPI_Recv(&ack, 1, MPI_BYTE, peer, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Send(&ack, 1, MPI_BYTE, peer, 5, MPI_COMM_WORLD);
            }
        }
        if (sender) {
            rate = (double)loops * BENCH_WINDOW / ((now_us() - t0) / 1e6);
        }
    }
    MPI_Reduce(&rate, &total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    record("msgrate", size, total, "msg/s", loops * BENCH_WINDOW);
    free(buf);
}

static void bench_coll(size_t size, int alltoall)
{
    long iters = iters_for(alltoall ? 200 : 400, alltoall ? size * (size_t)nranks : size);
    long warm = iters / 10 + 2, i;
    size_t count = alltoall ? size : (size + sizeof(double) - 1) / sizeof(double);
    size_t bytes = alltoall ? size * (size_t)nranks : count * sizeof(double);
    char *sbuf = xmalloc(bytes), *rbuf = xmalloc(bytes);
    double t0 = 0, mine, slowest;

    MPI_Barrier(MPI_COMM_WORLD);
    for (i = -warm; i < iters; ++i) {
        if (i == 0) {
            t0 = now_us();
        }
        if (alltoall) {
            MPI_Alltoall(sbuf, (int)size, MPI_BYTE, rbuf, (int)size, MPI_BYTE, MPI_COMM_WORLD);
        } else {
            MPI_Allreduce(sbuf, rbuf, (int)count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        }
    }
    mine = (now_us() - t0) / (double)iters;
    MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    record(alltoall ? "alltoall" : "allreduce", size, slowest, "us", iters);
    free(sbuf);
    free(rbuf);
}

static long proc_status_kib(const char *key)
{
    char line[256];
    long v = -1;
    size_t n = strlen(key);
    FILE *f = fopen("/proc/self/status", "r");

    if (f == NULL) {
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if ((strncmp(line, key, n) == 0) && (line[n] == ':')) {
            v = strtol(line + n + 1, NULL, 10);
            break;
        }
    }
    fclose(f);
    return v;
}

/* Open file descriptors and, of them, sockets; with print, each one and its target. */
static void count_fds(int print, long *fds_p, long *sockets_p)
{
    char path[300], target[128];
    struct dirent *e;
    DIR *d = opendir("/proc/self/fd");
    long fds = 0, sockets = 0;
    ssize_t n;

    if (d != NULL) {
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.') {
                continue;
            }
            ++fds;
            snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
            n = readlink(path, target, sizeof(target) - 1);
            target[(n > 0) ? n : 0] = '\0';
            if ((n > 0) && (strncmp(target, "socket:", 7) == 0)) {
                ++sockets;
            }
            if (print && (atoi(e->d_name) != dirfd(d))) {
                printf("# fd %s: %s\n", e->d_name, target);
            }
        }
        closedir(d);
        fds -= 1; /* the directory stream itself */
    }
    *fds_p     = fds;
    *sockets_p = sockets;
}

typedef int (*probe_state_fn_t)(unsigned*, unsigned*, size_t*, unsigned long long*,
                                unsigned long long*);

/* The mean over ranks and the maximum of one per-process figure. */
static void record_spread(const char *name, double mine, const char *unit)
{
    double sum = 0, max = 0;
    char *mean_name = xmalloc(strlen(name) + 8), *max_name = xmalloc(strlen(name) + 8);

    MPI_Reduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&mine, &max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    sprintf(mean_name, "%s", name);
    sprintf(max_name, "%s_max", name);
    record(mean_name, 0, sum / nranks, unit, 1);
    record(max_name, 0, max, unit, 1);
}

static void bench_init(double init_start, double init_end, double init_cpu)
{
    char *sbuf = xmalloc(8 * (size_t)nranks), *rbuf = xmalloc(8 * (size_t)nranks);
    double t0 = now_us(), first, second, mine_init = init_end - init_start, worst;
    probe_state_fn_t probe = (probe_state_fn_t)dlsym(RTLD_DEFAULT, "src_probe_state");
    long fds, sockets;
    int i;

    MPI_Alltoall(sbuf, 8, MPI_BYTE, rbuf, 8, MPI_BYTE, MPI_COMM_WORLD);
    first = now_us() - t0;
    t0    = now_us();
    MPI_Alltoall(sbuf, 8, MPI_BYTE, rbuf, 8, MPI_BYTE, MPI_COMM_WORLD);
    second = now_us() - t0;

    MPI_Reduce(&mine_init, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    record("init_us", 0, worst, "us", 1);
    record_spread("init_own_us", mine_init, "us");
    /* The launch apart from the transport (every rank on one host's monotonic clock, as on the
     * namespace bed): how far apart the ranks entered MPI_Init, and how long after the last of
     * them entered it the last one left it (the last rank's own init, then whatever the job's
     * exchange and the transport still took). */
    {
        double in[2] = {init_start, init_end}, latest[2], earliest;

        MPI_Reduce(in, latest, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        MPI_Reduce(&init_start, &earliest, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
        record("init_launch_spread_us", 0, latest[0] - earliest, "us", 1);
        record("init_after_last_start_us", 0, latest[1] - latest[0], "us", 1);
        /* Where a profile of the whole host (perf record -k CLOCK_MONOTONIC) is cut to the
         * job's MPI_Init: from the first rank entering it to the last leaving it. */
        if (rank == 0) {
            printf("# init window (CLOCK_MONOTONIC s): %.6f %.6f\n", earliest / 1e6,
                   latest[1] / 1e6);
        }
    }
    /* The CPU MPI_Init took (each rank's, and all ranks' together): against the host's CPUs
     * times the init window, it says whether init waits or computes. */
    {
        double total = 0;

        record_spread("init_cpu_us", init_cpu, "us");
        MPI_Reduce(&init_cpu, &total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        record("init_cpu_total_us", 0, total, "us", 1);
    }
    MPI_Reduce(&first, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    record("first_alltoall_us", 0, worst, "us", 1);
    MPI_Reduce(&second, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    record("second_alltoall_us", 0, worst, "us", 1);

    /* Collectives need not connect every pair (Bruck's alltoall does not): exchange one message
     * with every other rank, then read the state with all pairs connected. */
    t0 = now_us();
    for (i = 1; i < nranks; ++i) {
        int to = (rank + i) % nranks, from = (rank - i + nranks) % nranks;
        MPI_Sendrecv(sbuf, 1, MPI_BYTE, to, 6, rbuf, 1, MPI_BYTE, from, 6, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
    }
    first = now_us() - t0;
    MPI_Reduce(&first, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    record("all_pairs_us", 0, worst, "us", 1);
    MPI_Barrier(MPI_COMM_WORLD);
    count_fds(list_fds && (rank == 0), &fds, &sockets);
    record_spread("rss_kib", (double)proc_status_kib("VmRSS"), "KiB");
    record_spread("fds", (double)fds, "count");
    record_spread("sockets", (double)sockets, "count");
    if (probe != NULL) {
        unsigned nics, conns;
        size_t bytes;
        unsigned long long retransmits, timeouts;
        probe(&nics, &conns, &bytes, &retransmits, &timeouts);
        record_spread("engine_conns", (double)conns, "count");
        record_spread("engine_state_bytes", (double)bytes, "bytes");
        record_spread("engine_retransmits", (double)retransmits, "count");
    }
    free(sbuf);
    free(rbuf);
}

static size_t parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if ((*end == 'K') || (*end == 'k')) {
        v *= 1024;
    } else if ((*end == 'M') || (*end == 'm')) {
        v *= 1024 * 1024;
    }
    return (size_t)v;
}

static int has_test(const char *list, const char *name)
{
    size_t n = strlen(name);
    const char *p = list;

    while ((p = strstr(p, name)) != NULL) {
        if (((p == list) || (p[-1] == ',')) && ((p[n] == ',') || (p[n] == '\0'))) {
            return 1;
        }
        p += n;
    }
    return 0;
}

static void print_results(int json)
{
    char host[256];
    int i;

    if (rank != 0) {
        return;
    }
    gethostname(host, sizeof(host));
    if (json) {
        printf("[");
        for (i = 0; i < num_results; ++i) {
            const bench_result_t *r = &results[i];
            printf("%s\n {\"test\": \"%s\", \"size\": %zu, \"value\": %.6g, \"unit\": \"%s\", "
                   "\"iters\": %ld, \"nranks\": %d, \"host\": \"%s\"}",
                   i ? "," : "", r->test, r->size, r->value, r->unit, r->iters, r->nranks, host);
        }
        printf("\n]\n");
    } else {
        printf("# mpi_bench: %d ranks\n%-20s %10s %14s %-6s %8s\n", nranks, "test", "size",
               "value", "unit", "iters");
        for (i = 0; i < num_results; ++i) {
            const bench_result_t *r = &results[i];
            printf("%-20s %10zu %14.3f %-6s %8ld\n", r->test, r->size, r->value, r->unit,
                   r->iters);
        }
    }
    fflush(stdout);
}

int main(int argc, char **argv)
{
    const char *tests = "lat,bw,bibw,msgrate,alltoall,allreduce";
    size_t sizes[BENCH_MAX_SIZES] = {8, 1024, 65536, 1048576};
    int num_sizes = 4, json = 0, i, s;
    double init_start, init_end, init_cpu;

    init_cpu   = cpu_us();
    init_start = now_us();
    MPI_Init(&argc, &argv);
    init_end = now_us();
    init_cpu = cpu_us() - init_cpu;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    for (i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!strcmp(argv[i], "--list-fds")) {
            list_fds = 1;
        } else if (!strcmp(argv[i], "--tests") && (i + 1 < argc)) {
            tests = argv[++i];
        } else if (!strcmp(argv[i], "--scale") && (i + 1 < argc)) {
            scale = atof(argv[++i]);
        } else if (!strcmp(argv[i], "--sizes") && (i + 1 < argc)) {
            char *list = strdup(argv[++i]), *tok, *save = NULL;
            num_sizes = 0;
            for (tok = strtok_r(list, ",", &save); (tok != NULL) && (num_sizes < BENCH_MAX_SIZES);
                 tok = strtok_r(NULL, ",", &save)) {
                sizes[num_sizes++] = parse_size(tok);
            }
            free(list);
        } else {
            if (rank == 0) {
                fprintf(stderr, "usage: mpi_bench [--tests LIST] [--sizes LIST] [--scale F] "
                                "[--json] [--list-fds]\n");
            }
            MPI_Finalize();
            return 2;
        }
    }
    if ((nranks < 2) && strcmp(tests, "init")) {
        if (rank == 0) {
            fprintf(stderr, "mpi_bench: needs at least 2 ranks\n");
        }
        MPI_Finalize();
        return 2;
    }

    /* init first: it must see the first communication of the job. */
    if (has_test(tests, "init")) {
        bench_init(init_start, init_end, init_cpu);
    }
    for (s = 0; s < num_sizes; ++s) {
        if (has_test(tests, "lat")) {
            bench_lat(sizes[s]);
        }
        if (has_test(tests, "bw")) {
            bench_bw(sizes[s], 0);
        }
        if (has_test(tests, "bibw")) {
            bench_bw(sizes[s], 1);
        }
        if (has_test(tests, "msgrate") && (sizes[s] <= 65536)) {
            bench_msgrate(sizes[s]);
        }
        if (has_test(tests, "alltoall")) {
            bench_coll(sizes[s], 1);
        }
        if (has_test(tests, "allreduce")) {
            bench_coll(sizes[s], 0);
        }
        if (has_test(tests, "overlap")) {
            bench_overlap(sizes[s]);
        }
    }
    print_results(json);
    MPI_Finalize();
    return 0;
}
