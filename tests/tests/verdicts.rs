//! The designed verdict of every example of issue 12, on real jobs under
//! Open MPI 4.1.4 and MPICH 4.0.2: `mpiq job` (two samples, call stacks
//! fused with the queues), then `gcore` of every rank read by `mpiq core`
//! (one sample), which must agree with the live job. And the earlier
//! examples keep the verdict they had without stacks.
//!
//! Each example's header comment states its designed verdict; the
//! expectations here are that comment, not what mpiq happens to say.

use std::time::Duration;

use mpiq_tests::frontends::cli as mpiq;
use mpiq_tests::{gdb, Example, Job, Mpi};
use serde_json::{json, Value};

/// What an example is designed to give.
struct Designed {
    verdict: &'static str,
    /// Exact cycles, when the verdict is a deadlock.
    cycles: Option<Value>,
    /// Ranks blocked behind the cycles.
    blocked: Option<Value>,
    /// Words the summary must hold.
    words: &'static [&'static str],
}

fn check(a: &Value, want: &Designed, what: &str) {
    assert_eq!(a["verdict"], want.verdict, "{what}: {a:#}");
    if let Some(c) = &want.cycles {
        assert_eq!(&a["cycles"], c, "{what}: {a:#}");
    }
    if let Some(b) = &want.blocked {
        assert_eq!(&a["blocked"], b, "{what}: {a:#}");
    }
    let summary = a["summary"].as_str().unwrap_or_default();
    for w in want.words {
        assert!(summary.contains(w), "{what}: no '{w}' in the summary: {summary}");
    }
    // Every rank has a place from its stacks.
    let places = a["where"].as_array().map(Vec::len).unwrap_or(0);
    assert!(places > 0, "{what}: no 'where' in {a:#}");
    assert!(
        a["where"].as_array().unwrap().iter().all(|w| w["state"] != "unknown"),
        "{what}: a rank without stacks: {:#}",
        a["where"]
    );
}

