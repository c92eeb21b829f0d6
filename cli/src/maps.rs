//! `/proc/PID/maps` (and the same facts from a core file's `NT_FILE`):
//! which files are mapped where, and the load bias of each ELF object.

use crate::elf::ElfObject;

/// One line of `/proc/PID/maps`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapEntry {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// `rwxp` / `r--s` ...
    pub perms: String,
    /// File offset of `start`.
    pub offset: u64,
    /// Inode (0 for anonymous memory).
    pub inode: u64,
    /// Path or pseudo-name (`[heap]`), if any; without a ` (deleted)` suffix.
    pub path: Option<String>,
    /// The file was deleted or replaced since it was mapped.
    pub deleted: bool,
}

/// Parses the text of `/proc/PID/maps`; malformed lines are skipped.
pub fn parse_maps(text: &str) -> Vec<MapEntry> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<MapEntry> {
    // start-end perms offset dev inode [path]; the path may contain spaces.
    let mut rest = line;
    let mut field = || -> Option<&str> {
        let t = rest.trim_start();
        let end = t.find(' ').unwrap_or(t.len());
        let (f, r) = t.split_at(end);
        rest = r;
        (!f.is_empty()).then_some(f)
    };
    let range = field()?;
    let perms = field()?.to_string();
    let offset = u64::from_str_radix(field()?, 16).ok()?;
    let _dev = field()?;
    let inode = field()?.parse().ok()?;
    let (start, end) = range.split_once('-')?;
    let path = rest.trim_start();
    let (path, deleted) = match path.strip_suffix(" (deleted)") {
        Some(p) => (p, true),
        None => (path, false),
    };
    Some(MapEntry {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        perms,
        offset,
        inode,
        path: (!path.is_empty()).then(|| path.to_string()),
        deleted,
    })
}

/// All the mappings of one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileMapping {
    /// The file's path as the process sees it.
    pub path: String,
    /// Any mapping's range, for `/proc/PID/map_files/START-END`.
    pub first_range: (u64, u64),
    /// Lowest mapped address.
    pub start: u64,
    /// The mapping with the lowest file offset: (address, offset).
    pub lowest_offset: (u64, u64),
    /// Deleted or replaced since mapped.
    pub deleted: bool,
}

/// Groups the file-backed mappings by file, in address order of first
/// appearance. Pseudo-files (`[heap]`, `[vdso]`) and anonymous memory are
/// left out.
pub fn group_files(entries: &[MapEntry]) -> Vec<FileMapping> {
    let mut out: Vec<(u64, FileMapping)> = Vec::new();
    for e in entries {
        let Some(path) = e.path.as_deref().filter(|p| p.starts_with('/')) else {
            continue;
        };
        if e.inode == 0 {
            continue;
        }
        match out.iter_mut().find(|(ino, f)| *ino == e.inode && f.path == path) {
            Some((_, f)) => {
                f.start = f.start.min(e.start);
                if e.offset < f.lowest_offset.1 {
                    f.lowest_offset = (e.start, e.offset);
                }
            }
            None => out.push((
                e.inode,
                FileMapping {
                    path: path.to_string(),
                    first_range: (e.start, e.end),
                    start: e.start,
                    lowest_offset: (e.start, e.offset),
                    deleted: e.deleted,
                },
            )),
        }
    }
    out.into_iter().map(|(_, f)| f).collect()
}

/// Load bias of an object from one of its mappings: the address the
/// mapping of file offset `offset` starts at, minus the page-aligned
/// `p_vaddr` of the `PT_LOAD` there. Zero for a position-dependent
/// executable; the load address for a PIE or a shared library.
pub fn load_bias(obj: &ElfObject, map_start: u64, offset: u64, page_size: u64) -> Option<u64> {
    let vaddr = obj.vaddr_of_file_offset(offset, page_size)?;
    Some(map_start.wrapping_sub(vaddr))
}

/// The host's page size.
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions; it only reads a constant.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as u64
    } else {
        4096
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
55d0a5a00000-55d0a5a01000 r--p 00000000 fe:00 1234                       /tmp/my prog
55d0a5a01000-55d0a5a02000 r-xp 00001000 fe:00 1234                       /tmp/my prog
55d0a7000000-55d0a7021000 rw-p 00000000 00:00 0                          [heap]
7f0000000000-7f0000001000 r--p 00000000 fe:00 99                         /usr/lib/libx.so (deleted)
7f0000001000-7f0000002000 r-xp 00001000 fe:00 99                         /usr/lib/libx.so (deleted)
7f0000100000-7f0000200000 rw-s 00000000 00:1a 5                          /dev/shm/vader_segment
7ffd0000000-7ffd0001000 r-xp 00000000 00:00 0                            [vdso]
";

    #[test]
    fn parses_and_groups() {
        let e = parse_maps(MAPS);
        assert_eq!(e.len(), 7);
        assert_eq!(e[0].path.as_deref(), Some("/tmp/my prog"));
        assert_eq!(e[1].offset, 0x1000);
        assert!(e[3].deleted);
        let files = group_files(&e);
        let names: Vec<_> = files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(names, ["/tmp/my prog", "/usr/lib/libx.so", "/dev/shm/vader_segment"]);
        assert_eq!(files[0].lowest_offset, (0x55d0a5a00000, 0));
        assert!(files[1].deleted);
    }
}
