//! Where `mpiq watch`'s samples come from, on a thread of their own so the
//! screen answers keys while the ranks are read: a live job (one sample
//! every interval or on demand, each as `mpiq job --samples 1` takes it,
//! each added to the session recording), or a recording's samples replayed
//! one after the other.

use std::path::Path;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mpiq::record::{RecordedSample, RecordingFile, Replay};
use mpiq::session::SessionWriter;
use mpiq::{DumpOptions, Snapshot, Target};

use crate::run::{watch_sample, JobSource, RunError};

/// What the thread sends.
#[derive(Debug)]
pub enum Msg {
    /// A sample is being taken.
    Sampling,
    /// A sample.
    Sample {
        /// Every rank.
        snapshot: Snapshot,
        /// When (ms since the epoch; 0: unknown).
        time_ms: u64,
        /// How long it took (live).
        took_ms: Option<u64>,
    },
    /// A replay's number of samples.
    Total(usize),
    /// A sample could not be taken, or recorded (one line).
    Failed(String),
    /// The thread ended (a replay is complete).
    Done,
}

/// What the screen asks of a live source.
#[derive(Debug)]
pub enum Cmd {
    /// Take a sample now.
    Now,
    /// Pause (true) or resume.
    Pause(bool),
    /// Stop.
    Quit,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A live job's sampling.
pub struct Live {
    /// The job.
    pub source: JobSource,
    /// The bridge options (`--record FILE` among them).
    pub opts: DumpOptions,
    /// How long the ranks run between two samples.
    pub interval: Duration,
    /// Another node's collector's deadline.
    pub node_timeout: Duration,
    /// The session recording (with `--record`).
    pub writer: Option<SessionWriter>,
}

impl Live {
    /// Starts sampling: the first sample at once.
    pub fn start(self, tx: Sender<Msg>) -> std::io::Result<(Sender<Cmd>, std::thread::JoinHandle<()>)> {
        let (cmd_tx, cmd_rx) = channel();
        let handle = std::thread::Builder::new()
            .name("mpiq-watch-sampler".into())
            .spawn(move || self.run(&tx, &cmd_rx))?;
        Ok((cmd_tx, handle))
    }

    fn run(mut self, tx: &Sender<Msg>, rx: &Receiver<Cmd>) {
        let mut paused = false;
        loop {
            if crate::interrupt::interrupted() {
                return;
            }
            let _ = tx.send(Msg::Sampling);
            let start = Instant::now();
            let time_ms = now_ms();
            let (msg, recordings) = match watch_sample(&self.source, &self.opts, self.node_timeout) {
                Ok(s) => (
                    Msg::Sample {
                        snapshot: s.snapshot,
                        time_ms,
                        took_ms: Some(start.elapsed().as_millis() as u64),
                    },
                    s.recordings,
                ),
                Err(RunError::Dump(mpiq::DumpError::Interrupted)) => return,
                Err(e) => (
                    Msg::Failed(format!(
                        "the sample failed: {}",
                        e.to_string().lines().collect::<Vec<_>>().join("; ")
                    )),
                    Vec::new(),
                ),
            };
            let sampled = matches!(msg, Msg::Sample { .. });
            if tx.send(msg).is_err() {
                return;
            }
            // Shown first, then recorded (the ranks run meanwhile).
            if let (Some(w), true) = (&mut self.writer, sampled) {
                if let Err(e) = w.add(time_ms, &recordings) {
                    let _ = tx.send(Msg::Failed(format!("the recording: {e}")));
                }
            }
            // The ranks run `interval` before the next sample.
            let next = Instant::now() + self.interval;
            loop {
                let cmd = if paused {
                    rx.recv().map_err(|_| RecvTimeoutError::Disconnected)
                } else {
                    rx.recv_timeout(next.saturating_duration_since(Instant::now()))
                };
                match cmd {
                    Ok(Cmd::Now) => break,
                    Ok(Cmd::Pause(p)) => paused = p,
                    Ok(Cmd::Quit) | Err(RecvTimeoutError::Disconnected) => return,
                    Err(RecvTimeoutError::Timeout) => break,
                }
            }
        }
    }
}

/// One recorded sample replayed into a snapshot (as `mpiq replay` does).
pub fn replay_sample(sample: RecordedSample, opts: &DumpOptions) -> Result<Snapshot, ReplayError> {
    let mut replays = sample
        .processes
        .into_iter()
        .map(Replay::new)
        .collect::<Result<Vec<_>, _>>()?;
    let mut targets: Vec<&mut dyn Target> = replays.iter_mut().map(|r| r as &mut dyn Target).collect();
    Ok(mpiq::collect_all(&mut targets, opts)?)
}

/// Why a recorded sample could not be replayed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayError {
    /// A process's recording does not hold together.
    #[error(transparent)]
    Recording(#[from] mpiq::record::RecordingError),
    /// The dump of the replayed processes failed.
    #[error(transparent)]
    Dump(#[from] mpiq::DumpError),
}

/// Loads a recording (in the caller: a bad file is an error before the
/// screen starts).
pub fn load(file: &Path) -> Result<Vec<RecordedSample>, RunError> {
    let recording = RecordingFile::load(file)?;
    Ok(RecordedSample::all_of(recording))
}

/// Replays every sample in order on a thread.
pub fn start_replay(
    samples: Vec<RecordedSample>,
    opts: DumpOptions,
    tx: Sender<Msg>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("mpiq-watch-replay".into())
        .spawn(move || {
            let _ = tx.send(Msg::Total(samples.len()));
            for (i, s) in samples.into_iter().enumerate() {
                let time_ms = s.time_ms;
                let msg = match replay_sample(s, &opts) {
                    Ok(snapshot) => Msg::Sample {
                        snapshot,
                        time_ms,
                        took_ms: None,
                    },
                    // Its place kept: an empty sample.
                    Err(e) => {
                        let _ = tx.send(Msg::Failed(format!("sample {}: {e}", i + 1)));
                        Msg::Sample {
                            snapshot: Snapshot::default(),
                            time_ms,
                            took_ms: None,
                        }
                    }
                };
                if tx.send(msg).is_err() {
                    return;
                }
            }
            let _ = tx.send(Msg::Done);
        })
}
