//! The verdict on ranks whose MPI gives no queues but whose flight recorder
//! was read (`recorded.rs`): synthetic snapshots, end to end through
//! [`analyze`].

use super::testutil::*;
use super::*;
use crate::snapshot::model::{
    Communicator, Frame, MissingReason, MpiCall, ProcessSnapshot, QueuesMissing, Stacks, ThreadStack,
};
use crate::snapshot::recorder::{RecordedArgs, RecordedCall, RecordedComm, RecordedRequest, Recording};

const LIBMPI: &str = "/usr/lib/x86_64-linux-gnu/libmpi.so.40";
const APP: &str = "/opt/u/app";
const WORLD: &str = "0x7f0000001000";

/// A thread in MPI call `entry` (`PMPI_Wait`) of Debian's Open MPI, called
/// from `main` at `line`.
fn in_mpi(tid: u64, entry: &str, line: u32) -> ThreadStack {
    in_mpi_of(LIBMPI, APP, tid, entry, line)
}

/// A thread computing in the application.
fn computing(tid: u64) -> ThreadStack {
    ThreadStack {
        tid,
        frames: vec![frame("solve", APP, Some(90)), frame("main", APP, Some(12))],
        ..ThreadStack::default()
    }
}

/// Arguments on `MPI_COMM_WORLD`.
fn on_world(peer: Option<i64>, tag: Option<i64>) -> RecordedArgs {
    RecordedArgs {
        comm: Some(WORLD.into()),
        peer,
        tag,
        count: 16,
        type_size: Some(4),
        ..RecordedArgs::default()
    }
}

/// Call `seq` of thread `tid`; `running`: it has not returned.
fn call(seq: u64, tid: u64, name: &str, args: RecordedArgs, running: bool) -> RecordedCall {
    RecordedCall {
        seq,
        call: name.into(),
        args,
        tid,
        start_ns: seq * 1000,
        end_ns: (!running).then_some(seq * 1000 + 10),
        ..RecordedCall::default()
    }
}

/// A wait call given `active` requests, `known` of them in the table.
fn wait(seq: u64, tid: u64, name: &str, active: i64, known: i64) -> RecordedCall {
    RecordedCall {
        requests_active: Some(active),
        requests_known: Some(known),
        ..call(seq, tid, name, RecordedArgs::default(), true)
    }
}

/// A pending nonblocking request started by call `seq`.
fn pending(seq: u64, name: &str, args: RecordedArgs, waited_by: Option<u64>) -> RecordedRequest {
    RecordedRequest {
        request: format!("0x{:x}", 0xa000 + seq),
        call: name.into(),
        call_seq: seq,
        args,
        start_ns: seq * 1000,
        waited_by,
        persistent: false,
    }
}

/// Rank `r` of `n` on a packaged MPI (no queues), its thread `threads`,
/// and its recorder holding `calls` and `pending`; `collectives` begun on
/// `MPI_COMM_WORLD`.
fn rank(
    r: i64,
    n: i64,
    thread: ThreadStack,
    calls: Vec<RecordedCall>,
    pending: Vec<RecordedRequest>,
    collectives: u64,
) -> ProcessSnapshot {
    let mut p = process(r as i32, vec![]);
    p.queues_missing = Some(QueuesMissing::new(MissingReason::NoDebugInfo));
    // As the collector says it (the library is there, its types are not).
    p.error = Some("Open MPI 4.1.4 has no debug information for its message queue debug library".into());
    let tid = thread.tid;
    let name = crate::stacks::position::outermost_entry(&thread).map(|(_, c)| c);
    p.stacks = Some(Stacks {
        calls: name
            .map(|c| MpiCall {
                tid,
                frame: 1,
                call: c,
                why: Some("its MPI has no debug information".into()),
                state: Some(format!("digest-{r}")),
                ..MpiCall::default()
            })
            .into_iter()
            .collect(),
        threads: vec![thread],
        ..Stacks::default()
    });
    p.recorder = Some(Recording {
        version: 1,
        mpi: "open_mpi".into(),
        initialized: true,
        world_rank: Some(r),
        world_size: Some(n),
        calls_started: calls.last().map_or(0, |c| c.seq),
        calls,
        pending,
        pending_complete: true,
        comms: vec![RecordedComm {
            handle: WORLD.into(),
            world: true,
            rank: r,
            size: n,
            collectives,
            world_ranks: None,
        }],
        ..Recording::default()
    });
    p
}

