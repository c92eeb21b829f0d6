//! The standalone `mpiq` CLI against real MPI jobs: its own target access
//! (ptrace, /proc, ELF, DWARF) must answer the questions the debug libraries
//! ask exactly as gdb does, find the debug library through `MPIR_dll_name`,
//! dump every rank (`queues`, `job`), and leave every rank running.
//!
//! Uses the `mpiq` binary of the profile the tests are built in (build it
//! first: `cargo build -p mpiq-cli`, with `--release` for
//! `cargo test --release`).

use std::process::Command;

use mpiq_tests::frontends::{artifact, cli};
use mpiq_tests::procs::tracer_pid;
use mpiq_tests::run::run;
use mpiq_tests::{gdb, Example, Job, Mpi};

/// Types and fields each MPI's debug library looks up (see
/// shared MQD field notes), asked of mpiq and of gdb.
fn type_questions(mpi: Mpi) -> (Vec<&'static str>, Vec<(&'static str, &'static str)>) {
    if mpi.is_open_mpi() {
        (
            vec![
                "ompi_communicator_t",
                "struct ompi_communicator_t",
                "opal_list_t",
                "mca_pml_base_request_t",
                "ompi_group_t",
            ],
            vec![
                ("ompi_communicator_t", "c_name"),
                ("ompi_communicator_t", "c_contextid"),
                ("ompi_communicator_t", "c_my_rank"),
                ("ompi_communicator_t", "c_local_group"),
                ("opal_list_t", "opal_list_sentinel"),
                ("opal_list_t", "opal_list_length"),
                ("mca_pml_base_request_t", "req_comm"),
                ("mca_pml_base_request_t", "req_tag"),
            ],
        )
    } else {
        (
            vec!["MPIR_Comm", "struct MPIR_Comm", "MPIR_Request", "MPIR_Comm_list"],
            vec![
                ("MPIR_Comm", "rank"),
                ("MPIR_Comm", "name"),
                ("MPIR_Comm", "context_id"),
                ("MPIR_Comm", "comm_next"),
                ("MPIR_Request", "kind"),
            ],
        )
    }
}

/// The value of gdb's `$N = ...` line: the first hex number after `=`,
/// else the first decimal one.
fn gdb_number(line: &str) -> Option<u64> {
    let v = line.split_once(" = ")?.1;
    if let Some(i) = v.find("0x") {
        let hex: String = v[i + 2..].chars().take_while(char::is_ascii_hexdigit).collect();
        return u64::from_str_radix(&hex, 16).ok();
    }
    v.split_whitespace().next()?.parse().ok()
}

/// gdb's answers to `print EXPR`, one per expression.
fn gdb_numbers(pid: u32, exprs: &[String]) -> Vec<Option<u64>> {
    let mut cmds = Vec::new();
    for e in exprs {
        cmds.push("echo @@\\n".to_string());
        cmds.push(format!("print {e}"));
    }
    cmds.push("echo @@\\n".to_string());
    let refs: Vec<&str> = cmds.iter().map(String::as_str).collect();
    let text = gdb::batch(pid, &refs).stdout;
    let chunks: Vec<&str> = text.split("@@\n").skip(1).collect();
    assert!(chunks.len() >= exprs.len(), "gdb said:\n{text}");
    chunks[..exprs.len()]
        .iter()
        .map(|c| c.lines().find(|l| l.starts_with('$')).and_then(gdb_number))
        .collect()
}

/// Parses `mpiq lookup` output lines `KIND NAME VALUE` into (NAME, VALUE).
fn lookup_values(stdout: &str) -> Vec<(String, Option<u64>)> {
    stdout
        .lines()
        .filter_map(|l| {
            let (rest, value) = l.rsplit_once(' ')?;
            let (_, name) = rest.split_once(' ')?;
            let v = match value.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16).ok(),
                None => value.parse().ok(),
            };
            Some((name.to_string(), v))
        })
        .collect()
}

fn assert_released(pid: u32) {
    assert!(Job::is_running(pid), "rank {pid} is not running after mpiq");
    assert_eq!(tracer_pid(pid), Some(0), "rank {pid} is still traced");
}

