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
        if (!READY(NAME))                                                                    \
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
        if (!READY(NAME))                                                                            \
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
    if (!READY(Recv))
        return NO_MPI;
    struct call c = begin(MPIQ_CALL_RECV, comm, peer_of(source), tag_of(tag), count, type, P2P);
    int rc = P_Recv(buf, count, type, source, tag, comm, status);
    end(c);
    return rc;
}

EXPORT int MPI_Irecv(void *buf, int count, H type, int source, int tag, H comm, void *req)
{
    if (!READY(Irecv))
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
    if (!READY(Sendrecv))
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
    if (!READY(Probe))
        return NO_MPI;
    struct call c = begin(MPIQ_CALL_PROBE, comm, peer_of(source), tag_of(tag), 0, NO_TYPE, P2P);
    int rc = P_Probe(source, tag, comm, status);
    end(c);
    return rc;
}

EXPORT int MPI_Iprobe(int source, int tag, H comm, int *flag, void *status)
{
    if (!READY(Iprobe))
        return NO_MPI;
    struct call c = begin(MPIQ_CALL_IPROBE, comm, peer_of(source), tag_of(tag), 0, NO_TYPE, P2P);
    int rc = P_Iprobe(source, tag, comm, flag, status);
    end(c);
    return rc;
}

EXPORT int MPI_Sendrecv_replace(void *buf, int count, H type, int dest, int sendtag, int source, int recvtag, H comm,
                                void *status)
{
    if (!READY(Sendrecv_replace))
        return NO_MPI;
    struct call c = begin(MPIQ_CALL_SENDRECV_REPLACE, comm, peer_of(dest), sendtag, count, type, P2P);
    if (c.r) {
        c.r->peer2 = peer_of(source);
        c.r->tag2 = tag_of(recvtag);
    }
    int rc = P_Sendrecv_replace(buf, count, type, dest, sendtag, source, recvtag, comm, status);
    end(c);
    return rc;
}

/* ---- matched probes --------------------------------------------------- */

/* What an MPI_Mprobe or MPI_Improbe matched, for the MPI_Mrecv or
 * MPI_Imrecv given its message: those name no peer, tag or communicator,
 * and the message handle is MPI_MESSAGE_NULL once received (and may be
 * reused). Per thread, a few: a message is received, in practice, by the
 * thread that probed it, soon after (mpi4py's comm.recv: Mprobe, then
 * Mrecv). */
#define MATCHED 8
static __thread struct matched {
    uint64_t message; /* 0: none */
    H comm;
    int32_t peer, tag;
} matched[MATCHED];
static __thread unsigned matched_next;

/* Probe call `c` on `comm` (`source`, `tag`) matched the message at
 * `message`: the status says which peer and tag; without one, the probe's
 * own (a wildcard stays one). */
static void probed(struct call c, H comm, int source, int tag, const void *message, const void *status)
{
    if (!c.r)
        return;
    int s = source, t = tag;
    status_source_tag(status, &s, &t);
    /* In place of an earlier match of the same handle, which another thread
     * received: the MPI gives the handle out again. */
    uint64_t h = load(message, 0);
    struct matched *m = NULL;
    for (unsigned i = 0; i < MATCHED && !m; i++)
        if (matched[i].message == h)
            m = &matched[i];
    if (!m)
        m = &matched[matched_next++ % MATCHED];
    m->message = h;
    m->comm = comm;
    m->peer = peer_of(s);
    m->tag = tag_of(t);
}

/* The match of the message at `message`, forgotten; NULL if not seen. */
static struct matched *match_of(const void *message)
{
    if (!recording())
        return NULL;
    uint64_t h = load(message, 0);
    for (unsigned i = 0; i < MATCHED; i++)
        if (matched[i].message == h && h != 0) {
            matched[i].message = 0;
            return &matched[i];
        }
    return NULL;
}

EXPORT int MPI_Mprobe(int source, int tag, H comm, void *message, void *status)
{
    if (!READY(Mprobe))
        return NO_MPI;
    struct call c = begin(MPIQ_CALL_MPROBE, comm, peer_of(source), tag_of(tag), 0, NO_TYPE, P2P);
    int rc = P_Mprobe(source, tag, comm, message, status);
    if (rc == 0)
        probed(c, comm, source, tag, message, status);
    end(c);
    return rc;
}

EXPORT int MPI_Improbe(int source, int tag, H comm, int *flag, void *message, void *status)
{
    if (!READY(Improbe))
        return NO_MPI;
    struct call c = begin(MPIQ_CALL_IMPROBE, comm, peer_of(source), tag_of(tag), 0, NO_TYPE, P2P);
    int rc = P_Improbe(source, tag, comm, flag, message, status);
    if (rc == 0 && *flag)
        probed(c, comm, source, tag, message, status);
    end(c);
    return rc;
}

