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
/// communicator's `world_ranks`: one process listed twice, a rank past
/// `MPI_COMM_WORLD`'s size, or, where the process's world rank is known,
/// anything but that rank at the process's own place in the group. Open
/// MPI 5.0.7's library gives such groups for a communicator made from a
/// session's group (its processes are not instantiated, and the library
/// reads placeholders as process pointers): `[0, 0, 0, 0]`, ranks in the
/// hundreds of millions, or `[null, 22097, 8, 0]` in a process that lists
/// no `MPI_COMM_WORLD` to bound them. The reason goes to
/// `world_ranks_rejected` and the process's messages; the analysis then
/// infers the ranks across processes where it can.
///
/// Run again once the world rank is known from elsewhere (the
/// environment, the flight recorder): groups already rejected or not from
/// the library are left alone.
pub(crate) fn reject_unbelievable_groups(snap: &mut ProcessSnapshot) {
    let world = snap
        .communicators
        .iter()
        .find(|c| c.name == "MPI_COMM_WORLD")
        .and_then(|c| c.size)
        .filter(|&n| n > 0);
    let me = snap.world_rank.map(i64::from);
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
        let twice = known.iter().any(|&r| !seen.insert(r));
        let limit = world.unwrap_or(MAX_RANKS);
        let past = known.iter().any(|&r| r >= limit);
        // The process's own place holds the process: a library that knows
        // its group knows its caller.
        let not_me = match (me, c.local_rank.and_then(|l| usize::try_from(l).ok())) {
            (Some(me), Some(l)) => ranks.get(l).copied().flatten() != Some(me),
            _ => false,
        };
        // One wording whatever is wrong: what the library made of memory
        // that holds no rank differs from read to read (Open MPI 5.0.7
        // gives any of these), and the ranks themselves are not quoted.
        if !twice && !past && !not_me {
            continue;
        }
        let why = match world {
            Some(n) => format!(
                "the debug library's group lists a process more than once, a world rank past the world's \
                 size ({n}), or another process at this one's own rank"
            ),
            None => "the debug library's group lists a process more than once, an absurd world rank, or another \
                     process at this one's own rank"
                .to_string(),
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
            Some(
                "the debug library's group lists a process more than once, a world rank past the world's size \
                 (4), or another process at this one's own rank"
            )
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

    /// What Open MPI 5.0.7's library gave a sessions-only process in CI: no
    /// MPI_COMM_WORLD to bound the ranks, and a null where the process
    /// itself belongs. Believed until the world rank is known (from the
    /// environment), rejected then.
    #[test]
    fn a_group_without_this_process_at_its_own_rank_is_rejected_once_the_rank_is_known() {
        let mut bad = comm("sessions-world", 4, vec![0, 22097, 8, 0]);
        bad.world_ranks = Some(vec![None, Some(22097), Some(8), Some(0)].into());
        let mut other = comm("other", 2, vec![1, 0]);
        other.local_rank = Some(1);
        let mut s = snap(vec![bad, other]);
        finish(&mut s);
        assert!(s.communicators[0].world_ranks_rejected.is_none());
        s.world_rank = Some(0);
        reject_unbelievable_groups(&mut s);
        assert_eq!(s.communicators[0].world_ranks, None);
        assert!(s.communicators[0].world_ranks_rejected.is_some());
        assert_eq!(s.communicators[1].world_ranks, Some(vec![Some(1), Some(0)].into()));
        assert_eq!(s.messages.len(), 1, "{:?}", s.messages);
        // A second pass changes nothing.
        reject_unbelievable_groups(&mut s);
        assert_eq!(s.messages.len(), 1, "{:?}", s.messages);
    }
}
