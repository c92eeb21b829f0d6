//! Merged call stacks across ranks, as STAT draws them
//! (docs/design/stacks.md §6): one trie of every thread's frames, from the
//! outermost (`main`, `start_thread`) inwards, each node with the threads
//! (world rank, thread id) whose stacks pass through it.
//!
//! Two modes:
//! - [`Mode::Compact`] (the default view): application threads only, no
//!   frame inside the outermost MPI entry point, which is named by its C
//!   binding (`MPI_Barrier` for `PMPI_Barrier` or MPICH's
//!   `internal_Barrier`), without the C runtime's start frames; the entry
//!   point's node carries the call site (file:line of its caller);
//! - [`Mode::Full`] (`--stacks`): every frame with its file:line, the MPI
//!   runtime's own threads in a branch of their own.
//!
//! Built with one trie step per frame: O(total frames).

use std::collections::HashMap;

use super::names::{classify, CallClass};
use super::position::{beyond_recorder, c_name, is_recorder_frame, outermost_entry, position, Position};
use super::python::{is_interpreter_exit, python_site};
use crate::snapshot::model::{Communicator, Frame, MpiCall, ProcessSnapshot, Snapshot, ThreadStack};

/// Which frames the tree holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Application threads, down to their MPI call.
    Compact,
    /// Every frame of every thread.
    Full,
}

/// One thread: its world rank (-1 when unknown) and its thread id.
pub type Task = (i64, u64);

/// The label of the node the MPI runtime's threads hang from in
/// [`Mode::Full`].
pub const SERVICE_LABEL: &str = "[MPI runtime threads]";

/// The label of the root that holds several outermost frames.
pub const ROOT_LABEL: &str = "/";

/// The most frames of one thread the tree keeps: the outermost and the
/// innermost halves, with a node [`ELIDED_LABEL`] between them. So what
/// walks the tree recursively (dropping, cloning, serializing it) stays
/// shallow whatever a stack holds, and its JSON (two levels per node) stays
/// within the nesting JSON parsers accept by default (serde_json: 128).
/// Every frame of every thread is in the snapshot's `stacks`.
pub const MAX_DEPTH: usize = 56;

/// The label of the node that stands for the frames left out of a stack
/// deeper than [`MAX_DEPTH`].
pub const ELIDED_LABEL: &str = "...";

/// Frames of the C runtime's start of a program or thread, left out in
/// [`Mode::Compact`] when they are outermost: `_start`, every
/// `__libc_start*` (`__libc_start_main`, glibc 2.34's
/// `__libc_start_main_impl` and `__libc_start_call_main`), `start_thread`,
/// `clone`, `clone3`.
fn is_start_frame(name: &str) -> bool {
    name.starts_with("__libc_start")
        || matches!(
            name,
            "_start" | "start_thread" | "clone" | "clone3" | "__clone" | "__clone3" | "__GI___clone3"
        )
}

/// One node of the trie.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StackNode {
    /// The function (the C name of an MPI entry point in compact mode), or
    /// `?? (object)` when unknown.
    pub label: String,
    /// `file:line` (the file's base name): the frame's own in full mode;
    /// in compact mode the call site of the MPI call, or the innermost
    /// frame's own place.
    pub location: Option<String>,
    /// The threads whose stacks pass through it, sorted.
    pub tasks: Vec<Task>,
    /// What every thread that ends here waits for, when each one's call
    /// says the same (` from rank 0, tag 3`, ` on MPI_COMM_WORLD`).
    pub detail: Option<String>,
    /// The next frames inwards, sorted by their smallest task.
    pub children: Vec<StackNode>,
}

impl StackNode {
    /// The distinct world ranks of its threads, sorted.
    pub fn ranks(&self) -> Vec<i64> {
        let mut r: Vec<i64> = self.tasks.iter().map(|t| t.0).collect();
        r.dedup();
        r
    }

    /// The threads whose stacks end at this node (its tasks in no child).
    pub fn ending_tasks(&self) -> Vec<Task> {
        let mut inner: Vec<Task> = self.children.iter().flat_map(|c| c.tasks.iter().copied()).collect();
        inner.sort_unstable();
        self.tasks
            .iter()
            .copied()
            .filter(|t| inner.binary_search(t).is_err())
            .collect()
    }

