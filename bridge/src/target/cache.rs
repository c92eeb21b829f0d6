//! The per-snapshot page cache between the debug library and the host.
//!
//! Debug libraries read target memory a few bytes at a time (Open MPI makes
//! about 18,000 `mqs_fetch_data` calls for 1,000 pending receives). The cache
//! asks the host once per *block* of pages and answers the rest from memory,
//! so host requests grow with the memory touched, not with the library's
//! calls. It lives for one dump: the process may run between dumps.
//!
//! A block is `DEFAULT_BLOCK` bytes (256 KiB, 64 pages), aligned: every
//! host (gdb, lldb, `process_vm_readv`, the helper's socket) reads 256 KiB in
//! one call for little more than the cost of 4 KiB, and the libraries' data
//! (request free lists, communicator arrays) is dense. A block the host
//! cannot read as a whole (the end of a mapping, a core file's hole) is read
//! by quarters (64 KiB, 16 KiB, then pages), and a page it cannot read as a
//! whole is read exactly as asked. `MPIQ_CACHE_BLOCK_KIB` (4 to 1024, a
//! power of two) changes the block size for experiments
//! (docs/PERFORMANCE.md).

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::OnceLock;

use crate::target::{HeldBytes, Target, TargetError};

/// Size of a cached page.
pub const PAGE: u64 = 4096;
/// Size of the block the cache asks the host for at once.
pub const DEFAULT_BLOCK: u64 = 256 * 1024;

/// The block size in force: [`DEFAULT_BLOCK`] or `MPIQ_CACHE_BLOCK_KIB`.
pub fn block_size() -> u64 {
    static BLOCK: OnceLock<u64> = OnceLock::new();
    *BLOCK.get_or_init(|| {
        std::env::var("MPIQ_CACHE_BLOCK_KIB")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(|k| k * 1024)
            .filter(|b| b.is_power_of_two() && (PAGE..=1024 * 1024).contains(b))
            .unwrap_or(DEFAULT_BLOCK)
    })
}

/// A page: where its bytes are (chunk, offset), or unreadable as a whole.
#[derive(Clone, Copy)]
enum Page {
    Data(u32, u32),
    /// The whole page is not readable; smaller reads inside it go straight
    /// to the host (the readable part may end inside the page).
    Unreadable,
}

/// Hashes page addresses (multiples of [`PAGE`]) with one multiplication:
/// the library's reads are hot enough for SipHash to show in profiles.
#[derive(Default)]
struct PageHasher(u64);

impl Hasher for PageHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (n >> 12).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

type Fast = BuildHasherDefault<PageHasher>;

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

/// The bytes of one host read: copied here, or held by the host.
enum Chunk {
    Owned(Box<[u8]>),
    Held(HeldBytes),
}

impl Chunk {
    fn bytes(&self) -> &[u8] {
        match self {
            Chunk::Owned(b) => b,
            Chunk::Held(h) => h.as_slice(),
        }
    }
}

/// Target memory, cached by page, fetched by block.
pub struct PageCache {
    /// Page address -> page.
    pages: HashMap<u64, Page, Fast>,
    /// The bytes read: one chunk per host read that succeeded.
    chunks: Vec<Chunk>,
    /// Blocks the host could not read whole (address | log2 of the size):
    /// their parts are read separately.
    split: HashSet<u64, Fast>,
    /// The page the last read ended in, and where its bytes are: the
    /// library reads a structure's fields one after another.
    last: Option<(u64, u32, u32)>,
    block: u64,
    /// Counters.
    pub stats: CacheStats,
}

impl Default for PageCache {
    fn default() -> Self {
        PageCache::with_block(block_size())
    }
}

impl PageCache {
    /// A cache that asks the host for `block` bytes at once (a power of two,
    /// at least [`PAGE`]).
    pub fn with_block(block: u64) -> Self {
        PageCache {
            pages: HashMap::default(),
            chunks: Vec::new(),
            split: HashSet::default(),
            last: None,
            block: block.max(PAGE).next_power_of_two(),
            stats: CacheStats::default(),
        }
    }

