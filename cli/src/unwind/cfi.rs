//! The call frame information of one object (`.eh_frame` with its
//! `.eh_frame_hdr` search table, else `.debug_frame` of the file or of its
//! separate debug file), parsed once per run, and applying one row of it to
//! every x86_64 register (docs/design/stacks.md §1.4, §1.5).
//!
//! Addresses here are link-time (SVMA): `svma = pc - bias`, so the same
//! parsed sections serve every process that maps the object.

use gimli::{CfaRule, EhFrame, RegisterRule, UnwindSection};
use object::{Object, ObjectSection};

use super::error::UnwindError;
use crate::dwarf::R;
use crate::elf::ElfObject;
use crate::image::Memory;
use crate::regs::Regs;

/// x86_64 DWARF numbers of the callee-saved registers (rbx, rbp, r12–r15):
/// a row that does not mention them leaves them as they are.
const CALLEE_SAVED: [usize; 6] = [3, 6, 12, 13, 14, 15];
/// DWARF number of the stack pointer.
pub(crate) const RSP: usize = 7;
/// DWARF number of the return address column (the pc).
pub(crate) const RIP: usize = 16;

/// The unwind sections of one object.
pub(crate) struct UnwindInfo {
    eh_bases: gimli::BaseAddresses,
    eh_frame: Option<EhFrame<R>>,
    hdr: Option<gimli::ParsedEhFrameHdr<R>>,
    debug_bases: gimli::BaseAddresses,
    debug_frame: Option<gimli::DebugFrame<R>>,
}

impl std::fmt::Debug for UnwindInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnwindInfo")
            .field("eh_frame", &self.eh_frame.is_some())
            .field("eh_frame_hdr", &self.hdr.is_some())
            .field("debug_frame", &self.debug_frame.is_some())
            .finish()
    }
}

/// One row of CFI for a pc, with what else the walk needs.
#[derive(Clone)]
pub(crate) struct Row {
    row: gimli::UnwindTableRow<usize>,
    /// The FDE is a signal trampoline's (`S` augmentation): its caller's pc
    /// is exact, not a return address.
    pub(crate) signal: bool,
    /// Which section the row came from (for expressions).
    from_eh: bool,
}

fn endian_of(file: &object::File<'_>) -> gimli::RunTimeEndian {
    if file.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    }
}

fn section_data(file: &object::File<'static>, name: &str) -> Option<(u64, &'static [u8])> {
    let s = file.section_by_name(name)?;
    if s.kind() == object::SectionKind::UninitializedData {
        return None;
    }
    let data: &'static [u8] = match s.uncompressed_data().ok()? {
        std::borrow::Cow::Borrowed(b) => b,
        // Lives as long as the cached file, as dwarf.rs's sections do.
        std::borrow::Cow::Owned(v) => Vec::leak(v),
    };
    (!data.is_empty()).then_some((s.address(), data))
}

fn bases_of(file: &object::File<'static>) -> gimli::BaseAddresses {
    let mut bases = gimli::BaseAddresses::default();
    if let Some(t) = file.section_by_name(".text") {
        bases = bases.set_text(t.address());
    }
    if let Some(g) = file.section_by_name(".got") {
        bases = bases.set_got(g.address());
    }
    bases
}

