//! [`mpiq::Target`] over one LLDB target (a live process or a core file).
//!
//! The debug library calls back tens of thousands of times per dump. The
//! bridge answers memory reads from its page cache, and questions by name
//! (symbols, functions, types, fields, sizes) from its one cache of answers
//! (`mpiq::target::answers`), kept across commands while this target's
//! [identity](crate::ffi::TargetHost::identity) (its process and every
//! module's path, UUID, load address and symbol file) is the same: LLDB's
//! `FindTypes` alone costs more than a whole dump of a thousand operations.
//! What reaches this adapter goes to LLDB.

use cxx::UniquePtr;
use mpiq::{ByteOrder, Frame, ProcessDescription, Target, TargetError, ThreadStack, TypeId, TypeSizes};

use crate::ffi::TargetHost;

/// The largest read handed to LLDB at once.
const READ_PIECE: usize = 64 * 1024;

/// Most frames of one thread's stack.
const MAX_FRAMES: u32 = 256;

/// One LLDB target adapted to [`Target`]. A [`TypeId`] is the index of the
/// type in the host's table of this command.
pub struct LldbTarget {
    host: UniquePtr<TargetHost>,
    description: ProcessDescription,
    identity: String,
}

impl LldbTarget {
    /// Wraps a target whose process the caller checked is stopped.
    pub fn new(host: UniquePtr<TargetHost>) -> Self {
        let pid = host.pid();
        let description = ProcessDescription {
            pid: u32::try_from(pid).ok().filter(|&p| p != 0),
            executable: host.executable(),
        };
        let identity = host.identity();
        LldbTarget {
            host,
            description,
            identity,
        }
    }

    /// Name of a type found earlier (typedefs resolved), for diagnostics.
    pub fn type_name(&mut self, ty: TypeId) -> String {
        self.host.type_name(ty.0)
    }

    /// Fails with [`TargetError::Interrupted`] once the user pressed Ctrl-C.
    /// Called before every round trip to LLDB.
    fn check_interrupt(&self) -> Result<(), TargetError> {
        if self.host.interrupted() {
            Err(TargetError::Interrupted)
        } else {
            Ok(())
        }
    }
}

impl Target for LldbTarget {
    fn describe(&self) -> ProcessDescription {
        self.description.clone()
    }

    fn identity(&mut self) -> Option<String> {
        Some(self.identity.clone())
    }

    /// Read by pid (py-spy through the bridge) of a live process on this
    /// machine only: a core file's pid may be another process's now.
    fn python_stacks(&mut self) -> Result<Option<mpiq::PythonStacks>, TargetError> {
        if !self.host.is_live_here() {
            return Ok(None);
        }
        Ok(self.description.pid.and_then(mpiq::target::python::read_live))
    }

    fn stacks(&mut self) -> Result<Option<Vec<ThreadStack>>, TargetError> {
        let nonempty = |s: String| (!s.is_empty()).then_some(s);
        let mut threads = Vec::new();
        for t in 0..self.host.num_threads() {
            self.check_interrupt()?;
            let n = self.host.num_frames(t);
            let shown = n.min(MAX_FRAMES);
            let frames = (0..shown)
                .map(|f| Frame {
                    pc: format!("{:#x}", self.host.frame_pc(t, f)),
                    // lldb names a function without a symbol
                    // `___lldb_unnamed_symbolN`: no name, as gdb and the CLI.
                    function: nonempty(self.host.frame_function(t, f))
                        .filter(|n| !n.starts_with("___lldb_unnamed_symbol"))
                        .map(mpiq::Text::from),
                    object: nonempty(self.host.frame_object(t, f)).map(mpiq::Text::from),
                    file: nonempty(self.host.frame_file(t, f)).map(mpiq::Text::from),
                    line: Some(self.host.frame_line(t, f)).filter(|&l| l != 0),
                    inlined: self.host.frame_inlined(t, f),
                    // The pc's link-time address in its object, as the
                    // CLI gives it: ranks at one place read alike.
                    offset: Some(self.host.frame_file_address(t, f)).filter(|&a| a != u64::MAX),
                    python: false,
                })
                .collect();
            threads.push(ThreadStack {
                tid: self.host.thread_id(t),
                name: nonempty(self.host.thread_name(t)).map(mpiq::Text::from),
                frames,
                note: (n > shown).then(|| format!("stopped after {MAX_FRAMES} frames")),
            });
        }
        Ok(Some(threads))
    }

