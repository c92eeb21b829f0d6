//! `mpiq run` on real jobs under both test-bed MPIs (Open MPI's `mpirun`,
//! MPICH's `mpiexec`): a hanging job (`deadlock`) is reported on (stderr
//! and `--report DIR`: report.txt, report.json with the cycle, waits.dot,
//! waits.svg, job-output.txt) and ended, exit status 124, with every
//! process it started gone; a job that finishes passes its exit status
//! through (0, and a failing one); `--detect` ends a deadlocked job early
//! and lets a healthy, communicating one run to its end; `--detect`
//! without `--timeout` ends hung jobs that are no deadlock (a rank
//! computing while the others wait for it, a livelock of `MPI_Iprobe`) and
//! lets a job with long, irregular and growing phases finish; the starter is
//! found under a wrapper; a command with no starter is reported and ended
//! (SIGKILL when it ignores SIGTERM); a signal to mpiq run is passed on,
//! and a SIGKILLed mpiq run leaves no job behind (its watchdog).
//!
//! Uses the `mpiq` binary of the test's own profile (build the workspace
//! first: `cargo build --release --workspace` for `cargo test --release`).

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;
use std::sync::RwLock;
use std::time::{Duration, Instant};

use mpiq_tests::fixtures::WorkDir;
use mpiq_tests::frontends::cli_command;
use mpiq_tests::job::SCRUBBED_ENV_PREFIXES;
use mpiq_tests::procs::{self, Proc};
use mpiq_tests::run::{hung_by_timeout, job_below_tool, spawn, Run, Running};
use mpiq_tests::{assert_all_gone, build_example, gdb, Example, JobDir, Mpi};
use serde_json::Value;

/// `mpiq run`'s exit status for a job it ended.
const EXIT_HUNG: i32 = 124;

/// The deadlock example's ranks spin at full speed: the tests whose point
/// is that a healthy job is *not* called deadlocked run alone (write
/// lock), the others side by side (read lock).
static CPU: RwLock<()> = RwLock::new(());

fn shared() -> std::sync::RwLockReadGuard<'static, ()> {
    CPU.read().unwrap_or_else(|e| e.into_inner())
}

fn alone() -> std::sync::RwLockWriteGuard<'static, ()> {
    CPU.write().unwrap_or_else(|e| e.into_inner())
}

/// `mpiq run ARGS -- <mpi's starter> -n N <example> EXAMPLE_ARGS`, with
/// the environment the harness gives its jobs (no inherited MPI variables,
/// the MPI's libraries first, a 120 s safety-net lifetime, its own
/// [`JobDir`], returned to be kept until the job is over), through `wrap`
/// (e.g. `sh -c`) when given.
fn mpiq_run(args: &[&str], mpi: Mpi, job: (Example, usize, &[&str]), wrap: bool) -> (Command, JobDir) {
    let (example, nprocs, example_args) = job;
    let exe = build_example(mpi, example);
    job_command(args, mpi, mpi.starter_command(nprocs, &exe, example_args), wrap)
}

/// [`mpiq_run`] for any starter command.
fn job_command(args: &[&str], mpi: Mpi, starter: Command, wrap: bool) -> (Command, JobDir) {
    let mut words: Vec<OsString> = vec![starter.get_program().to_owned()];
    words.extend(starter.get_args().map(ToOwned::to_owned));
    if wrap {
        let line: Vec<String> = words.iter().map(|w| format!("'{}'", w.to_string_lossy())).collect();
        words = vec!["sh".into(), "-c".into(), format!("{}; exit $?", line.join(" ")).into()];
    }
    let mut cmd = cli_command(&["run"]);
    cmd.args(args).arg("--").args(&words);
    for (key, _) in std::env::vars_os() {
        if key
            .to_str()
            .is_some_and(|k| SCRUBBED_ENV_PREFIXES.iter().any(|p| k.starts_with(p)))
        {
            cmd.env_remove(&key);
        }
    }
    for (k, v) in starter.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    cmd.env("LD_LIBRARY_PATH", mpi.library_dir())
        .env("MPIQ_EXAMPLE_LIFETIME", "120");
    // The job below the other tests' debuggers, and mpiq run beside them
    // (the job's launcher is found by its name, so no `nice` word before it).
    job_below_tool(&mut cmd);
    let dir = JobDir::new();
    dir.apply(&mut cmd);
    (cmd, dir)
}

