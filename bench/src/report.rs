//! The tables of `docs/PERFORMANCE.md` and the raw numbers as JSON.

use std::fmt::Write;

use serde_json::{json, Value};

use crate::drive::{Sample, Series};
use crate::{Config, JobRun};

/// Median of a non-empty list (NaN when empty).
pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn med(s: &Series) -> f64 {
    median(&s.samples.iter().map(|x| x.ms).collect::<Vec<_>>())
}

fn ms(x: f64) -> String {
    if x.is_nan() {
        "–".into()
    } else if x < 10.0 {
        format!("{x:.2}")
    } else if x < 100.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.0}")
    }
}

fn with_ratio(x: f64, floor: f64) -> String {
    if x.is_nan() {
        return "–".into();
    }
    format!("{} ({:.1}×)", ms(x), x / floor)
}

fn mib(kib: u64) -> String {
    if kib == 0 {
        "–".into()
    } else {
        format!("{:.0}", kib as f64 / 1024.0)
    }
}

fn find<'a>(c: &'a Config, fe: &str, mode: &str) -> Option<&'a Series> {
    c.fronts
        .iter()
        .find(|(f, m, _)| f == fe && *m == mode)
        .map(|(_, _, s)| s)
}

fn counters(c: &Config) -> Option<Sample> {
    c.fronts
        .iter()
        .filter(|(f, _, _)| f != "cli-warm")
        .find_map(|(_, _, s)| s.samples.first().copied())
}

