//! The trait a front end implements so the bridge can read a target process.
//!
//! The bridge knows nothing of gdb, lldb or `/proc`: everything it learns
//! about the target comes through [`Target`]. Every answer is plain data, so
//! a session can be recorded and replayed, and the debug library could run
//! in another process.

use serde::{Deserialize, Serialize};

use crate::snapshot::model::{PythonStacks, ThreadStack};

pub mod answers;
pub mod cache;
pub mod python;
pub mod question;
pub mod read;
pub mod record;
pub mod session;
pub mod wrap;

/// A type handle chosen by the front end (an index into its own table, a
/// DWARF offset, ...). The bridge only hands it back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TypeId(pub u64);

/// Byte order of the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ByteOrder {
    /// Least significant byte first (x86_64, aarch64 Linux).
    Little,
    /// Most significant byte first.
    Big,
}

impl ByteOrder {
    /// The byte order of the machine running mpiq.
    pub const fn host() -> Self {
        if cfg!(target_endian = "big") {
            ByteOrder::Big
        } else {
            ByteOrder::Little
        }
    }
}

/// Sizes of the target's basic C types, in bytes (the five fields every
/// MQD library's `mqs_target_type_sizes` has).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TypeSizes {
    /// `sizeof(short)`
    pub short: i32,
    /// `sizeof(int)`
    pub int: i32,
    /// `sizeof(long)`
    pub long: i32,
    /// `sizeof(long long)`
    pub long_long: i32,
    /// `sizeof(void *)`
    pub pointer: i32,
}

impl TypeSizes {
    /// The sizes of an LP64 target (Linux on x86_64, aarch64, ...).
    pub const LP64: TypeSizes = TypeSizes {
        short: 2,
        int: 4,
        long: 8,
        long_long: 8,
        pointer: 8,
    };
}

/// What a front end says about the process it reads, for display.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessDescription {
    /// Process id, when known (a core file may not say).
    pub pid: Option<u32>,
    /// Path of the main executable, as the host knows it.
    pub executable: String,
}

/// Why the front end could not answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[non_exhaustive]
pub enum TargetError {
    /// The memory is not readable (not mapped, not in the core file, ...).
    #[error("cannot read {len} bytes of target memory at {addr:#x}: {reason}")]
    Unreadable {
        /// Start of the range.
        addr: u64,
        /// Length of the range.
        len: u64,
        /// What the host said.
        reason: String,
    },
    /// The user interrupted the dump (Ctrl-C); stop as soon as possible.
    #[error("interrupted")]
    Interrupted,
    /// The host debugger or OS failed for another reason.
    #[error("{0}")]
    Host(String),
}

/// Memory a host keeps for a while and lends out in pieces
/// ([`HeldBytes`]): the helper's mapping of the region the front end reads
/// ahead into, a test's image of a process.
pub trait HeldRegion: Send + Sync {
    /// All of it.
    fn bytes(&self) -> &[u8];
}

impl HeldRegion for Vec<u8> {
    fn bytes(&self) -> &[u8] {
        self
    }
}

/// Bytes of target memory a host holds in its own memory, unchanged until
/// the end of the dump that asked for them ([`Target::held_memory`]): a
/// range of a shared [`HeldRegion`], which lives as long as this value.
#[derive(Clone)]
pub struct HeldBytes {
    region: std::sync::Arc<dyn HeldRegion>,
    start: usize,
    len: usize,
}

impl std::fmt::Debug for HeldBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeldBytes")
            .field("start", &self.start)
            .field("len", &self.len)
            .finish()
    }
}

impl HeldBytes {
    /// The `len` bytes of `region` at `start`; `None` if they are not all in it.
    pub fn new(region: std::sync::Arc<dyn HeldRegion>, start: usize, len: usize) -> Option<HeldBytes> {
        let end = start.checked_add(len)?;
        (end <= region.bytes().len()).then_some(HeldBytes { region, start, len })
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.region.bytes()[self.start..self.start + self.len]
    }
}

