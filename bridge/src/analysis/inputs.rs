//! What the verdict is drawn from: the job, the matching, the comparison
//! with a previous sample and what the stacks say; read by the conclusion
//! (`verdict.rs`) and by what the stacks-only ranks lack (`missing.rs`).

use std::collections::{BTreeMap, BTreeSet};

use super::calls::{Call, Place};
use super::job::Job;
use super::matching::Matching;
use super::progress::Progress;
use crate::snapshot::model::Snapshot;

/// Everything the conclusion is drawn from.
pub(crate) struct Inputs<'a> {
    /// The job's ranks.
    pub job: &'a Job,
    /// The matched and unmatched operations.
    pub matching: Matching,
    /// The comparison with a previous sample, if one was given.
    pub progress: Option<Progress>,
    /// Time between the samples, when the caller knows it.
    pub interval_ms: Option<u64>,
    /// Notes so far (inference, ranks, matching).
    pub notes: Vec<String>,
    /// Where the ranks are, from their stacks.
    pub stacks: StackFacts<'a>,
}

/// What the stacks say.
pub(crate) struct StackFacts<'a> {
    /// The snapshot (groups inferred).
    pub snap: &'a Snapshot,
    /// Where each rank is.
    pub places: &'a BTreeMap<i64, Place>,
    /// Ranks free whatever else they wait for.
    pub free: BTreeSet<i64>,
    /// Ranks free only in the best case, with the reason.
    pub maybe: BTreeMap<i64, String>,
    /// Two samples show every rank in the same blocking calls.
    pub all_confirmed: bool,
    /// Ranks known from their stacks alone (their MPI gives no queues).
    pub stacks_only: BTreeSet<i64>,
    /// Ranks stopped by a signal in either sample (`OsState::stopped`).
    pub stopped: BTreeSet<i64>,
    /// Ranks that barely ran between the two samples though ready to
    /// (a crowded node), with their time on a CPU and waiting for one, in
    /// microseconds ([`super::starved_ranks`]).
    pub starved: BTreeMap<i64, (u64, u64)>,
}

/// Whether a call's calling frames have a digest ([`crate::stacks::state`]),
/// which a stacks-only rank's stall needs.
pub(super) fn digested(c: &Call) -> bool {
    c.args.as_ref().is_some_and(|a| a.state.is_some())
}
