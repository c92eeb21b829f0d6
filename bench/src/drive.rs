//! Measuring each front end on one process: gdb and lldb time the queue
//! command (default text output) inside the debugger, after the attach, with
//! Python's `perf_counter`; the CLI and `mpiq replay` are timed by the
//! bridge's own clock (`--stats` `elapsed_us`: the collect, no rendering)
//! and as whole processes.

use std::path::{Path, PathBuf};
use std::process::Command;

use mpiq_tests::frontends::{cli_command, gdb_command, lldb_command_on};
use serde_json::Value;

use crate::proc::{first_json, run, Stats};

/// One dump's numbers.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    /// The dump's time as this front end's user sees it after the attach, ms.
    pub ms: f64,
    /// The counters.
    pub stats: Stats,
}

/// Repeated dumps of one front end in one mode.
#[derive(Clone, Debug, Default)]
pub struct Series {
    /// The first dump of a debugger session (symbol tables still cold).
    pub first: Option<Sample>,
    /// The measured dumps.
    pub samples: Vec<Sample>,
    /// Peak resident memory of the front end's process tree, KiB.
    pub peak_rss_kib: u64,
    /// Wall time of each whole front-end process (CLI and replay only), ms.
    pub wall_ms: Vec<f64>,
}

/// The two ways the library can run.
pub const MODES: [&str; 2] = ["", "--in-process"];

/// The label of a mode.
pub fn mode_name(mode: &str) -> &'static str {
    if mode.is_empty() {
        "isolated"
    } else {
        "in-process"
    }
}

// Both scripts: a first dump (cold symbol tables), one `--json --stats` dump
// per mode for the counters, then `reps` timed dumps per mode, alternating,
// in the default text format (what a user types).
const GDB_SCRIPT: &str = r#"
import gdb, json, os, time

def _mpiq_bench():
    modes = json.loads(os.environ["MPIQ_BENCH_MODES"])
    reps = int(os.environ["MPIQ_BENCH_REPS"])
    plan = [("first", modes[0])] + [("stats", m) for m in modes] + [("rep", m) for _ in range(reps) for m in modes]
    for kind, mode in plan:
        args = ("--json --stats " if kind == "stats" else "") + mode
        t = time.perf_counter()
        out = gdb.execute("info mpi-queues " + args, to_string=True)
        ms = (time.perf_counter() - t) * 1e3
        stats = None
        if kind == "stats":
            j = 0 if out.startswith("{") else out.index("\n{") + 1
            snap, _ = json.JSONDecoder().raw_decode(out[j:])
            stats = snap["processes"][0].get("stats")
        print("MPIQ-BENCH " + json.dumps({"kind": kind, "mode": mode, "ms": ms, "stats": stats}), flush=True)

_mpiq_bench()
"#;

const LLDB_SCRIPT: &str = r#"
import json, os, time
import lldb

def __lldb_init_module(debugger, internal_dict):
    ci = debugger.GetCommandInterpreter()
    modes = json.loads(os.environ["MPIQ_BENCH_MODES"])
    reps = int(os.environ["MPIQ_BENCH_REPS"])
    plan = [("first", modes[0])] + [("stats", m) for m in modes] + [("rep", m) for _ in range(reps) for m in modes]
    for kind, mode in plan:
        args = ("--json --stats " if kind == "stats" else "") + mode
        r = lldb.SBCommandReturnObject()
        t = time.perf_counter()
        ci.HandleCommand("mpi queues " + args, r)
        ms = (time.perf_counter() - t) * 1e3
        out = r.GetOutput() or ""
        if not r.Succeeded():
            print("MPIQ-BENCH-ERROR " + json.dumps((r.GetError() or "") + out[:2000]), flush=True)
            continue
        stats = None
        if kind == "stats":
            j = 0 if out.startswith("{") else out.index("\n{") + 1
            snap, _ = json.JSONDecoder().raw_decode(out[j:])
            stats = snap["processes"][0].get("stats")
        print("MPIQ-BENCH " + json.dumps({"kind": kind, "mode": mode, "ms": ms, "stats": stats}), flush=True)
