/*
 * mpiq.h: the public C API of the mpiq bridge (libmpiq.so / libmpiq.a).
 *
 * A host (a debugger, a tool) describes each target process with a table of
 * callbacks (struct mpiq_target); mpiq finds and loads the MPI library's
 * message queue debug library (MQD), lets it read the target through those
 * callbacks, and returns the queues as text or JSON (schema
 * "mpiq.snapshot/2", see docs/json-schema.md).
 *
 *   mpiq_target t = { MPIQ_API_VERSION, ctx, read_memory, ... };
 *   const mpiq_target *targets[] = { &t };
 *   char *out = NULL;
 *   int rc = mpiq_dump(targets, 1, "--json", &out);
 *   if (rc == MPIQ_DUMP_OK) puts(out); else fprintf(stderr, "%s\n", out);
 *   mpiq_free(out);
 *
 * Versioning: MPIQ_API_VERSION changes whenever struct mpiq_target or a
 * function's meaning changes; mpiq_dump accepts tables of version 1 (which
 * end before `identity`), 2 (before `stacks`), 3 (before `frame_value`)
 * and 4, and refuses others.
 * All functions are safe to call from any thread; dumps are serialized.
 * No callback may unwind (throw) into mpiq.
 */
#ifndef MPIQ_H
#define MPIQ_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MPIQ_API_VERSION 5

/* What a target callback returns. */
enum mpiq_status {
    MPIQ_OK = 0,          /* answered; out-parameters are set */
    MPIQ_NOT_FOUND = 1,   /* lookups only: no such symbol / type / field */
    MPIQ_ERROR = 2,       /* the host failed; call mpiq_set_error() first to say why */
    MPIQ_INTERRUPTED = 3  /* the user interrupted (Ctrl-C): the dump stops */
};

/* Sizes of the target's basic C types, in bytes. */
typedef struct mpiq_type_sizes {
    int32_t short_size;
    int32_t int_size;
    int32_t long_size;
    int32_t long_long_size;
    int32_t pointer_size;
} mpiq_type_sizes;

/* One target process. Every callback pointer must be non-NULL. `ctx` is
 * passed back unchanged. Addresses are runtime (load) addresses; lookups
 * search every object loaded in the process. */
typedef struct mpiq_target {
    uint32_t api_version; /* MPIQ_API_VERSION */
    void *ctx;
    /* Read exactly `len` bytes at `addr` into `buf`, or fail as a whole. */
    int (*read_memory)(void *ctx, uint64_t addr, uint64_t len, void *buf);
    /* Address of a data symbol (debug info or ELF symbol table). */
    int (*find_symbol)(void *ctx, const char *name, uint64_t *addr);
    /* Address of a function. */
    int (*find_function)(void *ctx, const char *name, uint64_t *addr);
    /* A type by name ("X", "struct X", a typedef): any handle the host likes. */
    int (*find_type)(void *ctx, const char *name, uint64_t *type);
    /* Byte offset of `field` in the struct/union `type` (typedefs resolved). */
    int (*field_offset)(void *ctx, uint64_t type, const char *field, uint64_t *offset);
    /* sizeof(type). */
    int (*size_of)(void *ctx, uint64_t type, uint64_t *size);
    /* Sizes of short, int, long, long long and pointers. */
    int (*type_sizes)(void *ctx, mpiq_type_sizes *sizes);
    /* *big_endian = 1 for a big-endian target, 0 for little-endian. */
    int (*byte_order)(void *ctx, int32_t *big_endian);
    /* MPI_COMM_WORLD rank if the host knows it; MPIQ_NOT_FOUND lets mpiq work it out. */
    int (*world_rank)(void *ctx, int32_t *rank);
    /* Process id, or -1 when unknown (some core files). */
    int64_t pid;
    /* Path of the main executable (UTF-8), or NULL. Copied by mpiq_dump. */
    const char *executable;
    /* Since API version 2, may be NULL. Write into `buf` (at most `len`
     * bytes, NUL included) a key that stays the same exactly as long as the
     * process and every object loaded in it do (e.g. the pid and a counter
     * bumped whenever the objects change), and return MPIQ_OK; mpiq then
     * keeps the answers to lookups by name between dumps with the same key.
     * Any other status, or NULL: nothing is kept. */
    int (*identity)(void *ctx, char *buf, uint64_t len);
    /* Since API version 3, may be NULL. Every thread's call stack, as a
     * UTF-8 JSON array (docs/json-schema.md, "Thread stack"): set *json to
     * a NUL-terminated string the host owns and keeps unchanged until its
     * next callback returns, and return MPIQ_OK; MPIQ_NOT_FOUND (or NULL):
     * this host gives no stacks. Asked only with --stacks. */
    int (*stacks)(void *ctx, const char **json);
    /* Since API version 4, may be NULL. Set *value to the value of the
     * parameter or variable `name` in frame `frame` (the index in the
     * thread's frames as `stacks` listed them: 0 = innermost, inlined frames
     * counted) of thread `thread` (its "tid" there): integers sign-extended
     * to 64 bits, pointers as they are; and return MPIQ_OK. MPIQ_NOT_FOUND
     * (or NULL): no such name there, or optimised out. Asked only with
     * --stacks, for the frames of MPI calls.
     * A `name` starting with '$' names a register of that frame, as the
     * host's unwinder recovered it for that frame (an inlined frame has the
     * registers of the frame it is inlined into): "$sp" (the frame's stack
     * pointer: the canonical frame address of the next inner frame), "$pc"
     * (a return address in callers, as `stacks` gives it), and on x86-64
     * the callee-saved "$rbx", "$rbp", "$r12", "$r13", "$r14", "$r15". A
     * host may also answer the other general registers by name ("$rax",
     * "$rsp", "$rip", ...), but a caller-saved one only where it was really
     * restored (the innermost frame, a frame a signal interrupted). A
     * register the unwinder did not recover for that frame (a caller-saved
     * one in a caller, "<not saved>", unknown), or a name the host does not
     * know: MPIQ_NOT_FOUND, never a guess. */
    int (*frame_value)(void *ctx, uint64_t thread, uint32_t frame, const char *name, uint64_t *value);
    /* Since API version 5. 1 if `pid` is a live process that this host
     * holds stopped while mpiq_dump runs, else 0 (a core file: its pid may
     * be another process's now). mpiq reads a live CPython process's Python
     * frames by its pid (process_vm_readv, never ptrace) and puts them into
     * the stacks. Asked only with stacks. */
    int32_t live;
} mpiq_target;

