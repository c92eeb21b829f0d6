//! The report as one self-contained web page (`--html FILE`, and
//! `report.html` of `mpiq run --report DIR`): the report's facts (the
//! analysis and merged stacks as `--format json` writes them, never a
//! second analysis; every rank in a compact form, the frames, stacks and
//! names ranks share kept once, so that 16,000 ranks fit in a few MB) and
//! the text report embedded in a page whose script draws the verdict, the
//! wait-for graph, the merged stacks as a tree, each rank's detail and the
//! flight recorder's last calls. The page loads nothing: its style and script are
//! in it, and its Content-Security-Policy forbids any request, so it works
//! from `file://`, as a CI artifact and offline.

use std::collections::HashMap;

use serde_json::{json, Value};

use super::handoff::{self, Handoff};
use super::report::Report;
use crate::options::DumpOptions;
use crate::snapshot::model::{Frame, ProcessSnapshot, QueueKind, SCHEMA};
use crate::snapshot::recorder::Recording;

const TEMPLATE: &str = include_str!("html/report.html");
const CSS: &str = include_str!("html/report.css");
const JS: &str = include_str!("html/report.js");

/// The page's data schema (`#mpiq-data`'s `schema`; docs/json-schema.md).
pub const PAGE_SCHEMA: &str = "mpiq.page/1";

/// The flight recorder's calls the page keeps in all: each rank's last
/// calls, as many as fit (at least 2, at most [`CALLS_PER_RANK`]); `--format
/// json` has them all.
const PAGE_CALLS: usize = 20_000;
/// The most calls the page keeps of one rank.
const CALLS_PER_RANK: usize = 16;
/// The wait-for edges the page keeps besides those of the cycles (the
/// graph draws at most 48 ranks), and the unmatched operations it lists:
/// the analysis may hold 20,000 of each; `--format json` has them all.
const PAGE_EDGES: usize = 2_000;
const PAGE_UNMATCHED: usize = 1_000;

/// What the page says besides the report.
#[derive(Debug, Clone, Copy)]
pub struct Page<'a> {
    /// The page's title and heading (the job and its size).
    pub title: &'a str,
    /// The text report, shown folded at the end.
    pub text: &'a str,
    /// The command's exit status and what it means, when it has one.
    pub exit: Option<(u8, &'a str)>,
}

/// Each distinct value once, by its index: the strings, frames and stacks
/// ranks share (16,000 ranks at a few places are a few stacks, not 16,000).
#[derive(Default)]
struct Table {
    index: HashMap<String, usize>,
    values: Vec<Value>,
}

impl Table {
    fn add(&mut self, v: Value) -> usize {
        let key = v.to_string();
        if let Some(&i) = self.index.get(&key) {
            return i;
        }
        self.values.push(v);
        self.index.insert(key, self.values.len() - 1);
        self.values.len() - 1
    }
}

/// The page's tables being filled.
#[derive(Default)]
struct Tables {
    texts: Table,
    frames: Table,
    stacks: Table,
}

impl Tables {
    fn text(&mut self, s: &str) -> usize {
        self.texts.add(Value::from(s))
    }

    fn opt_text(&mut self, s: Option<&str>) -> Value {
        s.map_or(Value::Null, |s| Value::from(self.text(s)))
    }

    /// A frame without its pc (which differs from rank to rank where the
    /// rest is the same): function, object, file, line, offset, inlined,
    /// python; the names as indexes into `texts`.
    fn frame(&mut self, f: &Frame) -> usize {
        let function = self.opt_text(f.function.as_ref().map(|t| t.as_str()));
        let object = self.opt_text(f.object.as_ref().map(|t| t.as_str()));
        let file = self.opt_text(f.file.as_ref().map(|t| t.as_str()));
        let v = json!([
            function,
            object,
            file,
            f.line,
            f.offset,
            u8::from(f.inlined),
            u8::from(f.python)
        ]);
        self.frames.add(v)
    }
}

