"""struct mpiq_target for one gdb inferior: the callbacks libmpiq.so calls
while it dumps, answered with gdb's Python API."""

import ctypes
import threading

import gdb

from . import lookups, stacks
from .capi import (
    MPIQ_API_VERSION,
    MPIQ_ERROR,
    MPIQ_FIELD_OFFSET,
    MPIQ_FIND_ADDRESS,
    MPIQ_FIND_TYPE,
    MPIQ_FRAME_VALUE,
    MPIQ_IDENTITY,
    MPIQ_INT32_OUT,
    MPIQ_INTERRUPTED,
    MPIQ_NOT_FOUND,
    MPIQ_OK,
    MPIQ_READ_MEMORY,
    MPIQ_SIZE_OF,
    MPIQ_STACKS,
    MPIQ_TYPE_SIZES,
    MpiqTargetStruct,
)

# gdb's API may only be used from its main thread; a callback on any other
# thread fails instead of touching it.
_main_thread = threading.main_thread().ident


def _is_live(inferior):
    """Whether gdb runs this inferior as a live process (not a core file)."""
    try:
        connection = inferior.connection  # gdb 11 and later
        return connection is not None and connection.type == "native"
    except AttributeError:
        return False


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
        # This dump's answers (libmpiq keeps them across dumps, by identity):
        # (name (bytes), is a function) -> address or None; name -> gdb.Type or None
        self.symbols, self.known_types = {}, {}
        self.identity = lookups.identity(inferior).encode()
        self.stacks_json = None  # kept alive while libmpiq reads it
        self.types = {}  # name (bytes) -> this dump's handle or None
        self.basics = None  # (short, int, long, long long, pointer)
        self.big_endian = None
        pid = inferior.pid
        exe = inferior.progspace.filename if inferior.progspace else None
        self.executable = exe.encode("utf-8", "surrogateescape") if exe else None
        self.callbacks = self._callbacks()
        self.struct = MpiqTargetStruct(
            MPIQ_API_VERSION, None, *self.callbacks[:9], pid if pid > 0 else -1, self.executable,
            *self.callbacks[9:], 1 if pid > 0 and _is_live(inferior) else 0)

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
        """The callbacks, as closures over this target (fast locals)."""
        dump = self.dump
        fail = self._fail
        read = self.inferior.read_memory
        memmove = ctypes.memmove
        get_ident = threading.get_ident
        activate = self._activate if dump.switching else None
        symbols, types, known_types = self.symbols, self.types, self.known_types
        lookup_address, lookup_type = lookups.lookup_address, lookups.lookup_type
        MemoryError_ = gdb.MemoryError

        def read_memory(ctx, addr, length, buf):
            try:
                if dump.interrupted:
                    return MPIQ_INTERRUPTED
                if get_ident() != _main_thread:
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
            if get_ident() != _main_thread:
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
                if get_ident() != _main_thread:
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
                if get_ident() != _main_thread:
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
                if get_ident() != _main_thread:
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
                if get_ident() != _main_thread:
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
                if get_ident() != _main_thread:
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

        def identity(ctx, buf, length):
            try:
                key = self.identity
                if len(key) + 1 > length:
                    return MPIQ_NOT_FOUND
                memmove(buf, key + b"\0", len(key) + 1)
                return MPIQ_OK
            except BaseException as e:  # noqa: BLE001 -- nothing may escape into C
                return fail(e, "identity")

        def stacks_cb(ctx, out):
            try:
                if dump.interrupted:
                    return MPIQ_INTERRUPTED
                if get_ident() != _main_thread:
                    return dump.wrong_thread()
                self.stacks_json = stacks.stacks_json(self.inferior)
                dump.active = None  # the selected thread changed:
                dump.moved = True  # reactivate before the next lookup, restore at the end
                out[0] = self.stacks_json
                return MPIQ_OK
            except BaseException as e:  # noqa: BLE001 -- nothing may escape into C
                return fail(e, "call stacks")

        def frame_value(ctx, tid, index, name, out):
            try:
                if dump.interrupted:
                    return MPIQ_INTERRUPTED
                if get_ident() != _main_thread:
                    return dump.wrong_thread()
                dump.active = None  # the selected thread changes:
                dump.moved = True  # reactivate before the next lookup, restore at the end
                value = stacks.frame_value(self.inferior, tid, index, name.decode("utf-8", "replace"))
                if value is None:
                    return MPIQ_NOT_FOUND
                out[0] = value
                return MPIQ_OK
            except BaseException as e:  # noqa: BLE001 -- nothing may escape into C
                return fail(e, "value of a frame's variable in thread", tid)

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
            MPIQ_IDENTITY(identity),
            MPIQ_STACKS(stacks_cb),
            MPIQ_FRAME_VALUE(frame_value),
        )

    def _activate(self):
        """Selects this inferior: gdb 13 looks up symbols and types, and
        reads memory, in the current inferior."""
        if gdb.selected_inferior().num != self.inferior.num:
            self.thread.switch()
        self.dump.active = self
