/*
 * blacs_mismatch.c - a mismatched collective inside a second real
 * third-party MPI library: BLACS, the communication layer of ScaLAPACK
 * (Debian's libscalapack-openmpi-dev, on Debian's Open MPI).
 *
 * Ranks (>= 2, harness default 4): a 1 x size BLACS process grid
 * (Cblacs_pinfo, Cblacs_get, Cblacs_gridinit). Then:
 *   - ranks 0..size-2 call sum_norms(): Cdgsum2d over the whole grid
 *     (scope "All", result everywhere), a collective element-wise sum, which
 *     BLACS makes with MPI_Allreduce;
 *   - rank size-1 calls sync_grid() instead: Cblacs_barrier over the whole
 *     grid, which BLACS makes with MPI_Barrier.
 * Each rank prints READY right before that call (the lines marked
 * "mpiq: sum" and "mpiq: barrier") and stays in it: an MPI_Allreduce and an
 * MPI_Barrier on the grid's communicator (BLACS's own duplicate of
 * MPI_COMM_WORLD) never match.
 *
 * No queues: Debian's Open MPI has no message queue debugging support
 * installed (stacks only). Designed verdict: deadlock, by the stall rule
 * (every rank blocked in MPI, nothing changed between two samples). The
 * application's own calls are Cdgsum2d in sum_norms and Cblacs_barrier in
 * sync_grid.
 *
 * The BLACS C interface has no header in Debian's packages: the prototypes
 * below are those of ScaLAPACK's BLACS/SRC (C interface, int contexts).
 */
#include <mpi.h>
#include <stdio.h>

#include "mpiq_example.h"

void Cblacs_pinfo(int *mypnum, int *nprocs);
void Cblacs_get(int icontxt, int what, int *val);
void Cblacs_gridinit(int *icontxt, char *order, int nprow, int npcol);
void Cblacs_barrier(int icontxt, char *scope);
void Cdgsum2d(int icontxt, char *scope, char *top, int m, int n, double *a, int lda, int rdest, int cdest);

static void sum_norms(int ctxt, int rank)
{
    double norms[4] = {rank, rank * 2.0, rank * 3.0, rank * 4.0};
    mpiq_ready(rank);
    Cdgsum2d(ctxt, "All", " ", 4, 1, norms, 4, -1, -1); /* mpiq: sum */
}

static void sync_grid(int ctxt, int rank)
{
    mpiq_ready(rank);
    Cblacs_barrier(ctxt, "All"); /* mpiq: barrier */
}

int main(int argc, char **argv)
{
    int rank, size, me, nprocs, ctxt;
    mpiq_init_world(&argc, &argv, "blacs_mismatch", 2, 0, &rank, &size);
    Cblacs_pinfo(&me, &nprocs);
    Cblacs_get(-1, 0, &ctxt);
    Cblacs_gridinit(&ctxt, "Row", 1, nprocs);

    if (rank < size - 1)
        sum_norms(ctxt, rank);
    else
        sync_grid(ctxt, rank);
    /* Not reached while the last rank is in the barrier. */
    mpiq_wait_forever();
    return 0;
}
