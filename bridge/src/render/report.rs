//! A snapshot with its cross-rank analysis, as text or JSON: the snapshot as
//! [`super::render`] prints it, then where the ranks are (every rank's
//! stacks merged, [`super::tree`]; compact, or every frame with `--stacks`)
//! and the analysis ([`crate::analysis`]) as text sections, or as the
//! top-level `"analysis"` and `"stack_tree"` JSON values. Every front end
//! can print the same report; the CLI does (its graphviz, CSV and SVG
//! outputs of the wait-for graph are its own; [`Report::graph_dot`] adds the
//! merged stacks to the graph). [`Report::render_with`] adds the commands
//! that open one rank of each group in gdb or lldb ([`super::handoff`]);
//! `--folded` prints the merged stacks alone ([`super::folded`]).

use super::handoff::{self, Handoff};
use crate::analysis::ranks_words;
use crate::analysis::{self, Analysis, Verdict};
use crate::options::{DumpOptions, Format, RankSet};
use crate::snapshot::model::{ProcessSnapshot, Snapshot};
use crate::stacks::tree::{Mode, StackTree};

/// The samples of one command: the last snapshot and, for a live job, the
/// one before it.
#[derive(Clone, Debug, Default)]
pub struct Samples {
    /// The snapshot shown.
    pub current: Snapshot,
    /// The sample taken before it, when two were taken.
    pub previous: Option<Snapshot>,
    /// Milliseconds between the starts of the two samples.
    pub interval_ms: Option<u64>,
    /// Why a second sample that was asked for could not be taken.
    pub second_failed: Option<String>,
}

/// A snapshot with inferred groups and, when made, its analysis.
#[derive(Debug)]
pub struct Report {
    /// The snapshot, with the groups [`analysis::infer_groups`] could
    /// infer (`world_ranks_source = "inferred"`).
    pub snapshot: Snapshot,
    /// The cross-rank analysis, if one was made.
    pub analysis: Option<Analysis>,
}

impl Report {
    /// The snapshot alone, exactly as collected.
    pub fn plain(snapshot: Snapshot) -> Report {
        Report {
            snapshot,
            analysis: None,
        }
    }

    /// Analyses the samples (groups inferred, two samples compared) and
    /// fills in the groups of the snapshot shown.
    pub fn analyzed(samples: Samples) -> Report {
        let Samples {
            current,
            previous,
            interval_ms,
            second_failed,
        } = samples;
        let (mut a, current) = analysis::analyze_owned(current, previous.as_ref(), interval_ms);
        if let Some(why) = second_failed {
            second_sample_failed(&mut a, &why);
        }
        Report {
            snapshot: current,
            analysis: Some(a),
        }
    }

    /// The verdict, if an analysis was made.
    pub fn verdict(&self) -> Option<Verdict> {
        self.analysis.as_ref().map(|a| a.verdict)
    }

    /// Every rank's stacks merged: compact, or every frame with
    /// `--stacks`; `None` when no process's stacks were read
    /// (`--no-stacks`).
    pub fn stack_tree(&self, opts: &DumpOptions) -> Option<StackTree> {
        if self.snapshot.processes.iter().all(|p| p.stacks.is_none()) {
            return None;
        }
        let mode = if opts.stacks { Mode::Full } else { Mode::Compact };
        Some(StackTree::build(&self.snapshot, mode))
    }

    /// The wait-for graph in graphviz's language, with the merged stacks
    /// as `subgraph cluster_stacks`; `None` without an analysis.
    pub fn graph_dot(&self, opts: &DumpOptions) -> Option<String> {
        let graph = super::verdict::render_dot(self.analysis.as_ref()?);
        Some(match self.stack_tree(opts) {
            Some(tree) => super::tree::with_stacks_dot(&graph, &tree),
            None => graph,
        })
    }

