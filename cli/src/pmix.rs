//! The ranks of a job whose launcher has no proctable but runs a PMIx
//! server: Open MPI 5's `mpirun`, which execs PRRTE's `prterun`. mpiq asks
//! that server through the PMIx tool interface, with the launcher's own
//! `libpmix` (the one it maps; a tool and its server must agree on the
//! wire protocol), in a helper process (`mpiq pmix-proctable`, hidden):
//! `PMIx_tool_init` starts threads and the library brings its own libevent
//! and hwloc, none of which belongs in mpiq, and a server that does not
//! answer must not hang it. The helper ([`tool`]) prints one line of JSON;
//! the parent waits for it at most [`timeout`], and never kills it (see
//! [`run_helper`]: that could crash the server).
//!
//! 1. The library: the `libpmix.so*` in `/proc/PID/maps` ([`library_of`]).
//! 2. The launcher's TMPDIR (only that variable of its environment is
//!    read; `/tmp` when unset; `MPIQ_PMIX_TMPDIR` overrides it), where the
//!    server wrote its rendezvous file `pmix.HOST.tool.PID` (in PRRTE's
//!    session directory below it). mpiq finds that file itself and checks
//!    that it names the launcher's pid: PMIx's own search by
//!    `PMIX_SERVER_PIDINFO` matches file names by prefix (pid 1545 takes
//!    the file of pid 15457), so the helper connects through the file
//!    (`PMIX_TOOL_ATTACHMENT_FILE`), with `PMIX_SERVER_PIDINFO` and
//!    `PMIX_SERVER_TMPDIR`/`PMIX_SYSTEM_TMPDIR` beside it.
//! 3. `PMIx_Query_info(PMIX_QUERY_NAMESPACES)`, then
//!    `PMIX_QUERY_PROC_TABLE` for each namespace but the tool's own
//!    (qualified by `PMIX_NSPACE`); the job is the namespace whose table
//!    does not hold the launcher itself (PRRTE's DVM), the first by job
//!    number when there are several (`MPI_Comm_spawn`).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub mod abi;
mod rendezvous;
mod tool;
pub use rendezvous::{find_rendezvous, launcher_tmpdir, library_of, TmpdirSource};
pub use tool::helper_main;

/// How long the helper may take unless `MPIQ_PMIX_TIMEOUT_MS` says
/// otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The helper's time limit: `MPIQ_PMIX_TIMEOUT_MS`, else [`DEFAULT_TIMEOUT`].
pub fn timeout() -> Duration {
    std::env::var("MPIQ_PMIX_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|&ms| ms > 0)
        .map_or(DEFAULT_TIMEOUT, Duration::from_millis)
}

/// One process of a PMIx proc table (`pmix_proc_info_t`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PmixProcEntry {
    /// `proc.rank`: the rank in the namespace (its `MPI_COMM_WORLD`).
    pub rank: u32,
    /// `hostname`
    pub host: String,
    /// `executable_name`
    pub executable: String,
    /// `pid`
    pub pid: i32,
    /// `state` (`pmix_proc_state_t`).
    pub state: u8,
    /// `PMIx_Proc_state_string(state)`, when the library has it.
    pub state_name: String,
}

/// One namespace's proc table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PmixJob {
    /// The namespace.
    pub namespace: String,
    /// Its processes, as the server lists them.
    pub procs: Vec<PmixProcEntry>,
}

/// What the helper learnt from the server.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HelperReply {
    /// `PMIx_Get_version()` of the library.
    pub version: String,
    /// The namespace the server gave the helper (left out of `jobs`).
    pub tool_namespace: String,
    /// The tables of the other namespaces, by job number, up to the first
    /// that is the launcher's job ([`is_job_of`]).
    pub jobs: Vec<PmixJob>,
    /// The namespaces after it, not queried.
    pub skipped: Vec<String>,
    /// Milliseconds in `PMIx_tool_init`.
    pub init_ms: f64,
    /// Milliseconds in the queries.
    pub query_ms: f64,
}

/// Why the helper got no table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum HelperFailure {
    /// `dlopen` failed.
    Load(String),
    /// A needed function is missing: the library is too old.
    Missing {
        /// The function.
        symbol: String,
        /// `PMIx_Get_version()`, when there is one.
        version: String,
    },
    /// A call failed.
    Status {
        /// The call.
        call: String,
        /// Its `pmix_status_t`.
        status: i32,
        /// `PMIx_Error_string(status)`.
        name: String,
    },
    /// The server's answer is not what the headers describe.
    Malformed(String),
    /// The helper panicked.
    Panic(String),
}

