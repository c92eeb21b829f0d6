/*
 * named_comms.c - named user communicators, a wildcard receive and a large
 * (rendezvous) send that no one receives.
 *
 * Run with n >= 4 ranks (default in the harness: 4). Let h = n / 2.
 * Communicators (all names set with MPI_Comm_set_name):
 *   "solver"      MPI_Comm_dup(MPI_COMM_WORLD): n ranks, local rank == world rank.
 *   "left-half"   MPI_Comm_split(MPI_COMM_WORLD, color 0, key = world rank):
 *                 world ranks 0 .. h-1, local rank == world rank.
 *   "right-half"  MPI_Comm_split(MPI_COMM_WORLD, color 1, key = world rank):
 *                 world ranks h .. n-1, local rank == world rank - h.
 * In each half, local rank 0 is the "sender" and local rank 1 the "receiver".
 *
 * Operations, in this order:
 *   every rank:    on "solver": MPI_Irecv(16 x MPI_INT, MPI_ANY_SOURCE,
 *                  MPI_ANY_TAG). Nothing is ever sent on "solver".
 *   half local 0:  on its half: MPI_Isend(16384 x MPI_INT = 64 KiB, dest =
 *                  local 1, tag = 600 + color) (600 on left-half, 601 on
 *                  right-half). 64 KiB is above both MPIs' shared-memory
 *                  eager limits (Open MPI vader 4 KiB, MPICH nemesis just
 *                  under 64 KiB), so it stays pending (rendezvous).
 *   half local 1:  on its half: MPI_Irecv(16 x MPI_INT, source = local 0,
 *                  tag = 700). Tag 700 is never sent. It then loops on
 *                  MPI_Iprobe(local 0, 600 + color) until the large send's
 *                  header has arrived (it stays unexpected).
 *   then every rank prints "MPIQ-READY rank=<world rank> pid=<pid>" and
 *   sleeps in pause() forever without calling MPI.
 *
 * Per rank for n = 4 (h = 2):
 *   world 0 (left-half local 0):
 *     solver     posted receive: ANY_SOURCE, ANY_TAG, 16 MPI_INT (64 B / 16)
 *     left-half  send: to local 1 (world 1), tag 600, 16384 MPI_INT
 *                (Open MPI length 65536 bytes, MPICH length 16384), pending
 *   world 1 (left-half local 1):
 *     solver     posted receive: ANY_SOURCE, ANY_TAG, 16 MPI_INT
 *     left-half  posted receive: from local 0 (world 0), tag 700, 16 MPI_INT
 *     left-half  unexpected (MPICH only): from local 0, tag 600
 *   world 2 (right-half local 0):
 *     solver     posted receive: ANY_SOURCE, ANY_TAG, 16 MPI_INT
 *     right-half send: to local 1 (world 3), tag 601, 16384 MPI_INT, pending.
 *                Open MPI 4.1.4 reports actual_global_rank 1 here (the
 *                untranslated local rank); the true world rank is 3.
 *   world 3 (right-half local 1):
 *     solver     posted receive: ANY_SOURCE, ANY_TAG, 16 MPI_INT
 *     right-half posted receive: from local 0 (world 2), tag 700, 16 MPI_INT
 *     right-half unexpected (MPICH only): from local 0, tag 601
 * With n > 4, ranks with local rank >= 2 in their half have only the
 * "solver" wildcard receive. MPI_COMM_WORLD has no pending operations.
 *
 * MPI differences: Open MPI shows the wildcards as 4294967295 (a zero-extended
 * 32-bit -1) for desired local rank and tag; Open MPI 4.1.4 does not implement
 * the unexpected queue; MPICH lists extra internal communicators and reports
 * lengths in elements. MPICH shows each unexpected 64 KiB message (only its
 * rendezvous header has arrived) with status pending and actual_length -1.
 * MPICH reports no world ranks for peers on the split communicators (no
 * mqs_get_comm_group); Open MPI gives the groups (left-half 0,1; right-half
 * 2,3). Open MPI's communicator ids are per-process table indices: both
 * halves have id 4 (solver 3) on their ranks.
 */
#include <mpi.h>
#include <stdio.h>

#include "mpiq_example.h"

#define SMALL 16
#define LARGE 16384 /* ints: 64 KiB */

int main(int argc, char **argv)
{
    int rank, size, hrank, flag = 0;
    static int wildbuf[SMALL], rbuf[SMALL], big[LARGE];
    MPI_Comm solver, half;
    MPI_Request reqs[2];

    mpiq_arm_lifetime();
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 4) {
        if (rank == 0)
            fprintf(stderr, "named_comms: needs at least 4 ranks, got %d\n", size);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int color = rank < size / 2 ? 0 : 1;

    MPI_Comm_dup(MPI_COMM_WORLD, &solver);
    MPI_Comm_set_name(solver, "solver");
    MPI_Comm_split(MPI_COMM_WORLD, color, rank, &half);
    MPI_Comm_set_name(half, color == 0 ? "left-half" : "right-half");
    MPI_Comm_rank(half, &hrank);
    for (int i = 0; i < LARGE; i++)
        big[i] = i;

    MPI_Irecv(wildbuf, SMALL, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, solver, &reqs[0]);
    if (hrank == 0) {
        MPI_Isend(big, LARGE, MPI_INT, 1, 600 + color, half, &reqs[1]);
    } else if (hrank == 1) {
        MPI_Irecv(rbuf, SMALL, MPI_INT, 0, 700, half, &reqs[1]);
        while (!flag)
            MPI_Iprobe(0, 600 + color, half, &flag, MPI_STATUS_IGNORE);
    }

    mpiq_ready(rank);
    mpiq_wait_forever();
}
