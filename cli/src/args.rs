//! The command line (clap).

use std::path::PathBuf;

use clap::{Arg, ArgAction, ArgMatches, Args, FromArgMatches, Parser, Subcommand, ValueEnum};
use mpiq::lookup::{Lookup, LOOKUP_OPTIONS};
use mpiq::options::{Handler, OptionSpec, DUMP_OPTIONS};
use mpiq::{DumpOptions, Format, UsageError};

mod run_args;
mod watch_args;
use run_args::RUN_HELP;
pub use run_args::{parse_duration, parse_positive_duration, RunArgs, DEFAULT_DETECT_EVERY, STOPPED_SHARE_INVERSE};
pub use watch_args::WatchArgs;
use watch_args::WATCH_HELP;

const EXAMPLES: &str = "\
Examples:
  mpiq queues --pid 4242                   one rank of a hung job
  mpiq queues --pid 4242 --pid 4243 --all  two ranks, empty communicators too
  mpiq job --starter $(pgrep -n mpirun)    every rank the starter launched,
                                           and whether they are deadlocked
  mpiq job --starter 4200 --json > q.json  the same as JSON (mpiq.snapshot/2
                                           plus \"analysis\" and \"stack_tree\")
  mpiq job --starter 4200 --stacks         every frame of every thread, the
                                           ranks' stacks merged into a tree
  mpiq job --starter 4200 --svg waits.svg  also draw the wait-for graph
  mpiq job --starter 4200 --flamegraph f.svg  also draw the merged stacks as a
                                           flame graph (--format folded: its input)
  mpiq core core.4242 core.4243            core files written by gdb's gcore
  mpiq queues --pid 4242 --queue receives --comm MPI_COMM_WORLD
  mpiq stacks --pid 4242                   every thread's call stack, like gdb's bt
  mpiq watch --starter 4200                live view: where every rank is, sample
                                           after sample (q quits; --help: keys)
  mpiq run --timeout 10m --report mpiq-report -- mpirun -n 4 ./test
                                           run a job; if it hangs, report on it
                                           (stderr, mpiq-report/) and end it

Call stacks are read by default: each process shows where it is in MPI in
one line (\"where: in MPI_Recv, called from exchange (solver.c:35)\"), and a
job (or two or more processes) shows every rank's stacks merged, STAT-style,
one line per group of ranks at the same place (\"ranks 1-3: main > exchange >
MPI_Recv (solver.c:35)\"); --stacks shows every frame, --no-stacks reads none.

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
  128+N  killed by signal N, after releasing every process
`mpiq run` passes the job's exit status through and has codes of its own
(124: the job hung and was ended): see `mpiq run --help`.";

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
    ///
    /// A starter with neither but a PMIx server (Open MPI 5's mpirun, which
    /// is PRRTE's prterun) is asked for its proc table through the PMIx tool
    /// interface: its rendezvous file is looked for in the starter's TMPDIR,
    /// or in $MPIQ_PMIX_TMPDIR; $MPIQ_PMIX_TIMEOUT_MS (10000) bounds the
    /// wait. Failing that, the MPI processes started under the starter on
    /// this machine are its ranks.
    ///
    /// Ranks on other nodes are read there: one collector per node (`mpiq
    /// collect`), started through the job's own launcher: srun into the
    /// job's allocation when the starter runs under Slurm (srun itself, or
    /// mpirun inside an allocation), else ssh with your configuration (the
    /// same mpiq path on every node, or $MPIQ_COLLECTOR). A node that does
    /// not answer within --node-timeout makes its ranks (and the verdict)
    /// unknown.
    #[command(
        after_help = "Examples:\n  mpiq job --starter $(pgrep -n mpirun)\n  mpiq job --starter $(pgrep -n srun)\n  mpiq job --slurm 1234        (the job's only step; 1234.0 names one)"
    )]
    Job {
        /// Process id of the starter (mpirun, mpiexec, srun).
        #[arg(
            long,
            value_name = "PID",
            required_unless_present = "slurm",
            conflicts_with = "slurm"
        )]
        starter: Option<i32>,
        /// A Slurm job step instead of a starter: JOB (its only running
        /// step) or JOB.STEP; its ranks are found on each of its nodes.
        #[arg(long, value_name = "JOB[.STEP]")]
        slurm: Option<String>,
        /// Seconds each other node's collector may take before its ranks
        /// count as unreadable.
        #[arg(long, value_name = "SECS", default_value_t = DEFAULT_NODE_TIMEOUT_SECS, value_parser = clap::value_parser!(u64).range(1..=3600))]
        node_timeout: u64,
        /// Samples to take: 2 (default) compares two snapshots taken
        /// --interval apart, so that a slow but progressing job is not
        /// reported as deadlocked (when only a move between them keeps the
        /// verdict from a deadlock, up to 2 more are taken: a job that hung
        /// just after the first is not progressing); 1 decides on a single
        /// snapshot.
        #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=2))]
        samples: u8,
        /// Milliseconds the ranks run between the two samples.
        #[arg(long, value_name = "MS", default_value_t = DEFAULT_INTERVAL_MS, value_parser = clap::value_parser!(u64).range(0..=3_600_000))]
        interval: u64,
        /// How other nodes' collectors send their ranks: `compact` (what the
        /// analysis and the merged stacks read, then only the ranks shown
        /// in detail whole; the default) or `whole` (every rank whole; the
        /// default with --json, --all and --no-analysis, which show them
        /// all). The verdict is the same either way.
        #[arg(long, value_name = "HOW")]
        collect: Option<CollectMode>,
        /// Dump options.
        #[command(flatten)]
        dump: DumpArgs,
    },
    /// Watch a job live in the terminal: every rank's place in MPI, sample
    /// after sample, and the verdict.
    ///
    /// Every --interval (or at once on r or space) one sample of every rank
    /// is taken exactly as `mpiq job --starter PID --samples 1` takes it
    /// (the ranks stopped, read and released at once); the screen shows
    /// where each rank is, a history of its states (one letter per sample)
    /// and the verdict of the deadlock analysis. Enter shows a rank's full
    /// stacks and queues. --record keeps the session; --replay shows it
    /// again.
    #[command(
        after_help = "Example: mpiq watch --starter $(pgrep -n mpirun) --record session.rec   (--help: the screen, the keys, the letters)",
        after_long_help = WATCH_HELP
    )]
    Watch(WatchArgs),
    /// The collector `mpiq job` starts on each node of a job across nodes
    /// (through srun or ssh): reads the ranks of its node as `mpiq job`
    /// does and sends them back on stdout. Not meant to be run by hand.
    #[command(hide = true)]
    Collect {
        /// This node's name in the table on stdin (default:
        /// $SLURMD_NODENAME, else the host name).
        #[arg(long, value_name = "NAME")]
        node: Option<String>,
        /// Find the processes of this Slurm step on this node (by their
        /// environment) instead of reading a table.
        #[arg(long, value_name = "JOB.STEP")]
        slurm_step: Option<String>,
        /// Samples to take.
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=2))]
        samples: u8,
        /// Milliseconds between them.
        #[arg(long, default_value_t = 500)]
        interval: u64,
        /// Milliseconds after which it stops (releasing every rank).
        #[arg(long, default_value_t = 60_000)]
        deadline: u64,
        /// Send compact records, keep the last sample, and send the ranks
        /// named on stdin (`detail RANK...`, `detail all`, `end`) whole.
        #[arg(long)]
        compact: bool,
        /// The bridge's dump options, as the front end parsed them: their
        /// JSON (never words to parse again).
        #[arg(long = "dump-options", value_name = "JSON")]
        dump_options: Option<String>,
    },
    /// Run an MPI job and, if it hangs, report on it as `mpiq job` does and
    /// end it (for CI: a hung MPI test explains itself).
    ///
    /// The job is srun, mpirun, mpiexec, or a command that starts one. It
    /// hangs when it is still running after --timeout or, with --detect, as
    /// soon as a check finds it deadlocked. With -v, mpiq also says what
    /// each check found.
    #[command(after_long_help = RUN_HELP)]
    Run(RunArgs),
    /// The watchdog of `mpiq run` (started by it; not for use by hand).
    #[command(name = "run-watchdog", hide = true)]
    RunWatchdog {
        /// The job's command (the leader of its process group).
        #[arg(long, value_name = "PID")]
        job: i32,
        /// Its start time (clock ticks after boot, /proc/PID/stat).
        #[arg(long, value_name = "TICKS")]
        start: u64,
        /// Milliseconds between SIGTERM and SIGKILL.
        #[arg(long, value_name = "MS")]
        grace_ms: u64,
    },
    /// The helper `mpiq job` starts to ask a launcher's PMIx server for its
    /// job's proc table (Open MPI 5's prterun): loads the launcher's own
    /// libpmix, prints one line of JSON. Not meant to be run by hand.
    #[command(name = "pmix-proctable", hide = true)]
    PmixProctable {
        /// The launcher.
        #[arg(long, value_name = "PID")]
        pid: i32,
        /// Its libpmix (from its maps).
        #[arg(long, value_name = "FILE")]
        library: PathBuf,
        /// Its TMPDIR.
        #[arg(long, value_name = "DIR")]
        tmpdir: PathBuf,
        /// Its rendezvous file (`pmix.HOST.tool.PID`).
        #[arg(long, value_name = "FILE")]
        rendezvous: PathBuf,
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
    /// Show the call stack of every thread of running processes, like gdb's
    /// `thread apply all bt` (unwound through the objects' CFI, frame
    /// pointers where there is none; at most MPIQ_MAX_FRAMES frames, 256 by
    /// default). The processes are stopped while read and left running.
    #[command(after_help = "\
Example: mpiq stacks --pid 4242        mpiq stacks --core core.4242 --exe ./ring
Output: per thread, one line per frame, innermost first:
  #N 0xPC in FUNCTION (FILE:LINE) from OBJECT
FUNCTION is OBJECT+0xOFFSET when no symbol covers the pc; a stack that ends
early says why on its last line.")]
    Stacks {
        /// Process id (repeatable, or comma-separated).
        #[arg(
            long = "pid",
            value_name = "PID",
            value_delimiter = ',',
            required_unless_present = "cores"
        )]
        pids: Vec<i32>,
        /// A core file instead (gdb's gcore or the kernel's; repeatable).
        #[arg(long = "core", value_name = "FILE", id = "cores")]
        cores: Vec<PathBuf>,
        /// The executable of the core files, when it is no longer where
        /// they say.
        #[arg(long, value_name = "FILE", requires = "cores")]
        exe: Option<PathBuf>,
        /// JSON instead of text: [{pid, threads: [{tid, name, frames:
        /// [{pc, function, object, offset, file, line, inlined, how}], note}]}].
        #[arg(long)]
        json: bool,
    },
    /// Print the lines that load mpiq into gdb or lldb at every start, for
    /// this installation: append them to ~/.gdbinit or ~/.lldbinit; or how
    /// to run jobs with mpiq's flight recorder.
    #[command(after_help = "\
