//! Call stacks of live processes (docs/design/stacks.md §1–2): the
//! registers of every thread, read when [`crate::ptrace`] stops it, unwound
//! through each object's CFI (`.eh_frame` / `.eh_frame_hdr` /
//! `.debug_frame`, all x86_64 registers) with a frame-pointer fallback,
//! then symbolised with addr2line on the CLI's DWARF and the symbol tables.
//!
//! An [`Unwinder`] lives for one run: each object's unwind sections and
//! symboliser are built once and shared by every process that maps it.

mod cfi;
mod error;
mod output;
mod stack;
mod symbolize;
mod values;
mod vdso;
mod walk;

use std::collections::HashMap;
use std::sync::Arc;

use crate::elf::ElfObject;
use crate::image::{MappedObject, Memory};
use crate::regs::{Regs, ThreadRegs};

use cfi::{Row, UnwindInfo};
pub use error::UnwindError;
pub use output::{frame_line, render_text, to_json, Output};
pub use stack::{Frame, How, ThreadStack};
use symbolize::Symbolizer;
use values::FrameState;

/// Frames per stack unless `MPIQ_MAX_FRAMES` says otherwise.
pub const DEFAULT_MAX_FRAMES: usize = 256;
/// Time for all the threads of one process (the first use of an object's
/// DWARF is part of it); threads left then get a note.
const PROCESS_BUDGET: std::time::Duration = std::time::Duration::from_secs(10);
/// The most `MPIQ_MAX_FRAMES` may ask for.
const MAX_MAX_FRAMES: usize = 1 << 16;

struct ObjState {
    /// Keeps the object alive while its address is the key.
    _file: Arc<ElfObject>,
    unwind: Option<UnwindInfo>,
    symbolizer: Option<Symbolizer>,
    /// Rows and symbols already found, by address in the object: the ranks
    /// of a job stop at the same few pcs (most ranks hit these).
    rows: HashMap<u64, Option<Row>>,
    symbols: HashMap<u64, Vec<symbolize::SymFrame>>,
}

/// Most addresses remembered per object (rows and symbols each).
const MEMO: usize = 1 << 16;

/// Per-run state: each object's parsed CFI and symboliser.
pub struct Unwinder {
    objects: HashMap<usize, ObjState>,
    ctx: Box<gimli::UnwindContext<usize>>,
    max_frames: usize,
    /// Objects whose unwind information could not be read, and why.
    pub warnings: Vec<String>,
}

impl std::fmt::Debug for Unwinder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Unwinder")
            .field("objects", &self.objects.len())
            .field("max_frames", &self.max_frames)
            .finish()
    }
}

impl Default for Unwinder {
    fn default() -> Self {
        Self::new()
    }
}

/// The unwinder of this run that the bridge's `--stacks` uses (through
/// [`mpiq::Target::stacks`]): every rank of a job shares its parsed unwind
/// information and symbols.
pub fn with_shared<R>(f: impl FnOnce(&mut Unwinder) -> R) -> R {
    static SHARED: std::sync::Mutex<Option<Unwinder>> = std::sync::Mutex::new(None);
    let mut guard = SHARED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    f(guard.get_or_insert_with(Unwinder::new))
}

/// One thread's stack in the bridge's model.
pub fn to_model(t: ThreadStack) -> mpiq::ThreadStack {
    mpiq::ThreadStack {
        tid: u64::try_from(t.tid).unwrap_or_default(),
        name: t.name.as_deref().map(mpiq::Text::intern),
        frames: t
            .frames
            .into_iter()
            .map(|f| mpiq::Frame {
                pc: format!("{:#x}", f.pc),
                function: f.function.as_deref().map(mpiq::Text::intern),
                object: f.object.as_deref().map(mpiq::Text::intern),
                file: f.file.as_deref().map(mpiq::Text::intern),
                line: f.line,
                inlined: f.inlined,
                offset: f.offset,
                python: false,
            })
            .collect(),
        note: t.note,
    }
}

/// `MPIQ_MAX_FRAMES` if set to a number in 1..=65536, else the default.
pub fn max_frames_from_env() -> usize {
    std::env::var("MPIQ_MAX_FRAMES")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| (1..=MAX_MAX_FRAMES).contains(n))
        .unwrap_or(DEFAULT_MAX_FRAMES)
}

fn key(file: &Arc<ElfObject>) -> usize {
    Arc::as_ptr(file) as usize
}

impl Unwinder {
    /// A fresh unwinder (frame limit from `MPIQ_MAX_FRAMES`).
    pub fn new() -> Unwinder {
        Self::with_max_frames(max_frames_from_env())
    }

    /// A fresh unwinder with this frame limit.
    pub fn with_max_frames(max_frames: usize) -> Unwinder {
        Unwinder {
            objects: HashMap::new(),
            ctx: Box::new(gimli::UnwindContext::new()),
            max_frames: max_frames.max(1),
            warnings: Vec::new(),
        }
    }

