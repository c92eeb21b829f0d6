//! Tests of the Slurm part of the harness (issue 13, "jobs across nodes"), against a real
//! Slurm cluster on this machine (`scripts/slurm-cluster`, through
//! `mpiq_tests::slurm::Cluster`): a cluster comes up and leaves none of its daemons behind;
//! the deadlock example on 4 nodes x 2 ranks under `srun` and under the MPI's own starter
//! inside a `salloc` allocation (both MPIs) reaches READY with two ranks on each node, and
//! nothing of the job survives it; a job that never becomes ready is cancelled.
//!
//! Why `deadlock` and not `ring`: ranks on different nodes talk over TCP, and a ring rank
//! that has its own message goes to `pause()` while its eager send to the next node may not
//! have left yet (a TCP send needs the sender to progress); half the ranks never got their
//! message and the job never became ready, under both MPIs. `deadlock` sends nothing.
//!
//! Without Slurm they print `SKIPPED` and pass, except in CI (`CI=true`), where they fail.

use std::collections::BTreeMap;
use std::time::Duration;

use mpiq_tests::slurm::{self, Cluster};
use mpiq_tests::{assert_all_gone, Example, Job, JobError, Launcher, Mpi};

/// How long killed processes get to disappear.
const GONE: Duration = Duration::from_secs(30);

const NODES: usize = 4;
const PER_NODE: usize = 2;

#[test]
fn a_cluster_comes_up_and_stops_leaving_no_daemon() {
    if !slurm::available() {
        return;
    }
    let cluster = Cluster::start(NODES, 8);
    assert_eq!(cluster.nodes(), ["n1", "n2", "n3", "n4"]);
    assert!(cluster.conf().is_file(), "{}", cluster.conf().display());
    let daemons = cluster.daemons().to_vec();
    let names: Vec<&str> = daemons.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        ["slurmctld", "slurmd", "slurmd", "slurmd", "slurmd"],
        "{daemons:?}"
    );
    assert!(daemons.iter().all(|d| d.is_alive()), "{daemons:?}");

    let out = cluster
        .command("sinfo")
        .args(["-h", "-N", "-o", "%N %t %R"])
        .output()
        .unwrap();
    let sinfo = String::from_utf8_lossy(&out.stdout);
    for node in cluster.nodes() {
        assert!(
            sinfo.lines().any(|l| l == format!("{node} idle mpiq")),
            "{node} is not idle in partition mpiq:\n{sinfo}"
        );
    }

    let dir = cluster.dir().to_path_buf();
    drop(cluster);
    assert_all_gone(&daemons, GONE);
    assert!(!dir.exists(), "{} was not removed", dir.display());
}

