//! Running a command from a test: the one [`Run`] result every test and the
//! benchmarks use (exit status, standard output and error, how long it
//! took), always with a timeout.
//!
//! The command's standard input is `/dev/null` and its output goes to
//! temporary files, not pipes: a pipe could fill up, and a process the
//! command leaves behind (a helper, a rank started under a debugger) would
//! keep it open and make reading it hang.
//!
//! ```no_run
//! use std::process::Command;
//! use mpiq_tests::run::{run, spawn};
//!
//! let r = run(Command::new("echo").arg("hello"));
//! assert!(r.success, "{r}");
//! assert_eq!(r.stdout, "hello\n");
//!
//! // Started now, signalled, then waited for (killed after 20 s).
//! let mut sleeper = Command::new("sleep");
//! sleeper.arg("60");
//! let running = spawn(sleeper);
//! running.signal("TERM");
//! let r = running.wait_within(std::time::Duration::from_secs(20));
//! assert!(!r.success);
//! ```

use std::borrow::BorrowMut;
use std::fmt;
use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The niceness [`at_low_priority`] gives a job: the lowest priority there is.
pub const JOB_NICENESS: i32 = 19;

/// Makes `cmd`, and every process it starts, run at niceness
/// [`JOB_NICENESS`]: for the MPI jobs the tests start. Their ranks busy-poll
/// inside MPI while they wait; on 2 cores, with tests side by side, a dozen
/// of them at the same priority as the debuggers and mpiq starve them
/// (gdb took minutes to attach). At the lowest priority they take what the
/// tools leave, and have the machine when nothing else runs, so a healthy
/// job still moves. Nothing in mpiq depends on a rank's priority.
pub fn at_low_priority(cmd: &mut Command) -> &mut Command {
    at_niceness(cmd, JOB_NICENESS)
}

/// The niceness [`at_build_priority`] gives a build a test runs: below the
/// tools (0), above the jobs ([`JOB_NICENESS`]).
pub const BUILD_NICENESS: i32 = 10;

/// Makes `cmd` (a whole build on both cores: `scripts/package`) run at
/// niceness [`BUILD_NICENESS`]. At the tools' priority its compilers took
/// all but a few per cent of the CPU from the jobs of the tests beside it
/// for minutes: their ranks barely ran between two samples, which mpiq
/// rightly says, and the states the tests wait for came late. Still above
/// the jobs, whose waiting ranks busy-poll, so that it ends.
pub fn at_build_priority(cmd: &mut Command) -> &mut Command {
    at_niceness(cmd, BUILD_NICENESS)
}

/// Makes `cmd`, and every process it starts, run at niceness `niceness`.
fn at_niceness(cmd: &mut Command, niceness: i32) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the child between fork and exec, where only
    // async-signal-safe calls are allowed: setpriority(2) is a system call,
    // and the closure allocates nothing and takes no lock.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setpriority(libc::PRIO_PROCESS, 0, niceness) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        })
    }
}

/// The variable [`job_below_tool`] marks a command with; [`spawn`] and
/// [`run`] take it off before the command starts (it never reaches it).
const JOB_BELOW_TOOL: &str = "MPIQ_TESTS_JOB_BELOW_TOOL";

/// Makes the MPI job that `cmd` (`mpiq run ...`) starts run at niceness
/// [`JOB_NICENESS`], and `cmd` itself at the test's own. [`at_low_priority`]
/// on `mpiq run` put mpiq below every debugger and build of the other tests
/// too: early in the suite, beside the package build, one check held the
/// ranks stopped 52 s. The job's process group (the starter's; `mpiq run`
/// makes one per job) is reniced as soon as it exists, before the starter
/// forks its ranks, which inherit it.
pub fn job_below_tool(cmd: &mut Command) -> &mut Command {
    cmd.env(JOB_BELOW_TOOL, "1")
}

