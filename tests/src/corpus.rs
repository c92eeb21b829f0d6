//! Real applications, as users run them: third-party MPI codes from the
//! distribution (Debian's packages, unmodified, optimized, without line
//! information), with their own example inputs, under Debian's Open MPI
//! (`/usr/bin/mpirun`), 4 ranks. The tests put them in trouble only from
//! outside, as real jobs meet it: a signal, an output file that never opens
//! (a FIFO nobody reads, as on a hung file system), a stop/continue cycle
//! (an overloaded node). tests/tests/corpus.rs.
//!
//! | app | language | package | input |
//! |---|---|---|---|
//! | LAMMPS (`lmp`) | C++ | lammps, lammps-examples | examples/melt, 32,000 atoms |
//! | HPC Challenge (`hpcc`) | C | hpcc | its example hpccinf.txt, N = 4000 |
//! | Elk (`elk-lapw`) | Fortran | elk-lapw | examples/basic/Si, 8x8x8 k-points |
//!
//! `scripts/testbed` installs the packages.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::fixtures::WorkDir;
use crate::procs::{self, Proc};
use crate::JobDir;

/// Ranks of every corpus job.
pub const RANKS: usize = 4;

/// `steps` up to this run a short input ([`App::prepare`]): a run a test
/// waits to its end.
pub const SHORT: u64 = 1000;

/// A real application of the corpus.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum App {
    /// LAMMPS, molecular dynamics (C++): a Lennard-Jones melt.
    Lammps,
    /// HPC Challenge (C): HPL, PTRANS, RandomAccess, STREAM, FFT, b_eff.
    Hpcc,
    /// Elk, an all-electron DFT code (Fortran): silicon's ground state.
    Elk,
}

/// What the job is made to meet from outside when it starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// As it comes: runs to its end.
    Healthy,
    /// Rank 0's output never goes anywhere, as on a file system that
    /// never answers: its first output file is a FIFO nobody reads, so
    /// that its open (C, C++: write only) never returns; for Elk, whose
    /// Fortran runtime opens it for reading and writing (which returns at
    /// once), a FIFO held full, so that its first write never returns.
    OutputNeverCompletes,
}

impl App {
    /// Every application of the corpus.
    pub const ALL: [App; 3] = [App::Lammps, App::Hpcc, App::Elk];

