//! `mpiq-bench detect`: what `mpiq run --detect` costs a healthy job. The
//! job is `examples/stencil.c`, a fixed amount of work whose ranks wait on
//! each other every iteration, so each moment a rank is held stopped shows
//! in its run time. Each round runs it under `mpiq run --timeout 10h` (no
//! checks), then with `--detect --detect-every E` for every interval asked
//! (`default`: none given), in turn; it reports the median run time of
//! each, the difference to the plain run, and what `mpiq run` said its
//! checks held the ranks stopped (`--detect's N checks held the ranks on
//! this node stopped for ...`).

use std::path::Path;
use std::time::Instant;

use mpiq_tests::{build_example, Example, Mpi};

use crate::proc;
use crate::report::median;
use crate::stacks::parse_mpi;

/// One run: wall time (s), and the words `mpiq run` said of its checks.
fn one(mpi: Mpi, exe: &Path, ranks: usize, args: &[String], every: Option<&str>) -> Result<(f64, String), String> {
    let starter = mpi.starter_command(ranks, exe, args);
    let mut cmd = mpiq_tests::frontends::cli_command(&["run"]);
    match every {
        Some("default") => {
            cmd.arg("--detect");
        }
        Some(e) => {
            cmd.args(["--detect", "--detect-every", e]);
        }
        // mpiq run needs one of the two; a timeout alone never looks.
        None => {
            cmd.args(["--timeout", "10h"]);
        }
    }
    cmd.arg("--").arg(starter.get_program()).args(starter.get_args());
    for (k, v) in starter.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let t = Instant::now();
    let out = cmd.output().map_err(|e| format!("mpiq run: {e}"))?;
    let secs = t.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    if !out.status.success() {
        return Err(format!("mpiq run failed ({}): {stderr}", out.status));
    }
    let said = stderr
        .lines()
        .find_map(|l| l.strip_prefix("mpiq run: --detect's "))
        .map(|l| format!("--detect's {l}"))
        .unwrap_or_default();
    if every.is_some() && said.is_empty() {
        return Err(format!("mpiq run --detect said nothing of its checks: {stderr}"));
    }
    Ok((secs, said))
}

/// `mpiq-bench detect [--mpi openmpi] [--ranks 2] [--iterations 20000]
/// [--points 1000000] [--every default,10s,5s,1s] [--reps 3]` (`default`:
/// `--detect` with no `--detect-every`).
pub fn main(args: &[String], _scratch: &Path) -> Result<(), String> {
    let mut mpi = Mpi::OpenMpi;
    let mut ranks = 2usize;
    let mut iterations = 20_000u64;
    let mut points = 1_000_000u64;
    let mut every: Vec<String> = ["default", "10s", "5s", "1s"].map(String::from).to_vec();
    let mut reps = 3usize;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().cloned().ok_or(format!("{a} needs a value"));
        let num = |v: String| v.replace('_', "").parse::<u64>().map_err(|_| format!("bad {a}: {v}"));
        match a.as_str() {
            "--mpi" => mpi = parse_mpi(&val()?)?,
            "--ranks" => ranks = num(val()?)? as usize,
            "--iterations" => iterations = num(val()?)?,
            "--points" => points = num(val()?)?,
            "--every" => every = val()?.split(',').map(String::from).collect(),
            "--reps" => reps = num(val()?)?.max(1) as usize,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    let exe = build_example(mpi, Example::Stencil);
    let job_args = [iterations.to_string(), points.to_string()];
    let modes: Vec<Option<&str>> = std::iter::once(None)
        .chain(every.iter().map(|e| Some(e.as_str())))
        .collect();
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    let mut said: Vec<Vec<String>> = vec![Vec::new(); modes.len()];
    eprintln!(
        "mpiq-bench detect: stencil {iterations} iterations x {points} points, {ranks} ranks, {mpi}; \
         {} rounds of: plain, then --detect every {} (load {})",
        reps,
        every.join(", "),
        proc::loadavg()
    );
    for round in 0..reps {
        for (i, m) in modes.iter().enumerate() {
            let (secs, words) = one(mpi, &exe, ranks, &job_args, *m)?;
            eprintln!(
                "  round {}: {:<22} {secs:7.2} s  {words} (load {})",
                round + 1,
                m.map_or("plain".to_string(), |e| format!("--detect {e}")),
                proc::loadavg()
            );
            times[i].push(secs);
            said[i].push(words);
        }
    }
    let plain = median(&times[0]);
    println!(
        "\n| mpiq run | median run time (s) | against plain | runs | what mpiq run said of its checks (last run) |"
    );
    println!("|---|---|---|---|---|");
    for (i, m) in modes.iter().enumerate() {
        let t = median(&times[i]);
        let runs: Vec<String> = times[i].iter().map(|s| format!("{s:.1}")).collect();
        println!(
            "| {} | {t:.2} | {:+.2} % | {} | {} |",
            match m {
                None => "without --detect".to_string(),
                Some("default") => "--detect (default interval)".to_string(),
                Some(e) => format!("--detect --detect-every {e}"),
            },
            100.0 * (t - plain) / plain,
            runs.join(", "),
            said[i].last().map_or("", String::as_str)
        );
    }
    Ok(())
}
