//! What `mpiq watch` knows, apart from the screen: the samples (with the
//! analysis of each against the one before), one letter per rank and sample
//! for the history strip, and the rows of the rank list: one per rank, or
//! one per group of ranks at the same place when they do not fit.

use std::collections::BTreeMap;

use mpiq::analysis::hang::{HangRule, HangState, HangWatch};
use mpiq::analysis::{self, Analysis};
use mpiq::stacks::position::{blocked_outside, position, Position};
use mpiq::stacks::CallClass;
use mpiq::{ProcessSnapshot, Snapshot};

/// Which rank a process is, across samples: its world rank, else its pid,
/// else its place in the sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Key {
    /// A world rank.
    Rank(i32),
    /// A process whose rank is not known.
    Pid(u32),
    /// Neither known.
    Index(usize),
}

impl Key {
    /// The key of the `i`th process of a sample.
    pub fn of(i: usize, p: &ProcessSnapshot) -> Key {
        match (p.world_rank, p.pid) {
            (Some(r), _) => Key::Rank(r),
            (None, Some(pid)) => Key::Pid(pid),
            (None, None) => Key::Index(i),
        }
    }

    /// The rank for [`mpiq::stacks::ranks_text`] (-1: unknown).
    fn rank(self) -> i64 {
        match self {
            Key::Rank(r) => i64::from(r),
            _ => -1,
        }
    }
}

/// The letter of a rank in a sample: the state of its first thread (by
/// tid) that is in MPI, else of its first application thread (the legend is
/// [`LEGEND`] and `mpiq watch --help`).
pub fn letter(p: &ProcessSnapshot) -> char {
    let Some(stacks) = p.stacks.as_ref().filter(|s| !s.threads.is_empty()) else {
        return '?';
    };
    let mut threads: Vec<_> = stacks.threads.iter().collect();
    threads.sort_by_key(|t| t.tid);
    let positions: Vec<_> = threads.iter().map(|t| (*t, position(t))).collect();
    let in_mpi = positions
        .iter()
        .find(|(_, pos)| matches!(pos, Position::InMpi { .. } | Position::InMpiLibrary { .. }));
    let chosen = in_mpi.or_else(|| positions.iter().find(|(_, pos)| !matches!(pos, Position::Runtime)));
    match chosen {
        None => '?',
        Some((_, Position::InMpi { call, class, .. })) => call_letter(call, *class),
        Some((_, Position::InMpiLibrary { .. })) => 'M',
        Some((t, _)) => {
            if blocked_outside(t).is_some() {
                'b'
            } else {
                '.'
            }
        }
    }
}

/// The letter of an MPI call.
fn call_letter(call: &str, class: CallClass) -> char {
    match class {
        CallClass::Send { .. } => 'S',
        CallClass::Recv | CallClass::SendRecv => 'R',
        CallClass::Wait { .. } => 'W',
        CallClass::Poll { .. } => 'T',
        CallClass::Collective { .. } | CallClass::CommConstruct => 'C',
        CallClass::InitFinalize if call.starts_with("finalize") => 'F',
        CallClass::InitFinalize => 'I',
        CallClass::OneSided => 'O',
        CallClass::Io { .. } => 'D',
        CallClass::LocalSend | CallClass::Start | CallClass::Local => 'M',
    }
}

/// The legend under the list.
pub const LEGEND: &str = ". computing  b blocked outside MPI  S send  R recv  W wait  T test  C collective  \
                          I init  F finalize  O one-sided  D I/O  M other MPI  ? unreadable  * group differs  \
                          for: time at this place  » the others wait for it";

/// Where a process is, in one line: the stacks' where words, else why
/// there are none.
pub fn where_line(p: &ProcessSnapshot) -> String {
    let first = |s: &str| s.lines().next().unwrap_or_default().to_string();
    match (&p.stacks, &p.error) {
        (Some(st), _) if st.where_.is_some() => st.where_.clone().unwrap_or_default(),
        (_, Some(e)) => format!("unreadable: {}", first(e)),
        (Some(st), None) => match &st.missing {
            Some(why) => format!("no call stacks: {}", first(why)),
            None => "no application thread".into(),
        },
        (None, None) => "no call stacks read".into(),
    }
}

