//! Record and replay (`--record FILE`, `mpiq replay FILE`).
//!
//! - The committed recordings in `tests/recordings/` (every rank of `ring`,
//!   `named_comms` and `many_ops` K = 10, under the four test-bed MPIs) replay, with the
//!   test bed's debug library, to their committed snapshots: the libraries'
//!   logic is checked on real dumps without starting MPI. Regenerate both
//!   (from new live jobs) with `MPIQ_UPDATE_GOLDEN=1` (or `=<mpi name>` for one MPI's),
//!   never by hand.
//! - For every example under the four MPIs, the live snapshot of every rank
//!   (`mpiq job --record`) equals the replay of its recording exactly, and so
//!   do gdb's and lldb's (`info mpi-queues --record`, `mpi queues --record`).
//! - A recording that lacks an answer makes the replay fail naming it.

use std::path::{Path, PathBuf};
use std::process::Command;

use mpiq_tests::expect::{check_process, expected};
use mpiq_tests::frontends::{cli, cli_command, gdb, lldb, workspace_root};
use mpiq_tests::golden::{machine_specific, portable, without_os};
use mpiq_tests::run::{run, spawn_with_stdin, Run, DEFAULT_TIMEOUT};
use mpiq_tests::{gdb as gdb_check, Example, Job, Mpi};
use serde_json::Value;

const UPDATE: &str = "MPIQ_UPDATE_GOLDEN";

/// The committed recordings: (MPI, example, its arguments).
const COMMITTED: [(Mpi, Example, &[&str]); 12] = [
    (Mpi::OpenMpi, Example::Ring, &[]),
    (Mpi::OpenMpi, Example::NamedComms, &[]),
    (Mpi::OpenMpi, Example::ManyOps, &["10"]),
    (Mpi::Mpich, Example::Ring, &[]),
    (Mpi::Mpich, Example::NamedComms, &[]),
    (Mpi::Mpich, Example::ManyOps, &["10"]),
    (Mpi::OpenMpi5, Example::Ring, &[]),
    (Mpi::OpenMpi5, Example::NamedComms, &[]),
    (Mpi::OpenMpi5, Example::ManyOps, &["10"]),
    (Mpi::MpichCh4, Example::Ring, &[]),
    (Mpi::MpichCh4, Example::NamedComms, &[]),
    (Mpi::MpichCh4, Example::ManyOps, &["10"]),
];

fn recordings_dir() -> PathBuf {
    workspace_root().join("tests/recordings")
}

fn stem(mpi: Mpi, example: Example) -> String {
    format!("{}-{}", mpi.name(), example.name())
}