/// After [`job_below_tool`]: watches `tool`'s children for the job's process
/// group (a child leading its own) and gives it [`JOB_NICENESS`], again
/// and again for 5 s (a process forked before the first time is caught by
/// the next). Ends with the tool, or after 2 minutes without a job.
fn renice_job_of(tool: u32) {
    std::thread::spawn(move || {
        let began = Instant::now();
        let mut group: Option<(u32, Instant)> = None;
        while began.elapsed() < Duration::from_secs(120) {
            if group.is_none() {
                group = children_of(tool)
                    .into_iter()
                    .find(|&pid| crate::procs::Stat::read(pid).is_some_and(|s| s.pgrp == pid))
                    .map(|pid| (pid, Instant::now()));
                if group.is_none() && crate::procs::Stat::read(tool).is_none_or(|s| s.state == 'Z') {
                    return;
                }
            }
            if let Some((pgrp, found)) = group {
                // SAFETY: setpriority(2) takes plain integers and touches no
                // memory of ours; a group that is gone gives ESRCH.
                unsafe { libc::setpriority(libc::PRIO_PGRP, pgrp, JOB_NICENESS) };
                if found.elapsed() > Duration::from_secs(5) {
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    });
}

/// The children of `pid`, forked by any of its threads.
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// The `--timeout` [`hung_by_timeout`] gives a job that was still starting
/// at the test's own.
pub const START_UP_TIMEOUT: &str = "30s";

/// For a test of `mpiq run --timeout T` on a job that hangs at once:
/// `attempt(T)`, whose [`Run`] is `run_of` it. On a machine too busy for
/// the job's start-up, `mpiq run` may end it before the ranks are through
/// `MPI_Init` ([`Run::ended_in_start_up`]): then the report must say so,
/// and say `unknown`, or `none` when the starter had not launched the ranks
/// yet (an empty `MPIR_proctable`: Open MPI's starters under load took over
/// 5 s on CI) or had launched only some (a rank the others' environment
/// names is not running yet), or, when a rank moved on from `MPI_Init` between the
/// two samples, `no deadlock: ... the job is progressing` (no verdict of a
/// deadlock on a job in start-up: that is mpiq's bug, and fails here), and
/// the test is tried once more with [`START_UP_TIMEOUT`], said on its
/// standard error. A test whose point is the start-up itself does not use
/// this.
pub fn hung_by_timeout<T>(timeout: &str, mut attempt: impl FnMut(&str) -> T, run_of: impl Fn(&T) -> &Run) -> T {
    let first = attempt(timeout);
    let r = run_of(&first);
    if !r.ended_in_start_up() {
        return first;
    }
    assert!(
        r.stderr.contains("verdict: unknown")
            || r.stderr.contains("verdict: no deadlock")
            || r.stderr.contains("verdict: none"),
        "the job was ended at --timeout {timeout} in its start-up, which the verdict must not call a deadlock:\n{}",
        r.all()
    );
    eprintln!(
        "[start-up] the job was still in MPI_Init at --timeout {timeout} (the machine is busy), and \
         mpiq said unknown: again with --timeout {START_UP_TIMEOUT}"
    );
    attempt(START_UP_TIMEOUT)
}

/// How long [`run`] lets a command take.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// What a command printed and how it ended.
#[derive(Clone, Debug)]
pub struct Run {
    /// How it ended.
    pub status: ExitStatus,
    /// `status.success()`: exit status 0.
    pub success: bool,
    /// Standard output (invalid UTF-8 replaced).
    pub stdout: String,
    /// Standard error (invalid UTF-8 replaced).
    pub stderr: String,
    /// From start to exit.
    pub elapsed: Duration,
}

impl Run {
    /// The exit code, if it exited (not killed by a signal).
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// The signal that killed it, if one did.
    pub fn signal(&self) -> Option<i32> {
        self.status.signal()
    }

    /// Whether this `mpiq run --timeout` ended the job while a rank was
    /// still in `MPI_Init` (its report's places, or its flight recorder,
    /// say so), before the job could hang.
    pub fn ended_in_start_up(&self) -> bool {
        self.stderr.contains("which did not finish within --timeout")
            && self.stderr.lines().any(|l| {
                let l = l.trim_start();
                (l.starts_with("rank") && l.contains("> MPI_Init"))
                    || l.contains("MPI not initialized yet")
                    // A rank not at main yet: the dynamic loader still runs
                    // its libraries' initialisers (CI's Open MPI 5 rank at
                    // 5 s, in libpsm2's), the recorder's among them.
                    || l.contains("before main (still starting)")
                    || l.contains("the recorder's library is loaded and not started")
                    // Its starter had not launched the ranks yet: nothing to read.
                    || (l.starts_with("verdict: none") && l.contains("has not launched its ranks yet"))
                    // Its starter had launched some ranks, not all: a rank
                    // the environment of the others names was not running
                    // (Open MPI 4's mpirun fills MPIR_proctable only once
                    // every rank is up; on CI a rank's exec came past 5 s).
                    || l.contains("is not among the MPI processes started under process")
                    // The first of the two samples in start-up, the second
                    // on the way to the hang: "the job is progressing".
                    || (l.contains("the job is progressing") && l.contains("moved from MPI_Init"))
            })
    }

    /// How it ended and everything it printed, for messages.
    pub fn all(&self) -> String {
        format!(
            "{} after {:.1?}\n--- stdout ---\n{}\n--- stderr ---\n{}\n--- end ---",
            self.status, self.elapsed, self.stdout, self.stderr
        )
    }

    /// The first JSON object printed on its own lines (`{` at the start of
    /// a line; what follows it may be anything).
    pub fn json(&self) -> Result<Value, String> {
        let start = self
            .stdout
            .find("\n{\n")
            .map(|i| i + 1)
            .or_else(|| self.stdout.starts_with("{\n").then_some(0))
            .ok_or_else(|| format!("no JSON in the output:\n{}", self.all()))?;
        let mut it = serde_json::Deserializer::from_str(&self.stdout[start..]).into_iter::<Value>();
        match it.next() {
            Some(Ok(v)) => Ok(v),
            Some(Err(e)) => Err(format!("bad JSON ({e}):\n{}", self.all())),
            None => Err(format!("no JSON in the output:\n{}", self.all())),
        }
    }

    /// The whole standard output as one JSON value (nothing else printed);
    /// panics with the output when it is not.
    pub fn json_exact(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("the output is not JSON ({e}):\n{}", self.all()))
    }

    /// Panics with the output unless standard output contains `needle`.
    pub fn assert_stdout(&self, needle: &str) {
        assert!(self.stdout.contains(needle), "`{needle}` not in stdout:\n{self}");
    }

    /// Panics with the output unless standard error contains `needle`.
    pub fn assert_stderr(&self, needle: &str) {
        assert!(self.stderr.contains(needle), "`{needle}` not in stderr:\n{self}");
    }
}

impl fmt::Display for Run {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.all())
    }
}

