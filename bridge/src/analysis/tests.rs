//! Whole-job scenarios, end to end through [`analyze`].

use super::testutil::*;
use super::*;
use crate::render::verdict::{render_csv, render_dot, render_text};
use crate::snapshot::model::{Queue, Snapshot, Status};

/// Open MPI 4.1.4: no unexpected-message queue.
fn ompi(mut c: crate::snapshot::model::Communicator) -> crate::snapshot::model::Communicator {
    c.queues.unexpected = Queue::unavailable("not available from this MPI's debug library");
    c
}

/// examples/deadlock.c: rank r posts MPI_Irecv(source (r + 1) % n, tag 400 + r)
/// on MPI_COMM_WORLD and waits; nobody sends.
fn deadlock_c(n: i64) -> Snapshot {
    snapshot(
        (0..n)
            .map(|r| {
                process(
                    r as i32,
                    vec![ompi(world(n, r).recvs(vec![recv(Some((r + 1) % n), Some(400 + r))]))],
                )
            })
            .collect(),
    )
}

#[test]
fn three_rank_and_cycle_is_a_deadlock() {
    let a = analyze(&deadlock_c(3), None);
    assert_eq!(a.verdict, Verdict::Deadlock);
    assert_eq!(a.cycles, vec![vec![0, 1, 2]]);
    assert!(a.blocked.is_empty() && a.unknown_ranks.is_empty());
    assert_eq!(
        a.summary,
        "deadlock: rank 0 waits for rank 1 on MPI_COMM_WORLD tag 400; rank 1 waits for rank 2 on \
         MPI_COMM_WORLD tag 401; rank 2 waits for rank 0 on MPI_COMM_WORLD tag 402"
    );
    assert_eq!(a.edges.len(), 3);
    assert!(a
        .edges
        .iter()
        .all(|e| e.kind == EdgeKind::And && e.op == OpKind::Receive));
    assert_eq!((a.edges[0].from, a.edges[0].to, a.edges[0].tag), (0, 1, Some(400)));
    assert_eq!(a.unmatched.len(), 3);
    assert!(a.notes.iter().any(|n| n.contains("decided on one sample")));
}

#[test]
fn two_rank_deadlock_c_is_a_two_cycle() {
    assert_eq!(analyze(&deadlock_c(2), None).cycles, vec![vec![0, 1]]);
}

#[test]
fn ring_with_matching_pending_sends_is_no_deadlock() {
    // Rank r receives from left with tag 100 + r and has a pending
    // (rendezvous) send to right with tag 100 + right: every pair matches.
    let n = 4;
    let s = snapshot(
        (0..n)
            .map(|r| {
                let (left, right) = ((r + n - 1) % n, (r + 1) % n);
                process(
                    r as i32,
                    vec![ompi(
                        world(n, r)
                            .recvs(vec![recv(Some(left), Some(100 + r))])
                            .sends(vec![send(right, 100 + right, Status::Pending)]),
                    )],
                )
            })
            .collect(),
    );
    let a = analyze(&s, None);
    assert_eq!(a.verdict, Verdict::NoDeadlock);
    assert_eq!(
        a.summary,
        "no deadlock found: every pending receive has a matching send or the sender can still run"
    );
    assert!(a.edges.is_empty() && a.unmatched.is_empty() && a.cycles.is_empty());
}

/// examples/ring.c: receives from left with tag 100 + r, eager sends to
/// right with tag 200 + r that match nothing.
fn ring_c(n: i64, mpich: bool) -> Snapshot {
    snapshot(
        (0..n)
            .map(|r| {
                let (left, right) = ((r + n - 1) % n, (r + 1) % n);
                let c = world(n, r).recvs(vec![recv(Some(left), Some(100 + r))]);
                let c = if mpich {
                    c.sends(vec![send(right, 200 + r, Status::Complete)])
                        .unexp(vec![unexpected(left, 200 + left)])
                } else {
                    ompi(c)
                };
                process(r as i32, vec![c])
            })
            .collect(),
    )
}

#[test]
fn ring_c_cycles_run_against_the_ring_in_wait_order() {
    for mpich in [false, true] {
        let a = analyze(&ring_c(4, mpich), None);
        assert_eq!(a.verdict, Verdict::Deadlock, "mpich={mpich}");
        // 0 waits for 3, 3 for 2, 2 for 1, 1 for 0.
        assert_eq!(a.cycles, vec![vec![0, 3, 2, 1]]);
        // MPICH's complete sends wait for nothing.
        assert!(a.edges.iter().all(|e| e.op == OpKind::Receive));
    }
}

