/*
 * calls.c - the recorder's MPI_X functions but MPI_Init and MPI_Finalize:
 * each records its call (recorder.c) and passes it on to PMPI_X.
 * Handles are words (internal.h's H); see recorder.c.
 */
#include "internal.h"

/* ---- point to point --------------------------------------------------- */

#define BLOCKING_SEND(NAME, ID)                                                              \
    EXPORT int MPI_##NAME(const void *buf, int count, H type, int dest, int tag, H comm)     \
    {                                                                                        \
        if (!ready())                                                                        \
            return NO_MPI;                                                                   \
        struct call c = begin(ID, comm, peer_of(dest), tag, count, type, P2P);              \
        int rc = P_##NAME(buf, count, type, dest, tag, comm);                                \
        end(c);                                                                              \
        return rc;                                                                           \
    }

BLOCKING_SEND(Send, MPIQ_CALL_SEND)
BLOCKING_SEND(Ssend, MPIQ_CALL_SSEND)
BLOCKING_SEND(Bsend, MPIQ_CALL_BSEND)
BLOCKING_SEND(Rsend, MPIQ_CALL_RSEND)

#define NONBLOCKING_SEND(NAME, ID)                                                                   \
    EXPORT int MPI_##NAME(const void *buf, int count, H type, int dest, int tag, H comm, void *req)  \
    {                                                                                                \
        if (!ready())                                                                                \
            return NO_MPI;                                                                           \
        struct call c = begin(ID, comm, peer_of(dest), tag, count, type, P2P);                      \
        int rc = P_##NAME(buf, count, type, dest, tag, comm, req);                                   \
        if (rc == 0)                                                                                 \
            pending_add(c, req);                                                                     \
        end(c);                                                                                      \
        return rc;                                                                                   \
    }

NONBLOCKING_SEND(Isend, MPIQ_CALL_ISEND)
NONBLOCKING_SEND(Issend, MPIQ_CALL_ISSEND)
NONBLOCKING_SEND(Ibsend, MPIQ_CALL_IBSEND)
NONBLOCKING_SEND(Irsend, MPIQ_CALL_IRSEND)

EXPORT int MPI_Recv(void *buf, int count, H type, int source, int tag, H comm, void *status)
{
    if (!ready())
        return NO_MPI;
    struct call c = begin(MPIQ_CALL_RECV, comm, peer_of(source), tag_of(tag), count, type, P2P);
    int rc = P_Recv(buf, count, type, source, tag, comm, status);
    end(c);
    return rc;
}

EXPORT int MPI_Irecv(void *buf, int count, H type, int source, int tag, H comm, void *req)
{
    if (!ready())
        return NO_MPI;
    struct call c = begin(MPIQ_CALL_IRECV, comm, peer_of(source), tag_of(tag), count, type, P2P);
    int rc = P_Irecv(buf, count, type, source, tag, comm, req);
    if (rc == 0)
        pending_add(c, req);
    end(c);
    return rc;
}

EXPORT int MPI_Sendrecv(const void *sendbuf, int sendcount, H sendtype, int dest, int sendtag, void *recvbuf,
                        int recvcount, H recvtype, int source, int recvtag, H comm, void *status)
{
    if (!ready())
        return NO_MPI;
    struct call c = begin(MPIQ_CALL_SENDRECV, comm, peer_of(dest), sendtag, sendcount, sendtype, P2P);
    if (c.r) {
        c.r->peer2 = peer_of(source);
        c.r->tag2 = tag_of(recvtag);
    }
    int rc = P_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source,
                        recvtag, comm, status);
    end(c);
    return rc;
}

EXPORT int MPI_Probe(int source, int tag, H comm, void *status)
{
    if (!ready())
        return NO_MPI;
    struct call c = begin(MPIQ_CALL_PROBE, comm, peer_of(source), tag_of(tag), 0, NO_TYPE, P2P);
    int rc = P_Probe(source, tag, comm, status);
    end(c);
    return rc;
}

EXPORT int MPI_Iprobe(int source, int tag, H comm, int *flag, void *status)
{
    if (!ready())
        return NO_MPI;
    struct call c = begin(MPIQ_CALL_IPROBE, comm, peer_of(source), tag_of(tag), 0, NO_TYPE, P2P);
    int rc = P_Iprobe(source, tag, comm, flag, status);
    end(c);
    return rc;
}

/* ---- completion ------------------------------------------------------- */

