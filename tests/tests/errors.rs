//! Clear, specific errors, the same through gdb, lldb and the CLI: a
//! process with no MPI, Debian's stripped Open MPI (reported from its
//! stacks, the reason and fix said), a "library" that is not
//! a shared object, a library of an unsupported interface level; and the
//! MPI2DD_info way of naming the library (and a wrong magic, ignored).

use mpiq_tests::fixtures::{self, Compiler};
use mpiq_tests::frontends::{queues, snapshot, FrontEnd, Run};
use mpiq_tests::{gdb, Example, Job, Mpi};

/// Runs the queue command with `args` through every front end and checks
/// each fails with a message containing every one of `needles`.
fn all_fail_with(pid: u32, args: &str, needles: &[&str]) {
    for fe in FrontEnd::ALL {
        let r: Run = queues(fe, pid, args);
        assert!(!r.success, "{fe:?} succeeded on '{args}':\n{}", r.all());
        let text = r.all();
        for n in needles {
            assert!(text.contains(n), "{fe:?} '{args}': no '{n}' in:\n{text}");
        }
    }
}

#[test]
fn a_process_without_mpi() {
    gdb::require_ptrace();
    let exe = fixtures::build("not_mpi.c", "not_mpi", Compiler::Cc, &[], false);
    let job = Job::builder(Mpi::Mpich, Example::Ring).program(exe).nprocs(1).start();
    all_fail_with(
        job.pid_of(0),
        "",
        &["not an MPI process", "MPIR_dll_name", "linked with an MPI library"],
    );
}

/// Debian's stripped Open MPI gives no queues (issue 16): every front end
/// still reports the process, with the missing type, the fix and where it
/// is; without stacks there is nothing to report, and that is an error.
#[test]
fn stripped_open_mpi_names_the_missing_type_and_the_fix() {
    gdb::require_ptrace();
    let job = Job::builder(Mpi::DebianOpenMpi, Example::Ring).nprocs(2).start();
    let needles = [
        "opal_list_item_t",
        "has no debug information",
        "libopenmpi3-dbgsym",
        "build id ",
    ];
    for fe in FrontEnd::ALL {
        let r: Run = queues(fe, job.pid_of(0), "");
        let text = r.all();
        assert!(r.success, "{fe:?}:\n{text}");
        for n in needles.iter().chain(&["where: not in MPI, in mpiq_wait_forever"]) {
            assert!(text.contains(n), "{fe:?}: no '{n}' in:\n{text}");
        }
        assert!(!text.contains("not an MPI process"), "{fe:?}:\n{text}");
    }
    all_fail_with(job.pid_of(0), "--no-stacks", &needles);
}

#[test]
fn a_dll_that_is_not_a_shared_object() {
    gdb::require_ptrace();
    let dir = fixtures::fixtures_build_root();
    std::fs::create_dir_all(&dir).unwrap();
    let text = dir.join("not-a-library.so");
    std::fs::write(&text, "this is a text file, not a library\n").unwrap();
    let job = Job::builder(Mpi::Mpich, Example::Ring).nprocs(2).start();
    all_fail_with(
        job.pid_of(0),
        &format!("--dll {}", text.display()),
        &["not usable here", "not ELF", "expected an ELF shared object"],
    );
    // A shared object, but not a message queue debug library.
    all_fail_with(
        job.pid_of(0),
        "--dll /lib/x86_64-linux-gnu/libm.so.6",
        &["is not an MPI message queue debug library", "mqs_setup_basic_callbacks"],
    );
    // A program: dlopen refuses it, and says so.
    all_fail_with(
        job.pid_of(0),
        &format!("--dll {}", job.exe().display()),
        &[
            "cannot load debug library",
            "cannot dynamically load position-independent executable",
        ],
    );
}

#[test]
fn a_dll_of_an_unsupported_interface_level() {
    gdb::require_ptrace();
    let lib = fixtures::fake_dll("fake-compat3", &["-DFAKE_COMPAT=3"]);
    let job = Job::builder(Mpi::Mpich, Example::Ring).nprocs(2).start();
    all_fail_with(
        job.pid_of(0),
        &format!("--dll {}", lib.display()),
        &["incompatible", "mqs_version_compatibility() is 3", "FOR_MPI2"],
    );
    let lib = fixtures::fake_dll("fake-width4", &["-DFAKE_WIDTH=4"]);
    all_fail_with(
        job.pid_of(0),
        &format!("--dll {}", lib.display()),
        &["mqs_dll_taddr_width() is 4"],
    );
}

fn mpi2dd_job(bad_magic: bool) -> Job {
    let dll = Mpi::Mpich.debug_library().expect("has a debug library");
    let define = format!("-DMPI2DD_DLL=\"{}\"", dll.display());
    let (variant, extra): (&str, Vec<&str>) = if bad_magic {
        ("mpi2dd-bad-magic", vec![&define, "-DMPI2DD_BAD_MAGIC"])
    } else {
        ("mpi2dd", vec![&define])
    };
    let exe = fixtures::build("mpi2dd.c", variant, Compiler::Mpi(Mpi::Mpich), &extra, false);
    Job::builder(Mpi::Mpich, Example::Ring).program(exe).nprocs(2).start()
}

#[test]
fn mpi2dd_info_leads_to_the_library() {
    gdb::require_ptrace();
    let job = mpi2dd_job(false);
    for fe in FrontEnd::ALL {
        let v = snapshot(fe, job.pid_of(1), "");
        let p = &v["processes"][0];
        assert_eq!(p["dll"]["found_via"], "MPI2DD_info", "{fe:?}: {p}");
        assert!(p["error"].is_null(), "{fe:?}: {p}");
        let world = p["communicators"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "MPI_COMM_WORLD")
            .expect("MPI_COMM_WORLD");
        let recvs = world["queues"]["receives"]["operations"].as_array().unwrap();
        assert_eq!(recvs.len(), 1, "{fe:?}: {world}");
        assert_eq!(recvs[0]["tag"], 77);
        assert_eq!(recvs[0]["peer"]["local"], 0);
    }
}

#[test]
fn mpi2dd_info_with_a_wrong_magic_is_ignored_with_a_note() {
    gdb::require_ptrace();
    let job = mpi2dd_job(true);
    for fe in FrontEnd::ALL {
        let v = snapshot(fe, job.pid_of(0), "");
        let p = &v["processes"][0];
        assert_eq!(p["dll"]["found_via"], "MPIR_dll_name", "{fe:?}: {p}");
        let notes = p["messages"].to_string();
        assert!(
            notes.contains("MPI2DD_info ignored") && notes.contains("magic"),
            "{fe:?}: {notes}"
        );
    }
}
