//! `mpiq-bench recorder`: what mpiq's flight recorder (`recorder/`, a PMPI
//! library preloaded into the ranks) adds to each MPI call, and the memory
//! it takes a rank (issue 28's goal: at most 50 ns median per call, at most
//! 1 % on a real application kernel).
//!
//! `bench/mpi/recorder_latency.c` (its header says how it measures), built
//! with each MPI's `mpicc`, runs on 2 ranks: MPI_Iprobe that finds nothing
//! and MPI_Test on MPI_REQUEST_NULL (the recorder's own cost, no data
//! moved), MPI_Send/MPI_Recv ping-pong at 8 B and 1 MiB, MPI_Allreduce of 1
//! and of 131,072 doubles, and a 2-D Jacobi kernel (halo exchange with
//! MPI_Irecv/MPI_Isend/MPI_Waitall, an MPI_Allreduce of the residual every
//! iteration). Three measurements, each with its own noise:
//!
//! 1. **Across runs**: whole runs alternate without and with `LD_PRELOAD` of
//!    the recorder (without, with, without, ..., without: `--rounds` runs
//!    with it, each between two without), so a drift of the machine
//!    cancels. Added = the median over rounds of (with − the mean of the two
//!    runs around it); noise = the median of |without − the next without|.
//! 2. **In a run**: every sample of a run is made through MPI_X or PMPI_X in
//!    turn (ABBA). Preloaded, MPI_X is the recorder's and PMPI_X the MPI's
//!    own: their median paired difference is what the recorder adds,
//!    measured against itself within milliseconds. Not preloaded, both reach
//!    the same code: that difference is this measurement's noise.
//! 3. **Instructions** (`valgrind --tool=callgrind`, unless
//!    `--no-callgrind`): rank 0 of the MPI_Iprobe and MPI_Test cases, the
//!    loop's instructions per call, without and with the recorder, and a
//!    second run without it (the count repeats exactly, whatever else the
//!    machine does). Valgrind runs `clock_gettime` as a system call, not in
//!    the vDSO, so the two clock reads of a recorded call count a few
//!    instructions there and take their real time only in 1. and 2.
//! 4. **Two control builds**, in every round beside the recorder, measured
//!    as in 2.: the recorder built with `-DMPIQ_RECORDER_PASS_THROUGH`
//!    (every wrapper, no record: what any PMPI layer costs by being there,
//!    the extra call and how it shifts the MPI's own timing), and with
//!    `-DMPIQ_RECORDER_NO_CLOCK` (every record, no clock read: what the
//!    call's two clock reads cost). One run's in-run figure moves by tens
//!    of ns from run to run under MPICH (the same library, the same
//!    machine), so each is a median over the rounds.
//!
//! Memory per rank: the size of the recorder's tables (the ELF symbol
//! `mpiq_recorder`, and the library's `.bss`: they are static), the bytes of
//! them resident in each rank after the benchmark (`mincore(2)` over their
//! pages, in the rank: the pages the recorder touched), and the ranks'
//! VmHWM with the recorder minus without.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use mpiq_tests::run::run_within;
use mpiq_tests::{build_recorder, build_recorder_with, Mpi};

use crate::proc;
use crate::report::median;

/// The cases of `recorder_latency.c`, in its order.
pub const CASES: [&str; 7] = [
    "iprobe",
    "test_null",
    "pingpong_8",
    "pingpong_1m",
    "allreduce_1",
    "allreduce_128k",
    "kernel",
];

/// What each case is, for the table.
fn describe(case: &str) -> &'static str {
    match case {
        "iprobe" => "MPI_Iprobe, nothing there",
        "test_null" => "MPI_Test(MPI_REQUEST_NULL)",
        "pingpong_8" => "ping-pong Send/Recv 8 B",
        "pingpong_1m" => "ping-pong Send/Recv 1 MiB",
        "allreduce_1" => "MPI_Allreduce 1 double",
        "allreduce_128k" => "MPI_Allreduce 128 Ki doubles",
        "kernel" => "2-D Jacobi kernel",
        _ => "?",
    }
}

