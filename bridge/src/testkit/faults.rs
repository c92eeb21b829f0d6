//! Fault injection in front of any target.

use super::rng::mix;
use crate::target::cache::PAGE;
use crate::target::{HeldBytes, Target, TargetError, TypeId};

/// What a [`Faulty`] target does to the target it wraps. The default does
/// nothing. Random decisions (which pages, which lookups) are drawn from
/// `salt`, once per page or per question, so asking again gets the same
/// answer and a case replays from its salt.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// Bytes written over what reads return: `(address, bytes)`.
    pub patches: Vec<(u64, Vec<u8>)>,
    /// Every read from this one on (1-based) fails (the process went away).
    pub fail_from: Option<u64>,
    /// Each 4 KiB page fails (always) with this probability, in 1/1000
    /// (unmapped memory): a read touching a failing page fails.
    pub page_fail_per_mille: u64,
    /// Each symbol, function, type, field or size lookup fails with this
    /// probability, in 1/1000 (the host could not answer).
    pub lookup_fail_per_mille: u64,
    /// The read with this number (1-based), and every later one, is
    /// interrupted (the user pressed Ctrl-C).
    pub interrupt_at: Option<u64>,
    /// Seed of the per-page and per-lookup decisions.
    pub salt: u64,
    /// Print each injected lookup failure, and each failed read smaller
    /// than a page the wrapped target refused, to standard error.
    pub log: bool,
}

/// What a [`Faulty`] target saw and did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Reads asked.
    pub reads: u64,
    /// Reads that failed (injected or not), interruptions excluded.
    pub failed_reads: u64,
    /// Failed reads smaller than a page ([`PAGE`]): the bridge's page cache
    /// reads blocks and pages first and falls back to the library's own
    /// small read, so only these (and the discovery's small reads) are
    /// failures the library or the discovery actually sees.
    pub seen_failures: u64,
    /// Lookups asked (symbols, functions, types, fields, sizes).
    pub lookups: u64,
    /// Lookups that failed by injection.
    pub failed_lookups: u64,
    /// A read was interrupted.
    pub interrupted: bool,
}

/// `inner` with [`Faults`] injected, counting in [`Tally`]. Type sizes, the
/// byte order, the process description and the world rank are passed
/// through untouched. [`Target::held_memory`] is never passed through: every
/// read goes through the injector.
#[derive(Debug)]
pub struct Faulty<T> {
    /// The target answering what is not injected.
    pub inner: T,
    /// What to inject.
    pub faults: Faults,
    /// What happened so far.
    pub tally: Tally,
}

impl<T: Target> Faulty<T> {
    /// `inner` with `faults`, nothing counted yet.
    pub fn new(inner: T, faults: Faults) -> Faulty<T> {
        Faulty {
            inner,
            faults,
            tally: Tally::default(),
        }
    }

    /// Whether the lookup `what` fails: decided from `what` and the salt,
    /// so asking again (a front end answers known questions before it
    /// starts the helper, and leaves a failed one to the helper) fails again.
    fn lookup(&mut self, what: &str) -> Result<(), TargetError> {
        self.tally.lookups += 1;
        let per_mille = self.faults.lookup_fail_per_mille;
        let key = what.bytes().fold(self.faults.salt, |h, b| mix(h ^ u64::from(b)));
        if per_mille > 0 && key % 1000 < per_mille {
            self.tally.failed_lookups += 1;
            if self.faults.log {
                eprintln!("faults: lookup {what} failed (injected)");
            }
            return Err(TargetError::Host(format!("injected failure of {what}")));
        }
        Ok(())
    }

    /// Whether a read of `len` bytes at `addr` touches a failing page.
    fn page_fails(&self, addr: u64, len: u64) -> bool {
        let per_mille = self.faults.page_fail_per_mille;
        // Wrapping, as the fuzz test's seeds were made: a range that wraps
        // around the address space is empty here and fails in `inner`.
        let last = addr.wrapping_add(len.max(1) - 1);
        per_mille > 0 && (addr / PAGE..=last / PAGE).any(|p| mix(self.faults.salt ^ p) % 1000 < per_mille)
    }
}

impl<T: Target> crate::target::wrap::Wrapper for Faulty<T> {
    fn inner(&self) -> &dyn Target {
        &self.inner
    }

    fn inner_mut(&mut self) -> &mut dyn Target {
        &mut self.inner
    }

    /// None: every read goes through [`Faulty::read_memory`]'s faults.
    fn held_memory(&mut self, _addr: u64, _len: usize) -> Option<HeldBytes> {
        None
    }

    /// None: no answers are kept between dumps of a faulty target.
    fn identity(&mut self) -> Option<String> {
        None
    }