EXPORT int MPI_Mrecv(void *buf, int count, H type, void *message, void *status)
{
    if (!READY(Mrecv))
        return NO_MPI;
    struct matched *m = match_of(message);
    struct call c = m ? begin(MPIQ_CALL_MRECV, m->comm, m->peer, m->tag, count, type, P2P)
                      : begin(MPIQ_CALL_MRECV, NO_COMM, NONE, count, type, P2P);
    int rc = P_Mrecv(buf, count, type, message, status);
    end(c);
    return rc;
}

EXPORT int MPI_Imrecv(void *buf, int count, H type, void *message, void *req)
{
    if (!READY(Imrecv))
        return NO_MPI;
    struct matched *m = match_of(message);
    struct call c = m ? begin(MPIQ_CALL_IMRECV, m->comm, m->peer, m->tag, count, type, P2P)
                      : begin(MPIQ_CALL_IMRECV, NO_COMM, NONE, count, type, P2P);
    int rc = P_Imrecv(buf, count, type, message, req);
    if (rc == 0)
        pending_add(c, req);
    end(c);
    return rc;
}

/* ---- persistent requests ---------------------------------------------- */

#define SEND_INIT(NAME, ID)                                                                          \
    EXPORT int MPI_##NAME(const void *buf, int count, H type, int dest, int tag, H comm, void *req)  \
    {                                                                                                \
        if (!READY(NAME))                                                                            \
            return NO_MPI;                                                                           \
        struct call c = begin(ID, comm, peer_of(dest), tag, count, type, P2P);                      \
        int rc = P_##NAME(buf, count, type, dest, tag, comm, req);                                   \
        if (rc == 0)                                                                                 \
            persistent_add(c, req);                                                                  \
        end(c);                                                                                      \
        return rc;                                                                                   \
    }

SEND_INIT(Send_init, MPIQ_CALL_SEND_INIT)
SEND_INIT(Ssend_init, MPIQ_CALL_SSEND_INIT)
SEND_INIT(Bsend_init, MPIQ_CALL_BSEND_INIT)
SEND_INIT(Rsend_init, MPIQ_CALL_RSEND_INIT)

EXPORT int MPI_Recv_init(void *buf, int count, H type, int source, int tag, H comm, void *req)
{
    if (!READY(Recv_init))
        return NO_MPI;
    struct call c = begin(MPIQ_CALL_RECV_INIT, comm, peer_of(source), tag_of(tag), count, type, P2P);
    int rc = P_Recv_init(buf, count, type, source, tag, comm, req);
    if (rc == 0)
        persistent_add(c, req);
    end(c);
    return rc;
}

EXPORT int MPI_Start(void *req)
{
    if (!READY(Start))
        return NO_MPI;
    struct call c = begin_start(MPIQ_CALL_START, 1, req);
    int rc = P_Start(req);
    if (rc == 0)
        activate(c, 1, req);
    end(c);
    return rc;
}

EXPORT int MPI_Startall(int count, void *reqs)
{
    if (!READY(Startall))
        return NO_MPI;
    struct call c = begin_start(MPIQ_CALL_STARTALL, count, reqs);
    int rc = P_Startall(count, reqs);
    if (rc == 0)
        activate(c, count, reqs);
    end(c);
    return rc;
}

/* ---- completion ------------------------------------------------------- */

/* Each tells completed() which requests it completed from its outputs,
 * read only when it succeeded: a flag, an index or a list of them is not
 * set otherwise. */

EXPORT int MPI_Wait(void *req, void *status)
{
    if (!READY(Wait))
        return NO_MPI;
    int n;
    struct call c = begin_wait(MPIQ_CALL_WAIT, 1, req, &n);
    int rc = P_Wait(req, status);
    completed(n, req, rc == 0 ? ALL_DONE : 0, NULL);
    end(c);
    return rc;
}

EXPORT int MPI_Test(void *req, int *flag, void *status)
{
    if (!READY(Test))
        return NO_MPI;
    int n;
    struct call c = begin_wait(MPIQ_CALL_TEST, 1, req, &n);
    int rc = P_Test(req, flag, status);
    completed(n, req, rc == 0 && *flag ? ALL_DONE : 0, NULL);
    end(c);
    return rc;
}

#define ARRAY_COMPLETION(NAME, ID, PARAMS, ARGS, DONE, WHICH)   \
    EXPORT int MPI_##NAME PARAMS                                \
    {                                                           \
        if (!READY(NAME))                                       \
            return NO_MPI;                                      \
        int n;                                                  \
        struct call c = begin_wait(ID, count, reqs, &n);        \
        int rc = P_##NAME ARGS;                                 \
        completed(n, reqs, rc == 0 ? (DONE) : 0, WHICH);        \
        end(c);                                                 \
        return rc;                                              \
    }

ARRAY_COMPLETION(Waitall, MPIQ_CALL_WAITALL, (int count, void *reqs, void *statuses), (count, reqs, statuses),
                 ALL_DONE, NULL)
ARRAY_COMPLETION(Waitany, MPIQ_CALL_WAITANY, (int count, void *reqs, int *index, void *status),
                 (count, reqs, index, status), 1, index)
