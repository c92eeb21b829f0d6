//! What the arguments of each thread's MPI call say (docs/design/stacks.md
//! §4.4, §4.5): the communicator (as one of the queues' communicators), the
//! peer, the tag, the root and the user buffer, read from the frames of the
//! call through [`Target::frame_value`] and the target's memory.
//!
//! Everything goes through the [`Target`]: questions by name are answered
//! by the cache `collect` puts in front of the host, memory and frame
//! values are asked each time. Whatever is not recovered is `None` in the
//! [`MpiCall`], with the reason in its `why`.

mod request;

use super::names::{classify, CallClass, Collective};
use super::position::{entry_point, outermost_entry};
use crate::snapshot::model::{Communicator, MpiCall, ThreadStack};
use crate::target::{ByteOrder, Target, TargetError};

/// Which MPI the process runs: the handles and constants differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flavour {
    /// `MPI_Comm` is an `ompi_communicator_t *`; the debug library's
    /// communicator id is its `c_contextid`.
    OpenMpi,
    /// `MPI_Comm` is an `int`; the debug library's communicator id is the
    /// address of the `MPIR_Comm`.
    Mpich,
    /// Neither symbol was found.
    Unknown,
}

impl Flavour {
    /// Tells them apart by a symbol only each has.
    fn of(target: &mut dyn Target) -> Result<Flavour, TargetError> {
        if target.find_symbol("ompi_mpi_comm_world")?.is_some() {
            return Ok(Flavour::OpenMpi);
        }
        if target.find_symbol("MPIR_Comm_builtin")?.is_some() {
            return Ok(Flavour::Mpich);
        }
        Ok(Flavour::Unknown)
    }

    /// `MPI_ANY_SOURCE`.
    fn any_source(self) -> Option<i64> {
        match self {
            Flavour::OpenMpi => Some(-1),
            Flavour::Mpich => Some(-2),
            Flavour::Unknown => None,
        }
    }

    /// `MPI_PROC_NULL`.
    fn proc_null(self) -> Option<i64> {
        match self {
            Flavour::OpenMpi => Some(-2),
            Flavour::Mpich => Some(-1),
            Flavour::Unknown => None,
        }
    }
}

/// `MPI_ANY_TAG`, the same in both.
const ANY_TAG: i64 = -1;

/// The arguments a call's class has: (buffer, peer, tag) parameter names,
/// each in the order they are tried, and whether it has a root and a
/// communicator worth a reason when missing.
struct Wanted {
    buffer: &'static [&'static str],
    peer: &'static [&'static str],
    tag: &'static [&'static str],
    /// The peer is a source (ANY_SOURCE possible), not a destination.
    source: bool,
    root: bool,
    comm: bool,
}

fn wanted(call: &str, class: CallClass) -> Wanted {
    let none = Wanted {
        buffer: &[],
        peer: &[],
        tag: &[],
        source: false,
        root: false,
        comm: false,
    };
    match class {
        CallClass::Send { .. } => Wanted {
            buffer: &["buf"],
            peer: &["dest"],
            tag: &["tag"],
            comm: true,
            ..none
        },
        _ if matches!(class, CallClass::Recv) || call == "iprobe" || call == "improbe" => Wanted {
            buffer: if call == "recv" { &["buf"] } else { &[] },
            peer: &["source"],
            tag: &["tag"],
            source: true,
            comm: true,
            ..none
        },
        CallClass::LocalSend if call == "bsend" => Wanted {
            buffer: &["buf"],
            peer: &["dest"],
            tag: &["tag"],
            ..none
        },
        // What it waits for last: its receive.
        CallClass::SendRecv => Wanted {
            buffer: &["recvbuf", "buf"],
            peer: &["source"],
            tag: &["recvtag"],
            source: true,
            comm: true,
            ..none
        },
        CallClass::Collective { kind } => Wanted {
            root: kind == Collective::Rooted,
            comm: true,
            ..none
        },
        CallClass::CommConstruct => Wanted { comm: true, ..none },
        _ => none,
    }
}

/// The MPI call of each application thread that is in one, with what its
/// arguments say, in the order of `threads`. `communicators` are the
/// process's, as its debug library listed them. Stops asking at an
/// interruption (the calls so far are returned: [`try_calls`] tells).
pub fn calls(target: &mut dyn Target, threads: &[ThreadStack], communicators: &[Communicator]) -> Vec<MpiCall> {
    read(target, threads, communicators).0
}

/// [`calls`], or [`TargetError::Interrupted`] if the user interrupted.
pub fn try_calls(
    target: &mut dyn Target,
    threads: &[ThreadStack],
    communicators: &[Communicator],
) -> Result<Vec<MpiCall>, TargetError> {
    match read(target, threads, communicators) {
        (_, true) => Err(TargetError::Interrupted),
        (calls, false) => Ok(calls),
    }
}

