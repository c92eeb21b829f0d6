//! A memory-only target.

use crate::target::{ByteOrder, HeldBytes, ProcessDescription, Target, TargetError, TypeId, TypeSizes};

/// Memory readable in a few regions, each byte a function of its address
/// ([`Mem::pattern`]); every other read fails as a whole. It knows no
/// symbol, function or type (every lookup answers "none"), is LP64 and
/// little-endian, and is process `pid` if that is set.
///
/// [`Mem::reads`] counts the reads asked; with [`Mem::holding`], the host
/// holds every region's bytes and [`Target::held_memory`] hands them out in
/// place, counted in [`Mem::held`].
#[derive(Debug)]
pub struct Mem {
    /// The readable ranges, `(start, end)` with `end` excluded.
    pub regions: Vec<(u64, u64)>,
    /// The byte at each readable address: [`Mem::low_byte`] unless set.
    pub pattern: fn(u64) -> u8,
    /// Reads asked of [`Target::read_memory`], failed ones included.
    pub reads: u64,
    /// The process id [`Target::describe`] gives.
    pub pid: Option<u32>,
    /// Blocks handed out in place by [`Target::held_memory`].
    pub held: u64,
    /// With [`Mem::holding`]: each region's start and bytes.
    image: Vec<(u64, std::sync::Arc<Vec<u8>>)>,
}

impl Mem {
    /// `len` bytes readable from `base`, each the low byte of its address;
    /// no process id.
    pub fn new(base: u64, len: u64) -> Mem {
        Mem::with_regions(&[(base, base.saturating_add(len))])
    }

    /// Memory readable in `regions` (`(start, end)`, `end` excluded), each
    /// byte the low byte of its address; no process id.
    pub fn with_regions(regions: &[(u64, u64)]) -> Mem {
        Mem {
            regions: regions.to_vec(),
            pattern: Mem::low_byte,
            reads: 0,
            pid: None,
            held: 0,
            image: Vec::new(),
        }
    }

    /// The same regions with each byte `pattern(address)`.
    pub fn with_pattern(mut self, pattern: fn(u64) -> u8) -> Mem {
        self.pattern = pattern;
        self
    }

    /// The same memory, held by the host: [`Target::held_memory`] answers
    /// every block inside one region (their bytes are made now).
    pub fn holding(mut self) -> Mem {
        self.image = self
            .regions
            .iter()
            .map(|&(s, e)| (s, std::sync::Arc::new((s..e).map(self.pattern).collect())))
            .collect();
        self
    }

    /// The low byte of `addr`: the default pattern (a byte read from the
    /// wrong address within 256 bytes shows).
    pub fn low_byte(addr: u64) -> u8 {
        addr as u8
    }

    /// A byte mixed from several bits of `addr`, so that bytes read from
    /// the wrong page or block show too.
    pub fn scrambled(addr: u64) -> u8 {
        (addr ^ (addr >> 13) ^ (addr >> 29)) as u8
    }

    /// The byte at `addr` (readable or not).
    pub fn byte(&self, addr: u64) -> u8 {
        (self.pattern)(addr)
    }

    /// Whether `len` bytes from `addr` lie in one region (a range that wraps
    /// around the end of the address space never does).
    pub fn readable(&self, addr: u64, len: u64) -> bool {
        let Some(end) = addr.checked_add(len) else {
            return false;
        };
        self.regions.iter().any(|&(s, e)| addr >= s && end <= e)
    }
}

impl Target for Mem {
    fn describe(&self) -> ProcessDescription {
        ProcessDescription {
            pid: self.pid,
            executable: String::new(),
        }
    }

    fn read_memory(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        self.reads += 1;
        let len = buf.len() as u64;
        if !self.readable(addr, len) {
            return Err(TargetError::Unreadable {
                addr,
                len,
                reason: "unmapped".into(),
            });
        }
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (self.pattern)(addr + i as u64);
        }
        Ok(())
    }

    fn held_memory(&mut self, addr: u64, len: usize) -> Option<HeldBytes> {
        let held = self.image.iter().find_map(|(start, image)| {
            let from = usize::try_from(addr.checked_sub(*start)?).ok()?;
            HeldBytes::new(image.clone(), from, len)
        })?;
        self.held += 1;
        Some(held)
    }

    fn find_symbol(&mut self, _: &str) -> Result<Option<u64>, TargetError> {
        Ok(None)
    }

    fn find_function(&mut self, _: &str) -> Result<Option<u64>, TargetError> {
        Ok(None)
    }

    fn find_type(&mut self, _: &str) -> Result<Option<TypeId>, TargetError> {
        Ok(None)
    }

    fn field_offset(&mut self, _: TypeId, _: &str) -> Result<Option<u64>, TargetError> {
        Ok(None)
    }

    fn size_of(&mut self, _: TypeId) -> Result<Option<u64>, TargetError> {
        Ok(None)
    }

    fn type_sizes(&mut self) -> Result<TypeSizes, TargetError> {
        Ok(TypeSizes::LP64)
    }

    fn byte_order(&mut self) -> ByteOrder {
        ByteOrder::Little
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_inside_a_region_and_fails_outside() {
        let mut m = Mem::with_regions(&[(0x1000, 0x1010), (u64::MAX - 15, u64::MAX)]);
        let mut b = [0u8; 4];
        m.read_memory(0x100c, &mut b).unwrap();
        assert_eq!(b, [0x0c, 0x0d, 0x0e, 0x0f]);
        assert!(m.read_memory(0x100d, &mut b).is_err(), "crosses the end");
        assert!(m.read_memory(u64::MAX - 2, &mut b).is_err(), "wraps");
        m.read_memory(u64::MAX - 4, &mut b).unwrap();
        assert_eq!(m.reads, 4);
        assert!(m.readable(0x1000, 16) && !m.readable(0x1000, 17));
    }

    #[test]
    fn patterns_and_held_bytes() {
        let mut m = Mem::new(0x2000, 0x100).with_pattern(Mem::scrambled).holding();
        let mut b = [0u8; 2];
        m.read_memory(0x2080, &mut b).unwrap();
        assert_eq!(b, [Mem::scrambled(0x2080), Mem::scrambled(0x2081)]);
        let held = m.held_memory(0x20f0, 16).expect("inside the region");
        assert_eq!(held.as_slice()[0], m.byte(0x20f0));
        assert!(m.held_memory(0x20f0, 17).is_none());
        assert_eq!((m.held, m.reads), (1, 1));
    }
}
