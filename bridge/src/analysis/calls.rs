//! Where each rank is, from its call stacks, and what its blocking MPI calls
//! wait for: the wait groups of the verdict (docs/design/stacks.md §5).
//!
//! - A rank with an application thread that is computing (in its own code,
//!   or sleeping with a timeout) can still act: it is free.
//! - A rank blocked outside MPI (`pause()`, `pthread_join`), or whose stacks
//!   are unknown, waits as its queues say (the analysis without stacks).
//! - A rank inside a blocking MPI call waits as that call says: a receive or
//!   send for its operation, `MPI_Wait(all)` for all of them (one group),
//!   `MPI_Waitany`/`Waitsome` for any one (a group each), a collective on
//!   communicator C for every member of C not in a collective on C, a
//!   synchronous send the queues do not list for its receiver to post a
//!   matching receive. Threads are alternatives (a group each).

use std::collections::{BTreeMap, BTreeSet};

use super::groups::CommIds;
use super::job::{comm_words, member, translate, Job};
use super::matching::{msg_source, Target, Wait};
use super::model::OpKind;
use super::words::{ranks_words, tag_words};
use crate::snapshot::model::{MpiCall, Operation, ProcessSnapshot, QueueKind, Snapshot, Status};
use crate::stacks::names::{CallClass, Completion};
use crate::stacks::position::{asleep_outside, blocked_outside, c_name, position, Position};

/// Where a rank is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// No stacks: why.
    NoStacks(String),
    /// An application thread runs (or sleeps with a timeout): where.
    Computing(String),
    /// Every application thread is blocked outside MPI: in what.
    Idle(String),
    /// Application threads in blocking MPI calls.
    InMpi(Vec<Call>),
    /// An application thread in the MPI library, in a call its stack
    /// cannot name (no entry-point frame): where, in words.
    InMpiUnnamed(String),
}

/// One application thread's blocking MPI call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Call {
    /// The thread.
    pub tid: u64,
    /// Canonical name (`barrier`).
    pub name: String,
    /// What it waits for.
    pub class: CallClass,
    /// The application frame that called it.
    pub caller: Option<String>,
    /// Index of its communicator in the process's list, when recovered.
    pub comm: Option<usize>,
    /// What its arguments say, when the front end could read them.
    pub args: Option<MpiCall>,
    /// The call as a Python program wrote it (`comm.bcast`).
    pub python_call: Option<String>,
    /// A Python program past its script: how its stack says it came
    /// there (`Position::InMpi::python_exit`).
    pub python_exit: Option<crate::stacks::python::PythonExit>,
    /// The application's call into another library that makes this MPI
    /// call (`Position::InMpi::through`).
    pub through: Option<crate::stacks::position::Through>,
}

/// The place of every rank with a process in the snapshot.
pub(crate) fn places(snap: &Snapshot, job: &Job) -> BTreeMap<i64, Place> {
    job.procs
        .iter()
        .map(|(&r, &pi)| (r, place(&snap.processes[pi])))
        .collect()
}

