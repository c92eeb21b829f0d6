//! The gdb front end (`gdb-python/mpiq.py`) against real MPI jobs, driven as
//! `gdb -batch -nx -ex 'source gdb-python/mpiq.py' -ex 'info mpi-queues ...'`:
//! attached with `-p`, on a process started under gdb, on a core file, on
//! several inferiors at once; the refusals, usage errors, `set mpi dll-path`,
//! Ctrl-C during a dump, and `gdb-python/selftest.py` (every callback checked
//! against gdb's own answers).
//!
//! The tests load the `libmpiq.so` of the profile they are built in
//! (`target/release/libmpiq.so` for `cargo test --release`; build it first
//! with `cargo build --release`), or `$MPIQ_LIB`.

use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use mpiq_tests::expect::{check_process, expected, thread_functions};
use mpiq_tests::fixtures::{endless_reader_at, WorkDir};
use mpiq_tests::frontends::{gdb_command_on, libmpiq, mpiq_py, workspace_root};
use mpiq_tests::job::SCRUBBED_ENV_PREFIXES;
use mpiq_tests::run::{run_within, spawn, Run};
use mpiq_tests::{gdb, Example, Job, JobDir, Mpi};

/// How long one gdb run may take.
const GDB_TIMEOUT: Duration = Duration::from_secs(120);

/// Whatever else happened, no Python exception may escape the shim: fails
/// the test if gdb printed one, else returns the run.
fn checked(run: Run) -> Run {
    run.assert_no_python_errors();
    run
}

/// `gdb -batch -nx -ex 'source mpiq.py' -ex CMD... TAIL...` with `MPIQ_LIB`
/// set ([`libmpiq`]).
fn gdb_command(commands: &[&str], tail: &[&OsStr]) -> Command {
    gdb_command_on(tail, commands)
}

/// Runs gdb (see [`gdb_command`]) within [`GDB_TIMEOUT`]; after it, gdb is
/// killed with everything it started (the ranks' debuggers, the ranks,
/// mpiq's helpers) and the test fails.
fn run_gdb(commands: &[&str], tail: &[&OsStr]) -> Run {
    checked(run_within(gdb_command(commands, tail), GDB_TIMEOUT))
}

/// gdb attached to `pid` (`-p PID`), running `commands` after sourcing mpiq.py.
fn attach(pid: u32, commands: &[&str]) -> Run {
    gdb::require_ptrace();
    let pid = pid.to_string();
    run_gdb(commands, &[OsStr::new("-p"), OsStr::new(&pid)])
}

fn ring(mpi: Mpi) -> Job {
    Job::builder(mpi, Example::Ring).nprocs(2).start()
}

// --- Attached with -p ----------------------------------------------------------

/// Text and JSON of rank 1 of a 2-rank ring, the usage errors and help, and a
/// Fortran-language session that must stay Fortran.
fn attached(mpi: Mpi) {
    let job = ring(mpi);
    let pid = job.pid_of(1);
    let g = attach(
        pid,
        &[
            "info mpi-queues",
            "echo ==JSON==\\n",
            "info mpi-queues --json",
            "echo ==HELP==\\n",
            "help info mpi-queues",
            "info mpi-queues --bogus",
            "info mpi-queues --queue nothing",
            "info mpi-queues --inferiors 9",
            "info mpi-queues --targets 3-1",
            "set language fortran",
            "echo ==FORTRAN==\\n",
            "info mpi-queues --queue receives",
            "show language",
        ],
    );
    let (text, rest) = g.stdout.split_once("==JSON==").unwrap_or_else(|| panic!("{g}"));
    let (json, rest) = rest.split_once("==HELP==").unwrap_or_else(|| panic!("{g}"));
    let (help, fortran) = rest.split_once("==FORTRAN==").unwrap_or_else(|| panic!("{g}"));

    for needle in [
        format!("Process pid {pid}, rank 1:"),
        "Communicator 'MPI_COMM_WORLD'".into(),
        "Posted receives (1):".into(),
        "from rank 0  tag 101".into(),
    ] {
        assert!(text.contains(&needle), "`{needle}` not in the text view:\n{g}");
    }
    for needle in [
        "\"schema\": \"mpiq.snapshot/2\"".to_string(),
        format!("\"pid\": {pid}"),
        "\"world_rank\": 1".into(),
        "\"tag\": 101".into(),
        "\"error\": null".into(),
    ] {
        assert!(json.contains(&needle), "`{needle}` not in the JSON:\n{g}");
    }
    for needle in ["--json", "--comm NAME|ID", "--stats", "--inferiors", "set mpi dll-path"] {
        assert!(help.contains(needle), "`{needle}` not in `help info mpi-queues`:\n{g}");
    }
    g.assert_stderr("unknown argument '--bogus'");
    g.assert_stderr("unknown queue 'nothing'");
    g.assert_stderr("no inferior 9");
    // The bridge's parser, as lldb's (tests/lldb.rs).
    g.assert_stderr("--targets: the range '3-1' ends below its start; write it low-high (1-3)");
    assert!(
        fortran.contains("Posted receives (1):"),
        "no dump in a Fortran session:\n{g}"
    );
    assert!(
        fortran.contains("The current source language is \"fortran\""),
        "language not restored:\n{g}"
    );
    assert!(Job::is_running(pid), "gdb detached and rank 1 runs on");
}

