//! `mpiq job` on jobs across nodes (issue 13), on a real Slurm cluster on this machine
//! (`scripts/slurm-cluster`: slurmctld + 4 slurmd "nodes"), with both test-bed MPIs: the
//! deadlock example on 4 nodes x 2 ranks, launched by `srun` and by the MPI's own starter
//! inside an allocation, gives the exact cycle with every rank read on its own node by that
//! node's collector, and the job keeps running; `--slurm JOB` finds the same without a
//! starter; a healthy job across nodes is never called deadlocked; and the faults: a
//! collector killed mid-collection, one that cannot start, one that misses the deadline,
//! and a front end killed with SIGKILL, each leave every rank running and untraced and make
//! exactly the lost node's ranks unknown; `mpiq run` with srun as the launcher reports a
//! hanging job across nodes and passes a finished one's status through.
//!
//! Every test starts its own cluster and stops it (by the pids it recorded). Without Slurm
//! they print `SKIPPED` and pass, except in CI (`CI=true`), where they fail.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mpiq_tests::expect::assert_deadlock_ring;
use mpiq_tests::frontends::{artifact, cli_command};
use mpiq_tests::procs::tracer_pid;
use mpiq_tests::run::{run, Run};
use mpiq_tests::slurm::{self, Cluster};
use mpiq_tests::{gdb, Example, Job, Mpi};
use serde_json::Value;

const NODES: usize = 4;
const PER_NODE: usize = 2;
const EXIT_DEADLOCK: i32 = 3;
const EXIT_UNKNOWN: i32 = 4;

/// A cluster, or `None` (after saying so) where Slurm is missing outside CI.
fn cluster() -> Option<Cluster> {
    gdb::require_ptrace();
    slurm::available().then(|| Cluster::start(NODES, 8))
}

/// `mpiq ARGS...` against `cluster` (its SLURM_CONF), with `env` added.
fn mpiq_on(cluster: &Cluster, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = cli_command(args);
    cmd.envs(cluster.env()).envs(env.iter().copied());
    run(cmd)
}

/// Every rank runs freely: not stopped, not traced.
fn assert_all_running(job: &Job, what: &str) {
    for r in job.ranks() {
        assert!(
            Job::is_running(r.pid),
            "{what}: rank {} (pid {}) is not running",
            r.rank,
            r.pid
        );
        assert_eq!(tracer_pid(r.pid), Some(0), "{what}: rank {} is still traced", r.rank);
    }
}

