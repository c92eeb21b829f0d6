//! The files a dump command writes beside its output (`--flamegraph FILE`,
//! `--html FILE`): their paths checked before any process is stopped (a
//! typo should not cost the job's report), and their one error.

use std::io::Write;
use std::path::Path;

/// Why a file an option named could not be written.
#[derive(Debug, thiserror::Error)]
#[error("{option}: cannot write {path}: {why}")]
pub struct OutputFileError {
    /// The option (`--flamegraph`, `--html`).
    pub option: &'static str,
    /// The file.
    pub path: String,
    /// What failed.
    pub why: String,
}

/// Writes `bytes` into `path`, for `option`.
pub fn write(option: &'static str, path: &Path, bytes: &[u8]) -> Result<(), OutputFileError> {
    let failed = |why: String| OutputFileError {
        option,
        path: path.display().to_string(),
        why,
    };
    let mut f = std::fs::File::create(path).map_err(|e| failed(e.to_string()))?;
    f.write_all(bytes)
        .and_then(|()| f.flush())
        .map_err(|e| failed(e.to_string()))
}

/// Checks, before any process is stopped, that `path` can be a file: its
/// directory exists and it is not a directory.
pub fn check_path(option: &'static str, path: &Path) -> Result<(), OutputFileError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let failed = |why: String| OutputFileError {
        option,
        path: path.display().to_string(),
        why,
    };
    if path.is_dir() {
        return Err(failed("it is a directory".into()));
    }
    if !dir.is_dir() {
        return Err(failed(format!("no directory {}", dir.display())));
    }
    Ok(())
}
