//! Stopping a live process for the length of a dump, and leaving it exactly
//! as it was afterwards.
//!
//! Every thread is stopped with `PTRACE_SEIZE` + `PTRACE_INTERRUPT`, which
//! (unlike `PTRACE_ATTACH`) sends no `SIGSTOP` that could leak into the
//! program. A thread that stops for a signal of its own has it handed back
//! at detach; a process that was already stopped (`SIGSTOP`, Ctrl-Z) goes
//! back to its group stop when detached, as the kernel does for a seized
//! tracee.
//!
//! ptrace requests must come from the thread that attached, so each
//! [`Attachment`](crate::ptrace::Attachment) owns a small tracer thread that attaches, waits for the
//! word to detach, and detaches. Detaching happens on every path: an
//! explicit [`Attachment::detach`](crate::ptrace::Attachment::detach), `Drop` (errors, panics), and SIGINT /
//! SIGTERM through [`detach_everything`](crate::ptrace::detach_everything) (see [`crate::signals`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::ptrace;
use nix::sys::signal::Signal;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use crate::regs::{regs_from_user, RegsError, ThreadRegs};

/// How long a thread may take to stop before attaching fails.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a process could not be stopped (or released).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum AttachError {
    /// There is no such process (or it exited meanwhile).
    #[error("no process {0}")]
    NoSuchProcess(i32),
    /// The kernel refused to let us trace the process.
    #[error(
        "not permitted to attach to process {pid} with ptrace{detail}\n  \
         mpiq needs the same user id as the process and /proc/sys/kernel/yama/ptrace_scope = 0, \
         or the CAP_SYS_PTRACE capability (run as root; in a container add --cap-add=SYS_PTRACE)"
    )]
    PermissionDenied {
        /// The process.
        pid: i32,
        /// What we know more (the current `ptrace_scope`).
        detail: String,
    },
    /// Another debugger (or strace) already traces it.
    #[error("process {pid} is already traced by process {tracer} ({tracer_name}); detach it first")]
    AlreadyTraced {
        /// The process.
        pid: i32,
        /// The tracer's pid.
        tracer: i32,
        /// The tracer's command name.
        tracer_name: String,
    },
    /// Asked to trace ourselves.
    #[error("process {0} is mpiq itself")]
    Myself(i32),
    /// A thread did not stop in time (uninterruptible sleep, `D` state).
    #[error("thread {tid} of process {pid} did not stop within {secs} s (is it in uninterruptible sleep?)")]
    Timeout {
        /// The process.
        pid: i32,
        /// The thread.
        tid: i32,
        /// The time waited.
        secs: u64,
    },
    /// A ptrace or wait call failed.
    #[error("{op} on thread {tid} of process {pid} failed: {errno}")]
    Os {
        /// The process.
        pid: i32,
        /// The thread.
        tid: i32,
        /// The request.
        op: &'static str,
        /// The error.
        errno: Errno,
    },
    /// The tracer thread went away (it panicked).
    #[error("the tracer thread of process {0} died")]
    TracerDied(i32),
}

/// What attaching found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttachInfo {
    /// Threads stopped.
    pub threads: usize,
    /// The process was stopped (`T`) before we came, and will be left so.
    pub was_stopped: bool,
}

enum Cmd {
    Detach(Sender<Result<(), AttachError>>),
}

/// Every live attachment: id -> (pid, its tracer thread's command channel).
type Registry = Mutex<HashMap<u64, (i32, Sender<Cmd>)>>;

fn registry() -> &'static Registry {
    static REG: OnceLock<Registry> = OnceLock::new();
    REG.get_or_init(Default::default)
}

/// A stopped process. Dropping it detaches.
#[derive(Debug)]
pub struct Attachment {
    pid: i32,
    id: u64,
    info: AttachInfo,
    regs: Vec<ThreadRegs>,
    tx: Option<Sender<Cmd>>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Cmd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Detach")
    }
}

