//! Reading mpiq's flight recorder out of a process (`recorder/`, layout
//! `recorder/mpiq_recorder.h`, version 1): the header at the symbol
//! `mpiq_recorder`, then its tables at the offsets the header gives, in the
//! target's byte order, through the same [`Target`] as everything else (a
//! live process, a core file, gdb, lldb).
//!
//! A record of the ring counts only when its `seq` is its own number: any
//! other value is a record the process was writing when it stopped, left
//! out and counted (`torn`). Record sizes come from the header, so a newer
//! recorder with longer records still reads.

use crate::snapshot::recorder::{RecordedArgs, RecordedCall, RecordedComm, RecordedRequest, Recording};
use crate::target::{ByteOrder, Target, TargetError};

use layout::*;

/// The sizes and offsets of the header's structs.
mod layout;

/// The symbol the recorder's header is at.
pub const SYMBOL: &str = "mpiq_recorder";

/// The numbers of the wait and test calls (`MPIQ_CALL_WAIT` to
/// `MPIQ_CALL_TESTSOME` of `mpiq_recorder.h`), whose records count the
/// requests they were given (tests/recorded_calls_agree.rs holds this to
/// the header).
pub const WAIT_CALLS: std::ops::RangeInclusive<i32> = 30..=37;

const MAGIC: &[u8; 8] = b"MPIQREC\0";
/// Largest table this reader reads (records): a header asking for more is
/// not a recorder's.
const MOST_RECORDS: u32 = 1 << 20;

const PEER_NONE: i32 = -32768;
const PEER_ANY_SOURCE: i32 = -32767;
const PEER_PROC_NULL: i32 = -32766;
const TAG_NONE: i32 = -32768;
const TAG_ANY: i32 = -32767;
/// `mpiq_recorder_pending.flags`: a persistent request (`MPI_Send_init`).
const PENDING_PERSISTENT: u32 = 1;

/// Why a process's recorder could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecorderError {
    /// The target failed (unreadable memory, interrupted).
    #[error("{0}")]
    Target(#[from] TargetError),
    /// The symbol is there, but what it holds is not a recorder this mpiq
    /// reads.
    #[error("the flight recorder at {addr:#x} cannot be read: {why}")]
    Layout {
        /// Where the symbol is.
        addr: u64,
        /// What is wrong.
        why: String,
    },
}

