/*
 * mpiq_recorder.h - the memory layout of mpiq's MPI flight recorder, version 1.
 *
 * The recorder (recorder.c and calls.c, preloaded or linked into an MPI program)
 * keeps, in its own memory, the process's recent MPI calls, its nonblocking
 * requests (those pending, and its persistent ones), and its communicators
 * with a collective counter each. mpiq reads it from outside, from a stopped
 * process or a core file: it finds the symbol `mpiq_recorder`, checks `magic`
 * and `version`, and reads the tables at the offsets the header gives.
 * Nothing here is ever read by the recorder itself: this is a format, not
 * an API.
 *
 * Every field is a fixed-size integer in the process's byte order. A reader
 * must accept headers whose sizes it does not expect (newer versions append
 * fields; the *_size fields say how long each record is). The sizes and
 * offsets below are checked at build time (the _Static_asserts at the end).
 *
 * Readable at any instant (a process stopped by a debugger in the middle of
 * a write). A reader never sees half of a record; a field written after its
 * record was published is one whose old and new values both say something
 * true, and it is written with a single (relaxed) store, so that a reader
 * sees the one or the other:
 *
 * - A call record is claimed by an atomic increment of `calls_started` and
 *   written in this order: `seq` is set to 0, the fields (the wait and test
 *   calls' `requests_active` and `requests_known` among them), then `seq` to
 *   the record's number (its index + 1) with release order. A reader takes
 *   record i (0-based, from calls_started - ncalls to calls_started - 1) from
 *   slot i % ncalls only when its `seq` is i + 1; any other value is a record
 *   being written or overwritten. Written after that: `end_ns`, once, when
 *   the call returns (0: the process is still in that call), and `request`
 *   of a call that starts a request, once the MPI has given the handle (0
 *   until then).
 *
 * - A request's slot is claimed (state 0 or 3 to 1), its fields written,
 *   then published by `state` with release order: 2 for a request started by
 *   a nonblocking call, 4 for a persistent one (made by an MPI_X_init call,
 *   not started yet). Readers take only state 2 as pending. Then, by `state`
 *   alone (release): 2 to 3 when it completes or is freed; a persistent
 *   request 2 to 4 when it completes (its handle stays valid), 4 to 2 when
 *   MPI_Start(all) starts it again (`start_ns` and `waited_by` are rewritten
 *   while it is at 4, before), and 2 or 4 to 3 by MPI_Request_free. A slot
 *   at 3 keeps its last fields until it is claimed again. `waited_by` is
 *   stored (relaxed) into a published slot by every wait or test call given
 *   the request, before that call's record is published: a reader may find
 *   it naming a call it cannot see (being written, or overwritten since).
 *
 * - A communicator's slot is claimed (0 to 1), written, and published by
 *   `state` 2 (release); 3 once freed. `collectives` grows (relaxed) while
 *   it is in use.
 */
#ifndef MPIQ_RECORDER_H
#define MPIQ_RECORDER_H

#include <stddef.h>
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
 * numbers. MPI-4's large-count functions (MPI_Send_c, ...; mpi4py calls
 * them when the MPI has them) are recorded as the calls they widen, their
 * counts clamped to INT32_MAX. */
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
    MPIQ_CALL_MPROBE = 18,
    MPIQ_CALL_IMPROBE = 19,
    MPIQ_CALL_ISEND = 20,
    MPIQ_CALL_ISSEND = 21,
    MPIQ_CALL_IBSEND = 22,
    MPIQ_CALL_IRSEND = 23,
    MPIQ_CALL_IRECV = 24,
    MPIQ_CALL_MRECV = 25,          /* peer and tag: what the probe matched */
    MPIQ_CALL_IMRECV = 26,
    MPIQ_CALL_SENDRECV_REPLACE = 27,
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
    MPIQ_CALL_SEND_INIT = 70,      /* the persistent requests' */
    MPIQ_CALL_SSEND_INIT = 71,
    MPIQ_CALL_RECV_INIT = 72,
    MPIQ_CALL_START = 73,
    MPIQ_CALL_STARTALL = 74,
    MPIQ_CALL_BSEND_INIT = 75,
    MPIQ_CALL_RSEND_INIT = 76,
};

