//! Cross-rank analysis of a whole-job snapshot: are the ranks stuck waiting
//! on each other?
//!
//! 1. **Groups** ([`infer_groups`](crate::analysis::infer_groups)): MPICH's debug library has no
//!    `mqs_get_comm_group`, so the world ranks of a communicator's members
//!    are inferred across processes, keyed by `(name, size)` where that is
//!    unambiguous.
//! 2. **Matching**: each pending receive is matched against the sends its
//!    source still lists (pending, or complete as MPICH keeps small eager
//!    sends) and the unexpected messages already at the receiver; each
//!    pending send against the receiver's posted receives.
//! 3. **Wait-for graph** over world ranks: an unmatched receive from a
//!    specific source, or an unmatched pending send, is an AND edge; an
//!    unmatched `MPI_ANY_SOURCE` receive is a set of OR edges to every
//!    other member of its communicator.
//! 4. **Reduction** for the AND-OR model frees every rank whose waits can
//!    be satisfied by free ranks; what stays is deadlocked, reported as
//!    cycles (in wait order, from the smallest rank) and ranks blocked
//!    behind them. Unknown ranks (unreadable, missing) may be free.
//! 5. **Two samples**: a deadlock stands only if the operations behind it
//!    are the same in both; changed queues mean the job is progressing.
//! 6. **Where each rank is** (`calls.rs`, with call stacks): a rank
//!    computing outside MPI is free; one inside a blocking MPI call waits
//!    as the call says (its own operation, any one of `MPI_Waitany`'s, the
//!    members of a collective's communicator not in it, the receiver of a
//!    synchronous send the queues do not list). Waits form groups, a rank
//!    is freed by any one group (threads, `MPI_Waitany`). With two samples
//!    in which every rank sits in the same blocking calls and nothing
//!    changed or can match, the job is stalled: a deadlock, also when a
//!    collective's communicator could not be recovered.
//! 7. **Whom they wait for** (`waited.rs`): every rank blocked in MPI is
//!    followed through the ranks it waits on that are blocked in MPI too,
//!    to the ranks that are not (computing, blocked outside MPI, gone,
//!    unreadable): [`Analysis::waited_on`], named first in the summary.
//!
//! ```
//! use mpiq::analysis::{analyze, Verdict};
//! use mpiq::render::verdict::render_text;
//! let snapshot = mpiq::Snapshot::default();
//! let a = analyze(&snapshot, None);
//! assert_eq!(a.verdict, Verdict::Unknown); // no process: nothing to say
//! print!("{}", render_text(&a));
//! ```
//!
//! What the analysis cannot see: messages in flight or eager sends the
//! library no longer lists, and, without stacks, whether a rank is blocked
//! in an MPI call at all (a rank with a pending `MPI_Irecv` may be
//! computing). A second sample filters transient states.
#![deny(missing_docs)]

mod calls;
mod graph;
mod groups;
pub mod hang;
mod inputs;
mod job;
mod matching;
mod missing;
mod model;
mod progress;
mod recorded;
mod verdict;
mod waited;
mod words;

#[cfg(test)]
mod library_tests;
#[cfg(test)]
mod python_tests;
#[cfg(test)]
mod recorder_tests;
#[cfg(test)]
mod stack_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod testutil;
#[cfg(test)]
mod waited_tests;

pub use calls::RankWhere;
pub use model::{Analysis, Edge, EdgeKind, OpKind, Unmatched, Verdict, WaitedOn, Waiter};
// The words of ranks, tags and communicators, as the renderers of the
// analysis (`crate::render::verdict`) say them too.
pub(crate) use job::comm_words;
pub(crate) use recorded::comm_name as recorded_comm_name;
pub(crate) use words::{ranks_words, tag_words};

use crate::snapshot::model::Snapshot;

/// Most cycles listed in [`Analysis::cycles`] (a note says when more exist).
pub const MAX_CYCLES: usize = 100;

/// Most edges listed in [`Analysis::edges`] (a note says when more exist;
/// the verdict uses them all).
pub const MAX_EDGES: usize = 20_000;

/// Analyses a whole-job snapshot; with a `previous` sample of the same job,
/// reports a deadlock only if the operations behind it did not change.
///
/// Neither snapshot is modified: groups are inferred on a copy.
pub fn analyze(current: &Snapshot, previous: Option<&Snapshot>) -> Analysis {
    analyze_samples(current, previous, None)
}

