//! Running the debug library in a helper process, `mpiq-dllhost`.
//!
//! The front end keeps the target; the helper loads the library and asks
//! the front end for every answer over a socket, one JSON line per message;
//! the bytes of a memory read go through a shared memory region
//! (`isolate/shared.rs`), or follow their answer's line raw when there is
//! none. The result comes back as JSON without its operations; those come
//! as the library's own records (`collect::RawOperations`), in the
//! shared region (or after the line), and the front end converts them: JSON
//! for ten thousand operations cost 10 ms to write and read, the records
//! one copy. The helper has its own page cache,
//! so a dump costs one round trip per cache block (256 KiB), not per
//! `mqs_fetch_data`, and the lookups the library asked in this process's
//! earlier dumps are answered before it starts (`isolate/known.rs`), with no round
//! trip at all. If the library crashes, aborts or stops
//! answering, the helper dies or is killed and the front end reports it;
//! the debugger carries on.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

mod known;
mod shared;

use crate::collect::{convert_operations, run_dll_raw, Attempt, RawOperations};
use crate::options::DumpOptions;
use crate::snapshot::model::{DllInfo, DllSource, ProcessSnapshot};
use crate::target::{ByteOrder, HeldBytes, ProcessDescription, Target, TargetError, TypeId, TypeSizes};

/// The helper's file name.
pub const DLLHOST: &str = "mpiq-dllhost";
/// How long the library may be silent by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the library may be silent after an interruption was answered.
const INTERRUPT_GRACE: Duration = Duration::from_secs(1);
/// How long each side polls for the other's next message (yielding the CPU
/// in between) before it sleeps. On this project's virtual machines a round
/// trip between two sleeping processes cost about 70 us, against under 15
/// us while the waiting side polls: for the 155 questions of a K = 10,000
/// Open MPI dump, 11 ms against 2.
const SPIN: Duration = Duration::from_micros(500);

/// Polls `fd` for up to [`SPIN`], yielding the CPU between polls (to the
/// other side, if it shares the CPU); true once `fd` is readable.
fn spin_until_readable(fd: std::os::fd::RawFd) -> bool {
    let start = Instant::now();
    loop {
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: pfd is a valid pollfd; a zero timeout never sleeps.
        if unsafe { libc::poll(&mut pfd, 1, 0) } != 0 {
            return true;
        }
        if start.elapsed() >= SPIN {
            return false;
        }
        // SAFETY: sched_yield has no arguments.
        unsafe { libc::sched_yield() };
    }
}

/// What the front end tells the helper first.
#[derive(Debug, Serialize, Deserialize)]
struct Start {
    dll: PathBuf,
    source: DllSource,
    process: ProcessDescription,
    big_endian: bool,
    world_rank: Option<i32>,
    stats: bool,
    /// Lookups answered before the start ([`known`]).
    #[serde(default)]
    known: known::Known,
    /// Size of the shared region sent before the start message, if any.
    #[serde(default)]
    shared: Option<u64>,
}

/// A question from the helper.
#[derive(Debug, Serialize, Deserialize)]
enum Query {
    Read { addr: u64, len: u64 },
    Symbol(String),
    Function(String),
    Type(String),
    Field { ty: u64, field: String },
    Size(u64),
    TypeSizes,
}

/// The front end's answer.
#[derive(Debug, Serialize, Deserialize)]
enum Answer {
    /// This many bytes follow the line, raw.
    Bytes(u64),
    /// The bytes are in the shared region, at this offset.
    Shared {
        at: u64,
        len: u64,
    },
    Value(Option<u64>),
    Sizes(TypeSizes),
    Failed(TargetError),
}

/// A message from the helper.
#[derive(Debug, Serialize, Deserialize)]
enum FromHost {
    Query(Query),
    /// The result, without its operations: their records
    /// ([`encode_operations`]) are in the shared region or follow the line.
    Done {
        result: Box<Result<ProcessSnapshot, Attempt>>,
        operations: Carried,
        /// The blocks read ahead that the library used (address, length).
        #[serde(default)]
        prefetched_used: Vec<(u64, u64)>,
    },
}

/// Where the records of a result's operations are: this many bytes at the
/// start of the shared region, or right after the line.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
enum Carried {
    Region(u64),
    Inline(u64),
}

