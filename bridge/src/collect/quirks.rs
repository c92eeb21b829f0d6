//! What an MPI's debug library gets wrong or cannot see, found from the
//! target and said in the snapshot, so that nothing it shows is taken for
//! more than it is:
//!
//! - Open MPI's library lists a request a thread waits on as complete
//!   ([`ompi_waited_requests`]);
//! - Open MPI's library sees only the `ob1` and `cm` PMLs' requests: on any
//!   other (`ucx`) every queue looks empty ([`ompi_transport`]);
//! - MPICH 4.0's library for the ch4 device reads a receive's source, tag
//!   and communicator from fields its request type has not got: what it
//!   lists as posted receives and unexpected messages, and what it leaves
//!   out, cannot be believed ([`mpich_ch4_receives`]).

use crate::snapshot::model::*;
use crate::target::{Target, TargetError};

/// Every check, on a process its library has just dumped. Only an
/// interruption is an error; a check that cannot tell leaves the snapshot
/// as it is.
pub(super) fn apply(target: &mut dyn Target, snap: &mut ProcessSnapshot) -> Result<(), TargetError> {
    ompi_waited_requests(target, snap)?;
    ompi_transport(target, snap)?;
    mpich_ch4_receives(target, snap)
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
    // Every MCA component's struct starts with its `mca_base_component_t`
    // (`pmlm_version` here: Open MPI casts one to the other throughout), so
    // the name is at the base type's field offset. The PML component's own
    // type is not looked up: in libmpi 4.1.4 its first definition is in
    // unit 505 of 505, and finding it took three quarters of a dump's time
    // (issue 26).
    if let Ok(Some(name)) = field(target, "mca_base_component_t", "mca_component_name") {
        offset = name;
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
                q.reason = Some(why.as_str().into());
            }
        }
    }
    give_up(snap, MissingReason::TransportHidden, format!("pml {pml}"));
    Ok(())
}

/// Marks the process's queues missing for the analysis (which then goes by
/// its stacks) for a library that works but is blind or wrong, named by its
/// own version (a replay says the same as the live dump).
fn give_up(snap: &mut ProcessSnapshot, reason: MissingReason, transport: String) {
    let mut m = QueuesMissing::new(reason);
    m.transport = Some(transport);
    m.mpi = snap.dll.as_ref().and_then(|d| mpi_of_dll(&d.version));
    snap.queues_missing = Some(m);
}

/// The MPI and version a debug library's version string names: Open MPI's
/// `Open MPI message queue support for parallel debuggers 5.0.7 v5.0.7`
/// gives `Open MPI 5.0.7`, MPICH's `MPICH message queue support for MPICH
/// 4.0.2 compiled on ...` gives `MPICH 4.0.2`.
fn mpi_of_dll(version: &str) -> Option<String> {
    let words: Vec<&str> = version.split_whitespace().collect();
    let numbered = |w: &&&str| w.chars().next().is_some_and(|c| c.is_ascii_digit()) && w.contains('.');
    let v = words.iter().find(numbered)?.trim_end_matches(',');
    if version.starts_with("Open MPI") {
        Some(format!("Open MPI {v}"))
    } else if version.starts_with("MPICH") {
        Some(format!("MPICH {v}"))
    } else {
        None
    }
}

/// Whether the MPICH debug library of this version string reads
/// [`CH4_RECEIVE_FIELDS`].
fn reads_ch4_am_fields(version: &str) -> bool {
    mpi_of_dll(version).is_some_and(|v| CH4_WRONG_VERSIONS.contains(&v.as_str()))
}

fn is_mpich(snap: &ProcessSnapshot) -> bool {
    snap.dll.as_ref().is_some_and(|d| d.version.starts_with("MPICH"))
}

