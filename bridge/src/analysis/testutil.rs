//! Builders for the snapshots the tests analyse (test-only).

use crate::snapshot::model::*;

/// A snapshot; operations on communicators with a known group get their
/// world ranks filled in, as the normaliser does.
pub(crate) fn snapshot(mut processes: Vec<ProcessSnapshot>) -> Snapshot {
    for p in &mut processes {
        for c in &mut p.communicators {
            let group = c.world_ranks.clone();
            let tr = |l: Option<i64>| -> Option<i64> {
                let g = group.as_ref()?;
                g.get(usize::try_from(l?).ok()?).copied().flatten()
            };
            for kind in QueueKind::ALL {
                for op in &mut c.queues.get_mut(kind).operations {
                    if op.peer.world.is_none() {
                        op.peer.world = tr(op.peer.local);
                    }
                    if let Some(a) = &mut op.actual {
                        if a.world.is_none() {
                            a.world = tr(a.local);
                        }
                    }
                }
            }
        }
    }
    Snapshot {
        processes,
        ..Snapshot::default()
    }
}

/// A readable process with these communicators.
pub(crate) fn process(rank: i32, communicators: Vec<Communicator>) -> ProcessSnapshot {
    ProcessSnapshot {
        communicators,
        ..ProcessSnapshot::new(Some(1000 + rank as u32), Some(rank), "/tmp/app")
    }
}

/// A process whose queues could not be read.
pub(crate) fn failed(rank: i32, error: &str) -> ProcessSnapshot {
    ProcessSnapshot {
        error: Some(error.into()),
        queues_missing: None,
        ..process(rank, Vec::new())
    }
}

/// A communicator of unknown group (MPICH without `mqs_get_comm_group`).
pub(crate) fn comm(name: &str, size: i64, local: i64) -> Communicator {
    Communicator {
        id: format!("0x{:x}", 0x5000 + size * 16 + local),
        name: name.into(),
        size: Some(size),
        local_rank: Some(local),
        world_ranks: None,
        world_ranks_source: None,
        world_ranks_rejected: None,
        queues: Queues {
            sends: Queue::available(Vec::new()),
            receives: Queue::available(Vec::new()),
            unexpected: Queue::available(Vec::new()),
        },
    }
}

/// `MPI_COMM_WORLD` as every library reports it.
pub(crate) fn world(size: i64, rank: i64) -> Communicator {
    Communicator {
        id: "0".into(),
        world_ranks: Some((0..size).map(Some).collect()),
        world_ranks_source: Some("world".into()),
        world_ranks_rejected: None,
        ..comm("MPI_COMM_WORLD", size, rank)
    }
}

/// A pending receive; `None` source is `MPI_ANY_SOURCE`, `None` tag `MPI_ANY_TAG`.
pub(crate) fn recv(source: Option<i64>, tag: Option<i64>) -> Operation {
    Operation {
        status: Status::Pending,
        peer: Peer {
            local: source,
            world: None,
        },
        any_source: source.is_none(),
        tag,
        any_tag: tag.is_none(),
        length: Some(16),
        buffer: format!("0x{:x}", 0x7000 + source.unwrap_or(99) * 0x100 + tag.unwrap_or(0)),
        system_buffer: false,
        actual: None,
        extra_text: Vec::new(),
        request: None,
    }
}

/// A send to a local rank with a tag.
pub(crate) fn send(dest: i64, tag: i64, status: Status) -> Operation {
    Operation {
        status,
        peer: Peer {
            local: Some(dest),
            world: None,
        },
        any_source: false,
        tag: Some(tag),
        any_tag: false,
        length: Some(16),
        buffer: format!("0x{:x}", 0x9000 + dest * 0x100 + tag),
        system_buffer: false,
        actual: Some(Actual {
            local: Some(dest),
            world: None,
            tag: Some(tag),
            length: Some(16),
        }),
        extra_text: Vec::new(),
        request: None,
    }
}

/// An unexpected message from a local rank with a tag (MPICH style).
pub(crate) fn unexpected(source: i64, tag: i64) -> Operation {
    Operation {
        status: Status::Complete,
        length: Some(-1).filter(|l| *l >= 0),
        system_buffer: true,
        ..send(source, tag, Status::Complete)
    }
}

/// Builder methods on communicators.
pub(crate) trait CommExt {
    /// With these posted receives.
    fn recvs(self, ops: Vec<Operation>) -> Self;
    /// With these sends.
    fn sends(self, ops: Vec<Operation>) -> Self;
    /// With these unexpected messages.
    fn unexp(self, ops: Vec<Operation>) -> Self;
    /// With a group from the library.
    fn group(self, ranks: Vec<i64>) -> Self;
    /// With another id.
    fn id(self, id: &str) -> Self;
}

impl CommExt for Communicator {
    fn recvs(mut self, ops: Vec<Operation>) -> Self {
        self.queues.receives.operations = ops;
        self
    }
    fn sends(mut self, ops: Vec<Operation>) -> Self {
        self.queues.sends.operations = ops;
        self
    }
    fn unexp(mut self, ops: Vec<Operation>) -> Self {
        self.queues.unexpected.operations = ops;
        self
    }
    fn group(mut self, ranks: Vec<i64>) -> Self {
        self.world_ranks = Some(ranks.into_iter().map(Some).collect());
        self.world_ranks_source = Some("library".into());
        self
    }
    fn id(mut self, id: &str) -> Self {
        self.id = id.into();
        self
    }
}

/// A frame of `function` in `object`; with a `line`, in the file `app.c`.
pub(crate) fn frame(function: &str, object: &str, line: Option<u32>) -> Frame {
    Frame {
        pc: "0x1".into(),
        function: Some(function.into()),
        object: Some(object.into()),
        file: line.map(|_| "app.c".into()),
        line,
        inlined: false,
        offset: None,
        python: false,
    }
}

/// A thread of `app` in MPI call `entry` (`PMPI_Recv`) of `libmpi`, called
/// from `main` at `line` (the library's progress engine innermost).
pub(crate) fn in_mpi_of(libmpi: &str, app: &str, tid: u64, entry: &str, line: u32) -> ThreadStack {
    ThreadStack {
        tid,
        frames: vec![
            frame("opal_progress", libmpi, None),
            frame(entry, libmpi, None),
            frame("main", app, Some(line)),
        ],
        ..ThreadStack::default()
    }
}