/// The bytes [`encode_operations`] writes.
fn encoded_len(raw: &RawOperations) -> usize {
    raw.iter().flatten().map(|q| 8 + q.len()).sum()
}

/// Writes the records of every queue in order, each queue as its length in
/// bytes (u64, little endian) and its records, through `out`.
fn encode_operations(raw: &RawOperations, mut out: impl FnMut(&[u8])) {
    for queue in raw.iter().flatten() {
        out(&(queue.len() as u64).to_le_bytes());
        out(queue);
    }
}

/// Splits what [`encode_operations`] wrote for `comms` communicators.
fn decode_operations(mut bytes: &[u8], comms: usize) -> Result<Vec<[&[u8]; 3]>, String> {
    let mut next = || -> Result<&[u8], String> {
        let (len, rest) = bytes.split_first_chunk::<8>().ok_or("the operations end early")?;
        let len = usize::try_from(u64::from_le_bytes(*len)).map_err(|e| e.to_string())?;
        if len > rest.len() {
            return Err(format!("a queue of {len} bytes in {} left", rest.len()));
        }
        let (queue, rest) = rest.split_at(len);
        bytes = rest;
        Ok(queue)
    };
    let mut all = Vec::with_capacity(comms);
    for _ in 0..comms {
        all.push([next()?, next()?, next()?]);
    }
    Ok(all)
}

/// Where `mpiq-dllhost` is: `$MPIQ_DLLHOST`, else next to the executable or
/// shared library this code is in (or one directory up, for test binaries
/// in `target/*/deps`).
pub fn dllhost_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("MPIQ_DLLHOST") {
        let p = PathBuf::from(p);
        return p.is_file().then_some(p);
    }
    let here = containing_object()?;
    let dir = here.parent()?;
    [dir.join(DLLHOST), dir.parent()?.join(DLLHOST)]
        .into_iter()
        .find(|p| p.is_file())
}

/// The file of the object (executable or shared library) holding this code.
fn containing_object() -> Option<PathBuf> {
    // SAFETY: dladdr only reads the address and fills `info`; the function
    // pointer is a valid address inside this object.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let ok = unsafe { libc::dladdr(dllhost_path as *const libc::c_void, &mut info) };
    if ok == 0 || info.dli_fname.is_null() {
        return std::env::current_exe().ok();
    }
    // SAFETY: dli_fname is a NUL-terminated path owned by the loader.
    let name = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
    let path = PathBuf::from(std::ffi::OsStr::from_bytes(name.to_bytes()));
    std::fs::canonicalize(&path).ok().or(Some(path))
}

/// Reads lines from a socket with a deadline per line.
struct LineReader {
    sock: UnixStream,
    buf: Vec<u8>,
    /// How much of `buf` is known to hold no newline: a long line (the
    /// snapshot, megabytes) arrives in many reads and is scanned once.
    scanned: usize,
    /// Where each read from the socket lands (allocated once).
    chunk: Box<[u8]>,
}

enum ReadLine {
    Line(String),
    Eof,
    TimedOut,
    Failed(std::io::Error),
}

/// What waiting for more bytes gave.
enum Fill {
    Data,
    Eof,
    TimedOut,
    Failed(std::io::Error),
}