/// Runs `cmd` (a `Command` or a `&mut Command`) to its end within
/// [`DEFAULT_TIMEOUT`]; see [`run_within`].
pub fn run(cmd: impl BorrowMut<Command>) -> Run {
    run_within(cmd, DEFAULT_TIMEOUT)
}

/// Runs `cmd` to its end. After `timeout` it is killed with everything it
/// started, and the test fails with what it printed.
///
/// # Panics
/// If the command cannot be started, or on the timeout.
pub fn run_within(cmd: impl BorrowMut<Command>, timeout: Duration) -> Run {
    spawn(cmd).wait_within(timeout)
}

/// Starts `cmd` with its standard input from `/dev/null` and its output
/// captured, for a test that acts on it while it runs ([`Running::wait_within`]
/// collects the [`Run`]).
///
/// # Panics
/// If the command cannot be started.
pub fn spawn(cmd: impl BorrowMut<Command>) -> Running {
    start(cmd, Stdio::null())
}

/// [`spawn`] with a pipe to the command's standard input
/// ([`Running::stdin`]).
pub fn spawn_with_stdin(cmd: impl BorrowMut<Command>) -> Running {
    start(cmd, Stdio::piped())
}

fn start(mut cmd: impl BorrowMut<Command>, stdin: Stdio) -> Running {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let cmd = cmd.borrow_mut();
    let tag = format!(
        "mpiq-run-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    );
    let out = std::env::temp_dir().join(format!("{tag}.out"));
    let err = std::env::temp_dir().join(format!("{tag}.err"));
    cmd.stdin(stdin)
        .stdout(fs::File::create(&out).expect("create a temporary file"))
        .stderr(fs::File::create(&err).expect("create a temporary file"));
    let below = cmd.get_envs().any(|(k, v)| k == JOB_BELOW_TOOL && v.is_some());
    if below {
        cmd.env_remove(JOB_BELOW_TOOL);
    }
    let start = Instant::now();
    let child = cmd.spawn().unwrap_or_else(|e| {
        let _ = fs::remove_file(&out);
        let _ = fs::remove_file(&err);
        panic!("cannot run {cmd:?}: {e}")
    });
    if below {
        renice_job_of(child.id());
    }
    Running {
        child,
        what: format!("{cmd:?}"),
        out,
        err,
        start,
        status: None,
    }
}

/// A command started by [`spawn`]. Dropped before it was waited for (a
/// test failed), it is killed with everything it started.
#[derive(Debug)]
pub struct Running {
    child: Child,
    what: String,
    out: PathBuf,
    err: PathBuf,
    start: Instant,
    status: Option<ExitStatus>,
}

impl Running {
    /// The process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The pipe to its standard input ([`spawn_with_stdin`] only; once).
    pub fn stdin(&mut self) -> Option<ChildStdin> {
        self.child.stdin.take()
    }

    /// Whether it has ended (reaping it if so).
    pub fn has_exited(&mut self) -> bool {
        if self.status.is_none() {
            self.status = self.child.try_wait().expect("try_wait");
        }
        self.status.is_some()
    }

    /// Sends `signal` (a name such as `INT` or `KILL`, or a number) with
    /// `kill(1)`; panics if that fails.
    pub fn signal(&self, signal: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.id().to_string())
            .status()
            .expect("run kill");
        assert!(ok.success(), "kill -{signal} {} failed", self.id());
    }

    /// What it printed to standard output so far.
    pub fn stdout_so_far(&self) -> String {
        fs::read_to_string(&self.out).unwrap_or_default()
    }

    /// Waits up to `timeout` for it to end; `None` if it did not (it is
    /// left running).
    pub fn wait_timeout(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        while !self.has_exited() {
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.status
    }

    /// Waits for it to end and returns what it printed. After `timeout` it
    /// is killed with everything it started, and the test fails with what
    /// it printed.
    pub fn wait_within(mut self, timeout: Duration) -> Run {
        let ended = self.wait_timeout(timeout);
        if ended.is_none() {
            self.kill_all();
        }
        let status = self.status.expect("reaped");
        let r = Run {
            status,
            success: status.success(),
            stdout: fs::read_to_string(&self.out).unwrap_or_default(),
            stderr: fs::read_to_string(&self.err).unwrap_or_default(),
            elapsed: self.start.elapsed(),
        };
        assert!(ended.is_some(), "{} did not finish within {timeout:?}:\n{r}", self.what);
        r
    }

    /// SIGKILL to its descendants (found before it dies) and to it, then
    /// reaps it.
    fn kill_all(&mut self) {
        if self.status.is_none() {
            for p in crate::procs::descendants(self.child.id()) {
                p.kill();
            }
            let _ = self.child.kill();
            self.status = self.child.wait().ok();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.kill_all();
        let _ = fs::remove_file(&self.out);
        let _ = fs::remove_file(&self.err);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captures_output_status_and_json() {
        let r = run(Command::new("sh").args(["-c", "echo text; printf '{\\n \"a\": 1\\n}\\n'; echo err >&2; exit 3"]));
        assert!(!r.success);
        assert_eq!(r.code(), Some(3));
        assert_eq!(r.stderr, "err\n");
        assert_eq!(r.json().unwrap()["a"], 1);
        assert!(r.all().contains("--- stderr ---\nerr\n"), "{r}");
        let exact = run(Command::new("echo").arg("[1, 2]"));
        assert_eq!(exact.json_exact(), serde_json::json!([1, 2]));
    }

    #[test]
    fn a_command_over_its_timeout_is_killed_and_fails() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo started; sleep 30"]);
        let t = Instant::now();
        let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            run_within(cmd, Duration::from_millis(300))
        }))
        .unwrap_err();
        let text = e.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(
            text.contains("did not finish within") && text.contains("started"),
            "{text}"
        );
        assert!(t.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn a_spawned_command_can_be_signalled() {
        let mut cmd = Command::new("sleep");
        cmd.arg("30");
        let mut running = spawn(cmd);
        assert!(!running.has_exited());
        running.signal("TERM");
        let r = running.wait_within(Duration::from_secs(10));
        assert_eq!(r.signal(), Some(15));
    }

    /// What `mpiq run --timeout 5s` said of a job ended in its start-up on
    /// a busy CI machine (paths shortened), and of the same job hung.
    #[test]
    fn a_job_ended_in_its_start_up_is_told_from_a_hung_one() {
        let status = std::process::ExitStatus::from_raw(124 << 8);
        let run = |stderr: &str| Run {
            status,
            success: false,
            stdout: String::new(),
            stderr: stderr.to_string(),
            elapsed: Duration::from_secs(6),
        };
        let starting = run("mpiq run: ending the job, which did not finish within --timeout 5s
  verdict: unknown: the queues of ranks 0-2 could not be read (the debug library listed no communicator it is a member of)

Where the ranks are (3 ranks, 3 application threads; 6 service threads not shown):
  ranks 0-2: main > mpiq_init_world > MPI_Init (mpiq_example.h:57)
");
        assert!(starting.ended_in_start_up());
        let recorded = run("mpiq run: ending the job, which did not finish within --timeout 5s
Process pid 31278, rank 0: /x/deadlock
  flight recorder: loaded, MPI not initialized yet
");
        assert!(recorded.ended_in_start_up());
        let loading = run("mpiq run: ending the job, which did not finish within --timeout 5s
  verdict: unknown: rank 0 is computing in sched_setaffinity, called from the initialiser of libpsm2.so.2.2, before main (still starting)
");
        assert!(loading.ended_in_start_up());
        let hung = run("mpiq run: ending the job, which did not finish within --timeout 5s
  verdict: DEADLOCK: ranks 0-2 wait in MPI_Wait (deadlock.c:38)
Where the ranks are (3 ranks):
  ranks 0-2: main > MPI_Wait (deadlock.c:38)
Last MPI calls (mpiq's flight recorder), oldest first:
  ranks 0-2:
    MPI_Init()
    MPI_Isend #1(...)
");
        assert!(!hung.ended_in_start_up());
        // Sampled in MPI_Init, then in the collectives on the way to the hang.
        let moving = run("mpiq run: ending the job, which did not finish within --timeout 5s
  verdict: no deadlock: the queues changed between two samples 583 ms apart: the job is progressing (ranks 0-3 moved; rank 0: it moved from MPI_Init from mpiq_init_world (mpiq_example.h:57) to MPI_Allreduce from main (collective_skip.c:34))
");
        assert!(moving.ended_in_start_up());
        // Not ended by --timeout: nothing to try again.
        let detected = run("mpiq run: ending the job, which --detect found hung (check 3)
  ranks 0-2: main > mpiq_init_world > MPI_Init (mpiq_example.h:57)
");
        assert!(!detected.ended_in_start_up());
    }
}
