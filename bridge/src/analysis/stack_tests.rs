//! The verdict with call stacks (docs/design/stacks.md §5.8): synthetic
//! snapshots of every designed case, end to end through [`analyze`].

use super::testutil::*;
use super::*;
use crate::snapshot::model::{Communicator, MpiCall, ProcessSnapshot, Snapshot, Stacks, ThreadStack};

const LIBMPI: &str = "/opt/mpi/lib/libmpi.so.40";
const LIBC: &str = "/lib/x86_64-linux-gnu/libc.so.6";
const APP: &str = "/opt/u/app";

/// A thread in MPI call `entry` (`PMPI_Recv`) called from `main` at `line`.
fn in_mpi(tid: u64, entry: &str, line: u32) -> ThreadStack {
    in_mpi_of(LIBMPI, APP, tid, entry, line)
}

/// A thread outside MPI in libc function `f` (`pause`, `usleep`).
fn in_libc(tid: u64, f: &str) -> ThreadStack {
    ThreadStack {
        tid,
        frames: vec![frame(f, LIBC, None), frame("main", APP, Some(7))],
        ..ThreadStack::default()
    }
}

/// What the call's arguments said.
fn args(tid: u64, call: &str, comm: Option<&str>) -> MpiCall {
    MpiCall {
        tid,
        frame: 1,
        call: call.into(),
        communicator: comm.map(str::to_string),
        ..MpiCall::default()
    }
}

fn with(mut p: ProcessSnapshot, threads: Vec<ThreadStack>, calls: Vec<MpiCall>) -> ProcessSnapshot {
    p.stacks = Some(Stacks {
        threads,
        calls,
        ..Stacks::default()
    });
    p
}

/// examples/barrier_vs_recv.c on n ranks; `comm`: whether the barrier's
/// communicator was recovered.
fn barrier_vs_recv(n: i64, comm: bool) -> Snapshot {
    let mut ps = vec![with(
        process(0, vec![world(n, 0)]),
        vec![in_mpi(100, "PMPI_Barrier", 54)],
        vec![args(100, "barrier", comm.then_some("0"))],
    )];
    for r in 1..n {
        let mut recv_args = args(100 + r as u64, "recv", Some("0"));
        recv_args.peer = Some(0);
        recv_args.tag = Some(3);
        ps.push(with(
            process(r as i32, vec![world(n, r).recvs(vec![recv(Some(0), Some(3))])]),
            vec![in_mpi(100 + r as u64, "PMPI_Recv", 35)],
            if comm { vec![recv_args] } else { Vec::new() },
        ));
    }
    snapshot(ps)
}

#[test]
fn a_rank_in_a_barrier_waits_for_the_ranks_not_in_it() {
    let a = analyze(&barrier_vs_recv(4, true), None);
    assert_eq!(a.verdict, Verdict::Deadlock, "{a:#?}");
    assert_eq!(a.cycles, vec![vec![0, 1], vec![0, 2], vec![0, 3]]);
    assert!(
        a.summary.starts_with(
            "deadlock: rank 0 is in MPI_Barrier on MPI_COMM_WORLD (app.c:54); ranks 1-3 wait in MPI_Recv from \
             rank 0, tag 3 on MPI_COMM_WORLD (app.c:35) — "
        ),
        "{}",
        a.summary
    );
    let collective: Vec<&Edge> = a.edges.iter().filter(|e| e.op == OpKind::Collective).collect();
    assert_eq!(collective.len(), 3, "{:?}", a.edges);
    assert!(collective.iter().all(|e| e.from == 0 && e.wait.is_none()));
    assert_eq!(a.where_.len(), 4);
    assert_eq!(a.where_[0].state, "in_mpi");
}

#[test]
fn without_stacks_the_barrier_rank_looks_free_as_before() {
    let mut s = barrier_vs_recv(4, true);
    for p in &mut s.processes {
        p.stacks = None;
    }
    let a = analyze(&s, None);
    assert_eq!(a.verdict, Verdict::NoDeadlock);
    assert!(a.where_.iter().all(|w| w.state == "unknown"));
}

#[test]
fn an_unrecovered_communicator_is_unknown_on_one_sample_and_a_stall_on_two() {
    let s = barrier_vs_recv(4, false);
    let one = analyze(&s, None);
    assert_eq!(one.verdict, Verdict::Unknown, "{one:#?}");
    assert!(one.summary.contains("could not be recovered"), "{}", one.summary);
    let two = analyze_samples(&s, Some(&s), Some(200));
    assert_eq!(two.verdict, Verdict::Deadlock, "{two:#?}");
    assert!(two.stalled);
    assert!(
        two.summary.starts_with(
            "deadlock: no rank can make progress: every rank is blocked inside MPI and nothing changed between \
             two samples 200 ms apart: rank 0 is in MPI_Barrier (app.c:54)"
        ),
        "{}",
        two.summary
    );
    // A rank that moved between the samples breaks the stall.
    let mut before = s.clone();
    before.processes[2].stacks.as_mut().unwrap().threads[0] = in_mpi(102, "PMPI_Send", 40);
    let moved = analyze_samples(&s, Some(&before), None);
    assert_ne!(moved.verdict, Verdict::Deadlock, "{moved:#?}");
    assert!(moved.progressing.contains(&2));
}

/// `rank`'s process as the kernel showed it before it was stopped: `T`,
/// stopped by a signal.
fn stopped(mut s: Snapshot, rank: usize) -> Snapshot {
    s.processes[rank].os = Some(crate::snapshot::model::OsState {
        state: "T".into(),
        wchan: Some("do_signal_stop".into()),
        cpu_ms: 10,
        io_bytes: None,
        ..Default::default()
    });
    s
}

