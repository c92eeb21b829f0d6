//! The PMIx ABI of `cli/src/pmix/abi.rs` against the real headers: a C
//! program compiled against each installed set prints the size and offset
//! of every struct field mpiq uses and the value of every constant, and
//! each must equal the Rust side. Header sets: Debian's libpmix-dev
//! (`pkg-config pmix`: OpenPMIx 4.2; required, scripts/testbed installs
//! it) and the test bed's Open MPI 5.0.7 (`<testbed>/openmpi-5.0.7/include`,
//! its bundled OpenPMIx 5.0), when built.

use std::mem::{offset_of, size_of};
use std::path::{Path, PathBuf};
use std::process::Command;

use mpiq_cli::pmix::abi::*;
use mpiq_tests::run::run;

/// `(name, C expression printed as %ld)`, and the Rust value.
fn numbers() -> Vec<(&'static str, &'static str, i64)> {
    let n = |v: usize| v as i64;
    vec![
        ("sizeof pmix_proc_t", "sizeof(pmix_proc_t)", n(size_of::<PmixProc>())),
        (
            "offsetof pmix_proc_t.nspace",
            "offsetof(pmix_proc_t, nspace)",
            n(offset_of!(PmixProc, nspace)),
        ),
        (
            "offsetof pmix_proc_t.rank",
            "offsetof(pmix_proc_t, rank)",
            n(offset_of!(PmixProc, rank)),
        ),
        ("sizeof pmix_rank_t", "sizeof(pmix_rank_t)", n(size_of::<PmixRank>())),
        ("sizeof pmix_value_t", "sizeof(pmix_value_t)", n(size_of::<PmixValue>())),
        (
            "offsetof pmix_value_t.type",
            "offsetof(pmix_value_t, type)",
            n(offset_of!(PmixValue, type_)),
        ),
        (
            "offsetof pmix_value_t.data",
            "offsetof(pmix_value_t, data)",
            n(offset_of!(PmixValue, data)),
        ),
        (
            "sizeof pmix_value_t.data",
            "sizeof(((pmix_value_t *)0)->data)",
            n(size_of::<PmixValueData>()),
        ),
        (
            "sizeof pmix_data_type_t",
            "sizeof(pmix_data_type_t)",
            n(size_of::<PmixDataType>()),
        ),
        (
            "sizeof pmix_status_t",
            "sizeof(pmix_status_t)",
            n(size_of::<PmixStatus>()),
        ),
        ("sizeof pid_t", "sizeof(pid_t)", n(size_of::<libc::pid_t>())),
        ("sizeof pmix_info_t", "sizeof(pmix_info_t)", n(size_of::<PmixInfo>())),
        (
            "offsetof pmix_info_t.key",
            "offsetof(pmix_info_t, key)",
            n(offset_of!(PmixInfo, key)),
        ),
        (
            "offsetof pmix_info_t.flags",
            "offsetof(pmix_info_t, flags)",
            n(offset_of!(PmixInfo, flags)),
        ),
        ("sizeof pmix_info_directives_t", "sizeof(pmix_info_directives_t)", 4),
        (
            "offsetof pmix_info_t.value",
            "offsetof(pmix_info_t, value)",
            n(offset_of!(PmixInfo, value)),
        ),
        ("sizeof pmix_query_t", "sizeof(pmix_query_t)", n(size_of::<PmixQuery>())),
        (
            "offsetof pmix_query_t.keys",
            "offsetof(pmix_query_t, keys)",
            n(offset_of!(PmixQuery, keys)),
        ),
        (
            "offsetof pmix_query_t.qualifiers",
            "offsetof(pmix_query_t, qualifiers)",
            n(offset_of!(PmixQuery, qualifiers)),
        ),
        (
            "offsetof pmix_query_t.nqual",
            "offsetof(pmix_query_t, nqual)",
            n(offset_of!(PmixQuery, nqual)),
        ),
        (
            "sizeof pmix_data_array_t",
            "sizeof(pmix_data_array_t)",
            n(size_of::<PmixDataArray>()),
        ),
        (
            "offsetof pmix_data_array_t.type",
            "offsetof(pmix_data_array_t, type)",
            n(offset_of!(PmixDataArray, type_)),
        ),
        (
            "offsetof pmix_data_array_t.size",
            "offsetof(pmix_data_array_t, size)",
            n(offset_of!(PmixDataArray, size)),
        ),
        (
            "offsetof pmix_data_array_t.array",
            "offsetof(pmix_data_array_t, array)",
            n(offset_of!(PmixDataArray, array)),
        ),
        (
            "sizeof pmix_proc_info_t",
            "sizeof(pmix_proc_info_t)",
            n(size_of::<PmixProcInfo>()),
        ),
        (
            "offsetof pmix_proc_info_t.proc",
            "offsetof(pmix_proc_info_t, proc)",
            n(offset_of!(PmixProcInfo, proc_)),
        ),
        (
            "offsetof pmix_proc_info_t.hostname",
            "offsetof(pmix_proc_info_t, hostname)",
            n(offset_of!(PmixProcInfo, hostname)),
        ),
        (
            "offsetof pmix_proc_info_t.executable_name",
            "offsetof(pmix_proc_info_t, executable_name)",
            n(offset_of!(PmixProcInfo, executable_name)),
        ),
        (
            "offsetof pmix_proc_info_t.pid",
            "offsetof(pmix_proc_info_t, pid)",
            n(offset_of!(PmixProcInfo, pid)),
        ),
        (
            "offsetof pmix_proc_info_t.exit_code",
            "offsetof(pmix_proc_info_t, exit_code)",
            n(offset_of!(PmixProcInfo, exit_code)),
        ),
        (
            "offsetof pmix_proc_info_t.state",
            "offsetof(pmix_proc_info_t, state)",
            n(offset_of!(PmixProcInfo, state)),
        ),
        (
            "sizeof pmix_proc_state_t",
            "sizeof(pmix_proc_state_t)",
            n(size_of::<PmixProcState>()),
        ),
        ("PMIX_MAX_NSLEN", "PMIX_MAX_NSLEN", n(PMIX_MAX_NSLEN)),
        ("PMIX_MAX_KEYLEN", "PMIX_MAX_KEYLEN", n(PMIX_MAX_KEYLEN)),
        ("PMIX_BOOL", "PMIX_BOOL", PMIX_BOOL.into()),
        ("PMIX_STRING", "PMIX_STRING", PMIX_STRING.into()),
        ("PMIX_PID", "PMIX_PID", PMIX_PID.into()),
        ("PMIX_UINT32", "PMIX_UINT32", PMIX_UINT32.into()),
        ("PMIX_INFO", "PMIX_INFO", PMIX_INFO.into()),
        ("PMIX_PROC_INFO", "PMIX_PROC_INFO", PMIX_PROC_INFO.into()),
        ("PMIX_DATA_ARRAY", "PMIX_DATA_ARRAY", PMIX_DATA_ARRAY.into()),
        ("PMIX_SUCCESS", "PMIX_SUCCESS", PMIX_SUCCESS.into()),
        (
            "PMIX_ERR_NO_PERMISSIONS",
            "PMIX_ERR_NO_PERMISSIONS",
            PMIX_ERR_NO_PERMISSIONS.into(),
        ),
        ("PMIX_ERR_TIMEOUT", "PMIX_ERR_TIMEOUT", PMIX_ERR_TIMEOUT.into()),
        ("PMIX_ERR_UNREACH", "PMIX_ERR_UNREACH", PMIX_ERR_UNREACH.into()),
        ("PMIX_ERR_NOT_FOUND", "PMIX_ERR_NOT_FOUND", PMIX_ERR_NOT_FOUND.into()),
        (
            "PMIX_ERR_NOT_SUPPORTED",
            "PMIX_ERR_NOT_SUPPORTED",
            PMIX_ERR_NOT_SUPPORTED.into(),
        ),
        (
            "PMIX_ERR_PARTIAL_SUCCESS",
            "PMIX_ERR_PARTIAL_SUCCESS",
            PMIX_ERR_PARTIAL_SUCCESS.into(),
        ),
        (
            "PMIX_PROC_STATE_UNTERMINATED",
            "PMIX_PROC_STATE_UNTERMINATED",
            PMIX_PROC_STATE_UNTERMINATED.into(),
        ),
    ]
}