/* One MPI call (88 bytes). The wait and test calls (MPI_Wait ... MPI_Testsome)
 * also count the requests they were given; of an array, only the first
 * 1024 are looked at (`count` says how many there were). */
struct mpiq_recorder_call_record {
    uint64_t seq;        /* the record's number (index + 1); see above */
    uint64_t start_ns;   /* CLOCK_MONOTONIC_COARSE when the call began
                          * (to the kernel's tick, 1-10 ms; CLOCK_MONOTONIC
                          * with MPIQ_RECORDER_CLOCK=precise); 0: the call
                          * has just begun, its clock read comes next */
    uint64_t end_ns;     /* when it returned; 0: the process is in it */
    uint64_t comm;       /* the communicator handle as passed (0: none) */
    uint64_t request;    /* the request it started, or the first it waits on
                          * (MPI_Start(all), MPI_X_init: the first given or
                          * made) */
    uint64_t coll_seq;   /* collectives: their number on `comm` (1, 2, ...) */
    int32_t call;        /* enum mpiq_recorder_call */
    int32_t peer;        /* destination, source or root, a rank of `comm` */
    int32_t tag;         /* the tag, or MPIQ_TAG_* */
    int32_t count;       /* elements (requests, for the wait, test and start
                          * calls) */
    int32_t type_size;   /* bytes per element, -1 unknown */
    uint32_t tid;        /* the calling thread (the kernel's id) */
    int32_t peer2;       /* MPI_Sendrecv(_replace): the source (peer is the
                          * destination) */
    int32_t tag2;        /* MPI_Sendrecv(_replace): the receive's tag */
    int32_t requests_active; /* wait and test calls: the requests given that
                          * were active (neither MPI_REQUEST_NULL nor a
                          * persistent request the table holds at rest, state
                          * 4); 0 for other calls */
    int32_t requests_known;  /* of those, how many the pending table held
                          * pending (state 2); the others were started by a
                          * call the recorder does not follow, or not kept */
};

/* A nonblocking request (80 bytes): started and not yet completed (state
 * 2), or a persistent request at rest (4). */
struct mpiq_recorder_pending {
    uint32_t state;      /* 0 free, 1 being written, 2 pending, 3 freed,
                          * 4 persistent and inactive; see above */
    int32_t call;        /* the call that made it (persistent: MPI_X_init) */
    uint64_t request;    /* the handle the program got */
    uint64_t call_seq;   /* the `seq` of that call's record */
    uint64_t comm;
    uint64_t start_ns;   /* when it was started (persistent: by its last
                          * MPI_Start(all); at rest, when it was made or last
                          * started) */
    uint64_t coll_seq;
    int32_t peer;
    int32_t tag;
    int32_t count;
    int32_t type_size;
    uint64_t waited_by;  /* the `seq` of the last wait or test call given it
                          * (since it was last started); 0: none */
    uint32_t flags;      /* MPIQ_PENDING_* */
    uint32_t spare;      /* 0 */
};

#define MPIQ_PENDING_PERSISTENT 1u /* made by MPI_X_init: completes to 4 */

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
    uint64_t pending_dropped;    /* requests not kept (no free slot near
                                  * their hash), and requests beyond the
                                  * first 1024 of a wait or test call, whose
                                  * completions are not followed: when not 0,
                                  * the pending table may be incomplete */
    uint64_t comms_dropped;      /* communicators not kept: the table was full */
    uint32_t calls_offset, ncalls, call_size;
    uint32_t pending_offset, npending, pending_size;
    uint32_t comms_offset, ncomms, comm_size;
    uint32_t world_ranks_offset, nworld_ranks; /* int32_t each */
    uint32_t world_ranks_used;
};