static struct call begin_wait(int what, int n, const void *reqs)
{
    struct call c = begin(what, NO_COMM, MPIQ_PEER_NONE, MPIQ_TAG_NONE, n, NO_TYPE, P2P);
    if (c.r && n > 0)
        __atomic_store_n(&c.r->request, load(reqs, 0), __ATOMIC_RELAXED);
    return c;
}

EXPORT int MPI_Wait(void *req, void *status)
{
    if (!ready())
        return NO_MPI;
    struct call c = begin_wait(MPIQ_CALL_WAIT, 1, req);
    int n = remember(1, req);
    int rc = P_Wait(req, status);
    completed(n, req);
    end(c);
    return rc;
}

EXPORT int MPI_Test(void *req, int *flag, void *status)
{
    if (!ready())
        return NO_MPI;
    struct call c = begin_wait(MPIQ_CALL_TEST, 1, req);
    int n = remember(1, req);
    int rc = P_Test(req, flag, status);
    completed(n, req);
    end(c);
    return rc;
}

#define ARRAY_COMPLETION(NAME, ID, PARAMS, ARGS)                \
    EXPORT int MPI_##NAME PARAMS                                \
    {                                                           \
        if (!ready())                                           \
            return NO_MPI;                                      \
        struct call c = begin_wait(ID, count, reqs);            \
        int n = remember(count, reqs);                          \
        int rc = P_##NAME ARGS;                                 \
        completed(n, reqs);                                     \
        end(c);                                                 \
        return rc;                                              \
    }

ARRAY_COMPLETION(Waitall, MPIQ_CALL_WAITALL, (int count, void *reqs, void *statuses), (count, reqs, statuses))
ARRAY_COMPLETION(Waitany, MPIQ_CALL_WAITANY, (int count, void *reqs, int *index, void *status),
                 (count, reqs, index, status))
ARRAY_COMPLETION(Waitsome, MPIQ_CALL_WAITSOME, (int count, void *reqs, int *outcount, int *indices, void *statuses),
                 (count, reqs, outcount, indices, statuses))
ARRAY_COMPLETION(Testall, MPIQ_CALL_TESTALL, (int count, void *reqs, int *flag, void *statuses),
                 (count, reqs, flag, statuses))
ARRAY_COMPLETION(Testany, MPIQ_CALL_TESTANY, (int count, void *reqs, int *index, int *flag, void *status),
                 (count, reqs, index, flag, status))
ARRAY_COMPLETION(Testsome, MPIQ_CALL_TESTSOME, (int count, void *reqs, int *outcount, int *indices, void *statuses),
                 (count, reqs, outcount, indices, statuses))

EXPORT int MPI_Request_free(void *req)
{
    if (!ready())
        return NO_MPI;
    uint64_t h = recording() ? load(req, 0) : 0;
    int rc = P_Request_free(req);
    if (rc == 0 && recording())
        pending_done(h);
    return rc;
}

/* ---- collectives ------------------------------------------------------ */

EXPORT int MPI_Barrier(H comm)
{
    if (!ready())
        return NO_MPI;
    struct call c = begin(MPIQ_CALL_BARRIER, comm, NONE, 0, NO_TYPE, COLLECTIVE);
    int rc = P_Barrier(comm);
    end(c);
    return rc;
}

EXPORT int MPI_Bcast(void *buf, int count, H type, int root, H comm)
{
    if (!ready())
        return NO_MPI;
    struct call c = begin(MPIQ_CALL_BCAST, comm, root, MPIQ_TAG_NONE, count, type, COLLECTIVE);
    int rc = P_Bcast(buf, count, type, root, comm);
    end(c);
    return rc;
}

EXPORT int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, H type, H op, int root, H comm)
{
    if (!ready())
        return NO_MPI;
    struct call c = begin(MPIQ_CALL_REDUCE, comm, root, MPIQ_TAG_NONE, count, type, COLLECTIVE);
    int rc = P_Reduce(sendbuf, recvbuf, count, type, op, root, comm);
    end(c);
    return rc;
}

EXPORT int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, H type, H op, H comm)
{
    if (!ready())
        return NO_MPI;
    struct call c = begin(MPIQ_CALL_ALLREDUCE, comm, NONE, count, type, COLLECTIVE);
    int rc = P_Allreduce(sendbuf, recvbuf, count, type, op, comm);
    end(c);
    return rc;
}

EXPORT int MPI_Gather(const void *sendbuf, int sendcount, H sendtype, void *recvbuf, int recvcount, H recvtype,
                      int root, H comm)
{
    if (!ready())
        return NO_MPI;
    struct call c = begin(MPIQ_CALL_GATHER, comm, root, MPIQ_TAG_NONE, sendcount, sendtype, COLLECTIVE);
    int rc = P_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
    end(c);
    return rc;
}

