//! The processes of a job, from `/proc`: each known by pid *and* start
//! time, so that a pid the kernel gave to another process since is never
//! signalled in its place.

use std::collections::{BTreeMap, BTreeSet};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

mod syscalls;

/// What the kernel says of `pid` now (its state, the kernel function it
/// sleeps in, its CPU time): read before mpiq stops it, which would
/// otherwise be all there is to read.
pub fn os_state(pid: i32) -> Option<mpiq::OsState> {
    let stat = Stat::of(pid)?;
    let wchan = std::fs::read_to_string(format!("/proc/{pid}/wchan"))
        .ok()
        .map(|w| w.trim().to_string())
        .filter(|w| !w.is_empty() && w != "0");
    let sched = sched_us(pid);
    let asleep = matches!(stat.state, 'S' | 'D');
    Some(mpiq::OsState {
        state: stat.state.to_string(),
        syscall: asleep.then(|| syscall_of(pid)).flatten(),
        wchan: wchan.filter(|_| stat.state != 'R'),
        cpu_ms: stat.cpu_ms(),
        io_bytes: io_bytes(pid),
        run_us: sched.map(|(run, _)| run),
        wait_us: sched.map(|(_, wait)| wait),
    })
}

/// The system call the main thread of `pid` is in, by name (`openat`),
/// from the first field of `/proc/PID/syscall`: `None` when it runs, or
/// sleeps outside a system call (`-1`), or the file cannot be read. Only
/// the number is used, never the call's arguments.
fn syscall_of(pid: i32) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/syscall")).ok()?;
    let nr: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(syscalls::name(nr))
}

/// Time on a CPU and time waiting for one, in microseconds, summed over
/// every thread of `pid` (the first two fields of each thread's
/// `/proc/PID/task/TID/schedstat`, in nanoseconds); `None` when the kernel
/// keeps no such counters.
fn sched_us(pid: i32) -> Option<(u64, u64)> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut sum: Option<(u64, u64)> = None;
    for t in tasks.flatten() {
        if let Some([run, wait, _]) = schedstat(&t.path()) {
            let (r, w) = sum.unwrap_or_default();
            sum = Some((r.saturating_add(run / 1000), w.saturating_add(wait / 1000)));
        }
    }
    sum
}

/// A thread's `schedstat` (its folder under `/proc/PID/task/`): time on a
/// CPU (ns), time waiting for one (ns), and how many times it was put on
/// one; `None` when the kernel keeps no such counters or the thread is gone.
fn schedstat(task: &std::path::Path) -> Option<[u64; 3]> {
    let text = std::fs::read_to_string(task.join("schedstat")).ok()?;
    let mut f = text.split_whitespace().map(|v| v.parse::<u64>().ok());
    Some([f.next()??, f.next()??, f.next()??])
}

/// How many times thread `tid` of `pid` has been put on a CPU (the third
/// field of `/proc/PID/task/TID/schedstat`, counted as it is switched in;
/// its time on a CPU, the first, moves only at the scheduler's ticks while
/// it runs); `None` when the kernel keeps no such counter or the thread is
/// gone.
pub fn thread_runs(pid: i32, tid: i32) -> Option<u64> {
    schedstat(std::path::Path::new(&format!("/proc/{pid}/task/{tid}"))).map(|[.., runs]| runs)
}

/// `rchar` + `wchar` of `/proc/PID/io`: every byte the process read or
/// wrote so far, through any call (only the counters are read).
fn io_bytes(pid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
    let field = |name: &str| -> Option<u64> {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
    };
    Some(field("rchar:")?.saturating_add(field("wchar:")?))
}

/// One process: its pid and start time (clock ticks after boot).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Proc {
    /// The process id.
    pub pid: i32,
    /// `/proc/PID/stat` field 22.
    pub start: u64,
}

/// The fields of `/proc/PID/stat` used here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stat {
    /// The command name (without the parentheses).
    pub comm: String,
    /// The state letter (`Z`: a zombie).
    pub state: char,
    /// The parent pid.
    pub ppid: i32,
    /// The process group.
    pub pgrp: i32,
    /// The start time.
    pub start: u64,
    /// CPU time used, user and system, in clock ticks (`USER_HZ`).
    pub cpu_ticks: u64,
}