#[test]
fn a_rank_stopped_by_a_signal_is_never_part_of_a_stall() {
    // Two samples, nothing changed: a stall, but for rank 2's stop.
    let s = stopped(barrier_vs_recv(4, false), 2);
    let two = analyze_samples(&s, Some(&s), Some(200));
    assert_eq!(two.verdict, Verdict::Unknown, "{two:#?}");
    assert!(!two.stalled);
    assert!(
        two.summary.starts_with(
            "unknown: rank 2 is stopped by a signal (state T: SIGSTOP, SIGTSTP or Ctrl-Z), not by MPI: it does \
             nothing until it is continued (SIGCONT), and it is no deadlock; where it stopped: rank 2 waits in \
             MPI_Recv"
        ),
        "{}",
        two.summary
    );
    // Said once: not again in the notes.
    assert!(
        !two.notes.iter().any(|n| n.contains("stopped by a signal")),
        "{:?}",
        two.notes
    );
    // Stopped in the previous sample only (a stop/continue cycle): no stall either.
    let clean = barrier_vs_recv(4, false);
    let was = analyze_samples(&clean, Some(&s), Some(200));
    assert_ne!(was.verdict, Verdict::Deadlock, "{was:#?}");
    // Without the stop, the same samples are the stall they were.
    assert_eq!(
        analyze_samples(&clean, Some(&clean), Some(200)).verdict,
        Verdict::Deadlock
    );
}

#[test]
fn a_rank_stopped_by_a_signal_in_a_cycle_makes_it_unknown() {
    let a = analyze(&stopped(barrier_vs_recv(4, true), 0), None);
    assert_eq!(a.verdict, Verdict::Unknown, "{a:#?}");
    assert!(a.summary.contains("rank 0 is stopped by a signal"), "{}", a.summary);
    // Whom the others wait for: rank 0, stopped inside its MPI call, not
    // walked through as if it waited itself.
    let w = a.waited_on.first().expect("waited on");
    assert_eq!((w.ranks.clone(), w.state.as_str()), (vec![0], "stopped"), "{a:#?}");
    assert!(
        w.text
            .starts_with("is stopped by a signal in MPI_Barrier on MPI_COMM_WORLD"),
        "{}",
        w.text
    );
    assert_eq!(
        w.waiters.first().map(|x| x.ranks.clone()),
        Some(vec![1, 2, 3]),
        "{a:#?}"
    );
    // Rank 3 stopped: ranks 0 and 1 (and 0 and 2) still wait on each other,
    // none of them stopped: those cycles are a deadlock, rank 3 in none.
    let b = analyze(&stopped(barrier_vs_recv(4, true), 3), None);
    assert_eq!(b.verdict, Verdict::Deadlock, "{b:#?}");
    assert_eq!(b.cycles, vec![vec![0, 1], vec![0, 2]]);
    // Not left out of the answer.
    assert!(b.summary.contains("rank 3 is stopped by a signal"), "{}", b.summary);
}

/// Every rank of `s` with the scheduler's counters `run_us` and `wait_us`
/// (time on a CPU and waiting for one, microseconds).
fn scheduled(mut s: Snapshot, run_us: u64, wait_us: u64) -> Snapshot {
    for p in &mut s.processes {
        p.os = Some(crate::snapshot::model::OsState {
            state: "R".into(),
            run_us: Some(run_us),
            wait_us: Some(wait_us),
            ..Default::default()
        });
    }
    s
}

#[test]
fn ranks_starved_of_the_cpu_between_the_samples_are_never_a_deadlock() {
    // The cycle of ranks 0-1 and 0-2, the same in both samples; between
    // them no rank ran more than 1 ms, each waited 400 ms for a CPU: as a
    // healthy job's ranks on a crowded node, their messages on the way.
    let before = scheduled(barrier_vs_recv(4, true), 50_000, 100_000);
    let now = scheduled(barrier_vs_recv(4, true), 50_100, 500_000);
    let a = analyze_samples(&now, Some(&before), Some(500));
    assert_eq!(a.verdict, Verdict::Unknown, "{a:#?}");
    assert!(
        a.summary.contains(
            "ranks 0-3 barely ran between two samples 500 ms apart: at most 0.1 ms on a CPU, and up to 400 ms \
             ready to run but waiting for one (a crowded node)"
        ),
        "{}",
        a.summary
    );
    // The same cycle with the CPU to themselves (200 ms each, a polling
    // wait), or 0.5 ms of it on a crowded node: the deadlock it is.
    let busy = scheduled(barrier_vs_recv(4, true), 250_000, 100_500);
    assert_eq!(
        analyze_samples(&busy, Some(&before), Some(500)).verdict,
        Verdict::Deadlock
    );
    let crowded = scheduled(barrier_vs_recv(4, true), 50_500, 500_000);
    assert_eq!(
        analyze_samples(&crowded, Some(&before), Some(500)).verdict,
        Verdict::Deadlock
    );
    // Asleep in a blocking wait (neither ran nor waited for a CPU): so too.
    let asleep = scheduled(barrier_vs_recv(4, true), 50_010, 100_000);
    assert_eq!(
        analyze_samples(&asleep, Some(&before), Some(500)).verdict,
        Verdict::Deadlock
    );
    // One sample alone says nothing of it.
    assert_eq!(analyze(&now, None).verdict, Verdict::Deadlock);
    // Rank 3 alone starved, outside the cycles: they are the deadlock they
    // are, and rank 3 is named as not having run.
    let mut one = scheduled(barrier_vs_recv(4, true), 250_000, 100_500);
    one.processes[3] = now.processes[3].clone();
    let a = analyze_samples(&one, Some(&before), Some(500));
    assert_eq!(a.verdict, Verdict::Deadlock, "{a:#?}");
    assert!(
        a.summary.contains("rank 3 barely ran between two samples"),
        "{}",
        a.summary
    );
}

