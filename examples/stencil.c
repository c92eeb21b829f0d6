/*
 * stencil.c [ITERATIONS [POINTS]] - a healthy job of fixed work: a 1-D Jacobi
 * smoother, the kind of kernel a bulk-synchronous solver runs. mpiq-bench
 * times it with and without `mpiq run --detect` (what watching costs a job:
 * its run time is its work, so every moment a rank is held stopped shows);
 * the tests run it under --detect as a healthy job whose ranks never stand
 * still.
 *
 * Run with n >= 1 ranks (default in the harness: 4). Each world rank owns
 * POINTS doubles (default 1000000) of a line split over the ranks in order.
 * Iteration i = 0 .. ITERATIONS-1 (default 2000):
 *   halo exchange with both neighbours on MPI_COMM_WORLD (two MPI_Sendrecv
 *   of 1 MPI_DOUBLE, tags 1 and 2; MPI_PROC_NULL at the ends);
 *   one Jacobi sweep over its points (new[k] = (old[k-1] + old[k+1]) / 2,
 *   the line's ends held at 0 and 1);
 *   MPI_Allreduce(sum of the squared changes, MPI_SUM) on MPI_COMM_WORLD.
 * Every rank does the same work, and every iteration waits on the others:
 * a rank stopped for a moment delays them all. READY is printed once, after
 * the first iteration; after the last, rank 0 prints "stencil: change
 * <value>", then MPI_Finalize, exit status 0.
 *
 * Queues: nothing fixed; mostly empty. Where the ranks are (gdb): in `sweep`
 * from main, or in PMPI_Sendrecv / PMPI_Allreduce from main.
 *
 * Designed verdict: no deadlock at any moment; never hung.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "mpiq_example.h"

/* One sweep: `next` from `cur`, whose [0] and [n+1] are the halo. */
static double sweep(const double *cur, double *next, long n)
{
    double change = 0.0;
    for (long k = 1; k <= n; k++) {
        next[k] = 0.5 * (cur[k - 1] + cur[k + 1]);
        double d = next[k] - cur[k];
        change += d * d;
    }
    return change;
}

int main(int argc, char **argv)
{
    int rank, size;

    mpiq_init_world(&argc, &argv, "stencil", 1, 0, &rank, &size);
    long iterations = argc > 1 ? atol(argv[1]) : 2000;
    long n = argc > 2 ? atol(argv[2]) : 1000000;
    if (iterations < 1 || n < 1) {
        if (rank == 0)
            fprintf(stderr, "stencil: ITERATIONS and POINTS must be positive\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    double *cur = calloc((size_t)n + 2, sizeof *cur);
    double *next = calloc((size_t)n + 2, sizeof *next);
    if (!cur || !next) {
        fprintf(stderr, "stencil: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int left = rank > 0 ? rank - 1 : MPI_PROC_NULL;
    int right = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
    double total = 0.0;
    for (long i = 0; i < iterations; i++) {
        /* The line's ends: 0 on the left, 1 on the right. */
        cur[0] = 0.0;
        cur[n + 1] = 1.0;
        MPI_Sendrecv(&cur[n], 1, MPI_DOUBLE, right, 1, &cur[0], 1, MPI_DOUBLE, left, 1, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        MPI_Sendrecv(&cur[1], 1, MPI_DOUBLE, left, 2, &cur[n + 1], 1, MPI_DOUBLE, right, 2, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        double mine = sweep(cur, next, n);
        double *t = cur;
        cur = next;
        next = t;
        MPI_Allreduce(&mine, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (i == 0)
            mpiq_ready(rank);
    }
    if (rank == 0) {
        printf("stencil: change %.6e\n", total);
        fflush(stdout);
    }
    free(cur);
    free(next);
    MPI_Finalize();
    return 0;
}
