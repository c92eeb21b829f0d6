/*
 * ssend_ring.c - every rank blocks in a synchronous send that nobody receives.
 *
 * Run with n >= 2 ranks (default in the harness: 4).
 * Each world rank r, on MPI_COMM_WORLD:
 *   1. prints "MPIQ-READY rank=<r> pid=<pid>",
 *   2. MPI_Ssend(1 MPI_INT, dest (r + 1) % n, tag 500 + r): never returns,
 *      since no rank ever posts a receive.
 * The wait-for cycle is 0 -> 1 -> ... -> n-1 -> 0 (each sender waits for its
 * receiver to post a matching receive).
 *
 * Queues of rank r on MPI_COMM_WORLD (both appear only inside MPI_Ssend,
 * after READY; MPICH's a moment later, when the message has reached r + 1):
 *   Open MPI: sends: exactly 1, to local rank (r + 1) % n, tag 500 + r,
 *             length 4 (bytes), pending; receives: empty; unexpected: not
 *             available (Open MPI 4.1.4's debug library has none).
 *   MPICH:    sends: EMPTY - MPICH lists no blocking send (MPII_SENDQ_REMEMBER
 *             is called by the nonblocking sends only); receives: empty;
 *             unexpected: exactly 1, from local rank (r - 1 + n) % n, tag
 *             500 + (r - 1 + n) % n, status complete (the left neighbour's
 *             synchronous message, arrived but never matched).
 * Where the ranks are (gdb): main -> PMPI_Ssend (Open MPI: mca_pml_ob1_send;
 * MPICH: internal_Ssend -> MPID_Wait).
 *
 * Designed verdict (Open MPI 4.1.4 and MPICH 4.0.2): deadlock, cycle
 * 0..n-1: every rank is in MPI_Ssend to r + 1, and a synchronous send
 * completes only when the receiver posts a matching receive; a message in the
 * receiver's unexpected queue does not satisfy it.
 */
#include <mpi.h>
#include <stdio.h>

#include "mpiq_example.h"

int main(int argc, char **argv)
{
    int rank, size;

    mpiq_init_world(&argc, &argv, "ssend_ring", 2, 0, &rank, &size);

    int value = rank;
    mpiq_ready(rank);
    /* never returns */
    MPI_Ssend(&value, 1, MPI_INT, (rank + 1) % size, 500 + rank, MPI_COMM_WORLD);

    MPI_Finalize();
    return 0;
}
