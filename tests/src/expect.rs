//! The exact queue contents each example leaves on each rank, as its header
//! comment documents them, and a checker for a process of a snapshot
//! (`mpiq.snapshot/2` JSON, from any front end).

use serde_json::Value;

use crate::{Example, Mpi};

/// What a peer's world rank must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum World {
    /// Exactly this rank.
    Is(i64),
    /// This rank, or unknown (`null`) where the library cannot tell
    /// (MPICH has no `mqs_get_comm_group`).
    IsOrUnknown(i64),
    /// Unknown (`null`): a wildcard.
    Unknown,
}

/// One expected operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Op {
    /// Communicator name.
    pub comm: &'static str,
    /// "sends", "receives" or "unexpected".
    pub queue: &'static str,
    /// Peer's local rank; `None` for ANY_SOURCE.
    pub local: Option<i64>,
    /// Peer's world rank.
    pub world: World,
    /// Tag; `None` for ANY_TAG.
    pub tag: Option<i64>,
    /// Length as the library reports it (`None`: do not check).
    pub length: Option<i64>,
    /// Status, when it is certain.
    pub status: Option<&'static str>,
}

/// An expected communicator: name, size, my local rank, world ranks (when the
/// library can know them: `None` means "must be null or these").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Comm {
    /// Name.
    pub name: &'static str,
    /// Size.
    pub size: i64,
    /// This process's rank in it.
    pub local_rank: i64,
    /// World rank of each local rank.
    pub world_ranks: Vec<i64>,
}

/// Everything checked for one rank.
#[derive(Clone, Debug, Default)]
pub struct Expected {
    /// Communicators that must be listed.
    pub comms: Vec<Comm>,
    /// Every pending operation of the process, grouped by communicator and
    /// queue in the library's order; nothing else may be pending.
    pub ops: Vec<Op>,
    /// Communicators whose group the library gets wrong: their world ranks must be
    /// rejected (`world_ranks` null, `world_ranks_rejected` saying why), never shown.
    pub rejected_groups: Vec<&'static str>,
    /// The library reads receives wrongly (MPICH 4.0.2's ch4): every receive and
    /// unexpected-message queue must be "not trustworthy" (not available, never empty), the
    /// process's `queues_missing.reason` `library_untrusted` with its `error` saying so, and
    /// only the sends are compared.
    pub untrusted_receives: bool,
}

/// Open MPI gives lengths in bytes, MPICH in elements (of 4-byte ints here).
fn ints(mpi: Mpi, n: i64) -> i64 {
    if mpi.is_open_mpi() {
        4 * n
    } else {
        n
    }
}

/// The status to expect of a receive whose request an Open MPI rank is blocked on in
/// `MPI_Waitany`/`MPI_Waitall` (any `MPI_THREAD_MULTIPLE` blocking call, too): none, i.e.
/// do not check it. Open MPI 4.1.4 then stores a pointer to the waiter's `ompi_wait_sync_t`
/// (on its stack) in `req_complete` (req_wait.c:110, 218, 414; request.h:427), and its debug
/// library reads that field as a one-byte bool (ompi_msgq_dll.c:1128-1136, ompi_fetch_bool):
/// the operation shows as "complete", or "pending" when the pointer's low byte happens to be 0.
/// MPICH reports such receives "pending".
fn ompi_blocked_status(mpi: Mpi) -> Option<&'static str> {
    if mpi.is_open_mpi() {
        None
    } else {
        Some("pending")
    }
}

