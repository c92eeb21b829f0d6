//! What a command prints: the snapshot with its cross-rank analysis as the
//! bridge renders it ([`mpiq::render::report`], text or JSON, which every
//! front end could print), or the CLI's own outputs of the analysis: a
//! graphviz graph (with the merged stacks), CSV edges, an SVG file; and the
//! exit status the verdict maps to. (`--format folded` is the bridge's;
//! `--flamegraph` is [`crate::flamegraph`].)

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use mpiq::analysis::Verdict;
use mpiq::render::handoff::Handoff;
pub use mpiq::render::{Report, Samples};
use mpiq::DumpOptions;

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

/// What [`exit_code`] of `verdict` means, in words for a person.
pub fn exit_meaning(verdict: Option<Verdict>) -> &'static str {
    match verdict {
        None => "no cross-rank analysis was made",
        Some(Verdict::NoDeadlock) => "no deadlock: every waiting rank is served or can still progress",
        Some(Verdict::Deadlock) => "a deadlock was found",
        Some(Verdict::Unknown) => "the analysis could not decide; the report says what is missing",
    }
}

/// The output in `format`: text and JSON as the bridge renders the report
/// (`opts` filters the snapshot's communicators and queues, never the
/// analysis, which is about the whole job; `opts.format` is JSON when
/// `format` is); the wait-for graph for graphviz or as CSV edges.
pub fn render(report: &Report, format: OutputFormat, opts: &DumpOptions) -> String {
    render_with(report, format, opts, None)
}

/// [`render`], with the commands that open one rank of each group of the
/// merged stacks in gdb and lldb in the text and JSON
/// ([`Report::render_with`]); `--format folded` is the merged stacks alone
/// (`opts.format` is folded then).
pub fn render_with(report: &Report, format: OutputFormat, opts: &DumpOptions, handoff: Option<&Handoff>) -> String {
    match (format, &report.analysis) {
        (OutputFormat::Dot, Some(_)) => report.graph_dot(opts).unwrap_or_default(),
        (OutputFormat::Csv, Some(a)) => mpiq::render::verdict::render_csv(a),
        _ => report.render_with(opts, handoff),
    }
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

/// Renders a graph (the wait-for graph and the merged stacks,
/// [`Report::graph_dot`]) into `path` with `dot -Tsvg`.
pub fn write_svg(graph: &str, path: &Path) -> Result<(), SvgError> {
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
    use mpiq::Snapshot;

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
        let out = render(&r, OutputFormat::Json, &opts);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["schema", "processes", "analysis"]);
        assert_eq!(v["analysis"]["verdict"], "unknown");
        // The bridge's report as it is (render/report.rs tests its JSON).
        assert_eq!(out, r.render(&opts));
        let without_analysis: serde_json::Value = serde_json::from_str(&plain).unwrap();
        assert_eq!(without_analysis["processes"], v["processes"]);
        assert!(render(&r, OutputFormat::Text, &DumpOptions::default()).contains("Deadlock analysis: unknown"));
        assert!(render(&r, OutputFormat::Dot, &opts).starts_with("digraph"));
        assert!(render(&r, OutputFormat::Csv, &opts).starts_with("from,to,kind"));
        // Without an analysis, every format is the snapshot.
        let plain_report = Report::plain(Snapshot::default());
        assert_eq!(
            render(&plain_report, OutputFormat::Dot, &DumpOptions::default()),
            mpiq::render(&Snapshot::default(), &DumpOptions::default())
        );
    }

    #[test]
    fn a_failed_second_sample_never_confirms_a_deadlock() {
        // The bridge's rule (render/report.rs tests it), as the CLI's exit status.
        let r = Report::analyzed(Samples {
            second_failed: Some("no process 4242".into()),
            ..Samples::default()
        });
        assert_eq!(r.verdict(), Some(Verdict::Unknown));
        assert_eq!(exit_code(r.verdict()), 4);
    }
}
