//! A CPython process's Python frames, read with py-spy used as a library
//! (ARCHITECTURE.md, "Python frames"): the interpreter's thread states and
//! frame chains, for CPython 3.9 to 3.13 and whatever later versions py-spy
//! learns, with no version-specific layout of ours.
//!
//! py-spy reads a live process by its pid (`process_vm_readv`, never
//! ptrace: the front end has already stopped it) and a core file by its
//! path. It reads only what a Python stack needs: the interpreter's thread
//! list, each frame's code object (function, file, line table); no local
//! variables, no thread names.

use crate::snapshot::model::{PythonFrame, PythonStacks, PythonThread};

/// Whether an object mapped in a process is a CPython interpreter or its
/// library (`python3.11`, `libpython3.11.so.1.0`): only then are Python
/// frames looked for.
pub fn is_python_object(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or(path);
    let rest = file
        .strip_prefix("libpython")
        .or_else(|| file.strip_prefix("python"))
        .unwrap_or_default();
    // `python3`, `python3.11`, `python3.11d`, `libpython3.12.so.1.0`; not
    // `python-config` or a script's own name.
    rest.starts_with(|c: char| c.is_ascii_digit())
}

/// Whether live process `pid` maps a CPython interpreter (its
/// `/proc/PID/maps`: the names of its mapped files, nothing else).
pub fn runs_python(pid: u32) -> bool {
    let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
        return false;
    };
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .any(is_python_object)
}

fn config() -> py_spy::Config {
    py_spy::Config {
        // The front end holds the process stopped already; py-spy must not
        // attach (it could not: the front end is its tracer).
        blocking: py_spy::config::LockingStrategy::NonBlocking,
        native: false,
        dump_locals: 0,
        collect_thread_names: false,
        lineno: py_spy::config::LineNo::LastInstruction,
        ..py_spy::Config::default()
    }
}

fn convert(version: String, traces: Vec<py_spy::StackTrace>) -> PythonStacks {
    PythonStacks {
        version,
        threads: traces
            .into_iter()
            .map(|t| PythonThread {
                tid: t.os_thread_id,
                thread_id: t.thread_id,
                frames: t
                    .frames
                    .into_iter()
                    .map(|f| PythonFrame {
                        function: f.name,
                        file: f.filename,
                        line: u32::try_from(f.line).unwrap_or(0),
                        entry: f.is_entry || f.is_shim_entry,
                    })
                    .collect(),
            })
            .collect(),
        error: None,
    }
}

fn failed(e: &anyhow::Error) -> PythonStacks {
    PythonStacks {
        error: Some(format!("{e:#}")),
        ..PythonStacks::default()
    }
}

/// The Python frames of live process `pid`, which the caller holds
/// stopped; `None` if it runs no CPython; `Some` with `error` set if it
/// does and its state could not be read.
pub fn read_live(pid: u32) -> Option<PythonStacks> {
    if !runs_python(pid) {
        return None;
    }
    read_python(pid)
}

/// [`read_live`] of a process the caller knows maps a CPython interpreter
/// (it read the process's objects already).
pub fn read_python(pid: u32) -> Option<PythonStacks> {
    let Ok(pid) = py_spy::Pid::try_from(pid) else {
        return None;
    };
    let started = start_time(pid);
    let read = std::panic::catch_unwind(|| -> Result<PythonStacks, anyhow::Error> {
        // The interpreter's addresses found for this process before (the
        // previous sample, or [`prepare`]) hold while it is the same process.
        let kept = started.and_then(|t| take_spy(pid, t));
        let mut spy = match kept {
            Some(s) => s,
            None => py_spy::PythonSpy::new(pid, &config())?,
        };
        let version = spy.version.to_string();
        let traces = spy.get_stack_traces()?;
        if let Some(t) = started {
            keep_spy(pid, t, Some(spy));
        }
        Ok(convert(version, traces))
    });
    Some(match read {
        Ok(Ok(stacks)) => stacks,
        // A program that links libpython (a C++ code with Python bindings)
        // runs no interpreter until it starts one: no Python frames, and
        // nothing to say. Python itself without one is an error.
        Ok(Err(e)) if no_interpreter(&e) && !executable_is_python(pid) => return None,
        Ok(Err(e)) => failed(&e),
        Err(_) => PythonStacks {
            error: Some("py-spy failed (a panic) reading the interpreter's state".into()),
            ..PythonStacks::default()
        },
    })
}

/// py-spy's error for a process that maps CPython but where it found no
/// interpreter.
fn no_interpreter(e: &anyhow::Error) -> bool {
    format!("{e:#}").contains("Failed to find a python interpreter")
}

/// Whether the main executable of live process `pid` is a Python
/// (`python3`, `python3.11`, ...), not a program that links libpython.
fn executable_is_python(pid: py_spy::Pid) -> bool {
    std::fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().starts_with("python")))
        .unwrap_or(true)
}

