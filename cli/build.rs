//! Builds mpiq's flight recorder (`recorder/*.c`, all but `check.c`, a test
//! program) into `OUT_DIR/libmpiq_recorder.so`, which the CLI embeds
//! (`src/handoff/recorder.rs`) and writes into the user's cache on first use:
//! `mpiq run` preloads it into its jobs wherever mpiq is, an installation
//! without `lib/mpiq/` included.
//!
//! The system's C compiler, as the `cc` crate finds it (`CC`, `CFLAGS`), run
//! here to link a shared object (`cc` builds static archives), in the
//! recorder's directory with relative file names and
//! `-ffile-prefix-map=DIR=recorder`, without debug information and with its
//! symbol table stripped (`-s`; the dynamic symbols the reader looks up
//! stay): the object names no path of the machine that built it
//! (`tests/tests/install.rs` greps the packaged `mpiq` for them).
//!
//! `MPIQ_RECORDER_DIGEST` (an environment variable of the compilation) is a
//! 64-bit FNV-1a digest of the object: the name of its directory in the
//! cache.

use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let dir = manifest.join("../recorder");
    let dir = dir.canonicalize().unwrap_or(dir);
    // A directory: Cargo looks at every file in it.
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut sources: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("the flight recorder's sources, {}: {e}", dir.display()))
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| name.ends_with(".c") && name != "check.c")
        .collect();
    sources.sort();
    assert!(!sources.is_empty(), "no recorder/*.c in {}", dir.display());

    let out = out_dir.join("libmpiq_recorder.so");
    let compiler = cc::Build::new()
        .debug(false)
        .opt_level(2)
        .pic(true)
        .cargo_warnings(false)
        .get_compiler();
    let mut cmd = compiler.to_command();
    cmd.current_dir(&dir)
        // After CFLAGS: no debug information whatever they say.
        .args(["-shared", "-g0", "-Wall", "-Wextra", "-s"])
        .arg(format!("-ffile-prefix-map={}=recorder", dir.display()))
        .arg("-o")
        .arg(&out)
        .args(&sources)
        .arg("-ldl");
    let done = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C compiler ({cmd:?}) to build the flight recorder: {e}"));
    let stderr = String::from_utf8_lossy(&done.stderr);
    if !done.status.success() {
        panic!(
            "building the flight recorder failed ({}):\n{cmd:?}\n{stderr}",
            done.status
        );
    }
    for line in stderr.lines().filter(|l| !l.trim().is_empty()) {
        println!("cargo:warning=recorder: {line}");
    }
    let bytes = std::fs::read(&out).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
    println!("cargo:rustc-env=MPIQ_RECORDER_DIGEST={:016x}", fnv1a(&bytes));
}

/// The 64-bit FNV-1a digest of `bytes`.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
