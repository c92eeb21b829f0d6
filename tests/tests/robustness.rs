//! Issue 6 end to end, in all three front ends (gdb `info mpi-queues`, lldb
//! `mpi queues`, `mpiq`):
//!
//! * the DLL trust policy: a process naming a planted library
//!   (`fixtures/planted.c`) never gets it loaded — no marker file — and the
//!   refusal says why and how to allow it; with `MPIQ_TRUST_DLL` (or `--dll`)
//!   it is loaded, which proves the test can fail;
//! * isolation: fake libraries that segfault, abort or loop in
//!   `mqs_setup_image` are reported with the library's name and what
//!   happened, and the same gdb/lldb session then dumps a real rank; the CLI
//!   exits non-zero;
//! * limits: fake libraries with endless lists hit each limit (communicators,
//!   operations, callbacks, failed reads) and say so;
//! * process state: a CLI killed with SIGKILL (or SIGINT/SIGTERM) in the
//!   middle of a dump leaves every rank running, untraced, and the job
//!   completes; a crash of the library inside the CLI (`--in-process`) too;
//!   a CLI killed while the library runs in `mpiq-dllhost` takes the helper
//!   with it;
//!   a running process is refused by gdb and lldb and stopped-and-resumed by
//!   the CLI; Ctrl-C stops an lldb dump and the session goes on.
//!
//! Uses the artifacts of the running test's profile (`cargo build --release
//! --workspace` first) and the test bed. The front ends are driven by
//! `mpiq_tests::frontends` (lldb is `$MPIQ_LLDB`, default `lldb-16`) and
//! every command runs through `mpiq_tests::run` with a timeout; the fixtures
//! (`fake_dll.c`, `planted.c`, `endless_lists.c`, `endless_reader.c`) are
//! built with `cc` into a per-test `mpiq_tests::fixtures::WorkDir` under
//! `target/<profile>/mpiq-work/`.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use mpiq_tests::fixtures::{compile_at, endless_reader_at, fake_dll_at, fixture, Compiler, Process, WorkDir};
use mpiq_tests::frontends::{cli_command, gdb_command, lldb_command_sourcing, lldb_interactive, run_lldb, Step};
use mpiq_tests::procs::{assert_free, state, tgid, tracer_pid};
use mpiq_tests::run::{run_within, spawn, Run};
use mpiq_tests::{Example, Job, Mpi};

/// How long one debugger or CLI run may take.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// Runs `cmd` (a gdb or a CLI) within [`RUN_TIMEOUT`].
fn run(cmd: Command) -> Run {
    run_within(cmd, RUN_TIMEOUT)
}

/// lldb with the plugin loaded, attached to `pid`, sourcing `commands` from
/// a file in `dir` with `--stop-on-error false` (so a failing command does
/// not end the batch), run within [`RUN_TIMEOUT`]; `env` is set for it.
fn lldb_run(dir: &WorkDir, pid: u32, commands: &[&str], env: &[(&str, &str)]) -> Run {
    mpiq_tests::gdb::require_ptrace();
    let script = dir.path(&format!("commands-{pid}.lldb"));
    let mut cmd = lldb_command_sourcing(&script, &["-p", &pid.to_string()], commands);
    cmd.envs(env.iter().copied());
    run_lldb(cmd, RUN_TIMEOUT)
}

