//! What a command prints: the snapshot as the bridge renders it (the same
//! text and JSON as gdb's and lldb's), plus the cross-rank analysis
//! ([`mpiq::analysis`]) as a text section, a top-level `"analysis"` JSON
//! object, a graphviz graph, CSV edges or an SVG file; and the exit status
//! the verdict maps to.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use mpiq::analysis::{self, Analysis, Verdict};
use mpiq::{DumpOptions, Snapshot};

use crate::args::OutputFormat;

/// Exit status: a deadlock was found.
pub const EXIT_DEADLOCK: u8 = 3;
/// Exit status: the analysis could not decide (verdict `unknown`).
pub const EXIT_UNKNOWN: u8 = 4;

/// The exit status for a verdict (`None`: no analysis was made).
pub fn exit_code(verdict: Option<Verdict>) -> u8 {
    match verdict {
        None | Some(Verdict::NoDeadlock) => 0,
        Some(Verdict::Deadlock) => EXIT_DEADLOCK,
        Some(Verdict::Unknown) => EXIT_UNKNOWN,
    }
}

/// The samples of one command: the last snapshot and, for a live job, the
/// one before it.
#[derive(Debug, Default)]
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
            mut current,
            previous,
            interval_ms,
            second_failed,
        } = samples;
        let mut a = analysis::analyze_samples(&current, previous.as_ref(), interval_ms);
        if let Some(why) = second_failed {
            second_sample_failed(&mut a, &why);
        }
        analysis::infer_groups(&mut current);
        Report {
            snapshot: current,
            analysis: Some(a),
        }
    }

    /// The verdict, if an analysis was made.
    pub fn verdict(&self) -> Option<Verdict> {
        self.analysis.as_ref().map(|a| a.verdict)
    }

    /// The output in `format`; `opts` filters the snapshot's communicators
    /// and queues (never the analysis, which is about the whole job).
    pub fn render(&self, format: OutputFormat, opts: &DumpOptions) -> String {
        let Some(a) = &self.analysis else {
            return mpiq::render(&self.snapshot, opts);
        };
        match format {
            OutputFormat::Text => {
                let mut out = mpiq::render(&self.snapshot, opts);
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(&analysis::render_text(a));
                out
            }
            OutputFormat::Json => with_analysis_json(&mpiq::render(&self.snapshot, opts), a),
            OutputFormat::Dot => analysis::render_dot(a),
            OutputFormat::Csv => analysis::render_csv(a),
        }
    }
}

/// A live job whose second sample failed (its ranks exited or vanished
/// between the samples): the first sample alone cannot show a deadlock that
/// lasts.
fn second_sample_failed(a: &mut Analysis, why: &str) {
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

/// Inserts `"analysis"` as the last key of the snapshot JSON the bridge
/// rendered, leaving `schema` and `processes` byte for byte as they are.
///
/// Done on the text (the bridge's pretty JSON ends in `\n}\n`; JSON strings
/// hold no raw newline, so indenting lines is safe): a job of 16 ranks with
/// 1,000 receives each is 17 MB of JSON, and a `serde_json::Value` of it
/// would cost several times that.
pub fn with_analysis_json(snapshot_json: &str, a: &Analysis) -> String {
    let analysis = serde_json::to_string_pretty(a).unwrap_or_else(|e| {
        serde_json::json!({ "verdict": "unknown", "summary": format!("cannot serialize the analysis: {e}") })
            .to_string()
    });
    let Some(head) = snapshot_json.strip_suffix("\n}\n").filter(|h| h.starts_with('{')) else {
        // Not the bridge's usual layout (an error object): go through a Value.
        let mut value: serde_json::Value = match serde_json::from_str(snapshot_json) {
            Ok(v) => v,
            Err(_) => return snapshot_json.to_string(),
        };
        if let (Some(obj), Ok(av)) = (value.as_object_mut(), serde_json::from_str(&analysis)) {
            obj.insert("analysis".into(), av);
        }
        return serde_json::to_string_pretty(&value).unwrap_or_default() + "\n";
    };
    let mut out = String::with_capacity(snapshot_json.len() + analysis.len() + analysis.len() / 8 + 32);
    out.push_str(head);
    out.push_str(if head.trim_end() == "{" { "\n" } else { ",\n" });
    out.push_str("  \"analysis\": ");
    for (i, line) in analysis.lines().enumerate() {
        if i > 0 {
            out.push_str("\n  ");
        }
        out.push_str(line);
    }
    out.push_str("\n}\n");
    out
}

/// Why the wait-for graph could not be drawn.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SvgError {
    /// graphviz's `dot` is not on `PATH`.
    #[error(
        "--svg needs graphviz's `dot` program, which is not installed (or not on PATH): install the \
         `graphviz` package, or use --format dot and render the graph elsewhere"
    )]
    NoDot,
    /// `dot` could not be run.
    #[error("cannot run graphviz's `dot`: {0}")]
    Spawn(std::io::Error),
    /// `dot` failed.
    #[error("graphviz's `dot` could not write {path}: {why}")]
    Failed {
        /// The SVG file.
        path: String,
        /// Its exit status and error output.
        why: String,
    },
}

