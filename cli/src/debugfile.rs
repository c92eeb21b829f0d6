//! Finding an object's DWARF: in the object itself, or in a separate debug
//! file found the way gdb finds it, plus the supplementary (dwz) file that
//! `.gnu_debugaltlink` names.
//!
//! Separate debug files are looked for, in order, at
//! `DIR/.build-id/xx/yyyy.debug` (the build id), then from `.gnu_debuglink`
//! at `OBJDIR/NAME`, `OBJDIR/.debug/NAME` and `DIR/OBJDIR/NAME`, for each
//! debug directory `DIR` (gdb's `debug-file-directory`): `/usr/lib/debug`, or
//! the `:`-separated list in `MPIQ_DEBUG_FILE_DIRECTORY`. A candidate is used
//! only if its build id (or, without one, the debuglink CRC) matches.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use object::Object;

use crate::dwarf::{has_debug_info, DebugInfo, DwarfError};
use crate::elf::{map_file, Candidate, ElfObject, Symbols};

/// The environment variable that replaces the debug directories.
pub const DEBUG_DIR_ENV: &str = "MPIQ_DEBUG_FILE_DIRECTORY";

/// The debug directories (gdb's `debug-file-directory`).
pub fn debug_dirs() -> Vec<PathBuf> {
    match std::env::var_os(DEBUG_DIR_ENV) {
        Some(v) if !v.is_empty() => std::env::split_paths(&v).collect(),
        _ => vec![PathBuf::from("/usr/lib/debug")],
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `DIR/.build-id/xx/yyyy.debug` for each debug directory.
fn build_id_paths(build_id: &[u8]) -> Vec<PathBuf> {
    if build_id.len() < 2 {
        return Vec::new();
    }
    let (first, rest) = build_id.split_at(1);
    debug_dirs()
        .into_iter()
        .map(|d| {
            d.join(".build-id")
                .join(hex(first))
                .join(format!("{}.debug", hex(rest)))
        })
        .collect()
}

/// Where `.gnu_debuglink` NAME may be, for an object at `object`.
pub fn debuglink_paths(object: &Path, name: &str) -> Vec<PathBuf> {
    let dir = object.parent().unwrap_or(Path::new("/"));
    let mut out = vec![dir.join(name), dir.join(".debug").join(name)];
    let rel = dir.strip_prefix("/").unwrap_or(dir);
    for d in debug_dirs() {
        out.push(d.join(rel).join(name));
    }
    out
}

fn open_candidate(path: &Path) -> Option<Candidate> {
    if !path.is_file() || !crate::elf::has_elf_magic(path) {
        return None;
    }
    let data = map_file(path).ok()?;
    Some(Candidate {
        path: path.to_path_buf(),
        data,
    })
}

fn build_id_of(data: &'static [u8]) -> Option<Vec<u8>> {
    object::File::parse(data)
        .ok()?
        .build_id()
        .ok()
        .flatten()
        .map(<[u8]>::to_vec)
}

fn with_dwarf(c: &Candidate) -> bool {
    object::File::parse(c.data).is_ok_and(|f| has_debug_info(&f))
}

/// The symbol table of the separate debug file of an object that has no
/// DWARF itself (none if it has DWARF, or no such file is found).
fn separate_symbols(obj: &ElfObject) -> Option<Symbols> {
    if obj.has_dwarf() {
        return None;
    }
    let c = separate(obj)?;
    object::File::parse(c.data).ok().map(|f| Symbols::read(&f, c.data))
}

/// The separate debug file of an object, found once (its symbol table and
/// its DWARF are read at different times; each search maps the files it
/// tries for the rest of the run).
fn separate(obj: &ElfObject) -> Option<Candidate> {
    obj.separate.get_or_init(|| find_separate(obj)).clone()
}

/// Finds the separate debug file of an object that has no DWARF itself.
fn find_separate(obj: &ElfObject) -> Option<Candidate> {
    let links = obj.links();
    if let Some(id) = &links.build_id {
        for p in build_id_paths(id) {
            if let Some(c) = open_candidate(&p) {
                if build_id_of(c.data).as_deref() == Some(id.as_slice()) && with_dwarf(&c) {
                    return Some(c);
                }
            }
        }
    }
    let (name, crc) = links.debuglink.as_ref()?;
    for p in debuglink_paths(obj.path(), name) {
        if p == obj.path() {
            continue;
        }
        let Some(c) = open_candidate(&p) else { continue };
        let matches = match (&links.build_id, build_id_of(c.data)) {
            (Some(a), Some(b)) => *a == b,
            _ => crc32fast::hash(c.data) == *crc,
        };
        if matches && with_dwarf(&c) {
            return Some(c);
        }
    }
    None
}

/// A supplementary file, loaded once (or the reason it could not be).
type SupSlot = Arc<OnceLock<Result<Arc<DebugInfo>, DwarfError>>>;

/// Supplementary files are shared by many objects (every library of a
/// package): parsed once per run, keyed by device and inode.
fn sup_cache() -> &'static Mutex<HashMap<(u64, u64), SupSlot>> {
    static CACHE: OnceLock<Mutex<HashMap<(u64, u64), SupSlot>>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

fn load_sup(debug_file: &Path, alt_path: &str, build_id: &[u8]) -> Result<Arc<DebugInfo>, DwarfError> {
    let alt = Path::new(alt_path);
    let mut candidates = Vec::new();
    if alt.is_absolute() {
        candidates.push(alt.to_path_buf());
    } else {
        let dir = debug_file.parent().unwrap_or(Path::new("/"));
        candidates.push(dir.join(alt));
    }
    candidates.extend(build_id_paths(build_id));
    for p in candidates {
        let Ok(meta) = std::fs::metadata(&p) else {
            continue;
        };
        let Some(c) = open_candidate(&p) else { continue };
        if !build_id.is_empty() && build_id_of(c.data).as_deref() != Some(build_id) {
            continue;
        }
        let slot = sup_cache()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry((meta.dev(), meta.ino()))
            .or_default()
            .clone();
        return slot
            .get_or_init(|| DebugInfo::load(&c.path, c.data, true, None).map(Arc::new))
            .clone();
    }
    Err(DwarfError::SupplementaryMissing {
        debug_file: debug_file.to_path_buf(),
        alt: alt_path.to_string(),
        build_id: hex(build_id),
    })
}

/// Locates and loads an object's DWARF; `Ok(None)` when it has none.
fn load_debug_info(obj: &ElfObject) -> Result<Option<Arc<DebugInfo>>, DwarfError> {
    let (path, data, altlink) = if obj.has_dwarf() {
        (obj.path().to_path_buf(), obj.data(), obj.links().altlink.clone())
    } else {
        let Some(c) = separate(obj) else {
            return Ok(None);
        };
        let altlink = object::File::parse(c.data)
            .ok()
            .and_then(|f| f.gnu_debugaltlink().ok().flatten())
            .map(|(p, id)| (String::from_utf8_lossy(p).into_owned(), id.to_vec()));
        (c.path, c.data, altlink)
    };
    let sup = match &altlink {
        Some((alt, id)) => Some(load_sup(&path, alt, id)?),
        None => None,
    };
    DebugInfo::load(&path, data, false, sup).map(|d| Some(Arc::new(d)))
}

/// An object's lookups that reach into its separate debug files: a
/// stripped object's symbols are in its debug file's `.symtab`, its DWARF
/// in the object or in that file (the caches are the object's own fields).
impl ElfObject {
    /// Link-time address and `st_size` of a data symbol (`STT_OBJECT`,
    /// `STT_COMMON`).
    pub fn data_symbol(&self, name: &str) -> Option<(u64, u64)> {
        self.symbols
            .data(name)
            .or_else(|| self.debug_symbols().and_then(|d| d.data(name)))
    }

    /// Link-time address of a function (`STT_FUNC`, `STT_GNU_IFUNC`).
    pub fn function_symbol(&self, name: &str) -> Option<u64> {
        self.symbols
            .function(name)
            .or_else(|| self.debug_symbols().and_then(|d| d.function(name)))
            .map(|(addr, _)| addr)
    }

    /// A stripped file's full `.symtab` lives in its separate debug file:
    /// only that table is read here, not the DWARF (a name no object
    /// defines, such as `MPI2DD_info` in Open MPI, asks every object; with
    /// their DWARF that was 40 ms of decompressing system libraries' debug
    /// files).
    fn debug_symbols(&self) -> Option<&Symbols> {
        if self.symbols.has_symtab {
            return None;
        }
        self.debug_symtab.get_or_init(|| separate_symbols(self)).as_ref()
    }

    /// The bytes of this object's separate debug file, if it has no DWARF
    /// of its own and one is found (its full `.symtab`, for names).
    pub fn separate_debug_data(&self) -> Option<&'static [u8]> {
        if self.has_dwarf() {
            return None;
        }
        separate(self).map(|c| c.data)
    }

    /// The DWARF of this object (in the file or a separate debug file),
    /// located and loaded on first use; `Ok(None)` if there is none.
    pub fn debug_info(&self) -> Result<Option<Arc<DebugInfo>>, DwarfError> {
        self.debug.get_or_init(|| load_debug_info(self)).clone()
    }
}
