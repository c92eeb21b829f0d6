//! The replay floor: the debug library run in this process against a
//! [`Replay`] target (no process, every answer from memory). It is what a
//! dump costs with the library's own work and mpiq's bridge but no host;
//! every front end is compared with it.
//!
//! Run as `mpiq-bench floor FILE [--reps N] [--dll LIB]` in a process of its
//! own, so that its peak memory is its own.

use std::path::Path;
use std::time::Instant;

use mpiq::record::{RecordingFile, Replay};
use mpiq::{DumpOptions, Target};
use serde_json::json;

/// Loads `file` once, then dumps it `reps` times; prints one JSON line with
/// the time of each dump (collect, and collect + render) and the counters.
pub fn main(file: &Path, reps: usize, dll: Option<&str>) -> Result<(), String> {
    let recording = RecordingFile::load(file).map_err(|e| e.to_string())?;
    let mut line = "--stats --in-process".to_string();
    if let Some(d) = dll {
        line.push_str(&format!(" --dll={d}"));
    }
    let opts = DumpOptions::parse_line(&line).map_err(|e| e.to_string())?;
    let mut collect_ms = Vec::new();
    let mut dump_ms = Vec::new();
    let mut stats = serde_json::Value::Null;
    let mut operations = 0;
    // One extra first dump loads the library (dlopen) and is not counted:
    // the front ends measured in one debugger session load it once too.
    for i in 0..=reps {
        let mut replays = recording
            .processes
            .iter()
            .cloned()
            .map(Replay::new)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        let mut targets: Vec<&mut dyn Target> = replays.iter_mut().map(|r| r as &mut dyn Target).collect();
        let t = Instant::now();
        let snapshot = mpiq::collect_all(&mut targets, &opts).map_err(|e| e.to_string())?;
        let collected = t.elapsed();
        // The text the debuggers print by default.
        let text = mpiq::render(&snapshot, &opts);
        let total = t.elapsed();
        std::hint::black_box(&text);
        if i == 0 {
            if let Some(s) = &snapshot.processes[0].stats {
                stats = json!({
                    "fetch_calls": s.fetch_calls,
                    "host_reads": s.host_reads,
                    "host_read_bytes": s.host_read_bytes,
                    "elapsed_us": s.elapsed_us,
                });
            }
            operations = snapshot
                .processes
                .iter()
                .flat_map(|p| &p.communicators)
                .map(|c| {
                    let q = &c.queues;
                    q.sends.operations.len() + q.receives.operations.len() + q.unexpected.operations.len()
                })
                .sum::<usize>();
            continue;
        }
        collect_ms.push(collected.as_secs_f64() * 1e3);
        dump_ms.push(total.as_secs_f64() * 1e3);
    }
    println!(
        "{}",
        json!({
            "collect_ms": collect_ms,
            "dump_ms": dump_ms,
            "stats": stats,
            "operations": operations,
            "peak_rss_kib": crate::proc::own_peak_rss_kib(),
        })
    );
    Ok(())
}