    fn state(&mut self, objects: &[MappedObject], index: usize) -> Option<&mut ObjState> {
        let file = &objects.get(index)?.file;
        let warnings = &mut self.warnings;
        Some(self.objects.entry(key(file)).or_insert_with(|| {
            let unwind = UnwindInfo::load(file).unwrap_or_else(|e| {
                warnings.push(e.to_string());
                None
            });
            ObjState {
                _file: Arc::clone(file),
                unwind,
                symbolizer: None,
                rows: HashMap::new(),
                symbols: HashMap::new(),
            }
        }))
    }

    fn symbolize(
        &mut self,
        objects: &[MappedObject],
        raw_index: usize,
        raw: &walk::RawFrame,
    ) -> Vec<(Frame, FrameState)> {
        let plain = |function: Option<String>| Frame {
            pc: raw.pc,
            function,
            object: None,
            offset: None,
            file: None,
            line: None,
            inlined: false,
            how: raw.how,
        };
        let state = FrameState {
            regs: raw.regs,
            cfa: raw.cfa,
            object: None,
            bias: 0,
            probe: raw.probe,
            pc: raw.pc,
            die: None,
            function_die: None,
            raw: raw_index,
        };
        let Some((index, obj)) = raw.object.and_then(|i| Some((i, objects.get(i)?))) else {
            return vec![(plain(None), state)];
        };
        let (name, bias) = (obj.name.clone(), obj.bias);
        let Some(obj_state) = self.state(objects, index) else {
            return vec![(plain(None), state)];
        };
        let file = Arc::clone(&obj_state._file);
        let svma = raw.probe.wrapping_sub(bias);
        let found = match obj_state.symbols.get(&svma) {
            Some(known) => known.clone(),
            None => {
                let sym = obj_state.symbolizer.get_or_insert_with(|| Symbolizer::new(&file));
                let found = sym.lookup(svma);
                if obj_state.symbols.len() < MEMO {
                    obj_state.symbols.insert(svma, found.clone());
                }
                found
            }
        };
        let base = Frame {
            object: Some(name),
            offset: Some(raw.pc.wrapping_sub(bias)),
            ..plain(None)
        };
        let state = FrameState {
            object: Some(key(&file)),
            bias,
            function_die: found.last().and_then(|f| f.die),
            ..state
        };
        if found.is_empty() {
            return vec![(base, state)];
        }
        let last = found.len() - 1;
        found
            .into_iter()
            .enumerate()
            .map(|(i, f)| {
                let state = FrameState {
                    die: f.die,
                    ..state.clone()
                };
                let frame = Frame {
                    function: f.function,
                    file: f.file,
                    line: f.line,
                    inlined: i < last,
                    ..base.clone()
                };
                (frame, state)
            })
            .collect()
    }

    /// The stack of one thread from its registers; `objects` are the
    /// process's mapped objects (its image's, plus the vdso).
    pub fn thread_stack(&mut self, objects: &[MappedObject], mem: &dyn Memory, tid: i32, regs: &Regs) -> ThreadStack {
        let ranges = walk::code_ranges(objects);
        let max = self.max_frames;
        let (raw, note) = walk::walk(self, objects, &ranges, mem, *regs, max);
        let mut frames = Vec::with_capacity(raw.len());
        let mut states = Vec::with_capacity(raw.len());
        for (i, r) in raw.iter().enumerate() {
            for (frame, state) in self.symbolize(objects, i, r) {
                frames.push(frame);
                states.push(state);
            }
        }
        ThreadStack {
            tid,
            name: None,
            frames,
            note,
            states,
        }
    }

    /// The stacks of every thread of a process, in thread id order, from
    /// plain data: each thread's registers (none for a live process that is
    /// not stopped), the process's mapped objects and its memory. `live` is
    /// the pid of a live process held stopped: its vdso (from its auxiliary
    /// vector) is unwound through too, and its threads' names are read.
    pub fn process_stacks(
        &mut self,
        threads: &[ThreadRegs],
        objects: &[MappedObject],
        mem: &dyn Memory,
        live: Option<i32>,
    ) -> Vec<ThreadStack> {
        let mut regs = threads.to_vec();
        regs.sort_by_key(|t| t.tid);
        let mut objects = objects.to_vec();
        if let Some(pid) = live {
            objects.extend(vdso::live_vdso(pid, mem));
        }
        let deadline = std::time::Instant::now() + PROCESS_BUDGET;
        regs.iter()
            .map(|t| {
                let late = if crate::interrupt::interrupted() {
                    Some("not read: interrupted")
                } else if std::time::Instant::now() > deadline {
                    Some("not read: time budget of the process spent")
                } else {
                    None
                };
                let mut stack = match (&t.regs, late) {
                    (_, Some(why)) => ThreadStack {
                        tid: t.tid,
                        name: None,
                        frames: Vec::new(),
                        note: Some(why.to_string()),
                        states: Vec::new(),
                    },
                    (Ok(r), None) => self.thread_stack(&objects, mem, t.tid, r),
                    (Err(e), None) => ThreadStack {
                        tid: t.tid,
                        name: None,
                        frames: Vec::new(),
                        note: Some(e.to_string()),
                        states: Vec::new(),
                    },
                };
                if let Some(pid) = live {
                    stack.name = std::fs::read_to_string(format!("/proc/{pid}/task/{}/comm", t.tid))
                        .ok()
                        .map(|s| s.trim_end().to_string());
                }
                stack
            })
            .collect()
    }
}

