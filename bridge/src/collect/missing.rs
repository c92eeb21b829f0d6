//! Why an MPI process's queues cannot be read, said precisely and with the
//! fix: the one wording every front end shows ([`explain`]).
//!
//! The MPI library's file comes from the stacks (the object of an MPI entry
//! point's frame); what MPI it is, which version and how it was installed
//! come from files beside it: its `pkg-config` file, the `.dist-info` of a
//! PyPI wheel, or the Debian package that owns it (`/var/lib/dpkg`). Only
//! those files are read, and only on this path (when the queues are
//! missing); the answers are kept per library for the rest of the run.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use crate::snapshot::model::{MissingReason, QueuesMissing, ThreadStack};
use crate::stacks::position::{entry_point, is_mpi_library};

/// What is known of an MPI library file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Identity {
    /// `Open MPI 5.0.10`, `MPICH` (version unknown).
    mpi: Option<String>,
    /// `Debian package libmpich12 4.0.2-3`, `PyPI wheel mpich 4.3.2`.
    installed_by: Option<String>,
    /// The owning Debian package's name (for its `-dbgsym`).
    debian_package: Option<String>,
    /// The GNU build id, in hex.
    build_id: Option<String>,
}

/// The MPI library's file: the object of the first MPI entry point's frame
/// in any thread.
pub(crate) fn mpi_library(threads: &[ThreadStack]) -> Option<String> {
    threads.iter().flat_map(|t| &t.frames).find_map(|f| {
        f.object
            .as_deref()
            .filter(|_| entry_point(f).is_some())
            .map(str::to_string)
    })
}

/// The MPI library mapped by live process `pid` (`/proc/PID/maps`), when
/// no thread is in MPI; only if that pid runs `exe` on this machine (the
/// target could be another host's).
fn mapped_library(pid: u32, exe: &str) -> Option<String> {
    let running = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
    let same = std::fs::canonicalize(exe).ok().is_some_and(|e| e == running);
    if !same {
        return None;
    }
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    maps.lines().find_map(|l| {
        let path = l.split_whitespace().nth(5)?;
        is_mpi_library(path.rsplit('/').next()?).then(|| path.to_string())
    })
}

/// Fills in what can be learnt of the MPI behind `m` (its library from
/// `threads`) and returns the words for the process's `error`: what is
/// wrong, and the fix.
pub(crate) fn explain(m: &mut QueuesMissing, threads: &[ThreadStack], pid: Option<u32>, exe: &str) -> String {
    // A library that works but is blind or wrong is named by its own version
    // (quirks.rs): nothing of the machine's files is needed, and a replay of
    // the recording says the same as the live dump.
    let works = matches!(
        m.reason,
        MissingReason::TransportHidden | MissingReason::LibraryUntrusted
    );
    if works {
        return words(m, None);
    }
    if m.library.is_none() {
        m.library = mpi_library(threads).or_else(|| pid.and_then(|p| mapped_library(p, exe)));
        // The file itself, as every host names it: gdb gives the name the
        // loader opened (libmpi.so.12), the CLI the mapped file.
        if let Some(real) = m.library.as_deref().and_then(|l| std::fs::canonicalize(l).ok()) {
            m.library = Some(real.display().to_string());
        }
    }
    let id = m.library.as_deref().map(identity).unwrap_or_default();
    m.mpi = m.mpi.take().or(id.mpi.clone());
    m.installed_by = m.installed_by.take().or(id.installed_by.clone());
    if m.reason == MissingReason::NoDebugInfo {
        m.build_id = m.build_id.take().or(id.build_id.clone());
    }
    words(m, id.debian_package.as_deref())
}

