//! `mpiq-bench scale`: the front end of `mpiq job` on thousands of
//! simulated nodes (issue 26).
//!
//! 1. **Records.** Real jobs of the test bed's MPI, one of each kind of
//!    verdict (`deadlock` 8 ranks: a cycle; `barrier_vs_recv` 4: a
//!    collective against a receive; `compute_stuck` 4: ranks waiting for a
//!    rank that computes; `many_ops 10` 4: ranks idle outside MPI), each
//!    read by a real `mpiq collect` (two samples): its wire messages, as a
//!    collector on a node sends them.
//! 2. **A job of N ranks.** The records are laid side by side as blocks
//!    (block k is record k mod 4, its ranks offset by the ranks before it)
//!    until N is reached, `--per-node` ranks to a node. `MPI_COMM_WORLD`
//!    becomes the whole job's (size N, every world rank), as a real job's
//!    collectors send it; every other communicator is the block's own.
//! 3. **The real front end.** `mpiq job --slurm J` runs as a user runs it;
//!    the only stand-ins are Slurm's: `squeue` names the simulated nodes,
//!    and `srun` (`MPIQ_SRUN`) plays every node's collector from the
//!    records, each message framed by the collectors' own wire code
//!    (`mpiq_cli::run::wire_frame`), all nodes on one stream as srun
//!    relays them. Both are this binary under another name.
//!
//! Measured: the wall time of `mpiq job` to its verdict, and its peak
//! memory; the bytes on the wire. The simulated srun runs on the same 2
//! cores and takes its share of them.

use std::io::{BufRead, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use mpiq::snapshot::model::{Communicator, GroupRuns, ProcessSnapshot, QueueKind};
use mpiq_cli::run::{
    wire_frame, wire_restore, WireGroups, WireLine, WireMessage, WireReassembler, WireRequest, WireStackTable,
};
use mpiq_tests::frontends::cli_command;
use mpiq_tests::{Example, Job, Mpi};
use serde::{Deserialize, Serialize};

use crate::proc;

/// The environment the simulated Slurm reads.
const ENV_RECORDS: &str = "MPIQ_SIM_RECORDS";
const ENV_RANKS: &str = "MPIQ_SIM_RANKS";
const ENV_PER_NODE: &str = "MPIQ_SIM_PER_NODE";
const ENV_INTERVAL: &str = "MPIQ_SIM_INTERVAL_MS";
/// The simulated Slurm job's id.
const JOB_ID: &str = "4242";

/// One real job's ranks as its collector sent them.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Record {
    /// The example and its size.
    pub name: String,
    /// Its ranks.
    pub size: usize,
    /// `samples[k][rank]`: the process message of sample k.
    pub samples: Vec<Vec<WireMessage>>,
}

/// The records' blocks: (record, first global rank) until `ranks` is
/// covered by whole blocks.
fn blocks(records: &[Record], ranks: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut at = 0;
    let mut k = 0;
    while !records.is_empty() {
        let r = k % records.len();
        if at + records[r].size > ranks {
            break;
        }
        out.push((r, at));
        at += records[r].size;
        k += 1;
    }
    out
}

fn is_world(c: &Communicator) -> bool {
    c.world_ranks_source.as_deref() == Some("world") || c.name == "MPI_COMM_WORLD"
}

/// A recorded rank placed at `offset` in a job of `total` ranks, on `node`,
/// with its communicators' groups as the collector sends them (the job's
/// `MPI_COMM_WORLD`: one run of `total` ranks).
fn place(
    p: &ProcessSnapshot,
    block: usize,
    offset: i64,
    total: i64,
    node: &str,
) -> (ProcessSnapshot, Vec<Option<GroupRuns>>) {
    let mut p = p.clone();
    let rank = p.world_rank.map(|r| i64::from(r) + offset);
    p.world_rank = rank.and_then(|r| i32::try_from(r).ok());
    p.pid = rank.and_then(|r| u32::try_from(1_000_000 + r).ok());
    p.node = Some(node.to_string());
    let mut renamed = Vec::new();
    for c in &mut p.communicators {
        let world = is_world(c);
        let shift = |v: &mut Option<i64>| {
            if let Some(x) = v.as_mut() {
                *x += offset;
            }
        };
        if world {
            c.size = Some(total);
            c.local_rank = rank;
        } else {
            let old = c.id.clone();
            c.id = format!("{old}~{block}");
            renamed.push((old, c.id.clone()));
            if let Some(g) = c.world_ranks.as_mut() {
                *g = g.iter().map(|w| w.map(|w| w + offset)).collect();
            }
        }
        for kind in QueueKind::ALL {
            for op in &mut c.queues.get_mut(kind).operations {
                shift(&mut op.peer.world);
                if world {
                    shift(&mut op.peer.local);
                }
                if let Some(a) = op.actual.as_mut() {
                    shift(&mut a.world);
                    if world {
                        shift(&mut a.local);
                    }
                }
            }
        }
    }
    let worlds: Vec<String> = p
        .communicators
        .iter()
        .filter(|c| is_world(c))
        .map(|c| c.id.clone())
        .collect();
    if let Some(st) = p.stacks.as_mut() {
        for call in &mut st.calls {
            let on_world = call.communicator.as_ref().is_some_and(|id| worlds.contains(id));
            if let Some(id) = call.communicator.as_mut() {
                if let Some((_, new)) = renamed.iter().find(|(old, _)| old == id) {
                    *id = new.clone();
                }
            }
            if on_world {
                call.peer = call.peer.map(|x| x + offset);
                call.root = call.root.map(|x| x + offset);
            }
        }
    }
    let groups = p
        .communicators
        .iter_mut()
        .map(|c| {
            let g = c.world_ranks.take()?;
            Some(if is_world(c) {
                GroupRuns(vec![(0, total as u64)])
            } else {
                g.runs()
            })
        })
        .collect();
    (p, groups)
}

