//! `mpiq-bench`: dump time, host memory requests and peak memory of every
//! mpiq front end on real MPI jobs of `examples/many_ops.c`, next to the
//! replay floor measured in the same run. See `docs/PERFORMANCE.md`.
//!
//! ```text
//! cargo build --release --workspace
//! target/release/mpiq-bench                      # everything (about 15 min on 2 cores)
//! target/release/mpiq-bench --mpi openmpi --k 10000 --frontends cli,gdb,lldb --no-job
//! target/release/mpiq-bench floor FILE.rec [--reps N] [--dll LIB]   # the floor alone
//! target/release/mpiq-bench cli-warm PID [--reps N] [--in-process]  # CLI, image cache warm
//! target/release/mpiq-bench stacks [--ranks 128] [--reps 5]          # what stacks add to `mpiq job`
//! target/release/mpiq-bench python [--ranks 32] [--reps 5]            # what Python frames add to `mpiq job`
//! target/release/mpiq-bench nodes [--nodes 8] [--per-node 32]        # a job across Slurm nodes
//! target/release/mpiq-bench watch [--ranks 128] [--record]          # one refresh of `mpiq watch`
//! target/release/mpiq-bench watch --replay SESSION.rec               # its analysis and screen alone
//! target/release/mpiq-bench detect [--ranks 2] [--every default,5s]   # what `mpiq run --detect` costs a job
//! target/release/mpiq-bench scale [--ranks 1000,16000] [--per-node 32] # `mpiq job` on simulated nodes
//! target/release/mpiq-bench single [--ranks 8] [--reps 10]           # one dump vs replay; stacks vs eu-stack
//! target/release/mpiq-bench recorder [--quick]                        # what the flight recorder adds per MPI call
//! target/release/mpiq-bench soak [--minutes 120]                      # real applications under `mpiq run --detect`
//! target/release/mpiq-bench serial [--minutes 5]                      # long single-rank phases under `mpiq run --detect`
//! ```

mod detect;
mod drive;
mod floor;
mod nodes;
mod proc;
mod python;
mod recorder;
mod report;
mod scale;
mod serial;
mod single;
mod soak;
mod stacks;
mod warm;
mod watch;

use std::path::{Path, PathBuf};
use std::time::Duration;

use mpiq_tests::{Example, Job, Mpi};

use crate::drive::Series;

const USAGE: &str = "\
usage: mpiq-bench [--mpi openmpi,mpich] [--k 10,1000,10000,100000] [--reps N]
                  [--frontends cli,gdb,lldb,replay] [--job-ranks 16] [--job-k 1000]
                  [--no-job] [--out DIR]
       mpiq-bench floor FILE [--reps N] [--dll LIB]
       mpiq-bench cli-warm PID [--reps N] [--in-process]
       mpiq-bench stacks [--ranks 128] [--reps 5] [--mpi openmpi] [--depths 10,100,1000,10000]
       mpiq-bench python [--ranks 32] [--reps 5] [--mpi openmpi]
       mpiq-bench nodes [--nodes 8] [--per-node 32] [--reps 5] [--mpi mpich]
       mpiq-bench watch [--ranks 128] [--samples 6] [--mpi openmpi] [--idle] [--record] [--replay FILE]
       mpiq-bench detect [--mpi openmpi] [--ranks 2] [--iterations 20000] [--points 1000000]
                         [--every default,10s,5s,1s] [--reps 3]
       mpiq-bench scale [--ranks 1000,16000,100000] [--per-node 32] [--mpi openmpi] [--records FILE]
                         [--html DIR]
       mpiq-bench single [--ranks 8] [--reps 10] [--k 10] [--mpi openmpi]
       mpiq-bench recorder [--mpi openmpi,mpich,debian-openmpi] [--rounds 15] [--quick]
                           [--no-callgrind] [--callgrind-iters 200000] [--kernel-n 256]
       mpiq-bench soak [--minutes 120] [--apps lammps,hpcc,elk] [--steps 6000]
       mpiq-bench serial [--mpi openmpi] [--minutes 5] [--cases compute,io,forever]";

