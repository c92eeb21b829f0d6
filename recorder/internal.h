/*
 * internal.h - what the two halves of the recorder share: recorder.c (the
 * tables, the MPI underneath, MPI_Init and MPI_Finalize) and calls.c (the
 * other MPI_X functions). Not part of the format (mpiq_recorder.h).
 */
#ifndef MPIQ_RECORDER_INTERNAL_H
#define MPIQ_RECORDER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

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
    /* Open MPI: the address ranges of the executable's and libmpi's
     * images, where its predefined objects are (the executable holds the
     * ones it names, copied there at load time). A datatype there is one
     * of them, never freed: its size is kept (type_sizes). */
    uint64_t image_lo[2], image_hi[2];
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

/* The tables, one static block: mpiq_recorder, the symbol readers find.
 * Here by a hidden name (`recorder_block`, the same object), which the
 * library reaches at a fixed offset from its code, not through the GOT. */
struct mpiq_recorder_block {
    struct mpiq_recorder_header h;
    struct mpiq_recorder_call_record calls[MPIQ_RECORDER_CALLS];
    struct mpiq_recorder_pending pending[MPIQ_RECORDER_PENDING];
    struct mpiq_recorder_comm comms[MPIQ_RECORDER_COMMS];
    int32_t world_ranks[MPIQ_RECORDER_WORLD_RANKS];
};
extern struct mpiq_recorder_block recorder_block;
#define R recorder_block

/* The clock of the records (recorder.c) and the function that reads it:
 * the vDSO's own clock_gettime once the MPI is looked up (no call through
 * libc's), libc's until then or without a vDSO. */
extern clockid_t clock_id;
extern int (*clock_read)(clockid_t, struct timespec *);

