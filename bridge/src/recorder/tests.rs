//! The reader on images written as the recorder writes them
//! (`recorder/mpiq_recorder.h`, version 1), byte for byte.

use super::*;
use crate::target::{ProcessDescription, TypeId, TypeSizes};

const BASE: u64 = 0x7f00_0000_0000;
const NCALLS: u32 = 8;
const NPENDING: u32 = 4;
const NCOMMS: u32 = 4;
const NRANKS: u32 = 16;
const CALLS_AT: u32 = 120;
const CALL: u32 = 88;
const PENDING: u32 = 80;
const PENDING_AT: u32 = CALLS_AT + NCALLS * CALL;
const COMMS_AT: u32 = PENDING_AT + NPENDING * PENDING;
const RANKS_AT: u32 = COMMS_AT + NCOMMS * 32;
const WORLD: u64 = 0x4400_0000;

/// A process's memory holding one recorder at [`BASE`].
struct Image {
    bytes: Vec<u8>,
    symbol: bool,
    unreadable: bool,
}

impl Image {
    fn new() -> Image {
        let mut i = Image {
            bytes: vec![0; (RANKS_AT + NRANKS * 4) as usize],
            symbol: true,
            unreadable: false,
        };
        i.put(0, b"MPIQREC\0");
        i.u32(8, 1);
        i.u32(12, 120);
        i.u32(16, 2);
        i.u32(20, 1);
        i.u32(24, 1);
        i.u32(28, 4);
        i.u64(32, WORLD);
        for (at, vals) in [
            (72, [CALLS_AT, NCALLS, CALL]),
            (84, [PENDING_AT, NPENDING, PENDING]),
            (96, [COMMS_AT, NCOMMS, 32]),
        ] {
            for (k, v) in vals.iter().enumerate() {
                i.u32(at + 4 * k, *v);
            }
        }
        i.u32(108, RANKS_AT);
        i.u32(112, NRANKS);
        i
    }

    fn put(&mut self, at: usize, b: &[u8]) {
        self.bytes[at..at + b.len()].copy_from_slice(b);
    }
    fn u32(&mut self, at: usize, v: u32) {
        self.put(at, &v.to_le_bytes());
    }
    fn i32(&mut self, at: usize, v: i32) {
        self.put(at, &v.to_le_bytes());
    }
    fn u64(&mut self, at: usize, v: u64) {
        self.put(at, &v.to_le_bytes());
    }

    /// Records call number `seq` (1-based) as the recorder does.
    #[allow(clippy::too_many_arguments)]
    fn call(&mut self, seq: u64, id: i32, comm: u64, peer: i32, tag: i32, coll: u64, end: u64) {
        let at = (CALLS_AT + ((seq - 1) % u64::from(NCALLS)) as u32 * CALL) as usize;
        self.u64(at, seq);
        self.u64(at + 8, 1000 * seq);
        self.u64(at + 16, end);
        self.u64(at + 24, comm);
        self.u64(at + 40, coll);
        self.i32(at + 48, id);
        self.i32(at + 52, peer);
        self.i32(at + 56, tag);
        self.i32(at + 60, 16);
        self.i32(at + 64, 4);
        self.u32(at + 68, 77);
        self.i32(at + 72, PEER_NONE);
        self.i32(at + 76, TAG_NONE);
        let started = self.bytes[48..56].try_into().map(u64::from_le_bytes).unwrap();
        self.u64(48, started.max(seq));
    }
}

