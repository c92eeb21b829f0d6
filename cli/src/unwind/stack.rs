//! What the unwinder gives: each thread's frames, innermost first, and how
//! each frame's registers were found.

use super::values::FrameState;

/// How a frame's registers were found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum How {
    /// The thread's own registers (frame 0).
    Registers,
    /// The CFI of the callee.
    Cfi,
    /// The callee's frame pointer (it had no CFI).
    FramePointer,
}

impl How {
    /// The word used in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            How::Registers => "registers",
            How::Cfi => "cfi",
            How::FramePointer => "frame_pointer",
        }
    }
}

/// One frame; inlined functions get a frame each (as gdb shows them), all
/// with the same pc.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The pc: a return address for callers, as gdb prints it.
    pub pc: u64,
    /// The function, demangled, if known.
    pub function: Option<String>,
    /// The object's path, if the pc is in one.
    pub object: Option<String>,
    /// The pc's link-time address in the object (`object+0xOFFSET`).
    pub offset: Option<u64>,
    /// The source file, when the object has DWARF.
    pub file: Option<String>,
    /// The source line (the call's line for callers).
    pub line: Option<u32>,
    /// An inlined function (its caller is the next frame, same pc).
    pub inlined: bool,
    /// How the frame's registers were found.
    pub how: How,
}

/// The stack of one thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadStack {
    /// The thread id (the main thread's is the pid).
    pub tid: i32,
    /// `/proc/PID/task/TID/comm`, if readable.
    pub name: Option<String>,
    /// Innermost first.
    pub frames: Vec<Frame>,
    /// Why the stack ends early (or was not read), if it did.
    pub note: Option<String>,
    /// What [`Unwinder::frame_value`] needs of each frame (registers, CFA,
    /// DIE), one per frame; not part of any output.
    pub(crate) states: Vec<FrameState>,
}
