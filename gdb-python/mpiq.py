"""mpiq for gdb: `info mpi-queues` shows the MPI message queues of a stopped
process, a process attached with `gdb -p PID`, or a core file.

Load it with `source /path/to/mpiq/gdb-python/mpiq.py` (in ~/.gdbinit, say).

This file only loads the package beside it, mpiq_gdb/, which is a shim: it
loads the mpiq library (libmpiq.so, built from the bridge/ crate) through
ctypes and answers its callbacks (mpiq.h's `struct mpiq_target`) with gdb's
Python API. All MPI logic lives in the library. gdb sources this file into
its shared `__main__` namespace, so it defines one name, `_mpiq_load`.
"""


def _mpiq_load():
    """Imports mpiq_gdb from this file's directory and (re)defines the
    commands. Sourcing it again keeps the loaded package; sourcing another
    checkout's mpiq.py switches to that checkout's package."""
    import importlib
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    if here in sys.path:
        sys.path.remove(here)
    sys.path.insert(0, here)
    loaded = sys.modules.get("mpiq_gdb")
    if loaded is not None and os.path.dirname(os.path.dirname(os.path.abspath(loaded.__file__))) != here:
        for name in [n for n in sys.modules if n == "mpiq_gdb" or n.startswith("mpiq_gdb.")]:
            del sys.modules[name]
    importlib.import_module("mpiq_gdb.commands").register()


_mpiq_load()
