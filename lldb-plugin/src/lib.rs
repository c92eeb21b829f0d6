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

/// `mpi queues`: arguments, targets, the dump.
mod command;
/// The cxx bridge to the C++ half.
mod ffi;
/// `mpi lookup`: what the Target adapter answers, for diagnostics.
mod lookup;
/// [`mpiq::Target`] over one LLDB target.
mod target;

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};

use ffi::{CommandOutput, Session};

// The functions C++ calls (the bridge's `extern "Rust"`). Nothing here may
// unwind into C++ (LLDB is built without exceptions): each runs its
// command in `guarded`, which turns any failure or panic into a
// `CommandOutput` error.

/// `mpi queues ARGS...`
pub fn run_queues(session: &Session, args: Vec<String>) -> CommandOutput {
    guarded(|| command::queues(session, &args))
}

/// Long help of `mpi queues`.
pub fn queues_help() -> String {
    command::queues_help()
}

/// The syntax line of `mpi queues`.
pub fn queues_syntax() -> String {
    command::queues_syntax()
}

/// `mpi lookup ARGS...`
pub fn run_lookup(session: &Session, args: Vec<String>) -> CommandOutput {
    guarded(|| lookup::lookup(session, &args))
}

/// Long help of `mpi lookup`.
pub fn lookup_help() -> String {
    lookup::help()
}

/// The syntax line of `mpi lookup`.
pub fn lookup_syntax() -> String {
    lookup::syntax()
}

/// Runs a command body, turning an error or a panic into a failed output.
fn guarded(body: impl FnOnce() -> Result<String, String>) -> CommandOutput {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(text)) => CommandOutput { ok: true, text },
        Ok(Err(text)) => CommandOutput { ok: false, text },
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            CommandOutput {
                ok: false,
                text: format!("mpiq: internal error: {what}"),
            }
        }
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panics_become_errors() {
        let out = guarded(|| panic!("boom"));
        assert!(!out.ok);
        assert!(out.text.contains("boom"));
    }
}
