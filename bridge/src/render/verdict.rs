//! The cross-rank analysis as plain text (the verdict section), graphviz
//! and CSV.

use std::collections::BTreeSet;
use std::fmt::Write;

use crate::analysis::{comm_words, ranks_words, tag_words};
use crate::analysis::{Analysis, EdgeKind, OpKind, Unmatched, Verdict};

/// Most unknown ranks drawn in the graph when no edge leads to them.
const DOT_UNKNOWN: usize = 100;

/// Most unmatched operations listed in the text form.
const TEXT_UNMATCHED: usize = 12;

/// Most cycles listed in the text form.
const TEXT_CYCLES: usize = 5;

/// Most ranks of one cycle written out in the text form.
const TEXT_CYCLE_RANKS: usize = 12;

/// A cycle in words, back to its first rank: "0 -> 1 -> 2 -> 0"; a long one
/// as its first ranks and its last: "0 -> 1 -> ... (1,000 ranks) ... ->
/// 999 -> 0".
fn cycle_words(c: &[i64]) -> String {
    let mut ring: Vec<String> = Vec::new();
    if c.len() > TEXT_CYCLE_RANKS {
        let head = TEXT_CYCLE_RANKS - 4;
        ring.extend(c[..head].iter().map(i64::to_string));
        ring.push(format!("... ({} ranks in all) ...", c.len()));
        ring.extend(c[c.len() - 3..].iter().map(i64::to_string));
    } else {
        ring.extend(c.iter().map(i64::to_string));
    }
    if let Some(first) = c.first() {
        ring.push(first.to_string());
    }
    ring.join(" -> ")
}

fn unmatched_words(u: &Unmatched) -> String {
    let peer = match (u.kind, u.any_source, u.peer, u.peer_local) {
        (_, true, _, _) => "from ANY_SOURCE".to_string(),
        (OpKind::Receive, _, Some(w), _) => format!("from rank {w}"),
        (OpKind::Send, _, Some(w), _) => format!("to rank {w}"),
        (OpKind::Receive, _, None, Some(l)) => format!("from local rank {l}"),
        (OpKind::Send, _, None, Some(l)) => format!("to local rank {l}"),
        (OpKind::Receive, _, None, None) => "from an unknown rank".to_string(),
        (OpKind::Send, _, None, None) => "to an unknown rank".to_string(),
        (_, _, Some(w), _) => format!("for rank {w}"),
        (_, _, None, _) => "for an unknown rank".to_string(),
    };
    // The flight recorder's operations have a request (or, a blocking
    // call's, none), not a buffer.
    let handle = match (&u.request, u.buffer.is_empty()) {
        (Some(r), true) => format!(", request {r}"),
        (None, true) => String::new(),
        _ => format!(", buffer {}", u.buffer),
    };
    format!(
        "rank {}: {} {peer} on {} {} ({}{handle})",
        u.rank,
        u.kind.as_str(),
        comm_words(&u.communicator),
        tag_words(u.tag),
        u.status.as_str(),
    )
}

/// At most `most` of `items`, one line each (`indent`, then `line`), and
/// "... N more ..." for the rest: the text stays short, the JSON has all.
fn bounded<T>(out: &mut String, items: &[T], most: usize, indent: &str, line: impl Fn(&T) -> String, more: &str) {
    for item in items.iter().take(most) {
        let _ = writeln!(out, "{indent}{}", line(item));
    }
    if items.len() > most {
        let _ = writeln!(out, "{indent}... {} {more}", items.len() - most);
    }
}

/// The verdict section in plain words: the summary, then the cycles,
/// blocked, unknown and undecided ranks, the unmatched operations and the
/// notes.
pub fn render_text(a: &Analysis) -> String {
    let mut out = String::new();
    let title = match a.verdict {
        Verdict::Deadlock => "DEADLOCK",
        Verdict::NoDeadlock => "no deadlock",
        Verdict::Unknown => "unknown",
    };
    let _ = writeln!(out, "Deadlock analysis: {title}");
    let _ = writeln!(out, "  {}", a.summary);
    bounded(
        &mut out,
        &a.cycles,
        TEXT_CYCLES,
        "  ",
        |c| format!("cycle: {}", cycle_words(c)),
        "more cycles (the JSON lists them)",
    );
    let lists = [
        (
            if a.stalled {
                "stalled (no cycle could be resolved)"
            } else {
                "blocked behind a cycle"
            },
            &a.blocked,
        ),
        ("queues not read", &a.unknown_ranks),
        ("undecided", &a.undecided),
        ("progressing", &a.progressing),
    ];
    for (label, ranks) in lists {
        if !ranks.is_empty() {
            let _ = writeln!(out, "  {label}: {}", ranks_words(ranks));
        }
    }
    if !a.unmatched.is_empty() {
        let _ = writeln!(out, "  unmatched operations ({}):", a.unmatched.len());
        bounded(
            &mut out,
            &a.unmatched,
            TEXT_UNMATCHED,
            "    ",
            unmatched_words,
            "more (the JSON lists every one)",
        );
    }
    for n in &a.notes {
        let _ = writeln!(out, "  note: {n}");
    }
    out
}