/// `mpiq collect` on a real job's ranks, two samples: its messages.
fn record(mpi: Mpi, example: Example, n: usize, args: &[&str]) -> Result<Record, String> {
    let job = Job::start(mpi, example, n, args);
    std::thread::sleep(std::time::Duration::from_secs(2));
    let ranks: Vec<(u32, usize)> = job.ranks().iter().map(|r| (r.pid, r.rank)).collect();
    let (out, _) = proc::collect("sim", &ranks, &["--samples", "2", "--interval", "500"], |_| {})?;
    drop(job);
    let mut re = WireReassembler::default();
    let mut samples: Vec<Vec<WireMessage>> = vec![Vec::new(), Vec::new()];
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if let WireLine::Message(_, m) = re.push(line) {
            if let WireMessage::Process { sample, .. } = &*m {
                if let Some(s) = samples.get_mut(usize::from(*sample)) {
                    s.push(*m);
                }
            }
        }
    }
    let name = format!("{} {n}", example.name());
    if samples.iter().any(|s| s.len() != n) {
        return Err(format!(
            "{name}: the collector sent {:?} processes per sample, not {n}: {}",
            samples.iter().map(Vec::len).collect::<Vec<_>>(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    for s in &mut samples {
        s.sort_by_key(|m| match m {
            WireMessage::Process { process, .. } => process.world_rank,
            _ => None,
        });
    }
    Ok(Record { name, size: n, samples })
}

/// `squeue` of the simulated cluster: job 4242's one step on every node.
pub fn squeue_main() -> i32 {
    let ranks: usize = env_num(ENV_RANKS, 1000);
    let per_node: usize = env_num(ENV_PER_NODE, 32).max(1);
    let nodes = ranks.div_ceil(per_node);
    let list: Vec<String> = (0..nodes).map(node_name).collect();
    println!("{JOB_ID}.0|{}", list.join(","));
    0
}

fn node_name(i: usize) -> String {
    format!("sim{i:05}")
}

fn env_num(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// `srun` of the simulated cluster: every node's collector, played from
/// the records, on this one stream.
pub fn srun_main(args: &[String]) -> i32 {
    let Some(records) = std::env::var_os(ENV_RECORDS) else {
        eprintln!("simulated srun: {ENV_RECORDS} is not set");
        return 1;
    };
    let mut records: Vec<Record> = match std::fs::read(&records)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("simulated srun: {e}");
            return 1;
        }
    };
    // Each recorded process whole again (its groups in it).
    let mut shared = WireGroups::default();
    for m in records.iter_mut().flat_map(|r| r.samples.iter_mut().flatten()) {
        if let WireMessage::Process { process, groups, .. } = m {
            // The digests stay beside the process, as they are sent.
            wire_restore(process, Vec::new(), std::mem::take(groups), &mut shared);
        }
    }
    let ranks: usize = env_num(ENV_RANKS, 1000);
    let per_node: usize = env_num(ENV_PER_NODE, 32).max(1);
    let interval = env_num(ENV_INTERVAL, 500) as u64;
    let samples: u8 = args
        .iter()
        .position(|a| a == "--samples")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    let blocks = blocks(&records, ranks);
    let total: usize = blocks.last().map_or(0, |(r, at)| at + records[*r].size);
    // Global rank -> (block, record, index in the record).
    let mut of_rank: Vec<(usize, usize, usize)> = Vec::with_capacity(total);
    for (b, &(r, _)) in blocks.iter().enumerate() {
        of_rank.extend((0..records[r].size).map(|i| (b, r, i)));
    }
    let nodes = total.div_ceil(per_node);
    let out = std::io::stdout();
    let mut out = BufWriter::with_capacity(1 << 20, out.lock());
    let mut seq = vec![0u64; nodes];
    let mut send = |out: &mut BufWriter<_>, node: usize, m: &WireMessage| -> bool {
        for line in wire_frame(&node_name(node), seq[node], m) {
            if out.write_all(line.as_bytes()).is_err() {
                return false;
            }
        }
        seq[node] += 1;
        true
    };
    for node in 0..nodes {
        let n = (total - node * per_node).min(per_node);
        send(&mut out, node, &WireMessage::Hello { pid: 1, ranks: n });
        send(&mut out, node, &WireMessage::JobSize { size: total as i32 });
    }
    let compact = args.iter().any(|a| a == "--compact");
    let mut tables: Vec<WireStackTable> = (0..nodes).map(|_| WireStackTable::default()).collect();
    // One recorded process of the job, placed as rank `g` on its node.
    let placed = |g: usize, sample: u8| -> Option<WireMessage> {
        let (b, r, i) = of_rank[g];
        let recorded = &records[r].samples[usize::from(sample).min(records[r].samples.len() - 1)][i];
        let WireMessage::Process { process, states, .. } = recorded else {
            return None;
        };
        let offset = blocks[b].1 as i64;
        let (placed, groups) = place(process, b, offset, total as i64, &node_name(g / per_node));
        Some(WireMessage::Process {
            sample,
            process: Box::new(placed),
            states: states.clone(),
            groups,
            stacks: Vec::new(),
        })
    };
    let started = Instant::now();
    for sample in 0..samples {
        if sample > 0 {
            let _ = out.flush();
            std::thread::sleep(std::time::Duration::from_millis(interval));
        }
        for (node, table) in tables.iter_mut().enumerate() {
            for g in node * per_node..((node + 1) * per_node).min(total) {
                let Some(m) = placed(g, sample) else { continue };
                let messages = match m {
                    m if compact => table.compact_message(m),
                    m => vec![m],
                };
                for m in &messages {
                    if !send(&mut out, node, m) {
                        return 1;
                    }
                }
            }
            let at_ms = started.elapsed().as_millis() as u64;
            send(&mut out, node, &WireMessage::Sampled { sample, at_ms });
        }
    }
    if compact {
        for node in 0..nodes {
            send(&mut out, node, &WireMessage::Waiting);
        }
        let _ = out.flush();
        let request = std::io::stdin()
            .lock()
            .lines()
            .map_while(Result::ok)
            .find_map(|l| WireRequest::parse(&l));
        let last = samples.saturating_sub(1);
        let request = request.unwrap_or(WireRequest::End);
        let asked: Vec<(usize, u8)> = (0..samples)
            .flat_map(|k| (0..total).map(move |g| (g, k)))
            .filter(|&(g, k)| request.wants(k, last, Some(g as i64)))
            .collect();
        for (g, k) in asked {
            if let Some(m) = placed(g, k) {
                if !send(&mut out, g / per_node, &m) {
                    return 1;
                }
            }
        }
    }
    for node in 0..nodes {
        send(&mut out, node, &WireMessage::Done);
    }
    let _ = out.flush();
    0
}

/// The stand-ins' directory: `squeue` and `srun`, both this binary.
fn stand_ins(scratch: &Path) -> Result<PathBuf, String> {
    let dir = scratch.join("sim-slurm");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    for name in ["squeue", "srun"] {
        let link = dir.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&me, &link).map_err(|e| format!("{}: {e}", link.display()))?;
    }
    Ok(dir)
}

/// One measured `mpiq job --slurm` on `ranks` simulated ranks.
struct Row {
    ranks: usize,
    nodes: usize,
    wall_ms: f64,
    peak_mib: f64,
    exit: Option<i32>,
    first_line: String,
    verdict_line: usize,
    lines: usize,
    /// The line after the verdict's: its summary.
    summary: String,
}

fn one(
    records_file: &Path,
    sim: &Path,
    ranks: usize,
    per_node: usize,
    scratch: &Path,
    html: Option<&Path>,
) -> Result<Row, String> {
    let mut cmd = cli_command(&["job", "--slurm", JOB_ID, "--node-timeout", "600"]);
    if let Some(dir) = html {
        cmd.arg("--html").arg(dir.join(format!("scale-{ranks}.html")));
    }
    let path = format!("{}:{}", sim.display(), std::env::var("PATH").unwrap_or_default());
    cmd.env("PATH", path)
        .env("MPIQ_SRUN", sim.join("srun"))
        .env(ENV_RECORDS, records_file)
        .env(ENV_RANKS, ranks.to_string())
        .env(ENV_PER_NODE, per_node.to_string());
    let o = proc::run(cmd, scratch);
    let first_line = o.stdout.lines().next().unwrap_or_default().to_string();
    let verdict_line = o
        .stdout
        .lines()
        .position(|l| l.starts_with("Deadlock analysis:"))
        .map_or(0, |i| i + 1);
    if verdict_line == 0 {
        return Err(format!("no verdict at {ranks} ranks:\n{}", o.all()));
    }
    Ok(Row {
        ranks,
        nodes: ranks.div_ceil(per_node),
        wall_ms: o.wall_ms,
        peak_mib: o.peak_rss_kib as f64 / 1024.0,
        exit: o.code(),
        first_line,
        verdict_line,
        lines: o.stdout.lines().count(),
        summary: o
            .stdout
            .lines()
            .nth(verdict_line)
            .unwrap_or_default()
            .trim()
            .to_string(),
    })
}

/// `mpiq-bench scale [--ranks 1000,16000,100000] [--per-node 32] [--mpi openmpi] [--only EXAMPLE]
/// [--records FILE]`: `--mpi` is `openmpi`, `mpich` or any MPI's name (`debian-openmpi`, a
/// packaged MPI without readable queues); `--only deadlock` (or another of the four) makes every
/// block that one job, all ranks at the same places. `--html DIR`: each `mpiq job` also writes
/// its page, `DIR/scale-N.html`, and its size is printed (open it in Chromium for its first
/// paint: `tests/browser/check_page.py`).
pub fn main(args: &[String], scratch: &Path) -> Result<(), String> {
    let mut ranks: Vec<usize> = vec![1_000, 16_000, 100_000];
    let mut per_node = 32usize;
    let mut mpi = Mpi::OpenMpi;
    let mut only: Option<String> = None;
    let mut records_file: Option<PathBuf> = None;
    let mut html: Option<PathBuf> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().cloned().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--ranks" => ranks = crate::parse_list(&val()?, "--ranks"),
            "--per-node" => per_node = crate::parse_list(&val()?, "--per-node")[0],
            "--mpi" => {
                mpi = crate::stacks::parse_mpi(&val()?)?;
            }
            "--only" => only = Some(val()?),
            "--records" => records_file = Some(PathBuf::from(val()?)),
            "--html" => html = Some(PathBuf::from(val()?)),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    let records_file = match records_file {
        Some(f) if f.is_file() => f,
        given => {
            let file = given.unwrap_or_else(|| scratch.join("records.json"));
            let mut records = Vec::new();
            let kinds = [
                (Example::Deadlock, 8, &[][..]),
                (Example::BarrierVsRecv, 4, &[][..]),
                (Example::ComputeStuck, 4, &[][..]),
                (Example::ManyOps, 4, &["10"][..]),
            ];
            if let Some(o) = &only {
                if !kinds.iter().any(|(e, ..)| e.name() == o) {
                    return Err(format!(
                        "--only {o}: not one of deadlock, barrier_vs_recv, compute_stuck, many_ops"
                    ));
                }
            }
            for (example, n, args) in kinds {
                if only.as_deref().is_some_and(|o| o != example.name()) {
                    continue;
                }
                let t = Instant::now();
                let r = record(mpi, example, n, args)?;
                eprintln!("recorded {} on {mpi} in {:.1} s", r.name, t.elapsed().as_secs_f64());
                records.push(r);
            }
            let json = serde_json::to_vec(&records).map_err(|e| e.to_string())?;
            std::fs::write(&file, json).map_err(|e| e.to_string())?;
            file
        }
    };
    let sim = stand_ins(scratch)?;
    println!(
        "| ranks | nodes | `mpiq job` wall s | peak RSS MiB | exit | verdict at line | report lines | first line |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut rows = Vec::new();
    for &n in &ranks {
        let row = one(&records_file, &sim, n, per_node, scratch, html.as_deref())?;
        println!(
            "| {} | {} | {:.2} | {:.0} | {} | {} | {} | {} |",
            row.ranks,
            row.nodes,
            row.wall_ms / 1e3,
            row.peak_mib,
            row.exit.map_or("-".into(), |c| c.to_string()),
            row.verdict_line,
            row.lines,
            row.first_line.chars().take(60).collect::<String>()
        );
        rows.push(row);
    }
    // The verdict's own line (after "Deadlock analysis:") of each row, whole.
    for row in &rows {
        println!("summary at {} ranks: {}", row.ranks, row.summary);
    }
    if let Some(dir) = &html {
        for row in &rows {
            let page = dir.join(format!("scale-{}.html", row.ranks));
            let size = std::fs::metadata(&page)
                .map_err(|e| format!("{}: {e}", page.display()))?
                .len();
            println!(
                "page at {} ranks: {} ({:.2} MB)",
                row.ranks,
                page.display(),
                size as f64 / 1e6
            );
        }
    }
    Ok(())
}
