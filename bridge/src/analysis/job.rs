//! The ranks of the job: which world ranks exist, which process holds each,
//! and which could not be read well enough to reason about.

use std::collections::{BTreeMap, BTreeSet};

use crate::snapshot::model::{Communicator, MissingReason, ProcessSnapshot, Snapshot};

/// Communicators larger than this are treated as unusable data (a corrupt size).
pub(crate) const MAX_GROUP: i64 = 1 << 20;

/// Starts of the messages `collect` writes when a process's communicator
/// list was cut short: the process's queues are then not all known.
const LIST_CUT: [&str; 3] = [
    "stopped after ",
    "a communicator could not be read",
    "the communicator list ended with an error",
];

/// `(size, local rank)` of a communicator this process is a member of;
/// `None` for Open MPI's `MPI_COMM_NULL`, unknown ranks and corrupt sizes.
pub(crate) fn member(c: &Communicator) -> Option<(i64, i64)> {
    let size = c.size?;
    let local = c.local_rank?;
    (size > 0 && size <= MAX_GROUP && (0..size).contains(&local)).then_some((size, local))
}

/// World rank of a local rank through the communicator's known group.
pub(crate) fn translate(c: &Communicator, local: Option<i64>) -> Option<i64> {
    let l = usize::try_from(local?).ok()?;
    c.world_ranks.as_ref()?.get(l).copied().flatten()
}

/// The world ranks of a job and what is known of each.
#[derive(Clone, Debug, Default)]
pub(crate) struct Job {
    /// Size of `MPI_COMM_WORLD`.
    pub size: i64,
    /// World rank → index of its process in the snapshot (the first one
    /// listed, when several claim the same rank).
    pub procs: BTreeMap<i64, usize>,
    /// World ranks whose queues are not known, with the reason.
    pub unknown: BTreeMap<i64, String>,
    /// Notes for the user.
    pub notes: Vec<String>,
}

impl Job {
    /// Reads the ranks of a snapshot.
    pub fn new(snap: &Snapshot) -> Job {
        let mut job = Job::default();
        for (pi, p) in snap.processes.iter().enumerate() {
            let Some(rank) = p.world_rank.map(i64::from) else {
                let who = p
                    .pid
                    .map_or_else(|| "a process".to_string(), |pid| format!("process {pid}"));
                job.notes
                    .push(format!("{who} has no known world rank and is left out of the analysis"));
                continue;
            };
            if job.procs.contains_key(&rank) {
                job.notes.push(format!(
                    "rank {rank} is listed more than once; only its first entry is used"
                ));
                continue;
            }
            job.procs.insert(rank, pi);
            if let Some(reason) = unreadable(p) {
                job.unknown.insert(rank, reason);
            }
        }
        // Said only where some queues were read: without any (a packaged
        // MPI, stacks only) no process could list it, and that is said once
        // already, as why the queues are missing.
        let queues_read = snap.processes.iter().any(|p| !p.communicators.is_empty());
        job.size = world_size(snap, &mut job.notes).unwrap_or_else(|| {
            let n = job.procs.keys().next_back().map_or(0, |r| r + 1);
            if n > 0 && queues_read {
                job.notes.push(format!(
                    "no process lists MPI_COMM_WORLD with a size: the job is assumed to have {n} ranks"
                ));
            }
            n
        });
        if job.size > MAX_GROUP {
            // A corrupt world rank (say 2^31) must not make the analysis list
            // billions of missing ranks.
            job.notes.push(format!(
                "a world rank of {} is implausible (corrupt data?): ranks missing from the snapshot are not listed",
                job.size - 1
            ));
            job.size = 0;
        }
        for r in 0..job.size {
            if !job.procs.contains_key(&r) {
                job.unknown.insert(r, "it is not in the snapshot".to_string());
            }
        }
        job
    }

    /// Whether a rank was read well enough for its waits to be known.
    pub fn is_readable(&self, rank: i64) -> bool {
        self.procs.contains_key(&rank) && !self.unknown.contains_key(&rank)
    }

    /// Records a rank some operation refers to; one the snapshot does not
    /// hold becomes unknown.
    pub fn add_referenced(&mut self, rank: i64) {
        if self.procs.contains_key(&rank) || self.unknown.contains_key(&rank) {
            return;
        }
        let reason = if rank < 0 || rank >= self.size {
            format!(
                "it is outside MPI_COMM_WORLD (size {}) and not in the snapshot",
                self.size
            )
        } else {
            "it is not in the snapshot".to_string()
        };
        self.unknown.insert(rank, reason);
    }

    /// Every rank of the graph: the job's, the snapshot's, and any referred to.
    pub fn nodes(&self) -> BTreeSet<i64> {
        let mut n: BTreeSet<i64> = (0..self.size).collect();
        n.extend(self.procs.keys().copied());
        n.extend(self.unknown.keys().copied());
        n
    }
}

/// The size of `MPI_COMM_WORLD` as the processes report it (MPICH's
/// `MPI_ICOMM_WORLD` when no process lists `MPI_COMM_WORLD`).
fn world_size(snap: &Snapshot, notes: &mut Vec<String>) -> Option<i64> {
    for name in ["MPI_COMM_WORLD", "MPI_ICOMM_WORLD"] {
        let sizes: BTreeSet<i64> = snap
            .processes
            .iter()
            .flat_map(|p| &p.communicators)
            .filter(|c| c.name == name)
            .filter_map(member)
            .map(|(size, _)| size)
            .collect();
        if let Some(&max) = sizes.iter().next_back() {
            if sizes.len() > 1 {
                let list: Vec<String> = sizes.iter().map(i64::to_string).collect();
                notes.push(format!(
                    "processes disagree on the size of {name} ({}): are they from one job? using {max}",
                    list.join(", ")
                ));
            }
            return Some(max);
        }
    }
    None
}

