//! A process image: the ELF objects a process (or a core file) has mapped,
//! with their load biases, in the order symbols are searched (main
//! executable first, then the dynamic linker's load order), and the symbol
//! and type questions of [`mpiq::Target`] answered over all of them.

use std::sync::Arc;

use gimli::constants as dw;
use mpiq::{ByteOrder, TargetError, TypeId, TypeSizes};

use crate::dwarf::{DebugInfo, Die, DieRef, Namespace};
use crate::elf::ElfObject;

/// Reads target memory (a live process or a core file).
pub trait Memory {
    /// Fills `buf` from `addr`, or fails as a whole.
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError>;
}

/// One object mapped into the process.
#[derive(Clone, Debug)]
pub struct MappedObject {
    /// The parsed file (shared through [`crate::cache`]).
    pub file: Arc<ElfObject>,
    /// Runtime address minus link-time address.
    pub bias: u64,
    /// The name the process knows it by (`/proc/PID/maps`, `NT_FILE`).
    pub name: String,
    /// Lowest mapped address (for ordering the unknown rest).
    pub start: u64,
}

/// The objects of one process, ready for lookups.
#[derive(Debug)]
pub struct ProcessImage {
    objects: Vec<MappedObject>,
    has_exe: bool,
}

/// Longest typedef / qualifier chain followed before giving up (a cycle).
const MAX_CHAIN: usize = 64;

impl ProcessImage {
    /// Orders the objects: the executable first, then the dynamic linker's
    /// `link_map` list (load order; read through `mem` from `DT_DEBUG`),
    /// then whatever else is mapped, by address.
    pub fn new(mut objects: Vec<MappedObject>, exe: Option<usize>, mem: &dyn Memory) -> Self {
        objects.sort_by_key(|o| o.start);
        let exe = exe.map(|i| i.min(objects.len().saturating_sub(1)));
        let mut ordered = Vec::with_capacity(objects.len());
        if let Some(i) = exe.filter(|_| !objects.is_empty()) {
            let e = objects.remove(i);
            let chain = match e.file.dynamic() {
                Some(d) => link_map_order(d.wrapping_add(e.bias), e.file.is_64(), e.file.byte_order(), mem),
                None => Vec::new(),
            };
            ordered.push(e);
            for ld in chain {
                if let Some(pos) = objects
                    .iter()
                    .position(|o| o.file.dynamic().map(|d| d.wrapping_add(o.bias)) == Some(ld))
                {
                    ordered.push(objects.remove(pos));
                }
            }
        }
        ordered.extend(objects);
        ProcessImage {
            objects: ordered,
            has_exe: exe.is_some(),
        }
    }

    /// The objects in search order.
    pub fn objects(&self) -> &[MappedObject] {
        &self.objects
    }

    /// The main executable, if known.
    pub fn executable(&self) -> Option<&MappedObject> {
        self.objects.first().filter(|_| self.has_exe)
    }

    fn class_source(&self) -> Option<&ElfObject> {
        self.executable().or(self.objects.first()).map(|o| o.file.as_ref())
    }

    /// Sizes of the C types, from the executable's ELF class.
    pub fn type_sizes(&self) -> TypeSizes {
        match self.class_source() {
            Some(f) if !f.is_64() => TypeSizes {
                short: 2,
                int: 4,
                long: 4,
                long_long: 8,
                pointer: 4,
            },
            _ => TypeSizes::LP64,
        }
    }

    /// Byte order from the executable's ELF header.
    pub fn byte_order(&self) -> ByteOrder {
        self.class_source().map_or(ByteOrder::host(), |f| f.byte_order())
    }

    /// Runtime address of a data symbol, first object that defines it.
    pub fn find_symbol(&self, name: &str) -> Option<u64> {
        self.find_symbol_sized(name).map(|(a, _)| a)
    }

    /// Runtime address and `st_size` of a data symbol.
    pub fn find_symbol_sized(&self, name: &str) -> Option<(u64, u64)> {
        self.objects
            .iter()
            .find_map(|o| o.file.data_symbol(name).map(|(a, size)| (a.wrapping_add(o.bias), size)))
    }

    /// Runtime address of a function, first object that defines it.
    pub fn find_function(&self, name: &str) -> Option<u64> {
        self.objects
            .iter()
            .find_map(|o| o.file.function_symbol(name).map(|a| a.wrapping_add(o.bias)))
    }

