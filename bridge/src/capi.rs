//! The C API declared in `include/mpiq.h`: a host describes each target with
//! a table of callbacks, and gets the dump back as a string.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::options::DumpOptions;
use crate::snapshot::model::ThreadStack;
use crate::target::{ByteOrder, ProcessDescription, Target, TargetError, TypeId, TypeSizes};
use crate::{collect_all, render, DumpError};

/// `MPIQ_API_VERSION`. Version 2 added `identity`, version 3 `stacks`,
/// version 4 `frame_value`, version 5 `live`; tables of versions 1 to 4
/// (which end before them) are still accepted.
pub const API_VERSION: u32 = 5;
/// The oldest `api_version` a table may have.
const OLDEST_API_VERSION: u32 = 1;

const MPIQ_OK: c_int = 0;
const MPIQ_NOT_FOUND: c_int = 1;
const MPIQ_INTERRUPTED: c_int = 3;

const DUMP_OK: c_int = 0;
const DUMP_USAGE: c_int = 1;
const DUMP_FAILED: c_int = 2;
const DUMP_INTERRUPTED: c_int = 3;

/// `mpiq_type_sizes`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct mpiq_type_sizes {
    pub short_size: i32,
    pub int_size: i32,
    pub long_size: i32,
    pub long_long_size: i32,
    pub pointer_size: i32,
}

/// `mpiq_target`: one target process as a table of callbacks.
#[repr(C)]
#[allow(missing_docs)]
pub struct mpiq_target {
    pub api_version: u32,
    pub ctx: *mut c_void,
    pub read_memory: Option<unsafe extern "C" fn(*mut c_void, u64, u64, *mut c_void) -> c_int>,
    pub find_symbol: Option<unsafe extern "C" fn(*mut c_void, *const c_char, *mut u64) -> c_int>,
    pub find_function: Option<unsafe extern "C" fn(*mut c_void, *const c_char, *mut u64) -> c_int>,
    pub find_type: Option<unsafe extern "C" fn(*mut c_void, *const c_char, *mut u64) -> c_int>,
    pub field_offset: Option<unsafe extern "C" fn(*mut c_void, u64, *const c_char, *mut u64) -> c_int>,
    pub size_of: Option<unsafe extern "C" fn(*mut c_void, u64, *mut u64) -> c_int>,
    pub type_sizes: Option<unsafe extern "C" fn(*mut c_void, *mut mpiq_type_sizes) -> c_int>,
    pub byte_order: Option<unsafe extern "C" fn(*mut c_void, *mut i32) -> c_int>,
    pub world_rank: Option<unsafe extern "C" fn(*mut c_void, *mut i32) -> c_int>,
    pub pid: i64,
    pub executable: *const c_char,
    /// Since version 2; NULL: no identity (nothing kept between dumps).
    pub identity: Option<unsafe extern "C" fn(*mut c_void, *mut c_char, u64) -> c_int>,
    /// Since version 3; NULL: no stacks.
    pub stacks: Option<unsafe extern "C" fn(*mut c_void, *mut *const c_char) -> c_int>,
    /// Since version 4; NULL: no values of frames. Names are passed as
    /// they are: a `$` name is a register of the frame (`$sp`, `$pc`,
    /// `$rbx`, …: [`Target::frame_value`]), which the host answers or not.
    pub frame_value: Option<unsafe extern "C" fn(*mut c_void, u64, u32, *const c_char, *mut u64) -> c_int>,
    /// Since version 5: 1 if `pid` is a live process this host holds
    /// stopped (its Python frames are then read by pid), else 0.
    pub live: i32,
}

/// Room for an identity, NUL included.
const IDENTITY_MAX: usize = 1024;

thread_local! {
    /// The message a callback set with `mpiq_set_error` before failing.
    static LAST_ERROR: RefCell<Option<String>> = const { RefCell::new(None) };
}

fn take_error(what: &str) -> String {
    LAST_ERROR
        .with(|e| e.borrow_mut().take())
        .unwrap_or_else(|| format!("the host could not {what}"))
}

/// A `Target` over a checked `mpiq_target` table.
struct CTarget<'a> {
    t: &'a mpiq_target,
    desc: ProcessDescription,
}

/// A callback's status as a lookup result.
fn lookup<T>(rc: c_int, value: T, what: &str) -> Result<Option<T>, TargetError> {
    match rc {
        MPIQ_OK => Ok(Some(value)),
        MPIQ_NOT_FOUND => Ok(None),
        MPIQ_INTERRUPTED => Err(TargetError::Interrupted),
        _ => Err(TargetError::Host(take_error(what))),
    }
}

