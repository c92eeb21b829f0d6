/*
 * calls.c - the recorder's MPI_X functions but MPI_Init and MPI_Finalize:
 * each records its call (recorder.c) and passes it on to PMPI_X.
 * Handles are words (internal.h's H); see recorder.c.
 */
#include "internal.h"

/* Each function with counts comes twice: MPI_X, and MPI-4's MPI_X_c, its
 * counts MPI_Count (INT names MPI_X in both). An MPI without PMPI_X_c
 * still has MPI_X_c here, and a program that looks for it (mpi4py, which
 * falls back to MPI_X when it is not found) finds it: it is passed on to
 * PMPI_X as mpi4py would, with the count as an int, or fails with
 * MPI_ERR_COUNT (2 in both ABIs) when the count does not fit. */
#define MPI_ERR_COUNT 2
#define PASS_ON(NAME, INT, ...) (P_##NAME ? P_##NAME(__VA_ARGS__) : P_##INT(__VA_ARGS__))

static int fits(int64_t n)
{
    return n >= INT32_MIN && n <= INT32_MAX;
}

/* ---- point to point --------------------------------------------------- */

#define BLOCKING_SEND(NAME, ID, COUNT, INT)                                                \
    EXPORT int MPI_##NAME(const void *buf, COUNT count, H type, int dest, int tag, H comm) \
    {                                                                                      \
        if (!on() || (!P_##NAME && !P_##INT))                                              \
            return NO_MPI;                                                                 \
        if (!P_##NAME && !fits(count))                                                     \
            return MPI_ERR_COUNT;                                                          \
        struct call c = begin(ID, comm, peer_of(dest), tag, count, type, P2P);             \
        int rc = PASS_ON(NAME, INT, buf, count, type, dest, tag, comm);                    \
        end(c);                                                                            \
        return rc;                                                                         \
    }

BLOCKING_SEND(Send, MPIQ_CALL_SEND, int, Send)
BLOCKING_SEND(Send_c, MPIQ_CALL_SEND, Count, Send)
BLOCKING_SEND(Ssend, MPIQ_CALL_SSEND, int, Ssend)
BLOCKING_SEND(Ssend_c, MPIQ_CALL_SSEND, Count, Ssend)
BLOCKING_SEND(Bsend, MPIQ_CALL_BSEND, int, Bsend)
BLOCKING_SEND(Bsend_c, MPIQ_CALL_BSEND, Count, Bsend)
BLOCKING_SEND(Rsend, MPIQ_CALL_RSEND, int, Rsend)
BLOCKING_SEND(Rsend_c, MPIQ_CALL_RSEND, Count, Rsend)

#define NONBLOCKING_SEND(NAME, ID, COUNT, INT)                                                        \
    EXPORT int MPI_##NAME(const void *buf, COUNT count, H type, int dest, int tag, H comm, void *req) \
    {                                                                                                 \
        if (!on() || (!P_##NAME && !P_##INT))                                                         \
            return NO_MPI;                                                                            \
        if (!P_##NAME && !fits(count))                                                                \
            return MPI_ERR_COUNT;                                                                     \
        struct call c = begin(ID, comm, peer_of(dest), tag, count, type, P2P);                        \
        int rc = PASS_ON(NAME, INT, buf, count, type, dest, tag, comm, req);                          \
        if (rc == 0)                                                                                  \
            pending_add(c, req);                                                                      \
        end(c);                                                                                       \
        return rc;                                                                                    \
    }

NONBLOCKING_SEND(Isend, MPIQ_CALL_ISEND, int, Isend)
NONBLOCKING_SEND(Isend_c, MPIQ_CALL_ISEND, Count, Isend)
NONBLOCKING_SEND(Issend, MPIQ_CALL_ISSEND, int, Issend)
NONBLOCKING_SEND(Issend_c, MPIQ_CALL_ISSEND, Count, Issend)
NONBLOCKING_SEND(Ibsend, MPIQ_CALL_IBSEND, int, Ibsend)
NONBLOCKING_SEND(Ibsend_c, MPIQ_CALL_IBSEND, Count, Ibsend)
NONBLOCKING_SEND(Irsend, MPIQ_CALL_IRSEND, int, Irsend)
NONBLOCKING_SEND(Irsend_c, MPIQ_CALL_IRSEND, Count, Irsend)

#define RECV(NAME, COUNT, INT)                                                                       \
    EXPORT int MPI_##NAME(void *buf, COUNT count, H type, int source, int tag, H comm, void *status) \
    {                                                                                                \
        if (!on() || (!P_##NAME && !P_##INT))                                                        \
            return NO_MPI;                                                                           \
        if (!P_##NAME && !fits(count))                                                               \
            return MPI_ERR_COUNT;                                                                    \
        struct call c = begin(MPIQ_CALL_RECV, comm, peer_of(source), tag_of(tag), count, type, P2P); \
        int rc = PASS_ON(NAME, INT, buf, count, type, source, tag, comm, status);                    \
        end(c);                                                                                      \
        return rc;                                                                                   \
    }

RECV(Recv, int, Recv)
RECV(Recv_c, Count, Recv)

#define IRECV(NAME, COUNT, INT)                                                                       \
    EXPORT int MPI_##NAME(void *buf, COUNT count, H type, int source, int tag, H comm, void *req)     \
    {                                                                                                 \
        if (!on() || (!P_##NAME && !P_##INT))                                                         \
            return NO_MPI;                                                                            \
        if (!P_##NAME && !fits(count))                                                                \
            return MPI_ERR_COUNT;                                                                     \
        struct call c = begin(MPIQ_CALL_IRECV, comm, peer_of(source), tag_of(tag), count, type, P2P); \
        int rc = PASS_ON(NAME, INT, buf, count, type, source, tag, comm, req);                        \
        if (rc == 0)                                                                                  \
            pending_add(c, req);                                                                      \
        end(c);                                                                                       \
        return rc;                                                                                    \
    }

IRECV(Irecv, int, Irecv)
IRECV(Irecv_c, Count, Irecv)

#define SENDRECV(NAME, COUNT, INT)                                                                             \
    EXPORT int MPI_##NAME(const void *sendbuf, COUNT sendcount, H sendtype, int dest, int sendtag,             \
                          void *recvbuf, COUNT recvcount, H recvtype, int source, int recvtag, H comm,         \
                          void *status)                                                                        \
    {                                                                                                          \
        if (!on() || (!P_##NAME && !P_##INT))                                                                  \
            return NO_MPI;                                                                                     \
        if (!P_##NAME && (!fits(sendcount) || !fits(recvcount)))                                               \
            return MPI_ERR_COUNT;                                                                              \
        struct call c = begin(MPIQ_CALL_SENDRECV, comm, peer_of(dest), sendtag, sendcount, sendtype, P2P);     \
        if (c.r) {                                                                                             \
            c.r->peer2 = peer_of(source);                                                                      \
            c.r->tag2 = tag_of(recvtag);                                                                       \
        }                                                                                                      \
        int rc = PASS_ON(NAME, INT, sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, \
                          source, recvtag, comm, status);                                                      \
        end(c);                                                                                                \
        return rc;                                                                                             \
    }

SENDRECV(Sendrecv, int, Sendrecv)
SENDRECV(Sendrecv_c, Count, Sendrecv)

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

#define SENDRECV_REPLACE(NAME, COUNT, INT)                                                                 \
    EXPORT int MPI_##NAME(void *buf, COUNT count, H type, int dest, int sendtag, int source, int recvtag,  \
                          H comm, void *status)                                                            \
    {                                                                                                      \
        if (!on() || (!P_##NAME && !P_##INT))                                                              \
            return NO_MPI;                                                                                 \
        if (!P_##NAME && !fits(count))                                                                     \
            return MPI_ERR_COUNT;                                                                          \
        struct call c = begin(MPIQ_CALL_SENDRECV_REPLACE, comm, peer_of(dest), sendtag, count, type, P2P); \
        if (c.r) {                                                                                         \
            c.r->peer2 = peer_of(source);                                                                  \
            c.r->tag2 = tag_of(recvtag);                                                                   \
        }                                                                                                  \
        int rc = PASS_ON(NAME, INT, buf, count, type, dest, sendtag, source, recvtag, comm, status);       \
        end(c);                                                                                            \
        return rc;                                                                                         \
    }

SENDRECV_REPLACE(Sendrecv_replace, int, Sendrecv_replace)
SENDRECV_REPLACE(Sendrecv_replace_c, Count, Sendrecv_replace)

/* ---- matched probes --------------------------------------------------- */

/* What an MPI_Mprobe or MPI_Improbe matched, for the MPI_Mrecv or
 * MPI_Imrecv given its message: those name no peer, tag or communicator,
 * and the message handle is MPI_MESSAGE_NULL once received (and may be
 * reused). Per thread, a few: a message is received, in practice, by the
 * thread that probed it, soon after (mpi4py's comm.recv: Mprobe, then
 * Mrecv). */
#define MATCHED 8
static TLS struct matched {
    uint64_t message; /* 0: none */
    H comm;
    int32_t peer, tag;
} matched[MATCHED];
static TLS unsigned matched_next;

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

#define MRECV(NAME, COUNT, INT)                                                                \
    EXPORT int MPI_##NAME(void *buf, COUNT count, H type, void *message, void *status)         \
    {                                                                                          \
        if (!on() || (!P_##NAME && !P_##INT))                                                  \
            return NO_MPI;                                                                     \
        if (!P_##NAME && !fits(count))                                                         \
            return MPI_ERR_COUNT;                                                              \
        struct matched *m = match_of(message);                                                 \
        struct call c = m ? begin(MPIQ_CALL_MRECV, m->comm, m->peer, m->tag, count, type, P2P) \
                          : begin(MPIQ_CALL_MRECV, NO_COMM, NONE, count, type, P2P);           \
        int rc = PASS_ON(NAME, INT, buf, count, type, message, status);                        \
        end(c);                                                                                \
        return rc;                                                                             \
    }

MRECV(Mrecv, int, Mrecv)
MRECV(Mrecv_c, Count, Mrecv)

#define IMRECV(NAME, COUNT, INT)                                                                \
    EXPORT int MPI_##NAME(void *buf, COUNT count, H type, void *message, void *req)             \
    {                                                                                           \
        if (!on() || (!P_##NAME && !P_##INT))                                                   \
            return NO_MPI;                                                                      \
        if (!P_##NAME && !fits(count))                                                          \
            return MPI_ERR_COUNT;                                                               \
        struct matched *m = match_of(message);                                                  \
        struct call c = m ? begin(MPIQ_CALL_IMRECV, m->comm, m->peer, m->tag, count, type, P2P) \
                          : begin(MPIQ_CALL_IMRECV, NO_COMM, NONE, count, type, P2P);           \
        int rc = PASS_ON(NAME, INT, buf, count, type, message, req);                            \
        if (rc == 0)                                                                            \
            pending_add(c, req);                                                                \
        end(c);                                                                                 \
        return rc;                                                                              \
    }

IMRECV(Imrecv, int, Imrecv)
IMRECV(Imrecv_c, Count, Imrecv)

/* ---- persistent requests ---------------------------------------------- */

#define SEND_INIT(NAME, ID, COUNT, INT)                                                               \
    EXPORT int MPI_##NAME(const void *buf, COUNT count, H type, int dest, int tag, H comm, void *req) \
    {                                                                                                 \
        if (!on() || (!P_##NAME && !P_##INT))                                                         \
            return NO_MPI;                                                                            \
        if (!P_##NAME && !fits(count))                                                                \
            return MPI_ERR_COUNT;                                                                     \
        struct call c = begin(ID, comm, peer_of(dest), tag, count, type, P2P);                        \
        int rc = PASS_ON(NAME, INT, buf, count, type, dest, tag, comm, req);                          \
        if (rc == 0)                                                                                  \
            persistent_add(c, req);                                                                   \
        end(c);                                                                                       \
        return rc;                                                                                    \
    }

SEND_INIT(Send_init, MPIQ_CALL_SEND_INIT, int, Send_init)
SEND_INIT(Send_init_c, MPIQ_CALL_SEND_INIT, Count, Send_init)
SEND_INIT(Ssend_init, MPIQ_CALL_SSEND_INIT, int, Ssend_init)
SEND_INIT(Ssend_init_c, MPIQ_CALL_SSEND_INIT, Count, Ssend_init)
SEND_INIT(Bsend_init, MPIQ_CALL_BSEND_INIT, int, Bsend_init)
SEND_INIT(Bsend_init_c, MPIQ_CALL_BSEND_INIT, Count, Bsend_init)
SEND_INIT(Rsend_init, MPIQ_CALL_RSEND_INIT, int, Rsend_init)
SEND_INIT(Rsend_init_c, MPIQ_CALL_RSEND_INIT, Count, Rsend_init)

#define RECV_INIT(NAME, COUNT, INT)                                                                       \
    EXPORT int MPI_##NAME(void *buf, COUNT count, H type, int source, int tag, H comm, void *req)         \
    {                                                                                                     \
        if (!on() || (!P_##NAME && !P_##INT))                                                             \
            return NO_MPI;                                                                                \
        if (!P_##NAME && !fits(count))                                                                    \
            return MPI_ERR_COUNT;                                                                         \
        struct call c = begin(MPIQ_CALL_RECV_INIT, comm, peer_of(source), tag_of(tag), count, type, P2P); \
        int rc = PASS_ON(NAME, INT, buf, count, type, source, tag, comm, req);                            \
        if (rc == 0)                                                                                      \
            persistent_add(c, req);                                                                       \
        end(c);                                                                                           \
        return rc;                                                                                        \
    }

RECV_INIT(Recv_init, int, Recv_init)
RECV_INIT(Recv_init_c, Count, Recv_init)

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

#define ARRAY_COMPLETION(NAME, ID, PARAMS, ARGS, DONE, WHICH) \
    EXPORT int MPI_##NAME PARAMS                              \
    {                                                         \
        if (!READY(NAME))                                     \
            return NO_MPI;                                    \
        int n;                                                \
        struct call c = begin_wait(ID, count, reqs, &n);      \
        int rc = P_##NAME ARGS;                               \
        completed(n, reqs, rc == 0 ? (DONE) : 0, WHICH);      \
        end(c);                                               \
        return rc;                                            \
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

#define BCAST(NAME, COUNT, INT)                                                                     \
    EXPORT int MPI_##NAME(void *buf, COUNT count, H type, int root, H comm)                         \
    {                                                                                               \
        if (!on() || (!P_##NAME && !P_##INT))                                                       \
            return NO_MPI;                                                                          \
        if (!P_##NAME && !fits(count))                                                              \
            return MPI_ERR_COUNT;                                                                   \
        struct call c = begin(MPIQ_CALL_BCAST, comm, root, MPIQ_TAG_NONE, count, type, COLLECTIVE); \
        int rc = PASS_ON(NAME, INT, buf, count, type, root, comm);                                  \
        end(c);                                                                                     \
        return rc;                                                                                  \
    }

BCAST(Bcast, int, Bcast)
BCAST(Bcast_c, Count, Bcast)

#define REDUCE(NAME, COUNT, INT)                                                                           \
    EXPORT int MPI_##NAME(const void *sendbuf, void *recvbuf, COUNT count, H type, H op, int root, H comm) \
    {                                                                                                      \
        if (!on() || (!P_##NAME && !P_##INT))                                                              \
            return NO_MPI;                                                                                 \
        if (!P_##NAME && !fits(count))                                                                     \
            return MPI_ERR_COUNT;                                                                          \
        struct call c = begin(MPIQ_CALL_REDUCE, comm, root, MPIQ_TAG_NONE, count, type, COLLECTIVE);       \
        int rc = PASS_ON(NAME, INT, sendbuf, recvbuf, count, type, op, root, comm);                        \
        end(c);                                                                                            \
        return rc;                                                                                         \
    }

REDUCE(Reduce, int, Reduce)
REDUCE(Reduce_c, Count, Reduce)

#define ALLREDUCE(NAME, COUNT, INT)                                                              \
    EXPORT int MPI_##NAME(const void *sendbuf, void *recvbuf, COUNT count, H type, H op, H comm) \
    {                                                                                            \
        if (!on() || (!P_##NAME && !P_##INT))                                                    \
            return NO_MPI;                                                                       \
        if (!P_##NAME && !fits(count))                                                           \
            return MPI_ERR_COUNT;                                                                \
        struct call c = begin(MPIQ_CALL_ALLREDUCE, comm, NONE, count, type, COLLECTIVE);         \
        int rc = PASS_ON(NAME, INT, sendbuf, recvbuf, count, type, op, comm);                    \
        end(c);                                                                                  \
        return rc;                                                                               \
    }

ALLREDUCE(Allreduce, int, Allreduce)
ALLREDUCE(Allreduce_c, Count, Allreduce)

#define GATHER(NAME, COUNT, INT)                                                                             \
    EXPORT int MPI_##NAME(const void *sendbuf, COUNT sendcount, H sendtype, void *recvbuf, COUNT recvcount,  \
                          H recvtype, int root, H comm)                                                      \
    {                                                                                                        \
        if (!on() || (!P_##NAME && !P_##INT))                                                                \
            return NO_MPI;                                                                                   \
        if (!P_##NAME && (!fits(sendcount) || !fits(recvcount)))                                             \
            return MPI_ERR_COUNT;                                                                            \
        struct call c = begin(MPIQ_CALL_GATHER, comm, root, MPIQ_TAG_NONE, sendcount, sendtype, COLLECTIVE); \
        int rc = PASS_ON(NAME, INT, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm); \
        end(c);                                                                                              \
        return rc;                                                                                           \
    }

GATHER(Gather, int, Gather)
GATHER(Gather_c, Count, Gather)

#define ALLGATHER(NAME, COUNT, INT)                                                                         \
    EXPORT int MPI_##NAME(const void *sendbuf, COUNT sendcount, H sendtype, void *recvbuf, COUNT recvcount, \
                          H recvtype, H comm)                                                               \
    {                                                                                                       \
        if (!on() || (!P_##NAME && !P_##INT))                                                               \
            return NO_MPI;                                                                                  \
        if (!P_##NAME && (!fits(sendcount) || !fits(recvcount)))                                            \
            return MPI_ERR_COUNT;                                                                           \
        struct call c = begin(MPIQ_CALL_ALLGATHER, comm, NONE, sendcount, sendtype, COLLECTIVE);            \
        int rc = PASS_ON(NAME, INT, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);      \
        end(c);                                                                                             \
        return rc;                                                                                          \
    }

ALLGATHER(Allgather, int, Allgather)
ALLGATHER(Allgather_c, Count, Allgather)

#define SCATTER(NAME, COUNT, INT)                                                                             \
    EXPORT int MPI_##NAME(const void *sendbuf, COUNT sendcount, H sendtype, void *recvbuf, COUNT recvcount,   \
                          H recvtype, int root, H comm)                                                       \
    {                                                                                                         \
        if (!on() || (!P_##NAME && !P_##INT))                                                                 \
            return NO_MPI;                                                                                    \
        if (!P_##NAME && (!fits(sendcount) || !fits(recvcount)))                                              \
            return MPI_ERR_COUNT;                                                                             \
        struct call c = begin(MPIQ_CALL_SCATTER, comm, root, MPIQ_TAG_NONE, recvcount, recvtype, COLLECTIVE); \
        int rc = PASS_ON(NAME, INT, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);  \
        end(c);                                                                                               \
        return rc;                                                                                            \
    }

SCATTER(Scatter, int, Scatter)
SCATTER(Scatter_c, Count, Scatter)

#define ALLTOALL(NAME, COUNT, INT)                                                                          \
    EXPORT int MPI_##NAME(const void *sendbuf, COUNT sendcount, H sendtype, void *recvbuf, COUNT recvcount, \
                          H recvtype, H comm)                                                               \
    {                                                                                                       \
        if (!on() || (!P_##NAME && !P_##INT))                                                               \
            return NO_MPI;                                                                                  \
        if (!P_##NAME && (!fits(sendcount) || !fits(recvcount)))                                            \
            return MPI_ERR_COUNT;                                                                           \
        struct call c = begin(MPIQ_CALL_ALLTOALL, comm, NONE, sendcount, sendtype, COLLECTIVE);             \
        int rc = PASS_ON(NAME, INT, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);      \
        end(c);                                                                                             \
        return rc;                                                                                          \
    }

ALLTOALL(Alltoall, int, Alltoall)
ALLTOALL(Alltoall_c, Count, Alltoall)

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

#define IBCAST(NAME, COUNT, INT)                                                                     \
    EXPORT int MPI_##NAME(void *buf, COUNT count, H type, int root, H comm, void *req)               \
    {                                                                                                \
        if (!on() || (!P_##NAME && !P_##INT))                                                        \
            return NO_MPI;                                                                           \
        if (!P_##NAME && !fits(count))                                                               \
            return MPI_ERR_COUNT;                                                                    \
        struct call c = begin(MPIQ_CALL_IBCAST, comm, root, MPIQ_TAG_NONE, count, type, COLLECTIVE); \
        int rc = PASS_ON(NAME, INT, buf, count, type, root, comm, req);                              \
        if (rc == 0)                                                                                 \
            pending_add(c, req);                                                                     \
        end(c);                                                                                      \
        return rc;                                                                                   \
    }

IBCAST(Ibcast, int, Ibcast)
IBCAST(Ibcast_c, Count, Ibcast)

#define IALLREDUCE(NAME, COUNT, INT)                                                                        \
    EXPORT int MPI_##NAME(const void *sendbuf, void *recvbuf, COUNT count, H type, H op, H comm, void *req) \
    {                                                                                                       \
        if (!on() || (!P_##NAME && !P_##INT))                                                               \
            return NO_MPI;                                                                                  \
        if (!P_##NAME && !fits(count))                                                                      \
            return MPI_ERR_COUNT;                                                                           \
        struct call c = begin(MPIQ_CALL_IALLREDUCE, comm, NONE, count, type, COLLECTIVE);                   \
        int rc = PASS_ON(NAME, INT, sendbuf, recvbuf, count, type, op, comm, req);                          \
        if (rc == 0)                                                                                        \
            pending_add(c, req);                                                                            \
        end(c);                                                                                             \
        return rc;                                                                                          \
    }

IALLREDUCE(Iallreduce, int, Iallreduce)
IALLREDUCE(Iallreduce_c, Count, Iallreduce)

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
