//! Hung or slow, over time: a job sampled again and again (`mpiq run
//! --detect`, `mpiq watch`) is **hung** when nothing in it has changed for
//! longer than its own earlier behaviour explains.
//!
//! Each sample gives every rank a *place*: for a thread in a blocking MPI
//! call, the call, its caller and the digest of its calling frames
//! ([`crate::stacks::state`]: the same call in another iteration differs);
//! for a thread polling in MPI (`MPI_Test`, `MPI_Iprobe`), the call and its
//! caller (a polling loop may count); for a thread outside MPI (computing,
//! or blocked in a system call), its calling frames in the application
//! (functions and lines, the innermost application frame left out: a loop
//! that calls helpers is one place), and the digest of the rank's queues.
//! The job **stands still** from one sample to the next when no rank's
//! place or queues changed, every rank's place is known (a rank without
//! stacks might be moving), no rank is stopped by a signal (a suspended job
//! goes on when continued) and some rank waits or polls in MPI (a job whose
//! ranks all compute is busy, not waiting).
//!
//! The job's normal is learnt from the samples: the longest time it stood
//! still before moving on (an upper bound: from the sample before the first
//! still one to the first that moved). It is **hung** when it has stood
//! still (a lower bound: from the first still sample to now) for at least
//! `max(floor, factor × normal)`, over at least [`MIN_STILL_SAMPLES`]
//! samples: never on one sample, never before `floor`, and never inside
//! what the job has already shown it does when healthy.

use std::collections::hash_map::DefaultHasher;
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

use serde::{Deserialize, Serialize};

use super::words::ranks_words;
use super::Analysis;
use crate::snapshot::model::{ProcessSnapshot, Snapshot, ThreadStack};
use crate::stacks::names::CallClass;
use crate::stacks::position::{outside_runtimes, position, Position};

/// The fewest samples in a row, all the same, that can make a hang.
pub const MIN_STILL_SAMPLES: usize = 3;

/// How long a job must stand still, at least and relative to its normal.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HangRule {
    /// Never hung before it has stood still this long (ms).
    pub floor_ms: u64,
    /// Hung after this many times the longest it stood still before.
    pub factor: f64,
    /// While a rank outside MPI computes (on the CPU a quarter of the time
    /// or more; a long serial phase looks the same: one rank reads,
    /// partitions or factorizes while the others wait), the job is only
    /// *suspected* hung until it has stood still this long (ms).
    pub compute_ms: u64,
}

impl Default for HangRule {
    fn default() -> Self {
        HangRule {
            floor_ms: 60_000,
            factor: 3.0,
            compute_ms: DEFAULT_COMPUTE_HANG_MS,
        }
    }
}

/// [`HangRule::compute_ms`] unless given: 10 minutes, past a long serial
/// phase of minutes, within a quarter of an hour.
pub const DEFAULT_COMPUTE_HANG_MS: u64 = 600_000;

impl HangRule {
    /// The time a job must stand still, given its normal (ms).
    pub fn threshold_ms(&self, normal_ms: u64) -> u64 {
        // Saturating: a normal of hours times the factor stays finite.
        let scaled = (normal_ms as f64 * self.factor).min(u64::MAX as f64 / 2.0) as u64;
        self.floor_ms.max(scaled)
    }
}

/// What one thread is doing, as two samples compare it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum ThreadKey {
    /// In a blocking MPI call: thread, call, caller, calling frames' digest.
    Blocked(u64, String, Option<String>, Option<String>),
    /// Polling in MPI (`MPI_Test`, `MPI_Iprobe`): thread, call, caller.
    Polling(u64, String, Option<String>),
    /// Outside MPI: thread, its frames in the application (outermost
    /// first; compared by [`same_thread`]).
    Outside(u64, Vec<String>),
    /// In the MPI library without a named call: thread, caller.
    Unnamed(u64, Option<String>),
    /// The process has exited: it stays where it is for good.
    Gone,
}

/// What one rank is doing; `None` when it cannot be told (no stacks).
#[derive(Clone, Debug)]
struct RankKey {
    threads: Vec<ThreadKey>,
    queues: u64,
}