/// The calls, and whether reading them was interrupted.
fn read(target: &mut dyn Target, threads: &[ThreadStack], communicators: &[Communicator]) -> (Vec<MpiCall>, bool) {
    let mut out = Vec::new();
    let mut mpi = None;
    for t in threads {
        let Some((entry, call)) = outermost_entry(t) else {
            continue;
        };
        // The call's frame stays the outermost entry (the calling frames'
        // digest starts there: the recorder's frame changes every call).
        let outer = u32::try_from(entry).unwrap_or(u32::MAX);
        let entry = beneath_recorder(t, entry);
        let mpi = match mpi {
            Some(m) => m,
            None => match Flavour::of(target) {
                Err(TargetError::Interrupted) => return (out, true),
                m => *mpi.insert(m.unwrap_or(Flavour::Unknown)),
            },
        };
        let mut one = Reader {
            target,
            thread: t,
            entry,
            call: &call,
            why: Vec::new(),
            interrupted: false,
        };
        let mut mc = one.call(mpi, communicators);
        mc.frame = outer;
        let interrupted = one.interrupted;
        out.push(mc);
        if interrupted {
            return (out, true);
        }
    }
    (out, false)
}

/// The entry point whose arguments to read: mpiq's flight recorder's
/// `MPI_X` (built without debug information) passes them on to the MPI's
/// `PMPI_X`, the next entry point inwards, whose are read instead.
fn beneath_recorder(t: &ThreadStack, entry: usize) -> usize {
    let recorder = |i: usize| super::position::is_recorder_frame(&t.frames[i]);
    if !recorder(entry) {
        return entry;
    }
    (0..entry)
        .rev()
        .find(|&i| entry_point(&t.frames[i]).is_some() && !recorder(i))
        .unwrap_or(entry)
}

/// The reading of one thread's call.
struct Reader<'a> {
    target: &'a mut dyn Target,
    thread: &'a ThreadStack,
    /// Index of the outermost entry point in the thread's frames.
    entry: usize,
    call: &'a str,
    why: Vec<String>,
    interrupted: bool,
}

