//! `mpiq run [--timeout D] [--report DIR] [--detect] -- COMMAND...`: runs a
//! job; if it has not finished by the timeout (or, with `--detect`, as
//! soon as a check finds it deadlocked, or hung by the rule of
//! [`mpiq::analysis::hang`]) it reports on it exactly as `mpiq
//! job --starter PID` would ([`crate::run::job_samples`], one analysis
//! rendered as text, JSON, DOT and SVG), ends it, and exits with 124. A job
//! that finishes passes its exit status through. See `mpiq run --help`
//! ([`crate::args::RunArgs`]) for the whole contract.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::Write as _;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::{Duration, Instant};

use std::collections::BTreeMap;

use mpiq::analysis::hang::{hang_words, HangRule, HangState, HangWatch};
use mpiq::analysis::Verdict;
use mpiq::{DumpOptions, Format};
use nix::sys::signal::Signal;

use crate::args::{OutputFormat, RunArgs};
use crate::procs;
use crate::report::{self, Report, SvgError};
use crate::run::RunError;
use crate::signals;

mod cost;
mod job;
mod recorder;
mod starter;
mod tee;
mod traceback;

use cost::DetectCost;
pub use job::watchdog_main;
use job::Job;
use recorder::Preload;
use starter::Starter;
use tee::{Sink, Tee};

/// Exit status: the job was ended (`--timeout` passed, or `--detect` found
/// it deadlocked), after the report; as timeout(1)'s.
pub const EXIT_HUNG: u8 = 124;
/// Exit status: `mpiq run` itself failed (the report directory, or the
/// job's exit status could not be read); as timeout(1)'s.
pub const EXIT_FAILED: u8 = 125;
/// Exit status: the command cannot be executed (as a shell's).
pub const EXIT_CANNOT_EXECUTE: u8 = 126;
/// Exit status: the command was not found (as a shell's).
pub const EXIT_NOT_FOUND: u8 = 127;

/// The files `--report DIR` gets.
pub const REPORT_FILES: [&str; 6] = [
    "report.txt",
    "report.json",
    "report.html",
    "waits.dot",
    "waits.svg",
    "job-output.txt",
];

/// How often the job is looked at.
const POLL: Duration = Duration::from_millis(50);
/// How long the job's output may go on after it exited (a process it left
/// behind holding the pipes) before mpiq stops passing it through.
const OUTPUT_AFTER_EXIT: Duration = Duration::from_secs(2);

/// Why the job is ended.
enum Ending {
    /// `--timeout` passed.
    Timeout,
    /// A `--detect` check found it deadlocked.
    Deadlock {
        check: u32,
        starter: Starter,
        report: Box<Report>,
    },
    /// A `--detect` check found it hung: nothing changed for longer than
    /// the rule allows.
    Hang {
        check: u32,
        starter: Starter,
        report: Box<Report>,
        state: Box<HangState>,
        rule: HangRule,
    },
}

/// How watching the job ended.
enum Watched {
    /// It exited by itself.
    Finished,
    /// It is to be ended.
    Hung(Ending),
    /// mpiq got a signal and passed it on.
    Signalled(Signal),
    /// Its exit status cannot be read.
    Lost(std::io::Error),
}

