//! `mpiq job` (and `core`, `queues` with several pids) with the cross-rank
//! analysis, on real jobs under the test-bed MPIs: the deadlock example's cycle, the
//! slow control job not called deadlocked (and running to completion), core
//! files giving the live verdict, a starter known only by its `MPI2DD_info`
//! proctable, inferred groups, MPI-4 Sessions, the output formats and the
//! exit status.
//!
//! Uses the `mpiq` binary of the test's own profile (build the workspace
//! first: `cargo build --release --workspace` for `cargo test --release`).

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use mpiq_tests::expect::assert_deadlock_ring;
use mpiq_tests::fixtures::{self, Compiler, WorkDir};
use mpiq_tests::frontends::cli_command;
use mpiq_tests::procs::{self, tracer_pid, Proc};
use mpiq_tests::run::{run, Run};
use mpiq_tests::{gdb, Example, Job, Mpi};
use serde_json::Value;

/// Exit status of `mpiq` when it found a deadlock.
const EXIT_DEADLOCK: i32 = 3;
/// Exit status of `mpiq` when the analysis is inconclusive.
const EXIT_UNKNOWN: i32 = 4;

/// `mpiq ARGS...` with `env` set, within the default timeout.
fn mpiq_env(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = cli_command(args);
    cmd.envs(env.iter().copied());
    run(cmd)
}

fn mpiq(args: &[&str]) -> Run {
    mpiq_env(args, &[])
}

fn assert_released(pid: u32) {
    assert!(Job::is_running(pid), "rank {pid} is not running after mpiq");
    assert_eq!(tracer_pid(pid), Some(0), "rank {pid} is still traced");
}

fn deadlock(mpi: Mpi) {
    gdb::require_ptrace();
    let job = Job::builder(mpi, Example::Deadlock).start();
    let n = job.nprocs() as i64;
    let starter = job.starter_pid().to_string();

    // Two samples (the default), JSON.
    let r = mpiq(&["job", "--starter", &starter, "--json"]);
    assert_eq!(r.code(), Some(EXIT_DEADLOCK), "{}", r.all());
    let live = r.json_exact();
    assert_eq!(live["schema"], "mpiq.snapshot/2");
    assert_eq!(live["processes"].as_array().unwrap().len() as i64, n, "{live:#}");
    assert_deadlock_ring(&live, n, &format!("{mpi} live"));
    // Two samples agreed: no "decided on one sample" caveat.
    assert!(
        !live["analysis"]["notes"].to_string().contains("one sample"),
        "{:#}",
        live["analysis"]
    );
    for rank in job.ranks() {
        assert_released(rank.pid);
    }
    assert_released(job.starter_pid());

    // The text view: the verdict in plain words first, then where the
    // ranks are, then the queues of the ranks it names (at most four by
    // default; every rank with --all).
    let r = mpiq(&["job", "--starter", &starter, "--samples", "1"]);
    assert_eq!(r.code(), Some(EXIT_DEADLOCK), "{}", r.all());
    assert!(r.stdout.starts_with("Deadlock analysis: DEADLOCK\n"), "{}", r.all());
    let detail_at = r.stdout.find(" in detail").unwrap_or_else(|| panic!("{}", r.all()));
    let shown = n.min(4) as usize;
    assert_eq!(
        r.stdout[detail_at..].matches("Posted receives (1):").count(),
        shown,
        "{}",
        r.all()
    );
    let all = mpiq(&["job", "--starter", &starter, "--samples", "1", "--all"]);
    assert_eq!(
        all.stdout.matches("Posted receives (1):").count(),
        n as usize,
        "{}",
        all.all()
    );
    let ring: Vec<String> = (0..=n).map(|i| (i % n).to_string()).collect();
    assert!(
        r.stdout.contains(&format!("cycle: {}", ring.join(" -> "))),
        "{}",
        r.all()
    );
    assert!(r.stdout.contains("rank 0 waits for rank 1 on MPI_COMM_WORLD tag 400"));

    // A recording of the job replays to the same verdict, with no process.
    let dir = WorkDir::new(&format!("job-cores-{}", mpi.name()));
    let rec = dir.path("job.rec");
    let rec = rec.to_str().unwrap();
    let r = mpiq(&["job", "--starter", &starter, "--samples", "1", "--record", rec]);
    assert_eq!(r.code(), Some(EXIT_DEADLOCK), "{}", r.all());
    let r = mpiq(&["replay", rec, "--json"]);
    assert_eq!(r.code(), Some(EXIT_DEADLOCK), "{}", r.all());
    assert_deadlock_ring(&r.json_exact(), n, &format!("{mpi} replay"));

    // Core files of every rank: the same verdict and cycle.
    let cores = job.gcore_all(dir.root());
    for rank in job.ranks() {
        assert_released(rank.pid);
    }
    let mut args = vec!["core".to_string()];
    args.extend(cores.iter().map(|c| c.display().to_string()));
    args.push("--json".into());
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = mpiq(&argv);
    assert_eq!(r.code(), Some(EXIT_DEADLOCK), "{}", r.all());
    let dead = r.json_exact();
    assert_deadlock_ring(&dead, n, &format!("{mpi} cores"));
    assert_eq!(dead["analysis"]["verdict"], live["analysis"]["verdict"]);
    assert_eq!(dead["analysis"]["cycles"], live["analysis"]["cycles"]);
    assert_eq!(dead["analysis"]["edges"], live["analysis"]["edges"]);
    for p in dead["processes"].as_array().unwrap() {
        let pid = p["pid"].as_u64().unwrap() as u32;
        let rank = job.ranks().iter().find(|r| r.pid == pid).expect("a rank's pid");
        assert_eq!(p["world_rank"], rank.rank, "{p}");
    }
}

