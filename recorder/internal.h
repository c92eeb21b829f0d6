/*
 * internal.h - what the two halves of the recorder share: recorder.c (the
 * tables, the MPI underneath, MPI_Init and MPI_Finalize) and calls.c (the
 * other MPI_X functions). Not part of the format (mpiq_recorder.h).
 */
#ifndef MPIQ_RECORDER_INTERNAL_H
#define MPIQ_RECORDER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "mpiq_recorder.h"

#define EXPORT __attribute__((visibility("default")))

/* Thread-local, at a fixed offset from the thread pointer: no call to
 * __tls_get_addr on every MPI call. The library is preloaded or linked (it
 * must come before the MPI to stand in for its MPI_ functions), so its
 * variables are in the static TLS block. */
#define TLS __thread __attribute__((tls_model("initial-exec")))

/* MPI_THREAD_MULTIPLE, 3 in both ABIs. */
#define THREAD_MULTIPLE 3

#pragma GCC visibility push(hidden)

/* A handle of either ABI: a pointer, or an int in the low 32 bits. */
typedef uintptr_t H;

/* MPI_Count, the count of MPI-4's large-count functions (MPI_X_c): long
 * long in both ABIs. mpi4py calls them whenever the MPI has them. */
typedef int64_t Count;

#define PMPI_FUNCTIONS(X)                                                          \
    X(Init, int, (int *, char ***))                                                \
    X(Init_thread, int, (int *, char ***, int, int *))                             \
    X(Finalize, int, (void))                                                       \
    X(Query_thread, int, (int *))                                                  \
    X(Comm_rank, int, (H, int *))                                                  \
    X(Comm_size, int, (H, int *))                                                  \
    X(Comm_test_inter, int, (H, int *))                                            \
    X(Comm_group, int, (H, void *))                                                \
    X(Group_translate_ranks, int, (H, int, const int *, H, int *))                 \
    X(Group_free, int, (void *))                                                   \
    X(Type_size, int, (H, int *))                                                  \
    X(Send, int, (const void *, int, H, int, int, H))                              \
    X(Ssend, int, (const void *, int, H, int, int, H))                             \
    X(Bsend, int, (const void *, int, H, int, int, H))                             \
    X(Rsend, int, (const void *, int, H, int, int, H))                             \
    X(Isend, int, (const void *, int, H, int, int, H, void *))                     \
    X(Issend, int, (const void *, int, H, int, int, H, void *))                    \
    X(Ibsend, int, (const void *, int, H, int, int, H, void *))                    \
    X(Irsend, int, (const void *, int, H, int, int, H, void *))                    \
    X(Recv, int, (void *, int, H, int, int, H, void *))                            \
    X(Irecv, int, (void *, int, H, int, int, H, void *))                           \
    X(Sendrecv, int, (const void *, int, H, int, int, void *, int, H, int, int, H, void *)) \
    X(Sendrecv_replace, int, (void *, int, H, int, int, int, int, H, void *))      \
    X(Probe, int, (int, int, H, void *))                                           \
    X(Iprobe, int, (int, int, H, int *, void *))                                   \
    X(Mprobe, int, (int, int, H, void *, void *))                                  \
    X(Improbe, int, (int, int, H, int *, void *, void *))                          \
    X(Mrecv, int, (void *, int, H, void *, void *))                                \
    X(Imrecv, int, (void *, int, H, void *, void *))                               \
    X(Send_init, int, (const void *, int, H, int, int, H, void *))                 \
    X(Ssend_init, int, (const void *, int, H, int, int, H, void *))                \
    X(Bsend_init, int, (const void *, int, H, int, int, H, void *))                \
    X(Rsend_init, int, (const void *, int, H, int, int, H, void *))                \
    X(Recv_init, int, (void *, int, H, int, int, H, void *))                       \
    X(Start, int, (void *))                                                        \
    X(Startall, int, (int, void *))                                                \
    X(Wait, int, (void *, void *))                                                 \
    X(Test, int, (void *, int *, void *))                                          \
    X(Waitall, int, (int, void *, void *))                                         \
    X(Waitany, int, (int, void *, int *, void *))                                  \
    X(Waitsome, int, (int, void *, int *, int *, void *))                          \
    X(Testall, int, (int, void *, int *, void *))                                  \
    X(Testany, int, (int, void *, int *, int *, void *))                           \
    X(Testsome, int, (int, void *, int *, int *, void *))                          \
    X(Request_free, int, (void *))                                                 \
    X(Barrier, int, (H))                                                           \
    X(Bcast, int, (void *, int, H, int, H))                                        \
    X(Reduce, int, (const void *, void *, int, H, H, int, H))                      \
    X(Allreduce, int, (const void *, void *, int, H, H, H))                        \
    X(Gather, int, (const void *, int, H, void *, int, H, int, H))                 \
    X(Allgather, int, (const void *, int, H, void *, int, H, H))                   \
    X(Scatter, int, (const void *, int, H, void *, int, H, int, H))                \
    X(Alltoall, int, (const void *, int, H, void *, int, H, H))                    \
    X(Ibarrier, int, (H, void *))                                                  \
    X(Ibcast, int, (void *, int, H, int, H, void *))                               \
    X(Iallreduce, int, (const void *, void *, int, H, H, H, void *))               \
    X(Comm_dup, int, (H, void *))                                                  \
    X(Comm_split, int, (H, int, int, void *))                                      \
    X(Comm_create, int, (H, H, void *))                                            \
    X(Comm_free, int, (void *))                                                    \
    X(Send_c, int, (const void *, Count, H, int, int, H))                          \
    X(Ssend_c, int, (const void *, Count, H, int, int, H))                         \
    X(Bsend_c, int, (const void *, Count, H, int, int, H))                         \
    X(Rsend_c, int, (const void *, Count, H, int, int, H))                         \
    X(Isend_c, int, (const void *, Count, H, int, int, H, void *))                 \
    X(Issend_c, int, (const void *, Count, H, int, int, H, void *))                \
    X(Ibsend_c, int, (const void *, Count, H, int, int, H, void *))                \
    X(Irsend_c, int, (const void *, Count, H, int, int, H, void *))                \
    X(Recv_c, int, (void *, Count, H, int, int, H, void *))                        \
    X(Irecv_c, int, (void *, Count, H, int, int, H, void *))                       \
    X(Sendrecv_c, int, (const void *, Count, H, int, int, void *, Count, H, int, int, H, void *)) \
    X(Sendrecv_replace_c, int, (void *, Count, H, int, int, int, int, H, void *))  \
    X(Mrecv_c, int, (void *, Count, H, void *, void *))                            \
    X(Imrecv_c, int, (void *, Count, H, void *, void *))                           \
    X(Send_init_c, int, (const void *, Count, H, int, int, H, void *))             \
    X(Ssend_init_c, int, (const void *, Count, H, int, int, H, void *))            \
    X(Bsend_init_c, int, (const void *, Count, H, int, int, H, void *))            \
    X(Rsend_init_c, int, (const void *, Count, H, int, int, H, void *))            \
    X(Recv_init_c, int, (void *, Count, H, int, int, H, void *))                   \
    X(Bcast_c, int, (void *, Count, H, int, H))                                    \
    X(Reduce_c, int, (const void *, void *, Count, H, H, int, H))                  \
    X(Allreduce_c, int, (const void *, void *, Count, H, H, H))                    \
    X(Gather_c, int, (const void *, Count, H, void *, Count, H, int, H))           \
    X(Allgather_c, int, (const void *, Count, H, void *, Count, H, H))             \
    X(Scatter_c, int, (const void *, Count, H, void *, Count, H, int, H))          \
    X(Alltoall_c, int, (const void *, Count, H, void *, Count, H, H))              \
    X(Ibcast_c, int, (void *, Count, H, int, H, void *))                           \
    X(Iallreduce_c, int, (const void *, void *, Count, H, H, H, void *))

