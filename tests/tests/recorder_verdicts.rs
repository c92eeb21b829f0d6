//! The verdict with mpiq's flight recorder (issue 28) on real jobs: where the MPI gives no
//! queues (Debian's Open MPI, PyPI's MPICH wheel), the recorder's pending requests and
//! call arguments give the wait-for edges with their peers and tags, and its collective
//! numbers name the instance each rank is in; where the MPI's debug library gives queues
//! (the test bed's Open MPI and MPICH), the recorder changes no answer.
//!
//! - `deadlock` (each rank waits on its `MPI_Irecv` from its right neighbour, tag 400 +
//!   rank): `deadlock`, cycle 0 -> 1 -> 2, the three receives with their tags.
//! - `collective_skip` (ranks 0-2 in their 42nd `MPI_Allreduce`, rank 3 skipped it and is
//!   in `MPI_Recv` from rank 0): `deadlock`, cycle 0 -> 3, and the numbers 42 and 41.
//! - `transfer` (1 GiB in one `MPI_Send`/`MPI_Recv`): never `deadlock`; with both ranks
//!   caught in it, `no_deadlock`: the send and the receive match.
//! - `p2p_cycle.py` (mpi4py's `comm.recv`, `MPI_Mprobe`): `deadlock`, cycle 0 -> 1 -> 2,
//!   and the Python program's calls in the report.

use std::time::{Duration, Instant};

use mpiq_tests::expect::{assert_deadlock_ring, edges, where_text, SKIPPED_COLLECTIVE_NOTE};
use mpiq_tests::frontends::{cli, queues, snapshot, FrontEnd};
use mpiq_tests::{build_recorder, gdb, Example, Job, JobBuilder, Mpi, PyExample};
use serde_json::Value;

/// `mpiq job --json` of a job's starter: the whole report.
fn job_json(job: &Job) -> Value {
    cli(&["job", "--starter", &job.starter_pid().to_string(), "--json"]).json_exact()
}

/// [`job_json`] once two samples in a row agree on the verdict, cycles and edges: READY
/// comes just before the ranks' last call, and a first sample may catch one on its way
/// there (progressing).
fn settled_json(job: &Job) -> Value {
    let key = |v: &Value| {
        let a = &v["analysis"];
        (a["verdict"].clone(), a["cycles"].clone(), edges(a))
    };
    let mut last = job_json(job);
    for _ in 0..10 {
        let now = job_json(job);
        if key(&now) == key(&last) {
            return now;
        }
        last = now;
    }
    panic!("no two samples in a row agree; the last: {:#}", last["analysis"]);
}

/// `mpiq job` of a job's starter, as text.
fn job_text(job: &Job) -> String {
    cli(&["job", "--starter", &job.starter_pid().to_string()]).all()
}

fn recorded(b: JobBuilder) -> JobBuilder {
    b.env("LD_PRELOAD", build_recorder().as_os_str())
}

/// The strings of an analysis's list `key` (`notes`), or of each entry's `field` (the
/// `edges`' `words`).
fn texts<'v>(a: &'v Value, key: &str, field: Option<&str>) -> Vec<&'v str> {
    a[key]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| field.map_or(e, |f| &e[f]).as_str())
        .collect()
}

fn recorded_cycle(mpi: Mpi) {
    gdb::require_ptrace();
    let job = recorded(Job::builder(mpi, Example::Deadlock).nprocs(3)).start();
    let v = settled_json(&job);
    let a = &v["analysis"];
    let what = format!("deadlock under {mpi} with the recorder");
    assert_deadlock_ring(&v, 3, &what);
    assert!(a["stacks_only"].as_array().is_none_or(Vec::is_empty), "{what}: {a:#}");
    let text = job_text(&job);
    assert!(text.contains("cycle: 0 -> 1 -> 2 -> 0"), "{what}: {text}");
    assert!(
        text.contains("Last MPI calls (mpiq's flight recorder)") && text.contains("MPI_Wait(1 request)  (running)"),
        "{what}: {text}"
    );
    // Without the recorder the same job has no cycle to name: its stacks alone.
    drop(job);
    let job = Job::builder(mpi, Example::Deadlock).nprocs(3).start();
    let a = settled_json(&job)["analysis"].clone();
    assert_eq!(a["cycles"], serde_json::json!([]), "{mpi} without the recorder: {a:#}");
    assert_eq!(a["stacks_only"], serde_json::json!([0, 1, 2]), "{mpi}: {a:#}");
}

#[test]
fn a_recorded_cycle_under_debians_open_mpi() {
    recorded_cycle(Mpi::DebianOpenMpi);
}

#[test]
fn a_recorded_cycle_under_pypis_mpich() {
    recorded_cycle(Mpi::PypiMpich);
}

fn collective_skip(mpi: Mpi) {
    gdb::require_ptrace();
    let job = recorded(Job::builder(mpi, Example::CollectiveSkip).nprocs(4)).start();
    let v = settled_json(&job);
    let a = &v["analysis"];
    let what = format!("collective_skip under {mpi} with the recorder");
    assert_eq!(a["verdict"], "deadlock", "{what}: {a:#}");
    assert_eq!(a["cycles"], serde_json::json!([[0, 3]]), "{what}: {a:#}");
    let notes = texts(a, "notes", None);
    assert!(
        notes.iter().any(|n| n.contains(SKIPPED_COLLECTIVE_NOTE)),
        "{what}: {notes:#?}"
    );
    let words = texts(a, "edges", Some("words"));
    assert!(
        words.iter().any(|w| w.contains("is in MPI_Allreduce #42 on MPI_COMM_WORLD and waits for rank 3, which is not in it (it has begun 41 collectives on it)")),
        "{what}: {words:#?}"
    );
    assert!(
        edges(a).contains(&(3, 0, Some(9))),
        "{what}: rank 3's receive from rank 0, tag 9: {a:#}"
    );
}

