//! Python frames inside the native stacks: each Python thread's frames go
//! where the interpreter's evaluation frame that runs them is, so one stack
//! reads from `main` through the script's functions into the MPI call; and
//! the names of mpi4py's Cython wrappers in Python's spelling
//! (`comm.bcast`).

use crate::snapshot::model::{Frame, MpiCall, PythonFrame, PythonStacks, Text, ThreadStack};
use crate::target::{Target, TargetError};

/// How a Python program that has left its script came to the
/// interpreter's exit, as its stack says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PythonExit {
    /// `Py_FinalizeEx` from `Py_RunMain`: the script ended, by its end or
    /// an uncaught exception (its exit status tells which).
    ScriptEnded,
    /// `Py_Exit`: `sys.exit()` or `SystemExit`.
    SysExit,
}

/// Whether a native frame is the interpreter's exit (`Py_FinalizeEx`,
/// `Py_Finalize`, `Py_Exit`), where mpi4py's exit handler calls
/// `MPI_Finalize` and the interpreter has torn its thread states down.
pub fn is_interpreter_exit(f: &Frame) -> bool {
    !f.python && matches!(f.function.as_deref(), Some("Py_FinalizeEx" | "Py_Finalize" | "Py_Exit"))
}

/// The interpreter's exit among the frames outside an MPI call, if the
/// call is made from there.
pub fn python_exit(outer: &[Frame]) -> Option<PythonExit> {
    if !outer.iter().any(is_interpreter_exit) {
        return None;
    }
    Some(
        if outer
            .iter()
            .any(|f| !f.python && f.function.as_deref() == Some("Py_Exit"))
        {
            PythonExit::SysExit
        } else {
            PythonExit::ScriptEnded
        },
    )
}

/// Where a Python program made an MPI call, from the frames outside the
/// call's entry point (innermost first): the index of the innermost Python
/// frame (its caller), and the call as the program wrote it (`comm.bcast`),
/// from mpi4py's outermost wrapper between the two.
pub fn python_site(outer: &[Frame]) -> (Option<usize>, Option<String>) {
    let py = outer.iter().position(|f| f.python);
    let call = outer[..py.unwrap_or(0)]
        .iter()
        .rev()
        .find_map(|f| mpi4py_name(f.function.as_deref()?))
        .map(|q| python_spelling(&q));
    (py, call)
}

/// Whether a native frame is CPython's evaluation loop, which runs Python
/// frames: `_PyEval_EvalFrameDefault` (and its `.cold` parts), and
/// `PyEval_EvalFrameEx` of old interpreters. Its inlined wrappers
/// (`_PyEval_EvalFrame`, `_PyEval_Vector`) run none themselves.
pub fn is_eval_frame(f: &Frame) -> bool {
    if f.python || f.inlined {
        return false;
    }
    let Some(name) = f.function.as_deref() else {
        return false;
    };
    let base = name.split('.').next().unwrap_or(name);
    base == "_PyEval_EvalFrameDefault" || base == "PyEval_EvalFrameEx"
}

fn python_frame(p: &PythonFrame, eval: &Frame) -> Frame {
    Frame {
        pc: eval.pc.clone(),
        function: Some(Text::intern(&p.function)),
        object: None,
        file: Some(Text::intern(&p.file)),
        line: (p.line > 0).then_some(p.line),
        inlined: false,
        offset: None,
        python: true,
    }
}

