//! Every target of a job collected into one snapshot, recorded when the
//! options ask, and rendered: the crate's `dump` and `collect_all` (above
//! the C API, which calls them).

use super::collect;
use crate::options::DumpOptions;
use crate::render::render;
use crate::snapshot::model::{ProcessSnapshot, Snapshot};
use crate::target::{record, Target};

/// Why a whole dump failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DumpError {
    /// No process could be read; one line per process.
    #[error("{0}")]
    AllFailed(String),
    /// The user interrupted the dump.
    #[error("interrupted: the message queue dump was stopped")]
    Interrupted,
    /// `--record FILE` could not be written.
    #[error("{0}")]
    Record(String),
}

/// Collects every target and renders the result as the options ask.
///
/// Per-process failures are part of the snapshot; the dump as a whole fails
/// only when it was interrupted or when no process at all could be read
/// (a process whose MPI gives no queues counts as read when its stacks
/// were).
pub fn dump(targets: &mut [&mut dyn Target], opts: &DumpOptions) -> Result<String, DumpError> {
    let snapshot = collect_all(targets, opts)?;
    Ok(render(&snapshot, opts))
}

/// Collects every target into one snapshot (see [`dump`] for the errors);
/// with `opts.record`, writes what they answered into that file.
pub fn collect_all(targets: &mut [&mut dyn Target], opts: &DumpOptions) -> Result<Snapshot, DumpError> {
    collect_all_with(targets, opts, &mut |recordings| {
        let Some(path) = &opts.record else { return Ok(()) };
        let file = record::RecordingFile {
            schema: record::RECORDING_SCHEMA.to_string(),
            mpiq_version: env!("CARGO_PKG_VERSION").to_string(),
            processes: recordings,
            samples: Vec::new(),
        };
        file.save(path).map_err(|e| DumpError::Record(e.to_string()))
    })
}

/// [`collect_all`], handing what the targets answered (with `opts.record`:
/// one recording per target, in order) to `keep` instead of writing the
/// file: `mpiq watch --record` adds each sample to one session recording
/// ([`crate::target::session`]).
pub fn collect_all_with(
    targets: &mut [&mut dyn Target],
    opts: &DumpOptions,
    keep: &mut dyn FnMut(Vec<record::Recording>) -> Result<(), DumpError>,
) -> Result<Snapshot, DumpError> {
    let mut snapshot = Snapshot::default();
    let mut recordings = Vec::new();
    for target in targets.iter_mut() {
        let process = if opts.record.is_some() {
            let mut recorder = record::Recorder::new(&mut **target);
            let p = collect(&mut recorder, opts);
            recordings.push(recorder.finish());
            p
        } else {
            collect(&mut **target, opts)
        };
        snapshot.processes.push(process.map_err(|_| DumpError::Interrupted)?);
    }
    if opts.record.is_some() {
        keep(recordings)?;
    }
    // A process whose MPI gives no queues is still worth a report when its
    // stacks say where it is (stacks-only mode).
    let reportable = |p: &ProcessSnapshot| {
        p.error.is_none() || (p.queues_missing.is_some() && p.stacks.as_ref().is_some_and(|s| !s.threads.is_empty()))
    };
    if !snapshot.processes.is_empty() && !snapshot.processes.iter().any(reportable) {
        let lines: Vec<String> = snapshot
            .processes
            .iter()
            .map(|p| match (p.pid, snapshot.processes.len()) {
                (_, 1) => p.error.clone().unwrap_or_default(),
                (Some(pid), _) => format!("process {pid}: {}", p.error.as_deref().unwrap_or_default()),
                (None, _) => p.error.clone().unwrap_or_default(),
            })
            .collect();
        return Err(DumpError::AllFailed(lines.join("\n")));
    }
    Ok(snapshot)
}
