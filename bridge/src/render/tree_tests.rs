//! Tests of the merged stacks' text, JSON and graphviz.

use super::*;
use crate::snapshot::model::{Snapshot, ThreadStack};
use crate::stacks::tree::tests::{barrier_vs_recv, frame, process, APP};

#[test]
fn compact_text_has_one_line_per_leaf_biggest_group_first() {
    let tree = StackTree::build(&barrier_vs_recv(), Mode::Compact);
    assert_eq!(
        compact_text(&tree),
        "Where the ranks are (4 ranks, 4 application threads; 8 service threads not shown):\n\
         \x20 ranks 1-3: main > exchange > MPI_Recv (barrier_vs_recv.c:35)\n\
         \x20 rank 0:    main > MPI_Barrier (barrier_vs_recv.c:54)\n"
    );
    assert_eq!(text(&tree), compact_text(&tree));
}

#[test]
fn long_paths_lose_their_middle() {
    let names: Vec<String> = (0..12).map(|i| format!("f{i}")).collect();
    assert_eq!(path_words(&names), "f0 > f1 > f2 > ... > f8 > f9 > f10 > f11");
    assert_eq!(path_words(&names[..8]), names[..8].join(" > "));
    // From a real tree: a deep recursion into MPI_Barrier.
    let mut frames = vec![frame("PMPI_Barrier", "/opt/ompi/lib/libmpi.so.40", None)];
    frames.extend((0..20u32).map(|i| frame(&format!("level{i}"), APP, Some(i + 1))));
    frames.push(frame("main", APP, Some(99)));
    let mut s = Snapshot::default();
    s.processes.push(process(
        2,
        vec![ThreadStack {
            tid: 7,
            frames,
            ..ThreadStack::default()
        }],
    ));
    let text = compact_text(&StackTree::build(&s, Mode::Compact));
    assert!(
        text.contains(
            "  rank 2: main > level19 > level18 > ... > level2 > level1 > level0 > MPI_Barrier (barrier_vs_recv.c:1)\n"
        ),
        "{text}"
    );
}

#[test]
fn ranks_without_stacks_and_threads_of_one_rank() {
    let mut s = barrier_vs_recv();
    let mut second = crate::stacks::tree::tests::in_recv(1001);
    second.frames.remove(2); // exchange: straight from main
    if let Some(st) = s.processes[1].stacks.as_mut() {
        st.threads.push(second);
    }
    s.processes
        .push(process(6, vec![crate::stacks::tree::tests::service(61)]));
    s.processes.push(process(7, vec![]));
    for r in [4, 5] {
        let mut p = process(r, vec![]);
        p.stacks = None;
        p.error = Some("gone".into());
        s.processes.push(p);
    }
    let text = compact_text(&StackTree::build(&s, Mode::Compact));
    assert!(
        text.starts_with("Where the ranks are (4 ranks, 5 application threads;"),
        "{text}"
    );
    assert!(text.contains("\n  ranks 4 and 5: no call stacks: gone\n"), "{text}");
    assert!(
        text.contains("\n  ranks 6 and 7: no application thread (only the MPI runtime's)\n"),
        "{text}"
    );
    let v = tree_json(&StackTree::build(&s, Mode::Compact));
    assert_eq!(v["no_thread_shown"], json!([[6, 7]]));
    assert_eq!(v["without_stacks"][0], json!({"rank": 4, "why": "gone"}));
    assert!(
        text.contains("\n  rank 1:        main > MPI_Recv (barrier_vs_recv.c:48)\n"),
        "{text}"
    );
    let full = full_text(&StackTree::build(&s, Mode::Full));
    assert!(full.contains("\n  ranks 0-3 (5 threads): _start\n"), "{full}");
    assert!(full.contains("\n  rank 7: no thread\n"), "{full}");
    assert!(full.contains("\n  ranks 4 and 5: no call stacks: gone\n"), "{full}");
    // No rank with stacks: why, once per group.
    for p in &mut s.processes {
        p.stacks = None;
        p.error = Some("gone".into());
    }
    let none = StackTree::build(&s, Mode::Compact);
    assert_eq!(
        compact_text(&none),
        "Where the ranks are (no call stacks):\n  ranks 0-7: gone\n"
    );
    assert_eq!(
        full_text(&StackTree::build(&s, Mode::Full)),
        "Call stacks of every thread (none):\n  ranks 0-7: gone\n"
    );
}