/// The recorder's tables, or `None` when the process does not run it.
pub fn read(target: &mut dyn Target) -> Result<Option<Recording>, RecorderError> {
    // A host that cannot answer the lookup (a recording made before the
    // recorder existed) has no recorder to show: it is optional.
    let addr = match target.find_symbol(SYMBOL) {
        Ok(Some(addr)) => addr,
        Ok(None) => return Ok(None),
        Err(TargetError::Interrupted) => return Err(TargetError::Interrupted.into()),
        Err(_) => return Ok(None),
    };
    let order = target.byte_order();
    let mut head = vec![0u8; HEADER_LEN];
    target.read_memory(addr, &mut head)?;
    let h = Fields::new(&head, order);
    let bad = |why: String| RecorderError::Layout { addr, why };
    if head[..8] != MAGIC[..] {
        return Err(bad(if head[..8].iter().all(|&b| b == 0) {
            "it is empty: the recorder's library is loaded and not started (the process has not reached main yet, or the recorder's initialiser did not run)".into()
        } else {
            "no magic (another object's symbol?)".into()
        }));
    }
    let version = h.u32(H_VERSION);
    if version != 1 {
        return Err(bad(format!(
            "layout version {version}; this mpiq reads version 1 (use the mpiq that came with the recorder)"
        )));
    }
    let table = |[off, n, size]: [usize; 3], min: usize| -> Result<(u64, usize, usize), RecorderError> {
        let (offset, n, size) = (h.u32(off), h.u32(n), h.u32(size) as usize);
        if n > MOST_RECORDS || size < min {
            return Err(bad(format!("a table of {n} records of {size} bytes")));
        }
        Ok((addr + u64::from(offset), n as usize, size))
    };
    let (calls_at, ncalls, call_size) = table([H_CALLS_OFFSET, H_NCALLS, H_CALL_SIZE], CALL_LEN)?;
    let (pending_at, npending, pending_size) = table([H_PENDING_OFFSET, H_NPENDING, H_PENDING_SIZE], PENDING_LEN)?;
    let (comms_at, ncomms, comm_size) = table([H_COMMS_OFFSET, H_NCOMMS, H_COMM_SIZE], COMM_LEN)?;
    let (ranks_offset, nranks, ranks_used) = (
        h.u32(H_WORLD_RANKS_OFFSET),
        h.u32(H_NWORLD_RANKS),
        h.u32(H_WORLD_RANKS_USED),
    );
    let initialized = h.u32(H_INITIALIZED) == 1;
    let mut rec = Recording {
        version,
        mpi: match h.u32(H_FLAVOUR) {
            1 => "open_mpi",
            2 => "mpich",
            _ => "unknown",
        }
        .into(),
        initialized,
        world_rank: initialized.then(|| i64::from(h.i32(H_WORLD_RANK))),
        world_size: initialized.then(|| i64::from(h.i32(H_WORLD_SIZE))),
        calls_started: h.u64(H_CALLS_STARTED),
        pending_complete: h.u64(H_PENDING_DROPPED) == 0,
        ..Recording::default()
    };
    let comm_world = h.u64(H_COMM_WORLD);

    // The ring: the last min(started, ncalls) records, oldest first.
    let started = rec.calls_started;
    let kept = started.min(ncalls as u64);
    if kept > 0 {
        // Until the ring went round, only its first `started` records.
        let mut ring = vec![0u8; kept as usize * call_size];
        target.read_memory(calls_at, &mut ring)?;
        for i in started - kept..started {
            let slot = (i % ncalls as u64) as usize;
            let f = Fields::new(&ring[slot * call_size..(slot + 1) * call_size], order);
            if f.u64(C_SEQ) != i + 1 {
                rec.torn += 1;
                continue;
            }
            rec.calls.push(call(&f));
        }
    }

    // Pending requests: slots in state 2.
    if npending > 0 {
        let mut table = vec![0u8; npending * pending_size];
        target.read_memory(pending_at, &mut table)?;
        for chunk in table.chunks_exact(pending_size) {
            let f = Fields::new(chunk, order);
            // 2: active; 4: a persistent request not started (not pending).
            if f.u32(P_STATE) != 2 {
                continue;
            }
            let waited_by = f.u64(P_WAITED_BY);
            rec.pending.push(RecordedRequest {
                request: hex(f.u64(P_REQUEST)),
                call: call_name(f.i32(P_CALL)).into(),
                call_seq: f.u64(P_CALL_SEQ),
                args: args(&f, ArgsAt::PENDING),
                start_ns: f.u64(P_START_NS),
                waited_by: (waited_by != 0).then_some(waited_by),
                persistent: f.u32(P_FLAGS) & PENDING_PERSISTENT != 0,
            });
        }
        rec.pending.sort_by_key(|p| p.call_seq);
    }

    // Communicators, with their members' world ranks.
    if ncomms > 0 {
        let mut table = vec![0u8; ncomms * comm_size];
        target.read_memory(comms_at, &mut table)?;
        let used = ranks_used.min(nranks) as usize;
        let mut ranks = vec![0u8; used * 4];
        if used > 0 {
            target.read_memory(addr + u64::from(ranks_offset), &mut ranks)?;
        }
        let ranks = Fields::new(&ranks, order);
        for chunk in table.chunks_exact(comm_size) {
            let f = Fields::new(chunk, order);
            if f.u32(M_STATE) != 2 {
                continue;
            }
            let (size, first) = (f.i32(M_SIZE), f.i32(M_WORLD_FIRST));
            let world_ranks = usize::try_from(first).ok().and_then(|first| {
                let n = usize::try_from(size).ok()?;
                (first + n <= used).then(|| (first..first + n).map(|k| i64::from(ranks.i32(k * 4))).collect())
            });
            rec.comms.push(RecordedComm {
                handle: hex(f.u64(M_HANDLE)),
                world: f.u64(M_HANDLE) == comm_world,
                rank: i64::from(f.i32(M_RANK)),
                size: i64::from(size),
                collectives: f.u64(M_COLLECTIVES),
                world_ranks,
            });
        }
        rec.comms
            .sort_by(|a, b| b.world.cmp(&a.world).then(a.handle.cmp(&b.handle)));
    }
    Ok(Some(rec))
}

/// One call record.
fn call(f: &Fields<'_>) -> RecordedCall {
    let id = f.i32(C_CALL);
    let name = call_name(id);
    let waits = WAIT_CALLS.contains(&id);
    RecordedCall {
        requests_active: waits.then(|| i64::from(f.i32(C_REQUESTS_ACTIVE))),
        requests_known: waits.then(|| i64::from(f.i32(C_REQUESTS_KNOWN))),
        seq: f.u64(C_SEQ),
        call: name.into(),
        args: args(f, ArgsAt::CALL),
        source: peer_of(f.i32(C_PEER2)).0,
        recv_tag: tag_of(f.i32(C_TAG2)).0,
        request: nonzero(f.u64(C_REQUEST)),
        tid: u64::from(f.u32(C_TID)),
        start_ns: f.u64(C_START_NS),
        end_ns: (f.u64(C_END_NS) != 0).then(|| f.u64(C_END_NS)),
    }
}

/// Where a record keeps a call's arguments (`mpiq_recorder.h`).
struct ArgsAt {
    comm: usize,
    coll_seq: usize,
    peer: usize,
    tag: usize,
    count: usize,
    type_size: usize,
}

