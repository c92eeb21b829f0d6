//! mpiq's standalone front end: target access without a debugger.
//!
//! A live process is stopped with ptrace ([`ptrace`]), its memory read with
//! `process_vm_readv` ([`memory`]), its mapped objects found in
//! `/proc/PID/maps` ([`maps`]) and read with `object` ([`elf`]) and `gimli`
//! ([`dwarf`]); a core file gives the same from its notes ([`core`]). Either
//! becomes a [`Process`], the [`mpiq::Target`] the bridge dumps.
//!
//! ```no_run
//! use mpiq_cli::LiveProcess;
//! let mut rank = LiveProcess::attach(4242)?;
//! let opts = mpiq::DumpOptions::parse_line("--all").unwrap();
//! print!("{}", mpiq::dump(&mut [&mut rank], &opts)?);
//! rank.detach()?; // dropping it would detach too
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(unsafe_op_in_unsafe_fn, improper_ctypes, improper_ctypes_definitions)]
#![deny(clippy::undocumented_unsafe_blocks)]

/// The command line (clap).
pub mod args;
/// The auxiliary vector, and words of a given size and byte order.
pub mod auxv;
/// The per-run cache of parsed object files.
pub mod cache;
/// Core files written by gdb's `gcore` (or the kernel).
pub mod core;
/// Finding separate debug files and dwz supplementary files.
pub mod debugfile;
/// The dispatcher: runs the command a parsed command line names.
pub mod dispatch;
/// The DWARF of one file: type index and DIE reading.
pub mod dwarf;
/// One ELF object: headers, symbols, debug links.
pub mod elf;
/// `--flamegraph FILE.svg`: the merged stacks drawn by inferno.
pub mod flamegraph;
/// Where gdb's `mpiq.py` and lldb's plugin are, for the commands that open
/// one rank of each group in a debugger.
pub mod handoff;
/// `--html FILE`: the report as one self-contained web page.
pub mod html;
/// A process image: objects in search order; symbol and type lookups.
pub mod image;
/// The interrupt flag: raised on SIGINT/SIGTERM, read by every reader.
pub mod interrupt;
/// A starter's `MPIR_proctable` or `MPI2DD_info` proctable: the ranks of a job.
pub mod job;
/// `mpiq run`: running a job, reporting on it and ending it if it hangs.
pub mod launch;
/// Opening a live process.
pub mod live;
/// `mpiq lookup`: answering the library's questions, for checking against gdb.
pub mod lookup;
/// A file mapped into a process (a core file's `NT_FILE` entry).
pub mod mapped;
/// `/proc/PID/maps` parsing and load biases.
pub mod maps;
/// Reading a live process's memory.
pub mod memory;
/// The files written beside a command's output, and their error.
pub mod outfile;
/// The ranks of a job from its launcher's PMIx server (Open MPI 5's
/// prterun), through the PMIx tool interface in a helper process.
pub mod pmix;
/// A process image plus memory: the `mpiq::Target`.
pub mod process;
/// The processes of a job from `/proc`, each known by pid and start time.
pub mod procs;
/// Stopping and releasing a live process.
pub mod ptrace;
/// Python frames from a core file: the view of it py-spy can read.
pub mod pycore;
/// A thread's registers, in DWARF order.
pub mod regs;
/// The output: snapshot, analysis (text, JSON, dot, CSV, SVG), exit status.
pub mod report;
/// What the commands share: open, dump, release, render; their errors.
pub mod run;
/// Releasing stopped processes on SIGINT/SIGTERM.
pub mod signals;
/// Call stacks: every thread's registers unwound through the objects' CFI
/// (frame pointers where there is none), then symbolised.
pub mod unwind;
/// `mpiq watch`: the live terminal view of a job, sample after sample.
pub mod watch;

pub use crate::core::{CoreError, CoreProcess};
pub use crate::live::{LiveError, LiveProcess};
pub use crate::process::Process;
pub use crate::ptrace::AttachError;
