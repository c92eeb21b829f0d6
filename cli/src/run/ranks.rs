//! The ranks of a job, from its starter: its proctable, else the proc
//! table of its PMIx server (Open MPI 5's prterun), else the MPI processes
//! started under it, with their world ranks from the environment
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
/// `MPI2DD_info`), else its PMIx server's proc table, else the MPI
/// processes started under it.
pub(super) fn job_ranks(starter: i32, rep: &Reporter) -> Result<JobRanks, RunError> {
    // Its state before mpiq stops it (a PMIx server that was stopped cannot
    // answer).
    let state = crate::procs::Stat::of(starter).map(|s| s.state);
    let mut s = LiveProcess::attach(starter).map_err(|source| RunError::Starter { pid: starter, source })?;
    let table = read_ranks(&s);
    let slurm = slurm_job_of(&s);
    if let Err(e) = s.detach() {
        eprintln!("mpiq: warning: {e}");
    }
    let (table, source) = match table {
        Ok(t) => t,
        Err(e @ (JobError::Empty(_) | JobError::NoProctable(_) | JobError::Mpi2dd { .. })) => {
            // No table: the launcher's PMIx server (Open MPI 5's prterun),
            // else the MPI processes among the starter's descendants.
            if let Some(library) = crate::pmix::library_of(starter) {
                match crate::pmix::proc_table(starter, &library, state) {
                    Ok(t) => return Ok(pmix_ranks(starter, t, slurm, rep)),
                    Err(pe) => eprintln!("mpiq: warning: {pe}"),
                }
            }
            let pids = mpi_descendants(starter);
            if pids.is_empty() {
                return Err(match e {
                    // Nothing under it yet: its start-up, as far as mpiq can tell.
                    JobError::NoProctable(pid) => JobError::NotLaunched(pid),
                    e => e,
                }
                .into());
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

/// The ranks of a PMIx proc table: world rank = the PMIx rank; a rank on
/// another host is read there; a rank that ended (or never started) is
/// unreachable.
fn pmix_ranks(
    starter: i32,
    t: crate::pmix::ProcTable,
    slurm: Option<(String, Option<String>)>,
    rep: &Reporter,
) -> JobRanks {
    rep.note(format_args!(
        "PMIx proc table of {starter} (namespace {}): {} rank(s)",
        t.namespace,
        t.procs.len()
    ));
    rep.note(format_args!(
        "PMIx query: {:.1} ms ({}; PMIx_tool_init {:.1} ms, queries {:.1} ms)",
        t.elapsed.as_secs_f64() * 1e3,
        t.version,
        t.init_ms,
        t.query_ms
    ));
    if !t.others.is_empty() {
        // Jobs it spawned, or tools that connected to it (PRRTE keeps
        // listing their namespaces after they finalized).
        rep.note(format_args!(
            "the PMIx server also lists namespace(s) {}; mpiq reads its first job, {}",
            t.others.join(", "),
            t.namespace
        ));
    }
    let ranks = t
        .procs
        .into_iter()
        .map(|p| {
            let rank = i32::try_from(p.rank).ok();
            let ended = p.state >= crate::pmix::abi::PMIX_PROC_STATE_UNTERMINATED || p.pid <= 0;
            JobRank {
                unreachable: ended.then(|| {
                    format!(
                        "rank {} is not running: its PMIx state is {} ({})",
                        p.rank,
                        if p.state_name.is_empty() {
                            "unknown"
                        } else {
                            &p.state_name
                        },
                        p.state
                    )
                }),
                host: (!ended && !is_local_host(&p.host)).then(|| p.host.trim().to_string()),
                pid: p.pid,
                rank,
                executable: p.executable,
            }
        })
        .collect();
    JobRanks { ranks, slurm }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pmix::{PmixProcEntry, ProcTable};

    fn entry(rank: u32, host: &str, pid: i32, state: u8) -> PmixProcEntry {
        PmixProcEntry {
            rank,
            host: host.into(),
            executable: "/job/a.out".into(),
            pid,
            state,
            state_name: if state == 20 {
                "PROC TERMINATED".into()
            } else {
                String::new()
            },
        }
    }

    #[test]
    fn a_pmix_table_gives_world_ranks_hosts_and_the_ended() {
        let t = ProcTable {
            namespace: "prterun-h-9@1".into(),
            procs: vec![
                entry(0, "localhost", 100, 6),
                entry(1, "some-other-node-4711", 200, 6),
                entry(2, "localhost", 300, 20),
                entry(3, "some-other-node-4711", 0, 2),
            ],
            others: Vec::new(),
            version: "OpenPMIx 5.0.10".into(),
            elapsed: std::time::Duration::from_millis(9),
            init_ms: 3.0,
            query_ms: 0.5,
        };
        let rep = Reporter {
            verbose: false,
            start: std::time::Instant::now(),
            keep: None,
        };
        let job = pmix_ranks(9, t, None, &rep);
        let got: Vec<(i32, Option<i32>, Option<&str>, bool)> = job
            .ranks
            .iter()
            .map(|r| (r.pid, r.rank, r.host.as_deref(), r.unreachable.is_some()))
            .collect();
        assert_eq!(
            got,
            [
                (100, Some(0), None, false),
                (200, Some(1), Some("some-other-node-4711"), false),
                (300, Some(2), None, true),
                (0, Some(3), None, true),
            ]
        );
        assert_eq!(
            job.ranks[2].unreachable.as_deref(),
            Some("rank 2 is not running: its PMIx state is PROC TERMINATED (20)")
        );
        assert_eq!(job.ranks[1].executable, "/job/a.out");
    }
}
