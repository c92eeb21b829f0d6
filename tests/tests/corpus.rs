//! The corpus: real applications from the distribution (LAMMPS in C++, HPC
//! Challenge in C, Elk in Fortran; Debian's packages, unmodified, with their
//! own example inputs) under Debian's Open MPI, whose queues cannot be read
//! (no debug information), put in trouble only from outside, as users' jobs
//! meet it (tests/src/corpus.rs):
//!
//! - healthy: `no_deadlock`, exit 0, every rank seen moving; gdb's and
//!   lldb's commands on a rank say why its queues are unread once, with no
//!   Python error;
//! - a rank stopped by `SIGSTOP`: never a deadlock, the rank named as
//!   stopped;
//! - rank 0's output a FIFO nobody reads (an open, or for Elk a write, that
//!   never returns, as on a hung file system): never a deadlock, rank 0
//!   named as blocked outside MPI in that call, whom the others wait for;
//! - a rank slowed by a stop/continue cycle (an overloaded node): never a
//!   deadlock, in three samples;
//! - under `mpiq run --detect` (its flight recorder on): LAMMPS healthy
//!   runs to its end; a stopped rank is never ended as a deadlock; a killed
//!   rank ends the job with its starter's status, not as hung.
//!
//! No summary holds an absolute address (`0x...`): ranks at one place read
//! alike.

use std::time::{Duration, Instant};

use mpiq_tests::corpus::{ready_under, slow_down, slow_down_pid, App, AppJob, Start};
use mpiq_tests::fixtures::WorkDir;
use mpiq_tests::frontends::{cli, gdb, lldb};
use mpiq_tests::procs;
use mpiq_tests::run::{job_below_tool, spawn, Run};
use serde_json::Value;

/// LAMMPS' steps for a job the test ends itself.
const FOREVER: u64 = 10_000_000;

/// `mpiq job --starter PID --json` on the job: the run and its analysis.
fn mpiq_job(job: &AppJob) -> (Run, Value) {
    let r = cli(&["job", "--starter", &job.starter().to_string(), "--json"]);
    let v: Value = r
        .json()
        .unwrap_or_else(|e| panic!("{}: mpiq job gave no JSON: {e}\n{r}", job.app.name()));
    let a = v["analysis"].clone();
    assert!(a.is_object(), "{}: no analysis: {r}", job.app.name());
    (r, a)
}

/// What every corpus verdict holds: no deadlock (none of the states is
/// one), the exit status that goes with the verdict, no absolute address
/// in the summary.
fn assert_sound(r: &Run, a: &Value, what: &str) {
    let verdict = a["verdict"].as_str().unwrap_or_default();
    // For the record (nextest --success-output): what mpiq said.
    let culprit: Vec<String> = a["waited_on"]
        .as_array()
        .map(|w| w.iter().map(|e| format!("{} {}", e["ranks"], e["state"])).collect())
        .unwrap_or_default();
    eprintln!(
        "[corpus-table] {what} | mpiq job | exit {:?} | {verdict} | {} | {}",
        r.code(),
        culprit.join(", "),
        a["summary"].as_str().unwrap_or_default()
    );
    assert_ne!(verdict, "deadlock", "{what}: {a:#}\n{}", r.stderr);
    let code = match verdict {
        "no_deadlock" => 0,
        "unknown" => 4,
        other => panic!("{what}: verdict {other}: {a:#}"),
    };
    assert_eq!(r.code(), Some(code), "{what}: {r}");
    let summary = a["summary"].as_str().unwrap_or_default();
    // A place without a symbol is its object and the offset in it
    // (`hpcc+0x175ed`, the same in every rank), never an address.
    let address = summary.match_indices("0x").any(|(at, _)| !summary[..at].ends_with('+'));
    assert!(!address, "{what}: an address in the summary: {summary}");
    assert!(
        !r.stderr.contains("WARNING"),
        "{what}: a library's warning on stderr: {}",
        r.stderr
    );
}

fn healthy(app: App) {
    let job = AppJob::start(app, FOREVER, Start::Healthy);
    let what = format!("{} healthy", app.name());
    let (r, a) = mpiq_job(&job);
    assert_sound(&r, &a, &what);
    assert_eq!(a["verdict"], "no_deadlock", "{what}: {a:#}");
    assert!(
        a["summary"]
            .as_str()
            .unwrap_or_default()
            .contains("the job is progressing"),
        "{what}: {a:#}"
    );
    // The debuggers on one rank: the queues unread, said once; the stack.
    let pid = job.ranks[0];
    for (fe, run) in [
        ("gdb", gdb(pid, &["info mpi-queues"])),
        ("lldb", lldb(pid, &["mpi queues"])),
    ] {
        if fe == "gdb" {
            run.assert_no_python_errors();
        }
        let all = format!("{}{}", run.stdout, run.stderr);
        assert_eq!(
            all.matches("has no debug information for its message queue debug library")
                .count(),
            1,
            "{what}, {fe}: {run}"
        );
        // What the debug library printed is kept in the notes, once; never
        // on the debugger's stderr.
        assert!(
            !run.stderr.contains("WARNING"),
            "{what}, {fe}: a library's warning on stderr: {run}"
        );
        assert!(all.matches("WARNING").count() <= 1, "{what}, {fe}: {run}");
        assert!(!all.contains("python interpreter"), "{what}, {fe}: {run}");
    }
}

