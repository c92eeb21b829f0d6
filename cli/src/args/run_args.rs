//! `mpiq run`'s arguments and help.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

pub(super) const RUN_HELP: &str = "\
Examples:
  mpiq run --timeout 10m --report mpiq-report -- mpirun -n 4 ./test
      in CI: a test still running after 10 minutes is read (queues, stacks,
      verdict: on stderr and in mpiq-report/, to upload as an artifact), then ended
  mpiq run --detect -- srun -n 64 ./solver
      end it as soon as a check (every 30s) finds it deadlocked, or hung: its
      ranks waiting on something that has not moved for longer than the job's
      own earlier pauses explain (no timeout to guess)
  mpiq run --timeout 30m --report out -- make check
      the starter is looked for under the command (make, bash -c, a test runner)

The command runs in its own process group, its standard output and error passed
through unchanged as they come (the last 200 lines of each are kept). If it is
still running after --timeout, or as soon as a --detect check finds a deadlock,
mpiq reads the job as `mpiq job --starter PID` does (two samples 500 ms apart)
and prints the report on stderr: why the job is ended, the verdict, then every
rank's queues, where the ranks are and the deadlock analysis. Then it ends the
job: SIGTERM to its process group (mpirun, mpiexec and srun end their ranks),
and after --grace SIGKILL to every process of the job that is left.

The starter: the command itself when it is mpirun, mpiexec, mpiexec.hydra,
orterun, prterun or srun (by executable name; also mpirun.* and mpiexec.*),
else the first process under it that is one, outermost first, else the first
that has an MPIR_proctable and is not an MPI rank. When there is none, the
report says so and the job is ended all the same.

