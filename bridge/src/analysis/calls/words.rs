//! Where each rank is, in words: "rank 0 is in MPI_Barrier on
//! MPI_COMM_WORLD (solver.c:88)", "ranks 1-3 wait in MPI_Recv from rank 0,
//! tag 3 (solver.c:41)".

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{c_name, Call, Place};
use crate::analysis::job::{comm_words, translate, Job};
use crate::analysis::words::ranks_words;
use crate::snapshot::model::Snapshot;
use crate::stacks::names::CallClass;
use crate::stacks::position::Through;
use crate::stacks::python::PythonExit;

/// Where one rank is, for [`crate::analysis::Analysis::where_`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankWhere {
    /// World rank.
    pub rank: i64,
    /// `in_mpi`, `computing`, `idle` (blocked outside MPI) or `unknown`
    /// (no stacks).
    pub state: String,
    /// In words, without the rank: "is in MPI_Barrier on MPI_COMM_WORLD
    /// (solver.c:88)".
    pub text: String,
    /// The rank's MPI calls made through another library: for each, the
    /// library's function the application called and the application's
    /// frame (its threads' order).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub through: Vec<Through>,
}

/// A description without its subject, in the singular and the plural.
struct Said {
    one: String,
    many: String,
}

fn said(verb_one: &str, verb_many: &str, rest: &str) -> Said {
    Said {
        one: format!("{verb_one} {rest}"),
        many: format!("{verb_many} {rest}"),
    }
}

/// `solver.c:88` from a caller `main (solver.c:88)`: the last parenthesis,
/// when it ends the words and names a line (a C++ caller's own name may
/// hold parentheses: `std::function<void ()>::operator()`).
pub(crate) fn caller_line(caller: &str) -> Option<&str> {
    let inner = caller.get(caller.rfind(" (")? + 2..)?.strip_suffix(')')?;
    inner
        .rsplit_once(':')
        .is_some_and(|(_, n)| n.parse::<u32>().is_ok())
        .then_some(inner)
}

/// ` (solver.c:88)` from a caller `main (solver.c:88)`, or `, called from X`.
fn location(caller: &Option<String>) -> String {
    match caller {
        Some(c) => match caller_line(c) {
            Some(l) => format!(" ({l})"),
            None => format!(", called from {c}"),
        },
        None => String::new(),
    }
}

fn call_said(snap: &Snapshot, pi: usize, call: &Call) -> Said {
    let name = c_name(&call.name);
    let comm = call.comm.and_then(|ci| snap.processes.get(pi)?.communicators.get(ci));
    let on = comm.map(|c| format!(" on {}", comm_words(&c.name))).unwrap_or_default();
    let args = call.args.as_ref();
    let peer = |dir: &str| {
        let a = args?;
        if a.any_source {
            return Some(format!(" {dir} any rank"));
        }
        let l = a.peer?;
        let w = comm.and_then(|c| translate(c, Some(l)));
        Some(match w {
            Some(w) => format!(" {dir} rank {w}"),
            None => format!(" {dir} local rank {l}"),
        })
    };
    let tag = args
        .and_then(|a| {
            if a.any_tag {
                Some("any tag".to_string())
            } else {
                a.tag.map(|t| format!("tag {t}"))
            }
        })
        .map(|t| format!(", {t}"))
        .unwrap_or_default();
    // Through another library: its function the application called and the
    // application's frame, before the MPI call, in place of the caller.
    let (name, at) = match &call.through {
        Some(via) => (format!("{} > {name}", via.words()), String::new()),
        None => (name, location(&call.caller)),
    };
    if let Some(exit) = call.python_exit {
        return python_exit_said(exit, call.args.as_ref().and_then(|a| a.python_exit_status), &name, &on);
    }
    if let Some(py) = &call.python_call {
        // `comm.bcast(root=1) at solver.py:42 (MPI_Bcast on MPI_COMM_WORLD)`:
        // the arguments as the program wrote them (ranks of the
        // communicator).
        return said(
            "waits in",
            "wait in",
            &format!("{py}({}){} ({name}{on})", python_args(call), python_place(&call.caller)),
        );
    }
    match call.class {
        CallClass::Recv => said(
            "waits in",
            "wait in",
            &format!("{name}{}{tag}{on}{at}", peer("from").unwrap_or_default()),
        ),
        CallClass::Send { .. } => said(
            "waits in",
            "wait in",
            &format!("{name}{}{tag}{on}{at}", peer("to").unwrap_or_default()),
        ),
        CallClass::SendRecv | CallClass::Wait { .. } | CallClass::Poll { .. } => {
            said("waits in", "wait in", &format!("{name}{on}{at}"))
        }
        _ => said("is in", "are in", &format!("{name}{on}{at}")),
    }
}

