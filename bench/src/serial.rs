//! `mpiq-bench serial`: long single-rank phases under `mpiq run --detect`
//! with its defaults (issue 41). Real codes read, partition or factorize on
//! one rank for minutes while the others wait in a collective; mpiq must
//! never end such a job, and must still catch a rank that never returns:
//!
//! - `compute`: `examples/irregular.c`, rank 0 computing alone for the
//!   phase's length (the others in `MPI_Allreduce`): runs to its end, exit
//!   0 (a suspected hang may be reported on the way, the job left running);
//! - `io`: the same with rank 0 reading a file for the phase's length
//!   instead: runs to its end, exit 0, never even suspected (its I/O
//!   counters grow);
//! - `forever`: `examples/compute_stuck.c`, a rank that computes forever:
//!   reported (suspected) within 2 minutes, ended within 15.
//!
//! The CI keeps short versions: `run_cmd.rs`'s `detect_lets_an_irregular_slow_job_finish_*`
//! (a 10 s phase under `--min-hang 20s`) and `detect_ends_a_job_waiting_for_a_computing_rank_*`.

use std::path::Path;
use std::time::{Duration, Instant};

use mpiq_tests::run::run_within;
use mpiq_tests::{build_example, Example, JobDir, Mpi};

use crate::stacks::parse_mpi;

/// What one case did.
struct Case {
    name: &'static str,
    secs: f64,
    exit: Option<i32>,
    /// When `mpiq run` first said a suspected hang, seconds after its start.
    suspected_at: Option<f64>,
    verdict: String,
    ok: bool,
    expected: &'static str,
}

/// The `[  12.3 s]` of the first `mpiq run:` line holding `needle`.
fn said_at(stderr: &str, needle: &str) -> Option<f64> {
    stderr.lines().find(|l| l.contains(needle)).and_then(|l| {
        let (_, rest) = l.split_once('[')?;
        let (secs, _) = rest.split_once(" s]")?;
        secs.trim().parse().ok()
    })
}

fn run_case(mpi: Mpi, example: Example, ranks: usize, args: &[String]) -> (f64, mpiq_tests::run::Run) {
    let exe = build_example(mpi, example);
    let starter = mpi.starter_command(ranks, &exe, args);
    let mut cmd = mpiq_tests::frontends::cli_command(&["run", "--detect", "-v", "--"]);
    cmd.arg(starter.get_program()).args(starter.get_args());
    cmd.env("LD_LIBRARY_PATH", mpi.library_dir())
        .env("MPIQ_EXAMPLE_LIFETIME", "3600");
    let dir = JobDir::new();
    dir.apply(&mut cmd);
    let t = Instant::now();
    let r = run_within(cmd, Duration::from_secs(3600));
    (t.elapsed().as_secs_f64(), r)
}

/// `mpiq-bench serial [--mpi openmpi] [--minutes 5] [--cases compute,io,forever]`.
pub fn main(args: &[String], _scratch: &Path) -> Result<(), String> {
    let mut mpi = Mpi::OpenMpi;
    let mut minutes = 5.0f64;
    let mut cases = vec!["compute".to_string(), "io".to_string(), "forever".to_string()];
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().cloned().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--mpi" => mpi = parse_mpi(&val()?)?,
            "--minutes" => minutes = val()?.parse().map_err(|e| format!("--minutes: {e}"))?,
            "--cases" => cases = val()?.split(',').map(String::from).collect(),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if let Some(bad) = cases
        .iter()
        .find(|c| !["compute", "io", "forever"].contains(&c.as_str()))
    {
        return Err(format!("--cases: {bad} is not one of compute, io, forever"));
    }
    let phase = (minutes * 60.0).round();
    // The job runs a minute past its phase, then ends on its own.
    let total = format!("{}", phase + 60.0);
    let mut done = Vec::new();
    for case in &cases {
        let c = match case.as_str() {
            "compute" => {
                let (secs, r) = run_case(mpi, Example::Irregular, 4, &[total.clone(), format!("{phase}")]);
                Case {
                    name: "compute",
                    secs,
                    exit: r.code(),
                    suspected_at: said_at(&r.stderr, "suspected hang"),
                    verdict: first_verdict(&r.stderr),
                    ok: r.code() == Some(0) && !r.stderr.contains("ending the job"),
                    expected: "runs to its end (exit 0)",
                }
            }
            "io" => {
                let (secs, r) = run_case(
                    mpi,
                    Example::Irregular,
                    4,
                    &[total.clone(), "0".to_string(), format!("{phase}")],
                );
                let suspected_at = said_at(&r.stderr, "suspected hang");
                Case {
                    name: "io",
                    secs,
                    exit: r.code(),
                    suspected_at,
                    verdict: first_verdict(&r.stderr),
                    ok: r.code() == Some(0) && !r.stderr.contains("ending the job") && suspected_at.is_none(),
                    expected: "runs to its end (exit 0), never suspected",
                }
            }
            "forever" => {
                let (secs, r) = run_case(mpi, Example::ComputeStuck, 4, &[]);
                let suspected_at = said_at(&r.stderr, "suspected hang");
                Case {
                    name: "forever",
                    secs,
                    exit: r.code(),
                    suspected_at,
                    verdict: first_verdict(&r.stderr),
                    ok: r.code() == Some(124) && suspected_at.is_some_and(|s| s <= 120.0) && secs <= 15.0 * 60.0,
                    expected: "suspected within 2 min, ended (124) within 15",
                }
            }
            other => return Err(format!("--cases: {other} is not one of compute, io, forever")),
        };
        eprintln!("mpiq-bench serial: {} done in {:.0} s", c.name, c.secs);
        done.push(c);
    }
    println!("{mpi}, 4 ranks, a single-rank phase of {minutes} min, `mpiq run --detect` with its defaults:\n");
    println!("| case | expected | minutes | exit | suspected after | verdict | as expected |");
    println!("|---|---|---|---|---|---|---|");
    for c in &done {
        println!(
            "| {} | {} | {:.1} | {} | {} | {} | {} |",
            c.name,
            c.expected,
            c.secs / 60.0,
            c.exit.map_or("-".into(), |e| e.to_string()),
            c.suspected_at.map_or("never".into(), |s| format!("{s:.0} s")),
            c.verdict,
            if c.ok { "yes" } else { "NO" }
        );
    }
    if done.iter().any(|c| !c.ok) {
        return Err("a case did not do what it must".into());
    }
    Ok(())
}

/// The verdict `mpiq run` ended or reported with (`verdict: ...`), its
/// first 80 characters; `-` when it said none.
fn first_verdict(stderr: &str) -> String {
    stderr
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("verdict: "))
        .map_or_else(|| "-".to_string(), |v| v.chars().take(80).collect())
}