/// One run must not take longer (a hang ends the benchmark).
const RUN_TIMEOUT: Duration = Duration::from_secs(900);

struct Opts {
    mpis: Vec<Mpi>,
    rounds: usize,
    quick: bool,
    callgrind: bool,
    callgrind_iters: u64,
    kernel_n: Option<u32>,
}

/// One case's line of one run (`case NAME k=v ...`), ns per call.
#[derive(Clone, Debug, Default)]
struct CaseLine {
    calls: f64,
    iters: f64,
    mpi_ns: f64,
    diff_ns: f64,
    mpi_iter_ns: f64,
}

/// One rank's `memory` line.
#[derive(Clone, Debug, Default)]
struct MemLine {
    recorder: bool,
    block_bytes: f64,
    resident_bytes: f64,
    recorded_calls: f64,
    vmhwm_kib: f64,
}

/// What one run printed.
struct RunOut {
    cases: BTreeMap<String, CaseLine>,
    memory: Vec<MemLine>,
}

/// The runs of one MPI.
struct Measured {
    mpi: Mpi,
    /// Without the recorder: one more than `with`, around each of them.
    without: Vec<RunOut>,
    with: Vec<RunOut>,
    /// A run a round with the recorder's pass-through build preloaded (its
    /// wrappers, recording nothing): what the in-run difference is when
    /// only the interposition is there.
    pass_through: Vec<RunOut>,
    /// A run a round with the build that records and reads no clock.
    no_clock: Vec<RunOut>,
    /// (case, instructions per call without, with, without again), when
    /// callgrind ran.
    callgrind: Vec<(String, f64, f64, Option<f64>)>,
}