ARRAY_COMPLETION(Waitsome, MPIQ_CALL_WAITSOME, (int count, void *reqs, int *outcount, int *indices, void *statuses),
                 (count, reqs, outcount, indices, statuses), *outcount, indices)
ARRAY_COMPLETION(Testall, MPIQ_CALL_TESTALL, (int count, void *reqs, int *flag, void *statuses),
                 (count, reqs, flag, statuses), *flag ? ALL_DONE : 0, NULL)
ARRAY_COMPLETION(Testany, MPIQ_CALL_TESTANY, (int count, void *reqs, int *index, int *flag, void *status),
                 (count, reqs, index, flag, status), *flag ? 1 : 0, index)
ARRAY_COMPLETION(Testsome, MPIQ_CALL_TESTSOME, (int count, void *reqs, int *outcount, int *indices, void *statuses),
                 (count, reqs, outcount, indices, statuses), *outcount, indices)

EXPORT int MPI_Request_free(void *req)
{
    if (!READY(Request_free))
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
    if (!READY(Barrier))
        return NO_MPI;
    struct call c = begin(MPIQ_CALL_BARRIER, comm, NONE, 0, NO_TYPE, COLLECTIVE);
    int rc = P_Barrier(comm);
    end(c);
    return rc;
}

EXPORT int MPI_Bcast(void *buf, int count, H type, int root, H comm)
{
    if (!READY(Bcast))
        return NO_MPI;
    struct call c = begin(MPIQ_CALL_BCAST, comm, root, MPIQ_TAG_NONE, count, type, COLLECTIVE);
    int rc = P_Bcast(buf, count, type, root, comm);
    end(c);
    return rc;
}

EXPORT int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, H type, H op, int root, H comm)
{
    if (!READY(Reduce))
        return NO_MPI;
    struct call c = begin(MPIQ_CALL_REDUCE, comm, root, MPIQ_TAG_NONE, count, type, COLLECTIVE);
    int rc = P_Reduce(sendbuf, recvbuf, count, type, op, root, comm);
    end(c);
    return rc;
}

EXPORT int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, H type, H op, H comm)
{
    if (!READY(Allreduce))
        return NO_MPI;
    struct call c = begin(MPIQ_CALL_ALLREDUCE, comm, NONE, count, type, COLLECTIVE);
    int rc = P_Allreduce(sendbuf, recvbuf, count, type, op, comm);
    end(c);
    return rc;
}

EXPORT int MPI_Gather(const void *sendbuf, int sendcount, H sendtype, void *recvbuf, int recvcount, H recvtype,
                      int root, H comm)
{
    if (!READY(Gather))
        return NO_MPI;
    struct call c = begin(MPIQ_CALL_GATHER, comm, root, MPIQ_TAG_NONE, sendcount, sendtype, COLLECTIVE);
    int rc = P_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
    end(c);
    return rc;
}

EXPORT int MPI_Allgather(const void *sendbuf, int sendcount, H sendtype, void *recvbuf, int recvcount,
                         H recvtype, H comm)
{
    if (!READY(Allgather))
        return NO_MPI;
    struct call c = begin(MPIQ_CALL_ALLGATHER, comm, NONE, sendcount, sendtype, COLLECTIVE);
    int rc = P_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    end(c);
    return rc;
}

EXPORT int MPI_Scatter(const void *sendbuf, int sendcount, H sendtype, void *recvbuf, int recvcount, H recvtype,
                       int root, H comm)
{
    if (!READY(Scatter))
        return NO_MPI;
    struct call c = begin(MPIQ_CALL_SCATTER, comm, root, MPIQ_TAG_NONE, recvcount, recvtype, COLLECTIVE);
    int rc = P_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
    end(c);
    return rc;
}

EXPORT int MPI_Alltoall(const void *sendbuf, int sendcount, H sendtype, void *recvbuf, int recvcount,
                        H recvtype, H comm)
{
    if (!READY(Alltoall))
        return NO_MPI;
    struct call c = begin(MPIQ_CALL_ALLTOALL, comm, NONE, sendcount, sendtype, COLLECTIVE);
    int rc = P_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    end(c);
    return rc;
}

EXPORT int MPI_Ibarrier(H comm, void *req)
{
    if (!READY(Ibarrier))
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
    if (!READY(Ibcast))
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
    if (!READY(Iallreduce))
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
    if (!READY(Comm_dup))
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
    if (!READY(Comm_split))
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
    if (!READY(Comm_create))
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
    if (!READY(Comm_free))
        return NO_MPI;
    uint64_t h = recording() ? load(comm, 0) : 0;
    struct call c = begin(MPIQ_CALL_COMM_FREE, recording() ? (H)h : NO_COMM, NONE, 0, NO_TYPE, P2P);
    int rc = P_Comm_free(comm);
    if (rc == 0 && recording())
        comm_forget(h);
    end(c);
    return rc;
}
