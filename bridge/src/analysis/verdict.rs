//! The verdict: runs the reductions over the waits, names the cycles, and
//! says what it all means in plain words.
//!
//! `deadlock` when some readable ranks cannot be freed even assuming the
//! best of everything unknown (and, with two samples, their waits did not
//! change); else `unknown` when a rank could not be read or some rank is
//! freed only by assuming the best; else `no_deadlock`.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::calls::{ranks_said, where_list, Place};
use super::graph::{self, Assume, Blocking, Facts};
use super::inputs::{digested, Inputs};
use super::job::{comm_words, Job};
use super::matching::{Target, Wait};
use super::model::{Analysis, Edge, EdgeKind, Evidence, OpKind, Verdict};
use super::words::{ranks_words, tag_words};
use super::{waited, MAX_CYCLES, MAX_EDGES};
use crate::snapshot::model::MissingReason;
use crate::stacks::names::CallClass;

/// Most reasons for undecided waits listed in the notes.
const NOTE_REASONS: usize = 20;

/// Most steps of the first cycle the summary spells out.
const SUMMARY_STEPS: usize = 10;

/// The stall rule (docs/design/stacks.md §5.5): with two samples, every
/// rank readable and inside a blocking MPI call in the same place in both,
/// no queue changed, nothing satisfied, and not all in one collective of
/// the same name: no rank can make progress. The reason, when it holds.
///
/// A rank whose MPI gives no queues (stacks-only) counts when its stacks
/// show it in a blocking call that is not a test loop, with the same
/// calling frames' contents in both samples (a digest of their registers
/// and stack, [`crate::stacks::state`]): that is all its queues would have
/// added to "nothing changed".
///
/// Not when two ranks without queues could be the two ends of one transfer
/// still on its way (one in a call that may send, another in one that may
/// receive, [`super::missing::transfer_possible`]): a large message moving
/// keeps both in the same place, and without the queues nothing shows it
/// move. That is [`Stall::MaybeTransfer`].
fn stalled(inp: &Inputs<'_>, nodes: &BTreeSet<i64>, unknown: &BTreeSet<i64>) -> Option<Stall> {
    let st = &inp.stacks;
    let p = inp.progress.as_ref()?;
    // A rank stopped by a signal stands still because it is stopped; one
    // starved of the CPU because it did not run.
    if nodes
        .iter()
        .any(|r| st.stopped.contains(r) || st.starved.contains_key(r))
    {
        return None;
    }
    let unknown_queues = unknown.iter().any(|r| !st.stacks_only.contains(r));
    if !p.changed.is_empty() || !p.unconfirmed.is_empty() || unknown_queues || !st.free.is_empty() {
        return None;
    }
    if !st.all_confirmed || nodes.iter().any(|r| !matches!(st.places.get(r), Some(Place::InMpi(_)))) {
        return None;
    }
    for r in &st.stacks_only {
        let Some(Place::InMpi(calls)) = st.places.get(r) else {
            return None;
        };
        let sure = |c: &super::calls::Call| !matches!(c.class, CallClass::Poll { .. }) && digested(c);
        if !calls.iter().all(sure) {
            return None;
        }
    }
    let mut names: BTreeSet<&str> = BTreeSet::new();
    let mut all_collective = true;
    for place in st.places.values() {
        if let Place::InMpi(calls) = place {
            for c in calls {
                names.insert(c.name.as_str());
                all_collective &= matches!(
                    c.class,
                    CallClass::Collective { .. } | CallClass::CommConstruct | CallClass::InitFinalize
                );
            }
        }
    }
    if all_collective && names.len() == 1 {
        return None; // maybe one collective that completes
    }
    let what = if st.stacks_only.is_empty() {
        "nothing changed"
    } else if st.stacks_only.len() == nodes.len() {
        "neither their stacks nor their calling frames changed"
    } else {
        "neither their queues nor their stacks changed"
    };
    if super::missing::transfer_possible(inp).is_some() {
        return Some(Stall::MaybeTransfer);
    }
    Some(Stall::Holds(format!(
        "no rank can make progress: every rank is blocked inside MPI and {what} between {}",
        interval_words(inp.interval_ms)
    )))
}

