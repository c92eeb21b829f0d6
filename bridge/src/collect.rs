//! Collecting one process's queues: find and load the debug library, set up
//! its image and process, iterate communicators and their three queues, and
//! normalise what it returns into the snapshot model.

#![allow(non_upper_case_globals)] // the mqs_* constants keep the header's names

use std::ffi::{c_char, c_int};
use std::path::PathBuf;
use std::time::Instant;

use crate::discover::{discover, Discovery};
use crate::dll::{self, c_string, Dll};
use crate::ffi::abi::*;
use crate::ffi::session::{code, Session};
use crate::ffi::trampolines::{IMAGE_CALLBACKS, PROCESS_CALLBACKS};
use crate::options::DumpOptions;
use crate::snapshot::model::*;
use crate::snapshot::normalize;
use crate::target::{Target, TargetError};

/// The dump was interrupted by the user.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("interrupted")]
pub struct Interrupted;

/// Most communicators read from one process (a corrupt list may loop).
/// `MPIQ_MAX_COMMUNICATORS` overrides it (see [`limit`]).
pub const MAX_COMMUNICATORS: usize = 100_000;
/// Most operations read from one queue of one communicator.
/// `MPIQ_MAX_OPERATIONS` overrides it (see [`limit`]). A looping list hits
/// it: 100,000 operations make a snapshot of about 50 MB of JSON, which the
/// helper sends in about half a second (a million took 5 s and 2.6 GB).
pub const MAX_OPERATIONS: usize = 100_000;

/// A limit of the dump: the positive integer in the environment variable
/// `name` (`MPIQ_MAX_COMMUNICATORS`, `MPIQ_MAX_OPERATIONS`,
/// `MPIQ_MAX_CALLBACKS`, `MPIQ_MAX_FAILURES`), else `default`. Read in the process that runs the
/// library (`mpiq-dllhost` inherits the front end's environment), so tests
/// can hit a limit in milliseconds and users can raise one.
pub fn limit(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(default)
}

/// The limits of one dump.
#[derive(Clone, Copy)]
struct Limits {
    communicators: usize,
    operations: usize,
}

impl Limits {
    fn current() -> Self {
        let get = |name, default: usize| usize::try_from(limit(name, default as u64)).unwrap_or(default);
        Limits {
            communicators: get("MPIQ_MAX_COMMUNICATORS", MAX_COMMUNICATORS),
            operations: get("MPIQ_MAX_OPERATIONS", MAX_OPERATIONS),
        }
    }
}

/// Collects one process. Failures are recorded in the snapshot; only an
/// interruption is an error.
///
/// The debug library runs in a helper process (`mpiq-dllhost`, see
/// [`crate::isolate`]) unless `opts.in_process` is set or no helper is
/// installed: a crash or hang in the library then cannot take the debugger
/// down with it.
pub fn collect(target: &mut dyn Target, opts: &DumpOptions) -> Result<ProcessSnapshot, Interrupted> {
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
            None => run_dll(target, &path, source, opts, known_rank),
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

/// Why one library could not be used.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Attempt {
    /// Not loaded: the reason (the next candidate is tried).
    Refused(String),
    /// The user interrupted the dump.
    Interrupted,
}

/// The operations of a dump as the library returned them: per communicator
/// of the snapshot, the records (`mqs_pending_operation`, as bytes) of its
/// three queues. [`convert_operations`] turns them into the snapshot's
/// operations once every communicator is read; the helper hands them to the
/// front end as they are, which is cheaper than encoding ten thousand
/// converted operations and decoding them again.
pub(crate) type RawOperations = Vec<[Vec<u8>; 3]>;

/// Size of one record in [`RawOperations`].
pub(crate) const RAW_OPERATION: usize = std::mem::size_of::<mqs_pending_operation>();