    /// The program, as the distribution installs it.
    pub fn exe(self) -> &'static str {
        match self {
            App::Lammps => "/usr/bin/lmp",
            App::Hpcc => "/usr/bin/hpcc",
            App::Elk => "/usr/bin/elk-lapw",
        }
    }

    /// Its name in words.
    pub fn name(self) -> &'static str {
        match self {
            App::Lammps => "LAMMPS (C++)",
            App::Hpcc => "HPC Challenge (C)",
            App::Elk => "Elk (Fortran)",
        }
    }

    /// The input the application ships, which the job's inputs are made from.
    fn shipped_input(self) -> &'static str {
        match self {
            App::Lammps => "/usr/share/lammps/examples/melt/in.melt",
            App::Hpcc => "/usr/share/doc/hpcc/examples/_hpccinf.txt",
            App::Elk => "/usr/share/doc/elk-lapw/examples/basic/Si/elk.in",
        }
    }

    /// The file rank 0 opens for its output first (relative to the job's
    /// directory).
    fn first_output(self) -> &'static str {
        match self {
            App::Lammps => "dump.melt",
            App::Hpcc => "hpccoutf.txt",
            App::Elk => "INFO.OUT",
        }
    }

    /// Why the application cannot run here, if it cannot: a loud reason,
    /// for a test that must then fail (scripts/testbed installs it).
    pub fn missing(self) -> Option<String> {
        [self.exe(), self.shipped_input(), "/usr/bin/mpirun"]
            .into_iter()
            .find(|p| !Path::new(p).exists())
            .map(|p| format!("{} is not installed ({p} is missing): run scripts/testbed", self.name()))
    }

    /// Writes the job's inputs into `dir`: the shipped input, sized to run
    /// for `steps` (LAMMPS' time steps; the others run their input whole,
    /// a smaller one for `steps` up to [`SHORT`]: HPCC at N = 1000, Elk on
    /// 4x4x4 k-points, some 5 to 15 s alone);
    /// with [`Start::OutputNeverCompletes`], rank 0's first output file a FIFO
    /// (held full for Elk: the returned end, to keep while the job runs).
    fn prepare(self, dir: &Path, steps: u64, start: Start) -> (Vec<String>, Option<fs::File>) {
        let shipped =
            fs::read_to_string(self.shipped_input()).unwrap_or_else(|e| panic!("{}: {e}", self.shipped_input()));
        let (file, text, args) = match self {
            App::Lammps => {
                let text: Vec<String> = shipped
                    .lines()
                    .map(|l| {
                        if l.starts_with("region") {
                            "region\t\tbox block 0 20 0 20 0 20".to_string()
                        } else if l.starts_with("run") {
                            format!("run\t\t{steps}")
                        } else if l.starts_with("thermo") {
                            "thermo\t\t100".to_string()
                        } else if l.starts_with("#dump\t\tid") {
                            // The example's own dump, every 100 steps.
                            "dump\t\tid all atom 100 dump.melt".to_string()
                        } else {
                            l.to_string()
                        }
                    })
                    .collect();
                (
                    "in.melt",
                    text.join("\n") + "\n",
                    vec!["-in".to_string(), "in.melt".to_string()],
                )
            }
            App::Hpcc => {
                // One problem size, N = 4000 (line 6), on the 2 x 2 grid it names.
                let text: Vec<String> = shipped
                    .lines()
                    .enumerate()
                    .map(|(i, l)| {
                        if i == 5 {
                            if steps <= SHORT {
                                "1000         Ns"
                            } else {
                                "4000         Ns"
                            }
                            .to_string()
                        } else {
                            l.to_string()
                        }
                    })
                    .collect();
                ("hpccinf.txt", text.join("\n") + "\n", Vec::new())
            }
            App::Elk => {
                let k = if steps <= SHORT {
                    "\n  4  4  4\n"
                } else {
                    "\n  8  8  8\n"
                };
                let text = shipped
                    .replace("'../../../species/'", "'/usr/share/elk-lapw/species/'")
                    .replace("\n  2  2  2\n", k);
                ("elk.in", text, Vec::new())
            }
        };
        fs::write(dir.join(file), text).unwrap_or_else(|e| panic!("{}: {e}", dir.join(file).display()));
        let mut held = None;
        if start == Start::OutputNeverCompletes {
            let fifo = dir.join(self.first_output());
            let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("no NUL in a path");
            // SAFETY: `c` is a valid NUL-terminated path for the call's duration.
            let rc = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
            assert_eq!(rc, 0, "mkfifo {}: {}", fifo.display(), std::io::Error::last_os_error());
            if self == App::Elk {
                held = Some(fill(&fifo));
            }
        }
        (args, held)
    }

    /// The pids of the application's processes among `procs` (a job's,
    /// under its starter or under `mpiq run`), by world rank
    /// (`OMPI_COMM_WORLD_RANK`).
    pub fn ranks_among(self, procs: &[Proc]) -> Vec<u32> {
        let exe = Path::new(self.exe());
        let mut ranks: Vec<(usize, u32)> = procs
            .iter()
            .filter(|p| fs::read_link(format!("/proc/{}/exe", p.pid)).is_ok_and(|e| e == exe))
            .filter_map(|p| Some((world_rank(p.pid)?, p.pid)))
            .collect();
        ranks.sort();
        ranks.into_iter().map(|(_, pid)| pid).collect()
    }

    /// Whether the job's ranks are where the tests want them: in the
    /// main computation (LAMMPS printed its first thermo line in `output`,
    /// the job's standard output so far, HPCC began RandomAccess, Elk its
    /// first self-consistent loop), or, with the output a FIFO, rank 0
    /// asleep opening it.
    fn is_ready(self, dir: &Path, start: Start, rank0: Option<u32>, output: &str) -> bool {
        let has = |file: &str, what: &str| fs::read_to_string(dir.join(file)).is_ok_and(|t| t.contains(what));
        match start {
            // Asleep in the FIFO's open (wait_for_partner) or write (pipe_write).
            Start::OutputNeverCompletes => rank0.is_some_and(|pid| {
                procs::state(pid) == Some('S')
                    && fs::read_to_string(format!("/proc/{pid}/wchan"))
                        .is_ok_and(|w| w.contains("partner") || w.contains("fifo") || w.contains("pipe"))
            }),
            Start::Healthy => match self {
                App::Lammps => output.contains("Step Temp"),
                App::Hpcc => has("hpccoutf.txt", "Begin of MPIRandomAccess section"),
                App::Elk => has("INFO.OUT", "Loop number :"),
            },
        }
    }
}