    fn read_memory(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        self.tally.reads += 1;
        let n = self.tally.reads;
        if self.faults.interrupt_at.is_some_and(|i| n >= i) {
            self.tally.interrupted = true;
            return Err(TargetError::Interrupted);
        }
        let len = buf.len() as u64;
        let seen = u64::from(len < PAGE);
        if self.faults.fail_from.is_some_and(|f| n >= f) || self.page_fails(addr, len) {
            self.tally.failed_reads += 1;
            self.tally.seen_failures += seen;
            return Err(TargetError::Unreadable {
                addr,
                len,
                reason: "injected failure".into(),
            });
        }
        if let Err(e) = self.inner.read_memory(addr, buf) {
            if seen == 1 && self.faults.log {
                eprintln!("faults: read {addr:#x}+{len} failed: {e}");
            }
            self.tally.failed_reads += 1;
            self.tally.seen_failures += seen;
            return Err(e);
        }
        let end = addr.saturating_add(len);
        for (at, bytes) in &self.faults.patches {
            let patch_end = at.saturating_add(bytes.len() as u64);
            if *at < end && patch_end > addr {
                for (a, b) in (*at..patch_end).zip(bytes) {
                    if a >= addr && a < end {
                        buf[(a - addr) as usize] = *b;
                    }
                }
            }
        }
        Ok(())
    }

    fn find_symbol(&mut self, name: &str) -> Result<Option<u64>, TargetError> {
        self.lookup(name)?;
        self.inner.find_symbol(name)
    }

    fn find_function(&mut self, name: &str) -> Result<Option<u64>, TargetError> {
        self.lookup(name)?;
        self.inner.find_function(name)
    }

    fn find_type(&mut self, name: &str) -> Result<Option<TypeId>, TargetError> {
        self.lookup(name)?;
        self.inner.find_type(name)
    }

    fn field_offset(&mut self, ty: TypeId, field: &str) -> Result<Option<u64>, TargetError> {
        self.lookup(&format!("{}.{field}", ty.0))?;
        self.inner.field_offset(ty, field)
    }

    fn size_of(&mut self, ty: TypeId) -> Result<Option<u64>, TargetError> {
        self.lookup(&format!("sizeof {}", ty.0))?;
        self.inner.size_of(ty)
    }

    /// Fails like a lookup (the host could not answer).
    fn frame_value(&mut self, thread: u64, frame: u32, name: &str) -> Result<Option<u64>, TargetError> {
        self.lookup(&format!("{thread}/{frame}/{name}"))?;
        self.inner.frame_value(thread, frame, name)
    }
}

#[cfg(test)]
mod tests {
    use super::super::Mem;
    use super::*;

    #[test]
    fn patches_fail_from_and_interruption() {
        let faults = Faults {
            patches: vec![(0x1002, vec![0xaa, 0xbb]), (0x0fff, vec![0xcc, 0xdd])],
            fail_from: Some(4),
            interrupt_at: Some(5),
            ..Faults::default()
        };
        let mut t = Faulty::new(Mem::new(0x1000, 0x100), faults);
        let mut b = [0u8; 4];
        t.read_memory(0x1000, &mut b).unwrap();
        assert_eq!(b, [0xdd, 0x01, 0xaa, 0xbb]);
        t.read_memory(0x1003, &mut b).unwrap();
        assert_eq!(b, [0xbb, 0x04, 0x05, 0x06]);
        assert!(matches!(
            t.read_memory(0x2000, &mut b),
            Err(TargetError::Unreadable { .. })
        ));
        assert!(matches!(
            t.read_memory(0x1000, &mut b),
            Err(TargetError::Unreadable { .. })
        ));
        assert_eq!(t.read_memory(0x1000, &mut b), Err(TargetError::Interrupted));
        let tally = t.tally;
        assert_eq!((tally.reads, tally.failed_reads, tally.seen_failures), (5, 2, 2));
        assert!(tally.interrupted);
        assert_eq!(t.inner.reads, 3, "injected failures never reach the target");
    }

    #[test]
    fn page_and_lookup_failures_are_decided_once() {
        let faults = Faults {
            page_fail_per_mille: 500,
            lookup_fail_per_mille: 500,
            salt: 42,
            ..Faults::default()
        };
        let mut t = Faulty::new(Mem::new(0, 64 * PAGE), faults);
        let mut b = [0u8; 8];
        let first: Vec<bool> = (0..64).map(|p| t.read_memory(p * PAGE, &mut b).is_ok()).collect();
        let again: Vec<bool> = (0..64).map(|p| t.read_memory(p * PAGE, &mut b).is_ok()).collect();
        assert_eq!(first, again);
        assert!(first.contains(&true) && first.contains(&false), "{first:?}");
        let names: Vec<String> = (0..64).map(|i| format!("sym{i}")).collect();
        let found: Vec<bool> = names.iter().map(|n| t.find_symbol(n).is_ok()).collect();
        assert_eq!(
            found,
            names.iter().map(|n| t.find_symbol(n).is_ok()).collect::<Vec<_>>()
        );
        assert!(found.contains(&true) && found.contains(&false));
        assert_eq!(t.tally.lookups, 128);
        assert_eq!(
            t.tally.failed_lookups,
            2 * found.iter().filter(|ok| !**ok).count() as u64
        );
    }
}
