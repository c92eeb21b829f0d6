//! Fuzzing and fault injection with the real debug libraries (issue 6, item 4).
//!
//! Real dumps are recorded once (`mpiq queues --pid P --record FILE`) from
//! real jobs under Open MPI and MPICH, and kept in
//! `target/<profile>/mpiq-fuzz/` so that a seed replays the same case later
//! (`MPIQ_FUZZ_RERECORD=1` records again). Then, for many seeds, the real
//! debug library (`libompi_dbg_msgq.so`, `libtvmpich.so`) is run through the
//! bridge's library API (`mpiq::collect`) in the isolation helper
//! `mpiq-dllhost`, against a replay of a recording that
//!
//! * has bytes mutated: bit flips, pointer-sized words replaced by nearby
//!   addresses, self-loops, pointers back into the same struct, cross links
//!   to other pointers, garbage, and 32-bit counts/ranks replaced by extremes;
//! * fails reads: every read from the N-th on (the process went away), a
//!   random subset of pages (unmapped memory), or symbol/type lookups;
//! * is interrupted at the N-th read (Ctrl-C).
//!
//! The mutations and faults are injected by the bridge's test kit
//! (`mpiq::testkit::Faulty` in front of the replay), and every random
//! choice comes from its `Rng` (SplitMix64), so a seed is the whole case.
//!
//! First come systematic cases (up to 150 "hot" pointer words per recording
//! — near the MPI's symbols, the communicators and what they point at — each
//! set to itself, NULL, the next word and 16 bytes back), then random ones.
//!
//! Each case checks: no panic in mpiq (collect, JSON round trip, both
//! renderers, the cross-rank analysis), no hang (a case over 10 s fails), an
//! interruption is reported as such and only then, structural invariants of
//! the snapshot, and *marking*: when a read or lookup failed and the result
//! differs from the fault-free one, the process carries an error or a
//! message, or a queue is marked incomplete / not available — never a
//! silently shorter or empty list. mpiq's own panics and aborts inside the
//! helper are caught too (its standard error goes to a log the test reads).
//! A library crash or a library loop cut by the helper's deadline is
//! contained by design: those are counted, not failures. The summary line
//! (`--nocapture`) gives the counts.
//!
//! Environment:
//! * `MPIQ_FUZZ_CASES=N` random cases after the systematic ones (default
//!   6000: with the ~1900 systematic ones about a minute on 2 cores; run
//!   100000 by hand),
//! * `MPIQ_FUZZ_SEED=S` (default fixed) — a failing case prints its seed;
//!   `MPIQ_FUZZ_CASES=1 MPIQ_FUZZ_SEED=<seed>` replays exactly that case,
//! * `MPIQ_FUZZ_THREADS=N` (default 2).
//!
//! Needs the test bed and a built workspace (`cargo build --release
//! --workspace`): the helper `target/release/mpiq-dllhost` is used.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use mpiq::record::{Recording, RecordingFile, Replay};
use mpiq::testkit::{mix, Faults, Faulty, Rng, Tally};
use mpiq::{DumpOptions, Format, ProcessSnapshot, Snapshot};
use mpiq_tests::frontends::{artifact, artifacts_dir, cli};
use mpiq_tests::{gdb, Example, Job, Mpi};

/// A case that takes longer than this is a hang. A library that loops
/// while it keeps asking questions is cut by the limits, and one that goes
/// silent by the helper's deadline (2 s): on a quiet machine such a case
/// ends within 3 s, but one took 11.8 s while the 2-core machine also
/// compiled (every round trip waits for a CPU). A real hang never ends.
const HANG: Duration = Duration::from_secs(30);
/// The helper's deadline in the fuzz runs (a library loop is cut after it).
const HELPER_TIMEOUT_MS: u64 = 2000;
/// The per-queue operation limit in the fuzz runs (a looping list hits it
/// quickly instead of after the default 100,000).
const FUZZ_MAX_OPERATIONS: &str = "5000";

// --- the recorded dumps ----------------------------------------------------------------

/// One recorded rank and what a fault-free replay of it gives.
struct Source {
    name: String,
    mpi: Mpi,
    recording: Recording,
    /// Recorded bytes by address (successful reads only).
    pages: BTreeMap<u64, Vec<u8>>,
    /// Addresses of 8-aligned words whose value points into recorded memory.
    pointer_words: Vec<u64>,
    /// Every 8-aligned recorded word address.
    words: Vec<u64>,
    /// Words near what the library walks: the MPI's symbols, the
    /// communicators, and what their pointers point at (4 levels deep).
    hot_words: Vec<u64>,
    /// The hot words that hold pointers into recorded memory.
    hot_pointer_words: Vec<u64>,
    /// The fault-free snapshot, found through the target / named with --dll.
    baseline_found: ProcessSnapshot,
    baseline_user: ProcessSnapshot,
    /// Reads the fault-free dump made.
    baseline_reads: u64,
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}

