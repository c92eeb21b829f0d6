//! From the merged stacks to a full debugger: for each group of ranks at
//! the same place (each leaf of the compact tree, [`crate::stacks::tree`],
//! the groups "ranks 1-3: main > exchange > MPI_Recv" of the text), its
//! lowest rank and the commands that open that rank in gdb and in lldb with
//! mpiq loaded:
//!
//! ```text
//! Debug one rank of each group:
//!   ranks 1-3 in MPI_Recv: rank 1, pid 4243
//!     gdb -p 4243 -ex 'source /opt/mpiq/gdb-python/mpiq.py' -ex 'info mpi-queues'
//!     lldb -p 4243 -o 'plugin load /opt/mpiq/lib/libmpiq_lldb.so' -o 'mpi queues'
//! ```
//!
//! The front end says where the files are ([`Debuggers`]: it knows where it
//! is installed) and how each process is opened again ([`Opener`]: a live
//! pid, on this node or another, or a core file); this module makes the
//! command lines, quoted for a POSIX shell. A rank on another node runs
//! there: `srun --jobid=J --overlap -w NODE --pty ...` when the job's Slurm
//! id is known, else `ssh -t NODE '...'` (the same paths on every node, as
//! for `mpiq collect`).

use std::fmt::Write;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::snapshot::model::Snapshot;
use crate::stacks::ranks::{rank_ranges, ranks_text};
use crate::stacks::tree::{Mode, StackNode, StackTree, Task};

/// The most groups the text shows (the JSON has every one).
pub const MAX_TEXT_GROUPS: usize = 8;

/// Where the files that load mpiq into the debuggers are, as the front end
/// found them, or why they were not found and how to get them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Debuggers {
    /// `gdb-python/mpiq.py`.
    pub gdb_script: Result<PathBuf, String>,
    /// The `libmpiq.so` the script is to load (`MPIQ_LIB`), when it would
    /// not find that one by itself.
    pub gdb_library: Option<PathBuf>,
    /// The lldb to run (`lldb`, `lldb-16`).
    pub lldb: String,
    /// `libmpiq_lldb.so`.
    pub lldb_plugin: Result<PathBuf, String>,
}

/// How a process can be opened again in a debugger.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Opener {
    /// A live process, on this node (`None`) or another.
    Live {
        /// Its pid.
        pid: u32,
        /// The node it runs on, when not this one.
        node: Option<String>,
    },
    /// A core file and its executable.
    Core {
        /// The executable.
        exe: PathBuf,
        /// The core file.
        core: PathBuf,
    },
}

/// What the front end knows for the hand-off.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Handoff {
    /// The debuggers' files.
    pub debuggers: Debuggers,
    /// The job's Slurm id, when known: other nodes are reached through
    /// `srun --jobid`, else through `ssh`.
    pub slurm_job: Option<String>,
    /// How each process of the snapshot is opened again, by its index
    /// (`None`: it cannot be).
    pub openers: Vec<Option<Opener>>,
}

impl Handoff {
    /// The hand-off of live processes: each process's pid and node, as the
    /// snapshot has them.
    pub fn live(debuggers: Debuggers, snapshot: &Snapshot, slurm_job: Option<String>) -> Handoff {
        let openers = snapshot
            .processes
            .iter()
            .map(|p| {
                p.pid.map(|pid| Opener::Live {
                    pid,
                    node: p.node.clone(),
                })
            })
            .collect();
        Handoff {
            debuggers,
            slurm_job,
            openers,
        }
    }
}

/// One group of the merged stacks and how to debug its representative.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DebugGroup {
    /// Its threads (world rank, thread id), sorted.
    pub tasks: Vec<Task>,
    /// Where they are: the leaf's frame (the MPI call, or the innermost
    /// function of a thread outside MPI).
    pub at: String,
    /// The representative: the lowest rank that can be opened (-1: unknown).
    pub rank: i64,
    /// How it is opened.
    pub opener: Opener,
    /// The gdb command line, when `mpiq.py` was found.
    pub gdb: Option<String>,
    /// The lldb command line, when the plugin was found.
    pub lldb: Option<String>,
}

/// A word quoted for a POSIX shell: as it is when it holds only characters
/// no shell treats specially, else in single quotes (`'` as `'\''`).
pub fn shell_quote(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        return word.to_string();
    }
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// A path as an argument of an lldb command: in double quotes when it holds
/// a space or a quote (lldb splits its commands' arguments at spaces).
pub fn lldb_arg(path: &Path) -> String {
    let s = path.display().to_string();
    if s.chars()
        .any(|c| c.is_whitespace() || c == '"' || c == '\'' || c == '\\')
    {
        format!("\"{}\"", s.replace('\\', r"\\").replace('"', "\\\""))
    } else {
        s
    }
}

