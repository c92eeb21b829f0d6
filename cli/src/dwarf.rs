//! The DWARF of one file: an index of named types, built a unit at a time
//! as lookups need it, and reading the few DIE attributes type questions
//! need.
//!
//! Only what the message queue libraries ask is answered: type names,
//! `sizeof`, member offsets. The index holds, per name, a complete
//! definition (else a declaration) found at the top level of a unit, the
//! first in the file of the units indexed so far, so a library with the
//! same struct in 500 compilation units costs one entry. A lookup answers
//! with a complete definition already there; else it first indexes the
//! units that refer to the name's string in `.debug_str`, in order, until
//! one defines it
//! (`DebugInfo::index_by_string`): a name from the headers every unit of
//! libmpi includes is in one of the first units, and one only the last
//! unit defines (MPICH's debugger support) costs one scan of the raw
//! section, not every unit before it. Names the scan cannot find (inline
//! strings, DWARF 5 string indices, a dwz file's strings) are looked for in
//! every unit in order. Within a unit only the top level is read:
//! `DW_AT_sibling` skips the bodies of functions. DIEs are addressed by
//! [`DieRef`](crate::dwarf::DieRef): an offset in `.debug_info` of this file
//! or of its supplementary (dwz) file.

use std::collections::HashMap;

// The type index's maps take every top-level name of a library's DWARF
// (libmpi: tens of thousands) on every new process: a fast hash, keys
// from a file, not from an adversary choosing collisions to slow a
// debugger down (a crafted file can only slow its own lookup).
use rustc_hash::FxHashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use gimli::{constants as dw, AttributeValue, DebugInfoOffset, DwTag, UnitOffset};
use object::{Object, ObjectSection};

/// The reader every DWARF section is read with.
pub(crate) type R = gimli::EndianSlice<'static, gimli::RunTimeEndian>;

/// A DIE: an offset in `.debug_info` of a file or of its supplementary file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DieRef {
    /// In the supplementary (`.gnu_debugaltlink`) file?
    pub sup: bool,
    /// Offset in that file's `.debug_info`.
    pub offset: u64,
}

/// Which C name space a type name lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Namespace {
    /// Typedef names and base types.
    Ordinary = 0,
    /// `struct X` (and C++ `class X`).
    Struct = 1,
    /// `union X`.
    Union = 2,
    /// `enum X`.
    Enum = 3,
}

