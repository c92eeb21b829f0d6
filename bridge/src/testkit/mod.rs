//! Test-only building blocks, in one place for every test that drives the
//! bridge without a debugger: the bridge's own unit tests, its integration
//! tests (`bridge/tests/`) and the `mpiq-tests` crate (`tests/tests/fuzz.rs`).
//!
//! * [`Mem`]: a memory-only [`Target`](crate::Target) — readable regions
//!   whose bytes follow a pattern of their address, no symbols, no types —
//!   that counts the reads it answers and can hand its bytes out in place
//!   ([`Target::held_memory`](crate::Target::held_memory));
//! * [`Faulty`]: wraps any target and injects [`Faults`] — memory patched
//!   over, every read failing from the N-th on, pages or lookups failing at
//!   random (decided by a salt, so a case replays), an interruption — and
//!   keeps a [`Tally`] of what it did;
//! * [`Lookups`]: a target that answers questions by name and counts them;
//! * [`Rng`]: a small deterministic pseudo-random generator (SplitMix64), so
//!   that a failing case is replayed from its seed.
//!
//! Not part of the bridge's API: compiled only for the bridge's unit tests
//! (`cfg(test)`) and with the non-default cargo feature `testkit`, which
//! test crates enable in their dev-dependency on the bridge:
//!
//! ```toml
//! [dev-dependencies]
//! mpiq-bridge = { workspace = true, features = ["testkit"] }
//! ```
//!
//! ```
//! use mpiq::testkit::{Faults, Faulty, Mem};
//! use mpiq::Target;
//!
//! // 64 KiB readable at 0x10000, every byte the low byte of its address;
//! // the third read and every later one fail.
//! let faults = Faults { fail_from: Some(3), ..Faults::default() };
//! let mut target = Faulty::new(Mem::new(0x10000, 0x10000), faults);
//! let mut buf = [0u8; 4];
//! target.read_memory(0x10010, &mut buf).unwrap();
//! assert_eq!(buf, [0x10, 0x11, 0x12, 0x13]);
//! assert!(target.read_memory(0x8000, &mut buf).is_err()); // not mapped
//! assert!(target.read_memory(0x10010, &mut buf).is_err()); // injected
//! assert_eq!((target.tally.reads, target.tally.failed_reads), (3, 2));
//! ```

mod faults;
mod lookups;
mod mem;
mod rng;

pub use faults::{Faults, Faulty, Tally};
pub use lookups::Lookups;
pub use mem::Mem;
pub use rng::{mix, Rng};
