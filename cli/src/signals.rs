//! SIGINT / SIGTERM / SIGHUP during a dump: release every stopped process
//! before exiting, so a Ctrl-C never leaves an MPI rank stopped.
//!
//! [`install`](crate::signals::install) blocks the signals in the calling thread (so in every thread
//! started after it) and starts one thread that waits for them with
//! `sigwait`. On a signal it raises the interrupt flag ([`crate::interrupt`]) (target reads then fail
//! with `TargetError::Interrupted`), detaches from every process through
//! [`crate::ptrace::detach_everything`], and exits with 128 + the signal.
//!
//! While `mpiq run` has a job ([`pass_on_to`](crate::signals::pass_on_to)),
//! the signal is passed on to the job's process group instead (with
//! SIGCONT, for a stopped job) and mpiq goes on: `mpiq run` sees it with
//! [`passed_on`](crate::signals::passed_on), ends the job and exits with
//! 128 + the signal itself.

use std::io::Write;
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use nix::sys::signal::{killpg, SigSet, SigmaskHow, Signal};
use nix::unistd::Pid;

/// Run on a terminating signal before mpiq exits (`mpiq watch` puts the
/// terminal back), after every process was released.
static EXIT_HOOK: Mutex<Option<fn()>> = Mutex::new(None);

/// Sets (or clears) the function a terminating signal runs before mpiq
/// exits.
pub fn set_exit_hook(hook: Option<fn()>) {
    *EXIT_HOOK.lock().unwrap_or_else(|e| e.into_inner()) = hook;
}

/// The signals handled.
const SIGNALS: [Signal; 3] = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP];

/// The process group of `mpiq run`'s job (0: none). The lock is held while
/// a signal is passed on, so that once [`forget_job`] returned none will
/// be (the group id may then be reused).
static JOB_GROUP: Mutex<i32> = Mutex::new(0);
/// The last signal passed on to the job.
static PASSED_ON: AtomicI32 = AtomicI32::new(0);
/// How many signals were passed on.
static PASSED_ON_COUNT: AtomicUsize = AtomicUsize::new(0);

/// From now on, pass the signals on to process group `pgid` instead of
/// exiting (`mpiq run`).
pub fn pass_on_to(pgid: i32) {
    *JOB_GROUP.lock().unwrap_or_else(|e| e.into_inner()) = pgid;
}

/// Stop passing signals on (before the job's leader is reaped).
pub fn forget_job() {
    *JOB_GROUP.lock().unwrap_or_else(|e| e.into_inner()) = 0;
}

/// The last signal passed on to the job, and how many were.
pub fn passed_on() -> Option<(Signal, usize)> {
    let n = PASSED_ON_COUNT.load(Ordering::SeqCst);
    let sig = Signal::try_from(PASSED_ON.load(Ordering::SeqCst)).ok()?;
    (n > 0).then_some((sig, n))
}

/// Passes `sig` on to the job, if there is one; whether there was.
fn pass_on(sig: Signal) -> bool {
    let group = JOB_GROUP.lock().unwrap_or_else(|e| e.into_inner());
    if *group <= 0 {
        return false;
    }
    crate::interrupt::raise();
    let n = crate::ptrace::detach_everything(Duration::from_secs(5));
    let _ = killpg(Pid::from_raw(*group), sig);
    let _ = killpg(Pid::from_raw(*group), Signal::SIGCONT);
    PASSED_ON.store(sig as i32, Ordering::SeqCst);
    PASSED_ON_COUNT.fetch_add(1, Ordering::SeqCst);
    let released = if n > 0 {
        format!("; released {n} stopped process{}", if n == 1 { "" } else { "es" })
    } else {
        String::new()
    };
    let _ = writeln!(
        std::io::stderr(),
        "mpiq run: {}: passed on to the job (process group {}){released}",
        sig.as_str(),
        *group
    );
    true
}

/// Installs the handling; call it first thing in `main`, before any thread
/// is started. Returns an error if the signal mask cannot be changed.
pub fn install() -> nix::Result<()> {
    let mut set = SigSet::empty();
    for s in SIGNALS {
        set.add(s);
    }
    nix::sys::signal::pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set), None)?;
    std::thread::Builder::new()
        .name("mpiq-signals".into())
        .spawn(move || loop {
            let Ok(sig) = set.wait() else { continue };
            if pass_on(sig) {
                continue;
            }
            crate::interrupt::raise();
            let n = crate::ptrace::detach_everything(Duration::from_secs(5));
            if let Some(hook) = *EXIT_HOOK.lock().unwrap_or_else(|e| e.into_inner()) {
                hook();
            }
            // Not eprintln!, which panics when standard error is gone (a
            // SIGHUP from a terminal that was closed): the exit must come.
            let _ = writeln!(
                std::io::stderr(),
                "mpiq: {}: stopped; released {n} process{}",
                sig.as_str(),
                if n == 1 { "" } else { "es" }
            );
            std::process::exit(128 + sig as i32);
        })
        .map_err(|_| nix::Error::EAGAIN)?;
    Ok(())
}

/// Makes `cmd` a child mpiq supervises (a job of `mpiq run`, a launcher of
/// collectors): it starts with no signal blocked and SIGPIPE at its
/// default (mpiq blocks SIGINT, SIGTERM and SIGHUP, see [`install`], and
/// Rust's runtime ignores SIGPIPE: inherited, the child would never see
/// the SIGTERM that ends it), and it gets SIGTERM from the kernel when the
/// thread that spawned it ends (`PR_SET_PDEATHSIG`), so a killed mpiq
/// leaves nothing running. The spawn fails if mpiq died before that was
/// set up.
pub fn supervise_child(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id();
    // SAFETY: the closure runs in the forked child before exec and calls
    // only sigemptyset(3), pthread_sigmask(3), signal(2), prctl(2) and
    // getppid(2) on its own stack variables, and builds an io::Error from
    // an errno, which allocates nothing: all async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // mpiq died before the prctl: do not run unwatched.
            if libc::getppid() as u32 != parent {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}
