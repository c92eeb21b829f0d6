//! The merged stacks ([`crate::stacks::tree`]) in the collapsed ("folded")
//! format of Brendan Gregg's `flamegraph.pl` and of inferno: one line per
//! distinct stack, its frames outermost first joined by `;`, a space, then
//! how many ranks have that stack:
//!
//! ```text
//! main;MPI_Barrier 1
//! main;exchange;MPI_Recv 3
//! ```
//!
//! - **Frames** are named as the merged tree names them, and only by that:
//!   the function (a Python frame by its Python function: the model's
//!   `function`), the outermost MPI call by its C binding (`MPI_Recv` for
//!   `PMPI_Recv`), `?? (object)` when unknown; inlined frames are frames of
//!   their own. No `file:line`: a flame graph merges frames by name, and a
//!   line number in each box would split one function into as many boxes
//!   as call sites (the text report and `--stacks` give the places). With
//!   `--stacks` the tree holds every frame (`[inlined]` marks inlined
//!   ones); by default it stops at the MPI call, as the compact text does.
//! - **Counts are ranks.** Each rank counts once in each distinct stack its
//!   application threads are in: one thread per rank (the usual case)
//!   counts 1; two threads of one rank at the same place still count 1; two
//!   at different places count 1 in each. Processes whose rank is unknown
//!   count each of their threads. The MPI runtime's own threads (progress
//!   engines: no application frame) are left out, as the compact tree
//!   leaves them out; with `--stacks` too.
//! - **Every rank is in the graph:** ranks without call stacks are one line
//!   `[no call stacks] N`, ranks with only the runtime's threads one line
//!   `[no application thread] N`, so the widths add up to the job.
//! - **Escaping:** a `;` inside a name becomes `:` (C++ and Rust names have
//!   none; a `;` would split the frame), line breaks and other control
//!   characters become spaces; an empty name is `??`. A space is kept: the
//!   count is what follows the last space of a line.
//!
//! Lines are sorted by their stack, as `stackcollapse` output is.

use std::collections::{BTreeMap, BTreeSet};

use crate::options::DumpOptions;
use crate::snapshot::model::Snapshot;
use crate::stacks::tree::{Mode, StackNode, StackTree, SERVICE_LABEL};

/// The frame of the ranks whose processes have no call stacks.
pub const NO_STACKS_FRAME: &str = "[no call stacks]";

/// The frame of the ranks whose stacks hold no application thread.
pub const NO_THREAD_FRAME: &str = "[no application thread]";

/// One line of the folded output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoldedStack {
    /// The frames, outermost first, escaped ([`frame_name`]).
    pub frames: Vec<String>,
    /// How many ranks have this stack.
    pub count: usize,
}

impl FoldedStack {
    /// `a;b;c N`.
    pub fn line(&self) -> String {
        format!("{} {}", self.frames.join(";"), self.count)
    }
}

/// A frame's name as folded lines may hold it: `;` → `:`, control
/// characters (line breaks included) → space, empty → `??`.
pub fn frame_name(label: &str) -> String {
    let s: String = label
        .chars()
        .map(|c| match c {
            ';' => ':',
            c if c.is_control() => ' ',
            c => c,
        })
        .collect();
    if s.trim().is_empty() {
        "??".into()
    } else {
        s
    }
}

/// Who counts in a stack: distinct known ranks, and the threads of
/// processes whose rank is unknown.
#[derive(Default)]
struct Counted {
    ranks: BTreeSet<i64>,
    unknown: usize,
}

impl Counted {
    fn count(&self) -> usize {
        self.ranks.len() + self.unknown
    }
}

/// The folded stacks of a tree, sorted by stack.
pub fn stacks(tree: &StackTree) -> Vec<FoldedStack> {
    let mut by_stack: BTreeMap<Vec<String>, Counted> = BTreeMap::new();
    // Depth first, without recursion (a tree is at most MAX_DEPTH deep,
    // but its width is the job's).
    let mut todo: Vec<(&StackNode, usize)> = tree
        .roots
        .iter()
        .filter(|n| n.label != SERVICE_LABEL)
        .map(|n| (n, 0))
        .collect();
    let mut path: Vec<String> = Vec::new();
    while let Some((node, depth)) = todo.pop() {
        path.truncate(depth);
        path.push(frame_name(&node.label));
        let ending = node.ending_tasks();
        if !ending.is_empty() {
            let c = by_stack.entry(path.clone()).or_default();
            for (rank, _) in ending {
                if rank < 0 {
                    c.unknown += 1;
                } else {
                    c.ranks.insert(rank);
                }
            }
        }
        todo.extend(node.children.iter().map(|c| (c, depth + 1)));
    }
    let mut out: Vec<FoldedStack> = by_stack
        .into_iter()
        .map(|(frames, c)| FoldedStack {
            frames,
            count: c.count(),
        })
        .collect();
    let pseudo = [
        (NO_STACKS_FRAME, tree.without_stacks.len()),
        (NO_THREAD_FRAME, tree.no_thread_shown.len()),
    ];
    for (frame, count) in pseudo {
        if count > 0 {
            out.push(FoldedStack {
                frames: vec![frame.to_string()],
                count,
            });
        }
    }
    out.sort_by(|a, b| a.frames.cmp(&b.frames));
    out
}

