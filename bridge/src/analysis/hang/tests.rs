//! The hang rule on synthetic samples: a job that stands still past its
//! threshold is hung, one that moves or shows its rhythm is not.

use std::collections::BTreeMap;

use super::*;
use crate::analysis::testutil::{process, snapshot, world};
use crate::snapshot::model::{Frame, MpiCall, Stacks, ThreadStack};

const LIBMPI: &str = "/opt/mpi/lib/libmpi.so.40";
const LIBM: &str = "/lib/x86_64-linux-gnu/libm.so.6";
const APP: &str = "/opt/u/solver";

/// [`testutil::frame`](crate::analysis::testutil::frame) in `solver.c`.
fn frame(function: &str, object: &str, line: Option<u32>) -> Frame {
    Frame {
        file: line.map(|_| "solver.c".into()),
        ..crate::analysis::testutil::frame(function, object, line)
    }
}

/// A rank in `MPI_Allreduce` from `main`, its calling frames' digest `state`.
fn in_allreduce(rank: i32, state: &str) -> ProcessSnapshot {
    let mut p = process(rank, vec![world(4, i64::from(rank))]);
    p.stacks = Some(Stacks {
        threads: vec![ThreadStack {
            tid: 10,
            frames: vec![
                frame("opal_progress", LIBMPI, None),
                frame("PMPI_Allreduce", LIBMPI, None),
                frame("main", APP, Some(88)),
            ],
            ..ThreadStack::default()
        }],
        calls: vec![MpiCall {
            tid: 10,
            frame: 1,
            call: "allreduce".into(),
            state: Some(state.into()),
            ..MpiCall::default()
        }],
        ..Stacks::default()
    });
    p
}

/// A rank computing in `smooth` (innermost `inner`, a libm call or a
/// helper) called from `main`.
fn computing(rank: i32, inner: &str) -> ProcessSnapshot {
    let mut p = process(rank, vec![world(4, i64::from(rank))]);
    let mut frames = vec![];
    if inner == "exp" {
        frames.push(frame("exp", LIBM, None));
    } else {
        frames.push(frame(inner, APP, Some(12)));
    }
    frames.push(frame("smooth", APP, Some(31)));
    frames.push(frame("main", APP, Some(80)));
    p.stacks = Some(Stacks {
        threads: vec![ThreadStack {
            tid: 10,
            frames,
            ..ThreadStack::default()
        }],
        ..Stacks::default()
    });
    p
}

/// Ranks 0-2 in one allreduce (iteration `it`), rank 3 computing.
fn stuck_job(it: u32, inner: &str) -> Snapshot {
    let mut ps: Vec<ProcessSnapshot> = (0..3).map(|r| in_allreduce(r, &format!("it{it}"))).collect();
    ps.push(computing(3, inner));
    snapshot(ps)
}

fn none() -> BTreeMap<i64, u64> {
    BTreeMap::new()
}

#[test]
fn a_job_standing_still_is_hung_only_past_the_floor_and_never_on_few_samples() {
    let rule = HangRule {
        floor_ms: 60_000,
        factor: 3.0,
        ..HangRule::default()
    };
    let mut w = HangWatch::new(rule);
    // Its helpers change under `smooth`: the same place all along.
    let inner = ["exp", "update", "exp", "norm"];
    let mut last = HangState::default();
    for (i, t) in [0u64, 30_000, 59_000].iter().enumerate() {
        last = w.push(*t, &stuck_job(1, inner[i]), &none());
        assert!(!last.hung, "at {t} ms: {last:?}");
    }
    assert_eq!(last.still_ms, 59_000);
    assert_eq!(last.still_samples, 3);
    let s = w.push(60_000, &stuck_job(1, inner[3]), &none());
    assert!(s.hung, "{s:?}");
    assert_eq!(s.threshold_ms, 60_000);
    assert_eq!(s.ranks_still_ms.get(&3), Some(&60_000));
    // Two samples past the floor are not enough.
    let mut w = HangWatch::new(rule);
    w.push(0, &stuck_job(1, "exp"), &none());
    let s = w.push(120_000, &stuck_job(1, "exp"), &none());
    assert!(!s.hung && s.still_ms == 120_000, "{s:?}");
}

