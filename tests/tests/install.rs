//! mpiq installed the way users install it (issue 27). `scripts/package` builds the wheel and
//! the relocatable tarball; each is installed in a fresh place from the artifact alone (the
//! wheel with `python -m pip install` into a new venv, the tarball unpacked under a temporary
//! directory), and run with the repository's build out of `PATH` and out of every search path
//! (`MPIQ_LIB`, `MPIQ_DLLHOST` unset; run from a directory outside the checkout):
//!
//! - `mpiq job` on a deadlocked job of the test bed's Open MPI (queues) and of PyPI's MPICH
//!   wheel (stacks only), with the message queue library run in the installed helper;
//! - gdb's `info mpi-queues` through the lines `mpiq setup gdb` prints, and lldb's
//!   `mpi queues` through those of `mpiq setup lldb`, attached to a rank of the first job;
//! - `mpiq run --timeout` on a hung job;
//! - the flight recorder, preloaded from where `mpiq setup recorder` says, read in the first job
//!   (the tarball, unpacked under a path with a space, gets the reason it cannot be preloaded).
//!
//! And the artifacts hold no path of the machine that built them.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use mpiq_tests::frontends::{lldb_binary, run_lldb, workspace_root};
use mpiq_tests::job::SCRUBBED_ENV_PREFIXES;
use mpiq_tests::run::{hung_by_timeout, run_within};
use mpiq_tests::{build_example, gdb, Example, Job, JobDir, Mpi};
use serde_json::Value;

/// The artifacts, built once per test binary by `scripts/package`.
struct Artifacts {
    wheel: PathBuf,
    tarball: PathBuf,
}

fn artifacts() -> &'static Artifacts {
    static BUILT: OnceLock<Artifacts> = OnceLock::new();
    BUILT.get_or_init(|| {
        let script = workspace_root().join("scripts/package");
        let built = run_within(
            mpiq_tests::run::at_build_priority(&mut Command::new(&script)),
            Duration::from_secs(3600),
        );
        assert_eq!(built.code(), Some(0), "scripts/package failed:\n{}", built.all());
        let listed = run_within(Command::new(&script).arg("--print"), Duration::from_secs(60));
        let paths: Vec<PathBuf> = listed.stdout.lines().map(PathBuf::from).collect();
        let wheel = paths.iter().find(|p| p.extension().is_some_and(|e| e == "whl"));
        let tarball = paths
            .iter()
            .find(|p| p.to_string_lossy().ends_with("-x86_64-linux.tar.gz"));
        match (wheel, tarball) {
            (Some(w), Some(t)) if w.is_file() && t.is_file() => Artifacts {
                wheel: w.clone(),
                tarball: t.clone(),
            },
            _ => panic!("scripts/package --print names no wheel and tarball:\n{}", listed.all()),
        }
    })
}

/// A temporary directory of this test, outside the checkout, removed at the end.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("mpiq-install-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir.canonicalize().unwrap())
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `PATH` without the checkout and without any other `mpiq`, with `bin` first.
fn user_path(bin: &Path) -> OsString {
    let root = workspace_root();
    let root = root.canonicalize().unwrap_or(root);
    let kept = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .filter(|d| {
            let real = d.canonicalize().unwrap_or_else(|_| d.clone());
            !real.starts_with(&root) && !d.join("mpiq").exists()
        })
        .collect::<Vec<_>>();
    std::env::join_paths(std::iter::once(bin.to_path_buf()).chain(kept)).unwrap()
}

/// A command run as a user of the installation in `bin` would: from `cwd`, with the
/// installation on `PATH` and nothing of the checkout to be found.
fn as_user(program: impl AsRef<std::ffi::OsStr>, bin: &Path, cwd: &Path) -> Command {
    let mut cmd = Command::new(program);
    cmd.current_dir(cwd)
        .env("PATH", user_path(bin))
        .env_remove("MPIQ_LIB")
        .env_remove("MPIQ_DLLHOST")
        .env_remove("MPIQ_COLLECTOR")
        .env_remove("CARGO_TARGET_DIR")
        .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
        .env("PIP_NO_INPUT", "1");
    cmd
}

