//! What a node's collector sends back to the front end, and how it travels.
//!
//! A collector writes its messages to its standard output, which the
//! launcher (srun, ssh) carries to the front end. srun relays a task's
//! output in pieces of at most 1 KiB and interleaves the pieces of
//! different nodes within a long line (seen with Slurm 22.05), so every
//! message is cut into lines of at most [`MAX_LINE`] bytes:
//!
//! ```text
//! @mpiq2 NODE SEQ PART/PARTS JSON-PIECE
//! ```
//!
//! NODE names the sending node, SEQ numbers its messages, and the pieces
//! of one message are sent in order and joined by the [`Reassembler`].
//! Lines without the prefix (a launcher's own messages) are kept apart for
//! the error report.
//!
//! **Compact records** (`mpiq collect --compact`, what `mpiq job` asks for
//! unless its output shows every rank): each rank travels as what the
//! analysis and the merged stacks read, and each distinct stack of a node
//! once ([`StackTable`]: a frame whose function is named without its
//! address, which ASLR makes differ from process to process, so ranks in
//! the same place share their stacks). The collector then keeps its
//! samples whole and waits ([`Message::Waiting`]) for one [`Request`] on
//! its standard input: the ranks the front end shows whole, or none; it
//! sends those whole and ends.

use std::collections::HashMap;

use mpiq::{Frame, Group, GroupRuns, ProcessSnapshot};
use serde::{Deserialize, Serialize};

/// The prefix of every line of the protocol (its version is in it).
pub const PREFIX: &str = "@mpiq2 ";

/// The longest line written, newline included: below srun's 1 KiB pieces.
pub const MAX_LINE: usize = 1000;

/// One message of a collector.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Message {
    /// The collector started: its pid on the node and how many ranks it
    /// found there.
    Hello {
        /// The collector's process id (on its node).
        pid: u32,
        /// The ranks it will read.
        ranks: usize,
    },
    /// One process of one sample.
    Process {
        /// The sample (0, 1).
        sample: u8,
        /// The process, as the collector read it (`node` set).
        process: Box<ProcessSnapshot>,
        /// Each MPI call's [`mpiq::MpiCall::state`], in the order of the
        /// process's `stacks.calls` (the digest is not part of the JSON
        /// schema, but the stall rule compares it across samples).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        states: Vec<Option<String>>,
        /// Each communicator's group (`world_ranks`, in the order of the
        /// process's `communicators`) as runs of ranks: `MPI_COMM_WORLD` of
        /// N ranks is one pair, not N numbers (which every rank of a
        /// 100,000-rank job would send, and the front end hold).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        groups: Vec<Option<GroupRuns>>,
        /// A compact record's stacks: for each thread of `process.stacks`
        /// (whose frames are left empty), the id of its frames in the
        /// node's [`Message::Stack`]s. Empty for a whole snapshot.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        stacks: Vec<u32>,
    },
    /// One distinct stack of this node's compact records, sent before the
    /// first record that names it.
    Stack {
        /// Its id among this node's stacks.
        id: u32,
        /// Its frames, innermost first (see [`compact_frame`]).
        frames: Vec<Frame>,
    },
    /// A sample is complete.
    Sampled {
        /// The sample.
        sample: u8,
        /// Milliseconds since the collector's first sample began.
        at_ms: u64,
    },
    /// Ranks the node's processes say the job has (`PMI_SIZE`, ...), when
    /// the collector found its ranks itself (`--slurm`).
    JobSize {
        /// The size of `MPI_COMM_WORLD`.
        size: i32,
    },
    /// The collector failed as a whole (no rank read on this node).
    Failed {
        /// Why, in words.
        error: String,
    },
    /// Every sample was sent as compact records; the collector holds its
    /// samples whole and waits for a [`Request`].
    Waiting,
    /// Everything was sent.
    Done,
}

