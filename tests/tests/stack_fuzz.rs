//! Fuzzing the CLI's unwinder with corrupt stacks (issue 12, "Speed and
//! robustness"): core files of real ranks (`gcore` of `deep_stack` and
//! `barrier_vs_recv` under Open MPI and MPICH) are mutated and read with
//! `mpiq stacks --core`:
//!
//! * registers in the `NT_PRSTATUS` notes: the pc set to garbage, to a data
//!   address, to a nearby address; the stack pointer to garbage, misaligned,
//!   or far away; the frame pointer to itself or to the stack pointer;
//! * words of the stack around the stack pointer: set to themselves (frame
//!   pointer loops), to each other (two-frame loops), to garbage, to
//!   addresses inside the stack (return addresses into data), or zero.
//!
//! Every random choice comes from the test kit's `Rng` (SplitMix64): a seed
//! is the whole case (`MPIQ_STACK_FUZZ_SEED=S MPIQ_STACK_FUZZ_CASES=1`
//! replays one). Each case checks: no panic and no crash of `mpiq`, no hang
//! (a case over 30 s fails), valid JSON, at most `MPIQ_MAX_FRAMES` frames
//! per thread, and a `note` on every stack that does not end at a thread's
//! natural outermost frame (`_start`, `clone3`, `clone`, `start_thread`).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use mpiq::testkit::Rng;
use mpiq_tests::frontends::cli_command;
use mpiq_tests::run::{run, run_within};
use mpiq_tests::{gdb, Example, Job, Mpi};
use serde_json::Value;

/// Frames a thread may have (the test sets `MPIQ_MAX_FRAMES` to it).
const MAX_FRAMES: usize = 300;

/// A case that takes longer hangs.
const HANG: Duration = Duration::from_secs(30);

/// Where a thread's stack naturally ends.
const OUTERMOST: [&str; 5] = ["_start", "clone3", "clone", "start_thread", "__clone"];

/// One core file and where its registers and stack are in the file.
struct Core {
    name: String,
    exe: PathBuf,
    bytes: Vec<u8>,
    /// File offsets of each thread's `pr_reg` (27 u64 in `user_regs_struct` order).
    regs: Vec<usize>,
    /// `(vaddr, file offset, size)` of every PT_LOAD with file data.
    loads: Vec<(u64, usize, usize)>,
}

