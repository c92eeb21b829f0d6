//! What is known only once every communicator of a process is read.

use crate::snapshot::model::*;

/// Fills in what is known only once every communicator is read: the
/// process's world rank (its rank in `MPI_COMM_WORLD`), and which of the
/// groups the library gave cannot be right ([`reject_unbelievable_groups`]).
pub(crate) fn finish(snap: &mut ProcessSnapshot) {
    reject_unbelievable_groups(snap);
    if snap.world_rank.is_none() {
        snap.world_rank = snap
            .communicators
            .iter()
            .find(|c| c.name == "MPI_COMM_WORLD")
            .and_then(|c| c.local_rank)
            .and_then(|r| i32::try_from(r).ok());
    }
    // MPI_COMM_SELF holds only this process.
    if let Some(me) = snap.world_rank {
        for c in &mut snap.communicators {
            if c.name == "MPI_COMM_SELF" && c.world_ranks.is_none() && c.size == Some(1) {
                c.world_ranks = Some(vec![Some(i64::from(me))].into());
                c.world_ranks_source = Some("self".into());
            }
        }
    }
}

/// Past this many ranks a world rank is not believed when the world's size
/// is not known (the bound the group reader puts on sizes too).
const MAX_RANKS: i64 = 1 << 24;

/// A group whose world ranks cannot be right is not shown as the
/// communicator's `world_ranks`: one process listed twice, or a rank past
/// `MPI_COMM_WORLD`'s size. Open MPI 5.0.7's library gives such groups for
/// a communicator made from a session's group (its processes are not
/// instantiated, and the library reads placeholders as process pointers):
/// `[0, 0, 0, 0]`, or ranks in the hundreds of millions. The reason goes to
/// `world_ranks_rejected` and the process's messages; the analysis then
/// infers the ranks across processes where it can.
fn reject_unbelievable_groups(snap: &mut ProcessSnapshot) {
    let world = snap
        .communicators
        .iter()
        .find(|c| c.name == "MPI_COMM_WORLD")
        .and_then(|c| c.size)
        .filter(|&n| n > 0);
    let mut notes = Vec::new();
    for c in &mut snap.communicators {
        if c.world_ranks_source.as_deref() != Some("library") {
            continue;
        }
        let Some(ranks) = &c.world_ranks else {
            continue;
        };
        let known: Vec<i64> = ranks.iter().flatten().copied().collect();
        let mut seen = std::collections::BTreeSet::new();
        let twice = known.iter().find(|&&r| !seen.insert(r));
        let limit = world.unwrap_or(MAX_RANKS);
        let past = known.iter().find(|&&r| r >= limit);
        // One wording whatever is wrong: what the library made of memory
        // that holds no rank differs from read to read (Open MPI 5.0.7
        // gives either), and the ranks themselves are not quoted.
        if twice.is_none() && past.is_none() {
            continue;
        }
        let why = match world {
            Some(n) => format!(
                "the debug library's group lists a process more than once or a world rank past the world's \
                 size ({n})"
            ),
            None => "the debug library's group lists a process more than once or an absurd world rank".to_string(),
        };
        notes.push(format!(
            "communicator '{}': {why}, which cannot be right: its world ranks are not taken from the \
             library",
            c.name
        ));
        c.world_ranks = None;
        c.world_ranks_source = None;
        c.world_ranks_rejected = Some(why);
    }
    snap.messages.extend(notes);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comm(name: &str, size: i64, ranks: Vec<i64>) -> Communicator {
        Communicator {
            id: "3".into(),
            name: name.into(),
            size: Some(size),
            local_rank: Some(0),
            world_ranks: Some(ranks.into_iter().map(Some).collect()),
            world_ranks_source: Some("library".into()),
            world_ranks_rejected: None,
            queues: Queues {
                sends: Queue::available(Vec::new()),
                receives: Queue::available(Vec::new()),
                unexpected: Queue::available(Vec::new()),
            },
        }
    }

    fn snap(comms: Vec<Communicator>) -> ProcessSnapshot {
        ProcessSnapshot {
            communicators: comms,
            ..ProcessSnapshot::new(None, None, "")
        }
    }

    #[test]
    fn a_group_with_a_process_twice_or_past_the_world_is_rejected() {
        let mut s = snap(vec![
            comm("MPI_COMM_WORLD", 4, vec![0, 1, 2, 3]),
            comm("sessions-world", 4, vec![0, 0, 0, 0]),
            comm("odd", 2, vec![1, 7]),
            comm("half", 2, vec![3, 1]),
        ]);
        finish(&mut s);
        let c = &s.communicators;
        assert!(c[0].world_ranks.is_some() && c[0].world_ranks_rejected.is_none());
        assert_eq!(c[1].world_ranks, None);
        assert_eq!(
            c[1].world_ranks_rejected.as_deref(),
            Some("the debug library's group lists a process more than once or a world rank past the world's size (4)")
        );
        assert_eq!(c[2].world_ranks_rejected, c[1].world_ranks_rejected);
        assert_eq!(c[3].world_ranks, Some(vec![Some(3), Some(1)].into()));
        assert_eq!(s.messages.len(), 2, "{:?}", s.messages);
        assert!(s.messages[0].contains("'sessions-world'"), "{:?}", s.messages);
    }

    #[test]
    fn without_a_world_only_absurd_ranks_are_rejected() {
        let mut s = snap(vec![
            comm("sessions-world", 4, vec![0, 528_595_552, 2, 3]),
            comm("fine", 2, vec![5, 9]),
        ]);
        finish(&mut s);
        assert!(s.communicators[0].world_ranks_rejected.is_some());
        assert!(s.communicators[1].world_ranks_rejected.is_none());
    }
}