impl Message {
    /// A process message, with the calls' state digests carried beside the
    /// snapshot.
    pub fn process(sample: u8, mut process: ProcessSnapshot) -> Message {
        let states = process
            .stacks
            .as_ref()
            .map(|s| s.calls.iter().map(|c| c.state.clone()).collect())
            .unwrap_or_default();
        let groups = process
            .communicators
            .iter_mut()
            .map(|c| c.world_ranks.take().map(|g| g.runs()))
            .collect();
        Message::Process {
            sample,
            process: Box::new(process),
            states,
            groups,
            stacks: Vec::new(),
        }
    }
}

/// A frame as a compact record sends it: without its address when its
/// function is named or its offset in its object known. Nothing the
/// analysis or the merged stacks read is lost: they know a frame by its
/// function, file and line, or by its object and offset, and by its
/// address only when it has neither (then it is kept). Ranks at the same
/// place in a program without symbols send one stack, whatever ASLR did.
fn compact_frame(f: &Frame) -> Frame {
    let mut f = f.clone();
    if f.function.is_some() || (f.offset.is_some() && f.object.is_some()) {
        f.pc = String::new();
    }
    f
}

/// The distinct stacks a collector has sent as [`Message::Stack`]s.
#[derive(Debug, Default)]
pub struct StackTable {
    ids: HashMap<Vec<Frame>, u32>,
}

impl StackTable {
    /// The messages that send `process` as a compact record: a
    /// [`Message::Stack`] for each of its threads' stacks not sent before,
    /// then the record, which names them by id. What the record leaves
    /// out: the frames' addresses (see [`compact_frame`]) and the dump's
    /// own statistics; the whole snapshot is sent on [`Request`].
    pub fn compact(&mut self, sample: u8, process: ProcessSnapshot) -> Vec<Message> {
        self.compact_message(Message::process(sample, process))
    }

    /// [`StackTable::compact`] of a process message made already (any other
    /// message is sent as it is).
    pub fn compact_message(&mut self, mut m: Message) -> Vec<Message> {
        let mut out = Vec::new();
        let Message::Process {
            process, stacks: ids, ..
        } = &mut m
        else {
            return vec![m];
        };
        process.stats = None;
        if let Some(stacks) = process.stacks.as_mut() {
            for t in &mut stacks.threads {
                let frames: Vec<Frame> = std::mem::take(&mut t.frames).iter().map(compact_frame).collect();
                let next = self.ids.len() as u32;
                let id = match self.ids.get(&frames) {
                    Some(&id) => id,
                    None => {
                        self.ids.insert(frames.clone(), next);
                        out.push(Message::Stack { id: next, frames });
                        next
                    }
                };
                ids.push(id);
            }
        }
        out.push(m);
        out
    }
}

/// Every node's stacks the front end has received ([`Message::Stack`]).
#[derive(Debug, Default)]
pub struct NodeStacks(HashMap<String, HashMap<u32, Vec<Frame>>>);

impl NodeStacks {
    /// Keeps one stack of `node`.
    pub fn insert(&mut self, node: &str, id: u32, frames: Vec<Frame>) {
        self.0.entry(node.to_string()).or_default().insert(id, frames);
    }

    /// Fills a compact record's threads with their frames (`ids`: one per
    /// thread; nothing to do for a whole snapshot). A stack that did not
    /// arrive leaves its thread a note saying so.
    pub fn fill(&self, node: &str, process: &mut ProcessSnapshot, ids: &[u32]) {
        let Some(stacks) = process.stacks.as_mut().filter(|_| !ids.is_empty()) else {
            return;
        };
        let table = self.0.get(node);
        for (t, id) in stacks.threads.iter_mut().zip(ids) {
            match table.and_then(|s| s.get(id)) {
                Some(frames) => t.frames = frames.clone(),
                None => t.note = Some(format!("its stack (number {id} of node {node}) did not arrive")),
            }
        }
    }
}

