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
 * Designed verdict: one sample cannot tell a livelock from a job that is
 * about to receive; over time nothing changes in any rank's place or
 * queues while every rank polls: `mpiq run --detect` calls it hung once it
 * has stood still for longer than its rule allows (--min-hang, 60 s, when
 * the job was never seen still before).
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
