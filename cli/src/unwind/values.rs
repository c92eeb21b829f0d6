//! The value of a parameter or variable in one frame of a stack
//! (docs/design/stacks.md §2.3): the frame's DIE (from addr2line, kept with
//! the frame), its `DW_TAG_formal_parameter` or `DW_TAG_variable` of that
//! name (directly or through `DW_AT_abstract_origin`), the location that
//! covers the frame's pc, evaluated with the registers and CFA the unwinder
//! recovered for that frame ([`eval`]), read as wide as its type says and
//! sign-extended for signed integers.
//!
//! Nothing here panics or loops: DIE walks, typedef chains and evaluations
//! are bounded; anything not recoverable is `Ok(None)`. The only error is
//! the variable's own memory being unreadable.

mod eval;

use gimli::{constants as dw, AttributeValue, UnitOffset, UnitRef};

use crate::dwarf::{DebugInfo, DieRef, R};
use crate::image::Memory;
use crate::regs::Regs;

/// DIEs read while searching one function for a name or a call site.
const MAX_DIES: usize = 200_000;
/// Nesting of lexical blocks, typedef chains, abstract origins.
const MAX_DEPTH: usize = 32;

/// What [`frame_value`] needs of one frame (inlined frames share their
/// physical frame's registers), kept with the stack, never serialised.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FrameState {
    /// The registers in this frame.
    pub(crate) regs: Regs,
    /// The frame's CFA (its caller's stack pointer), if the step to the
    /// caller found it.
    pub(crate) cfa: Option<u64>,
    /// The object holding the pc (its key in the unwinder), if any.
    pub(crate) object: Option<usize>,
    /// That object's load bias.
    pub(crate) bias: u64,
    /// The address the frame was symbolised by (pc, or pc − 1 in callers).
    pub(crate) probe: u64,
    /// The pc (the return address in callers).
    pub(crate) pc: u64,
    /// The DIE of this (possibly inlined) function in the unit of the pc.
    pub(crate) die: Option<usize>,
    /// The DIE of the physical function (`DW_TAG_subprogram`), whose
    /// `DW_AT_frame_base` applies.
    pub(crate) function_die: Option<usize>,
    /// Index of the physical frame: inlined frames share it.
    pub(crate) raw: usize,
}

impl FrameState {
    fn svma(&self) -> u64 {
        self.probe.wrapping_sub(self.bias)
    }
}

/// Where an object's DWARF is, by the object key of [`FrameState`].
pub(crate) trait Dwarfs {
    /// The addr2line context and the DWARF it was built on.
    fn dwarf(&self, object: usize) -> Option<(&addr2line::Context<R>, &DebugInfo)>;
}

/// How a value is read: its size in bytes and whether to sign-extend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Scalar {
    size: u8,
    signed: bool,
}

impl Scalar {
    /// `raw` cut to the size, sign-extended if signed.
    fn fit(self, raw: u64) -> u64 {
        let bits = u32::from(self.size) * 8;
        if bits == 0 || bits >= 64 {
            return raw;
        }
        let mask = (1u64 << bits) - 1;
        let v = raw & mask;
        if self.signed && (v >> (bits - 1)) & 1 == 1 {
            v | !mask
        } else {
            v
        }
    }
}

/// A parameter or variable found by name.
struct Var {
    location: Option<AttributeValue<R>>,
    const_value: Option<AttributeValue<R>>,
    ty: Option<DieRef>,
    /// Preference: a parameter, then one with a location, then the
    /// innermost block.
    rank: (bool, bool, usize),
}