/// `barrier_vs_recv` with every call's calling frames digested as `state`,
/// and rank 0's communicator unread (as where the compiler dropped it).
fn digested(comm_of_rank_0: bool, state: &str) -> Snapshot {
    let mut s = barrier_vs_recv(4, true);
    for p in &mut s.processes {
        for c in &mut p.stacks.as_mut().unwrap().calls {
            c.state = Some(state.into());
        }
    }
    if !comm_of_rank_0 {
        let c = &mut s.processes[0].stacks.as_mut().unwrap().calls[0];
        c.communicator = None;
        c.why = Some("comm: optimised out, or not known to the debugger".into());
    }
    s
}

#[test]
fn an_argument_unread_now_comes_from_the_previous_sample_of_the_same_frames() {
    let whole = analyze_samples(&digested(true, "d"), Some(&digested(true, "d")), Some(200));
    assert!(
        whole.summary.contains("rank 0 is in MPI_Barrier on MPI_COMM_WORLD"),
        "{}",
        whole.summary
    );
    // Unread now, read by the previous sample with the same frames: the
    // verdict says what the complete samples say.
    let carried = analyze_samples(&digested(false, "d"), Some(&digested(true, "d")), Some(200));
    assert_eq!(carried.verdict, whole.verdict);
    assert_eq!(carried.summary, whole.summary);
    assert_eq!(carried.cycles, whole.cycles);
    // Not from frames whose contents changed, nor without a digest, nor
    // from a reading that contradicts one of now.
    let changed = analyze_samples(&digested(false, "d"), Some(&digested(true, "e")), Some(200));
    assert!(
        !changed.summary.contains("rank 0 is in MPI_Barrier on MPI_COMM_WORLD"),
        "{}",
        changed.summary
    );
    let mut bare = digested(false, "d");
    bare.processes[0].stacks.as_mut().unwrap().calls[0].state = None;
    let mut bare_before = digested(true, "d");
    bare_before.processes[0].stacks.as_mut().unwrap().calls[0].state = None;
    let undigested = analyze_samples(&bare, Some(&bare_before), Some(200));
    assert!(
        !undigested
            .summary
            .contains("rank 0 is in MPI_Barrier on MPI_COMM_WORLD"),
        "{}",
        undigested.summary
    );
    let mut other = digested(true, "d");
    other.processes[0].stacks.as_mut().unwrap().calls[0].comm_handle = Some("0x2".into());
    let mut now = digested(false, "d");
    now.processes[0].stacks.as_mut().unwrap().calls[0].comm_handle = Some("0x1".into());
    let contradicted = analyze_samples(&now, Some(&other), Some(200));
    assert!(
        !contradicted
            .summary
            .contains("rank 0 is in MPI_Barrier on MPI_COMM_WORLD"),
        "{}",
        contradicted.summary
    );
}

/// examples/livelock.c on 3 ranks: every rank in `MPI_Iprobe` from line 32,
/// but `computing` is caught in its loop, between two calls.
fn iprobe_loop(computing: Option<i32>) -> Snapshot {
    let ps = (0..3)
        .map(|r| {
            let tid = 100 + r as u64;
            if Some(r) == computing {
                let t = ThreadStack {
                    tid,
                    frames: vec![frame("main", APP, Some(31))],
                    ..ThreadStack::default()
                };
                return with(process(r, vec![world(3, r.into())]), vec![t], Vec::new());
            }
            let mut a = args(tid, "iprobe", Some("0"));
            a.any_source = true;
            a.tag = Some(99);
            a.state = Some("d".into());
            with(
                process(r, vec![world(3, r.into())]),
                vec![in_mpi(tid, "PMPI_Iprobe", 32)],
                vec![a],
            )
        })
        .collect();
    snapshot(ps)
}

/// One sample of the livelock: every rank inside MPI, polling for a message
/// nothing in the job could send. Whether they keep polling only a second
/// sample tells: `unknown`, naming where they are, never the all-clear.
/// One rank caught computing between two calls can still send: no
/// deadlock, the polling ranks named.
#[test]
fn every_rank_polling_on_one_sample_is_unknown_never_an_all_clear() {
    let a = analyze(&iprobe_loop(None), None);
    assert_eq!(a.verdict, Verdict::Unknown, "{a:#?}");
    assert_eq!(
        a.summary,
        "unknown: every rank is inside MPI and no queue shows what would serve them: ranks 0-2 wait in \
         MPI_Iprobe on MPI_COMM_WORLD (app.c:32); a test or probe returns at once, and one sample cannot \
         tell whether they keep calling it: a second sample would tell whether they move"
    );
    let b = analyze(&iprobe_loop(Some(1)), None);
    assert_eq!(b.verdict, Verdict::NoDeadlock, "{b:#?}");
    assert!(!b.summary.contains("every pending receive"), "{}", b.summary);
    assert!(
        b.summary.starts_with(
            "no deadlock found on one sample: ranks 0 and 2 wait in MPI_Iprobe on MPI_COMM_WORLD (app.c:32); rank 1 "
        ),
        "{}",
        b.summary
    );
}

#[test]
fn a_rank_that_moved_is_named_with_the_ranks_still_waiting_never_an_all_clear() {
    let a = analyze_samples(&iprobe_loop(None), Some(&iprobe_loop(Some(1))), Some(700));
    assert_eq!(a.verdict, Verdict::NoDeadlock, "{a:#?}");
    assert_eq!(
        a.summary,
        "no deadlock: the queues changed between two samples 700 ms apart: the job is progressing (rank 1: it \
         moved from computing to MPI_Iprobe from main (app.c:32)); ranks 0 and 2 wait in MPI_Iprobe on \
         MPI_COMM_WORLD (app.c:32)"
    );
    // The same samples the other way round: rank 1 is computing now, and
    // the others wait for it.
    let b = analyze_samples(&iprobe_loop(Some(1)), Some(&iprobe_loop(None)), Some(700));
    assert!(b.summary.contains("for rank 1"), "{}", b.summary);
    assert!(!b.summary.contains("no deadlock found"), "{}", b.summary);
}

