//! Driving mpiq's three front ends from tests and benchmarks: real
//! `gdb -batch` with the Python shim, real lldb `-b` with the plugin, and
//! the `mpiq` CLI, each returning a [`Run`] (output, status, and the
//! snapshot JSON in it), always within a timeout.
//!
//! What is driven, and how to point the tests elsewhere:
//!
//! | | default | override |
//! |---|---|---|
//! | gdb's library | `<profile>/libmpiq.so` | `$MPIQ_LIB` |
//! | lldb | `lldb-16` | `$MPIQ_LLDB` |
//! | lldb's plugin | `<profile>/libmpiq_lldb.so` | `$MPIQ_LLDB_PLUGIN` |
//! | the CLI | `<profile>/mpiq` | — |
//!
//! The artifacts come from the same cargo profile as the running test
//! (`cargo build --workspace [--release]` first; `scripts/test` does).
//! The drivers that take a pid ([`gdb`], [`gdb_command`], [`lldb`],
//! [`lldb_interactive`], [`queues`], [`snapshot`]) check first that ptrace
//! attach is allowed ([`crate::ptrace::require_ptrace`]); the `*_on` builders
//! take any target arguments and leave that to the caller.

mod interactive;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;

pub use crate::run::Run;
use crate::run::{run, run_within, DEFAULT_TIMEOUT};
pub use interactive::{lldb_interactive, Step};

/// One of mpiq's front ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrontEnd {
    /// gdb with `gdb-python/mpiq.py`: `info mpi-queues`.
    Gdb,
    /// lldb ([`lldb_binary`]) with `libmpiq_lldb.so`: `mpi queues`.
    Lldb,
    /// The standalone `mpiq queues --pid`.
    Cli,
}

impl FrontEnd {
    /// All three.
    pub const ALL: [FrontEnd; 3] = [FrontEnd::Gdb, FrontEnd::Lldb, FrontEnd::Cli];
}

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The cargo profile directory of the running test (`target/release`, ...).
pub fn artifacts_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("test binary directory");
    let dir = if deps.ends_with("deps") {
        deps.parent().expect("profile directory")
    } else {
        deps
    };
    dir.to_path_buf()
}

/// Where the debuggers the tests start keep the indexes of the objects'
/// debug information they build (`debugger-index-cache/` in the profile
/// directory, kept with the build): the test bed's MPI libraries are read
/// by hundreds of gdb and lldb sessions, and indexing them again in each
/// was half of what a session cost (gdb 1.05 s of CPU to 0.5, lldb 1.1 to
/// 0.7, on one rank of Open MPI 4.1.4). Keyed by build id (gdb) and by
/// path and time (lldb): a rebuilt object is indexed again.
pub fn debugger_index_cache(debugger: &str) -> PathBuf {
    artifacts_dir().join("debugger-index-cache").join(debugger)
}

/// gdb options (before the target is loaded) that use [`debugger_index_cache`].
pub fn with_gdb_index_cache(cmd: &mut Command) -> &mut Command {
    let dir = debugger_index_cache("gdb");
    cmd.arg("-iex")
        .arg(format!("set index-cache directory {}", dir.display()))
        .args(["-iex", "set index-cache enabled on"])
}

/// lldb options (before the target is loaded) that use [`debugger_index_cache`].
pub fn with_lldb_index_cache(cmd: &mut Command) -> &mut Command {
    let dir = debugger_index_cache("lldb");
    cmd.arg("-O")
        .arg(format!("settings set symbols.lldb-index-cache-path {}", dir.display()))
        .args(["-O", "settings set symbols.enable-lldb-index-cache true"])
}

/// An artifact of the build, which must exist.
pub fn artifact(name: &str) -> PathBuf {
    let p = artifacts_dir().join(name);
    assert!(
        p.exists(),
        "{} is missing: build the workspace first (cargo build --workspace, with --release for \
         cargo test --release; scripts/test does both)",
        p.display()
    );
    p
}

// --- gdb ---------------------------------------------------------------------------------

/// The Python shim gdb sources.
pub fn mpiq_py() -> PathBuf {
    workspace_root().join("gdb-python/mpiq.py")
}

/// The `libmpiq.so` gdb's shim loads: `$MPIQ_LIB`, or the build's.
pub fn libmpiq() -> PathBuf {
    match std::env::var_os("MPIQ_LIB").filter(|p| !p.is_empty()) {
        Some(p) => PathBuf::from(p),
        None => artifact("libmpiq.so"),
    }
}

