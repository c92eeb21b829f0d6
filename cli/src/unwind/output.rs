//! The output of `mpiq stacks`: gdb-like text (one line per frame) or
//! JSON, per process.

use super::stack::{Frame, ThreadStack};

/// One frame as gdb's `bt` prints it, by the bridge's frame formatter
/// ([`mpiq::render::frame_text`]): `#N 0xPC in FUNCTION [inlined]
/// (FILE:LINE) from OBJECT`; a function without a name is `OBJECT+0xOFFSET`.
pub fn frame_line(n: usize, f: &Frame) -> String {
    let model = mpiq::Frame {
        pc: format!("{:#018x}", f.pc),
        function: f.function.as_deref().map(mpiq::Text::intern),
        object: f.object.as_deref().map(mpiq::Text::intern),
        file: f.file.as_deref().map(mpiq::Text::intern),
        line: f.line,
        inlined: f.inlined,
        offset: f.offset,
        python: false,
    };
    format!("#{n:<2} {}", mpiq::render::frame_text(&model))
}

/// The stacks of one process as text, one block per thread.
pub fn render_text(pid: i32, stacks: &[ThreadStack]) -> String {
    let mut out = String::new();
    for t in stacks {
        let name = t.name.as_deref().map(|n| format!(" \"{n}\"")).unwrap_or_default();
        out.push_str(&format!("Thread {} (process {pid}){name}:\n", t.tid));
        for (n, f) in t.frames.iter().enumerate() {
            out.push_str(&frame_line(n, f));
            out.push('\n');
        }
        if let Some(note) = &t.note {
            out.push_str(&format!("   ({note})\n"));
        }
    }
    out
}

/// The stacks of one process as JSON.
pub fn to_json(pid: i32, stacks: &[ThreadStack]) -> serde_json::Value {
    let threads: Vec<serde_json::Value> = stacks
        .iter()
        .map(|t| {
            let frames: Vec<serde_json::Value> = t
                .frames
                .iter()
                .map(|f| {
                    serde_json::json!({
                        "pc": format!("{:#x}", f.pc),
                        "function": f.function,
                        "object": f.object,
                        "offset": f.offset.map(|o| format!("{o:#x}")),
                        "file": f.file,
                        "line": f.line,
                        "inlined": f.inlined,
                        "how": f.how.as_str(),
                    })
                })
                .collect();
            serde_json::json!({ "tid": t.tid, "name": t.name, "frames": frames, "note": t.note })
        })
        .collect();
    serde_json::json!({ "pid": pid, "threads": threads })
}

/// The output of `mpiq stacks`: text blocks, or one JSON array.
#[derive(Debug)]
pub struct Output {
    json: bool,
    text: String,
    docs: Vec<serde_json::Value>,
}

impl Output {
    /// Empty output, as JSON or text.
    pub fn new(json: bool) -> Output {
        Output {
            json,
            text: String::new(),
            docs: Vec::new(),
        }
    }

    /// Adds one process.
    pub fn add(&mut self, pid: i32, stacks: &[ThreadStack]) {
        if self.json {
            self.docs.push(to_json(pid, stacks));
        } else {
            if !self.text.is_empty() {
                self.text.push('\n');
            }
            self.text.push_str(&render_text(pid, stacks));
        }
    }

    /// What to print.
    pub fn finish(self) -> String {
        if !self.json {
            return self.text;
        }
        let mut s = serde_json::to_string_pretty(&serde_json::Value::Array(self.docs)).unwrap_or_default();
        s.push('\n');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unwind::stack::How;

    #[test]
    fn frame_lines_look_like_bt() {
        let f = Frame {
            pc: 0x1234,
            function: None,
            object: Some("/usr/lib/libmpi.so.40".into()),
            offset: Some(0x5d4c2),
            file: None,
            line: None,
            inlined: false,
            how: How::Cfi,
        };
        assert_eq!(
            frame_line(3, &f),
            "#3  0x0000000000001234 in libmpi.so.40+0x5d4c2 from /usr/lib/libmpi.so.40"
        );
        let g = Frame {
            function: Some("main".into()),
            file: Some("ring.c".into()),
            line: Some(12),
            ..f
        };
        assert_eq!(
            frame_line(4, &g),
            "#4  0x0000000000001234 in main (ring.c:12) from /usr/lib/libmpi.so.40"
        );
        // As every front end's `--stacks`: `[inlined]` beside the function.
        let h = Frame {
            function: Some("helper".into()),
            inlined: true,
            ..g
        };
        assert_eq!(
            frame_line(5, &h),
            "#5  0x0000000000001234 in helper [inlined] (ring.c:12) from /usr/lib/libmpi.so.40"
        );
    }
}
