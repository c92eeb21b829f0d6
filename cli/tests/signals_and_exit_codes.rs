//! Ctrl-C (SIGINT) and SIGTERM while processes are stopped: `mpiq` releases
//! every process before it exits with 128 + the signal.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use mpiq_tests::run::{run, spawn};

fn interrupt_dump(signal: &str, code: i32) {
    if !tools_present() {
        return;
    }
    let b = build(Variant::Plain);
    let r1 = start(&b);
    let r2 = start(&b);
    let mut mpiq = Command::new(env!("CARGO_BIN_EXE_mpiq"));
    mpiq.args(["queues", "--pid", &r1.pid().to_string(), "--pid", &r2.pid().to_string()])
        .env("MPIQ_TEST_HOLD_MS", "20000");
    let mpiq = spawn(mpiq);
    // Wait until both are stopped by mpiq: traced (PTRACE_SEIZE sets the
    // tracer at once) and then stopped (`t`, a moment later, once the
    // interrupt reached them: a loaded machine showed `R` in between).
    let deadline = Instant::now() + Duration::from_secs(20);
    while [r1.pid(), r2.pid()]
        .iter()
        .any(|&p| state(p).1 == 0 || state(p).0 != 't')
    {
        assert!(Instant::now() < deadline, "mpiq did not attach");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(state(r1.pid()).0, 't');
    mpiq.signal(signal);
    let out = mpiq.wait_within(Duration::from_secs(60));
    assert_eq!(out.code(), Some(code), "{out}");
    assert!(out.stderr.contains("released 2 processes"), "{out}");
    assert_running(r1.pid());
    assert_running(r2.pid());
}

#[test]
fn sigint_releases_every_process() {
    interrupt_dump("INT", 130);
}

#[test]
fn sigterm_releases_every_process() {
    interrupt_dump("TERM", 143);
}

#[test]
fn usage_errors_exit_2_and_failures_exit_1() {
    let mpiq = env!("CARGO_BIN_EXE_mpiq");
    let code = |args: &[&str]| run(Command::new(mpiq).args(args)).code();
    assert_eq!(code(&["queues"]), Some(2));
    assert_eq!(code(&["frobnicate"]), Some(2));
    assert_eq!(code(&["queues", "--pid", "1", "--queue", "bogus"]), Some(2));
    assert_eq!(code(&["--help"]), Some(0));
    // No such process: nothing could be read.
    let out = run(Command::new(mpiq).args(["queues", "--pid", "999999999"]));
    assert_eq!(out.code(), Some(1), "{out}");
    assert!(out.stderr.contains("no process 999999999"), "{out}");
    assert_eq!(code(&["core", "/nonexistent/core"]), Some(1));
}