/// The queues `example` leaves on world rank `r` of an `n`-rank job under `mpi`.
/// `args` are the example's arguments (K for many_ops; waitany's and threads' variants
/// leave the same queues). `healthy`'s queues change all the time: its ops are empty and
/// must not be compared. Where a comment says "after READY", the operation appears only once
/// the rank is inside its blocking call: look a second time (or wait a moment).
pub fn expected(example: Example, mpi: Mpi, r: i64, n: i64, args: &[&str]) -> Expected {
    let ompi = mpi.is_open_mpi();
    let world: Vec<i64> = (0..n).collect();
    let world_comm = Comm {
        name: "MPI_COMM_WORLD",
        size: n,
        local_rank: r,
        world_ranks: world.clone(),
    };
    let left = (r - 1 + n) % n;
    let right = (r + 1) % n;
    let recv = |comm, local: i64, world: World, tag, len| Op {
        comm,
        queue: "receives",
        local: Some(local),
        world,
        tag: Some(tag),
        length: Some(len),
        status: Some("pending"),
    };
    let mut e = Expected {
        comms: vec![world_comm],
        ops: Vec::new(),
        rejected_groups: Vec::new(),
        untrusted_receives: false,
    };
    match example {
        Example::Ring => {
            e.ops
                .push(recv("MPI_COMM_WORLD", left, World::Is(left), 100 + r, ints(mpi, 16)));
            if !ompi {
                e.ops.push(Op {
                    comm: "MPI_COMM_WORLD",
                    queue: "sends",
                    local: Some(right),
                    world: World::Is(right),
                    tag: Some(200 + r),
                    length: Some(16),
                    status: Some("complete"),
                });
                e.ops.push(Op {
                    comm: "MPI_COMM_WORLD",
                    queue: "unexpected",
                    local: Some(left),
                    world: World::Is(left),
                    tag: Some(200 + left),
                    length: None,
                    status: None,
                });
            }
        }
        // Posted inside MPI_Recv, after READY: check once every rank is in its call.
        Example::BarrierVsRecv if r > 0 => {
            e.ops.push(recv("MPI_COMM_WORLD", 0, World::Is(0), 3, ints(mpi, 1)));
        }
        Example::BarrierVsRecv => {}
        Example::Deadlock => {
            e.ops
                .push(recv("MPI_COMM_WORLD", right, World::Is(right), 400 + r, ints(mpi, 16)));
        }
        Example::ManyOps => {
            let k: i64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(1000);
            for i in 0..k {
                // Tags wrap every 30,000 receives (many_ops.c keeps them <= 32767).
                e.ops.push(recv(
                    "MPI_COMM_WORLD",
                    right,
                    World::Is(right),
                    1000 + i % 30_000,
                    ints(mpi, 1),
                ));
            }
        }
        Example::Unexpected if r == 1 => {
            e.ops.push(recv("MPI_COMM_WORLD", 0, World::Is(0), 13, ints(mpi, 16)));
            if !ompi {
                for tag in [11, 12] {
                    e.ops.push(Op {
                        comm: "MPI_COMM_WORLD",
                        queue: "unexpected",
                        local: Some(0),
                        world: World::Is(0),
                        tag: Some(tag),
                        length: None,
                        status: None,
                    });
                }
            }
        }
        Example::NamedComms => {
            let h = n / 2;
            let color = i64::from(r >= h);
            let (half, base, hsize) = if color == 0 {
                ("left-half", 0, h)
            } else {
                ("right-half", h, n - h)
            };
            let hrank = r - base;
            e.comms.push(Comm {
                name: "solver",
                size: n,
                local_rank: r,
                world_ranks: world.clone(),
            });
            e.comms.push(Comm {
                name: half,
                size: hsize,
                local_rank: hrank,
                world_ranks: (base..base + hsize).collect(),
            });
            e.ops.push(Op {
                comm: "solver",
                queue: "receives",
                local: None,
                world: World::Unknown,
                tag: None,
                length: Some(ints(mpi, 16)),
                status: Some("pending"),
            });
            if hrank == 0 {
                e.ops.push(Op {
                    comm: half,
                    queue: "sends",
                    local: Some(1),
                    world: World::IsOrUnknown(base + 1),
                    tag: Some(600 + color),
                    length: Some(ints(mpi, 16384)),
                    status: None,
                });
            } else if hrank == 1 {
                e.ops.push(recv(half, 0, World::IsOrUnknown(base), 700, ints(mpi, 16)));
                if !ompi {
                    e.ops.push(Op {
                        comm: half,
                        queue: "unexpected",
                        local: Some(0),
                        world: World::IsOrUnknown(base),
                        tag: Some(600 + color),
                        length: None,
                        status: None,
                    });
                }
            }
        }
        Example::Sessions => {
            e.comms = vec![Comm {
                name: "sessions-world",
                size: n,
                local_rank: r,
                world_ranks: world,
            }];
            if mpi == Mpi::OpenMpi5 {
                // Open MPI 5.0.7's library reads the group of a communicator made from a
                // session's group as [0, 0, 0, 0] or worse (its processes are placeholders,
                // not instantiated): mpiq must reject it (docs/mpi-support.md).
                e.rejected_groups.push("sessions-world");
            }
            e.ops.push(recv(
                "sessions-world",
                right,
                World::IsOrUnknown(right),
                900,
                ints(mpi, 16),
            ));
        }
        Example::SplitMismatch => {
            // Nothing pending anywhere: the barriers' own messages are not listed (Open MPI
            // hides their negative tags; MPICH sends them on the communicators' collective
            // contexts, which its debug library does not show).
            let (name, base) = if r < 2 { ("low", 0) } else { ("high", 2) };
            e.comms.push(Comm {
                name,
                size: 2,
                local_rank: r - base,
                world_ranks: vec![base, base + 1],
            });
        }
        Example::SsendRing => {
            // Posted inside MPI_Ssend, after READY, and on MPICH the message must still
            // travel to r+1: check once every rank is in its call and a moment has passed.
            if ompi {
                e.ops.push(Op {
                    comm: "MPI_COMM_WORLD",
                    queue: "sends",
                    local: Some(right),
                    world: World::Is(right),
                    tag: Some(500 + r),
                    length: Some(4),
                    status: Some("pending"),
                });
            } else {
                // MPICH lists no blocking send (MPII_SENDQ_REMEMBER is only called by the
                // nonblocking ones): left's message is unexpected here instead.
                e.ops.push(Op {
                    comm: "MPI_COMM_WORLD",
                    queue: "unexpected",
                    local: Some(left),
                    world: World::Is(left),
                    tag: Some(500 + left),
                    length: None,
                    status: None,
                });
            }
        }
        Example::AnySourceComputing => match r {
            // Rank 0's and rank 2's receives are posted inside MPI_Recv, after READY.
            0 => e.ops.push(Op {
                comm: "MPI_COMM_WORLD",
                queue: "receives",
                local: None,
                world: World::Unknown,
                tag: Some(5),
                length: Some(ints(mpi, 1)),
                status: Some("pending"),
            }),
            1 => e.ops.push(recv("MPI_COMM_WORLD", 2, World::Is(2), 6, ints(mpi, 1))),
            _ => e.ops.push(recv("MPI_COMM_WORLD", 0, World::Is(0), 7, ints(mpi, 1))),
        },
        Example::Waitany => {
            // The same for `any` and `all`. Rank 1's receive is posted inside MPI_Recv, after
            // READY; rank 2 has nothing.
            if r == 0 {
                for (peer, tag) in [(1, 1), (2, 2)] {
                    let mut op = recv("MPI_COMM_WORLD", peer, World::Is(peer), tag, ints(mpi, 1));
                    op.status = ompi_blocked_status(mpi);
                    e.ops.push(op);
                }
            } else if r == 1 {
                e.ops.push(recv("MPI_COMM_WORLD", 0, World::Is(0), 9, ints(mpi, 1)));
            }
        }
        Example::Threads => {
            // The same for `compute` and `join`; both receives are posted inside MPI_Recv,
            // after READY (rank 0's by its second thread).
            let (peer, tag) = if r == 0 { (1, 7) } else { (0, 8) };
            let mut op = recv("MPI_COMM_WORLD", peer, World::Is(peer), tag, ints(mpi, 1));
            op.status = ompi_blocked_status(mpi);
            e.ops.push(op);
        }
        // healthy: the queues change at every step (mostly empty, at times one posted receive
        // or unexpected message of the current step): nothing fixed to expect.
        Example::Slow | Example::Healthy => {}
        // compute_stuck: a collective posts nothing the queues list.
        Example::ComputeStuck => {}
        // The receives from rank n-1 are posted inside MPI_Recv, after READY; rank n-1 has
        // nothing (exit_early's is gone under Open MPI, in MPI_Finalize under MPICH).
        Example::PipeStuck | Example::ExitEarly => {
            let tag = if example == Example::PipeStuck { 8 } else { 9 };
            if r < n - 1 {
                e.ops
                    .push(recv("MPI_COMM_WORLD", n - 1, World::Is(n - 1), tag, ints(mpi, 1)));
            }
        }
        #[allow(unreachable_patterns)]
        _ => {}
    }
    if mpi.is_ch4() {
        // MPICH 4.0.2's ch4 library reads a receive's source, tag and context id from fields
        // MPIDIG_req_t has not got (docs/mpi-support.md): its receives are never shown.
        // Its sends' buffer and count come from a part of the request only the active-message
        // path fills: not shown (checked by check_process).
        e.ops.retain(|o| o.queue == "sends");
        for o in &mut e.ops {
            o.length = None;
        }
        e.untrusted_receives = true;
    }
    e
}

