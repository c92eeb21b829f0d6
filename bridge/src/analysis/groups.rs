//! Communicators across processes: inferring their groups (MPICH's library
//! has no `mqs_get_comm_group`) and telling which entries of different
//! processes are the same communicator.
//!
//! Every process knows its own world rank and its local rank in each of its
//! communicators. Communicators are keyed by `(name, size)`; a key is
//! *usable* when no process lists two communicators with it (MPICH lists
//! many `--unnamed--` ones) and the positions collected do not conflict (two
//! world ranks at one local rank, or one world rank at two: different
//! communicators share the name). Library-given groups are merged into the
//! same check and never overwritten.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::job::{member, translate};
use crate::snapshot::model::{Communicator, Group, QueueKind, Snapshot};

/// `(name, size)`.
type NameKey = (String, i64);

/// What the processes say about one `(name, size)`.
#[derive(Debug)]
struct KeyInfo {
    /// Some process lists more than one communicator with this key.
    duplicated: bool,
    /// Two processes (or a given group) disagree about a position.
    conflict: bool,
    /// World rank of each local rank, as far as known.
    group: Vec<Option<i64>>,
    /// Local rank of each world rank seen.
    position: HashMap<i64, usize>,
    /// The last group a process gave that matched `group` (shared by the
    /// processes of a job that hold the same group: compared once).
    seen: Option<Group>,
}

impl KeyInfo {
    fn new(size: i64) -> Self {
        KeyInfo {
            duplicated: false,
            conflict: false,
            group: vec![None; usize::try_from(size).unwrap_or(0)],
            position: HashMap::new(),
            seen: None,
        }
    }

    /// World rank `world` is at local rank `local`.
    fn claim(&mut self, local: usize, world: i64) {
        match (self.group.get(local).copied(), self.position.get(&world)) {
            (None, _) => self.conflict = true,
            (Some(Some(w)), _) if w != world => self.conflict = true,
            (_, Some(&l)) if l != local => self.conflict = true,
            _ => {
                self.group[local] = Some(world);
                self.position.insert(world, local);
            }
        }
    }

    fn usable(&self) -> bool {
        !self.duplicated && !self.conflict
    }

    fn why_not(&self) -> &'static str {
        if self.duplicated {
            "a process lists more than one communicator with that name and size"
        } else {
            "the ranks' positions conflict: different communicators share that name"
        }
    }
}

/// Collects what every process says about every `(name, size)`.
fn key_infos(snap: &Snapshot) -> BTreeMap<NameKey, KeyInfo> {
    let mut infos: BTreeMap<NameKey, KeyInfo> = BTreeMap::new();
    for p in &snap.processes {
        let mut seen: HashMap<NameKey, usize> = HashMap::new();
        for c in &p.communicators {
            let Some((size, local)) = member(c) else { continue };
            let key = (c.name.clone(), size);
            let count = seen.entry(key.clone()).or_insert(0);
            *count += 1;
            let info = infos.entry(key).or_insert_with(|| KeyInfo::new(size));
            if *count > 1 {
                info.duplicated = true;
            }
            if let Some(w) = p.world_rank {
                info.claim(local as usize, i64::from(w));
            }
            if let Some(list) = &c.world_ranks {
                if info.seen.as_ref().is_some_and(|s| Group::same(s, list)) || list[..] == info.group[..] {
                    // Nothing new (every process's MPI_COMM_WORLD).
                    info.seen = Some(list.clone());
                    continue;
                }
                if list.len() != info.group.len() {
                    info.conflict = true;
                }
                for (l, w) in list.iter().enumerate() {
                    if let Some(w) = w {
                        info.claim(l, *w);
                    }
                }
            }
        }
    }
    infos
}

/// What [`infer`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct InferReport {
    /// `(name, size)` and how many communicators got their group from it.
    pub inferred: Vec<(String, i64, usize)>,
}

impl InferReport {
    /// One note for the user, if anything was inferred.
    pub fn note(&self) -> Option<String> {
        if self.inferred.is_empty() {
            return None;
        }
        let list: Vec<String> = self
            .inferred
            .iter()
            .map(|(name, size, _)| format!("'{name}' (size {size})"))
            .collect();
        Some(format!(
            "the world ranks of {} were inferred across ranks (the debug library does not report groups)",
            list.join(", ")
        ))
    }
}