#[test]
fn any_source_knot_is_a_deadlock() {
    let s = snapshot(
        (0..3)
            .map(|r| process(r, vec![world(3, r as i64).recvs(vec![recv(None, Some(7))])]))
            .collect(),
    );
    let a = analyze(&s, None);
    assert_eq!(a.verdict, Verdict::Deadlock);
    assert_eq!(a.cycles, vec![vec![0, 1, 2]]);
    assert_eq!(a.edges.len(), 6);
    assert!(a.edges.iter().all(|e| e.kind == EdgeKind::Or));
    // The OR edges of one receive share its unmatched entry.
    assert_eq!(a.edges[0].wait, a.edges[1].wait);
    assert!(a
        .summary
        .contains("rank 0 waits for any of ranks 1 and 2 (ANY_SOURCE) on MPI_COMM_WORLD tag 7"));
}

#[test]
fn any_source_with_one_free_member_is_no_deadlock() {
    let s = snapshot(
        (0..4)
            .map(|r| {
                let c = world(4, r as i64);
                process(r, vec![if r < 3 { c.recvs(vec![recv(None, Some(7))]) } else { c }])
            })
            .collect(),
    );
    let a = analyze(&s, None);
    assert_eq!(a.verdict, Verdict::NoDeadlock);
    assert_eq!(a.edges.len(), 9);
}

#[test]
fn ranks_waiting_on_a_cycle_are_blocked_behind_it() {
    let w = |r: i64, from: i64| process(r as i32, vec![world(5, r).recvs(vec![recv(Some(from), Some(1))])]);
    let s = snapshot(vec![w(0, 1), w(1, 0), w(2, 0), w(3, 2), process(4, vec![world(5, 4)])]);
    let a = analyze(&s, None);
    assert_eq!(a.verdict, Verdict::Deadlock);
    assert_eq!(a.cycles, vec![vec![0, 1]]);
    assert_eq!(a.blocked, vec![2, 3]);
    assert!(
        a.summary.ends_with("ranks 2 and 3 are blocked behind it"),
        "{}",
        a.summary
    );
}

#[test]
fn an_unreadable_rank_does_not_hide_a_cycle_among_readable_ones() {
    let mut s = deadlock_c(3);
    for (r, p) in s.processes.iter_mut().enumerate() {
        p.communicators[0].size = Some(4);
        p.communicators[0].world_ranks = Some((0..4).map(Some).collect());
        assert_eq!(r as i32, p.world_rank.unwrap());
    }
    s.processes.push(failed(3, "ptrace: Operation not permitted"));
    let a = analyze(&s, None);
    assert_eq!(a.verdict, Verdict::Deadlock);
    assert_eq!(a.cycles, vec![vec![0, 1, 2]]);
    assert_eq!(a.unknown_ranks, vec![3]);
    assert!(a
        .summary
        .ends_with("the queues of rank 3 could not be read (ptrace: Operation not permitted)"));
}

#[test]
fn waiting_on_an_unreadable_rank_is_unknown() {
    let s = snapshot(vec![
        process(0, vec![world(2, 0).recvs(vec![recv(Some(1), Some(1))])]),
        failed(1, "cannot attach"),
    ]);
    let a = analyze(&s, None);
    assert_eq!(a.verdict, Verdict::Unknown);
    assert_eq!(a.unknown_ranks, vec![1]);
    assert_eq!(a.undecided, vec![0]);
    assert_eq!(
        a.summary,
        "unknown: the queues of rank 1 could not be read (cannot attach); rank 0 may be stuck: it waits for \
         rank 1, whose queues could not be read"
    );
    // The edge is drawn: to an unknown rank that may be free.
    assert_eq!(a.edges.len(), 1);
}

#[test]
fn a_missing_rank_makes_an_otherwise_quiet_job_unknown() {
    let s = snapshot(vec![process(0, vec![world(3, 0)]), process(1, vec![world(3, 1)])]);
    let a = analyze(&s, None);
    assert_eq!(a.verdict, Verdict::Unknown);
    assert_eq!(a.unknown_ranks, vec![2]);
    assert!(a
        .summary
        .contains("rank 2 could not be read (it is not in the snapshot)"));
}

