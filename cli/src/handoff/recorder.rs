//! Where mpiq's flight recorder (`recorder/`, `libmpiq_recorder.so`) is, for
//! `mpiq run` to preload it into its jobs and for `mpiq setup recorder` to
//! name it. In this order:
//!
//! 1. `$MPIQ_RECORDER`, a path (an error when it names no file);
//! 2. an installation's own: next to `mpiq`, or `<prefix>/lib/mpiq/`
//!    (`scripts/package` builds it there);
//! 3. the copy built into this mpiq (`cli/build.rs`), written on first use
//!    into `$XDG_CACHE_HOME/mpiq/recorder/<digest>/libmpiq_recorder.so`
//!    (`~/.cache/...` without it), atomically (a temporary file in the same
//!    directory, renamed), and used again while it holds the same bytes.
//!
//! `LD_PRELOAD` splits its list at spaces and colons: a path with one
//! cannot be preloaded. `mpiq setup recorder` says so; `mpiq run` passes an
//! installed library with one over for the copy in the cache.

use std::ffi::OsString;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::{first_file, Environment, SetupError};

/// The flight recorder's library.
pub const RECORDER: &str = "libmpiq_recorder.so";

/// The recorder built into this mpiq (`cli/build.rs`).
static EMBEDDED: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libmpiq_recorder.so"));

/// The digest of [`EMBEDDED`]: its directory in the cache.
const DIGEST: &str = env!("MPIQ_RECORDER_DIGEST");

/// Where a recorder library was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecorderFrom {
    /// `$MPIQ_RECORDER`.
    Variable,
    /// The installation's `lib/mpiq/` (or next to `mpiq`).
    Installed,
    /// This mpiq's own copy, written into the cache.
    Embedded,
}

/// The recorder library to preload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecorderLibrary {
    /// Its path (absolute).
    pub path: PathBuf,
    /// Where it was found.
    pub from: RecorderFrom,
}

impl RecorderLibrary {
    /// Where it is, in words (`mpiq run -v`).
    pub fn words(&self) -> String {
        let from = match self.from {
            RecorderFrom::Variable => "named by MPIQ_RECORDER",
            RecorderFrom::Installed => "this installation's",
            RecorderFrom::Embedded => "this mpiq's own copy",
        };
        format!("{} ({from})", self.path.display())
    }
}

/// `$MPIQ_RECORDER`, when set and not empty.
pub(super) fn variable() -> Option<OsString> {
    std::env::var_os("MPIQ_RECORDER").filter(|v| !v.is_empty())
}

/// The user's cache directory: `$XDG_CACHE_HOME` (when absolute, as the
/// XDG specification says), else `$HOME/.cache`, else the home directory
/// of the password database.
pub(super) fn cache_home() -> Option<PathBuf> {
    let absolute = |v: OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
    if let Some(p) = std::env::var_os("XDG_CACHE_HOME").and_then(absolute) {
        return Some(p);
    }
    let home = std::env::var_os("HOME").and_then(absolute).or_else(|| {
        nix::unistd::User::from_uid(nix::unistd::getuid())
            .ok()
            .flatten()
            .map(|u| u.dir)
            .filter(|d| d.is_absolute())
    })?;
    Some(home.join(".cache"))
}

/// The installation's recorder: next to `mpiq`, or in `<prefix>/lib/mpiq/`.
fn installed(env: &Environment) -> Option<PathBuf> {
    let exe = env.exe.as_deref().map(super::real);
    let bin = exe.as_deref().and_then(Path::parent);
    first_file(
        [
            bin.map(|b| b.join(RECORDER)),
            bin.and_then(Path::parent).map(|p| p.join("lib/mpiq").join(RECORDER)),
        ]
        .into_iter()
        .flatten(),
    )
}

/// Whether `LD_PRELOAD` can name `path`: it splits its list at spaces and
/// colons.
pub fn can_preload(path: &Path) -> Result<(), SetupError> {
    if path.to_string_lossy().contains([' ', '\t', '\n', ':']) {
        return Err(SetupError::Missing(format!(
            "{} cannot be preloaded from where it is: LD_PRELOAD splits its list at spaces and colons, \
             and this path has one; link it from a path without (ln -s) and name the link in \
             MPIQ_RECORDER",
            path.display()
        )));
    }
    Ok(())
}

/// The flight recorder's library, in the order of the module's comment
/// (`mpiq setup recorder`): the first found, whether or not `LD_PRELOAD`
/// can name it.
pub fn recorder_library(env: &Environment) -> Result<RecorderLibrary, SetupError> {
    lookup(env, false)
}