/// Calls a table entry that `check` proved non-NULL.
macro_rules! call {
    ($self:ident . $f:ident ( $($arg:expr),* )) => {{
        let f = $self.t.$f.expect("checked non-NULL in check()");
        // SAFETY: the host promised (mpiq.h) a valid callback for its ctx
        // that does not unwind; the arguments are valid for the call.
        unsafe { f($self.t.ctx, $($arg),*) }
    }};
}

impl Target for CTarget<'_> {
    fn describe(&self) -> ProcessDescription {
        self.desc.clone()
    }

    fn read_memory(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        let rc = call!(self.read_memory(addr, buf.len() as u64, buf.as_mut_ptr().cast()));
        match rc {
            MPIQ_OK => Ok(()),
            MPIQ_INTERRUPTED => Err(TargetError::Interrupted),
            _ => Err(TargetError::Unreadable {
                addr,
                len: buf.len() as u64,
                reason: take_error("read memory"),
            }),
        }
    }

    fn find_symbol(&mut self, name: &str) -> Result<Option<u64>, TargetError> {
        let Ok(c) = CString::new(name) else { return Ok(None) };
        let mut addr = 0u64;
        let rc = call!(self.find_symbol(c.as_ptr(), &mut addr));
        lookup(rc, addr, &format!("look up symbol {name}"))
    }

    fn find_function(&mut self, name: &str) -> Result<Option<u64>, TargetError> {
        let Ok(c) = CString::new(name) else { return Ok(None) };
        let mut addr = 0u64;
        let rc = call!(self.find_function(c.as_ptr(), &mut addr));
        lookup(rc, addr, &format!("look up function {name}"))
    }

    fn find_type(&mut self, name: &str) -> Result<Option<TypeId>, TargetError> {
        let Ok(c) = CString::new(name) else { return Ok(None) };
        let mut ty = 0u64;
        let rc = call!(self.find_type(c.as_ptr(), &mut ty));
        lookup(rc, TypeId(ty), &format!("look up type {name}"))
    }

    fn field_offset(&mut self, ty: TypeId, field: &str) -> Result<Option<u64>, TargetError> {
        let Ok(c) = CString::new(field) else { return Ok(None) };
        let mut off = 0u64;
        let rc = call!(self.field_offset(ty.0, c.as_ptr(), &mut off));
        lookup(rc, off, &format!("find field {field}"))
    }

    fn size_of(&mut self, ty: TypeId) -> Result<Option<u64>, TargetError> {
        let mut n = 0u64;
        let rc = call!(self.size_of(ty.0, &mut n));
        lookup(rc, n, "find the size of a type")
    }

    fn type_sizes(&mut self) -> Result<TypeSizes, TargetError> {
        let mut s = mpiq_type_sizes::default();
        let rc = call!(self.type_sizes(&mut s));
        lookup(rc, s, "find the sizes of basic types")?
            .map(|s| TypeSizes {
                short: s.short_size,
                int: s.int_size,
                long: s.long_size,
                long_long: s.long_long_size,
                pointer: s.pointer_size,
            })
            .ok_or_else(|| TargetError::Host("the host does not know the sizes of basic types".into()))
    }

    fn byte_order(&mut self) -> ByteOrder {
        let mut big = 0i32;
        match call!(self.byte_order(&mut big)) {
            MPIQ_OK if big != 0 => ByteOrder::Big,
            MPIQ_OK => ByteOrder::Little,
            _ => ByteOrder::host(),
        }
    }

    fn world_rank(&mut self) -> Option<i32> {
        let mut r = -1i32;
        (call!(self.world_rank(&mut r)) == MPIQ_OK && r >= 0).then_some(r)
    }

    fn identity(&mut self) -> Option<String> {
        // A version 1 table ends before the field.
        if self.t.api_version < 2 {
            return None;
        }
        let f = self.t.identity?;
        let mut buf = vec![0u8; IDENTITY_MAX];
        // SAFETY: the host promised (mpiq.h) a callback that writes at most
        // `len` bytes, NUL included, into `buf`, and does not unwind.
        let rc = unsafe { f(self.t.ctx, buf.as_mut_ptr().cast(), IDENTITY_MAX as u64) };
        if rc != MPIQ_OK {
            return None;
        }
        let text = CStr::from_bytes_until_nul(&buf).ok()?.to_string_lossy().into_owned();
        (!text.is_empty()).then_some(text)
    }

    fn stacks(&mut self) -> Result<Option<Vec<ThreadStack>>, TargetError> {
        // Tables before version 3 end before the field.
        let Some(f) = self.t.stacks.filter(|_| self.t.api_version >= 3) else {
            return Ok(None);
        };
        let mut json: *const c_char = std::ptr::null();
        // SAFETY: the host promised (mpiq.h) a callback that sets `json` to
        // NULL or a NUL-terminated string it keeps until its next callback,
        // and does not unwind.
        let rc = unsafe { f(self.t.ctx, &mut json) };
        match rc {
            MPIQ_OK if !json.is_null() => {
                // SAFETY: as above: a NUL-terminated string, alive now.
                let text = unsafe { CStr::from_ptr(json) }.to_string_lossy();
                serde_json::from_str(&text)
                    .map(Some)
                    .map_err(|e| TargetError::Host(format!("the host's call stacks are not valid JSON: {e}")))
            }
            MPIQ_OK | MPIQ_NOT_FOUND => Ok(None),
            MPIQ_INTERRUPTED => Err(TargetError::Interrupted),
            _ => Err(TargetError::Host(take_error("read the call stacks"))),
        }
    }

    fn frame_value(&mut self, thread: u64, frame: u32, name: &str) -> Result<Option<u64>, TargetError> {
        // Tables before version 4 end before the field.
        let Some(f) = self.t.frame_value.filter(|_| self.t.api_version >= 4) else {
            return Ok(None);
        };
        let Ok(c) = CString::new(name) else { return Ok(None) };
        let mut value = 0u64;
        // SAFETY: the host promised (mpiq.h) a callback that reads the
        // NUL-terminated `c` and writes one u64 to `value`, both alive for
        // the call, and does not unwind.
        let rc = unsafe { f(self.t.ctx, thread, frame, c.as_ptr(), &mut value) };
        lookup(rc, value, &format!("read {name} in frame {frame} of thread {thread}"))
    }

    /// Read by pid (`target::python`), only of a process the host says is
    /// live and stopped: a core file's pid may be another process's now.
    fn python_stacks(&mut self) -> Result<Option<crate::snapshot::model::PythonStacks>, TargetError> {
        // Tables before version 5 end before the field.
        if self.t.api_version < 5 || self.t.live != 1 {
            return Ok(None);
        }
        Ok(self.desc.pid.and_then(crate::target::python::read_live))
    }
}

