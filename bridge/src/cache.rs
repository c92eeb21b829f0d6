//! The per-snapshot page cache between the debug library and the host.
//!
//! Debug libraries read target memory a few bytes at a time (Open MPI makes
//! about 18,000 `mqs_fetch_data` calls for 1,000 pending receives). The cache
//! asks the host once per page and answers the rest from memory. It lives for
//! one dump: the process may run between dumps.

use std::collections::HashMap;

use crate::target::{Target, TargetError};

/// Size of a cached page.
pub const PAGE: u64 = 4096;

/// A page: its bytes, or the error reading it as a whole gave.
enum Page {
    Data(Box<[u8]>),
    /// The whole page is not readable; smaller reads inside it go straight
    /// to the host (the readable part may end inside the page).
    Unreadable,
}

/// Counters of host traffic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Reads the library asked for.
    pub requests: u64,
    /// Reads sent to the host.
    pub host_reads: u64,
    /// Bytes sent to the host.
    pub host_bytes: u64,
}

/// Target memory, cached by page.
#[derive(Default)]
pub struct PageCache {
    pages: HashMap<u64, Page>,
    /// Counters.
    pub stats: CacheStats,
}

impl PageCache {
    /// Fills `buf` from `addr`, asking `target` only for pages not seen yet.
    pub fn read(&mut self, target: &mut dyn Target, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        self.stats.requests += 1;
        let len = buf.len() as u64;
        if len == 0 {
            return Ok(());
        }
        let end = addr.checked_add(len).ok_or_else(|| TargetError::Unreadable {
            addr,
            len,
            reason: "the range wraps around the address space".into(),
        })?;
        let mut cur = addr;
        while cur < end {
            let base = cur & !(PAGE - 1);
            let in_page = (end.min(base + PAGE) - cur) as usize;
            let out_off = (cur - addr) as usize;
            let out = &mut buf[out_off..out_off + in_page];
            if !self.pages.contains_key(&base) {
                let mut data = vec![0u8; PAGE as usize].into_boxed_slice();
                self.stats.host_reads += 1;
                self.stats.host_bytes += PAGE;
                let page = match target.read_memory(base, &mut data) {
                    Ok(()) => Page::Data(data),
                    Err(TargetError::Interrupted) => return Err(TargetError::Interrupted),
                    Err(_) => Page::Unreadable,
                };
                self.pages.insert(base, page);
            }
            match &self.pages[&base] {
                Page::Data(data) => {
                    let off = (cur - base) as usize;
                    out.copy_from_slice(&data[off..off + in_page]);
                }
                Page::Unreadable => {
                    self.stats.host_reads += 1;
                    self.stats.host_bytes += in_page as u64;
                    target.read_memory(cur, out)?;
                }
            }
            cur += in_page as u64;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::*;

    /// Memory from `base`, `len` bytes readable, each byte its address's low byte.
    struct Mem {
        base: u64,
        len: u64,
        reads: u64,
    }

    impl Target for Mem {
        fn describe(&self) -> ProcessDescription {
            ProcessDescription::default()
        }
        fn read_memory(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
            self.reads += 1;
            if addr < self.base || addr + buf.len() as u64 > self.base + self.len {
                return Err(TargetError::Unreadable {
                    addr,
                    len: buf.len() as u64,
                    reason: "unmapped".into(),
                });
            }
            for (i, b) in buf.iter_mut().enumerate() {
                *b = (addr + i as u64) as u8;
            }
            Ok(())
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

    #[test]
    fn one_host_read_per_page() {
        let mut mem = Mem {
            base: 0x10000,
            len: 0x4000,
            reads: 0,
        };
        let mut cache = PageCache::default();
        for i in 0..1000u64 {
            let mut b = [0u8; 8];
            cache.read(&mut mem, 0x10000 + i * 8, &mut b).unwrap();
            assert_eq!(b[0], (i * 8) as u8);
        }
        assert_eq!(mem.reads, 2, "8000 bytes span two pages");
        assert_eq!(cache.stats.requests, 1000);
        // A read across a page boundary is stitched from two pages.
        let mut b = [0u8; 16];
        cache.read(&mut mem, 0x10ff8, &mut b).unwrap();
        assert_eq!(b, core::array::from_fn::<u8, 16, _>(|i| (0xf8 + i as u64) as u8));
    }

    #[test]
    fn partially_readable_page_and_unreadable_memory() {
        // Readable memory ends in the middle of a page.
        let mut mem = Mem {
            base: 0x10000,
            len: 0x800,
            reads: 0,
        };
        let mut cache = PageCache::default();
        let mut b = [0u8; 4];
        cache.read(&mut mem, 0x10100, &mut b).unwrap();
        assert_eq!(b, [0, 1, 2, 3]);
        let e = cache.read(&mut mem, 0x10ffc, &mut b).unwrap_err();
        assert!(matches!(e, TargetError::Unreadable { addr: 0x10ffc, .. }), "{e}");
        let e = cache.read(&mut mem, u64::MAX - 1, &mut b).unwrap_err();
        assert!(e.to_string().contains("wraps"), "{e}");
    }
}
