//! `Target::frame_value` of the CLI on real MPI ranks of the test bed
//! (examples/barrier_vs_recv.c, Open MPI 4.1.4 and MPICH 4.0.2, both
//! `-O2 -g`): rank 0's `MPI_Barrier` frame gives `comm` = `MPI_COMM_WORLD`
//! (`&ompi_mpi_comm_world`, or MPICH's handle `0x44000000`); the other
//! ranks' `MPI_Recv` frames give `comm`, `buf` (the caller's `value`, -1),
//! `count` 1, and `source` 0 and `tag` 3 where the DWARF has them (MPICH;
//! Open MPI's `PMPI_Recv` has them only as entry values, which its `-O0`
//! caller cannot give: then nothing, never a wrong value). Every number
//! gdb prints for the same frames (`info args`) is what mpiq reads, and
//! the registers (`$sp`, `$pc`, the callee-saved ones) of the frames
//! outside the MPI call are gdb's and the gdb shim's.

use std::process::Command;
use std::time::{Duration, Instant};

mod common;

use mpiq::Target;
use mpiq_tests::run::run;
use mpiq_tests::{gdb, Example, Job, Mpi};

/// MPICH's `MPI_COMM_WORLD` handle (mpi.h).
const MPICH_COMM_WORLD: u64 = 0x4400_0000;

/// The frames of the main thread of a stopped rank, innermost first.
fn function_names(p: &mut dyn Target, tid: u64) -> Vec<String> {
    let stacks = p.stacks().unwrap().expect("the CLI gives stacks");
    let main = stacks.iter().find(|s| s.tid == tid).expect("main thread");
    main.frames
        .iter()
        .map(|f| f.function.as_deref().unwrap_or("??").to_string())
        .collect()
}

/// gdb's `info args` of the innermost frame of `function` in `pid`'s main
/// thread, selected by name (the frames inside MPI's progress loop change
/// between two looks; gdb's own `frame function` picks the physical frame
/// of an inlined one): name -> number (values gdb cannot give, or gives as
/// something else, left out).
fn gdb_args(pid: u32, function: &str) -> Vec<(String, u64)> {
    let script = std::env::temp_dir().join(format!("mpiq-values-mpi-{}-{pid}.py", std::process::id()));
    std::fs::write(
        &script,
        format!(
            "import gdb\nf = gdb.newest_frame()\nwhile f is not None and f.name() != {function:?}:\n    f = f.older()\nf.select()\n"
        ),
    )
    .unwrap();
    let r = run(Command::new("gdb")
        .args(["-nx", "-batch", "-p", &pid.to_string(), "-ex", "set width 0", "-x"])
        .arg(&script)
        .args(["-ex", "frame", "-ex", "info args"]));
    let _ = std::fs::remove_file(&script);
    assert!(
        r.stdout.lines().any(|l| l.contains(&format!(" {function} ("))),
        "gdb did not select {function}:\n{r}"
    );
    let number = |s: &str| -> Option<u64> {
        match s.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => s.parse::<i64>().ok().map(|v| v as u64),
        }
    };
    r.stdout
        .lines()
        .filter_map(|l| l.split_once(" = "))
        .filter(|(k, _)| !k.contains(' ') && !k.starts_with('$'))
        .filter_map(|(k, v)| Some((k.to_string(), number(v.split_whitespace().next()?)?)))
        .collect()
}