/// Two threads in the same place. Outside MPI, the application's frames
/// (outermost first) agree on all but the innermost of the shorter chain:
/// `main:80 > smooth:31` (in `smooth`, or in `exp` it calls) and
/// `main:80 > smooth:12 > update:5` are one loop; `main:95 > residual`
/// is another place.
fn same_thread(a: &ThreadKey, b: &ThreadKey) -> bool {
    match (a, b) {
        (ThreadKey::Outside(ta, ca), ThreadKey::Outside(tb, cb)) => {
            let n = ca.len().min(cb.len()).saturating_sub(1);
            ta == tb && ca[..n] == cb[..n]
        }
        _ => a == b,
    }
}

impl PartialEq for RankKey {
    fn eq(&self, other: &Self) -> bool {
        self.queues == other.queues
            && self.threads.len() == other.threads.len()
            && self.threads.iter().zip(&other.threads).all(|(a, b)| same_thread(a, b))
    }
}

impl RankKey {
    fn waits_in_mpi(&self) -> bool {
        self.threads
            .iter()
            .any(|t| matches!(t, ThreadKey::Blocked(..) | ThreadKey::Polling(..)))
    }

    /// Every thread outside MPI: the rank runs (or sleeps) in its own code.
    fn outside_mpi(&self) -> bool {
        self.threads.iter().all(|t| matches!(t, ThreadKey::Outside(..)))
    }
}

/// A frame in words for a key: function and line.
fn frame_key(f: &crate::snapshot::model::Frame) -> String {
    format!(
        "{}@{}:{}",
        f.function.as_deref().unwrap_or(&f.pc),
        f.file.as_deref().unwrap_or(""),
        f.line.unwrap_or(0)
    )
}

fn thread_key(p: &ProcessSnapshot, t: &ThreadStack) -> Option<ThreadKey> {
    match position(t) {
        Position::Runtime => None,
        Position::InMpi {
            call, class, caller, ..
        } => {
            if matches!(class, CallClass::Poll { .. }) || !class.blocks() {
                return Some(ThreadKey::Polling(t.tid, call, caller));
            }
            let state = p
                .stacks
                .as_ref()
                .and_then(|s| s.calls.iter().find(|c| c.tid == t.tid))
                .and_then(|c| c.state.clone());
            Some(ThreadKey::Blocked(t.tid, call, caller, state))
        }
        Position::InMpiLibrary { caller, .. } => Some(ThreadKey::Unnamed(t.tid, caller)),
        Position::NotInMpi { .. } => {
            // The application's frames, outermost first.
            let chain: Vec<String> = t
                .frames
                .iter()
                .rev()
                .filter(|f| outside_runtimes(f))
                .map(frame_key)
                .collect();
            Some(ThreadKey::Outside(t.tid, chain))
        }
    }
}

/// A digest of a process's queues (every operation of every communicator).
fn queues_digest(p: &ProcessSnapshot) -> u64 {
    let mut h = DefaultHasher::new();
    serde_json::to_string(&p.communicators).unwrap_or_default().hash(&mut h);
    p.queues_missing.is_some().hash(&mut h);
    h.finish()
}

fn rank_key(p: &ProcessSnapshot) -> Option<RankKey> {
    if super::waited::gone(p) {
        return Some(RankKey {
            threads: vec![ThreadKey::Gone],
            queues: 0,
        });
    }
    let st = p.stacks.as_ref()?;
    if st.threads.is_empty() {
        return None;
    }
    let threads: Vec<ThreadKey> = st.threads.iter().filter_map(|t| thread_key(p, t)).collect();
    if threads.is_empty() {
        return None;
    }
    Some(RankKey {
        threads,
        queues: queues_digest(p),
    })
}

/// Every rank's key in one sample (ranks without a process are absent).
fn keys(snap: &Snapshot) -> BTreeMap<i64, Option<RankKey>> {
    snap.processes
        .iter()
        .filter_map(|p| Some((i64::from(p.world_rank?), rank_key(p))))
        .collect()
}

