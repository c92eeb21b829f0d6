//! Where the files that load mpiq into gdb and lldb are, found at run time
//! from the running `mpiq` (the bridge makes the command lines,
//! [`mpiq::render::handoff`]); only files that exist are named, else the
//! report says how to get them.
//!
//! An installation (the wheel, the tarball: `scripts/package`) is a prefix:
//! `bin/mpiq`, `bin/mpiq-dllhost`, `lib/libmpiq.so`,
//! `lib/mpiq/lldb/libmpiq_lldb.so`, `share/mpiq/gdb/mpiq.py`.
//!
//! - gdb's `mpiq.py`: `<prefix>/share/mpiq/gdb/mpiq.py` for an installed
//!   `<prefix>/bin/mpiq`, `<checkout>/gdb-python/mpiq.py` for a
//!   `<checkout>/target/<profile>/mpiq`, else the checkout this mpiq was
//!   built from (a `CARGO_TARGET_DIR` elsewhere; never for a packaged
//!   build, which knows no checkout).
//! - its `libmpiq.so`: the one of this build (next to `mpiq`, or
//!   `<prefix>/lib/`), given as `MPIQ_LIB=...` unless `mpiq.py` finds that
//!   very file by itself (next to it, `../../../lib/` of an installation,
//!   `../target/release/` of a checkout); without one, the one `mpiq.py`
//!   finds itself or `$MPIQ_LIB`.
//! - lldb's `libmpiq_lldb.so`: next to `mpiq`, or
//!   `<prefix>/lib/mpiq/lldb/libmpiq_lldb.so`; lldb itself: `lldb` on
//!   `PATH`, else the newest `lldb-N`.
//! - the flight recorder's `libmpiq_recorder.so` ([`recorder`]):
//!   `$MPIQ_RECORDER`, `<prefix>/lib/mpiq/`, else the copy built into this
//!   mpiq, written into the user's cache.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use mpiq::render::handoff::{Debuggers, Handoff, Opener};
use mpiq::Snapshot;

pub mod recorder;

pub use recorder::{recorder_setup, RecorderLibrary};

/// The checkout this mpiq was built from; none in a packaged build
/// (`scripts/package` sets `MPIQ_PACKAGE`), which must carry no path of
/// the machine that built it.
const SOURCE_ROOT: Option<&str> = if option_env!("MPIQ_PACKAGE").is_some() {
    None
} else {
    Some(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
};

/// What the search looks at: the running mpiq, the checkout it was built
/// from, `PATH`, `$MPIQ_LIB`, `$MPIQ_RECORDER`, the user's cache directory.
#[derive(Clone, Debug, Default)]
pub struct Environment {
    /// The running `mpiq`.
    pub exe: Option<PathBuf>,
    /// The checkout it was built from (none for a packaged build).
    pub source_root: Option<PathBuf>,
    /// `$PATH`.
    pub path: Option<OsString>,
    /// `$MPIQ_LIB` (gdb's `mpiq.py` loads that library when set).
    pub mpiq_lib: Option<OsString>,
    /// `$MPIQ_RECORDER`: the flight recorder's library to use.
    pub recorder: Option<OsString>,
    /// The user's cache directory (`$XDG_CACHE_HOME`, `~/.cache`), where
    /// this mpiq's own flight recorder is written.
    pub cache: Option<PathBuf>,
}

impl Environment {
    /// This process's.
    pub fn current() -> Environment {
        Environment {
            exe: std::env::current_exe().ok(),
            source_root: SOURCE_ROOT.map(PathBuf::from),
            path: std::env::var_os("PATH"),
            mpiq_lib: std::env::var_os("MPIQ_LIB").filter(|v| !v.is_empty()),
            recorder: recorder::variable(),
            cache: recorder::cache_home(),
        }
    }
}

fn real(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| p.to_path_buf())
}

fn first_file(candidates: impl IntoIterator<Item = PathBuf>) -> Option<PathBuf> {
    candidates.into_iter().find(|p| p.is_file()).map(|p| real(&p))
}

