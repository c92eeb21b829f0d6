"""mpiq for gdb: `info mpi-queues` shows the MPI message queues of a stopped
process, a process attached with `gdb -p PID`, or a core file.

Load it with `source /path/to/mpiq/gdb-python/mpiq.py` (in ~/.gdbinit, say).

This file is only a shim: it loads the mpiq library (libmpiq.so, built from
the bridge/ crate) through ctypes and answers its callbacks (mpiq.h's
`struct mpiq_target`) with gdb's Python API. All MPI logic lives in the
library. gdb sources this file into its shared `__main__` namespace, so every
top-level name carries an `mpiq`/`Mpiq` prefix.
"""

import ctypes
import os
import re
import signal
import threading

import gdb

# --- mpiq.h ----------------------------------------------------------------

MPIQ_API_VERSION = 1

MPIQ_OK = 0
MPIQ_NOT_FOUND = 1
MPIQ_ERROR = 2
MPIQ_INTERRUPTED = 3

MPIQ_DUMP_OK = 0
MPIQ_DUMP_USAGE = 1
MPIQ_DUMP_FAILED = 2
MPIQ_DUMP_INTERRUPTED = 3


class MpiqTypeSizes(ctypes.Structure):
    """struct mpiq_type_sizes"""

    _fields_ = [
        ("short_size", ctypes.c_int32),
        ("int_size", ctypes.c_int32),
        ("long_size", ctypes.c_int32),
        ("long_long_size", ctypes.c_int32),
        ("pointer_size", ctypes.c_int32),
    ]


_u64p = ctypes.POINTER(ctypes.c_uint64)
_i32p = ctypes.POINTER(ctypes.c_int32)
_c_int = ctypes.c_int
_vp = ctypes.c_void_p
_cp = ctypes.c_char_p

MPIQ_READ_MEMORY = ctypes.CFUNCTYPE(_c_int, _vp, ctypes.c_uint64, ctypes.c_uint64, _vp)
MPIQ_FIND_ADDRESS = ctypes.CFUNCTYPE(_c_int, _vp, _cp, _u64p)  # find_symbol, find_function
MPIQ_FIND_TYPE = ctypes.CFUNCTYPE(_c_int, _vp, _cp, _u64p)
MPIQ_FIELD_OFFSET = ctypes.CFUNCTYPE(_c_int, _vp, ctypes.c_uint64, _cp, _u64p)
MPIQ_SIZE_OF = ctypes.CFUNCTYPE(_c_int, _vp, ctypes.c_uint64, _u64p)
MPIQ_TYPE_SIZES = ctypes.CFUNCTYPE(_c_int, _vp, ctypes.POINTER(MpiqTypeSizes))
MPIQ_INT32_OUT = ctypes.CFUNCTYPE(_c_int, _vp, _i32p)  # byte_order, world_rank


class MpiqTargetStruct(ctypes.Structure):
    """struct mpiq_target"""

    _fields_ = [
        ("api_version", ctypes.c_uint32),
        ("ctx", _vp),
        ("read_memory", MPIQ_READ_MEMORY),
        ("find_symbol", MPIQ_FIND_ADDRESS),
        ("find_function", MPIQ_FIND_ADDRESS),
        ("find_type", MPIQ_FIND_TYPE),
        ("field_offset", MPIQ_FIELD_OFFSET),
        ("size_of", MPIQ_SIZE_OF),
        ("type_sizes", MPIQ_TYPE_SIZES),
        ("byte_order", MPIQ_INT32_OUT),
        ("world_rank", MPIQ_INT32_OUT),
        ("pid", ctypes.c_int64),
        ("executable", _cp),
    ]


# --- Loading libmpiq.so ----------------------------------------------------

_mpiq_here = os.path.dirname(os.path.abspath(__file__))


def _mpiq_library_candidates():
    """Where libmpiq.so is looked for, in order."""
    env = os.environ.get("MPIQ_LIB")
    if env:
        return [env]
    return [
        os.path.join(_mpiq_here, "libmpiq.so"),
        os.path.normpath(os.path.join(_mpiq_here, "..", "target", "release", "libmpiq.so")),
    ]