/// A string as a graphviz double-quoted ID.
fn dot_quote(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for ch in s.chars() {
        match ch {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            '\n' | '\r' => q.push(' '),
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

/// The wait-for graph for graphviz: a node per rank involved (red on a
/// cycle, orange blocked, grey unknown, yellow undecided; unknown ranks no
/// edge leads to only while there are at most 100), a solid edge per AND
/// wait, dashed OR edges, blue for a send waiting for its receive.
pub fn render_dot(a: &Analysis) -> String {
    let on_cycle: BTreeSet<i64> = a.cycles.iter().flatten().copied().collect();
    let mut nodes: BTreeSet<i64> = BTreeSet::new();
    nodes.extend(a.edges.iter().flat_map(|e| [e.from, e.to]));
    nodes.extend(on_cycle.iter().copied());
    nodes.extend(a.blocked.iter().copied());
    nodes.extend(a.undecided.iter().copied());
    // Unknown ranks nothing waits for are drawn only while they are few.
    if a.unknown_ranks.len() <= DOT_UNKNOWN {
        nodes.extend(a.unknown_ranks.iter().copied());
    }
    let mut out = String::new();
    let _ = writeln!(out, "digraph mpiq_waits {{");
    let _ = writeln!(out, "  label={};", dot_quote(&a.summary));
    let _ = writeln!(out, "  labelloc=t;");
    let _ = writeln!(out, "  node [shape=box, style=filled, fillcolor=white];");
    for n in &nodes {
        let (fill, extra) = if on_cycle.contains(n) {
            ("tomato", "")
        } else if a.blocked.contains(n) {
            ("orange", "")
        } else if a.unknown_ranks.contains(n) {
            ("lightgrey", ", style=\"filled,dashed\"")
        } else if a.undecided.contains(n) {
            ("lightyellow", "")
        } else {
            ("white", "")
        };
        let _ = writeln!(out, "  r{n} [label=\"rank {n}\", fillcolor={fill}{extra}];");
    }
    for e in &a.edges {
        let label = match e.op {
            OpKind::Collective => format!("{} {}", e.op.as_str(), e.communicator),
            _ => format!("{} {} {}", e.op.as_str(), e.communicator, tag_words(e.tag)),
        };
        let style = match e.kind {
            EdgeKind::And => "solid",
            EdgeKind::Or => "dashed",
        };
        let color = match e.op {
            OpKind::Receive => "black",
            OpKind::Send | OpKind::SyncSend => "blue",
            OpKind::Collective => "darkgreen",
            OpKind::Call => "grey40",
        };
        let _ = writeln!(
            out,
            "  r{} -> r{} [label={}, style={style}, color={color}];",
            e.from,
            e.to,
            dot_quote(&label)
        );
    }
    out.push_str("}\n");
    out
}

/// A CSV field, quoted when it must be (RFC 4180).
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// One edge per line after the header
/// `from,to,kind,op,communicator,tag,wait`; an empty tag is `MPI_ANY_TAG`.
pub fn render_csv(a: &Analysis) -> String {
    let mut out = String::from("from,to,kind,op,communicator,tag,wait\n");
    for e in &a.edges {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{}",
            e.from,
            e.to,
            e.kind.as_str(),
            e.op.as_str(),
            csv_field(&e.communicator),
            e.tag.map(|t| t.to_string()).unwrap_or_default(),
            e.wait.map(|w| w.to_string()).unwrap_or_default()
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_are_quoted_when_needed() {
        assert_eq!(csv_field("solver"), "solver");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }

    #[test]
    fn a_long_cycle_is_cut_in_the_middle() {
        assert_eq!(cycle_words(&[0, 1, 2]), "0 -> 1 -> 2 -> 0");
        let long: Vec<i64> = (0..1000).collect();
        assert_eq!(
            cycle_words(&long),
            "0 -> 1 -> 2 -> 3 -> 4 -> 5 -> 6 -> 7 -> ... (1000 ranks in all) ... -> 997 -> 998 -> 999 -> 0"
        );
        let twelve: Vec<i64> = (0..12).collect();
        assert!(!cycle_words(&twelve).contains("..."));
    }

    #[test]
    fn dot_ids_are_escaped() {
        assert_eq!(dot_quote("a \"b\" \\ c\nd"), "\"a \\\"b\\\" \\\\ c d\"");
    }
}
