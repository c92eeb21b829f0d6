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
        #[source]
        why: ProtocolError,
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

/// What is wrong with what the helper sent.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// A line that is not a message.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    /// A length this machine cannot hold.
    #[error("{0}")]
    Length(#[from] std::num::TryFromIntError),
    /// The records of the operations end before their last queue.
    #[error("the operations end early")]
    OperationsEnd,
    /// A queue longer than the records left.
    #[error("a queue of {len} bytes in {left} left")]
    QueueTooLong {
        /// The queue's length.
        len: usize,
        /// The bytes left.
        left: usize,
    },
    /// Operations said to be in a shared region there is none of.
    #[error("{0} bytes of operations in a region mpiq has not got")]
    NoRegion(usize),
    /// The helper closed the connection before the bytes after a line.
    #[error("it closed the connection")]
    Closed,
    /// The bytes after a line did not all come in time.
    #[error("it sent {got} of {wanted} bytes in time")]
    Short {
        /// Bytes that came.
        got: usize,
        /// Bytes that should have.
        wanted: usize,
    },
    /// Reading the socket failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The records are not operations.
    #[error("{0}")]
    Convert(#[from] crate::dump::ConvertError),
}

/// Why the helper could not use the region the front end shares with it
/// (the helper prints it and exits).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegionError {
    /// It could not be mapped.
    #[error("cannot map the shared region: {0}")]
    Map(std::io::Error),
    /// The start message names one, but none came.
    #[error("the shared region did not arrive")]
    Missing,
    /// Its descriptor could not be received.
    #[error("cannot receive the shared region: {0}")]
    Receive(std::io::Error),
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