/// Starts the deadlock example on 4 nodes x 2 ranks with `launcher`, checks where every rank runs and
/// what the job knows of itself, drops the job and checks that nothing of it survived.
fn deadlock_on_four_nodes(mpi: Mpi, cluster: &Cluster, launcher: Launcher) {
    let job = Job::builder(mpi, Example::Deadlock).launcher(launcher.clone()).start();
    assert_eq!(job.nprocs(), NODES * PER_NODE);
    assert_eq!(job.ranks().len(), NODES * PER_NODE);
    let id = job.slurm_job_id().expect("the job knows its Slurm job id");
    let out = cluster
        .command("squeue")
        .args(["-h", "-j", &id.to_string(), "-o", "%T %D"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("RUNNING {NODES}"),
        "Slurm job {id}"
    );

    // Slurm places the tasks in blocks: ranks 0-1 on n1, 2-3 on n2, ...
    let mut per_node = BTreeMap::new();
    for r in job.ranks() {
        let node = job
            .node_of(r.rank)
            .unwrap_or_else(|| panic!("rank {} has no SLURMD_NODENAME", r.rank));
        assert_eq!(node, format!("n{}", r.rank / PER_NODE + 1), "rank {}", r.rank);
        *per_node.entry(node).or_insert(0) += 1;
        assert!(Job::is_running(r.pid), "rank {} (pid {}) runs freely", r.rank, r.pid);
        assert!(
            job.processes().iter().any(|p| p.pid == r.pid),
            "rank {} is recorded",
            r.rank
        );
    }
    assert_eq!(per_node.len(), NODES, "{per_node:?}");
    assert!(per_node.values().all(|&n| n == PER_NODE), "{per_node:?}");

    let starter = job.processes().iter().find(|p| p.pid == job.starter_pid()).cloned();
    let starter = starter.unwrap_or_else(|| panic!("the starter is recorded: {:?}", job.processes()));
    match launcher {
        Launcher::Srun { .. } => assert_eq!(starter.name, "srun"),
        _ => {
            let expected = if mpi.is_open_mpi() { "mpirun" } else { "mpiexec" };
            assert_eq!(starter.name, expected, "{:?}", job.processes());
            // What the starter runs between slurmstepd and the ranks is recorded too.
            let keeper = if mpi.is_open_mpi() { "orted" } else { "hydra_pmi_proxy" };
            let keepers = job.processes().iter().filter(|p| p.name == keeper).count();
            assert_eq!(keepers, NODES, "{:?}", job.processes());
        }
    }

    // One slurmstepd per node runs the step of the ranks (srun's, or the one of the
    // starter's daemons).
    let steps = cluster.step_daemons();
    assert_eq!(steps.len(), NODES, "{steps:?}");

    let started = job.processes().to_vec();
    drop(job);
    assert_all_gone(&started, GONE);
    assert_all_gone(&steps, GONE);
    let out = cluster.command("squeue").args(["-h", "-o", "%i %T"]).output().unwrap();
    let left = String::from_utf8_lossy(&out.stdout);
    assert!(
        !left
            .lines()
            .any(|l| l.starts_with(&format!("{id} ")) && l.contains("RUNNING")),
        "Slurm job {id} still runs after the drop:\n{left}"
    );
}

/// Runs `check` on a fresh cluster of 4 nodes, then checks that stopping it left none of
/// its daemons or steps.
fn on_a_cluster(check: impl FnOnce(&Cluster)) {
    if !slurm::available() {
        return;
    }
    let cluster = Cluster::start(NODES, 8);
    check(&cluster);
    let daemons = cluster.daemons().to_vec();
    let conf = cluster.conf();
    drop(cluster);
    assert_all_gone(&daemons, GONE);
    assert_eq!(slurm::step_daemons(&conf), [], "steps left behind");
}

fn srun(mpi: Mpi) {
    on_a_cluster(|cluster| deadlock_on_four_nodes(mpi, cluster, cluster.srun(NODES, PER_NODE)));
}

#[test]
fn srun_openmpi_deadlock_on_four_nodes() {
    srun(Mpi::OpenMpi);
}

#[test]
fn srun_mpich_deadlock_on_four_nodes() {
    srun(Mpi::Mpich);
}

fn in_allocation(mpi: Mpi) {
    on_a_cluster(|cluster| deadlock_on_four_nodes(mpi, cluster, cluster.mpirun_in_allocation(NODES, PER_NODE)));
}

#[test]
fn mpirun_in_allocation_openmpi_deadlock_on_four_nodes() {
    in_allocation(Mpi::OpenMpi);
}

#[test]
fn mpiexec_in_allocation_mpich_deadlock_on_four_nodes() {
    in_allocation(Mpi::Mpich);
}

/// A job whose tasks never print READY (`sleep`) fails to start after its timeout, and
/// what it started under Slurm is gone when `try_start` returns: the job left the queue and
/// no step runs on any node.
#[test]
fn a_job_that_never_becomes_ready_is_cancelled() {
    on_a_cluster(|cluster| {
        let err = Job::builder(Mpi::Mpich, Example::Deadlock)
            .program("/bin/sleep")
            .args(["300"])
            .launcher(cluster.srun(NODES, PER_NODE))
            .ready_timeout(Duration::from_secs(3))
            .try_start()
            .expect_err("sleep never prints MPIQ-READY");
        assert!(matches!(err, JobError::ReadyTimeout { .. }), "{err}");
        let out = cluster
            .command("squeue")
            .args(["-h", "-o", "%i %j %T"])
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "",
            "the queue after the failed start"
        );
        assert_eq!(cluster.step_daemons(), [], "steps after the failed start");
    });
}
