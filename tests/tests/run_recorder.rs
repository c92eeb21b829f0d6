//! `mpiq run` preloads mpiq's flight recorder into the job it starts (`cli/src/launch/recorder.rs`),
//! unless `--no-recorder`: on the deadlock example (3 ranks, each with an `MPI_Irecv` from its
//! right neighbour, tag 400 + rank, pending) every rank's `report.json` process has `recorder`,
//! rank 1's with the pending receive from rank 2, tag 401, and the verdict is `deadlock` with the
//! cycle 0 -> 1 -> 2 and its tags 400-402 (on the packaged MPIs, from the recorder alone); with
//! `--no-recorder` none has. Under Debian's Open MPI, PyPI's MPICH wheel and the test bed's Open
//! MPI 4.1.4, 5.0.7 and MPICH, with this mpiq's own copy of the recorder, written into a fresh
//! cache directory. On the two packaged MPIs, `collective_skip` under `mpiq run` is `deadlock`,
//! cycle 0 -> 3, with the collective numbers 42 and 41 in its note.
//!
//! Ranks on other nodes: Open MPI's `mpirun` passes them only the variables it is told to.
//! Without a second machine, "another node" is `fakenode`, reached through a stand-in for ssh
//! (Open MPI's `plm_rsh_agent` / PRRTE's `plm_ssh_agent`, and `MPIQ_SSH` for mpiq's collectors)
//! that runs the command here in an environment as bare as a remote login's: Open MPI 4's
//! `mpirun` (`-x LD_PRELOAD`, which mpiq adds) and Open MPI 5's (`OMPI_MCA_mca_base_env_list`)
//! give the recorder to their ranks there, and Open MPI 4's started by a wrapper (`sh -c`, where
//! mpiq adds only `LD_PRELOAD`) does not, which the report says. And on a real Slurm cluster of
//! 4 nodes on this machine (`scripts/slurm-cluster`): `srun` (both test-bed MPIs) and Open MPI's
//! `mpirun` inside `salloc` give every rank on every node the recorder.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use mpiq_tests::browser::{self, Actions};
use mpiq_tests::expect::{assert_deadlock_ring, edges, SKIPPED_COLLECTIVE_NOTE};
use mpiq_tests::fixtures::WorkDir;
use mpiq_tests::frontends::cli_command;
use mpiq_tests::job::SCRUBBED_ENV_PREFIXES;
use mpiq_tests::run::{hung_by_timeout, job_below_tool, run_within, Run};
use mpiq_tests::slurm::{self, Cluster};
use mpiq_tests::{build_example, gdb, Example, JobDir, Mpi};
use serde_json::Value;

/// `mpiq run`'s exit status for a job it ended.
const EXIT_HUNG: i32 = 124;
/// The deadlock example's ranks, on this machine.
const RANKS: usize = 3;
/// The report's line on ranks without the recorder (`launch/recorder.rs`'s `missing_line`).
const MISSING: &str = "flight recorder: preloaded (";

/// `mpiq run ARGS -- WORDS...` with the environment the harness gives its jobs (no inherited MPI
/// variables, the MPI's libraries first, a 120 s safety-net lifetime, its own [`JobDir`],
/// returned to be kept until the job is over) and `env`; the recorder's copy goes into `cache`,
/// and neither `MPIQ_RECORDER` nor `LD_PRELOAD` is inherited.
fn mpiq_run(
    args: &[&str],
    words: &[OsString],
    mpi: Mpi,
    cache: &Path,
    env: &[(OsString, OsString)],
) -> (Command, JobDir) {
    let mut cmd = cli_command(&["run"]);
    cmd.args(args).arg("--").args(words);
    for (key, _) in std::env::vars_os() {
        if key
            .to_str()
            .is_some_and(|k| SCRUBBED_ENV_PREFIXES.iter().any(|p| k.starts_with(p)))
        {
            cmd.env_remove(&key);
        }
    }
    cmd.env_remove("MPIQ_RECORDER")
        .env_remove("LD_PRELOAD")
        .env("LD_LIBRARY_PATH", mpi.library_dir())
        .env("MPIQ_EXAMPLE_LIFETIME", "120")
        .env("XDG_CACHE_HOME", cache)
        .envs(env.iter().map(|(k, v)| (k, v)));
    // The job below the other tests' debuggers, and mpiq run beside them
    // (the job's launcher is found by its name, so no `nice` word before it).
    job_below_tool(&mut cmd);
    let dir = JobDir::new();
    dir.apply(&mut cmd);
    (cmd, dir)
}

