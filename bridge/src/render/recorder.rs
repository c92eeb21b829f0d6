//! What mpiq's flight recorder kept, in words: a process's last MPI calls
//! (in its detail), and the job's last calls by group of ranks that made
//! the same ones (after where the ranks are).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::snapshot::model::{ProcessSnapshot, Snapshot};
use crate::snapshot::recorder::{RecordedCall, Recording};
use crate::stacks::position::c_name;
use crate::stacks::ranks_text;

/// Calls shown per process, and per group of the job.
pub const LAST_CALLS: usize = 6;
/// Groups of the job shown before "and N more".
const MOST_GROUPS: usize = 8;

/// The name of a communicator handle, as the recorder's table says it.
fn comm_name(rec: &Recording, handle: &str) -> String {
    match rec.comms.iter().find(|k| k.handle == handle) {
        Some(k) => crate::analysis::recorded_comm_name(k),
        None => format!("comm {handle}"),
    }
}

/// One call: `MPI_Irecv(source 2, tag 401, 16 x 4 B, MPI_COMM_WORLD)`;
/// `peers`: with its peer and tag (a group's calls leave them out when
/// its ranks' differ).
pub fn call_text(rec: &Recording, c: &RecordedCall, peers: bool) -> String {
    let a = &c.args;
    let mut parts: Vec<String> = Vec::new();
    let is_recv = matches!(
        c.call.as_str(),
        "recv" | "irecv" | "probe" | "iprobe" | "mprobe" | "improbe" | "recv_init"
    );
    let collective = a.collective_seq.is_some();
    if peers {
        let role = if collective {
            "root"
        } else if is_recv {
            "source"
        } else {
            "dest"
        };
        if a.any_source {
            parts.push(format!("{role} ANY_SOURCE"));
        } else if let Some(p) = a.peer {
            parts.push(format!("{role} {p}"));
        }
        if a.any_tag {
            parts.push("tag ANY_TAG".into());
        } else if let Some(t) = a.tag {
            parts.push(format!("tag {t}"));
        }
        if let Some(s) = c.source {
            parts.push(format!("source {s}"));
        }
        if let Some(t) = c.recv_tag {
            parts.push(format!("recv tag {t}"));
        }
    }
    if let Some(n) = c.requests_active {
        parts.push(format!("{n} request{}", if n == 1 { "" } else { "s" }));
    } else if a.count > 0 {
        match a.type_size {
            Some(s) => parts.push(format!("{} x {s} B", a.count)),
            None => parts.push(format!("{} elements", a.count)),
        }
    }
    if let Some(h) = &a.comm {
        parts.push(comm_name(rec, h));
    }
    let name = match a.collective_seq {
        Some(n) => format!("{} #{n}", c_name(&c.call)),
        None => c_name(&c.call),
    };
    let state = if c.end_ns.is_none() { "  (running)" } else { "" };
    format!("{name}({}){state}", parts.join(", "))
}

/// The last calls in words, a run of the same collective (numbers in a
/// row, same arguments) in one line: `MPI_Allreduce #37-#41(...)`.
/// Reads up to `LAST_CALLS` lines back, from the last call.
fn last_lines(rec: &Recording, peers: bool) -> Vec<(u64, String)> {
    // (first call's number, words, run of collective numbers, words
    // without the number)
    type Line = (u64, String, Option<(u64, u64)>, String);
    let mut lines: Vec<Line> = Vec::new();
    for c in rec.calls.iter().rev() {
        let text = call_text(rec, c, peers);
        let n = c.args.collective_seq;
        // The same call with its number left out.
        let bare = match n {
            Some(n) => text.replacen(&format!(" #{n}("), "(", 1),
            None => text.clone(),
        };
        if let (Some(n), Some(last)) = (n, lines.last_mut()) {
            if let Some((lo, hi)) = last.2 {
                if last.3 == bare && c.end_ns.is_some() && !last.1.ends_with("(running)") && n + 1 == lo {
                    last.2 = Some((n, hi));
                    last.0 = c.seq;
                    continue;
                }
            }
        }
        if lines.len() == LAST_CALLS {
            break;
        }
        lines.push((c.seq, text, n.map(|n| (n, n)), bare));
    }
    lines
        .into_iter()
        .rev()
        .map(|(seq, text, run, bare)| match run {
            Some((lo, hi)) if lo < hi => {
                let name_end = bare.find('(').unwrap_or(bare.len());
                (seq, format!("{} #{lo}-#{hi}{}", &bare[..name_end], &bare[name_end..]))
            }
            _ => (seq, text),
        })
        .collect()
}

/// A process's recorder in its detail: its pending requests are in its
/// queues (when its MPI has none) or not shown; here its last calls.
pub fn process_text(out: &mut String, p: &ProcessSnapshot) {
    let Some(rec) = &p.recorder else {
        return;
    };
    if !rec.initialized {
        let _ = writeln!(out, "  flight recorder: loaded, MPI not initialized yet");
        return;
    }
    let _ = writeln!(
        out,
        "  flight recorder: {} MPI calls, {} requests pending; the last:",
        rec.calls_started,
        rec.pending.len(),
    );
    for (seq, line) in last_lines(rec, true) {
        let _ = writeln!(out, "    {seq:>6}  {line}");
    }
    if rec.torn > 0 {
        let _ = writeln!(
            out,
            "    ({} being written when the process stopped, left out)",
            rec.torn
        );
    }
}

/// The job's last calls, by group of ranks whose last calls are the same
/// calls on the same communicators (their peers may differ): `None` when no
/// process has a recorder.
pub fn job_text(snap: &Snapshot) -> Option<String> {
    // The signature of a rank's last calls, and its calls in words.
    // By the calls without peers: the ranks, the calls shown, the calls
    // without peers.
    type Group = (Vec<i64>, Vec<String>, Vec<String>);
    let mut groups: BTreeMap<Vec<String>, Group> = BTreeMap::new();
    let mut any = false;
    for p in &snap.processes {
        let (Some(rec), Some(rank)) = (&p.recorder, p.world_rank) else {
            continue;
        };
        if !rec.initialized {
            continue;
        }
        any = true;
        let key: Vec<String> = last_lines(rec, false).into_iter().map(|(_, l)| l).collect();
        let full: Vec<String> = last_lines(rec, true).into_iter().map(|(_, l)| l).collect();
        let (ranks, shown, peerless) = groups
            .entry(key.clone())
            .or_insert_with(|| (Vec::new(), full.clone(), key));
        ranks.push(i64::from(rank));
        // A call's peers and tags when every rank of the group has the
        // same, else the call without them.
        for ((shown, mine), bare) in shown.iter_mut().zip(&full).zip(peerless.iter()) {
            if shown != mine {
                shown.clone_from(bare);
            }
        }
    }
    if !any {
        return None;
    }
    let mut list: Vec<(Vec<i64>, Vec<String>)> = groups.into_values().map(|(r, shown, _)| (r, shown)).collect();
    list.sort_by_key(|(r, _)| r.first().copied());
    let mut out = String::from("Last MPI calls (mpiq's flight recorder), oldest first:\n");
    for (ranks, calls) in list.iter().take(MOST_GROUPS) {
        let mut ranks = ranks.clone();
        ranks.sort_unstable();
        let _ = writeln!(out, "  {}:", ranks_text(&ranks));
        for c in calls {
            let _ = writeln!(out, "    {c}");
        }
    }
    if list.len() > MOST_GROUPS {
        let _ = writeln!(
            out,
            "  and {} more groups (each rank's calls are in its detail and the JSON)",
            list.len() - MOST_GROUPS
        );
    }
    Some(out)
}
