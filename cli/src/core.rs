//! Core files (gdb's `gcore`, or the kernel's): memory from the `PT_LOAD`
//! segments, with what the core left out (read-only file mappings, unwritten
//! pages) read from the files its `NT_FILE` note names; the object list from
//! `NT_FILE`; the pid from `NT_PRPSINFO` / `NT_PRSTATUS`; the executable from
//! `AT_ENTRY` in `NT_AUXV`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mpiq::TargetError;
use object::elf::{NT_AUXV, NT_PRPSINFO, NT_PRSTATUS, PT_LOAD, PT_NOTE};
use object::read::elf::{FileHeader, ProgramHeader};
use object::Endianness;

use crate::auxv::{auxv_value, word};
use crate::cache::open_object;
use crate::elf::{map_file, ElfObject};
use crate::image::{MappedObject, Memory, ProcessImage};
use crate::mapped::FileEntry;
use crate::process::Process;
use crate::regs::ThreadRegs;

/// `NT_FILE`: the mapped files.
const NT_FILE: u32 = 0x4649_4c45;

/// A core file opened for dumping.
pub type CoreProcess = Process<CoreMemory>;

/// Why a core file could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CoreError {
    /// It could not be opened.
    #[error("cannot open core file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// It is not an ELF core file.
    #[error("{0} is not an ELF core file")]
    NotCore(PathBuf),
    /// Its headers or notes are damaged.
    #[error("core file {path}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What `object` said.
        source: object::Error,
    },
    /// The executable named with `--exe` could not be read.
    #[error("executable {path}: {reason}")]
    Executable {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

/// A `PT_LOAD` of the core.
#[derive(Clone, Copy, Debug)]
struct CoreSegment {
    vaddr: u64,
    memsz: u64,
    offset: u64,
    filesz: u64,
}

/// What the headers and notes of a core say.
#[derive(Debug, Default)]
struct Layout {
    is_64: bool,
    little: bool,
    segments: Vec<CoreSegment>,
    files: Vec<FileEntry>,
    pid: Option<u32>,
    fname: Option<String>,
    auxv: Vec<u8>,
    /// Every thread's `NT_PRSTATUS` registers (x86_64 cores only).
    threads: Vec<ThreadRegs>,
}

/// The registers of an x86_64 `NT_PRSTATUS`: `pr_pid` (the thread) at byte
/// 32, `pr_reg` at 112, 27 words in `user_regs_struct` order.
fn prstatus_regs(desc: &[u8]) -> Option<ThreadRegs> {
    let tid = word(desc, 32, 4, true)? as i32;
    let reg = |i: usize| word(desc, 112 + 8 * i, 8, true);
    // r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax
    // rip cs eflags rsp ...
    let w: Vec<u64> = (0..20).map(reg).collect::<Option<_>>()?;
    let regs = [
        w[10], w[12], w[11], w[5], w[13], w[14], w[4], w[19], w[9], w[8], w[7], w[6], w[3], w[2], w[1], w[0], w[16],
    ]
    .map(Some);
    Some(ThreadRegs { tid, regs: Ok(regs) })
}

/// Parses the `NT_FILE` descriptor: count, page size, count × (start, end,
/// page offset), then count NUL-terminated names.
pub fn parse_nt_file(desc: &[u8], word_size: usize, little: bool) -> Vec<FileEntry> {
    let w = word_size;
    let (Some(count), Some(page)) = (word(desc, 0, w, little), word(desc, w, w, little)) else {
        return Vec::new();
    };
    let count = count.min(1 << 20) as usize;
    let mut names = desc.get(2 * w + count * 3 * w..).unwrap_or(&[]).split(|&b| b == 0);
    (0..count)
        .map_while(|i| {
            let at = 2 * w + i * 3 * w;
            Some(FileEntry {
                start: word(desc, at, w, little)?,
                end: word(desc, at + w, w, little)?,
                offset: word(desc, at + 2 * w, w, little)?.saturating_mul(page),
                path: {
                    let name = String::from_utf8_lossy(names.next()?).into_owned();
                    match name.strip_suffix(" (deleted)") {
                        Some(p) => p.to_string(),
                        None => name,
                    }
                },
            })
        })
        .collect()
}

fn parse_layout<Elf: FileHeader<Endian = Endianness>>(data: &[u8]) -> object::Result<Layout> {
    let header = Elf::parse(data)?;
    let endian = header.endian()?;
    let w = if header.is_class_64() { 8 } else { 4 };
    let mut layout = Layout {
        is_64: header.is_class_64(),
        little: endian == Endianness::Little,
        ..Layout::default()
    };
    let little = layout.little;
    let x86_64 = header.e_machine(endian) == object::elf::EM_X86_64 && layout.is_64 && little;
    for ph in header.program_headers(endian, data)? {
        match ph.p_type(endian) {
            PT_LOAD => layout.segments.push(CoreSegment {
                vaddr: ph.p_vaddr(endian).into(),
                memsz: ph.p_memsz(endian).into(),
                offset: ph.p_offset(endian).into(),
                filesz: ph.p_filesz(endian).into(),
            }),
            PT_NOTE => {
                let Some(mut notes) = ph.notes(endian, data)? else {
                    continue;
                };
                while let Some(note) = notes.next()? {
                    if note.name() != b"CORE" {
                        continue;
                    }
                    let desc = note.desc();
                    match note.n_type(endian) {
                        NT_FILE => layout.files = parse_nt_file(desc, w, little),
                        NT_AUXV => layout.auxv = desc.to_vec(),
                        NT_PRPSINFO => {
                            // elf_prpsinfo: pr_pid after 4 chars, pr_flag and
                            // uid/gid (32-bit each on 64-bit targets, 16-bit
                            // on the old 32-bit ABIs); pr_fname 16 bytes on.
                            let (pid_at, fname_at) = if w == 8 { (24, 40) } else { (12, 28) };
                            if let Some(pid) = word(desc, pid_at, 4, little) {
                                layout.pid = Some(pid as u32);
                            }
                            if let Some(f) = desc.get(fname_at..fname_at + 16) {
                                layout.fname = Some(crate::elf::c_str(f));
                            }
                        }
                        NT_PRSTATUS => {
                            if layout.pid.is_none() {
                                let pid_at = if w == 8 { 32 } else { 24 };
                                layout.pid = word(desc, pid_at, 4, little).map(|p| p as u32);
                            }
                            if x86_64 {
                                layout.threads.extend(prstatus_regs(desc));
                            }
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    Ok(layout)
}

/// Memory of a core file.
#[derive(Debug)]
pub struct CoreMemory {
    data: &'static [u8],
    segments: Vec<CoreSegment>,
    /// `NT_FILE` entries with the file's bytes when the file is here.
    files: Vec<(FileEntry, Option<&'static [u8]>)>,
}

impl CoreMemory {
    /// Copies what is at `addr` into `buf`; returns how many bytes, 0 if
    /// nothing backs `addr`.
    fn read_some(&self, addr: u64, buf: &mut [u8]) -> usize {
        let want = buf.len() as u64;
        let seg = self
            .segments
            .iter()
            .find(|s| addr >= s.vaddr && addr - s.vaddr < s.memsz);
        // 1. The core's own bytes.
        if let Some(s) = seg {
            let rel = addr - s.vaddr;
            if rel < s.filesz {
                let n = want.min(s.filesz - rel) as usize;
                let from = (s.offset + rel) as usize;
                if let Some(src) = self.data.get(from..from + n) {
                    buf[..n].copy_from_slice(src);
                    return n;
                }
                return 0;
            }
        }
        // 2. A mapped file the core left out.
        if let Some((f, Some(bytes))) = self.files.iter().find(|(f, _)| addr >= f.start && addr < f.end) {
            let mut n = want.min(f.end - addr);
            if let Some(s) = seg {
                // Stop where the core's bytes of a later part begin.
                if s.vaddr > addr {
                    n = n.min(s.vaddr - addr);
                }
            }
            let from = f.offset + (addr - f.start);
            let avail = (bytes.len() as u64).saturating_sub(from);
            let n = n.min(avail) as usize;
            if n > 0 {
                buf[..n].copy_from_slice(&bytes[from as usize..from as usize + n]);
            }
            return n;
        }
        // 3. Memory the process had but never wrote: zeros.
        if let Some(s) = seg {
            let n = want.min(s.vaddr + s.memsz - addr) as usize;
            buf[..n].fill(0);
            return n;
        }
        0
    }
}

impl Memory for CoreMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        if crate::interrupt::interrupted() {
            return Err(TargetError::Interrupted);
        }
        let mut done = 0;
        while done < buf.len() {
            let n = self.read_some(addr.wrapping_add(done as u64), &mut buf[done..]);
            if n == 0 {
                return Err(TargetError::Unreadable {
                    addr,
                    len: buf.len() as u64,
                    reason: format!(
                        "address {:#x} is not in the core file nor in a file it names",
                        addr.wrapping_add(done as u64)
                    ),
                });
            }
            done += n;
        }
        Ok(())
    }
}

impl CoreProcess {
    /// Opens a core file. `exe` replaces the executable the core names (for
    /// a core from another machine, or an executable that moved).
    pub fn open_core(path: &Path, exe: Option<&Path>) -> Result<CoreProcess, CoreError> {
        let data = map_file(path).map_err(|e| match e {
            crate::elf::ElfError::Io { source, .. } => CoreError::Io {
                path: path.to_path_buf(),
                source,
            },
            _ => CoreError::NotCore(path.to_path_buf()),
        })?;
        if data.get(..4) != Some(b"\x7fELF") || data.get(16..18).is_none() {
            return Err(CoreError::NotCore(path.to_path_buf()));
        }
        let perr = |source| CoreError::Parse {
            path: path.to_path_buf(),
            source,
        };
        let layout = if data[4] == object::elf::ELFCLASS64 {
            parse_layout::<object::elf::FileHeader64<Endianness>>(data)
        } else {
            parse_layout::<object::elf::FileHeader32<Endianness>>(data)
        }
        .map_err(perr)?;
        let e_type = word(data, 16, 2, layout.little).unwrap_or(0);
        if e_type != u64::from(object::elf::ET_CORE) {
            return Err(CoreError::NotCore(path.to_path_buf()));
        }
        let w = if layout.is_64 { 8 } else { 4 };
        let at_entry = auxv_value(&layout.auxv, 9, w, layout.little);

        let exe_override = match exe {
            Some(p) => Some(open_object(p).map_err(|e| CoreError::Executable {
                path: p.to_path_buf(),
                reason: e.to_string(),
            })?),
            None => None,
        };

        // Group NT_FILE entries by file; open ELF objects through the cache.
        let mut warnings = Vec::new();
        let mut by_path: HashMap<&str, (u64, u64, u64)> = HashMap::new(); // start, lowest offset's address, lowest offset
        let mut order = Vec::new();
        for f in &layout.files {
            let e = by_path.entry(f.path.as_str()).or_insert_with(|| {
                order.push(f.path.as_str());
                (f.start, f.start, f.offset)
            });
            e.0 = e.0.min(f.start);
            if f.offset < e.2 {
                e.1 = f.start;
                e.2 = f.offset;
            }
        }
        // The executable is the file mapped where AT_ENTRY points.
        let exe_path = at_entry.and_then(|e| {
            layout
                .files
                .iter()
                .find(|f| e >= f.start && e < f.end)
                .map(|f| f.path.as_str())
        });
        let page = 4096;
        let mut objects = Vec::new();
        let mut exe_index = None;
        let mut opened: HashMap<&str, Arc<ElfObject>> = HashMap::new();
        for p in order {
            let (start, map_addr, map_off) = by_path[p];
            let is_exe = exe_path == Some(p);
            let file = match (&exe_override, is_exe) {
                (Some(x), true) => x.clone(),
                _ => {
                    if !crate::elf::has_elf_magic(Path::new(p)) {
                        // Shared memory segments and data files are no
                        // objects; a missing library or executable is worth
                        // a word.
                        if is_exe || (!Path::new(p).exists() && p.contains(".so")) {
                            warnings.push(format!("{p}: not readable here"));
                        }
                        continue;
                    }
                    match open_object(Path::new(p)) {
                        Ok(f) => f,
                        Err(e) => {
                            warnings.push(e.to_string());
                            continue;
                        }
                    }
                }
            };
            let Some(bias) = crate::maps::load_bias(&file, map_addr, map_off, page) else {
                warnings.push(format!("{p}: no PT_LOAD at the mapped offset"));
                continue;
            };
            if is_exe {
                exe_index.get_or_insert(objects.len());
            }
            opened.insert(p, file.clone());
            objects.push(MappedObject {
                name: file.path().display().to_string(),
                file,
                bias,
                start,
            });
        }
        let exe_start = exe_index.map(|i| objects[i].start);
        objects.sort_by_key(|o| o.start);
        let exe_index = exe_start.and_then(|s| objects.iter().position(|o| o.start == s));

        // Back every NT_FILE range with the file's bytes where possible.
        let files = layout
            .files
            .iter()
            .map(|f| {
                let bytes = opened
                    .get(f.path.as_str())
                    .map(|o| o.data())
                    .or_else(|| map_file(Path::new(&f.path)).ok());
                (f.clone(), bytes)
            })
            .collect();
        let mem = CoreMemory {
            data,
            segments: layout.segments,
            files,
        };
        for o in &objects {
            check_same_file(&mem, o, &mut warnings);
        }
        let python_code_maps = crate::pycore::missing_code_maps(
            mem.files.iter().map(|(f, _)| f),
            |start| mem.segments.iter().any(|s| s.vaddr == start),
            |path| {
                let code = opened.get(path)?.loads().iter().find(|l| l.exec)?;
                Some(code.offset & !(page - 1))
            },
            exe_index.map_or("", |i| objects[i].name.as_str()),
        );
        let image = ProcessImage::new(objects, exe_index, &mem);
        let executable = image
            .executable()
            .map(|o| o.name.clone())
            .or(layout.fname)
            .unwrap_or_default();
        Ok(Process {
            pid: layout.pid,
            executable,
            image,
            mem,
            world_rank: None,
            attachment: None,
            core_threads: layout.threads,
            core_file: Some(path.to_path_buf()),
            core_python_maps: python_code_maps,
            warnings,
            unwound: None,
            os: None,
        })
    }
}

/// Warns when the core holds an object's first page and it differs from
/// the file here (a rebuilt library: its symbols and types would lie).
fn check_same_file(mem: &CoreMemory, o: &MappedObject, warnings: &mut Vec<String>) {
    let Some(first) = o.file.loads().first() else {
        return;
    };
    if first.offset != 0 {
        return;
    }
    let addr = (first.vaddr & !4095).wrapping_add(o.bias);
    // ELF header, program headers and notes (the build id): read-only, so
    // the same in memory as on disk unless the file is another build.
    let n = 1024.min(o.file.data().len()).min(first.filesz as usize);
    let Some(seg) = mem
        .segments
        .iter()
        .find(|s| addr >= s.vaddr && addr + n as u64 <= s.vaddr + s.filesz)
    else {
        return;
    };
    let from = (seg.offset + addr - seg.vaddr) as usize;
    if mem.data.get(from..from + n) != o.file.data().get(..n) {
        warnings.push(format!(
            "{}: differs from the file the process had mapped (rebuilt?): symbols and types may be wrong",
            o.name
        ));
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn prstatus_registers_in_dwarf_order() {
        // pr_pid at 32, pr_reg at 112: word i of user_regs_struct = 1000 + i.
        let mut desc = vec![0u8; 336];
        desc[32..36].copy_from_slice(&77i32.to_le_bytes());
        for i in 0..27u64 {
            let at = 112 + 8 * i as usize;
            desc[at..at + 8].copy_from_slice(&(1000 + i).to_le_bytes());
        }
        let t = super::prstatus_regs(&desc).unwrap();
        assert_eq!(t.tid, 77);
        let regs = t.regs.unwrap();
        // rax rdx rcx rbx rsi rdi rbp rsp r8..r15 rip
        let want = [10, 12, 11, 5, 13, 14, 4, 19, 9, 8, 7, 6, 3, 2, 1, 0, 16].map(|i| Some(1000 + i));
        assert_eq!(regs, want);
        assert!(super::prstatus_regs(&desc[..200]).is_none());
    }

    use super::*;

    fn nt_file(entries: &[(u64, u64, u64, &str)], page: u64, w: usize, little: bool) -> Vec<u8> {
        let mut v = Vec::new();
        let mut put = |x: u64| {
            let b = x.to_le_bytes();
            if little {
                v.extend_from_slice(&b[..w]);
            } else {
                let be = x.to_be_bytes();
                v.extend_from_slice(&be[8 - w..]);
            }
        };
        put(entries.len() as u64);
        put(page);
        for &(s, e, o, _) in entries {
            put(s);
            put(e);
            put(o);
        }
        for &(_, _, _, name) in entries {
            v.extend_from_slice(name.as_bytes());
            v.push(0);
        }
        v
    }

    #[test]
    fn nt_file_both_orders_and_sizes() {
        let entries = [
            (0x400000, 0x401000, 0, "/bin/prog"),
            (0x7f0000, 0x7f2000, 2, "/lib/libmpi.so"),
        ];
        for (w, little) in [(8, true), (4, true), (8, false), (4, false)] {
            let got = parse_nt_file(&nt_file(&entries, 4096, w, little), w, little);
            assert_eq!(got.len(), 2, "w={w} little={little}");
            assert_eq!(got[1].offset, 2 * 4096);
            assert_eq!(got[1].path, "/lib/libmpi.so");
            assert_eq!(got[0].start, 0x400000);
        }
    }

    #[test]
    fn memory_prefers_core_then_file_then_zero() {
        // Core bytes: 16 bytes at 0x1000 ("CORE...") of a 32-byte segment.
        static CORE: [u8; 16] = *b"CORECORECORECORE";
        static FILE: [u8; 64] = [7u8; 64];
        let mem = CoreMemory {
            data: &CORE,
            segments: vec![CoreSegment {
                vaddr: 0x1000,
                memsz: 32,
                offset: 0,
                filesz: 16,
            }],
            files: vec![(
                FileEntry {
                    start: 0x2000,
                    end: 0x2040,
                    offset: 0,
                    path: "/x".into(),
                },
                Some(&FILE),
            )],
        };
        let mut b = [1u8; 32];
        mem.read(0x1000, &mut b).unwrap();
        assert_eq!(&b[..16], b"CORECORECORECORE");
        assert_eq!(&b[16..], &[0u8; 16]);
        let mut f = [0u8; 8];
        mem.read(0x2038, &mut f).unwrap();
        assert_eq!(f, [7u8; 8]);
        assert!(mem.read(0x2039, &mut f).is_err());
        assert!(mem.read(0x3000, &mut f).is_err());
    }
}
