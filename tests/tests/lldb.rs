//! The LLDB plugin against real MPI jobs: `lldb-16 -b -o 'plugin load …' -o 'mpi queues
//! --json' -p PID`, one LLDB target per rank, checked against what each example documents
//! (`mpiq_tests::expect`); a core file; the `mpi lookup` diagnostic compared with gdb; and
//! the error paths (bad arguments, no process, a running process).
//!
//! Like the other front-end tests, these use the artifacts of the running test's cargo
//! profile (`cargo build --workspace [--release]` first; `scripts/test` does): the plugin
//! `libmpiq_lldb.so` and the `mpiq-dllhost` helper next to it. `MPIQ_LLDB_PLUGIN` names
//! another plugin, `MPIQ_LLDB` another lldb binary (default `lldb-16`).

use std::fs;
use std::time::Duration;

use mpiq_tests::expect::{check_process, expected, thread_functions};
use mpiq_tests::frontends::{lldb_command_on, lldb_command_sourcing, lldb_plugin, run_lldb};
use mpiq_tests::run::{run, Run};
use mpiq_tests::{gdb, Example, Job, Mpi};
use serde_json::Value;

/// How long one lldb run may take before the test kills it and fails.
const LLDB_TIMEOUT: Duration = Duration::from_secs(180);

/// The mangled name of `bool lldb::PluginInitialize(lldb::SBDebugger)`.
const PLUGIN_INITIALIZE: &str = "_ZN4lldb16PluginInitializeENS_10SBDebuggerE";

/// Runs lldb (`$MPIQ_LLDB`, default `lldb-16`) `-b` with the plugin
/// (`$MPIQ_LLDB_PLUGIN`, or the build's) loaded, then `commands`, on whatever
/// `target_args` give (`-p PID`, `-c CORE EXE`, `EXE`, or nothing), within
/// [`LLDB_TIMEOUT`]; fails the test if lldb crashed. lldb detaches from
/// attached processes when it quits, so the job runs on.
fn lldb(target_args: &[&str], commands: &[&str]) -> Run {
    run_lldb(lldb_command_on(target_args, commands), LLDB_TIMEOUT)
}

/// Checks process `p` of a snapshot: it is world rank `rank` (pid `pid`) of an `n`-rank job of
/// `example`, and its queues are exactly what the example documents.
fn check_rank(p: &Value, example: Example, mpi: Mpi, rank: usize, n: usize, pid: u32) {
    assert_eq!(p["pid"], pid, "{p:#}");
    assert_eq!(p["world_rank"], rank, "{p:#}");
    let exp = expected(example, mpi, rank as i64, n as i64, example.default_args());
    if let Err(e) = check_process(p, &exp, mpi) {
        panic!("{example} under {mpi}, rank {rank} via lldb:\n{e}\n--- snapshot ---\n{p:#}");
    }
}

/// Attaches to every rank of a job in one lldb session (rank r is target #r), then dumps
/// the selected target (with the debug library in the `mpiq-dllhost` helper, and inside
/// LLDB), all targets at once, and two of them in reverse order.
fn all_ranks(mpi: Mpi, example: Example) {
    gdb::require_ptrace();
    let Some(job) = Job::builder(mpi, example).start_supported() else {
        return;
    };
    let n = job.nprocs();
    let exe = job.exe().display().to_string();
    let pid0 = job.pid_of(0).to_string();
    let mut commands: Vec<String> = Vec::new();
    for rank in 1..n {
        commands.push(format!("target create {exe}"));
        commands.push(format!("process attach --pid {}", job.pid_of(rank)));
    }
    let reversed = format!("mpi queues --targets {},0", n - 1);
    commands.extend([
        "target select 0".to_string(),
        "mpi queues --json".to_string(),
        "mpi queues --json --in-process".to_string(),
        "mpi queues --json --targets all".to_string(),
        reversed.clone(),
    ]);
    let commands: Vec<&str> = commands.iter().map(String::as_str).collect();
    let run = lldb(&["-p", &pid0], &commands);
    assert!(run.success, "{run}");

    let one = run.lldb_json_of("mpi queues --json");
    let procs = one["processes"].as_array().expect("processes");
    assert_eq!(procs.len(), 1, "the selected target only: {one:#}");
    check_rank(&procs[0], example, mpi, 0, n, job.pid_of(0));
    let messages = procs[0]["messages"].to_string();
    assert!(
        !messages.contains("mpiq-dllhost"),
        "the helper must run the library: {messages}"
    );

    let inside = run.lldb_json_of("mpi queues --json --in-process");
    check_rank(&inside["processes"][0], example, mpi, 0, n, job.pid_of(0));

    let all = run.lldb_json_of("mpi queues --json --targets all");
    let procs = all["processes"].as_array().expect("processes");
    assert_eq!(procs.len(), n, "one process per target: {all:#}");
    for (rank, p) in procs.iter().enumerate() {
        check_rank(p, example, mpi, rank, n, job.pid_of(rank));
    }

    let text = run.lldb_output_of(&reversed);
    let last = text.find(&format!("pid {},", job.pid_of(n - 1)));
    let first = text.find(&format!("pid {},", job.pid_of(0)));
    assert!(
        last.is_some() && first.is_some() && last < first,
        "`{reversed}` shows rank {} first:\n{text}",
        n - 1
    );
}

