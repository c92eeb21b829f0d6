//! [`Process`]: a process image plus its memory, the [`mpiq::Target`] the
//! bridge reads. Live processes ([`crate::live`]) and core files
//! ([`crate::core`]) differ only in where memory comes from and whether
//! something must be released at the end.

use mpiq::{ByteOrder, ProcessDescription, Target, TargetError, TargetExt, TypeId, TypeSizes};

use crate::image::{Memory, ProcessImage};
use crate::mapped::FileEntry;
use crate::ptrace::{AttachError, AttachInfo, Attachment};
use crate::regs::ThreadRegs;
use crate::unwind::Unwinder;

/// A process to dump.
#[derive(Debug)]
pub struct Process<M: Memory> {
    pub(crate) pid: Option<u32>,
    pub(crate) executable: String,
    pub(crate) image: ProcessImage,
    pub(crate) mem: M,
    pub(crate) world_rank: Option<i32>,
    pub(crate) attachment: Option<Attachment>,
    /// A core file's threads (`NT_PRSTATUS`).
    pub(crate) core_threads: Vec<ThreadRegs>,
    /// The core file this process is read from (`None`: live).
    pub(crate) core_file: Option<std::path::PathBuf>,
    /// The code mappings of the Python objects a core file left out
    /// (`crate::pycore`), for py-spy.
    pub(crate) core_python_maps: Vec<FileEntry>,
    pub(crate) warnings: Vec<String>,
    /// The stacks [`Target::stacks`] gave, with what
    /// [`Target::frame_value`] needs of each frame; cleared on detach.
    pub(crate) unwound: Option<Vec<crate::unwind::ThreadStack>>,
    /// What the kernel said of a live process before it was stopped.
    pub(crate) os: Option<mpiq::OsState>,
}

impl<M: Memory> Process<M> {
    /// The objects, in search order.
    pub fn image(&self) -> &ProcessImage {
        &self.image
    }

    /// The memory.
    pub fn memory(&self) -> &M {
        &self.mem
    }

    /// Process id, if known.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// Whether the process maps a CPython interpreter or its library.
    pub fn maps_python(&self) -> bool {
        let objects = self.image.objects();
        objects.iter().any(|o| mpiq::target::python::is_python_object(&o.name))
    }

    /// The pid of a live process this mpiq holds stopped that maps a CPython
    /// interpreter: one whose Python frames are read by pid.
    pub fn live_python_pid(&self) -> Option<u32> {
        self.pid
            .filter(|_| self.attachment.is_some() && self.core_file.is_none() && self.maps_python())
    }

    /// The main executable's path.
    pub fn executable(&self) -> &str {
        &self.executable
    }

    /// Sets the rank in `MPI_COMM_WORLD` (known from a starter's proctable).
    pub fn set_world_rank(&mut self, rank: Option<i32>) {
        self.world_rank = rank;
    }

    /// Things noticed while opening (objects that could not be read).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// What the kernel said of the live process before it was stopped
    /// ([`crate::procs::os_state`]).
    pub fn os(&self) -> Option<&mpiq::OsState> {
        self.os.as_ref()
    }

    /// Sets what the kernel said of it before it was stopped.
    pub fn set_os(&mut self, os: Option<mpiq::OsState>) {
        self.os = os;
    }

    /// What attaching found, for a stopped live process.
    pub fn attach_info(&self) -> Option<AttachInfo> {
        self.attachment.as_ref().map(Attachment::info)
    }

    /// The registers of every thread: read when a live process was stopped
    /// (none when it is not stopped), or a core file's `NT_PRSTATUS` notes.
    pub fn thread_regs(&self) -> &[ThreadRegs] {
        match &self.attachment {
            Some(a) => a.thread_regs(),
            None => &self.core_threads,
        }
    }

    /// Every thread's stack, by `unwinder`, from the threads' registers,
    /// the mapped objects and the memory; in thread id order.
    pub fn stacks_with(&self, unwinder: &mut Unwinder) -> Vec<crate::unwind::ThreadStack> {
        // A live process held stopped: its vdso and its threads' names too.
        let live = self.pid.filter(|_| self.attachment.is_some()).map(|p| p as i32);
        unwinder.process_stacks(self.thread_regs(), self.image.objects(), &self.mem, live)
    }

    /// Every thread's stack, by the run's shared unwinder.
    fn unwind(&self) -> Vec<crate::unwind::ThreadStack> {
        crate::unwind::with_shared(|u| self.stacks_with(u))
    }

    /// Releases a stopped process now (dropping does it too).
    pub fn detach(&mut self) -> Result<(), AttachError> {
        self.unwound = None;
        match self.attachment.take() {
            Some(a) => a.detach(),
            None => Ok(()),
        }
    }