/// Where recordings are kept between runs, so that a seed reproduces its
/// case: `target/<profile>/mpiq-fuzz/`.
fn recordings_dir() -> PathBuf {
    artifacts_dir().join("mpiq-fuzz")
}

/// The recorded rank `rank` of `example` under `mpi`: from an earlier run
/// if there is one that still replays (`MPIQ_FUZZ_RERECORD=1` makes a new
/// one), else recorded now with the CLI from a new job.
fn source(mpi: Mpi, example: Example, args: &[&str], rank: usize) -> Source {
    let stem = format!("{}-{example}-{}-rank{rank}", mpi.name(), args.join("_"));
    let rec_path = recordings_dir().join(format!("{stem}.recording.json"));
    let live_path = recordings_dir().join(format!("{stem}.live.json"));
    let name = format!("{mpi} {example} rank {rank}");
    if std::env::var_os("MPIQ_FUZZ_RERECORD").is_none() {
        if let (Ok(rec), Ok(live)) = (RecordingFile::load(&rec_path), std::fs::read_to_string(&live_path)) {
            match serde_json::from_str(&live)
                .map_err(|e| e.to_string())
                .and_then(|live| build_source(&name, mpi, rec, live))
            {
                Ok(src) => return src,
                Err(e) => eprintln!("fuzz: recording again {name}: the old recording does not replay: {e}"),
            }
        }
    }
    std::fs::create_dir_all(recordings_dir()).expect("create the recordings directory");
    let mut builder = Job::builder(mpi, example);
    if !args.is_empty() {
        builder = builder.args(args.iter().copied());
    }
    let job = builder.start();
    let pid = job.pid_of(rank);
    let live = cli(&[
        "queues",
        "--pid",
        &pid.to_string(),
        "--json",
        "--all",
        "--record",
        rec_path.to_str().expect("utf-8 path"),
    ]);
    assert!(live.success, "recording {name}:\n{}", live.all());
    assert!(Job::is_running(pid), "rank {pid} was not released after recording");
    drop(job);
    let live: ProcessSnapshot =
        serde_json::from_value(live.json().expect("live JSON")["processes"][0].clone()).expect("a process snapshot");
    std::fs::write(&live_path, serde_json::to_string(&live).expect("JSON")).expect("save the live snapshot");
    let recording = RecordingFile::load(&rec_path).expect("load the recording");
    build_source(&name, mpi, recording, live).unwrap_or_else(|e| panic!("{e}"))
}

