//! Collecting one process: which libraries to try, in what order, and where
//! each runs (in the helper process by default, or in this one), falling
//! back to the next candidate when one is refused.

use std::path::PathBuf;
use std::time::Instant;

use crate::dll::discover::{discover, Discovery};
use crate::dll::{self};
use crate::dump::{self, Attempt};
use crate::options::DumpOptions;
use crate::snapshot::model::*;
use crate::snapshot::normalize;
use crate::target::answers::Cached;
use crate::target::{Target, TargetError};

/// The dump was interrupted by the user.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("interrupted")]
pub struct Interrupted;

/// Collects one process. Failures are recorded in the snapshot; only an
/// interruption is an error.
///
/// The debug library runs in a helper process (`mpiq-dllhost`, see
/// [`crate::isolate`]) unless `opts.in_process` is set or no helper is
/// installed: a crash or hang in the library then cannot take the debugger
/// down with it.
pub fn collect(target: &mut dyn Target, opts: &DumpOptions) -> Result<ProcessSnapshot, Interrupted> {
    // Questions by name answered from the one cache, for every front end.
    let mut cached = Cached::new(target);
    let target: &mut dyn Target = &mut cached;
    let start = Instant::now();
    let desc = target.describe();
    let known_rank = target.world_rank();
    let mut snap = ProcessSnapshot {
        pid: desc.pid,
        world_rank: known_rank,
        executable: desc.executable.clone(),
        dll: None,
        error: None,
        messages: Vec::new(),
        communicators: Vec::new(),
        stats: None,
    };
    let candidates = match candidates(target, opts, &mut snap)? {
        Some(c) => c,
        None => return Ok(snap),
    };
    let host = if opts.in_process {
        None
    } else {
        crate::isolate::dllhost_path()
    };
    if !opts.in_process && host.is_none() {
        snap.messages
            .push("mpiq-dllhost was not found next to mpiq: the debug library runs inside this process".into());
    }
    let mut refusals = Vec::new();
    for (path, source) in candidates {
        let attempt = match &host {
            Some(h) => crate::isolate::run(h, target, &path, source, opts, known_rank),
            None => dump::run_dll(target, &path, source, opts, known_rank),
        };
        match attempt {
            Ok(part) => {
                snap.messages.append(&mut refusals);
                merge(&mut snap, part);
                if snap.world_rank.is_none() {
                    normalize::finish(&mut snap);
                }
                if let Some(stats) = snap.stats.as_mut() {
                    stats.elapsed_us = start.elapsed().as_micros() as u64;
                }
                return Ok(snap);
            }
            Err(Attempt::Interrupted) => return Err(Interrupted),
            Err(Attempt::Refused(why)) if source == DllSource::User => {
                snap.error = Some(format!("{why} (named with --dll)"));
                return Ok(snap);
            }
            Err(Attempt::Refused(why)) => refusals.push(format!("{} ({}): {why}", path.display(), source.as_str())),
        }
    }
    snap.error = Some(format!(
        "no usable message queue debug library: {}; name one with --dll FILE",
        refusals.join("; ")
    ));
    Ok(snap)
}

/// Copies what running the library learnt into the process snapshot.
fn merge(snap: &mut ProcessSnapshot, part: ProcessSnapshot) {
    snap.dll = part.dll;
    snap.error = part.error;
    snap.messages.extend(part.messages);
    snap.communicators = part.communicators;
    snap.stats = part.stats;
    if snap.world_rank.is_none() {
        snap.world_rank = part.world_rank;
    }
}

/// The libraries to try, in order; `None` when there is none (the reason is
/// then in `snap.error`).
fn candidates(
    target: &mut dyn Target,
    opts: &DumpOptions,
    snap: &mut ProcessSnapshot,
) -> Result<Option<Vec<(PathBuf, DllSource)>>, Interrupted> {
    if let Some(path) = &opts.dll {
        return Ok(Some(vec![(path.clone(), DllSource::User)]));
    }
    let found: Discovery = match discover(target) {
        Ok(d) => d,
        Err(TargetError::Interrupted) => return Err(Interrupted),
        Err(e) => {
            snap.error = Some(format!("cannot look for the MPI debug library in the process: {e}"));
            return Ok(None);
        }
    };
    snap.messages.extend(found.notes.iter().cloned());
    if found.queues_disabled {
        snap.error = Some(
            "the MPI library says it does not support message queue debugging \
             (MPI2DD_MPIFLAG_IGNORE_QUEUE is set in MPI2DD_info)"
                .into(),
        );
        return Ok(None);
    }
    if !found.looks_like_mpi {
        snap.error = Some(
            "not an MPI process: it defines none of MPIR_dll_name, mpimsgq_dll_locations \
             or MPI2DD_info (is it linked with an MPI library, and has MPI_Init run?)"
                .into(),
        );
        return Ok(None);
    }
    let mut list = Vec::new();
    let mut refusals = Vec::new();
    for c in found.candidates {
        match dll::check_trusted(&c.path) {
            Ok(()) => list.push((c.path, c.source)),
            Err(e) => refusals.push(e.to_string()),
        }
    }
    if list.is_empty() {
        snap.error = Some(if refusals.is_empty() {
            "the MPI library in this process names no message queue debug library \
             (MPIR_dll_name is empty or unreadable); name one with --dll FILE"
                .to_string()
        } else {
            refusals.join("; ")
        });
        return Ok(None);
    }
    snap.messages.extend(refusals);
    Ok(Some(list))
}