/// The arguments of a Python call that say whom it waits for:
/// `source=1, tag=7`, `dest=2`, `root=1`.
fn python_args(call: &Call) -> String {
    let Some(a) = call.args.as_ref() else {
        return String::new();
    };
    let mut shown = Vec::new();
    let peer = match call.class {
        CallClass::Recv => Some("source"),
        CallClass::Send { .. } => Some("dest"),
        _ => None,
    };
    if let Some(key) = peer {
        if a.any_source {
            shown.push(format!("{key}=ANY_SOURCE"));
        } else if let Some(p) = a.peer {
            shown.push(format!("{key}={p}"));
        }
        if a.any_tag {
            shown.push("tag=ANY_TAG".to_string());
        } else if let Some(t) = a.tag {
            shown.push(format!("tag={t}"));
        }
    }
    if let Some(r) = a.root {
        shown.push(format!("root={r}"));
    }
    shown.join(", ")
}

/// ` at solver.py:42` from a caller `solve (solver.py:42)`.
fn python_place(caller: &Option<String>) -> String {
    caller
        .as_deref()
        .and_then(caller_line)
        .map(|l| format!(" at {l}"))
        .unwrap_or_default()
}

/// A Python program in `name` from the interpreter's exit.
fn python_exit_said(exit: PythonExit, status: Option<i64>, name: &str, on: &str) -> Said {
    let (one, many) = match (status, exit) {
        (_, PythonExit::SysExit) => ("called sys.exit()".to_string(), "called sys.exit()".to_string()),
        (Some(0), _) => (
            "ran its script to its end".to_string(),
            "ran their scripts to their end".to_string(),
        ),
        (Some(1), _) => (
            "exited its script with an uncaught exception".to_string(),
            "exited their scripts with an uncaught exception".to_string(),
        ),
        (Some(s), _) => (
            format!("ended its script with exit status {s}"),
            format!("ended their scripts with exit status {s}"),
        ),
        (None, PythonExit::ScriptEnded) => (
            "has left its Python script".to_string(),
            "have left their Python scripts".to_string(),
        ),
    };
    Said {
        one: format!("{one} and waits in {name}{on}"),
        many: format!("{many} and wait in {name}{on}"),
    }
}

fn place_said(snap: &Snapshot, pi: usize, place: &Place) -> (&'static str, Said) {
    match place {
        Place::NoStacks(why) => (
            "unknown",
            said("has no known stack", "have no known stack", &format!("({why})")),
        ),
        Place::Computing(at) if process_stopped(snap, pi) => (
            "stopped",
            said(
                "is stopped by a signal",
                "are stopped by a signal",
                &format!("(in {at})"),
            ),
        ),
        Place::Computing(at) => (
            "computing",
            said("is computing", "are computing", &format!("(in {at})")),
        ),
        Place::Idle(what) => (
            "idle",
            said(
                "is blocked outside MPI",
                "are blocked outside MPI",
                &format!("in {what}"),
            ),
        ),
        Place::InMpiUnnamed(at) => (
            "in_mpi_unnamed",
            said(
                "is in MPI in a call without a symbol",
                "are in MPI in calls without a symbol",
                &format!("(in {at})"),
            ),
        ),
        Place::InMpi(calls) => {
            let parts: Vec<Said> = calls.iter().map(|c| call_said(snap, pi, c)).collect();
            let join = |f: fn(&Said) -> &String| parts.iter().map(f).cloned().collect::<Vec<_>>().join(" and ");
            (
                "in_mpi",
                Said {
                    one: join(|s| &s.one),
                    many: join(|s| &s.many),
                },
            )
        }
    }
}

/// Whether process `pi` was stopped by a signal before mpiq came (`T`).
pub(crate) fn process_stopped(snap: &Snapshot, pi: usize) -> bool {
    snap.processes
        .get(pi)
        .and_then(|p| p.os.as_ref())
        .is_some_and(crate::snapshot::model::OsState::stopped)
}