/* What a reader relies on: sizes and offsets of version 1. */
#define MPIQ_AT(type, field, at) _Static_assert(offsetof(struct type, field) == (at), #type "." #field)
_Static_assert(sizeof(struct mpiq_recorder_header) == 120, "header size");
MPIQ_AT(mpiq_recorder_header, magic, 0);
MPIQ_AT(mpiq_recorder_header, version, 8);
MPIQ_AT(mpiq_recorder_header, header_size, 12);
MPIQ_AT(mpiq_recorder_header, flavour, 16);
MPIQ_AT(mpiq_recorder_header, initialized, 20);
MPIQ_AT(mpiq_recorder_header, world_rank, 24);
MPIQ_AT(mpiq_recorder_header, world_size, 28);
MPIQ_AT(mpiq_recorder_header, comm_world, 32);
MPIQ_AT(mpiq_recorder_header, request_null, 40);
MPIQ_AT(mpiq_recorder_header, calls_started, 48);
MPIQ_AT(mpiq_recorder_header, pending_dropped, 56);
MPIQ_AT(mpiq_recorder_header, comms_dropped, 64);
MPIQ_AT(mpiq_recorder_header, calls_offset, 72);
MPIQ_AT(mpiq_recorder_header, ncalls, 76);
MPIQ_AT(mpiq_recorder_header, call_size, 80);
MPIQ_AT(mpiq_recorder_header, pending_offset, 84);
MPIQ_AT(mpiq_recorder_header, npending, 88);
MPIQ_AT(mpiq_recorder_header, pending_size, 92);
MPIQ_AT(mpiq_recorder_header, comms_offset, 96);
MPIQ_AT(mpiq_recorder_header, ncomms, 100);
MPIQ_AT(mpiq_recorder_header, comm_size, 104);
MPIQ_AT(mpiq_recorder_header, world_ranks_offset, 108);
MPIQ_AT(mpiq_recorder_header, nworld_ranks, 112);
MPIQ_AT(mpiq_recorder_header, world_ranks_used, 116);

_Static_assert(sizeof(struct mpiq_recorder_call_record) == 88, "call record size");
MPIQ_AT(mpiq_recorder_call_record, seq, 0);
MPIQ_AT(mpiq_recorder_call_record, start_ns, 8);
MPIQ_AT(mpiq_recorder_call_record, end_ns, 16);
MPIQ_AT(mpiq_recorder_call_record, comm, 24);
MPIQ_AT(mpiq_recorder_call_record, request, 32);
MPIQ_AT(mpiq_recorder_call_record, coll_seq, 40);
MPIQ_AT(mpiq_recorder_call_record, call, 48);
MPIQ_AT(mpiq_recorder_call_record, peer, 52);
MPIQ_AT(mpiq_recorder_call_record, tag, 56);
MPIQ_AT(mpiq_recorder_call_record, count, 60);
MPIQ_AT(mpiq_recorder_call_record, type_size, 64);
MPIQ_AT(mpiq_recorder_call_record, tid, 68);
MPIQ_AT(mpiq_recorder_call_record, peer2, 72);
MPIQ_AT(mpiq_recorder_call_record, tag2, 76);
MPIQ_AT(mpiq_recorder_call_record, requests_active, 80);
MPIQ_AT(mpiq_recorder_call_record, requests_known, 84);

_Static_assert(sizeof(struct mpiq_recorder_pending) == 80, "pending record size");
MPIQ_AT(mpiq_recorder_pending, state, 0);
MPIQ_AT(mpiq_recorder_pending, call, 4);
MPIQ_AT(mpiq_recorder_pending, request, 8);
MPIQ_AT(mpiq_recorder_pending, call_seq, 16);
MPIQ_AT(mpiq_recorder_pending, comm, 24);
MPIQ_AT(mpiq_recorder_pending, start_ns, 32);
MPIQ_AT(mpiq_recorder_pending, coll_seq, 40);
MPIQ_AT(mpiq_recorder_pending, peer, 48);
MPIQ_AT(mpiq_recorder_pending, tag, 52);
MPIQ_AT(mpiq_recorder_pending, count, 56);
MPIQ_AT(mpiq_recorder_pending, type_size, 60);
MPIQ_AT(mpiq_recorder_pending, waited_by, 64);
MPIQ_AT(mpiq_recorder_pending, flags, 72);
MPIQ_AT(mpiq_recorder_pending, spare, 76);

_Static_assert(sizeof(struct mpiq_recorder_comm) == 32, "communicator record size");
MPIQ_AT(mpiq_recorder_comm, state, 0);
MPIQ_AT(mpiq_recorder_comm, rank, 4);
MPIQ_AT(mpiq_recorder_comm, handle, 8);
MPIQ_AT(mpiq_recorder_comm, collectives, 16);
MPIQ_AT(mpiq_recorder_comm, size, 24);
MPIQ_AT(mpiq_recorder_comm, world_first, 28);
#undef MPIQ_AT

#endif /* MPIQ_RECORDER_H */
