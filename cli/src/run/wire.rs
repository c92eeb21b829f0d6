//! What a node's collector sends back to the front end, and how it travels.
//!
//! A collector writes its messages to its standard output, which the
//! launcher (srun, ssh) carries to the front end. srun relays a task's
//! output in pieces of at most 1 KiB and interleaves the pieces of
//! different nodes within a long line (seen with Slurm 22.05), so every
//! message is cut into lines of at most [`MAX_LINE`] bytes:
//!
//! ```text
//! @mpiq1 NODE SEQ PART/PARTS JSON-PIECE
//! ```
//!
//! NODE names the sending node, SEQ numbers its messages, and the pieces
//! of one message are sent in order and joined by the [`Reassembler`].
//! Lines without the prefix (a launcher's own messages) are kept apart for
//! the error report.

use std::collections::HashMap;

use mpiq::{Group, GroupRuns, ProcessSnapshot};
use serde::{Deserialize, Serialize};

/// The prefix of every line of the protocol (its version is in it).
pub const PREFIX: &str = "@mpiq1 ";

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

    #[test]
    fn broken_lines_are_reported() {
        let mut r = Reassembler::default();
        assert!(matches!(r.push("@mpiq1 n1 x 1/1 {}"), Line::Bad(_)));
        assert!(matches!(r.push("@mpiq1 n1 0 2/2 {}"), Line::Bad(_)));
        assert!(matches!(r.push("@mpiq1 n1 0 1/1 {"), Line::Bad(_)));
        assert!(matches!(r.push("@mpiq1 n1"), Line::Bad(_)));
    }
}
