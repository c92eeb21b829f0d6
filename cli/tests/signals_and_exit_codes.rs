//! Ctrl-C (SIGINT) and SIGTERM while processes are stopped: `mpiq` releases
//! every process before it exits with 128 + the signal.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

fn interrupt_dump(signal: &str, code: i32) {
    if !tools_present() {
        return;
    }
    let b = build(Variant::Plain);
    let r1 = start(&b);
    let r2 = start(&b);
    let mpiq = Command::new(env!("CARGO_BIN_EXE_mpiq"))
        .args(["queues", "--pid", &r1.pid().to_string(), "--pid", &r2.pid().to_string()])
        .env("MPIQ_TEST_HOLD_MS", "20000")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until both are stopped by mpiq.
    let deadline = Instant::now() + Duration::from_secs(20);
    while [r1.pid(), r2.pid()].iter().any(|&p| state(p).1 == 0) {
        assert!(Instant::now() < deadline, "mpiq did not attach");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(state(r1.pid()).0, 't');
    let status = Command::new("kill")
        .args([signal, &mpiq.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = mpiq.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(code),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("released 2 processes"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_running(r1.pid());
    assert_running(r2.pid());
}

#[test]
fn sigint_releases_every_process() {
    interrupt_dump("-INT", 130);
}

#[test]
fn sigterm_releases_every_process() {
    interrupt_dump("-TERM", 143);
}

#[test]
fn usage_errors_exit_2_and_failures_exit_1() {
    let mpiq = env!("CARGO_BIN_EXE_mpiq");
    let code = |args: &[&str]| Command::new(mpiq).args(args).output().unwrap().status.code();
    assert_eq!(code(&["queues"]), Some(2));
    assert_eq!(code(&["frobnicate"]), Some(2));
    assert_eq!(code(&["queues", "--pid", "1", "--queue", "bogus"]), Some(2));
    assert_eq!(code(&["--help"]), Some(0));
    // No such process: nothing could be read.
    let out = Command::new(mpiq)
        .args(["queues", "--pid", "999999999"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no process 999999999"));
    assert_eq!(code(&["core", "/nonexistent/core"]), Some(1));
}
