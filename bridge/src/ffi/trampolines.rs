//! One `extern "C"` function per MQD callback. Each catches panics and turns
//! every failure into an error code (see [`code`]); a NULL out-pointer is
//! never written through.

use std::alloc::{alloc, dealloc, Layout};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicI64, Ordering};

use super::abi::*;
use super::session::{code, Handle, Session, TypeHandle};
use crate::target::{ByteOrder, TargetError};

/// The basic callbacks, handed to every library once when it is loaded.
pub(crate) static BASIC_CALLBACKS: mqs_basic_callbacks = mqs_basic_callbacks {
    mqs_malloc_fp: cb_malloc,
    mqs_free_fp: cb_free,
    mqs_dprints_fp: cb_dprints,
    mqs_errorstring_fp: cb_errorstring,
    mqs_put_image_info_fp: cb_put_image_info,
    mqs_get_image_info_fp: cb_get_image_info,
    mqs_put_process_info_fp: cb_put_process_info,
    mqs_get_process_info_fp: cb_get_process_info,
};

/// The image callbacks (the same for every image).
pub(crate) static IMAGE_CALLBACKS: mqs_image_callbacks = mqs_image_callbacks {
    mqs_get_type_sizes_fp: cb_get_type_sizes,
    mqs_find_function_fp: cb_find_function,
    mqs_find_symbol_fp: cb_find_symbol,
    mqs_find_type_fp: cb_find_type,
    mqs_field_offset_fp: cb_field_offset,
    mqs_sizeof_fp: cb_sizeof,
};

/// The process callbacks (the same for every process).
pub(crate) static PROCESS_CALLBACKS: mqs_process_callbacks = mqs_process_callbacks {
    mqs_get_global_rank_fp: cb_get_global_rank,
    mqs_get_image_fp: cb_get_image,
    mqs_fetch_data_fp: cb_fetch_data,
    mqs_target_to_host_fp: cb_target_to_host,
};

/// Blocks the libraries hold from `mqs_malloc` (for leak checks).
pub(crate) static LIVE_ALLOCATIONS: AtomicI64 = AtomicI64::new(0);

/// Header in front of each `mqs_malloc` block: the block's total size.
const HEADER: usize = 16;

