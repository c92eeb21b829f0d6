//! The options of the queue command, in one table ([`DUMP_OPTIONS`]) that
//! every front end's parser, help text and usage line come from:
//! - [`DumpOptions::parse`] parses with it: gdb's whole command line (through
//!   `mpiq_dump`), lldb's `mpi queues`, the CLI's dump options;
//! - [`HELP`] prints it, usage line first: `mpiq_help()`, gdb's `help info
//!   mpi-queues` (whose usage line is read from it), lldb's `help mpi queues`
//!   ([`synopsis`], [`options_help`]);
//! - the CLI makes its clap arguments from it (`cli/src/args.rs`), so
//!   `mpiq queues --help` shows the same help lines.
//!
//! A row says who acts on its option ([`Handler`]): the bridge, or the
//! debugger front ends (`--targets`, which gdb and lldb read to pick their
//! inferiors or targets; the bridge accepts and keeps it). Options that one
//! front end alone has are not in the table: the CLI's output options
//! `--format text|json|dot|csv|folded`, `--svg FILE`, `--flamegraph FILE`
//! and `--no-analysis` and the way it names processes (`--pid`, `--starter`, core files), all in
//! `cli/src/args.rs`; and each front end's `--help`.
//!
//! The lookup diagnostic has a table of the same kind (`crate::lookup`).

use std::path::PathBuf;
use std::sync::LazyLock;

use serde::{Deserialize, Serialize};

use crate::snapshot::model::QueueKind;

pub mod targets;

/// Output format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Format {
    /// The human-readable view.
    #[default]
    Text,
    /// `mpiq.snapshot/2` JSON.
    Json,
    /// The merged call stacks in the collapsed format of flamegraph.pl and
    /// inferno (`crate::render::folded`).
    Folded,
}

/// Options of a dump, as given to `info mpi-queues`, `mpi queues` or `mpiq`.
/// Serialisable: the helper process (`crate::isolate`) receives them whole
/// in its start message and runs the dump with them as they are.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
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
    /// Show every frame (`--stacks`), not only where each process is.
    pub stacks: bool,
    /// Read no call stacks (`--no-stacks`).
    pub no_stacks: bool,
    /// Do not read the Python frames of CPython processes.
    pub no_python: bool,
    /// Record every answer the targets give into this file (`mpiq replay` reads it).
    pub record: Option<PathBuf>,
    /// Run the debug library inside this process instead of `mpiq-dllhost`.
    pub in_process: bool,
    /// How long the debug library may go without answering, in milliseconds.
    pub timeout_ms: Option<u64>,
    /// `--targets` as given: which of the debugger's inferiors or targets
    /// the front end reads (the bridge keeps it and does nothing with it).
    pub targets: Option<String>,
    /// `--ranks`: whose queues and stacks a job's text report shows in
    /// detail (`None`: the ranks the verdict names; `--all`: every rank).
    pub ranks: Option<RankSet>,
}

/// A set of world ranks as given to `--ranks`: `all`, or ranks and
/// inclusive ranges separated by commas (`0-3,7`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RankSet {
    /// Every rank.
    All,
    /// These inclusive ranges.
    Ranges(Vec<(i64, i64)>),
}

impl RankSet {
    /// Parses `all`, or `0-3,7,12`.
    pub fn parse(v: &str) -> Result<RankSet, UsageError> {
        let bad = || {
            UsageError(format!(
                "--ranks takes `all` or world ranks and ranges separated by commas (0-3,7), not '{v}'"
            ))
        };
        if v.trim() == "all" {
            return Ok(RankSet::All);
        }
        let mut out = Vec::new();
        for part in v.split(',').map(str::trim) {
            let (a, b) = match part.split_once('-') {
                Some((a, b)) => (a.trim(), b.trim()),
                None => (part, part),
            };
            let (Ok(a), Ok(b)) = (a.parse::<i64>(), b.parse::<i64>()) else {
                return Err(bad());
            };
            if a < 0 || b < a {
                return Err(bad());
            }
            out.push((a, b));
        }
        Ok(RankSet::Ranges(out))
    }

