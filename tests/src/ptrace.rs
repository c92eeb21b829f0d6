//! Whether this machine lets a test attach a debugger (or mpiq) to a
//! process that is not its child.

use std::fs;

/// Panics, loudly and with the reason, if this machine will not let us attach a debugger to
/// a process that is not our child: Yama's `kernel.yama.ptrace_scope` (1 or 2 without
/// `CAP_SYS_PTRACE`, or 3). Debugger tests call this first instead of skipping silently.
pub fn require_ptrace() {
    if let Err(reason) = ptrace_allowed() {
        panic!("debugger tests need ptrace attach, which this machine forbids: {reason}");
    }
}

/// `Ok` if attaching to a non-child process is allowed, else the reason.
pub fn ptrace_allowed() -> Result<(), String> {
    let scope_file = "/proc/sys/kernel/yama/ptrace_scope";
    let Ok(text) = fs::read_to_string(scope_file) else {
        return Ok(()); // No Yama: classic ptrace permission checks (same uid) apply.
    };
    let scope: u32 = text.trim().parse().unwrap_or(0);
    let cap = has_cap_sys_ptrace();
    match scope {
        0 => Ok(()),
        1 | 2 if cap => Ok(()),
        1 => Err(format!(
            "{scope_file} is 1 (only a process's ancestors may attach) and this process lacks \
             CAP_SYS_PTRACE; run `sysctl kernel.yama.ptrace_scope=0` as root, or run the tests \
             as root / with CAP_SYS_PTRACE"
        )),
        2 => Err(format!(
            "{scope_file} is 2 (admin-only attach) and this process lacks CAP_SYS_PTRACE; run \
             the tests as root or with CAP_SYS_PTRACE"
        )),
        _ => Err(format!(
            "{scope_file} is {scope} (attach disabled until reboot); no debugger test can run here"
        )),
    }
}

fn has_cap_sys_ptrace() -> bool {
    const CAP_SYS_PTRACE: u32 = 19;
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .is_some_and(|caps| caps & (1 << CAP_SYS_PTRACE) != 0)
}