impl Attachment {
    /// Stops every thread of `pid`; returns once all are stopped.
    pub fn attach(pid: i32) -> Result<Attachment, AttachError> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = channel();
        let (ready_tx, ready_rx) = channel();
        // Registered before attaching, so a Ctrl-C from now on detaches it.
        registry()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, (pid, tx.clone()));
        let thread = std::thread::Builder::new()
            .name(format!("mpiq-tracer-{pid}"))
            .spawn(move || tracer_main(pid, ready_tx, rx))
            .map_err(|_| AttachError::TracerDied(pid))?;
        let unregister = || {
            registry().lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
        };
        match ready_rx.recv() {
            Ok(Ok((info, regs))) => Ok(Attachment {
                pid,
                id,
                info,
                regs,
                tx: Some(tx),
                thread: Some(thread),
            }),
            Ok(Err(e)) => {
                unregister();
                let _ = thread.join();
                Err(e)
            }
            Err(_) => {
                unregister();
                let _ = thread.join();
                Err(AttachError::TracerDied(pid))
            }
        }
    }

    /// The process id.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// What attaching found.
    pub fn info(&self) -> AttachInfo {
        self.info
    }

    /// The registers of every stopped thread, in thread id order.
    pub fn thread_regs(&self) -> &[ThreadRegs] {
        &self.regs
    }

    /// Lets the process go on (or back into its earlier stop).
    pub fn detach(mut self) -> Result<(), AttachError> {
        self.release()
    }

    fn release(&mut self) -> Result<(), AttachError> {
        let Some(tx) = self.tx.take() else {
            return Ok(());
        };
        let (ack_tx, ack_rx) = channel();
        let result = if tx.send(Cmd::Detach(ack_tx)).is_ok() {
            // Err: the tracer already detached (Ctrl-C got there first).
            ack_rx.recv().unwrap_or(Ok(()))
        } else {
            Ok(())
        };
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        registry().lock().unwrap_or_else(|e| e.into_inner()).remove(&self.id);
        result
    }
}

impl Drop for Attachment {
    fn drop(&mut self) {
        if let Err(e) = self.release() {
            eprintln!("mpiq: warning: {e}");
        }
    }
}

/// Detaches from every process attached so far (from any thread): the
/// SIGINT/SIGTERM path. Returns how many were released.
pub fn detach_everything(timeout: Duration) -> usize {
    let all: Vec<(i32, Sender<Cmd>)> = registry()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .drain()
        .map(|(_, v)| v)
        .collect();
    let mut acks = Vec::new();
    for (_pid, tx) in all {
        let (ack_tx, ack_rx) = channel();
        if tx.send(Cmd::Detach(ack_tx)).is_ok() {
            acks.push(ack_rx);
        }
    }
    let deadline = Instant::now() + timeout;
    acks.into_iter()
        .filter(|rx| {
            rx.recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .is_ok()
        })
        .count()
}

/// The exits the tracer threads' waits took (see [`take_reaped`]).
static REAPED: Mutex<Vec<WaitStatus>> = Mutex::new(Vec::new());

/// How `pid` ended, if a tracer thread's wait took its exit status: a
/// process that exits while it is being stopped is reaped there when it is
/// this process's own child (`mpiq run`'s job), whose status its parent
/// then reads here.
pub fn take_reaped(pid: i32) -> Option<WaitStatus> {
    let mut all = REAPED.lock().unwrap_or_else(|e| e.into_inner());
    let i = all.iter().position(|s| s.pid().is_some_and(|p| p.as_raw() == pid))?;
    Some(all.swap_remove(i))
}

/// A seized thread.
#[derive(Debug)]
struct Traced {
    tid: Pid,
    /// A signal the thread stopped for, handed back at detach.
    signal: Option<Signal>,
    stopped: bool,
    gone: bool,
}

/// What the tracer thread hands back once every thread is stopped.
type Ready = Result<(AttachInfo, Vec<ThreadRegs>), AttachError>;

/// How long each process was held stopped (pid → the sum, since the last
/// [`take_stopped`]): from the first thread seized to the last released.
fn stopped_log() -> &'static Mutex<HashMap<i32, Duration>> {
    static LOG: OnceLock<Mutex<HashMap<i32, Duration>>> = OnceLock::new();
    LOG.get_or_init(Default::default)
}

/// How long each process was held stopped since the last call (pid → the
/// sum of its stops), and forgets it: what a sample cost the job.
pub fn take_stopped() -> HashMap<i32, Duration> {
    std::mem::take(&mut *stopped_log().lock().unwrap_or_else(|e| e.into_inner()))
}

