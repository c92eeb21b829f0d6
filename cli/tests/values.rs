//! `Target::frame_value` of the CLI: the values of parameters and locals
//! in the frames of a stopped process (fixtures/values.c, built -O0 -g and
//! -O2 -g) and of its `gcore` core file, checked against what the program
//! printed and, frame by frame, against gdb's `bt full` of the same
//! process; and the registers of each frame (`$sp`, `$pc`, the
//! callee-saved ones) against gdb's and the gdb shim's.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{assert_running, build_fixture, tools_present, Exe, Running};
use mpiq::Target;
use mpiq_tests::run::run;

fn build(opt: &str) -> Exe {
    build_with(opt, &[])
}

fn build_with(opt: &str, defines: &[&str]) -> Exe {
    let mut flags = vec![opt];
    flags.extend_from_slice(defines);
    build_fixture("values", &flags)
}

/// What the fixture printed: `ready tag=42 buf=0x… count=-7 …`.
type Printed = HashMap<String, u64>;

fn number(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse::<i64>().ok().map(|v| v as u64),
    }
}

/// Starts the fixture; returns once it printed its values and sleeps in
/// pause().
fn start(exe: &Path) -> (Running, Printed) {
    let (child, line) = common::spawn_ready_line(exe);
    let fx = Running { child };
    let printed = line
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), number(v).unwrap_or_else(|| panic!("{line}"))))
        .collect();
    let pid = fx.pid();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.rsplit_once(')').is_some_and(|(_, r)| r.trim_start().starts_with('S')))
    {
        assert!(Instant::now() < deadline, "fixture did not settle");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    (fx, printed)
}

/// What the fixture's frames hold, from what it printed: (function, which
/// of the frames of that function from the innermost, name, value).
fn expected(p: &Printed) -> Vec<(&'static str, usize, &'static str, u64)> {
    let buf = p["buf"];
    let mut v = vec![
        ("fv_block", 0, "tag", p["tag"]),
        ("fv_block", 0, "buf", buf),
        ("fv_block", 0, "count", p["count"]),
        ("fv_block", 0, "sc", p["sc"]),
        ("fv_block", 0, "us", p["us"]),
        ("fv_block", 0, "color", p["color"]),
        ("fv_block", 0, "local", p["local"]),
        ("fv_inlined", 0, "k", 0),
        ("fv_inlined", 0, "p", buf),
    ];
    for (n, depth) in [3u64, 2, 1, 0].into_iter().enumerate() {
        v.push(("fv_recurse", n, "depth", depth));
        v.push(("fv_recurse", n, "p", buf));
    }
    v
}

/// The main thread's function names, innermost first.
fn names(t: &mut dyn Target, tid: u64) -> Vec<String> {
    let stacks = t.stacks().unwrap().expect("stacks");
    let main = stacks.iter().find(|s| s.tid == tid).expect("main thread");
    main.frames
        .iter()
        .map(|f| f.function.as_deref().unwrap_or("??").to_string())
        .collect()
}

fn frame_of(names: &[String], function: &str, nth: usize) -> u32 {
    let i = names
        .iter()
        .enumerate()
        .filter(|(_, n)| *n == function)
        .nth(nth)
        .unwrap_or_else(|| panic!("no frame {nth} of {function} in {names:?}"))
        .0;
    i as u32
}

/// Every expected value, read from `t`; returns the frames' names.
fn check_values(t: &mut dyn Target, tid: u64, printed: &Printed, what: &str) -> Vec<String> {
    let names = names(t, tid);
    for (function, nth, name, want) in expected(printed) {
        let frame = frame_of(&names, function, nth);
        let got = t.frame_value(tid, frame, name).unwrap();
        assert_eq!(
            got,
            Some(want),
            "{what}: {name} in frame {frame} ({function} #{nth}): {got:x?} vs {want:#x}\n{names:?}"
        );
    }
    // Names that are not there, frames that are not there.
    let block = frame_of(&names, "fv_block", 0);
    assert_eq!(t.frame_value(tid, block, "no_such_name").unwrap(), None);
    assert_eq!(t.frame_value(tid, 100_000, "tag").unwrap(), None);
    assert_eq!(t.frame_value(tid + 1_000_000, block, "tag").unwrap(), None);
    names
}