/// The one line the helper prints.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum HelperOutput {
    /// The server's tables.
    Reply(HelperReply),
    /// Why not.
    Failed(HelperFailure),
}

/// What the helper is asked (`mpiq pmix-proctable`'s arguments).
#[derive(Clone, Debug)]
pub struct HelperRequest {
    /// The launcher.
    pub pid: i32,
    /// Its `libpmix`.
    pub library: PathBuf,
    /// Its TMPDIR.
    pub tmpdir: PathBuf,
    /// Its rendezvous file.
    pub rendezvous: PathBuf,
}

/// The job's table, as the parent uses it.
#[derive(Clone, Debug, PartialEq)]
pub struct ProcTable {
    /// The job's namespace.
    pub namespace: String,
    /// Its processes, by rank.
    pub procs: Vec<PmixProcEntry>,
    /// The server's other namespaces after the job's (left out).
    pub others: Vec<String>,
    /// The library's version.
    pub version: String,
    /// Time from the helper's start to its answer.
    pub elapsed: Duration,
    /// Milliseconds the helper spent in `PMIx_tool_init`.
    pub init_ms: f64,
    /// Milliseconds the helper spent in the queries.
    pub query_ms: f64,
}

/// Why the PMIx server gave no proc table.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PmixFailure {
    /// No rendezvous file of the launcher's pid below TMPDIR.
    #[error(
        "PMIX_ERR_UNREACH: no rendezvous file for it in TMPDIR={} ({})",
        tmpdir.display(),
        from.describe()
    )]
    NoRendezvous {
        /// The directory searched.
        tmpdir: PathBuf,
        /// Where it came from.
        from: TmpdirSource,
    },
    /// The rendezvous file cannot be read (another user's server).
    #[error("permission denied: {} belongs to uid {owner}, mpiq runs as uid {me} (a different user's job)", file.display())]
    PermissionDenied {
        /// The file.
        file: PathBuf,
        /// Its owner.
        owner: u32,
        /// Our effective uid.
        me: u32,
    },
    /// The library lacks a function.
    #[error("PMIx library too old: {} ({version}) has no {symbol}", library.display())]
    TooOld {
        /// The library.
        library: PathBuf,
        /// Its version.
        version: String,
        /// The function.
        symbol: String,
    },
    /// The helper did not answer in time.
    #[error(
        "no answer within {:.1} s (MPIQ_PMIX_TIMEOUT_MS sets the limit); mpiq's helper, pid {helper}, \
         ends by itself once the server answers or goes away (ending it while the server handles its \
         connection could crash the launcher)",
        limit.as_secs_f64()
    )]
    Timeout {
        /// The limit.
        limit: Duration,
        /// The helper left running.
        helper: u32,
    },
    /// The launcher is stopped (a debugger, SIGSTOP): its server cannot
    /// answer.
    #[error("the launcher is stopped (state {0} in /proc): its PMIx server cannot answer")]
    Stopped(char),
    /// A PMIx call failed.
    #[error("{call} failed: {name} ({status}){hint}")]
    Status {
        /// The call.
        call: String,
        /// Its status.
        status: i32,
        /// Its name.
        name: String,
        /// What it likely means.
        hint: String,
    },
    /// The server runs no job (only the DVM's and mpiq's namespaces).
    #[error("the server lists no job namespace (namespaces: {0})")]
    NoJob(String),
    /// The helper failed otherwise.
    #[error("{0}")]
    Helper(String),
}

impl PmixFailure {
    /// Whether the server could not be reached at all (else it answered
    /// badly).
    fn unreachable(&self) -> bool {
        match self {
            PmixFailure::NoRendezvous { .. }
            | PmixFailure::PermissionDenied { .. }
            | PmixFailure::Timeout { .. }
            | PmixFailure::Stopped(_) => true,
            PmixFailure::Status { call, .. } => call == "PMIx_tool_init",
            _ => false,
        }
    }
}

/// A failed query of the server of one launcher.
#[derive(Debug)]
pub struct PmixError {
    /// The launcher.
    pub pid: i32,
    /// Its name (`/proc/PID/comm`).
    pub name: String,
    /// Why.
    pub failure: PmixFailure,
}

impl std::fmt::Display for PmixError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = if self.failure.unreachable() {
            "cannot reach the PMIx server of"
        } else {
            "cannot read the proc table from the PMIx server of"
        };
        write!(f, "{what} process {} ({}): {}", self.pid, self.name, self.failure)
    }
}

impl std::error::Error for PmixError {}