"#;

/// Parses the `MPIQ-BENCH` lines of a debugger run into one series per mode.
fn parse_debugger(out: &crate::proc::Outcome, what: &str) -> Result<Vec<Series>, String> {
    let mut series = vec![Series::default(), Series::default()];
    let mut stats = [None, None];
    for line in out.stdout.lines() {
        if line.starts_with("MPIQ-BENCH-ERROR ") {
            return Err(format!("{what}: {line}\n{}", out.all()));
        }
        let Some(j) = line.strip_prefix("MPIQ-BENCH ") else {
            continue;
        };
        let v: Value = serde_json::from_str(j).map_err(|e| format!("{what}: {e}: {line}"))?;
        let mode = v["mode"].as_str().unwrap_or_default();
        let i = MODES.iter().position(|m| *m == mode).unwrap_or(0);
        let s = Sample {
            ms: v["ms"].as_f64().unwrap_or(f64::NAN),
            stats: Stats::default(),
        };
        match v["kind"].as_str() {
            Some("first") => series[i].first = Some(s),
            Some("stats") => stats[i] = Stats::of_object(&v["stats"]),
            _ => series[i].samples.push(s),
        }
    }
    for (i, s) in series.iter_mut().enumerate() {
        let st = stats[i].ok_or_else(|| format!("{what} printed no counters\n{}", out.all()))?;
        if s.samples.is_empty() {
            return Err(format!("{what} printed no measurement\n{}", out.all()));
        }
        for x in s.samples.iter_mut().chain(s.first.as_mut()) {
            x.stats = st;
        }
        s.peak_rss_kib = out.peak_rss_kib;
    }
    Ok(series)
}

fn write_script(scratch: &Path, name: &str, text: &str) -> PathBuf {
    let p = scratch.join(name);
    std::fs::write(&p, text).expect("write script");
    p
}

fn modes_env(cmd: &mut Command, reps: usize) {
    cmd.env("MPIQ_BENCH_MODES", serde_json::to_string(&MODES).unwrap())
        .env("MPIQ_BENCH_REPS", reps.to_string());
}

/// gdb attached to `pid`: one session, a first dump, then `reps` dumps in
/// each mode, alternating. One series per mode (isolated, in-process).
pub fn gdb(pid: u32, reps: usize, scratch: &Path) -> Result<Vec<Series>, String> {
    let script = write_script(scratch, "bench-gdb.py", GDB_SCRIPT);
    // The tests' gdb (mpiq.py sourced, attached to `pid`), then the script.
    let mut cmd = gdb_command(pid, &[]);
    cmd.arg("-x").arg(&script);
    modes_env(&mut cmd, reps);
    parse_debugger(&run(cmd, scratch), "gdb")
}

/// lldb (`$MPIQ_LLDB`, default `lldb-16`) attached to `pid`, like [`gdb`].
pub fn lldb(pid: u32, reps: usize, scratch: &Path) -> Result<Vec<Series>, String> {
    let script = write_script(scratch, "mpiq_bench_lldb.py", LLDB_SCRIPT);
    // The tests' lldb (plugin loaded, attached to `pid`), then the script.
    let import = format!("command script import {}", script.display());
    let mut cmd = lldb_command_on(&["-p", &pid.to_string()], &[&import]);
    modes_env(&mut cmd, reps);
    parse_debugger(&run(cmd, scratch), "lldb")
}

