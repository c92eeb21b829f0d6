//! Evaluating a DWARF location expression in one frame: registers, CFA and
//! load bias of that frame, memory of the process, the function's
//! `DW_AT_frame_base`, and entry values (`DW_OP_entry_value`) through the
//! caller's `DW_TAG_call_site` for the return address (DWARF 5, and the GNU
//! extension of DWARF 4), evaluated in the caller's frame, when that site
//! is known to have called this very function (a tail call in between,
//! which leaves no frame, would have passed other values).

use gimli::{constants as dw, AttributeValue, EvaluationResult as E, Location, UnitOffset, UnitRef, Value};

use super::{location_at, unit_at, Dwarfs, FrameState, MAX_DEPTH, MAX_DIES};
use crate::dwarf::R;
use crate::image::Memory;

/// Steps of one DWARF expression (gimli's operations and our resumes).
const MAX_STEPS: u32 = 10_000;
/// Nested evaluations: a frame base inside a value, an entry value inside
/// a caller's call-site value.
const MAX_NESTING: usize = 8;

/// What every evaluation of one question shares.
pub(super) struct Eval<'a> {
    pub(super) dwarfs: &'a dyn Dwarfs,
    /// The thread's frames, innermost first.
    pub(super) frames: &'a [FrameState],
    pub(super) mem: &'a dyn Memory,
}

/// The frame an expression is evaluated in.
pub(super) struct At<'u> {
    /// The unit of the frame's pc (the expression's).
    pub(super) unit: UnitRef<'u, R>,
    /// Index of the frame in [`Eval::frames`].
    pub(super) index: usize,
    /// The frame's pc as a link-time address (pc − 1 in callers).
    pub(super) svma: u64,
    /// How many evaluations this one is nested in.
    pub(super) depth: usize,
}

/// A value of the base type at `offset` (`0`: the generic type).
fn typed(unit: UnitRef<'_, R>, offset: UnitOffset, v: u64) -> Option<Value> {
    if offset.0 == 0 {
        return Some(Value::Generic(v));
    }
    Value::from_u64(value_type(unit, offset)?, v).ok()
}

fn value_type(unit: UnitRef<'_, R>, offset: UnitOffset) -> Option<gimli::ValueType> {
    let e = unit.entry(offset).ok()?;
    let encoding = match e.attr_value(dw::DW_AT_encoding).ok()?? {
        AttributeValue::Encoding(x) => x,
        _ => return None,
    };
    let size = e.attr_value(dw::DW_AT_byte_size).ok()??.udata_value()?;
    gimli::ValueType::from_encoding(encoding, size)
}

/// The value a finished evaluation stands for when used as a value (a
/// frame base, a call-site value): an address is the value computed.
fn as_value(pieces: &[gimli::Piece<R>], f: &FrameState) -> Option<u64> {
    match &pieces.first()?.location {
        Location::Address { address } => Some(*address),
        Location::Value { value } => value.to_u64(!0).ok(),
        Location::Register { register } => f.regs.get(usize::from(register.0)).copied().flatten(),
        _ => None,
    }
}