/// Access to one target process (live or a core file).
///
/// Lookups return `Ok(None)` for "does not exist" and `Err` only when the host
/// failed to answer. Addresses are runtime (load) addresses; symbol, function
/// and type lookups search every object loaded in the process.
pub trait Target {
    /// Which process this is.
    fn describe(&self) -> ProcessDescription;
    /// Fill `buf` with target memory starting at `addr`, or fail as a whole.
    fn read_memory(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError>;
    /// Target memory this host holds already (read ahead) and keeps
    /// unchanged until the end of the dump, for the page cache to take in
    /// place of a copy; `None` (the default): ask [`Target::read_memory`].
    fn held_memory(&mut self, _addr: u64, _len: usize) -> Option<HeldBytes> {
        None
    }
    /// Runtime address of a data symbol (with or without debug info).
    fn find_symbol(&mut self, name: &str) -> Result<Option<u64>, TargetError>;
    /// Runtime address of a function. Debug libraries also call this only to
    /// make the host load a compilation unit's types.
    fn find_function(&mut self, name: &str) -> Result<Option<u64>, TargetError>;
    /// A type by name: a plain name, `struct X`, or a typedef name.
    fn find_type(&mut self, name: &str) -> Result<Option<TypeId>, TargetError>;
    /// Byte offset of a field of a struct or union type (typedefs resolved),
    /// `None` if it has no such field.
    fn field_offset(&mut self, ty: TypeId, field: &str) -> Result<Option<u64>, TargetError>;
    /// `sizeof` a type, `None` if it has no size (incomplete).
    fn size_of(&mut self, ty: TypeId) -> Result<Option<u64>, TargetError>;
    /// Sizes of the basic C types.
    fn type_sizes(&mut self) -> Result<TypeSizes, TargetError>;
    /// Byte order of the target.
    fn byte_order(&mut self) -> ByteOrder;
    /// Rank in `MPI_COMM_WORLD`, if the front end knows it (for example from
    /// the starter's `MPIR_proctable`). `None` lets the bridge work it out.
    fn world_rank(&mut self) -> Option<i32> {
        None
    }
    /// Which process and loaded objects these are, as a key under which the
    /// answers to questions by name stay true ([`answers`]): the same key
    /// only while the process and every object in it are the same. `None`
    /// (the default): keep no answers between dumps.
    fn identity(&mut self) -> Option<String> {
        None
    }
    /// Every thread's call stack, innermost frame first, read while the
    /// process is stopped; `Ok(None)` (the default): this host gives none.
    fn stacks(&mut self) -> Result<Option<Vec<ThreadStack>>, TargetError> {
        Ok(None)
    }
    /// The value of parameter or variable `name` in frame `frame` (the index
    /// in [`Target::stacks`]'s frames of that thread: 0 = innermost, inlined
    /// frames counted) of thread `thread` (its [`ThreadStack::tid`]):
    /// integers sign-extended to 64 bits, pointers as they are. `Ok(None)`
    /// (the default): no such name there, optimised out, or this host gives
    /// no values. Never cached: it is memory.
    ///
    /// A `name` starting with `$` names a register of that frame, as the
    /// host's unwinder recovered it for that frame (an inlined frame has the
    /// registers of the frame it is inlined into): `$sp` (the frame's stack
    /// pointer, which is the canonical frame address of the next inner
    /// frame), `$pc` (a return address in callers, as [`Target::stacks`]
    /// gives it), and on x86-64 the callee-saved `$rbx`, `$rbp`, `$r12`,
    /// `$r13`, `$r14`, `$r15`. A host may also answer the other general
    /// registers by their names (`$rax`, `$rsp`, `$rip`, …), but a
    /// caller-saved one only where it was really restored (the innermost
    /// frame, a frame a signal interrupted). A register the unwinder did not
    /// recover for that frame (a caller-saved one in a caller, `<not
    /// saved>`, unknown), or a name the host does not know: `Ok(None)`,
    /// never a guess.
    fn frame_value(&mut self, _thread: u64, _frame: u32, _name: &str) -> Result<Option<u64>, TargetError> {
        Ok(None)
    }
    /// The Python frames of every Python thread, read while the process is
    /// stopped ([`python`]: py-spy, by pid or core file); `Ok(None)` (the
    /// default): not a CPython process, or this host cannot tell.
    fn python_stacks(&mut self) -> Result<Option<PythonStacks>, TargetError> {
        Ok(None)
    }
}
