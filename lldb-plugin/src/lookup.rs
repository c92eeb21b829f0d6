//! `mpi lookup`: the bridge's lookup diagnostic ([`mpiq::lookup`]: the same
//! questions, options and output as the CLI's `mpiq lookup`) on one LLDB
//! target, to compare with what gdb says (`print &MPIR_dll_name`,
//! `print sizeof(ompi_communicator_t)`, ...).
//!
//! The form this command had before, `mpi lookup symbol|function NAME... |
//! type NAME [FIELD...] | read ADDR LEN | sizes`, is still accepted for
//! scripts that use it: its questions are asked the same way, and printed in
//! its layout.

use std::fmt::Write as _;

use mpiq::lookup::{self, parse_number, Answer, Kind, Lookup, Question, Value, LOOKUP_OPTIONS, MAX_READ};
use mpiq::options::{options_help, synopsis, TARGETS_ALIASES, TARGETS_NAME};
use mpiq::Target;

use crate::command::open_targets;
use crate::ffi::Session;
use crate::target::LldbTarget;

/// The end of `help mpi lookup`.
const OLD_FORM: &str = "
Examples:
  mpi lookup --symbol MPIR_dll_name --string MPIR_dll_name
  mpi lookup --sizeof MPIR_Comm --offsetof MPIR_Comm.name --targets 1

The earlier form is still accepted, and prints in its own layout:
  mpi lookup symbol NAME...          runtime address of data symbols
  mpi lookup function NAME...        runtime address of functions
  mpi lookup type NAME [FIELD...]    a type's size and its fields' offsets
  mpi lookup read ADDR LEN           LEN bytes of memory at ADDR, in hex
  mpi lookup sizes                   basic C type sizes, byte order, process
";

/// Long help of `mpi lookup`.
pub fn help() -> String {
    format!(
        "{}\nOptions:\n{}{OLD_FORM}",
        lookup::DESCRIPTION,
        options_help(LOOKUP_OPTIONS)
    )
}

/// The syntax line of `mpi lookup`.
pub fn syntax() -> String {
    format!("mpi lookup {}", synopsis(LOOKUP_OPTIONS))
}

/// Runs `mpi lookup ARGS...`.
pub fn lookup(session: &Session, args: &[String]) -> Result<String, String> {
    if args.is_empty() || args.iter().any(|a| a == "--help" || a == "-h") || args[0] == "help" {
        return Ok(help());
    }
    let (lookup, old) = match old_form(args)? {
        Some(l) => (l, true),
        None => (
            Lookup::parse(args).map_err(|e| format!("{} (see 'help mpi lookup')", e.0))?,
            false,
        ),
    };
    if lookup.questions.is_empty() {
        return Err("nothing to ask: give --symbol NAME, --sizeof TYPE, ... (see 'help mpi lookup')".into());
    }
    let mut targets = open_targets(session, lookup.targets.as_deref().unwrap_or(""))?;
    let [target] = targets.as_mut_slice() else {
        return Err("mpi lookup reads one target at a time: give --targets N".into());
    };
    let answers = lookup::answer(target as &mut dyn Target, &lookup).map_err(|e| e.to_string())?;
    Ok(if old {
        old_layout(target, &answers)
    } else {
        lookup::render(&answers, lookup.json)
    })
}

/// The questions of the earlier form (`symbol NAME...`, ...), `None` if the
/// arguments are not in it.
fn old_form(args: &[String]) -> Result<Option<Lookup>, String> {
    let mut words: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut targets = None;
    let spelled = |w: &str| {
        w.strip_prefix("--")
            .is_some_and(|f| f == TARGETS_NAME || TARGETS_ALIASES.contains(&f))
    };
    if let Some(pos) = words.iter().position(|w| spelled(w)) {
        let value = words.get(pos + 1).copied().unwrap_or("");
        if value.is_empty() {
            return Err(format!("{} needs a target index", words[pos]));
        }
        targets = Some(value.to_string());
        words.drain(pos..pos + 2);
    }
    let Some((&what, rest)) = words.split_first() else {
        return Ok(None);
    };
    let bad = || format!("bad arguments to 'mpi lookup {what}' (see 'help mpi lookup')");
    let questions = match (what, rest) {
        ("symbol", names) if !names.is_empty() => names.iter().map(|n| Question::symbol(n)).collect(),
        ("function", names) if !names.is_empty() => names.iter().map(|n| Question::function(n)).collect(),
        ("type", [name, fields @ ..]) => std::iter::once(Question::size_of(name))
            .chain(fields.iter().map(|f| Question::offset_of(name, f)))
            .collect(),
        ("read", [addr, len]) => {
            let addr = parse_number(addr).ok_or_else(|| format!("'{addr}' is not a number"))?;
            let len = parse_number(len).ok_or_else(|| format!("'{len}' is not a number"))?;
            let len = usize::try_from(len)
                .ok()
                .filter(|&l| l <= MAX_READ)
                .ok_or_else(|| "LEN is too large (at most 1 MiB)".to_owned())?;
            vec![Question::read(addr, len)]
        }
        ("sizes", []) => vec![Question::sizes(), Question::Process],
        ("symbol" | "function" | "type" | "read" | "sizes", _) => return Err(bad()),
        _ => return Ok(None),
    };
    Ok(Some(Lookup {
        questions,
        json: false,
        targets,
    }))
}

