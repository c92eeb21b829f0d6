//! Running the library over one process: image, process, communicators,
//! queues; every call through the library's lock ([`crate::ffi::Running`]).

#![allow(non_upper_case_globals)] // the mqs_* constants keep the header's names

use std::ffi::c_int;

use super::convert::{self, convert_operations, RawOperations};
use super::readahead::{self, ReadAhead};
use super::{Attempt, Limits};
use crate::dll::{self, Dll};
use crate::ffi::abi::*;
use crate::ffi::session::code;
use crate::ffi::{Running, Session};
use crate::options::DumpOptions;
use crate::snapshot::model::*;
use crate::snapshot::normalize;
use crate::target::Target;

/// Loads the library at `path` here, in this process, and dumps the target
/// through it, with the blocks the previous dump of the process read read
/// ahead ([`readahead`]). The result holds `dll`, `error`, `messages`,
/// `communicators`, `world_rank` and, with `--stats`, `stats`.
pub fn run_dll(
    target: &mut dyn Target,
    path: &std::path::Path,
    source: DllSource,
    opts: &DumpOptions,
    known_rank: Option<i32>,
) -> Result<ProcessSnapshot, Attempt> {
    let process = readahead::process_key(target);
    let mut ahead = ReadAhead::new(target, &readahead::remembered(path, &process));
    let (result, raw) = run_dll_raw(&mut ahead, path, source, opts, known_rank);
    if result.is_ok() {
        readahead::remember(path, process, ahead.blocks_read());
    }
    let mut snap = result?;
    let raw: Vec<[&[u8]; 3]> = raw.iter().map(|[a, b, c]| [&a[..], &b[..], &c[..]]).collect();
    if let Err(e) = convert_operations(&mut snap, &raw) {
        snap.messages.push(format!("mpiq: internal error: {e}"));
    }
    Ok(snap)
}

/// [`run_dll`], with the operations left as the library returned them.
pub fn run_dll_raw(
    target: &mut dyn Target,
    path: &std::path::Path,
    source: DllSource,
    opts: &DumpOptions,
    known_rank: Option<i32>,
) -> (Result<ProcessSnapshot, Attempt>, RawOperations) {
    let mut raw = RawOperations::new();
    let result = run_dll_into(target, path, source, opts, known_rank, &mut raw);
    (result, raw)
}

fn run_dll_into(
    target: &mut dyn Target,
    path: &std::path::Path,
    source: DllSource,
    opts: &DumpOptions,
    known_rank: Option<i32>,
    raw: &mut RawOperations,
) -> Result<ProcessSnapshot, Attempt> {
    let dll = dll::load(path).map_err(Attempt::Refused)?;
    let desc = target.describe();
    let image_name = if desc.executable.is_empty() {
        "the process".to_string()
    } else {
        desc.executable.clone()
    };
    let mut snap = ProcessSnapshot {
        dll: Some(dll_info(dll, path, source)),
        ..ProcessSnapshot::new(desc.pid, known_rank, desc.executable)
    };
    // Everything from here runs the library: one dump at a time.
    let lib = dll.lock();
    let limits = Limits::current();
    let mut session = Session::new(target, known_rank, limits.callbacks);
    let result = run_library(&lib, &mut session, &image_name, &mut snap, raw, limits);
    lib.destroy_infos(&mut session);
    if session.interrupted || matches!(result, Err(RunError::Interrupted)) {
        return Err(Attempt::Interrupted);
    }
    if let Err(e) = result {
        if let (RunError::NoQueues(_), Some(t)) = (&e, session.missing_types.first()) {
            // The MPI library has no debug information: not a fault of the
            // debug library's; said with the fix once the stacks are read.
            let mut m = QueuesMissing::new(MissingReason::NoDebugInfo);
            m.missing_type = Some(t.clone());
            snap.queues_missing = Some(m);
        }
        snap.error = Some(e.to_string());
    }
    if let Some(internal) = session.internal_error.take() {
        snap.messages.push(internal);
    }
    if session.limit_hit {
        snap.messages.push(format!(
            "stopped after {} callbacks from the debug library: the target's lists may be corrupt; \
             what was read before is shown",
            session.max_callbacks
        ));
    }
    if session.too_many_failures {
        snap.messages.push(format!(
            "stopped after {} failed reads or lookups in the target: the target's lists may be corrupt; \
             what was read before is shown",
            session.max_failures
        ));
    }
    if session.failures > 0 {
        // The libraries often treat a failed read as the end of a list: say
        // so, or a queue could look empty when it was not read.
        let what = format!(
            "{} read{} or lookup{} in the target failed while the debug library walked its lists (the first: {})",
            session.failures,
            if session.failures == 1 { "" } else { "s" },
            if session.failures == 1 { "" } else { "s" },
            session.error.as_ref().map(|e| e.to_string()).unwrap_or_default()
        );
        if snap.error.is_none() && snap.communicators.is_empty() {
            snap.error = Some(format!("no communicator could be read: {what}"));
        } else {
            snap.messages.push(format!("{what}; what is shown may be incomplete"));
        }
    }
    normalize::finish(&mut snap);
    if opts.stats {
        snap.stats = Some(DumpStats {
            fetch_calls: session.fetch_calls,
            host_reads: session.cache.stats.host_reads,
            host_read_bytes: session.cache.stats.host_bytes,
            elapsed_us: 0,
        });
    }
    Ok(snap)
}