/// Without queues (a packaged MPI) every rank is unknown; when each one
/// moved between the two samples (or computes), none of them waits for
/// good: the job is seen to progress. So too when one rank alone did not
/// move and waits in MPI: a deadlock needs two ranks that do not move, and
/// whomever it waits for moves. So too when the ranks that did not move are
/// all blocked outside MPI (a write to a file system that is slow, or never
/// answers) while the others move or compute: no rank waits inside MPI, so
/// none waits for another (the next sample, once the others wait on them,
/// names them). Not with a rank stopped by a signal, nor with any rank
/// unknown for another reason (unread). `Some(the ranks that did not
/// move)` when it holds.
fn every_rank_moves(inp: &Inputs<'_>, nodes: &BTreeSet<i64>, unknown: &BTreeSet<i64>) -> Option<Vec<i64>> {
    let p = inp.progress.as_ref()?;
    let st = &inp.stacks;
    let still: Vec<i64> = nodes
        .iter()
        .filter(|r| !p.changed.contains_key(r) && !st.free.contains(r))
        .copied()
        .collect();
    let one_waits = match still.as_slice() {
        [] => true,
        [r] if nodes.len() >= 3 && matches!(st.places.get(r), Some(Place::InMpi(_))) => true,
        s => s.len() < nodes.len() && s.iter().all(|r| matches!(st.places.get(r), Some(Place::Idle(_)))),
    };
    (!nodes.is_empty() && st.stopped.is_empty() && unknown.iter().all(|r| st.stacks_only.contains(r)) && one_waits)
        .then_some(still)
}

/// "No deadlock: the job is progressing", with who moved and where the
/// ranks that did not move wait (at most four places each).
fn moved_words(inp: &Inputs<'_>, words: &str) -> String {
    let Some(p) = &inp.progress else {
        return format!("no deadlock: {words}");
    };
    let st = &inp.stacks;
    let moved: Vec<i64> = p.changed.keys().copied().collect();
    let waiting: Vec<i64> = st
        .places
        .iter()
        .filter(|(r, place)| matches!(place, Place::InMpi(_)) && !p.changed.contains_key(r))
        .map(|(&r, _)| r)
        .collect();
    let mut out = format!("no deadlock: {words}");
    if let Some((r, why)) = p.changed.iter().next() {
        if moved.len() == 1 {
            out.push_str(&format!(" (rank {r}: {why})"));
        } else {
            out.push_str(&format!(" ({} moved; rank {r}: {why})", ranks_words(&moved)));
        }
    }
    if let Some(w) = ranks_said(st.snap, inp.job, st.places, &waiting, 4) {
        out.push_str(&format!("; {w}"));
    }
    out
}

/// What is said of ranks polling on one sample.
const POLL_WORDS: &str = "a test or probe returns at once, and one sample cannot tell whether they keep calling it: a \
                          second sample would tell whether they move";

/// The ranks in a test or probe call (`MPI_Test`, `MPI_Iprobe`) with no
/// wait the queues resolve: on one sample, whether they poll for ever is
/// not known.
fn polling_ranks(inp: &Inputs<'_>, nodes: &BTreeSet<i64>, waits: &[Wait]) -> Vec<i64> {
    nodes
        .iter()
        .copied()
        .filter(|r| {
            let Some(Place::InMpi(calls)) = inp.stacks.places.get(r) else {
                return false;
            };
            calls.iter().any(|c| matches!(c.class, CallClass::Poll { .. })) && !waits.iter().any(|w| w.rank == *r)
        })
        .collect()
}

/// What the stall rule found, when its conditions held.
enum Stall {
    /// No rank can make progress: why.
    Holds(String),
    /// It would hold, but two ranks could be one transfer on its way: the
    /// summary says so ([`super::missing`]).
    MaybeTransfer,
}

