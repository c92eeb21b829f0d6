//! The command line (clap).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use mpiq::{DumpOptions, UsageError};

const EXAMPLES: &str = "\
Examples:
  mpiq queues --pid 4242                   one rank of a hung job
  mpiq queues --pid 4242 --pid 4243 --all  two ranks, empty communicators too
  mpiq job --starter $(pgrep -n mpirun)    every rank the starter launched,
                                           and whether they are deadlocked
  mpiq job --starter 4200 --json > q.json  the same as JSON (mpiq.snapshot/1
                                           plus an \"analysis\" object)
  mpiq job --starter 4200 --svg waits.svg  also draw the wait-for graph
  mpiq core core.4242 core.4243            core files written by gdb's gcore
  mpiq queues --pid 4242 --queue receives --comm MPI_COMM_WORLD

Processes are stopped with ptrace while they are read and left running (or
stopped, if they were) afterwards, also on errors and Ctrl-C. This needs the
processes' user id and /proc/sys/kernel/yama/ptrace_scope = 0, or root /
CAP_SYS_PTRACE.

Deadlock analysis: `job`, and `queues`, `core` and `replay` with two or more
processes, match the ranks' pending operations against each other, build a
wait-for graph over world ranks and say whether the ranks wait on each other
for good (a cycle of specific-source waits, a knot of ANY_SOURCE waits).
`job` takes two samples --interval ms apart (the ranks run in between), so a
slow but progressing job is not called deadlocked. The verdict is \"unknown\",
never \"no deadlock\", when a rank could not be read.

Exit status:
  0    success; with an analysis: no deadlock found
  1    error (nothing could be read; --svg could not be written)
  2    usage error
  3    a deadlock was found (the output names its cycle)
  4    the analysis is inconclusive (verdict \"unknown\": a rank could not be
       read, or a wait depends on something the queues do not tell)
  128+N  killed by signal N, after releasing every process";

/// Show the MPI message queues of hung MPI programs.
///
/// mpiq loads the MPI library's message queue debug library (Open MPI's
/// libompi_dbg_msgq.so, MPICH's libtvmpich.so) and shows, per communicator,
/// the pending sends, posted receives and unexpected messages of each
/// process: live processes, core files, or every rank of a job.
#[derive(Debug, Parser)]
#[command(name = "mpiq", version, after_long_help = EXAMPLES)]
pub struct Cli {
    /// What to read.
    #[command(subcommand)]
    pub command: Command,
    /// Print timings and warnings (objects that could not be read) to stderr.
    #[arg(short, long, global = true)]
    pub verbose: bool,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show the message queues of running processes.
    #[command(after_help = "Example: mpiq queues --pid 4242 --pid 4243")]
    Queues {
        /// Process id of an MPI rank (repeatable, or comma-separated).
        #[arg(long = "pid", value_name = "PID", required = true, value_delimiter = ',')]
        pids: Vec<i32>,
        /// Dump options.
        #[command(flatten)]
        dump: DumpArgs,
    },
    /// Show the message queues recorded in core files (gdb's gcore).
    #[command(after_help = "Example: mpiq core core.4242 core.4243 --exe ./ring")]
    Core {
        /// Core files, one per rank.
        #[arg(value_name = "FILE", required = true)]
        files: Vec<PathBuf>,
        /// The executable, when it is no longer where the core says.
        #[arg(long, value_name = "FILE")]
        exe: Option<PathBuf>,
        /// Dump options.
        #[command(flatten)]
        dump: DumpArgs,
    },
    /// Show the message queues of every rank of a job, found through its
    /// starter's MPIR_proctable (mpirun, mpiexec) or MPI2DD_info proctable,
    /// and whether the ranks are deadlocked.
    #[command(after_help = "Example: mpiq job --starter $(pgrep -n mpirun)")]
    Job {
        /// Process id of the starter (mpirun / mpiexec).
        #[arg(long, value_name = "PID")]
        starter: i32,
        /// Samples to take: 2 (default) compares two snapshots taken
        /// --interval apart, so that a slow but progressing job is not
        /// reported as deadlocked; 1 decides on a single snapshot.
        #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=2))]
        samples: u8,
        /// Milliseconds the ranks run between the two samples.
        #[arg(long, value_name = "MS", default_value_t = 500, value_parser = clap::value_parser!(u64).range(0..=3_600_000))]
        interval: u64,
        /// Dump options.
        #[command(flatten)]
        dump: DumpArgs,
    },
    /// Show the message queues again from a recording (`--record FILE`),
    /// with no process: the same debug library reproduces the same dump.
    #[command(after_help = "Example: mpiq queues --pid 4242 --record q.rec && mpiq replay q.rec --json")]
    Replay {
        /// A recording written by `--record`.
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// Dump options.
        #[command(flatten)]
        dump: DumpArgs,
    },
    /// Answer the symbol and type questions a debug library asks, the way
    /// mpiq answers them (for checking mpiq against gdb).
    #[command(after_help = "\
Example: mpiq lookup --pid 4242 --string MPIR_dll_name --sizeof ompi_communicator_t \\
           --offsetof ompi_communicator_t.c_name
Output: one line per question: KIND NAME VALUE, where VALUE is - when not found.")]
    Lookup {
        /// A live process (stopped while it is read).
        #[arg(long, value_name = "PID", conflicts_with = "core", required_unless_present = "core")]
        pid: Option<i32>,
        /// A core file.
        #[arg(long, value_name = "FILE")]
        core: Option<PathBuf>,
        /// Runtime address of a data symbol.
        #[arg(long, value_name = "NAME")]
        symbol: Vec<String>,
        /// Runtime address of a function.
        #[arg(long, value_name = "NAME")]
        function: Vec<String>,
        /// The C string a `char *` or `char[]` data symbol holds (a `char[]`
        /// when the symbol's type says so, else a pointer is followed).
        #[arg(long, value_name = "NAME")]
        string: Vec<String>,
        /// sizeof a type (`X`, `struct X`, `union X`, a typedef).
        #[arg(long, value_name = "TYPE")]
        sizeof: Vec<String>,
        /// Offset of a field: TYPE.FIELD.
        #[arg(long, value_name = "TYPE.FIELD")]
        offsetof: Vec<String>,
        /// Print the answers as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// What to print on stdout.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// The queues of every process, then the deadlock analysis.
    #[default]
    Text,
    /// The snapshot as JSON (schema mpiq.snapshot/1) with an "analysis" object.
    Json,
    /// The wait-for graph for graphviz.
    Dot,
    /// The edges of the wait-for graph, one per line.
    Csv,
}

/// The options every dump command takes (the bridge's `DumpOptions`, and
/// the output of the analysis).
#[derive(Debug, Clone, Default, Args)]
pub struct DumpArgs {
    /// Output format: text, json (mpiq.snapshot/1 plus "analysis"), dot
    /// (the wait-for graph for graphviz) or csv (its edges).
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub format: Option<OutputFormat>,
    /// The same as --format json.
    #[arg(long)]
    pub json: bool,
    /// Also render the wait-for graph as SVG into FILE (needs graphviz's
    /// `dot`).
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Show the queues only, without the cross-rank analysis (the exit
    /// status is then 0 on success).
    #[arg(long, conflicts_with = "svg")]
    pub no_analysis: bool,
    /// Also list communicators with nothing pending.
    #[arg(long)]
    pub all: bool,
    /// Only the communicator with this name or id.
    #[arg(long, value_name = "NAME|ID")]
    pub comm: Option<String>,
    /// Only queue Q: sends, receives or unexpected (repeatable, or comma-separated).
    #[arg(long, value_name = "Q")]
    pub queue: Vec<String>,
    /// Use this debug library instead of the one the target names.
    #[arg(long, value_name = "FILE")]
    pub dll: Option<PathBuf>,
    /// Add counters per process (library reads, host reads, time).
    #[arg(long)]
    pub stats: bool,
    /// Save everything the debug library read, for `mpiq replay FILE`
    /// (`job`: the last sample).
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Run the debug library inside mpiq instead of the helper
    /// mpiq-dllhost (which keeps a crashing library from taking mpiq down).
    #[arg(long)]
    pub in_process: bool,
    /// Give up on a process when the debug library is silent this long
    /// (seconds; default 10).
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<String>,
}

impl DumpArgs {
    /// The output format (`--json` is `--format json`).
    pub fn output_format(&self) -> Result<OutputFormat, UsageError> {
        let f = match (self.format, self.json) {
            (Some(f), true) if f != OutputFormat::Json => {
                return Err(UsageError(format!(
                    "--json and --format {} disagree",
                    f.to_possible_value()
                        .map_or_else(String::new, |v| v.get_name().to_string())
                )))
            }
            (Some(f), _) => f,
            (None, true) => OutputFormat::Json,
            (None, false) => OutputFormat::Text,
        };
        if self.no_analysis && matches!(f, OutputFormat::Dot | OutputFormat::Csv) {
            return Err(UsageError(
                "--no-analysis leaves no wait-for graph for --format dot or csv".into(),
            ));
        }
        Ok(f)
    }

    /// The bridge's options (parsed by the bridge, so every front end
    /// accepts the same values).
    pub fn to_options(&self) -> Result<DumpOptions, UsageError> {
        let mut args: Vec<String> = Vec::new();
        if self.output_format()? == OutputFormat::Json {
            args.push("--json".into());
        }
        if self.all {
            args.push("--all".into());
        }
        if self.stats {
            args.push("--stats".into());
        }
        if let Some(c) = &self.comm {
            args.push(format!("--comm={c}"));
        }
        for q in &self.queue {
            args.push(format!("--queue={q}"));
        }
        if let Some(d) = &self.dll {
            args.push(format!("--dll={}", d.display()));
        }
        if let Some(r) = &self.record {
            args.push(format!("--record={}", r.display()));
        }
        if self.in_process {
            args.push("--in-process".into());
        }
        if let Some(t) = &self.timeout {
            args.push(format!("--timeout={t}"));
        }
        DumpOptions::parse(&args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use mpiq::Format;

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn dump_args_map_onto_options() {
        let cli = Cli::try_parse_from([
            "mpiq",
            "queues",
            "--pid",
            "1,2",
            "--pid",
            "3",
            "--json",
            "--queue",
            "sends",
            "--queue",
            "recv",
            "--comm",
            "my comm",
            "--dll",
            "/x.so",
            "--timeout",
            "2.5",
            "--in-process",
        ])
        .unwrap();
        let Command::Queues { pids, dump } = cli.command else {
            panic!("not queues")
        };
        assert_eq!(pids, [1, 2, 3]);
        let o = dump.to_options().unwrap();
        assert_eq!(o.format, mpiq::Format::Json);
        assert_eq!(o.queues.len(), 2);
        assert_eq!(o.comm.as_deref(), Some("my comm"));
        assert_eq!(o.timeout_ms, Some(2500));
        assert!(o.in_process);
        assert!(DumpArgs {
            timeout: Some("soon".into()),
            ..DumpArgs::default()
        }
        .to_options()
        .is_err());
        assert!(DumpArgs {
            queue: vec!["bogus".into()],
            ..DumpArgs::default()
        }
        .to_options()
        .is_err());
    }

    #[test]
    fn formats() {
        let parse = |args: &[&str]| {
            let mut all = vec!["mpiq", "job", "--starter", "1"];
            all.extend_from_slice(args);
            let cli = Cli::try_parse_from(all)?;
            let Command::Job {
                dump,
                samples,
                interval,
                ..
            } = cli.command
            else {
                panic!("not job")
            };
            Ok::<_, clap::Error>((dump, samples, interval))
        };
        let (d, samples, interval) = parse(&[]).unwrap();
        assert_eq!(d.output_format().unwrap(), OutputFormat::Text);
        assert_eq!((samples, interval), (2, 500));
        let (d, ..) = parse(&["--json"]).unwrap();
        assert_eq!(d.output_format().unwrap(), OutputFormat::Json);
        assert_eq!(d.to_options().unwrap().format, Format::Json);
        let (d, ..) = parse(&["--format", "json", "--json"]).unwrap();
        assert_eq!(d.output_format().unwrap(), OutputFormat::Json);
        let (d, ..) = parse(&["--format", "dot"]).unwrap();
        assert_eq!(d.output_format().unwrap(), OutputFormat::Dot);
        assert_eq!(d.to_options().unwrap().format, Format::Text);
        let (d, ..) = parse(&["--format", "csv", "--json"]).unwrap();
        assert!(d.output_format().is_err());
        let (d, ..) = parse(&["--format", "csv", "--no-analysis"]).unwrap();
        assert!(d.output_format().is_err());
        assert!(parse(&["--format", "xml"]).is_err());
        assert!(parse(&["--samples", "3"]).is_err());
        assert!(parse(&["--svg", "x.svg", "--no-analysis"]).is_err());
        let (_, samples, interval) = parse(&["--samples", "1", "--interval", "20"]).unwrap();
        assert_eq!((samples, interval), (1, 20));
    }

    #[test]
    fn usage_errors() {
        assert!(Cli::try_parse_from(["mpiq", "queues"]).is_err());
        assert!(Cli::try_parse_from(["mpiq", "lookup", "--pid", "1", "--core", "x"]).is_err());
        assert!(Cli::try_parse_from(["mpiq", "core"]).is_err());
    }
}