/// What the front end asks a waiting collector, one line on its standard
/// input (srun gives every node's collector the same input).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Send these world ranks whole (those of this node), or every rank
    /// (`None`), as the last sample read them, then end.
    Detail(Option<Vec<i64>>),
    /// Send every rank of every sample whole, then end (`mpiq job
    /// --collect check`).
    Every,
    /// Send nothing more; end.
    End,
}

/// The line after which a job's table on a collector's standard input
/// ends, when requests follow it.
pub const TABLE_END: &str = ".";

impl Request {
    /// The request as one line, with its newline.
    pub fn line(&self) -> String {
        match self {
            Request::Detail(None) => "detail all\n".into(),
            Request::Detail(Some(r)) => {
                let mut line = "detail".to_string();
                for rank in r {
                    line.push_str(&format!(" {rank}"));
                }
                line + "\n"
            }
            Request::Every => "every\n".into(),
            Request::End => "end\n".into(),
        }
    }

    /// Whether the request asks for the rank `world_rank` as sample
    /// `sample` read it (`last`: the collector's last sample).
    pub fn wants(&self, sample: u8, last: u8, world_rank: Option<i64>) -> bool {
        match self {
            Request::Every => true,
            Request::Detail(_) if sample != last => false,
            Request::Detail(None) => true,
            Request::Detail(Some(r)) => world_rank.is_some_and(|w| r.contains(&w)),
            Request::End => false,
        }
    }

    /// A request line; `None` for anything else.
    pub fn parse(line: &str) -> Option<Request> {
        let mut w = line.split_whitespace();
        match w.next()? {
            "end" => Some(Request::End),
            "every" => Some(Request::Every),
            "detail" => {
                let rest: Vec<&str> = w.collect();
                if rest == ["all"] {
                    return Some(Request::Detail(None));
                }
                rest.iter()
                    .map(|r| r.parse::<i64>().ok())
                    .collect::<Option<Vec<i64>>>()
                    .map(|r| Request::Detail(Some(r)))
            }
            _ => None,
        }
    }
}

/// The groups the front end has received, each kept once and shared by
/// every process that holds it.
#[derive(Debug, Default)]
pub struct Groups(HashMap<GroupRuns, Group>);

impl Groups {
    /// The shared group of these runs.
    fn get(&mut self, runs: GroupRuns) -> Group {
        self.0.entry(runs).or_insert_with_key(GroupRuns::group).clone()
    }
}

/// Puts what a process message carries beside the snapshot back into it:
/// the state digests into its calls, the groups into its communicators
/// (shared through `groups`).
pub fn restore(
    process: &mut ProcessSnapshot,
    states: Vec<Option<String>>,
    runs: Vec<Option<GroupRuns>>,
    groups: &mut Groups,
) {
    if let Some(stacks) = process.stacks.as_mut() {
        for (call, state) in stacks.calls.iter_mut().zip(states) {
            call.state = state;
        }
        // A list read from JSON grows by doubling: up to half of it empty,
        // kept for every rank of the job until the end.
        stacks.threads.shrink_to_fit();
        for t in &mut stacks.threads {
            t.frames.shrink_to_fit();
        }
        stacks.calls.shrink_to_fit();
    }
    process.communicators.shrink_to_fit();
    for (c, r) in process.communicators.iter_mut().zip(runs) {
        if let Some(r) = r {
            c.world_ranks = Some(groups.get(r));
        }
    }
}

/// The lines of message number `seq` of `node`, each ending in a newline.
pub fn frame(node: &str, seq: u64, message: &Message) -> Vec<String> {
    let json = serde_json::to_string(message).unwrap_or_else(|e| {
        serde_json::to_string(&Message::Failed {
            error: format!("cannot encode a message: {e}"),
        })
        .unwrap_or_default()
    });
    let header_room = PREFIX.len() + node.len() + 48;
    let room = MAX_LINE.saturating_sub(header_room).max(64);
    let mut pieces = Vec::new();
    let mut rest = json.as_str();
    while !rest.is_empty() {
        let mut end = room.min(rest.len());
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        pieces.push(&rest[..end]);
        rest = &rest[end..];
    }
    if pieces.is_empty() {
        pieces.push("");
    }
    let parts = pieces.len();
    pieces
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{PREFIX}{node} {seq} {}/{parts} {p}\n", i + 1))
        .collect()
}

