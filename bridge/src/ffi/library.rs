//! A loaded message queue debug library, and its entry points made safe to
//! call: `dlopen`, the symbol lookups, the interface checks and every
//! `mqs_*` call live here, so that the layers above hold no raw pointer.
//!
//! As in libloading, the raw part ([`Library::open`], which runs the
//! library's constructors) is split from the safe part: the calls, made
//! through [`Running`], the guard of the library's lock. The libraries keep
//! global state (the basic callback table, their own caches), so one dump at
//! a time runs through one library, and holding a [`Running`] is the proof.

use std::ffi::{c_char, c_int, CStr};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use super::abi::*;
use super::session::Session;
use super::trampolines::{BASIC_CALLBACKS, IMAGE_CALLBACKS, PROCESS_CALLBACKS};

/// Why a file could not be opened as a debug library (the file's checks
/// before `dlopen` are the caller's).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// `dlopen` failed: `dlerror()`.
    #[error("{0}")]
    LoadFailed(String),
    /// A required `mqs_*` entry point is missing.
    #[error("it does not export {0}")]
    MissingEntryPoint(&'static str),
    /// The library speaks another version of the interface.
    #[error("{0}")]
    Incompatible(String),
}

/// The entry points of a loaded library.
struct EntryPoints {
    dll_error_string: Option<mqs_dll_error_string_fn>,
    setup_image: mqs_setup_image_fn,
    image_has_queues: mqs_image_has_queues_fn,
    destroy_image_info: Option<mqs_destroy_image_info_fn>,
    setup_process: mqs_setup_process_fn,
    process_has_queues: mqs_process_has_queues_fn,
    destroy_process_info: Option<mqs_destroy_process_info_fn>,
    update_communicator_list: mqs_process_fn,
    setup_communicator_iterator: mqs_process_fn,
    get_communicator: mqs_get_communicator_fn,
    next_communicator: mqs_process_fn,
    get_comm_group: Option<mqs_get_comm_group_fn>,
    setup_operation_iterator: mqs_setup_operation_iterator_fn,
    next_operation: mqs_next_operation_fn,
}

/// A loaded, checked debug library.
pub struct Library {
    path: PathBuf,
    version: String,
    entry: EntryPoints,
    /// Serialises every call into the library: its state is global.
    lock: Mutex<()>,
    _lib: libloading::Library,
}

impl std::fmt::Debug for Library {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Library")
            .field("path", &self.path)
            .field("version", &self.version)
            .finish()
    }
}

