//! The interrupt flag: raised once a terminating signal arrived
//! ([`crate::signals`] raises it), read by whatever reads a target (memory,
//! core files, the unwinder) so that a Ctrl-C ends a dump soon.

use std::sync::atomic::{AtomicBool, Ordering};

/// Set once a terminating signal arrived.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Raises the flag; it stays raised for the rest of the run.
pub fn raise() {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Whether a terminating signal arrived.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}
