//! `mpiq watch`: a live full-screen view of a job. Every interval (or on a
//! key) one sample of every rank, taken exactly as `mpiq job --starter PID
//! --samples 1` takes it (`run::watch_sample`: stopped, read, released at
//! once; other nodes through their collectors), analysed against the one
//! before it; one line per rank with where it is and a history strip of one
//! letter per sample; Enter shows a rank's stacks and queues as the bridge
//! renders one process. `--record` keeps every sample in one session
//! recording (`mpiq::session`); `--replay` shows one again.
//!
//! - `model.rs`: the samples, the letters, the rows (pure);
//! - `ui.rs`: drawing (ratatui);
//! - `source.rs`: the sampling thread, and a recording's samples replayed;
//! - `term.rs`: the terminal and standard error while the screen is up.

use std::io::IsTerminal;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::time::{Duration, Instant};

use crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use mpiq::session::SessionWriter;
use mpiq::{DumpError, DumpOptions, UsageError};

use crate::args::WatchArgs;
use crate::run::{JobSource, Outcome, RunError};

pub mod model;
pub mod source;
pub mod term;
pub mod ui;

use model::Session;
use source::{Cmd, Msg};
use ui::{Mode, Replaying, View};

/// What a key asks for, besides changing the view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Nothing more.
    None,
    /// Quit.
    Quit,
    /// Take a sample now (live).
    SampleNow,
    /// Pause or resume sampling (live).
    Pause(bool),
}

/// Applies a key to the view: moving, opening a rank, stepping a replay.
pub fn on_key(view: &mut View, session: &Session, key: KeyEvent) -> Action {
    if key.kind == KeyEventKind::Release {
        return Action::None;
    }
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    let page = view.rows.len().clamp(1, 20);
    match key.code {
        KeyCode::Char('q') | KeyCode::Char('Q') => return Action::Quit,
        KeyCode::Char('c') if ctrl => return Action::Quit,
        _ => {}
    }
    let replay = view.replay.is_some();
    match (&mut view.mode, key.code) {
        (_, KeyCode::Char('p')) | (_, KeyCode::Char(' ')) if replay => {
            if let Some(r) = &mut view.replay {
                r.playing = !r.playing;
            }
        }
        (_, KeyCode::Char('r')) | (_, KeyCode::Char(' ')) => return Action::SampleNow,
        (_, KeyCode::Char('p')) => {
            view.paused = !view.paused;
            return Action::Pause(view.paused);
        }
        (_, KeyCode::Left) | (_, KeyCode::Char('h')) if replay => view.at = view.at.saturating_sub(1),
        (_, KeyCode::Right) | (_, KeyCode::Char('l')) if replay => {
            view.at = (view.at + 1).min(session.len().saturating_sub(1));
        }
        (Mode::List, KeyCode::Up) | (Mode::List, KeyCode::Char('k')) => {
            view.selected = view.selected.saturating_sub(1);
            view.selected_key = None;
        }
        (Mode::List, KeyCode::Down) | (Mode::List, KeyCode::Char('j')) => {
            view.selected = (view.selected + 1).min(view.rows.len().saturating_sub(1));
            view.selected_key = None;
        }
        (Mode::List, KeyCode::PageUp) => {
            view.selected = view.selected.saturating_sub(page);
            view.selected_key = None;
        }
        (Mode::List, KeyCode::PageDown) => {
            view.selected = (view.selected + page).min(view.rows.len().saturating_sub(1));
            view.selected_key = None;
        }
        (Mode::List, KeyCode::Home) | (Mode::List, KeyCode::Char('g')) => {
            view.selected = 0;
            view.selected_key = None;
        }
        (Mode::List, KeyCode::End) | (Mode::List, KeyCode::Char('G')) => {
            view.selected = view.rows.len().saturating_sub(1);
            view.selected_key = None;
        }
        (Mode::List, KeyCode::Enter) => {
            if let Some(key) = view.rows.get(view.selected).and_then(|r| r.keys.first().copied()) {
                view.mode = Mode::Detail { key, scroll: 0 };
            }
        }
        (Mode::Detail { .. }, KeyCode::Esc) | (Mode::Detail { .. }, KeyCode::Backspace) => view.mode = Mode::List,
        (Mode::Detail { scroll, .. }, code) => {
            let step: u16 = match code {
                KeyCode::PageUp | KeyCode::PageDown => 20,
                _ => 1,
            };
            match code {
                KeyCode::Up | KeyCode::Char('k') | KeyCode::PageUp => *scroll = scroll.saturating_sub(step),
                KeyCode::Down | KeyCode::Char('j') | KeyCode::PageDown => *scroll = scroll.saturating_add(step),
                KeyCode::Home | KeyCode::Char('g') => *scroll = 0,
                _ => {}
            }
        }
        _ => {}
    }
    Action::None
}

/// What is watched, for the header.
fn title(args: &WatchArgs) -> String {
    match (&args.replay, &args.slurm, args.starter) {
        (Some(f), ..) => format!("replay of {}", f.display()),
        (None, Some(s), _) => format!("Slurm step {s}"),
        (None, None, Some(pid)) => {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            format!("{} {pid}", comm.trim())
        }
        (None, None, None) => String::new(),
    }
}