impl Target for Image {
    fn describe(&self) -> ProcessDescription {
        ProcessDescription::default()
    }
    fn read_memory(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        let off = addr.checked_sub(BASE).map(|o| o as usize);
        match off.and_then(|o| self.bytes.get(o..o + buf.len())) {
            Some(b) if !self.unreadable => {
                buf.copy_from_slice(b);
                Ok(())
            }
            _ => Err(TargetError::Unreadable {
                addr,
                len: buf.len() as u64,
                reason: "not mapped".into(),
            }),
        }
    }
    fn find_symbol(&mut self, name: &str) -> Result<Option<u64>, TargetError> {
        Ok((self.symbol && name == SYMBOL).then_some(BASE))
    }
    fn find_function(&mut self, _: &str) -> Result<Option<u64>, TargetError> {
        Ok(None)
    }
    fn find_type(&mut self, _: &str) -> Result<Option<TypeId>, TargetError> {
        Ok(None)
    }
    fn field_offset(&mut self, _: TypeId, _: &str) -> Result<Option<u64>, TargetError> {
        Ok(None)
    }
    fn size_of(&mut self, _: TypeId) -> Result<Option<u64>, TargetError> {
        Ok(None)
    }
    fn type_sizes(&mut self) -> Result<TypeSizes, TargetError> {
        Ok(TypeSizes::LP64)
    }
    fn byte_order(&mut self) -> ByteOrder {
        ByteOrder::Little
    }
}

#[test]
fn calls_oldest_first_with_the_one_in_progress_last() {
    let mut i = Image::new();
    i.call(1, 1, 0, PEER_NONE, TAG_NONE, 0, 500);
    i.call(2, 24, WORLD, 2, 401, 0, 2500);
    i.call(3, 40, WORLD, PEER_NONE, TAG_NONE, 1, 0);
    let r = read(&mut i).unwrap().unwrap();
    assert_eq!(
        (r.version, r.mpi.as_str(), r.world_rank, r.world_size),
        (1, "mpich", Some(1), Some(4))
    );
    let names: Vec<&str> = r.calls.iter().map(|c| c.call.as_str()).collect();
    assert_eq!(names, ["init", "irecv", "barrier"]);
    let irecv = &r.calls[1];
    let a = &irecv.args;
    assert_eq!((a.peer, a.tag, a.count, a.type_size), (Some(2), Some(401), 16, Some(4)));
    assert_eq!(a.comm.as_deref(), Some("0x44000000"));
    assert_eq!(irecv.end_ns, Some(2500));
    let barrier = &r.calls[2];
    assert_eq!(
        (barrier.args.collective_seq, barrier.end_ns, barrier.args.peer),
        (Some(1), None, None)
    );
    assert_eq!(r.torn, 0);
    assert!(r.pending_complete);
}

#[test]
fn a_wrapped_ring_keeps_its_last_records_and_leaves_out_one_being_written() {
    let mut i = Image::new();
    for seq in 1..=11 {
        i.call(seq, 10, WORLD, 1, seq as i32, 0, 1);
    }
    // Call 12 was claimed: its slot (call 4's) has seq 0 while it is written.
    i.u64(48, 12);
    i.u64((CALLS_AT + 3 * CALL) as usize, 0);
    let r = read(&mut i).unwrap().unwrap();
    let seqs: Vec<u64> = r.calls.iter().map(|c| c.seq).collect();
    assert_eq!(seqs, [5, 6, 7, 8, 9, 10, 11]);
    assert_eq!(r.torn, 1);
    assert_eq!(r.calls_started, 12);
}

