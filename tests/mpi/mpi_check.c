/* An MPI correctness check run by make check through srcrun: point-to-point ping-pong of
 * verified payloads from 0 B to 1 MiB between rank pairs, allreduce, alltoall, and MPI_Put,
 * MPI_Get and MPI_Accumulate in a window between fences. Prints
 * "mpi_check: N ranks passed" on rank 0 and exits non-zero on the first mismatch.
 *
 *   mpi_check [--until FILE SECONDS]   repeats the checks in rounds until FILE exists (rank 0
 *                                      looks after each round) or SECONDS have passed: a job
 *                                      that runs while a test does something beside it */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK(_cond, ...) \
    do { \
        if (!(_cond)) { \
            fprintf(stderr, "mpi_check: rank %d: ", rank); \
            fprintf(stderr, __VA_ARGS__); \
            fprintf(stderr, "\n"); \
            MPI_Abort(MPI_COMM_WORLD, 1); \
        } \
    } while (0)

static int rank, nranks;

static unsigned char pattern(size_t i, int src, int iter)
{
    return (unsigned char)(i * 31 + (size_t)src * 7 + (size_t)iter * 13);
}

static void check_pingpong(void)
{
    static const size_t sizes[] = {0, 1, 8, 100, 1024, 4096, 65536, 300000, 1 << 20};
    size_t max = 1 << 20, s, i;
    unsigned char *buf = malloc(max);
    int peer = rank ^ 1, iter;

    CHECK(buf != NULL, "out of memory");
    if (peer >= nranks) {
        free(buf);
        return;
    }
    for (s = 0; s < sizeof(sizes) / sizeof(sizes[0]); ++s) {
        for (iter = 0; iter < 3; ++iter) {
            int tag = (int)s * 10 + iter, count;
            MPI_Status st;
            if ((rank & 1) == 0) {
                for (i = 0; i < sizes[s]; ++i) buf[i] = pattern(i, rank, iter);
                MPI_Send(buf, (int)sizes[s], MPI_BYTE, peer, tag, MPI_COMM_WORLD);
                MPI_Recv(buf, (int)max, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &st);
            } else {
                MPI_Recv(buf, (int)max, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &st);
                MPI_Get_count(&st, MPI_BYTE, &count);
                CHECK((size_t)count == sizes[s], "got %d bytes, expected %zu", count, sizes[s]);
                for (i = 0; i < sizes[s]; ++i) {
                    CHECK(buf[i] == pattern(i, peer, iter), "byte %zu of %zu differs", i, sizes[s]);
                    buf[i] = pattern(i, rank, iter);
                }
                MPI_Send(buf, (int)sizes[s], MPI_BYTE, peer, tag, MPI_COMM_WORLD);
                continue;
            }
            MPI_Get_count(&st, MPI_BYTE, &count);
            CHECK((size_t)count == sizes[s], "echo has %d bytes, expected %zu", count, sizes[s]);
            for (i = 0; i < sizes[s]; ++i) {
                CHECK(buf[i] == pattern(i, peer, iter), "echo byte %zu of %zu differs", i, sizes[s]);
            }
        }
    }
    free(buf);
}

static void check_collectives(void)
{
    long sum = 0, expect = (long)nranks * (nranks + 1) / 2, mine = rank + 1;
    int *out = malloc(sizeof(int) * (size_t)nranks), *in = malloc(sizeof(int) * (size_t)nranks), i;

    CHECK(out != NULL && in != NULL, "out of memory");
    MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    CHECK(sum == expect, "allreduce gave %ld, expected %ld", sum, expect);
    for (i = 0; i < nranks; ++i) out[i] = rank * 1000 + i;
    MPI_Alltoall(out, 1, MPI_INT, in, 1, MPI_INT, MPI_COMM_WORLD);
    for (i = 0; i < nranks; ++i) {
        CHECK(in[i] == i * 1000 + rank, "alltoall slot %d has %d", i, in[i]);
    }
    free(out);
    free(in);
}

/* One-sided: every rank puts a pattern into its right neighbour's window and gets one back
 * from its left neighbour, between fences; then an accumulate. */
static void check_rma(void)
{
    const int n = 4096;
    int *win_buf, *got, i, right = (rank + 1) % nranks, left = (rank + nranks - 1) % nranks;
    int *src;
    MPI_Win win;

    CHECK(MPI_Alloc_mem(sizeof(int) * n, MPI_INFO_NULL, &win_buf) == MPI_SUCCESS, "alloc_mem");
    src = malloc(sizeof(int) * n);
    got = malloc(sizeof(int) * n);
    CHECK(src != NULL && got != NULL, "out of memory");
    for (i = 0; i < n; ++i) {
        win_buf[i] = -1;
        src[i]     = rank * 100000 + i;
    }
    MPI_Win_create(win_buf, sizeof(int) * n, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_fence(0, win);
    MPI_Put(src, n, MPI_INT, right, 0, n, MPI_INT, win);
    MPI_Win_fence(0, win);
    for (i = 0; i < n; ++i) {
        CHECK(win_buf[i] == left * 100000 + i, "window slot %d has %d after put", i, win_buf[i]);
    }
    MPI_Get(got, n, MPI_INT, left, 0, n, MPI_INT, win);
    MPI_Win_fence(0, win);
    for (i = 0; i < n; ++i) {
        /* left's window holds what left's own left neighbour put there */
        int expect = ((left + nranks - 1) % nranks) * 100000 + i;
        CHECK(got[i] == expect, "get slot %d has %d, expected %d", i, got[i], expect);
    }
    MPI_Accumulate(src, 16, MPI_INT, right, 0, 16, MPI_INT, MPI_SUM, win);
    MPI_Win_fence(0, win);
    for (i = 0; i < 16; ++i) {
        CHECK(win_buf[i] == 2 * (left * 100000 + i), "accumulate slot %d has %d", i, win_buf[i]);
    }
    MPI_Win_free(&win);
    MPI_Free_mem(win_buf);
    free(src);
    free(got);
}

int main(int argc, char **argv)
{
    const char *preload = getenv("LD_PRELOAD");
    const char *until   = NULL;
    double seconds = 0, start;
    int rounds = 0, stop;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    CHECK(preload != NULL && strstr(preload, "libuct_src") != NULL,
          "the src module is not preloaded (LD_PRELOAD=%s)", preload ? preload : "");
    if ((argc == 4) && !strcmp(argv[1], "--until")) {
        until   = argv[2];
        seconds = atof(argv[3]);
    } else {
        CHECK(argc == 1, "usage: mpi_check [--until FILE SECONDS]");
    }
    start = MPI_Wtime();
    do {
        check_pingpong();
        check_collectives();
        check_rma();
        ++rounds;
        stop = (until == NULL) || (access(until, F_OK) == 0) || (MPI_Wtime() - start > seconds);
        MPI_Bcast(&stop, 1, MPI_INT, 0, MPI_COMM_WORLD);
    } while (!stop);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        printf("mpi_check: %d ranks passed (%d round%s)\n", nranks, rounds, rounds > 1 ? "s" : "");
    }
    MPI_Finalize();
    return 0;
}