/// A command: its environment and its words.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct CommandLine {
    env: Vec<(String, PathBuf)>,
    argv: Vec<String>,
}

impl CommandLine {
    /// `VAR=value word...`, quoted for a shell.
    fn shell(&self) -> String {
        let env = self
            .env
            .iter()
            .map(|(k, v)| format!("{k}={}", shell_quote(&v.display().to_string())));
        let words = self.argv.iter().map(|w| shell_quote(w));
        env.chain(words).collect::<Vec<_>>().join(" ")
    }

    /// The command run on `node`: through srun into the Slurm job, or ssh.
    fn on_node(&self, node: &str, slurm_job: Option<&str>) -> String {
        match slurm_job {
            Some(job) => {
                let mut words: Vec<String> = vec![
                    "srun".into(),
                    format!("--jobid={job}"),
                    "--overlap".into(),
                    "-w".into(),
                    node.into(),
                    "--pty".into(),
                ];
                if !self.env.is_empty() {
                    words.push("env".into());
                    words.extend(self.env.iter().map(|(k, v)| format!("{k}={}", v.display())));
                }
                words.extend(self.argv.iter().cloned());
                words.iter().map(|w| shell_quote(w)).collect::<Vec<_>>().join(" ")
            }
            None => format!("ssh -t {} {}", shell_quote(node), shell_quote(&self.shell())),
        }
    }
}

/// The target arguments of a debugger: gdb's (`-p PID`, `EXE CORE`) or
/// lldb's (`-p PID`, `EXE -c CORE`).
fn target_words(opener: &Opener, lldb: bool) -> Vec<String> {
    match opener {
        Opener::Live { pid, .. } => vec!["-p".into(), pid.to_string()],
        Opener::Core { exe, core } => {
            let (exe, core) = (exe.display().to_string(), core.display().to_string());
            if lldb {
                vec![exe, "-c".into(), core]
            } else {
                vec![exe, core]
            }
        }
    }
}

/// The command line that opens `opener` in gdb with `mpiq.py` sourced and
/// runs `info mpi-queues`; `None` without the script.
pub fn gdb_command(d: &Debuggers, opener: &Opener, slurm_job: Option<&str>) -> Option<String> {
    let script = d.gdb_script.as_ref().ok()?;
    let mut cmd = CommandLine::default();
    if let Some(lib) = &d.gdb_library {
        cmd.env.push(("MPIQ_LIB".into(), lib.clone()));
    }
    cmd.argv.push("gdb".into());
    cmd.argv.extend(target_words(opener, false));
    // gdb's `source` takes the rest of the line as the file name.
    cmd.argv.extend([
        "-ex".into(),
        format!("source {}", script.display()),
        "-ex".into(),
        "info mpi-queues".into(),
    ]);
    Some(finish(&cmd, opener, slurm_job))
}

/// The command line that opens `opener` in lldb with the plugin loaded and
/// runs `mpi queues`; `None` without the plugin.
pub fn lldb_command(d: &Debuggers, opener: &Opener, slurm_job: Option<&str>) -> Option<String> {
    let plugin = d.lldb_plugin.as_ref().ok()?;
    let mut cmd = CommandLine::default();
    cmd.argv.push(d.lldb.clone());
    cmd.argv.extend(target_words(opener, true));
    cmd.argv.extend([
        "-o".into(),
        format!("plugin load {}", lldb_arg(plugin)),
        "-o".into(),
        "mpi queues".into(),
    ]);
    Some(finish(&cmd, opener, slurm_job))
}

fn finish(cmd: &CommandLine, opener: &Opener, slurm_job: Option<&str>) -> String {
    match opener {
        Opener::Live { node: Some(node), .. } => cmd.on_node(node, slurm_job),
        _ => cmd.shell(),
    }
}

/// The groups of the compact merged stacks (leaves: nodes where threads'
/// stacks end), biggest first, then by their smallest thread, as the
/// compact text lists them: (threads, the leaf's frame).
fn leaf_groups(tree: &StackTree) -> Vec<(Vec<Task>, String)> {
    let mut out = Vec::new();
    let mut todo: Vec<&StackNode> = tree.roots.iter().collect();
    while let Some(node) = todo.pop() {
        let ending = node.ending_tasks();
        if !ending.is_empty() {
            out.push((ending, node.label.clone()));
        }
        todo.extend(node.children.iter());
    }
    out.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.first().cmp(&b.0.first())));
    out
}

