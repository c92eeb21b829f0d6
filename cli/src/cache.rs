//! The per-run cache of object files: every process that maps the same file
//! (same device, inode, size and modification time) shares one parsed
//! [`ElfObject`](crate::elf::ElfObject), its symbol tables and its DWARF index. A 16-rank job reads
//! `libmpi.so` once.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use crate::elf::{ElfError, ElfObject};

/// Identity of a file's contents.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FileKey {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
}

impl FileKey {
    /// Stats a file.
    pub fn of(path: &Path) -> std::io::Result<FileKey> {
        let m = std::fs::metadata(path)?;
        Ok(FileKey {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        })
    }

    /// Device and inode (what `/proc/PID/maps` shows).
    pub fn dev_ino(&self) -> (u64, u64) {
        (self.dev, self.ino)
    }
}

type Slot = Arc<OnceLock<Result<Arc<ElfObject>, Arc<ElfError>>>>;

fn cache() -> &'static Mutex<HashMap<FileKey, Slot>> {
    static CACHE: OnceLock<Mutex<HashMap<FileKey, Slot>>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// Opens an object file through the cache. Two threads asking for the same
/// file at once parse it once: the second waits for the first.
pub fn open_object(path: &Path) -> Result<Arc<ElfObject>, Arc<ElfError>> {
    let key = FileKey::of(path).map_err(|source| {
        Arc::new(ElfError::Io {
            path: path.to_path_buf(),
            source,
        })
    })?;
    let slot = cache()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(key)
        .or_default()
        .clone();
    slot.get_or_init(|| ElfObject::open(path).map(Arc::new).map_err(Arc::new))
        .clone()
}

/// Number of distinct ELF objects parsed so far (for tests and `--verbose`).
pub fn cached_objects() -> usize {
    cache()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .values()
        .filter(|slot| matches!(slot.get(), Some(Ok(_))))
        .count()
}
