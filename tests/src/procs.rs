use std::collections::{BTreeMap, BTreeSet};
use std::ffi::c_int;
use std::fmt;
use std::fs;
use std::time::{Duration, Instant};

/// One process, identified by pid *and* start time so that a recycled pid is never mistaken
/// for it (and never killed in its place).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Proc {
    /// The process id.
    pub pid: u32,
    /// Start time in clock ticks after boot (`/proc/PID/stat` field 22).
    pub start_time: u64,
    /// The command name (`/proc/PID/stat` field 2), e.g. `mpirun`, `hydra_pmi_proxy`, `ring`.
    pub name: String,
}

/// Ends a starter the test spawned in its own process group, and what it started: SIGKILL
/// to the group, then to each recorded process (ranks and proxies that left the group for
/// their own sessions; only while each is the very process recorded), then reaps the child.
pub fn end_job(child: &mut std::process::Child, recorded: &[Proc]) {
    let _ = std::process::Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", child.id())])
        .status();
    for p in recorded {
        p.kill();
    }
    let _ = child.kill();
    let _ = child.wait();
}

impl Proc {
    /// The process now running as `pid`, if any (zombies included).
    pub fn of(pid: u32) -> Option<Proc> {
        let stat = Stat::read(pid)?;
        Some(Proc {
            pid,
            start_time: stat.start_time,
            name: stat.name,
        })
    }

    /// Whether this very process still exists and has not exited (a zombie has exited).
    pub fn is_alive(&self) -> bool {
        Stat::read(self.pid).is_some_and(|s| s.start_time == self.start_time && !matches!(s.state, 'Z' | 'X' | 'x'))
    }

    /// Sends SIGKILL if this very process is still alive. Returns whether a signal was sent.
    pub fn kill(&self) -> bool {
        self.signal(SIGKILL)
    }

    /// Sends `sig` if this very process is still alive. Returns whether a signal was sent.
    pub(crate) fn signal(&self, sig: c_int) -> bool {
        self.is_alive() && send_signal(self.pid as c_int, sig)
    }
}

impl fmt::Display for Proc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.pid, self.name)
    }
}

/// The fields of `/proc/PID/stat` the harness uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stat {
    /// Command name, without the parentheses.
    pub name: String,
    /// State letter: `R`, `S`, `D`, `T` (stopped), `t` (tracing stop), `Z` (zombie), ...
    pub state: char,
    /// Parent pid.
    pub ppid: u32,
    /// Process group id.
    pub pgrp: u32,
    /// Session id.
    pub session: u32,
    /// Start time in clock ticks after boot.
    pub start_time: u64,
}

