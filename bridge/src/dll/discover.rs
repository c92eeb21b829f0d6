//! Where a process says its debug library is, in the order mpiq tries:
//! the user's choice, Open MPI's `mpimsgq_dll_locations`, `MPI2DD_info`'s
//! `dll_name_64`, and `MPIR_dll_name`.

use std::path::PathBuf;

use crate::snapshot::model::DllSource;
use crate::target::read::{Mpi2ddLayout, TargetExt, Words};
use crate::target::{Target, TargetError};

/// The longest path mpiq reads from a target.
const MAX_PATH: usize = 4096;
/// The most entries read from `mpimsgq_dll_locations`.
const MAX_LOCATIONS: usize = 64;
pub use crate::target::read::MPI2DD_MAGIC;

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

/// Reads what `symbol` holds: a char array (the usual `char MPIR_dll_name[]`)
/// or a `char *` to a string.
pub fn read_name_variable(t: &mut impl TargetExt, addr: u64) -> Result<String, TargetError> {
    let direct = t.read_c_string(addr, MAX_PATH)?;
    if direct.starts_with('/') || (direct.len() > 1 && direct.is_ascii() && !direct.contains(char::is_control)) {
        return Ok(direct);
    }
    let p = t.read_pointer(addr)?;
    if p == 0 {
        return Ok(String::new());
    }
    t.read_c_string(p, MAX_PATH)
}

/// Asks the target where its debug library is.
pub fn discover(t: &mut dyn Target) -> Result<Discovery, TargetError> {
    let mut d = Discovery::default();
    let mut w = Words::new(t)?;
    let psize = w.pointer;

    // Open MPI: char **mpimsgq_dll_locations, NULL-terminated.
    if let Some(sym) = w.target.find_symbol("mpimsgq_dll_locations")? {
        d.looks_like_mpi = true;
        match w.read_pointer(sym) {
            Ok(0) => {}
            Ok(array) => {
                for i in 0..MAX_LOCATIONS {
                    let entry = match w.read_pointer(array + (i * psize) as u64) {
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
                    match w.read_c_string(entry, MAX_PATH) {
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
    if let Some(sym) = w.target.find_symbol("MPI2DD_info")? {
        d.looks_like_mpi = true;
        match w.read_mpi2dd_info(sym, &Mpi2ddLayout::draft(psize)) {
            Ok(info) if !info.magic_ok() => d.notes.push(format!(
                "MPI2DD_info ignored: its magic is {:02x?}, expected {:02x?} (\"MPI2\\x7f\")",
                info.magic, MPI2DD_MAGIC
            )),
            Ok(info) => {
                d.queues_disabled |= info.queues_disabled();
                if info.dll_name_64 != 0 {
                    match w.read_c_string(info.dll_name_64, MAX_PATH) {
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
    if let Some(sym) = w.target.find_symbol("MPIR_dll_name")? {
        d.looks_like_mpi = true;
        match read_name_variable(&mut w, sym) {
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
