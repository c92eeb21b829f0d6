/*
 * many_ops.c - K posted receives per rank, for performance tests.
 *
 * Usage: many_ops [K]   (K defaults to 1000; the harness tests use 100;
 *                        1 <= K <= 1000000; tags wrap every 30000 receives
 *                        so they stay within MPI's minimum guaranteed
 *                        MPI_TAG_UB of 32767)
 * Run with n >= 2 ranks (default in the harness: 2).
 * Each world rank r, on MPI_COMM_WORLD, posts in this order for i = 0..K-1:
 *   MPI_Irecv(1 x MPI_INT, source = (r + 1) % n, tag = 1000 + i % 30000)
 * Nobody sends. Then prints "MPIQ-READY rank=<r> pid=<pid>" and sleeps in
 * pause() forever without calling MPI.
 *
 * Queues of rank r on MPI_COMM_WORLD:
 *   posted receives: exactly K: desired local rank (r + 1) % n, tags 1000,
 *                    1001, ..., 1000 + K - 1 for K <= 30000 (for larger K
 *                    the tags 1000..30999 repeat: receive i has tag
 *                    1000 + i % 30000), each 1 MPI_INT (Open MPI length
 *                    4 bytes, MPICH length 1). MPICH lists them in posting
 *                    order. Open MPI lists them in the order of its request
 *                    free list, NOT posting order (K = 100 gave tags
 *                    1003 1002 1001 1000 1004 1067 1066 ... 1005 1068 1099
 *                    ... 1069): compare them as a set.
 *   sends:           empty.
 *   unexpected:      MPICH: empty. Open MPI 4.1.4: not available.
 */
#include <mpi.h>
#include <stdio.h>

#include "mpiq_example.h"

int main(int argc, char **argv)
{
    int rank, size;
    long k = 1000;

    mpiq_arm_lifetime();
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1)
        k = strtol(argv[1], NULL, 10);
    if (size < 2 || k < 1 || k > 1000000) {
        fprintf(stderr, "many_ops: needs >= 2 ranks and 1 <= K <= 1000000\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    int *bufs = calloc((size_t)k, sizeof(int));
    MPI_Request *reqs = calloc((size_t)k, sizeof(MPI_Request));
    if (!bufs || !reqs) {
        fprintf(stderr, "many_ops: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    for (long i = 0; i < k; i++)
        MPI_Irecv(&bufs[i], 1, MPI_INT, (rank + 1) % size, (int)(1000 + i % 30000), MPI_COMM_WORLD,
                  &reqs[i]);

    mpiq_ready(rank);
    mpiq_wait_forever();
}