/// The helper's command. Its environment is mpiq's without `PMIX_*` (but
/// `PMIX_MCA_*`, PMIx's own settings), so that an mpiq that itself runs
/// inside an MPI job does not make the tool a client of that job's server.
/// It runs in a process group of its own (a Ctrl-C at mpiq's terminal does
/// not reach it), with no `PR_SET_PDEATHSIG`, and keeps mpiq's blocked
/// SIGINT, SIGTERM and SIGHUP: see [`run_helper`].
fn helper_command(req: &HelperRequest) -> Command {
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/proc/self/exe"));
    let mut cmd = Command::new(exe);
    cmd.arg("pmix-proctable")
        .arg("--pid")
        .arg(req.pid.to_string())
        .arg("--library")
        .arg(&req.library)
        .arg("--tmpdir")
        .arg(&req.tmpdir)
        .arg("--rendezvous")
        .arg(&req.rendezvous);
    for (key, _) in std::env::vars_os() {
        if key
            .to_str()
            .is_some_and(|k| k.starts_with("PMIX_") && !k.starts_with("PMIX_MCA_"))
        {
            cmd.env_remove(key);
        }
    }
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.process_group(0);
    cmd
}

/// Runs the helper: its output line and its standard error, or the time
/// limit it missed.
///
/// A helper that misses the limit is *not* killed: a tool that dies while
/// the server handles its connection crashes the server (the prterun of
/// Open MPI 5.0.7 and 5.0.10 segfaults after `ptl_base_connection_hdlr.c`
/// finds its answer to the handshake meeting a closed socket, and the job
/// dies with it; a tool that dies once connected is harmless). So it is left to end by itself
/// once the server answers or goes away (a thread reaps it), and nothing
/// ends it early: not a Ctrl-C (its own process group), not mpiq's end (no
/// `PR_SET_PDEATHSIG`), not SIGTERM (blocked, as in mpiq).
fn run_helper(req: &HelperRequest, limit: Duration) -> Result<(HelperOutput, String), PmixFailure> {
    let mut child = helper_command(req)
        .spawn()
        .map_err(|e| PmixFailure::Helper(format!("cannot start mpiq's PMIx helper: {e}")))?;
    let reader = |stream: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(s) = stream {
                let _ = s.take(1 << 20).read_to_string(&mut text);
            }
            text
        })
    };
    let out = reader(child.stdout.take().map(|s| Box::new(s) as Box<dyn Read + Send>));
    let err = reader(child.stderr.take().map(|s| Box::new(s) as Box<dyn Read + Send>));
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() < limit => std::thread::sleep(Duration::from_millis(2)),
            _ => {
                let pid = child.id();
                std::thread::spawn(move || child.wait());
                return Err(PmixFailure::Timeout { limit, helper: pid });
            }
        }
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    match stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<HelperOutput>(l).ok())
    {
        Some(o) => Ok((o, stderr)),
        None => Err(PmixFailure::Helper(format!(
            "mpiq's PMIx helper ended ({status}) without an answer{}",
            tail(&stderr)
        ))),
    }
}

/// The last lines of a helper's standard error, for a message.
fn tail(stderr: &str) -> String {
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return String::new();
    }
    let from = lines.len().saturating_sub(4);
    format!("; it said: {}", lines[from..].join(" | "))
}

/// The job number of a PRRTE namespace, `NAME@N`.
fn job_number(ns: &str) -> Option<u64> {
    ns.rsplit_once('@').and_then(|(_, n)| n.parse().ok())
}

/// Whether a namespace's processes are a job of the launcher: some, and
/// not the launcher itself (PRRTE's DVM).
fn is_job_of(procs: &[PmixProcEntry], launcher: i32) -> bool {
    !procs.is_empty() && !procs.iter().any(|p| p.pid == launcher)
}

/// The job among the server's namespaces ([`is_job_of`]), the first by
/// job number; and the other namespaces.
fn pick_job(launcher: i32, mut jobs: Vec<PmixJob>) -> Result<(PmixJob, Vec<String>), PmixFailure> {
    let all: Vec<String> = jobs.iter().map(|j| j.namespace.clone()).collect();
    jobs.sort_by_key(|j| (job_number(&j.namespace).unwrap_or(u64::MAX), j.namespace.clone()));
    let Some(at) = jobs.iter().position(|j| is_job_of(&j.procs, launcher)) else {
        return Err(PmixFailure::NoJob(if all.is_empty() {
            "none".into()
        } else {
            all.join(", ")
        }));
    };
    let mut job = jobs.remove(at);
    job.procs.sort_by_key(|p| p.rank);
    job.procs.dedup_by_key(|p| p.rank);
    let others = jobs
        .into_iter()
        .filter(|j| is_job_of(&j.procs, launcher))
        .map(|j| j.namespace)
        .collect();
    Ok((job, others))
}

