//! A Slurm cluster on this one machine for the multi-node tests (issue 13): `slurmctld` and N
//! `slurmd -N nX` started by `scripts/slurm-cluster` in a directory of their own, stopped
//! (and the directory removed) when the [`Cluster`] is dropped.
//!
//! ```no_run
//! use mpiq_tests::slurm::{self, Cluster};
//! use mpiq_tests::{Example, Job, Mpi};
//!
//! if !slurm::available() {
//!     return; // printed SKIPPED (outside CI; in CI a missing Slurm panics)
//! }
//! let cluster = Cluster::start(4, 8); // n1..n4, 8 CPUs each
//! let job = Job::builder(Mpi::Mpich, Example::Ring).launcher(cluster.srun(4, 2)).start();
//! assert_eq!(job.node_of(0).as_deref(), Some("n1"));
//! drop(job); // before the cluster (locals drop in reverse order anyway)
//! ```

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::launcher::Launcher;
use crate::procs::{self, Proc};
use crate::run::run_within;

/// Set it (to anything) to keep a dropped cluster's directory (config, logs, state) for a
/// post-mortem; its daemons are stopped all the same.
pub const KEEP_ENV: &str = "MPIQ_KEEP_SLURM";

/// The programs a [`Cluster`] and the Slurm launchers need (`scripts/testbed` installs them
/// with Debian's `slurmctld`, `slurmd` and `slurm-client`).
pub const PROGRAMS: &[&str] = &["slurmctld", "slurmd", "srun", "salloc", "squeue", "scancel", "sinfo"];

/// How long starting or stopping a cluster may take before the test fails.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);

/// `scripts/slurm-cluster` of this repository.
pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/slurm-cluster")
}

/// The [`PROGRAMS`] not found on `PATH`.
pub fn missing_programs() -> Vec<&'static str> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    PROGRAMS
        .iter()
        .copied()
        .filter(|p| !std::env::split_paths(&path).any(|dir| dir.join(p).is_file()))
        .collect()
}

/// Whether Slurm is installed, for a test to return early when it is not. Outside CI a
/// missing Slurm prints `SKIPPED: ...` with what is missing and how to install it, and
/// returns `false`.
///
/// # Panics
/// In CI (`CI=true`), whose test bed installs Slurm: there a missing Slurm is a failure,
/// never a skip.
pub fn available() -> bool {
    let missing = missing_programs();
    if missing.is_empty() {
        return true;
    }
    let why = format!(
        "Slurm is not installed (no {} on PATH): run `scripts/testbed`, or `apt-get install \
         slurmctld slurmd slurm-client`",
        missing.join(", ")
    );
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{why} (CI installs it: a missing Slurm is a failure there)");
    }
    eprintln!("SKIPPED: {why}");
    false
}

/// The `slurmstepd` processes of the cluster whose `slurm.conf` is `conf`: those whose
/// `SLURM_CONF` (inherited from the `slurmd` that started them; only that variable is read
/// from `/proc/PID/environ`) names it. A step whose `slurmd` was stopped before the step
/// ended waits for it forever, so none may be left once the cluster is stopped.
pub fn step_daemons(conf: &Path) -> Vec<Proc> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut wanted = b"SLURM_CONF=".to_vec();
    wanted.extend_from_slice(conf.as_os_str().as_encoded_bytes());
    let mut found: Vec<Proc> = dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(Proc::of)
        .filter(|p| p.name == "slurmstepd" && p.is_alive())
        .filter(|p| {
            let environ = std::fs::read(format!("/proc/{}/environ", p.pid)).unwrap_or_default();
            environ.split(|&b| b == 0).any(|var| var == wanted.as_slice())
        })
        .collect();
    found.sort();
    found
}

/// A running Slurm cluster on this machine: nodes `n1..nN` in partition `mpiq`, every daemon
/// started from a fresh directory `<temp dir>/mpiq-slurm-<pid>-<n>`. Dropping it (also while
/// a test panics) runs `scripts/slurm-cluster stop DIR` (which cancels the cluster's jobs,
/// waits for the queue to empty, stops the daemons by their recorded pids and kills the
/// cluster's leftover `slurmstepd`s), kills any daemon or step that survived it, and removes
/// the directory unless [`KEEP_ENV`] is set.
///
/// A [`crate::Job`] started on it holds only the path of its `slurm.conf`: drop the job
/// first (declare the cluster before the job).
#[derive(Debug)]
pub struct Cluster {
    dir: PathBuf,
    nodes: Vec<String>,
    daemons: Vec<Proc>,
}

