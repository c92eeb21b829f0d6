/*
 * deep_stack.c DEPTH - deep call stacks, for the unwinder's benchmark and
 * bounds (not a verdict test).
 *
 * Run with n >= 2 ranks (default in the harness: 2), argument DEPTH
 * (default 100): every rank recurses DEPTH frames deep through descend(),
 * prints READY, then
 *   rank 0:    MPI_Barrier(MPI_COMM_WORLD) (never returns),
 *   rank k>0:  pause() without calling MPI (mpiq_wait_forever).
 * Queues: nothing pending on any rank.
 * Verdict (both MPIs): rank 1 is idle with no pending operation, so it may
 * still arrive at the barrier: no deadlock is shown (an idle rank keeps the
 * queue-only semantics, docs/design/stacks.md §4.3).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "mpiq_example.h"

static int rank;

/* Not a tail call: the result is used after the recursive call returns. */
static int descend(int depth)
{
    volatile int here = depth;
    if (depth <= 0) {
        mpiq_ready(rank);
        if (rank == 0)
            MPI_Barrier(MPI_COMM_WORLD); /* never returns */
        else
            mpiq_wait_forever();
        return 0;
    }
    return descend(depth - 1) + here;
}

int main(int argc, char **argv)
{
    int size, depth = argc > 1 ? atoi(argv[1]) : 100;

    mpiq_init_world(&argc, &argv, "deep_stack", 2, 0, &rank, &size);
    descend(depth);
    MPI_Finalize();
    return 0;
}