#[test]
fn every_rank_in_the_same_barrier_completes() {
    let n = 3;
    let s = snapshot(
        (0..n)
            .map(|r| {
                with(
                    process(r as i32, vec![world(n, r)]),
                    vec![in_mpi(10 + r as u64, "MPI_Barrier", 9)],
                    vec![args(10 + r as u64, "barrier", Some("0"))],
                )
            })
            .collect(),
    );
    assert_eq!(analyze(&s, None).verdict, Verdict::NoDeadlock);
    // Not a stall either without the communicators: maybe one barrier.
    let mut bare = s.clone();
    for p in &mut bare.processes {
        p.stacks.as_mut().unwrap().calls.clear();
    }
    assert_ne!(analyze_samples(&bare, Some(&bare), None).verdict, Verdict::Deadlock);
}

#[test]
fn a_collective_mismatch_on_split_communicators() {
    // examples/split_mismatch.c: low = {0, 1}, high = {2, 3}; 0 in
    // Barrier(low), 1-3 in Barrier(WORLD).
    let low = |l: i64| comm("low", 2, l).group(vec![0, 1]).id("0xa0");
    let high = |l: i64| comm("high", 2, l).group(vec![2, 3]).id("0xb0");
    let p = |r: i64, sub: Communicator, call: &str, on: &str| {
        with(
            process(r as i32, vec![world(4, r), sub]),
            vec![in_mpi(r as u64, call, 20)],
            vec![args(r as u64, "barrier", Some(on))],
        )
    };
    let s = snapshot(vec![
        p(0, low(0), "PMPI_Barrier", "0xa0"),
        p(1, low(1), "PMPI_Barrier", "0"),
        p(2, high(0), "PMPI_Barrier", "0"),
        p(3, high(1), "PMPI_Barrier", "0"),
    ]);
    let a = analyze(&s, None);
    assert_eq!(a.verdict, Verdict::Deadlock, "{a:#?}");
    assert_eq!(a.cycles, vec![vec![0, 1]]);
    assert_eq!(a.blocked, vec![2, 3]);
    assert!(a.summary.contains("rank 0 is in MPI_Barrier on 'low'"), "{}", a.summary);
}

#[test]
fn a_ring_of_unlisted_synchronous_sends_is_a_deadlock() {
    // MPICH: blocking sends are not listed; each message sits unexpected at
    // its receiver, which is in MPI_Ssend itself.
    let n = 4;
    let s = snapshot(
        (0..n)
            .map(|r| {
                let left = (r + n - 1) % n;
                with(
                    process(r as i32, vec![world(n, r).unexp(vec![unexpected(left, 500 + left)])]),
                    vec![in_mpi(r as u64, "PMPI_Ssend", 12)],
                    Vec::new(),
                )
            })
            .collect(),
    );
    let a = analyze(&s, None);
    assert_eq!(a.verdict, Verdict::Deadlock, "{a:#?}");
    assert_eq!(a.cycles, vec![vec![0, 1, 2, 3]]);
    assert!(a.edges.iter().all(|e| e.op == OpKind::SyncSend), "{:?}", a.edges);
    assert!(a.summary.contains("unexpected at rank 1"), "{}", a.summary);
    // Without stacks the messages count as delivered: the old false all-clear.
    let mut bare = s.clone();
    for p in &mut bare.processes {
        p.stacks = None;
    }
    assert_eq!(analyze(&bare, None).verdict, Verdict::NoDeadlock);
}

#[test]
fn a_computing_rank_can_still_satisfy_an_any_source_receive() {
    // examples/any_source_computing.c.
    let s = snapshot(vec![
        with(
            process(0, vec![world(3, 0).recvs(vec![recv(None, Some(5))])]),
            vec![in_mpi(1, "PMPI_Recv", 10)],
            Vec::new(),
        ),
        with(
            process(1, vec![world(3, 1).recvs(vec![recv(Some(2), Some(6))])]),
            vec![in_libc(2, "clock_nanosleep")],
            Vec::new(),
        ),
        with(
            process(2, vec![world(3, 2).recvs(vec![recv(Some(0), Some(7))])]),
            vec![in_mpi(3, "PMPI_Recv", 30)],
            Vec::new(),
        ),
    ]);
    let a = analyze(&s, None);
    assert_eq!(a.verdict, Verdict::NoDeadlock, "{a:#?}");
    assert_eq!(a.where_[1].state, "computing");
    // The same rank blocked in pause() (idle): its pending receive counts.
    let mut idle = s.clone();
    idle.processes[1].stacks.as_mut().unwrap().threads[0] = in_libc(2, "pause");
    assert_eq!(analyze(&idle, None).verdict, Verdict::Deadlock);
}

/// examples/waitany.c: rank 0 waits on receives from 1 and 2; 1 receives
/// from 0; 2 computes.
fn waitany(call: &str) -> Snapshot {
    snapshot(vec![
        with(
            process(
                0,
                vec![world(3, 0).recvs(vec![recv(Some(1), Some(1)), recv(Some(2), Some(2))])],
            ),
            vec![in_mpi(1, call, 10)],
            Vec::new(),
        ),
        with(
            process(1, vec![world(3, 1).recvs(vec![recv(Some(0), Some(9))])]),
            vec![in_mpi(2, "PMPI_Recv", 20)],
            Vec::new(),
        ),
        with(process(2, vec![world(3, 2)]), vec![in_libc(3, "usleep")], Vec::new()),
    ])
}

#[test]
fn waitany_needs_one_request_and_waitall_every_one() {
    assert_eq!(analyze(&waitany("PMPI_Waitany"), None).verdict, Verdict::NoDeadlock);
    let all = analyze(&waitany("PMPI_Waitall"), None);
    assert_eq!(all.verdict, Verdict::Deadlock, "{all:#?}");
    assert_eq!(all.cycles, vec![vec![0, 1]]);
}