/// `name` in this run's scratch directory, beside the tests' other work
/// directories (`<cargo profile dir>/mpiq-work/`), not in `/tmp`, where it
/// would outlive the run.
fn scratch(name: &str) -> PathBuf {
    let dir = mpiq_tests::frontends::artifacts_dir()
        .join("mpiq-work")
        .join(format!("replay-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir.join(name)
}

fn json_of(r: &Run, what: &str) -> Value {
    assert!(r.success, "{what} failed:\n{}", r.all());
    r.json().unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// The processes of the snapshot a command printed, whatever its exit
/// status (`mpiq job` and `mpiq replay` of several ranks exit 3 or 4 when
/// their analysis finds a deadlock or cannot tell).
fn processes_of(r: &Run, what: &str) -> Value {
    let mut v = r.json().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(v["processes"].is_array(), "{what}: no processes:\n{}", r.all());
    // What the kernel said of a live process is no part of a recording.
    without_os(&mut v);
    v["processes"].clone()
}

/// A snapshot made of `processes` alone.
fn snapshot_of(processes: Value) -> Value {
    serde_json::json!({ "processes": processes })
}

/// `mpiq replay FILE --json [--dll LIB]`.
fn replay(file: &Path, dll: Option<&Path>) -> Run {
    let file = file.display().to_string();
    let mut args = vec!["replay".to_string(), file, "--json".into()];
    if let Some(d) = dll {
        args.push(format!("--dll={}", d.display()));
    }
    cli(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

/// Records every rank of a new job into `tests/recordings/` with 4 KiB
/// cache blocks (small files), and writes its replayed snapshot as the
/// golden file.
fn regenerate(mpi: Mpi, example: Example, args: &[&str]) {
    let job = Job::builder(mpi, example).args(args.iter().copied()).start();
    let starter = job.starter_pid().to_string();
    let rec = recordings_dir().join(format!("{}.rec", stem(mpi, example)));
    let mut cmd = cli_command(&["job", "--starter", &starter, "--json", "--in-process", "--record"]);
    cmd.arg(&rec).env("MPIQ_CACHE_BLOCK_KIB", "4");
    let live = run(cmd);
    let live = processes_of(&live, "recording");
    drop(job);
    assert_eq!(
        live,
        processes_of(&replay(&rec, None), "replay"),
        "the replay of the new recording differs from the live dump"
    );
    let golden = portable(snapshot_of(processes_of(
        &replay(&rec, Some(&mpi.debug_library().expect("has a debug library"))),
        "replay --dll",
    )));
    let text = serde_json::to_string_pretty(&golden).expect("json") + "\n";
    std::fs::write(rec.with_extension("json"), text).expect("write golden");
}

#[test]
fn committed_recordings_replay_to_their_snapshots() {
    // `1`: regenerate every recording; an MPI's name (`openmpi-5.0.7`): only its.
    let update_value = std::env::var(UPDATE).unwrap_or_default();
    let update_of = |mpi: Mpi| update_value == "1" || update_value == mpi.name();
    let update = !update_value.is_empty() && COMMITTED.iter().any(|(m, _, _)| update_of(*m));
    if update {
        gdb_check::require_ptrace();
        std::fs::create_dir_all(recordings_dir()).expect("recordings dir");
    }
    let mut total = 0;
    for (mpi, example, args) in COMMITTED {
        if update_of(mpi) {
            regenerate(mpi, example, args);
        }
        let rec = recordings_dir().join(format!("{}.rec", stem(mpi, example)));
        total += std::fs::metadata(&rec)
            .unwrap_or_else(|e| panic!("{}: {e} (regenerate with {UPDATE}=1)", rec.display()))
            .len();
        let (raw, golden) = replayed_and_golden(mpi, example);
        let got = portable(raw);
        assert_eq!(
            got,
            golden,
            "{} replays differently from its golden snapshot (if the change is intended, \
             regenerate with {UPDATE}=1)",
            rec.display()
        );
        // Every rank, each with the pending operations its example documents.
        let procs = got["processes"].as_array().cloned().unwrap_or_default();
        assert_eq!(procs.len(), example.default_nprocs(), "{}", rec.display());
        let n = procs.len() as i64;
        for p in &procs {
            let r = p["world_rank"].as_i64().expect("world rank");
            let exp = expected(example, mpi, r, n, args);
            if let Err(e) = check_process(p, &exp, mpi) {
                panic!("{} rank {r}:\n{e}", rec.display());
            }
        }
    }
    assert!(
        total < 800 * 1024,
        "the committed recordings take {total} bytes: keep them small"
    );
}

/// The replay of a committed recording with the test bed's library (not
/// the recorder's path) as it comes, and its committed golden snapshot.
fn replayed_and_golden(mpi: Mpi, example: Example) -> (Value, Value) {
    let rec = recordings_dir().join(format!("{}.rec", stem(mpi, example)));
    let golden_file = rec.with_extension("json");
    let text = std::fs::read_to_string(&golden_file)
        .unwrap_or_else(|e| panic!("{}: {e} (regenerate with {UPDATE}=1)", golden_file.display()));
    // The check that a golden depends only on the MPI library: nothing in it
    // may look like a date, a time, a builder, a home or temporary path, or
    // this machine's name or test bed.
    let found = machine_specific(&text);
    assert!(
        found.is_empty(),
        "{} holds what depends on the machine or day that made it: {found:?}; compare through \
         mpiq_tests::golden::portable",
        golden_file.display()
    );
    let golden: Value = serde_json::from_str(&text).expect("golden JSON");
    let raw = snapshot_of(processes_of(
        &replay(&rec, Some(&mpi.debug_library().expect("has a debug library"))),
        "replay",
    ));
    (raw, golden)
}

/// `v` as a test bed built elsewhere, on another day, by someone else would
/// have produced it: other dates and times, another builder, another
/// executable path and counters.
fn as_if_built_elsewhere(mut v: Value) -> Value {
    for p in v["processes"].as_array_mut().into_iter().flatten() {
        p["executable"] = Value::from("/nonexistent/elsewhere/ring");
        p["stats"] = serde_json::json!({ "fetch_calls": 1 });
        // The library's path is the replaying machine's own test bed, which
        // `portable` finds through `Mpi::testbed_root()` wherever it is
        // (tests/src/golden.rs checks that rewriting).
        let dll = &mut p["dll"];
        let version = dll["version"].as_str().unwrap_or_default().to_string();
        let moved = mpiq_tests::golden::portable_text(&version)
            // No test bed was built on 1 Jan 1970: surely another day.
            .replace("<date>", "Jan  1 1970")
            .replace("<time>", "00:00:00")
            .replace("<user>@<host>", "builder@build-host.invalid");
        dll["version"] = Value::from(moved);
    }
    v
}

/// Every committed golden holds whatever the test bed's build date, builder,
/// host or root: the same replay, as if from a test bed built elsewhere on
/// another day, still equals it; and the version strings the real libraries
/// give do carry such things (so the check above is not vacuous).
#[test]
fn goldens_do_not_depend_on_the_machine_or_day_of_the_test_bed() {
    let mut dated = 0;
    for (mpi, example, _) in COMMITTED {
        let (raw, golden) = replayed_and_golden(mpi, example);
        let moved = as_if_built_elsewhere(raw.clone());
        assert_ne!(moved, raw, "{mpi} {example}: the change of machine changed nothing");
        assert_eq!(
            portable(moved),
            golden,
            "{mpi} {example}: a test bed built elsewhere fails the golden"
        );
        for p in raw["processes"].as_array().into_iter().flatten() {
            if !machine_specific(p["dll"]["version"].as_str().unwrap_or_default()).is_empty() {
                dated += 1;
            }
        }
    }
    assert!(
        dated > 0,
        "no library version string carried a date or builder: is the check still needed?"
    );
}

/// A real change in the queues still fails the comparison: an operation's
/// tag, peer or length, a communicator's name, an operation more or less.
#[test]
fn a_real_change_in_the_queues_fails_the_golden_comparison() {
    let (raw, golden) = replayed_and_golden(Mpi::OpenMpi, Example::Ring);
    let got = portable(raw);
    assert_eq!(got, golden);
    let ops = "/processes/0/communicators/0/queues/receives/operations";
    type Change = fn(&mut Value);
    let changes: [(&str, Change); 5] = [
        ("a tag", |v| bump(&mut v["tag"])),
        ("a peer", |v| bump(&mut v["peer"]["world"])),
        ("a length", |v| bump(&mut v["length"])),
        ("a status", |v| v["status"] = Value::from("complete")),
        ("an operation fewer", |v| *v = Value::Null),
    ];
    for (what, change) in changes {
        let mut changed = golden.clone();
        let op = changed
            .pointer_mut(&format!("{ops}/0"))
            .expect("a posted receive in ring's golden");
        change(op);
        if op.is_null() {
            changed
                .pointer_mut(ops)
                .and_then(Value::as_array_mut)
                .expect("operations")
                .remove(0);
        }
        assert_ne!(got, portable(changed), "changing {what} of a golden went unnoticed");
    }
    let mut changed = golden.clone();
    changed["processes"][0]["communicators"][0]["name"] = Value::from("MPI_COMM_ELSE");
    assert_ne!(got, portable(changed), "changing a communicator's name went unnoticed");
}

fn bump(v: &mut Value) {
    *v = Value::from(v.as_i64().expect("a number") + 1);
}

#[test]
fn a_missing_answer_is_an_error_naming_it() {
    let rec = recordings_dir().join(format!("{}.rec", stem(Mpi::OpenMpi, Example::Ring)));
    let bytes = std::fs::read(&rec).expect("read the recording");
    let full: Value = serde_json::from_slice(&gunzip(&bytes)).expect("recording JSON");
    let dll = Mpi::OpenMpi.debug_library().expect("has a debug library");
    // A recording cut short (its memory, its field offsets gone): the replay
    // fails and says what was asked that it does not have.
    for (part, named) in [
        ("memory", "the recording has no answer for a read of"),
        ("fields", "the recording has no answer for field_offset("),
    ] {
        let mut v = full.clone();
        v["processes"][0][part] = if part == "memory" {
            Value::Array(Vec::new())
        } else {
            Value::Object(Default::default())
        };
        let cut = scratch(&format!("cut-{part}.rec"));
        std::fs::write(&cut, v.to_string()).expect("write");
        let r = replay(&cut, Some(&dll));
        assert!(!r.success, "{}", r.all());
        assert!(r.all().contains(named), "no '{named}':\n{}", r.all());
    }
    // Without --dll, the library is looked for through the recorded symbols.
    let mut v = full.clone();
    v["processes"][0]["symbols"] = Value::Object(Default::default());
    let cut = scratch("cut-symbols.rec");
    std::fs::write(&cut, v.to_string()).expect("write");
    let r = replay(&cut, None);
    assert!(
        r.all().contains("the recording has no answer for find_symbol("),
        "{}",
        r.all()
    );
    // Another MPI's library asks what the recording never saw: never an
    // empty snapshot.
    let r = replay(&rec, Some(&Mpi::Mpich.debug_library().expect("has a debug library")));
    assert!(!r.success, "{}", r.all());
}

/// The JSON inside a gzip-compressed recording (with the system's gzip).
fn gunzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut cmd = Command::new("gzip");
    cmd.args(["-d", "-c"]);
    let mut gzip = spawn_with_stdin(cmd);
    // The pipe closes at the end of the statement: gzip sees the end.
    gzip.stdin().expect("stdin").write_all(bytes).expect("write");
    let r = gzip.wait_within(DEFAULT_TIMEOUT);
    assert!(r.success, "gzip -d failed:\n{r}");
    r.stdout.into_bytes()
}

/// Every rank of `example` live (`mpiq job --record`) and replayed.
fn live_equals_replay(mpi: Mpi, example: Example) {
    gdb_check::require_ptrace();
    if let Some(why) = example.unsupported_reason(mpi) {
        eprintln!("SKIPPED: {} under {mpi}: {why}", example.name());
        return;
    }
    let job = Job::builder(mpi, example).start();
    let rec = scratch(&format!("{}.rec", stem(mpi, example)));
    let starter = job.starter_pid().to_string();
    let file = rec.display().to_string();
    let live = processes_of(
        &cli(&["job", "--starter", &starter, "--json", "--record", &file]),
        "mpiq job --record",
    );
    drop(job);
    assert_eq!(live.as_array().map(Vec::len), Some(example.default_nprocs()), "{live}");
    let replayed = processes_of(&replay(&rec, None), "mpiq replay");
    assert_eq!(
        live, replayed,
        "{example} under {mpi}: the replay differs from the live dump"
    );
    // In-process replay too (the recording does not depend on the mode).
    let r = cli(&["replay", &file, "--json", "--in-process"]);
    assert_eq!(live, processes_of(&r, "replay --in-process"));
    let _ = std::fs::remove_file(rec);
}

mpiq_tests::per_example! { live_equals_replay;
    live_equals_replay_ring_openmpi: OpenMpi, Ring;
    live_equals_replay_ring_mpich: Mpich, Ring;
    live_equals_replay_deadlock_openmpi: OpenMpi, Deadlock;
    live_equals_replay_deadlock_mpich: Mpich, Deadlock;
    live_equals_replay_many_ops_openmpi: OpenMpi, ManyOps;
    live_equals_replay_many_ops_mpich: Mpich, ManyOps;
    live_equals_replay_unexpected_openmpi: OpenMpi, Unexpected;
    live_equals_replay_unexpected_mpich: Mpich, Unexpected;
    live_equals_replay_named_comms_openmpi: OpenMpi, NamedComms;
    live_equals_replay_named_comms_mpich: Mpich, NamedComms;
    live_equals_replay_sessions_mpich: Mpich, Sessions;
    live_equals_replay_ring_openmpi5: OpenMpi5, Ring;
    live_equals_replay_named_comms_openmpi5: OpenMpi5, NamedComms;
    live_equals_replay_unexpected_openmpi5: OpenMpi5, Unexpected;
    live_equals_replay_deadlock_openmpi5: OpenMpi5, Deadlock;
    live_equals_replay_many_ops_openmpi5: OpenMpi5, ManyOps;
    live_equals_replay_sessions_openmpi5: OpenMpi5, Sessions;
    live_equals_replay_ring_mpich_ch4: MpichCh4, Ring;
    live_equals_replay_named_comms_mpich_ch4: MpichCh4, NamedComms;
    live_equals_replay_unexpected_mpich_ch4: MpichCh4, Unexpected;
    live_equals_replay_deadlock_mpich_ch4: MpichCh4, Deadlock;
    live_equals_replay_many_ops_mpich_ch4: MpichCh4, ManyOps;
    live_equals_replay_sessions_mpich_ch4: MpichCh4, Sessions;
}

/// gdb's and lldb's `--record` write the same kind of file: their snapshot
/// and its replay are equal.
fn debugger_records(mpi: Mpi, use_lldb: bool) {
    gdb_check::require_ptrace();
    let job = Job::builder(mpi, Example::NamedComms).start();
    let pid = job.pid_of(1);
    let name = if use_lldb { "lldb" } else { "gdb" };
    let rec = scratch(&format!("{name}-{}.rec", mpi.name()));
    let cmd = format!("--json --record {}", rec.display());
    let run = if use_lldb {
        lldb(pid, &[&format!("mpi queues {cmd}")])
    } else {
        gdb(pid, &[&format!("info mpi-queues {cmd}")])
    };
    let live = json_of(&run, name);
    drop(job);
    let replayed = json_of(&replay(&rec, None), "mpiq replay");
    assert_eq!(
        portable(live),
        portable(replayed),
        "{name} under {mpi}: the replay differs from the live dump"
    );
    let _ = std::fs::remove_file(rec);
}

#[test]
fn gdb_recording_replays_identically_openmpi() {
    debugger_records(Mpi::OpenMpi, false);
}

#[test]
fn gdb_recording_replays_identically_mpich() {
    debugger_records(Mpi::Mpich, false);
}

#[test]
fn lldb_recording_replays_identically_openmpi() {
    debugger_records(Mpi::OpenMpi, true);
}

#[test]
fn lldb_recording_replays_identically_mpich() {
    debugger_records(Mpi::Mpich, true);
}
