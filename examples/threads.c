/*
 * threads.c [compute|join] - MPI_THREAD_MULTIPLE: a second thread blocks in
 * MPI while the main thread computes ("compute") or waits for that thread
 * ("join").
 *
 * Run with exactly 2 ranks (the harness default). The argument is "compute"
 * (the default, and the harness's) or "join". MPI_Init_thread asks for
 * MPI_THREAD_MULTIPLE; the program aborts if the library provides less.
 *   rank 0:  starts thread A, which calls MPI_Recv(1 int, source 1, tag 7,
 *            MPI_COMM_WORLD) (never returns); the main thread prints READY,
 *            then loops forever in usleep(100 ms) without calling MPI
 *            ("compute") or blocks in pthread_join(A) ("join").
 *   rank 1:  prints READY, then MPI_Recv(1 int, source 0, tag 8,
 *            MPI_COMM_WORLD) (never returns).
 *
 * Queues on MPI_COMM_WORLD (the same for "compute" and "join"; sends empty;
 * unexpected: MPICH empty, Open MPI not available), each posted inside
 * MPI_Recv, after READY:
 *   rank 0:  receives: 1, from local rank 1, tag 7, 1 MPI_INT (thread A's).
 *   rank 1:  receives: 1, from local rank 0, tag 8, 1 MPI_INT.
 * MPICH reports both pending. Open MPI reports them COMPLETE although they
 * are not: with threads in use, a blocking call stores a pointer to its
 * ompi_wait_sync_t in the request's req_complete (request.h:427) and the
 * debug library reads that field as a one-byte bool (ompi_msgq_dll.c:1128-
 * 1136); "pending" only when the pointer's low byte happens to be 0.
 * Where the threads are (gdb): rank 0's thread A in PMPI_Recv from thread_a
 * (Open MPI: ompi_sync_wait_mt under mca_pml_ob1_recv), its main thread in
 * usleep -> nanosleep ("compute") or __pthread_clockjoin_ex, a futex wait
 * without time-out ("join"); rank 1's main thread in PMPI_Recv from main.
 * Open MPI ranks also have its two service threads (poll, epoll_wait).
 *
 * Designed verdict (Open MPI 4.1.4 and MPICH 4.0.2):
 *   compute: no deadlock: rank 0's main thread computes and may still send
 *            tag 8 to rank 1 (and rank 1 could then send tag 7).
 *   join:    deadlock, cycle [0,1]: rank 0's only running work is thread A,
 *            waiting for rank 1, which waits for rank 0; the main thread is
 *            idle in pthread_join (a futex without time-out).
 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "mpiq_example.h"

#define COMPUTE_US 100000

static void *thread_a(void *arg)
{
    int value = -1;
    (void)arg;
    MPI_Recv(&value, 1, MPI_INT, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* never returns */
    return NULL;
}

int main(int argc, char **argv)
{
    int rank, size, provided, join;

    mpiq_arm_lifetime();
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided < MPI_THREAD_MULTIPLE) {
        fprintf(stderr, "threads: MPI_THREAD_MULTIPLE not provided (provided = %d)\n", provided);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (size != 2) {
        fprintf(stderr, "threads: needs exactly 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (argc < 2 || strcmp(argv[1], "compute") == 0) {
        join = 0;
    } else if (strcmp(argv[1], "join") == 0) {
        join = 1;
    } else {
        fprintf(stderr, "threads: the argument is \"compute\" or \"join\", not \"%s\"\n", argv[1]);
        MPI_Abort(MPI_COMM_WORLD, 2);
        return 2;
    }

    if (rank == 0) {
        pthread_t a;
        int err = pthread_create(&a, NULL, thread_a, NULL);
        if (err != 0) {
            fprintf(stderr, "threads: pthread_create: %s\n", strerror(err));
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        mpiq_ready(rank);
        if (join) {
            pthread_join(a, NULL); /* never returns */
        } else {
            for (;;)
                usleep(COMPUTE_US); /* "computing": no MPI call */
        }
    } else {
        int value = -1;
        mpiq_ready(rank);
        MPI_Recv(&value, 1, MPI_INT, 0, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* never returns */
    }

    MPI_Finalize();
    return 0;
}