/// gdb's `bt full` of the main thread: per frame, its function and the
/// values it printed as numbers (`<optimized out>`, enum names and the
/// like left out). gdb reads no separate debug files: mpiq takes only the
/// symbol table of a system library's (libc6-dbg), not its DWARF (inlined
/// frames, `__libc_pause` for `pause`).
fn gdb_frames(pid: i32, no_debug_dir: &std::path::Path) -> Vec<(String, Vec<(String, u64)>)> {
    std::fs::create_dir_all(no_debug_dir).expect("an empty directory");
    let r = common::gdb_batch_in(pid, Some(no_debug_dir), "bt full");
    let mut frames: Vec<(String, Vec<(String, u64)>)> = Vec::new();
    for line in r.stdout.lines() {
        if let Some(rest) = line.strip_prefix('#') {
            let rest = rest.trim_start_matches(|c: char| c.is_ascii_digit()).trim_start();
            let rest = match rest.split_once(" in ") {
                Some((pc, f)) if pc.starts_with("0x") => f,
                _ => rest,
            };
            let (name, args) = rest.split_once(" (").unwrap_or((rest, ""));
            let args = args.rsplit_once(") ").map_or(args, |a| a.0);
            let mut values = Vec::new();
            for item in args.split(", ") {
                let Some((k, v)) = item.split_once('=') else { continue };
                if k.contains('@') {
                    continue;
                }
                let v = v.strip_prefix(&format!("{k}@entry=")).unwrap_or(v);
                if let Some(n) = v.split_whitespace().next().and_then(number) {
                    values.push((k.to_string(), n));
                }
            }
            frames.push((name.to_string(), values));
        } else if let (Some(last), Some(local)) = (frames.last_mut(), line.strip_prefix("        ")) {
            if let Some((k, v)) = local.split_once(" = ") {
                if let Some(n) = v.split_whitespace().next().and_then(number) {
                    last.1.push((k.to_string(), n));
                }
            }
        }
    }
    assert!(!frames.is_empty(), "gdb gave no frames:\n{r}");
    frames
}

/// Every number gdb printed for the fixture's frames is what mpiq reads.
fn compare_with_gdb(t: &mut dyn Target, tid: u64, ours: &[String], gdb: &[(String, Vec<(String, u64)>)], what: &str) {
    let mut compared = 0;
    for (i, (function, values)) in gdb.iter().enumerate() {
        assert_eq!(
            ours.get(i),
            Some(function),
            "{what}: frame {i}: {ours:?} vs gdb {gdb:?}"
        );
        if !(function.starts_with("fv_") || function == "main") {
            continue;
        }
        for (name, want) in values {
            let got = t.frame_value(tid, i as u32, name).unwrap();
            assert_eq!(
                got,
                Some(*want),
                "{what}: {name} in frame {i} ({function}), gdb {want:#x}"
            );
            compared += 1;
        }
    }
    assert!(compared >= 15, "{what}: only {compared} values compared: {gdb:?}");
}