/// Waits until the job printed `n` READY lines (passed through on mpiq
/// run's standard output), then returns every process under mpiq run: the
/// job's, and mpiq's watchdog.
fn ready(running: &Running, n: usize) -> Vec<Proc> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while running.stdout_so_far().matches("MPIQ-READY").count() < n {
        assert!(
            Instant::now() < deadline,
            "the job did not get ready:\n{}",
            running.stdout_so_far()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    procs::descendants(running.id())
}

/// [`ready`], or what was under mpiq run when it ended first (a job
/// ended in its start-up).
fn ready_or_ended(running: &mut Running, n: usize) -> Vec<Proc> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    while running.stdout_so_far().matches("MPIQ-READY").count() < n {
        let now = procs::descendants(running.id());
        if now.len() >= seen.len() {
            seen = now;
        }
        if running.has_exited() {
            return seen;
        }
        assert!(
            Instant::now() < deadline,
            "the job did not get ready:\n{}",
            running.stdout_so_far()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    procs::descendants(running.id())
}

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{}: {e}", dir.join(name).display()))
}

/// What every report on the deadlock example (3 ranks) holds; `svg`:
/// whether graphviz's `dot` was there to draw waits.svg.
fn assert_deadlock_report(r: &Run, dir: &Path, why: &str, svg: bool) {
    assert_eq!(r.code(), Some(EXIT_HUNG), "{r}");
    r.assert_stderr(why);
    r.assert_stderr("verdict: DEADLOCK");
    r.assert_stderr("Deadlock analysis: DEADLOCK");
    r.assert_stderr("cycle: 0 -> 1 -> 2 -> 0");
    r.assert_stderr("mpiq run: the job was ended");
    // The job's output passed through, and kept.
    assert_eq!(r.stdout.matches("MPIQ-READY").count(), 3, "{r}");
    let text = read(dir, "report.txt");
    assert!(
        r.stderr.contains(&text),
        "report.txt is not what stderr said:\n{text}\n{r}"
    );
    let files = if svg {
        "report.json, report.html, waits.dot, waits.svg, job-output.txt"
    } else {
        "report.json, report.html, waits.dot, job-output.txt"
    };
    assert!(text.contains(why) && text.contains(files), "{text}");
    // The page: the same verdict, its data embedded (opened in a browser
    // by html.rs and run_recorder.rs).
    let page = read(dir, "report.html");
    assert!(
        page.starts_with("<!DOCTYPE html>"),
        "report.html: {}",
        &page[..page.len().min(200)]
    );
    assert!(
        page.contains("\"verdict\":\"deadlock\"") && page.contains("\"cycles\":[[0,1,2]]"),
        "report.html has not the analysis"
    );
    let json: Value = serde_json::from_str(&read(dir, "report.json")).expect("report.json is JSON");
    assert_eq!(json["schema"], "mpiq.snapshot/2");
    assert_eq!(json["processes"].as_array().map(Vec::len), Some(3), "{json:#}");
    let a = &json["analysis"];
    assert_eq!(a["verdict"], "deadlock", "{a:#}");
    assert_eq!(a["cycles"], serde_json::json!([[0, 1, 2]]), "{a:#}");
    assert!(
        a["summary"]
            .as_str()
            .unwrap_or_default()
            .contains("rank 0 waits for rank 1 on MPI_COMM_WORLD tag 400"),
        "{a:#}"
    );
    assert!(read(dir, "waits.dot").starts_with("digraph"));
    if svg {
        assert!(read(dir, "waits.svg").contains("<svg"));
    } else {
        assert!(
            text.contains("waits.svg not written: graphviz's `dot` is not installed"),
            "{text}"
        );
        assert!(!dir.join("waits.svg").exists());
    }
    let output = read(dir, "job-output.txt");
    assert_eq!(output.matches("MPIQ-READY").count(), 3, "{output}");
    assert!(output.starts_with("==> the job's standard output"), "{output}");
}

fn hung_job(mpi: Mpi) {
    gdb::require_ptrace();
    let _cpu = shared();
    let dir = WorkDir::new(&format!("run-hung-{}", mpi.name()));
    let report = dir.path("report");
    let attempt = |timeout: &str| {
        let _ = std::fs::remove_dir_all(&report);
        let args = ["--timeout", timeout, "--report", report.to_str().unwrap()];
        let (cmd, _job_dir) = mpiq_run(&args, mpi, (Example::Deadlock, 3, &[]), false);
        let mut running = spawn(cmd);
        let started = ready_or_ended(&mut running, 3);
        (
            running.wait_within(Duration::from_secs(120)),
            started,
            timeout.to_string(),
        )
    };
    let (r, started, timeout) = hung_by_timeout("5s", attempt, |(r, ..)| r);
    assert!(started.len() >= 4, "{started:?}");
    let secs: u64 = timeout.trim_end_matches('s').parse().unwrap();
    assert!(r.elapsed >= Duration::from_secs(secs), "{r}");
    assert_deadlock_report(
        &r,
        &report,
        &format!("ending the job, which did not finish within --timeout {timeout}"),
        true,
    );
    r.assert_stderr("starter: ");
    r.assert_stderr("(the command itself)");
    assert_all_gone(&started, Duration::from_secs(10));
}

#[test]
fn a_hung_job_is_reported_and_ended_openmpi() {
    hung_job(Mpi::OpenMpi);
}

#[test]
fn a_hung_job_is_reported_and_ended_mpich() {
    hung_job(Mpi::Mpich);
}

fn finished_job(mpi: Mpi) {
    let _cpu = shared();
    let dir = WorkDir::new(&format!("run-finished-{}", mpi.name()));
    let report = dir.path("report");
    let args = ["--timeout", "60s", "--report", report.to_str().unwrap()];
    let (cmd, _job_dir) = mpiq_run(&args, mpi, (Example::Slow, 4, &[]), false);
    let running = spawn(cmd);
    let started = ready(&running, 4);
    let r = running.wait_within(Duration::from_secs(120));
    assert_eq!(r.code(), Some(0), "{r}");
    assert_eq!(r.stdout.matches("MPIQ-READY").count(), 4, "{r}");
    assert!(!r.stderr.contains("mpiq run:"), "{r}");
    // The directory is made, and nothing written into it.
    let files: Vec<_> = std::fs::read_dir(&report).expect("the report directory").collect();
    assert!(files.is_empty(), "{files:?}");
    assert_all_gone(&started, Duration::from_secs(10));

    // A failing job's status, through the starter and mpiq run.
    let failing = mpi.starter_command(2, Path::new("/bin/sh"), &["-c", "echo failing; exit 3"]);
    let (cmd, _job_dir) = job_command(&["--timeout", "60s"], mpi, failing, false);
    let r = mpiq_tests::run::run_within(cmd, Duration::from_secs(120));
    assert_eq!(r.code(), Some(3), "{r}");
    assert_eq!(r.stdout.matches("failing").count(), 2, "{r}");
}

#[test]
fn a_finished_job_passes_its_status_through_openmpi() {
    finished_job(Mpi::OpenMpi);
}

#[test]
fn a_finished_job_passes_its_status_through_mpich() {
    finished_job(Mpi::Mpich);
}

/// `--detect` on the deadlock example, the starter under `sh -c` when
/// `wrap`, and with no graphviz `dot` on PATH when `no_dot` (no SVG then).
fn detect_deadlock(mpi: Mpi, wrap: bool, no_dot: bool) {
    gdb::require_ptrace();
    let _cpu = shared();
    let dir = WorkDir::new(&format!("run-detect-{}-{wrap}-{no_dot}", mpi.name()));
    let report = dir.path("report");
    let args = [
        "--timeout",
        "120s",
        "--detect",
        "--detect-every",
        "1s",
        "--report",
        report.to_str().unwrap(),
    ];
    let (mut cmd, _job_dir) = mpiq_run(&args, mpi, (Example::Deadlock, 3, &[]), wrap);
    if no_dot {
        // The starter is named by its path; nothing else is looked up.
        cmd.env("PATH", dir.path("empty"));
    }
    let running = spawn(cmd);
    let started = ready(&running, 3);
    let r = running.wait_within(Duration::from_secs(120));
    assert!(
        r.elapsed < Duration::from_secs(60),
        "--detect did not end it early: {r}"
    );
    assert_deadlock_report(
        &r,
        &report,
        "ending the job, which --detect found deadlocked (check ",
        !no_dot,
    );
    if wrap {
        r.assert_stderr("(started by the command; found by its name)");
    }
    assert_all_gone(&started, Duration::from_secs(10));
}

#[test]
fn detect_ends_a_deadlocked_job_early_openmpi() {
    detect_deadlock(Mpi::OpenMpi, false, false);
}

#[test]
fn detect_ends_a_deadlocked_job_early_mpich_without_graphviz() {
    detect_deadlock(Mpi::Mpich, false, true);
}

#[test]
fn the_starter_is_found_under_a_wrapper() {
    detect_deadlock(Mpi::OpenMpi, true, false);
}

fn detect_healthy(mpi: Mpi) {
    gdb::require_ptrace();
    let _cpu = alone();
    // About 100 x 50 ms of exchanges, checked every second.
    let args = ["--timeout", "120s", "--detect", "--detect-every", "1s", "-v"];
    let (cmd, _job_dir) = mpiq_run(&args, mpi, (Example::Healthy, 4, &["100"]), false);
    let running = spawn(cmd);
    let started = ready(&running, 4);
    let r = running.wait_within(Duration::from_secs(120));
    assert_eq!(r.code(), Some(0), "{r}");
    assert!(!r.stderr.contains("ending the job"), "{r}");
    let checked = r.stderr.matches(": no deadlock").count();
    assert!(checked >= 2, "fewer than 2 checks saw the job: {r}");
    assert!(!r.stderr.contains(": deadlock"), "{r}");
    assert_all_gone(&started, Duration::from_secs(10));
}

#[test]
fn detect_lets_a_healthy_job_finish_openmpi() {
    detect_healthy(Mpi::OpenMpi);
}

#[test]
fn detect_lets_a_healthy_job_finish_mpich() {
    detect_healthy(Mpi::Mpich);
}

#[test]
fn no_starter_is_reported_and_a_job_ignoring_sigterm_is_killed() {
    let dir = WorkDir::new("run-no-starter");
    let report = dir.path("report");
    let mut cmd = cli_command(&["run", "--timeout", "1s", "--grace", "1s", "--report"]);
    cmd.arg(&report).args([
        "--",
        "sh",
        "-c",
        "trap '' TERM; echo started; sleep 60 & sleep 61; wait",
    ]);
    let running = spawn(cmd);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !running.stdout_so_far().contains("started") {
        assert!(Instant::now() < deadline, "the command did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    let started = procs::descendants(running.id());
    let r = running.wait_within(Duration::from_secs(60));
    assert_eq!(r.code(), Some(EXIT_HUNG), "{r}");
    r.assert_stderr("no MPI starter found");
    r.assert_stderr("SIGKILL: it was still running after --grace");
    let text = read(&report, "report.txt");
    assert!(
        text.contains("verdict: none: the job could not be read: no MPI starter found"),
        "{text}"
    );
    assert!(!report.join("report.json").exists() && !report.join("waits.dot").exists());
    assert!(read(&report, "job-output.txt").contains("started"));
    assert!(started.iter().filter(|p| p.name == "sleep").count() == 2, "{started:?}");
    assert_all_gone(&started, Duration::from_secs(10));
}

/// A healthy job (forever) under mpiq run (through `sh -c` when `wrap`),
/// ready, with its processes.
fn healthy_forever(mpi: Mpi, wrap: bool) -> (Running, Vec<Proc>, JobDir) {
    let (cmd, dir) = mpiq_run(&["--timeout", "120s"], mpi, (Example::Healthy, 3, &[]), wrap);
    let running = spawn(cmd);
    let started = ready(&running, 3);
    (running, started, dir)
}

#[test]
fn a_signal_to_mpiq_run_is_passed_on_and_the_job_ended() {
    let _cpu = shared();
    let (running, started, _job_dir) = healthy_forever(Mpi::OpenMpi, false);
    running.signal("TERM");
    let r = running.wait_within(Duration::from_secs(60));
    assert_eq!(r.code(), Some(128 + 15), "{r}");
    r.assert_stderr("SIGTERM: passed on to the job");
    assert_all_gone(&started, Duration::from_secs(10));
}

#[test]
fn a_killed_mpiq_run_leaves_no_job_behind() {
    let _cpu = shared();
    // Through `sh -c`: the kernel's SIGTERM on mpiq's death reaches only
    // the shell, which dies of it and leaves mpiexec running; the watchdog
    // ends the rest.
    let (running, started, _job_dir) = healthy_forever(Mpi::Mpich, true);
    let watchdog: Vec<&Proc> = started.iter().filter(|p| p.name == "mpiq").collect();
    assert_eq!(watchdog.len(), 1, "{started:?}");
    assert!(started.iter().any(|p| p.name.starts_with("mpiexec")), "{started:?}");
    running.signal("KILL");
    let r = running.wait_within(Duration::from_secs(60));
    assert_eq!(r.signal(), Some(9), "{r}");
    assert_all_gone(&started, Duration::from_secs(20));
}

#[test]
fn usage_errors_and_a_missing_command() {
    let run = |args: &[&str]| mpiq_tests::run::run(cli_command(args));
    let r = run(&["run", "--", "true"]);
    assert_eq!(r.code(), Some(2), "{r}");
    r.assert_stderr("--timeout");
    let r = run(&["run", "--timeout", "5x", "--", "true"]);
    assert_eq!(r.code(), Some(2), "{r}");
    r.assert_stderr("is not a duration");
    let r = run(&["run", "--timeout", "10s", "--", "/nonexistent/mpirun"]);
    assert_eq!(r.code(), Some(127), "{r}");
    let r = run(&["run", "--timeout", "10s", "--", "sh", "-c", "kill -TERM $$"]);
    assert_eq!(r.code(), Some(128 + 15), "{r}");
    let r = run(&["run", "--timeout", "500ms", "echo", "-n", "passed through"]);
    assert_eq!((r.code(), r.stdout.as_str()), (Some(0), "passed through"), "{r}");
}

/// A Python job whose rank 1 raised (`examples/python/raise_before_bcast.py`): `mpiq run`'s
/// report of the hung job holds the traceback from the job's output, naming the rank.
fn python_traceback(mpi: Mpi) {
    gdb::require_ptrace();
    let example = mpiq_tests::PyExample::RaiseBeforeBcast;
    let python = mpi.python().expect("a test-bed MPI with mpi4py");
    let script = example.script();
    let mut starter = mpi.starter_command(3, &python, &[script.as_os_str()]);
    starter.env("PYTHONUNBUFFERED", "1").env_remove("PYTHONPATH");
    let (cmd, _job_dir) = job_command(&["--timeout", "20s", "--grace", "2s"], mpi, starter, false);
    let r = mpiq_tests::run::run_within(cmd, Duration::from_secs(180));
    assert_eq!(r.code(), Some(124), "{r}");
    let line = example.line_of("bcast");
    for needle in [
        "Python traceback of rank 1, which exited its script with an uncaught exception:".to_string(),
        "  Traceback (most recent call last):".to_string(),
        "  RuntimeError: rank 1 failed".to_string(),
        format!("at raise_before_bcast.py:{line} (MPI_Bcast on MPI_COMM_WORLD)"),
    ] {
        assert!(
            r.stderr.contains(&needle),
            "{mpi}: {needle:?} is not in the report:\n{r}"
        );
    }
}

#[test]
fn a_hung_python_job_reports_the_raising_ranks_traceback_openmpi() {
    python_traceback(Mpi::OpenMpi);
}

#[test]
fn a_hung_python_job_reports_the_raising_ranks_traceback_mpich() {
    python_traceback(Mpi::Mpich);
}

/// The `--min-hang` of the hang tests but one: the shortest that still
/// leaves the rule three checks of 5 s to see the job stand still (and
/// the job's own start-up, which can stand still a few seconds, under it).
const SHORT_MIN_HANG: u64 = 20;

/// `--detect` with no `--timeout` (checks every 5 s, `--min-hang 20s`) on a
/// job that hangs without a deadlock: ended with 124 once it stood still
/// past the rule, the report saying so and naming `names`; its first line
/// (why the job is ended) names the rank waited on and its waiters as
/// `said` says, in that order.
fn detect_hang(mpi: Mpi, example: Example, nprocs: usize, names: &[&str], said: &[&str]) {
    detect_hang_after(Some(SHORT_MIN_HANG), mpi, example, nprocs, names, said);
}

/// [`detect_hang`] with `--min-hang MIN_HANG`s, or with its default (60 s,
/// "1 min") when `None`.
fn detect_hang_after(min_hang: Option<u64>, mpi: Mpi, example: Example, nprocs: usize, names: &[&str], said: &[&str]) {
    gdb::require_ptrace();
    let _cpu = shared();
    let min_hang_option = min_hang.map(|s| format!("{s}s"));
    // A rank computing forever is first only suspected (a long serial
    // phase looks the same), and ended past --compute-hang: 40 s here.
    let mut args = vec!["--detect", "--detect-every", "5s", "-v", "--compute-hang", "40s"];
    if let Some(m) = &min_hang_option {
        args.extend(["--min-hang", m.as_str()]);
    }
    let (min_secs, min_said) = match min_hang {
        Some(s) => (s, format!("{s} s")),
        None => (60, "1 min".to_string()),
    };
    let (mut cmd, _job_dir) = mpiq_run(&args, mpi, (example, nprocs, &[]), false);
    cmd.env("MPIQ_EXAMPLE_LIFETIME", "400");
    let running = spawn(cmd);
    let started = ready(&running, nprocs);
    let r = running.wait_within(Duration::from_secs(300));
    assert_eq!(r.code(), Some(EXIT_HUNG), "{r}");
    r.assert_stderr("ending the job, which --detect found hung (check ");
    r.assert_stderr("nothing in the job changed for ");
    // Hung by the rule; or, while a rank computes outside MPI (whether it
    // had a quarter of the CPU depends on how busy the machine is),
    // suspected by it first and hung past --compute-hang (40 s): reported
    // as suspected on the way when that is past --min-hang.
    let computing = r.stderr.contains("called hung only after");
    let suspected = computing && min_secs < 40;
    if computing {
        r.assert_stderr(&format!("it is suspected hung after max({min_said}, 3 × that) = "));
    } else {
        r.assert_stderr(&format!("it is called hung after max({min_said}, 3 × that) = "));
    }
    if suspected {
        r.assert_stderr("mpiq run: suspected hang, the job left running (check ");
    }
    r.assert_stderr("verdict: HUNG, ");
    for n in names {
        r.assert_stderr(n);
    }
    let why = r
        .stderr
        .lines()
        .find(|l| l.contains("which --detect found hung"))
        .unwrap_or_default();
    let mut from = 0;
    for w in said {
        match why[from..].find(w) {
            Some(at) => from += at + w.len(),
            None => panic!("`{w}` not in the hang's words (after `{}`): {why}", &why[..from]),
        }
    }
    // Never before --min-hang (--compute-hang when suspected first), and
    // not long after: 3 checks of 5 s past it.
    let min_secs = if computing { min_secs.max(40) } else { min_secs };
    assert!(
        r.elapsed >= Duration::from_secs(min_secs) && r.elapsed < Duration::from_secs(min_secs + 5 * 5 + 30),
        "ended after {:?}: {r}",
        r.elapsed
    );
    eprintln!("[hang] {example} under {mpi}: ended after {:.1?}", r.elapsed);
    assert_all_gone(&started, Duration::from_secs(10));
}

/// The one hang test at `--min-hang`'s default (60 s).
#[test]
fn detect_ends_a_job_waiting_for_a_computing_rank_openmpi() {
    detect_hang_after(
        None,
        Mpi::OpenMpi,
        Example::ComputeStuck,
        4,
        &[
            "ranks 0-2 wait in MPI_Allreduce",
            "for rank 3, which is computing in smooth",
        ],
        COMPUTING_SAID,
    );
}

#[test]
fn detect_ends_a_job_waiting_for_a_computing_rank_mpich() {
    detect_hang(
        Mpi::Mpich,
        Example::ComputeStuck,
        4,
        &[
            "ranks 0-2 wait in MPI_Allreduce",
            "for rank 3, which is computing in smooth",
        ],
        COMPUTING_SAID,
    );
}

/// The hang's words for `compute_stuck`: the rank waited on and what it
/// does, then its waiters. (Whether it used the CPU all along depends on
/// how busy the machine is: not asserted.)
const COMPUTING_SAID: &[&str] = &[
    "rank 3 has been computing in smooth (compute_stuck.c:",
    "; ranks 0-2 have waited for it in MPI_Allreduce",
    "; nothing in the job changed for ",
];

#[test]
fn detect_ends_a_job_waiting_for_a_computing_rank_openmpi5() {
    detect_hang(
        Mpi::OpenMpi5,
        Example::ComputeStuck,
        4,
        &[
            "ranks 0-2 wait in MPI_Allreduce",
            "for rank 3, which is computing in smooth",
        ],
        COMPUTING_SAID,
    );
}

#[test]
fn detect_ends_a_job_waiting_for_a_computing_rank_mpich_ch4() {
    detect_hang(
        Mpi::MpichCh4,
        Example::ComputeStuck,
        4,
        &[
            "ranks 0-2 wait in MPI_Allreduce",
            "for rank 3, which is computing in smooth",
        ],
        COMPUTING_SAID,
    );
}

/// PyPI's MPICH wheel: stacks only.
#[test]
fn detect_ends_a_job_waiting_for_a_computing_rank_pypi_mpich() {
    detect_hang(
        Mpi::PypiMpich,
        Example::ComputeStuck,
        4,
        &[
            "ranks 0-2 wait in MPI_Allreduce",
            "rank 3",
            "which is computing in smooth",
        ],
        COMPUTING_SAID,
    );
}

#[test]
fn detect_ends_a_job_waiting_for_a_computing_rank_debian_openmpi() {
    detect_hang(
        Mpi::DebianOpenMpi,
        Example::ComputeStuck,
        4,
        &[
            "ranks 0-2 wait in MPI_Allreduce",
            "rank 3",
            "which is computing in smooth",
        ],
        COMPUTING_SAID,
    );
}

#[test]
fn detect_ends_a_job_waiting_for_a_rank_blocked_reading_a_pipe_openmpi() {
    detect_hang(
        Mpi::OpenMpi,
        Example::PipeStuck,
        4,
        &[
            "ranks 0-2 wait in MPI_Recv from rank 3",
            "which is blocked outside MPI in read",
        ],
        &[
            "rank 3 has been blocked outside MPI in read, called from wait_for_token (pipe_stuck.c:",
            "; ranks 0-2 have waited for it in MPI_Recv from rank 3, tag 8",
            "; nothing in the job changed for ",
        ],
    );
}

#[test]
fn detect_ends_a_job_waiting_for_a_rank_that_exited_openmpi() {
    detect_hang(
        Mpi::OpenMpi,
        Example::ExitEarly,
        4,
        &["ranks 0-2 wait in MPI_Recv from rank 3", "which has exited"],
        &[
            "rank 3 has exited",
            "; ranks 0-2 have waited for it in MPI_Recv from rank 3, tag 9",
            "; nothing in the job changed for ",
        ],
    );
}

/// The livelock of `MPI_Iprobe` loops: every rank inside MPI, nothing
/// changed between the two samples of one check, nothing able to match:
/// the stall rule calls it a deadlock at the first check, before the hang
/// rule's time.
fn detect_livelock(mpi: Mpi) {
    gdb::require_ptrace();
    let _cpu = shared();
    let args = ["--detect", "--detect-every", "5s"];
    let (cmd, _job_dir) = mpiq_run(&args, mpi, (Example::Livelock, 4, &[]), false);
    let running = spawn(cmd);
    let started = ready(&running, 4);
    let r = running.wait_within(Duration::from_secs(300));
    assert_eq!(r.code(), Some(EXIT_HUNG), "{r}");
    r.assert_stderr("ending the job, which --detect found deadlocked (check ");
    r.assert_stderr("verdict: DEADLOCK: no rank can make progress: every rank is blocked inside MPI");
    r.assert_stderr("ranks 0-3 wait in MPI_Iprobe on MPI_COMM_WORLD (livelock.c:");
    assert!(r.elapsed < Duration::from_secs(60), "{r}");
    eprintln!("[hang] livelock under {mpi}: ended after {:.1?}", r.elapsed);
    assert_all_gone(&started, Duration::from_secs(10));
}

#[test]
fn detect_ends_a_livelock_openmpi() {
    detect_livelock(Mpi::OpenMpi);
}

#[test]
fn detect_ends_a_livelock_mpich() {
    detect_livelock(Mpi::Mpich);
}

/// A healthy job under `--detect --detect-every EVERY -v` with no
/// `--timeout`: it finishes (exit 0), is never ended or called hung, at
/// least `min_checks` checks saw it, and the cost of the checks is said.
/// Returns the run, for what each job shows more.
fn detect_finishes(mpi: Mpi, job: (Example, usize, &[&str]), every: &str, min_checks: usize) -> Run {
    detect_finishes_with(mpi, job, &["--detect-every", every], min_checks)
}

/// [`detect_finishes`] with `--detect -v` and the options `more`.
fn detect_finishes_with(mpi: Mpi, job: (Example, usize, &[&str]), more: &[&str], min_checks: usize) -> Run {
    gdb::require_ptrace();
    let _cpu = alone();
    let mut args = vec!["--detect", "-v"];
    args.extend_from_slice(more);
    let (mut cmd, _job_dir) = mpiq_run(&args, mpi, job, false);
    cmd.env("MPIQ_EXAMPLE_LIFETIME", "400");
    let running = spawn(cmd);
    let started = ready(&running, job.1);
    let r = running.wait_within(Duration::from_secs(400));
    assert_eq!(r.code(), Some(0), "{r}");
    assert!(!r.stderr.contains("ending the job"), "{r}");
    assert!(
        !r.stderr.contains("found hung") && !r.stderr.contains(", hung ("),
        "{r}"
    );
    let checks = r.stderr.matches(" s] check ").count();
    assert!(checks >= min_checks, "only {checks} checks saw the job: {r}");
    let cost = r
        .stderr
        .lines()
        .find(|l| {
            l.starts_with(&format!(
                "mpiq run: --detect's {checks} checks held the ranks on this node stopped for "
            ))
        })
        .unwrap_or_else(|| panic!("no cost of the {checks} checks said: {r}"));
    eprintln!(
        "[hang] {} under {mpi}: {checks} checks, {:.1?}, no false alarm; {cost}",
        job.0, r.elapsed
    );
    assert_all_gone(&started, Duration::from_secs(10));
    r
}

/// Irregular compute phases that grow, I/O phases, and one 10 s phase of
/// rank 0 while the others wait for it, for a minute, under `--min-hang
/// 20s` (the rule's ratios as with its default of 60 s and a 25 s phase of
/// a 150 s job, in a third of the time: the test runs alone).
fn detect_irregular(mpi: Mpi) {
    let more = ["--detect-every", "2s", "--min-hang", "20s"];
    let r = detect_finishes_with(mpi, (Example::Irregular, 4, &["60", "10"]), &more, 15);
    // It stood still (rank 0's long phase) and was seen to: the rule was
    // at work, and held back.
    assert!(r.stderr.contains("; nothing changed for "), "{r}");
}

#[test]
fn detect_lets_an_irregular_slow_job_finish_openmpi() {
    detect_irregular(Mpi::OpenMpi);
}

/// A solver's kernel of fixed work: ranks always on the move.
#[test]
fn detect_lets_a_stencil_finish_mpich() {
    detect_finishes(Mpi::Mpich, (Example::Stencil, 4, &["2000"]), "2s", 5);
}

/// Both ranks inside one large MPI_Send / MPI_Recv across the samples of
/// a check, and across checks: with the queues (they match) and from the
/// stacks alone (Debian's Open MPI). The job runs rounds for 25 s of its
/// own clock, not a count of them: a fast machine moved 12 GiB in 14 s,
/// too soon for ten checks.
fn detect_transfer(mpi: Mpi) {
    detect_finishes(mpi, (Example::Transfer, 2, &["1024", "25s"]), "1s", 10);
}

#[test]
fn detect_lets_a_large_transfer_finish_openmpi() {
    detect_transfer(Mpi::OpenMpi);
}

#[test]
fn detect_lets_a_large_transfer_finish_debian_openmpi() {
    detect_transfer(Mpi::DebianOpenMpi);
}

/// A Python job (mpi4py) that never ends: only `--timeout` ends it, never
/// a check.
#[test]
fn detect_lets_a_python_job_run_openmpi() {
    gdb::require_ptrace();
    let _cpu = alone();
    let mpi = Mpi::OpenMpi;
    let python = mpi.python().expect("a test-bed MPI with mpi4py");
    let script = mpiq_tests::PyExample::HealthyLoop.script();
    let mut starter = mpi.starter_command(3, &python, &[script.as_os_str()]);
    starter.env("PYTHONUNBUFFERED", "1").env_remove("PYTHONPATH");
    let args = [
        "--detect",
        "--detect-every",
        "2s",
        "--timeout",
        "36s",
        "--grace",
        "2s",
        "-v",
    ];
    let (cmd, _job_dir) = job_command(&args, mpi, starter, false);
    let r = mpiq_tests::run::run_within(cmd, Duration::from_secs(240));
    assert_eq!(r.code(), Some(EXIT_HUNG), "{r}");
    r.assert_stderr("mpiq run: ending the job, which did not finish within --timeout 36s");
    assert!(
        !r.stderr.contains("found hung") && !r.stderr.contains("found deadlocked"),
        "{r}"
    );
    let checks = r.stderr.matches(" s] check ").count();
    assert!(checks >= 10, "only {checks} checks saw the job: {r}");
    r.assert_stderr("  watching: --detect's ");
    eprintln!(
        "[hang] healthy_loop.py under {mpi}: {checks} checks, {:.1?}, no false alarm",
        r.elapsed
    );
}