#[test]
fn threads_of_a_rank_are_alternatives() {
    // examples/threads.c: rank 0's thread A receives from 1; main computes
    // (`compute`) or joins A (`join`); rank 1 receives from 0.
    let s = |main: ThreadStack| {
        snapshot(vec![
            with(
                process(0, vec![world(2, 0).recvs(vec![recv(Some(1), Some(7))])]),
                vec![main, in_mpi(11, "PMPI_Recv", 30)],
                Vec::new(),
            ),
            with(
                process(1, vec![world(2, 1).recvs(vec![recv(Some(0), Some(8))])]),
                vec![in_mpi(20, "PMPI_Recv", 40)],
                Vec::new(),
            ),
        ])
    };
    assert_eq!(analyze(&s(in_libc(10, "usleep")), None).verdict, Verdict::NoDeadlock);
    let join = analyze(&s(in_libc(10, "__pthread_clockjoin_ex")), None);
    assert_eq!(join.verdict, Verdict::Deadlock, "{join:#?}");
    assert_eq!(join.cycles, vec![vec![0, 1]]);
}

#[test]
fn ranks_idle_in_pause_keep_the_queue_verdict() {
    // examples/ring.c: every rank idle in pause() with its receive pending.
    let n = 3;
    let s = snapshot(
        (0..n)
            .map(|r| {
                with(
                    process(
                        r as i32,
                        vec![world(n, r).recvs(vec![recv(Some((r + n - 1) % n), Some(100 + r))])],
                    ),
                    vec![in_libc(r as u64, "__libc_pause")],
                    Vec::new(),
                )
            })
            .collect(),
    );
    let a = analyze(&s, None);
    assert_eq!(a.verdict, Verdict::Deadlock);
    assert_eq!(
        a.where_[0].text,
        "is blocked outside MPI in pause, called from main (app.c:7)"
    );
}

#[test]
fn a_received_message_frees_the_receiver() {
    // Rank 1 in MPI_Recv whose receive is no longer pending: it returns.
    let s = snapshot(vec![
        with(
            process(0, vec![world(2, 0)]),
            vec![in_mpi(1, "PMPI_Barrier", 5)],
            vec![args(1, "barrier", Some("0"))],
        ),
        with(
            process(1, vec![world(2, 1)]),
            vec![in_mpi(2, "PMPI_Recv", 6)],
            Vec::new(),
        ),
    ]);
    assert_eq!(analyze(&s, None).verdict, Verdict::NoDeadlock);
}

/// Two ranks without queues (a packaged MPI), each in one blocking call,
/// their calling frames the same in two samples.
fn stacks_only(calls: [(&str, &str); 2]) -> Snapshot {
    stacks_only_n(&calls)
}

/// [`stacks_only`] with a rank per call.
fn stacks_only_n(calls: &[(&str, &str)]) -> Snapshot {
    let ps = calls
        .iter()
        .enumerate()
        .map(|(r, (entry, call))| {
            let tid = 10 + r as u64;
            let mut a = args(tid, call, None);
            a.state = Some(format!("digest-{r}"));
            let mut p = with(
                process(r as i32, vec![]),
                vec![in_mpi(tid, entry, 40 + r as u32)],
                vec![a],
            );
            p.queues_missing = Some(crate::snapshot::model::QueuesMissing::new(
                crate::snapshot::model::MissingReason::NoDebugInfo,
            ));
            p
        })
        .collect();
    snapshot(ps)
}

#[test]
fn without_queues_a_send_and_a_receive_standing_still_may_be_one_transfer() {
    // A large message on its way between rank 0's MPI_Send and rank 1's
    // MPI_Recv looks like this in two samples: not a deadlock.
    let s = stacks_only([("PMPI_Send", "send"), ("PMPI_Recv", "recv")]);
    let a = analyze_samples(&s, Some(&s), Some(700));
    assert_ne!(a.verdict, Verdict::Deadlock, "{a:#?}");
    assert!(!a.stalled);
    assert_eq!(a.verdict, Verdict::Unknown, "{a:#?}");
    assert!(
        a.summary
            .contains("rank 0 in MPI_Send and rank 1 in MPI_Recv may be the two ends of one transfer still on its way"),
        "{}",
        a.summary
    );
    // Two sends (or two receives) cannot be one transfer: the stall holds.
    for calls in [
        [("PMPI_Ssend", "ssend"), ("PMPI_Ssend", "ssend")],
        [("PMPI_Recv", "recv"), ("PMPI_Recv", "recv")],
    ] {
        let s = stacks_only(calls);
        let a = analyze_samples(&s, Some(&s), Some(700));
        assert_eq!(a.verdict, Verdict::Deadlock, "{calls:?}: {a:#?}");
        assert!(a.stalled);
    }
}

#[test]
fn one_rank_alone_not_moving_while_the_others_move_is_no_deadlock_two_are_unknown() {
    // Rank 0 in the same MPI_Send in both samples (another iteration, or
    // slow), ranks 1 and 2 moved: whomever rank 0 waits for moves, and a
    // deadlock needs two ranks that do not move.
    let before = stacks_only_n(&[("PMPI_Send", "send"), ("PMPI_Recv", "recv"), ("PMPI_Recv", "recv")]);
    let now = stacks_only_n(&[("PMPI_Send", "send"), ("PMPI_Ssend", "ssend"), ("PMPI_Ssend", "ssend")]);
    let a = analyze_samples(&now, Some(&before), Some(700));
    assert_eq!(a.verdict, Verdict::NoDeadlock, "{a:#?}");
    assert!(
        a.summary
            .contains("every rank but rank 0 moved between two samples 700 ms apart or computes"),
        "{}",
        a.summary
    );
    assert!(a.rests_on_change, "{a:#?}");
    // Two ranks that did not move may wait for each other: not known.
    let now = stacks_only_n(&[("PMPI_Send", "send"), ("PMPI_Recv", "recv"), ("PMPI_Ssend", "ssend")]);
    let a = analyze_samples(&now, Some(&before), Some(700));
    assert_eq!(a.verdict, Verdict::Unknown, "{a:#?}");
    // Another sample may see them move.
    assert!(a.rests_on_change, "{a:#?}");
}

