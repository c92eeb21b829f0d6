use std::collections::BTreeMap;
use std::ffi::{c_int, OsString};
use std::fmt;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::procs::{self, Proc};
use crate::{build_example, Example, Mpi};

/// How long [`JobBuilder::start`] waits for every rank's `MPIQ-READY` line unless told otherwise.
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(60);

/// The example programs' safety-net lifetime the harness asks for, in seconds
/// (`MPIQ_EXAMPLE_LIFETIME`, see `examples/mpiq_example.h`): a job leaked by a killed test
/// process ends by itself after this long.
pub const DEFAULT_EXAMPLE_LIFETIME_SECS: u64 = 600;

/// Environment variable prefixes the harness removes from the starter's environment, so that
/// a job never joins or inherits settings of an MPI job the tests themselves run under.
/// Use [`JobBuilder::env`] to set MCA parameters or CVARs on purpose.
/// (`PRTE_` is Open MPI 5's runtime, PRRTE, whose `prterun` reads `PRTE_MCA_*`.)
pub const SCRUBBED_ENV_PREFIXES: &[&str] = &["OMPI_", "PRTE_", "PMIX_", "PMI_", "HYDRA_", "MPIEXEC_"];

/// One rank of a ready job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Rank {
    /// Rank in `MPI_COMM_WORLD` (for `sessions`: in the "sessions-world" communicator).
    pub rank: usize,
    /// Its process id, as the rank printed it (`getpid()`).
    pub pid: u32,
}

/// Why a job could not be started. Every variant carries the starter's output so far.
#[derive(Debug)]
#[non_exhaustive]
pub enum JobError {
    /// The starter could not be spawned.
    Spawn {
        /// The command line.
        command: String,
        /// The OS error.
        error: std::io::Error,
    },
    /// The starter exited before every rank was ready.
    ExitedEarly {
        /// How it exited.
        status: ExitStatus,
        /// The ranks that had reported ready.
        ready: Vec<Rank>,
        /// Captured output.
        output: Output,
    },
    /// Not every rank reported ready in time.
    ReadyTimeout {
        /// The time allowed.
        timeout: Duration,
        /// The ranks that had reported ready.
        ready: Vec<Rank>,
        /// Captured output.
        output: Output,
    },
    /// A rank printed a malformed, duplicated or out-of-range `MPIQ-READY` line.
    BadReadyLine {
        /// What is wrong.
        problem: String,
        /// Captured output.
        output: Output,
    },
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobError::Spawn { command, error } => write!(f, "cannot spawn `{command}`: {error}"),
            JobError::ExitedEarly { status, ready, output } => write!(
                f,
                "the starter exited ({status}) before every rank was ready (ready: {})\n{output}",
                ranks_list(ready)
            ),
            JobError::ReadyTimeout { timeout, ready, output } => write!(
                f,
                "not every rank printed MPIQ-READY within {timeout:?} (ready: {})\n{output}",
                ranks_list(ready)
            ),
            JobError::BadReadyLine { problem, output } => write!(f, "{problem}\n{output}"),
        }
    }
}

impl std::error::Error for JobError {}

fn ranks_list(ranks: &[Rank]) -> String {
    if ranks.is_empty() {
        return "none".into();
    }
    ranks
        .iter()
        .map(|r| format!("{}:{}", r.rank, r.pid))
        .collect::<Vec<_>>()
        .join(", ")
}

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
struct Captured {
    output: Output,
    ready: BTreeMap<usize, u32>,
    problems: Vec<String>,
    open_streams: u8,
}

type Shared = Arc<(Mutex<Captured>, Condvar)>;

fn lock(shared: &Shared) -> MutexGuard<'_, Captured> {
    shared.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Options for starting a job; made by [`Job::builder`].
#[derive(Clone, Debug)]
#[must_use = "a JobBuilder does nothing until .start()"]
pub struct JobBuilder {
    mpi: Mpi,
    example: Example,
    nprocs: usize,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    ready_timeout: Duration,
    lifetime_secs: u64,
    program: Option<PathBuf>,
}

impl JobBuilder {
    /// Runs this executable (e.g. a test fixture, see [`crate::fixtures`]) instead of
    /// building the example; the example then only names the job and sets its defaults.
    pub fn program(mut self, exe: impl Into<PathBuf>) -> Self {
        self.program = Some(exe.into());
        self
    }

    /// Number of ranks (default: [`Example::default_nprocs`]).
    pub fn nprocs(mut self, nprocs: usize) -> Self {
        self.nprocs = nprocs;
        self
    }

