/*
 * recorder.c - mpiq's MPI flight recorder: every MPI call a process
 * makes, kept in a ring in its own memory, with the nonblocking requests
 * still pending and a collective counter per communicator, for mpiq to read
 * from outside (a stopped process, a core file). The layout is
 * mpiq_recorder.h's.
 *
 * One library for every MPI of the two ABIs: Open MPI's (handles are
 * pointers to its predefined objects) and MPICH's (handles are ints: MPICH,
 * Intel MPI, MVAPICH, Cray MPICH). It includes no mpi.h: handles travel as
 * words (an int in the low half of a register is what MPICH reads), the
 * predefined handles and constants are the MPI's own, looked up when the
 * first call comes (`ompi_mpi_comm_world` tells Open MPI, `MPIR_Err_create_code`
 * MPICH), and the PMPI_X functions are found in the process, also in a
 * libmpi that Python loaded without RTLD_GLOBAL. Put in front of the MPI
 * with LD_PRELOAD (`mpiq run` does it) or linked before it: its MPI_X
 * functions record and call PMPI_X. C programs and mpi4py (which calls the
 * C functions) are recorded as they are.
 *
 * On the hot path: no lock (an atomic increment claims a record), no I/O,
 * no allocation (every table is static: MPIQ_RECORDER_* give their sizes,
 * about 940 KiB in all, in .bss: only the pages written count). A new
 * communicator is looked up once, with MPI's own group calls.
 *
 *   cc -shared -fPIC -O2 -o libmpiq_recorder.so recorder.c calls.c fortran.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define OFF(field) ((uint32_t)offsetof(struct mpiq_recorder_block, field))

/* All zero until the constructor below writes the header: the tables are
 * in .bss, and a reader finding no magic knows the recorder never started. */
EXPORT struct mpiq_recorder_block mpiq_recorder;
extern struct mpiq_recorder_block recorder_block __attribute__((alias("mpiq_recorder")));

__attribute__((constructor)) static void header(void)
{
    struct mpiq_recorder_header *h = &R.h;
    h->version = MPIQ_RECORDER_VERSION;
    h->header_size = sizeof(struct mpiq_recorder_header);
    h->world_rank = -1;
    h->calls_offset = OFF(calls);
    h->ncalls = MPIQ_RECORDER_CALLS;
    h->call_size = sizeof(struct mpiq_recorder_call_record);
    h->pending_offset = OFF(pending);
    h->npending = MPIQ_RECORDER_PENDING;
    h->pending_size = sizeof(struct mpiq_recorder_pending);
    h->comms_offset = OFF(comms);
    h->ncomms = MPIQ_RECORDER_COMMS;
    h->comm_size = sizeof(struct mpiq_recorder_comm);
    h->world_ranks_offset = OFF(world_ranks);
    h->nworld_ranks = MPIQ_RECORDER_WORLD_RANKS;
    /* The magic last: a reader trusts the rest once it sees it. */
    __atomic_thread_fence(__ATOMIC_RELEASE);
    memcpy(h->magic, MPIQ_RECORDER_MAGIC, sizeof h->magic);
}

/* ---- the MPI underneath ----------------------------------------------- */

/* The clock of the records: CLOCK_MONOTONIC_COARSE, the time of the
 * kernel's last tick (1 to 10 ms old), read from the vDSO's page without
 * reading the hardware's clock: about 9 ns where CLOCK_MONOTONIC takes 42
 * (docs/PERFORMANCE.md), twice a call. A hang is seconds long and the
 * order of calls is their `seq`; MPIQ_RECORDER_CLOCK=precise takes
 * CLOCK_MONOTONIC for calls timed to the nanosecond. Both count from the
 * same origin. */
clockid_t clock_id = CLOCK_MONOTONIC_COARSE;
int (*clock_read)(clockid_t, struct timespec *) = clock_gettime;

struct mpi M;
int armed;

#define DECLARE(name, ret, params) ret(*P_##name) params;
PMPI_FUNCTIONS(DECLARE)

static void *libmpi;

