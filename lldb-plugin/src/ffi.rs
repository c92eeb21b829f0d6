//! The cxx bridge between the Rust half and the C++ half (`src/plugin.cc`).
//!
//! C++ owns every SB object; Rust sees two opaque handles: a [`Session`] (the
//! debugger a command runs in) and a [`TargetHost`] (one target and its
//! process, plus the table of types that `TypeId`s index).

pub use bridge::*;

#[cxx::bridge(namespace = "mpiq_lldb")]
mod bridge {
    /// What a command prints: its text on success, its error otherwise.
    struct CommandOutput {
        /// Whether the command succeeded.
        ok: bool,
        /// The output, or the error (without the `error: ` prefix).
        text: String,
    }

    extern "Rust" {
        /// `mpi queues ARGS...`
        fn run_queues(session: &Session, args: Vec<String>) -> CommandOutput;
        /// `mpi lookup ARGS...` (diagnostic)
        fn run_lookup(session: &Session, args: Vec<String>) -> CommandOutput;
        /// Long help of `mpi queues`.
        fn queues_help() -> String;
        /// Long help of `mpi lookup`.
        fn lookup_help() -> String;
        /// Syntax line of `mpi queues` (from the bridge's option table).
        fn queues_syntax() -> String;
        /// Syntax line of `mpi lookup` (from the bridge's lookup table).
        fn lookup_syntax() -> String;
    }

    unsafe extern "C++" {
        include!("mpiq-lldb/include/mpiq_lldb.h");

        /// `lldb::SBDebugger`, only ever behind a pointer.
        #[namespace = "lldb"]
        type SBDebugger;

        /// Registers the `mpi` commands; what `lldb::PluginInitialize` does.
        ///
        /// # Safety
        /// `debugger` points to a live `lldb::SBDebugger`.
        unsafe fn plugin_initialize(debugger: *const SBDebugger) -> bool;

        /// The debugger a command runs in.
        type Session;
        /// Number of targets (`target list`).
        fn num_targets(self: &Session) -> u32;
        /// Index of the selected target, -1 if there is none.
        fn selected_target(self: &Session) -> i64;
        /// The target at `index` (valid: `index < num_targets()`).
        fn open_target(self: &Session, index: u32) -> UniquePtr<TargetHost>;

        /// One target and its process.
        type TargetHost;
        /// Whether the target has a process (live or a core file).
        fn has_process(self: &TargetHost) -> bool;
        /// Whether the process is live and on this machine (its pid is
        /// this machine's), not a core file or a remote process.
        fn is_live_here(self: &TargetHost) -> bool;
        /// Whether the process is stopped, so its memory can be read.
        fn is_stopped(self: &TargetHost) -> bool;
        /// The process state as LLDB names it ("running", "stopped", ...).
        fn state_name(self: &TargetHost) -> String;
        /// Process id, 0 if unknown.
        fn pid(self: &TargetHost) -> u64;
        /// Path of the main executable.
        fn executable(self: &TargetHost) -> String;
        /// What the answers to name questions depend on: the debugger, the
        /// process, and every module (path, UUID, load address, symbol file).
        fn identity(self: &TargetHost) -> String;
        /// Whether the user pressed Ctrl-C during the current command.
        fn interrupted(self: &TargetHost) -> bool;
        /// Reads all of `buf` at `addr`, or fills `error` and returns false.
        fn read_memory(self: &TargetHost, addr: u64, buf: &mut [u8], error: &mut String) -> bool;
        /// Load address of a data symbol (any defined symbol), searching every module.
        fn find_symbol(self: &TargetHost, name: &str, addr: &mut u64) -> bool;
        /// Load address of a function, searching every module.
        fn find_function(self: &TargetHost, name: &str, addr: &mut u64) -> bool;
        /// Index of a type in the host's table, -1 if there is no such type.
        fn find_type(self: Pin<&mut TargetHost>, name: &str) -> i64;
        /// Name of a type of the table (with typedefs resolved), for diagnostics.
        fn type_name(self: &TargetHost, ty: u64) -> String;
        /// Offset of a field (anonymous members and base classes searched), -1 if none.
        fn field_offset(self: &TargetHost, ty: u64, field: &str) -> i64;
        /// Size of a type, -1 if it is incomplete.
        fn type_size(self: &TargetHost, ty: u64) -> i64;
        /// Size of a basic type: 0 short, 1 int, 2 long, 3 long long; 0 if unknown.
        fn basic_type_size(self: &TargetHost, which: u32) -> u32;
        /// Address size in bytes, 0 if unknown.
        fn address_byte_size(self: &TargetHost) -> u32;
        /// 0 little endian, 1 big endian, 2 unknown.
        fn byte_order(self: &TargetHost) -> u32;
        /// Threads of the process.
        fn num_threads(self: &TargetHost) -> u32;
        /// The thread's id (the kernel's tid on Linux).
        fn thread_id(self: &TargetHost, thread: u32) -> u64;
        /// The thread's name, empty if none.
        fn thread_name(self: &TargetHost, thread: u32) -> String;
        /// Frames of the thread, as LLDB unwinds them.
        fn num_frames(self: &TargetHost, thread: u32) -> u32;
        /// A frame's pc.
        fn frame_pc(self: &TargetHost, thread: u32, frame: u32) -> u64;
        /// A frame's pc as an address in its module's file (its link-time
        /// address: the same in every process whatever ASLR did), or
        /// `u64::MAX` when LLDB cannot place it.
        fn frame_file_address(self: &TargetHost, thread: u32, frame: u32) -> u64;
        /// A frame's function (display name), empty if unknown.
        fn frame_function(self: &TargetHost, thread: u32, frame: u32) -> String;
        /// The path of a frame's module, empty if unknown.
        fn frame_object(self: &TargetHost, thread: u32, frame: u32) -> String;
        /// A frame's source file, empty without line information.
        fn frame_file(self: &TargetHost, thread: u32, frame: u32) -> String;
        /// A frame's source line, 0 without line information.
        fn frame_line(self: &TargetHost, thread: u32, frame: u32) -> u32;
        /// Whether the frame is of a function inlined into the next.
        fn frame_inlined(self: &TargetHost, thread: u32, frame: u32) -> bool;
        /// The value of a variable or parameter of frame `frame` (inlined
        /// frames counted, as `frame_*` count them) of the thread whose id
        /// is `tid`: integers sign-extended, pointers as they are; false if
        /// there is no such thread, frame or name, or it is optimised out or
        /// not a number. A `$` name is a register of the frame as LLDB's
        /// unwinder recovered it (`$sp`, `$pc`, `$rbx`, …), false where it
        /// did not.
        fn frame_value(self: &TargetHost, tid: u64, frame: u32, name: &str, value: &mut u64) -> bool;
    }
}

use crate::{lookup_help, lookup_syntax, queues_help, queues_syntax, run_lookup, run_queues};