fn place(p: &ProcessSnapshot) -> Place {
    let Some(st) = &p.stacks else {
        return Place::NoStacks("its call stacks were not read".into());
    };
    if st.threads.is_empty() {
        return Place::NoStacks(st.missing.clone().unwrap_or_else(|| "no thread was listed".into()));
    }
    let mut calls = Vec::new();
    let mut computing = None;
    let mut idle = None;
    let mut unnamed = None;
    for t in &st.threads {
        match position(t) {
            Position::Runtime => {}
            Position::NotInMpi { at } => {
                let called = at.map(|a| format!(", called from {a}")).unwrap_or_default();
                // The kernel's word for the main thread (the state of
                // /proc/PID/stat is its own): asleep in any call.
                let os =
                    p.os.as_ref()
                        .filter(|_| p.pid.is_some_and(|pid| u64::from(pid) == t.tid));
                let asleep = os.and_then(|os| asleep_outside(t, os));
                // The kernel says it runs: a call it is in that could
                // block (a read) returns, and is called again (a large
                // file read from the page cache); it is busy, not blocked.
                let running = os.is_some_and(|os| os.state == "R");
                let blocked = if running { None } else { blocked_outside(t) };
                match blocked.or(asleep) {
                    Some(what) => {
                        idle.get_or_insert_with(|| format!("{what}{called}"));
                    }
                    None => {
                        let top = t
                            .frames
                            .first()
                            .and_then(|f| f.function.as_deref())
                            .map(|n| n.trim_start_matches('_').to_string())
                            .unwrap_or_else(|| "its own code".into());
                        computing.get_or_insert(format!("{top}{called}"));
                    }
                }
            }
            Position::InMpiLibrary { library, caller } => {
                let called = caller.map(|a| format!(", called from {a}")).unwrap_or_default();
                unnamed.get_or_insert(format!("{library}{called}"));
            }
            Position::InMpi {
                call,
                class,
                caller,
                python_call,
                python_exit,
                through,
                ..
            } => {
                if !class.blocks() {
                    computing.get_or_insert(format!("{} (returns at once)", c_name(&call)));
                    continue;
                }
                let args = st.calls.iter().find(|c| c.tid == t.tid).cloned();
                let comm = args
                    .as_ref()
                    .and_then(|a| a.communicator.as_ref())
                    .and_then(|id| p.communicators.iter().position(|c| &c.id == id));
                calls.push(Call {
                    tid: t.tid,
                    name: call,
                    class,
                    caller,
                    comm,
                    args,
                    python_call,
                    python_exit,
                    through,
                });
            }
        }
    }
    if let Some(at) = computing {
        Place::Computing(at)
    } else if let Some(at) = unnamed {
        // What it waits for (if anything) is unknown: never counted as
        // blocked, never as free.
        Place::InMpiUnnamed(at)
    } else if !calls.is_empty() {
        Place::InMpi(calls)
    } else if let Some(what) = idle {
        Place::Idle(what)
    } else {
        Place::NoStacks("no application thread was found in its stacks".into())
    }
}

/// The calls of a place, in a form two samples can compare.
fn call_keys(p: &Place) -> Option<Vec<CallKey>> {
    match p {
        Place::InMpi(calls) => Some(keys(calls)),
        _ => None,
    }
}

/// What two samples compare of a call: thread, call, caller (the
/// application's call into a library, for a call made through one), and the
/// digest of the calling frames ([`crate::stacks::state`]).
type CallKey = (u64, String, Option<String>, Option<String>);

fn keys(calls: &[Call]) -> Vec<CallKey> {
    calls
        .iter()
        .map(|c| {
            let state = c.args.as_ref().and_then(|a| a.state.clone());
            // Through a library, the application's call into it: two calls
            // from different places of the application may share the
            // library's internal caller.
            let at = c.through.as_ref().map(|v| v.words()).or_else(|| c.caller.clone());
            (c.tid, c.name.clone(), at, state)
        })
        .collect()
}

/// Whether two samples show the same calls (thread, call, caller), with
/// the same calling frames' contents.
pub(crate) fn same_calls(now: &[Call], then: &[Call]) -> bool {
    keys(now) == keys(then)
}

/// Ranks whose position differs from the previous sample's: they moved.
pub(crate) fn moved(now: &BTreeMap<i64, Place>, before: &BTreeMap<i64, Place>) -> BTreeMap<i64, String> {
    let mut out = BTreeMap::new();
    for (r, p) in now {
        let Some(b) = before.get(r) else { continue };
        if matches!(p, Place::NoStacks(_)) || matches!(b, Place::NoStacks(_)) {
            continue;
        }
        let (kn, kb) = (call_keys(p), call_keys(b));
        if kn == kb {
            continue;
        }
        let strip = |k: &Option<Vec<CallKey>>| -> Option<Vec<CallKey>> {
            k.as_ref()
                .map(|v| v.iter().map(|(t, n, c, _)| (*t, n.clone(), c.clone(), None)).collect())
        };
        let why = if strip(&kn) == strip(&kb) {
            format!(
                "it is in {} in both samples, but its calling frames changed between them (it went \
                 round and came back)",
                short(p)
            )
        } else {
            format!("it moved from {} to {}", short(b), short(p))
        };
        out.insert(*r, why);
    }
    out
}

