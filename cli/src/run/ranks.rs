//! The ranks of a job, from its starter: its proctable, else the MPI
//! processes started under it, with their world ranks from the environment
//! the starter gave each (and the ranks that environment names but that are
//! not here, as unreachable).

use super::{Reporter, RunError};
use crate::job::{is_local_host, mpi_descendants, read_ranks, slurm_job_of, JobError, TableSource};
use crate::live::LiveProcess;

/// One rank of a job: a local process to read, or one that cannot be.
pub(super) struct JobRank {
    pub(super) pid: i32,
    pub(super) rank: Option<i32>,
    pub(super) executable: String,
    /// Why it cannot be read at all.
    pub(super) unreachable: Option<String>,
    /// The node it runs on, when that is not this host (read there by a
    /// collector).
    pub(super) host: Option<String>,
}

/// A job's ranks and, when its starter runs under Slurm, the Slurm job
/// (and step) it belongs to.
pub(super) struct JobRanks {
    pub(super) ranks: Vec<JobRank>,
    pub(super) slurm: Option<(String, Option<String>)>,
}

/// The ranks of the starter's job: its proctable (`MPIR_proctable`, else
/// `MPI2DD_info`), else the MPI processes started under it.
pub(super) fn job_ranks(starter: i32, rep: &Reporter) -> Result<JobRanks, RunError> {
    let mut s = LiveProcess::attach(starter).map_err(|source| RunError::Starter { pid: starter, source })?;
    let table = read_ranks(&s);
    let slurm = slurm_job_of(&s);
    if let Err(e) = s.detach() {
        eprintln!("mpiq: warning: {e}");
    }
    let (table, source) = match table {
        Ok(t) => t,
        Err(e @ (JobError::Empty(_) | JobError::NoProctable(_) | JobError::Mpi2dd { .. })) => {
            // No table: the MPI processes among the starter's descendants.
            let pids = mpi_descendants(starter);
            if pids.is_empty() {
                return Err(e.into());
            }
            // Their world ranks: from the environment the starter gave
            // each (PMI_RANK, ...), else as the library reports them.
            let env: Vec<Option<crate::job::EnvRank>> =
                pids.iter().map(|&pid| crate::job::rank_from_environ(pid)).collect();
            let mut from: Vec<&str> = env.iter().flatten().map(|r| r.from).collect();
            from.sort_unstable();
            from.dedup();
            let how = if env.iter().all(Option::is_some) {
                format!("world ranks from their environment ({})", from.join(", "))
            } else if from.is_empty() {
                "world ranks as the library reports them".to_string()
            } else {
                format!(
                    "world ranks from their environment ({}) where set, else as the library reports them",
                    from.join(", ")
                )
            };
            eprintln!(
                "mpiq: {e}\nmpiq: using the {} MPI process(es) started under it instead ({how})",
                pids.len()
            );
            let mut ranks: Vec<JobRank> = pids
                .into_iter()
                .zip(&env)
                .map(|(pid, e)| JobRank {
                    pid,
                    rank: e.map(|e| e.rank),
                    executable: String::new(),
                    unreachable: None,
                    host: None,
                })
                .collect();
            // Ranks the environment says exist but that are not here (on
            // another node, or gone): unknown, never left out.
            let size = env.iter().flatten().filter_map(|e| e.size).max().unwrap_or(0);
            for r in 0..size {
                if !ranks.iter().any(|j| j.rank == Some(r)) {
                    ranks.push(JobRank {
                        pid: 0,
                        rank: Some(r),
                        executable: String::new(),
                        unreachable: Some(format!(
                            "rank {r} of {size} is not among the MPI processes started under process {starter} \
                             on this machine"
                        )),
                        host: None,
                    });
                }
            }
            return Ok(JobRanks { ranks, slurm });
        }
        Err(e) => return Err(e.into()),
    };
    rep.note(format_args!(
        "{} of {starter}: {} rank(s)",
        source.as_str(),
        table.len()
    ));
    if source == TableSource::Mpi2dd {
        rep.note("world ranks from the proctable entries' rank field");
    }
    if let Some((job, step)) = &slurm {
        rep.note(format_args!(
            "Slurm job {job}{}",
            step.as_deref().map(|s| format!(", step {s}")).unwrap_or_default()
        ));
    }
    let ranks = table
        .into_iter()
        .map(|r| JobRank {
            host: (!is_local_host(&r.host)).then(|| r.host.trim().to_string()),
            unreachable: None,
            pid: r.pid,
            rank: Some(r.rank),
            executable: r.executable,
        })
        .collect();
    Ok(JobRanks { ranks, slurm })
}
