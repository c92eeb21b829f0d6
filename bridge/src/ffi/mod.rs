//! The mqs ABI (`abi`), the per-dump state behind the opaque handles
//! (`session`) and the `extern "C"` callbacks the library calls (`trampolines`).
//! This is the only place in mpiq with raw pointers into a debug library.

pub mod abi;
pub(crate) mod session;
pub(crate) mod trampolines;
