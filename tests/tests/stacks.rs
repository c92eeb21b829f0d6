//! Call stacks (`--stacks`, issue 12, in progress): gdb and lldb give every
//! thread's stack from their own unwinders, and the bridge says, the same
//! way for both, where each rank is in MPI.
//!
//! The deadlock example's ranks all block in `MPI_Wait` (called from
//! `main`, deadlock.c:45): under both MPIs, every rank's "where" line from
//! gdb equals lldb's and names that call and that line. (The CLI gives no
//! stacks yet: it says so.)

use mpiq_tests::frontends::{snapshot, FrontEnd};
use mpiq_tests::{gdb, Example, Job, Mpi};

/// The line of `MPI_Wait` in examples/deadlock.c.
fn wait_line() -> usize {
    let source = std::fs::read_to_string(Example::Deadlock.source()).expect("deadlock.c");
    1 + source
        .lines()
        .position(|l| l.trim_start().starts_with("MPI_Wait("))
        .expect("deadlock.c calls MPI_Wait")
}

fn where_of(fe: FrontEnd, pid: u32) -> String {
    let v = snapshot(fe, pid, "--stacks");
    let stacks = &v["processes"][0]["stacks"];
    stacks["where"]
        .as_str()
        .unwrap_or_else(|| panic!("{fe:?} gave no where line for {pid}: {stacks:#}"))
        .to_string()
}

fn the_same_where_from_gdb_and_lldb(mpi: Mpi) {
    gdb::require_ptrace();
    let job = Job::builder(mpi, Example::Deadlock).start();
    let want = format!("in MPI_Wait, called from main (deadlock.c:{})", wait_line());
    for rank in job.ranks() {
        let from_gdb = where_of(FrontEnd::Gdb, rank.pid);
        let from_lldb = where_of(FrontEnd::Lldb, rank.pid);
        assert_eq!(from_gdb, want, "gdb, rank {} under {mpi}", rank.rank);
        assert_eq!(from_lldb, want, "lldb, rank {} under {mpi}", rank.rank);
    }
    // The CLI has no unwinder yet, and says so instead of showing nothing.
    let v = snapshot(FrontEnd::Cli, job.pid_of(0), "--stacks");
    let missing = v["processes"][0]["stacks"]["missing"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(missing.contains("no call stacks"), "{v:#}");
}

#[test]
fn the_same_where_from_gdb_and_lldb_openmpi() {
    the_same_where_from_gdb_and_lldb(Mpi::OpenMpi);
}

#[test]
fn the_same_where_from_gdb_and_lldb_mpich() {
    the_same_where_from_gdb_and_lldb(Mpi::Mpich);
}