impl Stat {
    /// Parses the text of `/proc/PID/stat` (the name may hold spaces and
    /// parentheses: it ends at the last `)`).
    pub fn parse(text: &str) -> Option<Stat> {
        let open = text.find('(')?;
        let close = text.rfind(')')?;
        let comm = text.get(open + 1..close)?.to_string();
        let rest: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
        Some(Stat {
            comm,
            state: rest.first()?.chars().next()?,
            ppid: rest.get(1)?.parse().ok()?,
            pgrp: rest.get(2)?.parse().ok()?,
            start: rest.get(19)?.parse().ok()?,
            cpu_ticks: rest.get(11)?.parse::<u64>().ok()? + rest.get(12)?.parse::<u64>().ok()?,
        })
    }

    /// The CPU time used, in ms: `/proc` counts in `USER_HZ`, which Linux
    /// fixes at 100 on x86_64 and aarch64 (`sysconf(_SC_CLK_TCK)`).
    pub fn cpu_ms(&self) -> u64 {
        self.cpu_ticks * 10
    }

    /// The stat of `pid`, if it exists.
    pub fn of(pid: i32) -> Option<Stat> {
        Stat::parse(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
    }

    /// Whether it has exited (a zombie, or dead).
    pub fn exited(&self) -> bool {
        matches!(self.state, 'Z' | 'X' | 'x')
    }
}

impl Proc {
    /// The process now running as `pid`.
    pub fn of(pid: i32) -> Option<Proc> {
        Stat::of(pid).map(|s| Proc { pid, start: s.start })
    }

    /// Whether this very process still runs (not exited, not replaced by
    /// another with the same pid).
    pub fn alive(&self) -> bool {
        Stat::of(self.pid).is_some_and(|s| s.start == self.start && !s.exited())
    }

    /// Sends `sig` if this very process still runs; whether it was sent.
    pub fn signal(&self, sig: Signal) -> bool {
        self.alive() && kill(Pid::from_raw(self.pid), sig).is_ok()
    }
}

/// Every process now (a snapshot of `/proc`).
pub fn all() -> Vec<(i32, Stat)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse::<i32>().ok()?;
            Some((pid, Stat::of(pid)?))
        })
        .collect()
}

/// Every live process under `roots` (children, grandchildren, ...; the
/// roots themselves not included), parents before children: a snapshot of
/// `/proc`, so one orphaned before the scan is missed.
pub fn descendants(roots: &[i32]) -> Vec<(Proc, Stat)> {
    descendants_in(all(), roots)
}

/// [`descendants`] among the processes `all`.
pub fn descendants_in(all: Vec<(i32, Stat)>, roots: &[i32]) -> Vec<(Proc, Stat)> {
    let mut children: BTreeMap<i32, Vec<(i32, Stat)>> = BTreeMap::new();
    for (pid, s) in all {
        children.entry(s.ppid).or_default().push((pid, s));
    }
    let mut seen: BTreeSet<i32> = roots.iter().copied().collect();
    let mut queue: std::collections::VecDeque<i32> = roots.iter().copied().collect();
    let mut found = Vec::new();
    while let Some(parent) = queue.pop_front() {
        for (pid, s) in children.remove(&parent).unwrap_or_default() {
            if seen.insert(pid) && !s.exited() {
                queue.push_back(pid);
                found.push((Proc { pid, start: s.start }, s));
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_stat_line_with_a_tricky_name() {
        let line = "1234 (a) b (c)) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 100 0";
        let s = Stat::parse(line).unwrap();
        assert_eq!(s.comm, "a) b (c)");
        assert_eq!((s.state, s.ppid, s.pgrp, s.start), ('S', 1, 1234, 987654));
        assert!(!s.exited());
        assert!(Stat::parse("1 (x").is_none());
    }

    #[test]
    fn a_child_is_a_descendant_and_a_recycled_pid_is_not_it() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id() as i32;
        let me = std::process::id() as i32;
        let found = descendants(&[me]);
        let p = Proc::of(pid).unwrap();
        assert!(found.iter().any(|(q, s)| *q == p && s.comm == "sleep"), "{found:?}");
        assert!(p.alive());
        let other = Proc {
            start: p.start + 1,
            ..p
        };
        assert!(!other.alive() && !other.signal(Signal::SIGKILL));
        assert!(p.signal(Signal::SIGKILL));
        let _ = child.wait();
        assert!(!p.alive());
    }
}
