//! Python frames from a core file, by py-spy (`mpiq::target::python::read_core`).
//!
//! py-spy finds the interpreter in a core through its program headers: the
//! first executable `PT_LOAD` that `NT_FILE` names is the Python binary, the
//! executable one of a `libpython` its library, and the load address of each
//! comes from there. A kernel core has a `PT_LOAD` for every mapping. gdb's
//! `gcore` (how a hung job's cores are made) leaves out the mappings of files
//! the process never wrote, the code among them, so py-spy finds no
//! interpreter in it. For such a core, py-spy is given a view of it in memory
//! (a `memfd`, never a file on disk): the same bytes, with a `PT_LOAD` (no
//! bytes) for the code mapping of each Python object that `NT_FILE` names.
//! py-spy reads no code, only the interpreter's data, which the core has.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::auxv::word;
use crate::mapped::FileEntry;

/// `PT_LOAD`, `PF_X | PF_R`, and the size of an ELF64 program header.
const PT_LOAD: u32 = 1;
const PF_RX: u32 = 0x5;
const PHDR64: usize = 56;

/// Whether `b` starts an ELF64 little-endian header (the only layout this
/// view is made for: x86_64 and aarch64 Linux).
fn is_elf64_le(b: &[u8]) -> bool {
    b.get(..6) == Some(b"\x7fELF\x02\x01")
}

/// The `NT_FILE` entries to add a code `PT_LOAD` for: the code mapping of
/// each Python object (`code_offset(path)`: the page offset of its
/// executable `PT_LOAD`), the
/// executable's first (py-spy takes the first executable mapping for the
/// Python binary); none when the core has them already.
pub fn missing_code_maps<'a>(
    files: impl IntoIterator<Item = &'a FileEntry>,
    has_segment: impl Fn(u64) -> bool,
    code_offset: impl Fn(&str) -> Option<u64>,
    executable: &str,
) -> Vec<FileEntry> {
    let mut out: Vec<FileEntry> = files
        .into_iter()
        .filter(|f| mpiq::target::python::is_python_object(&f.path) && !has_segment(f.start))
        .filter(|f| code_offset(&f.path) == Some(f.offset))
        .cloned()
        .collect();
    out.sort_by_key(|f| (f.path != executable, f.start));
    out
}

/// `core` with a code `PT_LOAD` for each of `maps` before its own program
/// headers, in an anonymous memory file: what py-spy is to read.
fn view(core: &Path, maps: &[FileEntry]) -> std::io::Result<File> {
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{}: {what}", core.display()));
    let mut src = File::open(core)?;
    let mut header = [0u8; 64];
    src.read_exact_at(&mut header, 0)?;
    let field = |at, size| word(&header, at, size, true).unwrap_or(0);
    if !is_elf64_le(&header) || field(0x36, 2) != PHDR64 as u64 {
        return Err(bad("not an ELF64 little-endian core"));
    }
    let (phoff, phnum) = (field(0x20, 8), field(0x38, 2) as usize);
    let total = u16::try_from(phnum + maps.len())
        .ok()
        .filter(|&n| n < 0xffff)
        .ok_or_else(|| bad("too many program headers"))?;
    let mut table = vec![0u8; phnum * PHDR64];
    src.read_exact_at(&mut table, phoff)?;

    let name = c"mpiq-python-core";
    let fd = nix::sys::memfd::memfd_create(name, nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC)?;
    let mut out = File::from(fd);
    std::io::copy(&mut src, &mut out)?;
    let end = out.seek(SeekFrom::End(0))?;
    let new_phoff = end.next_multiple_of(8);
    out.write_all(&vec![0u8; (new_phoff - end) as usize])?;
    for m in maps {
        let mut ph = [0u8; PHDR64];
        ph[0..4].copy_from_slice(&PT_LOAD.to_le_bytes());
        ph[4..8].copy_from_slice(&PF_RX.to_le_bytes());
        // p_offset and p_filesz 0: no bytes in the core.
        ph[16..24].copy_from_slice(&m.start.to_le_bytes());
        ph[40..48].copy_from_slice(&(m.end - m.start).to_le_bytes());
        ph[48..56].copy_from_slice(&0x1000u64.to_le_bytes());
        out.write_all(&ph)?;
    }
    out.write_all(&table)?;
    out.write_all_at(&new_phoff.to_le_bytes(), 0x20)?;
    out.write_all_at(&total.to_le_bytes(), 0x38)?;
    Ok(out)
}

/// The Python frames of core file `core` of a process that mapped a CPython
/// interpreter; `maps` from [`missing_code_maps`].
pub fn read_python_core(core: &Path, maps: &[FileEntry]) -> mpiq::PythonStacks {
    if maps.is_empty() {
        return mpiq::target::python::read_core(core);
    }
    match view(core, maps) {
        Ok(file) => {
            use std::os::fd::AsRawFd;
            let path = format!("/proc/self/fd/{}", file.as_raw_fd());
            let stacks = mpiq::target::python::read_core(Path::new(&path));
            drop(file);
            stacks
        }
        Err(e) => mpiq::PythonStacks {
            error: Some(format!("the core's code mappings could not be added for py-spy: {e}")),
            ..mpiq::PythonStacks::default()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(start: u64, offset: u64, path: &str) -> FileEntry {
        FileEntry {
            start,
            end: start + 0x1000,
            offset,
            path: path.into(),
        }
    }

    #[test]
    fn the_code_maps_of_python_objects_the_core_left_out_executable_first() {
        let files = [
            entry(0x7f00_0000, 0, "/usr/lib/libpython3.11.so.1.0"),
            entry(0x7f00_1000, 0x1000, "/usr/lib/libpython3.11.so.1.0"),
            entry(0x7f00_9000, 0x1000, "/usr/lib/libc.so.6"),
            entry(0x5500_0000, 0, "/usr/bin/python3.11"),
            entry(0x5500_1000, 0x1000, "/usr/bin/python3.11"),
        ];
        let maps = missing_code_maps(&files, |_| false, |_| Some(0x1000), "/usr/bin/python3.11");
        let starts: Vec<u64> = maps.iter().map(|f| f.start).collect();
        assert_eq!(starts, [0x5500_1000, 0x7f00_1000]);
        // A kernel core has them: nothing to add.
        assert!(missing_code_maps(&files, |_| true, |_| Some(0x1000), "/usr/bin/python3.11").is_empty());
        // An object that is gone (no code offset known) gets none.
        assert!(missing_code_maps(&files, |_| false, |_| None, "/usr/bin/python3.11").is_empty());
    }

    #[test]
    fn the_code_mapping_of_this_test_binary_is_its_executable_load() {
        // What core.rs takes for an object's code mapping, against where the
        // kernel mapped this binary's code.
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let object = crate::cache::open_object(&exe).unwrap();
        let code = object.loads().iter().find(|l| l.exec).expect("an executable PT_LOAD");
        let name = exe.display().to_string();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let mapped = maps
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|f| f.len() >= 6 && f[1].contains('x') && f[5..].join(" ") == name)
            .and_then(|f| u64::from_str_radix(f[2], 16).ok())
            .expect("this binary's code in /proc/self/maps");
        assert_eq!(code.offset & !0xfff, mapped);
    }
}
