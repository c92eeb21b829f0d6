//! What mpiq's flight recorder (`ProcessSnapshot::recorder`) tells of a rank
//! whose MPI gives no message queues (a packaged MPI, UCX): its pending
//! requests become its queues, and the calls it is in get the arguments
//! the recorder kept, so the analysis draws wait-for edges with peers and
//! tags where it would otherwise have the stacks alone.
//!
//! The recorder's view is what the *program* started and has not completed
//! (a wait or test that completed it), not what the MPI has matched: a
//! receive whose message already arrived is still pending until waited on.
//! So a rank's queue waits are tied to the very requests its wait call
//! waits on (`MpiCall::requests`), never to every pending one, and a rank
//! is given recorded queues only when every blocking call its stacks show
//! is one the recorder recorded (else what it waits on is not all known,
//! and it stays a rank known from its stacks alone).

use crate::snapshot::model::{
    Communicator, Group, MissingReason, MpiCall, Operation, Peer, ProcessSnapshot, Queue, Queues, Snapshot, Status,
    Text,
};
use crate::snapshot::recorder::{RecordedArgs, RecordedCall, RecordedComm, RecordedRequest, Recording};
use crate::stacks::names::{classify, CallClass};
use crate::stacks::position::{c_name, outermost_entry, position, Position};

/// `Communicator::world_ranks_source` of the recorder's communicators.
pub(crate) const SOURCE: &str = "recorder";

/// A communicator of the recorder's in words, the same in every rank:
/// `MPI_COMM_WORLD`, else by its members ("the communicator of ranks
/// 0-3"), or its size; never its handle, which is an address in Open MPI
/// (different in every rank, and nothing a person knows it by).
pub(crate) fn comm_name(k: &RecordedComm) -> String {
    if k.world {
        return "MPI_COMM_WORLD".into();
    }
    match &k.world_ranks {
        Some(w) if !w.is_empty() => format!("the communicator of {}", super::ranks_words(w)),
        _ => format!("a communicator of {} ranks", k.size),
    }
}

/// Whether the queues of `p` are the flight recorder's (its MPI gives none).
pub(crate) fn recorded(p: &ProcessSnapshot) -> bool {
    p.queues_missing.is_some()
        && p.communicators
            .iter()
            .any(|c| c.world_ranks_source.as_deref() == Some(SOURCE))
}

/// The error that keeps a process's queues from being read: none when the
/// flight recorder's stand in for them (the error is the story of the
/// MPI's own, missing).
pub(crate) fn queue_error(p: &ProcessSnapshot) -> Option<&String> {
    p.error.as_ref().filter(|_| !recorded(p))
}

/// Gives every process whose MPI shows no queues, and whose recorder can
/// say what it waits on, the queues and call arguments the recorder kept;
/// returns notes on the ones it could not.
pub(crate) fn apply(snap: &mut Snapshot) -> Vec<String> {
    let mut notes = Vec::new();
    for p in &mut snap.processes {
        if p.queues_missing.is_none() {
            complete(p);
            continue;
        }
        // MPICH ch4's debug library lists communicators whose receives it
        // reads wrongly (MissingReason::LibraryUntrusted): the recorder's,
        // whole, stand in for them, its sends too (one source, not two to
        // reconcile).
        let untrusted = p
            .queues_missing
            .as_ref()
            .is_some_and(|m| m.reason == MissingReason::LibraryUntrusted);
        if !p.communicators.is_empty() && !untrusted {
            continue;
        }
        let Some(rec) = p.recorder.as_ref() else {
            continue;
        };
        if !rec.initialized || rec.mpi == "unknown" || rec.comms.is_empty() {
            continue;
        }
        let who = p
            .world_rank
            .map_or_else(|| "a process".to_string(), |r| format!("rank {r}"));
        if !rec.pending_complete {
            notes.push(format!(
                "{who}: the flight recorder's table of pending requests overflowed; its pending requests are not used"
            ));
            continue;
        }
        let calls = match in_progress(p, rec) {
            Ok(calls) => calls,
            Err(Unrecorded { tid, call }) => {
                notes.push(format!(
                    "{who}: its thread {tid} is in {}, which the flight recorder did not record; its pending requests are not used",
                    c_name(&call)
                ));
                continue;
            }
        };
        let comms = communicators(rec);
        let stacks = p.stacks.get_or_insert_with(Default::default);
        for (tid, entry, name, c) in calls {
            let at = stacks.calls.iter().position(|m| m.tid == tid);
            let m = match at {
                Some(i) => &mut stacks.calls[i],
                None => {
                    stacks.calls.push(MpiCall {
                        tid,
                        frame: u32::try_from(entry).unwrap_or(u32::MAX),
                        call: name,
                        ..MpiCall::default()
                    });
                    stacks.calls.last_mut().expect("just pushed")
                }
            };
            fill(m, c, rec, &comms);
        }
        // The frames gave some calls the communicator of the library's
        // list (ch4's, replaced here): the recorder's of the same handle
        // stands in, or none.
        for m in &mut stacks.calls {
            if m.communicator
                .as_ref()
                .is_some_and(|id| !comms.iter().any(|k| &k.id == id))
            {
                m.communicator = m
                    .comm_handle
                    .as_ref()
                    .filter(|h| comms.iter().any(|k| &k.id == *h))
                    .cloned();
            }
        }
        p.communicators = comms;
        p.messages.push(if untrusted {
            "its MPI's debug library reads receives wrongly: the pending requests and call arguments shown are \
             from mpiq's flight recorder"
                .into()
        } else {
            "its MPI shows no message queues: the pending requests and call arguments shown are from mpiq's flight recorder"
                .into()
        });
    }
    notes
}

