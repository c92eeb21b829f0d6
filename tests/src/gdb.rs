use std::fs;
use std::process::Command;

use crate::run::{run, Run};

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

/// Runs `gdb -batch -nx -p PID -ex CMD...` (within [`crate::run::DEFAULT_TIMEOUT`]) and
/// returns its output. gdb detaches at the end, letting the process go on.
///
/// # Panics
/// If gdb cannot be run or times out, or if it could not attach because ptrace was refused
/// (with gdb's message).
pub fn batch(pid: u32, commands: &[&str]) -> Run {
    let mut cmd = Command::new("gdb");
    cmd.args(["-batch", "-nx"]);
    crate::frontends::with_gdb_index_cache(&mut cmd);
    cmd.arg("-p").arg(pid.to_string());
    for c in commands {
        cmd.arg("-ex").arg(c);
    }
    let output = run(cmd);
    let text = &output.stderr;
    if text.contains("ptrace: Operation not permitted") {
        panic!(
            "gdb could not attach to {pid}: ptrace was refused ({}):\n{text}",
            ptrace_allowed()
                .err()
                .unwrap_or_else(|| "no Yama restriction seen; a seccomp \
                 profile or a missing CAP_SYS_PTRACE in a container may be the cause"
                    .into())
        );
    }
    output
}

/// Evaluates `expr` in process `pid` with gdb's `print` and returns the C string it points
/// to, e.g. `print_c_string(pid, "(char *) &MPIR_dll_name")`. (`&MPIR_dll_name` works for
/// both MPIs, where it is a `char[]`, and also when the library has no debug info.)
///
/// # Panics
/// If gdb cannot attach (see [`batch`]).
pub fn print_c_string(pid: u32, expr: &str) -> Result<String, String> {
    let output = batch(pid, &[&format!("print {expr}")]);
    parse_printed_string(&output.stdout)
        .ok_or_else(|| format!("no string in gdb's output for `print {expr}` in {pid}:\n{output}"))
}

/// Finds `$N = ... "text"` in gdb output and returns the text, with C escapes undone.
fn parse_printed_string(stdout: &str) -> Option<String> {
    let line = stdout.lines().find(|l| l.starts_with('$') && l.contains(" = "))?;
    let start = line.find('"')? + 1;
    let end = line.rfind('"')?;
    let quoted = line.get(start..end)?;
    let mut out = String::new();
    let mut chars = quoted.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next()? {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                other => out.push(other),
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::parse_printed_string;

    #[test]
    fn parses_gdb_string_output() {
        let out = "$1 = 0x7f2aa03ca4a0 <MPIR_dll_name> \"/x/lib/openmpi/libompi_dbg_msgq.so\"\n";
        assert_eq!(
            parse_printed_string(out).as_deref(),
            Some("/x/lib/openmpi/libompi_dbg_msgq.so")
        );
        assert_eq!(parse_printed_string("$1 = 0x0\n"), None);
        assert_eq!(parse_printed_string("$2 = \"a\\\"b\"").as_deref(), Some("a\"b"));
    }
}
