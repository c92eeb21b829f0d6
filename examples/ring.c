/*
 * ring.c - every rank has one posted receive and one send that never match.
 *
 * Run with n >= 2 ranks (default in the harness: 4) and n <= 100.
 * Let left = (r - 1 + n) % n and right = (r + 1) % n for world rank r.
 *
 * Each rank r, on MPI_COMM_WORLD only (no other user communicator):
 *   1. MPI_Irecv(16 x MPI_INT, source = left,  tag = 100 + r)   -> posted receive
 *   2. MPI_Isend(16 x MPI_INT, dest   = right, tag = 200 + r)   -> small, eager
 * Receive tags are 100..199 and send tags 200..299, so no send matches any
 * receive. Rank r's message to `right` carries tag 200 + r; `right` waits for
 * tag 100 + right.
 *   3. Loops on MPI_Iprobe(source = left, tag = 200 + left) until left's
 *      message has arrived (Iprobe does not remove it), so that the receiver
 *      side is deterministic before READY.
 *   4. Prints "MPIQ-READY rank=<r> pid=<pid>" and sleeps in pause() forever,
 *      making no more MPI calls.
 *
 * Queues of rank r on MPI_COMM_WORLD, as MQD shows them:
 *   posted receives: exactly 1: desired local rank = left, tag 100 + r,
 *                    16 MPI_INT (Open MPI length 64 bytes, MPICH length 16).
 *   sends:           Open MPI: empty (the eager send completed and left the
 *                    queue). MPICH: 1 entry to local rank `right`, tag 200 + r,
 *                    length 16, status complete (stays until waited on).
 *   unexpected:      MPICH: 1 message from local rank `left`, tag 200 + left,
 *                    status complete (the eager data has arrived),
 *                    actual_length -1 (unknown). Open MPI 4.1.4: not available
 *                    (its MQD does not implement the unexpected queue).
 * On MPI_COMM_WORLD local rank == world rank.
 */
#include <mpi.h>
#include <stdio.h>

#include "mpiq_example.h"

#define COUNT 16

int main(int argc, char **argv)
{
    int rank, size, flag = 0;
    static int rbuf[COUNT], sbuf[COUNT];
    MPI_Request reqs[2];

    mpiq_arm_lifetime();
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2 || size > 100) {
        if (rank == 0)
            fprintf(stderr, "ring: needs 2..100 ranks, got %d\n", size);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int left = (rank - 1 + size) % size;
    int right = (rank + 1) % size;
    for (int i = 0; i < COUNT; i++)
        sbuf[i] = rank * 1000 + i;

    MPI_Irecv(rbuf, COUNT, MPI_INT, left, 100 + rank, MPI_COMM_WORLD, &reqs[0]);
    MPI_Isend(sbuf, COUNT, MPI_INT, right, 200 + rank, MPI_COMM_WORLD, &reqs[1]);
    while (!flag)
        MPI_Iprobe(left, 200 + left, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);

    mpiq_ready(rank);
    mpiq_wait_forever();
}
