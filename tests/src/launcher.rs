//! How a [`crate::Job`] starts its ranks: with the MPI's own starter on this machine (the
//! default), or through Slurm on the nodes of a [`crate::slurm::Cluster`]: `srun` directly,
//! or the MPI's starter inside a `salloc` allocation. And what the job must know to end a
//! Slurm job: its name, its id, the processes between `slurmstepd` and the ranks.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::procs::{self, Proc, Stat};
use crate::Mpi;

/// How [`crate::JobBuilder::start`] starts the ranks (see [`crate::JobBuilder::launcher`]).
///
/// The Slurm launchers name a cluster by its `slurm.conf` (make them with
/// [`crate::slurm::Cluster::srun`] and [`crate::slurm::Cluster::mpirun_in_allocation`]), set
/// the job's rank count to `nodes * per_node`, and work with the test bed's two MPIs
/// ([`Mpi::all`]); the packaged MPIs are refused. Every job gets a unique Slurm job name
/// (`--job-name`), by which the harness finds its job id (`squeue -n`; under `salloc` its
/// "Granted job allocation N" line) and, if it never learnt it, cancels it.
///
/// Open MPI runs with the BTLs `self,tcp` under both Slurm launchers, not with shared memory
/// (`vader`): its ranks name their shared-memory segment after the host name, the user, the
/// job and the rank's local rank (`/dev/shm/vader_segment.<host>.<uid>.<job>.<local rank>`),
/// and the "nodes" of a one-machine cluster share the host name, so local rank 0 on `n1` and
/// local rank 0 on `n2` opened the same segment and crashed in `MPI_Init`
/// (`mca_btl_vader_poll_handle_frag`, seen on the first run with `self,vader,tcp`). Its TCP
/// BTL leaves out the loopback interface (`btl_tcp_if_exclude`): the machine needs another.
///
/// Ranks on different nodes talk over TCP (both MPIs), where a send needs its sender to make
/// progress: an example whose ranks stop calling MPI once their own message arrived (`ring`:
/// `pause()` after the `MPI_Iprobe` loop) may leave its send to the next node unsent, and
/// the job never becomes ready (seen with both MPIs: half the ranks waited 60 s). `deadlock`
/// (nothing sent) and `healthy` (blocking `MPI_Sendrecv`) are fine.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Launcher {
    /// The MPI's own starter on this machine: [`Mpi::starter_command`].
    #[default]
    Local,
    /// `srun --mpi=pmix` (Open MPI 4.1, with `OMPI_MCA_btl=self,tcp`) or `srun --mpi=pmi2`
    /// (MPICH), with `-N nodes --ntasks-per-node per_node --kill-on-bad-exit=0`. The starter
    /// is `srun`; the ranks run under `slurmstepd`.
    Srun {
        /// The cluster's `slurm.conf` (`SLURM_CONF` of the job's commands).
        conf: PathBuf,
        /// Number of nodes (`-N`).
        nodes: usize,
        /// Ranks per node (`--ntasks-per-node`).
        per_node: usize,
    },
    /// `salloc -N nodes --ntasks-per-node per_node` running the MPI's starter, which then
    /// starts its daemons with `srun` on the allocated nodes; the job's starter
    /// ([`crate::Job::starter_pid`]) is that `mpirun` / `mpiexec`, `salloc`'s child.
    ///
    /// - Open MPI: `mpirun --allow-run-as-root --mca btl self,tcp --npernode per_node -n N`
    ///   (its `orted`s are started by `srun` on every node).
    /// - MPICH: hydra's Slurm launcher, `mpiexec -launcher slurm -iface lo -ppn per_node -n
    ///   N` (`hydra_pmi_proxy` started by `srun` on every node). `-iface lo` is needed on the
    ///   one-machine cluster: without it hydra tells each rank its node's name as its
    ///   address (`MPIR_CVAR_CH3_INTERFACE_HOSTNAME=n3`), which does not resolve here, and
    ///   ch3's TCP module fails in `MPI_Init` ("GetSockInterfaceAddr: gethostbyname failed,
    ///   n3"); a `-genv` of that variable does not help, hydra's own value wins. With `-iface
    ///   lo` every rank publishes its loopback address instead. `srun` warns that it cannot
    ///   honour `--ntasks-per-node=2` for hydra's one proxy per node; harmless.
    MpirunInAllocation {
        /// The cluster's `slurm.conf`.
        conf: PathBuf,
        /// Number of nodes (`salloc -N`).
        nodes: usize,
        /// Ranks per node.
        per_node: usize,
    },
}

impl fmt::Display for Launcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Launcher::Local => f.write_str("its own starter"),
            Launcher::Srun { nodes, per_node, .. } => write!(f, "srun on {nodes} nodes x {per_node}"),
            Launcher::MpirunInAllocation { nodes, per_node, .. } => {
                write!(f, "salloc on {nodes} nodes x {per_node}")
            }
        }
    }
}

