"""Finding and loading libmpiq.so, once per gdb session."""

import ctypes
import os

import gdb

from .capi import MPIQ_API_VERSION, declare

# gdb-python/, where mpiq.py is: the places libmpiq.so is looked for are
# relative to the file users source, not to this package.
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def candidates():
    """Where libmpiq.so is looked for, in order."""
    env = os.environ.get("MPIQ_LIB")
    if env:
        return [env]
    return [
        os.path.join(HERE, "libmpiq.so"),
        # An installation (the wheel, the tarball): <prefix>/share/mpiq/gdb/
        # holds this script, <prefix>/lib/ the library.
        os.path.normpath(os.path.join(HERE, "..", "..", "..", "lib", "libmpiq.so")),
        os.path.normpath(os.path.join(HERE, "..", "target", "release", "libmpiq.so")),
    ]


def _open():
    """Loads libmpiq.so and declares its functions; raises gdb.GdbError."""
    tried = candidates()
    path = next((os.path.abspath(p) for p in tried if os.path.exists(p)), None)
    if path is None:
        raise gdb.GdbError(
            f"mpiq: libmpiq.so not found (looked for {' and '.join(tried)}); "
            "build it with `cargo build --release` in the mpiq checkout, or set "
            "MPIQ_LIB to its path; `mpiq setup gdb` prints the lines for this installation")
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise gdb.GdbError(f"mpiq: cannot load {path}: {e}")
    try:
        declare(lib)
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


_lib = None


def library():
    """The loaded library; raises gdb.GdbError saying how to get one (and
    tries again next time, so building it later needs no restart)."""
    global _lib
    if _lib is None:
        _lib = _open()
    return _lib
