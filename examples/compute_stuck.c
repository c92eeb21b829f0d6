/*
 * compute_stuck.c - hung, but not deadlocked: one rank never leaves a loop of
 * its own code, and every other rank waits for it in a collective.
 *
 * Run with >= 2 ranks (the harness default is 4). n = number of ranks.
 *   ranks 0..n-2:  print READY, then MPI_Allreduce(1 double, MPI_SUM,
 *                  MPI_COMM_WORLD) from main (never returns).
 *   rank n-1:      prints READY, then loops forever in smooth(), its own
 *                  function, without calling MPI (a convergence loop that
 *                  never converges). The loop is one source line, so every
 *                  sample shows the same line.
 *
 * Queues: nothing pending anywhere (a collective posts nothing the debug
 * libraries list; MPICH's unexpected queues may show the collective's own
 * internal messages on MPI_COMM_WORLD's collective context, which mpiq
 * does not list as the application's).
 * Where the ranks are (gdb): ranks 0..n-2 in PMPI_Allreduce from main; rank
 * n-1 in smooth (computing, its top frame is its own code).
 *
 * Designed verdict (every MPI): no deadlock, as the verdict's rules say
 * (rank n-1 can still run and join), and the summary's first sentence names
 * it: "ranks 0-(n-2) wait in MPI_Allreduce on MPI_COMM_WORLD
 * (compute_stuck.c:LINE) for rank n-1, which is computing in smooth
 * (compute_stuck.c:LINE)".
 */
#include <mpi.h>
#include <stdio.h>

#include "mpiq_example.h"

/* Never converges: no MPI call inside, always on this one line. */
static double smooth(double x)
{
    for (;;) x = x * 0.5 + 1.0; /* MPIQ-SMOOTH-LINE */
    return x;
}

int main(int argc, char **argv)
{
    int rank, size;
    double local = 1.0, global = 0.0;

    mpiq_init_world(&argc, &argv, "compute_stuck", 2, 0, &rank, &size);

    mpiq_ready(rank);
    if (rank == size - 1)
        local = smooth(local); /* never returns */
    MPI_Allreduce(&local, &global, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* MPIQ-ALLREDUCE-LINE */

    MPI_Finalize();
    return 0;
}