/* The loaded object that defines PMPI_Init, when it is not in the global
 * scope (Python loads extension modules, and their libmpi, RTLD_LOCAL). */
static int find_libmpi(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    if (!info->dlpi_name || !info->dlpi_name[0])
        return 0;
    void *h = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
        return 0;
    if (dlsym(h, "PMPI_Init")) {
        libmpi = h;
        return 1;
    }
    dlclose(h);
    return 0;
}

/* The address range of the loaded object `info` (its PT_LOAD segments). */
static void image_of(struct dl_phdr_info *info, uint64_t *lo, uint64_t *hi)
{
    *lo = UINT64_MAX;
    *hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uint64_t a = (uint64_t)(info->dlpi_addr + ph->p_vaddr);
        if (a < *lo)
            *lo = a;
        if (a + ph->p_memsz > *hi)
            *hi = a + ph->p_memsz;
    }
}

/* M.image_lo/hi: the executable (the first object) and the object that
 * holds `data` (libmpi's PMPI_Type_size). */
static int find_images(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    static int first = 1;
    uint64_t lo, hi, in = (uint64_t)(uintptr_t)data;
    image_of(info, &lo, &hi);
    if (first) {
        first = 0;
        M.image_lo[0] = lo;
        M.image_hi[0] = hi;
    }
    if (in >= lo && in < hi) {
        M.image_lo[1] = lo;
        M.image_hi[1] = hi;
        return 1;
    }
    return 0;
}

/* The global scope first: an executable that names MPI_COMM_WORLD holds
 * the copy of `ompi_mpi_comm_world` that the MPI itself uses (a copy
 * relocation), not libmpi's. This library defines no PMPI_ function. */
static void *sym(const char *name)
{
    void *p = dlsym(RTLD_DEFAULT, name);
    if (!p) {
        if (!libmpi)
            dl_iterate_phdr(find_libmpi, NULL);
        if (libmpi)
            p = dlsym(libmpi, name);
    }
    return p;
}

/* Looks the MPI up, once. Returns whether calls can be passed on. */
static int resolve(void)
{
    static int done;
    if (__atomic_load_n(&done, __ATOMIC_ACQUIRE))
        return P_Init != NULL;
    const char *clock = getenv("MPIQ_RECORDER_CLOCK");
    if (clock && strcmp(clock, "precise") == 0)
        clock_id = CLOCK_MONOTONIC;
    /* The vDSO's clock_gettime, called directly: libc's is a call more,
     * with its checks, twice every call recorded. */
    void *vdso = dlopen("linux-vdso.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (vdso) {
        int (*direct)(clockid_t, struct timespec *) =
            (int (*)(clockid_t, struct timespec *))dlsym(vdso, "__vdso_clock_gettime");
        struct timespec t;
        if (direct && direct(clock_id, &t) == 0)
            clock_read = direct;
    }
#define RESOLVE(name, ret, params) P_##name = (ret(*) params)sym("PMPI_" #name);
    PMPI_FUNCTIONS(RESOLVE)
    void *world = sym("ompi_mpi_comm_world");
    if (world) {
        M.flavour = MPIQ_FLAVOUR_OPEN_MPI;
        M.mask = UINT64_MAX;
        M.width = sizeof(void *);
        M.comm_world = (H)world;
        M.comm_null = (H)sym("ompi_mpi_comm_null");
        M.request_null = (H)sym("ompi_request_null");
        M.request_empty = (H)sym("ompi_request_empty");
        M.datatype_null = (H)sym("ompi_mpi_datatype_null");
        if (P_Type_size)
            dl_iterate_phdr(find_images, (void *)(uintptr_t)P_Type_size);
        M.any_source = -1;
        M.proc_null = -2;
        M.any_tag = -1;
    } else if (sym("MPIR_Err_create_code")) {
        M.flavour = MPIQ_FLAVOUR_MPICH;
        M.mask = UINT32_MAX;
        M.width = sizeof(int);
        M.comm_world = 0x44000000;
        M.comm_null = 0x04000000;
        M.request_null = 0x2c000000;
        M.datatype_null = 0x0c000000;
        M.any_source = -2;
        M.proc_null = -1;
        M.any_tag = -1;
    }
    R.h.flavour = (uint32_t)M.flavour;
    __atomic_store_n(&done, 1, __ATOMIC_RELEASE);
    return P_Init != NULL;
}