#define DECLARE(name, ret, params) extern ret(*P_##name) params;
PMPI_FUNCTIONS(DECLARE)
#undef DECLARE

/* A call being recorded: its record, and the record's number. */
struct call {
    struct mpiq_recorder_call_record *r; /* NULL: not recorded */
    uint64_t seq;
};

#define NO_COMM ((H)0)
#define NO_TYPE ((H)0)
#define P2P 0
#define COLLECTIVE 1
#define NONE MPIQ_PEER_NONE, MPIQ_TAG_NONE

/* An MPI that could not be found: the call fails as MPI_ERR_INTERN would
 * (16 in both ABIs) rather than crash. */
#define NO_MPI 16

/* Whether MPI_<name> can be passed on: the MPI is found, and has
 * PMPI_<name> (a function newer than the MPI is left NULL by resolve(),
 * and only the calls to it fail; MPI_X_c, calls.c). */
#define READY(name) (on() && P_##name != NULL)

/* What the MPI's handles and constants are (recorder.c's resolve()). */
struct mpi {
    int flavour;                 /* enum mpiq_recorder_flavour; 0 until known */
    uint64_t mask;               /* the bits of a handle: the low 32 for MPICH's int */
    size_t width;                /* bytes of a handle in an array */
    H comm_world, comm_null, request_null, datatype_null;
    /* Open MPI's one request shared by every call that completed at once
     * (an MPI_Isend to MPI_PROC_NULL): never pending, however many hold it. */
    H request_empty;
    int any_source, proc_null, any_tag;
    /* The MPI was started at MPI_THREAD_MULTIPLE (or could not say): calls
     * may come from several threads at once. */
    int concurrent;
};
extern struct mpi M;

