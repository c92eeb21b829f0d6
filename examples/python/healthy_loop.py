"""healthy_loop.py - a healthy Python job: it communicates forever, until killed.

Run with n >= 2 ranks (default in the harness: 3).
Each world rank r, step s = 0, 1, 2, ... forever:
  total = comm.allreduce(s)                       (MPI_Allreduce), checked to be n * s
  got = comm.sendrecv((r, s), dest=(r + 1) % n,  (MPI_Sendrecv, after an
                      source=(r - 1 + n) % n)     MPI_Mprobe/MPI_Mrecv), checked
  a little computing, then time.sleep(0.05) without calling MPI.
READY is printed once, after step 0. Every 10 steps each rank prints
"MPIQ-PROGRESS rank=<r> step=<s>" (one write): a test sees the job progress as
those steps grow. The job never ends by itself: it runs until killed (or until
MPIQ_EXAMPLE_LIFETIME ends it).

Where the ranks are: most of the time in time.sleep (clock_nanosleep, no MPI
call), at times in MPI_Allreduce or MPI_Sendrecv.

Designed verdict: no deadlock: the ranks progress (two samples show them
moving between their MPI calls and sleep).
"""

import time

import mpiq_example

DELAY = 0.05
REPORT_EVERY = 10


def step(comm, s):
    rank, size = comm.Get_rank(), comm.Get_size()
    total = comm.allreduce(s)
    if total != size * s:
        raise RuntimeError(f"rank {rank} step {s}: allreduce gave {total}")
    left = (rank - 1 + size) % size
    got = comm.sendrecv((rank, s), dest=(rank + 1) % size, source=left)
    if got != (left, s):
        raise RuntimeError(f"rank {rank} step {s}: got {got} from {left}")
    return sum(i * i for i in range(1000))


def main():
    _, comm = mpiq_example.init_world("healthy_loop", 2)
    rank = comm.Get_rank()
    s = 0
    while True:
        step(comm, s)
        if s == 0:
            mpiq_example.ready(rank)
        if s % REPORT_EVERY == 0:
            mpiq_example.emit(f"MPIQ-PROGRESS rank={rank} step={s}")
        time.sleep(DELAY)
        s += 1


if __name__ == "__main__":
    main()