/// Checks that a recording replays to its live snapshot and indexes it.
fn build_source(name: &str, mpi: Mpi, file: RecordingFile, live: ProcessSnapshot) -> Result<Source, String> {
    let recording = file.processes.into_iter().next().ok_or("no process in the recording")?;
    let mut pages = BTreeMap::new();
    for m in &recording.memory {
        if let Some(h) = &m.hex {
            pages.insert(m.addr, unhex(h));
        }
    }
    let in_recorded = |v: u64| {
        pages
            .range(..=v)
            .next_back()
            .is_some_and(|(a, b)| v < a + b.len() as u64)
    };
    let mut words = Vec::new();
    let mut pointer_words = Vec::new();
    for (&a, b) in &pages {
        for off in (0..b.len().saturating_sub(7)).step_by(8) {
            let at = a + off as u64;
            if !at.is_multiple_of(8) {
                continue;
            }
            words.push(at);
            let v = u64::from_le_bytes(b[off..off + 8].try_into().expect("8 bytes"));
            if v > 0x10000 && in_recorded(v) {
                pointer_words.push(at);
            }
        }
    }
    // The hot region: from the symbols' addresses, the communicator ids (an
    // address for MPICH) and the hex numbers the library printed, follow
    // pointers four levels deep, 512 bytes of struct at each.
    let word_at = |at: u64| -> Option<u64> {
        let (a, b) = pages.range(..=at).next_back()?;
        let off = usize::try_from(at - a).ok()?;
        Some(u64::from_le_bytes(b.get(off..off + 8)?.try_into().ok()?))
    };
    let mut frontier: Vec<u64> = recording.symbols.values().flatten().copied().collect();
    for c in &live.communicators {
        frontier.extend(u64::from_str_radix(c.id.trim_start_matches("0x"), 16).ok());
        for q in [&c.queues.sends, &c.queues.receives, &c.queues.unexpected] {
            for o in &q.operations {
                frontier.extend(u64::from_str_radix(o.buffer.trim_start_matches("0x"), 16).ok());
                for t in &o.extra_text {
                    frontier.extend(
                        t.split(|ch: char| !ch.is_ascii_hexdigit() && ch != 'x')
                            .filter_map(|w| w.strip_prefix("0x"))
                            .filter_map(|h| u64::from_str_radix(h, 16).ok()),
                    );
                }
            }
        }
    }
    let mut hot = std::collections::BTreeSet::new();
    for _ in 0..4 {
        let mut next = Vec::new();
        for base in frontier.drain(..) {
            for at in (base & !7..(base & !7) + 512).step_by(8) {
                if let Some(v) = word_at(at) {
                    if hot.insert(at) && v > 0x10000 && in_recorded(v) {
                        next.push(v);
                    }
                }
            }
        }
        frontier = next;
    }
    let hot_words: Vec<u64> = hot.into_iter().collect();
    let hot_pointer_words: Vec<u64> = hot_words
        .iter()
        .copied()
        .filter(|&at| word_at(at).is_some_and(|v| v > 0x10000 && in_recorded(v)))
        .collect();
    let mut src = Source {
        name: name.to_string(),
        mpi,
        recording,
        pages,
        pointer_words,
        words,
        hot_words,
        hot_pointer_words,
        baseline_found: live.clone(),
        baseline_user: live.clone(),
        baseline_reads: 0,
    };
    let clean = Plan::default();
    let (found, t) = run_plan(&src, &clean, false);
    let found = found?.map_err(|_| "interrupted")?;
    let (user, _) = run_plan(&src, &clean, true);
    let user = user?.map_err(|_| "interrupted")?;
    if t.seen_failures != 0 || found.error.is_some() || user.error.is_some() || !found.messages.is_empty() {
        return Err(format!("{name}: the fault-free replay failed: {found:#?}\n{user:#?}"));
    }
    if found.communicators != live.communicators {
        return Err(format!("{name}: the replay does not reproduce the live dump"));
    }
    src.baseline_reads = t.reads;
    src.baseline_found = found;
    src.baseline_user = user;
    Ok(src)
}

// --- one case ----------------------------------------------------------------------------

/// What to do to the target in one case: the faults the testkit's
/// injector ([`Faulty`]) puts in front of the replay, and how the library
/// is found.
#[derive(Clone, Debug, Default)]
struct Plan {
    /// Mutated bytes, failing reads and lookups, an interruption.
    faults: Faults,
    /// Name the library with --dll (else the target's MPIR_dll_name etc.).
    user_dll: bool,
}

type Outcome = Result<Result<ProcessSnapshot, mpiq::Interrupted>, String>;

/// Runs the real library of `src` in the helper against the planned target.
fn run_plan(src: &Source, plan: &Plan, user_dll: bool) -> (Outcome, Tally) {
    let replay = Replay::new(src.recording.clone()).expect("a valid recording");
    let faults = Faults {
        log: std::env::var_os("MPIQ_FUZZ_DEBUG").is_some(),
        ..plan.faults.clone()
    };
    let mut target = Faulty::new(replay, faults);
    let opts = DumpOptions {
        dll: user_dll.then(|| src.mpi.debug_library().expect("has a debug library")),
        timeout_ms: Some(HELPER_TIMEOUT_MS),
        ..DumpOptions::default()
    };
    let r = catch_unwind(AssertUnwindSafe(|| mpiq::collect(&mut target, &opts))).map_err(|p| panic_text(&p));
    (r, target.tally)
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic".into())
}

/// Seeds with this bit are systematic cases: source, hot pointer word and
/// variant are in the other bits.
const SYSTEMATIC: u64 = 1 << 63;
/// Hot pointer words tried systematically per source (evenly spread).
const SYSTEMATIC_WORDS: u64 = 150;
/// Systematic variants per word: itself, NULL, the next word, back 16 bytes.
const VARIANTS: u64 = 4;

/// The seed of systematic case `i` (of `SYSTEMATIC_WORDS * VARIANTS` per source).
fn systematic_seed(sources: &[Source], i: u64) -> Option<u64> {
    let per = SYSTEMATIC_WORDS * VARIANTS;
    let s = i / per;
    let src = sources.get(s as usize)?;
    let (w, v) = ((i % per) / VARIANTS, i % VARIANTS);
    let n = src.hot_pointer_words.len() as u64;
    (w < n.min(SYSTEMATIC_WORDS)).then(|| SYSTEMATIC | s << 48 | (w * n / n.min(SYSTEMATIC_WORDS)) << 8 | v)
}

