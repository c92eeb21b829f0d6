/*
 * pipe_stuck.c - hung, but not deadlocked: one rank is blocked in a system
 * call that never returns, and the other ranks wait for its message.
 *
 * Run with >= 2 ranks (the harness default is 4). n = number of ranks. On
 * MPI_COMM_WORLD:
 *   ranks 0..n-2:  print READY, then MPI_Recv(1 int, source n-1, tag 8) from
 *                  main (never returns).
 *   rank n-1:      makes a pipe and keeps both of its ends open, prints
 *                  READY, then blocks in read() on it, in its own function
 *                  wait_for_token(): no one ever writes to the pipe, so it
 *                  never sends the n-1 messages (tag 8) that the others wait
 *                  for.
 *
 * Queues on MPI_COMM_WORLD (both MPIs; Open MPI lengths in bytes, MPICH in
 * elements; sends empty everywhere):
 *   ranks 0..n-2:  receives: 1, from local rank n-1, tag 8, 1 MPI_INT,
 *                  pending (posted inside MPI_Recv, after READY).
 *   rank n-1:      nothing.
 * Where the ranks are (gdb): ranks 0..n-2 in PMPI_Recv from main; rank n-1
 * in read from wait_for_token (blocked outside MPI).
 *
 * Designed verdict (every MPI): no deadlock, as the verdict's rules say (a
 * rank blocked outside MPI may still return and send), and the summary's
 * first sentence names it: "ranks 0-(n-2) wait in MPI_Recv from rank n-1,
 * tag 8 on MPI_COMM_WORLD (pipe_stuck.c:LINE) for rank n-1, which is
 * blocked outside MPI in read, called from wait_for_token
 * (pipe_stuck.c:LINE)".
 */
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

#include "mpiq_example.h"

/* Waits for a token no one writes: read() never returns. */
static int wait_for_token(int fd)
{
    int token = 0;
    ssize_t got = read(fd, &token, sizeof token); /* MPIQ-READ-LINE */
    return got == (ssize_t)sizeof token ? token : -1;
}

int main(int argc, char **argv)
{
    int rank, size, value = -1;

    mpiq_init_world(&argc, &argv, "pipe_stuck", 2, 0, &rank, &size);

    if (rank == size - 1) {
        int fds[2];
        if (pipe(fds) != 0) {
            perror("pipe_stuck: pipe");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        mpiq_ready(rank);
        value = wait_for_token(fds[0]); /* never returns: fds[1] stays open */
        for (int r = 0; r < size - 1; r++)
            MPI_Send(&value, 1, MPI_INT, r, 8, MPI_COMM_WORLD);
    } else {
        mpiq_ready(rank);
        MPI_Recv(&value, 1, MPI_INT, size - 1, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* MPIQ-RECV-LINE */
    }

    MPI_Finalize();
    return 0;
}
