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
//! --workspace` first) and the test bed. Fixtures are built with `cc` into
//! `target/<profile>/mpiq-robustness/`.

use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use mpiq_tests::frontends::{artifact, artifacts_dir, workspace_root};
use mpiq_tests::procs::{state, tracer_pid};
use mpiq_tests::{gdb, Example, Job, Mpi};

/// How long one debugger or CLI run may take.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

// --- helpers -------------------------------------------------------------------------------

/// A directory for one test under `target/<profile>/mpiq-robustness/`,
/// removed on drop.
struct WorkDir(PathBuf);

impl WorkDir {
    fn new(name: &str) -> WorkDir {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let dir = artifacts_dir().join("mpiq-robustness").join(format!(
            "{name}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("create the work directory");
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).expect("chmod");
        WorkDir(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn fixture(name: &str) -> PathBuf {
    workspace_root().join("tests/fixtures").join(name)
}

/// `cc -o out source args...`, panicking with cc's output on failure.
fn cc(out: &Path, source: &Path, args: &[String]) {
    let o = Command::new("cc")
        .arg("-o")
        .arg(out)
        .arg(source)
        .args(args)
        .output()
        .expect("run cc");
    assert!(
        o.status.success(),
        "cc {} failed:\n{}",
        source.display(),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `fake_dll.c` built as a shared library with `defines` (`-D` added).
fn fake_dll(out: &Path, defines: &[String]) {
    let mut args: Vec<String> = vec!["-shared".into(), "-fPIC".into()];
    args.extend(defines.iter().map(|d| format!("-D{d}")));
    cc(out, &fixture("fake_dll.c"), &args);
}

/// A C source written to `dir` and built as a shared library.
fn c_library(dir: &WorkDir, name: &str, source: &str, defines: &[&str]) -> PathBuf {
    let src = dir.path(&format!("{name}.c"));
    fs::write(&src, source).expect("write the source");
    let lib = dir.path(&format!("lib{name}.so"));
    let mut args: Vec<String> = vec!["-shared".into(), "-fPIC".into()];
    args.extend(defines.iter().map(|d| format!("-D{d}")));
    cc(&lib, &src, &args);
    lib
}

/// What a command printed and how it ended.
struct Run {
    status: ExitStatus,
    stdout: String,
    stderr: String,
    elapsed: Duration,
}

impl Run {
    fn all(&self) -> String {
        format!(
            "status {:?} after {:.1?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.status, self.elapsed, self.stdout, self.stderr
        )
    }
}

/// Runs `cmd` (stdin from /dev/null, output to files) and kills it after
/// `timeout` — a failure.
fn run(mut cmd: Command, timeout: Duration) -> Run {
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let tag = format!(
        "mpiq-robustness-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    );
    let out_path = std::env::temp_dir().join(format!("{tag}.out"));
    let err_path = std::env::temp_dir().join(format!("{tag}.err"));
    cmd.stdin(Stdio::null())
        .stdout(fs::File::create(&out_path).expect("temp file"))
        .stderr(fs::File::create(&err_path).expect("temp file"));
    let start = Instant::now();
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let status = wait_child(&mut child, timeout);
    let r = Run {
        status: status.unwrap_or_else(|| child.wait().expect("wait")),
        stdout: fs::read_to_string(&out_path).unwrap_or_default(),
        stderr: fs::read_to_string(&err_path).unwrap_or_default(),
        elapsed: start.elapsed(),
    };
    let _ = fs::remove_file(&out_path);
    let _ = fs::remove_file(&err_path);
    assert!(
        status.is_some(),
        "{cmd:?} did not finish within {timeout:?}:\n{}",
        r.all()
    );
    r
}

/// Waits for `child` up to `timeout`; kills it and returns None after that.
fn wait_child(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            return Some(s);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `gdb -batch -nx` with the shim loaded, attached to `pid`, running `commands`.
fn gdb_cmd(pid: u32, commands: &[&str]) -> Command {
    gdb::require_ptrace();
    mpiq_tests::frontends::gdb_command(pid, commands)
}

/// `lldb-16 -b` with the plugin loaded, attached to `pid`, sourcing
/// `commands` from a file with `--stop-on-error false` (so a failing command
/// does not end the batch).
fn lldb_cmd(dir: &WorkDir, pid: u32, commands: &[&str]) -> Command {
    gdb::require_ptrace();
    let script = dir.path(&format!("commands-{pid}.lldb"));
    fs::write(&script, commands.join("\n") + "\n").expect("write the lldb commands");
    let mut cmd = Command::new(std::env::var("MPIQ_LLDB").unwrap_or_else(|_| "lldb-16".into()));
    cmd.args(["-b", "--no-lldbinit", "-o"])
        .arg(format!("plugin load {}", artifact("libmpiq_lldb.so").display()))
        .arg("-o")
        .arg(format!("command source --stop-on-error false {}", script.display()))
        .arg("-p")
        .arg(pid.to_string());
    cmd
}

/// One step of an interactive lldb session.
enum Step<'a> {
    /// Type a command line.
    Line(&'a str),
    /// Wait (up to 60 s) until this file exists.
    WaitFor(&'a Path),
    /// Wait this long.
    Sleep(u64),
    /// Press Ctrl-C (SIGINT to lldb, as the terminal sends it).
    CtrlC,
}

/// An interactive `lldb-16` (on a pseudo-terminal made by `script(1)`, so
/// that it behaves as at a prompt: `process continue` returns at once and
/// Ctrl-C interrupts the command, not the session), attached to `pid`,
/// with the plugin loaded, driven through `steps` and then quit. Returns
/// everything it printed (carriage returns removed) and how long the steps
/// after the first Ctrl-C took.
fn lldb_interactive(pid: u32, steps: &[Step<'_>], env: &[(&str, &str)]) -> (String, Option<Duration>) {
    use std::io::Write;
    gdb::require_ptrace();
    let lldb = std::env::var("MPIQ_LLDB").unwrap_or_else(|_| "lldb-16".into());
    let out = std::env::temp_dir().join(format!("mpiq-robustness-lldb-{}-{pid}.out", std::process::id()));
    let mut cmd = Command::new("script");
    // script(1) runs the command with `$SHELL -c` (or /bin/sh when SHELL is
    // unset, as under CI): `exec` makes lldb script's own child either way.
    cmd.args(["-qfec", &format!("exec {lldb} --no-lldbinit -p {pid}"), "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(fs::File::create(&out).expect("temp file"))
        .stderr(Stdio::inherit());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("script(1) runs lldb on a pseudo-terminal");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut type_line = |line: &str| {
        stdin.write_all(format!("{line}\n").as_bytes()).expect("type into lldb");
        stdin.flush().expect("flush");
    };
    type_line("settings set interpreter.prompt-on-quit false");
    type_line(&format!("plugin load {}", artifact("libmpiq_lldb.so").display()));
    let mut interrupted = None;
    for step in steps {
        match step {
            Step::Line(l) => type_line(l),
            Step::WaitFor(path) => {
                let deadline = Instant::now() + Duration::from_secs(60);
                while !path.exists() {
                    let text = fs::read_to_string(&out).unwrap_or_default();
                    assert!(Instant::now() < deadline, "{} never appeared:\n{text}", path.display());
                    assert!(child.try_wait().expect("try_wait").is_none(), "lldb ended:\n{text}");
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
            Step::Sleep(ms) => std::thread::sleep(Duration::from_millis(*ms)),
            Step::CtrlC => {
                // The lldb under script(1): the lldb process whose parent is script.
                let lldb_pid = fs::read_dir("/proc")
                    .expect("/proc")
                    .flatten()
                    .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                    .filter(|&p| {
                        mpiq_tests::procs::Stat::read(p)
                            .is_some_and(|s| s.ppid == child.id() && s.name.starts_with("lldb"))
                    })
                    .max()
                    .expect("lldb under script(1)");
                let ok = Command::new("kill")
                    .args(["-INT", &lldb_pid.to_string()])
                    .status()
                    .expect("kill");
                assert!(ok.success());
                interrupted = Some(Instant::now());
            }
        }
    }
    type_line("quit");
    drop(stdin);
    let status = wait_child(&mut child, RUN_TIMEOUT);
    let text = fs::read_to_string(&out).unwrap_or_default().replace('\r', "");
    let _ = fs::remove_file(&out);
    assert!(status.is_some(), "lldb did not quit:\n{text}");
    assert!(!text.contains("PLEASE submit a bug report"), "lldb crashed:\n{text}");
    (text, interrupted.map(|t| t.elapsed()))
}

fn mpiq_cmd(args: &[&str]) -> Command {
    let mut cmd = Command::new(artifact("mpiq"));
    cmd.args(args);
    cmd
}

/// Whether `pid` runs freely: not stopped (`T`), not in a tracing stop
/// (`t`), not traced.
fn assert_free(pid: u32, what: &str) {
    // The kernel may take a moment to resume a tracee whose tracer died.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (s, t) = (state(pid), tracer_pid(pid));
        if matches!(s, Some(c) if !matches!(c, 'T' | 't' | 'Z' | 'X' | 'x')) && t == Some(0) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: process {pid} is not running freely: state {s:?}, tracer {t:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The process a thread belongs to.
fn tgid(tid: u32) -> Option<u32> {
    fs::read_to_string(format!("/proc/{tid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

fn count(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

/// A running non-MPI process, killed on drop.
struct Process(Child);

impl Process {
    /// Starts `exe` and waits for its `MPIQ-READY rank=0 pid=N` line.
    fn start(exe: &Path) -> Process {
        let mut child = Command::new(exe)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", exe.display()));
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(Duration::from_secs(30)).unwrap_or_default();
        let p = Process(child);
        assert!(
            line.starts_with(&format!("MPIQ-READY rank=0 pid={}", p.pid())),
            "{} printed {line:?}",
            exe.display()
        );
        p
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
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
        fake_dll(&lib, &[format!("FAKE_MARKER={}", marker.display())]);
        match how {
            Plant::WorldWritableDir => fs::set_permissions(&lib_dir, fs::Permissions::from_mode(0o777)),
            Plant::WorldWritableFile => fs::set_permissions(&lib, fs::Permissions::from_mode(0o666)),
        }
        .expect("chmod");
        let exe = dir.path("planted");
        cc(
            &exe,
            &fixture("planted.c"),
            &["-g".into(), "-O0".into(), format!("-DPLANTED_DLL={}", lib.display())],
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
    let r = run(gdb_cmd(p.pid(), &["info mpi-queues", "echo AFTER\\n"]), RUN_TIMEOUT);
    p.assert_refused("gdb", &r);
    assert!(r.stdout.contains("AFTER"), "gdb did not go on:\n{}", r.all());
    let mut trusting = gdb_cmd(p.pid(), &["info mpi-queues"]);
    trusting.env("MPIQ_TRUST_DLL", "1");
    let r = run(trusting, RUN_TIMEOUT);
    p.assert_loaded("gdb with MPIQ_TRUST_DLL=1", &r);
}

#[test]
fn planted_library_is_refused_by_lldb() {
    let p = Planted::new("planted-lldb", Plant::WorldWritableDir);
    let r = run(lldb_cmd(&p.dir, p.pid(), &["mpi queues"]), RUN_TIMEOUT);
    p.assert_refused("lldb", &r);
    let mut trusting = lldb_cmd(&p.dir, p.pid(), &["mpi queues"]);
    trusting.env("MPIQ_TRUST_DLL", "1");
    let r = run(trusting, RUN_TIMEOUT);
    p.assert_loaded("lldb with MPIQ_TRUST_DLL=1", &r);
}

#[test]
fn planted_library_is_refused_by_the_cli() {
    for how in [Plant::WorldWritableDir, Plant::WorldWritableFile] {
        let p = Planted::new("planted-cli", how);
        let pid = p.pid().to_string();
        let r = run(mpiq_cmd(&["queues", "--pid", &pid]), RUN_TIMEOUT);
        assert!(!r.status.success(), "{how:?}: {}", r.all());
        p.assert_refused(&format!("mpiq ({how:?})"), &r);
        // The same with the helper out of the picture: still never loaded.
        let r = run(mpiq_cmd(&["queues", "--pid", &pid, "--in-process"]), RUN_TIMEOUT);
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
                Some(_) => mpiq_cmd(&["queues", "--pid", &pid]),
                None => mpiq_cmd(&["queues", "--pid", &pid, "--dll", &lib]),
            };
            if let Some(v) = var {
                cmd.env(v, &value);
            }
            let r = run(cmd, RUN_TIMEOUT);
            // The fake library has no queues: an error, but after loading.
            assert!(r.stderr.contains("fake library never has queues"), "{}", r.all());
            p.assert_loaded(&format!("mpiq {var:?}={value} ({how:?})"), &r);
        }
    }
}

// --- 2. Isolation: libraries that crash, abort or hang ---------------------------------------

/// The three misbehaving libraries, and what the report must say.
struct Fakes {
    _dir: WorkDir,
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
        fake_dll(&lib, &[define.to_string()]);
        cases.push((lib, args, words));
    }
    Fakes { _dir: dir, cases }
}

fn ring_job() -> Job {
    Job::builder(Mpi::Mpich, Example::Ring).nprocs(2).start()
}

/// A Python expression, in gdb, for the pids of gdb's `mpiq-dllhost`
/// children (needs `os` and `glob`).
const HELPER_PIDS: &str = "sorted(int(p.split('/')[2]) for p in glob.glob('/proc/[0-9]*/stat') if \
    (lambda s: '(mpiq-dllhost)' in s and s.rsplit(')', 1)[1].split()[1] == str(os.getpid()))(open(p).read()))";

/// One helper serves a gdb session's dumps (it is kept between them); one
/// that is gone by the next dump (killed here) is replaced, and the dump
/// shows the queues.
#[test]
fn a_kept_helper_serves_the_next_dump_or_is_replaced() {
    let job = ring_job();
    let list = format!("python import os, glob; print('HELPERS', {HELPER_PIDS})");
    let kill = format!("python import os, glob, signal; [os.kill(p, signal.SIGKILL) for p in {HELPER_PIDS}]");
    let r = run(
        gdb_cmd(
            job.pid_of(0),
            &[
                "info mpi-queues",
                &list,
                "info mpi-queues",
                &list,
                &kill,
                "info mpi-queues",
                &list,
            ],
        ),
        RUN_TIMEOUT,
    );
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
    let real = Mpi::Mpich.debug_library();
    let mut commands = Vec::new();
    for (i, (lib, args, _)) in f.cases.iter().enumerate() {
        commands.push(format!("info mpi-queues --dll {}{args}", lib.display()));
        commands.push(format!("echo ==AFTER-{i}==\\n"));
        commands.push(format!("info mpi-queues --dll {}", real.display()));
    }
    let commands: Vec<&str> = commands.iter().map(String::as_str).collect();
    let r = run(gdb_cmd(job.pid_of(0), &commands), RUN_TIMEOUT);
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
    let real = Mpi::Mpich.debug_library();
    let mut commands = Vec::new();
    for (lib, args, _) in &f.cases {
        commands.push(format!("mpi queues --dll {}{args}", lib.display()));
        commands.push(format!("mpi queues --dll {}", real.display()));
    }
    let commands: Vec<&str> = commands.iter().map(String::as_str).collect();
    let r = run(lldb_cmd(&f._dir, job.pid_of(0), &commands), RUN_TIMEOUT);
    assert!(
        !r.stderr.contains("PLEASE submit a bug report"),
        "lldb crashed:\n{}",
        r.all()
    );
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
        let r = run(mpiq_cmd(&argv), RUN_TIMEOUT);
        assert!(!r.status.success(), "{}", r.all());
        assert_eq!(r.status.code(), Some(1), "{}", r.all());
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
    let r = run(
        mpiq_cmd(&["queues", "--pid", &pid, "--dll", &segv, "--in-process"]),
        RUN_TIMEOUT,
    );
    assert!(!r.status.success(), "{}", r.all());
    assert_free(job.pid_of(0), "after mpiq crashed with the library in-process");
    // And the rank is still an MPI rank to dump.
    let r = run(mpiq_cmd(&["queues", "--pid", &pid]), RUN_TIMEOUT);
    assert!(
        r.status.success() && r.stdout.contains("Posted receives (1):"),
        "{}",
        r.all()
    );
}

/// `--in-process` gives the same snapshot as the helper.
#[test]
fn in_process_option_matches_the_helper() {
    for mpi in [Mpi::OpenMpi, Mpi::Mpich] {
        let job = Job::builder(mpi, Example::NamedComms).start();
        let pid = job.pid_of(1).to_string();
        let a = run(mpiq_cmd(&["queues", "--pid", &pid, "--json", "--all"]), RUN_TIMEOUT);
        let b = run(
            mpiq_cmd(&["queues", "--pid", &pid, "--json", "--all", "--in-process"]),
            RUN_TIMEOUT,
        );
        assert!(a.status.success() && b.status.success(), "{}\n{}", a.all(), b.all());
        let strip = |s: &str| {
            let v: serde_json::Value = serde_json::from_str(s).expect("JSON");
            mpiq_tests::golden::portable(v)
        };
        assert_eq!(strip(&a.stdout), strip(&b.stdout), "{mpi}");
    }
}

// --- 3. Limits ---------------------------------------------------------------------------------

/// A fake library with endless lists. It finds `MPIR_dll_name` (any readable
/// address) and, per define:
/// * (none): one communicator whose receive queue never ends, one read per operation;
/// * `ENDLESS_COMMS`: communicators that never end, all queues empty;
/// * `ENDLESS_FETCH`: one operation that reads forever (until a read fails);
/// * `ENDLESS_FAILURES`: reads an unreadable address until the error changes
///   (to mpiq's "limit" code), ignoring each failure as the real libraries do.
const ENDLESS: &str = r#"
#include <string.h>
typedef int (*fetch_ft)(void *process, unsigned long addr, int size, void *buf);
typedef int (*find_symbol_ft)(void *image, char *name, unsigned long *addr);
struct process_callbacks { void *global_rank, *get_image; fetch_ft fetch; void *target_to_host; };
struct image_callbacks { void *type_sizes, *find_function; find_symbol_ft find_symbol; void *find_type, *field_offset, *size_of; };
struct comm { unsigned long unique_id; long local_rank, size; char name[64]; };
struct op { int status; long dlr, dgr; int tag_wild; long dtag, dlen; int sysbuf; unsigned long buffer;
            long alr, agr, atag, alen; char extra[5][64]; };
static const struct process_callbacks *pcb;
static unsigned long where;
static long ncomm;
static int opclass;
void mqs_setup_basic_callbacks(const void *cb) { (void)cb; }
char *mqs_version_string(void) { return "mpiq endless lists"; }
int mqs_version_compatibility(void) { return 2; }
int mqs_dll_taddr_width(void) { return 8; }
char *mqs_dll_error_string(int code) { (void)code; return "endless error"; }
int mqs_setup_image(void *image, const void *cb) {
    const struct image_callbacks *icb = cb;
    return icb->find_symbol(image, "MPIR_dll_name", &where);
}
int mqs_image_has_queues(void *image, char **message) { (void)image; *message = 0; return 0; }
int mqs_setup_process(void *process, const void *cb) { (void)process; pcb = cb; return 0; }
int mqs_process_has_queues(void *process, char **message) { (void)process; *message = 0; return 0; }
int mqs_update_communicator_list(void *process) { (void)process; return 0; }
int mqs_setup_communicator_iterator(void *process) { (void)process; ncomm = 0; return 0; }
int mqs_get_communicator(void *process, void *c) {
    (void)process;
    struct comm *cm = c;
    memset(cm, 0, sizeof *cm);
    cm->unique_id = ncomm; cm->size = 2; strcpy(cm->name, "endless");
    return 0;
}
int mqs_next_communicator(void *process) {
    (void)process;
    ncomm++;
#ifdef ENDLESS_COMMS
    return 0;
#else
    return ncomm < 1 ? 0 : 2;
#endif
}
int mqs_setup_operation_iterator(void *process, int op) { (void)process; opclass = op; return 0; }
int mqs_next_operation(void *process, void *o) {
    char buf[8];
    int rc;
    if (opclass != 1) return 2;
#if defined(ENDLESS_COMMS)
    return 2;
#elif defined(ENDLESS_FAILURES)
    int first = pcb->fetch(process, 8, 8, buf);
    rc = first;
    while (rc == first) rc = pcb->fetch(process, 8, 8, buf);
    return 2;
#else
    rc = pcb->fetch(process, where, 8, buf);
#ifdef ENDLESS_FETCH
    while (!rc) rc = pcb->fetch(process, where, 8, buf);
#endif
    if (rc) return rc;
    struct op *op = o;
    memset(op, 0, sizeof *op);
    op->dlr = 1; op->dgr = 1; op->dtag = 7; op->dlen = 4; op->buffer = 0x1000;
    return 0;
#endif
}
"#;

/// The process snapshot `mpiq queues --json` prints with `env` set.
fn limited_dump(target: u32, lib: &Path, env: &[(&str, &str)]) -> (serde_json::Value, Run) {
    let pid = target.to_string();
    let lib = lib.display().to_string();
    let mut cmd = mpiq_cmd(&["queues", "--pid", &pid, "--dll", &lib, "--json", "--all"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let r = run(cmd, RUN_TIMEOUT);
    assert!(r.status.success(), "{}", r.all());
    let v: serde_json::Value =
        serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("no JSON ({e}):\n{}", r.all()));
    (v["processes"][0].clone(), r)
}

#[test]
fn every_limit_is_reported_when_hit() {
    let p = Planted::new("limits", Plant::WorldWritableFile);
    let endless = c_library(&p.dir, "endless", ENDLESS, &[]);
    let comms = c_library(&p.dir, "endless_comms", ENDLESS, &["ENDLESS_COMMS"]);
    let fetch = c_library(&p.dir, "endless_fetch", ENDLESS, &["ENDLESS_FETCH"]);
    let failures = c_library(&p.dir, "endless_failures", ENDLESS, &["ENDLESS_FAILURES"]);

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
    gdb::require_ptrace();
    let mut job = Job::builder(mpi, Example::Slow).start();
    let mut cmd = mpiq_cmd(&["job", "--starter", &job.starter_pid().to_string()]);
    cmd.env("MPIQ_TEST_HOLD_MS", "20000")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut mpiq = cmd.spawn().expect("start mpiq");
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
        assert!(mpiq.try_wait().expect("try_wait").is_none(), "mpiq exited early");
        std::thread::sleep(Duration::from_millis(20));
    }
    let ok = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(me.to_string())
        .status()
        .expect("kill");
    assert!(ok.success());
    let status = wait_child(&mut mpiq, Duration::from_secs(20)).expect("mpiq ended after the signal");
    let out = mpiq.wait_with_output().expect("output");
    let stderr = String::from_utf8_lossy(&out.stderr);
    use std::os::unix::process::ExitStatusExt;
    match signal {
        "KILL" => assert_eq!(status.signal(), Some(9), "{status:?}"),
        "INT" => {
            assert_eq!(status.code(), Some(130), "{status:?} {stderr}");
            assert!(stderr.contains("released"), "{stderr}");
        }
        "TERM" => assert_eq!(status.code(), Some(143), "{status:?} {stderr}"),
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
    let r = run(
        gdb_cmd(pid, &["continue &", "info mpi-queues", "echo AFTER\\n"]),
        RUN_TIMEOUT,
    );
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
    let r = run(mpiq_cmd(&["queues", "--pid", &pid.to_string()]), RUN_TIMEOUT);
    assert!(
        r.status.success() && r.stdout.contains("Posted receives (1):"),
        "{}",
        r.all()
    );
    assert_free(pid, "after mpiq");
}

/// The endless reader of tests/gdb.rs: reads a new unreadable page each
/// time until the error changes (to "interrupted"), 60 s at most; creates
/// MARKER when its loop starts.
const ENDLESS_READER: &str = include_str!("../fixtures/endless_reader.c");

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
    fake_dll(
        &spinner,
        &["FAKE_CRASH_LOOP".into(), format!("FAKE_MARKER={}", marker.display())],
    );
    let reader = c_library(
        &dir,
        "endless_reader",
        ENDLESS_READER,
        &[&format!("MARKER=\"{}\"", marker.display())],
    );
    for lib in [spinner, reader] {
        let _ = fs::remove_file(&marker);
        let lib_s = lib.display().to_string();
        let mut cmd = mpiq_cmd(&["queues", "--pid", &pid.to_string(), "--dll", &lib_s, "--timeout", "100"]);
        cmd.env("MPIQ_MAX_FAILURES", "100000000")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut mpiq = cmd.spawn().expect("mpiq");
        let deadline = Instant::now() + Duration::from_secs(60);
        while !marker.exists() {
            assert!(Instant::now() < deadline, "{lib_s} never started");
            assert!(mpiq.try_wait().expect("try_wait").is_none(), "mpiq ended early");
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
        mpiq.kill().expect("SIGKILL mpiq");
        let _ = mpiq.wait();
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
    let lib = c_library(
        &dir,
        "endless_reader",
        ENDLESS_READER,
        &[&format!("MARKER=\"{}\"", marker.display())],
    );
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
