//! What is known only once every communicator of a process is read.

use crate::snapshot::model::*;

/// Fills in what is known only once every communicator is read: the
/// process's world rank (its rank in `MPI_COMM_WORLD`).
pub(crate) fn finish(snap: &mut ProcessSnapshot) {
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
                c.world_ranks = Some(vec![Some(i64::from(me))]);
                c.world_ranks_source = Some("self".into());
            }
        }
    }
}