fn u16_at(b: &[u8], at: usize) -> usize {
    u16::from_le_bytes([b[at], b[at + 1]]) as usize
}
fn u32_at(b: &[u8], at: usize) -> usize {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// Finds the `NT_PRSTATUS` notes and the loads of an x86_64 ELF core.
fn parse(name: String, exe: PathBuf, bytes: Vec<u8>) -> Core {
    assert_eq!(&bytes[..4], b"\x7fELF", "{name} is not ELF");
    let phoff = u64_at(&bytes, 32) as usize;
    let phentsize = u16_at(&bytes, 54);
    let phnum = u16_at(&bytes, 56);
    let mut regs = Vec::new();
    let mut loads = Vec::new();
    for i in 0..phnum {
        let ph = phoff + i * phentsize;
        let kind = u32_at(&bytes, ph);
        let offset = u64_at(&bytes, ph + 8) as usize;
        let vaddr = u64_at(&bytes, ph + 16);
        let filesz = u64_at(&bytes, ph + 32) as usize;
        match kind {
            1 if filesz > 0 => loads.push((vaddr, offset, filesz)),
            4 => {
                let mut at = offset;
                while at + 12 <= offset + filesz {
                    let namesz = u32_at(&bytes, at);
                    let descsz = u32_at(&bytes, at + 4);
                    let ty = u32_at(&bytes, at + 8);
                    let desc = at + 12 + namesz.div_ceil(4) * 4;
                    if ty == 1 && descsz >= 112 + 27 * 8 {
                        regs.push(desc + 112);
                    }
                    at = desc + descsz.div_ceil(4) * 4;
                }
            }
            _ => {}
        }
    }
    assert!(!regs.is_empty(), "{name}: no NT_PRSTATUS note");
    Core {
        name,
        exe,
        bytes,
        regs,
        loads,
    }
}

/// `user_regs_struct` indices.
const RBP: usize = 4;
const RIP: usize = 16;
const RSP: usize = 19;

impl Core {
    fn reg(&self, thread: usize, r: usize) -> u64 {
        u64_at(&self.bytes, self.regs[thread] + r * 8)
    }
    /// File offset of a virtual address with file data.
    fn file_at(&self, addr: u64) -> Option<usize> {
        self.loads
            .iter()
            .find(|(v, _, n)| addr >= *v && addr + 8 <= v + *n as u64)
            .map(|(v, off, _)| off + (addr - v) as usize)
    }
}

fn set(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// One mutated copy of a core, and what was done.
fn mutate(core: &Core, rng: &mut Rng) -> (Vec<u8>, Vec<String>) {
    let mut b = core.bytes.clone();
    let mut what = Vec::new();
    let t = rng.below(core.regs.len() as u64) as usize;
    let (rip, rsp, rbp) = (core.reg(t, RIP), core.reg(t, RSP), core.reg(t, RBP));
    for _ in 0..1 + rng.below(3) {
        match rng.below(10) {
            0 => {
                let v = *rng.pick(&[0, 1, u64::MAX, 0xdead_beef, rip ^ 0x10_0000, rsp]);
                set(&mut b, core.regs[t] + RIP * 8, v);
                what.push(format!("thread {t}: rip = {v:#x}"));
            }
            1 => {
                let v = rip.wrapping_add(rng.below(64)).wrapping_sub(32);
                set(&mut b, core.regs[t] + RIP * 8, v);
                what.push(format!("thread {t}: rip = {v:#x} (nearby)"));
            }
            2 => {
                let v = *rng.pick(&[0, 8, u64::MAX - 7, rsp + 3, rsp.wrapping_sub(1 << 20), rbp]);
                set(&mut b, core.regs[t] + RSP * 8, v);
                what.push(format!("thread {t}: rsp = {v:#x}"));
            }
            3 => {
                let v = *rng.pick(&[rsp, rbp.wrapping_add(8), 0, 1, rip]);
                set(&mut b, core.regs[t] + RBP * 8, v);
                what.push(format!("thread {t}: rbp = {v:#x}"));
            }
            _ => {
                // A word of the stack near the stack pointer.
                let addr = rsp.wrapping_add(8 * rng.below(256)) & !7;
                let Some(at) = core.file_at(addr) else { continue };
                let other = rsp.wrapping_add(8 * rng.below(256)) & !7;
                let v = match rng.below(6) {
                    0 => addr,
                    1 => other,
                    2 => rng.next_u64(),
                    3 => 0,
                    4 => rsp,
                    _ => rbp,
                };
                set(&mut b, at, v);
                if let Some(o) = core.file_at(other) {
                    if rng.chance(300) {
                        set(&mut b, o, addr);
                    }
                }
                what.push(format!("thread {t}: [{addr:#x}] = {v:#x}"));
            }
        }
    }
    (b, what)
}

/// `mpiq stacks --core FILE --exe EXE --json`.
fn stacks_of(core: &std::path::Path, exe: &std::path::Path) -> std::process::Command {
    cli_command(&[
        "stacks",
        "--core",
        &core.display().to_string(),
        "--exe",
        &exe.display().to_string(),
        "--json",
    ])
}

/// Checks one output of `mpiq stacks --json`; returns the problems.
fn check(v: &Value) -> Vec<String> {
    let mut bad = Vec::new();
    let Some(procs) = v.as_array() else {
        return vec![format!("not a list: {v}")];
    };
    for p in procs {
        for t in p["threads"].as_array().map(Vec::as_slice).unwrap_or_default() {
            let frames = t["frames"].as_array().map(Vec::as_slice).unwrap_or_default();
            if frames.len() > MAX_FRAMES {
                bad.push(format!("thread {}: {} frames", t["tid"], frames.len()));
            }
            let last = frames.last().and_then(|f| f["function"].as_str()).unwrap_or("");
            let natural = OUTERMOST.iter().any(|o| last == *o || last.ends_with(o));
            if !natural && t["note"].is_null() && p["error"].is_null() {
                bad.push(format!(
                    "thread {}: ends at '{last}' after {} frames without a note",
                    t["tid"],
                    frames.len()
                ));
            }
        }
    }
    bad
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[test]
fn stacks_survive_corrupt_stacks() {
    gdb::require_ptrace();
    let dir = std::env::temp_dir().join(format!("mpiq-stack-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut cores = Vec::new();
    for mpi in Mpi::all() {
        for (example, args) in [(Example::DeepStack, vec!["40"]), (Example::BarrierVsRecv, vec![])] {
            let job = Job::builder(mpi, example).args(args).start();
            std::thread::sleep(Duration::from_millis(500));
            let path = job.gcore(job.nprocs() - 1, &dir);
            let exe = mpiq_tests::build_example(mpi, example);
            cores.push(parse(format!("{mpi} {example}"), exe, std::fs::read(&path).unwrap()));
            let _ = std::fs::remove_file(path);
        }
    }
    // The cores as they are: natural ends everywhere, and no note.
    for c in &cores {
        let path = dir.join("case.core");
        std::fs::write(&path, &c.bytes).unwrap();
        let r = run(stacks_of(&path, &c.exe));
        assert!(r.success, "{}: {r}", c.name);
        let bad = check(&r.json_exact());
        assert!(bad.is_empty(), "{}: the unmutated core: {bad:?}\n{r}", c.name);
    }
    let cases = env_u64("MPIQ_STACK_FUZZ_CASES", 60);
    let first = env_u64("MPIQ_STACK_FUZZ_SEED", 0x5eed_0012);
    let mut failures = Vec::new();
    let mut slowest = Duration::ZERO;
    let mut noted = 0usize;
    for i in 0..cases {
        let seed = first.wrapping_add(i);
        let mut rng = Rng::new(seed);
        let c = &cores[rng.below(cores.len() as u64) as usize];
        let (bytes, what) = mutate(c, &mut rng);
        let path = dir.join("case.core");
        std::fs::write(&path, &bytes).unwrap();
        let mut cmd = stacks_of(&path, &c.exe);
        cmd.env("MPIQ_MAX_FRAMES", MAX_FRAMES.to_string());
        let start = Instant::now();
        let r = run_within(cmd, HANG);
        slowest = slowest.max(start.elapsed());
        let mut bad = Vec::new();
        if r.stderr.contains("panicked") || r.code().is_none() {
            bad.push(format!("crashed: {r}"));
        } else {
            match serde_json::from_str::<Value>(&r.stdout) {
                Ok(v) => {
                    noted += v.to_string().matches("\"note\":\"").count();
                    bad.extend(check(&v));
                }
                Err(e) if !r.success => {
                    // A core it refuses must say why.
                    if r.stderr.trim().is_empty() {
                        bad.push(format!("failed without a word ({e})"));
                    }
                }
                Err(e) => bad.push(format!("not JSON: {e}")),
            }
        }
        if !bad.is_empty() {
            failures.push(format!(
                "seed {seed:#x} ({}; {}): {}",
                c.name,
                what.join(", "),
                bad.join("; ")
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!(
        "stack fuzz: {cases} cases over {} cores, {noted} notes, slowest case {} ms, {} failures",
        cores.len(),
        slowest.as_millis(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
