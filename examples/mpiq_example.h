/*
 * mpiq_example.h - the two things every mpiq example does the same way.
 *
 * mpiq_arm_lifetime(): a safety net against leaked jobs. If the test harness
 *   dies without killing its job (SIGKILL, a CI time-out), the ranks would
 *   otherwise sleep forever. This arms alarm(2) with MPIQ_EXAMPLE_LIFETIME
 *   seconds (default 900; 0 disables it); SIGALRM's default action ends the
 *   rank, and the starter then takes down the rest of the job. Call it before
 *   MPI_Init so that no MPI call is involved.
 *
 * mpiq_ready(rank): prints exactly one line "MPIQ-READY rank=<rank>
 *   pid=<getpid()>" to stdout and flushes it. The harness waits for one such
 *   line per rank.
 *
 * mpiq_wait_forever(): sleeps in pause() until the process is killed, making
 *   no MPI call (a debugger attaching interrupts pause(); the loop resumes it).
 *
 * mpiq_init_world(&argc, &argv, name, min, max, &rank, &size): arms the
 *   lifetime, MPI_Init, this rank and the size of MPI_COMM_WORLD; with fewer
 *   than min ranks, or more than max (0: no limit), says so on stderr and
 *   calls MPI_Abort (before any READY line).
 */
#ifndef MPIQ_EXAMPLE_H
#define MPIQ_EXAMPLE_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define MPIQ_DEFAULT_LIFETIME 900

static inline void mpiq_arm_lifetime(void)
{
    const char *s = getenv("MPIQ_EXAMPLE_LIFETIME");
    long secs = s && *s ? strtol(s, NULL, 10) : MPIQ_DEFAULT_LIFETIME;
    if (secs > 0)
        alarm((unsigned)secs);
}

static inline void mpiq_ready(int rank)
{
    printf("MPIQ-READY rank=%d pid=%d\n", rank, (int)getpid());
    fflush(stdout);
}

static inline void mpiq_wait_forever(void)
{
    for (;;)
        pause();
}

static inline void mpiq_init_world(int *argc, char ***argv, const char *name, int min, int max, int *rank,
                                   int *size)
{
    mpiq_arm_lifetime();
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    if (*size < min || (max > 0 && *size > max)) {
        if (min == max)
            fprintf(stderr, "%s: needs exactly %d ranks\n", name, min);
        else
            fprintf(stderr, "%s: needs at least %d ranks\n", name, min);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

#endif