    /// The report as `opts.format` asks: the snapshot (its communicators and
    /// queues filtered by `opts`), then where the ranks are and the
    /// analysis, which are about the whole job and never filtered; or the
    /// merged stacks as folded lines ([`super::folded`]).
    pub fn render(&self, opts: &DumpOptions) -> String {
        self.render_with(opts, None)
    }

    /// [`Report::render`], with the commands that open one rank of each
    /// group of the merged stacks in gdb and lldb ([`super::handoff`]): in
    /// the text after where the ranks are, in JSON as `debug_commands`
    /// after `stack_tree`. Only with an analysis and stacks, as the merged
    /// stacks themselves.
    pub fn render_with(&self, opts: &DumpOptions, handoff: Option<&Handoff>) -> String {
        let Some(a) = &self.analysis else {
            return super::render(&self.snapshot, opts);
        };
        let tree = self.stack_tree(opts).filter(|_| opts.format != Format::Folded);
        let groups = match (&tree, handoff) {
            (Some(_), Some(h)) => handoff::groups(&self.snapshot, h),
            _ => Vec::new(),
        };
        match opts.format {
            Format::Folded => super::folded::render(&self.snapshot, opts),
            Format::Text if self.snapshot.processes.len() > 1 => {
                // A job: the answer first, then where the ranks are, then
                // the detail of the ranks it names (or asked for).
                let mut out = super::verdict::render_text(a);
                if let Some(tree) = &tree {
                    out.push('\n');
                    out.push_str(&super::tree::text(tree));
                }
                if let (Some(h), false) = (handoff, groups.is_empty()) {
                    out.push('\n');
                    out.push_str(&handoff::text(&groups, &h.debuggers));
                }
                if let Some(calls) = super::recorder::job_text(&self.snapshot) {
                    out.push('\n');
                    out.push_str(&calls);
                }
                out.push('\n');
                out.push_str(&self.detail_text(a, opts));
                out
            }
            Format::Text => {
                let mut out = super::render(&self.snapshot, opts);
                if let Some(tree) = &tree {
                    if !out.is_empty() {
                        out.push('\n');
                    }
                    out.push_str(&super::tree::text(tree));
                }
                if let (Some(h), false) = (handoff, groups.is_empty()) {
                    out.push('\n');
                    out.push_str(&handoff::text(&groups, &h.debuggers));
                }
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(&super::verdict::render_text(a));
                out
            }
            Format::Json => {
                let mut out = with_analysis_json(&super::render(&self.snapshot, opts), a);
                if let Some(tree) = &tree {
                    let value = serde_json::to_string_pretty(&super::tree::tree_json(tree)).unwrap_or_default();
                    out = with_key_json(&out, "stack_tree", &value);
                }
                if let (Some(h), false) = (handoff, groups.is_empty()) {
                    let value = serde_json::to_string_pretty(&handoff::json(&groups, &h.debuggers)).unwrap_or_default();
                    out = with_key_json(&out, "debug_commands", &value);
                }
                out
            }
        }
    }
}

impl Report {
    /// The world ranks a job's text report shows in detail (`None`: every
    /// one): those `--ranks` names, every one with `--all` or `--ranks
    /// all`, else at most [`DETAIL_NAMED`] of the ranks the verdict names.
    /// A front end that holds only compact records of some ranks fetches
    /// these whole.
    pub fn detail_ranks(&self, opts: &DumpOptions) -> Option<Vec<i64>> {
        match (&opts.ranks, opts.all) {
            (Some(RankSet::All), _) | (None, true) => None,
            (Some(set), _) => Some(
                self.snapshot
                    .processes
                    .iter()
                    .filter_map(|p| p.world_rank.map(i64::from))
                    .filter(|&r| set.contains(r))
                    .collect(),
            ),
            (None, false) => Some(
                self.analysis
                    .as_ref()
                    .map(|a| named_ranks(a).into_iter().take(DETAIL_NAMED).collect())
                    .unwrap_or_default(),
            ),
        }
    }