/// The words for `m` (with `debian_package`, the owner of the library).
fn words(m: &QueuesMissing, debian_package: Option<&str>) -> String {
    let mpi = m.mpi.as_deref().unwrap_or("the MPI library");
    let library = m.library.as_deref().map(|l| format!(" ({l})")).unwrap_or_default();
    let installed = m
        .installed_by
        .as_deref()
        .map(|i| format!(", installed as {i}"))
        .unwrap_or_default();
    let tail = "its queues cannot be read by any debugger; the stacks still show where it is";
    match m.reason {
        MissingReason::NoDebuggerSupport => format!(
            "{mpi}{library}{installed} was built without message queue debugging support (it defines \
             none of MPIR_dll_name, mpimsgq_dll_locations or MPI2DD_info): {tail}. For queues, use an MPI \
             built with it (MPICH: configure --enable-debuginfo; Open MPI has it by default)"
        ),
        MissingReason::NoDebugLibrary => format!(
            "{mpi}{library}{installed} names its message queue debug library {}, which is not on this \
             machine (an MPI built elsewhere, such as a PyPI wheel, names the path of the machine that \
             built it): {tail}. If you have the debug library of the same MPI version, name it with \
             --dll FILE",
            m.debug_library.as_deref().unwrap_or("(unnamed)")
        ),
        MissingReason::TransportHidden => format!(
            "{mpi}{library}{installed} runs its messages on {}, whose requests its message queue debug \
             library cannot see (it sees only the ob1 and cm PMLs'): queues not visible with this \
             transport (run with `--mca pml ob1` to see them); the stacks still show where it is",
            m.transport
                .as_deref()
                .map(|t| format!("Open MPI's {t}"))
                .unwrap_or_else(|| "a transport".into())
        ),
        MissingReason::LibraryUntrusted => format!(
            "{mpi}{library}{installed} runs the {} device, whose message queue debug library in MPICH 4.0 \
             reads a receive's source, tag and communicator from fields its request type has not got \
             (MPICH issues 6131, 6141): its posted receives and unexpected messages cannot be trusted and \
             are not shown; its pending sends are; the stacks still show where it is. MPICH's ch3 device \
             (configure --with-device=ch3) has a debug library that reads them right",
            m.transport.as_deref().unwrap_or("ch4")
        ),
        MissingReason::NoDebugInfo => {
            let ty = m
                .missing_type
                .as_deref()
                .map(|t| format!(" (the type '{t}' is missing)"))
                .unwrap_or_default();
            let file = m
                .build_id
                .as_deref()
                .filter(|b| b.len() > 2)
                .map(|b| format!(", /usr/lib/debug/.build-id/{}/{}.debug", &b[..2], &b[2..]))
                .unwrap_or_default();
            let id = m
                .build_id
                .as_deref()
                .map(|b| format!(" (build id {b}{file})"))
                .unwrap_or_default();
            let fix = match debian_package {
                Some(p) => format!(
                    "install its debug symbols, Debian's package {p}-dbgsym from the distribution's debug \
                     archive, or use an MPI built with -g"
                ),
                None => "install its separate debug file or use an MPI built with -g".to_string(),
            };
            format!(
                "{mpi}{library}{installed} has no debug information for its message queue debug \
                 library{ty}: it is stripped and its separate debug file{id} is not installed, so its \
                 queues cannot be read; the stacks still show where it is. To read the queues, {fix}"
            )
        }
    }
}

/// What is known of the MPI library `path`, once per run.
fn identity(path: &str) -> Identity {
    static KNOWN: OnceLock<Mutex<HashMap<String, Identity>>> = OnceLock::new();
    let known = KNOWN.get_or_init(Default::default);
    if let Some(id) = known.lock().ok().and_then(|k| k.get(path).cloned()) {
        return id;
    }
    let id = identify(Path::new(path));
    if let Ok(mut k) = known.lock() {
        k.insert(path.to_string(), id.clone());
    }
    id
}

fn identify(path: &Path) -> Identity {
    let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let family = family(&real);
    let mut id = Identity {
        build_id: build_id(&real),
        ..Identity::default()
    };
    let libdir = real.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut version = pkg_config_version(&libdir, family);
    if let Some((package, v)) = wheel(&libdir, family) {
        id.installed_by = Some(format!("PyPI wheel {package} {v}"));
        version = version.or(Some(v));
    } else if let Some((package, v)) = dpkg_owner(path, &real) {
        id.installed_by = Some(format!("Debian package {package} {v}"));
        id.debian_package = Some(package.split(':').next().unwrap_or(&package).to_string());
        if version.is_none() {
            // The upstream part of a Debian version: `4.1.4-3+b1` → `4.1.4`.
            let upstream = v.split(':').next_back().unwrap_or(&v);
            version = upstream.rsplit_once('-').map(|(u, _)| u.to_string());
        }
    }
    id.mpi = match (family, version) {
        (Some(f), Some(v)) => Some(format!("{} {v}", f.name())),
        (Some(f), None) => Some(f.name().to_string()),
        (None, _) => None,
    };
    id
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    OpenMpi,
    Mpich,
}