/// Where the job stands after a sample.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HangState {
    /// Hung: it has stood still for at least `threshold_ms`.
    pub hung: bool,
    /// Suspected hung: it has stood still for at least `suspect_ms`, but a
    /// rank outside MPI has used the CPU all along (`computing`), as in a
    /// long serial phase: not yet hung.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub suspected: bool,
    /// How long it must stand still to be suspected (ms): the rule's
    /// `max(floor, factor × normal)`; `threshold_ms` when no rank computes.
    #[serde(default)]
    pub suspect_ms: u64,
    /// Ranks outside MPI that computed while the job stood still: on the
    /// CPU, or ready to run and waiting for one, a quarter of the time or
    /// more (a crowded node gives a computing rank less than all of it,
    /// and starves it at worst: it is still no hang).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub computing: Vec<i64>,
    /// How long it has stood still (ms, from its first still sample); 0
    /// when it moved since the last sample.
    pub still_ms: u64,
    /// Samples in a row that are all the same (1: it just moved).
    pub still_samples: usize,
    /// The longest it stood still before and moved on (ms; 0: never seen).
    pub normal_ms: u64,
    /// How long it must stand still to be hung (ms).
    pub threshold_ms: u64,
    /// Why it cannot be called still, when it is not: a rank without
    /// stacks, no rank waiting in MPI, a rank that moved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_still: Option<String>,
    /// How long each rank has been where it is (ms, world rank → time).
    pub ranks_still_ms: BTreeMap<i64, u64>,
    /// CPU time each rank used while the job stood still (ms), when known.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cpu_while_still_ms: BTreeMap<i64, u64>,
}

/// One sample kept.
struct Kept {
    at_ms: u64,
    keys: BTreeMap<i64, Option<RankKey>>,
    cpu_ms: BTreeMap<i64, u64>,
}

/// The samples of one job, and what they taught.
pub struct HangWatch {
    rule: HangRule,
    /// The samples since the job last moved (the first: the one it moved to).
    run: Vec<Kept>,
    /// The sample before `run` began, when there was one.
    before_run: Option<u64>,
    normal_ms: u64,
    /// When each rank's key last changed.
    rank_since: BTreeMap<i64, u64>,
    last_keys: BTreeMap<i64, Option<RankKey>>,
    /// Each rank's I/O counter at the last sample.
    last_io: BTreeMap<i64, u64>,
}

impl HangWatch {
    /// A new watch with `rule`.
    pub fn new(rule: HangRule) -> HangWatch {
        HangWatch {
            rule,
            run: Vec::new(),
            before_run: None,
            normal_ms: 0,
            rank_since: BTreeMap::new(),
            last_keys: BTreeMap::new(),
            last_io: BTreeMap::new(),
        }
    }

    /// The rule it applies.
    pub fn rule(&self) -> HangRule {
        self.rule
    }

