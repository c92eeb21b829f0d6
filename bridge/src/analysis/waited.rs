//! Whom the waiting ranks wait for in the end: every rank blocked in MPI is
//! followed through its waits (point-to-point, collectives, finalize,
//! synchronous sends) and through the ranks it waits on that are blocked in
//! MPI too, to the ranks that are not: computing in their own code, blocked
//! outside MPI, in MPI in a call without a name, gone from the snapshot, or
//! unreadable. Those are the ranks a hung job is waiting for, whatever the
//! verdict's word; the summary names them first.

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};

use super::calls::{caller_line, waiting_said, Place};
use super::job::Job;
use super::matching::{SetIndex, Target, Wait};
use super::model::{WaitedOn, Waiter};
use super::words::ranks_words;
use crate::snapshot::model::Snapshot;
use crate::stacks::position::{blocked_outside, position, Position};

/// Most steps the walk back from the ends may take (a note says when more
/// were needed).
const STEP_BUDGET: usize = 2_000_000;

/// Most entries of [`WaitedOn`] the summary spells out.
const SUMMARY_ENDS: usize = 3;

/// Most groups of waiters the summary spells out per entry and kind.
const SUMMARY_WAITERS: usize = 4;

/// What the walk starts from.
pub(crate) struct Scene<'a> {
    pub snap: &'a Snapshot,
    pub job: &'a Job,
    pub places: &'a BTreeMap<i64, Place>,
    /// Every wait, grouped.
    pub waits: &'a [Wait],
    /// Ranks free whatever they wait for (computing, or in a call that completes).
    pub free: &'a BTreeSet<i64>,
}

/// An end's description.
struct End {
    state: &'static str,
    one: String,
    many: String,
    function: Option<String>,
    location: Option<String>,
}

/// Whether rank `r` is blocked in MPI: the ranks the walk goes through. A
/// rank stopped by a signal inside MPI is not: it is where the waits end
/// (nothing it waits for makes it move, a `SIGCONT` does).
fn waiting(s: &Scene<'_>, r: i64) -> bool {
    matches!(s.places.get(&r), Some(Place::InMpi(_))) && !s.free.contains(&r) && !stopped(s, r)
}

/// Whether rank `r`'s process is stopped by a signal.
fn stopped(s: &Scene<'_>, r: i64) -> bool {
    s.job
        .procs
        .get(&r)
        .is_some_and(|&pi| super::calls::process_stopped(s.snap, pi))
}

/// `smooth` and `solver.c:31` from `smooth (solver.c:31)`.
fn split_frame(at: &str) -> (Option<String>, Option<String>) {
    let loc = caller_line(at).map(str::to_string);
    let name = match &loc {
        Some(l) => at.strip_suffix(&format!(" ({l})")).unwrap_or(at),
        None => at,
    };
    (Some(name.to_string()).filter(|n| !n.is_empty()), loc)
}

fn end_said(state: &'static str, one: &str, many: &str, rest: &str) -> End {
    End {
        state,
        one: format!("{one} {rest}"),
        many: format!("{many} {rest}"),
        function: None,
        location: None,
    }
}

/// glibc's internal name of a C library call as the program wrote it:
/// `__GI___libc_read` and `__libc_read` are `read`.
fn plain_call(name: &str) -> String {
    let mut n = name.trim_start_matches('_');
    if let Some(rest) = n.strip_prefix("GI_") {
        n = rest.trim_start_matches('_');
    }
    n.strip_prefix("libc_").unwrap_or(n).to_string()
}

/// Whether rank `r`'s process was listed by its job but had exited when
/// it was read: no stacks, and the error the CLI's attach gives a pid
/// with no process (`AttachError::NoSuchProcess`: "no process 4242").
fn exited(s: &Scene<'_>, r: i64) -> bool {
    s.job.procs.get(&r).is_some_and(|&pi| gone(&s.snap.processes[pi]))
}

/// Whether a listed process had exited when it was read ([`exited`]).
pub(crate) fn gone(p: &crate::snapshot::model::ProcessSnapshot) -> bool {
    p.stacks.as_ref().is_none_or(|st| st.threads.is_empty())
        && p.error.as_deref().is_some_and(|e| e.starts_with("no process "))
}

