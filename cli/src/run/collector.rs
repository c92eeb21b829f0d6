//! `mpiq collect`: the collector a job across nodes starts on each node
//! (through srun or ssh). It reads the ranks of its own node exactly as
//! `mpiq job` reads local ones (stopped, read, released; the same bridge),
//! once or twice, and sends each rank's snapshot back on its standard
//! output ([`super::wire`]); the front end merges every node's ranks and
//! makes the one analysis.
//!
//! Which ranks: the front end writes the job's table on the collector's
//! standard input (`NODE PID RANK` lines, then end of file or a line `.`;
//! srun gives every node the same input) and each collector takes its
//! node's lines; or, with `--slurm-step JOB.STEP`, it finds the processes
//! of that step on its node itself, by their environment.
//!
//! With `--compact` it sends compact records ([`super::wire::StackTable`]),
//! keeps its samples whole, and then reads one [`Request`] from its
//! standard input: the ranks the front end shows in detail (or every rank,
//! or nothing), which it sends whole before it ends. Its ranks run
//! meanwhile (they were released after each sample).
//!
//! A collector never leaves a rank stopped: ranks are released before
//! anything is written, a terminating signal (the launcher ending its
//! step, the front end gone) releases them through [`crate::signals`], and
//! a closed output ends it.

use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

use mpiq::DumpOptions;

use super::wire::{frame, Message, Request, StackTable, TABLE_END};
use super::{failed_snapshot, sample_pids, Outcome, Reporter, RunError};
use crate::job::{environ_value, rank_from_environ};

/// What the collector was asked.
#[derive(Debug)]
pub struct CollectRequest<'a> {
    /// This node's name in the table (default: `$SLURMD_NODENAME`, else the
    /// host name).
    pub node: Option<&'a str>,
    /// Find the ranks of this Slurm step (`JOB.STEP`) on this node instead
    /// of reading a table.
    pub slurm_step: Option<&'a str>,
    /// Samples to take.
    pub samples: u8,
    /// Milliseconds between them.
    pub interval_ms: u64,
    /// Give up (and release everything) after this many milliseconds.
    pub deadline_ms: u64,
    /// Send compact records, then wait for a [`Request`].
    pub compact: bool,
}

/// This node's name: as given, else Slurm's name for it, else the host name.
pub fn node_name(given: Option<&str>) -> String {
    if let Some(n) = given.filter(|n| !n.is_empty()) {
        return n.to_string();
    }
    if let Some(n) = std::env::var("SLURMD_NODENAME").ok().filter(|n| !n.is_empty()) {
        return n;
    }
    nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "localhost".into())
}

/// Whether a table's host name names this node.
fn same_node(a: &str, b: &str) -> bool {
    let short = |s: &str| s.split('.').next().unwrap_or(s).to_ascii_lowercase();
    a.eq_ignore_ascii_case(b) || short(a) == short(b)
}

/// What Slurm sets in a task's environment to name its cluster (the second
/// with the controller's address, so two clusters of one name differ).
const CLUSTER_VARIABLES: [&str; 2] = ["SLURM_CLUSTER_NAME", "SLURM_WORKING_CLUSTER"];

/// Processes to read: pid and world rank (when known).
type Ranks = Vec<(i32, Option<i32>)>;

/// Writes messages; remembers a closed output (the front end is gone).
struct Sender {
    node: String,
    seq: u64,
    broken: bool,
}

impl Sender {
    fn send(&mut self, m: &Message) {
        if self.broken {
            return;
        }
        let mut out = std::io::stdout().lock();
        for line in frame(&self.node, self.seq, m) {
            if out.write_all(line.as_bytes()).is_err() {
                self.broken = true;
                return;
            }
        }
        self.seq += 1;
        if out.flush().is_err() {
            self.broken = true;
        }
    }
}

