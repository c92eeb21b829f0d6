//! Call stacks in the text view: where the process is in one line
//! (`where: in MPI_Barrier, called from main (barrier_vs_recv.c:54)`), and
//! with `--stacks` each thread like gdb's `bt`.

use std::fmt::Write;

use crate::snapshot::model::{Frame, Stacks};

/// `  where: ...`, then with `frames` `  Threads (N):` and one line per
/// frame, innermost first.
pub(super) fn render_stacks(out: &mut String, st: &Stacks, frames: bool) {
    if let Some(why) = &st.missing {
        let _ = writeln!(out, "  call stacks: not available: {why}");
        return;
    }
    if let Some(w) = &st.where_ {
        let _ = writeln!(out, "  where: {w}");
    }
    if !frames {
        return;
    }
    let _ = writeln!(out, "  Threads ({}):", st.threads.len());
    for t in &st.threads {
        let name = t.name.as_deref().map(|n| format!(" \"{n}\"")).unwrap_or_default();
        let _ = writeln!(out, "    thread {}{name}:", t.tid);
        for (i, f) in t.frames.iter().enumerate() {
            let _ = writeln!(out, "      #{i:<2} {}", frame_text(f));
        }
        if let Some(note) = &t.note {
            let _ = writeln!(out, "      (the stack ends here: {note})");
        }
    }
}

/// One frame as gdb's `bt` prints it, without its number: `0xPC in
/// FUNCTION [inlined] (FILE:LINE) from OBJECT`, leaving out what is
/// unknown; a function without a name is `OBJECT+0xOFFSET` when the offset
/// is known, else `??`. The one formatter of a frame (`--stacks`, `mpiq
/// stacks`).
pub fn frame_text(f: &Frame) -> String {
    let function = match (&f.function, f.offset) {
        (Some(name), _) => name.to_string(),
        (None, Some(_)) => f.unnamed(),
        (None, None) => "??".into(),
    };
    let mut s = format!("{} in {function}", f.pc);
    if f.python {
        s.push_str(" [python]");
    }
    if f.inlined {
        s.push_str(" [inlined]");
    }
    if let Some(file) = &f.file {
        match f.line {
            Some(l) => {
                let _ = write!(s, " ({file}:{l})");
            }
            None => {
                let _ = write!(s, " ({file})");
            }
        }
    }
    if let Some(o) = &f.object {
        let _ = write!(s, " from {o}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::model::ThreadStack;

    #[test]
    fn threads_print_like_a_backtrace() {
        let st = Stacks {
            threads: vec![ThreadStack {
                tid: 42,
                name: Some("main".into()),
                frames: vec![
                    Frame {
                        pc: "0x7f00".into(),
                        function: Some("PMPI_Recv".into()),
                        object: Some("/usr/lib/libmpi.so.40".into()),
                        ..Frame::default()
                    },
                    Frame {
                        pc: "0x5500".into(),
                        function: Some("main".into()),
                        file: Some("ring.c".into()),
                        line: Some(42),
                        ..Frame::default()
                    },
                ],
                note: Some("no unwind information for 0x1".into()),
            }],
            missing: None,
            where_: Some("in PMPI_Recv, called from main (ring.c:42)".into()),
            ..Stacks::default()
        };
        let mut out = String::new();
        render_stacks(&mut out, &st, false);
        assert_eq!(out, "  where: in PMPI_Recv, called from main (ring.c:42)\n");
        let mut out = String::new();
        render_stacks(&mut out, &st, true);
        assert!(
            out.contains("  where: in PMPI_Recv, called from main (ring.c:42)\n"),
            "{out}"
        );
        assert!(out.contains("thread 42 \"main\":"), "{out}");
        assert!(
            out.contains("#0  0x7f00 in PMPI_Recv from /usr/lib/libmpi.so.40"),
            "{out}"
        );
        assert!(out.contains("#1  0x5500 in main (ring.c:42)"), "{out}");
        assert!(out.contains("the stack ends here: no unwind information"), "{out}");
        let mut out = String::new();
        render_stacks(
            &mut out,
            &Stacks {
                threads: Vec::new(),
                missing: Some("this front end gives no call stacks yet".into()),
                ..Stacks::default()
            },
            false,
        );
        assert_eq!(
            out,
            "  call stacks: not available: this front end gives no call stacks yet\n"
        );
    }
}