#[test]
fn a_job_that_moves_is_not_hung_and_its_longest_stillness_is_its_normal() {
    let mut w = HangWatch::new(HangRule {
        floor_ms: 10_000,
        factor: 3.0,
        ..HangRule::default()
    });
    // Iterations of 5 s, sampled every 5 s: every sample moved on.
    for i in 0..10u32 {
        let s = w.push(u64::from(i) * 5_000, &stuck_job(i, "exp"), &none());
        assert!(!s.hung, "{s:?}");
        assert_eq!(s.still_ms, 0);
    }
    // One long phase of 20 s (samples at 50, 55, 60, 65 s the same): not
    // hung at the floor's 10 s? It is: nothing taught otherwise yet.
    let s = w.push(55_000, &stuck_job(9, "exp"), &none());
    assert_eq!(s.still_ms, 10_000, "{s:?}");
    assert!(!s.hung, "two samples: {s:?}");
    let s = w.push(60_000, &stuck_job(9, "exp"), &none());
    assert!(s.hung, "{s:?}");
    // It moves on at 65 s: its normal is now 40 - 65 s, 25 s (from the
    // sample before the still ones to the one that moved: an upper bound).
    let s = w.push(65_000, &stuck_job(10, "exp"), &none());
    assert!(!s.hung);
    assert_eq!(s.normal_ms, 25_000);
    assert_eq!(s.threshold_ms, 75_000);
    // The same stillness again is now within what the job does.
    for t in [70_000u64, 80_000, 100_000, 139_000] {
        let s = w.push(t, &stuck_job(10, "exp"), &none());
        assert!(!s.hung, "at {t}: {s:?}");
    }
    let s = w.push(140_000, &stuck_job(10, "exp"), &none());
    assert!(s.hung, "{s:?}");
    // Elsewhere in the application is a move.
    let mut elsewhere = stuck_job(10, "exp");
    if let Some(st) = elsewhere.processes[3].stacks.as_mut() {
        st.threads[0].frames[2].line = Some(95);
    }
    assert_eq!(w.push(141_000, &elsewhere, &none()).still_ms, 0);
}

#[test]
fn unknown_stacks_or_nobody_waiting_is_never_still() {
    let mut w = HangWatch::new(HangRule {
        floor_ms: 1,
        factor: 1.0,
        ..HangRule::default()
    });
    let mut blind = stuck_job(1, "exp");
    blind.processes[1].stacks = None;
    for t in 0..5u64 {
        let s = w.push(t * 1000, &blind, &none());
        assert!(!s.hung);
        assert_eq!(s.not_still.as_deref(), Some("the stacks of rank 1 are not known"));
    }
    // Every rank computing, the same place every time: busy, not waiting.
    let busy = snapshot((0..4).map(|r| computing(r, "exp")).collect());
    let mut w = HangWatch::new(HangRule {
        floor_ms: 1,
        factor: 1.0,
        ..HangRule::default()
    });
    for t in 0..5u64 {
        let s = w.push(t * 1000, &busy, &none());
        assert!(!s.hung);
        assert_eq!(s.not_still.as_deref(), Some("no rank waits in MPI"));
    }
}

#[test]
fn a_rank_stopped_by_a_signal_is_never_a_hang() {
    let mut w = HangWatch::new(HangRule {
        floor_ms: 1,
        factor: 1.0,
        ..HangRule::default()
    });
    let mut held = stuck_job(1, "exp");
    held.processes[2].os = Some(crate::snapshot::model::OsState {
        state: "T".into(),
        wchan: Some("do_signal_stop".into()),
        cpu_ms: 5,
        io_bytes: None,
        ..Default::default()
    });
    for t in 0..5u64 {
        let s = w.push(t * 1000, &held, &none());
        assert!(!s.hung, "{s:?}");
        assert_eq!(
            s.not_still.as_deref(),
            Some("rank 2 is stopped by a signal (state T: it does nothing until continued), which is no hang")
        );
    }
    // Continued, and still where it was: stillness counts from then on.
    let going = stuck_job(1, "exp");
    let s = w.push(5_000, &going, &none());
    assert!(!s.hung && s.not_still.is_none(), "{s:?}");
}

#[test]
fn a_changed_queue_is_a_move() {
    let mut w = HangWatch::new(HangRule {
        floor_ms: 1,
        factor: 1.0,
        ..HangRule::default()
    });
    let a = stuck_job(1, "exp");
    let mut b = a.clone();
    b.processes[0].communicators[0].name = "other".into();
    for (t, s) in [(0u64, &a), (1000, &b), (2000, &a), (3000, &b)] {
        let st = w.push(t, s, &none());
        assert!(!st.hung, "{st:?}");
    }
}

