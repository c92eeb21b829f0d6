//! What the commands share: open the targets (ranks in parallel), dump them
//! through the bridge, release them (for a live job: twice, the ranks
//! running in between, on every node through its collector), analyse,
//! render; and why a command failed ([`RunError`]). The commands above it
//! (`launch`, `lookup`, `watch`) and the dispatcher (`crate::dispatch`)
//! use it; it uses none of them.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use mpiq::analysis::Verdict;
use mpiq::{DumpError, DumpOptions, ProcessSnapshot, Snapshot, Target, TargetError, UsageError};

use crate::args::{DumpArgs, OutputFormat};
use crate::core::{CoreError, CoreProcess};
use crate::handoff::Reopen;
use crate::job::JobError;
use crate::live::{LiveError, LiveProcess};
use crate::outfile::OutputFileError;
use crate::process::Process;
use crate::report::{self, Report, Samples, SvgError};

mod collector;
mod fanout;
mod ranks;
mod sampling;
mod slurm;
mod stacks;
pub use stacks::run_stacks;
mod wire;
pub use collector::run_collector;
pub use collector::{CollectError, CollectRequest};
pub use fanout::Details;
pub use sampling::{run_job_settled, watch_sample, JobPlan, JobSource, WatchSample};
pub use slurm::{SlurmError, SlurmStep};
use wire::Request;
/// The collectors' wire, for the scale harness (`mpiq-bench scale`), which
/// plays recorded collectors through it.
pub use wire::{
    frame as wire_frame, restore as wire_restore, Groups as WireGroups, Line as WireLine, Message as WireMessage,
    Reassembler as WireReassembler, Request as WireRequest, StackTable as WireStackTable,
};

