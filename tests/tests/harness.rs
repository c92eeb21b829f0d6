//! Tests of the harness itself, against the real MPIs: every example starts under every MPI
//! that supports it, every rank reports ready, and nothing the harness started survives the
//! job; the slow control job finishes by itself; gdb reads `MPIR_dll_name` from a rank.

use std::path::Path;
use std::time::{Duration, Instant};

use mpiq_tests::{assert_all_gone, build_example, gdb, Example, Job, JobError, Mpi};

/// How long killed processes get to disappear.
const GONE: Duration = Duration::from_secs(10);

/// Starts `example` with its defaults under `mpi`, checks every rank, drops the job and
/// checks that no process it started survives. Skips (printing why) only pairs the harness
/// declares unsupported.
fn starts_and_cleans_up(mpi: Mpi, example: Example) {
    let Some(job) = Job::builder(mpi, example).start_supported() else {
        return;
    };
    let n = example.default_nprocs();
    assert_eq!(job.ranks().len(), n);
    for (i, r) in job.ranks().iter().enumerate() {
        assert_eq!(r.rank, i, "ranks are sorted and complete");
        assert_eq!(job.pid_of(i), r.pid);
        assert!(
            job.processes().iter().any(|p| p.pid == r.pid),
            "rank {i} (pid {}) is among the recorded processes {:?}",
            r.pid,
            job.processes()
        );
    }
    let mut pids: Vec<u32> = job.ranks().iter().map(|r| r.pid).collect();
    pids.sort_unstable();
    pids.dedup();
    assert_eq!(pids.len(), n, "every rank is its own process");
    if !example.runs_to_completion() {
        for r in job.ranks() {
            if !example.rank_may_exit(r.rank, n) {
                assert!(Job::is_running(r.pid), "rank {} (pid {}) runs freely", r.rank, r.pid);
            }
        }
    }
    // Open MPI 5's mpirun execs PRRTE's prterun.
    let starter_name = match mpi {
        Mpi::Mpich | Mpi::MpichCh4 => "mpiexec",
        Mpi::OpenMpi5 => "prterun",
        _ => "mpirun",
    };
    assert!(
        job.processes()
            .iter()
            .any(|p| p.pid == job.starter_pid() && p.name == starter_name),
        "the starter is recorded as {starter_name}: {:?}",
        job.processes()
    );
    if matches!(mpi, Mpi::Mpich | Mpi::MpichCh4) {
        assert!(
            job.processes().iter().any(|p| p.name == "hydra_pmi_proxy"),
            "hydra's proxy is recorded: {:?}",
            job.processes()
        );
    }
    let started = job.processes().to_vec();
    drop(job);
    assert_all_gone(&started, GONE);
}