fn as_i64(v: &Value) -> Option<i64> {
    v.as_i64()
}

/// Checks one process of a snapshot against `exp`. Open MPI's unexpected
/// queue must be reported as not available (never as empty), MPICH's as
/// available. Returns every difference found.
pub fn check_process(p: &Value, exp: &Expected, mpi: Mpi) -> Result<(), String> {
    let mut errs = Vec::new();
    if exp.untrusted_receives {
        let error = p["error"].as_str().unwrap_or_default();
        if p["queues_missing"]["reason"] != "library_untrusted" || !error.contains("cannot be trusted") {
            errs.push(format!(
                "the library's receives must be marked untrustworthy: queues_missing {}, error {}",
                p["queues_missing"], p["error"]
            ));
        }
    } else if !p["error"].is_null() {
        return Err(format!("process has an error: {}", p["error"]));
    }
    let comms = p["communicators"].as_array().cloned().unwrap_or_default();
    for c in &exp.comms {
        let Some(found) = comms.iter().find(|x| x["name"] == c.name) else {
            errs.push(format!("communicator '{}' is not listed", c.name));
            continue;
        };
        if as_i64(&found["size"]) != Some(c.size) {
            errs.push(format!("'{}' size {} != {}", c.name, found["size"], c.size));
        }
        if as_i64(&found["local_rank"]) != Some(c.local_rank) {
            errs.push(format!(
                "'{}' local rank {} != {}",
                c.name, found["local_rank"], c.local_rank
            ));
        }
        if exp.rejected_groups.contains(&c.name) {
            if !found["world_ranks"].is_null() || !found["world_ranks_rejected"].is_string() {
                errs.push(format!(
                    "'{}': the library's wrong group must be rejected, not shown: world_ranks {}, \
                     world_ranks_rejected {}",
                    c.name, found["world_ranks"], found["world_ranks_rejected"]
                ));
            }
            continue;
        }
        match found["world_ranks"].as_array() {
            None => {
                if mpi.is_open_mpi() || c.name == "MPI_COMM_WORLD" {
                    errs.push(format!("'{}' has no world ranks", c.name));
                }
            }
            Some(w) => {
                let w: Vec<Option<i64>> = w.iter().map(as_i64).collect();
                let want: Vec<Option<i64>> = c.world_ranks.iter().map(|&x| Some(x)).collect();
                if w != want {
                    errs.push(format!("'{}' world ranks {w:?} != {want:?}", c.name));
                }
            }
        }
    }
    // Every operation actually pending, in order, and queue availability.
    let mut actual: Vec<(String, &'static str, Value)> = Vec::new();
    for c in &comms {
        let name = c["name"].as_str().unwrap_or_default().to_string();
        for q in ["sends", "receives", "unexpected"] {
            let queue = &c["queues"][q];
            let available = queue["available"].as_bool() == Some(true);
            if exp.untrusted_receives && q != "sends" {
                let reason = queue["reason"].as_str().unwrap_or_default();
                if available
                    || !reason.contains("not trustworthy")
                    || queue["operations"].as_array().is_some_and(|o| !o.is_empty())
                {
                    errs.push(format!(
                        "'{name}' {q} queue must be 'not trustworthy' and empty: {queue}"
                    ));
                }
            } else if q == "unexpected" && mpi.is_open_mpi() {
                let reason = queue["reason"].as_str().unwrap_or_default();
                if available || !reason.contains("not available") {
                    errs.push(format!(
                        "'{name}' unexpected queue must be 'not available' on Open MPI: {queue}"
                    ));
                }
            } else if !available {
                errs.push(format!("'{name}' {q} queue is not available: {queue}"));
            }
            for op in queue["operations"].as_array().into_iter().flatten() {
                if exp.untrusted_receives && (!op["length"].is_null() || op["buffer"] != "unknown") {
                    errs.push(format!(
                        "'{name}' {q}: the library's buffer and length must not be shown: {op}"
                    ));
                }
                actual.push((name.clone(), q, op.clone()));
            }
        }
    }
    let mut expected_ops = exp.ops.clone();
    // Group expected ops in the order communicators and queues appear.
    let order = |comm: &str, q: &str| {
        let ci = comms.iter().position(|c| c["name"] == comm).unwrap_or(usize::MAX);
        let qi = ["sends", "receives", "unexpected"]
            .iter()
            .position(|x| *x == q)
            .unwrap_or(3);
        (ci, qi)
    };
    expected_ops.sort_by_key(|o| order(o.comm, o.queue));
    // Open MPI's library walks its request free list, so posted receives come
    // in free-list order, not posting order: compare those by tag.
    if mpi.is_open_mpi() {
        expected_ops.sort_by_key(|o| (order(o.comm, o.queue), o.tag));
        actual.sort_by_key(|(c, q, o)| (order(c, q), as_i64(&o["tag"])));
    }
    if actual.len() != expected_ops.len() {
        errs.push(format!(
            "{} pending operations, expected {}: {:?}",
            actual.len(),
            expected_ops.len(),
            actual
                .iter()
                .map(|(c, q, o)| format!("{c}/{q} peer {} tag {}", o["peer"], o["tag"]))
                .collect::<Vec<_>>()
        ));
    }
    for (i, (want, (comm, q, got))) in expected_ops.iter().zip(&actual).enumerate() {
        let mut bad = Vec::new();
        if want.comm != comm || want.queue != *q {
            bad.push(format!("is in '{comm}'/{q}, expected '{}'/{}", want.comm, want.queue));
        }
        if as_i64(&got["peer"]["local"]) != want.local {
            bad.push(format!("peer.local {} != {:?}", got["peer"]["local"], want.local));
        }
        let world = as_i64(&got["peer"]["world"]);
        let world_ok = match want.world {
            World::Is(w) => world == Some(w),
            World::IsOrUnknown(w) => world.is_none() || world == Some(w),
            World::Unknown => world.is_none(),
        };
        if !world_ok {
            bad.push(format!("peer.world {world:?} != {:?}", want.world));
        }
        if got["any_source"].as_bool() != Some(want.local.is_none()) {
            bad.push(format!("any_source {}", got["any_source"]));
        }
        if as_i64(&got["tag"]) != want.tag || got["any_tag"].as_bool() != Some(want.tag.is_none()) {
            bad.push(format!(
                "tag {} any_tag {} != {:?}",
                got["tag"], got["any_tag"], want.tag
            ));
        }
        if want.length.is_some() && as_i64(&got["length"]) != want.length {
            bad.push(format!("length {} != {:?}", got["length"], want.length));
        }
        if let Some(s) = want.status {
            if got["status"] != s {
                bad.push(format!("status {} != {s}", got["status"]));
            }
        }
        if !bad.is_empty() {
            errs.push(format!("operation {i} ({comm}/{q}): {}", bad.join(", ")));
        }
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs.join("\n"))
    }
}