def _mpiq_open_library():
    """Loads libmpiq.so and declares its functions; raises gdb.GdbError."""
    candidates = _mpiq_library_candidates()
    path = next((os.path.abspath(p) for p in candidates if os.path.exists(p)), None)
    if path is None:
        raise gdb.GdbError(
            f"mpiq: libmpiq.so not found (looked for {' and '.join(candidates)}); "
            "build it with `cargo build --release` in the mpiq checkout, or set "
            "MPIQ_LIB to its path")
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise gdb.GdbError(f"mpiq: cannot load {path}: {e}")
    try:
        lib.mpiq_api_version.restype = ctypes.c_uint32
        lib.mpiq_api_version.argtypes = []
        lib.mpiq_dump.restype = ctypes.c_int
        lib.mpiq_dump.argtypes = [
            ctypes.POINTER(ctypes.POINTER(MpiqTargetStruct)), ctypes.c_size_t, _cp,
            ctypes.POINTER(_vp)]
        lib.mpiq_set_error.restype = None
        lib.mpiq_set_error.argtypes = [_cp]
        lib.mpiq_free.restype = None
        lib.mpiq_free.argtypes = [_vp]
        lib.mpiq_help.restype = _cp
        lib.mpiq_help.argtypes = []
        lib.mpiq_version.restype = _cp
        lib.mpiq_version.argtypes = []
    except AttributeError as e:
        raise gdb.GdbError(f"mpiq: {path} is not an mpiq library: {e}")
    version = lib.mpiq_api_version()
    if version != MPIQ_API_VERSION:
        raise gdb.GdbError(
            f"mpiq: {path} has API version {version}, this mpiq.py needs "
            f"{MPIQ_API_VERSION}; rebuild it (`cargo build --release`) from the "
            "checkout this file comes from")
    lib.mpiq_path = path
    return lib


_mpiq_lib = None
_mpiq_lib_error = None


def mpiq_library():
    """The loaded library; raises gdb.GdbError saying how to get one."""
    global _mpiq_lib, _mpiq_lib_error
    if _mpiq_lib is None:
        try:
            _mpiq_lib = _mpiq_open_library()
            _mpiq_lib_error = None
        except gdb.GdbError as e:
            _mpiq_lib_error = str(e)
            raise
    return _mpiq_lib


# --- One target process: the callbacks ------------------------------------

_mpiq_symbol_name = re.compile(r"[A-Za-z_][A-Za-z0-9_:.]*\Z")
_mpiq_aggregates = (gdb.TYPE_CODE_STRUCT, gdb.TYPE_CODE_UNION)
_mpiq_main_thread = threading.main_thread().ident

# Symbol and type lookups, kept across dumps: gdb answers a symbol that does
# not exist (the libraries probe several) only after searching every objfile,
# a few milliseconds each. Per inferior and process; forgotten whenever an
# objfile comes or goes or the process exits, since addresses may then change.
_mpiq_lookups = {}  # (inferior num, pid) -> ({(name, is function): addr or None}, {name: gdb.Type or None})


def _mpiq_forget_lookups(*_):
    _mpiq_lookups.clear()


def _mpiq_lookups_of(inferior):
    key = (inferior.num, inferior.pid)
    found = _mpiq_lookups.get(key)
    if found is None:
        found = _mpiq_lookups[key] = ({}, {})
    return found


if not globals().get("_mpiq_lookup_events"):
    for _mpiq_event in ("new_objfile", "clear_objfiles", "free_objfile", "exited", "inferior_deleted"):
        _mpiq_registry = getattr(gdb.events, _mpiq_event, None)
        if _mpiq_registry is not None:
            _mpiq_registry.connect(_mpiq_forget_lookups)
    _mpiq_lookup_events = True