/// The registers of every frame (`$` names) are gdb's wherever gdb has a
/// value: `$sp`, `$pc` and the callee-saved ones, read by gdb itself and
/// by the gdb shim's `frame_value`; the caller-saved `$rax` is given in
/// frame 0 only (as gdb has it there) and never in a caller (gdb's own
/// unwinder takes it as unchanged there; neither mpiq nor the shim give
/// it). An inlined frame has the registers of the frame it is inlined into.
fn compare_registers_with_gdb(
    t: &mut dyn Target,
    tid: u64,
    ours: &[String],
    gdb: &[common::GdbFrameRegisters],
    what: &str,
) {
    let stacks = t.stacks().unwrap().expect("stacks");
    let inlined: Vec<bool> = stacks
        .iter()
        .find(|s| s.tid == tid)
        .expect("main thread")
        .frames
        .iter()
        .map(|f| f.inlined)
        .collect();
    let mut compared = 0;
    let mut all: Vec<HashMap<&str, Option<u64>>> = Vec::new();
    for (i, frame) in gdb.iter().enumerate() {
        assert_eq!(ours.get(i), Some(&frame.function), "{what}: frame {i}: {ours:?}");
        let mut mine = HashMap::new();
        for name in common::REGISTERS {
            let got = t.frame_value(tid, i as u32, &format!("${name}")).unwrap();
            mine.insert(name, got);
            let theirs = frame.gdb[name];
            assert_eq!(
                frame.shim[name], theirs,
                "{what}: the gdb shim's ${name} in frame {i} ({}) vs gdb's",
                frame.function
            );
            match theirs {
                Some(want) => {
                    assert_eq!(
                        got,
                        Some(want),
                        "{what}: ${name} in frame {i} ({}), gdb {want:#x}",
                        frame.function
                    );
                    compared += 1;
                }
                None => eprintln!("{what}: gdb has no ${name} in frame {i}; mpiq: {got:x?}"),
            }
        }
        let rax = t.frame_value(tid, i as u32, "$rax").unwrap();
        if i == 0 {
            assert_eq!(rax, frame.gdb["rax"], "{what}: $rax in frame 0");
            assert!(rax.is_some(), "{what}: frame 0 has every register");
            assert_eq!(frame.shim["rax"], rax, "{what}: the gdb shim's $rax in frame 0");
        } else {
            assert_eq!(rax, None, "{what}: caller-saved $rax in frame {i} ({})", frame.function);
            assert_eq!(frame.shim["rax"], None, "{what}: the gdb shim's $rax in frame {i}");
        }
        all.push(mine);
    }
    // The fixture's own frames all have their stack pointer, pc and frame
    // pointer; an inlined frame shares its registers with the next.
    for (i, regs) in all.iter().enumerate() {
        if ours[i].starts_with("fv_") || ours[i] == "main" {
            for name in ["sp", "pc", "rbp"] {
                assert!(regs[name].is_some(), "{what}: ${name} in frame {i} ({})", ours[i]);
            }
        }
        if inlined.get(i) == Some(&true) {
            assert_eq!(Some(regs), all.get(i + 1), "{what}: inlined frame {i} ({})", ours[i]);
        }
    }
    assert!(
        inlined.iter().any(|&x| x),
        "{what}: no inlined frame to check: {ours:?}"
    );
    assert!(compared >= 8 * 6, "{what}: only {compared} registers compared");
    // Not registers: no value.
    for name in ["$", "$eax", "$xmm0", "$no_such"] {
        assert_eq!(t.frame_value(tid, 1, name).unwrap(), None, "{what}: {name}");
    }
}

fn live_and_core(opt: &str) {
    if !tools_present() {
        return;
    }
    let exe = build(opt);
    let (fx, printed) = start(&exe.exe);
    let pid = fx.pid();
    let tid = pid as u64;
    let what = format!("{opt} live");
    let names = {
        let mut p = mpiq_cli::LiveProcess::attach(pid).unwrap();
        let names = check_values(&mut p, tid, &printed, &what);
        p.detach().unwrap();
        names
    };
    assert_running(pid);
    let no_debug_dir = exe.dir.join("no-debug-files");
    let gdb = gdb_frames(pid, &no_debug_dir);
    assert_running(pid);
    let gdb_registers = common::gdb_frame_registers(pid, Some(&no_debug_dir));
    assert_running(pid);
    {
        let mut p = mpiq_cli::LiveProcess::attach(pid).unwrap();
        let block = frame_of(&names, "fv_block", 0);
        // Without stacks() first.
        assert_eq!(p.frame_value(tid, block, "tag").unwrap(), Some(printed["tag"]));
        assert!(p.frame_value(tid, block, "$sp").unwrap().is_some());
        compare_with_gdb(&mut p, tid, &names, &gdb, &what);
        compare_registers_with_gdb(&mut p, tid, &names, &gdb_registers, &what);
    }
    assert_running(pid);

    let core = exe.dir.join("core");
    common::gcore(pid, &core);
    let what = format!("{opt} core");
    let mut c = mpiq_cli::CoreProcess::open_core(&core, Some(&exe.exe)).unwrap();
    let core_names = check_values(&mut c, tid, &printed, &what);
    assert_eq!(core_names, names, "core vs live stacks");
    compare_with_gdb(&mut c, tid, &names, &gdb, &what);
    compare_registers_with_gdb(&mut c, tid, &names, &gdb_registers, &what);
}

