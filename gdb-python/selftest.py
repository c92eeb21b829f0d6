"""Checks mpiq.py's callbacks (mpiq_gdb.target) against gdb's own answers, in a
real MPI rank.

    gdb -batch -nx -ex 'source gdb-python/selftest.py' -p PID      (a live rank)
    gdb -batch -nx -ex 'source gdb-python/selftest.py' EXE CORE   (a core file)

Every callback is called through its C function pointer (the way libmpiq.so
calls it), for the symbols, types and fields Open MPI's and MPICH's message
queue debug libraries ask for; the expected answers come from gdb
expressions (`&name`, `sizeof(T)`, `&((T *)0)->field`) and, for
MPIR_dll_name, from the ELF symbol table (`nm -D`) plus /proc/PID/maps. libmpiq.so
is not needed. Prints one line per failure, the per-call costs, and
"selftest: N checks passed"; exits with status 1 if any check failed.
"""

import ctypes
import os
import subprocess
import time

import gdb

# Sourcing mpiq.py puts mpiq_gdb on sys.path, as a user's ~/.gdbinit does.
gdb.execute("source " + os.path.join(os.path.dirname(os.path.abspath(__file__)), "mpiq.py"))
from mpiq_gdb import capi
from mpiq_gdb.dump import MpiqDump, selection
from mpiq_gdb.target import MpiqTarget

# Symbols and (type, fields) each debug library looks up (ompi/debuggers/*.c,
# src/mpi/debugger/dll_mpich.c).
OPEN_MPI = {
    "symbols": ["MPIR_dll_name", "ompi_mpi_communicators", "mca_pml_base_send_requests",
                "mca_pml_base_recv_requests", "MPIR_debug_typedefs_sizeof"],
    "missing": ["MPIR_Ignore_queues"],
    "functions": ["MPI_Init", "ompi_debugger_setup_dlls"],
    "types": {
        "opal_list_t": ["opal_list_sentinel"],
        "opal_list_item_t": ["opal_list_next"],
        "opal_free_list_t": ["fl_allocations", "fl_frag_size", "fl_num_allocated", "fl_num_per_alloc"],
        "opal_pointer_array_t": ["addr", "size", "lowest_free", "number_free"],
        "opal_hash_table_t": ["ht_size", "ht_table"],
        "ompi_communicator_t": ["c_name", "c_contextid", "c_my_rank", "c_local_group", "c_flags", "c_topo"],
        "ompi_group_t": ["grp_my_rank", "grp_proc_pointers", "grp_flags"],
        "ompi_request_t": ["req_type", "req_status", "req_complete", "req_state"],
        "ompi_status_public_t": ["MPI_SOURCE", "MPI_TAG", "MPI_ERROR", "_ucount", "_cancelled"],
        "ompi_datatype_t": ["name", "super"],
        "opal_datatype_t": ["size"],
        "mca_pml_base_request_t": ["req_addr", "req_count", "req_peer", "req_tag", "req_comm",
                                   "req_datatype", "req_sequence", "req_type", "req_pml_complete"],
        "mca_pml_base_send_request_t": ["req_addr", "req_bytes_packed", "req_send_mode"],
        "mca_pml_base_recv_request_t": ["req_bytes_packed"],
        "mca_topo_base_module_t": ["mtc", "reorder"],
        "struct ompi_communicator_t": ["c_name"],
    },
    "dll": "libompi_dbg_msgq.so",
}
MPICH = {
    "symbols": ["MPIR_dll_name", "MPIR_All_communicators", "MPID_Recvq_posted_head_ptr",
                "MPID_Recvq_unexpected_head_ptr", "MPIR_Sendq_head"],
    "missing": ["MPIR_Ignore_queues"],
    "functions": ["MPI_Init"],
    "types": {
        "MPIR_Comm_list": ["sequence_number", "head"],
        "MPIR_Comm": ["name", "comm_next", "remote_size", "rank", "context_id", "recvcontext_id"],
        "MPIR_Request": ["dev", "status", "cc", "next"],
        "MPIDI_Request": ["user_buf", "user_count", "datatype", "match"],
        "MPIDI_Message_match": ["parts"],
        "MPIDI_Message_match_parts_t": ["tag", "rank", "context_id"],
        "MPIR_Sendq": ["next", "tag", "rank", "context_id", "sreq"],
        "struct MPIR_Comm": ["name"],
    },
    "dll": "libtvmpich.so",
}
NEVER = ["no_such_symbol_mpiq", "a;b", "a b", "", "1abc", "x)+(y"]