impl Reader<'_> {
    fn call(&mut self, mpi: Flavour, communicators: &[Communicator]) -> MpiCall {
        let class = classify(self.call);
        let w = wanted(self.call, class);
        let mut mc = MpiCall {
            tid: self.thread.tid,
            frame: u32::try_from(self.entry).unwrap_or(u32::MAX),
            call: self.call.to_string(),
            ..MpiCall::default()
        };
        let handle = self.comm(mpi, communicators, w.comm, &mut mc);
        if !w.buffer.is_empty() {
            match self.first_of(w.buffer) {
                Some(b) => mc.buffer = Some(format!("{b:#x}")),
                None => self.missing(w.buffer[0]),
            }
        }
        if !w.peer.is_empty() {
            match self.first_of(w.peer).map(|v| v as i64) {
                Some(p) if w.source && Some(p) == mpi.any_source() => mc.any_source = true,
                Some(p) if Some(p) == mpi.proc_null() => self.why.push(format!("{}: MPI_PROC_NULL", w.peer[0])),
                Some(p) if p >= 0 => mc.peer = Some(p),
                Some(p) => self.why.push(format!("{}: {p} is not a rank", w.peer[0])),
                None => self.missing(w.peer[0]),
            }
        }
        if !w.tag.is_empty() {
            match self.first_of(w.tag).map(|v| v as i64) {
                Some(ANY_TAG) if w.source => mc.any_tag = true,
                Some(t) => mc.tag = Some(t),
                None => self.missing(w.tag[0]),
            }
        }
        if w.root {
            match self.value("root").or_else(|| self.inner_on_same_comm(handle?, "root")) {
                Some(r) => mc.root = Some(r as i64),
                None => self.missing("root"),
            }
        }
        if !self.why.is_empty() {
            self.request(mpi, class, &w, communicators, &mut mc);
        }
        if !self.why.is_empty() {
            mc.why = Some(self.why.join("; "));
        }
        mc
    }

    /// A reason for a parameter that gave nothing.
    fn missing(&mut self, name: &str) {
        if !self.why.iter().any(|w| w.starts_with(&format!("{name}:"))) {
            self.why
                .push(format!("{name}: optimised out, or not known to the debugger"));
        }
    }

    /// The frames of the call, the outermost entry point first, then the
    /// inner frames of the same canonical call (a `PMPI_X` under a tool's
    /// `MPI_X`, MPICH's inlined `internal_X` under `PMPI_X`).
    fn own_frames(&self) -> Vec<usize> {
        let mut frames = vec![self.entry];
        frames.extend(
            (0..self.entry)
                .rev()
                .filter(|&j| entry_point(&self.thread.frames[j]).as_deref() == Some(self.call)),
        );
        frames
    }

    /// `frame_value` of one frame; a failure of the host is a reason.
    fn ask(&mut self, frame: usize, name: &str) -> Option<u64> {
        if self.interrupted {
            return None;
        }
        let frame_no = u32::try_from(frame).ok()?;
        match self.target.frame_value(self.thread.tid, frame_no, name) {
            Ok(v) => v,
            Err(TargetError::Interrupted) => {
                self.interrupted = true;
                self.why.push("interrupted".into());
                None
            }
            Err(e) => {
                self.why.push(format!("{name}: {e}"));
                None
            }
        }
    }

    /// The value of `name` in the call's own frames, the outermost first.
    fn value(&mut self, name: &str) -> Option<u64> {
        self.own_frames().into_iter().find_map(|f| self.ask(f, name))
    }

    /// The first of several names that has a value.
    fn first_of(&mut self, names: &[&str]) -> Option<u64> {
        names.iter().find_map(|n| self.value(n))
    }

    /// The value of `name` in the outermost frame inside the call (walking
    /// from the entry point inwards) that has one.
    fn inner(&mut self, name: &str) -> Option<u64> {
        (0..self.entry).rev().find_map(|f| self.ask(f, name))
    }

    /// The value of `name` in the outermost frame inside the call that has
    /// one and got the call's own communicator `handle` (as `comm`): there a
    /// `root` is of the same communicator (Open MPI's `PMPI_Bcast` may have
    /// its `root` optimised out while its collective module's functions
    /// have it).
    fn inner_on_same_comm(&mut self, handle: u64, name: &str) -> Option<u64> {
        for f in (0..self.entry).rev() {
            if self.ask(f, "comm") == Some(handle) {
                if let Some(v) = self.ask(f, name) {
                    return Some(v);
                }
            }
        }
        None
    }

    /// The communicator: the handle the call got, and the communicator of
    /// the queues it is. Returns the handle (shown as `comm_handle`).
    fn comm(&mut self, mpi: Flavour, communicators: &[Communicator], wanted: bool, mc: &mut MpiCall) -> Option<u64> {
        let handle = self.value("comm");
        let (shown, found) = match (mpi, handle) {
            (Flavour::OpenMpi, Some(h)) => (Some(h), self.open_mpi(h, communicators)),
            (Flavour::Mpich, Some(h)) => {
                // An int: the low 32 bits.
                let h = h as u32;
                (Some(u64::from(h)), self.mpich(h, communicators))
            }
            // Inside the call, the library's own functions may still have
            // it (§4.4): Open MPI's `comm` (an `ompi_communicator_t *`, in
            // its point-to-point and collective modules); MPICH's
            // `comm_ptr`, the outermost one (inner ones are node
            // sub-communicators).
            (Flavour::OpenMpi, None) => match self.inner("comm") {
                Some(h) => (Some(h), self.open_mpi(h, communicators)),
                None => (None, Err(None)),
            },
            (Flavour::Mpich, None) => match self.inner("comm_ptr") {
                Some(addr) => (
                    Some(addr),
                    by_address(addr, communicators).ok_or_else(|| Some(not_listed(addr))),
                ),
                None => (None, Err(None)),
            },
            (Flavour::Unknown, Some(h)) => (
                Some(h),
                Err(Some(
                    "comm: neither Open MPI's nor MPICH's symbols are in this process".to_string(),
                )),
            ),
            (Flavour::Unknown, None) => (None, Err(None)),
        };
        mc.comm_handle = shown.map(|h| format!("{h:#x}"));
        match found {
            Ok(id) => mc.communicator = Some(id),
            Err(Some(why)) => self.why.push(why),
            Err(None) if wanted => self.missing("comm"),
            Err(None) => {}
        }
        shown
    }

    /// Open MPI: the `c_contextid` of the `ompi_communicator_t` at `h` is
    /// the debug library's id; its `c_my_rank` must be the local rank.
    fn open_mpi(&mut self, h: u64, communicators: &[Communicator]) -> Result<String, Option<String>> {
        let context = self.field_u32(h, "ompi_communicator_t", "c_contextid")?;
        let c = communicators
            .iter()
            .find(|c| c.id == context.to_string())
            .ok_or_else(|| {
                Some(format!(
                    "comm: the communicator {h:#x} (context id {context}) is not among those the debug library lists"
                ))
            })?;
        if let (Ok(mine), Some(local)) = (self.field_u32(h, "ompi_communicator_t", "c_my_rank"), c.local_rank) {
            if i64::from(mine as i32) != local {
                return Err(Some(format!(
                    "comm: the communicator {h:#x} has context id {context}, but its rank {} is not {local}",
                    mine as i32
                )));
            }
        }
        Ok(c.id.clone())
    }

    /// MPICH: every listed communicator's id is the address of its
    /// `MPIR_Comm`, which starts with its `int handle`.
    fn mpich(&mut self, h: u32, communicators: &[Communicator]) -> Result<String, Option<String>> {
        let offset = self.offset("MPIR_Comm", "handle")?;
        for c in communicators {
            let Some(addr) = parse_address(&c.id) else { continue };
            let Some(at) = addr.checked_add(offset) else { continue };
            match self.read_u32(at) {
                Ok(v) if v == h => return Ok(c.id.clone()),
                Ok(_) => {}
                Err(TargetError::Interrupted) => {
                    self.interrupted = true;
                    return Err(Some("interrupted".into()));
                }
                // Another communicator may still be readable.
                Err(_) => {}
            }
        }
        Err(Some(format!(
            "comm: the communicator {h:#x} is not among those the debug library lists"
        )))
    }

    /// The offset of a field, or why not.
    fn offset(&mut self, ty: &str, field: &str) -> Result<u64, Option<String>> {
        let t = self
            .target
            .find_type(ty)
            .map_err(|e| Some(format!("comm: the type {ty}: {e}")))?
            .ok_or_else(|| Some(format!("comm: no type {ty} in the debug information")))?;
        self.target
            .field_offset(t, field)
            .map_err(|e| Some(format!("comm: the field {ty}.{field}: {e}")))?
            .ok_or_else(|| Some(format!("comm: {ty} has no field {field}")))
    }

    /// The `u32` of a field of the struct at `base`.
    fn field_u32(&mut self, base: u64, ty: &str, field: &str) -> Result<u32, Option<String>> {
        let offset = self.offset(ty, field)?;
        let at = base
            .checked_add(offset)
            .ok_or_else(|| Some(format!("comm: {base:#x} is not an address")))?;
        self.read_u32(at).map_err(|e| {
            if e == TargetError::Interrupted {
                self.interrupted = true;
            }
            Some(format!("comm: {ty}.{field} at {at:#x}: {e}"))
        })
    }

    /// The pointer in a field of the struct at `base`.
    fn field_ptr(&mut self, base: u64, ty: &str, field: &str) -> Result<u64, Option<String>> {
        let offset = self.offset(ty, field)?;
        let at = base.checked_add(offset).ok_or(None)?;
        let size = self.target.type_sizes().map_or(8, |s| s.pointer);
        let mut b = [0u8; 8];
        let n = if size == 4 { 4 } else { 8 };
        self.target.read_memory(at, &mut b[..n]).map_err(|e| {
            if e == TargetError::Interrupted {
                self.interrupted = true;
            }
            Some(format!("{ty}.{field} at {at:#x}: {e}"))
        })?;
        if self.target.byte_order() == ByteOrder::Big {
            b[..n].reverse();
        }
        Ok(u64::from_le_bytes(b))
    }

    fn read_u32(&mut self, at: u64) -> Result<u32, TargetError> {
        let mut b = [0u8; 4];
        self.target.read_memory(at, &mut b)?;
        Ok(match self.target.byte_order() {
            ByteOrder::Little => u32::from_le_bytes(b),
            ByteOrder::Big => u32::from_be_bytes(b),
        })
    }
}