fn stopped(app: App) {
    let job = AppJob::start(app, FOREVER, Start::Healthy);
    let what = format!("{}, rank 1 stopped", app.name());
    job.signal(1, "STOP");
    let deadline = Instant::now() + Duration::from_secs(10);
    // Every thread in the stop (a SIGSTOP reaches them one by one).
    let all_stopped = |pid: u32| {
        std::fs::read_dir(format!("/proc/{pid}/task")).is_ok_and(|d| {
            d.flatten().all(|t| {
                std::fs::read_to_string(t.path().join("stat"))
                    .is_ok_and(|s| s.rsplit_once(')').is_some_and(|(_, r)| r.trim_start().starts_with('T')))
            })
        })
    };
    while !all_stopped(job.ranks[1]) {
        assert!(Instant::now() < deadline, "{what}: rank 1 did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
    let (r, a) = mpiq_job(&job);
    assert_sound(&r, &a, &what);
    let summary = a["summary"].as_str().unwrap_or_default();
    assert!(summary.contains("rank 1 is stopped by a signal"), "{what}: {summary}");
    // Left as it was found: stopped, untraced. A thread released by its
    // tracer while in the group stop goes back into it by itself (the
    // kernel wakes it to do so), so each thread's letter may read R for a
    // moment after mpiq's release; one that keeps running was let go.
    let settled = Instant::now() + Duration::from_secs(2);
    while !all_stopped(job.ranks[1]) && Instant::now() < settled {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(all_stopped(job.ranks[1]), "{what}: rank 1 runs again after mpiq job");
    assert_eq!(procs::tracer_pid(job.ranks[1]), Some(0), "{what}");
    job.signal(1, "CONT");
}

fn output_never_completes(app: App) {
    let job = AppJob::start(app, FOREVER, Start::OutputNeverCompletes);
    let what = format!("{}, rank 0's output never completes", app.name());
    // Rank 0 sleeps in its output at once; the others reach a call that
    // waits for it when they are done with what they compute (Elk: a few
    // seconds). Every answer on the way is sound.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (r, a) = loop {
        let (r, a) = mpiq_job(&job);
        assert_sound(&r, &a, &what);
        let waited = a["waited_on"].as_array().is_some_and(|w| !w.is_empty());
        if waited || Instant::now() > deadline {
            break (r, a);
        }
        std::thread::sleep(Duration::from_secs(2));
    };
    let summary = a["summary"].as_str().unwrap_or_default();
    assert!(summary.contains("rank 0"), "{what}: {summary}\n{r}");
    // The call it sleeps in: the FIFO's open (C, C++), or for Elk, whose
    // open returns, its first write.
    let call = if app == App::Elk { "write" } else { "open" };
    assert!(
        summary.contains(&format!("blocked outside MPI in {call}")),
        "{what}: the {call} it sleeps in is not named: {summary}"
    );
    let waited = a["waited_on"].as_array().cloned().unwrap_or_default();
    assert!(
        waited
            .iter()
            .any(|w| w["ranks"] == serde_json::json!([0]) && w["state"] == "blocked_outside_mpi"),
        "{what}: rank 0 is not named as whom the others wait for: {a:#}"
    );
}

fn slowed(app: App) {
    let job = AppJob::start(app, FOREVER, Start::Healthy);
    let what = format!("{}, rank 1 stopped 0.8 s of every second", app.name());
    let _slow = slow_down(&job, 1, Duration::from_millis(1000), Duration::from_millis(800));
    for i in 0..3 {
        let (r, a) = mpiq_job(&job);
        assert_sound(&r, &a, &format!("{what}, sample {i}"));
    }
}

macro_rules! corpus {
    ($($app:ident: $healthy:ident, $stopped:ident, $io:ident, $slowed:ident;)*) => {$(
        #[test]
        fn $healthy() {
            healthy(App::$app);
        }
        #[test]
        fn $stopped() {
            stopped(App::$app);
        }
        #[test]
        fn $io() {
            output_never_completes(App::$app);
        }
        #[test]
        fn $slowed() {
            slowed(App::$app);
        }
    )*};
}

corpus! {
    Lammps: lammps_healthy, lammps_a_stopped_rank, lammps_output_never_completes, lammps_a_slowed_rank;
    Hpcc: hpcc_healthy, hpcc_a_stopped_rank, hpcc_output_never_completes, hpcc_a_slowed_rank;
    Elk: elk_healthy, elk_a_stopped_rank, elk_output_never_completes, elk_a_slowed_rank;
}

/// What a corpus job meets from outside under `mpiq run --detect`.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Trouble {
    /// Nothing: a short input, run to its end.
    None,
    /// Rank 1 stopped by `SIGSTOP` once the job computes.
    Stopped,
    /// Rank 0's output never completes (a FIFO nobody reads).
    OutputNeverCompletes,
    /// Rank 1 killed by `SIGKILL` once the job computes.
    Killed,
    /// Rank 1 held stopped 0.8 s of every second.
    Slowed,
}

/// `app` under `mpiq run --detect --detect-every 2s --min-hang 20s -v
/// --timeout T --report DIR` (its flight recorder on), meeting `trouble`:
/// the answer each trouble must get, never a deadlock, no library's
/// warning on mpiq's stderr, no address in the report's summary. Prints
/// one `[corpus-table]` line: what mpiq run said.
fn under_detect(app: App, trouble: Trouble) {
    let dir = WorkDir::new(&format!("corpus-run-{app:?}-{trouble:?}").to_lowercase());
    let report = dir.path("report");
    let what = format!("{} under mpiq run --detect, {trouble:?}", app.name());
    // The short input runs to its end; the others are ended.
    let (steps, timeout) = match trouble {
        Trouble::None => (200, "300s"),
        Trouble::Stopped => (FOREVER, "25s"),
        Trouble::OutputNeverCompletes | Trouble::Killed => (FOREVER, "150s"),
        Trouble::Slowed => (FOREVER, "30s"),
    };
    let start = if trouble == Trouble::OutputNeverCompletes {
        Start::OutputNeverCompletes
    } else {
        Start::Healthy
    };
    let report_s = report.to_string_lossy().to_string();
    let options = [
        "--detect",
        "--detect-every",
        "2s",
        "--min-hang",
        "20s",
        "-v",
        "--timeout",
        timeout,
        "--report",
        &report_s,
    ];
    let (mut cmd, _scratch, _held) = AppJob::under_mpiq_run(app, dir.root(), steps, start, &options);
    job_below_tool(&mut cmd);
    let running = spawn(cmd);
    // A short healthy run may be over before any state is waited for.
    let ranks = match trouble {
        Trouble::None => Vec::new(),
        _ => ready_under(app, dir.root(), start, running.id(), || running.stdout_so_far()),
    };
    let _slow = match trouble {
        Trouble::Stopped => {
            // SAFETY: kill(2) on a rank this test started.
            unsafe { libc::kill(ranks[1] as i32, libc::SIGSTOP) };
            None
        }
        Trouble::Killed => {
            // SAFETY: kill(2) on a rank this test started.
            unsafe { libc::kill(ranks[1] as i32, libc::SIGKILL) };
            None
        }
        Trouble::Slowed => Some(slow_down_pid(
            ranks[1],
            Duration::from_millis(1000),
            Duration::from_millis(800),
        )),
        Trouble::None | Trouble::OutputNeverCompletes => None,
    };
    let r = running.wait_within(Duration::from_secs(240));
    let json: Value = std::fs::read_to_string(report.join("report.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    let a = &json["analysis"];
    let summary = a["summary"].as_str().unwrap_or_default();
    let culprit: Vec<String> = a["waited_on"]
        .as_array()
        .map(|w| w.iter().map(|e| format!("{} {}", e["ranks"], e["state"])).collect())
        .unwrap_or_default();
    eprintln!(
        "[corpus-table] {} | {trouble:?} | mpiq run --detect | exit {:?} | {} | {} | {summary}",
        app.name(),
        r.code(),
        a["verdict"].as_str().unwrap_or("(no report)"),
        culprit.join(", ")
    );
    assert!(!r.stderr.contains("verdict: DEADLOCK"), "{what}: {r}");
    assert!(!r.stderr.contains("found deadlocked"), "{what}: {r}");
    assert_ne!(a["verdict"], "deadlock", "{what}: {a:#}");
    // What the debug library printed is in the report's notes, once; never
    // a line of its own on mpiq's stderr.
    assert!(
        !r.stderr.lines().any(|l| l.trim_start().starts_with("WARNING")),
        "{what}: a library's warning on stderr: {r}"
    );
    assert!(r.stderr.matches("WARNING").count() <= 1, "{what}: {r}");
    let text = std::fs::read_to_string(report.join("report.txt")).unwrap_or_default();
    let address = summary.match_indices("0x").any(|(at, _)| !summary[..at].ends_with('+'));
    assert!(!address, "{what}: an address in the summary: {summary}\n{text}");
    match trouble {
        Trouble::None => {
            assert_eq!(r.code(), Some(0), "{what}: {r}");
            assert!(!r.stderr.contains("ending the job"), "{what}: {r}");
            assert!(!r.stderr.contains("suspected hang"), "{what}: {r}");
            let (file, end) = match app {
                App::Lammps => ("log.lammps", "Total wall time"),
                App::Hpcc => ("hpccoutf.txt", "End of HPC Challenge tests"),
                App::Elk => ("INFO.OUT", "stopped"),
            };
            let out = std::fs::read_to_string(dir.path(file)).unwrap_or_default();
            assert!(out.contains(end), "{what}: did not finish ({file}): {r}");
        }
        Trouble::Stopped => {
            // Ended by --timeout, never by --detect: a stopped rank goes on
            // when continued.
            assert_eq!(r.code(), Some(124), "{what}: {r}");
            r.assert_stderr("which did not finish within --timeout");
            assert!(!r.stderr.contains("found hung"), "{what}: {r}");
            assert!(text.contains("rank 1 is stopped by a signal"), "{what}: {text}");
        }
        Trouble::OutputNeverCompletes => {
            // Hung: rank 0 sleeps in its output for good, the others wait
            // for it; ended past --min-hang, named as blocked outside MPI.
            assert_eq!(r.code(), Some(124), "{what}: {r}");
            r.assert_stderr("which --detect found hung");
            let call = if app == App::Elk { "write" } else { "open" };
            assert!(
                summary.contains(&format!("rank 0, which is blocked outside MPI in {call}")),
                "{what}: {summary}"
            );
            assert!(
                r.elapsed >= Duration::from_secs(20),
                "{what}: ended after {:?}",
                r.elapsed
            );
        }
        Trouble::Killed => {
            // Open MPI's mpirun ends the job and fails: its status, not 124.
            assert_ne!(r.code(), Some(124), "{what}: {r}");
            assert_ne!(r.code(), Some(0), "{what}: {r}");
            assert!(!r.stderr.contains("ending the job"), "{what}: {r}");
        }
        Trouble::Slowed => {
            // Slow, never hung: it runs on until --timeout.
            assert!(!r.stderr.contains("found hung"), "{what}: {r}");
            assert!(!r.stderr.contains("suspected hang"), "{what}: {r}");
            if r.code() != Some(0) {
                assert_eq!(r.code(), Some(124), "{what}: {r}");
                r.assert_stderr("which did not finish within --timeout");
            }
        }
    }
}

macro_rules! under_detect {
    ($($app:ident: $none:ident, $stopped:ident, $io:ident, $killed:ident, $slowed:ident;)*) => {$(
        #[test]
        fn $none() {
            under_detect(App::$app, Trouble::None);
        }
        #[test]
        fn $stopped() {
            under_detect(App::$app, Trouble::Stopped);
        }
        #[test]
        fn $io() {
            under_detect(App::$app, Trouble::OutputNeverCompletes);
        }
        #[test]
        fn $killed() {
            under_detect(App::$app, Trouble::Killed);
        }
        #[test]
        fn $slowed() {
            under_detect(App::$app, Trouble::Slowed);
        }
    )*};
}

under_detect! {
    Lammps: lammps_healthy_runs_to_its_end_under_mpiq_run_detect,
        lammps_a_stopped_rank_is_not_ended_as_a_deadlock_under_mpiq_run_detect,
        lammps_output_never_completing_is_ended_as_hung_under_mpiq_run_detect,
        lammps_a_killed_rank_ends_the_job_not_as_hung_under_mpiq_run_detect,
        lammps_a_slowed_rank_is_never_hung_under_mpiq_run_detect;
    Hpcc: hpcc_healthy_runs_to_its_end_under_mpiq_run_detect,
        hpcc_a_stopped_rank_is_not_ended_as_a_deadlock_under_mpiq_run_detect,
        hpcc_output_never_completing_is_ended_as_hung_under_mpiq_run_detect,
        hpcc_a_killed_rank_ends_the_job_not_as_hung_under_mpiq_run_detect,
        hpcc_a_slowed_rank_is_never_hung_under_mpiq_run_detect;
    Elk: elk_healthy_runs_to_its_end_under_mpiq_run_detect,
        elk_a_stopped_rank_is_not_ended_as_a_deadlock_under_mpiq_run_detect,
        elk_output_never_completing_is_ended_as_hung_under_mpiq_run_detect,
        elk_a_killed_rank_ends_the_job_not_as_hung_under_mpiq_run_detect,
        elk_a_slowed_rank_is_never_hung_under_mpiq_run_detect;
}
