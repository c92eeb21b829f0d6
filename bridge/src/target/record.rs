//! Recording every answer a target gives during a dump, and replaying a
//! recording as a target: the same debug library then reproduces the same
//! snapshot offline, with no process (bug reports, fast tests, benchmarks).
//!
//! The file (`mpiq.recording/2`) is gzip-compressed JSON: the memory is
//! hex inside it, adjacent reads merged into runs, and target memory (mostly
//! zeros and pointers) compresses about fifty-fold. `mpiq.recording/1`, the
//! same JSON uncompressed, is still read.
//!
//! A session of several samples (`mpiq watch --record`) adds `samples`, every
//! sample in order with its time; `processes` is then its first sample, so
//! that whatever reads one dump reads the file as before
//! ([`super::session`] writes it as it goes).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::snapshot::model::{PythonStacks, ThreadStack};
use crate::target::question::{Answer, Question};
use crate::target::{ByteOrder, ProcessDescription, Target, TargetError, TypeId, TypeSizes};

/// The schema name of a recording file.
pub const RECORDING_SCHEMA: &str = "mpiq.recording/2";
/// The schema of the first, uncompressed recordings, still read.
pub const RECORDING_SCHEMA_V1: &str = "mpiq.recording/1";

/// A recording file: one entry per process of the dump.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordingFile {
    /// Always [`RECORDING_SCHEMA`].
    pub schema: String,
    /// mpiq version that wrote it.
    pub mpiq_version: String,
    /// One recording per process (of a session: its first sample).
    pub processes: Vec<Recording>,
    /// Every sample of a session (`mpiq watch --record`), oldest first;
    /// absent from the recording of one dump.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples: Vec<RecordedSample>,
}

/// One sample of a session: every process read at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedSample {
    /// When the sample was taken: milliseconds since the Unix epoch.
    pub time_ms: u64,
    /// One recording per process, as in [`RecordingFile::processes`].
    pub processes: Vec<Recording>,
}

/// A memory read and its answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryRead {
    /// Start address.
    pub addr: u64,
    /// The bytes, in hex; absent when the read failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hex: Option<String>,
    /// Length (needed when the read failed).
    pub len: u64,
    /// Why the read failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Everything one process answered.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recording {
    /// `Target::describe`.
    pub process: ProcessDescription,
    /// `Target::byte_order` (little when never asked).
    pub big_endian: bool,
    /// `Target::type_sizes`.
    pub type_sizes: Option<TypeSizes>,
    /// `Target::world_rank`.
    pub world_rank: Option<i32>,
    /// `find_symbol` answers (`null`: not found).
    pub symbols: BTreeMap<String, Option<u64>>,
    /// `find_function` answers.
    pub functions: BTreeMap<String, Option<u64>>,
    /// `find_type` answers (the host's type ids).
    pub types: BTreeMap<String, Option<u64>>,
    /// `field_offset` answers, keyed `"<type id>.<field>"`.
    pub fields: BTreeMap<String, Option<u64>>,
    /// `size_of` answers, keyed by type id.
    pub sizes: BTreeMap<u64, Option<u64>>,
    /// Memory reads in address order (the page cache makes them blocks and
    /// pages); adjacent successful reads are merged into one run.
    pub memory: Vec<MemoryRead>,
    /// `Target::stacks` (only with `--stacks`; older recordings have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stacks: Option<Vec<ThreadStack>>,
    /// `Target::frame_value` answers, keyed `"<tid>/<frame>/<name>"`,
    /// registers (`$` names) like variables (older recordings have none:
    /// replayed as `None`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub frame_values: BTreeMap<String, Option<u64>>,
    /// `Target::python_stacks` (older recordings have none: replayed as
    /// `None`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python: Option<PythonStacks>,
}

