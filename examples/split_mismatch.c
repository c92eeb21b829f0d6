/*
 * split_mismatch.c - a collective mismatch: two ranks wait in barriers on
 * different communicators.
 *
 * Run with exactly 4 ranks (the harness default).
 * MPI_COMM_WORLD is split by color r / 2 (key r) into two communicators of
 * two ranks, named with MPI_Comm_set_name: "low" (world ranks 0, 1) and
 * "high" (world ranks 2, 3).
 *   rank 0:    prints READY, then MPI_Barrier("low")        (never returns).
 *   rank 1:    prints READY, then MPI_Barrier(MPI_COMM_WORLD) (never returns).
 *   ranks 2,3: MPI_Barrier("high") (completes: both are in it), then print
 *              READY, then MPI_Barrier(MPI_COMM_WORLD)      (never returns).
 * Rank 0 waits for rank 1 on "low"; rank 1 waits for rank 0 on
 * MPI_COMM_WORLD; ranks 2 and 3 wait on MPI_COMM_WORLD for rank 0, which
 * never comes.
 *
 * Queues (verified on both MPIs, every rank in its last barrier): nothing
 * pending on any communicator of any rank. The barriers' own messages are not
 * listed: Open MPI hides their negative tags (ompi_msgq_dll.c:1111-1120);
 * MPICH sends them on the communicators' collective contexts, which its
 * debug library does not show. Communicators: MPI_COMM_WORLD and one of
 *   "low":  size 2, world ranks 0, 1 (local rank = r),
 *   "high": size 2, world ranks 2, 3 (local rank = r - 2);
 * Open MPI lists their world ranks, MPICH does not (only WORLD's and SELF's).
 * Where the ranks are (gdb, both MPIs): rank 0 in PMPI_Barrier from main
 * (Open MPI: ompi_coll_base_barrier_intra_recursivedoubling; MPICH:
 * MPIR_Barrier_intra_dissemination under MPIR_Barrier_intra_smp), ranks 1-3
 * in PMPI_Barrier on MPI_COMM_WORLD (Open MPI: basic_linear, in
 * mca_pml_ob1_recv).
 *
 * Designed verdict (Open MPI 4.1.4 and MPICH 4.0.2): deadlock, cycle [0,1]
 * (a collective mismatch: rank 0 is in MPI_Barrier on "low" and waits for
 * rank 1, which is in MPI_Barrier on MPI_COMM_WORLD and waits for rank 0);
 * ranks 2 and 3 are blocked behind it (in MPI_Barrier on MPI_COMM_WORLD,
 * waiting for rank 0). MPICH lists no world ranks for "low"/"high" (no
 * mqs_get_comm_group): a tool identifies "low" across ranks by (name, size).
 */
#include <mpi.h>
#include <stdio.h>

#include "mpiq_example.h"

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Comm half;

    mpiq_init_world(&argc, &argv, "split_mismatch", 4, 4, &rank, &size);

    MPI_Comm_split(MPI_COMM_WORLD, rank / 2, rank, &half);
    MPI_Comm_set_name(half, rank / 2 == 0 ? "low" : "high");

    if (rank == 0) {
        mpiq_ready(rank);
        MPI_Barrier(half); /* "low": never returns */
    } else if (rank == 1) {
        mpiq_ready(rank);
        MPI_Barrier(MPI_COMM_WORLD); /* never returns */
    } else {
        MPI_Barrier(half); /* "high": ranks 2 and 3 both arrive, it completes */
        mpiq_ready(rank);
        MPI_Barrier(MPI_COMM_WORLD); /* never returns */
    }

    MPI_Finalize();
    return 0;
}