/// examples/deadlock.c: rank r waits on its MPI_Irecv from (r + 1) % n,
/// tag 400 + r.
fn irecv_cycle(n: i64) -> Snapshot {
    snapshot(
        (0..n)
            .map(|r| {
                let tid = 100 + r as u64;
                let args = on_world(Some((r + 1) % n), Some(400 + r));
                rank(
                    r,
                    n,
                    in_mpi(tid, "PMPI_Wait", 30),
                    vec![call(5, tid, "irecv", args.clone(), false), wait(6, tid, "wait", 1, 1)],
                    vec![pending(5, "irecv", args, Some(6))],
                    0,
                )
            })
            .collect(),
    )
}

#[test]
fn a_cycle_of_recorded_receives_is_a_deadlock_with_its_peers_and_tags() {
    let s = irecv_cycle(3);
    let a = analyze_samples(&s, Some(&s), Some(200));
    assert_eq!(a.verdict, Verdict::Deadlock, "{a:#?}");
    assert_eq!(a.cycles, vec![vec![0, 1, 2]]);
    let mut tags: Vec<(i64, i64, Option<i64>)> = a.edges.iter().map(|e| (e.from, e.to, e.tag)).collect();
    tags.sort_unstable();
    assert_eq!(tags, [(0, 1, Some(400)), (1, 2, Some(401)), (2, 0, Some(402))]);
    assert!(a.stacks_only.is_empty(), "{:?}", a.stacks_only);
    // Without the recorder the same ranks are known from their stacks
    // alone, and no cycle names them.
    let mut bare = s.clone();
    for p in &mut bare.processes {
        p.recorder = None;
    }
    let b = analyze_samples(&bare, Some(&bare), Some(200));
    assert!(b.cycles.is_empty(), "{b:#?}");
    assert_eq!(b.stacks_only, vec![0, 1, 2]);
}

/// Rank 0 has a receive from rank 1 pending that it does not wait on (its
/// message may well have arrived) and waits on one from rank 2, which is
/// computing; rank 1 is in MPI_Recv from rank 0.
fn stale_request(recorder_ties: bool) -> Snapshot {
    let from1 = on_world(Some(1), Some(5));
    let from2 = on_world(Some(2), Some(6));
    let (w, by) = if recorder_ties {
        (wait(7, 100, "wait", 1, 1), Some(7))
    } else {
        (wait(7, 100, "wait", 2, 1), None)
    };
    let r0 = rank(
        0,
        3,
        in_mpi(100, "PMPI_Wait", 30),
        vec![
            call(5, 100, "irecv", from1.clone(), false),
            call(6, 100, "irecv", from2.clone(), false),
            w,
        ],
        vec![
            pending(5, "irecv", from1, None),
            pending(6, "irecv", from2, by.or(Some(7))),
        ],
        0,
    );
    let r1 = rank(
        1,
        3,
        in_mpi(101, "PMPI_Recv", 31),
        vec![call(3, 101, "recv", on_world(Some(0), Some(7)), true)],
        vec![],
        0,
    );
    let r2 = rank(2, 3, computing(102), vec![], vec![], 0);
    snapshot(vec![r0, r1, r2])
}

#[test]
fn a_pending_request_the_rank_does_not_wait_on_is_no_wait() {
    let s = stale_request(true);
    let a = analyze_samples(&s, Some(&s), Some(200));
    assert_ne!(a.verdict, Verdict::Deadlock, "{a:#?}");
    assert!(a.cycles.is_empty(), "{:?}", a.cycles);
    // Rank 0 waits on rank 2 (computing), rank 1 on rank 0: named.
    assert!(a.summary.contains("rank 2"), "{}", a.summary);
    // A wait on a request the recorder did not record: whom it waits for is
    // not known; never a deadlock, and the words say so.
    let s = stale_request(false);
    let a = analyze_samples(&s, Some(&s), Some(200));
    assert_ne!(a.verdict, Verdict::Deadlock, "{a:#?}");
    assert!(a.summary.contains("whom they wait for is not known"), "{}", a.summary);
}