/// A process whose debug library gives its queues: a call whose frames did
/// not give its communicator, peer or tag (the thread stopped in the
/// recorder's own code around the MPI's, or where the compiler kept no
/// argument) gets them from the recorder's record of it, the communicator
/// only where exactly one of the library's is the recorder's: its
/// MPI_COMM_WORLD, or the one with the same size, rank and members.
fn complete(p: &mut ProcessSnapshot) {
    let (Some(rec), Some(st)) = (p.recorder.as_ref(), p.stacks.as_mut()) else {
        return;
    };
    if !rec.initialized {
        return;
    }
    for m in &mut st.calls {
        if m.communicator.is_some() && (m.peer.is_some() || m.any_source) && (m.tag.is_some() || m.any_tag) {
            continue;
        }
        let Some(c) = rec
            .calls
            .iter()
            .rev()
            .find(|c| c.tid == m.tid && c.end_ns.is_none() && c.call == m.call)
        else {
            continue;
        };
        let Some(k) = c
            .args
            .comm
            .as_ref()
            .and_then(|h| rec.comms.iter().find(|k| &k.handle == h))
        else {
            continue;
        };
        let members = if k.world {
            Some((0..k.size).collect::<Vec<i64>>())
        } else {
            k.world_ranks.clone()
        };
        let same = |q: &Communicator| {
            q.size == Some(k.size)
                && q.local_rank == Some(k.rank)
                && (if k.world {
                    q.name == "MPI_COMM_WORLD"
                } else {
                    members.as_ref().is_some_and(|w| {
                        q.world_ranks
                            .as_ref()
                            .is_some_and(|g| g.iter().copied().eq(w.iter().map(|&r| Some(r))))
                    })
                })
        };
        let mut matching = p.communicators.iter().filter(|q| same(q));
        let (Some(q), None) = (matching.next(), matching.next()) else {
            continue;
        };
        let mut gave = false;
        if m.communicator.is_none() {
            m.communicator = Some(q.id.clone());
            gave = true;
        }
        if !matches!(classify(&c.call), CallClass::Collective { .. } | CallClass::Wait { .. }) {
            gave |= peer_and_tag(m, &c.args);
        }
        if gave {
            m.recorded = true;
            m.why = None;
        }
    }
}

/// A thread in a blocking MPI call the recorder has no running record of.
struct Unrecorded {
    tid: u64,
    call: String,
}

/// A thread's running call: (thread, entry frame, call, its record).
type Running<'r> = (u64, usize, String, &'r RecordedCall);

