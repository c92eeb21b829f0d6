//! `mpiq-bench watch`: what one refresh of `mpiq watch` costs on a job of N
//! ranks (default 128), in this process with the watch's own code:
//!
//! 1. the sample: `mpiq_cli::run::watch_sample`, the very call the watch's
//!    sampling thread makes (every rank stopped, read, released);
//! 2. the analysis: `Session::push` (the analysis of the sample against the
//!    one before, the letters of the history);
//! 3. the screen: the whole screen drawn (200x50, on ratatui's
//!    `TestBackend`), and one rank's detail (its stacks and queues
//!    rendered by the bridge), as after Enter;
//! 4. with `--record`: adding the sample to the session recording.
//!
//! `--replay FILE` measures 2 and 3 on the samples of a session recording
//! (`mpiq watch --record FILE`), with no job: the per-refresh rendering and
//! analysis alone.

use std::path::Path;
use std::time::{Duration, Instant};

use mpiq::session::SessionWriter;
use mpiq::DumpOptions;
use mpiq_cli::run::{watch_sample, JobSource};
use mpiq_cli::watch::model::Session;
use mpiq_cli::watch::source;
use mpiq_cli::watch::ui::{self, View};
use mpiq_tests::{Example, Job};

use crate::proc;
use crate::stacks::parse_mpi;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The times of one refresh, ms.
#[derive(Default)]
struct Times {
    sample: Vec<f64>,
    record: Vec<f64>,
    analysis: Vec<f64>,
    screen: Vec<f64>,
    detail: Vec<f64>,
}