    /// Whether the set holds `rank`.
    pub fn contains(&self, rank: i64) -> bool {
        match self {
            RankSet::All => true,
            RankSet::Ranges(r) => r.iter().any(|&(a, b)| (a..=b).contains(&rank)),
        }
    }
}

/// A bad argument.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}\n(try --help)")]
pub struct UsageError(pub String);

/// Who acts on an option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handler {
    /// The bridge: the option changes what is read or printed. Every front
    /// end has it.
    Bridge,
    /// The debugger front ends (gdb, lldb), before they call the bridge;
    /// the bridge's parser accepts and keeps the value. The CLI, which
    /// names its processes its own way, does not have it.
    FrontEnd,
}

/// One option of a command: a row of an option table.
#[derive(Debug)]
pub struct OptionSpec<T: 'static> {
    /// The long name, without `--`.
    pub name: &'static str,
    /// Other spellings the parser accepts, without `--`.
    pub aliases: &'static [&'static str],
    /// The name of its value in help texts (`None`: a flag).
    pub value: Option<&'static str>,
    /// Its help: one sentence, lower case, no final full stop, unwrapped.
    pub help: &'static str,
    /// Whether it may be given more than once (every value counts);
    /// otherwise the last one given counts.
    pub repeatable: bool,
    /// Who acts on it.
    pub handler: Handler,
    /// Applies it (a flag gets `""`).
    pub apply: fn(&mut T, &str) -> Result<(), UsageError>,
}

impl<T> OptionSpec<T> {
    /// `--name`.
    pub fn flag(&self) -> String {
        format!("--{}", self.name)
    }

    /// Whether `flag` (with its `--`) is this option's name or an alias.
    pub fn is_spelled(&self, flag: &str) -> bool {
        flag.strip_prefix("--")
            .is_some_and(|f| f == self.name || self.aliases.contains(&f))
    }

    /// `--name VALUE` (or `--name`), as the help lists it.
    pub fn left(&self) -> String {
        match self.value {
            Some(v) => format!("--{} {v}", self.name),
            None => self.flag(),
        }
    }

    /// `[--name VALUE]`, with `...` when repeatable, as a usage line lists it.
    pub fn usage(&self) -> String {
        let dots = if self.repeatable { "..." } else { "" };
        format!("[{}]{dots}", self.left())
    }

    /// The help sentence with what the table says besides: repeatable,
    /// the other spellings.
    pub fn full_help(&self) -> String {
        let mut text = self.help.to_string();
        if self.repeatable {
            text.push_str(" (repeatable)");
        }
        if !self.aliases.is_empty() {
            let others: Vec<String> = self.aliases.iter().map(|a| format!("--{a}")).collect();
            text.push_str(&format!("; also spelled {}", others.join(", ")));
        }
        text
    }
}

/// The name of the option that picks the debugger's inferiors or targets a
/// command reads, one name in gdb and lldb (the bridge's word: each is a
/// `Target`). The other spellings stay accepted.
pub const TARGETS_NAME: &str = "targets";
/// `--targets`' other spellings: gdb's `--inferiors`, lldb's `--target`.
pub const TARGETS_ALIASES: &[&str] = &["inferiors", "target"];
/// `--targets`' value name.
pub const TARGETS_VALUE: &str = "T";
impl<T> OptionSpec<T> {
    /// A flag the bridge acts on (no alias, no value, once).
    pub const fn switch(
        name: &'static str,
        help: &'static str,
        apply: fn(&mut T, &str) -> Result<(), UsageError>,
    ) -> Self {
        OptionSpec {
            name,
            aliases: &[],
            value: None,
            help,
            repeatable: false,
            handler: Handler::Bridge,
            apply,
        }
    }

    /// An option with a value (named `value` in help texts) the bridge acts on.
    pub const fn valued(
        name: &'static str,
        value: &'static str,
        help: &'static str,
        apply: fn(&mut T, &str) -> Result<(), UsageError>,
    ) -> Self {
        OptionSpec {
            value: Some(value),
            ..Self::switch(name, help, apply)
        }
    }

