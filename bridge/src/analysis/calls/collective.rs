//! What a rank in a collective waits for: every member of the collective's
//! communicator that is not in a collective on it; and, when all are, the
//! members in a different collective (a mismatch).

use std::collections::BTreeMap;

use super::{c_name, call_wait, comm_unknown, Call, Place, Scene};
use crate::analysis::job::{comm_words, translate};
use crate::analysis::matching::{Target, Wait};
use crate::analysis::model::OpKind;
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

/// The one group of rank `r`'s collective `call` (empty: it completes).
pub(super) fn collective(scene: &Scene<'_>, r: i64, call: &Call, maybe: &mut BTreeMap<i64, String>) -> Vec<Wait> {
    let name = c_name(&call.name);
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
    let group: Option<Vec<i64>> = c.world_ranks.as_ref().and_then(|g| g.iter().copied().collect());
    let Some(group) = group else {
        return unresolved(format!(
            "its {name} is on {on}, whose members' world ranks are not all known"
        ));
    };
    let kind = match call.class {
        CallClass::Collective { kind } => kind,
        _ => Collective::Synchronising,
    };
    let root = call
        .args
        .as_ref()
        .and_then(|a| a.root)
        .and_then(|l| translate(c, Some(l)));
    let gathers = matches!(call.name.as_str(), "gather" | "gatherv" | "reduce");
    let me = c.local_rank.unwrap_or(-1);
    let mut waits = Vec::new();
    for (l, &m) in group.iter().enumerate() {
        if m == r {
            continue;
        }
        let mut wait = |certain: bool, words: String, why: Option<String>| {
            let mut w = call_wait(r, call, OpKind::Collective, Target::Rank(m), certain, words, why);
            w.communicator = c.name.clone();
            w.tag = None;
            waits.push(w);
        };
        match arrival(scene, m, id) {
            Arrival::In(there) => {
                let their_root = there
                    .args
                    .as_ref()
                    .and_then(|a| a.root)
                    .and_then(|l| translate(c, Some(l)));
                let same_root = root.is_none() || their_root.is_none() || root == their_root;
                if there.name == call.name && same_root {
                    continue; // arrived at the same collective
                }
                let theirs = c_name(&there.name);
                let what = if there.name == call.name {
                    format!("{theirs} with another root")
                } else {
                    theirs
                };
                wait(
                    true,
                    format!("rank {r} is in {name} on {on} and waits for rank {m}, which is in {what} on it"),
                    None,
                );
            }
            Arrival::Finalizing => wait(
                true,
                format!(
                    "rank {r} is in {name} on {on} and waits for rank {m}, which is in MPI_Finalize: \
                     it has left every communicator"
                ),
                None,
            ),
            Arrival::Maybe(why) => wait(
                false,
                format!("rank {r} is in {name} on {on} and waits for rank {m} unless it is in it too"),
                Some(why),
            ),
            Arrival::Not => {
                let certain = match kind {
                    Collective::Synchronising => true,
                    Collective::Rooted => root == Some(m) || (gathers && root == Some(r)),
                    Collective::Prefix => i64::try_from(l).is_ok_and(|l| l < me),
                };
                if let Some(Place::NoStacks(why)) = scene.places.get(&m) {
                    maybe.entry(m).or_insert_with(|| {
                        format!("rank {r} is in {name} on {on}, and whether rank {m} is in it too is unknown: {why}")
                    });
                }
                let why = (!certain).then(|| {
                    format!("rank {r} is in {name} on {on}, which may not need rank {m} to arrive (a tree of messages)")
                });
                wait(
                    certain,
                    format!("rank {r} is in {name} on {on} and waits for rank {m}, which is not in it"),
                    why,
                );
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