    /// Adds a sample taken at `at_ms` (any clock, increasing), with the
    /// CPU time of each rank's process so far (ms; empty when unknown: the
    /// kernel's view in the snapshot, `os`, stands in: its CPU time and
    /// its time ready to run but waiting for a CPU, for a rank that
    /// computes on a crowded node waits for the CPU it would use).
    pub fn push(&mut self, at_ms: u64, snap: &Snapshot, cpu_ms: &BTreeMap<i64, u64>) -> HangState {
        let now = keys(snap);
        let mut cpu_ms = cpu_ms.clone();
        let mut io_now: BTreeMap<i64, u64> = BTreeMap::new();
        for p in &snap.processes {
            if let (Some(r), Some(os)) = (p.world_rank.map(i64::from), &p.os) {
                cpu_ms
                    .entry(r)
                    .or_insert(os.cpu_ms.saturating_add(os.wait_us.unwrap_or(0) / 1000));
                if let Some(io) = os.io_bytes {
                    io_now.insert(r, io);
                }
            }
        }
        // Ranks in their own code that read or wrote since the last
        // sample: a serial phase reading its input or writing its output
        // moves, whatever its frames.
        let did_io: Vec<i64> = io_now
            .iter()
            .filter(|(r, io)| {
                self.last_io.get(r).is_some_and(|last| last < io)
                    && now.get(r).is_some_and(|k| k.as_ref().is_some_and(RankKey::outside_mpi))
            })
            .map(|(r, _)| *r)
            .collect();
        self.last_io = io_now;
        for (r, k) in &now {
            if self.last_keys.get(r) != Some(k) {
                self.rank_since.insert(*r, at_ms);
            }
        }
        self.rank_since.retain(|r, _| now.contains_key(r));
        self.last_keys = now.clone();
        let unknown: Vec<i64> = now.iter().filter(|(_, k)| k.is_none()).map(|(r, _)| *r).collect();
        let stopped: Vec<i64> = snap
            .processes
            .iter()
            .filter(|p| p.os.as_ref().is_some_and(crate::snapshot::model::OsState::stopped))
            .filter_map(|p| p.world_rank.map(i64::from))
            .collect();
        let waiting = now.values().flatten().any(RankKey::waits_in_mpi);
        let same = self.run.last().is_some_and(|k| k.keys == now);
        let mut not_still = None;
        if !unknown.is_empty() {
            not_still = Some(format!("the stacks of {} are not known", ranks_words(&unknown)));
        } else if !stopped.is_empty() {
            // A suspended job (Slurm's `scontrol suspend`), a rank held by
            // SIGSTOP: it does nothing until continued, and may go on then.
            not_still = Some(format!(
                "{} {} stopped by a signal (state T: it does nothing until continued), which is no hang",
                ranks_words(&stopped),
                if stopped.len() == 1 { "is" } else { "are" }
            ));
        } else if !waiting {
            not_still = Some("no rank waits in MPI".to_string());
        } else if now.is_empty() {
            not_still = Some("no rank was read".to_string());
        } else if !did_io.is_empty() {
            not_still = Some(format!(
                "{} read or wrote since the last sample (the kernel's I/O counters grew)",
                ranks_words(&did_io)
            ));
        }
        if not_still.is_none() && !same && !self.run.is_empty() {
            not_still = Some("a rank moved or a queue changed since the last sample".into());
        }
        let still = same && not_still.is_none();
        if !still {
            // The run ends: what it lasted, at most, is the job's normal.
            if self.run.len() >= 2 {
                let first = self.before_run.unwrap_or(self.run[0].at_ms);
                self.normal_ms = self.normal_ms.max(at_ms.saturating_sub(first));
            }
            self.before_run = self.run.last().map(|k| k.at_ms);
            self.run.clear();
        }
        self.run.push(Kept {
            at_ms,
            keys: now,
            cpu_ms: cpu_ms.clone(),
        });
        let first = &self.run[0];
        let still_ms = at_ms.saturating_sub(first.at_ms);
        let suspect_ms = self.rule.threshold_ms(self.normal_ms);
        let cpu_while_still_ms: BTreeMap<i64, u64> = if self.run.len() >= 2 {
            cpu_ms
                .iter()
                .filter_map(|(r, &c)| Some((*r, c.saturating_sub(*first.cpu_ms.get(r)?))))
                .collect()
        } else {
            BTreeMap::new()
        };
        let computing: Vec<i64> = cpu_while_still_ms
            .iter()
            .filter(|(r, &c)| {
                still_ms > 0
                    && c * 4 >= still_ms
                    && self
                        .last_keys
                        .get(r)
                        .is_some_and(|k| k.as_ref().is_some_and(RankKey::outside_mpi))
            })
            .map(|(r, _)| *r)
            .collect();
        let threshold_ms = if computing.is_empty() {
            suspect_ms
        } else {
            suspect_ms.max(self.rule.compute_ms)
        };
        let over = still && self.run.len() >= MIN_STILL_SAMPLES && still_ms >= suspect_ms;
        let hung = over && still_ms >= threshold_ms;
        HangState {
            hung,
            suspected: over && !hung,
            suspect_ms,
            computing,
            still_ms: if still { still_ms } else { 0 },
            still_samples: self.run.len(),
            normal_ms: self.normal_ms,
            threshold_ms,
            not_still,
            ranks_still_ms: self
                .rank_since
                .iter()
                .map(|(r, &since)| (*r, at_ms.saturating_sub(since)))
                .collect(),
            cpu_while_still_ms,
        }
    }
}