/// The function names of thread `tid`'s frames in a snapshot's first
/// process (`--stacks`), innermost first; panics naming what is missing.
pub fn thread_functions(snapshot: &Value, tid: u32) -> Vec<String> {
    let threads = snapshot["processes"][0]["stacks"]["threads"]
        .as_array()
        .unwrap_or_else(|| panic!("no stacks in the snapshot: {snapshot:#}"));
    let thread = threads
        .iter()
        .find(|t| t["tid"] == tid)
        .unwrap_or_else(|| panic!("no thread {tid}: {snapshot:#}"));
    thread["frames"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["function"].as_str().map(str::to_string))
        .collect()
}

/// The verdict the `deadlock` example is designed to give on `n` ranks, whatever front end or
/// launcher read it: `deadlock`, the one cycle 0 -> 1 -> ... -> n-1 -> 0, no blocked or unknown
/// rank, each rank's AND edge to r+1 on `MPI_COMM_WORLD` with tag 400+r (also in the summary's
/// words), and every rank's receive unmatched.
///
/// # Panics
/// On any difference, naming `what`.
pub fn assert_deadlock_ring(v: &Value, n: i64, what: &str) {
    let a = &v["analysis"];
    assert_eq!(a["verdict"], "deadlock", "{what}: {a:#}");
    let ring: Vec<i64> = (0..n).collect();
    assert_eq!(a["cycles"], serde_json::json!([ring]), "{what}: {a:#}");
    assert_eq!(a["blocked"], serde_json::json!([]), "{what}: {a:#}");
    assert_eq!(a["unknown_ranks"], serde_json::json!([]), "{what}: {a:#}");
    let summary = a["summary"].as_str().unwrap_or_default();
    for r in 0..n {
        let step = format!(
            "rank {r} waits for rank {} on MPI_COMM_WORLD tag {}",
            (r + 1) % n,
            400 + r
        );
        assert!(summary.contains(&step), "{what}: no '{step}' in: {summary}");
    }
    let edges = a["edges"].as_array().cloned().unwrap_or_default();
    assert_eq!(edges.len() as i64, n, "{what}: {a:#}");
    for e in &edges {
        let from = e["from"].as_i64().unwrap_or(-1);
        assert_eq!(e["to"], (from + 1) % n, "{what}: {e}");
        assert_eq!(e["kind"], "and", "{what}: {e}");
        assert_eq!(e["communicator"], "MPI_COMM_WORLD", "{what}: {e}");
        assert_eq!(e["tag"], 400 + from, "{what}: {e}");
    }
    assert_eq!(a["unmatched"].as_array().map_or(0, Vec::len) as i64, n, "{what}: {a:#}");
}

/// Where rank `rank` is, in the words of an analysis's `where` list (`""` when it is not
/// listed).
pub fn where_text(analysis: &Value, rank: i64) -> String {
    analysis["where"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|w| w["rank"] == rank)
        .and_then(|w| w["text"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// The wait-for edges of an analysis (`mpiq job --json`'s or a report's `analysis`): (from, to,
/// tag), sorted.
pub fn edges(analysis: &Value) -> Vec<(i64, i64, Option<i64>)> {
    let mut e: Vec<(i64, i64, Option<i64>)> = analysis["edges"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| Some((e["from"].as_i64()?, e["to"].as_i64()?, e["tag"].as_i64())))
        .collect();
    e.sort_unstable();
    e
}

/// The note on examples/collective_skip.c (4 ranks) from mpiq's flight recorder.
pub const SKIPPED_COLLECTIVE_NOTE: &str = "collectives on MPI_COMM_WORLD (mpiq's flight recorder): ranks 0-2 are in #42 (MPI_Allreduce); rank 3 is in none (it has begun 41)";
