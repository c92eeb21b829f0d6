//! `mpiq-dllhost`'s side: a [`Target`] that asks the front end, and the
//! loop that runs one dump per start message.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::Arc;

use super::error::RegionError;
use super::names::DLLHOST;
use super::protocol::{encode_operations, encoded_len, Carried, FromHost, Reply, Start};
use super::transport::spin_until_readable;
use super::{known, sys};
use crate::dump::run_dll_raw;
use crate::target::question::{Answer, Question};
use crate::target::{ByteOrder, HeldBytes, ProcessDescription, Target, TargetError, TypeId, TypeSizes};

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
    shared: Option<Arc<sys::View>>,
    /// Blocks of `known.prefetched` the library read, this dump.
    prefetched_used: Vec<(u64, u64)>,
}

impl Remote {
    /// One round trip: the question to the front end, its reply back.
    fn ask(&mut self, q: Question) -> Result<Reply, TargetError> {
        let gone = |e: String| TargetError::Host(format!("the debugger side of mpiq went away: {e}"));
        let mut msg = serde_json::to_vec(&FromHost::Query(q)).map_err(|e| gone(e.to_string()))?;
        msg.push(b'\n');
        let mut out = self.out.lock();
        out.write_all(&msg)
            .and_then(|()| out.flush())
            .map_err(|e| gone(e.to_string()))?;
        self.line.clear();
        if self.reader.buffer().is_empty() {
            spin_until_readable(sys::STDIN);
        }
        match self.reader.read_line(&mut self.line) {
            Ok(0) => Err(gone("end of file".into())),
            Ok(_) => serde_json::from_str(&self.line).map_err(|e| gone(e.to_string())),
            Err(e) => Err(gone(e.to_string())),
        }
    }

    /// The answer to a lookup: from the answers sent ahead, else asked.
    fn lookup(&mut self, q: Question) -> Result<Answer, TargetError> {
        if let Some(a) = self.known.answers.get(&q) {
            return Ok(a.clone());
        }
        match self.ask(q)? {
            Reply::Answer(a) => Ok(a),
            Reply::Failed(e) => Err(e),
            other => Err(TargetError::Host(format!("unexpected answer {other:?}"))),
        }
    }
}

