//! The ranks of a job, from its starter (`mpirun`, `mpiexec`):
//!
//! - the MPIR process acquisition interface: `MPIR_proctable_size` entries
//!   of `struct MPIR_PROCDESC { char *host_name; char *executable_name; int
//!   pid; }` at `MPIR_proctable`; the index in the table is the rank in
//!   `MPI_COMM_WORLD`;
//! - else the MPI-2 debugger interface draft's `MPI2DD_info` (magic
//!   `MPI2\x7f`): `proctable_size` packed `struct MPI2DD_PROCDESC { addr
//!   host_name, executable_name, spawn_desc, comm_world_id; int32 pid, rank;
//!   }` at `proctable`, the world rank in each entry's `rank`.

use mpiq::target::read::{Mpi2ddLayout, MPI2DD_MAGIC};
use mpiq::{TargetError, TargetExt};

use crate::image::Memory;
use crate::process::Process;

/// Most entries read from a proctable (a corrupt size must not make us
/// read gigabytes).
const MAX_RANKS: u64 = 1 << 20;

/// Why a starter's proctable could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JobError {
    /// The starter has no `MPIR_proctable` and no `MPI2DD_info` (not an MPI
    /// starter).
    #[error("process {0} has no MPIR_proctable and no MPI2DD_info: is it an MPI starter (mpirun, mpiexec)?")]
    NoProctable(u32),
    /// The starter has an `MPI2DD_info` (and no usable `MPIR_proctable`),
    /// but it lists no ranks.
    #[error("the MPI2DD_info of process {pid} lists no ranks: {reason}")]
    Mpi2dd {
        /// The starter.
        pid: u32,
        /// Why (wrong magic, no proctable, ...).
        reason: String,
    },
    /// No proctable, and no MPI process runs under the starter yet: it has
    /// not launched its ranks (start-up), or it is no MPI starter.
    #[error("process {0} has no MPIR_proctable or MPI2DD_info and no MPI process runs under it: the job has not launched its ranks yet, or it is not an MPI starter (mpirun, mpiexec)")]
    NotLaunched(u32),
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
    let Ok(Some(ty)) = image.find_type_beside("MPIR_PROCDESC", "MPIR_proctable") else {
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

/// Where the ranks of a job were found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableSource {
    /// `MPIR_proctable` (world rank = index).
    Mpir,
    /// `MPI2DD_info.proctable` (world rank = the entry's `rank`).
    Mpi2dd,
}

impl TableSource {
    /// The symbol's name, for messages.
    pub fn as_str(self) -> &'static str {
        match self {
            TableSource::Mpir => "MPIR_proctable",
            TableSource::Mpi2dd => "MPI2DD_info",
        }
    }
}

/// The ranks of the starter's job: its `MPIR_proctable`, else (none, or
/// empty) its `MPI2DD_info` proctable. With neither, the `MPIR_proctable`
/// error.
pub fn read_ranks<M: Memory>(starter: &Process<M>) -> Result<(Vec<RankEntry>, TableSource), JobError> {
    match read_proctable(starter) {
        Ok(t) => Ok((t, TableSource::Mpir)),
        Err(e @ (JobError::NoProctable(_) | JobError::Empty(_))) => {
            if starter.image().find_symbol(MPI2DD_SYMBOL).is_none() {
                return Err(e);
            }
            read_mpi2dd_proctable(starter).map(|t| (t, TableSource::Mpi2dd))
        }
        Err(e) => Err(e),
    }
}

/// Reads the starter's `MPIR_proctable`.
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
        out.push(RankEntry {
            rank: i as i32,
            host: string_at(starter, host)?,
            executable: string_at(starter, exe)?,
            pid: rank_pid,
        });
    }
    Ok(out)
}

/// The C string at `addr` (empty for NULL).
fn string_at<M: Memory>(p: &Process<M>, addr: u64) -> Result<String, TargetError> {
    if addr == 0 {
        Ok(String::new())
    } else {
        p.read_c_string(addr, 4096)
    }
}

