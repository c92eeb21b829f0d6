//! Whether an application thread moved between two samples while it sat in
//! the same MPI call: a digest of what its calling frames hold.
//!
//! Two samples that find a rank in `MPI_Recv` called from the same line
//! cannot tell a rank stuck there from one that returned and came back (a
//! ping-pong loop). What the calling frames hold can: a loop counter, a
//! pointer that advances, lives in the application's stack or in a
//! callee-saved register, and changes when the rank goes round its loop.
//! The digest covers the caller's callee-saved registers and stack pointer,
//! as the host's unwinder recovered them (`$sp`, `$rbx`, ... through
//! [`Target::frame_value`]), and the stack memory from the caller's frame
//! to the outermost one (at most [`MAX_STACK`] bytes).
//!
//! Only the digest is kept: the memory read for it is never stored,
//! printed or recorded (no digest is made while a recording is written).

use std::hash::{DefaultHasher, Hash, Hasher};

use crate::snapshot::model::{MpiCall, ThreadStack};
use crate::target::{Target, TargetError};

/// Most stack bytes the digest covers, from the caller's frame outwards.
pub const MAX_STACK: u64 = 64 * 1024;

/// The caller's registers the digest covers: those a callee keeps.
const REGISTERS: [&str; 8] = ["$sp", "$pc", "$rbx", "$rbp", "$r12", "$r13", "$r14", "$r15"];

/// Sets [`MpiCall::state`] of every call whose calling frames could be read.
pub fn digest_calls(
    target: &mut dyn Target,
    threads: &[ThreadStack],
    calls: &mut [MpiCall],
) -> Result<(), TargetError> {
    for call in calls.iter_mut() {
        let Some(thread) = threads.iter().find(|t| t.tid == call.tid) else {
            continue;
        };
        call.state = digest(target, thread, call.frame)?;
    }
    Ok(())
}

/// The digest of the frames outside the MPI entry point at `entry`, or
/// `None` when the stack pointers are not known or the memory cannot be
/// read. Only an interruption is an error.
fn digest(target: &mut dyn Target, thread: &ThreadStack, entry: u32) -> Result<Option<String>, TargetError> {
    let caller = entry + 1;
    let outermost = thread.frames.len().saturating_sub(1) as u32;
    if caller > outermost {
        return Ok(None);
    }
    let value = |target: &mut dyn Target, frame: u32, name: &str| match target.frame_value(thread.tid, frame, name) {
        Ok(v) => Ok(v),
        Err(TargetError::Interrupted) => Err(TargetError::Interrupted),
        Err(_) => Ok(None),
    };
    let mut h = DefaultHasher::new();
    let mut any_register = false;
    for name in REGISTERS {
        let v = value(target, caller, name)?;
        any_register |= v.is_some();
        (name, v).hash(&mut h);
    }
    let (Some(low), Some(high)) = (value(target, caller, "$sp")?, value(target, outermost, "$sp")?) else {
        return Ok(None);
    };
    if !any_register || high < low {
        return Ok(None);
    }
    let len = (high - low).min(MAX_STACK) as usize;
    let mut bytes = vec![0u8; len];
    match target.read_memory(low, &mut bytes) {
        Ok(()) => bytes.hash(&mut h),
        Err(TargetError::Interrupted) => return Err(TargetError::Interrupted),
        Err(_) => return Ok(None),
    }
    Ok(Some(format!("{:016x}", h.finish())))
}
