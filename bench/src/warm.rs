//! The CLI's target access with its image cache warm: one `mpiq-bench
//! cli-warm PID` process attaches once (as `mpiq queues` does), then dumps
//! `reps + 1` times. The first dump pays what every `mpiq queues` run pays
//! (reading the DWARF of libmpi & co. to answer the library's type
//! questions); the later ones show what is left once that is cached, as for
//! the 2nd..16th rank of `mpiq job`.

use std::time::Instant;

use mpiq::{DumpOptions, Target};
use mpiq_cli::LiveProcess;
use serde_json::json;

/// Prints one JSON line: `first_ms` and the later dumps' `ms` (collect only,
/// like the bridge's `elapsed_us`).
pub fn main(pid: i32, reps: usize, in_process: bool) -> Result<(), String> {
    let line = if in_process {
        "--json --stats --in-process"
    } else {
        "--json --stats"
    };
    let opts = DumpOptions::parse_line(line).map_err(|e| e.to_string())?;
    let mut p = LiveProcess::attach(pid).map_err(|e| e.to_string())?;
    let mut times = Vec::new();
    for _ in 0..=reps {
        let mut targets: Vec<&mut dyn Target> = vec![&mut p];
        let t = Instant::now();
        let snap = mpiq::collect_all(&mut targets, &opts).map_err(|e| e.to_string())?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
        if let Some(e) = &snap.processes[0].error {
            return Err(e.clone());
        }
    }
    drop(p);
    println!(
        "{}",
        json!({"first_ms": times[0], "ms": times[1..], "peak_rss_kib": crate::proc::own_peak_rss_kib()})
    );
    Ok(())
}
