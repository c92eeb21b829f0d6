//! `mpiq-bench single`: the single-process costs of issue 26, side by side
//! on one job, every front end a new process as a user types it:
//!
//! 1. `mpiq queues --pid P --no-stacks` on rank 0, against `mpiq replay` of
//!    the same dump recorded (the replay floor: the debug library's own
//!    work with every answer from memory). Goal: within 1.5×.
//! 2. `mpiq stacks --pid P0,…,PN-1` (every thread of every rank), against
//!    elfutils' `eu-stack -p P` run on each rank in turn (all threads,
//!    names from the symbol tables, its default): the sum. Goal: within 1×.
//!
//! The job is `many_ops K` (three threads per rank, ranks idle in
//! `pause()` after posting K operations), so neither side competes with
//! spinning ranks for the CPU. The runs alternate, `reps` times; medians.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use mpiq_tests::frontends::cli_command;
use mpiq_tests::{Example, Job, Mpi};

use crate::proc;
use crate::report::median;

/// One front end's wall time, checked: `Err` with its output if it failed.
fn timed(cmd: Command, scratch: &Path, what: &str) -> Result<f64, String> {
    let out = proc::run(cmd, scratch);
    if !out.success {
        return Err(format!("{what} failed\n{}", out.all()));
    }
    Ok(out.wall_ms)
}

pub fn main(args: &[String], scratch: &Path) -> Result<(), String> {
    let (mut ranks, mut reps, mut k, mut mpi) = (8usize, 10usize, 10u64, Mpi::OpenMpi);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().cloned().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--ranks" => ranks = val()?.parse().map_err(|_| "bad --ranks")?,
            "--reps" => reps = val()?.parse().map_err(|_| "bad --reps")?,
            "--k" => k = val()?.parse().map_err(|_| "bad --k")?,
            "--mpi" => {
                mpi = match val()?.as_str() {
                    "openmpi" => Mpi::OpenMpi,
                    "mpich" => Mpi::Mpich,
                    other => return Err(format!("--mpi {other}: openmpi or mpich")),
                }
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    let eu_stack = which("eu-stack")
        .ok_or("eu-stack is not installed (elfutils: DEBIAN_FRONTEND=noninteractive apt-get install -y elfutils)")?;
    let job = Job::builder(mpi, Example::ManyOps)
        .nprocs(ranks)
        .args([k.to_string()])
        .ready_timeout(Duration::from_secs(300))
        .lifetime_secs(3600)
        .start();
    let pids: Vec<String> = (0..ranks).map(|r| job.pid_of(r).to_string()).collect();
    let rank0 = pids[0].clone();
    let rec = scratch.join("rank0.rec");
    let mut record = cli_command(&["queues", "--pid", &rank0, "--no-stacks", "--record"]);
    record.arg(&rec);
    timed(record, scratch, "recording rank 0")?;

    let (mut queues, mut replay, mut stacks, mut eu) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // One of each first, not counted: the page cache holds every object.
    for counted in std::iter::once(false).chain(std::iter::repeat_n(true, reps)) {
        let q = timed(
            cli_command(&["queues", "--pid", &rank0, "--no-stacks"]),
            scratch,
            "mpiq queues",
        )?;
        let mut r = cli_command(&["replay"]);
        r.arg(&rec);
        let r = timed(r, scratch, "mpiq replay")?;
        let s = timed(
            cli_command(&["stacks", "--pid", &pids.join(",")]),
            scratch,
            "mpiq stacks",
        )?;
        let mut e = 0.0;
        for pid in &pids {
            let mut cmd = Command::new(&eu_stack);
            cmd.args(["-p", pid]);
            e += timed(cmd, scratch, "eu-stack")?;
        }
        if counted {
            queues.push(q);
            replay.push(r);
            stacks.push(s);
            eu.push(e);
        }
    }
    drop(job);
    let (q, r, s, e) = (median(&queues), median(&replay), median(&stacks), median(&eu));
    println!(
        "{mpi}, {ranks} ranks of many_ops {k}, {reps} runs each, medians (load {}):",
        proc::loadavg()
    );
    println!("  mpiq queues --pid P --no-stacks  {q:7.1} ms");
    println!("  mpiq replay (the floor)          {r:7.1} ms");
    println!("  ratio                            {:7.2}x  (goal 1.5x)", q / r);
    println!("  mpiq stacks, {ranks} ranks           {s:7.1} ms");
    println!("  eu-stack -p, each rank, summed   {e:7.1} ms");
    println!("  ratio                            {:7.2}x  (goal 1x)", s / e);
    Ok(())
}

/// `name` on PATH.
fn which(name: &str) -> Option<std::path::PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}