EXPORT int MPI_Allgather(const void *sendbuf, int sendcount, H sendtype, void *recvbuf, int recvcount,
                         H recvtype, H comm)
{
    if (!ready())
        return NO_MPI;
    struct call c = begin(MPIQ_CALL_ALLGATHER, comm, NONE, sendcount, sendtype, COLLECTIVE);
    int rc = P_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    end(c);
    return rc;
}

EXPORT int MPI_Scatter(const void *sendbuf, int sendcount, H sendtype, void *recvbuf, int recvcount, H recvtype,
                       int root, H comm)
{
    if (!ready())
        return NO_MPI;
    struct call c = begin(MPIQ_CALL_SCATTER, comm, root, MPIQ_TAG_NONE, recvcount, recvtype, COLLECTIVE);
    int rc = P_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
    end(c);
    return rc;
}

EXPORT int MPI_Alltoall(const void *sendbuf, int sendcount, H sendtype, void *recvbuf, int recvcount,
                        H recvtype, H comm)
{
    if (!ready())
        return NO_MPI;
    struct call c = begin(MPIQ_CALL_ALLTOALL, comm, NONE, sendcount, sendtype, COLLECTIVE);
    int rc = P_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    end(c);
    return rc;
}

EXPORT int MPI_Ibarrier(H comm, void *req)
{
    if (!ready())
        return NO_MPI;
    struct call c = begin(MPIQ_CALL_IBARRIER, comm, NONE, 0, NO_TYPE, COLLECTIVE);
    int rc = P_Ibarrier(comm, req);
    if (rc == 0)
        pending_add(c, req);
    end(c);
    return rc;
}

EXPORT int MPI_Ibcast(void *buf, int count, H type, int root, H comm, void *req)
{
    if (!ready())
        return NO_MPI;
    struct call c = begin(MPIQ_CALL_IBCAST, comm, root, MPIQ_TAG_NONE, count, type, COLLECTIVE);
    int rc = P_Ibcast(buf, count, type, root, comm, req);
    if (rc == 0)
        pending_add(c, req);
    end(c);
    return rc;
}

EXPORT int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, H type, H op, H comm, void *req)
{
    if (!ready())
        return NO_MPI;
    struct call c = begin(MPIQ_CALL_IALLREDUCE, comm, NONE, count, type, COLLECTIVE);
    int rc = P_Iallreduce(sendbuf, recvbuf, count, type, op, comm, req);
    if (rc == 0)
        pending_add(c, req);
    end(c);
    return rc;
}

/* ---- communicators ---------------------------------------------------- */

EXPORT int MPI_Comm_dup(H comm, void *newcomm)
{
    if (!ready())
        return NO_MPI;
    struct call c = begin(MPIQ_CALL_COMM_DUP, comm, NONE, 0, NO_TYPE, COLLECTIVE);
    int rc = P_Comm_dup(comm, newcomm);
    if (rc == 0 && recording())
        comm_entry((H)load(newcomm, 0));
    end(c);
    return rc;
}

EXPORT int MPI_Comm_split(H comm, int color, int key, void *newcomm)
{
    if (!ready())
        return NO_MPI;
    struct call c = begin(MPIQ_CALL_COMM_SPLIT, comm, NONE, 0, NO_TYPE, COLLECTIVE);
    int rc = P_Comm_split(comm, color, key, newcomm);
    if (rc == 0 && recording())
        comm_entry((H)load(newcomm, 0));
    end(c);
    return rc;
}

EXPORT int MPI_Comm_create(H comm, H group, void *newcomm)
{
    if (!ready())
        return NO_MPI;
    struct call c = begin(MPIQ_CALL_COMM_CREATE, comm, NONE, 0, NO_TYPE, COLLECTIVE);
    int rc = P_Comm_create(comm, group, newcomm);
    if (rc == 0 && recording())
        comm_entry((H)load(newcomm, 0));
    end(c);
    return rc;
}

EXPORT int MPI_Comm_free(void *comm)
{
    if (!ready())
        return NO_MPI;
    uint64_t h = recording() ? load(comm, 0) : 0;
    struct call c = begin(MPIQ_CALL_COMM_FREE, recording() ? (H)h : NO_COMM, NONE, 0, NO_TYPE, P2P);
    int rc = P_Comm_free(comm);
    if (rc == 0 && recording())
        comm_forget(h);
    end(c);
    return rc;
}
