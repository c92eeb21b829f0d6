//! Running the commands: open the targets (ranks in parallel), dump them
//! through the bridge, release them, render.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use mpiq::{DumpError, DumpOptions, ProcessSnapshot, Snapshot, Target, TargetError, UsageError};

use crate::args::{Cli, Command};
use crate::core::{CoreError, CoreProcess};
use crate::job::{is_local_host, mpi_descendants, read_proctable, JobError};
use crate::live::{LiveError, LiveProcess};
use crate::process::Process;

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
    #[error("{0}")]
    Replay(String),
    /// A core file could not be opened (for `lookup --core`).
    #[error(transparent)]
    Core(#[from] CoreError),
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
struct Reporter {
    verbose: bool,
    start: Instant,
}

impl Reporter {
    fn note(&self, what: impl std::fmt::Display) {
        if self.verbose {
            eprintln!("mpiq: [{:>7.1} ms] {what}", self.start.elapsed().as_secs_f64() * 1e3);
        }
    }

    fn bar(&self, len: usize, what: &'static str) -> Option<indicatif::ProgressBar> {
        if len < 2 || !std::io::stderr().is_terminal() {
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
fn test_hold() {
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
        pid,
        world_rank,
        executable,
        dll: None,
        error: Some(error),
        messages: Vec::new(),
        communicators: Vec::new(),
        stats: None,
    }
}

/// Runs `open` on every item on a few threads, keeping the order.
fn open_parallel<I: Sync, T: Send>(
    items: &[I],
    bar: Option<&indicatif::ProgressBar>,
    open: impl Fn(&I) -> T + Sync,
) -> Vec<T> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<T>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    let workers = items.len().clamp(1, 8);
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
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

/// Dumps the opened processes, releases them, and renders everything
/// (failures in their place).
fn dump_slots<M: crate::image::Memory>(
    mut slots: Vec<Slot<Process<M>>>,
    opts: &DumpOptions,
    rep: &Reporter,
) -> Result<String, RunError> {
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
        let r = mpiq::collect_all(&mut targets, opts);
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
            Slot::Open(_) => snapshot.processes.extend(collected.next()),
            Slot::Failed(p) => snapshot.processes.push(*p),
        }
    }
    snapshot.processes.extend(collected);
    Ok(mpiq::render(&snapshot, opts))
}

fn open_live(pids: &[(i32, Option<i32>)], rep: &Reporter) -> Vec<Slot<LiveProcess>> {
    let bar = rep.bar(pids.len(), "stopping processes");
    let slots = open_parallel(pids, bar.as_ref(), |&(pid, rank)| match LiveProcess::attach(pid) {
        Ok(mut p) => {
            p.set_world_rank(rank);
            Slot::Open(p)
        }
        Err(e) => Slot::Failed(Box::new(failed_snapshot(
            u32::try_from(pid).ok(),
            rank,
            std::fs::read_link(format!("/proc/{pid}/exe"))
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            e.to_string(),
        ))),
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

fn run_queues(pids: &[i32], opts: &DumpOptions, rep: &Reporter) -> Result<String, RunError> {
    let pids: Vec<(i32, Option<i32>)> = pids.iter().map(|&p| (p, None)).collect();
    dump_slots(open_live(&pids, rep), opts, rep)
}

fn run_core(files: &[PathBuf], exe: Option<&Path>, opts: &DumpOptions, rep: &Reporter) -> Result<String, RunError> {
    let bar = rep.bar(files.len(), "opening core files");
    let slots = open_parallel(files, bar.as_ref(), |f| match CoreProcess::open_core(f, exe) {
        Ok(p) => Slot::Open(p),
        Err(e) => Slot::Failed(Box::new(failed_snapshot(None, None, String::new(), e.to_string()))),
    });
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    rep.note("core files opened");
    dump_slots(slots, opts, rep)
}

fn run_job(starter: i32, opts: &DumpOptions, rep: &Reporter) -> Result<String, RunError> {
    let table = {
        let mut s = LiveProcess::attach(starter).map_err(|source| RunError::Starter { pid: starter, source })?;
        let table = read_proctable(&s);
        if let Err(e) = s.detach() {
            eprintln!("mpiq: warning: {e}");
        }
        match table {
            Ok(t) => t,
            Err(e @ (JobError::Empty(_) | JobError::NoProctable(_))) => {
                // No table: the MPI processes among the starter's descendants.
                let pids = mpi_descendants(starter);
                if pids.is_empty() {
                    return Err(e.into());
                }
                eprintln!(
                    "mpiq: {e}\nmpiq: using the {} MPI process(es) started under it instead (world ranks as the library reports them)",
                    pids.len()
                );
                let pids: Vec<(i32, Option<i32>)> = pids.into_iter().map(|p| (p, None)).collect();
                return dump_slots(open_live(&pids, rep), opts, rep);
            }
            Err(e) => return Err(e.into()),
        }
    };
    rep.note(format_args!("proctable of {starter}: {} rank(s)", table.len()));
    let local: Vec<(i32, Option<i32>)> = table
        .iter()
        .filter(|r| is_local_host(&r.host))
        .map(|r| (r.pid, Some(r.rank)))
        .collect();
    let mut opened = open_live(&local, rep).into_iter();
    let mut slots = Vec::with_capacity(table.len());
    for r in &table {
        if is_local_host(&r.host) {
            slots.extend(opened.next());
        } else {
            slots.push(Slot::Failed(Box::new(failed_snapshot(
                u32::try_from(r.pid).ok(),
                Some(r.rank),
                r.executable.clone(),
                format!(
                    "rank {} (pid {}) runs on host {}: not reachable from here",
                    r.rank, r.pid, r.host
                ),
            ))));
        }
    }
    dump_slots(slots, opts, rep)
}

fn run_lookup(target: &mut dyn LookupTarget, questions: &Questions, json: bool) -> Result<String, RunError> {
    let mut lines = Vec::new();
    let mut obj = serde_json::Map::new();
    let mut put = |kind: &str, name: &str, value: Option<serde_json::Value>| {
        let text = match &value {
            None => "-".to_string(),
            Some(serde_json::Value::String(s)) if kind == "string" => format!("{s:?}"),
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
        };
        lines.push(format!("{kind} {name} {text}"));
        obj.entry(kind.to_string())
            .or_insert_with(|| serde_json::Value::Object(Default::default()))
            .as_object_mut()
            .map(|m| m.insert(name.to_string(), value.unwrap_or(serde_json::Value::Null)));
    };
    let hex = |a: u64| serde_json::Value::String(format!("{a:#x}"));
    for s in &questions.symbol {
        put("symbol", s, target.find_symbol(s).map_err(RunError::Lookup)?.map(hex));
    }
    for s in &questions.function {
        put(
            "function",
            s,
            target.find_function(s).map_err(RunError::Lookup)?.map(hex),
        );
    }
    for s in &questions.string {
        let v = target.string_symbol(s).map_err(RunError::Lookup)?;
        put("string", s, v.map(serde_json::Value::String));
    }
    for t in &questions.sizeof {
        let v = match target.find_type(t).map_err(RunError::Lookup)? {
            Some(id) => target.size_of(id).map_err(RunError::Lookup)?,
            None => None,
        };
        put("sizeof", t, v.map(Into::into));
    }
    for q in &questions.offsetof {
        let Some((t, f)) = q.rsplit_once('.') else {
            return Err(RunError::Usage(UsageError(format!(
                "--offsetof {q}: expected TYPE.FIELD"
            ))));
        };
        let v = match target.find_type(t).map_err(RunError::Lookup)? {
            Some(id) => target.field_offset(id, f).map_err(RunError::Lookup)?,
            None => None,
        };
        put("offsetof", q, v.map(Into::into));
    }
    if json {
        Ok(serde_json::Value::Object(obj).to_string() + "\n")
    } else {
        Ok(lines.join("\n") + "\n")
    }
}

fn run_replay(file: &Path, opts: &DumpOptions) -> Result<String, RunError> {
    let recording = mpiq::record::RecordingFile::load(file).map_err(|e| RunError::Replay(e.to_string()))?;
    let mut replays = recording
        .processes
        .into_iter()
        .map(mpiq::record::Replay::new)
        .collect::<Result<Vec<_>, String>>()
        .map_err(|e| RunError::Replay(format!("{}: {e}", file.display())))?;
    let mut targets: Vec<&mut dyn Target> = replays.iter_mut().map(|r| r as &mut dyn Target).collect();
    Ok(mpiq::dump(&mut targets, opts)?)
}

/// The questions of `mpiq lookup`.
struct Questions {
    symbol: Vec<String>,
    function: Vec<String>,
    string: Vec<String>,
    sizeof: Vec<String>,
    offsetof: Vec<String>,
}

/// A target that can also read a string symbol.
trait LookupTarget: Target {
    fn string_symbol(&mut self, name: &str) -> Result<Option<String>, TargetError>;
}

impl<M: crate::image::Memory> LookupTarget for Process<M> {
    fn string_symbol(&mut self, name: &str) -> Result<Option<String>, TargetError> {
        let Some((addr, size)) = self.image().find_symbol_sized(name) else {
            return Ok(None);
        };
        let ptr = self.image().type_sizes().pointer as u64;
        // `char name[N]` holds the text; `char *name` points to it.
        let at = if size == ptr { self.read_pointer(addr)? } else { addr };
        if at == 0 {
            return Ok(Some(String::new()));
        }
        self.read_c_string(at, 4096).map(Some)
    }
}

/// Runs a parsed command line; returns what to print on stdout.
pub fn run(cli: &Cli) -> Result<String, RunError> {
    let rep = Reporter {
        verbose: cli.verbose,
        start: Instant::now(),
    };
    match &cli.command {
        Command::Queues { pids, dump } => run_queues(pids, &dump.to_options()?, &rep),
        Command::Core { files, exe, dump } => run_core(files, exe.as_deref(), &dump.to_options()?, &rep),
        Command::Job { starter, dump } => run_job(*starter, &dump.to_options()?, &rep),
        Command::Replay { file, dump } => run_replay(file, &dump.to_options()?),
        Command::Lookup {
            pid,
            core,
            symbol,
            function,
            string,
            sizeof,
            offsetof,
            json,
        } => {
            let questions = Questions {
                symbol: symbol.clone(),
                function: function.clone(),
                string: string.clone(),
                sizeof: sizeof.clone(),
                offsetof: offsetof.clone(),
            };
            if let Some(core) = core {
                let mut p = CoreProcess::open_core(core, None)?;
                return run_lookup(&mut p, &questions, *json);
            }
            let pid = pid.unwrap_or_default();
            let mut p = LiveProcess::attach(pid).map_err(|e| RunError::NothingOpened(e.to_string()))?;
            rep.note("stopped");
            test_hold();
            let out = run_lookup(&mut p, &questions, *json);
            rep.note("answered");
            if let Err(e) = p.detach() {
                eprintln!("mpiq: warning: {e}");
            }
            out
        }
    }
}