class MpiqTarget:
    """struct mpiq_target for one gdb inferior, with its callbacks and caches.

    Every callback catches BaseException: an exception must never reach C
    (ctypes would print it and return garbage). A KeyboardInterrupt becomes
    MPIQ_INTERRUPTED; anything else is reported with mpiq_set_error and
    MPIQ_ERROR.
    """

    def __init__(self, dump, inferior, thread):
        self.dump = dump
        self.inferior = inferior
        self.thread = thread  # selected before lookups when several inferiors are dumped
        # (name (bytes), is a function) -> address or None; name -> gdb.Type or None
        self.symbols, self.known_types = _mpiq_lookups_of(inferior)
        self.types = {}  # name (bytes) -> this dump's handle or None
        self.basics = None  # (short, int, long, long long, pointer)
        self.big_endian = None
        pid = inferior.pid
        exe = inferior.progspace.filename if inferior.progspace else None
        self.executable = exe.encode("utf-8", "surrogateescape") if exe else None
        self.callbacks = self._callbacks()
        self.struct = MpiqTargetStruct(
            MPIQ_API_VERSION, None, *self.callbacks, pid if pid > 0 else -1, self.executable)

    def _fail(self, exc, what=None, arg=None):
        """Reports exc to mpiq (as "what 'arg': exc"); returns the status."""
        try:
            if isinstance(exc, KeyboardInterrupt):
                self.dump.interrupted = True
                return MPIQ_INTERRUPTED
            message = str(exc) or type(exc).__name__
            if isinstance(arg, bytes):
                arg = arg.decode("utf-8", "replace")
            if arg is not None:
                what = f"{what} '{arg}'"
            if what:
                message = f"{what}: {message}"
            self.dump.set_error(message.encode("utf-8", "replace"))
        except BaseException:  # noqa: BLE001 -- nothing may escape into C
            return MPIQ_ERROR
        return MPIQ_ERROR

    def _callbacks(self):
        """The ten callbacks, as closures over this target (fast locals)."""
        dump = self.dump
        fail = self._fail
        read = self.inferior.read_memory
        memmove = ctypes.memmove
        get_ident = threading.get_ident
        activate = self._activate if dump.switching else None
        symbols, types, known_types = self.symbols, self.types, self.known_types
        lookup_address, lookup_type = self._lookup_address, self._lookup_type
        MemoryError_ = gdb.MemoryError

        def read_memory(ctx, addr, length, buf):
            try:
                if dump.interrupted:
                    return MPIQ_INTERRUPTED
                if get_ident() != _mpiq_main_thread:
                    return dump.wrong_thread()
                if activate is not None and dump.active is not self:
                    activate()
                memmove(buf, read(addr, length).tobytes(), length)
                return MPIQ_OK
            except MemoryError_ as e:
                return fail(e)
            except BaseException as e:  # noqa: BLE001 -- nothing may escape into C
                return fail(e, "reading target memory at", addr)

        def find_address(name, out, function):
            if dump.interrupted:
                return MPIQ_INTERRUPTED
            if get_ident() != _mpiq_main_thread:
                return dump.wrong_thread()
            key = (name, function)
            if key in symbols:
                addr = symbols[key]
            else:
                if activate is not None and dump.active is not self:
                    activate()
                addr = symbols[key] = lookup_address(name.decode("utf-8", "replace"), function)
            if addr is None:
                return MPIQ_NOT_FOUND
            if out:  # both MQD libraries pass NULL, to make the host load debug info
                out[0] = addr
            return MPIQ_OK

        def find_symbol(ctx, name, out):
            try:
                return find_address(name, out, False)
            except BaseException as e:  # noqa: BLE001 -- nothing may escape into C
                return fail(e, "looking up symbol", name)

        def find_function(ctx, name, out):
            try:
                return find_address(name, out, True)
            except BaseException as e:  # noqa: BLE001 -- nothing may escape into C
                return fail(e, "looking up function", name)

        def find_type(ctx, name, out):
            try:
                if dump.interrupted:
                    return MPIQ_INTERRUPTED
                if get_ident() != _mpiq_main_thread:
                    return dump.wrong_thread()
                if name in types:
                    handle = types[name]
                else:
                    if name in known_types:
                        t = known_types[name]
                    else:
                        if activate is not None and dump.active is not self:
                            activate()
                        t = known_types[name] = lookup_type(name.decode("utf-8", "replace"))
                    handle = types[name] = None if t is None else dump.add_type(t)
                if handle is None:
                    return MPIQ_NOT_FOUND
                out[0] = handle
                return MPIQ_OK
            except BaseException as e:  # noqa: BLE001 -- nothing may escape into C
                return fail(e, "looking up type", name)

        def field_offset(ctx, handle, field, out):
            try:
                if dump.interrupted:
                    return MPIQ_INTERRUPTED
                if get_ident() != _mpiq_main_thread:
                    return dump.wrong_thread()
                offset = dump.fields(handle).get(field)
                if offset is None:
                    return MPIQ_NOT_FOUND
                out[0] = offset
                return MPIQ_OK
            except BaseException as e:  # noqa: BLE001 -- nothing may escape into C
                return fail(e, "offset of field", field)

        def size_of(ctx, handle, out):
            try:
                if dump.interrupted:
                    return MPIQ_INTERRUPTED
                if get_ident() != _mpiq_main_thread:
                    return dump.wrong_thread()
                size = dump.size(handle)
                if size is None:
                    return MPIQ_NOT_FOUND
                out[0] = size
                return MPIQ_OK
            except BaseException as e:  # noqa: BLE001 -- nothing may escape into C
                return fail(e, "size of type handle", handle)

        def type_sizes(ctx, out):
            try:
                if dump.interrupted:
                    return MPIQ_INTERRUPTED
                if get_ident() != _mpiq_main_thread:
                    return dump.wrong_thread()
                if self.basics is None:
                    if activate is not None and dump.active is not self:
                        activate()
                    self.basics = tuple(
                        gdb.lookup_type(n).sizeof for n in ("short", "int", "long", "long long")
                    ) + (gdb.lookup_type("void").pointer().sizeof,)
                s = out[0]
                s.short_size, s.int_size, s.long_size, s.long_long_size, s.pointer_size = self.basics
                return MPIQ_OK
            except BaseException as e:  # noqa: BLE001 -- nothing may escape into C
                return fail(e, "sizes of the basic types")

        def byte_order(ctx, out):
            try:
                if dump.interrupted:
                    return MPIQ_INTERRUPTED
                if get_ident() != _mpiq_main_thread:
                    return dump.wrong_thread()
                if self.big_endian is None:
                    if activate is not None and dump.active is not self:
                        activate()
                    shown = gdb.execute("show endian", to_string=True)
                    self.big_endian = 1 if "big endian" in shown else 0
                out[0] = self.big_endian
                return MPIQ_OK
            except BaseException as e:  # noqa: BLE001 -- nothing may escape into C
                return fail(e, "byte order")

        def world_rank(ctx, out):
            try:
                return MPIQ_INTERRUPTED if dump.interrupted else MPIQ_NOT_FOUND
            except BaseException as e:  # noqa: BLE001 -- nothing may escape into C
                return fail(e, "world rank")

        return (
            MPIQ_READ_MEMORY(read_memory),
            MPIQ_FIND_ADDRESS(find_symbol),
            MPIQ_FIND_ADDRESS(find_function),
            MPIQ_FIND_TYPE(find_type),
            MPIQ_FIELD_OFFSET(field_offset),
            MPIQ_SIZE_OF(size_of),
            MPIQ_TYPE_SIZES(type_sizes),
            MPIQ_INT32_OUT(byte_order),
            MPIQ_INT32_OUT(world_rank),
        )

    def _activate(self):
        """Selects this inferior: gdb 13 looks up symbols and types, and
        reads memory, in the current inferior."""
        if gdb.selected_inferior().num != self.inferior.num:
            self.thread.switch()
        self.dump.active = self

    def _lookup_address(self, name, function):
        """Runtime address of a symbol in any loaded object, or None.

        Debug info first (fast), then gdb's expression evaluator, which also
        sees ELF symbol tables: gdb 13's Python has no minimal-symbol API."""
        if not _mpiq_symbol_name.match(name):
            return None
        for lookup in (gdb.lookup_global_symbol, gdb.lookup_static_symbol):
            sym = lookup(name)
            if sym is None or sym.needs_frame:
                continue
            if not (sym.is_function if function else (sym.is_variable or sym.is_function)):
                continue
            try:
                address = sym.value().address
            except gdb.error:  # thread-local and the like: ask the evaluator
                continue
            if address is not None:
                return int(address)
        try:
            return int(gdb.parse_and_eval(f"(unsigned long)&'{name}'"))
        except gdb.MemoryError:
            raise
        except gdb.error:  # No symbol "..." in current context.
            return None

    @staticmethod
    def _lookup_type(name):
        """gdb.Type for "X", "struct X", "union X", "enum X", a typedef or
        "T *"; a complete definition over an opaque declaration. None if
        there is none."""
        name = " ".join(name.split())
        if name.endswith("*"):
            t = MpiqTarget._lookup_type(name[:-1])
            return None if t is None else t.pointer()
        tag, _, bare = name.rpartition(" ")
        if tag not in ("struct", "union", "enum"):
            tag, bare = "", name
        # A C struct tag is not a type name: "X" may only exist as "struct X".
        for spelling in ([name] if tag else [name, "struct " + name, "union " + name]):
            try:
                found = gdb.lookup_type(spelling).strip_typedefs()
            except gdb.error:
                continue
            if not _mpiq_incomplete(found):
                return found
        # gdb.lookup_type found only a declaration (or nothing): search every
        # objfile's global and static blocks for a definition.
        domains = [gdb.SYMBOL_STRUCT_DOMAIN] if tag else [gdb.SYMBOL_VAR_DOMAIN, gdb.SYMBOL_STRUCT_DOMAIN]
        for objfile in gdb.objfiles():
            for domain in domains:
                for lookup in (objfile.lookup_global_symbol, objfile.lookup_static_symbol):
                    sym = lookup(bare, domain)
                    if sym is None or sym.addr_class != gdb.SYMBOL_LOC_TYPEDEF:
                        continue
                    t = sym.type.strip_typedefs()
                    if not _mpiq_incomplete(t):
                        return t
        return None


