/*
 * transfer.c [MIB [REPEAT | SECONDSs]] - a healthy job whose two ranks spend their time
 * inside one large blocking transfer: `mpiq run --detect` must let it
 * finish, and `mpiq job` must never call it deadlocked while both ranks sit
 * in the same MPI_Send and MPI_Recv across its samples.
 *
 * Run with n >= 2 ranks (default in the harness: 2). REPEAT times (default
 * 10), or, given as SECONDS followed by "s" (e.g. "20s"), as many rounds as
 * start within SECONDS of the first one on rank 0's clock, so that a test
 * sees the job run as long on a fast machine as on a slow one. On
 * MPI_COMM_WORLD:
 *   rank 0: MPI_Send of MIB MiB (default 1024) to rank 1, tag 5: every other
 *     double of a buffer twice that size (one MPI_Type_vector, stride 2), so
 *     the MPI packs it as it goes, slower than a plain copy;
 *   rank 1: MPI_Recv of the same MIB MiB from rank 0, tag 5, as contiguous
 *     MPI_DOUBLEs, then checks every value;
 *   every rank: MPI_Barrier (ranks 2.. wait there all along);
 *   with SECONDS only, every rank: MPI_Bcast of one int from rank 0, whether
 *     another round follows.
 * READY is printed once, before the first transfer (so a test sees the
 * ranks inside it). After the last: MPI_Finalize, exit status 0.
 * Memory: rank 0 2 x MIB MiB, rank 1 MIB MiB.
 *
 * Queues while a transfer is on: rank 0's send to rank 1 (tag 5, MIB MiB) in
 * its send queue, rank 1's receive from rank 0 (tag 5) posted, or nothing
 * once the MPI has matched them. Where the ranks are (gdb): in PMPI_Send from
 * main (rank 0), in PMPI_Recv from main (rank 1), in `check` from main, or in
 * PMPI_Barrier (or PMPI_Bcast).
 *
 * Designed verdict: no deadlock at any moment (the send and the receive
 * match); from stacks alone, unknown at worst (the stacks cannot show the
 * match); never hung.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpiq_example.h"

static long check(const double *got, long n, int round)
{
    long bad = 0;
    for (long k = 0; k < n; k++)
        if (got[k] != (double)(k + round))
            bad++;
    return bad;
}

int main(int argc, char **argv)
{
    int rank, size;

    mpiq_init_world(&argc, &argv, "transfer", 2, 0, &rank, &size);
    long mib = argc > 1 ? atol(argv[1]) : 1024;
    int repeat = argc > 2 ? atoi(argv[2]) : 10;
    double seconds = 0;
    if (argc > 2 && argv[2][0] && argv[2][strlen(argv[2]) - 1] == 's') {
        seconds = atof(argv[2]);
        repeat = seconds > 0 ? 1 : 0;
    }
    long n = mib * (1024 * 1024 / (long)sizeof(double));
    if (mib < 1 || n > 0x7fffffffL || repeat < 1) {
        if (rank == 0)
            fprintf(stderr, "transfer: MIB must be 1..16383 and REPEAT (or SECONDSs) positive\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    double *buf = NULL;
    MPI_Datatype every_other;
    MPI_Type_vector((int)n, 1, 2, MPI_DOUBLE, &every_other);
    MPI_Type_commit(&every_other);
    if (rank == 0)
        buf = malloc(2 * (size_t)n * sizeof *buf);
    else if (rank == 1)
        buf = malloc((size_t)n * sizeof *buf);
    if (rank < 2 && !buf) {
        fprintf(stderr, "transfer: out of memory for %ld MiB\n", mib);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    mpiq_ready(rank);
    double start = MPI_Wtime();
    for (int round = 0; round < repeat; round++) {
        if (rank == 0) {
            for (long k = 0; k < n; k++) {
                buf[2 * k] = (double)(k + round);
                buf[2 * k + 1] = -1.0;
            }
            MPI_Send(buf, 1, every_other, 1, 5, MPI_COMM_WORLD);
        } else if (rank == 1) {
            MPI_Recv(buf, (int)n, MPI_DOUBLE, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            long bad = check(buf, n, round);
            if (bad) {
                fprintf(stderr, "transfer: round %d: %ld values wrong\n", round, bad);
                MPI_Abort(MPI_COMM_WORLD, 3);
            }
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (seconds > 0) {
            int more = rank == 0 && MPI_Wtime() - start < seconds;
            MPI_Bcast(&more, 1, MPI_INT, 0, MPI_COMM_WORLD);
            if (more)
                repeat++;
        }
    }
    MPI_Type_free(&every_other);
    free(buf);
    MPI_Finalize();
    return 0;
}
