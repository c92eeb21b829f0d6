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
// by checks/tests/structure.rs): a module uses only modules of lower layers.

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
/// Reading mpiq's flight recorder (`recorder/`) out of a process.
pub mod recorder;
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

pub use collect::all::{collect_all, collect_all_with, dump, DumpError};
pub use collect::{collect, Interrupted, RANK_VARIABLES};
pub use dll::discover;
pub use options::{DumpOptions, Format, UsageError, HELP};
pub use render::{render, render_text, Report, Samples};
pub use snapshot::model::*;
pub use target::read::TargetExt;
pub use target::{cache, record, session};
pub use target::{ByteOrder, HeldBytes, HeldRegion, ProcessDescription, Target, TargetError, TypeId, TypeSizes};