/// `mpiq ARGS --json --stats MODE`, `reps` times per mode, alternating.
/// The dump time is the bridge's `elapsed_us` (the process's wall time,
/// attach and exit included, is kept too). `sum` adds the stats of every
/// process (for `mpiq job`).
pub fn mpiq(args: &[&str], reps: usize, sum: bool, scratch: &Path) -> Result<Vec<Series>, String> {
    let mut series = vec![Series::default(), Series::default()];
    for _ in 0..reps {
        for (i, mode) in MODES.iter().enumerate() {
            let mut cmd = cli_command(args);
            cmd.args(["--json", "--stats"]);
            if !mode.is_empty() {
                cmd.arg(mode);
            }
            let out = run(cmd, scratch);
            // `mpiq job` exits 3 or 4 when its analysis finds a deadlock or
            // cannot tell (many_ops' receives are never matched): the JSON is
            // what counts.
            let v = first_json(&out.stdout)
                .ok_or_else(|| format!("mpiq {args:?} {mode} printed no snapshot\n{}", out.all()))?;
            let stats = Stats::of_snapshot(&v, sum).ok_or_else(|| format!("mpiq {args:?}: no stats\n{}", out.all()))?;
            let s = &mut series[i];
            s.samples.push(Sample {
                ms: stats.elapsed_us as f64 / 1e3,
                stats,
            });
            s.wall_ms.push(out.wall_ms);
            s.peak_rss_kib = s.peak_rss_kib.max(out.peak_rss_kib);
        }
    }
    Ok(series)
}

/// Runs this program again with `args` (a subcommand) and returns the JSON
/// object it prints.
fn run_self(args: &[String], scratch: &Path) -> Result<Value, String> {
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(me);
    cmd.args(args);
    let out = run(cmd, scratch);
    if !out.success {
        return Err(format!("{} failed\n{}", args.join(" "), out.all()));
    }
    out.stdout
        .lines()
        .find_map(|l| serde_json::from_str(l).ok())
        .ok_or_else(|| format!("{} printed nothing\n{}", args.join(" "), out.all()))
}

/// The numbers of the array `v[key]`.
fn numbers(v: &Value, key: &str) -> Vec<f64> {
    v[key]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_f64)
        .collect()
}

/// The replay floor of a recording, in a fresh `mpiq-bench floor` process.
/// Returns (collect, collect + render, operations in the snapshot).
pub fn floor(recording: &Path, reps: usize, scratch: &Path) -> Result<(Series, Series, u64), String> {
    let v = run_self(
        &[
            "floor".into(),
            recording.display().to_string(),
            "--reps".into(),
            reps.to_string(),
        ],
        scratch,
    )?;
    let stats = Stats::of_object(&v["stats"]).unwrap_or_default();
    let series = |key: &str| Series {
        first: None,
        samples: numbers(&v, key).into_iter().map(|ms| Sample { ms, stats }).collect(),
        peak_rss_kib: v["peak_rss_kib"].as_u64().unwrap_or(0),
        wall_ms: Vec::new(),
    };
    Ok((
        series("collect_ms"),
        series("dump_ms"),
        v["operations"].as_u64().unwrap_or(0),
    ))
}

/// The CLI's target access with a warm image cache: `mpiq-bench cli-warm`,
/// once per mode; the first dump of each is kept as `first`.
pub fn cli_warm(pid: u32, reps: usize, scratch: &Path) -> Result<Vec<Series>, String> {
    let mut out = Vec::new();
    for mode in MODES {
        let mut args = vec![
            "cli-warm".to_string(),
            pid.to_string(),
            "--reps".into(),
            reps.to_string(),
        ];
        if !mode.is_empty() {
            args.push(mode.to_string());
        }
        let v = run_self(&args, scratch)?;
        let sample = |ms: f64| Sample {
            ms,
            stats: Stats::default(),
        };
        out.push(Series {
            first: v["first_ms"].as_f64().map(sample),
            samples: numbers(&v, "ms").into_iter().map(sample).collect(),
            peak_rss_kib: v["peak_rss_kib"].as_u64().unwrap_or(0),
            wall_ms: Vec::new(),
        });
    }
    Ok(out)
}
