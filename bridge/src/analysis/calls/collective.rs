//! What a rank in a collective waits for: every member of the collective's
//! communicator that is not in a collective on it; and, when all are, the
//! members in a different collective (a mismatch).

use std::borrow::Cow;
use std::cell::OnceCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use super::{c_name, call_wait, comm_unknown, Call, Place, Scene};
use crate::analysis::job::{comm_words, translate};
use crate::analysis::matching::{Members, Target, Wait};
use crate::analysis::model::OpKind;
use crate::analysis::words::ranks_words;
use crate::snapshot::model::Communicator;
use crate::stacks::names::{CallClass, Collective};

/// Whether a class is collective over a communicator.
fn is_collective(class: CallClass) -> bool {
    matches!(
        class,
        CallClass::Collective { .. } | CallClass::CommConstruct | CallClass::InitFinalize
    )
}

/// The index of the communicator a call of world rank `r` is on.
fn comm_of(scene: &Scene<'_>, r: i64, call: &Call) -> Option<usize> {
    if call.class == CallClass::InitFinalize {
        let pi = *scene.job.procs.get(&r)?;
        return scene.snap.processes[pi]
            .communicators
            .iter()
            .position(|c| c.name == "MPI_COMM_WORLD");
    }
    call.comm
}

/// Where a member is with respect to a collective on communicator `id`.
enum Arrival<'p> {
    /// In a collective on it.
    In(&'p Call),
    /// In `MPI_Finalize`: it has left every communicator for good (its
    /// debug library may list none by then).
    Finalizing,
    /// In a collective whose communicator is not known.
    Maybe(String),
    /// Not in a collective on it.
    Not,
}

fn arrival<'p>(scene: &'p Scene<'_>, m: i64, id: usize) -> Arrival<'p> {
    let Some(Place::InMpi(calls)) = scene.places.get(&m) else {
        return Arrival::Not;
    };
    let Some(&pm) = scene.job.procs.get(&m) else {
        return Arrival::Not;
    };
    let mut unknown = None;
    let finalizing = |c: &&Call| c.class == CallClass::InitFinalize && c.name == "finalize";
    if let Some(c) = calls.iter().find(finalizing) {
        // Arrived, when the collective is its own MPI_Finalize on the same
        // MPI_COMM_WORLD; else gone.
        return match comm_of(scene, m, c) {
            Some(ci) if scene.ids.get(pm, ci) == Some(id) => Arrival::In(c),
            _ => Arrival::Finalizing,
        };
    }
    for c in calls.iter().filter(|c| is_collective(c.class)) {
        match comm_of(scene, m, c) {
            Some(ci) if scene.ids.get(pm, ci) == Some(id) => return Arrival::In(c),
            Some(_) => {}
            None => {
                unknown.get_or_insert_with(|| {
                    format!(
                        "rank {m} is in {} on a communicator that could not be recovered",
                        c_name(&c.name)
                    )
                });
            }
        }
    }
    unknown.map_or(Arrival::Not, Arrival::Maybe)
}

/// Why members are absent from a collective, for its waiters.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Reason {
    /// In another collective on the communicator (its words: `MPI_Bcast`,
    /// `MPI_Bcast with another root`).
    Other(String),
    /// In `MPI_Finalize`.
    Finalizing,
    /// In a collective whose communicator is not known (the collective's
    /// name).
    Maybe(String),
    /// Not in a collective on it.
    Not,
    /// Not in a collective on it, and the flight recorder says it has not
    /// begun this one: how many it has begun on it.
    Behind(u64),
}

/// Members absent for one reason, sorted.
#[derive(Debug)]
struct Class {
    reason: Reason,
    members: Members,
    /// Each member's local rank, in the same order.
    local: Vec<i64>,
    /// `rank 5` or `ranks 1-3 and 7`.
    who: String,
    /// For a rooted collective: the members but the root, in words.
    but_root: OnceCell<(Members, String)>,
}

/// The members of one communicator absent from one collective on it:
/// found once, shared by every rank in that collective.
#[derive(Debug, Default)]
pub(crate) struct Absent {
    classes: Vec<Class>,
}

/// The [`Absent`] of each (communicator, collective, root, its number on
/// the communicator), as the ranks of a scene ask; `None` when the
/// communicator's members' world ranks are not all known. The group is
/// read once per entry, not once per rank in the collective (at 100,000
/// ranks, 20,000 of them in one on `MPI_COMM_WORLD`: 2e9 copies).
pub(crate) type Absents = HashMap<(usize, String, Option<i64>, Option<u64>), Option<Rc<Absent>>>;