impl Namespace {
    /// The namespace a DIE tag names a type in.
    pub fn of_tag(tag: DwTag) -> Option<Namespace> {
        match tag {
            dw::DW_TAG_typedef | dw::DW_TAG_base_type | dw::DW_TAG_unspecified_type => Some(Namespace::Ordinary),
            dw::DW_TAG_structure_type | dw::DW_TAG_class_type => Some(Namespace::Struct),
            dw::DW_TAG_union_type => Some(Namespace::Union),
            dw::DW_TAG_enumeration_type => Some(Namespace::Enum),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Slot {
    offset: u64,
    complete: bool,
}

/// Named types of one file, top level of every unit.
#[derive(Debug, Default)]
struct TypeIndex {
    names: [FxHashMap<Box<str>, Slot>; 4],
    /// DWARF 5 type units: signature -> offset of the type DIE.
    signatures: FxHashMap<u64, u64>,
    /// DIEs walked while building (for the numbers in `--verbose`).
    dies: u64,
}

impl TypeIndex {
    fn add(&mut self, ns: Namespace, name: &str, offset: u64, complete: bool) {
        let map = &mut self.names[ns as usize];
        match map.get_mut(name) {
            // A complete definition over a declaration; of two alike, the
            // first in the file (units are indexed out of order too).
            Some(slot) if (complete && !slot.complete) || (complete == slot.complete && offset < slot.offset) => {
                *slot = Slot { offset, complete }
            }
            Some(_) => {}
            None => {
                map.insert(name.into(), Slot { offset, complete });
            }
        }
    }
}

/// How often a byte occurs in `.debug_info`, for the search of a string's
/// offset ([`DebugInfo::index_by_string`]): the search tests two bytes of
/// the needle first, and the default ranks (for text and code) choose the
/// offset's high bytes, which in DWARF are mostly 0 to 15 like every
/// form's small constants and unit offsets (0 is 37 % of libmpi's bytes):
/// a scan of MPICH's 10 MB took 2.3 ms that way, 0.75 ms with the low
/// bytes.
struct DwarfBytes;

impl memchr::arch::all::packedpair::HeuristicFrequencyRank for DwarfBytes {
    fn rank(&self, byte: u8) -> u8 {
        match byte {
            0 => 255,
            1..=15 => 250 - byte,
            0xff => 200,
            _ => 40,
        }
    }
}

/// The index of one file and how far it got.
struct LazyIndex {
    index: TypeIndex,
    /// The units not indexed yet.
    headers: gimli::DebugInfoUnitHeadersIter<R>,
    /// Every unit is indexed (or a unit was bad: `error`).
    done: bool,
    /// Why indexing stopped early: bad DWARF in a unit.
    error: Option<DwarfError>,
    /// Units indexed so far.
    units: u64,
    /// Units indexed ahead of their turn ([`DebugInfo::index_by_string`]),
    /// by offset: skipped when their turn comes.
    ahead: rustc_hash::FxHashSet<u64>,
    /// Per name (its string in `.debug_str`), how far the search of the
    /// units that refer to it went: every such unit before this offset in
    /// `.debug_info` is indexed ([`DebugInfo::index_by_string`]).
    searched: FxHashMap<Box<str>, u64>,
    /// A name in `.debug_str` was referred to nowhere in `.debug_info`: the
    /// units name their strings some other way (string indices), so
    /// [`DebugInfo::index_by_string`] finds nothing in this file.
    no_string_refs: bool,
}

/// What [`DebugInfo::die`] reads of a DIE.
#[derive(Clone, Debug)]
pub struct Die {
    /// `DW_TAG_*`
    pub tag: DwTag,
    /// `DW_AT_name`
    pub name: Option<String>,
    /// `DW_AT_declaration`
    pub declaration: bool,
    /// `DW_AT_byte_size`
    pub byte_size: Option<u64>,
    /// `DW_AT_type`
    pub type_ref: Option<DieRef>,
    /// `DW_AT_data_member_location` (constant or a constant expression).
    pub member_location: Option<u64>,
    /// `DW_AT_data_bit_offset`
    pub data_bit_offset: Option<u64>,
    /// Element count of a `DW_TAG_subrange_type` (`DW_AT_count`, or the
    /// bounds), when constant.
    pub count: Option<u64>,
    /// The unit's address size.
    pub address_size: u8,
    /// The DIE has children.
    pub has_children: bool,
    /// `DW_AT_encoding` of a base type.
    pub encoding: Option<gimli::DwAte>,
    /// `DW_AT_abstract_origin`: the abstract instance of an inlined or
    /// out-of-line copy (its name and type are there).
    pub abstract_origin: Option<DieRef>,
}

/// The DWARF of one file (an object, its separate debug file, or a dwz
/// supplementary file).
pub struct DebugInfo {
    path: PathBuf,
    data: &'static [u8],
    dwarf: Arc<gimli::Dwarf<R>>,
    is_sup: bool,
    sup: Option<Arc<DebugInfo>>,
    unit_starts: OnceLock<Vec<u64>>,
    index: Mutex<LazyIndex>,
    units: Mutex<HashMap<u64, Arc<gimli::Unit<R>>>>,
}

impl std::fmt::Debug for DebugInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DebugInfo")
            .field("path", &self.path)
            .field("is_sup", &self.is_sup)
            .field("sup", &self.sup.as_ref().map(|s| s.path.clone()))
            .finish_non_exhaustive()
    }
}

/// Whether a parsed file carries DWARF (not just `SHT_NOBITS` stand-ins).
/// A type DIE that only renames or qualifies another (`typedef`, `const`,
/// `volatile`, ...): its `DW_AT_type` is the type itself.
pub(crate) fn is_type_alias(tag: DwTag) -> bool {
    matches!(
        tag,
        dw::DW_TAG_typedef
            | dw::DW_TAG_const_type
            | dw::DW_TAG_volatile_type
            | dw::DW_TAG_restrict_type
            | dw::DW_TAG_atomic_type
            | dw::DW_TAG_immutable_type
            | dw::DW_TAG_packed_type
            | dw::DW_TAG_shared_type
    )
}

pub(crate) fn has_debug_info(file: &object::File<'_>) -> bool {
    file.section_by_name(".debug_info")
        .is_some_and(|s| s.kind() != object::SectionKind::UninitializedData && s.size() > 0)
}

/// Why the DWARF of a file could not be read.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DwarfError {
    /// The file is not an object file `object` can parse.
    #[error("{}: {source}", path.display())]
    NotAnObject {
        /// The file.
        path: PathBuf,
        /// What `object` says.
        source: object::Error,
    },
    /// A section could not be read (or decompressed).
    #[error("{}: section {section}: {source}", path.display())]
    Section {
        /// The file.
        path: PathBuf,
        /// The section's name.
        section: &'static str,
        /// What `object` says.
        source: object::Error,
    },
    /// A unit's DWARF is malformed.
    #[error("{}: bad DWARF: {source}", path.display())]
    Bad {
        /// The file.
        path: PathBuf,
        /// What gimli says.
        source: gimli::Error,
    },
    /// The supplementary (dwz) file a debug file names is not there.
    #[error("{}: supplementary debug file {alt} (build id {build_id}) not found", debug_file.display())]
    SupplementaryMissing {
        /// The debug file that names it (`.gnu_debugaltlink`).
        debug_file: PathBuf,
        /// The name it gives.
        alt: String,
        /// The build id it gives, in hex.
        build_id: String,
    },
}

