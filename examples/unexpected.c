/*
 * unexpected.c - messages that arrive before any matching receive is posted.
 *
 * Run with n >= 2 ranks (default in the harness: 4).
 * Everything happens on MPI_COMM_WORLD (local rank == world rank):
 *   rank 0:  MPI_Send(4 x MPI_INT, dest 1, tag 11), then
 *            MPI_Send(8 x MPI_INT, dest 1, tag 12). Both are small and eager,
 *            so both calls return at once; rank 0 keeps no request.
 *   rank 1:  loops on MPI_Iprobe(source 0, tag 11) until that message has
 *            arrived, then on MPI_Iprobe(source 0, tag 12); MPI_Iprobe does
 *            not receive, so both stay unexpected. Then posts
 *            MPI_Irecv(16 x MPI_INT, source 0, tag 13), which matches neither.
 *   ranks 2..n-1: do nothing.
 *   then every rank prints "MPIQ-READY rank=<r> pid=<pid>" and sleeps in
 *   pause() forever without calling MPI.
 *
 * Queues on MPI_COMM_WORLD:
 *   rank 0:       posted receives: empty; sends: empty; unexpected: empty.
 *   rank 1:       posted receives: exactly 1: from local rank 0, tag 13,
 *                 16 MPI_INT (Open MPI length 64 bytes, MPICH 16).
 *                 sends: empty.
 *                 unexpected, in arrival order: from local rank 0 tag 11
 *                 (4 MPI_INT), then from local rank 0 tag 12 (8 MPI_INT).
 *                 MPICH shows these, status complete, actual_length -1
 *                 (unknown).
 *                 Open MPI 4.1.4's MQD does NOT implement the unexpected
 *                 queue (mqs_setup_operation_iterator is a TODO for
 *                 mqs_unexpected_messages): it must be reported as "not
 *                 available", not as empty.
 *   ranks 2..n-1: all queues empty.
 */
#include <mpi.h>
#include <stdio.h>

#include "mpiq_example.h"

int main(int argc, char **argv)
{
    int rank, size;
    static int a[4] = {1, 2, 3, 4}, b[8] = {1, 2, 3, 4, 5, 6, 7, 8}, rbuf[16];
    MPI_Request req;

    mpiq_init_world(&argc, &argv, "unexpected", 2, 0, &rank, &size);

    if (rank == 0) {
        MPI_Send(a, 4, MPI_INT, 1, 11, MPI_COMM_WORLD);
        MPI_Send(b, 8, MPI_INT, 1, 12, MPI_COMM_WORLD);
    } else if (rank == 1) {
        for (int tag = 11; tag <= 12; tag++) {
            int flag = 0;
            while (!flag)
                MPI_Iprobe(0, tag, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        }
        MPI_Irecv(rbuf, 16, MPI_INT, 0, 13, MPI_COMM_WORLD, &req);
    }

    mpiq_ready(rank);
    mpiq_wait_forever();
}