/// A collective's communicator.
struct On<'c> {
    c: &'c Communicator,
    /// Its members' world ranks.
    group: &'c [i64],
    /// Its identity across processes.
    id: usize,
    /// The call's root as a world rank, if it has one.
    root: Option<i64>,
    /// The call's number among the collectives its rank began on the
    /// communicator (the flight recorder's), if known.
    seq: Option<u64>,
}

/// How many collectives world rank `m` has begun on the communicator of
/// identity `id`, as its flight recorder counts them: known for a rank whose
/// queues are the recorder's (its communicators are the recorder's).
fn begun(scene: &Scene<'_>, m: i64, id: usize) -> Option<u64> {
    let &pm = scene.job.procs.get(&m)?;
    let p = &scene.snap.processes[pm];
    if !crate::analysis::recorded::recorded(p) {
        return None;
    }
    let ci = (0..p.communicators.len()).find(|&ci| scene.ids.get(pm, ci) == Some(id))?;
    let handle = &p.communicators[ci].id;
    p.recorder
        .as_ref()?
        .comms
        .iter()
        .find(|k| &k.handle == handle)
        .map(|k| k.collectives)
}

/// `MPI_Allreduce #42`: a collective with its number, when known.
pub(crate) fn numbered(name: &str, seq: Option<u64>) -> String {
    match seq {
        Some(n) => format!("{} #{n}", c_name(name)),
        None => c_name(name),
    }
}

/// Where every member of the communicator is with respect to rank `r`'s
/// `call` on it.
fn absent(scene: &Scene<'_>, r: i64, call: &Call, on: &On<'_>, maybe: &mut BTreeMap<i64, String>) -> Absent {
    let On {
        c,
        group,
        id,
        root,
        seq,
    } = *on;
    let name = numbered(&call.name, seq);
    let on = comm_words(&c.name);
    let mut by: Vec<(Reason, Vec<(i64, i64)>)> = Vec::new();
    for (l, &m) in group.iter().enumerate() {
        if m == r {
            continue;
        }
        // Whether a member in a collective on it has this call's root.
        let same_root = |there: &Call| {
            let theirs = there
                .args
                .as_ref()
                .and_then(|a| a.root)
                .and_then(|l| translate(c, Some(l)));
            root.is_none() || theirs.is_none() || root == theirs
        };
        // The flight recorder's numbers: a member past this collective has
        // done its part in it; one before it has yet to come.
        let passed = |n: u64| seq.is_some_and(|s| n >= s);
        let reason = match arrival(scene, m, id) {
            Arrival::In(there) if there.args.as_ref().and_then(|a| a.collective_seq).zip(seq).is_some() => {
                let theirs = there.args.as_ref().and_then(|a| a.collective_seq).unwrap_or(0);
                let mine = seq.unwrap_or(0);
                if theirs > mine {
                    continue;
                }
                let same_root = same_root(there);
                if theirs == mine && there.name == call.name && same_root {
                    continue;
                }
                let what = numbered(&there.name, Some(theirs));
                Reason::Other(if theirs < mine {
                    format!("{what} (an earlier one)")
                } else if there.name == call.name {
                    format!("{what} with another root")
                } else {
                    what
                })
            }
            Arrival::In(there) => {
                let same_root = same_root(there);
                if there.name == call.name && same_root {
                    continue; // arrived at the same collective
                }
                let theirs = c_name(&there.name);
                Reason::Other(if there.name == call.name {
                    format!("{theirs} with another root")
                } else {
                    theirs
                })
            }
            Arrival::Finalizing | Arrival::Not if begun(scene, m, id).is_some_and(passed) => continue,
            Arrival::Finalizing => Reason::Finalizing,
            Arrival::Maybe(their) => Reason::Maybe(their),
            Arrival::Not if seq.is_some() && begun(scene, m, id).is_some() => {
                Reason::Behind(begun(scene, m, id).unwrap_or(0))
            }
            Arrival::Not => {
                if let Some(Place::NoStacks(why)) = scene.places.get(&m) {
                    maybe.entry(m).or_insert_with(|| {
                        format!("rank {r} is in {name} on {on}, and whether rank {m} is in it too is unknown: {why}")
                    });
                }
                Reason::Not
            }
        };
        let l = i64::try_from(l).unwrap_or(i64::MAX);
        match by.iter_mut().find(|(why, _)| *why == reason) {
            Some((_, ms)) => ms.push((m, l)),
            None => by.push((reason, vec![(m, l)])),
        }
    }
    let classes = by
        .into_iter()
        .map(|(reason, mut ms)| {
            ms.sort_unstable();
            ms.dedup_by_key(|(m, _)| *m);
            let members: Members = ms.iter().map(|(m, _)| *m).collect();
            Class {
                reason,
                who: ranks_words(&members),
                local: ms.iter().map(|(_, l)| *l).collect(),
                members,
                but_root: OnceCell::new(),
            }
        })
        .collect();
    Absent { classes }
}

