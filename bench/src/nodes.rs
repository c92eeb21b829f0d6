//! `mpiq-bench nodes`: `mpiq job` on a job across Slurm nodes (issue 13:
//! 8 nodes x 32 ranks within 3 s and 200 MiB of front-end memory), and the
//! per-rank and per-node costs the scaling model of docs/PERFORMANCE.md is
//! built from.
//!
//! On a Slurm cluster of `--nodes` nodes on this machine
//! (`scripts/slurm-cluster`), for each job (`many_ops 10`: ranks idle in
//! `pause()`; `deadlock`: ranks spinning in `MPI_Wait`, as MPI's progress
//! engines do, so 256 of them on 2 cores starve everything else):
//!
//! 1. `mpiq job --starter <srun> -v` (the text report: compact records,
//!    then the ranks it names whole) and `mpiq job --starter <srun> --json
//!    -v` (every rank whole), two samples each, alternately, `reps` times:
//!    median wall time and peak memory of the front end, and from the JSON
//!    run's `-v`
//!    timestamps when the proctable was read, when the first and the last
//!    collector said hello (srun's step launch), when the last node's
//!    second sample arrived.
//! 2. `mpiq collect` run by hand on one node's ranks (1, then all of them;
//!    one sample): the collector's fixed and per-rank cost, and the bytes
//!    it sends per rank.

use std::path::Path;
use std::time::Duration;

use mpiq_tests::frontends::cli_command;
use mpiq_tests::slurm::Cluster;
use mpiq_tests::{Example, Job, Mpi};

use crate::proc;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The time of the first `-v` line containing `what`, in ms.
fn stamp(stderr: &str, what: &str, last: bool) -> Option<f64> {
    let mut lines = stderr.lines().filter(|l| l.contains(what));
    let line = if last { lines.next_back() } else { lines.next() }?;
    line.split_once('[')?.1.split_once("ms]")?.0.trim().parse().ok()
}

/// `mpiq collect` on `ranks` (pid, rank) of node `node`, one sample: wall
/// ms and bytes written.
fn collect_by_hand(cluster: &Cluster, node: &str, ranks: &[(u32, usize)]) -> Result<(f64, usize), String> {
    let (out, ms) = proc::collect(node, ranks, &["--samples", "1"], |cmd| {
        cmd.envs(cluster.env());
    })?;
    Ok((ms, out.stdout.len()))
}

/// What one row measures.
#[derive(Clone, Copy)]
struct Shape {
    nodes: usize,
    per_node: usize,
    reps: usize,
}