Example: mpiq setup gdb >> ~/.gdbinit      mpiq setup lldb >> ~/.lldbinit
Then `info mpi-queues` (gdb) and `mpi queues` (lldb) work in every session.
mpiq setup recorder: how to preload the flight recorder into jobs started
without `mpiq run`, which preloads it by itself (its last line, an
`export LD_PRELOAD=...`, can go into a job script).
Exit status 1, with what is missing, when this installation lacks the part.")]
    Setup {
        /// The debugger, or the recorder.
        #[arg(value_enum)]
        debugger: SetupDebugger,
    },
    /// Answer the questions a debug library asks (symbols, types, fields,
    /// strings, memory), the way mpiq answers them (for checking mpiq
    /// against gdb). The same questions and output as lldb's `mpi lookup`.
    #[command(after_help = "\
Example: mpiq lookup --pid 4242 --string MPIR_dll_name --sizeof ompi_communicator_t \\
           --offsetof ompi_communicator_t.c_name
Output: one line per answer: KIND NAME VALUE, where VALUE is - when there is none,
by kind in the order of the options above.")]
    Lookup {
        /// A live process (stopped while it is read).
        #[arg(long, value_name = "PID", conflicts_with = "core", required_unless_present = "core")]
        pid: Option<i32>,
        /// A core file.
        #[arg(long, value_name = "FILE")]
        core: Option<PathBuf>,
        /// The questions (the bridge's lookup options).
        #[command(flatten)]
        questions: LookupArgs,
    },
}

