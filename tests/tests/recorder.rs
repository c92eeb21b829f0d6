//! mpiq's flight recorder (issue 28, `recorder/`) on real jobs: the deadlock example (every
//! rank posts `MPI_Irecv` from its right neighbour, tag 400 + rank, 16 ints, then waits in
//! `MPI_Wait`) preloaded with the recorder, under the test bed's Open MPI (built from source)
//! and two packaged MPIs that give no queues (Debian's Open MPI, PyPI's MPICH wheel). One
//! library serves both ABIs. `mpiq job` reads each rank's recorder from the live processes,
//! and `mpiq core` from a core file of one rank: the pending receive with its peer and tag,
//! the `MPI_Wait` the rank is still in, on that request.
//!
//! And `recorder/check.c`, which reads the recorder's tables from inside a 2-rank job, under
//! Debian's Open MPI and PyPI's MPICH: what the wait and test calls mark and count, the peer
//! and tag of `MPI_Mrecv`, the persistent requests' states, `MPI_Waitany`'s one completion.

use std::ffi::OsString;
use std::time::Duration;

use mpiq_tests::example::compile;
use mpiq_tests::fixtures::WorkDir;
use mpiq_tests::frontends::{cli, cli_command, cli_cores};
use mpiq_tests::run::run;
use mpiq_tests::{build_recorder, examples_build_dir, examples_source_dir, gdb, Example, Job, Mpi};
use serde_json::Value;

/// The recorder of one process of `mpiq job --json` or `mpiq core --json`, checked against
/// what the deadlock example did as rank `r` of `n`.
fn check_rank(what: &str, p: &Value, r: i64, n: i64, abi: &str) {
    let rec = &p["recorder"];
    assert!(rec.is_object(), "{what}: rank {r} has no recorder: {p:#}");
    assert_eq!(rec["mpi"], abi, "{what}: {rec:#}");
    assert_eq!(rec["initialized"], true, "{what}: {rec:#}");
    assert_eq!(
        (rec["world_rank"].as_i64(), rec["world_size"].as_i64()),
        (Some(r), Some(n)),
        "{what}"
    );
    assert_eq!(rec["pending_complete"], true, "{what}: {rec:#}");
    let pending = rec["pending"].as_array().expect("pending");
    assert_eq!(pending.len(), 1, "{what}: rank {r}: {rec:#}");
    let q = &pending[0];
    assert_eq!(q["call"], "irecv", "{what}: {q:#}");
    assert_eq!(q["peer"].as_i64(), Some((r + 1) % n), "{what}: {q:#}");
    assert_eq!(q["tag"].as_i64(), Some(400 + r), "{what}: {q:#}");
    assert_eq!(
        (q["count"].as_i64(), q["type_size"].as_i64()),
        (Some(16), Some(4)),
        "{what}: {q:#}"
    );
    let world = rec["comms"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["world"] == true))
        .unwrap_or_else(|| panic!("{what}: no MPI_COMM_WORLD among {rec:#}"));
    assert_eq!(q["comm"], world["handle"], "{what}");
    assert_eq!(
        (world["rank"].as_i64(), world["size"].as_i64()),
        (Some(r), Some(n)),
        "{what}"
    );
    let calls = rec["calls"].as_array().expect("calls");
    let names: Vec<&str> = calls.iter().filter_map(|c| c["call"].as_str()).collect();
    assert_eq!(names.first(), Some(&"init"), "{what}: {names:?}");
    let last = calls.last().expect("a call");
    assert_eq!(last["call"], "wait", "{what}: {names:?}");
    assert!(
        last.get("end_ns").is_none(),
        "{what}: the rank is still in MPI_Wait: {last:#}"
    );
    assert_eq!(last["request"], q["request"], "{what}: it waits on the pending receive");
    assert_eq!(rec["torn"].as_u64().unwrap_or(0), 0, "{what}");
}

/// `mpiq job --json` of a live job of `n` ranks that ran the deadlock example: every rank's
/// recorder checked ([`check_rank`]); the processes.
fn check_live(what: &str, job: &Job, n: usize, abi: &str) -> Vec<Value> {
    let r = cli(&["job", "--starter", &job.starter_pid().to_string(), "--json"]);
    let v = r.json_exact();
    let procs = v["processes"].as_array().expect("processes").clone();
    assert_eq!(procs.len(), n, "{what}: {}", r.all());
    for p in &procs {
        let rank = p["world_rank"]
            .as_i64()
            .unwrap_or_else(|| panic!("{what}: no rank: {p:#}"));
        check_rank(&format!("{what}, live"), p, rank, n as i64, abi);
    }
    procs
}