/// How often `needle` occurs in `haystack`.
fn count(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

// --- 1. The DLL trust policy: a planted library -----------------------------------------------

/// Where the planted library is put so that mpiq must refuse it.
#[derive(Clone, Copy, Debug)]
enum Plant {
    /// In a directory with mode 0777.
    WorldWritableDir,
    /// A file with mode 0666 in a private directory.
    WorldWritableFile,
}

/// `planted.c` naming `libplanted.so` (fake_dll.c with a marker-making
/// constructor), planted as `how`.
struct Planted {
    dir: WorkDir,
    lib: PathBuf,
    marker: PathBuf,
    process: Process,
}

impl Planted {
    fn new(name: &str, how: Plant) -> Planted {
        let dir = WorkDir::new(name);
        let marker = dir.path("marker");
        let lib_dir = dir.path("lib");
        fs::create_dir(&lib_dir).expect("mkdir");
        let lib = lib_dir.join("libplanted.so");
        fake_dll_at(&lib, &[&format!("-DFAKE_MARKER={}", marker.display())]);
        match how {
            Plant::WorldWritableDir => fs::set_permissions(&lib_dir, fs::Permissions::from_mode(0o777)),
            Plant::WorldWritableFile => fs::set_permissions(&lib, fs::Permissions::from_mode(0o666)),
        }
        .expect("chmod");
        let exe = dir.path("planted");
        compile_at(
            &fixture("planted.c"),
            &exe,
            Compiler::Cc,
            &[&format!("-DPLANTED_DLL={}", lib.display())],
            false,
        );
        let process = Process::start(&exe);
        Planted {
            dir,
            lib,
            marker,
            process,
        }
    }

    fn pid(&self) -> u32 {
        self.process.pid()
    }

    fn assert_refused(&self, fe: &str, r: &Run) {
        let text = format!("{}{}", r.stdout, r.stderr);
        assert!(
            !self.marker.exists(),
            "{fe}: the planted library was loaded:\n{}",
            r.all()
        );
        for needle in [
            "refusing",
            "MPIQ_TRUST_DLL",
            &self.lib.display().to_string(),
            "writable by",
        ] {
            assert!(
                text.contains(needle),
                "{fe}: `{needle}` not in the refusal:\n{}",
                r.all()
            );
        }
        assert_free(self.pid(), fe);
    }

    fn assert_loaded(&self, fe: &str, r: &Run) {
        assert!(
            self.marker.exists(),
            "{fe}: the library was not loaded with MPIQ_TRUST_DLL:\n{}",
            r.all()
        );
        fs::remove_file(&self.marker).expect("remove the marker");
        assert_free(self.pid(), fe);
    }
}

#[test]
fn planted_library_is_refused_by_gdb() {
    let p = Planted::new("planted-gdb", Plant::WorldWritableDir);
    let r = run(gdb_command(p.pid(), &["info mpi-queues", "echo AFTER\\n"]));
    p.assert_refused("gdb", &r);
    assert!(r.stdout.contains("AFTER"), "gdb did not go on:\n{}", r.all());
    let mut trusting = gdb_command(p.pid(), &["info mpi-queues"]);
    trusting.env("MPIQ_TRUST_DLL", "1");
    let r = run(trusting);
    p.assert_loaded("gdb with MPIQ_TRUST_DLL=1", &r);
}

#[test]
fn planted_library_is_refused_by_lldb() {
    let p = Planted::new("planted-lldb", Plant::WorldWritableDir);
    let r = lldb_run(&p.dir, p.pid(), &["mpi queues"], &[]);
    p.assert_refused("lldb", &r);
    let r = lldb_run(&p.dir, p.pid(), &["mpi queues"], &[("MPIQ_TRUST_DLL", "1")]);
    p.assert_loaded("lldb with MPIQ_TRUST_DLL=1", &r);
}

#[test]
fn planted_library_is_refused_by_the_cli() {
    for how in [Plant::WorldWritableDir, Plant::WorldWritableFile] {
        let p = Planted::new("planted-cli", how);
        let pid = p.pid().to_string();
        let r = run(cli_command(&["queues", "--pid", &pid]));
        assert!(!r.success, "{how:?}: {}", r.all());
        p.assert_refused(&format!("mpiq ({how:?})"), &r);
        // The same with the helper out of the picture: still never loaded.
        let r = run(cli_command(&["queues", "--pid", &pid, "--in-process"]));
        p.assert_refused(&format!("mpiq --in-process ({how:?})"), &r);

        // Allowed: by MPIQ_TRUST_DLL=1, by MPIQ_TRUST_DLL=<that file>, and
        // by naming it (a library the user names is trusted).
        for (var, value) in [
            (Some("MPIQ_TRUST_DLL"), "1".to_string()),
            (Some("MPIQ_TRUST_DLL"), p.lib.display().to_string()),
            (None, String::new()),
        ] {
            let lib = p.lib.display().to_string();
            let mut cmd = match var {
                Some(_) => cli_command(&["queues", "--pid", &pid]),
                None => cli_command(&["queues", "--pid", &pid, "--dll", &lib]),
            };
            if let Some(v) = var {
                cmd.env(v, &value);
            }
            let r = run(cmd);
            // The fake library has no queues: an error, but after loading.
            assert!(r.stderr.contains("fake library never has queues"), "{}", r.all());
            p.assert_loaded(&format!("mpiq {var:?}={value} ({how:?})"), &r);
        }
    }
}

// --- 2. Isolation: libraries that crash, abort or hang ---------------------------------------

/// The three misbehaving libraries, and what the report must say.
struct Fakes {
    /// Where the libraries are (and the lldb command files go).
    dir: WorkDir,
    /// (library, extra arguments, words the report must contain)
    cases: Vec<(PathBuf, &'static str, &'static [&'static str])>,
}

fn fakes(name: &str) -> Fakes {
    let dir = WorkDir::new(name);
    let mut cases = Vec::new();
    for (define, args, words) in [
        (
            "FAKE_CRASH_SEGV",
            "",
            &["crashed", "SIGSEGV", "this session is unaffected"][..],
        ),
        ("FAKE_CRASH_ABORT", "", &["crashed", "abort()"][..]),
        (
            "FAKE_CRASH_LOOP",
            " --timeout 2",
            &["did not answer within 2.0 s", "--timeout"][..],
        ),
    ] {
        let lib = dir.path(&format!("lib{}.so", define.to_lowercase()));
        fake_dll_at(&lib, &[&format!("-D{define}")]);
        cases.push((lib, args, words));
    }
    Fakes { dir, cases }
}

fn ring_job() -> Job {
    Job::builder(Mpi::Mpich, Example::Ring).nprocs(2).start()
}

/// Python, run in gdb, defining `helper_pids()`: the pids of gdb's
/// `mpiq-dllhost` children. A process that ends while /proc is scanned is
/// skipped (its entry can vanish between the listing and the read).
const HELPER_PIDS_DEF: &str = r#"import os, glob
def helper_pids():
    pids = []
    for p in glob.glob('/proc/[0-9]*/stat'):
        try:
            s = open(p).read()
        except OSError:
            continue
        if '(mpiq-dllhost)' in s and s.rsplit(')', 1)[1].split()[1] == str(os.getpid()):
            pids.append(int(p.split('/')[2]))
    return sorted(pids)
"#;

/// One helper serves a gdb session's dumps (it is kept between them); one
/// that is gone by the next dump (killed here) is replaced, and the dump
/// shows the queues.
#[test]
fn a_kept_helper_serves_the_next_dump_or_is_replaced() {
    let job = ring_job();
    // One gdb command line: the definition as an escaped Python string.
    let define = format!("python exec({HELPER_PIDS_DEF:?})");
    let list = "python print('HELPERS', helper_pids())";
    let kill = "python import signal; [os.kill(p, signal.SIGKILL) for p in helper_pids()]";
    let r = run(gdb_command(
        job.pid_of(0),
        &[
            &define,
            "info mpi-queues",
            list,
            "info mpi-queues",
            list,
            kill,
            "info mpi-queues",
            list,
        ],
    ));
    assert_eq!(count(&r.stdout, "Posted receives (1):"), 3, "{}", r.all());
    let lists: Vec<&str> = r.stdout.lines().filter(|l| l.starts_with("HELPERS ")).collect();
    assert_eq!(lists.len(), 3, "{}", r.all());
    assert!(lists[0] != "HELPERS []", "no helper after a dump:\n{}", r.all());
    assert_eq!(
        lists[0],
        lists[1],
        "the second dump did not use the first's helper:\n{}",
        r.all()
    );
    assert!(
        lists[2] != "HELPERS []" && lists[2] != lists[0],
        "the killed helper was not replaced:\n{}",
        r.all()
    );
}

#[test]
fn crashing_libraries_in_gdb() {
    let f = fakes("fakes-gdb");
    let job = ring_job();
    let real = Mpi::Mpich.debug_library().expect("has a debug library");
    let mut commands = Vec::new();
    for (i, (lib, args, _)) in f.cases.iter().enumerate() {
        commands.push(format!("info mpi-queues --dll {}{args}", lib.display()));
        commands.push(format!("echo ==AFTER-{i}==\\n"));
        commands.push(format!("info mpi-queues --dll {}", real.display()));
    }
    let commands: Vec<&str> = commands.iter().map(String::as_str).collect();
    let r = run(gdb_command(job.pid_of(0), &commands));
    for (i, (lib, _, words)) in f.cases.iter().enumerate() {
        let line = r
            .stderr
            .lines()
            .find(|l| l.contains(&lib.display().to_string()))
            .unwrap_or_else(|| panic!("gdb did not report {}:\n{}", lib.display(), r.all()));
        for w in *words {
            assert!(line.contains(w), "`{w}` not in gdb's report `{line}`:\n{}", r.all());
        }
        let after = r
            .stdout
            .split(&format!("==AFTER-{i}=="))
            .nth(1)
            .unwrap_or_else(|| panic!("gdb stopped after {}:\n{}", lib.display(), r.all()));
        let next = after.split("==AFTER-").next().unwrap_or_default();
        assert!(
            next.contains("Posted receives (1):"),
            "the dump after {} failed:\n{}",
            lib.display(),
            r.all()
        );
    }
    for traceback in ["Traceback", "Python Exception"] {
        assert!(!r.stderr.contains(traceback), "{}", r.all());
    }
    assert_free(job.pid_of(0), "after gdb");
}

#[test]
fn crashing_libraries_in_lldb() {
    let f = fakes("fakes-lldb");
    let job = ring_job();
    let real = Mpi::Mpich.debug_library().expect("has a debug library");
    let mut commands = Vec::new();
    for (lib, args, _) in &f.cases {
        commands.push(format!("mpi queues --dll {}{args}", lib.display()));
        commands.push(format!("mpi queues --dll {}", real.display()));
    }
    let commands: Vec<&str> = commands.iter().map(String::as_str).collect();
    // (lldb_run fails the test if lldb crashed.)
    let r = lldb_run(&f.dir, job.pid_of(0), &commands, &[]);
    let errors: Vec<&str> = r.stderr.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(errors.len(), f.cases.len(), "one error per fake library:\n{}", r.all());
    for ((lib, _, words), line) in f.cases.iter().zip(&errors) {
        assert!(line.contains(&lib.display().to_string()), "{line}:\n{}", r.all());
        for w in *words {
            assert!(line.contains(w), "`{w}` not in lldb's report `{line}`:\n{}", r.all());
        }
    }
    // Every real dump after a failure worked, in the same session.
    assert_eq!(
        count(&r.stdout, "Posted receives (1):"),
        f.cases.len(),
        "the dumps after the failures:\n{}",
        r.all()
    );
    assert_free(job.pid_of(0), "after lldb");
}

#[test]
fn crashing_libraries_in_the_cli() {
    let f = fakes("fakes-cli");
    let job = ring_job();
    let pid = job.pid_of(0).to_string();
    for (lib, args, words) in &f.cases {
        let lib_s = lib.display().to_string();
        let mut argv = vec!["queues", "--pid", &pid, "--dll", &lib_s];
        argv.extend(args.split_whitespace());
        let r = run(cli_command(&argv));
        assert!(!r.success, "{}", r.all());
        assert_eq!(r.code(), Some(1), "{}", r.all());
        assert!(r.stderr.contains(&lib_s), "the report names the library:\n{}", r.all());
        for w in *words {
            assert!(r.stderr.contains(w), "`{w}` not in the report:\n{}", r.all());
        }
        assert!(r.elapsed < Duration::from_secs(30), "{}", r.all());
        assert_free(job.pid_of(0), &format!("after mpiq --dll {lib_s}"));
    }
    // A crash inside mpiq itself (--in-process) still leaves the rank running.
    let (segv, _, _) = &f.cases[0];
    let segv = segv.display().to_string();
    let r = run(cli_command(&["queues", "--pid", &pid, "--dll", &segv, "--in-process"]));
    assert!(!r.success, "{}", r.all());
    assert_free(job.pid_of(0), "after mpiq crashed with the library in-process");
    // And the rank is still an MPI rank to dump.
    let r = run(cli_command(&["queues", "--pid", &pid]));
    assert!(r.success && r.stdout.contains("Posted receives (1):"), "{}", r.all());
}

/// `--in-process` gives the same snapshot as the helper.
#[test]
fn in_process_option_matches_the_helper() {
    for mpi in [Mpi::OpenMpi, Mpi::Mpich] {
        let job = Job::builder(mpi, Example::NamedComms).start();
        let pid = job.pid_of(1).to_string();
        let a = run(cli_command(&["queues", "--pid", &pid, "--json", "--all"]));
        let b = run(cli_command(&[
            "queues",
            "--pid",
            &pid,
            "--json",
            "--all",
            "--in-process",
        ]));
        assert!(a.success && b.success, "{}\n{}", a.all(), b.all());
        let strip = |r: &Run| mpiq_tests::golden::portable(r.json_exact());
        assert_eq!(strip(&a), strip(&b), "{mpi}");
    }
}

// --- 3. Limits ---------------------------------------------------------------------------------

/// `fixtures/endless_lists.c` (a fake library with endless lists: see its
/// header for what each define does) built as `lib<name>.so` in `dir`.
fn endless(dir: &WorkDir, name: &str, defines: &[&str]) -> PathBuf {
    let lib = dir.path(&format!("lib{name}.so"));
    compile_at(&fixture("endless_lists.c"), &lib, Compiler::Cc, defines, true);
    lib
}

/// The process snapshot `mpiq queues --json` prints with `env` set.
fn limited_dump(target: u32, lib: &Path, env: &[(&str, &str)]) -> (serde_json::Value, Run) {
    let pid = target.to_string();
    let lib = lib.display().to_string();
    let mut cmd = cli_command(&["queues", "--pid", &pid, "--dll", &lib, "--json", "--all"]);
    cmd.envs(env.iter().copied());
    let r = run(cmd);
    assert!(r.success, "{}", r.all());
    let v = r.json_exact();
    (v["processes"][0].clone(), r)
}

#[test]
fn every_limit_is_reported_when_hit() {
    let p = Planted::new("limits", Plant::WorldWritableFile);
    let comms = endless(&p.dir, "endless_comms", &["-DENDLESS_COMMS"]);
    let fetch = endless(&p.dir, "endless_fetch", &["-DENDLESS_FETCH"]);
    let failures = endless(&p.dir, "endless_failures", &["-DENDLESS_FAILURES"]);
    let endless = endless(&p.dir, "endless", &[]);

    // Operations per queue: small for the test, then the real default.
    for (env, n) in [(&[("MPIQ_MAX_OPERATIONS", "500")][..], 500u64), (&[][..], 100_000)] {
        let (proc_, r) = limited_dump(p.pid(), &endless, env);
        let q = &proc_["communicators"][0]["queues"]["receives"];
        assert_eq!(
            q["operations"].as_array().map(Vec::len),
            Some(n as usize),
            "{}",
            r.all()
        );
        assert_eq!(q["incomplete"], true, "{q}");
        let reason = q["reason"].as_str().unwrap_or_default();
        assert!(
            reason.contains(&format!("stopped after {n} operations")) && reason.contains("may be corrupt"),
            "{reason}"
        );
        assert!(
            r.elapsed < Duration::from_secs(8),
            "{n} operations took {:?}",
            r.elapsed
        );
    }

    let messages = |v: &serde_json::Value| v["messages"].to_string();
    let (v, r) = limited_dump(p.pid(), &comms, &[("MPIQ_MAX_COMMUNICATORS", "300")]);
    assert_eq!(v["communicators"].as_array().map(Vec::len), Some(300), "{}", r.all());
    assert!(messages(&v).contains("stopped after 300 communicators"), "{v}");

    let (v, r) = limited_dump(p.pid(), &fetch, &[("MPIQ_MAX_CALLBACKS", "100000")]);
    assert!(
        messages(&v).contains("stopped after 100000 callbacks") && messages(&v).contains("may be corrupt"),
        "{}",
        r.all()
    );
    let q = &v["communicators"][0]["queues"]["receives"];
    assert!(q["reason"].as_str().unwrap_or_default().contains("limit"), "{q}");

    let (v, r) = limited_dump(p.pid(), &failures, &[("MPIQ_MAX_FAILURES", "1000")]);
    assert!(messages(&v).contains("stopped after 1000 failed reads"), "{}", r.all());
    assert!(messages(&v).contains("what is shown may be incomplete"), "{v}");
    assert_free(p.pid(), "after the limits");
}

// --- 4. Process state: interruptions, SIGKILL, running processes ---------------------------

/// Starts `mpiq job --starter S` on a `slow` job with the processes held
/// stopped for a while, waits until every rank is in a tracing stop under
/// it, sends `signal`, and checks that every rank runs freely again and that
/// the job completes with status 0.
fn killed_mid_dump(mpi: Mpi, signal: &str) {
    mpiq_tests::gdb::require_ptrace();
    let mut job = Job::builder(mpi, Example::Slow).start();
    let mut cmd = cli_command(&["job", "--starter", &job.starter_pid().to_string()]);
    cmd.env("MPIQ_TEST_HOLD_MS", "20000");
    let mut mpiq = spawn(cmd);
    let me = mpiq.id();
    let ranks: Vec<u32> = job.ranks().iter().map(|r| r.pid).collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    // The tracer is one of mpiq's threads (one per stopped process).
    let traced_by_mpiq = |p: u32| tracer_pid(p).and_then(tgid) == Some(me) && state(p) == Some('t');
    while !ranks.iter().all(|&p| traced_by_mpiq(p)) {
        assert!(
            Instant::now() < deadline,
            "mpiq never stopped every rank: {:?}",
            ranks.iter().map(|&p| (p, state(p), tracer_pid(p))).collect::<Vec<_>>()
        );
        assert!(!mpiq.has_exited(), "mpiq exited early");
        std::thread::sleep(Duration::from_millis(20));
    }
    mpiq.signal(signal);
    // mpiq must end within 20 s of the signal.
    let r = mpiq.wait_within(Duration::from_secs(20));
    match signal {
        "KILL" => assert_eq!(r.signal(), Some(9), "{r}"),
        "INT" => {
            assert_eq!(r.code(), Some(130), "{r}");
            assert!(r.stderr.contains("released"), "{r}");
        }
        "TERM" => assert_eq!(r.code(), Some(143), "{r}"),
        _ => {}
    }
    for &p in &ranks {
        assert_free(p, &format!("{mpi}: rank after mpiq got SIG{signal}"));
    }
    assert_free(job.starter_pid(), &format!("{mpi}: starter after mpiq got SIG{signal}"));
    let status = job.wait_exit(Duration::from_secs(60));
    assert!(
        status.success(),
        "{mpi}: the job did not complete: {status:?}\n{}",
        job.output()
    );
}

#[test]
fn cli_killed_mid_dump_leaves_the_job_running_mpich() {
    killed_mid_dump(Mpi::Mpich, "KILL");
}

#[test]
fn cli_killed_mid_dump_leaves_the_job_running_openmpi() {
    killed_mid_dump(Mpi::OpenMpi, "KILL");
}

#[test]
fn cli_interrupted_mid_dump_releases_the_job() {
    killed_mid_dump(Mpi::Mpich, "INT");
    killed_mid_dump(Mpi::OpenMpi, "TERM");
}

/// A running process: gdb and lldb refuse to read it (and say how to stop
/// it), then read it once stopped; the CLI stops it, reads it and resumes
/// it. Every front end leaves it running.
#[test]
fn running_processes_are_refused_or_stopped_and_resumed() {
    let job = ring_job();
    let pid = job.pid_of(1);

    // gdb: refused while running. (gdb -batch does not process the stop
    // after `interrupt` before its next -ex command, so the dump after a stop
    // is what every other gdb test does: attach, which stops the process.)
    let r = run(gdb_command(pid, &["continue &", "info mpi-queues", "echo AFTER\\n"]));
    assert!(
        r.stderr
            .to_lowercase()
            .contains("the process is running; interrupt it first"),
        "gdb:\n{}",
        r.all()
    );
    assert!(r.stdout.contains("AFTER"), "gdb did not go on:\n{}", r.all());
    assert!(
        !r.stdout.contains("Process pid"),
        "gdb read a running process:\n{}",
        r.all()
    );
    assert_free(pid, "after gdb");

    // lldb at a prompt: `process continue` returns with the process running.
    let (text, _) = lldb_interactive(
        pid,
        &[
            Step::Line("process continue"),
            Step::Sleep(1000),
            Step::Line("mpi queues"),
            Step::Sleep(1000),
            Step::Line("process interrupt"),
            Step::Sleep(1000),
            Step::Line("mpi queues"),
            Step::Sleep(3000),
        ],
        &[],
    );
    assert!(
        text.contains("is running: stop it first"),
        "lldb must refuse a running process:\n{text}"
    );
    assert_eq!(count(&text, "Posted receives (1):"), 1, "lldb after interrupt:\n{text}");
    assert_free(pid, "after lldb");

    assert!(state(pid).is_some_and(|s| s != 'T' && s != 't'));
    let r = run(cli_command(&["queues", "--pid", &pid.to_string()]));
    assert!(r.success && r.stdout.contains("Posted receives (1):"), "{}", r.all());
    assert_free(pid, "after mpiq");
}

/// `fixtures/endless_reader.c` built in `dir`: reads a new unreadable page
/// each time until the error changes (to "interrupted"), 60 s at most;
/// creates `marker` when its loop starts.
fn endless_reader(dir: &WorkDir, marker: &Path) -> PathBuf {
    let lib = dir.path("libendless_reader.so");
    endless_reader_at(&lib, marker);
    lib
}

/// SIGKILL to the CLI while the library runs in `mpiq-dllhost`: the helper
/// dies with it, and the rank runs on. Two libraries: one that loops in
/// `mqs_setup_image` without a callback (nothing would ever tell the helper
/// that mpiq is gone), and one that keeps reading.
#[test]
fn cli_killed_while_the_library_runs() {
    let dir = WorkDir::new("killed-in-library");
    let job = ring_job();
    let pid = job.pid_of(0);
    let marker = dir.path("looping");
    let spinner = dir.path("libspinner.so");
    fake_dll_at(
        &spinner,
        &["-DFAKE_CRASH_LOOP", &format!("-DFAKE_MARKER={}", marker.display())],
    );
    let reader = endless_reader(&dir, &marker);
    for lib in [spinner, reader] {
        let _ = fs::remove_file(&marker);
        let lib_s = lib.display().to_string();
        let mut cmd = cli_command(&["queues", "--pid", &pid.to_string(), "--dll", &lib_s, "--timeout", "100"]);
        cmd.env("MPIQ_MAX_FAILURES", "100000000");
        let mut mpiq = spawn(cmd);
        let deadline = Instant::now() + Duration::from_secs(60);
        while !marker.exists() {
            assert!(Instant::now() < deadline, "{lib_s} never started");
            assert!(!mpiq.has_exited(), "mpiq ended early");
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(300));
        let helpers: Vec<u32> = fs::read_dir("/proc")
            .expect("/proc")
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|&p| mpiq_tests::procs::Stat::read(p).is_some_and(|s| s.ppid == mpiq.id()))
            .collect();
        assert_eq!(helpers.len(), 1, "one mpiq-dllhost under mpiq: {helpers:?}");
        let helper = mpiq_tests::procs::Proc::of(helpers[0]).expect("the helper");
        assert!(helper.name.starts_with("mpiq-dllhost"), "{helper}");
        mpiq.signal("KILL");
        let _ = mpiq.wait_within(Duration::from_secs(20));
        let deadline = Instant::now() + Duration::from_secs(10);
        while helper.is_alive() {
            if Instant::now() >= deadline {
                helper.kill();
                panic!("{helper} running {lib_s} outlived mpiq");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_free(pid, &format!("after mpiq was killed in {lib_s}"));
    }
}

/// Ctrl-C at lldb's prompt during a dump stops it (LLDB prints "...
/// Interrupted."), and the same session then dumps the rank.
#[test]
fn ctrl_c_stops_an_lldb_dump() {
    let dir = WorkDir::new("lldb-ctrl-c");
    let marker = dir.path("looping");
    let lib = endless_reader(&dir, &marker);
    let job = ring_job();
    let dump = format!("mpi queues --dll {} --timeout 100", lib.display());
    let (text, after) = lldb_interactive(
        job.pid_of(0),
        &[
            Step::Line(&dump),
            Step::WaitFor(&marker),
            Step::Sleep(500),
            Step::CtrlC,
            Step::Sleep(1000),
            Step::Line("script print('SESSION-' + 'GOES-ON')"),
            Step::Line("mpi queues"),
            Step::Sleep(3000),
        ],
        // The reader's failed reads must not hit the failed-read limit first.
        &[("MPIQ_MAX_FAILURES", "100000000")],
    );
    let after = after.expect("Ctrl-C was pressed");
    assert!(
        after < Duration::from_secs(30),
        "lldb took {after:?} after Ctrl-C (the reader gives up after 60 s):\n{text}"
    );
    assert!(text.contains("Interrupted"), "lldb did not interrupt the dump:\n{text}");
    assert!(
        !text.contains("the endless reader stopped"),
        "the dump was not stopped by Ctrl-C:\n{text}"
    );
    let rest = text
        .split("SESSION-GOES-ON")
        .nth(1)
        .unwrap_or_else(|| panic!("the session ended:\n{text}"));
    assert!(rest.contains("Posted receives (1):"), "the next dump failed:\n{text}");
    assert_free(job.pid_of(0), "after lldb");
}