/// The Slurm job (and step) a starter belongs to: srun's `totalview_jobid`
/// and `totalview_stepid` (the strings srun keeps for debuggers), else the
/// starter's `SLURM_JOB_ID` (an `mpirun` inside an allocation; only that
/// variable is looked at). `None` outside Slurm.
pub fn slurm_job_of<M: Memory>(starter: &Process<M>) -> Option<(String, Option<String>)> {
    let image = starter.image();
    let read = |name: &str| {
        let at = image.find_symbol(name)?;
        let s = string_at(starter, starter.read_pointer(at).ok()?).ok()?;
        Some(s).filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
    };
    if let Some(job) = read("totalview_jobid") {
        return Some((job, read("totalview_stepid")));
    }
    let pid = starter.pid()?;
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let v = environ_value(&env, "SLURM_JOB_ID")?.trim();
    (!v.is_empty() && v.bytes().all(|b| b.is_ascii_digit())).then(|| (v.to_string(), None))
}

/// The symbol of the MPI-2 debugger interface.
const MPI2DD_SYMBOL: &str = "MPI2DD_info";

/// Where the fields of `MPI2DD_info` and of a `MPI2DD_PROCDESC` are: from
/// the starter's DWARF when it describes both structs completely, else the
/// draft's ([`Mpi2ddLayout::draft`]).
fn mpi2dd_layout<M: Memory>(starter: &Process<M>) -> Mpi2ddLayout {
    let draft = Mpi2ddLayout::draft(starter.image().type_sizes().pointer as usize);
    let image = starter.image();
    let ty = |n: &str| image.find_type(n).ok().flatten();
    let (Some(info), Some(desc)) = (ty("struct MPI2DD_INFO"), ty("struct MPI2DD_PROCDESC")) else {
        return draft;
    };
    let field = |t, n| image.field_offset(t, n).ok().flatten();
    match (
        field(info, "proctable"),
        field(info, "proctable_size"),
        field(info, "directory_size"),
        field(desc, "host_name"),
        field(desc, "executable_name"),
        field(desc, "pid"),
        field(desc, "rank"),
        image.size_of(desc).ok().flatten(),
    ) {
        (
            Some(proctable),
            Some(proctable_size),
            Some(directory_size),
            Some(host_name),
            Some(executable_name),
            Some(pid),
            Some(rank),
            Some(procdesc_size),
        ) => Mpi2ddLayout {
            proctable,
            proctable_size,
            directory_size,
            host_name,
            executable_name,
            pid,
            rank,
            procdesc_size,
            ..draft
        },
        _ => draft,
    }
}

/// Reads the proctable of the starter's `MPI2DD_info`: the entries sorted
/// by world rank (an entry listed twice is kept once).
pub fn read_mpi2dd_proctable<M: Memory>(starter: &Process<M>) -> Result<Vec<RankEntry>, JobError> {
    let pid = starter.pid().unwrap_or(0);
    let Some(addr) = starter.image().find_symbol(MPI2DD_SYMBOL) else {
        return Err(JobError::NoProctable(pid));
    };
    let fail = |reason: String| JobError::Mpi2dd { pid, reason };
    let layout = mpi2dd_layout(starter);
    let mut mem = starter.reader();
    let info = mem.read_mpi2dd_info(addr, &layout)?;
    if !info.magic_ok() {
        return Err(fail(format!(
            "its magic is {:02x?}, expected {:02x?} (\"MPI2\\x7f\")",
            info.magic, MPI2DD_MAGIC
        )));
    }
    let (table, size, dirs) = (info.proctable, info.proctable_size, info.directory_size);
    if table == 0 || size <= 0 {
        return Err(fail(if dirs > 0 {
            format!(
                "it is a metadirectory ({dirs} directory process(es)), not a directory process; \
                 mpiq follows only a starter that lists the ranks itself"
            )
        } else if table == 0 {
            "proctable is NULL (not a directory process, or the ranks are not launched yet)".to_string()
        } else {
            format!("proctable_size is {size}")
        }));
    }
    let size = size as u64;
    if size > MAX_RANKS {
        return Err(JobError::TooLarge { pid, size });
    }
    let mut out: Vec<RankEntry> = Vec::with_capacity(size as usize);
    for i in 0..size {
        let d = mem.read_mpi2dd_procdesc(table + i * layout.procdesc_size, &layout)?;
        let e = RankEntry {
            rank: d.rank,
            host: string_at(starter, d.host_name)?,
            executable: string_at(starter, d.executable_name)?,
            pid: d.pid,
        };
        if !out.iter().any(|o| o.pid == e.pid && o.host == e.host) {
            out.push(e);
        }
    }
    out.sort_by_key(|e| e.rank);
    Ok(out)
}

