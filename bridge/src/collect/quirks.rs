//! What an MPI's debug library gets wrong or cannot see, found from the
//! target and said in the snapshot, so that nothing it shows is taken for
//! more than it is:
//!
//! - Open MPI's library lists a request a thread waits on as complete
//!   ([`ompi_waited_requests`]);
//! - Open MPI's library sees only the `ob1` and `cm` PMLs' requests: on any
//!   other (`ucx`) every queue looks empty ([`ompi_transport`]).

use crate::snapshot::model::*;
use crate::target::{Target, TargetError};

/// Every check, on a process its library has just dumped. Only an
/// interruption is an error; a check that cannot tell leaves the snapshot
/// as it is.
pub(super) fn apply(target: &mut dyn Target, snap: &mut ProcessSnapshot) -> Result<(), TargetError> {
    ompi_waited_requests(target, snap)?;
    ompi_transport(target, snap)
}

fn is_open_mpi(snap: &ProcessSnapshot) -> bool {
    snap.dll.as_ref().is_some_and(|d| d.version.starts_with("Open MPI"))
}

/// The PMLs whose requests Open MPI's debug library walks: it reads the
/// free lists `mca_pml_base_send_requests` and `mca_pml_base_recv_requests`,
/// which only these allocate from.
const VISIBLE_PMLS: [&str; 2] = ["ob1", "cm"];

/// Where the component name is in `mca_base_component_t` when the type
/// cannot be looked up: after three ints, the 32-byte type name and three
/// more ints (unchanged from Open MPI 1.x to 5.x).
const COMPONENT_NAME_OFFSET: u64 = 56;
/// `MCA_BASE_MAX_COMPONENT_NAME_LEN + 1`.
const COMPONENT_NAME_LEN: usize = 64;