/// The flight recorder's library for `LD_PRELOAD` (`mpiq run`): as
/// [`recorder_library`], but an installed library whose path has a space
/// or colon is passed over for this mpiq's own copy; fails when the one
/// found cannot be preloaded all the same.
pub fn preload_library(env: &Environment) -> Result<RecorderLibrary, SetupError> {
    let found = lookup(env, true)?;
    can_preload(&found.path)?;
    Ok(found)
}

fn lookup(env: &Environment, preloadable_only: bool) -> Result<RecorderLibrary, SetupError> {
    if let Some(v) = &env.recorder {
        let path = PathBuf::from(v);
        if !path.is_file() {
            return Err(SetupError::BadVariable(format!(
                "MPIQ_RECORDER names {}, which is not a file: name the flight recorder's library \
                 ({RECORDER}), or unset it",
                path.display()
            )));
        }
        // Absolute, but links are kept: a link without spaces is the way
        // to preload a library whose real path has one.
        let path = std::path::absolute(&path).unwrap_or(path);
        return Ok(RecorderLibrary {
            path,
            from: RecorderFrom::Variable,
        });
    }
    if let Some(path) = installed(env) {
        if !preloadable_only || can_preload(&path).is_ok() {
            return Ok(RecorderLibrary {
                path,
                from: RecorderFrom::Installed,
            });
        }
    }
    let Some(cache) = &env.cache else {
        return Err(SetupError::Missing(format!(
            "{RECORDER} is not installed with this mpiq, and there is no cache directory to write \
             this mpiq's own copy into (neither XDG_CACHE_HOME nor HOME is set): name one in \
             MPIQ_RECORDER"
        )));
    };
    let path = write_once(cache, DIGEST, EMBEDDED).map_err(|(path, e)| {
        SetupError::Missing(format!(
            "cannot write this mpiq's flight recorder into {}: {e} (set XDG_CACHE_HOME to a \
             writable directory, or name a {RECORDER} in MPIQ_RECORDER)",
            path.display()
        ))
    })?;
    Ok(RecorderLibrary {
        path,
        from: RecorderFrom::Embedded,
    })
}

/// `bytes` as `<cache>/mpiq/recorder/<digest>/libmpiq_recorder.so`: the
/// file that is there when it holds the same bytes, else a new one written
/// under a temporary name in that directory and renamed over it (a job
/// that maps the old file keeps it; a reader never sees half a file).
/// Fails with the path it could not write.
fn write_once(cache: &Path, digest: &str, bytes: &[u8]) -> Result<PathBuf, (PathBuf, std::io::Error)> {
    /// Tells apart the temporary files of one process's threads.
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = cache.join("mpiq/recorder").join(digest);
    let path = dir.join(RECORDER);
    if std::fs::read(&path).is_ok_and(|b| b == bytes) {
        return Ok(path);
    }
    std::fs::create_dir_all(&dir).map_err(|e| (dir.clone(), e))?;
    let tmp = dir.join(format!(
        ".{RECORDER}.{}.{}.tmp",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o755)
        .open(&tmp)
        .and_then(|mut f| {
            f.write_all(bytes)?;
            f.sync_all()
        })
        .and_then(|()| std::fs::rename(&tmp, &path));
    match written {
        Ok(()) => Ok(path),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err((path, e))
        }
    }
}