fn job_rows(
    cluster: &Cluster,
    mpi: Mpi,
    (example, args): (Example, &[&str]),
    shape: &Shape,
    scratch: &Path,
) -> Result<(), String> {
    let Shape { nodes, per_node, reps } = *shape;
    eprintln!(
        "[nodes] {mpi} {example} on {nodes} x {per_node} (load {})",
        proc::loadavg()
    );
    let job = Job::builder(mpi, example)
        .launcher(cluster.srun(nodes, per_node))
        .args(args.iter().map(|s| s.to_string()))
        .ready_timeout(Duration::from_secs(600))
        .lifetime_secs(3600)
        .start();
    std::thread::sleep(Duration::from_secs(3));
    let starter = job.starter_pid().to_string();
    let (mut wall, mut rss, mut table, mut hello1, mut hellon, mut last) =
        (Vec::new(), 0u64, Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut text_wall, mut text_rss) = (Vec::new(), 0u64);
    for _ in 0..reps {
        // The text report (the default): compact records (and no ranks
        // whole: the text without --stacks shows nothing they leave out).
        let mut cmd = cli_command(&["job", "--starter", &starter, "-v"]);
        cmd.envs(cluster.env());
        let out = proc::run(cmd, scratch);
        if !out.stdout.starts_with("Deadlock analysis:") || !out.stderr.contains("compact records") {
            return Err(format!("the text report through compact records failed\n{}", out.all()));
        }
        text_wall.push(out.wall_ms);
        text_rss = text_rss.max(out.peak_rss_kib);
        let mut cmd = cli_command(&["job", "--starter", &starter, "--json", "-v"]);
        cmd.envs(cluster.env());
        let out = proc::run(cmd, scratch);
        let v = proc::first_json(&out.stdout).ok_or_else(|| format!("no JSON\n{}", out.all()))?;
        let n = v["processes"]
            .as_array()
            .map_or(0, |p| p.iter().filter(|p| p["error"].is_null()).count());
        if n != nodes * per_node {
            return Err(format!("{n} of {} ranks read\n{}", nodes * per_node, out.all()));
        }
        wall.push(out.wall_ms);
        rss = rss.max(out.peak_rss_kib);
        table.extend(stamp(&out.stderr, "rank(s)", false));
        hello1.extend(stamp(&out.stderr, "collector on ", false));
        hellon.extend(stamp(&out.stderr, "collector on ", true));
        last.extend(stamp(&out.stderr, "sample 2 sent", true));
    }
    println!(
        "| {mpi} `{example}` | {nodes} x {per_node} | {:.0} | {:.1} | {:.0} | {:.1} | {:.0} | {:.0} / {:.0} | {:.0} |",
        median(text_wall),
        text_rss as f64 / 1024.0,
        median(wall),
        rss as f64 / 1024.0,
        median(table),
        median(hello1),
        median(hellon),
        median(last),
    );
    // One node's collector by hand: 1 rank, then all of the node's ranks.
    let mine: Vec<(u32, usize)> = job
        .ranks()
        .iter()
        .filter(|r| job.node_of(r.rank).as_deref() == Some("n1"))
        .map(|r| (r.pid, r.rank))
        .collect();
    let (mut one, mut all, mut bytes) = (Vec::new(), Vec::new(), 0);
    for _ in 0..reps {
        one.push(collect_by_hand(cluster, "n1", &mine[..1])?.0);
        let (ms, b) = collect_by_hand(cluster, "n1", &mine)?;
        all.push(ms);
        bytes = b;
    }
    let (one, all) = (median(one), median(all));
    eprintln!(
        "[nodes] {mpi} `{example}` collector on n1: 1 rank {one:.0} ms, {} ranks {all:.0} ms \
         ({:.1} ms per further rank), {} bytes sent ({:.1} KiB per rank and sample)",
        mine.len(),
        (all - one) / (mine.len().max(2) - 1) as f64,
        bytes,
        bytes as f64 / 1024.0 / mine.len() as f64
    );
    println!(
        "|  | collector, one sample | 1 rank: {one:.0} ms | {} ranks: {all:.0} ms | {:.1} ms per rank | {:.1} KiB per rank |",
        mine.len(),
        (all - one) / (mine.len().max(2) - 1) as f64,
        bytes as f64 / 1024.0 / mine.len() as f64
    );
    drop(job);
    Ok(())
}

/// `mpiq-bench nodes [--nodes 8] [--per-node 32] [--reps 5] [--mpi mpich]`:
/// prints a Markdown table.
pub fn main(args: &[String], scratch: &Path) -> Result<(), String> {
    let (mut nodes, mut per_node, mut reps, mut mpi) = (8, 32, 5, Mpi::Mpich);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().cloned().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--nodes" => nodes = value()?.parse().map_err(|e| format!("--nodes: {e}"))?,
            "--per-node" => per_node = value()?.parse().map_err(|e| format!("--per-node: {e}"))?,
            "--reps" => reps = value()?.parse().map_err(|e| format!("--reps: {e}"))?,
            "--mpi" => mpi = crate::stacks::parse_mpi(&value()?)?,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    let cluster = Cluster::start(nodes, per_node);
    println!(
        "| job | nodes x ranks | `mpiq job` (text, compact records) median ms | peak RSS MiB | `mpiq job --json` (every rank whole) median ms | peak RSS MiB | proctable read at ms | first / last collector hello at ms | last second sample at ms |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let shape = Shape { nodes, per_node, reps };
    job_rows(&cluster, mpi, (Example::ManyOps, &["10"]), &shape, scratch)?;
    job_rows(&cluster, mpi, (Example::Deadlock, &[]), &shape, scratch)?;
    Ok(())
}