/// Copies a NUL-terminated C string, lossily as UTF-8.
///
/// # Safety
/// `p` must be NULL or point to a NUL-terminated string.
unsafe fn c_string(p: *const c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: guaranteed by the caller.
    Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

impl Library {
    /// Loads the shared object `file` (already checked to be one for this
    /// host), binds its entry points, checks the interface version and
    /// address width, and hands it the basic callbacks; `path` is how the
    /// user or the target named it.
    ///
    /// Loading runs the library's constructors, and every later call runs
    /// its code: only `dll::load` calls this, after checking the file (and,
    /// for a library the target named, the trust policy, `dll::trust`).
    pub(crate) fn open(file: &Path, path: &Path) -> Result<Library, OpenError> {
        // SAFETY: `dll::load` checked that `file` is an ELF shared object for
        // this host, and that a library the target named passes the trust
        // policy; trusting its code is the premise of the MQD interface (the
        // library ships with the MPI the user runs).
        let lib = unsafe { libloading::Library::new(file) }.map_err(|e| OpenError::LoadFailed(e.to_string()))?;
        macro_rules! required {
            ($name:literal, $ty:ty) => {{
                // SAFETY: the symbol is declared with the type the MQD header
                // gives it; `lib` is kept alive in the returned `Library`.
                let sym = unsafe { lib.get::<$ty>(concat!($name, "\0").as_bytes()) };
                *sym.map_err(|_| OpenError::MissingEntryPoint($name))?
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
            return Err(OpenError::Incompatible(format!(
                "mqs_version_compatibility() is {level}: it was built with the MPI-2 job \
                 extensions (FOR_MPI2), whose larger callback tables mpiq does not provide; \
                 expected {MQS_INTERFACE_COMPATIBILITY}. Use a library built without FOR_MPI2 (--dll FILE)"
            )));
        }
        if level != MQS_INTERFACE_COMPATIBILITY {
            return Err(OpenError::Incompatible(format!(
                "mqs_version_compatibility() is {level}, expected {MQS_INTERFACE_COMPATIBILITY} \
                 (the MQD interface mpiq implements)"
            )));
        }
        let host_width = std::mem::size_of::<mqs_taddr_t>() as c_int;
        if let Some(width) = width {
            // SAFETY: as above.
            let w = unsafe { width() };
            if w != host_width {
                return Err(OpenError::Incompatible(format!(
                    "mqs_dll_taddr_width() is {w}, but this mpiq uses {host_width}-byte target addresses"
                )));
            }
        }
        // SAFETY: as above; the string is static in the library.
        let version = unsafe { c_string(version_string()) }.unwrap_or_default();
        // SAFETY: the table is a static with 'static lifetime and no NULL pointers.
        unsafe { setup_basic(&BASIC_CALLBACKS) };
        Ok(Library {
            path: path.to_path_buf(),
            version,
            entry,
            lock: Mutex::new(()),
            _lib: lib,
        })
    }

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

    /// The library's lock: every call into it goes through the guard.
    pub fn lock(&self) -> Running<'_> {
        Running {
            lib: self,
            _guard: self.lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner),
        }
    }
}

/// A library whose lock this thread holds: its `mqs_*` calls, for the
/// handles of one [`Session`].
pub struct Running<'a> {
    lib: &'a Library,
    _guard: MutexGuard<'a, ()>,
}

/// A library's `has_queues` answer: its code and the message it set.
pub type HasQueues = (c_int, Option<String>);