/// One rank as the page shows it: its identity, the OS's view, its threads
/// (stacks by index), its pending operations (`[communicator, queue, peer
/// local, peer world, any source, tag, any tag, length, status]`), the
/// queues it could not read and its last recorded calls.
fn process(t: &mut Tables, p: &ProcessSnapshot, calls_per_rank: usize) -> Value {
    let mut threads = Vec::new();
    let mut stacks_missing = Value::Null;
    if let Some(st) = &p.stacks {
        for th in &st.threads {
            let frames: Vec<usize> = th.frames.iter().map(|f| t.frame(f)).collect();
            let stack = t.stacks.add(Value::from(frames));
            let name = t.opt_text(th.name.as_ref().map(|n| n.as_str()));
            let note = t.opt_text(th.note.as_deref());
            threads.push(json!([th.tid, stack, name, note]));
        }
        stacks_missing = t.opt_text(st.missing.as_deref());
    }
    let mut ops = Vec::new();
    let mut unavailable = Vec::new();
    for c in &p.communicators {
        for kind in QueueKind::ALL {
            let q = c.queues.get(kind);
            if !q.available && kind != QueueKind::Unexpected {
                let why = q.reason.as_ref().map_or("not available", |r| r.as_str());
                unavailable.push(t.text(&format!("{} {}: {why}", c.name, kind.as_str())));
            }
            for op in &q.operations {
                let comm = t.text(&c.name);
                ops.push(json!([
                    comm,
                    kind.as_str(),
                    op.peer.local,
                    op.peer.world,
                    u8::from(op.any_source),
                    op.tag,
                    u8::from(op.any_tag),
                    op.length,
                    op.status.as_str()
                ]));
            }
        }
    }
    let mut v = json!({
        "rank": p.world_rank,
        "pid": p.pid,
        "node": t.opt_text(p.node.as_deref()),
        "exe": t.text(&p.executable),
        "threads": threads,
        "comms": p.communicators.iter().map(|c| t.text(&c.name)).collect::<Vec<_>>(),
        "ops": ops,
    });
    let Some(o) = v.as_object_mut() else { return v };
    let mut put = |k: &str, val: Value| {
        if !val.is_null() {
            o.insert(k.into(), val);
        }
    };
    put("error", t.opt_text(p.error.as_deref()));
    put(
        "queues_missing",
        p.queues_missing
            .as_ref()
            .map_or(Value::Null, |q| Value::from(q.reason.as_str())),
    );
    put("stacks_missing", stacks_missing);
    put(
        "os",
        p.os.as_ref()
            .map_or(Value::Null, |os| serde_json::to_value(os).unwrap_or_default()),
    );
    if !unavailable.is_empty() {
        unavailable.sort_unstable();
        unavailable.dedup();
        put("unavailable", Value::from(unavailable));
    }
    put(
        "recorder",
        p.recorder.as_ref().map_or(Value::Null, |r| recorder(r, calls_per_rank)),
    );
    v
}

/// A rank's recorder: its last calls (at most `last`), its pending
/// requests and the communicators they name.
fn recorder(r: &Recording, last: usize) -> Value {
    let calls = &r.calls[r.calls.len().saturating_sub(last)..];
    json!({
        "mpi": r.mpi,
        "calls_started": r.calls_started,
        "kept": calls.len(),
        "calls": calls,
        "pending": r.pending,
        "pending_complete": r.pending_complete,
        "comms": r.comms,
    })
}

/// The analysis as `--format json` writes it, its edges and unmatched
/// operations cut to what the page shows (every edge of a cycle, then the
/// first [`PAGE_EDGES`]; the first [`PAGE_UNMATCHED`]), and `page_cut`
/// saying how many of each it had, when any was cut.
fn analysis(a: &crate::analysis::Analysis) -> Value {
    let mut v = serde_json::to_value(a).unwrap_or_default();
    let on_cycle: std::collections::HashSet<(i64, i64)> = a
        .cycles
        .iter()
        .flat_map(|c| c.iter().zip(c.iter().cycle().skip(1)).map(|(f, t)| (*f, *t)))
        .collect();
    let mut cut = serde_json::Map::new();
    if a.edges.len() > PAGE_EDGES {
        let mut others = 0;
        let kept: Vec<Value> = a
            .edges
            .iter()
            .filter(|e| {
                on_cycle.contains(&(e.from, e.to)) || {
                    others += 1;
                    others <= PAGE_EDGES
                }
            })
            .map(|e| serde_json::to_value(e).unwrap_or_default())
            .collect();
        cut.insert("edges".into(), json!({ "kept": kept.len(), "of": a.edges.len() }));
        v["edges"] = Value::from(kept);
    }
    if a.unmatched.len() > PAGE_UNMATCHED {
        let kept = &a.unmatched[..PAGE_UNMATCHED];
        cut.insert(
            "unmatched".into(),
            json!({ "kept": kept.len(), "of": a.unmatched.len() }),
        );
        v["unmatched"] = serde_json::to_value(kept).unwrap_or_default();
    }
    if !cut.is_empty() {
        v["page_cut"] = Value::Object(cut);
    }
    v
}