#[test]
fn an_incomplete_receive_queue_makes_the_rank_unknown() {
    let mut s = deadlock_c(3);
    s.processes[1].communicators[0].queues.receives.incomplete = true;
    let a = analyze(&s, None);
    assert_eq!(a.verdict, Verdict::Unknown);
    assert_eq!(a.unknown_ranks, vec![1]);
    assert_eq!(a.undecided, vec![0, 2]);
}

/// MPICH 4.0.2: no groups except MPI_COMM_WORLD, internal `--unnamed--`
/// duplicates, small sends kept as complete. World rank r is local rank
/// (r + 1) % 3 of "solver"; each rank receives on "solver" from the next
/// world rank, whose local rank is (r + 2) % 3.
fn mpich_solver(solver_name: &str) -> Snapshot {
    snapshot(
        (0..3)
            .map(|r| {
                let mut icomm = world(3, r);
                icomm.name = "MPI_ICOMM_WORLD".into();
                process(
                    r as i32,
                    vec![
                        world(3, r)
                            .sends(vec![send((r + 1) % 3, 900 + r, Status::Complete)])
                            .unexp(vec![unexpected((r + 2) % 3, 900 + (r + 2) % 3)]),
                        icomm,
                        comm("--unnamed--", 3, r).id("0xa1"),
                        comm("--unnamed--", 3, r).id("0xa2"),
                        comm(solver_name, 3, (r + 1) % 3)
                            .id("0xb0")
                            .recvs(vec![recv(Some((r + 2) % 3), Some(5))]),
                    ],
                )
            })
            .collect(),
    )
}

#[test]
fn mpich_groups_are_inferred_and_the_cycle_found_in_world_ranks() {
    let a = analyze(&mpich_solver("solver"), None);
    assert_eq!(a.verdict, Verdict::Deadlock, "{}", a.summary);
    assert_eq!(a.cycles, vec![vec![0, 1, 2]]);
    assert!(a
        .summary
        .starts_with("deadlock: rank 0 waits for rank 1 on 'solver' tag 5;"));
    assert!(a.notes.iter().any(|n| n.contains("'solver' (size 3) were inferred")));
    assert_eq!(a.unmatched[0].peer, Some(1));
    assert_eq!(a.unmatched[0].peer_local, Some(2));
}

#[test]
fn infer_groups_fills_mpich_communicators_in_place() {
    let mut s = mpich_solver("solver");
    infer_groups(&mut s);
    let solver = &s.processes[0].communicators[4];
    assert_eq!(solver.world_ranks, Some(vec![Some(2), Some(0), Some(1)].into()));
    assert_eq!(solver.world_ranks_source.as_deref(), Some("inferred"));
    assert_eq!(solver.queues.receives.operations[0].peer.world, Some(1));
    let unnamed = &s.processes[0].communicators[2];
    assert!(unnamed.world_ranks.is_none() && unnamed.world_ranks_source.is_none());
}

#[test]
fn mpich_waits_on_an_ambiguous_unnamed_communicator_are_unknown() {
    let a = analyze(&mpich_solver("--unnamed--"), None);
    assert_eq!(a.verdict, Verdict::Unknown, "{}", a.summary);
    assert_eq!(a.undecided, vec![0, 1, 2]);
    assert!(a.unmatched.is_empty() && a.edges.is_empty());
    assert!(
        a.summary.contains(
            "rank 0 may be stuck: a receive from local rank 2 on '--unnamed--', which cannot be identified \
             across processes (a process lists more than one communicator with that name and size)"
        ),
        "{}",
        a.summary
    );
}

#[test]
fn mpich_complete_sends_satisfy_the_receives() {
    let mut s = mpich_solver("solver");
    for r in 0..3usize {
        // Rank r's "solver" receive comes from rank (r + 1) % 3: give that rank
        // a complete send to local rank (r + 1) % 3 with tag 5.
        let sender = (r + 1) % 3;
        s.processes[sender].communicators[4].queues.sends.operations.push(send(
            ((r + 1) % 3) as i64,
            5,
            Status::Complete,
        ));
    }
    let a = analyze(&s, None);
    assert_eq!(a.verdict, Verdict::NoDeadlock, "{}", a.summary);
    // MPICH shows its unexpected queue, where an undelivered message would
    // be: the match by a complete send alone is worth a note.
    let note = a.notes.iter().find(|n| n.contains("list as complete")).expect("note");
    assert!(note.contains("rank 0 from rank 1 on 'solver' tag 5"), "{note}");
}