/// What rank `r`, at the end of some waits, is doing; `None` when it is
/// not an end (blocked in MPI, or in a call that completes).
fn end(s: &Scene<'_>, r: i64) -> Option<End> {
    let Some(place) = s.places.get(&r) else {
        let why = s
            .job
            .unknown
            .get(&r)
            .cloned()
            .unwrap_or_else(|| "it is not in the snapshot".into());
        // It can never act: a rank that exited (or was killed) while
        // others wait for it, or one the job references but no process
        // holds.
        return Some(if why == "it is not in the snapshot" {
            end_said(
                "gone",
                "is",
                "are",
                "not in the snapshot (exited, killed or never found)",
            )
        } else {
            end_said("gone", "is", "are", &format!("gone: {why}"))
        });
    };
    let threads = s
        .job
        .procs
        .get(&r)
        .and_then(|&pi| s.snap.processes[pi].stacks.as_ref())
        .map(|st| st.threads.as_slice())
        .unwrap_or_default();
    // The first thread outside MPI that computes (or is blocked): its
    // innermost application frame.
    let outside = |blocked: bool| {
        threads.iter().find_map(|t| match position(t) {
            Position::NotInMpi { at } if blocked_outside(t).is_some() == blocked => Some((t, at)),
            _ => None,
        })
    };
    let stopped = stopped(s, r);
    let (state, one, many) = if stopped {
        ("stopped", "is stopped by a signal", "are stopped by a signal")
    } else {
        ("computing", "is computing", "are computing")
    };
    Some(match place {
        // Stopped in its MPI call: the call it is in, and where.
        Place::InMpi(_) if stopped => {
            let (one_in, _, function, location) = waiting_said(s.snap, s.job, s.places, r)?;
            let rest = format!("in {}", one_in.strip_prefix("waits in ").unwrap_or(&one_in));
            End {
                function,
                location,
                ..end_said(state, one, many, &rest)
            }
        }
        Place::InMpi(_) => return None,
        Place::Computing(words) => match outside(false) {
            Some((t, Some(at))) => {
                let (function, location) = split_frame(&at);
                let top = t
                    .frames
                    .first()
                    .and_then(|f| f.function.as_deref())
                    .map(|n| n.trim_start_matches('_'));
                let rest = match (top, &function) {
                    (Some(top), Some(f)) if top != f.trim_start_matches('_') => {
                        format!("in {top}, called from {at}")
                    }
                    _ => format!("in {at}"),
                };
                End {
                    function,
                    location,
                    ..end_said(state, one, many, &rest)
                }
            }
            _ => end_said(state, one, many, &format!("(in {words})")),
        },
        Place::Idle(what) => {
            let found = outside(true);
            let at = found.as_ref().and_then(|(_, at)| at.clone());
            let location = at.as_deref().and_then(caller_line).map(str::to_string);
            // The call as the program wrote it: `read`, not glibc's
            // `__GI___libc_read`.
            let call = found
                .and_then(|(t, _)| blocked_outside(t))
                .map(|c| plain_call(&c))
                .unwrap_or_else(|| what.split(',').next().unwrap_or(what).to_string());
            let words = match &at {
                Some(at) => format!("in {call}, called from {at}"),
                None => format!("in {what}"),
            };
            End {
                function: Some(call),
                location,
                ..end_said(
                    "blocked_outside_mpi",
                    "is blocked outside MPI",
                    "are blocked outside MPI",
                    &words,
                )
            }
        }
        Place::InMpiUnnamed(at) => end_said(
            "in_mpi_unnamed",
            "is in MPI in a call without a symbol",
            "are in MPI in calls without a symbol",
            &format!("(in {at})"),
        ),
        Place::NoStacks(_) if exited(s, r) => {
            end_said("gone", "has", "have", "exited (its process is gone from the job)")
        }
        Place::NoStacks(why) => end_said(
            "unreadable",
            "has no known stack",
            "have no known stack",
            &format!("({why})"),
        ),
    })
}

/// Who waits on whom, backwards: each rank's direct waiters, and the
/// shared sets of members ([`Target::AllOf`]) each rank is in, with the
/// ranks that wait for each set. A set is walked once, however many ranks
/// wait for it: 100,000 ranks of one collective waiting for 50,000 absent
/// members cost 150,000 steps, not five billion.
#[derive(Default)]
struct Back {
    direct: BTreeMap<i64, BTreeSet<i64>>,
    sets: SetIndex<i64>,
}

impl Back {
    /// Every rank with a waiter, in order.
    fn waited(&self) -> BTreeSet<i64> {
        let mut out: BTreeSet<i64> = self.direct.keys().copied().collect();
        out.extend(self.sets.members());
        out
    }

    /// The waiters of `b` not yet seen by this walk (sets it has walked
    /// are in `walked`), not `b` itself.
    fn waiters(&self, b: i64, walked: &mut HashSet<usize>, out: &mut Vec<i64>) {
        out.extend(self.direct.get(&b).into_iter().flatten().copied());
        for &k in self.sets.of(b) {
            if walked.insert(k) {
                out.extend(self.sets.waiters[k].iter().copied().filter(|&a| a != b));
            }
        }
    }
}