fn dll_info(d: &Dll, path: &std::path::Path, source: DllSource) -> DllInfo {
    DllInfo {
        path: path.display().to_string().into(),
        version: d.version().into(),
        found_via: source,
    }
}

/// Text for a code a library or callback returned.
fn describe(lib: &Running<'_>, session: &Session<'_>, c: c_int) -> String {
    if let Some(t) = code::text(c) {
        return match &session.error {
            Some(e) => format!("{t}: {e}"),
            None => t.to_string(),
        };
    }
    match c {
        mqs_no_information => "no information".into(),
        mqs_end_of_list => "end of list".into(),
        _ => {
            let text = lib
                .error_string(c)
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|| format!("error code {c}"));
            // The library turned one of our failures into its own code: say
            // what failed underneath (a missing answer, an unreadable page).
            match &session.error {
                Some(e) => format!("{text} (after: {e})"),
                None => text,
            }
        }
    }
}

/// Why the library read no communicator at all.
#[derive(Debug, thiserror::Error)]
enum RunError {
    /// `mqs_setup_image` failed.
    #[error("the debug library could not set up {image}: {why}")]
    SetupImage { image: String, why: String },
    /// `mqs_setup_process` failed.
    #[error("the debug library could not set up the process: {0}")]
    SetupProcess(String),
    /// `mqs_image_has_queues` or `mqs_process_has_queues` said no.
    #[error("{0}")]
    NoQueues(String),
    /// `mqs_update_communicator_list` failed.
    #[error("cannot read the list of communicators: {0}")]
    CommunicatorList(String),
    /// The user interrupted the dump.
    #[error("interrupted")]
    Interrupted,
}

fn run_library(
    lib: &Running<'_>,
    s: &mut Session<'_>,
    image_name: &str,
    snap: &mut ProcessSnapshot,
    raw_operations: &mut RawOperations,
    limits: Limits,
) -> Result<(), RunError> {
    let rc = lib.setup_image(s);
    if rc != mqs_ok {
        return Err(RunError::SetupImage {
            image: image_name.to_string(),
            why: describe(lib, s, rc),
        });
    }
    let answer = lib.image_has_queues(s);
    has_queues(lib, s, answer, image_name)?;
    let rc = lib.setup_process(s);
    if rc != mqs_ok {
        return Err(RunError::SetupProcess(describe(lib, s, rc)));
    }
    let answer = lib.process_has_queues(s);
    has_queues(lib, s, answer, image_name)?;
    let rc = lib.update_communicator_list(s);
    if rc != mqs_ok {
        return Err(RunError::CommunicatorList(describe(lib, s, rc)));
    }
    let mut rc = lib.setup_communicator_iterator(s);
    let mut count = 0;
    while rc == mqs_ok {
        if count == limits.communicators {
            snap.messages
                .push(format!("stopped after {count} communicators: the list may be corrupt"));
            break;
        }
        count += 1;
        let raw = match lib.get_communicator(s) {
            Ok(raw) => raw,
            Err(grc) => {
                snap.messages
                    .push(format!("a communicator could not be read: {}", describe(lib, s, grc)));
                break;
            }
        };
        let group = comm_group(lib, s, &raw);
        let mut comm = convert::communicator(&raw, group);
        let mut records: [Vec<u8>; 3] = Default::default();
        for (kind, records) in QueueKind::ALL.into_iter().zip(&mut records) {
            *comm.queues.get_mut(kind) = read_queue(lib, s, kind, &comm.name, limits.operations, records);
            if s.interrupted {
                return Err(RunError::Interrupted);
            }
        }
        snap.communicators.push(comm);
        raw_operations.push(records);
        rc = lib.next_communicator(s);
    }
    if rc != mqs_ok && rc != mqs_end_of_list && rc != mqs_no_information {
        snap.messages.push(format!(
            "the communicator list ended with an error: {}",
            describe(lib, s, rc)
        ));
    }
    Ok(())
}