/// Finds where live process `pid`'s interpreter is (py-spy parses its
/// binaries and reads their static data: the version, the runtime's
/// address), for a later [`read_python`] of the same process. Safe while
/// the process runs; meant to run beside the reading of other processes
/// (`mpiq job` prepares the ranks it has not reached yet). Errors are
/// left for [`read_python`] to meet and report.
pub fn prepare(pid: u32) {
    let Ok(pid) = py_spy::Pid::try_from(pid) else {
        return;
    };
    let Some(started) = start_time(pid) else {
        return;
    };
    {
        let mut m = spies().0.lock().unwrap_or_else(|e| e.into_inner());
        if m.get(&pid).is_some_and(|(t, _)| *t == started) {
            return;
        }
        // Claimed: a reader of this process waits for it.
        m.insert(pid, (started, None));
    }
    let spy = std::panic::catch_unwind(|| py_spy::PythonSpy::new(pid, &config()).ok())
        .ok()
        .flatten();
    keep_spy(pid, started, spy);
}

/// What py-spy learnt of a process (where its interpreter is, its version),
/// by pid and start time, for the next sample of the same process; `None`
/// while [`prepare`] is finding it.
type Spies = std::collections::HashMap<py_spy::Pid, (u64, Option<py_spy::PythonSpy>)>;

fn spies() -> &'static (std::sync::Mutex<Spies>, std::sync::Condvar) {
    static SPIES: std::sync::OnceLock<(std::sync::Mutex<Spies>, std::sync::Condvar)> = std::sync::OnceLock::new();
    SPIES.get_or_init(Default::default)
}

/// The most processes whose interpreter's addresses are kept.
const KEPT: usize = 4096;

/// The spy kept for process `pid` started at `started`, waiting while one
/// is being prepared.
fn take_spy(pid: py_spy::Pid, started: u64) -> Option<py_spy::PythonSpy> {
    let (lock, ready) = spies();
    let mut m = lock.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        match m.get(&pid) {
            Some((t, None)) if *t == started => {
                m = ready.wait(m).unwrap_or_else(|e| e.into_inner());
            }
            Some((t, Some(_))) if *t == started => return m.remove(&pid).and_then(|(_, spy)| spy),
            _ => return None,
        }
    }
}

/// Keeps `spy` (none: preparing it failed) for the next reading of `pid`.
fn keep_spy(pid: py_spy::Pid, started: u64, spy: Option<py_spy::PythonSpy>) {
    let (lock, ready) = spies();
    let mut m = lock.lock().unwrap_or_else(|e| e.into_inner());
    match spy {
        Some(spy) => {
            if m.len() >= KEPT {
                m.retain(|_, (_, s)| s.is_none());
            }
            m.insert(pid, (started, Some(spy)));
        }
        None => {
            m.remove(&pid);
        }
    }
    ready.notify_all();
}

/// A process's start time (clock ticks after boot, `/proc/PID/stat`), which
/// tells it from a later process with its pid.
fn start_time(pid: py_spy::Pid) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command's closing parenthesis: state is field 3, start time 22.
    stat.rsplit_once(')')?.1.split_whitespace().nth(19)?.parse().ok()
}

/// The Python frames in core file `core`, whose process mapped a CPython
/// interpreter (the caller checked with [`is_python_object`]).
#[cfg(feature = "python-cores")]
pub fn read_core(core: &std::path::Path) -> PythonStacks {
    let config = config();
    let read = std::panic::catch_unwind(|| -> Result<PythonStacks, anyhow::Error> {
        let dump = py_spy::coredump::PythonCoreDump::new(core)?;
        Ok(convert(String::new(), dump.get_stack(&config)?))
    });
    match read {
        Ok(Ok(stacks)) => stacks,
        Ok(Err(e)) => failed(&e),
        Err(_) => PythonStacks {
            error: Some("py-spy failed (a panic) reading the core file's interpreter state".into()),
            ..PythonStacks::default()
        },
    }
}

/// Without the `python-cores` feature: why there are no Python frames.
#[cfg(not(feature = "python-cores"))]
pub fn read_core(_core: &std::path::Path) -> PythonStacks {
    PythonStacks {
        error: Some("this mpiq was built without Python frames from core files (feature python-cores)".into()),
        ..PythonStacks::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preparing_a_process_without_python_leaves_no_claim() {
        // This test runs no CPython: py-spy fails, and a reader of the
        // process must not wait for a spy that never comes.
        let me = std::process::id();
        prepare(me);
        let pid = py_spy::Pid::try_from(me).unwrap();
        let started = start_time(pid).unwrap();
        assert!(take_spy(pid, started).is_none());
        let stacks = read_python(me).unwrap();
        assert!(stacks.error.is_some(), "{stacks:?}");
    }

    #[test]
    fn python_objects_are_the_interpreter_and_its_library() {
        for yes in [
            "/usr/bin/python3.11",
            "/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0",
            "python3",
            "/opt/py/bin/python3.13t",
        ] {
            assert!(is_python_object(yes), "{yes}");
        }
        for no in [
            "/usr/bin/python-config",
            "/usr/lib/x86_64-linux-gnu/libc.so.6",
            "/work/solver.py",
            "/venv/lib/python3.11/site-packages/mpi4py/MPI.cpython-311-x86_64-linux-gnu.so",
        ] {
            assert!(!is_python_object(no), "{no}");
        }
    }

    #[test]
    fn a_process_without_python_has_no_python_frames() {
        // This test's own process is Rust.
        assert!(read_live(std::process::id()).is_none());
    }

    #[test]
    fn a_start_time_is_read_from_stat() {
        let pid = py_spy::Pid::try_from(std::process::id()).unwrap();
        assert!(start_time(pid).is_some_and(|t| t > 0));
        assert_eq!(start_time(-1), None);
    }
}