/// Rank 0 in MPI_Send to rank 1 (a large message on its way), rank 1 in
/// MPI_Recv from rank 0, tags `send` and `recv`.
fn transfer(send: i64, recv: i64) -> Snapshot {
    let r0 = rank(
        0,
        2,
        in_mpi(100, "PMPI_Send", 30),
        vec![call(3, 100, "send", on_world(Some(1), Some(send)), true)],
        vec![],
        0,
    );
    let r1 = rank(
        1,
        2,
        in_mpi(101, "PMPI_Recv", 31),
        vec![call(3, 101, "recv", on_world(Some(0), Some(recv)), true)],
        vec![],
        0,
    );
    snapshot(vec![r0, r1])
}

#[test]
fn a_slow_transfer_is_matched_and_mismatched_tags_are_a_deadlock() {
    let s = transfer(9, 9);
    let a = analyze_samples(&s, Some(&s), Some(200));
    assert_ne!(a.verdict, Verdict::Deadlock, "{a:#?}");
    assert!(a.cycles.is_empty());
    let s = transfer(9, 10);
    let a = analyze_samples(&s, Some(&s), Some(200));
    assert_eq!(a.verdict, Verdict::Deadlock, "{a:#?}");
    assert_eq!(a.cycles, vec![vec![0, 1]]);
}

/// Ranks 0-2 in their 42nd collective on MPI_COMM_WORLD, an MPI_Allreduce;
/// rank 3 `last`: computing after 41 (None), or in collective 42 itself
/// (an MPI_Barrier), or in 41 (an MPI_Allreduce).
fn allreduce_42(last: Option<(u64, &str, &str)>) -> Snapshot {
    let mut ps: Vec<ProcessSnapshot> = (0..3)
        .map(|r| {
            let tid = 100 + r as u64;
            let mut a = on_world(None, None);
            a.collective_seq = Some(42);
            rank(
                r,
                4,
                in_mpi(tid, "PMPI_Allreduce", 50),
                vec![call(90, tid, "allreduce", a, true)],
                vec![],
                42,
            )
        })
        .collect();
    ps.push(match last {
        None => rank(
            3,
            4,
            in_mpi(103, "PMPI_Recv", 61),
            vec![call(80, 103, "recv", on_world(Some(0), Some(3)), true)],
            vec![],
            41,
        ),
        Some((seq, entry, name)) => {
            let mut a = on_world(None, None);
            a.collective_seq = Some(seq);
            rank(
                3,
                4,
                in_mpi(103, entry, 62),
                vec![call(80, 103, name, a, true)],
                vec![],
                seq,
            )
        }
    });
    snapshot(ps)
}

#[test]
fn collective_numbers_name_the_instance_each_rank_is_in() {
    // Rank 3 never came to collective 42: it is in MPI_Recv from rank 0.
    let s = allreduce_42(None);
    let a = analyze_samples(&s, Some(&s), Some(200));
    assert_eq!(a.verdict, Verdict::Deadlock, "{a:#?}");
    let note = a
        .notes
        .iter()
        .find(|n| n.starts_with("collectives on MPI_COMM_WORLD"))
        .expect("a note");
    assert!(
        note.contains("ranks 0-2 are in #42 (MPI_Allreduce); rank 3 is in none (it has begun 41)"),
        "{note}"
    );
    let words: Vec<&str> = a.edges.iter().filter_map(|e| e.words.as_deref()).collect();
    assert!(
        words.iter().any(|w| w.contains("MPI_Allreduce #42 on MPI_COMM_WORLD")
            && w.contains("not in it (it has begun 41 collectives on it)")),
        "{words:#?}"
    );
    // The same instance, another call: a mismatch, with its numbers.
    let s = allreduce_42(Some((42, "PMPI_Barrier", "barrier")));
    let a = analyze_samples(&s, Some(&s), Some(200));
    assert_eq!(a.verdict, Verdict::Deadlock, "{a:#?}");
    let words: Vec<&str> = a.edges.iter().filter_map(|e| e.words.as_deref()).collect();
    assert!(
        words.iter().any(|w| w.contains("which is in MPI_Barrier #42 on it")),
        "{words:#?}"
    );
    // Rank 3 still in the 41st: it waits on no one of the 42nd, and they
    // wait on it.
    let s = allreduce_42(Some((41, "PMPI_Allreduce", "allreduce")));
    let a = analyze_samples(&s, Some(&s), Some(200));
    let words: Vec<&str> = a.edges.iter().filter_map(|e| e.words.as_deref()).collect();
    assert!(
        words
            .iter()
            .any(|w| w.contains("which is in MPI_Allreduce #41 (an earlier one) on it")),
        "{words:#?}"
    );
    assert!(!a.edges.iter().any(|e| e.from == 3), "{:#?}", a.edges);
}

