//! A blocking receive or probe the queues do not list: `MPI_Probe` and
//! `MPI_Mprobe` post no receive at all (mpi4py's `comm.recv` of a pickled
//! object probes first), and a receive whose request left the queue is
//! about to return. It waits for its source to send a matching message.

use super::{blocked_sending, c_name, call_wait, unknown_partners, unresolved, Call, Scene};
use crate::analysis::job::{comm_words, translate};
use crate::analysis::matching::{Target, Wait};
use crate::analysis::model::OpKind;
use crate::analysis::words::tag_words;

/// The waits of rank `r`'s blocking receive or probe `call` that no queue
/// operation of it stands for. Empty when its source has a matching send
/// pending (it can match now); certain only when the previous sample saw
/// it in the same call (else it may just have matched and be returning).
pub(super) fn unlisted_recv(scene: &Scene<'_>, r: i64, call: &Call) -> Vec<Wait> {
    let name = c_name(&call.name);
    let Some(&pr) = scene.job.procs.get(&r) else {
        return Vec::new();
    };
    let p = &scene.snap.processes[pr];
    let args = call.args.as_ref();
    let comm = call.comm.and_then(|ci| Some((ci, p.communicators.get(ci)?)));
    let certain = (scene.confirmed)(r);
    let unsure = |what: &str| {
        (!certain).then(|| format!("rank {r} is in {name} {what}; a second sample tells whether it stays there"))
    };
    let Some((ci, c)) = comm else {
        return unknown_partners(
            scene,
            r,
            call,
            "for a message from an unknown rank",
            "whose communicator could not be recovered",
        );
    };
    let on = comm_words(&c.name);
    let tag = args.and_then(|a| if a.any_tag { None } else { a.tag });
    let sources: Vec<i64> = if args.is_some_and(|a| a.any_source) {
        c.world_ranks
            .iter()
            .flat_map(|g| g.iter())
            .flatten()
            .copied()
            .filter(|&w| w != r)
            .collect()
    } else {
        args.and_then(|a| translate(c, a.peer)).into_iter().collect()
    };
    if sources.is_empty() {
        let words = format!("rank {r} waits in {name} for a message on {on}");
        let why = format!("rank {r} is in {name} on {on}, whose source could not be recovered");
        return unresolved(r, call, OpKind::Call, 1, words, why);
    }
    let id = scene.ids.get(pr, ci);
    // A matching message is on its way (in its source's send queue, or its
    // source in a blocking send that matches): it can match now.
    let tag_known = args.is_some_and(|a| a.any_tag || a.tag.is_some());
    if sources
        .iter()
        .any(|&s| sends_pending(scene, s, r, id, tag) || (tag_known && blocked_sending(scene, s, r, id, tag)))
    {
        return Vec::new();
    }
    let from = match sources.as_slice() {
        [s] => format!("rank {s}"),
        _ => "any rank".to_string(),
    };
    let mut words = format!("rank {r} waits in {name} for a message from {from} on {on}");
    if tag.is_some() {
        words.push_str(&format!(" {}", tag_words(tag)));
    }
    let target = match sources.as_slice() {
        [s] => Target::Rank(*s),
        _ => Target::AnyOf {
            ranks: sources.clone(),
            unknown_members: false,
        },
    };
    let mut w = call_wait(
        r,
        call,
        OpKind::Call,
        target,
        certain,
        words,
        unsure(&format!("from {from}")),
    );
    w.communicator = c.name.clone();
    vec![w]
}

/// Whether world rank `s` has a send to world rank `r` pending on the
/// communicator `id` (any, when unknown) with a tag `tag` matches.
fn sends_pending(scene: &Scene<'_>, s: i64, r: i64, id: Option<usize>, tag: Option<i64>) -> bool {
    let Some(&ps) = scene.job.procs.get(&s) else {
        return false;
    };
    let p = &scene.snap.processes[ps];
    p.communicators.iter().enumerate().any(|(cj, c)| {
        let same = id.is_none() || scene.ids.get(ps, cj) == id;
        same && c.queues.sends.operations.iter().any(|o| {
            let to = o.peer.world.or_else(|| translate(c, o.peer.local));
            to == Some(r) && (tag.is_none() || o.tag == tag)
        })
    })
}
