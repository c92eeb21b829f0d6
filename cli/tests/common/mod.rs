//! Shared by the reader tests: building the C fixtures (fixtures/README.md),
//! running them, and asking gdb the same questions as mpiq. Commands run
//! through the workspace's one runner, `mpiq_tests::run` (output, status,
//! timeout).
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use mpiq::Target;
use mpiq_tests::run::run;

/// Whether a tool is on PATH.
pub fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool} >/dev/null")])
        .status()
        .is_ok_and(|s| s.success())
}

/// gcc and gdb are both needed; tests skip (and say so) without them.
pub fn tools_present() -> bool {
    let ok = have("gcc") && have("gdb");
    if !ok {
        eprintln!("skipping: gcc and gdb are needed for this test");
    }
    ok
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Runs a build step; fails the test with its output unless it succeeds.
fn must_run(cmd: &mut Command) {
    let r = run(&mut *cmd);
    assert!(r.success, "{cmd:?} failed:\n{r}");
}

/// How a fixture is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// `gcc -g` (DWARF 5), PIE.
    Plain,
    /// `-gdwarf-4`, position-dependent executable.
    Dwarf4NoPie,
    /// `-gz`: compressed debug sections.
    Compressed,
    /// Library stripped of debug info and `.symtab`; `.gnu_debuglink` to
    /// `.debug/libfx.so.debug`.
    DebugLink,
    /// Both stripped; debug files only under `DIR/.build-id/` of a debug
    /// directory (`debugroot/` of the fixture directory).
    BuildId,
    /// Types moved into a dwz supplementary file.
    Dwz,
}

/// A built fixture.
pub struct Built {
    pub dir: PathBuf,
    pub exe: PathBuf,
    pub lib: PathBuf,
}

