/*
 * livelock.c - a hang that is no deadlock: every rank polls for a message
 * no one ever sends, with MPI_Iprobe in a loop, burning CPU inside MPI.
 *
 * Run with n >= 2 ranks (default in the harness: 4). On MPI_COMM_WORLD:
 *   every rank: prints READY, then loops forever:
 *     MPI_Iprobe(MPI_ANY_SOURCE, tag 99, &flag) until flag (never set),
 *   no rank sends anything.
 *
 * Queues: empty on every rank (an MPI_Iprobe posts no receive), and they
 * never change. Where the ranks are (gdb): in PMPI_Iprobe (or its progress
 * engine) from main, at times in main's loop between two calls.
 *
 * Designed verdict: deadlock on two samples (the stall rule: every rank
 * inside MPI, in the same call from the same place, nothing changed and
 * nothing able to match: no rank will ever send), unknown on one; should
 * the stall rule not apply, `mpiq run --detect`'s hang rule calls it hung
 * once nothing has changed for longer than the job's own pauses explain.
 */
#include <mpi.h>
#include <stdio.h>

#include "mpiq_example.h"

int main(int argc, char **argv)
{
    int rank, size, flag = 0;

    mpiq_init_world(&argc, &argv, "livelock", 2, 0, &rank, &size);
    mpiq_ready(rank);
    while (!flag)
        MPI_Iprobe(MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    MPI_Finalize();
    return 0;
}