/// Fills the queues of `snap` from the records of [`RawOperations`]
/// (one entry per communicator, in order).
pub(crate) fn convert_operations(snap: &mut ProcessSnapshot, raw: &[[&[u8]; 3]]) -> Result<(), String> {
    if raw.len() != snap.communicators.len() {
        return Err(format!(
            "operations of {} communicators for {}",
            raw.len(),
            snap.communicators.len()
        ));
    }
    for (comm, queues) in snap.communicators.iter_mut().zip(raw) {
        for (kind, bytes) in QueueKind::ALL.into_iter().zip(queues) {
            if bytes.len() % RAW_OPERATION != 0 {
                return Err(format!("{} bytes of operations", bytes.len()));
            }
            let operations = bytes
                .chunks_exact(RAW_OPERATION)
                .map(|record| {
                    // SAFETY: `record` is RAW_OPERATION bytes, a whole
                    // mqs_pending_operation: plain integers and char arrays,
                    // for which every bit pattern is valid; read unaligned.
                    let op: mqs_pending_operation = unsafe { std::ptr::read_unaligned(record.as_ptr().cast()) };
                    normalize::operation(&op, kind, comm)
                })
                .collect();
            comm.queues.get_mut(kind).operations = operations;
        }
    }
    Ok(())
}

/// Loads the library at `path` here, in this process, and dumps the target
/// through it. The result holds `dll`, `error`, `messages`, `communicators`,
/// `world_rank` and, with `--stats`, `stats`.
pub fn run_dll(
    target: &mut dyn Target,
    path: &std::path::Path,
    source: DllSource,
    opts: &DumpOptions,
    known_rank: Option<i32>,
) -> Result<ProcessSnapshot, Attempt> {
    let (result, raw) = run_dll_raw(target, path, source, opts, known_rank);
    let mut snap = result?;
    let raw: Vec<[&[u8]; 3]> = raw.iter().map(|[a, b, c]| [&a[..], &b[..], &c[..]]).collect();
    if let Err(e) = convert_operations(&mut snap, &raw) {
        snap.messages.push(format!("mpiq: internal error: {e}"));
    }
    Ok(snap)
}

