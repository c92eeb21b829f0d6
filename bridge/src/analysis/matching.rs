//! Matching pending operations across ranks, and turning what stays
//! unmatched into waits (the raw material of the wait-for graph).
//!
//! A pending receive of rank A from B with tag T (or `MPI_ANY_TAG`) is
//! satisfied by an unexpected message from B already at A, or by a send
//! of B to A on the same communicator with a compatible tag that is still
//! listed as pending or complete (MPICH keeps small eager sends listed as
//! complete until they are waited for; Open MPI drops them). Messages are
//! consumed in queue order, one receive each, as MPI's non-overtaking rule
//! matches them. A pending send nothing consumed waits for its receiver (a
//! rendezvous send completes only once the receive is posted); complete
//! and matched operations wait for nothing.
//!
//! A receive only a *complete* send satisfies, while the receiver's
//! unexpected queue is readable (MPICH), is counted as satisfied but noted:
//! an undelivered message would show in that queue, so it is in flight or
//! went to an earlier receive — and then this receive still waits.
//!
//! The unexpected queue Open MPI 4.1 does not show is not needed to match
//! posted receives: a receive is matched against the messages that arrived
//! before it when it is posted, so a still pending receive has no
//! compatible message in its own unexpected queue.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::groups::CommIds;
use super::job::{comm_words, member, translate, Job};
use super::model::{OpKind, Unmatched};
use super::words::{ranks_words, tag_words};
use crate::snapshot::model::{Communicator, Operation, QueueKind, Snapshot, Status};

/// Where an operation is in the snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct OpAt {
    /// Process index.
    pub process: usize,
    /// Communicator index in the process.
    pub comm: usize,
    /// Queue.
    pub queue: QueueKind,
    /// Operation index in the queue.
    pub op: usize,
}

/// Who can release a wait.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// This world rank (a specific source or destination).
    Rank(i64),
    /// Any one of these world ranks (`MPI_ANY_SOURCE`); `unknown_members`
    /// when some members' world ranks are not known.
    AnyOf { ranks: Vec<i64>, unknown_members: bool },
    /// Some rank other than the waiting one, not known which: any one of
    /// `others` ranks (1 for a specific but unknown peer).
    Unresolved { others: usize },
    /// Every one of these world ranks (sorted, at least two): the members
    /// a collective waits for. One set is shared by every rank that waits
    /// for the same members, and the graph keeps it as one node, so that N
    /// ranks in an `MPI_Allreduce` waiting for M absent members cost N + M,
    /// not N × M.
    AllOf(Members),
}

/// A shared, sorted set of world ranks ([`Target::AllOf`]).
pub(crate) type Members = std::sync::Arc<[i64]>;

/// The distinct shared sets among some waits, each once, however many
/// ranks wait for it: its distinct members, who waits for it (`W`: a wait's
/// index, a rank), and the sets each member is in. The reduction
/// (`graph.rs`) and the walk to the ranks waited on (`waited.rs`) go
/// through a set once, not once per waiter.
#[derive(Debug)]
pub(crate) struct SetIndex<W> {
    index: HashMap<usize, usize>,
    /// Each set's count of distinct members.
    pub sizes: Vec<usize>,
    /// Who waits for each set.
    pub waiters: Vec<Vec<W>>,
    of: HashMap<i64, Vec<usize>>,
}

impl<W> Default for SetIndex<W> {
    fn default() -> Self {
        SetIndex {
            index: HashMap::new(),
            sizes: Vec::new(),
            waiters: Vec::new(),
            of: HashMap::new(),
        }
    }
}

impl<W> SetIndex<W> {
    /// `w` waits for the set `key` ([`Target::shared`]), whose members are
    /// `members` (sorted).
    pub fn add(&mut self, key: usize, members: &[i64], w: W) {
        let k = match self.index.get(&key) {
            Some(&k) => k,
            None => {
                let k = self.sizes.len();
                self.index.insert(key, k);
                let mut distinct = members.to_vec();
                distinct.dedup();
                self.sizes.push(distinct.len());
                self.waiters.push(Vec::new());
                for b in distinct {
                    self.of.entry(b).or_default().push(k);
                }
                k
            }
        };
        self.waiters[k].push(w);
    }