/// Every check of an installation whose `mpiq` is `bin/mpiq`.
fn four_checks(what: &str, bin: &Path, cwd: &Path) {
    let mpiq = bin.join("mpiq");
    assert!(mpiq.is_file(), "{what}: no {}", mpiq.display());

    // The flight recorder of the installation, as `mpiq setup recorder` names it; LD_PRELOAD
    // cannot name a path with a space, which mpiq setup then says.
    let recorder = if bin.to_string_lossy().contains(' ') {
        let r = run_within(
            as_user(bin.join("mpiq"), bin, cwd).args(["setup", "recorder"]),
            Duration::from_secs(30),
        );
        assert_eq!(r.code(), Some(1), "{what}: {}", r.all());
        assert!(
            r.stderr.contains("LD_PRELOAD splits its list at spaces"),
            "{what}: {}",
            r.all()
        );
        None
    } else {
        let (_, named) = setup_file(what, "recorder", bin, cwd, bin.parent().unwrap());
        named.into_iter().next()
    };

    // 1. mpiq job on the test bed's Open MPI: the queues, read through the installed helper,
    // and the installed flight recorder's tables.
    let mut job = Job::builder(Mpi::OpenMpi, Example::Deadlock).nprocs(3);
    if let Some(lib) = &recorder {
        job = job.env("LD_PRELOAD", lib);
    }
    let job = job.start();
    let starter = job.starter_pid().to_string();
    let r = run_within(
        as_user(&mpiq, bin, cwd).args(["job", "--starter", &starter, "--json"]),
        Duration::from_secs(120),
    );
    assert_eq!(
        r.code(),
        Some(3),
        "{what}: mpiq job on Open MPI's deadlock:\n{}",
        r.all()
    );
    let v: Value = serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{what}: {e}:\n{}", r.all()));
    assert_eq!(v["analysis"]["verdict"], "deadlock", "{what}: {:#}", v["analysis"]);
    assert_eq!(v["analysis"]["cycles"], serde_json::json!([[0, 1, 2]]), "{what}");
    let procs = v["processes"].as_array().expect("processes");
    assert_eq!(procs.len(), 3, "{what}");
    for p in procs {
        let messages = p["messages"].to_string();
        assert!(
            !messages.contains("mpiq-dllhost was not found"),
            "{what}: the installed mpiq did not find its helper: {messages}"
        );
        assert!(
            p["communicators"].as_array().is_some_and(|c| !c.is_empty()),
            "{what}: {p:#}"
        );
        let pending = &p["recorder"]["pending"];
        assert!(
            recorder.is_none()
                || pending
                    .as_array()
                    .is_some_and(|q| q.len() == 1 && q[0]["call"] == "irecv"),
            "{what}: the installed recorder's pending receive: {:#}",
            p["recorder"]
        );
    }

    // The text report's lines that open a rank in gdb and lldb name the installed files.
    let r = run_within(
        as_user(&mpiq, bin, cwd).args(["job", "--starter", &starter]),
        Duration::from_secs(120),
    );
    assert_eq!(r.code(), Some(3), "{what}: {}", r.all());
    let prefix = bin.parent().unwrap();
    for (debugger, file) in [
        ("gdb", "share/mpiq/gdb/mpiq.py"),
        ("lldb", "lib/mpiq/lldb/libmpiq_lldb.so"),
    ] {
        let want = prefix.join(file).display().to_string();
        assert!(
            r.stdout
                .lines()
                .any(|l| l.trim_start().starts_with(debugger) && l.contains(&want)),
            "{what}: no {debugger} line with {want}:\n{}",
            r.stdout
        );
    }

    // 2. gdb and lldb through the lines mpiq setup prints, on rank 1 of that job.
    let pid = job.pid_of(1).to_string();
    let want = [
        "Communicator 'MPI_COMM_WORLD'",
        "Posted receives (1):",
        "from rank 2  tag 401",
    ];
    let prefix = bin.parent().unwrap();
    let (gdbinit, _) = setup_file(what, "gdb", bin, cwd, prefix);
    let mut cmd = as_user("gdb", bin, cwd);
    cmd.args(["-batch", "-nx", "-q", "-x"])
        .arg(&gdbinit)
        .args(["-ex", "info mpi-queues", "-p", &pid]);
    let g = run_within(cmd, Duration::from_secs(120));
    for needle in want {
        assert!(g.stdout.contains(needle), "{what}: gdb: no `{needle}`:\n{}", g.all());
    }
    assert!(!g.all().contains("Traceback"), "{what}: gdb:\n{}", g.all());
    let (lldbinit, _) = setup_file(what, "lldb", bin, cwd, prefix);
    let mut cmd = as_user(lldb_binary(), bin, cwd);
    cmd.args(["-b", "--no-lldbinit", "-s"])
        .arg(&lldbinit)
        .args(["-o", "mpi queues", "-p", &pid]);
    let l = run_lldb(cmd, Duration::from_secs(180));
    for needle in want {
        assert!(l.stdout.contains(needle), "{what}: lldb: no `{needle}`:\n{}", l.all());
    }
    drop(job);

    // 3. mpiq job on a packaged MPI: PyPI's MPICH wheel, stacks only.
    let job = Job::builder(Mpi::PypiMpich, Example::Deadlock).nprocs(3).start();
    let starter = job.starter_pid().to_string();
    let r = run_within(
        as_user(&mpiq, bin, cwd).args(["job", "--starter", &starter, "--json"]),
        Duration::from_secs(120),
    );
    let v: Value = serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{what}: {e}:\n{}", r.all()));
    assert_eq!(
        v["analysis"]["verdict"], "deadlock",
        "{what}: PyPI MPICH's deadlock: {:#}",
        v["analysis"]
    );
    assert_eq!(r.code(), Some(3), "{what}: {}", r.all());
    assert!(
        v["analysis"]["summary"]
            .as_str()
            .is_some_and(|s| s.contains("deadlock.c:")),
        "{what}: the summary names where the ranks are: {:#}",
        v["analysis"]
    );
    drop(job);

    // 4. mpiq run --timeout on a hung job.
    let mpi = Mpi::OpenMpi;
    let exe = build_example(mpi, Example::Deadlock);
    let starter = mpi.starter_command(3, &exe, &[] as &[&str]);
    let attempt = |timeout: &str| {
        let mut cmd = as_user(&mpiq, bin, cwd);
        cmd.args(["run", "--timeout", timeout, "--"])
            .arg(starter.get_program())
            .args(starter.get_args());
        for (key, _) in std::env::vars_os() {
            if key
                .to_str()
                .is_some_and(|k| SCRUBBED_ENV_PREFIXES.iter().any(|p| k.starts_with(p)))
            {
                cmd.env_remove(&key);
            }
        }
        cmd.env("LD_LIBRARY_PATH", mpi.library_dir())
            .env("MPIQ_EXAMPLE_LIFETIME", "120");
        let dir = JobDir::new();
        dir.apply(&mut cmd);
        run_within(cmd, Duration::from_secs(180))
    };
    let r = hung_by_timeout("5s", attempt, |r| r);
    assert_eq!(r.code(), Some(124), "{what}: mpiq run --timeout:\n{}", r.all());
    assert!(
        r.stderr.contains("verdict: DEADLOCK"),
        "{what}: mpiq run's report:\n{}",
        r.all()
    );
}

