//! Opening mpiq's report page (`--html FILE`, `report.html` of `mpiq run
//! --report DIR`) in a real browser: Debian's Chromium, headless, driven by
//! Playwright (`tests/browser/check_page.py`, in the venv `scripts/browser`
//! makes). The script does what a reader would and says what the page
//! showed; the assertions are the tests'. What every page must do is
//! checked here: it loads, its script ran, it made no request but for
//! itself, and it wrote nothing to the console. A screenshot of each page
//! is kept in `browser-screenshots/` of the profile directory (CI's
//! artifacts).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::frontends::{artifacts_dir, workspace_root};
use crate::run::run_within;

/// The Python of the venv with Playwright (`scripts/browser --print`), or
/// `$MPIQ_PLAYWRIGHT_PYTHON`.
pub fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("MPIQ_PLAYWRIGHT_PYTHON").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let out = Command::new(workspace_root().join("scripts/browser"))
        .arg("--print")
        .output()
        .expect("scripts/browser --print");
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// Where a page's screenshot is kept.
pub fn screenshot_path(name: &str) -> PathBuf {
    let dir = artifacts_dir().join("browser-screenshots");
    std::fs::create_dir_all(&dir).expect("the screenshots' directory");
    dir.join(format!("{name}.png"))
}

/// What a reader does on the page, beyond loading it.
#[derive(Debug, Default, Clone)]
pub struct Actions<'a> {
    /// Tree nodes to open, by their labels (the first visible of each).
    pub open: &'a [&'a str],
    /// A rank to open by clicking its link.
    pub rank: Option<i64>,
    /// Text to search for.
    pub search: Option<&'a str>,
}

/// Opens `page` in Chromium, does `actions`, keeps a screenshot named
/// `name` and returns what the page showed (`check_page.py`'s JSON), once
/// it is known to have loaded cleanly: its script finished, no request but
/// for the page itself, no console message, no uncaught error.
pub fn open(page: &Path, name: &str, actions: &Actions<'_>) -> Value {
    let python = python();
    assert!(
        python.is_file(),
        "the browser tests need Playwright in {} and Debian's chromium: run scripts/browser \
         (scripts/test does)",
        python.display()
    );
    assert!(page.is_file(), "no page {}", page.display());
    let shot = screenshot_path(name);
    let mut cmd = Command::new(&python);
    cmd.arg(workspace_root().join("tests/browser/check_page.py"))
        .arg(page)
        .arg(&shot);
    for label in actions.open {
        cmd.args(["--open", label]);
    }
    if let Some(r) = actions.rank {
        cmd.args(["--rank", &r.to_string()]);
    }
    if let Some(q) = actions.search {
        cmd.args(["--search", q]);
    }
    let r = run_within(cmd, Duration::from_secs(120));
    assert_eq!(r.code(), Some(0), "check_page.py on {}: {}", page.display(), r.all());
    let v: Value =
        serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("check_page.py's output: {e}: {}", r.all()));
    let url = v["url"].as_str().unwrap_or_default().to_string();
    let others: Vec<&Value> = v["requests"]
        .as_array()
        .map(|a| a.iter().filter(|u| u.as_str() != Some(url.as_str())).collect())
        .unwrap_or_default();
    assert!(
        others.is_empty(),
        "{name}: the page asked for more than itself: {others:?}"
    );
    assert_eq!(v["console"], Value::Array(vec![]), "{name}: console messages: {v:#}");
    assert_eq!(v["errors"], Value::Array(vec![]), "{name}: script errors: {v:#}");
    assert_eq!(v["ready"], true, "{name}: the page's script did not finish: {v:#}");
    assert!(shot.is_file(), "{name}: no screenshot {}", shot.display());
    v
}

/// `v[key]` as text.
pub fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key].as_str().unwrap_or_default()
}