/* Whether to record: the MPI is known and started. */
int recording(void)
{
    return __atomic_load_n(&armed, __ATOMIC_ACQUIRE);
}


TLS struct thread self;

static uint32_t tid(void)
{
    if (self.id == 0)
        self.id = (uint32_t)syscall(SYS_gettid);
    return self.id;
}

/* MPI_SOURCE and MPI_TAG of a status the MPI filled in: Open MPI's status
 * starts with them; MPICH's with two ints of count first. 0 when the program
 * passed MPI_STATUS_IGNORE (NULL in Open MPI, 1 in MPICH): no status is
 * that low in memory. */
int status_source_tag(const void *status, int *source, int *tag)
{
    if ((uintptr_t)status < 4096 || M.flavour == 0)
        return 0;
    const int *s = (const int *)status + (M.flavour == MPIQ_FLAVOUR_MPICH ? 2 : 0);
    *source = s[0];
    *tag = s[1];
    return 1;
}

struct type_size type_sizes[TYPE_SIZES];

/* Whether `h` is in the executable's or libmpi's image (Open MPI). */
static int in_images(uint64_t h)
{
    for (int k = 0; k < 2; k++)
        if (h >= M.image_lo[k] && h < M.image_hi[k])
            return 1;
    return 0;
}

static int32_t size_of(H type)
{
    int32_t known;
    uint64_t h = value(type);
    if (h == value(M.datatype_null))
        return -1;
    if (size_known(type, &known))
        return known;
    int size = -1;
    if (P_Type_size(type, &size) != 0)
        return -1;
    /* Kept where its slot is free: another predefined datatype in it is
     * asked for each time. */
    if (M.flavour == MPIQ_FLAVOUR_OPEN_MPI && in_images(h)) {
        struct type_size *e = &type_sizes[type_slot(h)];
        uint32_t free_ = 0;
        if (__atomic_compare_exchange_n(&e->state, &free_, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
            e->handle = h;
            e->size = size;
            __atomic_store_n(&e->state, 2, __ATOMIC_RELEASE);
        }
    }
    return size;
}

/* ---- communicators ---------------------------------------------------- */

static uint32_t comm_slot(uint64_t h)
{
    return (uint32_t)((h * 0x9E3779B97F4A7C15ull) >> 40) % MPIQ_RECORDER_COMMS;
}

/* The world rank of each member of `c` into the shared table; -1 when it
 * does not fit, or for an intercommunicator. */
static int32_t world_map(H c, int size)
{
    int inter = 0;
    if (P_Comm_test_inter(c, &inter) != 0 || inter || size <= 0)
        return -1;
    uint32_t first = __atomic_fetch_add(&R.h.world_ranks_used, (uint32_t)size, __ATOMIC_RELAXED);
    if (first + (uint32_t)size > MPIQ_RECORDER_WORLD_RANKS)
        return -1;
    uint64_t mine_slot = 0, world_slot = 0; /* wide enough for either handle */
    if (P_Comm_group(c, &mine_slot) != 0)
        return -1;
    if (P_Comm_group(M.comm_world, &world_slot) != 0) {
        P_Group_free(&mine_slot);
        return -1;
    }
    H mine = (H)load(&mine_slot, 0), world = (H)load(&world_slot, 0);
    int ok = 1;
    /* Translated in chunks through a small buffer: no allocation. */
    int in[256], out[256];
    for (int i = 0; i < size && ok; i += 256) {
        int n = size - i < 256 ? size - i : 256;
        for (int j = 0; j < n; j++)
            in[j] = i + j;
        ok = P_Group_translate_ranks(mine, n, in, world, out) == 0;
        for (int j = 0; j < n && ok; j++)
            R.world_ranks[first + (uint32_t)(i + j)] = out[j];
    }
    P_Group_free(&mine_slot);
    P_Group_free(&world_slot);
    return ok ? (int32_t)first : -1;
}

/* The record of communicator `c`, made on first sight; NULL when the table
 * is full. */
static struct mpiq_recorder_comm *comm_slow(uint64_t h, H c);

static inline __attribute__((always_inline)) struct mpiq_recorder_comm *comm_fast(H c)
{
    uint64_t h = value(c);
    struct mpiq_recorder_comm *e = last_comm_if(h);
    if (e)
        return e;
    e = comm_slow(h, c);
    if (e)
        self.last_comm = e;
    return e;
}

struct mpiq_recorder_comm *comm_entry(H c)
{
    return comm_fast(c);
}

/* comm_entry() without the last one's shortcut. */
static __attribute__((noinline)) struct mpiq_recorder_comm *comm_slow(uint64_t h, H c)
{
    if (h == value(M.comm_null))
        return NULL;
    uint32_t s = comm_slot(h);
    for (uint32_t k = 0; k < MPIQ_RECORDER_COMMS; k++) {
        struct mpiq_recorder_comm *e = &R.comms[(s + k) % MPIQ_RECORDER_COMMS];
        uint32_t state = __atomic_load_n(&e->state, __ATOMIC_ACQUIRE);
        if (state == 2 && e->handle == h)
            return e;
        if (state == 1 && e->handle == h)
            return NULL; /* another thread is writing it */
        if (state == 0) {
            uint32_t expected = 0;
            if (!__atomic_compare_exchange_n(&e->state, &expected, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
                k--; /* taken meanwhile: look at it again */
                continue;
            }
            int rank = -1, size = 0;
            e->handle = h;
            P_Comm_rank(c, &rank);
            P_Comm_size(c, &size);
            e->rank = rank;
            e->size = size;
            e->collectives = 0;
            e->world_first = h == value(M.comm_world) ? -1 : world_map(c, size);
            __atomic_store_n(&e->state, 2, __ATOMIC_RELEASE);
            return e;
        }
    }
    __atomic_fetch_add(&R.h.comms_dropped, 1, __ATOMIC_RELAXED);
    return NULL;
}

/* A freed communicator's handle may come back for a new one. */
void comm_forget(uint64_t h)
{
    uint32_t s = comm_slot(h);
    for (uint32_t k = 0; k < MPIQ_RECORDER_COMMS; k++) {
        struct mpiq_recorder_comm *e = &R.comms[(s + k) % MPIQ_RECORDER_COMMS];
        uint32_t state = __atomic_load_n(&e->state, __ATOMIC_ACQUIRE);
        if (state == 0)
            return;
        if (state == 2 && e->handle == h) {
            __atomic_store_n(&e->state, 3, __ATOMIC_RELEASE);
            return;
        }
    }
}

/* ---- call records ----------------------------------------------------- */

/* A record claimed and written, not yet published: begin_slow() publishes
 * it at once, the wait calls once they have counted their requests. Its
 * clock is read once it is published (publish()). */
static inline __attribute__((always_inline)) struct call claim(int what, H comm, int32_t peer, int32_t tag, int64_t count, H type, int collective)
{
#ifdef MPIQ_RECORDER_PASS_THROUGH
    /* mpiq-bench's control build (begin()). */
    (void)what, (void)comm, (void)peer, (void)tag, (void)count, (void)type, (void)collective;
    return (struct call){NULL, 0};
#endif
    if (!recording())
        return (struct call){NULL, 0};
    struct mpiq_recorder_comm *c = comm == NO_COMM ? NULL : comm_fast(comm);
    int32_t size = type == NO_TYPE ? -1 : size_of(type);
    return fill(count_up(&R.h.calls_started), what, comm, peer, tag, count, size, tid(), collective ? c : NULL);
}

/* begin() for a call whose communicator, datatype size or thread it could
 * not take from what it had at hand. */
__attribute__((noinline)) struct call begin_slow(int what, H comm, int32_t peer, int32_t tag, int64_t count, H type,
                                                 int collective)
{
    struct call c = claim(what, comm, peer, tag, count, type, collective);
    publish(c);
    return c;
}


/* ---- pending requests ------------------------------------------------- */

/* How far from its hash's slot a request may be kept. A freed slot (3) is
 * never emptied again (a lookup could not tell it from the end of a run),
 * so that in time a request the table does not hold (started by a call the
 * recorder does not follow) would be looked for through the whole table, at
 * every wait or test given it. Lookups go only as far as any request was
 * ever kept (`reach`): as freed slots are reused, that is the longest run
 * of requests pending at once (a few slots, unless thousands are). */
#define PROBES 128u
static uint32_t reach = 1;

static uint32_t request_slot(uint64_t h)
{
    return (uint32_t)((h * 0x9E3779B97F4A7C15ull) >> 32) & (MPIQ_RECORDER_PENDING - 1);
}

static struct mpiq_recorder_pending *slot_at(uint32_t s, uint32_t k)
{
    return &R.pending[(s + k) & (MPIQ_RECORDER_PENDING - 1)];
}

/* The request at `out`, made by call `c`, published as `state`. */
static void add(struct call c, const void *out, uint32_t state, uint32_t flags)
{
    if (!c.r)
        return;
    uint64_t h = load(out, 0);
    if (h == value(M.request_null))
        return;
    __atomic_store_n(&c.r->request, h, __ATOMIC_RELAXED);
    if (M.request_empty && h == value(M.request_empty))
        return;
    /* A handle the MPI hands out while the table still holds it is a
     * request shared by calls that completed at once, or one completed
     * where the recorder could not see: the old entry is not pending. */
    pending_done(h);
    uint32_t s = request_slot(h);
    for (uint32_t k = 0; k < PROBES; k++) {
        struct mpiq_recorder_pending *p = slot_at(s, k);
        uint32_t was = __atomic_load_n(&p->state, __ATOMIC_ACQUIRE);
        if (was != 0 && was != 3)
            continue;
        if (!__atomic_compare_exchange_n(&p->state, &was, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
            continue;
        /* Before the program has the handle: no lookup can stop short. */
        uint32_t r = __atomic_load_n(&reach, __ATOMIC_RELAXED);
        while (r < k + 1 && !__atomic_compare_exchange_n(&reach, &r, k + 1, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
            ;
        p->call = c.r->call;
        p->request = h;
        p->call_seq = c.seq;
        p->comm = c.r->comm;
        p->start_ns = c.r->start_ns;
        p->coll_seq = c.r->coll_seq;
        p->peer = c.r->peer;
        p->tag = c.r->tag;
        p->count = c.r->count;
        p->type_size = c.r->type_size;
        p->waited_by = 0;
        p->flags = flags;
        p->spare = 0;
        __atomic_store_n(&p->state, state, __ATOMIC_RELEASE);
        return;
    }
    __atomic_fetch_add(&R.h.pending_dropped, 1, __ATOMIC_RELAXED);
}

/* The request at `out` was started by call `c`. */
void pending_add(struct call c, const void *out)
{
    add(c, out, 2, 0);
}

/* The persistent request at `out` was made by call `c` (MPI_X_init): at
 * rest until MPI_Start. */
void persistent_add(struct call c, const void *out)
{
    add(c, out, 4, MPIQ_PENDING_PERSISTENT);
}

/* The slot of request `h`, pending (2) or at rest (4), and that state;
 * NULL when the table does not hold it. */
static struct mpiq_recorder_pending *find(uint64_t h, uint32_t *state)
{
    uint32_t s = request_slot(h), far = __atomic_load_n(&reach, __ATOMIC_ACQUIRE);
    for (uint32_t k = 0; k < far; k++) {
        struct mpiq_recorder_pending *p = slot_at(s, k);
        uint32_t st = __atomic_load_n(&p->state, __ATOMIC_ACQUIRE);
        if (st == 0)
            return NULL;
        if ((st == 2 || st == 4) && p->request == h) {
            *state = st;
            return p;
        }
    }
    return NULL;
}

/* MPI_Request_free: gone, whether pending or at rest. */
void pending_done(uint64_t h)
{
    uint32_t state;
    struct mpiq_recorder_pending *p = find(h, &state);
    if (p)
        __atomic_store_n(&p->state, 3, __ATOMIC_RELEASE);
}

/* MPI_Start(all), call `c`, started the persistent requests at `reqs`. */
void activate(struct call c, int n, const void *reqs)
{
    if (!c.r)
        return;
    /* The call's start, unless the ring went round and the record is
     * another's. */
    uint64_t start = c.r->start_ns;
    if (__atomic_load_n(&c.r->seq, __ATOMIC_ACQUIRE) != c.seq)
        start = now_ns();
    for (int i = 0; i < n; i++) {
        uint32_t state;
        struct mpiq_recorder_pending *p = find(load(reqs, (size_t)i), &state);
        if (!p || state != 4)
            continue;
        /* Readers skip it while at 4: these are seen with 2 or not at all. */
        p->start_ns = start;
        __atomic_store_n(&p->waited_by, 0, __ATOMIC_RELAXED);
        uint32_t rest = 4;
        __atomic_compare_exchange_n(&p->state, &rest, 2, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
    }
}

/* The requests a wait or test call was given, as they were before it (a
 * completed request the MPI freed reads MPI_REQUEST_NULL after the call),
 * and the slot of each that the table held pending. Arrays longer than this
 * are recorded, but their completions are not: the header's
 * pending_dropped counts them, and mpiq stops trusting the pending table. */
#define TRACKED 1024
#define NO_SLOT UINT16_MAX
_Static_assert(MPIQ_RECORDER_PENDING <= NO_SLOT, "a slot's index fits in 16 bits");
static TLS uint64_t before[TRACKED];
static TLS uint16_t slot_of[TRACKED];

/* Looks each request given to call `c` up, once: the call's counts, and
 * `waited_by` of each pending one. Before `c` is published, so that its
 * record never shows counts not yet made. Returns how many requests
 * completed() looks at. */
static int remember(struct call c, int n, const void *reqs)
{
    if (!c.r || n <= 0)
        return 0;
    if (n > TRACKED) {
        __atomic_fetch_add(&R.h.pending_dropped, (uint64_t)n, __ATOMIC_RELAXED);
        n = TRACKED;
    }
    uint64_t null = value(M.request_null);
    int32_t active = 0, known = 0;
    for (int i = 0; i < n; i++) {
        uint64_t h = load(reqs, (size_t)i);
        before[i] = h;
        slot_of[i] = NO_SLOT;
        if (h == null)
            continue;
        uint32_t state = 0;
        struct mpiq_recorder_pending *p = find(h, &state);
        /* A persistent request at rest is to the call what MPI_REQUEST_NULL
         * is: nothing to wait for. */
        if (p && state == 4)
            continue;
        active++;
        if (!p)
            continue;
        known++;
        __atomic_store_n(&p->waited_by, c.seq, __ATOMIC_RELAXED);
        slot_of[i] = (uint16_t)(p - R.pending);
    }
    c.r->requests_active = active;
    c.r->requests_known = known;
    return n;
}

/* A wait or test call given `n` requests at `reqs`; `*tracked` is for
 * completed(). */
struct call begin_wait(int what, int n, const void *reqs, int *tracked)
{
    struct call c = claim(what, NO_COMM, NONE, n, NO_TYPE, P2P);
    if (c.r && n > 0)
        c.r->request = load(reqs, 0);
    *tracked = remember(c, n, reqs);
    publish(c);
    return c;
}

/* MPI_Start(all) given `n` requests at `reqs`. */
struct call begin_start(int what, int n, const void *reqs)
{
    struct call c = claim(what, NO_COMM, NONE, n, NO_TYPE, P2P);
    if (c.r && n > 0)
        c.r->request = load(reqs, 0);
    publish(c);
    return c;
}

/* Remembered request i completed; `freed`: the MPI freed it too. Once per
 * call: a moment later the slot may hold another request. */
static void finish(int i, int freed)
{
    uint16_t s = slot_of[i];
    if (s == NO_SLOT)
        return;
    slot_of[i] = NO_SLOT;
    struct mpiq_recorder_pending *p = &R.pending[s];
    if (p->request != before[i])
        return;
    uint32_t pending = 2;
    uint32_t next = (p->flags & MPIQ_PENDING_PERSISTENT) && !freed ? 4 : 3;
    __atomic_compare_exchange_n(&p->state, &pending, next, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

/* After a wait or test call that remembered `n` requests: those it says it
 * completed (ALL_DONE, or `done` indices at `which`) are done. Its outputs
 * are the only word on a persistent request, whose handle stays as it was;
 * a request the MPI freed (its handle now MPI_REQUEST_NULL) completed
 * whatever the call says, also when it failed (then `done` is 0). */
void completed(int n, const void *reqs, int done, const int *which)
{
    uint64_t null = value(M.request_null);
    for (int i = 0; i < n; i++)
        if (before[i] != null && load(reqs, (size_t)i) == null)
            finish(i, 1);
    if (done == ALL_DONE)
        for (int i = 0; i < n; i++)
            finish(i, 0);
    for (int j = 0; j < done; j++)
        if (which[j] >= 0 && which[j] < n)
            finish(which[j], 0);
}

/* ---- start and end ---------------------------------------------------- */

static void started(void)
{
    if (M.flavour == 0)
        return;
    int rank = -1, size = 0, level = THREAD_MULTIPLE;
    if (P_Query_thread)
        P_Query_thread(&level);
    M.concurrent = level >= THREAD_MULTIPLE;
    P_Comm_rank(M.comm_world, &rank);
    P_Comm_size(M.comm_world, &size);
    R.h.world_rank = rank;
    R.h.world_size = size;
    R.h.comm_world = value(M.comm_world);
    R.h.request_null = value(M.request_null);
    __atomic_store_n(&R.h.initialized, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&armed, 1, __ATOMIC_RELEASE);
    comm_entry(M.comm_world);
}

/* The record of MPI_Init itself is made once the MPI is up. */
static void init_record(uint64_t start)
{
    started();
    struct call c = begin(MPIQ_CALL_INIT, NO_COMM, MPIQ_PEER_NONE, MPIQ_TAG_NONE, 0, NO_TYPE, P2P);
    if (c.r)
        c.r->start_ns = start;
    end(c);
}

EXPORT int MPI_Init(int *argc, char ***argv)
{
    if (!resolve())
        return NO_MPI;
    uint64_t start = now_ns();
    int rc = P_Init(argc, argv);
    if (rc == 0)
        init_record(start);
    return rc;
}

EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    if (!resolve())
        return NO_MPI;
    uint64_t start = now_ns();
    int rc = P_Init_thread(argc, argv, required, provided);
    if (rc == 0)
        init_record(start);
    return rc;
}

/* A program whose MPI_Init this library did not see (Open MPI's Fortran
 * calls PMPI_Init) starts recording at its first call here. */
int ready(void)
{
    if (!resolve())
        return 0;
    if (!__atomic_load_n(&R.h.initialized, __ATOMIC_ACQUIRE) && M.flavour != 0) {
        static int checked;
        int up = 0;
        int (*initialized)(int *) = (int (*)(int *))sym("PMPI_Initialized");
        if (!__atomic_exchange_n(&checked, 1, __ATOMIC_ACQ_REL) && initialized && initialized(&up) == 0 && up)
            started();
    }
    return 1;
}

EXPORT int MPI_Finalize(void)
{
    struct call c = ready() ? begin(MPIQ_CALL_FINALIZE, NO_COMM, MPIQ_PEER_NONE, MPIQ_TAG_NONE, 0, NO_TYPE, P2P)
                            : (struct call){NULL, 0};
    int rc = ready() ? P_Finalize() : NO_MPI;
    end(c);
    return rc;
}