    /// `--targets` (`--inferiors`, `--target`): which of the debugger's
    /// inferiors or targets a command reads; the front end acts on it,
    /// `apply` keeps the value.
    pub const fn targets(apply: fn(&mut T, &str) -> Result<(), UsageError>) -> Self {
        OptionSpec {
            name: TARGETS_NAME,
            aliases: TARGETS_ALIASES,
            value: Some(TARGETS_VALUE),
            help: TARGETS_HELP,
            repeatable: false,
            handler: Handler::FrontEnd,
            apply,
        }
    }

    /// The same option, allowed more than once.
    pub const fn repeatable(self) -> Self {
        OptionSpec {
            repeatable: true,
            ..self
        }
    }
}

/// `--targets`' help line.
pub const TARGETS_HELP: &str = "read these targets (gdb's inferiors, lldb's targets): all, or the numbers \
     `info inferiors` or `target list` shows, as N,M or N-M; default: the current one";

/// The dump options, in the order the help lists them.
pub const DUMP_OPTIONS: &[OptionSpec<DumpOptions>] = &[
    OptionSpec::switch("json", "print the snapshot as JSON (schema mpiq.snapshot/2)", |o, _| {
        o.format = Format::Json;
        Ok(())
    }),
    OptionSpec::switch(
        "all",
        "also list communicators with nothing pending, and in a job's text report every rank",
        |o, _| {
            o.all = true;
            Ok(())
        },
    ),
    OptionSpec::valued(
        "comm",
        "NAME|ID",
        "only the communicator with this name or id",
        |o, v| {
            o.comm = Some(v.to_string());
            Ok(())
        },
    ),
    OptionSpec::valued(
        "queue",
        "Q",
        "only queue Q: sends, receives or unexpected, or several comma-separated",
        apply_queue,
    )
    .repeatable(),
    OptionSpec::valued(
        "ranks",
        "LIST",
        "in a job's text report, show the queues and stacks of these ranks (0-3,7, or all); by default \
         only of the ranks the verdict names (the JSON has every rank)",
        |o, v| {
            o.ranks = Some(RankSet::parse(v)?);
            Ok(())
        },
    ),
    OptionSpec::valued(
        "dll",
        "FILE",
        "use this debug library instead of the one the target names",
        |o, v| {
            o.dll = Some(PathBuf::from(v));
            Ok(())
        },
    ),
    OptionSpec::switch(
        "stats",
        "add counters (library reads, host reads, time) per process",
        |o, _| {
            o.stats = true;
            Ok(())
        },
    ),
    OptionSpec::switch(
        "stacks",
        "show every frame of every thread (default: where each process is in MPI, in one line)",
        |o, _| {
            o.stacks = true;
            Ok(())
        },
    ),
    OptionSpec::switch(
        "no-python",
        "do not read the Python frames of CPython processes (read by default, by py-spy, into their stacks)",
        |o, _| {
            o.no_python = true;
            Ok(())
        },
    ),
    OptionSpec::switch(
        "no-stacks",
        "do not read call stacks (read by default: where each process is, merged stacks)",
        |o, _| {
            o.no_stacks = true;
            Ok(())
        },
    ),
    OptionSpec::switch(
        "folded",
        "print the merged call stacks as folded lines for flamegraph.pl or inferno (frames outermost \
         first joined by ;, a space, then the number of ranks), instead of the queues",
        |o, _| {
            o.format = Format::Folded;
            Ok(())
        },
    ),
    OptionSpec::valued(
        "record",
        "FILE",
        "save everything the debug library read, for `mpiq replay FILE` (of a job: its last sample)",
        |o, v| {
            o.record = Some(PathBuf::from(v));
            Ok(())
        },
    ),
    OptionSpec::switch(
        "in-process",
        "run the debug library inside this process (default: in the helper mpiq-dllhost, so that \
               a crash cannot take this one down)",
        |o, _| {
            o.in_process = true;
            Ok(())
        },
    ),
    OptionSpec::valued(
        "timeout",
        "SECS",
        "give up on a process when the debug library is silent this long (default 10)",
        apply_timeout,
    ),
    OptionSpec::targets(|o, v| {
        o.targets = Some(v.to_string());
        Ok(())
    }),
];

fn apply_queue(o: &mut DumpOptions, v: &str) -> Result<(), UsageError> {
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
        if !o.queues.contains(&q) {
            o.queues.push(q);
        }
    }
    Ok(())
}

