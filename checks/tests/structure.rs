//! The repository's structure, as ARCHITECTURE.md states it:
//! - "Layers of the bridge" (and "Layers of the CLI", once it is there): a
//!   file uses only the items of its own module or of a lower layer's, read
//!   with a parser (grouped imports, `super::`, `self::`, paths in types,
//!   expressions and macros, in every item that is not test code);
//! - no circle between the files of a crate;
//! - `unsafe` only where its "Rules" say;
//! - errors typed: a `Result` carries a `String` only where its "Errors"
//!   say;
//! - no source file (Rust, Python, C, C++) over the size its "Rules" state.

mod structure {
    pub mod graph;
    pub mod source;
}

use std::path::{Path, PathBuf};

use structure::graph;
use structure::source::{self, Crate};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace")
        .to_path_buf()
}

fn architecture() -> String {
    std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md")
}

fn bridge() -> Crate {
    Crate::read(&root().join("bridge/src"), "lib.rs")
}

fn cli() -> Crate {
    Crate::read(&root().join("cli/src"), "lib.rs")
}

#[test]
fn bridge_files_use_only_lower_layers() {
    let layers = graph::layers(&architecture(), "Layers of the bridge").expect("a section 'Layers of the bridge'");
    assert!(
        layers.len() >= 8,
        "too few layers read from ARCHITECTURE.md: {layers:?}"
    );
    let wrong = graph::against_layers(&bridge(), &layers);
    assert!(wrong.is_empty(), "imports against the layers:\n{}", wrong.join("\n"));
}

#[test]
fn no_circle_between_the_bridge_files() {
    let circles = graph::circles(&bridge());
    assert!(circles.is_empty(), "circles between files:\n{}", circles.join("\n"));
}

#[test]
fn no_circle_between_the_files_of_the_other_crates() {
    let mut circles = Vec::new();
    for (member, top) in [
        ("lldb-plugin", "lib.rs"),
        ("bench", "main.rs"),
        ("tests", "lib.rs"),
        ("checks", "lib.rs"),
    ] {
        let krate = Crate::read(&root().join(member).join("src"), top);
        assert!(!krate.files.is_empty(), "{member}/src/{top}: no files read");
        circles.extend(graph::circles(&krate).into_iter().map(|c| format!("{member}: {c}")));
    }
    assert!(circles.is_empty(), "circles between files:\n{}", circles.join("\n"));
}

#[test]
fn the_source_folders_named_target_are_checked() {
    let files = source_files(&root());
    assert!(
        files.contains(&root().join("bridge/src/target/read.rs")),
        "bridge/src/target/ is source and must be checked"
    );
    assert!(
        !files.iter().any(|f| f.starts_with(root().join("target"))),
        "the workspace's build output is no source"
    );
}

#[test]
fn cli_files_use_only_lower_layers_and_make_no_circle() {
    let layers = graph::layers(&architecture(), "Layers of the CLI")
        .expect("ARCHITECTURE.md has a section 'Layers of the CLI' with its table");
    let cli = cli();
    let wrong = graph::against_layers(&cli, &layers);
    assert!(
        wrong.is_empty(),
        "imports against the CLI's layers:\n{}",
        wrong.join("\n")
    );
    let circles = graph::circles(&cli);
    assert!(circles.is_empty(), "circles between files:\n{}", circles.join("\n"));
}

/// The bridge's renderers are in `render/`: no other file defines an item
/// named `render*` or writes a graphviz graph (ARCHITECTURE.md, the layer
/// `render`).
#[test]
fn the_bridge_renders_only_in_render() {
    let bridge = bridge();
    let mut wrong = Vec::new();
    for m in &bridge.modules {
        let file = &bridge.files[m.file];
        // The lookup diagnostic's answers (`lookup::render`) are no snapshot.
        if file.test || file.rel.starts_with("render/") || file.rel == "lib.rs" || file.rel == "lookup.rs" {
            continue;
        }
        for name in m.items.iter().filter(|n| n.starts_with("render")) {
            wrong.push(format!("{}: defines `{name}`", file.rel));
        }
    }
    for file in bridge.files.iter().filter(|f| !f.test && !f.rel.starts_with("render/")) {
        let text = std::fs::read_to_string(bridge.src.join(&file.rel)).expect("read");
        let mut code = text.clone();
        let mut ranges = source::test_ranges(&text);
        ranges.sort();
        for (from, to) in ranges.into_iter().rev() {
            let lines: Vec<&str> = code.lines().collect();
            code = [&lines[..from - 1], &lines[to.min(lines.len())..]].concat().join("\n");
        }
        if code.contains("digraph") {
            wrong.push(format!("{}: writes a graphviz digraph", file.rel));
        }
    }
    assert!(wrong.is_empty(), "renderers outside render/:\n{}", wrong.join("\n"));
}

