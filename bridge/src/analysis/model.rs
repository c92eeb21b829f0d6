//! The result of an analysis, as plain serde data (`Analysis` and its parts).

use serde::{Deserialize, Serialize};

use crate::snapshot::model::Status;

/// What the analysis concludes about the whole job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Some ranks wait, directly or through others, on each other, and none
    /// of them can be released by a rank that can still run (and, with two
    /// samples, the operations behind those waits did not change).
    Deadlock,
    /// Every rank can still run, or is waiting on a rank that can: the
    /// evidence supports "not stuck in MPI communication".
    NoDeadlock,
    /// Neither can be shown: a rank could not be read, or a wait depends on
    /// something the queues do not tell.
    Unknown,
}

impl Verdict {
    /// The name used in JSON, text and CSV.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Deadlock => "deadlock",
            Verdict::NoDeadlock => "no_deadlock",
            Verdict::Unknown => "unknown",
        }
    }
}

/// How an edge of the wait-for graph combines with the other edges of its
/// operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EdgeKind {
    /// The rank needs this one peer (a receive from a specific source, a
    /// pending send): the only edge of its operation.
    And,
    /// The rank needs any one of the peers of the operation (a receive from
    /// `MPI_ANY_SOURCE`): one edge per possible sender, sharing `wait`.
    Or,
}

impl EdgeKind {
    /// The name used in JSON, text and CSV.
    pub fn as_str(self) -> &'static str {
        match self {
            EdgeKind::And => "and",
            EdgeKind::Or => "or",
        }
    }
}

/// Which side of a message an operation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    /// A posted receive.
    Receive,
    /// A send.
    Send,
    /// A blocking synchronous (or rendezvous) send the queues do not list
    /// (MPICH's blocking sends): complete only once its receiver posts a
    /// matching receive.
    SyncSend,
    /// A collective: waits for the members of its communicator not in it.
    Collective,
    /// Another blocking MPI call whose wait the queues do not show (one-sided
    /// synchronisation, collective I/O, a wait on a request no queue lists).
    Call,
}

impl OpKind {
    /// The name used in JSON, text and CSV.
    pub fn as_str(self) -> &'static str {
        match self {
            OpKind::Receive => "receive",
            OpKind::Send => "send",
            OpKind::SyncSend => "sync_send",
            OpKind::Collective => "collective",
            OpKind::Call => "call",
        }
    }
}

/// One edge of the wait-for graph: `from` cannot complete an operation
/// until `to` acts (sends, or posts the matching receive).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Edge {
    /// The waiting world rank.
    pub from: i64,
    /// The world rank waited for.
    pub to: i64,
    /// AND (this peer) or OR (any peer of the same `wait`).
    pub kind: EdgeKind,
    /// Name of the communicator of the operation.
    pub communicator: String,
    /// The tag of the operation; `null` for `MPI_ANY_TAG` (or unknown).
    pub tag: Option<i64>,
    /// Whether the waiting operation is a receive or a send.
    pub op: OpKind,
    /// Index in [`Analysis::unmatched`] of the operation behind the edge
    /// (the OR edges of one `MPI_ANY_SOURCE` receive share it); `null` for
    /// the wait of a blocking call the queues do not list (a collective).
    pub wait: Option<usize>,
    /// The wait in words, for the waits of blocking calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub words: Option<String>,
}

/// A pending operation of a readable rank that nothing in the snapshot
/// matches: a receive no listed send or unexpected message satisfies, or a
/// pending send no posted receive takes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unmatched {
    /// World rank of the process holding the operation.
    pub rank: i64,
    /// Name of its communicator.
    pub communicator: String,
    /// Receive or send.
    pub kind: OpKind,
    /// World rank of the peer (source of a receive, destination of a send);
    /// `null` for `MPI_ANY_SOURCE` or when unknown.
    pub peer: Option<i64>,
    /// The tag; `null` for `MPI_ANY_TAG` (or unknown).
    pub tag: Option<i64>,
    /// The peer as a rank of the communicator, when known.
    #[serde(default)]
    pub peer_local: Option<i64>,
    /// A receive from `MPI_ANY_SOURCE`.
    #[serde(default)]
    pub any_source: bool,
    /// A receive with `MPI_ANY_TAG`.
    #[serde(default)]
    pub any_tag: bool,
    /// The status the library reported.
    pub status: Status,
    /// The buffer address, `0x...`.
    #[serde(default)]
    pub buffer: String,
    /// The request the program holds for it, when mpiq's flight recorder
    /// kept the operation (its buffer is then not known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
}