/// Fills `world_ranks` where missing from a usable `(name, size)` key, with
/// `world_ranks_source = "inferred"`, then the world ranks of the peers of
/// the operations on those communicators where they are null.
pub(crate) fn infer(snapshot: &mut Snapshot) -> InferReport {
    let infos = key_infos(snapshot);
    // One shared group per usable key that knows any member.
    let groups: BTreeMap<&NameKey, Group> = infos
        .iter()
        .filter(|(_, i)| i.usable() && i.group.iter().any(Option::is_some))
        .map(|(k, i)| (k, Group::from(i.group.clone())))
        .collect();
    let mut counts: BTreeMap<NameKey, usize> = BTreeMap::new();
    for p in &mut snapshot.processes {
        for c in &mut p.communicators {
            if c.world_ranks.is_some() {
                continue;
            }
            let Some((size, _)) = member(c) else { continue };
            let key = (c.name.clone(), size);
            let Some(group) = groups.get(&key) else {
                continue;
            };
            c.world_ranks = Some(group.clone());
            c.world_ranks_source = Some("inferred".into());
            *counts.entry(key).or_insert(0) += 1;
            for kind in QueueKind::ALL {
                let mut ops = std::mem::take(&mut c.queues.get_mut(kind).operations);
                for op in &mut ops {
                    if op.peer.world.is_none() {
                        op.peer.world = translate(c, op.peer.local);
                    }
                    if let Some(mut a) = op.actual {
                        if a.world.is_none() {
                            a.world = translate(c, a.local);
                            op.actual = Some(a);
                        }
                    }
                }
                c.queues.get_mut(kind).operations = ops;
            }
        }
    }
    InferReport {
        inferred: counts.into_iter().map(|((n, s), k)| (n, s, k)).collect(),
    }
}

/// Which communicator entries of different processes are the same
/// communicator: an id per `(process, communicator)` index, equal ids
/// meaning the same communicator.
#[derive(Clone, Debug, Default)]
pub(crate) struct CommIds {
    /// `ids[process][communicator]`.
    ids: Vec<Vec<Option<usize>>>,
    /// Why a `(name, size)` cannot identify a communicator.
    why: BTreeMap<NameKey, &'static str>,
}

impl CommIds {
    /// The id of a process's communicator, if it can be identified.
    pub fn get(&self, process: usize, comm: usize) -> Option<usize> {
        self.ids.get(process)?.get(comm).copied().flatten()
    }

    /// Why a communicator cannot be identified across processes.
    pub fn why_not(&self, name: &str, size: i64) -> &'static str {
        self.why
            .get(&(name.to_string(), size))
            .copied()
            .unwrap_or("it cannot be told apart from the other processes' communicators")
    }
}