mpiq_tests::per_example! { all_ranks;
    openmpi_ring: OpenMpi, Ring;
    openmpi_named_comms: OpenMpi, NamedComms;
    openmpi_unexpected: OpenMpi, Unexpected;
    openmpi_deadlock: OpenMpi, Deadlock;
    openmpi_many_ops: OpenMpi, ManyOps;
    mpich_ring: Mpich, Ring;
    mpich_named_comms: Mpich, NamedComms;
    mpich_unexpected: Mpich, Unexpected;
    mpich_deadlock: Mpich, Deadlock;
    mpich_many_ops: Mpich, ManyOps;
    mpich_sessions: Mpich, Sessions;
    openmpi5_ring: OpenMpi5, Ring;
    openmpi5_named_comms: OpenMpi5, NamedComms;
    openmpi5_unexpected: OpenMpi5, Unexpected;
    openmpi5_deadlock: OpenMpi5, Deadlock;
    openmpi5_many_ops: OpenMpi5, ManyOps;
    openmpi5_sessions: OpenMpi5, Sessions;
    mpich_ch4_ring: MpichCh4, Ring;
    mpich_ch4_named_comms: MpichCh4, NamedComms;
    mpich_ch4_unexpected: MpichCh4, Unexpected;
    mpich_ch4_deadlock: MpichCh4, Deadlock;
    mpich_ch4_many_ops: MpichCh4, ManyOps;
    mpich_ch4_sessions: MpichCh4, Sessions;
}

/// `gcore` a rank with gdb, then `lldb -c CORE EXE` and `mpi queues --json`.
fn core_file(mpi: Mpi) {
    gdb::require_ptrace();
    let job = Job::builder(mpi, Example::NamedComms).start();
    let pid = job.pid_of(1);
    let core = std::env::temp_dir().join(format!("mpiq-lldb-test-{}-{}.core", std::process::id(), mpi.name()));
    let out = gdb::batch(pid, &[&format!("gcore {}", core.display())]);
    assert!(core.is_file(), "gdb made no core file:\n{out}");
    let exe = job.exe().display().to_string();
    let run = lldb(&["-c", &core.display().to_string(), &exe], &["mpi queues --json"]);
    let _ = fs::remove_file(&core);
    assert!(run.success, "{run}");
    let json = run.lldb_json_of("mpi queues --json");
    let procs = json["processes"].as_array().expect("processes");
    assert_eq!(procs.len(), 1, "{json:#}");
    check_rank(&procs[0], Example::NamedComms, mpi, 1, job.nprocs(), pid);
}

#[test]
fn openmpi_core_file() {
    core_file(Mpi::OpenMpi);
}

#[test]
fn mpich_core_file() {
    core_file(Mpi::Mpich);
}

#[test]
fn openmpi5_core_file() {
    core_file(Mpi::OpenMpi5);
}

#[test]
fn mpich_ch4_core_file() {
    core_file(Mpi::MpichCh4);
}

