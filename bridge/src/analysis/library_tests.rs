//! The verdict's words for MPI calls made through another library
//! (issue 25): synthetic stacks as gdb showed them on Debian's parallel
//! HDF5, end to end through [`analyze`].

use super::testutil::*;
use super::*;
use crate::snapshot::model::{Frame, MpiCall, ProcessSnapshot, Snapshot, Stacks, ThreadStack};

const LIBMPI: &str = "/usr/lib/x86_64-linux-gnu/libmpi.so.40";
const HDF5: &str = "/usr/lib/x86_64-linux-gnu/libhdf5_openmpi.so.103";
const APP: &str = "/opt/u/app";

/// [`testutil::frame`](super::testutil::frame), its file by its path.
fn frame(function: &str, object: &str, line: Option<u32>) -> Frame {
    Frame {
        file: line.map(|_| "/opt/u/app.c".into()),
        ..super::testutil::frame(function, object, line)
    }
}

/// A rank in MPI call `entry` made by HDF5's `inner`, inside `api` that the
/// application's `caller` called at `line`.
fn through_hdf5(rank: i32, entry: &str, inner: &str, api: &str, caller: &str, line: u32) -> ProcessSnapshot {
    let mut p = process(rank, vec![world(4, i64::from(rank))]);
    let tid = 100 + u64::try_from(rank).unwrap();
    let call = crate::stacks::canonical(entry).unwrap();
    p.stacks = Some(Stacks {
        threads: vec![ThreadStack {
            tid,
            frames: vec![
                frame("ompi_request_default_wait", LIBMPI, None),
                frame(entry, LIBMPI, None),
                frame(inner, HDF5, None),
                frame(api, HDF5, None),
                frame(caller, APP, Some(line)),
                frame("main", APP, Some(90)),
                frame("_start", APP, None),
            ],
            ..ThreadStack::default()
        }],
        calls: vec![MpiCall {
            tid,
            frame: 1,
            call,
            communicator: Some("0".into()),
            ..MpiCall::default()
        }],
        ..Stacks::default()
    });
    p
}

/// hdf5_skip on 4 ranks: 0-2 in `H5Dwrite` from `write_field`, 3 in
/// `H5Fclose` from `finish`.
fn hdf5_skip() -> Snapshot {
    let mut ps: Vec<ProcessSnapshot> = (0..3)
        .map(|r| {
            through_hdf5(
                r,
                "PMPI_Allreduce",
                "H5D__mpio_opt_possible",
                "H5Dwrite",
                "write_field",
                41,
            )
        })
        .collect();
    ps.push(through_hdf5(
        3,
        "PMPI_Barrier",
        "H5AC__run_sync_point",
        "H5Fclose",
        "finish",
        57,
    ));
    snapshot(ps)
}

#[test]
fn the_verdict_names_the_applications_calls_into_the_library() {
    let s = hdf5_skip();
    // The queues are readable: a collective mismatch on MPI_COMM_WORLD, a
    // cycle in one sample.
    let a = analyze(&s, None);
    assert_eq!(a.verdict, Verdict::Deadlock, "{a:#?}");
    assert!(
        a.summary.starts_with(
            "deadlock: ranks 0-2 are in H5Dwrite (write_field, app.c:41) > MPI_Allreduce on MPI_COMM_WORLD; rank \
             3 is in H5Fclose (finish, app.c:57) > MPI_Barrier on MPI_COMM_WORLD — "
        ),
        "{}",
        a.summary
    );
    assert!(!a.summary.contains("H5AC__"), "{}", a.summary);
    let w3 = &a.where_[3];
    assert_eq!(
        w3.text,
        "is in H5Fclose (finish, app.c:57) > MPI_Barrier on MPI_COMM_WORLD"
    );
    assert_eq!(w3.through.len(), 1);
    let via = &w3.through[0];
    assert_eq!(
        (
            via.mpi_call.as_str(),
            via.library_call.as_str(),
            via.function.as_str(),
            via.line
        ),
        ("MPI_Barrier", "H5Fclose", "finish", Some(57))
    );
    assert_eq!(via.library.as_deref(), Some("libhdf5_openmpi.so.103"));
    // A rank that moved is said to have moved in the same words.
    let mut before = s.clone();
    before.processes[3] = through_hdf5(3, "PMPI_Barrier", "H5AC__run_sync_point", "H5Fflush", "checkpoint", 50);
    let (now, then) = (
        calls::places(&s, &job::Job::new(&s)),
        calls::places(&before, &job::Job::new(&before)),
    );
    let moved = calls::moved(&now, &then);
    assert_eq!(
        moved.get(&3).map(String::as_str),
        Some(
            "it moved from H5Fflush (checkpoint, app.c:50) > MPI_Barrier to H5Fclose (finish, app.c:57) > MPI_Barrier"
        )
    );
    // Calls made by the application itself list nothing.
    let direct = analyze(&snapshot(vec![process(0, vec![world(1, 0)])]), None);
    assert!(direct.where_.iter().all(|w| w.through.is_empty()));
}
