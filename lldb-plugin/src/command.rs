//! `mpi queues`: argument handling, target selection and the dump. Its
//! entry point for C++, which catches panics, is the crate's
//! [`crate::run_queues`].

use mpiq::options::{options_help, synopsis, DESCRIPTION, DUMP_OPTIONS, TARGETS_ALIASES, TARGETS_NAME};
use mpiq::{DumpOptions, Target};

use crate::ffi::{Session, TargetHost};
use crate::target::LldbTarget;

/// Long help of `mpi queues`: the bridge's description and its table's
/// option lines (`--targets` among them: the same line as gdb's), then
/// examples. The usage line is [`queues_syntax`].
pub fn queues_help() -> String {
    format!("{DESCRIPTION}\nOptions:\n{}{EXAMPLES}", options_help(DUMP_OPTIONS))
}

/// The syntax line of `mpi queues`, from the bridge's table.
pub fn queues_syntax() -> String {
    format!("mpi queues {}", synopsis(DUMP_OPTIONS))
}

/// The end of `help mpi queues`.
const EXAMPLES: &str = "
Examples:
  mpi queues                      the selected target's queues, as text
  mpi queues --json --targets all every target's queues, as one JSON snapshot
";

/// Which LLDB targets a command reads.
#[derive(Debug, PartialEq, Eq)]
enum Selection {
    /// The selected target.
    Selected,
    /// Every target.
    All,
    /// These indexes, in this order.
    Indexes(Vec<u32>),
}

/// The arguments of `mpi queues`, with `--targets` taken out.
#[derive(Debug, PartialEq, Eq)]
struct QueuesArgs {
    help: bool,
    targets: Selection,
    rest: Vec<String>,
}

/// Whether `flag` is `--targets` or one of its other spellings (gdb's
/// `--inferiors`, the earlier `--target`), as the bridge's table has them.
fn is_targets(flag: &str) -> bool {
    flag.strip_prefix("--")
        .is_some_and(|f| f == TARGETS_NAME || TARGETS_ALIASES.contains(&f))
}

fn parse_args(args: &[String]) -> Result<QueuesArgs, String> {
    let mut parsed = QueuesArgs {
        help: false,
        targets: Selection::Selected,
        rest: Vec::new(),
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let value = match arg.as_str() {
            "--help" | "-h" => {
                parsed.help = true;
                continue;
            }
            a if is_targets(a) => it.next().cloned(),
            a => match a.split_once('=').filter(|(f, _)| is_targets(f)) {
                Some((_, v)) => Some(v.to_owned()),
                None => {
                    parsed.rest.push(arg.clone());
                    continue;
                }
            },
        };
        parsed.targets = parse_selection(value.as_deref().unwrap_or(""))?;
    }
    Ok(parsed)
}

/// `all`, or target indexes `N,M` and ranges `N-M`: the bridge's parser,
/// which gdb's `--targets` uses too (through the C API).
fn parse_selection(value: &str) -> Result<Selection, String> {
    match mpiq::options::targets::parse_targets(value) {
        Ok(mpiq::options::targets::TargetSelection::All) => Ok(Selection::All),
        Ok(mpiq::options::targets::TargetSelection::Indexes(indexes)) => Ok(Selection::Indexes(indexes)),
        Err(e) => Err(e.to_string()),
    }
}

/// The target indexes a selection names, checked against the debugger.
fn resolve(session: &Session, selection: &Selection) -> Result<Vec<u32>, String> {
    let count = session.num_targets();
    if count == 0 {
        return Err(NO_PROCESS_HINT.replace("{what}", "there is no target"));
    }
    match selection {
        Selection::Selected => match u32::try_from(session.selected_target()) {
            Ok(index) => Ok(vec![index]),
            Err(_) => Err("no target is selected: pick one with 'target select N'".into()),
        },
        Selection::All => Ok((0..count).collect()),
        Selection::Indexes(indexes) => {
            if let Some(bad) = indexes.iter().find(|&&i| i >= count) {
                return Err(format!(
                    "there is no target #{bad}: 'target list' shows {count} target{}",
                    if count == 1 { "" } else { "s" }
                ));
            }
            Ok(indexes.clone())
        }
    }
}

const NO_PROCESS_HINT: &str = "{what}: attach to a process ('lldb -p PID' or 'process attach \
    --pid PID'), launch one and stop it, or load a core file ('lldb -c CORE EXE')";