impl From<DwarfError> for mpiq::TargetError {
    fn from(e: DwarfError) -> Self {
        mpiq::TargetError::Host(e.to_string())
    }
}

fn load_sections(path: &Path, file: &object::File<'static>) -> Result<gimli::Dwarf<R>, DwarfError> {
    let endian = if file.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    gimli::Dwarf::load(|id: gimli::SectionId| -> Result<R, DwarfError> {
        let data: &'static [u8] = match file.section_by_name(id.name()) {
            Some(section) if section.kind() != object::SectionKind::UninitializedData => {
                match section.uncompressed_data() {
                    Ok(std::borrow::Cow::Borrowed(b)) => b,
                    // Decompressed sections live as long as the cached file.
                    Ok(std::borrow::Cow::Owned(v)) => Vec::leak(v),
                    Err(source) => {
                        return Err(DwarfError::Section {
                            path: path.to_path_buf(),
                            section: id.name(),
                            source,
                        })
                    }
                }
            }
            _ => &[],
        };
        Ok(gimli::EndianSlice::new(data, endian))
    })
}

impl DebugInfo {
    /// Reads the DWARF sections of a file (decompressing compressed ones).
    pub(crate) fn load(
        path: &Path,
        data: &'static [u8],
        is_sup: bool,
        sup: Option<Arc<DebugInfo>>,
    ) -> Result<DebugInfo, DwarfError> {
        let not_an_object = |path: &Path| {
            let path = path.to_path_buf();
            move |source| DwarfError::NotAnObject { path, source }
        };
        let file = object::File::parse(data).map_err(not_an_object(path))?;
        let mut dwarf = load_sections(path, &file)?;
        if let Some(sup) = &sup {
            // gimli resolves DW_FORM_GNU_strp_alt / strp_sup through its own
            // copy of the supplementary sections (same bytes, no copy).
            let sup_file = object::File::parse(sup.data).map_err(not_an_object(&sup.path))?;
            dwarf.set_sup(load_sections(&sup.path, &sup_file)?);
        }
        if is_sup {
            dwarf.file_type = gimli::DwarfFileType::Main;
        }
        let headers = dwarf.units();
        Ok(DebugInfo {
            path: path.to_path_buf(),
            data,
            dwarf: Arc::new(dwarf),
            is_sup,
            sup,
            unit_starts: OnceLock::new(),
            index: Mutex::new(LazyIndex {
                index: TypeIndex::default(),
                headers,
                done: false,
                error: None,
                units: 0,
                ahead: rustc_hash::FxHashSet::default(),
                no_string_refs: false,
                searched: FxHashMap::default(),
            }),
            units: Mutex::new(HashMap::new()),
        })
    }

