//! One ELF object file on disk: its program headers, its symbol tables and
//! the links to its separate debug information. The DWARF itself is loaded
//! lazily (see [`crate::dwarf`]), the first time a type is asked for.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use mpiq::ByteOrder;
use object::elf::{PT_DYNAMIC, PT_LOAD};
use object::read::elf::{FileHeader, ProgramHeader};
use object::Object;

use crate::dwarf::DebugInfo;

/// Why an object file could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ElfError {
    /// The file could not be opened or mapped.
    #[error("cannot open {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The file is not an ELF file (shared memory segments, locale archives, fonts...).
    #[error("{0} is not an ELF file")]
    NotElf(PathBuf),
    /// The file is an ELF file `object` could not parse.
    #[error("cannot parse ELF file {path}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What `object` said.
        source: object::Error,
    },
}

/// A `PT_LOAD` program header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadSegment {
    /// `p_vaddr`
    pub vaddr: u64,
    /// `p_memsz`
    pub memsz: u64,
    /// `p_offset`
    pub offset: u64,
    /// `p_filesz`
    pub filesz: u64,
    /// `p_align`
    pub align: u64,
    /// `p_flags` has `PF_X`: the code.
    pub exec: bool,
}

/// What kind of ELF file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElfKind {
    /// `ET_EXEC`: a position-dependent executable.
    Executable,
    /// `ET_DYN`: a shared library or a PIE executable.
    Dynamic,
    /// `ET_CORE`: a core file.
    Core,
    /// Anything else (`ET_REL`, ...).
    Other,
}

/// One symbol table of a file (`.symtab` or `.dynsym`) and its strings.
#[derive(Debug)]
enum SymbolTable {
    Elf32(
        object::read::elf::SymbolTable<'static, object::elf::FileHeader32<object::Endianness>>,
        object::Endianness,
    ),
    Elf64(
        object::read::elf::SymbolTable<'static, object::elf::FileHeader64<object::Endianness>>,
        object::Endianness,
    ),
}

/// A defined symbol found by name: link-time address, size, binding.
#[derive(Clone, Copy, Debug)]
struct Found {
    addr: u64,
    size: u64,
    global: bool,
}

impl Found {
    /// The first definition, unless a later global one is found after a
    /// local (static) one of the same name.
    fn prefer(best: &mut Option<Found>, new: Found) {
        match best {
            Some(b) if !b.global && new.global => *b = new,
            Some(_) => {}
            None => *best = Some(new),
        }
    }
}

/// The definitions named `name` (their `st_name` among `offsets`, the
/// places `name` ends a string of the table) of the kind asked.
fn find_in<Elf: FileHeader<Endian = object::Endianness>>(
    table: &object::read::elf::SymbolTable<'static, Elf>,
    endian: object::Endianness,
    offsets: &[u32],
    text: bool,
    best: &mut Option<Found>,
) {
    use object::read::elf::Sym;
    // Index 0 is the null symbol.
    for sym in table.symbols().iter().skip(1) {
        if !offsets.contains(&sym.st_name(endian)) || sym.is_undefined(endian) {
            continue;
        }
        let is_text = match sym.st_type() {
            object::elf::STT_OBJECT | object::elf::STT_COMMON => false,
            object::elf::STT_FUNC | object::elf::STT_GNU_IFUNC => true,
            _ => continue,
        };
        if is_text != text {
            continue;
        }
        Found::prefer(
            best,
            Found {
                addr: sym.st_value(endian).into(),
                size: sym.st_size(endian).into(),
                global: !sym.is_local(),
            },
        );
    }
}

/// Data and function symbols of one file, looked up by name in its
/// symbol tables as they are in the file.
///
/// A new process maps some 70 objects, and a lookup of a name no object
/// defines (Open MPI has no `MPI2DD_info`) asks every one. A name an
/// object defines is in its `.strtab` or `.dynstr` (as written, or as the
/// tail of a longer name), so one search of those bytes answers "not here";
/// where it is there, the symbols whose `st_name` is one of those places
/// are the ones with that name, exactly (a longer name that ends with it
/// starts before). No table of every name is built: reading libmpi's
/// 13,500 symbols into one took MPICH's discovery 2 to 3 ms of a 12 ms
/// dump; a pass over the raw entries comparing one integer takes some
/// 30 microseconds.
#[derive(Debug, Default)]
pub(crate) struct Symbols {
    /// `.symtab` and `.dynsym` (those present), each with its strings.
    tables: Vec<(SymbolTable, &'static [u8])>,
    pub(crate) has_symtab: bool,
}

impl Symbols {
    /// The symbol tables of `file`, whose bytes are `data`.
    pub(crate) fn read(file: &object::File<'static>, data: &'static [u8]) -> Symbols {
        let tables = match file {
            object::File::Elf32(elf) => tables_of(elf, data, SymbolTable::Elf32),
            object::File::Elf64(elf) => tables_of(elf, data, SymbolTable::Elf64),
            _ => Vec::new(),
        };
        Symbols {
            tables,
            has_symtab: file.symbol_table().is_some(),
        }
    }

