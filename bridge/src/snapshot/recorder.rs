//! What mpiq's flight recorder (`recorder/`, layout `mpiq_recorder.h`) kept
//! in a process: its last MPI calls, the nonblocking requests still
//! pending, and its communicators with their collective counters. Read by
//! [`crate::recorder`]; a process without the recorder has none.

use serde::{Deserialize, Serialize};

/// The recorder's tables, as read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recording {
    /// The layout's version.
    pub version: u32,
    /// The ABI the recorder found: `open_mpi`, `mpich`, or `unknown` (it
    /// passes calls on without recording them).
    pub mpi: String,
    /// `MPI_Init` had returned: calls are recorded from there on.
    pub initialized: bool,
    /// Rank and size of `MPI_COMM_WORLD`, once initialized.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world_rank: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world_size: Option<i64>,
    /// Calls recorded since the start; `calls` holds the last of them.
    pub calls_started: u64,
    /// The last calls, oldest first; one without `end_ns` is still running.
    pub calls: Vec<RecordedCall>,
    /// Records of the ring being written when the process stopped, left out.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub torn: u64,
    /// Nonblocking requests started and not yet completed.
    pub pending: Vec<RecordedRequest>,
    /// Whether `pending` holds every pending request: false once a request
    /// did not fit, or an array too long to follow was waited on.
    pub pending_complete: bool,
    /// The communicators the process used.
    pub comms: Vec<RecordedComm>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What a recorded call, or the call that started a pending request, was
/// given (flattened into both in the JSON).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedArgs {
    /// The communicator handle (`0x...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comm: Option<String>,
    /// Destination, source or root, as a rank of `comm`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<i64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub any_source: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<i64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub any_tag: bool,
    /// Elements (requests, for the wait and test calls).
    pub count: i64,
    /// Bytes per element, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub type_size: Option<i64>,
    /// A collective's number on its communicator (1, 2, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collective_seq: Option<u64>,
}

/// One recorded MPI call.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedCall {
    /// Its number among the process's recorded calls (1, 2, ...).
    pub seq: u64,
    /// The call's canonical name (`send`, `barrier`), as the stacks name it.
    pub call: String,
    #[serde(flatten)]
    pub args: RecordedArgs,
    /// `MPI_Sendrecv`'s source and receive tag (`peer` and `tag` are its send's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recv_tag: Option<i64>,
    /// The request it started, or the first one it waits on (`0x...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    /// A wait or test call: how many requests it was given that were not
    /// `MPI_REQUEST_NULL`, and how many of those the pending table holds
    /// (the others, started by calls the recorder does not record, are
    /// not known: what the call waits for is then not all known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_active: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_known: Option<i64>,
    /// The calling thread.
    pub tid: u64,
    /// When it began and returned (CLOCK_MONOTONIC of the process's node);
    /// no end: the process is in it. A start of 0: the call had just begun
    /// and its clock was being read.
    pub start_ns: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_ns: Option<u64>,
}

/// A nonblocking request started and not yet completed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedRequest {
    /// The handle the program got (`0x...`).
    pub request: String,
    /// The call that started it, and that call's number.
    pub call: String,
    pub call_seq: u64,
    #[serde(flatten)]
    pub args: RecordedArgs,
    pub start_ns: u64,
    /// The `seq` of the last wait or test call given it: the call still
    /// running with that number waits on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waited_by: Option<u64>,
    /// A persistent request (`MPI_Send_init`, `MPI_Recv_init`), started by
    /// `MPI_Start`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub persistent: bool,
}

/// A communicator the process used.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedComm {
    /// Its handle (`0x...`), as the calls name it.
    pub handle: String,
    /// It is `MPI_COMM_WORLD`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub world: bool,
    /// This process's rank in it, and its size.
    pub rank: i64,
    pub size: i64,
    /// Collectives begun on it.
    pub collectives: u64,
    /// The world rank of each member, in order, when known (`MPI_COMM_WORLD`
    /// needs none; an intercommunicator's are not kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world_ranks: Option<Vec<i64>>,
}
