//! The one text renderer and the JSON writer, shared by every front end;
//! [`report`]: a snapshot with its cross-rank analysis; [`tree`]: every
//! rank's stacks merged (text, JSON, graphviz); [`folded`]: the merged
//! stacks as flame graph input; [`html`]: the report as one self-contained
//! web page; [`handoff`]: the commands that open one
//! rank of each group of the merged stacks in gdb or lldb.

use std::fmt::Write;

pub mod folded;
pub mod handoff;
pub mod html;
pub mod recorder;
pub mod report;
mod stacks;
pub mod tree;
pub mod verdict;

pub use report::{Report, Samples};
pub use stacks::frame_text;

use crate::options::{DumpOptions, Format};
use crate::snapshot::model::*;

/// Renders a snapshot as the options ask (text or JSON, applying the
/// `--comm` and `--queue` filters; or the merged stacks as folded lines).
pub fn render(snapshot: &Snapshot, opts: &DumpOptions) -> String {
    match opts.format {
        Format::Text => render_text(snapshot, opts),
        Format::Json => render_json(snapshot, opts),
        Format::Folded => folded::render(snapshot, opts),
    }
}

fn comm_selected(c: &Communicator, opts: &DumpOptions) -> bool {
    match &opts.comm {
        None => true,
        Some(sel) => c.name == *sel || c.id == *sel,
    }
}

/// The snapshot as JSON, filtered by `--comm` and `--queue` (queues not
/// selected are left out of each communicator's `queues`).
pub fn render_json(snapshot: &Snapshot, opts: &DumpOptions) -> String {
    let mut value = match serde_json::to_value(snapshot) {
        Ok(v) => v,
        Err(e) => return format!("{{\"schema\": \"{SCHEMA}\", \"error\": \"cannot serialize: {e}\"}}"),
    };
    if let Some(procs) = value.get_mut("processes").and_then(|p| p.as_array_mut()) {
        for (proc_json, proc) in procs.iter_mut().zip(&snapshot.processes) {
            let Some(comms) = proc_json.get_mut("communicators").and_then(|c| c.as_array_mut()) else {
                continue;
            };
            let mut keep = proc.communicators.iter().map(|c| comm_selected(c, opts));
            comms.retain(|_| keep.next().unwrap_or(false));
            for c in comms.iter_mut() {
                if let Some(q) = c.get_mut("queues").and_then(|q| q.as_object_mut()) {
                    q.retain(|k, _| {
                        QueueKind::ALL
                            .iter()
                            .any(|kind| kind.as_str() == k && opts.wants_queue(*kind))
                    });
                }
            }
        }
    }
    let mut out = serde_json::to_string_pretty(&value).unwrap_or_default();
    out.push('\n');
    out
}

fn rank_list(ranks: &[Option<i64>]) -> String {
    // Contiguous runs as a-b.
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ranks.len() {
        match ranks[i] {
            None => {
                parts.push("?".into());
                i += 1;
            }
            Some(start) => {
                let mut j = i;
                while j + 1 < ranks.len() && ranks[j + 1] == Some(ranks[j].unwrap_or(0) + 1) {
                    j += 1;
                }
                let end = ranks[j].unwrap_or(start);
                parts.push(if j - i >= 2 {
                    format!("{start}-{end}")
                } else if j > i {
                    format!("{start},{end}")
                } else {
                    start.to_string()
                });
                i = j + 1;
            }
        }
    }
    parts.join(",")
}

fn opt(v: Option<i64>) -> String {
    v.map_or_else(|| "?".to_string(), |v| v.to_string())
}

fn peer_text(op: &Operation, kind: QueueKind) -> String {
    let dir = if kind == QueueKind::Sends { "to" } else { "from" };
    if op.any_source {
        return format!("{dir} ANY_SOURCE");
    }
    match (op.peer.local, op.peer.world) {
        (Some(l), Some(w)) if l == w => format!("{dir} rank {l}"),
        (Some(l), Some(w)) => format!("{dir} rank {l} (world {w})"),
        (Some(l), None) => format!("{dir} rank {l} (world ?)"),
        (None, _) => format!("{dir} rank ?"),
    }
}

