//! Tests of the merged stacks (`tree.rs`), also used by the renderers'.

use super::*;
use crate::snapshot::model::{Queue, Queues, Stacks};

pub(crate) const LIBC: &str = "/lib/x86_64-linux-gnu/libc.so.6";
pub(crate) const LIBMPI: &str = "/opt/ompi/lib/libmpi.so.40";
pub(crate) const APP: &str = "/opt/u/barrier_vs_recv";

pub(crate) fn frame(function: &str, object: &str, at: Option<u32>) -> Frame {
    Frame {
        pc: "0x1".into(),
        function: Some(function.into()),
        object: Some(object.into()),
        file: at.map(|_| "/opt/u/barrier_vs_recv.c".into()),
        line: at,
        inlined: false,
        offset: None,
        python: false,
    }
}

fn start(mut inner: Vec<Frame>) -> Vec<Frame> {
    inner.extend([
        frame("__libc_start_call_main", LIBC, None),
        frame("__libc_start_main_impl", LIBC, None),
        frame("_start", APP, None),
    ]);
    inner
}

/// Rank 0's main thread: in `PMPI_Barrier`, called from main at line 54.
pub(crate) fn in_barrier(tid: u64, entry: &str) -> ThreadStack {
    ThreadStack {
        tid,
        frames: start(vec![
            frame("__poll", LIBC, None),
            frame("ompi_coll_base_barrier_intra", LIBMPI, None),
            frame(entry, LIBMPI, None),
            frame("main", APP, Some(54)),
        ]),
        ..ThreadStack::default()
    }
}

/// A main thread in `MPI_Recv`, called from exchange (line 35) from main.
pub(crate) fn in_recv(tid: u64) -> ThreadStack {
    ThreadStack {
        tid,
        frames: start(vec![
            frame("__poll", LIBC, None),
            frame("PMPI_Recv", LIBMPI, None),
            frame("exchange", APP, Some(35)),
            frame("main", APP, Some(48)),
        ]),
        ..ThreadStack::default()
    }
}

/// One of Open MPI's progress threads.
pub(crate) fn service(tid: u64) -> ThreadStack {
    ThreadStack {
        tid,
        frames: vec![
            frame("epoll_wait", LIBC, None),
            frame("progress_engine", "/opt/ompi/lib/libopen-pal.so.40", None),
            frame("start_thread", LIBC, None),
            frame("clone3", LIBC, None),
        ],
        ..ThreadStack::default()
    }
}

pub(crate) fn process(rank: i32, threads: Vec<ThreadStack>) -> ProcessSnapshot {
    ProcessSnapshot {
        communicators: vec![Communicator {
            id: "0".into(),
            name: "MPI_COMM_WORLD".into(),
            size: Some(4),
            local_rank: Some(i64::from(rank)),
            world_ranks: None,
            world_ranks_source: None,
            world_ranks_rejected: None,
            queues: Queues {
                sends: Queue::available(vec![]),
                receives: Queue::available(vec![]),
                unexpected: Queue::available(vec![]),
            },
        }],
        stacks: Some(Stacks {
            where_: Some(crate::stacks::where_words(&threads)),
            threads,
            ..Stacks::default()
        }),
        ..ProcessSnapshot::new(Some(100 + rank as u32), Some(rank), APP)
    }
}

/// barrier_vs_recv on 4 ranks: rank 0 in the barrier, the others in
/// MPI_Recv; two progress threads each.
pub(crate) fn barrier_vs_recv() -> Snapshot {
    let mut s = Snapshot::default();
    for r in 0..4u64 {
        let main = if r == 0 {
            in_barrier(1000, "PMPI_Barrier")
        } else {
            in_recv(1000 + r * 10)
        };
        let t = 1000 + r * 10;
        s.processes
            .push(process(r as i32, vec![main, service(t + 1), service(t + 2)]));
    }
    s
}

fn labels(nodes: &[StackNode]) -> Vec<&str> {
    nodes.iter().map(|n| n.label.as_str()).collect()
}