    /// Every node below (and with) this one, depth first.
    pub fn count(&self) -> usize {
        1 + self.children.iter().map(StackNode::count).sum::<usize>()
    }
}

/// The merged stacks of a snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackTree {
    /// The mode it was built in.
    pub mode: Mode,
    /// The outermost frames, sorted by their smallest task.
    pub roots: Vec<StackNode>,
    /// Threads of the MPI runtime left out (compact mode).
    pub hidden_service_threads: usize,
    /// Processes without call stacks: their world rank and why.
    pub without_stacks: Vec<(i64, String)>,
    /// Processes whose stacks hold no thread the tree shows (compact: only
    /// the MPI runtime's threads, or none at all): their world ranks.
    pub no_thread_shown: Vec<i64>,
}

impl StackTree {
    /// The distinct ranks of the tree's threads, sorted.
    pub fn ranks(&self) -> Vec<i64> {
        let mut r: Vec<i64> = self.roots.iter().flat_map(|n| n.tasks.iter().map(|t| t.0)).collect();
        r.sort_unstable();
        r.dedup();
        r
    }

    /// How many threads the tree holds.
    pub fn threads(&self) -> usize {
        self.roots.iter().map(|n| n.tasks.len()).sum()
    }

    /// Whether no thread is in it.
    pub fn is_empty(&self) -> bool {
        self.roots.is_empty()
    }

    /// The tree as one node: its only root, or a root labelled
    /// [`ROOT_LABEL`] holding them all.
    pub fn as_one_node(&self) -> StackNode {
        if let [only] = self.roots.as_slice() {
            return only.clone();
        }
        let mut tasks: Vec<Task> = self.roots.iter().flat_map(|n| n.tasks.iter().copied()).collect();
        tasks.sort_unstable();
        StackNode {
            label: ROOT_LABEL.into(),
            location: None,
            tasks,
            detail: None,
            children: self.roots.clone(),
        }
    }

    /// The tree of a snapshot's stacks.
    pub fn build(snapshot: &Snapshot, mode: Mode) -> StackTree {
        let mut b = Builder::default();
        let mut hidden = 0;
        let mut without = Vec::new();
        let mut empty = Vec::new();
        for p in &snapshot.processes {
            let rank = p.world_rank.map_or(-1, i64::from);
            let Some(st) = &p.stacks else {
                let why = p.error.clone().unwrap_or_else(|| "none were collected".into());
                without.push((rank, why));
                continue;
            };
            if let Some(why) = &st.missing {
                without.push((rank, why.clone()));
                continue;
            }
            let before = b.nodes[0].tasks.len();
            for t in &st.threads {
                let task = (rank, t.tid);
                let path = match mode {
                    Mode::Full => Some(full_path(t)),
                    Mode::Compact => compact_path(t, p),
                };
                match path {
                    Some((path, detail)) => b.insert(task, path, detail),
                    None => hidden += 1,
                }
            }
            if b.nodes[0].tasks.len() == before {
                empty.push(rank);
            }
        }
        StackTree {
            mode,
            roots: b.finish(),
            hidden_service_threads: hidden,
            without_stacks: without,
            no_thread_shown: empty,
        }
    }
}

/// A node's key: label and location.
type Key = (String, Option<String>);

/// What a leaf's threads wait for: none seen yet, all the same, differing.
#[derive(Clone, Debug, Default)]
enum Detail {
    #[default]
    Unset,
    Same(Option<String>),
    Mixed,
}

#[derive(Default)]
struct BNode {
    key: Key,
    tasks: Vec<Task>,
    children: Vec<usize>,
    index: HashMap<Key, usize>,
    detail: Detail,
}

/// The trie in an arena; node 0 is the root above every outermost frame.
struct Builder {
    nodes: Vec<BNode>,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            nodes: vec![BNode::default()],
        }
    }
}