/// The ranks at the ends of the waits, grouped, with their waiters; and a
/// note when the walk was cut short.
pub(crate) fn waited_on(s: &Scene<'_>) -> (Vec<WaitedOn>, Option<String>) {
    // Who waits on whom, among the ranks blocked in MPI.
    let mut back = Back::default();
    let mut named: BTreeSet<i64> = BTreeSet::new();
    let mut unnamed: BTreeSet<i64> = BTreeSet::new();
    for w in s.waits.iter().filter(|w| waiting(s, w.rank)) {
        match w.target.shared() {
            Some(key) => {
                back.sets.add(key, w.target.ranks(), w.rank);
                named.insert(w.rank);
            }
            None => {
                for &b in w.target.ranks().iter().filter(|&&b| b != w.rank) {
                    back.direct.entry(b).or_default().insert(w.rank);
                    named.insert(w.rank);
                }
            }
        }
        if matches!(
            w.target,
            Target::Unresolved { .. }
                | Target::AnyOf {
                    unknown_members: true,
                    ..
                }
        ) {
            unnamed.insert(w.rank);
        }
    }
    // A rank whose partners could not be named (a collective's
    // communicator not recovered, its queues unreadable) may wait for any
    // rank that is not blocked in MPI: those are the only ones that can act.
    let guessed: BTreeSet<i64> = unnamed.difference(&named).copied().collect();
    if !guessed.is_empty() {
        let candidates: Vec<i64> = candidates(s).into_iter().collect();
        for &a in &guessed {
            back.sets.add(usize::MAX, &candidates, a);
        }
    }
    // The ends, grouped by what they do; from each group back through the
    // waiting ranks.
    let mut groups: Vec<(End, Vec<i64>)> = Vec::new();
    for e in back.waited() {
        if waiting(s, e) {
            continue;
        }
        let Some(desc) = end(s, e) else { continue };
        match groups
            .iter_mut()
            .find(|(d, _)| d.state == desc.state && d.one == desc.one)
        {
            Some((_, ends)) => ends.push(e),
            None => groups.push((desc, vec![e])),
        }
    }
    let mut budget = STEP_BUDGET;
    let mut cut = false;
    let mut found: Vec<(End, Vec<i64>, BTreeMap<i64, bool>)> = Vec::new();
    for (desc, ends) in groups {
        let mut walked: HashSet<usize> = HashSet::new();
        let mut next: Vec<i64> = Vec::new();
        for &e in &ends {
            back.waiters(e, &mut walked, &mut next);
        }
        let mut reached: BTreeMap<i64, bool> = BTreeMap::new();
        let mut queue: VecDeque<i64> = VecDeque::new();
        for a in next.drain(..) {
            if reached.insert(a, true).is_none() {
                queue.push_back(a);
            }
        }
        while let Some(a) = queue.pop_front() {
            back.waiters(a, &mut walked, &mut next);
            for b in next.drain(..) {
                if budget == 0 {
                    cut = true;
                    break;
                }
                budget -= 1;
                if waiting(s, b) && !reached.contains_key(&b) {
                    reached.insert(b, false);
                    queue.push_back(b);
                }
            }
        }
        found.push((desc, ends, reached));
    }
    let groups = found;
    let out = groups
        .into_iter()
        .map(|(d, ranks, waiters)| WaitedOn {
            ranks,
            state: d.state.to_string(),
            text: d.one,
            function: d.function,
            location: d.location,
            waiters: waiter_groups(s, &waiters, &guessed),
        })
        .collect();
    let note = cut.then(|| {
        format!(
            "the walk to the ranks everyone waits for stopped after {STEP_BUDGET} steps: some waiters may be left out"
        )
    });
    (out, note)
}

/// Ranks not blocked in MPI that waiters whose partners are not known may
/// wait for: the candidates, for the words "the only rank not blocked in MPI".
fn candidates(s: &Scene<'_>) -> BTreeSet<i64> {
    s.job
        .nodes()
        .into_iter()
        .filter(|&e| !waiting(s, e) && end(s, e).is_some())
        .collect()
}