#[test]
fn mpich_any_source_on_an_unknown_group_is_noted() {
    // Rank 0 waits ANY_SOURCE on one of two `--unnamed--` communicators.
    let build = |stuck: bool| {
        snapshot(
            (0..3)
                .map(|r| {
                    let mut c = vec![world(3, r), comm("--unnamed--", 3, r), comm("--unnamed--", 3, r)];
                    if r == 0 {
                        c[1].queues.receives.operations.push(recv(None, Some(3)));
                    }
                    if stuck && r > 0 {
                        // Ranks 1 and 2 wait for each other.
                        c[0].queues.receives.operations.push(recv(Some(3 - r), Some(1)));
                    }
                    process(r as i32, c)
                })
                .collect(),
        )
    };
    // Every other rank can run: whoever the sender is, it can still send.
    let a = analyze(&build(false), None);
    assert_eq!(a.verdict, Verdict::NoDeadlock, "{}", a.summary);
    assert!(a
        .notes
        .iter()
        .any(|n| n.contains("rank 0: an ANY_SOURCE receive on '--unnamed--'")));
    // The others are stuck: rank 0's fate depends on who its members are.
    let a = analyze(&build(true), None);
    assert_eq!(a.verdict, Verdict::Deadlock);
    assert_eq!(a.cycles, vec![vec![1, 2]]);
    assert!(a.blocked.is_empty());
}

#[test]
fn open_mpi_send_send_deadlock_on_a_split_communicator() {
    // World 4 split by parity: "even" holds world 0 and 2. Both post a large
    // (rendezvous) MPI_Send to each other first: pending, nothing receives.
    let even = |r: i64| {
        ompi(comm("even", 2, r / 2).group(vec![0, 2]))
            .id("3")
            .sends(vec![send(1 - r / 2, 11, Status::Pending)])
    };
    let mut null = comm("MPI_COMM_NULL", 0, 0);
    null.local_rank = None;
    let me = |r: i64| ompi(comm("MPI_COMM_SELF", 1, 0).group(vec![r])).id("1");
    let s = snapshot(vec![
        process(0, vec![ompi(world(4, 0)), me(0), null.clone(), even(0)]),
        process(1, vec![ompi(world(4, 1)), me(1), null.clone()]),
        process(2, vec![ompi(world(4, 2)), me(2), null.clone(), even(2)]),
        process(3, vec![ompi(world(4, 3)), me(3), null]),
    ]);
    let a = analyze(&s, None);
    assert_eq!(a.verdict, Verdict::Deadlock);
    assert_eq!(a.cycles, vec![vec![0, 2]]);
    assert!(a.edges.iter().all(|e| e.op == OpKind::Send));
    assert_eq!(
        a.summary,
        "deadlock: rank 0 waits for rank 2 to receive its send on 'even' tag 11; rank 2 waits for rank 0 \
         to receive its send on 'even' tag 11"
    );
    assert!(a
        .notes
        .iter()
        .any(|n| n.contains("unexpected-message queue of ranks 0-3")));
}

#[test]
fn a_self_receive_nobody_sends_is_a_cycle_of_one() {
    let s = snapshot(vec![process(0, vec![world(1, 0).recvs(vec![recv(Some(0), Some(1))])])]);
    let a = analyze(&s, None);
    assert_eq!(a.cycles, vec![vec![0]]);
    assert!(a.summary.contains("rank 0 waits for itself on MPI_COMM_WORLD tag 1"));
}

#[test]
fn two_separate_cycles() {
    let w = |r: i64, from: i64| process(r as i32, vec![world(4, r).recvs(vec![recv(Some(from), Some(1))])]);
    let a = analyze(&snapshot(vec![w(0, 1), w(1, 0), w(2, 3), w(3, 2)]), None);
    assert_eq!(a.cycles, vec![vec![0, 1], vec![2, 3]]);
    assert!(a.summary.contains("1 more cycle"));
}