fn queue_title(kind: QueueKind) -> &'static str {
    match kind {
        QueueKind::Sends => "Pending sends",
        QueueKind::Receives => "Posted receives",
        QueueKind::Unexpected => "Unexpected messages",
    }
}

fn has_pending(c: &Communicator, opts: &DumpOptions) -> bool {
    QueueKind::ALL
        .iter()
        .any(|k| opts.wants_queue(*k) && !c.queues.get(*k).operations.is_empty())
}

/// The notes and errors that several processes of a view share, each said
/// once before them (`note: ...`/`error: ...`, and who: "ranks 0-3"), in the
/// order first seen.
struct Shared {
    lines: Vec<(String, String)>,
}

impl Shared {
    fn of(procs: &[&ProcessSnapshot]) -> Shared {
        let mut lines: Vec<(String, Vec<&ProcessSnapshot>)> = Vec::new();
        let mut index: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
        for p in procs {
            let own = p
                .messages
                .iter()
                .map(|m| format!("note: {m}"))
                .chain(p.error.iter().map(|e| format!("error: {e}")));
            for line in own {
                match index.get(&line) {
                    Some(&i) if lines[i].1.last().is_some_and(|q| std::ptr::eq(*q, *p)) => {}
                    Some(&i) => lines[i].1.push(p),
                    None => {
                        index.insert(line.clone(), lines.len());
                        lines.push((line, vec![p]));
                    }
                }
            }
        }
        let lines = lines
            .into_iter()
            .filter(|(_, who)| who.len() > 1)
            .map(|(line, who)| (line, who_words(&who)))
            .collect();
        Shared { lines }
    }

    /// Who shares `line`, if anyone does.
    fn who(&self, line: &str) -> Option<&str> {
        self.lines.iter().find(|(l, _)| l == line).map(|(_, w)| w.as_str())
    }
}

/// "ranks 0-3", or "processes 10, 11" where one has no rank.
fn who_words(procs: &[&ProcessSnapshot]) -> String {
    let ranks: Option<Vec<i64>> = procs.iter().map(|p| p.world_rank.map(i64::from)).collect();
    match ranks {
        Some(mut ranks) => {
            ranks.sort_unstable();
            crate::analysis::ranks_words(&ranks)
        }
        None => {
            let pids: Vec<String> = procs
                .iter()
                .map(|p| p.pid.map_or_else(|| "?".to_string(), |p| p.to_string()))
                .collect();
            format!("processes {}", pids.join(", "))
        }
    }
}

fn render_process(out: &mut String, p: &ProcessSnapshot, opts: &DumpOptions, shared: &Shared) {
    let pid = p.pid.map_or_else(|| "pid ?".to_string(), |p| format!("pid {p}"));
    let rank = p
        .world_rank
        .map_or_else(|| "rank ?".to_string(), |r| format!("rank {r}"));
    let node = p.node.as_deref().map(|n| format!(" on {n}")).unwrap_or_default();
    let _ = writeln!(out, "Process {pid}, {rank}{node}: {}", p.executable);
    if let Some(d) = &p.dll {
        // The first clause of the version string (Open MPI's goes on with
        // build details, kept in the JSON).
        let version = d.version.split(", ").next().unwrap_or_default().trim();
        let _ = writeln!(
            out,
            "  debug library: {} ({version}; found via {})",
            d.path,
            d.found_via.as_str()
        );
    }
    for m in &p.messages {
        let line = format!("note: {m}");
        if shared.who(&line).is_none() {
            let _ = writeln!(out, "  {line}");
        }
    }
    match &p.error {
        Some(e) => {
            let line = format!("error: {e}");
            match shared.who(&line) {
                Some(who) => {
                    let _ = writeln!(out, "  error: as for {who} (above)");
                }
                None => {
                    let _ = writeln!(out, "  {line}");
                }
            }
            // A library that works in part (a transport it cannot see, a
            // queue it reads wrongly): what it does show, each unusable
            // queue with why.
            if p.queues_missing.is_some() && !p.communicators.is_empty() {
                render_queues(out, p, opts);
            }
        }
        None => render_queues(out, p, opts),
    }
    recorder::process_text(out, p);
    if let Some(st) = &p.stacks {
        stacks::render_stacks(out, st, opts.stacks);
    }
}

