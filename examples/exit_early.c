/*
 * exit_early.c - hung, and never to be served: one rank finalizes and
 * exits while the others still wait for its message.
 *
 * Run with >= 2 ranks (the harness default is 4). n = number of ranks. On
 * MPI_COMM_WORLD:
 *   ranks 0..n-2:  print READY, then MPI_Recv(1 int, source n-1, tag 9) from
 *                  main (never returns).
 *   rank n-1:      prints READY, calls MPI_Finalize and exits 0 without
 *                  sending (a forgotten send on an early exit path).
 *
 * How the rank gets out: Open MPI's MPI_Finalize begins with a barrier of
 * the whole job (a PMIx fence), which would keep rank n-1 inside
 * MPI_Finalize; the program sets OMPI_MCA_async_mpi_finalize=1 in its own
 * environment before MPI_Init (Open MPI's documented "do not perform a
 * barrier at the beginning of MPI_Finalize"; MPICH ignores it), so rank
 * n-1 really exits. A rank that ends *without* MPI_Finalize, or is killed,
 * makes mpirun and hydra end the whole job: nothing is left to look at.
 * Having finalized and exited 0, rank n-1 is a normal exit to the
 * starters, which wait for the other ranks; those wait forever.
 *
 * Queues on MPI_COMM_WORLD (both MPIs; Open MPI lengths in bytes, MPICH in
 * elements; sends empty everywhere):
 *   ranks 0..n-2:  receives: 1, from local rank n-1, tag 9, 1 MPI_INT,
 *                  pending (posted inside MPI_Recv, after READY).
 *   rank n-1:      no process (after READY, a moment later).
 * Where the ranks are (gdb): ranks 0..n-2 in PMPI_Recv from main.
 *
 * Designed verdict (every MPI): unknown (a rank the job references has no
 * process: mpiq cannot read it, so it cannot show a cycle or a way out),
 * and the summary's first sentence names it: "ranks 0-(n-2) wait in
 * MPI_Recv from rank n-1, tag 9 on MPI_COMM_WORLD (exit_early.c:LINE) for
 * rank n-1, which is not in the snapshot (exited, killed or never found)".
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "mpiq_example.h"

int main(int argc, char **argv)
{
    int rank, size, value = -1;

    /* Let Open MPI's MPI_Finalize return without waiting for every rank. */
    setenv("OMPI_MCA_async_mpi_finalize", "1", 1);
    mpiq_init_world(&argc, &argv, "exit_early", 2, 0, &rank, &size);

    mpiq_ready(rank);
    if (rank == size - 1) {
        MPI_Finalize(); /* and exit, without the send the others wait for */
        return 0;
    }
    MPI_Recv(&value, 1, MPI_INT, size - 1, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* MPIQ-RECV-LINE */

    MPI_Finalize();
    return 0;
}
