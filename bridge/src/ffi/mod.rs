//! The mqs ABI (`abi`), the per-dump state behind the opaque handles
//! (`session`), the `extern "C"` callbacks the library calls
//! (`trampolines`) and the library itself with its entry points made safe
//! (`library`). This is the only place in mpiq with raw pointers into a
//! debug library.

pub mod abi;
pub mod library;
pub mod session;
pub(crate) mod trampolines;

pub use library::{Library, OpenError, Running};
pub use session::{CallbackLimits, Session};
