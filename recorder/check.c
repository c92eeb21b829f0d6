/*
 * check.c - the flight recorder checked from inside a job: two ranks make
 * calls whose traces in the recorder's tables are known, and read those
 * tables back through the symbol `mpiq_recorder`, laid out as
 * mpiq_recorder.h says (what mpiq reads from outside). Linked with nothing
 * of mpiq: the recorder is preloaded, and found at run time.
 *
 *   mpicc -g -O0 -Wall -o check recorder/check.c -ldl
 *   mpirun -n 2 env LD_PRELOAD=$PWD/libmpiq_recorder.so ./check
 *
 * Prints "recorder check: ok" (rank 0), or each failure, and exits 1 on one.
 * Each rank prints "MPIQ-READY rank=<r> pid=<pid>" first, for mpiq's test
 * harness (tests/tests/recorder.rs), which starts it as a job.
 *
 * What it checks: a wait or test call marks `waited_by` of the requests it
 * is given and counts them (a request of a call the recorder does not
 * follow, MPI_Iallgather's, is active and not known); MPI_Mprobe and
 * MPI_Mrecv record the peer and tag the probe matched (mpi4py's comm.recv);
 * a persistent request goes 4 -> 2 -> 4 through MPI_Start and MPI_Wait, and
 * to 3 by MPI_Request_free; MPI_Waitany completes only the request it
 * names, persistent or not; the large-count functions (MPI_Mrecv_c, ...)
 * are recorded as the calls they widen, and an MPI without them has them
 * anyway (passed on to MPI_Mrecv, ...: mpi4py calls them when it finds
 * them); each datatype's size, predefined or derived, also where a derived
 * datatype takes the place of a freed one; each communicator's collectives
 * counted on their own when calls go from one to the other.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "mpiq_recorder.h"

typedef struct mpiq_recorder_call_record Call;
typedef struct mpiq_recorder_pending Pending;

static const struct mpiq_recorder_header *rec;
static int rank, failures;

/* A handle as the recorder keeps it: the word the program passes (an
 * MPICH int zero-extended). */
#define WORD(handle) word_of(&(handle), sizeof(handle))
static uint64_t word_of(const void *handle, size_t size)
{
    uint64_t w = 0;
    memcpy(&w, handle, size);
    return w;
}

static void fail(int line, const char *what, long long got, long long want)
{
    printf("rank %d: check.c:%d: %s: %lld, expected %lld\n", rank, line, what, got, want);
    fflush(stdout);
    failures++;
}

#define EQ(got, want, what)                                                      \
    do {                                                                         \
        long long got_ = (long long)(got), want_ = (long long)(want);            \
        if (got_ != want_)                                                       \
            fail(__LINE__, what, got_, want_);                                   \
    } while (0)

/* The last record of call `what`, or NULL (a failure). */
static const Call *last(int what, int line)
{
    const char *calls = (const char *)rec + rec->calls_offset;
    uint64_t n = rec->calls_started;
    for (uint64_t i = n; i > 0 && n - i < rec->ncalls; i--) {
        const Call *c = (const Call *)(calls + ((i - 1) % rec->ncalls) * rec->call_size);
        if (c->seq == i && c->call == what)
            return c;
    }
    fail(line, "no record of call number", what, what);
    return NULL;
}
#define LAST(what) last(what, __LINE__)

/* The slot of the request `h` made by call record `c`, or NULL (a failure). */
static const Pending *slot(uint64_t h, const Call *c, int line)
{
    if (!c)
        return NULL;
    const char *table = (const char *)rec + rec->pending_offset;
    for (uint32_t i = 0; i < rec->npending; i++) {
        const Pending *p = (const Pending *)(table + (size_t)i * rec->pending_size);
        if (p->state != 0 && p->request == h && p->call_seq == c->seq)
            return p;
    }
    fail(line, "no pending slot for the request of call", c->call, c->call);
    return NULL;
}
#define SLOT(h, c) slot(h, c, __LINE__)