/// The markdown report.
pub fn markdown(configs: &[Config], jobs: &[JobRun], load: &str, args: &[String]) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "Command: `target/release/mpiq-bench {}`  ", args.join(" "));
    let _ = writeln!(o, "Machine load during the run: {load}\n");
    let cols = [
        ("cli", "isolated"),
        ("cli", "in-process"),
        ("cli-warm", "isolated"),
        ("cli-warm", "in-process"),
        ("gdb", "isolated"),
        ("gdb", "in-process"),
        ("lldb", "isolated"),
        ("lldb", "in-process"),
        ("replay", "isolated"),
        ("replay", "in-process"),
    ];
    let _ = writeln!(
        o,
        "Dump time of one rank, median ms (ratio to the replay floor of the same run). \
         gdb and lldb: the command (text output) timed inside the debugger after the attach \
         and a first dump, against the floor's collect + text render; CLI and `mpiq replay`: the bridge's `elapsed_us`, against \
         the floor's collect; cli-warm: the CLI's target access attached once, dumps after the \
         first (its DWARF index built), against the floor's collect.\n"
    );
    let _ = write!(o, "| MPI | K | ops | floor collect | floor dump |");
    for (fe, mode) in cols {
        let _ = write!(o, " {fe} {mode} |");
    }
    let _ = writeln!(o);
    let _ = writeln!(o, "|{}", "---|".repeat(5 + cols.len()));
    for c in configs {
        let fc = med(&c.floor_collect);
        let fd = med(&c.floor_dump);
        let _ = write!(
            o,
            "| {} | {} | {} | {} | {} |",
            c.mpi,
            c.k,
            c.operations,
            ms(fc),
            ms(fd)
        );
        for (fe, mode) in cols {
            let floor = if fe == "gdb" || fe == "lldb" { fd } else { fc };
            let cell = find(c, fe, mode).map_or("–".into(), |s| with_ratio(med(s), floor));
            let _ = write!(o, " {cell} |");
        }
        let _ = writeln!(o);
    }
    let _ = writeln!(
        o,
        "\nHost memory requests per dump (the same for every front end: they share the bridge's \
         page cache), the first dump of a debugger session (cold symbol tables), whole-process \
         wall time of the CLI, and peak resident memory (MiB) of each front end's process tree.\n"
    );
    let _ = writeln!(
        o,
        "| MPI | K | mqs_fetch_data calls | host reads | host bytes (MiB) | gdb 1st dump | lldb 1st dump | \
         CLI wall iso / in-proc | peak RSS floor | CLI | gdb | lldb | replay | recording (KiB) |"
    );
    let _ = writeln!(o, "|{}", "---|".repeat(14));
    for c in configs {
        let s = counters(c).map(|s| s.stats).unwrap_or_default();
        let first = |fe: &str| {
            find(c, fe, "isolated")
                .and_then(|s| s.first)
                .map_or("–".into(), |f| ms(f.ms))
        };
        let wall = |mode: &str| find(c, "cli", mode).map_or(f64::NAN, |s| median(&s.wall_ms));
        let rss = |fe: &str| {
            let a = find(c, fe, "isolated").map_or(0, |s| s.peak_rss_kib);
            let b = find(c, fe, "in-process").map_or(0, |s| s.peak_rss_kib);
            mib(a.max(b))
        };
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {:.1} | {} | {} | {} / {} | {} | {} | {} | {} | {} | {} |",
            c.mpi,
            c.k,
            s.fetch_calls,
            s.host_reads,
            s.host_read_bytes as f64 / 1048576.0,
            first("gdb"),
            first("lldb"),
            ms(wall("isolated")),
            ms(wall("in-process")),
            mib(c.floor_dump.peak_rss_kib),
            rss("cli"),
            rss("gdb"),
            rss("lldb"),
            rss("replay"),
            c.recording_bytes / 1024,
        );
    }
    if !jobs.is_empty() {
        let _ = writeln!(
            o,
            "\nWhole job, `mpiq job --starter PID --samples 1` (every rank, one snapshot), median of the process's wall time; \
             Σ elapsed is the sum of the ranks' `elapsed_us`.\n"
        );
        let _ = writeln!(
            o,
            "| MPI | ranks | K | mode | wall ms | Σ elapsed ms | host reads | fetch calls | peak RSS (MiB) |"
        );
        let _ = writeln!(o, "|{}", "---|".repeat(9));
        for j in jobs {
            for (mode, s) in &j.modes {
                let st = s.samples.first().map(|x| x.stats).unwrap_or_default();
                let _ = writeln!(
                    o,
                    "| {} | {} | {} | {mode} | {} | {} | {} | {} | {} |",
                    j.mpi,
                    j.ranks,
                    j.k,
                    ms(median(&s.wall_ms)),
                    ms(med(s)),
                    st.host_reads,
                    st.fetch_calls,
                    mib(s.peak_rss_kib)
                );
            }
        }
    }
    o
}

fn series_json(s: &Series) -> Value {
    json!({
        "median_ms": med(s),
        "ms": s.samples.iter().map(|x| x.ms).collect::<Vec<_>>(),
        "first_ms": s.first.map(|f| f.ms),
        "wall_ms": s.wall_ms,
        "peak_rss_kib": s.peak_rss_kib,
        "stats": s.samples.first().map(|x| json!({
            "fetch_calls": x.stats.fetch_calls,
            "host_reads": x.stats.host_reads,
            "host_read_bytes": x.stats.host_read_bytes,
        })),
    })
}

/// Every sample, for later analysis.
pub fn json(configs: &[Config], jobs: &[JobRun], load: &str) -> Value {
    json!({
        "load": load,
        "configs": configs.iter().map(|c| json!({
            "mpi": c.mpi.name(),
            "k": c.k,
            "operations": c.operations,
            "recording_bytes": c.recording_bytes,
            "floor_collect": series_json(&c.floor_collect),
            "floor_dump": series_json(&c.floor_dump),
            "frontends": c.fronts.iter().map(|(f, m, s)| json!({
                "frontend": f, "mode": m, "series": series_json(s)
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "jobs": jobs.iter().map(|j| json!({
            "mpi": j.mpi.name(),
            "ranks": j.ranks,
            "k": j.k,
            "modes": j.modes.iter().map(|(m, s)| json!({"mode": m, "series": series_json(s)})).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}