/// `mpiq run`: returns the exit status (see `mpiq run --help`).
pub fn run(args: &RunArgs, verbose: bool) -> u8 {
    if let Some(dir) = &args.report {
        if let Err(e) = prepare_dir(dir) {
            eprintln!("mpiq run: cannot use --report {}: {e}", dir.display());
            return EXIT_FAILED;
        }
    }
    let preload = if args.no_recorder {
        None
    } else {
        match crate::handoff::recorder::preload_library(&crate::handoff::Environment::current()) {
            Ok(library) => Some(recorder::preload(&args.command, library)),
            Err(e @ crate::handoff::SetupError::BadVariable(_)) => {
                eprintln!("mpiq run: {e} (--no-recorder runs the job without it)");
                return EXIT_FAILED;
            }
            Err(e) => {
                eprintln!("mpiq run: warning: the job runs without mpiq's flight recorder: {e}");
                None
            }
        }
    };
    let (command, env) = match &preload {
        Some(p) => (&p.command, p.env.as_slice()),
        None => (&args.command, &[][..]),
    };
    let (mut job, out, err) = match Job::spawn(command, env) {
        Ok(j) => j,
        Err(job::SpawnError(e)) => {
            eprintln!("mpiq run: cannot run {}: {e}", quoted(&args.command));
            return match e.kind() {
                std::io::ErrorKind::NotFound => EXIT_NOT_FOUND,
                std::io::ErrorKind::PermissionDenied => EXIT_CANNOT_EXECUTE,
                _ => EXIT_FAILED,
            };
        }
    };
    let started = Instant::now();
    signals::pass_on_to(job.pgid());
    if let Err(e) = job.start_watchdog(args.grace) {
        eprintln!("mpiq run: warning: cannot start the watchdog ({e}): should mpiq run be killed, only the command gets SIGTERM");
    }
    let mut tees = [Tee::start(out, Sink::Stdout), Tee::start(err, Sink::Stderr)];
    let note = |what: std::fmt::Arguments| {
        if verbose {
            eprintln!("mpiq run: [{:>7.1} s] {what}", started.elapsed().as_secs_f64());
        }
    };
    note(format_args!("started {} as pid {}", quoted(command), job.pgid()));
    if let Some(p) = &preload {
        note(format_args!("flight recorder: {}", p.how));
    }
    let mut cost = DetectCost::default();
    let mut suspected = |check: u32, starter: &Starter, report: &Report, state: &HangState, rule: HangRule| {
        suspected_report(&tees, args, preload.as_ref(), check, starter, report, state, rule);
    };
    let watched = watch(&mut job, args, started, &note, &mut cost, &mut suspected);
    match watched {
        Watched::Finished => {
            let status = reap(&mut job, &mut tees);
            // What watching cost the job that finished, always said: the
            // price of --detect is the user's to weigh.
            if let Some(words) = cost.words(started.elapsed()) {
                eprintln!("mpiq run: {words}");
            }
            match status {
                Ok(s) => {
                    note(format_args!("the job ended by itself: {s}"));
                    exit_status(s)
                }
                Err(e) => {
                    eprintln!("mpiq run: the job ended, but its exit status cannot be read: {e}");
                    EXIT_FAILED
                }
            }
        }
        Watched::Signalled(sig) => {
            eprintln!(
                "mpiq run: ending the job: SIGKILL after --grace {} to what is left of it",
                fmt_duration(args.grace)
            );
            let hurry = || signals::passed_on().is_some_and(|(_, n)| n > 1);
            job.end(false, args.grace, &hurry);
            let _ = reap(&mut job, &mut tees);
            128 + sig as u8
        }
        Watched::Lost(e) => {
            eprintln!("mpiq run: cannot tell whether the job is still running ({e}): ending it");
            job.end(true, args.grace, &|| false);
            let _ = reap(&mut job, &mut tees);
            EXIT_FAILED
        }
        Watched::Hung(ending) => {
            hung(
                &mut job,
                &mut tees,
                args,
                ending,
                started,
                verbose,
                &cost,
                preload.as_ref(),
            );
            EXIT_HUNG
        }
    }
}

