#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* MPI ping-pong that prints its first iteration's one-way time (round trip / 2) and the mean of
 * the others. usage: pingpong_first SIZE ITERATIONS FRESH; FRESH 1 gives every iteration a
 * buffer never used before (a registration per message), 0 one buffer throughout. */
int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank; MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int size = argc > 1 ? atoi(argv[1]) : 262144, n = argc > 2 ? atoi(argv[2]) : 50;
    int fresh = argc > 3 ? atoi(argv[3]) : 1;
    char *pool = malloc((size_t)size * n); memset(pool, rank, (size_t)size * n);
    double sum = 0, first = 0;
    char *b1 = pool;
    MPI_Send(pool, 1, MPI_CHAR, 1 - rank, 2, MPI_COMM_WORLD); /* wire up */
    MPI_Recv(pool, 1, MPI_CHAR, 1 - rank, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (int i = 0; i < n; ++i) {
        char *buf = fresh ? pool + (size_t)size * i : b1;
        double t0 = MPI_Wtime();
        if (rank == 0) {
            MPI_Send(buf, size, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(buf, size, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, size, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, size, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
        }
        double t = (MPI_Wtime() - t0) * 1e6 / 2;
        if (i == 0) first = t; else sum += t;
    }
    if (rank == 0) printf("size %d fresh %d: first %.0f us, rest avg %.1f us\n", size, fresh, first, sum / (n - 1));
    MPI_Finalize();
    return 0;
}