def _mpiq_incomplete(t):
    """Whether t is a struct/union declared but not defined here."""
    return t.code in _mpiq_aggregates and t.sizeof == 0 and not t.fields()


def _mpiq_field_table(t):
    """{field name (bytes): byte offset} of a struct/union, members of
    anonymous structs/unions (and C++ base classes) included."""
    table = {}

    def walk(t, base):
        nested = []
        for f in t.fields():
            bitpos = getattr(f, "bitpos", None)  # None: a C++ static member
            if bitpos is None:
                continue
            offset = base + bitpos // 8
            if f.name and not f.is_base_class:
                table.setdefault(f.name.encode(), offset)
            else:
                nested.append((f.type.strip_typedefs(), offset))
        for ft, offset in nested:
            if ft.code in _mpiq_aggregates:
                walk(ft, offset)

    if t.code in _mpiq_aggregates:
        walk(t, 0)
    return table


# --- One dump ----------------------------------------------------------------

class MpiqDump:
    """State shared by the targets of one `info mpi-queues`: the type table,
    Ctrl-C, and what must be restored afterwards (language, selection)."""

    def __init__(self, lib, switching):
        self.lib = lib
        self.set_error = lib.mpiq_set_error
        self.switching = switching  # some target is not the selected inferior
        self.active = None
        self.interrupted = False
        self.type_list = []  # handle - 1 -> gdb.Type (typedefs stripped)
        self.field_tables = {}  # handle -> {name: offset}
        self.saved_language = None

    def add_type(self, t):
        self.type_list.append(t)
        return len(self.type_list)

    def _type(self, handle):
        if not 0 < handle <= len(self.type_list):
            raise ValueError(f"unknown type handle {handle}")
        return self.type_list[handle - 1]

    def fields(self, handle):
        table = self.field_tables.get(handle)
        if table is None:
            table = self.field_tables[handle] = _mpiq_field_table(self._type(handle))
        return table

    def size(self, handle):
        t = self._type(handle)
        return None if _mpiq_incomplete(t) else t.sizeof

    def wrong_thread(self):
        self.set_error(b"mpiq called back from a thread other than gdb's main thread")
        return MPIQ_ERROR

    def use_c_language(self):
        """Type names and symbol expressions are C: switch the language for
        the dump (in a Fortran frame neither "long" nor "&x" would parse)."""
        if self.saved_language is None:
            language = gdb.parameter("language")
            self.saved_language = language
            if language != "c":
                gdb.execute("set language c", to_string=True)

    def run(self, targets, args):
        """Calls mpiq_dump; returns (status, output)."""
        lib = self.lib
        structs = [ctypes.pointer(t.struct) for t in targets]
        array = (ctypes.POINTER(MpiqTargetStruct) * len(structs))(*structs)
        out = _vp()
        selected = _mpiq_selection()
        try:
            self.use_c_language()
            with MpiqSigint(self):
                rc = lib.mpiq_dump(array, len(structs), args.encode("utf-8", "surrogateescape"),
                                   ctypes.byref(out))
            text = ctypes.string_at(out.value).decode("utf-8", "replace") if out.value else ""
        finally:
            lib.mpiq_free(out)
            self._restore(selected)
        return rc, text

    def _restore(self, selected):
        if self.saved_language not in (None, "c"):
            try:
                gdb.execute(f"set language {self.saved_language}", to_string=True)
            except gdb.error:
                pass
        if self.active is not None:
            _mpiq_restore_selection(selected)