impl Recording {
    /// Keeps the answer to a lookup, in the map of its kind (a read's
    /// bytes are kept as runs of [`Recording::memory`], not here).
    pub fn insert(&mut self, q: &Question, a: &Answer) {
        match (q, a) {
            (Question::Symbol(n), &Answer::Value(v)) => {
                self.symbols.insert(n.clone(), v);
            }
            (Question::Function(n), &Answer::Value(v)) => {
                self.functions.insert(n.clone(), v);
            }
            (Question::Type(n), &Answer::Value(v)) => {
                self.types.insert(n.clone(), v);
            }
            (Question::Field { ty, field }, &Answer::Value(v)) => {
                self.fields.insert(field_key(*ty, field), v);
            }
            (Question::Size(ty), &Answer::Value(v)) => {
                self.sizes.insert(ty.0, v);
            }
            (Question::TypeSizes, &Answer::Sizes(s)) => self.type_sizes = Some(s),
            _ => {}
        }
    }

    /// The recorded answer to a lookup (`None`: never asked; a read:
    /// see [`Replay`]).
    pub fn answer(&self, q: &Question) -> Option<Answer> {
        let v = match q {
            Question::Symbol(n) => self.symbols.get(n),
            Question::Function(n) => self.functions.get(n),
            Question::Type(n) => self.types.get(n),
            Question::Field { ty, field } => self.fields.get(&field_key(*ty, field)),
            Question::Size(ty) => self.sizes.get(&ty.0),
            Question::TypeSizes => return self.type_sizes.map(Answer::Sizes),
            Question::Read { .. } => return None,
        };
        v.copied().map(Answer::Value)
    }
}

/// The key of a `field_offset` answer in [`Recording::fields`].
fn field_key(ty: TypeId, field: &str) -> String {
    format!("{}.{field}", ty.0)
}

/// The key of a `frame_value` answer in [`Recording::frame_values`].
fn frame_key(thread: u64, frame: u32, name: &str) -> String {
    format!("{thread}/{frame}/{name}")
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = Vec::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize]);
        s.push(DIGITS[(b & 15) as usize]);
    }
    // Only ASCII digits were pushed.
    String::from_utf8(s).unwrap_or_default()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    const fn table() -> [u8; 256] {
        let mut t = [0xffu8; 256];
        let mut i = 0;
        while i < 10 {
            t[b'0' as usize + i] = i as u8;
            i += 1;
        }
        let mut i = 0;
        while i < 6 {
            t[b'a' as usize + i] = 10 + i as u8;
            t[b'A' as usize + i] = 10 + i as u8;
            i += 1;
        }
        t
    }
    static DIGIT: [u8; 256] = table();
    let b = s.as_bytes();
    if !b.len().is_multiple_of(2) {
        return None;
    }
    let mut out = Vec::with_capacity(b.len() / 2);
    for p in b.chunks_exact(2) {
        let (hi, lo) = (DIGIT[p[0] as usize], DIGIT[p[1] as usize]);
        if hi | lo > 15 {
            return None;
        }
        out.push(hi << 4 | lo);
    }
    Some(out)
}

/// Merges successful reads that touch or overlap into runs, in address
/// order; failed reads stay as they were asked.
fn merge_runs(reads: BTreeMap<(u64, u64), Result<Vec<u8>, String>>) -> Vec<MemoryRead> {
    let mut out: Vec<MemoryRead> = Vec::new();
    let mut run: Option<(u64, Vec<u8>)> = None;
    let flush = |run: &mut Option<(u64, Vec<u8>)>, out: &mut Vec<MemoryRead>| {
        if let Some((addr, bytes)) = run.take() {
            out.push(MemoryRead {
                addr,
                hex: Some(hex(&bytes)),
                len: bytes.len() as u64,
                error: None,
            });
        }
    };
    for ((addr, len), r) in reads {
        match r {
            Ok(bytes) => {
                if let Some((start, data)) = run.as_mut() {
                    let end = *start + data.len() as u64;
                    if addr <= end {
                        // Overlapping or adjacent: append what is new.
                        let skip = (end - addr) as usize;
                        if skip < bytes.len() {
                            data.extend_from_slice(&bytes[skip..]);
                        }
                        continue;
                    }
                }
                flush(&mut run, &mut out);
                run = Some((addr, bytes));
            }
            Err(error) => out.push(MemoryRead {
                addr,
                hex: None,
                len,
                error: Some(error),
            }),
        }
    }
    flush(&mut run, &mut out);
    out.sort_by_key(|m| (m.addr, m.len));
    out
}

