//! `mpiq stacks --pid`: every thread's call stack of a live process,
//! compared with gdb's `thread apply all bt` of the same process
//! (fixtures/stacks.c, built -O0 -g and -O2 -g), and the process left
//! running and untraced.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{assert_running, build_fixture, state, tools_present, Exe, Running};
use mpiq_tests::run::run;

fn build(opt: &str, strip_eh_frame: bool) -> Exe {
    let built = build_fixture("stacks", &[opt, "-pthread", "-fno-omit-frame-pointer"]);
    if strip_eh_frame {
        let r = run(Command::new("objcopy")
            .args(["--remove-section", ".eh_frame", "--remove-section", ".eh_frame_hdr"])
            .arg(&built.exe));
        assert!(r.success, "objcopy failed:\n{r}");
    }
    built
}

/// Starts the fixture; returns once it printed `ready` and both threads
/// sleep (the main thread in pause(), the other in read()).
fn start(exe: &Path) -> Running {
    let child = common::spawn_ready(exe);
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let tasks: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .filter_map(|e| Some(e.ok()?.file_name().to_str()?.to_string()))
            .collect();
        let asleep = tasks.iter().all(|t| {
            std::fs::read_to_string(format!("/proc/{pid}/task/{t}/stat"))
                .is_ok_and(|s| s.rsplit_once(')').is_some_and(|(_, r)| r.trim_start().starts_with('S')))
        });
        if tasks.len() == 2 && asleep {
            break;
        }
        assert!(Instant::now() < deadline, "fixture threads did not settle");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Let the read() and pause() calls be entered for certain.
    std::thread::sleep(Duration::from_millis(100));
    Running { child }
}

/// A frame: function name and, when printed, the source line.
type Named = (String, Option<u32>);

/// The frames of a thread of `mpiq stacks --json`, as [`Named`].
fn named_frames(t: &serde_json::Value) -> Vec<Named> {
    t["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["function"].as_str().unwrap_or("??").to_string(),
                f["line"].as_u64().map(|l| l as u32),
            )
        })
        .collect()
}

/// gdb's `thread apply all bt`: tid -> frames, with gdb's debug file
/// directory set to `debug_dir` if given.
fn gdb_stacks_in(pid: i32, debug_dir: Option<&Path>) -> HashMap<i32, Vec<Named>> {
    let r = common::gdb_batch_in(pid, debug_dir, "thread apply all bt");
    let mut out: HashMap<i32, Vec<Named>> = HashMap::new();
    let mut current = None;
    for line in r.stdout.lines() {
        if let Some(rest) = line.strip_prefix("Thread ") {
            // Thread 2 (Thread 0x7f… (LWP 3116) "stacks"):
            current = rest
                .split_once("(LWP ")
                .and_then(|(_, t)| t.split(')').next())
                .and_then(|t| t.trim().parse().ok());
            continue;
        }
        let Some(tid) = current else { continue };
        let Some(rest) = line.strip_prefix('#') else { continue };
        let rest = rest.trim_start_matches(|c: char| c.is_ascii_digit()).trim_start();
        let rest = match rest.split_once(" in ") {
            Some((pc, f)) if pc.starts_with("0x") => f,
            _ => rest,
        };
        let name = rest.split(' ').next().unwrap_or_default().to_string();
        let line_no = rest
            .rsplit_once(" at ")
            .and_then(|(_, loc)| loc.rsplit_once(':'))
            .and_then(|(_, l)| l.trim().parse().ok());
        out.entry(tid).or_default().push((name, line_no));
    }
    assert!(!out.is_empty(), "gdb gave no stacks:\n{r}");
    out
}

/// What `mpiq stacks --json` said: tid -> frames, tid -> note, the JSON.
type Stacks = (HashMap<i32, Vec<Named>>, HashMap<i32, Option<String>>, String);

