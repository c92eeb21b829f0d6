use std::ffi::{c_int, OsString};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::launcher::{self, Launcher, SlurmJob};
use crate::procs::{self, Proc};
use crate::{build_example, Example, JobDir, Mpi, PyExample};

mod capture;
mod error;

pub use capture::Output;
use capture::{lock, spawn_reader, Captured, Shared, Stream};
use error::ranks_list;
pub use error::JobError;

/// How long [`JobBuilder::start`] waits for every rank's `MPIQ-READY` line unless told otherwise.
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(60);

/// The example programs' safety-net lifetime the harness asks for, in seconds
/// (`MPIQ_EXAMPLE_LIFETIME`, see `examples/mpiq_example.h`): a job leaked by a killed test
/// process ends by itself after this long.
pub const DEFAULT_EXAMPLE_LIFETIME_SECS: u64 = 600;

/// Environment variable prefixes the harness removes from the starter's environment, so that
/// a job never joins or inherits settings of an MPI job the tests themselves run under.
/// Use [`JobBuilder::env`] to set MCA parameters or CVARs on purpose.
/// (`PRTE_` is Open MPI 5's runtime, PRRTE, whose `prterun` reads `PRTE_MCA_*`. `SLURM`
/// covers `SLURM_*` and `SLURMD_*`, with `SRUN_` and `SALLOC_`: inside a Slurm job, Open MPI's
/// `mpirun` would start the ranks on that job's nodes, and `srun` would run a step of it
/// instead of a job of the harness's own cluster.)
pub const SCRUBBED_ENV_PREFIXES: &[&str] = &[
    "OMPI_", "PRTE_", "PMIX_", "PMI_", "HYDRA_", "MPIEXEC_", "SLURM", "SRUN_", "SALLOC_",
];

/// What the harness removes from the environment of a job of a Python example, besides
/// [`SCRUBBED_ENV_PREFIXES`]: a user's Python search path and start-up settings, which could
/// put another mpi4py (or another `mpiq_example`) in front of the venv's. Variables starting
/// with `MPI4PY_` go too (`MPI4PY_RC_*` changes how mpi4py initialises and receives,
/// `MPI4PY_LIBMPI` which MPI library its wheel loads).
pub const PYTHON_SCRUBBED_ENV: &[&str] = &["PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE"];

/// What a job runs: a C example, built with the MPI's `mpicc`, or a Python example, run by the
/// MPI's mpi4py Python ([`Mpi::python`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Program {
    /// `examples/<name>.c` (or the executable given to [`JobBuilder::program`]).
    C(Example),
    /// `python examples/python/<name>.py`: the starter runs the venv's Python (or the
    /// interpreter given to [`JobBuilder::program`]) with the script as its first argument,
    /// then [`JobBuilder::args`].
    Python(PyExample),
}

impl Program {
    /// Why the program cannot run with `mpi`, or `None` if it can
    /// ([`Example::unsupported_reason`], [`PyExample::unsupported_reason`]).
    pub fn unsupported_reason(self, mpi: Mpi) -> Option<&'static str> {
        match self {
            Program::C(example) => example.unsupported_reason(mpi),
            Program::Python(example) => example.unsupported_reason(mpi),
        }
    }
}

impl std::fmt::Display for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Program::C(example) => example.fmt(f),
            Program::Python(example) => example.fmt(f),
        }
    }
}

/// One rank of a ready job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Rank {
    /// Rank in `MPI_COMM_WORLD` (for `sessions`: in the "sessions-world" communicator).
    pub rank: usize,
    /// Its process id, as the rank printed it (`getpid()`).
    pub pid: u32,
}

/// Options for starting a job; made by [`Job::builder`].
#[derive(Clone, Debug)]
#[must_use = "a JobBuilder does nothing until .start()"]
pub struct JobBuilder {
    mpi: Mpi,
    what: Program,
    nprocs: usize,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    ready_timeout: Duration,
    lifetime_secs: u64,
    program: Option<PathBuf>,
    launcher: Launcher,
    mca: Vec<(String, String)>,
}

