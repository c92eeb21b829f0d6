//! The ELF/DWARF readers against gdb: the fixture (fixtures/README.md) is
//! built in several variants, run, and asked the same questions through
//! mpiq's `Target` and through `gdb -batch`; the answers must be equal. Also
//! the ptrace life cycle (the process runs on after a dump, a stopped one
//! stays stopped) and core files.

mod common;

use common::*;
use mpiq::Target;
use mpiq_cli::{CoreProcess, LiveProcess};
use mpiq_tests::run::run;

fn compare_with_gdb(variant: Variant, gdb_extra: &[String]) {
    if !tools_present() {
        return;
    }
    if variant == Variant::Dwz && !have("dwz") {
        eprintln!("skipping: dwz is not installed");
        return;
    }
    let b = build(variant);
    let r = start(&b);
    let pid = r.pid();
    let qs = questions();
    let mine: Vec<Option<u64>> = {
        let mut p = LiveProcess::attach(pid).unwrap();
        let (s, tracer) = state(pid);
        assert!(s == 't' && tracer != 0, "stopped by us: {s} {tracer}");
        let a = qs.iter().map(|q| ask_mpiq(&mut p, q)).collect();
        p.detach().unwrap();
        a
    };
    assert_running(pid);
    let gdb = ask_gdb(&["-p".into(), pid.to_string()], gdb_extra, &qs);
    let diffs: Vec<String> = qs
        .iter()
        .zip(mine.iter().zip(&gdb))
        .filter(|(_, (m, g))| m != g)
        .map(|(q, (m, g))| format!("{q:?}: mpiq {m:x?}, gdb {g:x?}"))
        .collect();
    assert!(
        diffs.is_empty(),
        "{variant:?}: answers differ from gdb:\n{}",
        diffs.join("\n")
    );
    // Every question has an answer (gdb's None would hide a broken fixture).
    assert!(mine.iter().all(Option::is_some), "{variant:?}: {mine:?}");
    assert_running(pid);
}

#[test]
fn dwarf5_pie_matches_gdb() {
    compare_with_gdb(Variant::Plain, &[]);
}

#[test]
fn dwarf4_non_pie_matches_gdb() {
    compare_with_gdb(Variant::Dwarf4NoPie, &[]);
}

#[test]
fn compressed_debug_sections_match_gdb() {
    compare_with_gdb(Variant::Compressed, &[]);
}

#[test]
fn debuglink_separate_file_matches_gdb() {
    compare_with_gdb(Variant::DebugLink, &[]);
}

#[test]
fn dwz_supplementary_file_matches_gdb() {
    compare_with_gdb(Variant::Dwz, &[]);
}

#[test]
fn missing_things_are_none_not_errors() {
    if !tools_present() {
        return;
    }
    let b = build(Variant::Plain);
    let r = start(&b);
    let mut p = LiveProcess::attach(r.pid()).unwrap();
    // Search order: the executable, then the dynamic linker's load order.
    let names: Vec<String> = p.image().objects().iter().map(|o| o.name.clone()).collect();
    assert_eq!(names[0], b.exe.display().to_string(), "{names:?}");
    assert!(names[1].ends_with("/libfx.so"), "{names:?}");
    assert!(names[2].contains("libc.so"), "{names:?}");
    assert_eq!(p.describe().executable, b.exe.display().to_string());
    assert_eq!(p.describe().pid, Some(r.pid() as u32));
    assert_eq!(p.world_rank(), None);
    assert_eq!(p.find_symbol("no_such_symbol").unwrap(), None);
    assert_eq!(p.find_function("fx_global").unwrap(), None, "data is not a function");
    assert_eq!(p.find_symbol("fx_func").unwrap(), None, "a function is not data");
    assert_eq!(p.find_type("struct no_such_type").unwrap(), None);
    assert_eq!(p.find_type("union fx_node").unwrap(), None, "fx_node is a struct tag");
    let node = p.find_type("fx_node_t").unwrap().unwrap();
    assert_eq!(p.field_offset(node, "no_such_field").unwrap(), None);
    // Bit fields: gdb cannot take their address; mpiq gives the byte of the
    // first bit (DW_AT_data_bit_offset / 8).
    assert_eq!(p.field_offset(node, "bits").unwrap(), Some(92));
    let int = p.find_type("int").unwrap().unwrap();
    assert_eq!(p.field_offset(int, "x").unwrap(), None, "int has no fields");
    assert_eq!(p.type_sizes().unwrap(), mpiq::TypeSizes::LP64);
    assert_eq!(p.byte_order(), mpiq::ByteOrder::host());
    let mut counter = [0u8; 4];
    let at = p.find_symbol("fx_counter").unwrap().unwrap();
    p.read_memory(at, &mut counter).unwrap();
    assert_eq!(i32::from_ne_bytes(counter), 7 + 3 + 7, "fx_counter after main's update");
    assert!(matches!(
        p.read_memory(16, &mut counter),
        Err(mpiq::TargetError::Unreadable { addr: 16, len: 4, .. })
    ));
    p.detach().unwrap();
    assert_running(r.pid());
}