/// A target that passes every call to another and records the answers.
pub struct Recorder<'a> {
    inner: &'a mut dyn Target,
    rec: Recording,
    /// (addr, len) -> the bytes or why the read failed.
    reads: BTreeMap<(u64, u64), Result<Vec<u8>, String>>,
}

impl<'a> Recorder<'a> {
    /// Records what `inner` answers.
    pub fn new(inner: &'a mut dyn Target) -> Self {
        let process = inner.describe();
        Recorder {
            inner,
            rec: Recording {
                process,
                ..Recording::default()
            },
            reads: BTreeMap::new(),
        }
    }

    /// Asks the inner target and keeps its answer.
    fn record(&mut self, q: Question) -> Result<Answer, TargetError> {
        let a = q.ask(self.inner)?;
        self.rec.insert(&q, &a);
        Ok(a)
    }

    /// The recording so far.
    pub fn finish(mut self) -> Recording {
        self.rec.memory = merge_runs(self.reads);
        self.rec
    }
}

impl super::wrap::Wrapper for Recorder<'_> {
    fn inner(&self) -> &dyn Target {
        &*self.inner
    }

    fn inner_mut(&mut self) -> &mut dyn Target {
        &mut *self.inner
    }

    /// None: every read is asked, to be recorded.
    fn held_memory(&mut self, _addr: u64, _len: usize) -> Option<super::HeldBytes> {
        None
    }

    /// None: a recording keeps no answers between dumps.
    fn identity(&mut self) -> Option<String> {
        None
    }

    fn read_memory(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        let r = self.inner.read_memory(addr, buf);
        let len = buf.len() as u64;
        match &r {
            Ok(()) => {
                self.reads.insert((addr, len), Ok(buf.to_vec()));
            }
            Err(TargetError::Interrupted) => {}
            Err(e) => {
                self.reads.insert((addr, len), Err(e.to_string()));
            }
        }
        r
    }

    fn find_symbol(&mut self, name: &str) -> Result<Option<u64>, TargetError> {
        self.record(Question::Symbol(name.into()))?.value()
    }

    fn find_function(&mut self, name: &str) -> Result<Option<u64>, TargetError> {
        self.record(Question::Function(name.into()))?.value()
    }

    fn find_type(&mut self, name: &str) -> Result<Option<TypeId>, TargetError> {
        Ok(self.record(Question::Type(name.into()))?.value()?.map(TypeId))
    }

    fn field_offset(&mut self, ty: TypeId, field: &str) -> Result<Option<u64>, TargetError> {
        self.record(Question::Field {
            ty,
            field: field.into(),
        })?
        .value()
    }

    fn size_of(&mut self, ty: TypeId) -> Result<Option<u64>, TargetError> {
        self.record(Question::Size(ty))?.value()
    }

    fn type_sizes(&mut self) -> Result<TypeSizes, TargetError> {
        self.record(Question::TypeSizes)?.sizes()
    }

    fn byte_order(&mut self) -> ByteOrder {
        let r = self.inner.byte_order();
        self.rec.big_endian = r == ByteOrder::Big;
        r
    }

    fn world_rank(&mut self) -> Option<i32> {
        let r = self.inner.world_rank();
        self.rec.world_rank = r;
        r
    }

    fn stacks(&mut self) -> Result<Option<Vec<ThreadStack>>, TargetError> {
        let r = self.inner.stacks()?;
        self.rec.stacks.clone_from(&r);
        Ok(r)
    }

    fn frame_value(&mut self, thread: u64, frame: u32, name: &str) -> Result<Option<u64>, TargetError> {
        let r = self.inner.frame_value(thread, frame, name)?;
        self.rec.frame_values.insert(frame_key(thread, frame, name), r);
        Ok(r)
    }

    fn python_stacks(&mut self) -> Result<Option<PythonStacks>, TargetError> {
        let r = self.inner.python_stacks()?;
        self.rec.python.clone_from(&r);
        Ok(r)
    }
}