impl Family {
    fn name(self) -> &'static str {
        match self {
            Family::OpenMpi => "Open MPI",
            Family::Mpich => "MPICH",
        }
    }
    /// The PyPI project and the pkg-config names.
    fn packages(self) -> (&'static str, &'static [&'static str]) {
        match self {
            Family::OpenMpi => ("openmpi", &["ompi.pc", "ompi-c.pc"]),
            Family::Mpich => ("mpich", &["mpich.pc"]),
        }
    }
}

/// Which MPI a library is, by the text of its `MPI_Get_library_version`.
fn family(path: &Path) -> Option<Family> {
    let bytes = std::fs::read(path).ok()?;
    let has = |needle: &[u8]| bytes.windows(needle.len()).any(|w| w == needle);
    if has(b"Open MPI v") {
        Some(Family::OpenMpi)
    } else if has(b"MPICH Version:") {
        Some(Family::Mpich)
    } else {
        None
    }
}

/// `Version:` of the MPI's pkg-config file in `libdir/pkgconfig`.
fn pkg_config_version(libdir: &Path, family: Option<Family>) -> Option<String> {
    let (_, names) = family?.packages();
    names.iter().find_map(|n| {
        let text = std::fs::read_to_string(libdir.join("pkgconfig").join(n)).ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix("Version:"))
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    })
}

/// The PyPI wheel the library came with: `<venv>/lib/libmpi.so` beside
/// `<venv>/lib/python3.X/site-packages/<project>-<version>.dist-info`.
fn wheel(libdir: &Path, family: Option<Family>) -> Option<(String, String)> {
    let (project, _) = family?.packages();
    for entry in std::fs::read_dir(libdir).ok()?.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().starts_with("python") {
            continue;
        }
        let site = entry.path().join("site-packages");
        for info in std::fs::read_dir(&site).into_iter().flatten().flatten() {
            let n = info.file_name().to_string_lossy().into_owned();
            if let Some(v) = n
                .strip_prefix(&format!("{project}-"))
                .and_then(|r| r.strip_suffix(".dist-info"))
            {
                return Some((project.to_string(), v.to_string()));
            }
        }
    }
    None
}

/// The Debian package that installed `path` (as named, or as resolved),
/// with its version.
fn dpkg_owner(path: &Path, real: &Path) -> Option<(String, String)> {
    let info = Path::new("/var/lib/dpkg/info");
    let wanted: Vec<String> = [path, real]
        .iter()
        .flat_map(|p| {
            let s = p.to_string_lossy().into_owned();
            // Debian 12 merges /lib into /usr/lib: the lists may name either.
            let other = s
                .strip_prefix("/usr")
                .map(str::to_string)
                .unwrap_or_else(|| format!("/usr{s}"));
            [s, other]
        })
        .collect();
    let mut owner = None;
    for entry in std::fs::read_dir(info).ok()?.flatten() {
        let p: PathBuf = entry.path();
        if p.extension().and_then(|e| e.to_str()) != Some("list") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&p) else {
            continue;
        };
        if text.lines().any(|l| wanted.iter().any(|w| w == l)) {
            owner = p.file_stem().map(|s| s.to_string_lossy().into_owned());
            break;
        }
    }
    let owner = owner?;
    let bare = owner.split(':').next().unwrap_or(&owner).to_string();
    let status = std::fs::read_to_string("/var/lib/dpkg/status").ok()?;
    let version = status.split("\n\n").find_map(|para| {
        let mut lines = para.lines();
        let pkg = lines.clone().find_map(|l| l.strip_prefix("Package: "))?;
        if pkg != bare {
            return None;
        }
        lines.find_map(|l| l.strip_prefix("Version: ")).map(str::to_string)
    })?;
    Some((bare, version))
}