/// Checks that graphviz's `dot` can be run (before any process is stopped).
pub fn check_dot() -> Result<(), SvgError> {
    match Command::new("dot")
        .arg("-V")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(SvgError::NoDot),
        Err(e) => Err(SvgError::Spawn(e)),
    }
}

/// Renders the wait-for graph into `path` with `dot -Tsvg`.
pub fn write_svg(a: &Analysis, path: &Path) -> Result<(), SvgError> {
    let mut child = Command::new("dot")
        .arg("-Tsvg")
        .arg("-o")
        .arg(path)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => SvgError::NoDot,
            _ => SvgError::Spawn(e),
        })?;
    let graph = analysis::render_dot(a);
    let written = child.stdin.take().map(|mut stdin| stdin.write_all(graph.as_bytes()));
    let out = child.wait_with_output().map_err(SvgError::Spawn)?;
    let failed = |why: String| SvgError::Failed {
        path: path.display().to_string(),
        why,
    };
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(failed(format!("{} ({})", err.trim(), out.status)));
    }
    if let Some(Err(e)) = written {
        return Err(failed(e.to_string()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes() {
        assert_eq!(exit_code(None), 0);
        assert_eq!(exit_code(Some(Verdict::NoDeadlock)), 0);
        assert_eq!(exit_code(Some(Verdict::Deadlock)), 3);
        assert_eq!(exit_code(Some(Verdict::Unknown)), 4);
    }

    #[test]
    fn the_analysis_is_added_after_the_snapshot() {
        let snap = Snapshot::default();
        let opts = DumpOptions::parse_line("--json").unwrap();
        let plain = mpiq::render(&snap, &opts);
        let r = Report::analyzed(Samples {
            current: snap,
            ..Samples::default()
        });
        let out = r.render(OutputFormat::Json, &opts);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["schema", "processes", "analysis"]);
        assert_eq!(v["analysis"]["verdict"], "unknown");
        // schema and processes as the bridge printed them.
        let mut without = v.clone();
        without.as_object_mut().unwrap().remove("analysis");
        assert_eq!(serde_json::to_string_pretty(&without).unwrap() + "\n", plain);
        // The same text serde_json would print for the whole object.
        let mut snap = Snapshot::default();
        snap.processes
            .push(crate::run::failed_snapshot(Some(7), Some(0), "x".into(), "gone".into()));
        let a = analysis::analyze(&snap, None);
        let text = with_analysis_json(&mpiq::render(&snap, &opts), &a);
        let mut whole = serde_json::to_value(&snap).unwrap();
        whole
            .as_object_mut()
            .unwrap()
            .insert("analysis".into(), serde_json::to_value(&a).unwrap());
        assert_eq!(text, serde_json::to_string_pretty(&whole).unwrap() + "\n");
        assert!(r
            .render(OutputFormat::Text, &DumpOptions::default())
            .contains("Deadlock analysis: unknown"));
        assert!(r.render(OutputFormat::Dot, &opts).starts_with("digraph"));
        assert!(r.render(OutputFormat::Csv, &opts).starts_with("from,to,kind"));
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
    }
}
