//! `mpiq-bench python`: what reading the Python frames (py-spy, by pid)
//! adds to `mpiq job` on a job of Python ranks: `examples/python/
//! raise_before_bcast.py` on N ranks (rank 1 in `MPI_Finalize`, the others
//! in `comm.bcast`), `mpiq job --samples 2 --json` with and without
//! `--no-python`, alternated, the median of each.

use std::path::Path;
use std::time::Duration;

use mpiq_tests::{Job, Mpi, PyExample};

use crate::proc;
use crate::stacks::{alternate, parse_mpi};

pub fn main(args: &[String], scratch: &Path) -> Result<(), String> {
    let mut ranks = 32;
    let mut reps = 5;
    let mut mpi = Mpi::OpenMpi;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().cloned().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--ranks" => ranks = value()?.parse().map_err(|e| format!("--ranks: {e}"))?,
            "--reps" => reps = value()?.parse().map_err(|e| format!("--reps: {e}"))?,
            "--mpi" => mpi = parse_mpi(&value()?)?,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    eprintln!(
        "[python] {mpi} raise_before_bcast on {ranks} ranks (load {})",
        proc::loadavg()
    );
    let job = Job::python(mpi, PyExample::RaiseBeforeBcast)
        .nprocs(ranks)
        .ready_timeout(Duration::from_secs(600))
        .lifetime_secs(3600)
        .start();
    // Rank 1 needs a moment from its traceback to MPI_Finalize.
    std::thread::sleep(Duration::from_secs(3));
    let starter = job.starter_pid().to_string();
    let row = alternate(&starter, "--no-python", reps, scratch, |python, out| {
        let frames = out.stdout.matches("\"python\": true").count();
        if python == (frames == 0) {
            return Err(format!("with Python frames {python}, {frames} were shown"));
        }
        Ok(())
    })?;
    drop(job);
    let (w, wo) = (row.with_ms, row.without_ms);
    println!(
        "| job | with Python frames (median ms) | --no-python (median ms) | added | peak RSS with / without (MiB) |"
    );
    println!("|---|---|---|---|---|");
    println!(
        "| {mpi} `raise_before_bcast.py` {ranks} ranks | {w:.0} | {wo:.0} | {:+.1} % | {:.1} / {:.1} |",
        (w / wo - 1.0) * 100.0,
        row.with_rss_kib as f64 / 1024.0,
        row.without_rss_kib as f64 / 1024.0
    );
    Ok(())
}