/// The GNU build id of an ELF64 little-endian file, from its section
/// headers (`SHT_NOTE`, note type 3, owner `GNU`).
fn build_id(path: &Path) -> Option<String> {
    let bytes = std::fs::read(path).ok()?;
    let at = |off: usize, n: usize| bytes.get(off..off + n);
    let u16_at = |off: usize| at(off, 2).map(|b| u16::from_le_bytes([b[0], b[1]]) as usize);
    let u32_at = |off: usize| at(off, 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
    let u64_at = |off: usize| at(off, 8).map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])) as usize);
    if at(0, 4)? != b"\x7fELF" || *bytes.get(4)? != 2 || *bytes.get(5)? != 1 {
        return None;
    }
    let (shoff, shentsize, shnum) = (u64_at(0x28)?, u16_at(0x3a)?, u16_at(0x3c)?);
    for i in 0..shnum {
        let sh = shoff + i * shentsize;
        if u32_at(sh + 4)? != 7 {
            continue; // not SHT_NOTE
        }
        let (mut off, end) = (u64_at(sh + 0x18)?, u64_at(sh + 0x18)? + u64_at(sh + 0x20)?);
        while off + 12 <= end {
            let (namesz, descsz, kind) = (u32_at(off)?, u32_at(off + 4)?, u32_at(off + 8)?);
            let name = off + 12;
            let desc = name + namesz.div_ceil(4) * 4;
            if kind == 3 && at(name, namesz)?.starts_with(b"GNU") {
                return Some(at(desc, descsz)?.iter().map(|b| format!("{b:02x}")).collect());
            }
            off = desc + descsz.div_ceil(4) * 4;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::model::Frame;

    #[test]
    fn the_library_is_the_object_of_an_mpi_entry_point() {
        let frame = |f: &str, o: &str| Frame {
            function: Some(f.into()),
            object: Some(o.into()),
            ..Frame::default()
        };
        let t = ThreadStack {
            frames: vec![
                frame("poll", "/lib/libc.so.6"),
                frame("PMPI_Barrier", "/x/libmpi.so.40"),
                frame("main", "/a"),
            ],
            ..ThreadStack::default()
        };
        assert_eq!(mpi_library(&[t]).as_deref(), Some("/x/libmpi.so.40"));
        assert_eq!(mpi_library(&[]), None);
    }

    #[test]
    fn each_reason_says_what_is_wrong_and_the_fix() {
        let mut m = QueuesMissing::new(MissingReason::NoDebuggerSupport);
        m.mpi = Some("MPICH 4.3.2".into());
        let w = words(&m, None);
        assert!(
            w.starts_with("MPICH 4.3.2 was built without message queue debugging support"),
            "{w}"
        );
        assert!(w.contains("--enable-debuginfo"), "{w}");
        let mut m = QueuesMissing::new(MissingReason::NoDebugLibrary);
        m.debug_library = Some("/opt/x/libompi_dbg_msgq.so".into());
        let w = words(&m, None);
        assert!(
            w.contains("/opt/x/libompi_dbg_msgq.so, which is not on this machine"),
            "{w}"
        );
        assert!(w.contains("--dll FILE"), "{w}");
        let mut m = QueuesMissing::new(MissingReason::NoDebugInfo);
        m.missing_type = Some("opal_list_item_t".into());
        m.build_id = Some("abcdef".into());
        let w = words(&m, Some("libopenmpi3"));
        assert!(w.contains("'opal_list_item_t'"), "{w}");
        assert!(w.contains("/usr/lib/debug/.build-id/ab/cdef.debug"), "{w}");
        assert!(w.contains("libopenmpi3-dbgsym"), "{w}");
        for w in [w, words(&QueuesMissing::new(MissingReason::NoDebuggerSupport), None)] {
            assert!(!w.contains("not an MPI process"), "{w}");
        }
    }

    /// The test's own executable has a build id (Rust links with one on
    /// Linux by default) or none; never a wrong one.
    #[test]
    fn build_ids_are_read_from_the_note_section() {
        let exe = std::env::current_exe().unwrap();
        if let Some(id) = build_id(&exe) {
            assert!(id.len() >= 16 && id.chars().all(|c| c.is_ascii_hexdigit()), "{id}");
        }
        assert_eq!(build_id(Path::new("/nonexistent")), None);
        assert_eq!(build_id(Path::new("/proc/self/status")), None);
    }
}