fn parse_opts(args: &[String]) -> Result<Opts, String> {
    let mut o = Opts {
        mpis: Vec::new(),
        rounds: 0,
        quick: false,
        callgrind: true,
        callgrind_iters: 0,
        kernel_n: None,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().cloned().ok_or_else(|| format!("{a} needs a value"));
        let num = |v: String| v.replace('_', "").parse::<u64>().map_err(|_| format!("bad {a}: {v}"));
        match a.as_str() {
            "--mpi" => {
                o.mpis = val()?
                    .split(',')
                    .map(crate::stacks::parse_mpi)
                    .collect::<Result<_, _>>()?
            }
            "--rounds" => o.rounds = num(val()?)?.max(1) as usize,
            "--quick" => o.quick = true,
            "--no-callgrind" => o.callgrind = false,
            "--callgrind-iters" => o.callgrind_iters = num(val()?)?.max(1),
            "--kernel-n" => o.kernel_n = Some(num(val()?)?.max(2) as u32),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if o.rounds == 0 {
        o.rounds = if o.quick { 1 } else { 15 };
    }
    if o.callgrind_iters == 0 {
        o.callgrind_iters = if o.quick { 20_000 } else { 200_000 };
    }
    if o.mpis.is_empty() {
        // The test bed's two and Debian's Open MPI, those installed.
        for m in [Mpi::OpenMpi, Mpi::Mpich, Mpi::DebianOpenMpi] {
            if m.is_installed() {
                o.mpis.push(m);
            } else {
                eprintln!("mpiq-bench recorder: {m} is not installed, left out");
            }
        }
        if o.mpis.is_empty() {
            return Err("no MPI installed (scripts/testbed, or apt-get install openmpi-bin libopenmpi-dev)".into());
        }
    }
    Ok(o)
}

/// `recorder_latency` built with `mpi`'s mpicc into `scratch` (-O2; the
/// recorder's header for its `calls_started`).
fn build(mpi: Mpi, scratch: &Path) -> PathBuf {
    let bench = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = bench.join("mpi/recorder_latency.c");
    let include = bench.join("../recorder");
    let out = scratch.join(mpi.name()).join("recorder_latency");
    let args: Vec<std::ffi::OsString> = vec![
        "-O2".into(),
        "-Wall".into(),
        format!("-I{}", include.display()).into(),
        src.into_os_string(),
        "-ldl".into(),
    ];
    mpiq_tests::example::compile(&mpi.mpicc(), &args, &out, &format!("recorder_latency with {mpi}"));
    out
}

/// `k=v` fields of a line, numbers.
fn fields(line: &str) -> BTreeMap<&str, f64> {
    line.split_whitespace()
        .filter_map(|w| {
            let (k, v) = w.split_once('=')?;
            Some((k, v.parse().ok()?))
        })
        .collect()
}

fn parse_run(stdout: &str) -> RunOut {
    let mut out = RunOut {
        cases: BTreeMap::new(),
        memory: Vec::new(),
    };
    for line in stdout.lines() {
        let f = fields(line);
        let get = |k: &str| f.get(k).copied().unwrap_or(f64::NAN);
        if let Some(rest) = line.strip_prefix("case ") {
            let name = rest.split_whitespace().next().unwrap_or("").to_string();
            out.cases.insert(
                name,
                CaseLine {
                    calls: get("calls"),
                    iters: get("iters"),
                    mpi_ns: get("mpi_ns"),
                    diff_ns: get("diff_ns"),
                    mpi_iter_ns: get("mpi_iter_ns"),
                },
            );
        } else if line.starts_with("memory ") {
            out.memory.push(MemLine {
                recorder: get("recorder") == 1.0,
                block_bytes: get("block_bytes"),
                resident_bytes: get("resident_bytes"),
                recorded_calls: get("recorded_calls"),
                vmhwm_kib: get("vmhwm_kib"),
            });
        }
    }
    out
}

/// `LD_PRELOAD` of `lib`, or none.
fn preload(cmd: &mut Command, lib: Option<&Path>) {
    match lib {
        Some(l) => cmd.env("LD_PRELOAD", l),
        None => cmd.env_remove("LD_PRELOAD"),
    };
}

/// One run of every case (`only`: one case), checked: every case printed,
/// and the recorder in both ranks exactly when preloaded.
fn run_once(mpi: Mpi, exe: &Path, lib: Option<&Path>, args: &[String]) -> Result<RunOut, String> {
    let out = run_cases(mpi, exe, lib, args)?;
    check_memory(&out, lib.is_some()).map_err(|e| format!("{mpi}: {e}"))?;
    Ok(out)
}

/// One run of every case, each case checked printed.
fn run_cases(mpi: Mpi, exe: &Path, lib: Option<&Path>, args: &[String]) -> Result<RunOut, String> {
    let mut cmd = mpi.starter_command(2, exe, args);
    preload(&mut cmd, lib);
    let r = run_within(cmd, RUN_TIMEOUT);
    if !r.success {
        return Err(format!("recorder_latency under {mpi} failed:\n{}", r.all()));
    }
    let out = parse_run(&r.stdout);
    for case in CASES {
        let ok = out
            .cases
            .get(case)
            .is_some_and(|c| c.mpi_ns.is_finite() && c.iters >= 1.0);
        if !ok {
            return Err(format!("recorder_latency under {mpi} printed no {case}:\n{}", r.all()));
        }
    }
    Ok(out)
}

fn check_memory(out: &RunOut, preloaded: bool) -> Result<(), String> {
    if out.memory.len() != 2 {
        return Err("recorder_latency printed no memory line of each rank".into());
    }
    for (r, m) in out.memory.iter().enumerate() {
        if m.recorder != preloaded {
            return Err(format!(
                "rank {r} {} the recorder",
                if preloaded { "did not load" } else { "has" }
            ));
        }
        if preloaded && (m.recorded_calls.is_nan() || m.recorded_calls <= 0.0) {
            return Err(format!("rank {r}: the recorder recorded no call"));
        }
    }
    Ok(())
}

/// Instructions per call of `case` on rank 0 under callgrind (counted in
/// the case's loop function alone, `--toggle-collect`); rank 1 runs as it
/// is.
fn callgrind_once(mpi: Mpi, exe: &Path, lib: Option<&Path>, case: &str, iters: u64, out: &Path) -> Result<f64, String> {
    let args: Vec<String> = [
        "--only",
        case,
        "--iters",
        &iters.to_string(),
        "--pairs",
        "1",
        "--api",
        "mpi",
    ]
    .map(String::from)
    .to_vec();
    let mut cmd = Command::new(mpi.starter());
    cmd.args(mpi.starter_options())
        .args(["-n", "1", "valgrind", "--tool=callgrind"])
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(format!("--toggle-collect=loop_{case}"))
        .arg(exe)
        .args(&args)
        .args([":", "-n", "1"])
        .arg(exe)
        .args(&args);
    preload(&mut cmd, lib);
    let r = run_within(cmd, RUN_TIMEOUT);
    if !r.success {
        return Err(format!("callgrind of {case} under {mpi} failed:\n{}", r.all()));
    }
    check_memory(&parse_run(&r.stdout), lib.is_some()).map_err(|e| format!("{mpi}, callgrind: {e}"))?;
    let text = std::fs::read_to_string(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let total: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("totals:").or_else(|| l.strip_prefix("summary:")))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .ok_or_else(|| format!("{}: no totals", out.display()))?;
    Ok(total / iters as f64)
}

fn measure(mpi: Mpi, lib: &Path, o: &Opts, scratch: &Path) -> Result<Measured, String> {
    let exe = build(mpi, scratch);
    let mut args: Vec<String> = Vec::new();
    if o.quick {
        args.push("--quick".into());
    }
    if let Some(n) = o.kernel_n {
        args.extend(["--kernel-n".into(), n.to_string()]);
    }
    let mut m = Measured {
        mpi,
        without: Vec::new(),
        with: Vec::new(),
        pass_through: Vec::new(),
        no_clock: Vec::new(),
        callgrind: Vec::new(),
    };
    // recorder.c's claim() and now_ns(): the same wrappers and no record;
    // every record and no clock.
    let pass = build_recorder_with(Some("MPIQ_RECORDER_PASS_THROUGH"));
    let no_clock = build_recorder_with(Some("MPIQ_RECORDER_NO_CLOCK"));
    eprintln!(
        "[{}] {mpi}: {} runs, without and with the recorder in turn, and its two control builds (load {})",
        crate::now(),
        4 * o.rounds + 1,
        proc::loadavg()
    );
    m.without.push(run_once(mpi, &exe, None, &args)?);
    for round in 0..o.rounds {
        m.with.push(run_once(mpi, &exe, Some(lib), &args)?);
        m.pass_through.push(run_cases(mpi, &exe, Some(&pass), &args)?);
        m.no_clock.push(run_cases(mpi, &exe, Some(&no_clock), &args)?);
        m.without.push(run_once(mpi, &exe, None, &args)?);
        eprintln!(
            "[{}]   round {}: iprobe {:.1} ns without, {:.1} with (load {})",
            crate::now(),
            round + 1,
            m.without[round].cases["iprobe"].mpi_ns,
            m.with[round].cases["iprobe"].mpi_ns,
            proc::loadavg()
        );
    }
    if o.callgrind && which("valgrind") {
        let cases: &[&str] = if o.quick { &["iprobe"] } else { &["iprobe", "test_null"] };
        for case in cases {
            eprintln!("[{}]   callgrind: {case} (load {})", crate::now(), proc::loadavg());
            let file = |tag: &str| scratch.join(format!("callgrind-{}-{case}-{tag}.out", mpi.name()));
            let it = o.callgrind_iters;
            let without = callgrind_once(mpi, &exe, None, case, it, &file("without"))?;
            let with = callgrind_once(mpi, &exe, Some(lib), case, it, &file("with"))?;
            let again = if o.quick {
                None
            } else {
                Some(callgrind_once(mpi, &exe, None, case, it, &file("again"))?)
            };
            m.callgrind.push((case.to_string(), without, with, again));
        }
    } else if o.callgrind {
        eprintln!("mpiq-bench recorder: no valgrind on PATH: no instruction counts");
    }
    Ok(m)
}

fn which(name: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
        .unwrap_or(false)
}

/// The figures of one case of one MPI.
struct Figures {
    calls: f64,
    without: f64,
    with: f64,
    added: f64,
    noise: f64,
    in_run: f64,
    in_run_noise: f64,
    /// In the pass-through runs: MPI_X − PMPI_X with the wrappers alone.
    wrapper: f64,
    /// In the runs of the build that reads no clock.
    no_clock: f64,
    /// The kernel: ns per iteration, without and with.
    iter_without: f64,
    iter_with: f64,
}

fn figures(m: &Measured, case: &str) -> Figures {
    let get =
        |runs: &[RunOut], f: fn(&CaseLine) -> f64| -> Vec<f64> { runs.iter().map(|r| f(&r.cases[case])).collect() };
    let without = get(&m.without, |c| c.mpi_ns);
    let with = get(&m.with, |c| c.mpi_ns);
    let added: Vec<f64> = with
        .iter()
        .enumerate()
        .map(|(i, w)| w - (without[i] + without[i + 1]) / 2.0)
        .collect();
    let noise: Vec<f64> = without.windows(2).map(|w| (w[1] - w[0]).abs()).collect();
    Figures {
        calls: m.with[0].cases[case].calls,
        without: median(&without),
        with: median(&with),
        added: median(&added),
        noise: median(&noise),
        in_run: median(&get(&m.with, |c| c.diff_ns)),
        in_run_noise: median(&get(&m.without, |c| c.diff_ns.abs())),
        wrapper: median(&get(&m.pass_through, |c| c.diff_ns)),
        no_clock: median(&get(&m.no_clock, |c| c.diff_ns)),
        iter_without: median(&get(&m.without, |c| c.mpi_iter_ns)),
        iter_with: median(&get(&m.with, |c| c.mpi_iter_ns)),
    }
}

fn ns(x: f64) -> String {
    if x.is_nan() {
        "–".into()
    } else if x.abs() >= 1000.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

fn signed(x: f64) -> String {
    if x >= 0.0 {
        format!("+{}", ns(x))
    } else {
        ns(x)
    }
}

fn pct(x: f64) -> String {
    if x.is_nan() {
        "–".into()
    } else {
        format!("{x:+.2} %")
    }
}

/// The recorder's tables from its ELF file: the size of the symbol
/// `mpiq_recorder` and of the `.bss` section.
fn elf_sizes(lib: &Path) -> Result<(u64, u64), String> {
    let d = std::fs::read(lib).map_err(|e| format!("{}: {e}", lib.display()))?;
    let bad = || format!("{}: not a 64-bit little-endian ELF file", lib.display());
    let u16_at = |o: usize| d.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]) as usize);
    let u32_at = |o: usize| {
        d.get(o..o + 4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap_or([0; 4])) as usize)
    };
    let u64_at = |o: usize| {
        d.get(o..o + 8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
    };
    if d.get(0..6) != Some(b"\x7fELF\x02\x01") {
        return Err(bad());
    }
    let shoff = u64_at(0x28).ok_or_else(bad)? as usize;
    let (shentsize, shnum, shstrndx) = (
        u16_at(0x3a).ok_or_else(bad)?,
        u16_at(0x3c).ok_or_else(bad)?,
        u16_at(0x3e).ok_or_else(bad)?,
    );
    let sh = |i: usize| shoff + i * shentsize;
    let shstr = u64_at(sh(shstrndx) + 24).ok_or_else(bad)? as usize;
    let cstr = |o: usize| -> &[u8] {
        let s = d.get(o..).unwrap_or(&[]);
        &s[..s.iter().position(|&b| b == 0).unwrap_or(s.len())]
    };
    let (mut bss, mut sym) = (0, 0);
    for i in 0..shnum {
        let h = sh(i);
        let name = cstr(shstr + u32_at(h).ok_or_else(bad)?);
        let kind = u32_at(h + 4).ok_or_else(bad)?;
        let (offset, size) = (
            u64_at(h + 24).ok_or_else(bad)? as usize,
            u64_at(h + 32).ok_or_else(bad)?,
        );
        if name == b".bss" {
            bss = size;
        }
        // SHT_SYMTAB, SHT_DYNSYM: 24-byte symbols, names in section sh_link.
        if kind == 2 || kind == 11 {
            let strtab = u64_at(sh(u32_at(h + 40).ok_or_else(bad)?) + 24).ok_or_else(bad)? as usize;
            for s in (offset..offset + size as usize).step_by(24) {
                if cstr(strtab + u32_at(s).ok_or_else(bad)?) == b"mpiq_recorder" {
                    sym = u64_at(s + 16).ok_or_else(bad)?;
                }
            }
        }
    }
    Ok((sym, bss))
}