/// The data the page's script reads (`#mpiq-data`, [`PAGE_SCHEMA`]): the
/// analysis as `--format json` writes it, the merged stacks
/// (`stack_tree`), the debugger commands, every rank in the page's compact
/// form with the tables its numbers index (`texts`, `frames`, `stacks`),
/// and `title`, `exit` (`status`, `meaning`), `text`.
pub fn data(report: &Report, opts: &DumpOptions, handoff: Option<&Handoff>, page: &Page<'_>) -> Value {
    let mut t = Tables::default();
    let recorded = report
        .snapshot
        .processes
        .iter()
        .filter(|p| p.recorder.is_some())
        .count();
    let calls_per_rank = (PAGE_CALLS / recorded.max(1)).clamp(2, CALLS_PER_RANK);
    let processes: Vec<Value> = report
        .snapshot
        .processes
        .iter()
        .map(|p| process(&mut t, p, calls_per_rank))
        .collect();
    let tree = report.stack_tree(opts);
    let debug_commands = match (&tree, handoff) {
        (Some(_), Some(h)) => {
            let groups = handoff::groups(&report.snapshot, h);
            (!groups.is_empty()).then(|| handoff::json(&groups, &h.debuggers))
        }
        _ => None,
    };
    json!({
        "schema": PAGE_SCHEMA,
        "snapshot_schema": SCHEMA,
        "title": page.title,
        "exit": page.exit.map(|(status, meaning)| json!({ "status": status, "meaning": meaning })),
        "text": page.text,
        "analysis": report.analysis.as_ref().map(analysis),
        "stack_tree": tree.as_ref().map(super::tree::tree_json),
        "debug_commands": debug_commands,
        "calls_per_rank": calls_per_rank,
        "texts": t.texts.values,
        "frames": t.frames.values,
        "stacks": t.stacks.values,
        "processes": processes,
    })
}

/// `s` escaped for HTML text and attribute values.
fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// [`data`] as the page embeds it: compact JSON with every `<` written
/// `\u003c`, so that nothing in a name the target chose (a function, a
/// communicator, a path) can end the script element. In JSON a `<` is only
/// ever inside a string, where `\u003c` means the same.
pub fn data_json(data: &Value) -> String {
    data.to_string().replace('<', "\\u003c")
}