#[test]
fn cpu_used_while_still_is_kept_and_said() {
    let mut w = HangWatch::new(HangRule {
        floor_ms: 1_000,
        factor: 3.0,
        ..HangRule::default()
    });
    let cpu = |c3: u64| BTreeMap::from([(0, 5), (3, c3)]);
    w.push(0, &stuck_job(1, "exp"), &cpu(100));
    w.push(1_000, &stuck_job(1, "exp"), &cpu(1_100));
    let s = w.push(2_000, &stuck_job(1, "exp"), &cpu(2_090));
    // Rank 3 computes all along, as in a long serial phase: suspected, not
    // yet hung.
    assert!(!s.hung && s.suspected, "{s:?}");
    assert_eq!(s.computing, vec![3]);
    assert_eq!(s.threshold_ms, 600_000);
    assert_eq!(s.suspect_ms, 1_000);
    assert_eq!(s.cpu_while_still_ms.get(&3), Some(&1_990));
    assert_eq!(s.cpu_while_still_ms.get(&0), Some(&0));
    let a = crate::analysis::analyze(&stuck_job(1, "exp"), None);
    let words = hang_words(&s, &a, w.rule());
    // The rank the others wait for first, what it does, for how long and
    // on what CPU; then its waiters.
    assert!(
        words.starts_with(
            "rank 3 has been computing in exp, called from smooth (solver.c:31) for 2 s, \
             using the CPU all along; ranks 0-2 have waited for it in MPI_Allreduce (solver.c:88) for 2 s; \
             nothing in the job changed for 2 s (3 samples)"
        ),
        "{words}"
    );
    assert!(!words.contains("spinning"), "{words}");
    assert!(
        words.contains("before, it never stood still across two samples"),
        "{words}"
    );
    assert!(
        words.ends_with(
            "it is suspected hung after max(1 s, 3 × that) = 1 s, and while rank 3 computes outside MPI \
             (a long serial phase looks the same) called hung only after 10 min"
        ),
        "{words}"
    );
    // Past the rule's compute_ms, hung.
    let mut w = HangWatch::new(HangRule {
        floor_ms: 1_000,
        factor: 3.0,
        compute_ms: 3_000,
    });
    for (t, c) in [(0, 100), (1_000, 1_100), (2_000, 2_090)] {
        assert!(!w.push(t, &stuck_job(1, "exp"), &cpu(c)).hung);
    }
    let s = w.push(3_000, &stuck_job(1, "exp"), &cpu(3_090));
    assert!(s.hung && !s.suspected, "{s:?}");
}

#[test]
fn a_rank_reading_or_writing_in_one_place_moves() {
    // Rank 3 in the same frames, its I/O counters growing: a serial phase
    // reading its input is no hang however long it lasts.
    let mut w = HangWatch::new(HangRule {
        floor_ms: 1,
        factor: 1.0,
        compute_ms: 1,
    });
    let at = |io: u64| {
        let mut s = stuck_job(1, "read");
        s.processes[3].os = Some(crate::snapshot::model::OsState {
            state: "D".into(),
            wchan: None,
            cpu_ms: 5,
            io_bytes: Some(io),
            ..Default::default()
        });
        s
    };
    for t in 0..5u64 {
        let st = w.push(t * 1000, &at(t * 4096), &none());
        assert!(!st.hung && !st.suspected, "{st:?}");
        if t > 0 {
            assert!(
                st.not_still
                    .as_deref()
                    .is_some_and(|n| n.contains("rank 3 read or wrote")),
                "{st:?}"
            );
        }
    }
    // The counters standing still: still, and hung.
    let mut last = None;
    for t in 5..9u64 {
        last = Some(w.push(t * 1000, &at(5 * 4096), &none()));
    }
    assert!(last.as_ref().is_some_and(|s| s.hung), "{last:?}");
}

#[test]
fn durations_in_words() {
    assert_eq!(duration_words(850), "850 ms");
    assert_eq!(duration_words(42_000), "42 s");
    assert_eq!(duration_words(250_000), "4 min 10 s");
    assert_eq!(duration_words(120_000), "2 min");
    assert_eq!(duration_words(7_500_000), "2 h 5 min");
    assert_eq!(duration_words(7_200_000), "2 h");
}

#[test]
fn an_exited_rank_stays_where_it_is() {
    let mut w = HangWatch::new(HangRule {
        floor_ms: 1_000,
        factor: 3.0,
        ..HangRule::default()
    });
    let mut job = stuck_job(1, "exp");
    job.processes[3].stacks = None;
    job.processes[3].error = Some("no process 4242".into());
    for t in [0u64, 500] {
        assert!(!w.push(t, &job, &none()).hung);
    }
    let s = w.push(1_000, &job, &none());
    assert!(s.hung, "{s:?}");
    assert_eq!(s.not_still, None);
}

#[test]
fn with_no_rank_waited_on_the_words_say_where_the_ranks_are() {
    let mut w = HangWatch::new(HangRule {
        floor_ms: 1_000,
        factor: 3.0,
        ..HangRule::default()
    });
    // Every rank in MPI_Allreduce: no rank at the end of the waits.
    let job = snapshot((0..4).map(|r| in_allreduce(r, "it1")).collect());
    let mut s = HangState::default();
    for t in [0u64, 1_000, 2_000] {
        s = w.push(t, &job, &BTreeMap::from([(0, 10 + t)]));
    }
    assert!(s.hung, "{s:?}");
    let a = crate::analysis::analyze(&job, None);
    assert!(a.waited_on.is_empty(), "{:?}", a.waited_on);
    let words = hang_words(&s, &a, w.rule());
    assert!(
        words.starts_with("nothing in the job changed for 2 s (3 samples): no rank moved and no queue changed (ranks 0-3 are in MPI_Allreduce"),
        "{words}"
    );
    assert!(
        words.contains("; rank 0 used the CPU all along (spinning in one place);"),
        "{words}"
    );
}
