//! [`TargetExt`]: the readers written once on top of a target's memory
//! (as gimli's `Reader`: a primitive to implement, the readers provided):
//! a word, a pointer, a C string, and the MPI-2 debugger interface draft's
//! `MPI2DD_info` and `MPI2DD_PROCDESC`
//! (`/work/shared/spec/mpi2dd-interface-draft.txt`).
//!
//! Every [`Target`] has them. A front end that reads memory without being
//! a `Target` (the CLI reading a starter's proctable through `&self`)
//! implements the three required methods on a small view of its own.

use super::{ByteOrder, Target, TargetError};

/// `MPI2DD_info.magic`.
pub const MPI2DD_MAGIC: [u8; 5] = *b"MPI2\x7f";
/// `MPI2DD_MPIFLAG_IGNORE_QUEUE`: the MPI says it has no queue support.
pub const MPI2DD_MPIFLAG_IGNORE_QUEUE: u32 = 0x10;

/// Readers of target memory: implement the primitive ([`TargetExt::read_bytes`])
/// and the two facts of layout; the rest is provided.
pub trait TargetExt {
    /// Fill `buf` with target memory at `addr`, or fail as a whole.
    fn read_bytes(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError>;
    /// The target's byte order.
    fn word_order(&mut self) -> ByteOrder;
    /// `sizeof(void *)` in the target, in bytes (4 or 8).
    fn pointer_size(&mut self) -> Result<usize, TargetError>;

    /// An unsigned integer of `size` bytes (1 to 8; more are cut to 8), in
    /// the target's byte order.
    fn read_word(&mut self, addr: u64, size: usize) -> Result<u64, TargetError> {
        let mut b = [0u8; 8];
        let b = &mut b[..size.min(8)];
        self.read_bytes(addr, b)?;
        let order = self.word_order();
        Ok(word(b, order))
    }

    /// A pointer-sized value ([`TargetExt::pointer_size`]).
    fn read_pointer(&mut self, addr: u64) -> Result<u64, TargetError> {
        let size = self.pointer_size()?;
        self.read_word(addr, size)
    }

    /// A NUL-terminated string of at most `max` bytes, read up to the next
    /// 256-byte boundary at a time, so that a string near the end of a
    /// mapping is still read; no NUL within `max` bytes is an error.
    fn read_c_string(&mut self, addr: u64, max: usize) -> Result<String, TargetError> {
        let mut out = Vec::new();
        let mut cur = addr;
        while out.len() < max {
            let chunk = (256 - (cur % 256)) as usize;
            let mut buf = vec![0u8; chunk];
            self.read_bytes(cur, &mut buf)?;
            if let Some(n) = buf.iter().position(|&b| b == 0) {
                out.extend_from_slice(&buf[..n]);
                return Ok(String::from_utf8_lossy(&out).into_owned());
            }
            out.extend_from_slice(&buf);
            cur += chunk as u64;
        }
        Err(TargetError::Unreadable {
            addr,
            len: max as u64,
            reason: format!("no NUL within {max} bytes"),
        })
    }

    /// The fields of `MPI2DD_info` at `addr` that mpiq uses, at the offsets
    /// of `layout`, read at once.
    fn read_mpi2dd_info(&mut self, addr: u64, layout: &Mpi2ddLayout) -> Result<Mpi2ddInfo, TargetError> {
        let mut b = vec![0u8; layout.info_len()];
        self.read_bytes(addr, &mut b)?;
        let order = self.word_order();
        let ptr = layout.pointer;
        let at = |off: u64, size: usize| word(&b[off as usize..off as usize + size], order);
        let mut magic = [0u8; 5];
        magic.copy_from_slice(&b[..5]);
        Ok(Mpi2ddInfo {
            magic,
            mpi_flags: at(layout.mpi_flags, 4) as u32,
            dll_name_64: at(layout.dll_name_64, ptr),
            proctable: at(layout.proctable, ptr),
            proctable_size: at(layout.proctable_size, 4) as u32 as i32,
            directory_size: at(layout.directory_size, 4) as u32 as i32,
        })
    }

    /// The `MPI2DD_PROCDESC` at `addr`, at the offsets of `layout`.
    fn read_mpi2dd_procdesc(&mut self, addr: u64, layout: &Mpi2ddLayout) -> Result<Mpi2ddProcDesc, TargetError> {
        let ptr = layout.pointer;
        Ok(Mpi2ddProcDesc {
            host_name: self.read_word(addr + layout.host_name, ptr)?,
            executable_name: self.read_word(addr + layout.executable_name, ptr)?,
            rank: self.read_word(addr + layout.rank, 4)? as u32 as i32,
            pid: self.read_word(addr + layout.pid, 4)? as u32 as i32,
        })
    }
}

impl<T: Target + ?Sized> TargetExt for T {
    fn read_bytes(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        self.read_memory(addr, buf)
    }
    fn word_order(&mut self) -> ByteOrder {
        self.byte_order()
    }
    /// [`Target::type_sizes`]' pointer, taken as 4 to 8.
    fn pointer_size(&mut self) -> Result<usize, TargetError> {
        Ok(self.type_sizes()?.pointer.clamp(4, 8) as usize)
    }
}

/// A target's memory with its byte order and pointer size asked once, for
/// a reader of many words (each [`TargetExt::read_pointer`] of a bare
/// [`Target`] asks both again, and a front end may answer them slowly).
pub struct Words<'t> {
    /// The target read.
    pub target: &'t mut dyn Target,
    /// Its byte order.
    pub order: ByteOrder,
    /// Its pointer size ([`TargetExt::pointer_size`]).
    pub pointer: usize,
}