#[test]
fn ranks_seen_to_move_out_of_mpi_init_into_a_stall_rest_on_that_move() {
    // A job still starting at the first sample, both ranks in a receive at
    // the second: every rank moved, so the verdict is no deadlock, but it
    // rests on that move alone; a further sample tells a hang from a job
    // that keeps moving.
    let before = stacks_only([("PMPI_Init", "init"), ("PMPI_Init", "init")]);
    let now = stacks_only([("PMPI_Recv", "recv"), ("PMPI_Recv", "recv")]);
    let a = analyze_samples(&now, Some(&before), Some(700));
    assert_eq!(a.verdict, Verdict::NoDeadlock, "{a:#?}");
    assert!(a.rests_on_change, "{a:#?}");
    // The same stall in two samples is one, and rests on nothing moving.
    let a = analyze_samples(&now, Some(&now), Some(700));
    assert_eq!(a.verdict, Verdict::Deadlock, "{a:#?}");
    assert!(!a.rests_on_change, "{a:#?}");
}

/// MPICH: rank 0 in a blocking MPI_Send to rank 1 (no queue lists it),
/// rank 1 in MPI_Recv from rank 0 whose receive has left the posted queue,
/// tags `send_tag` and `recv_tag`, in two samples.
fn send_meets_recv(send_tag: i64, recv_tag: i64) -> Snapshot {
    let mut send = args(10, "send", Some("0"));
    send.peer = Some(1);
    send.tag = Some(send_tag);
    let mut recv = args(11, "recv", Some("0"));
    recv.peer = Some(0);
    recv.tag = Some(recv_tag);
    snapshot(vec![
        with(
            process(0, vec![world(2, 0)]),
            vec![in_mpi(10, "PMPI_Send", 76)],
            vec![send],
        ),
        with(
            process(1, vec![world(2, 1)]),
            vec![in_mpi(11, "PMPI_Recv", 78)],
            vec![recv],
        ),
    ])
}

#[test]
fn a_blocking_send_and_the_receive_it_matches_are_a_transfer_not_a_cycle() {
    let s = send_meets_recv(5, 5);
    let a = analyze_samples(&s, Some(&s), Some(700));
    assert_eq!(a.verdict, Verdict::NoDeadlock, "{a:#?}");
    assert!(a.cycles.is_empty());
    // Another tag: neither can match the other, a cycle.
    let s = send_meets_recv(5, 6);
    let a = analyze_samples(&s, Some(&s), Some(700));
    assert_eq!(a.verdict, Verdict::Deadlock, "{a:#?}");
    assert_eq!(a.cycles, vec![vec![0, 1]]);
}

#[test]
fn a_blocking_send_and_a_wait_may_be_one_transfer_but_waits_alone_stall() {
    // Rank 1's MPI_Wait may be on the receive of rank 0's message.
    let s = stacks_only([("PMPI_Send", "send"), ("PMPI_Wait", "wait")]);
    let a = analyze_samples(&s, Some(&s), Some(700));
    assert_eq!(a.verdict, Verdict::Unknown, "{a:#?}");
    assert!(
        a.summary.contains("may be the two ends of one transfer"),
        "{}",
        a.summary
    );
    // Every rank in MPI_Wait: the issue-16 rule holds (a wait's requests
    // are not known without the queues).
    let s = stacks_only([("PMPI_Wait", "wait"), ("PMPI_Wait", "wait")]);
    let a = analyze_samples(&s, Some(&s), Some(700));
    assert_eq!(a.verdict, Verdict::Deadlock, "{a:#?}");
    assert!(a.stalled);
}

#[test]
fn ten_thousand_ranks_report_in_two_screens() {
    // Ranks 1-9999 wait in MPI_Recv for rank 0, which is in MPI_Barrier.
    let r = crate::render::Report::analyzed(crate::render::Samples {
        current: barrier_vs_recv(10_000, true),
        ..Default::default()
    });
    let text = r.render(&crate::DumpOptions::default());
    let rows: usize = text.lines().map(|l| l.chars().count().div_ceil(100).max(1)).sum();
    assert!(rows <= 100, "{rows} screen lines:\n{text}");
    assert!(text.starts_with("Deadlock analysis: "), "{text}");
    let (_, detail) = text.split_once(" in detail").expect(&text);
    assert!(
        detail.contains("Process pid 1000, rank 0:"),
        "rank 0, whom the others wait for:\n{text}"
    );
}