/// The first `0x...` number in `text` after `after`.
fn hex_after(text: &str, after: &str) -> Option<u64> {
    let rest = &text[text.find(after)? + after.len()..];
    let start = rest.find("0x")? + 2;
    let digits: String = rest[start..].chars().take_while(char::is_ascii_hexdigit).collect();
    u64::from_str_radix(&digits, 16).ok()
}

/// gdb's value for `print EXPR` (`$N = VALUE`): the first number of the value.
fn gdb_number(stdout: &str, index: usize) -> u64 {
    let prefix = format!("${index} = ");
    let line = stdout
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no {prefix} in gdb's output:\n{stdout}"));
    let value = &line[prefix.len()..];
    if let Some(addr) = hex_after(value, "") {
        return addr;
    }
    value
        .split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no number in gdb's `{line}`"))
}

/// `mpi lookup` answers what gdb answers: symbol addresses, type sizes, field offsets.
fn lookup_matches_gdb(mpi: Mpi, symbols: &[&str], types: &[(&str, &[&str])]) {
    gdb::require_ptrace();
    let job = Job::builder(mpi, Example::NamedComms).start();
    let pid = job.pid_of(0);

    let mut lldb_cmds = vec![
        format!("mpi lookup symbol {}", symbols.join(" ")),
        "mpi lookup sizes".into(),
    ];
    let mut gdb_cmds = Vec::new();
    for s in symbols {
        gdb_cmds.push(format!("print &{s}"));
    }
    for (ty, fields) in types {
        lldb_cmds.push(format!("mpi lookup type '{ty}' {}", fields.join(" ")));
        gdb_cmds.push(format!("print sizeof({ty})"));
        for f in *fields {
            gdb_cmds.push(format!("print &(({ty} *) 0)->{f}"));
        }
    }
    let lldb_refs: Vec<&str> = lldb_cmds.iter().map(String::as_str).collect();
    let run = lldb(&["-p", &pid.to_string()], &lldb_refs);
    assert!(run.success, "{run}");
    let gdb_refs: Vec<&str> = gdb_cmds.iter().map(String::as_str).collect();
    let gdb_out = gdb::batch(pid, &gdb_refs).stdout;

    let mut n = 0;
    let mut next = || {
        n += 1;
        gdb_number(&gdb_out, n)
    };
    let symbols_out = run.lldb_output_of(&lldb_cmds[0]);
    for s in symbols {
        let ours = hex_after(&symbols_out, &format!("symbol {s}: "));
        assert_eq!(
            ours,
            Some(next()),
            "address of {s}:\n{symbols_out}\n--- gdb ---\n{gdb_out}"
        );
    }
    let sizes = run.lldb_output_of("mpi lookup sizes");
    assert!(sizes.contains("short 2 int 4 long 8 long long 8 pointer 8"), "{sizes}");
    assert!(sizes.contains("byte order Little"), "{sizes}");
    assert!(sizes.contains(&format!("pid {pid}")), "{sizes}");
    for (i, (ty, fields)) in types.iter().enumerate() {
        let out = run.lldb_output_of(&lldb_cmds[2 + i]);
        let size = next();
        assert!(
            out.contains(&format!(", size {size}")),
            "sizeof({ty}) is {size}:\n{out}"
        );
        for f in *fields {
            let offset = next();
            assert!(
                out.contains(&format!("  {f}: offset {offset}\n")) || out.ends_with(&format!("  {f}: offset {offset}")),
                "offsetof({ty}, {f}) is {offset}:\n{out}"
            );
        }
    }
}

#[test]
fn openmpi_lookup_matches_gdb() {
    lookup_matches_gdb(
        Mpi::OpenMpi,
        &[
            "MPIR_dll_name",
            "ompi_mpi_communicators",
            "mca_pml_base_send_requests",
            "MPIR_debug_typedefs_sizeof",
        ],
        &[
            (
                "ompi_communicator_t",
                &["c_name", "c_contextid", "c_my_rank", "c_local_group"],
            ),
            ("opal_list_t", &["opal_list_sentinel", "opal_list_length"]),
            ("struct mca_pml_base_request_t", &["req_peer", "req_tag", "req_comm"]),
        ],
    );
}