impl Eval<'_> {
    /// The pieces of `expr` in frame `at`; `None` when something it needs
    /// is not known (an unknown register, unreadable memory, no entry
    /// value) or it is too long.
    pub(super) fn evaluate(&self, at: &At<'_>, expr: gimli::Expression<R>) -> Option<Vec<gimli::Piece<R>>> {
        let f = self.frames.get(at.index)?;
        let mut ev = expr.evaluation(at.unit.encoding());
        ev.set_max_iterations(MAX_STEPS);
        let mut state = ev.evaluate().ok()?;
        for _ in 0..MAX_STEPS {
            state = match state {
                E::Complete => return Some(ev.result()),
                E::RequiresMemory {
                    address,
                    size,
                    space: None,
                    base_type,
                } => {
                    let mut b = [0u8; 8];
                    let n = usize::from(size).min(8);
                    self.mem.read(address, b.get_mut(..n)?).ok()?;
                    ev.resume_with_memory(typed(at.unit, base_type, u64::from_le_bytes(b))?)
                }
                E::RequiresRegister { register, base_type } => {
                    let v = f.regs.get(usize::from(register.0)).copied().flatten()?;
                    ev.resume_with_register(typed(at.unit, base_type, v)?)
                }
                E::RequiresFrameBase => ev.resume_with_frame_base(self.frame_base(at)?),
                E::RequiresCallFrameCfa => ev.resume_with_call_frame_cfa(f.cfa?),
                E::RequiresRelocatedAddress(a) => ev.resume_with_relocated_address(a.wrapping_add(f.bias)),
                E::RequiresIndexedAddress { index, relocate } => {
                    let a = at.unit.address(index).ok()?;
                    ev.resume_with_indexed_address(if relocate { a.wrapping_add(f.bias) } else { a })
                }
                E::RequiresBaseType(o) => ev.resume_with_base_type(value_type(at.unit, o)?),
                E::RequiresEntryValue(e) => ev.resume_with_entry_value(Value::Generic(self.entry_value(at, e)?)),
                // Thread-local storage, other address spaces, DW_OP_call*,
                // GNU parameter references: not recovered.
                _ => return None,
            }
            .ok()?;
        }
        None
    }

    /// `DW_AT_frame_base` of the frame's physical function.
    fn frame_base(&self, at: &At<'_>) -> Option<u64> {
        if at.depth >= MAX_NESTING {
            return None;
        }
        let f = self.frames.get(at.index)?;
        let e = at.unit.entry(UnitOffset(f.function_die?)).ok()?;
        let v = e.attr_value(dw::DW_AT_frame_base).ok()??;
        let expr = location_at(at.unit, v, at.svma)?;
        let inner = At {
            unit: at.unit,
            index: at.index,
            svma: at.svma,
            depth: at.depth + 1,
        };
        as_value(&self.evaluate(&inner, expr)?, f)
    }

    /// The value register `expr` (`DW_OP_regN`) had when the frame's
    /// function was entered: the caller's call site for this return
    /// address says how to compute it in the caller's frame.
    fn entry_value(&self, at: &At<'_>, expr: gimli::Expression<R>) -> Option<u64> {
        if at.depth >= MAX_NESTING {
            return None;
        }
        let mut ops = expr.operations(at.unit.encoding());
        let register = match (ops.next().ok()??, ops.next()) {
            (gimli::Operation::Register { register }, Ok(None)) => register,
            _ => return None,
        };
        let f = self.frames.get(at.index)?;
        let ci = self.frames.iter().position(|c| c.raw == f.raw.wrapping_add(1))?;
        let c = self.frames.get(ci)?;
        let (ctx, debug) = self.dwarfs.dwarf(c.object?)?;
        let unit = unit_at(ctx, c.svma())?;
        let site = call_site(unit, UnitOffset(c.function_die?), c.pc.wrapping_sub(c.bias), register)?;
        let inner = At {
            unit,
            index: ci,
            svma: c.svma(),
            depth: at.depth + 1,
        };
        // The site must have called this very function: a tail call in
        // between (on no stack) would have passed other values. As gdb,
        // an indirect call whose target is not known is not guessed at.
        match (site.origin, site.target) {
            (Some(origin), _) => {
                let called = debug.to_ref(&unit, origin).and_then(|r| super::name_at(debug, r));
                if let (Some(called), Some(callee)) = (called, self.function_name(f)) {
                    if !same_function(&called, &callee) {
                        return None;
                    }
                }
            }
            (None, Some(target)) => {
                let entry = self.function_entry(f)?;
                let called = as_value(&self.evaluate(&inner, target)?, c)?;
                if called != entry {
                    return None;
                }
            }
            (None, None) => return None,
        }
        as_value(&self.evaluate(&inner, site.value?)?, c)
    }

    /// The run-time entry address of a frame's physical function.
    fn function_entry(&self, f: &FrameState) -> Option<u64> {
        let (ctx, _) = self.dwarfs.dwarf(f.object?)?;
        let unit = unit_at(ctx, f.svma())?;
        let e = unit.entry(UnitOffset(f.function_die?)).ok()?;
        let low = attr(&e, &[dw::DW_AT_low_pc])?;
        Some(unit.attr_address(low).ok()??.wrapping_add(f.bias))
    }

    /// The name of a frame's physical function.
    fn function_name(&self, f: &FrameState) -> Option<String> {
        let (ctx, debug) = self.dwarfs.dwarf(f.object?)?;
        let unit = unit_at(ctx, f.svma())?;
        let e = unit.entry(UnitOffset(f.function_die?)).ok()?;
        super::name_of(unit, debug, &e)
    }
}