/// The milliseconds `mpiq job` lets the ranks run between its two samples
/// (`--interval`), which `mpiq run` uses too.
pub const DEFAULT_INTERVAL_MS: u64 = 500;

/// `mpiq job --node-timeout`'s default: seconds another node's collector
/// may take.
pub const DEFAULT_NODE_TIMEOUT_SECS: u64 = 30;

/// The debugger `mpiq setup` prints the start-up lines of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SetupDebugger {
    /// gdb: `source` of the gdb script (`info mpi-queues`).
    Gdb,
    /// lldb: `plugin load` of the plugin (`mpi queues`).
    Lldb,
    /// The flight recorder: `LD_PRELOAD` of its library for your jobs.
    Recorder,
}

/// How other nodes' collectors send a job's ranks (`mpiq job --collect`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CollectMode {
    /// What the analysis reads; the ranks shown in detail whole.
    Compact,
    /// Every rank whole.
    Whole,
    /// Compact, then every rank of every sample whole as well, both
    /// analysed: an error unless the analyses are the same (a self-check).
    #[value(hide = true)]
    Check,
}

/// What to print on stdout.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// The queues of every process, then the deadlock analysis.
    #[default]
    Text,
    /// The snapshot as JSON (schema mpiq.snapshot/2) with an "analysis" object.
    Json,
    /// The wait-for graph for graphviz.
    Dot,
    /// The edges of the wait-for graph, one per line.
    Csv,
    /// The merged call stacks as folded lines (flamegraph.pl, inferno).
    Folded,
}