def _mpiq_selection():
    """(inferior, thread, frame) selected now, as far as they exist."""
    inferior = gdb.selected_inferior()
    thread = gdb.selected_thread()
    frame = None
    if thread is not None:
        try:
            frame = gdb.selected_frame()
        except gdb.error:
            pass
    return inferior, thread, frame


def _mpiq_restore_selection(selected):
    inferior, thread, frame = selected
    try:
        if thread is not None and thread.is_valid():
            thread.switch()
            if frame is not None and frame.is_valid():
                frame.select()
        elif inferior.is_valid():
            gdb.execute(f"inferior {inferior.num}", to_string=True)
    except gdb.error:
        pass


class MpiqSigint:
    """Turns Ctrl-C during a dump into a flag the callbacks check.

    gdb hands Ctrl-C to Python (PyErr_SetInterrupt), which raises
    KeyboardInterrupt at the next point the interpreter checks for signals.
    That point is usually the entry of the next callback, before its `try`,
    where the exception would escape into C. While a dump runs, the
    Python-level SIGINT handler therefore only records the interrupt.
    signal.signal() also installs Python's own C-level handler, so gdb's C
    handler is saved and put back around it with sigaction(2).
    """

    _libc = None

    def __init__(self, dump):
        self.dump = dump
        self.previous = None
        self.saved = None

    def _record(self, signum, frame):
        self.dump.interrupted = True

    def _sigaction(self, new, old):
        if MpiqSigint._libc is None:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.sigaction.argtypes = [ctypes.c_int, _vp, _vp]
            libc.sigaction.restype = ctypes.c_int
            MpiqSigint._libc = libc
        if MpiqSigint._libc.sigaction(signal.SIGINT, new, old) != 0:
            raise OSError(ctypes.get_errno(), "sigaction failed")

    def __enter__(self):
        try:
            previous = signal.getsignal(signal.SIGINT)
            if not callable(previous):
                return self  # not Python's to change; KeyboardInterrupt is still caught
            saved = ctypes.create_string_buffer(1024)  # > sizeof(struct sigaction)
            self._sigaction(None, saved)
            self.previous = signal.signal(signal.SIGINT, self._record)
            self.saved = saved
            self._sigaction(saved, None)
        except (OSError, ValueError, TypeError, AttributeError):
            pass
        return self

    def __exit__(self, *exc):
        if self.previous is not None:
            try:
                signal.signal(signal.SIGINT, self.previous)
            finally:
                self._sigaction(self.saved, None)
        return False