/// What is wrong with a host's callback table.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
enum TableError {
    /// A version this library does not implement.
    #[error("mpiq_target.api_version is {0}, this library implements {OLDEST_API_VERSION} to {API_VERSION}")]
    Version(u32),
    /// A callback every version needs is NULL.
    #[error("mpiq_target.{0} is NULL")]
    Missing(&'static str),
}

/// Checks a table.
fn check(t: &mpiq_target) -> Result<(), TableError> {
    if !(OLDEST_API_VERSION..=API_VERSION).contains(&t.api_version) {
        return Err(TableError::Version(t.api_version));
    }
    let missing = [
        ("read_memory", t.read_memory.is_none()),
        ("find_symbol", t.find_symbol.is_none()),
        ("find_function", t.find_function.is_none()),
        ("find_type", t.find_type.is_none()),
        ("field_offset", t.field_offset.is_none()),
        ("size_of", t.size_of.is_none()),
        ("type_sizes", t.type_sizes.is_none()),
        ("byte_order", t.byte_order.is_none()),
        ("world_rank", t.world_rank.is_none()),
    ];
    match missing.iter().find(|(_, m)| *m) {
        Some((name, _)) => Err(TableError::Missing(name)),
        None => Ok(()),
    }
}

fn to_c(s: String) -> *mut c_char {
    let s = s.replace('\0', " ");
    CString::new(s).map_or(std::ptr::null_mut(), CString::into_raw)
}

fn dump_inner(targets: &[&mpiq_target], args: &str) -> (c_int, String) {
    let opts = match DumpOptions::parse_line(args) {
        Ok(o) => o,
        Err(e) => return (DUMP_USAGE, e.to_string()),
    };
    let mut adapters = Vec::with_capacity(targets.len());
    for (i, t) in targets.iter().enumerate() {
        if let Err(e) = check(t) {
            return (DUMP_USAGE, format!("target {i}: {e}"));
        }
        let executable = if t.executable.is_null() {
            String::new()
        } else {
            // SAFETY: the host passes NULL or a NUL-terminated string (mpiq.h).
            unsafe { CStr::from_ptr(t.executable) }.to_string_lossy().into_owned()
        };
        adapters.push(CTarget {
            t,
            desc: ProcessDescription {
                pid: u32::try_from(t.pid).ok(),
                executable,
            },
        });
    }
    let mut refs: Vec<&mut dyn Target> = adapters.iter_mut().map(|a| a as &mut dyn Target).collect();
    match collect_all(&mut refs, &opts) {
        Ok(snapshot) => (DUMP_OK, render(&snapshot, &opts)),
        Err(e @ DumpError::Interrupted) => (DUMP_INTERRUPTED, e.to_string()),
        Err(e) => (DUMP_FAILED, e.to_string()),
    }
}

/// `mpiq_dump`: see `include/mpiq.h`.
///
/// # Safety
/// `targets` points at `count` valid `mpiq_target` pointers (or `count` is
/// 0), `args` is NULL or a NUL-terminated string, and `output` is a valid
/// out-pointer.
#[no_mangle]
pub unsafe extern "C" fn mpiq_dump(
    targets: *const *const mpiq_target,
    count: usize,
    args: *const c_char,
    output: *mut *mut c_char,
) -> c_int {
    let result = catch_unwind(AssertUnwindSafe(|| {
        if targets.is_null() && count > 0 {
            return (DUMP_USAGE, "targets is NULL".to_string());
        }
        let args = if args.is_null() {
            String::new()
        } else {
            // SAFETY: guaranteed by the caller.
            unsafe { CStr::from_ptr(args) }.to_string_lossy().into_owned()
        };
        let mut ts = Vec::with_capacity(count);
        for i in 0..count {
            // SAFETY: targets points at `count` pointers (caller).
            let p = unsafe { *targets.add(i) };
            if p.is_null() {
                return (DUMP_USAGE, format!("target {i} is NULL"));
            }
            // SAFETY: non-NULL and valid for the call (caller).
            ts.push(unsafe { &*p });
        }
        if ts.is_empty() {
            return (DUMP_USAGE, "no target to dump".to_string());
        }
        dump_inner(&ts, &args)
    }));
    let (rc, text) = result.unwrap_or_else(|_| (DUMP_FAILED, "mpiq: internal error (panic) during the dump".into()));
    if !output.is_null() {
        // SAFETY: output is a valid out-pointer (caller).
        unsafe { output.write(to_c(text)) };
    }
    rc
}

/// `mpiq_parse_targets`: see `include/mpiq.h`.
///
/// # Safety
/// `spec` is NULL or a NUL-terminated string, and `output` is a valid
/// out-pointer (or NULL).
#[no_mangle]
pub unsafe extern "C" fn mpiq_parse_targets(spec: *const c_char, output: *mut *mut c_char) -> c_int {
    let result = catch_unwind(AssertUnwindSafe(|| {
        let spec = if spec.is_null() {
            String::new()
        } else {
            // SAFETY: guaranteed by the caller.
            unsafe { CStr::from_ptr(spec) }.to_string_lossy().into_owned()
        };
        match crate::options::targets::parse_targets(&spec) {
            Ok(selection) => (DUMP_OK, selection.to_line()),
            Err(e) => (DUMP_USAGE, e.to_string()),
        }
    }));
    let (rc, text) = result.unwrap_or_else(|_| (DUMP_FAILED, "mpiq: internal error (panic) in --targets".into()));
    if !output.is_null() {
        // SAFETY: output is a valid out-pointer (caller).
        unsafe { output.write(to_c(text)) };
    }
    rc
}

/// `mpiq_set_error`: see `include/mpiq.h`.
///
/// # Safety
/// `message` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn mpiq_set_error(message: *const c_char) {
    let _ = catch_unwind(|| {
        let text = if message.is_null() {
            None
        } else {
            // SAFETY: guaranteed by the caller.
            Some(unsafe { CStr::from_ptr(message) }.to_string_lossy().into_owned())
        };
        LAST_ERROR.with(|e| *e.borrow_mut() = text);
    });
}

/// `mpiq_free`: see `include/mpiq.h`.
///
/// # Safety
/// `s` is NULL or a string returned by mpiq that was not freed yet.
#[no_mangle]
pub unsafe extern "C" fn mpiq_free(s: *mut c_char) {
    if !s.is_null() {
        // SAFETY: s came from CString::into_raw in this library.
        drop(unsafe { CString::from_raw(s) });
    }
}

static HELP_C: std::sync::OnceLock<CString> = std::sync::OnceLock::new();

/// `mpiq_help`: see `include/mpiq.h`.
#[no_mangle]
pub extern "C" fn mpiq_help() -> *const c_char {
    HELP_C
        .get_or_init(|| CString::new(crate::options::HELP.as_str()).unwrap_or_default())
        .as_ptr()
}

/// `mpiq_version`: see `include/mpiq.h`.
#[no_mangle]
pub extern "C" fn mpiq_version() -> *const c_char {
    const V: &str = concat!(env!("CARGO_PKG_VERSION"), "\0");
    V.as_ptr().cast()
}

/// `mpiq_api_version`: see `include/mpiq.h`.
#[no_mangle]
pub extern "C" fn mpiq_api_version() -> u32 {
    API_VERSION
}
