//! The ranks of a job, from its starter's (`mpirun`, `mpiexec`) MPIR process
//! acquisition interface: `MPIR_proctable_size` entries of
//! `struct MPIR_PROCDESC { char *host_name; char *executable_name; int pid; }`
//! at `MPIR_proctable`. The index in the table is the rank in
//! `MPI_COMM_WORLD`.

use mpiq::TargetError;

use crate::image::Memory;
use crate::process::Process;

/// Most entries read from a proctable (a corrupt size must not make us
/// read gigabytes).
const MAX_RANKS: u64 = 1 << 20;

/// Why a starter's proctable could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JobError {
    /// The starter has no `MPIR_proctable` (not an MPI starter).
    #[error("process {0} has no MPIR_proctable: is it an MPI starter (mpirun, mpiexec)?")]
    NoProctable(u32),
    /// The table is empty (the job has not started its ranks yet).
    #[error("the MPIR_proctable of process {0} is empty: the job has not launched its ranks yet, or this starter fills the table only for a debugger")]
    Empty(u32),
    /// The table holds an absurd number of entries.
    #[error("MPIR_proctable_size of process {pid} is {size}: not believable")]
    TooLarge {
        /// The starter.
        pid: u32,
        /// The size read.
        size: u64,
    },
    /// Reading the table failed.
    #[error("reading the MPIR_proctable: {0}")]
    Read(#[from] TargetError),
}

/// One rank of a job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankEntry {
    /// Rank in `MPI_COMM_WORLD`.
    pub rank: i32,
    /// `host_name`
    pub host: String,
    /// `executable_name`
    pub executable: String,
    /// `pid`
    pub pid: i32,
}

/// Field offsets and size of `MPIR_PROCDESC`: from DWARF when the starter
/// has it, else the C layout for the target's pointer size.
fn procdesc_layout<M: Memory>(starter: &Process<M>) -> (u64, u64, u64, u64) {
    let ptr = starter.image().type_sizes().pointer as u64;
    let fallback = (0, ptr, 2 * ptr, (2 * ptr + 4).div_ceil(ptr) * ptr);
    let image = starter.image();
    let Ok(Some(ty)) = image.find_type("MPIR_PROCDESC") else {
        return fallback;
    };
    let field = |n| image.field_offset(ty, n).ok().flatten();
    match (
        field("host_name"),
        field("executable_name"),
        field("pid"),
        image.size_of(ty).ok().flatten(),
    ) {
        (Some(h), Some(e), Some(p), Some(s)) => (h, e, p, s),
        _ => fallback,
    }
}

/// Reads the starter's proctable.
pub fn read_proctable<M: Memory>(starter: &Process<M>) -> Result<Vec<RankEntry>, JobError> {
    let pid = starter.pid().unwrap_or(0);
    let image = starter.image();
    let (Some(size_at), Some(table_at)) = (
        image.find_symbol("MPIR_proctable_size"),
        image.find_symbol("MPIR_proctable"),
    ) else {
        return Err(JobError::NoProctable(pid));
    };
    let size = starter.read_uint(size_at, 4)?;
    let size = u64::from(size as u32 as i32 as u32); // int; negative = garbage
    if size == 0 {
        return Err(JobError::Empty(pid));
    }
    if size > MAX_RANKS {
        return Err(JobError::TooLarge { pid, size });
    }
    let table = starter.read_pointer(table_at)?;
    if table == 0 {
        return Err(JobError::Empty(pid));
    }
    let (host_off, exe_off, pid_off, stride) = procdesc_layout(starter);
    let mut out = Vec::with_capacity(size as usize);
    for i in 0..size {
        let entry = table + i * stride;
        let host = starter.read_pointer(entry + host_off)?;
        let exe = starter.read_pointer(entry + exe_off)?;
        let rank_pid = starter.read_uint(entry + pid_off, 4)? as u32 as i32;
        let string = |addr: u64| -> Result<String, TargetError> {
            if addr == 0 {
                Ok(String::new())
            } else {
                starter.read_c_string(addr, 4096)
            }
        };
        out.push(RankEntry {
            rank: i as i32,
            host: string(host)?,
            executable: string(exe)?,
            pid: rank_pid,
        });
    }
    Ok(out)
}

/// The descendants of `root` that map an MPI library (`libmpi*`, `libmpich*`),
/// in pid order: the ranks of a job whose starter has no usable proctable
/// (world ranks then unknown here; the bridge works them out).
pub fn mpi_descendants(root: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let parents: Vec<(i32, i32)> = dir
        .filter_map(|e| {
            let pid: i32 = e.ok()?.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // pid (comm) state ppid ...: comm may hold spaces and parentheses.
            let ppid = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()?;
            Some((pid, ppid))
        })
        .collect();
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let p = found[i];
        found.extend(parents.iter().filter(|&&(_, pp)| pp == p).map(|&(c, _)| c));
        i += 1;
    }
    let mut ranks: Vec<i32> = found[1..]
        .iter()
        .copied()
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/maps")).is_ok_and(|m| {
                m.lines().any(|l| {
                    l.rsplit('/')
                        .next()
                        .is_some_and(|name| name.starts_with("libmpi.so") || name.starts_with("libmpich.so"))
                })
            })
        })
        .collect();
    ranks.sort_unstable();
    ranks
}

/// Whether a proctable host name is this machine.
pub fn is_local_host(host: &str) -> bool {
    let host = host.trim();
    if host.is_empty() || matches!(host, "localhost" | "localhost.localdomain" | "127.0.0.1" | "::1") {
        return true;
    }
    let Ok(me) = nix::unistd::gethostname() else {
        return false;
    };
    let me = me.to_string_lossy();
    let short = |s: &str| s.split('.').next().unwrap_or(s).to_ascii_lowercase();
    host.eq_ignore_ascii_case(&me) || short(host) == short(&me)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_mpi_descendants_here() {
        assert!(mpi_descendants(std::process::id() as i32).is_empty());
    }

    #[test]
    fn local_hosts() {
        assert!(is_local_host("localhost"));
        assert!(is_local_host(""));
        let me = nix::unistd::gethostname().unwrap();
        let me = me.to_string_lossy();
        assert!(is_local_host(&me));
        assert!(is_local_host(&format!("{me}.example.org")));
        assert!(!is_local_host("some-other-node-4711"));
    }
}
