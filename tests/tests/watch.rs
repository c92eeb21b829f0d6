//! `mpiq watch` on real jobs, driven in a private tmux server (`tmux -L NAME -f /dev/null`,
//! a 200x50 pane): every rank on the screen with its where line, the history strip growing,
//! Enter showing a rank's stacks, `q` quitting; every rank running and untraced afterwards,
//! also after the watch is killed with SIGKILL in the middle of a sample; the session
//! recording replayed by `mpiq replay` and by `mpiq watch --replay`. And the refusal without
//! a terminal, and the help.
//!
//! Uses the `mpiq` binary of the test's own profile (`cargo build -p mpiq-cli` first, with
//! `--release` for `cargo test --release`) and /usr/bin/tmux.

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use mpiq_tests::fixtures::WorkDir;
use mpiq_tests::frontends::{artifact, cli, cli_command};
use mpiq_tests::procs::{state, tgid, tracer_pid};
use mpiq_tests::run::run;
use mpiq_tests::{gdb, Example, Job, Mpi};
use serde_json::Value;

/// A tmux server of this test's own, killed (by its socket name) when dropped.
struct Tmux {
    name: String,
}

impl Tmux {
    /// A new server with one 200x50 session running `command` (words, quoted for sh).
    fn start(command: &[String]) -> Tmux {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "mpiq-watch-test-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let line = command
            .iter()
            .map(|w| format!("'{}'", w.replace('\'', r"'\''")))
            .collect::<Vec<_>>()
            .join(" ");
        let t = Tmux { name };
        t.tmux(&["new-session", "-d", "-x", "200", "-y", "50", &line]);
        t
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.name, "-f", "/dev/null"])
            .args(args)
            .output()
            .expect("run tmux");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The pane's text.
    fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p"])
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys"];
        args.extend_from_slice(keys);
        self.tmux(&args);
    }

    /// The pid of the pane's process.
    fn pane_pid(&self) -> u32 {
        self.tmux(&["display", "-p", "#{pane_pid}"])
            .trim()
            .parse()
            .expect("pane_pid")
    }

    /// Waits until `check` accepts the screen; panics with the screen after `timeout`.
    fn wait_for(&self, what: &str, timeout: Duration, check: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let s = self.screen();
            if check(&s) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; the screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.name, "-f", "/dev/null", "kill-server"])
            .output();
    }
}

/// `sh -c 'mpiq ARGS; echo MPIQ-EXIT=$?; sleep 600'`: the pane stays to be read.
fn wrapped(args: &[&str]) -> Vec<String> {
    let mpiq = artifact("mpiq").display().to_string();
    let mut v = vec![
        "sh".into(),
        "-c".into(),
        r#""$0" "$@"; echo MPIQ-EXIT=$?; sleep 600"#.into(),
        mpiq,
    ];
    v.extend(args.iter().map(|a| a.to_string()));
    v
}

/// Every rank's where line, as `mpiq job --samples 1` reads it.
fn where_lines(starter: u32, n: usize) -> Vec<(i64, u64, String)> {
    let r = cli(&["job", "--starter", &starter.to_string(), "--samples", "1", "--json"]);
    let v: Value = r.json_exact();
    let procs = v["processes"].as_array().expect("processes");
    assert_eq!(procs.len(), n, "{}", r.all());
    procs
        .iter()
        .map(|p| {
            (
                p["world_rank"].as_i64().expect("rank"),
                p["pid"].as_u64().expect("pid"),
                p["stacks"]["where"].as_str().expect("where").to_string(),
            )
        })
        .collect()
}

/// The list's line of rank `rank` (pid `pid`), if on the screen.
fn rank_line(screen: &str, rank: i64, pid: u64) -> Option<String> {
    screen
        .lines()
        .find(|l| {
            let w: Vec<&str> = l.trim_start_matches(['>', ' ']).split_whitespace().collect();
            w.len() >= 2 && w[0] == rank.to_string() && w[1] == pid.to_string()
        })
        .map(str::to_string)
}

/// The history strip at the end of a rank's line (after its where line).
fn strip<'a>(line: &'a str, where_: &str) -> &'a str {
    line.split_once(where_).map_or("", |(_, rest)| rest.trim())
}