/// How a rank waits in MPI, for [`crate::analysis::Waiter`]: its
/// description in the singular and the plural, without the rank ("waits
/// in MPI_Allreduce on MPI_COMM_WORLD (solver.c:88)"), its first call's
/// C name and the `file:line` it was called from. `None` unless the rank
/// is in a blocking MPI call.
pub(crate) fn waiting_said(
    snap: &Snapshot,
    job: &Job,
    places: &BTreeMap<i64, Place>,
    r: i64,
) -> Option<(String, String, Option<String>, Option<String>)> {
    let (Some(place @ Place::InMpi(calls)), Some(&pi)) = (places.get(&r), job.procs.get(&r)) else {
        return None;
    };
    let (_, s) = place_said(snap, pi, place);
    // A collective "is in" its call; here every call is waited in.
    let waits = |words: &str, is: &str, wait: &str| words.replace(&format!("{is} "), &format!("{wait} "));
    let first = calls.first();
    Some((
        waits(&s.one, "is in", "waits in"),
        waits(&s.many, "are in", "wait in"),
        first.map(|c| c_name(&c.name)),
        first
            .and_then(|c| c.caller.as_deref())
            .and_then(caller_line)
            .map(str::to_string),
    ))
}

/// Every rank's place in words; nothing when no process has stacks
/// (`--no-stacks`, a recording without them).
pub(crate) fn where_list(snap: &Snapshot, job: &Job, places: &BTreeMap<i64, Place>) -> Vec<RankWhere> {
    if snap.processes.iter().all(|p| p.stacks.is_none()) {
        return Vec::new();
    }
    places
        .iter()
        .filter_map(|(&r, p)| {
            let &pi = job.procs.get(&r)?;
            let (state, s) = place_said(snap, pi, p);
            let through = match p {
                Place::InMpi(calls) => calls.iter().filter_map(|c| c.through.clone()).collect(),
                _ => Vec::new(),
            };
            Some(RankWhere {
                rank: r,
                state: state.to_string(),
                text: s.one,
                through,
            })
        })
        .collect()
}

/// The places of `ranks` in words, ranks with the same description
/// together: "rank 0 is in MPI_Barrier on MPI_COMM_WORLD (a.c:9); ranks
/// 1-3 wait in MPI_Recv from rank 0, tag 3 (a.c:5)"; at most `most`
/// descriptions. `None` when none of them has a known stack.
pub(crate) fn ranks_said(
    snap: &Snapshot,
    job: &Job,
    places: &BTreeMap<i64, Place>,
    ranks: &[i64],
    most: usize,
) -> Option<String> {
    let mut by: Vec<(String, String, Vec<i64>)> = Vec::new();
    let mut known = false;
    for &r in ranks {
        let (Some(p), Some(&pi)) = (places.get(&r), job.procs.get(&r)) else {
            continue;
        };
        known |= !matches!(p, Place::NoStacks(_));
        let (_, s) = place_said(snap, pi, p);
        match by.iter_mut().find(|(one, _, _)| *one == s.one) {
            Some((_, _, rs)) => rs.push(r),
            None => by.push((s.one, s.many, vec![r])),
        }
    }
    if !known {
        return None;
    }
    let mut parts: Vec<String> = by
        .iter()
        .take(most)
        .map(|(one, many, rs)| {
            let verb = if rs.len() == 1 { one } else { many };
            format!("{} {verb}", ranks_words(rs))
        })
        .collect();
    if by.len() > most {
        let rest: Vec<i64> = by.iter().skip(most).flat_map(|(_, _, rs)| rs.iter().copied()).collect();
        parts.push(format!("{} are elsewhere", ranks_words(&rest)));
    }
    Some(parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_callers_line_is_its_last_parenthesis_when_it_names_one() {
        assert_eq!(caller_line("main (solver.c:88)"), Some("solver.c:88"));
        assert_eq!(
            caller_line("solve (raise_before_bcast.py:50)"),
            Some("raise_before_bcast.py:50")
        );
        let cxx = "std::function<void ()>::operator() (functional:591)";
        assert_eq!(caller_line(cxx), Some("functional:591"));
        assert_eq!(caller_line("std::function<void ()>::operator()"), None);
        assert_eq!(
            location(&Some("std::function<void ()>::operator()".into())),
            ", called from std::function<void ()>::operator()"
        );
        assert_eq!(location(&Some("main (solver.c:88)".into())), " (solver.c:88)");
        assert_eq!(python_place(&Some("0x401000".into())), "");
    }
}