impl UnwindInfo {
    /// Reads the unwind sections of `obj`; `None` when it has none at all
    /// (the walk then follows frame pointers).
    pub(crate) fn load(obj: &ElfObject) -> Result<Option<UnwindInfo>, UnwindError> {
        let file = object::File::parse(obj.data()).map_err(|source| UnwindError::Parse {
            path: obj.path().to_path_buf(),
            source,
        })?;
        let endian = endian_of(&file);
        let address_size = if obj.is_64() { 8 } else { 4 };
        let mut eh_bases = bases_of(&file);
        let eh_frame = section_data(&file, ".eh_frame").map(|(addr, data)| {
            eh_bases = eh_bases.clone().set_eh_frame(addr);
            let mut eh = EhFrame::new(data, endian);
            eh.set_address_size(address_size);
            eh
        });
        let hdr = section_data(&file, ".eh_frame_hdr").and_then(|(addr, data)| {
            eh_bases = eh_bases.clone().set_eh_frame_hdr(addr);
            gimli::EhFrameHdr::new(data, endian).parse(&eh_bases, address_size).ok()
        });
        // `.debug_frame`: in the file, else in its separate debug file
        // (that section alone: loading the file's DWARF inflated all of
        // libc6-dbg's, 100 ms, for a section libc does not use).
        let mut debug_bases = bases_of(&file);
        let mut debug_frame = section_data(&file, ".debug_frame").map(|(_, d)| (d, endian));
        if debug_frame.is_none() {
            if let Some(data) = obj.separate_debug_data() {
                if let Ok(dfile) = object::File::parse(data) {
                    debug_bases = bases_of(&dfile);
                    debug_frame = section_data(&dfile, ".debug_frame").map(|(_, d)| (d, endian_of(&dfile)));
                }
            }
        }
        let debug_frame = debug_frame.map(|(data, endian)| {
            let mut df = gimli::DebugFrame::new(data, endian);
            df.set_address_size(address_size);
            df
        });
        if eh_frame.is_none() && debug_frame.is_none() {
            return Ok(None);
        }
        Ok(Some(UnwindInfo {
            eh_bases,
            eh_frame,
            hdr,
            debug_bases,
            debug_frame,
        }))
    }

    /// The row for link-time address `svma`; `Ok(None)` when no FDE covers it.
    pub(crate) fn row(&self, ctx: &mut gimli::UnwindContext<usize>, svma: u64) -> Result<Option<Row>, UnwindError> {
        if let Some(eh) = &self.eh_frame {
            let fde = match self.hdr.as_ref().and_then(|h| h.table()) {
                Some(t) => t.fde_for_address(eh, &self.eh_bases, svma, EhFrame::cie_from_offset),
                None => eh.fde_for_address(&self.eh_bases, svma, EhFrame::cie_from_offset),
            };
            match fde {
                Ok(fde) => {
                    let row = fde
                        .unwind_info_for_address(eh, &self.eh_bases, ctx, svma)
                        .map_err(|source| UnwindError::EhFrame { svma, source })?;
                    return Ok(Some(Row {
                        row: row.clone(),
                        signal: fde.is_signal_trampoline(),
                        from_eh: true,
                    }));
                }
                Err(gimli::Error::NoUnwindInfoForAddress) => {}
                Err(source) => return Err(UnwindError::EhFrame { svma, source }),
            }
        }
        if let Some(df) = &self.debug_frame {
            // A linear search of the FDEs: .debug_frame is only the
            // fallback for objects built without .eh_frame.
            match df.fde_for_address(&self.debug_bases, svma, gimli::DebugFrame::cie_from_offset) {
                Ok(fde) => {
                    let row = fde
                        .unwind_info_for_address(df, &self.debug_bases, ctx, svma)
                        .map_err(|source| UnwindError::DebugFrame { svma, source })?;
                    return Ok(Some(Row {
                        row: row.clone(),
                        signal: fde.is_signal_trampoline(),
                        from_eh: false,
                    }));
                }
                Err(gimli::Error::NoUnwindInfoForAddress) => {}
                Err(source) => return Err(UnwindError::DebugFrame { svma, source }),
            }
        }
        Ok(None)
    }

    fn expression(
        &self,
        from_eh: bool,
        e: &gimli::UnwindExpression<usize>,
    ) -> Result<gimli::Expression<R>, UnwindError> {
        let r = match (from_eh, &self.eh_frame, &self.debug_frame) {
            (true, Some(eh), _) => e.get(eh),
            (false, _, Some(df)) => e.get(df),
            _ => return Err(UnwindError::NoSection),
        };
        r.map_err(UnwindError::Expression)
    }