/// Analysis and drawing of one sample already taken.
fn refresh(session: &mut Session, snapshot: mpiq::Snapshot, time_ms: u64, t: &mut Times) -> Result<(), String> {
    let start = Instant::now();
    session.push(snapshot, time_ms, None);
    t.analysis.push(ms(start.elapsed()));
    let mut view = View::new("bench".into(), Duration::from_secs(1), None);
    view.at = session.len() - 1;
    let start = Instant::now();
    let lines = ui::draw_text(session, &mut view, &DumpOptions::default(), 200, 50).map_err(|e| e.to_string())?;
    t.screen.push(ms(start.elapsed()));
    std::hint::black_box(&lines);
    let start = Instant::now();
    let key = view.rows.first().and_then(|r| r.keys.first().copied());
    let text = key.and_then(|k| session.sample(view.at)?.detail_text(k, &DumpOptions::default()));
    t.detail.push(ms(start.elapsed()));
    std::hint::black_box(&text);
    Ok(())
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn print(what: &str, t: &Times, first: Option<f64>) {
    println!("{what}");
    println!();
    println!("| part of a refresh | median ms |");
    println!("|---|---|");
    if let Some(f) = first {
        println!("| first sample (cold: every object's DWARF and unwind tables parsed) | {f:.1} |");
    }
    if !t.sample.is_empty() {
        println!(
            "| sample: every rank stopped, read, released (`watch_sample`) | {:.1} |",
            median(t.sample.clone())
        );
    }
    if !t.record.is_empty() {
        println!(
            "| adding it to the session recording (`--record`) | {:.1} |",
            median(t.record.clone())
        );
    }
    println!(
        "| analysis against the previous sample, history letters (`Session::push`) | {:.2} |",
        median(t.analysis.clone())
    );
    println!(
        "| the whole screen, 200x50 (`ui::draw`) | {:.2} |",
        median(t.screen.clone())
    );
    println!(
        "| one rank's stacks and queues (Enter) | {:.2} |",
        median(t.detail.clone())
    );
    let total = median(t.sample.clone()).max(0.0) * f64::from(u8::from(!t.sample.is_empty()))
        + median(t.analysis.clone())
        + median(t.screen.clone());
    println!("| **one refresh** (sample + analysis + screen) | **{total:.1}** |");
}

/// `mpiq-bench watch [--ranks 128] [--samples 6] [--mpi openmpi] [--idle] [--record] [--replay FILE]`:
/// `barrier_vs_recv` (rank 0 in `MPI_Barrier`, the others in `MPI_Recv`), or
/// with `--idle` `many_ops 10` (every rank in `pause()`).
pub fn main(args: &[String], scratch: &Path) -> Result<(), String> {
    let mut ranks = 128;
    let mut samples = 6;
    let mut mpi = mpiq_tests::Mpi::OpenMpi;
    let mut record = false;
    let mut replay = None;
    let mut idle = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().cloned().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--ranks" => ranks = value()?.parse().map_err(|e| format!("--ranks: {e}"))?,
            "--samples" => samples = value()?.parse().map_err(|e| format!("--samples: {e}"))?,
            "--mpi" => mpi = parse_mpi(&value()?)?,
            "--record" => record = true,
            "--idle" => idle = true,
            "--replay" => replay = Some(value()?),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    let mut t = Times::default();
    if let Some(file) = replay {
        let all = source::load(Path::new(&file)).map_err(|e| e.to_string())?;
        let mut session = Session::new(false);
        let opts = DumpOptions::default();
        let n = all.len();
        let mut procs = 0;
        for s in all {
            let time = s.time_ms;
            let snapshot = source::replay_sample(s, &opts).map_err(|e| e.to_string())?;
            procs = snapshot.processes.len();
            refresh(&mut session, snapshot, time, &mut t)?;
        }
        print(
            &format!("`mpiq watch` refresh without the sample: {n} recorded samples of {procs} ranks ({file})"),
            &t,
            None,
        );
        return Ok(());
    }
    // Open MPI's ranks spin in a blocking receive (128 of them load 2 cores
    // to 100+); `many_ops 10`'s sleep in pause().
    let (example, example_args): (Example, &[&str]) = if idle {
        (Example::ManyOps, &["10"])
    } else {
        (Example::BarrierVsRecv, &[])
    };
    eprintln!("[watch] {mpi} {example} on {ranks} ranks (load {})", proc::loadavg());
    let job = Job::builder(mpi, example)
        .args(example_args.iter().map(|s| s.to_string()))
        .nprocs(ranks)
        .ready_timeout(Duration::from_secs(600))
        .lifetime_secs(3600)
        .start();
    std::thread::sleep(Duration::from_secs(2));
    let source = JobSource::Starter(job.starter_pid() as i32);
    let rec = scratch.join("session.rec");
    let mut options = Vec::new();
    if record {
        options = vec!["--record".to_string(), rec.display().to_string()];
    }
    let opts = DumpOptions::parse(&options).map_err(|e| e.to_string())?;
    let mut writer = if record {
        Some(SessionWriter::create(&rec).map_err(|e| e.to_string())?)
    } else {
        None
    };
    let mut session = Session::new(false);
    let mut first = None;
    for i in 0..samples {
        let start = Instant::now();
        let time = now_ms();
        let s = watch_sample(&source, &opts, Duration::from_secs(60)).map_err(|e| e.to_string())?;
        let took = ms(start.elapsed());
        if s.snapshot.processes.len() != ranks {
            return Err(format!("{} ranks read, not {ranks}", s.snapshot.processes.len()));
        }
        if i == 0 {
            first = Some(took);
        } else {
            t.sample.push(took);
        }
        if let Some(w) = &mut writer {
            let start = Instant::now();
            w.add(time, &s.recordings).map_err(|e| e.to_string())?;
            t.record.push(ms(start.elapsed()));
        }
        refresh(&mut session, s.snapshot, time, &mut t)?;
        eprintln!(
            "[watch] sample {} of {samples}: {took:.0} ms (load {})",
            i + 1,
            proc::loadavg()
        );
        // The ranks run between samples, as in the watch.
        std::thread::sleep(Duration::from_millis(500));
    }
    drop(job);
    let size = std::fs::metadata(&rec).map(|m| m.len()).unwrap_or(0);
    print(
        &format!(
            "`mpiq watch --starter P{}` on {mpi} `{example}`, {ranks} ranks ({samples} samples, load {}{})",
            if record { " --record" } else { "" },
            proc::loadavg(),
            if record {
                format!("; recording {} KiB", size / 1024)
            } else {
                String::new()
            }
        ),
        &t,
        first,
    );
    Ok(())
}
