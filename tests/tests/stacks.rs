//! Call stacks (issue 12, in progress).
//!
//! - `mpiq stacks` on real MPI ranks of the test bed (both MPIs): every
//!   rank's main thread is unwound through the MPI library to `main`, and
//!   the ranks run on, untraced, afterwards.
//! - `--stacks` in every front end: the deadlock example's ranks all block
//!   in `MPI_Wait` (called from `main`, deadlock.c:45); under both MPIs,
//!   every rank's "where" line is the same from gdb, lldb and the CLI and
//!   names that call and that line.

use mpiq_tests::frontends::{cli, snapshot, FrontEnd};
use mpiq_tests::{gdb, Example, Job, Mpi};
use serde_json::Value;

/// The function names of the main thread of `pid`, innermost first, and the
/// whole JSON (for messages).
fn main_thread(pid: u32) -> (Vec<String>, Value) {
    let r = cli(&["stacks", "--pid", &pid.to_string(), "--json"]);
    assert!(r.success, "{}", r.all());
    let v: Value = serde_json::from_str(&r.stdout).expect("JSON");
    let main = v[0]["threads"]
        .as_array()
        .expect("threads")
        .iter()
        .find(|t| t["tid"] == pid)
        .unwrap_or_else(|| panic!("no main thread in {v}"));
    assert_eq!(main["note"], Value::Null, "the stack ended early: {v}");
    let names = main["frames"]
        .as_array()
        .expect("frames")
        .iter()
        .map(|f| f["function"].as_str().unwrap_or("??").to_string())
        .collect();
    (names, v)
}

fn untraced(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|s| {
        s.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["TracerPid:", "0"])
    })
}

fn check(mpi: Mpi, example: Example) {
    gdb::require_ptrace();
    if let Some(why) = example.unsupported_reason(mpi) {
        eprintln!("SKIPPED: {} under {mpi}: {why}", example.name());
        return;
    }
    let job = Job::builder(mpi, example).start();
    for rank in job.ranks() {
        let (names, v) = main_thread(rank.pid);
        eprintln!("{} under {mpi}, rank {}: {names:?}", example.name(), rank.rank);
        let at = |want: &dyn Fn(&str) -> bool| names.iter().position(|n| want(n));
        let main = at(&|n| n == "main").unwrap_or_else(|| panic!("rank {}: no main in {names:?}\n{v}", rank.rank));
        let inner = match example {
            // Blocked in MPI_Wait (polling inside the library).
            Example::Deadlock => at(&|n| n == "MPI_Wait" || n == "PMPI_Wait"),
            // mpiq_wait_forever(): pause().
            _ => at(&|n| n.contains("pause")),
        };
        let inner = inner.unwrap_or_else(|| panic!("rank {}: {names:?}\n{v}", rank.rank));
        assert!(inner < main, "rank {}: {names:?}", rank.rank);
        assert!(Job::is_running(rank.pid), "rank {} gone", rank.rank);
        assert!(untraced(rank.pid), "rank {} still traced", rank.rank);
    }
}

mpiq_tests::per_example! { check;
    stacks_ring_openmpi: OpenMpi, Ring;
    stacks_ring_mpich: Mpich, Ring;
    stacks_deadlock_openmpi: OpenMpi, Deadlock;
    stacks_deadlock_mpich: Mpich, Deadlock;
}

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

fn the_same_where_from_every_front_end(mpi: Mpi) {
    gdb::require_ptrace();
    let job = Job::builder(mpi, Example::Deadlock).start();
    let want = format!("in MPI_Wait, called from main (deadlock.c:{})", wait_line());
    for rank in job.ranks() {
        for fe in FrontEnd::ALL {
            assert_eq!(where_of(fe, rank.pid), want, "{fe:?}, rank {} under {mpi}", rank.rank);
        }
    }
}

#[test]
fn the_same_where_from_every_front_end_openmpi() {
    the_same_where_from_every_front_end(Mpi::OpenMpi);
}

#[test]
fn the_same_where_from_every_front_end_mpich() {
    the_same_where_from_every_front_end(Mpi::Mpich);
}
