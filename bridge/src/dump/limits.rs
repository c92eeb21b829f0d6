//! The limits of one dump, with their overrides from the environment.

use crate::ffi::session::{MAX_CALLBACKS, MAX_FAILURES};
use crate::ffi::CallbackLimits;

/// Most communicators read from one process (a corrupt list may loop).
/// `MPIQ_MAX_COMMUNICATORS` overrides it (see [`limit`]).
pub const MAX_COMMUNICATORS: usize = 100_000;
/// Most operations read from one queue of one communicator.
/// `MPIQ_MAX_OPERATIONS` overrides it (see [`limit`]). A looping list hits
/// it: 100,000 operations make a snapshot of about 50 MB of JSON, which the
/// helper sends in about half a second (a million took 5 s and 2.6 GB).
pub const MAX_OPERATIONS: usize = 100_000;

/// A limit of the dump: the positive integer in the environment variable
/// `name` (`MPIQ_MAX_COMMUNICATORS`, `MPIQ_MAX_OPERATIONS`,
/// `MPIQ_MAX_CALLBACKS`, `MPIQ_MAX_FAILURES`), else `default`. Read in the process that runs the
/// library (`mpiq-dllhost` inherits the front end's environment), so tests
/// can hit a limit in milliseconds and users can raise one.
pub fn limit(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(default)
}

/// The limits of one dump.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Most communicators.
    pub communicators: usize,
    /// Most operations per queue of a communicator.
    pub operations: usize,
    /// The limits on the library's callbacks.
    pub callbacks: CallbackLimits,
}

impl Limits {
    /// The defaults, with the overrides in this process's environment.
    pub fn current() -> Self {
        let get = |name, default: usize| usize::try_from(limit(name, default as u64)).unwrap_or(default);
        Limits {
            communicators: get("MPIQ_MAX_COMMUNICATORS", MAX_COMMUNICATORS),
            operations: get("MPIQ_MAX_OPERATIONS", MAX_OPERATIONS),
            callbacks: CallbackLimits {
                callbacks: limit("MPIQ_MAX_CALLBACKS", MAX_CALLBACKS),
                failures: limit("MPIQ_MAX_FAILURES", MAX_FAILURES),
            },
        }
    }
}