impl Launcher {
    /// The rank count a Slurm launcher asks for (`nodes * per_node`); `None` for
    /// [`Launcher::Local`].
    pub fn nprocs(&self) -> Option<usize> {
        match self {
            Launcher::Local => None,
            Launcher::Srun { nodes, per_node, .. } | Launcher::MpirunInAllocation { nodes, per_node, .. } => {
                Some(nodes * per_node)
            }
        }
    }

    /// The `slurm.conf` of a Slurm launcher.
    pub fn slurm_conf(&self) -> Option<&Path> {
        match self {
            Launcher::Local => None,
            Launcher::Srun { conf, .. } | Launcher::MpirunInAllocation { conf, .. } => Some(conf),
        }
    }

    /// The command that starts `exe args` on `nprocs` ranks of `mpi` (for the Slurm launchers,
    /// as the job `job_name`). Only the arguments are set; [`Launcher::env`] is the
    /// environment the launcher needs on top of the harness's own.
    ///
    /// # Panics
    /// If the MPI is not installed, or is a packaged one under a Slurm launcher.
    pub fn command<S: AsRef<OsStr>>(&self, mpi: Mpi, nprocs: usize, exe: &Path, args: &[S], job_name: &str) -> Command {
        let (nodes, per_node) = match self {
            Launcher::Local => return mpi.starter_command(nprocs, exe, args),
            Launcher::Srun { nodes, per_node, .. } | Launcher::MpirunInAllocation { nodes, per_node, .. } => {
                (nodes.to_string(), per_node.to_string())
            }
        };
        assert!(
            !mpi.is_packaged(),
            "the Slurm launchers are for the test bed's MPIs; {mpi} is not one (launcher: {self})"
        );
        let mut cmd;
        if let Launcher::Srun { .. } = self {
            cmd = Command::new("srun");
            let pmi = if mpi.is_open_mpi() { "--mpi=pmix" } else { "--mpi=pmi2" };
            cmd.args([
                pmi,
                "-N",
                &nodes,
                "--ntasks-per-node",
                &per_node,
                "--kill-on-bad-exit=0",
            ]);
            cmd.arg(format!("--job-name={job_name}"));
        } else {
            cmd = Command::new("salloc");
            cmd.args(["-N", &nodes, "--ntasks-per-node", &per_node]);
            cmd.arg(format!("--job-name={job_name}"));
            cmd.arg(mpi.starter());
            if mpi.is_open_mpi() {
                cmd.args([
                    "--allow-run-as-root",
                    "--mca",
                    "btl",
                    "self,tcp",
                    "--npernode",
                    &per_node,
                ]);
            } else {
                cmd.args(["-launcher", "slurm", "-iface", "lo", "-ppn", &per_node]);
            }
            cmd.arg("-n").arg(nprocs.to_string());
        }
        cmd.arg(exe).args(args);
        cmd
    }

    /// The environment a Slurm launcher sets, after the harness scrubbed the inherited one
    /// (and before the test's own [`crate::JobBuilder::env`]): `SLURM_CONF`, and for Open MPI
    /// under `srun` `OMPI_MCA_btl=self,tcp` (what its `mpirun` is told in an allocation).
    pub fn env(&self, mpi: Mpi) -> Vec<(OsString, OsString)> {
        let mut env = Vec::new();
        if let Some(conf) = self.slurm_conf() {
            env.push(("SLURM_CONF".into(), conf.as_os_str().to_owned()));
        }
        if matches!(self, Launcher::Srun { .. }) && mpi.is_open_mpi() {
            env.push(("OMPI_MCA_btl".into(), "self,tcp".into()));
        }
        env
    }
}

/// A unique Slurm job name for a job of this test process: `mpiq-<pid>-<n>`.
pub(crate) fn unique_job_name() -> String {
    static JOBS: AtomicUsize = AtomicUsize::new(0);
    let n = JOBS.fetch_add(1, Ordering::Relaxed);
    format!("mpiq-{}-{n}", std::process::id())
}

/// What a job started through Slurm must remember to end it.
#[derive(Debug)]
pub(crate) struct SlurmJob {
    /// `SLURM_CONF` for `squeue` and `scancel`.
    pub(crate) conf: PathBuf,
    /// The unique `--job-name`.
    pub(crate) name: String,
    /// The job id, once known.
    pub(crate) id: Option<u32>,
}