#[test]
fn attached_openmpi() {
    attached(Mpi::OpenMpi);
}

#[test]
fn attached_mpich() {
    attached(Mpi::Mpich);
}

// --- selftest.py -----------------------------------------------------------------

fn selftest(mpi: Mpi) {
    let job = ring(mpi);
    gdb::require_ptrace();
    let pid = job.pid_of(0).to_string();
    let script = workspace_root().join("gdb-python/selftest.py");
    let mut cmd = Command::new("gdb");
    cmd.args(["-batch", "-nx", "-ex"])
        .arg(format!("source {}", script.display()))
        .args(["-p", &pid]);
    let g = checked(run_within(cmd, GDB_TIMEOUT));
    assert!(g.success && !g.stdout.contains("FAIL"), "selftest failed:\n{g}");
    g.assert_stdout("checks passed");
}

#[test]
fn selftest_openmpi() {
    selftest(Mpi::OpenMpi);
}

#[test]
fn selftest_mpich() {
    selftest(Mpi::Mpich);
}

// --- Several inferiors ---------------------------------------------------------------

#[test]
fn several_inferiors() {
    let job = ring(Mpi::Mpich);
    let (p0, p1) = (job.pid_of(0).to_string(), job.pid_of(1).to_string());
    gdb::require_ptrace();
    let g = run_gdb(
        &[
            &format!("attach {p0}"),
            "add-inferior",
            "inferior 2",
            &format!("attach {p1}"),
            "inferior 1",
            "info mpi-queues --inferiors all --json",
            "info mpi-queues --inferiors 2 --queue receives",
            "info inferiors",
            "detach inferiors 1 2",
        ],
        &[],
    );
    for needle in [
        format!("\"pid\": {p0}"),
        format!("\"pid\": {p1}"),
        "\"tag\": 100".into(),
    ] {
        g.assert_stdout(&needle);
    }
    g.assert_stdout(&format!("Process pid {p1}, rank 1:"));
    g.assert_stdout("from rank 0  tag 101");
    // The user's selection is back: inferior 1 is current.
    assert!(
        g.stdout.lines().any(|l| l.starts_with("* 1 ")),
        "inferior 1 is no longer selected:\n{g}"
    );
}

/// Debian's Open MPI has no debug info: `MPIR_dll_name` must still be found
/// (ELF symbol table), so that the debug library loads and names the type it
/// misses.
#[test]
fn stripped_openmpi_loads_its_debug_library() {
    if !Mpi::DebianOpenMpi.is_installed() {
        eprintln!("SKIPPED: Debian's Open MPI (openmpi-bin, libopenmpi-dev) is not installed");
        return;
    }
    let job = ring(Mpi::DebianOpenMpi);
    let g = attach(job.pid_of(0), &["info mpi-queues"]);
    // The library ran and found its type missing: said in the report (the
    // error, and the library's own warning as a note), never by the
    // library on the debugger's stderr (issue 41).
    g.assert_stdout("opal_list_item_t");
    g.assert_stdout("note: the debug library printed: WARNING: ");
    assert!(!g.stderr.contains("unable to find debugging information"), "{g}");
    assert!(!g.stdout.contains("Posted receives"), "queues without debug info?\n{g}");
}

