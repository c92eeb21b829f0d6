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
    let start = Instant::now();
    let child = cmd.spawn().unwrap_or_else(|e| {
        let _ = fs::remove_file(&out);
        let _ = fs::remove_file(&err);
        panic!("cannot run {cmd:?}: {e}")
    });
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
}