failures = []
checks = 0


def check(ok, what):
    global checks
    checks += 1
    if not ok:
        failures.append(what)
        gdb.write(f"FAIL: {what}\n")


def expect(expr):
    """Value of a C expression, or None if gdb cannot evaluate it."""
    try:
        return int(gdb.parse_and_eval(expr))
    except gdb.error:
        return None


class FakeLib:
    """Stands in for libmpiq.so: only mpiq_set_error is needed here."""

    def __init__(self):
        self.errors = []

    def mpiq_set_error(self, message):
        self.errors.append(message.decode())


lib = FakeLib()
inferior = gdb.selected_inferior()
dump = MpiqDump(lib, switching=False)
dump.use_c_language()
target = MpiqTarget(dump, inferior, gdb.selected_thread())
t = target.struct
u64 = ctypes.c_uint64

mpi = OPEN_MPI if expect("(unsigned long)&'ompi_mpi_communicators'") else MPICH
mpi_name = "Open MPI" if mpi is OPEN_MPI else "MPICH"
gdb.write(f"selftest: {mpi_name}, pid {inferior.pid}, {inferior.progspace.filename}\n")


def find(fn, name):
    out = u64(0)
    rc = fn(None, name.encode(), ctypes.byref(out))
    return rc, out.value


# Symbols and functions.
for name in mpi["symbols"]:
    rc, addr = find(t.find_symbol, name)
    want = expect(f"(unsigned long)&'{name}'")
    check(rc == capi.MPIQ_OK and addr == want and addr != 0,
          f"find_symbol({name}) = {rc} {addr:#x}, gdb says {want and hex(want)}")
for name in mpi["missing"] + NEVER:
    rc, addr = find(t.find_symbol, name)
    check(rc == capi.MPIQ_NOT_FOUND, f"find_symbol({name!r}) = {rc}, want NOT_FOUND")
for name in mpi["functions"]:
    rc, addr = find(t.find_function, name)
    want = expect(f"(unsigned long)&'{name}'")
    check(rc == capi.MPIQ_OK and addr == want, f"find_function({name}) = {rc} {addr:#x}, gdb says {want}")
    rc = t.find_function(None, name.encode(), None)
    check(rc == capi.MPIQ_OK, f"find_function({name}, NULL) = {rc}")

# MPIR_dll_name against the ELF symbol table: it lives in libmpi.so, not in
# the executable, so this checks the relocation to a runtime address.
rc, dll_name_addr = find(t.find_symbol, "MPIR_dll_name")
maps_file = f"/proc/{inferior.pid}/maps"
if inferior.pid > 0 and os.path.exists(maps_file):
    with open(maps_file) as f:
        maps = f.read().splitlines()
    for line in maps:
        parts = line.split()
        if len(parts) == 6 and "/libmpi.so" in parts[5] and int(parts[2], 16) == 0:
            base, path = int(parts[0].split("-")[0], 16), parts[5]
            nm = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True, check=True).stdout
            value = next(int(x.split()[0], 16) for x in nm.splitlines() if x.endswith(" MPIR_dll_name"))
            check(dll_name_addr == base + value, f"MPIR_dll_name at {dll_name_addr:#x}, ELF says {base + value:#x}")
            break
    else:
        check(False, f"no libmpi.so in {maps_file}")

# Memory.
buf = ctypes.create_string_buffer(256)
rc = t.read_memory(None, dll_name_addr, 256, buf)
dll = buf.raw.split(b"\0")[0].decode()
check(rc == capi.MPIQ_OK and dll.startswith("/") and dll.endswith(mpi["dll"]), f"MPIR_dll_name reads {dll!r}")
check(buf.raw == inferior.read_memory(dll_name_addr, 256).tobytes(), "read_memory differs from gdb's")
check(t.read_memory(None, dll_name_addr, 0, buf) == capi.MPIQ_OK, "read_memory of 0 bytes")
del lib.errors[:]
rc = t.read_memory(None, 0, 8, buf)
check(rc == capi.MPIQ_ERROR and lib.errors and "0x0" in lib.errors[-1], f"read_memory(0) = {rc} {lib.errors}")
rc = t.read_memory(None, 0xFFFFFFFFFFFFF000, 8, buf)
check(rc == capi.MPIQ_ERROR, f"read_memory(top of memory) = {rc}")

