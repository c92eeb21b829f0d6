//! Lines over the helper's socket, each within a deadline, and the raw
//! bytes that may follow a line.

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::error::ProtocolError;
use super::sys;

/// How long each side polls for the other's next message (yielding the CPU
/// in between) before it sleeps. On this project's virtual machines a round
/// trip between two sleeping processes cost about 70 us, against under 15
/// us while the waiting side polls: for the 155 questions of a K = 10,000
/// Open MPI dump, 11 ms against 2.
const SPIN: Duration = Duration::from_micros(500);

/// Polls `fd` for up to [`SPIN`], yielding the CPU between polls (to the
/// other side, if it shares the CPU); true once `fd` is readable.
pub(super) fn spin_until_readable(fd: std::os::fd::RawFd) -> bool {
    let start = Instant::now();
    loop {
        if sys::poll_readable(fd, 0).unwrap_or(true) {
            return true;
        }
        if start.elapsed() >= SPIN {
            return false;
        }
        sys::yield_cpu();
    }
}

/// Reads lines from a socket with a deadline per line.
pub(super) struct LineReader {
    sock: UnixStream,
    buf: Vec<u8>,
    /// How much of `buf` is known to hold no newline: a long line (the
    /// snapshot, megabytes) arrives in many reads and is scanned once.
    scanned: usize,
    /// Where each read from the socket lands (allocated once).
    chunk: Box<[u8]>,
}

pub(super) enum ReadLine {
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
    /// A reader of `sock`.
    pub(super) fn new(sock: UnixStream) -> LineReader {
        LineReader {
            sock,
            buf: Vec::new(),
            scanned: 0,
            chunk: vec![0u8; 256 << 10].into_boxed_slice(),
        }
    }

    /// Waits until the socket has data (or `deadline`) and appends it to `buf`.
    fn fill(&mut self, deadline: Instant) -> Fill {
        spin_until_readable(self.sock.as_raw_fd());
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Fill::TimedOut;
            }
            let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
            match sys::poll_readable(self.sock.as_raw_fd(), ms) {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Fill::Failed(e),
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
    pub(super) fn next(&mut self, timeout: Duration) -> ReadLine {
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
    pub(super) fn raw(&mut self, n: usize, timeout: Duration) -> Result<Vec<u8>, ProtocolError> {
        let deadline = Instant::now() + timeout;
        while self.buf.len() < n {
            match self.fill(deadline) {
                Fill::Data => {}
                Fill::Eof => return Err(ProtocolError::Closed),
                Fill::TimedOut => {
                    return Err(ProtocolError::Short {
                        got: self.buf.len(),
                        wanted: n,
                    })
                }
                Fill::Failed(e) => return Err(ProtocolError::Io(e)),
            }
        }
        let rest = self.buf.split_off(n);
        self.scanned = 0;
        Ok(std::mem::replace(&mut self.buf, rest))
    }
}

pub(super) fn send<T: Serialize>(sock: &mut UnixStream, msg: &T) -> std::io::Result<()> {
    send_with(sock, msg, &[])
}

/// Sends `msg` as a line, then `raw` as is, in one write.
pub(super) fn send_with<T: Serialize>(sock: &mut UnixStream, msg: &T, raw: &[u8]) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(msg).map_err(std::io::Error::other)?;
    line.push(b'\n');
    line.extend_from_slice(raw);
    // std's UnixStream sends with MSG_NOSIGNAL: a dead peer is an error, not SIGPIPE.
    sock.write_all(&line)
}
