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

/// Whether a line is an error of Open MPI's TCP BTL on a connection: its messages name their
/// source file, `[host][[job,rank]][.../btl/tcp/btl_tcp.c:559:mca_btl_tcp_recv_blocking]
/// recv(18) failed: Connection reset by peer (104)`.
fn open_mpi_tcp_btl_error(line: &str) -> bool {
    line.contains("btl_tcp")
        && ["failed", "Connection reset", "unexpectedly closed"]
            .iter()
            .any(|w| line.contains(w))
}

impl JobError {
    /// Whether the job failed to start because Open MPI's TCP BTL could not connect two of its
    /// ranks: a race of the MPI's own start-up (open-mpi/ompi#3035, in its proc set-up), before
    /// any rank was ready and before mpiq saw the job. Seen in CI under `srun` on the
    /// one-machine Slurm cluster in two forms: the warning that it failed to TCP connect
    /// (`connect() ... failed: Operation now in progress`) and a rank's crash; and a rank's
    /// segfault at address 0 in start-up with the TCP BTL's `recv(..) failed: Connection reset
    /// by peer` from its peer. Only before any rank was ready: later, a broken connection is
    /// the test's to report.
    pub fn open_mpi_tcp_connect_failed(&self) -> bool {
        match self {
            JobError::ExitedEarly { output, ready, .. } | JobError::ReadyTimeout { output, ready, .. } => {
                output.stderr.contains(OPEN_MPI_TCP_CONNECT_FAILED)
                    || output.stdout.contains(OPEN_MPI_TCP_CONNECT_FAILED)
                    || (ready.is_empty() && output.stderr.lines().any(open_mpi_tcp_btl_error))
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
        exited_with(stderr, Vec::new())
    }

    fn exited_with(stderr: &str, ready: Vec<Rank>) -> JobError {
        JobError::ExitedEarly {
            status: ExitStatus::from_raw(139 << 8),
            ready,
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

    #[test]
    fn a_tcp_btl_connection_error_before_any_rank_was_ready_is_its_race() {
        // CI, Open MPI 4.1.4 under srun: rank 3 crashed at address 0 in start-up, its peer's
        // blocking receive on the TCP BTL was reset.
        let race = "[vm:00757] *** Process received signal ***\n[vm:00757] Signal: Segmentation fault (11)\n\
            [vm][[36290,20235],1][/build/openmpi-4.1.4/opal/mca/btl/tcp/btl_tcp.c:559:mca_btl_tcp_recv_blocking] recv(18) failed: Connection reset by peer (104)\n\
            srun: error: n4: task 3: Segmentation fault";
        assert!(exited(race).open_mpi_tcp_connect_failed());
        // Once a rank was ready, the job is past its start-up: not the race.
        let ready = vec![Rank { rank: 0, pid: 1 }];
        assert!(!exited_with(race, ready).open_mpi_tcp_connect_failed());
        // A line of the TCP BTL that is not an error, or an error of another component.
        assert!(!exited("[vm] btl_tcp: using interface lo").open_mpi_tcp_connect_failed());
        assert!(!exited("[vm] pml_ucx.c:42 recv failed").open_mpi_tcp_connect_failed());
    }
}