/// A target that answers from a recording; a question the recording lacks
/// is an error naming it.
pub struct Replay {
    rec: Recording,
    /// Successful reads by start address: (end, bytes).
    data: BTreeMap<u64, (u64, Vec<u8>)>,
    /// Failed reads: (addr, len) -> reason.
    failed: BTreeMap<(u64, u64), String>,
}

/// Why a recording could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordingError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is not a recording of a version this mpiq reads.
    #[error("{path} is not an mpiq recording ({RECORDING_SCHEMA}): {reason}")]
    Format {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// A recorded read's bytes are not hex.
    #[error("bad hex in the read at {addr:#x}")]
    BadBytes {
        /// Where the read was.
        addr: u64,
    },
}

impl RecordingFile {
    /// Reads and checks a recording file (gzip-compressed or plain JSON).
    pub fn load(path: &Path) -> Result<Self, RecordingError> {
        let shown = path.display().to_string();
        let io = |source| RecordingError::Io {
            path: shown.clone(),
            source,
        };
        let raw = std::fs::read(path).map_err(io)?;
        let text = if raw.starts_with(&[0x1f, 0x8b]) {
            let mut text = Vec::new();
            flate2::read::GzDecoder::new(&raw[..])
                .read_to_end(&mut text)
                .map_err(|e| RecordingError::Format {
                    path: shown.clone(),
                    reason: format!("bad gzip data: {e}"),
                })?;
            text
        } else {
            raw
        };
        let file: RecordingFile = serde_json::from_slice(&text).map_err(|e| RecordingError::Format {
            path: shown.clone(),
            reason: e.to_string(),
        })?;
        if file.schema != RECORDING_SCHEMA && file.schema != RECORDING_SCHEMA_V1 {
            return Err(RecordingError::Format {
                path: shown,
                reason: format!("its schema is '{}'", file.schema),
            });
        }
        Ok(file)
    }

    /// Writes the file (compact JSON, gzip-compressed).
    pub fn save(&self, path: &Path) -> Result<(), RecordingError> {
        let shown = path.display().to_string();
        let text = serde_json::to_vec(self).map_err(|e| RecordingError::Format {
            path: shown.clone(),
            reason: e.to_string(),
        })?;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(6));
        let packed = gz.write_all(&text).and_then(|()| gz.finish());
        packed
            .and_then(|bytes| std::fs::write(path, bytes))
            .map_err(|source| RecordingError::Io { path: shown, source })
    }
}

impl Replay {
    /// A target over one process's recording.
    pub fn new(rec: Recording) -> Result<Self, RecordingError> {
        let mut data = BTreeMap::new();
        let mut failed = BTreeMap::new();
        for m in &rec.memory {
            match (&m.hex, &m.error) {
                (Some(h), _) => {
                    let bytes = unhex(h).ok_or(RecordingError::BadBytes { addr: m.addr })?;
                    data.insert(m.addr, (m.addr + bytes.len() as u64, bytes));
                }
                (None, e) => {
                    failed.insert((m.addr, m.len), e.clone().unwrap_or_default());
                }
            }
        }
        Ok(Replay { rec, data, failed })
    }

    fn missing(what: String) -> TargetError {
        TargetError::Host(format!("the recording has no answer for {what}"))
    }

