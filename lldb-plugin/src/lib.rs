//! mpiq's LLDB plugin: the `mpi queues` command.
//!
//! ```text
//! (lldb) plugin load target/release/libmpiq_lldb.so
//! (lldb) mpi queues --all
//! ```
//!
//! The C++ half (`src/plugin.cc`) registers the commands and wraps the SB
//! API; this crate does everything else: it parses the arguments, picks the
//! targets, adapts each one to [`mpiq::Target`] and calls [`mpiq::dump`].
#![deny(unsafe_op_in_unsafe_fn, improper_ctypes, improper_ctypes_definitions)]
#![deny(clippy::undocumented_unsafe_blocks)]

/// The `mpi queues` and `mpi lookup` commands, as Rust functions C++ calls.
mod command;
/// The cxx bridge to the C++ half.
mod ffi;
/// `mpi lookup`: what the Target adapter answers, for diagnostics.
mod lookup;
/// [`mpiq::Target`] over one LLDB target.
mod target;

use std::ffi::c_void;

/// `bool lldb::PluginInitialize(lldb::SBDebugger)`, the function `plugin
/// load` looks up by its mangled name.
///
/// A Rust cdylib exports only Rust symbols, so the C++ function cannot be
/// exported from `plugin.cc`; this one carries the C++ mangled name instead.
/// `SBDebugger` has a non-trivial copy constructor and destructor, so the
/// Itanium C++ ABI passes it "by value" as a pointer to a temporary the
/// caller owns: the argument is that pointer.
///
/// # Safety
/// `debugger` points to a live `lldb::SBDebugger` for the duration of the
/// call, as LLDB guarantees.
#[export_name = "_ZN4lldb16PluginInitializeENS_10SBDebuggerE"]
pub unsafe extern "C" fn plugin_initialize(debugger: *const c_void) -> bool {
    // SAFETY: LLDB passes a pointer to its SBDebugger temporary (see above);
    // the C++ side only copies it.
    unsafe { ffi::plugin_initialize(debugger.cast::<ffi::SBDebugger>()) }
}