/// The source a seed runs against.
fn source_of(sources: &[Source], seed: u64) -> &Source {
    if seed & SYSTEMATIC != 0 {
        &sources[((seed >> 48) & 0x7fff) as usize]
    } else {
        &sources[(mix(seed) % sources.len() as u64) as usize]
    }
}

/// Builds the plan of case `seed` against `src`.
fn plan(src: &Source, seed: u64) -> Plan {
    if seed & SYSTEMATIC != 0 {
        let at = src.hot_pointer_words[((seed >> 8) & 0xff_ffff) as usize];
        let new = match seed & 0xff {
            0 => at,
            1 => 0,
            2 => at + 8,
            _ => at - 16,
        };
        return Plan {
            faults: Faults {
                patches: vec![(at, new.to_le_bytes().to_vec())],
                ..Faults::default()
            },
            user_dll: seed & 1 == 0,
        };
    }
    let mut rng = Rng(seed);
    // (In this order: the salt is the first number of the seed.)
    let salt = rng.next_u64();
    let user_dll = rng.chance(500);
    let mut p = Plan {
        faults: Faults {
            salt,
            ..Faults::default()
        },
        user_dll,
    };
    let kind = rng.below(100);
    let mutate = kind < 60;
    let faults = kind >= 45;
    if mutate {
        let n = 1 + rng.below(3) + if rng.chance(300) { rng.below(6) } else { 0 };
        for _ in 0..n {
            p.faults.patches.push(mutation(src, &mut rng));
        }
    }
    if faults {
        match rng.below(10) {
            0..=3 => p.faults.fail_from = Some(1 + rng.below(src.baseline_reads + 2)),
            4..=6 => p.faults.page_fail_per_mille = 30 + rng.below(500),
            7..=8 => p.faults.lookup_fail_per_mille = 5 + rng.below(150),
            _ => p.faults.interrupt_at = Some(1 + rng.below(src.baseline_reads + 1)),
        }
    }
    p
}

fn read_word(src: &Source, at: u64) -> u64 {
    let (a, b) = src.pages.range(..=at).next_back().expect("a recorded word");
    let off = (at - a) as usize;
    u64::from_le_bytes(b[off..off + 8].try_into().expect("8 bytes"))
}

/// One mutation: (address, new bytes).
fn mutation(src: &Source, rng: &mut Rng) -> (u64, Vec<u8>) {
    let pointer_at = |rng: &mut Rng| {
        if !src.hot_pointer_words.is_empty() && rng.chance(750) {
            *rng.pick(&src.hot_pointer_words)
        } else if src.pointer_words.is_empty() {
            *rng.pick(&src.words)
        } else {
            *rng.pick(&src.pointer_words)
        }
    };
    let word_at = |rng: &mut Rng| {
        if !src.hot_words.is_empty() && rng.chance(750) {
            *rng.pick(&src.hot_words)
        } else {
            *rng.pick(&src.words)
        }
    };
    match rng.below(100) {
        // A pointer redirected.
        0..=44 => {
            let at = pointer_at(rng);
            let old = read_word(src, at);
            let new = match rng.below(8) {
                0 => at,                                       // points at itself
                1 => at.wrapping_sub(8 * (1 + rng.below(16))), // back into its own struct: a loop
                2 => old.wrapping_add(8 * (1 + rng.below(32))),
                3 => old.wrapping_sub(8 * (1 + rng.below(32))),
                4 => read_word(src, pointer_at(rng)), // another pointer's target: cross links
                5 => pointer_at(rng),                 // at another pointer
                6 => 0,
                _ => {
                    let (r, bit) = (rng.next_u64(), 1 << rng.below(48));
                    *rng.pick(&[u64::MAX, 1, 0xdead_beef, r, old ^ bit])
                }
            };
            (at, new.to_le_bytes().to_vec())
        }
        // A word (count, size, rank, flag) replaced by an extreme.
        45..=64 => {
            let at = word_at(rng);
            let r = rng.next_u64();
            let v: u64 = *rng.pick(&[0, 1, u64::MAX, i64::MAX as u64, 1 << 31, 0xffff_ffff, 1 << 40, r]);
            (at, v.to_le_bytes().to_vec())
        }
        // A 32-bit int (a rank, a tag, a count) replaced by an extreme.
        65..=79 => {
            let at = word_at(rng) + 4 * rng.below(2);
            let r = rng.next_u64() as u32;
            let v: u32 = *rng.pick(&[0, 1, u32::MAX, i32::MAX as u32, 1 << 31, 65536, 4096, r]);
            (at, v.to_le_bytes().to_vec())
        }
        // A bit flipped.
        _ => {
            let at = if rng.chance(500) {
                pointer_at(rng) + rng.below(8)
            } else {
                word_at(rng) + rng.below(8)
            };
            let (a, b) = src.pages.range(..=at).next_back().expect("recorded");
            let byte = b[(at - a) as usize] ^ (1 << rng.below(8));
            (at, vec![byte])
        }
    }
}

