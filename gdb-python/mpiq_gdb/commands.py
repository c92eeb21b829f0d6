"""gdb's commands: `info mpi-queues`, `set mpi dll-path`, `show mpi dll-path`."""

import gdb

from .capi import MPIQ_DUMP_INTERRUPTED, MPIQ_DUMP_OK, MPIQ_DUMP_USAGE
from .dump import MpiqDump
from .library import library
from .options import parse_args, quote, select_inferiors, usage_and_body, valued_flags
from .target import MpiqTarget

# gdb's own part of the help, after the library's (whose --targets line is
# the same as lldb's).
_GDB_HELP = (
    "\nIn gdb, --targets picks inferiors (`info inferiors` numbers them); --inferiors\n"
    "is its other spelling. The process must be stopped (or be a core file).\n"
    "`set mpi dll-path FILE` makes --dll FILE the default. Ctrl-C stops a long dump.")

# The flags that take a value, from mpiq_help() (set by command_doc()).
_valued = valued_flags("")


def command_doc():
    """`help info mpi-queues`: the usage line and the help made from the
    library's option table (mpiq_help()), then the shim's part."""
    global _valued
    try:
        help_text = library().mpiq_help().decode("utf-8", "replace")
    except gdb.GdbError as e:
        help_text = f"({e})\n"
    _valued = valued_flags(help_text)
    usage, body = usage_and_body(help_text, "info mpi-queues")
    if not body.endswith("\n"):
        body += "\n"
    return "Show the MPI message queues of the process.\n" + usage + "\n\n" + body + _GDB_HELP


class InfoQueues(gdb.Command):
    # __doc__ is set by register(), from mpiq_help().

    def __init__(self):
        super().__init__("info mpi-queues", gdb.COMMAND_STATUS, gdb.COMPLETE_NONE)

    def invoke(self, arg, from_tty):
        args, spec, wants_help, has_dll = parse_args(arg or "", _valued)
        if wants_help:
            gdb.write(self.__doc__ + "\n")
            return
        lib = library()
        chosen = select_inferiors(spec)
        dll = dll_path.value
        if dll and not has_dll:
            args = (args + " --dll " + quote(dll)).strip()
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


class SetPrefix(gdb.Command):
    """Settings of mpiq's `info mpi-queues`."""

    def __init__(self):
        super().__init__("set mpi", gdb.COMMAND_DATA, gdb.COMPLETE_NONE, True)

    def invoke(self, arg, from_tty):
        gdb.execute("help set mpi", from_tty)


class ShowPrefix(gdb.Command):
    """Settings of mpiq's `info mpi-queues`."""

    def __init__(self):
        super().__init__("show mpi", gdb.COMMAND_DATA, gdb.COMPLETE_NONE, True)

    def invoke(self, arg, from_tty):
        gdb.execute("show mpi dll-path", from_tty)


class DllPath(gdb.Parameter):
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


dll_path = None  # the `mpi dll-path` parameter, once registered


def register():
    """Loads libmpiq.so (a warning if it cannot be: the commands then say how
    to build it) and (re)defines the commands, as each `source mpiq.py` did."""
    global dll_path
    try:
        library()
    except gdb.GdbError as e:
        gdb.write(f"warning: {e}\n", gdb.STDERR)
    InfoQueues.__doc__ = command_doc()
    SetPrefix()
    ShowPrefix()
    dll_path = DllPath()
    InfoQueues()
