//! Finding `mpiq-dllhost`, starting it, and keeping the one whose dump
//! ended well for the next dump with the same library.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

use super::error::IsolateError;
use super::names::DLLHOST;
use super::sys;
use super::transport::LineReader;

/// Where `mpiq-dllhost` is: `$MPIQ_DLLHOST`, else next to the executable or
/// shared library this code is in (or one directory up, for test binaries
/// in `target/*/deps`), else in the `bin/` of the installation it is part
/// of: `<prefix>/lib/libmpiq.so` (gdb) and
/// `<prefix>/lib/mpiq/lldb/libmpiq_lldb.so` (lldb) use
/// `<prefix>/bin/mpiq-dllhost`.
pub fn dllhost_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("MPIQ_DLLHOST") {
        let p = PathBuf::from(p);
        return p.is_file().then_some(p);
    }
    let here = sys::this_object().or_else(|| std::env::current_exe().ok())?;
    candidates(here.parent()?).into_iter().find(|p| p.is_file())
}

/// The places [`dllhost_path`] looks at for an object in `dir`.
fn candidates(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![dir.join(DLLHOST)];
    out.extend(dir.parent().map(|d| d.join(DLLHOST)));
    if dir.ends_with("lib") {
        out.extend(dir.parent().map(|p| p.join("bin").join(DLLHOST)));
    }
    if dir.ends_with("lib/mpiq/lldb") {
        out.extend(dir.ancestors().nth(3).map(|p| p.join("bin").join(DLLHOST)));
    }
    out
}

/// A running helper: its process, this process's end of its socket, and
/// the region shared with it.
pub(super) struct Helper {
    pub(super) host: PathBuf,
    pub(super) dll: PathBuf,
    pub(super) child: std::process::Child,
    pub(super) sock: UnixStream,
    pub(super) reader: LineReader,
    pub(super) region: Option<sys::Region>,
}

/// The helper of this process's last dump that ended well, kept for the
/// next dump with the same library: a debugger session's dumps (and the
/// ranks of `mpiq job`) then skip the start, the `dlopen`, and the page
/// faults of a fresh process (about 5 ms at K = 10,000). The library stays
/// loaded between dumps, as it does in-process and in other debuggers; a
/// helper that crashed, hung or misbehaved is never kept.
static KEPT: Mutex<Option<Helper>> = Mutex::new(None);

fn kept() -> std::sync::MutexGuard<'static, Option<Helper>> {
    KEPT.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Helper {
    /// Starts `host` for the library `dll`.
    pub(super) fn spawn(host: &Path, dll: &Path) -> Result<Helper, IsolateError> {
        let (ours, theirs) =
            UnixStream::pair().map_err(|e| start(format!("cannot create a socket for {DLLHOST}"), e))?;
        let (stdin, stdout) = match (theirs.try_clone(), theirs.try_clone()) {
            (Ok(a), Ok(b)) => (OwnedFd::from(a), OwnedFd::from(b)),
            (Err(e), _) | (_, Err(e)) => return Err(start(format!("cannot set up {DLLHOST}"), e)),
        };
        drop(theirs);
        let reader = LineReader::new(
            ours.try_clone()
                .map_err(|e| start(format!("cannot set up {DLLHOST}"), e))?,
        );
        // Without a shared region (no memfd), read bytes go over the socket.
        let mut region = sys::Region::create(sys::SIZE).ok();
        // The library's path as an argument: the helper loads it while this
        // process prepares the start message.
        let mut command = Command::new(host);
        command
            .arg(dll)
            .stdin(Stdio::from(stdin))
            .stdout(Stdio::from(stdout))
            .stderr(Stdio::inherit());
        let spawned = command.spawn();
        // The command holds this process's copies of the helper's ends of
        // the socket: while they are open, the helper's death is no end of file.
        drop(command);
        let child = spawned.map_err(|e| start(format!("cannot start {}", host.display()), e))?;
        // The region first (the helper's first read), then start messages.
        if sys::send_fd(ours.as_raw_fd(), region.as_ref().map(sys::Region::raw_fd)).is_err() {
            region = None;
        }
        Ok(Helper {
            host: host.to_path_buf(),
            dll: dll.to_path_buf(),
            child,
            sock: ours,
            reader,
            region,
        })
    }

    /// The kept helper, if it runs `host` for `dll` and is still alive.
    pub(super) fn take_kept(host: &Path, dll: &Path) -> Option<Helper> {
        let mut helper = kept().take()?;
        let alive = matches!(helper.child.try_wait(), Ok(None));
        (alive && helper.host == host && helper.dll == dll).then_some(helper)
    }

    /// Keeps this helper for the next dump.
    pub(super) fn keep(self) {
        // The one kept before (another library) ends here.
        *kept() = Some(self);
    }
}

/// A failure to start the helper.
fn start(what: String, source: std::io::Error) -> IsolateError {
    IsolateError::Start { what, source }
}

impl Drop for Helper {
    fn drop(&mut self) {
        // Already ended (its status collected) or not: it ends now.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_installations_libraries_use_its_bin() {
        let p = |s: &str| PathBuf::from(s).join(DLLHOST);
        assert_eq!(
            candidates(Path::new("/opt/mpiq/lib")),
            vec![p("/opt/mpiq/lib"), p("/opt/mpiq"), p("/opt/mpiq/bin")]
        );
        assert_eq!(
            candidates(Path::new("/opt/mpiq/lib/mpiq/lldb")),
            vec![
                p("/opt/mpiq/lib/mpiq/lldb"),
                p("/opt/mpiq/lib/mpiq"),
                p("/opt/mpiq/bin")
            ]
        );
        assert_eq!(
            candidates(Path::new("/co/target/release/deps")),
            vec![p("/co/target/release/deps"), p("/co/target/release")]
        );
    }
}
