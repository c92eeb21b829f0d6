//! A process's world rank from its environment, for an MPI that gives no
//! queues (and so no rank): the variables MPI starters set
//! (`OMPI_COMM_WORLD_RANK`, `PMIX_RANK`, `PMI_RANK`, `SLURM_PROCID`), read
//! through libc's `environ` in the target's memory, so that it works the
//! same live and in a core file, from every front end.
//!
//! Only the first bytes of each entry are read, enough to compare its name;
//! only a matching entry's value is read in full; nothing else is kept.

use crate::target::{Target, TargetError};

/// The variables, in the order they are believed.
pub const RANK_VARIABLES: [&str; 4] = ["OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"];

/// Most environment entries looked at.
const MAX_ENTRIES: u64 = 4096;

/// The rank and the variable it came from; `Ok(None)` when none is set or
/// the environment cannot be read. Only an interruption is an error.
pub(crate) fn world_rank(target: &mut dyn Target) -> Result<Option<(i32, &'static str)>, TargetError> {
    let ok = |r: Result<Option<u64>, TargetError>| match r {
        Err(TargetError::Interrupted) => Err(TargetError::Interrupted),
        Err(_) => Ok(None),
        Ok(v) => Ok(v),
    };
    let Some(sym) = ok(target.find_symbol("environ"))?.or(ok(target.find_symbol("__environ"))?) else {
        return Ok(None);
    };
    let Some(array) = read_word(target, sym)? else {
        return Ok(None);
    };
    let longest = RANK_VARIABLES.iter().map(|v| v.len() + 1).max().unwrap_or(0);
    let mut found: Vec<(usize, i32)> = Vec::new();
    for i in 0..MAX_ENTRIES {
        let Some(entry) = read_word(target, array.wrapping_add(i * 8))? else {
            break;
        };
        if entry == 0 {
            break;
        }
        let Some(head) = read_bytes(target, entry, longest)? else {
            continue;
        };
        for (order, name) in RANK_VARIABLES.iter().enumerate() {
            let prefix = format!("{name}=");
            if !head.starts_with(prefix.as_bytes()) {
                continue;
            }
            if let Some(r) = read_number(target, entry + prefix.len() as u64)? {
                found.push((order, r));
            }
        }
    }
    found.sort_unstable();
    Ok(found.first().map(|&(order, r)| (r, RANK_VARIABLES[order])))
}

/// A decimal number ending in a NUL at `addr` (at most 10 digits), read a
/// byte at a time: nothing past its end.
fn read_number(target: &mut dyn Target, addr: u64) -> Result<Option<i32>, TargetError> {
    let mut digits = String::new();
    for i in 0..11 {
        let mut b = [0u8; 1];
        match target.read_memory(addr + i, &mut b) {
            Ok(()) if b[0] == 0 => return Ok(digits.parse().ok()),
            Ok(()) if b[0].is_ascii_digit() => digits.push(b[0] as char),
            Ok(()) => return Ok(None),
            Err(TargetError::Interrupted) => return Err(TargetError::Interrupted),
            Err(_) => return Ok(None),
        }
    }
    Ok(None)
}

fn read_word(target: &mut dyn Target, addr: u64) -> Result<Option<u64>, TargetError> {
    let mut b = [0u8; 8];
    match target.read_memory(addr, &mut b) {
        Ok(()) => Ok(Some(match target.byte_order() {
            crate::target::ByteOrder::Little => u64::from_le_bytes(b),
            crate::target::ByteOrder::Big => u64::from_be_bytes(b),
        })),
        Err(TargetError::Interrupted) => Err(TargetError::Interrupted),
        Err(_) => Ok(None),
    }
}

/// Up to `len` bytes at `addr`, fewer at the end of readable memory (a
/// string near the top of the stack), cut at the first NUL.
fn read_bytes(target: &mut dyn Target, addr: u64, len: usize) -> Result<Option<Vec<u8>>, TargetError> {
    for n in [len, len / 2, 8, 1] {
        let mut b = vec![0u8; n.max(1)];
        match target.read_memory(addr, &mut b) {
            Ok(()) => {
                if let Some(nul) = b.iter().position(|&c| c == 0) {
                    b.truncate(nul);
                }
                return Ok(Some(b));
            }
            Err(TargetError::Interrupted) => return Err(TargetError::Interrupted),
            Err(_) => continue,
        }
    }
    Ok(None)
}