/// How to run jobs with the flight recorder: comments on the launchers,
/// then one `export` line a job script can hold.
pub fn recorder_setup(env: &Environment) -> Result<String, SetupError> {
    let lib = recorder_library(env)?;
    can_preload(&lib.path)?;
    let quoted = mpiq::render::handoff::shell_quote(&lib.path.display().to_string());
    Ok(format!(
        "# mpiq: the flight recorder (from `mpiq setup recorder`), in front of your job's MPI\n\
         # (`mpiq run` preloads it by itself; these are for jobs started without it):\n\
         #   LD_PRELOAD={quoted} mpirun -n 4 ./app      (ranks on this node)\n\
         #   mpirun -x LD_PRELOAD={quoted} ...         (Open MPI, across nodes)\n\
         #   mpiexec -genv LD_PRELOAD {quoted} ...     (MPICH)\n\
         #   srun --export=ALL,LD_PRELOAD={quoted} ... (Slurm)\n\
         # or for the jobs of a shell or job script:\n\
         export LD_PRELOAD={quoted}${{LD_PRELOAD:+:$LD_PRELOAD}}\n"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let root = std::env::temp_dir().join(format!("mpiq-recorder-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        super::super::real(&root)
    }

    #[test]
    fn the_embedded_copy_is_written_once_and_mended() {
        let root = scratch("cache");
        let path = write_once(&root, "0123", b"first").unwrap();
        assert_eq!(path, root.join("mpiq/recorder/0123").join(RECORDER));
        assert_eq!(std::fs::read(&path).unwrap(), b"first");
        let inode = |p: &Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).unwrap());
        let before = inode(&path);
        // The same bytes: the file is used as it is.
        assert_eq!(write_once(&root, "0123", b"first").unwrap(), path);
        assert_eq!(inode(&path), before);
        // Other bytes (a damaged copy): replaced by a new file, not written
        // in place.
        std::fs::write(&path, b"damaged").unwrap();
        write_once(&root, "0123", b"first").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"first");
        assert_ne!(inode(&path), before);
        // No temporary file is left.
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names, [RECORDER]);
        // A directory that cannot be made: the path is in the error.
        std::fs::write(root.join("file"), b"").unwrap();
        let (at, _) = write_once(&root.join("file"), "0123", b"first").unwrap_err();
        assert!(at.starts_with(root.join("file")), "{}", at.display());
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn the_variable_then_the_installation_then_the_embedded_copy() {
        let root = scratch("lookup");
        let exe = root.join("some where/bin/mpiq");
        std::fs::create_dir_all(exe.parent().unwrap()).unwrap();
        std::fs::write(&exe, b"x").unwrap();
        let env = Environment {
            exe: Some(exe.clone()),
            cache: Some(root.join("cache")),
            ..Environment::default()
        };
        // Nothing installed: this mpiq's own copy, in the cache.
        let own = recorder_library(&env).unwrap();
        assert_eq!(own.from, RecorderFrom::Embedded);
        assert!(own.path.starts_with(root.join("cache/mpiq/recorder")));
        assert_eq!(std::fs::read(&own.path).unwrap(), EMBEDDED);
        assert_eq!(preload_library(&env).unwrap(), own);
        // Installed where LD_PRELOAD cannot name it: setup says so, run
        // takes the copy.
        let lib = root.join("some where/lib/mpiq").join(RECORDER);
        std::fs::create_dir_all(lib.parent().unwrap()).unwrap();
        std::fs::write(&lib, b"x").unwrap();
        assert_eq!(recorder_library(&env).unwrap().from, RecorderFrom::Installed);
        let why = recorder_setup(&env).unwrap_err().to_string();
        assert!(why.contains("LD_PRELOAD splits its list at spaces"), "{why}");
        assert_eq!(preload_library(&env).unwrap(), own);
        // Installed where it can: that one, for both.
        let exe = root.join("opt/bin/mpiq");
        let lib = root.join("opt/lib/mpiq").join(RECORDER);
        for f in [&exe, &lib] {
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, b"x").unwrap();
        }
        let env = Environment { exe: Some(exe), ..env };
        let found = preload_library(&env).unwrap();
        assert_eq!(
            (found.path.as_path(), found.from),
            (lib.as_path(), RecorderFrom::Installed)
        );
        let lines = recorder_setup(&env).unwrap();
        assert!(
            lines.ends_with(&format!(
                "export LD_PRELOAD={}${{LD_PRELOAD:+:$LD_PRELOAD}}\n",
                lib.display()
            )),
            "{lines}"
        );
        // MPIQ_RECORDER first, as given (a link stays a link); an error
        // when it names no file.
        let link = root.join("link.so");
        std::os::unix::fs::symlink(&lib, &link).unwrap();
        let env = Environment {
            recorder: Some(link.clone().into_os_string()),
            ..env
        };
        let found = preload_library(&env).unwrap();
        assert_eq!(
            (found.path.as_path(), found.from),
            (link.as_path(), RecorderFrom::Variable)
        );
        let env = Environment {
            recorder: Some(root.join("nothing.so").into_os_string()),
            ..env
        };
        assert!(matches!(preload_library(&env), Err(SetupError::BadVariable(_))));
        assert!(recorder_setup(&env)
            .unwrap_err()
            .to_string()
            .contains("MPIQ_RECORDER names"));
        // No cache directory and nothing installed: said so.
        let env = Environment {
            exe: None,
            cache: None,
            recorder: None,
            ..env
        };
        assert!(recorder_library(&env)
            .unwrap_err()
            .to_string()
            .contains("no cache directory"));
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn the_embedded_copy_is_a_shared_object_with_the_recorder() {
        assert_eq!(&EMBEDDED[..4], b"\x7fELF");
        assert!(memchr::memmem::find(EMBEDDED, b"mpiq_recorder").is_some());
        assert_eq!(DIGEST.len(), 16);
    }
}