/// Rank 0 of [`irecv_cycle`] (2 ranks), its recorder as there, but with its MPI's debug library
/// giving queues: `world`, its MPI_COMM_WORLD.
fn with_library_queues(world: Communicator) -> ProcessSnapshot {
    let mut p = irecv_cycle(2).processes.swap_remove(0);
    p.queues_missing = None;
    p.error = None;
    p.communicators = vec![world];
    p
}

#[test]
fn the_debug_librarys_receives_and_the_recorders_must_agree() {
    // Rank 0 with its MPI's queues: a posted receive from rank 1, tag 400,
    // which its recorder holds too; then one more it does not.
    let mut p = with_library_queues(world(2, 0).id(WORLD).recvs(vec![recv(Some(1), Some(400))]));
    let agree = snapshot(vec![p.clone()]);
    let notes = recorded::agreement_notes(&agree);
    assert!(notes.is_empty(), "{notes:?}");
    p.communicators[0]
        .queues
        .receives
        .operations
        .push(recv(Some(1), Some(9)));
    let notes = recorded::agreement_notes(&snapshot(vec![p]));
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].starts_with("rank 0: the debug library lists posted receives on MPI_COMM_WORLD that mpiq's flight recorder does not hold (from rank 1, tag 9)"), "{notes:?}");
}

#[test]
fn a_rank_in_a_call_the_recorder_did_not_record_keeps_its_stacks_alone() {
    let mut s = irecv_cycle(3);
    // Rank 1's MPI_Wait has no running record (a call it does not wrap).
    if let Some(rec) = s.processes[1].recorder.as_mut() {
        rec.calls.pop();
    }
    let a = analyze_samples(&s, Some(&s), Some(200));
    assert_eq!(a.stacks_only, vec![1], "{a:#?}");
    assert!(
        a.notes.iter().any(|n| n.starts_with(
            "rank 1: its thread 101 is in MPI_Wait, which the flight recorder did not record; its pending requests are not used"
        )),
        "{:#?}",
        a.notes
    );
    // Rank 1 is known from its stacks alone: no cycle can go through it.
    assert!(a.cycles.is_empty(), "{:?}", a.cycles);
}

#[test]
fn a_call_whose_frames_lost_its_communicator_gets_it_from_the_recorder() {
    // Rank 0 with its MPI's queues (MPI_COMM_WORLD has the library's id
    // "0"), stopped in the recorder's own code around MPI_Iprobe: the
    // frames gave no communicator, peer or tag; its record has them.
    let mut p = with_library_queues(world(2, 0).id("0"));
    let probe = RecordedArgs {
        any_source: true,
        ..on_world(None, Some(32000))
    };
    if let Some(rec) = p.recorder.as_mut() {
        rec.calls = vec![call(7, 100, "iprobe", probe, true)];
    }
    if let Some(st) = p.stacks.as_mut() {
        st.calls[0].call = "iprobe".into();
    }
    let mut one = snapshot(vec![p.clone()]);
    recorded::apply(&mut one);
    let m = &one.processes[0].stacks.as_ref().unwrap().calls[0];
    assert_eq!(
        (
            m.communicator.as_deref(),
            m.any_source,
            m.tag,
            m.recorded,
            m.why.as_deref()
        ),
        (Some("0"), true, Some(32000), true, None),
        "{m:#?}"
    );
    // Two of the library's communicators the recorder's could be: none.
    p.communicators.push(world(2, 0).id("1"));
    let mut two = snapshot(vec![p]);
    recorded::apply(&mut two);
    let m = &two.processes[0].stacks.as_ref().unwrap().calls[0];
    assert_eq!(m.communicator, None, "{m:#?}");
}