/// The recorder's in-progress call of each application thread the stacks
/// show in a blocking MPI call, or the first thread whose is not known.
fn in_progress<'r>(p: &ProcessSnapshot, rec: &'r Recording) -> Result<Vec<Running<'r>>, Unrecorded> {
    let mut out = Vec::new();
    let Some(st) = &p.stacks else {
        return Ok(out);
    };
    for t in &st.threads {
        let Position::InMpi { call, class, .. } = position(t) else {
            continue;
        };
        if !class.blocks() {
            continue;
        }
        // The thread's latest call that has not returned: the one it is in
        // (a call the MPI makes from inside another comes later).
        let running = rec
            .calls
            .iter()
            .rev()
            .find(|c| c.tid == t.tid && c.end_ns.is_none() && c.call == call);
        let Some(c) = running else {
            return Err(Unrecorded { tid: t.tid, call });
        };
        let entry = outermost_entry(t).map_or(0, |(i, _)| i);
        out.push((t.tid, entry, call, c));
    }
    Ok(out)
}

/// The recorder's communicators, with their queues.
fn communicators(rec: &Recording) -> Vec<Communicator> {
    let running: Vec<&RecordedCall> = rec.calls.iter().filter(|c| c.end_ns.is_none()).collect();
    rec.comms
        .iter()
        .map(|c| {
            let members: Option<Vec<i64>> = if c.world {
                Some((0..c.size).collect())
            } else {
                c.world_ranks.clone()
            };
            let world = |local: Option<i64>| {
                let l = usize::try_from(local?).ok()?;
                members.as_ref()?.get(l).copied()
            };
            let on_comm = |a: &RecordedArgs| a.comm.as_deref() == Some(c.handle.as_str());
            let mut receives = Vec::new();
            let mut sends = Vec::new();
            // Nonblocking requests started and not completed.
            for r in rec.pending.iter().filter(|r| on_comm(&r.args)) {
                let op = operation(&r.args, &world, request_words(r), Some(r.request.clone()));
                match r.call.as_str() {
                    "irecv" | "imrecv" | "recv_init" => receives.push(op),
                    "isend" | "issend" | "ibsend" | "irsend" | "send_init" | "ssend_init" | "bsend_init"
                    | "rsend_init" => sends.push(op),
                    _ => {}
                }
            }
            // Blocking receives in progress, as a debug library lists them
            // (blocking sends are not listed, as MPICH's library does not:
            // their waits come from the calls' arguments).
            for r in running.iter().filter(|r| on_comm(&r.args)) {
                let words = vec![format!(
                    "from mpiq's flight recorder: {} (call {}), running",
                    c_name(&r.call),
                    r.seq
                )];
                match r.call.as_str() {
                    "recv" => receives.push(operation(&r.args, &world, words, None)),
                    "sendrecv" | "sendrecv_replace" => {
                        let recv = RecordedArgs {
                            peer: r.source,
                            any_source: r.source.is_none(),
                            tag: r.recv_tag,
                            any_tag: r.recv_tag.is_none(),
                            ..r.args.clone()
                        };
                        receives.push(operation(&recv, &world, words, None));
                    }
                    _ => {}
                }
            }
            Communicator {
                id: c.handle.clone(),
                name: comm_name(c),
                size: Some(c.size),
                local_rank: Some(c.rank),
                world_ranks: members.map(|m| m.into_iter().map(Some).collect::<Group>()),
                world_ranks_source: Some(Text::from(SOURCE)),
                world_ranks_rejected: None,
                queues: Queues {
                    sends: Queue::available(sends),
                    receives: Queue::available(receives),
                    unexpected: Queue::unavailable(
                        "mpiq's flight recorder does not see messages that arrive before their receive is posted",
                    ),
                },
            }
        })
        .collect()
}

fn request_words(r: &RecordedRequest) -> Vec<String> {
    vec![format!(
        "from mpiq's flight recorder: {} (call {}), request {}{}",
        c_name(&r.call),
        r.call_seq,
        r.request,
        if r.persistent { ", persistent" } else { "" }
    )]
}

/// A queue operation from a recorded call's arguments.
fn operation(
    a: &RecordedArgs,
    world: &dyn Fn(Option<i64>) -> Option<i64>,
    extra_text: Vec<String>,
    request: Option<String>,
) -> Operation {
    Operation {
        status: Status::Pending,
        peer: Peer {
            local: a.peer,
            world: world(a.peer),
        },
        any_source: a.any_source,
        tag: a.tag,
        any_tag: a.any_tag,
        // Bytes, as Open MPI's library says them.
        length: a.type_size.map(|s| s * a.count),
        buffer: String::new(),
        system_buffer: false,
        actual: None,
        extra_text,
        request,
    }
}

