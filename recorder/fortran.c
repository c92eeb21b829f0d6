/*
 * fortran.c - the recorder's Fortran entry points: mpi_x_ (gfortran's
 * names; mpi_x__, mpi_x and MPI_X, other compilers' manglings, are aliases)
 * for the calls calls.c records, as programs that use mpif.h or `use mpi`
 * call them. (`use mpi_f08` calls other names: not recorded.)
 *
 * Why they are needed: a Fortran call goes to the MPI's Fortran library
 * (Open MPI's libmpi_mpifh, MPICH's libmpifort), which converts the
 * arguments and calls the C layer. Open MPI's calls PMPI_X: the C wrappers
 * never see a Fortran call. MPICH's calls MPI_X, the C name (MPICH 4.0.2's
 * pmpi_send_ calls MPI_Send@plt), which resolves to this library: there the
 * C wrapper records the call, and recording it here as well would make two
 * records of one call.
 *
 * Design: each mpi_x_ here passes the call on, with the program's own
 * arguments, to the MPI's Fortran entry pmpi_x_ (or the MPI's mpi_x_, found
 * with RTLD_NEXT, if it has no profiling names), so statuses, ierror,
 * LOGICALs, MPI_BOTTOM, MPI_IN_PLACE and hidden string lengths stay the
 * MPI's business. Whether it also records is decided once per function,
 * from the MPI's library itself: if the object defining that entry imports
 * MPI_X, MPI_X resolves to this library, and the entry is not a separate
 * profiling copy (an MPICH built without weak symbols has a pmpi_x_ that
 * calls PMPI_X beside an mpi_x_ that calls MPI_X), the call will reach the
 * C wrapper, which records it: this one only passes it on. Otherwise (Open
 * MPI, another tool's MPI_X in front of this one) this one records it, with
 * the Fortran handles turned into C handles (PMPI_X_f2c; an int's value in
 * MPICH, whose C handles are its Fortran ones) and through the functions
 * the C wrappers use. The import table is what decides where the MPI's call
 * lands, so this holds without knowing how the MPI was built, and needs no
 * hook in the C wrappers. Without any MPI Fortran library in the process,
 * these functions fail the call with NO_MPI in ierror and touch nothing.
 *
 * A Fortran INTEGER is taken to be a C int (MPI_Fint in every MPI built
 * for the compiler's default integers). MPI_MPROBE and MPI_MRECV are passed
 * on unrecorded here: the peer and tag of a matched receive live in calls.c's
 * per-thread table of probes.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "internal.h"

typedef int F;

/* ---- the MPI's Fortran entries ---------------------------------------- */

enum { UNKNOWN, RECORD, PASS, NOTHING };

struct next {
    const char *pmpi, *mpi, *c; /* pmpi_x_, mpi_x_, MPI_X */
    void *fn;                   /* what the call is passed on to */
    int mode;
};

struct wanted {
    const char *name;
    void *p;
};

/* In an object loaded without RTLD_GLOBAL (a Python extension module and
 * the MPI it links), where dlsym(RTLD_DEFAULT) does not look. */
static int defining(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct wanted *w = data;
    if (!info->dlpi_name || !info->dlpi_name[0])
        return 0;
    void *h = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
        return 0;
    w->p = dlsym(h, w->name);
    if (w->p)
        return 1; /* the handle stays open: the object cannot go away under us */
    dlclose(h);
    return 0;
}

static void *lookup(const char *name)
{
    struct wanted w = {name, dlsym(RTLD_DEFAULT, name)};
    if (!w.p)
        dl_iterate_phdr(defining, &w);
    return w.p;
}

/* A pointer of a dynamic section: glibc relocates them in place, unless the
 * section is read-only; an offset is below the object's base. */
static const void *dyn_ptr(const struct link_map *lm, ElfW(Addr) v)
{
    return (const void *)(v < lm->l_addr ? v + lm->l_addr : v);
}

/* Symbols in the dynamic symbol table: DT_HASH says; with DT_GNU_HASH
 * only, the end of the last hash chain is the last symbol. */