/// Waits for the job to end, the timeout, a deadlock found by `--detect`,
/// or a signal.
fn watch(
    job: &mut Job,
    args: &RunArgs,
    started: Instant,
    note: &dyn Fn(std::fmt::Arguments),
    cost: &mut DetectCost,
    suspected: &mut dyn FnMut(u32, &Starter, &Report, &HangState, HangRule),
) -> Watched {
    let deadline = args.timeout.map(|t| started + t);
    let mut next_check = args
        .detect
        .then(|| started + args.detect_interval(Duration::ZERO, false));
    // Whether the job stood still at the last check.
    let mut still = false;
    let mut checks = 0;
    let rule = HangRule {
        floor_ms: u64::try_from(args.min_hang.as_millis()).unwrap_or(u64::MAX),
        compute_ms: u64::try_from(args.compute_hang.as_millis()).unwrap_or(u64::MAX),
        ..HangRule::default()
    };
    let mut hang = HangWatch::new(rule);
    // A suspected hang is reported once, until the job moves again.
    let mut suspicion_said = false;
    loop {
        // A signal first: the job may have exited of the signal passed on.
        if let Some((sig, _)) = signals::passed_on() {
            return Watched::Signalled(sig);
        }
        match job.has_exited() {
            Ok(true) => return Watched::Finished,
            Ok(false) => {}
            Err(e) => return Watched::Lost(e),
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            return Watched::Hung(Ending::Timeout);
        }
        if next_check.is_some_and(|at| now >= at) {
            checks += 1;
            crate::ptrace::take_stopped();
            let analysed = analyse(job.pgid(), false);
            cost.add_check(&crate::ptrace::take_stopped());
            let stopped = cost.last().unwrap_or_default().as_secs_f64();
            match analysed {
                Ok((starter, report)) if report.verdict() == Some(Verdict::Deadlock) => {
                    note(format_args!("check {checks}: deadlock (ranks stopped {stopped:.2} s)"));
                    return Watched::Hung(Ending::Deadlock {
                        check: checks,
                        starter,
                        report: Box::new(report),
                    });
                }
                Ok((starter, report)) => {
                    let at = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                    // The kernel's view in the snapshot, read as each rank
                    // was stopped: its CPU time and its wait for a CPU.
                    let state = hang.push(at, &report.snapshot, &BTreeMap::new());
                    still = state.not_still.is_none();
                    let word = verdict_word(report.verdict());
                    if state.hung {
                        note(format_args!(
                            "check {checks}: {word}, hung (ranks stopped {stopped:.2} s)"
                        ));
                        return Watched::Hung(Ending::Hang {
                            check: checks,
                            starter,
                            report: Box::new(report),
                            state: Box::new(state),
                            rule,
                        });
                    }
                    if state.suspected && !suspicion_said {
                        suspicion_said = true;
                        note(format_args!(
                            "check {checks}: {word}, suspected hung (ranks stopped {stopped:.2} s)"
                        ));
                        suspected(checks, &starter, &report, &state, rule);
                    } else if suspicion_said && state.not_still.is_some() {
                        suspicion_said = false;
                        eprintln!(
                            "mpiq run: check {checks}: the suspected hang is over: {}",
                            state.not_still.as_deref().unwrap_or_default()
                        );
                    }
                    match &state.not_still {
                        None => note(format_args!(
                            "check {checks}: {word}; nothing changed for {} (hung after {}; ranks stopped {stopped:.2} s)",
                            mpiq::analysis::hang::duration_words(state.still_ms),
                            mpiq::analysis::hang::duration_words(state.threshold_ms)
                        )),
                        Some(why) => note(format_args!(
                            "check {checks}: {word}; not still: {why} (ranks stopped {stopped:.2} s)"
                        )),
                    }
                }
                Err(why) => note(format_args!("check {checks}: not read: {why}")),
            }
            next_check = Some(Instant::now() + args.detect_interval(cost.last().unwrap_or_default(), still));
            continue;
        }
        let wake = [Some(now + POLL), deadline, next_check].into_iter().flatten().min();
        std::thread::sleep(wake.map_or(POLL, |w| w.saturating_duration_since(now)));
    }
}