    /// The processes of a job's text report shown in detail, and its
    /// heading: those `--ranks` names, every one with `--all` or
    /// `--ranks all`, else at most [`DETAIL_NAMED`] of the ranks the
    /// verdict names ([`named_ranks`]).
    fn detail_text(&self, a: &Analysis, opts: &DumpOptions) -> String {
        let procs = &self.snapshot.processes;
        let rank_of = |p: &ProcessSnapshot| p.world_rank.map(i64::from);
        let wanted = self.detail_ranks(opts);
        let shown: Vec<&ProcessSnapshot> = match &wanted {
            None => procs.iter().collect(),
            Some(ranks) => procs
                .iter()
                .filter(|p| rank_of(p).is_some_and(|r| ranks.contains(&r)))
                .collect(),
        };
        let heading = match (&wanted, &opts.ranks) {
            (None, _) => "Every rank in detail:".to_string(),
            (Some(_), Some(_)) if shown.is_empty() => "No rank of the job is in --ranks.".to_string(),
            (Some(_), Some(_)) => {
                let ranks: Vec<i64> = shown.iter().filter_map(|p| rank_of(p)).collect();
                format!("{} in detail (--ranks):", upper(&ranks_words(&ranks)))
            }
            (Some(named_shown), None) => {
                let named = named_ranks(a);
                if named.is_empty() {
                    format!(
                        "The verdict names no rank: --ranks LIST or --all shows the queues and stacks of {} \
                         (--json has them all).",
                        if procs.len() == 2 { "both" } else { "any of them" }
                    )
                } else if named.len() > shown.len() {
                    format!(
                        "{} in detail (the verdict names {}; --ranks LIST or --all shows others):",
                        upper(&ranks_words(named_shown)),
                        ranks_words(&named),
                    )
                } else {
                    format!(
                        "{} in detail, named by the verdict (--ranks LIST or --all shows others):",
                        upper(&ranks_words(named_shown))
                    )
                }
            }
        };
        let mut out = heading;
        out.push('\n');
        if !shown.is_empty() {
            out.push('\n');
            out.push_str(&super::render_processes_text(shown.into_iter(), opts));
        }
        out
    }
}

/// Most ranks a job's text report shows in detail unless asked.
pub const DETAIL_NAMED: usize = 4;

/// The ranks a verdict names, most telling first: those the others wait
/// for, the ranks of its cycles, those that could not be read, those that
/// may be stuck.
pub fn named_ranks(a: &Analysis) -> Vec<i64> {
    let mut out: Vec<i64> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let lists = a
        .waited_on
        .iter()
        .flat_map(|w| w.ranks.iter())
        .chain(a.cycles.iter().flatten())
        .chain(&a.unknown_ranks)
        .chain(&a.undecided);
    for &r in lists {
        if seen.insert(r) {
            out.push(r);
        }
    }
    out
}