    /// The recorded answer to a lookup; one the recording lacks is an
    /// error naming the call.
    fn replay(&self, q: Question) -> Result<Answer, TargetError> {
        self.rec.answer(&q).ok_or_else(|| {
            Self::missing(match q {
                Question::Symbol(n) => format!("find_symbol({n})"),
                Question::Function(n) => format!("find_function({n})"),
                Question::Type(n) => format!("find_type({n})"),
                Question::Field { ty, field } => format!("field_offset(type {}, {field})", ty.0),
                Question::Size(ty) => format!("size_of(type {})", ty.0),
                Question::TypeSizes => "type_sizes()".to_string(),
                Question::Read { addr, len } => format!("a read of {len} bytes at {addr:#x}"),
            })
        })
    }
}

impl Target for Replay {
    fn describe(&self) -> ProcessDescription {
        self.rec.process.clone()
    }

    fn read_memory(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        let len = buf.len() as u64;
        if let Some(reason) = self.failed.get(&(addr, len)) {
            return Err(TargetError::Unreadable {
                addr,
                len,
                reason: reason.clone(),
            });
        }
        if let Some((&start, (end, bytes))) = self.data.range(..=addr).next_back() {
            // A wild address near the top wraps `addr + len` (the fuzz test
            // found one): checked, it is simply not recorded.
            if addr.checked_add(len).is_some_and(|e| e <= *end) {
                let off = (addr - start) as usize;
                buf.copy_from_slice(&bytes[off..off + buf.len()]);
                return Ok(());
            }
        }
        Err(Self::missing(format!("a read of {len} bytes at {addr:#x}")))
    }

    fn find_symbol(&mut self, name: &str) -> Result<Option<u64>, TargetError> {
        self.replay(Question::Symbol(name.into()))?.value()
    }

    fn find_function(&mut self, name: &str) -> Result<Option<u64>, TargetError> {
        self.replay(Question::Function(name.into()))?.value()
    }

    fn find_type(&mut self, name: &str) -> Result<Option<TypeId>, TargetError> {
        Ok(self.replay(Question::Type(name.into()))?.value()?.map(TypeId))
    }

    fn field_offset(&mut self, ty: TypeId, field: &str) -> Result<Option<u64>, TargetError> {
        self.replay(Question::Field {
            ty,
            field: field.into(),
        })?
        .value()
    }

    fn size_of(&mut self, ty: TypeId) -> Result<Option<u64>, TargetError> {
        self.replay(Question::Size(ty))?.value()
    }

    fn type_sizes(&mut self) -> Result<TypeSizes, TargetError> {
        self.replay(Question::TypeSizes)?.sizes()
    }

    fn byte_order(&mut self) -> ByteOrder {
        if self.rec.big_endian {
            ByteOrder::Big
        } else {
            ByteOrder::Little
        }
    }

    fn world_rank(&mut self) -> Option<i32> {
        self.rec.world_rank
    }

    fn stacks(&mut self) -> Result<Option<Vec<ThreadStack>>, TargetError> {
        Ok(self.rec.stacks.clone())
    }

    /// A value the recording lacks is `None`, as the host would have said
    /// of an optimised-out one: recordings made before values were recorded
    /// still replay.
    fn frame_value(&mut self, thread: u64, frame: u32, name: &str) -> Result<Option<u64>, TargetError> {
        Ok(self
            .rec
            .frame_values
            .get(&frame_key(thread, frame, name))
            .copied()
            .flatten())
    }