/// Attaches to `pid` until its main thread has a frame `want` accepts
/// (a rank prints READY before it enters its call); gives the stopped
/// process, its frames and the index of the innermost such frame.
fn attach_in(pid: u32, want: &dyn Fn(&str) -> bool) -> (mpiq_cli::LiveProcess, Vec<String>, usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut p = mpiq_cli::LiveProcess::attach(pid as i32).expect("attach");
        let names = function_names(&mut p, u64::from(pid));
        if let Some(i) = names.iter().position(|n| want(n)) {
            return (p, names, i);
        }
        p.detach().unwrap();
        assert!(Instant::now() < deadline, "rank {pid} never got there: {names:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn value(p: &mut dyn Target, pid: u32, frame: usize, name: &str) -> Option<u64> {
    p.frame_value(u64::from(pid), frame as u32, name)
        .unwrap_or_else(|e| panic!("{name} in frame {frame}: {e}"))
}

/// Every number gdb prints for the innermost frame of `function` is the
/// value mpiq reads there.
fn same_as_gdb(pid: u32, function: &str, what: &str) {
    let theirs = gdb_args(pid, function);
    eprintln!("{what}: gdb, {function}: {theirs:x?}");
    assert!(!theirs.is_empty(), "{what}: gdb gave no arguments of {function}");
    let (mut p, names, frame) = attach_in(pid, &|n| n == function);
    for (name, want) in &theirs {
        let got = value(&mut p, pid, frame, name);
        assert_eq!(
            got,
            Some(*want),
            "{what}: {name} in frame {frame} ({function}) vs gdb: {names:?}"
        );
    }
    p.detach().unwrap();
}

/// `$sp`, `$pc` and the callee-saved registers mpiq reads in the frames
/// outside the MPI call (from `outer` on: the frames inside MPI's progress
/// loop change between two looks, these do not), and `$rax` there.
type Registers = Vec<(String, std::collections::HashMap<&'static str, Option<u64>>)>;

fn registers_from(p: &mut dyn Target, pid: u32, names: &[String], outer: usize) -> Registers {
    (outer..names.len())
        .map(|j| {
            let regs = common::REGISTERS
                .iter()
                .chain(&["rax"])
                .map(|&r| (r, value(p, pid, j, &format!("${r}"))))
                .collect();
            (names[j].clone(), regs)
        })
        .collect()
}

/// The registers of the outer frames (`ours`, aligned on the outermost
/// frame) are gdb's and the gdb shim's wherever gdb has one; no caller has
/// a `$rax`.
fn same_registers_as_gdb(pid: u32, ours: &Registers, what: &str) {
    assert!(!ours.is_empty(), "{what}: no frames outside the call");
    let gdb = common::gdb_frame_registers(pid as i32, None);
    // gdb's stack ends at `main` (`backtrace past-main` is off), mpiq's at
    // `_start`: aligned on the innermost frame outside the call.
    let skip = gdb
        .iter()
        .position(|f| f.function == ours[0].0)
        .unwrap_or_else(|| panic!("{what}: no {} in gdb's {gdb:x?}", ours[0].0));
    let mut compared = 0;
    for ((function, regs), theirs) in ours.iter().zip(&gdb[skip..]) {
        assert_eq!(function, &theirs.function, "{what}: {ours:x?} vs gdb {gdb:x?}");
        for name in common::REGISTERS {
            assert_eq!(
                theirs.shim[name], theirs.gdb[name],
                "{what}: shim ${name} in {function}"
            );
            if let Some(want) = theirs.gdb[name] {
                assert_eq!(regs[name], Some(want), "{what}: ${name} in {function}, gdb {want:#x}");
                compared += 1;
            } else {
                eprintln!("{what}: gdb has no ${name} in {function}; mpiq {:x?}", regs[name]);
            }
        }
        assert_eq!(regs["rax"], None, "{what}: caller-saved $rax in {function}");
        assert_eq!(theirs.shim["rax"], None, "{what}: the shim's $rax in {function}");
    }
    eprintln!("{what}: {compared} registers of {} outer frames as gdb's", ours.len());
    assert!(compared >= 8, "{what}: only {compared} registers compared");
}

fn check(mpi: Mpi) {
    gdb::require_ptrace();
    let example = Example::BarrierVsRecv;
    if let Some(why) = example.unsupported_reason(mpi) {
        eprintln!("SKIPPED: {} under {mpi}: {why}", example.name());
        return;
    }
    let job = Job::builder(mpi, example).start();
    let world = |p: &mut mpiq_cli::LiveProcess| match mpi {
        Mpi::Mpich => MPICH_COMM_WORLD,
        _ => p
            .find_symbol("ompi_mpi_comm_world")
            .unwrap()
            .expect("ompi_mpi_comm_world"),
    };
    for rank in job.ranks() {
        let pid = rank.pid;
        let what = format!("{mpi}, rank {}", rank.rank);
        if rank.rank == 0 {
            let (mut p, names, i) = attach_in(pid, &|n| n == "MPI_Barrier" || n == "PMPI_Barrier");
            eprintln!("{what}: {names:?}");
            let comm = world(&mut p);
            assert_eq!(value(&mut p, pid, i, "comm"), Some(comm), "{what}: {names:?}");
            if mpi == Mpi::Mpich {
                // The outermost MPIR_Barrier_impl has WORLD's MPIR_Comm
                // (inner ones: node sub-communicators).
                let builtin = p.find_symbol("MPIR_Comm_builtin").unwrap().expect("MPIR_Comm_builtin");
                match names.iter().rposition(|n| n == "MPIR_Barrier_impl") {
                    Some(j) => assert_eq!(value(&mut p, pid, j, "comm_ptr"), Some(builtin), "{what}: {names:?}"),
                    None => eprintln!("{what}: no MPIR_Barrier_impl frame this time: {names:?}"),
                }
            }
            let outer = (i..names.len())
                .find(|&j| !matches!(names[j].as_str(), "MPI_Barrier" | "PMPI_Barrier"))
                .unwrap_or(names.len());
            let registers = registers_from(&mut p, pid, &names, outer);
            p.detach().unwrap();
            assert!(Job::is_running(pid));
            same_as_gdb(pid, &names[i], &what);
            same_registers_as_gdb(pid, &registers, &what);
            continue;
        }
        let is_recv = |n: &str| matches!(n, "MPI_Recv" | "PMPI_Recv" | "internal_Recv");
        let (mut p, names, first) = attach_in(pid, &is_recv);
        eprintln!("{what}: {names:?}");
        let comm = world(&mut p);
        // Every frame of the call (MPICH: internal_Recv inlined in
        // PMPI_Recv) that gives a value gives the right one.
        let frames: Vec<usize> = (first..names.len()).take_while(|&j| is_recv(&names[j])).collect();
        let mut found: std::collections::HashMap<&str, u64> = Default::default();
        let t0 = Instant::now();
        for &j in &frames {
            for name in ["comm", "buf", "count", "source", "tag"] {
                let v = value(&mut p, pid, j, name);
                eprintln!("{what}: frame {j} ({}): {name} = {v:x?}", names[j]);
                if let Some(v) = v {
                    found.entry(name).or_insert(v);
                }
            }
        }
        eprintln!("{what}: {} questions in {:?}", frames.len() * 5, t0.elapsed());
        assert_eq!(found.get("comm"), Some(&comm), "{what}: {names:?}");
        assert_eq!(found.get("count"), Some(&1), "{what}");
        // buf is exchange()'s `int value = -1`.
        let buf = *found.get("buf").unwrap_or_else(|| panic!("{what}: no buf"));
        let mut b = [0u8; 4];
        p.read_memory(buf, &mut b).unwrap();
        assert_eq!(i32::from_le_bytes(b), -1, "{what}: *buf");
        for (name, want) in [("source", 0), ("tag", 3)] {
            match (mpi, found.get(name)) {
                (_, Some(v)) => assert_eq!(*v, want, "{what}: {name}"),
                (Mpi::Mpich, None) => panic!("{what}: MPICH's DWARF has {name}: {names:?}"),
                (_, None) => eprintln!("{what}: {name} not recoverable (entry value only)"),
            }
        }
        // Open MPI: the PML's receive below, whose arguments are entry
        // values; PMPI_Recv calls it through a pointer its call site does
        // not name, so (as gdb) mpiq gives none rather than guess; any
        // value given must be right.
        let pml = names.iter().position(|n| n == "mca_pml_ob1_recv");
        if let Some(j) = pml {
            for (name, want) in [("comm", comm), ("src", 0), ("tag", 3), ("count", 1), ("addr", buf)] {
                let v = value(&mut p, pid, j, name);
                eprintln!("{what}: frame {j} (mca_pml_ob1_recv): {name} = {v:x?}");
                if let Some(v) = v {
                    assert_eq!(v, want, "{what}: {name} in mca_pml_ob1_recv");
                }
            }
        }
        let outer = frames.last().map_or(first, |&j| j + 1);
        let registers = registers_from(&mut p, pid, &names, outer);
        p.detach().unwrap();
        assert!(Job::is_running(pid));
        same_registers_as_gdb(pid, &registers, &what);
        if pml.is_some() {
            same_as_gdb(pid, "mca_pml_ob1_recv", &what);
        }
        let functions: std::collections::BTreeSet<&String> = frames.iter().map(|&j| &names[j]).collect();
        for f in functions {
            same_as_gdb(pid, f, &what);
        }
    }
}

#[test]
fn barrier_and_recv_arguments_openmpi() {
    check(Mpi::OpenMpi);
}

#[test]
fn barrier_and_recv_arguments_mpich() {
    check(Mpi::Mpich);
}