/// The outcome of `mqs_image_has_queues` / `mqs_process_has_queues`: the
/// library's message counts only when the return code says it failed
/// (MPICH sets its failure text on success too). The message has its `%s`
/// replaced by our own code (never printf).
fn has_queues(
    lib: &Running<'_>,
    s: &Session<'_>,
    (rc, message): (c_int, Option<String>),
    image_name: &str,
) -> Result<(), RunError> {
    if rc == mqs_ok {
        return Ok(());
    }
    let message = message.map(|m| {
        m.replace("%s", image_name)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    });
    Err(RunError::NoQueues(has_queues_error(lib, s, rc, message, image_name)))
}

/// The error for a failed `mqs_image_has_queues` / `mqs_process_has_queues`.
fn has_queues_error(
    lib: &Running<'_>,
    s: &Session<'_>,
    rc: c_int,
    message: Option<String>,
    image_name: &str,
) -> String {
    let mut text = format!(
        "the message queue debug library cannot read the queues of {image_name}: {}",
        describe(lib, s, rc)
    );
    if let Some(m) = message.filter(|m| !m.is_empty()) {
        text.push_str(&format!(" ({m})"));
    }
    if let Some(t) = s.missing_types.first() {
        text.push_str(&format!(
            ". The type '{t}' has no debug information in the process: the MPI library is \
             stripped or was built without -g; install its debug symbols or rebuild it with -g"
        ));
    }
    text
}

/// World ranks of the current communicator's members, when the library says.
fn comm_group(lib: &Running<'_>, s: &mut Session<'_>, raw: &mqs_communicator) -> Option<Vec<i64>> {
    let size = convert::word(raw.size)?;
    if !(1..=1 << 24).contains(&size) {
        return None;
    }
    let members = lib.comm_group(s, size as usize)?;
    Some(members.into_iter().map(i64::from).collect())
}

/// Reads one queue: the records of its operations go to `records`; the
/// queue returned holds none yet ([`convert_operations`]).
fn read_queue(
    lib: &Running<'_>,
    s: &mut Session<'_>,
    kind: QueueKind,
    comm_name: &str,
    max_operations: usize,
    records: &mut Vec<u8>,
) -> Queue {
    let op_class = match kind {
        QueueKind::Sends => mqs_pending_sends,
        QueueKind::Receives => mqs_pending_receives,
        QueueKind::Unexpected => mqs_unexpected_messages,
    };
    let rc = lib.setup_operation_iterator(s, op_class);
    if rc != mqs_ok {
        return Queue::unavailable(if rc == mqs_no_information {
            "not available from this MPI's debug library (it does not implement this queue)".to_string()
        } else {
            format!("not available from this MPI's debug library: {}", describe(lib, s, rc))
        });
    }
    let mut queue = Queue::available(Vec::new());
    let mut count = 0;
    loop {
        if count == max_operations {
            queue.incomplete = true;
            queue.reason = Some(
                format!(
                    "stopped after {max_operations} operations in '{comm_name}' {}: the list may be corrupt",
                    kind.as_str()
                )
                .into(),
            );
            break;
        }
        let rc = lib.next_operation(s, records);
        if rc == mqs_ok {
            count += 1;
            continue;
        }
        if rc != mqs_end_of_list && rc != mqs_no_information {
            queue.incomplete = true;
            queue.reason = Some(format!("the list could not be read to its end: {}", describe(lib, s, rc)).into());
            if count == 0 && code::text(rc).is_some() {
                // Nothing read at all, and the cause is ours (memory): not "empty".
                queue.available = false;
            }
        }
        break;
    }
    queue
}
