/* MPI ping-pong between ranks 0 and 1 that reports each iteration's one-way time (round trip / 2)
 * in rows of ten, then the first iteration's and the mean of the others; and, from each rank on
 * stderr, the page faults and context switches of its first iteration.
 * usage: pingpong SIZE ITERATIONS [FRESH]; FRESH 1 gives every iteration a buffer never used
 * before (a memory registration per message), 0 (default) one buffer throughout.
 * (perf/results/2026-12-02-lat-warmup/NOTES.md; build with mpicc -O2.) */
#define _GNU_SOURCE   /* RUSAGE_THREAD */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const int size = argc > 1 ? atoi(argv[1]) : 262144, n = argc > 2 ? atoi(argv[2]) : 200;
    const int fresh = argc > 3 ? atoi(argv[3]) : 0;
    char *pool = malloc((size_t)size * (fresh ? n : 1));
    double *t = calloc(n, sizeof(double));
    memset(pool, rank, (size_t)size * (fresh ? n : 1));
    if (rank < 2) {   /* one byte each way first: the pair is connected before the timing */
        MPI_Sendrecv(pool, 1, MPI_CHAR, 1 - rank, 2, t, 1, MPI_CHAR, 1 - rank, 2, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
    }
    struct rusage r0, r1;
    for (int i = 0; i < n; ++i) {
        char *buf = pool + (fresh ? (size_t)size * i : 0);
        if (i == 0) {
            getrusage(RUSAGE_THREAD, &r0);
        }
        const double t0 = MPI_Wtime();
        if (rank == 0) {
            MPI_Send(buf, size, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(buf, size, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(buf, size, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, size, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
        }
        t[i] = (MPI_Wtime() - t0) * 1e6 / 2;
        if (i == 0 && rank < 2) {
            getrusage(RUSAGE_THREAD, &r1);
            fprintf(stderr, "rank %d iter0 %.0f us: minflt %ld majflt %ld nvcsw %ld nivcsw %ld\n",
                    rank, t[0], r1.ru_minflt - r0.ru_minflt, r1.ru_majflt - r0.ru_majflt,
                    r1.ru_nvcsw - r0.ru_nvcsw, r1.ru_nivcsw - r0.ru_nivcsw);
        }
    }
    if (rank == 0) {
        double rest = 0;
        for (int i = 0; i < n; i += 10) {
            double s = 0;
            for (int j = i; j < i + 10 && j < n; ++j) {
                s += t[j];
            }
            const int last = i + 9 < n - 1 ? i + 9 : n - 1;
            printf("%d-%d: %.1f  (", i, last, s / (last - i + 1));
            for (int j = i; j < i + 10 && j < n; ++j) {
                printf("%.0f ", t[j]);
            }
            printf(")\n");
        }
        for (int i = 1; i < n; ++i) {
            rest += t[i];
        }
        printf("size %d fresh %d: first %.0f us, rest avg %.1f us\n", size, fresh, t[0],
               n > 1 ? rest / (n - 1) : 0.0);
    }
    free(t);
    free(pool);
    MPI_Finalize();
    return 0;
}