/// The listed communicator whose id is this address (MPICH).
fn by_address(addr: u64, communicators: &[Communicator]) -> Option<String> {
    communicators
        .iter()
        .find(|c| parse_address(&c.id) == Some(addr))
        .map(|c| c.id.clone())
}

fn not_listed(addr: u64) -> String {
    format!("comm: the communicator {addr:#x} is not among those the debug library lists")
}

/// A communicator id as an address: `0x...` hexadecimal or decimal.
fn parse_address(id: &str) -> Option<u64> {
    match id.strip_prefix("0x").or_else(|| id.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => id.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::snapshot::model::{Frame, Queue, Queues};
    use crate::target::{ProcessDescription, TypeId, TypeSizes};
    use crate::testkit::Mem;

    /// Memory from [`Mem`], a few symbols, types and fields, and frame
    /// values from a table keyed (tid, frame, name).
    struct Host {
        mem: Mem,
        symbols: &'static [(&'static str, u64)],
        fields: &'static [(&'static str, &'static str, u64)],
        values: BTreeMap<(u64, u32, &'static str), u64>,
        asked: Vec<(u32, String)>,
        fail: Option<TargetError>,
    }

    impl Target for Host {
        fn describe(&self) -> ProcessDescription {
            ProcessDescription::default()
        }
        fn read_memory(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
            self.mem.read_memory(addr, buf)
        }
        fn find_symbol(&mut self, name: &str) -> Result<Option<u64>, TargetError> {
            Ok(self.symbols.iter().find(|s| s.0 == name).map(|s| s.1))
        }
        fn find_function(&mut self, _: &str) -> Result<Option<u64>, TargetError> {
            Ok(None)
        }
        fn find_type(&mut self, name: &str) -> Result<Option<TypeId>, TargetError> {
            Ok(self.fields.iter().position(|f| f.0 == name).map(|i| TypeId(i as u64)))
        }
        fn field_offset(&mut self, ty: TypeId, field: &str) -> Result<Option<u64>, TargetError> {
            let ty = self.fields[ty.0 as usize].0;
            Ok(self.fields.iter().find(|f| f.0 == ty && f.1 == field).map(|f| f.2))
        }
        fn size_of(&mut self, ty: TypeId) -> Result<Option<u64>, TargetError> {
            Ok((self.fields[ty.0 as usize].0 == "MPIDI_Rank_t").then_some(2))
        }
        fn type_sizes(&mut self) -> Result<TypeSizes, TargetError> {
            Ok(TypeSizes::LP64)
        }
        fn byte_order(&mut self) -> ByteOrder {
            ByteOrder::Little
        }
        fn frame_value(&mut self, thread: u64, frame: u32, name: &str) -> Result<Option<u64>, TargetError> {
            self.asked.push((frame, name.to_string()));
            if let Some(e) = self.fail.clone() {
                return Err(e);
            }
            Ok(self
                .values
                .iter()
                .find(|((t, f, n), _)| (*t, *f, *n) == (thread, frame, name))
                .map(|(_, v)| *v))
        }
    }

    fn frame(function: &str, object: &str) -> Frame {
        Frame {
            pc: "0x1".into(),
            function: Some(function.into()),
            object: Some(object.into()),
            ..Frame::default()
        }
    }

    fn thread(tid: u64, frames: &[(&str, &str)]) -> ThreadStack {
        ThreadStack {
            tid,
            frames: frames.iter().map(|(f, o)| frame(f, o)).collect(),
            ..ThreadStack::default()
        }
    }

    fn comm(id: &str, name: &str, local_rank: i64) -> Communicator {
        let q = || Queue {
            available: true,
            reason: None,
            incomplete: false,
            operations: Vec::new(),
        };
        Communicator {
            id: id.into(),
            name: name.into(),
            size: Some(4),
            local_rank: Some(local_rank),
            world_ranks: None,
            world_ranks_source: None,
            world_ranks_rejected: None,
            queues: Queues {
                sends: q(),
                receives: q(),
                unexpected: q(),
            },
        }
    }

    const OMPI: &str = "/opt/ompi/lib/libmpi.so.40";
    const MPICH: &str = "/opt/mpich/lib/libmpi.so.12";

    /// Open MPI: `ompi_mpi_comm_world` at 0x1000, `c_contextid` (= 0) at
    /// +0x10, `c_my_rank` (= 1) at +0x14; another communicator at 0x2000
    /// with context id 7.
    /// A receive request at 0x2080: `req_type` 2 (receive), `req_comm`
    /// 0x1000, `req_addr` 0x7ffe0000, `req_peer` 0, `req_tag` 3.
    fn ompi_memory(a: u64) -> u8 {
        match a {
            0x1014 => 1,
            0x2010 => 7,
            0x2088 => 2,
            0x2091 => 0x10,
            0x20a2 => 0xfe,
            0x20a3 => 0x7f,
            0x20ac => 3,
            _ => 0,
        }
    }

    fn ompi_host(values: &[((u64, u32, &'static str), u64)]) -> Host {
        Host {
            mem: Mem::with_regions(&[(0x1000, 0x1100), (0x2000, 0x2100)]).with_pattern(ompi_memory),
            symbols: &[("ompi_mpi_comm_world", 0x1000)],
            fields: &[
                ("ompi_communicator_t", "c_contextid", 0x10),
                ("ompi_communicator_t", "c_my_rank", 0x14),
                ("mca_pml_base_request_t", "req_type", 0x8),
                ("mca_pml_base_request_t", "req_comm", 0x10),
                ("mca_pml_base_request_t", "req_addr", 0x20),
                ("mca_pml_base_request_t", "req_peer", 0x28),
                ("mca_pml_base_request_t", "req_tag", 0x2c),
            ],
            values: values.iter().copied().collect(),
            asked: Vec::new(),
            fail: None,
        }
    }

    fn ompi_comms() -> Vec<Communicator> {
        vec![comm("0", "MPI_COMM_WORLD", 1), comm("1", "MPI_COMM_SELF", 0)]
    }

    #[test]
    fn open_mpi_recv_and_a_barrier_whose_comm_is_in_an_inner_frame() {
        let recv = thread(
            11,
            &[
                ("sched_yield", "/lib/x86_64-linux-gnu/libc.so.6"),
                ("mca_pml_ob1_recv", "/opt/ompi/lib/openmpi/mca_pml_ob1.so"),
                ("PMPI_Recv", OMPI),
                ("main", "/opt/u/app"),
            ],
        );
        let barrier = thread(
            12,
            &[
                ("ompi_coll_base_barrier_intra_basic_linear", OMPI),
                ("PMPI_Barrier", OMPI),
                ("main", "/opt/u/app"),
            ],
        );
        let idle = thread(
            13,
            &[("poll", "/lib/x86_64-linux-gnu/libc.so.6"), ("main", "/opt/u/app")],
        );
        let mut host = ompi_host(&[
            ((11, 2, "comm"), 0x1000),
            ((11, 2, "buf"), 0x7ffe_0000),
            ((11, 2, "source"), u64::MAX), // MPI_ANY_SOURCE
            ((12, 0, "comm"), 0x1000),
        ]);
        let calls = calls(&mut host, &[recv, barrier, idle], &ompi_comms());
        assert_eq!(calls.len(), 2, "{calls:?}");
        let r = &calls[0];
        assert_eq!((r.tid, r.frame, r.call.as_str()), (11, 2, "recv"));
        assert_eq!(r.communicator.as_deref(), Some("0"));
        assert_eq!(r.comm_handle.as_deref(), Some("0x1000"));
        assert_eq!(r.buffer.as_deref(), Some("0x7ffe0000"));
        assert!(r.any_source && r.peer.is_none());
        assert_eq!(r.tag, None);
        assert_eq!(
            r.why.as_deref(),
            Some("tag: optimised out, or not known to the debugger")
        );
        let b = &calls[1];
        assert_eq!((b.frame, b.call.as_str()), (1, "barrier"));
        assert_eq!(b.communicator.as_deref(), Some("0"), "{b:?}");
        assert_eq!(b.why, None);
    }

    #[test]
    fn open_mpi_communicators_the_library_does_not_list_or_whose_rank_differs() {
        let send = thread(5, &[("PMPI_Send", OMPI), ("main", "/opt/u/app")]);
        let mut host = ompi_host(&[
            ((5, 0, "comm"), 0x2000),
            ((5, 0, "dest"), 3),
            ((5, 0, "tag"), 9),
            ((5, 0, "buf"), 0x10),
        ]);
        let c = calls(&mut host, std::slice::from_ref(&send), &ompi_comms()).remove(0);
        assert_eq!((c.peer, c.tag, c.communicator.as_deref()), (Some(3), Some(9), None));
        assert_eq!(
            c.why.as_deref(),
            Some("comm: the communicator 0x2000 (context id 7) is not among those the debug library lists")
        );
        let mut other_rank = ompi_comms();
        other_rank[0].local_rank = Some(2);
        host.values.insert((5, 0, "comm"), 0x1000);
        let c = calls(&mut host, &[send], &other_rank).remove(0);
        assert!(c.why.unwrap().contains("its rank 1 is not 2"));
    }

    #[test]
    fn open_mpi_blocking_receives_fill_the_gaps_from_their_request() {
        let recv = thread(
            41,
            &[
                ("sched_yield", "/lib/x86_64-linux-gnu/libc.so.6"),
                ("ompi_request_wait_completion", "/opt/ompi/lib/openmpi/mca_pml_ob1.so"),
                ("mca_pml_ob1_recv", "/opt/ompi/lib/openmpi/mca_pml_ob1.so"),
                ("PMPI_Recv", OMPI),
                ("main", "/opt/u/app"),
            ],
        );
        // LLDB: nothing in PMPI_Recv, `comm` optimised out inside; the request.
        let mut host = ompi_host(&[((41, 1, "req"), 0x2080)]);
        let c = calls(&mut host, std::slice::from_ref(&recv), &ompi_comms()).remove(0);
        assert_eq!(
            (c.communicator.as_deref(), c.comm_handle.as_deref(), c.buffer.as_deref()),
            (Some("0"), Some("0x1000"), Some("0x7ffe0000")),
            "{c:?}"
        );
        assert_eq!((c.peer, c.tag, c.why), (Some(0), Some(3), None));
        // gdb: the call's comm and buffer; source and tag from the request.
        host.values.insert((41, 3, "comm"), 0x1000);
        host.values.insert((41, 3, "buf"), 0x7ffe_0000);
        let c = calls(&mut host, std::slice::from_ref(&recv), &ompi_comms()).remove(0);
        assert_eq!((c.peer, c.tag, c.why), (Some(0), Some(3), None));
        // A request on another communicator than the call's is not its own.
        host.values.insert((41, 3, "comm"), 0x2000);
        let c = calls(&mut host, std::slice::from_ref(&recv), &ompi_comms()).remove(0);
        assert_eq!((c.peer, c.tag), (None, None));
        let why = c.why.unwrap();
        assert!(
            why.starts_with("comm: the communicator 0x2000") && why.contains("; tag: "),
            "{why}"
        );
    }

    /// MPICH: MPIR_Comm_builtin[0] (WORLD, handle 0x44000000) at 0x3000, a
    /// dup (handle 0x84000000) at 0x3100; `handle` at offset 0.
    /// A receive's `MPIR_Request` at 0x3180: `kind` 2, `comm` 0x3000,
    /// `dev` at +0x20 with the match (tag 3, rank 1 of 16 bits) first and
    /// `user_buf` 0x5000 at +0x10.
    fn mpich_memory(a: u64) -> u8 {
        match a {
            0x3003 => 0x44,
            0x3103 => 0x84,
            0x3180 => 2,
            0x3189 => 0x30,
            0x31a0 => 3,
            0x31a4 => 1,
            0x31b1 => 0x50,
            _ => 0,
        }
    }

    fn mpich_host(values: &[((u64, u32, &'static str), u64)]) -> Host {
        Host {
            mem: Mem::new(0x3000, 0x200).with_pattern(mpich_memory),
            symbols: &[("MPIR_Comm_builtin", 0x3000)],
            fields: &[
                ("MPIR_Comm", "handle", 0),
                ("MPIR_Request", "kind", 0),
                ("MPIR_Request", "comm", 0x8),
                ("MPIR_Request", "dev", 0x20),
                ("MPIDI_Request", "match", 0),
                ("MPIDI_Request", "user_buf", 0x10),
                ("MPIDI_Message_match_parts_t", "tag", 0),
                ("MPIDI_Message_match_parts_t", "rank", 4),
                ("MPIDI_Rank_t", "", 0),
            ],
            values: values.iter().copied().collect(),
            asked: Vec::new(),
            fail: None,
        }
    }

    fn mpich_comms() -> Vec<Communicator> {
        vec![
            comm("0x3000", "MPI_COMM_WORLD", 1),
            comm("0x3100", "dup", 1),
            comm("0x9000", "unreadable", 0),
        ]
    }

    #[test]
    fn mpich_handles_from_the_call_or_its_inlined_body_and_comm_ptr_inside() {
        // gdb: PMPI_Recv has every argument but the tag, which its inlined
        // internal_Recv has.
        let recv = thread(
            21,
            &[
                ("MPIR_Wait_impl", MPICH),
                ("internal_Recv", MPICH),
                ("PMPI_Recv", MPICH),
                ("main", "/opt/u/app"),
            ],
        );
        let mut host = mpich_host(&[
            ((21, 2, "comm"), 0x8400_0000),
            ((21, 2, "buf"), 0x5000),
            ((21, 2, "source"), (-2i64) as u64), // MPI_ANY_SOURCE
            ((21, 1, "tag"), u64::MAX),          // MPI_ANY_TAG
        ]);
        let c = calls(&mut host, std::slice::from_ref(&recv), &mpich_comms()).remove(0);
        assert_eq!(c.communicator.as_deref(), Some("0x3100"), "{c:?}");
        assert_eq!(c.comm_handle.as_deref(), Some("0x84000000"));
        assert!(c.any_source && c.any_tag && c.why.is_none(), "{c:?}");
        assert_eq!(
            host.asked
                .iter()
                .filter(|(_, n)| n == "tag")
                .map(|a| a.0)
                .collect::<Vec<_>>(),
            [2, 1],
            "the entry point first, then its inlined body; never MPIR_Wait_impl"
        );
        // LLDB: no variables in PMPI_Barrier; the outermost comm_ptr inside.
        let barrier = thread(
            22,
            &[
                ("MPIR_Barrier_impl", MPICH),
                ("MPID_Barrier", MPICH),
                ("MPIR_Barrier_impl", MPICH),
                ("PMPI_Barrier", MPICH),
                ("main", "/opt/u/app"),
            ],
        );
        host.values.insert((22, 0, "comm_ptr"), 0x3100);
        host.values.insert((22, 2, "comm_ptr"), 0x3000);
        let c = calls(&mut host, std::slice::from_ref(&barrier), &mpich_comms()).remove(0);
        assert_eq!(c.communicator.as_deref(), Some("0x3000"), "{c:?}");
        // A handle that is not listed; the destination MPI_PROC_NULL.
        let send = thread(23, &[("MPI_Ssend", MPICH), ("main", "/opt/u/app")]);
        host.values.insert((23, 0, "comm"), 0x8400_0001);
        host.values.insert((23, 0, "dest"), u64::MAX);
        host.values.insert((23, 0, "tag"), 4);
        let c = calls(&mut host, &[send], &mpich_comms()).remove(0);
        assert_eq!(c.communicator, None);
        assert_eq!(
            c.why.as_deref(),
            Some(
                "comm: the communicator 0x84000001 is not among those the debug library lists; \
                 buf: optimised out, or not known to the debugger; dest: MPI_PROC_NULL"
            )
        );
    }

    #[test]
    fn mpich_blocking_receives_fill_the_gaps_from_their_request() {
        // LLDB: nothing in PMPI_Recv; MPIR_Wait_impl's request_ptr.
        let recv = thread(
            51,
            &[("MPIR_Wait_impl", MPICH), ("PMPI_Recv", MPICH), ("main", "/opt/u/app")],
        );
        let mut host = mpich_host(&[((51, 0, "request_ptr"), 0x3180)]);
        let c = calls(&mut host, std::slice::from_ref(&recv), &mpich_comms()).remove(0);
        assert_eq!(
            (c.communicator.as_deref(), c.comm_handle.as_deref(), c.buffer.as_deref()),
            (Some("0x3000"), Some("0x3000"), Some("0x5000")),
            "{c:?}"
        );
        assert_eq!((c.peer, c.tag, c.why), (Some(1), Some(3), None));
        // The call's own communicator is another: the request is not its.
        host.values.insert((51, 1, "comm"), 0x8400_0000);
        let c = calls(&mut host, &[recv], &mpich_comms()).remove(0);
        assert_eq!(
            (c.communicator.as_deref(), c.peer, c.buffer),
            (Some("0x3100"), None, None)
        );
    }

    #[test]
    fn open_mpi_root_optimised_out_is_read_where_the_same_communicator_is_passed_on() {
        // PMPI_Bcast (frame 2) lost `root`; a module function on another
        // communicator (frame 1, a sub-communicator's local root) must not
        // give it, the one on the call's own communicator (frame 0) does.
        let bcast = thread(
            14,
            &[
                ("ompi_coll_base_bcast_intra_pipeline", OMPI),
                ("mca_coll_han_bcast_intra", "/opt/ompi/lib/openmpi/mca_coll_han.so"),
                ("PMPI_Bcast", OMPI),
                ("main", "/opt/u/app"),
            ],
        );
        let mut host = ompi_host(&[
            ((14, 2, "comm"), 0x1000),
            ((14, 1, "comm"), 0x2000),
            ((14, 1, "root"), 5),
            ((14, 0, "comm"), 0x1000),
            ((14, 0, "root"), 1),
        ]);
        let c = calls(&mut host, std::slice::from_ref(&bcast), &ompi_comms()).remove(0);
        assert_eq!((c.call.as_str(), c.root, c.why.as_deref()), ("bcast", Some(1), None));
        // Nowhere on the same communicator: unknown, and said.
        host.values.remove(&(14, 0, "root"));
        let c = calls(&mut host, std::slice::from_ref(&bcast), &ompi_comms()).remove(0);
        assert_eq!(c.root, None);
        assert_eq!(
            c.why.as_deref(),
            Some("root: optimised out, or not known to the debugger")
        );
    }

    #[test]
    fn rooted_collectives_unknown_mpis_and_failing_hosts() {
        let bcast = thread(31, &[("MPI_Bcast", "/opt/x/libmpi.so"), ("main", "/opt/u/app")]);
        let mut host = mpich_host(&[((31, 0, "comm"), 0x4400_0000), ((31, 0, "root"), 2)]);
        host.symbols = &[];
        let c = calls(&mut host, std::slice::from_ref(&bcast), &mpich_comms()).remove(0);
        assert_eq!((c.call.as_str(), c.root), ("bcast", Some(2)));
        assert_eq!(c.comm_handle.as_deref(), Some("0x44000000"));
        assert!(c.why.unwrap().contains("neither Open MPI's nor MPICH's"));
        host.fail = Some(TargetError::Host("no frame".into()));
        let c = calls(&mut host, std::slice::from_ref(&bcast), &mpich_comms()).remove(0);
        assert_eq!(c.why.as_deref(), Some("comm: no frame; root: no frame"));
        host.fail = Some(TargetError::Interrupted);
        assert_eq!(
            try_calls(&mut host, &[bcast.clone(), bcast], &mpich_comms()),
            Err(TargetError::Interrupted)
        );
        assert_eq!(host.asked.iter().filter(|a| a.1 == "comm").count(), 2 + 1);
    }
}