impl SlurmJob {
    fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        cmd.env("SLURM_CONF", &self.conf).stdin(std::process::Stdio::null());
        cmd
    }

    /// Learns the job id: from `salloc`'s "Granted job allocation N" in `stderr`, else from
    /// `squeue -h -n NAME -o %i` (`srun` prints nothing about it).
    pub(crate) fn find_id(&mut self, stderr: &str) {
        if self.id.is_none() {
            self.id = granted_allocation(stderr);
        }
        if self.id.is_none() {
            let mut cmd = self.command("squeue");
            cmd.args(["-h", "-n", &self.name, "-o", "%i"]);
            if let Ok(out) = cmd.output() {
                let text = String::from_utf8_lossy(&out.stdout);
                let ids: Vec<u32> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
                if let [id] = ids[..] {
                    self.id = Some(id);
                }
            }
        }
    }

    /// `scancel` the job: by id if known, else by its unique name. Never panics.
    pub(crate) fn cancel(&self) {
        let mut cmd = self.command("scancel");
        match self.id {
            Some(id) => cmd.arg(id.to_string()),
            None => cmd.args(["-n", &self.name]),
        };
        match cmd.output() {
            Ok(out) if out.status.success() => {}
            Ok(out) => eprintln!(
                "[mpiq-tests] {cmd:?} failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim_end()
            ),
            Err(e) => eprintln!("[mpiq-tests] cannot run scancel: {e}"),
        }
    }

    /// Waits up to `timeout` until the job has left the queue (`squeue -h -n NAME` lists it
    /// no more: a cancelled job stays `COMPLETING` for about 3 s here, and stopping the
    /// cluster meanwhile made `slurmd` linger for the stop script's 10 s). Returns whether
    /// it left.
    pub(crate) fn wait_gone(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let mut cmd = self.command("squeue");
            cmd.args(["-h", "-n", &self.name, "-o", "%i %T"]);
            let listed = match cmd.output() {
                Ok(out) if out.status.success() => !String::from_utf8_lossy(&out.stdout).trim().is_empty(),
                // squeue failed (the controller is gone?): nothing to wait for.
                _ => false,
            };
            if !listed {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The N of the first `salloc: Granted job allocation N` line.
fn granted_allocation(stderr: &str) -> Option<u32> {
    stderr.lines().find_map(|line| {
        let at = line.find("Granted job allocation ")?;
        let rest = &line[at + "Granted job allocation ".len()..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    })
}

/// `salloc`'s child: the MPI starter it runs (`salloc` puts it in a process group of its
/// own). Waits up to `timeout` for it to appear.
pub(crate) fn allocation_starter(salloc: u32, timeout: Duration) -> Option<Proc> {
    let deadline = Instant::now() + timeout;
    loop {
        let child = procs::descendants(salloc)
            .into_iter()
            .find(|p| Stat::read(p.pid).is_some_and(|s| s.ppid == salloc));
        if child.is_some() || Instant::now() >= deadline {
            return child;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The processes between `slurmstepd` and each rank (Open MPI's `orted`, MPICH's
/// `hydra_pmi_proxy`; none under `srun`): the ranks' ancestors up to the first
/// `slurmstepd`, not included.
pub(crate) fn rank_keepers(ranks: &[u32]) -> Vec<Proc> {
    let mut found = Vec::new();
    for &rank in ranks {
        let mut pid = rank;
        for _ in 0..8 {
            let Some(parent) = Stat::read(pid).map(|s| s.ppid).filter(|&p| p > 1) else {
                break;
            };
            let Some(proc) = Proc::of(parent) else { break };
            if proc.name.starts_with("slurmstepd") {
                break;
            }
            pid = parent;
            if !found.contains(&proc) {
                found.push(proc);
            }
        }
    }
    found
}

/// The Slurm node a process runs on: its `SLURMD_NODENAME` (read from
/// `/proc/PID/environ`, only that variable).
pub fn node_of_pid(pid: u32) -> Option<String> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    environ.split(|&b| b == 0).find_map(|var| {
        let value = var.strip_prefix(b"SLURMD_NODENAME=")?;
        Some(String::from_utf8_lossy(value).into_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_granted_allocation() {
        let stderr = "salloc: Pending job allocation 12\nsalloc: Granted job allocation 12\n";
        assert_eq!(granted_allocation(stderr), Some(12));
        assert_eq!(granted_allocation("salloc: error: nothing\n"), None);
    }

    #[test]
    fn slurm_launchers_set_the_rank_count_and_conf() {
        let conf = PathBuf::from("/x/slurm.conf");
        let srun = Launcher::Srun {
            conf: conf.clone(),
            nodes: 4,
            per_node: 2,
        };
        assert_eq!(srun.nprocs(), Some(8));
        assert_eq!(srun.slurm_conf(), Some(conf.as_path()));
        assert_eq!(Launcher::Local.nprocs(), None);
        let env = srun.env(Mpi::OpenMpi);
        assert!(env.contains(&("SLURM_CONF".into(), "/x/slurm.conf".into())), "{env:?}");
        assert!(!srun.env(Mpi::Mpich).iter().any(|(k, _)| k == "OMPI_MCA_btl"));
    }

    #[test]
    fn node_of_this_process_is_its_slurmd_nodename() {
        let me = node_of_pid(std::process::id());
        assert_eq!(me, std::env::var("SLURMD_NODENAME").ok());
    }
}