impl JobBuilder {
    /// Open MPI under its own starter: `--mca KEY VALUE`, in place of the harness's own
    /// setting of KEY if it has one (e.g. `mca("pml", "ucx")` replaces `--mca pml ob1`).
    ///
    /// # Panics
    /// At start, if the MPI is not an Open MPI or the launcher is not the local one.
    pub fn mca(mut self, key: &str, value: &str) -> Self {
        self.mca.push((key.to_string(), value.to_string()));
        self
    }

    /// Runs this executable (e.g. a test fixture, see [`crate::fixtures`]) instead of
    /// building the example; the example then only names the job and sets its defaults.
    /// For a Python example ([`Job::python`]) it is the interpreter that runs the script, in
    /// place of [`Mpi::python`].
    pub fn program(mut self, exe: impl Into<PathBuf>) -> Self {
        self.program = Some(exe.into());
        self
    }

    /// How to start the ranks (default [`Launcher::Local`], the MPI's own starter): e.g.
    /// through Slurm with [`crate::slurm::Cluster::srun`]. A Slurm launcher sets the rank
    /// count to `nodes * per_node`, whatever [`JobBuilder::nprocs`] said.
    pub fn launcher(mut self, launcher: Launcher) -> Self {
        self.launcher = launcher;
        self
    }

    /// Number of ranks (default: [`Example::default_nprocs`], [`PyExample::default_nprocs`]).
    pub fn nprocs(mut self, nprocs: usize) -> Self {
        self.nprocs = nprocs;
        self
    }

    /// Program arguments, replacing [`Example::default_args`]. For a Python example they
    /// follow the script (which has none by default).
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

    /// Builds the example if needed, starts the job and waits until every rank is ready. A
    /// job whose start failed because Open MPI's TCP BTL could not connect two of its ranks
    /// ([`JobError::open_mpi_tcp_connect_failed`]) is started once more, saying so on stderr.
    ///
    /// # Panics
    /// On any other failure, or that one twice, with the captured output: see
    /// [`JobBuilder::try_start`].
    pub fn start(self) -> Job {
        let nprocs = self.launcher.nprocs().unwrap_or(self.nprocs);
        let what = format!("{} x{nprocs} under {} ({})", self.what, self.mpi, self.launcher);
        match self.clone().try_start() {
            Ok(job) => job,
            Err(e) if e.open_mpi_tcp_connect_failed() => {
                eprintln!(
                    "[mpiq-tests] RETRY: starting {what}: Open MPI's TCP BTL could not connect two of its \
                     ranks while they started; starting the job once more. The first start:\n{e}"
                );
                self.try_start()
                    .unwrap_or_else(|e| panic!("starting {what} (the second time): {e}"))
            }
            Err(e) => panic!("starting {what}: {e}"),
        }
    }

    /// [`JobBuilder::start`], or `None` after printing `SKIPPED: ...` with the reason when
    /// the harness declares the example unsupported by the MPI
    /// ([`Example::unsupported_reason`], [`PyExample::unsupported_reason`]).
    pub fn start_supported(self) -> Option<Job> {
        if let Some(why) = self.what.unsupported_reason(self.mpi) {
            eprintln!("SKIPPED: {} under {}: {why}", self.what, self.mpi);
            return None;
        }
        Some(self.start())
    }