/// Puts one Python thread's frames (innermost first) into its native
/// stack: at each evaluation frame, innermost first, the Python frames it
/// runs (up to and including the next entry frame), inner to it. Python
/// frames left over (an evaluation frame the native unwind did not reach)
/// go outermost, and the returned note says so.
fn interleave_thread(native: &[Frame], py: &[PythonFrame]) -> (Vec<Frame>, Option<String>) {
    let mut out = Vec::with_capacity(native.len() + py.len());
    let mut k = 0;
    let mut last_eval = None;
    for f in native {
        if is_eval_frame(f) && k < py.len() {
            while k < py.len() {
                out.push(python_frame(&py[k], f));
                k += 1;
                if py[k - 1].entry {
                    break;
                }
            }
            last_eval = Some(f);
        }
        out.push(f.clone());
    }
    if k == py.len() {
        return (out, None);
    }
    let fallback = Frame::default();
    let at = last_eval.unwrap_or(&fallback);
    let left = py.len() - k;
    out.extend(py[k..].iter().map(|p| python_frame(p, at)));
    let note = format!(
        "{left} Python frame(s) had no evaluation frame of the interpreter in the native stack: \
         shown outermost"
    );
    (out, Some(note))
}

/// Puts the Python frames of `py` into the native stacks of their threads
/// (matched by kernel thread id; before Python 3.11 the interpreter does
/// not say it, and a single Python thread goes to the one native thread
/// with evaluation frames). Returns what the process's messages should
/// say: Python frames that found no thread, a failed read.
pub fn interleave(threads: &mut [ThreadStack], py: &PythonStacks) -> Vec<String> {
    let mut notes = Vec::new();
    // An interpreter that is exiting has torn its thread states down
    // already: no Python frame is missing then.
    let exiting = threads.iter().flat_map(|t| &t.frames).any(is_interpreter_exit);
    if let Some(e) = py.error.as_ref().filter(|_| !exiting) {
        notes.push(format!("the Python frames could not be read: {e}"));
    }
    let evaluating: Vec<usize> = (0..threads.len())
        .filter(|&i| threads[i].frames.iter().any(is_eval_frame))
        .collect();
    for pt in py.threads.iter().filter(|t| !t.frames.is_empty()) {
        let at = match pt.tid {
            Some(tid) => threads.iter().position(|t| t.tid == tid),
            None if py.threads.len() == 1 && evaluating.len() == 1 => Some(evaluating[0]),
            None => None,
        };
        let Some(i) = at else {
            notes.push(format!(
                "the Python frames of Python thread {:#x} belong to no thread the host listed",
                pt.thread_id
            ));
            continue;
        };
        let (frames, note) = interleave_thread(&threads[i].frames, &pt.frames);
        threads[i].frames = frames;
        if let Some(n) = note {
            threads[i].note.get_or_insert(n);
        }
    }
    notes
}

/// For each call made from the interpreter's exit after its script ended
/// (`Py_FinalizeEx` from `Py_RunMain`, not `Py_Exit`): the script's exit
/// status, `exitcode` of `Py_RunMain`'s frame, as the host's debug
/// information gives it (absent without it).
pub fn exit_statuses(
    target: &mut dyn Target,
    threads: &[ThreadStack],
    calls: &mut [MpiCall],
) -> Result<(), TargetError> {
    for call in calls.iter_mut() {
        let Some(t) = threads.iter().find(|t| t.tid == call.tid) else {
            continue;
        };
        let outer = t.frames.get(call.frame as usize + 1..).unwrap_or_default();
        if python_exit(outer) != Some(PythonExit::ScriptEnded) {
            continue;
        }
        let Some(main) = outer
            .iter()
            .position(|f| !f.python && f.function.as_deref() == Some("Py_RunMain"))
        else {
            continue;
        };
        let frame = u32::try_from(call.frame as usize + 1 + main).unwrap_or(u32::MAX);
        call.python_exit_status = match target.frame_value(t.tid, frame, "exitcode") {
            // Sign-extended by the host: -1 stays -1.
            Ok(v) => v.map(|v| v as i64),
            Err(TargetError::Interrupted) => return Err(TargetError::Interrupted),
            Err(_) => None,
        };
    }
    Ok(())
}