impl Running<'_> {
    /// The library's text for one of its error codes.
    pub fn error_string(&self, code: c_int) -> Option<String> {
        let f = self.lib.entry.dll_error_string?;
        // SAFETY: mqs_dll_error_string takes any int and returns NULL or a
        // static NUL-terminated string; the lock is held.
        let p = unsafe { f(code) };
        // SAFETY: p is NULL or a NUL-terminated string owned by the library.
        unsafe { c_string(p) }
    }

    /// `mqs_setup_image` with mpiq's image callbacks.
    pub fn setup_image(&self, s: &mut Session<'_>) -> c_int {
        // SAFETY: the image handle is live for the session; the table is static.
        unsafe { (self.lib.entry.setup_image)(s.image_ptr(), &IMAGE_CALLBACKS) }
    }

    /// `mqs_image_has_queues`.
    pub fn image_has_queues(&self, s: &mut Session<'_>) -> HasQueues {
        let mut message: *mut c_char = std::ptr::null_mut();
        // SAFETY: live image handle; `message` is a valid out-pointer.
        let rc = unsafe { (self.lib.entry.image_has_queues)(s.image_ptr(), &mut message) };
        // SAFETY: the library sets it to NULL or a static NUL-terminated string.
        (rc, unsafe { c_string(message) })
    }

    /// `mqs_setup_process` with mpiq's process callbacks.
    pub fn setup_process(&self, s: &mut Session<'_>) -> c_int {
        // SAFETY: live process handle; the table is static.
        unsafe { (self.lib.entry.setup_process)(s.process_ptr(), &PROCESS_CALLBACKS) }
    }

    /// `mqs_process_has_queues`.
    pub fn process_has_queues(&self, s: &mut Session<'_>) -> HasQueues {
        let mut message: *mut c_char = std::ptr::null_mut();
        // SAFETY: live process handle; `message` is a valid out-pointer.
        let rc = unsafe { (self.lib.entry.process_has_queues)(s.process_ptr(), &mut message) };
        // SAFETY: as in image_has_queues.
        (rc, unsafe { c_string(message) })
    }

    /// `mqs_update_communicator_list`.
    pub fn update_communicator_list(&self, s: &mut Session<'_>) -> c_int {
        // SAFETY: live process handle.
        unsafe { (self.lib.entry.update_communicator_list)(s.process_ptr()) }
    }

    /// `mqs_setup_communicator_iterator`.
    pub fn setup_communicator_iterator(&self, s: &mut Session<'_>) -> c_int {
        // SAFETY: live process handle.
        unsafe { (self.lib.entry.setup_communicator_iterator)(s.process_ptr()) }
    }

    /// `mqs_get_communicator`: the current communicator, or the code.
    pub fn get_communicator(&self, s: &mut Session<'_>) -> Result<mqs_communicator, c_int> {
        let mut raw = mqs_communicator::zeroed();
        // SAFETY: live process handle; `raw` is a valid out-pointer.
        let rc = unsafe { (self.lib.entry.get_communicator)(s.process_ptr(), &mut raw) };
        if rc == mqs_ok {
            Ok(raw)
        } else {
            Err(rc)
        }
    }

    /// `mqs_next_communicator`.
    pub fn next_communicator(&self, s: &mut Session<'_>) -> c_int {
        // SAFETY: live process handle.
        unsafe { (self.lib.entry.next_communicator)(s.process_ptr()) }
    }

    /// `mqs_get_comm_group` for a communicator of `size` members: `None`
    /// when the library has no such entry point or it failed.
    pub fn comm_group(&self, s: &mut Session<'_>, size: usize) -> Option<Vec<c_int>> {
        let f = self.lib.entry.get_comm_group?;
        let mut members = vec![-1 as c_int; size];
        // SAFETY: live process handle; `members` has room for `size` ints,
        // the current communicator's size as the library reported it.
        let rc = unsafe { f(s.process_ptr(), members.as_mut_ptr()) };
        (rc == mqs_ok).then_some(members)
    }

    /// `mqs_setup_operation_iterator` for one class of operations.
    pub fn setup_operation_iterator(&self, s: &mut Session<'_>, class: c_int) -> c_int {
        // SAFETY: live process handle.
        unsafe { (self.lib.entry.setup_operation_iterator)(s.process_ptr(), class) }
    }

    /// `mqs_next_operation`: on success the operation's record
    /// ([`mqs_pending_operation::RECORD`] bytes, as the library wrote it) is
    /// appended to `records`. Returns the library's code.
    pub fn next_operation(&self, s: &mut Session<'_>, records: &mut Vec<u8>) -> c_int {
        let mut raw = mqs_pending_operation::zeroed();
        // SAFETY: live process handle; `raw` is a valid out-pointer.
        let rc = unsafe { (self.lib.entry.next_operation)(s.process_ptr(), &mut raw) };
        if rc == mqs_ok {
            records.extend_from_slice(raw.record());
        }
        rc
    }

    /// Frees what the library stored in the session's image and process
    /// infos (`mqs_destroy_process_info`, `mqs_destroy_image_info`).
    pub fn destroy_infos(&self, s: &mut Session<'_>) {
        if !s.process_info.is_null() {
            if let Some(f) = self.lib.entry.destroy_process_info {
                // SAFETY: the pointer is what the library gave put_process_info.
                unsafe { f(s.process_info) };
            }
            s.process_info = std::ptr::null_mut();
        }
        if !s.image_info.is_null() {
            if let Some(f) = self.lib.entry.destroy_image_info {
                // SAFETY: the pointer is what the library gave put_image_info.
                unsafe { f(s.image_info) };
            }
            s.image_info = std::ptr::null_mut();
        }
    }
}