/// A running corpus job: `mpirun -n 4 APP` in its own directory (inputs,
/// outputs, the job's scratch), its own process group, at the lowest
/// priority. Dropping it kills everything it started.
pub struct AppJob {
    /// The application.
    pub app: App,
    child: Child,
    /// The ranks' pids, by world rank.
    pub ranks: Vec<u32>,
    recorded: Vec<Proc>,
    dir: WorkDir,
    _scratch: JobDir,
    /// The full FIFO's end the test holds open ([`Start::OutputNeverCompletes`]).
    _held: Option<fs::File>,
}

impl AppJob {
    /// The command that runs `app` as [`AppJob::start`] does, in `dir`
    /// (its inputs written there), for `mpiq run` to start.
    pub fn command(app: App, dir: &Path, steps: u64, start: Start) -> (Command, JobDir, Option<fs::File>) {
        if let Some(why) = app.missing() {
            panic!("{why}");
        }
        let (args, held) = app.prepare(dir, steps, start);
        let mut cmd = Command::new("/usr/bin/mpirun");
        cmd.args(["--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,vader"])
            .args(["-x", "OMP_NUM_THREADS=1", "-n"])
            .arg(RANKS.to_string())
            .arg(app.exe())
            .args(args)
            .current_dir(dir);
        for (key, _) in std::env::vars_os() {
            if key
                .to_str()
                .is_some_and(|k| crate::job::SCRUBBED_ENV_PREFIXES.iter().any(|p| k.starts_with(p)))
            {
                cmd.env_remove(&key);
            }
        }
        cmd.env_remove("LD_LIBRARY_PATH").env("OMP_NUM_THREADS", "1");
        let scratch = JobDir::new();
        scratch.apply(&mut cmd);
        (cmd, scratch, held)
    }