/// One wait in words, as seen from its rank.
pub(crate) fn wait_words(w: &Wait) -> String {
    if let Some(words) = &w.words {
        return words.clone();
    }
    let on = format!("on {} {}", comm_words(&w.communicator), tag_words(w.tag));
    let who = |b: i64| {
        if b == w.rank {
            "itself".to_string()
        } else {
            format!("rank {b}")
        }
    };
    match (&w.target, w.op) {
        (Target::Rank(b), OpKind::Receive) => format!("rank {} waits for {} {on}", w.rank, who(*b)),
        (Target::Rank(b), OpKind::Send) => {
            format!("rank {} waits for {} to receive its send {on}", w.rank, who(*b))
        }
        (Target::AnyOf { ranks, .. }, _) => format!(
            "rank {} waits for any of {} (ANY_SOURCE) {on}",
            w.rank,
            ranks_words(ranks)
        ),
        (Target::Unresolved { .. }, OpKind::Receive) => format!("rank {} waits for an unknown rank {on}", w.rank),
        (Target::Unresolved { .. }, OpKind::Send) => {
            format!("rank {} waits for an unknown rank to receive its send {on}", w.rank)
        }
        (Target::Rank(b), _) => format!("rank {} waits for {}", w.rank, who(*b)),
        (Target::Unresolved { .. }, _) => format!("rank {} waits for an unknown rank", w.rank),
        (Target::AllOf(members), _) => format!("rank {} waits for {}", w.rank, ranks_words(members)),
    }
}

/// The wait `w` in words, as one for member `b` of its target: a shared
/// set's wait names only `b` (a cycle's step, an edge).
pub(crate) fn wait_words_to(w: &Wait, b: i64) -> String {
    match (&w.target, &w.one) {
        (Target::AllOf(_), Some(one)) => format!("{}rank {b}{}", one.0, one.1),
        (Target::AllOf(_), None) => format!("rank {} waits for rank {b}", w.rank),
        _ => wait_words(w),
    }
}

/// The wait behind the blocking edge `a → b`.
fn step<'w>(waits: &'w [Wait], of: &HashMap<i64, Vec<usize>>, adj: &Blocking, a: i64, b: i64) -> Option<&'w Wait> {
    let (and, or) = graph::edge(adj, a, b)?;
    of.get(&a)?
        .iter()
        .map(|&i| &waits[i])
        .filter(|w| w.certain)
        .find(|w| match &w.target {
            Target::Rank(t) => and && *t == b,
            Target::AnyOf { ranks, .. } => or && !and && ranks.contains(&b),
            Target::AllOf(members) => members.binary_search(&b).is_ok(),
            Target::Unresolved { .. } => false,
        })
}

/// The edges of the certain waits (at most [`MAX_EDGES`]).
fn edges(waits: &[Wait], notes: &mut Vec<String>) -> Vec<Edge> {
    let mut out = Vec::new();
    let mut left = 0usize;
    for w in waits.iter().filter(|w| w.certain) {
        if w.unmatched.is_none() && w.at.is_some() {
            continue;
        }
        let (kind, to): (EdgeKind, &[i64]) = match &w.target {
            Target::Rank(b) => (EdgeKind::And, std::slice::from_ref(b)),
            Target::AnyOf { ranks, .. } => (EdgeKind::Or, ranks),
            Target::AllOf(members) => (EdgeKind::And, members),
            Target::Unresolved { .. } => continue,
        };
        let room = MAX_EDGES - out.len();
        left += to.len().saturating_sub(room);
        for &b in to.iter().take(room) {
            let words = match &w.target {
                Target::AllOf(_) => Some(wait_words_to(w, b)),
                _ => w.words.clone(),
            };
            out.push(Edge {
                from: w.rank,
                to: b,
                kind,
                communicator: w.communicator.clone(),
                tag: w.tag,
                op: w.op,
                wait: w.unmatched,
                words,
            });
        }
    }
    if left > 0 {
        notes.push(format!(
            "the edge list stops at {MAX_EDGES} edges; {left} more are left out (the analysis used them all)"
        ));
    }
    out
}