/// MPICH ch4 (its library's receives untrusted): ranks 0-2 in their first
/// MPI_Allreduce, whose frames gave the communicator of the library's list
/// (an address), rank 3 computing. The recorder's communicators replace
/// the library's, and the calls' communicator with them: the waiters'
/// partners are known, and rank 3 is the one they wait for.
#[test]
fn untrusted_queues_replaced_by_the_recorders_keep_each_calls_communicator() {
    let library_world = "0x7fab4b75e980";
    let ps: Vec<ProcessSnapshot> = (0..4)
        .map(|r| {
            let tid = 100 + r as u64;
            let mut a = on_world(None, None);
            a.collective_seq = Some(1);
            let (thread, calls, begun) = if r < 3 {
                (
                    in_mpi(tid, "PMPI_Allreduce", 48),
                    vec![call(2, tid, "allreduce", a, true)],
                    1,
                )
            } else {
                (computing(tid), vec![], 0)
            };
            let mut p = rank(r, 4, thread, calls, vec![], begun);
            p.queues_missing = Some(QueuesMissing::new(MissingReason::LibraryUntrusted));
            p.communicators = vec![world(4, r).id(library_world)];
            if let Some(st) = p.stacks.as_mut() {
                for m in &mut st.calls {
                    m.communicator = Some(library_world.into());
                    m.comm_handle = Some(WORLD.into());
                    m.why = None;
                }
            }
            p
        })
        .collect();
    let s = snapshot(ps);
    let mut one = s.clone();
    recorded::apply(&mut one);
    let m = &one.processes[0].stacks.as_ref().unwrap().calls[0];
    assert_eq!(m.communicator.as_deref(), Some(WORLD), "{m:#?}");
    let a = analyze_samples(&s, Some(&s), Some(200));
    assert_eq!(a.verdict, Verdict::NoDeadlock, "{a:#?}");
    let w = a.waited_on.first().expect("ranks waited on");
    assert_eq!((w.ranks.clone(), w.state.as_str()), (vec![3], "computing"), "{a:#?}");
    assert!(w.waiters.iter().all(|x| x.partners_known), "{a:#?}");
    assert!(
        !a.notes.iter().any(|n| n.contains("could not be recovered")),
        "{:?}",
        a.notes
    );
}

/// Elk (Fortran, Debian's Open MPI) under `mpiq run`: ranks 1-3 in
/// `MPI_Bcast` from rank 0 on their duplicate of `MPI_COMM_WORLD` (a
/// handle that is an address, different in every rank), through the
/// recorder's Fortran wrapper (a frame without a name), called from the
/// application; rank 0 computing. Ranks at one place read alike: the
/// communicator by its members, the caller the application's frame.
#[test]
fn ranks_in_a_call_through_the_recorder_on_a_duplicate_of_world_read_alike() {
    let recorder = "/root/.cache/mpiq/recorder/ab/libmpiq_recorder.so";
    let ps: Vec<ProcessSnapshot> = (0..4)
        .map(|r| {
            let tid = 100 + r as u64;
            let dup = format!("0x55{r:02x}00001000");
            let args = RecordedArgs {
                comm: Some(dup.clone()),
                peer: Some(0),
                count: 13,
                type_size: Some(8),
                collective_seq: Some(2),
                ..RecordedArgs::default()
            };
            let thread = if r == 0 {
                computing(tid)
            } else {
                ThreadStack {
                    tid,
                    frames: vec![
                        frame("PMPI_Bcast", LIBMPI, None),
                        Frame {
                            function: None,
                            offset: Some(0x7680),
                            ..frame("", recorder, None)
                        },
                        frame("solve", APP, Some(77)),
                        frame("main", APP, Some(12)),
                    ],
                    ..ThreadStack::default()
                }
            };
            let calls = if r == 0 {
                vec![]
            } else {
                vec![call(4, tid, "bcast", args, true)]
            };
            let mut p = rank(r, 4, thread, calls, vec![], 2);
            if let Some(rec) = p.recorder.as_mut() {
                rec.comms.push(RecordedComm {
                    handle: dup,
                    world: false,
                    rank: r,
                    size: 4,
                    // Rank 0 has not begun the broadcast (#2).
                    collectives: if r == 0 { 1 } else { 2 },
                    world_ranks: Some(vec![0, 1, 2, 3]),
                });
            }
            p
        })
        .collect();
    let s = snapshot(ps);
    let a = analyze_samples(&s, Some(&s), Some(200));
    assert_ne!(a.verdict, Verdict::Deadlock, "{a:#?}");
    assert!(
        a.summary.contains(
            "ranks 1-3 wait in MPI_Bcast on the communicator of ranks 0-3 (app.c:77) for rank 0, which is computing"
        ),
        "{a:#?}"
    );
    assert!(!a.summary.contains("0x"), "{}", a.summary);
    assert!(!a.summary.contains("libmpiq_recorder"), "{}", a.summary);
}