/// A duration in words: `850 ms`, `42 s`, `4 min 10 s`, `2 h 5 min`.
pub fn duration_words(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0 => format!("{ms} ms"),
        1..=59 => format!("{s} s"),
        60..=3599 if s.is_multiple_of(60) => format!("{} min", s / 60),
        60..=3599 => format!("{} min {} s", s / 60, s % 60),
        _ if (s % 3600) / 60 == 0 => format!("{} h", s / 3600),
        _ => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

/// The hang in words, for a report. When the analysis names the ranks the
/// others wait for, first they, what they do and for how long, then their
/// waiters ("rank 5 has been computing in smooth (solver.c:31) for 4 min
/// 10 s, using the CPU all along; ranks 0-4 and 6-7 have waited for it in
/// MPI_Allreduce (solver.c:88) for 4 min 10 s"); then how long nothing in
/// the job changed, where the ranks are when no rank is named, what the job
/// did before, and the rule applied.
pub fn hang_words(state: &HangState, analysis: &Analysis, rule: HangRule) -> String {
    // How long ranks have been where they are: the longest of them (the
    // ranks waited on), or the shortest (their waiters: "at least").
    let still_of = |ranks: &[i64], longest: bool| {
        let times = ranks.iter().filter_map(|r| state.ranks_still_ms.get(r).copied());
        let t = if longest { times.max() } else { times.min() };
        t.unwrap_or(state.still_ms)
    };
    let busy = |r: &i64| {
        state
            .cpu_while_still_ms
            .get(r)
            .is_some_and(|&c| state.still_ms > 0 && c * 2 >= state.still_ms)
    };
    let mut sentences: Vec<String> = Vec::new();
    let mut named: Vec<i64> = Vec::new();
    for e in analysis.waited_on.iter().take(3) {
        let many = e.ranks.len() > 1;
        let mut s = format!(
            "{} {} for {}",
            ranks_words(&e.ranks),
            been(&e.text, many),
            duration_words(still_of(&e.ranks, true))
        );
        if e.ranks.iter().all(busy) {
            s.push_str(", using the CPU all along");
        }
        for w in e.waiters.iter().filter(|w| w.direct).take(3) {
            let text = w
                .text
                .strip_prefix("waits ")
                .or_else(|| w.text.strip_prefix("wait "))
                .unwrap_or(&w.text);
            s.push_str(&format!(
                "; {} {} waited for {} {text} for {}",
                ranks_words(&w.ranks),
                if w.ranks.len() > 1 { "have" } else { "has" },
                if many { "them" } else { "it" },
                duration_words(still_of(&w.ranks, false))
            ));
        }
        named.extend(&e.ranks);
        sentences.push(s);
    }
    let mut words = format!(
        "nothing in the job changed for {} ({} samples): no rank moved and no queue changed",
        duration_words(state.still_ms),
        state.still_samples
    );
    if sentences.is_empty() {
        // Ranks with the same place together, as the where-lines say them.
        let mut groups: Vec<(&str, Vec<i64>)> = Vec::new();
        for w in &analysis.where_ {
            match groups.iter_mut().find(|(t, _)| *t == w.text) {
                Some((_, rs)) => rs.push(w.rank),
                None => groups.push((&w.text, vec![w.rank])),
            }
        }
        let places: Vec<String> = groups
            .iter()
            .take(4)
            .map(|(t, rs)| {
                let t = match t.strip_prefix("is ") {
                    Some(rest) if rs.len() > 1 => format!("are {rest}"),
                    _ => t.to_string(),
                };
                format!("{} {t}", ranks_words(rs))
            })
            .collect();
        if !places.is_empty() {
            words.push_str(&format!(
                " ({}{})",
                places.join("; "),
                if groups.len() > 4 { "; ..." } else { "" }
            ));
        }
    } else {
        words = format!("{}; {words}", sentences.join("; "));
    }
    let busy: Vec<i64> = state
        .cpu_while_still_ms
        .keys()
        .filter(|r| busy(r) && !named.contains(r))
        .copied()
        .collect();
    if !busy.is_empty() {
        words.push_str(&format!(
            "; {} used the CPU all along (spinning in one place)",
            ranks_words(&busy)
        ));
    }
    let normal = if state.normal_ms == 0 {
        "before, it never stood still across two samples".to_string()
    } else {
        format!(
            "the longest it stood still before was {}",
            duration_words(state.normal_ms)
        )
    };
    let suspect_ms = if state.suspect_ms == 0 {
        state.threshold_ms
    } else {
        state.suspect_ms
    };
    if state.computing.is_empty() {
        words.push_str(&format!(
            "; {normal}; it is called hung after max({}, {} × that) = {}",
            duration_words(rule.floor_ms),
            rule.factor,
            duration_words(suspect_ms)
        ));
    } else {
        words.push_str(&format!(
            "; {normal}; it is suspected hung after max({}, {} × that) = {}, and while {} {} outside MPI \
             (a long serial phase looks the same) called hung only after {}",
            duration_words(rule.floor_ms),
            rule.factor,
            duration_words(suspect_ms),
            ranks_words(&state.computing),
            if state.computing.len() == 1 {
                "computes"
            } else {
                "compute"
            },
            duration_words(state.threshold_ms)
        ));
    }
    words
}

/// A waited-on entry's words as a state that has lasted: "is computing in
/// smooth" → "has been computing in smooth" ("have been" for `many`);
/// "has exited" stays.
fn been(text: &str, many: bool) -> String {
    let has = if many { "have" } else { "has" };
    match text.strip_prefix("is ").or_else(|| text.strip_prefix("are ")) {
        Some(rest) => format!("{has} been {rest}"),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests;