    fn find(&self, name: &str, text: bool) -> Option<(u64, u64)> {
        if name.is_empty() {
            return None;
        }
        let mut wanted = Vec::with_capacity(name.len() + 1);
        wanted.extend_from_slice(name.as_bytes());
        wanted.push(0);
        let finder = memchr::memmem::Finder::new(&wanted);
        let mut best = None;
        for (table, strings) in &self.tables {
            let offsets: Vec<u32> = finder
                .find_iter(strings)
                .filter_map(|o| u32::try_from(o).ok())
                .collect();
            if offsets.is_empty() {
                continue;
            }
            match table {
                SymbolTable::Elf32(t, endian) => find_in(t, *endian, &offsets, text, &mut best),
                SymbolTable::Elf64(t, endian) => find_in(t, *endian, &offsets, text, &mut best),
            }
        }
        best.map(|f| (f.addr, f.size))
    }

    /// Link-time address and size of data symbol `name`.
    pub(crate) fn data(&self, name: &str) -> Option<(u64, u64)> {
        self.find(name, false)
    }

    /// Link-time address and size of function `name`.
    pub(crate) fn function(&self, name: &str) -> Option<(u64, u64)> {
        self.find(name, true)
    }
}

/// The symbol tables of `elf` present and not empty, each with its
/// strings, as `wrap` makes them.
fn tables_of<Elf: FileHeader<Endian = object::Endianness>>(
    elf: &object::read::elf::ElfFile<'static, Elf>,
    data: &'static [u8],
    wrap: fn(object::read::elf::SymbolTable<'static, Elf>, object::Endianness) -> SymbolTable,
) -> Vec<(SymbolTable, &'static [u8])> {
    let endian = elf.endian();
    [elf.elf_symbol_table(), elf.elf_dynamic_symbol_table()]
        .into_iter()
        .filter(|t| !t.is_empty())
        .filter_map(|t| {
            let strings = table_strings(elf.elf_section_table(), t.string_section(), endian, data)?;
            Some((wrap(*t, endian), strings))
        })
        .collect()
}

/// The bytes of the string table at `index` (a symbol table's `sh_link`).
fn table_strings<Elf: FileHeader<Endian = object::Endianness>>(
    sections: &object::read::elf::SectionTable<'static, Elf>,
    index: object::SectionIndex,
    endian: object::Endianness,
    data: &'static [u8],
) -> Option<&'static [u8]> {
    use object::read::elf::SectionHeader;
    sections.section(index).ok()?.data(endian, data).ok()
}

/// The links an object has to its separate debug information.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DebugLinks {
    /// `NT_GNU_BUILD_ID`
    pub build_id: Option<Vec<u8>>,
    /// `.gnu_debuglink`: file name and CRC-32 of the debug file.
    pub debuglink: Option<(String, u32)>,
    /// `.gnu_debugaltlink`: path and build id of the supplementary (dwz) file.
    pub altlink: Option<(String, Vec<u8>)>,
}

/// A mapped, parsed ELF object. Shared between every process that maps the
/// same file (see [`crate::cache`]).
pub struct ElfObject {
    path: PathBuf,
    data: &'static [u8],
    is_64: bool,
    byte_order: ByteOrder,
    kind: ElfKind,
    entry: u64,
    loads: Vec<LoadSegment>,
    dynamic: Option<u64>,
    pub(crate) symbols: Symbols,
    links: DebugLinks,
    has_dwarf: bool,
    /// The DWARF, once loaded (`crate::debugfile`).
    pub(crate) debug: OnceLock<Result<Option<Arc<DebugInfo>>, crate::dwarf::DwarfError>>,
    /// The symbol table of the separate debug file of a stripped object.
    pub(crate) debug_symtab: OnceLock<Option<Symbols>>,
    /// The separate debug file, once looked for (`crate::debugfile`).
    pub(crate) separate: OnceLock<Option<Candidate>>,
}

/// A candidate debug file, mapped and parsed just enough to check it.
#[derive(Clone, Debug)]
pub(crate) struct Candidate {
    /// Its path.
    pub(crate) path: PathBuf,
    /// Its bytes, mapped for the rest of the run.
    pub(crate) data: &'static [u8],
}

impl std::fmt::Debug for ElfObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ElfObject")
            .field("path", &self.path)
            .field("kind", &self.kind)
            .field("loads", &self.loads)
            .finish_non_exhaustive()
    }
}

/// Maps a whole file for the rest of the run.
///
/// Objects are cached for the life of the process (a 16-rank job reads
/// `libmpi.so` once), so the mapping is never unmapped: it is leaked on
/// purpose and costs address space, not memory.
pub(crate) fn map_file(path: &Path) -> Result<&'static [u8], ElfError> {
    let io = |source| ElfError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(io)?;
    if file.metadata().map_err(io)?.len() == 0 {
        return Ok(&[]);
    }
    // SAFETY: the mapping is read-only and private. Another process could
    // still truncate the file underneath us (SIGBUS on access); that is the
    // same risk every debugger and the dynamic loader take with the objects
    // of a running program, and the files read here are installed libraries.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
    Ok(Box::leak(Box::new(map)))
}

