//! Which process of the job is its starter, the process `mpiq job
//! --starter` reads: the command itself when it is one, else the first
//! process under it (outermost first) that is one. A wrapper (`bash -c
//! 'mpirun ...'`, `make test`, a test runner) is looked through.

use crate::procs::{descendants, Stat};

/// The executables that start MPI jobs (`/proc/PID/exe`'s file name, or
/// the command name): Open MPI's `mpirun`/`mpiexec` (`orterun`; Open MPI
/// 5's `prterun`), MPICH's and Intel MPI's hydra (`mpiexec.hydra`), Slurm's
/// `srun`, and Debian's alternatives such as `mpirun.openmpi` and
/// `mpiexec.mpich`.
pub fn is_starter_name(name: &str) -> bool {
    matches!(
        name,
        "mpirun" | "mpiexec" | "mpiexec.hydra" | "orterun" | "prterun" | "srun"
    ) || name.starts_with("mpirun.")
        || name.starts_with("mpiexec.")
}

/// The starter found, and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Starter {
    /// Its pid.
    pub pid: i32,
    /// Its executable's file name.
    pub name: String,
    /// How it was recognised, for the report.
    pub how: &'static str,
}

fn exe_name(pid: i32, stat: Option<&Stat>) -> String {
    std::fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .or_else(|| stat.map(|s| s.comm.clone()))
        .unwrap_or_default()
}

/// Whether a process maps an object that defines `MPIR_proctable` and no
/// MPI library (a rank of Open MPI maps `libopen-rte`, which defines it,
/// too).
fn has_proctable(pid: i32) -> bool {
    let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
        return false;
    };
    let files = crate::maps::group_files(&crate::maps::parse_maps(&maps));
    let is_rank = files.iter().any(|f| {
        f.path
            .rsplit('/')
            .next()
            .is_some_and(mpiq::stacks::position::is_mpi_library)
    });
    !is_rank
        && files.iter().any(|f| {
            crate::cache::open_object(std::path::Path::new(&f.path))
                .is_ok_and(|o| o.data_symbol("MPIR_proctable").is_some())
        })
}

/// The job's starter: `root` (the command mpiq run started) if it is one,
/// else the first process under it that is one, the outermost first: by
/// executable name ([`is_starter_name`]), then by an `MPIR_proctable` in
/// a process that is not an MPI rank.
pub fn find(root: i32) -> Option<Starter> {
    let mut all: Vec<(i32, Option<Stat>)> = vec![(root, Stat::of(root))];
    all.extend(descendants(&[root]).into_iter().map(|(p, s)| (p.pid, Some(s))));
    all.retain(|(_, s)| s.as_ref().is_some_and(|s| !s.exited()));
    let how = |pid: i32, by: &'static str, under: &'static str| if pid == root { by } else { under };
    if let Some((pid, s)) = all.iter().find(|(pid, s)| {
        is_starter_name(&exe_name(*pid, s.as_ref())) || s.as_ref().is_some_and(|s| is_starter_name(&s.comm))
    }) {
        return Some(Starter {
            pid: *pid,
            name: exe_name(*pid, s.as_ref()),
            how: how(*pid, "the command itself", "started by the command; found by its name"),
        });
    }
    all.iter().find(|(pid, _)| has_proctable(*pid)).map(|(pid, s)| Starter {
        pid: *pid,
        name: exe_name(*pid, s.as_ref()),
        how: how(
            *pid,
            "the command itself; found by its MPIR_proctable",
            "started by the command; found by its MPIR_proctable",
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starter_names() {
        for n in [
            "mpirun",
            "mpiexec",
            "mpiexec.hydra",
            "orterun",
            "prterun",
            "srun",
            "mpirun.openmpi",
            "mpiexec.mpich",
        ] {
            assert!(is_starter_name(n), "{n}");
        }
        for n in [
            "bash",
            "make",
            "mpicc",
            "mpirunner",
            "sruns",
            "hydra_pmi_proxy",
            "orted",
            "",
        ] {
            assert!(!is_starter_name(n), "{n}");
        }
    }

    #[test]
    fn a_plain_process_is_no_starter() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let found = find(child.id() as i32);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(found, None);
    }
}