/// What one line of a collector's output was.
#[derive(Debug, PartialEq)]
pub enum Line {
    /// Not a protocol line (a launcher's message).
    Other(String),
    /// A piece of a message that is not complete yet.
    Partial,
    /// A complete message of a node.
    Message(String, Box<Message>),
    /// A protocol line that is malformed, or a message that does not parse.
    Bad(String),
}

/// How a [`Message::Process`] begins: serde writes an internally tagged
/// enum's tag first.
const PROCESS_START: &str = r#"{"kind":"process","#;

/// A [`Message::Process`] read as a plain struct (its `kind` ignored): the
/// enum's derived reader first holds the whole message as a tree of values
/// to find its tag, which cost the front end of a 100,000-rank job a tenth
/// of its time.
#[derive(Deserialize)]
struct ProcessBody {
    sample: u8,
    process: Box<ProcessSnapshot>,
    #[serde(default)]
    states: Vec<Option<String>>,
    #[serde(default)]
    groups: Vec<Option<GroupRuns>>,
    #[serde(default)]
    stacks: Vec<u32>,
}

/// Joins the pieces of each node's messages.
#[derive(Debug, Default)]
pub struct Reassembler {
    partial: HashMap<String, (u64, usize, String)>,
}

impl Reassembler {
    /// Takes one line (without its newline).
    pub fn push(&mut self, line: &str) -> Line {
        let Some(rest) = line.strip_prefix(PREFIX) else {
            return Line::Other(line.to_string());
        };
        let mut words = rest.splitn(4, ' ');
        let (Some(node), Some(seq), Some(part), piece) = (words.next(), words.next(), words.next(), words.next())
        else {
            return Line::Bad(format!("short protocol line: {line:.80}"));
        };
        let piece = piece.unwrap_or_default();
        let parsed = seq.parse::<u64>().ok().zip(
            part.split_once('/')
                .and_then(|(i, n)| Some((i.parse::<usize>().ok()?, n.parse::<usize>().ok()?))),
        );
        let Some((seq, (i, n))) = parsed.filter(|(_, (i, n))| *i >= 1 && i <= n) else {
            return Line::Bad(format!("bad protocol line header: {line:.80}"));
        };
        let entry = self.partial.entry(node.to_string()).or_insert((seq, 0, String::new()));
        if i == 1 {
            *entry = (seq, 1, piece.to_string());
        } else if entry.0 == seq && entry.1 + 1 == i {
            entry.1 = i;
            entry.2.push_str(piece);
        } else {
            self.partial.remove(node);
            return Line::Bad(format!("node {node}: piece {i}/{n} of message {seq} out of order"));
        }
        if i < n {
            return Line::Partial;
        }
        let (_, _, json) = self.partial.remove(node).unwrap_or_default();
        if json.starts_with(PROCESS_START) {
            return match serde_json::from_str::<ProcessBody>(&json) {
                Ok(b) => Line::Message(
                    node.to_string(),
                    Box::new(Message::Process {
                        sample: b.sample,
                        process: b.process,
                        states: b.states,
                        groups: b.groups,
                        stacks: b.stacks,
                    }),
                ),
                Err(e) => Line::Bad(format!("node {node}: message {seq} does not parse: {e}")),
            };
        }
        match serde_json::from_str::<Message>(&json) {
            Ok(m) => Line::Message(node.to_string(), Box::new(m)),
            Err(e) => Line::Bad(format!("node {node}: message {seq} does not parse: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn process(exe: &str) -> ProcessSnapshot {
        ProcessSnapshot {
            node: Some("n2".into()),
            messages: vec!["é".repeat(700)],
            ..ProcessSnapshot::new(Some(7), Some(3), exe)
        }
    }

    #[test]
    fn long_messages_travel_in_short_lines_and_come_back_whole() {
        let m = Message::process(1, process(&"x/".repeat(2000)));
        let lines = frame("n2", 5, &m);
        assert!(lines.len() > 3);
        // Read by the fast path, not the enum's.
        assert!(lines[0].contains(PROCESS_START), "{}", lines[0]);
        assert!(lines.iter().all(|l| l.len() <= MAX_LINE && l.ends_with('\n')));
        let mut r = Reassembler::default();
        // Another node's lines and a launcher's message in between.
        let other = frame("n1", 0, &Message::Done);
        let mut got = Vec::new();
        for (k, l) in lines.iter().enumerate() {
            got.push(r.push(l.trim_end_matches('\n')));
            if k == 1 {
                assert_eq!(
                    r.push(other[0].trim_end()),
                    Line::Message("n1".into(), Box::new(Message::Done))
                );
                assert_eq!(
                    r.push("srun: error: n3: task 2: Killed"),
                    Line::Other("srun: error: n3: task 2: Killed".into())
                );
            }
        }
        let last = got.pop().unwrap();
        assert!(got.iter().all(|l| *l == Line::Partial));
        assert_eq!(last, Line::Message("n2".into(), Box::new(m)));
    }

    #[test]
    fn states_travel_beside_the_snapshot() {
        let mut p = process("/a");
        p.stacks = Some(mpiq::Stacks {
            calls: vec![
                mpiq::MpiCall {
                    state: Some("abc".into()),
                    ..Default::default()
                },
                mpiq::MpiCall::default(),
            ],
            ..Default::default()
        });
        let world: mpiq::Group = (0..100_000).map(Some).collect();
        p.communicators.push(mpiq::Communicator {
            id: "0".into(),
            name: "MPI_COMM_WORLD".into(),
            size: Some(100_000),
            local_rank: Some(7),
            world_ranks: Some(world.clone()),
            world_ranks_source: Some("world".into()),
            world_ranks_rejected: None,
            queues: mpiq::Queues {
                sends: mpiq::Queue::available(Vec::new()),
                receives: mpiq::Queue::available(Vec::new()),
                unexpected: mpiq::Queue::available(Vec::new()),
            },
        });
        let m = Message::process(0, p.clone());
        let lines = frame("n1", 0, &m);
        assert!(lines.len() < 4, "the world group travels as one run: {lines:?}");
        let Message::Process {
            mut process,
            states,
            groups: runs,
            ..
        } = m
        else {
            panic!()
        };
        let json = serde_json::to_string(&process).unwrap();
        assert!(!json.contains("abc"), "the digest is not in the snapshot's JSON");
        process.stacks.as_mut().unwrap().calls[0].state = None;
        let mut groups = Groups::default();
        let mut twin = process.clone();
        restore(&mut process, states.clone(), runs.clone(), &mut groups);
        assert_eq!(*process, p);
        // A second process with the same group shares it.
        restore(&mut twin, states, runs, &mut groups);
        let (a, b) = (&process.communicators[0], &twin.communicators[0]);
        assert!(mpiq::Group::same(
            a.world_ranks.as_ref().unwrap(),
            b.world_ranks.as_ref().unwrap()
        ));
    }

    fn frame_at(pc: &str, function: Option<&str>) -> Frame {
        Frame {
            pc: pc.into(),
            function: function.map(mpiq::Text::intern),
            line: Some(7),
            ..Frame::default()
        }
    }

    /// A rank whose main thread is in `main` at `pc` (its own address, as
    /// ASLR gives each process), above a frame with no name.
    fn ranked(rank: i32, pc: &str) -> ProcessSnapshot {
        let mut p = ProcessSnapshot::new(Some(100 + rank as u32), Some(rank), "/a");
        p.stats = Some(mpiq::DumpStats::default());
        p.stacks = Some(mpiq::Stacks {
            threads: vec![mpiq::ThreadStack {
                tid: 100 + rank as u64,
                frames: vec![frame_at("0x1234", None), frame_at(pc, Some("main"))],
                ..Default::default()
            }],
            ..Default::default()
        });
        p
    }

    #[test]
    fn compact_records_share_a_nodes_stacks_and_come_back_whole_but_for_addresses() {
        let mut table = StackTable::default();
        let first = table.compact(0, ranked(0, "0x7f01"));
        let second = table.compact(0, ranked(1, "0x7f02"));
        // The first sends its stack, the second only names it.
        assert_eq!(first.len(), 2, "{first:?}");
        assert!(
            matches!(&first[0], Message::Stack { id: 0, frames } if frames[1].pc.is_empty() && frames[0].pc == "0x1234")
        );
        assert_eq!(second.len(), 1, "{second:?}");
        let mut stacks = NodeStacks::default();
        let mut got = Vec::new();
        for m in first.into_iter().chain(second) {
            // Through the wire and back.
            let line = frame("n1", 0, &m).concat();
            let Line::Message(node, m) = Reassembler::default().push(line.trim_end()) else {
                panic!("{line}")
            };
            match *m {
                Message::Stack { id, frames } => stacks.insert(&node, id, frames),
                Message::Process {
                    mut process,
                    stacks: ids,
                    ..
                } => {
                    assert_eq!(ids, vec![0]);
                    assert!(process.stats.is_none(), "the record leaves the dump's statistics out");
                    stacks.fill(&node, &mut process, &ids);
                    got.push(*process);
                }
                m => panic!("{m:?}"),
            }
        }
        for (r, p) in got.iter().enumerate() {
            let mut want = ranked(r as i32, "");
            want.stats = None;
            assert_eq!(
                *p, want,
                "rank {r}: the named frame without its address, the unnamed one with it"
            );
        }
        // Another node's stack 0 is not this one's.
        let mut other = ranked(2, "0x1");
        let Message::Process { process, .. } = table.compact(0, other.clone()).pop().unwrap() else {
            panic!()
        };
        other.stacks.as_mut().unwrap().threads[0].frames.clear();
        stacks.fill("n2", &mut other, &[0]);
        assert!(other.stacks.unwrap().threads[0]
            .note
            .as_deref()
            .unwrap()
            .contains("did not arrive"));
        assert!(process.stacks.unwrap().threads[0].frames.is_empty());
    }

    #[test]
    fn requests_read_back_as_written() {
        for r in [
            Request::Detail(None),
            Request::Detail(Some(vec![0, 15, 99_999])),
            Request::Detail(Some(Vec::new())),
            Request::Every,
            Request::End,
        ] {
            let line = r.line();
            assert!(line.ends_with('\n') && !line.trim_end().contains('\n'), "{line:?}");
            assert_eq!(Request::parse(line.trim_end()), Some(r));
        }
        assert_eq!(Request::parse("n1 4242 0"), None, "a table line is no request");
        let some = Request::Detail(Some(vec![3]));
        assert!(some.wants(1, 1, Some(3)) && !some.wants(0, 1, Some(3)) && !some.wants(1, 1, Some(4)));
        assert!(Request::Detail(None).wants(1, 1, None) && !Request::Detail(None).wants(0, 1, None));
        assert!(Request::Every.wants(0, 1, None) && !Request::End.wants(1, 1, Some(3)));
        assert_eq!(Request::parse("detail 1 x"), None);
    }

    #[test]
    fn broken_lines_are_reported() {
        let mut r = Reassembler::default();
        assert!(matches!(r.push("@mpiq2 n1 x 1/1 {}"), Line::Bad(_)));
        assert!(matches!(r.push("@mpiq2 n1 0 2/2 {}"), Line::Bad(_)));
        assert!(matches!(r.push("@mpiq2 n1 0 1/1 {"), Line::Bad(_)));
        assert!(matches!(r.push("@mpiq2 n1"), Line::Bad(_)));
    }
}