/// The attribute keys: `(macro, Rust value)`.
fn keys() -> Vec<(&'static str, &'static str)> {
    vec![
        ("PMIX_SERVER_PIDINFO", PMIX_SERVER_PIDINFO),
        ("PMIX_SERVER_TMPDIR", PMIX_SERVER_TMPDIR),
        ("PMIX_SYSTEM_TMPDIR", PMIX_SYSTEM_TMPDIR),
        ("PMIX_TOOL_ATTACHMENT_FILE", PMIX_TOOL_ATTACHMENT_FILE),
        ("PMIX_QUERY_NAMESPACES", PMIX_QUERY_NAMESPACES),
        ("PMIX_QUERY_PROC_TABLE", PMIX_QUERY_PROC_TABLE),
        ("PMIX_NSPACE", PMIX_NSPACE),
    ]
}

fn program() -> String {
    let mut c = String::from("#include <stddef.h>\n#include <stdio.h>\n#include <pmix_tool.h>\nint main(void) {\n");
    c.push_str(
        "    printf(\"OpenPMIx %ld.%ld.%ld\\n\", (long)PMIX_VERSION_MAJOR, (long)PMIX_VERSION_MINOR, (long)PMIX_VERSION_RELEASE);\n",
    );
    for (name, expr, _) in numbers() {
        c.push_str(&format!("    printf(\"{name}=%ld\\n\", (long)({expr}));\n"));
    }
    for (name, _) in keys() {
        c.push_str(&format!("    printf(\"{name}=%s\\n\", {name});\n"));
    }
    c.push_str("    return 0;\n}\n");
    c
}