impl Stat {
    /// Reads `/proc/PID/stat`; `None` if the process does not exist.
    pub fn read(pid: u32) -> Option<Stat> {
        Self::parse(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
    }

    /// Parses the text of a `/proc/PID/stat` file.
    pub fn parse(text: &str) -> Option<Stat> {
        // The name may contain spaces and parentheses: it ends at the *last* ')'.
        let open = text.find('(')?;
        let close = text.rfind(')')?;
        let name = text.get(open + 1..close)?.to_string();
        let rest: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
        // rest[0] is field 3 (state); field N is rest[N - 3].
        Some(Stat {
            name,
            state: rest.first()?.chars().next()?,
            ppid: rest.get(1)?.parse().ok()?,
            pgrp: rest.get(2)?.parse().ok()?,
            session: rest.get(3)?.parse().ok()?,
            start_time: rest.get(19)?.parse().ok()?,
        })
    }
}

/// The state letter of `pid` (`/proc/PID/stat` field 3), if it exists.
pub fn state(pid: u32) -> Option<char> {
    Stat::read(pid).map(|s| s.state)
}

/// The pid tracing `pid` (`TracerPid:` in `/proc/PID/status`; 0 when none), if it exists.
pub fn tracer_pid(pid: u32) -> Option<u32> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("TracerPid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Whether `pid` exists and runs freely: not a zombie, not stopped (`T`) or in a tracing stop
/// (`t`), and not traced by anyone (`TracerPid` 0). Use it to check that a debugger detached
/// and let the process go.
pub fn is_running(pid: u32) -> bool {
    match state(pid) {
        None | Some('Z' | 'X' | 'x' | 'T' | 't') => false,
        Some(_) => tracer_pid(pid) == Some(0),
    }
}

/// Panics unless `pid` runs freely ([`is_running`]: not stopped, not in a
/// tracing stop, not traced) within 5 s (the kernel may take a moment to
/// resume a tracee whose tracer died); `what` says when, for the message.
pub fn assert_free(pid: u32, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (s, t) = (state(pid), tracer_pid(pid));
        if matches!(s, Some(c) if !matches!(c, 'T' | 't' | 'Z' | 'X' | 'x')) && t == Some(0) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: process {pid} is not running freely: state {s:?}, tracer {t:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The process a thread belongs to (`Tgid:` in `/proc/TID/status`).
pub fn tgid(tid: u32) -> Option<u32> {
    fs::read_to_string(format!("/proc/{tid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Every live process that descends from `root` (children, grandchildren, ...), found by
/// following parent pids in `/proc/*/stat`; `root` itself is not included. A snapshot: a
/// process reparented to init before the scan is missed.
pub fn descendants(root: u32) -> Vec<Proc> {
    let mut children: BTreeMap<u32, Vec<(u32, Stat)>> = BTreeMap::new();
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    for entry in dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if let Some(stat) = Stat::read(pid) {
            children.entry(stat.ppid).or_default().push((pid, stat));
        }
    }
    let mut found = Vec::new();
    let mut todo = vec![root];
    let mut seen = BTreeSet::from([root]);
    while let Some(parent) = todo.pop() {
        for (pid, stat) in children.remove(&parent).unwrap_or_default() {
            if seen.insert(pid) {
                todo.push(pid);
                if !matches!(stat.state, 'Z' | 'X' | 'x') {
                    found.push(Proc {
                        pid,
                        start_time: stat.start_time,
                        name: stat.name,
                    });
                }
            }
        }
    }
    found.sort();
    found
}

/// The processes among `procs` that are still alive.
pub fn survivors(procs: &[Proc]) -> Vec<Proc> {
    procs.iter().filter(|p| p.is_alive()).cloned().collect()
}

/// Waits up to `timeout` for every process in `procs` to be gone (exited; a zombie counts as
/// gone) and panics naming the survivors, with their state, if any is left.
pub fn assert_all_gone(procs: &[Proc], timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let left = survivors(procs);
        if left.is_empty() {
            return;
        }
        if Instant::now() >= deadline {
            let described: Vec<String> = left
                .iter()
                .map(|p| {
                    let s = Stat::read(p.pid);
                    format!(
                        "{p} state={} ppid={} pgrp={}",
                        s.as_ref().map_or('?', |s| s.state),
                        s.as_ref().map_or(0, |s| s.ppid),
                        s.as_ref().map_or(0, |s| s.pgrp),
                    )
                })
                .collect();
            panic!(
                "{} of {} processes the harness started survived {timeout:?} after being \
                 killed: {}",
                left.len(),
                procs.len(),
                described.join("; ")
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub(crate) const SIGKILL: c_int = 9;
pub(crate) const SIGSTOP: c_int = 19;

/// `kill(2)`; `pid` may be negative to name a process group. Returns whether it succeeded.
pub(crate) fn send_signal(pid: c_int, sig: c_int) -> bool {
    extern "C" {
        fn kill(pid: c_int, sig: c_int) -> c_int;
    }
    // SAFETY: kill(2) takes two integers and touches no memory of ours; any values are valid
    // (a bad pid or signal only makes it return -1).
    unsafe { kill(pid, sig) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_stat_line_with_a_tricky_name() {
        let line = "1234 (a) b (c)) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 \
                    987654 1000 100 0";
        let s = Stat::parse(line).unwrap();
        assert_eq!(s.name, "a) b (c)");
        assert_eq!(
            (s.state, s.ppid, s.pgrp, s.session, s.start_time),
            ('S', 1, 1234, 1234, 987654)
        );
    }

    #[test]
    fn this_process_is_running_and_identified() {
        let me = Proc::of(std::process::id()).unwrap();
        assert!(me.is_alive());
        assert!(is_running(me.pid));
        assert_eq!(tracer_pid(me.pid), Some(0));
        let recycled = Proc {
            start_time: me.start_time + 1,
            ..me
        };
        assert!(!recycled.is_alive(), "a different start time is a different process");
    }

    #[test]
    fn finds_a_child_as_descendant() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let found = descendants(std::process::id());
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            found.iter().any(|p| p.pid == child.id() && p.name == "sleep"),
            "{found:?}"
        );
        assert_all_gone(
            &found.into_iter().filter(|p| p.pid == child.id()).collect::<Vec<_>>(),
            Duration::from_secs(5),
        );
    }
}
