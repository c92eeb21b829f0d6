//! The bridge's structure, as ARCHITECTURE.md ("Layers of the bridge")
//! states it:
//! - a module of `bridge/src` uses only modules of lower layers: every
//!   `crate::X` path in its code (comments and its `#[cfg(test)]` module
//!   aside) names a module of a lower layer than its own, or its own module;
//! - `unsafe` appears only in `ffi/`, `capi.rs` and `isolate/sys.rs`;
//! - no source file of the project is over 600 lines, tests aside.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace")
        .to_path_buf()
}

/// The layer of each top-level module, from ARCHITECTURE.md's table rows
/// `| N | \`module\` | ... |`.
fn layers() -> BTreeMap<String, u32> {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let section = text
        .split("## Layers of the bridge")
        .nth(1)
        .expect("ARCHITECTURE.md has a section 'Layers of the bridge'");
    let section = section.split("\n## ").next().unwrap_or(section);
    let mut map = BTreeMap::new();
    for line in section.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 4 {
            continue;
        }
        let Ok(layer) = cells[1].parse::<u32>() else { continue };
        for module in cells[2].split(',') {
            let module = module.trim().trim_matches('`');
            assert!(
                map.insert(module.to_string(), layer).is_none(),
                "{module} is listed twice in ARCHITECTURE.md's layers"
            );
        }
    }
    assert!(map.len() >= 8, "too few layers read from ARCHITECTURE.md: {map:?}");
    map
}

/// Every `.rs` file below `dir`.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|e| e == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The code of a line: what comes before a `//` comment (a `//` inside a
/// string literal cuts a line short, which only hides, never invents, a
/// path).
fn code(line: &str) -> &str {
    line.split("//").next().unwrap_or("")
}

/// The top-level modules a piece of code names through `crate::`.
fn crate_paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().next_back();
        rest = &rest[i + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue; // `mpiq_crate::`, `$crate::`
        }
        let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        if !name.is_empty() {
            out.push(name);
        }
    }
    out
}

/// The top-level module of a file of `bridge/src` (`None` for the crate
/// root and the binaries, which sit above every layer).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_string_lossy().into_owned();
    match first.as_str() {
        "lib.rs" | "bin" => None,
        f => Some(f.trim_end_matches(".rs").to_string()),
    }
}

#[test]
fn no_module_uses_one_of_its_own_layer_or_above() {
    let layers = layers();
    let src = root().join("bridge/src");
    let mut wrong = Vec::new();
    for file in sources(&src) {
        let Some(module) = module_of(&src, &file) else { continue };
        let Some(&mine) = layers.get(&module) else {
            wrong.push(format!(
                "{}: module `{module}` is not in ARCHITECTURE.md's layers",
                file.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(&file).expect("read");
        // A file's tests (its `#[cfg(test)]` module, at its end) may use the
        // test kit and whatever a test needs.
        for (n, line) in text.lines().take(code_lines(&text)).enumerate() {
            for used in crate_paths(code(line)) {
                if used == module {
                    continue;
                }
                match layers.get(&used) {
                    Some(&theirs) if theirs < mine => {}
                    Some(&theirs) => wrong.push(format!(
                        "{}:{}: `{module}` (layer {mine}) uses `crate::{used}` (layer {theirs})",
                        file.display(),
                        n + 1
                    )),
                    // Items of the crate root (re-exports, `DumpError`) are above every layer.
                    None => wrong.push(format!(
                        "{}:{}: `{module}` uses `crate::{used}`, which is the crate root's, above every layer",
                        file.display(),
                        n + 1
                    )),
                }
            }
        }
    }
    assert!(wrong.is_empty(), "imports against the layers:\n{}", wrong.join("\n"));
}

#[test]
fn the_checks_catch_an_upward_use() {
    assert_eq!(
        crate_paths("use crate::isolate::run; x = crate::dump::Limits"),
        ["isolate", "dump"]
    );
    assert!(crate_paths("use mpiq_crate::x; $crate::y").is_empty());
    assert_eq!(code("let a = 1; // crate::isolate"), "let a = 1; ");
    let layers = layers();
    assert!(layers["target"] < layers["ffi"] && layers["ffi"] < layers["dll"]);
    assert!(layers["dump"] < layers["isolate"] && layers["isolate"] < layers["collect"]);
}

/// Where `unsafe` may appear: the library's ABI and calls, the C API, and
/// the isolation's libc calls.
const UNSAFE_PLACES: [&str; 3] = ["ffi/", "capi.rs", "isolate/sys.rs"];

#[test]
fn unsafe_only_where_architecture_md_says() {
    let src = root().join("bridge/src");
    let mut wrong = Vec::new();
    for file in sources(&src) {
        let rel = file
            .strip_prefix(&src)
            .expect("inside")
            .to_string_lossy()
            .replace('\\', "/");
        if UNSAFE_PLACES.iter().any(|p| rel.starts_with(p)) {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("read");
        for (n, line) in text.lines().enumerate() {
            let c = code(line);
            // The crate's lints name `unsafe` without using it.
            if c.contains("unsafe") && !c.trim_start().starts_with("#![") {
                wrong.push(format!("{rel}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "unsafe outside {UNSAFE_PLACES:?}:\n{}",
        wrong.join("\n")
    );
}

/// Lines of a file before its `#[cfg(test)]` module.
fn code_lines(text: &str) -> usize {
    text.lines().take_while(|l| !l.starts_with("#[cfg(test)]")).count()
}

#[test]
fn no_source_file_over_600_lines() {
    let root = root();
    let mut files = Vec::new();
    for dir in ["bridge/src", "cli/src", "lldb-plugin/src", "bench/src"] {
        files.extend(sources(&root.join(dir)));
    }
    let mut big = Vec::new();
    for file in files {
        let name = file.file_name().unwrap_or_default().to_string_lossy();
        if name == "tests.rs" || name == "testutil.rs" {
            continue;
        }
        let n = code_lines(&std::fs::read_to_string(&file).expect("read"));
        if n > 600 {
            big.push(format!("{}: {n} lines", file.display()));
        }
    }
    assert!(
        big.is_empty(),
        "source files over 600 lines (split them):\n{}",
        big.join("\n")
    );
}