#[test]
fn compact_merges_down_to_the_mpi_call() {
    let t = StackTree::build(&barrier_vs_recv(), Mode::Compact);
    assert_eq!(labels(&t.roots), ["main"]);
    let main = &t.roots[0];
    assert_eq!(main.location, None);
    assert_eq!(main.ranks(), [0, 1, 2, 3]);
    // Sorted by the smallest rank: rank 0's barrier first.
    assert_eq!(labels(&main.children), ["MPI_Barrier", "exchange"]);
    let barrier = &main.children[0];
    assert_eq!(barrier.location.as_deref(), Some("barrier_vs_recv.c:54"));
    assert_eq!(barrier.tasks, [(0, 1000)]);
    assert!(barrier.children.is_empty());
    let recv = &main.children[1].children[0];
    assert_eq!(recv.label, "MPI_Recv");
    assert_eq!(recv.location.as_deref(), Some("barrier_vs_recv.c:35"));
    assert_eq!(recv.ranks(), [1, 2, 3]);
    assert_eq!((t.threads(), t.hidden_service_threads), (4, 8));
    assert_eq!(t.ranks(), [0, 1, 2, 3]);
    assert!(t.without_stacks.is_empty());
    assert_eq!(t.as_one_node().label, "main");
}

#[test]
fn every_spelling_of_an_entry_point_is_one_node() {
    let mut s = Snapshot::default();
    s.processes.push(process(0, vec![in_barrier(1, "PMPI_Barrier")]));
    s.processes.push(process(1, vec![in_barrier(2, "MPI_Barrier")]));
    let mut mpich = in_barrier(3, "internal_Barrier");
    mpich.frames[2].object = Some("/opt/mpich/lib/libmpi.so.12".into());
    mpich.frames[2].inlined = true;
    s.processes.push(process(2, vec![mpich]));
    let t = StackTree::build(&s, Mode::Compact);
    assert_eq!(labels(&t.roots[0].children), ["MPI_Barrier"]);
    assert_eq!(t.roots[0].children[0].ranks(), [0, 1, 2]);
}

#[test]
fn full_keeps_every_frame_and_the_runtime_threads_apart() {
    let t = StackTree::build(&barrier_vs_recv(), Mode::Full);
    assert_eq!(labels(&t.roots), ["_start", SERVICE_LABEL]);
    assert_eq!(t.hidden_service_threads, 0);
    assert_eq!(t.threads(), 12);
    assert_eq!(t.roots[1].tasks.len(), 8);
    let main = &t.roots[0].children[0].children[0].children[0];
    // Line mode: main at line 54 (rank 0) and at line 48 (the others).
    assert_eq!(labels(&t.roots[0].children[0].children[0].children), ["main", "main"]);
    assert_eq!(main.location.as_deref(), Some("barrier_vs_recv.c:54"));
    let mut leaf = main;
    let mut path = vec![];
    while let Some(c) = leaf.children.first() {
        path.push(c.label.as_str());
        leaf = c;
    }
    assert_eq!(path, ["PMPI_Barrier", "ompi_coll_base_barrier_intra", "__poll"]);
    assert_eq!(leaf.ending_tasks(), [(0, 1000)]);
    assert_eq!(t.as_one_node().label, ROOT_LABEL);
    assert_eq!(t.as_one_node().tasks.len(), 12);
}

#[test]
fn threads_of_a_multithreaded_rank_and_a_rank_without_stacks() {
    let mut s = barrier_vs_recv();
    // Rank 0 gets a second application thread, in MPI_Recv like the others.
    let mut worker = in_recv(1005);
    worker.frames.truncate(4);
    worker.frames.extend([
        frame("worker", APP, Some(20)),
        frame("start_thread", LIBC, None),
        frame("clone3", LIBC, None),
    ]);
    worker.frames.remove(3); // main
    if let Some(st) = s.processes[0].stacks.as_mut() {
        st.threads.push(worker);
    }
    let mut lost = process(4, vec![]);
    lost.stacks = Some(Stacks {
        missing: Some("ptrace refused".into()),
        ..Stacks::default()
    });
    s.processes.push(lost);
    let mut plain = process(5, vec![]);
    plain.stacks = None;
    s.processes.push(plain);
    let t = StackTree::build(&s, Mode::Compact);
    // The worker's stack starts at its own function, the runtime's start left out.
    assert_eq!(labels(&t.roots), ["main", "worker"]);
    assert_eq!(t.roots[1].tasks, [(0, 1005)]);
    assert_eq!(labels(&t.roots[1].children[0].children), ["MPI_Recv"]);
    assert_eq!(t.roots[0].tasks.len(), 4);
    assert_eq!(t.threads(), 5);
    assert_eq!(t.ranks(), [0, 1, 2, 3]);
    assert_eq!(
        t.without_stacks,
        [
            (4, "ptrace refused".to_string()),
            (5, "none were collected".to_string())
        ]
    );
}