    fn encode(obj: usize, r: DieRef) -> TypeId {
        TypeId(((obj as u64) << 48) | (u64::from(r.sup) << 47) | (r.offset & ((1 << 47) - 1)))
    }

    fn decode(id: TypeId) -> (usize, DieRef) {
        (
            (id.0 >> 48) as usize,
            DieRef {
                sup: (id.0 >> 47) & 1 == 1,
                offset: id.0 & ((1 << 47) - 1),
            },
        )
    }

    fn debug_of(&self, obj: usize) -> Result<Arc<DebugInfo>, TargetError> {
        let o = self
            .objects
            .get(obj)
            .ok_or_else(|| TargetError::Host(format!("bad type handle (object {obj})")))?;
        match o.file.debug_info() {
            Ok(Some(d)) => Ok(d),
            Ok(None) => Err(TargetError::Host(format!("{}: no debug info", o.name))),
            Err(e) => Err(e.into()),
        }
    }

    /// Looks a name up in the given namespaces of every object: the first
    /// complete definition wins, else the first declaration.
    fn lookup(&self, namespaces: &[Namespace], name: &str) -> Result<Option<(usize, DieRef)>, TargetError> {
        let mut declaration = None;
        let mut errors = Vec::new();
        for (i, o) in self.objects.iter().enumerate() {
            let dbg = match o.file.debug_info() {
                Ok(Some(d)) => d,
                Ok(None) => continue,
                Err(e) => {
                    errors.push(e);
                    continue;
                }
            };
            for &ns in namespaces {
                match dbg.lookup(ns, name) {
                    Ok(Some((r, true))) => return Ok(Some((i, r))),
                    Ok(Some((r, false))) => {
                        declaration.get_or_insert((i, r));
                    }
                    Ok(None) => {}
                    Err(e) => errors.push(e),
                }
            }
        }
        if declaration.is_none() && !errors.is_empty() {
            let words: Vec<String> = errors.iter().map(ToString::to_string).collect();
            return Err(TargetError::Host(words.join("; ")));
        }
        Ok(declaration)
    }

    /// A type by name: `X` (a typedef, base type or tag), `struct X`,
    /// `union X`, `enum X`.
    pub fn find_type(&self, name: &str) -> Result<Option<TypeId>, TargetError> {
        let (namespaces, bare) = parse_type_name(name);
        if bare.is_empty() {
            return Ok(None);
        }
        if let Some((o, r)) = self.lookup(namespaces, bare)? {
            return Ok(Some(Self::encode(o, r)));
        }
        // `long` is `long int` in gcc's DWARF, `long` in clang's.
        for alias in base_type_spellings(bare) {
            if let Some((o, r)) = self.lookup(&[Namespace::Ordinary], &alias)? {
                return Ok(Some(Self::encode(o, r)));
            }
        }
        Ok(None)
    }

    fn die(&self, obj: usize, r: DieRef) -> Result<Die, TargetError> {
        self.debug_of(obj)?
            .die(r)
            .map_err(|e| TargetError::Host(format!("{}: bad DWARF at {:#x}: {e}", self.objects[obj].name, r.offset)))
    }

    fn children(&self, obj: usize, r: DieRef) -> Result<Vec<Die>, TargetError> {
        self.debug_of(obj)?
            .children(r)
            .map_err(|e| TargetError::Host(format!("{}: bad DWARF at {:#x}: {e}", self.objects[obj].name, r.offset)))
    }

    /// Follows typedefs and qualifiers, and replaces a declared-only
    /// struct/union/enum by its definition from any object.
    fn resolve(&self, obj: usize, mut r: DieRef) -> Result<Option<(usize, DieRef, Die)>, TargetError> {
        for _ in 0..MAX_CHAIN {
            let die = self.die(obj, r)?;
            match die.tag {
                tag if crate::dwarf::is_type_alias(tag) => match die.type_ref {
                    Some(next) => r = next,
                    // `typedef void T` / `const void`.
                    None => return Ok(Some((obj, r, die))),
                },
                tag if die.declaration => {
                    let Some(ns) = Namespace::of_tag(tag) else {
                        return Ok(Some((obj, r, die)));
                    };
                    let Some(name) = die.name.as_deref() else {
                        return Ok(Some((obj, r, die)));
                    };
                    // The same object first (another unit), then all.
                    let own = self
                        .debug_of(obj)?
                        .lookup(ns, name)?
                        .filter(|&(_, complete)| complete)
                        .map(|(d, _)| (obj, d));
                    let found = match own {
                        Some(f) => Some(f),
                        None => self.lookup(&[ns], name)?,
                    };
                    match found {
                        Some((o, d)) => {
                            let def = self.die(o, d)?;
                            if def.declaration {
                                return Ok(Some((obj, r, die)));
                            }
                            return Ok(Some((o, d, def)));
                        }
                        None => return Ok(Some((obj, r, die))),
                    }
                }
                _ => return Ok(Some((obj, r, die))),
            }
        }
        Ok(None)
    }