/// Runs `mpiq watch` until q, Ctrl-C or a signal.
pub fn run(args: &WatchArgs) -> Result<Outcome, RunError> {
    if !std::io::stdout().is_terminal() {
        return Err(UsageError(
            "mpiq watch draws on a terminal, and its standard output is not one; for a report in a \
             file or a pipe use `mpiq job --starter PID` (or --json)"
                .into(),
        )
        .into());
    }
    let opts = args.to_options()?;
    let (tx, rx) = channel();
    let mut replaying = None;
    let mut sampler: Option<(Sender<Cmd>, std::thread::JoinHandle<()>)> = None;
    let io = |e: std::io::Error| RunError::NothingOpened(format!("mpiq watch: {e}"));
    if let Some(file) = &args.replay {
        let samples = source::load(file)?;
        replaying = Some(Replaying {
            total: samples.len(),
            playing: false,
        });
        let mut opts = opts.clone();
        opts.record = None;
        source::start_replay(samples, opts, tx).map_err(io)?;
    } else {
        let source = match (&args.slurm, args.starter) {
            (Some(spec), _) => JobSource::Slurm(spec.clone()),
            (None, Some(pid)) => JobSource::Starter(pid),
            (None, None) => {
                return Err(UsageError("give --starter PID, --slurm JOB[.STEP] or --replay FILE".into()).into())
            }
        };
        // Before the screen: a file that cannot be written is an error now.
        let writer = match &opts.record {
            Some(path) => Some(SessionWriter::create(path).map_err(|e| DumpError::Record(e.to_string()))?),
            None => None,
        };
        let live = source::Live {
            source,
            opts: opts.clone(),
            interval: args.interval,
            node_timeout: Duration::from_secs(args.node_timeout),
            writer,
        };
        sampler = Some(live.start(tx).map_err(io)?);
    }
    let mut view = View::new(title(args), args.interval, replaying);
    let samples = {
        let mut screen = term::Screen::start().map_err(io)?;
        let r = event_loop(&mut screen, &mut view, &rx, sampler.as_ref().map(|s| &s.0), &opts);
        drop(screen);
        r
    };
    // Every rank released, also one being read right now.
    crate::interrupt::raise();
    crate::ptrace::detach_everything(Duration::from_secs(5));
    if let Some((cmd, handle)) = sampler {
        let _ = cmd.send(Cmd::Quit);
        // A sample being recorded is finished first (bounded: a sample of
        // many ranks is hundreds of MB to compress).
        let start = Instant::now();
        let mut said = false;
        while !handle.is_finished() && start.elapsed() < Duration::from_secs(300) {
            if !said && start.elapsed() > Duration::from_secs(1) && opts.record.is_some() {
                eprintln!("mpiq watch: finishing the recording of the last sample...");
                said = true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let samples = samples.map_err(io)?;
    let recorded = match (&opts.record, args.replay.is_none()) {
        (Some(p), true) => format!("; recorded in {}", p.display()),
        _ => String::new(),
    };
    eprintln!(
        "mpiq watch: {samples} sample{}{recorded}",
        if samples == 1 { "" } else { "s" }
    );
    Ok(Outcome {
        stdout: String::new(),
        verdict: None,
        status: Some(0),
    })
}

/// Draws, takes the samples and the keys, until quit; returns the number of
/// samples.
fn event_loop(
    screen: &mut term::Screen,
    view: &mut View,
    rx: &Receiver<Msg>,
    cmd: Option<&Sender<Cmd>>,
    opts: &DumpOptions,
) -> std::io::Result<usize> {
    let mut session = Session::new(view.replay.is_some());
    let mut last_step = Instant::now();
    let mut dirty = true;
    let mut last_message = None;
    loop {
        while let Ok(m) = rx.try_recv() {
            dirty = true;
            match m {
                Msg::Sampling => view.sampling = true,
                Msg::Sample {
                    snapshot,
                    time_ms,
                    took_ms,
                } => {
                    view.sampling = false;
                    session.push(snapshot, time_ms, took_ms);
                    if view.replay.is_none() {
                        view.at = session.len() - 1;
                    }
                }
                Msg::Total(n) => {
                    if let Some(r) = &mut view.replay {
                        r.total = n;
                    }
                }
                Msg::Failed(why) => {
                    view.sampling = false;
                    view.status = why;
                }
                Msg::Done => {}
            }
        }
        let message = screen.last_message();
        if message.is_some() && message != last_message {
            view.status.clone_from(message.as_ref().unwrap_or(&String::new()));
            last_message = message;
            dirty = true;
        }
        if let Some(r) = &mut view.replay {
            if r.playing && last_step.elapsed() >= view.interval {
                last_step = Instant::now();
                if view.at + 1 < session.len() {
                    view.at += 1;
                    dirty = true;
                } else if session.len() == r.total {
                    r.playing = false;
                    dirty = true;
                }
            }
        }
        if dirty {
            screen.terminal.draw(|f| ui::draw(f, &session, view, opts))?;
            dirty = false;
        }
        if !event::poll(Duration::from_millis(50))? {
            continue;
        }
        match event::read()? {
            Event::Key(key) => {
                dirty = true;
                match on_key(view, &session, key) {
                    Action::Quit => return Ok(session.len()),
                    Action::SampleNow => {
                        if let Some(c) = cmd {
                            let _ = c.send(Cmd::Now);
                        }
                    }
                    Action::Pause(p) => {
                        if let Some(c) = cmd {
                            let _ = c.send(Cmd::Pause(p));
                        }
                    }
                    Action::None => {}
                }
            }
            Event::Resize(..) => dirty = true,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests;