#[test]
fn cycles_are_normalised_to_their_smallest_rank() {
    // 5 waits for 2, 2 for 7, 7 for 5.
    let s = snapshot(
        (0..8)
            .map(|r| {
                let from = match r {
                    5 => Some(2),
                    2 => Some(7),
                    7 => Some(5),
                    _ => None,
                };
                let c = world(8, r);
                process(
                    r as i32,
                    vec![match from {
                        Some(f) => c.recvs(vec![recv(Some(f), Some(0))]),
                        None => c,
                    }],
                )
            })
            .collect(),
    );
    let a = analyze(&s, None);
    assert_eq!(a.cycles, vec![vec![2, 7, 5]]);
    assert!(a.summary.starts_with("deadlock: rank 2 waits for rank 7"));
}

#[test]
fn a_matched_or_complete_receive_waits_for_nothing() {
    let mut s = deadlock_c(3);
    s.processes[1].communicators[0].queues.receives.operations[0].status = Status::Matched;
    assert_eq!(analyze(&s, None).verdict, Verdict::NoDeadlock);
}

#[test]
fn an_unknown_status_leaves_the_verdict_unknown() {
    let mut s = deadlock_c(3);
    s.processes[1].communicators[0].queues.receives.operations[0].status = Status::Unknown;
    let a = analyze(&s, None);
    assert_eq!(a.verdict, Verdict::Unknown);
    assert_eq!(a.undecided, vec![0, 1, 2]);
}

#[test]
fn queues_that_changed_between_samples_mean_progress() {
    let before = deadlock_c(3);
    let mut now = deadlock_c(3);
    // Rank 1 finished its receive and posted the next one.
    now.processes[1].communicators[0].queues.receives.operations[0].buffer = "0x7fff0000".into();
    let a = analyze_samples(&now, Some(&before), Some(250));
    assert_eq!(a.verdict, Verdict::NoDeadlock);
    assert_eq!(
        a.summary,
        "no deadlock: the queues changed between two samples 250 ms apart: the job is progressing"
    );
    assert_eq!(a.progressing, vec![1]);
    assert!(a.cycles.is_empty());
    // The latest sample alone is a cycle: only a further sample tells a
    // job still moving from one that moved into its deadlock.
    assert!(a.rests_on_change, "{a:#?}");
    assert!(a.notes.iter().any(|n| n
        .starts_with("the queues changed between two samples 250 ms apart: the job is progressing (rank 1 changed")));
    // Without the interval.
    let a = analyze(&now, Some(&before));
    assert_eq!(
        a.summary,
        "no deadlock: the queues changed between two samples: the job is progressing"
    );
}

#[test]
fn unchanged_queues_confirm_the_deadlock() {
    let a = analyze_samples(&deadlock_c(3), Some(&deadlock_c(3)), Some(250));
    assert_eq!(a.verdict, Verdict::Deadlock);
    assert_eq!(a.cycles, vec![vec![0, 1, 2]]);
    assert!(a.progressing.is_empty());
    assert!(!a.notes.iter().any(|n| n.contains("one sample")));
    assert!(!a.rests_on_change);
}

#[test]
fn a_cycle_the_previous_sample_cannot_confirm_is_unknown() {
    let mut before = deadlock_c(3);
    before.processes[2] = failed(2, "timed out");
    let a = analyze(&deadlock_c(3), Some(&before));
    assert_eq!(a.verdict, Verdict::Unknown);
    assert!(a
        .summary
        .contains("rank 2 may be stuck: its wait is not confirmed by the previous sample"));
}

#[test]
fn a_persisting_cycle_stays_while_other_ranks_progress() {
    let mut now = deadlock_c(3);
    let mut before = deadlock_c(3);
    for (s, buf) in [(&mut now, "0x1"), (&mut before, "0x2")] {
        for p in &mut s.processes {
            p.communicators[0].size = Some(4);
            p.communicators[0].world_ranks = Some((0..4).map(Some).collect());
        }
        // Rank 3 keeps waiting on rank 0 with a new receive each time.
        let mut r = recv(Some(0), Some(8));
        r.buffer = buf.into();
        s.processes.push(process(3, vec![world(4, 3).recvs(vec![r])]));
    }
    let a = analyze(&now, Some(&before));
    assert_eq!(a.verdict, Verdict::Deadlock);
    assert_eq!(a.cycles, vec![vec![0, 1, 2]]);
    assert_eq!(a.progressing, vec![3]);
    assert!(a.blocked.is_empty());
    assert!(!a.rests_on_change);
}