/// The help heading of the options every front end has.
const SHARED_HEADING: &str = "Options of every front end (also gdb's info mpi-queues, lldb's mpi queues)";
/// The help heading of `mpiq lookup`'s questions.
const LOOKUP_HEADING: &str = "Questions (the same in lldb's mpi lookup)";
/// The help heading of the CLI's own output options.
const OUTPUT_HEADING: &str = "Output options (mpiq only)";

/// The options every dump command takes: the bridge's dump options, made
/// from its table ([`mpiq::options::DUMP_OPTIONS`]: the same names, values
/// and help lines as in gdb and lldb) and parsed by the bridge; and the
/// CLI's own output options, which only it has: `--format
/// text|json|dot|csv`, `--svg FILE` and `--no-analysis` (the analysis of
/// several ranks and its wait-for graph).
#[derive(Debug, Clone)]
pub struct DumpArgs {
    /// Output format: text, json (mpiq.snapshot/2 plus "analysis"), dot
    /// (the wait-for graph for graphviz) or csv (its edges).
    pub format: Option<OutputFormat>,
    /// Also render the wait-for graph as SVG into FILE (needs graphviz's
    /// `dot`).
    pub svg: Option<PathBuf>,
    /// Also draw the merged call stacks as a flame graph (SVG) into FILE.
    pub flamegraph: Option<PathBuf>,
    /// Also write the report as one self-contained web page into FILE.
    pub html: Option<PathBuf>,
    /// Show the queues only, without the cross-rank analysis.
    pub no_analysis: bool,
    /// The bridge's options (`--all`, `--queue Q`, ...), parsed once from
    /// the command line with the bridge's table (its error, if a value was
    /// bad, for [`DumpArgs::to_options`] to say).
    pub options: Result<DumpOptions, UsageError>,
}

