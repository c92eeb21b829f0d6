//! Running a front end as a child process: its wall time, its peak memory
//! (the largest resident set of it and its descendants, from `wait4`), and
//! what it printed (the tests' one [`Run`], from `mpiq_tests::run`).

use std::ops::Deref;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use mpiq_tests::run::{run_within, Run};
use serde_json::Value;

/// How long one front-end process may take (a hang ends the benchmark).
const TIMEOUT: Duration = Duration::from_secs(3600);

/// What one child process did: how it ended and what it printed (the
/// [`Run`], also reached through `Deref`), and what the spawner measured.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Exit status and output of the front end.
    pub run: Run,
    /// Wall time from spawn to exit, milliseconds.
    pub wall_ms: f64,
    /// Peak resident set of the child or its largest waited-for descendant, KiB.
    pub peak_rss_kib: u64,
}

impl Deref for Outcome {
    type Target = Run;

    fn deref(&self) -> &Run {
        &self.run
    }
}

impl Outcome {
    /// What it printed, each stream cut to 4000 characters, for error
    /// messages.
    pub fn all(&self) -> String {
        let cut = |s: &str| s.chars().take(4000).collect::<String>();
        format!(
            "--- stdout ---\n{}\n--- stderr ---\n{}",
            cut(&self.run.stdout),
            cut(&self.run.stderr)
        )
    }
}

/// Runs `cmd` to completion (within an hour) with its output in temporary
/// files (no pipe can fill up), timing it and reading its peak memory.
///
/// The command runs under `mpiq-bench spawn` ([`spawn_main`]): a forked
/// child starts with its parent's memory high-water mark, which `exec` keeps
/// in `ru_maxrss`, so a child of this (large) process would report this
/// process's peak. The small spawner's children report their own.
pub fn run(cmd: Command, scratch: &Path) -> Outcome {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let rss_path = scratch.join(format!("rss.{n}"));
    let me = std::env::current_exe().expect("current_exe");
    let mut wrapped = Command::new(me);
    wrapped
        .arg("spawn")
        .arg(&rss_path)
        .arg("--")
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => wrapped.env(k, v),
            None => wrapped.env_remove(k),
        };
    }
    if let Some(dir) = cmd.get_current_dir() {
        wrapped.current_dir(dir);
    }
    let run = run_within(wrapped, TIMEOUT);
    let wall_ms = run.elapsed.as_secs_f64() * 1e3;
    let measured = std::fs::read_to_string(&rss_path).unwrap_or_default();
    let mut it = measured.split_whitespace();
    let peak_rss_kib = it.next().and_then(|v| v.parse().ok()).unwrap_or(0);
    let child_ms = it.next().and_then(|v| v.parse().ok()).unwrap_or(wall_ms);
    let _ = std::fs::remove_file(rss_path);
    Outcome {
        run,
        wall_ms: child_ms,
        peak_rss_kib,
    }
}

/// `mpiq-bench spawn RSS_FILE -- PROGRAM ARGS...`: runs the program with
/// this process's standard streams, writes `<peak RSS KiB> <wall ms>` of it
/// (and its waited-for descendants) to RSS_FILE, and exits as it did.
pub fn spawn_main(args: &[String]) -> i32 {
    let (Some(rss_file), Some("--"), Some(program)) = (args.first(), args.get(1).map(String::as_str), args.get(2))
    else {
        eprintln!("usage: mpiq-bench spawn RSS_FILE -- PROGRAM [ARGS...]");
        return 2;
    };
    let start = Instant::now();
    let child = match Command::new(program).args(&args[3..]).spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mpiq-bench spawn: {program}: {e}");
            return 127;
        }
    };
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value to be overwritten.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: waits for our own child; status and usage are valid out-pointers.
        let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if rc == pid {
            break;
        }
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return 1;
        }
    }
    // The child is reaped: std must not wait for it again.
    std::mem::forget(child);
    let ms = start.elapsed().as_secs_f64() * 1e3;
    let _ = std::fs::write(rss_file, format!("{} {ms}", usage.ru_maxrss));
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    }
}

/// The first JSON value in `text` that starts at the beginning of a line.
pub fn first_json(text: &str) -> Option<Value> {
    let start = if text.starts_with('{') {
        0
    } else {
        text.find("\n{")? + 1
    };
    serde_json::Deserializer::from_str(&text[start..])
        .into_iter::<Value>()
        .next()?
        .ok()
}

/// Counters `--stats` gives for one process.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Stats {
    /// `mqs_fetch_data` calls the library made.
    pub fetch_calls: u64,
    /// Reads that reached the host.
    pub host_reads: u64,
    /// Bytes the host read.
    pub host_read_bytes: u64,
    /// The bridge's own clock for the dump, microseconds.
    pub elapsed_us: u64,
}

impl Stats {
    /// The stats of the first process of a snapshot JSON, summed over all
    /// processes when `sum` is set.
    pub fn of_snapshot(v: &Value, sum: bool) -> Option<Stats> {
        let procs = v["processes"].as_array()?;
        let mut total = Stats::default();
        for p in procs.iter().take(if sum { usize::MAX } else { 1 }) {
            let s = &p["stats"];
            let get = |k: &str| s[k].as_u64();
            total.fetch_calls += get("fetch_calls")?;
            total.host_reads += get("host_reads")?;
            total.host_read_bytes += get("host_read_bytes")?;
            total.elapsed_us += get("elapsed_us")?;
        }
        Some(total)
    }

    /// From a `{"fetch_calls": ..}` object (the Python scripts print them).
    pub fn of_object(s: &Value) -> Option<Stats> {
        Some(Stats {
            fetch_calls: s["fetch_calls"].as_u64()?,
            host_reads: s["host_reads"].as_u64()?,
            host_read_bytes: s["host_read_bytes"].as_u64()?,
            elapsed_us: s["elapsed_us"].as_u64()?,
        })
    }
}

/// `/proc/loadavg`'s first three fields.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// This process's peak resident set, KiB (`VmHWM`).
pub fn own_peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

/// `mpiq collect --node NODE ARGS...` on `ranks` (pid, rank) of that node,
/// the `NODE PID RANK` table on its standard input as a launcher feeds it
/// (`configure` adds the environment): its output, and its wall time in
/// milliseconds. An error unless it said it
/// was done.
pub fn collect(
    node: &str,
    ranks: &[(u32, usize)],
    args: &[&str],
    configure: impl FnOnce(&mut Command),
) -> Result<(std::process::Output, f64), String> {
    let table: String = ranks.iter().map(|(pid, r)| format!("{node} {pid} {r}\n")).collect();
    let mut all = vec!["collect", "--node", node];
    all.extend_from_slice(args);
    let mut cmd = mpiq_tests::frontends::cli_command(&all);
    configure(&mut cmd);
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let started = Instant::now();
    let mut child = cmd.spawn().map_err(|e| format!("mpiq collect: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        std::io::Write::write_all(&mut stdin, table.as_bytes()).map_err(|e| e.to_string())?;
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    let ms = started.elapsed().as_secs_f64() * 1e3;
    let text = String::from_utf8_lossy(&out.stdout);
    if !text.contains("\"kind\":\"done\"") && !text.contains("\"done\"") {
        return Err(format!(
            "mpiq collect did not finish: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok((out, ms))
}
