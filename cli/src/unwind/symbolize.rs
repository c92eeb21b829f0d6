//! Names for pcs (docs/design/stacks.md §2): addr2line on the DWARF the CLI
//! already loads (function, inlined callers, file and line), else the
//! symbol tables (`.symtab`, `.dynsym`, the separate debug file's
//! `.symtab`), accepted only inside the symbol's size, so a stripped
//! library's static functions show as `lib+0xOFFSET`, never as the
//! exported name before them.

use std::borrow::Cow;

use object::{Object, ObjectSymbol, SymbolKind};

use std::sync::Arc;

use crate::dwarf::{DebugInfo, R};
use crate::elf::ElfObject;

/// What is known of one pc: one entry per function, the innermost inlined
/// one first, the function the pc is really in last.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SymFrame {
    pub(crate) function: Option<String>,
    pub(crate) file: Option<String>,
    pub(crate) line: Option<u32>,
    /// The function's DIE (`DW_TAG_subprogram` or
    /// `DW_TAG_inlined_subroutine`) in the unit of the pc, for
    /// [`super::values`].
    pub(crate) die: Option<usize>,
}

/// An object defining one of these functions has frames whose values
/// mpiq reads (`Target::frame_value`): an MPI library (its calls'
/// arguments) and the Python runtime (`Py_RunMain`'s exit code). A new
/// reader of frame values in another object must name one of its
/// functions here, or it gets no values where that object's DWARF is in a
/// separate debug file.
const READS_VALUES: [&str; 3] = ["MPI_Init", "PMPI_Init", "Py_RunMain"];

/// The symbolisation data of one object, built once per run.
pub(crate) struct Symbolizer {
    ctx: Option<addr2line::Context<R>>,
    /// The DWARF the context was built on (its DIEs, for values).
    debug: Option<Arc<DebugInfo>>,
    /// Function symbols: (address, size, name), sorted by address, one per
    /// address.
    syms: Vec<(u64, u64, Box<str>)>,
}

impl std::fmt::Debug for Symbolizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Symbolizer")
            .field("dwarf", &self.ctx.is_some())
            .field("symbols", &self.syms.len())
            .finish()
    }
}

fn function_symbols(data: &'static [u8], out: &mut Vec<(u64, u64, bool, Box<str>)>) {
    let Ok(file) = object::File::parse(data) else {
        return;
    };
    for sym in file.symbols().chain(file.dynamic_symbols()) {
        if sym.kind() != SymbolKind::Text || sym.address() == 0 || !sym.is_definition() {
            continue;
        }
        if let Ok(name) = sym.name() {
            if !name.is_empty() {
                out.push((sym.address(), sym.size(), sym.is_global(), name.into()));
            }
        }
    }
}

impl Symbolizer {
    /// Reads what `obj` offers; never fails (an object without anything
    /// gives `object+0xOFFSET` frames).
    ///
    /// DWARF (inlined calls, source lines, the DIEs argument values are
    /// read from) is used when it is in the object itself (a program or
    /// an MPI built with `-g`), or when the object's frames have values
    /// mpiq reads ([`READS_VALUES`]). Another
    /// object's separate debug file (a distribution's `libc6-dbg`) gives
    /// its full symbol table only: inflating and parsing libc's DWARF
    /// cost every new process 150 ms, for source lines inside libc.
    pub(crate) fn new(obj: &ElfObject) -> Symbolizer {
        let wants_dwarf = obj.has_dwarf() || READS_VALUES.iter().any(|n| obj.function_symbol(n).is_some());
        let debug = wants_dwarf.then(|| obj.debug_info().ok().flatten()).flatten();
        let ctx = debug
            .as_ref()
            .and_then(|d| addr2line::Context::from_arc_dwarf(d.dwarf()).ok());
        let mut all = Vec::new();
        function_symbols(obj.data(), &mut all);
        match &debug {
            Some(d) => function_symbols(d.data(), &mut all),
            None => {
                if let Some(data) = obj.separate_debug_data() {
                    function_symbols(data, &mut all);
                }
            }
        }
        // For aliases at one address prefer a global name, then not the
        // profiling `PMPI_` spelling, then the shorter one.
        all.sort_by(|a, b| {
            (a.0, !a.2, a.3.starts_with("PMPI_"), a.3.len(), &a.3).cmp(&(
                b.0,
                !b.2,
                b.3.starts_with("PMPI_"),
                b.3.len(),
                &b.3,
            ))
        });
        all.dedup_by_key(|s| s.0);
        let syms = all.into_iter().map(|(a, s, _, n)| (a, s, n)).collect();
        Symbolizer { ctx, debug, syms }
    }

    /// The addr2line context and the DWARF under it, if the object has
    /// DWARF.
    pub(crate) fn dwarf(&self) -> Option<(&addr2line::Context<R>, &DebugInfo)> {
        Some((self.ctx.as_ref()?, self.debug.as_deref()?))
    }

    /// The functions at link-time address `svma`, innermost first; empty
    /// when nothing is known.
    pub(crate) fn lookup(&self, svma: u64) -> Vec<SymFrame> {
        let mut out = Vec::new();
        if let Some(ctx) = &self.ctx {
            if let Ok(mut it) = ctx.find_frames(svma).skip_all_loads() {
                // Bounded: a corrupt inlining tree cannot make this loop.
                for _ in 0..64 {
                    let Ok(Some(f)) = it.next() else { break };
                    out.push(SymFrame {
                        function: f.function.as_ref().and_then(|n| n.demangle().ok()).map(Cow::into_owned),
                        file: f.location.as_ref().and_then(|l| l.file).map(str::to_owned),
                        line: f.location.as_ref().and_then(|l| l.line),
                        die: f.dw_die_offset.map(|o| o.0),
                    });
                }
            }
        }
        // The outermost function from the symbol table when DWARF has no
        // name for it (assembly, objects without DWARF).
        if out.last().is_none_or(|f| f.function.is_none()) {
            if let Some(name) = self.symbol(svma) {
                match out.last_mut() {
                    Some(f) => f.function = Some(name),
                    None => out.push(SymFrame {
                        function: Some(name),
                        ..SymFrame::default()
                    }),
                }
            }
        }
        out
    }

    /// The function symbol that holds `svma`, demangled.
    fn symbol(&self, svma: u64) -> Option<String> {
        let i = self.syms.partition_point(|s| s.0 <= svma).checked_sub(1)?;
        let (addr, size, name) = self.syms.get(i)?;
        (svma < addr.saturating_add((*size).max(1)))
            .then(|| addr2line::demangle_auto(Cow::Borrowed(&**name), None).into_owned())
    }
}
