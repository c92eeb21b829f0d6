//! The C API is kept by hand in three places that no compiler compares:
//! `bridge/include/mpiq.h` (what C and C++ hosts of libmpiq.so include),
//! `bridge/src/capi.rs` (what libmpiq.so implements) and
//! `gdb-python/mpiq_gdb/capi.py` (what gdb's ctypes builds). A field added,
//! moved or retyped in one of them alone would have the library read the
//! host's callback table at the wrong offsets. This test measures each copy
//! in its own language (a C program compiled against mpiq.h, `python3`
//! importing the ctypes module, `offset_of!` in Rust) and compares the API
//! version, each struct's size and each field's name, offset and size; and,
//! between mpiq.h and Python, the status codes (capi.rs keeps its own private).
//!
//! The field lists come from the copies themselves: mpiq.h's are parsed and
//! then checked by the C compiler, Python's are its `_fields_`, and the Rust
//! list below is made exhaustive by a struct pattern without `..`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::mem::{offset_of, size_of};
use std::path::{Path, PathBuf};
use std::process::Command;

use mpiq::capi::{mpiq_target, mpiq_type_sizes, API_VERSION};
use serde_json::Value;

/// The structs of the C API, by their C names.
const STRUCTS: [&str; 2] = ["mpiq_target", "mpiq_type_sizes"];
/// The enums whose values Python mirrors.
const ENUMS: [&str; 2] = ["mpiq_status", "mpiq_dump_status"];

/// One struct as one copy lays it out.
#[derive(Debug, PartialEq)]
struct StructLayout {
    size: u64,
    /// (name, offset, size), by offset.
    fields: Vec<(String, u64, u64)>,
}

/// One copy of the C API.
#[derive(Debug)]
struct ApiCopy {
    what: &'static str,
    api_version: u64,
    structs: BTreeMap<String, StructLayout>,
    /// Enum constants by name (`None` for the Rust copy, whose are private).
    constants: Option<BTreeMap<String, i64>>,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

// --- Rust ----------------------------------------------------------------------

/// The size of the field `get` reaches, without a value of `T`.
fn field_size<T, F>(_get: fn(&T) -> &F) -> u64 {
    size_of::<F>() as u64
}

/// The layout of a Rust struct, given every field's name.
macro_rules! rust_layout {
    ($ty:ident { $($field:ident),+ $(,)? }) => {{
        // No `..`: this does not compile if capi.rs gains or loses a field,
        // so the list cannot fall behind the struct.
        let _exhaustive = |v: &$ty| {
            let $ty { $($field: _),+ } = v;
        };
        let fields = vec![$((
            stringify!($field).to_string(),
            offset_of!($ty, $field) as u64,
            field_size(|s: &$ty| &s.$field),
        )),+];
        (stringify!($ty).to_string(), StructLayout { size: size_of::<$ty>() as u64, fields: by_offset(fields) })
    }};
}

fn rust_copy() -> ApiCopy {
    let structs = BTreeMap::from([
        rust_layout!(mpiq_type_sizes {
            short_size,
            int_size,
            long_size,
            long_long_size,
            pointer_size
        }),
        rust_layout!(mpiq_target {
            api_version,
            ctx,
            read_memory,
            find_symbol,
            find_function,
            find_type,
            field_offset,
            size_of,
            type_sizes,
            byte_order,
            world_rank,
            pid,
            executable,
            identity,
            stacks,
            frame_value,
            live,
        }),
    ]);
    ApiCopy {
        what: "bridge/src/capi.rs",
        api_version: u64::from(API_VERSION),
        structs,
        constants: None,
    }
}

fn by_offset(mut fields: Vec<(String, u64, u64)>) -> Vec<(String, u64, u64)> {
    fields.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
    fields
}

// --- C -------------------------------------------------------------------------

/// `text` without C comments.
fn strip_comments(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("/*") {
        out.push_str(&rest[..i]);
        let end = rest[i + 2..].find("*/").expect("unterminated comment in mpiq.h");
        out.push(' ');
        rest = &rest[i + 2 + end + 2..];
    }
    out.push_str(rest);
    out.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The text between the braces of `keyword name { ... }` in `header`.
fn body<'a>(header: &'a str, keyword: &str, name: &str) -> &'a str {
    let mut from = 0;
    while let Some(i) = header[from..].find(keyword) {
        let after = header[from + i + keyword.len()..].trim_start();
        if let Some(after) = after.strip_prefix(name) {
            if let Some(open) = after.trim_start().strip_prefix('{') {
                return &open[..open.find('}').expect("unclosed brace in mpiq.h")];
            }
        }
        from += i + keyword.len();
    }
    panic!("mpiq.h has no `{keyword} {name} {{ ... }}`");
}

