//! mpiq's bridge: the debugger side of the MPI message queue debug interface.
//!
//! An MPI library ships a *message queue debug library* (MQD, "the DLL":
//! Open MPI's `libompi_dbg_msgq.so`, MPICH's `libtvmpich.so`) that knows how
//! to walk that MPI's internal queues. The bridge finds and loads it, answers
//! its callbacks through a front end's [`Target`], and turns what it returns
//! into a [`Snapshot`].
//!
//! ```no_run
//! use mpiq::{dump, DumpOptions, Target};
//! fn show(target: &mut dyn Target) {
//!     let opts = DumpOptions::parse_line("--all").unwrap();
//!     match dump(&mut [target], &opts) {
//!         Ok(text) => print!("{text}"),
//!         Err(e) => eprintln!("{e}"),
//!     }
//! }
//! ```
#![deny(unsafe_op_in_unsafe_fn, improper_ctypes, improper_ctypes_definitions)]
#![deny(clippy::undocumented_unsafe_blocks)]

// The modules form layers (ARCHITECTURE.md, "Layers of the bridge"; checked
// by bridge/tests/layers.rs): a module uses only modules of lower layers.

/// Cross-rank analysis of a whole job: matching, wait-for graph, deadlocks.
pub mod analysis;
/// The public C API (`include/mpiq.h`) over callback tables.
pub mod capi;
/// Collecting one process: the libraries to try and where each runs.
pub mod collect;
/// Finding, checking and loading a debug library.
pub mod dll;
/// One dump through a loaded library, in the process that runs it.
pub mod dump;
/// The mqs ABI, the `extern "C"` trampolines, the per-dump session and the
/// loaded library's entry points.
pub mod ffi;
/// Running the debug library in the helper process `mpiq-dllhost`.
pub mod isolate;
/// The lookup diagnostic: a debug library's questions asked of a target.
pub mod lookup;
/// The table of the queue command's options: its parser, help and usage line.
pub mod options;
/// The one text renderer and the JSON of a snapshot; a snapshot with its
/// cross-rank analysis (`render::report`).
pub mod render;
/// The snapshot model, and what is known once a process is read.
pub mod snapshot;
/// Where each rank is: MPI calls in call stacks (issue 12, in progress).
pub mod stacks;
/// The trait front ends implement to give access to a target; the page
/// cache in front of it; recording and replaying its answers.
pub mod target;
/// Test-only targets, fault injection and a deterministic RNG (the bridge's
/// unit tests, and the cargo feature `testkit` for other test crates).
#[cfg(any(test, feature = "testkit"))]
pub mod testkit;

pub use collect::{collect, Interrupted, RANK_VARIABLES};
pub use dll::discover;
pub use options::{DumpOptions, Format, UsageError, HELP};
pub use render::{render, render_text, Report, Samples};
pub use snapshot::model::*;
pub use target::read::TargetExt;
pub use target::{cache, record, session};
pub use target::{ByteOrder, HeldBytes, HeldRegion, ProcessDescription, Target, TargetError, TypeId, TypeSizes};

/// Why a whole dump failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DumpError {
    /// No process could be read; one line per process.
    #[error("{0}")]
    AllFailed(String),
    /// The user interrupted the dump.
    #[error("interrupted: the message queue dump was stopped")]
    Interrupted,
    /// `--record FILE` could not be written.
    #[error("{0}")]
    Record(String),
}

/// Collects every target and renders the result as the options ask.
///
/// Per-process failures are part of the snapshot; the dump as a whole fails
/// only when it was interrupted or when no process at all could be read
/// (a process whose MPI gives no queues counts as read when its stacks
/// were).
pub fn dump(targets: &mut [&mut dyn Target], opts: &DumpOptions) -> Result<String, DumpError> {
    let snapshot = collect_all(targets, opts)?;
    Ok(render(&snapshot, opts))
}

/// Collects every target into one snapshot (see [`dump`] for the errors);
/// with `opts.record`, writes what they answered into that file.
pub fn collect_all(targets: &mut [&mut dyn Target], opts: &DumpOptions) -> Result<Snapshot, DumpError> {
    collect_all_with(targets, opts, &mut |recordings| {
        let Some(path) = &opts.record else { return Ok(()) };
        let file = record::RecordingFile {
            schema: record::RECORDING_SCHEMA.to_string(),
            mpiq_version: env!("CARGO_PKG_VERSION").to_string(),
            processes: recordings,
            samples: Vec::new(),
        };
        file.save(path).map_err(|e| DumpError::Record(e.to_string()))
    })
}

/// [`collect_all`], handing what the targets answered (with `opts.record`:
/// one recording per target, in order) to `keep` instead of writing the
/// file: `mpiq watch --record` adds each sample to one session recording
/// ([`target::session`]).
pub fn collect_all_with(
    targets: &mut [&mut dyn Target],
    opts: &DumpOptions,
    keep: &mut dyn FnMut(Vec<record::Recording>) -> Result<(), DumpError>,
) -> Result<Snapshot, DumpError> {
    let mut snapshot = Snapshot::default();
    let mut recordings = Vec::new();
    for target in targets.iter_mut() {
        let process = if opts.record.is_some() {
            let mut recorder = record::Recorder::new(&mut **target);
            let p = collect(&mut recorder, opts);
            recordings.push(recorder.finish());
            p
        } else {
            collect(&mut **target, opts)
        };
        snapshot.processes.push(process.map_err(|_| DumpError::Interrupted)?);
    }
    if opts.record.is_some() {
        keep(recordings)?;
    }
    // A process whose MPI gives no queues is still worth a report when its
    // stacks say where it is (stacks-only mode).
    let reportable = |p: &ProcessSnapshot| {
        p.error.is_none() || (p.queues_missing.is_some() && p.stacks.as_ref().is_some_and(|s| !s.threads.is_empty()))
    };
    if !snapshot.processes.is_empty() && !snapshot.processes.iter().any(reportable) {
        let lines: Vec<String> = snapshot
            .processes
            .iter()
            .map(|p| match (p.pid, snapshot.processes.len()) {
                (_, 1) => p.error.clone().unwrap_or_default(),
                (Some(pid), _) => format!("process {pid}: {}", p.error.as_deref().unwrap_or_default()),
                (None, _) => p.error.clone().unwrap_or_default(),
            })
            .collect();
        return Err(DumpError::AllFailed(lines.join("\n")));
    }
    Ok(snapshot)
}
