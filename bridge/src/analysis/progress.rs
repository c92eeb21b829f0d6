//! Progress between two samples of the same job.
//!
//! A wait is *confirmed* when the previous sample holds the same operation:
//! same rank (and process), communicator (id and name), queue, peer, tag,
//! buffer address and status. A rank one of whose waiting operations is new
//! ran between the samples (it posted or finished something): it is taken
//! as progressing. A rank the previous sample cannot speak for (missing,
//! unreadable, a queue cut short) is *unconfirmed*: its waits may be real,
//! but a deadlock resting on them is not shown.

use std::collections::{BTreeMap, HashMap};

use super::job::comm_words;
use super::matching::Wait;
use crate::snapshot::model::{Operation, ProcessSnapshot, QueueKind, Snapshot};

/// What the previous sample says about the waiting ranks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Progress {
    /// Ranks whose waiting operations changed, with the first change.
    pub changed: BTreeMap<i64, String>,
    /// Ranks whose waits could not be confirmed, with the reason.
    pub unconfirmed: BTreeMap<i64, String>,
}

/// Whether two operations are the same pending operation.
fn same(a: &Operation, b: &Operation) -> bool {
    a.status == b.status
        && a.peer.local == b.peer.local
        && a.any_source == b.any_source
        && a.tag == b.tag
        && a.any_tag == b.any_tag
        && a.buffer == b.buffer
}

fn queue_words(q: QueueKind) -> &'static str {
    match q {
        QueueKind::Sends => "send",
        QueueKind::Receives => "receive",
        QueueKind::Unexpected => "unexpected message",
    }
}

/// Compares the operations behind the current waits with the previous sample.
pub(crate) fn compare(current: &Snapshot, previous: &Snapshot, waits: &[Wait]) -> Progress {
    let mut out = Progress::default();
    // Each process of the previous sample by world rank (the first one of
    // a rank): looked up once per wait, not searched (100,000 ranks).
    let mut before: HashMap<Option<i32>, &ProcessSnapshot> = HashMap::with_capacity(previous.processes.len());
    for q in &previous.processes {
        before.entry(q.world_rank).or_insert(q);
    }
    for w in waits {
        if out.changed.contains_key(&w.rank) {
            continue;
        }
        match check(current, &before, w) {
            Ok(()) => {}
            Err(Seen::Changed(why)) => {
                out.unconfirmed.remove(&w.rank);
                out.changed.insert(w.rank, why);
            }
            Err(Seen::Unconfirmed(why)) => {
                out.unconfirmed.entry(w.rank).or_insert(why);
            }
        }
    }
    out
}

/// Why a wait is not confirmed.
enum Seen {
    Changed(String),
    Unconfirmed(String),
}

fn check(current: &Snapshot, previous: &HashMap<Option<i32>, &ProcessSnapshot>, w: &Wait) -> Result<(), Seen> {
    // A blocking call's own wait: its position is compared by `moved`.
    let Some(at) = w.at else { return Ok(()) };
    let p: &ProcessSnapshot = &current.processes[at.process];
    let c = &p.communicators[at.comm];
    let op = &c.queues.get(at.queue).operations[at.op];
    let Some(&before) = previous.get(&p.world_rank) else {
        return Err(Seen::Unconfirmed("it is not in the previous sample".into()));
    };
    if let Some(e) = super::recorded::queue_error(before) {
        return Err(Seen::Unconfirmed(format!(
            "its queues could not be read in the previous sample ({e})"
        )));
    }
    if let (Some(a), Some(b)) = (p.pid, before.pid) {
        if a != b {
            return Err(Seen::Unconfirmed(format!(
                "the previous sample shows another process (pid {b}, now {a})"
            )));
        }
    }
    let what = format!("its {} on {}", queue_words(at.queue), comm_words(&c.name));
    let Some(bc) = before.communicators.iter().find(|b| b.id == c.id && b.name == c.name) else {
        return Err(Seen::Changed(format!(
            "{what} is on a communicator the previous sample did not have"
        )));
    };
    let queue = bc.queues.get(at.queue);
    if !queue.available {
        return Err(Seen::Unconfirmed(format!(
            "its {} queue on {} was not available in the previous sample",
            queue_words(at.queue),
            comm_words(&c.name)
        )));
    }
    if queue.operations.iter().any(|b| same(op, b)) {
        Ok(())
    } else if queue.incomplete {
        Err(Seen::Unconfirmed(format!(
            "its {} queue on {} was cut short in the previous sample",
            queue_words(at.queue),
            comm_words(&c.name)
        )))
    } else {
        Err(Seen::Changed(format!("{what} (buffer {}) is new", op.buffer)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::groups::identify;
    use crate::analysis::job::Job;
    use crate::analysis::matching::match_ops;
    use crate::analysis::testutil::*;
    use crate::snapshot::model::Status;

    fn pair() -> Snapshot {
        snapshot(vec![
            process(0, vec![world(2, 0).recvs(vec![recv(Some(1), Some(1))])]),
            process(1, vec![world(2, 1).sends(vec![send(0, 2, Status::Pending)])]),
        ])
    }

    fn progress(cur: &Snapshot, prev: &Snapshot) -> Progress {
        let m = match_ops(cur, &Job::new(cur), &identify(cur));
        compare(cur, prev, &m.waits)
    }

    #[test]
    fn unchanged_waits_are_confirmed() {
        assert_eq!(progress(&pair(), &pair()), Progress::default());
    }

    #[test]
    fn a_new_buffer_tag_or_status_is_progress() {
        let before = pair();
        let mut now = pair();
        now.processes[0].communicators[0].queues.receives.operations[0].buffer = "0x1".into();
        let p = progress(&now, &before);
        assert_eq!(p.changed.keys().copied().collect::<Vec<_>>(), vec![0]);
        assert!(p.changed[&0].contains("receive on MPI_COMM_WORLD (buffer 0x1) is new"));
        let mut now = pair();
        now.processes[1].communicators[0].queues.sends.operations[0].tag = Some(3);
        assert!(progress(&now, &before).changed.contains_key(&1));
    }

    #[test]
    fn a_rank_the_previous_sample_cannot_speak_for_is_unconfirmed() {
        let now = pair();
        let mut before = pair();
        before.processes[1] = failed(1, "busy");
        before.processes.remove(0);
        let p = progress(&now, &before);
        assert!(p.changed.is_empty());
        assert!(p.unconfirmed[&0].contains("not in the previous sample"));
        assert!(p.unconfirmed[&1].contains("busy"));
        let mut before = pair();
        before.processes[0].pid = Some(1);
        assert!(progress(&now, &before).unconfirmed[&0].contains("another process"));
    }
}