static void header(int size)
{
    EQ(memcmp(rec->magic, MPIQ_RECORDER_MAGIC, 8), 0, "magic");
    EQ(rec->version, MPIQ_RECORDER_VERSION, "version");
    EQ(rec->header_size, 120, "header_size");
    EQ(rec->call_size, 88, "call_size");
    EQ(rec->pending_size, 80, "pending_size");
    EQ(rec->comm_size, 32, "comm_size");
    EQ(rec->initialized, 1, "initialized");
    EQ(rec->world_rank, rank, "world_rank");
    EQ(rec->world_size, size, "world_size");
    MPI_Comm world = MPI_COMM_WORLD;
    MPI_Request null = MPI_REQUEST_NULL;
    EQ(rec->comm_world, WORD(world), "comm_world");
    EQ(rec->request_null, WORD(null), "request_null");
#ifdef OPEN_MPI
    EQ(rec->flavour, MPIQ_FLAVOUR_OPEN_MPI, "flavour");
#else
    EQ(rec->flavour, MPIQ_FLAVOUR_MPICH, "flavour");
#endif
}

/* MPI-4's large-count functions, from the recorder (which has them for every
 * MPI), whatever this mpi.h declares. */
static int (*send_c)(const void *, long long, MPI_Datatype, int, int, MPI_Comm);
static int (*irecv_c)(void *, long long, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
static int (*mrecv_c)(void *, long long, MPI_Datatype, MPI_Message *, MPI_Status *);

/* Rank 1 sends what rank 0 asks for (tag GO: the tag to send next). */
enum { GO = 1 };

static void go(int tag)
{
    MPI_Send(&tag, 1, MPI_INT, 1, GO, MPI_COMM_WORLD);
}

/* Irecv, Test, Testall, Wait: waited_by and the counts. */
static void waits(void)
{
    int buf[4] = {0, 0, 0, 0}, all[2], one = rank, flag = 1;
    MPI_Request rq, ag, both[2];
    MPI_Iallgather(&one, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD, &ag);
    if (rank == 1) {
        int tag;
        MPI_Recv(&tag, 1, MPI_INT, 0, GO, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(buf, 4, MPI_INT, 0, tag, MPI_COMM_WORLD);
        MPI_Wait(&ag, MPI_STATUS_IGNORE);
        return;
    }
    MPI_Irecv(buf, 4, MPI_INT, 1, 11, MPI_COMM_WORLD, &rq);
    uint64_t h = WORD(rq);
    const Call *irecv = LAST(MPIQ_CALL_IRECV);
    const Pending *p = SLOT(h, irecv);
    if (irecv) {
        MPI_Comm world = MPI_COMM_WORLD;
        EQ(irecv->request, h, "MPI_Irecv: request");
        EQ(irecv->comm, WORD(world), "MPI_Irecv: comm");
        EQ(irecv->peer, 1, "MPI_Irecv: peer");
        EQ(irecv->tag, 11, "MPI_Irecv: tag");
        EQ(irecv->count, 4, "MPI_Irecv: count");
        EQ(irecv->type_size, 4, "MPI_Irecv: type_size");
        EQ(irecv->requests_active, 0, "MPI_Irecv: requests_active");
    }
    if (p) {
        EQ(p->state, 2, "MPI_Irecv: state");
        EQ(p->call, MPIQ_CALL_IRECV, "MPI_Irecv: pending call");
        EQ(p->peer, 1, "MPI_Irecv: pending peer");
        EQ(p->tag, 11, "MPI_Irecv: pending tag");
        EQ(p->count, 4, "MPI_Irecv: pending count");
        EQ(p->waited_by, 0, "MPI_Irecv: waited_by before any wait");
        EQ(p->flags, 0, "MPI_Irecv: flags");
    }

    MPI_Test(&rq, &flag, MPI_STATUS_IGNORE);
    EQ(flag, 0, "MPI_Test: flag (rank 1 has not sent)");
    const Call *test = LAST(MPIQ_CALL_TEST);
    if (test) {
        EQ(test->request, h, "MPI_Test: request");
        EQ(test->count, 1, "MPI_Test: count");
        EQ(test->requests_active, 1, "MPI_Test: requests_active");
        EQ(test->requests_known, 1, "MPI_Test: requests_known");
    }
    if (p && test) {
        EQ(p->state, 2, "MPI_Test: state of the receive still pending");
        EQ(p->waited_by, test->seq, "MPI_Test: waited_by");
    }

    /* MPI_Iallgather's request: active, not known to the recorder. */
    both[0] = rq;
    both[1] = ag;
    MPI_Status sts[2]; /* not MPI_STATUSES_IGNORE: GCC 12 takes MPICH's for an array */
    MPI_Testall(2, both, &flag, sts);
    EQ(flag, 0, "MPI_Testall: flag");
    const Call *testall = LAST(MPIQ_CALL_TESTALL);
    if (testall) {
        EQ(testall->count, 2, "MPI_Testall: count");
        EQ(testall->requests_active, 2, "MPI_Testall: requests_active");
        EQ(testall->requests_known, 1, "MPI_Testall: requests_known");
    }
    if (p && testall)
        EQ(p->waited_by, testall->seq, "MPI_Testall: waited_by");

    go(11);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    const Call *wait = LAST(MPIQ_CALL_WAIT);
    if (wait) {
        EQ(wait->request, h, "MPI_Wait: request");
        EQ(wait->requests_active, 1, "MPI_Wait: requests_active");
        EQ(wait->requests_known, 1, "MPI_Wait: requests_known");
        EQ(wait->end_ns != 0, 1, "MPI_Wait: returned");
    }
    if (p && wait) {
        EQ(p->state, 3, "MPI_Wait: state of the completed receive");
        EQ(p->waited_by, wait->seq, "MPI_Wait: waited_by");
    }
    MPI_Wait(&ag, MPI_STATUS_IGNORE);
    if ((wait = LAST(MPIQ_CALL_WAIT))) {
        EQ(wait->requests_active, 1, "MPI_Wait on MPI_Iallgather's: requests_active");
        EQ(wait->requests_known, 0, "MPI_Wait on MPI_Iallgather's: requests_known");
    }
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    if ((wait = LAST(MPIQ_CALL_WAIT))) {
        EQ(wait->requests_active, 0, "MPI_Wait on MPI_REQUEST_NULL: requests_active");
        EQ(wait->requests_known, 0, "MPI_Wait on MPI_REQUEST_NULL: requests_known");
    }
}

/* Mprobe and Improbe, then Mrecv and Imrecv: peer and tag of the match. */
static void matched(void)
{
    int buf[3] = {0, 0, 0};
    if (rank == 1) {
        for (int tag = 22; tag <= 25; tag++)
            MPI_Send(buf, 3, MPI_INT, 0, tag, MPI_COMM_WORLD);
        send_c(buf, 3, MPI_INT, 0, 26, MPI_COMM_WORLD);
        send_c(buf, 3, MPI_INT, 0, 27, MPI_COMM_WORLD);
        const Call *send = LAST(MPIQ_CALL_SEND);
        if (send) {
            EQ(send->tag, 27, "MPI_Send_c: tag");
            EQ(send->count, 3, "MPI_Send_c: count");
        }
        return;
    }
    MPI_Comm world = MPI_COMM_WORLD;
    MPI_Message msg;
    MPI_Status st;
    MPI_Mprobe(MPI_ANY_SOURCE, 22, MPI_COMM_WORLD, &msg, &st);
    const Call *c = LAST(MPIQ_CALL_MPROBE);
    if (c) {
        EQ(c->peer, MPIQ_PEER_ANY_SOURCE, "MPI_Mprobe: peer");
        EQ(c->tag, 22, "MPI_Mprobe: tag");
        EQ(c->comm, WORD(world), "MPI_Mprobe: comm");
    }
    MPI_Mrecv(buf, 3, MPI_INT, &msg, MPI_STATUS_IGNORE);
    if ((c = LAST(MPIQ_CALL_MRECV))) {
        EQ(c->peer, 1, "MPI_Mrecv: peer");
        EQ(c->tag, 22, "MPI_Mrecv: tag");
        EQ(c->comm, WORD(world), "MPI_Mrecv: comm");
        EQ(c->count, 3, "MPI_Mrecv: count");
        EQ(c->type_size, 4, "MPI_Mrecv: type_size");
    }

    MPI_Mprobe(1, MPI_ANY_TAG, MPI_COMM_WORLD, &msg, &st);
    MPI_Mrecv(buf, 3, MPI_INT, &msg, &st);
    if ((c = LAST(MPIQ_CALL_MRECV))) {
        EQ(c->peer, 1, "MPI_Mrecv after MPI_ANY_TAG: peer");
        EQ(c->tag, 23, "MPI_Mrecv after MPI_ANY_TAG: tag");
    }

    int flag = 0;
    while (!flag)
        MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &msg, &st);
    if ((c = LAST(MPIQ_CALL_IMPROBE))) {
        EQ(c->peer, MPIQ_PEER_ANY_SOURCE, "MPI_Improbe: peer");
        EQ(c->tag, MPIQ_TAG_ANY, "MPI_Improbe: tag");
    }
    MPI_Request rq;
    MPI_Imrecv(buf, 3, MPI_INT, &msg, &rq);
    c = LAST(MPIQ_CALL_IMRECV);
    const Pending *p = SLOT(WORD(rq), c);
    if (c) {
        EQ(c->peer, 1, "MPI_Imrecv: peer");
        EQ(c->tag, 24, "MPI_Imrecv: tag");
    }
    if (p) {
        EQ(p->call, MPIQ_CALL_IMRECV, "MPI_Imrecv: pending call");
        EQ(p->peer, 1, "MPI_Imrecv: pending peer");
        EQ(p->tag, 24, "MPI_Imrecv: pending tag");
        EQ(p->comm, WORD(world), "MPI_Imrecv: pending comm");
    }
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    if (p)
        EQ(p->state, 3, "MPI_Imrecv: state after MPI_Wait");

    /* No status: the probe's own source and tag. */
    MPI_Mprobe(1, 25, MPI_COMM_WORLD, &msg, MPI_STATUS_IGNORE);
    MPI_Mrecv(buf, 3, MPI_INT, &msg, MPI_STATUS_IGNORE);
    if ((c = LAST(MPIQ_CALL_MRECV))) {
        EQ(c->peer, 1, "MPI_Mrecv after a probe without status: peer");
        EQ(c->tag, 25, "MPI_Mrecv after a probe without status: tag");
    }

    /* The large-count functions, found as mpi4py finds them: recorded as
     * the calls they widen, and passed on to MPI_X by an MPI without them. */
    MPI_Mprobe(MPI_ANY_SOURCE, 26, MPI_COMM_WORLD, &msg, &st);
    EQ(mrecv_c(buf, 3, MPI_INT, &msg, MPI_STATUS_IGNORE), MPI_SUCCESS, "MPI_Mrecv_c: its return");
    if ((c = LAST(MPIQ_CALL_MRECV))) {
        EQ(c->peer, 1, "MPI_Mrecv_c: peer");
        EQ(c->tag, 26, "MPI_Mrecv_c: tag");
        EQ(c->count, 3, "MPI_Mrecv_c: count");
    }
    if (!dlsym(RTLD_DEFAULT, "PMPI_Irecv_c"))
        EQ(irecv_c(buf, 1ll << 40, MPI_INT, 1, 27, MPI_COMM_WORLD, &rq), MPI_ERR_COUNT,
           "MPI_Irecv_c with a count past an int, passed on to MPI_Irecv");
    EQ(irecv_c(buf, 3, MPI_INT, 1, 27, MPI_COMM_WORLD, &rq), MPI_SUCCESS, "MPI_Irecv_c: its return");
    c = LAST(MPIQ_CALL_IRECV);
    if ((p = SLOT(WORD(rq), c))) {
        EQ(p->peer, 1, "MPI_Irecv_c: pending peer");
        EQ(p->tag, 27, "MPI_Irecv_c: pending tag");
        EQ(p->count, 3, "MPI_Irecv_c: pending count");
    }
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    if (p)
        EQ(p->state, 3, "MPI_Irecv_c: state after MPI_Wait");
}

/* Recv_init and Send_init, started and completed twice, then freed. */
static void persistent(void)
{
    int buf[2] = {0, 0};
    MPI_Request pr;
    if (rank == 1) {
        MPI_Send_init(buf, 2, MPI_INT, 0, 33, MPI_COMM_WORLD, &pr);
        const Call *init = LAST(MPIQ_CALL_SEND_INIT);
        const Pending *p = SLOT(WORD(pr), init);
        if (p) {
            EQ(p->state, 4, "MPI_Send_init: state");
            EQ(p->flags, MPIQ_PENDING_PERSISTENT, "MPI_Send_init: flags");
            EQ(p->peer, 0, "MPI_Send_init: peer");
            EQ(p->tag, 33, "MPI_Send_init: tag");
        }
        for (int round = 0; round < 2; round++) {
            int tag;
            MPI_Recv(&tag, 1, MPI_INT, 0, GO, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Start(&pr);
            if (p)
                EQ(p->state, 2, "MPI_Send_init, MPI_Start: state");
            MPI_Wait(&pr, MPI_STATUS_IGNORE);
            if (p)
                EQ(p->state, 4, "MPI_Send_init, MPI_Wait: state");
        }
        MPI_Request_free(&pr);
        if (p)
            EQ(p->state, 3, "MPI_Send_init, MPI_Request_free: state");
        return;
    }

    MPI_Recv_init(buf, 2, MPI_INT, 1, 33, MPI_COMM_WORLD, &pr);
    uint64_t h = WORD(pr);
    const Call *init = LAST(MPIQ_CALL_RECV_INIT);
    const Pending *p = SLOT(h, init);
    if (init)
        EQ(init->request, h, "MPI_Recv_init: request");
    if (p) {
        EQ(p->state, 4, "MPI_Recv_init: state");
        EQ(p->flags, MPIQ_PENDING_PERSISTENT, "MPI_Recv_init: flags");
        EQ(p->call, MPIQ_CALL_RECV_INIT, "MPI_Recv_init: pending call");
        EQ(p->peer, 1, "MPI_Recv_init: peer");
        EQ(p->tag, 33, "MPI_Recv_init: tag");
        EQ(p->count, 2, "MPI_Recv_init: count");
    }

    /* At rest, it is nothing to wait for. */
    MPI_Wait(&pr, MPI_STATUS_IGNORE);
    const Call *c = LAST(MPIQ_CALL_WAIT);
    if (c) {
        EQ(c->requests_active, 0, "MPI_Wait on an inactive request: requests_active");
        EQ(c->requests_known, 0, "MPI_Wait on an inactive request: requests_known");
    }
    if (p)
        EQ(p->state, 4, "MPI_Wait on an inactive request: state");

    for (int round = 0; round < 2; round++) {
        MPI_Start(&pr);
        const Call *start = LAST(MPIQ_CALL_START);
        if (start) {
            EQ(start->request, h, "MPI_Start: request");
            EQ(start->count, 1, "MPI_Start: count");
        }
        if (p) {
            EQ(p->state, 2, "MPI_Start: state");
            EQ(p->waited_by, 0, "MPI_Start: waited_by");
        }
        if (p && start)
            EQ(p->start_ns, start->start_ns, "MPI_Start: start_ns");
        int flag = 1;
        MPI_Test(&pr, &flag, MPI_STATUS_IGNORE);
        EQ(flag, 0, "MPI_Test on the started receive: flag");
        if (p)
            EQ(p->state, 2, "MPI_Test, not complete: state");
        go(33);
        MPI_Wait(&pr, MPI_STATUS_IGNORE);
        c = LAST(MPIQ_CALL_WAIT);
        EQ(WORD(pr), h, "MPI_Wait: the persistent request's handle");
        if (c) {
            EQ(c->requests_active, 1, "MPI_Wait on a started request: requests_active");
            EQ(c->requests_known, 1, "MPI_Wait on a started request: requests_known");
        }
        if (p) {
            EQ(p->state, 4, "MPI_Wait on a started request: state");
            if (c)
                EQ(p->waited_by, c->seq, "MPI_Wait on a started request: waited_by");
        }
    }
    MPI_Request_free(&pr);
    if (p)
        EQ(p->state, 3, "MPI_Request_free: state");
}

/* Waitany completes the one it names: of two receives, of two persistent
 * receives. */
/* Two MPI_Isend to MPI_PROC_NULL complete at once; Open MPI hands out one
 * shared request for both: never pending twice (nor, Open MPI's, at all). */
static void proc_null(void)
{
    int x = 1;
    MPI_Request r[2];
    MPI_Isend(&x, 1, MPI_INT, MPI_PROC_NULL, 11, MPI_COMM_WORLD, &r[0]);
    MPI_Isend(&x, 1, MPI_INT, MPI_PROC_NULL, 11, MPI_COMM_WORLD, &r[1]);
    const char *table = (const char *)rec + rec->pending_offset;
    for (int k = 0; k < 2; k++) {
        int n = 0;
        for (uint32_t i = 0; i < rec->npending; i++) {
            const Pending *p = (const Pending *)(table + (size_t)i * rec->pending_size);
            n += p->state == 2 && p->request == WORD(r[k]);
        }
        if (n > 1)
            fail(__LINE__, "pending slots holding one MPI_PROC_NULL send's request", n, 1);
    }
    MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
}

/* The size of each send's datatype, `want`. */
static void sent_size(MPI_Datatype type, int want, const char *what)
{
    char buf[64] = {0};
    MPI_Send(buf, 1, type, MPI_PROC_NULL, 44, MPI_COMM_WORLD);
    const Call *c = LAST(MPIQ_CALL_SEND);
    if (c) {
        EQ(c->type_size, want, what);
        EQ(c->peer, MPIQ_PEER_PROC_NULL, "MPI_Send to MPI_PROC_NULL: peer");
    }
}

/* Datatype sizes, which the recorder keeps for predefined datatypes (Open
 * MPI) or reads from the handle (MPICH): the same one again, others, and
 * derived datatypes made and freed in turn (one may get the address of the
 * one freed before it: its size is asked for anew); the collective counts
 * of two communicators called in turn. */
static void sizes(void)
{
    sent_size(MPI_DOUBLE, 8, "MPI_DOUBLE");
    sent_size(MPI_CHAR, 1, "MPI_CHAR");
    sent_size(MPI_DOUBLE, 8, "MPI_DOUBLE again");
    sent_size(MPI_SHORT, 2, "MPI_SHORT");
    sent_size(MPI_INT, 4, "MPI_INT");
    sent_size(MPI_LONG_DOUBLE, (int)sizeof(long double), "MPI_LONG_DOUBLE");
    sent_size(MPI_DOUBLE_INT, 12, "MPI_DOUBLE_INT"); /* its data, not its extent */
    for (int round = 0; round < 4; round++) {
        MPI_Datatype t;
        int n = round % 2 ? 5 : 3;
        MPI_Type_contiguous(n, round % 2 ? MPI_DOUBLE : MPI_INT, &t);
        MPI_Type_commit(&t);
        sent_size(t, round % 2 ? 40 : 12, "a derived datatype");
        sent_size(t, round % 2 ? 40 : 12, "a derived datatype again");
        MPI_Type_free(&t);
    }
    sent_size(MPI_DOUBLE, 8, "MPI_DOUBLE after derived datatypes");

    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    double x = 1, y = 0;
    const Call *c;
    uint64_t seq[4] = {0, 0, 0, 0};
    MPI_Comm order[4] = {dup, MPI_COMM_WORLD, dup, MPI_COMM_WORLD};
    for (int k = 0; k < 4; k++) {
        MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, order[k]);
        if ((c = LAST(MPIQ_CALL_ALLREDUCE))) {
            EQ(c->comm, WORD(order[k]), "MPI_Allreduce: comm");
            EQ(c->type_size, 8, "MPI_Allreduce: type_size");
            seq[k] = c->coll_seq;
        }
    }
    EQ(seq[2], seq[0] + 1, "MPI_Allreduce: the second on the duplicate, its number");
    EQ(seq[3], seq[1] + 1, "MPI_Allreduce: the second on MPI_COMM_WORLD, its number");
    EQ(seq[0], 1, "MPI_Allreduce: the first on the duplicate, its number");
    EQ(seq[1] > 1, 1, "MPI_Allreduce on MPI_COMM_WORLD after others: its number past 1");
    MPI_Comm_free(&dup);
}

static void any(void)
{
    int a = 0, b = 0, pa = 0, pb = 0;
    if (rank == 1) {
        for (int i = 0; i < 4; i++) {
            int tag;
            MPI_Recv(&tag, 1, MPI_INT, 0, GO, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(&a, 1, MPI_INT, 0, tag, MPI_COMM_WORLD);
        }
        return;
    }
    MPI_Request r[2], q[2];
    MPI_Irecv(&a, 1, MPI_INT, 1, 41, MPI_COMM_WORLD, &r[0]);
    const Pending *ra = SLOT(WORD(r[0]), LAST(MPIQ_CALL_IRECV));
    MPI_Irecv(&b, 1, MPI_INT, 1, 42, MPI_COMM_WORLD, &r[1]);
    const Pending *rb = SLOT(WORD(r[1]), LAST(MPIQ_CALL_IRECV));
    go(41);
    int index = -1;
    MPI_Waitany(2, r, &index, MPI_STATUS_IGNORE);
    EQ(index, 0, "MPI_Waitany: index");
    const Call *c = LAST(MPIQ_CALL_WAITANY);
    if (c) {
        EQ(c->count, 2, "MPI_Waitany: count");
        EQ(c->requests_active, 2, "MPI_Waitany: requests_active");
        EQ(c->requests_known, 2, "MPI_Waitany: requests_known");
    }
    if (ra)
        EQ(ra->state, 3, "MPI_Waitany: state of the completed receive");
    if (rb)
        EQ(rb->state, 2, "MPI_Waitany: state of the other receive");
    if (rb && c)
        EQ(rb->waited_by, c->seq, "MPI_Waitany: waited_by of the other receive");

    MPI_Recv_init(&pa, 1, MPI_INT, 1, 51, MPI_COMM_WORLD, &q[0]);
    const Pending *qa = SLOT(WORD(q[0]), LAST(MPIQ_CALL_RECV_INIT));
    MPI_Recv_init(&pb, 1, MPI_INT, 1, 52, MPI_COMM_WORLD, &q[1]);
    const Pending *qb = SLOT(WORD(q[1]), LAST(MPIQ_CALL_RECV_INIT));
    MPI_Startall(2, q);
    if ((c = LAST(MPIQ_CALL_STARTALL))) {
        EQ(c->count, 2, "MPI_Startall: count");
        EQ(c->request, WORD(q[0]), "MPI_Startall: request");
    }
    if (qa)
        EQ(qa->state, 2, "MPI_Startall: state of the first");
    if (qb)
        EQ(qb->state, 2, "MPI_Startall: state of the second");
    go(51);
    index = -1;
    MPI_Waitany(2, q, &index, MPI_STATUS_IGNORE);
    EQ(index, 0, "MPI_Waitany, persistent: index");
    if (qa)
        EQ(qa->state, 4, "MPI_Waitany, persistent: state of the completed receive");
    if (qb)
        EQ(qb->state, 2, "MPI_Waitany, persistent: state of the other receive");

    go(42);
    go(52);
    MPI_Request rest[2] = {r[1], q[1]};
    MPI_Status sts[2];
    MPI_Waitall(2, rest, sts);
    if ((c = LAST(MPIQ_CALL_WAITALL))) {
        EQ(c->requests_active, 2, "MPI_Waitall: requests_active");
        EQ(c->requests_known, 2, "MPI_Waitall: requests_known");
    }
    if (rb)
        EQ(rb->state, 3, "MPI_Waitall: state of the receive");
    if (qb)
        EQ(qb->state, 4, "MPI_Waitall: state of the persistent receive");
    MPI_Request_free(&q[0]);
    MPI_Request_free(&q[1]);
    if (qa)
        EQ(qa->state, 3, "MPI_Request_free: state of the first");
    if (qb)
        EQ(qb->state, 3, "MPI_Request_free: state of the second");
}

int main(int argc, char **argv)
{
    int size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    printf("MPIQ-READY rank=%d pid=%d\n", rank, (int)getpid());
    fflush(stdout);
    if (size != 2) {
        if (rank == 0)
            printf("recorder check: needs 2 ranks, not %d\n", size);
        MPI_Finalize();
        return 1;
    }

    rec = (const struct mpiq_recorder_header *)dlsym(RTLD_DEFAULT, "mpiq_recorder");
    int have = rec != NULL, both = 0;
    if (!have) {
        printf("rank %d: no symbol mpiq_recorder: is libmpiq_recorder.so preloaded?\n", rank);
        failures++;
    }
    *(void **)&send_c = dlsym(RTLD_DEFAULT, "MPI_Send_c");
    *(void **)&irecv_c = dlsym(RTLD_DEFAULT, "MPI_Irecv_c");
    *(void **)&mrecv_c = dlsym(RTLD_DEFAULT, "MPI_Mrecv_c");
    if (have && (!send_c || !irecv_c || !mrecv_c)) {
        printf("rank %d: the recorder has no MPI_Send_c, MPI_Irecv_c or MPI_Mrecv_c\n", rank);
        failures++;
        have = 0;
    }
    MPI_Allreduce(&have, &both, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (both) {
        header(size);
        waits();
        matched();
        persistent();
        any();
        proc_null();
        sizes();
    }

    int all = 0;
    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && all == 0)
        printf("recorder check: ok\n");
    else if (rank == 0)
        printf("recorder check: %d failures\n", all);
    fflush(stdout);
    MPI_Finalize();
    return all ? 1 : 0;
}