#[test]
fn no_process_is_unknown() {
    let a = analyze(&Snapshot::default(), None);
    assert_eq!(a.verdict, Verdict::Unknown);
    assert!(a.summary.contains("no process"));
}

#[test]
fn json_form() {
    let a = analyze(&deadlock_c(3), None);
    let v = serde_json::to_value(&a).unwrap();
    assert_eq!(v["verdict"], "deadlock");
    assert_eq!(v["cycles"], serde_json::json!([[0, 1, 2]]));
    assert_eq!(v["edges"][0]["kind"], "and");
    assert_eq!(v["edges"][0]["op"], "receive");
    assert_eq!(v["edges"][0]["communicator"], "MPI_COMM_WORLD");
    assert_eq!(v["edges"][0]["tag"], 400);
    assert_eq!(v["unmatched"][0]["kind"], "receive");
    assert_eq!(v["unmatched"][0]["peer"], 1);
    for key in ["summary", "blocked", "unknown_ranks", "notes"] {
        assert!(v.get(key).is_some(), "{key}");
    }
    let back: Analysis = serde_json::from_value(v).unwrap();
    assert_eq!(back, a);
    let any = analyze(
        &snapshot(vec![
            process(0, vec![world(2, 0).recvs(vec![recv(Some(1), None)])]),
            process(1, vec![world(2, 1)]),
        ]),
        None,
    );
    let v = serde_json::to_value(&any).unwrap();
    assert_eq!(v["verdict"], "no_deadlock");
    assert!(v["edges"][0]["tag"].is_null());
}

/// Splits a CSV line (RFC 4180 quoting).
fn csv_split(line: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                out.last_mut().unwrap().push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(String::new()),
            (c, _) => out.last_mut().unwrap().push(c),
        }
    }
    out
}

#[test]
fn csv_has_a_header_and_one_edge_per_line() {
    let mut s = deadlock_c(3);
    s.processes[0].communicators[0].name = "a, \"b\"".into();
    let a = analyze(&s, None);
    let csv = render_csv(&a);
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], "from,to,kind,op,communicator,tag,wait");
    assert_eq!(lines.len(), a.edges.len() + 1);
    for (line, e) in lines[1..].iter().zip(&a.edges) {
        let f = csv_split(line);
        assert_eq!(f.len(), 7, "{line}");
        assert_eq!(f[0].parse::<i64>().unwrap(), e.from);
        assert_eq!(f[1].parse::<i64>().unwrap(), e.to);
        assert_eq!(f[4], e.communicator);
    }
    assert_eq!(csv_split(lines[1])[4], "a, \"b\"");
}

#[test]
fn dot_is_a_well_formed_digraph() {
    let mut s = deadlock_c(4);
    s.processes[3] = failed(3, "gone \"away\"");
    let a = analyze(&s, None);
    let dot = render_dot(&a);
    assert!(dot.starts_with("digraph mpiq_waits {\n") && dot.ends_with("}\n"));
    let mut depth = 0i32;
    let mut in_str = false;
    let mut prev = ' ';
    for c in dot.chars() {
        match c {
            '"' if prev != '\\' => in_str = !in_str,
            '{' if !in_str => depth += 1,
            '}' if !in_str => depth -= 1,
            _ => {}
        }
        prev = c;
        assert!(depth >= 0);
    }
    assert_eq!((depth, in_str), (0, false));
    let arrows: Vec<&str> = dot.lines().filter(|l| l.contains(" -> ")).collect();
    assert_eq!(arrows.len(), a.edges.len());
    for e in &a.edges {
        assert!(dot.contains(&format!("  r{} [label=\"rank {}\"", e.from, e.from)));
        assert!(dot.contains(&format!("  r{} [label=\"rank {}\"", e.to, e.to)));
    }
    assert!(dot.contains("r3 [label=\"rank 3\", fillcolor=lightgrey"));
    assert!(dot.contains("r0 -> r1 [label=\"receive MPI_COMM_WORLD tag 400\", style=solid"));
}

