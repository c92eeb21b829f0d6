//! Call stacks (issue 12).
//!
//! - `mpiq stacks` on real MPI ranks of the test bed (both MPIs): every
//!   rank's main thread is unwound through the MPI library to `main`, and
//!   the ranks run on, untraced, afterwards.
//! - `--stacks` in every front end: the deadlock example's ranks all block
//!   in `MPI_Wait` (called from `main`, deadlock.c:38); under both MPIs,
//!   every rank's "where" line is the same from gdb, lldb and the CLI and
//!   names that call and that line.
//! - `mpiq job` merges the ranks' stacks (STAT-style) by default: on
//!   barrier_vs_recv (4 ranks, both MPIs) its "Where the ranks are" section
//!   has exactly two leaves, rank 0 in `MPI_Barrier` called from `main` and
//!   ranks 1-3 in `MPI_Recv` called from `exchange`, each with its line in
//!   the source; `--format dot` draws the same tree as a cluster.
//! - The arguments of each thread's MPI call through gdb and lldb
//!   (communicator, peer, tag, buffer of `barrier_vs_recv`).
//! - Every rank of every example: the same "where" line from gdb, lldb and
//!   the CLI (the differential test of issue 12), under the test bed's
//!   MPIs; under the packaged ones, in tests/stacks_only.rs, on the jobs
//!   whose verdict from the stacks it checks.

use std::time::{Duration, Instant};