fn kib(bytes: f64) -> String {
    format!("{:.0} KiB", bytes / 1024.0)
}

fn report(all: &[Measured], lib: &Path, o: &Opts, load_before: &str) -> String {
    let mut s = String::new();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let _ = writeln!(
        s,
        "\nmpiq's flight recorder, preloaded: what it adds to each MPI call (2 ranks, {cores} cores; \
         {} rounds{}; load average before {load_before}, after {})\n",
        o.rounds,
        if o.quick { ", --quick" } else { "" },
        proc::loadavg()
    );
    let _ = writeln!(
        s,
        "ns per call, medians. without, with: runs without and with LD_PRELOAD of the recorder, in turn. \
         added (runs): median over rounds of (with − the mean of the runs without around it); noise (runs): \
         median |without − the next without|. added (in run): MPI_X − PMPI_X, sample by sample, in the runs \
         with the recorder; noise (in run): the same in the runs without it (both reach the same code); \
         wrappers alone (in run): the same in the runs of the recorder built to record nothing \
         (-DMPIQ_RECORDER_PASS_THROUGH: what standing between the program and its MPI costs by itself); \
         no clock (in run): the same in the runs of the recorder built to read no clock \
         (-DMPIQ_RECORDER_NO_CLOCK; its gap to added (in run) is what the two clock reads a call cost).\n"
    );
    let _ = writeln!(
        s,
        "| MPI | case | calls/iter | without | with | added (runs) | added % | noise (runs) | added (in run) | noise (in run) | wrappers alone (in run) | no clock (in run) |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|---|---|");
    for m in all {
        for case in CASES {
            let f = figures(m, case);
            let _ = writeln!(
                s,
                "| {} | {case} ({}) | {} | {} | {} | {} | {} | ±{} | {} | ±{} | {} | {} |",
                m.mpi,
                describe(case),
                f.calls,
                ns(f.without),
                ns(f.with),
                signed(f.added),
                pct(100.0 * f.added / f.without),
                ns(f.noise),
                signed(f.in_run),
                ns(f.in_run_noise),
                signed(f.wrapper),
                signed(f.no_clock),
            );
        }
    }
    let _ = writeln!(
        s,
        "\nThe kernel (2-D Jacobi, halo exchange and an MPI_Allreduce every iteration), µs per iteration:\n"
    );
    let _ = writeln!(
        s,
        "| MPI | grid a rank | MPI calls/iter | without | with | overhead (runs) | noise (runs) | overhead (in run) | noise (in run) |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|");
    let grid = o.kernel_n.unwrap_or(if o.quick { 128 } else { 256 });
    for m in all {
        let f = figures(m, "kernel");
        let pc = |x: f64| pct(100.0 * x / f.without);
        let _ = writeln!(
            s,
            "| {} | {grid} × {grid} | {} | {:.1} | {:.1} | {} | ±{} | {} | ±{} |",
            m.mpi,
            f.calls,
            f.iter_without / 1e3,
            f.iter_with / 1e3,
            pc(f.added),
            pc(f.noise).trim_start_matches('+'),
            pc(f.in_run),
            pc(f.in_run_noise).trim_start_matches('+'),
        );
    }
    if all.iter().any(|m| !m.callgrind.is_empty()) {
        let _ = writeln!(
            s,
            "\nInstructions per call on rank 0 (valgrind --tool=callgrind, the loop's instructions / iterations, \
             {} iterations; clock_gettime counts as valgrind runs it, a system call, not the vDSO's instructions):\n",
            o.callgrind_iters
        );
        let _ = writeln!(s, "| MPI | case | without | with | added | without, again |");
        let _ = writeln!(s, "|---|---|---|---|---|---|");
        for m in all {
            for (case, without, with, again) in &m.callgrind {
                let _ = writeln!(
                    s,
                    "| {} | {case} | {without:.1} | {with:.1} | {:+.1} | {} |",
                    m.mpi,
                    with - without,
                    again.map_or("–".into(), |a| format!("{a:.1}")),
                );
            }
        }
    }
    let _ = writeln!(s, "\nMemory per rank:\n");
    match elf_sizes(lib) {
        Ok((sym, bss)) => {
            let _ = writeln!(
                s,
                "- static tables: `mpiq_recorder` {sym} B ({}), the library's .bss {bss} B ({}) \
                 (allocated at load, resident only where written)",
                kib(sym as f64),
                kib(bss as f64)
            );
        }
        Err(e) => {
            let _ = writeln!(s, "- static tables: {e}");
        }
    }
    for m in all {
        let mem = |runs: &[RunOut], r: usize, f: fn(&MemLine) -> f64| -> f64 {
            median(&runs.iter().filter_map(|x| x.memory.get(r).map(f)).collect::<Vec<_>>())
        };
        let ranks: Vec<String> = (0..2)
            .map(|r| {
                format!(
                    "rank {r} {} of {} resident ({:.0} calls recorded), VmHWM {:+.0} KiB with the recorder",
                    kib(mem(&m.with, r, |x| x.resident_bytes)),
                    kib(mem(&m.with, r, |x| x.block_bytes)),
                    mem(&m.with, r, |x| x.recorded_calls),
                    mem(&m.with, r, |x| x.vmhwm_kib) - mem(&m.without, r, |x| x.vmhwm_kib),
                )
            })
            .collect();
        let _ = writeln!(s, "- {}: {}", m.mpi, ranks.join("; "));
    }
    let _ = writeln!(
        s,
        "\nGoals (issue 28): at most 50 ns median per call, at most 1 % on a real kernel:\n"
    );
    for m in all {
        let small: Vec<String> = ["iprobe", "test_null", "pingpong_8", "allreduce_1"]
            .iter()
            .map(|c| {
                let f = figures(m, c);
                format!(
                    "{c} {} ns (runs {}; wrappers alone {}, no clock {})",
                    signed(f.in_run),
                    signed(f.added),
                    signed(f.wrapper),
                    signed(f.no_clock)
                )
            })
            .collect();
        let k = figures(m, "kernel");
        let _ = writeln!(
            s,
            "- {}: added per call, in run: {}; kernel {} (in run), {} (runs)",
            m.mpi,
            small.join(", "),
            pct(100.0 * k.in_run / k.without),
            pct(100.0 * k.added / k.without),
        );
    }
    s
}

/// `mpiq-bench recorder [--mpi openmpi,mpich,debian-openmpi] [--rounds 15]
/// [--quick] [--no-callgrind] [--callgrind-iters N] [--kernel-n N]`: prints
/// Markdown tables.
pub fn main(args: &[String], scratch: &Path) -> Result<(), String> {
    let o = parse_opts(args)?;
    let load_before = proc::loadavg();
    let lib = build_recorder();
    eprintln!("mpiq-bench recorder: the recorder is {}", lib.display());
    let mut all = Vec::new();
    for &mpi in &o.mpis {
        all.push(measure(mpi, &lib, &o, scratch)?);
    }
    print!("{}", report(&all, &lib, &o, &load_before));
    Ok(())
}
