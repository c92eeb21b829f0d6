//! One dump through a loaded debug library, in the process that runs it:
//! set up its image and process, iterate communicators and their three
//! queues (`run`), within the dump's limits (`limits`), and turn what it
//! returns into the snapshot model (`convert`). Where this runs (here, or in
//! the helper) is the layer above's choice (`isolate`, `collect`).

mod convert;
mod limits;
pub mod readahead;
mod run;

pub(crate) use convert::convert_operations;
pub use convert::{ConvertError, RawOperations};
pub use limits::{limit, Limits, MAX_COMMUNICATORS, MAX_OPERATIONS};
pub use run::{run_dll, run_dll_raw};

use crate::dll::DllError;

/// Why one library could not be used.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Attempt {
    /// Not loaded: the reason (the next candidate is tried).
    Refused(DllError),
    /// The user interrupted the dump.
    Interrupted,
}
