/*
 * mpiq_recorder.h - the memory layout of mpiq's MPI flight recorder, version 1.
 *
 * The recorder (recorder.c and calls.c, preloaded or linked into an MPI program)
 * keeps, in its own memory, the process's recent MPI calls, the nonblocking
 * requests still pending, and its communicators with a collective counter
 * each. mpiq reads it from outside, from a stopped process or a core file:
 * it finds the symbol `mpiq_recorder`, checks `magic` and `version`, and
 * reads the tables at the offsets the header gives. Nothing here is ever
 * read by the recorder itself: this is a format, not an API.
 *
 * Every field is a fixed-size integer in the process's byte order. A reader
 * must accept headers whose sizes it does not expect (newer versions append
 * fields; the *_size fields say how long each record is).
 *
 * Readable at any instant (a process stopped by a debugger in the middle of
 * a write): a call record is claimed by an atomic increment of `calls_started`
 * and written in this order: `seq` is set to 0, the fields, then `seq` to the
 * record's number (its index + 1) with release order. A reader takes record i
 * (0-based, from calls_started - ncalls to calls_started - 1) from slot
 * i % ncalls only when its `seq` is i + 1; any other value is a record being
 * written or overwritten, never half of one. `end_ns` is written once, when
 * the call returns: 0 means the process is still in that call. A pending
 * request's slot is published by its `state` (release) after its fields, and
 * freed by `state` alone; a communicator's slot likewise.
 */
#ifndef MPIQ_RECORDER_H
#define MPIQ_RECORDER_H

#include <stdint.h>

#define MPIQ_RECORDER_MAGIC "MPIQREC"  /* 7 characters and a NUL */
#define MPIQ_RECORDER_VERSION 1u

/* Sizes of the tables (records, not bytes): fixed at build time, so that
 * the recorder never allocates. */
#define MPIQ_RECORDER_CALLS 4096u      /* a power of two */
#define MPIQ_RECORDER_PENDING 4096u    /* a power of two */
#define MPIQ_RECORDER_COMMS 256u
#define MPIQ_RECORDER_WORLD_RANKS 65536u

/* The MPI this recorder was built for: what the handles are. */
enum mpiq_recorder_flavour {
    MPIQ_FLAVOUR_UNKNOWN = 0,
    MPIQ_FLAVOUR_OPEN_MPI = 1,   /* handles are pointers */
    MPIQ_FLAVOUR_MPICH = 2,      /* handles are ints */
};

/* `peer` of a call that has none, or whose peer is not a rank. */
#define MPIQ_PEER_NONE (-32768)
#define MPIQ_PEER_ANY_SOURCE (-32767)
#define MPIQ_PEER_PROC_NULL (-32766)
#define MPIQ_TAG_NONE (-32768)
#define MPIQ_TAG_ANY (-32767)

/* What a call is; mpiq names them (`recorder.rs`). Stable: new calls get new
 * numbers. */
enum mpiq_recorder_call {
    MPIQ_CALL_INIT = 1,
    MPIQ_CALL_FINALIZE = 2,
    MPIQ_CALL_SEND = 10,
    MPIQ_CALL_SSEND = 11,
    MPIQ_CALL_BSEND = 12,
    MPIQ_CALL_RSEND = 13,
    MPIQ_CALL_RECV = 14,
    MPIQ_CALL_SENDRECV = 15,
    MPIQ_CALL_PROBE = 16,
    MPIQ_CALL_IPROBE = 17,
    MPIQ_CALL_ISEND = 20,
    MPIQ_CALL_ISSEND = 21,
    MPIQ_CALL_IBSEND = 22,
    MPIQ_CALL_IRSEND = 23,
    MPIQ_CALL_IRECV = 24,
    MPIQ_CALL_WAIT = 30,
    MPIQ_CALL_WAITALL = 31,
    MPIQ_CALL_WAITANY = 32,
    MPIQ_CALL_WAITSOME = 33,
    MPIQ_CALL_TEST = 34,
    MPIQ_CALL_TESTALL = 35,
    MPIQ_CALL_TESTANY = 36,
    MPIQ_CALL_TESTSOME = 37,
    MPIQ_CALL_BARRIER = 40,
    MPIQ_CALL_BCAST = 41,
    MPIQ_CALL_REDUCE = 42,
    MPIQ_CALL_ALLREDUCE = 43,
    MPIQ_CALL_GATHER = 44,
    MPIQ_CALL_ALLGATHER = 45,
    MPIQ_CALL_SCATTER = 46,
    MPIQ_CALL_ALLTOALL = 47,
    MPIQ_CALL_IBARRIER = 50,
    MPIQ_CALL_IBCAST = 51,
    MPIQ_CALL_IALLREDUCE = 52,
    MPIQ_CALL_COMM_DUP = 60,
    MPIQ_CALL_COMM_SPLIT = 61,
    MPIQ_CALL_COMM_CREATE = 62,
    MPIQ_CALL_COMM_FREE = 63,
};

