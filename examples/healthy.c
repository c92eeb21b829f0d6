/*
 * healthy.c [STEPS] - a job that is not hung: it exchanges around a ring
 * forever, or STEPS steps when given (then MPI_Finalize, exit status 0).
 *
 * Run with n >= 2 ranks (default in the harness: 4).
 * Each world rank r, forever (or for s < STEPS), step s = 0, 1, 2, ...:
 *   MPI_Sendrecv(1 int to (r + 1) % n, tag s % 32768;
 *                1 int from (r - 1 + n) % n, tag s % 32768) on MPI_COMM_WORLD,
 *   checks the value, then usleep(50 ms) without calling MPI.
 * READY is printed once, after step 0. Without STEPS the job never ends by
 * itself: it runs until killed (or until MPIQ_EXAMPLE_LIFETIME ends it);
 * with STEPS (about 50 ms each) it ends well, for a healthy job that
 * finishes (`mpiq run --detect` must let it).
 *
 * Queues: nothing fixed. They change at every step: mostly empty, at times
 * one posted receive (from the left neighbour, tag = the current step) or a
 * message not yet received. Where the ranks are (gdb): most of the time in
 * usleep -> nanosleep from main; at times in PMPI_Sendrecv.
 *
 * Designed verdict (Open MPI 4.1.4 and MPICH 4.0.2): no deadlock: the ranks
 * progress (two samples show them moving between MPI_Sendrecv and usleep, and
 * their queues change); on a core (one sample) the ranks in usleep are
 * computing, which frees the others.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "mpiq_example.h"

#define DELAY_US 50000
#define TAG_MOD 32768 /* MPI guarantees tags up to 32767 */

int main(int argc, char **argv)
{
    int rank, size;

    mpiq_init_world(&argc, &argv, "healthy", 2, 0, &rank, &size);
    long steps = argc > 1 ? atol(argv[1]) : 0; /* 0: forever */
    int left = (rank - 1 + size) % size;
    int right = (rank + 1) % size;

    for (long s = 0; steps <= 0 || s < steps; s++) {
        int tag = (int)(s % TAG_MOD);
        int out = rank * 1000 + tag % 1000, in = -1;
        MPI_Sendrecv(&out, 1, MPI_INT, right, tag, &in, 1, MPI_INT, left, tag, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        if (in != left * 1000 + tag % 1000) {
            fprintf(stderr, "healthy: rank %d step %ld got %d\n", rank, s, in);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        if (s == 0)
            mpiq_ready(rank);
        usleep(DELAY_US); /* "computing": no MPI call */
    }

    /* reached only with STEPS */
    MPI_Finalize();
    return 0;
}