/// Fills what the frames did not give of a call from its record.
fn fill(m: &mut MpiCall, c: &RecordedCall, rec: &Recording, comms: &[Communicator]) {
    let mut gave = false;
    let class = classify(&c.call);
    if let Some(h) = &c.args.comm {
        if comms.iter().any(|k| &k.id == h) {
            // None, or one of a library's list the recorder's replace.
            let known = m
                .communicator
                .as_ref()
                .is_some_and(|id| comms.iter().any(|k| &k.id == id));
            if !known {
                m.communicator = Some(h.clone());
                gave = true;
            }
            if m.comm_handle.is_none() {
                m.comm_handle = Some(h.clone());
            }
        }
    }
    match class {
        CallClass::Collective { .. } => {
            if m.root.is_none() && c.args.peer.is_some() {
                m.root = c.args.peer;
                gave = true;
            }
            m.collective_seq = c.args.collective_seq;
        }
        CallClass::Wait { .. } | CallClass::Poll { .. } if c.call != "iprobe" && c.call != "improbe" => {
            // Every request it was given that is not null must be known.
            if c.requests_active.is_some() && c.requests_active == c.requests_known {
                let mine: Vec<String> = rec
                    .pending
                    .iter()
                    .filter(|r| r.waited_by == Some(c.seq))
                    .map(|r| r.request.clone())
                    .collect();
                if i64::try_from(mine.len()).ok() == c.requests_known {
                    m.requests = Some(mine);
                    gave = true;
                }
            }
        }
        _ => gave |= peer_and_tag(m, &c.args),
    }
    if gave {
        m.recorded = true;
        m.why = None;
    }
}

/// The peer and tag the frames did not give of a point-to-point call, from
/// its record; whether it gave any.
fn peer_and_tag(m: &mut MpiCall, a: &RecordedArgs) -> bool {
    let mut gave = false;
    if m.peer.is_none() && !m.any_source && (a.peer.is_some() || a.any_source) {
        m.peer = a.peer;
        m.any_source = a.any_source;
        gave = true;
    }
    if m.tag.is_none() && !m.any_tag && (a.tag.is_some() || a.any_tag) {
        m.tag = a.tag;
        m.any_tag = a.any_tag;
        gave = true;
    }
    gave
}

/// Where the ranks are among the collectives of each communicator, when
/// the flight recorder shows them in different ones (PyTorch's flight
/// recorder says "not all ranks joining collective 5"): `collectives on
/// MPI_COMM_WORLD (mpiq's flight recorder): ranks 0-2 are in #42
/// (MPI_Allreduce), rank 3 in #41 (MPI_Allreduce); rank 4 is in none (it
/// has begun 40)`. A communicator is known across processes by its
/// members' world ranks, where no process has two with the same.
pub(crate) fn collective_notes(snap: &Snapshot) -> Vec<String> {
    use std::collections::BTreeMap;
    type Key = Vec<i64>;
    /// A communicator's name; its ranks by the collective (number, call)
    /// they are in; the others by how many they have begun.
    type OnComm = (String, BTreeMap<(u64, String), Vec<i64>>, BTreeMap<u64, Vec<i64>>);
    // Per communicator: its name, who is in which collective, who in none.
    let mut by: BTreeMap<Key, OnComm> = BTreeMap::new();
    for p in snap.processes.iter().filter(|p| recorded(p)) {
        let (Some(rank), Some(rec)) = (p.world_rank.map(i64::from), p.recorder.as_ref()) else {
            continue;
        };
        let keyed: Vec<(Key, &crate::snapshot::recorder::RecordedComm)> = rec
            .comms
            .iter()
            .filter_map(|k| {
                let members = if k.world {
                    (0..k.size).collect()
                } else {
                    k.world_ranks.clone()?
                };
                Some((members, k))
            })
            .collect();
        for (key, k) in &keyed {
            if keyed.iter().filter(|(other, _)| other == key).count() > 1 {
                continue;
            }
            let name = comm_name(k);
            let entry = by
                .entry(key.clone())
                .or_insert_with(|| (name, BTreeMap::new(), BTreeMap::new()));
            let in_one = rec.calls.iter().rev().find(|c| {
                c.end_ns.is_none()
                    && c.args.comm.as_deref() == Some(k.handle.as_str())
                    && c.args.collective_seq.is_some()
            });
            match in_one {
                Some(c) => entry
                    .1
                    .entry((c.args.collective_seq.unwrap_or(0), c.call.clone()))
                    .or_default()
                    .push(rank),
                None => entry.2.entry(k.collectives).or_default().push(rank),
            }
        }
    }
    let mut notes = Vec::new();
    for (_, (name, inside, outside)) in by {
        if inside.is_empty() || (inside.len() == 1 && outside.is_empty()) {
            continue;
        }
        let mut parts: Vec<String> = inside
            .iter()
            .rev()
            .map(|((seq, call), ranks)| {
                let verb = if ranks.len() == 1 { "is" } else { "are" };
                format!("{} {verb} in #{seq} ({})", super::ranks_words(ranks), c_name(call))
            })
            .collect();
        for (begun, ranks) in outside.iter().rev() {
            let (verb, has) = if ranks.len() == 1 {
                ("is", "it has")
            } else {
                ("are", "each has")
            };
            parts.push(format!(
                "{} {verb} in none ({has} begun {begun})",
                super::ranks_words(ranks)
            ));
        }
        notes.push(format!(
            "collectives on {name} (mpiq's flight recorder): {}",
            parts.join("; ")
        ));
    }
    notes
}