#[test]
fn a_collective_mismatch_on_twenty_thousand_ranks_is_one_set_per_side() {
    // Even ranks in MPI_Barrier, odd ranks in MPI_Allreduce, all on
    // MPI_COMM_WORLD: each side waits for the other's 10,000 ranks. As one
    // wait per pair that is 200 million waits; as shared sets, 20,000
    // waits on two sets, and the analysis finishes in a moment.
    let n = 20_000i64;
    // One member list shared by all, as the fan-in's wire gives them.
    let members: crate::snapshot::model::Group = (0..n).map(Some).collect();
    let shared_world = |r: i64| Communicator {
        id: "0".into(),
        world_ranks: Some(members.clone()),
        world_ranks_source: Some("world".into()),
        ..comm("MPI_COMM_WORLD", n, r)
    };
    let ps = (0..n)
        .map(|r| {
            let (entry, call) = if r % 2 == 0 {
                ("PMPI_Barrier", "barrier")
            } else {
                ("PMPI_Allreduce", "allreduce")
            };
            with(
                process(r as i32, vec![shared_world(r)]),
                vec![in_mpi(100 + r as u64, entry, 40 + (r % 2) as u32)],
                vec![args(100 + r as u64, call, Some("0"))],
            )
        })
        .collect();
    let a = analyze(&snapshot(ps), None);
    assert_eq!(a.verdict, Verdict::Deadlock, "{}", a.summary);
    assert_eq!(a.cycles.first(), Some(&vec![0, 1]), "{:?}", a.cycles);
    assert!(
        a.summary.contains(
            "rank 0 is in MPI_Barrier on MPI_COMM_WORLD and waits for rank 1, which is in MPI_Allreduce on it; \
             rank 1 is in MPI_Allreduce on MPI_COMM_WORLD and waits for rank 0, which is in MPI_Barrier on it"
        ),
        "{}",
        a.summary
    );
    // Every edge is still there for the JSON's list: 2 x 10,000 x 10,000.
    let total = 2 * 10_000 * 10_000usize;
    assert_eq!(a.edges.len(), 20_000);
    assert!(
        a.notes
            .iter()
            .any(|n| n.contains(&format!("{} more are left out", total - 20_000))),
        "{:?}",
        a.notes
    );
    // Nobody is said to be outside MPI, nobody is waited on at the end.
    assert!(a.waited_on.is_empty(), "{:?}", a.waited_on);
}

#[test]
fn a_barrier_waits_for_each_member_of_the_set_it_shares() {
    // Rank 0 in MPI_Barrier, ranks 1-3 computing: one wait on the set
    // {1, 2, 3}; the graph frees rank 0 once all three are free, and the
    // edges still name each member.
    let n = 4i64;
    let mut ps = vec![with(
        process(0, vec![world(n, 0)]),
        vec![in_mpi(100, "PMPI_Barrier", 54)],
        vec![args(100, "barrier", Some("0"))],
    )];
    for r in 1..n {
        ps.push(with(
            process(r as i32, vec![world(n, r)]),
            vec![in_libc(100 + r as u64, "usleep")],
            Vec::new(),
        ));
    }
    let a = analyze(&snapshot(ps), None);
    assert_eq!(a.verdict, Verdict::NoDeadlock, "{}", a.summary);
    let to: Vec<i64> = a.edges.iter().filter(|e| e.from == 0).map(|e| e.to).collect();
    assert_eq!(to, vec![1, 2, 3], "{:?}", a.edges);
    assert!(a.edges.iter().all(|e| e.words.as_deref().is_some_and(|w| w
        == format!(
            "rank 0 is in MPI_Barrier on MPI_COMM_WORLD and waits for rank {}, which is not in it",
            e.to
        ))));
    assert_eq!(a.waited_on.len(), 1, "{:?}", a.waited_on);
    assert_eq!(a.waited_on[0].ranks, vec![1, 2, 3]);
}

/// `barrier_vs_recv` with rank 0 outside MPI in libc's `call`, the kernel
/// saying its main thread is in `state` (none: not read).
fn rank_0_in_libc(call: &str, state: Option<&str>) -> Snapshot {
    let mut s = barrier_vs_recv(4, true);
    let p = &mut s.processes[0];
    let pid = u64::from(p.pid.unwrap());
    p.stacks = Some(Stacks {
        threads: vec![in_libc(pid, call)],
        ..Stacks::default()
    });
    p.os = state.map(|st| crate::snapshot::model::OsState {
        state: st.into(),
        wchan: None,
        cpu_ms: 10,
        io_bytes: None,
        ..Default::default()
    });
    s
}

#[test]
fn a_rank_asleep_in_any_system_call_is_blocked_outside_mpi_not_computing() {
    // open() of a file that never opens: no list of calls knows it, the
    // kernel's S does.
    let asleep = analyze(&rank_0_in_libc("__libc_open64", Some("S")), None);
    assert_ne!(asleep.verdict, Verdict::Deadlock, "{asleep:#?}");
    assert!(
        asleep
            .summary
            .contains("rank 0, which is blocked outside MPI in open64, called from main (app.c:7)"),
        "{}",
        asleep.summary
    );
    // D: the file system's or the device's, said.
    let d = analyze(&rank_0_in_libc("__libc_open64", Some("D")), None);
    assert!(
        d.summary
            .contains("blocked outside MPI in open64 (an uninterruptible sleep: a file system or a device)"),
        "{}",
        d.summary
    );
    // Running (R), or not read: the call is on its way, as before.
    for state in [Some("R"), None] {
        let running = analyze(&rank_0_in_libc("__libc_open64", state), None);
        assert!(running.summary.contains("computing"), "{state:?}: {}", running.summary);
        assert!(!running.summary.contains("blocked outside MPI"), "{}", running.summary);
    }
    // The system call inside the call the application made, both named.
    let mut s = rank_0_in_libc("__open_nocancel", Some("S"));
    let t = &mut s.processes[0].stacks.as_mut().unwrap().threads[0];
    t.frames.insert(1, frame("__fopen_internal", LIBC, None));
    let fopen = analyze(&s, None);
    assert!(
        fopen
            .summary
            .contains("blocked outside MPI in open (in fopen), called from main (app.c:7)"),
        "{}",
        fopen.summary
    );
    // A sleep returns by itself: computing, whatever the kernel says.
    let napping = analyze(&rank_0_in_libc("usleep", Some("S")), None);
    assert!(!napping.summary.contains("blocked outside MPI"), "{}", napping.summary);
    // A call that could block, while the kernel says it runs (a large file
    // read from the page cache): busy, not blocked.
    let reading = analyze(&rank_0_in_libc("__libc_read", Some("R")), None);
    assert!(!reading.summary.contains("blocked outside MPI"), "{}", reading.summary);
    assert!(reading.summary.contains("computing"), "{}", reading.summary);
    // A static executable: its C library is its own code, no runtime frame
    // says the call; the kernel's system call does.
    let mut s = rank_0_in_libc("__libc_read", Some("S"));
    let t = &mut s.processes[0].stacks.as_mut().unwrap().threads[0];
    t.frames[0].object = Some(APP.into());
    let unnamed = analyze(&s, None);
    assert!(unnamed.summary.contains("computing"), "{}", unnamed.summary);
    if let Some(os) = s.processes[0].os.as_mut() {
        os.syscall = Some("read".into());
    }
    let named = analyze(&s, None);
    assert!(
        named
            .summary
            .contains("rank 0, which is blocked outside MPI in read, called from __libc_read"),
        "{}",
        named.summary
    );
}

