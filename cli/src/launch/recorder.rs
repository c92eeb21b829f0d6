//! mpiq's flight recorder in the job `mpiq run` starts (unless
//! `--no-recorder`): its library ([`crate::handoff::recorder`]) appended to
//! `LD_PRELOAD` in the command's environment, after the user's own and
//! never twice (a `libmpiq_recorder.so` there already is left alone).
//!
//! Every process of the job inherits it, launchers included, where it
//! records nothing (it records only once it finds an MPI). The ranks get it
//! as each launcher passes its environment on:
//!
//! - ranks on this node inherit it from any launcher;
//! - MPICH's hydra (`mpiexec`) and Slurm's `srun` pass the whole
//!   environment to every node (unless told otherwise: `srun --export`
//!   without `ALL`, `mpiexec -genvnone`);
//! - Open MPI's `mpirun` passes its ranks on other nodes only the variables
//!   it is told to. Open MPI 5 (PRRTE's `prterun`, `mpirun` its front):
//!   `OMPI_MCA_mca_base_env_list` names `LD_PRELOAD` (appended to the
//!   user's list), which 5.0's `schizo/ompi` reads along with any `-x`.
//!   Open MPI 4 (ORTE's `orterun`): that variable and a `-x` on the command
//!   line are a fatal error there ("both the -x method and ...
//!   mca_base_env_list"), so `-x LD_PRELOAD` goes on the command line
//!   instead, right after the program, unless the user's list is set (then
//!   appended to it, with its delimiter) or the command line gives
//!   `mca_base_env_list` or `-x LD_PRELOAD` itself.
//!
//! The launcher is told by the command's executable (found on `PATH`,
//! links followed), when its name is a starter's: one that links
//! `libopen-rte` is ORTE's; one that links `libprrte` or has a `prterun`
//! beside it is PRRTE's (Open MPI 5's `mpirun` links neither). A command
//! that starts the launcher itself (`sh -c`, `make`) changes only
//! `LD_PRELOAD`: ranks of Open MPI's `mpirun` on other nodes then go
//! without, and the report says which ranks have no recorder.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt as _, OsStringExt as _};
use std::path::{Path, PathBuf};

use mpiq::Snapshot;

use crate::handoff::recorder::RECORDER;
use crate::handoff::RecorderLibrary;

/// The variable Open MPI's launchers read the names of the variables to
/// pass to every rank from.
const ENV_LIST: &str = "OMPI_MCA_mca_base_env_list";
/// Open MPI 4's delimiter of that list (5.0 always splits at `;`).
const ENV_LIST_DELIMITER: &str = "OMPI_MCA_mca_base_env_list_delimiter";

/// How the command passes its environment to ranks on other nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Launcher {
    /// Open MPI 4's `mpirun` (ORTE's `orterun`).
    Orte,
    /// Open MPI 5's `mpirun`, PRRTE's `prterun`.
    Prrte,
    /// Anything else: hydra, srun, a wrapper, the program itself.
    Other,
}

/// The recorder, preloaded into the job.
#[derive(Clone, Debug)]
pub struct Preload {
    /// Its library.
    pub library: RecorderLibrary,
    /// The variables to set in the command's environment.
    pub env: Vec<(OsString, OsString)>,
    /// The command to run: the user's, with `-x LD_PRELOAD` for Open MPI
    /// 4's `mpirun`.
    pub command: Vec<OsString>,
    /// What was done, in words (`mpiq run -v`).
    pub how: String,
}

/// What the environment says, as [`plan`] reads it.
#[derive(Clone, Debug, Default)]
pub struct Inherited {
    /// `LD_PRELOAD`.
    pub ld_preload: Option<OsString>,
    /// `OMPI_MCA_mca_base_env_list`.
    pub env_list: Option<OsString>,
    /// `OMPI_MCA_mca_base_env_list_delimiter`.
    pub delimiter: Option<OsString>,
}

impl Inherited {
    /// This process's.
    pub fn current() -> Inherited {
        Inherited {
            ld_preload: std::env::var_os("LD_PRELOAD"),
            env_list: std::env::var_os(ENV_LIST),
            delimiter: std::env::var_os(ENV_LIST_DELIMITER),
        }
    }
}

/// The recorder in `command`'s job, started with this process's
/// environment.
pub fn preload(command: &[OsString], library: RecorderLibrary) -> Preload {
    let launcher = command.first().map_or(Launcher::Other, |p| launcher_of(p));
    plan(command, library, &Inherited::current(), launcher)
}