fn apply_timeout(o: &mut DumpOptions, v: &str) -> Result<(), UsageError> {
    match v.parse::<f64>() {
        Ok(t) if t > 0.0 && t < 1e9 => {
            o.timeout_ms = Some((t * 1000.0).ceil() as u64);
            Ok(())
        }
        _ => Err(UsageError(format!(
            "--timeout needs a positive number of seconds, not '{v}'"
        ))),
    }
}

/// What the queue command does, between its usage line and its options.
pub const DESCRIPTION: &str = "\
Show the MPI message queues of the process: pending sends, posted receives
and unexpected messages of every communicator, read through the MPI
library's own message queue debug library (MQD).
";

/// The first word of [`HELP`]: its first paragraph is the usage line
/// without the command's name (gdb reads it from there).
pub const ARGUMENTS_PREFIX: &str = "Arguments: ";

/// Help text for the arguments [`DumpOptions::parse`] accepts: the usage
/// line (a paragraph starting with [`ARGUMENTS_PREFIX`]), [`DESCRIPTION`],
/// and one line per option of [`DUMP_OPTIONS`].
pub static HELP: LazyLock<String> = LazyLock::new(|| {
    format!(
        "{}\n\n{DESCRIPTION}\nOptions:\n{}",
        wrap_usage(ARGUMENTS_PREFIX, DUMP_OPTIONS),
        options_help(DUMP_OPTIONS)
    )
});

/// Where help lines wrap.
const WIDTH: usize = 79;

/// The usage line of a table's options: `[--json] [--queue Q]... ...`.
pub fn synopsis<T>(table: &[OptionSpec<T>]) -> String {
    table.iter().map(OptionSpec::usage).collect::<Vec<_>>().join(" ")
}

/// `prefix` and the table's usage items, wrapped between items and
/// indented under the first one.
pub fn wrap_usage<T>(prefix: &str, table: &[OptionSpec<T>]) -> String {
    let mut out = String::new();
    let mut line = prefix.trim_end().to_string();
    for item in table.iter().map(OptionSpec::usage) {
        if line.len() > prefix.len() && line.len() + 1 + item.len() > WIDTH {
            out.push_str(&line);
            out.push('\n');
            line = " ".repeat(prefix.len() - 1);
        }
        line.push(' ');
        line.push_str(&item);
    }
    out.push_str(&line);
    out
}

/// One line per option (wrapped, indented by two, help in one column).
pub fn options_help<T>(table: &[OptionSpec<T>]) -> String {
    let column = table.iter().map(|s| s.left().len()).max().unwrap_or(0).max(12) + 2;
    let mut out = String::new();
    for spec in table {
        let line = format!("  {:<column$}{}", spec.left(), spec.full_help());
        out.push_str(&wrap(&line, column + 2));
        out.push('\n');
    }
    out
}

/// `text` wrapped at [`WIDTH`] columns at spaces, lines after the first
/// indented by `indent`.
pub fn wrap(text: &str, indent: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for (i, word) in text.split(' ').enumerate() {
        if i > 0 {
            if !word.is_empty() && !line.trim().is_empty() && line.len() + 1 + word.len() > WIDTH {
                out.push_str(line.trim_end());
                out.push('\n');
                line = " ".repeat(indent);
                line.push_str(word);
                continue;
            }
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push_str(line.trim_end());
    out
}

/// Parses already split arguments with an option table: `--name VALUE`,
/// `--name=VALUE`, `--name` for a flag; an empty argument is skipped.
pub fn parse_with<T: Default, S: AsRef<str>>(table: &[OptionSpec<T>], args: &[S]) -> Result<T, UsageError> {
    let mut out = T::default();
    let mut it = args.iter().map(|s| s.as_ref());
    while let Some(arg) = it.next() {
        if arg.is_empty() {
            continue;
        }
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v)),
            _ => (arg, None),
        };
        let Some(spec) = table.iter().find(|s| s.is_spelled(flag)) else {
            return Err(UsageError(format!("unknown argument '{flag}'")));
        };
        let value = match (spec.value, inline) {
            (None, None) => "",
            (None, Some(_)) => return Err(UsageError(format!("{flag} takes no value"))),
            (Some(_), Some(v)) => v,
            (Some(_), None) => it.next().unwrap_or(""),
        };
        if spec.value.is_some() && value.is_empty() {
            return Err(UsageError(format!("{flag} needs a value")));
        }
        (spec.apply)(&mut out, value)?;
    }
    Ok(out)
}

