//! Finding, checking and loading a message queue debug library ("the DLL").
//!
//! A library is checked before `dlopen` (a regular file, an ELF shared
//! object for this host's class and machine) and after (the mqs entry points,
//! `mqs_version_compatibility()`, `mqs_dll_taddr_width()`). Loaded libraries
//! are kept for the life of the process: their global state (the basic
//! callback table) must outlive every image and process set up through them.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, CStr};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use libloading::Library;

use crate::ffi::abi::*;
use crate::ffi::trampolines::BASIC_CALLBACKS;

/// Why a debug library was not used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DllError {
    /// The file does not exist or cannot be read.
    #[error("debug library {path}: {reason}")]
    Unreadable {
        /// The path tried.
        path: String,
        /// What the OS said.
        reason: String,
    },
    /// Not an ELF shared object for this host.
    #[error("debug library {path} is not usable here: found {found}, expected {expected}")]
    WrongFormat {
        /// The path tried.
        path: String,
        /// What the file is.
        found: String,
        /// What mpiq needs.
        expected: String,
    },
    /// `dlopen` failed.
    #[error("cannot load debug library {path}: {reason}")]
    LoadFailed {
        /// The path tried.
        path: String,
        /// `dlerror()`.
        reason: String,
    },
    /// A required `mqs_*` entry point is missing.
    #[error("{path} is not an MPI message queue debug library: it does not export {symbol}")]
    MissingEntryPoint {
        /// The path tried.
        path: String,
        /// The missing symbol.
        symbol: &'static str,
    },
    /// The target named a library mpiq does not trust to run in this process.
    #[error(
        "refusing to load the debug library {path} that the target names: {reason}. A target can name \
         any file, so mpiq only loads libraries owned by root or by you, writable only by their owner, \
         in a directory others cannot write. If you trust it, set MPIQ_TRUST_DLL=1 (or MPIQ_TRUST_DLL={path}), \
         or name it yourself with --dll {path}"
    )]
    Untrusted {
        /// The path named by the target.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The library speaks another version of the interface.
    #[error("debug library {path} is incompatible: {reason}")]
    Incompatible {
        /// The path tried.
        path: String,
        /// Found and expected.
        reason: String,
    },
}

/// The entry points of a loaded library.
pub(crate) struct EntryPoints {
    pub dll_error_string: Option<mqs_dll_error_string_fn>,
    pub setup_image: mqs_setup_image_fn,
    pub image_has_queues: mqs_image_has_queues_fn,
    pub destroy_image_info: Option<mqs_destroy_image_info_fn>,
    pub setup_process: mqs_setup_process_fn,
    pub process_has_queues: mqs_process_has_queues_fn,
    pub destroy_process_info: Option<mqs_destroy_process_info_fn>,
    pub update_communicator_list: mqs_process_fn,
    pub setup_communicator_iterator: mqs_process_fn,
    pub get_communicator: mqs_get_communicator_fn,
    pub next_communicator: mqs_process_fn,
    pub get_comm_group: Option<mqs_get_comm_group_fn>,
    pub setup_operation_iterator: mqs_setup_operation_iterator_fn,
    pub next_operation: mqs_next_operation_fn,
}

/// A loaded, checked debug library. Lives until the process exits.
pub struct Dll {
    path: PathBuf,
    version: String,
    pub(crate) entry: EntryPoints,
    /// Serializes every call into the library: its state is global.
    pub(crate) lock: Mutex<()>,
    _lib: Library,
}

impl std::fmt::Debug for Dll {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dll")
            .field("path", &self.path)
            .field("version", &self.version)
            .finish()
    }
}

impl Dll {
    /// The path it was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `mqs_version_string()`.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// Whether the library offers `mqs_get_comm_group`.
    pub fn has_comm_group(&self) -> bool {
        self.entry.get_comm_group.is_some()
    }

    /// The library's text for one of its error codes.
    pub(crate) fn error_string(&self, code: c_int) -> Option<String> {
        let f = self.entry.dll_error_string?;
        // SAFETY: an exported mqs_dll_error_string takes any int and returns
        // NULL or a static NUL-terminated string; the lock is held by callers
        // that run the library, and this function touches no library state.
        let p = unsafe { f(code) };
        // SAFETY: p is NULL or a NUL-terminated string owned by the library.
        unsafe { c_string(p) }
    }
}