/// Identifies communicators across processes: by a usable `(name, size)`
/// that every readable member lists; else by an identical, fully known
/// group that no process lists twice among its still unidentified
/// communicators (names are local to a process: `MPI_Comm_set_name` on
/// some ranks only); else by the usable `(name, size)` anyway.
pub(crate) fn identify(snap: &Snapshot) -> CommIds {
    let infos = key_infos(snap);
    let mut out = CommIds::default();
    // Which (name, size) each readable world rank lists.
    let mut listed: HashSet<(&str, i64, i64)> = HashSet::new();
    let mut readable: HashSet<i64> = HashSet::new();
    for p in snap
        .processes
        .iter()
        .filter(|p| super::recorded::queue_error(p).is_none())
    {
        let Some(me) = p.world_rank.map(i64::from) else {
            continue;
        };
        readable.insert(me);
        for c in &p.communicators {
            if let Some((size, _)) = member(c) {
                listed.insert((&c.name, size, me));
            }
        }
    }
    // Usable keys, and whether every readable member lists them.
    let mut names: HashMap<&NameKey, (usize, bool)> = HashMap::new();
    for (key, info) in &infos {
        if info.usable() {
            let complete = info
                .group
                .iter()
                .flatten()
                .all(|w| !readable.contains(w) || listed.contains(&(key.0.as_str(), key.1, *w)));
            let next = names.len();
            names.insert(key, (next, complete));
        } else {
            out.why.insert(key.clone(), info.why_not());
        }
    }
    let name_id = |c: &Communicator| member(c).and_then(|(size, _)| names.get(&(c.name.clone(), size)).copied());
    // Groups of the communicators a name does not identify: twice in a process?
    let mut group_dup: HashMap<Vec<i64>, bool> = HashMap::new();
    for p in &snap.processes {
        let mut seen: HashMap<Vec<i64>, usize> = HashMap::new();
        for c in &p.communicators {
            if matches!(name_id(c), Some((_, true))) {
                continue;
            }
            if let Some(g) = full_group(c, p.world_rank) {
                let n = seen.entry(g.clone()).or_insert(0);
                *n += 1;
                *group_dup.entry(g).or_insert(false) |= *n > 1;
            }
        }
    }
    let base = names.len();
    let mut groups: HashMap<Vec<i64>, usize> = HashMap::new();
    for p in &snap.processes {
        let mut row = Vec::new();
        for c in &p.communicators {
            let id = match name_id(c) {
                Some((id, true)) => Some(id),
                by_name => {
                    let by_group = full_group(c, p.world_rank).filter(|g| group_dup.get(g) == Some(&false));
                    match by_group {
                        Some(g) => {
                            let next = base + groups.len();
                            Some(*groups.entry(g).or_insert(next))
                        }
                        None => by_name.map(|(id, _)| id),
                    }
                }
            };
            row.push(id);
        }
        out.ids.push(row);
    }
    out
}