/// Fills what a call's arguments lack now from the previous sample, where
/// that sample shows the rank in the same call with the same calling
/// frames' contents (an equal digest, [`crate::stacks::state`]): the same
/// frames passed the same arguments. A thread stopped where the compiler
/// no longer keeps `comm` (MPICH's `internal_Iprobe` after its
/// `MPID_Iprobe` returned) has its communicator from the sample that
/// caught it earlier in the call. Only a previous reading that agrees with
/// every value read now and recovers more replaces it.
pub(crate) fn carry_args(now: &mut BTreeMap<i64, Place>, before: &BTreeMap<i64, Place>, snap: &Snapshot, job: &Job) {
    for (r, place) in now.iter_mut() {
        let (Place::InMpi(calls), Some(Place::InMpi(then))) = (place, before.get(r)) else {
            continue;
        };
        if !same_calls(calls, then) {
            continue;
        }
        let Some(p) = job.procs.get(r).and_then(|&pi| snap.processes.get(pi)) else {
            continue;
        };
        for (c, t) in calls.iter_mut().zip(then) {
            let (Some(a), Some(b)) = (&c.args, &t.args) else {
                continue;
            };
            if a.state.is_none() || !recovers_more(b, a) {
                continue;
            }
            let mut better = b.clone();
            better.state = a.state.clone();
            c.comm = better
                .communicator
                .as_ref()
                .and_then(|id| p.communicators.iter().position(|k| &k.id == id));
            c.args = Some(better);
        }
    }
}

/// Whether `more` has every argument `less` has, with the same value, and
/// at least one more.
fn recovers_more(more: &MpiCall, less: &MpiCall) -> bool {
    fn cmp<T: PartialEq>(m: &Option<T>, l: &Option<T>, extra: &mut bool) -> bool {
        match (m, l) {
            (Some(x), Some(y)) => x == y,
            (Some(_), None) => {
                *extra = true;
                true
            }
            (None, Some(_)) => false,
            (None, None) => true,
        }
    }
    let mut extra = false;
    let flags = |c: &MpiCall| (c.any_source.then_some(()), c.any_tag.then_some(()));
    let ((ms, mt), (ls, lt)) = (flags(more), flags(less));
    more.call == less.call
        && more.tid == less.tid
        && cmp(&more.communicator, &less.communicator, &mut extra)
        && cmp(&more.comm_handle, &less.comm_handle, &mut extra)
        && cmp(&more.peer, &less.peer, &mut extra)
        && cmp(&ms, &ls, &mut extra)
        && cmp(&more.tag, &less.tag, &mut extra)
        && cmp(&mt, &lt, &mut extra)
        && cmp(&more.root, &less.root, &mut extra)
        && cmp(&more.buffer, &less.buffer, &mut extra)
        && extra
}

/// A place in a few words, for "moved from ... to ...".
fn short(p: &Place) -> String {
    match p {
        Place::NoStacks(_) => "an unknown place".into(),
        Place::Computing(_) => "computing".into(),
        Place::Idle(what) => format!("waiting outside MPI in {what}"),
        Place::InMpiUnnamed(_) => "a call without a symbol in the MPI library".into(),
        Place::InMpi(calls) => calls
            .iter()
            .map(|c| match (&c.through, &c.caller) {
                (Some(via), _) => format!("{} > {}", via.words(), c_name(&c.name)),
                (None, Some(at)) => format!("{} from {at}", c_name(&c.name)),
                (None, None) => c_name(&c.name),
            })
            .collect::<Vec<_>>()
            .join(" and "),
    }
}

/// The waits the verdict reduces, and the ranks free whatever they wait for.
#[derive(Debug, Default)]
pub(crate) struct Grouped {
    /// The waits, in groups.
    pub waits: Vec<Wait>,
    /// Ranks computing, or in a blocking call already satisfied.
    pub free: BTreeSet<i64>,
    /// Ranks free only if the best is assumed (a collective waits for them
    /// but their stacks are unknown), with the reason.
    pub maybe: BTreeMap<i64, String>,
}