mpiq_tests::per_example! { starts_and_cleans_up;
    openmpi_ring: OpenMpi, Ring;
    openmpi_named_comms: OpenMpi, NamedComms;
    openmpi_unexpected: OpenMpi, Unexpected;
    openmpi_deadlock: OpenMpi, Deadlock;
    openmpi_slow: OpenMpi, Slow;
    openmpi_many_ops: OpenMpi, ManyOps;
    openmpi_sessions: OpenMpi, Sessions;
    openmpi_barrier_vs_recv: OpenMpi, BarrierVsRecv;
    openmpi_deep_stack: OpenMpi, DeepStack;
    openmpi_split_mismatch: OpenMpi, SplitMismatch;
    openmpi_ssend_ring: OpenMpi, SsendRing;
    openmpi_any_source_computing: OpenMpi, AnySourceComputing;
    openmpi_waitany: OpenMpi, Waitany;
    openmpi_healthy: OpenMpi, Healthy;
    openmpi_threads: OpenMpi, Threads;
    openmpi_livelock: OpenMpi, Livelock;
    openmpi_irregular: OpenMpi, Irregular;
    openmpi_compute_stuck: OpenMpi, ComputeStuck;
    openmpi_pipe_stuck: OpenMpi, PipeStuck;
    openmpi_exit_early: OpenMpi, ExitEarly;
    mpich_ring: Mpich, Ring;
    mpich_named_comms: Mpich, NamedComms;
    mpich_unexpected: Mpich, Unexpected;
    mpich_deadlock: Mpich, Deadlock;
    mpich_slow: Mpich, Slow;
    mpich_many_ops: Mpich, ManyOps;
    mpich_sessions: Mpich, Sessions;
    mpich_barrier_vs_recv: Mpich, BarrierVsRecv;
    mpich_deep_stack: Mpich, DeepStack;
    mpich_split_mismatch: Mpich, SplitMismatch;
    mpich_ssend_ring: Mpich, SsendRing;
    mpich_any_source_computing: Mpich, AnySourceComputing;
    mpich_waitany: Mpich, Waitany;
    mpich_healthy: Mpich, Healthy;
    mpich_threads: Mpich, Threads;
    mpich_livelock: Mpich, Livelock;
    mpich_irregular: Mpich, Irregular;
    mpich_compute_stuck: Mpich, ComputeStuck;
    mpich_pipe_stuck: Mpich, PipeStuck;
    mpich_exit_early: Mpich, ExitEarly;
    openmpi5_ring: OpenMpi5, Ring;
    openmpi5_named_comms: OpenMpi5, NamedComms;
    openmpi5_unexpected: OpenMpi5, Unexpected;
    openmpi5_deadlock: OpenMpi5, Deadlock;
    openmpi5_slow: OpenMpi5, Slow;
    openmpi5_many_ops: OpenMpi5, ManyOps;
    openmpi5_sessions: OpenMpi5, Sessions;
    openmpi5_barrier_vs_recv: OpenMpi5, BarrierVsRecv;
    openmpi5_deep_stack: OpenMpi5, DeepStack;
    openmpi5_split_mismatch: OpenMpi5, SplitMismatch;
    openmpi5_ssend_ring: OpenMpi5, SsendRing;
    openmpi5_any_source_computing: OpenMpi5, AnySourceComputing;
    openmpi5_waitany: OpenMpi5, Waitany;
    openmpi5_healthy: OpenMpi5, Healthy;
    openmpi5_threads: OpenMpi5, Threads;
    openmpi5_livelock: OpenMpi5, Livelock;
    openmpi5_irregular: OpenMpi5, Irregular;
    openmpi5_compute_stuck: OpenMpi5, ComputeStuck;
    openmpi5_pipe_stuck: OpenMpi5, PipeStuck;
    openmpi5_exit_early: OpenMpi5, ExitEarly;
    mpich_ch4_ring: MpichCh4, Ring;
    mpich_ch4_named_comms: MpichCh4, NamedComms;
    mpich_ch4_unexpected: MpichCh4, Unexpected;
    mpich_ch4_deadlock: MpichCh4, Deadlock;
    mpich_ch4_slow: MpichCh4, Slow;
    mpich_ch4_many_ops: MpichCh4, ManyOps;
    mpich_ch4_sessions: MpichCh4, Sessions;
    mpich_ch4_barrier_vs_recv: MpichCh4, BarrierVsRecv;
    mpich_ch4_deep_stack: MpichCh4, DeepStack;
    mpich_ch4_split_mismatch: MpichCh4, SplitMismatch;
    mpich_ch4_ssend_ring: MpichCh4, SsendRing;
    mpich_ch4_any_source_computing: MpichCh4, AnySourceComputing;
    mpich_ch4_waitany: MpichCh4, Waitany;
    mpich_ch4_healthy: MpichCh4, Healthy;
    mpich_ch4_threads: MpichCh4, Threads;
    mpich_ch4_livelock: MpichCh4, Livelock;
    mpich_ch4_irregular: MpichCh4, Irregular;
    mpich_ch4_compute_stuck: MpichCh4, ComputeStuck;
    mpich_ch4_pipe_stuck: MpichCh4, PipeStuck;
    mpich_ch4_exit_early: MpichCh4, ExitEarly;
}

#[test]
fn every_example_has_a_start_test() {
    // The macro above must list every (MPI, example) pair.
    assert_eq!(Example::ALL.len() * Mpi::all().len(), 80);
}

/// The second variants of the two-variant examples (`waitany all`, `threads join`) start too,
/// under both MPIs, with every rank its own running process.
#[test]
fn the_other_variants_start() {
    for mpi in Mpi::all() {
        for (example, arg) in [(Example::Waitany, "all"), (Example::Threads, "join")] {
            let job = Job::builder(mpi, example).args([arg]).start();
            assert_eq!(job.ranks().len(), example.default_nprocs());
            for r in job.ranks() {
                assert!(
                    Job::is_running(r.pid),
                    "{example} {arg} under {mpi}: rank {} runs",
                    r.rank
                );
            }
            let started = job.processes().to_vec();
            drop(job);
            assert_all_gone(&started, GONE);
        }
    }
}

/// The examples that must run on exactly their default rank count refuse any other.
#[test]
fn fixed_size_examples_refuse_other_sizes() {
    for example in [
        Example::SplitMismatch,
        Example::AnySourceComputing,
        Example::Waitany,
        Example::Threads,
    ] {
        let err = Job::builder(Mpi::Mpich, example)
            .nprocs(example.default_nprocs() + 1)
            .ready_timeout(Duration::from_secs(30))
            .try_start()
            .expect_err("a wrong rank count must fail");
        assert!(matches!(err, JobError::ExitedEarly { .. }), "{example}: {err}");
    }
}

#[test]
fn sessions_is_declared_unsupported_by_open_mpi_only() {
    assert!(!Example::Sessions.supported_by(Mpi::OpenMpi));
    assert!(Example::Sessions
        .unsupported_reason(Mpi::OpenMpi)
        .unwrap()
        .contains("Sessions"));
    assert!(Example::Sessions.supported_by(Mpi::Mpich));
    for example in Example::ALL.into_iter().filter(|e| *e != Example::Sessions) {
        for mpi in Mpi::all() {
            assert!(example.supported_by(mpi), "{example} under {mpi}");
        }
    }
}