/// Whether a thread of the process is in `MPI_Finalize` (its stacks say
/// so): it has left every communicator, and a debug library may list none
/// by then (MPICH's), which is then no gap in what is known.
fn finalizing(p: &ProcessSnapshot) -> bool {
    p.stacks.as_ref().is_some_and(|s| {
        s.threads.iter().any(
            |t| matches!(crate::stacks::position(t), crate::stacks::Position::InMpi { call, .. } if call == "finalize"),
        )
    })
}

/// Why a process's waits cannot be known, if so.
fn unreadable(p: &ProcessSnapshot) -> Option<String> {
    // The flight recorder's queues stand in for the MPI's; the process's
    // error is the story of the missing ones.
    let recorded = super::recorded::recorded(p);
    if let Some(m) = p.queues_missing.as_ref().filter(|_| !recorded) {
        // The process's error has the long story and the fix.
        return Some(
            match m.reason {
                MissingReason::NoDebuggerSupport => "their MPI was built without message queue debugging support",
                MissingReason::NoDebugLibrary => "their MPI's message queue debug library is not on this machine",
                MissingReason::NoDebugInfo => "their MPI library has no debug information",
                MissingReason::TransportHidden => "their queues are not visible with the transport the job runs on",
                MissingReason::LibraryUntrusted => "their MPI's debug library reads their receives wrongly",
            }
            .to_string(),
        );
    }
    if let Some(e) = super::recorded::queue_error(p) {
        return Some(e.clone());
    }
    if let Some(m) = p.messages.iter().find(|m| LIST_CUT.iter().any(|s| m.starts_with(s))) {
        return Some(format!("its communicator list is incomplete: {m}"));
    }
    if !p.communicators.iter().any(|c| member(c).is_some()) && !finalizing(p) {
        return Some("the debug library listed no communicator it is a member of".to_string());
    }
    for c in p.communicators.iter().filter(|c| member(c).is_some()) {
        for (queue, what) in [(&c.queues.receives, "receive"), (&c.queues.sends, "send")] {
            let why = queue.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default();
            if !queue.available {
                return Some(format!(
                    "its {what} queue on {} is not available{why}",
                    comm_words(&c.name)
                ));
            }
            if queue.incomplete {
                return Some(format!(
                    "its {what} queue on {} was cut short{why}",
                    comm_words(&c.name)
                ));
            }
        }
    }
    None
}

/// A communicator's name as written in sentences: predefined names bare,
/// and the words of a communicator the flight recorder knows by its
/// members (`recorded::comm_name`); the others quoted.
pub(crate) fn comm_words(name: &str) -> String {
    let described = name.starts_with("the communicator of ") || name.starts_with("a communicator of ");
    if name.starts_with("MPI_COMM_") || name == "MPI_ICOMM_WORLD" || described {
        name.to_string()
    } else {
        format!("'{name}'")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::testutil::*;
    use crate::snapshot::model::Queue;

    #[test]
    fn missing_and_failed_ranks_are_unknown() {
        let mut s = snapshot(vec![process(0, vec![world(3, 0)]), process(2, vec![world(3, 2)])]);
        s.processes[1].error = Some("cannot attach".into());
        let job = Job::new(&s);
        assert_eq!(job.size, 3);
        assert_eq!(job.unknown.keys().copied().collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(job.unknown[&1], "it is not in the snapshot");
        assert_eq!(job.unknown[&2], "cannot attach");
        assert!(job.is_readable(0) && !job.is_readable(1));
    }

    #[test]
    fn an_unavailable_or_cut_queue_makes_the_rank_unknown_but_not_the_unexpected_queue() {
        let mut a = world(2, 0);
        a.queues.unexpected = Queue::unavailable("not implemented");
        let mut b = world(2, 1);
        b.queues.sends.incomplete = true;
        let job = Job::new(&snapshot(vec![process(0, vec![a]), process(1, vec![b])]));
        assert!(job.is_readable(0));
        assert!(job.unknown[&1].contains("send queue on MPI_COMM_WORLD was cut short"));
    }

    #[test]
    fn a_cut_communicator_list_makes_the_rank_unknown() {
        let mut s = snapshot(vec![process(0, vec![world(1, 0)])]);
        s.processes[0]
            .messages
            .push("a communicator could not be read: read failed".into());
        assert!(Job::new(&s).unknown[&0].contains("communicator list is incomplete"));
    }

    #[test]
    fn duplicate_and_rankless_processes_are_noted() {
        let mut s = snapshot(vec![process(0, vec![world(1, 0)]), process(0, vec![world(1, 0)])]);
        s.processes.push(process(0, vec![]));
        s.processes[2].world_rank = None;
        let job = Job::new(&s);
        assert_eq!(job.procs.len(), 1);
        assert_eq!(job.notes.len(), 2);
    }

    #[test]
    fn referenced_ranks_outside_the_job_are_unknown_nodes() {
        let mut job = Job::new(&snapshot(vec![process(0, vec![world(1, 0)])]));
        job.add_referenced(5);
        assert!(job.unknown[&5].contains("outside MPI_COMM_WORLD"));
        assert_eq!(job.nodes().into_iter().collect::<Vec<_>>(), vec![0, 5]);
    }
}
