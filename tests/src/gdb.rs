use std::process::Command;

use crate::run::{run, Run};

pub use crate::ptrace::{ptrace_allowed, require_ptrace};

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