/// `gdb -batch -nx -q` with `MPIQ_LIB` set ([`libmpiq`]), running
/// `source mpiq.py`, then `commands` (each an `-ex`), on `target`: `-p PID`,
/// `EXE CORE`, `--args EXE ARGS...`, or nothing.
pub fn gdb_command_on<S: AsRef<OsStr>>(target: &[S], commands: &[&str]) -> Command {
    let mut cmd = Command::new("gdb");
    cmd.args(["-batch", "-nx", "-q"]);
    with_gdb_index_cache(&mut cmd);
    cmd.env("MPIQ_LIB", libmpiq())
        .arg("-ex")
        .arg(format!("source {}", mpiq_py().display()));
    for c in commands {
        cmd.arg("-ex").arg(c);
    }
    cmd.args(target);
    cmd
}

/// The command [`gdb`] runs (attached to `pid`), for tests and benchmarks
/// that add to it or start it themselves.
pub fn gdb_command(pid: u32, commands: &[&str]) -> Command {
    crate::ptrace::require_ptrace();
    gdb_command_on(&["-p", &pid.to_string()], commands)
}

/// `gdb -batch -nx -p PID` running `source mpiq.py` and then `commands`,
/// within [`DEFAULT_TIMEOUT`]. gdb detaches at the end; the process goes on.
pub fn gdb(pid: u32, commands: &[&str]) -> Run {
    run(gdb_command(pid, commands))
}

impl Run {
    /// Panics with the output if gdb printed a Python exception (the shim
    /// must turn every failure into a gdb error).
    pub fn assert_no_python_errors(&self) {
        for bad in [
            "Traceback",
            "Python Exception",
            "Exception ignored",
            "Error occurred in Python",
        ] {
            assert!(
                !self.stderr.contains(bad) && !self.stdout.contains(bad),
                "{bad} in gdb's output:\n{self}"
            );
        }
    }
}

// --- lldb --------------------------------------------------------------------------------

/// The lldb to drive: `$MPIQ_LLDB`, default `lldb-16`.
pub fn lldb_binary() -> String {
    std::env::var("MPIQ_LLDB")
        .ok()
        .filter(|l| !l.is_empty())
        .unwrap_or_else(|| "lldb-16".into())
}

/// The plugin lldb loads: `$MPIQ_LLDB_PLUGIN` (which must exist), or the
/// build's `libmpiq_lldb.so`.
pub fn lldb_plugin() -> &'static Path {
    static PLUGIN: OnceLock<PathBuf> = OnceLock::new();
    PLUGIN.get_or_init(
        || match std::env::var_os("MPIQ_LLDB_PLUGIN").filter(|p| !p.is_empty()) {
            Some(path) => {
                let path = PathBuf::from(path);
                assert!(path.is_file(), "MPIQ_LLDB_PLUGIN={} does not exist", path.display());
                path
            }
            None => artifact("libmpiq_lldb.so"),
        },
    )
}

/// `lldb -b --no-lldbinit` loading the plugin, then running `commands`
/// (each an `-o`), on `target`: `-p PID`, `-c CORE EXE`, `EXE`,
/// `-- EXE ARGS...`, or nothing. lldb detaches from an attached process
/// when it quits, so the process goes on.
pub fn lldb_command_on<S: AsRef<OsStr>>(target: &[S], commands: &[&str]) -> Command {
    let mut cmd = Command::new(lldb_binary());
    cmd.args(["-b", "--no-lldbinit"]);
    with_lldb_index_cache(&mut cmd);
    cmd.arg("-o").arg(format!("plugin load {}", lldb_plugin().display()));
    for c in commands {
        cmd.arg("-o").arg(c);
    }
    cmd.args(target);
    cmd
}

/// [`lldb_command_on`] that writes `commands` to the file `script` and
/// runs them with `command source --stop-on-error false`, so that a failing
/// command does not end the batch.
pub fn lldb_command_sourcing<S: AsRef<OsStr>>(script: &Path, target: &[S], commands: &[&str]) -> Command {
    std::fs::write(script, commands.join("\n") + "\n")
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", script.display()));
    let source = format!("command source --stop-on-error false {}", script.display());
    lldb_command_on(target, &[&source])
}

/// Runs an lldb command line ([`lldb_command_on`]) within `timeout`; fails
/// the test if lldb crashed ("PLEASE submit a bug report").
pub fn run_lldb(cmd: Command, timeout: Duration) -> Run {
    let r = run_within(cmd, timeout);
    assert!(!r.stderr.contains("PLEASE submit a bug report"), "lldb crashed:\n{r}");
    r
}