/// What the analysis knows, for grouping.
pub(crate) struct Scene<'a> {
    pub snap: &'a Snapshot,
    pub job: &'a Job,
    pub ids: &'a CommIds,
    pub places: &'a BTreeMap<i64, Place>,
    /// The previous sample confirms this rank's position.
    pub confirmed: &'a dyn Fn(i64) -> bool,
    /// Ranks stopped by a signal in either sample.
    pub stopped: &'a BTreeSet<i64>,
    /// The members absent from each collective, found once for all its ranks.
    pub absents: std::cell::RefCell<collective::Absents>,
}

/// Turns the queue waits into groups by where each rank is.
pub(crate) fn group(scene: &Scene<'_>, queue_waits: Vec<Wait>) -> Grouped {
    let mut by_rank: BTreeMap<i64, Vec<Wait>> = BTreeMap::new();
    for w in queue_waits {
        by_rank.entry(w.rank).or_default().push(w);
    }
    let mut out = Grouped::default();
    for (&r, place) in scene.places {
        let mine = by_rank.remove(&r).unwrap_or_default();
        match place {
            Place::Computing(_) => {
                out.free.insert(r);
                out.waits.extend(mine); // shown; the rank is free anyway
            }
            Place::Idle(what) if !mine.is_empty() && !known_blocking(scene, r) => {
                // Asleep outside MPI, by the kernel's word, in a call no
                // list knows (an open() that never returns), with
                // operations posted: whether it returns to them is not
                // known, so it is free in the best case only, and never
                // part of a deadlock. (A rank in pause() or pthread_join()
                // waits for another party: its queues keep their verdict.)
                out.maybe.insert(r, idle_words(r, what));
                out.waits.extend(mine);
            }
            Place::NoStacks(_) | Place::Idle(_) | Place::InMpiUnnamed(_) => out.waits.extend(mine),
            Place::InMpi(calls) => {
                let mut groups: Vec<Vec<Wait>> = Vec::new();
                for call in calls {
                    groups.extend(call_groups(scene, r, call, &mine, &mut out.maybe));
                }
                // A call with nothing left to wait for has completed: the
                // rank is free. Not so when its queues could not be read:
                // nothing listed is then nothing known.
                if groups.iter().any(Vec::is_empty) && scene.job.is_readable(r) {
                    out.free.insert(r);
                }
                for (g, waits) in groups.into_iter().enumerate() {
                    for mut w in waits {
                        w.group = u32::try_from(g).unwrap_or(u32::MAX);
                        out.waits.push(w);
                    }
                }
            }
        }
    }
    // Ranks without a place (not in the snapshot) keep nothing to wait on.
    for (_, rest) in by_rank {
        out.waits.extend(rest);
    }
    // A rank stopped by a signal does nothing until it is continued, and
    // then may well go on: free only in the best case, whatever it waits for.
    for &r in scene.stopped {
        if scene.places.contains_key(&r) {
            out.free.remove(&r);
            out.maybe.insert(r, stopped_words(r));
        }
    }
    out
}

/// Whether a thread of `rank` is in a call [`blocked_outside`] knows
/// (`pause`, `pthread_join`, `read`): one that waits for another party.
fn known_blocking(scene: &Scene<'_>, rank: i64) -> bool {
    scene
        .job
        .procs
        .get(&rank)
        .and_then(|&pi| scene.snap.processes[pi].stacks.as_ref())
        .is_some_and(|st| st.threads.iter().any(|t| blocked_outside(t).is_some()))
}

/// Why a rank blocked outside MPI with operations posted is free only in
/// the best case.
pub(crate) fn idle_words(rank: i64, what: &str) -> String {
    format!(
        "rank {rank} is blocked outside MPI in {what}, with MPI operations posted: whether it comes back to \
         them is not known, so it is no deadlock"
    )
}