--detect: --detect-every after the start, and --detect-every after each check,
mpiq reads the job (the ranks are stopped for moments, twice). What that costs:
each check holds the ranks stopped while it reads them, some 20-400 ms for a few
ranks on a busy node (mpiq-bench detect); the default interval, 30 s, grows to
100 x the last check's longest stop when that is longer, so that the checks hold
the ranks stopped at most 1% of the time. At the end mpiq run says what its
checks cost (--detect's N checks held the ranks on this node stopped for ...).
A check ends the job when its verdict is \"deadlock\", or when the job is hung:
some ranks wait (or poll) in MPI, and since the first of at least 3 checks in a
row nothing in the job has changed (no rank's place, calling frames or queues)
for at least
  max(--min-hang, 3 x the longest the job stood still before and moved on)
The job's own pauses are learnt from the checks before: a job that once stood
still for 40 s and went on is called hung only after 2 min of it; a job never
seen still, after --min-hang (60s). A rank's place is its blocking MPI call,
the caller and the contents of its calling frames (the same call in the next
iteration is a move), a polling call (MPI_Test, MPI_Iprobe) and its caller, or
outside MPI its frames in the application (a loop calling helpers is one place);
a rank whose stacks cannot be read keeps the job from being called still. A
check that could not read the job (it has not started its ranks yet) ends
nothing. The report says what was seen, for how long, and the rule applied.
A rank reading or writing (the kernel's I/O counters grew) moves, wherever it
is. While a rank computes outside MPI (on the CPU a quarter of the time or
more) and the others wait, as in a long serial phase (one rank reads,
partitions or factorizes), the job is only suspected hung past that rule: the
report is printed (and written to --report DIR) at once, the job left running,
and it is ended only if nothing changes for --compute-hang (10m) in all.

The flight recorder (unless --no-recorder): mpiq's libmpiq_recorder.so (found in
$MPIQ_RECORDER, else in this installation's lib/mpiq/, else this mpiq's own
copy, written into ~/.cache/mpiq/recorder/) is appended to the command's
LD_PRELOAD (after the user's; not when LD_PRELOAD names a libmpiq_recorder.so
already). Every process of the job inherits it; it records only in processes
that call MPI. Ranks on other nodes get it from srun and MPICH's mpiexec (which
pass the whole environment on), and from Open MPI's mpirun when it is the
command: Open MPI 5's through OMPI_MCA_mca_base_env_list=LD_PRELOAD, Open MPI
4's through `-x LD_PRELOAD`, added after the program's name. The report says
which ranks were read without it (a static program, srun --export without ALL,
...).

Report files (--report DIR): DIR is created if missing; these files, of an
earlier run, are removed at the start; they are written when the job is ended:
  report.txt      the text printed on stderr
  report.json     the same JSON as `mpiq job --json` (mpiq.snapshot/2 + analysis)
  waits.dot       the wait-for graph and the merged stacks, for graphviz
  waits.svg       the same drawn (with graphviz's `dot` installed; report.txt
                  says when it is not)
  job-output.txt  the last 200 lines of the job's standard output and error
report.json and waits.* only when the job could be read.

Signals: SIGINT, SIGTERM and SIGHUP to mpiq run are passed on to the job's
process group; the job is then ended as above (a second signal: SIGKILL at
once). If mpiq run is killed (SIGKILL), the kernel sends the command SIGTERM
(PR_SET_PDEATHSIG) and mpiq's watchdog process (`mpiq run-watchdog`) ends every
process of the job it saw, as mpiq would have. The job's standard input is
mpiq's, or /dev/null when that is a terminal (the job runs in the background).

Exit status:
  N       the job finished by itself with status N (killed by signal S: 128+S)
  124     the job was ended: --timeout passed, or --detect found it deadlocked
          or hung
          (the report says which, and what mpiq found or why it could not read
          the job); a job may exit with 124 of its own, as under timeout(1)
  125     mpiq run failed: --report DIR cannot be created, or the job's exit
          status could not be read
  126     the command cannot be executed
  127     the command was not found
  2       usage error
  128+S   mpiq run got signal S (SIGINT, SIGTERM, SIGHUP) and ended the job";

/// The arguments of `mpiq run`.
#[derive(Debug, Clone, Args)]
#[command(group(clap::ArgGroup::new("ends").args(["timeout", "detect"]).required(true).multiple(true)))]
pub struct RunArgs {
    /// End the job, with a report, if it is still running after DURATION
    /// (500ms, 60s, 10m, 1h; a plain number is seconds). Without it, only
    /// --detect ends it.
    #[arg(long, value_name = "DURATION", value_parser = parse_positive_duration)]
    pub timeout: Option<Duration>,
    /// Write the report into DIR too (created if missing): report.txt,
    /// report.json, waits.dot, waits.svg, job-output.txt.
    #[arg(long, value_name = "DIR")]
    pub report: Option<PathBuf>,
    /// Check the job every --detect-every and end it, with the report, as
    /// soon as it is deadlocked or hung (see below).
    #[arg(long)]
    pub detect: bool,
    /// --detect never calls a job hung before it has stood still this long.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_positive_duration, requires = "detect")]
    pub min_hang: Duration,
    /// While a rank computes outside MPI (on the CPU, as a long serial
    /// phase does), --detect only reports the job as suspected
    /// hung (the report at once, the job left running) until it has stood
    /// still this long; then it ends it.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = parse_positive_duration, requires = "detect")]
    pub compute_hang: Duration,
    /// How often --detect checks (the first check after this long)
    /// [default: 30s, or 100 x the longest a rank was held stopped by the
    /// last check when that is longer: at most 1% of the job's time]
    #[arg(long, value_name = "DURATION", value_parser = parse_positive_duration, requires = "detect")]
    pub detect_every: Option<Duration>,
    /// How long the job has after SIGTERM before SIGKILL.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub grace: Duration,
    /// Do not preload mpiq's flight recorder into the job. By default its
    /// library goes into LD_PRELOAD (see below): each rank then keeps its
    /// last MPI calls and pending requests, which the report shows and the
    /// verdict uses where the MPI gives no queues. Its cost: some tens of
    /// ns per MPI call, and about 940 KiB of .bss reserved per process, of
    /// which only the pages written count.
    #[arg(long)]
    pub no_recorder: bool,
    /// The job's command: srun, mpirun, mpiexec ..., or any command that
    /// starts one (after `--`, or after mpiq run's options).
    #[arg(value_name = "COMMAND", required = true, num_args = 1.., trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<OsString>,
}

/// --detect's interval when not given.
pub const DEFAULT_DETECT_EVERY: Duration = Duration::from_secs(30);

/// With the default interval, a check comes at least this many times the
/// longest a rank was held stopped by the one before (1%).
pub const STOPPED_SHARE_INVERSE: u32 = 100;

impl RunArgs {
    /// The interval before the next check: --detect-every as given, else
    /// [`DEFAULT_DETECT_EVERY`] or [`STOPPED_SHARE_INVERSE`] x `last_stop`
    /// (the longest a rank was held stopped by the last check), the longer,
    /// while the job moves: watching a job that moves costs it at most 1%.
    /// Once it stood still at the last check (`still`: a hang may be on its
    /// way) the next comes after [`DEFAULT_DETECT_EVERY`] whatever the
    /// stop took, so that a hang is seen within --min-hang and three
    /// checks, on a crowded node too (where a stop takes seconds).
    pub fn detect_interval(&self, last_stop: Duration, still: bool) -> Duration {
        self.detect_every.unwrap_or_else(|| {
            if still {
                DEFAULT_DETECT_EVERY
            } else {
                DEFAULT_DETECT_EVERY.max(last_stop.saturating_mul(STOPPED_SHARE_INVERSE))
            }
        })
    }
}

/// A duration: a number with a unit, `ms`, `s`, `m` or `h` (`500ms`, `1.5s`,
/// `10m`, `1h`); a plain number is seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let bad = || {
        format!("`{text}` is not a duration: give a number and a unit, as in 500ms, 60s, 10m or 1h (a plain number is seconds)")
    };
    let scale = match unit.trim() {
        "" | "s" | "sec" => 1.0,
        "ms" => 1e-3,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => return Err(bad()),
    };
    let value: f64 = number.parse().map_err(|_| bad())?;
    let secs = value * scale;
    if !secs.is_finite() || secs > 1e9 {
        return Err(format!("`{text}` is too long a duration"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A duration ([`parse_duration`]) that is not zero.
pub fn parse_positive_duration(text: &str) -> Result<Duration, String> {
    let d = parse_duration(text)?;
    if d.is_zero() {
        return Err(format!("`{text}`: the duration must be more than 0"));
    }
    Ok(d)
}
