//! Running the debug library in a helper process, `mpiq-dllhost`.
//!
//! The front end keeps the target; the helper loads the library and asks
//! the front end for every answer over a socket, one JSON line per message;
//! the bytes of a memory read go through a shared memory region
//! (`isolate/sys.rs`), or follow their answer's line raw when there is
//! none. The result comes back as JSON without its operations; those come
//! as the library's own records (`dump::RawOperations`), in the
//! shared region (or after the line), and the front end converts them: JSON
//! for ten thousand operations cost 10 ms to write and read, the records
//! one copy. The helper has its own page cache,
//! so a dump costs one round trip per cache block (256 KiB), not per
//! `mqs_fetch_data`, and the lookups the library asked in this process's
//! earlier dumps are answered before it starts (`isolate/known.rs`), with no round
//! trip at all. If the library crashes, aborts or stops
//! answering, the helper dies or is killed and the front end reports it;
//! the debugger carries on.

//!
//! Modules: `protocol` (the messages), `transport` (lines with deadlines
//! over the socket), `helper` (finding, starting and keeping the helper),
//! `client` (the front end's side of a dump), `host` (the helper's side),
//! `known` (answers and blocks sent ahead), `names` (the helper's name and
//! signal names, for messages), `sys` (every libc call: the
//! shared region, descriptor passing, polling, process set-up).

mod client;
mod error;
mod helper;
mod host;
mod known;
mod names;
mod protocol;
mod sys;
mod transport;

pub use client::{run, DEFAULT_TIMEOUT};
pub use error::{Ending, IsolateError, ProtocolError, RegionError};
pub use helper::dllhost_path;
pub use host::host_main;
pub use names::DLLHOST;