/// Why `mpiq run` could not read its job; a person reads it in the report.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AnalyseError {
    /// Neither the command nor any process under it is an MPI starter.
    #[error(
        "no MPI starter found: the command (pid {root}, {comm}) is not one (mpirun, mpiexec, srun, ...), \
         and none of the processes under it is one (by name, or with an MPIR_proctable){}",
        listed(.under)
    )]
    NoStarter {
        /// The command's pid.
        root: i32,
        /// The command's name.
        comm: String,
        /// The first processes under it, `PID NAME` each.
        under: Vec<String>,
    },
    /// The job could not be read through its starter.
    #[error("reading the job through its starter {name} (pid {pid}): {source}")]
    Job {
        /// The starter's name.
        name: String,
        /// The starter's pid.
        pid: i32,
        /// Why.
        source: RunError,
    },
}

/// ` (PID NAME, ...)`, or ` (there are none)`.
fn listed(under: &[String]) -> String {
    if under.is_empty() {
        " (there are none)".to_string()
    } else {
        format!(" ({})", under.join(", "))
    }
}

/// Reads the job through its starter as `mpiq job` does.
fn analyse(root: i32, verbose: bool) -> Result<(Starter, Report), AnalyseError> {
    let Some(starter) = starter::find(root) else {
        let under: Vec<String> = procs::descendants(&[root])
            .into_iter()
            .take(12)
            .map(|(p, s)| format!("{} {}", p.pid, s.comm))
            .collect();
        let comm = procs::Stat::of(root).map(|s| s.comm).unwrap_or_default();
        return Err(AnalyseError::NoStarter { root, comm, under });
    };
    let opts = text_options();
    let samples = crate::run::job_samples(starter.pid, &opts, verbose).map_err(|source| AnalyseError::Job {
        name: starter.name.clone(),
        pid: starter.pid,
        source,
    })?;
    Ok((starter, Report::analyzed(samples)))
}

/// The options of `mpiq job` without any.
fn text_options() -> DumpOptions {
    DumpOptions::parse::<&str>(&[]).unwrap_or_default()
}

/// Reports on the hung job (stderr, `--report DIR`), then ends it.
#[allow(clippy::too_many_arguments)]
fn hung(
    job: &mut Job,
    tees: &mut [Tee; 2],
    args: &RunArgs,
    ending: Ending,
    started: Instant,
    verbose: bool,
    cost: &DetectCost,
    preload: Option<&Preload>,
) {
    let ran = started.elapsed();
    let hung_found = matches!(ending, Ending::Hang { .. });
    let (why, analysis) = match ending {
        Ending::Timeout => (
            format!(
                "which did not finish within --timeout {}",
                fmt_duration(args.timeout.unwrap_or_default())
            ),
            analyse(job.pgid(), verbose),
        ),
        Ending::Deadlock { check, starter, report } => (
            format!(
                "which --detect found deadlocked (check {check}; checks every {})",
                every_words(args)
            ),
            Ok((starter, *report)),
        ),
        Ending::Hang {
            check,
            starter,
            report,
            state,
            rule,
        } => {
            let words = match &report.analysis {
                Some(a) => hang_words(&state, a, rule),
                None => String::new(),
            };
            (
                format!(
                    "which --detect found hung (check {check}; checks every {}): {words}",
                    every_words(args)
                ),
                Ok((starter, *report)),
            )
        }
    };
    let mut text = format!("mpiq run: ending the job, {why}\n");
    let _ = writeln!(
        text,
        "  command: {} (pid {}, running for {:.1} s)",
        quoted(&args.command),
        job.pgid(),
        ran.as_secs_f64()
    );
    if let Some(words) = cost.words(ran) {
        let _ = writeln!(text, "  watching: {words}");
    }
    report_into(
        &mut text,
        analysis.as_ref().map(|(s, r)| (s, r)),
        tees,
        args,
        preload,
        hung_found,
        true,
    );
    let _ = writeln!(
        text,
        "mpiq run: sending SIGTERM to the job's process group {} (SIGKILL after --grace {} to what is left)",
        job.pgid(),
        fmt_duration(args.grace)
    );
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
    if let Some(dir) = &args.report {
        if let Err(e) = std::fs::write(dir.join("report.txt"), &text) {
            eprintln!("mpiq run: cannot write {}: {e}", dir.join("report.txt").display());
        }
    }
    let hurry = || signals::passed_on().is_some();
    let killed = job.end(true, args.grace, &hurry);
    let _ = reap(job, tees);
    if let Some(dir) = &args.report {
        write_job_output(dir, tees);
    }
    eprintln!(
        "mpiq run: the job was ended{}; exit status {EXIT_HUNG}",
        if killed {
            " (SIGKILL: it was still running after --grace)"
        } else {
            " by SIGTERM"
        }
    );
}