/// The lines `mpiq setup DEBUGGER` prints for the installation, written to a file, and the
/// files they name: the installation's own.
fn setup_file(what: &str, debugger: &str, bin: &Path, cwd: &Path, prefix: &Path) -> (PathBuf, Vec<String>) {
    let r = run_within(
        as_user(bin.join("mpiq"), bin, cwd).args(["setup", debugger]),
        Duration::from_secs(30),
    );
    assert_eq!(r.code(), Some(0), "{what}: mpiq setup {debugger}:\n{}", r.all());
    // `source PATH` (gdb takes the rest of the line), `plugin load "PATH"` (quoted when it
    // holds a space), `python ... os.environ.setdefault('MPIQ_LIB', 'PATH')`.
    let named: Vec<String> = r
        .stdout
        .lines()
        .filter_map(|l| {
            l.strip_prefix("source ")
                .or_else(|| l.strip_prefix("plugin load "))
                .map(|p| p.trim_matches('"').to_string())
                .or_else(|| {
                    let p = l.strip_prefix("export LD_PRELOAD=")?.split("${").next()?;
                    Some(p.trim_matches('\'').to_string())
                })
                .or_else(|| {
                    let (_, rest) = l.split_once("'MPIQ_LIB', '")?;
                    rest.strip_suffix("')").map(str::to_string)
                })
        })
        .collect();
    assert_eq!(
        named.len(),
        r.stdout.lines().filter(|l| !l.starts_with('#')).count(),
        "{what}: a line of mpiq setup {debugger} names no file:\n{}",
        r.stdout
    );
    assert!(!named.is_empty(), "{what}: {}", r.all());
    for path in &named {
        assert!(
            Path::new(path).starts_with(prefix),
            "{what}: mpiq setup {debugger} names {path}, not a file of the installation in {}",
            prefix.display()
        );
    }
    let file = cwd.join(format!("{debugger}init"));
    std::fs::write(&file, &r.stdout).unwrap();
    (file, named)
}

/// `python3`, as a user would start it (not the checkout's, if it had one).
fn python() -> String {
    std::env::var("MPIQ_TEST_PYTHON").unwrap_or_else(|_| "python3".into())
}

