//! The merged stacks ([`crate::stacks::tree`]) for people and programs:
//! - compact text, one line per leaf ("ranks 1-3: main > exchange >
//!   MPI_Recv (barrier_vs_recv.c:35)"), biggest groups first;
//! - full text (`--stacks`), the trie drawn with `├─`/`└─`;
//! - JSON (`stack_tree`), with rank ranges;
//! - a graphviz cluster added to the wait-for graph.

use std::fmt::Write;

use serde_json::{json, Value};

use crate::stacks::ranks::{rank_ranges, ranks_text};
use crate::stacks::tree::{Mode, StackNode, StackTree, Task};

/// Paths longer than this many frames lose their middle in compact text.
pub const MAX_PATH: usize = 8;

/// "4 ranks", "1 application thread".
fn count(n: usize, one: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {one}s")
    }
}

/// "ranks 1-3", with "(N threads)" when a rank has several.
fn tasks_words(tasks: &[Task]) -> String {
    let ranks: Vec<i64> = tasks.iter().map(|t| t.0).collect();
    let mut distinct = ranks.clone();
    distinct.sort_unstable();
    distinct.dedup();
    let mut s = ranks_text(&ranks);
    if distinct.len() != tasks.len() {
        let _ = write!(s, " ({})", count(tasks.len(), "thread"));
    }
    s
}

/// One leaf of the compact view.
struct Leaf {
    tasks: Vec<Task>,
    labels: Vec<String>,
}

/// Every node where some thread's stack ends, with its path.
fn leaves(tree: &StackTree) -> Vec<Leaf> {
    let mut out = Vec::new();
    let mut todo: Vec<(&StackNode, Vec<String>)> = tree.roots.iter().rev().map(|n| (n, Vec::new())).collect();
    while let Some((node, mut path)) = todo.pop() {
        path.push(node.label.clone());
        let ending = node.ending_tasks();
        if !ending.is_empty() {
            let mut labels = path.clone();
            if let Some(last) = labels.last_mut() {
                if let Some(d) = &node.detail {
                    last.push_str(d);
                }
                if let Some(loc) = &node.location {
                    let _ = write!(last, " ({loc})");
                }
            }
            out.push(Leaf { tasks: ending, labels });
        }
        for c in node.children.iter().rev() {
            todo.push((c, path.clone()));
        }
    }
    // Biggest groups first; then by the smallest rank.
    out.sort_by(|a, b| {
        b.tasks
            .len()
            .cmp(&a.tasks.len())
            .then(a.tasks.first().cmp(&b.tasks.first()))
    });
    out
}

/// A path of labels joined by " > ", its middle elided past [`MAX_PATH`].
fn path_words(labels: &[String]) -> String {
    if labels.len() <= MAX_PATH {
        return labels.join(" > ");
    }
    let head = 3;
    let tail = MAX_PATH - head - 1;
    let mut parts: Vec<&str> = labels[..head].iter().map(String::as_str).collect();
    parts.push("...");
    parts.extend(labels[labels.len() - tail..].iter().map(String::as_str));
    parts.join(" > ")
}

/// The ranks without stacks, grouped by why: ("ranks 4 and 5", "no call
/// stacks: why"; just why when no rank has stacks).
fn without_lines(tree: &StackTree) -> Vec<(String, String)> {
    let prefix = if tree.is_empty() { "" } else { "no call stacks: " };
    let mut groups: Vec<(Vec<i64>, &str)> = Vec::new();
    for (rank, why) in &tree.without_stacks {
        match groups.iter_mut().find(|g| g.1 == why.as_str()) {
            Some(g) => g.0.push(*rank),
            None => groups.push((vec![*rank], why)),
        }
    }
    let mut lines: Vec<(String, String)> = groups
        .into_iter()
        .map(|(ranks, why)| (ranks_text(&ranks), format!("{prefix}{why}")))
        .collect();
    if !tree.no_thread_shown.is_empty() {
        let what = match tree.mode {
            Mode::Compact => "no application thread (only the MPI runtime's)",
            Mode::Full => "no thread",
        };
        lines.push((ranks_text(&tree.no_thread_shown), what.to_string()));
    }
    lines
}

