//! The DWARF of one file: a lazily built index of named types, and reading
//! the few DIE attributes type questions need.
//!
//! Only what the message queue libraries ask is answered: type names,
//! `sizeof`, member offsets. The index holds, per name, the first complete
//! definition (else the first declaration) found at the top level of any
//! unit, so a library with the same struct in 500 compilation units costs
//! one entry. DIEs are addressed by [`DieRef`](crate::dwarf::DieRef): an offset in `.debug_info`
//! of this file or of its supplementary (dwz) file.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use gimli::{constants as dw, AttributeValue, DebugInfoOffset, DwTag, UnitOffset};
use object::{Object, ObjectSection};

use crate::elf::Symbols;

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
    names: [HashMap<Box<str>, Slot>; 4],
    /// DWARF 5 type units: signature -> offset of the type DIE.
    signatures: HashMap<u64, u64>,
    /// DIEs walked while building (for the numbers in `--verbose`).
    dies: u64,
}

impl TypeIndex {
    fn add(&mut self, ns: Namespace, name: &str, offset: u64, complete: bool) {
        let map = &mut self.names[ns as usize];
        match map.get_mut(name) {
            Some(slot) if !slot.complete && complete => *slot = Slot { offset, complete },
            Some(_) => {}
            None => {
                map.insert(name.into(), Slot { offset, complete });
            }
        }
    }
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
}

/// The DWARF of one file (an object, its separate debug file, or a dwz
/// supplementary file).
pub struct DebugInfo {
    path: PathBuf,
    data: &'static [u8],
    dwarf: gimli::Dwarf<R>,
    is_sup: bool,
    sup: Option<Arc<DebugInfo>>,
    symbols: Symbols,
    unit_starts: OnceLock<Vec<u64>>,
    index: OnceLock<Result<TypeIndex, String>>,
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
pub(crate) fn has_debug_info(file: &object::File<'_>) -> bool {
    file.section_by_name(".debug_info")
        .is_some_and(|s| s.kind() != object::SectionKind::UninitializedData && s.size() > 0)
}

fn load_sections(file: &object::File<'static>) -> Result<gimli::Dwarf<R>, String> {
    let endian = if file.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    gimli::Dwarf::load(|id: gimli::SectionId| -> Result<R, String> {
        let data: &'static [u8] = match file.section_by_name(id.name()) {
            Some(section) if section.kind() != object::SectionKind::UninitializedData => {
                match section.uncompressed_data() {
                    Ok(std::borrow::Cow::Borrowed(b)) => b,
                    // Decompressed sections live as long as the cached file.
                    Ok(std::borrow::Cow::Owned(v)) => Vec::leak(v),
                    Err(e) => return Err(format!("section {}: {e}", id.name())),
                }
            }
            _ => &[],
        };
        Ok(gimli::EndianSlice::new(data, endian))
    })
}

impl DebugInfo {
    /// Reads the DWARF sections (and the full symbol table) of a file.
    pub(crate) fn load(
        path: &Path,
        data: &'static [u8],
        is_sup: bool,
        sup: Option<Arc<DebugInfo>>,
    ) -> Result<DebugInfo, String> {
        let file = object::File::parse(data).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut dwarf = load_sections(&file).map_err(|e| format!("{}: {e}", path.display()))?;
        if let Some(sup) = &sup {
            // gimli resolves DW_FORM_GNU_strp_alt / strp_sup through its own
            // copy of the supplementary sections (same bytes, no copy).
            let sup_file = object::File::parse(sup.data).map_err(|e| format!("{}: {e}", sup.path.display()))?;
            dwarf.set_sup(load_sections(&sup_file)?);
        }
        if is_sup {
            dwarf.file_type = gimli::DwarfFileType::Main;
        }
        Ok(DebugInfo {
            path: path.to_path_buf(),
            data,
            symbols: Symbols::read(&file),
            dwarf,
            is_sup,
            sup,
            unit_starts: OnceLock::new(),
            index: OnceLock::new(),
            units: Mutex::new(HashMap::new()),
        })
    }

    /// The file the DWARF was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The supplementary file, if any.
    pub fn sup(&self) -> Option<&Arc<DebugInfo>> {
        self.sup.as_ref()
    }

    /// The symbol table of the debug file.
    pub(crate) fn symbols(&self) -> &Symbols {
        &self.symbols
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

    fn index(&self) -> Result<&TypeIndex, String> {
        self.index
            .get_or_init(|| {
                self.build_index()
                    .map_err(|e| format!("{}: bad DWARF: {e}", self.path.display()))
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Builds the index now (otherwise the first lookup does).
    pub fn prepare(&self) -> Result<(), String> {
        self.index()?;
        if let Some(sup) = &self.sup {
            sup.index()?;
        }
        Ok(())
    }

    /// Number of DIEs walked to build the index (0 before).
    pub fn indexed_dies(&self) -> u64 {
        self.index.get().and_then(|r| r.as_ref().ok()).map_or(0, |i| i.dies)
    }

    fn build_index(&self) -> gimli::Result<TypeIndex> {
        let mut index = TypeIndex::default();
        let mut headers = self.dwarf.units();
        while let Some(header) = headers.next()? {
            let Some(unit_start) = header.offset().as_debug_info_offset() else {
                continue;
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
            let mut entries = unit.entries_raw(None)?;
            while !entries.is_empty() {
                let depth = entries.next_depth();
                let offset = entries.next_offset();
                let Some(abbrev) = entries.read_abbreviation()? else {
                    continue;
                };
                index.dies += 1;
                let ns = if depth == 1 {
                    Namespace::of_tag(abbrev.tag())
                } else {
                    None
                };
                let Some(ns) = ns else {
                    entries.skip_attributes(abbrev.attributes())?;
                    continue;
                };
                let mut name = None;
                let mut declaration = false;
                for spec in abbrev.attributes() {
                    let attr = entries.read_attribute(*spec)?;
                    match attr.name() {
                        dw::DW_AT_name => name = Some(attr.value()),
                        dw::DW_AT_declaration => declaration = matches!(attr.value(), AttributeValue::Flag(true)),
                        _ => {}
                    }
                }
                let Some(name) = name else { continue };
                let name = self.dwarf.attr_string(&unit, name)?;
                let Ok(name) = std::str::from_utf8(name.slice()) else {
                    continue;
                };
                index.add(ns, name, unit_start + offset.0 as u64, !declaration);
            }
        }
        Ok(index)
    }

    /// A named type in this file or its supplementary file: the complete
    /// definition if there is one, else a declaration (`complete == false`).
    pub fn lookup(&self, ns: Namespace, name: &str) -> Result<Option<(DieRef, bool)>, String> {
        let own = self.index()?.names[ns as usize].get(name).map(|s| {
            (
                DieRef {
                    sup: self.is_sup,
                    offset: s.offset,
                },
                s.complete,
            )
        });
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

    fn unit_containing(&self, offset: u64) -> gimli::Result<Arc<gimli::Unit<R>>> {
        let starts = self.unit_starts.get_or_init(|| {
            let mut v = Vec::new();
            let mut headers = self.dwarf.units();
            while let Ok(Some(h)) = headers.next() {
                if let Some(o) = h.offset().as_debug_info_offset() {
                    v.push(o.0 as u64);
                }
            }
            v
        });
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

    fn to_ref(&self, unit: &gimli::Unit<R>, value: AttributeValue<R>) -> Option<DieRef> {
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
            AttributeValue::DebugTypesRef(sig) => {
                let index = self.index().ok()?;
                index.signatures.get(&sig.0).map(|&offset| DieRef {
                    sup: self.is_sup,
                    offset,
                })
            }
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