/// How a case ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Verdict {
    /// The same snapshot as without faults.
    SameAsBaseline,
    /// Different, and the snapshot says something could not be read.
    Marked,
    /// Different because of mutated data, with no failed read or lookup (a
    /// corrupt pointer that reads as the end of a list cannot be told from it).
    ChangedSilently,
    LibraryCrash,
    LibraryTimeout,
    Interrupted,
    Refused,
}

/// Failures of a case (empty: it passed), and how it ended.
fn check_case(src: &Source, seed: u64) -> (Vec<String>, Option<Verdict>, Duration, bool) {
    let plan = plan(src, seed);
    let start = Instant::now();
    let (outcome, tally) = run_plan(src, &plan, plan.user_dll);
    let elapsed = start.elapsed();
    let mut bad = Vec::new();
    let limit_hit;
    if elapsed > HANG {
        bad.push(format!("took {elapsed:?}: a hang"));
    }
    let verdict = match outcome {
        Err(panic) => {
            bad.push(format!("mpiq panicked: {panic}"));
            return (bad, None, elapsed, false);
        }
        Ok(Err(mpiq::Interrupted)) => {
            if !tally.interrupted {
                bad.push("the dump says it was interrupted, but no interruption was injected".into());
            }
            return (bad, Some(Verdict::Interrupted), elapsed, false);
        }
        Ok(Ok(snap)) => {
            if tally.interrupted {
                bad.push(format!("an interruption was injected, but the dump went on: {snap:?}"));
            }
            let baseline = if plan.user_dll {
                &src.baseline_user
            } else {
                &src.baseline_found
            };
            if let Err(e) = check_snapshot(&snap) {
                bad.push(e);
            }
            limit_hit = snap.messages.iter().any(|m| m.contains("stopped after"))
                || queues(&snap).any(|q| q.reason.as_deref().is_some_and(|r| r.contains("stopped after")));
            let error = snap.error.clone().unwrap_or_default();
            if error.contains("crashed") {
                Verdict::LibraryCrash
            } else if error.contains("did not answer") {
                Verdict::LibraryTimeout
            } else if snap == *baseline {
                Verdict::SameAsBaseline
            } else if is_marked(&snap, baseline) {
                if snap.dll.is_none() {
                    Verdict::Refused
                } else {
                    Verdict::Marked
                }
            } else {
                if tally.seen_failures + tally.failed_lookups > 0 && !mutations_alone(src, &plan, &snap) {
                    bad.push(format!(
                        "{} read(s) and {} lookup(s) failed, the result differs from the fault-free one, \
                         and nothing says so:\n{}",
                        tally.seen_failures,
                        tally.failed_lookups,
                        diff(baseline, &snap)
                    ));
                }
                Verdict::ChangedSilently
            }
        }
    };
    (bad, Some(verdict), elapsed, limit_hit)
}

/// Whether the mutations of `plan` alone, with no read or lookup failing,
/// give the same snapshot `snap`: then its failures changed nothing (a
/// lookup the dump did not need, such as `mpiq_recorder` in a process
/// without the recorder), and its difference from the fault-free one is the
/// mutated data's, which no reader can tell from true data (seen in CI: 20
/// operations read as 6 with pointers patched and the recorder's lookup
/// failed).
fn mutations_alone(src: &Source, plan: &Plan, snap: &ProcessSnapshot) -> bool {
    if plan.faults.patches.is_empty() {
        return false;
    }
    let only = Plan {
        faults: Faults {
            patches: plan.faults.patches.clone(),
            salt: plan.faults.salt,
            ..Faults::default()
        },
        user_dll: plan.user_dll,
    };
    matches!(run_plan(src, &only, only.user_dll), (Ok(Ok(alone)), _) if alone == *snap)
}

fn queues(p: &ProcessSnapshot) -> impl Iterator<Item = &mpiq::Queue> {
    p.communicators
        .iter()
        .flat_map(|c| [&c.queues.sends, &c.queues.receives, &c.queues.unexpected])
}

/// Whether `p` says that something could not be read (compared with the
/// fault-free `baseline`, where Open MPI's unexpected queue is "not
/// available" too).
fn is_marked(p: &ProcessSnapshot, baseline: &ProcessSnapshot) -> bool {
    let normal: Vec<&str> = queues(baseline).filter_map(|q| q.reason.as_deref()).collect();
    p.error.is_some()
        || p.messages.len() > baseline.messages.len()
        || queues(p).any(|q| (q.incomplete || !q.available) && !normal.contains(&q.reason.as_deref().unwrap_or("")))
}