/// The compact view: a title and one line per leaf, the ranks in one
/// column.
pub fn compact_text(tree: &StackTree) -> String {
    if tree.is_empty() {
        return aligned("Where the ranks are (no call stacks):\n".into(), &without_lines(tree));
    }
    let mut title = format!(
        "Where the ranks are ({}, {}",
        count(tree.ranks().len(), "rank"),
        count(tree.threads(), "application thread")
    );
    if tree.hidden_service_threads > 0 {
        let _ = write!(
            title,
            "; {} not shown",
            count(tree.hidden_service_threads, "service thread")
        );
    }
    title.push_str("):\n");
    let mut lines: Vec<(String, String)> = leaves(tree)
        .into_iter()
        .map(|l| (tasks_words(&l.tasks), path_words(&l.labels)))
        .collect();
    lines.extend(without_lines(tree));
    aligned(title, &lines)
}

/// The widest column of `who`s the `what`s are aligned to; a longer `who`
/// is followed by one space.
const WHO_COLUMN: usize = 48;

/// `title`, then `  who: what` with the `what`s in one column.
fn aligned(mut out: String, lines: &[(String, String)]) -> String {
    let width = lines.iter().map(|l| l.0.len()).max().unwrap_or(0).min(WHO_COLUMN) + 1;
    for (who, what) in lines {
        let who = format!("{who}:");
        let _ = writeln!(out, "  {who:<width$} {what}");
    }
    out
}

/// One line of a node in the full view: "ranks 0-3: main (ring.c:64)".
fn node_words(n: &StackNode) -> String {
    let mut s = format!("{}: {}", tasks_words(&n.tasks), n.label);
    if let Some(d) = &n.detail {
        s.push_str(d);
    }
    if let Some(loc) = &n.location {
        let _ = write!(s, " ({loc})");
    }
    s
}

/// The full view: the trie, one line per node, children indented under
/// their parent with `├─`/`└─`.
pub fn full_text(tree: &StackTree) -> String {
    if tree.is_empty() {
        return aligned("Call stacks of every thread (none):\n".into(), &without_lines(tree));
    }
    let mut out = format!(
        "Call stacks of every thread ({}, {}):\n",
        count(tree.ranks().len(), "rank"),
        count(tree.threads(), "thread")
    );
    // (node, prefix of its line, prefix of its children's lines)
    let mut todo: Vec<(&StackNode, String, String)> = tree
        .roots
        .iter()
        .rev()
        .map(|n| (n, "  ".to_string(), "  ".to_string()))
        .collect();
    while let Some((node, own, inner)) = todo.pop() {
        let _ = writeln!(out, "{own}{}", node_words(node));
        let last = node.children.len().saturating_sub(1);
        for (i, c) in node.children.iter().enumerate().rev() {
            let (branch, cont) = if i == last {
                ("└─ ", "   ")
            } else {
                ("├─ ", "│  ")
            };
            todo.push((c, format!("{inner}{branch}"), format!("{inner}{cont}")));
        }
    }
    for (who, what) in without_lines(tree) {
        let _ = writeln!(out, "  {who}: {what}");
    }
    out
}

/// The view `--stacks` asks for: full with it, compact without.
pub fn text(tree: &StackTree) -> String {
    match tree.mode {
        Mode::Compact => compact_text(tree),
        Mode::Full => full_text(tree),
    }
}