    /// Program arguments, replacing [`Example::default_args`].
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args = args.into_iter().map(Into::into).collect();
        self
    }

    /// Sets an environment variable for the starter (and so the ranks), after the harness
    /// removed [`SCRUBBED_ENV_PREFIXES`]; e.g. `OMPI_MCA_btl_vader_single_copy_mechanism`.
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// How long to wait for every rank's `MPIQ-READY` line (default [`DEFAULT_READY_TIMEOUT`]).
    pub fn ready_timeout(mut self, timeout: Duration) -> Self {
        self.ready_timeout = timeout;
        self
    }

    /// The ranks' safety-net lifetime in seconds, 0 for none
    /// (default [`DEFAULT_EXAMPLE_LIFETIME_SECS`]).
    pub fn lifetime_secs(mut self, secs: u64) -> Self {
        self.lifetime_secs = secs;
        self
    }

    /// Builds the example if needed, starts the job and waits until every rank is ready.
    ///
    /// # Panics
    /// On any failure, with the captured output: see [`JobBuilder::try_start`].
    pub fn start(self) -> Job {
        let what = format!("{} x{} under {}", self.example, self.nprocs, self.mpi);
        self.try_start().unwrap_or_else(|e| panic!("starting {what}: {e}"))
    }

    /// [`JobBuilder::start`], or `None` after printing `SKIPPED: ...` with the reason when
    /// the harness declares the example unsupported by the MPI
    /// ([`Example::unsupported_reason`]).
    pub fn start_supported(self) -> Option<Job> {
        if let Some(why) = self.example.unsupported_reason(self.mpi) {
            eprintln!("SKIPPED: {} under {}: {why}", self.example, self.mpi);
            return None;
        }
        Some(self.start())
    }

    /// Like [`JobBuilder::start`] but returns start-up failures as errors. Building the
    /// example still panics on failure (see [`build_example`]). On error everything that was
    /// started has been killed.
    pub fn try_start(self) -> Result<Job, JobError> {
        let exe = match &self.program {
            Some(p) => p.clone(),
            None => build_example(self.mpi, self.example),
        };
        let mut cmd = self.mpi.starter_command(self.nprocs, &exe, &self.args);
        for (key, _) in std::env::vars_os() {
            let scrub = key
                .to_str()
                .is_some_and(|k| SCRUBBED_ENV_PREFIXES.iter().any(|p| k.starts_with(p)));
            if scrub {
                cmd.env_remove(&key);
            }
        }
        {
            // The test bed's and the wheels' executables carry a RUNPATH to their MPI's lib/,
            // which LD_LIBRARY_PATH would override, and Debian's rely on the default search
            // path, which it precedes: make sure an inherited one (say, pointing at the test
            // bed's MPICH, whose libmpich.so.12 Debian's executables would take) cannot send
            // a rank, or the starter, to another MPI's libraries.
            let mut path = OsString::from(self.mpi.library_dir());
            if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|p| !p.is_empty()) {
                path.push(":");
                path.push(old);
            }
            cmd.env("LD_LIBRARY_PATH", path);
        }
        cmd.env("MPIQ_EXAMPLE_LIFETIME", self.lifetime_secs.to_string());
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        // Its own process group, so that a signal to the test's group (Ctrl-C) does not reach
        // it and Drop can signal the whole group.
        cmd.process_group(0);

        let command = format!("{cmd:?}");
        let started = Instant::now();
        let mut child = cmd.spawn().map_err(|error| JobError::Spawn { command, error })?;
        let shared: Shared = Arc::new((Mutex::new(Captured::default()), Condvar::new()));
        lock(&shared).open_streams = 2;
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        spawn_reader(stdout, shared.clone(), Stream::Stdout, self.nprocs);
        spawn_reader(stderr, shared.clone(), Stream::Stderr, self.nprocs);

        let starter = Proc::of(child.id()).unwrap_or(Proc {
            pid: child.id(),
            start_time: 0,
            name: String::new(),
        });
        let mut job = Job {
            mpi: self.mpi,
            example: self.example,
            exe,
            nprocs: self.nprocs,
            starter_pid: child.id(),
            child,
            reaped: None,
            ranks: Vec::new(),
            processes: vec![starter],
            shared,
        };
        job.wait_ready(self.ready_timeout)?;
        eprintln!(
            "[mpiq-tests] {} x{} under {}: ready in {:.2?} (starter {}, ranks {})",
            job.example,
            job.nprocs,
            job.mpi,
            started.elapsed(),
            job.starter_pid,
            ranks_list(&job.ranks)
        );
        Ok(job)
    }
}

#[derive(Clone, Copy)]
enum Stream {
    Stdout,
    Stderr,
}