/// The answers in the earlier form's layout.
fn old_layout(target: &mut LldbTarget, answers: &[Answer]) -> String {
    let mut out = String::new();
    let get = |kind: Kind, name: &str| {
        answers
            .iter()
            .find(|a| a.kind == kind && a.name == name)
            .map_or(&Value::Missing, |a| &a.value)
    };
    let number = |kind: Kind, name: &str| match get(kind, name) {
        Value::Number(n) => n.to_string(),
        _ => "unknown".into(),
    };
    let mut type_missing = false;
    for a in answers {
        let name = &a.name;
        match (a.kind, &a.value) {
            (Kind::Symbol | Kind::Function, Value::Address(addr)) => {
                writeln!(out, "{} {name}: {addr:#x}", a.kind.as_str())
            }
            (Kind::Symbol | Kind::Function, _) => writeln!(out, "{} {name}: not found", a.kind.as_str()),
            (Kind::Sizeof, Value::Type { id, size }) => {
                let size = size.map_or_else(|| "incomplete".to_owned(), |s| s.to_string());
                writeln!(out, "type {name}: id {} ({}), size {size}", id.0, target.type_name(*id))
            }
            (Kind::Sizeof, _) => {
                type_missing = true;
                writeln!(out, "type {name}: not found")
            }
            (Kind::Offsetof, _) if type_missing => Ok(()),
            (Kind::Offsetof, value) => {
                let field = name.rsplit_once('.').map_or(name.as_str(), |(_, f)| f);
                match value {
                    Value::Number(off) => writeln!(out, "  {field}: offset {off}"),
                    _ => writeln!(out, "  {field}: no such field"),
                }
            }
            (Kind::Read, Value::Bytes(bytes)) => {
                let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
                writeln!(out, "{name}: {}", hex.join(" "))
            }
            (Kind::Read, _) => writeln!(out, "{name}: cannot read"),
            (Kind::Sizes, _) if name == "short" => {
                let order = match get(Kind::Sizes, "byte_order") {
                    Value::Word(w) if w == "big" => "Big",
                    _ => "Little",
                };
                let executable = match get(Kind::Process, "executable") {
                    Value::Text(t) => t.clone(),
                    _ => String::new(),
                };
                writeln!(
                    out,
                    "short {} int {} long {} long long {} pointer {}\nbyte order {order}\npid {}\nexecutable {executable}",
                    number(Kind::Sizes, "short"),
                    number(Kind::Sizes, "int"),
                    number(Kind::Sizes, "long"),
                    number(Kind::Sizes, "long_long"),
                    number(Kind::Sizes, "pointer"),
                    number(Kind::Process, "pid"),
                )
            }
            _ => Ok(()),
        }
        .ok();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn numbers() {
        assert_eq!(parse_number("0x10"), Some(16));
        assert_eq!(parse_number("10"), Some(10));
        assert!(parse_number("zz").is_none());
    }

    #[test]
    fn the_earlier_form_asks_the_same_questions() {
        let l = old_form(&words("type T a b --target 1")).unwrap().unwrap();
        assert_eq!(
            l.questions,
            [
                Question::size_of("T"),
                Question::offset_of("T", "a"),
                Question::offset_of("T", "b")
            ]
        );
        assert_eq!(l.targets.as_deref(), Some("1"));
        let l = old_form(&words("sizes")).unwrap().unwrap();
        assert_eq!(l.questions, [Question::sizes(), Question::Process]);
        let l = old_form(&words("read 0x10 32")).unwrap().unwrap();
        assert_eq!(l.questions, [Question::read(16, 32)]);
        assert!(old_form(&words("--symbol x")).unwrap().is_none());
        assert!(old_form(&words("symbol")).unwrap_err().contains("bad arguments"));
        assert!(old_form(&words("read 1 2000000")).unwrap_err().contains("too large"));
        assert!(old_form(&words("sizes --targets"))
            .unwrap_err()
            .contains("needs a target index"));
    }

    #[test]
    fn help_and_syntax_come_from_the_table() {
        let help = help();
        for spec in LOOKUP_OPTIONS {
            assert!(
                help.contains(&format!("\n  {} ", spec.left())),
                "{}:\n{help}",
                spec.name
            );
            assert!(syntax().contains(&spec.usage()), "{}", spec.name);
        }
        assert!(help.contains("mpi lookup type NAME [FIELD...]"), "{help}");
    }
}