/// What to measure.
struct Plan {
    mpis: Vec<Mpi>,
    ks: Vec<u64>,
    reps: usize,
    frontends: Vec<String>,
    job_ranks: usize,
    job_k: u64,
    job: bool,
    out: PathBuf,
}

/// The measurements of one (MPI, K).
pub struct Config {
    mpi: Mpi,
    k: u64,
    operations: u64,
    recording_bytes: u64,
    floor_collect: Series,
    floor_dump: Series,
    /// (front end, mode, series)
    fronts: Vec<(String, &'static str, Series)>,
}

/// The measurements of one whole-job run.
pub struct JobRun {
    mpi: Mpi,
    ranks: usize,
    k: u64,
    modes: Vec<(&'static str, Series)>,
}

fn parse_list<T: std::str::FromStr>(v: &str, what: &str) -> Vec<T> {
    v.split(',')
        .map(|x| {
            x.trim()
                .replace('_', "")
                .parse()
                .unwrap_or_else(|_| die(&format!("bad {what}: {x}")))
        })
        .collect()
}

fn die(msg: &str) -> ! {
    eprintln!("mpiq-bench: {msg}\n{USAGE}");
    std::process::exit(2)
}

fn parse_plan(args: &[String]) -> Plan {
    let mut p = Plan {
        mpis: Mpi::all().to_vec(),
        ks: vec![10, 1_000, 10_000, 100_000],
        reps: 5,
        frontends: ["cli", "gdb", "lldb", "replay"].map(String::from).to_vec(),
        job_ranks: 16,
        job_k: 1_000,
        job: true,
        out: PathBuf::from("target/mpiq-bench"),
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().cloned().unwrap_or_else(|| die(&format!("{a} needs a value")));
        match a.as_str() {
            "--mpi" => {
                p.mpis = val()
                    .split(',')
                    .map(|m| match m {
                        "openmpi" | "ompi" => Mpi::OpenMpi,
                        "mpich" => Mpi::Mpich,
                        other => die(&format!("unknown MPI {other}")),
                    })
                    .collect()
            }
            "--k" => p.ks = parse_list(&val(), "K"),
            "--reps" => p.reps = parse_list(&val(), "--reps")[0],
            "--frontends" => p.frontends = val().split(',').map(String::from).collect(),
            "--job-ranks" => p.job_ranks = parse_list(&val(), "--job-ranks")[0],
            "--job-k" => p.job_k = parse_list(&val(), "--job-k")[0],
            "--no-job" => p.job = false,
            "--out" => p.out = PathBuf::from(val()),
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0)
            }
            other => die(&format!("unknown argument {other}")),
        }
    }
    p
}

/// Fewer repetitions where one dump takes seconds.
fn reps_for(k: u64, reps: usize) -> usize {
    if k >= 100_000 {
        reps.min(3)
    } else {
        reps
    }
}

fn start_job(mpi: Mpi, nprocs: usize, k: u64) -> Job {
    Job::builder(mpi, Example::ManyOps)
        .nprocs(nprocs)
        .args([k.to_string()])
        .ready_timeout(Duration::from_secs(300))
        .lifetime_secs(3600)
        .start()
}