/// The recorder in `command`'s job, whose launcher is `launcher`, in the
/// environment `inherited`.
pub fn plan(command: &[OsString], library: RecorderLibrary, inherited: &Inherited, launcher: Launcher) -> Preload {
    let mut env = Vec::new();
    let mut command = command.to_vec();
    let mut how = Vec::new();
    match with_library(inherited.ld_preload.as_deref(), &library.path) {
        Some(value) => {
            env.push(("LD_PRELOAD".into(), value));
            how.push(format!("LD_PRELOAD += {}", library.words()));
        }
        None => how.push("LD_PRELOAD names a libmpiq_recorder.so already: kept as it is".into()),
    }
    let args = command.get(1..).unwrap_or_default();
    match launcher {
        Launcher::Prrte => {
            if let Some(list) = listed(inherited.env_list.as_deref(), ";") {
                how.push(format!(
                    "{ENV_LIST}={} (Open MPI 5's mpirun: to every node)",
                    list.to_string_lossy()
                ));
                env.push((ENV_LIST.into(), list));
            }
        }
        Launcher::Orte if inherited.env_list.is_some() => {
            let delimiter = inherited
                .delimiter
                .as_deref()
                .and_then(OsStr::to_str)
                .filter(|d| d.chars().count() == 1)
                .unwrap_or(";");
            if let Some(list) = listed(inherited.env_list.as_deref(), delimiter) {
                how.push(format!(
                    "{ENV_LIST}={} (Open MPI 4's mpirun: to every node)",
                    list.to_string_lossy()
                ));
                env.push((ENV_LIST.into(), list));
            }
        }
        Launcher::Orte if forwards_ld_preload(args) => {}
        Launcher::Orte
            if args
                .iter()
                .any(|a| memchr::memmem::find(a.as_bytes(), b"mca_base_env_list").is_some()) =>
        {
            how.push(
                "Open MPI 4's mpirun is given mca_base_env_list, which -x may not join: LD_PRELOAD \
             reaches its ranks on this node only"
                    .into(),
            )
        }
        Launcher::Orte => {
            command.splice(1..1, ["-x".into(), "LD_PRELOAD".into()]);
            how.push("-x LD_PRELOAD after the program (Open MPI 4's mpirun: to every node)".into());
        }
        Launcher::Other => {}
    }
    Preload {
        library,
        env,
        command,
        how: how.join("; "),
    }
}

/// `LD_PRELOAD` with `lib` after what it holds, or `None` when it names a
/// `libmpiq_recorder.so` already. ld.so splits the list at spaces and
/// colons.
pub fn with_library(existing: Option<&OsStr>, lib: &Path) -> Option<OsString> {
    let existing = existing.map(OsStr::as_bytes).unwrap_or_default();
    let entries: Vec<&[u8]> = existing
        .split(|&b| b == b':' || b == b' ')
        .filter(|e| !e.is_empty())
        .collect();
    if entries
        .iter()
        .any(|e| Path::new(OsStr::from_bytes(e)).file_name() == Some(OsStr::new(RECORDER)))
    {
        return None;
    }
    let mut value = entries.join(&b':');
    if !value.is_empty() {
        value.push(b':');
    }
    value.extend_from_slice(lib.as_os_str().as_bytes());
    Some(OsString::from_vec(value))
}

/// Open MPI's list of variables for every rank with `LD_PRELOAD` in it
/// (appended with `delimiter`), or `None` when it has it already.
fn listed(existing: Option<&OsStr>, delimiter: &str) -> Option<OsString> {
    let existing = existing.map(OsStr::as_bytes).unwrap_or_default();
    let has = existing
        .split(|b| delimiter.as_bytes().contains(b))
        .any(|t| t == b"LD_PRELOAD" || t.starts_with(b"LD_PRELOAD="));
    if has {
        return None;
    }
    let mut value = existing.to_vec();
    if !value.is_empty() {
        value.extend_from_slice(delimiter.as_bytes());
    }
    value.extend_from_slice(b"LD_PRELOAD");
    Some(OsString::from_vec(value))
}