/// Why a rank stopped by a signal is free only in the best case.
pub(crate) fn stopped_words(rank: i64) -> String {
    format!(
        "rank {rank} is stopped by a signal (state T: SIGSTOP, SIGTSTP or Ctrl-Z), not by MPI: it does nothing \
         until it is continued (SIGCONT), and it is no deadlock"
    )
}

/// The operation behind a queue wait.
fn op_of<'s>(snap: &'s Snapshot, w: &Wait) -> Option<&'s Operation> {
    let at = w.at?;
    snap.processes
        .get(at.process)?
        .communicators
        .get(at.comm)?
        .queues
        .get(at.queue)
        .operations
        .get(at.op)
}

/// The queue waits of `mine` that belong to `call`: by its buffer, else by
/// communicator, peer and tag, else all of the kinds it waits on.
fn tied(scene: &Scene<'_>, call: &Call, mine: &[Wait], kinds: &[OpKind]) -> Vec<Wait> {
    let of_kind: Vec<&Wait> = mine.iter().filter(|w| kinds.contains(&w.op)).collect();
    if let Some(a) = &call.args {
        if let Some(buf) = &a.buffer {
            let by_buf: Vec<Wait> = of_kind
                .iter()
                .filter(|w| op_of(scene.snap, w).is_some_and(|o| &o.buffer == buf))
                .map(|w| (*w).clone())
                .collect();
            if !by_buf.is_empty() {
                return by_buf;
            }
        }
        if let (Some(ci), Some(peer)) = (call.comm, a.peer) {
            let by_peer: Vec<Wait> = of_kind
                .iter()
                .filter(|w| w.at.is_some_and(|at| at.comm == ci))
                .filter(|w| {
                    op_of(scene.snap, w).is_some_and(|o| {
                        (a.any_source || o.peer.local == Some(peer)) && (a.any_tag || a.tag.is_none() || o.tag == a.tag)
                    })
                })
                .map(|w| (*w).clone())
                .collect();
            if !by_peer.is_empty() {
                return by_peer;
            }
        }
    }
    of_kind.into_iter().cloned().collect()
}

/// A wait of a blocking call (no queue operation behind it).
fn call_wait(
    r: i64,
    call: &Call,
    op: OpKind,
    target: Target,
    certain: bool,
    words: String,
    why: Option<String>,
) -> Wait {
    Wait {
        rank: r,
        at: None,
        group: 0,
        words: Some(words),
        one: None,
        op,
        communicator: String::new(),
        tag: call.args.as_ref().and_then(|a| a.tag),
        target,
        certain,
        why,
        unmatched: None,
    }
}

/// Why a call's communicator is not known.
fn comm_unknown(call: &Call) -> String {
    let why = call
        .args
        .as_ref()
        .and_then(|a| a.why.clone())
        .unwrap_or_else(|| "this front end gave no argument values".into());
    format!(
        "the communicator of its {} could not be recovered ({why})",
        c_name(&call.name)
    )
}