impl Builder {
    fn insert(&mut self, task: Task, mut path: Vec<Key>, detail: Option<String>) {
        if path.len() > MAX_DEPTH {
            let keep = MAX_DEPTH / 2;
            path.drain(keep..path.len() - (MAX_DEPTH - keep - 1));
            path.insert(keep, (ELIDED_LABEL.to_string(), None));
        }
        let mut at = 0;
        self.nodes[0].tasks.push(task);
        for key in path {
            let next = match self.nodes[at].index.get(&key) {
                Some(&n) => n,
                None => {
                    let n = self.nodes.len();
                    self.nodes[at].index.insert(key.clone(), n);
                    self.nodes[at].children.push(n);
                    self.nodes.push(BNode {
                        key,
                        ..BNode::default()
                    });
                    n
                }
            };
            self.nodes[next].tasks.push(task);
            at = next;
        }
        if at != 0 {
            let d = &mut self.nodes[at].detail;
            *d = match std::mem::take(d) {
                Detail::Unset => Detail::Same(detail),
                Detail::Same(s) if s == detail => Detail::Same(s),
                _ => Detail::Mixed,
            };
        }
    }

    fn finish(mut self) -> Vec<StackNode> {
        let roots = std::mem::take(&mut self.nodes[0].children);
        let mut out: Vec<StackNode> = roots.into_iter().map(|n| self.take(n)).collect();
        out.sort_by(|a, b| a.tasks.first().cmp(&b.tasks.first()));
        out
    }

    /// Node `n` as a [`StackNode`] (iterative, so that deep stacks cannot
    /// overflow this thread's stack: children are made before parents).
    fn take(&mut self, n: usize) -> StackNode {
        // Post-order over the subtree of `n`.
        let mut order = Vec::new();
        let mut todo = vec![n];
        while let Some(i) = todo.pop() {
            order.push(i);
            todo.extend(self.nodes[i].children.iter().copied());
        }
        let mut made: HashMap<usize, StackNode> = HashMap::with_capacity(order.len());
        for &i in order.iter().rev() {
            let node = &mut self.nodes[i];
            let mut children: Vec<StackNode> = node.children.iter().filter_map(|c| made.remove(c)).collect();
            children.sort_by(|a, b| a.tasks.first().cmp(&b.tasks.first()));
            let mut tasks = std::mem::take(&mut node.tasks);
            tasks.sort_unstable();
            let (label, location) = std::mem::take(&mut node.key);
            let detail = match std::mem::take(&mut node.detail) {
                Detail::Same(d) => d,
                _ => None,
            };
            made.insert(
                i,
                StackNode {
                    label,
                    location,
                    tasks,
                    detail,
                    children,
                },
            );
        }
        made.remove(&n).unwrap_or_default()
    }
}

/// A native frame of CPython (its executable or library) or of mpi4py's
/// Cython module.
fn is_python_machinery(f: &Frame) -> bool {
    let name = f.function.as_deref().unwrap_or_default();
    name.starts_with("__pyx_")
        || name.starts_with("PyMPI_")
        || f.object.as_deref().is_some_and(|o| {
            crate::target::python::is_python_object(o) || o.contains("/mpi4py/") || o.contains("/mpi4py.")
        })
}

/// `file:line` of a frame (the file's base name), when known.
fn location(f: &Frame) -> Option<String> {
    let file = f.file.as_deref()?;
    let base = file.rsplit('/').next().unwrap_or(file);
    Some(match f.line {
        Some(l) => format!("{base}:{l}"),
        None => base.to_string(),
    })
}

/// The function of a frame, or [`Frame::unnamed`] (`object+0xOFFSET`).
fn function_label(f: &Frame) -> String {
    match &f.function {
        Some(name) => name.to_string(),
        None => f.unnamed(),
    }
}

/// Every frame, outermost first; the runtime's threads under
/// [`SERVICE_LABEL`].
fn full_path(t: &ThreadStack) -> (Vec<Key>, Option<String>) {
    let mut path = Vec::with_capacity(t.frames.len() + 1);
    if position(t) == Position::Runtime {
        path.push((SERVICE_LABEL.to_string(), None));
    }
    for f in t.frames.iter().rev() {
        let mut label = function_label(f);
        if f.inlined {
            label.push_str(" [inlined]");
        }
        path.push((label, location(f)));
    }
    (path, None)
}