/// The MPIs' `MPI_Recv` is a weak alias of `PMPI_Recv` (`mpi_recv_` of
/// `pmpi_recv_`): a call to one lands in the other.
fn same_function(a: &str, b: &str) -> bool {
    let profiled = |x: &str, y: &str| x.strip_prefix(['P', 'p']) == Some(y);
    a == b || profiled(a, b) || profiled(b, a)
}

/// A call site's parameter: how to compute its value in the caller, and
/// the name of the function called, if the site says.
#[derive(Clone, Copy)]
struct Site {
    /// `DW_AT_call_value` of the parameter (once found).
    value: Option<gimli::Expression<R>>,
    /// `DW_AT_call_origin`: the function called, for direct calls.
    origin: Option<AttributeValue<R>>,
    /// An indirect call's target (`DW_AT_call_target`), computed in the
    /// caller's frame.
    target: Option<gimli::Expression<R>>,
}

fn attr(e: &gimli::DebuggingInformationEntry<'_, '_, R>, names: &[gimli::DwAt]) -> Option<AttributeValue<R>> {
    names.iter().find_map(|n| e.attr_value(*n).ok().flatten())
}

/// In the function at `func`, the call site returning to `ret` and its
/// parameter passed in `register`.
fn call_site(unit: UnitRef<'_, R>, func: UnitOffset, ret: u64, register: gimli::Register) -> Option<Site> {
    let mut cursor = unit.entries_at_offset(func).ok()?;
    cursor.next_dfs().ok()??;
    let mut depth: isize = 0;
    let mut site: Option<(isize, Site)> = None;
    for _ in 0..MAX_DIES {
        let (delta, e) = cursor.next_dfs().ok()??;
        depth += delta;
        if depth <= 0 || depth > MAX_DEPTH as isize {
            return None;
        }
        if let Some((at, found)) = &site {
            if depth <= *at {
                return None;
            }
            if depth == at + 1
                && matches!(
                    e.tag(),
                    dw::DW_TAG_call_site_parameter | dw::DW_TAG_GNU_call_site_parameter
                )
            {
                let Some(AttributeValue::Exprloc(loc)) = attr(e, &[dw::DW_AT_location]) else {
                    continue;
                };
                let mut ops = loc.operations(unit.encoding());
                let here = matches!(
                    (ops.next(), ops.next()),
                    (Ok(Some(gimli::Operation::Register { register: r })), Ok(None)) if r == register
                );
                if !here {
                    continue;
                }
                let Some(AttributeValue::Exprloc(value)) =
                    attr(e, &[dw::DW_AT_call_value, dw::DW_AT_GNU_call_site_value])
                else {
                    return None;
                };
                return Some(Site {
                    value: Some(value),
                    ..*found
                });
            }
            continue;
        }
        if matches!(e.tag(), dw::DW_TAG_call_site | dw::DW_TAG_GNU_call_site) {
            let pc = attr(e, &[dw::DW_AT_call_return_pc, dw::DW_AT_low_pc]).and_then(|v| unit.attr_address(v).ok()?);
            if pc == Some(ret) {
                let origin = attr(e, &[dw::DW_AT_call_origin, dw::DW_AT_abstract_origin]);
                let target = match attr(e, &[dw::DW_AT_call_target, dw::DW_AT_GNU_call_site_target]) {
                    Some(AttributeValue::Exprloc(t)) => Some(t),
                    _ => None,
                };
                site = Some((
                    depth,
                    Site {
                        value: None,
                        origin,
                        target,
                    },
                ));
            }
        }
    }
    None
}