#[test]
fn text_section_shows_the_verdict_and_details() {
    let text = render_text(&analyze(&deadlock_c(3), None));
    assert!(text.starts_with("Deadlock analysis: DEADLOCK\n  deadlock: rank 0 waits for rank 1"));
    assert!(text.contains("  cycle: 0 -> 1 -> 2 -> 0\n"));
    assert!(text.contains("    rank 0: receive from rank 1 on MPI_COMM_WORLD tag 400 (pending, buffer 0x"));
    let text = render_text(&analyze(&Snapshot::default(), None));
    assert!(text.starts_with("Deadlock analysis: unknown\n"));
}

#[test]
fn large_jobs_are_bounded() {
    // A 200-rank ANY_SOURCE knot: about 40,000 OR edges, more than MAX_EDGES.
    let n = 200;
    let s = snapshot(
        (0..n)
            .map(|r| process(r as i32, vec![world(n, r).recvs(vec![recv(None, Some(1))])]))
            .collect(),
    );
    let a = analyze(&s, None);
    assert_eq!(a.verdict, Verdict::Deadlock);
    assert_eq!(a.cycles, vec![(0..n).collect::<Vec<i64>>()]);
    assert_eq!(a.edges.len(), MAX_EDGES);
    assert!(a.notes.iter().any(|n| n.contains("edge list stops")));
    // A 300-rank ring: the summary spells out only the start of the cycle.
    let a = analyze(&ring_c(300, true), None);
    assert_eq!(a.cycles.len(), 1);
    assert_eq!(a.cycles[0].len(), 300);
    assert!(a.summary.ends_with("... (a cycle of 300 ranks)"), "{}", a.summary);
}

#[test]
fn a_corrupt_world_rank_does_not_blow_up_the_analysis() {
    // No MPI_COMM_WORLD with a size, and a world rank of 2^31 - 1: the job
    // must not be sized from it (it once took 24 GB).
    let mut s = snapshot(vec![process(0, vec![]), process(i32::MAX, vec![])]);
    for p in &mut s.processes {
        p.communicators.clear();
    }
    let a = analyze(&s, None);
    assert!(a.notes.iter().any(|n| n.contains("implausible")), "{:?}", a.notes);
}

/// Wrapped at `width` columns, how many screen lines the text takes.
fn screen_lines(text: &str, width: usize) -> usize {
    text.lines().map(|l| l.chars().count().div_ceil(width).max(1)).sum()
}

#[test]
fn a_thousand_rank_deadlock_says_so_in_its_first_lines() {
    let r = crate::render::Report::analyzed(crate::render::Samples {
        current: deadlock_c(1000),
        ..Default::default()
    });
    let text = r.render(&crate::DumpOptions::default());
    let first: Vec<&str> = text.lines().take(10).collect();
    assert_eq!(first[0], "Deadlock analysis: DEADLOCK", "{text}");
    assert!(first[1].starts_with("  deadlock: rank 0 waits for rank 1"), "{text}");
    assert_eq!(
        first[2],
        "  cycle: 0 -> 1 -> 2 -> 3 -> 4 -> 5 -> 6 -> 7 -> ... (1000 ranks in all) ... -> 997 -> 998 -> 999 -> 0"
    );
    // The detail of four of the cycle's ranks, and how to see the others.
    assert_eq!(text.matches("\nProcess pid").count(), 4, "{text}");
    assert!(
        text.contains("\nRanks 0-3 in detail (the verdict names ranks 0-999; --ranks LIST or --all shows others):\n"),
        "{text}"
    );
    assert!(text.contains("    ... 988 more (the JSON lists every one)\n"), "{text}");
    assert!(
        screen_lines(&text, 100) <= 100,
        "{} lines:\n{text}",
        screen_lines(&text, 100)
    );
    // --ranks shows the ranks asked for, --all every one; the JSON has every rank.
    let some = r.render(&crate::DumpOptions::parse_line("--ranks 500-501,999").unwrap());
    assert_eq!(some.matches("\nProcess pid").count(), 3, "{some}");
    assert!(
        some.contains("\nRanks 500, 501 and 999 in detail (--ranks):\n"),
        "{some}"
    );
    let all = r.render(&crate::DumpOptions::parse_line("--all").unwrap());
    assert_eq!(all.matches("\nProcess pid").count(), 1000);
    let json = r.render(&crate::DumpOptions::parse_line("--json").unwrap());
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["processes"].as_array().map(Vec::len), Some(1000));
}