fn tracer_main(pid: i32, ready: Sender<Ready>, rx: Receiver<Cmd>) {
    let seized = Instant::now();
    let mut traced = Vec::new();
    // Counted on every path out: the time the process could not run.
    let _count = Counted(pid, seized);
    match attach_all(pid, &mut traced) {
        Ok(mut info) => {
            if !info.was_stopped {
                settle(pid, &mut traced);
                info.threads = traced.iter().filter(|t| !t.gone).count();
            }
            // Here: ptrace requests must come from the thread that seized.
            let regs = traced
                .iter()
                .filter(|t| !t.gone)
                .map(|t| ThreadRegs {
                    tid: t.tid.as_raw(),
                    regs: match ptrace::getregs(t.tid) {
                        Ok(r) => Ok(regs_from_user(&r)),
                        Err(Errno::ESRCH) => Err(RegsError::Exited),
                        Err(e) => Err(RegsError::GetRegs(e)),
                    },
                })
                .collect();
            if ready.send(Ok((info, regs))).is_err() {
                let _ = detach_all(pid, &traced);
                return;
            }
        }
        Err(e) => {
            let _ = detach_all(pid, &traced);
            let _ = ready.send(Err(e));
            return;
        }
    }
    // Wait for the word (or for every sender to go away), then release.
    let ack = match rx.recv() {
        Ok(Cmd::Detach(ack)) => Some(ack),
        Err(_) => None,
    };
    let result = detach_all(pid, &traced);
    if let Some(ack) = ack {
        let _ = ack.send(result);
    }
}

/// Adds the time since `.1` to process `.0`'s stops when dropped.
struct Counted(i32, Instant);

impl Drop for Counted {
    fn drop(&mut self) {
        let mut log = stopped_log().lock().unwrap_or_else(|e| e.into_inner());
        *log.entry(self.0).or_default() += self.1.elapsed();
    }
}

/// `State` and `TracerPid` of `/proc/PID/status`.
pub fn proc_status(pid: i32) -> Option<(char, i32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let mut state = None;
    let mut tracer = 0;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("State:") {
            state = v.trim().chars().next();
        } else if let Some(v) = line.strip_prefix("TracerPid:") {
            tracer = v.trim().parse().unwrap_or(0);
        }
    }
    Some((state?, tracer))
}

/// The state letter of one thread (`/proc/PID/task/TID/stat`).
fn task_state(pid: i32, tid: Pid) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.split_whitespace().next()?.chars().next()
}

fn list_tasks(pid: i32) -> Result<Vec<Pid>, AttachError> {
    let dir = std::fs::read_dir(format!("/proc/{pid}/task")).map_err(|_| AttachError::NoSuchProcess(pid))?;
    let mut tids: Vec<Pid> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .map(Pid::from_raw)
        .collect();
    tids.sort();
    Ok(tids)
}

/// How long a process seen stopped (`T`) is given for all its threads to
/// reach the stop.
const GROUP_STOP_WAIT: Duration = Duration::from_millis(500);

