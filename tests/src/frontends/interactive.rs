//! lldb at a prompt, for what `lldb -b` cannot show: a command that returns
//! while the process runs (`process continue`), and Ctrl-C.

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use super::{lldb_binary, lldb_plugin};
use crate::procs::Stat;
use crate::run::spawn_with_stdin;

/// How long lldb may take to quit after the last step.
const QUIT_TIMEOUT: Duration = Duration::from_secs(120);

/// One step of an interactive lldb session ([`lldb_interactive`]).
#[derive(Clone, Copy, Debug)]
pub enum Step<'a> {
    /// Type a command line.
    Line(&'a str),
    /// Wait (up to 60 s) until this file exists.
    WaitFor(&'a Path),
    /// Wait this many milliseconds.
    Sleep(u64),
    /// Press Ctrl-C (SIGINT to lldb, as the terminal sends it).
    CtrlC,
}

/// An interactive lldb ([`lldb_binary`]) on a pseudo-terminal made by
/// `script(1)`, so that it behaves as at a prompt (`process continue`
/// returns at once, Ctrl-C interrupts the command and not the session),
/// attached to `pid`, with the plugin loaded and `env` set, driven through
/// `steps` and then quit.
///
/// Returns everything it printed (carriage returns removed) and how long
/// the steps after the first Ctrl-C took.
///
/// # Panics
/// If lldb ends before `quit`, does not quit within 120 s, or
/// crashed; if a [`Step::WaitFor`] file never appears.
pub fn lldb_interactive(pid: u32, steps: &[Step<'_>], env: &[(&str, &str)]) -> (String, Option<Duration>) {
    crate::ptrace::require_ptrace();
    let mut cmd = Command::new("script");
    // script(1) runs the command with `$SHELL -c` (or /bin/sh when SHELL is
    // unset, as under CI): `exec` makes lldb script's own child either way.
    cmd.args([
        "-qfec",
        &format!("exec {} --no-lldbinit -p {pid}", lldb_binary()),
        "/dev/null",
    ]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut session = spawn_with_stdin(cmd);
    let mut stdin = session.stdin().expect("a pipe to script(1)");
    let mut type_line = |line: &str| {
        stdin.write_all(format!("{line}\n").as_bytes()).expect("type into lldb");
        stdin.flush().expect("flush");
    };
    type_line("settings set interpreter.prompt-on-quit false");
    type_line(&format!("plugin load {}", lldb_plugin().display()));
    let mut interrupted = None;
    for step in steps {
        match step {
            Step::Line(l) => type_line(l),
            Step::WaitFor(path) => {
                let deadline = Instant::now() + Duration::from_secs(60);
                while !path.exists() {
                    let text = session.stdout_so_far();
                    assert!(Instant::now() < deadline, "{} never appeared:\n{text}", path.display());
                    assert!(!session.has_exited(), "lldb ended:\n{text}");
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
            Step::Sleep(ms) => std::thread::sleep(Duration::from_millis(*ms)),
            Step::CtrlC => {
                // The lldb under script(1): the lldb process whose parent is script.
                let lldb_pid = std::fs::read_dir("/proc")
                    .expect("/proc")
                    .flatten()
                    .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                    .filter(|&p| Stat::read(p).is_some_and(|s| s.ppid == session.id() && s.name.starts_with("lldb")))
                    .max()
                    .expect("lldb under script(1)");
                let ok = Command::new("kill")
                    .args(["-INT", &lldb_pid.to_string()])
                    .status()
                    .expect("kill");
                assert!(ok.success());
                interrupted = Some(Instant::now());
            }
        }
    }
    type_line("quit");
    drop(stdin);
    let r = session.wait_within(QUIT_TIMEOUT);
    let text = r.stdout.replace('\r', "");
    assert!(!text.contains("PLEASE submit a bug report"), "lldb crashed:\n{text}");
    (text, interrupted.map(|t| t.elapsed()))
}
