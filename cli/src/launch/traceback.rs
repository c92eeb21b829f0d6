//! Python tracebacks in a hung job's output: the uncaught exception of a
//! rank that left its script (and parked in `MPI_Finalize`) is the first
//! thing a user of an mpi4py job wants to see in the report.

use mpiq::Snapshot;

const START: &str = "Traceback (most recent call last):";

/// Every Python traceback in `text` (the job's output), each as its lines
/// from `Traceback (most recent call last):` to the exception's line. A
/// launcher's prefix before the first line (`[1,1]<stderr>:`, `[1] `) is
/// taken off every line that carries it; lines of other ranks in between
/// are passed over.
pub fn tracebacks(text: &str) -> Vec<Vec<String>> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Some(at) = lines[i].find(START) else {
            i += 1;
            continue;
        };
        let prefix = &lines[i][..at];
        let mut tb = vec![START.to_string()];
        let mut j = i + 1;
        while j < lines.len() {
            let Some(rest) = lines[j].strip_prefix(prefix) else {
                j += 1; // another rank's line
                continue;
            };
            if rest.contains(START) {
                break; // the next traceback, without an exception line
            }
            tb.push(rest.to_string());
            j += 1;
            // Frames and their source lines are indented; the exception's
            // line is not (`RuntimeError: rank 1 failed`). A chained
            // exception's traceback is one of its own.
            if !rest.starts_with(' ') && !rest.is_empty() {
                break;
            }
        }
        if tb.len() > 1 {
            out.push(tb);
        }
        i = j.max(i + 1);
    }
    out
}

/// The world ranks a snapshot says left their Python script with an
/// uncaught exception (their exit status, read while in `MPI_Finalize`).
pub fn raising_ranks(snapshot: &Snapshot) -> Vec<i32> {
    snapshot
        .processes
        .iter()
        .filter(|p| {
            p.stacks
                .as_ref()
                .is_some_and(|s| s.calls.iter().any(|c| c.python_exit_status == Some(1)))
        })
        .filter_map(|p| p.world_rank)
        .collect()
}

/// The report's section of the tracebacks in the job's standard error and
/// output (`text`), naming the rank when exactly one rank raised and one
/// traceback was printed; empty when there is none.
pub fn section(text: &str, snapshot: &Snapshot) -> String {
    let tbs = tracebacks(text);
    if tbs.is_empty() {
        return String::new();
    }
    let ranks = raising_ranks(snapshot);
    let mut s = match (tbs.len(), ranks.as_slice()) {
        (1, [r]) => format!("\nPython traceback of rank {r}, which exited its script with an uncaught exception:\n"),
        (n, _) => format!(
            "\nPython traceback{} in the job's output{}:\n",
            if n == 1 { "" } else { "s" },
            match ranks.as_slice() {
                [] => String::new(),
                rs => format!(
                    " (ranks that exited their script with an uncaught exception: {})",
                    rs.iter().map(i32::to_string).collect::<Vec<_>>().join(", ")
                ),
            }
        ),
    };
    for tb in tbs {
        for l in tb {
            s.push_str("  ");
            s.push_str(&l);
            s.push('\n');
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceback_is_found_whole_among_other_lines() {
        let out = "starting\nTraceback (most recent call last):\n  File \"/w/solver.py\", line 12, in <module>\n    solve(MPI.COMM_WORLD)\n  File \"/w/solver.py\", line 7, in solve\n    raise RuntimeError(\"rank 1 failed\")\nRuntimeError: rank 1 failed\nmore output\n";
        let tbs = tracebacks(out);
        assert_eq!(tbs.len(), 1);
        assert_eq!(tbs[0].first().map(String::as_str), Some(START));
        assert_eq!(tbs[0].last().map(String::as_str), Some("RuntimeError: rank 1 failed"));
        assert_eq!(tbs[0].len(), 6);
    }

    #[test]
    fn a_launchers_prefix_is_taken_off_and_other_ranks_lines_passed_over() {
        let out = "[1,1]<stderr>:Traceback (most recent call last):\n[1,0]<stdout>:step 3\n[1,1]<stderr>:  File \"s.py\", line 2, in <module>\n[1,1]<stderr>:    f()\n[1,1]<stderr>:ValueError: bad\n";
        let tbs = tracebacks(out);
        assert_eq!(
            tbs,
            [vec![
                START.to_string(),
                "  File \"s.py\", line 2, in <module>".into(),
                "    f()".into(),
                "ValueError: bad".into()
            ]]
        );
    }

    #[test]
    fn chained_exceptions_stay_one_traceback_and_none_is_nothing() {
        let out = "Traceback (most recent call last):\n  File \"a.py\", line 1, in <module>\nKeyError: 1\n\nDuring handling of the above exception, another exception occurred:\n\nTraceback (most recent call last):\n  File \"a.py\", line 3, in <module>\nValueError: 2\n";
        let tbs = tracebacks(out);
        assert_eq!(tbs.len(), 2, "{tbs:?}");
        assert_eq!(tbs[1].last().map(String::as_str), Some("ValueError: 2"));
        assert!(tracebacks("no python here\n").is_empty());
        assert_eq!(section("plain\n", &Snapshot::default()), "");
    }
}
