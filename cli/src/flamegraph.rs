//! `--flamegraph FILE.svg`: the merged call stacks as a flame graph, drawn
//! by inferno from the bridge's folded lines ([`mpiq::render::folded`], the
//! same as `--format folded` prints), every box as wide as the ranks whose
//! stacks pass through it.

use std::path::Path;

use mpiq::render::folded;
use mpiq::DumpOptions;

use crate::report::Report;

pub use crate::outfile::OutputFileError as FlamegraphError;

/// The job's name in the title: the executables' base names (the first
/// three distinct ones), or "MPI job".
fn job_name(report: &Report) -> String {
    let mut names: Vec<&str> = Vec::new();
    for p in &report.snapshot.processes {
        let base = p.executable.rsplit('/').next().unwrap_or_default();
        if !base.is_empty() && !names.contains(&base) {
            names.push(base);
        }
    }
    match names.len() {
        0 => "MPI job".into(),
        1..=3 => names.join(", "),
        n => format!("{} and {} more", names[..3].join(", "), n - 3),
    }
}

/// The title: the job and how many ranks it has.
pub fn title(report: &Report) -> String {
    let n = report.snapshot.processes.len();
    let ranks = if n == 1 { "1 rank".into() } else { format!("{n} ranks") };
    format!("{}: where its {ranks} are", job_name(report))
}

/// The flame graph of the report's merged stacks (compact, or every frame
/// with `--stacks`) as SVG.
pub fn svg(report: &Report, opts: &DumpOptions) -> std::io::Result<Vec<u8>> {
    let text = folded::render(&report.snapshot, opts);
    let mut o = inferno::flamegraph::Options::default();
    o.title = title(report);
    o.subtitle = report
        .analysis
        .as_ref()
        .map(|a| format!("deadlock analysis: {}", a.verdict.as_str()));
    o.count_name = "ranks".into();
    o.name_type = "Frame:".into();
    // mpiq's lines are sorted already.
    o.no_sort = true;
    // Colours by function name, not at random: the same file for the same
    // stacks, and a function keeps its colour from one hang to the next.
    o.deterministic = true;
    let mut out = Vec::new();
    inferno::flamegraph::from_lines(&mut o, text.lines(), &mut out)?;
    Ok(out)
}

/// Draws the flame graph into `path`.
pub fn write(report: &Report, opts: &DumpOptions, path: &Path) -> Result<(), FlamegraphError> {
    let bytes = svg(report, opts).map_err(|e| FlamegraphError {
        option: "--flamegraph",
        path: path.display().to_string(),
        why: e.to_string(),
    })?;
    crate::outfile::write("--flamegraph", path, &bytes)
}

/// Checks, before any process is stopped, that `path` can be a file: its
/// directory exists (a typo should not cost the job's report).
pub fn check_path(path: &Path) -> Result<(), FlamegraphError> {
    crate::outfile::check_path("--flamegraph", path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Samples;
    use mpiq::{ProcessSnapshot, Snapshot};

    fn report() -> Report {
        let stacks: mpiq::snapshot::model::Stacks = serde_json::from_value(serde_json::json!({
            "threads": [{"tid": 1, "frames": [
                {"pc": "0x1", "function": "PMPI_Recv", "object": "/l/libmpi.so"},
                {"pc": "0x2", "function": "main", "object": "/a/ring", "file": "/a/ring.c", "line": 9}
            ]}]
        }))
        .unwrap();
        let p = |rank: i32| ProcessSnapshot {
            stacks: Some(stacks.clone()),
            ..ProcessSnapshot::new(Some(10 + rank as u32), Some(rank), "/a/ring")
        };
        Report::analyzed(Samples {
            current: Snapshot {
                processes: vec![p(0), p(1), p(2)],
                ..Snapshot::default()
            },
            ..Samples::default()
        })
    }

    #[test]
    fn an_svg_of_the_folded_stacks() {
        let r = report();
        assert_eq!(title(&r), "ring: where its 3 ranks are");
        let svg = String::from_utf8(svg(&r, &DumpOptions::default()).unwrap()).unwrap();
        assert!(svg.starts_with("<?xml"), "{svg}");
        assert!(svg.contains("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("ring: where its 3 ranks are"));
        assert!(svg.contains("<title>MPI_Recv (3 ranks, 100.00%)</title>"), "{svg}");
        let dir = std::env::temp_dir().join(format!("mpiq-flame-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("f.svg");
        write(&r, &DumpOptions::default(), &file).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), svg);
        let bad = dir.join("no/such/dir/f.svg");
        let e = write(&r, &DumpOptions::default(), &bad).unwrap_err().to_string();
        assert!(
            e.starts_with("--flamegraph: cannot write ") && e.contains("f.svg"),
            "{e}"
        );
        assert!(check_path(&bad).unwrap_err().to_string().contains("no directory"));
        assert!(check_path(&dir).unwrap_err().to_string().contains("a directory"));
        assert!(check_path(&file).is_ok() && check_path(Path::new("x.svg")).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