/// The folded lines of a tree, each ending in a newline.
pub fn text(tree: &StackTree) -> String {
    stacks(tree).iter().map(|s| s.line() + "\n").collect()
}

/// The folded lines of a snapshot's merged stacks: compact, or every frame
/// with `--stacks` ([`DumpOptions::stacks`]).
pub fn render(snapshot: &Snapshot, opts: &DumpOptions) -> String {
    let mode = if opts.stacks { Mode::Full } else { Mode::Compact };
    text(&StackTree::build(snapshot, mode))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::model::{Frame, ThreadStack};
    use crate::stacks::tree::tests::{barrier_vs_recv, frame, in_recv, process, service, APP, LIBC, LIBMPI};

    fn folded(s: &Snapshot, stacks: bool) -> String {
        render(
            s,
            &DumpOptions {
                stacks,
                ..DumpOptions::default()
            },
        )
    }

    #[test]
    fn one_line_per_stack_counting_ranks() {
        let s = barrier_vs_recv();
        assert_eq!(folded(&s, false), "main;MPI_Barrier 1\nmain;exchange;MPI_Recv 3\n");
        // Every frame with --stacks; the runtime's threads still left out.
        let full = folded(&s, true);
        assert_eq!(
            full,
            "_start;__libc_start_main_impl;__libc_start_call_main;main;PMPI_Barrier;ompi_coll_base_barrier_intra;__poll 1\n\
             _start;__libc_start_main_impl;__libc_start_call_main;main;exchange;PMPI_Recv;__poll 3\n"
        );
        // The same through the option table, as gdb and lldb pass it.
        let opts = DumpOptions::parse_line("--folded").unwrap();
        assert_eq!(crate::render::render(&s, &opts), folded(&s, false));
        assert!(DumpOptions::parse_line("--folded --no-stacks").is_err());
    }

    #[test]
    fn threads_of_one_rank_count_once_per_stack() {
        let mut s = barrier_vs_recv();
        // Rank 1: a second thread in MPI_Recv too (the same stack), and a
        // third computing elsewhere.
        let worker = ThreadStack {
            tid: 77,
            frames: vec![
                frame("solve", APP, Some(9)),
                frame("worker", APP, Some(20)),
                frame("start_thread", LIBC, None),
                frame("clone3", LIBC, None),
            ],
            ..ThreadStack::default()
        };
        if let Some(st) = s.processes[1].stacks.as_mut() {
            st.threads.push(in_recv(1019));
            st.threads.push(worker);
        }
        assert_eq!(
            folded(&s, false),
            "main;MPI_Barrier 1\nmain;exchange;MPI_Recv 3\nworker;solve 1\n"
        );
        // Two processes of unknown rank: each thread counts.
        for p in &mut s.processes[2..] {
            p.world_rank = None;
        }
        assert_eq!(
            folded(&s, false),
            "main;MPI_Barrier 1\nmain;exchange;MPI_Recv 3\nworker;solve 1\n"
        );
        s.processes[2].stacks.as_mut().unwrap().threads[0].tid = 1030;
        assert_eq!(
            folded(&s, false),
            "main;MPI_Barrier 1\nmain;exchange;MPI_Recv 3\nworker;solve 1\n"
        );
    }

    #[test]
    fn ranks_without_stacks_or_application_threads_have_a_line() {
        let mut s = barrier_vs_recv();
        s.processes[3].stacks = None;
        s.processes[3].error = Some("gone".into());
        s.processes.push(process(4, vec![service(2001), service(2002)]));
        assert_eq!(
            folded(&s, false),
            "[no application thread] 1\n[no call stacks] 1\nmain;MPI_Barrier 1\nmain;exchange;MPI_Recv 2\n"
        );
        assert_eq!(folded(&Snapshot::default(), false), "");
    }

    #[test]
    fn names_are_escaped_and_inlined_frames_kept() {
        let weird = |name: &str| Frame {
            pc: "0x2".into(),
            function: Some(name.into()),
            object: Some(APP.into()),
            file: None,
            line: None,
            inlined: false,
            offset: None,
            python: false,
        };
        let mut inlined = weird("inlined_helper");
        inlined.inlined = true;
        let t = ThreadStack {
            tid: 5,
            frames: vec![
                frame("__poll", LIBC, None),
                frame("PMPI_Recv", LIBMPI, None),
                inlined,
                weird("ns::f(a;b)"),
                weird("two\nlines\r"),
                weird(""),
                frame("main", APP, Some(3)),
            ],
            ..ThreadStack::default()
        };
        let mut s = Snapshot::default();
        s.processes.push(process(0, vec![t]));
        let out = folded(&s, false);
        assert_eq!(out, "main;??;two lines ;ns::f(a:b);inlined_helper;MPI_Recv 1\n");
        for line in out.lines() {
            let (stack, count) = line.rsplit_once(' ').unwrap();
            assert_eq!(count, "1");
            assert_eq!(stack.split(';').count(), 6, "{line}");
        }
        let full = folded(&s, true);
        assert!(
            full.contains(";inlined_helper [inlined];PMPI_Recv;__poll 1\n"),
            "{full}"
        );
        assert_eq!(frame_name(" "), "??");
    }
}
