//! The job `mpiq run` runs: started in its own process group (so that it
//! can be signalled as a whole, and a Ctrl-C meant for mpiq is passed on by
//! mpiq rather than reaching it directly), watched without being reaped
//! until it has been ended (so that its pid, and with it its process group
//! id, cannot be reused while mpiq still signals them), and ended: SIGTERM
//! to the group, a grace period for the starter to end its ranks, SIGKILL
//! to whatever of it is left.
//!
//! Should mpiq itself die without ending it (SIGKILL, a crash), two things
//! end the job still: the command gets SIGTERM from the kernel
//! (`PR_SET_PDEATHSIG`: a starter then ends its ranks), and a watchdog
//! process (`mpiq run-watchdog`, in its own process group, reading a pipe
//! only mpiq holds) sees the pipe close and ends every process of the job
//! it has seen, as mpiq would have.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, ChildStderr, ChildStdout, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::sys::wait::{waitid, Id, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use crate::procs::{self, Proc, Stat};

/// How long processes may take to go after SIGKILL before mpiq gives up
/// waiting for them.
const AFTER_KILL: Duration = Duration::from_secs(5);

/// The job's processes as seen so far: its command (the leader of its
/// process group) and everything seen under it, kept even after their
/// parent died (Open MPI's ranks outlive `mpirun` by a moment).
#[derive(Debug)]
pub struct Tracked {
    /// The command.
    pub root: Proc,
    known: BTreeSet<Proc>,
}

impl Tracked {
    /// Tracks the job whose command is `root`.
    pub fn new(root: Proc) -> Tracked {
        Tracked {
            root,
            known: BTreeSet::from([root]),
        }
    }

    /// Adds the processes now in the job's process group (started after its
    /// command: the group id is the command's pid), and those under the
    /// root or any live one seen: a process whose parent died (the shell of
    /// `sh -c 'mpirun ...'`, killed by the SIGTERM it got on mpiq's death)
    /// is still found by its group.
    pub fn rescan(&mut self) {
        let all = procs::all();
        let root = self.root;
        self.known.extend(
            all.iter()
                .filter(|(_, s)| s.pgrp == root.pid && s.start >= root.start && !s.exited())
                .map(|(pid, s)| Proc {
                    pid: *pid,
                    start: s.start,
                }),
        );
        let roots: Vec<i32> = self.known.iter().filter(|p| p.alive()).map(|p| p.pid).collect();
        if roots.is_empty() {
            return;
        }
        self.known
            .extend(procs::descendants_in(all, &roots).into_iter().map(|(p, _)| p));
    }

    /// The processes seen that still run.
    pub fn left(&self) -> Vec<Proc> {
        self.known.iter().filter(|p| p.alive()).copied().collect()
    }

    /// Sends `sig` to the job's process group: with `group_is_ours` (the
    /// leader is not reaped yet, so the group id cannot be another's) with
    /// killpg, else to each process seen that is still in it.
    fn signal_group(&self, sig: Signal, group_is_ours: bool) {
        if group_is_ours {
            let _ = killpg(Pid::from_raw(self.root.pid), sig);
            return;
        }
        for p in self.left() {
            if Stat::of(p.pid).is_some_and(|s| s.pgrp == self.root.pid) {
                p.signal(sig);
            }
        }
    }