/// Why an undecided rank may be stuck.
fn why_undecided(rank: i64, waits: &[Wait], worst_free: &BTreeSet<i64>, inp: &Inputs<'_>) -> String {
    if let Some(why) = inp.progress.as_ref().and_then(|p| p.unconfirmed.get(&rank)) {
        return format!("its wait is not confirmed by the previous sample: {why}");
    }
    for w in waits.iter().filter(|w| w.rank == rank) {
        if !w.certain {
            if let Some(why) = &w.why {
                return why.clone();
            }
        }
        match &w.target {
            // A rank, or every member of a set: the ones that may be stuck.
            Target::Rank(_) | Target::AllOf(_) => {
                let stuck: Vec<i64> = w
                    .target
                    .ranks()
                    .iter()
                    .filter(|b| !worst_free.contains(b))
                    .copied()
                    .collect();
                match stuck[..] {
                    [] => {}
                    [b] if inp.job.unknown.contains_key(&b) => {
                        return format!("it waits for rank {b}, whose queues could not be read")
                    }
                    [b] => return format!("it waits for rank {b}, which may be stuck"),
                    _ => return format!("it waits for {}, which may be stuck", ranks_words(&stuck)),
                }
            }
            Target::AnyOf { ranks, .. } if !ranks.iter().any(|b| worst_free.contains(b)) => {
                return format!(
                    "{}, and none of them is known to run",
                    wait_words(w).replacen(&format!("rank {rank} "), "it ", 1)
                );
            }
            Target::Unresolved { .. } => {
                if let Some(why) = &w.why {
                    return why.clone();
                }
            }
            _ => {}
        }
    }
    "it depends on ranks whose state is unknown".to_string()
}

/// The ranks stopped by a signal, each with where it stopped.
fn stopped_said(inp: &Inputs<'_>, nodes: &BTreeSet<i64>) -> Vec<String> {
    let st = &inp.stacks;
    nodes
        .iter()
        .filter(|r| st.stopped.contains(r))
        .map(|&r| {
            let words = super::calls::stopped_words(r);
            match ranks_said(st.snap, inp.job, st.places, &[r], 1) {
                Some(w) => format!("{words}; where it stopped: {w}"),
                None => words,
            }
        })
        .collect()
}

/// The ranks starved of the CPU between the samples, in one clause.
fn starved_said(inp: &Inputs<'_>, nodes: &BTreeSet<i64>) -> Option<String> {
    let starved: Vec<(i64, (u64, u64))> = nodes
        .iter()
        .filter_map(|r| inp.stacks.starved.get(r).map(|&t| (*r, t)))
        .collect();
    let ranks: Vec<i64> = starved.iter().map(|&(r, _)| r).collect();
    let ran = starved.iter().map(|&(_, (ran, _))| ran).max()?;
    let waited = starved.iter().map(|&(_, (_, waited))| waited).max()?;
    let (who, moves, runs) = if ranks.len() == 1 {
        (format!("rank {}", ranks[0]), "it moves", "it runs")
    } else {
        (super::words::ranks_words(&ranks), "they move", "they run")
    };
    Some(format!(
        "{who} barely ran between {}: at most {:.1} ms on a CPU, and up to {} ms ready to run but waiting \
         for one (a crowded node): whether {moves} is not known until {runs}, and no deadlock is \
         said of ranks that could not run",
        interval_words(inp.interval_ms),
        ran as f64 / 1000.0,
        waited / 1000
    ))
}

/// The unknown ranks in words, grouped by reason.
fn unknown_words(job: &Job) -> String {
    let mut by_reason: Vec<(String, Vec<i64>)> = Vec::new();
    for (r, why) in &job.unknown {
        match by_reason.iter_mut().find(|(w, _)| w == why) {
            Some((_, ranks)) => ranks.push(*r),
            None => by_reason.push((why.clone(), vec![*r])),
        }
    }
    let ranks: Vec<i64> = job.unknown.keys().copied().collect();
    let reasons: Vec<String> = by_reason
        .iter()
        .take(4)
        .map(|(why, rs)| {
            if by_reason.len() == 1 {
                why.clone()
            } else {
                format!("{}: {why}", ranks_words(rs))
            }
        })
        .collect();
    let more = if by_reason.len() > 4 { "; ..." } else { "" };
    format!(
        "the queues of {} could not be read ({}{more})",
        ranks_words(&ranks),
        reasons.join("; ")
    )
}

fn interval_words(ms: Option<u64>) -> String {
    ms.map_or_else(|| "two samples".to_string(), |ms| format!("two samples {ms} ms apart"))
}