fn slow_runs_to_completion(mpi: Mpi) {
    let t = Instant::now();
    let mut job = Job::builder(mpi, Example::Slow).start();
    let started = job.processes().to_vec();
    let status = job.wait_exit(Duration::from_secs(60));
    let output = job.output();
    assert!(status.success(), "slow under {mpi} exited {status}\n{output}");
    assert_eq!(output.stdout.matches("MPIQ-READY").count(), 4, "{output}");
    eprintln!("slow x4 under {mpi}: ran to completion in {:.2?}", t.elapsed());
    drop(job);
    assert_all_gone(&started, GONE);
}

#[test]
fn openmpi_slow_control_exits_0() {
    slow_runs_to_completion(Mpi::OpenMpi);
}

#[test]
fn mpich_slow_control_exits_0() {
    slow_runs_to_completion(Mpi::Mpich);
}

/// Reads `MPIR_dll_name` from rank 1 with a real gdb and checks it names `expected`.
fn gdb_reads_dll_name(mpi: Mpi, expected: &Path) {
    gdb::require_ptrace();
    let job = Job::builder(mpi, Example::Ring).nprocs(2).start();
    let pid = job.pid_of(1);
    let name = gdb::print_c_string(pid, "(char *) &MPIR_dll_name").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(Path::new(&name), expected, "MPIR_dll_name of {mpi}");
    assert!(expected.is_file(), "{} exists", expected.display());
    // gdb detached: the rank runs on, untraced.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !Job::is_running(pid) {
        assert!(
            Instant::now() < deadline,
            "rank 1 (pid {pid}) still stopped or traced after gdb"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn openmpi_gdb_reads_mpir_dll_name() {
    gdb_reads_dll_name(
        Mpi::OpenMpi,
        &Mpi::OpenMpi.debug_library().expect("has a debug library"),
    );
}

#[test]
fn mpich_gdb_reads_mpir_dll_name() {
    gdb_reads_dll_name(Mpi::Mpich, &Mpi::Mpich.debug_library().expect("has a debug library"));
}

/// Debian's stripped Open MPI (for later error-case tests) runs under the harness too, and
/// `&MPIR_dll_name` still reads without debug info.
#[test]
fn debian_openmpi_runs_and_names_its_dll() {
    gdb_reads_dll_name(
        Mpi::DebianOpenMpi,
        &Mpi::DebianOpenMpi.debug_library().expect("has a debug library"),
    );
}

#[test]
fn a_job_that_aborts_before_ready_is_an_error_with_its_output() {
    // named_comms needs at least 4 ranks and calls MPI_Abort with fewer.
    for mpi in Mpi::all() {
        let t = Instant::now();
        let err = Job::builder(mpi, Example::NamedComms)
            .nprocs(2)
            .ready_timeout(Duration::from_secs(30))
            .try_start()
            .expect_err("a 2-rank named_comms must fail");
        match &err {
            JobError::ExitedEarly { status, ready, .. } => {
                assert!(!status.success(), "{err}");
                assert!(ready.is_empty(), "{err}");
                // The rank's own message ("needs at least 4 ranks") is not asserted: Open MPI
                // 4.1.4 sometimes loses all output of a job that calls MPI_Abort (its
                // show_help forwarding fails with "Data unpack would read past end of buffer").
                assert!(err.to_string().contains("--- stderr ---"), "{err}");
            }
            other => panic!("expected ExitedEarly under {mpi}, got: {other}"),
        }
        assert!(t.elapsed() < Duration::from_secs(30), "noticed early exit under {mpi}");
    }
}

#[test]
fn a_ready_timeout_kills_the_job_and_reports_the_output() {
    // deadlock's ranks are ready in well under a second; a zero timeout cannot be met.
    let err = Job::builder(Mpi::OpenMpi, Example::Deadlock)
        .ready_timeout(Duration::ZERO)
        .try_start()
        .expect_err("a zero timeout fails");
    assert!(matches!(err, JobError::ReadyTimeout { .. }), "{err}");
    assert!(err.to_string().contains("--- stdout ---"), "{err}");
}

#[test]
fn builds_are_cached_and_land_in_the_target_dir() {
    let exe = build_example(Mpi::Mpich, Example::Ring);
    let again = build_example(Mpi::Mpich, Example::Ring);
    assert_eq!(exe, again);
    assert!(exe.ends_with("mpiq-examples/mpich-4.0.2/ring"), "{}", exe.display());
    assert!(exe.is_file());
}

#[test]
#[should_panic(expected = "Open MPI 4.1 does not implement MPI-4 Sessions")]
fn building_sessions_with_open_mpi_panics_with_the_reason() {
    build_example(Mpi::OpenMpi, Example::Sessions);
}

#[test]
fn a_panicking_test_still_kills_its_job() {
    let mut started = Vec::new();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let job = Job::builder(Mpi::OpenMpi, Example::Ring).nprocs(2).start();
        started = job.processes().to_vec();
        panic!("a simulated test failure while the job runs");
    }));
    assert!(result.is_err());
    assert!(started.len() >= 3, "starter and two ranks recorded: {started:?}");
    assert_all_gone(&started, GONE);
}