/// Copies a NUL-terminated C string, lossily as UTF-8.
///
/// # Safety
/// `p` must be NULL or point to a NUL-terminated string.
pub(crate) unsafe fn c_string(p: *const c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: guaranteed by the caller.
    Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

static LOADED: OnceLock<Mutex<HashMap<PathBuf, &'static Dll>>> = OnceLock::new();

/// Loads (once) and checks the library at `path`.
pub fn load(path: &Path) -> Result<&'static Dll, DllError> {
    let shown = path.display().to_string();
    let canonical = std::fs::canonicalize(path).map_err(|e| DllError::Unreadable {
        path: shown.clone(),
        reason: e.to_string(),
    })?;
    let map = LOADED.get_or_init(Default::default);
    let mut map = map.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(dll) = map.get(&canonical) {
        return Ok(dll);
    }
    check_elf(&canonical, &shown)?;
    // SAFETY: loading runs the library's constructors. The path was checked
    // to be a shared object for this host; trusting its code is the point of
    // the MQD interface (the DLL ships with the MPI the user runs).
    let lib = unsafe { Library::new(&canonical) }.map_err(|e| DllError::LoadFailed {
        path: shown.clone(),
        reason: e.to_string(),
    })?;
    let dll = bind(lib, path.to_path_buf(), &shown)?;
    let dll: &'static Dll = Box::leak(Box::new(dll));
    map.insert(canonical, dll);
    Ok(dll)
}

fn bind(lib: Library, path: PathBuf, shown: &str) -> Result<Dll, DllError> {
    macro_rules! required {
        ($name:literal, $ty:ty) => {{
            // SAFETY: the symbol is declared with the type the MQD header
            // gives it; `Library` is kept alive in the returned `Dll`.
            let sym = unsafe { lib.get::<$ty>(concat!($name, "\0").as_bytes()) };
            *sym.map_err(|_| DllError::MissingEntryPoint {
                path: shown.to_string(),
                symbol: $name,
            })?
        }};
    }
    macro_rules! optional {
        ($name:literal, $ty:ty) => {{
            // SAFETY: as for required entry points.
            unsafe { lib.get::<$ty>(concat!($name, "\0").as_bytes()) }
                .ok()
                .map(|s| *s)
        }};
    }
    let setup_basic: mqs_setup_basic_callbacks_fn =
        required!("mqs_setup_basic_callbacks", mqs_setup_basic_callbacks_fn);
    let version_string = required!("mqs_version_string", mqs_version_string_fn);
    let compat = required!("mqs_version_compatibility", mqs_version_compatibility_fn);
    let width: Option<mqs_dll_taddr_width_fn> = optional!("mqs_dll_taddr_width", mqs_dll_taddr_width_fn);
    let entry = EntryPoints {
        dll_error_string: optional!("mqs_dll_error_string", mqs_dll_error_string_fn),
        setup_image: required!("mqs_setup_image", mqs_setup_image_fn),
        image_has_queues: required!("mqs_image_has_queues", mqs_image_has_queues_fn),
        destroy_image_info: optional!("mqs_destroy_image_info", mqs_destroy_image_info_fn),
        setup_process: required!("mqs_setup_process", mqs_setup_process_fn),
        process_has_queues: required!("mqs_process_has_queues", mqs_process_has_queues_fn),
        destroy_process_info: optional!("mqs_destroy_process_info", mqs_destroy_process_info_fn),
        update_communicator_list: required!("mqs_update_communicator_list", mqs_process_fn),
        setup_communicator_iterator: required!("mqs_setup_communicator_iterator", mqs_process_fn),
        get_communicator: required!("mqs_get_communicator", mqs_get_communicator_fn),
        next_communicator: required!("mqs_next_communicator", mqs_process_fn),
        get_comm_group: optional!("mqs_get_comm_group", mqs_get_comm_group_fn),
        setup_operation_iterator: required!("mqs_setup_operation_iterator", mqs_setup_operation_iterator_fn),
        next_operation: required!("mqs_next_operation", mqs_next_operation_fn),
    };

    // SAFETY: these entry points take no arguments and only return constants.
    let level = unsafe { compat() };
    if level == MQS_INTERFACE_COMPATIBILITY_MPI2 {
        return Err(DllError::Incompatible {
            path: shown.to_string(),
            reason: format!(
                "mqs_version_compatibility() is {level}: it was built with the MPI-2 job \
                 extensions (FOR_MPI2), whose larger callback tables mpiq does not provide; \
                 expected {MQS_INTERFACE_COMPATIBILITY}. Use a library built without FOR_MPI2 (--dll FILE)"
            ),
        });
    }
    if level != MQS_INTERFACE_COMPATIBILITY {
        return Err(DllError::Incompatible {
            path: shown.to_string(),
            reason: format!(
                "mqs_version_compatibility() is {level}, expected {MQS_INTERFACE_COMPATIBILITY} \
                 (the MQD interface mpiq implements)"
            ),
        });
    }
    let host_width = std::mem::size_of::<mqs_taddr_t>() as c_int;
    if let Some(width) = width {
        // SAFETY: as above.
        let w = unsafe { width() };
        if w != host_width {
            return Err(DllError::Incompatible {
                path: shown.to_string(),
                reason: format!("mqs_dll_taddr_width() is {w}, but this mpiq uses {host_width}-byte target addresses"),
            });
        }
    }
    // SAFETY: as above; the string is static in the library.
    let version = unsafe { c_string(version_string()) }.unwrap_or_default();
    // SAFETY: the table is a static with 'static lifetime and no NULL pointers.
    unsafe { setup_basic(&BASIC_CALLBACKS) };
    Ok(Dll {
        path,
        version,
        entry,
        lock: Mutex::new(()),
        _lib: lib,
    })
}

