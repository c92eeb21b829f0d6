//! Driving mpiq's three front ends from tests: real `gdb -batch` with the
//! Python shim, real `lldb-16 -b` with the plugin, and the `mpiq` CLI, each
//! on one process, returning its output and the snapshot JSON in it.
//!
//! The artifacts come from the same cargo profile as the running test
//! (`cargo build --workspace [--release]` first; `scripts/test` does).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// One of mpiq's front ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrontEnd {
    /// gdb with `gdb-python/mpiq.py`: `info mpi-queues`.
    Gdb,
    /// lldb-16 with `libmpiq_lldb.so`: `mpi queues`.
    Lldb,
    /// The standalone `mpiq queues --pid`.
    Cli,
}

impl FrontEnd {
    /// All three.
    pub const ALL: [FrontEnd; 3] = [FrontEnd::Gdb, FrontEnd::Lldb, FrontEnd::Cli];
}

/// What a front end printed.
#[derive(Clone, Debug)]
pub struct Run {
    /// Exit status was 0.
    pub success: bool,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Run {
    /// Everything printed, for messages.
    pub fn all(&self) -> String {
        format!("--- stdout ---\n{}--- stderr ---\n{}", self.stdout, self.stderr)
    }

    /// The first JSON object printed on its own lines (`{` alone on a line).
    pub fn json(&self) -> Result<Value, String> {
        let start = self
            .stdout
            .find("\n{\n")
            .map(|i| i + 1)
            .or_else(|| self.stdout.starts_with("{\n").then_some(0))
            .ok_or_else(|| format!("no JSON in the output:\n{}", self.all()))?;
        let mut it = serde_json::Deserializer::from_str(&self.stdout[start..]).into_iter::<Value>();
        match it.next() {
            Some(Ok(v)) => Ok(v),
            Some(Err(e)) => Err(format!("bad JSON ({e}):\n{}", self.all())),
            None => Err(format!("no JSON in the output:\n{}", self.all())),
        }
    }
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

fn run(mut cmd: Command) -> Run {
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    Run {
        success: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `gdb -batch -nx -p PID` running `source mpiq.py` and then `commands`.
pub fn gdb(pid: u32, commands: &[&str]) -> Run {
    run(gdb_command(pid, commands))
}

/// The command [`gdb`] runs, for tests that need to start it themselves.
pub fn gdb_command(pid: u32, commands: &[&str]) -> Command {
    let mut cmd = Command::new("gdb");
    cmd.args(["-batch", "-nx", "-q"])
        .env("MPIQ_LIB", artifact("libmpiq.so"))
        .arg("-ex")
        .arg(format!(
            "source {}",
            workspace_root().join("gdb-python/mpiq.py").display()
        ));
    for c in commands {
        cmd.arg("-ex").arg(c);
    }
    cmd.arg("-p").arg(pid.to_string());
    cmd
}

/// `lldb-16 -b -p PID` loading the plugin and then running `commands`.
pub fn lldb(pid: u32, commands: &[&str]) -> Run {
    let mut cmd = Command::new("lldb-16");
    cmd.args(["-b", "--no-lldbinit", "-o"])
        .arg(format!("plugin load {}", artifact("libmpiq_lldb.so").display()));
    for c in commands {
        cmd.arg("-o").arg(c);
    }
    cmd.arg("-p").arg(pid.to_string());
    run(cmd)
}

/// `mpiq ARGS...`.
pub fn cli(args: &[&str]) -> Run {
    let mut cmd = Command::new(artifact("mpiq"));
    cmd.args(args);
    run(cmd)
}

/// The queue command of `fe` on process `pid` with `args` (e.g. `--json --all`).
pub fn queues(fe: FrontEnd, pid: u32, args: &str) -> Run {
    match fe {
        FrontEnd::Gdb => gdb(pid, &[&format!("info mpi-queues {args}")]),
        FrontEnd::Lldb => lldb(pid, &[&format!("mpi queues {args}")]),
        FrontEnd::Cli => {
            let pid = pid.to_string();
            let mut a = vec!["queues", "--pid", pid.as_str()];
            a.extend(args.split_whitespace());
            cli(&a)
        }
    }
}

/// The snapshot JSON of one process through `fe`; panics with the output
/// when there is none.
pub fn snapshot(fe: FrontEnd, pid: u32, args: &str) -> Value {
    let r = queues(fe, pid, &format!("--json {args}"));
    r.json().unwrap_or_else(|e| panic!("{fe:?} on pid {pid}: {e}"))
}
