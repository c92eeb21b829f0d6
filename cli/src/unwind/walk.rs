//! The walk of one thread's stack (docs/design/stacks.md §1.5, §1.6): CFI
//! rows where an object has them, frame pointers where it has none, and
//! the bounds that end a stack with a note instead of looping: a frame
//! limit, a pc of 0 or outside every mapped object, a stack pointer that
//! does not move up, an unreadable stack word.

use super::cfi::{Row, UnwindInfo, RIP, RSP};
use super::error::UnwindError;
use super::stack::How;
use crate::image::{MappedObject, Memory};
use crate::regs::Regs;

/// DWARF number of the frame pointer.
const RBP: usize = 6;
/// Consecutive frames found by frame pointers before the walk gives up.
const MAX_FP_RUN: usize = 16;
/// A frame pointer further than this above the stack pointer is garbage.
const MAX_FRAME_SIZE: u64 = 64 << 20;

/// One frame before symbolisation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RawFrame {
    /// The pc (a return address for callers).
    pub(crate) pc: u64,
    /// The address looked up: the pc itself for frame 0 and after a signal
    /// frame, the pc − 1 (inside the call) otherwise.
    pub(crate) probe: u64,
    /// Index of the mapped object holding `probe`, if any.
    pub(crate) object: Option<usize>,
    /// How this frame's registers were found.
    pub(crate) how: How,
    /// The registers in this frame (all known in frame 0; callee-saved
    /// ones and the stack pointer recovered in callers).
    pub(crate) regs: Regs,
    /// The canonical frame address (the caller's stack pointer), when the
    /// step to the caller found it.
    pub(crate) cfa: Option<u64>,
}

/// Where each object's code is: (first, end, index in the image), sorted.
pub(crate) fn code_ranges(objects: &[MappedObject]) -> Vec<(u64, u64, usize)> {
    let mut out = Vec::new();
    for (i, o) in objects.iter().enumerate() {
        for s in o.file.loads() {
            let lo = s.vaddr.wrapping_add(o.bias);
            out.push((lo, lo.saturating_add(s.memsz), i));
        }
    }
    out.sort_unstable();
    out
}

fn object_at(ranges: &[(u64, u64, usize)], addr: u64) -> Option<usize> {
    let i = ranges.partition_point(|r| r.0 <= addr).checked_sub(1)?;
    let r = ranges.get(i)?;
    (addr < r.1).then_some(r.2)
}

fn read_word(mem: &dyn Memory, addr: u64) -> Result<u64, UnwindError> {
    let mut b = [0u8; 8];
    mem.read(addr, &mut b)
        .map_err(|source| UnwindError::StackWord { addr, source })?;
    Ok(u64::from_le_bytes(b))
}

/// One step by the frame pointer: `rbp` points at the saved `rbp`, the
/// return address above it.
fn frame_pointer_step(regs: &Regs, mem: &dyn Memory) -> Result<Regs, UnwindError> {
    let (Some(sp), Some(bp)) = (regs[RSP], regs[RBP]) else {
        return Err(UnwindError::NoFramePointer);
    };
    if bp % 8 != 0 || bp < sp || bp - sp > MAX_FRAME_SIZE {
        return Err(UnwindError::BadFramePointer(bp));
    }
    let mut next: Regs = [None; 17];
    for r in [3, 12, 13, 14, 15] {
        next[r] = regs[r];
    }
    next[RBP] = Some(read_word(mem, bp)?);
    next[RIP] = Some(read_word(mem, bp.wrapping_add(8))?);
    next[RSP] = Some(bp.wrapping_add(16));
    Ok(next)
}

/// What the walk needs from the run: each object's CFI (parsed once).
pub(crate) trait Rows {
    /// The CFI of object `index` of the image, `None` when it has none.
    fn unwind_info(&mut self, objects: &[MappedObject], index: usize) -> Option<&UnwindInfo>;
    /// The row for `svma` in object `index`.
    fn row(&mut self, objects: &[MappedObject], index: usize, svma: u64) -> Result<Option<Row>, UnwindError>;
}

