/*
 * sessions.c - a communicator made through MPI-4 Sessions, with a pending
 * receive on it.
 *
 * Needs MPI-4 Sessions: builds with MPICH 4.0.2, NOT with Open MPI 4.1
 * (which has no MPI_Session_init; Sessions arrive in Open MPI 5.0).
 * Run with n >= 2 ranks (default in the harness: 4). Does not call MPI_Init.
 *
 *   MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &session)
 *   MPI_Group_from_session_pset(session, "mpi://WORLD", &group)
 *   MPI_Comm_create_from_group(group, "org.mpiq.sessions", MPI_INFO_NULL,
 *                              MPI_ERRORS_RETURN, &comm)
 *   MPI_Comm_set_name(comm, "sessions-world")
 * Local rank r on "sessions-world" equals the world rank (the pset is all
 * processes, in order). Each rank r then posts, on "sessions-world":
 *   MPI_Irecv(16 x MPI_INT, source = (r + 1) % n, tag = 900)
 * Nobody sends. Then prints "MPIQ-READY rank=<r> pid=<pid>" (r is the rank
 * in "sessions-world") and sleeps in pause() forever without calling MPI.
 *
 * Queues of rank r on "sessions-world" (MPICH):
 *   posted receives: exactly 1: desired local rank (r + 1) % n, tag 900,
 *                    16 MPI_INT (MPICH length 16).
 *   sends:           empty.
 *   unexpected:      empty.
 * MPICH also lists its internal communicators; there is no MPI_COMM_WORLD
 * user traffic.
 */
#include <mpi.h>
#include <stdio.h>

#include "mpiq_example.h"

static void check(int rc, const char *what)
{
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        fprintf(stderr, "sessions: %s failed: %s\n", what, msg);
        _exit(2);
    }
}

int main(void)
{
    MPI_Session session;
    MPI_Group group;
    MPI_Comm comm;
    MPI_Request req;
    int rank, size;
    static int rbuf[16];

    mpiq_arm_lifetime();
    check(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &session), "MPI_Session_init");
    check(MPI_Group_from_session_pset(session, "mpi://WORLD", &group),
          "MPI_Group_from_session_pset");
    check(MPI_Comm_create_from_group(group, "org.mpiq.sessions", MPI_INFO_NULL,
                                     MPI_ERRORS_RETURN, &comm),
          "MPI_Comm_create_from_group");
    check(MPI_Comm_set_name(comm, "sessions-world"), "MPI_Comm_set_name");
    check(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
    check(MPI_Comm_size(comm, &size), "MPI_Comm_size");
    if (size < 2) {
        fprintf(stderr, "sessions: needs at least 2 ranks\n");
        _exit(2);
    }

    check(MPI_Irecv(rbuf, 16, MPI_INT, (rank + 1) % size, 900, comm, &req), "MPI_Irecv");
    mpiq_ready(rank);
    mpiq_wait_forever();
}
