//! `mpi lookup`: asks the [`Target`] adapter the questions a debug library
//! asks, and prints its answers, to compare with what gdb says
//! (`print &MPIR_dll_name`, `print sizeof(ompi_communicator_t)`, ...).

use std::fmt::Write as _;

use mpiq::Target;

use crate::command::open_targets;
use crate::ffi::Session;

/// Long help of `mpi lookup`.
pub const HELP: &str = "\
Diagnostic: show what mpiq's LLDB adapter answers to the questions an MPI
debug library asks, on the selected target (or --target N).

  mpi lookup symbol NAME...          runtime address of data symbols
  mpi lookup function NAME...        runtime address of functions
  mpi lookup type NAME [FIELD...]    a type's size and its fields' offsets
  mpi lookup read ADDR LEN           LEN bytes of memory at ADDR, in hex
  mpi lookup sizes                   basic C type sizes, byte order, process
";

/// Runs `mpi lookup ARGS...`.
pub fn lookup(session: &Session, args: &[String]) -> Result<String, String> {
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut selection = "";
    if let Some(pos) = args.iter().position(|a| *a == "--target" || *a == "--targets") {
        selection = args.get(pos + 1).copied().unwrap_or("");
        if selection.is_empty() {
            return Err("--target needs a target index".into());
        }
        args.drain(pos..pos + 2);
    }
    let Some((&what, rest)) = args.split_first() else {
        return Ok(HELP.to_owned());
    };
    if matches!(what, "--help" | "-h" | "help") {
        return Ok(HELP.to_owned());
    }
    let mut targets = open_targets(session, selection)?;
    let [target] = targets.as_mut_slice() else {
        return Err("mpi lookup reads one target at a time: give --target N".into());
    };
    let mut out = String::new();
    let err = |e: mpiq::TargetError| e.to_string();
    match (what, rest) {
        ("symbol" | "function", names) if !names.is_empty() => {
            for name in names {
                let found = if what == "symbol" {
                    target.find_symbol(name)
                } else {
                    target.find_function(name)
                }
                .map_err(err)?;
                match found {
                    Some(addr) => writeln!(out, "{what} {name}: {addr:#x}"),
                    None => writeln!(out, "{what} {name}: not found"),
                }
                .ok();
            }
        }
        ("type", [name, fields @ ..]) => match target.find_type(name).map_err(err)? {
            None => writeln!(out, "type {name}: not found").unwrap_or(()),
            Some(ty) => {
                let size = target.size_of(ty).map_err(err)?;
                let size = size.map_or_else(|| "incomplete".to_owned(), |s| s.to_string());
                writeln!(out, "type {name}: id {} ({}), size {size}", ty.0, target.type_name(ty)).ok();
                for field in fields {
                    match target.field_offset(ty, field).map_err(err)? {
                        Some(off) => writeln!(out, "  {field}: offset {off}"),
                        None => writeln!(out, "  {field}: no such field"),
                    }
                    .ok();
                }
            }
        },
        ("read", [addr, len]) => {
            let addr = parse_number(addr)?;
            let len = usize::try_from(parse_number(len)?).map_err(|_| "LEN is too large".to_owned())?;
            if len > 1 << 20 {
                return Err("LEN is too large (at most 1 MiB)".into());
            }
            let mut buf = vec![0u8; len];
            target.read_memory(addr, &mut buf).map_err(err)?;
            for (i, chunk) in buf.chunks(16).enumerate() {
                let hex: Vec<String> = chunk.iter().map(|b| format!("{b:02x}")).collect();
                writeln!(out, "{:#x}: {}", addr + 16 * i as u64, hex.join(" ")).ok();
            }
        }
        ("sizes", []) => {
            let s = target.type_sizes().map_err(err)?;
            let d = target.describe();
            writeln!(
                out,
                "short {} int {} long {} long long {} pointer {}\nbyte order {:?}\npid {}\nexecutable {}",
                s.short,
                s.int,
                s.long,
                s.long_long,
                s.pointer,
                target.byte_order(),
                d.pid.map_or_else(|| "unknown".to_owned(), |p| p.to_string()),
                d.executable
            )
            .ok();
        }
        _ => return Err(format!("bad arguments to 'mpi lookup {what}' (see 'help mpi lookup')")),
    }
    Ok(out)
}

/// A number in decimal or `0x` hex.
fn parse_number(s: &str) -> Result<u64, String> {
    let parsed = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse(),
    };
    parsed.map_err(|_| format!("'{s}' is not a number"))
}

#[cfg(test)]
mod tests {
    use super::parse_number;

    #[test]
    fn numbers() {
        assert_eq!(parse_number("0x10"), Ok(16));
        assert_eq!(parse_number("10"), Ok(10));
        assert!(parse_number("zz").is_err());
    }
}