fn is_identifier(s: &str) -> bool {
    s.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The member names of `struct name` in mpiq.h, in order: `T name;` or
/// `R (*name)(...);`. The compiler then checks each one exists.
fn header_fields(header: &str, name: &str) -> Vec<String> {
    body(header, "struct", name)
        .split(';')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| {
            let field = match d.find("(*") {
                Some(i) => d[i + 2..].split(')').next().unwrap_or("").trim(),
                None => d.rsplit(|c: char| c.is_whitespace() || c == '*').next().unwrap_or(""),
            };
            assert!(
                is_identifier(field),
                "cannot read the member `{d}` of struct {name} in mpiq.h"
            );
            field.to_string()
        })
        .collect()
}

/// The enumerator names of `enum name` in mpiq.h.
fn header_enumerators(header: &str, name: &str) -> Vec<String> {
    body(header, "enum", name)
        .split(',')
        .map(|e| e.split('=').next().unwrap_or("").trim())
        .filter(|e| !e.is_empty())
        .map(|e| {
            assert!(
                is_identifier(e),
                "cannot read the enumerator `{e}` of enum {name} in mpiq.h"
            );
            e.to_string()
        })
        .collect()
}

/// A C program printing mpiq.h's layouts as JSON, in the shape `python()` prints.
fn c_program(header: &str) -> String {
    let mut c = String::from("#include <stddef.h>\n#include <stdio.h>\n#include \"mpiq.h\"\nint main(void) {\n");
    c += "    printf(\"{\\\"api_version\\\": %lld, \\\"structs\\\": {\", (long long)MPIQ_API_VERSION);\n";
    for (k, s) in STRUCTS.iter().enumerate() {
        let sep = if k > 0 { ", " } else { "" };
        writeln!(
            c,
            "    printf(\"{sep}\\\"{s}\\\": {{\\\"size\\\": %zu, \\\"fields\\\": [\", sizeof(struct {s}));"
        )
        .unwrap();
        for (i, f) in header_fields(header, s).iter().enumerate() {
            let sep = if i > 0 { ", " } else { "" };
            writeln!(
                c,
                "    printf(\"{sep}[\\\"{f}\\\", %zu, %zu]\", offsetof(struct {s}, {f}), sizeof(((struct {s} *)0)->{f}));"
            )
            .unwrap();
        }
        c += "    printf(\"]}\");\n";
    }
    c += "    printf(\"}, \\\"constants\\\": {\");\n";
    let names: Vec<String> = ENUMS.iter().flat_map(|e| header_enumerators(header, e)).collect();
    for (i, n) in names.iter().enumerate() {
        let sep = if i > 0 { ", " } else { "" };
        writeln!(c, "    printf(\"{sep}\\\"{n}\\\": %lld\", (long long){n});").unwrap();
    }
    c += "    printf(\"}}\\n\");\n    return 0;\n}\n";
    c
}