#[test]
fn frame_values_match_the_program_and_gdb_at_o0() {
    live_and_core("-O0");
}

#[test]
fn frame_values_match_the_program_and_gdb_at_o2() {
    live_and_core("-O2");
}

/// An executable without DWARF (`strip --strip-debug`: its `.symtab`
/// still names the frames) has no values, and says so without an error.
#[test]
fn without_dwarf_there_are_no_values() {
    if !tools_present() || !common::have("strip") {
        return;
    }
    let exe = build("-O2");
    let r = run(Command::new("strip").arg("--strip-debug").arg(&exe.exe));
    assert!(r.success, "{r}");
    let (fx, _) = start(&exe.exe);
    let pid = fx.pid();
    let tid = pid as u64;
    let mut p = mpiq_cli::LiveProcess::attach(pid).unwrap();
    let names = names(&mut p, tid);
    let block = frame_of(&names, "fv_block", 0);
    let recurse = frame_of(&names, "fv_recurse", 2);
    for name in ["tag", "buf", "count", "local"] {
        assert_eq!(p.frame_value(tid, block, name).unwrap(), None, "{name}");
    }
    assert_eq!(p.frame_value(tid, recurse, "depth").unwrap(), None);
    p.detach().unwrap();
    assert_running(pid);
}

/// A tail call between two frames (`-DFV_TAIL`: main calls fv_tail(1,
/// fv_arr), which jumps to fv_recurse(0, fv_arr + 1) and is on no stack):
/// main's call site is fv_tail's, so entry values of the outermost
/// fv_recurse must not come from it. Every value given is right; the
/// pointer that only the call site could give (fv_arr, one element off) is
/// never given.
#[test]
fn a_tail_call_between_gives_no_wrong_entry_values() {
    if !tools_present() {
        return;
    }
    let exe = build_with("-O2", &["-DFV_TAIL"]);
    let (fx, printed) = start(&exe.exe);
    let pid = fx.pid();
    let tid = pid as u64;
    let buf = printed["buf"];
    let mut p = mpiq_cli::LiveProcess::attach(pid).unwrap();
    let names = names(&mut p, tid);
    assert!(!names.iter().any(|n| n == "fv_tail"), "{names:?}");
    for (n, depth) in [3u64, 2, 1, 0].into_iter().enumerate() {
        let frame = frame_of(&names, "fv_recurse", n);
        let got = p.frame_value(tid, frame, "depth").unwrap();
        assert!(
            got.is_none() || got == Some(depth),
            "depth in fv_recurse #{n}: {got:x?}"
        );
        let got = p.frame_value(tid, frame, "p").unwrap();
        eprintln!("fv_recurse #{n}: p = {got:x?} (right: {buf:#x})");
        assert!(
            got.is_none() || got == Some(buf),
            "p in fv_recurse #{n}: {got:x?}, right {buf:#x}"
        );
    }
    let block = frame_of(&names, "fv_block", 0);
    for name in ["tag", "buf", "count"] {
        assert_eq!(p.frame_value(tid, block, name).unwrap(), Some(printed[name]), "{name}");
    }
    p.detach().unwrap();
    assert_running(pid);
}