impl<'t> Words<'t> {
    /// Asks `target` its byte order, then its pointer size.
    pub fn new(target: &'t mut dyn Target) -> Result<Words<'t>, TargetError> {
        let order = target.byte_order();
        let pointer = target.pointer_size()?;
        Ok(Words { target, order, pointer })
    }
}

impl TargetExt for Words<'_> {
    fn read_bytes(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        self.target.read_memory(addr, buf)
    }
    fn word_order(&mut self) -> ByteOrder {
        self.order
    }
    fn pointer_size(&mut self) -> Result<usize, TargetError> {
        Ok(self.pointer)
    }
}

/// The unsigned value of `b` (at most 8 bytes) in byte order `order`.
fn word(b: &[u8], order: ByteOrder) -> u64 {
    let mut v = 0u64;
    match order {
        ByteOrder::Little => b.iter().rev().for_each(|x| v = (v << 8) | u64::from(*x)),
        ByteOrder::Big => b.iter().for_each(|x| v = (v << 8) | u64::from(*x)),
    }
    v
}

/// Where the fields of `struct MPI2DD_INFO` and `struct MPI2DD_PROCDESC`
/// that mpiq reads are: the draft's layout ([`Mpi2ddLayout::draft`]), or
/// offsets a front end found in the target's DWARF.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mpi2ddLayout {
    /// Size of an address (`MPI2DD_ADDR_T`) in bytes.
    pub pointer: usize,
    /// `MPI2DD_INFO.mpi_flags` (uint32).
    pub mpi_flags: u64,
    /// `MPI2DD_INFO.dll_name_64` (an address).
    pub dll_name_64: u64,
    /// `MPI2DD_INFO.proctable` (an address).
    pub proctable: u64,
    /// `MPI2DD_INFO.proctable_size` (int32).
    pub proctable_size: u64,
    /// `MPI2DD_INFO.directory_size` (int32).
    pub directory_size: u64,
    /// `MPI2DD_PROCDESC.host_name` (an address).
    pub host_name: u64,
    /// `MPI2DD_PROCDESC.executable_name` (an address).
    pub executable_name: u64,
    /// `MPI2DD_PROCDESC.pid` (int32).
    pub pid: u64,
    /// `MPI2DD_PROCDESC.rank` (int32).
    pub rank: u64,
    /// `sizeof(struct MPI2DD_PROCDESC)`.
    pub procdesc_size: u64,
}