/// The `NODE PID RANK` lines of `input` that name `node` (up to its end or
/// a line [`TABLE_END`]).
fn table_ranks(input: impl BufRead, node: &str) -> (Ranks, Vec<String>) {
    let mut mine = Vec::new();
    let mut others = Vec::new();
    for line in input.lines().map_while(Result::ok) {
        if line.trim() == TABLE_END {
            break;
        }
        let mut w = line.split_whitespace();
        let (Some(host), Some(pid)) = (w.next(), w.next().and_then(|p| p.parse::<i32>().ok())) else {
            continue;
        };
        let rank = w.next().and_then(|r| r.parse::<i32>().ok());
        if same_node(host, node) {
            mine.push((pid, rank));
        } else if !others.iter().any(|o| o == host) {
            others.push(host.to_string());
        }
    }
    (mine, others)
}

/// The front end's request (the first line that is one), or `None` at the
/// end of the input.
fn next_request(input: impl BufRead) -> Option<Request> {
    input.lines().map_while(Result::ok).find_map(|l| Request::parse(&l))
}

/// The MPI processes of Slurm step `job.step` on this node, with their
/// world ranks, and the job size their environment gives. Only the
/// Why a collector found no rank to sample on its node; the front end
/// shows it as the node's failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CollectError {
    /// `--slurm-step` is not `JOB.STEP`.
    #[error("--slurm-step wants JOB.STEP, not '{0}'")]
    BadStep(String),
    /// `/proc` could not be listed.
    #[error("cannot list /proc: {0}")]
    ListProc(#[source] std::io::Error),
    /// No MPI process of the step runs on this node.
    #[error("no MPI process of Slurm step {step} runs on node {node}")]
    NoStepRank {
        /// The step, `JOB.STEP`.
        step: String,
        /// This node.
        node: String,
    },
    /// No rank of the job's table runs on this node.
    #[error("no rank of the job's table runs on node {node} (the table names {})", nodes(.others))]
    NoTableRank {
        /// This node.
        node: String,
        /// The nodes the table names.
        others: Vec<String>,
    },
}

/// The nodes a table names, or `no node`.
fn nodes(others: &[String]) -> String {
    if others.is_empty() {
        "no node".to_string()
    } else {
        others.join(", ")
    }
}

/// variables naming the step, the rank and the size are looked at.
fn step_ranks(step: &str, node: &str) -> Result<(Ranks, Option<i32>), CollectError> {
    let (job, step_id) = step
        .split_once('.')
        .ok_or_else(|| CollectError::BadStep(step.to_string()))?;
    let me = std::process::id() as i32;
    let mut found = Vec::new();
    let mut size = None;
    let dir = std::fs::read_dir("/proc").map_err(CollectError::ListProc)?;
    for entry in dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let value = |name: &str| environ_value(&env, name).map(str::to_string);
        let step_of = value("SLURM_STEP_ID").or_else(|| value("SLURM_STEPID"));
        if value("SLURM_JOB_ID").as_deref() != Some(job) || step_of.as_deref() != Some(step_id) {
            continue;
        }
        // slurmstepd names the node in every task's environment: on a
        // machine that runs several slurmd (or shares its processes with
        // another node's view), only this node's tasks.
        if value("SLURMD_NODENAME").is_some_and(|n| !same_node(&n, node)) {
            continue;
        }
        // Job ids are only unique within one cluster: where this collector
        // (itself a task of the job's cluster) and the process both name
        // their cluster, the names must agree.
        if CLUSTER_VARIABLES
            .iter()
            .any(|v| matches!((std::env::var(v).ok(), value(v)), (Some(mine), Some(theirs)) if mine != theirs))
        {
            continue;
        }
        if !crate::job::maps_mpi_library(pid) {
            continue;
        }
        let rank = rank_from_environ(pid);
        size = size.max(rank.and_then(|r| r.size));
        found.push((pid, rank.map(|r| r.rank)));
    }
    // A wrapper (a shell running the program) shares the environment but
    // maps no MPI library: it was left out above.
    found.sort_unstable();
    Ok((found, size))
}