/// The fields of ch4's active-message request (`MPIDIG_req_t`, inside
/// `MPIR_Request.dev.ch4.am`) that MPICH 4.0's debug library
/// (`dll_mpich.c`, `HAVE_CH4_DEBUGGER_SUPPORT`) takes a receive's source,
/// tag and context id from. 4.0's type keeps them in `u.recv.{source, tag,
/// context_id}`: the library's lookups fail, it adds the failure (-1) to
/// the offset of `am` and reads bytes beside the fields it wants. Its
/// filter on the communicator's context id then drops receives that are
/// there (MPICH issues 6131, 6141) and could keep one with a wrong source
/// and tag.
const CH4_RECEIVE_FIELDS: [&str; 3] = ["rank", "tag", "context_id"];

/// The MPICH versions whose ch4 debug library reads [`CH4_RECEIVE_FIELDS`]
/// (pmodels/mpich#6141: "MPICH 4.0.1, MPICH 4.0.2"; 4.0 introduced it).
const CH4_WRONG_VERSIONS: [&str; 3] = ["MPICH 4.0", "MPICH 4.0.1", "MPICH 4.0.2"];

/// An operation's `buffer` when the library's is known to be wrong.
pub(crate) const UNKNOWN_BUFFER: &str = "unknown";

/// An MPICH process on the ch4 device whose debug library reads receives
/// from fields its request type has not got: every receive queue and
/// unexpected-message queue is marked untrustworthy (not available, with
/// why; never empty, never a wrong source or tag), the process's queues
/// are missing for the analysis, which goes by the stacks. The send queue
/// is kept: the library reads a send's destination, tag and communicator
/// from the record `MPI_Isend` and its kind keep at the API level
/// (`MPIR_Sendq`), which is the same on every device.
///
/// On any other ch4 (a version whose library does not read those fields,
/// or a type that has them), the receives are still only those of the
/// active-message path: a netmod's own tag matching keeps its receives
/// where no debug library looks, so they are marked incomplete.
/// Whether MPICH runs the ch4 device, by its global state's symbol:
/// `None` when the symbol tables do not say (neither, or both).
fn device_by_symbol(target: &mut dyn Target) -> Result<Option<bool>, TargetError> {
    let mut has = |name: &str| match target.find_symbol(name) {
        Ok(found) => Ok(found.is_some()),
        Err(TargetError::Interrupted) => Err(TargetError::Interrupted),
        Err(_) => Ok(false),
    };
    let ch4 = has("MPIDI_global")?;
    let ch3 = has("MPIDI_Process")?;
    Ok((ch4 != ch3).then_some(ch4))
}