fn measure_config(plan: &Plan, mpi: Mpi, k: u64, scratch: &Path) -> Result<Config, String> {
    let reps = reps_for(k, plan.reps);
    eprintln!("[{}] {mpi} K={k}: starting the job (load {})", now(), proc::loadavg());
    let job = start_job(mpi, 2, k);
    let pid = job.pid_of(0);
    let pid_s = pid.to_string();
    let rec = scratch.join(format!("{}-k{k}.rec", mpi.name()));
    // The recording the floor and `mpiq replay` use: the same dump, recorded live.
    let out = proc::run(
        {
            let mut c =
                mpiq_tests::frontends::cli_command(&["queues", "--pid", &pid_s, "--json", "--in-process", "--record"]);
            c.arg(&rec);
            c
        },
        scratch,
    );
    if !out.success {
        return Err(format!("recording {mpi} K={k} failed\n{}", out.all()));
    }
    let recording_bytes = std::fs::metadata(&rec).map(|m| m.len()).unwrap_or(0);
    let mut cfg = Config {
        mpi,
        k,
        operations: 0,
        recording_bytes,
        floor_collect: Series::default(),
        floor_dump: Series::default(),
        fronts: Vec::new(),
    };
    let mut add = |name: &str, series: Vec<Series>| {
        for (mode, s) in drive::MODES.iter().zip(series) {
            cfg.fronts.push((name.to_string(), drive::mode_name(mode), s));
        }
    };
    for fe in &plan.frontends {
        eprintln!("[{}]   {fe} (load {})", now(), proc::loadavg());
        match fe.as_str() {
            "cli" => {
                add("cli", drive::mpiq(&["queues", "--pid", &pid_s], reps, false, scratch)?);
                add("cli-warm", drive::cli_warm(pid, reps, scratch)?);
            }
            "gdb" => add("gdb", drive::gdb(pid, reps, scratch)?),
            "lldb" => add("lldb", drive::lldb(pid, reps, scratch)?),
            "replay" => add(
                "replay",
                drive::mpiq(&["replay", &rec.display().to_string()], reps, false, scratch)?,
            ),
            other => return Err(format!("unknown front end {other}")),
        }
    }
    drop(job);
    // The floor last, after the job is gone: it needs no process.
    eprintln!("[{}]   replay floor (load {})", now(), proc::loadavg());
    let (c, d, operations) = drive::floor(&rec, reps.max(5), scratch)?;
    cfg.floor_collect = c;
    cfg.floor_dump = d;
    cfg.operations = operations;
    if k >= 100_000 {
        let _ = std::fs::remove_file(&rec);
    }
    Ok(cfg)
}

fn measure_job(plan: &Plan, mpi: Mpi, scratch: &Path) -> Result<JobRun, String> {
    eprintln!(
        "[{}] {mpi} job of {} ranks, K={}: starting (load {})",
        now(),
        plan.job_ranks,
        plan.job_k,
        proc::loadavg()
    );
    let job = start_job(mpi, plan.job_ranks, plan.job_k);
    let starter = job.starter_pid().to_string();
    let series = drive::mpiq(
        &["job", "--starter", &starter, "--samples", "1"],
        plan.reps,
        true,
        scratch,
    )?;
    drop(job);
    Ok(JobRun {
        mpi,
        ranks: plan.job_ranks,
        k: plan.job_k,
        modes: drive::MODES.iter().map(|m| drive::mode_name(m)).zip(series).collect(),
    })
}

fn now() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    format!("{:02}:{:02}:{:02}", (t / 3600) % 24, (t / 60) % 60, t % 60)
}