/// The groups of one call of rank `r` (an empty group: satisfied).
fn call_groups(
    scene: &Scene<'_>,
    r: i64,
    call: &Call,
    mine: &[Wait],
    maybe: &mut BTreeMap<i64, String>,
) -> Vec<Vec<Wait>> {
    let all = [OpKind::Receive, OpKind::Send];
    match call.class {
        CallClass::Send { synchronous } => {
            let t = tied(scene, call, mine, &[OpKind::Send]);
            if !t.is_empty() {
                return vec![t];
            }
            vec![unlisted_send(scene, r, call, synchronous)]
        }
        CallClass::Recv => {
            let t = tied(scene, call, mine, &[OpKind::Receive]);
            // A probe posts no receive: its source must send. A receive
            // the queues no longer list has matched and is returning,
            // unless the previous sample saw it there already.
            let probe = matches!(call.name.as_str(), "probe" | "mprobe");
            if t.is_empty() && (probe || (scene.confirmed)(r)) {
                return vec![unlisted_recv(scene, r, call)];
            }
            vec![t]
        }
        CallClass::SendRecv => {
            let t = tied(scene, call, mine, &all);
            // Without queues, nothing ties it: in it in two samples, it
            // waits on partners not known (any rank that can act).
            let blind = scene
                .job
                .procs
                .get(&r)
                .is_some_and(|&pi| scene.snap.processes[pi].queues_missing.is_some());
            if t.is_empty() && blind && (scene.confirmed)(r) {
                return vec![unknown_partners(
                    scene,
                    r,
                    call,
                    "for partners not known",
                    "whose partners could not be recovered",
                )];
            }
            vec![t]
        }
        CallClass::Wait { completion } | CallClass::Poll { completion } => {
            let recorded = scene
                .job
                .procs
                .get(&r)
                .is_some_and(|&pi| super::recorded::recorded(&scene.snap.processes[pi]));
            let t: Vec<Wait> = match call.args.as_ref().and_then(|a| a.requests.as_ref()) {
                // The flight recorder knows its requests: their operations
                // only (a request started earlier and still pending is not
                // waited on here; its message may long have arrived).
                Some(requests) => mine
                    .iter()
                    .filter(|w| {
                        op_of(scene.snap, w)
                            .and_then(|o| o.request.as_ref())
                            .is_some_and(|q| requests.contains(q))
                    })
                    .cloned()
                    .collect(),
                None if recorded && !matches!(call.name.as_str(), "iprobe" | "improbe") => {
                    // Pending requests are listed, but not which it waits on.
                    return vec![unknown_partners(
                        scene,
                        r,
                        call,
                        "on requests the flight recorder did not record",
                        "on requests started by calls mpiq's flight recorder does not record",
                    )];
                }
                None => mine.to_vec(),
            };
            if t.is_empty() {
                return vec![invisible(scene, r, call)];
            }
            match completion {
                Completion::Any => t.into_iter().map(|w| vec![w]).collect(),
                Completion::One | Completion::All => vec![t],
            }
        }
        CallClass::Collective { .. } | CallClass::CommConstruct | CallClass::InitFinalize => {
            vec![collective(scene, r, call, maybe)]
        }
        CallClass::OneSided | CallClass::Io { .. } => vec![unknown_partners(
            scene,
            r,
            call,
            "for whom is not known",
            "whose partners mpiq cannot tell (one-sided or file I/O)",
        )],
        CallClass::LocalSend | CallClass::Start | CallClass::Local => vec![Vec::new()],
    }
}

/// A wait call (or test loop) with nothing pending in the queues: its
/// request completed (it is about to return) — unless the previous sample
/// saw it in the same place, when it waits on something the queues do not
/// show (a nonblocking collective, a request of another library).
fn invisible(scene: &Scene<'_>, r: i64, call: &Call) -> Vec<Wait> {
    if !(scene.confirmed)(r) {
        return Vec::new();
    }
    let unreadable = scene
        .job
        .procs
        .get(&r)
        .is_some_and(|&pi| scene.snap.processes[pi].queues_missing.is_some());
    if unreadable {
        // Its queues are not read at all: nothing to guess from their silence.
        return unknown_partners(
            scene,
            r,
            call,
            "on a request its queues would show",
            "on a request its unreadable queues would show",
        );
    }
    unknown_partners(
        scene,
        r,
        call,
        "on a request the queues do not show",
        "on a request no queue lists (a nonblocking collective?)",
    )
}

/// An uncertain wait of a call on some other rank, not known which.
fn unknown_partners(scene: &Scene<'_>, r: i64, call: &Call, waits: &str, is: &str) -> Vec<Wait> {
    let name = c_name(&call.name);
    let others = usize::try_from(scene.job.size - 1).unwrap_or(1).max(1);
    let words = format!("rank {r} waits in {name} {waits}");
    let why = format!("rank {r} is in {name}, {is}");
    unresolved(r, call, OpKind::Call, others, words, why)
}

/// The uncertain wait of a call on `others` ranks, not known which.
fn unresolved(r: i64, call: &Call, op: OpKind, others: usize, words: String, why: String) -> Vec<Wait> {
    vec![call_wait(
        r,
        call,
        op,
        Target::Unresolved { others },
        false,
        words,
        Some(why),
    )]
}