/// "ranks 0-3" as the start of a sentence.
fn upper(words: &str) -> String {
    let mut c = words.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// Notes in the analysis of a live job that its second sample failed (its
/// ranks exited or vanished between the samples): the first sample alone
/// cannot show a deadlock that lasts, so a deadlock becomes unknown.
pub fn second_sample_failed(a: &mut Analysis, why: &str) {
    let why = why.lines().next().unwrap_or_default();
    a.notes.push(format!(
        "the second sample could not be taken ({why}): the verdict rests on the first sample alone"
    ));
    if a.verdict == Verdict::Deadlock {
        a.verdict = Verdict::Unknown;
        a.summary = format!(
            "unknown: the ranks could not be read again for a second sample (they may have exited); \
             the first sample alone said {}",
            a.summary
        );
    }
}

/// Inserts `"analysis"` as the last key of the snapshot JSON
/// [`super::render_json`] printed, leaving `schema` and `processes` byte for
/// byte as they are.
///
/// Done on the text (the pretty JSON ends in `\n}\n`; JSON strings hold no
/// raw newline, so indenting lines is safe): a job of 16 ranks with 1,000
/// receives each is 17 MB of JSON, and a `serde_json::Value` of it would
/// cost several times that.
pub fn with_analysis_json(snapshot_json: &str, a: &Analysis) -> String {
    let analysis = serde_json::to_string_pretty(a).unwrap_or_else(|e| {
        serde_json::json!({ "verdict": "unknown", "summary": format!("cannot serialize the analysis: {e}") })
            .to_string()
    });
    with_key_json(snapshot_json, "analysis", &analysis)
}

/// Inserts `"key": value` (`value`: JSON text) as the last key of the
/// pretty JSON object `json`, leaving the rest byte for byte as it is (see
/// [`with_analysis_json`]).
pub fn with_key_json(snapshot_json: &str, key: &str, analysis: &str) -> String {
    let Some(head) = snapshot_json.strip_suffix("\n}\n").filter(|h| h.starts_with('{')) else {
        // Not the usual layout (an error object): go through a Value.
        let mut value: serde_json::Value = match serde_json::from_str(snapshot_json) {
            Ok(v) => v,
            Err(_) => return snapshot_json.to_string(),
        };
        if let (Some(obj), Ok(av)) = (value.as_object_mut(), serde_json::from_str(analysis)) {
            obj.insert(key.into(), av);
        }
        return serde_json::to_string_pretty(&value).unwrap_or_default() + "\n";
    };
    let mut out = String::with_capacity(snapshot_json.len() + analysis.len() + analysis.len() / 8 + 32);
    out.push_str(head);
    out.push_str(if head.trim_end() == "{" { "\n" } else { ",\n" });
    out.push_str(&format!("  {}: ", serde_json::Value::from(key)));
    for (i, line) in analysis.lines().enumerate() {
        if i > 0 {
            out.push_str("\n  ");
        }
        out.push_str(line);
    }
    out.push_str("\n}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::model::ProcessSnapshot;

    fn failed_process() -> ProcessSnapshot {
        ProcessSnapshot {
            error: Some("gone".into()),
            ..ProcessSnapshot::new(Some(7), Some(0), "x")
        }
    }

    #[test]
    fn the_analysis_follows_the_snapshot_in_json() {
        let opts = DumpOptions::parse_line("--json").unwrap();
        let plain = super::super::render(&Snapshot::default(), &opts);
        let r = Report::analyzed(Samples::default());
        let v: serde_json::Value = serde_json::from_str(&r.render(&opts)).unwrap();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["schema", "processes", "analysis"]);
        assert_eq!(v["analysis"]["verdict"], "unknown");
        let mut without = v.clone();
        without.as_object_mut().unwrap().remove("analysis");
        assert_eq!(serde_json::to_string_pretty(&without).unwrap() + "\n", plain);
        // The same text serde_json prints for the whole object.
        let mut snap = Snapshot::default();
        snap.processes.push(failed_process());
        let a = analysis::analyze(&snap, None);
        let text = with_analysis_json(&super::super::render(&snap, &opts), &a);
        let mut whole = serde_json::to_value(&snap).unwrap();
        whole
            .as_object_mut()
            .unwrap()
            .insert("analysis".into(), serde_json::to_value(&a).unwrap());
        assert_eq!(text, serde_json::to_string_pretty(&whole).unwrap() + "\n");
        // Without an analysis: the snapshot as it is.
        assert_eq!(
            Report::plain(snap.clone()).render(&opts),
            super::super::render(&snap, &opts)
        );
        assert_eq!(Report::plain(snap).verdict(), None);
    }

    #[test]
    fn where_the_ranks_are_comes_with_the_analysis() {
        let snap = crate::stacks::tree::tests::barrier_vs_recv();
        let r = Report::analyzed(Samples {
            current: snap.clone(),
            ..Samples::default()
        });
        let text = r.render(&DumpOptions::default());
        let section = "Where the ranks are (4 ranks, 4 application threads; 8 service threads not shown):\n";
        let (before, after) = text.split_once(section).expect(&text);
        // A job's report leads with the verdict, then where the ranks are,
        // then the ranks it names in detail.
        assert!(before.starts_with("Deadlock analysis: no deadlock\n"), "{text}");
        // It names no rank: none is shown, and the last line says how.
        assert!(!after.contains("Process pid"), "{text}");
        assert!(text.ends_with("(--json has them all).\n"), "{text}");
        let one = r.render(&DumpOptions::parse_line("--ranks 0").unwrap());
        let (_, detail) = one.split_once("Rank 0 in detail (--ranks):\n").expect(&one);
        assert!(
            detail.contains("  where: in MPI_Barrier, called from main (barrier_vs_recv.c:54)\n"),
            "{one}"
        );
        assert!(!detail.contains("rank 1:"), "{one}");
        assert!(!detail.contains("Threads ("), "frames only with --stacks: {one}");
        for every in ["--all", "--ranks all"] {
            let all = r.render(&DumpOptions::parse_line(every).unwrap());
            assert_eq!(all.matches("\nProcess pid").count(), 4, "{all}");
        }
        let full = r.render(&DumpOptions::parse_line("--stacks --ranks 0").unwrap());
        assert!(
            full.contains("Threads (3):") && full.contains("\nCall stacks of every thread (4 ranks, 12 threads):\n"),
            "{full}"
        );
        // JSON: the analysis untouched, the tree after it.
        let json = r.render(&DumpOptions::parse_line("--json").unwrap());
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["schema", "processes", "analysis", "stack_tree"]);
        assert_eq!(
            v["analysis"],
            serde_json::to_value(r.analysis.as_ref().unwrap()).unwrap()
        );
        assert_eq!(v["stack_tree"]["ranks"], serde_json::json!([[0, 3]]));
        assert_eq!(v["processes"][0]["stacks"]["threads"].as_array().map(Vec::len), Some(3));
        let dot = r.graph_dot(&DumpOptions::default()).unwrap();
        assert!(dot.contains("subgraph cluster_stacks"), "{dot}");
        // Without stacks: no section, no tree.
        let mut bare = snap;
        for p in &mut bare.processes {
            p.stacks = None;
        }
        let r = Report::analyzed(Samples {
            current: bare,
            ..Samples::default()
        });
        assert!(r.analysis.as_ref().unwrap().where_.is_empty());
        assert!(!r.render(&DumpOptions::default()).contains("Where the ranks are"));
        assert!(!r
            .render(&DumpOptions::parse_line("--json").unwrap())
            .contains("stack_tree"));
        assert!(!r.graph_dot(&DumpOptions::default()).unwrap().contains("cluster_stacks"));
    }

    #[test]
    fn the_analysis_follows_the_snapshot_in_text() {
        let r = Report::analyzed(Samples::default());
        let text = r.render(&DumpOptions::default());
        assert!(text.contains("Deadlock analysis: unknown"), "{text}");
        assert_eq!(r.verdict(), Some(Verdict::Unknown));
    }

    #[test]
    fn a_failed_second_sample_never_confirms_a_deadlock() {
        let mut a = analysis::analyze(&Snapshot::default(), None);
        a.verdict = Verdict::Deadlock;
        a.summary = "deadlock: rank 0 waits for rank 1".into();
        second_sample_failed(&mut a, "no process 4242\nmore");
        assert_eq!(a.verdict, Verdict::Unknown);
        assert!(a.summary.contains("rank 0 waits for rank 1"), "{}", a.summary);
        assert!(a.notes.iter().any(|n| n.contains("no process 4242")), "{:?}", a.notes);
        let r = Report::analyzed(Samples {
            second_failed: Some("gone".into()),
            ..Samples::default()
        });
        let notes = &r.analysis.as_ref().unwrap().notes;
        assert!(notes.iter().any(|n| n.contains("(gone)")), "{notes:?}");
    }
}