/// Waits (at most `secs`) until every rank runs untraced again.
fn wait_all_running(job: &Job, secs: u64, what: &str) {
    let until = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < until {
        if job
            .ranks()
            .iter()
            .all(|r| Job::is_running(r.pid) && tracer_pid(r.pid) == Some(0))
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_all_running(job, what);
}

/// The deadlock example's cycle over all 8 ranks, each rank's posted receive, and each rank
/// read on the node it runs on.
fn assert_cycle_read_on_nodes(v: &Value, job: &Job, what: &str) {
    let n = job.nprocs() as i64;
    assert_deadlock_ring(v, n, what);
    let procs = v["processes"].as_array().unwrap();
    assert_eq!(procs.len() as i64, n, "{what}: {v:#}");
    for p in procs {
        let r = p["world_rank"].as_i64().unwrap();
        let pid = job.pid_of(r as usize);
        assert_eq!(p["pid"], pid, "{what}: rank {r}");
        let node = job.node_of(r as usize).unwrap();
        assert_eq!(p["node"], node, "{what}: rank {r} read on its own node");
        assert_eq!(node, format!("n{}", r / PER_NODE as i64 + 1), "{what}");
        assert!(p["error"].is_null(), "{what}: rank {r}: {}", p["error"]);
        let world = p["communicators"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "MPI_COMM_WORLD")
            .unwrap_or_else(|| panic!("{what}: rank {r} has no MPI_COMM_WORLD"));
        let recvs = world["queues"]["receives"]["operations"].as_array().unwrap();
        assert_eq!(recvs.len(), 1, "{what}: rank {r}: {world:#}");
        assert_eq!(recvs[0]["peer"]["world"], (r + 1) % n, "{what}: rank {r}: {world:#}");
        assert_eq!(recvs[0]["tag"], 400 + r, "{what}: rank {r}: {world:#}");
    }
}

fn deadlock_across_nodes(mpi: Mpi, allocation: bool) {
    let Some(cluster) = cluster() else { return };
    let launcher = if allocation {
        cluster.mpirun_in_allocation(NODES, PER_NODE)
    } else {
        cluster.srun(NODES, PER_NODE)
    };
    let job = Job::builder(mpi, Example::Deadlock).launcher(launcher).start();
    let starter = job.starter_pid().to_string();
    let what = format!(
        "{mpi}, {}",
        if allocation { "starter in an allocation" } else { "srun" }
    );
    let r = mpiq_on(&cluster, &["job", "--starter", &starter, "--json", "-v"], &[]);
    assert_eq!(r.code(), Some(EXIT_DEADLOCK), "{what}: {}", r.all());
    assert_cycle_read_on_nodes(&r.json_exact(), &job, &what);
    // One collector per node, through srun into the job.
    for node in cluster.nodes() {
        assert!(
            r.stderr.contains(&format!("collector on {node}: pid")),
            "{what}: {}",
            r.stderr
        );
    }
    let id = job.slurm_job_id().unwrap();
    assert!(
        r.stderr.contains(&format!("through srun into Slurm job {id}")),
        "{what}: {}",
        r.stderr
    );
    assert_all_running(&job, &what);

    // The text says where each rank was read.
    let r = mpiq_on(&cluster, &["job", "--starter", &starter, "--no-stacks"], &[]);
    assert_eq!(r.code(), Some(EXIT_DEADLOCK), "{what}: {}", r.all());
    let first = format!("Process pid {}, rank 0 on n1:", job.pid_of(0));
    assert!(r.stdout.contains(&first), "{what}: {}", r.stdout);
    assert!(
        r.stdout.contains("cycle: 0 -> 1 -> 2 -> 3 -> 4 -> 5 -> 6 -> 7 -> 0"),
        "{what}: {}",
        r.stdout
    );
    assert_all_running(&job, &what);

    // The Slurm job alone: its step's ranks are found on each node.
    let r = mpiq_on(&cluster, &["job", "--slurm", &id.to_string(), "--json"], &[]);
    assert_eq!(r.code(), Some(EXIT_DEADLOCK), "{what}, --slurm {id}: {}", r.all());
    assert_cycle_read_on_nodes(&r.json_exact(), &job, &format!("{what}, --slurm {id}"));
    assert_all_running(&job, &what);
}

#[test]
fn srun_openmpi() {
    deadlock_across_nodes(Mpi::OpenMpi, false);
}

#[test]
fn srun_mpich() {
    deadlock_across_nodes(Mpi::Mpich, false);
}

#[test]
fn mpirun_in_an_allocation_openmpi() {
    deadlock_across_nodes(Mpi::OpenMpi, true);
}

#[test]
fn mpiexec_in_an_allocation_mpich() {
    deadlock_across_nodes(Mpi::Mpich, true);
}

/// A job that keeps communicating across nodes is never a deadlock.
#[test]
fn a_healthy_job_across_nodes_is_not_deadlocked() {
    let Some(cluster) = cluster() else { return };
    for mpi in [Mpi::OpenMpi, Mpi::Mpich] {
        let job = Job::builder(mpi, Example::Healthy)
            .launcher(cluster.srun(NODES, PER_NODE))
            .start();
        let starter = job.starter_pid().to_string();
        for _ in 0..2 {
            let r = mpiq_on(&cluster, &["job", "--starter", &starter, "--json"], &[]);
            let v = r.json_exact();
            assert_eq!(v["analysis"]["verdict"], "no_deadlock", "{mpi}: {}", r.all());
            assert_eq!(v["processes"].as_array().unwrap().len(), NODES * PER_NODE);
        }
        assert_all_running(&job, &format!("healthy under {mpi}"));
    }
}

/// `mpiq job -v` started in the background: its stderr read line by line, its stdout whole.
struct Background {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
    stdout: Option<std::thread::JoinHandle<String>>,
    stderr: Vec<String>,
}

impl Background {
    fn start(cluster: &Cluster, args: &[&str], env: &[(&str, &str)]) -> Background {
        let mut cmd = cli_command(args);
        cmd.envs(cluster.env())
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for l in BufReader::new(err).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        let mut out = child.stdout.take().unwrap();
        let stdout = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut out, &mut s);
            s
        });
        Background {
            child,
            lines,
            stdout: Some(stdout),
            stderr: Vec::new(),
        }
    }

    /// The pid of the collector on `node`, from `collector on NODE: pid P`.
    fn collector_pid(&mut self, node: &str) -> u32 {
        let want = format!("collector on {node}: pid ");
        let until = Instant::now() + Duration::from_secs(60);
        while Instant::now() < until {
            if let Some(pid) = self.stderr.iter().find_map(|l| {
                l.split_once(&want)
                    .and_then(|(_, r)| r.split_whitespace().next()?.parse().ok())
            }) {
                return pid;
            }
            if let Ok(l) = self.lines.recv_timeout(Duration::from_millis(200)) {
                self.stderr.push(l);
            }
        }
        panic!("no collector on {node}:\n{}", self.stderr.join("\n"));
    }

    /// Waits for it to end (at most 90 s): stdout, exit status, stderr.
    fn finish(mut self) -> (String, Option<i32>, String) {
        let until = Instant::now() + Duration::from_secs(90);
        let code = loop {
            if let Ok(Some(s)) = self.child.try_wait() {
                break s.code();
            }
            assert!(Instant::now() < until, "mpiq did not end:\n{}", self.stderr.join("\n"));
            std::thread::sleep(Duration::from_millis(50));
        };
        let out = self
            .stdout
            .take()
            .map(|h| h.join().unwrap_or_default())
            .unwrap_or_default();
        while let Ok(l) = self.lines.recv_timeout(Duration::from_millis(200)) {
            self.stderr.push(l);
        }
        (out, code, self.stderr.join("\n"))
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn kill9(pid: u32) {
    let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
}

/// Killing one node's collector while it holds its ranks stopped: exactly that node's ranks
/// are unknown, every other rank is read, and every rank runs afterwards.
#[test]
fn a_killed_collector_makes_only_its_nodes_ranks_unknown() {
    let Some(cluster) = cluster() else { return };
    let job = Job::builder(Mpi::Mpich, Example::Deadlock)
        .launcher(cluster.srun(NODES, PER_NODE))
        .start();
    let starter = job.starter_pid().to_string();
    // Each collector holds its ranks stopped 3 s before reading them.
    let mut bg = Background::start(
        &cluster,
        &["job", "--starter", &starter, "--json", "-v"],
        &[("MPIQ_TEST_HOLD_MS", "3000")],
    );
    let victim = bg.collector_pid("n3");
    std::thread::sleep(Duration::from_millis(500));
    kill9(victim);
    let (out, code, stderr) = bg.finish();
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    assert_eq!(code, Some(EXIT_UNKNOWN), "{stderr}");
    assert_eq!(v["analysis"]["verdict"], "unknown", "{:#}", v["analysis"]);
    for p in v["processes"].as_array().unwrap() {
        let r = p["world_rank"].as_i64().unwrap();
        let on_n3 = job.node_of(r as usize).as_deref() == Some("n3");
        assert_eq!(p["error"].is_string(), on_n3, "rank {r}: {p:#}");
        if on_n3 {
            let e = p["error"].as_str().unwrap();
            assert!(e.contains("node n3") && e.contains(&format!("pid {victim}")), "{e}");
        } else {
            assert!(!p["communicators"].as_array().unwrap().is_empty(), "rank {r}: {p:#}");
        }
    }
    wait_all_running(&job, 10, "after a collector was killed");
}

/// A wrapper around mpiq, as `MPIQ_COLLECTOR`, that behaves differently on node n2.
fn wrapper(cluster: &Cluster, on_n2: &str) -> std::path::PathBuf {
    let path = cluster.dir().join("collector.sh");
    let script = format!(
        "#!/bin/sh\nif [ \"$SLURMD_NODENAME\" = n2 ]; then {on_n2}; fi\nexec {} \"$@\"\n",
        artifact("mpiq").display()
    );
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// A collector that cannot start on one node, and one that misses the deadline.
#[test]
fn a_node_that_fails_or_misses_the_deadline_is_unknown() {
    let Some(cluster) = cluster() else { return };
    let job = Job::builder(Mpi::OpenMpi, Example::Deadlock)
        .launcher(cluster.srun(NODES, PER_NODE))
        .start();
    let starter = job.starter_pid().to_string();
    for (on_n2, timeout, words) in [
        (
            "echo 'cannot start here' >&2; exit 127",
            "30",
            "its collector did not start",
        ),
        ("sleep 120", "4", "did not answer within"),
    ] {
        let collector = wrapper(&cluster, on_n2);
        let started = Instant::now();
        let r = mpiq_on(
            &cluster,
            &["job", "--starter", &starter, "--json", "--node-timeout", timeout],
            &[("MPIQ_COLLECTOR", collector.to_str().unwrap())],
        );
        let took = started.elapsed();
        assert_eq!(r.code(), Some(EXIT_UNKNOWN), "{on_n2}: {}", r.all());
        let v = r.json_exact();
        for p in v["processes"].as_array().unwrap() {
            let rank = p["world_rank"].as_i64().unwrap();
            let on_n2_rank = rank / PER_NODE as i64 == 1;
            assert_eq!(p["error"].is_string(), on_n2_rank, "{on_n2}: rank {rank}: {p:#}");
            if on_n2_rank {
                let e = p["error"].as_str().unwrap();
                assert!(e.contains("node n2") && e.contains(words), "{on_n2}: {e}");
            }
        }
        assert!(took < Duration::from_secs(40), "{on_n2}: took {took:?}");
        wait_all_running(&job, 10, on_n2);
    }
}

/// The front end killed with SIGKILL while its collectors hold ranks stopped: srun gets
/// SIGTERM (PR_SET_PDEATHSIG), ends its step, and the collectors release their ranks.
#[test]
fn a_front_end_killed_mid_collection_leaves_every_rank_running() {
    let Some(cluster) = cluster() else { return };
    let job = Job::builder(Mpi::Mpich, Example::Deadlock)
        .launcher(cluster.srun(NODES, PER_NODE))
        .start();
    let starter = job.starter_pid().to_string();
    let mut bg = Background::start(
        &cluster,
        &["job", "--starter", &starter, "-v"],
        &[("MPIQ_TEST_HOLD_MS", "20000")],
    );
    let collectors: Vec<u32> = cluster.nodes().iter().map(|n| bg.collector_pid(n)).collect();
    std::thread::sleep(Duration::from_millis(800));
    // Stopped now: the collectors hold them.
    let stopped = job.ranks().iter().filter(|r| tracer_pid(r.pid) != Some(0)).count();
    assert!(stopped > 0, "no rank was held stopped: the test proves nothing");
    kill9(bg.child.id());
    let _ = bg.child.wait();
    wait_all_running(&job, 15, "after the front end was killed");
    let until = Instant::now() + Duration::from_secs(15);
    while collectors.iter().any(|&c| Job::is_running(c)) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
    for c in collectors {
        assert!(
            !Job::is_running(c),
            "collector {c} still runs after its front end was killed"
        );
    }
}

/// `mpiq run` with srun as the job's launcher: a hanging job across nodes is reported (every
/// rank read on its node, the cycle) and ended with 124, the job's step gone; a job that
/// finishes passes its status through (0, and a failing one's 3).
#[test]
fn mpiq_run_under_srun() {
    let Some(cluster) = cluster() else { return };
    let mpi = Mpi::Mpich;
    let launcher = cluster.srun(NODES, PER_NODE);
    let run_job = |name: &str, example: Example, args: &[&str], run_args: &[&str]| -> Run {
        let exe = mpiq_tests::build_example(mpi, example);
        let srun = launcher.command(mpi, NODES * PER_NODE, &exe, args, name);
        let mut cmd = cli_command(&["run"]);
        cmd.args(run_args)
            .arg("--")
            .arg(srun.get_program())
            .args(srun.get_args());
        for (k, v) in srun.get_envs() {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        cmd.envs(launcher.env(mpi))
            .env("LD_LIBRARY_PATH", mpi.library_dir())
            .env("MPIQ_EXAMPLE_LIFETIME", "120");
        let job_dir = mpiq_tests::JobDir::new();
        job_dir.apply(&mut cmd);
        run(cmd)
    };
    let gone = |name: &str| {
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            let out = cluster.command("squeue").args(["-h", "-n", name]).output().unwrap();
            if out.stdout.is_empty() {
                return;
            }
            assert!(
                Instant::now() < until,
                "job {name} is still queued: {}",
                String::from_utf8_lossy(&out.stdout)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    };

    let report = cluster.dir().join("report");
    let name = format!("mpiq-run-hang-{}", std::process::id());
    let r = run_job(
        &name,
        Example::Deadlock,
        &[],
        &["--timeout", "8s", "--report", report.to_str().unwrap()],
    );
    assert_eq!(r.code(), Some(124), "{}", r.all());
    assert!(r.stderr.contains("Deadlock analysis: DEADLOCK"), "{}", r.all());
    let v: Value = serde_json::from_str(&std::fs::read_to_string(report.join("report.json")).unwrap()).unwrap();
    assert_eq!(v["analysis"]["verdict"], "deadlock", "{:#}", v["analysis"]);
    let ring: Vec<i64> = (0..(NODES * PER_NODE) as i64).collect();
    assert_eq!(v["analysis"]["cycles"], serde_json::json!([ring]));
    for p in v["processes"].as_array().unwrap() {
        let r = p["world_rank"].as_i64().unwrap();
        assert_eq!(p["node"], format!("n{}", r / PER_NODE as i64 + 1), "{p:#}");
    }
    gone(&name);

    let name = format!("mpiq-run-ok-{}", std::process::id());
    let r = run_job(&name, Example::Healthy, &["20"], &["--timeout", "120s"]);
    assert_eq!(r.code(), Some(0), "{}", r.all());
    let name = format!("mpiq-run-fail-{}", std::process::id());
    let srun = launcher.command(
        mpi,
        NODES * PER_NODE,
        std::path::Path::new("/bin/sh"),
        &["-c", "exit 3"],
        &name,
    );
    let mut cmd = cli_command(&["run", "--timeout", "120s", "--"]);
    cmd.arg(srun.get_program())
        .args(srun.get_args())
        .envs(launcher.env(mpi));
    let r = run(cmd);
    assert_eq!(r.code(), Some(3), "{}", r.all());
}

/// The parts of an analysis that name the answer: verdict, cycles, and the ranks it names
/// (those others wait for, those it could not read, those that may be stuck).
fn answer(v: &Value) -> Value {
    let a = &v["analysis"];
    let waited: Vec<&Value> = a["waited_on"]
        .as_array()
        .map(|w| w.iter().map(|w| &w["ranks"]).collect())
        .unwrap_or_default();
    serde_json::json!({
        "verdict": a["verdict"],
        "cycles": a["cycles"],
        "waited_on": waited,
        "unknown_ranks": a["unknown_ranks"],
        "undecided": a["undecided"],
    })
}

/// Compact records (issue 26) give the analysis of whole snapshots, on real jobs across four
/// Slurm nodes: a deadlock, a collective mismatch, ranks waiting in a collective for a
/// computing rank, and a healthy job. Each is read with `--collect check`: the front end
/// analyses the compact records, fetches every rank of both samples whole, analyses those
/// too, and fails unless the two analyses are the same in every field. The jobs that stay
/// where they are are read once more with every rank sent whole (`--collect whole`, the
/// path before compact records) and give the same verdict, cycles and named ranks; the text
/// report through compact records shows the ranks it names in detail, fetched whole.
#[test]
fn compact_records_give_the_analysis_of_whole_snapshots() {
    let Some(cluster) = cluster() else { return };
    // (example, ranks per node, verdict; None where the test does not fix it)
    let cases = [
        (Example::Deadlock, PER_NODE, Some("deadlock")),
        (Example::SplitMismatch, 1, Some("deadlock")),
        (Example::ComputeStuck, 1, None),
        (Example::Healthy, PER_NODE, Some("no_deadlock")),
    ];
    for (example, per_node, verdict) in cases {
        let mpi = Mpi::OpenMpi;
        let job = Job::builder(mpi, example)
            .launcher(cluster.srun(NODES, per_node))
            .start();
        let starter = job.starter_pid().to_string();
        let what = format!("{example:?} on {NODES} nodes x {per_node}");
        let checked = mpiq_on(
            &cluster,
            &["job", "--starter", &starter, "--json", "--collect", "check", "-v"],
            &[],
        );
        assert!(
            checked
                .stderr
                .contains("the compact records' analysis is the whole snapshots'"),
            "{what}: {}",
            checked.all()
        );
        let checked_json = checked.json_exact();
        if let Some(v) = verdict {
            assert_eq!(checked_json["analysis"]["verdict"], v, "{what}: {}", checked.all());
        }
        let procs = checked_json["processes"].as_array().unwrap();
        assert_eq!(procs.len(), NODES * per_node, "{what}");
        assert!(
            procs
                .iter()
                .all(|p| p["error"].is_null() && p["node"].as_str().unwrap().starts_with('n')),
            "{what}: every rank read on its node: {checked_json:#}"
        );
        if example != Example::Healthy {
            let whole = mpiq_on(
                &cluster,
                &["job", "--starter", &starter, "--json", "--collect", "whole"],
                &[],
            );
            assert_eq!(
                answer(&whole.json_exact()),
                answer(&checked_json),
                "{what}: {}",
                whole.all()
            );
            assert_eq!(whole.code(), checked.code(), "{what}");
            // The text through compact records: the named ranks in detail, whole (their
            // frames' addresses came back with them).
            let text = mpiq_on(&cluster, &["job", "--starter", &starter, "--stacks", "-v"], &[]);
            assert_eq!(text.code(), checked.code(), "{what}: {}", text.all());
            assert!(
                text.stderr.contains("rank(s) received whole"),
                "{what}: {}",
                text.stderr
            );
            let named = text
                .stdout
                .lines()
                .find(|l| l.contains(" in detail"))
                .unwrap_or_else(|| panic!("{what}: {}", text.stdout));
            assert!(!named.contains("names no rank"), "{what}: {named}");
            assert!(
                text.stdout.contains("#0  0x"),
                "{what}: a rank in detail has its frames' addresses: {}",
                text.stdout
            );
        }
        assert_all_running(&job, &what);
    }
}
