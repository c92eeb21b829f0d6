"""What every Python mpiq example does the same way: examples/mpiq_example.h in Python.

arm_lifetime(): a safety net against leaked jobs. If the test harness dies
    without killing its job, the ranks would otherwise wait forever. This arms
    signal.alarm() with MPIQ_EXAMPLE_LIFETIME seconds (default 900; 0 disables
    it); SIGALRM's default action ends the rank (Python installs no handler for
    it), and the starter then takes down the rest of the job. Called before
    mpi4py.MPI is imported (that import calls MPI_Init_thread).

ready(rank): prints exactly one line "MPIQ-READY rank=<rank> pid=<os.getpid()>"
    to stdout (with emit()). The harness waits for one such line per rank.

emit(line): writes line and its newline to stdout in one write(2), after
    flushing what sys.stdout holds. print() writes the text and the newline
    separately, and unbuffered (PYTHONUNBUFFERED=1, as the harness runs the
    examples) they are two writes, which MPICH's hydra forwarded interleaved
    with other ranks' lines ("MPIQ-READY rank=1 pid=7MPIQ-READY rank=0 ...").

init_world(name, min_ranks, max_ranks=0): arms the lifetime, imports
    mpi4py.MPI with mpi4py's defaults (MPI_Init_thread with
    MPI_THREAD_MULTIPLE, MPI_Finalize at exit) and returns (MPI, COMM_WORLD).
    With fewer than min_ranks ranks, or more than max_ranks (0: no limit), it
    says so on stderr and every rank exits with status 2 (before any READY
    line), through MPI_Finalize: not MPI_Abort, whose tear-down may end the
    job before the launcher has passed the message on (seen once in CI under
    MPICH's Hydra: exit status 2, nothing on stderr).

The examples run as plain scripts, `python <script>.py`, not `python -m mpi4py
<script>.py`: an uncaught exception then ends the interpreter normally (the
traceback on stderr, then the exit handlers), and mpi4py's exit handler calls
MPI_Finalize. Under `-m mpi4py` it would call MPI_Abort instead.
"""

import os
import signal
import sys
import time

DEFAULT_LIFETIME = 900


def arm_lifetime():
    value = os.environ.get("MPIQ_EXAMPLE_LIFETIME", "")
    secs = int(value) if value else DEFAULT_LIFETIME
    if secs > 0:
        signal.alarm(secs)


def emit(line):
    sys.stdout.flush()
    data = (line + "\n").encode()
    while data:
        data = data[os.write(sys.stdout.fileno(), data) :]


def ready(rank):
    emit(f"MPIQ-READY rank={rank} pid={os.getpid()}")


def wait_forever():
    while True:
        time.sleep(3600)


def init_world(name, min_ranks, max_ranks=0):
    arm_lifetime()
    from mpi4py import MPI  # MPI_Init_thread

    comm = MPI.COMM_WORLD
    size = comm.Get_size()
    if size < min_ranks or (max_ranks > 0 and size > max_ranks):
        if min_ranks == max_ranks:
            print(f"{name}: needs exactly {min_ranks} ranks", file=sys.stderr, flush=True)
        else:
            print(f"{name}: needs at least {min_ranks} ranks", file=sys.stderr, flush=True)
        # Every rank sees the same size: all leave, and MPI_Finalize (at exit)
        # is reached by all.
        sys.exit(2)
    return MPI, comm
