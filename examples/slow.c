/*
 * slow.c - the non-deadlocked control: a slow ring that finishes by itself.
 *
 * Run with n >= 2 ranks (default in the harness: 4).
 * For step s = 0 .. STEPS-1 (STEPS = 20), every world rank r on MPI_COMM_WORLD:
 *   MPI_Irecv(1 x MPI_INT, source = (r - 1 + n) % n, tag = s)
 *   usleep(200 ms)
 *   MPI_Send(1 x MPI_INT, dest = (r + 1) % n, tag = s)
 *   MPI_Wait on the receive
 * After step 0 each rank prints "MPIQ-READY rank=<r> pid=<pid>". After the
 * last step: MPI_Finalize, exit status 0. Total run time is about
 * 20 x 200 ms = 4 s plus start-up. Every wait is for a message that will
 * come, so a debugger stopping a rank for a while only delays the others.
 *
 * Queues at a random moment: at most one posted receive per rank (from the
 * left neighbour, tag = current step); small sends are eager, so the send
 * queue is normally empty; an unexpected message from the left neighbour may
 * be present (MPICH) between its arrival and the matching Irecv. Tests must
 * not assert exact contents for this program.
 */
#include <mpi.h>
#include <stdio.h>

#include "mpiq_example.h"

#define STEPS 20
#define DELAY_US 200000

int main(int argc, char **argv)
{
    int rank, size;

    mpiq_init_world(&argc, &argv, "slow", 2, 0, &rank, &size);
    int left = (rank - 1 + size) % size;
    int right = (rank + 1) % size;

    for (int s = 0; s < STEPS; s++) {
        int in = -1, out = rank * 100 + s;
        MPI_Request req;
        MPI_Irecv(&in, 1, MPI_INT, left, s, MPI_COMM_WORLD, &req);
        usleep(DELAY_US);
        MPI_Send(&out, 1, MPI_INT, right, s, MPI_COMM_WORLD);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        if (in != left * 100 + s) {
            fprintf(stderr, "slow: rank %d step %d got %d\n", rank, s, in);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        if (s == 0) {
            mpiq_ready(rank);
        }
    }

    MPI_Finalize();
    return 0;
}