#[test]
fn full_text_draws_the_trie() {
    let tree = StackTree::build(&barrier_vs_recv(), Mode::Full);
    let drawn = full_text(&tree);
    let expected = "Call stacks of every thread (4 ranks, 12 threads):\n\
        \x20 ranks 0-3: _start\n\
        \x20 └─ ranks 0-3: __libc_start_main_impl\n\
        \x20    └─ ranks 0-3: __libc_start_call_main\n\
        \x20       ├─ rank 0: main (barrier_vs_recv.c:54)\n\
        \x20       │  └─ rank 0: PMPI_Barrier\n\
        \x20       │     └─ rank 0: ompi_coll_base_barrier_intra\n\
        \x20       │        └─ rank 0: __poll\n\
        \x20       └─ ranks 1-3: main (barrier_vs_recv.c:48)\n\
        \x20          └─ ranks 1-3: exchange (barrier_vs_recv.c:35)\n\
        \x20             └─ ranks 1-3: PMPI_Recv\n\
        \x20                └─ ranks 1-3: __poll\n\
        \x20 ranks 0-3 (8 threads): [MPI runtime threads]\n\
        \x20 └─ ranks 0-3 (8 threads): clone3\n";
    assert!(drawn.starts_with(expected), "{drawn}");
    assert_eq!(text(&tree), drawn);
}

#[test]
fn json_has_rank_ranges() {
    let tree = StackTree::build(&barrier_vs_recv(), Mode::Compact);
    let v = tree_json(&tree);
    assert_eq!(v["label"], "main");
    assert_eq!(v["ranks"], json!([[0, 3]]));
    assert_eq!(v["threads"], 4);
    assert_eq!(v["mode"], "compact");
    assert_eq!(v["hidden_service_threads"], 8);
    assert_eq!(v["children"][0]["label"], "MPI_Barrier");
    assert_eq!(v["children"][0]["location"], "barrier_vs_recv.c:54");
    assert_eq!(v["children"][1]["children"][0]["ranks"], json!([[1, 3]]));
    assert_eq!(v["children"][1]["children"][0]["children"], json!([]));
    let full = tree_json(&StackTree::build(&barrier_vs_recv(), Mode::Full));
    assert_eq!(full["label"], "/");
    assert_eq!(full["threads"], 12);
    assert_eq!(full["children"][1]["label"], "[MPI runtime threads]");
    let empty = tree_json(&StackTree::build(&Snapshot::default(), Mode::Compact));
    assert_eq!(empty["threads"], 0);
}

#[test]
fn dot_adds_a_cluster_to_the_graph() {
    let tree = StackTree::build(&barrier_vs_recv(), Mode::Compact);
    let graph = "digraph mpiq_waits {\n  r0 -> r1;\n}\n";
    let dot = with_stacks_dot(graph, &tree);
    assert!(
        dot.starts_with("digraph mpiq_waits {\n  r0 -> r1;\n  subgraph cluster_stacks {\n"),
        "{dot}"
    );
    assert!(dot.ends_with("  }\n}\n"), "{dot}");
    assert!(
        dot.contains("s3 [label=\"MPI_Recv\\nranks 1-3 (3)\", penwidth=2.10, tooltip=\"barrier_vs_recv.c:35\"];"),
        "{dot}"
    );
    assert!(dot.contains("s0 [label=\"main\\nranks 0-3 (4)\""), "{dot}");
    assert!(
        dot.contains("    s0 -> s1;\n") && dot.contains("    s2 -> s3;\n"),
        "{dot}"
    );
    let empty = StackTree::build(&Snapshot::default(), Mode::Compact);
    assert_eq!(with_stacks_dot(graph, &empty), graph);
    assert_eq!(dot_quote("a \"b\"\nc\\"), "\"a \\\"b\\\"\\nc\\\\\"");
}

#[test]
fn the_json_of_a_deep_tree_parses_back() {
    let mut s = barrier_vs_recv();
    let deep = (0..5000u32).map(|i| frame("recurse", APP, Some(i % 5 + 1)));
    if let Some(st) = s.processes[0].stacks.as_mut() {
        st.threads[0].frames.splice(3..3, deep);
    }
    let tree = StackTree::build(&s, Mode::Full);
    assert_eq!(tree.as_one_node().label, "/");
    let mut report = serde_json::Map::new();
    report.insert("stack_tree".into(), tree_json(&tree));
    let text = serde_json::to_string_pretty(&report).unwrap();
    let back: Value = serde_json::from_str(&text).expect("within serde_json's nesting limit");
    assert_eq!(back["stack_tree"]["threads"], 12);
    assert!(full_text(&tree).contains("─ rank 0: ...\n"), "{}", full_text(&tree));
}

#[test]
fn a_group_scattered_over_a_huge_job_reads_short_and_never_breaks_the_columns() {
    // The merged stacks of 100,000 ranks whose groups interleave in blocks:
    // the rank list is cut, and a long one does not widen the column (a
    // width past 65,535 made the formatter panic).
    let long = "ranks 0-7, 20-27, ".repeat(5_000);
    let text = aligned(
        "T:\n".into(),
        &[
            (long.clone(), "main > MPI_Wait".into()),
            ("rank 9".into(), "main".into()),
        ],
    );
    assert!(
        text.contains(&format!("  {long}: main > MPI_Wait\n")),
        "{}",
        &text[..200]
    );
    assert!(
        text.ends_with(&format!("  {:<49} main\n", "rank 9:")),
        "{}",
        &text[text.len() - 100..]
    );
    let blocks: Vec<i64> = (0..100_000).filter(|r| r % 20 < 8).collect();
    assert!(crate::stacks::ranks_text(&blocks).len() < 200);
}