static uint32_t symbols(const uint32_t *hash, const uint32_t *gnu)
{
    if (hash)
        return hash[1];
    if (!gnu)
        return 0;
    uint32_t nbuckets = gnu[0], symoffset = gnu[1], bloom = gnu[2];
    const uint32_t *buckets = (const uint32_t *)((const ElfW(Addr) *)(gnu + 4) + bloom);
    const uint32_t *chain = buckets + nbuckets;
    uint32_t last = 0;
    for (uint32_t b = 0; b < nbuckets; b++)
        if (buckets[b] > last)
            last = buckets[b];
    if (last < symoffset)
        return symoffset;
    while (!(chain[last - symoffset] & 1))
        last++;
    return last + 1;
}

/* Whether the MPI's entry `fn`, in the object `lm`, calls the C name
 * n->c through the dynamic linker. */
static int imports_c_name(const struct link_map *lm, const struct next *n, const void *fn)
{
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const uint32_t *hash = NULL, *gnu = NULL;
    for (const ElfW(Dyn) *d = lm->l_ld; d && d->d_tag != DT_NULL; d++) {
        if (d->d_tag == DT_SYMTAB)
            symtab = dyn_ptr(lm, d->d_un.d_ptr);
        else if (d->d_tag == DT_STRTAB)
            strtab = dyn_ptr(lm, d->d_un.d_ptr);
        else if (d->d_tag == DT_HASH)
            hash = dyn_ptr(lm, d->d_un.d_ptr);
        else if (d->d_tag == DT_GNU_HASH)
            gnu = dyn_ptr(lm, d->d_un.d_ptr);
    }
    if (!symtab || !strtab)
        return 0;
    int imports = 0;
    const void *own_mpi = NULL;
    uint32_t count = symbols(hash, gnu);
    for (uint32_t i = 1; i < count; i++) {
        const ElfW(Sym) *s = &symtab[i];
        const char *name = strtab + s->st_name;
        if (s->st_shndx == SHN_UNDEF)
            imports |= strcmp(name, n->c) == 0;
        else if (strcmp(name, n->mpi) == 0)
            own_mpi = (const void *)(lm->l_addr + s->st_value);
    }
    /* A pmpi_x_ apart from the object's mpi_x_ is a profiling copy, which
     * calls PMPI_X. */
    return imports && (!own_mpi || own_mpi == fn);
}

/* Whether the MPI's entry `fn` ends in this library's C wrapper. */
static int reaches_c_wrapper(const void *fn, const struct next *n)
{
    Dl_info self, c_name, there;
    struct link_map *lm = NULL;
    void *c = dlsym(RTLD_DEFAULT, n->c);
    if (!c || !dladdr(c, &c_name) || !dladdr((const void *)&reaches_c_wrapper, &self) ||
        c_name.dli_fbase != self.dli_fbase)
        return 0;
    if (!dladdr1(fn, &there, (void **)&lm, RTLD_DL_LINKMAP) || !lm)
        return 0;
    return imports_c_name(lm, n, fn);
}

/* Finds n's entry, once; a race computes the same answer twice. */
static int mode(struct next *n)
{
    int m = __atomic_load_n(&n->mode, __ATOMIC_ACQUIRE);
    if (m != UNKNOWN)
        return m;
    void *fn = lookup(n->pmpi);
    if (!fn)
        fn = dlsym(RTLD_NEXT, n->mpi);
    m = !fn ? NOTHING : reaches_c_wrapper(fn, n) ? PASS : RECORD;
    __atomic_store_n(&n->fn, fn, __ATOMIC_RELAXED);
    __atomic_store_n(&n->mode, m, __ATOMIC_RELEASE);
    return m;
}

/* ---- handles ---------------------------------------------------------- */

static struct {
    int narrow; /* C handles are ints (MPICH) */
    H (*comm)(F), (*type)(F), (*request)(F);
} C;

/* Once the MPI is up: its C handles' width and its conversions. */
static void conversions(void)
{
    static int done;
    if (__atomic_load_n(&done, __ATOMIC_ACQUIRE))
        return;
    C.narrow = lookup("ompi_mpi_comm_world") == NULL;
    C.comm = (H(*)(F))lookup("PMPI_Comm_f2c");
    C.type = (H(*)(F))lookup("PMPI_Type_f2c");
    C.request = (H(*)(F))lookup("PMPI_Request_f2c");
    __atomic_store_n(&done, 1, __ATOMIC_RELEASE);
}