fn assert_released(pids: &[u32], what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    for &pid in pids {
        loop {
            let (st, tracer) = (state(pid), tracer_pid(pid));
            if tracer == Some(0) && !matches!(st, Some('t' | 'T' | 'Z' | 'X') | None) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: rank {pid} is not running free: state {st:?}, TracerPid {tracer:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn watch_a_job(mpi: Mpi) {
    gdb::require_ptrace();
    let job = Job::builder(mpi, Example::Deadlock).start();
    let n = job.nprocs();
    let starter = job.starter_pid();
    let pids: Vec<u32> = job.ranks().iter().map(|r| r.pid).collect();
    let wheres = where_lines(starter, n);
    let dir = WorkDir::new(&format!("watch-{}", mpi.name()));
    let rec = dir.path("session.rec").display().to_string();
    let starter_s = starter.to_string();

    // Live, recording.
    let t = Tmux::start(&wrapped(&[
        "watch",
        "--starter",
        &starter_s,
        "--interval",
        "300ms",
        "--record",
        &rec,
    ]));
    let minute = Duration::from_secs(90);
    let screen = t.wait_for("every rank with its where line", minute, |s| {
        wheres
            .iter()
            .all(|(r, pid, w)| rank_line(s, *r, *pid).is_some_and(|l| l.contains(w.as_str())))
    });
    assert!(
        screen.contains(&format!("mpiq watch  mpirun {starter}")) || screen.contains(&starter_s),
        "{screen}"
    );
    assert!(screen.contains("verdict: "), "{screen}");
    assert!(screen.contains("q quit"), "{screen}");
    // A few samples: several letters, `W` (every rank in MPI_Wait).
    let screen = t.wait_for("three samples in every history", minute, |s| {
        wheres.iter().all(|(r, pid, w)| {
            rank_line(s, *r, *pid).is_some_and(|l| {
                let h = strip(&l, w);
                h.chars().count() >= 3 && h.chars().all(|c| "W.?".contains(c))
            })
        })
    });
    assert!(screen.contains("DEADLOCK") || screen.contains("deadlock"), "{screen}");
    // Enter: the first rank's stacks and queues.
    t.keys(&["Home", "Enter"]);
    let screen = t.wait_for("rank 0's stacks", minute, |s| {
        s.contains("rank 0: every thread's frames") && s.contains("Threads (") && s.contains("#0 ")
    });
    assert!(screen.contains("MPI_Wait"), "{screen}");
    assert!(screen.contains("Process pid"), "{screen}");
    t.keys(&["Escape"]);
    t.wait_for("the list again", minute, |s| s.contains("history (newest right)"));
    t.keys(&["q"]);
    let screen = t.wait_for("mpiq to exit", minute, |s| s.contains("MPIQ-EXIT="));
    assert!(screen.contains("MPIQ-EXIT=0"), "{screen}");
    assert!(screen.contains(&format!("recorded in {rec}")), "{screen}");
    assert_released(&pids, "after q");
    drop(t);

    // The recording: `mpiq replay` gives the first sample, `mpiq watch --replay` the session.
    let r = cli(&["replay", &rec, "--json"]);
    let v = r.json_exact();
    assert_eq!(v["processes"].as_array().map(Vec::len), Some(n), "{}", r.all());
    assert_eq!(v["analysis"]["verdict"], "deadlock", "{:#}", v["analysis"]);
    let t = Tmux::start(&wrapped(&["watch", "--replay", &rec]));
    let screen = t.wait_for("the replayed ranks", minute, |s| {
        wheres
            .iter()
            .all(|(r, pid, w)| rank_line(s, *r, *pid).is_some_and(|l| l.contains(w.as_str())))
    });
    let total: usize = screen
        .split_once("sample 1 of ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("no `sample 1 of N`:\n{screen}"));
    assert!(total >= 3, "{total} samples recorded:\n{screen}");
    // Right steps over the samples read so far: wait for all.
    t.wait_for("every sample replayed", minute, |s| !s.contains("[replaying"));
    t.keys(&["End"]);
    for _ in 1..total {
        t.keys(&["Right"]);
    }
    t.wait_for("the last sample", minute, |s| {
        s.contains(&format!("sample {total} of {total}"))
    });
    t.keys(&["q"]);
    t.wait_for("mpiq to exit", minute, |s| s.contains("MPIQ-EXIT=0"));
    drop(t);

    // Killed with SIGKILL in the middle of a sample (each holds the ranks 3 s): they run.
    let mut command = vec!["env".to_string(), "MPIQ_TEST_HOLD_MS=3000".into()];
    command.push(artifact("mpiq").display().to_string());
    command.extend(["watch", "--starter", &starter_s].iter().map(|s| s.to_string()));
    let t = Tmux::start(&command);
    let watch_pid = t.pane_pid();
    t.wait_for("the first sample", minute, sampled);
    // The second sample holds them.
    let deadline = Instant::now() + minute;
    while !pids.iter().all(|&p| state(p) == Some('t')) {
        assert!(
            Instant::now() < deadline,
            "the ranks were never seen stopped by a sample"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let tracer = tracer_pid(pids[0]).unwrap_or(0);
    assert_eq!(
        tgid(tracer),
        Some(watch_pid),
        "the pane's process is the watch (tracer thread {tracer})"
    );
    kill(watch_pid, "-9");
    assert_released(&pids, "after kill -9 of the watch");
    drop(t);
    assert!(pids.iter().all(|&p| Job::is_running(p)));

    // SIGTERM in the middle of a sample: the ranks released, the terminal put back.
    let mut command = vec!["MPIQ_TEST_HOLD_MS=3000".to_string()];
    command.extend(wrapped(&["watch", "--starter", &starter_s]));
    command.insert(0, "env".into());
    let t = Tmux::start(&command);
    t.wait_for("the first sample", minute, sampled);
    let deadline = Instant::now() + minute;
    while !pids.iter().all(|&p| state(p) == Some('t')) {
        assert!(
            Instant::now() < deadline,
            "the ranks were never seen stopped by a sample"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The watch is the process that traces them (the pane's is its shell).
    let watch_pid = tgid(tracer_pid(pids[0]).unwrap_or(0)).expect("the tracer's process");
    kill(watch_pid, "-TERM");
    assert_released(&pids, "after SIGTERM to the watch");
    let screen = t.wait_for("mpiq to exit", minute, |s| s.contains("MPIQ-EXIT="));
    assert!(screen.contains("MPIQ-EXIT=143"), "{screen}");
    assert!(screen.contains("mpiq: SIGTERM: stopped; released"), "{screen}");
    assert!(
        !screen.contains("history (newest right)"),
        "the screen is put back:\n{screen}"
    );
    drop(t);

    // Its terminal closed (the tmux server killed: SIGHUP): the watch ends, the ranks run.
    let t = Tmux::start(&wrapped(&["watch", "--starter", &starter_s, "--interval", "100ms"]));
    t.wait_for("the first sample", minute, sampled);
    let deadline = Instant::now() + minute;
    let watch_pid = loop {
        // The watch traces the ranks only while it samples.
        if let Some(pid) = tracer_pid(pids[0]).filter(|&p| p != 0).and_then(tgid) {
            break pid;
        }
        assert!(Instant::now() < deadline, "the watch was never seen sampling");
        std::thread::sleep(Duration::from_millis(5));
    };
    drop(t);
    let deadline = Instant::now() + Duration::from_secs(20);
    while state(watch_pid).is_some_and(|s| s != 'Z') {
        assert!(Instant::now() < deadline, "the watch {watch_pid} outlived its terminal");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_released(&pids, "after the watch's terminal was closed");
}

/// Whether the screen's title shows a finished sample, whichever its number: at a
/// short interval the first may be gone by the time the pane is read.
fn sampled(screen: &str) -> bool {
    screen.lines().next().is_some_and(|title| {
        title.split("   sample ").nth(1).is_some_and(|rest| {
            rest.split_once(" at ")
                .is_some_and(|(n, _)| n.parse::<u64>().is_ok_and(|n| n >= 1))
        })
    })
}

/// `kill SIGNAL PID` (the watch this test started, by its pid).
fn kill(pid: u32, signal: &str) {
    let r = run({
        let mut c = Command::new("kill");
        c.args([signal, &pid.to_string()]);
        c
    });
    assert_eq!(r.code(), Some(0), "{}", r.all());
}

#[test]
fn watch_openmpi() {
    watch_a_job(Mpi::OpenMpi);
}

#[test]
fn watch_mpich() {
    watch_a_job(Mpi::Mpich);
}

#[test]
fn watch_needs_a_terminal_and_explains_itself() {
    let r = run(cli_command(&["watch", "--starter", "1"]));
    assert_eq!(r.code(), Some(2), "{}", r.all());
    assert!(
        r.stderr.contains("not one") && r.stderr.contains("terminal"),
        "{}",
        r.all()
    );
    let r = cli(&["watch", "--help"]);
    assert_eq!(r.code(), Some(0), "{}", r.all());
    for words in [
        "mpiq watch --starter",
        "--record",
        "--replay",
        "--interval",
        "History letters",
        "Enter",
        "PTRACE_SEIZE",
    ] {
        assert!(r.stdout.contains(words), "{words}: {}", r.stdout);
    }
    let r = cli(&["watch"]);
    assert_eq!(r.code(), Some(2), "{}", r.all());
    let r = cli(&["watch", "--replay", "x.rec", "--record", "y.rec"]);
    assert_eq!(r.code(), Some(2), "{}", r.all());
}
