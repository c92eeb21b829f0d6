"""p2p_cycle.py - a receive cycle in Python: every rank receives before it sends.

Run with n >= 2 ranks (default in the harness: 3).
Each world rank r, in exchange(): prints READY, then
  comm.recv(source=(r + 1) % n, tag=7)   (the line marked "mpiq: recv")
and only after that would send to (r - 1 + n) % n with tag 7. No rank sends:
every rank waits for its right neighbour, forever.

mpi4py's pickled recv() with no buffer does not know the message's size, so
it probes first: MPI_Mprobe(source, tag 7), then MPI_Mrecv of the probed
message (mpi4py.rc.recv_mprobe, on by default). The ranks therefore sit in
MPI_Mprobe (PMPI_Mprobe in every MPI of the test bed), not in MPI_Recv,
and no receive is posted: the queues show nothing for it.

Designed verdict: deadlock, cycle 0 -> 1 -> ... -> n-1 -> 0 (rank r waits for
a message from r + 1).
"""

import mpiq_example

TAG = 7


def exchange(comm):
    rank, size = comm.Get_rank(), comm.Get_size()
    mpiq_example.ready(rank)
    value = comm.recv(source=(rank + 1) % size, tag=TAG)  # mpiq: recv (never returns)
    comm.send(value, dest=(rank - 1 + size) % size, tag=TAG)
    return value


def main():
    _, comm = mpiq_example.init_world("p2p_cycle", 2)
    exchange(comm)


if __name__ == "__main__":
    main()