/// Whether the arguments pass `LD_PRELOAD` on themselves: `-x LD_PRELOAD`
/// or `-x LD_PRELOAD=...`.
fn forwards_ld_preload(args: &[OsString]) -> bool {
    args.windows(2).any(|w| {
        let value = w[1].as_bytes();
        matches!(w[0].as_bytes(), b"-x" | b"--x") && (value == b"LD_PRELOAD" || value.starts_with(b"LD_PRELOAD="))
    })
}

/// The launcher `program` is: none of Open MPI's unless its name is a
/// starter's ([`super::starter::is_starter_name`], as given or of the file
/// it runs); Open MPI 4's when that file links `libopen-rte` (ORTE);
/// Open MPI 5's when it links `libprrte` or has a `prterun` beside it (Open
/// MPI 5's `mpirun` links neither ORTE nor PRRTE, and the PyPI wheel's is a
/// small program that runs another).
pub fn launcher_of(program: &OsStr) -> Launcher {
    let Some((found, file)) = resolve(program) else {
        return Launcher::Other;
    };
    let named = [Path::new(program).file_name(), file.file_name()]
        .into_iter()
        .flatten()
        .any(|n| n.to_str().is_some_and(super::starter::is_starter_name));
    if !named {
        return Launcher::Other;
    }
    let needed = std::fs::read(&file).map(|d| needed_libraries(&d)).unwrap_or_default();
    let beside = |p: &Path| p.parent().is_some_and(|d| d.join("prterun").is_file());
    if needed.iter().any(|n| n.starts_with(b"libopen-rte.so")) {
        Launcher::Orte
    } else if needed.iter().any(|n| n.starts_with(b"libprrte.so")) || beside(&found) || beside(&file) {
        Launcher::Prrte
    } else {
        Launcher::Other
    }
}

/// The file `program` runs, as found (itself when it names a directory,
/// else the first executable file of that name on `PATH`) and with its
/// links followed.
fn resolve(program: &OsStr) -> Option<(PathBuf, PathBuf)> {
    let path = Path::new(program);
    let found = if program.as_bytes().contains(&b'/') {
        Some(path.to_path_buf())
    } else {
        let dirs = std::env::var_os("PATH")?;
        std::env::split_paths(&dirs).map(|d| d.join(path)).find(|p| {
            std::fs::metadata(p)
                .is_ok_and(|m| m.is_file() && std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0)
        })
    }?;
    let file = found.canonicalize().ok()?;
    Some((found, file))
}

/// The `DT_NEEDED` entries of a 64-bit ELF object; none when it is not one.
fn needed_libraries(data: &[u8]) -> Vec<Vec<u8>> {
    use object::elf::{FileHeader64, DT_NEEDED};
    use object::read::elf::{Dyn as _, FileHeader as _};
    use object::Endianness;
    let Ok(header) = FileHeader64::<Endianness>::parse(data) else {
        return Vec::new();
    };
    let Ok(endian) = header.endian() else {
        return Vec::new();
    };
    let Ok(sections) = header.sections(endian, data) else {
        return Vec::new();
    };
    let Ok(Some((entries, link))) = sections.dynamic(endian, data) else {
        return Vec::new();
    };
    let Ok(strings) = sections.strings(endian, data, link) else {
        return Vec::new();
    };
    entries
        .iter()
        .filter(|d| d.tag32(endian) == Some(DT_NEEDED))
        .filter_map(|d| d.string(endian, strings).ok())
        .map(<[u8]>::to_vec)
        .collect()
}