/// Whether the file starts with the ELF magic (cheap: reads 4 bytes).
pub fn has_elf_magic(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .map(|()| magic == *b"\x7fELF")
        .unwrap_or(false)
}

fn program_headers<Elf: FileHeader>(data: &[u8]) -> object::Result<(Vec<LoadSegment>, Option<u64>)> {
    let header = Elf::parse(data)?;
    let endian = header.endian()?;
    let mut loads = Vec::new();
    let mut dynamic = None;
    for ph in header.program_headers(endian, data)? {
        let vaddr: u64 = ph.p_vaddr(endian).into();
        match ph.p_type(endian) {
            PT_LOAD => loads.push(LoadSegment {
                vaddr,
                memsz: ph.p_memsz(endian).into(),
                offset: ph.p_offset(endian).into(),
                filesz: ph.p_filesz(endian).into(),
                align: ph.p_align(endian).into(),
                exec: ph.p_flags(endian) & object::elf::PF_X != 0,
            }),
            PT_DYNAMIC => dynamic = Some(vaddr),
            _ => {}
        }
    }
    Ok((loads, dynamic))
}

impl ElfObject {
    /// Maps and parses an ELF file (symbols and headers; no DWARF yet).
    pub fn open(path: &Path) -> Result<ElfObject, ElfError> {
        if !has_elf_magic(path) {
            return Err(ElfError::NotElf(path.to_path_buf()));
        }
        let data = map_file(path)?;
        Self::parse(path, data)
    }

    /// Parses an ELF image already in memory.
    pub(crate) fn parse(path: &Path, data: &'static [u8]) -> Result<ElfObject, ElfError> {
        let perr = |source| ElfError::Parse {
            path: path.to_path_buf(),
            source,
        };
        let file = object::File::parse(data).map_err(perr)?;
        let is_64 = file.is_64();
        let (loads, dynamic) = if is_64 {
            program_headers::<object::elf::FileHeader64<object::Endianness>>(data)
        } else {
            program_headers::<object::elf::FileHeader32<object::Endianness>>(data)
        }
        .map_err(perr)?;
        let kind = match file.kind() {
            object::ObjectKind::Executable => ElfKind::Executable,
            object::ObjectKind::Dynamic => ElfKind::Dynamic,
            object::ObjectKind::Core => ElfKind::Core,
            _ => ElfKind::Other,
        };
        let links = DebugLinks {
            build_id: file.build_id().ok().flatten().map(<[u8]>::to_vec),
            debuglink: file
                .gnu_debuglink()
                .ok()
                .flatten()
                .map(|(name, crc)| (String::from_utf8_lossy(name).into_owned(), crc)),
            altlink: file
                .gnu_debugaltlink()
                .ok()
                .flatten()
                .map(|(p, id)| (String::from_utf8_lossy(p).into_owned(), id.to_vec())),
        };
        let has_dwarf = crate::dwarf::has_debug_info(&file);
        Ok(ElfObject {
            path: path.to_path_buf(),
            data,
            is_64,
            byte_order: if file.is_little_endian() {
                ByteOrder::Little
            } else {
                ByteOrder::Big
            },
            kind,
            entry: file.entry(),
            loads,
            dynamic,
            symbols: if kind == ElfKind::Core {
                Symbols::default()
            } else {
                Symbols::read(&file, data)
            },
            links,
            has_dwarf,
            debug: OnceLock::new(),
            debug_symtab: OnceLock::new(),
            separate: OnceLock::new(),
        })
    }

    /// The path the file was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The whole file.
    pub fn data(&self) -> &'static [u8] {
        self.data
    }

    /// ELFCLASS64?
    pub fn is_64(&self) -> bool {
        self.is_64
    }

    /// Byte order from `e_ident[EI_DATA]`.
    pub fn byte_order(&self) -> ByteOrder {
        self.byte_order
    }

    /// `e_type`.
    pub fn kind(&self) -> ElfKind {
        self.kind
    }

    /// `e_entry` (link-time).
    pub fn entry(&self) -> u64 {
        self.entry
    }

    /// The `PT_LOAD` headers.
    pub fn loads(&self) -> &[LoadSegment] {
        &self.loads
    }

    /// `p_vaddr` of `PT_DYNAMIC` (link-time).
    pub fn dynamic(&self) -> Option<u64> {
        self.dynamic
    }

    /// Build id and debug links.
    pub fn links(&self) -> &DebugLinks {
        &self.links
    }

    /// Whether the file itself carries `.debug_info`.
    pub fn has_dwarf(&self) -> bool {
        self.has_dwarf
    }

    /// The link-time `p_vaddr` that a mapping of file offset `offset`
    /// starts at (the page-aligned start of the `PT_LOAD` there).
    pub fn vaddr_of_file_offset(&self, offset: u64, page_size: u64) -> Option<u64> {
        let mask = !(page_size - 1);
        self.loads
            .iter()
            .find(|s| s.offset & mask == offset & mask)
            .map(|s| s.vaddr & mask)
    }
}

/// Reads `*const c_char` strings out of an ELF file's mapped image.
pub(crate) fn c_str(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}