/// Where `unsafe` may stand in a crate, from ARCHITECTURE.md's "Rules": the
/// line `- in \`<dir>\`: \`a/\`, \`b.rs\` (why)` gives the files and
/// directories of `<dir>` that may hold it.
fn unsafe_places(architecture: &str, dir: &str) -> Vec<String> {
    places(architecture, "in", dir)
}

/// The files and directories of `dir` listed on ARCHITECTURE.md's line
/// `- <what> \`<dir>\`: \`a/\`, \`b.rs\` (why)`.
fn places(architecture: &str, what: &str, dir: &str) -> Vec<String> {
    let marker = format!("- {what} `{dir}`:");
    let line = architecture
        .lines()
        .find(|l| l.trim_start().starts_with(&marker))
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has no line `{marker} ..`"));
    let list = line.trim_start()[marker.len()..].split('(').next().unwrap_or_default();
    list.split(',')
        .map(|p| p.trim().trim_matches('`').to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

/// Every `.rs` file below `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    source_files(dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect()
}

/// Whether `rel` is one of `places` (a file, or a directory ending in `/`).
fn is_in(rel: &str, places: &[String]) -> bool {
    places
        .iter()
        .any(|p| rel == *p || (p.ends_with('/') && rel.starts_with(p.as_str())))
}

/// The lines that `find` reports in the Rust files of the bridge and the
/// CLI outside the places ARCHITECTURE.md's line `- <what> \`<dir>\`:`
/// allows (and, with `skip_tests`, outside files that are test code
/// whole), as `dir/file:line: <said> outside [places]`.
fn outside_places(what: &str, said: &str, find: fn(&str) -> Vec<usize>, skip_tests: bool) -> Vec<String> {
    let architecture = architecture();
    let test_files = if skip_tests {
        test_only_rust_files(&root())
    } else {
        Vec::new()
    };
    let mut wrong = Vec::new();
    for dir in ["bridge/src", "cli/src"] {
        let places = places(&architecture, what, dir);
        let src = root().join(dir);
        for file in rust_files(&src) {
            let rel = file
                .strip_prefix(&src)
                .expect("inside")
                .to_string_lossy()
                .replace('\\', "/");
            if is_in(&rel, &places) || test_files.contains(&file) {
                continue;
            }
            let text = std::fs::read_to_string(&file).expect("read");
            for line in find(&text) {
                wrong.push(format!("{dir}/{rel}:{line}: {said} outside {places:?}"));
            }
        }
    }
    wrong
}

#[test]
fn unsafe_only_where_architecture_md_says() {
    let wrong = outside_places("in", "unsafe", source::unsafe_lines, false);
    assert!(
        wrong.is_empty(),
        "unsafe where ARCHITECTURE.md does not allow it:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn errors_are_typed_except_where_architecture_md_says() {
    let wrong = outside_places(
        "text errors in",
        "a Result with a String error",
        source::string_error_lines,
        true,
    );
    assert!(
        wrong.is_empty(),
        "untyped errors where ARCHITECTURE.md does not allow them (give the layer its error enum):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_checker_finds_string_errors_in_code_only() {
    let text = "fn a() -> Result<(), String> { Ok(()) }\n\
                struct S { r: std::result::Result<u8, String> }\n\
                fn b() -> Result<(), Error> { Ok(()) }\n\
                fn c(_: Vec<Result<String, u8>>) {}\n\
                #[cfg(test)]\nmod tests { fn d() -> Result<(), String> { Ok(()) } }\n";
    assert_eq!(source::string_error_lines(text), [1, 2]);
    let docs = "- text errors in `cli/src`: `args/run_args.rs` (clap)\n";
    assert_eq!(places(docs, "text errors in", "cli/src"), ["args/run_args.rs"]);
}

/// The most lines of non-test code a source file may have, as
/// ARCHITECTURE.md's "Rules" state it.
const SIZE_LIMIT: usize = 1000;
/// Where a file is worth a look (printed, not enforced).
const SIZE_LOOK: usize = 600;

/// The repository's source files: Rust, Python, C and C++ (build output
/// and hidden directories aside).
fn source_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for entry in entries.flatten() {
            let p = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if p.is_dir() {
                if !name.starts_with('.') && !is_build_output(&p) && name != "node_modules" && name != "__pycache__" {
                    stack.push(p);
                }
            } else if ["rs", "py", "c", "h", "cc", "cpp", "hpp"]
                .iter()
                .any(|e| p.extension().is_some_and(|x| x == *e))
            {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Whether `dir` is build output, not source: the workspace's `target/`,
/// or any directory cargo marked as a cache (its `CACHEDIR.TAG`). A source
/// folder that happens to be named `target` (`bridge/src/target/`) is
/// source.
fn is_build_output(dir: &Path) -> bool {
    dir == root().join("target") || dir.join("CACHEDIR.TAG").exists()
}

/// The Rust files that are test code whole: declared by a test module of
/// a crate's module tree.
fn test_only_rust_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for member in ["bridge", "cli", "lldb-plugin", "bench", "tests", "checks"] {
        let src = root.join(member).join("src");
        let mut roots: Vec<String> = ["lib.rs", "main.rs"]
            .iter()
            .filter(|r| src.join(r).exists())
            .map(|r| r.to_string())
            .collect();
        for bin in rust_files(&src.join("bin")) {
            roots.push(bin.strip_prefix(&src).expect("inside").to_string_lossy().into_owned());
        }
        for r in roots {
            let krate = Crate::read(&src, &r);
            out.extend(krate.files.iter().filter(|f| f.test).map(|f| src.join(&f.rel)));
        }
    }
    out
}

/// A file's lines of code that is not test code: for Rust, the lines
/// outside its test items; a file under a `tests/` directory below the
/// top (`bridge/tests/`, `tests/tests/`) is test code whole.
fn non_test_lines(rel: &Path, text: &str) -> usize {
    if rel.components().skip(1).any(|c| c.as_os_str() == "tests") {
        return 0;
    }
    let total = text.lines().count();
    if rel.extension().is_some_and(|e| e == "rs") {
        let tests: usize = source::test_ranges(text).iter().map(|(a, b)| b + 1 - a).sum();
        return total - tests.min(total);
    }
    total
}

#[test]
fn no_source_file_over_the_size_architecture_md_states() {
    let root = root();
    assert!(
        architecture().contains("1,000 lines of non-test code"),
        "ARCHITECTURE.md states the size limit the test enforces ({SIZE_LIMIT})"
    );
    let tests = test_only_rust_files(&root);
    let mut big = Vec::new();
    let mut look = Vec::new();
    for file in source_files(&root) {
        if tests.contains(&file) {
            continue;
        }
        let rel = file.strip_prefix(&root).expect("inside");
        let n = non_test_lines(rel, &std::fs::read_to_string(&file).unwrap_or_default());
        if n > SIZE_LIMIT {
            big.push(format!("{}: {n} lines", rel.display()));
        } else if n > SIZE_LOOK {
            look.push(format!("{}: {n} lines", rel.display()));
        }
    }
    if !look.is_empty() {
        eprintln!(
            "source files over {SIZE_LOOK} lines, worth a look:\n{}",
            look.join("\n")
        );
    }
    assert!(
        big.is_empty(),
        "source files over {SIZE_LIMIT} lines of non-test code (split them by concept):\n{}",
        big.join("\n")
    );
}

// The checker's own tests, on small crates given as text.

const FIXTURE_LAYERS: &str = "## Layers of the fixture\n| layer | modules | what |\n|---|---|---|\n| 1 | `low` | below |\n| 2 | `high`, `side` | above |\n";

fn fixture_wrong(files: &[(&str, &str)]) -> Vec<String> {
    let layers = graph::layers(FIXTURE_LAYERS, "Layers of the fixture").expect("section");
    graph::against_layers(&Crate::from_texts(files), &layers)
}

const LIB: &str = "pub mod low; pub mod high; pub mod side;";
const HIGH: &str = "pub struct Up; pub fn up() {} pub mod inner { pub struct Deep; }";

#[test]
fn the_checker_catches_an_upward_import() {
    let wrong = fixture_wrong(&[
        ("lib.rs", LIB),
        ("high.rs", HIGH),
        ("side.rs", ""),
        ("low.rs", "use crate::high::Up;"),
    ]);
    assert_eq!(
        wrong,
        ["low.rs:1: `low` (layer 1) uses `crate::high::Up` of `high` (layer 2)"]
    );
    // Downward and external uses are fine.
    let fine = fixture_wrong(&[
        ("lib.rs", LIB),
        ("high.rs", "use crate::low::Down; use std::fmt; pub fn f(_: Down) {}"),
        ("side.rs", ""),
        ("low.rs", "pub struct Down;"),
    ]);
    assert!(fine.is_empty(), "{fine:?}");
}

#[test]
fn the_checker_catches_a_grouped_import_and_paths_in_code() {
    let grouped = fixture_wrong(&[
        ("lib.rs", LIB),
        ("high.rs", HIGH),
        ("side.rs", ""),
        ("low.rs", "use crate::{high::{inner::Deep as D}, low as _};"),
    ]);
    assert_eq!(grouped.len(), 1, "{grouped:?}");
    assert!(grouped[0].contains("crate::high::inner::Deep"), "{grouped:?}");
    // `super::`, a path in an expression, a type and a macro's arguments.
    for code in [
        "pub fn f() { super::high::up() }",
        "pub fn f(_: crate::high::Up) {}",
        "pub fn f() { println!(\"{}\", std::mem::size_of::<crate::high::Up>()) }",
        "pub fn f() -> usize { format!(\"{:?}\", crate::high::up()).len() }",
    ] {
        let wrong = fixture_wrong(&[("lib.rs", LIB), ("high.rs", HIGH), ("side.rs", ""), ("low.rs", code)]);
        assert_eq!(wrong.len(), 1, "{code}: {wrong:?}");
    }
    // A use of the crate root's own items is above every layer; one of a
    // module through the root's re-export is that module's.
    let lib = "pub mod low; pub mod high; pub mod side; pub use high::Up; pub fn top() {}";
    let wrong = fixture_wrong(&[
        ("lib.rs", lib),
        ("high.rs", HIGH),
        ("side.rs", ""),
        ("low.rs", "use crate::{top, Up};"),
    ]);
    assert_eq!(wrong.len(), 2, "{wrong:?}");
    assert!(wrong[0].contains("crate::top` of the crate root"), "{wrong:?}");
    assert!(wrong[1].contains("`crate::Up` of `high`"), "{wrong:?}");
    // Sideways: same layer, another module.
    let wrong = fixture_wrong(&[
        ("lib.rs", LIB),
        ("high.rs", HIGH),
        ("side.rs", "use crate::high::Up;"),
        ("low.rs", ""),
    ]);
    assert_eq!(wrong.len(), 1, "{wrong:?}");
}

#[test]
fn the_checker_reads_below_a_test_item() {
    let code = "#[cfg(test)]\nmod tests { use crate::high::Up; }\n\npub fn after(_: crate::high::Up) {}\n";
    let wrong = fixture_wrong(&[("lib.rs", LIB), ("high.rs", HIGH), ("side.rs", ""), ("low.rs", code)]);
    assert_eq!(
        wrong,
        ["low.rs:4: `low` (layer 1) uses `crate::high::Up` of `high` (layer 2)"]
    );
    // Test code itself may use anything: a test module, a `#[test]` fn, a
    // `#[cfg(all(test, ..))]` item, and a file declared by a test module.
    let tests_only = "#[cfg(test)] mod tests;\n#[test] fn t() { crate::high::up() }\n#[cfg(all(test, unix))] fn u() { crate::high::up() }\n";
    let wrong = fixture_wrong(&[
        ("lib.rs", LIB),
        ("high.rs", HIGH),
        ("side.rs", ""),
        ("low.rs", tests_only),
        ("low/tests.rs", "use crate::high::Up;"),
    ]);
    assert!(wrong.is_empty(), "{wrong:?}");
    let krate = Crate::from_texts(&[
        ("lib.rs", LIB),
        ("high.rs", HIGH),
        ("side.rs", ""),
        ("low.rs", tests_only),
        ("low/tests.rs", ""),
    ]);
    assert!(krate.files.iter().any(|f| f.rel == "low/tests.rs" && f.test));
    assert_eq!(source::test_ranges(tests_only), [(1, 1), (2, 2), (3, 3)]);
}

#[test]
fn the_checker_catches_a_circle() {
    let lib = "mod a; mod b; mod c; mod d;";
    let files = [
        ("lib.rs", lib),
        ("a.rs", "use super::b::B; pub struct A; pub fn f(_: B) {}"),
        ("b.rs", "pub struct B; pub fn g(_: crate::c::C) {}"),
        ("c.rs", "pub struct C; fn h() -> self::super::a::A { crate::a::A }"),
        ("d.rs", "use crate::a::A;"),
    ];
    let circles = graph::circles(&Crate::from_texts(&files));
    assert_eq!(
        circles,
        ["a.rs <-> b.rs <-> c.rs\n  a.rs -> b.rs: super::b::B\n  b.rs -> c.rs: crate::c::C\n  c.rs -> a.rs: crate::a::A, self::super::a::A"]
    );
    // A module's parts using their whole's items (`super::Error`) and the
    // whole using its parts is no circle; declaring `mod part;` is no use.
    let whole = [
        ("lib.rs", "mod dll;"),
        (
            "dll/mod.rs",
            "mod load; pub enum Error { Bad } pub fn run() -> Result<(), Error> { load::load() }",
        ),
        (
            "dll/load.rs",
            "use super::Error; pub fn load() -> Result<(), Error> { Err(Error::Bad) }",
        ),
    ];
    assert!(graph::circles(&Crate::from_texts(&whole)).is_empty());
}

#[test]
fn the_checker_finds_unsafe_in_code_only() {
    let text = "// unsafe in a comment\nconst S: &str = \"unsafe\";\nfn f() { unsafe { g() } }\nunsafe fn g() {}\nfn h() { m!(unsafe { 1 }) }\n";
    assert_eq!(source::unsafe_lines(text), [3, 4, 5]);
    let docs = "- in `bridge/src`: `ffi/`, `capi.rs` (why)\n";
    assert_eq!(unsafe_places(docs, "bridge/src"), ["ffi/", "capi.rs"]);
}

/// The CLI's table, once ARCHITECTURE.md has it, is read as the bridge's;
/// an entry may name a file of a module (`unwind/vdso`), which then has
/// its own layer.
#[test]
fn the_checker_reads_a_cli_table_with_files() {
    let doc = "## Layers of the CLI\n| layer | modules | what |\n|---|---|---|\n| 1 | `auxv` | leaf |\n| 2 | `unwind/vdso` | the vDSO |\n| 3 | `unwind` | stacks |\n| 4 | `run` | commands |\n\n## Next\n| 9 | `ignored` | . |\n";
    let layers = graph::layers(doc, "Layers of the CLI").expect("section");
    assert_eq!(layers.len(), 4, "{layers:?}");
    let lib = "pub mod auxv; pub mod unwind; pub mod run;";
    let files = |vdso: &'static str| {
        [
            ("lib.rs", lib),
            ("auxv.rs", "pub fn value() {}"),
            ("unwind/mod.rs", "pub mod vdso; pub fn walk() { vdso::find() }"),
            ("unwind/vdso.rs", vdso),
            ("run.rs", "pub fn go() { crate::unwind::walk() }"),
        ]
    };
    let fine = graph::against_layers(
        &Crate::from_texts(&files("pub fn find() { crate::auxv::value() }")),
        &layers,
    );
    assert!(fine.is_empty(), "{fine:?}");
    let up = graph::against_layers(
        &Crate::from_texts(&files("pub fn find() { crate::run::go() }")),
        &layers,
    );
    assert_eq!(
        up,
        ["unwind/vdso.rs:1: `unwind/vdso` (layer 2) uses `crate::run::go` of `run` (layer 4)"]
    );
    assert!(graph::layers(doc, "Layers of the bridge").is_none());
}
