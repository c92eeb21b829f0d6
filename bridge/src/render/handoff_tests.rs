//! Tests of the hand-off commands (`handoff.rs`).

use super::*;
use crate::options::DumpOptions;
use crate::render::report::{Report, Samples};
use crate::stacks::tree::tests::barrier_vs_recv;

fn debuggers(root: &str) -> Debuggers {
    Debuggers {
        gdb_script: Ok(PathBuf::from(format!("{root}/gdb-python/mpiq.py"))),
        gdb_library: None,
        lldb: "lldb-16".into(),
        lldb_plugin: Ok(PathBuf::from(format!("{root}/target/release/libmpiq_lldb.so"))),
    }
}

fn live(pid: u32) -> Opener {
    Opener::Live { pid, node: None }
}

#[test]
fn shell_quoting() {
    assert_eq!(shell_quote("gdb"), "gdb");
    assert_eq!(shell_quote("/a/b-c_d.so"), "/a/b-c_d.so");
    assert_eq!(shell_quote("info mpi-queues"), "'info mpi-queues'");
    assert_eq!(shell_quote("it's"), r"'it'\''s'");
    assert_eq!(shell_quote(""), "''");
    assert_eq!(shell_quote("$HOME"), "'$HOME'");
}

#[test]
fn gdb_and_lldb_lines_of_a_live_rank() {
    let d = debuggers("/opt/mpiq");
    assert_eq!(
        gdb_command(&d, &live(4243), None).unwrap(),
        "gdb -p 4243 -ex 'source /opt/mpiq/gdb-python/mpiq.py' -ex 'info mpi-queues'"
    );
    assert_eq!(
        lldb_command(&d, &live(4243), None).unwrap(),
        "lldb-16 -p 4243 -o 'plugin load /opt/mpiq/target/release/libmpiq_lldb.so' -o 'mpi queues'"
    );
    // The library the script would not find by itself.
    let with_lib = Debuggers {
        gdb_library: Some(PathBuf::from("/b/release/libmpiq.so")),
        ..d.clone()
    };
    assert_eq!(
        gdb_command(&with_lib, &live(7), None).unwrap(),
        "MPIQ_LIB=/b/release/libmpiq.so gdb -p 7 -ex 'source /opt/mpiq/gdb-python/mpiq.py' -ex 'info mpi-queues'"
    );
    // Not found: no line.
    let missing = Debuggers {
        gdb_script: Err("not found".into()),
        lldb_plugin: Err("not built".into()),
        ..d
    };
    assert_eq!(gdb_command(&missing, &live(7), None), None);
    assert_eq!(lldb_command(&missing, &live(7), None), None);
}

#[test]
fn paths_with_spaces_and_quotes_are_quoted() {
    let d = Debuggers {
        gdb_library: Some(PathBuf::from("/my dir/libmpiq.so")),
        ..debuggers("/my dir/it's")
    };
    let gdb = gdb_command(&d, &live(5), None).unwrap();
    assert_eq!(
        gdb,
        r"MPIQ_LIB='/my dir/libmpiq.so' gdb -p 5 -ex 'source /my dir/it'\''s/gdb-python/mpiq.py' -ex 'info mpi-queues'"
    );
    // lldb splits a command's arguments at spaces: the path in double
    // quotes inside the shell's single quotes.
    let lldb = lldb_command(&d, &live(5), None).unwrap();
    assert_eq!(
        lldb,
        r#"lldb-16 -p 5 -o 'plugin load "/my dir/it'\''s/target/release/libmpiq_lldb.so"' -o 'mpi queues'"#
    );
    // What a shell makes of them: the words as meant.
    let words = crate::options::split_words(&gdb).unwrap();
    assert_eq!(
        words,
        [
            "MPIQ_LIB=/my dir/libmpiq.so",
            "gdb",
            "-p",
            "5",
            "-ex",
            "source /my dir/it's/gdb-python/mpiq.py",
            "-ex",
            "info mpi-queues"
        ]
    );
    let core = Opener::Core {
        exe: PathBuf::from("/w/my prog"),
        core: PathBuf::from("/w/core.5"),
    };
    assert_eq!(
        gdb_command(&debuggers("/m"), &core, None).unwrap(),
        "gdb '/w/my prog' /w/core.5 -ex 'source /m/gdb-python/mpiq.py' -ex 'info mpi-queues'"
    );
    assert_eq!(
        lldb_command(&debuggers("/m"), &core, None).unwrap(),
        "lldb-16 '/w/my prog' -c /w/core.5 -o 'plugin load /m/target/release/libmpiq_lldb.so' -o 'mpi queues'"
    );
}