// --- A core file ---------------------------------------------------------------------

/// The JSON snapshot in gdb's stdout (from a line "{" to a line "}").
fn snapshot_json(g: &Run) -> &str {
    let start = g.stdout.find("{\n").unwrap_or_else(|| panic!("no JSON:\n{g}"));
    let len = g.stdout[start..]
        .find("\n}\n")
        .unwrap_or_else(|| panic!("unterminated JSON:\n{g}"));
    &g.stdout[start..start + len + 3]
}

#[test]
fn core_file_matches_live_process() {
    let job = ring(Mpi::OpenMpi);
    let dir = WorkDir::new("gdb-core");
    let core = dir.path("rank0.core");
    let live = attach(
        job.pid_of(0),
        &[
            &format!("gcore {}", core.display()),
            "info mpi-queues --json --no-stacks",
        ],
    );
    assert!(core.is_file(), "gcore wrote no core:\n{live}");
    // The queues (the stacks of a core may name fewer threads).
    let from_core = run_gdb(
        &["info mpi-queues --json --no-stacks"],
        &[job.exe().as_os_str(), core.as_os_str()],
    );
    assert_eq!(
        snapshot_json(&live),
        snapshot_json(&from_core),
        "the core file's snapshot differs from the live process's"
    );
    from_core.assert_stdout("\"tag\": 100");
    from_core.assert_stdout(&format!("\"pid\": {}", job.pid_of(0)));
}

// --- A process started under gdb -------------------------------------------------------

/// Every rank runs under its own gdb (`mpiexec -n 2 gdb ... --args ring`),
/// stops at `pause()` after MPIQ-READY, and dumps its queues. Each gdb
/// writes its dump to a file of its own (`pipe ... | cat > FILE`): killing
/// a rank ends the job, and the starter may then drop what the other rank's
/// gdb printed but it had not forwarded yet.
fn started_under_gdb(mpi: Mpi) {
    let exe = mpiq_tests::build_example(mpi, Example::Ring);
    let mpiq = format!("source {}", mpiq_py().display());
    let dir = WorkDir::new(&format!("gdb-under-gdb-{mpi:?}"));
    // `$PPID` in gdb's shell is that gdb: one file per rank.
    let dump = format!(
        "pipe info mpi-queues | cat > {d}/dump.$PPID.txt; touch {d}/done.$PPID",
        d = dir.root().display()
    );
    // Both ranks must dump before either dies: a dead rank takes the job down.
    let barrier = format!(
        "shell i=0; while [ $(ls {d} | grep -c '^done') -lt 2 ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done",
        d = dir.root().display()
    );
    let args: Vec<&OsStr> = [
        "-batch",
        "-nx",
        "-ex",
        mpiq.as_str(),
        "-ex",
        "break pause",
        "-ex",
        "run",
        "-ex",
        dump.as_str(),
        "-ex",
        barrier.as_str(),
        "-ex",
        "kill",
        "--args",
    ]
    .into_iter()
    .map(OsStr::new)
    .chain([exe.as_os_str()])
    .collect();
    let mut cmd = mpi.starter_command(2, Path::new("gdb"), &args);
    for (key, _) in std::env::vars_os() {
        if key
            .to_str()
            .is_some_and(|k| SCRUBBED_ENV_PREFIXES.iter().any(|p| k.starts_with(p)))
        {
            cmd.env_remove(&key);
        }
    }
    cmd.env("MPIQ_LIB", libmpiq()).env("MPIQ_EXAMPLE_LIFETIME", "120");
    let job_dir = JobDir::new();
    job_dir.apply(&mut cmd);
    let g = checked(run_within(cmd, GDB_TIMEOUT));
    let mut dumps = String::new();
    for entry in std::fs::read_dir(dir.root()).expect("the dump directory").flatten() {
        if entry.file_name().to_string_lossy().starts_with("dump.") {
            dumps += &std::fs::read_to_string(entry.path()).expect("a dump file");
        }
    }
    for rank in [0, 1] {
        assert!(
            dumps
                .lines()
                .any(|l| l.starts_with("Process pid ") && l.contains(&format!(", rank {rank}:"))),
            "no dump of rank {rank}:\n{dumps}\n{g}"
        );
    }
    assert_eq!(dumps.matches("Posted receives (1):").count(), 2, "{dumps}\n{g}");
}