/// Draws the conclusion.
pub(crate) fn conclude(inp: Inputs<'_>) -> Analysis {
    let job = inp.job;
    let waits = &inp.matching.waits;
    let mut notes = inp.notes.clone();
    let nodes = job.nodes();
    let unknown: BTreeSet<i64> = job.unknown.keys().copied().collect();
    let none = BTreeSet::new();
    let progressed: BTreeSet<i64> = inp
        .progress
        .as_ref()
        .map(|p| p.changed.keys().copied().collect())
        .unwrap_or_default();
    let mut unconfirmed: BTreeSet<i64> = inp
        .progress
        .as_ref()
        .map(|p| p.unconfirmed.keys().copied().collect())
        .unwrap_or_default();
    unconfirmed.extend(inp.stacks.maybe.keys().copied());
    // A stopped rank, like an unread one, is free in the best case only:
    // what it does once continued is not known.
    // So is one starved of the CPU: what it does once it runs is not seen.
    let mut held: BTreeSet<i64> = unknown.union(&inp.stacks.stopped).copied().collect();
    held.extend(inp.stacks.starved.keys().copied());
    let facts = Facts {
        nodes: &nodes,
        waits,
        unknown: &held,
        progressed: &progressed,
        unconfirmed: &unconfirmed,
        free: &inp.stacks.free,
    };
    let best = graph::reduce(&facts, Assume::Best);
    let worst = graph::reduce(&facts, Assume::Worst);
    let mut dead: BTreeSet<i64> = nodes.difference(&best).copied().collect();
    let mut undecided: BTreeSet<i64> = best
        .difference(&worst)
        .filter(|r| !unknown.contains(r))
        .copied()
        .collect();
    // What one sample alone would say, to tell what the second one changed.
    let dead_alone: BTreeSet<i64> = if inp.progress.is_some() {
        let alone = Facts {
            progressed: &none,
            unconfirmed: &none,
            ..facts
        };
        nodes
            .difference(&graph::reduce(&alone, Assume::Best))
            .copied()
            .collect()
    } else {
        dead.clone()
    };
    let stall = if dead.is_empty() && (!undecided.is_empty() || !inp.stacks.stacks_only.is_empty()) {
        stalled(&inp, &nodes, &unknown)
    } else {
        None
    };
    let stall = match stall {
        Some(Stall::Holds(why)) => {
            dead = nodes.clone();
            undecided.clear();
            Some(why)
        }
        Some(Stall::MaybeTransfer) | None => None,
    };
    for (r, why) in &inp.stacks.maybe {
        // A stopped rank is said in the summary.
        if (undecided.contains(r) || dead.contains(r)) && !inp.stacks.stopped.contains(r) {
            notes.push(why.clone());
        }
    }
    let adj = graph::blocking(&dead, waits);
    let found = graph::cycles(&adj, MAX_CYCLES);
    let blocked: Vec<i64> = dead.difference(&found.on_cycle).copied().collect();
    if found.cut {
        notes.push(format!(
            "the cycle list was cut short ({} listed, at most {MAX_CYCLES}): more cycles exist",
            found.cycles.len()
        ));
    }
    let cleared: Vec<i64> = dead_alone.difference(&dead).copied().collect();
    let mut progress_words = None;
    if let Some(p) = &inp.progress {
        if !p.changed.is_empty() {
            let moved: Vec<i64> = p.changed.keys().copied().collect();
            let first = p.changed.iter().next().map(|(r, why)| format!("rank {r}: {why}"));
            // Ranks without queues (a packaged MPI) are seen to move by
            // their stacks alone.
            let what = if p.changed.keys().all(|r| inp.stacks.stacks_only.contains(r)) {
                "the ranks moved"
            } else {
                "the queues changed"
            };
            let words = format!(
                "{what} between {}: the job is progressing",
                interval_words(inp.interval_ms)
            );
            notes.push(format!(
                "{words} ({} changed their waiting operations; {})",
                ranks_words(&moved),
                first.unwrap_or_default()
            ));
            progress_words = Some(words);
        }
        for (r, why) in &p.unconfirmed {
            if dead_alone.contains(r) || undecided.contains(r) {
                notes.push(format!(
                    "rank {r}: its wait is not confirmed by the previous sample: {why}"
                ));
            }
        }
    }
    // Why waits could not be decided, once each, at most NOTE_REASONS.
    let mut seen: HashSet<String> = HashSet::new();
    let mut more = 0usize;
    for w in waits.iter().filter(|w| !w.certain) {
        if let Some(why) = &w.why {
            let line = format!("rank {}: {why}", w.rank);
            if seen.len() == NOTE_REASONS {
                more += usize::from(!seen.contains(&line));
            } else if seen.insert(line.clone()) {
                notes.push(line);
            }
        }
    }
    if more > 0 {
        notes.push(format!("and {more} more waits that could not be decided"));
    }

    let mut verdict = if !dead.is_empty() {
        Verdict::Deadlock
    } else if !unknown.is_empty() || !undecided.is_empty() || nodes.is_empty() {
        Verdict::Unknown
    } else {
        Verdict::NoDeadlock
    };
    let moving_but = if verdict == Verdict::Unknown {
        every_rank_moves(&inp, &nodes, &unknown)
    } else {
        None
    };
    let seen_moving = moving_but.is_some();
    if seen_moving {
        verdict = Verdict::NoDeadlock;
    }
    // One sample, ranks in a test or probe that nothing the queues show
    // serves: it returns at once, and only a second sample tells whether
    // they keep calling it. When every rank is inside MPI, none is shown
    // able to send what they poll for: unknown.
    let polling = if verdict == Verdict::NoDeadlock && inp.progress.is_none() {
        polling_ranks(&inp, &nodes, waits)
    } else {
        Vec::new()
    };
    let all_in_mpi = nodes
        .iter()
        .all(|r| matches!(inp.stacks.places.get(r), Some(Place::InMpi(_))));
    if !polling.is_empty() && all_in_mpi {
        verdict = Verdict::Unknown;
    }
    // Where every rank is, said once for both verdicts that name the polling ranks.
    let polling_said = (!polling.is_empty()).then(|| {
        let all: Vec<i64> = nodes.iter().copied().collect();
        ranks_said(inp.stacks.snap, job, inp.stacks.places, &all, 4).unwrap_or_default()
    });
    if verdict == Verdict::Deadlock && inp.progress.is_none() {
        notes.push(
            "decided on one sample: a message in flight (or an eager send Open MPI no longer lists) does not \
             show; a second sample a moment later confirms a deadlock"
                .to_string(),
        );
    }

    // Whom the waiting ranks wait for in the end, named first.
    let walk = waited::Scene {
        snap: inp.stacks.snap,
        job,
        places: inp.stacks.places,
        waits,
        free: &inp.stacks.free,
    };
    let (waited_on, walk_note) = waited::waited_on(&walk);
    notes.extend(walk_note);
    let waited_words = waited::summary_words(&walk, &waited_on);
    let summary = match verdict {
        Verdict::Deadlock => {
            let mut parts: Vec<String> = Vec::new();
            if let Some(cycle) = found.cycles.first() {
                let mut of: HashMap<i64, Vec<usize>> = HashMap::new();
                for (i, w) in waits.iter().enumerate() {
                    of.entry(w.rank).or_default().push(i);
                }
                for (i, &a) in cycle.iter().enumerate().take(SUMMARY_STEPS) {
                    let b = cycle[(i + 1) % cycle.len()];
                    if let Some(w) = step(waits, &of, &adj, a, b) {
                        parts.push(wait_words_to(w, b));
                    }
                }
                if cycle.len() > SUMMARY_STEPS {
                    parts.push(format!("... (a cycle of {} ranks)", cycle.len()));
                }
                if found.cycles.len() > 1 {
                    let n = found.cycles.len() - 1;
                    parts.push(format!("{n} more cycle{}", if n == 1 { "" } else { "s" }));
                }
            } else {
                let d: Vec<i64> = dead.iter().copied().collect();
                parts.push(format!(
                    "{} wait for messages only stuck ranks could send",
                    ranks_words(&d)
                ));
            }
            if !blocked.is_empty() && !found.cycles.is_empty() {
                let verb = if blocked.len() == 1 { "is" } else { "are" };
                parts.push(format!("{} {verb} blocked behind it", ranks_words(&blocked)));
            }
            if !unknown.is_empty() {
                parts.push(unknown_words(job));
            }
            // Ranks outside it that are stopped or could not run: named,
            // never left out of the answer.
            let outside: BTreeSet<i64> = nodes.difference(&dead).copied().collect();
            parts.extend(stopped_said(&inp, &outside));
            parts.extend(starved_said(&inp, &outside));
            let d: Vec<i64> = dead.iter().copied().collect();
            let whereabouts = ranks_said(inp.stacks.snap, job, inp.stacks.places, &d, 4);
            let said = match (&stall, whereabouts) {
                (Some(why), Some(w)) => format!("deadlock: {why}: {w}"),
                (Some(why), None) => format!("deadlock: {why}"),
                (None, Some(w)) => format!("deadlock: {w} — {}", parts.join("; ")),
                (None, None) => format!("deadlock: {}", parts.join("; ")),
            };
            // Ranks waiting on a rank that is not blocked in MPI, besides
            // the cycle: not lost behind it.
            match &waited_words {
                Some(w) => format!("{said}; besides, {w}"),
                None => said,
            }
        }
        Verdict::Unknown if polling_said.is_some() => format!(
            "unknown: every rank is inside MPI and no queue shows what would serve them: {}; {POLL_WORDS}",
            polling_said.as_deref().unwrap_or_default()
        ),
        Verdict::Unknown => {
            let mut parts: Vec<String> = stopped_said(&inp, &nodes);
            parts.extend(starved_said(&inp, &nodes));
            parts.extend(waited_words.iter().cloned());
            if nodes.is_empty() {
                parts.push("the snapshot holds no process with a known rank".to_string());
            }
            if !unknown.is_empty() {
                parts.push(unknown_words(job));
            }
            for &r in undecided.iter().take(3) {
                parts.push(format!(
                    "rank {r} may be stuck: {}",
                    why_undecided(r, waits, &worst, &inp)
                ));
            }
            if undecided.len() > 3 {
                let rest: Vec<i64> = undecided.iter().skip(3).copied().collect();
                parts.push(format!("and {} may be stuck too", ranks_words(&rest)));
            }
            let u: Vec<i64> = undecided.iter().copied().collect();
            if let Some(w) = ranks_said(inp.stacks.snap, job, inp.stacks.places, &u, 4) {
                parts.push(format!("where they are: {w}"));
                if inp.progress.is_none() {
                    parts.push("a second sample would tell whether they move".into());
                }
            }
            format!("unknown: {}", parts.join("; "))
        }
        // While ranks wait on a rank, the summary says whom, first: never
        // the all-clear.
        // Seen to move, every rank, though no queue could be read: said so,
        // and where the ranks that did not move wait.
        Verdict::NoDeadlock if seen_moving => {
            let still = moving_but.as_deref().unwrap_or_default();
            let outside = !still.is_empty()
                && still
                    .iter()
                    .all(|r| matches!(inp.stacks.places.get(r), Some(Place::Idle(_))));
            let words = match still {
                _ if outside => {
                    let moving: Vec<i64> = nodes.iter().filter(|r| !still.contains(r)).copied().collect();
                    format!(
                        "{} moved between {} or compute{}, and no rank waits inside MPI ({}): the job is \
                         progressing",
                        ranks_words(&moving),
                        interval_words(inp.interval_ms),
                        if moving.len() == 1 { "s" } else { "" },
                        ranks_said(inp.stacks.snap, job, inp.stacks.places, still, 4).unwrap_or_default()
                    )
                }
                [r] => format!(
                    "every rank but rank {r} moved between {} or computes, and rank {r} alone, waiting in MPI on \
                     ranks that move, cannot be in a deadlock: the job is progressing",
                    interval_words(inp.interval_ms)
                ),
                _ => format!(
                    "every rank moved between {} or computes: the job is progressing",
                    interval_words(inp.interval_ms)
                ),
            };
            match &waited_words {
                Some(w) => format!("no deadlock: {w}; {words}"),
                None => moved_words(&inp, &words),
            }
        }
        Verdict::NoDeadlock => match (&waited_words, &progress_words, cleared.is_empty()) {
            (Some(w), Some(words), false) => format!("no deadlock: {w}; {words}"),
            (Some(w), _, _) => format!("no deadlock: {w}"),
            (None, Some(words), false) => format!("no deadlock: {words}"),
            // Ranks moved between the samples while others sit in MPI: the
            // moving ranks are named with where they went, and the others
            // with where they wait, never the all-clear.
            (None, Some(words), true) => moved_words(&inp, words),
            // Polling ranks beside ranks that can still act: named, with
            // where the others are.
            _ if polling_said.is_some() => format!(
                "no deadlock found on one sample: {}; {POLL_WORDS}",
                polling_said.as_deref().unwrap_or_default()
            ),
            _ => "no deadlock found: every pending receive has a matching send or the sender can still run".to_string(),
        },
    };

    // A move between the samples that is all that keeps the verdict from
    // worse: true of a progressing job, and of one that was still starting
    // at the first sample and hung before the second.
    // Ranks without queues seen to move, while others did not: another
    // sample may show those move too.
    let stacks_moved = inp
        .progress
        .as_ref()
        .is_some_and(|p| !p.changed.is_empty() && p.changed.keys().all(|r| inp.stacks.stacks_only.contains(r)));
    let rests_on_change = inp.progress.is_some()
        && verdict != Verdict::Deadlock
        && (seen_moving || !cleared.is_empty() || (verdict == Verdict::Unknown && stacks_moved));
    let st = &inp.stacks;
    let evidence = if !st.stacks_only.is_empty() && st.stacks_only.len() == job.procs.len() {
        Evidence::Stacks
    } else if !st.stacks_only.is_empty() {
        Evidence::SomeQueuesAndStacks
    } else if st.places.values().any(|p| !matches!(p, Place::NoStacks(_))) {
        Evidence::QueuesAndStacks
    } else {
        Evidence::Queues
    };
    let mut summary = summary;
    if !st.stacks_only.is_empty() {
        let only: Vec<i64> = st.stacks_only.iter().copied().collect();
        // Why, when it is the same for every such rank: its MPI works but
        // runs on a transport its debug library cannot see (Open MPI's pml
        // ucx), its debug library reads the queues wrongly (MPICH 4.0's
        // ch4), or the build gives none.
        let all = |reason: MissingReason| {
            st.stacks_only.iter().all(|r| {
                job.procs.get(r).is_some_and(|&pi| {
                    st.snap.processes[pi]
                        .queues_missing
                        .as_ref()
                        .is_some_and(|m| m.reason == reason)
                })
            })
        };
        let (this, their) = if all(MissingReason::TransportHidden) {
            ("the transport this job runs on", "the transport they run on")
        } else if all(MissingReason::LibraryUntrusted) {
            (
                "this MPI's debug library, which reads them wrongly",
                "their MPI's debug library, which reads them wrongly",
            )
        } else {
            ("this MPI build", "their MPI build")
        };
        let said = if evidence == Evidence::Stacks {
            format!("from stacks only: the queues are not readable with {this}")
        } else {
            format!(
                "the queues of {} are not readable with {their}: their stacks are used",
                ranks_words(&only)
            )
        };
        summary = match summary.split_once(": ") {
            Some((head, rest)) => format!("{head} ({said}): {rest}"),
            None => format!("{summary} ({said})"),
        };
        if verdict == Verdict::Unknown && stall.is_none() {
            summary.push_str(&format!("; {}", super::missing::stacks_only_missing(&inp, &only)));
        }
    }

    let mut edge_notes = Vec::new();
    let edges = edges(waits, &mut edge_notes);
    notes.extend(edge_notes);
    Analysis {
        verdict,
        summary,
        cycles: found.cycles,
        blocked,
        edges,
        unmatched: inp.matching.unmatched.clone(),
        unknown_ranks: unknown.into_iter().collect(),
        undecided: undecided.into_iter().collect(),
        progressing: progressed.into_iter().collect(),
        notes,
        where_: where_list(inp.stacks.snap, job, inp.stacks.places),
        stalled: stall.is_some(),
        evidence,
        stacks_only: inp.stacks.stacks_only.iter().copied().collect(),
        waited_on,
        rests_on_change,
        starved: inp
            .stacks
            .starved
            .keys()
            .copied()
            .filter(|r| nodes.contains(r))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_in_words() {
        assert_eq!(ranks_words(&[3]), "rank 3");
        assert_eq!(ranks_words(&[1, 0]), "ranks 0 and 1");
        assert_eq!(ranks_words(&[0, 1, 2, 3, 5, 9, 10]), "ranks 0-3, 5, 9 and 10");
        assert_eq!(tag_words(None), "any tag");
        assert_eq!(tag_words(Some(7)), "tag 7");
    }
}