/// lldb attached to `pid` (`-p PID`), loading the plugin and then running
/// `commands`, within [`DEFAULT_TIMEOUT`].
pub fn lldb(pid: u32, commands: &[&str]) -> Run {
    crate::ptrace::require_ptrace();
    run_lldb(lldb_command_on(&["-p", &pid.to_string()], commands), DEFAULT_TIMEOUT)
}

impl Run {
    /// The output of the lldb command `command` in an `lldb -b` run: the
    /// lines after its `(lldb) command` echo, up to the next echoed command.
    pub fn lldb_output_of(&self, command: &str) -> String {
        let echo = format!("(lldb) {command}");
        let mut lines = self.stdout.lines().skip_while(|l| *l != echo);
        assert!(lines.next().is_some(), "`{command}` was not run:\n{self}");
        lines
            .take_while(|l| !l.starts_with("(lldb) "))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The JSON snapshot the lldb command `command` printed (schema
    /// checked).
    pub fn lldb_json_of(&self, command: &str) -> Value {
        let text = self.lldb_output_of(command);
        let json = serde_json::from_str::<Value>(&text)
            .unwrap_or_else(|e| panic!("`{command}` printed no JSON snapshot ({e}):\n{self}"));
        assert_eq!(json["schema"], "mpiq.snapshot/2", "{json:#}");
        json
    }
}

// --- the CLI -----------------------------------------------------------------------------

/// `mpiq ARGS...`, the build's CLI, as a command to add to or start.
pub fn cli_command(args: &[&str]) -> Command {
    let mut cmd = Command::new(artifact("mpiq"));
    cmd.args(args);
    cmd
}

/// `mpiq ARGS...` within [`DEFAULT_TIMEOUT`].
pub fn cli(args: &[&str]) -> Run {
    run(cli_command(args))
}

/// `mpiq core CORE... ARGS...` within [`DEFAULT_TIMEOUT`].
pub fn cli_cores(cores: &[std::path::PathBuf], args: &[&str]) -> Run {
    let mut argv = vec!["core".to_string()];
    argv.extend(cores.iter().map(|c| c.display().to_string()));
    argv.extend(args.iter().map(|a| a.to_string()));
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    cli(&argv)
}

// --- any of the three ----------------------------------------------------------------------

/// The queue command of `fe` on process `pid` with `args` (e.g. `--json --all`).
pub fn queues(fe: FrontEnd, pid: u32, args: &str) -> Run {
    match fe {
        FrontEnd::Gdb => gdb(pid, &[&format!("info mpi-queues {args}")]),
        FrontEnd::Lldb => lldb(pid, &[&format!("mpi queues {args}")]),
        FrontEnd::Cli => {
            crate::ptrace::require_ptrace();
            let pid = pid.to_string();
            let mut a = vec!["queues", "--pid", pid.as_str()];
            a.extend(args.split_whitespace());
            cli(&a)
        }
    }
}

/// The snapshot JSON of each of `pids` through `fe`, as [`snapshot`] gives
/// it for one (`os` left out), read in one session: gdb and lldb attach to
/// each process in turn and detach (as a user going through the ranks of a
/// job does), the CLI reads them all in one call. A debugger's start costs
/// more than its reading of one process: a test that reads every rank of
/// a job pays it once. Each value holds the `schema` and that one process
/// (no analysis). Panics with the output unless every process was read.
pub fn snapshots(fe: FrontEnd, pids: &[u32], args: &str) -> Vec<Value> {
    crate::ptrace::require_ptrace();
    let each = |attach: &dyn Fn(u32) -> String, dump: &str, detach: &str| -> Vec<String> {
        pids.iter()
            .flat_map(|&pid| [attach(pid), format!("{dump} --json {args}"), detach.to_string()])
            .collect()
    };
    let r = match fe {
        FrontEnd::Gdb => {
            let commands = each(&|pid| format!("attach {pid}"), "info mpi-queues", "detach");
            let commands: Vec<&str> = commands.iter().map(String::as_str).collect();
            run(gdb_command_on(&[] as &[&str], &commands))
        }
        FrontEnd::Lldb => {
            let commands = each(
                &|pid| format!("process attach --pid {pid}"),
                "mpi queues",
                "process detach",
            );
            let commands: Vec<&str> = commands.iter().map(String::as_str).collect();
            run_lldb(lldb_command_on(&[] as &[&str], &commands), DEFAULT_TIMEOUT)
        }
        FrontEnd::Cli => {
            let list: Vec<String> = pids.iter().map(u32::to_string).collect();
            let list = list.join(",");
            let mut a = vec!["queues", "--pid", list.as_str(), "--json"];
            a.extend(args.split_whitespace());
            cli(&a)
        }
    };
    let docs = json_documents(&r.stdout);
    let mut out = Vec::new();
    for (i, &pid) in pids.iter().enumerate() {
        let doc = match fe {
            FrontEnd::Cli => docs.first(),
            _ => docs.get(i),
        };
        let process = doc
            .and_then(|d| d["processes"].as_array())
            .and_then(|ps| ps.iter().find(|p| p["pid"] == pid))
            .unwrap_or_else(|| panic!("{fe:?} gave no snapshot of pid {pid} (of {pids:?}):\n{r}"));
        let mut v = serde_json::json!({
            "schema": doc.map(|d| d["schema"].clone()).unwrap_or_default(),
            "processes": [process.clone()],
        });
        crate::golden::without_os(&mut v);
        out.push(v);
    }
    out
}

/// The "where" line of the one process of snapshot `v`, read through `fe`;
/// panics when it has none.
pub fn where_line(fe: FrontEnd, v: &Value) -> String {
    let stacks = &v["processes"][0]["stacks"];
    stacks["where"]
        .as_str()
        .unwrap_or_else(|| panic!("{fe:?} gave no where line for {}: {stacks:#}", v["processes"][0]["pid"]))
        .to_string()
}

/// Every process of `pids` (a job of `example`) has the same "where" line
/// from gdb, lldb and the CLI (each reading them all in one session), and
/// it names an application frame with its line (the example's, or one of
/// the examples' shared header's inlined helpers): the differential test of
/// issue 12.
pub fn assert_the_same_where(pids: &[u32], example: crate::Example, what: &str) {
    let by_front_end: Vec<Vec<String>> = FrontEnd::ALL
        .iter()
        .map(|&fe| {
            snapshots(fe, pids, "--stacks")
                .iter()
                .map(|v| where_line(fe, v))
                .collect()
        })
        .collect();
    for r in 0..pids.len() {
        let lines: Vec<String> = by_front_end.iter().map(|lines| lines[r].clone()).collect();
        assert!(
            lines.iter().all(|l| *l == lines[0]),
            "{what}, rank {r}: {:?}",
            FrontEnd::ALL.iter().zip(&lines).collect::<Vec<_>>()
        );
        assert!(
            lines[0].contains(&format!("({example}.c:")) || lines[0].contains("(mpiq_example.h:"),
            "{what}, rank {r}: {}",
            lines[0]
        );
    }
}

/// A rank of the healthy example (`pid`, under `what`: its MPI) in its
/// exchange or in its sleep, the same from every front end.
pub fn assert_healthy_where(pid: u32, what: &str) {
    use crate::Example;
    let call = Example::Healthy.line_of("MPI_Sendrecv(");
    let sleep = Example::Healthy.line_of("usleep(");
    for fe in FrontEnd::ALL {
        let line = where_line(fe, &snapshot(fe, pid, "--stacks"));
        assert!(
            line == format!("in MPI_Sendrecv, called from main (healthy.c:{call})")
                || line == format!("not in MPI, in main (healthy.c:{sleep})"),
            "{fe:?} under {what}: {line}"
        );
    }
}

/// Every JSON object in `text` that starts at the start of a line, in
/// order (a debugger's messages between them left out).
fn json_documents(text: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find("{\n").map(|i| from + i) {
        if at > 0 && text.as_bytes()[at - 1] != b'\n' {
            from = at + 2;
            continue;
        }
        let mut it = serde_json::Deserializer::from_str(&text[at..]).into_iter::<Value>();
        match it.next() {
            Some(Ok(v)) => {
                out.push(v);
                from = at + it.byte_offset();
            }
            _ => from = at + 2,
        }
    }
    out
}

/// The snapshot JSON of one process through `fe`; panics with the output
/// when there is none.
///
/// What the kernel said of the process (`os`), which only the CLI reads
/// (before it stops the process), is left out: the three front ends give
/// the same snapshot otherwise.
pub fn snapshot(fe: FrontEnd, pid: u32, args: &str) -> Value {
    let r = queues(fe, pid, &format!("--json {args}"));
    let mut v = r.json().unwrap_or_else(|e| panic!("{fe:?} on pid {pid}: {e}"));
    crate::golden::without_os(&mut v);
    v
}
