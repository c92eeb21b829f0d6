/*
 * recorder_latency.c - what mpiq's flight recorder (recorder/, preloaded with
 * LD_PRELOAD) adds to each MPI call. `mpiq-bench recorder` builds it with
 * each MPI's mpicc, runs it on 2 ranks with and without the recorder
 * preloaded, and makes the table of docs/PERFORMANCE.md ("Flight recorder").
 *
 *   recorder_latency [--quick] [--only CASE] [--iters N] [--pairs P]
 *                    [--sample-ms T] [--kernel-ms T] [--kernel-n N] [--api mpi|pmpi|both]
 *
 * Exactly 2 ranks. The cases, each a loop of one kind of MPI call:
 *
 *   iprobe       MPI_Iprobe(MPI_ANY_SOURCE, a tag nobody sends) on each rank:
 *                a call that finds nothing and moves no data, so the
 *                recorder's own cost is most of what changes
 *   test_null    MPI_Test on MPI_REQUEST_NULL: the cheapest call it wraps
 *   pingpong_8   MPI_Send / MPI_Recv ping-pong, 8 bytes (2 calls a rank per
 *                round trip; ns per call is half the round trip)
 *   pingpong_1m  the same, 1 MiB
 *   allreduce_1  MPI_Allreduce of 1 double (MPI_SUM)
 *   allreduce_128k  MPI_Allreduce of 131072 doubles (1 MiB)
 *   kernel       a real kernel: a 2-D Jacobi sweep of N x N points a rank
 *                (default 256), halo exchange with every neighbour rank
 *                (MPI_Irecv, MPI_Isend, MPI_Waitall) and an MPI_Allreduce
 *                of the residual every iteration
 *
 * Interleaved in one run: every call is made either through MPI_X (the
 * recorder's, when it is preloaded) or through PMPI_X (the MPI's own,
 * never recorded), by function pointers of the same kind, sample by sample
 * in ABBA order (mpi, pmpi, pmpi, mpi, ...), so a run with the recorder
 * preloaded measures it against itself without it, at the same moment.
 * Without the recorder both ways reach the same code: their difference is
 * the noise of that measurement.
 *
 * Each case: a calibration (the number of iterations that makes a sample
 * take --sample-ms, default 10; the kernel --kernel-ms, default 60), then
 * --pairs pairs of samples (default 10), each sample after a PMPI_Barrier,
 * timed on rank 0 with CLOCK_MONOTONIC. Rank 0 prints one line a case:
 *
 *   case NAME calls=C iters=N pairs=P mpi_ns=X pmpi_ns=Y diff_ns=D
 *
 * X and Y: the median over samples of the sample's time / (N * C), ns per
 * call (C: MPI calls a rank makes an iteration); D: the median over pairs of
 * (the MPI_X sample - the PMPI_X sample) / (N * C). For the kernel also
 * mpi_iter_ns, pmpi_iter_ns: ns per iteration. Then one line a rank:
 *
 *   memory rank=R recorder=0|1 block_bytes=B resident_bytes=S recorded_calls=K vmrss_kib=V vmhwm_kib=H
 *
 * recorder: whether the symbol `mpiq_recorder` is in the process; B its
 * size (the ELF symbol's, from dladdr1); S the bytes of it resident
 * (mincore(2) over its pages: the pages the recorder wrote, or read, since
 * the process started); K the header's calls_started. The harness's own
 * calls (barriers, broadcasts, gathers) go through PMPI_X: they are never
 * recorded.
 *
 * `--only CASE --iters N --api mpi` runs one sample of one case with no
 * calibration: what `valgrind --tool=callgrind --toggle-collect=loop_CASE`
 * counts instructions of.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "mpiq_recorder.h"

#define NOIPA __attribute__((noipa))
#define PROBE_TAG 32000 /* no rank ever sends it */
#define PING_TAG 1
#define HALO_TAG 2

/* One way of calling the MPI: MPI_X or PMPI_X. */
struct api {
    const char *name;
    __typeof__(MPI_Send) *send;
    __typeof__(MPI_Recv) *recv;
    __typeof__(MPI_Isend) *isend;
    __typeof__(MPI_Irecv) *irecv;
    __typeof__(MPI_Waitall) *waitall;
    __typeof__(MPI_Allreduce) *allreduce;
    __typeof__(MPI_Iprobe) *iprobe;
    __typeof__(MPI_Test) *test;
};

static const struct api APIS[2] = {
    {"mpi", MPI_Send, MPI_Recv, MPI_Isend, MPI_Irecv, MPI_Waitall, MPI_Allreduce, MPI_Iprobe, MPI_Test},
    {"pmpi", PMPI_Send, PMPI_Recv, PMPI_Isend, PMPI_Irecv, PMPI_Waitall, PMPI_Allreduce, PMPI_Iprobe, PMPI_Test},
};

