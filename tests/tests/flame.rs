//! Flame graphs of the merged stacks and the hand-off to a full debugger:
//!
//! - `mpiq job --format folded` on barrier_vs_recv gives one folded line
//!   per group of ranks, counted in ranks (gdb's and lldb's `--folded` the
//!   same, of the rank they read); `--flamegraph FILE.svg` writes
//!   the same stacks as an SVG (inferno), the report still on stdout; a
//!   file that cannot be written fails the command (exit 1) before any
//!   rank is stopped;
//! - the text report's "Debug one rank of each group" names the lowest
//!   rank of each group and the gdb and lldb command lines that open it
//!   with mpiq loaded: those very lines, run in batch mode, show that
//!   rank's queues;
//! - committed recordings (`tests/recordings/`) replay to their folded
//!   lines with no live job, the MPI runtime's threads left out.
//!
//! Uses the `mpiq` binary, `libmpiq.so` and `libmpiq_lldb.so` of the
//! test's own profile (`cargo build --release --workspace` for `cargo test
//! --release`).

use std::process::Command;
use std::time::{Duration, Instant};

use mpiq_tests::fixtures::WorkDir;
use mpiq_tests::frontends::{self, artifacts_dir, cli, lldb_binary, workspace_root};
use mpiq_tests::run::{run, Run};
use mpiq_tests::{gdb, Example, Job, Mpi};
use serde_json::Value;

/// Exit status of `mpiq` when it found a deadlock.
const EXIT_DEADLOCK: i32 = 3;

/// barrier_vs_recv's folded stacks: rank 0 in the barrier, 1-3 in the
/// receive.
const BARRIER_VS_RECV: &str = "main;MPI_Barrier 1\nmain;exchange;MPI_Recv 3\n";