#[test]
fn stopped_process_stays_stopped() {
    if !tools_present() {
        return;
    }
    let b = build(Variant::Plain);
    let r = start(&b);
    let pid = r.pid();
    let kill = |sig: &str| {
        assert!(std::process::Command::new("kill")
            .args([sig, &pid.to_string()])
            .status()
            .unwrap()
            .success())
    };
    kill("-STOP");
    for _ in 0..200 {
        if state(pid).0 == 'T' {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(state(pid), ('T', 0));
    {
        let mut p = LiveProcess::attach(pid).unwrap();
        assert!(p.attach_info().unwrap().was_stopped);
        assert!(p.find_symbol("fx_global").unwrap().is_some());
        p.detach().unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!(state(pid), ('T', 0), "still stopped, not traced");
    kill("-CONT");
    assert_running(pid);
}

#[test]
fn dropping_detaches() {
    if !tools_present() {
        return;
    }
    let b = build(Variant::Plain);
    let r = start(&b);
    let result = std::panic::catch_unwind(|| {
        let _p = LiveProcess::attach(r.pid()).unwrap();
        panic!("a failure in the middle of a dump");
    });
    assert!(result.is_err());
    assert_running(r.pid());
    // Attaching twice: the second one is refused with a clear reason.
    let p = LiveProcess::attach(r.pid()).unwrap();
    let err = LiveProcess::attach(r.pid()).unwrap_err().to_string();
    assert!(err.contains("already traced"), "{err}");
    drop(p);
    assert_running(r.pid());
}

#[test]
fn core_file_answers_like_the_live_process() {
    if !tools_present() || !have("gcore") {
        return;
    }
    let b = build(Variant::Plain);
    let r = start(&b);
    let pid = r.pid();
    let qs = questions();
    let live: Vec<Option<u64>> = {
        let mut p = LiveProcess::attach(pid).unwrap();
        let a = qs.iter().map(|q| ask_mpiq(&mut p, q)).collect();
        p.detach().unwrap();
        a
    };
    let prefix = b.dir.join("core");
    let out = run(std::process::Command::new("gcore")
        .arg("-o")
        .arg(&prefix)
        .arg(pid.to_string()));
    assert!(out.success, "gcore:\n{out}");
    assert_running(pid);
    let core_path = b.dir.join(format!("core.{pid}"));
    let mut core = CoreProcess::open_core(&core_path, None).unwrap();
    assert_eq!(core.describe().pid, Some(pid as u32));
    assert_eq!(core.describe().executable, b.exe.display().to_string());
    let from_core: Vec<Option<u64>> = qs.iter().map(|q| ask_mpiq(&mut core, q)).collect();
    assert_eq!(from_core, live);
    // Data written at run time comes from the core; read-only data that gcore
    // leaves out comes from the files NT_FILE names.
    let mut counter = [0u8; 4];
    let at = core.find_symbol("fx_counter").unwrap().unwrap();
    core.read_memory(at, &mut counter).unwrap();
    assert_eq!(i32::from_ne_bytes(counter), 17);
    let name = core.find_symbol("fx_name").unwrap().unwrap();
    assert_eq!(core.read_c_string(name, 64).unwrap(), "fixture-lib");
    let ptr_at = core.find_symbol("fx_name_ptr").unwrap().unwrap();
    let ptr = core.read_pointer(ptr_at).unwrap();
    assert_eq!(core.read_c_string(ptr, 64).unwrap(), "pointer-string");
    // --exe: the executable named explicitly (here: the same file).
    let core2 = CoreProcess::open_core(&core_path, Some(&b.exe)).unwrap();
    assert_eq!(core2.image().find_symbol("main_global"), live[6]);
}

#[test]
fn lookup_command_prints_answers() {
    if !tools_present() {
        return;
    }
    let b = build(Variant::Plain);
    let r = start(&b);
    let out = run(std::process::Command::new(env!("CARGO_BIN_EXE_mpiq"))
        .args(["lookup", "--pid", &r.pid().to_string()])
        .args([
            "--string",
            "fx_name",
            "--string",
            "fx_name_ptr",
            "--sizeof",
            "fx_node_t",
        ])
        .args(["--offsetof", "fx_node_t.next", "--symbol", "nope"]));
    assert!(out.success, "{out}");
    let text = out.stdout;
    assert_eq!(
        text,
        "symbol nope -\nstring fx_name \"fixture-lib\"\nstring fx_name_ptr \"pointer-string\"\n\
         sizeof fx_node_t 104\noffsetof fx_node_t.next 24\n"
    );
    assert_running(r.pid());
}
