//! Read-ahead: the blocks of memory a library read in the previous dump of
//! the same process, remembered by address per library and process, and
//! read again, fresh, before the next dump starts. Only addresses are
//! remembered, never bytes. Both places a library runs use it: the helper
//! (`isolate/known.rs`: into the shared region, which saves a round trip per
//! block) and this process (`--in-process`: [`ReadAhead`], whose blocks the
//! page cache takes in place).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use crate::target::{HeldBytes, Target, TargetError};

/// Most bytes read ahead for one dump.
pub const MAX_READ_AHEAD: u64 = 32 << 20;

/// Which process a dump read: pid (none for a core file) and executable.
pub type ProcessKey = (Option<u32>, String);

/// The blocks (address, length) the last dump with a library read, per
/// library and process, in order.
type ReadBlocks = HashMap<(PathBuf, ProcessKey), Vec<(u64, u64)>>;

fn read_blocks() -> &'static Mutex<ReadBlocks> {
    static READS: OnceLock<Mutex<ReadBlocks>> = OnceLock::new();
    READS.get_or_init(Default::default)
}

/// The key of `target`'s process.
pub fn process_key(target: &dyn Target) -> ProcessKey {
    let d = target.describe();
    (d.pid, d.executable)
}

/// The blocks the last dump of this process with the library `dll` read.
pub fn remembered(dll: &Path, process: &ProcessKey) -> Vec<(u64, u64)> {
    read_blocks()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&(dll.to_path_buf(), process.clone()))
        .cloned()
        .unwrap_or_default()
}

/// Remembers the blocks a dump read, for the next one.
pub fn remember(dll: &Path, process: ProcessKey, blocks: Vec<(u64, u64)>) {
    read_blocks()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert((dll.to_path_buf(), process), blocks);
}

/// Where blocks read ahead go: the helper's shared region, or a buffer of
/// this process.
pub trait Room {
    /// The buffer for `len` bytes at offset `at`, or `None` when they do not
    /// fit.
    fn room(&mut self, at: usize, len: usize) -> Option<&mut [u8]>;
}

impl Room for Vec<u8> {
    fn room(&mut self, at: usize, len: usize) -> Option<&mut [u8]> {
        let end = at.checked_add(len)?;
        self.resize(end, 0);
        Some(&mut self[at..end])
    }
}

/// Reads `blocks` from `target` into `into`, one after the other from its
/// start, up to [`MAX_READ_AHEAD`] bytes or the room there is; a block the
/// target cannot read now is left out (asked again if the library needs
/// it). Returns the blocks read as (address, length, offset), and whether
/// an interruption stopped the reading.
pub fn read_ahead(
    target: &mut dyn Target,
    blocks: &[(u64, u64)],
    into: &mut dyn Room,
) -> (Vec<(u64, u64, usize)>, bool) {
    let mut read = Vec::new();
    let mut at = 0usize;
    for &(addr, len) in blocks {
        let Ok(n) = usize::try_from(len) else { break };
        if (at as u64).saturating_add(len) > MAX_READ_AHEAD {
            break;
        }
        let Some(buf) = into.room(at, n) else { break };
        match target.read_memory(addr, buf) {
            Ok(()) => {
                read.push((addr, len, at));
                at += n;
            }
            Err(TargetError::Interrupted) => return (read, true),
            Err(_) => {}
        }
    }
    (read, false)
}

/// A target whose remembered blocks were read ahead into this process's
/// memory and are lent to the page cache ([`Target::held_memory`]); it
/// notes the blocks this dump reads, for the next.
pub struct ReadAhead<'t> {
    host: &'t mut dyn Target,
    bytes: Arc<Vec<u8>>,
    /// (address, length) -> offset in `bytes`.
    at: HashMap<(u64, u64), usize>,
    /// Blocks read this dump, in order.
    read: Vec<(u64, u64)>,
}

impl<'t> ReadAhead<'t> {
    /// Reads `blocks` from `host` now, up to [`MAX_READ_AHEAD`] bytes; a
    /// block it cannot read now is left out (asked again if the library
    /// needs it). Only an interruption stops the reading ahead.
    pub fn new(host: &'t mut dyn Target, blocks: &[(u64, u64)]) -> Self {
        let mut bytes = Vec::new();
        let (read, _) = read_ahead(host, blocks, &mut bytes);
        bytes.truncate(read.last().map_or(0, |&(_, len, at)| at + len as usize));
        ReadAhead {
            host,
            bytes: Arc::new(bytes),
            at: read.into_iter().map(|(addr, len, at)| ((addr, len), at)).collect(),
            read: Vec::new(),
        }
    }

    /// The blocks this dump read (ahead and taken, or asked), in order.
    pub fn blocks_read(self) -> Vec<(u64, u64)> {
        self.read
    }
}

impl crate::target::wrap::Wrapper for ReadAhead<'_> {
    fn inner(&self) -> &dyn Target {
        &*self.host
    }
    fn inner_mut(&mut self) -> &mut dyn Target {
        &mut *self.host
    }
    fn read_memory(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        self.host.read_memory(addr, buf)?;
        self.read.push((addr, buf.len() as u64));
        Ok(())
    }
    fn held_memory(&mut self, addr: u64, len: usize) -> Option<HeldBytes> {
        let block = (addr, len as u64);
        let Some(&start) = self.at.get(&block) else {
            return self.host.held_memory(addr, len);
        };
        let held = HeldBytes::new(self.bytes.clone(), start, len)?;
        self.read.push(block);
        Some(held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::cache::PageCache;
    use crate::testkit::Mem;

    /// The blocks one dump read are read ahead for the next dump of that
    /// process, lent to the page cache in place of a host read; one that
    /// cannot be read now is asked as before.
    #[test]
    fn blocks_of_one_dump_are_lent_to_the_next() {
        let dll = Path::new("/test/readahead/lib.so");
        let mut mem = Mem::new(0x40000, 0x80000);
        mem.pid = Some(7);
        let key = process_key(&mem);
        assert!(remembered(dll, &key).is_empty());
        let mut first = ReadAhead::new(&mut mem, &[]);
        let mut cache = PageCache::with_block(0x10000);
        let mut b = [0u8; 4];
        cache.read(&mut first, 0x41000, &mut b).unwrap();
        cache.read(&mut first, 0x52000, &mut b).unwrap();
        drop(cache);
        let blocks = first.blocks_read();
        assert_eq!(blocks, [(0x40000, 0x10000), (0x50000, 0x10000)]);
        remember(dll, key.clone(), [blocks, vec![(0xdead0000, 0x10000)]].concat());
        let reads_before = mem.reads;
        let mut second = ReadAhead::new(&mut mem, &remembered(dll, &key));
        let mut cache = PageCache::with_block(0x10000);
        cache.read(&mut second, 0x52010, &mut b).unwrap();
        assert_eq!(b, [0x10, 0x11, 0x12, 0x13], "the bytes at 0x52010");
        drop(cache);
        assert_eq!(second.blocks_read(), [(0x50000, 0x10000)], "taken from the read-ahead");
        assert_eq!(
            mem.reads - reads_before,
            3,
            "read ahead: two blocks and the unreadable one; nothing else"
        );
    }
}