/// A member communicator's group when every entry is known and it places
/// this process at its local rank.
fn full_group(c: &Communicator, me: Option<i32>) -> Option<Vec<i64>> {
    let (_, local) = member(c)?;
    let g: Vec<i64> = c.world_ranks.as_ref()?.iter().copied().collect::<Option<Vec<i64>>>()?;
    let here = g.get(local as usize).copied();
    match me {
        Some(me) if here != Some(i64::from(me)) => None,
        _ => Some(g),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::testutil::*;
    use crate::snapshot::model::Status;

    /// World rank r is local rank (r + 1) % 3 of "solver" (MPICH: no group).
    fn rotated() -> Snapshot {
        snapshot(
            (0..3)
                .map(|r| {
                    process(
                        r as i32,
                        vec![
                            world(3, r),
                            comm("solver", 3, (r + 1) % 3).recvs(vec![recv(Some((r + 2) % 3), Some(5))]),
                        ],
                    )
                })
                .collect(),
        )
    }

    #[test]
    fn unique_names_get_their_group_inferred() {
        let mut s = rotated();
        let report = infer(&mut s);
        assert_eq!(report.inferred, vec![("solver".to_string(), 3, 3)]);
        let c = &s.processes[0].communicators[1];
        assert_eq!(c.world_ranks, Some(vec![Some(2), Some(0), Some(1)].into()));
        assert_eq!(c.world_ranks_source.as_deref(), Some("inferred"));
        // Rank 0 is local 1; it receives from local 2, which is world 1.
        assert_eq!(c.queues.receives.operations[0].peer.world, Some(1));
        assert!(report.note().unwrap().contains("'solver' (size 3)"));
    }

    #[test]
    fn positions_no_process_claims_stay_null() {
        let mut s = rotated();
        s.processes.remove(2);
        infer(&mut s);
        let c = &s.processes[0].communicators[1];
        assert_eq!(c.world_ranks, Some(vec![None, Some(0), Some(1)].into()));
        assert_eq!(c.queues.receives.operations[0].peer.world, Some(1));
        // Rank 1 receives from local 0: rank 2, which is not in the snapshot.
        let c = &s.processes[1].communicators[1];
        assert_eq!(c.queues.receives.operations[0].peer.world, None);
    }

    #[test]
    fn duplicated_names_are_left_unknown() {
        let mut s = snapshot(
            (0..2)
                .map(|r| {
                    process(
                        r,
                        vec![
                            world(2, r as i64),
                            comm("--unnamed--", 2, r as i64),
                            comm("--unnamed--", 2, r as i64),
                        ],
                    )
                })
                .collect(),
        );
        let report = infer(&mut s);
        assert!(report.inferred.is_empty() && report.note().is_none());
        assert!(s.processes[0].communicators[1].world_ranks.is_none());
        assert!(identify(&s).get(0, 1).is_none());
        assert!(identify(&s).why_not("--unnamed--", 2).contains("more than one"));
    }

    #[test]
    fn conflicting_positions_mean_different_communicators() {
        // World 4 split in halves, both called "half": ranks 0 and 2 are both local 0.
        let mut s = snapshot(
            (0..4)
                .map(|r| process(r as i32, vec![world(4, r), comm("half", 2, r % 2)]))
                .collect(),
        );
        infer(&mut s);
        assert!(s.processes[0].communicators[1].world_ranks.is_none());
        assert!(identify(&s).why_not("half", 2).contains("conflict"));
    }

    #[test]
    fn library_groups_are_never_overwritten_and_checked() {
        let mut s = rotated();
        // Rank 0's library says the group is something else: conflict, nothing inferred.
        s.processes[0].communicators[1] = comm("solver", 3, 1).group(vec![5, 0, 6]);
        infer(&mut s);
        assert_eq!(
            s.processes[0].communicators[1].world_ranks,
            Some(vec![Some(5), Some(0), Some(6)].into())
        );
        assert!(s.processes[1].communicators[1].world_ranks.is_none());
    }

    #[test]
    fn peer_world_given_by_the_library_is_kept() {
        let mut s = rotated();
        s.processes[0].communicators[1].queues.receives.operations[0].peer.world = Some(9);
        s.processes[0].communicators[1].queues.sends.operations = vec![send(0, 3, Status::Complete)];
        infer(&mut s);
        let c = &s.processes[0].communicators[1];
        assert_eq!(c.queues.receives.operations[0].peer.world, Some(9));
        assert_eq!(c.queues.sends.operations[0].peer.world, Some(2));
        assert_eq!(c.queues.sends.operations[0].actual.unwrap().world, Some(2));
    }

    #[test]
    fn same_communicator_by_name_or_by_identical_group() {
        // Open MPI: two dups of a 2-rank group both named "dup", groups from the
        // library; they cannot be told apart by name, but "left" can by its group.
        let s = snapshot(
            (0..2)
                .map(|r| {
                    process(
                        r,
                        vec![
                            world(2, r as i64),
                            comm("dup", 2, r as i64).group(vec![0, 1]),
                            comm("dup", 2, r as i64).group(vec![0, 1]),
                            comm("left", 2, r as i64).group(vec![0, 1]),
                        ],
                    )
                })
                .collect(),
        );
        let ids = identify(&s);
        assert_eq!(ids.get(0, 0), ids.get(1, 0));
        assert!(ids.get(0, 0).is_some());
        assert!(ids.get(0, 1).is_none() && ids.get(0, 2).is_none());
        assert_eq!(ids.get(0, 3), ids.get(1, 3));
        assert_ne!(ids.get(0, 3), ids.get(0, 0));
    }

    #[test]
    fn a_group_key_is_used_when_names_differ_between_processes() {
        // MPI_Comm_set_name is local: rank 0 named it, rank 1 did not.
        let s = snapshot(vec![
            process(0, vec![world(2, 0), comm("mine", 2, 0).group(vec![0, 1])]),
            process(1, vec![world(2, 1), comm("MPI COMM 3", 2, 1).group(vec![0, 1])]),
        ]);
        let ids = identify(&s);
        assert!(ids.get(0, 1).is_some());
        assert_eq!(ids.get(0, 1), ids.get(1, 1));
    }

    #[test]
    fn comm_self_and_comm_null_are_not_shared() {
        let mut null = comm("MPI_COMM_NULL", 0, 0);
        null.local_rank = None;
        null.size = Some(0);
        let s = snapshot(
            (0..2)
                .map(|r| {
                    let mut me = comm("MPI_COMM_SELF", 1, 0);
                    me.world_ranks = Some(vec![Some(r as i64)].into());
                    process(r, vec![world(2, r as i64), me, null.clone()])
                })
                .collect(),
        );
        let ids = identify(&s);
        assert_ne!(ids.get(0, 1), ids.get(1, 1));
        assert!(ids.get(0, 2).is_none());
    }
}