# --- The command line --------------------------------------------------------

def mpiq_split_words(line):
    """(start, end, word) for each word, split as mpiq_dump splits its
    arguments: on white space, quotes group, a backslash escapes."""
    words = []
    i, n = 0, len(line)
    while i < n:
        if line[i].isspace():
            i += 1
            continue
        start, chars, quote = i, [], None
        while i < n:
            c = line[i]
            if c == "\\":
                i += 1
                if i < n:
                    chars.append(line[i])
            elif quote is not None:
                if c == quote:
                    quote = None
                else:
                    chars.append(c)
            elif c in "'\"":
                quote = c
            elif c.isspace():
                break
            else:
                chars.append(c)
            i += 1
        words.append((start, i, "".join(chars)))
    return words


def mpiq_quote(word):
    """word quoted for mpiq_split_words."""
    return "'" + word.replace("\\", "\\\\").replace("'", "\\'") + "'"


_mpiq_valued = ("--comm", "--queue", "--dll", "--inferiors")


def mpiq_parse_args(line):
    """Splits off what the shim handles. Returns (rest of the line for
    mpiq_dump, --inferiors value or None, --help given, --dll given)."""
    words = mpiq_split_words(line)
    spec, cut, wants_help, has_dll = None, [], False, False
    k = 0
    while k < len(words):
        start, end, word = words[k]
        flag, eq, value = word.partition("=")
        if not flag.startswith("--"):
            flag, eq = word, ""
        if word in ("--help", "-h"):
            wants_help = True
        if flag == "--dll":
            has_dll = True
        if flag in _mpiq_valued and not eq:
            k += 1  # the next word is this flag's value
            if k < len(words):
                value, end = words[k][2], words[k][1]
            else:
                value = ""
        if flag == "--inferiors":
            if not value:
                raise gdb.GdbError("--inferiors needs a value: all, or inferior numbers like 1,3")
            spec = value
            cut.append((start, end))
        k += 1
    for start, end in reversed(cut):
        line = line[:start] + line[end:]
    return line.strip(), spec, wants_help, has_dll