/* The C handle of a Fortran one. An int-returning f2c leaves the high half
 * of the register undefined. */
static H to_c(H (*f2c)(F), F f)
{
    H h = f2c ? f2c(f) : (H)(uint32_t)f;
    return C.narrow ? (H)(uint32_t)h : h;
}

#define COMM(f) to_c(C.comm, f)
#define TYPE(f) to_c(C.type, f)
#define REQUEST(f) to_c(C.request, f)

/* Element i of an array of C handles, as load() reads it. */
static void put(void *a, size_t i, H h)
{
    if (C.narrow)
        ((uint32_t *)a)[i] = (uint32_t)h;
    else
        ((uint64_t *)a)[i] = (uint64_t)h;
}

/* A C handle's value in the tables. */
static uint64_t value_of(H h)
{
    return C.narrow ? (uint32_t)h : (uint64_t)h;
}

/* The requests of a wait, test or start call as C handles. begin_wait()
 * reads at most recorder.c's TRACKED of them, the 1024 of mpiq_recorder.h:
 * this buffer must be as long. */
#define FTRACKED 1024
static __thread uint64_t requests[FTRACKED];
static __thread int indices[FTRACKED];

static int requests_to_c(int n, const F *reqs)
{
    if (n > FTRACKED)
        n = FTRACKED;
    for (int i = 0; i < n; i++)
        put(requests, (size_t)i, REQUEST(reqs[i]));
    return n < 0 ? 0 : n;
}

/* ---- recording -------------------------------------------------------- */

/* Whether this wrapper records its call (ready(): a program whose
 * MPI_Init this library did not see starts recording here). */
static int records(struct next *n)
{
    if (mode(n) != RECORD || !on() || !recording())
        return 0;
    conversions();
    return 1;
}

/* The request the MPI gave at `req`, started by call `c`. */
static void started(struct call c, const F *req, void (*add)(struct call, const void *))
{
    uint64_t h = 0;
    put(&h, 0, REQUEST(*req));
    add(c, &h);
}

/* A wait or test call given `n` requests; `*tracked` for waited(). */
static struct call wait_begin(int what, int n, const F *reqs, int *tracked)
{
    requests_to_c(n, reqs);
    return begin_wait(what, n, requests, tracked);
}

/* After it: `done` (ALL_DONE, or how many of `which`, Fortran's 1-based
 * indices) completed; the handles the MPI freed read MPI_REQUEST_NULL,
 * whose C handle f2c gives. */
static void waited(int tracked, const F *reqs, int done, const F *which)
{
    requests_to_c(tracked, reqs);
    int k = 0;
    for (int j = 0; j < done; j++)
        if (which[j] >= 1 && which[j] <= tracked)
            indices[k++] = which[j] - 1;
    completed(tracked, requests, done == ALL_DONE ? ALL_DONE : k, indices);
}

/* ---- the entry points ------------------------------------------------- */

/* Declares mpi_x_ with its aliases and the MPI's entry, and opens its
 * definition. */
#define FORTRAN(x, X, c_name, params)                                                    \
    typedef void x##_fn params;                                                          \
    static struct next next_##x = {"pmpi_" #x "_", "mpi_" #x "_", c_name, NULL, UNKNOWN}; \
    EXPORT void mpi_##x##_ params;                                                       \
    EXPORT void mpi_##x##__ params __attribute__((alias("mpi_" #x "_")));                \
    EXPORT void mpi_##x params __attribute__((alias("mpi_" #x "_")));                    \
    EXPORT void MPI_##X params __attribute__((alias("mpi_" #x "_")));                    \
    EXPORT void mpi_##x##_ params

/* The start of a body: `f`, the MPI's entry; unless this wrapper records,
 * the call is passed on (or fails, with no MPI) and the wrapper returns.
 * A NULL ierror is the program's mistake, but the result must be read. */