/// A command's program and arguments.
fn words(cmd: &Command) -> Vec<OsString> {
    std::iter::once(cmd.get_program().to_owned())
        .chain(cmd.get_args().map(ToOwned::to_owned))
        .collect()
}

/// The deadlock example on `mpi`'s own starter, with `extra` options right after the program.
fn deadlock_starter(mpi: Mpi, mca: &[(&str, &str)], extra: &[&str]) -> Vec<OsString> {
    let exe = build_example(mpi, Example::Deadlock);
    let mca: Vec<(String, String)> = mca.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let mut w = words(&mpi.starter_command_mca(RANKS, &exe, &[] as &[&str], &mca));
    w.splice(1..1, extra.iter().map(OsString::from));
    w
}

/// Runs `mpiq run --timeout ... --report dir`, which must end the hung job, and returns what it
/// said and its `report.json`.
/// The job of `job(--timeout)` (a test-bed job hangs at once: a machine too busy for its start-up
/// is given longer, [`hung_by_timeout`]).
fn hung(timeout: &str, job: impl Fn(&str) -> (Command, JobDir), dir: &Path, what: &str) -> (Run, Value) {
    let attempt = |t: &str| {
        // The report directory of an attempt in start-up, made again.
        let _ = std::fs::remove_dir_all(dir);
        let (cmd, _job_dir) = job(t);
        run_within(cmd, Duration::from_secs(240))
    };
    let r = hung_by_timeout(timeout, attempt, |r| r);
    assert_eq!(r.code(), Some(EXIT_HUNG), "{what}: {}", r.all());
    let text = std::fs::read_to_string(dir.join("report.json"))
        .unwrap_or_else(|e| panic!("{what}: report.json: {e}\n{}", r.all()));
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{what}: report.json: {e}"));
    (r, v)
}

/// The report's processes, by world rank.
fn by_rank(v: &Value, what: &str) -> Vec<(i64, Value)> {
    let mut procs: Vec<(i64, Value)> = v["processes"]
        .as_array()
        .unwrap_or_else(|| panic!("{what}: no processes: {v:#}"))
        .iter()
        .map(|p| {
            let r = p["world_rank"]
                .as_i64()
                .unwrap_or_else(|| panic!("{what}: a process without a rank: {p:#}"));
            (r, p.clone())
        })
        .collect();
    procs.sort_by_key(|(r, _)| *r);
    procs
}

/// Every rank of the deadlock example (of `n`) has the recorder of the `abi` it found, with its
/// pending receive from its right neighbour; rank 1's from rank 2, tag 401.
fn assert_recorded(v: &Value, n: i64, abi: &str, what: &str) {
    let procs = by_rank(v, what);
    assert_eq!(procs.len() as i64, n, "{what}: {v:#}");
    for (r, p) in &procs {
        let rec = &p["recorder"];
        assert!(rec.is_object(), "{what}: rank {r} has no recorder: {p:#}");
        assert_eq!(rec["mpi"], abi, "{what}: rank {r}: {rec:#}");
        assert_eq!(rec["world_rank"].as_i64(), Some(*r), "{what}: {rec:#}");
        let pending = rec["pending"].as_array().expect("pending");
        assert_eq!(pending.len(), 1, "{what}: rank {r}: {rec:#}");
        let q = &pending[0];
        assert_eq!(q["call"], "irecv", "{what}: rank {r}: {q:#}");
        assert_eq!(
            (q["peer"].as_i64(), q["tag"].as_i64()),
            (Some((r + 1) % n), Some(400 + r)),
            "{what}: rank {r}: {q:#}"
        );
    }
    let one = &procs[1].1["recorder"]["pending"][0];
    assert_eq!(
        (&one["peer"], &one["tag"]),
        (&Value::from(2), &Value::from(401)),
        "{what}"
    );
}