# Types, sizes and fields, including every member of anonymous structs/unions.
for name, fields in mpi["types"].items():
    rc, handle = find(t.find_type, name)
    check(rc == capi.MPIQ_OK, f"find_type({name}) = {rc}")
    if rc != capi.MPIQ_OK:
        continue
    size = u64(0)
    rc = t.size_of(None, handle, ctypes.byref(size))
    want = expect(f"sizeof({name})")
    check(rc == capi.MPIQ_OK and size.value == want, f"size_of({name}) = {rc} {size.value}, gdb says {want}")
    table = dump.fields(handle)
    for field in fields:
        check(field.encode() in table, f"{name} has no field {field}")
    for field in sorted(set(fields) | {f.decode() for f in table}) + ["no_such_field"]:
        off = u64(0)
        rc = t.field_offset(None, handle, field.encode(), ctypes.byref(off))
        want = expect(f"(unsigned long)&(({name} *)0)->{field}")
        got = off.value if rc == capi.MPIQ_OK else None
        check(got == want and rc in (capi.MPIQ_OK, capi.MPIQ_NOT_FOUND),
              f"field_offset({name}, {field}) = {rc} {got}, gdb says {want}")
for name in ["no_such_type_mpiq", "struct no_such_type_mpiq"]:
    rc, handle = find(t.find_type, name)
    check(rc == capi.MPIQ_NOT_FOUND, f"find_type({name}) = {rc}, want NOT_FOUND")
rc, handle = find(t.find_type, "char *")
check(rc == capi.MPIQ_OK, f"find_type(char *) = {rc}")

# Basic sizes, byte order, rank.
sizes = capi.MpiqTypeSizes()
rc = t.type_sizes(None, ctypes.byref(sizes))
got = (sizes.short_size, sizes.int_size, sizes.long_size, sizes.long_long_size, sizes.pointer_size)
want = tuple(expect(f"sizeof({n})") for n in ("short", "int", "long", "long long", "void *"))
check(rc == capi.MPIQ_OK and got == want, f"type_sizes = {rc} {got}, gdb says {want}")
order = ctypes.c_int32(7)
rc = t.byte_order(None, ctypes.byref(order))
big = "big endian" in gdb.execute("show endian", to_string=True)
check(rc == capi.MPIQ_OK and order.value == int(big), f"byte_order = {rc} {order.value}")
check(t.world_rank(None, ctypes.byref(order)) == capi.MPIQ_NOT_FOUND, "world_rank is not NOT_FOUND")

# Failures stay inside the callbacks.
del lib.errors[:]
rc = t.field_offset(None, 999999, b"x", ctypes.byref(u64()))
check(rc == capi.MPIQ_ERROR and lib.errors, f"field_offset(bad handle) = {rc} {lib.errors}")
rc = t.find_type(None, b"int", None)
check(rc == capi.MPIQ_ERROR, f"find_type(int, NULL) = {rc}")
rc = t.find_symbol(None, None, ctypes.byref(u64()))
check(rc in (capi.MPIQ_ERROR, capi.MPIQ_NOT_FOUND), f"find_symbol(NULL) = {rc}")
dump.interrupted = True
rc = t.read_memory(None, dll_name_addr, 8, buf)
check(rc == capi.MPIQ_INTERRUPTED, f"read_memory after Ctrl-C = {rc}")
dump.interrupted = False

# Costs, through the C function pointers.
N = 10000
page = dll_name_addr & ~4095


def timed(label, call):
    t0 = time.perf_counter()
    for _ in range(N):
        call()
    gdb.write(f"  {label:<34} {(time.perf_counter() - t0) / N * 1e6:6.2f} us/call\n")


out = u64()
rc, comm = find(t.find_type, next(iter(mpi["types"])))
first_field = next(iter(mpi["types"].values()))[0].encode()
gdb.write(f"selftest: per-call cost ({N} calls each, Python -> C -> Python):\n")
timed("read_memory 8 bytes", lambda: t.read_memory(None, dll_name_addr, 8, buf))
big_buf = ctypes.create_string_buffer(4096)
timed("read_memory 4096 bytes", lambda: t.read_memory(None, page, 4096, big_buf))
timed("find_symbol (cached)", lambda: t.find_symbol(None, b"MPIR_dll_name", ctypes.byref(out)))
timed("field_offset (cached)", lambda: t.field_offset(None, comm, first_field, ctypes.byref(out)))
dump.restore(selection())

gdb.write(f"selftest: {checks} checks, {len(failures)} failed\n" if failures
          else f"selftest: {checks} checks passed\n")
if failures:
    gdb.execute("quit 1")
