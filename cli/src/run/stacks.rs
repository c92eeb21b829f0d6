//! `mpiq stacks`: every thread's call stack of live processes and core
//! files, like gdb's `thread apply all bt`.

use std::path::{Path, PathBuf};

use super::{test_hold, Outcome, Reporter, RunError};
use crate::core::CoreProcess;
use crate::live::LiveProcess;

/// Stops each process in turn, unwinds it, releases it; then the core
/// files; prints them all as text or JSON.
pub fn run_stacks(
    pids: &[i32],
    cores: &[PathBuf],
    exe: Option<&Path>,
    json: bool,
    rep: &Reporter,
) -> Result<Outcome, RunError> {
    let mut unwinder = crate::unwind::Unwinder::new();
    let mut out = crate::unwind::Output::new(json);
    let mut failed = Vec::new();
    for &pid in pids {
        let mut p = match LiveProcess::attach(pid) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("mpiq: {e}");
                failed.push(e.to_string());
                continue;
            }
        };
        rep.note(format_args!("stopped {pid}"));
        test_hold();
        let stacks = p.stacks_with(&mut unwinder);
        // Released before anything is printed.
        if let Err(e) = p.detach() {
            eprintln!("mpiq: warning: {e}");
        }
        rep.note(format_args!("unwound {pid}"));
        if rep.verbose {
            for w in p.warnings() {
                eprintln!("mpiq: warning: {w}");
            }
        }
        out.add(pid, &stacks);
    }
    for core in cores {
        let p = match CoreProcess::open_core(core, exe) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("mpiq: {e}");
                failed.push(e.to_string());
                continue;
            }
        };
        let stacks = p.stacks_with(&mut unwinder);
        if stacks.is_empty() {
            eprintln!("mpiq: warning: {}: no x86_64 NT_PRSTATUS notes", core.display());
        }
        out.add(p.pid().map_or(0, |p| p as i32), &stacks);
    }
    if rep.verbose {
        for w in &unwinder.warnings {
            eprintln!("mpiq: warning: {w}");
        }
    }
    if failed.len() == pids.len() + cores.len() {
        return Err(RunError::NothingOpened(failed.join("; ")));
    }
    Ok(Outcome {
        stdout: out.finish(),
        verdict: None,
        status: None,
    })
}