#[test]
fn a_rank_on_another_node_runs_there() {
    let d = Debuggers {
        gdb_library: Some(PathBuf::from("/b/libmpiq.so")),
        ..debuggers("/opt/mpiq")
    };
    let remote = Opener::Live {
        pid: 31,
        node: Some("n3".into()),
    };
    let ssh = gdb_command(&d, &remote, None).unwrap();
    assert_eq!(
        ssh,
        r"ssh -t n3 'MPIQ_LIB=/b/libmpiq.so gdb -p 31 -ex '\''source /opt/mpiq/gdb-python/mpiq.py'\'' -ex '\''info mpi-queues'\'''"
    );
    // The local shell gives ssh one word: the remote shell's command line.
    let words = crate::options::split_words(&ssh).unwrap();
    assert_eq!(words.len(), 4, "{words:?}");
    assert_eq!(words[3], gdb_command(&d, &live(31), None).unwrap());
    let srun = gdb_command(&d, &remote, Some("77")).unwrap();
    assert_eq!(
        srun,
        "srun --jobid=77 --overlap -w n3 --pty env MPIQ_LIB=/b/libmpiq.so gdb -p 31 -ex 'source /opt/mpiq/gdb-python/mpiq.py' -ex 'info mpi-queues'"
    );
    assert_eq!(
        lldb_command(&d, &remote, Some("77")).unwrap(),
        "srun --jobid=77 --overlap -w n3 --pty lldb-16 -p 31 -o 'plugin load /opt/mpiq/target/release/libmpiq_lldb.so' -o 'mpi queues'"
    );
}

#[test]
fn one_group_per_leaf_represented_by_its_lowest_rank() {
    let snap = barrier_vs_recv();
    let h = Handoff::live(debuggers("/m"), &snap, None);
    let g = groups(&snap, &h);
    assert_eq!(g.len(), 2, "{g:#?}");
    assert_eq!((g[0].at.as_str(), g[0].rank), ("MPI_Recv", 1));
    assert_eq!(g[0].opener, live(101));
    assert_eq!((g[1].at.as_str(), g[1].rank), ("MPI_Barrier", 0));
    assert_eq!(g[1].opener, live(100));
    let text = text(&g, &h.debuggers);
    assert_eq!(
        text,
        "Debug one rank of each group:\n  \
         ranks 1-3 in MPI_Recv: rank 1, pid 101\n    \
         gdb -p 101 -ex 'source /m/gdb-python/mpiq.py' -ex 'info mpi-queues'\n    \
         lldb-16 -p 101 -o 'plugin load /m/target/release/libmpiq_lldb.so' -o 'mpi queues'\n  \
         rank 0 in MPI_Barrier: rank 0, pid 100\n    \
         gdb -p 100 -ex 'source /m/gdb-python/mpiq.py' -ex 'info mpi-queues'\n    \
         lldb-16 -p 100 -o 'plugin load /m/target/release/libmpiq_lldb.so' -o 'mpi queues'\n"
    );
    let v = json(&g, &h.debuggers);
    assert_eq!(v["groups"][0]["ranks"], serde_json::json!([[1, 3]]));
    assert_eq!(v["groups"][0]["pid"], 101);
    assert_eq!(v["groups"][0]["node"], Value::Null);
    assert_eq!(v["notes"], serde_json::json!([]));
    // A process that cannot be opened again: the group's next rank stands
    // in; a group with none is left out.
    let mut h2 = h.clone();
    h2.openers[1] = None;
    let g2 = groups(&snap, &h2);
    assert_eq!((g2[0].rank, &g2[0].opener), (2, &live(102)));
    h2.openers[0] = None;
    let g2 = groups(&snap, &h2);
    assert_eq!(g2.len(), 1);
    assert_eq!(g2[0].at, "MPI_Recv");
    // Missing files: notes say how to get them.
    let mut h3 = h;
    h3.debuggers.lldb_plugin = Err("libmpiq_lldb.so is not built: cargo build --release -p mpiq-lldb".into());
    let g3 = groups(&snap, &h3);
    let t = super::text(&g3, &h3.debuggers);
    assert!(!t.contains("lldb-16 -p"), "{t}");
    assert!(
        t.ends_with("  lldb: libmpiq_lldb.so is not built: cargo build --release -p mpiq-lldb\n"),
        "{t}"
    );
}

