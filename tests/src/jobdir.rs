use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A job's private scratch directory, removed when dropped: the job's `TMPDIR` and the
/// backing directory of Open MPI's shared-memory transport.
///
/// Without it, every job an MPI starter does not end cleanly (and the harness ends jobs with
/// SIGKILL) leaves files behind: Open MPI 4.1's session directory under `$TMPDIR/ompi.<host>.<uid>`
/// (8.6 MB each, PMIx's shared-memory store), its `vader_segment.*` files in `/dev/shm`,
/// Open MPI 5's `sm_segment.*` and PRRTE's rendezvous files. A full run of the suite used to
/// leave some 1,000 of them, and one machine's disk filled up with them across runs. PRRTE
/// also cannot start when a file of an earlier, killed job with the same pid is in its way.
///
/// It lives in `/dev/shm` (memory, as Open MPI's own default for its shared-memory files)
/// when a directory can be made there, else in the system's temporary directory; its name
/// `mpiq-job-<test process pid>-<n>` says whose it is.
#[derive(Debug)]
pub struct JobDir {
    path: PathBuf,
}

/// The variable that moves Open MPI's shared-memory backing files: `btl_vader_backing_directory`
/// in 4.1, a synonym of `btl_sm_backing_directory` in 5.x.
const BACKING_DIRECTORY: &str = "OMPI_MCA_btl_vader_backing_directory";

/// Open MPI's `mpi_yield_when_idle` (4.1 and 5.x): `sched_yield` between polls.
const YIELD_WHEN_IDLE: &str = "OMPI_MCA_mpi_yield_when_idle";

impl JobDir {
    /// Makes a new, empty directory.
    ///
    /// # Panics
    /// If it cannot be made.
    pub fn new() -> JobDir {
        static JOBS: AtomicUsize = AtomicUsize::new(0);
        let n = JOBS.fetch_add(1, Ordering::Relaxed);
        let name = format!("mpiq-job-{}-{n}", std::process::id());
        let mut error = None;
        for base in [Path::new("/dev/shm").to_path_buf(), std::env::temp_dir()] {
            let path = base.join(&name);
            // One already there belonged to a test process that had this pid and is gone.
            let _ = std::fs::remove_dir_all(&path);
            match std::fs::create_dir(&path) {
                Ok(()) => return JobDir { path },
                Err(e) => error = Some(format!("{}: {e}", path.display())),
            }
        }
        panic!("making the job's scratch directory: {}", error.unwrap_or_default());
    }

    /// Points `cmd` (a starter, or `mpiq run` over one) at this directory: `TMPDIR` and
    /// Open MPI's shared-memory backing directory. Other MPIs ignore the latter.
    ///
    /// And, for every job the tests start, Open MPI's waiting ranks yield the CPU between
    /// polls ([`YIELD_WHEN_IDLE`]): on 2 cores, a dozen ranks of the jobs side by side
    /// busy-poll while they wait, and a new job's start-up (the ranks' `MPI_Init`) waited
    /// seconds behind them. A rank that yields still polls, and still uses all the CPU
    /// nobody else wants. (MPICH's ch3 ranks yield every thousand polls of their own.)
    pub fn apply(&self, cmd: &mut Command) {
        cmd.env("TMPDIR", &self.path)
            .env(BACKING_DIRECTORY, &self.path)
            .env(YIELD_WHEN_IDLE, "1");
    }
}

impl Default for JobDir {
    fn default() -> Self {
        JobDir::new()
    }
}

impl Drop for JobDir {
    fn drop(&mut self) {
        match std::fs::remove_dir_all(&self.path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => eprintln!(
                "[mpiq-tests] could not remove the job's scratch directory {}: {e}",
                self.path.display()
            ),
        }
    }
}
