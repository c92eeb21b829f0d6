/*
 * waitany.c [any|all] - MPI_Waitany over two receives, one of whose senders
 * is still computing (no deadlock); with "all", MPI_Waitall (deadlock).
 *
 * Run with exactly 3 ranks (the harness default). The argument is "any"
 * (the default, and the harness's) or "all". On MPI_COMM_WORLD:
 *   rank 0:  MPI_Irecv(1 int, source 1, tag 1), MPI_Irecv(1 int, source 2,
 *            tag 2), prints READY, then MPI_Waitany on both ("all":
 *            MPI_Waitall) (never returns).
 *   rank 1:  prints READY, then MPI_Recv(1 int, source 0, tag 9) (never
 *            returns).
 *   rank 2:  prints READY, then loops forever in usleep(100 ms) without
 *            calling MPI ("computing").
 *
 * Queues on MPI_COMM_WORLD (the same for "any" and "all"; sends empty
 * everywhere; unexpected: MPICH empty, Open MPI not available):
 *   rank 0:  receives: 2: from local rank 1, tag 1 and from local rank 2,
 *            tag 2, 1 MPI_INT each (Open MPI length 4, MPICH 1). MPICH lists
 *            them in posting order, pending. Open MPI lists them in its
 *            free-list order (tag 2 first) and, once the rank is in
 *            MPI_Waitany/MPI_Waitall, reports them COMPLETE although they are
 *            not: the wait stores a pointer to its ompi_wait_sync_t in each
 *            request's req_complete (req_wait.c:110 Waitany, 218 Waitall),
 *            and the debug library reads that field as a one-byte bool
 *            (ompi_msgq_dll.c:1128-1136); "pending" only when the pointer's
 *            low byte happens to be 0.
 *   rank 1:  receives: 1, from local rank 0, tag 9, 1 MPI_INT, pending (posted
 *            inside MPI_Recv, after READY).
 *   rank 2:  nothing.
 * Where the ranks are (gdb): rank 0 in PMPI_Waitany (PMPI_Waitall) from main;
 * rank 1 in PMPI_Recv; rank 2 in usleep -> nanosleep ("computing").
 *
 * Designed verdict (Open MPI 4.1.4 and MPICH 4.0.2):
 *   any: no deadlock. Rank 2 computes and may still send tag 2 to rank 0,
 *        which completes the Waitany; rank 0 may then send to rank 1.
 *   all: deadlock, cycle [0,1]: the Waitall needs rank 1's message too, and
 *        rank 1 waits in MPI_Recv for rank 0 (rank 2 computing does not help).
 * Open MPI ties the requests to its queue entries; MPICH's are not tied, the
 * call then covers all of rank 0's pending receives: the same verdicts.
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "mpiq_example.h"

#define COMPUTE_US 100000

int main(int argc, char **argv)
{
    int rank, size, value = -1, in[2] = {-1, -1}, all;
    MPI_Request reqs[2];
    MPI_Status statuses[2];

    mpiq_init_world(&argc, &argv, "waitany", 3, 3, &rank, &size);
    if (argc < 2 || strcmp(argv[1], "any") == 0) {
        all = 0;
    } else if (strcmp(argv[1], "all") == 0) {
        all = 1;
    } else {
        fprintf(stderr, "waitany: the argument is \"any\" or \"all\", not \"%s\"\n", argv[1]);
        MPI_Abort(MPI_COMM_WORLD, 2);
        return 2;
    }

    if (rank == 0) {
        int index;
        MPI_Irecv(&in[0], 1, MPI_INT, 1, 1, MPI_COMM_WORLD, &reqs[0]);
        MPI_Irecv(&in[1], 1, MPI_INT, 2, 2, MPI_COMM_WORLD, &reqs[1]);
        mpiq_ready(rank);
        if (all)
            MPI_Waitall(2, reqs, statuses); /* never returns */
        else
            MPI_Waitany(2, reqs, &index, MPI_STATUS_IGNORE); /* never returns */
    } else if (rank == 1) {
        mpiq_ready(rank);
        MPI_Recv(&value, 1, MPI_INT, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* never returns */
    } else {
        mpiq_ready(rank);
        for (;;)
            usleep(COMPUTE_US); /* "computing": no MPI call */
    }

    MPI_Finalize();
    return 0;
}
