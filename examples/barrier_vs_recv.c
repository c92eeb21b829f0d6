/*
 * barrier_vs_recv.c - the most common real hang: rank 0 waits in a collective
 * while every other rank waits for a message from rank 0.
 *
 * Run with n >= 2 ranks (default in the harness: 4).
 *   rank 0:    prints READY, then MPI_Barrier(MPI_COMM_WORLD) (never returns).
 *   rank k>0:  exchange() posts nothing before READY, prints READY, then
 *              MPI_Recv(1 int, source 0, tag 3, MPI_COMM_WORLD) (never returns).
 * Rank 0 sends nothing; ranks k never reach the barrier: hung for good.
 *
 * Queues on MPI_COMM_WORLD:
 *   rank 0:    nothing visible (Open MPI hides the barrier's internal messages,
 *              which use negative tags; MPICH lists none either).
 *   rank k>0:  one posted receive from local rank 0, tag 3, 1 MPI_INT (Open MPI
 *              length 4 bytes, MPICH length 1), once the rank is in MPI_Recv.
 * The receive is posted inside MPI_Recv, after READY: a tool must take a
 * second look (the harness waits until every rank is in its call).
 *
 * Designed verdict (Open MPI 4.1.4 and MPICH 4.0.2): deadlock, cycles [0,k]
 * for every k: rank 0 is in MPI_Barrier on MPI_COMM_WORLD and waits for ranks
 * 1..n-1, none of which is in a collective on it; each rank k waits for rank 0
 * to send. Without stacks (queues alone), rank 0 looks free to send: that
 * "no deadlock" is the bug this example exists for.
 */
#include <mpi.h>
#include <stdio.h>

#include "mpiq_example.h"

#define TAG 3

static int exchange(int rank)
{
    int value = -1;
    mpiq_ready(rank);
    MPI_Recv(&value, 1, MPI_INT, 0, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* never returns */
    return value;
}

int main(int argc, char **argv)
{
    int rank, size;

    mpiq_init_world(&argc, &argv, "barrier_vs_recv", 2, 0, &rank, &size);

    if (rank == 0) {
        mpiq_ready(rank);
        MPI_Barrier(MPI_COMM_WORLD); /* never returns */
    } else {
        exchange(rank);
    }

    MPI_Finalize();
    return 0;
}