/// An application thread's frames from its first frame that is not the C
/// runtime's start down to its MPI call; `None` for the runtime's threads.
fn compact_path(t: &ThreadStack, p: &ProcessSnapshot) -> Option<(Vec<Key>, Option<String>)> {
    if position(t) == Position::Runtime {
        return None;
    }
    let entry = outermost_entry(t);
    let inner = entry.as_ref().map_or(0, |(i, _)| *i);
    let frames = t.frames.get(inner..).unwrap_or_default();
    let mut path: Vec<Key> = Vec::with_capacity(frames.len());
    let mut outer = true;
    // A Python program reads as its Python frames, mpi4py's call and the
    // MPI call: the interpreter's and the binding's own frames are left out.
    // The interpreter's exit is kept, the rest of the interpreter is not.
    let python = t.frames.iter().any(|f| f.python || is_interpreter_exit(f));
    for (k, f) in frames.iter().enumerate().rev() {
        let name = f.function.as_deref().unwrap_or_default();
        if outer && is_start_frame(name) {
            continue;
        }
        outer = false;
        if k == 0 {
            break; // the innermost frame: below
        }
        if python && !f.python && !is_interpreter_exit(f) && is_python_machinery(f) {
            continue;
        }
        if is_recorder_frame(f) {
            continue; // mpiq's own wrapper around the MPI call
        }
        let label = function_label(f);
        if path.last().is_some_and(|(l, _)| *l == label) {
            continue; // an inlined copy of the same function
        }
        path.push((label, None));
    }
    let detail = match (&entry, frames.first()) {
        (Some((i, call)), _) => {
            let outer = beyond_recorder(&t.frames[i + 1..]);
            let (py, api) = python_site(outer);
            let caller = match py {
                Some(j) => location(&outer[j]),
                None => outer.first().and_then(location),
            };
            if let Some(api) = api.filter(|_| python) {
                path.push((api, None));
            }
            path.push((c_name(call), caller));
            let calls = p.stacks.as_ref().map(|s| s.calls.as_slice()).unwrap_or_default();
            let call = calls.iter().find(|c| c.tid == t.tid);
            call.and_then(|c| call_words(c, &p.communicators))
        }
        (None, Some(f)) => {
            path.push((function_label(f), location(f)));
            None
        }
        (None, None) => None,
    };
    Some((path, detail))
}

/// What a call waits for in words, when its arguments were recovered:
/// ` from rank 0, tag 3`, ` to rank 2, tag 5 on solver`, ` on MPI_COMM_WORLD`.
fn call_words(c: &MpiCall, comms: &[Communicator]) -> Option<String> {
    let comm = c.communicator.as_ref().map(|id| {
        comms
            .iter()
            .find(|k| &k.id == id)
            .filter(|k| !k.name.is_empty())
            .map_or_else(|| format!("communicator {id}"), |k| k.name.clone())
    });
    let tag = || match (c.any_tag, c.tag) {
        (true, _) => Some("any tag".to_string()),
        (false, Some(t)) => Some(format!("tag {t}")),
        (false, None) => None,
    };
    let on = |comm: &Option<String>| match comm.as_deref() {
        None | Some("MPI_COMM_WORLD") => String::new(),
        Some(name) => format!(" on {name}"),
    };
    let peer = |dir: &str| match (c.any_source, c.peer) {
        (true, _) => Some(format!("{dir} any source")),
        (false, Some(p)) => Some(format!("{dir} rank {p}")),
        (false, None) => None,
    };
    match classify(&c.call) {
        CallClass::Send { .. } => Some(format!(" {}, {}{}", peer("to")?, tag()?, on(&comm))),
        CallClass::Recv => Some(format!(" {}, {}{}", peer("from")?, tag()?, on(&comm))),
        CallClass::Collective { .. } | CallClass::CommConstruct | CallClass::InitFinalize => {
            let mut s = format!(" on {}", comm?);
            if let Some(r) = c.root {
                s.push_str(&format!(" (root {r})"));
            }
            Some(s)
        }
        _ => None,
    }
}

#[cfg(test)]
#[path = "tree_tests.rs"]
pub(crate) mod tests;