/// The communicators of a process that could be read.
fn render_queues(out: &mut String, p: &ProcessSnapshot, opts: &DumpOptions) {
    let selected: Vec<&Communicator> = p.communicators.iter().filter(|c| comm_selected(c, opts)).collect();
    if let Some(sel) = &opts.comm {
        if selected.is_empty() {
            let names: Vec<String> = p
                .communicators
                .iter()
                .map(|c| format!("'{}' ({})", c.name, c.id))
                .collect();
            let _ = writeln!(
                out,
                "  no communicator named or numbered '{sel}'; there are: {}",
                names.join(", ")
            );
            return;
        }
    }
    let mut quiet = 0;
    for c in selected {
        if !opts.all && opts.comm.is_none() && !has_pending(c, opts) {
            quiet += 1;
            continue;
        }
        render_comm(out, c, opts);
    }
    if quiet > 0 {
        let what = if quiet == 1 {
            "communicator has"
        } else {
            "communicators have"
        };
        let _ = writeln!(out, "  {quiet} other {what} no pending operations; --all shows them");
    }
}

fn render_comm(out: &mut String, c: &Communicator, opts: &DumpOptions) {
    let name = if c.name.is_empty() { "(unnamed)" } else { &c.name };
    let mut line = format!(
        "  Communicator '{name}' (id {}): size {}, my rank {}",
        c.id,
        opt(c.size),
        opt(c.local_rank)
    );
    match &c.world_ranks {
        Some(w) => {
            let _ = write!(line, ", world ranks {}", rank_list(w));
            if c.world_ranks_source.as_deref() == Some("inferred") {
                line.push_str(" (inferred)");
            }
        }
        None => line.push_str(", world ranks unknown"),
    }
    let _ = writeln!(out, "{line}");
    for kind in QueueKind::ALL {
        if !opts.wants_queue(kind) {
            continue;
        }
        let q = c.queues.get(kind);
        let title = queue_title(kind);
        if !q.available {
            let _ = writeln!(out, "    {title}: {}", q.reason.as_deref().unwrap_or("not available"));
            continue;
        }
        if q.operations.is_empty() && !q.incomplete {
            let _ = writeln!(out, "    {title}: none");
            continue;
        }
        let _ = writeln!(out, "    {title} ({}):", q.operations.len());
        for (i, op) in q.operations.iter().enumerate() {
            render_op(out, i, op, kind);
        }
        if q.incomplete {
            let _ = writeln!(
                out,
                "      (incomplete: {})",
                q.reason.as_deref().unwrap_or("the list was cut short")
            );
        }
    }
}

fn render_op(out: &mut String, i: usize, op: &Operation, kind: QueueKind) {
    let tag = if op.any_tag { "ANY_TAG".to_string() } else { opt(op.tag) };
    // The flight recorder's operations have a request, not a buffer.
    let handle = match (&op.request, op.buffer.is_empty()) {
        (Some(r), true) => format!("  request {r}"),
        (None, true) => String::new(),
        _ => format!("  buffer {}", op.buffer),
    };
    let mut line = format!(
        "      [{i}] {:<8} {}  tag {tag}  length {}{handle}",
        op.status.as_str(),
        peer_text(op, kind),
        opt(op.length),
    );
    if op.system_buffer {
        line.push_str(" (system buffer)");
    }
    let _ = writeln!(out, "{line}");
    if let Some(a) = &op.actual {
        let wild = kind == QueueKind::Receives && (op.any_source || op.any_tag);
        if wild || kind == QueueKind::Unexpected {
            let _ = writeln!(
                out,
                "          actual: rank {} (world {}) tag {} length {}",
                opt(a.local),
                opt(a.world),
                opt(a.tag),
                opt(a.length)
            );
        }
    }
    for t in &op.extra_text {
        let _ = writeln!(out, "          {}", t.trim_end());
    }
}

/// The human-readable view.
pub fn render_text(snapshot: &Snapshot, opts: &DumpOptions) -> String {
    render_processes_text(snapshot.processes.iter(), opts)
}