/// Where a process has both its MPI's queues and the flight recorder, they
/// must agree: every receive the debug library lists as posted on
/// `MPI_COMM_WORLD` is a request the recorder holds as pending (or the
/// blocking receive a thread is in), with the same source and tag. The
/// recorder may hold more (a receive already matched, not yet waited on).
/// One note per process where they do not.
pub(crate) fn agreement_notes(snap: &Snapshot) -> Vec<String> {
    let mut notes = Vec::new();
    for p in &snap.processes {
        let (Some(rec), None) = (&p.recorder, &p.queues_missing) else {
            continue;
        };
        if !rec.initialized || !rec.pending_complete {
            continue;
        }
        let Some(handle) = rec.comms.iter().find(|k| k.world).map(|k| k.handle.as_str()) else {
            continue;
        };
        let Some(world) = p.communicators.iter().find(|c| c.name == "MPI_COMM_WORLD") else {
            continue;
        };
        if !world.queues.receives.available {
            continue;
        }
        let on_world = |a: &RecordedArgs| a.comm.as_deref() == Some(handle);
        let key = |peer: Option<i64>, any_source: bool, tag: Option<i64>, any_tag: bool| {
            (
                (!any_source).then_some(peer).flatten(),
                any_source,
                (!any_tag).then_some(tag).flatten(),
                any_tag,
            )
        };
        let mut recorded: Vec<_> = rec
            .pending
            .iter()
            .filter(|r| matches!(r.call.as_str(), "irecv" | "imrecv" | "recv_init") && on_world(&r.args))
            .map(|r| key(r.args.peer, r.args.any_source, r.args.tag, r.args.any_tag))
            .chain(
                rec.calls
                    .iter()
                    .filter(|c| c.end_ns.is_none() && c.call == "recv" && on_world(&c.args))
                    .map(|c| key(c.args.peer, c.args.any_source, c.args.tag, c.args.any_tag)),
            )
            .collect();
        let mut missing = Vec::new();
        for op in &world.queues.receives.operations {
            let k = key(op.peer.local, op.any_source, op.tag, op.any_tag);
            match recorded.iter().position(|r| *r == k) {
                Some(i) => {
                    recorded.swap_remove(i);
                }
                None => missing.push(match (k.0, k.1) {
                    (_, true) => format!("from ANY_SOURCE, {}", super::tag_words(k.2)),
                    (Some(s), _) => format!("from rank {s}, {}", super::tag_words(k.2)),
                    (None, _) => format!("from an unknown rank, {}", super::tag_words(k.2)),
                }),
            }
        }
        if !missing.is_empty() {
            let who = p.world_rank.map_or_else(|| "a process".into(), |r| format!("rank {r}"));
            notes.push(format!(
                "{who}: the debug library lists posted receives on MPI_COMM_WORLD that mpiq's flight recorder does not hold ({}): made by a call it does not record, or one of them is wrong",
                missing.join("; ")
            ));
        }
    }
    notes
}