impl Default for DumpArgs {
    fn default() -> Self {
        DumpArgs {
            format: None,
            svg: None,
            flamegraph: None,
            html: None,
            no_analysis: false,
            options: Ok(DumpOptions::default()),
        }
    }
}

impl Args for DumpArgs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        cmd.arg(
            Arg::new("format")
                .long("format")
                .value_name("FORMAT")
                .value_parser(clap::value_parser!(OutputFormat))
                .help(
                    "Output format: text, json (mpiq.snapshot/2 plus \"analysis\"), dot (the wait-for graph \
                     for graphviz), csv (its edges) or folded (the merged stacks for flamegraph.pl or inferno)",
                )
                .help_heading(OUTPUT_HEADING),
        )
        .arg(
            Arg::new("svg")
                .long("svg")
                .value_name("FILE")
                .value_parser(clap::value_parser!(PathBuf))
                .help("Also render the wait-for graph as SVG into FILE (needs graphviz's `dot`)")
                .help_heading(OUTPUT_HEADING),
        )
        .arg(
            Arg::new("flamegraph")
                .long("flamegraph")
                .value_name("FILE")
                .value_parser(clap::value_parser!(PathBuf))
                .help("Also draw the merged call stacks as a flame graph (SVG) into FILE, widths in ranks")
                .help_heading(OUTPUT_HEADING),
        )
        .arg(
            Arg::new("html")
                .long("html")
                .value_name("FILE")
                .value_parser(clap::value_parser!(PathBuf))
                .help(
                    "Also write the report as one self-contained web page into FILE (the verdict, the wait-for \
                     graph, the merged stacks as a tree, each rank's detail; it loads nothing from anywhere)",
                )
                .help_heading(OUTPUT_HEADING),
        )
        .arg(
            Arg::new("no_analysis")
                .long("no-analysis")
                .action(ArgAction::SetTrue)
                .conflicts_with("svg")
                .help("Show the queues only, without the cross-rank analysis (the exit status is then 0 on success)")
                .help_heading(OUTPUT_HEADING),
        )
        .args(table_args(DUMP_OPTIONS, SHARED_HEADING))
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for DumpArgs {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        Ok(DumpArgs {
            format: m.get_one::<OutputFormat>("format").copied(),
            svg: m.get_one::<PathBuf>("svg").cloned(),
            flamegraph: m.get_one::<PathBuf>("flamegraph").cloned(),
            html: m.get_one::<PathBuf>("html").cloned(),
            no_analysis: m.get_flag("no_analysis"),
            options: dump_options(m),
        })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

/// The questions of `mpiq lookup`: the bridge's lookup options, made from
/// its table ([`mpiq::lookup::LOOKUP_OPTIONS`]) and parsed by the bridge.
#[derive(Debug, Clone)]
pub struct LookupArgs {
    /// The options as given, for [`Lookup::parse`].
    pub options: Result<Lookup, UsageError>,
}

impl LookupArgs {
    /// The parsed questions.
    pub fn to_lookup(&self) -> Result<Lookup, UsageError> {
        self.options.clone()
    }
}

impl Args for LookupArgs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        cmd.args(table_args(LOOKUP_OPTIONS, LOOKUP_HEADING))
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for LookupArgs {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        Ok(LookupArgs {
            options: table_options(LOOKUP_OPTIONS, m),
        })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

/// The rows of a bridge option table the CLI has (those the bridge acts
/// on; `--targets` picks a debugger's targets, the CLI names processes its
/// own way) as clap arguments, with the table's help lines.
fn table_args<T>(table: &'static [OptionSpec<T>], heading: &'static str) -> Vec<Arg> {
    table
        .iter()
        .filter(|spec| spec.handler == Handler::Bridge)
        .map(|spec| {
            let help = spec.full_help();
            let mut first = help.chars();
            let help: String = first
                .next()
                .map(|c| c.to_ascii_uppercase())
                .into_iter()
                .chain(first)
                .collect();
            let arg = Arg::new(spec.name)
                .long(spec.name)
                .aliases(spec.aliases)
                .help(help)
                .help_heading(heading);
            match spec.value {
                None => arg.action(ArgAction::SetTrue),
                Some(value) => arg.value_name(value).action(if spec.repeatable {
                    ArgAction::Append
                } else {
                    ArgAction::Set
                }),
            }
        })
        .collect()
}

/// The value the arguments [`table_args`] matched make: each row's
/// `apply` on its value, in the table's order, as the bridge's own parser
/// does with words (one parse, no words in between). Rows the command does
/// not have (the watch has no `--json`) are passed over.
pub(crate) fn table_options<T: Default>(table: &'static [OptionSpec<T>], m: &ArgMatches) -> Result<T, UsageError> {
    let mut out = T::default();
    for spec in table.iter().filter(|spec| spec.handler == Handler::Bridge) {
        match spec.value {
            None => {
                if m.try_get_one::<bool>(spec.name)
                    .ok()
                    .flatten()
                    .copied()
                    .unwrap_or(false)
                {
                    (spec.apply)(&mut out, "")?;
                }
            }
            Some(_) => {
                for v in m.try_get_many::<String>(spec.name).ok().flatten().into_iter().flatten() {
                    if v.is_empty() {
                        return Err(UsageError(format!("{} needs a value", spec.flag())));
                    }
                    (spec.apply)(&mut out, v)?;
                }
            }
        }
    }
    Ok(out)
}

/// The bridge's dump options of a command line (every row of
/// [`DUMP_OPTIONS`] the CLI has), checked as the bridge's parser checks
/// them; `--json` with `--folded` disagree.
pub(crate) fn dump_options(m: &ArgMatches) -> Result<DumpOptions, UsageError> {
    let given = |name: &str| m.try_get_one::<bool>(name).ok().flatten().copied().unwrap_or(false);
    if given("json") && given("folded") {
        return Err(UsageError("--json and --folded disagree".into()));
    }
    table_options(DUMP_OPTIONS, m)?.checked()
}

impl DumpArgs {
    /// The output format (`--json` is `--format json`).
    pub fn output_format(&self) -> Result<OutputFormat, UsageError> {
        let given = match self.options.clone()?.format {
            Format::Json => Some(("--json", OutputFormat::Json)),
            Format::Folded => Some(("--folded", OutputFormat::Folded)),
            Format::Text => None,
        };
        let f = match (self.format, given) {
            (Some(f), Some((name, g))) if f != g => {
                return Err(UsageError(format!(
                    "{name} and --format {} disagree",
                    f.to_possible_value()
                        .map_or_else(String::new, |v| v.get_name().to_string())
                )))
            }
            (Some(f), _) => f,
            (None, Some((_, g))) => g,
            (None, None) => OutputFormat::Text,
        };
        if self.no_analysis && matches!(f, OutputFormat::Dot | OutputFormat::Csv) {
            return Err(UsageError(
                "--no-analysis leaves no wait-for graph for --format dot or csv".into(),
            ));
        }
        Ok(f)
    }

    /// The bridge's options (parsed by the bridge, so every front end
    /// accepts the same values), JSON when the output is.
    pub fn to_options(&self) -> Result<DumpOptions, UsageError> {
        let mut opts = self.options.clone()?;
        opts.format = match self.output_format()? {
            OutputFormat::Json => Format::Json,
            OutputFormat::Folded => Format::Folded,
            _ => Format::Text,
        };
        if opts.no_stacks && (opts.format == Format::Folded || self.flamegraph.is_some()) {
            return Err(UsageError(
                "--format folded and --flamegraph show the call stacks, which --no-stacks does not read".into(),
            ));
        }
        Ok(opts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use std::time::Duration;

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
        for bad in [&["--timeout", "soon"], &["--queue", "bogus"], &["--comm", ""]] {
            let mut all = vec!["mpiq", "queues", "--pid", "1"];
            all.extend_from_slice(bad);
            let Command::Queues { dump, .. } = Cli::try_parse_from(all).unwrap().command else {
                panic!("not queues")
            };
            assert!(dump.to_options().is_err(), "{bad:?}");
        }
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
        let (d, ..) = parse(&["--format", "folded", "--flamegraph", "f.svg", "--no-analysis"]).unwrap();
        assert_eq!(d.output_format().unwrap(), OutputFormat::Folded);
        assert_eq!(d.to_options().unwrap().format, Format::Folded);
        assert_eq!(d.flamegraph, Some(PathBuf::from("f.svg")));
        let (d, ..) = parse(&["--folded"]).unwrap();
        assert_eq!(d.to_options().unwrap().format, Format::Folded);
        for bad in [
            &["--folded", "--json"][..],
            &["--folded", "--format", "text"],
            &["--format", "folded", "--no-stacks"],
            &["--flamegraph", "f.svg", "--no-stacks"],
        ] {
            assert!(parse(bad).unwrap().0.to_options().is_err(), "{bad:?}");
        }
        let (_, samples, interval) = parse(&["--samples", "1", "--interval", "20"]).unwrap();
        assert_eq!((samples, interval), (1, 20));
    }

    #[test]
    fn run_arguments() {
        let parse = |args: &[&str]| {
            let mut all = vec!["mpiq", "run"];
            all.extend_from_slice(args);
            Cli::try_parse_from(all).map(|c| match c.command {
                Command::Run(r) => r,
                other => panic!("not run: {other:?}"),
            })
        };
        let words = |r: &RunArgs| {
            r.command
                .iter()
                .map(|w| w.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
        };
        let r = parse(&[
            "--timeout",
            "10m",
            "--report",
            "out",
            "--",
            "mpirun",
            "-n",
            "4",
            "./t",
            "--timeout",
            "3",
        ])
        .unwrap();
        assert_eq!(r.timeout, Some(Duration::from_secs(600)));
        assert_eq!(r.report, Some(PathBuf::from("out")));
        assert_eq!(words(&r), ["mpirun", "-n", "4", "./t", "--timeout", "3"]);
        assert_eq!(
            (r.detect, r.detect_every, r.grace),
            (false, None, Duration::from_secs(10))
        );
        // Without `--`, the command starts at the first word that is not mpiq run's.
        let r = parse(&["--detect", "--grace", "0", "srun", "-n", "2", "x"]).unwrap();
        assert_eq!((r.timeout, r.detect, r.grace), (None, true, Duration::ZERO));
        assert_eq!(words(&r), ["srun", "-n", "2", "x"]);
        assert!(parse(&["--", "true"]).is_err(), "neither --timeout nor --detect");
        assert!(parse(&["--timeout", "1s"]).is_err(), "no command");
        assert!(parse(&["--timeout", "0s", "true"]).is_err());
        assert!(parse(&["--timeout", "1s", "--detect-every", "5s", "true"]).is_err());
        let r = parse(&["--timeout", "1s", "--detect", "--detect-every", "500ms", "true"]).unwrap();
        assert_eq!(r.detect_every, Some(Duration::from_millis(500)));
        // As given; by default 30 s, or 100 x the last check's longest stop.
        assert_eq!(
            r.detect_interval(Duration::from_secs(1), false),
            Duration::from_millis(500)
        );
        let d = parse(&["--detect", "true"]).unwrap();
        assert_eq!(d.detect_interval(Duration::ZERO, false), Duration::from_secs(30));
        assert_eq!(
            d.detect_interval(Duration::from_millis(200), false),
            Duration::from_secs(30)
        );
        assert_eq!(
            d.detect_interval(Duration::from_millis(450), false),
            Duration::from_secs(45)
        );
        // Standing still: the default, however long the last stop (a hang
        // is seen within --min-hang and three checks).
        assert_eq!(
            d.detect_interval(Duration::from_millis(4500), true),
            Duration::from_secs(30)
        );
        for (text, ms) in [
            ("500ms", 500),
            ("60s", 60_000),
            ("10m", 600_000),
            ("1h", 3_600_000),
            ("90", 90_000),
            ("1.5s", 1500),
            (" 2 m ", 120_000),
        ] {
            assert_eq!(parse_duration(text), Ok(Duration::from_millis(ms)), "{text}");
        }
        for bad in ["", "s", "5x", "1e3", "-1s", "1.2.3s", "ms5", "1d"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn usage_errors() {
        assert!(Cli::try_parse_from(["mpiq", "queues"]).is_err());
        assert!(Cli::try_parse_from(["mpiq", "lookup", "--pid", "1", "--core", "x"]).is_err());
        assert!(Cli::try_parse_from(["mpiq", "core"]).is_err());
    }

    #[test]
    fn every_bridge_option_is_an_argument_with_the_tables_help() {
        let mut cmd = Cli::command();
        for sub in ["queues", "core", "job", "replay"] {
            let sub = cmd.find_subcommand_mut(sub).unwrap();
            let help = sub.render_long_help().to_string();
            for spec in DUMP_OPTIONS {
                let arg = sub.get_arguments().find(|a| a.get_id() == spec.name);
                let Some(arg) = arg.filter(|_| spec.handler == Handler::Bridge) else {
                    // --targets is the debuggers' own.
                    assert!(arg.is_none() && spec.handler == Handler::FrontEnd, "{}", spec.name);
                    continue;
                };
                assert_eq!(arg.get_long(), Some(spec.name));
                let names: Vec<String> = arg
                    .get_value_names()
                    .unwrap_or_default()
                    .iter()
                    .map(|v| v.to_string())
                    .collect();
                assert_eq!(
                    names,
                    spec.value.into_iter().map(String::from).collect::<Vec<_>>(),
                    "{}",
                    spec.name
                );
                let flat = help.split_whitespace().collect::<Vec<_>>().join(" ");
                let first_words: Vec<&str> = spec.help.split_whitespace().skip(1).take(4).collect();
                assert!(flat.contains(&first_words.join(" ")), "{}'s help:\n{help}", spec.name);
            }
            assert!(help.contains(OUTPUT_HEADING) && help.contains(SHARED_HEADING), "{help}");
        }
        let cli = Cli::try_parse_from([
            "mpiq",
            "queues",
            "--pid",
            "1",
            "--queue",
            "sends",
            "--queue",
            "unexpected,recv",
            "--all",
        ])
        .unwrap();
        let Command::Queues { dump, .. } = cli.command else {
            panic!("not queues")
        };
        let o = dump.to_options().unwrap();
        assert!(o.all);
        assert_eq!(o.queues.len(), 3);
        assert!(Cli::try_parse_from(["mpiq", "queues", "--pid", "1", "--targets", "all"]).is_err());
    }

    #[test]
    fn lookup_questions_are_the_bridges() {
        let cli = Cli::try_parse_from([
            "mpiq",
            "lookup",
            "--pid",
            "1",
            "--string",
            "MPIR_dll_name",
            "--sizes",
            "--symbol",
            "a",
            "--symbol",
            "b",
            "--offsetof",
            "T.f",
            "--read",
            "0x10:4",
            "--json",
        ])
        .unwrap();
        let Command::Lookup { pid, questions, .. } = cli.command else {
            panic!("not lookup")
        };
        assert_eq!(pid, Some(1));
        let l = questions.to_lookup().unwrap();
        assert!(l.json);
        assert_eq!(l.questions.len(), 6);
        let bad = Cli::try_parse_from(["mpiq", "lookup", "--pid", "1", "--offsetof", "T"]).unwrap();
        let Command::Lookup { questions, .. } = bad.command else {
            panic!("not lookup")
        };
        assert!(questions.to_lookup().unwrap_err().0.contains("TYPE.FIELD"));
    }
}
