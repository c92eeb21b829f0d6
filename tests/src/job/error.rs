//! Why a job could not be started.

use std::fmt;
use std::process::ExitStatus;
use std::time::Duration;

use super::{Output, Rank};

/// Why a job could not be started. Every variant carries the starter's output so far.
#[derive(Debug)]
#[non_exhaustive]
pub enum JobError {
    /// The starter could not be spawned.
    Spawn {
        /// The command line.
        command: String,
        /// The OS error.
        error: std::io::Error,
    },
    /// The starter exited before every rank was ready.
    ExitedEarly {
        /// How it exited.
        status: ExitStatus,
        /// The ranks that had reported ready.
        ready: Vec<Rank>,
        /// Captured output.
        output: Output,
    },
    /// Not every rank reported ready in time.
    ReadyTimeout {
        /// The time allowed.
        timeout: Duration,
        /// The ranks that had reported ready.
        ready: Vec<Rank>,
        /// Captured output.
        output: Output,
    },
    /// A rank printed a malformed, duplicated or out-of-range `MPIQ-READY` line.
    BadReadyLine {
        /// What is wrong.
        problem: String,
        /// Captured output.
        output: Output,
    },
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobError::Spawn { command, error } => write!(f, "cannot spawn `{command}`: {error}"),
            JobError::ExitedEarly { status, ready, output } => write!(
                f,
                "the starter exited ({status}) before every rank was ready (ready: {})\n{output}",
                ranks_list(ready)
            ),
            JobError::ReadyTimeout { timeout, ready, output } => write!(
                f,
                "not every rank printed MPIQ-READY within {timeout:?} (ready: {})\n{output}",
                ranks_list(ready)
            ),
            JobError::BadReadyLine { problem, output } => write!(f, "{problem}\n{output}"),
        }
    }
}

impl std::error::Error for JobError {}

pub(crate) fn ranks_list(ranks: &[Rank]) -> String {
    if ranks.is_empty() {
        return "none".into();
    }
    ranks
        .iter()
        .map(|r| format!("{}:{}", r.rank, r.pid))
        .collect::<Vec<_>>()
        .join(", ")
}
