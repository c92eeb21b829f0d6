//! Where a process says its debug library is, in the order mpiq tries:
//! the user's choice, Open MPI's `mpimsgq_dll_locations`, `MPI2DD_info`'s
//! `dll_name_64`, and `MPIR_dll_name`.

use std::path::PathBuf;

use crate::snapshot::model::DllSource;
use crate::target::{ByteOrder, Target, TargetError};

/// The longest path mpiq reads from a target.
const MAX_PATH: usize = 4096;
/// The most entries read from `mpimsgq_dll_locations`.
const MAX_LOCATIONS: usize = 64;
/// `MPI2DD_info.magic`.
pub const MPI2DD_MAGIC: [u8; 5] = *b"MPI2\x7f";
/// `MPI2DD_MPIFLAG_IGNORE_QUEUE`: the MPI says it has no queue support.
const MPI2DD_MPIFLAG_IGNORE_QUEUE: u32 = 0x10;

/// A library path the target named, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// The path.
    pub path: PathBuf,
    /// Where it was found.
    pub source: DllSource,
}

/// What the target says about its debug library.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Discovery {
    /// Paths to try, in order.
    pub candidates: Vec<Candidate>,
    /// Notes for the user (ignored entries and why).
    pub notes: Vec<String>,
    /// Whether any of the MPI debugger symbols exists in the process.
    pub looks_like_mpi: bool,
    /// `MPI2DD_info` says message queue debugging is not implemented.
    pub queues_disabled: bool,
}

/// Reads a pointer-sized value.
fn read_pointer(t: &mut dyn Target, addr: u64, size: usize, order: ByteOrder) -> Result<u64, TargetError> {
    let mut b = [0u8; 8];
    let b = &mut b[..size.min(8)];
    t.read_memory(addr, b)?;
    let mut v = 0u64;
    match order {
        ByteOrder::Little => b.iter().rev().for_each(|x| v = (v << 8) | *x as u64),
        ByteOrder::Big => b.iter().for_each(|x| v = (v << 8) | *x as u64),
    }
    Ok(v)
}

/// Reads a NUL-terminated string of at most 4096 bytes, a chunk at a
/// time so that a string near the end of a mapping is still read.
pub fn read_c_string(t: &mut dyn Target, addr: u64) -> Result<String, TargetError> {
    let mut out = Vec::new();
    let mut cur = addr;
    while out.len() < MAX_PATH {
        // Read up to the next 256-byte boundary.
        let chunk = (256 - (cur % 256)) as usize;
        let mut buf = vec![0u8; chunk];
        t.read_memory(cur, &mut buf)?;
        if let Some(n) = buf.iter().position(|&b| b == 0) {
            out.extend_from_slice(&buf[..n]);
            return Ok(String::from_utf8_lossy(&out).into_owned());
        }
        out.extend_from_slice(&buf);
        cur += chunk as u64;
    }
    Err(TargetError::Unreadable {
        addr,
        len: MAX_PATH as u64,
        reason: format!("no NUL within {MAX_PATH} bytes"),
    })
}

/// Reads what `symbol` holds: a char array (the usual `char MPIR_dll_name[]`)
/// or a `char *` to a string.
pub fn read_name_variable(
    t: &mut dyn Target,
    addr: u64,
    psize: usize,
    order: ByteOrder,
) -> Result<String, TargetError> {
    let direct = read_c_string(t, addr)?;
    if direct.starts_with('/') || (direct.len() > 1 && direct.is_ascii() && !direct.contains(char::is_control)) {
        return Ok(direct);
    }
    let p = read_pointer(t, addr, psize, order)?;
    if p == 0 {
        return Ok(String::new());
    }
    read_c_string(t, p)
}