/// Where the debuggers' files are, as [`Environment`] shows them.
pub fn debuggers(env: &Environment) -> Debuggers {
    let exe = env.exe.as_deref().map(real);
    let bin = exe.as_deref().and_then(Path::parent);
    let up = |n: usize| bin.and_then(|b| b.ancestors().nth(n)).map(Path::to_path_buf);
    let script = first_file(
        [
            up(1).map(|p| p.join("share/mpiq/gdb/mpiq.py")),
            up(2).map(|p| p.join("gdb-python/mpiq.py")),
            env.source_root.as_ref().map(|r| r.join("gdb-python/mpiq.py")),
        ]
        .into_iter()
        .flatten(),
    );
    let here = first_file(
        [
            bin.map(|b| b.join("libmpiq.so")),
            up(1).map(|p| p.join("lib/libmpiq.so")),
        ]
        .into_iter()
        .flatten(),
    );
    let (gdb_script, gdb_library) = match script {
        None => (
            Err(
                "gdb-python/mpiq.py was not found near this mpiq: `source` it from the mpiq source \
                 tree (README.md, gdb-python/README.md)"
                    .to_string(),
            ),
            None,
        ),
        Some(script) => {
            let dir = script.parent().unwrap_or(Path::new("/"));
            // What mpiq.py loads by itself ($MPIQ_LIB aside).
            let own = first_file([
                dir.join("libmpiq.so"),
                dir.join("../../../lib/libmpiq.so"),
                dir.join("../target/release/libmpiq.so"),
            ]);
            match here {
                Some(lib) if own.as_ref() == Some(&lib) && env.mpiq_lib.is_none() => (Ok(script), None),
                Some(lib) => (Ok(script), Some(lib)),
                None if own.is_some() || env.mpiq_lib.is_some() => (Ok(script), None),
                None => (
                    Err(format!(
                        "{} needs libmpiq.so, which is neither next to this mpiq nor where it \
                         looks: `cargo build --release -p mpiq-bridge`",
                        script.display()
                    )),
                    None,
                ),
            }
        }
    };
    let plugin = first_file(
        [
            bin.map(|b| b.join("libmpiq_lldb.so")),
            up(1).map(|p| p.join("lib/mpiq/lldb/libmpiq_lldb.so")),
        ]
        .into_iter()
        .flatten(),
    );
    let lldb_plugin = plugin.ok_or_else(|| {
        format!(
            "libmpiq_lldb.so is not next to this mpiq{}: build it (`cargo build --release -p mpiq-lldb`, \
             lldb-plugin/README.md) and `plugin load` it, or install mpiq from its wheel or tarball \
             (`scripts/package`), which hold it",
            bin.map(|b| format!(" ({})", b.display())).unwrap_or_default()
        )
    });
    Debuggers {
        gdb_script,
        gdb_library,
        lldb: lldb_name(env.path.as_deref()),
        lldb_plugin,
    }
}

/// A part of this installation that `mpiq setup` would name is missing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SetupError {
    /// The part, and how to get it.
    #[error("{0}")]
    Missing(String),
    /// `$MPIQ_RECORDER` names no file.
    #[error("{0}")]
    BadVariable(String),
}

/// The lines that load mpiq into gdb at every start (for `~/.gdbinit`), as
/// [`debuggers`] found its parts.
pub fn gdb_setup(found: &Debuggers) -> Result<String, SetupError> {
    let script = found.gdb_script.as_ref().map_err(|e| SetupError::Missing(e.clone()))?;
    let mut out = String::from("# mpiq: `info mpi-queues` (from `mpiq setup gdb`)\n");
    if let Some(lib) = &found.gdb_library {
        // The script loads $MPIQ_LIB when set: this installation's.
        out.push_str(&format!(
            "python import os; os.environ.setdefault('MPIQ_LIB', {})\n",
            python_string(&lib.display().to_string())
        ));
    }
    out.push_str(&format!("source {}\n", script.display()));
    Ok(out)
}

/// The lines that load mpiq into lldb at every start (for `~/.lldbinit`).
pub fn lldb_setup(found: &Debuggers) -> Result<String, SetupError> {
    let plugin = found.lldb_plugin.as_ref().map_err(|e| SetupError::Missing(e.clone()))?;
    Ok(format!(
        "# mpiq: `mpi queues` (from `mpiq setup lldb`)\nplugin load {}\n",
        mpiq::render::handoff::lldb_arg(plugin)
    ))
}