/// Compiles and runs the program against `cflags`; its lines.
fn c_values(what: &str, cflags: &[String], dir: &Path) -> (String, Vec<String>) {
    let src = dir.join("pmix_abi.c");
    std::fs::write(&src, program()).unwrap();
    let exe = dir.join(format!("pmix_abi_{what}"));
    let r = run(Command::new("cc").args(cflags).arg("-o").arg(&exe).arg(&src));
    assert!(r.success, "{what}: compiling against the PMIx headers failed:\n{r}");
    let r = run(&mut Command::new(&exe));
    assert!(r.success, "{what}: {r}");
    let mut lines = r.stdout.lines().map(String::from);
    let version = lines.next().unwrap_or_default();
    (version, lines.collect())
}

fn check(what: &str, cflags: &[String]) {
    let dir = std::env::temp_dir().join(format!("mpiq-pmix-abi-{what}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (version, lines) = c_values(what, cflags, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    let mut expected: Vec<String> = numbers().into_iter().map(|(n, _, v)| format!("{n}={v}")).collect();
    expected.extend(keys().into_iter().map(|(n, v)| format!("{n}={v}")));
    let wrong: Vec<String> = expected
        .iter()
        .zip(&lines)
        .filter(|(e, c)| e != c)
        .map(|(e, c)| format!("  Rust {e}, C {c}"))
        .collect();
    assert_eq!(lines.len(), expected.len(), "{what}: {lines:?}");
    assert!(
        wrong.is_empty(),
        "{what} ({version}): the Rust ABI differs from the headers:\n{}",
        wrong.join("\n")
    );
    eprintln!("{what} ({version}): {} values agree", expected.len());
}

#[test]
fn the_abi_matches_debians_libpmix_headers() {
    let r = run(Command::new("pkg-config").args(["--cflags", "pmix"]));
    assert!(
        r.success,
        "no PMIx headers (pkg-config pmix): `apt-get install libpmix-dev` (scripts/testbed installs it)\n{r}"
    );
    let cflags: Vec<String> = r.stdout.split_whitespace().map(String::from).collect();
    check("debian", &cflags);
}

#[test]
fn the_abi_matches_open_mpi_5_bundled_openpmix_headers() {
    let testbed = std::env::var_os("MPIQ_TESTBED")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into())).join(".cache/mpiq/testbed")
        });
    let prefix = testbed.join("openmpi-5.0.7");
    if !prefix.join(".mpiq-stamp").is_file() || !prefix.join("include/pmix.h").is_file() {
        eprintln!(
            "SKIPPED: Open MPI 5.0.7 is not built at {} (scripts/testbed)",
            prefix.display()
        );
        return;
    }
    check("openmpi-5.0.7", &[format!("-I{}", prefix.join("include").display())]);
}
