//! `mpiq-bench stacks`: what reading every thread's stack adds to `mpiq job`
//! (issue 12: at most 20 % on 128 Open MPI ranks), and how the unwinder's
//! time grows with the depth of the stacks.
//!
//! 1. A job of `many_ops 10` (ranks idle in `pause()`, three threads each)
//!    and one of `barrier_vs_recv` (ranks inside MPI) on N ranks: `mpiq job
//!    --starter P --samples 2 --json`, alternately with and without
//!    `--no-stacks`, `reps` times each; median wall time and peak memory.
//! 2. `mpiq stacks --pid P` on the ranks of `deep_stack DEPTH` for several
//!    depths: time per frame (the stacks are linear in their frames if it
//!    stays flat).

use std::path::Path;
use std::time::Duration;

use mpiq_tests::frontends::cli_command;
use mpiq_tests::{Example, Job, Mpi};

use crate::proc;

/// One configuration's medians.
pub struct Row {
    pub what: String,
    pub with_ms: f64,
    pub without_ms: f64,
    pub with_rss_kib: u64,
    pub without_rss_kib: u64,
}

/// `mpiq job --starter STARTER --samples 2 --json` `reps` times with and
/// without `flag` (`--no-stacks`, `--no-python`), alternately; `check` sees
/// each run (with: `true`) and may reject it. The medians, and the peak
/// memory of each.
pub fn alternate(
    starter: &str,
    flag: &str,
    reps: usize,
    scratch: &Path,
    check: impl Fn(bool, &proc::Outcome) -> Result<(), String>,
) -> Result<Row, String> {
    let (mut with, mut without) = (Vec::new(), Vec::new());
    let (mut with_rss, mut without_rss) = (0, 0);
    for _ in 0..reps {
        for on in [true, false] {
            let mut cmd = cli_command(&["job", "--starter", starter, "--samples", "2", "--json"]);
            if !on {
                cmd.arg(flag);
            }
            let out = proc::run(cmd, scratch);
            if !out.stdout.contains("\"analysis\"") {
                return Err(format!("mpiq job printed no analysis\n{}", out.all()));
            }
            check(on, &out)?;
            if on {
                with.push(out.wall_ms);
                with_rss = with_rss.max(out.peak_rss_kib);
            } else {
                without.push(out.wall_ms);
                without_rss = without_rss.max(out.peak_rss_kib);
            }
        }
    }
    Ok(Row {
        what: String::new(),
        with_ms: median(with),
        without_ms: median(without),
        with_rss_kib: with_rss,
        without_rss_kib: without_rss,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn job_row(
    mpi: Mpi,
    example: Example,
    args: &[&str],
    ranks: usize,
    reps: usize,
    scratch: &Path,
) -> Result<Row, String> {
    eprintln!("[stacks] {mpi} {example} on {ranks} ranks (load {})", proc::loadavg());
    let job = Job::builder(mpi, example)
        .nprocs(ranks)
        .args(args.iter().map(|s| s.to_string()))
        .ready_timeout(Duration::from_secs(600))
        .lifetime_secs(3600)
        .start();
    // Ranks print READY just before their last call: let them reach it.
    std::thread::sleep(Duration::from_secs(2));
    let starter = job.starter_pid().to_string();
    let row = alternate(&starter, "--no-stacks", reps, scratch, |_, _| Ok(()))?;
    drop(job);
    Ok(Row {
        what: format!("{mpi} `{example}` {ranks} ranks"),
        ..row
    })
}

fn depth_row(mpi: Mpi, depth: usize, reps: usize, scratch: &Path) -> Result<(usize, f64, usize), String> {
    let job = Job::builder(mpi, Example::DeepStack)
        .nprocs(2)
        .args([depth.to_string()])
        .lifetime_secs(600)
        .start();
    std::thread::sleep(Duration::from_secs(1));
    let pid = job.pid_of(0).to_string();
    let mut times = Vec::new();
    let mut frames = 0;
    for _ in 0..reps {
        let out = proc::run(cli_command(&["stacks", "--pid", &pid, "--json"]), scratch);
        let v: serde_json::Value =
            serde_json::from_str(&out.stdout).map_err(|e| format!("mpiq stacks: {e}\n{}", out.all()))?;
        frames = v[0]["threads"]
            .as_array()
            .map(|ts| ts.iter().map(|t| t["frames"].as_array().map_or(0, Vec::len)).sum())
            .unwrap_or(0);
        times.push(out.wall_ms);
    }
    drop(job);
    Ok((depth, median(times), frames))
}

/// `--mpi openmpi|mpich`.
pub fn parse_mpi(name: &str) -> Result<Mpi, String> {
    match name {
        "openmpi" | "ompi" => Ok(Mpi::OpenMpi),
        "mpich" => Ok(Mpi::Mpich),
        "debian" => Ok(Mpi::DebianOpenMpi),
        other => Mpi::all()
            .into_iter()
            .chain(Mpi::packaged())
            .find(|m| m.name() == other)
            .ok_or_else(|| format!("unknown MPI {other} (openmpi, mpich, or an MPI's name: debian-openmpi, ...)")),
    }
}

/// `mpiq-bench stacks [--ranks N] [--reps R] [--mpi openmpi]`: prints a
/// Markdown table.
pub fn main(args: &[String], scratch: &Path) -> Result<(), String> {
    let mut ranks = 128;
    let mut reps = 5;
    let mut mpi = Mpi::OpenMpi;
    let mut depths = vec![10usize, 100, 1000, 10_000];
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().cloned().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--ranks" => ranks = value()?.parse().map_err(|e| format!("--ranks: {e}"))?,
            "--reps" => reps = value()?.parse().map_err(|e| format!("--reps: {e}"))?,
            "--mpi" => mpi = parse_mpi(&value()?)?,
            "--depths" => {
                depths = value()?
                    .split(',')
                    .map(|d| d.parse().map_err(|e| format!("--depths: {e}")))
                    .collect::<Result<_, _>>()?
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if std::env::var_os("MPIQ_MAX_FRAMES").is_none() {
        std::env::set_var("MPIQ_MAX_FRAMES", "20000");
    }
    let rows = [
        job_row(mpi, Example::ManyOps, &["10"], ranks, reps, scratch)?,
        job_row(mpi, Example::BarrierVsRecv, &[], ranks, reps, scratch)?,
    ];
    println!("| job | with stacks (median ms) | without (median ms) | added | peak RSS with / without (MiB) |");
    println!("|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {:.0} | {:.0} | {:+.1} % | {:.1} / {:.1} |",
            r.what,
            r.with_ms,
            r.without_ms,
            (r.with_ms / r.without_ms - 1.0) * 100.0,
            r.with_rss_kib as f64 / 1024.0,
            r.without_rss_kib as f64 / 1024.0
        );
    }
    println!();
    println!("| depth | frames read | `mpiq stacks` median ms |");
    println!("|---|---|---|");
    for &d in &depths {
        let (depth, ms, frames) = depth_row(mpi, d, reps, scratch)?;
        println!("| {depth} | {frames} | {ms:.1} |");
    }
    Ok(())
}