/// `mpiq job --starter PID ARGS...`, again until every rank is in its last
/// call (barrier_vs_recv prints READY before it), i.e. until the folded
/// stacks are barrier_vs_recv's.
fn job_when_settled(starter: &str, args: &[&str]) -> Run {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut argv = vec!["job", "--starter", starter, "--format", "folded"];
        argv.extend_from_slice(args);
        let r = cli(&argv);
        if r.stdout == BARRIER_VS_RECV || Instant::now() > deadline {
            return r;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// The command line printed under a group's heading line (`  ranks 1-3 in
/// MPI_Recv: rank 1, pid 4243`) that starts with `program`.
fn command_under(text: &str, heading: &str, program: &str) -> Option<String> {
    let mut lines = text.lines().skip_while(|l| *l != heading);
    lines.next()?;
    lines
        .take_while(|l| l.starts_with("    "))
        .map(str::trim)
        .find(|l| l.starts_with(program) || l.contains(&format!(" {program} ")))
        .map(String::from)
}

/// Runs a printed command line with `sh -c`, within the default timeout.
fn shell(line: &str) -> Run {
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(line);
    run(cmd)
}

fn live(mpi: Mpi) {
    gdb::require_ptrace();
    let job = Job::builder(mpi, Example::BarrierVsRecv).nprocs(4).start();
    let starter = job.starter_pid().to_string();
    let pid = |rank: usize| job.pid_of(rank);

    // Folded: one line per group, counted in ranks; the verdict's exit status.
    let r = job_when_settled(&starter, &[]);
    assert_eq!(r.stdout, BARRIER_VS_RECV, "{mpi}:\n{}", r.all());
    assert_eq!(r.code(), Some(EXIT_DEADLOCK), "{}", r.all());
    eprintln!("{mpi}, --format folded:\n{}", r.stdout);
    // --stacks: every frame of the application threads, still 4 ranks.
    let r = cli(&[
        "job",
        "--starter",
        &starter,
        "--format",
        "folded",
        "--stacks",
        "--samples",
        "1",
    ]);
    let total: usize = r
        .stdout
        .lines()
        .map(|l| l.rsplit_once(' ').and_then(|(_, n)| n.parse::<usize>().ok()).expect(l))
        .sum();
    assert_eq!(total, 4, "{}", r.all());
    assert!(
        r.stdout
            .lines()
            .all(|l| l.contains(";main;") && !l.contains("progress")),
        "{}",
        r.all()
    );

    // gdb's and lldb's --folded: the same lines, of the ranks they read.
    let g = frontends::gdb(pid(1), &["info mpi-queues --folded"]);
    // (gdb prints where it attached on stdout too)
    let folded: Vec<&str> = g.stdout.lines().filter(|l| l.starts_with("main;")).collect();
    assert_eq!(folded, ["main;exchange;MPI_Recv 1"], "{g}");
    g.assert_no_python_errors();
    if artifacts_dir().join("libmpiq_lldb.so").is_file() {
        let l = frontends::lldb(pid(0), &["mpi queues --folded"]);
        assert_eq!(l.lldb_output_of("mpi queues --folded"), "main;MPI_Barrier 1", "{l}");
    }

    // --flamegraph: the SVG beside the usual report.
    let dir = WorkDir::new(&format!("flame-{}", mpi.name()));
    let svg = dir.path("where the ranks are.svg");
    let svg_arg = svg.display().to_string();
    let r = cli(&["job", "--starter", &starter, "--flamegraph", &svg_arg]);
    assert_eq!(r.code(), Some(EXIT_DEADLOCK), "{}", r.all());
    assert!(r.stdout.contains("Deadlock analysis: DEADLOCK"), "{}", r.all());
    let text = std::fs::read_to_string(&svg).unwrap_or_else(|e| panic!("{}: {e}\n{}", svg.display(), r.all()));
    assert!(
        text.starts_with("<?xml") && text.trim_end().ends_with("</svg>"),
        "{text}"
    );
    assert!(text.contains("barrier_vs_recv: where its 4 ranks are"), "{text}");
    assert!(text.contains("<title>MPI_Recv (3 ranks, 75.00%)</title>"), "{text}");
    assert!(text.contains("<title>MPI_Barrier (1 ranks, 25.00%)</title>"), "{text}");
    assert!(text.contains("deadlock analysis: deadlock"), "{text}");
    eprintln!("{mpi}: flame graph in {} ({} bytes)", svg.display(), text.len());
    // A file that cannot be written: exit 1 before the job is touched.
    let r = cli(&["job", "--starter", &starter, "--flamegraph", "/nonexistent/dir/f.svg"]);
    assert_eq!(r.code(), Some(1), "{}", r.all());
    assert!(
        r.stderr.contains("--flamegraph: cannot write /nonexistent/dir/f.svg"),
        "{}",
        r.all()
    );

    // The hand-off: one rank of each group, its gdb and lldb lines.
    let r = cli(&["job", "--starter", &starter, "--samples", "1"]);
    let out = &r.stdout;
    let section = out.find("\nDebug one rank of each group:\n").expect(out);
    assert!(out.find("\nWhere the ranks are").is_some_and(|w| w < section), "{out}");
    assert!(out.starts_with("Deadlock analysis"), "the verdict first:\n{out}");
    eprintln!("{mpi}:\n{}", &out[section..out.find(" in detail").unwrap_or(out.len())]);
    let recv = format!("  ranks 1-3 in MPI_Recv: rank 1, pid {}", pid(1));
    let barrier = format!("  rank 0 in MPI_Barrier: rank 0, pid {}", pid(0));
    let gdb_line = command_under(out, &recv, "gdb").unwrap_or_else(|| panic!("no gdb line:\n{out}"));
    assert!(gdb_line.contains(&format!("gdb -p {} -ex ", pid(1))), "{gdb_line}");
    assert!(command_under(out, &barrier, "gdb").is_some(), "{out}");
    // Run as printed, in batch mode: rank 1's queues.
    let batch = gdb_line.replacen("gdb -p ", "gdb -batch -nx -p ", 1);
    let g = shell(&batch);
    assert!(
        g.stdout.contains(&format!("Process pid {}, rank 1", pid(1))),
        "{batch}\n{g}"
    );
    assert!(g.stdout.contains("Posted receives (1):"), "{batch}\n{g}");
    assert!(g.stdout.contains("from rank 0  tag 3"), "{batch}\n{g}");
    assert!(
        g.stdout.contains("where: in MPI_Recv, called from exchange"),
        "{batch}\n{g}"
    );
    // lldb, when the plugin is built next to mpiq.
    let lldb = lldb_binary();
    if artifacts_dir().join("libmpiq_lldb.so").is_file() {
        let line = command_under(out, &recv, &lldb).unwrap_or_else(|| panic!("no lldb line:\n{out}"));
        let batch = line.replacen(&format!("{lldb} -p "), &format!("{lldb} -b --no-lldbinit -p "), 1);
        assert_ne!(batch, line);
        let l = shell(&batch);
        assert!(l.stdout.contains("Posted receives (1):"), "{batch}\n{l}");
        assert!(
            l.stdout.contains(&format!("Process pid {}, rank 1", pid(1))),
            "{batch}\n{l}"
        );
    } else {
        assert!(
            out.contains("  lldb: libmpiq_lldb.so is not next to this mpiq"),
            "{out}"
        );
    }
    // JSON: the same lines as debug_commands.
    let r = cli(&["job", "--starter", &starter, "--samples", "1", "--json"]);
    let v: Value = r.json_exact();
    let groups = &v["debug_commands"]["groups"];
    assert_eq!(
        groups[0]["ranks"],
        serde_json::json!([[1, 3]]),
        "{:#}",
        v["debug_commands"]
    );
    assert_eq!(groups[0]["pid"], pid(1));
    assert_eq!(groups[0]["gdb"], Value::from(gdb_line));
    assert_eq!(groups[1]["rank"], 0);
    for rank in job.ranks() {
        assert!(Job::is_running(rank.pid), "rank {} gone", rank.rank);
    }
    if mpi == Mpi::OpenMpi {
        cores(&job, &dir);
    }
}

/// Core files of every rank: the hand-off opens the lowest rank's core
/// (`gdb EXE CORE`), and that line, run in batch mode, shows its queues.
fn cores(job: &Job, dir: &WorkDir) {
    let cores = job.gcore_all(dir.root());
    let mut args = vec!["core".to_string()];
    args.extend(cores.iter().map(|c| c.display().to_string()));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = cli(&argv);
    let out = &r.stdout;
    let core1 = &cores[1];
    let heading = format!("  ranks 1-3 in MPI_Recv: rank 1, core {}", core1.display());
    let line =
        command_under(out, &heading, "gdb").unwrap_or_else(|| panic!("no gdb line for {heading:?}:\n{}", r.all()));
    let expected = format!(
        "{} -ex 'source {}' -ex 'info mpi-queues'",
        core1.display(),
        workspace_root()
            .join("gdb-python/mpiq.py")
            .canonicalize()
            .unwrap()
            .display()
    );
    assert!(line.ends_with(&expected), "{line}\ndoes not end with\n{expected}");
    let batch = line.replacen("gdb ", "gdb -batch -nx ", 1);
    let g = shell(&batch);
    assert!(g.stdout.contains("Posted receives (1):"), "{batch}\n{g}");
    assert!(g.stdout.contains("from rank 0  tag 3"), "{batch}\n{g}");
}

#[test]
fn folded_flamegraph_and_debugger_commands_openmpi() {
    live(Mpi::OpenMpi);
}

#[test]
fn folded_flamegraph_and_debugger_commands_mpich() {
    live(Mpi::Mpich);
}

/// The committed recordings of `ring` (every rank waits in pause() under
/// mpiq_wait_forever) replay to one folded line of 4 ranks: MPICH ch4's
/// libfabric threads and Open MPI 5's PMIx progress thread are left out.
/// `--flamegraph` draws it; no hand-off, since no process is live.
#[test]
fn committed_recordings_replay_to_their_folded_stacks() {
    let dir = WorkDir::new("flame-replay");
    for mpi in [Mpi::Mpich, Mpi::MpichCh4, Mpi::OpenMpi5] {
        let rec = workspace_root().join(format!("tests/recordings/{}-ring.rec", mpi.name()));
        let rec = rec.display().to_string();
        let dll = format!("--dll={}", mpi.debug_library().expect("a debug library").display());
        let r = cli(&["replay", &rec, &dll, "--format", "folded"]);
        assert_eq!(
            r.stdout,
            "main;mpiq_wait_forever;__libc_pause 4\n",
            "{mpi}:\n{}",
            r.all()
        );
        let svg = dir.path(&format!("{}.svg", mpi.name()));
        let svg_arg = svg.display().to_string();
        let r = cli(&["replay", &rec, &dll, "--flamegraph", &svg_arg]);
        assert!(r.stdout.contains("Where the ranks are (4 ranks"), "{mpi}:\n{}", r.all());
        assert!(!r.stdout.contains("Debug one rank"), "{mpi}:\n{}", r.all());
        let text = std::fs::read_to_string(&svg).expect("the SVG");
        assert!(text.contains("ring: where its 4 ranks are"), "{text}");
        assert!(
            text.contains("<title>mpiq_wait_forever (4 ranks, 100.00%)</title>"),
            "{text}"
        );
    }
}
