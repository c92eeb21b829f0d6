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

/// Open MPI 4's warning when its TCP BTL could not connect two of its ranks.
const OPEN_MPI_TCP_CONNECT_FAILED: &str = "Open MPI failed to TCP connect to a peer MPI process";

impl JobError {
    /// Whether the job failed to start because Open MPI's TCP BTL could not connect two of its
    /// ranks (its warning, then a rank's crash in start-up: seen once in CI, under `srun` on
    /// the one-machine Slurm cluster, `connect() ... failed: Operation now in progress`): a
    /// race of the MPI's own start-up, before any rank was ready and before mpiq saw the job.
    pub fn open_mpi_tcp_connect_failed(&self) -> bool {
        match self {
            JobError::ExitedEarly { output, .. } | JobError::ReadyTimeout { output, .. } => {
                output.stderr.contains(OPEN_MPI_TCP_CONNECT_FAILED)
                    || output.stdout.contains(OPEN_MPI_TCP_CONNECT_FAILED)
            }
            _ => false,
        }
    }
}

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

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use super::*;

    fn exited(stderr: &str) -> JobError {
        JobError::ExitedEarly {
            status: ExitStatus::from_raw(139 << 8),
            ready: Vec::new(),
            output: Output {
                stdout: String::new(),
                stderr: stderr.to_string(),
            },
        }
    }

    #[test]
    fn only_open_mpis_tcp_connect_warning_is_its_race() {
        let race = "WARNING: Open MPI failed to TCP connect to a peer MPI process.  This\nshould not happen.";
        assert!(exited(race).open_mpi_tcp_connect_failed());
        assert!(
            !exited("[vm:1] *** Process received signal ***\nSignal: Segmentation fault (11)")
                .open_mpi_tcp_connect_failed()
        );
    }
}
