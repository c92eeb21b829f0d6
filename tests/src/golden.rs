//! The one normalisation behind every comparison of snapshots: with a
//! committed golden file, between front ends, and between a live dump and
//! its replay.
//!
//! A snapshot must be compared on what the MPI library *did* (communicators,
//! operations, peers, tags, lengths, buffers, status) and never on where,
//! when or by whom the test bed was built. [`portable`] rewrites exactly
//! these machine-dependent parts, and nothing else:
//!
//! | field | why it differs between machines | becomes |
//! |---|---|---|
//! | `processes[].executable` | the example's build path | removed |
//! | `processes[].stats` | timings and the host's request counts | removed |
//! | `processes[].stacks` | read by default: pcs, the build paths of objects and sources, and what each front end's unwinder gives (a replay of a recording without stacks says they are missing); where lines are compared by tests/tests/stacks.rs | removed |
//! | `processes[].dll.path` | the test bed's root (`$MPIQ_TESTBED`, `$HOME`) | `$MPIQ_TESTBED/...` |
//! | `processes[].dll.version` | MPICH's `compiled on MMM DD YYYY` (C's `__DATE__`), Open MPI's `package: Open MPI USER@HOST Distribution` (the builder's user and host) | dates `<date>`, times `<time>`, `user@host` `<user>@<host>` |
//!
//! Pids and addresses are *not* rewritten: in a golden file they come from
//! the committed recording, so they are the same on every machine.
//!
//! [`machine_specific`] finds what [`portable`] exists to remove (dates,
//! times, `user@host`, home and temporary paths, this machine's host name
//! and test-bed root) in any text: the replay test runs it over every
//! committed golden file, so a golden that still depends on the machine or
//! the day that made it fails on the machine that made it, not only on the
//! next one.

use serde_json::Value;

use crate::Mpi;

/// `v` (a snapshot: `{"processes": [...]}`) without what depends on the
/// machine, the day or the place its test bed was built; see the module
/// documentation for the exact list. Idempotent.
pub fn portable(mut v: Value) -> Value {
    without_os(&mut v);
    let root = Mpi::testbed_root().display().to_string();
    for p in v
        .get_mut("processes")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        let Some(o) = p.as_object_mut() else { continue };
        o.remove("executable");
        o.remove("stats");
        o.remove("stacks");
        let Some(dll) = o.get_mut("dll").and_then(Value::as_object_mut) else {
            continue;
        };
        if let Some(path) = dll.get("path").and_then(Value::as_str) {
            let path = path.replace(&root, "$MPIQ_TESTBED");
            dll.insert("path".into(), Value::from(path));
        }
        if let Some(version) = dll.get("version").and_then(Value::as_str) {
            let version = portable_text(version);
            dll.insert("version".into(), Value::from(version));
        }
    }
    v
}

/// Leaves out of every process of snapshot `v` what the kernel said of it
/// (`os`): host-specific, read by the CLI alone (before it stops a live
/// process), and no part of a recording.
pub fn without_os(v: &mut Value) {
    for p in v
        .get_mut("processes")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if let Some(o) = p.as_object_mut() {
            o.remove("os");
        }
    }
}

/// `text` with its dates, times and `user@host` words replaced by
/// placeholders (the rewriting [`portable`] applies to a library's version
/// string).
pub fn portable_text(text: &str) -> String {
    let mut out = text.to_string();
    // Longest shapes first, so that a date is never half-replaced.
    for find in [find_date, find_time, find_user_at_host] {
        let mut rest = out.as_str();
        let mut done = String::new();
        while let Some((start, end, placeholder)) = find(rest) {
            done.push_str(&rest[..start]);
            done.push_str(placeholder);
            rest = &rest[end..];
        }
        done.push_str(rest);
        out = done;
    }
    out
}

/// Every piece of `text` that looks as if it depends on the machine or the
/// day it was made on: what [`shape_specific`] finds, and this machine's
/// `$HOME`, host name and test-bed root. Empty for text that [`portable`]
/// produced.
pub fn machine_specific(text: &str) -> Vec<String> {
    let mut found = shape_specific(text);
    let mut needles = vec![Mpi::testbed_root().display().to_string()];
    if let Some(home) = std::env::var_os("HOME").filter(|h| h.len() > 1) {
        needles.push(home.to_string_lossy().into_owned());
    }
    if let Ok(host) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
        // As a word of its own: a short host name ("vm") is part of many words.
        let host = host.trim();
        if !host.is_empty()
            && text
                .split(|c: char| !c.is_alphanumeric() && c != '-')
                .any(|w| w == host)
        {
            found.push(format!("host name {host}"));
        }
    }
    found.extend(needles.into_iter().filter(|n| text.contains(n.as_str())));
    found
}

