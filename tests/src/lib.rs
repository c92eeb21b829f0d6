//! Test harness for mpiq: builds the example MPI programs in `examples/` with a real MPI and
//! runs them as real jobs whose message queues the debugger tests then inspect.
//!
//! ```
//! use std::time::Duration;
//! use mpiq_tests::{assert_all_gone, Example, Job, Mpi};
//!
//! // Builds examples/ring.c with MPICH's mpicc (if needed), runs `mpiexec -n 2 ring` and
//! // waits until both ranks printed `MPIQ-READY rank=<r> pid=<pid>`.
//! let job = Job::builder(Mpi::Mpich, Example::Ring).nprocs(2).start();
//! assert_eq!(job.ranks().len(), 2);
//! assert!(Job::is_running(job.pid_of(1)));
//!
//! // Dropping the job kills everything it started; check that nothing survived.
//! let started = job.processes().to_vec();
//! drop(job);
//! assert_all_gone(&started, Duration::from_secs(10));
//! ```
//!
//! The MPIs come from `scripts/testbed` (under `$MPIQ_TESTBED`, default
//! `~/.cache/mpiq/testbed`); see `tests/README.md` for what each test needs.

/// Opening mpiq's report page in Debian's Chromium through Playwright.
pub mod browser;
/// The example programs, their per-MPI support and building them.
pub mod corpus;
pub mod example;
/// Running `gdb -batch` against a process and checking ptrace permission.
pub mod gdb;
/// Starting MPI jobs, waiting for readiness, and killing them on drop.
pub mod job;
/// A job's private scratch directory (TMPDIR, shared-memory files), removed on drop.
pub mod jobdir;
/// How a job starts its ranks: the MPI's own starter, or through Slurm.
pub mod launcher;
/// The MPI implementations and their install layout.
pub mod mpi;
/// Process helpers over `/proc`: identity, state, descendants, leak checks.
pub mod procs;
/// Whether ptrace attach is allowed here (debugger tests need it).
pub mod ptrace;
/// The Python (mpi4py) example programs, and where a rank's main thread is.
pub mod python;
/// Running a command with a timeout: the one [`run::Run`] result.
pub mod run;
/// A Slurm cluster on this one machine (issue 13).
pub mod slurm;

pub use example::{
    build_example, build_recorder, build_recorder_with, examples_build_dir, examples_source_dir, Example,
};
pub use job::{Job, JobBuilder, JobError, Output, Program, Rank};
pub use jobdir::JobDir;
pub use launcher::Launcher;
pub use mpi::Mpi;
pub use procs::{assert_all_gone, Proc};
pub use python::PyExample;
pub use run::Run;
/// The queue contents each example documents, and a checker for snapshots.
pub mod expect;
/// Building the C fixtures in `tests/fixtures/`, work directories, fixture processes.
pub mod fixtures;
/// Driving gdb, lldb and the mpiq CLI from tests.
pub mod frontends;
/// The one normalisation of every snapshot comparison: what depends on the
/// machine, the day or the place the test bed was built.
pub mod golden;

/// One `#[test]` per (MPI, example) pair, each calling `check(mpi, example)`:
///
/// ```text
/// mpiq_tests::per_example! { check_rank;
///     ring_openmpi: OpenMpi, Ring;
///     ring_mpich: Mpich, Ring;
/// }
/// ```
#[macro_export]
macro_rules! per_example {
    ($check:expr; $($name:ident: $mpi:ident, $example:ident;)*) => {$(
        #[test]
        fn $name() {
            ($check)($crate::Mpi::$mpi, $crate::Example::$example);
        }
    )*};
}
