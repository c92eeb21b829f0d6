//! The MPI calls the flight recorder records are listed in five places that
//! no compiler compares: the C header (`recorder/mpiq_recorder.h`, `enum
//! mpiq_recorder_call`, the one source of their numbers), the C bindings
//! (`recorder/calls.c`, `recorder/recorder.c`), the Fortran bindings
//! (`recorder/fortran.c`), the reader's names (`mpiq::recorder::call_name`)
//! and the stacks' classes (`mpiq::stacks::names::classify`). This test
//! reads the header and holds the other four to it.

use std::path::Path;

use mpiq::recorder::{call_name, WAIT_CALLS};
use mpiq::stacks::names::{classify, CallClass};

/// A source file of the recorder.
fn recorder_file(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../recorder").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `enum mpiq_recorder_call`'s constants: (`MPIQ_CALL_X`, number).
fn header_calls() -> Vec<(String, i32)> {
    let text = recorder_file("mpiq_recorder.h");
    let start = text.find("enum mpiq_recorder_call {").expect("enum mpiq_recorder_call");
    let body = &text[start..start + text[start..].find("};").expect("its end")];
    let calls: Vec<(String, i32)> = body
        .lines()
        .filter_map(|l| {
            let (name, rest) = l.trim().split_once(" = ")?;
            let n = rest.split(',').next()?.trim().parse().ok()?;
            Some((name.to_string(), n))
        })
        .collect();
    assert!(calls.len() > 40, "too few calls read from the header: {calls:?}");
    calls
}

/// `MPIQ_CALL_SEND_INIT` -> `send_init`.
fn canonical(constant: &str) -> String {
    constant
        .strip_prefix("MPIQ_CALL_")
        .expect(constant)
        .to_ascii_lowercase()
}

/// The `MPIQ_CALL_X` constants a C file names.
fn constants_in(text: &str) -> Vec<String> {
    let mut out: Vec<String> = text
        .match_indices("MPIQ_CALL_")
        .map(|(i, _)| {
            text[i..]
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect()
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

#[test]
fn the_reader_names_every_call_of_the_header_and_no_other() {
    let calls = header_calls();
    for (constant, n) in &calls {
        assert_eq!(call_name(*n), canonical(constant), "{constant} = {n}");
    }
    for n in -1..256 {
        if !calls.iter().any(|(_, m)| *m == n) {
            assert_eq!(call_name(n), "unknown", "{n} is no call of the header");
        }
    }
}

#[test]
fn the_c_bindings_record_every_call_of_the_header_and_no_other() {
    let calls = header_calls();
    let c = format!("{}\n{}", recorder_file("calls.c"), recorder_file("recorder.c"));
    let fortran = recorder_file("fortran.c");
    for (file, text) in [("calls.c, recorder.c", &c), ("fortran.c", &fortran)] {
        for used in constants_in(text) {
            assert!(
                calls.iter().any(|(k, _)| *k == used),
                "{file} records {used}, which the header does not number"
            );
        }
    }
    let in_c = constants_in(&c);
    let in_fortran = constants_in(&fortran);
    // fortran.c passes the matched probes on unrecorded (its header
    // comment says why): their peer and tag live in calls.c's table.
    let not_fortran = [
        "MPIQ_CALL_MPROBE",
        "MPIQ_CALL_IMPROBE",
        "MPIQ_CALL_MRECV",
        "MPIQ_CALL_IMRECV",
    ];
    assert!(fortran.contains("MPI_MPROBE and MPI_MRECV are passed\n * on unrecorded here"));
    for (constant, _) in &calls {
        assert!(in_c.contains(constant), "{constant}: no C binding records it");
        assert_eq!(
            in_fortran.contains(constant),
            !not_fortran.contains(&constant.as_str()),
            "{constant}: fortran.c {} it",
            if in_fortran.contains(constant) {
                "records"
            } else {
                "does not record"
            }
        );
    }
}

#[test]
fn the_stacks_know_every_recorded_call() {
    for (constant, _) in header_calls() {
        let name = canonical(&constant);
        let class = classify(&name);
        // Every recorded call is one the stacks reason about (a local call
        // is one they know nothing of).
        assert!(
            class != CallClass::Local,
            "{name}: the stacks do not know the recorded call (classified {class:?})"
        );
    }
}

#[test]
fn the_wait_and_test_calls_are_the_headers_waits_and_tests() {
    // The reader counts requests of the calls numbered WAIT_CALLS.
    let waits: Vec<String> = header_calls()
        .into_iter()
        .filter(|(_, n)| WAIT_CALLS.contains(n))
        .map(|(c, _)| canonical(&c))
        .collect();
    assert_eq!(
        waits,
        ["wait", "waitall", "waitany", "waitsome", "test", "testall", "testany", "testsome"]
    );
}