    fn python_stacks(&mut self) -> Result<Option<PythonStacks>, TargetError> {
        Ok(self.rec.python.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Small;
    impl Target for Small {
        fn describe(&self) -> ProcessDescription {
            ProcessDescription {
                pid: Some(9),
                executable: "/x".into(),
            }
        }
        fn read_memory(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
            if addr >= 0x2000 {
                return Err(TargetError::Unreadable {
                    addr,
                    len: buf.len() as u64,
                    reason: "gone".into(),
                });
            }
            for (i, b) in buf.iter_mut().enumerate() {
                *b = (addr as usize + i) as u8;
            }
            Ok(())
        }
        fn find_symbol(&mut self, n: &str) -> Result<Option<u64>, TargetError> {
            Ok((n == "a").then_some(0x10))
        }
        fn find_function(&mut self, _: &str) -> Result<Option<u64>, TargetError> {
            Ok(None)
        }
        fn find_type(&mut self, n: &str) -> Result<Option<TypeId>, TargetError> {
            Ok((n == "T").then_some(TypeId(4)))
        }
        fn field_offset(&mut self, _: TypeId, f: &str) -> Result<Option<u64>, TargetError> {
            Ok((f == "x").then_some(8))
        }
        fn size_of(&mut self, _: TypeId) -> Result<Option<u64>, TargetError> {
            Ok(Some(16))
        }
        fn type_sizes(&mut self) -> Result<TypeSizes, TargetError> {
            Ok(TypeSizes::LP64)
        }
        fn byte_order(&mut self) -> ByteOrder {
            ByteOrder::Little
        }
        fn frame_value(&mut self, thread: u64, frame: u32, name: &str) -> Result<Option<u64>, TargetError> {
            Ok(match name {
                "comm" => Some(thread * 100 + u64::from(frame)),
                "$sp" => Some(0x7ff0_0000 + u64::from(frame)),
                _ => None,
            })
        }
    }

    #[test]
    fn frame_values_are_recorded_and_replayed_and_old_recordings_have_none() {
        let mut small = Small;
        let mut rec = Recorder::new(&mut small);
        assert_eq!(rec.frame_value(7, 3, "comm").unwrap(), Some(703));
        assert_eq!(rec.frame_value(7, 3, "tag").unwrap(), None);
        // Registers are names like any other.
        assert_eq!(rec.frame_value(7, 3, "$sp").unwrap(), Some(0x7ff0_0003));
        assert_eq!(rec.frame_value(7, 3, "$rax").unwrap(), None);
        let r = rec.finish();
        assert_eq!(r.frame_values.get("7/3/comm"), Some(&Some(703)));
        assert_eq!(r.frame_values.get("7/3/$sp"), Some(&Some(0x7ff0_0003)));
        assert_eq!(r.frame_values.get("7/3/$rax"), Some(&None));
        let text = serde_json::to_string(&r).unwrap();
        let mut replay = Replay::new(serde_json::from_str(&text).unwrap()).unwrap();
        assert_eq!(replay.frame_value(7, 3, "comm").unwrap(), Some(703));
        assert_eq!(replay.frame_value(7, 3, "tag").unwrap(), None);
        assert_eq!(replay.frame_value(7, 4, "comm").unwrap(), None, "never asked");
        assert_eq!(replay.frame_value(7, 3, "$sp").unwrap(), Some(0x7ff0_0003));
        assert_eq!(replay.frame_value(7, 3, "$rax").unwrap(), None);
        assert_eq!(replay.frame_value(7, 4, "$sp").unwrap(), None, "never asked");
        let mut old: serde_json::Value = serde_json::from_str(&text).unwrap();
        old.as_object_mut().unwrap().remove("frame_values");
        let mut replay = Replay::new(serde_json::from_value(old).unwrap()).unwrap();
        assert_eq!(replay.frame_value(7, 3, "comm").unwrap(), None);
    }

    #[test]
    fn replay_answers_what_was_recorded_and_names_what_was_not() {
        let mut small = Small;
        let mut rec = Recorder::new(&mut small);
        let mut page = [0u8; 64];
        rec.read_memory(0x1000, &mut page).unwrap();
        assert!(rec.read_memory(0x3000, &mut [0u8; 8]).is_err());
        assert_eq!(rec.find_symbol("a").unwrap(), Some(0x10));
        assert_eq!(rec.find_symbol("b").unwrap(), None);
        let t = rec.find_type("T").unwrap().unwrap();
        assert_eq!(rec.field_offset(t, "x").unwrap(), Some(8));
        assert_eq!(rec.size_of(t).unwrap(), Some(16));
        rec.type_sizes().unwrap();
        let file = RecordingFile {
            schema: RECORDING_SCHEMA.into(),
            mpiq_version: "test".into(),
            processes: vec![rec.finish()],
            samples: Vec::new(),
        };
        let text = serde_json::to_string(&file).unwrap();
        let back: RecordingFile = serde_json::from_str(&text).unwrap();
        let mut replay = Replay::new(back.processes[0].clone()).unwrap();
        let mut part = [0u8; 8];
        replay.read_memory(0x1008, &mut part).unwrap();
        assert_eq!(part, [8, 9, 10, 11, 12, 13, 14, 15]);
        assert!(matches!(
            replay.read_memory(0x3000, &mut [0u8; 8]),
            Err(TargetError::Unreadable { .. })
        ));
        let e = replay.read_memory(0x1100, &mut part).unwrap_err();
        assert!(
            e.to_string().contains("no answer for a read of 8 bytes at 0x1100"),
            "{e}"
        );
        assert_eq!(replay.find_symbol("b").unwrap(), None);
        assert!(replay
            .find_symbol("c")
            .unwrap_err()
            .to_string()
            .contains("find_symbol(c)"));
        assert_eq!(replay.field_offset(TypeId(4), "x").unwrap(), Some(8));
        assert_eq!(replay.describe().pid, Some(9));
    }

    #[test]
    fn adjacent_reads_merge_into_runs_and_failed_reads_stay() {
        let mut small = Small;
        let mut rec = Recorder::new(&mut small);
        for addr in [0x1000u64, 0x1040, 0x1020, 0x1100] {
            rec.read_memory(addr, &mut [0u8; 0x40]).unwrap();
        }
        assert!(rec.read_memory(0x2000, &mut [0u8; 16]).is_err());
        let r = rec.finish();
        let runs: Vec<(u64, u64, bool)> = r.memory.iter().map(|m| (m.addr, m.len, m.hex.is_some())).collect();
        assert_eq!(runs, [(0x1000, 0x80, true), (0x1100, 0x40, true), (0x2000, 16, false)]);
        let mut replay = Replay::new(r).unwrap();
        let mut b = [0u8; 0x60];
        replay.read_memory(0x1010, &mut b).unwrap();
        assert_eq!(b[0], 0x10);
        assert_eq!(b[0x5f], 0x6f);
        assert!(
            replay.read_memory(0x1070, &mut [0u8; 0x20]).is_err(),
            "0x1080.. was not read"
        );
    }

    #[test]
    fn files_are_compressed_and_plain_v1_files_still_load() {
        let dir = std::env::temp_dir().join(format!("mpiq-record-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut small = Small;
        let mut rec = Recorder::new(&mut small);
        for page in 0..4u64 {
            rec.read_memory(page * 0x400, &mut [0u8; 0x400]).unwrap();
        }
        let file = RecordingFile {
            schema: RECORDING_SCHEMA.into(),
            mpiq_version: "test".into(),
            processes: vec![rec.finish()],
            samples: Vec::new(),
        };
        let packed = dir.join("a.rec");
        file.save(&packed).unwrap();
        let bytes = std::fs::read(&packed).unwrap();
        assert_eq!(bytes[..2], [0x1f, 0x8b], "gzip");
        assert!(bytes.len() < 0x1000, "{} bytes for 4 KiB of memory", bytes.len());
        assert_eq!(RecordingFile::load(&packed).unwrap(), file);
        let plain = dir.join("v1.rec");
        let mut v1 = file.clone();
        v1.schema = RECORDING_SCHEMA_V1.into();
        std::fs::write(&plain, serde_json::to_string(&v1).unwrap()).unwrap();
        assert_eq!(RecordingFile::load(&plain).unwrap(), v1);
        std::fs::write(&plain, r#"{"schema":"other/9","mpiq_version":"x","processes":[]}"#).unwrap();
        let e = RecordingFile::load(&plain).unwrap_err().to_string();
        assert!(e.contains("its schema is 'other/9'"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