/* Results of mpiq_dump. */
enum mpiq_dump_status {
    MPIQ_DUMP_OK = 0,          /* *output is the snapshot (some processes may carry their own error) */
    MPIQ_DUMP_USAGE = 1,       /* bad arguments: *output says which */
    MPIQ_DUMP_FAILED = 2,      /* no process could be read: *output says why, one line per process */
    MPIQ_DUMP_INTERRUPTED = 3  /* a callback returned MPIQ_INTERRUPTED */
};

/* Dump the message queues of `count` targets.
 * `args` are the command's arguments as the user typed them (NULL or "" for
 * the defaults): [--json] [--all] [--comm NAME|ID] [--queue sends|receives|unexpected]
 * [--dll FILE] [--stats] [--record FILE] [--in-process] [--timeout SECS], and
 * [--targets T] (or --inferiors, --target), which the caller acts on and
 * mpiq_dump accepts and ignores. mpiq_help() lists them all.
 * *output is always set to a NUL-terminated UTF-8 string (the snapshot, or
 * the error message) that the caller frees with mpiq_free(). */
int mpiq_dump(const mpiq_target *const *targets, size_t count, const char *args, char **output);

/* Parse the value of --targets (--inferiors, --target) as every front end
 * does: "all", or target numbers and ranges separated by commas ("0,2",
 * "1-3"). Returns MPIQ_DUMP_OK with *output "all" or the numbers named, each
 * once, comma-separated in the order given ("0,2,3"); or MPIQ_DUMP_USAGE with
 * *output the error message (a range like "3-1" is one). The caller frees
 * *output with mpiq_free(). Added after MPIQ_API_VERSION 5 without changing
 * it (no struct or meaning changed): look the symbol up before calling. */
int mpiq_parse_targets(const char *spec, char **output);

/* Called by a target callback, before it returns MPIQ_ERROR, to say why.
 * The text is copied; it applies to the current thread's running dump. */
void mpiq_set_error(const char *message);

/* Free a string returned by mpiq. NULL is allowed. */
void mpiq_free(char *s);

/* Help text for the arguments mpiq_dump accepts (static, do not free), made
 * from the library's option table. Its first paragraph (up to the first
 * blank line) is the usage line without a command name: "Arguments: " and
 * one item per option, "[--flag]" or "[--flag VALUE]", "..." after a
 * repeatable one. Then a description and one line per option. */
const char *mpiq_help(void);

/* Version of the mpiq library, e.g. "0.1.0" (static, do not free). */
const char *mpiq_version(void);

/* MPIQ_API_VERSION of the library. */
uint32_t mpiq_api_version(void);

#ifdef __cplusplus
}
#endif
#endif /* MPIQ_H */