/// Builds the fixture in a fresh temporary directory.
pub fn build(variant: Variant) -> Built {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("mpiq-cli-fx-{}-{n}-{variant:?}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let src = fixtures();
    let mut cflags: Vec<&str> = vec!["-g", "-O0"];
    match variant {
        Variant::Dwarf4NoPie => cflags.push("-gdwarf-4"),
        Variant::Compressed => cflags.push("-gz=zlib"),
        _ => {}
    }
    let lib = dir.join("libfx.so");
    let exe = dir.join("fx");
    must_run(
        Command::new("gcc")
            .args(&cflags)
            .args(["-shared", "-fPIC", "-o"])
            .arg(&lib)
            .arg(src.join("libfx.c")),
    );
    let mut link = Command::new("gcc");
    link.args(&cflags);
    if variant == Variant::Dwarf4NoPie {
        link.args(["-no-pie", "-fno-pie"]);
    }
    must_run(
        link.arg("-o")
            .arg(&exe)
            .arg(src.join("main.c"))
            .arg(format!("-L{}", dir.display()))
            .args(["-lfx", "-Wl,-rpath,$ORIGIN"]),
    );
    match variant {
        Variant::DebugLink => {
            std::fs::create_dir_all(dir.join(".debug")).unwrap();
            let dbg = dir.join(".debug/libfx.so.debug");
            must_run(Command::new("objcopy").arg("--only-keep-debug").arg(&lib).arg(&dbg));
            must_run(Command::new("strip").arg("--strip-all").arg(&lib));
            // objcopy looks the file up by the name given, then records its basename.
            must_run(
                Command::new("objcopy")
                    .current_dir(dir.join(".debug"))
                    .arg("--add-gnu-debuglink=libfx.so.debug")
                    .arg(&lib),
            );
        }
        Variant::BuildId => {
            for f in [&lib, &exe] {
                let id = build_id(f);
                let d = dir.join("debugroot/.build-id").join(&id[..2]);
                std::fs::create_dir_all(&d).unwrap();
                let dbg = d.join(format!("{}.debug", &id[2..]));
                must_run(Command::new("objcopy").arg("--only-keep-debug").arg(f).arg(&dbg));
                must_run(Command::new("strip").arg("--strip-debug").arg(f));
            }
        }
        Variant::Dwz => {
            let common = dir.join("common.dwz");
            must_run(Command::new("dwz").arg("-m").arg(&common).arg(&lib).arg(&exe));
        }
        _ => {}
    }
    Built { dir, exe, lib }
}

impl Drop for Built {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The build id of a file, in hex (from `readelf -n`).
pub fn build_id(f: &Path) -> String {
    let out = run(Command::new("readelf").arg("-n").arg(f));
    out.stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .expect("fixture has a build id")
        .trim()
        .to_string()
}

/// A running fixture; killed on drop.
pub struct Running {
    pub child: Child,
}

impl Running {
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the fixture and waits until it printed `ready`.
pub fn start(b: &Built) -> Running {
    Running {
        child: spawn_ready(&b.exe),
    }
}

/// Starts `exe` and waits until it printed `ready` on its first line.
pub fn spawn_ready(exe: &std::path::Path) -> std::process::Child {
    spawn_ready_line(exe).0
}

/// [`spawn_ready`], with the whole first line (fixtures print values on it).
pub fn spawn_ready_line(exe: &std::path::Path) -> (std::process::Child, String) {
    let mut child = Command::new(exe)
        .stdout(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("ready"), "fixture said {line:?}");
    (child, line)
}

/// `gdb -nx -batch -p PID -ex 'set width 0' -ex COMMAND`: gdb's own view
/// of a process, for differential tests.
pub fn gdb_batch(pid: i32, command: &str) -> mpiq_tests::run::Run {
    gdb_batch_in(pid, None, command)
}

/// [`gdb_batch`] with gdb's `debug-file-directory` set to `debug_dir`
/// before it attaches (to see the objects as mpiq does with
/// `MPIQ_DEBUG_FILE_DIRECTORY`).
pub fn gdb_batch_in(pid: i32, debug_dir: Option<&std::path::Path>, command: &str) -> mpiq_tests::run::Run {
    let mut cmd = gdb_attaching(pid, debug_dir);
    cmd.args(["-ex", command]);
    mpiq_tests::run::run(&mut cmd)
}

/// `gdb -nx -batch -p PID -ex 'set width 0'`, reading separate debug files
/// from `debug_dir` if given (set before it attaches); the caller adds
/// what gdb is to do.
fn gdb_attaching(pid: i32, debug_dir: Option<&std::path::Path>) -> Command {
    let mut cmd = Command::new("gdb");
    cmd.args(["-nx", "-batch"]);
    if let Some(dir) = debug_dir {
        cmd.arg("-iex")
            .arg(format!("set debug-file-directory {}", dir.display()));
    }
    cmd.args(["-p", &pid.to_string(), "-ex", "set width 0"]);
    cmd
}

/// `gdb -p PID -ex 'gcore FILE'`: a core file of a running fixture, which
/// runs on afterwards.
pub fn gcore(pid: i32, core: &std::path::Path) {
    let r = gdb_batch(pid, &format!("gcore {}", core.display()));
    assert!(core.exists(), "gcore failed:\n{r}");
    assert_running(pid);
}

/// A question asked of both mpiq and gdb.
#[derive(Clone, Debug)]
pub enum Q {
    Symbol(&'static str),
    Function(&'static str),
    SizeOf(&'static str),
    OffsetOf(&'static str, &'static str),
}

impl Q {
    fn gdb(&self) -> String {
        match self {
            Q::Symbol(s) => format!("print &{s}"),
            Q::Function(s) => format!("print {s}"),
            Q::SizeOf(t) => format!("print sizeof({t})"),
            Q::OffsetOf(t, f) => format!("print &(({t}*)0)->{f}"),
        }
    }
}

/// The questions the fixtures answer.
pub fn questions() -> Vec<Q> {
    use Q::*;
    vec![
        Symbol("fx_global"),
        Symbol("fx_counter"),
        Symbol("fx_name"),
        Symbol("fx_name_ptr"),
        Symbol("fx_static"),
        Symbol("fx_union"),
        Symbol("main_global"),
        Symbol("main_struct"),
        Function("fx_func"),
        Function("main"),
        SizeOf("fx_node_t"),
        SizeOf("struct fx_node"),
        SizeOf("fx_const_node_t"),
        SizeOf("fx_opaque_t"),
        SizeOf("struct fx_opaque"),
        SizeOf("union fx_u"),
        SizeOf("enum fx_e"),
        SizeOf("struct fx_flex"),
        SizeOf("struct main_only"),
        SizeOf("int"),
        SizeOf("long"),
        OffsetOf("fx_node_t", "a"),
        OffsetOf("fx_node_t", "l"),
        OffsetOf("fx_node_t", "d"),
        OffsetOf("fx_node_t", "tag"),
        OffsetOf("fx_node_t", "s"),
        OffsetOf("fx_node_t", "next"),
        OffsetOf("fx_node_t", "arr"),
        OffsetOf("fx_node_t", "cv"),
        OffsetOf("fx_const_node_t", "cv"),
        OffsetOf("struct fx_node", "next"),
        OffsetOf("struct fx_flex", "data"),
        OffsetOf("union fx_u", "c"),
        OffsetOf("struct main_only", "y"),
        OffsetOf("struct fx_opaque", "u"),
    ]
}

/// mpiq's answer (through the `Target` trait, as the bridge asks).
pub fn ask_mpiq(t: &mut dyn Target, q: &Q) -> Option<u64> {
    match q {
        Q::Symbol(s) => t.find_symbol(s).unwrap(),
        Q::Function(s) => t.find_function(s).unwrap(),
        Q::SizeOf(ty) => t.find_type(ty).unwrap().and_then(|id| t.size_of(id).unwrap()),
        Q::OffsetOf(ty, f) => t.find_type(ty).unwrap().and_then(|id| t.field_offset(id, f).unwrap()),
    }
}

/// Parses the value of a gdb `$N = ...` line: the first hex number after
/// `=` (an address), else the decimal number.
fn gdb_value(line: &str) -> Option<u64> {
    let v = line.split_once(" = ")?.1;
    if let Some(i) = v.find("0x") {
        let hex: String = v[i + 2..].chars().take_while(char::is_ascii_hexdigit).collect();
        return u64::from_str_radix(&hex, 16).ok();
    }
    v.split_whitespace().next()?.parse().ok()
}

/// gdb's answers: `gdb -batch -nx` attached to `pid` (or on a core file:
/// `target` = ["-c", core, exe]); `extra` goes before the target (-iex ...).
pub fn ask_gdb(target: &[String], extra: &[String], qs: &[Q]) -> Vec<Option<u64>> {
    let mut cmd = Command::new("gdb");
    cmd.args(["-batch", "-nx"]).args(extra).args(target);
    for q in qs {
        cmd.arg("-ex").arg("echo @@\\n").arg("-ex").arg(q.gdb());
    }
    cmd.arg("-ex").arg("echo @@\\n");
    let out = run(cmd);
    let chunks: Vec<&str> = out.stdout.split("@@\n").skip(1).collect();
    assert!(chunks.len() >= qs.len(), "gdb output:\n{out}");
    chunks[..qs.len()]
        .iter()
        .map(|c| c.lines().find(|l| l.starts_with('$')).and_then(gdb_value))
        .collect()
}

/// `State` and `TracerPid` from /proc/PID/status.
pub fn state(pid: i32) -> (char, i32) {
    mpiq_cli::ptrace::proc_status(pid).expect("process exists")
}

/// Asserts the process runs on, untraced.
pub fn assert_running(pid: i32) {
    // A process in pause() is `S`; give the kernel a moment after detach.
    for _ in 0..100 {
        let (s, tracer) = state(pid);
        if s != 't' && s != 'T' && tracer == 0 {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("process {pid} is not running untraced: {:?}", state(pid));
}

/// A fixture built into a fresh temporary directory, removed on drop.
pub struct Exe {
    pub dir: std::path::PathBuf,
    pub exe: std::path::PathBuf,
}

impl Drop for Exe {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `gcc -g FLAGS... -o DIR/NAME tests/fixtures/NAME.c` into a fresh
/// temporary directory.
pub fn build_fixture(name: &str, flags: &[&str]) -> Exe {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("mpiq-{name}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join(name);
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/{name}.c"));
    let r = mpiq_tests::run::run(Command::new("gcc").arg("-g").args(flags).arg("-o").arg(&exe).arg(&src));
    assert!(r.success, "gcc failed:\n{r}");
    Exe { dir, exe }
}

/// The registers `$` names ask for in the comparisons with gdb: the stack
/// pointer, the pc and x86-64's callee-saved registers.
pub const REGISTERS: [&str; 8] = ["sp", "pc", "rbx", "rbp", "r12", "r13", "r14", "r15"];

/// One frame of gdb's stack with its registers.
#[derive(Clone, Debug)]
pub struct GdbFrameRegisters {
    /// The function (`??` if gdb names none).
    pub function: String,
    /// gdb's own `Frame.read_register` of each of [`REGISTERS`] and `rax`:
    /// `None` where gdb has no value (`<not saved>`, unavailable).
    pub gdb: std::collections::HashMap<String, Option<u64>>,
    /// What the gdb shim (gdb-python/mpiq_gdb/stacks.py `frame_value`)
    /// answers for the same registers as `$` names.
    pub shim: std::collections::HashMap<String, Option<u64>>,
}

/// Every frame of the main thread of `pid` (gdb's numbering: inlined
/// frames counted, as `Target::stacks`), innermost first, with its
/// registers from gdb and from the gdb shim's `frame_value`; gdb reads
/// separate debug files from `debug_dir` if given.
pub fn gdb_frame_registers(pid: i32, debug_dir: Option<&Path>) -> Vec<GdbFrameRegisters> {
    let shim_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../gdb-python");
    let names: Vec<&str> = REGISTERS.iter().copied().chain(["rax"]).collect();
    let script = std::env::temp_dir().join(format!("mpiq-registers-{}-{pid}.py", std::process::id()));
    std::fs::write(
        &script,
        format!(
            r#"import sys
sys.path.insert(0, {dir:?})
import gdb
from mpiq_gdb import stacks

NAMES = {names:?}
inferior = gdb.selected_inferior()
thread = gdb.selected_thread()
tid = thread.ptid[1] or thread.num


def raw(frame, name):
    try:
        value = frame.read_register(name)
        if value.is_optimized_out:
            return "-"
        return hex(int(value.cast(gdb.lookup_type("unsigned long"))) & ((1 << 64) - 1))
    except gdb.error:
        return "-"


rows = []
frame = gdb.newest_frame()
while frame is not None and len(rows) < 256:
    rows.append((frame.name() or "??", " ".join(f"{{n}}={{raw(frame, n)}}" for n in NAMES)))
    try:
        frame = frame.older()
    except gdb.error:
        frame = None
for i, (function, regs) in enumerate(rows):
    shim = []
    for n in NAMES:
        v = stacks.frame_value(inferior, tid, i, "$" + n)
        shim.append(f"shim.{{n}}=" + ("-" if v is None else hex(v)))
    print("REGS", i, function, regs, " ".join(shim))
"#,
            dir = shim_dir.display().to_string(),
        ),
    )
    .unwrap();
    let r = run(gdb_attaching(pid, debug_dir).arg("-x").arg(&script));
    let _ = std::fs::remove_file(&script);
    let value = |v: &str| match v {
        "-" => None,
        hex => Some(u64::from_str_radix(hex.trim_start_matches("0x"), 16).unwrap_or_else(|_| panic!("{hex}"))),
    };
    let frames: Vec<GdbFrameRegisters> = r
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("REGS "))
        .map(|l| {
            let mut words = l.split_whitespace();
            let _index = words.next();
            let function = words.next().unwrap_or("??").to_string();
            let mut gdb = std::collections::HashMap::new();
            let mut shim = std::collections::HashMap::new();
            for w in words {
                let (k, v) = w.split_once('=').unwrap_or_else(|| panic!("{l}"));
                match k.strip_prefix("shim.") {
                    Some(k) => shim.insert(k.to_string(), value(v)),
                    None => gdb.insert(k.to_string(), value(v)),
                };
            }
            GdbFrameRegisters { function, gdb, shim }
        })
        .collect();
    assert!(!frames.is_empty(), "gdb gave no registers:\n{r}");
    frames
}
