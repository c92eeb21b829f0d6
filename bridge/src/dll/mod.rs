//! Finding, checking and loading a message queue debug library ("the DLL"):
//! where the target says its library is (`discover`), whether a library the
//! target named may be loaded (`trust`), and loading one once per process
//! (`load`: the file's checks before `dlopen`; the interface's, after, are
//! [`crate::ffi::Library::open`]'s). Loaded libraries are kept for the life
//! of the process: their global state (the basic callback table) must
//! outlive every image and process set up through them.

pub mod discover;
mod load;
mod trust;

pub use crate::ffi::Library as Dll;
pub use load::load;
pub use trust::check_trusted;

/// Why a debug library was not used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub enum DllError {
    /// The file does not exist or cannot be read.
    #[error("debug library {path}: {reason}")]
    Unreadable {
        /// The path tried.
        path: String,
        /// What the OS said.
        reason: String,
    },
    /// Not an ELF shared object for this host.
    #[error("debug library {path} is not usable here: found {found}, expected {expected}")]
    WrongFormat {
        /// The path tried.
        path: String,
        /// What the file is.
        found: String,
        /// What mpiq needs.
        expected: String,
    },
    /// `dlopen` failed.
    #[error("cannot load debug library {path}: {reason}")]
    LoadFailed {
        /// The path tried.
        path: String,
        /// `dlerror()`.
        reason: String,
    },
    /// A required `mqs_*` entry point is missing.
    #[error("{path} is not an MPI message queue debug library: it does not export {symbol}")]
    MissingEntryPoint {
        /// The path tried.
        path: String,
        /// The missing symbol.
        symbol: String,
    },
    /// The target named a library mpiq does not trust to run in this process.
    #[error(
        "refusing to load the debug library {path} that the target names: {reason}. A target can name \
         any file, so mpiq only loads libraries owned by root or by you, writable only by their owner, \
         in a directory others cannot write. If you trust it, set MPIQ_TRUST_DLL=1 (or MPIQ_TRUST_DLL={path}), \
         or name it yourself with --dll {path}"
    )]
    Untrusted {
        /// The path named by the target.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The library speaks another version of the interface.
    #[error("debug library {path} is incompatible: {reason}")]
    Incompatible {
        /// The path tried.
        path: String,
        /// Found and expected.
        reason: String,
    },
}