    /// The sets rank `b` is in.
    pub fn of(&self, b: i64) -> &[usize] {
        self.of.get(&b).map(Vec::as_slice).unwrap_or_default()
    }

    /// Every rank in some set.
    pub fn members(&self) -> impl Iterator<Item = i64> + '_ {
        self.of.keys().copied()
    }
}

impl Target {
    /// The known world ranks it names.
    pub fn ranks(&self) -> &[i64] {
        match self {
            Target::Rank(r) => std::slice::from_ref(r),
            Target::AnyOf { ranks, .. } => ranks,
            Target::Unresolved { .. } => &[],
            Target::AllOf(members) => members,
        }
    }

    /// The shared set's identity, for a [`Target::AllOf`]: a walk visits
    /// each set once, however many ranks wait for it.
    pub fn shared(&self) -> Option<usize> {
        match self {
            Target::AllOf(members) => Some(members.as_ptr() as usize),
            _ => None,
        }
    }
}

/// A rank's operation that nothing in the snapshot was seen to satisfy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Wait {
    /// The waiting world rank.
    pub rank: i64,
    /// The queue operation, or `None` for a wait of a blocking MPI call the
    /// queues do not list (a collective, MPICH's blocking sends).
    pub at: Option<OpAt>,
    /// Which of its rank's wait groups it belongs to: a rank is freed once
    /// every wait of any one of its groups is satisfied (an OR of ANDs:
    /// `MPI_Waitany`, several threads in MPI).
    pub group: u32,
    /// The wait in words, when [`OpKind`] and the target do not say it all
    /// (`rank 0 waits in MPI_Barrier on MPI_COMM_WORLD for rank 1, which is
    /// not in it`).
    pub words: Option<String>,
    /// For a [`Target::AllOf`]: the words of the wait for one member `b`,
    /// as `head + "rank b" + tail` (a cycle's step, an edge).
    pub one: Option<Box<(String, String)>>,
    /// Receive, send, or a blocking call.
    pub op: OpKind,
    /// The communicator's name.
    pub communicator: String,
    /// The operation's tag (`None`: any or unknown).
    pub tag: Option<i64>,
    /// Who can release it.
    pub target: Target,
    /// False when the wait may not be real: the operation's status is
    /// unknown, or its match could not be looked for (a communicator that
    /// cannot be identified across processes, an unknown peer).
    pub certain: bool,
    /// Why it is uncertain or unresolved, for the user.
    pub why: Option<String>,
    /// Index in the unmatched list (certain waits only).
    pub unmatched: Option<usize>,
}

/// What matching found.
#[derive(Clone, Debug, Default)]
pub(crate) struct Matching {
    /// Every wait of a readable rank.
    pub waits: Vec<Wait>,
    /// The operations behind the certain waits.
    pub unmatched: Vec<Unmatched>,
    /// Notes for the user.
    pub notes: Vec<String>,
}

/// Source of an unexpected message, tag of a message.
pub(crate) fn msg_source(u: &Operation) -> Option<i64> {
    u.actual.and_then(|a| a.local).or(u.peer.local)
}
pub(crate) fn msg_tag(m: &Operation) -> Option<i64> {
    m.tag.or_else(|| m.actual.and_then(|a| a.tag))
}
/// Destination of a send (the desired rank; Open MPI's actual global rank
/// is not translated, its actual local rank is).
pub(crate) fn send_dest(s: &Operation) -> Option<i64> {
    s.peer.local.or_else(|| s.actual.and_then(|a| a.local))
}
/// Whether a receive accepts a message tag (unknown is accepted).
pub(crate) fn tag_ok(r: &Operation, tag: Option<i64>) -> bool {
    r.any_tag || r.tag.is_none() || tag.is_none() || r.tag == tag
}

/// What satisfied a receive.
enum Found {
    /// A message already in the receiver's unexpected queue.
    Arrived,
    /// A pending send.
    Pending,
    /// A send its sender lists as complete (MPICH keeps small eager sends
    /// listed until they are waited for).
    Complete(OpAt),
}