    /// This process's memory through the bridge's readers
    /// ([`mpiq::TargetExt`]), which take `&mut self` where this takes `&self`.
    pub fn reader(&self) -> Reader<'_, M> {
        Reader(self)
    }

    /// Reads a NUL-terminated string of at most `max` bytes
    /// ([`mpiq::TargetExt::read_c_string`]).
    pub fn read_c_string(&self, addr: u64, max: usize) -> Result<String, TargetError> {
        self.reader().read_c_string(addr, max)
    }

    /// Reads a target pointer-sized word (ELF class and byte order of the
    /// executable).
    pub fn read_pointer(&self, addr: u64) -> Result<u64, TargetError> {
        self.reader().read_pointer(addr)
    }

    /// Reads an unsigned integer of `size` (1, 2, 4, 8) bytes.
    pub fn read_uint(&self, addr: u64, size: usize) -> Result<u64, TargetError> {
        self.reader().read_word(addr, size)
    }
}

/// A [`Process`]'s memory, byte order (of the executable) and pointer size
/// (its ELF class), for the bridge's readers ([`mpiq::TargetExt`]).
#[derive(Clone, Copy, Debug)]
pub struct Reader<'p, M: Memory>(&'p Process<M>);

impl<M: Memory> TargetExt for Reader<'_, M> {
    fn read_bytes(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        self.0.mem.read(addr, buf)
    }
    fn word_order(&mut self) -> ByteOrder {
        self.0.image.byte_order()
    }
    fn pointer_size(&mut self) -> Result<usize, TargetError> {
        Ok(self.0.image.type_sizes().pointer as usize)
    }
}

impl<M: Memory> Target for Process<M> {
    fn describe(&self) -> ProcessDescription {
        ProcessDescription {
            pid: self.pid,
            executable: self.executable.clone(),
        }
    }

    fn read_memory(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        self.mem.read(addr, buf)
    }

    fn find_symbol(&mut self, name: &str) -> Result<Option<u64>, TargetError> {
        Ok(self.image.find_symbol(name))
    }

    fn find_function(&mut self, name: &str) -> Result<Option<u64>, TargetError> {
        Ok(self.image.find_function(name))
    }

    fn find_type(&mut self, name: &str) -> Result<Option<TypeId>, TargetError> {
        self.image.find_type(name)
    }

    fn field_offset(&mut self, ty: TypeId, field: &str) -> Result<Option<u64>, TargetError> {
        self.image.field_offset(ty, field)
    }

    fn size_of(&mut self, ty: TypeId) -> Result<Option<u64>, TargetError> {
        self.image.size_of(ty)
    }

    fn type_sizes(&mut self) -> Result<TypeSizes, TargetError> {
        Ok(self.image.type_sizes())
    }

    fn byte_order(&mut self) -> ByteOrder {
        self.image.byte_order()
    }

    fn world_rank(&mut self) -> Option<i32> {
        self.world_rank
    }

    /// The Python frames, by py-spy (`mpiq::target::python`): of a live
    /// process only while this mpiq holds it stopped; of a core file whose
    /// process mapped a CPython interpreter.
    fn python_stacks(&mut self) -> Result<Option<mpiq::PythonStacks>, TargetError> {
        Ok(match &self.core_file {
            Some(core) if self.maps_python() => Some(crate::pycore::read_python_core(core, &self.core_python_maps)),
            Some(_) => None,
            None => self.live_python_pid().and_then(mpiq::target::python::read_python),
        })
    }

    /// Every thread's stack, unwound by the CLI (`cli/src/unwind/`): a
    /// live process stopped for the dump, or a core file.
    fn stacks(&mut self) -> Result<Option<Vec<mpiq::ThreadStack>>, TargetError> {
        let stacks = self.unwind();
        let model = stacks.iter().cloned().map(crate::unwind::to_model).collect();
        self.unwound = Some(stacks);
        Ok(Some(model))
    }

    /// Evaluated from the DWARF of the frame's function with the registers
    /// the unwinder recovered for that frame (`cli/src/unwind/values.rs`);
    /// a `$` name is one of those registers itself (`$sp`, `$pc`, `$rbx`,
    /// …; any x86_64 general register by name, `None` where the CFI did not
    /// recover it). Frames are those of the last [`Target::stacks`]
    /// (unwound now if there was none).
    fn frame_value(&mut self, thread: u64, frame: u32, name: &str) -> Result<Option<u64>, TargetError> {
        if self.unwound.is_none() {
            self.unwound = Some(self.unwind());
        }
        let Some(stack) = self
            .unwound
            .as_ref()
            .and_then(|s| s.iter().find(|t| u64::try_from(t.tid).ok() == Some(thread)))
        else {
            return Ok(None);
        };
        let Ok(frame) = usize::try_from(frame) else {
            return Ok(None);
        };
        let mem = &self.mem;
        crate::unwind::with_shared(|u| u.frame_value(stack, frame, name, mem))
    }

    /// A live process: its pid, its start time (a new process with the same
    /// pid has another) and every mapped object with its load address. A
    /// core file: none (it is read once per run).
    fn identity(&mut self) -> Option<String> {
        use std::hash::{Hash, Hasher};
        self.attachment.as_ref()?;
        let pid = self.pid?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // Field 22, counted after the command name's closing parenthesis.
        let start = stat.rsplit_once(')')?.1.split_whitespace().nth(19)?.to_string();
        let mut objects = std::collections::hash_map::DefaultHasher::new();
        for o in self.image.objects() {
            (&o.name, o.bias).hash(&mut objects);
        }
        Some(format!("cli pid {pid} start {start} objects {:016x}", objects.finish()))
    }
}
