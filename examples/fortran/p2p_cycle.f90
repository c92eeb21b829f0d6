! p2p_cycle.f90 - examples/deadlock.c in Fortran (`use mpi`): every rank
! blocks in MPI_WAIT on a receive that no one will ever satisfy.
!
! Run with n >= 2 ranks (default in the harness: 3).
! Each world rank r, on MPI_COMM_WORLD:
!   1. MPI_IRECV(16 x MPI_INTEGER, source = mod(r + 1, n), tag = 400 + r)
!   2. prints "MPIQ-READY rank=<r> pid=<pid>" (the receive is already posted,
!      so whoever sees READY sees the receive: no race),
!   3. MPI_WAIT on that receive: blocks forever inside MPI, polling.
! Nobody sends anything, so the wait-for cycle is 0 -> 1 -> 2 -> ... -> n-1 -> 0.
! The ranks spin inside the MPI progress engine (they use CPU).
!
! Queues of rank r on MPI_COMM_WORLD: as deadlock.c's (a Fortran INTEGER is
! 4 bytes, as a C int):
!   posted receives: exactly 1: desired local rank mod(r + 1, n), tag 400 + r,
!                    16 MPI_INTEGER.
!   sends:           empty.
! The MPI's Fortran library (Open MPI's libmpi_mpifh, MPICH's libmpifort)
! makes the calls, not the program: mpiq's flight recorder sees them through
! its Fortran entry points (recorder/fortran.c).
!
! The lifetime and READY line are examples/mpiq_example.h's, through libc.
!
!   mpif90 -g -O0 -Wall -o p2p_cycle examples/fortran/p2p_cycle.f90
program p2p_cycle
    use, intrinsic :: iso_c_binding, only: c_int
    use, intrinsic :: iso_fortran_env, only: output_unit, error_unit
    use mpi
    implicit none

    interface
        function c_alarm(seconds) bind(c, name='alarm')
            import :: c_int
            integer(c_int), value :: seconds
            integer(c_int) :: c_alarm
        end function c_alarm
        function c_getpid() bind(c, name='getpid')
            import :: c_int
            integer(c_int) :: c_getpid
        end function c_getpid
    end interface

    integer, parameter :: count = 16
    integer :: rank, size, req, ierr
    integer :: rbuf(count)
    integer :: status(MPI_STATUS_SIZE)
    character(len=64) :: line

    call arm_lifetime()
    call MPI_INIT(ierr)
    call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
    call MPI_COMM_SIZE(MPI_COMM_WORLD, size, ierr)
    if (size < 2) then
        write (error_unit, '(a)') 'p2p_cycle: needs at least 2 ranks'
        call MPI_ABORT(MPI_COMM_WORLD, 2, ierr)
    end if

    call MPI_IRECV(rbuf, count, MPI_INTEGER, mod(rank + 1, size), 400 + rank, MPI_COMM_WORLD, req, ierr)
    ! One record, one write: the starter forwards the ranks' lines whole.
    write (line, '(a,i0,a,i0)') 'MPIQ-READY rank=', rank, ' pid=', c_getpid()
    write (output_unit, '(a)') trim(line)
    flush (output_unit)
    call MPI_WAIT(req, status, ierr) ! never returns

    call MPI_FINALIZE(ierr)

contains

    ! alarm(2) of MPIQ_EXAMPLE_LIFETIME seconds (default 900; 0: none), before
    ! MPI_INIT: a job the harness leaked ends by itself.
    subroutine arm_lifetime()
        character(len=32) :: value
        integer :: length, stat, secs, ignored
        secs = 900
        call get_environment_variable('MPIQ_EXAMPLE_LIFETIME', value, length, stat)
        if (stat == 0 .and. length > 0) then
            read (value, *, iostat=stat) secs
            if (stat /= 0) secs = 900
        end if
        if (secs > 0) ignored = c_alarm(int(secs, c_int))
    end subroutine arm_lifetime
end program p2p_cycle
