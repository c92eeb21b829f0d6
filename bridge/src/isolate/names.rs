//! Names for messages: the helper's file name and a signal's name. A leaf
//! of the isolate layer, read by the error type and by both sides.

/// The helper's file name.
pub const DLLHOST: &str = "mpiq-dllhost";

/// A signal that ended the helper, in words.
pub(super) fn signal_name(sig: i32) -> String {
    match sig {
        libc::SIGSEGV => "SIGSEGV, a segmentation fault".into(),
        libc::SIGABRT => "SIGABRT, it called abort()".into(),
        libc::SIGBUS => "SIGBUS".into(),
        libc::SIGFPE => "SIGFPE".into(),
        libc::SIGILL => "SIGILL".into(),
        libc::SIGKILL => "SIGKILL".into(),
        other => format!("signal {other}"),
    }
}