impl Cluster {
    /// Starts a cluster of `nodes` nodes with `cpus` CPUs each and waits until every node is
    /// idle (`scripts/slurm-cluster start DIR NODES CPUS`, about a second).
    ///
    /// # Panics
    /// If the script fails or times out, with its output and the end of every log in
    /// `DIR/log`; if Slurm is not installed (see [`available`]).
    pub fn start(nodes: usize, cpus: usize) -> Cluster {
        assert!(nodes >= 1 && cpus >= 1, "a cluster needs a node and a CPU");
        let missing = missing_programs();
        assert!(
            missing.is_empty(),
            "Slurm is not installed (no {}): run `scripts/testbed`",
            missing.join(", ")
        );
        static CLUSTERS: AtomicUsize = AtomicUsize::new(0);
        let n = CLUSTERS.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("mpiq-slurm-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
        // From here on, Drop stops whatever the script started, also if it fails.
        let mut cluster = Cluster {
            dir,
            nodes: (1..=nodes).map(|i| format!("n{i}")).collect(),
            daemons: Vec::new(),
        };
        let mut cmd = Command::new(script());
        cmd.arg("start")
            .arg(&cluster.dir)
            .arg(nodes.to_string())
            .arg(cpus.to_string())
            .env_remove("SLURM_CONF");
        let r = run_within(cmd, SCRIPT_TIMEOUT);
        cluster.daemons = cluster.recorded_daemons();
        let expected = format!("export SLURM_CONF={}", cluster.conf().display());
        if !r.success || !r.stdout.contains(&expected) {
            panic!(
                "scripts/slurm-cluster start {} {nodes} {cpus} failed:\n{r}\n{}",
                cluster.dir.display(),
                cluster.log_tails()
            );
        }
        assert_eq!(
            cluster.daemons.len(),
            nodes + 1,
            "{}/pids should name slurmctld and {nodes} slurmd: {:?}",
            cluster.dir.display(),
            cluster.daemons
        );
        eprintln!(
            "[mpiq-tests] Slurm cluster of {nodes} nodes x {cpus} CPUs up in {:.2?} ({})",
            r.elapsed,
            cluster.dir.display()
        );
        cluster
    }

    /// The cluster's directory (config, state, logs, pids).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Its `slurm.conf` (`DIR/slurm.conf`), what `SLURM_CONF` must name for any Slurm command.
    pub fn conf(&self) -> PathBuf {
        self.dir.join("slurm.conf")
    }

    /// The environment every Slurm command needs to talk to this cluster: `SLURM_CONF`.
    pub fn env(&self) -> Vec<(OsString, OsString)> {
        vec![("SLURM_CONF".into(), self.conf().into_os_string())]
    }

    /// A command for `program` (say `sinfo`, `squeue`) with [`Cluster::env`] set.
    pub fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        cmd.envs(self.env());
        cmd
    }

    /// The node names, `n1..nN`.
    pub fn nodes(&self) -> &[String] {
        &self.nodes
    }

    /// The daemons the script started (`slurmctld`, then one `slurmd` per node), as recorded
    /// in `DIR/pids` once the cluster was up. Keep a copy, drop the cluster, then check with
    /// [`procs::assert_all_gone`].
    pub fn daemons(&self) -> &[Proc] {
        &self.daemons
    }

    /// The `slurmstepd` processes running the steps of this cluster's jobs now (see
    /// [`step_daemons`]).
    pub fn step_daemons(&self) -> Vec<Proc> {
        step_daemons(&self.conf())
    }

    /// The launcher that starts a job with `srun` on `nodes` nodes, `per_node` ranks each (see
    /// [`Launcher::Srun`]).
    pub fn srun(&self, nodes: usize, per_node: usize) -> Launcher {
        Launcher::Srun {
            conf: self.conf(),
            nodes,
            per_node,
        }
    }

    /// The launcher that starts a job with the MPI's own starter inside `salloc` on `nodes`
    /// nodes, `per_node` ranks each (see [`Launcher::MpirunInAllocation`]).
    pub fn mpirun_in_allocation(&self, nodes: usize, per_node: usize) -> Launcher {
        Launcher::MpirunInAllocation {
            conf: self.conf(),
            nodes,
            per_node,
        }
    }

    /// The live processes named in `DIR/pids` (lines `PID PROGRAM`) that run that program.
    fn recorded_daemons(&self) -> Vec<Proc> {
        let text = std::fs::read_to_string(self.dir.join("pids")).unwrap_or_default();
        text.lines()
            .filter_map(|line| {
                let (pid, program) = line.split_once(' ')?;
                let proc = Proc::of(pid.trim().parse().ok()?)?;
                (proc.name == program.trim()).then_some(proc)
            })
            .collect()
    }

    /// The last 20 lines of every file in `DIR/log`, for a failure message.
    fn log_tails(&self) -> String {
        let mut out = String::new();
        let mut files: Vec<PathBuf> = std::fs::read_dir(self.dir.join("log"))
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        files.sort();
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = &lines[lines.len().saturating_sub(20)..];
            let _ = writeln!(out, "--- {} (last {} lines) ---", file.display(), tail.len());
            for line in tail {
                let _ = writeln!(out, "{line}");
            }
        }
        if out.is_empty() {
            out.push_str("(no logs)\n");
        }
        out
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let mut cmd = Command::new(script());
        cmd.arg("stop").arg(&self.dir);
        // Not run_within: it panics on a timeout, and a panic in drop during a panic aborts.
        let stopped = cmd
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .output();
        match stopped {
            Ok(out) if out.status.success() => {}
            Ok(out) => eprintln!(
                "[mpiq-tests] scripts/slurm-cluster stop {} failed ({}): {}",
                self.dir.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ),
            Err(e) => eprintln!("[mpiq-tests] cannot run scripts/slurm-cluster stop: {e}"),
        }
        // The script kills what it recorded and the cluster's steps; should anything have
        // escaped it (the script failed), kill the daemons recorded at start ourselves.
        for daemon in procs::survivors(&self.daemons).into_iter().chain(self.step_daemons()) {
            eprintln!("[mpiq-tests] Slurm daemon {daemon} survived the stop script: SIGKILL");
            daemon.kill();
        }
        if std::env::var_os(KEEP_ENV).is_some() {
            eprintln!("[mpiq-tests] {KEEP_ENV}: kept {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