/// A node as JSON: `label`, `location`, `ranks` (ranges), `threads`,
/// `detail` (when known), `children`.
pub fn node_json(n: &StackNode) -> Value {
    let ranges: Vec<Value> = rank_ranges(&n.ranks())
        .into_iter()
        .map(|[a, b]| json!([a, b]))
        .collect();
    let mut v = json!({
        "label": n.label,
        "location": n.location,
        "ranks": ranges,
        "threads": n.tasks.len(),
    });
    if let (Some(d), Some(o)) = (&n.detail, v.as_object_mut()) {
        o.insert("detail".into(), Value::from(d.trim_start()));
    }
    if let Some(o) = v.as_object_mut() {
        o.insert("children".into(), n.children.iter().map(node_json).collect());
    }
    v
}

/// The tree as the JSON report's `stack_tree`: its one outermost node (or
/// a `/` root above several), plus `mode`, the hidden service threads and
/// the ranks without stacks; `null` when no thread is in it.
pub fn tree_json(tree: &StackTree) -> Value {
    let mut v = if tree.is_empty() {
        json!({ "label": crate::stacks::tree::ROOT_LABEL, "location": null, "ranks": [], "threads": 0, "children": [] })
    } else {
        node_json(&tree.as_one_node())
    };
    if let Some(o) = v.as_object_mut() {
        o.insert(
            "mode".into(),
            Value::from(match tree.mode {
                Mode::Compact => "compact",
                Mode::Full => "full",
            }),
        );
        o.insert(
            "hidden_service_threads".into(),
            Value::from(tree.hidden_service_threads),
        );
        let without: Vec<Value> = tree
            .without_stacks
            .iter()
            .map(|(rank, why)| json!({ "rank": rank, "why": why }))
            .collect();
        o.insert("without_stacks".into(), Value::from(without));
        let ranges: Vec<Value> = rank_ranges(&tree.no_thread_shown)
            .into_iter()
            .map(|[a, b]| json!([a, b]))
            .collect();
        o.insert("no_thread_shown".into(), Value::from(ranges));
    }
    v
}

/// A graphviz string literal.
fn dot_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => {}
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `subgraph cluster_stacks { ... }`: one node per trie node (`MPI_Recv\n
/// ranks 1-3 (3)`, its pen wider with more threads), parent → child edges.
pub fn dot_cluster(tree: &StackTree) -> String {
    let mut out = String::from("  subgraph cluster_stacks {\n");
    let title = match tree.mode {
        Mode::Compact => "where the ranks are",
        Mode::Full => "call stacks",
    };
    let _ = writeln!(out, "    label={};", dot_quote(title));
    let _ = writeln!(out, "    node [shape=box, style=rounded, fillcolor=white];");
    let mut next = 0usize;
    let mut todo: Vec<(&StackNode, Option<usize>)> = tree.roots.iter().rev().map(|n| (n, None)).collect();
    while let Some((node, parent)) = todo.pop() {
        let id = next;
        next += 1;
        let mut label = node.label.clone();
        if let Some(d) = &node.detail {
            label.push_str(d);
        }
        let _ = write!(label, "\n{} ({})", ranks_text(&node.ranks()), node.tasks.len());
        let pen = 1.0 + (node.tasks.len().max(1) as f64).ln();
        let mut attrs = format!("label={}, penwidth={pen:.2}", dot_quote(&label));
        if let Some(loc) = &node.location {
            let _ = write!(attrs, ", tooltip={}", dot_quote(loc));
        }
        let _ = writeln!(out, "    s{id} [{attrs}];");
        if let Some(p) = parent {
            let _ = writeln!(out, "    s{p} -> s{id};");
        }
        for c in node.children.iter().rev() {
            todo.push((c, Some(id)));
        }
    }
    out.push_str("  }\n");
    out
}

/// A graphviz graph (`digraph ... {\n...}\n`) with the tree's cluster
/// added before its closing brace; the graph as it is when the tree is
/// empty or the graph does not end so.
pub fn with_stacks_dot(graph: &str, tree: &StackTree) -> String {
    match graph.strip_suffix("}\n") {
        Some(head) if !tree.is_empty() => format!("{head}{}}}\n", dot_cluster(tree)),
        _ => graph.to_string(),
    }
}

#[cfg(test)]
#[path = "tree_tests.rs"]
mod tests;