impl ArgsAt {
    const CALL: ArgsAt = ArgsAt {
        comm: C_COMM,
        coll_seq: C_COLL_SEQ,
        peer: C_PEER,
        tag: C_TAG,
        count: C_COUNT,
        type_size: C_TYPE_SIZE,
    };
    const PENDING: ArgsAt = ArgsAt {
        comm: P_COMM,
        coll_seq: P_COLL_SEQ,
        peer: P_PEER,
        tag: P_TAG,
        count: P_COUNT,
        type_size: P_TYPE_SIZE,
    };
}

/// The arguments of a call record or a pending request.
fn args(f: &Fields<'_>, at: ArgsAt) -> RecordedArgs {
    let (peer, any_source) = peer_of(f.i32(at.peer));
    let (tag, any_tag) = tag_of(f.i32(at.tag));
    let coll = f.u64(at.coll_seq);
    RecordedArgs {
        comm: nonzero(f.u64(at.comm)),
        peer,
        any_source,
        tag,
        any_tag,
        count: i64::from(f.i32(at.count)),
        type_size: size(f.i32(at.type_size)),
        collective_seq: (coll != 0).then_some(coll),
    }
}

/// A peer field: a rank, or whether it is `MPI_ANY_SOURCE`.
fn peer_of(v: i32) -> (Option<i64>, bool) {
    match v {
        PEER_NONE | PEER_PROC_NULL => (None, false),
        PEER_ANY_SOURCE => (None, true),
        r => (Some(i64::from(r)), false),
    }
}

fn tag_of(v: i32) -> (Option<i64>, bool) {
    match v {
        TAG_NONE => (None, false),
        TAG_ANY => (None, true),
        t => (Some(i64::from(t)), false),
    }
}

fn size(v: i32) -> Option<i64> {
    (v >= 0).then(|| i64::from(v))
}

fn hex(v: u64) -> String {
    format!("{v:#x}")
}

fn nonzero(v: u64) -> Option<String> {
    (v != 0).then(|| hex(v))
}

/// The canonical name of a recorded call (`mpiq_recorder.h`'s numbers; the
/// names are the stacks' own, [`crate::stacks::names`]).
pub fn call_name(id: i32) -> &'static str {
    match id {
        1 => "init",
        2 => "finalize",
        10 => "send",
        11 => "ssend",
        12 => "bsend",
        13 => "rsend",
        14 => "recv",
        15 => "sendrecv",
        16 => "probe",
        17 => "iprobe",
        18 => "mprobe",
        19 => "improbe",
        20 => "isend",
        21 => "issend",
        22 => "ibsend",
        23 => "irsend",
        24 => "irecv",
        25 => "mrecv",
        26 => "imrecv",
        27 => "sendrecv_replace",
        30 => "wait",
        31 => "waitall",
        32 => "waitany",
        33 => "waitsome",
        34 => "test",
        35 => "testall",
        36 => "testany",
        37 => "testsome",
        40 => "barrier",
        41 => "bcast",
        42 => "reduce",
        43 => "allreduce",
        44 => "gather",
        45 => "allgather",
        46 => "scatter",
        47 => "alltoall",
        50 => "ibarrier",
        51 => "ibcast",
        52 => "iallreduce",
        60 => "comm_dup",
        61 => "comm_split",
        62 => "comm_create",
        63 => "comm_free",
        70 => "send_init",
        71 => "ssend_init",
        72 => "recv_init",
        73 => "start",
        74 => "startall",
        75 => "bsend_init",
        76 => "rsend_init",
        _ => "unknown",
    }
}

/// Fixed-size integers of a record, in the target's byte order.
struct Fields<'a> {
    bytes: &'a [u8],
    order: ByteOrder,
}

impl<'a> Fields<'a> {
    fn new(bytes: &'a [u8], order: ByteOrder) -> Self {
        Fields { bytes, order }
    }

    fn take<const N: usize>(&self, at: usize) -> [u8; N] {
        let mut out = [0u8; N];
        if let Some(b) = self.bytes.get(at..at + N) {
            out.copy_from_slice(b);
        }
        out
    }

    fn u64(&self, at: usize) -> u64 {
        let b = self.take::<8>(at);
        match self.order {
            ByteOrder::Little => u64::from_le_bytes(b),
            ByteOrder::Big => u64::from_be_bytes(b),
        }
    }

    fn u32(&self, at: usize) -> u32 {
        let b = self.take::<4>(at);
        match self.order {
            ByteOrder::Little => u32::from_le_bytes(b),
            ByteOrder::Big => u32::from_be_bytes(b),
        }
    }

    fn i32(&self, at: usize) -> i32 {
        self.u32(at) as i32
    }
}

#[cfg(test)]
mod tests;
