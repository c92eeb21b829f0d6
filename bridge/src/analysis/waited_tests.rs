//! Whom the waiting ranks wait for ([`Analysis::waited_on`]) and the
//! summary's first words: synthetic snapshots through [`analyze`].

use super::testutil::*;
use super::*;
use crate::snapshot::model::{Frame, MpiCall, ProcessSnapshot, Snapshot, Stacks, ThreadStack};

const LIBMPI: &str = "/opt/mpi/lib/libmpi.so.40";
const LIBC: &str = "/lib/x86_64-linux-gnu/libc.so.6";
const APP: &str = "/opt/u/app";

fn thread(tid: u64, frames: Vec<Frame>) -> ThreadStack {
    ThreadStack {
        tid,
        frames,
        ..ThreadStack::default()
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

/// Rank `r` of `n` in collective `entry` (`PMPI_Allreduce`) on the world, from main at line 88.
fn in_collective(r: i32, n: i64, entry: &str, call: &str) -> ProcessSnapshot {
    let tid = 100 + r as u64;
    with(
        process(r, vec![world(n, i64::from(r))]),
        vec![thread(
            tid,
            vec![
                frame("opal_progress", LIBMPI, None),
                frame(entry, LIBMPI, None),
                frame("main", APP, Some(88)),
            ],
        )],
        vec![MpiCall {
            tid,
            frame: 1,
            call: call.into(),
            communicator: Some("0".into()),
            ..MpiCall::default()
        }],
    )
}

/// Rank `r` of `n` in MPI_Recv from world rank `from`, tag 5, posted in its queue, at line 35.
fn in_recv(r: i32, n: i64, from: i64) -> ProcessSnapshot {
    let tid = 100 + r as u64;
    with(
        process(r, vec![world(n, i64::from(r)).recvs(vec![recv(Some(from), Some(5))])]),
        vec![thread(
            tid,
            vec![
                frame("opal_progress", LIBMPI, None),
                frame("PMPI_Recv", LIBMPI, None),
                frame("main", APP, Some(35)),
            ],
        )],
        vec![MpiCall {
            tid,
            frame: 1,
            call: "recv".into(),
            communicator: Some("0".into()),
            peer: Some(from),
            tag: Some(5),
            ..MpiCall::default()
        }],
    )
}

/// Rank `r` of `n` looping in its own `smooth` (line 31), called from main.
fn computing(r: i32, n: i64) -> ProcessSnapshot {
    with(
        process(r, vec![world(n, i64::from(r))]),
        vec![thread(
            200,
            vec![frame("smooth", APP, Some(31)), frame("main", APP, Some(60))],
        )],
        Vec::new(),
    )
}

/// Rank `r` of `n` blocked in libc's `read`, called from `wait_token` (line 40).
fn in_read(r: i32, n: i64) -> ProcessSnapshot {
    with(
        process(r, vec![world(n, i64::from(r))]),
        vec![thread(
            300,
            vec![
                frame("__GI___libc_read", LIBC, None),
                frame("read", LIBC, None),
                frame("wait_token", APP, Some(40)),
                frame("main", APP, Some(70)),
            ],
        )],
        Vec::new(),
    )
}

fn first_sentence(summary: &str) -> &str {
    summary.split("; ").next().unwrap_or(summary)
}

#[test]
fn ranks_in_a_collective_wait_for_the_rank_computing() {
    let mut ps: Vec<ProcessSnapshot> = (0..3)
        .map(|r| in_collective(r, 4, "PMPI_Allreduce", "allreduce"))
        .collect();
    ps.push(computing(3, 4));
    let a = analyze(&snapshot(ps), None);
    assert_eq!(a.verdict, Verdict::NoDeadlock, "{a:#?}");
    assert_eq!(
        a.summary,
        "no deadlock: ranks 0-2 wait in MPI_Allreduce on MPI_COMM_WORLD (app.c:88) for rank 3, which is \
         computing in smooth (app.c:31)"
    );
    assert_eq!(a.waited_on.len(), 1, "{:#?}", a.waited_on);
    let w = &a.waited_on[0];
    assert_eq!(w.ranks, vec![3]);
    assert_eq!(w.state, "computing");
    assert_eq!(w.text, "is computing in smooth (app.c:31)");
    assert_eq!(w.function.as_deref(), Some("smooth"));
    assert_eq!(w.location.as_deref(), Some("app.c:31"));
    assert_eq!(
        w.waiters,
        vec![Waiter {
            ranks: vec![0, 1, 2],
            call: Some("MPI_Allreduce".into()),
            location: Some("app.c:88".into()),
            text: "waits in MPI_Allreduce on MPI_COMM_WORLD (app.c:88)".into(),
            direct: true,
            partners_known: true,
        }]
    );
    // In the JSON, as documented.
    let v = serde_json::to_value(&a).unwrap();
    assert_eq!(v["waited_on"][0]["state"], "computing");
    assert_eq!(v["waited_on"][0]["waiters"][0]["ranks"], serde_json::json!([0, 1, 2]));
}

#[test]
fn a_chain_of_receives_ends_at_the_rank_computing() {
    let s = snapshot(vec![in_recv(0, 3, 1), in_recv(1, 3, 2), computing(2, 3)]);
    let a = analyze(&s, None);
    assert_eq!(a.verdict, Verdict::NoDeadlock, "{a:#?}");
    assert_eq!(
        a.summary,
        "no deadlock: rank 1 waits in MPI_Recv from rank 2, tag 5 on MPI_COMM_WORLD (app.c:35) for rank 2, \
         which is computing in smooth (app.c:31), and rank 0 waits in MPI_Recv from rank 1, tag 5 on \
         MPI_COMM_WORLD (app.c:35) behind it"
    );
    assert_eq!(a.waited_on.len(), 1, "{:#?}", a.waited_on);
    let w = &a.waited_on[0];
    assert_eq!(w.ranks, vec![2]);
    let waiters: Vec<(Vec<i64>, bool)> = w.waiters.iter().map(|g| (g.ranks.clone(), g.direct)).collect();
    assert_eq!(waiters, vec![(vec![1], true), (vec![0], false)]);
    assert!(w.waiters.iter().all(|g| g.call.as_deref() == Some("MPI_Recv")));
}

#[test]
fn a_rank_blocked_in_read_is_named_with_its_caller() {
    let s = snapshot(vec![in_recv(0, 2, 1), in_read(1, 2)]);
    let a = analyze(&s, None);
    // The verdict's word is as before: the rank outside MPI may still send.
    assert_eq!(a.verdict, Verdict::NoDeadlock, "{a:#?}");
    assert_eq!(
        a.summary,
        "no deadlock: rank 0 waits in MPI_Recv from rank 1, tag 5 on MPI_COMM_WORLD (app.c:35) for rank 1, \
         which is blocked outside MPI in read, called from wait_token (app.c:40)"
    );
    let w = &a.waited_on[0];
    assert_eq!(w.state, "blocked_outside_mpi");
    assert_eq!(w.function.as_deref(), Some("read"));
    assert_eq!(w.location.as_deref(), Some("app.c:40"));
}

#[test]
fn a_rank_missing_from_the_snapshot_is_gone_and_the_verdict_unknown() {
    let s = snapshot(vec![in_recv(0, 3, 2), in_recv(1, 3, 2)]);
    let a = analyze(&s, None);
    assert_eq!(a.verdict, Verdict::Unknown, "{a:#?}");
    assert_eq!(
        first_sentence(&a.summary),
        "unknown: ranks 0 and 1 wait in MPI_Recv from rank 2, tag 5 on MPI_COMM_WORLD (app.c:35) for rank 2, \
         which is not in the snapshot (exited, killed or never found)"
    );
    assert_eq!(a.waited_on.len(), 1);
    assert_eq!(a.waited_on[0].state, "gone");
    assert_eq!(a.waited_on[0].function, None);
    assert_eq!(a.waited_on[0].waiters[0].ranks, vec![0, 1]);
    assert!(!a.summary.contains("no deadlock found"), "{}", a.summary);
}

#[test]
fn several_ends_are_grouped_by_what_they_do() {
    let n = 7;
    let mut ps: Vec<ProcessSnapshot> = (0..4).map(|r| in_collective(r, n, "PMPI_Barrier", "barrier")).collect();
    ps.push(computing(4, n));
    ps.push(computing(5, n));
    ps.push(in_read(6, n));
    let a = analyze(&snapshot(ps), None);
    assert_eq!(a.verdict, Verdict::NoDeadlock, "{a:#?}");
    assert_eq!(
        a.summary,
        "no deadlock: ranks 0-3 wait in MPI_Barrier on MPI_COMM_WORLD (app.c:88) for ranks 4 and 5, which are \
         computing in smooth (app.c:31); ranks 0-3 wait in MPI_Barrier on MPI_COMM_WORLD (app.c:88) for rank \
         6, which is blocked outside MPI in read, called from wait_token (app.c:40)"
    );
    let ends: Vec<(Vec<i64>, &str)> = a
        .waited_on
        .iter()
        .map(|w| (w.ranks.clone(), w.state.as_str()))
        .collect();
    assert_eq!(ends, vec![(vec![4, 5], "computing"), (vec![6], "blocked_outside_mpi")]);
}

#[test]
fn ranks_behind_a_cycle_waiting_for_a_computing_rank_are_named_too() {
    let s = snapshot(vec![
        in_recv(0, 4, 1),
        in_recv(1, 4, 0),
        in_recv(2, 4, 3),
        computing(3, 4),
    ]);
    let a = analyze(&s, None);
    assert_eq!(a.verdict, Verdict::Deadlock, "{a:#?}");
    assert_eq!(a.cycles, vec![vec![0, 1]]);
    assert!(a.summary.starts_with("deadlock: "), "{}", a.summary);
    assert!(
        a.summary.ends_with(
            "; besides, rank 2 waits in MPI_Recv from rank 3, tag 5 on MPI_COMM_WORLD (app.c:35) for rank 3, \
             which is computing in smooth (app.c:31)"
        ),
        "{}",
        a.summary
    );
    assert_eq!(a.waited_on.len(), 1);
    assert_eq!(a.waited_on[0].waiters[0].ranks, vec![2]);
}

#[test]
fn a_healthy_job_where_nobody_waits_keeps_its_summary() {
    let s: Snapshot = snapshot(vec![computing(0, 2), computing(1, 2)]);
    let a = analyze(&s, None);
    assert_eq!(a.verdict, Verdict::NoDeadlock, "{a:#?}");
    assert!(a.waited_on.is_empty(), "{:#?}", a.waited_on);
    assert_eq!(
        a.summary,
        "no deadlock found: every pending receive has a matching send or the sender can still run"
    );
    assert!(serde_json::to_value(&a).unwrap().get("waited_on").is_none());
    // Ranks all in one collective together wait for nobody outside it.
    let all: Vec<ProcessSnapshot> = (0..3).map(|r| in_collective(r, 3, "PMPI_Barrier", "barrier")).collect();
    let a = analyze(&snapshot(all), None);
    assert!(a.waited_on.is_empty(), "{:#?}", a.waited_on);
}

#[test]
fn a_listed_process_that_exited_is_gone() {
    // The CLI lists the starter's rank 2 but finds no process for it.
    let mut gone = failed(2, "no process 4242");
    gone.communicators.clear();
    let s = snapshot(vec![in_recv(0, 3, 2), in_recv(1, 3, 2), gone]);
    let a = analyze(&s, None);
    assert_eq!(a.verdict, Verdict::Unknown, "{a:#?}");
    assert_eq!(
        first_sentence(&a.summary),
        "unknown: ranks 0 and 1 wait in MPI_Recv from rank 2, tag 5 on MPI_COMM_WORLD (app.c:35) for rank 2, \
         which has exited (its process is gone from the job)"
    );
    assert_eq!(a.waited_on[0].state, "gone");
    // A process that failed for another reason is unreadable, not gone.
    let s = snapshot(vec![in_recv(0, 3, 2), in_recv(1, 3, 2), failed(2, "permission denied")]);
    let a = analyze(&s, None);
    assert_eq!(a.waited_on[0].state, "unreadable", "{:#?}", a.waited_on);
}

#[test]
fn waiters_whose_partners_are_unknown_are_attributed_with_a_hedge() {
    // The barrier's communicator was not recovered (no argument values).
    let mut ps: Vec<ProcessSnapshot> = (0..3).map(|r| in_collective(r, 4, "PMPI_Barrier", "barrier")).collect();
    for p in &mut ps {
        p.stacks.as_mut().unwrap().calls.clear();
    }
    ps.push(computing(3, 4));
    let a = analyze(&snapshot(ps), None);
    let sentence = "ranks 0-2 wait in MPI_Barrier (app.c:88) for rank 3 (whom they wait for is not known; it is \
                    the only rank not blocked in MPI), which is computing in smooth (app.c:31)";
    assert!(
        a.summary.split_once(": ").unwrap().1.starts_with(sentence),
        "{}",
        a.summary
    );
    let w = &a.waited_on[0].waiters[0];
    assert_eq!(w.ranks, vec![0, 1, 2]);
    assert!(!w.partners_known);
}