/* One MPI call (80 bytes). */
struct mpiq_recorder_call_record {
    uint64_t seq;        /* the record's number (index + 1); see above */
    uint64_t start_ns;   /* CLOCK_MONOTONIC when the call began */
    uint64_t end_ns;     /* when it returned; 0: the process is in it */
    uint64_t comm;       /* the communicator handle as passed (0: none) */
    uint64_t request;    /* the request it started, or the first it waits on */
    uint64_t coll_seq;   /* collectives: their number on `comm` (1, 2, ...) */
    int32_t call;        /* enum mpiq_recorder_call */
    int32_t peer;        /* destination, source or root, a rank of `comm` */
    int32_t tag;         /* the tag, or MPIQ_TAG_* */
    int32_t count;       /* elements (requests, for the wait and test calls) */
    int32_t type_size;   /* bytes per element, -1 unknown */
    uint32_t tid;        /* the calling thread (the kernel's id) */
    int32_t peer2;       /* MPI_Sendrecv: the source (peer is the destination) */
    int32_t tag2;        /* MPI_Sendrecv: the receive's tag */
};

/* A nonblocking request started and not yet completed (64 bytes). */
struct mpiq_recorder_pending {
    uint32_t state;      /* 0 free, 1 being written, 2 pending, 3 freed */
    int32_t call;        /* the call that started it */
    uint64_t request;    /* the handle the program got */
    uint64_t call_seq;   /* the `seq` of that call's record */
    uint64_t comm;
    uint64_t start_ns;
    uint64_t coll_seq;
    int32_t peer;
    int32_t tag;
    int32_t count;
    int32_t type_size;
};

/* A communicator the process used (32 bytes). `world_first` indexes the
 * world_ranks table: the world rank of each of its `size` members, in
 * order; -1 when it did not fit (or for MPI_COMM_WORLD, which needs none). */
struct mpiq_recorder_comm {
    uint32_t state;      /* 0 free, 1 being written, 2 in use, 3 freed */
    int32_t rank;        /* this process's rank in it */
    uint64_t handle;
    uint64_t collectives;/* collectives begun on it */
    int32_t size;
    int32_t world_first;
};

/* The header, at the symbol `mpiq_recorder`; the tables follow it in the
 * same object, at the offsets given (from the header's start). */
struct mpiq_recorder_header {
    char magic[8];               /* MPIQ_RECORDER_MAGIC */
    uint32_t version;            /* MPIQ_RECORDER_VERSION */
    uint32_t header_size;        /* sizeof(struct mpiq_recorder_header) */
    uint32_t flavour;            /* enum mpiq_recorder_flavour */
    uint32_t initialized;        /* 1 after MPI_Init(_thread) returned */
    int32_t world_rank;          /* -1 before MPI_Init */
    int32_t world_size;
    uint64_t comm_world;         /* the handle of MPI_COMM_WORLD */
    uint64_t request_null;       /* the handle of MPI_REQUEST_NULL */
    uint64_t calls_started;      /* call records claimed so far */
    uint64_t pending_dropped;    /* requests not kept: the table was full */
    uint64_t comms_dropped;      /* communicators not kept: the table was full */
    uint32_t calls_offset, ncalls, call_size;
    uint32_t pending_offset, npending, pending_size;
    uint32_t comms_offset, ncomms, comm_size;
    uint32_t world_ranks_offset, nworld_ranks; /* int32_t each */
    uint32_t world_ranks_used;
};

#endif /* MPIQ_RECORDER_H */