/// The ranks of the report that have no recorder.
fn unrecorded(v: &Value, what: &str) -> Vec<i64> {
    by_rank(v, what)
        .into_iter()
        .filter(|(_, p)| p.get("recorder").is_none())
        .map(|(r, _)| r)
        .collect()
}

/// The copy of the recorder `mpiq run` wrote into `cache`.
fn cached_copy(cache: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> = std::fs::read_dir(cache.join("mpiq/recorder"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert_eq!(dirs.len(), 1, "one copy in {}: {dirs:?}", cache.display());
    let lib = dirs[0].join("libmpiq_recorder.so");
    assert!(lib.is_file(), "{}", lib.display());
    lib
}

/// The deadlock example under `mpiq run` on `mpi`'s starter: every rank recorded (the recorder
/// of `abi`); then with `--no-recorder`, none. With `page`, the report's report.html is opened
/// in Chromium too ([`recorder_page`]).
fn recorded_by_default(mpi: Mpi, abi: &str, page: Option<&str>) {
    gdb::require_ptrace();
    let dir = WorkDir::new(&format!("run-recorder-{}", mpi.name()));
    let cache = dir.path("cache");
    let job = deadlock_starter(mpi, &[], &[]);
    let report = dir.path("with");
    let job_run = |t: &str| {
        mpiq_run(
            &["--timeout", t, "-v", "--report", report.to_str().unwrap()],
            &job,
            mpi,
            &cache,
            &[],
        )
    };
    let what = format!("{mpi}, mpiq run");
    let (r, v) = hung("5s", job_run, &report, &what);
    assert_recorded(&v, RANKS as i64, abi, &what);
    // The verdict the recorder gives (where the MPI gives no queues) or
    // keeps (where its debug library does): the cycle, with peers and tags.
    assert_deadlock_ring(&v, RANKS as i64, &what);
    assert!(!r.stderr.contains(MISSING), "{what}: {}", r.all());
    if let Some(name) = page {
        recorder_page(&report.join("report.html"), name, &what);
    }
    let lib = cached_copy(&cache);
    assert!(
        r.stderr.contains(&format!(
            "flight recorder: LD_PRELOAD += {} (this mpiq's own copy)",
            lib.display()
        )),
        "{what}: {}",
        r.all()
    );

    let report = dir.path("without");
    let job_run = |t: &str| {
        mpiq_run(
            &["--timeout", t, "--no-recorder", "--report", report.to_str().unwrap()],
            &job,
            mpi,
            &cache,
            &[],
        )
    };
    let what = format!("{mpi}, mpiq run --no-recorder");
    let (r, v) = hung("5s", job_run, &report, &what);
    assert_eq!(v["processes"].as_array().map(Vec::len), Some(RANKS), "{what}: {v:#}");
    assert_eq!(unrecorded(&v, &what), [0, 1, 2], "{what}: {v:#}");
    assert!(!r.stderr.contains("flight recorder"), "{what}: {}", r.all());
}

/// `mpiq run`'s report.html of the deadlock example, in Chromium: the verdict and what mpiq
/// run's exit status means on top, the cycle drawn, and the flight recorder's last calls of
/// every rank on one time line, each rank still in its `MPI_Wait` (a bar still open at the
/// stop) with its receive pending; rank 2's detail lists its last calls.
fn recorder_page(page: &Path, name: &str, what: &str) {
    let b = browser::open(
        page,
        name,
        &Actions {
            open: &[],
            rank: Some(2),
            search: None,
        },
    );
    assert_eq!(browser::text(&b, "verdict"), "DEADLOCK", "{what}: {b:#}");
    assert!(
        browser::text(&b, "exit").contains("exit status: 124 (the job was ended as hung"),
        "{what}: {b:#}"
    );
    assert_eq!(b["graph"]["on_cycle"], serde_json::json!([0, 1, 2]), "{what}: {b:#}");
    let t = &b["timeline"];
    assert_eq!(t["hidden"], false, "{what}: {b:#}");
    assert_eq!(t["rows"], serde_json::json!([0, 1, 2]), "{what}: {t:#}");
    assert_eq!(
        t["open_calls"],
        serde_json::json!([[0, "MPI_Wait"], [1, "MPI_Wait"], [2, "MPI_Wait"]]),
        "{what}: {t:#}"
    );
    assert_eq!(t["pending"], 3, "{what}: {t:#}");
    let detail = browser::text(&b, "rank_detail");
    assert!(detail.contains("Last MPI calls (flight recorder"), "{what}: {detail}");
    assert!(
        detail.contains("MPI_Irecv") && detail.contains("still in it"),
        "{what}: {detail}"
    );
}

#[test]
fn debians_open_mpi_is_recorded_by_default() {
    recorded_by_default(Mpi::DebianOpenMpi, "open_mpi", Some("run-recorder-debian-openmpi"));
}

#[test]
fn pypis_mpich_is_recorded_by_default() {
    recorded_by_default(Mpi::PypiMpich, "mpich", None);
}

#[test]
fn the_test_beds_open_mpi_is_recorded_by_default() {
    recorded_by_default(Mpi::OpenMpi, "open_mpi", None);
}

#[test]
fn the_test_beds_open_mpi_5_is_recorded_by_default() {
    recorded_by_default(Mpi::OpenMpi5, "open_mpi", None);
}

#[test]
fn the_test_beds_mpich_is_recorded_by_default() {
    recorded_by_default(Mpi::Mpich, "mpich", None);
}

/// examples/collective_skip.c (4 ranks: 0-2 in their 42nd MPI_Allreduce, rank 3 skipped it and
/// waits in MPI_Recv from rank 0, tag 9) under `mpiq run` on a packaged MPI: the report's
/// verdict names the collective instances by their numbers.
fn skipped_collective(mpi: Mpi) {
    gdb::require_ptrace();
    let dir = WorkDir::new(&format!("run-recorder-skip-{}", mpi.name()));
    let exe = build_example(mpi, Example::CollectiveSkip);
    let job = words(&mpi.starter_command(4, &exe, &[] as &[&str]));
    let report = dir.path("report");
    let job_run = |t: &str| {
        mpiq_run(
            &["--timeout", t, "--report", report.to_str().unwrap()],
            &job,
            mpi,
            &dir.path("cache"),
            &[],
        )
    };
    let what = format!("collective_skip under {mpi}, mpiq run");
    let (r, v) = hung("5s", job_run, &report, &what);
    let a = &v["analysis"];
    assert_eq!(a["verdict"], "deadlock", "{what}: {a:#}");
    assert_eq!(a["cycles"], serde_json::json!([[0, 3]]), "{what}: {a:#}");
    assert!(edges(a).contains(&(3, 0, Some(9))), "{what}: {a:#}");
    assert!(
        a["notes"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|n| n.as_str() == Some(SKIPPED_COLLECTIVE_NOTE)),
        "{what}: {a:#}"
    );
    // The text report says it too.
    assert!(r.stderr.contains("#42"), "{what}: {}", r.all());
}

#[test]
fn a_skipped_collective_under_mpiq_run_on_debians_open_mpi() {
    skipped_collective(Mpi::DebianOpenMpi);
}

#[test]
fn a_skipped_collective_under_mpiq_run_on_pypis_mpich() {
    skipped_collective(Mpi::PypiMpich);
}

/// A stand-in for ssh, as Open MPI's launchers and mpiq's collectors call it (`[-o VALUE] [-T]
/// ... HOST COMMAND...`): runs COMMAND with `/bin/sh` on this machine, from `$HOME`, with only
/// `PATH`, `HOME` and the job's `TMPDIR` (where the MPI keeps its session files) in its
/// environment. What a rank it starts has of the launcher's environment is what the launcher
/// passed on.
fn fake_ssh(dir: &WorkDir) -> PathBuf {
    let path = dir.path("fake-ssh");
    std::fs::write(
        &path,
        r#"#!/bin/sh
while [ $# -gt 0 ]; do
    case $1 in
        -o|-i|-p|-l|-F|-J) shift 2 ;;
        -*) shift ;;
        *) break ;;
    esac
done
shift
cd "$HOME" || exit 255
exec env -i PATH=/usr/bin:/bin HOME="$HOME" ${TMPDIR:+TMPDIR="$TMPDIR"} /bin/sh -c "$*"
"#,
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// Open MPI 4's `mpirun` with rank 0 here and ranks 1-2 on `fakenode` (through [`fake_ssh`]; its
/// TCP transport, not shared memory, whose segments are named after a host name the "nodes"
/// share): started by `mpiq run` itself, every rank has the recorder (mpiq added `-x
/// LD_PRELOAD`), ranks 1-2 read on `fakenode` by a collector; started by `sh -c`, ranks 1-2 have
/// none, and the report says so.
fn open_mpi_4_on_another_node(mpi: Mpi) {
    gdb::require_ptrace();
    let dir = WorkDir::new(&format!("run-recorder-orte-{}", mpi.name()));
    let cache = dir.path("cache");
    let ssh = fake_ssh(&dir);
    let job = deadlock_starter(
        mpi,
        &[("btl", "self,tcp"), ("plm_rsh_agent", ssh.to_str().unwrap())],
        &["--host", "localhost:1,fakenode:2"],
    );
    let env = [(OsString::from("MPIQ_SSH"), ssh.clone().into_os_string())];
    let report = dir.path("direct");
    let job_run = |t: &str| {
        mpiq_run(
            &["--timeout", t, "-v", "--report", report.to_str().unwrap()],
            &job,
            mpi,
            &cache,
            &env,
        )
    };
    let what = format!("{mpi}, mpirun on two nodes");
    let (r, v) = hung("8s", job_run, &report, &what);
    assert!(
        r.stderr
            .contains("-x LD_PRELOAD after the program (Open MPI 4's mpirun"),
        "{what}: {}",
        r.all()
    );
    assert_recorded(&v, RANKS as i64, "open_mpi", &what);
    let nodes: Vec<Value> = by_rank(&v, &what).into_iter().map(|(_, p)| p["node"].clone()).collect();
    assert_eq!(nodes, [Value::Null, "fakenode".into(), "fakenode".into()], "{what}");
    assert!(!r.stderr.contains(MISSING), "{what}: {}", r.all());

    // Through a wrapper mpiq cannot tell the launcher: LD_PRELOAD only, which Open MPI 4 does
    // not pass to another node.
    let line: Vec<String> = job.iter().map(|w| format!("'{}'", w.to_string_lossy())).collect();
    let wrapped: Vec<OsString> = ["sh", "-c", &format!("{}; exit $?", line.join(" "))]
        .iter()
        .map(OsString::from)
        .collect();
    let report = dir.path("wrapped");
    let job_run = |t: &str| {
        mpiq_run(
            &["--timeout", t, "--report", report.to_str().unwrap()],
            &wrapped,
            mpi,
            &cache,
            &env,
        )
    };
    let what = format!("{mpi}, sh -c 'mpirun' on two nodes");
    let (r, v) = hung("8s", job_run, &report, &what);
    assert_eq!(unrecorded(&v, &what), [1, 2], "{what}: {v:#}");
    let lib = cached_copy(&cache);
    let said = format!("  {MISSING}{}), but not found in ranks 1 and 2: ", lib.display());
    assert!(r.stderr.contains(&said), "{what}: {}", r.all());
    let text = std::fs::read_to_string(report.join("report.txt")).unwrap();
    assert!(text.contains(&said), "{what}: {text}");
}

#[test]
fn debians_open_mpi_4_records_on_another_node() {
    open_mpi_4_on_another_node(Mpi::DebianOpenMpi);
}

#[test]
fn the_test_beds_open_mpi_4_records_on_another_node() {
    open_mpi_4_on_another_node(Mpi::OpenMpi);
}

/// Open MPI 5's `mpirun` with every rank on `fakenode` (PRRTE's daemon there started through
/// [`fake_ssh`]; PRRTE gives the ranks there a host name it cannot tell from this one's, so
/// mpiq reads them here): every rank has the recorder (`OMPI_MCA_mca_base_env_list`); with
/// `--no-recorder` and the recorder in `LD_PRELOAD` by hand, none has (the daemon's bare
/// environment is all they get).
#[test]
fn open_mpi_5_records_on_another_node() {
    gdb::require_ptrace();
    let mpi = Mpi::OpenMpi5;
    let dir = WorkDir::new("run-recorder-prrte");
    let cache = dir.path("cache");
    let ssh = fake_ssh(&dir);
    let job = deadlock_starter(
        mpi,
        &[],
        &[
            "--prtemca",
            "plm_ssh_agent",
            ssh.to_str().unwrap(),
            "--host",
            "fakenode:3",
        ],
    );
    let report = dir.path("with");
    let job_run = |t: &str| {
        mpiq_run(
            &["--timeout", t, "-v", "--report", report.to_str().unwrap()],
            &job,
            mpi,
            &cache,
            &[],
        )
    };
    let what = format!("{mpi}, mpirun on another node");
    let (r, v) = hung("8s", job_run, &report, &what);
    assert!(
        r.stderr
            .contains("OMPI_MCA_mca_base_env_list=LD_PRELOAD (Open MPI 5's mpirun: to every node)"),
        "{what}: {}",
        r.all()
    );
    assert_recorded(&v, RANKS as i64, "open_mpi", &what);

    let preloaded = [(OsString::from("LD_PRELOAD"), cached_copy(&cache).into_os_string())];
    let report = dir.path("by-hand");
    let job_run = |t: &str| {
        mpiq_run(
            &["--timeout", t, "--no-recorder", "--report", report.to_str().unwrap()],
            &job,
            mpi,
            &cache,
            &preloaded,
        )
    };
    let what = format!("{mpi}, LD_PRELOAD alone, ranks on another node");
    let (_, v) = hung("8s", job_run, &report, &what);
    assert_eq!(unrecorded(&v, &what), [0, 1, 2], "{what}: {v:#}");
}

const NODES: usize = 4;
const PER_NODE: usize = 2;

/// On a Slurm cluster of 4 nodes: the deadlock example on 4 x 2 ranks, launched by `srun` under
/// `mpiq run` (both test-bed MPIs), and by Open MPI's `mpirun` inside `salloc` (the command is
/// `salloc`: mpiq sets `LD_PRELOAD` only, and `mpirun`'s daemons, started by `srun`, pass it
/// on): every rank on every node has the recorder, read on its node.
#[test]
fn srun_and_salloc_give_every_node_the_recorder() {
    gdb::require_ptrace();
    if !slurm::available() {
        return;
    }
    let cluster = Cluster::start(NODES, 8);
    let dir = WorkDir::new("run-recorder-slurm");
    let cache = dir.path("cache");
    let n = NODES * PER_NODE;
    let cases = [
        (Mpi::Mpich, cluster.srun(NODES, PER_NODE), "mpich"),
        (Mpi::OpenMpi, cluster.srun(NODES, PER_NODE), "open_mpi"),
        (Mpi::OpenMpi, cluster.mpirun_in_allocation(NODES, PER_NODE), "open_mpi"),
    ];
    for (i, (mpi, launcher, abi)) in cases.into_iter().enumerate() {
        let exe = build_example(mpi, Example::Deadlock);
        let name = format!("mpiq-run-recorder-{}-{i}", std::process::id());
        let starter = launcher.command(mpi, n, &exe, &[] as &[&str], &name);
        let mut env: Vec<(OsString, OsString)> = starter
            .get_envs()
            .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned())))
            .collect();
        env.extend(launcher.env(mpi));
        let report = dir.path(&format!("report-{i}"));
        let job_run = |t: &str| {
            mpiq_run(
                &["--timeout", t, "--report", report.to_str().unwrap()],
                &words(&starter),
                mpi,
                &cache,
                &env,
            )
        };
        let what = format!("{mpi}, {launcher}");
        let (r, v) = hung("10s", job_run, &report, &what);
        assert_recorded(&v, n as i64, abi, &what);
        for (rank, p) in by_rank(&v, &what) {
            assert_eq!(
                p["node"],
                format!("n{}", rank / PER_NODE as i64 + 1),
                "{what}: rank {rank} read on its node"
            );
        }
        assert!(!r.stderr.contains(MISSING), "{what}: {}", r.all());
        // The job's step is gone before the next.
        let until = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let out = cluster.command("squeue").args(["-h", "-n", &name]).output().unwrap();
            if out.stdout.is_empty() {
                break;
            }
            assert!(std::time::Instant::now() < until, "{what}: job {name} is still queued");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}
