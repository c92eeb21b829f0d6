//! Issue 25, "in the application's terms": hangs inside real third-party MPI
//! libraries from the distribution, built on Debian's Open MPI (stacks only:
//! no readable queues). `mpiq job` names, beside each MPI call, the
//! library's function the application called and the application's own
//! frame with its line, for the ranks that do not match, in the summary, the
//! where-lines and the JSON `where` entries.
//!
//! - `hdf5_skip` (parallel HDF5, `libhdf5-openmpi-dev`): ranks 0-2 in a
//!   collective `H5Dwrite` from `write_field`, rank 3 skipped it and is in
//!   `H5Fclose` from `finish`. HDF5 makes the MPI calls (an `MPI_Allreduce`
//!   of its collective I/O, an `MPI_Barrier` of its metadata cache's sync
//!   point), which never match: every rank blocked in MPI, in the same
//!   place with the same calling frames in two samples, is a deadlock by the
//!   stall rule.
//! - `blacs_mismatch` (ScaLAPACK's BLACS, `libscalapack-openmpi-dev`):
//!   ranks 0-2 in `Cdgsum2d` from `sum_norms` (BLACS's `MPI_Allreduce`),
//!   rank 3 in `Cblacs_barrier` from `sync_grid`, which tail-calls
//!   `MPI_Barrier`: its stack holds no frame of BLACS, so the application's
//!   frame is the MPI call's caller and the words are those of a direct
//!   call.
//!
//! The expected words are built from the examples' sources (the lines
//! marked `mpiq: ...`), not from what mpiq printed.

use std::time::Duration;

use mpiq_tests::frontends::{cli as mpiq, snapshot, FrontEnd};
use mpiq_tests::{gdb, Example, Job, Mpi};
use serde_json::Value;

/// The 1-based line of `example`'s source marked `/* mpiq: MARK */`.
fn line_of(example: Example, mark: &str) -> usize {
    let source = std::fs::read_to_string(example.source()).expect("example source");
    let marker = format!("/* mpiq: {mark} */");
    1 + source
        .lines()
        .position(|l| l.contains(&marker))
        .unwrap_or_else(|| panic!("{example} has no line marked {marker}"))
}

/// `mpiq job --json` on a job's starter: the JSON and the exit status.
fn job_json(job: &Job) -> (Value, Option<i32>, String) {
    let r = mpiq(&["job", "--starter", &job.starter_pid().to_string(), "--json"]);
    (r.json_exact(), r.code(), r.all())
}