/// Whether the user allowed target-named libraries through `MPIQ_TRUST_DLL`:
/// `1`/`all`/`yes` trusts every library, otherwise a `:`-separated list of
/// files or directories.
fn trusted_by_env(canonical: &Path) -> bool {
    let Some(v) = std::env::var_os("MPIQ_TRUST_DLL") else {
        return false;
    };
    let v = v.to_string_lossy();
    if matches!(v.trim(), "1" | "all" | "yes" | "true") {
        return true;
    }
    v.split(':')
        .filter(|s| !s.is_empty())
        .any(|entry| std::fs::canonicalize(entry).is_ok_and(|e| canonical == e || canonical.starts_with(&e)))
}

/// Checks that a library the *target* named may be loaded: a regular file
/// owned by root or by the user running mpiq, not writable by group or
/// others, in a directory not writable by others (checked on the resolved
/// path) — unless the user allowed it with `MPIQ_TRUST_DLL`.
pub fn check_trusted(path: &Path) -> Result<(), DllError> {
    use std::os::unix::fs::MetadataExt;
    let shown = path.display().to_string();
    let untrusted = |reason: String| DllError::Untrusted {
        path: shown.clone(),
        reason,
    };
    let canonical = std::fs::canonicalize(path).map_err(|e| DllError::Unreadable {
        path: shown.clone(),
        reason: e.to_string(),
    })?;
    if trusted_by_env(&canonical) {
        return Ok(());
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let meta = std::fs::metadata(&canonical).map_err(|e| untrusted(e.to_string()))?;
    if !meta.is_file() {
        return Err(untrusted("it is not a regular file".into()));
    }
    if meta.uid() != 0 && meta.uid() != me {
        return Err(untrusted(format!(
            "it is owned by uid {}, neither root nor you (uid {me})",
            meta.uid()
        )));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(untrusted(format!(
            "it is writable by {} (mode {:o})",
            if meta.mode() & 0o002 != 0 {
                "everyone"
            } else {
                "its group"
            },
            meta.mode() & 0o7777
        )));
    }
    if let Some(dir) = canonical.parent() {
        let d = std::fs::metadata(dir).map_err(|e| untrusted(e.to_string()))?;
        if d.mode() & 0o002 != 0 {
            return Err(untrusted(format!(
                "its directory {} is writable by everyone (mode {:o})",
                dir.display(),
                d.mode() & 0o7777
            )));
        }
    }
    Ok(())
}

/// Checks that `path` is a regular file holding an ELF shared object of this
/// host's class, byte order and machine.
fn check_elf(path: &Path, shown: &str) -> Result<(), DllError> {
    let unreadable = |e: std::io::Error| DllError::Unreadable {
        path: shown.to_string(),
        reason: e.to_string(),
    };
    let meta = std::fs::metadata(path).map_err(unreadable)?;
    let wrong = |found: String| DllError::WrongFormat {
        path: shown.to_string(),
        found,
        expected: format!("an ELF shared object for {}", host_machine().1),
    };
    if !meta.is_file() {
        return Err(wrong("not a regular file".into()));
    }
    let mut header = [0u8; 20];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut header))
        .map_err(unreadable)?;
    if n < 20 || &header[..4] != b"\x7fELF" {
        return Err(wrong("a file that is not ELF".into()));
    }
    let class = header[4];
    let little = header[5] == 1;
    let rd16 = |o: usize| {
        let b = [header[o], header[o + 1]];
        if little {
            u16::from_le_bytes(b)
        } else {
            u16::from_be_bytes(b)
        }
    };
    let (e_type, e_machine) = (rd16(16), rd16(18));
    let want_class = if cfg!(target_pointer_width = "64") { 2 } else { 1 };
    let (want_machine, host_name) = host_machine();
    let found_desc = format!(
        "ELF{} {} {} (type {})",
        if class == 2 { 64 } else { 32 },
        if little { "little-endian" } else { "big-endian" },
        machine_name(e_machine),
        match e_type {
            1 => "relocatable object",
            2 => "executable",
            3 => "shared object",
            4 => "core file",
            _ => "unknown",
        }
    );
    if class != want_class || little != cfg!(target_endian = "little") || e_machine != want_machine || e_type != 3 {
        let _ = host_name;
        return Err(wrong(found_desc));
    }
    Ok(())
}