/// [`analyze`], with the time between the two samples for the notes
/// ("the queues changed between two samples 200 ms apart").
pub fn analyze_samples(current: &Snapshot, previous: Option<&Snapshot>, interval_ms: Option<u64>) -> Analysis {
    analyze_owned(current.clone(), previous, interval_ms).0
}

/// [`analyze_samples`] on a snapshot it may keep: no copy of it is made
/// (at 100,000 ranks the copy cost more than the matching), and it comes
/// back with its groups inferred ([`infer_groups`]), as a report shows it.
pub fn analyze_owned(
    mut snap: Snapshot,
    previous: Option<&Snapshot>,
    interval_ms: Option<u64>,
) -> (Analysis, Snapshot) {
    // The flight recorder's queues where the MPI gives none, in both
    // samples alike (the comparison of their queues must see the same).
    let mut notes = recorded::apply(&mut snap);
    notes.extend(recorded::collective_notes(&snap));
    notes.extend(recorded::agreement_notes(&snap));
    let prev_recorded = previous
        .filter(|p| {
            p.processes
                .iter()
                .any(|q| q.queues_missing.is_some() && q.recorder.is_some())
        })
        .map(|p| {
            let mut p = p.clone();
            recorded::apply(&mut p);
            p
        });
    let previous = prev_recorded.as_ref().or(previous);
    let report = groups::infer(&mut snap);
    notes.extend(report.note());
    let ids = groups::identify(&snap);
    let mut job = job::Job::new(&snap);
    notes.append(&mut job.notes);
    let mut matching = matching::match_ops(&snap, &job, &ids);
    for w in &matching.waits {
        for &r in w.target.ranks() {
            job.add_referenced(r);
        }
    }
    notes.append(&mut matching.notes);
    // Where each rank is, now and in the previous sample.
    let mut places = calls::places(&snap, &job);
    let before = previous.map(|prev| calls::places(prev, &job::Job::new(prev)));
    if let Some(b) = &before {
        calls::carry_args(&mut places, b, &snap, &job);
    }
    let confirmed = |r: i64| {
        let (Some(b), Some(calls::Place::InMpi(now))) = (&before, places.get(&r)) else {
            return false;
        };
        matches!(b.get(&r), Some(calls::Place::InMpi(then)) if calls::same_calls(now, then))
    };
    let stopped = stopped_ranks(&snap, &job, previous);
    // Starving matters to a rank inside MPI, whose message may be on its
    // way; one computing in its own code is free whatever it gets.
    let mut starved = starved_ranks(&snap, &job, previous);
    starved.retain(|r, _| matches!(places.get(r), Some(calls::Place::InMpi(_))));
    let scene = calls::Scene {
        snap: &snap,
        job: &job,
        ids: &ids,
        places: &places,
        confirmed: &confirmed,
        stopped: &stopped,
        absents: Default::default(),
    };
    let grouped = calls::group(&scene, std::mem::take(&mut matching.waits));
    matching.waits = grouped.waits;
    let mut sets_seen = std::collections::HashSet::new();
    for w in &matching.waits {
        if w.target.shared().is_some_and(|k| !sets_seen.insert(k)) {
            continue; // a shared set's members, once
        }
        for &r in w.target.ranks() {
            job.add_referenced(r);
        }
    }
    let progress = previous.map(|prev| {
        let mut p = progress::compare(&snap, prev, &matching.waits);
        if let Some(b) = &before {
            for (r, why) in calls::moved(&places, b) {
                p.unconfirmed.remove(&r);
                p.changed.entry(r).or_insert(why);
            }
        }
        p
    });
    let all_confirmed = job.procs.keys().all(|&r| confirmed(r));
    // Ranks whose MPI gives no queues, known from their stacks alone.
    let stacks_only: std::collections::BTreeSet<i64> = job
        .procs
        .iter()
        .filter(|(_, &pi)| {
            let p = &snap.processes[pi];
            p.queues_missing.is_some()
                && !recorded::recorded(p)
                && p.stacks.as_ref().is_some_and(|s| !s.threads.is_empty())
        })
        .map(|(&r, _)| r)
        .collect();
    let analysis = verdict::conclude(inputs::Inputs {
        job: &job,
        matching,
        progress,
        interval_ms,
        notes,
        stacks: inputs::StackFacts {
            snap: &snap,
            places: &places,
            free: grouped.free,
            maybe: grouped.maybe,
            all_confirmed,
            stacks_only,
            stopped,
            starved,
        },
    });
    (analysis, snap)
}