/// The page: the template with its style, script, title and data filled
/// in, in one pass (nothing filled in is read again for a marker).
pub fn page(report: &Report, opts: &DumpOptions, handoff: Option<&Handoff>, page: &Page<'_>) -> String {
    let data = data_json(&data(report, opts, handoff, page));
    let title = escape_html(page.title);
    let mut out = String::with_capacity(TEMPLATE.len() + CSS.len() + JS.len() + data.len());
    let mut rest = TEMPLATE;
    while let Some(at) = rest.find('@') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let filled = ["CSS", "JS", "TITLE", "DATA", "VERSION"].iter().find_map(|name| {
            after
                .strip_prefix(name)
                .and_then(|r| r.strip_prefix('@'))
                .map(|r| (*name, r))
        });
        match filled {
            Some((name, r)) => {
                out.push_str(match name {
                    "CSS" => CSS,
                    "JS" => JS,
                    "TITLE" => &title,
                    "DATA" => &data,
                    _ => env!("CARGO_PKG_VERSION"),
                });
                rest = r;
            }
            None => {
                out.push('@');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::Samples;
    use crate::snapshot::model::{Snapshot, Stacks};

    /// Three ranks at one place, the executable's name with a `</script>`.
    fn report() -> Report {
        let stacks: Stacks = serde_json::from_value(json!({
            "threads": [{"tid": 1, "frames": [
                {"pc": "0x1", "function": "PMPI_Recv", "object": "/l/libmpi.so"},
                {"pc": "0x2", "function": "main", "object": "/a/ring", "file": "/a/ring.c", "line": 9}
            ]}]
        }))
        .unwrap();
        let p = |rank: i32| ProcessSnapshot {
            stacks: Some(stacks.clone()),
            ..ProcessSnapshot::new(Some(10 + rank as u32), Some(rank), "/a/x</script><b>")
        };
        Report::analyzed(Samples {
            current: Snapshot {
                processes: vec![p(0), p(1), p(2)],
                ..Snapshot::default()
            },
            ..Samples::default()
        })
    }

    /// A page titled `title`, with `text` and `exit`.
    fn page_of<'a>(title: &'a str, text: &'a str, exit: Option<(u8, &'a str)>) -> Page<'a> {
        Page { title, text, exit }
    }

    /// The `<script type="application/json">` element's content.
    fn embedded(html: &str) -> &str {
        let start = html.find("id=\"mpiq-data\">").expect("the data element") + "id=\"mpiq-data\">".len();
        let end = start + html[start..].find("</script>").expect("its end");
        &html[start..end]
    }

    #[test]
    fn the_page_is_self_contained_and_its_data_round_trips() {
        let r = report();
        let html = page(
            &r,
            &DumpOptions::default(),
            None,
            &page_of(
                "x & y: <3 ranks>",
                "verdict: DEADLOCK </script>",
                Some((3, "a deadlock was found")),
            ),
        );
        assert!(html.starts_with("<!DOCTYPE html>"), "{html}");
        for m in ["@CSS@", "@JS@", "@TITLE@", "@DATA@", "@VERSION@"] {
            assert!(!html.contains(m), "{m} left in the page");
        }
        assert!(html.contains("<title>x &amp; y: &lt;3 ranks&gt;</title>"), "{html}");
        // Nothing from elsewhere: no src=, no stylesheet or import, no URL
        // but the SVG namespace's name and references within the page.
        assert!(html.match_indices("url(").all(|(i, _)| html[i..].starts_with("url(#")));
        for bad in [
            "src=",
            "@import",
            "https://",
            "<link",
            "<iframe",
            "fetch(",
            "XMLHttpRequest",
        ] {
            assert!(!html.contains(bad), "{bad} in the page");
        }
        assert!(html
            .match_indices("http://")
            .all(|(i, _)| html[i..].starts_with("http://www.w3.org/2000/svg")));
        assert!(html.contains("default-src 'none'"));
        // The data: no `<` in it, and the same facts back.
        let data = embedded(&html);
        assert!(!data.contains('<'), "{data}");
        let v: Value = serde_json::from_str(data).unwrap();
        assert_eq!(v["schema"], PAGE_SCHEMA);
        assert_eq!(v["text"], "verdict: DEADLOCK </script>");
        assert_eq!(v["exit"]["status"], 3);
        assert_eq!(v["title"], "x & y: <3 ranks>");
        assert_eq!(
            v["analysis"],
            serde_json::to_value(r.analysis.as_ref().unwrap()).unwrap()
        );
        assert_eq!(v["stack_tree"]["ranks"], json!([[0, 2]]));
        // One script element of data, and the page's own script after it.
        assert_eq!(html.matches("</script>").count(), 2);
    }

    #[test]
    fn ranks_at_one_place_share_their_stack_and_names() {
        let r = report();
        let v = data(&r, &DumpOptions::default(), None, &page_of("t", "", None));
        let procs = v["processes"].as_array().unwrap();
        assert_eq!(procs.len(), 3);
        // One stack of two frames, one executable, for all three.
        assert_eq!(v["stacks"], json!([[0, 1]]));
        assert_eq!(v["frames"].as_array().unwrap().len(), 2);
        let texts = v["texts"].as_array().unwrap();
        for (rank, p) in procs.iter().enumerate() {
            assert_eq!(p["rank"], rank);
            assert_eq!(p["pid"], 10 + rank);
            assert_eq!(p["threads"], json!([[1, 0, null, null]]));
            assert_eq!(texts[p["exe"].as_u64().unwrap() as usize], "/a/x</script><b>");
        }
        let main = &v["frames"][1];
        assert_eq!(texts[main[0].as_u64().unwrap() as usize], "main");
        assert_eq!(main[3], 9);
        assert!(v["exit"].is_null());
    }

    #[test]
    fn a_graph_of_many_waits_keeps_its_cycles_and_says_what_it_cut() {
        let edge = |from: i64, to: i64| -> crate::analysis::Edge {
            serde_json::from_value(json!({
                "from": from, "to": to, "kind": "and", "communicator": "MPI_COMM_WORLD",
                "tag": 1, "op": "receive", "wait": null
            }))
            .unwrap()
        };
        let mut a = report().analysis.unwrap();
        a.edges = (0..PAGE_EDGES as i64 + 100).map(|i| edge(10 + i, 11 + i)).collect();
        // The cycle's edges last, where the first PAGE_EDGES would not reach.
        a.edges.push(edge(0, 1));
        a.edges.push(edge(1, 0));
        a.cycles = vec![vec![0, 1]];
        let v = analysis(&a);
        let edges = v["edges"].as_array().unwrap();
        assert_eq!(edges.len(), PAGE_EDGES + 2);
        assert!(edges.iter().any(|e| e["from"] == 0 && e["to"] == 1));
        assert!(edges.iter().any(|e| e["from"] == 1 && e["to"] == 0));
        assert_eq!(
            v["page_cut"]["edges"],
            json!({ "kept": PAGE_EDGES + 2, "of": PAGE_EDGES + 102 })
        );
        assert!(v["page_cut"].get("unmatched").is_none());
        // A small analysis is whole, with nothing said.
        let small = report().analysis.unwrap();
        assert_eq!(analysis(&small), serde_json::to_value(&small).unwrap());
    }
}