impl LineReader {
    /// Waits until the socket has data (or `deadline`) and appends it to `buf`.
    fn fill(&mut self, deadline: Instant) -> Fill {
        spin_until_readable(self.sock.as_raw_fd());
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Fill::TimedOut;
            }
            let mut pfd = libc::pollfd {
                fd: self.sock.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
            // SAFETY: pfd is a valid pollfd for one descriptor we own.
            let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
            if rc < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Fill::Failed(e);
            }
            if rc == 0 {
                continue;
            }
            match self.sock.read(&mut self.chunk) {
                Ok(0) => return Fill::Eof,
                Ok(n) => {
                    self.buf.extend_from_slice(&self.chunk[..n]);
                    return Fill::Data;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Fill::Failed(e),
            }
        }
    }

    /// The next line, within `timeout`.
    fn next(&mut self, timeout: Duration) -> ReadLine {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(n) = self.buf[self.scanned..].iter().position(|&b| b == b'\n') {
                let n = self.scanned + n;
                let rest = self.buf.split_off(n + 1);
                let mut line = std::mem::replace(&mut self.buf, rest);
                line.truncate(n);
                self.scanned = 0;
                return ReadLine::Line(
                    String::from_utf8(line).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
                );
            }
            self.scanned = self.buf.len();
            match self.fill(deadline) {
                Fill::Data => {}
                Fill::Eof => return ReadLine::Eof,
                Fill::TimedOut => return ReadLine::TimedOut,
                Fill::Failed(e) => return ReadLine::Failed(e),
            }
        }
    }

    /// Exactly `n` raw bytes (what follows a line), within `timeout`.
    fn raw(&mut self, n: usize, timeout: Duration) -> Result<Vec<u8>, String> {
        let deadline = Instant::now() + timeout;
        while self.buf.len() < n {
            match self.fill(deadline) {
                Fill::Data => {}
                Fill::Eof => return Err("it closed the connection".into()),
                Fill::TimedOut => return Err(format!("it sent {} of {n} bytes in time", self.buf.len())),
                Fill::Failed(e) => return Err(e.to_string()),
            }
        }
        let rest = self.buf.split_off(n);
        self.scanned = 0;
        Ok(std::mem::replace(&mut self.buf, rest))
    }
}

fn send<T: Serialize>(sock: &mut UnixStream, msg: &T) -> std::io::Result<()> {
    send_with(sock, msg, &[])
}

/// Sends `msg` as a line, then `raw` as is, in one write.
fn send_with<T: Serialize>(sock: &mut UnixStream, msg: &T, raw: &[u8]) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(msg).map_err(std::io::Error::other)?;
    line.push(b'\n');
    line.extend_from_slice(raw);
    // std's UnixStream sends with MSG_NOSIGNAL: a dead peer is an error, not SIGPIPE.
    sock.write_all(&line)
}

/// The answer to `q`, and for a read the bytes that follow it.
/// The answer to `q`, and for a read the bytes that follow it; a read goes
/// into the shared region at `read_at`, if there is one.
fn answer(
    target: &mut dyn Target,
    q: &Query,
    region: Option<&mut shared::Region>,
    read_at: usize,
) -> (Answer, Vec<u8>) {
    let none = |a: Answer| (a, Vec::new());
    let value = |r: Result<Option<u64>, TargetError>| match r {
        Ok(v) => Answer::Value(v),
        Err(e) => Answer::Failed(e),
    };
    match q {
        &Query::Read { addr, len } => {
            let Ok(n) = usize::try_from(len) else {
                return none(Answer::Failed(TargetError::Host("read too large".into())));
            };
            if n > 64 << 20 {
                return none(Answer::Failed(TargetError::Host(format!("refusing a {n}-byte read"))));
            }
            if let Some(into) = region.and_then(|r| r.slice_at(read_at, n)) {
                return match target.read_memory(addr, into) {
                    Ok(()) => none(Answer::Shared {
                        at: read_at as u64,
                        len,
                    }),
                    Err(e) => none(Answer::Failed(e)),
                };
            }
            let mut buf = vec![0u8; n];
            match target.read_memory(addr, &mut buf) {
                Ok(()) => (Answer::Bytes(len), buf),
                Err(e) => none(Answer::Failed(e)),
            }
        }
        Query::Symbol(n) => none(value(target.find_symbol(n))),
        Query::Function(n) => none(value(target.find_function(n))),
        Query::Type(n) => none(value(target.find_type(n).map(|t| t.map(|t| t.0)))),
        Query::Field { ty, field } => none(value(target.field_offset(TypeId(*ty), field))),
        Query::Size(ty) => none(value(target.size_of(TypeId(*ty)))),
        Query::TypeSizes => none(match target.type_sizes() {
            Ok(s) => Answer::Sizes(s),
            Err(e) => Answer::Failed(e),
        }),
    }
}

fn signal_name(sig: i32) -> String {
    match sig {
        libc::SIGSEGV => "SIGSEGV, a segmentation fault".into(),
        libc::SIGABRT => "SIGABRT, it called abort()".into(),
        libc::SIGBUS => "SIGBUS".into(),
        libc::SIGFPE => "SIGFPE".into(),
        libc::SIGILL => "SIGILL".into(),
        libc::SIGKILL => "SIGKILL".into(),
        other => format!("signal {other}"),
    }
}