/// A suspected hang (`--detect`): the job stood still past the rule while a
/// rank computes outside MPI, as in a long serial phase. The report is
/// printed (and written with --report DIR) at once, and the job left
/// running: it is ended only if nothing changes for the rule's longer time,
/// or at --timeout.
#[allow(clippy::too_many_arguments)]
fn suspected_report(
    tees: &[Tee; 2],
    args: &RunArgs,
    preload: Option<&Preload>,
    check: u32,
    starter: &Starter,
    report: &Report,
    state: &HangState,
    rule: HangRule,
) {
    let words = match &report.analysis {
        Some(a) => hang_words(state, a, rule),
        None => String::new(),
    };
    let mut text = format!(
        "mpiq run: suspected hang, the job left running (check {check}; checks every {}): {words}\n",
        every_words(args)
    );
    let _ = writeln!(
        text,
        "  it is ended if nothing in it changes for {} in all{}",
        fmt_duration(std::time::Duration::from_millis(state.threshold_ms)),
        match args.timeout {
            Some(t) => format!(", or at --timeout {}", fmt_duration(t)),
            None => String::new(),
        }
    );
    report_into(&mut text, Ok((starter, report)), tees, args, preload, false, false);
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
    if let Some(dir) = &args.report {
        if let Err(e) = std::fs::write(dir.join("report.txt"), &text) {
            eprintln!("mpiq run: cannot write {}: {e}", dir.join("report.txt").display());
        }
        write_job_output(dir, tees);
    }
}

/// The report on the job after `text`'s first lines: the starter, the
/// verdict and the whole report (into `text`), and with --report DIR its
/// files (report.json, report.html, waits.dot, waits.svg; report.txt is
/// `text`, written by the caller). `ended`: the job is being ended (else
/// it is left running, suspected).
#[allow(clippy::too_many_arguments)]
fn report_into(
    text: &mut String,
    analysis: Result<(&Starter, &Report), &AnalyseError>,
    tees: &[Tee; 2],
    args: &RunArgs,
    preload: Option<&Preload>,
    hung_found: bool,
    ended: bool,
) {
    let opts = text_options();
    match analysis {
        Ok((starter, report)) => {
            let _ = writeln!(
                text,
                "  starter: {}, pid {} ({})",
                starter.name, starter.pid, starter.how
            );
            if let Some(line) = preload.and_then(|p| recorder::missing_line(&report.snapshot, &p.library.path)) {
                let _ = writeln!(text, "  {line}");
            }
            let _ = writeln!(text, "  verdict: {}\n", verdict_line(report, hung_found));
            text.push_str(&report::render(report, OutputFormat::Text, &opts));
            // The uncaught exception of a Python rank that left its script.
            let output: String = tees
                .iter()
                .map(|t| t.tail.lock().unwrap_or_else(|e| e.into_inner()).text().0)
                .collect();
            text.push_str(&traceback::section(&output, &report.snapshot));
        }
        Err(why) => {
            let _ = writeln!(text, "  verdict: none: the job could not be read: {why}");
        }
    }
    let mut problems = Vec::new();
    if let Some(dir) = &args.report {
        let mut written = vec!["report.txt (this text)".to_string()];
        if let Ok((_, report)) = analysis {
            let mut json_opts = opts.clone();
            json_opts.format = Format::Json;
            let json = report::render(report, OutputFormat::Json, &json_opts);
            save(dir, "report.json", &json, &mut written, &mut problems);
            let exit = ended.then_some((EXIT_HUNG, "the job was ended as hung, after this report"));
            let page = crate::html::page_with_text(report, &opts, None, text.as_str(), exit);
            save(dir, "report.html", &page, &mut written, &mut problems);
            if let Some(dot) = report.graph_dot(&opts) {
                save(dir, "waits.dot", &dot, &mut written, &mut problems);
                match report::write_svg(&dot, &dir.join("waits.svg")) {
                    Ok(()) => written.push("waits.svg".into()),
                    Err(SvgError::NoDot) => problems.push(
                        "waits.svg not written: graphviz's `dot` is not installed (or not on PATH); \
                         `dot -Tsvg waits.dot` draws it elsewhere"
                            .into(),
                    ),
                    Err(e) => problems.push(format!("waits.svg not written: {e}")),
                }
            }
        }
        written.push("job-output.txt".into());
        let _ = writeln!(
            text,
            "\nmpiq run: the report is in {}: {}",
            dir.display(),
            written.join(", ")
        );
        for p in &problems {
            let _ = writeln!(text, "mpiq run: {p}");
        }
    }
}

