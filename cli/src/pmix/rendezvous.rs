//! Where a launcher's PMIx server is: the `libpmix` it maps, its TMPDIR,
//! and the rendezvous file the server wrote below it.

use std::path::{Path, PathBuf};

use super::PmixFailure;

/// Where the TMPDIR searched came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TmpdirSource {
    /// `MPIQ_PMIX_TMPDIR`.
    Override,
    /// The launcher's environment.
    Environ,
    /// The default, `/tmp` (the launcher has no TMPDIR).
    Default,
}

impl TmpdirSource {
    pub(super) fn describe(self) -> &'static str {
        match self {
            TmpdirSource::Override => "mpiq used MPIQ_PMIX_TMPDIR",
            TmpdirSource::Environ => {
                "mpiq used the launcher's TMPDIR from its environment; MPIQ_PMIX_TMPDIR names another directory"
            }
            TmpdirSource::Default => {
                "the launcher has no TMPDIR in its environment: mpiq used /tmp; MPIQ_PMIX_TMPDIR names another \
                 directory"
            }
        }
    }
}

/// The `libpmix.so*` that process `pid` maps, if any.
pub fn library_of(pid: i32) -> Option<PathBuf> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    let path = crate::maps::parse_maps(&maps)
        .into_iter()
        .filter(|e| !e.deleted)
        .filter_map(|e| e.path)
        .find(|p| {
            p.starts_with('/')
                && p.rsplit('/')
                    .next()
                    .is_some_and(|n| n == "libpmix.so" || n.starts_with("libpmix.so."))
        })?;
    // Through the launcher's root, should it run in another mount namespace.
    let own = PathBuf::from(&path);
    Some(if own.exists() {
        own
    } else {
        PathBuf::from(format!("/proc/{pid}/root{path}"))
    })
}

/// The launcher's TMPDIR and where it came from.
pub fn launcher_tmpdir(pid: i32) -> (PathBuf, TmpdirSource) {
    if let Some(dir) = std::env::var_os("MPIQ_PMIX_TMPDIR").filter(|d| !d.is_empty()) {
        return (PathBuf::from(dir), TmpdirSource::Override);
    }
    let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    match crate::job::environ_value(&env, "TMPDIR").filter(|v| v.starts_with('/')) {
        Some(dir) => (PathBuf::from(dir), TmpdirSource::Environ),
        None => (PathBuf::from("/tmp"), TmpdirSource::Default),
    }
}

/// Most directory entries looked at in the search for a rendezvous file.
const MAX_ENTRIES: usize = 20_000;
/// How deep below TMPDIR (PRRTE's session directory is one level down).
const MAX_DEPTH: usize = 3;

/// Whether `name` is a rendezvous file of the server of `pid`:
/// `pmix.HOST.tool.PID`.
fn is_rendezvous_name(name: &str, pid: i32) -> bool {
    name.strip_prefix("pmix.")
        .and_then(|r| r.strip_suffix(&format!(".tool.{pid}")))
        .is_some_and(|host| !host.is_empty())
}

/// What a rendezvous file says (`pmix_base_write_rndz_file`): the URI, the
/// version, the server's pid, its `uid:gid`, the time.
fn rendezvous_pid(text: &str) -> Option<i32> {
    text.lines().nth(2)?.trim().parse().ok()
}

/// The launcher's rendezvous file below `tmpdir` (breadth first, bounded),
/// checked to name its pid; else why there is none.
pub fn find_rendezvous(pid: i32, tmpdir: &Path, source: TmpdirSource) -> Result<PathBuf, PmixFailure> {
    let me = nix::unistd::Uid::effective().as_raw();
    let mut denied = None;
    let mut level = vec![tmpdir.to_path_buf()];
    let mut seen = 0;
    for _ in 0..=MAX_DEPTH {
        let mut next = Vec::new();
        for dir in level {
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            for entry in entries.flatten() {
                seen += 1;
                if seen > MAX_ENTRIES {
                    break;
                }
                let Ok(kind) = entry.file_type() else { continue };
                let path = entry.path();
                if kind.is_dir() {
                    next.push(path);
                    continue;
                }
                if !is_rendezvous_name(&entry.file_name().to_string_lossy(), pid) {
                    continue;
                }
                match std::fs::read_to_string(&path) {
                    Ok(text) if rendezvous_pid(&text) == Some(pid) => return Ok(path),
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                        use std::os::unix::fs::MetadataExt;
                        let owner = entry.metadata().map(|m| m.uid()).unwrap_or(u32::MAX);
                        denied = Some(PmixFailure::PermissionDenied { file: path, owner, me });
                    }
                    Err(_) => {}
                }
            }
        }
        level = next;
    }
    Err(denied.unwrap_or(PmixFailure::NoRendezvous {
        tmpdir: tmpdir.to_path_buf(),
        from: source,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendezvous_names() {
        assert!(is_rendezvous_name("pmix.vm.tool.15457", 15457));
        assert!(is_rendezvous_name("pmix.node1.example.org.tool.42", 42));
        // PMIx's own search would take these for pid 1545.
        assert!(!is_rendezvous_name("pmix.vm.tool.15457", 1545));
        assert!(!is_rendezvous_name("pmix.vm.tool", 1545));
        assert!(!is_rendezvous_name("pmix..tool.7", 7));
        assert!(!is_rendezvous_name("pmix.vm.tool.prterun-vm-7@0", 7));
        let text = "prterun-vm-15457@0.0;tcp4://127.0.0.1:39459\n5.0.10\n15457\n0:0\nTue Nov 24 08:08:32 2026\n";
        assert_eq!(rendezvous_pid(text), Some(15457));
        assert_eq!(rendezvous_pid("uri\n5.0.10\n"), None);
    }

    #[test]
    fn the_search_finds_the_file_of_this_pid_only() {
        let dir = std::env::temp_dir().join(format!("mpiq-pmix-unit-{}", std::process::id()));
        let session = dir.join("ompi.15457");
        std::fs::create_dir_all(&session).unwrap();
        std::fs::write(session.join("pmix.vm.tool.15457"), "u\nv\n15457\n0:0\n").unwrap();
        // A file whose name fits but that names another pid is not it.
        std::fs::write(session.join("pmix.vm.tool.1545"), "u\nv\n99\n0:0\n").unwrap();
        let found = find_rendezvous(15457, &dir, TmpdirSource::Environ).unwrap();
        assert_eq!(found, session.join("pmix.vm.tool.15457"));
        let e = find_rendezvous(1545, &dir, TmpdirSource::Environ).unwrap_err();
        assert!(
            e.to_string().starts_with(&format!(
                "PMIX_ERR_UNREACH: no rendezvous file for it in TMPDIR={} (mpiq used the launcher's TMPDIR",
                dir.display()
            )),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn no_pmix_library_here() {
        assert_eq!(library_of(std::process::id() as i32), None);
    }
}