fn lookup_matches_gdb(mpi: Mpi) {
    gdb::require_ptrace();
    let job = Job::start(mpi, Example::Ring, 2, &[]);
    let pid = job.pid_of(1);

    // MPIR_dll_name (in libmpi.so, not the executable) names the debug library.
    let r = cli(&[
        "lookup",
        "--pid",
        &pid.to_string(),
        "--string",
        "MPIR_dll_name",
        "--symbol",
        "MPIR_dll_name",
    ]);
    assert!(r.success, "{}", r.all());
    assert_released(pid);
    let dll = r
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("string MPIR_dll_name "))
        .unwrap_or_else(|| panic!("{}", r.all()))
        .trim_matches('"')
        .to_string();
    assert_eq!(
        dll,
        mpi.debug_library().expect("has a debug library").display().to_string()
    );
    assert_eq!(gdb::print_c_string(pid, "(char *) &MPIR_dll_name").unwrap(), dll);
    let address = lookup_values(&r.stdout)
        .into_iter()
        .find(|(n, _)| n == "MPIR_dll_name")
        .and_then(|(_, v)| v);
    assert_eq!(address, gdb_numbers(pid, &["&MPIR_dll_name".into()])[0]);

    // Type sizes and field offsets, as gdb computes them.
    let (types, fields) = type_questions(mpi);
    let mut args = vec!["lookup".to_string(), "--pid".into(), pid.to_string()];
    let mut exprs = Vec::new();
    for t in &types {
        args.extend(["--sizeof".into(), t.to_string()]);
        exprs.push(format!("sizeof({t})"));
    }
    for (t, f) in &fields {
        args.extend(["--offsetof".into(), format!("{t}.{f}")]);
        exprs.push(format!("&(({t} *) 0)->{f}"));
    }
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = cli(&argv);
    assert!(r.success, "{}", r.all());
    assert_released(pid);
    let mine: Vec<Option<u64>> = lookup_values(&r.stdout).into_iter().map(|(_, v)| v).collect();
    let theirs = gdb_numbers(pid, &exprs);
    assert_eq!(mine.len(), exprs.len(), "{}", r.all());
    for ((e, m), g) in exprs.iter().zip(&mine).zip(&theirs) {
        assert!(m.is_some(), "{mpi}: mpiq has no answer for {e}:\n{}", r.all());
        assert_eq!(m, g, "{mpi}: {e}");
    }
    assert_released(pid);
}

#[test]
fn lookup_matches_gdb_openmpi() {
    lookup_matches_gdb(Mpi::OpenMpi);
}

#[test]
fn lookup_matches_gdb_mpich() {
    lookup_matches_gdb(Mpi::Mpich);
}

fn job_and_queues(mpi: Mpi) {
    gdb::require_ptrace();
    let job = Job::start(mpi, Example::Ring, 3, &[]);
    // Every rank through the starter's MPIR_proctable: world rank = index.
    // (The ring is a deadlock, so with the analysis mpiq exits 3: see
    // tests/job.rs; here only the queues, which exit 0.)
    let r = cli(&[
        "job",
        "--starter",
        &job.starter_pid().to_string(),
        "--json",
        "--no-analysis",
        "--samples",
        "1",
    ]);
    assert!(r.success, "{}", r.all());
    let v = r.json().unwrap();
    let procs = v["processes"].as_array().expect("processes");
    assert_eq!(procs.len(), 3, "{v}");
    for rank in job.ranks() {
        let p = procs
            .iter()
            .find(|p| p["pid"] == rank.pid)
            .unwrap_or_else(|| panic!("rank {} (pid {}) missing: {v}", rank.rank, rank.pid));
        assert_eq!(p["world_rank"], rank.rank, "{p}");
        assert!(p["error"].is_null(), "{p}");
        assert_eq!(
            p["dll"]["path"],
            mpi.debug_library().expect("has a debug library").display().to_string(),
            "{p}"
        );
        assert_released(rank.pid);
    }
    assert_released(job.starter_pid());

    // Several --pid at once, in the order given.
    let (a, b) = (job.pid_of(2), job.pid_of(0));
    let r = cli(&[
        "queues",
        "--pid",
        &a.to_string(),
        "--pid",
        &b.to_string(),
        "--json",
        "--all",
        "--no-analysis",
    ]);
    assert!(r.success, "{}", r.all());
    let v = r.json().unwrap();
    let pids: Vec<_> = v["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pid"].clone())
        .collect();
    assert_eq!(pids, [a, b]);
    assert!(
        v["processes"][0]["communicators"]
            .as_array()
            .is_some_and(|c| !c.is_empty()),
        "{v}"
    );
    assert_released(a);
    assert_released(b);

    // A recording replays to the same snapshot, with no process.
    let rec = std::env::temp_dir().join(format!("mpiq-cli-{}-{mpi}.rec", std::process::id()));
    let rec_s = rec.to_str().unwrap();
    let live = cli(&["queues", "--pid", &a.to_string(), "--json", "--all", "--record", rec_s]);
    assert!(live.success, "{}", live.all());
    let replayed = cli(&["replay", rec_s, "--json", "--all"]);
    let _ = std::fs::remove_file(&rec);
    assert!(replayed.success, "{}", replayed.all());
    // What the kernel said of the live process (`os`) is no part of the
    // recording: everything else is the same.
    let mut live = live.json().unwrap();
    for p in live["processes"].as_array_mut().into_iter().flatten() {
        assert!(p.as_object_mut().and_then(|o| o.remove("os")).is_some(), "{p}");
    }
    assert_eq!(replayed.json().unwrap(), live);

    // The text view, and a process that does not exist next to a real one.
    let r = cli(&["queues", "--pid", &a.to_string(), "--pid", "999999999", "--no-analysis"]);
    assert!(r.success, "{}", r.all());
    assert!(r.stdout.contains("MPI_COMM_WORLD"), "{}", r.all());
    assert!(r.stdout.contains("no process 999999999"), "{}", r.all());
    assert_released(a);
}