/// Less time on a CPU than this between two samples, while ready to run
/// for [`STARVED_WAIT_US`] or more, and a rank has not had the chance to
/// show whether it moves. Taking in a message that is on its way takes a
/// poll, microseconds: a rank that ran this long had the chance. (A
/// deadlocked job's polling ranks at the lowest priority, beside two busy
/// builds on 2 cores, got about 0.5 ms of every 500; with three busy loops
/// beside them, 0.1 ms.)
const STARVED_RUN_US: u64 = 200;
/// See [`STARVED_RUN_US`].
const STARVED_WAIT_US: u64 = 10_000;

/// The ranks that barely ran between the previous sample and this one
/// though they were ready to (`OsState::run_us` and `wait_us`: a crowded
/// node, or ranks at a low priority under busy ones), with their time on a
/// CPU and waiting for one then, in microseconds. A healthy job whose ranks
/// get no CPU looks the same in both samples, its messages on their way
/// and not yet taken in: nothing they wait for makes them part of a
/// deadlock until they have run. Only a rank the kernel showed ready to
/// run (`R`) is: one asleep in MPI (a blocking wait) waits for no CPU, and
/// a deadlocked rank that polls gets it.
fn starved_ranks(
    snap: &crate::snapshot::model::Snapshot,
    job: &job::Job,
    previous: Option<&crate::snapshot::model::Snapshot>,
) -> std::collections::BTreeMap<i64, (u64, u64)> {
    let Some(prev) = previous else {
        return Default::default();
    };
    let before = job::Job::new(prev);
    job.procs
        .iter()
        .filter_map(|(&r, &pi)| {
            let now = snap.processes.get(pi)?.os.as_ref()?;
            // Ready to run when read. (mpiq's own stop and release wake a
            // sleeping rank's threads, which then wait for a CPU a moment
            // on a busy machine: that is no starving.)
            if now.state != "R" {
                return None;
            }
            let then = prev.processes.get(*before.procs.get(&r)?)?.os.as_ref()?;
            let ran = now.run_us?.checked_sub(then.run_us?)?;
            let waited = now.wait_us?.checked_sub(then.wait_us?)?;
            (ran < STARVED_RUN_US && waited >= STARVED_WAIT_US).then_some((r, (ran, waited)))
        })
        .collect()
}

/// The ranks the kernel showed stopped by a signal (`T`, read before mpiq
/// stopped them) in this sample or the previous one: they do nothing until
/// continued, so nothing they wait for makes them part of a deadlock, and a
/// job that stands still around them is not stalled by itself.
fn stopped_ranks(
    snap: &crate::snapshot::model::Snapshot,
    job: &job::Job,
    previous: Option<&crate::snapshot::model::Snapshot>,
) -> std::collections::BTreeSet<i64> {
    let stopped_in = |s: &crate::snapshot::model::Snapshot, j: &job::Job| -> Vec<i64> {
        j.procs
            .iter()
            .filter(|(_, &pi)| calls::process_stopped(s, pi))
            .map(|(&r, _)| r)
            .collect()
    };
    let mut out: std::collections::BTreeSet<i64> = stopped_in(snap, job).into_iter().collect();
    if let Some(prev) = previous {
        out.extend(stopped_in(prev, &job::Job::new(prev)));
    }
    out
}

/// Fills `world_ranks` of communicators where the library gave none, from
/// what every process says of its own place in them, and sets
/// `world_ranks_source = "inferred"`; then fills the null `peer.world` and
/// `actual.world` of the operations on those communicators.
///
/// A communicator is keyed by `(name, size)`; a key is used only when no
/// process lists two communicators with it (MPICH's `--unnamed--` ones stay
/// unknown) and no two world ranks claim one local rank (or one world rank
/// two). Positions no process claims stay null; data the library gave is
/// never overwritten.
pub fn infer_groups(snapshot: &mut Snapshot) {
    groups::infer(snapshot);
}
