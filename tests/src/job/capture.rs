//! The job's standard output and error, read by one thread per stream: the captured text
//! and the ranks' `MPIQ-READY` lines.

use std::collections::BTreeMap;
use std::fmt;
use std::io::{BufRead, BufReader, Read};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::Rank;

/// A job's captured standard output and error.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Output {
    /// Everything the job wrote to standard output (all ranks, as the starter forwarded it).
    pub stdout: String,
    /// Everything the job wrote to standard error.
    pub stderr: String,
}

impl fmt::Display for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "--- stdout ---\n{}--- stderr ---\n{}--- end ---",
            self.stdout, self.stderr
        )
    }
}

/// What the reader threads share with the job.
#[derive(Default)]
pub(crate) struct Captured {
    pub(crate) output: Output,
    pub(crate) ready: BTreeMap<usize, u32>,
    pub(crate) problems: Vec<String>,
    pub(crate) open_streams: u8,
}

pub(crate) type Shared = Arc<(Mutex<Captured>, Condvar)>;

pub(crate) fn lock(shared: &Shared) -> MutexGuard<'_, Captured> {
    shared.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl fmt::Debug for Captured {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Captured")
            .field("ready", &self.ready)
            .finish_non_exhaustive()
    }
}

#[derive(Clone, Copy)]
pub(crate) enum Stream {
    Stdout,
    Stderr,
}

pub(crate) fn spawn_reader(pipe: impl Read + Send + 'static, shared: Shared, stream: Stream, nprocs: usize) {
    std::thread::Builder::new()
        .name("mpiq-job-reader".into())
        .spawn(move || {
            let mut reader = BufReader::new(pipe);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match reader.read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                let line = String::from_utf8_lossy(&buf);
                let mut c = lock(&shared);
                match stream {
                    Stream::Stdout => {
                        c.output.stdout.push_str(&line);
                        if let Some(parsed) = parse_ready_line(&line) {
                            record_ready(&mut c, parsed, nprocs);
                        }
                    }
                    Stream::Stderr => c.output.stderr.push_str(&line),
                }
                drop(c);
                shared.1.notify_all();
            }
            lock(&shared).open_streams -= 1;
            shared.1.notify_all();
        })
        .expect("spawn a reader thread");
}

/// Parses `MPIQ-READY rank=<r> pid=<p>` anywhere in a line: `None` if the line has no
/// marker, `Some(Err)` if it has one that does not parse.
fn parse_ready_line(line: &str) -> Option<Result<Rank, String>> {
    let at = line.find("MPIQ-READY")?;
    let rest = &line[at + "MPIQ-READY".len()..];
    let mut rank = None;
    let mut pid = None;
    for word in rest.split_whitespace() {
        if let Some(v) = word.strip_prefix("rank=") {
            rank = v.parse::<usize>().ok();
        } else if let Some(v) = word.strip_prefix("pid=") {
            pid = v.parse::<u32>().ok();
        }
    }
    Some(match (rank, pid) {
        (Some(rank), Some(pid)) if pid > 0 => Ok(Rank { rank, pid }),
        _ => Err(format!("malformed ready line: {:?}", line.trim_end())),
    })
}

fn record_ready(c: &mut Captured, parsed: Result<Rank, String>, nprocs: usize) {
    match parsed {
        Err(problem) => c.problems.push(problem),
        Ok(r) if r.rank >= nprocs => {
            c.problems
                .push(format!("rank {} reported ready in a job of {nprocs}", r.rank));
        }
        Ok(r) => {
            if let Some(old) = c.ready.insert(r.rank, r.pid) {
                c.problems.push(format!(
                    "rank {} reported ready twice (pid {old}, then pid {})",
                    r.rank, r.pid
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ready_lines() {
        assert_eq!(parse_ready_line("hello"), None);
        assert_eq!(
            parse_ready_line("MPIQ-READY rank=3 pid=1234\n"),
            Some(Ok(Rank { rank: 3, pid: 1234 }))
        );
        // Hydra or Open MPI may prefix output (e.g. with --tag-output).
        assert_eq!(
            parse_ready_line("[1,2]<stdout>:MPIQ-READY rank=2 pid=77"),
            Some(Ok(Rank { rank: 2, pid: 77 }))
        );
        assert!(matches!(parse_ready_line("MPIQ-READY rank=x pid=1"), Some(Err(_))));
        assert!(matches!(parse_ready_line("MPIQ-READY rank=1 pid=0"), Some(Err(_))));
    }

    #[test]
    fn rejects_duplicate_and_out_of_range_ranks() {
        let mut c = Captured::default();
        record_ready(&mut c, Ok(Rank { rank: 0, pid: 10 }), 2);
        record_ready(&mut c, Ok(Rank { rank: 0, pid: 11 }), 2);
        record_ready(&mut c, Ok(Rank { rank: 2, pid: 12 }), 2);
        assert_eq!(c.ready.len(), 1);
        assert_eq!(c.problems.len(), 2, "{:?}", c.problems);
    }
}