/// The descendants of `root` that map an MPI library (`libmpi*`, `libmpich*`),
/// in pid order: the ranks of a job whose starter has no usable proctable
/// (world ranks then unknown here; the bridge works them out).
pub fn mpi_descendants(root: i32) -> Vec<i32> {
    let mut ranks: Vec<i32> = crate::procs::descendants(&[root])
        .into_iter()
        .map(|(p, _)| p.pid)
        .filter(|&pid| maps_mpi_library(pid))
        .collect();
    ranks.sort_unstable();
    ranks
}

/// Whether process `pid` maps an MPI library (`libmpi*`, `libmpich*`).
pub fn maps_mpi_library(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/maps")).is_ok_and(|m| {
        m.lines()
            .any(|l| l.rsplit('/').next().is_some_and(mpiq::stacks::position::is_mpi_library))
    })
}

/// The environment variables that hold a process's world rank, as MPI
/// starters set them, in the order they are believed: the bridge's list
/// (it reads them from `environ` in the target for every front end).
pub use mpiq::RANK_VARIABLES;

/// The same for the size of `MPI_COMM_WORLD`.
pub const SIZE_VARIABLES: [&str; 3] = ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"];

/// A process's world rank and job size from its environment
/// (`/proc/PID/environ`, as it was at exec), each with the variable it
/// came from; only the variables of [`RANK_VARIABLES`] and
/// [`SIZE_VARIABLES`] are looked at, and nothing else is kept.
pub fn rank_from_environ(pid: i32) -> Option<EnvRank> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    rank_in_environ(&env)
}

/// A rank as its environment gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EnvRank {
    /// The world rank.
    pub rank: i32,
    /// The variable it came from.
    pub from: &'static str,
    /// The job size, when set.
    pub size: Option<i32>,
}

/// The value of variable `name` in an environment block (`/proc/PID/environ`:
/// `NAME=value` entries, each ended by a NUL), when it is set and UTF-8.
pub fn environ_value<'a>(env: &'a [u8], name: &str) -> Option<&'a str> {
    env.split(|&b| b == 0).find_map(|kv| {
        let v = kv.strip_prefix(name.as_bytes())?.strip_prefix(b"=")?;
        std::str::from_utf8(v).ok()
    })
}

fn rank_in_environ(env: &[u8]) -> Option<EnvRank> {
    let value = |name: &str| environ_value(env, name)?.trim().parse::<i32>().ok().filter(|r| *r >= 0);
    let (rank, from) = RANK_VARIABLES.iter().find_map(|&name| value(name).map(|r| (r, name)))?;
    let size = SIZE_VARIABLES
        .iter()
        .find_map(|&name| value(name))
        .filter(|&s| s > rank);
    Some(EnvRank { rank, from, size })
}

#[cfg(test)]
mod environ_tests {
    use super::*;

    #[test]
    fn the_rank_comes_from_the_first_variable_set() {
        let env = b"HOME=/x\0PMI_RANK=2\0SECRET=PMI_RANK=9\0PMIX_RANK=bad\0PMI_SIZE=4\0";
        let r = rank_in_environ(env).unwrap();
        assert_eq!((r.rank, r.from, r.size), (2, "PMI_RANK", Some(4)));
        let env = b"OMPI_COMM_WORLD_RANK=5\0PMI_RANK=2\0OMPI_COMM_WORLD_SIZE=3\0";
        let r = rank_in_environ(env).unwrap();
        assert_eq!(
            (r.rank, r.from, r.size),
            (5, "OMPI_COMM_WORLD_RANK", None),
            "a size below the rank is ignored"
        );
        assert_eq!(rank_in_environ(b"PMI_RANK=-1\0PMI_RANKS=3\0"), None);
        assert_eq!(rank_in_environ(b""), None);
    }
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