/// Why a command failed as a whole.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// A bad argument (exit status 2).
    #[error(transparent)]
    Usage(#[from] UsageError),
    /// The bridge failed (nothing readable, or interrupted).
    #[error(transparent)]
    Dump(#[from] DumpError),
    /// No target could even be opened; one line each.
    #[error("{0}")]
    NothingOpened(String),
    /// `mpiq job --collect check`: the analysis of the compact records
    /// differs from that of the same ranks whole.
    #[error(
        "the analysis of the compact records differs from the analysis of the same samples whole \
         (a bug: please report it with this output)\n  compact: {compact}\n  whole:   {whole}"
    )]
    CompactDiffers {
        /// The first field that differs, in the compact records' analysis.
        compact: String,
        /// The same field in the whole snapshots' analysis.
        whole: String,
    },
    /// The starter could not be opened.
    #[error("starter process {pid}: {source}")]
    Starter {
        /// The starter.
        pid: i32,
        /// Why.
        source: LiveError,
    },
    /// The starter's proctable could not be read.
    #[error(transparent)]
    Job(#[from] JobError),
    /// A lookup failed on the host side.
    #[error("{0}")]
    Lookup(TargetError),
    /// A recording could not be replayed.
    #[error(transparent)]
    Replay(#[from] mpiq::record::RecordingError),
    /// A core file could not be opened (for `lookup --core`).
    #[error(transparent)]
    Core(#[from] CoreError),
    /// `--svg FILE` could not be written.
    #[error(transparent)]
    Svg(#[from] SvgError),
    /// `--flamegraph FILE` or `--html FILE` could not be written.
    #[error(transparent)]
    OutputFile(#[from] OutputFileError),
}

impl RunError {
    /// The process exit status for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            RunError::Usage(_) => 2,
            RunError::Dump(DumpError::Interrupted) => 130,
            _ => 1,
        }
    }
}

/// Prints progress and timings to stderr.
pub struct Reporter {
    verbose: bool,
    start: Instant,
    /// Set by `mpiq watch` (which draws no progress bars): where each
    /// sample's recordings go with `--record` (into its session file)
    /// instead of the bridge writing the file.
    keep: Option<Mutex<Vec<mpiq::record::Recording>>>,
}

impl Reporter {
    /// A reporter that prints (with `verbose`) from now on.
    pub fn new(verbose: bool) -> Reporter {
        Reporter {
            verbose,
            start: Instant::now(),
            keep: None,
        }
    }

    /// Prints one progress line (with `--verbose`).
    pub fn note(&self, what: impl std::fmt::Display) {
        if self.verbose {
            eprintln!("mpiq: [{:>7.1} ms] {what}", self.start.elapsed().as_secs_f64() * 1e3);
        }
    }

    fn bar(&self, len: usize, what: &'static str) -> Option<indicatif::ProgressBar> {
        if len < 2 || self.keep.is_some() || !std::io::stderr().is_terminal() {
            return None;
        }
        let bar = indicatif::ProgressBar::new(len as u64);
        if let Ok(style) = indicatif::ProgressStyle::with_template("{spinner} {msg} {pos}/{len} [{bar:30}] {elapsed}") {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(what);
        bar.enable_steady_tick(Duration::from_millis(100));
        Some(bar)
    }
}

/// Test hook: `MPIQ_TEST_HOLD_MS=N` keeps the processes stopped N ms
/// before they are read, so a test can interrupt a dump in the middle.
pub fn test_hold() {
    if let Some(ms) = std::env::var("MPIQ_TEST_HOLD_MS").ok().and_then(|v| v.parse().ok()) {
        std::thread::sleep(Duration::from_millis(ms));
    }
}

/// One process of the output: opened, or a reason it could not be.
enum Slot<T> {
    Open(T),
    Failed(Box<ProcessSnapshot>),
}

/// A process the dump shows only as an error line.
pub fn failed_snapshot(
    pid: Option<u32>,
    world_rank: Option<i32>,
    executable: String,
    error: String,
) -> ProcessSnapshot {
    ProcessSnapshot {
        error: Some(error),
        ..ProcessSnapshot::new(pid, world_rank, executable)
    }
}

/// Runs `open` on every item on a few threads, keeping the order.
fn open_parallel<I: Send, T: Send>(
    items: Vec<I>,
    bar: Option<&indicatif::ProgressBar>,
    open: impl Fn(I) -> T + Sync,
) -> Vec<T> {
    let n = items.len();
    // Each worker takes the next item (by value) and puts its result in
    // the item's place.
    let queue = Mutex::new(items.into_iter().enumerate());
    let results: Mutex<Vec<Option<T>>> = Mutex::new((0..n).map(|_| None).collect());
    let workers = n.clamp(1, 8);
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let next = queue.lock().unwrap_or_else(|e| e.into_inner()).next();
                let Some((i, item)) = next else { break };
                let r = open(item);
                results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
                if let Some(b) = bar {
                    b.inc(1);
                }
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .flatten()
        .collect()
}

/// Dumps the opened processes, releases them, and returns the snapshot of
/// everything (failures in their place).
fn collect_slots<M: crate::image::Memory>(
    mut slots: Vec<Slot<Process<M>>>,
    opts: &DumpOptions,
    rep: &Reporter,
) -> Result<Snapshot, RunError> {
    if rep.verbose {
        for s in &slots {
            if let Slot::Open(p) = s {
                for w in p.warnings() {
                    eprintln!("mpiq: warning: process {}: {w}", p.pid().unwrap_or(0));
                }
            }
        }
    }
    let failures: Vec<String> = slots
        .iter()
        .filter_map(|s| match s {
            Slot::Failed(p) => Some(p.error.clone().unwrap_or_default()),
            Slot::Open(_) => None,
        })
        .collect();
    if slots.iter().all(|s| matches!(s, Slot::Failed(_))) {
        return Err(RunError::NothingOpened(failures.join("\n")));
    }
    let python: Vec<u32> = slots
        .iter()
        .filter_map(|s| match s {
            Slot::Open(p) => p.live_python_pid(),
            Slot::Failed(_) => None,
        })
        .collect();
    let result = {
        let mut targets: Vec<&mut dyn Target> = slots
            .iter_mut()
            .filter_map(|s| match s {
                Slot::Open(p) => Some(p as &mut dyn Target),
                Slot::Failed(_) => None,
            })
            .collect();
        rep.note(format_args!("dumping {} process(es)", targets.len()));
        test_hold();
        // The bridge reads the processes one after the other: a spinner.
        let spinner = rep.bar(targets.len(), "reading the queues of").inspect(|b| {
            b.set_style(
                indicatif::ProgressStyle::with_template("{spinner} {msg} {len} processes {elapsed}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
            );
        });
        let r = std::thread::scope(|s| {
            // Where each Python rank's interpreter is, found beside the
            // reading, from the last rank back (the reading goes forward).
            if !opts.no_python {
                s.spawn(|| python.iter().rev().for_each(|&pid| mpiq::target::python::prepare(pid)));
            }
            match &rep.keep {
                Some(keep) => mpiq::collect_all_with(&mut targets, opts, &mut |recordings| {
                    keep.lock().unwrap_or_else(|e| e.into_inner()).extend(recordings);
                    Ok(())
                }),
                None => mpiq::collect_all(&mut targets, opts),
            }
        });
        if let Some(s) = spinner {
            s.finish_and_clear();
        }
        r
    };
    rep.note("dump done");
    // Release every process before printing anything.
    for s in &mut slots {
        if let Slot::Open(p) = s {
            if let Err(e) = p.detach() {
                eprintln!("mpiq: warning: {e}");
            }
        }
    }
    rep.note("processes released");
    let collected = match result {
        Ok(snap) => snap,
        Err(DumpError::AllFailed(text)) if !failures.is_empty() => {
            return Err(RunError::Dump(DumpError::AllFailed(format!(
                "{text}\n{}",
                failures.join("\n")
            ))))
        }
        Err(e) => return Err(e.into()),
    };
    let mut collected = collected.processes.into_iter();
    let mut snapshot = Snapshot::default();
    for s in slots {
        match s {
            Slot::Open(p) => snapshot.processes.extend(collected.next().map(|mut c| {
                c.os = p.os().cloned();
                c
            })),
            Slot::Failed(p) => snapshot.processes.push(*p),
        }
    }
    snapshot.processes.extend(collected);
    Ok(snapshot)
}

fn open_live(pids: &[(i32, Option<i32>)], rep: &Reporter) -> Vec<Slot<LiveProcess>> {
    let bar = rep.bar(pids.len(), "stopping processes");
    // Every process is stopped before any is opened: ranks that spin in
    // MPI's progress engine (most of a hung job's) take the CPU from this
    // process while it parses their objects, and a node's 32 spinning
    // ranks made one sample take over a second.
    // What the kernel says of each is read first: once stopped, it would
    // say mpiq's stop.
    let stopped = open_parallel(pids.to_vec(), None, |(pid, _)| {
        (crate::procs::os_state(pid), crate::ptrace::Attachment::attach(pid))
    });
    let items: Vec<_> = pids.iter().copied().zip(stopped).collect();
    let slots = open_parallel(items, bar.as_ref(), |((pid, rank), (os, stopped))| {
        match stopped.map_err(LiveError::from).and_then(LiveProcess::open_stopped) {
            Ok(mut p) => {
                p.set_world_rank(rank);
                p.set_os(os);
                Slot::Open(p)
            }
            Err(e) => Slot::Failed(Box::new(ProcessSnapshot {
                os,
                ..failed_snapshot(
                    u32::try_from(pid).ok(),
                    rank,
                    std::fs::read_link(format!("/proc/{pid}/exe"))
                        .map(|p| p.display().to_string())
                        .unwrap_or_default(),
                    e.to_string(),
                )
            })),
        }
    });
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let n = slots.iter().filter(|s| matches!(s, Slot::Open(_))).count();
    rep.note(format_args!(
        "stopped {n} of {} process(es); {} object file(s) parsed",
        pids.len(),
        crate::cache::cached_objects()
    ));
    slots
}

/// One sample of live processes (pid, world rank): stop, read, release.
fn sample_pids(pids: &[(i32, Option<i32>)], opts: &DumpOptions, rep: &Reporter) -> Result<Snapshot, RunError> {
    collect_slots(open_live(pids, rep), opts, rep)
}

/// `mpiq queues PID...`: one sample of the processes.
pub fn run_queues(pids: &[i32], opts: &DumpOptions, rep: &Reporter) -> Result<Snapshot, RunError> {
    let pids: Vec<(i32, Option<i32>)> = pids.iter().map(|&p| (p, None)).collect();
    sample_pids(&pids, opts, rep)
}

/// `mpiq core FILE...`: the core files, each opened beside the others.
pub fn run_core(
    files: &[PathBuf],
    exe: Option<&Path>,
    opts: &DumpOptions,
    rep: &Reporter,
) -> Result<Snapshot, RunError> {
    let bar = rep.bar(files.len(), "opening core files");
    let slots = open_parallel(files.iter().collect(), bar.as_ref(), |f| {
        match CoreProcess::open_core(f, exe) {
            Ok(p) => Slot::Open(p),
            Err(e) => Slot::Failed(Box::new(failed_snapshot(None, None, String::new(), e.to_string()))),
        }
    });
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    rep.note("core files opened");
    collect_slots(slots, opts, rep)
}

/// What `mpiq job --starter PID` reads with its defaults (two samples,
/// `--interval` apart, other nodes through their collectors), for `mpiq
/// run`, which renders the one analysis as text, JSON, DOT and SVG
/// ([`Report::analyzed`], [`report::render`]).
pub fn job_samples(starter: i32, opts: &DumpOptions, verbose: bool) -> Result<Samples, RunError> {
    let rep = Reporter {
        verbose,
        start: Instant::now(),
        keep: None,
    };
    let plan = JobPlan {
        samples: 2,
        interval_ms: crate::args::DEFAULT_INTERVAL_MS,
        node_timeout: Duration::from_secs(crate::args::DEFAULT_NODE_TIMEOUT_SECS),
        // Its report is written as JSON as well: every rank whole.
        compact: false,
    };
    sampling::run_job_settled(&JobSource::Starter(starter), &plan, opts, &rep).map(|(samples, _)| samples)
}

/// `mpiq replay FILE`: the processes of a recording, dumped again.
pub fn run_replay(file: &Path, opts: &DumpOptions) -> Result<Snapshot, RunError> {
    let recording = mpiq::record::RecordingFile::load(file)?;
    let mut replays = recording
        .processes
        .into_iter()
        .map(mpiq::record::Replay::new)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| mpiq::record::RecordingError::Format {
            path: file.display().to_string(),
            reason: e.to_string(),
        })?;
    let mut targets: Vec<&mut dyn Target> = replays.iter_mut().map(|r| r as &mut dyn Target).collect();
    Ok(mpiq::collect_all(&mut targets, opts)?)
}

/// What a command produced.
#[derive(Debug)]
pub struct Outcome {
    /// What to print on stdout.
    pub stdout: String,
    /// The verdict of the analysis, if one was made.
    pub verdict: Option<Verdict>,
    /// The exit status, when the command chose it itself (`mpiq run`).
    pub status: Option<u8>,
}

impl Outcome {
    /// The process exit status (see `mpiq --help`).
    pub fn exit_code(&self) -> u8 {
        self.status.unwrap_or_else(|| report::exit_code(self.verdict))
    }
}

/// Ranks other nodes sent as compact records, to fetch whole after the
/// analysis ([`finish`]).
pub struct Fetch<'a> {
    /// The waiting collectors.
    pub details: Details,
    /// Where to say what is asked.
    pub rep: &'a Reporter,
    /// `--collect check`: fetch every rank of every sample whole, analyse
    /// those too, and fail unless both analyses are the same.
    pub check: bool,
}

/// `--collect check`: every rank of every sample fetched whole and put
/// into `copy` (the samples as the compact records gave them), analysed
/// as `report` was; the report of the whole snapshots, or an error naming
/// the first field in which the two analyses differ.
fn checked(
    report: &Report,
    mut copy: Samples,
    analyse: bool,
    details: Details,
    rep: &Reporter,
) -> Result<Report, RunError> {
    let mut whole = details.fetch(Request::Every, rep);
    if let Some(previous) = copy.previous.as_mut() {
        let earlier = whole.iter().filter(|(s, _)| *s == 0).map(|(_, p)| p.clone()).collect();
        add_whole(previous, earlier);
    }
    let last = whole.iter().map(|(s, _)| *s).max();
    whole.retain(|(s, _)| Some(*s) == last);
    add_whole(&mut copy.current, whole.into_iter().map(|(_, p)| p).collect());
    let whole_report = if analyse {
        Report::analyzed(copy)
    } else {
        Report::plain(copy.current)
    };
    if let Some((compact, whole)) = first_difference(report, &whole_report) {
        return Err(RunError::CompactDiffers { compact, whole });
    }
    rep.note("the compact records' analysis is the whole snapshots' (--collect check)");
    Ok(whole_report)
}

/// The first field in which two reports' analyses differ, as
/// `field: value` of each (values cut to 300 characters), or `None`.
fn first_difference(a: &Report, b: &Report) -> Option<(String, String)> {
    let json = |r: &Report| serde_json::to_value(&r.analysis).unwrap_or_default();
    let (a, b) = (json(a), json(b));
    if a == b {
        return None;
    }
    let cut = |s: String| s.chars().take(300).collect::<String>();
    let (Some(ma), Some(mb)) = (a.as_object(), b.as_object()) else {
        return Some((cut(a.to_string()), cut(b.to_string())));
    };
    let field = ma.keys().chain(mb.keys()).find(|k| ma.get(*k) != mb.get(*k))?;
    let show = |m: &serde_json::Map<String, serde_json::Value>| {
        cut(format!(
            "{field}: {}",
            m.get(field).map(|v| v.to_string()).unwrap_or_else(|| "-".into())
        ))
    };
    Some((show(ma), show(mb)))
}

/// Gives the compact records of `snapshot` what their whole snapshots
/// (`whole`, sent on request) have that they left out: the frames'
/// addresses and the dump's statistics. The rest is the same in both, and
/// stays as the analysis left it (inferred groups).
fn add_whole(snapshot: &mut Snapshot, whole: Vec<ProcessSnapshot>) {
    let mut by_key: std::collections::HashMap<_, ProcessSnapshot> = whole
        .into_iter()
        .map(|p| ((p.node.clone(), p.pid, p.world_rank), p))
        .collect();
    for p in &mut snapshot.processes {
        let Some(w) = by_key.remove(&(p.node.clone(), p.pid, p.world_rank)) else {
            continue;
        };
        p.stats = w.stats;
        if let (Some(mine), Some(theirs)) = (p.stacks.as_mut(), w.stacks) {
            for (t, whole) in mine.threads.iter_mut().zip(theirs.threads) {
                if t.tid == whole.tid && t.frames.len() == whole.frames.len() {
                    t.frames = whole.frames;
                }
            }
        }
    }
}

/// Analyses (when the command calls for it), renders, writes `--svg`,
/// `--flamegraph` and `--html`. Once per process: the report is never freed (the
/// process ends with the command). With `fetch` (other nodes sent
/// compact records), the ranks the output shows whole are fetched after
/// the analysis ([`Details::fetch`]).
pub fn finish(
    samples: Samples,
    whole_job: bool,
    dump: &DumpArgs,
    opts: &DumpOptions,
    reopen: Reopen,
    fetch: Option<Fetch<'_>>,
) -> Result<Outcome, RunError> {
    let format = dump.output_format()?;
    let analyse = !dump.no_analysis
        && (whole_job
            || samples.current.processes.len() >= 2
            || dump.svg.is_some()
            || matches!(format, OutputFormat::Dot | OutputFormat::Csv));
    let check = fetch.as_ref().is_some_and(|f| f.check);
    let copy = check.then(|| samples.clone());
    let mut report = if analyse {
        Report::analyzed(samples)
    } else {
        Report::plain(samples.current)
    };
    if let Some(Fetch { details, rep, .. }) = fetch {
        let job_text = format == OutputFormat::Text && report.snapshot.processes.len() > 1;
        // What the output shows of what the records left out: the frames'
        // addresses, in the text with --stacks (for the ranks it shows in
        // detail), and everything in JSON. Else no round trip.
        let shown = match (&report.analysis, format) {
            _ if check => Some(Request::Every),
            (Some(_), OutputFormat::Text) if job_text && opts.stacks => {
                Some(Request::Detail(report.detail_ranks(opts)))
            }
            (_, OutputFormat::Text) if opts.stacks => Some(Request::Detail(None)),
            (_, OutputFormat::Json) => Some(Request::Detail(None)),
            _ => None,
        };
        match (shown, copy) {
            (Some(Request::Every), Some(copy)) => report = checked(&report, copy, analyse, details, rep)?,
            (Some(request), _) => {
                let whole = details.fetch(request, rep);
                add_whole(&mut report.snapshot, whole.into_iter().map(|(_, p)| p).collect());
            }
            (None, _) => details.close(rep),
        }
    }
    // The graph only when asked for: a tuple would build it every time
    // (5 % of a 100,000-rank `mpiq job`).
    if let Some(path) = &dump.svg {
        if let Some(graph) = report.graph_dot(opts) {
            report::write_svg(&graph, path)?;
        }
    }
    if let Some(path) = &dump.flamegraph {
        crate::flamegraph::write(&report, opts, path)?;
    }
    let shown = matches!(format, OutputFormat::Text | OutputFormat::Json) && report.analysis.is_some();
    let handoff = (shown || (dump.html.is_some() && report.analysis.is_some()))
        .then(|| reopen.handoff(&report.snapshot))
        .flatten();
    if let Some(path) = &dump.html {
        let verdict = report.verdict();
        let exit = (report::exit_code(verdict), report::exit_meaning(verdict));
        crate::html::write(&report, opts, handoff.as_ref(), Some(exit), path)?;
    }
    let handoff = if shown { handoff } else { None };
    let outcome = Outcome {
        stdout: report::render_with(&report, format, opts, handoff.as_ref()),
        verdict: report.verdict(),
        status: None,
    };
    // The command ends here: its memory goes back with the process, not
    // snapshot by snapshot (8 % of a 100,000-rank `mpiq job`).
    std::mem::forget(report);
    Ok(outcome)
}
