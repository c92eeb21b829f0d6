//! `mpiq watch`'s arguments and help.

use std::path::PathBuf;

use clap::{Arg, ArgAction, ArgMatches, Args, FromArgMatches};
use mpiq::options::DUMP_OPTIONS;
use mpiq::{DumpOptions, UsageError};

use super::{table_args, DEFAULT_NODE_TIMEOUT_SECS, SHARED_HEADING};

pub(super) const WATCH_HELP: &str = "\
Examples:
  mpiq watch --starter $(pgrep -n mpirun)
      watch every rank of the job, one sample a second
  mpiq watch --starter 4200 --interval 250ms --record session.rec
      four samples a second, every sample kept in session.rec
  mpiq watch --replay session.rec
      the recorded session again, with no process (left/right step through it)
  mpiq replay session.rec
      its first sample as `mpiq job` shows it

The screen: a header (the job, the sample number and time, how long the sample
took, the verdict of the same analysis `mpiq job` prints, on this sample and the
one before it), one line per rank (world rank, pid, where it is in MPI, and its
history: one letter per sample, the newest on the right, as many as fit), then
the legend and the keys. A rank that moved since the previous sample is shown
in bold and reverse. With more ranks than lines, ranks that are at the same
place are one line (\"ranks 0-3, 7\"); a history letter is then `*` where they
differed.

History letters (the state of the rank's first thread that is in MPI, else of
its first application thread):
  .  computing, not in MPI          b  blocked outside MPI (pause, join, ...)
  S  blocking send (MPI_Send, MPI_Ssend)
  R  blocking receive or probe, MPI_Sendrecv
  W  wait family (MPI_Wait, MPI_Waitall, MPI_Waitany, ...)
  T  test family, MPI_Iprobe (polling)
  C  collective, communicator construction
  I  MPI_Init    F  MPI_Finalize    O  one-sided    D  file I/O
  M  another MPI call, or MPI code without a symbol
  ?  unreadable (no stacks, or the process could not be read)
     (blank) not in that sample

Keys:
  up/down, j/k, PgUp/PgDn, Home/End  select a rank (or a group of ranks)
  Enter            that rank's every thread's frames and its queues (as `mpiq job
                   --stacks` shows one process); up/down scroll; Esc, Backspace back
  r, space         take a sample now          p  pause / resume sampling
  left/right       (--replay) the previous / next sample; p or space plays
  q, Ctrl-C        quit

Every sample stops every rank with ptrace, reads its queues and stacks and
releases it at once, exactly as `mpiq job --starter PID --samples 1` does; ranks on
other nodes are read by their collectors. No rank is left stopped between
samples, nor after q, Ctrl-C, SIGTERM or SIGHUP; a killed (SIGKILL) watch leaves
them running too (they are seized with PTRACE_SEIZE, which the kernel ends).

--record FILE keeps every sample in one recording (mpiq.recording/2 with a
`samples` list; docs/json-schema.md), written after each sample: `mpiq watch
--replay FILE` shows the session again, `mpiq replay FILE` its first sample.
While recording, the calls' state digests are not read (a recording holds no
stack memory), as with `mpiq job --record`.

The watch needs a terminal: with standard output not a terminal it exits with
status 2 (use `mpiq job` for a report in a file or a pipe). Warnings printed
while it runs are shown on the last line and again on exit.";

/// `mpiq watch`'s arguments: where the ranks are (a starter, a Slurm step or
/// a recording), how often to sample, and the bridge's dump options (the
/// same table as every front end's, `--json` aside).
#[derive(Debug, Clone)]
pub struct WatchArgs {
    /// The starter (mpirun, mpiexec, srun).
    pub starter: Option<i32>,
    /// A Slurm job step instead (`JOB[.STEP]`).
    pub slurm: Option<String>,
    /// A session recording to show instead of a job.
    pub replay: Option<PathBuf>,
    /// How long the ranks run between two samples.
    pub interval: std::time::Duration,
    /// Seconds another node's collector may take.
    pub node_timeout: u64,
    /// The bridge's dump options, parsed once (`--record FILE` among them).
    pub options: Result<DumpOptions, UsageError>,
}

impl WatchArgs {
    /// The bridge's options.
    pub fn to_options(&self) -> Result<DumpOptions, UsageError> {
        self.options.clone()
    }
}

/// The table's options that make no sense on a screen.
const NOT_FOR_WATCH: [&str; 1] = ["json"];

impl Args for WatchArgs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        let table = table_args(DUMP_OPTIONS, SHARED_HEADING)
            .into_iter()
            .filter(|a| !NOT_FOR_WATCH.contains(&a.get_id().as_str()));
        cmd.arg(
            Arg::new("starter")
                .long("starter")
                .value_name("PID")
                .value_parser(clap::value_parser!(i32))
                .help("Process id of the job's starter (mpirun, mpiexec, srun)"),
        )
        .arg(
            Arg::new("slurm")
                .long("slurm")
                .value_name("JOB[.STEP]")
                .help("A Slurm job step instead of a starter: JOB (its only running step) or JOB.STEP"),
        )
        .arg(
            Arg::new("replay")
                .long("replay")
                .value_name("FILE")
                .value_parser(clap::value_parser!(PathBuf))
                .conflicts_with("record")
                .help("Show a session recorded with --record (or any recording) instead of a job, with no process"),
        )
        .group(
            clap::ArgGroup::new("what")
                .args(["starter", "slurm", "replay"])
                .required(true)
                .multiple(false),
        )
        .arg(
            Arg::new("interval")
                .long("interval")
                .value_name("TIME")
                .default_value("1s")
                .value_parser(super::parse_positive_duration)
                .help("How long the ranks run between two samples (500ms, 2s, 1m; a number is seconds); with --replay, the time between the samples played"),
        )
        .arg(
            Arg::new("node_timeout")
                .long("node-timeout")
                .value_name("SECS")
                .default_value("30")
                .value_parser(clap::value_parser!(u64).range(1..=3600))
                .action(ArgAction::Set)
                .help("Seconds each other node's collector may take before its ranks count as unreadable"),
        )
        .args(table)
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for WatchArgs {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        Ok(WatchArgs {
            starter: m.get_one::<i32>("starter").copied(),
            slurm: m.get_one::<String>("slurm").cloned(),
            replay: m.get_one::<PathBuf>("replay").cloned(),
            interval: m
                .get_one::<std::time::Duration>("interval")
                .copied()
                .unwrap_or_default(),
            // The default, "30", is DEFAULT_NODE_TIMEOUT_SECS (a test checks).
            node_timeout: m
                .get_one::<u64>("node_timeout")
                .copied()
                .unwrap_or(DEFAULT_NODE_TIMEOUT_SECS),
            options: super::dump_options(m),
        })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}