/// A blocking send the queues do not list (MPICH lists only nonblocking
/// sends): it waits for its receiver to post a matching receive, also when
/// its message already sits in the receiver's unexpected queue.
fn unlisted_send(scene: &Scene<'_>, r: i64, call: &Call, synchronous: bool) -> Vec<Wait> {
    let name = c_name(&call.name);
    let p = scene.job.procs.get(&r).map(|&pi| &scene.snap.processes[pi]);
    // The destination from the arguments, else from where its messages are.
    let from_args = call
        .comm
        .zip(call.args.as_ref().and_then(|a| a.peer))
        .and_then(|(ci, l)| {
            let c = p?.communicators.get(ci)?;
            translate(c, Some(l))
        });
    let (dest, evidence) = match from_args {
        Some(d) => (Some(d), None),
        None => {
            let at = unexpected_from(scene, r);
            match at.len() {
                1 => (
                    at.first().copied(),
                    Some(format!("its message is unexpected at rank {}", at[0])),
                ),
                0 => (None, None),
                _ => {
                    let words = format!(
                        "rank {r} waits in {name} for one of {} to receive its message",
                        ranks_words(&at)
                    );
                    let why = format!(
                        "rank {r} is in {name}; messages from it are unexpected at {}, so its destination is not known",
                        ranks_words(&at)
                    );
                    let target = Target::AnyOf {
                        ranks: at,
                        unknown_members: false,
                    };
                    return vec![call_wait(r, call, OpKind::SyncSend, target, false, words, Some(why))];
                }
            }
        }
    };
    let Some(d) = dest else {
        let words = format!("rank {r} waits in {name} for an unknown receiver");
        let why = format!("rank {r} is in {name}, whose destination could not be recovered");
        return unresolved(r, call, OpKind::SyncSend, 1, words, why);
    };
    let tag = call.args.as_ref().and_then(|a| a.tag);
    // Its receiver in a blocking receive that matches it: the two match
    // now (a large message on its way, MPICH's rendezvous no queue lists).
    let id = call
        .comm
        .zip(scene.job.procs.get(&r))
        .and_then(|(ci, &pr)| scene.ids.get(pr, ci));
    if blocked_receiving(scene, d, r, id, tag) {
        return Vec::new();
    }
    // A standard send whose receive the receiver has posted waits on no
    // one: the two match, and the message goes as both MPIs progress, at
    // any size (a rendezvous too). A synchronous send still waits for the
    // receiver's MPI to see the match.
    if !synchronous && posted_receive(scene, d, r, id, tag) {
        return Vec::new();
    }
    let comm = call
        .comm
        .and_then(|ci| p?.communicators.get(ci))
        .map_or_else(|| "its communicator".to_string(), |c| comm_words(&c.name));
    let mut words = format!("rank {r} waits in {name} for rank {d} to receive its message on {comm}");
    if tag.is_some() {
        words.push_str(&format!(" {}", tag_words(tag)));
    }
    if let Some(e) = &evidence {
        words.push_str(&format!(" ({e})"));
    }
    // A standard send may have completed eagerly: certain only when
    // synchronous or seen in the same place by the previous sample.
    let certain = synchronous || (scene.confirmed)(r);
    let why = (!certain).then(|| {
        format!("rank {r} is in {name} to rank {d}: a standard send may complete without a receive (eager); a second sample tells")
    });
    vec![call_wait(
        r,
        call,
        OpKind::SyncSend,
        Target::Rank(d),
        certain,
        words,
        why,
    )]
}

