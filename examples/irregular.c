/*
 * irregular.c [SECONDS [LONG [LONG_IO]]] - a healthy job with long and irregular compute
 * phases, whose iterations grow longer over the run: `mpiq run --detect`
 * must let it finish (it is slow, never hung).
 *
 * Run with n >= 2 ranks (default in the harness: 4). Iteration i = 0, 1, ...:
 *   every rank computes (a busy loop on the clock, no MPI) for base(i) =
 *   200 ms x 1.04^i, except rank i % n, which computes 3 x longer, and
 *   then MPI_Allreduce(1 double, MPI_SUM) on MPI_COMM_WORLD;
 *   once, at iteration 5, rank 0 computes for LONG seconds instead (default
 *   0: no such phase; the tests give 25: "a first long phase", far longer
 *   than anything before it, the others wait for it in MPI_Allreduce all
 *   along);
 *   once, at iteration 6, rank 0 reads for LONG_IO seconds instead of
 *   computing (default 0: no such phase): a 4 MiB file of its own, again
 *   and again, 1 MiB at a time with a 10 ms pause after each pass, as a
 *   code reading its input on one rank does (its I/O counters grow; the
 *   page cache serves it, so nothing wears a disk);
 *   every 10th iteration, every rank writes and fsyncs 4 MiB to a
 *   temporary file of its own, then removes it (an I/O phase).
 * It stops after SECONDS (default 150) of iterations: the ranks agree on
 * it through the allreduce's sum, then MPI_Finalize, exit status 0.
 * READY is printed once, after the first allreduce.
 *
 * Queues: nothing fixed; mostly empty. Where the ranks are (gdb): in
 * `compute` from main, in PMPI_Allreduce from main, or in write/fsync from
 * `io_phase`.
 *
 * Designed verdict: no deadlock at any moment; never hung: a long phase of
 * 25 s is shorter than --detect's --min-hang (60 s), and every later pause
 * is shorter than 3 x the longest one seen before.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "mpiq_example.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Busy for `seconds`: the kind of loop a solver's kernel is. */
static double compute(double seconds, double x)
{
    double end = now() + seconds;
    while (now() < end)
        for (int k = 0; k < 1000; k++)
            x = x * 0.999999 + 1.0;
    return x;
}

static void io_phase(int rank)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/mpiq-irregular-%d-%d", (int)getpid(), rank);
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    static char block[1 << 20];
    for (int i = 0; i < 4; i++)
        fwrite(block, 1, sizeof block, f);
    fflush(f);
    fsync(fileno(f));
    fclose(f);
    remove(path);
}

/* Reads a 4 MiB file of its own for `seconds`: a long serial I/O phase. */
static void read_phase(int rank, double seconds)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/mpiq-irregular-read-%d-%d", (int)getpid(), rank);
    FILE *f = fopen(path, "w+");
    if (!f)
        return;
    static char block[1 << 20];
    for (int i = 0; i < 4; i++)
        fwrite(block, 1, sizeof block, f);
    fflush(f);
    double end = now() + seconds;
    while (now() < end) {
        rewind(f);
        while (fread(block, 1, sizeof block, f) == sizeof block)
            ;
        usleep(10000);
    }
    fclose(f);
    remove(path);
}

int main(int argc, char **argv)
{
    int rank, size;

    mpiq_init_world(&argc, &argv, "irregular", 2, 0, &rank, &size);
    double seconds = argc > 1 ? atof(argv[1]) : 150.0;
    double long_phase = argc > 2 ? atof(argv[2]) : 0.0;
    double long_io = argc > 3 ? atof(argv[3]) : 0.0;
    double start = now(), x = rank, base = 0.2;
    for (int i = 0;; i++, base *= 1.04) {
        double mine = (i % size == rank) ? 3 * base : base;
        if (i == 5 && rank == 0 && long_phase > 0)
            mine = long_phase;
        if (i == 6 && rank == 0 && long_io > 0)
            read_phase(rank, long_io);
        else
            x = compute(mine, x);
        if (i % 10 == 9)
            io_phase(rank);
        double done = (now() - start >= seconds) ? 1.0 : 0.0, all = 0;
        MPI_Allreduce(&done, &all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (i == 0)
            mpiq_ready(rank);
        if (all > 0)
            break;
    }
    if (x < 0)
        printf("irregular: %f\n", x);
    MPI_Finalize();
    return 0;
}