    /// The file the DWARF was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The bytes of the file the DWARF was read from.
    pub(crate) fn data(&self) -> &'static [u8] {
        self.data
    }

    /// The sections, shared with the symboliser (`crate::unwind`).
    pub(crate) fn dwarf(&self) -> Arc<gimli::Dwarf<R>> {
        Arc::clone(&self.dwarf)
    }

    /// The supplementary file, if any.
    pub fn sup(&self) -> Option<&Arc<DebugInfo>> {
        self.sup.as_ref()
    }

    /// The file a [`DieRef`] points into.
    fn file_of(&self, r: DieRef) -> Result<&DebugInfo, gimli::Error> {
        if r.sup == self.is_sup {
            Ok(self)
        } else if let Some(sup) = &self.sup {
            Ok(sup)
        } else {
            Err(gimli::Error::NoEntryAtGivenOffset)
        }
    }

    /// The index, extended a unit at a time until `enough` says it holds
    /// what the caller needs or every unit is in. An error only if a bad
    /// unit stopped it before that.
    fn index_in_order_until(
        &self,
        enough: impl Fn(&LazyIndex) -> bool,
    ) -> Result<MutexGuard<'_, LazyIndex>, DwarfError> {
        // A panic while indexing leaves a consistent (shorter) index.
        let mut lazy = self.index.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        while !lazy.done && !enough(&lazy) {
            let lazy = &mut *lazy;
            match lazy.headers.next() {
                Ok(Some(header))
                    if header
                        .offset()
                        .as_debug_info_offset()
                        .is_some_and(|o| lazy.ahead.contains(&(o.0 as u64))) => {}
                Ok(Some(header)) => {
                    lazy.units += 1;
                    if let Err(source) = self.index_unit(header, &mut lazy.index) {
                        lazy.error = Some(self.bad(source));
                        lazy.done = true;
                    }
                }
                Ok(None) => lazy.done = true,
                Err(source) => {
                    lazy.error = Some(self.bad(source));
                    lazy.done = true;
                }
            }
        }
        match &lazy.error {
            Some(e) if !enough(&lazy) => Err(e.clone()),
            _ => Ok(lazy),
        }
    }

    /// Malformed DWARF in this file.
    fn bad(&self, source: gimli::Error) -> DwarfError {
        DwarfError::Bad {
            path: self.path.clone(),
            source,
        }
    }

    /// Indexes every unit now (otherwise lookups do, as far as they need).
    pub fn prepare(&self) -> Result<(), DwarfError> {
        drop(self.index_in_order_until(|_| false)?);
        if let Some(sup) = &self.sup {
            sup.prepare()?;
        }
        Ok(())
    }

    /// Number of DIEs and units indexed so far.
    pub fn indexed(&self) -> (u64, u64) {
        let lazy = self.index.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        (lazy.index.dies, lazy.units)
    }

    /// Adds the top-level named types of one unit to `index`.
    fn index_unit(&self, header: gimli::UnitHeader<R>, index: &mut TypeIndex) -> gimli::Result<()> {
        let Some(unit_start) = header.offset().as_debug_info_offset() else {
            return Ok(());
        };
        let unit_start = unit_start.0 as u64;
        if let gimli::UnitType::Type {
            type_signature,
            type_offset,
        }
        | gimli::UnitType::SplitType {
            type_signature,
            type_offset,
        } = header.type_()
        {
            index
                .signatures
                .insert(type_signature.0, unit_start + type_offset.0 as u64);
        }
        let unit = self.dwarf.unit(header)?;
        let mut tree = unit.entries_tree(None)?;
        let root = tree.root()?;
        // Each step to the next child jumps over the previous one's
        // children (DW_AT_sibling) when the producer recorded where.
        let mut children = root.children();
        while let Some(child) = children.next()? {
            let entry = child.entry();
            index.dies += 1;
            let Some(ns) = Namespace::of_tag(entry.tag()) else {
                continue;
            };
            // One pass over the attributes (a lookup by name parses them
            // up to the one asked for, and DW_AT_declaration is mostly
            // absent: every attribute, twice).
            let (mut name, mut declaration) = (None, false);
            let mut attrs = entry.attrs();
            while let Some(attr) = attrs.next()? {
                match attr.name() {
                    dw::DW_AT_name => name = Some(attr.value()),
                    dw::DW_AT_declaration => declaration = matches!(attr.value(), AttributeValue::Flag(true)),
                    _ => {}
                }
            }
            let Some(name) = name else {
                continue;
            };
            let name = self.dwarf.attr_string(&unit, name)?;
            let Ok(name) = std::str::from_utf8(name.slice()) else {
                continue;
            };
            index.add(ns, name, unit_start + entry.offset().0 as u64, !declaration);
        }
        Ok(())
    }

    /// Indexes, ahead of their turn, the units that may define `name`:
    /// those holding a reference (`DW_FORM_strp`) to `name` in
    /// `.debug_str`, in order, until one defines it in `ns` (completely).
    /// True if that answers the lookup: a complete definition is then in
    /// the index (the first of those indexed, which for a type the library
    /// defines once, as an MPI library's are, is the one every unit has),
    /// or none is in any unit. False if the name is not referred to that
    /// way: the caller indexes the units in order.
    ///
    /// A name from the headers every unit includes is found in one of the
    /// first units (Open MPI's, the search stopping there), and one only
    /// the last units define (MPICH's `MPIR_Sendq`, in the debugger
    /// support at the end of libmpi's 862 units) after one search of the
    /// raw section (10 MB, 1 to 2 ms), not after indexing every unit before
    /// it (60 ms per new process; 7 ms for the 64 units this lookup indexed
    /// in order before it searched).
    ///
    /// A candidate is a unit with the string's offset anywhere in its
    /// bytes: a false one costs its indexing, never a wrong answer (the
    /// index reads the names from the DIEs). Names in other forms (inline
    /// strings, which gcc uses for names of 4 bytes or less, DWARF 5's
    /// string indices, a dwz file's strings) give no candidates.
    fn index_by_string(&self, lazy: &mut LazyIndex, ns: Namespace, name: &str) -> bool {
        if lazy.done {
            return true;
        }
        if name.len() <= 4 || lazy.no_string_refs {
            return false;
        }
        use gimli::{Reader, Section};
        let strings = self.dwarf.debug_str.reader().slice();
        let info = self.dwarf.debug_info.reader().slice();
        let big = matches!(self.dwarf.debug_info.reader().endian(), gimli::RunTimeEndian::Big);
        let mut wanted = Vec::with_capacity(name.len() + 1);
        wanted.extend_from_slice(name.as_bytes());
        wanted.push(0);
        let places: Vec<u32> = memchr::memmem::find_iter(strings, &wanted)
            .map_while(|at| u32::try_from(at).ok())
            .collect();
        if places.is_empty() {
            return false;
        }
        let complete = |lazy: &LazyIndex| lazy.index.names[ns as usize].get(name).is_some_and(|s| s.complete);
        if complete(lazy) {
            return true;
        }
        // With the string in several places (not merged), every unit that
        // refers to any of them; with one, up to the first that defines it.
        let stop_early = places.len() == 1;
        let mut referred = false;
        for offset in places {
            let bytes = if big {
                offset.to_be_bytes()
            } else {
                offset.to_le_bytes()
            };
            let finder = memchr::memmem::FinderBuilder::new().build_forward_with_ranker(DwarfBytes, &bytes);
            let starts = self.unit_starts();
            let mut from = if stop_early {
                lazy.searched.get(name).map_or(0, |&at| at as usize)
            } else {
                0
            };
            referred |= from > 0;
            loop {
                let Some(p) = info.get(from..).and_then(|rest| finder.find(rest)).map(|p| from + p) else {
                    from = info.len();
                    break;
                };
                referred = true;
                let Some(i) = starts.partition_point(|&s| s <= p as u64).checked_sub(1) else {
                    from = p + 1;
                    continue;
                };
                let start = starts[i];
                // The next candidate is after this unit: it is indexed now.
                from = starts.get(i + 1).map_or(info.len(), |&next| next as usize).max(p + 1);
                if lazy.ahead.contains(&start) || self.indexed_in_order(lazy, start) {
                    continue;
                }
                let Ok(header) = self
                    .dwarf
                    .debug_info
                    .header_from_offset(DebugInfoOffset(start as usize))
                else {
                    continue;
                };
                lazy.ahead.insert(start);
                lazy.units += 1;
                // A bad unit is left to its turn, which reports it.
                if self.index_unit(header, &mut lazy.index).is_err() {
                    lazy.ahead.remove(&start);
                    lazy.units -= 1;
                }
                // Not a search on to the next reference (which may be far).
                if stop_early && complete(lazy) {
                    break;
                }
            }
            if stop_early {
                lazy.searched.insert(name.into(), from as u64);
            }
        }
        if !referred {
            lazy.no_string_refs = true;
        }
        referred
    }

    /// Whether the in-order indexing has passed the unit at `start`.
    fn indexed_in_order(&self, lazy: &LazyIndex, start: u64) -> bool {
        match lazy.headers.clone().next() {
            Ok(Some(next)) => next.offset().as_debug_info_offset().is_some_and(|o| start < o.0 as u64),
            // Done, or a bad header: nothing is left to index in order.
            _ => true,
        }
    }

    /// The offset of every unit in `.debug_info`, in order.
    fn unit_starts(&self) -> &[u64] {
        self.unit_starts.get_or_init(|| {
            let mut v = Vec::new();
            let mut headers = self.dwarf.units();
            while let Ok(Some(h)) = headers.next() {
                if let Some(o) = h.offset().as_debug_info_offset() {
                    v.push(o.0 as u64);
                }
            }
            v
        })
    }

    /// A named type in this file or its supplementary file: the complete
    /// definition if there is one, else a declaration (`complete == false`).
    pub fn lookup(&self, ns: Namespace, name: &str) -> Result<Option<(DieRef, bool)>, DwarfError> {
        let own = {
            let mut lazy = self.index.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let answered = self.index_by_string(&mut lazy, ns, name);
            drop(lazy);
            // Else every unit in order, until one defines it.
            let slot = |lazy: &LazyIndex| lazy.index.names[ns as usize].get(name).copied();
            let lazy = if answered {
                self.index.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
            } else {
                self.index_in_order_until(|lazy| slot(lazy).is_some_and(|s| s.complete))?
            };
            slot(&lazy).map(|s| {
                (
                    DieRef {
                        sup: self.is_sup,
                        offset: s.offset,
                    },
                    s.complete,
                )
            })
        };
        if let Some((_, true)) = own {
            return Ok(own);
        }
        if let Some(sup) = &self.sup {
            if let Some(found @ (_, true)) = sup.lookup(ns, name)? {
                return Ok(Some(found));
            }
        }
        Ok(own)
    }

    /// The type DIE of a DWARF 5 type unit, by signature.
    fn signature(&self, sig: u64) -> Option<u64> {
        let lazy = self
            .index_in_order_until(|lazy| lazy.index.signatures.contains_key(&sig))
            .ok()?;
        lazy.index.signatures.get(&sig).copied()
    }

    fn unit_containing(&self, offset: u64) -> gimli::Result<Arc<gimli::Unit<R>>> {
        let starts = self.unit_starts();
        let i = match starts.binary_search(&offset) {
            Ok(i) => i,
            Err(0) => return Err(gimli::Error::NoEntryAtGivenOffset),
            Err(i) => i - 1,
        };
        let start = starts[i];
        let mut cache = self.units.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(u) = cache.get(&start) {
            return Ok(u.clone());
        }
        let header = self
            .dwarf
            .debug_info
            .header_from_offset(DebugInfoOffset(start as usize))?;
        let unit = Arc::new(self.dwarf.unit(header)?);
        cache.insert(start, unit.clone());
        Ok(unit)
    }

    pub(crate) fn to_ref(&self, unit: &gimli::Unit<R>, value: AttributeValue<R>) -> Option<DieRef> {
        let base = unit.header.offset().as_debug_info_offset()?.0 as u64;
        match value {
            AttributeValue::UnitRef(o) => Some(DieRef {
                sup: self.is_sup,
                offset: base + o.0 as u64,
            }),
            AttributeValue::DebugInfoRef(o) => Some(DieRef {
                sup: self.is_sup,
                offset: o.0 as u64,
            }),
            AttributeValue::DebugInfoRefSup(o) => Some(DieRef {
                sup: true,
                offset: o.0 as u64,
            }),
            AttributeValue::DebugTypesRef(sig) => self.signature(sig.0).map(|offset| DieRef {
                sup: self.is_sup,
                offset,
            }),
            _ => None,
        }
    }

    fn read_die(
        &self,
        unit: &gimli::Unit<R>,
        entry: &gimli::DebuggingInformationEntry<'_, '_, R>,
    ) -> gimli::Result<Die> {
        let mut die = Die {
            tag: entry.tag(),
            name: None,
            declaration: false,
            byte_size: None,
            type_ref: None,
            member_location: None,
            data_bit_offset: None,
            count: None,
            address_size: unit.encoding().address_size,
            has_children: entry.has_children(),
            encoding: None,
            abstract_origin: None,
        };
        let mut lower = None;
        let mut upper = None;
        let mut attrs = entry.attrs();
        while let Some(attr) = attrs.next()? {
            match attr.name() {
                dw::DW_AT_name => {
                    if let Ok(s) = self.dwarf.attr_string(unit, attr.value()) {
                        die.name = Some(String::from_utf8_lossy(s.slice()).into_owned());
                    }
                }
                dw::DW_AT_declaration => die.declaration = matches!(attr.value(), AttributeValue::Flag(true)),
                dw::DW_AT_byte_size => die.byte_size = attr.udata_value(),
                dw::DW_AT_type => die.type_ref = self.to_ref(unit, attr.value()),
                dw::DW_AT_data_member_location => die.member_location = member_location(&attr, unit.encoding()),
                dw::DW_AT_data_bit_offset => die.data_bit_offset = attr.udata_value(),
                dw::DW_AT_count => die.count = attr.udata_value(),
                dw::DW_AT_encoding => {
                    if let AttributeValue::Encoding(e) = attr.value() {
                        die.encoding = Some(e);
                    }
                }
                dw::DW_AT_abstract_origin => die.abstract_origin = self.to_ref(unit, attr.value()),
                dw::DW_AT_lower_bound => lower = attr.udata_value(),
                dw::DW_AT_upper_bound => upper = attr.udata_value(),
                _ => {}
            }
        }
        if die.count.is_none() {
            if let Some(upper) = upper {
                // C and C++ arrays start at 0 unless told otherwise.
                let lower = lower.unwrap_or(0);
                die.count = Some((upper + 1).saturating_sub(lower));
            }
        }
        Ok(die)
    }

    /// Reads a DIE.
    pub fn die(&self, r: DieRef) -> gimli::Result<Die> {
        let file = self.file_of(r)?;
        let unit = file.unit_containing(r.offset)?;
        let offset = file.unit_offset(&unit, r.offset)?;
        let entry = unit.entry(offset)?;
        file.read_die(&unit, &entry)
    }

    /// Reads the children of a DIE (members, subranges, ...).
    pub fn children(&self, r: DieRef) -> gimli::Result<Vec<Die>> {
        let file = self.file_of(r)?;
        let unit = file.unit_containing(r.offset)?;
        let offset = file.unit_offset(&unit, r.offset)?;
        let mut tree = unit.entries_tree(Some(offset))?;
        let root = tree.root()?;
        let mut out = Vec::new();
        let mut children = root.children();
        while let Some(child) = children.next()? {
            out.push(file.read_die(&unit, child.entry())?);
        }
        Ok(out)
    }

    fn unit_offset(&self, unit: &gimli::Unit<R>, offset: u64) -> gimli::Result<UnitOffset> {
        DebugInfoOffset(offset as usize)
            .to_unit_offset(&unit.header)
            .ok_or(gimli::Error::NoEntryAtGivenOffset)
    }
}