/// One group per leaf of the snapshot's compact merged stacks, represented
/// by its lowest rank that can be opened again (a process with an opener);
/// a group with none is left out.
pub fn groups(snapshot: &Snapshot, handoff: &Handoff) -> Vec<DebugGroup> {
    let tree = StackTree::build(snapshot, Mode::Compact);
    let slurm = handoff.slurm_job.as_deref();
    let mut out = Vec::new();
    for (tasks, at) in leaf_groups(&tree) {
        // The lowest known rank whose process can be opened again (every
        // thread of a group is at the same place), else one of unknown rank.
        let known = tasks.iter().filter(|t| t.0 >= 0);
        let unknown = tasks.iter().filter(|t| t.0 < 0);
        let Some((rank, opener)) = known.chain(unknown).find_map(|&(rank, tid)| {
            let index = snapshot.processes.iter().position(|p| {
                p.world_rank.map_or(-1, i64::from) == rank
                    && p.stacks
                        .as_ref()
                        .is_some_and(|s| s.threads.iter().any(|t| t.tid == tid))
            })?;
            Some((rank, handoff.openers.get(index).cloned().flatten()?))
        }) else {
            continue;
        };
        out.push(DebugGroup {
            gdb: gdb_command(&handoff.debuggers, &opener, slurm),
            lldb: lldb_command(&handoff.debuggers, &opener, slurm),
            tasks,
            at,
            rank,
            opener,
        });
    }
    out
}

/// "rank 1, pid 4243 on n2", "rank 1, core /x/core.4243".
fn who(g: &DebugGroup) -> String {
    let rank = if g.rank < 0 {
        "rank ?".to_string()
    } else {
        format!("rank {}", g.rank)
    };
    match &g.opener {
        Opener::Live { pid, node: None } => format!("{rank}, pid {pid}"),
        Opener::Live { pid, node: Some(n) } => format!("{rank}, pid {pid} on {n}"),
        Opener::Core { core, .. } => format!("{rank}, core {}", core.display()),
    }
}

/// What is missing for a debugger's command lines, as notes.
fn notes(d: &Debuggers) -> Vec<String> {
    let mut out = Vec::new();
    if let Err(why) = &d.gdb_script {
        out.push(format!("gdb: {why}"));
    }
    if let Err(why) = &d.lldb_plugin {
        out.push(format!("lldb: {why}"));
    }
    out
}

/// The text section: a title, then per group (at most
/// [`MAX_TEXT_GROUPS`]) its ranks and representative, and the gdb and lldb
/// lines; empty without groups.
pub fn text(groups: &[DebugGroup], d: &Debuggers) -> String {
    if groups.is_empty() {
        return String::new();
    }
    let mut out = String::from("Debug one rank of each group:\n");
    for g in groups.iter().take(MAX_TEXT_GROUPS) {
        let ranks: Vec<i64> = g.tasks.iter().map(|t| t.0).collect();
        let _ = writeln!(out, "  {} in {}: {}", ranks_text(&ranks), g.at, who(g));
        for line in [&g.gdb, &g.lldb].into_iter().flatten() {
            let _ = writeln!(out, "    {line}");
        }
    }
    if groups.len() > MAX_TEXT_GROUPS {
        let _ = writeln!(
            out,
            "  ... {} more groups (every one in the JSON's debug_commands)",
            groups.len() - MAX_TEXT_GROUPS
        );
    }
    for n in notes(d) {
        let _ = writeln!(out, "  {n}");
    }
    out
}

/// The JSON value `debug_commands`: `groups` (each `ranks` as ranges, `at`,
/// `rank`, `pid`, `node`, `core`, `gdb`, `lldb`) and `notes`.
pub fn json(groups: &[DebugGroup], d: &Debuggers) -> Value {
    let groups: Vec<Value> = groups
        .iter()
        .map(|g| {
            let mut ranks: Vec<i64> = g.tasks.iter().map(|t| t.0).collect();
            ranks.dedup();
            let ranges: Vec<Value> = rank_ranges(&ranks).into_iter().map(|[a, b]| json!([a, b])).collect();
            let (pid, node, core) = match &g.opener {
                Opener::Live { pid, node } => (Some(*pid), node.clone(), None),
                Opener::Core { core, .. } => (None, None, Some(core.display().to_string())),
            };
            json!({
                "ranks": ranges,
                "at": g.at,
                "rank": g.rank,
                "pid": pid,
                "node": node,
                "core": core,
                "gdb": g.gdb,
                "lldb": g.lldb,
            })
        })
        .collect();
    json!({ "groups": groups, "notes": notes(d) })
}

#[cfg(test)]
#[path = "handoff_tests.rs"]
mod tests;
