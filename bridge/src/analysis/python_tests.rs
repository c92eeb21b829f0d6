//! The verdict of Python MPI jobs' shapes (issue 17), end to end through
//! [`analyze`]: a probe cycle (mpi4py's `comm.recv`), a rank that left its
//! script for `MPI_Finalize`.

use super::testutil::*;
use super::*;
use crate::snapshot::model::{Frame, MpiCall, ProcessSnapshot, Stacks, Status, ThreadStack};

const LIBMPI: &str = "/opt/mpi/lib/libmpi.so.40";
const LIBPY: &str = "/usr/lib/libpython3.11.so.1.0";

fn native(function: &str, object: &str) -> Frame {
    Frame {
        pc: "0x1".into(),
        function: Some(function.into()),
        object: Some(object.into()),
        ..Frame::default()
    }
}

fn py(function: &str, line: u32) -> Frame {
    Frame {
        pc: "0x2".into(),
        function: Some(function.into()),
        file: Some("/w/solver.py".into()),
        line: Some(line),
        offset: None,
        python: true,
        ..Frame::default()
    }
}

/// A Python thread in `entry`, called through mpi4py's wrapper `pyx` from
/// `solve` at `line`.
fn in_python(entry: &str, pyx: &str, line: u32) -> ThreadStack {
    ThreadStack {
        tid: 1,
        frames: vec![
            native("opal_progress", LIBMPI),
            native(entry, LIBMPI),
            native(pyx, "/v/mpi4py/MPI.cpython-311-x86_64-linux-gnu.so"),
            py("solve", line),
            py("<module>", 30),
            native("_PyEval_EvalFrameDefault", LIBPY),
            native("Py_RunMain", LIBPY),
            native("main", "/usr/bin/python3.11"),
        ],
        ..ThreadStack::default()
    }
}

/// A Python thread past its script, in Open MPI's `ompi_mpi_finalize`.
fn exiting() -> ThreadStack {
    ThreadStack {
        tid: 1,
        frames: vec![
            native("usleep", "/lib/libc.so.6"),
            native("ompi_mpi_finalize", LIBMPI),
            native("call_ll_exitfuncs", LIBPY),
            native("Py_FinalizeEx", LIBPY),
            native("Py_RunMain", LIBPY),
            native("main", "/usr/bin/python3.11"),
        ],
        ..ThreadStack::default()
    }
}

fn with(mut p: ProcessSnapshot, thread: ThreadStack, call: MpiCall) -> ProcessSnapshot {
    p.stacks = Some(Stacks {
        threads: vec![thread],
        calls: vec![call],
        ..Stacks::default()
    });
    p
}

fn call(name: &str) -> MpiCall {
    MpiCall {
        tid: 1,
        frame: 1,
        call: name.into(),
        communicator: Some("0".into()),
        ..MpiCall::default()
    }
}

fn mprobe(rank: i32, n: i64, sends: Vec<crate::snapshot::model::Operation>) -> ProcessSnapshot {
    let mut c = call("mprobe");
    c.peer = Some((i64::from(rank) + 1) % n);
    c.tag = Some(7);
    with(
        process(rank, vec![world(n, i64::from(rank)).sends(sends)]),
        in_python("PMPI_Mprobe", "__pyx_pw_6mpi4py_3MPI_4Comm_71recv", 27),
        c,
    )
}

#[test]
fn a_cycle_of_probes_is_a_deadlock_once_a_second_sample_sees_it() {
    let s = snapshot((0..3).map(|r| mprobe(r, 3, Vec::new())).collect());
    let a = analyze(&s, Some(&s));
    assert_eq!(a.verdict, Verdict::Deadlock, "{a:#?}");
    assert_eq!(a.cycles, vec![vec![0, 1, 2]]);
    assert!(
        a.summary.starts_with(
            "deadlock: rank 0 waits in comm.recv(source=1, tag=7) at solver.py:27 (MPI_Mprobe on MPI_COMM_WORLD)"
        ),
        "{}",
        a.summary
    );
    // One sample cannot tell a probe that is returning: never "no deadlock".
    assert_ne!(analyze(&s, None).verdict, Verdict::NoDeadlock);
}

#[test]
fn a_probe_whose_source_has_its_message_pending_is_served() {
    // Rank 1 has sent rank 0 its message (pending in its queue); rank 0 can
    // match it, then send to rank 2 ...: no cycle holds.
    let mut ps: Vec<ProcessSnapshot> = (0..3).map(|r| mprobe(r, 3, Vec::new())).collect();
    ps[1] = mprobe(1, 3, vec![send(0, 7, Status::Pending)]);
    let s = snapshot(ps);
    let a = analyze(&s, Some(&s));
    assert_ne!(a.verdict, Verdict::Deadlock, "{a:#?}");
}

#[test]
fn a_rank_in_finalize_has_left_the_collectives_waiting_for_it() {
    let bcast = |rank: i32| {
        let mut c = call("bcast");
        c.root = Some(1);
        with(
            process(rank, vec![world(3, i64::from(rank))]),
            in_python("PMPI_Bcast", "__pyx_pw_6mpi4py_3MPI_4Comm_281bcast", 8),
            c,
        )
    };
    let mut fin = call("finalize");
    fin.communicator = None;
    fin.python_exit_status = Some(1);
    // MPICH's debug library lists no communicator once finalizing.
    let s = snapshot(vec![bcast(0), with(process(1, Vec::new()), exiting(), fin), bcast(2)]);
    let a = analyze(&s, Some(&s));
    assert_eq!(a.verdict, Verdict::Deadlock, "{a:#?}");
    assert!(
        a.summary.starts_with(
            "deadlock: ranks 0 and 2 wait in comm.bcast(root=1) at solver.py:8 (MPI_Bcast on MPI_COMM_WORLD); \
             rank 1 exited its script with an uncaught exception and waits in MPI_Finalize"
        ),
        "{}",
        a.summary
    );
    // A rank still computing is no deadlock for the one in MPI_Finalize.
    let computing = ThreadStack {
        tid: 1,
        frames: vec![
            py("work", 3),
            native("_PyEval_EvalFrameDefault", LIBPY),
            native("main", "/usr/bin/python3.11"),
        ],
        ..ThreadStack::default()
    };
    let mut p0 = process(0, vec![world(2, 0)]);
    p0.stacks = Some(Stacks {
        threads: vec![computing],
        ..Stacks::default()
    });
    let mut fin = call("finalize");
    fin.communicator = None;
    let s = snapshot(vec![p0, with(process(1, Vec::new()), exiting(), fin)]);
    assert_eq!(analyze(&s, Some(&s)).verdict, Verdict::NoDeadlock);
}
