//! `mpiq-bench soak`: the corpus's real applications (LAMMPS, HPC
//! Challenge, Elk: Debian's packages, unmodified, their shipped inputs;
//! `tests/src/corpus.rs`), healthy, under `mpiq run --detect` with its
//! defaults (flight recorder on), one after another until the time is
//! spent (issue 41: no false alarm on real codes, 2 hours in all).
//!
//! A false alarm is any run that `mpiq run` ends or reports: an exit status
//! other than 0, "ending the job", or a suspected hang. Each run's checks
//! and what they cost the job (the ranks held stopped) are counted from
//! `-v`'s lines. The CI keeps the short version: `corpus.rs`'s
//! `lammps_healthy_runs_to_its_end_under_mpiq_run_detect`.

use std::path::Path;
use std::time::{Duration, Instant};

use mpiq_tests::corpus::{App, AppJob, Start};
use mpiq_tests::fixtures::WorkDir;
use mpiq_tests::run::run_within;

/// One run of the soak.
struct Soaked {
    app: App,
    secs: f64,
    exit: Option<i32>,
    checks: usize,
    stopped: String,
    alarm: Option<String>,
}

/// `mpiq-bench soak [--minutes 120] [--apps lammps,hpcc,elk] [--steps 6000]`: `--steps` is
/// LAMMPS' time steps per run (the others run their input whole).
pub fn main(args: &[String], _scratch: &Path) -> Result<(), String> {
    let mut minutes = 120.0f64;
    let mut apps = App::ALL.to_vec();
    let mut steps = 6000u64;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().cloned().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--minutes" => minutes = val()?.parse().map_err(|e| format!("--minutes: {e}"))?,
            "--steps" => steps = val()?.parse().map_err(|e| format!("--steps: {e}"))?,
            "--apps" => {
                apps = val()?
                    .split(',')
                    .map(|name| match name {
                        "lammps" => Ok(App::Lammps),
                        "hpcc" => Ok(App::Hpcc),
                        "elk" => Ok(App::Elk),
                        other => Err(format!("--apps: {other} is not one of lammps, hpcc, elk")),
                    })
                    .collect::<Result<_, _>>()?
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if let Some(why) = apps.iter().find_map(|a| a.missing()) {
        return Err(why);
    }
    let budget = Duration::from_secs_f64(minutes * 60.0);
    let started = Instant::now();
    let mut runs = Vec::new();
    println!("| # | application | minutes | exit | checks | ranks held stopped | false alarm |");
    println!("|---|---|---|---|---|---|---|");
    'soak: loop {
        for &app in &apps {
            if started.elapsed() >= budget {
                break 'soak;
            }
            let s = one(app, steps)?;
            println!(
                "| {} | {} | {:.1} | {} | {} | {} | {} |",
                runs.len() + 1,
                app.name(),
                s.secs / 60.0,
                s.exit.map_or("-".into(), |c| c.to_string()),
                s.checks,
                s.stopped,
                s.alarm.as_deref().unwrap_or("none")
            );
            runs.push(s);
        }
    }
    let alarms = runs.iter().filter(|s| s.alarm.is_some()).count();
    // (+ 0.0: an empty sum is -0.0.)
    let total: f64 = runs.iter().map(|s| s.secs).sum::<f64>() + 0.0;
    let checks: usize = runs.iter().map(|s| s.checks).sum();
    println!(
        "\n{} runs, {:.1} minutes of jobs under `mpiq run --detect`, {checks} checks: {alarms} false alarm(s)",
        runs.len(),
        total / 60.0
    );
    for app in &apps {
        let mine: Vec<&Soaked> = runs.iter().filter(|s| s.app == *app).collect();
        println!(
            "  {}: {} runs, {:.1} minutes",
            app.name(),
            mine.len(),
            (mine.iter().map(|s| s.secs).sum::<f64>() + 0.0) / 60.0
        );
    }
    if alarms > 0 {
        return Err(format!("{alarms} false alarm(s) on healthy jobs"));
    }
    Ok(())
}

/// One healthy run of `app` under `mpiq run --detect -v`.
fn one(app: App, steps: u64) -> Result<Soaked, String> {
    let dir = WorkDir::new(&format!("soak-{app:?}").to_lowercase());
    let report = dir.path("report");
    let report_s = report.to_string_lossy().into_owned();
    let (cmd, _scratch, _) = AppJob::under_mpiq_run(
        app,
        dir.root(),
        steps,
        Start::Healthy,
        &["--detect", "-v", "--report", &report_s],
    );
    let t = Instant::now();
    let r = run_within(cmd, Duration::from_secs(4 * 3600));
    let secs = t.elapsed().as_secs_f64();
    let checks = r.stderr.matches(" s] check ").count();
    let stopped = r
        .stderr
        .lines()
        .find_map(|l| l.split_once("checks held the ranks on this node stopped for "))
        .map_or_else(|| "-".to_string(), |(_, rest)| rest.to_string());
    let alarm = if r.stderr.contains("ending the job") {
        Some("ended".to_string())
    } else if r.stderr.contains("suspected hang") {
        Some("suspected".to_string())
    } else if r.code() != Some(0) {
        Some(format!("exit {:?}", r.code()))
    } else {
        None
    };
    if alarm.is_some() {
        eprintln!("mpiq-bench soak: a false alarm on {}:\n{}", app.name(), r.all());
    }
    Ok(Soaked {
        app,
        secs,
        exit: r.code(),
        checks,
        stopped,
        alarm,
    })
}