    /// The caller's registers and this frame's CFA, by `row`.
    pub(crate) fn apply(&self, row: &Row, regs: &Regs, mem: &dyn Memory) -> Result<(Regs, u64), UnwindError> {
        let cfa = match row.row.cfa() {
            CfaRule::RegisterAndOffset { register, offset } => regs
                .get(usize::from(register.0))
                .copied()
                .flatten()
                .ok_or(UnwindError::CfaRegister(register.0))?
                .wrapping_add(*offset as u64),
            CfaRule::Expression(e) => eval(self.expression(row.from_eh, e)?, regs, None, mem)?,
        };
        let read = |addr: u64| -> Option<u64> {
            let mut b = [0u8; 8];
            mem.read(addr, &mut b).ok().map(|()| u64::from_le_bytes(b))
        };
        let mut next: Regs = [None; 17];
        for (r, slot) in next.iter_mut().enumerate() {
            let rule = row.row.register(gimli::Register(r as u16));
            *slot = match rule {
                // Callee-saved registers keep their value by the ABI;
                // caller-saved ones are unknown in the caller; an undefined
                // return address ends the stack (_start, clone3).
                RegisterRule::Undefined if CALLEE_SAVED.contains(&r) => regs[r],
                RegisterRule::Undefined => None,
                RegisterRule::SameValue => regs[r],
                RegisterRule::Offset(n) => read(cfa.wrapping_add(n as u64)),
                RegisterRule::ValOffset(n) => Some(cfa.wrapping_add(n as u64)),
                RegisterRule::Register(o) => regs.get(usize::from(o.0)).copied().flatten(),
                RegisterRule::Expression(e) => self
                    .expression(row.from_eh, &e)
                    .and_then(|x| eval(x, regs, Some(cfa), mem))
                    .ok()
                    .and_then(read),
                RegisterRule::ValExpression(e) => self
                    .expression(row.from_eh, &e)
                    .and_then(|x| eval(x, regs, Some(cfa), mem))
                    .ok(),
                _ => None,
            };
        }
        // The return address saved on the stack must be readable: a failed
        // read is a corrupt or unmapped stack, not the outermost frame.
        if let RegisterRule::Offset(n) = row.row.register(gimli::Register(RIP as u16)) {
            if next[RIP].is_none() {
                let at = cfa.wrapping_add(n as u64);
                return Err(UnwindError::ReturnAddress { at, cfa });
            }
        }
        // On x86_64 the caller's stack pointer is the CFA.
        next[RSP] = Some(cfa);
        Ok((next, cfa))
    }
}

/// Evaluates a CFI expression (glibc's PLT stubs define their CFA by one)
/// to an address; at most 1000 steps are left to gimli's own limits.
fn eval(expr: gimli::Expression<R>, regs: &Regs, cfa: Option<u64>, mem: &dyn Memory) -> Result<u64, UnwindError> {
    let encoding = gimli::Encoding {
        address_size: 8,
        format: gimli::Format::Dwarf64,
        version: 4,
    };
    let mut ev = expr.evaluation(encoding);
    if let Some(cfa) = cfa {
        // Register rules' expressions start with the CFA pushed.
        ev.set_initial_value(cfa);
    }
    let mut state = ev.evaluate().map_err(UnwindError::Expression)?;
    for _ in 0..1000 {
        use gimli::EvaluationResult as E;
        state = match state {
            E::Complete => {
                let pieces = ev.result();
                return match pieces.first().map(|p| &p.location) {
                    Some(gimli::Location::Address { address }) => Ok(*address),
                    Some(gimli::Location::Value { value }) => value.to_u64(!0).map_err(UnwindError::Value),
                    _ => Err(UnwindError::NoAddress),
                };
            }
            E::RequiresRegister { register, .. } => {
                let v = regs
                    .get(usize::from(register.0))
                    .copied()
                    .flatten()
                    .ok_or(UnwindError::UnknownRegister)?;
                ev.resume_with_register(gimli::Value::Generic(v))
            }
            E::RequiresMemory { address, size, .. } => {
                let mut b = [0u8; 8];
                let n = usize::from(size).min(8);
                mem.read(address, &mut b[..n])?;
                ev.resume_with_memory(gimli::Value::Generic(u64::from_le_bytes(b)))
            }
            E::RequiresCallFrameCfa => ev.resume_with_call_frame_cfa(cfa.ok_or(UnwindError::CfaInOwnRule)?),
            other => return Err(UnwindError::Unsupported(format!("{other:?}"))),
        }
        .map_err(UnwindError::Expression)?;
    }
    Err(UnwindError::TooLong)
}