    /// Ends the job: SIGTERM (unless `term` is false: a signal was passed
    /// on already) and SIGCONT to its process group; then up to `grace`
    /// for `root_done()` and every process seen to be gone (sooner when
    /// `hurry()`); then SIGKILL to the group and to every process seen
    /// that is left, and up to 5 s more. Returns whether SIGKILL was
    /// needed (false: the job ended within the grace period).
    pub fn end(
        &mut self,
        term: bool,
        grace: Duration,
        group_is_ours: bool,
        root_done: &mut dyn FnMut() -> bool,
        hurry: &dyn Fn() -> bool,
    ) -> bool {
        self.rescan();
        if term {
            self.signal_group(Signal::SIGTERM, group_is_ours);
        }
        // A stopped process acts on SIGTERM only once continued.
        self.signal_group(Signal::SIGCONT, group_is_ours);
        let deadline = Instant::now() + grace;
        loop {
            self.rescan();
            if root_done() && self.left().is_empty() {
                return false;
            }
            if Instant::now() >= deadline || hurry() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.rescan();
        self.signal_group(Signal::SIGKILL, group_is_ours);
        for p in self.left() {
            p.signal(Signal::SIGKILL);
        }
        let deadline = Instant::now() + AFTER_KILL;
        while !(root_done() && self.left().is_empty()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        true
    }
}

/// Why the command could not be started.
#[derive(Debug)]
pub struct SpawnError(pub std::io::Error);

/// The running job: its command's child process (reaped last).
pub struct Job {
    child: Child,
    /// Its processes.
    pub tracked: Tracked,
    status: Option<ExitStatus>,
    watchdog: Option<(Child, std::io::PipeWriter)>,
}

impl Job {
    /// Starts `command` in its own process group, with `env` added to
    /// mpiq's environment and its standard output and error piped;
    /// standard input is mpiq's, unless that is a terminal (the job runs in
    /// the background, where reading it would stop the job): then
    /// `/dev/null`.
    pub fn spawn(
        command: &[OsString],
        env: &[(OsString, OsString)],
    ) -> Result<(Job, ChildStdout, ChildStderr), SpawnError> {
        let (program, args) = command
            .split_first()
            .ok_or_else(|| SpawnError(std::io::Error::other("no command")))?;
        let mut cmd = Command::new(program);
        cmd.args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
            cmd.stdin(Stdio::null());
        }
        crate::signals::supervise_child(&mut cmd);
        let mut child = cmd.spawn().map_err(SpawnError)?;
        let (Some(out), Some(err)) = (child.stdout.take(), child.stderr.take()) else {
            return Err(SpawnError(std::io::Error::other("the job's output pipes are missing")));
        };
        let pid = child.id() as i32;
        // Its start time; if it is gone already, any value: it is not alive.
        let root = Proc::of(pid).unwrap_or(Proc { pid, start: 0 });
        let job = Job {
            child,
            tracked: Tracked::new(root),
            status: None,
            watchdog: None,
        };
        Ok((job, out, err))
    }

    /// The process group (the command's pid).
    pub fn pgid(&self) -> i32 {
        self.tracked.root.pid
    }

    /// Starts the watchdog ([`watchdog_main`]), `mpiq run-watchdog`, from
    /// this very executable.
    pub fn start_watchdog(&mut self, grace: Duration) -> std::io::Result<()> {
        let (reader, writer) = std::io::pipe()?;
        // This executable by its path (so that it shows as `mpiq`), or by
        // /proc/self/exe if that path is gone (rebuilt meanwhile).
        let exe = std::env::current_exe()
            .ok()
            .filter(|p| p.is_file())
            .unwrap_or_else(|| "/proc/self/exe".into());
        let child = Command::new(exe)
            .arg0("mpiq")
            .arg("run-watchdog")
            .arg("--job")
            .arg(self.tracked.root.pid.to_string())
            .arg("--start")
            .arg(self.tracked.root.start.to_string())
            .arg("--grace-ms")
            .arg(grace.as_millis().to_string())
            .stdin(reader)
            .stdout(Stdio::null())
            .process_group(0)
            .spawn()?;
        self.watchdog = Some((child, writer));
        Ok(())
    }

    /// Whether the command has exited; it is not reaped (see [`Job::reap`]).
    /// An error: its status was taken by someone else (it cannot be read).
    pub fn has_exited(&mut self) -> std::io::Result<bool> {
        if self.status.is_some() {
            return Ok(true);
        }
        match peek(self.pgid()) {
            Ok(exited) => Ok(exited),
            // Reaped by a wait of mpiq's own (a tracer thread's, when it
            // exited while being stopped for a --detect check).
            Err(nix::errno::Errno::ECHILD) => match crate::ptrace::take_reaped(self.pgid()) {
                Some(WaitStatus::Exited(_, code)) => {
                    self.status = Some(ExitStatus::from_raw((code & 0xff) << 8));
                    Ok(true)
                }
                Some(WaitStatus::Signaled(_, sig, _)) => {
                    self.status = Some(ExitStatus::from_raw(sig as i32));
                    Ok(true)
                }
                _ => Err(nix::errno::Errno::ECHILD.into()),
            },
            Err(e) => Err(e.into()),
        }
    }

    /// Ends the job ([`Tracked::end`]); whether SIGKILL was needed.
    pub fn end(&mut self, term: bool, grace: Duration, hurry: &dyn Fn() -> bool) -> bool {
        let pid = self.pgid();
        let reaped = self.status.is_some();
        self.tracked.end(
            term,
            grace,
            !reaped,
            &mut || reaped || !matches!(peek(pid), Ok(false)),
            hurry,
        )
    }

    /// Reaps the command (once it has exited) and says the watchdog its
    /// work is done. Call it after [`crate::signals::forget_job`]: from
    /// here on the pid may be another's.
    pub fn reap(&mut self) -> std::io::Result<ExitStatus> {
        let status = match self.status {
            Some(s) => Ok(s),
            None => self.child.wait(),
        };
        if let Ok(s) = status {
            self.status = Some(s);
        }
        if let Some((mut dog, mut pipe)) = self.watchdog.take() {
            let _ = pipe.write_all(b"d");
            drop(pipe);
            let deadline = Instant::now() + Duration::from_secs(5);
            while matches!(dog.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            if matches!(dog.try_wait(), Ok(None)) {
                let _ = dog.kill();
                let _ = dog.wait();
            }
        }
        status
    }
}

/// Whether our child `pid` has exited, without reaping it.
fn peek(pid: i32) -> nix::Result<bool> {
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
    match waitid(Id::Pid(Pid::from_raw(pid)), flags) {
        Ok(WaitStatus::StillAlive) | Err(nix::errno::Errno::EINTR) => Ok(false),
        Ok(_) => Ok(true),
        Err(e) => Err(e),
    }
}

/// `mpiq run-watchdog --job PID --start TICKS --grace-ms MS`: started by
/// `mpiq run` with a pipe as standard input. While the pipe is open it
/// notes every process of the job (each second); a byte on it means mpiq
/// ended the job itself; its end without one means mpiq died: the watchdog
/// then ends the job as mpiq would have ([`Tracked::end`]) and says so on
/// standard error. SIGINT, SIGTERM and SIGHUP are blocked: only the pipe
/// (or SIGKILL) ends it.
pub fn watchdog_main(pid: i32, start: u64, grace: Duration) -> u8 {
    let mut set = nix::sys::signal::SigSet::empty();
    for s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        set.add(s);
    }
    let _ = nix::sys::signal::pthread_sigmask(nix::sys::signal::SigmaskHow::SIG_BLOCK, Some(&set), None);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut byte = [0u8; 1];
        let n = loop {
            match std::io::stdin().lock().read(&mut byte) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                r => break r.unwrap_or(0),
            }
        };
        let _ = tx.send(n > 0);
    });
    let mut tracked = Tracked::new(Proc { pid, start });
    let done = loop {
        match rx.recv_timeout(Duration::from_secs(1)) {
            Ok(done) => break done,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break false,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => tracked.rescan(),
        }
    };
    if done {
        return 0;
    }
    tracked.rescan();
    if tracked.left().is_empty() {
        return 0;
    }
    eprintln!("mpiq run-watchdog: mpiq run ended without ending its job (process group {pid}): ending it");
    let root = tracked.root;
    tracked.end(true, grace, root.alive(), &mut || !root.alive(), &|| false);
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_that_ignores_sigterm_is_killed_after_the_grace_period() {
        let cmd: Vec<OsString> = ["sh", "-c", "trap '' TERM; sleep 30 & sleep 30; wait"]
            .iter()
            .map(Into::into)
            .collect();
        let (mut job, _out, _err) = Job::spawn(&cmd, &[]).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        job.tracked.rescan();
        let seen = job.tracked.left();
        assert!(seen.len() >= 3, "{seen:?}");
        let t = Instant::now();
        assert!(!job.has_exited().unwrap());
        assert!(job.end(true, Duration::from_millis(500), &|| false));
        assert!(t.elapsed() >= Duration::from_millis(500));
        assert!(job.has_exited().unwrap());
        let status = job.reap().unwrap();
        assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(9));
        assert!(seen.iter().all(|p| !p.alive()), "{seen:?}");
    }

    #[test]
    fn a_job_that_ends_on_sigterm_is_not_killed() {
        // mpiq blocks SIGTERM (crate::signals); the job must not inherit that.
        let mut term = nix::sys::signal::SigSet::empty();
        term.add(Signal::SIGTERM);
        term.thread_block().unwrap();
        let cmd: Vec<OsString> = ["sleep", "30"].iter().map(Into::into).collect();
        let spawned = Job::spawn(&cmd, &[]);
        term.thread_unblock().unwrap();
        let (mut job, _out, _err) = spawned.unwrap();
        assert!(!job.end(true, Duration::from_secs(10), &|| false));
        let status = job.reap().unwrap();
        assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(15));
    }
}