/// The report's line on the ranks that were read without the recorder that
/// was preloaded (none when every rank has it): a statically linked
/// program, or a launcher that did not pass `LD_PRELOAD` on. A rank whose
/// recorder could not be read has a message saying so instead; a rank that
/// could not be read at all is not counted.
pub fn missing_line(snapshot: &Snapshot, library: &Path) -> Option<String> {
    let read: Vec<&mpiq::ProcessSnapshot> = snapshot
        .processes
        .iter()
        .filter(|p| p.stacks.as_ref().is_some_and(|s| !s.threads.is_empty()))
        .collect();
    let missing: Vec<i64> = read
        .iter()
        .filter(|p| p.recorder.is_none() && !p.messages.iter().any(|m| m.contains("flight recorder")))
        .map(|p| p.world_rank.map_or(-1, i64::from))
        .collect();
    if missing.is_empty() {
        return None;
    }
    let of = if missing.len() == read.len() {
        "any rank".to_string()
    } else {
        mpiq::stacks::ranks_text(&missing)
    };
    Some(format!(
        "flight recorder: preloaded ({}), but not found in {of}: a statically linked program, or a \
         launcher that did not pass LD_PRELOAD on to them (srun --export without ALL, mpiexec \
         -genvnone, Open MPI's mpirun started by a wrapper: -x LD_PRELOAD), or a node without that file",
        library.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handoff::recorder::RecorderFrom;

    fn lib() -> RecorderLibrary {
        RecorderLibrary {
            path: "/c/mpiq/recorder/ab/libmpiq_recorder.so".into(),
            from: RecorderFrom::Embedded,
        }
    }

    fn words(s: &[&str]) -> Vec<OsString> {
        s.iter().map(OsString::from).collect()
    }

    fn env_of(p: &Preload, key: &str) -> Option<String> {
        p.env
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.to_string_lossy().into_owned())
    }

    #[test]
    fn ld_preload_gets_the_library_last_and_once() {
        let lib = Path::new("/c/libmpiq_recorder.so");
        let s = |v: Option<OsString>| v.map(|v| v.to_string_lossy().into_owned());
        assert_eq!(s(with_library(None, lib)), Some("/c/libmpiq_recorder.so".into()));
        assert_eq!(
            s(with_library(Some(OsStr::new("")), lib)),
            Some("/c/libmpiq_recorder.so".into())
        );
        assert_eq!(
            s(with_library(Some(OsStr::new("/a/x.so /b/y.so:")), lib)),
            Some("/a/x.so:/b/y.so:/c/libmpiq_recorder.so".into())
        );
        // A recorder of the user's, or this one: left as it is.
        assert_eq!(
            with_library(Some(OsStr::new("/a/x.so:/c/libmpiq_recorder.so")), lib),
            None
        );
        assert_eq!(
            with_library(Some(OsStr::new("/elsewhere/libmpiq_recorder.so")), lib),
            None
        );
        assert_eq!(with_library(Some(OsStr::new("libmpiq_recorder.so /a/x.so")), lib), None);
        assert!(with_library(Some(OsStr::new("/a/libmpiq_recorder.so.old")), lib).is_some());
    }

    #[test]
    fn open_mpi_5_gets_the_variable_list() {
        let cmd = words(&["mpirun", "-x", "FOO", "-n", "4", "./a"]);
        let p = plan(&cmd, lib(), &Inherited::default(), Launcher::Prrte);
        assert_eq!(p.command, cmd);
        assert_eq!(env_of(&p, ENV_LIST).as_deref(), Some("LD_PRELOAD"));
        let user = Inherited {
            env_list: Some("A;B=1".into()),
            ld_preload: Some("/a/x.so".into()),
            ..Inherited::default()
        };
        let p = plan(&cmd, lib(), &user, Launcher::Prrte);
        assert_eq!(env_of(&p, ENV_LIST).as_deref(), Some("A;B=1;LD_PRELOAD"));
        assert_eq!(
            env_of(&p, "LD_PRELOAD").as_deref(),
            Some("/a/x.so:/c/mpiq/recorder/ab/libmpiq_recorder.so")
        );
        let listed = Inherited {
            env_list: Some("A;LD_PRELOAD".into()),
            ..Inherited::default()
        };
        assert_eq!(env_of(&plan(&cmd, lib(), &listed, Launcher::Prrte), ENV_LIST), None);
    }

    #[test]
    fn open_mpi_4_gets_x_unless_a_list_or_its_own() {
        let cmd = words(&["/usr/bin/mpirun", "-x", "FOO", "-n", "4", "./a"]);
        let p = plan(&cmd, lib(), &Inherited::default(), Launcher::Orte);
        assert_eq!(
            p.command,
            words(&["/usr/bin/mpirun", "-x", "LD_PRELOAD", "-x", "FOO", "-n", "4", "./a"])
        );
        assert_eq!(env_of(&p, ENV_LIST), None);
        // The user's list (with its delimiter): appended to, no -x.
        let user = Inherited {
            env_list: Some("A,B".into()),
            delimiter: Some(",".into()),
            ..Inherited::default()
        };
        let p = plan(&words(&["mpirun", "-n", "2", "./a"]), lib(), &user, Launcher::Orte);
        assert_eq!(p.command, words(&["mpirun", "-n", "2", "./a"]));
        assert_eq!(env_of(&p, ENV_LIST).as_deref(), Some("A,B,LD_PRELOAD"));
        // -x LD_PRELOAD given, or mca_base_env_list on the command line:
        // the command as it is.
        for cmd in [
            words(&["mpirun", "-x", "LD_PRELOAD", "./a"]),
            words(&["mpirun", "-x", "LD_PRELOAD=/x.so", "./a"]),
            words(&["mpirun", "--mca", "mca_base_env_list", "A", "./a"]),
        ] {
            let p = plan(&cmd, lib(), &Inherited::default(), Launcher::Orte);
            assert_eq!(p.command, cmd);
            assert_eq!(env_of(&p, ENV_LIST), None);
            assert!(env_of(&p, "LD_PRELOAD").is_some());
        }
    }

    #[test]
    fn other_launchers_get_ld_preload_only() {
        let cmd = words(&["srun", "-n", "4", "./a"]);
        let p = plan(&cmd, lib(), &Inherited::default(), Launcher::Other);
        assert_eq!(p.command, cmd);
        assert_eq!(p.env.len(), 1, "{:?}", p.env);
        assert_eq!(
            env_of(&p, "LD_PRELOAD").as_deref(),
            Some("/c/mpiq/recorder/ab/libmpiq_recorder.so")
        );
    }

    #[test]
    fn the_report_names_the_ranks_read_without_the_recorder() {
        let rank = |r: i32, read: bool, recorder: bool, message: Option<&str>| {
            let mut p = mpiq::ProcessSnapshot::new(Some(100 + r as u32), Some(r), "/a");
            if read {
                p.stacks = Some(mpiq::Stacks {
                    threads: vec![mpiq::ThreadStack::default()],
                    ..mpiq::Stacks::default()
                });
            }
            if recorder {
                p.recorder = Some(mpiq::snapshot::recorder::Recording::default());
            }
            p.messages.extend(message.map(String::from));
            p
        };
        let lib = Path::new("/c/libmpiq_recorder.so");
        let mut snap = Snapshot {
            processes: vec![rank(0, true, true, None), rank(1, true, true, None)],
            ..Snapshot::default()
        };
        assert_eq!(missing_line(&snap, lib), None);
        // Rank 2 has none; rank 3's could not be read; rank 4 was not read.
        snap.processes.extend([
            rank(2, true, false, None),
            rank(3, true, false, Some("the flight recorder at 0x10 cannot be read: ...")),
            rank(4, false, false, None),
        ]);
        let line = missing_line(&snap, lib).unwrap();
        assert!(
            line.starts_with("flight recorder: preloaded (/c/libmpiq_recorder.so), but not found in rank 2:"),
            "{line}"
        );
        snap.processes
            .retain(|p| p.world_rank != Some(0) && p.world_rank != Some(1));
        snap.processes.retain(|p| p.world_rank != Some(3));
        let line = missing_line(&snap, lib).unwrap();
        assert!(line.contains("but not found in any rank:"), "{line}");
    }

    #[test]
    fn launchers_are_told_by_their_names_and_what_they_link() {
        // This test binary links no MPI.
        let me = std::env::current_exe().unwrap();
        assert_eq!(launcher_of(me.as_os_str()), Launcher::Other);
        assert_eq!(launcher_of(OsStr::new("sh")), Launcher::Other);
        assert_eq!(launcher_of(OsStr::new("/nonexistent/mpirun")), Launcher::Other);
        assert!(!needed_libraries(&std::fs::read(&me).unwrap()).is_empty());
        assert!(needed_libraries(b"#!/bin/sh\n").is_empty());
        // An mpirun with a prterun beside it is Open MPI 5's; a program of
        // another name there is not a launcher.
        let dir = std::env::temp_dir().join(format!("mpiq-launchers-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(&me, dir.join("mpirun")).unwrap();
        std::fs::copy(&me, dir.join("app")).unwrap();
        assert_eq!(launcher_of(dir.join("mpirun").as_os_str()), Launcher::Other);
        std::fs::write(dir.join("prterun"), b"").unwrap();
        assert_eq!(launcher_of(dir.join("mpirun").as_os_str()), Launcher::Prrte);
        assert_eq!(launcher_of(dir.join("app").as_os_str()), Launcher::Other);
        let _ = std::fs::remove_dir_all(&dir);
        // Debian's Open MPI 4.1, where it is installed.
        if Path::new("/usr/bin/orterun").is_file() {
            assert_eq!(launcher_of(OsStr::new("/usr/bin/orterun")), Launcher::Orte);
        }
    }
}