#[test]
fn the_report_shows_the_commands_after_the_merged_stacks() {
    let snap = barrier_vs_recv();
    let h = Handoff::live(debuggers("/m"), &snap, None);
    let r = Report::analyzed(Samples {
        current: snap.clone(),
        ..Samples::default()
    });
    let text = r.render_with(&DumpOptions::parse_line("--ranks 1").unwrap(), Some(&h));
    let stacks = text.find("Where the ranks are").expect(&text);
    let debug = text.find("\nDebug one rank of each group:\n").expect(&text);
    let verdict = text.find("Deadlock analysis").expect(&text);
    let detail = text.find("\nProcess pid").expect(&text);
    assert!(verdict < stacks && stacks < debug && debug < detail, "{text}");
    assert_eq!(
        r.render(&DumpOptions::default()),
        r.render_with(&DumpOptions::default(), None)
    );
    assert!(!r.render(&DumpOptions::default()).contains("Debug one rank"));
    // With --stacks, the groups are still the compact ones.
    let full = r.render_with(&DumpOptions::parse_line("--stacks").unwrap(), Some(&h));
    assert!(full.contains("  ranks 1-3 in MPI_Recv: rank 1, pid 101\n"), "{full}");
    // JSON: additive, after stack_tree.
    let json = r.render_with(&DumpOptions::parse_line("--json").unwrap(), Some(&h));
    let v: Value = serde_json::from_str(&json).unwrap();
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["schema", "processes", "analysis", "stack_tree", "debug_commands"]
    );
    assert_eq!(v["debug_commands"]["groups"][1]["rank"], 0);
    // Folded: the stacks alone.
    let folded = r.render_with(&DumpOptions::parse_line("--folded").unwrap(), Some(&h));
    assert_eq!(folded, "main;MPI_Barrier 1\nmain;exchange;MPI_Recv 3\n");
    // Without stacks: no groups, no section.
    let mut bare = snap;
    for p in &mut bare.processes {
        p.stacks = None;
    }
    let r = Report::analyzed(Samples {
        current: bare,
        ..Samples::default()
    });
    assert!(!r
        .render_with(&DumpOptions::default(), Some(&h))
        .contains("Debug one rank"));
}

#[test]
fn long_lists_are_cut_in_the_text() {
    let mut snap = Snapshot::default();
    let mut funcs = Vec::new();
    for r in 0..12 {
        funcs.push(format!("f{r:02}"));
    }
    for (r, f) in funcs.iter().enumerate() {
        let t = crate::snapshot::model::ThreadStack {
            tid: 1 + r as u64,
            frames: vec![
                crate::stacks::tree::tests::frame(f, crate::stacks::tree::tests::APP, Some(1)),
                crate::stacks::tree::tests::frame("main", crate::stacks::tree::tests::APP, Some(2)),
            ],
            ..Default::default()
        };
        snap.processes
            .push(crate::stacks::tree::tests::process(r as i32, vec![t]));
    }
    let h = Handoff::live(debuggers("/m"), &snap, Some("5".into()));
    let g = groups(&snap, &h);
    assert_eq!(g.len(), 12);
    let t = text(&g, &h.debuggers);
    assert_eq!(t.lines().filter(|l| l.starts_with("    gdb ")).count(), MAX_TEXT_GROUPS);
    assert!(
        t.contains("  ... 4 more groups (every one in the JSON's debug_commands)\n"),
        "{t}"
    );
    assert_eq!(json(&g, &h.debuggers)["groups"].as_array().map(Vec::len), Some(12));
}