/// The value of `name` in frame `index` of `frames` (one thread's stack).
pub(crate) fn frame_value(
    dwarfs: &dyn Dwarfs,
    frames: &[FrameState],
    index: usize,
    name: &str,
    mem: &dyn Memory,
) -> Result<Option<u64>, mpiq::TargetError> {
    let Some(f) = frames.get(index) else {
        return Ok(None);
    };
    let (Some(object), Some(die)) = (f.object, f.die) else {
        return Ok(None);
    };
    let Some((ctx, debug)) = dwarfs.dwarf(object) else {
        return Ok(None);
    };
    let svma = f.svma();
    let Some(unit) = unit_at(ctx, svma) else {
        return Ok(None);
    };
    let Some(var) = find_variable(unit, debug, UnitOffset(die), name, svma) else {
        return Ok(None);
    };
    let Some(scalar) = scalar_of(debug, var.ty, unit.encoding().address_size) else {
        return Ok(None);
    };
    if let Some(c) = var.const_value {
        return Ok(constant(c).map(|v| scalar.fit(v)));
    }
    let Some(expr) = var.location.and_then(|l| location_at(unit, l, svma)) else {
        return Ok(None);
    };
    let ev = eval::Eval { dwarfs, frames, mem };
    let at = eval::At {
        unit,
        index,
        svma,
        depth: 0,
    };
    let Some(pieces) = ev.evaluate(&at, expr) else {
        return Ok(None);
    };
    let Some(piece) = pieces.first() else {
        return Ok(None);
    };
    // Only a first piece that holds the whole value is the value.
    if piece.size_in_bits.is_some_and(|b| b < u64::from(scalar.size) * 8) {
        return Ok(None);
    }
    Ok(match &piece.location {
        gimli::Location::Register { register } => f.regs.get(usize::from(register.0)).copied().flatten(),
        gimli::Location::Address { address } => {
            let mut b = [0u8; 8];
            let n = usize::from(scalar.size).min(8);
            mem.read(*address, &mut b[..n])?;
            Some(u64::from_le_bytes(b))
        }
        gimli::Location::Value { value } => value.to_u64(!0).ok(),
        gimli::Location::Bytes { value } => Some(le_bytes(value.slice())),
        gimli::Location::Empty | gimli::Location::ImplicitPointer { .. } => None,
    }
    .map(|v| scalar.fit(v)))
}

/// DWARF numbers of the x86_64 registers a `$` name may ask for
/// ([`register`]): `$sp` and `$pc` are `$rsp` and `$rip`.
const REGISTER_NAMES: [(&str, usize); 19] = [
    ("rax", 0),
    ("rdx", 1),
    ("rcx", 2),
    ("rbx", 3),
    ("rsi", 4),
    ("rdi", 5),
    ("rbp", 6),
    ("rsp", 7),
    ("sp", 7),
    ("r8", 8),
    ("r9", 9),
    ("r10", 10),
    ("r11", 11),
    ("r12", 12),
    ("r13", 13),
    ("r14", 14),
    ("r15", 15),
    ("rip", 16),
    ("pc", 16),
];

/// Callee-saved registers other than the stack and frame pointers, which a
/// frame-pointer step copies into the caller on the guess that the callee
/// left them alone.
const GUESSED_BY_FRAME_POINTER: [usize; 5] = [3, 12, 13, 14, 15];

/// Register `$name` (`name` without the `$`) of frame `index` of `frames`,
/// as the unwinder recovered it for that frame (inlined frames share their
/// physical frame's): `None` for a register it did not recover (a
/// caller-saved one in a caller, unless a signal frame restored it), an
/// unknown name, or a callee-saved one that a frame-pointer step at or
/// inside this frame only assumed unchanged (`by_frame_pointer`).
pub(crate) fn register(frames: &[FrameState], index: usize, name: &str, by_frame_pointer: bool) -> Option<u64> {
    let f = frames.get(index)?;
    let &(_, r) = REGISTER_NAMES.iter().find(|(n, _)| *n == name)?;
    if by_frame_pointer && GUESSED_BY_FRAME_POINTER.contains(&r) {
        return None;
    }
    f.regs.get(r).copied().flatten()
}

/// The unit addr2line found for `svma` (the one its DIE offsets are in).
fn unit_at(ctx: &addr2line::Context<R>, svma: u64) -> Option<UnitRef<'_, R>> {
    ctx.find_dwarf_and_unit(svma).skip_all_loads()
}

/// Up to 8 little-endian bytes as a number.
fn le_bytes(bytes: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = bytes.len().min(8);
    if let (Some(dst), Some(src)) = (b.get_mut(..n), bytes.get(..n)) {
        dst.copy_from_slice(src);
    }
    u64::from_le_bytes(b)
}