fn main() {
    // The simulated Slurm of `mpiq-bench scale` is this binary by other names.
    let argv0 = std::env::args().next().unwrap_or_default();
    match Path::new(&argv0).file_name().and_then(|n| n.to_str()) {
        Some("squeue") => std::process::exit(scale::squeue_main()),
        Some("srun") => std::process::exit(scale::srun_main(&std::env::args().skip(1).collect::<Vec<_>>())),
        _ => {}
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("floor") {
        let file = args.get(1).unwrap_or_else(|| die("floor needs a recording"));
        let mut reps = 5;
        let mut dll = None;
        let mut it = args[2..].iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                "--reps" => reps = parse_list(it.next().map_or("", |s| s), "--reps")[0],
                "--dll" => dll = it.next().cloned(),
                other => die(&format!("unknown argument {other}")),
            }
        }
        if let Err(e) = floor::main(Path::new(file), reps, dll.as_deref()) {
            eprintln!("mpiq-bench floor: {e}");
            std::process::exit(1);
        }
        return;
    }
    // The subcommands that start jobs: each gets a scratch directory of its own.
    type Sub = fn(&[String], &Path) -> Result<(), String>;
    let subs: [(&str, Sub); 10] = [
        ("detect", detect::main),
        ("scale", scale::main),
        ("single", single::main),
        ("stacks", stacks::main),
        ("nodes", nodes::main),
        ("python", python::main),
        ("watch", watch::main),
        ("recorder", recorder::main),
        ("soak", soak::main),
        ("serial", serial::main),
    ];
    if let Some((name, sub)) = subs.iter().find(|(n, _)| args.first().map(String::as_str) == Some(n)) {
        let scratch = std::env::temp_dir().join(format!("mpiq-bench-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&scratch).unwrap_or_else(|e| die(&format!("{}: {e}", scratch.display())));
        let r = sub(&args[1..], &scratch);
        let _ = std::fs::remove_dir_all(&scratch);
        if let Err(e) = r {
            eprintln!("mpiq-bench {name}: {e}");
            std::process::exit(1);
        }
        return;
    }
    if args.first().map(String::as_str) == Some("spawn") {
        std::process::exit(proc::spawn_main(&args[1..]));
    }
    if args.first().map(String::as_str) == Some("cli-warm") {
        let pid = args
            .get(1)
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| die("cli-warm needs a pid"));
        let mut reps = 5;
        let mut in_process = false;
        let mut it = args[2..].iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                "--reps" => reps = parse_list(it.next().map_or("", |s| s), "--reps")[0],
                "--in-process" => in_process = true,
                other => die(&format!("unknown argument {other}")),
            }
        }
        if let Err(e) = warm::main(pid, reps, in_process) {
            eprintln!("mpiq-bench cli-warm: {e}");
            std::process::exit(1);
        }
        return;
    }
    let plan = parse_plan(&args);
    // K = 100,000 is at the bridge's default limit of operations per queue
    // (a guard against looping lists): raise it for every front end started
    // from here (gdb, lldb and mpiq-dllhost inherit the environment).
    if std::env::var_os("MPIQ_MAX_OPERATIONS").is_none() {
        std::env::set_var("MPIQ_MAX_OPERATIONS", "10000000");
    }
    std::fs::create_dir_all(&plan.out).unwrap_or_else(|e| die(&format!("{}: {e}", plan.out.display())));
    let scratch = plan.out.join("scratch");
    std::fs::create_dir_all(&scratch).expect("scratch dir");
    let load_before = proc::loadavg();
    let mut configs = Vec::new();
    let mut failures = Vec::new();
    for &mpi in &plan.mpis {
        for &k in &plan.ks {
            match measure_config(&plan, mpi, k, &scratch) {
                Ok(c) => configs.push(c),
                Err(e) => {
                    eprintln!("mpiq-bench: {mpi} K={k}: {e}");
                    failures.push(format!("{mpi} K={k}"));
                }
            }
        }
    }
    let mut jobs = Vec::new();
    if plan.job {
        for &mpi in &plan.mpis {
            match measure_job(&plan, mpi, &scratch) {
                Ok(j) => jobs.push(j),
                Err(e) => {
                    eprintln!("mpiq-bench: {mpi} job: {e}");
                    failures.push(format!("{mpi} job"));
                }
            }
        }
    }
    let load = format!("load average before {load_before}, after {}", proc::loadavg());
    let md = report::markdown(&configs, &jobs, &load, &args);
    print!("{md}");
    let _ = std::fs::write(plan.out.join("table.md"), &md);
    let _ = std::fs::write(
        plan.out.join("results.json"),
        serde_json::to_string_pretty(&report::json(&configs, &jobs, &load)).unwrap_or_default(),
    );
    eprintln!("mpiq-bench: wrote {}/table.md and results.json", plan.out.display());
    if !failures.is_empty() {
        eprintln!("mpiq-bench: failed: {}", failures.join(", "));
        std::process::exit(1);
    }
}