/// The largest MPI_COMM_WORLD the fuzz test lets the analysis see (see
/// [`check_snapshot`]).
const MAX_ANALYSED_WORLD: i64 = 1 << 18;
/// Snapshots analysed despite a corrupt (implausibly large) world size.
static ANALYSIS_SKIPPED: AtomicU64 = AtomicU64::new(0);

/// The job size the analysis would take from `p`: the size of
/// MPI_COMM_WORLD (or MPICH's MPI_ICOMM_WORLD), else the world rank + 1.
fn world_size(p: &ProcessSnapshot) -> Option<i64> {
    p.communicators
        .iter()
        .filter(|c| c.name == "MPI_COMM_WORLD" || c.name == "MPI_ICOMM_WORLD")
        .filter_map(|c| c.size)
        .chain(p.world_rank.map(|r| i64::from(r) + 1))
        .max()
}

/// The snapshot is valid data: a JSON round trip keeps it, every renderer and
/// the analysis take it, and its queues are consistent.
fn check_snapshot(p: &ProcessSnapshot) -> Result<(), String> {
    let json = serde_json::to_string(p).map_err(|e| format!("not serializable: {e}"))?;
    let back: ProcessSnapshot = serde_json::from_str(&json).map_err(|e| format!("JSON does not read back: {e}"))?;
    if back != *p {
        return Err("the JSON round trip changed the snapshot".into());
    }
    for q in queues(p) {
        if (q.incomplete || !q.available) && q.reason.is_none() {
            return Err(format!(
                "a queue is incomplete or not available without a reason: {q:?}"
            ));
        }
        if !q.available && !q.operations.is_empty() {
            return Err(format!("a queue is not available but has operations: {q:?}"));
        }
    }
    let snapshot = Snapshot {
        processes: vec![p.clone()],
        ..Snapshot::default()
    };
    catch_unwind(|| {
        for format in [Format::Text, Format::Json] {
            for all in [false, true] {
                let opts = DumpOptions {
                    format,
                    all,
                    ..DumpOptions::default()
                };
                let _ = mpiq::render(&snapshot, &opts);
            }
        }
        // A corrupt MPI_COMM_WORLD size or world rank once made the analysis
        // size the job from it (24 GB here); it must now stay bounded.
        if world_size(p).is_some_and(|n| n > MAX_ANALYSED_WORLD) {
            ANALYSIS_SKIPPED.fetch_add(1, Ordering::Relaxed);
        }
        let a = mpiq::analysis::analyze(&snapshot, None);
        let _ = mpiq::render::verdict::render_text(&a);
    })
    .map_err(|e| format!("rendering or analysing the snapshot panicked: {}", panic_text(&e)))
}

/// A short description of how `b` differs from `a`.
fn diff(a: &ProcessSnapshot, b: &ProcessSnapshot) -> String {
    let mut s = String::new();
    let count = |p: &ProcessSnapshot| queues(p).map(|q| q.operations.len()).sum::<usize>();
    let _ = writeln!(
        s,
        "  fault-free: {} communicators, {} operations; this run: {} communicators, {} operations",
        a.communicators.len(),
        count(a),
        b.communicators.len(),
        count(b)
    );
    let _ = writeln!(s, "  error: {:?}\n  messages: {:?}", b.error, b.messages);
    s
}

// --- the run ---------------------------------------------------------------------------