impl Mpi2ddLayout {
    /// The draft's layout: packed, in the order given, addresses of
    /// `pointer` bytes. `MPI2DD_INFO` is 8 bytes of magic, version, variant
    /// and debug_state, two 4-byte flag words (debugger_flags, mpi_flags),
    /// 8 addresses (dll_name_32, dll_name_64, meta_host_name,
    /// meta_executable_name, abort_string, proctable, directory_table,
    /// metadirectory_table), then proctable_size, directory_size, ...;
    /// `MPI2DD_PROCDESC` is 4 addresses (host_name, executable_name,
    /// spawn_desc, comm_world_id), then pid and rank.
    pub const fn draft(pointer: usize) -> Self {
        let ptr = pointer as u64;
        Mpi2ddLayout {
            pointer,
            mpi_flags: 12,
            dll_name_64: 16 + ptr,
            proctable: 16 + 5 * ptr,
            proctable_size: 16 + 8 * ptr,
            directory_size: 16 + 8 * ptr + 4,
            host_name: 0,
            executable_name: ptr,
            pid: 4 * ptr,
            rank: 4 * ptr + 4,
            procdesc_size: 4 * ptr + 8,
        }
    }

    /// The bytes of `MPI2DD_INFO` that hold every field read here.
    fn info_len(&self) -> usize {
        let ptr = self.pointer as u64;
        [
            5,
            self.mpi_flags + 4,
            self.dll_name_64 + ptr,
            self.proctable + ptr,
            self.proctable_size + 4,
            self.directory_size + 4,
        ]
        .into_iter()
        .max()
        .unwrap_or(5) as usize
    }
}

/// The fields of a process's `MPI2DD_info` that mpiq uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mpi2ddInfo {
    /// `magic`: [`MPI2DD_MAGIC`] in a valid one.
    pub magic: [u8; 5],
    /// `mpi_flags` (`MPI2DD_MPIFLAG_*`).
    pub mpi_flags: u32,
    /// `dll_name_64`: the address of the debug library's path, or 0.
    pub dll_name_64: u64,
    /// `proctable`: the address of the process table, or 0.
    pub proctable: u64,
    /// `proctable_size`: its entries.
    pub proctable_size: i32,
    /// `directory_size`: directory processes below a metadirectory.
    pub directory_size: i32,
}

impl Mpi2ddInfo {
    /// Whether the magic is the draft's.
    pub fn magic_ok(&self) -> bool {
        self.magic == MPI2DD_MAGIC
    }

    /// Whether the MPI says it has no message queue support
    /// (`MPI2DD_MPIFLAG_IGNORE_QUEUE`).
    pub fn queues_disabled(&self) -> bool {
        self.mpi_flags & MPI2DD_MPIFLAG_IGNORE_QUEUE != 0
    }
}