/// The state of one pass of matching.
struct Matcher<'a> {
    snap: &'a Snapshot,
    job: &'a Job,
    ids: &'a CommIds,
    /// `(communicator id, local rank)` → `(process, communicator)`.
    index: HashMap<(usize, i64), (usize, usize)>,
    /// `(communicator id, destination local rank)` → the sends to it, with
    /// their sender's local rank, in sender and queue order.
    sends_to: HashMap<(usize, i64), Vec<(i64, OpAt)>>,
    /// Receives satisfied only by a send listed as complete, while the
    /// receiver's unexpected queue is readable: `(receiver, sender, op)`.
    stale: Vec<(i64, OpAt, OpAt)>,
    /// Sends and unexpected messages already taken by a receive.
    used: HashSet<OpAt>,
    out: Matching,
}

/// Matches every pending operation of the readable ranks.
pub(crate) fn match_ops(snap: &Snapshot, job: &Job, ids: &CommIds) -> Matching {
    let mut index = HashMap::new();
    let mut sends_to: HashMap<(usize, i64), Vec<(i64, OpAt)>> = HashMap::new();
    for &pi in job.procs.values() {
        for (ci, c) in snap.processes[pi].communicators.iter().enumerate() {
            let (Some(id), Some((_, local))) = (ids.get(pi, ci), member(c)) else {
                continue;
            };
            if index.contains_key(&(id, local)) {
                continue;
            }
            index.insert((id, local), (pi, ci));
            for (op, s) in c.queues.sends.operations.iter().enumerate() {
                if let Some(dest) = send_dest(s) {
                    let at = OpAt {
                        process: pi,
                        comm: ci,
                        queue: QueueKind::Sends,
                        op,
                    };
                    sends_to.entry((id, dest)).or_default().push((local, at));
                }
            }
        }
    }
    for list in sends_to.values_mut() {
        list.sort_by_key(|(sender, at)| (*sender, at.op));
    }
    let mut m = Matcher {
        snap,
        job,
        ids,
        index,
        sends_to,
        stale: Vec::new(),
        used: HashSet::new(),
        out: Matching::default(),
    };
    let readable: Vec<(i64, usize)> = job
        .procs
        .iter()
        .filter(|(r, _)| job.is_readable(**r))
        .map(|(r, p)| (*r, *p))
        .collect();
    // The receives an unknown rank does list still take the sends to it.
    for (&rank, &pi) in &job.procs {
        m.receives(rank, pi);
    }
    // Sends last: a send is taken by whichever receive of its receiver matched it.
    for &(rank, pi) in &readable {
        m.sends(rank, pi);
    }
    m.note_stale();
    // Ranks whose unexpected queue is not shown: by the flight recorder
    // (it never sees one), or by the debug library.
    let (mut recorded, mut no_unexpected) = (BTreeSet::new(), BTreeSet::new());
    for &(r, pi) in &readable {
        let p = &snap.processes[pi];
        if p.communicators
            .iter()
            .any(|c| member(c).is_some() && !c.queues.unexpected.available)
        {
            if super::recorded::recorded(p) {
                recorded.insert(r);
            } else {
                no_unexpected.insert(r);
            }
        }
    }
    if !recorded.is_empty() {
        m.out.notes.push(format!(
            "the queues of {} are mpiq's flight recorder's: it sees no unexpected messages, and a request \
             it lists as pending may have matched already (a rank that stays in a wait on it has not)",
            ranks_words(&recorded.into_iter().collect::<Vec<_>>())
        ));
    }
    if !no_unexpected.is_empty() {
        m.out.notes.push(format!(
            "the unexpected-message queue of {} is not available from the debug library; it is not needed \
             to match posted receives (MPI matches a receive against earlier arrivals when it is posted)",
            ranks_words(&no_unexpected.into_iter().collect::<Vec<_>>())
        ));
    }
    m.out
}