    /// LLDB counts frames as [`LldbTarget::stacks`] lists them (inlined
    /// frames too: `GetFrameAtIndex`, which gives an inlined frame the
    /// registers of the frame it is inlined into). `$` names are registers:
    /// `SBFrame::GetSP`/`GetPC` for `$sp`/`$pc`, `FindRegister` for the
    /// others, whose unreadable values (LLDB gives no caller-saved register
    /// in a caller) are `None`.
    fn frame_value(&mut self, thread: u64, frame: u32, name: &str) -> Result<Option<u64>, TargetError> {
        self.check_interrupt()?;
        let mut value = 0;
        Ok(self.host.frame_value(thread, frame, name, &mut value).then_some(value))
    }

    fn read_memory(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        if buf.is_empty() {
            return Ok(());
        }
        self.check_interrupt()?;
        let mut reason = String::new();
        // LLDB reads 64 KiB pieces about 2.5 times faster per byte than one
        // 256 KiB read (the bridge's cache block): measured 37 us per 64 KiB
        // against 350 us per 256 KiB on lldb 16.
        let mut at = addr;
        for piece in buf.chunks_mut(READ_PIECE) {
            if !self.host.read_memory(at, piece, &mut reason) {
                return Err(TargetError::Unreadable {
                    addr,
                    len: buf.len() as u64,
                    reason,
                });
            }
            at += piece.len() as u64;
        }
        Ok(())
    }

    fn find_symbol(&mut self, name: &str) -> Result<Option<u64>, TargetError> {
        self.check_interrupt()?;
        let mut addr = 0;
        Ok(self.host.find_symbol(name, &mut addr).then_some(addr))
    }

    fn find_function(&mut self, name: &str) -> Result<Option<u64>, TargetError> {
        self.check_interrupt()?;
        let mut addr = 0;
        Ok(self.host.find_function(name, &mut addr).then_some(addr))
    }

    fn find_type(&mut self, name: &str) -> Result<Option<TypeId>, TargetError> {
        self.check_interrupt()?;
        Ok(u64::try_from(self.host.pin_mut().find_type(name)).ok().map(TypeId))
    }

    fn field_offset(&mut self, ty: TypeId, field: &str) -> Result<Option<u64>, TargetError> {
        self.check_interrupt()?;
        Ok(u64::try_from(self.host.field_offset(ty.0, field)).ok())
    }

    fn size_of(&mut self, ty: TypeId) -> Result<Option<u64>, TargetError> {
        self.check_interrupt()?;
        Ok(u64::try_from(self.host.type_size(ty.0)).ok())
    }

    fn type_sizes(&mut self) -> Result<TypeSizes, TargetError> {
        let pointer = self.host.address_byte_size();
        let basic: Vec<u32> = (0..4).map(|i| self.host.basic_type_size(i)).collect();
        let sizes = if pointer != 0 && basic.iter().all(|&s| s != 0) {
            let int = |s: u32| i32::try_from(s).unwrap_or(i32::MAX);
            TypeSizes {
                short: int(basic[0]),
                int: int(basic[1]),
                long: int(basic[2]),
                long_long: int(basic[3]),
                pointer: int(pointer),
            }
        } else if pointer == 4 {
            // No C type system for this target: assume the usual ILP32.
            TypeSizes {
                short: 2,
                int: 4,
                long: 4,
                long_long: 8,
                pointer: 4,
            }
        } else {
            TypeSizes::LP64
        };
        Ok(sizes)
    }

    fn byte_order(&mut self) -> ByteOrder {
        match self.host.byte_order() {
            0 => ByteOrder::Little,
            1 => ByteOrder::Big,
            _ => ByteOrder::host(),
        }
    }
}
