//! Building the small C programs and libraries in `tests/fixtures/` (see its
//! README) into `<cargo target dir>/mpiq-fixtures/`, once per variant.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Mutex;

use crate::example::{compile, examples_build_root};
use crate::Mpi;

/// The directory holding the fixture sources.
pub fn fixtures_dir() -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// Where built fixtures go.
pub fn fixtures_build_root() -> PathBuf {
    examples_build_root().with_file_name("mpiq-fixtures")
}

/// What to build a fixture with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compiler {
    /// The system C compiler, `cc`.
    Cc,
    /// An MPI's `mpicc`.
    Mpi(Mpi),
}

/// Builds `tests/fixtures/<source>` into `<root>/<variant>` with extra
/// compiler arguments (`-DNAME=VALUE`, ...); `shared` makes a shared library.
/// Rebuilt every time the test process first asks for a variant, so
/// arguments that name paths are always current.
///
/// # Panics
/// If the compiler fails, with its output.
pub fn build(source: &str, variant: &str, compiler: Compiler, extra: &[&str], shared: bool) -> PathBuf {
    static BUILT: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    let out = fixtures_build_root().join(variant);
    let mut built = BUILT.lock().unwrap_or_else(|p| p.into_inner());
    if built.contains(&out) {
        return out;
    }
    let cc = match compiler {
        Compiler::Cc => PathBuf::from("cc"),
        Compiler::Mpi(mpi) => mpi.mpicc(),
    };
    let mut args: Vec<OsString> = vec!["-g".into(), "-O0".into()];
    if shared {
        args.push("-shared".into());
        args.push("-fPIC".into());
    }
    args.extend(extra.iter().map(Into::into));
    args.push(fixtures_dir().join(source).into_os_string());
    compile(&cc, &args, &out, &format!("fixture {source} ({variant})"));
    built.push(out.clone());
    out
}

/// The fake debug library built with `defines` (see `fake_dll.c`).
pub fn fake_dll(variant: &str, defines: &[&str]) -> PathBuf {
    build("fake_dll.c", &format!("lib{variant}.so"), Compiler::Cc, defines, true)
}