impl<'a> Matcher<'a> {
    fn comm(&self, pi: usize, ci: usize) -> &'a Communicator {
        let snap: &'a Snapshot = self.snap;
        &snap.processes[pi].communicators[ci]
    }

    /// One note for the receives only a complete send satisfied, while the
    /// receiver's unexpected queue is readable: that message either is in
    /// flight or was already taken by an earlier receive (then this one still
    /// waits). The receive counts as satisfied, as the send says it was sent.
    fn note_stale(&mut self) {
        if self.stale.is_empty() {
            return;
        }
        let examples: Vec<String> = self
            .stale
            .iter()
            .take(3)
            .map(|(rank, at, send)| {
                let c = self.comm(at.process, at.comm);
                let r = &c.queues.receives.operations[at.op];
                let from = self
                    .rank_of(send.process)
                    .map_or_else(|| "?".to_string(), |w| w.to_string());
                format!(
                    "rank {rank} from rank {from} on {} {}",
                    comm_words(&c.name),
                    tag_words(r.tag)
                )
            })
            .collect();
        let more = self.stale.len().saturating_sub(3);
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        self.out.notes.push(format!(
            "{} matched only by sends their senders list as complete, not by a message in the unexpected \
             queue ({}{more}): if those messages were already received, these receives still wait",
            if self.stale.len() == 1 {
                "a receive is"
            } else {
                "receives are"
            },
            examples.join("; ")
        ));
    }

    /// World rank of the process at an index.
    fn rank_of(&self, pi: usize) -> Option<i64> {
        self.snap.processes[pi].world_rank.map(i64::from)
    }

    fn receives(&mut self, rank: i64, pi: usize) {
        let snap: &'a Snapshot = self.snap;
        for (ci, c) in snap.processes[pi].communicators.iter().enumerate() {
            let Some((size, la)) = member(c) else { continue };
            for (oi, op) in c.queues.receives.operations.iter().enumerate() {
                let certain = match op.status {
                    Status::Pending => true,
                    Status::Unknown => false,
                    Status::Matched | Status::Complete => continue,
                };
                let at = OpAt {
                    process: pi,
                    comm: ci,
                    queue: QueueKind::Receives,
                    op: oi,
                };
                let readable = self.job.is_readable(rank);
                match self.match_receive(pi, ci, la, op) {
                    Some(Found::Complete(send)) if readable && c.queues.unexpected.available => {
                        self.stale.push((rank, at, send));
                    }
                    Some(_) => {}
                    None if readable => self.receive_wait(rank, at, la, size, op, certain),
                    None => {}
                }
            }
        }
    }

    /// Finds and takes the message a receive matches, if any.
    fn match_receive(&mut self, pi: usize, ci: usize, la: i64, r: &Operation) -> Option<Found> {
        let c = self.comm(pi, ci);
        let source_ok = |src: Option<i64>| r.any_source || src.is_none() || src == r.peer.local;
        for (ui, u) in c.queues.unexpected.operations.iter().enumerate() {
            let at = OpAt {
                process: pi,
                comm: ci,
                queue: QueueKind::Unexpected,
                op: ui,
            };
            if !self.used.contains(&at) && source_ok(msg_source(u)) && tag_ok(r, msg_tag(u)) {
                self.used.insert(at);
                return Some(Found::Arrived);
            }
        }
        // Sends to this rank, in the order of their senders' local ranks and queues.
        let own: Vec<(i64, OpAt)>;
        let candidates: &[(i64, OpAt)] = match self.ids.get(pi, ci) {
            Some(id) => self.sends_to.get(&(id, la)).map(Vec::as_slice).unwrap_or_default(),
            None => {
                own = (0..c.queues.sends.operations.len())
                    .map(|op| {
                        let at = OpAt {
                            process: pi,
                            comm: ci,
                            queue: QueueKind::Sends,
                            op,
                        };
                        (la, at)
                    })
                    .collect();
                &own
            }
        };
        for &(sender, at) in candidates {
            if !r.any_source && r.peer.local != Some(sender) {
                continue;
            }
            let s = &self.comm(at.process, at.comm).queues.sends.operations[at.op];
            let live = matches!(s.status, Status::Pending | Status::Complete);
            if live && !self.used.contains(&at) && send_dest(s) == Some(la) && tag_ok(r, msg_tag(s)) {
                self.used.insert(at);
                return Some(if s.status == Status::Complete {
                    Found::Complete(at)
                } else {
                    Found::Pending
                });
            }
        }
        None
    }

    /// Who a specific peer (local rank `l`, not this process) is, and
    /// whether its queues were looked at for the match.
    fn peer(&self, pi: usize, ci: usize, l: i64, op: &Operation) -> (Option<i64>, bool) {
        let c = self.comm(pi, ci);
        let found = self.ids.get(pi, ci).and_then(|id| self.index.get(&(id, l)).copied());
        let world = found
            .and_then(|(q, _)| self.rank_of(q))
            .or(op.peer.world)
            .or_else(|| translate(c, Some(l)));
        (world, found.is_some())
    }

    /// Why a wait on a peer of a communicator could not be checked.
    fn why_unchecked(&self, pi: usize, ci: usize, what: String, world: Option<i64>) -> String {
        let c = self.comm(pi, ci);
        let name = comm_words(&c.name);
        if self.ids.get(pi, ci).is_none() {
            let size = c.size.unwrap_or(0);
            format!(
                "{what} on {name}, which cannot be identified across processes ({})",
                self.ids.why_not(&c.name, size)
            )
        } else if let Some(w) = world {
            format!("{what} on {name}, which rank {w} does not list")
        } else {
            format!("{what} on {name}, whose world rank is unknown")
        }
    }

    fn receive_wait(&mut self, rank: i64, at: OpAt, la: i64, size: i64, op: &Operation, certain: bool) {
        let c = self.comm(at.process, at.comm);
        let id = self.ids.get(at.process, at.comm);
        let name = comm_words(&c.name);
        let (target, checked, mut why) = if op.any_source {
            match &c.world_ranks {
                Some(group) => {
                    let mut ranks: Vec<i64> = group
                        .iter()
                        .enumerate()
                        .filter(|(l, _)| *l as i64 != la)
                        .filter_map(|(_, w)| *w)
                        .filter(|w| *w != rank)
                        .collect();
                    ranks.sort_unstable();
                    ranks.dedup();
                    let unknown_members = group.iter().enumerate().any(|(l, w)| l as i64 != la && w.is_none());
                    if ranks.is_empty() && !unknown_members {
                        ranks.push(rank);
                    }
                    let why = id
                        .is_none()
                        .then(|| self.why_unchecked(at.process, at.comm, "an ANY_SOURCE receive".into(), None));
                    (Target::AnyOf { ranks, unknown_members }, id.is_some(), why)
                }
                None => (
                    Target::Unresolved {
                        others: usize::try_from(size - 1).unwrap_or(1).max(1),
                    },
                    false,
                    Some(format!(
                        "an ANY_SOURCE receive on {name}, whose members' world ranks are unknown"
                    )),
                ),
            }
        } else {
            match op.peer.local {
                Some(l) if l == la => (Target::Rank(rank), true, None),
                Some(l) => match self.peer(at.process, at.comm, l, op) {
                    (Some(w), found) => {
                        let checked = found || !self.job.is_readable(w);
                        let why = (!checked).then(|| {
                            self.why_unchecked(at.process, at.comm, format!("a receive from rank {w}"), Some(w))
                        });
                        (Target::Rank(w), checked, why)
                    }
                    (None, _) => (
                        Target::Unresolved { others: 1 },
                        false,
                        Some(self.why_unchecked(at.process, at.comm, format!("a receive from local rank {l}"), None)),
                    ),
                },
                None => (
                    Target::Unresolved { others: 1 },
                    false,
                    Some(format!("a receive from an unknown source on {name}")),
                ),
            }
        };
        if !certain {
            why.get_or_insert_with(|| format!("a receive on {name} whose status is unknown"));
        }
        let tag = if op.any_tag { None } else { op.tag };
        self.push(rank, at, OpKind::Receive, target, certain && checked, why, tag, op);
    }

    fn sends(&mut self, rank: i64, pi: usize) {
        let snap: &'a Snapshot = self.snap;
        for (ci, c) in snap.processes[pi].communicators.iter().enumerate() {
            let Some((_, la)) = member(c) else { continue };
            let name = comm_words(&c.name);
            for (oi, op) in c.queues.sends.operations.iter().enumerate() {
                let at = OpAt {
                    process: pi,
                    comm: ci,
                    queue: QueueKind::Sends,
                    op: oi,
                };
                let certain = match op.status {
                    Status::Pending => true,
                    Status::Unknown => false,
                    Status::Matched | Status::Complete => continue,
                };
                if self.used.contains(&at) {
                    continue;
                }
                let (target, checked, mut why) = match send_dest(op) {
                    Some(l) if l == la => (Target::Rank(rank), true, None),
                    Some(l) => match self.peer(pi, ci, l, op) {
                        (Some(w), found) => {
                            let checked = found || !self.job.is_readable(w);
                            let why =
                                (!checked).then(|| self.why_unchecked(pi, ci, format!("a send to rank {w}"), Some(w)));
                            (Target::Rank(w), checked, why)
                        }
                        (None, _) => (
                            Target::Unresolved { others: 1 },
                            false,
                            Some(self.why_unchecked(pi, ci, format!("a send to local rank {l}"), None)),
                        ),
                    },
                    None => (
                        Target::Unresolved { others: 1 },
                        false,
                        Some(format!("a send to an unknown destination on {name}")),
                    ),
                };
                if !certain {
                    why.get_or_insert_with(|| format!("a send on {name} whose status is unknown"));
                }
                self.push(rank, at, OpKind::Send, target, certain && checked, why, msg_tag(op), op);
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        rank: i64,
        at: OpAt,
        kind: OpKind,
        target: Target,
        certain: bool,
        why: Option<String>,
        tag: Option<i64>,
        op: &Operation,
    ) {
        let communicator = self.comm(at.process, at.comm).name.clone();
        let unmatched = certain.then(|| {
            self.out.unmatched.push(Unmatched {
                rank,
                communicator: communicator.clone(),
                kind,
                peer: match &target {
                    Target::Rank(r) => Some(*r),
                    _ => None,
                },
                tag,
                peer_local: if kind == OpKind::Send {
                    send_dest(op)
                } else {
                    op.peer.local
                },
                any_source: op.any_source,
                any_tag: op.any_tag,
                status: op.status,
                buffer: op.buffer.clone(),
                request: op.request.clone(),
            });
            self.out.unmatched.len() - 1
        });
        self.out.waits.push(Wait {
            one: None,
            rank,
            at: Some(at),
            group: 0,
            words: None,
            op: kind,
            communicator,
            tag,
            target,
            certain,
            why: if certain { None } else { why },
            unmatched,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::groups::{identify, infer};
    use crate::analysis::testutil::*;

    fn run(mut s: Snapshot) -> Matching {
        infer(&mut s);
        let job = Job::new(&s);
        let ids = identify(&s);
        match_ops(&s, &job, &ids)
    }

    fn targets(m: &Matching) -> Vec<(i64, Target, bool)> {
        m.waits.iter().map(|w| (w.rank, w.target.clone(), w.certain)).collect()
    }

    #[test]
    fn a_pending_send_satisfies_a_receive_and_is_taken() {
        let m = run(snapshot(vec![
            process(0, vec![world(2, 0).recvs(vec![recv(Some(1), Some(5))])]),
            process(1, vec![world(2, 1).sends(vec![send(0, 5, Status::Pending)])]),
        ]));
        assert!(m.waits.is_empty() && m.unmatched.is_empty());
    }

    #[test]
    fn tags_must_be_compatible() {
        let m = run(snapshot(vec![
            process(0, vec![world(2, 0).recvs(vec![recv(Some(1), Some(5))])]),
            process(1, vec![world(2, 1).sends(vec![send(0, 6, Status::Pending)])]),
        ]));
        assert_eq!(
            targets(&m),
            vec![(0, Target::Rank(1), true), (1, Target::Rank(0), true)]
        );
        assert_eq!(m.unmatched[0].kind, OpKind::Receive);
        assert_eq!(m.unmatched[1].tag, Some(6));
    }

    #[test]
    fn any_tag_matches_any_tag_and_a_send_is_taken_once() {
        let m = run(snapshot(vec![
            process(
                0,
                vec![world(2, 0).recvs(vec![recv(Some(1), None), recv(Some(1), None)])],
            ),
            process(1, vec![world(2, 1).sends(vec![send(0, 9, Status::Pending)])]),
        ]));
        // The first receive takes the one send; the second still waits.
        assert_eq!(targets(&m), vec![(0, Target::Rank(1), true)]);
        assert_eq!(m.waits[0].at.map(|a| a.op), Some(1));
        assert_eq!(m.unmatched[0].tag, None);
    }

    #[test]
    fn mpich_complete_sends_satisfy_receives_but_never_wait() {
        let m = run(snapshot(vec![
            process(
                0,
                vec![world(2, 0)
                    .recvs(vec![recv(Some(1), Some(5))])
                    .sends(vec![send(1, 77, Status::Complete)])],
            ),
            process(1, vec![world(2, 1).sends(vec![send(0, 5, Status::Complete)])]),
        ]));
        assert!(m.waits.is_empty());
    }

    #[test]
    fn any_source_takes_sends_in_sender_order_and_the_rest_wait() {
        let m = run(snapshot(vec![
            process(0, vec![world(3, 0).recvs(vec![recv(None, Some(5))])]),
            process(1, vec![world(3, 1).sends(vec![send(0, 5, Status::Pending)])]),
            process(2, vec![world(3, 2).sends(vec![send(0, 5, Status::Pending)])]),
        ]));
        assert_eq!(targets(&m), vec![(2, Target::Rank(0), true)]);
    }

    #[test]
    fn a_complete_send_alone_is_noted_only_where_the_unexpected_queue_shows() {
        let build = |unexpected_available: bool| {
            let mut c = world(2, 0).recvs(vec![recv(Some(1), Some(5))]);
            if !unexpected_available {
                c.queues.unexpected = crate::snapshot::model::Queue::unavailable("no");
            }
            snapshot(vec![
                process(0, vec![c]),
                process(1, vec![world(2, 1).sends(vec![send(0, 5, Status::Complete)])]),
            ])
        };
        let m = run(build(true));
        assert!(m.waits.is_empty());
        assert!(m.notes[0].starts_with("a receive is matched only by sends"));
        let m = run(build(false));
        assert!(m.waits.is_empty());
        assert!(!m.notes.iter().any(|n| n.contains("list as complete")));
    }

    #[test]
    fn own_unexpected_messages_satisfy_receives() {
        let m = run(snapshot(vec![
            process(
                0,
                vec![world(2, 0)
                    .recvs(vec![recv(Some(1), Some(5)), recv(Some(1), Some(6))])
                    .unexp(vec![unexpected(1, 6)])],
            ),
            process(1, vec![world(2, 1)]),
        ]));
        assert_eq!(targets(&m), vec![(0, Target::Rank(1), true)]);
        assert_eq!(m.unmatched[0].tag, Some(5));
    }

    #[test]
    fn a_pending_send_waits_for_a_posted_receive_any_source_included() {
        let m = run(snapshot(vec![
            process(
                0,
                vec![world(3, 0).sends(vec![send(1, 5, Status::Pending), send(2, 5, Status::Pending)])],
            ),
            process(1, vec![world(3, 1).recvs(vec![recv(None, Some(5))])]),
            process(2, vec![world(3, 2)]),
        ]));
        assert_eq!(targets(&m), vec![(0, Target::Rank(2), true)]);
        assert_eq!(m.unmatched[0].kind, OpKind::Send);
    }

    #[test]
    fn any_source_waits_on_every_other_member() {
        let m = run(snapshot(
            (0..3)
                .map(|r| process(r, vec![world(3, r as i64).recvs(vec![recv(None, Some(1))])]))
                .collect(),
        ));
        assert_eq!(
            m.waits[0].target,
            Target::AnyOf {
                ranks: vec![1, 2],
                unknown_members: false
            }
        );
        assert_eq!(m.unmatched[0].peer, None);
        assert!(m.unmatched[0].any_source);
    }

    #[test]
    fn any_source_on_an_unknown_group_is_unresolved() {
        let m = run(snapshot(vec![
            process(
                0,
                vec![
                    world(2, 0),
                    comm("--unnamed--", 2, 0).recvs(vec![recv(None, Some(1))]),
                    comm("--unnamed--", 2, 0),
                ],
            ),
            process(
                1,
                vec![world(2, 1), comm("--unnamed--", 2, 1), comm("--unnamed--", 2, 1)],
            ),
        ]));
        assert_eq!(targets(&m), vec![(0, Target::Unresolved { others: 1 }, false)]);
        assert!(m.waits[0].why.as_deref().unwrap().contains("world ranks are unknown"));
        assert!(m.unmatched.is_empty());
    }

    #[test]
    fn a_receive_on_an_unidentifiable_communicator_is_uncertain() {
        // Two "dup" communicators with library groups: not told apart.
        let m = run(snapshot(vec![
            process(
                0,
                vec![
                    world(2, 0),
                    comm("dup", 2, 0).group(vec![0, 1]).recvs(vec![recv(Some(1), Some(1))]),
                    comm("dup", 2, 0).group(vec![0, 1]),
                ],
            ),
            process(
                1,
                vec![
                    world(2, 1),
                    comm("dup", 2, 1).group(vec![0, 1]),
                    comm("dup", 2, 1).group(vec![0, 1]),
                ],
            ),
        ]));
        assert_eq!(targets(&m), vec![(0, Target::Rank(1), false)]);
        assert!(m.waits[0].why.as_deref().unwrap().contains("more than one"));
    }

    #[test]
    fn an_unknown_rank_s_listed_receives_still_take_sends() {
        let mut b = world(2, 1).recvs(vec![recv(Some(0), Some(4))]);
        b.queues.sends.incomplete = true;
        let m = run(snapshot(vec![
            process(0, vec![world(2, 0).sends(vec![send(1, 4, Status::Pending)])]),
            process(1, vec![b.recvs(vec![recv(Some(0), Some(4)), recv(Some(0), Some(5))])]),
        ]));
        // Rank 0's send is taken; rank 1's own waits are not known.
        assert!(m.waits.is_empty());
    }

    #[test]
    fn a_receive_from_an_unreadable_rank_is_a_certain_edge_to_it() {
        let m = run(snapshot(vec![
            process(0, vec![world(2, 0).recvs(vec![recv(Some(1), Some(1))])]),
            failed(1, "no debug library"),
        ]));
        assert_eq!(targets(&m), vec![(0, Target::Rank(1), true)]);
    }

    #[test]
    fn self_sends_and_receives() {
        let m = run(snapshot(vec![process(
            0,
            vec![world(1, 0)
                .recvs(vec![recv(Some(0), Some(1)), recv(Some(0), Some(2))])
                .sends(vec![send(0, 1, Status::Pending)])],
        )]));
        assert_eq!(targets(&m), vec![(0, Target::Rank(0), true)]);
    }

    #[test]
    fn unknown_status_is_an_uncertain_wait() {
        let mut r = recv(Some(1), Some(1));
        r.status = Status::Unknown;
        let m = run(snapshot(vec![
            process(0, vec![world(2, 0).recvs(vec![r])]),
            process(1, vec![world(2, 1)]),
        ]));
        assert_eq!(targets(&m), vec![(0, Target::Rank(1), false)]);
        assert!(m.waits[0].why.as_deref().unwrap().contains("status is unknown"));
    }

    #[test]
    fn an_unavailable_unexpected_queue_is_noted_once() {
        let mut a = world(2, 0);
        a.queues.unexpected = crate::snapshot::model::Queue::unavailable("not implemented");
        let mut b = world(2, 1);
        b.queues.unexpected = crate::snapshot::model::Queue::unavailable("not implemented");
        let m = run(snapshot(vec![process(0, vec![a]), process(1, vec![b])]));
        assert_eq!(m.notes.len(), 1);
        assert!(m.notes[0].contains("ranks 0 and 1"));
    }
}
