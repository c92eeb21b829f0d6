//! `--html FILE` (and `report.html` of `mpiq run --report DIR`): the
//! report as one self-contained web page ([`mpiq::render::html`]), made
//! from the same report as the text and the JSON: its facts and its text
//! are embedded, with the exit status and what it means.

use std::path::Path;

use mpiq::render::handoff::Handoff;
use mpiq::{DumpOptions, Format};

use crate::outfile::{self, OutputFileError};
use crate::report::Report;

/// The page of `report`: its facts and its text as `opts` render them
/// (whatever `--format` the command printed), and `exit`, the command's
/// exit status with its meaning.
pub fn page(report: &Report, opts: &DumpOptions, handoff: Option<&Handoff>, exit: Option<(u8, &str)>) -> String {
    let mut text_opts = opts.clone();
    text_opts.format = Format::Text;
    let text = report.render_with(&text_opts, handoff);
    page_with_text(report, opts, handoff, &text, exit)
}

/// The page of `report` with `text` as its text report (`mpiq run`'s,
/// which says more than the report), titled as the flame graph is.
pub fn page_with_text(
    report: &Report,
    opts: &DumpOptions,
    handoff: Option<&Handoff>,
    text: &str,
    exit: Option<(u8, &str)>,
) -> String {
    let title = crate::flamegraph::title(report);
    mpiq::render::html::page(
        report,
        opts,
        handoff,
        &mpiq::render::html::Page {
            title: &title,
            text,
            exit,
        },
    )
}

/// Writes the page of `report` into `path`.
pub fn write(
    report: &Report,
    opts: &DumpOptions,
    handoff: Option<&Handoff>,
    exit: Option<(u8, &str)>,
    path: &Path,
) -> Result<(), OutputFileError> {
    outfile::write("--html", path, page(report, opts, handoff, exit).as_bytes())
}

/// Checks, before any process is stopped, that `path` can be written.
pub fn check_path(path: &Path) -> Result<(), OutputFileError> {
    outfile::check_path("--html", path)
}