/// Waiters with the same description and directness together, direct ones first.
fn waiter_groups(s: &Scene<'_>, waiters: &BTreeMap<i64, bool>, guessed: &BTreeSet<i64>) -> Vec<Waiter> {
    let mut out: Vec<Waiter> = Vec::new();
    for direct in [true, false] {
        for (&a, _) in waiters.iter().filter(|(_, &d)| d == direct) {
            let Some((one, _, call, location)) = waiting_said(s.snap, s.job, s.places, a) else {
                continue;
            };
            let known = !guessed.contains(&a);
            match out
                .iter_mut()
                .find(|w| w.direct == direct && w.partners_known == known && w.text == one)
            {
                Some(w) => w.ranks.push(a),
                None => out.push(Waiter {
                    ranks: vec![a],
                    call,
                    location,
                    text: one,
                    direct,
                    partners_known: known,
                }),
            }
        }
    }
    out
}

/// The waiting ranks of one kind in words: "ranks 0-2 wait in MPI_Allreduce
/// on MPI_COMM_WORLD (a.c:9) and rank 3 waits in MPI_Recv (a.c:5)".
fn waiters_words(s: &Scene<'_>, groups: &[&Waiter]) -> String {
    let mut parts: Vec<String> = groups
        .iter()
        .take(SUMMARY_WAITERS)
        .map(|w| {
            let text = match w.ranks.as_slice() {
                [_] => w.text.clone(),
                [a, ..] => waiting_said(s.snap, s.job, s.places, *a).map_or_else(|| w.text.clone(), |x| x.1),
                [] => w.text.clone(),
            };
            format!("{} {text}", ranks_words(&w.ranks))
        })
        .collect();
    if groups.len() > SUMMARY_WAITERS {
        let rest: Vec<i64> = groups[SUMMARY_WAITERS..]
            .iter()
            .flat_map(|w| w.ranks.iter().copied())
            .collect();
        let verb = if rest.len() == 1 { "waits" } else { "wait" };
        parts.push(format!("{} {verb} elsewhere in MPI", ranks_words(&rest)));
    }
    parts.join(" and ")
}

/// The first words of the summary: who waits for whom, and what those do.
/// "ranks 0-4 and 6-7 wait in MPI_Allreduce on MPI_COMM_WORLD
/// (solver.c:88) for rank 5, which is computing in smooth (solver.c:31)".
pub(crate) fn summary_words(s: &Scene<'_>, found: &[WaitedOn]) -> Option<String> {
    let mut sentences = Vec::new();
    for w in found.iter().take(SUMMARY_ENDS) {
        let direct: Vec<&Waiter> = w.waiters.iter().filter(|g| g.direct).collect();
        let behind: Vec<&Waiter> = w.waiters.iter().filter(|g| !g.direct).collect();
        if direct.is_empty() {
            continue;
        }
        let (which, it) = if w.ranks.len() == 1 {
            ("which", "it")
        } else {
            ("which", "them")
        };
        let what = if w.ranks.len() == 1 {
            w.text.clone()
        } else {
            // The plural of the entry's words, rebuilt from its first rank.
            end(s, w.ranks[0]).map_or_else(|| w.text.clone(), |e| e.many)
        };
        // Waiters whose partners are not known wait for these ranks only
        // as the ranks not blocked in MPI: say so.
        let hedge = if direct.iter().all(|g| g.partners_known) {
            String::new()
        } else {
            let all = candidates(s);
            let only = w.ranks.iter().copied().collect::<BTreeSet<i64>>() == all;
            match (only, w.ranks.len()) {
                (true, 1) => " (whom they wait for is not known; it is the only rank not blocked in MPI)".to_string(),
                (true, _) => {
                    " (whom they wait for is not known; these are the only ranks not blocked in MPI)".to_string()
                }
                (false, _) => format!(
                    " (whom they wait for is not known; {} not blocked in MPI are {})",
                    if all.len() == 1 { "the rank" } else { "the ranks" },
                    ranks_words(&all.into_iter().collect::<Vec<_>>())
                        .replacen("rank ", "", 1)
                        .replacen("ranks ", "", 1)
                ),
            }
        };
        let mut line = format!(
            "{} for {}{hedge}, {which} {what}",
            waiters_words(s, &direct),
            ranks_words(&w.ranks)
        );
        if !behind.is_empty() {
            line.push_str(&format!(", and {} behind {it}", waiters_words(s, &behind)));
        }
        sentences.push(line);
    }
    if found.len() > SUMMARY_ENDS {
        let rest: Vec<i64> = found[SUMMARY_ENDS..]
            .iter()
            .flat_map(|w| w.ranks.iter().copied())
            .collect();
        let verb = if rest.len() == 1 { "is" } else { "are" };
        sentences.push(format!("{} {verb} waited on too", ranks_words(&rest)));
    }
    (!sentences.is_empty()).then(|| sentences.join("; "))
}