/// Asks the target where its debug library is.
pub fn discover(t: &mut dyn Target) -> Result<Discovery, TargetError> {
    let mut d = Discovery::default();
    let order = t.byte_order();
    let psize = t.type_sizes()?.pointer.clamp(4, 8) as usize;

    // Open MPI: char **mpimsgq_dll_locations, NULL-terminated.
    if let Some(sym) = t.find_symbol("mpimsgq_dll_locations")? {
        d.looks_like_mpi = true;
        match read_pointer(t, sym, psize, order) {
            Ok(0) => {}
            Ok(array) => {
                for i in 0..MAX_LOCATIONS {
                    let entry = match read_pointer(t, array + (i * psize) as u64, psize, order) {
                        Ok(e) => e,
                        Err(TargetError::Interrupted) => return Err(TargetError::Interrupted),
                        Err(e) => {
                            d.notes
                                .push(format!("mpimsgq_dll_locations[{i}] could not be read: {e}"));
                            break;
                        }
                    };
                    if entry == 0 {
                        break;
                    }
                    match read_c_string(t, entry) {
                        Ok(path) if std::path::Path::new(&path).exists() => d.candidates.push(Candidate {
                            path: path.into(),
                            source: DllSource::MpimsgqDllLocations,
                        }),
                        Ok(path) => d
                            .notes
                            .push(format!("mpimsgq_dll_locations names {path}, which does not exist here")),
                        Err(TargetError::Interrupted) => return Err(TargetError::Interrupted),
                        Err(e) => d
                            .notes
                            .push(format!("mpimsgq_dll_locations[{i}] could not be read: {e}")),
                    }
                }
            }
            Err(TargetError::Interrupted) => return Err(TargetError::Interrupted),
            Err(e) => d.notes.push(format!("mpimsgq_dll_locations could not be read: {e}")),
        }
    }

    // MPI-2 debugger interface draft: struct MPI2DD_INFO MPI2DD_info.
    if let Some(sym) = t.find_symbol("MPI2DD_info")? {
        d.looks_like_mpi = true;
        let mut head = [0u8; 32];
        match t.read_memory(sym, &mut head) {
            Ok(()) if head[..5] != MPI2DD_MAGIC => d.notes.push(format!(
                "MPI2DD_info ignored: its magic is {:02x?}, expected {:02x?} (\"MPI2\\x7f\")",
                &head[..5],
                MPI2DD_MAGIC
            )),
            Ok(()) => {
                let flags_bytes = [head[12], head[13], head[14], head[15]];
                let mpi_flags = match order {
                    ByteOrder::Little => u32::from_le_bytes(flags_bytes),
                    ByteOrder::Big => u32::from_be_bytes(flags_bytes),
                };
                if mpi_flags & MPI2DD_MPIFLAG_IGNORE_QUEUE != 0 {
                    d.queues_disabled = true;
                }
                // dll_name_32 at 16, dll_name_64 at 24 (packed, 8-byte addresses).
                let name64 = read_pointer(t, sym + 24, 8, order)?;
                if name64 != 0 {
                    match read_c_string(t, name64) {
                        Ok(path) => d.candidates.push(Candidate {
                            path: path.into(),
                            source: DllSource::Mpi2ddInfo,
                        }),
                        Err(TargetError::Interrupted) => return Err(TargetError::Interrupted),
                        Err(e) => d.notes.push(format!("MPI2DD_info.dll_name_64 could not be read: {e}")),
                    }
                } else {
                    d.notes.push("MPI2DD_info.dll_name_64 is NULL".into());
                }
            }
            Err(TargetError::Interrupted) => return Err(TargetError::Interrupted),
            Err(e) => d.notes.push(format!("MPI2DD_info could not be read: {e}")),
        }
    }

    // The classic MPIR interface: char MPIR_dll_name[].
    if let Some(sym) = t.find_symbol("MPIR_dll_name")? {
        d.looks_like_mpi = true;
        match read_name_variable(t, sym, psize, order) {
            Ok(path) if !path.is_empty() => d.candidates.push(Candidate {
                path: path.into(),
                source: DllSource::MpirDllName,
            }),
            Ok(_) => d.notes.push("MPIR_dll_name is empty".into()),
            Err(TargetError::Interrupted) => return Err(TargetError::Interrupted),
            Err(e) => d.notes.push(format!("MPIR_dll_name could not be read: {e}")),
        }
    }

    // The same library named twice (Open MPI sets both) is tried once.
    let mut seen = std::collections::HashSet::new();
    d.candidates.retain(|c| seen.insert(c.path.clone()));
    Ok(d)
}
