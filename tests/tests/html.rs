//! The report as a web page (`mpiq job --html FILE`), opened in Debian's
//! Chromium by Playwright (`mpiq_tests::browser`): on the test bed's Open
//! MPI 4.1.4, whose queues are read,
//!
//! - the deadlock example (4 ranks, each waiting for its right neighbour):
//!   the verdict DEADLOCK and exit status 3 on top, the cycle 0 -> 1 -> 2
//!   -> 3 -> 0 drawn in red, the tree's `MPI_Wait` node listing ranks 0-3,
//!   rank 1's detail with its stacks (main first, the MPI's frames folded)
//!   and its posted receive from rank 2, a search for `MPI_Wait` finding
//!   the node;
//! - compute_stuck (ranks 0-2 in `MPI_Allreduce`, rank 3 computing in
//!   `smooth`): rank 3 named as the one waited on, ringed in the graph,
//!   the tree's `MPI_Allreduce` node listing ranks 0-2, rank 3's detail in
//!   `smooth`; then the same job with rank 1 stopped (`SIGSTOP`): not a
//!   deadlock, and rank 1's detail says it is stopped.
//!
//! Every page loads with no request but for itself and no console message
//! (checked by `browser::open`), and leaves a screenshot. The flight
//! recorder's timeline is checked on `mpiq run`'s report.html in
//! `run_recorder.rs`.

use std::path::Path;
use std::time::{Duration, Instant};

use mpiq_tests::browser::{self, text, Actions};
use mpiq_tests::fixtures::WorkDir;
use mpiq_tests::frontends::cli;
use mpiq_tests::run::Run;
use mpiq_tests::{gdb, Example, Job, Mpi};
use serde_json::Value;

/// `mpiq job --starter PID --html PAGE --format json`, again (up to 60 s)
/// until `done` holds of its JSON report: the examples print READY just
/// before their last call.
fn page_when(starter: u32, page: &Path, done: impl Fn(&Value) -> bool) -> (Run, Value) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let starter = starter.to_string();
        let r = cli(&[
            "job",
            "--starter",
            &starter,
            "--format",
            "json",
            "--html",
            page.to_str().unwrap(),
        ]);
        let v = r.json().unwrap_or(Value::Null);
        if done(&v) || Instant::now() > deadline {
            assert!(page.is_file(), "no page written: {}", r.all());
            return (r, v);
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// The ranks of `v` (a list of numbers).
fn ranks(v: &Value) -> Vec<i64> {
    let mut r: Vec<i64> = v
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_i64).collect())
        .unwrap_or_default();
    r.sort_unstable();
    r.dedup();
    r
}

#[test]
fn a_deadlock_page_draws_its_cycle_openmpi() {
    gdb::require_ptrace();
    let dir = WorkDir::new("html-deadlock");
    let page = dir.path("deadlock.html");
    let job = Job::builder(Mpi::OpenMpi, Example::Deadlock).nprocs(4).start();
    let (r, v) = page_when(job.starter_pid(), &page, |v| v["analysis"]["verdict"] == "deadlock");
    assert_eq!(v["analysis"]["verdict"], "deadlock", "{}", r.all());
    let cycle = ranks(&v["analysis"]["cycles"][0]);
    assert_eq!(cycle, [0, 1, 2, 3], "{:#}", v["analysis"]);

    let b = browser::open(
        &page,
        "deadlock-openmpi",
        &Actions {
            open: &["MPI_Wait"],
            rank: Some(1),
            search: Some("MPI_Wait"),
        },
    );
    assert_eq!(text(&b, "verdict"), "DEADLOCK", "{b:#}");
    assert_eq!(b["summary_visible"], true);
    assert_eq!(text(&b, "summary"), v["analysis"]["summary"].as_str().unwrap(), "{b:#}");
    assert!(
        text(&b, "exit").contains("exit status: 3 (a deadlock was found)"),
        "{b:#}"
    );
    // The cycle: its four ranks marked, its four edges in red, each from a
    // rank to its right neighbour.
    let g = &b["graph"];
    assert_eq!(ranks(&g["on_cycle"]), [0, 1, 2, 3], "{g:#}");
    let mut red: Vec<(i64, i64)> = g["edges"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e[2].as_str().unwrap_or_default().contains("cycle"))
        .map(|e| (e[0].as_i64().unwrap(), e[1].as_i64().unwrap()))
        .collect();
    red.sort_unstable();
    assert_eq!(red, [(0, 1), (1, 2), (2, 3), (3, 0)], "{g:#}");
    // The tree: the MPI_Wait node opened lists every rank.
    assert_eq!(text(&b["opened"], "MPI_Wait").trim(), "ranks: 0 1 2 3", "{b:#}");
    // Rank 1: where it is, its stacks with the application's frame shown and
    // the MPI's folded, its posted receive from rank 2.
    let detail = text(&b, "rank_detail");
    assert!(detail.starts_with("Rank 1"), "{detail}");
    assert!(detail.contains("main (deadlock.c:"), "{detail}");
    assert!(detail.contains("frames in the MPI and the system"), "{detail}");
    assert!(!detail.contains("ompi_request_default_wait"), "folded: {detail}");
    assert!(
        text(&b, "rank_detail_unfolded").contains("ompi_request_default_wait"),
        "{b:#}"
    );
    let queue_row = detail
        .lines()
        .find(|l| l.starts_with("MPI_COMM_WORLD\treceives"))
        .unwrap_or_else(|| panic!("no posted receive in rank 1's detail: {detail}"));
    assert!(queue_row.contains("\t2\t"), "from rank 2: {queue_row}");
    // The search: the node found.
    assert_eq!(b["search_hits"], serde_json::json!(["MPI_Wait"]), "{b:#}");
    assert_eq!(b["timeline"]["hidden"], true, "no recorder, no timeline: {b:#}");
}