static inline uint64_t now_ns(void)
{
#ifdef MPIQ_RECORDER_NO_CLOCK
    /* mpiq-bench's other control build: every record, and no clock read
     * (what the two reads a call cost). Never 0: a call that returned is
     * told from one the process is in by its end. */
    return 1;
#endif
    struct timespec t;
    clock_read(clock_id, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* The end of call `c`: unless the ring went round meanwhile and the record
 * is another's. */
static inline void end(struct call c)
{
    if (c.r && __atomic_load_n(&c.r->seq, __ATOMIC_ACQUIRE) == c.seq)
        __atomic_store_n(&c.r->end_ns, now_ns(), __ATOMIC_RELEASE);
}

__attribute__((cold)) int ready(void);

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
__attribute__((cold)) struct call begin_slow(int what, H comm, int32_t peer, int32_t tag, int64_t count, H type, int collective);
struct call begin_wait(int what, int n, const void *reqs, int *tracked);
struct call begin_start(int what, int n, const void *reqs);
void pending_add(struct call c, const void *out);
void persistent_add(struct call c, const void *out);
void pending_done(uint64_t h);
void activate(struct call c, int n, const void *reqs);
void completed(int n, const void *reqs, int done, const int *which);
struct mpiq_recorder_comm *comm_entry(H c);
void comm_forget(uint64_t h);

/* ---- the hot path: begin() ------------------------------------------- */

/* What the hot path keeps of the calling thread (one TLS block: one
 * look-up of its offset). */
struct thread {
    /* The communicator of the thread's last call: most calls are on the
     * one before's. */
    struct mpiq_recorder_comm *last_comm;
    /* The thread's kernel id, 0 until its first recorded call. */
    uint32_t id;
};
extern TLS struct thread self;

/* The thread's last communicator when its handle is `h` and its entry is
 * whole (read again after the state: not rewritten meanwhile); else NULL. */
static inline __attribute__((always_inline)) struct mpiq_recorder_comm *last_comm_if(uint64_t h)
{
    struct mpiq_recorder_comm *e = self.last_comm;
    if (e && e->handle == h && __atomic_load_n(&e->state, __ATOMIC_ACQUIRE) == 2 && e->handle == h)
        return e;
    return NULL;
}

/* Counter `*n` up by one; its value before. An atomic read-modify-write
 * (a locked instruction, some 9 ns) only where threads may call MPI at
 * once: at MPI_THREAD_SERIALIZED and below, the program orders its MPI
 * calls itself, and what orders them orders these counts too. */
static inline __attribute__((always_inline)) uint64_t count_up(uint64_t *n)
{
    if (M.concurrent)
        return __atomic_fetch_add(n, 1, __ATOMIC_RELAXED);
    uint64_t v = __atomic_load_n(n, __ATOMIC_RELAXED);
    __atomic_store_n(n, v + 1, __ATOMIC_RELAXED);
    return v;
}

/* The sizes of Open MPI's predefined datatypes, asked of the MPI once
 * each (recorder.c's size_of()): an entry is written once (state 0 free,
 * 1 being written, 2 written) and never changes, as the datatype it is of
 * is never freed. */
struct type_size {
    uint64_t handle;
    int32_t size;
    uint32_t state;
};
#define TYPE_SIZES 128u
extern struct type_size type_sizes[TYPE_SIZES];

static inline uint32_t type_slot(uint64_t h)
{
    return (uint32_t)((h * 0x9E3779B97F4A7C15ull) >> 57); /* 0-127 */
}

/* The size of datatype `type` where it is known without asking the MPI:
 * MPICH's predefined datatypes carry it in the handle (kind builtin, 01 in
 * bits 31-30; object datatype, 0011 in bits 29-26; the size in bits 15-8:
 * mpir_objects.h, MPIR_Datatype_get_basic_size); Open MPI's, once asked,
 * are in type_sizes. 0 when not known so. */
static inline int size_known(H type, int32_t *size)
{
    uint64_t h = value(type);
    if (M.flavour == MPIQ_FLAVOUR_MPICH) {
        if ((h & 0xfc000000u) != 0x4c000000u)
            return 0;
        *size = (int32_t)((h >> 8) & 0xffu);
        return 1;
    }
    const struct type_size *e = &type_sizes[type_slot(h)];
    if (__atomic_load_n(&e->state, __ATOMIC_ACQUIRE) != 2 || e->handle != h)
        return 0;
    *size = e->size;
    return 1;
}

/* `first` at `at` and `second` after it, in one store. */
static inline void store_pair(void *at, int32_t first, int32_t second)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t v = (uint64_t)(uint32_t)first | (uint64_t)(uint32_t)second << 32;
#else
    uint64_t v = (uint64_t)(uint32_t)first << 32 | (uint64_t)(uint32_t)second;
#endif
    __builtin_memcpy(at, &v, sizeof v);
}

/* The record `i` (the `i`th call, from 0) written but for its number and
 * start: `type_size` and `tid` known, `coll` the communicator whose
 * collective this is (NULL: none). Not published. */
static inline __attribute__((always_inline)) struct call fill(uint64_t i, int what, H comm, int32_t peer, int32_t tag,
                                                              int64_t count, int32_t type_size, uint32_t tid,
                                                              struct mpiq_recorder_comm *coll)
{
    struct mpiq_recorder_call_record *r = &R.calls[i % MPIQ_RECORDER_CALLS];
    /* In a register from here on: the compiler would work the address out
     * again for each field. */
    __asm__("" : "+r"(r));
    __atomic_store_n(&r->seq, 0, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    r->start_ns = 0;
    r->end_ns = 0;
    r->comm = comm == NO_COMM ? 0 : value(comm);
    r->request = 0;
    r->coll_seq = coll ? count_up(&coll->collectives) + 1 : 0;
    int32_t n = count > INT32_MAX ? INT32_MAX : count < INT32_MIN ? INT32_MIN : (int32_t)count;
    /* Two fields a store (they are pairs of 4 bytes at 8-byte offsets). */
    store_pair(&r->call, what, peer);
    store_pair(&r->tag, tag, n);
    store_pair(&r->type_size, type_size, (int32_t)tid);
    store_pair(&r->peer2, MPIQ_PEER_NONE, MPIQ_TAG_NONE);
    store_pair(&r->requests_active, 0, 0);
    /* The next record's lines asked for now, to be written: they arrive
     * while the MPI works, not when the next call waits for them (the
     * ring's lines are long out of the cache by the time it comes round). */
    const char *next = (const char *)&R.calls[(i + 1) % MPIQ_RECORDER_CALLS];
    __builtin_prefetch(next, 1, 3);
    __builtin_prefetch(next + sizeof *r - 1, 1, 3);
    return (struct call){r, i + 1};
}

/* Record `c` readable (its number), then its start: a thread stopped in
 * the clock read is seen in its call, with its arguments, not between two
 * calls. */
static inline void publish(struct call c)
{
    if (c.r) {
        __atomic_store_n(&c.r->seq, c.seq, __ATOMIC_RELEASE);
        __atomic_store_n(&c.r->start_ns, now_ns(), __ATOMIC_RELAXED);
    }
}

/* The record of a call begun, published. Inline, and without a call of
 * its own but the clock's, where everything it needs is at hand: the
 * thread's id, the communicator that of the thread's last call, the
 * datatype's size known without asking (size_known()). Anything else (a
 * first call, another communicator, a size to ask the MPI for) goes to
 * begin_slow(). */
static inline __attribute__((always_inline)) struct call begin(int what, H comm, int32_t peer, int32_t tag,
                                                               int64_t count, H type, int collective)
{
#ifdef MPIQ_RECORDER_PASS_THROUGH
    /* mpiq-bench's control build: every wrapper, and no record (what
     * standing between the program and its MPI costs alone). */
    (void)what, (void)comm, (void)peer, (void)tag, (void)count, (void)type, (void)collective;
    return (struct call){NULL, 0};
#endif
    uint32_t tid = self.id;
    struct mpiq_recorder_comm *e = NULL;
    int32_t size = -1;
    if (__builtin_expect(!__atomic_load_n(&armed, __ATOMIC_ACQUIRE) || tid == 0, 0))
        goto slow;
    if (__builtin_expect(comm != NO_COMM, 1)) {
        e = last_comm_if(value(comm));
        if (__builtin_expect(!e, 0))
            goto slow;
    }
    if (__builtin_expect(type != NO_TYPE, 1) && __builtin_expect(!size_known(type, &size), 0))
        goto slow;
    {
        struct call c = fill(count_up(&R.h.calls_started), what, comm, peer, tag, count, size, tid,
                             collective ? e : NULL);
        publish(c);
        return c;
    }
slow:
    return begin_slow(what, comm, peer, tag, count, type, collective);
}

#pragma GCC visibility pop

#endif /* MPIQ_RECORDER_INTERNAL_H */