    /// Fills `buf` from `addr`, asking `target` only for blocks not seen yet.
    pub fn read(&mut self, target: &mut dyn Target, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        self.stats.requests += 1;
        let len = buf.len() as u64;
        if len == 0 {
            return Ok(());
        }
        // The common case: inside the page the last read was in.
        if let Some((base, chunk, at)) = self.last {
            let off = addr.wrapping_sub(base);
            if off < PAGE && off + len <= PAGE {
                let from = (at as u64 + off) as usize;
                buf.copy_from_slice(&self.chunks[chunk as usize].bytes()[from..from + buf.len()]);
                return Ok(());
            }
        }
        let end = addr.checked_add(len).ok_or_else(|| TargetError::Unreadable {
            addr,
            len,
            reason: "the range wraps around the address space".into(),
        })?;
        let mut cur = addr;
        while cur < end {
            let base = cur & !(PAGE - 1);
            // The last page of the address space ends at 2^64: `base + PAGE`
            // would wrap to 0 (the fuzz test found it).
            let in_page = (end.min(base.saturating_add(PAGE)) - cur) as usize;
            let out_off = (cur - addr) as usize;
            let out = &mut buf[out_off..out_off + in_page];
            let page = match self.pages.get(&base) {
                Some(&p) => p,
                None => self.fetch(target, base)?,
            };
            match page {
                Page::Data(chunk, at) => {
                    let from = (at as u64 + cur - base) as usize;
                    out.copy_from_slice(&self.chunks[chunk as usize].bytes()[from..from + in_page]);
                    self.last = Some((base, chunk, at));
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

    /// Brings the page at `base` in: its whole block in one host read; if
    /// the host cannot read that block whole, the quarter of it holding the
    /// page, and so on down to the page alone.
    fn fetch(&mut self, target: &mut dyn Target, base: u64) -> Result<Page, TargetError> {
        let mut size = self.block;
        while size > PAGE {
            let at = base & !(size - 1);
            // Bases are page-aligned: the low bits say which size failed.
            let key = at | u64::from(size.trailing_zeros());
            if !self.split.contains(&key) {
                match self.host_read(target, at, size)? {
                    Some(chunk) => {
                        for i in 0..size / PAGE {
                            let page = Page::Data(chunk, (i * PAGE) as u32);
                            self.pages.insert(at + i * PAGE, page);
                        }
                        return Ok(self.pages[&base]);
                    }
                    None => {
                        self.split.insert(key);
                    }
                }
            }
            size = (size / 4).max(PAGE);
        }
        let page = match self.host_read(target, base, PAGE)? {
            Some(chunk) => Page::Data(chunk, 0),
            None => Page::Unreadable,
        };
        self.pages.insert(base, page);
        Ok(page)
    }

    /// One host read of `len` bytes into a new chunk; `None` if it failed
    /// (only an interruption is an error).
    fn host_read(&mut self, target: &mut dyn Target, addr: u64, len: u64) -> Result<Option<u32>, TargetError> {
        self.stats.host_reads += 1;
        self.stats.host_bytes += len;
        if let Some(held) = target.held_memory(addr, len as usize) {
            if held.as_slice().len() == len as usize {
                self.chunks.push(Chunk::Held(held));
                return Ok(Some((self.chunks.len() - 1) as u32));
            }
        }
        let mut data = vec![0u8; len as usize].into_boxed_slice();
        match target.read_memory(addr, &mut data) {
            Ok(()) => {
                self.chunks.push(Chunk::Owned(data));
                Ok(Some((self.chunks.len() - 1) as u32))
            }
            Err(TargetError::Interrupted) => Err(TargetError::Interrupted),
            Err(_) => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::*;
    use crate::testkit::Mem;

    #[test]
    fn one_host_read_per_page() {
        let mut mem = Mem::new(0x10000, 0x4000);
        let mut cache = PageCache::with_block(PAGE);
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
        let mut mem = Mem::new(0x10000, 0x800);
        let mut cache = PageCache::with_block(DEFAULT_BLOCK);
        let mut b = [0u8; 4];
        cache.read(&mut mem, 0x10100, &mut b).unwrap();
        assert_eq!(b, [0, 1, 2, 3]);
        let e = cache.read(&mut mem, 0x10ffc, &mut b).unwrap_err();
        assert!(matches!(e, TargetError::Unreadable { addr: 0x10ffc, .. }), "{e}");
        let e = cache.read(&mut mem, u64::MAX - 1, &mut b).unwrap_err();
        assert!(e.to_string().contains("wraps"), "{e}");
    }

    /// Blocks the host holds are taken in place: the same bytes, no copy
    /// asked, still counted as host reads.
    #[test]
    fn blocks_the_host_holds_are_used_in_place() {
        let mut mem = Mem::new(0x100000, 0x40000).holding();
        let mut cache = PageCache::with_block(0x10000);
        for addr in (0x100000..0x140000u64).step_by(0x1ff8) {
            let mut b = [0u8; 8];
            cache.read(&mut mem, addr, &mut b).unwrap();
            assert_eq!(
                b,
                core::array::from_fn::<u8, 8, _>(|j| (addr + j as u64) as u8),
                "{addr:#x}"
            );
        }
        assert_eq!((mem.held, mem.reads), (4, 0));
        assert_eq!(cache.stats.host_reads, 4);
        // Outside what the host holds: asked as before.
        let mut b = [0u8; 4];
        assert!(cache.read(&mut mem, 0x140000, &mut b).is_err());
        assert_eq!(mem.reads, 4, "the block, its quarter, its page, then the 4 bytes");
    }

    #[test]
    fn one_host_read_per_block() {
        let mut mem = Mem::new(0x100000, 0x40000);
        let mut cache = PageCache::with_block(0x10000);
        // Forwards and backwards, across every page boundary.
        for i in (0..0x8000u64).chain((0..0x8000u64).rev()) {
            let addr = 0x100000 + i * 8 - (i & 1) * 4;
            let mut b = [0u8; 8];
            cache.read(&mut mem, addr, &mut b).unwrap();
            assert_eq!(
                b,
                core::array::from_fn::<u8, 8, _>(|j| (addr + j as u64) as u8),
                "{addr:#x}"
            );
        }
        assert_eq!(mem.reads, 4, "256 KiB are four 64 KiB blocks");
        assert_eq!(cache.stats.host_reads, 4);
        assert_eq!(cache.stats.host_bytes, 0x40000);
        // The last page read is not mistaken for another one.
        let mut b = [0u8; 4];
        cache.read(&mut mem, 0x100ffe, &mut b).unwrap();
        assert_eq!(b, [0xfe, 0xff, 0x00, 0x01]);
        assert!(cache.read(&mut mem, 0x140000, &mut b).is_err());
    }

    #[test]
    fn a_block_not_readable_whole_is_read_by_quarters_then_pages() {
        // Three readable pages at the start of a 64 KiB block.
        let mut mem = Mem::new(0x10000, 0x3000);
        let mut cache = PageCache::with_block(0x10000);
        for addr in (0x10000..0x13000u64).step_by(16) {
            let mut b = [0u8; 16];
            cache.read(&mut mem, addr, &mut b).unwrap();
            assert_eq!(b[3], (addr + 3) as u8);
        }
        assert_eq!(
            mem.reads,
            1 + 1 + 3,
            "the block, its first 16 KiB, then one read per page"
        );
        let e = cache.read(&mut mem, 0x13000, &mut [0u8; 8]).unwrap_err();
        assert!(matches!(e, TargetError::Unreadable { addr: 0x13000, .. }), "{e}");
        assert_eq!(mem.reads, 5 + 2, "the page, then the exact read");
        // 192 KiB readable in a 256 KiB block: three 64 KiB quarters.
        let mut mem = Mem::new(0x40000, 0x30000);
        let mut cache = PageCache::with_block(0x40000);
        for addr in (0x40000..0x70000u64).step_by(64) {
            cache.read(&mut mem, addr, &mut [0u8; 8]).unwrap();
        }
        assert_eq!(mem.reads, 1 + 3);
        assert_eq!(cache.stats.host_bytes, 0x40000 + 0x30000);
    }
}