fn spawn_reader(pipe: impl Read + Send + 'static, shared: Shared, stream: Stream, nprocs: usize) {
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

/// A running MPI job of one example. Dropping it kills everything it started, also while a
/// test panics: SIGKILL to the starter's process group *and* to every recorded process (the
/// ranks and the starter's descendants, such as `hydra_pmi_proxy`, which put themselves in
/// other sessions), then the starter is reaped.
///
/// ```no_run
/// use mpiq_tests::{Example, Job, Mpi};
///
/// let job = Job::builder(Mpi::Mpich, Example::Ring).nprocs(2).start();
/// let pid = job.pid_of(1);
/// assert!(Job::is_running(pid));
/// let started = job.processes().to_vec();
/// drop(job);
/// mpiq_tests::assert_all_gone(&started, std::time::Duration::from_secs(10));
/// ```
#[derive(Debug)]
pub struct Job {
    mpi: Mpi,
    example: Example,
    exe: PathBuf,
    nprocs: usize,
    starter_pid: u32,
    child: Child,
    reaped: Option<ExitStatus>,
    ranks: Vec<Rank>,
    processes: Vec<Proc>,
    shared: Shared,
}

impl fmt::Debug for Captured {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Captured")
            .field("ready", &self.ready)
            .finish_non_exhaustive()
    }
}

impl Job {
    /// `gcore -o DIR/core PID` of world rank `rank`: the core file
    /// `DIR/core.PID`. The rank runs on afterwards.
    ///
    /// # Panics
    /// If gcore fails or writes no file (with its output).
    pub fn gcore(&self, rank: usize, dir: &Path) -> PathBuf {
        let pid = self.pid_of(rank);
        let out = crate::run::run(
            std::process::Command::new("gcore")
                .arg("-o")
                .arg(dir.join("core"))
                .arg(pid.to_string()),
        );
        let core = dir.join(format!("core.{pid}"));
        assert!(out.success && core.is_file(), "gcore {pid}:\n{out}");
        core
    }

    /// [`Job::gcore`] of every rank, in rank order.
    pub fn gcore_all(&self, dir: &Path) -> Vec<PathBuf> {
        (0..self.ranks().len()).map(|r| self.gcore(r, dir)).collect()
    }

    /// Options for a job of `example` under `mpi`, with the example's default rank count and
    /// arguments; finish with [`JobBuilder::start`].
    pub fn builder(mpi: Mpi, example: Example) -> JobBuilder {
        JobBuilder {
            mpi,
            example,
            nprocs: example.default_nprocs(),
            args: example.default_args().iter().map(OsString::from).collect(),
            env: Vec::new(),
            ready_timeout: DEFAULT_READY_TIMEOUT,
            lifetime_secs: DEFAULT_EXAMPLE_LIFETIME_SECS,
            program: None,
        }
    }

    /// Starts `example` on `nprocs` ranks with `args` and waits until every rank is ready
    /// (shorthand for the builder).
    ///
    /// # Panics
    /// On any failure, with the captured output.
    pub fn start(mpi: Mpi, example: Example, nprocs: usize, args: &[&str]) -> Job {
        Job::builder(mpi, example)
            .nprocs(nprocs)
            .args(args.iter().copied())
            .start()
    }

    /// The MPI the job runs under.
    pub fn mpi(&self) -> Mpi {
        self.mpi
    }

    /// The example it runs.
    pub fn example(&self) -> Example {
        self.example
    }

    /// The example executable.
    pub fn exe(&self) -> &Path {
        &self.exe
    }

    /// Number of ranks.
    pub fn nprocs(&self) -> usize {
        self.nprocs
    }

    /// Pid of the starter (`mpirun` / `mpiexec`; Open MPI 5's `mpirun` becomes `prterun`),
    /// the leader of the job's process group.
    pub fn starter_pid(&self) -> u32 {
        self.starter_pid
    }

    /// Every rank, sorted by rank.
    pub fn ranks(&self) -> &[Rank] {
        &self.ranks
    }

    /// The pid of `rank`.
    ///
    /// # Panics
    /// If the job has no such rank.
    pub fn pid_of(&self, rank: usize) -> u32 {
        self.ranks
            .get(rank)
            .map(|r| r.pid)
            .unwrap_or_else(|| panic!("{} x{} has no rank {rank}", self.example, self.nprocs))
    }

    /// Every process the harness knows it started, as recorded when the job became ready:
    /// the starter, its descendants (Open MPI's ranks; MPICH's `hydra_pmi_proxy` and ranks)
    /// and the ranks. Keep a copy, drop the job, then check with [`procs::assert_all_gone`].
    pub fn processes(&self) -> &[Proc] {
        &self.processes
    }