/// `DW_AT_const_value` as a number.
fn constant(v: AttributeValue<R>) -> Option<u64> {
    match v {
        AttributeValue::Data1(x) => Some(x.into()),
        AttributeValue::Data2(x) => Some(x.into()),
        AttributeValue::Data4(x) => Some(x.into()),
        AttributeValue::Data8(x) => Some(x),
        AttributeValue::Sdata(x) => Some(x as u64),
        AttributeValue::Udata(x) => Some(x),
        AttributeValue::Block(b) => Some(le_bytes(b.slice())),
        _ => None,
    }
}

/// The expression of a location attribute that applies at `svma`: an
/// expression as is, or the location list entry whose range holds it.
fn location_at(unit: UnitRef<'_, R>, value: AttributeValue<R>, svma: u64) -> Option<gimli::Expression<R>> {
    match value {
        AttributeValue::Exprloc(e) => Some(e),
        AttributeValue::Block(b) => Some(gimli::Expression(b)),
        other => {
            let mut list = unit.attr_locations(other).ok()??;
            for _ in 0..MAX_DIES {
                let entry = list.next().ok()??;
                if entry.range.begin <= svma && svma < entry.range.end {
                    return Some(entry.data);
                }
            }
            None
        }
    }
}

/// The name of a DIE, its own or its abstract origin's.
fn name_of(unit: UnitRef<'_, R>, debug: &DebugInfo, e: &gimli::DebuggingInformationEntry<'_, '_, R>) -> Option<String> {
    if let Ok(Some(v)) = e.attr_value(dw::DW_AT_name) {
        let s = unit.attr_string(v).ok()?;
        return Some(String::from_utf8_lossy(s.slice()).into_owned());
    }
    name_at(debug, origin_of(unit, debug, e)?)
}

/// The name of the DIE at `r`, its own or its abstract origin's.
fn name_at(debug: &DebugInfo, r: DieRef) -> Option<String> {
    let mut at = Some(r);
    for _ in 0..MAX_DEPTH {
        let die = debug.die(at?).ok()?;
        if die.name.is_some() {
            return die.name;
        }
        at = die.abstract_origin;
    }
    None
}

fn origin_of(
    unit: UnitRef<'_, R>,
    debug: &DebugInfo,
    e: &gimli::DebuggingInformationEntry<'_, '_, R>,
) -> Option<DieRef> {
    let v = e.attr_value(dw::DW_AT_abstract_origin).ok()??;
    debug.to_ref(&unit, v)
}

/// The type of a DIE, its own or its abstract origin's.
fn type_of(unit: UnitRef<'_, R>, debug: &DebugInfo, e: &gimli::DebuggingInformationEntry<'_, '_, R>) -> Option<DieRef> {
    if let Ok(Some(v)) = e.attr_value(dw::DW_AT_type) {
        return debug.to_ref(&unit, v);
    }
    let mut origin = origin_of(unit, debug, e);
    for _ in 0..MAX_DEPTH {
        let die = debug.die(origin?).ok()?;
        if die.type_ref.is_some() {
            return die.type_ref;
        }
        origin = die.abstract_origin;
    }
    None
}

/// Whether a block's ranges hold `svma`; `None` when it has none.
fn covers(unit: UnitRef<'_, R>, e: &gimli::DebuggingInformationEntry<'_, '_, R>, svma: u64) -> Option<bool> {
    let mut ranges = unit.die_ranges(e).ok()?;
    let mut any = false;
    for _ in 0..MAX_DIES {
        match ranges.next() {
            Ok(Some(r)) => {
                any = true;
                if r.begin <= svma && svma < r.end {
                    return Some(true);
                }
            }
            _ => break,
        }
    }
    any.then_some(false)
}

/// The parameter or variable `name` of the function at `scope`, looked for
/// among its children and in its lexical blocks that hold `svma` (not in
/// inlined calls: those are frames of their own).
fn find_variable(unit: UnitRef<'_, R>, debug: &DebugInfo, scope: UnitOffset, name: &str, svma: u64) -> Option<Var> {
    let mut tree = unit.entries_tree(Some(scope)).ok()?;
    let root = tree.root().ok()?;
    let mut best = None;
    let mut budget = MAX_DIES;
    let _ = search(unit, debug, root, name, svma, 0, &mut budget, &mut best);
    best
}