impl Unwinder {
    /// The value of `name` in frame `frame` of `stack` (one of this
    /// unwinder's stacks), read through `mem`: see [`values`]. A name
    /// starting with `$` is a register of that frame as this unwinder
    /// recovered it (`$sp`, `$pc`, `$rbx`, …: [`values::register`]).
    pub fn frame_value(
        &self,
        stack: &ThreadStack,
        frame: usize,
        name: &str,
        mem: &dyn Memory,
    ) -> Result<Option<u64>, mpiq::TargetError> {
        if let Some(register) = name.strip_prefix('$') {
            // A frame-pointer step at or inside this frame only assumed
            // the callee-saved registers unchanged.
            let by_frame_pointer = stack
                .frames
                .iter()
                .take(frame.saturating_add(1))
                .any(|f| f.how == How::FramePointer);
            return Ok(values::register(&stack.states, frame, register, by_frame_pointer));
        }
        values::frame_value(self, &stack.states, frame, name, mem)
    }
}

impl values::Dwarfs for Unwinder {
    fn dwarf(&self, object: usize) -> Option<(&addr2line::Context<crate::dwarf::R>, &crate::dwarf::DebugInfo)> {
        self.objects.get(&object)?.symbolizer.as_ref()?.dwarf()
    }
}

impl walk::Rows for Unwinder {
    fn unwind_info(&mut self, objects: &[MappedObject], index: usize) -> Option<&UnwindInfo> {
        self.state(objects, index)?.unwind.as_ref()
    }

    fn row(&mut self, objects: &[MappedObject], index: usize, svma: u64) -> Result<Option<Row>, UnwindError> {
        let file = &objects.get(index).ok_or(UnwindError::NoSuchObject)?.file;
        self.state(objects, index);
        let Some(state) = self.objects.get_mut(&key(file)) else {
            return Ok(None);
        };
        if let Some(row) = state.rows.get(&svma) {
            return Ok(row.clone());
        }
        let Some(info) = state.unwind.as_ref() else {
            return Ok(None);
        };
        let row = info.row(&mut self.ctx, svma)?;
        if state.rows.len() < MEMO {
            state.rows.insert(svma, row.clone());
        }
        Ok(row)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LiveProcess;

    /// Garbage registers against this very process (its memory and
    /// objects): every walk ends, within the frame limit, and a stack that
    /// ends early says why.
    #[test]
    fn garbage_registers_end_with_a_note() {
        let me = LiveProcess::open(std::process::id() as i32).unwrap();
        let mut u = Unwinder::with_max_frames(64);
        let local = 0u64;
        let sp = std::ptr::addr_of!(local) as u64;
        let code = garbage_registers_end_with_a_note as *const () as usize as u64;
        let mut regs: Regs = [Some(0); 17];
        regs[cfi::RSP] = Some(sp);

        regs[cfi::RIP] = Some(0);
        let s = u.thread_stack(me.image().objects(), me.memory(), 1, &regs);
        assert!(s.frames.is_empty());
        assert_eq!(s.note.as_deref(), Some("the pc is 0"));

        regs[cfi::RIP] = Some(0x10);
        let s = u.thread_stack(me.image().objects(), me.memory(), 1, &regs);
        assert_eq!(s.frames.len(), 1, "{s:?}");
        assert!(s.note.as_deref().unwrap().contains("not in mapped code"), "{s:?}");

        // A simple xorshift: pcs in and near our code, stack pointers on and
        // off the stack, frame pointers anywhere.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..300 {
            for r in regs.iter_mut() {
                *r = Some(next());
            }
            regs[cfi::RIP] = Some(code.wrapping_add(next() % 4096));
            regs[cfi::RSP] = Some(match next() % 3 {
                0 => sp.wrapping_add(next() % 4096),
                1 => sp.wrapping_sub(next() % 256),
                _ => next(),
            });
            regs[6] = Some(if next() % 2 == 0 {
                sp.wrapping_add(next() % 512)
            } else {
                next()
            });
            let s = u.thread_stack(me.image().objects(), me.memory(), 1, &regs);
            let real = s.frames.iter().filter(|f| !f.inlined).count();
            assert!(real <= 64, "{s:?}");
            if real == 64 {
                assert!(s.note.is_some(), "{s:?}");
            }
        }
    }
}