pub(super) fn mpich_ch4_receives(target: &mut dyn Target, snap: &mut ProcessSnapshot) -> Result<(), TargetError> {
    if !is_mpich(snap) || snap.error.is_some() {
        return Ok(());
    }
    // ch3 keeps its state in `MPIDI_Process`, ch4 in `MPIDI_global`: a
    // symbol table answers at once, where a type ch3 has not got made the
    // lookup below read every object's DWARF (with libc6-dbg installed,
    // 150 ms per process).
    if device_by_symbol(target)? == Some(false) {
        return Ok(());
    }
    let am = match target.find_type("MPIDIG_req_t") {
        Ok(Some(t)) => t,
        // Not ch4 (ch3 has no such type).
        Ok(None) => return Ok(()),
        Err(TargetError::Interrupted) => return Err(TargetError::Interrupted),
        Err(e) => {
            snap.messages.push(format!(
                "whether this MPICH runs the ch4 device could not be read ({e}): ch4's debug library in MPICH \
                 4.0 lists receives wrongly"
            ));
            return Ok(());
        }
    };
    let mut absent = Vec::new();
    for f in CH4_RECEIVE_FIELDS {
        match target.field_offset(am, f) {
            Ok(Some(_)) => {}
            Ok(None) => absent.push(f),
            Err(TargetError::Interrupted) => return Err(TargetError::Interrupted),
            Err(e) => {
                snap.messages.push(format!(
                    "the layout of MPICH's ch4 receive requests could not be checked ({e}): its debug library's \
                     receives are shown as it gives them"
                ));
                return Ok(());
            }
        }
    }
    // Only 4.0 to 4.0.2's library takes those fields (fixed in 4.0.3,
    // which reads the device-level queues): on another version their
    // absence says nothing of what its library reads.
    let reads_them = snap.dll.as_ref().is_some_and(|d| reads_ch4_am_fields(&d.version));
    if absent.is_empty() || !reads_them {
        let why = "ch4 device: receives its netmod matches itself (OFI's or UCX's own tag matching) are not \
                   listed, only those on the active-message path (shared memory, or \
                   MPIR_CVAR_CH4_OFI_ENABLE_TAGGED=0)";
        for c in &mut snap.communicators {
            for kind in [QueueKind::Receives, QueueKind::Unexpected] {
                let q = c.queues.get_mut(kind);
                if q.available {
                    q.incomplete = true;
                    q.reason.get_or_insert_with(|| why.into());
                }
            }
        }
        return Ok(());
    }
    let why = format!(
        "not trustworthy: MPICH's ch4 debug library reads a receive's source, tag and communicator from \
         fields MPIDIG_req_t has not got ({}; MPICH issues 6131, 6141): receives it lists may be wrong and \
         receives it leaves out may be pending",
        absent.join(", ")
    );
    let mut sends = 0usize;
    for c in &mut snap.communicators {
        for kind in [QueueKind::Receives, QueueKind::Unexpected] {
            *c.queues.get_mut(kind) = Queue::unavailable(why.clone());
        }
        // A send's buffer and count come from the active-message part of
        // its request, which a send on any other path leaves as it was
        // (a ring's eager sends on shared memory read as buffer 0x0,
        // length 0): not shown.
        for op in &mut c.queues.sends.operations {
            op.buffer = UNKNOWN_BUFFER.into();
            op.length = None;
            if let Some(a) = op.actual.as_mut() {
                a.length = None;
            }
            sends += 1;
        }
    }
    if sends > 0 {
        snap.messages.push(format!(
            "the buffer and length of {sends} send{} are not shown: MPICH's ch4 debug library reads them from \
             the active-message part of the request, which is empty unless the send took that path",
            if sends == 1 { "" } else { "s" }
        ));
    }
    give_up(snap, MissingReason::LibraryUntrusted, "ch4".into());
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

#[cfg(test)]
mod tests {
    use super::{mpi_of_dll, reads_ch4_am_fields};

    #[test]
    fn only_mpich_4_0_to_4_0_2_read_the_ch4_fields_that_are_not_there() {
        let v = |n: &str| format!("MPICH message queue support for MPICH {n} compiled on Nov 24 2026");
        for n in ["4.0", "4.0.1", "4.0.2"] {
            assert!(reads_ch4_am_fields(&v(n)), "{n}");
        }
        for n in ["4.0.3", "4.1", "4.1.2", "4.3.2", "3.4.3"] {
            assert!(!reads_ch4_am_fields(&v(n)), "{n}");
        }
        assert!(!reads_ch4_am_fields(
            "Open MPI message queue support for parallel debuggers 4.0.2"
        ));
    }

    #[test]
    fn the_mpi_is_named_by_its_debug_librarys_version() {
        assert_eq!(
            mpi_of_dll("Open MPI message queue support for parallel debuggers 5.0.7 v5.0.7").as_deref(),
            Some("Open MPI 5.0.7")
        );
        assert_eq!(
            mpi_of_dll("MPICH message queue support for MPICH 4.0.2 compiled on Nov 24 2026").as_deref(),
            Some("MPICH 4.0.2")
        );
        assert_eq!(mpi_of_dll("some other library"), None);
        assert_eq!(mpi_of_dll("MPICH message queue support"), None);
    }
}