#[test]
fn started_under_gdb_openmpi() {
    started_under_gdb(Mpi::OpenMpi);
}

#[test]
fn started_under_gdb_mpich() {
    started_under_gdb(Mpi::Mpich);
}

// --- Refusals and errors without MPI --------------------------------------------------

/// libmpiq keeps gdb's answers to questions by name (symbols, types,
/// fields) between dumps, under the inferior's identity: its number, its
/// pid and a generation bumped on every objfile event. A second dump of the
/// same process (answered from the cache) equals the first; the same
/// inferior detached and attached to another run of the program (its
/// libraries loaded elsewhere) gets that process's own answers.
fn answers_follow_the_process(mpi: Mpi) {
    let a = ring(mpi);
    let b = ring(mpi);
    let dir = WorkDir::new(&format!("gdb-answers-{mpi:?}"));
    let file = |name: &str| dir.path(name).display().to_string();
    let commands = [
        format!("pipe info mpi-queues --json | cat > {}", file("a1.json")),
        format!("pipe info mpi-queues --json | cat > {}", file("a2.json")),
        "detach".to_string(),
        format!("attach {}", b.pid_of(1)),
        format!("pipe info mpi-queues --json --in-process | cat > {}", file("b.json")),
    ];
    let commands: Vec<&str> = commands.iter().map(String::as_str).collect();
    let run = attach(a.pid_of(1), &commands);
    assert!(run.success, "{run}");
    let read = |name: &str| -> serde_json::Value {
        let text = std::fs::read_to_string(file(name)).unwrap_or_else(|e| panic!("{name}: {e}\n{run}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}\n{text}"))
    };
    let (a1, a2, b1) = (read("a1.json"), read("a2.json"), read("b.json"));
    assert_eq!(
        mpiq_tests::golden::portable(a1.clone()),
        mpiq_tests::golden::portable(a2),
        "a second dump of the same process differs"
    );
    for (snapshot, job) in [(&a1, &a), (&b1, &b)] {
        let p = &snapshot["processes"][0];
        assert_eq!(p["pid"], job.pid_of(1), "{p:#}");
        let exp = expected(Example::Ring, mpi, 1, 2, Example::Ring.default_args());
        if let Err(e) = check_process(p, &exp, mpi) {
            panic!("ring under {mpi}, rank 1 of job {}:\n{e}\n{p:#}", job.starter_pid());
        }
    }
}

#[test]
fn answers_follow_the_process_openmpi() {
    answers_follow_the_process(Mpi::OpenMpi);
}

#[test]
fn answers_follow_the_process_mpich() {
    answers_follow_the_process(Mpi::Mpich);
}

/// `--stacks`: every thread's call stack from gdb's own unwinder, in the
/// snapshot, with the rank's main thread in `main` and `pause` (where the
/// examples wait); the thread selected before the dump is selected after.
fn stacks_from_gdb(mpi: Mpi) {
    let job = ring(mpi);
    let pid = job.pid_of(1);
    let run = attach(pid, &["info mpi-queues --json --stacks", "thread"]);
    assert!(run.success, "{run}");
    let v = run.json().unwrap_or_else(|e| panic!("{e}"));
    let functions = thread_functions(&v, pid);
    assert_eq!(functions.last().map(String::as_str), Some("main"), "{functions:?}");
    assert!(functions.iter().any(|f| f.contains("pause")), "{functions:?}");
    assert!(
        run.stdout.contains(&format!("(LWP {pid})")),
        "the selection moved:\n{run}"
    );
}

#[test]
fn stacks_from_gdb_openmpi() {
    stacks_from_gdb(Mpi::OpenMpi);
}

#[test]
fn stacks_from_gdb_mpich() {
    stacks_from_gdb(Mpi::Mpich);
}