/// What has the shape of a date, a time, a `user@host`, or an absolute
/// path under root's home, a user's home or the temporary directory, on any machine.
pub fn shape_specific(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for find in [find_date, find_time, find_user_at_host] {
        let mut rest = text;
        while let Some((start, end, _)) = find(rest) {
            found.push(rest[start..end].to_string());
            rest = &rest[end..];
        }
    }
    found.extend(HOME_DIRS.into_iter().filter(|p| text.contains(p)).map(String::from));
    found
}

/// Top directories whose paths belong to one machine's users: root's
/// home, the users' homes and the temporary directory.
const HOME_DIRS: [&str; 3] = ["root", "home", "tmp"];

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// The first date in `s` as (start, end, placeholder): `Mon DD YYYY` and
/// `Mon  D YYYY` (C's `__DATE__`), `Month D, YYYY`, `YYYY-MM-DD`.
fn find_date(s: &str) -> Option<(usize, usize, &'static str)> {
    let b = s.as_bytes();
    for i in 0..b.len() {
        if !s.is_char_boundary(i) || (i > 0 && b[i - 1].is_ascii_alphanumeric()) {
            continue;
        }
        // Month name, spaces, a day of one or two digits, an optional comma, a space, four digits.
        if let Some(m) = MONTHS.iter().find(|m| s[i..].starts_with(*m)) {
            let mut j = i + m.len();
            // A full month name ("November") is a date too.
            while j < b.len() && b[j].is_ascii_lowercase() {
                j += 1;
            }
            let spaces = count(b, j, |c| c == b' ');
            let digits = count(b, j + spaces, |c| c.is_ascii_digit());
            if spaces >= 1 && (1..=2).contains(&digits) {
                let mut k = j + spaces + digits;
                if b.get(k) == Some(&b',') {
                    k += 1;
                }
                let sp = count(b, k, |c| c == b' ');
                if sp >= 1 && count(b, k + sp, |c| c.is_ascii_digit()) == 4 {
                    return Some((i, k + sp + 4, "<date>"));
                }
            }
        }
        // ISO: dddd-dd-dd.
        if count(b, i, |c| c.is_ascii_digit()) == 4
            && b.get(i + 4) == Some(&b'-')
            && count(b, i + 5, |c| c.is_ascii_digit()) == 2
            && b.get(i + 7) == Some(&b'-')
            && count(b, i + 8, |c| c.is_ascii_digit()) == 2
        {
            return Some((i, i + 10, "<date>"));
        }
    }
    None
}

/// The first time of day in `s`: `hh:mm:ss` (C's `__TIME__`) or `hh:mm`.
fn find_time(s: &str) -> Option<(usize, usize, &'static str)> {
    let b = s.as_bytes();
    for i in 0..b.len() {
        if i > 0 && (b[i - 1].is_ascii_digit() || b[i - 1] == b':') {
            continue;
        }
        if count(b, i, |c| c.is_ascii_digit()) == 2
            && b.get(i + 2) == Some(&b':')
            && count(b, i + 3, |c| c.is_ascii_digit()) == 2
        {
            let mut end = i + 5;
            if b.get(end) == Some(&b':') && count(b, end + 1, |c| c.is_ascii_digit()) == 2 {
                end += 3;
            }
            if !b.get(end).is_some_and(|c| c.is_ascii_digit() || *c == b':') {
                return Some((i, end, "<time>"));
            }
        }
    }
    None
}

/// The first `user@host` word in `s` (Open MPI's default package string is
/// `Open MPI $USER@$HOSTNAME Distribution`).
fn find_user_at_host(s: &str) -> Option<(usize, usize, &'static str)> {
    let word = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.');
    let b = s.as_bytes();
    let at = b
        .iter()
        .enumerate()
        .position(|(i, &c)| c == b'@' && i > 0 && word(b[i - 1]) && b.get(i + 1).is_some_and(|&n| word(n)))?;
    let start = (0..at).rev().take_while(|&k| word(b[k])).last()?;
    Some((start, at + 1 + count(b, at + 1, word), "<user>@<host>"))
}