#[test]
fn the_wheel_installed_in_a_new_venv_passes_the_four_checks() {
    gdb::require_ptrace();
    let wheel = &artifacts().wheel;
    let s = Scratch::new("wheel");
    let venv = s.0.join("venv");
    let made = run_within(
        Command::new(python()).current_dir(&s.0).args(["-m", "venv"]).arg(&venv),
        Duration::from_secs(300),
    );
    assert_eq!(made.code(), Some(0), "python3 -m venv:\n{}", made.all());
    let bin = venv.join("bin");
    // The one setup step: pip installs the wheel, from the file alone.
    let mut pip = as_user(bin.join("python"), &bin, &s.0);
    pip.args(["-m", "pip", "install"]).arg(wheel).env("PIP_NO_INDEX", "1");
    let installed = run_within(pip, Duration::from_secs(300));
    assert_eq!(installed.code(), Some(0), "pip install:\n{}", installed.all());
    for part in [
        "bin/mpiq",
        "bin/mpiq-dllhost",
        "lib/mpiq/libmpiq_recorder.so",
        "lib/libmpiq.so",
        "lib/mpiq/lldb/libmpiq_lldb.so",
        "share/mpiq/gdb/mpiq.py",
        "share/mpiq/gdb/mpiq_gdb/commands.py",
    ] {
        assert!(
            venv.join(part).is_file(),
            "pip did not install {part}:\n{}",
            installed.all()
        );
    }
    four_checks("the wheel", &bin, &s.0);
}

#[test]
fn the_tarball_unpacked_anywhere_passes_the_four_checks() {
    gdb::require_ptrace();
    let tarball = &artifacts().tarball;
    let s = Scratch::new("tarball");
    let opt = s.0.join("some where/opt");
    std::fs::create_dir_all(&opt).unwrap();
    let unpacked = run_within(
        Command::new("tar").arg("-xzf").arg(tarball).arg("-C").arg(&opt),
        Duration::from_secs(120),
    );
    assert_eq!(unpacked.code(), Some(0), "{}", unpacked.all());
    let prefixes: Vec<PathBuf> = std::fs::read_dir(&opt).unwrap().flatten().map(|e| e.path()).collect();
    assert_eq!(prefixes.len(), 1, "the tarball holds one directory: {prefixes:?}");
    let bin = prefixes[0].join("bin");
    four_checks("the tarball", &bin, &s.0);
}

/// No file of either artifact holds the checkout's path, the build directory, the home
/// directory, Cargo's or rustup's directories, or this machine's name.
#[test]
fn the_artifacts_hold_no_path_of_the_build_machine() {
    let a = artifacts();
    let s = Scratch::new("grep");
    let x = |cmd: &mut Command| {
        let r = run_within(cmd, Duration::from_secs(120));
        assert_eq!(r.code(), Some(0), "{}", r.all());
    };
    x(Command::new("tar").arg("-xzf").arg(&a.tarball).arg("-C").arg(&s.0));
    x(Command::new("python3")
        .args(["-m", "zipfile", "-e"])
        .arg(&a.wheel)
        .arg(s.0.join("wheel")));
    let home = std::env::var("HOME").unwrap_or_default();
    let root = workspace_root().canonicalize().unwrap();
    let mut forbidden: Vec<String> = vec![root.display().to_string()];
    if home.len() > 1 {
        forbidden.push(format!("{home}/"));
    }
    for var in ["CARGO_HOME", "RUSTUP_HOME", "CARGO_TARGET_DIR", "MPIQ_PACKAGE_TARGET"] {
        if let Some(v) = std::env::var_os(var).filter(|v| v.len() > 1) {
            forbidden.push(v.to_string_lossy().into_owned());
        }
    }
    // The directories Cargo unpacked the dependencies' sources into, named after where
    // they came from.
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(&home).join(".cargo"));
    for sub in ["registry/src", "git/checkouts"] {
        for e in std::fs::read_dir(cargo_home.join(sub)).into_iter().flatten().flatten() {
            forbidden.push(e.file_name().to_string_lossy().into_owned());
        }
    }
    if let Ok(host) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
        let host = host.trim();
        // A name of a few letters could be a word of any binary.
        if host.len() >= 6 {
            forbidden.push(host.to_string());
        }
    }
    let mut files = 0;
    let mut stack = vec![s.0.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            files += 1;
            let bytes = std::fs::read(&p).unwrap();
            for f in &forbidden {
                assert!(
                    !bytes.windows(f.len()).any(|w| w == f.as_bytes()),
                    "{} holds `{f}`, a path or name of the build machine",
                    p.display()
                );
            }
        }
    }
    assert!(files >= 16, "{files} files unpacked from the artifacts");
    // The README's install command names the artifacts as they are built (their version
    // and the glibc they need).
    let readme = std::fs::read_to_string(workspace_root().join("README.md")).unwrap();
    for artifact in [&a.wheel, &a.tarball] {
        let name = artifact.file_name().unwrap().to_string_lossy();
        assert!(readme.contains(&*name), "README.md does not name {name}");
    }
}