/// Checks that a target's process can be read now.
fn check_readable(host: &TargetHost, index: u32) -> Result<(), String> {
    if !host.has_process() {
        return Err(NO_PROCESS_HINT.replace("{what}", &format!("target #{index} has no process")));
    }
    if host.is_stopped() {
        return Ok(());
    }
    let state = host.state_name();
    let pid = host.pid();
    Err(match state.as_str() {
        "running" | "stepping" | "launching" | "attaching" => format!(
            "process {pid} (target #{index}) is running: stop it first ('process interrupt' or Ctrl-C), \
             then run 'mpi queues' again"
        ),
        "exited" => format!("process {pid} (target #{index}) has exited: nothing to read"),
        _ => format!("process {pid} (target #{index}) is {state}: 'mpi queues' needs a stopped process or a core file"),
    })
}

/// Opens and checks the targets a selection names.
pub fn open_targets(session: &Session, selection: &str) -> Result<Vec<LldbTarget>, String> {
    let selection = if selection.is_empty() {
        Selection::Selected
    } else {
        parse_selection(selection)?
    };
    open_selection(session, &selection)
}

fn open_selection(session: &Session, selection: &Selection) -> Result<Vec<LldbTarget>, String> {
    let mut targets = Vec::new();
    for index in resolve(session, selection)? {
        let host = session.open_target(index);
        let Some(host_ref) = host.as_ref() else {
            return Err(format!("target #{index} could not be opened"));
        };
        check_readable(host_ref, index)?;
        targets.push(LldbTarget::new(host));
    }
    Ok(targets)
}

/// `mpi queues ARGS...`: the text to print, or the error.
pub fn queues(session: &Session, args: &[String]) -> Result<String, String> {
    let args = parse_args(args)?;
    if args.help {
        return Ok(queues_help());
    }
    let opts = DumpOptions::parse(&args.rest).map_err(|e| format!("{} (see 'help mpi queues')", e.0))?;
    let mut targets = open_selection(session, &args.targets)?;
    let mut refs: Vec<&mut dyn Target> = targets.iter_mut().map(|t| t as &mut dyn Target).collect();
    mpiq::dump(&mut refs, &opts).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn takes_targets_out_and_keeps_the_rest() {
        let a = parse_args(&args("--json --targets 0,2,0 --all")).unwrap();
        assert_eq!(a.targets, Selection::Indexes(vec![0, 2]));
        assert_eq!(a.rest, args("--json --all"));
        assert!(!a.help);
        let a = parse_args(&args("--targets=all --comm 3")).unwrap();
        assert_eq!(a.targets, Selection::All);
        assert_eq!(a.rest, args("--comm 3"));
        assert_eq!(parse_args(&args("")).unwrap().targets, Selection::Selected);
        assert!(parse_args(&args("-h")).unwrap().help);
    }

    #[test]
    fn rejects_bad_target_lists() {
        assert!(parse_args(&args("--targets")).unwrap_err().contains("needs a value"));
        assert!(parse_args(&args("--targets x")).unwrap_err().contains("'x'"));
        assert!(parse_args(&args("--targets ,")).unwrap_err().contains("needs a value"));
        assert!(parse_args(&args("--targets 3-1")).unwrap_err().contains("'3-1'"));
    }

    #[test]
    fn targets_has_the_tables_spellings_and_ranges() {
        for line in ["--inferiors 1-3,0", "--target=1-3,0", "--targets 1,2-3,0"] {
            let a = parse_args(&args(line)).unwrap();
            assert_eq!(a.targets, Selection::Indexes(vec![1, 2, 3, 0]), "{line}");
            assert!(a.rest.is_empty(), "{line}");
        }
        assert!(queues_syntax().contains("[--targets T]"), "{}", queues_syntax());
        for spec in DUMP_OPTIONS {
            assert!(queues_syntax().contains(&spec.usage()), "{}", spec.name);
        }
    }

    #[test]
    fn help_mentions_every_option() {
        let help = queues_help();
        for opt in [
            "--json",
            "--all",
            "--comm",
            "--queue",
            "--dll",
            "--targets",
            "--record",
            "--in-process",
            "--timeout",
        ] {
            assert!(help.contains(opt), "{opt}");
        }
    }
}