/// How many bytes from `at` on satisfy `f`.
fn count(b: &[u8], at: usize, f: impl Fn(u8) -> bool) -> usize {
    b.get(at..).map_or(0, |rest| rest.iter().take_while(|&&c| f(c)).count())
}

#[cfg(test)]
mod tests {
    use super::*;

    // The synthetic inputs are made at run time, so that this file holds
    // no date or home path itself (the golden scan reads sources too).
    /// A year no test bed can have been built in.
    const EPOCH: u32 = 1970;

    /// C's `__DATE__` of day `day` (right-aligned to two) of January.
    fn c_date(day: u32) -> String {
        format!("{} {day:>2} {EPOCH}", MONTHS[0])
    }

    #[test]
    fn build_dates_times_and_builders_become_placeholders() {
        for (raw, want) in [
            (
                format!("MPICH message queue support for MPICH 4.0.2 compiled on {}", c_date(11)),
                "MPICH message queue support for MPICH 4.0.2 compiled on <date>",
            ),
            (
                format!("MPICH message queue support for MPICH 4.0.2 compiled on {}", c_date(1)),
                "MPICH message queue support for MPICH 4.0.2 compiled on <date>",
            ),
            (
                format!(
                    "Open MPI message queue support for parallel debuggers 4.1.4 v4.1.4, package: Open MPI \
                     builder@build-host.invalid Distribution, ident: 4.1.4, repo rev: v4.1.4, January 1, {EPOCH}"
                ),
                "Open MPI message queue support for parallel debuggers 4.1.4 v4.1.4, package: Open MPI <user>@<host> Distribution, ident: 4.1.4, repo rev: v4.1.4, <date>",
            ),
            (
                format!("built {EPOCH}-01-01 at 00:00:00 by builder@build-host.invalid"),
                "built <date> at <time> by <user>@<host>",
            ),
            ("MPICH 4.0.2".to_string(), "MPICH 4.0.2"),
            ("version 10:20:30:40".to_string(), "version 10:20:30:40"),
        ] {
            assert_eq!(portable_text(&raw), want, "{raw}");
            assert_eq!(portable_text(want), want, "not idempotent: {want}");
            assert!(shape_specific(want).is_empty(), "{want}: {:?}", shape_specific(want));
        }
        assert!(!shape_specific(&format!("compiled on {}", c_date(1))).is_empty());
        assert!(!shape_specific("package: Open MPI builder@build-host.invalid Distribution").is_empty());
        let home = format!(
            "{}builder/.cache/mpiq/testbed/mpich-4.0.2/lib/libtvmpich.so",
            HOME_DIRS[1]
        );
        assert!(!shape_specific(&home).is_empty());
        assert!(shape_specific("$MPIQ_TESTBED/mpich-4.0.2/lib/libtvmpich.so").is_empty());
        // This machine's own test bed, wherever it is.
        let here = Mpi::testbed_root().join("mpich-4.0.2/lib/libtvmpich.so");
        assert!(!machine_specific(&here.display().to_string()).is_empty());
    }

    #[test]
    fn only_the_machine_dependent_fields_change() {
        let root = Mpi::testbed_root().display().to_string();
        let v = serde_json::json!({"processes": [{
            "pid": 7, "executable": "/x/ring", "stats": {"reads": 1},
            "dll": {"path": format!("{root}/mpich-4.0.2/lib/libtvmpich.so"),
                    "version": format!("MPICH 4.0.2 compiled on {}", c_date(1)), "found_via": "user"},
            "communicators": [{"queues": {"sends": {"operations": [{"tag": 200}]}}}],
        }]});
        let p = portable(v.clone());
        assert_eq!(
            p["processes"][0]["dll"]["path"],
            "$MPIQ_TESTBED/mpich-4.0.2/lib/libtvmpich.so"
        );
        assert_eq!(p["processes"][0]["dll"]["version"], "MPICH 4.0.2 compiled on <date>");
        assert!(p["processes"][0].get("executable").is_none() && p["processes"][0].get("stats").is_none());
        assert_eq!(p["processes"][0]["pid"], 7);
        assert_eq!(p["processes"][0]["communicators"], v["processes"][0]["communicators"]);
        assert_eq!(portable(p.clone()), p);
    }
}