#define ENTER(x, args)                                                \
    F ierr_;                                                          \
    if (!ierr)                                                        \
        ierr = &ierr_;                                                \
    int mine_ = records(&next_##x);                                   \
    x##_fn *f = (x##_fn *)__atomic_load_n(&next_##x.fn, __ATOMIC_RELAXED); \
    if (!f) {                                                         \
        *ierr = NO_MPI;                                               \
        return;                                                       \
    }                                                                 \
    if (!mine_) {                                                     \
        f args;                                                       \
        return;                                                       \
    }

#define OK (*ierr == 0)

/* ---- start and end ---- */

/* Not through ENTER: ready() must not look before the MPI is up, or it
 * would decide that the program never initialized it. */
static void init_recorded(uint64_t start)
{
    if (!on() || !recording())
        return;
    struct call c = begin(MPIQ_CALL_INIT, NO_COMM, NONE, 0, NO_TYPE, P2P);
    if (c.r)
        c.r->start_ns = start;
    end(c);
}

#define INIT_ENTER(x, args)                                           \
    F ierr_;                                                          \
    if (!ierr)                                                        \
        ierr = &ierr_;                                                \
    int mode_ = mode(&next_##x);                                      \
    x##_fn *f = (x##_fn *)__atomic_load_n(&next_##x.fn, __ATOMIC_RELAXED); \
    if (!f) {                                                         \
        *ierr = NO_MPI;                                               \
        return;                                                       \
    }                                                                 \
    if (mode_ != RECORD) {                                            \
        f args;                                                       \
        return;                                                       \
    }                                                                 \
    uint64_t start_ = now_ns();

FORTRAN(init, INIT, "MPI_Init", (F *ierr))
{
    INIT_ENTER(init, (ierr));
    f(ierr);
    if (OK)
        init_recorded(start_);
}

FORTRAN(init_thread, INIT_THREAD, "MPI_Init_thread", (F *required, F *provided, F *ierr))
{
    INIT_ENTER(init_thread, (required, provided, ierr));
    f(required, provided, ierr);
    if (OK)
        init_recorded(start_);
}

FORTRAN(finalize, FINALIZE, "MPI_Finalize", (F *ierr))
{
    ENTER(finalize, (ierr));
    struct call c = begin(MPIQ_CALL_FINALIZE, NO_COMM, NONE, 0, NO_TYPE, P2P);
    f(ierr);
    end(c);
}

/* ---- point to point ---- */

#define SEND_PARAMS (void *buf, F *count, F *type, F *dest, F *tag, F *comm, F *ierr)
#define SEND_ARGS (buf, count, type, dest, tag, comm, ierr)
#define BLOCKING_SEND(x, X, c_name, ID)                                                          \
    FORTRAN(x, X, c_name, SEND_PARAMS)                                                           \
    {                                                                                            \
        ENTER(x, SEND_ARGS);                                                                     \
        struct call c = begin(ID, COMM(*comm), peer_of(*dest), *tag, *count, TYPE(*type), P2P);  \
        f SEND_ARGS;                                                                             \
        end(c);                                                                                  \
    }

BLOCKING_SEND(send, SEND, "MPI_Send", MPIQ_CALL_SEND)
BLOCKING_SEND(ssend, SSEND, "MPI_Ssend", MPIQ_CALL_SSEND)
BLOCKING_SEND(bsend, BSEND, "MPI_Bsend", MPIQ_CALL_BSEND)
BLOCKING_SEND(rsend, RSEND, "MPI_Rsend", MPIQ_CALL_RSEND)

#define REQ_PARAMS (void *buf, F *count, F *type, F *peer, F *tag, F *comm, F *req, F *ierr)
#define REQ_ARGS (buf, count, type, peer, tag, comm, req, ierr)
/* A call that makes a request: nonblocking (pending_add) or persistent
 * (persistent_add). */
#define MAKES_REQUEST(x, X, c_name, ID, TAG, ADD)                                                   \
    FORTRAN(x, X, c_name, REQ_PARAMS)                                                               \
    {                                                                                               \
        ENTER(x, REQ_ARGS);                                                                         \
        struct call c = begin(ID, COMM(*comm), peer_of(*peer), TAG(*tag), *count, TYPE(*type), P2P); \
        f REQ_ARGS;                                                                                 \
        if (OK)                                                                                     \
            started(c, req, ADD);                                                                   \
        end(c);                                                                                     \
    }
#define SEND_TAG(t) (t)

MAKES_REQUEST(isend, ISEND, "MPI_Isend", MPIQ_CALL_ISEND, SEND_TAG, pending_add)
MAKES_REQUEST(issend, ISSEND, "MPI_Issend", MPIQ_CALL_ISSEND, SEND_TAG, pending_add)
MAKES_REQUEST(ibsend, IBSEND, "MPI_Ibsend", MPIQ_CALL_IBSEND, SEND_TAG, pending_add)
MAKES_REQUEST(irsend, IRSEND, "MPI_Irsend", MPIQ_CALL_IRSEND, SEND_TAG, pending_add)
MAKES_REQUEST(irecv, IRECV, "MPI_Irecv", MPIQ_CALL_IRECV, tag_of, pending_add)
MAKES_REQUEST(send_init, SEND_INIT, "MPI_Send_init", MPIQ_CALL_SEND_INIT, SEND_TAG, persistent_add)
MAKES_REQUEST(ssend_init, SSEND_INIT, "MPI_Ssend_init", MPIQ_CALL_SSEND_INIT, SEND_TAG, persistent_add)
MAKES_REQUEST(bsend_init, BSEND_INIT, "MPI_Bsend_init", MPIQ_CALL_BSEND_INIT, SEND_TAG, persistent_add)
MAKES_REQUEST(rsend_init, RSEND_INIT, "MPI_Rsend_init", MPIQ_CALL_RSEND_INIT, SEND_TAG, persistent_add)
MAKES_REQUEST(recv_init, RECV_INIT, "MPI_Recv_init", MPIQ_CALL_RECV_INIT, tag_of, persistent_add)

FORTRAN(recv, RECV, "MPI_Recv", (void *buf, F *count, F *type, F *source, F *tag, F *comm, F *status, F *ierr))
{
    ENTER(recv, (buf, count, type, source, tag, comm, status, ierr));
    struct call c = begin(MPIQ_CALL_RECV, COMM(*comm), peer_of(*source), tag_of(*tag), *count, TYPE(*type), P2P);
    f(buf, count, type, source, tag, comm, status, ierr);
    end(c);
}

FORTRAN(sendrecv, SENDRECV, "MPI_Sendrecv",
        (void *sendbuf, F *sendcount, F *sendtype, F *dest, F *sendtag, void *recvbuf, F *recvcount, F *recvtype,
         F *source, F *recvtag, F *comm, F *status, F *ierr))
{
    ENTER(sendrecv, (sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag,
                     comm, status, ierr));
    struct call c =
        begin(MPIQ_CALL_SENDRECV, COMM(*comm), peer_of(*dest), *sendtag, *sendcount, TYPE(*sendtype), P2P);
    if (c.r) {
        c.r->peer2 = peer_of(*source);
        c.r->tag2 = tag_of(*recvtag);
    }
    f(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag, comm, status,
      ierr);
    end(c);
}

FORTRAN(sendrecv_replace, SENDRECV_REPLACE, "MPI_Sendrecv_replace",
        (void *buf, F *count, F *type, F *dest, F *sendtag, F *source, F *recvtag, F *comm, F *status, F *ierr))
{
    ENTER(sendrecv_replace, (buf, count, type, dest, sendtag, source, recvtag, comm, status, ierr));
    struct call c =
        begin(MPIQ_CALL_SENDRECV_REPLACE, COMM(*comm), peer_of(*dest), *sendtag, *count, TYPE(*type), P2P);
    if (c.r) {
        c.r->peer2 = peer_of(*source);
        c.r->tag2 = tag_of(*recvtag);
    }
    f(buf, count, type, dest, sendtag, source, recvtag, comm, status, ierr);
    end(c);
}

FORTRAN(probe, PROBE, "MPI_Probe", (F *source, F *tag, F *comm, F *status, F *ierr))
{
    ENTER(probe, (source, tag, comm, status, ierr));
    struct call c = begin(MPIQ_CALL_PROBE, COMM(*comm), peer_of(*source), tag_of(*tag), 0, NO_TYPE, P2P);
    f(source, tag, comm, status, ierr);
    end(c);
}

FORTRAN(iprobe, IPROBE, "MPI_Iprobe", (F *source, F *tag, F *comm, F *flag, F *status, F *ierr))
{
    ENTER(iprobe, (source, tag, comm, flag, status, ierr));
    struct call c = begin(MPIQ_CALL_IPROBE, COMM(*comm), peer_of(*source), tag_of(*tag), 0, NO_TYPE, P2P);
    f(source, tag, comm, flag, status, ierr);
    end(c);
}

/* ---- persistent requests started ---- */

/* Each chunk of requests_to_c()'s size: MPI_Startall starts them all. */
static void activated(struct call c, int n, const F *reqs)
{
    for (int i = 0; i < n; i += FTRACKED) {
        int k = requests_to_c(n - i, reqs + i);
        activate(c, k, requests);
    }
}

FORTRAN(start, START, "MPI_Start", (F *req, F *ierr))
{
    ENTER(start, (req, ierr));
    requests_to_c(1, req);
    struct call c = begin_start(MPIQ_CALL_START, 1, requests);
    f(req, ierr);
    if (OK)
        activated(c, 1, req);
    end(c);
}

FORTRAN(startall, STARTALL, "MPI_Startall", (F *count, F *reqs, F *ierr))
{
    ENTER(startall, (count, reqs, ierr));
    requests_to_c(*count, reqs);
    struct call c = begin_start(MPIQ_CALL_STARTALL, *count, requests);
    f(count, reqs, ierr);
    if (OK)
        activated(c, *count, reqs);
    end(c);
}

/* ---- completion ---- */

/* Their outputs say which requests completed, read only when the call
 * succeeded (as calls.c's): an index or a list is not set otherwise. A
 * Fortran LOGICAL is false as 0, whatever the compiler's true. */

FORTRAN(wait, WAIT, "MPI_Wait", (F *req, F *status, F *ierr))
{
    ENTER(wait, (req, status, ierr));
    int n;
    struct call c = wait_begin(MPIQ_CALL_WAIT, 1, req, &n);
    f(req, status, ierr);
    waited(n, req, OK ? ALL_DONE : 0, NULL);
    end(c);
}

FORTRAN(test, TEST, "MPI_Test", (F *req, F *flag, F *status, F *ierr))
{
    ENTER(test, (req, flag, status, ierr));
    int n;
    struct call c = wait_begin(MPIQ_CALL_TEST, 1, req, &n);
    f(req, flag, status, ierr);
    waited(n, req, OK && *flag ? ALL_DONE : 0, NULL);
    end(c);
}

FORTRAN(waitall, WAITALL, "MPI_Waitall", (F *count, F *reqs, F *statuses, F *ierr))
{
    ENTER(waitall, (count, reqs, statuses, ierr));
    int n;
    struct call c = wait_begin(MPIQ_CALL_WAITALL, *count, reqs, &n);
    f(count, reqs, statuses, ierr);
    waited(n, reqs, OK ? ALL_DONE : 0, NULL);
    end(c);
}

FORTRAN(waitany, WAITANY, "MPI_Waitany", (F *count, F *reqs, F *index, F *status, F *ierr))
{
    ENTER(waitany, (count, reqs, index, status, ierr));
    int n;
    struct call c = wait_begin(MPIQ_CALL_WAITANY, *count, reqs, &n);
    f(count, reqs, index, status, ierr);
    waited(n, reqs, OK ? 1 : 0, index);
    end(c);
}

FORTRAN(waitsome, WAITSOME, "MPI_Waitsome", (F *count, F *reqs, F *outcount, F *which, F *statuses, F *ierr))
{
    ENTER(waitsome, (count, reqs, outcount, which, statuses, ierr));
    int n;
    struct call c = wait_begin(MPIQ_CALL_WAITSOME, *count, reqs, &n);
    f(count, reqs, outcount, which, statuses, ierr);
    waited(n, reqs, OK ? *outcount : 0, which);
    end(c);
}

FORTRAN(testall, TESTALL, "MPI_Testall", (F *count, F *reqs, F *flag, F *statuses, F *ierr))
{
    ENTER(testall, (count, reqs, flag, statuses, ierr));
    int n;
    struct call c = wait_begin(MPIQ_CALL_TESTALL, *count, reqs, &n);
    f(count, reqs, flag, statuses, ierr);
    waited(n, reqs, OK && *flag ? ALL_DONE : 0, NULL);
    end(c);
}

FORTRAN(testany, TESTANY, "MPI_Testany", (F *count, F *reqs, F *index, F *flag, F *status, F *ierr))
{
    ENTER(testany, (count, reqs, index, flag, status, ierr));
    int n;
    struct call c = wait_begin(MPIQ_CALL_TESTANY, *count, reqs, &n);
    f(count, reqs, index, flag, status, ierr);
    waited(n, reqs, OK && *flag ? 1 : 0, index);
    end(c);
}

FORTRAN(testsome, TESTSOME, "MPI_Testsome", (F *count, F *reqs, F *outcount, F *which, F *statuses, F *ierr))
{
    ENTER(testsome, (count, reqs, outcount, which, statuses, ierr));
    int n;
    struct call c = wait_begin(MPIQ_CALL_TESTSOME, *count, reqs, &n);
    f(count, reqs, outcount, which, statuses, ierr);
    waited(n, reqs, OK ? *outcount : 0, which);
    end(c);
}

FORTRAN(request_free, REQUEST_FREE, "MPI_Request_free", (F *req, F *ierr))
{
    ENTER(request_free, (req, ierr));
    uint64_t h = value_of(REQUEST(*req));
    f(req, ierr);
    if (OK)
        pending_done(h);
}

/* ---- collectives ---- */

FORTRAN(barrier, BARRIER, "MPI_Barrier", (F *comm, F *ierr))
{
    ENTER(barrier, (comm, ierr));
    struct call c = begin(MPIQ_CALL_BARRIER, COMM(*comm), NONE, 0, NO_TYPE, COLLECTIVE);
    f(comm, ierr);
    end(c);
}

FORTRAN(bcast, BCAST, "MPI_Bcast", (void *buf, F *count, F *type, F *root, F *comm, F *ierr))
{
    ENTER(bcast, (buf, count, type, root, comm, ierr));
    struct call c = begin(MPIQ_CALL_BCAST, COMM(*comm), *root, MPIQ_TAG_NONE, *count, TYPE(*type), COLLECTIVE);
    f(buf, count, type, root, comm, ierr);
    end(c);
}

FORTRAN(reduce, REDUCE, "MPI_Reduce",
        (void *sendbuf, void *recvbuf, F *count, F *type, F *op, F *root, F *comm, F *ierr))
{
    ENTER(reduce, (sendbuf, recvbuf, count, type, op, root, comm, ierr));
    struct call c = begin(MPIQ_CALL_REDUCE, COMM(*comm), *root, MPIQ_TAG_NONE, *count, TYPE(*type), COLLECTIVE);
    f(sendbuf, recvbuf, count, type, op, root, comm, ierr);
    end(c);
}

FORTRAN(allreduce, ALLREDUCE, "MPI_Allreduce", (void *sendbuf, void *recvbuf, F *count, F *type, F *op, F *comm, F *ierr))
{
    ENTER(allreduce, (sendbuf, recvbuf, count, type, op, comm, ierr));
    struct call c = begin(MPIQ_CALL_ALLREDUCE, COMM(*comm), NONE, *count, TYPE(*type), COLLECTIVE);
    f(sendbuf, recvbuf, count, type, op, comm, ierr);
    end(c);
}

#define ROOTED_PARAMS                                                                                      \
    (void *sendbuf, F *sendcount, F *sendtype, void *recvbuf, F *recvcount, F *recvtype, F *root, F *comm, \
     F *ierr)
#define ROOTED_ARGS (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, ierr)
#define ALL_PARAMS \
    (void *sendbuf, F *sendcount, F *sendtype, void *recvbuf, F *recvcount, F *recvtype, F *comm, F *ierr)
#define ALL_ARGS (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, ierr)

FORTRAN(gather, GATHER, "MPI_Gather", ROOTED_PARAMS)
{
    ENTER(gather, ROOTED_ARGS);
    struct call c =
        begin(MPIQ_CALL_GATHER, COMM(*comm), *root, MPIQ_TAG_NONE, *sendcount, TYPE(*sendtype), COLLECTIVE);
    f ROOTED_ARGS;
    end(c);
}

FORTRAN(scatter, SCATTER, "MPI_Scatter", ROOTED_PARAMS)
{
    ENTER(scatter, ROOTED_ARGS);
    struct call c =
        begin(MPIQ_CALL_SCATTER, COMM(*comm), *root, MPIQ_TAG_NONE, *recvcount, TYPE(*recvtype), COLLECTIVE);
    f ROOTED_ARGS;
    end(c);
}

FORTRAN(allgather, ALLGATHER, "MPI_Allgather", ALL_PARAMS)
{
    ENTER(allgather, ALL_ARGS);
    struct call c = begin(MPIQ_CALL_ALLGATHER, COMM(*comm), NONE, *sendcount, TYPE(*sendtype), COLLECTIVE);
    f ALL_ARGS;
    end(c);
}

FORTRAN(alltoall, ALLTOALL, "MPI_Alltoall", ALL_PARAMS)
{
    ENTER(alltoall, ALL_ARGS);
    struct call c = begin(MPIQ_CALL_ALLTOALL, COMM(*comm), NONE, *sendcount, TYPE(*sendtype), COLLECTIVE);
    f ALL_ARGS;
    end(c);
}

FORTRAN(ibarrier, IBARRIER, "MPI_Ibarrier", (F *comm, F *req, F *ierr))
{
    ENTER(ibarrier, (comm, req, ierr));
    struct call c = begin(MPIQ_CALL_IBARRIER, COMM(*comm), NONE, 0, NO_TYPE, COLLECTIVE);
    f(comm, req, ierr);
    if (OK)
        started(c, req, pending_add);
    end(c);
}

FORTRAN(ibcast, IBCAST, "MPI_Ibcast", (void *buf, F *count, F *type, F *root, F *comm, F *req, F *ierr))
{
    ENTER(ibcast, (buf, count, type, root, comm, req, ierr));
    struct call c = begin(MPIQ_CALL_IBCAST, COMM(*comm), *root, MPIQ_TAG_NONE, *count, TYPE(*type), COLLECTIVE);
    f(buf, count, type, root, comm, req, ierr);
    if (OK)
        started(c, req, pending_add);
    end(c);
}

FORTRAN(iallreduce, IALLREDUCE, "MPI_Iallreduce",
        (void *sendbuf, void *recvbuf, F *count, F *type, F *op, F *comm, F *req, F *ierr))
{
    ENTER(iallreduce, (sendbuf, recvbuf, count, type, op, comm, req, ierr));
    struct call c = begin(MPIQ_CALL_IALLREDUCE, COMM(*comm), NONE, *count, TYPE(*type), COLLECTIVE);
    f(sendbuf, recvbuf, count, type, op, comm, req, ierr);
    if (OK)
        started(c, req, pending_add);
    end(c);
}

/* ---- communicators ---- */

FORTRAN(comm_dup, COMM_DUP, "MPI_Comm_dup", (F *comm, F *newcomm, F *ierr))
{
    ENTER(comm_dup, (comm, newcomm, ierr));
    struct call c = begin(MPIQ_CALL_COMM_DUP, COMM(*comm), NONE, 0, NO_TYPE, COLLECTIVE);
    f(comm, newcomm, ierr);
    if (OK)
        comm_entry(COMM(*newcomm));
    end(c);
}

FORTRAN(comm_split, COMM_SPLIT, "MPI_Comm_split", (F *comm, F *color, F *key, F *newcomm, F *ierr))
{
    ENTER(comm_split, (comm, color, key, newcomm, ierr));
    struct call c = begin(MPIQ_CALL_COMM_SPLIT, COMM(*comm), NONE, 0, NO_TYPE, COLLECTIVE);
    f(comm, color, key, newcomm, ierr);
    if (OK)
        comm_entry(COMM(*newcomm));
    end(c);
}

FORTRAN(comm_create, COMM_CREATE, "MPI_Comm_create", (F *comm, F *group, F *newcomm, F *ierr))
{
    ENTER(comm_create, (comm, group, newcomm, ierr));
    struct call c = begin(MPIQ_CALL_COMM_CREATE, COMM(*comm), NONE, 0, NO_TYPE, COLLECTIVE);
    f(comm, group, newcomm, ierr);
    if (OK)
        comm_entry(COMM(*newcomm));
    end(c);
}

FORTRAN(comm_free, COMM_FREE, "MPI_Comm_free", (F *comm, F *ierr))
{
    ENTER(comm_free, (comm, ierr));
    H h = COMM(*comm);
    struct call c = begin(MPIQ_CALL_COMM_FREE, h, NONE, 0, NO_TYPE, P2P);
    f(comm, ierr);
    if (OK)
        comm_forget(value_of(h));
    end(c);
}
