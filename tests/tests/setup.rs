//! `mpiq setup gdb` and `mpiq setup lldb` (issue 27): the lines they print, put in a
//! start-up file, load mpiq into a real gdb and a real lldb, with nothing else given (no
//! `MPIQ_LIB`, no `source` or `plugin load` on the command line); attached to a rank of a
//! real Open MPI ring, `info mpi-queues` and `mpi queues` then show its posted receive.

use std::process::Command;
use std::time::Duration;

use mpiq_tests::frontends::{cli, lldb_binary, run_lldb};
use mpiq_tests::run::run_within;
use mpiq_tests::{gdb, Example, Job, Mpi};

/// The lines `mpiq setup DEBUGGER` prints, written to a file in `dir`.
fn setup_file(dir: &std::path::Path, debugger: &str) -> std::path::PathBuf {
    let r = cli(&["setup", debugger]);
    assert_eq!(r.code(), Some(0), "{}", r.all());
    assert!(r.stdout.starts_with("# mpiq: "), "{}", r.stdout);
    let path = dir.join(format!("{debugger}init"));
    std::fs::write(&path, &r.stdout).unwrap();
    path
}

#[test]
fn the_setup_lines_load_mpiq_into_gdb_and_lldb() {
    gdb::require_ptrace();
    let dir = std::env::temp_dir().join(format!("mpiq-setup-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let job = Job::builder(Mpi::OpenMpi, Example::Ring).nprocs(2).start();
    let pid = job.pid_of(1).to_string();
    let want = [
        "Communicator 'MPI_COMM_WORLD'",
        "Posted receives (1):",
        "from rank 0  tag 101",
    ];

    let gdbinit = setup_file(&dir, "gdb");
    let mut cmd = Command::new("gdb");
    cmd.args(["-batch", "-nx", "-q", "-x"])
        .arg(&gdbinit)
        .args(["-ex", "info mpi-queues", "-p", &pid])
        .env_remove("MPIQ_LIB");
    let g = run_within(cmd, Duration::from_secs(120));
    for needle in want {
        assert!(
            g.stdout.contains(needle),
            "gdb through `mpiq setup gdb`: no `{needle}`:\n{g}"
        );
    }
    g.assert_no_python_errors();

    let lldbinit = setup_file(&dir, "lldb");
    let mut cmd = Command::new(lldb_binary());
    cmd.args(["-b", "--no-lldbinit", "-s"])
        .arg(&lldbinit)
        .args(["-o", "mpi queues", "-p", &pid])
        .env_remove("MPIQ_LIB");
    let l = run_lldb(cmd, Duration::from_secs(180));
    for needle in want {
        assert!(
            l.stdout.contains(needle),
            "lldb through `mpiq setup lldb`: no `{needle}`:\n{l}"
        );
    }
    assert!(Job::is_running(job.pid_of(1)), "rank 1 runs on after both debuggers");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Without the part, a clear error and status 1, and nothing on stdout to append.
#[test]
fn a_missing_part_is_named() {
    // An mpiq copied alone into an empty directory: no plugin next to it or under
    // ../lib/mpiq (the gdb script is still found in the checkout it was built from).
    let dir = std::env::temp_dir().join(format!("mpiq-setup-alone-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    let exe = dir.join("bin/mpiq");
    std::fs::copy(mpiq_tests::frontends::artifact("mpiq"), &exe).unwrap();
    let out = Command::new(&exe).args(["setup", "lldb"]).output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains("cannot set up lldb: libmpiq_lldb.so is not next to this mpiq"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
