//! What the stacks of the stacks-only ranks (their MPI gives no readable
//! queues) lack for a verdict, in words for the summary.

use super::calls::{ranks_said, Place};
use super::inputs::{digested, Inputs, StackFacts};
use super::words::ranks_words;
use crate::stacks::names::CallClass;

/// What the stacks of the stacks-only ranks lack for a verdict.
pub(super) fn stacks_only_missing(inp: &Inputs<'_>, only: &[i64]) -> String {
    let st = &inp.stacks;
    let not_blocked: Vec<i64> = st
        .places
        .iter()
        .filter(|(_, p)| !matches!(p, Place::InMpi(_) | Place::InMpiUnnamed(_)))
        .map(|(r, _)| *r)
        .collect();
    let unnamed: Vec<i64> = st
        .places
        .iter()
        .filter(|(_, p)| matches!(p, Place::InMpiUnnamed(_)))
        .map(|(r, _)| *r)
        .collect();
    // Ranks whose process has exited: they will not arrive.
    let gone = |r: &i64| {
        inp.job
            .procs
            .get(r)
            .is_some_and(|&pi| super::waited::gone(&st.snap.processes[pi]))
    };
    let (gone, not_blocked): (Vec<i64>, Vec<i64>) = not_blocked.into_iter().partition(gone);
    let mut why = if inp.progress.is_none() {
        "from stacks alone a deadlock needs two samples that show every rank blocked in MPI in the same \
         place (one sample, or a core file, cannot)"
            .to_string()
    } else if !not_blocked.is_empty() {
        format!(
            "{} not blocked inside MPI, so may still arrive",
            match not_blocked.len() {
                1 => format!("rank {} is", not_blocked[0]),
                _ => format!("{} are", ranks_words(&not_blocked)),
            }
        )
    } else if !gone.is_empty() {
        format!(
            "{} exited and will never arrive, but from stacks alone whether the others wait for {} cannot \
             be told (their calls' arguments are not known)",
            match gone.len() {
                1 => format!("rank {} has", gone[0]),
                _ => format!("{} have", ranks_words(&gone)),
            },
            if gone.len() == 1 { "it" } else { "them" }
        )
    } else if !unnamed.is_empty() {
        format!(
            "the stacks cannot name the MPI call of {} (the MPI library has no symbol there)",
            ranks_words(&unnamed)
        )
    } else if inp.progress.as_ref().is_some_and(|p| !p.changed.is_empty()) {
        "some ranks moved between the two samples".to_string()
    } else if let Some(r) = Some(undigested(st)).filter(|r| !r.is_empty()) {
        format!(
            "from stacks alone a deadlock needs the calling frames of {} unchanged between the samples, and \
             they were not read (mpiq reads none while it writes a recording: they are stack memory), or \
             could not be",
            ranks_words(&r)
        )
    } else if let Some(words) = transfer_possible(inp) {
        words
    } else {
        "the stacks cannot tell whether the ranks' calls can complete (all in one collective, a test \
         loop, or calling frames that could not be read)"
            .to_string()
    };
    if let Some(w) = ranks_said(st.snap, inp.job, st.places, only, 4) {
        why.push_str(&format!("; where they are: {w}"));
    }
    why
}

/// The stacks-only ranks in a blocking MPI call whose calling frames have no
/// digest ([`crate::stacks::state`]).
fn undigested(st: &StackFacts<'_>) -> Vec<i64> {
    st.stacks_only
        .iter()
        .filter(|r| match st.places.get(r) {
            Some(Place::InMpi(calls)) => calls
                .iter()
                .any(|c| !matches!(c.class, CallClass::Poll { .. }) && !digested(c)),
            _ => false,
        })
        .copied()
        .collect()
}

/// Two ranks without queues whose blocking calls could be the two ends of
/// one point-to-point transfer: one in a blocking send (`MPI_Send`,
/// `MPI_Ssend`, `MPI_Sendrecv`), another in a call that may receive it
/// (`MPI_Recv`, a probe, `MPI_Sendrecv`, a wait). Their arguments are not
/// known without the MPI's debug information, so any such pair may match.
/// In words, for the summary; `None` when there is none.
pub(super) fn transfer_possible(inp: &Inputs<'_>) -> Option<String> {
    let st = &inp.stacks;
    let calls = |r: &i64| match st.places.get(r) {
        Some(Place::InMpi(calls)) => calls.as_slice(),
        _ => &[],
    };
    // A blocking send: a wait's requests are not known without the queues,
    // and counting every wait as a possible send would leave no Irecv/Wait
    // deadlock a deadlock (docs/design/stacks.md §5.5 says what that misses).
    let may_send = |c: &super::calls::Call| matches!(c.class, CallClass::Send { .. } | CallClass::SendRecv);
    // A probe too: a message on its way completes it.
    let may_recv =
        |c: &super::calls::Call| matches!(c.class, CallClass::Recv | CallClass::SendRecv | CallClass::Wait { .. });
    // The first two ranks that may receive, in order: the first of them
    // that is not the sender is the one a search over every rank would
    // find (one pass, not one per sender: 100,000 stacks-only ranks).
    let receivers: Vec<(i64, &super::calls::Call)> = st
        .stacks_only
        .iter()
        .filter_map(|&b| calls(&b).iter().find(|c| may_recv(c)).map(|c| (b, c)))
        .take(2)
        .collect();
    for a in &st.stacks_only {
        let Some(ca) = calls(a).iter().find(|c| may_send(c)) else {
            continue;
        };
        if let Some(&(b, cb)) = receivers.iter().find(|(b, _)| b != a) {
            let (na, nb) = (
                crate::stacks::position::c_name(&ca.name),
                crate::stacks::position::c_name(&cb.name),
            );
            return Some(format!(
                "rank {a} in {na} and rank {b} in {nb} may be the two ends of one transfer still on \
                 its way (their calls' arguments are not known): without the queues, a large message \
                 moving looks the same as a deadlock in two samples; `mpiq run --detect` tells them \
                 apart over time"
            ));
        }
    }
    None
}
