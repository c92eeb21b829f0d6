/*
 * deadlock.c - a true deadlock: every rank blocks in MPI_Wait on a receive
 * that no one will ever satisfy.
 *
 * Run with n >= 2 ranks (default in the harness: 3).
 * Each world rank r, on MPI_COMM_WORLD:
 *   1. MPI_Irecv(16 x MPI_INT, source = (r + 1) % n, tag = 400 + r)
 *   2. prints "MPIQ-READY rank=<r> pid=<pid>" (the receive is already posted,
 *      so whoever sees READY sees the receive: no race),
 *   3. MPI_Wait on that receive: blocks forever inside MPI, polling.
 * Nobody sends anything, so the wait-for cycle is 0 -> 1 -> 2 -> ... -> n-1 -> 0.
 * Unlike the other examples this one does NOT sleep in pause(): the ranks
 * spin inside the MPI progress engine (they use CPU).
 *
 * Queues of rank r on MPI_COMM_WORLD:
 *   posted receives: exactly 1: desired local rank (r + 1) % n, tag 400 + r,
 *                    16 MPI_INT (Open MPI length 64 bytes, MPICH length 16).
 *   sends:           empty.
 *   unexpected:      MPICH: empty. Open MPI 4.1.4: not available.
 */
#include <mpi.h>
#include <stdio.h>

#include "mpiq_example.h"

#define COUNT 16

int main(int argc, char **argv)
{
    int rank, size;
    static int rbuf[COUNT];
    MPI_Request req;

    mpiq_init_world(&argc, &argv, "deadlock", 2, 0, &rank, &size);

    MPI_Irecv(rbuf, COUNT, MPI_INT, (rank + 1) % size, 400 + rank, MPI_COMM_WORLD, &req);
    mpiq_ready(rank);
    MPI_Wait(&req, MPI_STATUS_IGNORE); /* never returns */

    MPI_Finalize();
    return 0;
}