    /// Whether `pid` runs freely: exists, not stopped, not traced (see [`procs::is_running`]).
    pub fn is_running(pid: u32) -> bool {
        procs::is_running(pid)
    }

    /// The output captured so far.
    pub fn output(&self) -> Output {
        lock(&self.shared).output.clone()
    }

    /// Waits up to `timeout` for the starter to exit and returns its status, with the output
    /// complete (the reader threads have seen end of file, or a short grace period passed).
    ///
    /// # Panics
    /// If the job is still running after `timeout` (the job is then killed on drop).
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(status) = self.try_reap() {
                break status;
            }
            if Instant::now() >= deadline {
                panic!(
                    "{} x{} under {} did not exit within {timeout:?}\n{}",
                    self.example,
                    self.nprocs,
                    self.mpi,
                    self.output()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        self.drain(Duration::from_secs(2));
        status
    }

    /// Waits up to `timeout` for the reader threads to see end of file on both streams.
    fn drain(&self, timeout: Duration) {
        let (mutex, cvar) = &*self.shared;
        let guard = mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let _ = cvar
            .wait_timeout_while(guard, timeout, |c| c.open_streams > 0)
            .unwrap_or_else(|poisoned| poisoned.into_inner());
    }

    fn try_reap(&mut self) -> Option<ExitStatus> {
        if self.reaped.is_none() {
            self.reaped = self.child.try_wait().ok().flatten();
        }
        self.reaped
    }

    fn wait_ready(&mut self, timeout: Duration) -> Result<(), JobError> {
        let deadline = Instant::now() + timeout;
        loop {
            {
                let (mutex, cvar) = &*self.shared;
                let c = mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                if let Some(problem) = c.problems.first() {
                    return Err(JobError::BadReadyLine {
                        problem: problem.clone(),
                        output: c.output.clone(),
                    });
                }
                if c.ready.len() == self.nprocs {
                    self.ranks = c.ready.iter().map(|(&rank, &pid)| Rank { rank, pid }).collect();
                    break;
                }
                let ready = c.ready.iter().map(|(&rank, &pid)| Rank { rank, pid }).collect();
                if Instant::now() >= deadline {
                    return Err(JobError::ReadyTimeout {
                        timeout,
                        ready,
                        output: c.output.clone(),
                    });
                }
                drop(cvar.wait_timeout(c, Duration::from_millis(50)));
            }
            if let Some(status) = self.try_reap() {
                // Let the readers drain what the job wrote before it went.
                self.drain(Duration::from_secs(5));
                let c = lock(&self.shared);
                if c.ready.len() < self.nprocs {
                    let ready = c.ready.iter().map(|(&rank, &pid)| Rank { rank, pid }).collect();
                    return Err(JobError::ExitedEarly {
                        status,
                        ready,
                        output: c.output.clone(),
                    });
                }
            }
        }
        // Record the process tree now, while every process is alive and in place. The
        // starter was recorded right after fork, perhaps under the test's own name.
        if let Some(now) = Proc::of(self.starter_pid) {
            if let Some(first) = self.processes.first_mut() {
                if first.pid == now.pid && first.start_time == now.start_time {
                    *first = now;
                }
            }
        }
        let mut known = procs::descendants(self.starter_pid);
        for r in &self.ranks {
            if !known.iter().any(|p| p.pid == r.pid) {
                known.extend(Proc::of(r.pid));
            }
        }
        self.processes.extend(known);
        self.processes.sort();
        self.processes.dedup();
        Ok(())
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        let group_alive = self.try_reap().is_none();
        let mut targets = self.processes.clone();
        if group_alive {
            // Freeze the starter's group first so that nothing forks while we look, then find
            // what was started since readiness (twice: a stopped proxy cannot fork either).
            // The starter leads its own group (process_group(0)) and is not yet reaped, so
            // the group id cannot have been recycled.
            procs::send_signal(-(self.starter_pid as c_int), procs::SIGSTOP);
            for _ in 0..2 {
                for p in procs::descendants(self.starter_pid) {
                    p.signal(procs::SIGSTOP);
                    targets.push(p);
                }
            }
            procs::send_signal(-(self.starter_pid as c_int), procs::SIGKILL);
        }
        // Recorded processes are killed only if they are still the same process (pid and
        // start time), so a recycled pid is never hit.
        for p in &targets {
            p.signal(procs::SIGKILL);
        }
        if self.reaped.is_none() {
            let _ = self.child.kill();
            self.reaped = self.child.wait().ok();
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