#[test]
fn mpich_lookup_matches_gdb() {
    lookup_matches_gdb(
        Mpi::Mpich,
        &[
            "MPIR_dll_name",
            "MPIR_All_communicators",
            "MPID_Recvq_posted_head_ptr",
            "MPIR_Sendq_head",
        ],
        &[
            ("MPIR_Comm", &["handle", "name", "context_id", "rank", "local_size"]),
            ("MPIR_Request", &["handle", "kind", "dev"]),
            ("MPIR_Comm_list", &["head"]),
        ],
    );
}

/// Failing commands print one `error:` line each and leave the session usable: a bad
/// argument, `--dll` naming no library, a bad `--targets`, then a dump that works.
fn errors_leave_session_usable(mpi: Mpi) {
    gdb::require_ptrace();
    let job = Job::builder(mpi, Example::NamedComms).start();
    let script = std::env::temp_dir().join(format!("mpiq-lldb-test-{}-{}.lldb", std::process::id(), mpi.name()));
    let cmd = lldb_command_sourcing(
        &script,
        &["-p", &job.pid_of(2).to_string()],
        &[
            "mpi queues --frobnicate",
            "mpi queues --dll /nonexistent/libnothing.so",
            "mpi queues --targets 7",
            "mpi queues --targets x",
            "mpi queues --targets 3-1",
            "mpi queues --json",
        ],
    );
    let run = run_lldb(cmd, LLDB_TIMEOUT);
    let _ = fs::remove_file(&script);
    assert!(run.success, "{run}");
    let errors: Vec<&str> = run.stderr.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(errors.len(), 5, "one error per failing command:\n{run}");
    assert!(errors[0].contains("unknown argument '--frobnicate'"), "{run}");
    assert!(errors[1].contains("libnothing.so"), "{run}");
    assert!(errors[2].contains("no target #7"), "{run}");
    assert!(errors[3].contains("'x'"), "{run}");
    // The bridge's parser, as gdb's (tests/gdb.rs).
    assert!(
        errors[4].contains("--targets: the range '3-1' ends below its start; write it low-high (1-3)"),
        "{run}"
    );
    let json = run.lldb_json_of("mpi queues --json");
    check_rank(
        &json["processes"][0],
        Example::NamedComms,
        mpi,
        2,
        job.nprocs(),
        job.pid_of(2),
    );
}

#[test]
fn openmpi_errors_leave_session_usable() {
    errors_leave_session_usable(Mpi::OpenMpi);
}

#[test]
fn mpich_errors_leave_session_usable() {
    errors_leave_session_usable(Mpi::Mpich);
}

/// The plugin keeps what LLDB answered to questions by name (symbols, types,
/// fields) between commands, per target. The same target detached and
/// attached to another run of the same program (its libraries loaded
/// elsewhere) must get fresh answers: both dumps and both symbol addresses
/// are those of their own process.
fn answers_follow_the_process(mpi: Mpi) {
    gdb::require_ptrace();
    let a = Job::builder(mpi, Example::Ring).start();
    let b = Job::builder(mpi, Example::Ring).start();
    let attach_b = format!("process attach --pid {}", b.pid_of(0));
    let run = lldb(
        &["-p", &a.pid_of(0).to_string()],
        &[
            "mpi queues --json",
            "mpi lookup symbol MPIR_dll_name",
            "process detach",
            &attach_b,
            "mpi queues --json --in-process",
            "mpi lookup function MPI_Init MPI_Finalize",
            "mpi lookup symbol MPIR_dll_name MPIR_proctable",
        ],
    );
    assert!(run.success, "{run}");
    let first = run.lldb_json_of("mpi queues --json");
    check_rank(&first["processes"][0], Example::Ring, mpi, 0, a.nprocs(), a.pid_of(0));
    let second = run.lldb_json_of("mpi queues --json --in-process");
    check_rank(&second["processes"][0], Example::Ring, mpi, 0, b.nprocs(), b.pid_of(0));
    let address = |command: &str| {
        let text = run.lldb_output_of(command);
        hex_after(&text, "symbol MPIR_dll_name: ").unwrap_or_else(|| panic!("no address:\n{run}"))
    };
    let (in_a, in_b) = (
        address("mpi lookup symbol MPIR_dll_name"),
        address("mpi lookup symbol MPIR_dll_name MPIR_proctable"),
    );
    let gdb_b = gdb::batch(b.pid_of(0), &["print &MPIR_dll_name"]).stdout;
    assert_eq!(
        in_b,
        gdb_number(&gdb_b, 1),
        "process B's MPIR_dll_name:\n{run}\n--- gdb ---\n{gdb_b}"
    );
    let randomized = fs::read_to_string("/proc/sys/kernel/randomize_va_space").is_ok_and(|s| s.trim() != "0");
    if randomized {
        assert_ne!(in_a, in_b, "two runs, one address: the libraries did not move?\n{run}");
    } else {
        eprintln!("NOTE: address space randomization is off: both runs load the libraries at one address");
    }
}