def mpiq_select_inferiors(spec):
    """The inferiors --inferiors names (default: the current one), checked."""
    if spec is None:
        chosen, skip_empty = [gdb.selected_inferior()], False
    elif spec == "all":
        chosen, skip_empty = sorted(gdb.inferiors(), key=lambda i: i.num), True
    else:
        by_num = {i.num: i for i in gdb.inferiors()}
        chosen, skip_empty = [], False
        for part in spec.split(","):
            m = re.match(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?\Z", part)
            if not m:
                raise gdb.GdbError(f"--inferiors: '{part}' is not an inferior number; use all or a list like 1,3")
            low = int(m.group(1))
            for num in range(low, int(m.group(2) or low) + 1):
                if num not in by_num:
                    raise gdb.GdbError(f"--inferiors: no inferior {num} (see `info inferiors`)")
                if by_num[num] not in chosen:
                    chosen.append(by_num[num])
    several = len(chosen) > 1 or spec is not None
    result = []
    for inf in chosen:
        where = f"inferior {inf.num}: " if several else ""
        threads = inf.threads() if inf.is_valid() else ()
        if not threads:
            if skip_empty:
                continue
            raise gdb.GdbError(f"{where}no process: run, attach or load a core file")
        if any(t.is_running() for t in threads):
            raise gdb.GdbError(f"{where}the process is running; interrupt it first")
        thread = gdb.selected_thread()
        if thread is None or thread.inferior.num != inf.num:
            thread = min(threads, key=lambda t: t.num)
        result.append((inf, thread))
    if not result:
        raise gdb.GdbError("no inferior has a process: run, attach or load a core file")
    return result


# --- Commands ----------------------------------------------------------------

_MPIQ_INFERIORS_HELP = (
    "  --inferiors I   read inferiors I: all, or numbers like 1,3 "
    "(default: the current one)\n")


def _mpiq_command_doc():
    try:
        body = mpiq_library().mpiq_help().decode("utf-8", "replace")
    except gdb.GdbError as e:
        body = f"({e})\n"
    if not body.endswith("\n"):
        body += "\n"
    return (
        "Show the MPI message queues of the process.\n"
        "Usage: info mpi-queues [--json] [--all] [--comm NAME|ID] [--queue sends|receives|unexpected]\n"
        "                       [--dll FILE] [--stats] [--inferiors all|N,M]\n\n"
        + body + _MPIQ_INFERIORS_HELP
        + "\nThe process must be stopped (or be a core file). `set mpi dll-path FILE`\n"
        "makes --dll FILE the default. Ctrl-C stops a long dump.")


class MpiqInfoQueues(gdb.Command):
    # __doc__ is set below, from mpiq_help().

    def __init__(self):
        super().__init__("info mpi-queues", gdb.COMMAND_STATUS, gdb.COMPLETE_NONE)

    def invoke(self, arg, from_tty):
        args, spec, wants_help, has_dll = mpiq_parse_args(arg or "")
        if wants_help:
            gdb.write(self.__doc__ + "\n")
            return
        lib = mpiq_library()
        chosen = mpiq_select_inferiors(spec)
        dll = mpiq_dll_path.value
        if dll and not has_dll:
            args = (args + " --dll " + mpiq_quote(dll)).strip()
        current = gdb.selected_inferior().num
        dump = MpiqDump(lib, switching=any(inf.num != current for inf, _ in chosen))
        targets = [MpiqTarget(dump, inf, thread) for inf, thread in chosen]
        rc, text = dump.run(targets, args)
        if rc == MPIQ_DUMP_OK:
            gdb.write(text if text.endswith("\n") else text + "\n")
            return
        text = text.strip()
        if rc == MPIQ_DUMP_INTERRUPTED or dump.interrupted:
            raise gdb.GdbError(text if text.startswith("interrupted") else "interrupted: the message queue dump was stopped")
        if rc == MPIQ_DUMP_USAGE:
            raise gdb.GdbError(" ".join(text.split("\n")).replace("(try --help)", "(try `help info mpi-queues`)"))
        raise gdb.GdbError(text or f"mpiq_dump failed (status {rc})")


class MpiqSetPrefix(gdb.Command):
    """Settings of mpiq's `info mpi-queues`."""

    def __init__(self):
        super().__init__("set mpi", gdb.COMMAND_DATA, gdb.COMPLETE_NONE, True)

    def invoke(self, arg, from_tty):
        gdb.execute("help set mpi", from_tty)


class MpiqShowPrefix(gdb.Command):
    """Settings of mpiq's `info mpi-queues`."""

    def __init__(self):
        super().__init__("show mpi", gdb.COMMAND_DATA, gdb.COMPLETE_NONE, True)

    def invoke(self, arg, from_tty):
        gdb.execute("show mpi dll-path", from_tty)


class MpiqDllPath(gdb.Parameter):
    """The message queue debug library (MQD DLL) `info mpi-queues` loads
    instead of the one the MPI library names in MPIR_dll_name; empty for
    that one. An explicit --dll FILE wins."""

    set_doc = "Set the MPI message queue debug library used by info mpi-queues."
    show_doc = "Show the MPI message queue debug library used by info mpi-queues."

    def __init__(self):
        super().__init__("mpi dll-path", gdb.COMMAND_DATA, gdb.PARAM_OPTIONAL_FILENAME)

    def get_set_string(self):
        return ""

    def get_show_string(self, svalue):
        if svalue:
            return f"info mpi-queues loads the debug library {svalue}."
        return "info mpi-queues loads the debug library the MPI library names (MPIR_dll_name)."


try:
    mpiq_library()
except gdb.GdbError as _mpiq_e:
    gdb.write(f"warning: {_mpiq_e}\n", gdb.STDERR)
MpiqInfoQueues.__doc__ = _mpiq_command_doc()
MpiqSetPrefix()
MpiqShowPrefix()
mpiq_dll_path = MpiqDllPath()
MpiqInfoQueues()
