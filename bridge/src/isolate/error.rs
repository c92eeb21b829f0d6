//! How running a library in the helper can fail, as values: the client
//! turns each into the process's error (a person reads it there), and a
//! caller can tell a crash from a hang from a broken protocol.

use std::path::PathBuf;

use super::names::{signal_name, DLLHOST};

/// Why a dump in `mpiq-dllhost` gave no result.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IsolateError {
    /// The helper could not be started (socket, spawn).
    #[error("{what}: {source}")]
    Start {
        /// What could not be done ("cannot start /path/mpiq-dllhost").
        what: String,
        /// The OS's error.
        source: std::io::Error,
    },
    /// The helper said something this mpiq cannot read.
    #[error("{DLLHOST} sent {what} mpiq cannot read: {why}")]
    Protocol {
        /// "a result", "a message".
        what: &'static str,
        /// What is wrong with it.
        why: String,
    },
    /// The connection failed.
    #[error("lost contact with {DLLHOST}: {0}")]
    LostContact(std::io::Error),
    /// The library was silent past the deadline and was stopped.
    #[error(
        "the debug library {} did not answer within {:.1} s (stuck in a loop?) and was stopped; \
         raise the limit with --timeout SECS",
        dll.display(),
        timeout.as_secs_f64()
    )]
    Silent {
        /// The library.
        dll: PathBuf,
        /// The deadline it missed.
        timeout: std::time::Duration,
    },
    /// The helper died while the library ran.
    #[error(
        "the debug library {} {} while reading the queues; this session is unaffected, and \
         --in-process would run it inside this process instead",
        dll.display(),
        how.describe()
    )]
    Died {
        /// The library.
        dll: PathBuf,
        /// How the helper ended.
        how: Ending,
    },
}

/// How a helper process ended.
#[derive(Debug)]
pub enum Ending {
    /// Killed by this signal (the library crashed, aborted, or was killed).
    Signal(i32),
    /// Exited with this status.
    Status(i32),
    /// Its status could not be had.
    Unknown(Option<std::io::Error>),
}

impl Ending {
    /// In words, after "the debug library X".
    fn describe(&self) -> String {
        match self {
            Ending::Signal(sig) => format!("crashed ({})", signal_name(*sig)),
            Ending::Status(c) => format!("made {DLLHOST} exit with status {c}"),
            Ending::Unknown(None) => "stopped unexpectedly".to_string(),
            Ending::Unknown(Some(e)) => format!("stopped unexpectedly ({e})"),
        }
    }

    /// From a child's wait status.
    pub(super) fn of(status: std::io::Result<std::process::ExitStatus>) -> Ending {
        use std::os::unix::process::ExitStatusExt;
        match status {
            Ok(s) => match (s.signal(), s.code()) {
                (Some(sig), _) => Ending::Signal(sig),
                (None, Some(c)) => Ending::Status(c),
                _ => Ending::Unknown(None),
            },
            Err(e) => Ending::Unknown(Some(e)),
        }
    }
}