/// A running helper: its process, this process's end of its socket, and
/// the region shared with it.
struct Helper {
    host: PathBuf,
    dll: PathBuf,
    child: std::process::Child,
    sock: UnixStream,
    reader: LineReader,
    region: Option<shared::Region>,
}

/// The helper of this process's last dump that ended well, kept for the
/// next dump with the same library: a debugger session's dumps (and the
/// ranks of `mpiq job`) then skip the start, the `dlopen`, and the page
/// faults of a fresh process (about 5 ms at K = 10,000). The library stays
/// loaded between dumps, as it does in-process and in other debuggers; a
/// helper that crashed, hung or misbehaved is never kept.
static KEPT: Mutex<Option<Helper>> = Mutex::new(None);

fn kept() -> std::sync::MutexGuard<'static, Option<Helper>> {
    KEPT.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Helper {
    /// Starts `host` for the library `dll`.
    fn spawn(host: &Path, dll: &Path) -> Result<Helper, String> {
        let (ours, theirs) = UnixStream::pair().map_err(|e| format!("cannot create a socket for {DLLHOST}: {e}"))?;
        let (stdin, stdout) = match (theirs.try_clone(), theirs.try_clone()) {
            (Ok(a), Ok(b)) => (OwnedFd::from(a), OwnedFd::from(b)),
            (Err(e), _) | (_, Err(e)) => return Err(format!("cannot set up {DLLHOST}: {e}")),
        };
        drop(theirs);
        let reader = LineReader {
            sock: ours.try_clone().map_err(|e| format!("cannot set up {DLLHOST}: {e}"))?,
            buf: Vec::new(),
            scanned: 0,
            chunk: vec![0u8; 256 << 10].into_boxed_slice(),
        };
        // Without a shared region (no memfd), read bytes go over the socket.
        let mut region = shared::Region::create(shared::SIZE).ok();
        // The library's path as an argument: the helper loads it while this
        // process prepares the start message.
        let mut command = Command::new(host);
        command
            .arg(dll)
            .stdin(Stdio::from(stdin))
            .stdout(Stdio::from(stdout))
            .stderr(Stdio::inherit());
        let spawned = command.spawn();
        // The command holds this process's copies of the helper's ends of
        // the socket: while they are open, the helper's death is no end of file.
        drop(command);
        let child = spawned.map_err(|e| format!("cannot start {}: {e}", host.display()))?;
        // The region first (the helper's first read), then start messages.
        if shared::send_fd(ours.as_raw_fd(), region.as_ref().map(shared::Region::raw_fd)).is_err() {
            region = None;
        }
        Ok(Helper {
            host: host.to_path_buf(),
            dll: dll.to_path_buf(),
            child,
            sock: ours,
            reader,
            region,
        })
    }

    /// The kept helper, if it runs `host` for `dll` and is still alive.
    fn take_kept(host: &Path, dll: &Path) -> Option<Helper> {
        let mut helper = kept().take()?;
        let alive = matches!(helper.child.try_wait(), Ok(None));
        (alive && helper.host == host && helper.dll == dll).then_some(helper)
    }

    /// Keeps this helper for the next dump.
    fn keep(self) {
        // The one kept before (another library) ends here.
        *kept() = Some(self);
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        // Already ended (its status collected) or not: it ends now.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the library at `dll` in `mpiq-dllhost` (the one kept from this
/// process's last dump, or a new one) and answers its questions from
/// `target` until it is done, dies, or is silent too long.
pub fn run(
    host: &Path,
    target: &mut dyn Target,
    dll: &Path,
    source: DllSource,
    opts: &DumpOptions,
    known_rank: Option<i32>,
) -> Result<ProcessSnapshot, Attempt> {
    let timeout = opts.timeout_ms.map_or(DEFAULT_TIMEOUT, Duration::from_millis);
    let failed = |target: &mut dyn Target, why: String| {
        let desc = target.describe();
        Ok(ProcessSnapshot {
            pid: desc.pid,
            world_rank: known_rank,
            executable: desc.executable,
            dll: Some(DllInfo {
                path: dll.display().to_string(),
                version: String::new(),
                found_via: source,
            }),
            error: Some(why),
            messages: Vec::new(),
            communicators: Vec::new(),
            stats: None,
        })
    };
    // The kept helper first; once more with a new one if it was dead.
    let mut reuse = true;
    loop {
        let kept = if reuse { Helper::take_kept(host, dll) } else { None };
        let reused = kept.is_some();
        let mut helper = match kept {
            Some(h) => h,
            None => match Helper::spawn(host, dll) {
                Ok(h) => h,
                Err(why) => return failed(target, why),
            },
        };
        // Answer what the library asked in earlier dumps now, in this process,
        // and read what it read then into the region; live reads go after that.
        let (answered, mut learner) = known::Known::prepare(target, dll, helper.region.as_mut());
        let read_at = answered.prefetched_end();
        let start = Start {
            dll: dll.to_path_buf(),
            source,
            process: target.describe(),
            big_endian: target.byte_order() == ByteOrder::Big,
            world_rank: known_rank,
            stats: opts.stats,
            known: answered,
            shared: helper.region.as_ref().map(|_| shared::SIZE as u64),
        };
        let mut outcome = None;
        // Whether the helper said anything this dump.
        let mut heard = false;
        // Once a question was answered "interrupted" (Ctrl-C), every callback
        // fails and the library should return soon; one that ignores the errors
        // and loops would keep the user waiting for the whole deadline.
        let mut interrupted = false;
        if send(&mut helper.sock, &start).is_ok() {
            loop {
                match helper.reader.next(if interrupted {
                    timeout.min(INTERRUPT_GRACE)
                } else {
                    timeout
                }) {
                    ReadLine::Line(line) => match serde_json::from_str::<FromHost>(&line) {
                        Ok(FromHost::Query(q)) => {
                            heard = true;
                            let (a, raw) = answer(target, &q, helper.region.as_mut(), read_at);
                            interrupted |= matches!(a, Answer::Failed(TargetError::Interrupted));
                            learner.observe(&q, &a);
                            if send_with(&mut helper.sock, &a, &raw).is_err() {
                                break;
                            }
                        }
                        Ok(FromHost::Done {
                            mut result,
                            operations,
                            prefetched_used,
                        }) => {
                            let Helper { reader, region, .. } = &mut helper;
                            if let Err(why) =
                                receive_operations(reader, region.as_mut(), &mut result, operations, timeout)
                            {
                                return failed(target, format!("{DLLHOST} sent a result mpiq cannot read: {why}"));
                            }
                            if result.is_ok() {
                                learner.took_prefetched(&prefetched_used);
                                learner.remember();
                            }
                            helper.keep();
                            return *result;
                        }
                        Err(e) => {
                            outcome = Some(failed(
                                target,
                                format!("{DLLHOST} sent a message mpiq cannot read: {e}"),
                            ));
                            break;
                        }
                    },
                    ReadLine::TimedOut => {
                        drop(helper);
                        if interrupted {
                            return Err(Attempt::Interrupted);
                        }
                        return failed(
                            target,
                            format!(
                                "the debug library {} did not answer within {:.1} s (stuck in a loop?) and was \
                             stopped; raise the limit with --timeout SECS",
                                dll.display(),
                                timeout.as_secs_f64()
                            ),
                        );
                    }
                    ReadLine::Failed(e) => {
                        outcome = Some(failed(target, format!("lost contact with {DLLHOST}: {e}")));
                        break;
                    }
                    ReadLine::Eof => break,
                }
            }
        }
        if let Some(r) = outcome {
            return r;
        }
        // The helper is gone without finishing: say how it died.
        let status = helper.child.wait();
        drop(helper);
        if reused && !heard && !interrupted {
            // A kept helper that died between dumps (killed, or its parent
            // thread ended) may still have looked alive: once more, with a new
            // one. A library that crashes right away crashes that one too.
            reuse = false;
            continue;
        }
        if interrupted {
            return Err(Attempt::Interrupted);
        }
        use std::os::unix::process::ExitStatusExt;
        let how = match status {
            Ok(s) => match (s.signal(), s.code()) {
                (Some(sig), _) => format!("crashed ({})", signal_name(sig)),
                (None, Some(c)) => format!("made {DLLHOST} exit with status {c}"),
                _ => "stopped unexpectedly".to_string(),
            },
            Err(e) => format!("stopped unexpectedly ({e})"),
        };
        return failed(
            target,
            format!(
                "the debug library {} {how} while reading the queues; this session is unaffected, and \
             --in-process would run it inside this process instead",
                dll.display()
            ),
        );
    }
}

/// Reads the records of a result's operations (from the region or after
/// the line) and converts them into the result's queues.
fn receive_operations(
    reader: &mut LineReader,
    region: Option<&mut shared::Region>,
    result: &mut Result<ProcessSnapshot, Attempt>,
    carried: Carried,
    timeout: Duration,
) -> Result<(), String> {
    let inline;
    let bytes: &[u8] = match carried {
        Carried::Region(n) => {
            let n = usize::try_from(n).map_err(|e| e.to_string())?;
            match region.and_then(|r| r.slice(n)) {
                Some(b) => b,
                None => return Err(format!("{n} bytes of operations in a region mpiq has not got")),
            }
        }
        Carried::Inline(n) => {
            inline = reader.raw(usize::try_from(n).map_err(|e| e.to_string())?, timeout)?;
            &inline
        }
    };
    if let Ok(snap) = result {
        let raw = decode_operations(bytes, snap.communicators.len())?;
        convert_operations(snap, &raw)?;
    }
    Ok(())
}

/// The helper's side of the socket: a `Target` that asks the front end.
struct Remote {
    reader: BufReader<std::io::Stdin>,
    out: std::io::Stdout,
    process: ProcessDescription,
    order: ByteOrder,
    rank: Option<i32>,
    line: String,
    /// Answers the front end sent with the start message.
    known: known::KnownIndex,
    /// The region read bytes arrive in, if the front end shares one.
    shared: Option<shared::View>,
    /// Blocks of `known.prefetched` the library read, this dump.
    prefetched_used: Vec<(u64, u64)>,
}

impl Remote {
    fn ask(&mut self, q: Query) -> Result<Answer, TargetError> {
        let gone = |e: String| TargetError::Host(format!("the debugger side of mpiq went away: {e}"));
        let mut msg = serde_json::to_vec(&FromHost::Query(q)).map_err(|e| gone(e.to_string()))?;
        msg.push(b'\n');
        let mut out = self.out.lock();
        out.write_all(&msg)
            .and_then(|()| out.flush())
            .map_err(|e| gone(e.to_string()))?;
        self.line.clear();
        if self.reader.buffer().is_empty() {
            spin_until_readable(libc::STDIN_FILENO);
        }
        match self.reader.read_line(&mut self.line) {
            Ok(0) => Err(gone("end of file".into())),
            Ok(_) => serde_json::from_str(&self.line).map_err(|e| gone(e.to_string())),
            Err(e) => Err(gone(e.to_string())),
        }
    }

    fn value(&mut self, q: Query) -> Result<Option<u64>, TargetError> {
        match self.ask(q)? {
            Answer::Value(v) => Ok(v),
            Answer::Failed(e) => Err(e),
            other => Err(TargetError::Host(format!("unexpected answer {other:?}"))),
        }
    }
}

impl Target for Remote {
    fn describe(&self) -> ProcessDescription {
        self.process.clone()
    }
    fn read_memory(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        match self.ask(Query::Read {
            addr,
            len: buf.len() as u64,
        })? {
            Answer::Bytes(n) if n == buf.len() as u64 => self
                .reader
                .read_exact(buf)
                .map_err(|e| TargetError::Host(format!("the debugger side of mpiq went away: {e}"))),
            Answer::Shared { at, len } if len == buf.len() as u64 => match &self.shared {
                Some(view) if usize::try_from(at).is_ok_and(|at| view.copy_to(at, buf)) => Ok(()),
                _ => Err(TargetError::Host(
                    "a read answered in a region this helper cannot see".into(),
                )),
            },
            Answer::Failed(e) => Err(e),
            other => Err(TargetError::Host(format!("unexpected answer to a read: {other:?}"))),
        }
    }
    fn held_memory(&mut self, addr: u64, len: usize) -> Option<HeldBytes> {
        let block = (addr, len as u64);
        let at = usize::try_from(*self.known.prefetched.get(&block)?).ok()?;
        let ptr = self.shared.as_ref()?.ptr_at(at, len)?;
        self.prefetched_used.push(block);
        // SAFETY: the front end wrote these bytes before this dump's start
        // message, and writes the region during the dump only past every
        // block read ahead (its reads go at `Known::prefetched_end`); this
        // process writes it only once the dump is over (the result's
        // records, after the page cache is dropped). The mapping lives as
        // long as `self.shared`, for the life of this helper.
        Some(unsafe { HeldBytes::new(ptr, len) })
    }
    fn find_symbol(&mut self, name: &str) -> Result<Option<u64>, TargetError> {
        if let Some(&v) = self.known.symbols.get(name) {
            return Ok(v);
        }
        self.value(Query::Symbol(name.into()))
    }
    fn find_function(&mut self, name: &str) -> Result<Option<u64>, TargetError> {
        if let Some(&v) = self.known.functions.get(name) {
            return Ok(v);
        }
        self.value(Query::Function(name.into()))
    }
    fn find_type(&mut self, name: &str) -> Result<Option<TypeId>, TargetError> {
        if let Some(&v) = self.known.types.get(name) {
            return Ok(v.map(TypeId));
        }
        Ok(self.value(Query::Type(name.into()))?.map(TypeId))
    }
    fn field_offset(&mut self, ty: TypeId, field: &str) -> Result<Option<u64>, TargetError> {
        if let Some(&v) = self.known.fields.get(&(ty.0, field.to_string())) {
            return Ok(v);
        }
        self.value(Query::Field {
            ty: ty.0,
            field: field.into(),
        })
    }
    fn size_of(&mut self, ty: TypeId) -> Result<Option<u64>, TargetError> {
        if let Some(&v) = self.known.sizes.get(&ty.0) {
            return Ok(v);
        }
        self.value(Query::Size(ty.0))
    }
    fn type_sizes(&mut self) -> Result<TypeSizes, TargetError> {
        if let Some(s) = self.known.type_sizes {
            return Ok(s);
        }
        match self.ask(Query::TypeSizes)? {
            Answer::Sizes(s) => Ok(s),
            Answer::Failed(e) => Err(e),
            other => Err(TargetError::Host(format!("unexpected answer {other:?}"))),
        }
    }
    fn byte_order(&mut self) -> ByteOrder {
        self.order
    }
    fn world_rank(&mut self) -> Option<i32> {
        self.rank
    }
}

/// `mpiq-dllhost`'s main: reads the start message from standard input,
/// runs the library, writes the result to standard output. Returns the exit
/// status.
pub fn host_main() -> i32 {
    // If the front end dies (SIGKILL, a crash), die too: a library looping
    // on corrupt data out of this helper's cache would never notice.
    // SAFETY: prctl(PR_SET_PDEATHSIG) only sets a flag of this process.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) };
    close_inherited();
    // Load the library named on the command line while the front end
    // prepares the start message (a failure is reported after it, by
    // `run_dll`, which loads it again).
    if let Some(dll) = std::env::args_os().nth(1) {
        let _ = crate::dll::load(Path::new(&dll));
    }
    // Before anything buffers standard input: the shared region, if any.
    let mut region = match shared::receive_fd(libc::STDIN_FILENO) {
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            eprintln!("{DLLHOST}: {e}");
            return 2;
        }
        other => other,
    };
    let mut remote = Remote {
        reader: BufReader::new(std::io::stdin()),
        out: std::io::stdout(),
        process: ProcessDescription::default(),
        order: ByteOrder::host(),
        rank: None,
        line: String::new(),
        known: known::KnownIndex::default(),
        shared: None,
        prefetched_used: Vec::new(),
    };
    // One dump per start message, until the front end closes the socket.
    for dumps in 0.. {
        let mut line = String::new();
        if remote.reader.read_line(&mut line).unwrap_or(0) == 0 {
            if dumps == 0 {
                eprintln!("{DLLHOST}: this is mpiq's helper process for debug libraries; it is started by mpiq");
                return 2;
            }
            return 0;
        }
        let mut start: Start = match serde_json::from_str(&line) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("{DLLHOST}: bad start message: {e}");
                return 2;
            }
        };
        if remote.shared.is_none() {
            if let Some(len) = start.shared {
                match open_region(std::mem::replace(&mut region, Ok(None)), len) {
                    Ok(view) => remote.shared = Some(view),
                    Err(e) => {
                        eprintln!("{DLLHOST}: {e}");
                        return 2;
                    }
                }
            }
        }
        remote.process = std::mem::take(&mut start.process);
        remote.order = if start.big_endian {
            ByteOrder::Big
        } else {
            ByteOrder::Little
        };
        remote.rank = start.world_rank;
        remote.known = std::mem::take(&mut start.known).index();
        let opts = DumpOptions {
            stats: start.stats,
            ..DumpOptions::default()
        };
        if let Err(e) = dump_once(&mut remote, &start, &opts) {
            eprintln!("{DLLHOST}: cannot send the result: {e}");
            return 1;
        }
    }
    0
}