impl DumpOptions {
    /// Parses already split arguments (the options of [`DUMP_OPTIONS`]).
    pub fn parse<S: AsRef<str>>(args: &[S]) -> Result<Self, UsageError> {
        parse_with(DUMP_OPTIONS, args)?.checked()
    }

    /// The options as given, if they go together: what every parser of
    /// them (the words of gdb and lldb, the CLI's clap arguments) checks
    /// once all are applied.
    pub fn checked(self) -> Result<Self, UsageError> {
        if self.format == Format::Folded && self.no_stacks {
            return Err(UsageError(
                "--folded prints the call stacks, which --no-stacks does not read".into(),
            ));
        }
        Ok(self)
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

    #[test]
    fn the_table_makes_the_help_and_the_usage_line() {
        let help: &str = &HELP;
        let (usage, rest) = help.split_once("\n\n").unwrap();
        assert!(usage.starts_with(ARGUMENTS_PREFIX), "{help}");
        for spec in DUMP_OPTIONS {
            assert!(
                usage.contains(&spec.usage()),
                "{} not in the usage line:\n{help}",
                spec.name
            );
            assert!(
                rest.contains(&format!("\n  {} ", spec.left())),
                "{} has no help line:\n{help}",
                spec.name
            );
        }
        assert!(usage.contains("[--queue Q]... "), "{usage}");
        let flat = rest.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(flat.contains("also spelled --inferiors, --target"), "{help}");
        for line in help.lines() {
            assert!(line.len() <= WIDTH, "too long: {line}");
        }
        // The option lines keep one column for their help.
        assert!(rest.contains("\n  --json          print the snapshot"), "{help}");
        assert!(rest.contains("\n  --targets T     read these targets"), "{help}");
    }

    #[test]
    fn targets_and_its_other_spellings_are_kept_for_the_front_end() {
        for line in ["--targets 1,3", "--inferiors=1,3", "--target 1,3"] {
            let o = DumpOptions::parse_line(line).unwrap();
            assert_eq!(o.targets.as_deref(), Some("1,3"), "{line}");
            assert_eq!(
                o,
                DumpOptions {
                    targets: o.targets.clone(),
                    ..DumpOptions::default()
                }
            );
        }
        assert!(DumpOptions::parse_line("--inferiors")
            .unwrap_err()
            .0
            .contains("--inferiors needs a value"));
    }

    #[test]
    fn flags_take_no_value_and_values_stay_as_given() {
        assert!(DumpOptions::parse_line("--all=yes")
            .unwrap_err()
            .0
            .contains("takes no value"));
        let o = DumpOptions::parse_line("--comm --all --timeout=0.001 --record r.rec --in-process --stats").unwrap();
        assert_eq!(o.comm.as_deref(), Some("--all"));
        assert!(!o.all && o.in_process && o.stats);
        assert_eq!(o.timeout_ms, Some(1));
        assert_eq!(o.record, Some(PathBuf::from("r.rec")));
        assert!(DumpOptions::parse_line("--timeout -1").is_err());
        assert!(DumpOptions::parse(&["", "--all", ""]).unwrap().all);
        // Stacks are read by default; --stacks shows every frame.
        let [no, every] = ["--no-stacks", "--stacks"].map(|l| DumpOptions::parse_line(l).unwrap());
        assert!(!DumpOptions::default().no_stacks && no.no_stacks && !no.stacks && every.stacks && !every.no_stacks);
    }

    #[test]
    fn wrapping_keeps_the_first_line_and_indents_the_rest() {
        let long = format!("  --x  {}", "word ".repeat(30));
        let w = wrap(&long, 7);
        let lines: Vec<&str> = w.lines().collect();
        assert!(lines[0].starts_with("  --x  word"));
        assert!(lines[1..].iter().all(|l| l.starts_with("       word")), "{w}");
        assert!(lines.iter().all(|l| l.len() <= WIDTH));
        assert_eq!(wrap("a  b", 0), "a  b");
    }
}
