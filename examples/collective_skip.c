/*
 * collective_skip.c - a rank that skips one collective: ranks 0..n-2 make
 * COUNT + 1 MPI_Allreduce calls on MPI_COMM_WORLD, the last rank only
 * COUNT, and then waits in MPI_Recv for a message from rank 0 that rank 0
 * would send only after its last MPI_Allreduce.
 *
 * Run with n >= 2 ranks (default in the harness: 4). COUNT is 41.
 *   ranks 0..n-2: 41 MPI_Allreduce (sum of one int), READY, a 42nd
 *     MPI_Allreduce (never completes: the last rank is not in it), then
 *     would MPI_Send one int to rank n-1, tag 9;
 *   rank n-1: 41 MPI_Allreduce, READY, MPI_Recv of one int from rank 0,
 *     tag 9 (never arrives).
 *
 * The queues show the last rank's posted receive from rank 0 (tag 9) and
 * nothing else. mpiq's flight recorder numbers each rank's collectives on
 * MPI_COMM_WORLD: ranks 0..n-2 are in their 42nd, an MPI_Allreduce; the
 * last rank has begun 41 and is in none.
 *
 * Designed verdict: deadlock. Ranks 0..n-2 wait for rank n-1 to join
 * MPI_Allreduce #42; rank n-1 waits for rank 0's message: cycle 0 -> n-1 -> 0.
 */
#include <mpi.h>

#include "mpiq_example.h"

#define COUNT 41

int main(int argc, char **argv)
{
    int rank, size, one = 1, sum = 0, value = 0;

    mpiq_init_world(&argc, &argv, "collective_skip", 2, 0, &rank, &size);
    for (int i = 0; i < COUNT; i++)
        MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    mpiq_ready(rank);
    if (rank == size - 1) {
        MPI_Recv(&value, 1, MPI_INT, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* never returns */
    } else {
        MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD); /* never returns */
        if (rank == 0)
            MPI_Send(&sum, 1, MPI_INT, size - 1, 9, MPI_COMM_WORLD);
    }
    MPI_Finalize();
    return 0;
}