#[test]
fn a_rank_blocked_outside_mpi_with_operations_posted_is_never_part_of_a_deadlock() {
    // Rank 1 posted a receive from rank 2 and then sleeps in open(); rank 2
    // waits in MPI_Recv for rank 1: a cycle of queues, but rank 1 may well
    // come back to its receive.
    let mut s = barrier_vs_recv(3, true);
    let p = &mut s.processes[1];
    let pid = u64::from(p.pid.unwrap());
    p.stacks = Some(Stacks {
        threads: vec![in_libc(pid, "__libc_open64")],
        ..Stacks::default()
    });
    p.communicators[0].queues.receives.operations = vec![recv(Some(2), Some(3))];
    p.os = Some(crate::snapshot::model::OsState {
        state: "S".into(),
        wchan: None,
        cpu_ms: 10,
        io_bytes: None,
        ..Default::default()
    });
    s.processes[2].communicators[0].queues.receives.operations = vec![recv(Some(1), Some(3))];
    // (Ranks 0 and 2 are the example's own deadlock, barrier against
    // receive: rank 1 is in none of it.)
    let a = analyze(&s, None);
    assert!(!a.cycles.iter().any(|c| c.contains(&1)), "{:?}", a.cycles);
    assert!(!a.blocked.contains(&1), "{a:#?}");
}

/// Ranks without queues (a packaged MPI), nobody in MPI: rank 0 in libc's
/// `write` with the kernel's `state`, the others computing in `ddot_`;
/// `receiving`: ranks in a blocking receive instead.
fn writing_rank(n: i32, state: &str, receiving: &[i32]) -> Snapshot {
    let ps = (0..n)
        .map(|r| {
            let pid = 1000 + r as u64;
            let mut p = process(r, vec![]);
            let t = if r == 0 {
                in_libc(pid, "__libc_write")
            } else if receiving.contains(&r) {
                in_mpi(pid, "PMPI_Recv", 40)
            } else {
                ThreadStack {
                    tid: pid,
                    frames: vec![frame("ddot_", APP, None), frame("main", APP, Some(9))],
                    ..ThreadStack::default()
                }
            };
            p = with(p, vec![t], Vec::new());
            p.os = Some(crate::snapshot::model::OsState {
                state: if r == 0 { state.into() } else { "R".into() },
                cpu_ms: 10,
                ..Default::default()
            });
            p.queues_missing = Some(crate::snapshot::model::QueuesMissing::new(
                crate::snapshot::model::MissingReason::NoDebugInfo,
            ));
            p
        })
        .collect();
    snapshot(ps)
}

#[test]
fn a_rank_writing_a_file_while_the_others_compute_is_a_progressing_job() {
    // Elk on Debian's Open MPI, healthy: rank 0 in write() (uninterruptible
    // sleep, its file system's) in both samples, ranks 1-3 in their own
    // code. Nobody waits inside MPI: no deadlock, and the job progresses;
    // rank 0 is named with what the kernel says (never left out).
    let s = writing_rank(4, "D", &[]);
    let a = analyze_samples(&s, Some(&s), Some(700));
    assert_eq!(a.verdict, Verdict::NoDeadlock, "{a:#?}");
    assert!(
        a.summary.starts_with(
            "no deadlock (from stacks only: the queues are not readable with this MPI build): ranks 1-3 moved \
             between two samples 700 ms apart or compute, and no rank waits inside MPI (rank 0 is blocked \
             outside MPI in write (an uninterruptible sleep: a file system or a device)"
        ),
        "{}",
        a.summary
    );
    assert!(a.summary.ends_with("the job is progressing"), "{}", a.summary);
    // Where each rank is: rank 0 blocked outside MPI, the others computing.
    let states: Vec<(i64, &str)> = a.where_.iter().map(|w| (w.rank, w.state.as_str())).collect();
    assert_eq!(
        states,
        [(0, "idle"), (1, "computing"), (2, "computing"), (3, "computing")],
        "{:#?}",
        a.where_
    );
    assert!(a.rests_on_change, "{a:#?}");
    // One sample cannot tell that the others move.
    assert_eq!(analyze(&s, None).verdict, Verdict::Unknown);
    // Every rank blocked outside MPI: nobody is seen to move (a file system
    // that never answers): unknown, never the all-clear.
    let mut all = writing_rank(2, "D", &[]);
    all.processes[1] = {
        let mut p = all.processes[0].clone();
        p.pid = Some(1001);
        p.world_rank = Some(1);
        if let Some(t) = p.stacks.as_mut() {
            t.threads[0].tid = 1001;
        }
        p
    };
    let a = analyze_samples(&all, Some(&all), Some(700));
    assert_eq!(a.verdict, Verdict::Unknown, "{a:#?}");
    // A rank waiting inside MPI that did not move, beside rank 0: whether
    // it waits for rank 0 is not known from stacks.
    let s = writing_rank(4, "D", &[1]);
    let a = analyze_samples(&s, Some(&s), Some(700));
    assert_eq!(a.verdict, Verdict::Unknown, "{a:#?}");
    assert!(a.summary.contains("rank 0"), "{}", a.summary);
}