    /// `mpiq run OPTIONS -- ` the command of [`AppJob::command`] (`app`,
    /// `steps` steps, its inputs in `dir`, as `start` says), run in `dir`,
    /// with the job's scratch directory and the FIFO's end the test holds
    /// ([`Start::OutputNeverCompletes`]), to keep until the job is over.
    pub fn under_mpiq_run(
        app: App,
        dir: &Path,
        steps: u64,
        start: Start,
        options: &[&str],
    ) -> (Command, JobDir, Option<fs::File>) {
        let (starter, scratch, held) = AppJob::command(app, dir, steps, start);
        let mut cmd = crate::frontends::cli_command(&["run"]);
        cmd.args(options)
            .arg("--")
            .arg(starter.get_program())
            .args(starter.get_args());
        for (k, v) in starter.get_envs() {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        cmd.current_dir(dir);
        (cmd, scratch, held)
    }

    /// Starts `app` and waits until its ranks are in their main
    /// computation (or, with [`Start::OutputNeverCompletes`], rank 0 asleep in
    /// the open), at most 90 s.
    pub fn start(app: App, steps: u64, start: Start) -> AppJob {
        crate::ptrace::require_ptrace();
        let dir = WorkDir::new(&format!("corpus-{app:?}").to_lowercase());
        let (mut cmd, scratch, held) = AppJob::command(app, dir.root(), steps, start);
        let out = fs::File::create(dir.path("output.txt")).expect("the job's output file");
        let err = out.try_clone().expect("the job's output file");
        cmd.stdin(Stdio::null()).stdout(out).stderr(err).process_group(0);
        crate::run::at_low_priority(&mut cmd);
        let started = Instant::now();
        let child = cmd.spawn().unwrap_or_else(|e| panic!("starting {cmd:?}: {e}"));
        let mut job = AppJob {
            app,
            ranks: Vec::new(),
            recorded: Vec::new(),
            child,
            dir,
            _scratch: scratch,
            _held: held,
        };
        let deadline = started + Duration::from_secs(90);
        loop {
            job.find_ranks();
            let ready = job.ranks.len() == RANKS
                && app.is_ready(job.dir.root(), start, job.ranks.first().copied(), &job.output());
            if ready {
                break;
            }
            if let Ok(Some(status)) = job.child.try_wait() {
                panic!("{} ended before it was ready ({status}):\n{}", app.name(), job.output());
            }
            assert!(
                Instant::now() < deadline,
                "{} was not ready within 90 s (ranks {:?}):\n{}",
                app.name(),
                job.ranks,
                job.output()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!(
            "[mpiq-tests] {} x{RANKS} under Debian's Open MPI ({start:?}): ready in {:.2?} (starter {}, ranks {:?})",
            app.name(),
            started.elapsed(),
            job.child.id(),
            job.ranks
        );
        job
    }

    /// The ranks (the application's processes under the starter, by their
    /// `OMPI_COMM_WORLD_RANK`) and everything under the starter, recorded
    /// to be ended.
    fn find_ranks(&mut self) {
        let under = procs::descendants(self.child.id());
        self.ranks = self.app.ranks_among(&under);
        for p in under {
            if !self.recorded.contains(&p) {
                self.recorded.push(p);
            }
        }
    }

    /// The starter's pid (`mpirun`).
    pub fn starter(&self) -> u32 {
        self.child.id()
    }

    /// The job's directory.
    pub fn dir(&self) -> &Path {
        self.dir.root()
    }

    /// What the job printed so far (both streams).
    pub fn output(&self) -> String {
        fs::read_to_string(self.dir.path("output.txt")).unwrap_or_default()
    }

    /// Sends `sig` (`STOP`, `CONT`, `KILL`) to world rank `rank`.
    pub fn signal(&self, rank: usize, sig: &str) {
        let ok = Command::new("kill")
            .args([format!("-{sig}"), self.ranks[rank].to_string()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill -{sig} {} (rank {rank}) failed", self.ranks[rank]);
    }

    /// Whether the starter has exited (and its status).
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// A path in the job's directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path(name)
    }
}

impl Drop for AppJob {
    fn drop(&mut self) {
        // Everything under the starter, by pid (SIGKILL ends a stopped
        // rank too).
        self.find_ranks();
        procs::end_job(&mut self.child, &self.recorded);
    }
}

/// The ranks of `app`'s job under the tool `tool` (`mpiq run`), by world
/// rank, once they are where [`AppJob::start`] waits for them (`start`; the
/// job's inputs and outputs in `dir`): at most 90 s, else the test fails
/// with `output()`.
pub fn ready_under(app: App, dir: &Path, start: Start, tool: u32, output: impl Fn() -> String) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let ranks = app.ranks_among(&procs::descendants(tool));
        if ranks.len() == RANKS && app.is_ready(dir, start, ranks.first().copied(), &output()) {
            return ranks;
        }
        assert!(
            Instant::now() < deadline,
            "{} was not ready within 90 s under mpiq run (ranks {ranks:?}):\n{}",
            app.name(),
            output()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Opens the FIFO `fifo` for reading and writing (so that a writer's open
/// returns), shrinks its buffer to a page and fills it: every write into it
/// then sleeps until someone reads, and no one does. The returned end keeps
/// it so.
fn fill(fifo: &Path) -> fs::File {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(fifo)
        .unwrap_or_else(|e| panic!("opening {}: {e}", fifo.display()));
    // SAFETY: fcntl(F_SETPIPE_SZ) on a pipe this test opened; a failure
    // leaves the default size, filled all the same below.
    unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETPIPE_SZ, 4096) };
    let page = [b'.'; 512];
    while f.write(&page).is_ok_and(|n| n > 0) {}
    f
}

/// A rank's `OMPI_COMM_WORLD_RANK`, from its environment (a process the
/// test started).
fn world_rank(pid: u32) -> Option<usize> {
    let env = fs::read(format!("/proc/{pid}/environ")).ok()?;
    env.split(|&b| b == 0)
        .find_map(|kv| kv.strip_prefix(b"OMPI_COMM_WORLD_RANK="))
        .and_then(|v| std::str::from_utf8(v).ok()?.parse().ok())
}

/// Holds world rank `rank` of `job` stopped `stopped` of every `period`
/// (SIGSTOP, then SIGCONT), as an overloaded node slows a rank, until the
/// returned guard is dropped (the rank is continued then).
pub fn slow_down(job: &AppJob, rank: usize, period: Duration, stopped: Duration) -> SlowDown {
    slow_down_pid(job.ranks[rank], period, stopped)
}

/// [`slow_down`] for the process `pid` (a rank this test started).
pub fn slow_down_pid(pid: u32, period: Duration, stopped: Duration) -> SlowDown {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    let thread = std::thread::spawn(move || {
        let signal = |sig: i32| {
            // SAFETY: kill(2) with a pid this test started and a valid signal.
            unsafe { libc::kill(pid as i32, sig) };
        };
        while !flag.load(std::sync::atomic::Ordering::Relaxed) {
            signal(libc::SIGSTOP);
            std::thread::sleep(stopped);
            signal(libc::SIGCONT);
            std::thread::sleep(period.saturating_sub(stopped));
        }
        signal(libc::SIGCONT);
    });
    SlowDown {
        stop,
        thread: Some(thread),
    }
}

/// A rank held in a stop/continue cycle ([`slow_down`]).
pub struct SlowDown {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for SlowDown {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