impl Target for Remote {
    fn describe(&self) -> ProcessDescription {
        self.process.clone()
    }
    fn read_memory(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        match self.ask(Question::Read {
            addr,
            len: buf.len() as u64,
        })? {
            Reply::Bytes(n) if n == buf.len() as u64 => self
                .reader
                .read_exact(buf)
                .map_err(|e| TargetError::Host(format!("the debugger side of mpiq went away: {e}"))),
            Reply::Shared { at, len } if len == buf.len() as u64 => match &self.shared {
                Some(view) if usize::try_from(at).is_ok_and(|at| view.copy_to(at, buf)) => Ok(()),
                _ => Err(TargetError::Host(
                    "a read answered in a region this helper cannot see".into(),
                )),
            },
            Reply::Failed(e) => Err(e),
            other => Err(TargetError::Host(format!("unexpected answer to a read: {other:?}"))),
        }
    }
    fn held_memory(&mut self, addr: u64, len: usize) -> Option<HeldBytes> {
        let block = (addr, len as u64);
        let at = usize::try_from(*self.known.prefetched.get(&block)?).ok()?;
        // The front end wrote these bytes before this dump's start message,
        // and writes the region during the dump only past every block read
        // ahead (its reads go at `Known::prefetched_end`); this process
        // writes it only once the dump is over (the result's records, after
        // the page cache is dropped).
        let held = HeldBytes::new(self.shared.clone()?, at, len)?;
        self.prefetched_used.push(block);
        Some(held)
    }
    fn find_symbol(&mut self, name: &str) -> Result<Option<u64>, TargetError> {
        self.lookup(Question::Symbol(name.into()))?.value()
    }
    fn find_function(&mut self, name: &str) -> Result<Option<u64>, TargetError> {
        self.lookup(Question::Function(name.into()))?.value()
    }
    fn find_type(&mut self, name: &str) -> Result<Option<TypeId>, TargetError> {
        Ok(self.lookup(Question::Type(name.into()))?.value()?.map(TypeId))
    }
    fn field_offset(&mut self, ty: TypeId, field: &str) -> Result<Option<u64>, TargetError> {
        self.lookup(Question::Field {
            ty,
            field: field.into(),
        })?
        .value()
    }
    fn size_of(&mut self, ty: TypeId) -> Result<Option<u64>, TargetError> {
        self.lookup(Question::Size(ty))?.value()
    }
    fn type_sizes(&mut self) -> Result<TypeSizes, TargetError> {
        self.lookup(Question::TypeSizes)?.sizes()
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
    sys::die_with_parent();
    sys::close_inherited();
    // Load the library named on the command line while the front end
    // prepares the start message (a failure is reported after it, by
    // `run_dll`, which loads it again).
    if let Some(dll) = std::env::args_os().nth(1) {
        let _ = crate::dll::load(Path::new(&dll));
    }
    // Before anything buffers standard input: the shared region, if any.
    let mut region = match sys::receive_fd(sys::STDIN) {
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
                    Ok(view) => remote.shared = Some(Arc::new(view)),
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
        if let Err(e) = dump_once(&mut remote, &start) {
            eprintln!("{DLLHOST}: cannot send the result: {e}");
            return 1;
        }
    }
    0
}

/// Maps the region the front end sent (`received`), `len` bytes.
fn open_region(received: std::io::Result<Option<OwnedFd>>, len: u64) -> Result<sys::View, RegionError> {
    match received {
        Ok(Some(fd)) => usize::try_from(len)
            .map_err(std::io::Error::other)
            .and_then(|len| sys::View::open(fd, len))
            .map_err(RegionError::Map),
        Ok(None) => Err(RegionError::Missing),
        Err(e) => Err(RegionError::Receive(e)),
    }
}

/// Runs the library once and sends the result, with what the library
/// printed on standard error among its notes.
fn dump_once(remote: &mut Remote, start: &Start) -> std::io::Result<()> {
    let capture = sys::StderrCapture::start().ok();
    let (mut result, raw) = run_dll_raw(remote, &start.dll, start.source, &start.opts, start.world_rank);
    if let Some(capture) = capture {
        let printed = capture.take();
        drop(capture);
        if let Ok(snap) = &mut result {
            snap.messages.extend(library_printed(&printed));
        }
    }
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

/// The notes for what a debug library printed: each distinct line once, as
/// "the debug library printed: LINE" (at most 8 lines, each cut at 400
/// characters).
fn library_printed(printed: &[u8]) -> Vec<String> {
    const LINES: usize = 8;
    const CHARS: usize = 400;
    let text = String::from_utf8_lossy(printed);
    let mut seen: Vec<&str> = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if !seen.contains(&line) {
            seen.push(line);
        }
    }
    let more = seen.len().saturating_sub(LINES);
    let mut notes: Vec<String> = seen
        .iter()
        .take(LINES)
        .map(|l| {
            let cut: String = l.chars().take(CHARS).collect();
            let ellipsis = if cut.len() < l.len() { "…" } else { "" };
            format!("the debug library printed: {cut}{ellipsis}")
        })
        .collect();
    if more > 0 {
        notes.push(format!("the debug library printed {more} more lines"));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::library_printed;

    #[test]
    fn what_a_library_printed_is_each_line_once() {
        let printed = b"WARNING: 4.1.4 is unable to find debugging information about the \"opal_list_item_t\" type.\n\
                        WARNING: 4.1.4 is unable to find debugging information about the \"opal_list_item_t\" type.\n\n";
        assert_eq!(
            library_printed(printed),
            vec![
                "the debug library printed: WARNING: 4.1.4 is unable to find debugging information about the \
                 \"opal_list_item_t\" type."
            ]
        );
        assert!(library_printed(b"").is_empty());
        let many: String = (0..20).map(|i| format!("line {i}\n")).collect();
        let notes = library_printed(many.as_bytes());
        assert_eq!(notes.len(), 9);
        assert_eq!(notes[8], "the debug library printed 12 more lines");
        let long = "x".repeat(1000);
        assert!(library_printed(long.as_bytes())[0].ends_with("x…"));
    }
}