/// `mpiq stacks --pid PID --json`.
fn mpiq_stacks(pid: i32, env: &[(&str, &str)]) -> Stacks {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mpiq"));
    cmd.args(["stacks", "--pid", &pid.to_string(), "--json"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let r = run(&mut cmd);
    assert!(r.success, "mpiq stacks failed:\n{r}");
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).expect("JSON");
    let mut frames = HashMap::new();
    let mut notes = HashMap::new();
    for t in doc[0]["threads"].as_array().expect("threads") {
        let tid = t["tid"].as_i64().unwrap() as i32;
        let names = named_frames(t);
        frames.insert(tid, names);
        notes.insert(tid, t["note"].as_str().map(str::to_string));
    }
    (frames, notes, r.stdout)
}

fn names(frames: &[Named]) -> Vec<&str> {
    frames.iter().map(|f| f.0.as_str()).collect()
}

/// The fixture's own frames must appear in this order, consecutively.
fn assert_contains_run(frames: &[&str], run: &[&str], what: &str) {
    assert!(
        frames.windows(run.len()).any(|w| w == run),
        "{what}: {run:?} not found in order in {frames:?}"
    );
}

fn compare_with_gdb(opt: &str) {
    if !tools_present() {
        return;
    }
    let exe = build(opt, false);
    let fx = start(&exe.exe);
    let pid = fx.pid();
    // A system library's separate debug file (libc6-dbg) gives mpiq its
    // symbol table only, where gdb reads its DWARF too (inlined frames
    // such as `__GI___libc_read`, source lines): both are compared
    // without debug files, and mpiq's frames with them must be the same
    // as without.
    let no_debug_dir = exe.dir.join("no-debug-files");
    std::fs::create_dir_all(&no_debug_dir).expect("an empty directory");
    let dir = no_debug_dir.to_str().expect("a UTF-8 temporary directory");
    let (mine, notes, json) = mpiq_stacks(pid, &[("MPIQ_DEBUG_FILE_DIRECTORY", dir)]);
    assert_running(pid);
    let gdb = gdb_stacks_in(pid, Some(&no_debug_dir));
    assert_running(pid);
    let with_debug_files = mpiq_stacks(pid, &[]).0;
    for (tid, ours) in &mine {
        let named = &with_debug_files[tid];
        // The same frames; a debug file's symbol table may name one the
        // library's own did not (a static function).
        assert!(
            named.len() == ours.len() && named.iter().zip(ours).all(|(n, o)| n == o || o.0 == "??"),
            "thread {tid}: the system's debug files changed mpiq's frames: {named:?} vs {ours:?}"
        );
    }
    assert_eq!(mine.len(), 2, "two threads expected:\n{json}");
    for (tid, theirs) in &gdb {
        let ours = mine.get(tid).unwrap_or_else(|| panic!("thread {tid} missing:\n{json}"));
        // gdb stops at main (backtrace past-main off); mpiq goes on to _start.
        assert!(ours.len() >= theirs.len(), "thread {tid}: {ours:?} vs gdb {theirs:?}");
        assert_eq!(
            names(&ours[..theirs.len()]),
            names(theirs),
            "thread {tid} ({opt}): mpiq vs gdb\n{json}"
        );
        for (o, t) in ours.iter().zip(theirs) {
            if o.0.starts_with("stx_") || o.0 == "main" {
                assert_eq!(o.1, t.1, "thread {tid} ({opt}): line of {}", o.0);
            }
        }
        // A complete stack ends without a note.
        assert_eq!(notes[tid], None, "thread {tid}: {json}");
    }
    let main = names(&mine[&pid]).iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let main: Vec<&str> = main.iter().map(String::as_str).collect();
    assert_contains_run(
        &main,
        &["stx_level3", "stx_level2", "stx_level1", "main"],
        "main thread",
    );
    let worker = mine.keys().find(|&&t| t != pid).unwrap();
    let worker = names(&mine[worker]).iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let worker: Vec<&str> = worker.iter().map(String::as_str).collect();
    assert_contains_run(&worker, &["stx_blocked_in_read", "stx_worker"], "second thread");
    // Still running, untraced, and still in the same place.
    assert_eq!(state(pid).1, 0);
    assert_eq!(mpiq_stacks(pid, &[("MPIQ_DEBUG_FILE_DIRECTORY", dir)]).0, mine);
}

#[test]
fn stacks_match_gdb_at_o0() {
    compare_with_gdb("-O0");
}

#[test]
fn stacks_match_gdb_at_o2() {
    compare_with_gdb("-O2");
}

#[test]
fn text_output_is_one_line_per_frame_like_bt() {
    if !tools_present() {
        return;
    }
    let exe = build("-O0", false);
    let fx = start(&exe.exe);
    let pid = fx.pid();
    let r = run(Command::new(env!("CARGO_BIN_EXE_mpiq")).args(["stacks", "--pid", &pid.to_string()]));
    assert!(r.success, "{r}");
    assert_running(pid);
    assert!(r.stdout.contains(&format!("Thread {pid} (process {pid})")), "{r}");
    let level2 = r
        .stdout
        .lines()
        .find(|l| l.contains(" in stx_level2 "))
        .unwrap_or_else(|| panic!("no stx_level2 frame:\n{r}"));
    // #N 0xPC in FUNCTION (FILE:LINE) from OBJECT
    assert!(level2.starts_with('#'), "{level2}");
    assert!(level2.contains(" 0x"), "{level2}");
    let src = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/stacks.c")).unwrap();
    let call = 1 + src
        .lines()
        .position(|l| l.contains("return stx_level3(depth + 1) * 2;"))
        .expect("the call in stx_level2");
    assert!(level2.contains(&format!("stacks.c:{call}) from ")), "{level2}");
    assert!(level2.ends_with(&exe.exe.display().to_string()), "{level2}");
}

#[test]
fn frame_limit_ends_the_stack_with_a_note() {
    if !tools_present() {
        return;
    }
    let exe = build("-O0", false);
    let fx = start(&exe.exe);
    let pid = fx.pid();
    let (mine, notes, json) = mpiq_stacks(pid, &[("MPIQ_MAX_FRAMES", "2")]);
    assert_running(pid);
    assert_eq!(mine.len(), 2, "{json}");
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    for t in doc[0]["threads"].as_array().unwrap() {
        // The limit counts real frames; inlined functions share one.
        let real = t["frames"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["inlined"] == false)
            .count();
        assert_eq!(real, 2, "{json}");
    }
    for note in notes.values() {
        assert_eq!(
            note.as_deref(),
            Some("stack cut at 2 frames (MPIQ_MAX_FRAMES)"),
            "{json}"
        );
    }
}

#[test]
fn without_eh_frame_frame_pointers_find_the_callers() {
    if !tools_present() || !common::have("objcopy") {
        return;
    }
    let exe = build("-O0", true);
    let fx = start(&exe.exe);
    let pid = fx.pid();
    let (mine, _notes, json) = mpiq_stacks(pid, &[]);
    assert_running(pid);
    let main: Vec<&str> = names(&mine[&pid]);
    assert_contains_run(
        &main,
        &["stx_level3", "stx_level2", "stx_level1", "main"],
        "main thread",
    );
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    let hows: Vec<&str> = doc[0]["threads"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| t["frames"].as_array().unwrap().iter())
        .filter(|f| f["function"] == "stx_level1" || f["function"] == "main")
        .map(|f| f["how"].as_str().unwrap())
        .collect();
    assert_eq!(hows, ["frame_pointer", "frame_pointer"], "{json}");
}

#[test]
fn core_file_stacks_equal_the_live_ones() {
    if !tools_present() {
        return;
    }
    let exe = build("-O2", false);
    let fx = start(&exe.exe);
    let pid = fx.pid();
    let (live, _, live_json) = mpiq_stacks(pid, &[]);
    let core = exe.dir.join("core");
    common::gcore(pid, &core);
    let r = run(Command::new(env!("CARGO_BIN_EXE_mpiq"))
        .args(["stacks", "--json", "--core"])
        .arg(&core)
        .arg("--exe")
        .arg(&exe.exe));
    assert!(r.success, "{r}");
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(doc[0]["pid"], pid, "{r}");
    let mut from_core = HashMap::new();
    for t in doc[0]["threads"].as_array().unwrap() {
        assert_eq!(t["note"], serde_json::Value::Null, "{r}");
        let frames: Vec<Named> = named_frames(t);
        from_core.insert(t["tid"].as_i64().unwrap() as i32, frames);
    }
    assert_eq!(from_core, live, "core:\n{}\nlive:\n{live_json}", r.stdout);
}

#[test]
fn stripped_library_gives_exported_names_and_offsets() {
    if !tools_present() || !common::have("strip") {
        return;
    }
    let exe = build("-O2", false);
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let lib = exe.dir.join("libstx.so");
    let r = run(Command::new("gcc")
        .args(["-g", "-O2", "-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(fixtures.join("stacks_lib.c")));
    assert!(r.success, "{r}");
    // Only .dynsym is left (and .eh_frame, which is not debug information).
    let r = run(Command::new("strip").arg("--strip-all").arg(&lib));
    assert!(r.success, "{r}");
    let with_lib = exe.dir.join("stacks-lib");
    let r = run(Command::new("gcc")
        .args(["-g", "-O2", "-pthread", "-DSTX_LIB", "-o"])
        .arg(&with_lib)
        .arg(fixtures.join("stacks.c"))
        .arg(format!("-L{}", exe.dir.display()))
        .args(["-lstx", "-Wl,-rpath,$ORIGIN"]));
    assert!(r.success, "{r}");
    let fx = start(&with_lib);
    let pid = fx.pid();
    let (_, _, json) = mpiq_stacks(pid, &[]);
    assert_running(pid);
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    let worker = doc[0]["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tid"] != pid)
        .unwrap();
    let frames = worker["frames"].as_array().unwrap();
    let at = frames
        .iter()
        .position(|f| f["function"] == "stx_lib_exported")
        .unwrap_or_else(|| panic!("no stx_lib_exported:\n{json}"));
    assert!(at >= 1, "{json}");
    // The static function before it: no name, the library and an offset.
    let hidden = &frames[at - 1];
    assert_eq!(hidden["function"], serde_json::Value::Null, "{json}");
    assert!(hidden["object"].as_str().unwrap().ends_with("/libstx.so"), "{json}");
    assert!(hidden["offset"].as_str().unwrap().starts_with("0x"), "{json}");
    assert_eq!(frames[at + 1]["function"], "stx_blocked_in_read", "{json}");
    let r = run(Command::new(env!("CARGO_BIN_EXE_mpiq")).args(["stacks", "--pid", &pid.to_string()]));
    assert!(r.stdout.contains(" in libstx.so+0x"), "{r}");
    assert_running(pid);
}

#[test]
fn threads_stopped_in_the_vdso_unwind_to_main() {
    if !tools_present() {
        return;
    }
    let exe = build("-O2", false);
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/stacks.c");
    let spin = exe.dir.join("spin");
    let r = run(Command::new("gcc")
        .args(["-g", "-O2", "-pthread", "-DSTX_SPIN", "-o"])
        .arg(&spin)
        .arg(&src));
    assert!(r.success, "{r}");
    let fx = Running {
        child: common::spawn_ready(&spin),
    };
    let pid = fx.pid();
    // Stopped wherever the loop is: in the vdso most of the time.
    let mut in_vdso = 0;
    for _ in 0..20 {
        let (mine, notes, json) = mpiq_stacks(pid, &[]);
        let names = names(&mine[&pid]);
        assert_contains_run(&names, &["stx_spin", "main"], "spinning thread");
        assert_eq!(notes[&pid], None, "{json}");
        let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
        let top = &doc[0]["threads"][0]["frames"][0];
        if top["object"] == "[vdso]" {
            in_vdso += 1;
            // Named from the vdso's own symbols.
            assert!(
                top["function"].as_str().is_some_and(|f| f.contains("gettime")),
                "{json}"
            );
        }
    }
    assert_running(pid);
    eprintln!("{in_vdso} of 20 samples stopped in the vdso");
    assert!(in_vdso > 0, "no sample stopped in the vdso");
}