/// DIR/job-output.txt: the kept tails of the job's standard output and error.
fn write_job_output(dir: &Path, tees: &[Tee; 2]) {
    let output = format!(
        "{}\n{}",
        tees[0].section("standard output"),
        tees[1].section("standard error")
    );
    if let Err(e) = std::fs::write(dir.join("job-output.txt"), output) {
        eprintln!("mpiq run: cannot write {}: {e}", dir.join("job-output.txt").display());
    }
}

/// The interval of the checks in words: as given, or the default's rule.
fn every_words(args: &RunArgs) -> String {
    match args.detect_every {
        Some(d) => fmt_duration(d),
        None => format!(
            "{}, or longer to keep the ranks stopped under 1% of the time",
            fmt_duration(crate::args::DEFAULT_DETECT_EVERY)
        ),
    }
}

/// Writes one report file, noting it or the failure.
fn save(dir: &Path, name: &str, text: &str, written: &mut Vec<String>, problems: &mut Vec<String>) {
    match std::fs::write(dir.join(name), text) {
        Ok(()) => written.push(name.to_string()),
        Err(e) => problems.push(format!("{name} not written: {e}")),
    }
}

/// Stops passing signals on, reaps the command and waits (a little) for
/// the end of its output.
fn reap(job: &mut Job, tees: &mut [Tee; 2]) -> std::io::Result<std::process::ExitStatus> {
    signals::forget_job();
    let status = job.reap();
    let deadline = Instant::now() + OUTPUT_AFTER_EXIT;
    for t in tees.iter_mut() {
        t.finish(deadline);
    }
    status
}

/// Creates the report directory and removes the report files of an
/// earlier run; checks that files can be written there.
fn prepare_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for f in REPORT_FILES {
        match std::fs::remove_file(dir.join(f)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    let probe = dir.join(format!(".mpiq-run-{}", std::process::id()));
    std::fs::write(&probe, b"")?;
    std::fs::remove_file(&probe)
}

/// A shell's exit status for how the job ended: its code, or 128 + the
/// signal that killed it.
fn exit_status(s: std::process::ExitStatus) -> u8 {
    match (s.code(), s.signal()) {
        (Some(c), _) => (c & 0xff) as u8,
        (None, Some(sig)) => (128 + sig).clamp(0, 255) as u8,
        (None, None) => EXIT_FAILED,
    }
}

fn verdict_word(v: Option<Verdict>) -> &'static str {
    match v {
        Some(Verdict::Deadlock) => "deadlock",
        Some(Verdict::NoDeadlock) => "no deadlock",
        Some(Verdict::Unknown) | None => "unknown",
    }
}