/// How a Python program past its script came there, for its where-line:
/// from its exit status when known, else as its stack says.
pub fn exit_words(status: Option<i64>, exit: PythonExit) -> String {
    match (status, exit) {
        (_, PythonExit::SysExit) => "as Python exits (sys.exit)".to_string(),
        (Some(0), _) => "as Python exits: its script ran to its end".to_string(),
        (Some(1), _) => "as Python exits: its script raised an uncaught exception (exit status 1)".to_string(),
        (Some(s), _) => format!("as Python exits: its script ended with exit status {s}"),
        (None, PythonExit::ScriptEnded) => "as Python exits (its script has ended)".to_string(),
    }
}

/// The Python name of an mpi4py entry point from its Cython wrapper's
/// symbol: `__pyx_pw_6mpi4py_3MPI_4Comm_281bcast` is `Comm.bcast`,
/// `__pyx_pw_6mpi4py_3MPI_17Finalize` is `MPI.Finalize`. Cython joins the
/// qualified name's parts, each its length then itself, with `_`, and ends
/// with a counter and the function's name.
pub fn mpi4py_name(symbol: &str) -> Option<String> {
    let rest = symbol
        .strip_prefix("__pyx_pw_")
        .or_else(|| symbol.strip_prefix("__pyx_pf_"))?;
    let mut parts: Vec<&str> = Vec::new();
    let mut s = rest;
    let name = loop {
        let digits = s.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let n: usize = s[..digits].parse().ok()?;
        let after = &s[digits..];
        let part = after.get(..n);
        match (part, after.as_bytes().get(n)) {
            (Some(p), Some(b'_')) if !p.is_empty() => {
                parts.push(p);
                s = &after[n + 1..];
            }
            // The last part: a counter, then the name (never a digit first).
            _ => break after,
        }
    };
    if name.is_empty() || parts.first() != Some(&"mpi4py") || parts.get(1) != Some(&"MPI") {
        return None;
    }
    Some(match parts.get(2) {
        Some(class) => format!("{class}.{name}"),
        None => format!("MPI.{name}"),
    })
}