/// [`run_dll`], with the operations left as the library returned them.
pub(crate) fn run_dll_raw(
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
    let dll = dll::load(path).map_err(|e| Attempt::Refused(e.to_string()))?;
    let desc = target.describe();
    let image_name = if desc.executable.is_empty() {
        "the process".to_string()
    } else {
        desc.executable.clone()
    };
    let mut snap = ProcessSnapshot {
        pid: desc.pid,
        world_rank: known_rank,
        executable: desc.executable,
        dll: Some(dll_info(dll, path, source)),
        error: None,
        messages: Vec::new(),
        communicators: Vec::new(),
        stats: None,
    };
    // Everything from here runs the library: one dump at a time.
    let _guard = dll.lock.lock().unwrap_or_else(|p| p.into_inner());
    let mut session = Session::new(target, known_rank);
    let result = run_library(dll, &mut session, &image_name, &mut snap, raw, Limits::current());
    teardown(dll, &mut session);
    if session.interrupted {
        return Err(Attempt::Interrupted);
    }
    if let Err(e) = result {
        snap.error = Some(e);
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

fn dll_info(d: &Dll, path: &std::path::Path, source: DllSource) -> DllInfo {
    DllInfo {
        path: path.display().to_string(),
        version: d.version().to_string(),
        found_via: source,
    }
}

/// Text for a code a library or callback returned.
fn describe(dll: &Dll, session: &Session<'_>, c: c_int) -> String {
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
            let text = dll
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

/// A library message with `%s` replaced by our own code (never printf).
fn library_message(p: *mut c_char, name: &str) -> Option<String> {
    // SAFETY: the library sets *message to NULL or a static NUL-terminated string.
    let text = unsafe { c_string(p) }?;
    let text = text.replace("%s", name);
    Some(text.split_whitespace().collect::<Vec<_>>().join(" "))
}

fn run_library(
    dll: &Dll,
    s: &mut Session<'_>,
    image_name: &str,
    snap: &mut ProcessSnapshot,
    raw_operations: &mut RawOperations,
    limits: Limits,
) -> Result<(), String> {
    let e = &dll.entry;
    let image = s.image_ptr();
    let process = s.process_ptr();

    // SAFETY: image is a live handle of this session; the table is static.
    let rc = unsafe { (e.setup_image)(image, &IMAGE_CALLBACKS) };
    if rc != mqs_ok {
        return Err(format!(
            "the debug library could not set up {image_name}: {}",
            describe(dll, s, rc)
        ));
    }
    let mut message: *mut c_char = std::ptr::null_mut();
    // SAFETY: as above; `message` is a valid out-pointer.
    let rc = unsafe { (e.image_has_queues)(image, &mut message) };
    has_queues(dll, s, rc, message, image_name)?;
    // SAFETY: as above.
    let rc = unsafe { (e.setup_process)(process, &PROCESS_CALLBACKS) };
    if rc != mqs_ok {
        return Err(format!(
            "the debug library could not set up the process: {}",
            describe(dll, s, rc)
        ));
    }
    let mut message: *mut c_char = std::ptr::null_mut();
    // SAFETY: as above.
    let rc = unsafe { (e.process_has_queues)(process, &mut message) };
    has_queues(dll, s, rc, message, image_name)?;
    // SAFETY: as above.
    let rc = unsafe { (e.update_communicator_list)(process) };
    if rc != mqs_ok {
        return Err(format!(
            "cannot read the list of communicators: {}",
            describe(dll, s, rc)
        ));
    }
    // SAFETY: as above.
    let mut rc = unsafe { (e.setup_communicator_iterator)(process) };
    let mut count = 0;
    while rc == mqs_ok {
        if count == limits.communicators {
            snap.messages
                .push(format!("stopped after {count} communicators: the list may be corrupt"));
            break;
        }
        count += 1;
        // SAFETY: mqs_communicator is plain data; all-zero is valid.
        let mut raw: mqs_communicator = unsafe { std::mem::zeroed() };
        // SAFETY: as above; `raw` is a valid out-pointer.
        let grc = unsafe { (e.get_communicator)(process, &mut raw) };
        if grc != mqs_ok {
            snap.messages
                .push(format!("a communicator could not be read: {}", describe(dll, s, grc)));
            break;
        }
        let group = comm_group(dll, s, &raw);
        let mut comm = normalize::communicator(&raw, group);
        let mut records: [Vec<u8>; 3] = Default::default();
        for (kind, records) in QueueKind::ALL.into_iter().zip(&mut records) {
            *comm.queues.get_mut(kind) = read_queue(dll, s, kind, &comm.name, limits.operations, records);
            if s.interrupted {
                return Err("interrupted".into());
            }
        }
        snap.communicators.push(comm);
        raw_operations.push(records);
        // SAFETY: as above.
        rc = unsafe { (e.next_communicator)(process) };
    }
    if rc != mqs_ok && rc != mqs_end_of_list && rc != mqs_no_information {
        snap.messages.push(format!(
            "the communicator list ended with an error: {}",
            describe(dll, s, rc)
        ));
    }
    Ok(())
}

/// The outcome of `mqs_image_has_queues` / `mqs_process_has_queues`: the
/// library's message counts only when the return code says it failed
/// (MPICH sets its failure text on success too).
fn has_queues(dll: &Dll, s: &Session<'_>, rc: c_int, message: *mut c_char, image_name: &str) -> Result<(), String> {
    if rc == mqs_ok {
        return Ok(());
    }
    Err(has_queues_error(
        dll,
        s,
        rc,
        library_message(message, image_name),
        image_name,
    ))
}

/// The error for a failed `mqs_image_has_queues` / `mqs_process_has_queues`.
fn has_queues_error(dll: &Dll, s: &Session<'_>, rc: c_int, message: Option<String>, image_name: &str) -> String {
    let mut text = format!(
        "the message queue debug library cannot read the queues of {image_name}: {}",
        describe(dll, s, rc)
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
fn comm_group(dll: &Dll, s: &mut Session<'_>, raw: &mqs_communicator) -> Option<Vec<i64>> {
    let f = dll.entry.get_comm_group?;
    let size = normalize::word(raw.size)?;
    if !(1..=1 << 24).contains(&size) {
        return None;
    }
    let mut members = vec![-1 as c_int; size as usize];
    // SAFETY: the process handle is live; `members` has room for `size` ints,
    // the communicator's size as the library reported it.
    let rc = unsafe { f(s.process_ptr(), members.as_mut_ptr()) };
    (rc == mqs_ok).then(|| members.into_iter().map(i64::from).collect())
}

/// Reads one queue: the records of its operations go to `records`; the
/// queue returned holds none yet ([`convert_operations`]).
fn read_queue(
    dll: &Dll,
    s: &mut Session<'_>,
    kind: QueueKind,
    comm_name: &str,
    max_operations: usize,
    records: &mut Vec<u8>,
) -> Queue {
    let e = &dll.entry;
    let process = s.process_ptr();
    let op_class = match kind {
        QueueKind::Sends => mqs_pending_sends,
        QueueKind::Receives => mqs_pending_receives,
        QueueKind::Unexpected => mqs_unexpected_messages,
    };
    // SAFETY: live process handle.
    let rc = unsafe { (e.setup_operation_iterator)(process, op_class) };
    if rc != mqs_ok {
        return Queue::unavailable(if rc == mqs_no_information {
            "not available from this MPI's debug library (it does not implement this queue)".to_string()
        } else {
            format!("not available from this MPI's debug library: {}", describe(dll, s, rc))
        });
    }
    let mut queue = Queue::available(Vec::new());
    let mut count = 0;
    loop {
        if count == max_operations {
            queue.incomplete = true;
            queue.reason = Some(format!(
                "stopped after {max_operations} operations in '{comm_name}' {}: the list may be corrupt",
                kind.as_str()
            ));
            break;
        }
        // SAFETY: mqs_pending_operation is plain data; all-zero is valid.
        let mut raw: mqs_pending_operation = unsafe { std::mem::zeroed() };
        // SAFETY: live process handle; `raw` is a valid out-pointer.
        let rc = unsafe { (e.next_operation)(process, &mut raw) };
        if rc == mqs_ok {
            // SAFETY: `raw` is a live, fully initialised (zeroed, then
            // written by the library) plain-data value of RAW_OPERATION bytes.
            let bytes = unsafe {
                std::slice::from_raw_parts((&raw as *const mqs_pending_operation).cast::<u8>(), RAW_OPERATION)
            };
            records.extend_from_slice(bytes);
            count += 1;
            continue;
        }
        if rc != mqs_end_of_list && rc != mqs_no_information {
            queue.incomplete = true;
            queue.reason = Some(format!(
                "the list could not be read to its end: {}",
                describe(dll, s, rc)
            ));
            if count == 0 && code::text(rc).is_some() {
                // Nothing read at all, and the cause is ours (memory): not "empty".
                queue.available = false;
            }
        }
        break;
    }
    queue
}

/// Frees what the library stored in the image and process infos.
fn teardown(dll: &Dll, s: &mut Session<'_>) {
    if !s.process_info.is_null() {
        if let Some(f) = dll.entry.destroy_process_info {
            // SAFETY: the pointer is what the library gave put_process_info.
            unsafe { f(s.process_info) };
        }
        s.process_info = std::ptr::null_mut();
    }
    if !s.image_info.is_null() {
        if let Some(f) = dll.entry.destroy_image_info {
            // SAFETY: the pointer is what the library gave put_image_info.
            unsafe { f(s.image_info) };
        }
        s.image_info = std::ptr::null_mut();
    }
}