fn recorded_deadlock(mpi: Mpi, abi: &str) {
    gdb::require_ptrace();
    let lib = build_recorder();
    let n = 3;
    let job = Job::builder(mpi, Example::Deadlock)
        .nprocs(n)
        .env("LD_PRELOAD", lib.as_os_str())
        .start();
    check_live(&mpi.to_string(), &job, n, abi);

    let dir = std::env::temp_dir().join(format!("mpiq-recorder-core-{mpi}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let core = job.gcore(1, &dir);
    let c = cli_cores(&[core], &["--json"]);
    let _ = std::fs::remove_dir_all(&dir);
    let v = c.json_exact();
    check_rank(&format!("{mpi}, core file"), &v["processes"][0], 1, n as i64, abi);
}

#[test]
fn a_recorded_deadlock_under_the_test_beds_open_mpi() {
    recorded_deadlock(Mpi::OpenMpi, "open_mpi");
}

#[test]
fn a_recorded_deadlock_under_debians_open_mpi() {
    recorded_deadlock(Mpi::DebianOpenMpi, "open_mpi");
}

#[test]
fn a_recorded_deadlock_under_pypis_mpich() {
    recorded_deadlock(Mpi::PypiMpich, "mpich");
}

#[test]
fn a_recorded_deadlock_under_the_test_beds_mpich() {
    recorded_deadlock(Mpi::Mpich, "mpich");
}

/// `recorder/check.c` built with `mpi`'s `mpicc` and run on 2 ranks with the recorder preloaded,
/// as a job of the harness (the example only names it: the program is check.c's, which prints
/// the READY lines and exits by itself).
fn check_program(mpi: Mpi) {
    let lib = build_recorder();
    let source = examples_source_dir().join("../recorder/check.c");
    let exe = examples_build_dir(mpi).join("recorder_check");
    let args: Vec<OsString> = vec!["-g".into(), "-O0".into(), "-Wall".into(), source.into(), "-ldl".into()];
    compile(&mpi.mpicc(), &args, &exe, &format!("recorder/check.c with {mpi}"));
    let mut job = Job::builder(mpi, Example::Slow)
        .program(&exe)
        .nprocs(2)
        .args(Vec::<OsString>::new())
        .env("LD_PRELOAD", lib.as_os_str())
        .start();
    let status = job.wait_exit(Duration::from_secs(120));
    let out = job.output();
    assert!(
        status.success() && out.stdout.contains("recorder check: ok"),
        "{mpi}: recorder/check.c: {status}\n{out}"
    );
}

/// Under the packaged MPIs of both ABIs and the test bed's Open MPI and MPICH (those
/// `mpiq-bench recorder` measures).
#[test]
fn recorder_check_program() {
    for mpi in [Mpi::DebianOpenMpi, Mpi::PypiMpich, Mpi::OpenMpi, Mpi::Mpich] {
        check_program(mpi);
    }
}

/// `examples/fortran/p2p_cycle.f90` (the deadlock example in Fortran, `use mpi`) under Debian's
/// Open MPI, whose Fortran library calls `PMPI_X`, past the C wrappers: the recorder's Fortran
/// entry points (`recorder/fortran.c`) record its calls, each once. (The test bed's MPIs are
/// built without Fortran, and PyPI's MPICH wheel ships no Fortran library or compiler
/// wrapper.)
#[test]
fn a_recorded_fortran_deadlock_under_debians_open_mpi() {
    gdb::require_ptrace();
    let mpi = Mpi::DebianOpenMpi;
    let lib = build_recorder();
    let source = examples_source_dir().join("fortran/p2p_cycle.f90");
    let exe = examples_build_dir(mpi).join("fortran").join("p2p_cycle");
    let args: Vec<OsString> = vec!["-g".into(), "-O0".into(), "-Wall".into(), source.into()];
    compile(
        std::path::Path::new("/usr/bin/mpif90.openmpi"),
        &args,
        &exe,
        &format!("examples/fortran/p2p_cycle.f90 with {mpi} (scripts/testbed installs gfortran)"),
    );
    let n = 3;
    let job = Job::builder(mpi, Example::Deadlock)
        .program(&exe)
        .nprocs(n)
        .env("LD_PRELOAD", lib.as_os_str())
        .start();
    let procs = check_live("Fortran", &job, n, "open_mpi");
    let one = procs.iter().find(|p| p["world_rank"] == 1).expect("rank 1");
    let rec = &one["recorder"];
    let names: Vec<&str> = rec["calls"]
        .as_array()
        .expect("calls")
        .iter()
        .filter_map(|c| c["call"].as_str())
        .collect();
    assert_eq!(names, ["init", "irecv", "wait"], "each Fortran call once: {rec:#}");
    let q = &rec["pending"][0];
    assert_eq!((q["peer"].as_i64(), q["tag"].as_i64()), (Some(2), Some(401)), "{q:#}");
}

/// The livelock example (every rank calls `MPI_Iprobe` on `MPI_COMM_WORLD` in a tight loop,
/// some hundred nanoseconds a call, much of it in the recorder's own code around the MPI's)
/// under the test bed's MPICH, preloaded with the recorder as mpiq ships it (no debug
/// information: `mpiq setup recorder`'s copy): in each of 60 dumps of its 4 ranks at once, every
/// rank's call has its communicator, from its frames or from the recorder's running record of
/// it. A rank stopped in the recorder's code outside any running record (before its record is
/// published, after it ended) would show its call with neither: mpiq lets such a thread run out
/// of the recorder before reading it (`cli/src/ptrace.rs`'s `settle`), and the recorder reads
/// its clock once the record is published. Without both, about 1 rank-sample in 80 was such a
/// one here (`mpiq run --detect` once named a rank of this job without its communicator).
#[test]
fn polling_ranks_keep_their_communicator() {
    const SAMPLES: usize = 60;
    gdb::require_ptrace();
    let mpi = Mpi::Mpich;
    let cache = WorkDir::new("polling-ranks");
    let mut setup = cli_command(&["setup", "recorder"]);
    setup.env("XDG_CACHE_HOME", cache.path("cache"));
    let out = run(setup);
    let lib = out
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("export LD_PRELOAD="))
        .find_map(|l| l.split('$').next())
        .unwrap_or_else(|| panic!("mpiq setup recorder gave no LD_PRELOAD line: {}", out.all()))
        .to_string();
    let n = 4;
    let job = Job::builder(mpi, Example::Livelock)
        .nprocs(n)
        .env("LD_PRELOAD", &lib)
        .start();
    let pids = job
        .ranks()
        .iter()
        .map(|r| r.pid.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let mut seen = 0;
    for s in 0..SAMPLES {
        let r = cli(&["queues", "--pid", &pids, "--format", "json"]);
        let v = r.json_exact();
        for p in v["processes"].as_array().expect("processes") {
            let running: Vec<(u64, &str)> = p["recorder"]["calls"]
                .as_array()
                .unwrap_or_else(|| panic!("sample {s}: no recorder: {p:#}"))
                .iter()
                .filter(|c| c["end_ns"].is_null())
                .filter_map(|c| Some((c["tid"].as_u64()?, c["call"].as_str()?)))
                .collect();
            for c in p["stacks"]["calls"].as_array().into_iter().flatten() {
                assert_eq!(c["call"], "iprobe", "sample {s}: {c:#}");
                seen += 1;
                let tid = c["tid"].as_u64().expect("tid");
                assert!(
                    c["communicator"].is_string() || running.contains(&(tid, "iprobe")),
                    "sample {s}: thread {tid}'s MPI_Iprobe has no communicator and the recorder no \
                     running record of it:\n{c:#}\nthe thread: {:#}\nthe recorder: {:#}",
                    p["stacks"]["threads"],
                    p["recorder"]["calls"]
                );
            }
        }
    }
    // Most dumps catch every rank in its MPI_Iprobe (the rest in main's loop, between two).
    assert!(
        seen > SAMPLES * n / 2,
        "only {seen} calls seen in {SAMPLES} dumps of {n} ranks"
    );
}