/// Waits (at most [`GROUP_STOP_WAIT`]) until every thread of `pid`, seen
/// stopped by a signal, is in the stop. A `SIGSTOP` stops the threads one
/// by one, and a thread seized before it got there leaves the stop
/// unfinished: at detach the kernel then lets the whole process run on,
/// and a process found stopped must be left stopped.
fn whole_group_stop(pid: i32) {
    let deadline = Instant::now() + GROUP_STOP_WAIT;
    while Instant::now() < deadline {
        let all = list_tasks(pid)
            .map(|ts| ts.iter().all(|&t| matches!(task_state(pid, t), Some('T' | 't') | None)))
            .unwrap_or(true);
        if all {
            return;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn permission_denied(pid: i32) -> AttachError {
    let detail = match std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope") {
        Ok(s) => format!(" (/proc/sys/kernel/yama/ptrace_scope is {})", s.trim()),
        Err(_) => String::new(),
    };
    AttachError::PermissionDenied { pid, detail }
}

fn attach_all(pid: i32, traced: &mut Vec<Traced>) -> Result<AttachInfo, AttachError> {
    if pid == std::process::id() as i32 {
        return Err(AttachError::Myself(pid));
    }
    let (state, tracer) = proc_status(pid).ok_or(AttachError::NoSuchProcess(pid))?;
    if tracer != 0 {
        let tracer_name = std::fs::read_to_string(format!("/proc/{tracer}/comm"))
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "?".into());
        return Err(AttachError::AlreadyTraced {
            pid,
            tracer,
            tracer_name,
        });
    }
    if state == 'X' {
        return Err(AttachError::NoSuchProcess(pid));
    }
    let was_stopped = state == 'T';
    if was_stopped {
        whole_group_stop(pid);
    }
    // Seize until no new thread appears: a running thread may clone while we
    // work through the list.
    loop {
        let mut new = false;
        for tid in list_tasks(pid)? {
            if traced.iter().any(|t| t.tid == tid) {
                continue;
            }
            match ptrace::seize(tid, ptrace::Options::empty()) {
                Ok(()) => {}
                Err(Errno::ESRCH) => continue,
                // A thread that has exited but not been reaped (a main
                // thread that called pthread_exit): nothing to stop.
                Err(Errno::EPERM) if task_state(pid, tid) == Some('Z') => continue,
                Err(Errno::EPERM) => {
                    return Err(match proc_status(pid) {
                        Some((_, t)) if t != 0 && t != std::process::id() as i32 => AttachError::AlreadyTraced {
                            pid,
                            tracer: t,
                            tracer_name: std::fs::read_to_string(format!("/proc/{t}/comm"))
                                .map(|s| s.trim().to_string())
                                .unwrap_or_else(|_| "?".into()),
                        },
                        _ => permission_denied(pid),
                    })
                }
                Err(errno) => {
                    return Err(AttachError::Os {
                        pid,
                        tid: tid.as_raw(),
                        op: "PTRACE_SEIZE",
                        errno,
                    })
                }
            }
            traced.push(Traced {
                tid,
                signal: None,
                stopped: false,
                gone: false,
            });
            new = true;
            match ptrace::interrupt(tid) {
                Ok(()) | Err(Errno::ESRCH) => {}
                Err(errno) => {
                    return Err(AttachError::Os {
                        pid,
                        tid: tid.as_raw(),
                        op: "PTRACE_INTERRUPT",
                        errno,
                    })
                }
            }
        }
        if !new {
            break;
        }
        wait_stopped(pid, traced)?;
    }
    if traced.iter().all(|t| t.gone) {
        return Err(AttachError::NoSuchProcess(pid));
    }
    Ok(AttachInfo {
        threads: traced.iter().filter(|t| !t.gone).count(),
        was_stopped,
    })
}

fn wait_stopped(pid: i32, traced: &mut [Traced]) -> Result<(), AttachError> {
    let deadline = Instant::now() + STOP_TIMEOUT;
    let mut pause = Duration::from_micros(50);
    loop {
        let mut waiting = None;
        for t in traced.iter_mut().filter(|t| !t.stopped && !t.gone) {
            match waitpid(t.tid, Some(WaitPidFlag::WNOHANG | WaitPidFlag::__WALL)) {
                Ok(WaitStatus::StillAlive) => waiting = Some(t.tid),
                // The interrupt, or a group stop (the process was stopped).
                Ok(WaitStatus::PtraceEvent(..)) => t.stopped = true,
                // Stopped for a signal of its own: hand it back at detach.
                Ok(WaitStatus::Stopped(_, sig)) => {
                    t.stopped = true;
                    t.signal = Some(sig);
                }
                Ok(WaitStatus::PtraceSyscall(_)) | Ok(WaitStatus::Continued(_)) => t.stopped = true,
                Ok(ended @ (WaitStatus::Exited(..) | WaitStatus::Signaled(..))) => {
                    if t.tid.as_raw() == pid {
                        REAPED.lock().unwrap_or_else(|e| e.into_inner()).push(ended);
                    }
                    t.gone = true;
                }
                Err(Errno::ECHILD) => t.gone = true,
                Err(Errno::EINTR) => waiting = Some(t.tid),
                Err(errno) => {
                    return Err(AttachError::Os {
                        pid,
                        tid: t.tid.as_raw(),
                        op: "waitpid",
                        errno,
                    })
                }
            }
        }
        let Some(tid) = waiting else { return Ok(()) };
        if Instant::now() > deadline {
            return Err(AttachError::Timeout {
                pid,
                tid: tid.as_raw(),
                secs: STOP_TIMEOUT.as_secs(),
            });
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(5));
    }
}

/// How many times a thread caught in the flight recorder's own code is let
/// run out of it, and for how long each time: [`SETTLE_RUN`] on a CPU, for
/// which it may wait up to [`SETTLE_WAIT`] on a crowded node.
const SETTLE_ROUNDS: usize = 4;
const SETTLE_RUN: Duration = Duration::from_micros(100);
/// How long a round of [`settle`] waits for a continued thread to get a CPU
/// at all (its `schedstat` count of times on a CPU unchanged): on 2 busy cores, a
/// rank at a low priority was not scheduled within its 100 µs, and its call
/// showed with neither communicator nor running record.
const SETTLE_WAIT: Duration = Duration::from_millis(50);

/// The executable mappings of mpiq's flight recorder in `pid`
/// (`libmpiq_recorder*.so`, preloaded by `mpiq run`) and, when it has one,
/// of the vDSO, where its clock reads run: [start, end). Empty without the
/// recorder.
fn recorder_text(pid: i32) -> Vec<(u64, u64)> {
    let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
        return Vec::new();
    };
    let text = maps
        .lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let (range, perms) = (f.next()?, f.next()?);
            let path = f.nth(3)?;
            let name = path.rsplit('/').next()?;
            let recorder = name.starts_with(mpiq::stacks::RECORDER_LIBRARY_PREFIX);
            if !perms.contains('x') || !(recorder || path == "[vdso]") {
                return None;
            }
            let (a, b) = range.split_once('-')?;
            Some((
                recorder,
                u64::from_str_radix(a, 16).ok()?,
                u64::from_str_radix(b, 16).ok()?,
            ))
        })
        .collect::<Vec<_>>();
    if !text.iter().any(|&(recorder, ..)| recorder) {
        return Vec::new();
    }
    text.into_iter().map(|(_, a, b)| (a, b)).collect()
}