/// `DW_AT_data_member_location`: a constant, or (DWARF 2/3) an expression
/// that is `DW_OP_plus_uconst N` or a constant push.
fn member_location(attr: &gimli::Attribute<R>, encoding: gimli::Encoding) -> Option<u64> {
    match attr.raw_value() {
        AttributeValue::Data1(v) => return Some(v.into()),
        AttributeValue::Data2(v) => return Some(v.into()),
        AttributeValue::Data4(v) => return Some(v.into()),
        AttributeValue::Data8(v) => return Some(v),
        AttributeValue::Udata(v) => return Some(v),
        AttributeValue::Sdata(v) => return u64::try_from(v).ok(),
        AttributeValue::Exprloc(_) | AttributeValue::Block(_) => {}
        _ => return None,
    }
    let bytes = match attr.raw_value() {
        AttributeValue::Exprloc(e) => e.0,
        AttributeValue::Block(b) => b,
        _ => return None,
    };
    let mut ops = gimli::Expression(bytes).operations(encoding);
    let mut value = None;
    while let Ok(Some(op)) = ops.next() {
        value = match op {
            gimli::Operation::PlusConstant { value: v } => Some(value.unwrap_or(0) + v),
            gimli::Operation::UnsignedConstant { value: v } => Some(v),
            gimli::Operation::SignedConstant { value: v } => u64::try_from(v).ok(),
            _ => return None,
        };
    }
    value
}