/// The proc table of the job of `launcher`, whose PMIx library is
/// `library`, through the helper. `state` is the launcher's state in /proc
/// as the caller saw it before stopping it itself, if it did (a process
/// that was stopped goes back to its stop only some time after ptrace
/// lets it go).
pub fn proc_table(launcher: i32, library: &Path, state: Option<char>) -> Result<ProcTable, PmixError> {
    let name = std::fs::read_to_string(format!("/proc/{launcher}/comm"))
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let fail = |failure| PmixError {
        pid: launcher,
        name: name.clone(),
        failure,
    };
    // A stopped server would answer once it runs again, after mpiq gave
    // up: not a connection to leave open (see run_helper).
    let now = crate::procs::Stat::of(launcher).map(|s| s.state);
    if let Some(state @ ('T' | 't')) = state.filter(|s| matches!(s, 'T' | 't')).or(now) {
        return Err(fail(PmixFailure::Stopped(state)));
    }
    let (tmpdir, source) = launcher_tmpdir(launcher);
    let rendezvous = find_rendezvous(launcher, &tmpdir, source).map_err(fail)?;
    let req = HelperRequest {
        pid: launcher,
        library: library.to_path_buf(),
        tmpdir,
        rendezvous,
    };
    let start = Instant::now();
    let (out, stderr) = run_helper(&req, timeout()).map_err(fail)?;
    let elapsed = start.elapsed();
    let reply = match out {
        HelperOutput::Reply(r) => r,
        HelperOutput::Failed(f) => return Err(fail(failure_of(f, &req, &stderr))),
    };
    let (job, mut others) = pick_job(launcher, reply.jobs).map_err(fail)?;
    others.extend(reply.skipped);
    Ok(ProcTable {
        namespace: job.namespace,
        procs: job.procs,
        others,
        version: reply.version,
        elapsed,
        init_ms: reply.init_ms,
        query_ms: reply.query_ms,
    })
}

/// The parent's words for the helper's failure.
fn failure_of(f: HelperFailure, req: &HelperRequest, stderr: &str) -> PmixFailure {
    match f {
        HelperFailure::Missing { symbol, version } => PmixFailure::TooOld {
            library: req.library.clone(),
            version: if version.is_empty() {
                "version unknown".into()
            } else {
                version
            },
            symbol,
        },
        HelperFailure::Status { call, status, name } => {
            let hint = match status {
                abi::PMIX_ERR_UNREACH | abi::PMIX_ERR_NOT_FOUND if call == "PMIx_tool_init" => format!(
                    ": the server did not accept a connection through {}",
                    req.rendezvous.display()
                ),
                abi::PMIX_ERR_NO_PERMISSIONS => ": the server refused mpiq (a different user?)".into(),
                abi::PMIX_ERR_NOT_SUPPORTED => ": the server does not support this query".into(),
                _ => String::new(),
            };
            PmixFailure::Status {
                call,
                status,
                name,
                hint: format!("{hint}{}", tail(stderr)),
            }
        }
        HelperFailure::Load(why) => PmixFailure::Helper(format!("cannot load {}: {why}", req.library.display())),
        HelperFailure::Malformed(why) => PmixFailure::Helper(format!("unexpected answer: {why}")),
        HelperFailure::Panic(why) => PmixFailure::Helper(format!("mpiq's PMIx helper failed: {why}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc(rank: u32, pid: i32) -> PmixProcEntry {
        PmixProcEntry {
            rank,
            host: "h".into(),
            executable: "/x".into(),
            pid,
            state: 6,
            state_name: String::new(),
        }
    }

    #[test]
    fn the_job_is_not_the_dvm_and_comes_first() {
        let jobs = vec![
            PmixJob {
                namespace: "prterun-vm-9@2".into(),
                procs: vec![proc(0, 50)],
            },
            PmixJob {
                namespace: "prterun-vm-9@0".into(),
                procs: vec![proc(0, 9)],
            },
            PmixJob {
                namespace: "prterun-vm-9@1".into(),
                procs: vec![proc(1, 11), proc(0, 10), proc(1, 11)],
            },
        ];
        let (job, others) = pick_job(9, jobs).unwrap();
        assert_eq!(job.namespace, "prterun-vm-9@1");
        assert_eq!(job.procs.iter().map(|p| p.pid).collect::<Vec<_>>(), [10, 11]);
        assert_eq!(others, ["prterun-vm-9@2"]);
        let only_dvm = vec![PmixJob {
            namespace: "d@0".into(),
            procs: vec![proc(0, 9)],
        }];
        assert!(matches!(pick_job(9, only_dvm), Err(PmixFailure::NoJob(n)) if n == "d@0"));
    }
}