#[test]
fn deadlock_cycle_live_and_in_cores_openmpi() {
    deadlock(Mpi::OpenMpi);
}

#[test]
fn deadlock_cycle_live_and_in_cores_mpich() {
    deadlock(Mpi::Mpich);
}

#[test]
fn deadlock_cycle_live_and_in_cores_openmpi5() {
    deadlock(Mpi::OpenMpi5);
}

/// MPICH 4.0.2's ch4 library reads receives wrongly (docs/mpi-support.md), so mpiq never
/// shows them: the deadlock is found from the stacks alone (every rank in `MPI_Wait`, unmoved
/// across two samples; the send queues, which ch4 keeps, are read and empty, so no wait can be
/// one end of a transfer still on its way), with no cycle, and said so; one sample (a core
/// file) cannot show it and says `unknown`, never `no_deadlock`.
#[test]
fn deadlock_from_stacks_live_replayed_and_in_cores_mpich_ch4() {
    gdb::require_ptrace();
    let mpi = Mpi::MpichCh4;
    let job = Job::builder(mpi, Example::Deadlock).start();
    let n = job.nprocs() as i64;
    let all: Vec<i64> = (0..n).collect();
    let starter = job.starter_pid().to_string();
    let check = |v: &Value, what: &str| {
        let a = &v["analysis"];
        assert_eq!(a["verdict"], "deadlock", "{what}: {a:#}");
        assert_eq!(a["stalled"], true, "{what}: {a:#}");
        assert_eq!(a["cycles"], serde_json::json!([]), "{what}: {a:#}");
        assert_eq!(a["stacks_only"], serde_json::json!(all), "{what}: {a:#}");
        let summary = a["summary"].as_str().unwrap_or_default();
        assert!(summary.contains("reads them wrongly"), "{what}: {a:#}");
        assert!(summary.contains("MPI_Wait (deadlock.c:"), "{what}: {a:#}");
        assert!(
            !a["notes"].to_string().contains("nonblocking collective"),
            "{what}: {a:#}"
        );
        for p in v["processes"].as_array().unwrap() {
            assert_eq!(p["queues_missing"]["reason"], "library_untrusted", "{what}: {p:#}");
            let world = p["communicators"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["name"] == "MPI_COMM_WORLD")
                .unwrap_or_else(|| panic!("{what}: no MPI_COMM_WORLD: {p:#}"));
            let receives = &world["queues"]["receives"];
            assert_eq!(receives["available"], false, "{what}: {p:#}");
            assert!(receives["reason"]
                .as_str()
                .unwrap_or_default()
                .starts_with("not trustworthy"));
        }
    };

    // From stacks alone, the two samples must find every rank in MPI_Wait: wait until one
    // does (READY is printed just before the call).
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let r = mpiq(&["job", "--starter", &starter, "--json", "--samples", "1"]);
        let v = r.json_exact();
        let waiting = v["analysis"]["where"]
            .as_array()
            .is_some_and(|w| w.len() as i64 == n && w.iter().all(|p| p["text"].to_string().contains("MPI_Wait")));
        if waiting {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the ranks never all waited in MPI_Wait: {v:#}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let r = mpiq(&["job", "--starter", &starter, "--json"]);
    assert_eq!(r.code(), Some(EXIT_DEADLOCK), "{}", r.all());
    check(&r.json_exact(), "live");
    for rank in job.ranks() {
        assert_released(rank.pid);
    }

    // A recording holds no stack memory, so no digest of the calling frames: from stacks
    // alone it cannot show that nothing moved, live or replayed, and says so.
    let dir = WorkDir::new("job-cores-mpich-ch4");
    let rec = dir.path("job.rec");
    let rec = rec.to_str().unwrap();
    let r = mpiq(&["job", "--starter", &starter, "--json", "--record", rec]);
    let recorded = r.json_exact();
    assert_eq!(recorded["analysis"]["verdict"], "unknown", "{:#}", recorded["analysis"]);
    let r = mpiq(&["replay", rec, "--json"]);
    let replayed = r.json_exact();
    assert_eq!(replayed["analysis"]["verdict"], "unknown", "{:#}", replayed["analysis"]);

    // The text: the library's finding, in words, said once for every rank
    // (issue 41), and each rank's detail pointing at it.
    let r = mpiq(&["job", "--starter", &starter]);
    assert_eq!(r.code(), Some(EXIT_DEADLOCK), "{}", r.all());
    assert_eq!(
        r.stdout
            .matches("posted receives and unexpected messages cannot be trusted")
            .count(),
        1,
        "{}",
        r.all()
    );
    let ranks = format!("ranks 0-{}", n - 1);
    r.assert_stdout(&format!("\n  {ranks}: error: MPICH 4.0.2 runs the ch4 device"));
    assert_eq!(
        r.stdout.matches(&format!("  error: as for {ranks} (above)\n")).count() as i64,
        n,
        "{}",
        r.all()
    );

    let cores = job.gcore_all(dir.root());
    let mut args = vec!["core".to_string()];
    args.extend(cores.iter().map(|c| c.display().to_string()));
    args.push("--json".into());
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = mpiq(&argv);
    let v = r.json_exact();
    let a = &v["analysis"];
    assert_eq!(a["verdict"], "unknown", "{a:#}");
    assert!(
        a["summary"].as_str().unwrap_or_default().contains("needs two samples"),
        "{a:#}"
    );
}

fn slow_control(mpi: Mpi) {
    gdb::require_ptrace();
    let mut job = Job::builder(mpi, Example::Slow).start();
    let starter = job.starter_pid().to_string();
    let r = mpiq(&["job", "--starter", &starter, "--json", "--interval", "500"]);
    let pids: Vec<u32> = job.ranks().iter().map(|r| r.pid).collect();
    for &pid in &pids {
        assert_released(pid);
    }
    assert_ne!(r.code(), Some(EXIT_DEADLOCK), "{}", r.all());
    let v = r.json_exact();
    let a = &v["analysis"];
    assert_ne!(a["verdict"], "deadlock", "{a:#}");
    assert_eq!(a["cycles"], serde_json::json!([]), "{a:#}");
    if mpi.is_ch4() {
        // Its receives cannot be read, but every rank moved between the samples or
        // computes: the job is seen to progress (issue 41), and why no queue is read.
        assert_eq!(a["verdict"], "no_deadlock", "{a:#}");
        let summary = a["summary"].as_str().unwrap_or_default();
        assert!(summary.contains("reads them wrongly"), "{a:#}");
        assert!(summary.contains(" or computes: the job is progressing"), "{a:#}");
        assert_eq!(r.code(), Some(0), "{}", r.all());
    } else {
        // Every rank was read in both samples: the evidence supports "no deadlock".
        assert_eq!(a["verdict"], "no_deadlock", "{a:#}");
        assert_eq!(r.code(), Some(0), "{}", r.all());
    }
    // The control job runs to completion by itself.
    let status = job.wait_exit(Duration::from_secs(60));
    assert!(status.success(), "{status}\n{}", job.output());
}

#[test]
fn slow_job_is_not_deadlocked_and_completes_openmpi() {
    slow_control(Mpi::OpenMpi);
}

#[test]
fn slow_job_is_not_deadlocked_and_completes_mpich() {
    slow_control(Mpi::Mpich);
}

#[test]
fn slow_job_is_not_deadlocked_and_completes_openmpi5() {
    slow_control(Mpi::OpenMpi5);
}

#[test]
fn slow_job_is_not_deadlocked_and_completes_mpich_ch4() {
    slow_control(Mpi::MpichCh4);
}

/// One rank of a healthy ring (`healthy`, 4 ranks) stopped by `SIGSTOP`:
/// the others soon wait for it in `MPI_Sendrecv`, and nothing changes
/// between two samples, but it is no deadlock: `SIGCONT` lets the job go on.
/// The verdict is `unknown`, naming the stopped rank and where it stopped;
/// the kernel's state of each rank is in the JSON; mpiq leaves it stopped.
fn stopped_rank(mpi: Mpi) {
    gdb::require_ptrace();
    let job = Job::builder(mpi, Example::Healthy).nprocs(4).start();
    let starter = job.starter_pid().to_string();
    let stopped = job.pid_of(2);
    let signal = |sig: &str| {
        let r = run(Command::new("kill").args([sig, &stopped.to_string()]));
        assert!(r.success, "kill {sig} {stopped}: {r}");
    };
    signal("-STOP");
    // The others reach rank 2's exchange and wait there.
    std::thread::sleep(Duration::from_millis(500));
    let r = mpiq(&["job", "--starter", &starter, "--json", "--interval", "300"]);
    let v = r.json_exact();
    let a = &v["analysis"];
    assert_eq!(a["verdict"], "unknown", "{mpi}: {a:#}");
    assert_eq!(r.code(), Some(EXIT_UNKNOWN), "{}", r.all());
    assert_eq!(a["cycles"], serde_json::json!([]), "{a:#}");
    let summary = a["summary"].as_str().unwrap_or_default();
    assert!(summary.starts_with("unknown"), "{mpi}: {summary}");
    assert!(
        summary.contains("rank 2 is stopped by a signal (state T"),
        "{mpi}: {summary}"
    );
    assert!(!summary.contains("computing"), "{mpi}: {summary}");
    assert!(summary.contains("where it stopped: rank 2 "), "{mpi}: {summary}");
    for p in v["processes"].as_array().unwrap() {
        let state = p["os"]["state"].as_str().unwrap_or_default();
        if p["pid"] == stopped {
            assert_eq!(state, "T", "{p:#}");
        } else {
            assert!(matches!(state, "R" | "S"), "{p:#}");
        }
    }
    // Left as it was found: stopped, untraced; the others released.
    assert_eq!(procs::Stat::read(stopped).map(|s| s.state), Some('T'));
    assert_eq!(tracer_pid(stopped), Some(0));
    signal("-CONT");
    for rank in job.ranks() {
        assert_released(rank.pid);
    }
}

#[test]
fn a_rank_stopped_by_a_signal_is_no_deadlock_openmpi() {
    stopped_rank(Mpi::OpenMpi);
}

#[test]
fn a_rank_stopped_by_a_signal_is_no_deadlock_debian_openmpi() {
    stopped_rank(Mpi::DebianOpenMpi);
}

#[test]
fn a_rank_not_read_makes_the_verdict_unknown() {
    gdb::require_ptrace();
    // Ranks 0 and 1 of the 3-rank deadlock: rank 1 waits for rank 2, which
    // is not in the snapshot, so nothing can be concluded.
    let job = Job::builder(Mpi::Mpich, Example::Deadlock).start();
    let (a, b) = (job.pid_of(0).to_string(), job.pid_of(1).to_string());
    let r = mpiq(&["queues", "--pid", &a, "--pid", &b, "--json"]);
    assert_eq!(r.code(), Some(EXIT_UNKNOWN), "{}", r.all());
    let v = r.json_exact();
    assert_eq!(v["analysis"]["verdict"], "unknown", "{v:#}");
    assert_eq!(v["analysis"]["unknown_ranks"], serde_json::json!([2]), "{v:#}");
    // --no-analysis: the queues only, exit 0.
    let r = mpiq(&["queues", "--pid", &a, "--pid", &b, "--json", "--no-analysis"]);
    assert_eq!(r.code(), Some(0), "{}", r.all());
    assert!(r.json_exact().get("analysis").is_none());
    // One pid: the snapshot exactly as gdb's, no analysis.
    let r = mpiq(&["queues", "--pid", &a, "--json"]);
    assert_eq!(r.code(), Some(0), "{}", r.all());
    assert!(r.json_exact().get("analysis").is_none());
}

#[test]
fn formats_dot_csv_and_svg() {
    gdb::require_ptrace();
    let job = Job::builder(Mpi::OpenMpi, Example::Deadlock).start();
    let starter = job.starter_pid().to_string();

    let r = mpiq(&["job", "--starter", &starter, "--format", "dot", "--samples", "1"]);
    assert_eq!(r.code(), Some(EXIT_DEADLOCK), "{}", r.all());
    assert!(r.stdout.starts_with("digraph mpiq_waits {"), "{}", r.all());
    for (a, b) in [(0, 1), (1, 2), (2, 0)] {
        assert!(r.stdout.contains(&format!("r{a} -> r{b} [")), "{}", r.all());
    }
    assert!(r.stdout.contains("fillcolor=tomato"), "{}", r.all());
    assert!(r.stdout.trim_end().ends_with('}'), "{}", r.all());
    // The merged stacks: every rank in MPI_Wait, one node.
    assert!(r.stdout.contains("subgraph cluster_stacks {"), "{}", r.all());
    assert!(r.stdout.contains("[label=\"MPI_Wait\\nranks 0-2 (3)\""), "{}", r.all());

    let r = mpiq(&["job", "--starter", &starter, "--format", "csv", "--samples", "1"]);
    assert_eq!(r.code(), Some(EXIT_DEADLOCK), "{}", r.all());
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines[0], "from,to,kind,op,communicator,tag,wait", "{}", r.all());
    let mut rows = lines[1..].to_vec();
    rows.sort_unstable();
    assert_eq!(
        rows,
        [
            "0,1,and,receive,MPI_COMM_WORLD,400,0",
            "1,2,and,receive,MPI_COMM_WORLD,401,1",
            "2,0,and,receive,MPI_COMM_WORLD,402,2",
        ],
        "{}",
        r.all()
    );

    let dir = WorkDir::new("job-svg");
    let svg = dir.path("waits.svg");
    let r = mpiq(&[
        "job",
        "--starter",
        &starter,
        "--samples",
        "1",
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(r.code(), Some(EXIT_DEADLOCK), "{}", r.all());
    assert!(r.stdout.contains("Deadlock analysis: DEADLOCK"), "{}", r.all());
    let text = std::fs::read_to_string(&svg).unwrap_or_else(|e| panic!("{}: {e}\n{}", svg.display(), r.all()));
    assert!(text.contains("<svg") && text.contains("rank 2"), "{text}");
    assert!(text.contains("cluster_stacks") && text.contains("MPI_Wait"), "{text}");

    // Without graphviz: a clear error naming the package, before any rank
    // is stopped.
    let empty = dir.path("empty-path");
    std::fs::create_dir_all(&empty).unwrap();
    let other = dir.path("other.svg");
    let r = mpiq_env(
        &["job", "--starter", &starter, "--svg", other.to_str().unwrap()],
        &[("PATH", empty.to_str().unwrap())],
    );
    assert_eq!(r.code(), Some(1), "{}", r.all());
    assert!(
        r.stderr.contains("graphviz") && r.stderr.contains("`dot`"),
        "{}",
        r.all()
    );
    assert!(!other.exists());

    // Usage errors exit 2.
    let r = mpiq(&["job", "--starter", &starter, "--format", "csv", "--json"]);
    assert_eq!(r.code(), Some(2), "{}", r.all());
    let r = mpiq(&["job", "--starter", &starter, "--samples", "3"]);
    assert_eq!(r.code(), Some(2), "{}", r.all());
    for rank in job.ranks() {
        assert_released(rank.pid);
    }
}

/// The MPI2DD test starter (`tests/fixtures/mpi2dd_starter.c`) running a
/// job under MPICH's mpiexec; killed, with everything under it, on drop.
struct Mpi2ddStarter {
    child: Child,
    /// The rank → pid lines the job printed.
    ranks: Vec<(usize, u32)>,
    /// Every process under the starter once it was ready.
    processes: Vec<Proc>,
}

impl Mpi2ddStarter {
    fn start(example: Example, n: usize) -> Mpi2ddStarter {
        let exe = fixtures::build("mpi2dd_starter.c", "mpi2dd_starter", Compiler::Cc, &["-Wall"], false);
        let program = mpiq_tests::build_example(Mpi::Mpich, example);
        let mut cmd = Command::new(exe);
        cmd.arg(Mpi::Mpich.starter())
            .arg(n.to_string())
            .arg(&program)
            .env("MPIQ_EXAMPLE_LIFETIME", "600")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .process_group(0);
        for (key, _) in std::env::vars_os() {
            if key
                .to_str()
                .is_some_and(|k| mpiq_tests::job::SCRUBBED_ENV_PREFIXES.iter().any(|p| k.starts_with(p)))
            {
                cmd.env_remove(&key);
            }
        }
        let mut child = cmd.spawn().expect("start mpi2dd_starter");
        let stdout = child.stdout.take().expect("piped");
        let (tx, rx) = mpsc::channel::<String>();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut s = Mpi2ddStarter {
            child,
            ranks: Vec::new(),
            processes: Vec::new(),
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = rx
                .recv_timeout(left)
                .unwrap_or_else(|e| panic!("mpi2dd_starter not ready ({e}); it printed:\n{}", seen.join("\n")));
            seen.push(line.clone());
            if let Some(rest) = line.strip_prefix("MPIQ-READY ") {
                let field = |k: &str| {
                    rest.split_whitespace()
                        .find_map(|w| w.strip_prefix(k))
                        .and_then(|v| v.parse::<u64>().ok())
                        .unwrap_or_else(|| panic!("bad line {line:?}"))
                };
                s.ranks.push((field("rank=") as usize, field("pid=") as u32));
            }
            if line.starts_with("MPI2DD-STARTER-READY") {
                break;
            }
        }
        s.ranks.sort_unstable();
        assert_eq!(s.ranks.len(), n, "{}", seen.join("\n"));
        s.processes = procs::descendants(s.child.id());
        s.processes.extend(s.ranks.iter().filter_map(|&(_, pid)| Proc::of(pid)));
        s
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Mpi2ddStarter {
    fn drop(&mut self) {
        // The starter leads its own process group; hydra's proxy and the
        // ranks put themselves in other sessions: kill those one by one
        // (only while they are the very processes recorded).
        procs::end_job(&mut self.child, &self.processes);
    }
}

#[test]
fn a_starter_with_only_an_mpi2dd_proctable_is_followed() {
    gdb::require_ptrace();
    let starter = Mpi2ddStarter::start(Example::Deadlock, 3);
    let r = mpiq(&["job", "--starter", &starter.pid().to_string(), "--json", "-v"]);
    assert_eq!(r.code(), Some(EXIT_DEADLOCK), "{}", r.all());
    // Through the proctable, not the fallback over the starter's children.
    assert!(r.stderr.contains("MPI2DD_info of"), "{}", r.all());
    assert!(!r.stderr.contains("started under it instead"), "{}", r.all());
    let v = r.json_exact();
    let procs = v["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 3, "{v:#}");
    // The table lists the ranks in reverse order: the world ranks come from
    // the entries' rank field.
    for &(rank, pid) in &starter.ranks {
        let p = procs
            .iter()
            .find(|p| p["pid"] == pid)
            .unwrap_or_else(|| panic!("rank {rank} (pid {pid}) missing: {v:#}"));
        assert_eq!(p["world_rank"], rank, "{p}");
        assert!(p["error"].is_null(), "{p}");
        assert_released(pid);
    }
    assert_deadlock_ring(&v, 3, "MPI2DD starter");
    assert_released(starter.pid());
}

/// The communicators of the process with world rank `rank`, by name.
fn comm<'a>(v: &'a Value, rank: i64, name: &str) -> &'a Value {
    v["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["world_rank"] == rank)
        .and_then(|p| p["communicators"].as_array())
        .and_then(|cs| cs.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("rank {rank} has no communicator '{name}': {v:#}"))
}

fn named_comms(mpi: Mpi) {
    gdb::require_ptrace();
    let job = Job::builder(mpi, Example::NamedComms).start();
    let starter = job.starter_pid().to_string();
    let r = mpiq(&["job", "--starter", &starter, "--json"]);
    let v = r.json_exact();
    let source = if mpi.is_open_mpi() { "library" } else { "inferred" };
    for (name, ranks, members) in [
        ("solver", vec![0, 1, 2, 3], vec![0, 1, 2, 3]),
        ("left-half", vec![0, 1], vec![0, 1]),
        ("right-half", vec![2, 3], vec![2, 3]),
    ] {
        for &m in &members {
            let c = comm(&v, m, name);
            assert_eq!(c["world_ranks"], serde_json::json!(ranks), "{mpi} rank {m}: {c:#}");
            assert_eq!(c["world_ranks_source"], source, "{mpi} rank {m}: {c:#}");
        }
    }
    // The peers' world ranks on the split communicators, through the groups.
    let c = comm(&v, 2, "right-half");
    let send = &c["queues"]["sends"]["operations"][0];
    assert_eq!(send["peer"]["local"], 1, "{c:#}");
    assert_eq!(send["peer"]["world"], 3, "{c:#}");
    let a = &v["analysis"];
    // Each half's sender waits for its receiver to take the 64 KiB send and
    // the receiver for a tag-700 message from the sender: two AND cycles, in
    // world ranks; and the ANY_SOURCE receives on "solver" that nobody
    // serves form a knot of all four, shown as one cycle through them.
    assert_eq!(a["verdict"], "deadlock", "{a:#}");
    assert_eq!(a["cycles"], serde_json::json!([[0, 1], [0, 1, 2, 3], [2, 3]]), "{a:#}");
    let edges = a["edges"].as_array().unwrap();
    assert!(
        edges.iter().any(|e| e["from"] == 2
            && e["to"] == 3
            && e["kind"] == "and"
            && e["op"] == "send"
            && e["communicator"] == "right-half"
            && e["tag"] == 601),
        "{a:#}"
    );
    assert!(
        edges.iter().any(|e| e["from"] == 3
            && e["to"] == 2
            && e["kind"] == "and"
            && e["op"] == "receive"
            && e["communicator"] == "right-half"
            && e["tag"] == 700),
        "{a:#}"
    );
    // The ANY_SOURCE receives on "solver": OR edges to every other member.
    let or_from_0: Vec<i64> = edges
        .iter()
        .filter(|e| e["from"] == 0 && e["kind"] == "or" && e["communicator"] == "solver")
        .map(|e| e["to"].as_i64().unwrap())
        .collect();
    assert_eq!(or_from_0, [1, 2, 3], "{a:#}");
    if !mpi.is_open_mpi() {
        let r = mpiq(&["job", "--starter", &starter, "--samples", "1"]);
        assert!(r.stdout.contains("inferred"), "{}", r.all());
    }
    for rank in job.ranks() {
        assert_released(rank.pid);
    }
}

#[test]
fn named_comms_groups_inferred_mpich() {
    named_comms(Mpi::Mpich);
}

#[test]
fn named_comms_groups_from_the_library_openmpi() {
    named_comms(Mpi::OpenMpi);
}

#[test]
fn named_comms_groups_from_the_library_openmpi5() {
    named_comms(Mpi::OpenMpi5);
}

#[test]
fn sessions_communicator_takes_part_mpich() {
    sessions_communicator_takes_part(Mpi::Mpich);
}

/// Open MPI 5.0.7's library gives the sessions communicator a wrong group: mpiq rejects it and
/// infers the group across the ranks, whose world ranks come from their environment.
#[test]
fn sessions_communicator_takes_part_openmpi5() {
    sessions_communicator_takes_part(Mpi::OpenMpi5);
}

fn sessions_communicator_takes_part(mpi: Mpi) {
    gdb::require_ptrace();
    // Not Open MPI 4.1: it has no MPI-4 Sessions (Example::unsupported_reason).
    let job = Job::builder(mpi, Example::Sessions).start();
    let n = job.nprocs() as i64;
    let r = mpiq(&["job", "--starter", &job.starter_pid().to_string(), "--json"]);
    assert_eq!(r.code(), Some(EXIT_DEADLOCK), "{}", r.all());
    let v = r.json_exact();
    let a = &v["analysis"];
    let ring: Vec<i64> = (0..n).collect();
    assert_eq!(a["verdict"], "deadlock", "{a:#}");
    assert_eq!(a["cycles"], serde_json::json!([ring]), "{a:#}");
    let summary = a["summary"].as_str().unwrap();
    assert!(
        summary.contains("rank 0 waits for rank 1 on 'sessions-world' tag 900"),
        "{summary}"
    );
    for e in a["edges"].as_array().unwrap() {
        assert_eq!(e["communicator"], "sessions-world", "{e}");
        assert_eq!(e["tag"], 900, "{e}");
    }
    let c = comm(&v, 1, "sessions-world");
    assert_eq!(c["world_ranks_source"], "inferred", "{c:#}");
    assert_eq!(c["world_ranks"], serde_json::json!(ring), "{c:#}");
    for rank in job.ranks() {
        assert_released(rank.pid);
    }
}

/// Open MPI 5 on the UCX PML: its debug library sees none of that PML's requests. Every rank's
/// queues are "not visible with this transport", never empty; the job's verdict then comes from
/// the stacks alone and is never an all-clear.
#[test]
fn openmpi5_on_the_ucx_pml_says_the_queues_are_not_visible() {
    gdb::require_ptrace();
    // UCX's shared-memory and TCP transports are not on Open MPI's default list of UCX
    // transports (network devices): allow them, as on a laptop or a CI runner.
    let job = Job::builder(Mpi::OpenMpi5, Example::Deadlock)
        .mca("pml", "ucx")
        .mca("opal_common_ucx_tls", "any")
        .mca("opal_common_ucx_devices", "any")
        .start();
    let starter = job.starter_pid().to_string();
    let r = mpiq(&["job", "--starter", &starter, "--json"]);
    let v = r.json_exact();
    let procs = v["processes"].as_array().expect("processes");
    assert_eq!(procs.len(), job.nprocs(), "{v:#}");
    for p in procs {
        let m = &p["queues_missing"];
        assert_eq!(m["reason"], "transport_hidden", "{p:#}");
        assert_eq!(m["transport"], "pml ucx", "{p:#}");
        let error = p["error"].as_str().unwrap_or_default();
        assert!(
            error.contains("not visible with this transport") && error.contains("--mca pml ob1"),
            "{p:#}"
        );
        let comms = p["communicators"].as_array().expect("communicators");
        assert!(comms.iter().any(|c| c["name"] == "MPI_COMM_WORLD"), "{p:#}");
        for c in comms {
            for q in ["sends", "receives"] {
                let queue = &c["queues"][q];
                assert_eq!(queue["available"], false, "{} {q}: {queue}", c["name"]);
                assert!(
                    queue["reason"].as_str().unwrap_or_default().contains("pml ucx"),
                    "{} {q}: {queue}",
                    c["name"]
                );
            }
        }
    }
    let a = &v["analysis"];
    assert_ne!(a["verdict"], "no_deadlock", "{a:#}");
    assert!(
        a["summary"]
            .as_str()
            .unwrap_or_default()
            .contains("from stacks only: the queues are not readable with the transport this job runs on"),
        "{a:#}"
    );
    let text = mpiq(&["job", "--starter", &starter, "--samples", "1"]);
    assert!(
        text.stdout.contains("pml ucx") && text.stdout.contains("queues not visible with this transport"),
        "{}",
        text.all()
    );
    for rank in job.ranks() {
        assert_released(rank.pid);
    }
}