/// Runs the collector: find this node's ranks, sample them, send them.
pub fn run_collector(req: &CollectRequest, options: &DumpOptions, rep: &Reporter) -> Result<Outcome, RunError> {
    let start = Instant::now();
    let deadline = start + Duration::from_millis(req.deadline_ms);
    let node = node_name(req.node);
    let mut out = Sender {
        node: node.clone(),
        seq: 0,
        broken: false,
    };
    // A recording is the front end's business.
    let opts = DumpOptions {
        record: None,
        ..options.clone()
    };
    let ranks = match req.slurm_step {
        Some(step) => match step_ranks(step, &node) {
            Ok((ranks, size)) => {
                if let Some(size) = size {
                    out.send(&Message::JobSize { size });
                }
                if ranks.is_empty() {
                    Err(CollectError::NoStepRank {
                        step: step.to_string(),
                        node: node.clone(),
                    })
                } else {
                    Ok(ranks)
                }
            }
            Err(e) => Err(e),
        },
        None => {
            let (mine, others) = table_ranks(std::io::stdin().lock(), &node);
            if mine.is_empty() {
                Err(CollectError::NoTableRank {
                    node: node.clone(),
                    others,
                })
            } else {
                Ok(mine)
            }
        }
    };
    let ranks = match ranks {
        Ok(r) => r,
        Err(error) => {
            out.send(&Message::Failed {
                error: error.to_string(),
            });
            out.send(&Message::Done);
            return Ok(Outcome {
                stdout: String::new(),
                verdict: None,
                status: None,
            });
        }
    };
    out.send(&Message::Hello {
        pid: std::process::id(),
        ranks: ranks.len(),
    });
    let first = Instant::now();
    let mut table = StackTable::default();
    // With compact records: every sample whole, for the request.
    let mut kept = Vec::new();
    for sample in 0..req.samples.max(1) {
        if sample > 0 {
            let wait = Duration::from_millis(req.interval_ms);
            if Instant::now() + wait > deadline {
                rep.note("deadline: no further sample");
                break;
            }
            std::thread::sleep(wait);
        }
        let at_ms = first.elapsed().as_millis() as u64;
        let processes = match sample_pids(&ranks, &opts, rep) {
            Ok(snap) => snap.processes,
            Err(e @ RunError::Dump(mpiq::DumpError::Interrupted)) => return Err(e),
            Err(e) => ranks
                .iter()
                .map(|&(pid, rank)| failed_snapshot(u32::try_from(pid).ok(), rank, String::new(), e.to_string()))
                .collect(),
        };
        for mut p in processes {
            p.node = Some(node.clone());
            if req.compact {
                kept.push((sample, p.clone()));
                for m in table.compact(sample, p) {
                    out.send(&m);
                }
            } else {
                out.send(&Message::process(sample, p));
            }
        }
        out.send(&Message::Sampled { sample, at_ms });
        if out.broken {
            break;
        }
    }
    if req.compact && !out.broken {
        out.send(&Message::Waiting);
        let request = next_request(std::io::stdin().lock()).unwrap_or(Request::End);
        rep.note(format_args!("asked for {}", request.line().trim_end()));
        let last = kept.iter().map(|(s, _)| *s).max().unwrap_or_default();
        for (sample, p) in kept {
            if request.wants(sample, last, p.world_rank.map(i64::from)) {
                out.send(&Message::process(sample, p));
            }
        }
    }
    out.send(&Message::Done);
    Ok(Outcome {
        stdout: String::new(),
        verdict: None,
        status: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_collector_takes_its_nodes_lines() {
        let table = "n1 100 0\nn2 200 1\nn1.cluster 101 2\nbad line\nn3 300 -\n";
        let (mine, others) = table_ranks(table.as_bytes(), "n1");
        assert_eq!(mine, vec![(100, Some(0)), (101, Some(2))]);
        assert_eq!(others, vec!["n2", "n3"]);
        let (mine, _) = table_ranks(table.as_bytes(), "N3");
        assert_eq!(mine, vec![(300, None)]);
    }

    #[test]
    fn node_names() {
        assert_eq!(node_name(Some("x")), "x");
        assert!(!node_name(None).is_empty());
        assert!(same_node("n1.example", "N1"));
        assert!(!same_node("n1", "n10"));
    }

    #[test]
    fn no_step_here() {
        let (ranks, size) = step_ranks("999999999.0", "n1").unwrap();
        assert!(ranks.is_empty());
        assert_eq!(size, None);
        assert!(step_ranks("12", "n1").is_err());
    }
}