/// The cross-rank analysis of one (or two) whole-job snapshots.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Analysis {
    /// The conclusion.
    pub verdict: Verdict,
    /// The conclusion in plain words, one line.
    pub summary: String,
    /// Elementary wait cycles among deadlocked ranks, as world ranks in wait
    /// order (`[0, 1, 2]`: 0 waits for 1, 1 for 2, 2 for 0), each starting
    /// at its smallest rank; sorted, without duplicates, at most
    /// [`MAX_CYCLES`](super::MAX_CYCLES).
    pub cycles: Vec<Vec<i64>>,
    /// Deadlocked ranks that are on no cycle: blocked behind one.
    pub blocked: Vec<i64>,
    /// The wait-for graph: one edge per unmatched operation and peer waited
    /// for (at most [`MAX_EDGES`](super::MAX_EDGES)).
    pub edges: Vec<Edge>,
    /// The operations nothing in the snapshot matches, that the edges come from.
    pub unmatched: Vec<Unmatched>,
    /// World ranks whose queues could not be read (an error, a send or
    /// receive queue not available or cut short, missing from the snapshot).
    pub unknown_ranks: Vec<i64>,
    /// Readable ranks that are not shown deadlocked, but whose progress
    /// depends on something unknown (an unknown rank, a communicator that
    /// cannot be identified across processes, an `MPI_ANY_SOURCE` receive
    /// on a communicator of unknown group, a wait not confirmed by the
    /// previous sample).
    #[serde(default)]
    pub undecided: Vec<i64>,
    /// Ranks whose waiting operations changed between the two samples.
    #[serde(default)]
    pub progressing: Vec<i64>,
    /// Everything else worth knowing: inferred groups, ambiguous
    /// communicators, limits hit, reasons.
    pub notes: Vec<String>,
    /// Where each rank is (from its call stacks), when stacks were read.
    #[serde(default, rename = "where", skip_serializing_if = "Vec::is_empty")]
    pub where_: Vec<super::RankWhere>,
    /// The deadlock was found by the stall rule: every rank blocked in MPI,
    /// nothing changed between two samples, nothing able to match, though
    /// some waits could not be resolved (a collective's communicator).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stalled: bool,
    /// What the verdict rests on.
    #[serde(default)]
    pub evidence: Evidence,
    /// Ranks read from their stacks alone: their MPI gives no queues
    /// (their processes' `queues_missing` says why).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stacks_only: Vec<i64>,
    /// Whom the waiting ranks wait for in the end: every rank blocked in
    /// MPI is followed through the ranks it waits on that are themselves
    /// blocked in MPI, to the ranks that are not (computing, blocked
    /// outside MPI, gone, unreadable); ranks at such ends with the same
    /// description are one entry. Empty when no rank waits on such a rank
    /// (nobody waits, or the waits only lead round a cycle).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waited_on: Vec<WaitedOn>,
    /// The verdict rests on what moved between the two samples, and the
    /// latest sample alone would say worse (ranks deadlocked), or every
    /// rank was only seen to move: a job that moved into its hang between
    /// the samples (it was still starting at the first) looks the same,
    /// and only a further sample tells them apart. Also when ranks without
    /// queues were seen to move and others not (`unknown`): a further
    /// sample may see those move too.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rests_on_change: bool,
    /// Ranks of the job that barely ran between the two samples though
    /// ready to (a crowded node: `OsState::run_us`, `wait_us`), and so
    /// could not show whether they move; no deadlock is said of them. A
    /// sampler gives them longer, comparing a later sample with the same
    /// first one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub starved: Vec<i64>,
}

/// Ranks at the end of other ranks' waits, not themselves waiting in MPI,
/// for [`Analysis::waited_on`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitedOn {
    /// The world ranks waited on, with the same description.
    pub ranks: Vec<i64>,
    /// What they are doing: `computing` (in their own code),
    /// `blocked_outside_mpi` (a system call, a lock, I/O), `in_mpi_unnamed`
    /// (in the MPI library in a call its stack cannot name), `gone` (no
    /// process in the snapshot: exited, killed, or not found),
    /// `unreadable` (a process whose stacks are not known).
    pub state: String,
    /// In words, without the ranks: "is computing in smooth (solver.c:31)".
    pub text: String,
    /// The function they are in: the application's innermost one
    /// (`smooth`), or the call outside MPI they are blocked in (`read`);
    /// `null` when not known.
    #[serde(default)]
    pub function: Option<String>,
    /// `file:line` of the application's innermost frame, when known.
    #[serde(default)]
    pub location: Option<String>,
    /// The ranks waiting on them, directly or through other waiting ranks,
    /// grouped by where they wait.
    pub waiters: Vec<Waiter>,
}

/// Ranks waiting in MPI on a [`WaitedOn`] entry's ranks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Waiter {
    /// The waiting world ranks, with the same description.
    pub ranks: Vec<i64>,
    /// The MPI call they wait in (`MPI_Allreduce`), when one.
    #[serde(default)]
    pub call: Option<String>,
    /// `file:line` of the application's call, when known.
    #[serde(default)]
    pub location: Option<String>,
    /// In words, without the ranks: "wait in MPI_Allreduce on
    /// MPI_COMM_WORLD (solver.c:88)".
    pub text: String,
    /// They wait on the entry's ranks themselves (`false`: through other
    /// waiting ranks).
    pub direct: bool,
    /// Whom they wait for is known (`false`: their partners could not be
    /// named — a collective's communicator not recovered, queues not
    /// readable — and the entry's ranks are among the ranks not blocked in
    /// MPI, the only ones that can act).
    #[serde(default = "yes")]
    pub partners_known: bool,
}

fn yes() -> bool {
    true
}

/// What a verdict rests on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Evidence {
    /// The queues alone (no stacks were read).
    #[default]
    Queues,
    /// The queues and the stacks.
    QueuesAndStacks,
    /// Some ranks' queues, and the stacks of every rank: some ranks' MPI
    /// gives no queues.
    SomeQueuesAndStacks,
    /// The stacks alone: no rank's queues are readable with this MPI build.
    Stacks,
}
