"""raise_before_bcast.py - the most common hang of a Python MPI job: one rank
raises, the others wait for it in a collective.

Run with n >= 3 ranks (default in the harness: 3), as `python
raise_before_bcast.py` (not `python -m mpi4py`, which would call MPI_Abort).
Every rank first computes a little (work()), then, in solve():
  rank 1:    prints READY, then raises RuntimeError("rank 1 failed") before
             its comm.bcast(data, root=1). Nothing catches it: Python prints
             the traceback on stderr and ends; at exit mpi4py's handler calls
             MPI_Finalize, where rank 1 waits for the other ranks, forever.
  rank k!=1: prints READY, then value = comm.bcast(None, root=1) (the line
             marked "mpiq: bcast"), which waits for root 1, forever.

Queues on MPI_COMM_WORLD: nothing fixed (a broadcast's internal messages, if
any are posted, use the MPI library's own tags).

Where each rank sits (the MPI entry point of its main thread, seen with gdb's
bt on the test bed's four MPIs and the two PyPI wheels; examples/README.md has
every MPI's spelling):
  rank 1:    MPI_Finalize, called from mpi4py's exit handler below
             Py_FinalizeEx (no Python frame of this script is left). MPICH
             shows PMPI_Finalize > ... > MPID_Finalize; Open MPI only
             ompi_mpi_finalize (PMPI_Finalize tail-calls it: no frame).
  rank k!=1: MPI_Bcast, called by mpi4py's pickled bcast from solve() at the
             "mpiq: bcast" line: PMPI_Bcast (Open MPI), or MPI-4's
             large-count PMPI_Bcast_c (MPICH), which mpi4py prefers.

Designed verdict: deadlock: ranks k!=1 are in MPI_Bcast on MPI_COMM_WORLD with
root 1 and wait for it; rank 1 is in MPI_Finalize, where it waits for them,
and will never broadcast.
"""

import mpiq_example

WORK = 20_000


def work(rank):
    return sum((rank + 1) * i % 7 for i in range(WORK))


def solve(comm):
    rank = comm.Get_rank()
    data = None
    if rank == 1:
        data = {"step": 1, "values": [work(rank)]}
        mpiq_example.ready(rank)
        raise RuntimeError("rank 1 failed")
    mpiq_example.ready(rank)
    value = comm.bcast(data, root=1)  # mpiq: bcast (never returns)
    return value


def main():
    _, comm = mpiq_example.init_world("raise_before_bcast", 3)
    work(comm.Get_rank())
    solve(comm)


if __name__ == "__main__":
    main()