/// Walks one thread from its registers. Returns the frames and, when the
/// stack did not end normally (outermost frame, undefined return address,
/// a pc of 0), why.
pub(crate) fn walk(
    rows: &mut dyn Rows,
    objects: &[MappedObject],
    ranges: &[(u64, u64, usize)],
    mem: &dyn Memory,
    regs0: Regs,
    max_frames: usize,
) -> (Vec<RawFrame>, Option<String>) {
    let mut frames = Vec::new();
    let mut regs = regs0;
    let mut exact = true;
    let mut how = How::Registers;
    let mut fp_run = 0;
    loop {
        if frames.len() >= max_frames {
            return (
                frames,
                Some(format!("stack cut at {max_frames} frames (MPIQ_MAX_FRAMES)")),
            );
        }
        let Some(pc) = regs[RIP] else {
            // The CFI said the return address is undefined: the outermost
            // frame. Unknown in frame 0 cannot happen with real registers.
            let note = frames.is_empty().then(|| "the pc is not known".to_string());
            return (frames, note);
        };
        if pc == 0 {
            // Real outermost frames say so by an undefined return address
            // (above); a 0 read from the stack is a corrupt one.
            let note = if frames.is_empty() {
                "the pc is 0"
            } else {
                "the return address is 0 (a corrupt stack, or code without a proper outermost frame)"
            };
            return (frames, Some(note.to_string()));
        }
        let probe = if exact { pc } else { pc.wrapping_sub(1) };
        let object = object_at(ranges, probe);
        frames.push(RawFrame {
            pc,
            probe,
            object,
            how,
            regs,
            cfa: None,
        });
        let (step, signal) = match object {
            None if frames.len() == 1 => {
                // A pc in no object (the vdso, JIT code, a wild jump): one
                // frame-pointer step may still find the callers.
                match frame_pointer_step(&regs, mem) {
                    Ok(next) => ((next, How::FramePointer), false),
                    Err(e) => return (frames, Some(format!("pc {pc:#x} is not in mapped code ({e})"))),
                }
            }
            None => return (frames, Some(format!("return address {pc:#x} is not in mapped code"))),
            Some(i) => {
                let bias = objects.get(i).map_or(0, |o| o.bias);
                let row = if rows.unwind_info(objects, i).is_some() {
                    match rows.row(objects, i, probe.wrapping_sub(bias)) {
                        Ok(r) => r,
                        Err(e) => return (frames, Some(e.to_string())),
                    }
                } else {
                    None
                };
                match row {
                    Some(row) => {
                        let info = rows.unwind_info(objects, i);
                        match info.map(|info| info.apply(&row, &regs, mem)) {
                            Some(Ok((next, _cfa))) => ((next, How::Cfi), row.signal),
                            Some(Err(e)) => return (frames, Some(e.to_string())),
                            None => return (frames, Some("unwind information vanished".into())),
                        }
                    }
                    None => {
                        fp_run += 1;
                        if fp_run > MAX_FP_RUN {
                            return (
                                frames,
                                Some(format!("more than {MAX_FP_RUN} frames without unwind information")),
                            );
                        }
                        match frame_pointer_step(&regs, mem) {
                            Ok(next) => ((next, How::FramePointer), false),
                            Err(e) => return (frames, Some(format!("no unwind information for {pc:#x} and {e}"))),
                        }
                    }
                }
            }
        };
        let (next, next_how) = step;
        // On x86_64 the CFA is the caller's stack pointer, by CFI or by
        // frame pointer alike.
        if let Some(f) = frames.last_mut() {
            f.cfa = next[RSP];
        }
        if next_how == How::Cfi {
            fp_run = 0;
        }
        // The stack grows down: every caller's frame is above its callee's.
        // Strictly increasing also rules out loops.
        match (regs[RSP], next[RSP]) {
            (Some(sp), Some(up)) if up > sp => {}
            _ if next[RIP].is_none() && next_how == How::Cfi => {
                // The CFI says the return address is undefined: the
                // outermost frame, whatever its stack pointer.
                return (frames, None);
            }
            _ => {
                return (
                    frames,
                    Some("stack pointer did not move up (corrupt stack or loop)".into()),
                )
            }
        }
        regs = next;
        how = next_how;
        exact = signal;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Words(Vec<(u64, u64)>);

    impl Memory for Words {
        fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), mpiq::TargetError> {
            match self.0.iter().find(|w| w.0 == addr) {
                Some(w) if buf.len() == 8 => {
                    buf.copy_from_slice(&w.1.to_le_bytes());
                    Ok(())
                }
                _ => Err(mpiq::TargetError::Unreadable {
                    addr,
                    len: buf.len() as u64,
                    reason: "test".into(),
                }),
            }
        }
    }

    #[test]
    fn frame_pointer_step_checks_the_pointer() {
        let mut regs: Regs = [None; 17];
        regs[RSP] = Some(0x1000);
        regs[RBP] = Some(0x1010);
        let mem = Words(vec![(0x1010, 0x1100), (0x1018, 0x4242)]);
        let next = frame_pointer_step(&regs, &mem).unwrap();
        assert_eq!(
            (next[RIP], next[RBP], next[RSP]),
            (Some(0x4242), Some(0x1100), Some(0x1020))
        );
        // Below the stack pointer, misaligned, or unreadable: refused.
        for bp in [0x800, 0x1011, 0x2000] {
            regs[RBP] = Some(bp);
            assert!(frame_pointer_step(&regs, &mem).is_err(), "{bp:#x}");
        }
    }

    #[test]
    fn code_lookup_is_by_range() {
        let ranges = [(0x1000, 0x2000, 0), (0x5000, 0x6000, 1)];
        assert_eq!(object_at(&ranges, 0x1000), Some(0));
        assert_eq!(object_at(&ranges, 0x1fff), Some(0));
        assert_eq!(object_at(&ranges, 0x2000), None);
        assert_eq!(object_at(&ranges, 0x5800), Some(1));
        assert_eq!(object_at(&ranges, 0x10), None);
    }
}