/// One sample of every rank, with its analysis.
#[derive(Debug)]
pub struct Sample {
    /// 1 for the first sample of the session.
    pub number: usize,
    /// When it was taken: milliseconds since the Unix epoch (0: unknown).
    pub time_ms: u64,
    /// How long taking it took (live only).
    pub took_ms: Option<u64>,
    /// Every rank, as read (groups not inferred: the next sample's
    /// analysis compares with it as `mpiq job` compares its two).
    pub snapshot: Snapshot,
    /// The analysis of this sample against the one before it.
    pub analysis: Analysis,
    /// Each rank's where line.
    pub wheres: BTreeMap<Key, String>,
    /// Whether the job stands still, and since when each rank has been
    /// where it is (`mpiq run --detect`'s rule; empty without a time).
    pub hang: HangState,
}

impl Sample {
    /// The process of `key`.
    pub fn process(&self, key: Key) -> Option<&ProcessSnapshot> {
        self.snapshot
            .processes
            .iter()
            .enumerate()
            .find_map(|(i, p)| (Key::of(i, p) == key).then_some(p))
    }

    /// The text `mpiq job --stacks` shows for one process: its queues, where
    /// it is and every thread's frames (groups inferred from the whole
    /// sample, as `mpiq job` does).
    pub fn detail_text(&self, key: Key, opts: &mpiq::DumpOptions) -> Option<String> {
        let i = (0..self.snapshot.processes.len()).find(|&i| Key::of(i, &self.snapshot.processes[i]) == key)?;
        let mut whole = self.snapshot.clone();
        analysis::infer_groups(&mut whole);
        let one = Snapshot {
            processes: vec![whole.processes.swap_remove(i)],
            ..whole
        };
        let mut opts = opts.clone();
        opts.stacks = true;
        opts.format = mpiq::Format::Text;
        Some(mpiq::render_text(&one, &opts))
    }
}

/// One rank in one sample of the history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cell {
    /// Its letter (`' '`: not in that sample).
    pub letter: char,
    /// Whether it moved since the sample before (its where line changed).
    pub changed: bool,
}

const BLANK: Cell = Cell {
    letter: ' ',
    changed: false,
};

/// Every sample of a session: the history of every rank, and the samples
/// themselves (live: the last two; a replay: all).
pub struct Session {
    history: BTreeMap<Key, Vec<Cell>>,
    samples: Vec<Option<Sample>>,
    keep_all: bool,
    hang: HangWatch,
}