use mpiq_tests::frontends::{assert_healthy_where, assert_the_same_where, cli, queues, snapshot, where_line, FrontEnd};
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
    let Some(job) = Job::builder(mpi, example).start_supported() else {
        return;
    };
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
    where_line(fe, &snapshot(fe, pid, "--stacks"))
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
    // Every front end places a frame as its object and the offset in it
    // (the CLI's `OBJECT+0xOFFSET`, ASLR's address taken off): `main`'s
    // return address into the executable, the same from all three.
    let pid = job.pid_of(0);
    let offsets: Vec<(FrontEnd, Option<u64>)> = FrontEnd::ALL
        .iter()
        .map(|&fe| {
            let v = snapshot(fe, pid, "--stacks");
            let threads = v["processes"][0]["stacks"]["threads"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let main = threads.iter().find(|t| t["tid"] == pid).and_then(|t| {
                t["frames"]
                    .as_array()?
                    .iter()
                    .find(|f| f["function"] == "main")
                    .cloned()
            });
            (fe, main.and_then(|f| f["offset"].as_u64()))
        })
        .collect();
    assert!(offsets[0].1.is_some(), "no offset for main: {offsets:?}");
    assert!(offsets.iter().all(|(_, o)| *o == offsets[0].1), "{mpi}: {offsets:?}");
    // By default, the text of every front end says it in one line, without
    // the frames (those come with --stacks).
    for fe in FrontEnd::ALL {
        let r = queues(fe, pid, "");
        let text = r.all();
        assert!(
            text.contains(&format!("\n  where: {want}\n")),
            "{fe:?} under {mpi}:\n{text}"
        );
        assert!(!text.contains("  Threads ("), "{fe:?} under {mpi}:\n{text}");
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

/// The lines of the "Where the ranks are" section of `mpiq job`'s text
/// output, each as `who: path` (the column padding taken out).
fn where_section(text: &str) -> Option<Vec<String>> {
    let start = text.find("Where the ranks are (")?;
    let section = &text[start..];
    let lines = section
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(|l| match l.trim().split_once(": ") {
            Some((who, what)) => format!("{who}: {}", what.trim_start()),
            None => l.trim().to_string(),
        })
        .collect();
    Some(lines)
}

/// Whether `leaf` is `want` (`who: path (file:line)`), what the call
/// waits for (" on MPI_COMM_WORLD", " from rank 0, tag 3") allowed before
/// its location.
fn leaf_is(leaf: &str, want: &str) -> bool {
    let Some((head, loc)) = want.rsplit_once(" (") else {
        return leaf == want;
    };
    leaf == want
        || leaf
            .strip_prefix(head)
            .and_then(|rest| rest.strip_suffix(&format!(" ({loc}")))
            .is_some_and(|detail| detail.starts_with(" on ") || detail.starts_with(" from "))
}

fn merged_stacks(mpi: Mpi) {
    gdb::require_ptrace();
    let example = Example::BarrierVsRecv;
    let job = Job::builder(mpi, example).nprocs(4).start();
    let starter = job.starter_pid().to_string();
    let want = [
        format!(
            "rank 0: main > MPI_Barrier (barrier_vs_recv.c:{})",
            example.line_of("MPI_Barrier(")
        ),
        format!(
            "ranks 1-3: main > exchange > MPI_Recv (barrier_vs_recv.c:{})",
            example.line_of("MPI_Recv(")
        ),
    ];
    // READY comes before each rank's last call: look again until every
    // rank is in it.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (text, leaves) = loop {
        let r = cli(&["job", "--starter", &starter]);
        let leaves = where_section(&r.stdout).unwrap_or_default();
        let found = leaves.len() == 2 && want.iter().all(|w| leaves.iter().any(|l| leaf_is(l, w)));
        if found || Instant::now() > deadline {
            break (r.all(), leaves);
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    assert_eq!(leaves.len(), 2, "{mpi}: not two leaves: {leaves:#?}\n{text}");
    for w in &want {
        assert!(
            leaves.iter().any(|l| leaf_is(l, w)),
            "{mpi}: no leaf {w:?} in {leaves:#?}\n{text}"
        );
    }
    eprintln!("{mpi}:\n{}", &text[text.find("Where the ranks are").unwrap_or(0)..]);
    // Each process's where line, and no frames without --stacks.
    assert!(
        text.contains("\n  where: in MPI_Barrier, called from main (barrier_vs_recv.c:"),
        "{text}"
    );
    assert!(!text.contains("\n  Threads ("), "{text}");
    // JSON: the tree next to the analysis.
    let r = cli(&["job", "--starter", &starter, "--json"]);
    let v: Value = serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {}", r.all()));
    assert_eq!(v["stack_tree"]["label"], "main", "{:#}", v["stack_tree"]);
    assert_eq!(
        v["stack_tree"]["ranks"],
        serde_json::json!([[0, 3]]),
        "{:#}",
        v["stack_tree"]
    );
    // Graphviz: the wait-for graph with the tree as a cluster.
    let r = cli(&["job", "--starter", &starter, "--format", "dot"]);
    assert!(r.stdout.starts_with("digraph"), "{}", r.all());
    assert!(r.stdout.contains("subgraph cluster_stacks {"), "{}", r.all());
    // (what the call waits for may follow the name: "MPI_Recv from rank 0, tag 3")
    let recv = r.stdout.lines().find(|l| l.contains("[label=\"MPI_Recv"));
    assert!(recv.is_some_and(|l| l.contains("\\nranks 1-3 (3)\"")), "{}", r.all());
    // --stacks: every frame, as a tree; --no-stacks: none.
    let r = cli(&["job", "--starter", &starter, "--stacks"]);
    let tree = r.stdout.find("Call stacks of every thread (4 ranks, ");
    assert!(tree.is_some(), "{}", r.all());
    eprintln!("{mpi}, --stacks:\n{}", &r.stdout[tree.unwrap_or(0)..]);
    assert!(r.stdout.contains("└─ "), "{}", r.all());
    let r = cli(&["job", "--starter", &starter, "--no-stacks"]);
    assert!(
        !r.stdout.contains("Where the ranks are") && !r.stdout.contains("where: "),
        "{}",
        r.all()
    );
    for rank in job.ranks() {
        assert!(Job::is_running(rank.pid), "rank {} gone", rank.rank);
        assert!(untraced(rank.pid), "rank {} still traced", rank.rank);
    }
}

/// What one rank's snapshot says of its main thread's MPI call, once the
/// rank is in it (barrier_vs_recv.c prints READY before MPI_Recv: asked
/// again until the call and, for a receive, its queue entry are there).
fn call_of(fe: FrontEnd, pid: u32, want: &str) -> (Value, Value) {
    let mut last = Value::Null;
    for _ in 0..40 {
        let v = snapshot(fe, pid, "--stacks");
        let p = v["processes"][0].clone();
        let call = p["stacks"]["calls"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["tid"] == pid).cloned());
        let posted = want != "recv" || !receives(&p).is_empty();
        if let Some(call) = call.filter(|c| c["call"] == want && posted) {
            return (call, p);
        }
        last = p;
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    panic!("{fe:?}: pid {pid} never in {want}: {last:#}");
}

/// The posted receives on MPI_COMM_WORLD.
fn receives(p: &Value) -> Vec<Value> {
    world(p)["queues"]["receives"]["operations"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn world(p: &Value) -> Value {
    p["communicators"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == "MPI_COMM_WORLD").cloned())
        .unwrap_or_else(|| panic!("no MPI_COMM_WORLD in {p:#}"))
}

/// barrier_vs_recv under `mpi`, through gdb or lldb: rank 0 is in
/// `barrier` on MPI_COMM_WORLD; the other ranks in `recv` on it, from rank 0
/// with tag 3 into the buffer of their posted receive. Checked by hand: gdb
/// reads every argument of MPICH's `PMPI_Recv`; Open MPI's `PMPI_Recv` has
/// `source` and `tag` optimised out, which the receive's own request gives
/// (`ompi_request_wait_completion(req)` inside it). LLDB 16 finds no
/// function, so no variables, for either MPI's `PMPI_Recv`/`PMPI_Barrier`
/// pc: the communicator comes from the library's own frames (Open MPI's
/// `ompi_coll_base_barrier_*` `comm`, MPICH's `MPIR_Barrier_impl`
/// `comm_ptr`) and the receives' arguments from their requests (Open MPI's
/// `req`, MPICH's `MPIR_Wait_impl` `request_ptr`).
fn mpi_calls(mpi: Mpi, fe: FrontEnd) {
    gdb::require_ptrace();
    let job = Job::builder(mpi, Example::BarrierVsRecv).start();
    for rank in job.ranks() {
        let want = if rank.rank == 0 { "barrier" } else { "recv" };
        let (call, p) = call_of(fe, rank.pid, want);
        eprintln!("{fe:?} under {mpi}, rank {}: {call}", rank.rank);
        let world = world(&p);
        assert_eq!(call["communicator"], world["id"], "rank {}: {call:#}", rank.rank);
        if want == "barrier" {
            assert_eq!(call["peer"], Value::Null);
            continue;
        }
        let posted = receives(&p);
        assert_eq!(posted.len(), 1, "{posted:?}");
        assert_eq!(call["buffer"], posted[0]["buffer"], "rank {}: {call:#}", rank.rank);
        assert_eq!(
            (&call["peer"], &call["tag"]),
            (&Value::from(0), &Value::from(3)),
            "{call:#}"
        );
        assert_eq!(call["why"], Value::Null, "{call:#}");
    }
}

#[test]
fn merged_stacks_openmpi() {
    merged_stacks(Mpi::OpenMpi);
}

#[test]
fn merged_stacks_mpich() {
    merged_stacks(Mpi::Mpich);
}

#[test]
fn mpi_calls_gdb_openmpi() {
    mpi_calls(Mpi::OpenMpi, FrontEnd::Gdb);
}

#[test]
fn mpi_calls_gdb_mpich() {
    mpi_calls(Mpi::Mpich, FrontEnd::Gdb);
}

#[test]
fn mpi_calls_lldb_openmpi() {
    mpi_calls(Mpi::OpenMpi, FrontEnd::Lldb);
}

#[test]
fn mpi_calls_lldb_mpich() {
    mpi_calls(Mpi::Mpich, FrontEnd::Lldb);
}

/// Which of the examples a test of [`every_example_the_same_where`] takes:
/// the suite runs the two halves side by side.
#[derive(Clone, Copy, PartialEq)]
enum Examples {
    /// The stack-aware examples (the first eight).
    StackAware,
    /// The others, and `healthy`.
    TheRest,
}

/// Every example of a test-bed MPI: gdb, lldb and the CLI give every rank
/// the same "where" line (`healthy` moves, so its ranks are checked against
/// the two places it can be; `slow` runs to its end). The packaged MPIs'
/// stack-aware examples are checked so in tests/stacks_only.rs, beside the
/// verdict from their stacks, on the same jobs.
fn every_example_the_same_where(mpi: Mpi, which: Examples) {
    gdb::require_ptrace();
    let cases: [(Example, &[&str]); 15] = [
        (Example::BarrierVsRecv, &[]),
        (Example::SplitMismatch, &[]),
        (Example::SsendRing, &[]),
        (Example::AnySourceComputing, &[]),
        (Example::Waitany, &["any"]),
        (Example::Waitany, &["all"]),
        (Example::Threads, &["compute"]),
        (Example::Threads, &["join"]),
        (Example::Ring, &[]),
        (Example::NamedComms, &[]),
        (Example::Unexpected, &[]),
        (Example::Deadlock, &[]),
        (Example::ManyOps, &["10"]),
        (Example::Sessions, &[]),
        (Example::DeepStack, &["20"]),
    ];
    let cases = match which {
        Examples::StackAware => &cases[..8],
        Examples::TheRest => &cases[8..],
    };
    for &(example, args) in cases {
        let Some(job) = Job::builder(mpi, example).args(args.iter().copied()).start_supported() else {
            continue;
        };
        std::thread::sleep(Duration::from_millis(1000));
        let pids: Vec<u32> = (0..job.ranks().len()).map(|r| job.pid_of(r)).collect();
        assert_the_same_where(&pids, example, &format!("{example} {args:?} under {mpi}"));
    }
    if which == Examples::StackAware {
        return;
    }
    let job = Job::builder(mpi, Example::Healthy).start();
    assert_healthy_where(job.pid_of(1), &mpi.to_string());
}

#[test]
fn every_example_the_same_where_stack_aware_openmpi() {
    every_example_the_same_where(Mpi::OpenMpi, Examples::StackAware);
}

#[test]
fn every_example_the_same_where_the_rest_openmpi() {
    every_example_the_same_where(Mpi::OpenMpi, Examples::TheRest);
}

#[test]
fn every_example_the_same_where_stack_aware_mpich() {
    every_example_the_same_where(Mpi::Mpich, Examples::StackAware);
}

#[test]
fn every_example_the_same_where_the_rest_mpich() {
    every_example_the_same_where(Mpi::Mpich, Examples::TheRest);
}