/// How a Python user writes a call of [`mpi4py_name`]: a method of a
/// communicator on `comm` (`comm.bcast`), of another object on its class in
/// lower case (`request.Wait`), a module function as it is (`MPI.Finalize`).
pub fn python_spelling(qualified: &str) -> String {
    const COMMS: [&str; 7] = [
        "Comm",
        "Intracomm",
        "Intercomm",
        "Topocomm",
        "Cartcomm",
        "Graphcomm",
        "Distgraphcomm",
    ];
    match qualified.split_once('.') {
        Some(("MPI", _)) | None => qualified.to_string(),
        Some((class, method)) if COMMS.contains(&class) => format!("comm.{method}"),
        Some((class, method)) => format!("{}.{method}", class.to_ascii_lowercase()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::model::PythonThread;

    fn native(name: &str) -> Frame {
        Frame {
            pc: format!("0x{:x}", name.len()),
            function: Some(name.into()),
            object: Some("/usr/lib/libpython3.11.so.1.0".into()),
            ..Frame::default()
        }
    }

    fn py(function: &str, line: u32, entry: bool) -> PythonFrame {
        PythonFrame {
            function: function.into(),
            file: "/work/solver.py".into(),
            line,
            entry,
        }
    }

    fn names(frames: &[Frame]) -> Vec<String> {
        frames
            .iter()
            .map(|f| {
                let n = f.function.clone().unwrap_or_default();
                if f.python {
                    format!("py:{n}:{}", f.line.unwrap_or(0))
                } else {
                    n.to_string()
                }
            })
            .collect()
    }

    #[test]
    fn python_frames_go_inside_their_evaluation_frames() {
        // 3.11: one evaluation frame runs `solve` and `<module>`; an inner
        // one (a callback from C) runs `cb` alone.
        let stack = vec![
            native("PMPI_Bcast"),
            native("__pyx_pw_6mpi4py_3MPI_4Comm_281bcast"),
            native("_PyEval_EvalFrameDefault"),
            native("PyObject_Call"),
            native("_PyEval_EvalFrameDefault.cold"),
            native("_PyEval_Vector"),
            native("Py_RunMain"),
            native("main"),
        ];
        let pyframes = vec![py("cb", 3, true), py("solve", 8, false), py("<module>", 12, true)];
        let (out, note) = interleave_thread(&stack, &pyframes);
        assert_eq!(note, None);
        assert_eq!(
            names(&out),
            [
                "PMPI_Bcast",
                "__pyx_pw_6mpi4py_3MPI_4Comm_281bcast",
                "py:cb:3",
                "_PyEval_EvalFrameDefault",
                "PyObject_Call",
                "py:solve:8",
                "py:<module>:12",
                "_PyEval_EvalFrameDefault.cold",
                "_PyEval_Vector",
                "Py_RunMain",
                "main",
            ]
        );
        assert!(out[2].python && out[2].object.is_none());
        assert_eq!(out[2].pc, out[3].pc, "a Python frame has its evaluation frame's pc");
    }

    #[test]
    fn python_frames_without_evaluation_frames_go_outermost_with_a_note() {
        let (out, note) = interleave_thread(&[native("PMPI_Recv"), native("main")], &[py("f", 1, true)]);
        assert_eq!(names(&out), ["PMPI_Recv", "main", "py:f:1"]);
        assert!(note.unwrap().contains("1 Python frame(s)"));
    }

    #[test]
    fn threads_are_matched_by_tid_or_the_only_evaluating_thread() {
        let thread = |tid, frames: Vec<Frame>| ThreadStack {
            tid,
            frames,
            ..ThreadStack::default()
        };
        let mut threads = vec![
            thread(10, vec![native("_PyEval_EvalFrameDefault"), native("main")]),
            thread(11, vec![native("epoll_wait"), native("start_thread")]),
        ];
        let stacks = PythonStacks {
            version: "3.9.2".into(),
            threads: vec![PythonThread {
                tid: None,
                thread_id: 7,
                frames: vec![py("<module>", 4, true)],
            }],
            error: None,
        };
        assert!(interleave(&mut threads, &stacks).is_empty());
        assert_eq!(
            names(&threads[0].frames),
            ["py:<module>:4", "_PyEval_EvalFrameDefault", "main"]
        );
        assert_eq!(names(&threads[1].frames), ["epoll_wait", "start_thread"]);
        // A tid no thread has: said, not guessed.
        let mut stacks = stacks;
        stacks.threads[0].tid = Some(99);
        let notes = interleave(&mut threads, &stacks);
        assert!(notes[0].contains("belong to no thread"), "{notes:?}");
        stacks.error = Some("no interpreter".into());
        assert!(interleave(&mut threads, &stacks)[0].contains("could not be read: no interpreter"));
    }

    #[test]
    fn cython_wrappers_name_the_python_call() {
        let n = |s| mpi4py_name(s).map(|q| python_spelling(&q));
        assert_eq!(n("__pyx_pw_6mpi4py_3MPI_4Comm_281bcast").as_deref(), Some("comm.bcast"));
        assert_eq!(n("__pyx_pf_6mpi4py_3MPI_4Comm_280bcast").as_deref(), Some("comm.bcast"));
        assert_eq!(
            n("__pyx_pw_6mpi4py_3MPI_9Intracomm_5Barrier").as_deref(),
            Some("comm.Barrier")
        );
        assert_eq!(
            n("__pyx_pw_6mpi4py_3MPI_7Request_11Wait").as_deref(),
            Some("request.Wait")
        );
        assert_eq!(n("__pyx_pw_6mpi4py_3MPI_17Finalize").as_deref(), Some("MPI.Finalize"));
        assert_eq!(n("__pyx_pw_6mpi4py_3MPI_4Comm_71recv").as_deref(), Some("comm.recv"));
        assert_eq!(n("__pyx_f_6mpi4py_3MPI_PyMPI_bcast"), None);
        assert_eq!(n("__pyx_pw_5numpy_4core_3add"), None);
        assert_eq!(n("PMPI_Bcast"), None);
    }
}