#[test]
fn a_computing_culprit_and_a_stopped_rank_openmpi() {
    gdb::require_ptrace();
    let dir = WorkDir::new("html-culprit");
    let job = Job::builder(Mpi::OpenMpi, Example::ComputeStuck).nprocs(4).start();
    let culprit = |v: &Value| {
        v["analysis"]["waited_on"]
            .as_array()
            .is_some_and(|w| w.iter().any(|w| ranks(&w["ranks"]) == [3] && w["state"] == "computing"))
    };
    let page = dir.path("culprit.html");
    let (r, v) = page_when(job.starter_pid(), &page, culprit);
    assert!(culprit(&v), "rank 3 not named as computing: {}", r.all());
    let b = browser::open(
        &page,
        "compute-stuck-openmpi",
        &Actions {
            open: &["MPI_Allreduce"],
            rank: Some(3),
            search: None,
        },
    );
    assert_ne!(text(&b, "verdict"), "DEADLOCK", "{b:#}");
    let waited = text(&b, "waited");
    assert!(
        waited.starts_with("Waited on: rank 3 ") && waited.contains("computing"),
        "{b:#}"
    );
    assert_eq!(ranks(&b["graph"]["waited"]), [3], "{:#}", b["graph"]);
    assert_eq!(b["graph"]["on_cycle"], serde_json::json!([]), "{:#}", b["graph"]);
    assert_eq!(text(&b["opened"], "MPI_Allreduce").trim(), "ranks: 0 1 2", "{b:#}");
    let detail = text(&b, "rank_detail");
    assert!(detail.starts_with("Rank 3 — computing"), "{detail}");
    assert!(detail.contains("smooth (compute_stuck.c:"), "{detail}");

    // Rank 1 stopped: never a deadlock, and its detail says so.
    let pid = job.pid_of(1) as i32;
    // SAFETY: kill(2) on a pid of the job this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    let page = dir.path("stopped.html");
    let stopped = |v: &Value| {
        v["processes"]
            .as_array()
            .is_some_and(|p| p.iter().any(|p| p["world_rank"] == 1 && p["os"]["state"] == "T"))
    };
    let (r, v) = page_when(job.starter_pid(), &page, stopped);
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
    assert!(stopped(&v), "rank 1 not seen stopped: {}", r.all());
    assert_ne!(v["analysis"]["verdict"], "deadlock", "{}", r.all());
    let b = browser::open(
        &page,
        "stopped-rank-openmpi",
        &Actions {
            open: &[],
            rank: Some(1),
            search: Some("1"),
        },
    );
    assert_ne!(text(&b, "verdict"), "DEADLOCK", "{b:#}");
    let detail = text(&b, "rank_detail");
    assert!(detail.starts_with("Rank 1 — stopped"), "{detail}");
    assert!(detail.contains("OS state\tT"), "{detail}");
    assert!(text(&b, "search_result").contains("rank 1 opened"), "{b:#}");
}