#[allow(clippy::too_many_arguments)]
fn search(
    unit: UnitRef<'_, R>,
    debug: &DebugInfo,
    node: gimli::EntriesTreeNode<'_, '_, '_, R>,
    name: &str,
    svma: u64,
    depth: usize,
    budget: &mut usize,
    best: &mut Option<Var>,
) -> gimli::Result<()> {
    let mut children = node.children();
    while let Some(child) = children.next()? {
        if *budget == 0 {
            return Ok(());
        }
        *budget -= 1;
        let e = child.entry();
        match e.tag() {
            dw::DW_TAG_formal_parameter | dw::DW_TAG_variable => {
                if name_of(unit, debug, e).as_deref() != Some(name) {
                    continue;
                }
                let location = e.attr_value(dw::DW_AT_location)?;
                let const_value = e.attr_value(dw::DW_AT_const_value)?;
                let param = e.tag() == dw::DW_TAG_formal_parameter;
                let rank = (param, location.is_some() || const_value.is_some(), depth);
                if best.as_ref().is_none_or(|b| rank > b.rank) {
                    *best = Some(Var {
                        location,
                        const_value,
                        ty: type_of(unit, debug, e),
                        rank,
                    });
                }
            }
            dw::DW_TAG_lexical_block if depth < MAX_DEPTH && covers(unit, e, svma) != Some(false) => {
                search(unit, debug, child, name, svma, depth + 1, budget, best)?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// How to read a value of type `ty`: pointers at the address size,
/// integers (enums, characters, booleans) at their size, signed ones
/// sign-extended; typedefs and qualifiers followed. `None` for aggregates
/// and anything wider than 8 bytes; no type at all reads a whole word.
fn scalar_of(debug: &DebugInfo, ty: Option<DieRef>, address_size: u8) -> Option<Scalar> {
    let word = Scalar {
        size: address_size,
        signed: false,
    };
    let mut ty = match ty {
        Some(t) => t,
        None => return Some(word),
    };
    let mut size = None;
    for _ in 0..MAX_DEPTH {
        let die = debug.die(ty).ok()?;
        match die.tag {
            tag if crate::dwarf::is_type_alias(tag) => match die.type_ref {
                Some(next) => ty = next,
                // `const void`: not a value.
                None => return None,
            },
            dw::DW_TAG_pointer_type
            | dw::DW_TAG_reference_type
            | dw::DW_TAG_rvalue_reference_type
            | dw::DW_TAG_ptr_to_member_type => {
                return Some(Scalar {
                    size: die.byte_size.and_then(|s| u8::try_from(s).ok()).unwrap_or(address_size),
                    signed: false,
                })
            }
            dw::DW_TAG_base_type => {
                let size = size.or(die.byte_size)?;
                if size == 0 || size > 8 {
                    return None;
                }
                let signed = matches!(die.encoding, Some(dw::DW_ATE_signed | dw::DW_ATE_signed_char));
                return Some(Scalar {
                    size: u8::try_from(size).ok()?,
                    signed,
                });
            }
            dw::DW_TAG_enumeration_type => {
                // The size is the enum's; its underlying type (if given)
                // says whether it is signed.
                let own = die.byte_size.filter(|s| (1..=8).contains(s))?;
                match die.type_ref {
                    Some(next) if size.is_none() => {
                        size = Some(own);
                        ty = next;
                    }
                    _ => {
                        return Some(Scalar {
                            size: u8::try_from(own).ok()?,
                            signed: false,
                        })
                    }
                }
            }
            _ => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unwind::Unwinder;
    use crate::LiveProcess;

    /// Stacks of garbage registers against this very process (its memory,
    /// its objects and their DWARF), with their frames' DIEs, registers and
    /// CFAs scrambled further: every question ends, with a value, none or
    /// an unreadable-memory error, never a panic.
    #[test]
    fn garbage_frames_never_panic() {
        let me = LiveProcess::open(std::process::id() as i32).unwrap();
        let objects = me.image().objects();
        let mut u = Unwinder::with_max_frames(16);
        let local = 0u64;
        let sp = std::ptr::addr_of!(local) as u64;
        let code = garbage_frames_never_panic as *const () as usize as u64;
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let names = [
            "me", "u", "local", "sp", "x", "self", "f", "regs", "buf", "no_such", "$sp", "$rbx", "$rax", "$", "$$",
        ];
        let mut answered = 0;
        for round in 0..150 {
            let mut regs: Regs = [None; 17];
            for r in regs.iter_mut() {
                *r = Some(next());
            }
            regs[7] = Some(sp.wrapping_add(next() % 2048));
            regs[6] = Some(sp.wrapping_add(next() % 4096));
            regs[16] = Some(code.wrapping_add(next() % 512));
            let mut s = u.thread_stack(objects, me.memory(), 1, &regs);
            if round % 2 == 1 {
                for st in s.states.iter_mut() {
                    st.die = st.die.map(|d| d.wrapping_add((next() % 64) as usize));
                    st.function_die = st.function_die.map(|d| (next() % 0x10_0000) as usize ^ d);
                    st.cfa = Some(next());
                    st.regs[(next() % 17) as usize] = None;
                }
            }
            for frame in 0..s.frames.len() + 1 {
                for name in names {
                    if let Ok(Some(_)) = u.frame_value(&s, frame, name, me.memory()) {
                        answered += 1;
                    }
                }
            }
        }
        eprintln!("{answered} answers");
    }

    #[test]
    fn registers_by_name() {
        let mut regs: Regs = [None; 17];
        for (r, slot) in regs.iter_mut().enumerate() {
            *slot = Some(100 + r as u64);
        }
        regs[0] = None;
        let state = FrameState {
            regs,
            cfa: None,
            object: None,
            bias: 0,
            probe: 0,
            pc: 116,
            die: None,
            function_die: None,
            raw: 0,
        };
        let frames = [state];
        let get = |name: &str, fp: bool| register(&frames, 0, name, fp);
        assert_eq!(get("sp", false), Some(107));
        assert_eq!(get("rsp", false), Some(107));
        assert_eq!(get("pc", false), Some(116));
        assert_eq!(get("rip", false), Some(116));
        assert_eq!(get("rbx", false), Some(103));
        assert_eq!(get("rbp", false), Some(106));
        assert_eq!(get("r12", false), Some(112));
        assert_eq!(get("r15", false), Some(115));
        assert_eq!(get("rax", false), None, "not recovered");
        assert_eq!(get("eax", false), None, "not a name");
        assert_eq!(get("RBX", false), None, "not a name");
        assert_eq!(get("", false), None);
        // Assumed unchanged by a frame-pointer step: not given.
        assert_eq!(get("rbx", true), None);
        assert_eq!(get("r13", true), None);
        assert_eq!(get("rbp", true), Some(106));
        assert_eq!(get("sp", true), Some(107));
        assert_eq!(register(&frames, 1, "sp", false), None, "no such frame");
    }

    #[test]
    fn values_are_cut_to_their_size_and_sign_extended() {
        let int = Scalar { size: 4, signed: true };
        assert_eq!(int.fit(0xdead_beef_0000_002a), 42);
        assert_eq!(int.fit(0x0000_0000_ffff_fff9), (-7i64) as u64);
        let uint = Scalar { size: 4, signed: false };
        assert_eq!(uint.fit(0xffff_ffff_ffff_fff9), 0xffff_fff9);
        let long = Scalar { size: 8, signed: true };
        assert_eq!(long.fit(0x1234), 0x1234);
        let char_ = Scalar { size: 1, signed: true };
        assert_eq!(char_.fit(0x80), 0xffff_ffff_ffff_ff80);
        let bool_ = Scalar { size: 1, signed: false };
        assert_eq!(bool_.fit(0x101), 1);
    }

    #[test]
    fn constants_and_bytes() {
        assert_eq!(constant(AttributeValue::Data1(0xff)), Some(0xff));
        assert_eq!(constant(AttributeValue::Sdata(-7)), Some((-7i64) as u64));
        assert_eq!(le_bytes(&[1, 2]), 0x0201);
        assert_eq!(le_bytes(&[1; 12]), 0x0101_0101_0101_0101);
        assert_eq!(le_bytes(&[]), 0);
    }
}