#[test]
fn a_skipped_collective_is_named_by_its_numbers_under_debians_open_mpi() {
    collective_skip(Mpi::DebianOpenMpi);
}

#[test]
fn a_skipped_collective_is_named_by_its_numbers_under_pypis_mpich() {
    collective_skip(Mpi::PypiMpich);
}

/// 1 GiB in one transfer, sampled until two samples caught both ranks in it: never a
/// deadlock, and with the recorder the send and the receive match (`no_deadlock`).
fn transfer(mpi: Mpi) {
    gdb::require_ptrace();
    let job = recorded(Job::builder(mpi, Example::Transfer).args(["1024", "40"])).start();
    let what = format!("transfer under {mpi} with the recorder");
    let t = Instant::now();
    let (mut samples, mut caught) = (0, 0);
    while caught < 2 && t.elapsed() < Duration::from_secs(120) {
        let v = job_json(&job);
        let a = &v["analysis"];
        samples += 1;
        let verdict = a["verdict"].as_str().unwrap_or_default();
        assert_ne!(
            verdict, "deadlock",
            "{what}: a transfer on its way called a deadlock: {a:#}"
        );
        let at = |rank: i64| where_text(a, rank);
        if at(0).contains("MPI_Send") && at(1).contains("MPI_Recv") {
            caught += 1;
            assert_eq!(verdict, "no_deadlock", "{what}: the send and the receive match: {a:#}");
            assert!(a["cycles"].as_array().is_none_or(Vec::is_empty), "{what}: {a:#}");
        }
    }
    assert!(
        caught >= 2,
        "{what}: {samples} samples, {caught} saw both ranks in the transfer"
    );
}

#[test]
fn a_recorded_transfer_matches_under_debians_open_mpi() {
    transfer(Mpi::DebianOpenMpi);
}

#[test]
fn a_recorded_transfer_matches_under_pypis_mpich() {
    transfer(Mpi::PypiMpich);
}

#[test]
fn a_recorded_mpi4py_cycle_under_pypis_mpich() {
    gdb::require_ptrace();
    let mpi = Mpi::PypiMpich;
    let job = recorded(Job::python(mpi, PyExample::P2pCycle).nprocs(3)).start();
    let v = settled_json(&job);
    let a = &v["analysis"];
    let what = "p2p_cycle.py under PyPI's MPICH with the recorder";
    assert_eq!(a["verdict"], "deadlock", "{what}: {a:#}");
    assert_eq!(a["cycles"], serde_json::json!([[0, 1, 2]]), "{what}: {a:#}");
    let text = job_text(&job);
    assert!(text.contains("MPI_Mprobe(") && text.contains("tag 7"), "{what}: {text}");
}

/// The test bed's MPIs give queues: the recorder must not change the answer.
fn same_answer(mpi: Mpi, example: Example, n: usize) {
    gdb::require_ptrace();
    let answer = |with: bool| {
        let b = Job::builder(mpi, example).nprocs(n);
        let job = if with { recorded(b) } else { b }.start();
        let a = settled_json(&job)["analysis"].clone();
        // The debug library's receives and the recorder's agree.
        let notes = texts(&a, "notes", None);
        assert!(
            !notes.iter().any(|n| n.contains("flight recorder does not hold")),
            "{example} under {mpi}: {notes:#?}"
        );
        (a["verdict"].clone(), a["cycles"].clone(), edges(&a))
    };
    let (without, with) = (answer(false), answer(true));
    assert_eq!(with, without, "{example} under {mpi}: with the recorder, then without");
    assert_eq!(without.0, "deadlock", "{example} under {mpi}: {without:?}");
}

#[test]
fn the_recorder_changes_no_answer_of_the_test_beds_open_mpi() {
    same_answer(Mpi::OpenMpi, Example::Deadlock, 3);
    same_answer(Mpi::OpenMpi, Example::CollectiveSkip, 4);
}

#[test]
fn the_recorder_changes_no_answer_of_the_test_beds_mpich() {
    same_answer(Mpi::Mpich, Example::Deadlock, 3);
    same_answer(Mpi::Mpich, Example::CollectiveSkip, 4);
}

/// gdb's `info mpi-queues`, lldb's `mpi queues` and `mpiq queues` read the recorder of one
/// rank through their own target layer: its last calls in the text, its pending receive in
/// the JSON.
#[test]
fn every_front_end_shows_a_ranks_recorded_calls() {
    gdb::require_ptrace();
    let mpi = Mpi::DebianOpenMpi;
    let job = recorded(Job::builder(mpi, Example::Deadlock).nprocs(3)).start();
    let pid = job.pid_of(1);
    for fe in [FrontEnd::Gdb, FrontEnd::Lldb, FrontEnd::Cli] {
        let text = queues(fe, pid, "").all();
        for want in [
            "flight recorder: 3 MPI calls, 1 requests pending",
            "MPI_Irecv(source 2, tag 401, 16 x 4 B, MPI_COMM_WORLD)",
            "MPI_Wait(1 request)  (running)",
        ] {
            assert!(
                text.contains(want),
                "{fe:?} on rank 1 under {mpi}: no {want:?} in\n{text}"
            );
        }
        let v = snapshot(fe, pid, "");
        let p = &v["processes"][0]["recorder"]["pending"][0];
        assert_eq!(
            (p["call"].as_str(), p["peer"].as_i64(), p["tag"].as_i64()),
            (Some("irecv"), Some(2), Some(401)),
            "{fe:?}: {v:#}"
        );
    }
}