/// A rank's application call made through a library, as its JSON `where`
/// entry gives it: (MPI call, library call, library object, function,
/// line). The object's name is cut after its major version: the front ends
/// name it by the path they were given (`.so.103`) or the file's own
/// (`.so.103.3.1`).
fn through_of(a: &Value, rank: i64) -> Vec<(String, String, String, String, i64)> {
    let entry = a["where"]
        .as_array()
        .and_then(|w| w.iter().find(|e| e["rank"] == rank))
        .unwrap_or_else(|| panic!("no where entry of rank {rank}: {a:#}"));
    entry["through"]
        .as_array()
        .map(|v| {
            v.iter()
                .map(|t| {
                    let library = t["library"].as_str().unwrap_or_default();
                    let major = library
                        .find(".so.")
                        .map(|i| {
                            let rest = &library[i + 4..];
                            let end = rest.find('.').unwrap_or(rest.len());
                            &library[..i + 4 + end]
                        })
                        .unwrap_or(library);
                    (
                        t["mpi_call"].as_str().unwrap_or_default().to_string(),
                        t["library_call"].as_str().unwrap_or_default().to_string(),
                        major.to_string(),
                        t["function"].as_str().unwrap_or_default().to_string(),
                        t["line"].as_i64().unwrap_or(-1),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The where-line of every process of the JSON, by rank.
fn where_lines(v: &Value) -> Vec<(i64, String)> {
    let mut out: Vec<(i64, String)> = v["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .map(|p| {
            (
                p["world_rank"].as_i64().unwrap_or(-1),
                p["stacks"]["where"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

fn start(example: Example) -> Job {
    gdb::require_ptrace();
    let job = Job::builder(Mpi::DebianOpenMpi, example).start();
    // READY comes right before each rank's last call: let every rank reach
    // the MPI call inside the library.
    std::thread::sleep(Duration::from_millis(1500));
    job
}

#[test]
fn hdf5_skipped_collective_names_the_applications_calls() {
    let ex = Example::Hdf5Skip;
    let job = start(ex);
    let (write, close) = (line_of(ex, "write"), line_of(ex, "close"));
    let (v, code, out) = job_json(&job);
    let a = &v["analysis"];
    let summary = a["summary"].as_str().unwrap_or_default();
    eprintln!("hdf5_skip: {summary}");
    assert_eq!(a["verdict"], "deadlock", "{a:#}");
    assert_eq!(code, Some(3), "{out}");
    assert_eq!(a["evidence"], "stacks", "{a:#}");
    for w in [
        format!("ranks 0-2 are in H5Dwrite (write_field, hdf5_skip.c:{write}) > MPI_Allreduce"),
        format!("rank 3 is in H5Fclose (finish, hdf5_skip.c:{close}) > MPI_Barrier"),
    ] {
        assert!(summary.contains(&w), "no '{w}' in: {summary}");
    }
    // HDF5's internal callers no longer stand for the application's.
    assert!(!summary.contains("called from H5"), "{summary}");
    for r in 0..3 {
        assert_eq!(
            through_of(a, r),
            [(
                "MPI_Allreduce".to_string(),
                "H5Dwrite".to_string(),
                "libhdf5_openmpi.so.103".to_string(),
                "write_field".to_string(),
                write as i64
            )],
            "rank {r}"
        );
    }
    assert_eq!(
        through_of(a, 3),
        [(
            "MPI_Barrier".to_string(),
            "H5Fclose".to_string(),
            "libhdf5_openmpi.so.103".to_string(),
            "finish".to_string(),
            close as i64
        )]
    );
    let mut want: Vec<(i64, String)> = (0..3)
        .map(|r| {
            (
                r,
                format!("in H5Dwrite (write_field, hdf5_skip.c:{write}) > MPI_Allreduce"),
            )
        })
        .collect();
    want.push((3, format!("in H5Fclose (finish, hdf5_skip.c:{close}) > MPI_Barrier")));
    assert_eq!(where_lines(&v), want);

    // gdb and lldb give the same where-line on a rank of each side.
    for (rank, words) in [(0, &want[0].1), (3, &want[3].1)] {
        let pid = job.pid_of(rank);
        for fe in [FrontEnd::Gdb, FrontEnd::Lldb] {
            let s = snapshot(fe, pid, "--stacks");
            let got = s["processes"][0]["stacks"]["where"].as_str().unwrap_or_default();
            assert_eq!(got, words, "{fe:?} on rank {rank}");
        }
    }
}

#[test]
fn blacs_mismatched_collective_names_the_applications_calls() {
    let ex = Example::BlacsMismatch;
    let job = start(ex);
    let (sum, barrier) = (line_of(ex, "sum"), line_of(ex, "barrier"));
    let (v, code, out) = job_json(&job);
    let a = &v["analysis"];
    let summary = a["summary"].as_str().unwrap_or_default();
    eprintln!("blacs_mismatch: {summary}");
    assert_eq!(a["verdict"], "deadlock", "{a:#}");
    assert_eq!(code, Some(3), "{out}");
    for w in [
        format!("ranks 0-2 are in Cdgsum2d (sum_norms, blacs_mismatch.c:{sum}) > MPI_Allreduce"),
        // Cblacs_barrier tail-calls MPI_Barrier: no BLACS frame is left,
        // the call reads as the application's own.
        format!("rank 3 is in MPI_Barrier (blacs_mismatch.c:{barrier})"),
    ] {
        assert!(summary.contains(&w), "no '{w}' in: {summary}");
    }
    for r in 0..3 {
        assert_eq!(
            through_of(a, r),
            [(
                "MPI_Allreduce".to_string(),
                "Cdgsum2d".to_string(),
                "libscalapack-openmpi.so.2".to_string(),
                "sum_norms".to_string(),
                sum as i64
            )],
            "rank {r}"
        );
    }
    assert!(through_of(a, 3).is_empty(), "{a:#}");
    let lines = where_lines(&v);
    assert_eq!(
        lines[3],
        (
            3,
            format!("in MPI_Barrier, called from sync_grid (blacs_mismatch.c:{barrier})")
        )
    );
    for (r, l) in &lines[..3] {
        assert_eq!(
            l,
            &format!("in Cdgsum2d (sum_norms, blacs_mismatch.c:{sum}) > MPI_Allreduce"),
            "rank {r}"
        );
    }
}