#[test]
fn pending_requests_and_communicators_with_their_world_ranks() {
    let mut i = Image::new();
    // A pending Irecv from ANY_SOURCE, a freed slot, one being written.
    let p = PENDING_AT as usize;
    i.u32(p, 2);
    i.i32(p + 4, 24);
    i.u64(p + 8, 0x2c00_0001);
    i.u64(p + 16, 2);
    i.u64(p + 24, WORLD);
    i.i32(p + 48, PEER_ANY_SOURCE);
    i.i32(p + 52, 7);
    i.u64(p + 64, 9);
    let freed = p + PENDING as usize;
    i.u32(freed, 3);
    i.u32(freed + PENDING as usize, 1);
    // A persistent receive not started (4) is not pending; one started is.
    let q = freed + 2 * PENDING as usize;
    i.u32(q, 4);
    i.i32(q + 4, 72);
    i.u64(q + 8, 0x2c00_0009);
    i.u64(q + 16, 3);
    i.u32(q + 72, 1);
    // WORLD, and a split communicator of world ranks 2 and 3.
    let c = COMMS_AT as usize;
    i.u32(c, 2);
    i.i32(c + 4, 1);
    i.u64(c + 8, WORLD);
    i.u64(c + 16, 3);
    i.i32(c + 24, 4);
    i.i32(c + 28, -1);
    i.u32(c + 32, 2);
    i.i32(c + 36, 0);
    i.u64(c + 40, 0x8400_0002);
    i.u64(c + 48, 1);
    i.i32(c + 56, 2);
    i.i32(c + 60, 0);
    i.i32(RANKS_AT as usize, 2);
    i.i32(RANKS_AT as usize + 4, 3);
    i.u32(116, 2);
    let r = read(&mut i).unwrap().unwrap();
    assert_eq!(r.pending.len(), 1);
    let q = &r.pending[0];
    assert_eq!(
        (q.call.as_str(), q.args.any_source, q.args.peer, q.args.tag),
        ("irecv", true, None, Some(7))
    );
    assert_eq!(q.request, "0x2c000001");
    assert_eq!((q.waited_by, q.persistent), (Some(9), false));
    i.u32(q_at(3), 2);
    let r2 = read(&mut i).unwrap().unwrap();
    let started: Vec<(&str, bool)> = r2.pending.iter().map(|p| (p.call.as_str(), p.persistent)).collect();
    assert_eq!(started, [("irecv", false), ("recv_init", true)]);
    assert_eq!(r.comms.len(), 2);
    assert!(r.comms[0].world && r.comms[0].world_ranks.is_none());
    assert_eq!((r.comms[0].size, r.comms[0].collectives), (4, 3));
    assert_eq!(r.comms[1].world_ranks, Some(vec![2, 3]));
    // A world-rank table that says more than it holds: the ranks are unknown.
    i.u32(116, NRANKS + 100);
    i.i32(c + 60, NRANKS as i32 - 1);
    let r = read(&mut i).unwrap().unwrap();
    assert_eq!(r.comms[1].world_ranks, None);
}

/// Where pending slot `k` is.
fn q_at(k: usize) -> usize {
    PENDING_AT as usize + k * PENDING as usize
}

#[test]
fn a_wait_says_how_many_of_its_requests_are_known() {
    let mut i = Image::new();
    i.call(1, 24, WORLD, 2, 401, 0, 5);
    i.call(2, 31, 0, PEER_NONE, TAG_NONE, 0, 0);
    let at = (CALLS_AT + CALL) as usize;
    i.i32(at + 80, 3);
    i.i32(at + 84, 2);
    let r = read(&mut i).unwrap().unwrap();
    assert_eq!(
        (r.calls[1].requests_active, r.calls[1].requests_known),
        (Some(3), Some(2))
    );
    // Not a wait: the fields are not its.
    assert_eq!(r.calls[0].requests_active, None);
}

#[test]
fn no_recorder_a_foreign_symbol_an_empty_one_and_unreadable_memory() {
    let mut i = Image::new();
    i.symbol = false;
    assert!(read(&mut i).unwrap().is_none());
    let mut i = Image::new();
    i.put(0, b"\0\0\0\0\0\0\0\0");
    let e = read(&mut i).unwrap_err().to_string();
    assert!(e.contains("loaded and not started"), "{e}");
    let mut i = Image::new();
    i.put(0, b"ELF\0abcd");
    assert!(read(&mut i).unwrap_err().to_string().contains("no magic"));
    let mut i = Image::new();
    i.u32(8, 2);
    assert!(read(&mut i).unwrap_err().to_string().contains("version 2"));
    let mut i = Image::new();
    i.u32(76, 1 << 30);
    assert!(read(&mut i).unwrap_err().to_string().contains("a table of"));
    let mut i = Image::new();
    i.unreadable = true;
    assert!(matches!(
        read(&mut i),
        Err(RecorderError::Target(TargetError::Unreadable { .. }))
    ));
}