/// One entry of an `MPI2DD_info` proctable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mpi2ddProcDesc {
    /// `host_name`: the address of the host's name, or 0.
    pub host_name: u64,
    /// `executable_name`: the address of the executable's path, or 0.
    pub executable_name: u64,
    /// `pid`.
    pub pid: i32,
    /// `rank`: the world rank.
    pub rank: i32,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Memory at address 0x1000 onwards, read through the three required
    /// methods only (no `Target`).
    struct Bytes(Vec<u8>, ByteOrder);

    impl TargetExt for Bytes {
        fn read_bytes(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
            let start = addr.checked_sub(0x1000).map(|a| a as usize);
            match start.and_then(|s| self.0.get(s..s + buf.len())) {
                Some(b) => {
                    buf.copy_from_slice(b);
                    Ok(())
                }
                None => Err(TargetError::Unreadable {
                    addr,
                    len: buf.len() as u64,
                    reason: "outside".into(),
                }),
            }
        }
        fn word_order(&mut self) -> ByteOrder {
            self.1
        }
        fn pointer_size(&mut self) -> Result<usize, TargetError> {
            Ok(8)
        }
    }

    #[test]
    fn words_and_pointers_in_either_byte_order() {
        let bytes = vec![1, 2, 3, 4, 5, 6, 7, 8];
        assert_eq!(
            Bytes(bytes.clone(), ByteOrder::Little).read_word(0x1000, 4).unwrap(),
            0x0403_0201
        );
        assert_eq!(
            Bytes(bytes.clone(), ByteOrder::Big).read_word(0x1000, 2).unwrap(),
            0x0102
        );
        assert_eq!(
            Bytes(bytes.clone(), ByteOrder::Little).read_pointer(0x1000).unwrap(),
            0x0807_0605_0403_0201
        );
        assert!(Bytes(bytes, ByteOrder::Little).read_pointer(0x1001).is_err());
    }

    #[test]
    fn c_strings_across_chunks_and_without_nul() {
        // A string from 0x10f0 over the 256-byte boundary at 0x1100, ended
        // 4 bytes before the end of the memory.
        let mut bytes = vec![b'x'; 0x200];
        bytes[0x1fb] = 0;
        let mut m = Bytes(bytes, ByteOrder::Little);
        assert_eq!(m.read_c_string(0x11f0, 4096).unwrap(), "x".repeat(11));
        assert_eq!(m.read_c_string(0x10f0, 4096).unwrap().len(), 0x10b);
        let e = m.read_c_string(0x10f0, 16).unwrap_err();
        assert!(e.to_string().contains("no NUL within 16 bytes"), "{e}");
        assert!(m.read_c_string(0x11fc, 4096).is_err(), "past the end, no NUL");
    }

    #[test]
    fn mpi2dd_info_and_procdesc_at_the_draft_offsets() {
        let l = Mpi2ddLayout::draft(8);
        let mut b = vec![0u8; 0x100];
        b[..5].copy_from_slice(&MPI2DD_MAGIC);
        b[12] = 0x10;
        b[24] = 0x80;
        b[56] = 0xc0;
        b[80] = 2;
        b[84] = 0xff;
        b[85] = 0xff;
        b[86] = 0xff;
        b[87] = 0xff;
        // The procdesc at 0xc0: host 0x1234, exe 0, pid 77, rank 1.
        b[0xc0] = 0x34;
        b[0xc1] = 0x12;
        b[0xc0 + 32] = 77;
        b[0xc0 + 36] = 1;
        let mut m = Bytes(b, ByteOrder::Little);
        let info = m.read_mpi2dd_info(0x1000, &l).unwrap();
        assert!(info.magic_ok() && info.queues_disabled());
        assert_eq!(
            (
                info.dll_name_64,
                info.proctable,
                info.proctable_size,
                info.directory_size
            ),
            (0x80, 0xc0, 2, -1)
        );
        let d = m.read_mpi2dd_procdesc(0x10c0, &l).unwrap();
        assert_eq!(
            d,
            Mpi2ddProcDesc {
                host_name: 0x1234,
                executable_name: 0,
                pid: 77,
                rank: 1
            }
        );
        assert!(!Mpi2ddInfo {
            magic: *b"MPI3\x7f",
            ..info
        }
        .magic_ok());
    }

    #[test]
    fn mpi2dd_draft_layout() {
        let l = Mpi2ddLayout::draft(8);
        // Offsets of the C structs in tests/fixtures/mpi2dd_starter.c.
        assert_eq!((l.proctable, l.proctable_size, l.directory_size), (56, 80, 84));
        assert_eq!(
            (l.host_name, l.executable_name, l.pid, l.rank, l.procdesc_size),
            (0, 8, 32, 36, 40)
        );
        assert_eq!((l.mpi_flags, l.dll_name_64), (12, 24));
        let l = Mpi2ddLayout::draft(4);
        assert_eq!((l.proctable, l.proctable_size, l.procdesc_size), (36, 48, 24));
    }
}
