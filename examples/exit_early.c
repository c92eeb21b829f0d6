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
 * How the rank gets out, per MPI (tried, not assumed):
 * - Open MPI (4.1 and 5): MPI_Finalize begins with a barrier of the whole
 *   job (a PMIx fence), which would keep rank n-1 inside MPI_Finalize; the
 *   program sets OMPI_MCA_async_mpi_finalize=1 in its own environment
 *   before MPI_Init (the MCA parameter "do not perform a barrier at the
 *   beginning of MPI_Finalize"), so rank n-1 really exits 0. Having
 *   finalized, that is a normal exit to mpirun, which waits for the other
 *   ranks; those wait forever.
 * - MPICH (ch3 and ch4): the variable means nothing to it, and its
 *   MPI_Finalize waits for every connection to close (ch3's
 *   MPIDI_CH3U_VC_WaitForClose), which the others never do: rank n-1
 *   stays in MPI_Finalize. A rank that exits without MPI_Finalize makes
 *   hydra kill the whole job ("BAD TERMINATION", signal 9), as a rank that
 *   is killed makes both starters do: nothing would be left to look at.
 *
 * Queues on MPI_COMM_WORLD (both MPIs; Open MPI lengths in bytes, MPICH in
 * elements; sends empty everywhere):
 *   ranks 0..n-2:  receives: 1, from local rank n-1, tag 9, 1 MPI_INT,
 *                  pending (posted inside MPI_Recv, after READY).
 *   rank n-1:      Open MPI: no process (a moment after READY); MPICH:
 *                  nothing (in MPI_Finalize).
 * Where the ranks are (gdb): ranks 0..n-2 in PMPI_Recv from main; under
 * MPICH rank n-1 in PMPI_Finalize from main.
 *
 * Designed verdict. Open MPI: unknown (a rank the job references has no
 * process: mpiq cannot read it, so it can show neither a cycle nor a way
 * out), and the summary's first sentence names it: "ranks 0-(n-2) wait in
 * MPI_Recv from rank n-1, tag 9 on MPI_COMM_WORLD (exit_early.c:LINE) for
 * rank n-1, which has exited (its process is gone from the job)" (or "is
 * not in the snapshot" where the starter lists no process for it).
 * MPICH: deadlock (every rank blocked in MPI, nothing changes between two
 * samples: rank n-1 in MPI_Finalize, the others in MPI_Recv from it).
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