#[test]
fn a_thread_outside_mpi_ends_at_its_innermost_frame() {
    let mut s = Snapshot::default();
    let t = ThreadStack {
        tid: 9,
        frames: start(vec![
            frame("__libc_pause", LIBC, None),
            frame("compute", APP, Some(12)),
            frame("main", APP, Some(30)),
        ]),
        ..ThreadStack::default()
    };
    s.processes.push(process(3, vec![t]));
    let tree = StackTree::build(&s, Mode::Compact);
    let compute = &tree.roots[0].children[0];
    assert_eq!(compute.label, "compute");
    assert_eq!(compute.children[0].label, "__libc_pause");
    assert_eq!(compute.children[0].location, None);
    assert!(tree.roots[0].ending_tasks().is_empty());
}

#[test]
fn the_calls_say_what_a_leaf_waits_for_when_they_all_agree() {
    let mut s = barrier_vs_recv();
    let recv = |tid| MpiCall {
        tid,
        frame: 1,
        call: "recv".into(),
        communicator: Some("0".into()),
        peer: Some(0),
        tag: Some(3),
        ..MpiCall::default()
    };
    for (i, p) in s.processes.iter_mut().enumerate() {
        let tid = 1000 + 10 * i as u64;
        let call = if i == 0 {
            MpiCall {
                tid,
                frame: 2,
                call: "barrier".into(),
                communicator: Some("0".into()),
                ..MpiCall::default()
            }
        } else {
            recv(tid)
        };
        if let Some(st) = p.stacks.as_mut() {
            st.calls.push(call);
        }
    }
    let t = StackTree::build(&s, Mode::Compact);
    let main = &t.roots[0];
    assert_eq!(main.children[0].detail.as_deref(), Some(" on MPI_COMM_WORLD"));
    let leaf = &main.children[1].children[0];
    assert_eq!(leaf.detail.as_deref(), Some(" from rank 0, tag 3"));
    // One rank whose tag differs: nothing said for the leaf.
    if let Some(st) = s.processes[2].stacks.as_mut() {
        st.calls[0].tag = Some(4);
    }
    let t = StackTree::build(&s, Mode::Compact);
    assert_eq!(t.roots[0].children[1].children[0].detail, None);
    // One rank whose call is unknown: nothing either.
    if let Some(st) = s.processes[2].stacks.as_mut() {
        st.calls.clear();
    }
    let t = StackTree::build(&s, Mode::Compact);
    assert_eq!(t.roots[0].children[1].children[0].detail, None);
}

#[test]
fn deep_stacks_build_without_recursion() {
    let mut frames: Vec<Frame> = (0..50_000u32).map(|i| frame("recurse", APP, Some(i % 7 + 1))).collect();
    frames.push(frame("main", APP, Some(3)));
    let mut s = Snapshot::default();
    s.processes.push(process(
        0,
        vec![ThreadStack {
            tid: 1,
            frames,
            ..ThreadStack::default()
        }],
    ));
    let t = StackTree::build(&s, Mode::Full);
    assert_eq!(t.roots[0].count(), MAX_DEPTH);
    let mut node = &t.roots[0];
    for _ in 0..MAX_DEPTH / 2 {
        node = &node.children[0];
    }
    assert_eq!(node.label, ELIDED_LABEL);
    assert_eq!(t.roots[0].label, "main");
}
