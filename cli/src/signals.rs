//! SIGINT / SIGTERM / SIGHUP during a dump: release every stopped process
//! before exiting, so a Ctrl-C never leaves an MPI rank stopped.
//!
//! [`install`](crate::signals::install) blocks the signals in the calling thread (so in every thread
//! started after it) and starts one thread that waits for them with
//! `sigwait`. On a signal it raises [`INTERRUPTED`](crate::signals::INTERRUPTED) (target reads then fail
//! with `TargetError::Interrupted`), detaches from every process through
//! [`crate::ptrace::detach_everything`], and exits with 128 + the signal.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nix::sys::signal::{SigSet, SigmaskHow, Signal};

/// Set once a terminating signal arrived.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// The signals handled.
const SIGNALS: [Signal; 3] = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP];

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
            INTERRUPTED.store(true, Ordering::SeqCst);
            let n = crate::ptrace::detach_everything(Duration::from_secs(5));
            eprintln!(
                "mpiq: {}: stopped; released {n} process{}",
                sig.as_str(),
                if n == 1 { "" } else { "es" }
            );
            std::process::exit(128 + sig as i32);
        })
        .map_err(|_| nix::Error::EAGAIN)?;
    Ok(())
}