    /// Like [`JobBuilder::start`] but returns start-up failures as errors. Building the
    /// example still panics on failure (see [`build_example`]), and so does a Python example
    /// whose MPI has no mpi4py (see [`Mpi::python`]). On error everything that was started
    /// has been killed.
    pub fn try_start(mut self) -> Result<Job, JobError> {
        let (exe, args) = match self.what {
            Program::C(example) => {
                let exe = match &self.program {
                    Some(p) => p.clone(),
                    None => build_example(self.mpi, example),
                };
                (exe, self.args.clone())
            }
            Program::Python(example) => {
                if let Some(why) = example.unsupported_reason(self.mpi) {
                    panic!("cannot run `{example}` with {}: {why}", self.mpi);
                }
                let python = match &self.program {
                    Some(p) => p.clone(),
                    None => self
                        .mpi
                        .python()
                        .expect("an MPI that runs Python examples has a Python"),
                };
                let mut args = vec![example.script().into_os_string()];
                args.extend(self.args.iter().cloned());
                (python, args)
            }
        };
        self.nprocs = self.launcher.nprocs().unwrap_or(self.nprocs);
        let job_name = launcher::unique_job_name();
        let mut cmd = if self.mca.is_empty() {
            self.launcher.command(self.mpi, self.nprocs, &exe, &args, &job_name)
        } else {
            assert!(
                self.mpi.is_open_mpi() && self.launcher == Launcher::Local,
                "--mca settings are for Open MPI under its own starter (here {} under {})",
                self.mpi,
                self.launcher
            );
            self.mpi.starter_command_mca(self.nprocs, &exe, &args, &self.mca)
        };
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
        if let Program::Python(_) = self.what {
            // Unbuffered, so that output (READY lines, tracebacks) reaches the harness at once;
            // no __pycache__ in the source tree; a user's search path and mpi4py settings out.
            for (key, _) in std::env::vars_os() {
                let scrub = key
                    .to_str()
                    .is_some_and(|k| k.starts_with("MPI4PY_") || PYTHON_SCRUBBED_ENV.contains(&k));
                if scrub {
                    cmd.env_remove(&key);
                }
            }
            cmd.env("PYTHONUNBUFFERED", "1")
                .env("PYTHONDONTWRITEBYTECODE", "1")
                .env("PYTHONNOUSERSITE", "1");
        }
        cmd.env("MPIQ_EXAMPLE_LIFETIME", self.lifetime_secs.to_string());
        let dir = JobDir::new();
        dir.apply(&mut cmd);
        cmd.envs(self.launcher.env(self.mpi));
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        // Its own process group, so that a signal to the test's group (Ctrl-C) does not reach
        // it and Drop can signal the whole group.
        cmd.process_group(0);
        // The ranks spin while they wait: below the tools that read them.
        crate::run::at_low_priority(&mut cmd);

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
            what: self.what,
            exe,
            nprocs: self.nprocs,
            starter_pid: child.id(),
            child,
            reaped: None,
            ranks: Vec::new(),
            processes: vec![starter],
            shared,
            slurm: self.launcher.slurm_conf().map(|conf| SlurmJob {
                conf: conf.to_path_buf(),
                name: job_name,
                id: None,
            }),
            in_allocation: matches!(self.launcher, Launcher::MpirunInAllocation { .. }),
            _dir: dir,
        };
        job.wait_ready(self.ready_timeout)?;
        let slurm = match job.slurm_job_id() {
            Some(id) => format!(", Slurm job {id}"),
            None => String::new(),
        };
        eprintln!(
            "[mpiq-tests] {} x{} under {} ({}): ready in {:.2?} (starter {}{slurm}, ranks {})",
            job.what,
            job.nprocs,
            job.mpi,
            self.launcher,
            started.elapsed(),
            job.starter_pid,
            ranks_list(&job.ranks)
        );
        Ok(job)
    }
}