fn host_machine() -> (u16, &'static str) {
    if cfg!(target_arch = "x86_64") {
        (62, "x86_64 (ELF64, little-endian)")
    } else if cfg!(target_arch = "aarch64") {
        (183, "aarch64 (ELF64, little-endian)")
    } else if cfg!(target_arch = "powerpc64") {
        (21, "ppc64")
    } else if cfg!(target_arch = "riscv64") {
        (243, "riscv64")
    } else {
        (0, std::env::consts::ARCH)
    }
}

fn machine_name(m: u16) -> String {
    match m {
        3 => "i386".into(),
        40 => "ARM".into(),
        62 => "x86_64".into(),
        183 => "aarch64".into(),
        21 => "ppc64".into(),
        243 => "riscv".into(),
        other => format!("machine {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_non_elf_and_executables() {
        let dir = std::env::temp_dir().join(format!("mpiq-dll-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let text = dir.join("notes.txt");
        std::fs::write(&text, b"hello, this is not a library").unwrap();
        let e = load(&text).unwrap_err();
        assert!(matches!(e, DllError::WrongFormat { .. }), "{e}");
        assert!(e.to_string().contains("not ELF"), "{e}");
        let e = load(&dir.join("missing.so")).unwrap_err();
        assert!(matches!(e, DllError::Unreadable { .. }), "{e}");
        // An executable is ELF but not a shared object... unless PIE; /bin/true
        // on Debian is PIE (ET_DYN), so use a directory for "not a file".
        let e = load(&dir).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn refuses_a_shared_object_without_entry_points() {
        // libm is a shared object everywhere but exports no mqs_* symbols.
        let libm = ["/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .expect("libm.so.6 (this test runs on x86_64 Debian)");
        let e = load(Path::new(libm)).unwrap_err();
        assert!(
            matches!(
                e,
                DllError::MissingEntryPoint {
                    symbol: "mqs_setup_basic_callbacks",
                    ..
                }
            ),
            "{e}"
        );
    }
}

#[cfg(test)]
mod trust_tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn target_named_libraries_must_be_private_files() {
        let dir = std::env::temp_dir().join(format!("mpiq-trust-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let lib = dir.join("libplanted.so");
        std::fs::write(&lib, b"x").unwrap();
        std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(check_trusted(&lib), Ok(()));
        std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = check_trusted(&lib).unwrap_err();
        assert!(e.to_string().contains("writable by everyone"), "{e}");
        assert!(e.to_string().contains("MPIQ_TRUST_DLL"), "{e}");
        std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = check_trusted(&lib).unwrap_err();
        assert!(e.to_string().contains("directory"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