/// The blocking point-to-point calls of world rank `q` whose arguments are
/// known: (its call, the communicator's id across processes, the peer as a
/// world rank (`None`: `MPI_ANY_SOURCE`), its tag (`None`: `MPI_ANY_TAG`)).
fn blocked_p2p<'s>(
    scene: &'s Scene<'_>,
    q: i64,
) -> impl Iterator<Item = (&'s Call, usize, Option<i64>, Option<i64>)> + 's {
    let pq = scene.job.procs.get(&q).copied();
    let calls = match scene.places.get(&q) {
        Some(Place::InMpi(calls)) => calls.as_slice(),
        _ => &[],
    };
    calls.iter().filter_map(move |c| {
        let pq = pq?;
        let a = c.args.as_ref()?;
        let ci = c.comm?;
        let id = scene.ids.get(pq, ci)?;
        let comm = scene.snap.processes[pq].communicators.get(ci)?;
        let peer = if a.any_source {
            None
        } else {
            Some(translate(comm, a.peer)?)
        };
        let tag = if a.any_tag { None } else { Some(a.tag?) };
        Some((c, id, peer, tag))
    })
}

/// Whether world rank `d` is in a blocking receive or probe that a message
/// of world rank `s` on communicator `id` with tag `tag` matches: source `s`
/// or any, the tag or any. Everything must be known: an unknown
/// communicator or tag is no match.
pub(super) fn blocked_receiving(scene: &Scene<'_>, d: i64, s: i64, id: Option<usize>, tag: Option<i64>) -> bool {
    let (Some(id), Some(tag)) = (id, tag) else {
        return false;
    };
    blocked_p2p(scene, d).any(|(c, cid, peer, t)| {
        c.class == CallClass::Recv && cid == id && peer.is_none_or(|p| p == s) && t.is_none_or(|t| t == tag)
    })
}

/// Whether world rank `d`'s queues (or the flight recorder's pending
/// requests, which stand in for them) hold a posted receive, not yet
/// matched, that a message from world rank `s` with tag `tag` on
/// communicator `id` matches. Everything must be known.
fn posted_receive(scene: &Scene<'_>, d: i64, s: i64, id: Option<usize>, tag: Option<i64>) -> bool {
    let (Some(id), Some(tag), Some(&pd)) = (id, tag, scene.job.procs.get(&d)) else {
        return false;
    };
    let p = &scene.snap.processes[pd];
    p.communicators
        .iter()
        .enumerate()
        .filter(|&(ci, _)| scene.ids.get(pd, ci) == Some(id))
        .any(|(_, c)| {
            c.queues.get(QueueKind::Receives).operations.iter().any(|o| {
                let from = o.peer.world.or_else(|| translate(c, o.peer.local));
                o.status == Status::Pending && (o.any_source || from == Some(s)) && (o.any_tag || o.tag == Some(tag))
            })
        })
}

/// Whether world rank `s` is in a blocking send (`MPI_Send`, `MPI_Ssend`)
/// to world rank `r` on communicator `id` that a receive with tag `tag`
/// (`None`: any) matches. Everything must be known.
pub(super) fn blocked_sending(scene: &Scene<'_>, s: i64, r: i64, id: Option<usize>, tag: Option<i64>) -> bool {
    let Some(id) = id else {
        return false;
    };
    blocked_p2p(scene, s).any(|(c, cid, peer, t)| {
        matches!(c.class, CallClass::Send { .. })
            && cid == id
            && peer == Some(r)
            && t.is_some()
            && (tag.is_none() || t == tag)
    })
}

/// World ranks whose unexpected queues hold a message from world rank `r`.
fn unexpected_from(scene: &Scene<'_>, r: i64) -> Vec<i64> {
    let mut at = BTreeSet::new();
    for (&q, &pi) in &scene.job.procs {
        if q == r {
            continue;
        }
        for c in &scene.snap.processes[pi].communicators {
            if member(c).is_none() {
                continue;
            }
            for u in &c.queues.get(QueueKind::Unexpected).operations {
                let src = u
                    .actual
                    .and_then(|a| a.world)
                    .or(u.peer.world)
                    .or_else(|| translate(c, msg_source(u)));
                if src == Some(r) {
                    at.insert(q);
                }
            }
        }
    }
    at.into_iter().collect()
}

mod collective;
mod unlisted_recv;
mod words;
use collective::collective;
use unlisted_recv::unlisted_recv;
pub use words::RankWhere;
pub(crate) use words::{caller_line, process_stopped, ranks_said, waiting_said, where_list};
