//! Building the small C programs and libraries in `tests/fixtures/` (see its
//! README): once per variant into `<cargo target dir>/mpiq-fixtures/`
//! ([`build`], [`fake_dll`]), or into a test's own [`WorkDir`] when where
//! the file lies matters (the trust policy looks at its directory) or the
//! source is written by the test ([`WorkDir::c_library`]); and running a
//! fixture program until it says it is ready ([`Process`]).

use std::ffi::OsString;
use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crate::example::{compile, examples_build_root};
use crate::Mpi;

/// The directory holding the fixture sources.
pub fn fixtures_dir() -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// The fixture source `tests/fixtures/<name>`.
pub fn fixture(name: &str) -> PathBuf {
    fixtures_dir().join(name)
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

/// Compiles the C file `source` into `out` with `-g -O0` and `extra`
/// arguments (`-DNAME=VALUE`, ...); `shared` makes a shared library
/// (`-shared -fPIC`). Always builds; the file appears whole (renamed into
/// place).
///
/// # Panics
/// If the compiler fails, with its output.
pub fn compile_at(source: &Path, out: &Path, compiler: Compiler, extra: &[&str], shared: bool) {
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
    args.push(source.as_os_str().to_owned());
    let name = source.file_name().unwrap_or_default().to_string_lossy();
    compile(&cc, &args, out, &format!("{name} ({})", out.display()));
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
    compile_at(&fixture(source), &out, compiler, extra, shared);
    built.push(out.clone());
    out
}

/// The fake debug library built with `defines` (see `fake_dll.c`).
pub fn fake_dll(variant: &str, defines: &[&str]) -> PathBuf {
    build("fake_dll.c", &format!("lib{variant}.so"), Compiler::Cc, defines, true)
}

/// The fake debug library built with `defines` (`-DNAME=VALUE`, ...) into
/// `out` (see `fake_dll.c`).
pub fn fake_dll_at(out: &Path, defines: &[&str]) {
    compile_at(&fixture("fake_dll.c"), out, Compiler::Cc, defines, true);
}

/// A directory of one test's own, under `<cargo profile dir>/mpiq-work/`
/// (never a world-writable place such as `/tmp`, so that the trust policy
/// judges only what the test plants), mode 0755, removed on drop.
#[derive(Debug)]
pub struct WorkDir(PathBuf);

impl WorkDir {
    /// A new, empty directory for the test `name`.
    pub fn new(name: &str) -> WorkDir {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let dir = crate::frontends::artifacts_dir().join("mpiq-work").join(format!(
            "{name}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).expect("chmod the work directory");
        WorkDir(dir)
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.0
    }

    /// `name` in the directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// The C source `source`, written to `<name>.c` here and built into the
    /// shared library `lib<name>.so` here with `extra` arguments
    /// (`-DNAME=VALUE`, ...).
    pub fn c_library(&self, name: &str, source: &str, extra: &[&str]) -> PathBuf {
        let src = self.path(&format!("{name}.c"));
        fs::write(&src, source).unwrap_or_else(|e| panic!("cannot write {}: {e}", src.display()));
        let lib = self.path(&format!("lib{name}.so"));
        compile_at(&src, &lib, Compiler::Cc, extra, true);
        lib
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A running fixture program that prints `MPIQ-READY rank=0 pid=N` when it
/// is ready (as the examples do, e.g. `planted.c`); killed on drop.
#[derive(Debug)]
pub struct Process(Child);

impl Process {
    /// Starts `exe` and waits up to 30 s for its `MPIQ-READY rank=0 pid=N`
    /// line (N its pid).
    ///
    /// # Panics
    /// If it cannot start, or prints something else first.
    pub fn start(exe: &Path) -> Process {
        let mut child = Command::new(exe)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", exe.display()));
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(Duration::from_secs(30)).unwrap_or_default();
        let p = Process(child);
        assert!(
            line.starts_with(&format!("MPIQ-READY rank=0 pid={}", p.pid())),
            "{} printed {line:?}",
            exe.display()
        );
        p
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `endless_reader.c` (a library that keeps reading unreadable memory until
/// interrupted) built into `out`; it creates `marker` when its loop starts.
pub fn endless_reader_at(out: &Path, marker: &Path) {
    let define = format!("-DMARKER=\"{}\"", marker.display());
    compile_at(&fixture("endless_reader.c"), out, Compiler::Cc, &[&define], true);
}