/// `s` as a Python string literal.
fn python_string(s: &str) -> String {
    let mut out = String::from("'");
    for c in s.chars() {
        match c {
            '\\' | '\'' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// `lldb` when `PATH` has it, else the newest `lldb-N` there, else `lldb`.
fn lldb_name(path: Option<&std::ffi::OsStr>) -> String {
    let dirs: Vec<PathBuf> = path.map(|p| std::env::split_paths(p).collect()).unwrap_or_default();
    if dirs.iter().any(|d| d.join("lldb").is_file()) {
        return "lldb".into();
    }
    let mut best: Option<(u32, String)> = None;
    for d in &dirs {
        let Ok(entries) = std::fs::read_dir(d) else { continue };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(n) = name.strip_prefix("lldb-").and_then(|v| v.parse::<u32>().ok()) else {
                continue;
            };
            if best.as_ref().is_none_or(|(b, _)| n > *b) {
                best = Some((n, name));
            }
        }
    }
    best.map_or_else(|| "lldb".into(), |(_, name)| name)
}

/// How the processes of a command can be opened again in a debugger.
#[derive(Clone, Copy, Debug)]
pub enum Reopen<'a> {
    /// Live processes, by pid (`mpiq job`, `mpiq queues`); other nodes
    /// through srun into this Slurm job when known, else ssh.
    Live(Option<&'a str>),
    /// Core files, one per process, and `--exe` (`mpiq core`).
    Cores(&'a [PathBuf], Option<&'a Path>),
    /// Not at all (`mpiq replay`: its processes are gone).
    No,
}

impl Reopen<'_> {
    /// The hand-off of a snapshot's processes, if they can be opened again.
    pub fn handoff(self, snapshot: &Snapshot) -> Option<Handoff> {
        match self {
            Reopen::Live(slurm_job) => Some(live(snapshot, slurm_job.map(String::from))),
            Reopen::Cores(files, exe) => Some(cores(snapshot, files, exe)),
            Reopen::No => None,
        }
    }
}

/// The hand-off of live processes (`mpiq job`, `mpiq queues`): each one's
/// pid and node; `slurm_job` reaches other nodes through srun.
pub fn live(snapshot: &Snapshot, slurm_job: Option<String>) -> Handoff {
    Handoff::live(debuggers(&Environment::current()), snapshot, slurm_job)
}

/// The hand-off of core files (`mpiq core`): `files[i]` is process `i`'s
/// core, its executable `exe` or the one the snapshot names (a process
/// whose executable is not there has no commands).
pub fn cores(snapshot: &Snapshot, files: &[PathBuf], exe: Option<&Path>) -> Handoff {
    let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let openers = snapshot
        .processes
        .iter()
        .zip(files)
        .map(|(p, core)| {
            // Only an executable that is there (a core outlives its build).
            let exe = match exe {
                Some(e) => absolute(e),
                None => PathBuf::from(&p.executable),
            };
            if !exe.is_file() {
                return None;
            }
            Some(Opener::Core {
                exe,
                core: absolute(core),
            })
        })
        .collect();
    Handoff {
        debuggers: debuggers(&Environment::current()),
        slurm_job: None,
        openers,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Tree(PathBuf);

    impl Tree {
        fn new(name: &str) -> Tree {
            let root = std::env::temp_dir().join(format!("mpiq-handoff-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&root);
            std::fs::create_dir_all(&root).unwrap();
            Tree(real(&root))
        }

        fn file(&self, rel: &str) -> PathBuf {
            let p = self.0.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, b"x").unwrap();
            p
        }
    }

    impl Drop for Tree {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn a_checkout_build_finds_its_own_files() {
        let t = Tree::new("checkout");
        let exe = t.file("co/target/release/mpiq");
        let script = t.file("co/gdb-python/mpiq.py");
        let lib = t.file("co/target/release/libmpiq.so");
        let plugin = t.file("co/target/release/libmpiq_lldb.so");
        t.file("bin/lldb-14");
        t.file("bin/lldb-16");
        let env = Environment {
            exe: Some(exe),
            source_root: Some(t.0.join("nowhere")),
            path: Some(t.0.join("bin").into_os_string()),
            mpiq_lib: None,
            ..Environment::default()
        };
        let d = debuggers(&env);
        assert_eq!(d.gdb_script, Ok(script));
        // mpiq.py finds ../target/release/libmpiq.so itself.
        assert_eq!(d.gdb_library, None);
        assert_eq!(d.lldb_plugin, Ok(plugin));
        assert_eq!(d.lldb, "lldb-16");
        // With $MPIQ_LIB set, the build's own library is named.
        let d = debuggers(&Environment {
            mpiq_lib: Some("/elsewhere/libmpiq.so".into()),
            ..env.clone()
        });
        assert_eq!(d.gdb_library, Some(lib));
        t.file("bin/lldb");
        assert_eq!(debuggers(&env).lldb, "lldb");
    }

    #[test]
    fn a_target_dir_elsewhere_uses_the_source_tree_and_names_the_library() {
        let t = Tree::new("elsewhere");
        let exe = t.file("tgt/release/mpiq");
        let lib = t.file("tgt/release/libmpiq.so");
        let script = t.file("src/gdb-python/mpiq.py");
        let env = Environment {
            exe: Some(exe),
            source_root: Some(t.0.join("src")),
            path: None,
            mpiq_lib: None,
            ..Environment::default()
        };
        let d = debuggers(&env);
        assert_eq!(d.gdb_script, Ok(script));
        assert_eq!(d.gdb_library, Some(lib.clone()));
        let why = d.lldb_plugin.unwrap_err();
        assert!(why.contains("cargo build --release -p mpiq-lldb"), "{why}");
        assert_eq!(d.lldb, "lldb");
        // No library anywhere: no gdb line, and how to build one.
        std::fs::remove_file(&lib).unwrap();
        let why = debuggers(&env).gdb_script.unwrap_err();
        assert!(why.contains("cargo build --release -p mpiq-bridge"), "{why}");
        // No script either.
        let env = Environment {
            source_root: Some(t.0.join("gone")),
            ..env
        };
        assert!(debuggers(&env)
            .gdb_script
            .unwrap_err()
            .contains("gdb-python/mpiq.py was not found"));
    }

    #[test]
    fn an_installed_mpiq_finds_share_and_lib() {
        let t = Tree::new("installed");
        let exe = t.file("usr/bin/mpiq");
        let script = t.file("usr/share/mpiq/gdb/mpiq.py");
        let lib = t.file("usr/lib/libmpiq.so");
        let plugin = t.file("usr/lib/mpiq/lldb/libmpiq_lldb.so");
        let env = Environment {
            exe: Some(exe),
            source_root: None,
            path: None,
            mpiq_lib: None,
            ..Environment::default()
        };
        let d = debuggers(&env);
        // mpiq.py finds <prefix>/lib/libmpiq.so itself.
        assert_eq!((d.gdb_script, d.gdb_library), (Ok(script.clone()), None));
        assert_eq!(d.lldb_plugin, Ok(plugin));
        // With $MPIQ_LIB set elsewhere, this installation's is named.
        let d = debuggers(&Environment {
            mpiq_lib: Some("/elsewhere/libmpiq.so".into()),
            ..env.clone()
        });
        assert_eq!((d.gdb_script, d.gdb_library), (Ok(script), Some(lib.clone())));
        // Without the library, the script is not offered.
        std::fs::remove_file(&lib).unwrap();
        assert!(debuggers(&env).gdb_script.unwrap_err().contains("needs libmpiq.so"));
        // A packaged build knows no checkout: nothing found is said so.
        std::fs::remove_file(t.0.join("usr/share/mpiq/gdb/mpiq.py")).unwrap();
        assert!(debuggers(&env)
            .gdb_script
            .unwrap_err()
            .contains("gdb-python/mpiq.py was not found"));
    }

    #[test]
    fn setup_lines_name_this_installations_files() {
        let found = Debuggers {
            gdb_script: Ok(PathBuf::from("/opt/mpiq/share/mpiq/gdb/mpiq.py")),
            gdb_library: Some(PathBuf::from("/opt/it's/lib/libmpiq.so")),
            lldb: "lldb".into(),
            lldb_plugin: Err("libmpiq_lldb.so is not next to this mpiq".into()),
        };
        assert_eq!(
            gdb_setup(&found).unwrap(),
            "# mpiq: `info mpi-queues` (from `mpiq setup gdb`)\n\
             python import os; os.environ.setdefault('MPIQ_LIB', '/opt/it\\'s/lib/libmpiq.so')\n\
             source /opt/mpiq/share/mpiq/gdb/mpiq.py\n"
        );
        assert_eq!(
            lldb_setup(&found).unwrap_err().to_string(),
            "libmpiq_lldb.so is not next to this mpiq"
        );
        // gdb's `source` takes the rest of its line; lldb's `plugin load` one word.
        let spaced = Debuggers {
            gdb_script: Ok(PathBuf::from("/opt/some where/share/mpiq/gdb/mpiq.py")),
            gdb_library: None,
            lldb_plugin: Ok(PathBuf::from("/opt/some where/lib/mpiq/lldb/libmpiq_lldb.so")),
            ..found
        };
        assert!(gdb_setup(&spaced)
            .unwrap()
            .ends_with("\nsource /opt/some where/share/mpiq/gdb/mpiq.py\n"));
        assert!(lldb_setup(&spaced)
            .unwrap()
            .ends_with("\nplugin load \"/opt/some where/lib/mpiq/lldb/libmpiq_lldb.so\"\n"));
    }
}
