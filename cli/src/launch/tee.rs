//! The job's standard output and error, passed through unchanged as they
//! come (each read is written on at once: no line buffering, so a prompt
//! or a progress bar without a newline is not held back), with the last
//! lines of each kept for the report (`job-output.txt`).

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Lines kept of each stream.
pub const TAIL_LINES: usize = 200;
/// Bytes kept of one line; the rest of a longer line is dropped (and said).
pub const MAX_LINE: usize = 4096;

/// The last lines of one stream.
#[derive(Debug, Default)]
pub struct Tail {
    lines: VecDeque<Vec<u8>>,
    /// The line being read (no newline yet).
    partial: Vec<u8>,
    /// Bytes of the current line dropped beyond [`MAX_LINE`].
    dropped: usize,
    /// Complete lines seen.
    total: u64,
}

impl Tail {
    /// Takes in what the stream gave next.
    pub fn push(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let (line, rest, done) = match bytes.iter().position(|&b| b == b'\n') {
                Some(i) => (&bytes[..i], &bytes[i + 1..], true),
                None => (bytes, &[][..], false),
            };
            let room = MAX_LINE.saturating_sub(self.partial.len()).min(line.len());
            self.partial.extend_from_slice(&line[..room]);
            self.dropped += line.len() - room;
            if done {
                self.end_line();
            }
            bytes = rest;
        }
    }

    fn end_line(&mut self) {
        let mut line = std::mem::take(&mut self.partial);
        if self.dropped > 0 {
            line.extend_from_slice(format!(" [mpiq: {} more bytes of this line not kept]", self.dropped).as_bytes());
            self.dropped = 0;
        }
        self.total += 1;
        if self.lines.len() == TAIL_LINES {
            self.lines.pop_front();
        }
        self.lines.push_back(line);
    }

    /// The kept lines (an unfinished last line included) as text, and how
    /// many lines there were in all.
    pub fn text(&self) -> (String, usize, u64) {
        let mut out = Vec::new();
        let mut kept = self.lines.len();
        let mut total = self.total;
        for l in &self.lines {
            out.extend_from_slice(l);
            out.push(b'\n');
        }
        if !self.partial.is_empty() {
            out.extend_from_slice(&self.partial);
            out.extend_from_slice(b"\n");
            kept += 1;
            total += 1;
        }
        (String::from_utf8_lossy(&out).into_owned(), kept, total)
    }
}

/// Where a stream goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sink {
    /// mpiq's standard output.
    Stdout,
    /// mpiq's standard error.
    Stderr,
    /// Nowhere (tests).
    #[cfg(test)]
    Nowhere,
}

/// One stream being passed through.
pub struct Tee {
    /// Its last lines.
    pub tail: Arc<Mutex<Tail>>,
    thread: Option<JoinHandle<()>>,
}

impl Tee {
    /// Starts passing `from` through to `to`.
    pub fn start(mut from: impl Read + Send + 'static, to: Sink) -> Tee {
        let tail = Arc::new(Mutex::new(Tail::default()));
        let kept = tail.clone();
        let thread = std::thread::Builder::new()
            .name("mpiq-run-tee".into())
            .spawn(move || {
                let mut buf = vec![0u8; 64 * 1024];
                // Once writing fails (a closed pipe), the stream is still
                // read, so that the job never blocks on a full pipe.
                let mut writable = true;
                loop {
                    let n = match from.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => n,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                        Err(_) => break,
                    };
                    if writable {
                        writable = match to {
                            Sink::Stdout => {
                                let mut out = std::io::stdout().lock();
                                out.write_all(&buf[..n]).and_then(|()| out.flush()).is_ok()
                            }
                            Sink::Stderr => std::io::stderr().lock().write_all(&buf[..n]).is_ok(),
                            #[cfg(test)]
                            Sink::Nowhere => true,
                        };
                    }
                    kept.lock().unwrap_or_else(|e| e.into_inner()).push(&buf[..n]);
                }
            })
            .ok();
        Tee { tail, thread }
    }

    /// Waits until the stream ended (every writer closed it), at most until
    /// `deadline`: a process the job left behind may hold it open.
    pub fn finish(&mut self, deadline: Instant) {
        while self.thread.as_ref().is_some_and(|t| !t.is_finished()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if self.thread.as_ref().is_some_and(|t| t.is_finished()) {
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        }
    }

    /// The kept lines, with a heading saying which stream and how many.
    pub fn section(&self, what: &str) -> String {
        let (text, kept, total) = self.tail.lock().unwrap_or_else(|e| e.into_inner()).text();
        if total == 0 {
            return format!("==> the job's {what}: nothing <==\n");
        }
        let which = if kept as u64 == total {
            format!("all {total} lines")
        } else {
            format!("the last {kept} of {total} lines")
        };
        format!("==> the job's {what} ({which}) <==\n{text}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_lines_however_they_were_split() {
        let mut t = Tail::default();
        for i in 0..(TAIL_LINES + 50) {
            let line = format!("line {i}\n");
            let (a, b) = line.as_bytes().split_at(3);
            t.push(a);
            t.push(b);
        }
        t.push(b"partial");
        let (text, kept, total) = t.text();
        assert_eq!((kept, total), (TAIL_LINES + 1, TAIL_LINES as u64 + 51));
        assert!(text.starts_with("line 50\nline 51\n"), "{text}");
        assert!(
            text.ends_with(&format!("line {}\npartial\n", TAIL_LINES + 49)),
            "{text}"
        );
        let mut t = Tail::default();
        t.push(b"a\n\nb\nc");
        assert_eq!(t.text(), ("a\n\nb\nc\n".to_string(), 4, 4));
    }

    #[test]
    fn a_long_line_is_cut() {
        let mut t = Tail::default();
        t.push(&vec![b'x'; MAX_LINE + 10]);
        t.push(b"yy\nnext\n");
        let (text, kept, _) = t.text();
        assert_eq!(kept, 2);
        let first = text.lines().next().unwrap();
        assert!(first.starts_with(&"x".repeat(MAX_LINE)));
        assert!(
            first.ends_with("[mpiq: 12 more bytes of this line not kept]"),
            "{first}"
        );
    }

    #[test]
    fn a_stream_is_passed_through_and_kept() {
        let mut tee = Tee::start(&b"one\ntwo\n"[..], Sink::Nowhere);
        tee.finish(Instant::now() + Duration::from_secs(10));
        assert_eq!(
            tee.section("standard error"),
            "==> the job's standard error (all 2 lines) <==\none\ntwo\n"
        );
        let mut empty = Tee::start(&b""[..], Sink::Nowhere);
        empty.finish(Instant::now() + Duration::from_secs(10));
        assert_eq!(
            empty.section("standard output"),
            "==> the job's standard output: nothing <==\n"
        );
    }
}
