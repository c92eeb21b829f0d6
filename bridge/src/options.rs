//! The arguments every front end's queue command accepts, parsed in one place.

use std::path::PathBuf;

use crate::snapshot::model::QueueKind;

/// Output format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// The human-readable view.
    #[default]
    Text,
    /// `mpiq.snapshot/1` JSON.
    Json,
}

/// Options of a dump, as given to `info mpi-queues`, `mpi queues` or `mpiq`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DumpOptions {
    /// Output format.
    pub format: Format,
    /// Show communicators that have nothing pending too.
    pub all: bool,
    /// Only communicators with this name or id.
    pub comm: Option<String>,
    /// Only these queues (empty: all three).
    pub queues: Vec<QueueKind>,
    /// Use this debug library instead of the one the target names.
    pub dll: Option<PathBuf>,
    /// Add per-process counters (`stats`) to the snapshot.
    pub stats: bool,
    /// Record every answer the targets give into this file (`mpiq replay` reads it).
    pub record: Option<PathBuf>,
    /// Run the debug library inside this process instead of `mpiq-dllhost`.
    pub in_process: bool,
    /// How long the debug library may go without answering, in milliseconds.
    pub timeout_ms: Option<u64>,
}

/// A bad argument.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}\n(try --help)")]
pub struct UsageError(pub String);

/// Help text for the arguments [`DumpOptions::parse`] accepts.
pub const HELP: &str = "\
Show the MPI message queues of the process: pending sends, posted receives
and unexpected messages of every communicator, read through the MPI
library's own message queue debug library (MQD).

Options:
  --json          print the snapshot as JSON (schema mpiq.snapshot/1)
  --all           also list communicators with nothing pending
  --comm NAME|ID  only the communicator with this name or id
  --queue Q       only queue Q: sends, receives or unexpected (repeatable)
  --dll FILE      use this debug library instead of the one the target names
  --stats         add counters (library reads, host reads, time) per process
  --record FILE   save everything the debug library read, for `mpiq replay FILE`
  --in-process    run the debug library inside this process (default: in the
                  helper mpiq-dllhost, so that a crash cannot take this one down)
  --timeout SECS  give up when the debug library is silent this long (default 10)
";

impl DumpOptions {
    /// Parses already split arguments.
    pub fn parse<S: AsRef<str>>(args: &[S]) -> Result<Self, UsageError> {
        let mut opts = DumpOptions::default();
        let mut it = args.iter().map(|s| s.as_ref());
        while let Some(arg) = it.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
                _ => (arg, None),
            };
            let mut value = |name: &str| -> Result<String, UsageError> {
                match inline.clone().or_else(|| it.next().map(str::to_string)) {
                    Some(v) if !v.is_empty() => Ok(v),
                    _ => Err(UsageError(format!("{name} needs a value"))),
                }
            };
            match flag {
                "--json" => opts.format = Format::Json,
                "--all" => opts.all = true,
                "--stats" => opts.stats = true,
                "--in-process" => opts.in_process = true,
                "--timeout" => {
                    let v = value("--timeout")?;
                    match v.parse::<f64>() {
                        Ok(t) if t > 0.0 && t < 1e9 => opts.timeout_ms = Some((t * 1000.0).ceil() as u64),
                        _ => {
                            return Err(UsageError(format!(
                                "--timeout needs a positive number of seconds, not '{v}'"
                            )))
                        }
                    }
                }
                "--comm" => opts.comm = Some(value("--comm")?),
                "--dll" => opts.dll = Some(PathBuf::from(value("--dll")?)),
                "--record" => opts.record = Some(PathBuf::from(value("--record")?)),
                "--queue" => {
                    let v = value("--queue")?;
                    for part in v.split(',') {
                        let q = match part {
                            "sends" | "send" => QueueKind::Sends,
                            "receives" | "recv" | "receive" | "recvs" => QueueKind::Receives,
                            "unexpected" => QueueKind::Unexpected,
                            other => {
                                return Err(UsageError(format!(
                                    "unknown queue '{other}': use sends, receives or unexpected"
                                )))
                            }
                        };
                        if !opts.queues.contains(&q) {
                            opts.queues.push(q);
                        }
                    }
                }
                "" => {}
                other => return Err(UsageError(format!("unknown argument '{other}'"))),
            }
        }
        Ok(opts)
    }

    /// Parses a command line as a debugger passes it (split on white space,
    /// with single or double quotes grouping words).
    pub fn parse_line(line: &str) -> Result<Self, UsageError> {
        Self::parse(&split_words(line)?)
    }

    /// Whether a queue is selected.
    pub fn wants_queue(&self, q: QueueKind) -> bool {
        self.queues.is_empty() || self.queues.contains(&q)
    }
}

/// Splits a command line into words; quotes group, a backslash escapes.
pub fn split_words(line: &str) -> Result<Vec<String>, UsageError> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), '\\') | (None, '\\') => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
                in_word = true;
            }
            (Some(_), c) => cur.push(c),
            (None, '"') | (None, '\'') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            (None, c) => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if quote.is_some() {
        return Err(UsageError("unterminated quote".into()));
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_all_options() {
        let o = DumpOptions::parse_line("--json --all --comm 'my comm' --queue sends,unexpected --dll=/x.so").unwrap();
        assert_eq!(o.format, Format::Json);
        assert!(o.all);
        assert_eq!(o.comm.as_deref(), Some("my comm"));
        assert_eq!(o.queues, vec![QueueKind::Sends, QueueKind::Unexpected]);
        assert_eq!(o.dll, Some(PathBuf::from("/x.so")));
        assert!(!o.wants_queue(QueueKind::Receives));
    }

    #[test]
    fn rejects_unknown_and_missing_values() {
        assert!(DumpOptions::parse_line("--frobnicate")
            .unwrap_err()
            .0
            .contains("--frobnicate"));
        assert!(DumpOptions::parse_line("--comm")
            .unwrap_err()
            .0
            .contains("needs a value"));
        assert!(DumpOptions::parse_line("--queue foo").unwrap_err().0.contains("'foo'"));
        assert!(DumpOptions::parse_line("--comm 'x").is_err());
    }
}
