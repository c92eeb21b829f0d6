"""One `info mpi-queues`: the state its targets share, Ctrl-C while it runs,
and what is put back afterwards (gdb's language, the selected thread)."""

import ctypes
import signal

import gdb

from . import lookups
from .capi import MPIQ_ERROR, MpiqTargetStruct

_vp = ctypes.c_void_p


class MpiqDump:
    """State shared by the targets of one `info mpi-queues`: the type table,
    Ctrl-C, and what must be restored afterwards (language, selection)."""

    def __init__(self, lib, switching):
        self.lib = lib
        self.set_error = lib.mpiq_set_error
        self.switching = switching  # some target is not the selected inferior
        self.active = None
        self.moved = False  # a callback selected another thread (call stacks)
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
            table = self.field_tables[handle] = lookups.field_table(self._type(handle))
        return table

    def size(self, handle):
        t = self._type(handle)
        return None if lookups.incomplete(t) else t.sizeof

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
        selected = selection()
        try:
            self.use_c_language()
            with Sigint(self):
                rc = lib.mpiq_dump(array, len(structs), args.encode("utf-8", "surrogateescape"),
                                   ctypes.byref(out))
            text = ctypes.string_at(out.value).decode("utf-8", "replace") if out.value else ""
        finally:
            lib.mpiq_free(out)
            self.restore(selected)
        return rc, text

    def restore(self, selected):
        """Puts back the language and the (inferior, thread, frame) `selected`."""
        if self.saved_language not in (None, "c"):
            try:
                gdb.execute(f"set language {self.saved_language}", to_string=True)
            except gdb.error:
                pass
        if self.active is not None or self.moved:
            restore_selection(selected)


def selection():
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


def restore_selection(selected):
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


class Sigint:
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
        if Sigint._libc is None:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.sigaction.argtypes = [ctypes.c_int, _vp, _vp]
            libc.sigaction.restype = ctypes.c_int
            Sigint._libc = libc
        if Sigint._libc.sigaction(signal.SIGINT, new, old) != 0:
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