/// Closes every descriptor but standard input, output and error. Whatever
/// else the front end's process had open without close-on-exec (a
/// debugger's pipes and terminals) must not live as long as this helper,
/// which is kept between dumps: a reader waiting for the end of such a pipe
/// would wait for the whole debugger session (gdb's `pipe` command did).
fn close_inherited() {
    // SAFETY: closes descriptors 3 and up of this process, which owns
    // none of them yet (nothing was opened before main's first lines).
    if unsafe { libc::close_range(3, libc::c_uint::MAX, 0) } == 0 {
        return;
    }
    // Kernels before 5.9: one at a time.
    let open: Vec<i32> = std::fs::read_dir("/proc/self/fd")
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .filter(|&fd| fd > 2)
                .collect()
        })
        .unwrap_or_default();
    for fd in open {
        // SAFETY: as above (the directory's own descriptor is closed
        // already: it fails harmlessly).
        unsafe { libc::close(fd) };
    }
}

/// Maps the region the front end sent (`received`), `len` bytes.
fn open_region(received: std::io::Result<Option<OwnedFd>>, len: u64) -> Result<shared::View, String> {
    match received {
        Ok(Some(fd)) => usize::try_from(len)
            .map_err(std::io::Error::other)
            .and_then(|len| shared::View::open(fd, len))
            .map_err(|e| format!("cannot map the shared region: {e}")),
        Ok(None) => Err("the shared region did not arrive".into()),
        Err(e) => Err(format!("cannot receive the shared region: {e}")),
    }
}