#[test]
fn openmpi_answers_follow_the_process() {
    answers_follow_the_process(Mpi::OpenMpi);
}

#[test]
fn mpich_answers_follow_the_process() {
    answers_follow_the_process(Mpi::Mpich);
}

/// `--stacks`: every thread's call stack from LLDB's unwinder, in the
/// snapshot, with the rank's main thread in `main` and `pause` (where the
/// examples wait), like gdb's (`gdb.rs`, `stacks_from_gdb_*`).
fn stacks_from_lldb(mpi: Mpi) {
    gdb::require_ptrace();
    let job = Job::builder(mpi, Example::Ring).nprocs(2).start();
    let pid = job.pid_of(1);
    let run = lldb(&["-p", &pid.to_string()], &["mpi queues --json --stacks"]);
    assert!(run.success, "{run}");
    let v = run.lldb_json_of("mpi queues --json --stacks");
    let functions = thread_functions(&v, pid);
    assert!(functions.iter().any(|f| f == "main"), "{functions:?}");
    assert!(functions.iter().any(|f| f.contains("pause")), "{functions:?}");
}

#[test]
fn openmpi_stacks_from_lldb() {
    stacks_from_lldb(Mpi::OpenMpi);
}

#[test]
fn mpich_stacks_from_lldb() {
    stacks_from_lldb(Mpi::Mpich);
}

#[test]
fn exports_plugin_initialize() {
    let out = run(std::process::Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(lldb_plugin()));
    assert!(out.success, "{out}");
    let symbols = &out.stdout;
    assert!(
        symbols.lines().any(|l| l.ends_with(&format!(" T {PLUGIN_INITIALIZE}"))),
        "{PLUGIN_INITIALIZE} is not exported:\n{symbols}"
    );
}

#[test]
fn help_lists_every_option() {
    let run = lldb(&[], &["help mpi", "help mpi queues"]);
    assert!(run.success, "{run}");
    let mpi = run.lldb_output_of("help mpi");
    assert!(mpi.contains("queues --") && mpi.contains("lookup --"), "{mpi}");
    let help = run.lldb_output_of("help mpi queues");
    for opt in [
        "--json",
        "--all",
        "--comm NAME|ID",
        "--queue Q",
        "--dll FILE",
        "--stats",
        "--targets",
    ] {
        assert!(help.contains(opt), "`help mpi queues` lacks {opt}:\n{help}");
    }
    assert!(
        help.contains("\n  --targets T "),
        "the --targets line is indented like the others:\n{help}"
    );
}

#[test]
fn needs_a_process() {
    let run = lldb(&[], &["mpi queues"]);
    assert!(!run.success, "{run}");
    assert!(run.stderr.contains("error: there is no target"), "{run}");
    let run = lldb(&["/bin/sleep"], &["mpi queues"]);
    assert!(!run.success, "{run}");
    assert!(run.stderr.contains("error: target #0 has no process"), "{run}");
}

#[test]
fn refuses_a_running_process() {
    let run = lldb(
        &["--", "/bin/sleep", "30"],
        &[
            "script lldb.debugger.SetAsync(True)",
            "process launch",
            "script import time; time.sleep(1)",
            "mpi queues",
        ],
    );
    assert!(!run.success, "{run}");
    assert!(
        run.stderr.contains("is running: stop it first"),
        "a running process must be refused:\n{run}"
    );
}