/// The human-readable view of some processes of a snapshot. A note or an
/// error that several of them share is said once, first, with whose it is
/// (a library's warning, a missing debug information: the same for every
/// rank); each process then says only its own.
pub fn render_processes_text<'a>(processes: impl Iterator<Item = &'a ProcessSnapshot>, opts: &DumpOptions) -> String {
    let procs: Vec<&ProcessSnapshot> = processes.collect();
    let shared = Shared::of(&procs);
    let mut out = String::new();
    if !shared.lines.is_empty() {
        out.push_str("Said of several processes:\n");
        for (line, who) in &shared.lines {
            let _ = writeln!(out, "  {who}: {line}");
        }
        out.push('\n');
    }
    for (i, p) in procs.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        render_process(&mut out, p, opts, &shared);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(tag: Option<i64>, local: i64) -> Operation {
        Operation {
            status: Status::Pending,
            peer: Peer {
                local: Some(local),
                world: Some(local + 1),
            },
            any_source: false,
            tag,
            any_tag: tag.is_none(),
            length: Some(64),
            buffer: "0x1000".into(),
            system_buffer: false,
            actual: None,
            extra_text: vec!["Data: 16 instances of MPI_INT".into()],
            request: None,
        }
    }

    fn sample() -> Snapshot {
        let comm = |name: &str, ops: Vec<Operation>| Communicator {
            id: "1".into(),
            name: name.into(),
            size: Some(4),
            local_rank: Some(1),
            world_ranks: Some(vec![Some(1), Some(2), Some(3), Some(0)].into()),
            world_ranks_source: Some("library".into()),
            world_ranks_rejected: None,
            queues: Queues {
                sends: Queue::available(Vec::new()),
                receives: Queue::available(ops),
                unexpected: Queue::unavailable("not available from this MPI's debug library: no"),
            },
        };
        Snapshot {
            schema: SCHEMA.into(),
            processes: vec![ProcessSnapshot {
                communicators: vec![
                    comm("solver", vec![op(Some(5), 2), op(None, 0)]),
                    comm("idle", vec![]),
                    comm("idle2", vec![]),
                ],
                ..ProcessSnapshot::new(Some(42), Some(1), "/bin/ring")
            }],
        }
    }

    #[test]
    fn text_view_summarises_quiet_communicators() {
        let s = sample();
        let text = render_text(&s, &DumpOptions::default());
        assert!(text.contains("Process pid 42, rank 1: /bin/ring"), "{text}");
        assert!(
            text.contains("Communicator 'solver' (id 1): size 4, my rank 1, world ranks 1-3,0"),
            "{text}"
        );
        assert!(
            text.contains("[0] pending  from rank 2 (world 3)  tag 5  length 64  buffer 0x1000"),
            "{text}"
        );
        assert!(text.contains("tag ANY_TAG"), "{text}");
        assert!(text.contains("Unexpected messages: not available"), "{text}");
        assert!(
            text.contains("2 other communicators have no pending operations; --all shows them"),
            "{text}"
        );
        let all = render_text(&s, &DumpOptions::parse_line("--all").unwrap());
        assert!(all.contains("'idle2'") && !all.contains("other communicators"), "{all}");
    }

    #[test]
    fn json_filters_communicators_and_queues() {
        let s = sample();
        let json = render(
            &s,
            &DumpOptions::parse_line("--json --comm solver --queue receives").unwrap(),
        );
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["schema"], SCHEMA);
        let comms = v["processes"][0]["communicators"].as_array().unwrap();
        assert_eq!(comms.len(), 1);
        let queues = comms[0]["queues"].as_object().unwrap();
        assert_eq!(queues.keys().collect::<Vec<_>>(), vec!["receives"]);
        assert_eq!(queues["receives"]["operations"][1]["any_tag"], true);
        assert_eq!(queues["receives"]["operations"][1]["tag"], serde_json::Value::Null);
        // The full JSON round-trips into the model.
        let full = render(&s, &DumpOptions::parse_line("--json").unwrap());
        let back: Snapshot = serde_json::from_str(&full).unwrap();
        assert_eq!(back, s);
    }
}