#[test]
fn refuses_without_a_stopped_process() {
    let sleep = OsStr::new("/bin/sleep");
    let g = run_gdb(
        &["info mpi-queues", "run &", "info mpi-queues", "interrupt", "kill"],
        &[OsStr::new("--args"), sleep, OsStr::new("60")],
    );
    // (gdb sometimes capitalizes the first letter of an error message.)
    let stderr = g.stderr.to_lowercase();
    for needle in [
        "no process: run, attach or load a core file",
        "the process is running; interrupt it first",
    ] {
        assert!(stderr.contains(needle), "`{needle}` not in gdb's stderr:\n{g}");
    }

    // Stopped, but no MPI in it: one gdb error line, no Python noise.
    let g = run_gdb(
        &["starti", "info mpi-queues", "echo AFTER\\n", "kill"],
        &[OsStr::new("--args"), sleep, OsStr::new("60")],
    );
    g.assert_stdout("AFTER");
    assert!(
        !g.stdout.contains("Process pid"),
        "a snapshot of a non-MPI process:\n{g}"
    );
    assert!(
        g.stderr.lines().any(|l| !l.trim().is_empty()),
        "no error for a non-MPI process:\n{g}"
    );
}

#[test]
fn says_how_to_build_a_missing_library() {
    let mut cmd = gdb_command(&["info mpi-queues", "help info mpi-queues"], &[]);
    cmd.env("MPIQ_LIB", "/nonexistent/libmpiq.so");
    let g = checked(run_within(cmd, GDB_TIMEOUT));
    g.assert_stderr("libmpiq.so not found");
    g.assert_stderr("cargo build --release");
    g.assert_stdout("--inferiors");
}

// --- set mpi dll-path ------------------------------------------------------------------

#[test]
fn dll_path_setting() {
    let job = ring(Mpi::Mpich);
    let real = Mpi::Mpich.debug_library().expect("has a debug library");
    let g = attach(
        job.pid_of(0),
        &[
            "set mpi dll-path /nonexistent/libnothing.so",
            "show mpi dll-path",
            "info mpi-queues",
            "echo ==EXPLICIT==\\n",
            &format!("info mpi-queues --dll {}", real.display()),
            "echo ==SET==\\n",
            &format!("set mpi dll-path {}", real.display()),
            "info mpi-queues",
            "set mpi dll-path",
            "show mpi dll-path",
        ],
    );
    g.assert_stdout("/nonexistent/libnothing.so");
    g.assert_stderr("/nonexistent/libnothing.so");
    let (_, rest) = g.stdout.split_once("==EXPLICIT==").unwrap_or_else(|| panic!("{g}"));
    let (explicit, set) = rest.split_once("==SET==").unwrap_or_else(|| panic!("{g}"));
    assert!(
        explicit.contains("Posted receives (1):"),
        "--dll wins over the setting:\n{g}"
    );
    assert!(
        set.contains("Posted receives (1):"),
        "the setting's library is used:\n{g}"
    );
    assert!(set.contains("MPIR_dll_name"), "show mpi dll-path after unsetting:\n{g}");
}

// --- Ctrl-C ---------------------------------------------------------------------------

/// `fixtures/endless_reader.c`: a debug library that reads unreadable memory
/// (a new low page each time, so that no cache can answer) in a loop until
/// the error it gets changes (to mpiq's "interrupted"), 60 s at most. It
/// creates the marker file when the loop starts.
#[test]
fn ctrl_c_stops_a_dump() {
    let dir = WorkDir::new("gdb-ctrl-c");
    let lib = dir.path("libendless.so");
    let marker = dir.path("looping");
    endless_reader_at(&lib, &marker);

    let job = ring(Mpi::Mpich);
    gdb::require_ptrace();
    let pid = job.pid_of(0).to_string();
    let child = spawn(gdb_command(
        &[
            &format!("info mpi-queues --dll {}", lib.display()),
            "echo AFTER\\n",
            "info mpi-queues",
        ],
        &[OsStr::new("-p"), OsStr::new(&pid)],
    ));
    let deadline = Instant::now() + Duration::from_secs(60);
    while !marker.exists() {
        assert!(Instant::now() < deadline, "the endless reader never started");
        thread::sleep(Duration::from_millis(50));
    }
    thread::sleep(Duration::from_millis(500)); // well inside the loop of callbacks
    child.signal("INT");
    let g = checked(child.wait_within(GDB_TIMEOUT));
    assert!(
        g.stderr.lines().any(|l| l.starts_with("interrupted")),
        "no `interrupted` error:\n{g}"
    );
    let (_, after) = g
        .stdout
        .split_once("AFTER")
        .unwrap_or_else(|| panic!("gdb did not go on:\n{g}"));
    assert!(after.contains("Posted receives (1):"), "the next dump failed:\n{g}");
}