fn designed(mpi: Mpi, example: Example, args: &[&str], want: Designed) {
    gdb::require_ptrace();
    let mut b = Job::builder(mpi, example);
    if !args.is_empty() {
        b = b.args(args.iter().copied());
    }
    let job = b.start();
    // READY comes just before each rank's last call: let every rank reach it.
    std::thread::sleep(Duration::from_millis(1500));
    let what = format!("{example} {} under {mpi}", args.join(" "));
    let starter = job.starter_pid().to_string();
    let r = mpiq(&["job", "--starter", &starter, "--json"]);
    let live = r.json_exact();
    check(&live["analysis"], &want, &format!("{what}, live"));
    let code = match want.verdict {
        "deadlock" => 3,
        "unknown" => 4,
        _ => 0,
    };
    assert_eq!(r.code(), Some(code), "{what}: {}", r.stderr);

    // The same from core files of every rank (one sample).
    let dir = std::env::temp_dir().join(format!(
        "mpiq-verdicts-{}-{}-{}-{}",
        mpi.name(),
        example,
        args.join("-"),
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let cores = job.gcore_all(&dir);
    let r = mpiq_tests::frontends::cli_cores(&cores, &["--json"]);
    let _ = std::fs::remove_dir_all(&dir);
    let dead = r.json_exact();
    check(&dead["analysis"], &want, &format!("{what}, cores"));
    assert_eq!(dead["analysis"]["cycles"], live["analysis"]["cycles"], "{what}");
}

/// The designed verdict of `example` with argument `arg`, as its header
/// comment states it.
fn designed_for(example: Example, arg: &str) -> Designed {
    let deadlock = |cycles: Value, blocked: Value, words: &'static [&'static str]| Designed {
        verdict: "deadlock",
        cycles: Some(cycles),
        blocked: Some(blocked),
        words,
    };
    let fine = Designed {
        verdict: "no_deadlock",
        cycles: Some(json!([])),
        blocked: None,
        words: &[],
    };
    match (example, arg) {
        (Example::BarrierVsRecv, _) => deadlock(
            json!([[0, 1], [0, 2], [0, 3]]),
            json!([]),
            &[
                "rank 0 is in MPI_Barrier on MPI_COMM_WORLD (barrier_vs_recv.c:",
                "ranks 1-3 wait in MPI_Recv from rank 0, tag 3",
            ],
        ),
        (Example::SplitMismatch, _) => deadlock(
            json!([[0, 1]]),
            json!([2, 3]),
            &["rank 0 is in MPI_Barrier on 'low'", "MPI_Barrier on MPI_COMM_WORLD"],
        ),
        (Example::SsendRing, _) => deadlock(
            json!([[0, 1, 2, 3]]),
            json!([]),
            &[
                "rank 0 waits in MPI_Ssend to rank 1, tag 500",
                "rank 3 waits in MPI_Ssend to rank 0, tag 503",
            ],
        ),
        (Example::Waitany, "all") => deadlock(json!([[0, 1]]), json!([]), &["rank 0 waits in MPI_Waitall"]),
        (Example::Threads, "join") => deadlock(json!([[0, 1]]), json!([]), &["MPI_Recv"]),
        _ => fine,
    }
}

fn designed_verdict(mpi: Mpi, example: Example, arg: &str) {
    let args: &[&str] = if arg.is_empty() { &[] } else { &[arg] };
    designed(mpi, example, args, designed_for(example, arg));
}

macro_rules! both {
    ($($o:ident, $m:ident: $example:ident $arg:literal;)*) => {$(
        #[test]
        fn $o() {
            designed_verdict(Mpi::OpenMpi, Example::$example, $arg);
        }
        #[test]
        fn $m() {
            designed_verdict(Mpi::Mpich, Example::$example, $arg);
        }
    )*};
}

both! {
    barrier_vs_recv_openmpi, barrier_vs_recv_mpich: BarrierVsRecv "";
    split_mismatch_openmpi, split_mismatch_mpich: SplitMismatch "";
    ssend_ring_openmpi, ssend_ring_mpich: SsendRing "";
    any_source_computing_openmpi, any_source_computing_mpich: AnySourceComputing "";
    waitany_openmpi, waitany_mpich: Waitany "any";
    waitall_openmpi, waitall_mpich: Waitany "all";
    threads_compute_openmpi, threads_compute_mpich: Threads "compute";
    threads_join_openmpi, threads_join_mpich: Threads "join";
    healthy_openmpi, healthy_mpich: Healthy "";
}

/// The earlier examples, whose ranks sit in `pause()` or `MPI_Wait`, keep
/// the verdict (and cycles) the queues alone gave them.
fn earlier_keep_their_verdicts(mpi: Mpi) {
    gdb::require_ptrace();
    for example in [
        Example::Ring,
        Example::NamedComms,
        Example::Unexpected,
        Example::Deadlock,
    ] {
        let job = Job::builder(mpi, example).start();
        std::thread::sleep(Duration::from_millis(500));
        let starter = job.starter_pid().to_string();
        let with = mpiq(&["job", "--starter", &starter, "--json"]).json_exact();
        let without = mpiq(&["job", "--starter", &starter, "--json", "--no-stacks"]).json_exact();
        let what = format!("{example} under {mpi}");
        assert!(
            with["analysis"]["where"].as_array().is_some_and(|w| !w.is_empty()),
            "{what}"
        );
        assert!(
            without["analysis"]["where"].is_null(),
            "{what}: {:#}",
            without["analysis"]
        );
        for key in ["verdict", "cycles", "blocked", "unknown_ranks"] {
            assert_eq!(with["analysis"][key], without["analysis"][key], "{what}: {key}");
        }
    }
}

#[test]
fn earlier_examples_keep_their_verdicts_openmpi() {
    earlier_keep_their_verdicts(Mpi::OpenMpi);
}

#[test]
fn earlier_examples_keep_their_verdicts_mpich() {
    earlier_keep_their_verdicts(Mpi::Mpich);
}
