/* MPI ping-pong that reports each iteration's one-way time (round trip / 2), in rows of ten.
 * usage: pingpong_iters SIZE ITERATIONS   (perf/results/2026-12-02-lat-warmup/NOTES.md) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank; MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int size = argc > 1 ? atoi(argv[1]) : 262144, n = argc > 2 ? atoi(argv[2]) : 200;
    char *buf = malloc(size); memset(buf, rank, size);
    double *t = calloc(n, sizeof(double));
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < n; ++i) {
        double t0 = MPI_Wtime();
        if (rank == 0) {
            MPI_Send(buf, size, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(buf, size, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, size, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, size, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
        }
        t[i] = (MPI_Wtime() - t0) * 1e6 / 2;
    }
    if (rank == 0) {
        for (int i = 0; i < n; i += 10) {
            double s = 0; for (int j = i; j < i + 10 && j < n; ++j) s += t[j];
            printf("%d-%d: %.1f  (", i, i + 9, s / 10);
            for (int j = i; j < i + 10 && j < n; ++j) printf("%.0f ", t[j]);
            printf(")\n");
        }
    }
    MPI_Finalize();
    return 0;
}