/// The one group of rank `r`'s collective `call` (empty: it completes).
/// The members it waits for are shared sets ([`Target::AllOf`]), found
/// once per collective however many ranks are in it.
pub(super) fn collective(scene: &Scene<'_>, r: i64, call: &Call, maybe: &mut BTreeMap<i64, String>) -> Vec<Wait> {
    let seq = call.args.as_ref().and_then(|a| a.collective_seq);
    let name = numbered(&call.name, seq);
    let others = usize::try_from(scene.job.size - 1).unwrap_or(1).max(1);
    let unresolved = |why: String| {
        let words = format!("rank {r} is in {name} and waits for the members of its communicator");
        super::unresolved(r, call, OpKind::Collective, others, words, why)
    };
    let Some(&pi) = scene.job.procs.get(&r) else {
        return Vec::new();
    };
    let p = &scene.snap.processes[pi];
    let Some(ci) = comm_of(scene, r, call) else {
        if call.name == "finalize" {
            return finalize_without_world(scene, r, call);
        }
        return unresolved(comm_unknown(call));
    };
    let Some(c) = p.communicators.get(ci) else {
        return unresolved(comm_unknown(call));
    };
    let on = comm_words(&c.name);
    let Some(id) = scene.ids.get(pi, ci) else {
        return unresolved(format!(
            "its {name} is on {on}, which cannot be identified across processes"
        ));
    };
    let group_unknown = || format!("its {name} is on {on}, whose members' world ranks are not all known");
    let kind = match call.class {
        CallClass::Collective { kind } => kind,
        _ => Collective::Synchronising,
    };
    let root = call
        .args
        .as_ref()
        .and_then(|a| a.root)
        .and_then(|l| translate(c, Some(l)));
    let key = (id, call.name.clone(), root, seq);
    let cached = scene.absents.borrow().get(&key).cloned();
    let found = match cached {
        Some(Some(a)) => a,
        Some(None) => return unresolved(group_unknown()),
        None => {
            let group: Option<Vec<i64>> = c.world_ranks.as_ref().and_then(|g| g.iter().copied().collect());
            let Some(group) = group else {
                scene.absents.borrow_mut().insert(key, None);
                return unresolved(group_unknown());
            };
            let on = On {
                c,
                group: &group,
                id,
                root,
                seq,
            };
            let a = Rc::new(absent(scene, r, call, &on, maybe));
            scene.absents.borrow_mut().insert(key, Some(Rc::clone(&a)));
            a
        }
    };
    let gathers = matches!(call.name.as_str(), "gather" | "gatherv" | "reduce");
    let me = c.local_rank.unwrap_or(-1);
    let head = format!("rank {r} is in {name} on {on} and waits for ");
    let mut waits = Vec::new();
    // `who`: the members in words, found once per set (not once per rank
    // that waits for it).
    let mut add = |members: Members, who: &str, certain: bool, tail: (&str, &str), why: Option<String>| {
        let (target, words) = match &members[..] {
            [] => return,
            [m] => (Target::Rank(*m), format!("{head}rank {m}{}", tail.0)),
            _ => (
                Target::AllOf(Members::clone(&members)),
                format!("{head}{who}{}", tail.1),
            ),
        };
        let mut w = call_wait(r, call, OpKind::Collective, target, certain, words, why);
        if members.len() > 1 {
            w.one = Some(Box::new((head.clone(), tail.0.to_string())));
        }
        w.communicator = c.name.clone();
        w.tag = None;
        waits.push(w);
    };
    for class in &found.classes {
        // Never itself (a rank with two threads in collectives on it).
        let (members, who): (Members, Cow<'_, str>) = if class.members.binary_search(&r).is_ok() {
            let ms: Members = class.members.iter().copied().filter(|&m| m != r).collect();
            let who = ranks_words(&ms);
            (ms, Cow::Owned(who))
        } else {
            (Members::clone(&class.members), Cow::Borrowed(&class.who))
        };
        match &class.reason {
            Reason::Other(what) => {
                let one = format!(", which is in {what} on it");
                let many = format!(", which are in {what} on it");
                add(members, &who, true, (&one, &many), None);
            }
            Reason::Finalizing => add(
                members,
                &who,
                true,
                (
                    ", which is in MPI_Finalize: it has left every communicator",
                    ", which are in MPI_Finalize: they have left every communicator",
                ),
                None,
            ),
            Reason::Maybe(their) => {
                let verb = if class.members.len() == 1 { "is" } else { "are" };
                let why = format!(
                    "{} {verb} in {} on a communicator that could not be recovered",
                    class.who,
                    c_name(their)
                );
                add(
                    members,
                    &who,
                    false,
                    (" unless it is in it too", " unless they are in it too"),
                    Some(why),
                );
            }
            Reason::Not | Reason::Behind(_) => {
                let behind = match class.reason {
                    Reason::Behind(n) => Some((
                        format!(", which is not in it (it has begun {n} collectives on it)"),
                        format!(", which are not in it (each has begun {n} collectives on it)"),
                    )),
                    _ => None,
                };
                let tail = behind
                    .as_ref()
                    .map_or((", which is not in it", ", which are not in it"), |(a, b)| {
                        (a.as_str(), b.as_str())
                    });
                // Which absent members the call cannot complete without.
                let all_needed = match kind {
                    Collective::Synchronising => true,
                    Collective::Rooted => gathers && root == Some(r),
                    Collective::Prefix => class.local.iter().all(|&l| l < me),
                };
                if all_needed {
                    add(members, &who, true, tail, None);
                    continue;
                }
                let (certain, rest, rest_who): (Members, Members, Cow<'_, str>) = match kind {
                    // The root, once for every rank of the collective.
                    Collective::Rooted if who.as_ref() == class.who => {
                        let root_in = root.filter(|m| members.binary_search(m).is_ok());
                        let (rest, rest_who) = class.but_root.get_or_init(|| {
                            let rest: Members = members.iter().copied().filter(|&m| Some(m) != root).collect();
                            let w = ranks_words(&rest);
                            (rest, w)
                        });
                        let certain: Members = root_in.into_iter().collect();
                        (certain, Members::clone(rest), Cow::Borrowed(rest_who.as_str()))
                    }
                    // Prefix (and a rank listed twice): a split of its own.
                    _ => {
                        let needed = |m: i64, l: i64| match kind {
                            Collective::Rooted => root == Some(m),
                            _ => l < me,
                        };
                        let (mut certain, mut rest) = (Vec::new(), Vec::new());
                        for (&m, &l) in class.members.iter().zip(&class.local).filter(|(&m, _)| m != r) {
                            if needed(m, l) {
                                certain.push(m);
                            } else {
                                rest.push(m);
                            }
                        }
                        let (certain, rest): (Members, Members) = (certain.into(), rest.into());
                        let rest_who = ranks_words(&rest);
                        (certain, rest, Cow::Owned(rest_who))
                    }
                };
                let certain_who = ranks_words(&certain);
                add(certain, &certain_who, true, tail, None);
                if !rest.is_empty() {
                    let why = format!(
                        "rank {r} is in {name} on {on}, which may not need {rest_who} to arrive (a tree of messages)"
                    );
                    add(rest, &rest_who, false, tail, Some(why));
                }
            }
        }
    }
    waits
}

/// A rank in `MPI_Finalize` whose debug library no longer lists
/// `MPI_COMM_WORLD` (MPICH's, once finalizing): `MPI_Finalize` is
/// collective over every rank of the job, so it waits for the ranks not in
/// `MPI_Finalize` themselves.
fn finalize_without_world(scene: &Scene<'_>, r: i64, call: &Call) -> Vec<Wait> {
    let name = c_name(&call.name);
    let mut waits = Vec::new();
    for &m in scene.job.procs.keys().filter(|&&m| m != r) {
        let there = match scene.places.get(&m) {
            Some(Place::InMpi(calls)) => calls.iter().any(|c| c.name == "finalize"),
            _ => false,
        };
        if there {
            continue;
        }
        let mut w = call_wait(
            r,
            call,
            OpKind::Collective,
            Target::Rank(m),
            true,
            format!("rank {r} is in {name} and waits for rank {m}, which is not in it"),
            None,
        );
        w.communicator = "MPI_COMM_WORLD".into();
        w.tag = None;
        waits.push(w);
    }
    waits
}