fn log_len(path: &std::path::Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

#[test]
fn real_libraries_survive_corrupt_memory_and_failing_reads() {
    gdb::require_ptrace();
    // The helper inherits these. Only this test runs in this binary, and no
    // thread of it reads the environment yet.
    // The helper runs through a wrapper that sends its standard error (and
    // the libraries' chatter) to a log, where an abort or panic of mpiq's
    // own code in the helper shows: "memory allocation of N bytes failed",
    // "panicked at". The helper would otherwise count as a crashed library.
    let host = std::env::var_os("MPIQ_DLLHOST").map_or_else(|| artifact("mpiq-dllhost"), PathBuf::from);
    std::fs::create_dir_all(recordings_dir()).expect("create the fuzz directory");
    let helper_log = recordings_dir().join(format!("helper-stderr-{}.log", std::process::id()));
    let wrapper = recordings_dir().join(format!("dllhost-{}.sh", std::process::id()));
    std::fs::write(&helper_log, b"").expect("create the helper log");
    std::fs::write(
        &wrapper,
        format!("#!/bin/sh\nexec '{}' 2>>'{}'\n", host.display(), helper_log.display()),
    )
    .expect("write the helper wrapper");
    std::fs::set_permissions(&wrapper, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    std::env::set_var("MPIQ_DLLHOST", &wrapper);
    if std::env::var_os("MPIQ_MAX_OPERATIONS").is_none() {
        std::env::set_var("MPIQ_MAX_OPERATIONS", FUZZ_MAX_OPERATIONS);
    }
    let cases = env_u64("MPIQ_FUZZ_CASES", 6000);
    let base_seed = env_u64("MPIQ_FUZZ_SEED", 0x6d70_6971_f022);
    let threads = env_u64("MPIQ_FUZZ_THREADS", 2).max(1) as usize;

    let t0 = Instant::now();
    let specs: Vec<(Mpi, Example, &[&str], usize)> = vec![
        (Mpi::OpenMpi, Example::NamedComms, &[], 0),
        (Mpi::OpenMpi, Example::ManyOps, &["20"], 1),
        (Mpi::Mpich, Example::NamedComms, &[], 0),
        (Mpi::Mpich, Example::Unexpected, &[], 1),
        (Mpi::Mpich, Example::ManyOps, &["20"], 0),
    ];
    let sources: Vec<Source> = std::thread::scope(|s| {
        let handles: Vec<_> = specs
            .iter()
            .map(|&(mpi, ex, args, rank)| s.spawn(move || source(mpi, ex, args, rank)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|e| panic!("recording failed: {}", panic_text(&e)))
            })
            .collect()
    });
    let recorded_in = t0.elapsed();
    for s in &sources {
        eprintln!(
            "fuzz: source {}: {} reads, {} pages, {} pointer words ({} hot), {} communicators",
            s.name,
            s.baseline_reads,
            s.pages.len(),
            s.pointer_words.len(),
            s.hot_pointer_words.len(),
            s.baseline_found.communicators.len()
        );
    }

    // A case that never returns cannot be failed from here: a watchdog ends
    // the whole test with the seed.
    let running: Mutex<BTreeMap<usize, (u64, Instant)>> = Mutex::new(BTreeMap::new());
    let next = AtomicU64::new(0);
    let done = AtomicUsize::new(0);
    let verdicts: Mutex<BTreeMap<(String, Verdict), u64>> = Mutex::new(BTreeMap::new());
    let failures: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let limits = AtomicU64::new(0);
    let slowest = Mutex::new((Duration::ZERO, 0u64));
    // Per case: the helper log's length before and after, its seed and source.
    let spans: Mutex<Vec<(u64, u64, u64, String)>> = Mutex::new(Vec::new());
    // First every hot pointer word of every source, systematically (unless
    // one case is asked for), then random cases.
    let systematic: Vec<u64> = if cases == 1 {
        Vec::new()
    } else {
        (0..sources.len() as u64 * SYSTEMATIC_WORDS * VARIANTS)
            .filter_map(|i| systematic_seed(&sources, i))
            .collect()
    };
    let cases = cases + systematic.len() as u64;
    let systematic = &systematic;
    let t1 = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| {
            while done.load(Ordering::SeqCst) < threads {
                std::thread::sleep(Duration::from_millis(200));
                let stuck = running
                    .lock()
                    .unwrap()
                    .values()
                    .find(|(_, t)| t.elapsed() > Duration::from_secs(120))
                    .copied();
                if let Some((seed, _)) = stuck {
                    eprintln!("fuzz: case seed {seed:#x} has run for 2 minutes: a hang; stopping");
                    std::process::exit(101);
                }
            }
        });
        for worker in 0..threads {
            let (running, next, done, verdicts, failures, limits, slowest, sources, spans, helper_log) = (
                &running,
                &next,
                &done,
                &verdicts,
                &failures,
                &limits,
                &slowest,
                &sources,
                &spans,
                &helper_log,
            );
            s.spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= cases {
                        break;
                    }
                    let seed = if cases == 1 {
                        base_seed
                    } else if i < systematic.len() as u64 {
                        systematic[i as usize]
                    } else {
                        mix(mix(base_seed).wrapping_add(i)) & !SYSTEMATIC
                    };
                    let src = source_of(sources, seed);
                    running.lock().unwrap().insert(worker, (seed, Instant::now()));
                    if std::env::var_os("MPIQ_FUZZ_DEBUG").is_some() {
                        eprintln!("fuzz: case {i} seed {seed:#x} {}: starting", src.name);
                    }
                    let log_before = log_len(helper_log);
                    let (bad, verdict, elapsed, limit_hit) = catch_unwind(AssertUnwindSafe(|| check_case(src, seed)))
                        .unwrap_or_else(|p| {
                            (
                                vec![format!("the fuzz harness panicked: {}", panic_text(&p))],
                                None,
                                Duration::ZERO,
                                false,
                            )
                        });
                    running.lock().unwrap().remove(&worker);
                    spans
                        .lock()
                        .unwrap()
                        .push((log_before, log_len(helper_log), seed, src.name.clone()));
                    if limit_hit {
                        limits.fetch_add(1, Ordering::Relaxed);
                    }
                    {
                        let mut sl = slowest.lock().unwrap();
                        if elapsed > sl.0 {
                            *sl = (elapsed, seed);
                        }
                    }
                    if std::env::var_os("MPIQ_FUZZ_DEBUG").is_some() {
                        eprintln!(
                            "fuzz: case {i} seed {seed:#x} {}: {verdict:?} in {elapsed:.1?}",
                            src.name
                        );
                    }
                    if let Some(v) = verdict {
                        *verdicts.lock().unwrap().entry((src.name.clone(), v)).or_default() += 1;
                    }
                    if !bad.is_empty() {
                        failures.lock().unwrap().push(format!(
                            "{} case seed {seed:#x} (MPIQ_FUZZ_CASES=1 MPIQ_FUZZ_SEED={seed}):\n{}\n  plan: {:?}",
                            src.name,
                            bad.join("\n"),
                            plan(src, seed)
                        ));
                    }
                }
                done.fetch_add(1, Ordering::SeqCst);
            });
        }
    });
    let ran_in = t1.elapsed();

    let verdicts = verdicts.into_inner().unwrap();
    let mut failures = failures.into_inner().unwrap();
    // mpiq's own failures in the helper, with the cases running when they
    // were logged.
    let log = std::fs::read(&helper_log).unwrap_or_default();
    let spans = spans.into_inner().unwrap();
    let mut helper_failures = 0u64;
    let mut at = 0usize;
    for line in log.split(|&b| b == b'\n') {
        let start = at as u64;
        at += line.len() + 1;
        let text = String::from_utf8_lossy(line);
        if [
            "memory allocation of",
            "panicked at",
            "mpiq-dllhost:",
            "fatal runtime error",
        ]
        .iter()
        .any(|sig| text.contains(sig))
        {
            helper_failures += 1;
            let cases: Vec<String> = spans
                .iter()
                .filter(|(b, e, _, _)| (*b..*e).contains(&start))
                .map(|(_, _, seed, name)| format!("{name} seed {seed:#x} (MPIQ_FUZZ_SEED={seed})"))
                .collect();
            failures.push(format!(
                "mpiq panicked in the helper: {text}\n  while running: {}",
                cases.join(" or ")
            ));
        }
    }
    let _ = std::fs::remove_file(&wrapper);
    if failures.is_empty() {
        let _ = std::fs::remove_file(&helper_log);
    }
    let total = |v: Verdict| {
        verdicts
            .iter()
            .filter(|((_, k), _)| *k == v)
            .map(|(_, n)| n)
            .sum::<u64>()
    };
    let panics = failures.iter().filter(|f| f.contains("mpiq panicked")).count();
    let hangs = failures.iter().filter(|f| f.contains("a hang")).count();
    let (slow, slow_seed) = *slowest.lock().unwrap();
    let mut report = format!(
        "fuzz: {cases} cases ({} systematic) in {ran_in:.1?} on {threads} threads (recording {recorded_in:.1?}); \
         same as fault-free {}, partial and marked {}, changed by mutations alone {}, refused {}, interrupted {}, \
         library crashes contained {}, library loops cut by the deadline {}, limits hit {}; \
         mpiq panics {panics}, hangs {hangs}, other failures {}; slowest case {slow:.1?} (seed {slow_seed:#x}); \
         analysed with a corrupt MPI_COMM_WORLD size {}\n",
        systematic.len(),
        total(Verdict::SameAsBaseline),
        total(Verdict::Marked),
        total(Verdict::ChangedSilently),
        total(Verdict::Refused),
        total(Verdict::Interrupted),
        total(Verdict::LibraryCrash) - helper_failures.min(total(Verdict::LibraryCrash)),
        total(Verdict::LibraryTimeout),
        limits.load(Ordering::Relaxed),
        failures.len() - panics - hangs,
        ANALYSIS_SKIPPED.load(Ordering::Relaxed),
    );
    for ((name, v), n) in &verdicts {
        let _ = writeln!(report, "fuzz:   {name}: {v:?} {n}");
    }
    eprint!("{report}");
    if let Ok(dir) = std::env::var("MPIQ_FUZZ_REPORT") {
        let _ = std::fs::write(PathBuf::from(dir), &report);
    }
    assert!(
        failures.is_empty(),
        "{} failing case(s); the first ones:\n{}",
        failures.len(),
        failures.iter().take(8).cloned().collect::<Vec<_>>().join("\n\n")
    );
}