impl Default for Session {
    fn default() -> Self {
        Session {
            history: BTreeMap::new(),
            samples: Vec::new(),
            keep_all: false,
            hang: HangWatch::new(HangRule::default()),
        }
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("samples", &self.samples.len())
            .field("keep_all", &self.keep_all)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// A session that keeps every sample (`keep_all`, for stepping through
    /// a replay) or only the last two.
    pub fn new(keep_all: bool) -> Session {
        Session {
            keep_all,
            ..Session::default()
        }
    }

    /// How many samples there were.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Whether there was none yet.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// Sample `index` (0-based), if it is kept.
    pub fn sample(&self, index: usize) -> Option<&Sample> {
        self.samples.get(index).and_then(Option::as_ref)
    }

    /// Adds a sample: analysed against the one before it (as `mpiq job`
    /// analyses its two samples), its letters added to the history.
    pub fn push(&mut self, snapshot: Snapshot, time_ms: u64, took_ms: Option<u64>) {
        let prev = self.samples.last().and_then(Option::as_ref);
        let interval = prev
            .filter(|p| p.time_ms > 0 && time_ms >= p.time_ms)
            .map(|p| time_ms - p.time_ms);
        let analysis = analysis::analyze_samples(&snapshot, prev.map(|p| &p.snapshot), interval);
        let hang = if time_ms > 0 {
            self.hang.push(time_ms, &snapshot, &BTreeMap::new())
        } else {
            HangState::default()
        };
        let mut wheres = BTreeMap::new();
        let mut letters = BTreeMap::new();
        for (i, p) in snapshot.processes.iter().enumerate() {
            let key = Key::of(i, p);
            wheres.insert(key, where_line(p));
            letters.insert(key, letter(p));
        }
        let n = self.samples.len();
        for (key, l) in &letters {
            let changed = prev.is_some_and(|p| p.wheres.get(key) != wheres.get(key));
            let h = self.history.entry(*key).or_insert_with(|| vec![BLANK; n]);
            h.push(Cell { letter: *l, changed });
        }
        for h in self.history.values_mut() {
            if h.len() == n {
                h.push(BLANK);
            }
        }
        if !self.keep_all && n >= 2 {
            self.samples[n - 2] = None;
        }
        self.samples.push(Some(Sample {
            number: n + 1,
            time_ms,
            took_ms,
            snapshot,
            analysis,
            wheres,
            hang,
        }));
    }

    /// The rows of the list at sample `at` (0-based): one per rank seen so
    /// far, or, when there are more than `max_rows`, one per group of ranks
    /// with the same where line; each with the last `width` cells of its
    /// history.
    pub fn rows(&self, at: usize, width: usize, max_rows: usize) -> Vec<Row> {
        let sample = self.sample(at);
        let seen: Vec<(Key, &Vec<Cell>)> = self
            .history
            .iter()
            .filter(|(_, h)| h[..=at.min(h.len().saturating_sub(1))].iter().any(|c| c.letter != ' '))
            .map(|(k, h)| (*k, h))
            .collect();
        let strip = |h: &Vec<Cell>| -> Vec<Cell> {
            let end = (at + 1).min(h.len());
            h[end.saturating_sub(width)..end].to_vec()
        };
        let where_of = |k: &Key| {
            sample
                .and_then(|s| s.wheres.get(k).cloned())
                .unwrap_or_else(|| "(not in this sample)".into())
        };
        let waited_on: Vec<i64> = sample
            .map(|s| {
                s.analysis
                    .waited_on
                    .iter()
                    .flat_map(|w| w.ranks.iter().copied())
                    .collect()
            })
            .unwrap_or_default();
        let single: Vec<Row> = seen
            .iter()
            .map(|(k, h)| {
                let strip = strip(h);
                let rank = k.rank();
                Row {
                    still_ms: sample.and_then(|s| s.hang.ranks_still_ms.get(&rank).copied()),
                    waited_on: rank >= 0 && waited_on.contains(&rank),
                    who: match k {
                        Key::Rank(r) => r.to_string(),
                        _ => "?".into(),
                    },
                    pid: sample
                        .and_then(|s| s.process(*k))
                        .and_then(|p| p.pid)
                        .map(|p| p.to_string())
                        .unwrap_or_default(),
                    where_: where_of(k),
                    changed: strip.last().is_some_and(|c| c.changed),
                    strip,
                    keys: vec![*k],
                }
            })
            .collect();
        if single.len() <= max_rows {
            return single;
        }
        group(single)
    }
}

/// One line of the list: a rank, or a group of ranks at the same place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// The world rank, or "ranks 0-3 and 7" for a group.
    pub who: String,
    /// The pid (empty for a group: its size is in `who`).
    pub pid: String,
    /// Where it is.
    pub where_: String,
    /// The history, oldest first; for a group `*` where its ranks differ.
    pub strip: Vec<Cell>,
    /// Whether it (any rank of the group) moved in the last sample shown.
    pub changed: bool,
    /// The ranks of the row.
    pub keys: Vec<Key>,
    /// How long it (every rank of the group) has been where it is, in ms.
    pub still_ms: Option<u64>,
    /// The other ranks wait for it ([`Analysis::waited_on`]).
    pub waited_on: bool,
}

/// Rows of single ranks grouped by where line, in the order of their first
/// rank.
pub fn group(single: Vec<Row>) -> Vec<Row> {
    let mut groups: Vec<Row> = Vec::new();
    for r in single {
        match groups.iter_mut().find(|g| g.where_ == r.where_) {
            Some(g) => {
                g.keys.extend(r.keys);
                g.changed |= r.changed;
                g.waited_on |= r.waited_on;
                g.still_ms = g.still_ms.zip(r.still_ms).map(|(a, b)| a.min(b));
                // Aligned on the newest sample.
                let (a, b) = (g.strip.len(), r.strip.len());
                let n = a.max(b);
                let mut merged = Vec::with_capacity(n);
                for i in 0..n {
                    let x = (i + a)
                        .checked_sub(n)
                        .and_then(|j| g.strip.get(j))
                        .copied()
                        .unwrap_or(BLANK);
                    let y = (i + b)
                        .checked_sub(n)
                        .and_then(|j| r.strip.get(j))
                        .copied()
                        .unwrap_or(BLANK);
                    merged.push(Cell {
                        letter: if x.letter == y.letter { x.letter } else { '*' },
                        changed: x.changed || y.changed,
                    });
                }
                g.strip = merged;
            }
            None => groups.push(Row {
                pid: String::new(),
                ..r
            }),
        }
    }
    for g in &mut groups {
        let ranks: Vec<i64> = g.keys.iter().map(|k| k.rank()).collect();
        g.who = mpiq::stacks::ranks_text(&ranks);
    }
    groups
}