/// The name of the PML the Open MPI process selected
/// (`mca_pml_base_selected_component.pmlm_version.mca_component_name`), if
/// it can be read.
fn ompi_pml(target: &mut dyn Target) -> Result<Option<String>, TargetError> {
    let addr = match target.find_symbol("mca_pml_base_selected_component") {
        Ok(Some(a)) => a,
        Ok(None) => return Ok(None),
        Err(TargetError::Interrupted) => return Err(TargetError::Interrupted),
        Err(_) => return Ok(None),
    };
    let mut offset = COMPONENT_NAME_OFFSET;
    let field = |target: &mut dyn Target, ty: &str, f: &str| -> Result<Option<u64>, TargetError> {
        match target.find_type(ty) {
            Ok(Some(t)) => target.field_offset(t, f),
            Ok(None) => Ok(None),
            Err(e) => Err(e),
        }
    };
    if let (Ok(Some(version)), Ok(Some(name))) = (
        field(target, "mca_pml_base_component_t", "pmlm_version"),
        field(target, "mca_base_component_t", "mca_component_name"),
    ) {
        offset = version + name;
    }
    let mut buf = [0u8; COMPONENT_NAME_LEN];
    match target.read_memory(addr.wrapping_add(offset), &mut buf) {
        Ok(()) => {}
        Err(TargetError::Interrupted) => return Err(TargetError::Interrupted),
        // Said: on a PML other than ob1 or cm the queues would look empty.
        Err(e) => return Err(e),
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let name = &buf[..end];
    let plausible = !name.is_empty() && name.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_');
    Ok(plausible.then(|| String::from_utf8_lossy(name).into_owned()))
}

/// An Open MPI process on a PML its debug library cannot see: every send
/// and receive queue is marked not visible (never empty), and the process's
/// queues are missing for the analysis, which then goes by the stacks.
fn ompi_transport(target: &mut dyn Target, snap: &mut ProcessSnapshot) -> Result<(), TargetError> {
    if !is_open_mpi(snap) || snap.error.is_some() {
        return Ok(());
    }
    let pml = match ompi_pml(target) {
        Ok(Some(pml)) => pml,
        Ok(None) => return Ok(()),
        Err(TargetError::Interrupted) => return Err(TargetError::Interrupted),
        Err(e) => {
            snap.messages.push(format!(
                "which PML this Open MPI process runs on could not be read ({e}): on any but ob1 or cm \
                 its debug library sees no requests, and its queues would look empty though they are not"
            ));
            return Ok(());
        }
    };
    if VISIBLE_PMLS.contains(&pml.as_str()) {
        return Ok(());
    }
    let why = format!(
        "not visible with this transport (pml {pml}): Open MPI's debug library sees only the ob1 and cm \
         PMLs' requests; run with `--mca pml ob1` to see them"
    );
    for c in &mut snap.communicators {
        for kind in [QueueKind::Sends, QueueKind::Receives] {
            let q = c.queues.get_mut(kind);
            if q.operations.is_empty() {
                *q = Queue::unavailable(why.clone());
            } else {
                q.incomplete = true;
                q.reason = Some(why.clone());
            }
        }
    }
    let mut m = QueuesMissing::new(MissingReason::TransportHidden);
    m.transport = Some(format!("pml {pml}"));
    snap.queues_missing = Some(m);
    Ok(())
}

/// Open MPI 4.1's debug library reads a request's `req_complete` as a
/// flag, but while a thread waits on the request (`MPI_Wait*`, a blocking
/// call under `MPI_THREAD_MULTIPLE`) it holds a pointer to the waiter's
/// sync object (ompi/request/req_wait.c): such operations are listed as
/// `complete` though nothing arrived. Each operation listed complete whose
/// request (the `Receive: 0x...` / `Send: 0x...` line) holds anything but
/// `REQUEST_COMPLETED` (1) is set back to pending, and the process says so.
pub(super) fn ompi_waited_requests(target: &mut dyn Target, snap: &mut ProcessSnapshot) -> Result<(), TargetError> {
    let is_ompi = is_open_mpi(snap);
    let listed = |op: &Operation| {
        let line = op.extra_text.first()?;
        let hex = line
            .strip_prefix("Receive: 0x")
            .or_else(|| line.strip_prefix("Send: 0x"))?;
        u64::from_str_radix(hex.trim(), 16).ok()
    };
    let complete: Vec<(usize, QueueKind, usize, u64)> = snap
        .communicators
        .iter()
        .enumerate()
        .flat_map(|(ci, c)| {
            [QueueKind::Sends, QueueKind::Receives].into_iter().flat_map(move |q| {
                c.queues
                    .get(q)
                    .operations
                    .iter()
                    .enumerate()
                    .filter_map(move |(oi, op)| {
                        (op.status == Status::Complete).then(|| listed(op).map(|a| (ci, q, oi, a)))?
                    })
            })
        })
        .collect();
    if !is_ompi || complete.is_empty() {
        return Ok(());
    }
    let offset = match target.find_type("ompi_request_t")? {
        Some(ty) => target.field_offset(ty, "req_complete")?,
        None => None,
    };
    let Some(offset) = offset else {
        snap.messages.push(
            "operations listed as complete could not be checked: no type ompi_request_t with a field \
             req_complete (Open MPI's debug library lists requests a thread waits on as complete)"
                .into(),
        );
        return Ok(());
    };
    let mut fixed = 0usize;
    let mut unreadable = 0usize;
    for (ci, q, oi, addr) in complete {
        let mut word = [0u8; 8];
        match target.read_memory(addr.wrapping_add(offset), &mut word) {
            Ok(()) => {
                if u64::from_le_bytes(word) != 1 {
                    snap.communicators[ci].queues.get_mut(q).operations[oi].status = Status::Pending;
                    fixed += 1;
                }
            }
            Err(TargetError::Interrupted) => return Err(TargetError::Interrupted),
            Err(_) => unreadable += 1,
        }
    }
    if fixed > 0 {
        snap.messages.push(format!(
            "{fixed} operation{} the debug library listed as complete {} pending: a thread waits on {} \
             (Open MPI's library reads the request's req_complete, then a pointer to the waiter, as a flag)",
            if fixed == 1 { "" } else { "s" },
            if fixed == 1 { "is" } else { "are" },
            if fixed == 1 { "it" } else { "them" },
        ));
    }
    if unreadable > 0 {
        snap.messages.push(format!(
            "{unreadable} operation{} listed as complete could not be checked (its request could not be read)",
            if unreadable == 1 { "" } else { "s" }
        ));
    }
    Ok(())
}