    /// A type by name, looked up only in the object that defines data
    /// symbol `symbol` (a starter's `MPIR_PROCDESC` beside its
    /// `MPIR_proctable`): no walk through every other object's DWARF.
    pub fn find_type_beside(&self, name: &str, symbol: &str) -> Result<Option<TypeId>, TargetError> {
        let (namespaces, bare) = parse_type_name(name);
        let Some(obj) = self.objects.iter().position(|o| o.file.data_symbol(symbol).is_some()) else {
            return Ok(None);
        };
        let dbg = match self.objects[obj].file.debug_info() {
            Ok(Some(d)) => d,
            Ok(None) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        for &ns in namespaces {
            if let Some((r, true)) = dbg.lookup(ns, bare)? {
                return Ok(Some(Self::encode(obj, r)));
            }
        }
        Ok(None)
    }

    /// `sizeof` a type (typedefs resolved); `None` when incomplete.
    pub fn size_of(&self, ty: TypeId) -> Result<Option<u64>, TargetError> {
        let (obj, r) = Self::decode(ty);
        self.size_of_die(obj, r, 0)
    }

    fn size_of_die(&self, obj: usize, r: DieRef, depth: usize) -> Result<Option<u64>, TargetError> {
        if depth > MAX_CHAIN {
            return Ok(None);
        }
        let Some((obj, r, die)) = self.resolve(obj, r)? else {
            return Ok(None);
        };
        if let Some(size) = die.byte_size {
            return Ok(Some(size));
        }
        Ok(match die.tag {
            dw::DW_TAG_pointer_type
            | dw::DW_TAG_reference_type
            | dw::DW_TAG_rvalue_reference_type
            | dw::DW_TAG_ptr_to_member_type => Some(u64::from(die.address_size)),
            // gdb: sizeof a function or void is 1.
            dw::DW_TAG_subroutine_type | dw::DW_TAG_typedef | dw::DW_TAG_const_type | dw::DW_TAG_volatile_type => {
                Some(1)
            }
            dw::DW_TAG_enumeration_type if !die.declaration => match die.type_ref {
                Some(t) => self.size_of_die(obj, t, depth + 1)?,
                None => None,
            },
            dw::DW_TAG_array_type => {
                let Some(elem) = die.type_ref else { return Ok(None) };
                let Some(elem_size) = self.size_of_die(obj, elem, depth + 1)? else {
                    return Ok(None);
                };
                let mut n: u64 = 1;
                for sub in self.children(obj, r)? {
                    if sub.tag == dw::DW_TAG_subrange_type {
                        // No bound: a flexible array member, size 0 as in gdb.
                        n = n.saturating_mul(sub.count.unwrap_or(0));
                    }
                }
                Some(elem_size.saturating_mul(n))
            }
            _ => None,
        })
    }

    /// Offset of a field of a struct or union (typedefs resolved; members of
    /// anonymous struct/union members and C++ bases searched too, as gdb
    /// does); `None` if there is no such field.
    pub fn field_offset(&self, ty: TypeId, field: &str) -> Result<Option<u64>, TargetError> {
        let (obj, r) = Self::decode(ty);
        self.field_in(obj, r, field, 0)
    }

    fn field_in(&self, obj: usize, r: DieRef, field: &str, depth: usize) -> Result<Option<u64>, TargetError> {
        if depth > MAX_CHAIN {
            return Ok(None);
        }
        let Some((obj, r, die)) = self.resolve(obj, r)? else {
            return Ok(None);
        };
        if !matches!(
            die.tag,
            dw::DW_TAG_structure_type | dw::DW_TAG_union_type | dw::DW_TAG_class_type
        ) || die.declaration
        {
            return Ok(None);
        }
        for member in self.children(obj, r)? {
            let base = member
                .member_location
                .or(member.data_bit_offset.map(|b| b / 8))
                .unwrap_or(0);
            match member.tag {
                dw::DW_TAG_member if member.name.as_deref() == Some(field) => return Ok(Some(base)),
                dw::DW_TAG_member if member.name.is_none() => {}
                dw::DW_TAG_inheritance => {}
                _ => continue,
            }
            let Some(t) = member.type_ref else { continue };
            if let Some(inner) = self.field_in(obj, t, field, depth + 1)? {
                return Ok(Some(base + inner));
            }
        }
        Ok(None)
    }
}

/// Splits `struct X` / `union X` / `enum X` / `X` into namespaces to search
/// and the bare name.
pub fn parse_type_name(name: &str) -> (&'static [Namespace], &str) {
    let name = name.trim();
    for (prefix, ns) in [
        ("struct ", &[Namespace::Struct][..]),
        ("class ", &[Namespace::Struct][..]),
        ("union ", &[Namespace::Union][..]),
        ("enum ", &[Namespace::Enum][..]),
    ] {
        if let Some(rest) = name.strip_prefix(prefix) {
            return (ns, rest.trim());
        }
    }
    (
        &[
            Namespace::Ordinary,
            Namespace::Struct,
            Namespace::Union,
            Namespace::Enum,
        ],
        name,
    )
}

/// The other spellings of a C integer type name: gcc's DWARF names
/// (`long unsigned int`) and clang's (`unsigned long`). Empty for anything
/// that is not made of the integer keywords.
pub fn base_type_spellings(name: &str) -> Vec<String> {
    let (mut unsigned, mut signed, mut longs, mut short, mut int, mut char_) = (false, false, 0, false, false, false);
    for w in name.split_whitespace() {
        match w {
            "unsigned" => unsigned = true,
            "signed" => signed = true,
            "long" => longs += 1,
            "short" => short = true,
            "int" => int = true,
            "char" => char_ = true,
            _ => return Vec::new(),
        }
    }
    let _ = int;
    if char_ {
        return if longs > 0 || short {
            Vec::new()
        } else if unsigned {
            vec!["unsigned char".into()]
        } else if signed {
            vec!["signed char".into()]
        } else {
            vec!["char".into()]
        };
    }
    let size = match (short, longs) {
        (true, 0) => "short ",
        (false, 0) => "",
        (false, 1) => "long ",
        (false, 2) => "long long ",
        _ => return Vec::new(),
    };
    let sign = if unsigned { "unsigned " } else { "" };
    let gcc = format!("{size}{sign}int");
    let clang = if size.is_empty() {
        format!("{sign}int")
    } else {
        format!("{sign}{}", size.trim_end())
    };
    let mut out = vec![gcc];
    if clang != out[0] {
        out.push(clang);
    }
    out
}

/// The runtime addresses of the `l_ld` (dynamic section) of every object in
/// the dynamic linker's list, in load order. Empty when it cannot be read
/// (static executable, process not started yet, memory not in a core).
fn link_map_order(dynamic: u64, is_64: bool, order: ByteOrder, mem: &dyn Memory) -> Vec<u64> {
    let le = order == ByteOrder::Little;
    let w = if is_64 { 8 } else { 4 };
    let word = |addr: u64| -> Option<u64> {
        let mut b = [0u8; 8];
        mem.read(addr, &mut b[..w]).ok()?;
        Some(match (is_64, le) {
            (true, true) => u64::from_le_bytes(b),
            (true, false) => u64::from_be_bytes(b),
            (false, true) => u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            (false, false) => u64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]])),
        })
    };
    let mut out = Vec::new();
    let w = w as u64;
    let mut at = dynamic;
    let mut r_debug = None;
    for _ in 0..512 {
        let (Some(tag), Some(val)) = (word(at), word(at + w)) else {
            return out;
        };
        match tag {
            0 => break,                // DT_NULL
            21 => r_debug = Some(val), // DT_DEBUG
            _ => {}
        }
        at += 2 * w;
    }
    let Some(r_debug) = r_debug.filter(|&a| a != 0) else {
        return out;
    };
    // struct r_debug { int r_version; struct link_map *r_map; ... }
    let Some(mut lm) = word(r_debug + w) else {
        return out;
    };
    // struct link_map { l_addr; l_name; l_ld; l_next; l_prev; }
    for _ in 0..4096 {
        if lm == 0 {
            break;
        }
        if let Some(ld) = word(lm + 2 * w) {
            out.push(ld);
        }
        match word(lm + 3 * w) {
            Some(next) => lm = next,
            None => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Target memory built byte by byte: (address, bytes) runs.
    struct FakeMemory(Vec<(u64, Vec<u8>)>);

    impl Memory for FakeMemory {
        fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
            for (start, bytes) in &self.0 {
                if addr >= *start && addr + buf.len() as u64 <= start + bytes.len() as u64 {
                    let from = (addr - start) as usize;
                    buf.copy_from_slice(&bytes[from..from + buf.len()]);
                    return Ok(());
                }
            }
            Err(TargetError::Unreadable {
                addr,
                len: buf.len() as u64,
                reason: "not in the test memory".into(),
            })
        }
    }

    fn words(values: &[u64], w: usize, order: ByteOrder) -> Vec<u8> {
        values
            .iter()
            .flat_map(|&v| match order {
                ByteOrder::Little => v.to_le_bytes()[..w].to_vec(),
                ByteOrder::Big => v.to_be_bytes()[8 - w..].to_vec(),
            })
            .collect()
    }

    #[test]
    fn link_map_walk_both_orders_and_sizes() {
        for (is_64, order) in [
            (true, ByteOrder::Little),
            (false, ByteOrder::Little),
            (true, ByteOrder::Big),
            (false, ByteOrder::Big),
        ] {
            let w = if is_64 { 8 } else { 4 };
            let wu = w as u64;
            // _DYNAMIC: DT_NEEDED, DT_DEBUG -> r_debug, DT_NULL.
            let dynamic = words(&[1, 7, 21, 0x2000, 0, 0], w, order);
            // r_debug { int r_version (padded to a word); link_map *r_map; }
            let r_debug = words(&[1, 0x3000], w, order);
            // Three link_maps: l_addr, l_name, l_ld, l_next, l_prev.
            let lm = |ld: u64, next: u64| words(&[0, 0, ld, next, 0], w, order);
            let mem = FakeMemory(vec![
                (0x1000, dynamic),
                (0x2000, r_debug),
                (0x3000, lm(0x1000, 0x3000 + 5 * wu)),
                (0x3000 + 5 * wu, lm(0x7f00, 0x3000 + 10 * wu)),
                (0x3000 + 10 * wu, lm(0x8f00, 0)),
            ]);
            assert_eq!(
                link_map_order(0x1000, is_64, order, &mem),
                [0x1000, 0x7f00, 0x8f00],
                "{is_64} {order:?}"
            );
            // No DT_DEBUG value yet (static or not started): no order.
            let early = FakeMemory(vec![(0x1000, words(&[21, 0, 0, 0], w, order))]);
            assert!(link_map_order(0x1000, is_64, order, &early).is_empty());
        }
    }

    #[test]
    fn type_names() {
        assert_eq!(parse_type_name("struct  foo ").1, "foo");
        assert_eq!(parse_type_name("struct foo").0, &[Namespace::Struct]);
        assert_eq!(parse_type_name("union u").0, &[Namespace::Union]);
        assert_eq!(parse_type_name("foo_t").0.len(), 4);
    }

    #[test]
    fn integer_spellings() {
        assert_eq!(base_type_spellings("long"), ["long int", "long"]);
        assert_eq!(
            base_type_spellings("unsigned long"),
            ["long unsigned int", "unsigned long"]
        );
        assert_eq!(
            base_type_spellings("long unsigned int"),
            ["long unsigned int", "unsigned long"]
        );
        assert_eq!(base_type_spellings("long long"), ["long long int", "long long"]);
        assert_eq!(base_type_spellings("unsigned"), ["unsigned int"]);
        assert_eq!(base_type_spellings("short"), ["short int", "short"]);
        assert_eq!(base_type_spellings("unsigned char"), ["unsigned char"]);
        assert!(base_type_spellings("opal_list_t").is_empty());
        assert!(base_type_spellings("long char").is_empty());
    }

    #[test]
    fn type_ids_round_trip() {
        for (o, sup, off) in [(0, false, 0), (3, true, 0x1234), (65535, true, (1 << 47) - 1)] {
            let r = DieRef { sup, offset: off };
            assert_eq!(ProcessImage::decode(ProcessImage::encode(o, r)), (o, r));
        }
    }
}
