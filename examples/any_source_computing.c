/*
 * any_source_computing.c - looks like a knot, is not one: rank 0 waits for a
 * message from anyone, and one of its possible senders is still computing.
 *
 * Run with exactly 3 ranks (the harness default). On MPI_COMM_WORLD:
 *   rank 0:  prints READY, then MPI_Recv(1 int, MPI_ANY_SOURCE, tag 5)
 *            (never returns).
 *   rank 1:  MPI_Irecv(1 int, source 2, tag 6), prints READY, then loops
 *            forever in usleep(100 ms) without calling MPI ("computing").
 *   rank 2:  prints READY, then MPI_Recv(1 int, source 0, tag 7)
 *            (never returns).
 *
 * Queues on MPI_COMM_WORLD (both MPIs; Open MPI lengths in bytes, MPICH in
 * elements; sends empty everywhere; unexpected: MPICH empty, Open MPI not
 * available):
 *   rank 0:  receives: 1, MPI_ANY_SOURCE, tag 5, 1 MPI_INT, pending (posted
 *            inside MPI_Recv, after READY).
 *   rank 1:  receives: 1, from local rank 2, tag 6, 1 MPI_INT, pending.
 *   rank 2:  receives: 1, from local rank 0, tag 7, 1 MPI_INT, pending (posted
 *            inside MPI_Recv, after READY).
 * Where the ranks are (gdb): ranks 0 and 2 in PMPI_Recv from main; rank 1 in
 * usleep -> nanosleep from main (clock_nanosleep, "computing").
 *
 * Designed verdict (Open MPI 4.1.4 and MPICH 4.0.2): no deadlock. Rank 1 is
 * computing, so it may still send to rank 0 (tag 5), which satisfies rank 0's
 * ANY_SOURCE receive, after which rank 0 may send to rank 2. From the queues
 * alone (rank 1's unmatched receive from 2, rank 2's from 0, rank 0's from
 * anyone) the three ranks form a knot: telling rank 1 computes needs its
 * stack.
 */
#include <mpi.h>
#include <stdio.h>

#include "mpiq_example.h"

#define COMPUTE_US 100000

int main(int argc, char **argv)
{
    int rank, size, value = -1, pending = -1;
    MPI_Request req;

    mpiq_init_world(&argc, &argv, "any_source_computing", 3, 3, &rank, &size);

    if (rank == 0) {
        mpiq_ready(rank);
        /* never returns */
        MPI_Recv(&value, 1, MPI_INT, MPI_ANY_SOURCE, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
        MPI_Irecv(&pending, 1, MPI_INT, 2, 6, MPI_COMM_WORLD, &req);
        mpiq_ready(rank);
        for (;;)
            usleep(COMPUTE_US); /* "computing": no MPI call */
    } else {
        mpiq_ready(rank);
        MPI_Recv(&value, 1, MPI_INT, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* never returns */
    }

    MPI_Finalize();
    return 0;
}