fn c_copy() -> ApiCopy {
    let include = root().join("bridge/include");
    let header = std::fs::read_to_string(include.join("mpiq.h")).expect("read mpiq.h");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("c_api_copies_agree.{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create a scratch directory");
    let (source, exe) = (dir.join("layout.c"), dir.join("layout"));
    std::fs::write(&source, c_program(&strip_comments(&header))).expect("write layout.c");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I"])
        .arg(&include)
        .arg(&source)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C compiler `{cc}`: {e}"));
    assert!(
        out.status.success(),
        "{cc} could not compile {} against mpiq.h:\n{}",
        source.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let json = run(Command::new(&exe), "the C layout program");
    let _ = std::fs::remove_dir_all(&dir);
    parse("bridge/include/mpiq.h", &json)
}

// --- Python --------------------------------------------------------------------

const PYTHON: &str = r#"
import ctypes, json, sys
sys.path.insert(0, sys.argv[1])
from mpiq_gdb import capi
assert "gdb" not in sys.modules, "mpiq_gdb.capi must not import gdb"
structs = {
    name: {"size": ctypes.sizeof(cls),
           "fields": [[f, getattr(cls, f).offset, getattr(cls, f).size] for f, *_ in cls._fields_]}
    for name, cls in capi.C_STRUCTS.items()
}
constants = {k: v for k, v in vars(capi).items()
             if k.startswith("MPIQ_") and k != "MPIQ_API_VERSION" and type(v) is int}
print(json.dumps({"api_version": capi.MPIQ_API_VERSION, "structs": structs, "constants": constants}))
"#;

fn python_copy() -> ApiCopy {
    let mut cmd = Command::new("python3");
    // -B: no __pycache__ in the source tree; the package's directory is argv[1].
    cmd.args(["-B", "-c", PYTHON]).arg(root().join("gdb-python"));
    parse("gdb-python/mpiq_gdb/capi.py", &run(cmd, "python3"))
}

// --- Comparing -----------------------------------------------------------------

fn run(mut cmd: Command, what: &str) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

fn parse(what: &'static str, json: &str) -> ApiCopy {
    let v: Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{what}: bad JSON ({e}): {json}"));
    let num = |v: &Value| v.as_u64().unwrap_or_else(|| panic!("{what}: not a size: {v}"));
    let structs = v["structs"]
        .as_object()
        .unwrap_or_else(|| panic!("{what}: no structs: {json}"))
        .iter()
        .map(|(name, s)| {
            let fields = s["fields"]
                .as_array()
                .unwrap_or_else(|| panic!("{what}: {name} has no fields"))
                .iter()
                .map(|f| (f[0].as_str().unwrap_or_default().to_string(), num(&f[1]), num(&f[2])))
                .collect();
            let layout = StructLayout {
                size: num(&s["size"]),
                fields: by_offset(fields),
            };
            (name.clone(), layout)
        })
        .collect();
    let constants = v["constants"]
        .as_object()
        .unwrap_or_else(|| panic!("{what}: no constants: {json}"))
        .iter()
        .map(|(k, c)| (k.clone(), c.as_i64().unwrap_or_else(|| panic!("{what}: {k} = {c}"))))
        .collect();
    ApiCopy {
        what,
        api_version: num(&v["api_version"]),
        structs,
        constants: Some(constants),
    }
}

/// Every way `b` differs from `a`, one line each.
fn differences(a: &ApiCopy, b: &ApiCopy) -> Vec<String> {
    let (x, y) = (a.what, b.what);
    let mut out = Vec::new();
    if a.api_version != b.api_version {
        out.push(format!(
            "API version: {x} has {}, {y} has {}",
            a.api_version, b.api_version
        ));
    }
    for name in STRUCTS {
        let (Some(s), Some(t)) = (a.structs.get(name), b.structs.get(name)) else {
            out.push(format!(
                "struct {name}: in {x}: {}, in {y}: {}",
                a.structs.contains_key(name),
                b.structs.contains_key(name)
            ));
            continue;
        };
        if s.size != t.size {
            out.push(format!("sizeof(struct {name}): {x} has {}, {y} has {}", s.size, t.size));
        }
        if s.fields != t.fields {
            let show = |l: &StructLayout| {
                l.fields
                    .iter()
                    .map(|(n, o, z)| format!("{n}@{o}:{z}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            out.push(format!(
                "struct {name} fields (name@offset:size):\n  {x}: {}\n  {y}: {}",
                show(s),
                show(t)
            ));
        }
    }
    for name in b.structs.keys().filter(|n| !STRUCTS.contains(&n.as_str())) {
        out.push(format!("{y} has a struct {name} this test does not know"));
    }
    if let (Some(c), Some(d)) = (&a.constants, &b.constants) {
        if c != d {
            out.push(format!("status constants:\n  {x}: {c:?}\n  {y}: {d:?}"));
        }
    }
    out
}

#[test]
fn c_api_copies_agree() {
    let c = c_copy();
    assert_eq!(
        c.structs.keys().collect::<Vec<_>>(),
        STRUCTS.to_vec(),
        "the C copy's structs"
    );
    assert!(
        c.constants.as_ref().is_some_and(|k| k.len() >= 8),
        "too few constants read from mpiq.h: {c:?}"
    );
    let mut problems = differences(&c, &rust_copy());
    problems.extend(differences(&c, &python_copy()));
    assert!(
        problems.is_empty(),
        "the copies of the C API disagree (mpiq.h, capi.rs, mpiq_gdb/capi.py):\n{}",
        problems.join("\n")
    );
}