static int rank, size;
static char *buf_a, *buf_b;           /* 1 MiB each: ping-pong and allreduce */
#define BIG (1 << 20)

/* ---- the loops (noipa: callgrind's --toggle-collect names them) ------- */

NOIPA void loop_iprobe(const struct api *a, long n)
{
    int flag;
    for (long i = 0; i < n; i++)
        a->iprobe(MPI_ANY_SOURCE, PROBE_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
}

NOIPA void loop_test_null(const struct api *a, long n)
{
    int flag;
    for (long i = 0; i < n; i++) {
        MPI_Request r = MPI_REQUEST_NULL;
        a->test(&r, &flag, MPI_STATUS_IGNORE);
    }
}

static void pingpong(const struct api *a, long n, int bytes)
{
    int other = 1 - rank;
    for (long i = 0; i < n; i++) {
        if (rank == 0) {
            a->send(buf_a, bytes, MPI_BYTE, other, PING_TAG, MPI_COMM_WORLD);
            a->recv(buf_b, bytes, MPI_BYTE, other, PING_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            a->recv(buf_b, bytes, MPI_BYTE, other, PING_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            a->send(buf_a, bytes, MPI_BYTE, other, PING_TAG, MPI_COMM_WORLD);
        }
    }
}

NOIPA void loop_pingpong_8(const struct api *a, long n) { pingpong(a, n, 8); }
NOIPA void loop_pingpong_1m(const struct api *a, long n) { pingpong(a, n, BIG); }

NOIPA void loop_allreduce_1(const struct api *a, long n)
{
    for (long i = 0; i < n; i++)
        a->allreduce(buf_a, buf_b, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}

NOIPA void loop_allreduce_128k(const struct api *a, long n)
{
    for (long i = 0; i < n; i++)
        a->allreduce(buf_a, buf_b, BIG / 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}

/* ---- the kernel: 2-D Jacobi ------------------------------------------ */

/* This rank's block of the grid: n x n points and a halo of one point,
 * row-major; neighbours in a dims[0] x dims[1] grid of ranks (none at the
 * grid's edge, whose halo holds the fixed boundary: 1 along the top, 0
 * elsewhere). */
static struct {
    int n;
    double *u, *v;
    int nb[4];          /* north, south, west, east; -1: none */
    double *out[4], *in[4];
    int count;          /* neighbours */
} K;

#define AT(p, i, j) (p)[(size_t)(i) * (size_t)(K.n + 2) + (size_t)(j)]

static void kernel_setup(int n)
{
    int dims[2] = {0, 0};
    PMPI_Dims_create(size, 2, dims);
    int ry = rank / dims[1], rx = rank % dims[1];
    K.n = n;
    size_t cells = (size_t)(n + 2) * (size_t)(n + 2);
    K.u = calloc(cells, sizeof(double));
    K.v = calloc(cells, sizeof(double));
    K.nb[0] = ry > 0 ? rank - dims[1] : -1;
    K.nb[1] = ry < dims[0] - 1 ? rank + dims[1] : -1;
    K.nb[2] = rx > 0 ? rank - 1 : -1;
    K.nb[3] = rx < dims[1] - 1 ? rank + 1 : -1;
    K.count = 0;
    for (int d = 0; d < 4; d++) {
        K.out[d] = calloc((size_t)n, sizeof(double));
        K.in[d] = calloc((size_t)n, sizeof(double));
        K.count += K.nb[d] >= 0;
    }
    if (!K.u || !K.v) {
        fprintf(stderr, "recorder_latency: out of memory\n");
        PMPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (K.nb[0] < 0)
        for (int j = 0; j <= n + 1; j++)
            AT(K.u, 0, j) = AT(K.v, 0, j) = 1.0;
}

/* One iteration: the halo exchanged, a sweep from u into v, the residual
 * summed over the ranks; u and v swapped. */
static double kernel_step(const struct api *a)
{
    int n = K.n;
    MPI_Request req[8];
    int nreq = 0;
    for (int d = 0; d < 4; d++)
        if (K.nb[d] >= 0)
            a->irecv(K.in[d], n, MPI_DOUBLE, K.nb[d], HALO_TAG, MPI_COMM_WORLD, &req[nreq++]);
    for (int i = 1; i <= n; i++) {
        K.out[0][i - 1] = AT(K.u, 1, i);
        K.out[1][i - 1] = AT(K.u, n, i);
        K.out[2][i - 1] = AT(K.u, i, 1);
        K.out[3][i - 1] = AT(K.u, i, n);
    }
    for (int d = 0; d < 4; d++)
        if (K.nb[d] >= 0)
            a->isend(K.out[d], n, MPI_DOUBLE, K.nb[d], HALO_TAG, MPI_COMM_WORLD, &req[nreq++]);
    a->waitall(nreq, req, MPI_STATUSES_IGNORE);
    for (int i = 1; i <= n; i++) {
        if (K.nb[0] >= 0)
            AT(K.u, 0, i) = K.in[0][i - 1];
        if (K.nb[1] >= 0)
            AT(K.u, n + 1, i) = K.in[1][i - 1];
        if (K.nb[2] >= 0)
            AT(K.u, i, 0) = K.in[2][i - 1];
        if (K.nb[3] >= 0)
            AT(K.u, i, n + 1) = K.in[3][i - 1];
    }
    double local = 0.0;
    for (int i = 1; i <= n; i++)
        for (int j = 1; j <= n; j++) {
            double x = 0.25 * (AT(K.u, i - 1, j) + AT(K.u, i + 1, j) + AT(K.u, i, j - 1) + AT(K.u, i, j + 1));
            double d = x - AT(K.u, i, j);
            AT(K.v, i, j) = x;
            local += d * d;
        }
    double global = 0.0;
    a->allreduce(&local, &global, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double *t = K.u;
    K.u = K.v;
    K.v = t;
    return global;
}

static volatile double residual; /* kept, so that no sweep is left out */

NOIPA void loop_kernel(const struct api *a, long n)
{
    for (long i = 0; i < n; i++)
        residual = kernel_step(a);
}

/* ---- measuring -------------------------------------------------------- */

struct kase {
    const char *name;
    void (*loop)(const struct api *, long);
    int calls; /* MPI calls a rank makes per iteration (the kernel: set at setup) */
    int kernel;
};

static struct kase CASES[] = {
    {"iprobe", loop_iprobe, 1, 0},
    {"test_null", loop_test_null, 1, 0},
    {"pingpong_8", loop_pingpong_8, 2, 0},
    {"pingpong_1m", loop_pingpong_1m, 2, 0},
    {"allreduce_1", loop_allreduce_1, 1, 0},
    {"allreduce_128k", loop_allreduce_128k, 1, 0},
    {"kernel", loop_kernel, 0, 1},
};
#define NCASES (int)(sizeof CASES / sizeof CASES[0])

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* One sample: n iterations after a barrier, rank 0's time (ns), told to
 * every rank. */
static double sample(const struct kase *k, const struct api *a, long n)
{
    PMPI_Barrier(MPI_COMM_WORLD);
    double t0 = now_ns();
    k->loop(a, n);
    double t = now_ns() - t0;
    PMPI_Bcast(&t, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    return t;
}

static int by_value(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, by_value);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Iterations that make a sample take about target_ns (both ways reach the
 * same MPI; calibrated with PMPI_X). */
static long calibrate(const struct kase *k, double target_ns)
{
    long n = 1;
    for (;;) {
        double t = sample(k, &APIS[1], n);
        if (t >= target_ns / 8 || n >= (1L << 40)) {
            double m = (double)n * target_ns / (t > 1 ? t : 1);
            return m < 1 ? 1 : (long)m;
        }
        n *= 4;
    }
}

static void measure(const struct kase *k, long iters, int pairs, double target_ns, int apis)
{
    long n = iters > 0 ? iters : calibrate(k, target_ns);
    double calls = (double)n * k->calls;
    double *t[2], *diff;
    t[0] = calloc((size_t)pairs, sizeof(double));
    t[1] = calloc((size_t)pairs, sizeof(double));
    diff = calloc((size_t)pairs, sizeof(double));
    for (int p = 0; p < pairs; p++) {
        /* ABBA: mpi, pmpi, then pmpi, mpi: a drift over the run cancels. */
        for (int s = 0; s < 2; s++) {
            int w = (p % 2) ? 1 - s : s;
            if (apis != 2 && w != apis)
                continue;
            t[w][p] = sample(k, &APIS[w], n);
        }
        diff[p] = (t[0][p] - t[1][p]) / calls;
    }
    if (rank == 0) {
        double x[2];
        for (int w = 0; w < 2; w++)
            x[w] = median(t[w], pairs);
        printf("case %s calls=%d iters=%ld pairs=%d mpi_ns=%.2f pmpi_ns=%.2f diff_ns=%.2f", k->name, k->calls, n,
               pairs, x[0] / calls, x[1] / calls, apis == 2 ? median(diff, pairs) : 0.0);
        if (k->kernel)
            printf(" mpi_iter_ns=%.0f pmpi_iter_ns=%.0f", x[0] / (double)n, x[1] / (double)n);
        printf("\n");
        fflush(stdout);
    }
    free(t[0]);
    free(t[1]);
    free(diff);
}

/* ---- memory ------------------------------------------------------------ */

struct memory {
    long recorder, block_bytes, resident_bytes, recorded_calls, vmrss_kib, vmhwm_kib;
};

static long status_kib(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t len = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, len) == 0 && line[len] == ':')
            v = strtol(line + len + 1, NULL, 10);
    if (f)
        fclose(f);
    return v;
}

static struct memory memory(void)
{
    struct memory m = {0, 0, 0, 0, status_kib("VmRSS"), status_kib("VmHWM")};
    void *block = dlsym(RTLD_DEFAULT, "mpiq_recorder");
    if (!block)
        return m;
    m.recorder = 1;
    m.recorded_calls = (long)((const struct mpiq_recorder_header *)block)->calls_started;
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    if (!dladdr1(block, &info, (void **)&sym, RTLD_DL_SYMENT) || !sym)
        return m;
    m.block_bytes = (long)sym->st_size;
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t start = (uintptr_t)block & ~(uintptr_t)(page - 1);
    uintptr_t end = ((uintptr_t)block + sym->st_size + (uintptr_t)page - 1) & ~(uintptr_t)(page - 1);
    size_t pages = (end - start) / (size_t)page;
    unsigned char *vec = calloc(pages, 1);
    if (vec && mincore((void *)start, end - start, vec) == 0)
        for (size_t i = 0; i < pages; i++)
            m.resident_bytes += (vec[i] & 1) ? page : 0;
    free(vec);
    return m;
}

/* ---- main ------------------------------------------------------------- */

static void usage(void)
{
    if (rank == 0)
        fprintf(stderr, "usage: recorder_latency [--quick] [--only CASE] [--iters N] [--pairs P] [--sample-ms T]"
                        " [--kernel-ms T] [--kernel-n N] [--api mpi|pmpi|both]\n");
    PMPI_Abort(MPI_COMM_WORLD, 2);
}

int main(int argc, char **argv)
{
    alarm(1800); /* a safety net: a leaked rank ends */
    MPI_Init(&argc, &argv);
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (rank == 0)
            fprintf(stderr, "recorder_latency: run it on exactly 2 ranks (got %d)\n", size);
        PMPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *only = NULL;
    long iters = 0;
    int pairs = 10, apis = 2, kernel_n = 256;
    double sample_ms = 10, kernel_ms = 60;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quick")) {
            pairs = 2;
            sample_ms = 2;
            kernel_ms = 10;
            kernel_n = 128;
            continue;
        }
        if (!v)
            usage();
        i++;
        if (!strcmp(a, "--only"))
            only = v;
        else if (!strcmp(a, "--iters"))
            iters = atol(v);
        else if (!strcmp(a, "--pairs"))
            pairs = atoi(v);
        else if (!strcmp(a, "--sample-ms"))
            sample_ms = atof(v);
        else if (!strcmp(a, "--kernel-ms"))
            kernel_ms = atof(v);
        else if (!strcmp(a, "--kernel-n"))
            kernel_n = atoi(v);
        else if (!strcmp(a, "--api"))
            apis = !strcmp(v, "mpi") ? 0 : !strcmp(v, "pmpi") ? 1 : !strcmp(v, "both") ? 2 : -1;
        else
            usage();
    }
    if (pairs < 1 || apis < 0 || kernel_n < 2)
        usage();
    buf_a = calloc(BIG, 1);
    buf_b = calloc(BIG, 1);
    kernel_setup(kernel_n);
    for (int c = 0; c < NCASES; c++) {
        struct kase *k = &CASES[c];
        if (k->kernel)
            k->calls = 2 * K.count + 2;
        if (only && strcmp(only, k->name))
            continue;
        measure(k, iters, pairs, (k->kernel ? kernel_ms : sample_ms) * 1e6, apis);
    }
    struct memory mine = memory(), all[2];
    PMPI_Gather(&mine, sizeof mine, MPI_BYTE, all, sizeof mine, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (rank == 0)
        for (int r = 0; r < size; r++)
            printf("memory rank=%d recorder=%ld block_bytes=%ld resident_bytes=%ld recorded_calls=%ld"
                   " vmrss_kib=%ld vmhwm_kib=%ld\n",
                   r, all[r].recorder, all[r].block_bytes, all[r].resident_bytes, all[r].recorded_calls,
                   all[r].vmrss_kib, all[r].vmhwm_kib);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