/// The report's verdict line: the word first (`DEADLOCK`, `HUNG` when
/// --detect found the job hung), then the analysis's own summary, which
/// names whom the ranks wait for and where.
fn verdict_line(report: &Report, hung: bool) -> String {
    let Some(a) = &report.analysis else {
        return "unknown: mpiq could not decide (the report below says what it could not read)".into();
    };
    let rest = a.summary.split_once(": ").map_or(a.summary.as_str(), |(_, r)| r);
    match (a.verdict, hung) {
        (Verdict::Deadlock, _) => format!("DEADLOCK: {rest}"),
        (v, true) => format!("HUNG, {}: {rest}", verdict_word(Some(v))),
        (_, false) => a.summary.clone(),
    }
}

/// A duration as the options take it: `500ms`, `90s`, `10m`, `1h`.
pub fn fmt_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if !ms.is_multiple_of(1000) {
        format!("{ms}ms")
    } else if ms > 0 && ms.is_multiple_of(3_600_000) {
        format!("{}h", ms / 3_600_000)
    } else if ms > 0 && ms.is_multiple_of(60_000) {
        format!("{}m", ms / 60_000)
    } else {
        format!("{}s", ms / 1000)
    }
}

/// The command as a shell would take it back (words with anything but
/// `[A-Za-z0-9_./=:,+@%-]` single-quoted).
fn quoted(command: &[OsString]) -> String {
    command
        .iter()
        .map(|w| {
            let w = w.to_string_lossy();
            let plain = !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || "_./=:,+@%-".contains(c));
            if plain {
                w.into_owned()
            } else {
                format!("'{}'", w.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_back() {
        for (d, s) in [
            (Duration::from_millis(500), "500ms"),
            (Duration::from_secs(90), "90s"),
            (Duration::from_secs(600), "10m"),
            (Duration::from_secs(3600), "1h"),
            (Duration::from_millis(1500), "1500ms"),
            (Duration::ZERO, "0s"),
        ] {
            assert_eq!(fmt_duration(d), s);
            assert_eq!(crate::args::parse_duration(s).unwrap(), d, "{s}");
        }
    }

    #[test]
    fn commands_are_quoted_as_a_shell_takes_them() {
        let words: Vec<OsString> = ["mpirun", "-n", "4", "./a b", "it's", ""]
            .iter()
            .map(Into::into)
            .collect();
        assert_eq!(quoted(&words), r"mpirun -n 4 './a b' 'it'\''s' ''");
    }

    #[test]
    fn exit_statuses_as_a_shell_gives_them() {
        use std::process::ExitStatus;
        assert_eq!(exit_status(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(exit_status(ExitStatus::from_raw(0)), 0);
        assert_eq!(exit_status(ExitStatus::from_raw(15)), 143);
        assert_eq!(exit_status(ExitStatus::from_raw(9)), 137);
    }

    #[test]
    fn the_report_directory_is_made_and_cleared_of_an_earlier_report() {
        let dir = std::env::temp_dir().join(format!("mpiq-run-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        prepare_dir(&dir.join("a/b")).unwrap();
        for f in ["report.json", "report.html"] {
            std::fs::write(dir.join("a/b").join(f), "old").unwrap();
        }
        std::fs::write(dir.join("a/b/mine.txt"), "kept").unwrap();
        prepare_dir(&dir.join("a/b")).unwrap();
        assert!(!dir.join("a/b/report.json").exists());
        assert!(!dir.join("a/b/report.html").exists());
        assert!(dir.join("a/b/mine.txt").exists());
        std::fs::write(dir.join("file"), "").unwrap();
        assert!(prepare_dir(&dir.join("file")).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