/// Runs the library once and sends the result.
fn dump_once(remote: &mut Remote, start: &Start, opts: &DumpOptions) -> std::io::Result<()> {
    let (result, raw) = run_dll_raw(remote, &start.dll, start.source, opts, start.world_rank);
    let len = encoded_len(&raw);
    let mut inline = Vec::new();
    let operations = match &remote.shared {
        Some(view) if len <= view.len() => {
            let mut at = 0;
            encode_operations(&raw, |bytes| {
                view.write_at(at, bytes);
                at += bytes.len();
            });
            Carried::Region(len as u64)
        }
        _ => {
            inline.reserve_exact(len);
            encode_operations(&raw, |bytes| inline.extend_from_slice(bytes));
            Carried::Inline(len as u64)
        }
    };
    drop(raw);
    let done = FromHost::Done {
        result: Box::new(result),
        operations,
        prefetched_used: std::mem::take(&mut remote.prefetched_used),
    };
    let mut msg = serde_json::to_vec(&done).map_err(std::io::Error::other)?;
    msg.push(b'\n');
    msg.extend_from_slice(&inline);
    let mut out = remote.out.lock();
    out.write_all(&msg).and_then(|()| out.flush())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The records of every queue come back split as they were, and a
    /// short or lying stream is an error, not a panic.
    #[test]
    fn operation_records_travel_and_split_back() {
        let raw: RawOperations = vec![
            [vec![1; 3], Vec::new(), vec![2; 5]],
            [Vec::new(), vec![3; 1], Vec::new()],
        ];
        let mut bytes = Vec::new();
        encode_operations(&raw, |b| bytes.extend_from_slice(b));
        assert_eq!(bytes.len(), encoded_len(&raw));
        let back = decode_operations(&bytes, 2).unwrap();
        let expected: Vec<[&[u8]; 3]> = raw.iter().map(|[a, b, c]| [&a[..], &b[..], &c[..]]).collect();
        assert_eq!(back, expected);
        assert!(decode_operations(&bytes, 3).is_err());
        assert!(decode_operations(&bytes[..bytes.len() - 1], 2).is_err());
        let mut lying = bytes.clone();
        lying[0] = 0xff;
        assert!(decode_operations(&lying, 2).is_err());
    }
}