/// Runs `f` on the session behind `handle`, returning `fallback` on a panic
/// (recorded in the session when it can be reached).
fn with_session<R>(handle: *mut c_void, fallback: R, what: &str, f: impl FnOnce(&mut Session<'_>) -> R) -> R {
    if handle.is_null() {
        return fallback;
    }
    // SAFETY: every handle mpiq gives a library is a `Handle` or `TypeHandle`
    // whose `session` points at a live boxed `Session`: sessions outlive
    // every call the library makes with their handles (collect.rs tears the
    // library's state down before dropping the session), and calls are
    // serialized by the library lock, so no other reference is active.
    let session = unsafe { &mut *(handle as *mut Session<'_>) };
    match catch_unwind(AssertUnwindSafe(|| f(session))) {
        Ok(r) => r,
        Err(_) => {
            // SAFETY: as above; the panicking borrow has ended.
            let session = unsafe { &mut *(handle as *mut Session<'_>) };
            session.internal_error = Some(format!("internal error (panic) in the {what} callback"));
            fallback
        }
    }
}

/// Whether a callback that asks the target must fail without asking: after
/// an interruption, or once the library made too many callbacks. (Callbacks
/// that only hand back the library's own info pointers keep working: the
/// library dereferences what they return.)
fn stopped(s: &mut Session<'_>) -> bool {
    if s.interrupted || s.limit_hit || s.too_many_failures {
        return true;
    }
    s.callbacks += 1;
    if s.callbacks > s.max_callbacks {
        s.limit_hit = true;
        return true;
    }
    false
}

/// The code a callback returns once [`stopped`]: why it stopped.
fn stop_code(s: &Session<'_>) -> c_int {
    if s.interrupted {
        code::INTERRUPTED
    } else {
        code::LIMIT
    }
}

/// The session behind an `mqs_image *` / `mqs_process *`.
fn session_of<T>(handle: *mut T) -> *mut c_void {
    if handle.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: mpiq's image and process handles are `Handle`s (see Session::new).
    unsafe { (*(handle as *const Handle)).session }
}

/// A callback's C string argument as UTF-8, or None if NULL or not UTF-8.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string valid for the call.
unsafe fn arg_str<'a>(p: *const c_char) -> Option<&'a str> {
    if p.is_null() {
        return None;
    }
    // SAFETY: guaranteed by the caller.
    unsafe { CStr::from_ptr(p) }.to_str().ok()
}

unsafe extern "C" fn cb_malloc(size: usize) -> *mut c_void {
    let Some(total) = size.checked_add(HEADER) else {
        return std::ptr::null_mut();
    };
    let Ok(layout) = Layout::from_size_align(total, HEADER) else {
        return std::ptr::null_mut();
    };
    // SAFETY: layout has a non-zero size (at least HEADER).
    let p = unsafe { alloc(layout) };
    if p.is_null() {
        return p.cast();
    }
    // SAFETY: p is valid for `total` >= HEADER bytes and 16-byte aligned.
    unsafe { (p as *mut usize).write(total) };
    LIVE_ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    // SAFETY: HEADER < total, so the result is inside the block.
    unsafe { p.add(HEADER).cast() }
}

unsafe extern "C" fn cb_free(buf: *mut c_void) {
    if buf.is_null() {
        return;
    }
    // SAFETY: buf came from cb_malloc, so HEADER bytes before it is the block
    // start holding its total size, with which it was allocated.
    unsafe {
        let p = (buf as *mut u8).sub(HEADER);
        let total = (p as *const usize).read();
        dealloc(p, Layout::from_size_align_unchecked(total, HEADER));
    }
    LIVE_ALLOCATIONS.fetch_sub(1, Ordering::Relaxed);
}

unsafe extern "C" fn cb_dprints(text: *const c_char) {
    let _ = catch_unwind(|| {
        if std::env::var_os("MPIQ_DEBUG_DLL").is_some() {
            // SAFETY: the library passes a NUL-terminated string or NULL.
            if let Some(t) = unsafe { arg_str(text) } {
                eprint!("[mqs] {t}");
            }
        }
    });
}

unsafe extern "C" fn cb_errorstring(c: c_int) -> *mut c_char {
    let text: &'static CStr = match c {
        code::NOT_FOUND => c"mpiq: not found in the target's symbols or debug information",
        code::UNREADABLE => c"mpiq: target memory could not be read",
        code::INTERRUPTED => c"mpiq: interrupted",
        code::HOST => c"mpiq: the debugger failed to answer",
        code::INTERNAL => c"mpiq: internal error",
        code::BAD_ARGUMENT => c"mpiq: invalid argument from the debug library",
        code::LIMIT => c"mpiq: the dump reached a limit (the target's lists may be corrupt)",
        _ => c"mpiq: unknown error code",
    };
    // The libraries declare the result `char *` but only read it.
    text.as_ptr() as *mut c_char
}

unsafe extern "C" fn cb_put_image_info(image: *mut mqs_image, info: *mut mqs_image_info) {
    with_session(session_of(image), (), "put_image_info", |s| s.image_info = info)
}

unsafe extern "C" fn cb_get_image_info(image: *mut mqs_image) -> *mut mqs_image_info {
    with_session(session_of(image), std::ptr::null_mut(), "get_image_info", |s| {
        s.image_info
    })
}

unsafe extern "C" fn cb_put_process_info(process: *mut mqs_process, info: *mut mqs_process_info) {
    with_session(session_of(process), (), "put_process_info", |s| s.process_info = info)
}

unsafe extern "C" fn cb_get_process_info(process: *mut mqs_process) -> *mut mqs_process_info {
    with_session(session_of(process), std::ptr::null_mut(), "get_process_info", |s| {
        s.process_info
    })
}

unsafe extern "C" fn cb_get_type_sizes(process: *mut mqs_process, sizes: *mut mqs_target_type_sizes) {
    if sizes.is_null() {
        return;
    }
    with_session(session_of(process), (), "get_type_sizes", |s| {
        let t = match if stopped(s) {
            Ok(crate::target::TypeSizes::LP64)
        } else {
            s.target.type_sizes()
        } {
            Ok(t) => t,
            Err(e) => {
                s.fail(e);
                crate::target::TypeSizes::LP64
            }
        };
        // SAFETY: sizes is non-NULL and points at the library's struct, which
        // has at least the five common fields; only those are written.
        unsafe {
            (*sizes).short_size = t.short;
            (*sizes).int_size = t.int;
            (*sizes).long_size = t.long;
            (*sizes).long_long_size = t.long_long;
            (*sizes).pointer_size = t.pointer;
        }
    })
}

fn lookup_address(
    image: *mut mqs_image,
    name: *mut c_char,
    addr: *mut mqs_taddr_t,
    what: &str,
    f: fn(&mut Session<'_>, &str) -> Result<Option<u64>, TargetError>,
) -> c_int {
    with_session(session_of(image), code::INTERNAL, what, |s| {
        if stopped(s) {
            return stop_code(s);
        }
        // SAFETY: the library passes a NUL-terminated name.
        let Some(name) = (unsafe { arg_str(name) }) else {
            return code::BAD_ARGUMENT;
        };
        match f(s, name) {
            Ok(Some(a)) => {
                if !addr.is_null() {
                    // SAFETY: non-NULL out-pointer supplied by the library.
                    unsafe { addr.write(a as mqs_taddr_t) };
                }
                mqs_ok
            }
            Ok(None) => code::NOT_FOUND,
            Err(e) => s.fail(e),
        }
    })
}

unsafe extern "C" fn cb_find_function(
    image: *mut mqs_image,
    name: *mut c_char,
    _lang: mqs_lang_code,
    addr: *mut mqs_taddr_t,
) -> c_int {
    lookup_address(image, name, addr, "find_function", |s, n| s.target.find_function(n))
}

unsafe extern "C" fn cb_find_symbol(image: *mut mqs_image, name: *mut c_char, addr: *mut mqs_taddr_t) -> c_int {
    lookup_address(image, name, addr, "find_symbol", |s, n| s.target.find_symbol(n))
}

unsafe extern "C" fn cb_find_type(image: *mut mqs_image, name: *mut c_char, _lang: mqs_lang_code) -> *mut mqs_type {
    with_session(session_of(image), std::ptr::null_mut(), "find_type", |s| {
        if stopped(s) {
            return std::ptr::null_mut();
        }
        // SAFETY: the library passes a NUL-terminated name.
        let Some(name) = (unsafe { arg_str(name) }) else {
            return std::ptr::null_mut();
        };
        match s.target.find_type(name) {
            Ok(Some(id)) => s.type_handle(id),
            Ok(None) => {
                if !s.missing_types.iter().any(|t| t == name) {
                    s.missing_types.push(name.to_string());
                }
                std::ptr::null_mut()
            }
            Err(e) => {
                s.fail(e);
                std::ptr::null_mut()
            }
        }
    })
}

/// The session and type id behind an `mqs_type *`.
fn type_of(ty: *mut mqs_type) -> Option<(*mut c_void, crate::target::TypeId)> {
    if ty.is_null() {
        return None;
    }
    // SAFETY: mpiq's type handles are boxed `TypeHandle`s owned by the session.
    let h = unsafe { &*(ty as *const TypeHandle) };
    Some((h.session, h.id))
}

unsafe extern "C" fn cb_field_offset(ty: *mut mqs_type, field: *mut c_char) -> c_int {
    let Some((session, id)) = type_of(ty) else {
        return -1;
    };
    with_session(session, -1, "field_offset", |s| {
        if stopped(s) {
            return -1;
        }
        // SAFETY: the library passes a NUL-terminated field name.
        let Some(field) = (unsafe { arg_str(field) }) else {
            return -1;
        };
        match s.target.field_offset(id, field) {
            Ok(Some(off)) => c_int::try_from(off).unwrap_or(-1),
            Ok(None) => -1,
            Err(e) => {
                s.fail(e);
                -1
            }
        }
    })
}

unsafe extern "C" fn cb_sizeof(ty: *mut mqs_type) -> c_int {
    let Some((session, id)) = type_of(ty) else {
        return 0;
    };
    with_session(session, 0, "sizeof", |s| {
        match if stopped(s) { Ok(None) } else { s.target.size_of(id) } {
            Ok(Some(n)) => c_int::try_from(n).unwrap_or(0),
            Ok(None) => 0,
            Err(e) => {
                s.fail(e);
                0
            }
        }
    })
}

unsafe extern "C" fn cb_get_global_rank(process: *mut mqs_process) -> c_int {
    with_session(session_of(process), MQS_INVALID_PROCESS, "get_global_rank", |s| {
        s.world_rank.unwrap_or(MQS_INVALID_PROCESS)
    })
}

unsafe extern "C" fn cb_get_image(process: *mut mqs_process) -> *mut mqs_image {
    with_session(session_of(process), std::ptr::null_mut(), "get_image", |s| {
        s.image_ptr()
    })
}

unsafe extern "C" fn cb_fetch_data(
    process: *mut mqs_process,
    addr: mqs_taddr_t,
    size: c_int,
    buf: *mut c_void,
) -> c_int {
    let session = session_of(process);
    if session.is_null() {
        return code::BAD_ARGUMENT;
    }
    with_session(session, code::INTERNAL, "fetch_data", |s| {
        if stopped(s) {
            return stop_code(s);
        }
        s.fetch_calls += 1;
        let Ok(len) = usize::try_from(size) else {
            return code::BAD_ARGUMENT;
        };
        if len == 0 {
            return mqs_ok;
        }
        if buf.is_null() {
            return code::BAD_ARGUMENT;
        }
        // SAFETY: the library gives a buffer of `size` bytes to fill.
        let out = unsafe { std::slice::from_raw_parts_mut(buf as *mut u8, len) };
        match s.cache.read(&mut *s.target, addr, out) {
            Ok(()) => mqs_ok,
            Err(e) => s.fail(e),
        }
    })
}

unsafe extern "C" fn cb_target_to_host(
    process: *mut mqs_process,
    indata: *const c_void,
    outdata: *mut c_void,
    size: c_int,
) {
    let Ok(len) = usize::try_from(size) else {
        return;
    };
    if indata.is_null() || outdata.is_null() || len == 0 {
        return;
    }
    let order = with_session(session_of(process), ByteOrder::host(), "target_to_host", |s| {
        s.byte_order
    });
    // SAFETY: the library passes `size`-byte buffers; they may be the same
    // buffer, so copy with memmove semantics before any reversal.
    unsafe {
        std::ptr::copy(indata as *const u8, outdata as *mut u8, len);
        if order != ByteOrder::host() {
            std::slice::from_raw_parts_mut(outdata as *mut u8, len).reverse();
        }
    }
}

/// Calls the callbacks as a library would, on a fake target, to test them
/// without a debug library.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::CallbackLimits;
    use crate::target::*;

    struct Fake;
    impl Target for Fake {
        fn describe(&self) -> ProcessDescription {
            ProcessDescription::default()
        }
        fn read_memory(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
            if addr + buf.len() as u64 > 0x1000 {
                return Err(TargetError::Unreadable {
                    addr,
                    len: buf.len() as u64,
                    reason: "no".into(),
                });
            }
            buf.fill(0xab);
            Ok(())
        }
        fn find_symbol(&mut self, name: &str) -> Result<Option<u64>, TargetError> {
            Ok((name == "sym").then_some(0x1234))
        }
        fn find_function(&mut self, name: &str) -> Result<Option<u64>, TargetError> {
            if name == "boom" {
                panic!("boom");
            }
            Ok((name == "fn").then_some(0x4000))
        }
        fn find_type(&mut self, name: &str) -> Result<Option<TypeId>, TargetError> {
            Ok((name == "struct S").then_some(TypeId(7)))
        }
        fn field_offset(&mut self, ty: TypeId, f: &str) -> Result<Option<u64>, TargetError> {
            assert_eq!(ty, TypeId(7));
            Ok((f == "b").then_some(8))
        }
        fn size_of(&mut self, _: TypeId) -> Result<Option<u64>, TargetError> {
            Ok(Some(24))
        }
        fn type_sizes(&mut self) -> Result<TypeSizes, TargetError> {
            Ok(TypeSizes::LP64)
        }
        fn byte_order(&mut self) -> ByteOrder {
            ByteOrder::Big
        }
    }

    #[test]
    fn callbacks_answer_through_the_target() {
        let mut fake = Fake;
        let mut s = Session::new(&mut fake, Some(3), CallbackLimits::default());
        let image = s.image_ptr();
        let process = s.process_ptr();
        // SAFETY: handles of a live session; strings are NUL-terminated.
        unsafe {
            let mut addr: mqs_taddr_t = 0;
            assert_eq!(cb_find_symbol(image, c"sym".as_ptr() as *mut _, &mut addr), mqs_ok);
            assert_eq!(addr, 0x1234);
            assert_eq!(
                cb_find_symbol(image, c"nope".as_ptr() as *mut _, &mut addr),
                code::NOT_FOUND
            );
            // NULL out-pointer is honoured.
            assert_eq!(
                cb_find_function(image, c"fn".as_ptr() as *mut _, mqs_lang_c, std::ptr::null_mut()),
                mqs_ok
            );
            let ty = cb_find_type(image, c"struct S".as_ptr() as *mut _, mqs_lang_c);
            assert!(!ty.is_null());
            assert_eq!(
                ty,
                cb_find_type(image, c"struct S".as_ptr() as *mut _, mqs_lang_c),
                "one handle per type"
            );
            assert_eq!(cb_field_offset(ty, c"b".as_ptr() as *mut _), 8);
            assert_eq!(cb_field_offset(ty, c"zz".as_ptr() as *mut _), -1);
            assert_eq!(cb_sizeof(ty), 24);
            assert!(cb_find_type(image, c"T".as_ptr() as *mut _, mqs_lang_c).is_null());
            assert_eq!(cb_get_global_rank(process), 3);
            assert_eq!(cb_get_image(process), image);
            let mut sizes = mqs_target_type_sizes::default();
            cb_get_type_sizes(process, &mut sizes);
            assert_eq!((sizes.short_size, sizes.pointer_size), (2, 8));
            let mut buf = [0u8; 4];
            assert_eq!(cb_fetch_data(process, 0x10, 4, buf.as_mut_ptr().cast()), mqs_ok);
            assert_eq!(buf, [0xab; 4]);
            assert_eq!(
                cb_fetch_data(process, 0x10, -4, buf.as_mut_ptr().cast()),
                code::BAD_ARGUMENT
            );
            // Big-endian target: bytes are reversed.
            let input = 0x0102_0304u32.to_be_bytes();
            let mut out = 0u32;
            cb_target_to_host(process, input.as_ptr().cast(), (&mut out as *mut u32).cast(), 4);
            assert_eq!(out, 0x0102_0304);
            // Info association.
            let marker = 0x5555usize as *mut mqs_image_info;
            cb_put_image_info(image, marker);
            assert_eq!(cb_get_image_info(image), marker);
            // A panic in the target becomes an error code, recorded.
            assert_eq!(
                cb_find_function(image, c"boom".as_ptr() as *mut _, mqs_lang_c, &mut addr),
                code::INTERNAL
            );
            assert!(s.internal_error.as_deref().unwrap().contains("find_function"));
            // Unreadable memory: error code and the detail kept.
            assert_eq!(
                cb_fetch_data(process, 0x2000, 8, buf.as_mut_ptr().cast()),
                code::UNREADABLE
            );
            assert!(matches!(s.error, Some(TargetError::Unreadable { addr: 0x2000, .. })));
        }
    }

    #[test]
    fn malloc_and_free_balance() {
        let before = LIVE_ALLOCATIONS.load(Ordering::Relaxed);
        // SAFETY: blocks from cb_malloc are freed with cb_free once.
        unsafe {
            let p = cb_malloc(100) as *mut u8;
            assert!(!p.is_null());
            p.write_bytes(7, 100);
            let q = cb_malloc(0);
            assert!(!q.is_null());
            cb_free(p.cast());
            cb_free(q);
            cb_free(std::ptr::null_mut());
        }
        assert_eq!(LIVE_ALLOCATIONS.load(Ordering::Relaxed), before);
    }
}