/// A running MPI job of one example. Dropping it kills everything it started, also while a
/// test panics: SIGKILL to the starter's process group *and* to every recorded process (the
/// ranks and the starter's descendants, such as `hydra_pmi_proxy`, which put themselves in
/// other sessions), then the starter is reaped.
///
/// A job started through Slurm ([`JobBuilder::launcher`]) is ended the same way (the process
/// group is `srun`'s or `salloc`'s, the recorded processes include the ranks and what runs
/// between them and `slurmstepd`), then `scancel`led, and Drop waits until its ranks are gone.
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
    what: Program,
    exe: PathBuf,
    nprocs: usize,
    starter_pid: u32,
    child: Child,
    reaped: Option<ExitStatus>,
    ranks: Vec<Rank>,
    processes: Vec<Proc>,
    shared: Shared,
    /// The Slurm job, under a Slurm launcher.
    slurm: Option<SlurmJob>,
    /// Whether `child` is `salloc` and the starter its child.
    in_allocation: bool,
    /// The job's TMPDIR and shared-memory files: dropped after [`Drop::drop`] ended the job.
    _dir: JobDir,
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

    /// [`Job::gcore`] of every rank, in rank order, all of one moment: every rank is held
    /// stopped (`SIGSTOP`) while the cores are written, and continued after (also when a
    /// `gcore` fails). Written one after another from a running job, the cores need not
    /// agree: a healthy ring's ranks caught at different steps wait for messages of
    /// different steps, which reads as a cycle.
    pub fn gcore_all(&self, dir: &Path) -> Vec<PathBuf> {
        struct Held(Vec<u32>);
        impl Drop for Held {
            fn drop(&mut self) {
                for pid in &self.0 {
                    let _ = std::process::Command::new("kill")
                        .args(["-CONT", &pid.to_string()])
                        .status();
                }
            }
        }
        let pids: Vec<u32> = self.ranks().iter().map(|r| r.pid).collect();
        let held = Held(pids.clone());
        for pid in &pids {
            let _ = std::process::Command::new("kill")
                .args(["-STOP", &pid.to_string()])
                .status();
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while !pids.iter().all(|&p| crate::procs::state(p) == Some('T')) {
            assert!(
                Instant::now() < deadline,
                "the ranks {pids:?} did not stop for their cores"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let cores = (0..self.ranks().len()).map(|r| self.gcore(r, dir)).collect();
        drop(held);
        cores
    }

    /// Options for a job of `example` under `mpi`, with the example's default rank count and
    /// arguments; finish with [`JobBuilder::start`].
    pub fn builder(mpi: Mpi, example: Example) -> JobBuilder {
        JobBuilder {
            mpi,
            what: Program::C(example),
            nprocs: example.default_nprocs(),
            args: example.default_args().iter().map(OsString::from).collect(),
            env: Vec::new(),
            ready_timeout: DEFAULT_READY_TIMEOUT,
            lifetime_secs: DEFAULT_EXAMPLE_LIFETIME_SECS,
            program: None,
            launcher: Launcher::Local,
            mca: Vec::new(),
        }
    }

    /// Options for a job of the Python example `example` under `mpi`: `<starter> -n N
    /// <venv>/bin/python examples/python/<name>.py` with the MPI's mpi4py ([`Mpi::python`]),
    /// [`PyExample::default_nprocs`] ranks and no arguments; finish with
    /// [`JobBuilder::start`]. The ranks get `PYTHONUNBUFFERED=1` and
    /// `PYTHONDONTWRITEBYTECODE=1`, and none of [`PYTHON_SCRUBBED_ENV`] or `MPI4PY_*`.
    ///
    /// ```no_run
    /// use mpiq_tests::{Job, Mpi, PyExample};
    ///
    /// let job = Job::python(Mpi::OpenMpi, PyExample::P2pCycle).nprocs(3).start();
    /// assert_eq!(job.python_example(), Some(PyExample::P2pCycle));
    /// ```
    pub fn python(mpi: Mpi, example: PyExample) -> JobBuilder {
        JobBuilder {
            mpi,
            what: Program::Python(example),
            nprocs: example.default_nprocs(),
            args: Vec::new(),
            env: Vec::new(),
            ready_timeout: DEFAULT_READY_TIMEOUT,
            lifetime_secs: DEFAULT_EXAMPLE_LIFETIME_SECS,
            program: None,
            launcher: Launcher::Local,
            mca: Vec::new(),
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
    ///
    /// # Panics
    /// For a job of a Python example: see [`Job::python_example`] and [`Job::runs`].
    pub fn example(&self) -> Example {
        match self.what {
            Program::C(example) => example,
            Program::Python(example) => panic!("the job runs the Python example {example}, not a C example"),
        }
    }

    /// The Python example it runs, or `None` for a C example.
    pub fn python_example(&self) -> Option<PyExample> {
        match self.what {
            Program::Python(example) => Some(example),
            Program::C(_) => None,
        }
    }

    /// What it runs.
    pub fn runs(&self) -> Program {
        self.what
    }

    /// The example executable (for a Python example: the Python interpreter; the script is
    /// [`PyExample::script`]).
    pub fn exe(&self) -> &Path {
        &self.exe
    }

    /// Number of ranks.
    pub fn nprocs(&self) -> usize {
        self.nprocs
    }

    /// Pid of the starter (`mpirun` / `mpiexec`; Open MPI 5's `mpirun` becomes `prterun`),
    /// the leader of the job's process group. Under [`Launcher::Srun`] it is `srun`; under
    /// [`Launcher::MpirunInAllocation`] the `mpirun` / `mpiexec` that `salloc` runs (in a
    /// process group of its own).
    pub fn starter_pid(&self) -> u32 {
        self.starter_pid
    }

    /// The Slurm job id of a job started through Slurm (`None` otherwise, or if it could not
    /// be learnt).
    pub fn slurm_job_id(&self) -> Option<u32> {
        self.slurm.as_ref().and_then(|s| s.id)
    }

    /// The Slurm node `rank` runs on (its `SLURMD_NODENAME`, e.g. `n2`), while it runs;
    /// `None` for a job not started through Slurm.
    ///
    /// # Panics
    /// If the job has no such rank.
    pub fn node_of(&self, rank: usize) -> Option<String> {
        launcher::node_of_pid(self.pid_of(rank))
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
            .unwrap_or_else(|| panic!("{} x{} has no rank {rank}", self.what, self.nprocs))
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
                    self.what,
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
        let leader = self.child.id();
        if self.in_allocation {
            if let Some(starter) = launcher::allocation_starter(leader, Duration::from_secs(5)) {
                self.starter_pid = starter.pid;
            }
        }
        if let Some(slurm) = &mut self.slurm {
            slurm.find_id(&lock(&self.shared).output.stderr);
        }
        if let Some(now) = Proc::of(leader) {
            if let Some(first) = self.processes.first_mut() {
                if first.pid == now.pid && first.start_time == now.start_time {
                    *first = now;
                }
            }
        }
        let mut known = procs::descendants(leader);
        if self.slurm.is_some() {
            let ranks: Vec<u32> = self.ranks.iter().map(|r| r.pid).collect();
            known.extend(launcher::rank_keepers(&ranks));
        }
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
        // The leader of the job's process group: the starter, or `srun` / `salloc`.
        let leader = self.child.id();
        let group_alive = self.try_reap().is_none();
        let mut targets = self.processes.clone();
        if group_alive {
            // Freeze the leader's group first so that nothing forks while we look, then find
            // what was started since readiness (twice: a stopped proxy cannot fork either).
            // The leader leads its own group (process_group(0)) and is not yet reaped, so
            // the group id cannot have been recycled.
            procs::send_signal(-(leader as c_int), procs::SIGSTOP);
            for _ in 0..2 {
                for p in procs::descendants(leader) {
                    p.signal(procs::SIGSTOP);
                    targets.push(p);
                }
            }
            procs::send_signal(-(leader as c_int), procs::SIGKILL);
        }
        // Recorded processes are killed only if they are still the same process (pid and
        // start time), so a recycled pid is never hit. Under Slurm these include the ranks,
        // which run under `slurmstepd`, not under the leader.
        for p in &targets {
            p.signal(procs::SIGKILL);
        }
        if self.reaped.is_none() {
            let _ = self.child.kill();
            self.reaped = self.child.wait().ok();
        }
        if let Some(slurm) = &self.slurm {
            slurm.cancel();
            let ranks: Vec<Proc> = self
                .ranks
                .iter()
                .filter_map(|r| self.processes.iter().find(|p| p.pid == r.pid).cloned())
                .collect();
            let deadline = Instant::now() + Duration::from_secs(30);
            while !procs::survivors(&ranks).is_empty() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if !slurm.wait_gone(Duration::from_secs(30)) {
                eprintln!(
                    "[mpiq-tests] Slurm job {} is still queued 30 s after scancel",
                    slurm.name
                );
            }
            let left = procs::survivors(&ranks);
            if !left.is_empty() {
                eprintln!(
                    "[mpiq-tests] ranks still alive 30 s after the end of Slurm job {}: {left:?}",
                    slurm.name
                );
            }
        }
    }
}