/// Lets each thread stopped in mpiq's flight recorder's own code (or in the
/// vDSO, where its clock reads run) run out of it (at most [`SETTLE_ROUNDS`] times, [`SETTLE_RUN`] each), its other
/// threads still stopped. There, around the MPI's call, the call's record
/// may not be written yet or no longer running, and the recorder, built
/// without debug information, gives no arguments of its own: the thread's
/// call would show without its communicator, peer and tag. A moment later
/// it is inside the MPI (blocked, or polling) with its record running, or
/// back in the program. A thread that stopped for a signal of its own stays
/// as it is (the signal is handed back at detach). A thread of the
/// program's own in the vDSO comes out of it as soon. A round lasts until
/// every continued thread has been on a CPU (up to [`SETTLE_WAIT`]): on a
/// crowded node a continued thread may wait for one longer than it needs
/// to run out.
fn settle(pid: i32, traced: &mut [Traced]) {
    let text = recorder_text(pid);
    if text.is_empty() {
        return;
    }
    let inside = |tid: Pid| ptrace::getregs(tid).is_ok_and(|r| text.iter().any(|&(a, b)| (a..b).contains(&r.rip)));
    for _ in 0..SETTLE_ROUNDS {
        // Each continued thread, with its count of times on a CPU then.
        let mut resumed = Vec::new();
        for t in traced.iter_mut() {
            if t.gone || !t.stopped || t.signal.is_some() || !inside(t.tid) {
                continue;
            }
            let ran = crate::procs::thread_runs(pid, t.tid.as_raw());
            if ptrace::cont(t.tid, None).is_ok() {
                t.stopped = false;
                resumed.push((t.tid, ran));
            }
        }
        if resumed.is_empty() {
            return;
        }
        let continued = Instant::now();
        std::thread::sleep(SETTLE_RUN);
        // A thread whose counter cannot be read counts as having run.
        let not_run = |&(tid, ran): &(Pid, Option<u64>)| {
            ran.is_some_and(|ran| crate::procs::thread_runs(pid, tid.as_raw()) == Some(ran))
        };
        let mut waited = false;
        while continued.elapsed() < SETTLE_WAIT && resumed.iter().any(not_run) {
            std::thread::sleep(SETTLE_RUN);
            waited = true;
        }
        // Each got a CPU only lately: its time to run out, from then.
        if waited {
            std::thread::sleep(SETTLE_RUN);
        }
        for (tid, _) in &resumed {
            // ESRCH: it exited meanwhile (wait_stopped sees it gone).
            let _ = ptrace::interrupt(*tid);
        }
        if wait_stopped(pid, traced).is_err() {
            return;
        }
    }
}

fn detach_all(pid: i32, traced: &[Traced]) -> Result<(), AttachError> {
    let mut first_error = None;
    for t in traced.iter().filter(|t| !t.gone) {
        match ptrace::detach(t.tid, t.signal) {
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(errno) => {
                first_error.get_or_insert(AttachError::Os {
                    pid,
                    tid: t.tid.as_raw(),
                    op: "PTRACE_DETACH",
                    errno,
                });
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}