/* 1 once the MPI is known and started: calls are recorded. */
extern int armed;

/* A handle as the program passed it: an MPICH int without the high half a
 * register may carry. */
static inline uint64_t value(H h)
{
    return (uint64_t)h & M.mask;
}

/* The handle at `p` (an out parameter or an array element). */
static inline uint64_t load(const void *p, size_t i)
{
    if (M.width == sizeof(int))
        return ((const uint32_t *)p)[i];
    return ((const uint64_t *)p)[i];
}

static inline int32_t peer_of(int rank)
{
    if (rank == M.any_source)
        return MPIQ_PEER_ANY_SOURCE;
    if (rank == M.proc_null)
        return MPIQ_PEER_PROC_NULL;
    return rank;
}

static inline int32_t tag_of(int tag)
{
    return tag == M.any_tag ? MPIQ_TAG_ANY : tag;
}

uint64_t now_ns(void);

/* The end of call `c`: unless the ring went round meanwhile and the record
 * is another's. */
static inline void end(struct call c)
{
    if (c.r && __atomic_load_n(&c.r->seq, __ATOMIC_ACQUIRE) == c.seq)
        __atomic_store_n(&c.r->end_ns, now_ns(), __ATOMIC_RELEASE);
}

int ready(void);

/* Whether calls can be passed on (ready()), at the cost of one load once
 * the MPI is up. */
static inline int on(void)
{
    return __builtin_expect(__atomic_load_n(&armed, __ATOMIC_ACQUIRE), 1) || ready();
}

/* completed(): every request given completed, or the `done` listed. */
#define ALL_DONE (-1)

int recording(void);
int status_source_tag(const void *status, int *source, int *tag);
struct call begin(int what, H comm, int32_t peer, int32_t tag, int64_t count, H type, int collective);
struct call begin_wait(int what, int n, const void *reqs, int *tracked);
struct call begin_start(int what, int n, const void *reqs);
void pending_add(struct call c, const void *out);
void persistent_add(struct call c, const void *out);
void pending_done(uint64_t h);
void activate(struct call c, int n, const void *reqs);
void completed(int n, const void *reqs, int done, const int *which);
struct mpiq_recorder_comm *comm_entry(H c);
void comm_forget(uint64_t h);

#pragma GCC visibility pop

#endif /* MPIQ_RECORDER_INTERNAL_H */