#[test]
fn job_and_queues_openmpi() {
    job_and_queues(Mpi::OpenMpi);
}

#[test]
fn job_and_queues_mpich() {
    job_and_queues(Mpi::Mpich);
}

#[test]
fn core_file_of_a_rank() {
    gdb::require_ptrace();
    let job = Job::start(Mpi::OpenMpi, Example::Ring, 2, &[]);
    let pid = job.pid_of(0);
    let dir = std::env::temp_dir().join(format!("mpiq-cli-core-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let core = job.gcore(0, &dir);
    let live = cli(&["queues", "--pid", &pid.to_string(), "--json", "--all"])
        .json()
        .unwrap();
    let dead = cli(&["core", core.to_str().unwrap(), "--json", "--all"])
        .json()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(dead["processes"][0]["pid"], pid);
    assert_eq!(
        dead["processes"][0]["communicators"], live["processes"][0]["communicators"],
        "core:\n{dead}\nlive:\n{live}"
    );
    assert_released(pid);
}

/// The CLI indexes a library's DWARF a unit at a time, only as far as a
/// lookup needs: the types Open MPI's debug library asks for are all in the
/// first part of libmpi's units. Each answer is a complete definition with
/// the layout of the one the whole index gives (the first in unit order).
#[test]
fn type_lookups_index_only_the_units_they_need() {
    // Every type libompi_dbg_msgq.so of Open MPI 4.1.4 asks for: all in
    // the first tenth of libmpi's units.
    let types = [
        "mca_pml_base_recv_request_t",
        "mca_pml_base_request_t",
        "mca_pml_base_send_request_t",
        "mca_topo_base_comm_cart_2_2_0_t",
        "mca_topo_base_comm_dist_graph_2_2_0_t",
        "mca_topo_base_comm_graph_2_2_0_t",
        "mca_topo_base_module_t",
        "ompi_communicator_t",
        "ompi_datatype_t",
        "ompi_group_t",
        "ompi_request_t",
        "ompi_status_public_t",
        "opal_datatype_t",
        "opal_free_list_item_t",
        "opal_free_list_t",
        "opal_hash_table_t",
        "opal_list_item_t",
        "opal_list_t",
        "opal_pointer_array_t",
    ];
    lookups_index_few_units(&Mpi::OpenMpi.prefix().join("lib/libmpi.so.40"), &types);
}

#[test]
fn type_lookups_find_the_last_units_types_by_their_strings() {
    // Every type libtvmpich.so of MPICH 4.0.2 asks for: MPIR_Comm_list and
    // MPIR_Sendq only in the debugger support, the last of libmpi's units.
    let types = [
        "MPIDI_Message_match",
        "MPIDI_Message_match_parts_t",
        "MPIDI_Request",
        "MPIR_Comm",
        "MPIR_Comm_list",
        "MPIR_Request",
        "MPIR_Sendq",
    ];
    lookups_index_few_units(&Mpi::Mpich.prefix().join("lib/libmpi.so.12"), &types);
}

/// A type's layout as a debug library sees it: through typedefs, its tag,
/// name, size and each member's name and offset.
type Layout = (String, Option<String>, Option<u64>, Vec<(Option<String>, Option<u64>)>);

fn layout(d: &mpiq_cli::dwarf::DebugInfo, mut r: mpiq_cli::dwarf::DieRef) -> Layout {
    for _ in 0..16 {
        let die = d.die(r).expect("DIE");
        match (die.tag.to_string().as_str(), die.type_ref) {
            ("DW_TAG_typedef", Some(next)) => r = next,
            _ => {
                let members = d
                    .children(r)
                    .expect("children")
                    .into_iter()
                    .map(|m| (m.name, m.member_location))
                    .collect();
                return (die.tag.to_string(), die.name, die.byte_size, members);
            }
        }
    }
    panic!("a chain of 16 typedefs at {r:?}");
}

/// Looking `types` up in `libmpi` gives the answers of the whole index,
/// after indexing under a quarter of its units; a name no unit defines
/// reads them all.
fn lookups_index_few_units(libmpi: &std::path::Path, types: &[&str]) {
    use mpiq_cli::dwarf::Namespace;
    use mpiq_cli::elf::ElfObject;
    let open = || {
        ElfObject::open(libmpi)
            .unwrap_or_else(|e| panic!("{}: {e}", libmpi.display()))
            .debug_info()
            .expect("DWARF")
            .expect("libmpi of the test bed has debug info")
    };
    let (lazy, full) = (open(), open());
    full.prepare().expect("indexing all of libmpi");
    let (_, all_units) = full.indexed();
    for &name in types {
        let ns = Namespace::Ordinary;
        let found = lazy.lookup(ns, name).expect("lookup");
        assert!(
            found.is_some_and(|(_, complete)| complete),
            "{name} not defined in libmpi"
        );
        let whole = full.lookup(ns, name).expect("lookup");
        let ((a, _), (b, _)) = (found.expect("found"), whole.expect("found by the whole index"));
        assert_eq!(layout(&lazy, a), layout(&full, b), "{name}: {a:?} against {b:?}");
    }
    let (_, read) = lazy.indexed();
    eprintln!(
        "{}: {read} of {all_units} units indexed for {} types",
        libmpi.display(),
        types.len()
    );
    assert!(
        read * 4 < all_units,
        "{read} of libmpi's {all_units} units indexed for {} types",
        types.len()
    );
    // A name no unit defines reads them all, and is not found.
    assert_eq!(
        lazy.lookup(Namespace::Struct, "mpiq_no_such_type").expect("lookup"),
        None
    );
    assert_eq!(lazy.indexed().1, all_units);
}

#[test]
fn refuses_clearly_without_ptrace_permission() {
    // An unprivileged user may not trace a root process: the error names
    // the knobs (Yama's ptrace_scope, CAP_SYS_PTRACE).
    let uid0 = std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false);
    let setpriv = Command::new("setpriv").arg("--version").output().is_ok();
    if !uid0 || !setpriv {
        eprintln!("SKIPPED: needs root and setpriv to run mpiq as another user");
        return;
    }
    let mpiq = artifact("mpiq");
    let copy = std::env::temp_dir().join(format!("mpiq-nobody-{}", std::process::id()));
    std::fs::copy(&mpiq, &copy).unwrap();
    let job = Job::start(Mpi::Mpich, Example::Ring, 2, &[]);
    let out = run(Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&copy)
        .args(["queues", "--pid", &job.pid_of(0).to_string()]));
    let _ = std::fs::remove_file(&copy);
    let err = &out.stderr;
    assert_eq!(out.code(), Some(1), "{err}");
    assert!(err.contains("not permitted"), "{err}");
    assert!(err.contains("ptrace_scope") && err.contains("CAP_SYS_PTRACE"), "{err}");
    assert_released(job.pid_of(0));
}
